"""The federation: one HMS interface over a primary metastore, federated metastores and remotes.

:class:`Federation` is a catalog object for :class:`hivemesh.thrift.processor.HMSProcessor`. Every
method of the HMS interface is routed generically (:mod:`hivemesh.federation.rewrite` finds the
database and table names in its arguments): the database picks the member (a remote link first,
then a federated member by prefix or mapped database, else the primary), access control runs,
names are rewritten to the member's, the call is sent, and names in the result are rewritten back.
Calls that name no database go to the primary. Hand-written: the merged calls (databases, table
meta, functions, set_ugi) that run on every member in parallel with a per-member deadline, the
creation and removal of remotes, and transactions and locks (:mod:`hivemesh.federation.txns`).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AlreadyExistsException,
    GetAllFunctionsResponse,
    MetaException,
    NoSuchObjectException,
)
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport import TTransport

from hivemesh.federation.access import AccessDeniedError, denied, is_read
from hivemesh.federation.compat import FALLBACKS
from hivemesh.federation.config import DatabaseResolution, ProxySettings
from hivemesh.federation.members import Member, MemberUnavailableError, Session, unavailable
from hivemesh.federation.naming import rewrite_view_text
from hivemesh.federation.rewrite import (
    Collector,
    Renamer,
    method_plan,
    rename_args,
    rename_value,
    split_catalog,
    strip_default_catalog,
)
from hivemesh.hive.names import matches_pattern
from hivemesh.thrift.server import connection

log = logging.getLogger("hivemesh.federation.router")

SESSION_KEY = "hivemesh.proxy.session"
_TABLE_LIST_METHODS = frozenset(
    {"get_all_tables", "get_tables", "get_tables_by_type", "get_table_names_by_filter"}
)
_TABLE_OBJECT_METHODS = frozenset({"get_table", "get_table_objects_by_name"})

current = threading.local()
"""``current.member``: name of the member the running call went to (for the audit log)."""


class Registry:
    """The configured members (replaced as a whole when the configuration is reloaded)."""

    def __init__(self, settings: ProxySettings, primary: Member, federated: Sequence[Member]):
        self.settings = settings
        self.primary = primary
        self.federated = list(federated)
        self.resolution = settings.database_resolution
        self.by_prefix = sorted(self.federated, key=lambda m: len(m.names.prefix), reverse=True)
        self.duplicates: dict[str, list[str]] = {}

    @property
    def members(self) -> list[Member]:
        """The primary, then the federated members in file order."""
        return [self.primary, *self.federated]

    def member(self, name: str) -> Member | None:
        """The configured member called ``name``, else None."""
        return next((m for m in self.members if m.name == name), None)


class _In(Renamer):
    """Client names -> the member's names."""

    def __init__(self, member: Member):
        self.m = member

    def db(self, name: str) -> str:
        """Client name (possibly ``@cat#db``) -> the member's real name (default catalog dropped)."""
        return strip_default_catalog(name, self.m.names.db_in)

    def table(self, db: str, table: str) -> str:
        """Client table name -> the member's table name."""
        return self.m.names.table_in(split_catalog(db)[1], table)

    def view(self, text: str) -> str:
        """View text with client database names -> the member's names."""
        names = self.m.names
        if not names.renames:
            return text
        return rewrite_view_text(
            text, lambda q: names.db_in(q) if names.owns(q) in self.m.databases else None
        )


class _Out(Renamer):
    """The member's names -> client names."""

    def __init__(self, member: Member, call_db: str | None):
        self.m = member
        self.known = member.databases | ({call_db} if call_db else set())

    def db(self, name: str) -> str:
        """The member's database name -> the client's name."""
        return self.m.names.db_out(name)

    def table(self, db: str, table: str) -> str:
        """The member's table name -> the client's name."""
        return self.m.names.table_out(db, table)

    def view(self, text: str) -> str:
        """View text with the member's database names -> the client's names."""
        return rewrite_view_text(text, lambda q: self.m.names.db_out(q) if q in self.known else None)


