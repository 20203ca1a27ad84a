"""Database methods of the HMS interface (create, get, list, alter, drop)."""

from __future__ import annotations

import functools
from typing import Any, cast

import sqlalchemy as sa
from hive_metastore.ttypes import (
    Database,
    DatabaseType,
    DropDatabaseRequest,
    Function,
    GetDatabaseRequest,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    PrincipalType,
)

from hivemesh import storage
from hivemesh.hive import events
from hivemesh.hive.constants import now_s
from hivemesh.hive.names import DEFAULT_CATALOG, db_ref, matches_pattern, parse_db_name
from hivemesh.metastore.base import CatalogBase, Tx, calling_user, validate_name
from hivemesh.metastore.schema import CTLGS, DATABASE_PARAMS, DBS, FUNCS, TBLS

# One database by ``cat`` and ``db`` with its parameters, one row per parameter (NULLs for none).
_DB_WITH_PARAMS = (
    sa.select(
        DBS,
        DATABASE_PARAMS.c.PARAM_KEY.label("param_key"),
        DATABASE_PARAMS.c.PARAM_VALUE.label("param_value"),
    )
    .select_from(DBS.outerjoin(DATABASE_PARAMS, DATABASE_PARAMS.c.DB_ID == DBS.c.DB_ID))
    .where(DBS.c.CTLG_NAME == sa.bindparam("cat"), DBS.c.NAME == sa.bindparam("db"))
)

DEFAULT_DB = "default"


