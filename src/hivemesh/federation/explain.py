"""``hivemesh proxy explain METHOD [DATABASE [TABLE]]``: where the proxy would send one call, read
from the routing table (:data:`hivemesh.federation.routes.ROUTES`) and the configuration alone.

No metastore is contacted and no store is opened: members are built without their connectors,
so remote links (kept in the proxy's store) and the databases members list are not consulted.
Database resolution, name rewriting and access control are the proxy's own
(:class:`~hivemesh.federation.routing.MemberCalls`, :class:`~hivemesh.federation.routing.NamesIn`,
:class:`~hivemesh.federation.access.AccessRules`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape

from hivemesh.federation.access import AccessDeniedError
from hivemesh.federation.config import FederationConfig, MemberConfig
from hivemesh.federation.connectors.base import Connection
from hivemesh.federation.factory import member_access, member_names
from hivemesh.federation.members import Member
from hivemesh.federation.routes import BY_DATABASE, MERGED, PER_OWNER, PRIMARY, ROUTES, Route
from hivemesh.federation.routing import MemberCalls, NamesIn, Registry


@dataclass
class Target:
    """A member that would get the call: ``member`` (its name), ``role`` ("primary" or
    "federated"), ``where`` (its URIs, or what it is), ``names``: (client name, the name sent to
    the member) pairs, ``refused``: why the proxy answers with an error instead, or None."""

    member: str
    role: str
    where: str
    names: list[tuple[str, str]] = field(default_factory=list)
    refused: str | None = None


@dataclass
class Explanation:
    """Where ``method`` goes: its ``route`` (row of the table), the ``targets``, and ``note``
    (how the strategy treats them, one sentence)."""

    method: str
    route: Route
    targets: list[Target]
    note: str


class _Offline:
    """A connector that never connects (explain only reads names and access rules): its calls
    raise ConnectionError."""

    kind = "offline"
    sessions = False
    relays = False

    def __init__(self, cfg: MemberConfig):
        if cfg.uris:
            self._where = ",".join(cfg.uris)
        elif cfg.embedded is not None:
            self._where = f"embedded {cfg.embedded.db}"
        else:
            self._where = "AWS Glue"

    def describe(self) -> str:
        """The member's URIs, or what it is."""
        return self._where

    def connect(self) -> Connection:
        """Never: raises ConnectionError."""
        raise ConnectionError(f"{self._where}: not contacted (hivemesh proxy explain)")

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """Never: raises ConnectionError."""
        return self.connect()

    def ping(self, timeout_s: float) -> None:
        """Never: raises ConnectionError."""
        self.connect()

    def close(self) -> None:
        """Nothing to release."""


def offline_calls(cfg: FederationConfig) -> MemberCalls:
    """The members of ``cfg`` (names, access rules, resolution) with connectors that never connect:
    resolving databases works; calling a member raises ConnectionError."""

    def member(mcfg: MemberConfig, role: str, index: int) -> Member:
        names, access = member_names(mcfg, role, cfg.proxy), member_access(mcfg)
        return Member(mcfg.name, role, _Offline(mcfg), names, access, index=index, config=mcfg)

    primary = member(cfg.primary, "primary", 0)
    federated = [member(m, "federated", i + 1) for i, m in enumerate(cfg.federated)]
    return MemberCalls(Registry(cfg.proxy, primary, federated), None)


def unknown_method(method: str) -> str:
    """The one-line error for a name that is no HMS method, with the closest names."""
    close = difflib.get_close_matches(method, sorted(ROUTES), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown HMS method '{method}'{hint}"


def _target(member: Member, names: list[tuple[str, str]] | None = None) -> Target:
    return Target(member.name, member.role, member.connector.describe(), names or [])


def explain(
    cfg: FederationConfig, method: str, database: str | None = None, table: str | None = None
) -> Explanation:
    """Where the proxy configured by ``cfg`` sends ``method`` naming ``database`` (a client's name,
    possibly ``@cat#db``) and ``table``. Raises ValueError for a name that is no HMS method
    (:func:`unknown_method`), a TABLE without a DATABASE, or a DATABASE given to a method that
    names none."""
    route = ROUTES.get(method)
    if route is None:
        raise ValueError(unknown_method(method))
    if table is not None and database is None:
        raise ValueError("a TABLE needs its DATABASE first")
    calls = offline_calls(cfg)
    reg = calls.registry
    if route.strategy is PRIMARY:
        if database is not None:
            raise ValueError(f"{method} names no database: it always goes to the primary")
        return Explanation(
            method, route, [_target(reg.primary)], "names no database: sent to the primary as is"
        )
    if route.strategy is MERGED:
        return _merged(calls, method, route, database)
    if database is None:
        where = ", ".join(route.db_args) or "its arguments"
        if route.strategy is PER_OWNER:
            note = "opened, committed and aborted on the primary and on every member paired with the txn"
            if route.db_args:
                note = f"sent to the member owning the tables in {where} (give DATABASE to see which)"
            return Explanation(method, route, [_target(reg.primary)], note)
        note = f"sent to the member owning the databases named in {where} (give DATABASE to see which)"
        return Explanation(method, route, [], note)
    member, real = calls.resolve(database)
    out = NamesIn(member)
    names = [(database, out.db(database))]
    if table is not None:
        names.append((table, out.table(database, table)))
    target = _target(member, names)
    if not member.names.exposes(real):
        target.refused = "NoSuchObjectException: the database is not in the member's mapped_databases"
    else:
        try:
            member.access.check(method, real, database)
        except AccessDeniedError as e:
            target.refused = f"MetaException: {e}"
    notes = {
        BY_DATABASE: "sent to the member owning the databases it names (all must be one member's); "
        "names rewritten to the member's and back",
        PER_OWNER: "sent to the member owning the table, under its own txn paired with the client's",
    }
    note = notes.get(
        route.strategy, "a remote link is created or dropped if the object is one, else as by database name"
    )
    return Explanation(method, route, [target], note)


def _merged(calls: MemberCalls, method: str, route: Route, database: str | None) -> Explanation:
    reg = calls.registry
    if database is not None:
        member, real = calls.resolve(database)
        return Explanation(
            method, route, [_target(member, [(database, real)])], f"'{database}' comes from this member"
        )
    targets = []
    for m in reg.members:
        shown = m.names.db_out("<db>") if m.names.renames else "<db>"
        targets.append(_target(m, [] if shown == "<db>" else [(shown, "<db>")]))
    note = "asked of every available member in parallel; the answers are merged (the primary's failure fails the call)"
    return Explanation(method, route, targets, note)


def render(exp: Explanation, console: Console) -> None:
    """Print ``exp`` on ``console``: the method's row, then one line per target member with the
    names as sent to it."""
    r = exp.route
    writes = "writes metadata" if r.writes else "writes no metadata"
    args = f"; database names in: {', '.join(r.db_args)}" if r.db_args else ""
    console.print(f"[bold]{exp.method}[/]: {r.strategy}; {writes}{escape(args)}")
    console.print(f"  {escape(exp.note)}")
    for t in exp.targets:
        console.print(f"  -> {t.role} metastore [bold]{escape(t.member)}[/] ({escape(t.where)})")
        for client, sent in t.names:
            console.print(f"       {escape(client)} -> {escape(sent)}")
        if t.refused:
            console.print(f"       [red]refused[/]: {escape(t.refused)}")
