"""The HMS calls that create and drop remotes, and how a remote's objects look to clients.

``CREATE DATABASE`` / ``CREATE TABLE`` with ``hivemesh.remote.*`` properties store a link instead
of creating anything (after checking that the remote object exists and the local name is free);
dropping a linked database or table removes the link only, the remote object is untouched (a
CASCADE drop of a linked database is refused: its tables are read-only). Every
other call goes the normal way (``route``). Objects read through a link carry the remote's
configuration in their parameters, and a remote's managed tables are shown as external.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, cast

from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
)

from hivemesh.federation.members import Member
from hivemesh.federation.remotes.registry import LinkRegistry
from hivemesh.federation.rewrite import split_catalog
from hivemesh.federation.routes import REMOTE_LINK, methods_of
from hivemesh.hive.constants import EXTERNAL_TABLE, MANAGED_TABLE
from hivemesh.thrift.server import connection


class Calls(Protocol):
    """What link calls need of the federation (a :class:`~hivemesh.federation.routing.MemberCalls`)."""

    def resolve(self, client_db: str) -> tuple[Member, str]:
        """The member owning ``client_db`` and its real name there."""
        ...

    def call_member(self, member: Member, method: str, args: Sequence[Any]) -> Any:
        """One call on a member."""
        ...


class LinkCalls:
    """The calls of :data:`HMS_METHODS`: links of ``links`` are created and dropped here, every
    other object through ``route(method, args)``; ``fed`` resolves databases and calls members."""

    HMS_METHODS = methods_of(REMOTE_LINK)

    def __init__(self, fed: Calls, links: LinkRegistry | None, route: Callable[[str, Sequence[Any]], Any]):
        self.fed = fed
        self.links = links
        self.route = route

    def _link_create_database(self, database: Any) -> bool:
        if self.links is None:
            return False
        spec = self.links.database_spec(database.name, database.parameters)
        if spec is None:
            return False
        owner, real = self.fed.resolve(database.name)
        if owner.remote_spec is not None:
            raise AlreadyExistsException(f"Database {database.name} already exists")
        try:
            self.fed.call_member(owner, "get_database", [real])
        except NoSuchObjectException:
            pass
        else:
            raise AlreadyExistsException(f"Database {database.name} already exists")
        try:
            self.links.create(spec, owner_name=connection().user)
        except NoSuchObjectException as e:  # create_database declares no NoSuchObjectException
            raise InvalidObjectException(e.message) from e
        return True

    def _link_create_table(self, table: Any) -> bool:
        if self.links is None or table is None:
            return False
        spec = self.links.table_spec(table.dbName, table.tableName, table.parameters)
        if spec is None:
            return False
        owner, real = self.fed.resolve(table.dbName)
        if owner.remote_spec is not None:
            raise MetaException(
                f"hivemesh proxy: database {table.dbName} is a remote (read-only); create the table link elsewhere"
            )
        self.fed.call_member(owner, "get_database", [real])  # NoSuchObjectException if it is missing
        # table_spec(db, table) parsed a table name, so its spec is a table link (local_table set)
        if self.links.table(spec.local_db, cast(str, spec.local_table)) is not None:
            raise AlreadyExistsException(f"Table {table.dbName}.{table.tableName} already exists")
        try:
            self.fed.call_member(owner, "get_table", [real, table.tableName])
        except NoSuchObjectException:
            pass
        else:
            raise AlreadyExistsException(f"Table {table.dbName}.{table.tableName} already exists")
        self.links.create(spec, owner_name=connection().user)
        return True

    def create_database(self, database: Any) -> None:
        """Create a database; with ``hivemesh.remote.*`` properties, a link to a remote database."""
        if not self._link_create_database(database):
            self.route("create_database", [database])

    def _drop_database_link(self, name: str, cascade: bool) -> bool:
        """Remove the link if ``name`` is a remote database (True), refusing CASCADE."""
        db = split_catalog(name)[1].lower()
        if self.links is None or self.links.database(db) is None:
            return False
        if cascade:
            # CASCADE means "drop its tables too", and a remote's tables are read-only: a Hive
            # client cascading itself is refused at its first drop_table, so the raw call is too
            raise MetaException(
                f"hivemesh proxy: DROP DATABASE {db} CASCADE refused: it is a remote database, its "
                "tables are read-only; drop it without CASCADE to remove the link only"
            )
        self.links.drop(db)
        return True

    def drop_database(self, name: str, deleteData: bool, cascade: bool) -> None:  # noqa: N803
        """Drop a database; a remote database's link is removed, the remote is untouched.

        Raises MetaException for CASCADE on a remote database (its tables are read-only).
        """
        if self._drop_database_link(name, cascade):
            return
        self.route("drop_database", [name, deleteData, cascade])
        if self.links is not None:
            self.links.drop_database_links(split_catalog(name)[1].lower())

    def drop_database_req(self, req: Any) -> None:
        """Hive 4 form of :meth:`drop_database` (the same MetaException for CASCADE on a remote)."""
        if self._drop_database_link(req.name, bool(req.cascade)):
            return
        _, db = split_catalog(req.name)
        self.route("drop_database_req", [req])
        if self.links is not None:
            self.links.drop_database_links(db.lower())

    def create_table(self, tbl: Any) -> None:
        """Create a table; with ``hivemesh.remote.table``/``.uris``, a link to a remote table."""
        if not self._link_create_table(tbl):
            self.route("create_table", [tbl])

    def create_table_with_environment_context(self, tbl: Any, environment_context: Any) -> None:
        """As :meth:`create_table`."""
        if not self._link_create_table(tbl):
            self.route("create_table_with_environment_context", [tbl, environment_context])

    def create_table_req(self, request: Any) -> None:
        """As :meth:`create_table` (Hive 4 request form)."""
        if not self._link_create_table(getattr(request, "table", None)):
            self.route("create_table_req", [request])

    def create_table_with_constraints(self, tbl: Any, *constraints: Any) -> None:
        """As :meth:`create_table` (links take no constraints)."""
        if not self._link_create_table(tbl):
            self.route("create_table_with_constraints", [tbl, *constraints])

    def _drop_link(self, dbname: str, name: str) -> bool:
        if self.links is None:
            return False
        db = split_catalog(dbname)[1].lower()
        if self.links.table(db, name.lower()) is not None:
            self.links.drop(db, name.lower())
            return True
        return False

    def drop_table(self, dbname: str, name: str, deleteData: bool) -> None:  # noqa: N803
        """Drop a table; a remote table's link is removed, the remote table is untouched."""
        if not self._drop_link(dbname, name):
            self.route("drop_table", [dbname, name, deleteData])

    def drop_table_with_environment_context(
        self,
        dbname: str,
        name: str,
        deleteData: bool,  # noqa: N803
        environment_context: Any,
    ) -> None:
        """As :meth:`drop_table`."""
        if not self._drop_link(dbname, name):
            self.route("drop_table_with_environment_context", [dbname, name, deleteData, environment_context])


def decorate(member: Member, method: str, result: Any) -> None:
    """Append a remote's configuration to the parameters of the objects it returns; managed
    tables of a remote are shown as external (the link is read-only)."""
    extra = member.remote_spec.described_parameters()
    objs: Iterable[Any]
    if method.startswith("get_database"):
        objs = [result]
    elif method in ("get_table", "get_table_objects_by_name"):
        objs = result if isinstance(result, list) else [result]
    elif method == "get_table_req":
        objs = [getattr(result, "table", None)]
    elif method == "get_table_objects_by_name_req":
        objs = getattr(result, "tables", None) or []
    else:
        return
    for o in objs:
        if o is None:
            continue
        o.parameters = {**(o.parameters or {}), **extra}
        if getattr(o, "tableType", None) == MANAGED_TABLE:
            # a link is read-only: shown as external, no client treats a DROP as a data delete
            o.tableType = EXTERNAL_TABLE
            o.parameters["EXTERNAL"] = "TRUE"
