"""Routing: which member answers for a database, how names look on either side, and one call to a
member.

:class:`Registry` holds the configured members (replaced as a whole on reload). :class:`MemberCalls`
is what every part of the proxy (generic routing, transactions, merged calls, relaying, remotes,
health) uses to reach members: database resolution (a remote link first, then a federated member
by prefix or mapped database, else the primary), the calling client's :class:`Session`, and one
call to a member with its metrics. :class:`NamesIn`/:class:`NamesOut` rename database and table
names into a member's names and back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from hive_metastore.ttypes import MetaException

from hivemesh.federation.config import DatabaseResolution, ProxySettings
from hivemesh.federation.members import Member, MemberUnavailableError, Session, unavailable
from hivemesh.federation.naming import rewrite_view_text
from hivemesh.federation.remotes.registry import LinkRegistry
from hivemesh.federation.rewrite import Collector, Renamer, split_catalog, strip_default_catalog
from hivemesh.thrift.server import connection

log = logging.getLogger(__name__)

SESSION_KEY = "hivemesh.proxy.session"
TABLE_LIST_METHODS = frozenset(
    {"get_all_tables", "get_tables", "get_tables_by_type", "get_table_names_by_filter"}
)
"""Calls answering a list of table names (filtered by the mapped tables, completed by table links)."""

Observer = Callable[[str, str, float, str | None], None]
"""Called after each member call with (member, method, seconds, error class name or None)."""

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


class MemberCalls:
    """Calls to the members of a federation. ``registry``: the configured members (swapped on
    reload); ``links``: the remotes (or None); ``observe``: called after each member call.
    Thread-safe; per-client state lives in the connection's :class:`Session`."""

    def __init__(self, registry: Registry, links: LinkRegistry | None, observe: Observer | None = None):
        self.registry = registry
        self.links = links
        self.observe = observe

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

    def member_named(self, name: str) -> Member | None:
        """The configured member or remote link member called ``name``, else None."""
        m = self.registry.member(name)
        if m is None and self.links is not None:
            m = next((x for x in self.links.members(tables=True) if x.name == name), None)
        return m

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

    def target(self, method: str, col: Collector) -> tuple[Member, str | None, str | None]:
        """(member, real database, client database) of a call naming the databases and tables in
        ``col``: table links first, else the one member owning every database named (the
        primary when none is). MetaException when the databases belong to two members."""
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

    def note_duplicates(self, owners: dict[str, list[str]]) -> None:
        """Record (and log once) client database names that several members have; ``owners``:
        client name -> the members that have it."""
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


class NamesIn(Renamer):
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


class NamesOut(Renamer):
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
