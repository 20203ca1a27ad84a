"""The federation: one HMS interface over a primary metastore, federated metastores and remotes.

:class:`Federation` is the catalog object the proxy serves with
:class:`hivemesh.thrift.processor.HMSProcessor`. It answers every method of the HMS interface
(:data:`hivemesh.hive.hms_methods.METHODS`) as its row of the routing table
(:data:`hivemesh.federation.routes.ROUTES`) says, by one of four parts:

- transactions and locks (PER_OWNER: :class:`~hivemesh.federation.txns.TxnRouter`), sent to the
  metastores of the tables involved;
- the merged calls (MERGED: :class:`~hivemesh.federation.merged.MergedCalls`: databases, table
  meta, functions, ``set_ugi``), run on every member in parallel with a per-member deadline;
- the creation and removal of remotes (REMOTE_LINK:
  :class:`~hivemesh.federation.remotes.calls.LinkCalls`);
- every other method (BY_DATABASE), routed generically by :meth:`Federation.route`: the databases
  its arguments name (:mod:`hivemesh.federation.rewrite` finds them) pick the member (see
  :meth:`~hivemesh.federation.routing.MemberCalls.resolve`), access control runs, names are
  rewritten to the member's, the call is sent, and names in the result are rewritten back. Calls
  that name no database (PRIMARY) go to the primary. Reads among them whose reply needs no change
  are relayed as bytes (:mod:`hivemesh.federation.relay`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from hive_metastore.ttypes import MetaException, NoSuchObjectException
from thrift.Thrift import TApplicationException

from hivemesh.federation.access import AccessDeniedError, denied
from hivemesh.federation.compat import FALLBACKS
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.merged import MergedCalls
from hivemesh.federation.relay import Relay, relayable
from hivemesh.federation.remotes.calls import LinkCalls, decorate
from hivemesh.federation.remotes.registry import LinkRegistry
from hivemesh.federation.rewrite import Collector, method_plan, rename_args, rename_value, split_catalog
from hivemesh.federation.routes import (
    BY_DATABASE,
    MERGED,
    PER_OWNER,
    PRIMARY,
    REMOTE_LINK,
    ROUTES,
    methods_of,
)
from hivemesh.federation.routing import (
    TABLE_LIST_METHODS,
    MemberCalls,
    NamesIn,
    NamesOut,
    Observer,
    Registry,
    current,
)
from hivemesh.federation.txns import TxnRouter
from hivemesh.hive.names import matches_pattern

log = logging.getLogger(__name__)


class Federation(MemberCalls):
    """The proxy's catalog. ``registry``: the members; ``links``: the remotes (or None);
    ``indexes``: the numbering of members in lock ids; ``observe``: called after each member call.
    Thread-safe; per-client state lives in the connection's Session.

    ``relay`` and ``relay_methods`` are the processor's hooks for answering reads with a member's
    reply bytes (see :class:`~hivemesh.federation.relay.Relay`)."""

    def __init__(
        self,
        registry: Registry,
        links: LinkRegistry | None,
        indexes: MemberIndexes,
        observe: Observer | None = None,
    ):
        super().__init__(registry, links, observe)
        self.txns = TxnRouter(self, indexes)
        self.merged_calls = MergedCalls(self)
        self.link_calls = LinkCalls(self, links, self.route)
        self.relay = Relay(self)
        self.relay_methods = relayable(methods_of(BY_DATABASE) | methods_of(PRIMARY))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """HMS method ``name``, answered as its row of :data:`~hivemesh.federation.routes.ROUTES`
        says: PER_OWNER by :attr:`txns`, MERGED by :attr:`merged_calls`, REMOTE_LINK by
        :attr:`link_calls`, BY_DATABASE and PRIMARY by :meth:`route`. AttributeError for a name
        that is no HMS method. (Looked up once per method by the Thrift processor.)"""
        row = ROUTES.get(name)
        if row is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if row.strategy is PER_OWNER:
            return cast(Callable[..., Any], getattr(self.txns, name))
        if row.strategy is MERGED:
            return cast(Callable[..., Any], getattr(self.merged_calls, name))
        if row.strategy is REMOTE_LINK:
            return cast(Callable[..., Any], getattr(self.link_calls, name))

        def method(*args: Any) -> Any:
            return self.route(name, args)

        method.__name__ = name
        method.__doc__ = f"HMS ``{name}``: {row.strategy} (see :meth:`Federation.route`)."
        return method

    def close(self) -> None:
        """Stop the merged calls' worker threads (members are closed by their owner)."""
        self.merged_calls.close()

    # ------------------------------------------------------------------ generic routing
    def route(self, method: str, args: Sequence[Any]) -> Any:
        """Route one call by the databases its arguments name (see the module doc)."""
        plan = method_plan(method)
        argv = list(args)
        if ROUTES[method].strategy is PRIMARY:
            return self.call_member(self.registry.primary, method, argv)
        col = Collector()
        rename_args(plan, argv, col)
        member, real_db, client_db = self.target(method, col)
        current.member = member.name  # the audit line names it even when the call is refused here
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
            rename_args(plan, argv, NamesIn(member))
        result = self._call_with_fallback(member, method, argv)
        if method.startswith("create_database") and real_db is not None:
            member.access.created(real_db)
        if names.renames and plan.result is not None:
            result = rename_value(result, plan.result, NamesOut(member, real_db))
        if method in TABLE_LIST_METHODS and real_db is not None:
            result = self._table_list(member, real_db, client_db, method, argv, result)
        elif names.filters_tables and method.startswith("get_table_objects_by_name"):
            result = self._filter_table_objects(member, real_db, result)
        if member.remote_spec is not None:
            decorate(member, method, result)
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
