"""Table methods of the HMS interface: create, get (all forms), list, alter/rename, drop."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AlterTableResponse,
    FieldSchema,
    GetTableResult,
    GetTablesResult,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    PrincipalType,
    SQLAllTableConstraints,
    StorageDescriptor,
    Table,
    TableMeta,
    UnknownDBException,
    UnknownTableException,
)

from hivemesh import storage
from hivemesh.hive import column_types, events
from hivemesh.hive.constants import (
    DEFAULT_PROPERTIES,
    EXTERNAL_TABLE,
    MANAGED_TABLE,
    TRANSACTIONAL,
    TRANSACTIONAL_PROPERTIES,
    VIRTUAL_VIEW,
    now_s,
)
from hivemesh.hive.names import db_ref, matches_pattern, parse_db_name
from hivemesh.metastore import fast_stats, rows
from hivemesh.metastore.base import CatalogBase, Tx, env_props, validate_name
from hivemesh.metastore.conformance import meta_conf
from hivemesh.metastore.schema import DBS, PARTITION_KEYS, PARTITIONS, SDS, TAB_COL_STATS, TABLE_PARAMS, TBLS

MANAGED, EXTERNAL, VIEW = MANAGED_TABLE, EXTERNAL_TABLE, VIRTUAL_VIEW
# Hive's TableType enum (org.apache.hadoop.hive.metastore.TableType), Hive 3/4
TABLE_TYPES = frozenset({MANAGED, EXTERNAL, VIEW, "MATERIALIZED_VIEW"})
DDL_TIME = "transient_lastDdlTime"


def managed_root(db_row: Any) -> str:
    """Where the managed tables of the database of DBS row ``db_row`` (or a row with its
    DB_LOCATION_URI and DB_MANAGED_LOCATION_URI) go by default: its managed location when set
    (Hive 3+), else its location."""
    return str(db_row.DB_MANAGED_LOCATION_URI or db_row.DB_LOCATION_URI)


def effective_table_type(table: Table) -> str:
    """Hive's rule: the EXTERNAL=TRUE parameter turns MANAGED into EXTERNAL and its absence back."""
    ttype = table.tableType or MANAGED
    external = (table.parameters or {}).get("EXTERNAL", "").upper() == "TRUE"
    if ttype == MANAGED and external:
        return EXTERNAL
    if ttype == EXTERNAL and not external:
        return MANAGED
    return ttype


def _table_values(table: Table, ttype: str) -> dict[str, Any]:
    return {
        "OWNER": table.owner,
        "OWNER_TYPE": table.ownerType if table.ownerType is not None else PrincipalType.USER,
        "LAST_ACCESS_TIME": table.lastAccessTime or 0,
        "RETENTION": table.retention or 0,
        "TBL_TYPE": ttype,
        "VIEW_ORIGINAL_TEXT": table.viewOriginalText,
        "VIEW_EXPANDED_TEXT": table.viewExpandedText,
        "IS_REWRITE_ENABLED": bool(table.rewriteEnabled),
    }


def _param_ci(params: dict[str, str], key: str) -> str | None:
    """The value of ``key`` in ``params``, the key compared case-insensitively (as Hive's
    TransactionalValidationListener does); None when absent."""
    return next((v for k, v in params.items() if k.lower() == key), None)


def is_transactional_params(params: dict[str, str] | None) -> bool:
    """True when table parameters say ``transactional=true`` (key and value in any case)."""
    return (_param_ci(params or {}, TRANSACTIONAL) or "").lower() == "true"


def normalize_transactional(params: dict[str, str], was_transactional: bool = False) -> None:
    """Hive's TransactionalValidationListener on a table made transactional (created with
    ``transactional=true``, or altered to it from ``was_transactional`` False), in place: the key
    and value become ``transactional=true``, and without ``transactional_properties`` the table
    gets ``transactional_properties=default`` (full ACID, what its absence means), lower-cased.
    Nothing for other tables. (Hive's refusals of such tables, non-ACID formats, external or
    sorted tables, are not made here.)"""
    if was_transactional or not is_transactional_params(params):
        return
    props = (_param_ci(params, TRANSACTIONAL_PROPERTIES) or DEFAULT_PROPERTIES).lower()
    for k in [k for k in params if k.lower() in (TRANSACTIONAL, TRANSACTIONAL_PROPERTIES)]:
        del params[k]
    params[TRANSACTIONAL] = "true"
    params[TRANSACTIONAL_PROPERTIES] = props


# First tokens of the type names Hive accepts (serdeConstants), checked as Hive's
# MetaStoreUtils.validateColumnType does: only the leading word of a type string.
HIVE_TYPE_NAMES = frozenset(
    [
        "void",
        "boolean",
        "tinyint",
        "smallint",
        "int",
        "integer",
        "bigint",
        "float",
        "double",
        "string",
        "varchar",
        "char",
        "date",
        "datetime",
        "timestamp",
        "decimal",
        "binary",
        "array",
        "map",
        "struct",
        "uniontype",
        "interval_year_month",
        "interval_day_time",
    ]
)
_TYPE_WORD = re.compile(r"^\s*([A-Za-z0-9_]+)")
DISALLOW_TYPE_CHANGES = "hive.metastore.disallow.incompatible.col.type.changes"


