"""Table constraints of the HMS interface: primary and foreign keys, unique, not-null, default and
check constraints (``create_table_with_constraints``, ``add_*``, ``get_*``, ``drop_constraint``).

Stored in ``KEY_CONSTRAINTS`` (one row per column of a constraint), as Hive's metastore keeps them:
informational only, never enforced on data. Checks and messages follow Hive's ObjectStore: the
table and its columns (data columns or partition keys) must exist, a table has at most one primary
key, a constraint name is unique on its table (its parent table for a foreign key), and a foreign
key must match, column names and types, the primary key or a unique constraint of the table it
references. A constraint added without a name gets one generated (``pk_...``, ``fk_...``, ``uk_...``,
``nn_...``, ``dc_...`` as Hive). Reading the constraints of a missing table gives none, as Hive.
Each call writes Hive's events (ADD_PRIMARYKEY ... ADD_CHECKCONSTRAINT, DROP_CONSTRAINT) with the
constraints as stored.
"""

from __future__ import annotations

import copy
import itertools
import time
import zlib
from collections.abc import Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AllTableConstraintsResponse,
    CheckConstraintsResponse,
    DefaultConstraintsResponse,
    ForeignKeysResponse,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
    NotNullConstraintsResponse,
    PrimaryKeysResponse,
    SQLAllTableConstraints,
    SQLCheckConstraint,
    SQLDefaultConstraint,
    SQLForeignKey,
    SQLNotNullConstraint,
    SQLPrimaryKey,
    SQLUniqueConstraint,
    UniqueConstraintsResponse,
)

from hivemesh.hive import events
from hivemesh.hive.names import DEFAULT_CATALOG, db_ref, parse_db_name
from hivemesh.metastore.base import CatalogBase, Tx
from hivemesh.metastore.schema import COLUMNS_V2, DBS, KEY_CONSTRAINTS, PARTITION_KEYS, SDS, TBLS

# Hive's MConstraint types
PRIMARY_KEY, FOREIGN_KEY, UNIQUE, NOT_NULL, DEFAULT, CHECK = range(6)
V = TypeVar("V", SQLDefaultConstraint, SQLCheckConstraint)

_KC = KEY_CONSTRAINTS.c
_PARENT = TBLS.alias("parent")
_PARENT_DB = DBS.alias("parent_db")
_CHILD = TBLS.alias("child")
_CHILD_DB = DBS.alias("child_db")
_counter = itertools.count()


def _norm(name: str | None) -> str | None:
    """Hive's normalizeIdentifier: trimmed and lower-cased (None stays None)."""
    return name.strip().lower() if name is not None else None


def _flags(c: Any) -> int:
    """ENABLE_VALIDATE_RELY of a constraint struct: enable 4, validate 2, rely 1."""
    return (4 if c.enable_cstr else 0) + (2 if c.validate_cstr else 0) + (1 if c.rely_cstr else 0)


def _unflag(value: int) -> tuple[bool, bool, bool]:
    """(enable, validate, rely) from ENABLE_VALIDATE_RELY."""
    return bool(value & 4), bool(value & 2), bool(value & 1)


def _generated_name(kind: str, *parts: str | None) -> str:
    """A new constraint name, ``<kind>_<hash of its table and columns>_<milliseconds>_<n>``."""
    digest = zlib.crc32(repr(parts).encode()) & 0xFFFFFFF
    return f"{kind}_{digest}_{int(time.time() * 1000)}_{next(_counter)}"


def _stored(c: Any, table: _Table, column: str | None, **names: Any) -> Any:
    """A copy of constraint struct ``c`` as stored: catalog, database, table and column names
    normalized, its constraint name field(s) set (``names``); what Hive's add calls hand back and
    put in their events."""
    out = copy.copy(c)
    out.catName, out.table_db, out.table_name, out.column_name = table.cat, table.db, table.name, column
    for key, value in names.items():
        setattr(out, key, value)
    return out


