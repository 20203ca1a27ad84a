"""Permanent function methods of the HMS interface."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

import sqlalchemy as sa
from hive_metastore.ttypes import (
    Function,
    GetAllFunctionsResponse,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    ResourceUri,
)

from hivemesh.hive import events
from hivemesh.hive.constants import now_s
from hivemesh.hive.names import db_ref, matches_pattern
from hivemesh.metastore.base import CatalogBase, validate_name
from hivemesh.metastore.schema import DBS, FUNC_RU, FUNCS


class FunctionMixin(CatalogBase):
    """create/get/list/alter/drop of permanent functions (``FUNCS``, ``FUNC_RU``).

    Events: CREATE_FUNCTION and DROP_FUNCTION. ``alter_function`` appends none: Hive has no
    ALTER_FUNCTION event type and its HMSHandler.alter_function notifies no listener.
    """

    def _load_functions(self, conn: sa.Connection, where: sa.ColumnElement[bool]) -> list[Function]:
        q = (
            sa.select(FUNCS, DBS.c.NAME.label("DB_NAME"), DBS.c.CTLG_NAME)
            .select_from(FUNCS.join(DBS, FUNCS.c.DB_ID == DBS.c.DB_ID))
            .where(where)
            .order_by(DBS.c.NAME, FUNCS.c.FUNC_NAME)
        )
        found = conn.execute(q).all()
        res: dict[int, list[ResourceUri]] = defaultdict(list)
        if found:
            for fid, rtype, uri in conn.execute(
                sa.select(FUNC_RU.c.FUNC_ID, FUNC_RU.c.RESOURCE_TYPE, FUNC_RU.c.RESOURCE_URI)
                .where(FUNC_RU.c.FUNC_ID.in_([r.FUNC_ID for r in found]))
                .order_by(FUNC_RU.c.FUNC_ID, FUNC_RU.c.INTEGER_IDX)
            ):
                res[fid].append(ResourceUri(resourceType=rtype, uri=uri))
        return [
            Function(
                functionName=r.FUNC_NAME,
                dbName=r.DB_NAME,
                className=r.CLASS_NAME,
                ownerName=r.OWNER_NAME,
                ownerType=r.OWNER_TYPE,
                createTime=r.CREATE_TIME,
                functionType=r.FUNC_TYPE,
                resourceUris=res.get(r.FUNC_ID, []),
                catName=r.CTLG_NAME,
            )
            for r in found
        ]

    def _insert_function(self, conn: sa.Connection, db_id: int, func: Function) -> int:
        fid: int = cast(  # one row inserted: inserted_primary_key is set
            "sa.Row[Any]",
            conn.execute(
                FUNCS.insert().values(
                    DB_ID=db_id,
                    FUNC_NAME=func.functionName.lower(),
                    CLASS_NAME=func.className,
                    OWNER_NAME=func.ownerName,
                    OWNER_TYPE=func.ownerType,
                    CREATE_TIME=func.createTime or now_s(),
                    FUNC_TYPE=func.functionType or 1,
                )
            ).inserted_primary_key,
        )[0]
        if func.resourceUris:
            conn.execute(
                FUNC_RU.insert(),
                [
                    {"FUNC_ID": fid, "RESOURCE_TYPE": r.resourceType, "RESOURCE_URI": r.uri, "INTEGER_IDX": i}
                    for i, r in enumerate(func.resourceUris)
                ],
            )
        return fid

    def create_function(self, func: Function) -> None:
        """Raises AlreadyExistsException, NoSuchObjectException (database), InvalidObjectException."""
        if not validate_name(func.functionName):
            raise InvalidObjectException(f"{func.functionName} is not a valid object name")
        if not func.className:
            raise InvalidObjectException("Function class name cannot be empty")
        db = db_ref(func.dbName, func.catName)
        with self.write() as tx:
            row = self.db_row(tx.conn, db)
            if tx.conn.execute(
                sa.select(FUNCS.c.FUNC_ID).where(
                    FUNCS.c.DB_ID == row.DB_ID, func.functionName.lower() == FUNCS.c.FUNC_NAME
                )
            ).first():
                raise self.already_exists(f"Function {func.functionName} already exists")
            fid = self._insert_function(tx.conn, row.DB_ID, func)
            created = self._load_functions(tx.conn, FUNCS.c.FUNC_ID == fid)[0]
            tx.event(
                events.CREATE_FUNCTION,
                events.create_function_message(created),
                db=row.NAME,
                catalog=row.CTLG_NAME,
            )

    def get_function(self, dbName: str, funcName: str) -> Function:  # noqa: N803 - Thrift names
        """Raises NoSuchObjectException ("Function db.f does not exist": Spark matches that text)."""
        cat, db = self.db_name(dbName)
        with self.read() as conn:
            found = self._load_functions(
                conn,
                sa.and_(
                    DBS.c.CTLG_NAME == cat, DBS.c.NAME == db, FUNCS.c.FUNC_NAME == (funcName or "").lower()
                ),
            )
        if not found:
            raise NoSuchObjectException(f"Function {db}.{funcName} does not exist")
        return found[0]

    def get_functions(self, dbName: str, pattern: str) -> list[str]:  # noqa: N803
        """Function names of a database matching a Hive pattern."""
        cat, db = self.db_name(dbName)
        with self.read() as conn:
            q = (
                sa.select(FUNCS.c.FUNC_NAME)
                .select_from(FUNCS.join(DBS, FUNCS.c.DB_ID == DBS.c.DB_ID))
                .where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == db)
                .order_by(FUNCS.c.FUNC_NAME)
            )
            return [n for n in conn.execute(q).scalars() if matches_pattern(n, pattern)]

    def get_all_functions(self) -> GetAllFunctionsResponse:
        """Every permanent function of every database."""
        with self.read() as conn:
            return GetAllFunctionsResponse(functions=self._load_functions(conn, sa.true()))

    def alter_function(self, dbName: str, funcName: str, newFunc: Function) -> None:  # noqa: N803
        """Replace a function. Raises MetaException("function <name> doesn't exist") for a missing
        function (as Hive's ObjectStore.alterFunction), InvalidOperationException for a missing
        database."""
        cat, db = self.db_name(dbName)
        with self.write() as tx:
            row = self.db_row(tx.conn, dbName, exc=InvalidOperationException)
            fid = tx.conn.execute(
                sa.select(FUNCS.c.FUNC_ID).where(
                    FUNCS.c.DB_ID == row.DB_ID, FUNCS.c.FUNC_NAME == funcName.lower()
                )
            ).scalar()
            if fid is None:
                raise MetaException(f"function {funcName.lower()} doesn't exist")
            tx.conn.execute(FUNCS.delete().where(fid == FUNCS.c.FUNC_ID))
            self._insert_function(tx.conn, row.DB_ID, newFunc)

    def drop_function(self, dbName: str, funcName: str) -> None:  # noqa: N803
        """Raises NoSuchObjectException when it does not exist."""
        cat, db = self.db_name(dbName)
        with self.write() as tx:
            row = self.db_row(tx.conn, dbName)
            n = tx.conn.execute(
                FUNCS.delete().where(
                    FUNCS.c.DB_ID == row.DB_ID, FUNCS.c.FUNC_NAME == (funcName or "").lower()
                )
            ).rowcount
            if not n:
                raise NoSuchObjectException(f"Function {db}.{funcName} does not exist")
            dropped = Function(functionName=funcName.lower(), dbName=row.NAME, catName=row.CTLG_NAME)
            tx.event(
                events.DROP_FUNCTION,
                events.drop_function_message(dropped),
                db=row.NAME,
                catalog=row.CTLG_NAME,
            )