class DatabaseMixin(CatalogBase):
    """HMS database calls. Names are lower-cased; ``@cat#db`` forms are accepted everywhere."""

    def default_db_location(self, name: str) -> str:
        """``<warehouse>/<name>.db``; the warehouse root itself for ``default`` (as Hive)."""
        return self.warehouse if name == DEFAULT_DB else storage.join_location(self.warehouse, f"{name}.db")

    def _to_database(self, conn: sa.Connection, row: sa.Row[Any]) -> Database:
        """A Database from its DBS ``row``, its parameters read on ``conn``."""
        params = {
            k: v or ""
            for k, v in conn.execute(
                sa.select(DATABASE_PARAMS.c.PARAM_KEY, DATABASE_PARAMS.c.PARAM_VALUE).where(
                    DATABASE_PARAMS.c.DB_ID == row.DB_ID
                )
            )
        }
        return self._database(row, params)

    @staticmethod
    def _database(row: Any, params: dict[str, str]) -> Database:
        """A Database from its DBS ``row`` and its parameters."""
        return Database(
            name=row.NAME,
            description=row.DESC,
            locationUri=row.DB_LOCATION_URI,
            managedLocationUri=row.DB_MANAGED_LOCATION_URI,
            parameters=params,
            ownerName=row.OWNER_NAME,
            ownerType=row.OWNER_TYPE if row.OWNER_TYPE is not None else None,
            catalogName=row.CTLG_NAME,
            createTime=row.CREATE_TIME,
            type=DatabaseType.NATIVE,  # Hive 4: REMOTE only for databases of a data connector
        )

    def create_database(self, database: Database) -> None:
        """Create a database; raises AlreadyExistsException, InvalidObjectException (bad name),
        MetaException (a location or managed location :meth:`checked_location` refuses). Its managed
        tables go under ``managedLocationUri`` when set (Hive 3+), else under ``locationUri``.

        Without ``ownerName`` the calling user (the connection's ``set_ugi`` user, else the user the
        metastore runs as) owns it, as in Hive 3/4.
        """
        with self.write() as tx:
            self._create_database_tx(tx, database)

    def _create_database_tx(self, tx: Tx, database: Database) -> None:
        """Create a database inside ``tx`` (with its CREATE_DATABASE event); errors as
        :meth:`create_database`, and InvalidObjectException ("No such catalog x") for a database
        of a missing catalog. Without a location it goes to ``<warehouse>/<name>.db``, in another
        catalog than ``hive`` to ``<catalog location>/<name>.db`` (as Hive)."""
        cat = (database.catalogName or "hive").lower()
        name = (database.name or "").lower()
        if not validate_name(name):
            raise InvalidObjectException(f"{database.name} is not a valid database name")
        catalog = tx.conn.execute(sa.select(CTLGS.c.LOCATION_URI).where(CTLGS.c.NAME == cat)).first()
        if catalog is None:
            raise InvalidObjectException(f"No such catalog {cat}")
        if database.locationUri:
            location = self.checked_location(database.locationUri)
        elif cat == DEFAULT_CATALOG:
            location = self.default_db_location(name)
        else:
            location = storage.join_location(catalog.LOCATION_URI, f"{name}.db")
        managed = self.checked_location(database.managedLocationUri) if database.managedLocationUri else None
        exists = tx.conn.execute(
            sa.select(DBS.c.DB_ID).where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == name)
        ).first()
        if exists:
            raise self.already_exists(f"Database {name} already exists")
        db_id = cast(  # one row inserted: inserted_primary_key is set
            "sa.Row[Any]",
            tx.conn.execute(
                DBS.insert().values(
                    NAME=name,
                    CTLG_NAME=cat,
                    DESC=database.description,
                    DB_LOCATION_URI=location,
                    DB_MANAGED_LOCATION_URI=managed,
                    OWNER_NAME=database.ownerName if database.ownerName is not None else calling_user(),
                    OWNER_TYPE=database.ownerType if database.ownerType is not None else PrincipalType.USER,
                    CREATE_TIME=database.createTime or now_s(),
                )
            ).inserted_primary_key,
        )[0]
        if database.parameters:
            tx.conn.execute(
                DATABASE_PARAMS.insert(),
                [{"DB_ID": db_id, "PARAM_KEY": k, "PARAM_VALUE": v} for k, v in database.parameters.items()],
            )
        created = self._to_database(tx.conn, self._db_by_id(tx.conn, db_id))
        tx.event(events.CREATE_DATABASE, events.create_database_message(created), db=name, catalog=cat)
        tx.after_commit.append(lambda: storage.make_dirs(location))
        if managed:  # as Hive 4.2: the managed location's directory is made too
            tx.after_commit.append(lambda: storage.make_dirs(managed))

    @staticmethod
    def _db_by_id(conn: sa.Connection, db_id: int) -> sa.Row[Any]:
        return conn.execute(sa.select(DBS).where(DBS.c.DB_ID == db_id)).one()

    def get_database(self, name: str | None) -> Database:
        """Raises NoSuchObjectException ("There is no database named x")."""
        cat, db = self.db_name(name)
        with self.read_statement() as conn:  # the row and its parameters in one statement
            found = conn.execute(_DB_WITH_PARAMS, {"cat": cat, "db": db}).all()
        if not found:
            self.db_row_missing(cat, db)
        params = {r.param_key: r.param_value or "" for r in found if r.param_key is not None}
        return self._database(found[0], params)

    def get_database_req(self, request: GetDatabaseRequest) -> Database:
        """Hive 4 GetDatabaseRequest form of :meth:`get_database`."""
        return self.get_database(db_ref(request.name, request.catalogName))

    def get_all_databases(self) -> list[str]:
        """Names of every database of the default catalog, sorted."""
        return self.get_databases(None)

    def get_databases(self, pattern: str | None) -> list[str]:
        """Database names matching a Hive pattern (``*``, ``|``); ``@cat#pattern`` selects a catalog.

        An empty pattern (``""`` or ``@cat#!``) matches no name, as in Hive 4; ``None`` or ``@cat#``
        lists every database of the catalog.
        """
        cat, pat = parse_db_name(pattern) if pattern is not None else ("hive", None)
        if pat == "":
            return []
        with self.read_statement() as conn:
            names = conn.execute(
                sa.select(DBS.c.NAME).where(DBS.c.CTLG_NAME == cat).order_by(DBS.c.NAME)
            ).scalars()
            return [n for n in names if matches_pattern(n, pat)]

    def alter_database(self, dbname: str, db: Database) -> None:
        """Replace description, location, managed location, owner and parameters (an unset
        location or managed location keeps the old one, as in Hive); raises
        NoSuchObjectException, MetaException (a location :meth:`checked_location` refuses)."""
        with self.write() as tx:
            row = self.db_row(tx.conn, dbname)
            before = self._to_database(tx.conn, row)
            values = {
                "DESC": db.description if db.description is not None else row.DESC,
                "OWNER_NAME": db.ownerName if db.ownerName is not None else row.OWNER_NAME,
                "OWNER_TYPE": db.ownerType if db.ownerType is not None else row.OWNER_TYPE,
            }
            if db.locationUri:
                values["DB_LOCATION_URI"] = self.checked_location(db.locationUri)
            if db.managedLocationUri:
                values["DB_MANAGED_LOCATION_URI"] = self.checked_location(db.managedLocationUri)
            tx.conn.execute(DBS.update().where(DBS.c.DB_ID == row.DB_ID).values(**values))
            if db.parameters is not None:
                tx.conn.execute(DATABASE_PARAMS.delete().where(DATABASE_PARAMS.c.DB_ID == row.DB_ID))
                if db.parameters:
                    tx.conn.execute(
                        DATABASE_PARAMS.insert(),
                        [
                            {"DB_ID": row.DB_ID, "PARAM_KEY": k, "PARAM_VALUE": v}
                            for k, v in db.parameters.items()
                        ],
                    )
            after = self._to_database(tx.conn, self._db_by_id(tx.conn, row.DB_ID))
            tx.event(
                events.ALTER_DATABASE,
                events.alter_database_message(before, after),
                db=row.NAME,
                catalog=row.CTLG_NAME,
            )

    def drop_database(self, name: str | None, deleteData: bool, cascade: bool) -> None:  # noqa: N803 - Thrift names
        """Drop a database; with ``cascade`` its tables and functions too.

        Events, in Hive's order (HMSHandler.drop_database_core): DROP_FUNCTION per function,
        DROP_TABLE per table (no DROP_PARTITION), then DROP_DATABASE. Raises NoSuchObjectException;
        InvalidOperationException when not empty without cascade; MetaException for ``default``. Managed
        data and (with ``deleteData``) the database's directory and its managed location's are
        deleted after the metadata change commits.
        """
        with self.write() as tx:
            self._drop_database_tx(tx, name, deleteData, cascade)

    def _drop_database_tx(self, tx: Tx, name: str | None, delete_data: bool, cascade: bool) -> None:
        """Drop a database inside ``tx``; errors as :meth:`drop_database`."""
        cat, db = self.db_name(name)
        if db == DEFAULT_DB and cat == "hive":
            raise MetaException("Can not drop default database")
        row = self.db_row(tx.conn, name)
        tables = tx.conn.execute(sa.select(TBLS.c.TBL_NAME).where(TBLS.c.DB_ID == row.DB_ID)).scalars().all()
        funcs = (
            tx.conn.execute(sa.select(FUNCS.c.FUNC_NAME).where(FUNCS.c.DB_ID == row.DB_ID)).scalars().all()
        )
        if not cascade:
            if tables:
                raise InvalidOperationException(f"Database {db} is not empty. One or more tables exist.")
            if funcs:
                raise InvalidOperationException(f"Database {db} is not empty. One or more functions exist.")
        database = self._to_database(tx.conn, row)
        if funcs:
            tx.conn.execute(FUNCS.delete().where(FUNCS.c.DB_ID == row.DB_ID))
            for f in funcs:
                tx.event(
                    events.DROP_FUNCTION,
                    events.drop_function_message(Function(functionName=f, dbName=row.NAME, catName=cat)),
                    db=row.NAME,
                    catalog=cat,
                )
        for t in tables:
            self._drop_table_tx(tx, db_ref(row.NAME, cat), t, delete_data)
        tx.conn.execute(DATABASE_PARAMS.delete().where(DATABASE_PARAMS.c.DB_ID == row.DB_ID))
        tx.conn.execute(DBS.delete().where(DBS.c.DB_ID == row.DB_ID))
        tx.event(events.DROP_DATABASE, events.drop_database_message(database), db=row.NAME, catalog=cat)
        if delete_data:  # the database's directories, its managed location's too (as Hive 4.2)
            for loc in (row.DB_LOCATION_URI, row.DB_MANAGED_LOCATION_URI):
                if loc:
                    tx.after_commit.append(functools.partial(storage.delete_dir, loc))

    def drop_database_req(self, req: DropDatabaseRequest) -> None:
        """Hive 4 DropDatabaseRequest form of :meth:`drop_database`."""
        try:
            self.drop_database(db_ref(req.name, req.catalogName), req.deleteData, req.cascade)
        except NoSuchObjectException:
            if not req.ignoreUnknownDb:
                raise