def _row(
    table: _Table, name: str, position: int, kind: int, column: str | None, c: Any, **extra: Any
) -> dict[str, Any]:
    """The KEY_CONSTRAINTS row of one column of constraint ``c`` on ``table`` (``extra``: further
    columns, e.g. DEFAULT_VALUE)."""
    return {
        "PARENT_TBL_ID": table.id,
        "CONSTRAINT_NAME": name,
        "POSITION": position,
        "CONSTRAINT_TYPE": kind,
        "PARENT_COLUMN_NAME": column,
        "ENABLE_VALIDATE_RELY": _flags(c),
        **extra,
    }


class _Table:
    """A table constraints are added to: its ids, qualified names and columns (name -> type)."""

    def __init__(self, row: sa.Row[*tuple[Any, ...]], columns: dict[str, str]):
        self.id: int = row.TBL_ID
        self.cat: str = row.CTLG_NAME
        self.db: str = row.DB_NAME
        self.name: str = row.TBL_NAME
        self.columns = columns


class ConstraintMixin(CatalogBase):
    """HMS constraint calls (informational constraints, as Hive keeps them)."""

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _constraint_table(conn: sa.Connection, cat: str, db: str | None, tbl: str | None) -> _Table | None:
        """The table constraints name, with its columns and partition keys; None when missing."""
        row = conn.execute(
            sa.select(
                TBLS.c.TBL_ID, TBLS.c.TBL_NAME, TBLS.c.SD_ID, DBS.c.NAME.label("DB_NAME"), DBS.c.CTLG_NAME
            )
            .select_from(TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID))
            .where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == (db or ""), TBLS.c.TBL_NAME == (tbl or ""))
        ).first()
        if row is None:
            return None
        columns: dict[str, str] = {}
        if row.SD_ID is not None:
            for name, type_ in conn.execute(
                sa.select(COLUMNS_V2.c.COLUMN_NAME, COLUMNS_V2.c.TYPE_NAME)
                .select_from(COLUMNS_V2.join(SDS, SDS.c.CD_ID == COLUMNS_V2.c.CD_ID))
                .where(SDS.c.SD_ID == row.SD_ID)
                .order_by(COLUMNS_V2.c.INTEGER_IDX)
            ):
                columns.setdefault(name.lower(), type_)
        for name, type_ in conn.execute(
            sa.select(PARTITION_KEYS.c.PKEY_NAME, PARTITION_KEYS.c.PKEY_TYPE)
            .where(PARTITION_KEYS.c.TBL_ID == row.TBL_ID)
            .order_by(PARTITION_KEYS.c.INTEGER_IDX)
        ):
            columns.setdefault(name.lower(), type_)
        return _Table(row, columns)

    def _parent(self, conn: sa.Connection, c: Any, default_cat: str) -> tuple[_Table, str | None]:
        """The table of a PK/UK/NN/default/check struct and its normalized column name;
        InvalidObjectException ("Parent table not found: t") when the table is missing."""
        cat = _norm(c.catName) or default_cat
        table = self._constraint_table(conn, cat, _norm(c.table_db), _norm(c.table_name))
        if table is None:
            raise InvalidObjectException(f"Parent table not found: {_norm(c.table_name)}")
        return table, _norm(c.column_name)

    @staticmethod
    def _require_column(table: _Table, column: str | None, side: str = "Parent") -> None:
        """InvalidObjectException ("Parent column not found: c") unless ``table`` has ``column``."""
        if column is None or column not in table.columns:
            raise InvalidObjectException(f"{side} column not found: {column}")

    @staticmethod
    def _name_taken(conn: sa.Connection, table: _Table, name: str) -> bool:
        return (
            conn.execute(
                sa.select(_KC.CONSTRAINT_NAME).where(
                    _KC.PARENT_TBL_ID == table.id, _KC.CONSTRAINT_NAME == name
                )
            ).first()
            is not None
        )

    def _checked_name(self, conn: sa.Connection, table: _Table, given: str | None) -> str:
        """``given`` normalized; InvalidObjectException ("Constraint name already exists:
        db.t.name") when ``table`` already has a constraint of that name."""
        name = _norm(given) or ""
        if self._name_taken(conn, table, name):
            raise InvalidObjectException(f"Constraint name already exists: {table.db}.{table.name}.{name}")
        return name

    @staticmethod
    def _insert(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
        if rows:
            conn.execute(
                KEY_CONSTRAINTS.insert(),
                [
                    {
                        "CHILD_TBL_ID": None,
                        "CHILD_COLUMN_NAME": None,
                        "UPDATE_RULE": None,
                        "DELETE_RULE": None,
                        "DEFAULT_VALUE": None,
                        "PARENT_COLUMN_NAME": None,
                        **r,
                    }
                    for r in rows
                ],
            )

    # ---------------------------------------------------------------- adding, inside a transaction
    def _add_primary_keys(
        self, conn: sa.Connection, pks: Sequence[SQLPrimaryKey], default_cat: str
    ) -> list[SQLPrimaryKey]:
        """A primary key (its columns in ``key_seq`` order); MetaException when the table has one."""
        return self._add_keys(conn, pks, PRIMARY_KEY, default_cat)

    def _add_unique_constraints(
        self, conn: sa.Connection, uks: Sequence[SQLUniqueConstraint], default_cat: str
    ) -> list[SQLUniqueConstraint]:
        """Unique constraints, each key's columns in ``key_seq`` order."""
        return self._add_keys(conn, uks, UNIQUE, default_cat)

    def _add_keys(self, conn: sa.Connection, keys: Sequence[Any], kind: int, default_cat: str) -> list[Any]:
        """Primary-key (``kind`` PRIMARY_KEY: ``pk_name``) or unique (``uk_name``) columns; an
        unnamed key is named once, at its first column (``key_seq`` 1)."""
        prefix, field = ("pk", "pk_name") if kind == PRIMARY_KEY else ("uk", "uk_name")
        rows, stored, name = [], [], ""
        for key in keys:
            table, column = self._parent(conn, key, default_cat)
            self._require_column(table, column)
            if kind == PRIMARY_KEY and self._constraint_names(conn, table.id, PRIMARY_KEY):
                raise MetaException(f" Primary key already exists for: {table.cat}.{table.db}.{table.name}")
            given = getattr(key, field)
            if given is None:
                if key.key_seq == 1 or not name:
                    name = _generated_name(prefix, table.db, table.name, column)
            else:
                name = self._checked_name(conn, table, given)
            rows.append(_row(table, name, key.key_seq or 1, kind, column, key))
            stored.append(_stored(key, table, column, **{field: name}))
        self._insert(conn, rows)
        return stored

    def _add_not_null_constraints(
        self, conn: sa.Connection, nns: Sequence[SQLNotNullConstraint], default_cat: str
    ) -> list[SQLNotNullConstraint]:
        rows, stored = [], []
        for nn in nns:
            table, column = self._parent(conn, nn, default_cat)
            self._require_column(table, column)
            name = (
                _generated_name("nn", table.db, table.name, column)
                if nn.nn_name is None
                else self._checked_name(conn, table, nn.nn_name)
            )
            rows.append(_row(table, name, 1, NOT_NULL, column, nn))
            stored.append(_stored(nn, table, column, nn_name=name))
        self._insert(conn, rows)
        return stored

    def _add_valued_constraints(
        self,
        conn: sa.Connection,
        cs: Sequence[SQLDefaultConstraint] | Sequence[SQLCheckConstraint],
        kind: int,
        default_cat: str,
    ) -> list[Any]:
        """Default (``kind`` DEFAULT) or check constraints: one column each (a check constraint
        may name none: a table-level check), with its value or expression."""
        rows, stored = [], []
        for c in cs:
            table, column = self._parent(conn, c, default_cat)
            if kind == DEFAULT:
                self._require_column(table, column)
            name = (
                _generated_name("dc", table.db, table.name, column)
                if c.dc_name is None
                else self._checked_name(conn, table, c.dc_name)
            )
            value = c.default_value if isinstance(c, SQLDefaultConstraint) else c.check_expression
            rows.append(_row(table, name, 1, kind, column, c, DEFAULT_VALUE=value))
            stored.append(_stored(c, table, column, dc_name=name))
        self._insert(conn, rows)
        return stored

    def _key_signatures(self, conn: sa.Connection, table: _Table) -> set[str]:
        """The ``col:type;...`` signatures of ``table``'s primary key and unique constraints (the
        keys a foreign key may reference), each in key order."""
        found = conn.execute(
            sa.select(_KC.CONSTRAINT_NAME, _KC.PARENT_COLUMN_NAME)
            .where(_KC.PARENT_TBL_ID == table.id, _KC.CONSTRAINT_TYPE.in_([PRIMARY_KEY, UNIQUE]))
            .order_by(_KC.CONSTRAINT_NAME, _KC.POSITION)
        ).all()
        out = set()
        for _name, cols in itertools.groupby(found, key=lambda r: r.CONSTRAINT_NAME):
            out.add(
                "".join(f"{c.PARENT_COLUMN_NAME}:{table.columns.get(c.PARENT_COLUMN_NAME)};" for c in cols)
            )
        return out

    def _add_foreign_keys(
        self, conn: sa.Connection, fks: Sequence[SQLForeignKey], default_cat: str
    ) -> list[SQLForeignKey]:
        """Foreign keys, a key's columns in order and each key starting at ``key_seq`` 1."""
        keys: list[list[SQLForeignKey]] = []
        for fk in fks:
            if not keys or fk.key_seq == 1:
                keys.append([])
            keys[-1].append(fk)
        cats = {_norm(fk.catName) or default_cat for fk in fks}
        if len(cats) > 1:
            raise InvalidObjectException("Foreign keys cannot span catalogs")
        rows, stored = [], []
        for key in keys:
            first = key[0]
            cat = _norm(first.catName) or default_cat
            child = self._constraint_table(conn, cat, _norm(first.fktable_db), _norm(first.fktable_name))
            if child is None:
                raise InvalidObjectException(f"Child table not found: {_norm(first.fktable_name)}")
            parent = self._constraint_table(conn, cat, _norm(first.pktable_db), _norm(first.pktable_name))
            if parent is None:
                raise InvalidObjectException(f"Parent table not found: {_norm(first.pktable_name)}")
            valid = self._key_signatures(conn, parent)
            if not valid:
                raise MetaException(
                    "Trying to define foreign key but there are no primary keys or unique keys for referenced table"
                )
            fk_sig, ref_sig, name = "", "", ""
            for fk in key:
                fk_col, pk_col = _norm(fk.fkcolumn_name), _norm(fk.pkcolumn_name)
                self._require_column(child, fk_col, "Child")
                self._require_column(parent, pk_col)
                if fk.fk_name is None:
                    if fk.key_seq == 1 or not name:
                        name = _generated_name(
                            "fk", child.db, child.name, parent.db, parent.name, pk_col, fk_col
                        )
                else:
                    name = self._checked_name(conn, parent, fk.fk_name)
                fk_type = child.columns[fk_col or ""]
                fk_sig += f"{fk_col}:{fk_type};"
                ref_sig += f"{pk_col}:{fk_type};"
                rows.append(
                    {
                        "PARENT_TBL_ID": parent.id,
                        "CONSTRAINT_NAME": name,
                        "POSITION": fk.key_seq or 1,
                        "CONSTRAINT_TYPE": FOREIGN_KEY,
                        "PARENT_COLUMN_NAME": pk_col,
                        "CHILD_TBL_ID": child.id,
                        "CHILD_COLUMN_NAME": fk_col,
                        "UPDATE_RULE": fk.update_rule,
                        "DELETE_RULE": fk.delete_rule,
                        "ENABLE_VALIDATE_RELY": _flags(fk),
                    }
                )
                out = copy.copy(fk)
                out.catName, out.fk_name = cat, name
                out.pktable_db, out.pktable_name, out.pkcolumn_name = parent.db, parent.name, pk_col
                out.fktable_db, out.fktable_name, out.fkcolumn_name = child.db, child.name, fk_col
                stored.append(out)
            if ref_sig not in valid:
                raise MetaException(
                    f"Foreign key references {ref_sig} but no corresponding primary key or unique key "
                    f"exists. Possible keys: [{', '.join(sorted(valid))}]"
                )
            if parent.id == child.id and fk_sig == ref_sig:
                raise MetaException(
                    f"Cannot be both foreign key and primary/unique key on same table: {ref_sig}"
                )
        self._insert(conn, rows)
        return stored

    @staticmethod
    def _constraint_event(tx: Tx, event_type: str, stored: Sequence[Any]) -> None:
        """Record Hive's ADD_* event of constraints just stored (none for none); a foreign key's
        event is named after the table it references, as Hive's DbNotificationListener does."""
        if not stored:
            return
        first = stored[0]
        if event_type == events.ADD_FOREIGNKEY:
            db, table = first.pktable_db, first.pktable_name
        else:
            db, table = first.table_db, first.table_name
        tx.event(
            event_type,
            events.add_constraints_message(event_type, stored),
            db=db,
            table=table,
            catalog=first.catName,
        )

    def add_table_constraints(self, tx: Tx, cat: str, constraints: SQLAllTableConstraints) -> None:
        """Store the constraints of a table being created in ``tx`` (catalog ``cat`` where a
        constraint names none): keys first, so a foreign key may reference its own table's key.
        Their events follow in Hive's order: primary key, foreign keys, unique, not-null, check,
        default constraints."""
        conn = tx.conn
        pks = self._add_primary_keys(conn, constraints.primaryKeys or [], cat)
        uks = self._add_unique_constraints(conn, constraints.uniqueConstraints or [], cat)
        fks = self._add_foreign_keys(conn, constraints.foreignKeys or [], cat)
        nns = self._add_not_null_constraints(conn, constraints.notNullConstraints or [], cat)
        dcs = self._add_valued_constraints(conn, constraints.defaultConstraints or [], DEFAULT, cat)
        ccs = self._add_valued_constraints(conn, constraints.checkConstraints or [], CHECK, cat)
        for event_type, stored in (
            (events.ADD_PRIMARYKEY, pks),
            (events.ADD_FOREIGNKEY, fks),
            (events.ADD_UNIQUECONSTRAINT, uks),
            (events.ADD_NOTNULLCONSTRAINT, nns),
            (events.ADD_CHECKCONSTRAINT, ccs),
            (events.ADD_DEFAULTCONSTRAINT, dcs),
        ):
            self._constraint_event(tx, event_type, stored)

    # ---------------------------------------------------------------- add calls
    def add_primary_key(self, req: Any) -> None:
        """AddPrimaryKeyRequest: a table's primary key (ADD_PRIMARYKEY). MetaException when the
        table has one; InvalidObjectException (as MetaException on the wire: the call declares
        none) for a missing table or column or a taken name."""
        with self.write() as tx:
            stored = self._add_primary_keys(tx.conn, req.primaryKeyCols or [], DEFAULT_CATALOG)
            self._constraint_event(tx, events.ADD_PRIMARYKEY, stored)

    def add_foreign_key(self, req: Any) -> None:
        """AddForeignKeyRequest: foreign keys (ADD_FOREIGNKEY). MetaException when a key matches no
        primary key or unique constraint of the referenced table; other errors as add_primary_key."""
        with self.write() as tx:
            stored = self._add_foreign_keys(tx.conn, req.foreignKeyCols or [], DEFAULT_CATALOG)
            self._constraint_event(tx, events.ADD_FOREIGNKEY, stored)

    def add_unique_constraint(self, req: Any) -> None:
        """AddUniqueConstraintRequest: unique constraints (ADD_UNIQUECONSTRAINT); errors as
        add_primary_key."""
        with self.write() as tx:
            stored = self._add_unique_constraints(tx.conn, req.uniqueConstraintCols or [], DEFAULT_CATALOG)
            self._constraint_event(tx, events.ADD_UNIQUECONSTRAINT, stored)

    def add_not_null_constraint(self, req: Any) -> None:
        """AddNotNullConstraintRequest: not-null constraints (ADD_NOTNULLCONSTRAINT); errors as
        add_primary_key."""
        with self.write() as tx:
            stored = self._add_not_null_constraints(tx.conn, req.notNullConstraintCols or [], DEFAULT_CATALOG)
            self._constraint_event(tx, events.ADD_NOTNULLCONSTRAINT, stored)

    def add_default_constraint(self, req: Any) -> None:
        """AddDefaultConstraintRequest: default values (ADD_DEFAULTCONSTRAINT); errors as
        add_primary_key."""
        with self.write() as tx:
            stored = self._add_valued_constraints(
                tx.conn, req.defaultConstraintCols or [], DEFAULT, DEFAULT_CATALOG
            )
            self._constraint_event(tx, events.ADD_DEFAULTCONSTRAINT, stored)

    def add_check_constraint(self, req: Any) -> None:
        """AddCheckConstraintRequest: check expressions (ADD_CHECKCONSTRAINT); errors as
        add_primary_key."""
        with self.write() as tx:
            stored = self._add_valued_constraints(
                tx.conn, req.checkConstraintCols or [], CHECK, DEFAULT_CATALOG
            )
            self._constraint_event(tx, events.ADD_CHECKCONSTRAINT, stored)

    # ---------------------------------------------------------------- get calls
    @staticmethod
    def _scope(db: str | None, cat: str | None) -> tuple[str, str | None]:
        """Catalog and normalized database of a request (``db`` may be ``@cat#db``)."""
        cat_name, name = parse_db_name(db_ref(db, cat))
        return cat_name, name

    @staticmethod
    def _constraints_of(
        conn: sa.Connection, cat: str, db: str | None, tbl: str | None, kind: int
    ) -> Sequence[sa.Row[Any]]:
        """The rows of ``kind`` on one table, by constraint name and position."""
        return conn.execute(
            sa.select(KEY_CONSTRAINTS)
            .select_from(
                KEY_CONSTRAINTS.join(_PARENT, _PARENT.c.TBL_ID == _KC.PARENT_TBL_ID).join(
                    _PARENT_DB, _PARENT_DB.c.DB_ID == _PARENT.c.DB_ID
                )
            )
            .where(
                _PARENT_DB.c.CTLG_NAME == cat,
                _PARENT_DB.c.NAME == (db or ""),
                _PARENT.c.TBL_NAME == (_norm(tbl) or ""),
                _KC.CONSTRAINT_TYPE == kind,
            )
            .order_by(_KC.CONSTRAINT_NAME, _KC.POSITION)
        ).all()

    @staticmethod
    def _constraint_names(conn: sa.Connection, tbl_id: int, kind: int) -> list[str]:
        return list(
            conn.execute(
                sa.select(_KC.CONSTRAINT_NAME)
                .where(_KC.PARENT_TBL_ID == tbl_id, _KC.CONSTRAINT_TYPE == kind)
                .distinct()
            ).scalars()
        )

    def _primary_keys(
        self, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[SQLPrimaryKey]:
        return [
            SQLPrimaryKey(
                db,
                _norm(tbl),
                r.PARENT_COLUMN_NAME,
                r.POSITION,
                r.CONSTRAINT_NAME,
                *_unflag(r.ENABLE_VALIDATE_RELY),
                catName=cat,
            )  # fmt: skip
            for r in self._constraints_of(conn, cat, db, tbl, PRIMARY_KEY)
        ]

    def _unique_constraints(
        self, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[SQLUniqueConstraint]:
        return [
            SQLUniqueConstraint(
                cat,
                db,
                _norm(tbl),
                r.PARENT_COLUMN_NAME,
                r.POSITION,
                r.CONSTRAINT_NAME,
                *_unflag(r.ENABLE_VALIDATE_RELY),
            )  # fmt: skip
            for r in self._constraints_of(conn, cat, db, tbl, UNIQUE)
        ]

    def _not_null_constraints(
        self, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[SQLNotNullConstraint]:
        return [
            SQLNotNullConstraint(
                cat, db, _norm(tbl), r.PARENT_COLUMN_NAME, r.CONSTRAINT_NAME, *_unflag(r.ENABLE_VALIDATE_RELY)
            )  # fmt: skip
            for r in self._constraints_of(conn, cat, db, tbl, NOT_NULL)
        ]

    def _default_constraints(
        self, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[SQLDefaultConstraint]:
        return self._valued_constraints(SQLDefaultConstraint, DEFAULT, conn, cat, db, tbl)

    def _check_constraints(
        self, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[SQLCheckConstraint]:
        return self._valued_constraints(SQLCheckConstraint, CHECK, conn, cat, db, tbl)

    def _valued_constraints(
        self, cls: type[V], kind: int, conn: sa.Connection, cat: str, db: str | None, tbl: str | None
    ) -> list[V]:
        """DEFAULT or CHECK constraints (the same fields: a column and its value or expression)."""
        return [
            cls(
                cat,
                db,
                _norm(tbl),
                r.PARENT_COLUMN_NAME,
                r.DEFAULT_VALUE,
                r.CONSTRAINT_NAME,
                *_unflag(r.ENABLE_VALIDATE_RELY),
            )  # fmt: skip
            for r in self._constraints_of(conn, cat, db, tbl, kind)
        ]

    def _foreign_keys(
        self,
        conn: sa.Connection,
        cat: str,
        parent_db: str | None,
        parent_tbl: str | None,
        child_db: str | None,
        child_tbl: str | None,
    ) -> list[SQLForeignKey]:
        """Foreign keys by the table they reference and/or the table holding them (None: any)."""
        q = (
            sa.select(
                KEY_CONSTRAINTS,
                _PARENT.c.TBL_NAME.label("P_TBL"),
                _PARENT_DB.c.NAME.label("P_DB"),
                _CHILD.c.TBL_NAME.label("C_TBL"),
                _CHILD_DB.c.NAME.label("C_DB"),
            )
            .select_from(
                KEY_CONSTRAINTS.join(_PARENT, _PARENT.c.TBL_ID == _KC.PARENT_TBL_ID)
                .join(_PARENT_DB, _PARENT_DB.c.DB_ID == _PARENT.c.DB_ID)
                .join(_CHILD, _CHILD.c.TBL_ID == _KC.CHILD_TBL_ID)
                .join(_CHILD_DB, _CHILD_DB.c.DB_ID == _CHILD.c.DB_ID)
            )
            .where(
                _KC.CONSTRAINT_TYPE == FOREIGN_KEY,
                _PARENT_DB.c.CTLG_NAME == cat,
                _CHILD_DB.c.CTLG_NAME == cat,
            )
            .order_by(_CHILD_DB.c.NAME, _CHILD.c.TBL_NAME, _KC.CONSTRAINT_NAME, _KC.POSITION)
        )
        for col, value in (
            (_PARENT_DB.c.NAME, parent_db),
            (_PARENT.c.TBL_NAME, _norm(parent_tbl)),
            (_CHILD_DB.c.NAME, child_db),
            (_CHILD.c.TBL_NAME, _norm(child_tbl)),
        ):
            if value is not None:
                q = q.where(col == value)
        found = conn.execute(q).all()
        pk_names: dict[int, str | None] = {}
        out = []
        for r in found:
            if r.PARENT_TBL_ID not in pk_names:
                names = self._constraint_names(conn, r.PARENT_TBL_ID, PRIMARY_KEY)
                pk_names[r.PARENT_TBL_ID] = names[0] if names else None
            out.append(
                SQLForeignKey(
                    r.P_DB,
                    r.P_TBL,
                    r.PARENT_COLUMN_NAME,
                    r.C_DB,
                    r.C_TBL,
                    r.CHILD_COLUMN_NAME,
                    r.POSITION,
                    r.UPDATE_RULE,
                    r.DELETE_RULE,
                    r.CONSTRAINT_NAME,
                    pk_names[r.PARENT_TBL_ID],
                    *_unflag(r.ENABLE_VALIDATE_RELY),
                    catName=cat,
                )  # fmt: skip
            )
        return out

    def get_primary_keys(self, request: Any) -> PrimaryKeysResponse:
        """PrimaryKeysRequest -> the table's primary key columns in key order (none for a missing
        table, as Hive)."""
        cat, db = self._scope(request.db_name, request.catName)
        with self.read() as conn:
            return PrimaryKeysResponse(primaryKeys=self._primary_keys(conn, cat, db, request.tbl_name))

    def get_foreign_keys(self, request: Any) -> ForeignKeysResponse:
        """ForeignKeysRequest -> foreign keys held by ``foreign_db_name.foreign_tbl_name`` and/or
        referencing ``parent_db_name.parent_tbl_name`` (unset names match any table); each
        carries the referenced table's primary key name (``pk_name``, None when it references a
        unique constraint)."""
        cat = _norm(request.catName) or DEFAULT_CATALOG
        with self.read() as conn:
            return ForeignKeysResponse(
                foreignKeys=self._foreign_keys(
                    conn,
                    cat,
                    _norm(request.parent_db_name),
                    request.parent_tbl_name,
                    _norm(request.foreign_db_name),
                    request.foreign_tbl_name,
                )
            )

    def get_unique_constraints(self, request: Any) -> UniqueConstraintsResponse:
        """UniqueConstraintsRequest -> the table's unique constraints (by name, then position)."""
        cat, db = self._scope(request.db_name, request.catName)
        with self.read() as conn:
            return UniqueConstraintsResponse(
                uniqueConstraints=self._unique_constraints(conn, cat, db, request.tbl_name)
            )

    def get_not_null_constraints(self, request: Any) -> NotNullConstraintsResponse:
        """NotNullConstraintsRequest -> the table's not-null constraints."""
        cat, db = self._scope(request.db_name, request.catName)
        with self.read() as conn:
            return NotNullConstraintsResponse(
                notNullConstraints=self._not_null_constraints(conn, cat, db, request.tbl_name)
            )

    def get_default_constraints(self, request: Any) -> DefaultConstraintsResponse:
        """DefaultConstraintsRequest -> the table's default-value constraints."""
        cat, db = self._scope(request.db_name, request.catName)
        with self.read() as conn:
            return DefaultConstraintsResponse(
                defaultConstraints=self._default_constraints(conn, cat, db, request.tbl_name)
            )

    def get_check_constraints(self, request: Any) -> CheckConstraintsResponse:
        """CheckConstraintsRequest -> the table's check constraints."""
        cat, db = self._scope(request.db_name, request.catName)
        with self.read() as conn:
            return CheckConstraintsResponse(
                checkConstraints=self._check_constraints(conn, cat, db, request.tbl_name)
            )

    def get_all_table_constraints(self, request: Any) -> AllTableConstraintsResponse:
        """AllTableConstraintsRequest -> every constraint of one table (its foreign keys: those it
        holds), read in one transaction."""
        cat, db = self._scope(request.dbName, request.catName)
        tbl = request.tblName
        with self.read() as conn:
            return AllTableConstraintsResponse(
                allTableConstraints=SQLAllTableConstraints(
                    primaryKeys=self._primary_keys(conn, cat, db, tbl),
                    foreignKeys=self._foreign_keys(conn, cat, None, None, db, tbl),
                    uniqueConstraints=self._unique_constraints(conn, cat, db, tbl),
                    notNullConstraints=self._not_null_constraints(conn, cat, db, tbl),
                    defaultConstraints=self._default_constraints(conn, cat, db, tbl),
                    checkConstraints=self._check_constraints(conn, cat, db, tbl),
                )
            )

    # ---------------------------------------------------------------- drop
    def drop_constraint(self, req: Any) -> None:
        """DropConstraintRequest: drop the named constraint of a table (a foreign key from either
        its table or the table it references). NoSuchObjectException ("The constraint: x does not
        exist for the associated table: db.t") when the table has no such constraint."""
        cat, db = self._scope(req.dbname, req.catName)
        tbl = _norm(req.tablename)
        name = _norm(req.constraintname)
        with self.write() as tx:
            table = self._constraint_table(tx.conn, cat, db, tbl)
            deleted = 0
            if table is not None:
                deleted = tx.conn.execute(
                    KEY_CONSTRAINTS.delete().where(
                        _KC.CONSTRAINT_NAME == name,
                        sa.or_(_KC.PARENT_TBL_ID == table.id, _KC.CHILD_TBL_ID == table.id),
                    )
                ).rowcount
            if not deleted:
                raise NoSuchObjectException(
                    f"The constraint: {req.constraintname} does not exist for the associated table: {db}.{tbl}"
                )
            tx.event(
                events.DROP_CONSTRAINT,
                events.drop_constraint_message(db or "", tbl or "", req.constraintname),
                db=db,
                table=tbl,
                catalog=cat,
            )
