"""Calls the proxy answers from every member at once: the database lists, table metadata,
functions and ``set_ugi``.

Each member is asked in parallel with its own deadline (the call's timeout plus the member's
latency); members that fail, time out or are down contribute nothing (logged), except the
primary, whose failure fails the call. Each Thrift member gets the client's connection to it for
the call (handed back after), so ``set_ugi`` and per-connection state stay the client's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from hive_metastore.ttypes import GetAllFunctionsResponse

from hivemesh.federation.members import Member, Session, unavailable
from hivemesh.federation.routes import MERGED, methods_of
from hivemesh.federation.routing import MemberCalls, current
from hivemesh.hive.names import matches_pattern
from hivemesh.thrift.server import connection

log = logging.getLogger(__name__)


class MergedCalls:
    """The merged calls of the proxy (:data:`HMS_METHODS`), over the members of ``fed``."""

    HMS_METHODS = methods_of(MERGED)

    def __init__(self, fed: MemberCalls):
        self.fed = fed
        self.pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="hms-merge")

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
        session = self.fed.session()
        primary = self.fed.registry.primary
        members = self.fed.registry.members
        if self.fed.links is not None and links is not None:
            members = members + self.fed.links.members(tables=links == "all")
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
            own = Session() if m.keeps_connections else session
            if m.keeps_connections:
                own.ugi = session.ugi
                conn = session.take(m)
                if conn is not None:
                    own.give(m, conn)
            fut = self.pool.submit(self.fed.call_member, m, method, args, own, deadline)
            jobs.append((m, fut, own, time.monotonic() + deadline))
        out = []
        if inline is not None:
            out.append((primary, self.fed.call_member(primary, method, inline[0], session, inline[1])))
        current.member = "*"  # the audit log shows merged calls as going to every member
        for m, fut, own, due in jobs:
            try:
                out.append((m, fut.result(timeout=max(0.0, due - time.monotonic()) + 0.05)))
            except FutureTimeout:
                log.warning(
                    "%s: %s did not answer within %.0f ms; left out",
                    method, m.describe(), (timeout_s + m.deadline_extra_s) * 1000,
                )  # fmt: skip
                if self.fed.observe is not None:
                    self.fed.observe(m.name, method, timeout_s + m.deadline_extra_s, "Timeout")
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
        return self.fed.registry.settings.databases_timeout_ms / 1000

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
        self.fed.note_duplicates(owners)
        return sorted(names)

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
                if not m.names.prefix or _may_start_with(alt, m.names.prefix):
                    alts.append("*")  # aliases and prefixes: narrow after renaming
            return ("|".join(sorted(set(alts))), tbl_patterns, tbl_types) if alts else None

        out = []
        timeout = self.fed.registry.settings.table_meta_timeout_ms / 1000
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
        timeout = self.fed.registry.settings.functions_timeout_ms / 1000
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
        if state.principal is not None and not state.may_impersonate and state.user:
            user_name = state.user  # a Kerberos client is its principal, whatever it claims
        state.user, state.groups = user_name, list(group_names or [])
        session = self.fed.session()
        session.ugi = (user_name, list(group_names or []))
        for m in self.fed.registry.members:
            conn = session.take(m)
            if conn is None:
                continue
            try:
                conn.call("set_ugi", (user_name, group_names))
                session.give(m, conn)
            except Exception:
                conn.close()
        return list(group_names or [])

    def close(self) -> None:
        """Stop the worker threads (calls still running are abandoned)."""
        self.pool.shutdown(wait=False, cancel_futures=True)


def _may_start_with(pattern: str, prefix: str) -> bool:
    """Whether a Hive name pattern (``*`` any characters, ``.`` any one character) can match a name
    that starts with ``prefix``."""
    for i, ch in enumerate(prefix):
        if i >= len(pattern):
            return False
        if pattern[i] == "*":
            return True
        if pattern[i] not in (".", ch):
            return False
    return True