def _lists_new_directory(table: Table, ttype: str, env: dict[str, str] | None) -> bool:
    """Whether creating ``table`` lists its directory for fast statistics (an unpartitioned table
    with a storage descriptor, not a view, without both statistics given)."""
    return (
        table.sd is not None
        and ttype != "VIRTUAL_VIEW"
        and not table.partitionKeys
        and fast_stats.require_cal_stats(env, is_view=False)
        and fast_stats.would_list(table.parameters, force=False)
    )


def _columns_changed(old: StorageDescriptor | None, new: StorageDescriptor | None) -> bool:
    """Whether an alter changes the columns (names in any case, types) of a table that has a
    storage descriptor before and after (what CASCADE passes on to the partitions)."""
    if old is None or new is None:
        return False
    return [(c.name.lower(), c.type) for c in old.cols or []] != [
        (c.name.lower(), c.type) for c in new.cols or []
    ]


def _writer_write_id(table: Table) -> bool:
    """Whether an altered transactional table carries a writer's write id to record on the table
    (Hive does so for a writer's alter_table_req, not for a conversion to ACID)."""
    return is_transactional_params(table.parameters) and (table.writeId or 0) > 0


def _validate_columns(cols: list[FieldSchema] | None, what: str) -> None:
    """Raises InvalidObjectException ("Invalid column type: x") as Hive's create_table does."""
    for c in cols or []:
        if not c.name:
            raise InvalidObjectException(f"{what} has a column without a name")
        m = _TYPE_WORD.match(c.type or "")
        if m is None or m.group(1).lower() not in HIVE_TYPE_NAMES:
            raise InvalidObjectException(f"Invalid column type: {c.type}")


def _same_partition_keys(old: list[FieldSchema], new: list[FieldSchema]) -> bool:
    """Names and types equal in order (comments may change), as Hive's alter_table requires."""
    return len(old) == len(new) and all(
        a.name.lower() == b.name.lower() and a.type.lower() == b.type.lower()
        for a, b in zip(old, new, strict=True)
    )


def _check_type_changes(old: sa.Row[Any], old_sd: StorageDescriptor | None, table: Table) -> None:
    """Hive's check of an altered table's column types against the stored ones (not for views),
    unless this connection's ``setMetaConf`` allows incompatible changes; InvalidOperationException."""
    if (
        old.TBL_TYPE != VIEW
        and old_sd is not None
        and table.sd is not None
        and meta_conf(DISALLOW_TYPE_CHANGES).lower() == "true"
    ):
        serde = old_sd.serdeInfo.serializationLib if old_sd.serdeInfo else None
        column_types.check_type_changes(old_sd.cols or [], table.sd.cols or [], serde)


def _own_constraints(constraints: SQLAllTableConstraints, db: str, table: Table) -> SQLAllTableConstraints:
    """Copies of a new table's constraints with an unset database or table name set to the
    table's (a foreign key's own side: ``fktable_*``)."""
    out = SQLAllTableConstraints()
    for field in (
        "primaryKeys",
        "uniqueConstraints",
        "notNullConstraints",
        "defaultConstraints",
        "checkConstraints",
    ):
        copies = []
        for c in getattr(constraints, field) or []:
            c = copy.copy(c)
            c.table_db = c.table_db or db
            c.table_name = c.table_name or table.tableName
            copies.append(c)
        setattr(out, field, copies)
    fks = []
    for fk in constraints.foreignKeys or []:
        fk = copy.copy(fk)
        fk.fktable_db = fk.fktable_db or db
        fk.fktable_name = fk.fktable_name or table.tableName
        fks.append(fk)
    out.foreignKeys = fks
    return out