class Federation(ThriftHiveMetastore.Iface):
    """The proxy's catalog. ``registry``: the members; ``links``: the remotes registry (or None).
    Thread-safe; per-client state lives in the connection's :class:`Session`."""

    def __init__(self, registry: Registry, links: Any = None, observe: Callable[..., None] | None = None):
        from hivemesh.federation.txns import TxnRouter

        self.registry = registry
        self.links = links
        self.observe = observe  # (member, method, seconds, error) per member call
        self.pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="hms-merge")
        self.txns = TxnRouter(self)

    # ------------------------------------------------------------------ plumbing
    def session(self) -> Session:
        """The calling client connection's session."""
        state = connection()
        s = state.attrs.get(SESSION_KEY)
        if s is None:
            s = state.attrs[SESSION_KEY] = Session()
            state.on_close.append(s.close)
            if state.user and s.ugi is None:
                s.ugi = (state.user, list(state.groups))
        return s

    def call_member(
        self,
        member: Member,
        method: str,
        args: Sequence[Any],
        session: Session | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One call on a member; unreachable members raise MetaException naming them."""
        current.member = member.name
        t0 = time.perf_counter()
        error = None
        try:
            return member.call(session or self.session(), method, args, timeout_s)
        except MemberUnavailableError as e:
            error = "Unavailable"
            raise unavailable(e) from e
        except Exception as e:
            error = type(e).__name__
            raise
        finally:
            if self.observe is not None:
                self.observe(member.name, method, time.perf_counter() - t0, error)

    def resolve(self, client_db: str) -> tuple[Member, str]:
        """The member owning ``client_db`` and its real name there (remote links first, then a
        federated member's prefix (PREFIXED) or mapped databases (MANUAL), else the primary)."""
        reg = self.registry
        _, db = split_catalog(client_db)
        db = db.lower()
        if self.links is not None:
            link = self.links.database(db)
            if link is not None:
                return link, link.names.db_in(db)
        if reg.resolution is DatabaseResolution.PREFIXED:
            for m in reg.by_prefix:
                real = m.names.owns(db)
                if real is not None:
                    return m, real
        else:
            for m in reg.federated:
                real = m.names.owns(db)
                if real is not None and m.names.exposes(real):
                    return m, real
        real = reg.primary.names.owns(db) or db
        return reg.primary, real

    def _target(self, method: str, col: Collector) -> tuple[Member, str | None, str | None]:
        member: Member | None = None
        real_db = client_db = None
        for db in col.dbs:
            if split_catalog(db)[1] == "" and db.startswith("@"):
                continue  # "@hive#": all databases of a catalog
            m, real = self.resolve(db)
            if member is not None and m is not member:
                raise MetaException(
                    f"hivemesh proxy: {method} names databases of two metastores "
                    f"('{client_db}' in {member.name}, '{db}' in {m.name}); it cannot span metastores"
                )
            member, real_db, client_db = m, real, db
        if self.links is not None:
            for db, table in col.tables:
                link = self.links.table(split_catalog(db)[1].lower(), table.lower())
                if link is not None:
                    return link, link.names.db_in(split_catalog(db)[1]), db
        if member is None:
            return self.registry.primary, None, None
        return member, real_db, client_db

    # ------------------------------------------------------------------ generic routing
    def route(self, method: str, args: Sequence[Any]) -> Any:
        """Route one call by the databases its arguments name (see the module doc)."""
        plan = method_plan(method)
        argv = list(args)
        if not plan.names_databases:
            return self.call_member(self.registry.primary, method, argv)
        col = Collector()
        rename_args(plan, argv, col)
        member, real_db, client_db = self._target(method, col)
        names = member.names
        if real_db is not None and not names.exposes(real_db):
            if method.startswith("create_database"):
                raise MetaException(
                    f"hivemesh proxy: database '{client_db}' is not in the mapped_databases of {member.describe()}"
                )
            raise NoSuchObjectException(f"database {client_db} not found (not mapped by the proxy)")
        try:
            member.access.check(method, real_db, client_db)
        except AccessDeniedError as e:
            raise denied(e) from e
        if names.filters_tables:
            for db, table in col.tables:
                if not names.table_visible(names.db_in(split_catalog(db)[1]), table):
                    raise NoSuchObjectException(f"{db}.{table} table not found (not mapped by the proxy)")
        if names.renames or any(d.startswith("@") for d in col.dbs):
            rename_args(plan, argv, _In(member))
        result = self._call_with_fallback(member, method, argv)
        if method.startswith("create_database") and real_db is not None:
            member.access.created(real_db)
        if names.renames and plan.result is not None:
            result = rename_value(result, plan.result, _Out(member, real_db))
        if method in _TABLE_LIST_METHODS and real_db is not None:
            result = self._table_list(member, real_db, client_db, method, argv, result)
        elif names.filters_tables and method.startswith("get_table_objects_by_name"):
            result = self._filter_table_objects(member, real_db, result)
        if member.remote_spec is not None:
            self._decorate(member, method, result)
        return result

    def _call_with_fallback(self, member: Member, method: str, argv: list[Any]) -> Any:
        """Call ``method``; if the member lacks it and an older call means the same, use that."""
        fallback = FALLBACKS.get(method)
        if fallback is not None and method in member.missing:
            old, args_of, wrap = fallback
            return wrap(self.call_member(member, old, args_of(argv)))
        try:
            return self.call_member(member, method, argv)
        except TApplicationException as e:
            if fallback is None or e.type != TApplicationException.UNKNOWN_METHOD:
                raise
            member.missing.add(method)
            log.info("%s has no %s; using %s", member.describe(), method, fallback[0])
            old, args_of, wrap = fallback
            return wrap(self.call_member(member, old, args_of(argv)))

    def _table_list(
        self, member: Member, real_db: str, client_db: str | None, method: str, args: list[Any], names: Any
    ) -> Any:
        if not isinstance(names, list):
            return names
        out = [t for t in names if member.names.table_visible(real_db, t)]
        if self.links is not None and client_db is not None and method in ("get_all_tables", "get_tables"):
            local_db = split_catalog(client_db)[1].lower()
            extra = self.links.tables_in(local_db)
            if method == "get_tables" and extra:
                pattern = args[1] if len(args) > 1 else None
                extra = [t for t in extra if matches_pattern(t, pattern)]
            out = sorted(set(out) | set(extra))
        return out

    def _filter_table_objects(self, member: Member, real_db: str | None, result: Any) -> Any:
        tables = result if isinstance(result, list) else getattr(result, "tables", None)
        if tables is None:
            return result
        kept = [t for t in tables if member.names.table_visible(member.names.db_in(t.dbName), t.tableName)]
        if isinstance(result, list):
            return kept
        result.tables = kept
        return result

    @staticmethod
    def _decorate(member: Member, method: str, result: Any) -> None:
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
            if getattr(o, "tableType", None) == "MANAGED_TABLE":
                # a link is read-only: shown as external, no client treats a DROP as a data delete
                o.tableType = "EXTERNAL_TABLE"
                o.parameters["EXTERNAL"] = "TRUE"

    # ------------------------------------------------------------------ relaying
    def relay(self, method: str, args: Any, seqid: int, oprot: Any) -> bool | str:
        """Answer a read whose reply needs no change (no renaming, no filtering, no remote) with
        the member's reply bytes, undecoded: a 1,000-partition answer is skipped over in C instead
        of built as ~10,000 Python objects and encoded again. Returns False when the call must take
        the normal path (which then answers it), True when relayed, or the name of the HMS
        exception the relayed reply carries (for metrics and the audit log)."""
        plan = method_plan(method)
        reg = self.registry
        member = reg.primary
        if plan.names_databases:
            argv = [getattr(args, f[2]) for f in args.thrift_spec if f]
            col = Collector()
            rename_args(plan, argv, col)
            if any(d.startswith("@") for d in col.dbs):
                return False
            try:
                member, real_db, client_db = self._target(method, col)
            except Exception:
                return False
            names = member.names
            if member.remote_spec is not None or names.renames or names.filters_tables:
                return False
            if real_db is not None and not names.exposes(real_db):
                return False
            linked = (
                method in _TABLE_LIST_METHODS
                and self.links is not None
                and client_db is not None
                and self.links.tables_in(split_catalog(client_db)[1].lower())
            )
            if linked:  # table links of that database are added to the list
                return False
        if not member.relays or not member.available or method in member.missing:
            return False
        current.member = member.name
        t0 = time.perf_counter()
        try:
            raw = member.relay(self.session(), method, args)
        except MemberUnavailableError:
            if self.observe is not None:
                self.observe(member.name, method, time.perf_counter() - t0, "Unavailable")
            return False  # the normal path answers with the MetaException naming the member
        mtype, offset = _message_header(raw)
        error: str | None = None
        if mtype == TMessageType.EXCEPTION:
            if method in FALLBACKS and _application_error(raw).type == TApplicationException.UNKNOWN_METHOD:
                member.missing.add(method)
                return False  # the normal path answers with the older call
            error = "TApplicationException"
        else:
            error = _result_exception(method, raw, offset + 4)
        if self.observe is not None:
            self.observe(member.name, method, time.perf_counter() - t0, error)
        oprot.trans.write(raw[:offset] + struct.pack("!i", seqid) + raw[offset + 4 :])
        oprot.trans.flush()
        return error or True

    # ------------------------------------------------------------------ merged calls
    def merged(
        self,
        method: str,
        args_for: Callable[[Member], Sequence[Any] | None],
        timeout_s: float,
        links: str | None = None,
    ) -> list[tuple[Member, Any]]:
        """Run ``method`` on every available member in parallel; each gets ``timeout_s`` plus its
        latency. Members that fail, time out or are down contribute nothing (logged). The
        primary's failure is raised: without it the answer would be wrong, not just partial."""
        session = self.session()
        primary = self.registry.primary
        members = self.registry.members
        if self.links is not None and links is not None:
            members = members + self.links.members(tables=links == "all")
        jobs = []
        inline: tuple[Sequence[Any], float] | None = None
        for m in members:
            args = args_for(m)
            if args is None:
                continue
            if not m.available:
                if m is primary:
                    raise unavailable(m.unavailable_error())
                continue
            deadline = timeout_s + m.deadline_extra_s
            if m is primary:  # the primary runs in this thread (no hand-off), the others meanwhile
                inline = (args, deadline)
                continue
            own = Session() if m.is_thrift else session
            if m.is_thrift:
                own.ugi = session.ugi
                conn = session.take(m)
                if conn is not None:
                    own.give(m, conn)
            fut = self.pool.submit(self.call_member, m, method, args, own, deadline)
            jobs.append((m, fut, own, time.monotonic() + deadline))
        out = []
        if inline is not None:
            out.append((primary, self.call_member(primary, method, inline[0], session, inline[1])))
        current.member = "*"  # the audit log shows merged calls as going to every member
        for m, fut, own, due in jobs:
            try:
                out.append((m, fut.result(timeout=max(0.0, due - time.monotonic()) + 0.05)))
            except FutureTimeout:
                log.warning(
                    "%s: %s did not answer within %.0f ms; left out",
                    method, m.describe(), (timeout_s + m.deadline_extra_s) * 1000,
                )  # fmt: skip
                if self.observe is not None:
                    self.observe(m.name, method, timeout_s + m.deadline_extra_s, "Timeout")
                continue
            except Exception as e:
                log.warning("%s: %s failed (%s); left out", method, m.describe(), e)
                continue
            finally:
                if own is not session:  # hand the connection back to the client's session
                    conn = own.take(m)
                    if conn is not None:
                        session.give(m, conn)
                    own.close()  # a call still running (timed out) closes its connection when done
        return out

    def _db_deadline(self) -> float:
        return self.registry.settings.databases_timeout_ms / 1000

    def _all_databases(self) -> list[str]:
        names: set[str] = set()
        owners: dict[str, list[str]] = {}
        for m, dbs in self.merged("get_all_databases", lambda m: (), self._db_deadline(), "databases"):
            m.databases = frozenset(d.lower() for d in dbs or [])
            for d in dbs or []:
                if m.names.exposes(d.lower()):
                    client = m.names.db_out(d)
                    names.add(client)
                    owners.setdefault(client, []).append(m.name)
        self._note_duplicates(owners)
        return sorted(names)

    def _note_duplicates(self, owners: dict[str, list[str]]) -> None:
        dups = {db: ms for db, ms in owners.items() if len(ms) > 1}
        reg = self.registry
        if dups != reg.duplicates:
            for db, ms in sorted(dups.items()):
                owner, _ = self.resolve(db)
                log.warning(
                    "database name '%s' exists in metastores %s; the proxy routes it to '%s'",
                    db, ", ".join(ms), owner.name,
                )  # fmt: skip
            reg.duplicates = dups

    def get_all_databases(self) -> list[str]:
        """Databases of every available member (names as clients see them) and remote links."""
        return self._all_databases()

    def get_databases(self, pattern: str) -> list[str]:
        """Databases matching a Hive pattern, from every available member."""
        return [d for d in self._all_databases() if matches_pattern(d, pattern)]

    def get_table_meta(self, db_patterns: str, tbl_patterns: str, tbl_types: list[str]) -> list[Any]:
        """Table metadata from every member (deadline ``table_meta_timeout_ms``)."""

        def args_for(m: Member) -> tuple[Any, ...] | None:
            if not m.names.renames:
                return (db_patterns, tbl_patterns, tbl_types)
            alts = []
            for alt in (db_patterns or "*").split("|"):
                alt = alt.strip().lower()
                if alt.startswith("*"):
                    alts.append("*")
                elif m.names.prefix and alt.startswith(m.names.prefix):
                    alts.append("*")  # aliases and prefixes: narrow after renaming
                elif not m.names.prefix:
                    alts.append("*")
            return ("|".join(sorted(set(alts))), tbl_patterns, tbl_types) if alts else None

        out = []
        timeout = self.registry.settings.table_meta_timeout_ms / 1000
        for m, metas in self.merged("get_table_meta", args_for, timeout, "all"):
            for meta in metas or []:
                real_db = meta.dbName
                if not m.names.exposes(real_db.lower()) or not m.names.table_visible(real_db, meta.tableName):
                    continue
                if m.names.renames:
                    meta.tableName = m.names.table_out(real_db, meta.tableName)
                    meta.dbName = m.names.db_out(real_db)
                if matches_pattern(meta.dbName, db_patterns):
                    out.append(meta)
        return out

    def get_all_functions(self) -> Any:
        """Functions of every member (deadline ``functions_timeout_ms``), database names mapped."""
        funcs = []
        timeout = self.registry.settings.functions_timeout_ms / 1000
        for m, resp in self.merged(
            "get_all_functions", lambda m: () if m.remote_spec is None else None, timeout
        ):
            for f in getattr(resp, "functions", None) or []:
                if f.dbName is not None and not m.names.exposes(f.dbName.lower()):
                    continue
                if m.names.renames and f.dbName is not None:
                    f.dbName = m.names.db_out(f.dbName)
                funcs.append(f)
        return GetAllFunctionsResponse(functions=funcs)

    def set_ugi(self, user_name: str, group_names: list[str]) -> list[str]:
        """Remember the user for this connection (replayed on every member connection it opens,
        and shown in the audit log) and send it to the members it is connected to."""
        state = connection()
        state.user, state.groups = user_name, list(group_names or [])
        session = self.session()
        session.ugi = (user_name, list(group_names or []))
        for m in self.registry.members:
            conn = session.take(m)
            if conn is None:
                continue
            try:
                conn.call("set_ugi", (user_name, group_names))
                session.give(m, conn)
            except Exception:
                conn.close()
        return list(group_names or [])

    # ------------------------------------------------------------------ remotes
    def _link_create_database(self, database: Any) -> bool:
        if self.links is None:
            return False
        spec = self.links.database_spec(database.name, database.parameters)
        if spec is None:
            return False
        owner, real = self.resolve(database.name)
        if owner.remote_spec is not None:
            raise AlreadyExistsException(f"Database {database.name} already exists")
        try:
            self.call_member(owner, "get_database", [real])
        except NoSuchObjectException:
            pass
        else:
            raise AlreadyExistsException(f"Database {database.name} already exists")
        self.links.create(spec, owner_name=connection().user)
        return True

    def _link_create_table(self, table: Any) -> bool:
        if self.links is None or table is None:
            return False
        spec = self.links.table_spec(table.dbName, table.tableName, table.parameters)
        if spec is None:
            return False
        owner, real = self.resolve(table.dbName)
        if owner.remote_spec is not None:
            raise MetaException(
                f"hivemesh proxy: database {table.dbName} is a remote (read-only); create the table link elsewhere"
            )
        self.call_member(owner, "get_database", [real])  # NoSuchObjectException if it is missing
        if self.links.table(spec.local_db, spec.local_table) is not None:
            raise AlreadyExistsException(f"Table {table.dbName}.{table.tableName} already exists")
        try:
            self.call_member(owner, "get_table", [real, table.tableName])
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

    def drop_database(self, name: str, deleteData: bool, cascade: bool) -> None:  # noqa: N803
        """Drop a database; a remote database's link is removed, the remote is untouched."""
        _, db = split_catalog(name)
        if self.links is not None and self.links.database(db.lower()) is not None:
            self.links.drop(db.lower())
            return
        self.route("drop_database", [name, deleteData, cascade])
        if self.links is not None:
            self.links.drop_database_links(db.lower())

    def drop_database_req(self, req: Any) -> None:
        """Hive 4 form of :meth:`drop_database`."""
        _, db = split_catalog(req.name)
        if self.links is not None and self.links.database(db.lower()) is not None:
            self.links.drop(db.lower())
            return
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


def _message_header(raw: bytes) -> tuple[int, int]:
    """(message type, offset of the seqid) of a binary-protocol message."""
    version = int.from_bytes(raw[0:4], "big", signed=True)
    if version < 0:  # strict header: version | type, name, seqid
        return version & 0xFF, 8 + int.from_bytes(raw[4:8], "big")
    return raw[4 + version], 4 + version + 1


def _application_error(raw: bytes) -> TApplicationException:
    proto = TBinaryProtocol.TBinaryProtocolAccelerated(TTransport.TMemoryBuffer(raw))
    proto.readMessageBegin()
    ex = TApplicationException()
    ex.read(proto)
    return ex


def _result_exception(method: str, raw: bytes, at: int) -> str | None:
    """Class name of the exception field a result struct starts with (None: a success)."""
    if len(raw) < at + 3 or raw[at] == TType.STOP:
        return None
    fid = int.from_bytes(raw[at + 1 : at + 3], "big", signed=True)
    if fid == 0:
        return None
    spec = getattr(ThriftHiveMetastore, f"{method}_result").thrift_spec
    entry = spec[fid] if 0 <= fid < len(spec) else None
    return entry[3][0].__name__ if entry and entry[3] else "HMSException"


_HAND_WRITTEN = {n for n, v in vars(Federation).items() if callable(v) and not n.startswith("_")}
_TXN_METHODS = (
    "open_txns", "commit_txn", "abort_txn", "abort_txns", "heartbeat", "heartbeat_txn_range",
    "allocate_table_write_ids", "get_valid_write_ids", "lock", "check_lock", "unlock", "add_dynamic_partitions",
)  # fmt: skip


def _generic(name: str) -> Callable[..., Any]:
    def method(self: Federation, *args: Any) -> Any:
        return self.route(name, args)

    method.__name__ = name
    method.__doc__ = f"HMS ``{name}``, routed by the databases its arguments name."
    return method


def _txn(name: str) -> Callable[..., Any]:
    def method(self: Federation, *args: Any) -> Any:
        return getattr(self.txns, name)(*args)

    method.__name__ = name
    method.__doc__ = f"HMS ``{name}``, routed to the metastores of the tables involved (see txns)."
    return method


for _name in dir(ThriftHiveMetastore.Iface):
    if _name.startswith("_") or _name in _HAND_WRITTEN:
        continue
    setattr(Federation, _name, _txn(_name) if _name in _TXN_METHODS else _generic(_name))

_MERGED = {"get_all_databases", "get_databases", "get_table_meta", "get_all_functions", "set_ugi"}
Federation.relay_methods = frozenset(
    n
    for n in dir(ThriftHiveMetastore.Iface)
    if not n.startswith("_")
    and n not in _HAND_WRITTEN
    and n not in _TXN_METHODS
    and n not in _MERGED
    and is_read(n)
)
"""Reads whose replies may be relayed undecoded (see :meth:`Federation.relay`)."""

__all__ = ["Federation", "Registry"]