class TableMixin(CatalogBase):
    """HMS table calls. Dropping a managed table deletes its data; an external one never does."""

    # ---------------------------------------------------------------- create
    def _insert_table(self, tx: Tx, db_row: sa.Row[Any], table: Table) -> int:
        name = (table.tableName or "").lower()
        ttype = effective_table_type(table)
        sd_id = None
        if table.sd is not None:
            sd_id = rows.insert_sds(tx.conn, [table.sd])[0]
        values = _table_values(table, ttype)
        tbl_id: int = cast(  # one row inserted: inserted_primary_key is set
            "sa.Row[Any]",
            tx.conn.execute(
                TBLS.insert().values(
                    DB_ID=db_row.DB_ID,
                    TBL_NAME=name,
                    CREATE_TIME=table.createTime or now_s(),
                    SD_ID=sd_id,
                    **values,
                )
            ).inserted_primary_key,
        )[0]
        self._write_table_children(tx.conn, tbl_id, table)
        return tbl_id

    @staticmethod
    def _write_table_children(conn: sa.Connection, tbl_id: int, table: Table) -> None:
        if table.parameters:
            conn.execute(
                TABLE_PARAMS.insert(),
                [{"TBL_ID": tbl_id, "PARAM_KEY": k, "PARAM_VALUE": v} for k, v in table.parameters.items()],
            )
        if table.partitionKeys:
            conn.execute(
                PARTITION_KEYS.insert(),
                [
                    {
                        "TBL_ID": tbl_id,
                        "PKEY_NAME": k.name.lower(),
                        "PKEY_TYPE": k.type,
                        "PKEY_COMMENT": k.comment,
                        "INTEGER_IDX": i,
                    }
                    for i, k in enumerate(table.partitionKeys)
                ],
            )

    def create_table(
        self,
        tbl: Table,
        env: dict[str, str] | None = None,
        constraints: SQLAllTableConstraints | None = None,
    ) -> None:
        """Create a table or view, with its ``constraints`` (stored in the same transaction).

        A managed table without a location gets ``<db location>/<name>``; the directory of a
        table with a file-system location is created. Raises AlreadyExistsException,
        InvalidObjectException (no such database, bad name or columns, a constraint on a missing
        column), MetaException (a foreign key matching no key), as the Java HMS does.
        """
        if not validate_name(tbl.tableName):
            raise self.invalid_name(tbl.tableName)
        if tbl.sd is not None:
            _validate_columns(tbl.sd.cols, f"table {tbl.tableName}")
        _validate_columns(tbl.partitionKeys, f"table {tbl.tableName} partition keys")
        table = Table(**tbl.__dict__)
        ref = db_ref(tbl.dbName, tbl.catName)
        table.tableName = tbl.tableName.lower()
        table.parameters = dict(tbl.parameters or {})
        normalize_transactional(table.parameters)
        table.createTime = now_s()
        table.parameters.setdefault(DDL_TIME, str(table.createTime))
        ttype = effective_table_type(table)
        listings = fast_stats.Listings(new_dirs=True)
        if _lists_new_directory(table, ttype, env):
            self._gather_listings(
                listings, lambda conn: [self._new_location(self.db_row(conn, ref), table, ttype)]
            )
        self._write_with_listings(
            listings,
            lambda tx: self._create_table_tx(tx, ref, tbl.dbName, table, ttype, env, constraints, listings),
        )

    def _create_table_tx(
        self,
        tx: Tx,
        ref: str | None,
        db_name: str | None,
        prepared: Table,
        ttype: str,
        env: dict[str, str] | None,
        constraints: SQLAllTableConstraints | None,
        listings: fast_stats.Listings,
    ) -> None:
        """Store the table :meth:`create_table` prepared (a copy: a retried transaction starts
        again from it), its CREATE_TABLE event and its constraints' events."""
        table = Table(**prepared.__dict__)
        table.parameters = dict(prepared.parameters)
        try:
            db_row = self.db_row(tx.conn, ref)
        except NoSuchObjectException as e:  # Hive answers InvalidObjectException(<db name>) here
            raise InvalidObjectException(str(db_name)) from e
        exists = tx.conn.execute(
            sa.select(TBLS.c.TBL_ID).where(TBLS.c.DB_ID == db_row.DB_ID, table.tableName == TBLS.c.TBL_NAME)
        ).first()
        if exists:
            raise self.already_exists(f"Table {table.tableName} already exists")
        if table.sd is not None and ttype != "VIRTUAL_VIEW":
            sd = table.sd.__class__(**table.sd.__dict__)
            sd.location = self._new_location(db_row, table, ttype)
            table.sd = sd
            loc = sd.location
            # Hive's fast stats: an unpartitioned table created over an existing directory
            # gets its file count and size (a new directory is created empty after the
            # commit). A partitioned table gets none: its partitions carry their own, and
            # Hive 3+ never updates the table's (a frozen size would mislead planners).
            if not table.partitionKeys and fast_stats.require_cal_stats(env, is_view=False):
                if fast_stats.would_list(table.parameters, force=False):
                    listings.require([loc])  # taken before the transaction
                fast_stats.apply_listing(table.parameters, listings.taken.get(loc), env, force=False)
            tx.after_commit.append(lambda: storage.make_dirs(loc))
        self._insert_table(tx, db_row, table)
        created = self._table_image(tx.conn, db_row.CTLG_NAME, db_row.NAME, table.tableName)
        message = events.create_table_message(created)
        tx.event(
            events.CREATE_TABLE, message, db=db_row.NAME, table=table.tableName, catalog=db_row.CTLG_NAME
        )
        if constraints is not None:  # stored with the table; their events follow CREATE_TABLE
            self.add_table_constraints(
                tx, db_row.CTLG_NAME, _own_constraints(constraints, db_row.NAME, table)
            )

    def _new_location(self, db_row: sa.Row[Any], table: Table, ttype: str) -> str:
        """Where a new table with a storage descriptor lives: the location it names (checked:
        MetaException outside the allowed locations), else ``<db location>/<name>`` (the
        database's managed location for a managed table)."""
        if table.sd.location:
            return self.checked_location(table.sd.location)
        root = managed_root(db_row) if ttype == MANAGED else db_row.DB_LOCATION_URI
        return storage.join_location(root, table.tableName)

    def create_table_with_environment_context(self, tbl: Table, environment_context: Any) -> None:
        """:meth:`create_table`; ``DO_NOT_UPDATE_STATS``/``STATS_GENERATED`` are honoured."""
        self.create_table(tbl, env_props(environment_context))

    def create_table_req(self, request: Any) -> None:
        """Hive 4 CreateTableRequest form of :meth:`create_table`, with its constraints.
        Raises InvalidObjectException for a request without its table (a required field)."""
        if request.table is None:
            raise InvalidObjectException("CreateTableRequest has no table")
        self.create_table(
            request.table,
            env_props(request.envContext),
            SQLAllTableConstraints(
                primaryKeys=request.primaryKeys,
                foreignKeys=request.foreignKeys,
                uniqueConstraints=request.uniqueConstraints,
                notNullConstraints=request.notNullConstraints,
                defaultConstraints=request.defaultConstraints,
                checkConstraints=request.checkConstraints,
            ),
        )

    def create_table_with_constraints(
        self,
        tbl: Table,
        primaryKeys: list[Any] | None,  # noqa: N803 - Thrift names
        foreignKeys: list[Any] | None,  # noqa: N803
        uniqueConstraints: list[Any] | None,  # noqa: N803
        notNullConstraints: list[Any] | None,  # noqa: N803
        defaultConstraints: list[Any] | None,  # noqa: N803
        checkConstraints: list[Any] | None,  # noqa: N803
    ) -> None:
        """:meth:`create_table` with its constraints, in one transaction (a refused constraint
        leaves no table). Errors as :meth:`create_table`."""
        self.create_table(
            tbl,
            None,
            SQLAllTableConstraints(
                primaryKeys=primaryKeys,
                foreignKeys=foreignKeys,
                uniqueConstraints=uniqueConstraints,
                notNullConstraints=notNullConstraints,
                defaultConstraints=defaultConstraints,
                checkConstraints=checkConstraints,
            ),
        )

    # ---------------------------------------------------------------- get
    @staticmethod
    def _table_image(conn: sa.Connection, cat: str, db: str, tbl: str) -> Table:
        """The table as ``get_table`` returns it (names already lower-cased), inside ``conn``'s
        transaction; for the objects of notification events. KeyError when it does not exist."""
        found = rows.load_tables(conn, stmt=rows.TABLE_BY_NAME, params={"cat": cat, "db": db, "tbl": tbl})
        if not found:
            raise KeyError(f"{cat}.{db}.{tbl}")
        return found[0][1]

    def _tables(self, conn: sa.Connection, db: str | None, names: list[str] | None) -> list[Table]:
        cat, dbn = self.db_name(db)
        cond = sa.and_(DBS.c.CTLG_NAME == cat, DBS.c.NAME == dbn)
        if names is not None:
            cond = sa.and_(cond, TBLS.c.TBL_NAME.in_([n.lower() for n in names]))
        return [t for _, t in rows.load_tables(conn, cond)]

    def get_table(self, dbname: str | None, tbl_name: str) -> Table:
        """Raises NoSuchObjectException ("db.t table not found")."""
        cat, db = self.db_name(dbname)
        tbl = (tbl_name or "").lower()
        with self.read_statement() as conn:
            found = rows.load_table_by_name(conn, cat, db, tbl)
        if found is None:
            raise NoSuchObjectException(f"{db}.{tbl} table not found")
        return found

    def get_table_req(self, req: Any) -> GetTableResult:
        """Hive 3/4 GetTableRequest form of :meth:`get_table`."""
        db = db_ref(req.dbName, req.catName)
        return GetTableResult(table=self.get_table(db, req.tblName), isStatsCompliant=None)

    def get_table_objects_by_name(self, dbname: str | None, tbl_names: list[str]) -> list[Table]:
        """The existing tables among ``tbl_names`` (missing names are left out, as in Hive); no
        tables for a missing database (the IDL declares no exception for this form)."""
        with self.read() as conn:
            try:
                self.db_row(conn, dbname, exc=NoSuchObjectException)
            except NoSuchObjectException:
                return []
            return self._tables(conn, dbname, list(tbl_names or []))

    def get_table_objects_by_name_req(self, req: Any) -> GetTablesResult:
        """Hive 3/4 GetTablesRequest form. An empty name list gives no tables (even for a missing
        database, as Hive 4); a missing database raises UnknownDBException("Could not find database
        <cat>.<db>"). No list at all (``tblNames`` unset) means every table of the database, where
        Hive 4.2 raises InvalidOperationException ("cannot find null tables")."""
        db = db_ref(req.dbName, req.catName)
        if req.tblNames is not None and not req.tblNames:
            return GetTablesResult(tables=[])
        with self.read() as conn:
            try:
                self.db_row(conn, db, exc=NoSuchObjectException)
            except NoSuchObjectException as e:
                cat, name = self.db_name(db)
                raise UnknownDBException(f"Could not find database {cat}.{name}") from e
            return GetTablesResult(tables=self._tables(conn, db, req.tblNames))

    def _table_names(self, db: str | None, pattern: str | None, ttype: str | None = None) -> list[str]:
        cat, dbn = self.db_name(db)
        with self.read_statement() as conn:
            q = (
                sa.select(TBLS.c.TBL_NAME, TBLS.c.TBL_TYPE)
                .select_from(TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID))
                .where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == dbn)
                .order_by(TBLS.c.TBL_NAME)
            )
            return [
                n for n, t in conn.execute(q) if matches_pattern(n, pattern) and (ttype is None or t == ttype)
            ]

    def get_tables(self, db_name: str, pattern: str) -> list[str]:
        """Table and view names of a database matching a Hive pattern; empty for a missing database
        and for an empty pattern (as Hive 4; ``None`` lists them all)."""
        return [] if pattern == "" else self._table_names(db_name, pattern)

    def get_tables_by_type(self, db_name: str, pattern: str, tableType: str) -> list[str]:  # noqa: N803
        """Like :meth:`get_tables`, only tables of ``tableType`` (e.g. VIRTUAL_VIEW).

        Raises MetaException for a type that is not one of Hive's TableType names (case matters),
        with the text of the Java exception Hive 4 sends, before looking at the database.
        """
        if tableType is None:
            raise MetaException("java.lang.NullPointerException: Name is null")
        if tableType not in TABLE_TYPES:
            raise MetaException(
                "java.lang.IllegalArgumentException: No enum constant "
                f"org.apache.hadoop.hive.metastore.TableType.{tableType}"
            )
        return self._table_names(db_name, pattern, tableType)

    def get_all_tables(self, db_name: str | None) -> list[str]:
        """Every table and view name of a database."""
        return self._table_names(db_name, None)

    def get_table_meta(self, db_patterns: str, tbl_patterns: str, tbl_types: list[str]) -> list[TableMeta]:
        """TableMeta (db, name, type, comment) of tables matching the patterns and types."""
        cat, db_pat = parse_db_name(db_patterns) if db_patterns else ("hive", None)
        with self.read_statement() as conn:
            q = (
                sa.select(DBS.c.NAME, TBLS.c.TBL_NAME, TBLS.c.TBL_TYPE, TABLE_PARAMS.c.PARAM_VALUE)
                .select_from(
                    TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID).outerjoin(
                        TABLE_PARAMS,
                        sa.and_(
                            TABLE_PARAMS.c.TBL_ID == TBLS.c.TBL_ID, TABLE_PARAMS.c.PARAM_KEY == "comment"
                        ),
                    )
                )
                .where(DBS.c.CTLG_NAME == cat)
                .order_by(DBS.c.NAME, TBLS.c.TBL_NAME)
            )
            return [
                TableMeta(dbName=d, tableName=t, tableType=tt, comments=c, catName=cat)
                for d, t, tt, c in conn.execute(q)
                if matches_pattern(d, db_pat)
                and matches_pattern(t, tbl_patterns)
                and (not tbl_types or tt in tbl_types)
            ]

    def get_fields(self, db_name: str, table_name: str) -> list[FieldSchema]:
        """The table's data columns (not partition keys); raises UnknownTableException-like MetaException."""
        t = self._get_for_schema(db_name, table_name)
        return list(t.sd.cols if t.sd else [])

    def get_schema(self, db_name: str, table_name: str) -> list[FieldSchema]:
        """Data columns followed by partition keys."""
        t = self._get_for_schema(db_name, table_name)
        return list(t.sd.cols if t.sd else []) + list(t.partitionKeys or [])

    def get_fields_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[FieldSchema]:
        """:meth:`get_fields`."""
        return self.get_fields(db_name, table_name)

    def get_schema_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[FieldSchema]:
        """:meth:`get_schema`."""
        return self.get_schema(db_name, table_name)

    def _get_for_schema(self, db_name: str, table_name: str) -> Table:
        """get_table, with UnknownTableException for a missing table (get_fields/get_schema)."""
        try:
            return self.get_table(db_name, table_name)
        except NoSuchObjectException as e:
            raise UnknownTableException(e.message) from e

    # ---------------------------------------------------------------- alter
    def alter_table(self, dbname: str, tbl_name: str, new_tbl: Table) -> None:
        """Replace a table's definition; a different db/name renames it.

        A managed table whose location the client left unchanged moves to the default location
        under its new name (partition locations below it follow). Raises InvalidOperationException
        (missing table, missing target database, target exists), InvalidObjectException (bad name).
        """
        self._alter_table(dbname, tbl_name, new_tbl, {}, cascade=False)

    def alter_table_with_environment_context(
        self, dbname: str, tbl_name: str, new_tbl: Table, environment_context: Any
    ) -> None:
        """:meth:`alter_table`; ``CASCADE=true`` in the context also changes partition columns."""
        props = env_props(environment_context)
        self._alter_table(
            dbname, tbl_name, new_tbl, props, cascade=props.get("CASCADE", "").lower() == "true"
        )

    def alter_table_with_cascade(self, dbname: str, tbl_name: str, new_tbl: Table, cascade: bool) -> None:
        """:meth:`alter_table`; with ``cascade`` partition columns follow the table's."""
        self._alter_table(dbname, tbl_name, new_tbl, {}, cascade=bool(cascade))

    def alter_table_req(self, req: Any) -> AlterTableResponse:
        """Hive 4 AlterTableRequest form. With ``validWriteIdList`` (a writer's alter, Trino's
        alterTransactionalTable), a transactional table keeps the new table's ``writeId`` (> 0) as
        its own, as Hive's ObjectStore.alterTable does."""
        db = db_ref(req.dbName, req.catName)
        props = env_props(req.environmentContext)
        self._alter_table(
            db,
            req.tableName,
            req.table,
            props,
            cascade=props.get("CASCADE", "").lower() == "true",
            valid_write_ids=req.validWriteIdList,
        )
        return AlterTableResponse()

    def _alter_table(
        self,
        dbname: str | None,
        tbl_name: str,
        new_tbl: Table,
        env: dict[str, str],
        cascade: bool,
        valid_write_ids: str | None = None,
    ) -> None:
        if new_tbl is None:
            raise InvalidOperationException("New table is null")
        if not validate_name(new_tbl.tableName):
            raise InvalidOperationException(f"{new_tbl.tableName} is not a valid object name")
        # the directory of an unpartitioned table is listed for its fast statistics before the
        # write transaction (see CatalogBase._write_with_listings); the move of a renamed
        # managed table's directory stays inside it, so that a move the storage refuses rolls
        # the call back (and a commit that fails after the move moves it back)
        listings = fast_stats.Listings(new_dirs=False)
        if not new_tbl.partitionKeys and fast_stats.require_cal_stats(env, is_view=False):
            self._gather_listings(
                listings, lambda conn: self._altered_locations(conn, dbname, tbl_name, new_tbl)
            )
        moves: list[tuple[str, str]] = []

        def work(tx: Tx) -> None:
            """The alter in the write transaction; records the directory move done, for undoing."""
            moved = self._alter_table_tx(
                tx, dbname, tbl_name, new_tbl, env, cascade, listings, valid_write_ids
            )
            if moved is not None:
                moves.append(moved)

        try:
            self._write_with_listings(listings, work)
        except Exception:
            for source, target in moves:
                storage.move_dir(target, source)
            raise

    def _altered_locations(
        self, conn: sa.Connection, dbname: str | None, tbl_name: str, new_tbl: Table
    ) -> list[str | None]:
        """Where :meth:`_alter_stats_params` may list: the table's stored location (kept, or the
        directory a rename moves) and the one the request sends."""
        old = self.table_row(conn, dbname, tbl_name)
        old_sd = rows.load_sds(conn, [old.SD_ID]).get(old.SD_ID) if old.SD_ID else None
        return [old_sd.location if old_sd else None, new_tbl.sd.location if new_tbl.sd else None]

    def _alter_table_tx(
        self,
        tx: Tx,
        dbname: str | None,
        tbl_name: str,
        new_tbl: Table,
        env: dict[str, str],
        cascade: bool,
        listings: fast_stats.Listings,
        valid_write_ids: str | None = None,
    ) -> tuple[str, str] | None:
        """Apply the change; returns the directory move done last, for the caller to undo if the
        commit fails. ``listings``: taken before the transaction (UnlistedLocations, before any
        change or move, when the location to list is not among them). ``valid_write_ids``: the
        writer's ValidWriteIdList (alter_table_req)."""
        conn = tx.conn
        try:
            old = self.table_row(conn, dbname, tbl_name, for_update=True)
        except NoSuchObjectException as e:
            raise InvalidOperationException(e.message) from e
        cat = old.CTLG_NAME
        before = self._table_image(conn, cat, old.DB_NAME, old.TBL_NAME)
        new_db = (new_tbl.dbName or old.DB_NAME).lower()
        new_name = new_tbl.tableName.lower()
        rename = new_db != old.DB_NAME or new_name != old.TBL_NAME
        target_db = self._rename_target(conn, cat, new_db, new_name) if rename else old
        table, ttype = self._altered_definition(conn, old, new_tbl, new_name)
        was_transactional = is_transactional_params(before.parameters)
        normalize_transactional(table.parameters, was_transactional)
        old_sd = rows.load_sds(conn, [old.SD_ID]).get(old.SD_ID) if old.SD_ID else None
        _check_type_changes(old, old_sd, table)
        pending_move = self._relocate(
            conn, old, old_sd, table, ttype, target_db if rename else None, new_name
        )
        self._alter_stats_params(conn, old, table, ttype, env, rename, pending_move, listings)
        new_sd_id = self._rewrite_table(conn, old, table, ttype, target_db.DB_ID, new_name)
        if cascade and _columns_changed(old_sd, table.sd) and new_sd_id is not None:
            self._cascade_columns(conn, old.TBL_ID, new_sd_id)
        if was_transactional and valid_write_ids is not None and _writer_write_id(table):
            conn.execute(TBLS.update().where(TBLS.c.TBL_ID == old.TBL_ID).values(WRITE_ID=table.writeId))
        if rename:
            self.on_table_renamed(conn, old.DB_NAME, old.TBL_NAME, new_db, new_name)
        # Hive: one ALTER_TABLE (renames included), named after the new table; partitions moved
        # or re-typed with the table get no events of their own.
        after = self._table_image(conn, cat, new_db, new_name)
        tx.event(
            events.ALTER_TABLE,
            events.alter_table_message(before, after),
            db=new_db,
            table=new_name,
            catalog=cat,
        )
        if pending_move is not None and storage.move_dir(*pending_move):
            return pending_move
        return None

    @staticmethod
    def _rename_target(conn: sa.Connection, cat: str, new_db: str, new_name: str) -> sa.Row[Any]:
        """The DBS row a table is renamed into; InvalidOperationException when that database is
        missing or already has a table ``new_name``."""
        target_db = conn.execute(sa.select(DBS).where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == new_db)).first()
        if target_db is None:
            raise InvalidOperationException(
                f"Unable to change partition or table. Database {new_db} does not exist"
            )
        clash = conn.execute(
            sa.select(TBLS.c.TBL_ID).where(TBLS.c.DB_ID == target_db.DB_ID, TBLS.c.TBL_NAME == new_name)
        ).first()
        if clash:
            raise InvalidOperationException(f"new table {new_db}.{new_name} already exists")
        return target_db

    @staticmethod
    def _altered_definition(
        conn: sa.Connection, old: sa.Row[Any], new_tbl: Table, new_name: str
    ) -> tuple[Table, str]:
        """The new definition to store (a copy of ``new_tbl`` with ``transient_lastDdlTime`` set
        and unsent partition keys taken from ``old``) and its effective table type.
        InvalidOperationException when the partition keys change or a column is invalid."""
        table = Table(**new_tbl.__dict__)
        table.parameters = dict(new_tbl.parameters or {})
        table.parameters.setdefault(DDL_TIME, str(now_s()))
        ttype = effective_table_type(table)
        if old.TBL_TYPE != VIEW:
            old_keys = [
                FieldSchema(name=k, type=t, comment=c)
                for k, t, c in conn.execute(
                    sa.select(
                        PARTITION_KEYS.c.PKEY_NAME, PARTITION_KEYS.c.PKEY_TYPE, PARTITION_KEYS.c.PKEY_COMMENT
                    )
                    .where(PARTITION_KEYS.c.TBL_ID == old.TBL_ID)
                    .order_by(PARTITION_KEYS.c.INTEGER_IDX)
                )
            ]
            if table.partitionKeys is None:  # not sent: unchanged
                table.partitionKeys = old_keys
            if not _same_partition_keys(old_keys, list(table.partitionKeys)):
                raise InvalidOperationException("partition keys can not be changed.")
        if table.sd is not None:
            _validate_columns(table.sd.cols, f"table {new_name}")
        return table, ttype

    def _relocate(
        self,
        conn: sa.Connection,
        old: sa.Row[Any],
        old_sd: StorageDescriptor | None,
        table: Table,
        ttype: str,
        rename_into: sa.Row[Any] | None,
        new_name: str,
    ) -> tuple[str, str] | None:
        """Settle ``table``'s location (on a copy of its storage descriptor): unsent keeps the old
        one; a managed table renamed (into the DBS row ``rename_into``) from its default place
        moves to its new default place with its partitions' locations. Returns the directory
        move ``(old, new)`` still to do, if any."""
        if table.sd is None:
            return None
        old_loc = old_sd.location if old_sd else None
        table.sd = table.sd.__class__(**table.sd.__dict__)
        same_loc = not table.sd.location or table.sd.location == old_loc
        # As Hive: a managed table moves with a rename only when it lives at its default
        # place (<db location>/<old name>); one created with its own LOCATION stays put.
        at_default = old_loc == storage.join_location(managed_root(old), old.TBL_NAME)
        if rename_into is not None and old.TBL_TYPE == MANAGED and ttype != VIEW and same_loc and at_default:
            new_loc = storage.join_location(managed_root(rename_into), new_name)
            if new_loc != old_loc:
                table.sd.location = new_loc
                moved_from = cast(str, old_loc)  # at_default: old_loc equals a joined (str) location
                self._relocate_partitions(conn, old.TBL_ID, moved_from, new_loc)
                return (moved_from, new_loc)
        elif not table.sd.location:
            table.sd.location = old_loc
        return None

    @staticmethod
    def _alter_stats_params(
        conn: sa.Connection,
        old: sa.Row[Any],
        table: Table,
        ttype: str,
        env: dict[str, str],
        rename: bool,
        pending_move: tuple[str, str] | None,
        listings: fast_stats.Listings,
    ) -> None:
        """Hive's statistics parameters of an altered table: an unpartitioned table's fast stats
        recomputed (from the listing of the directory as it will be after a move, taken before
        the transaction; partitions keep their own), and after a rename its column statistics
        marked accurate again (Hive re-writes them under the new name). Raises UnlistedLocations
        when that directory was not listed."""
        if not table.partitionKeys and ttype != VIEW and fast_stats.require_cal_stats(env, is_view=False):
            listed = pending_move[0] if pending_move else (table.sd.location if table.sd else None)
            if fast_stats.would_list(table.parameters, force=True):
                listings.require([listed])
            fast_stats.apply_listing(table.parameters, listings.taken.get(listed), env, force=True)
        if rename:
            with_stats = conn.execute(
                sa.select(TAB_COL_STATS.c.COLUMN_NAME).where(TAB_COL_STATS.c.TBL_ID == old.TBL_ID)
            ).scalars()
            fast_stats.mark_columns_accurate(table.parameters, sorted(set(with_stats)))

    def _rewrite_table(
        self, conn: sa.Connection, old: sa.Row[Any], table: Table, ttype: str, db_id: int, new_name: str
    ) -> int | None:
        """Replace the stored definition of table ``old`` (now ``new_name`` in database ``db_id``)
        with ``table``: TBLS row, storage descriptor, parameters, partition keys and the other
        children. Returns the new SD_ID (None for a table without a storage descriptor)."""
        new_sd_id = rows.insert_sds(conn, [table.sd])[0] if table.sd is not None else None
        conn.execute(
            TBLS.update()
            .where(TBLS.c.TBL_ID == old.TBL_ID)
            .values(DB_ID=db_id, TBL_NAME=new_name, SD_ID=new_sd_id, **_table_values(table, ttype))
        )
        if old.SD_ID is not None:
            rows.delete_sds(conn, [old.SD_ID])
        conn.execute(TABLE_PARAMS.delete().where(TABLE_PARAMS.c.TBL_ID == old.TBL_ID))
        conn.execute(PARTITION_KEYS.delete().where(PARTITION_KEYS.c.TBL_ID == old.TBL_ID))
        self._write_table_children(conn, old.TBL_ID, table)
        return new_sd_id

    @staticmethod
    def _cascade_columns(conn: sa.Connection, tbl_id: int, new_sd_id: int) -> None:
        """ALTER ... CASCADE: every partition of the table takes the table's new column list."""
        cd = conn.execute(sa.select(SDS.c.CD_ID).where(SDS.c.SD_ID == new_sd_id)).scalar_one()
        part_sds = sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.TBL_ID == tbl_id)
        old_cds = (
            conn.execute(sa.select(SDS.c.CD_ID).where(SDS.c.SD_ID.in_(part_sds)).distinct()).scalars().all()
        )
        conn.execute(SDS.update().where(SDS.c.SD_ID.in_(part_sds)).values(CD_ID=cd))
        rows.delete_unused_cds(conn, old_cds)

    @staticmethod
    def _relocate_partitions(conn: sa.Connection, tbl_id: int, old_loc: str, new_loc: str) -> None:
        q = (
            sa.select(SDS.c.SD_ID, SDS.c.LOCATION)
            .select_from(PARTITIONS.join(SDS, PARTITIONS.c.SD_ID == SDS.c.SD_ID))
            .where(PARTITIONS.c.TBL_ID == tbl_id)
        )
        updates = [
            {"sd": sd_id, "loc": new_loc + loc[len(old_loc) :]}
            for sd_id, loc in conn.execute(q)
            if storage.is_subdir(loc, old_loc)
        ]
        if updates:
            conn.execute(
                SDS.update().where(sa.bindparam("sd") == SDS.c.SD_ID).values(LOCATION=sa.bindparam("loc")),
                updates,
            )

    # ---------------------------------------------------------------- drop
    def drop_table(self, dbname: str, name: str, deleteData: bool) -> None:  # noqa: N803
        """Drop a table and its partitions; a managed table's data is deleted after commit.

        Raises NoSuchObjectException ("db.t table not found").
        """
        with self.write() as tx:
            self._drop_table_tx(tx, dbname, name, deleteData)

    def drop_table_with_environment_context(
        self, dbname: str, name: str, deleteData: bool, environment_context: Any
    ) -> None:  # noqa: N803
        """:meth:`drop_table` (``ifPurge`` changes nothing: there is no trash)."""
        self.drop_table(dbname, name, deleteData)

    def _drop_table_tx(self, tx: Tx, db: str | None, tbl: str, delete_data: bool) -> None:
        """Drop one table inside ``tx``; ``db`` may be catalog-qualified (``@cat#db``).

        Appends DROP_TABLE (its partitions go without DROP_PARTITION events, as in Hive) and lets
        the txn layer forget the table's write ids (``on_table_dropped``)."""
        row = self.table_row(tx.conn, db, tbl, for_update=True)
        conn = tx.conn
        dropped = self._table_image(conn, row.CTLG_NAME, row.DB_NAME, row.TBL_NAME)
        part_ids = sa.select(PARTITIONS.c.PART_ID).where(PARTITIONS.c.TBL_ID == row.TBL_ID)
        # the storage descriptors of the partitions and of the table, with their locations, in one
        # query (a round trip fewer than two on PostgreSQL; UNION ALL keeps both parts on indexes)
        sds = conn.execute(
            sa.union_all(
                sa.select(SDS.c.SD_ID, SDS.c.LOCATION, sa.literal(0).label("is_table"))
                .select_from(PARTITIONS.join(SDS, PARTITIONS.c.SD_ID == SDS.c.SD_ID))
                .where(PARTITIONS.c.TBL_ID == row.TBL_ID),
                sa.select(SDS.c.SD_ID, SDS.c.LOCATION, sa.literal(1).label("is_table")).where(
                    SDS.c.SD_ID == row.SD_ID
                ),
            )
        ).all()
        part_locs: Sequence[str | None] = [r[1] for r in sds if not r[2]]
        tbl_loc: str | None = next((r[1] for r in sds if r[2]), None)
        sd_ids = [r[0] for r in sds if not r[2]] + ([row.SD_ID] if row.SD_ID else [])
        if conn.dialect.name == "postgresql":
            rows.delete_table_rows_pg(conn, row.TBL_ID, sd_ids)
        else:
            self._delete_partition_rows(conn, part_ids)
            conn.execute(TBLS.delete().where(TBLS.c.TBL_ID == row.TBL_ID))
            rows.delete_sds(conn, sd_ids)
        self.on_table_dropped(conn, row.DB_NAME, row.TBL_NAME)
        tx.event(
            events.DROP_TABLE,
            events.drop_table_message(dropped),
            db=row.DB_NAME,
            table=row.TBL_NAME,
            catalog=row.CTLG_NAME,
        )
        if delete_data and row.TBL_TYPE == MANAGED:
            doomed = [tbl_loc] + [p for p in part_locs if not storage.is_subdir(p, tbl_loc)]
            for loc in doomed:
                tx.after_commit.append(functools.partial(storage.delete_dir, loc))
