"""The live proxy's catalog: reads relayed to the zone's metastore, writes in a live rule's scope
agreed through the command log.

:class:`LiveCatalog` is a :class:`hivemesh.federation.handler.Federation` with one member, the
zone's own metastore, so reads (and the writes no rule covers) take the federation proxy's path,
relayed as bytes where they can be. A write of :data:`hivemesh.live.commands.PROPOSED` that names
a live database (and, when the rule lists tables for it, a live table) is instead:

1. refused with a MetaException when this zone's applier is more than ``max_apply_lag_s`` behind;
2. pinned into a command (:func:`hivemesh.live.commands.pin`) and appended to the log under a
   new request id;
3. answered once this zone's applier applied it: the value or the HMS exception the zone's
   metastore gave, the same answer a direct call would give.

A write naming databases of two rules, or a live and a non-live database (a rename across them),
is refused. A write whose outcome the proxy cannot know (the log did not answer, or this zone did
not apply it in time) is answered with a MetaException that says the outcome is unknown and names
the request id: the write is then either in every zone or, when the log never took it, in none.
"""

from __future__ import annotations

import copy
import getpass
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from hive_metastore.ThriftHiveMetastore import get_table_args
from hive_metastore.ttypes import MetaException, Partition, Table

from hivemesh.federation.handler import Federation
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.rewrite import Collector, method_plan, rename_args, split_catalog
from hivemesh.federation.routing import Observer, Registry
from hivemesh.federation.txns import TxnRouter
from hivemesh.hive.hms_methods import args_struct
from hivemesh.live.applier import Applier
from hivemesh.live.commands import COPY_DATA, PROPOSED, Command, encode, neutral_location, pin, structs
from hivemesh.live.config import LiveConfig, LiveRule
from hivemesh.live.data import acid_write_dirs, data_dirs
from hivemesh.live.errors import LiveError, LogUnavailable
from hivemesh.live.log import CommandLog
from hivemesh.replication.data import ZoneStorage
from hivemesh.thrift.server import connection

__all__ = ["LiveCatalog", "OwnerTxns"]

log = logging.getLogger(__name__)

ProposalObserver = Callable[[str, str], None]
"""Called after each proposal with (method, outcome: "ok", an exception class name, "unknown",
"refused")."""


class OwnerTxns(TxnRouter):
    """The txn and lock calls of a live proxy: those naming a table of a live database whose rule's
    ``acid_owner`` is another zone go to that zone's metastore (a federated member named after the
    zone, exposing no database to reads), paired with a transaction of this zone's metastore as
    the federation proxy pairs them; every other txn call stays in this zone."""

    def __init__(self, fed: LiveCatalog, indexes: MemberIndexes) -> None:
        super().__init__(fed, indexes)
        self.live_fed = fed
        self._acid_writes: dict[int, set[tuple[str, str, int]]] = {}  # txn -> (db, table, write id)
        self._acid_lock = threading.Lock()

    def allocate_table_write_ids(self, rqst: Any) -> Any:
        """Write ids from the owner (:class:`TxnRouter`); for a live table each txn's write id is
        kept, so that its commit ships the files first (:meth:`commit_txn`)."""
        db, table = split_catalog(rqst.dbName)[1].lower(), str(rqst.tableName).lower()
        resp = super().allocate_table_write_ids(rqst)
        rule = self.live_fed.live.rule_for(db)
        if rule is not None and rule.matches_table(db, table):
            with self._acid_lock:
                for p in resp.txnToWriteIds or []:
                    self._acid_writes.setdefault(p.txnId, set()).add((db, table, p.writeId))
        return resp

    def commit_txn(self, rqst: Any) -> None:
        """Commit, after the directories the txn wrote in this zone for live tables reached every
        zone (:meth:`LiveCatalog.ship_acid_writes`): a reader in any zone that sees the commit
        finds the files. When they cannot be shipped the txn stays open (commit again, or abort)
        and the MetaException says why."""
        with self._acid_lock:
            writes = self._acid_writes.pop(rqst.txnid, None)
        if writes:
            try:
                self.live_fed.ship_acid_writes(rqst.txnid, writes)
            except BaseException:
                with self._acid_lock:
                    self._acid_writes.setdefault(rqst.txnid, set()).update(writes)
                raise
        super().commit_txn(rqst)

    def abort_txn(self, rqst: Any) -> None:
        """Abort (:class:`TxnRouter`); its files are never shipped."""
        with self._acid_lock:
            self._acid_writes.pop(rqst.txnid, None)
        super().abort_txn(rqst)

    def abort_txns(self, rqst: Any) -> None:
        """Abort several txns (:meth:`abort_txn`)."""
        with self._acid_lock:
            for t in rqst.txn_ids or []:
                self._acid_writes.pop(t, None)
        super().abort_txns(rqst)

    def _resolve_db(self, db: str) -> tuple[Member, str]:
        name = split_catalog(db)[1].lower()
        rule = self.live_fed.live.rule_for(name)
        if rule is not None and rule.acid_owner != self.live_fed.zone:
            owner = self.live_fed.registry.member(rule.acid_owner)
            if owner is None:  # cannot happen with a validated config: every zone is a member
                raise MetaException(
                    f"hivemesh live: acid_owner zone {rule.acid_owner} of rule {rule.name!r} unknown"
                )
            return owner, name
        return super()._resolve_db(db)


class LiveCatalog(Federation):
    """The catalog a live proxy serves (see the module doc). ``registry``: the zone's metastore as
    the primary, and as federated members (exposing no database) the ``acid_owner`` zones of the
    rules owned elsewhere, for their txn calls (:class:`OwnerTxns`); ``live``: the ``live:`` section; ``zone``: this zone's name; ``log``/``applier``:
    the command log and this zone's applier; ``wait_s``: how long a proposing call waits for this
    zone to apply its command, seconds."""

    def __init__(
        self,
        registry: Registry,
        indexes: MemberIndexes,
        *,
        live: LiveConfig,
        zone: str,
        log: CommandLog,
        applier: Applier,
        wait_s: float,
        observe: Observer | None = None,
        observe_proposal: ProposalObserver | None = None,
        storage: ZoneStorage | None = None,
    ) -> None:
        super().__init__(registry, None, indexes, observe)
        self.storage = storage or ZoneStorage()
        self.live = live
        self.zone = zone
        self.txns = OwnerTxns(self, indexes)
        self.command_log = log
        self.applier = applier
        self.wait_s = wait_s
        self.observe_proposal = observe_proposal
        # database -> (the applier's generation of it when read, its locationUri)
        self._db_locations: dict[str, tuple[tuple[int, int], str | None]] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """HMS method ``name``: a proposed write (see the module doc) or the federation's call."""
        if name in PROPOSED:

            def method(*args: Any) -> Any:
                """The write, proposed or sent on (:meth:`write`)."""
                return self.write(name, args)

            method.__name__ = name
            method.__doc__ = f"HMS ``{name}``: agreed through the command log when it names a live database."
            return method
        return super().__getattr__(name)

    # ------------------------------------------------------------------ scope
    def rule_of(self, method: str, argv: list[Any]) -> LiveRule | None:
        """The live rule a write's databases and tables fall under, or None (not live). Raises
        MetaException for a write spanning two rules, or live and non-live objects."""
        col = Collector()
        rename_args(method_plan(method), argv, col)
        rules: dict[str, LiveRule | None] = {split_catalog(d)[1].lower(): None for d in col.dbs if d}
        if not rules:
            return None
        for db in rules:
            rules[db] = self.live.rule_for(db)
        found = {r.name: r for r in rules.values() if r is not None}
        if not found:
            return None
        if len(found) > 1 or None in rules.values():
            scopes = ", ".join(
                f"{d} ({f'rule {r.name!r}' if r else 'not live'})" for d, r in sorted(rules.items())
            )
            raise MetaException(
                f"hivemesh live: {method} names databases of different live scopes: {scopes}; "
                "a write stays within one live rule (or outside all)"
            )
        rule = next(iter(found.values()))
        inside = {rule.matches_table(split_catalog(db)[1], t) for db, t in col.tables if t}
        if inside == {False}:
            return None  # tables the rule leaves out: local writes
        if len(inside) > 1:
            raise MetaException(
                f"hivemesh live: {method} names tables inside and outside live rule {rule.name!r}; make it two calls"
            )
        return rule

    # ------------------------------------------------------------------ writes
    def write(self, method: str, args: Sequence[Any]) -> Any:
        """Answer write ``method``: proposed when it names a live database, else sent on."""
        argv = list(args)
        rule = self.rule_of(method, argv)
        if rule is None:
            return self.route(method, argv)
        return self.propose(method, argv, rule)

    def user(self) -> str:
        """The calling user: the client's ``set_ugi`` user or authenticated principal, else the
        proxy process's user."""
        ugi = self.session().ugi
        if ugi is not None:
            return ugi[0]
        return connection().user or getpass.getuser()

    def propose(self, method: str, argv: list[Any], rule: LiveRule) -> Any:
        """Pin, append and wait for this zone's outcome (see the module doc). Raises the HMS
        exception the zone's metastore answered, or MetaException (lagging zone, location outside
        the rule's path, log unavailable, outcome unknown)."""
        lag = self.applier.lag_s()
        if lag > self.live.max_apply_lag_s or self.applier.needs_resync is not None:
            self._observed(method, "refused")
            why = (
                "its log position was compacted away (re-sync it)"
                if self.applier.needs_resync is not None
                else f"it is {lag:.1f}s behind the command log (max_apply_lag_s {self.live.max_apply_lag_s:g})"
            )
            raise MetaException(
                f"hivemesh live: zone {self.zone} refuses writes: {why}; last error: {self.applier.last_error}"
            )
        args = args_struct(method)(*argv)
        if method.startswith("add_partition"):
            self._fill_storage(args)
        try:
            command = pin(
                method, args, rule, self.zone, self.user(), database_location=self._database_location(rule)
            )
        except MetaException:
            self._observed(method, "refused")
            raise
        command = replace(command, data=data_dirs(method, args, rule, self.zone, self._table))
        request_id = f"{self.zone}.{uuid.uuid4().hex}"
        waiter = self.applier.expect(request_id)
        try:
            position = self.command_log.append(request_id, encode(command))
        except LogUnavailable as e:
            raise self._gave_up(
                request_id, method, "unknown",
                f"outcome of {method} unknown: the command log is unavailable ({e}); a member may still "
                "have taken the command, and then it is applied in every zone once the cluster has a "
                "quorum again",
            ) from e  # fmt: skip
        except LiveError as e:
            raise self._gave_up(request_id, method, "refused", f"{method} not agreed: {e}") from e
        outcome = waiter.wait(self.wait_s)
        if outcome is None:
            raise self._gave_up(
                request_id, method, "unknown",
                f"outcome of {method} unknown: agreed at log position {position}, not applied in zone "
                f"{self.zone} within {self.wait_s:g}s; it will be applied in every zone (last error: "
                f"{self.applier.last_error})",
            )  # fmt: skip
        if outcome.error is None:
            self._observed(method, "ok")
            return outcome.value
        if outcome.unknown:
            self._observed(method, "unknown")
            raise MetaException(
                f"hivemesh live: outcome of {method} unknown: agreed at log position {position} (request "
                f"{request_id}); zone {self.zone}'s metastore connection broke during the call and the "
                f"retry answered {type(outcome.error).__name__}: {getattr(outcome.error, 'message', outcome.error)}"
            )
        self._observed(method, type(outcome.error).__name__)
        raise outcome.error

    def ship_acid_writes(self, txn: int, writes: set[tuple[str, str, int]]) -> None:
        """Copy the directories txn ``txn`` wrote in this zone (``writes``: database, table, write
        id) to every zone of their rules: one :data:`~hivemesh.live.commands.COPY_DATA` command
        per table, then wait until every zone applied them (their stored positions; at most
        ``wait_s`` seconds). Raises MetaException (the log unavailable, a zone behind)."""
        by_table: dict[tuple[str, str], set[int]] = {}
        for db, table, write_id in writes:
            by_table.setdefault((db, table), set()).add(write_id)
        last, zones = 0, set[str]()
        for (db, name), write_ids in sorted(by_table.items()):
            rule = self.live.rule_for(db)
            t = self._table(db, name)
            if rule is None or t is None:
                continue
            try:
                dirs = acid_write_dirs(self.storage, t, write_ids, rule, self.zone)
            except OSError as e:
                raise MetaException(f"hivemesh live: txn {txn}: listing the files of {db}.{name}: {e}") from e
            if not dirs:
                continue
            command = Command(
                COPY_DATA, get_table_args(dbname=db, tbl_name=name), rule.name, self.zone, self.user(),
                int(time.time() * 1000), dirs,
            )  # fmt: skip
            request_id = f"{self.zone}.{uuid.uuid4().hex}"
            try:
                last = max(last, self.command_log.append(request_id, encode(command)))
            except LiveError as e:
                raise MetaException(
                    f"hivemesh live: txn {txn} not committed: shipping its files of {db}.{name} to the "
                    f"other zones failed: {e}; commit again, or abort"
                ) from e
            zones.update(rule.paths)
        if last:
            self._wait_everywhere(txn, last, zones)

    def _wait_everywhere(self, txn: int, position: int, zones: set[str]) -> None:
        """Wait until every zone of ``zones`` stored a position at or past ``position``."""
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                states = self.command_log.zone_states()
            except LiveError as e:
                raise MetaException(
                    f"hivemesh live: txn {txn} not committed: {e}; commit again, or abort"
                ) from e
            behind = sorted(z for z in zones if int(states.get(z, {}).get("position", 0)) < position)
            if not behind:
                return
            if time.monotonic() > deadline:
                raise MetaException(
                    f"hivemesh live: txn {txn} not committed: its files (log position {position}) are "
                    f"not in zone(s) {', '.join(behind)} after {self.wait_s:g}s; they will be; commit "
                    "again, or abort"
                )
            time.sleep(0.02)

    def _gave_up(self, request_id: str, method: str, outcome: str, text: str) -> MetaException:
        """The MetaException of a proposal this call stops waiting for (its waiter dropped)."""
        self.applier.forget(request_id)
        self._observed(method, outcome)
        return MetaException(f"hivemesh live: {text} (request {request_id})")

    def _observed(self, method: str, outcome: str) -> None:
        if self.observe_proposal is not None:
            self.observe_proposal(method, outcome)

    def _fill_storage(self, args: Any) -> None:
        """Give each new partition without a storage descriptor its table's (no location: each
        zone derives it), as Hive's clients do: metastores disagree on such partitions (Hive 4.2
        refuses them, hivemesh takes them), and every zone must give the same answer."""
        tables: dict[tuple[str, str], Table | None] = {}
        for p in structs(args):
            if isinstance(p, Partition) and p.sd is None and p.dbName and p.tableName:
                key = (p.dbName, p.tableName)
                if key not in tables:
                    tables[key] = self._table(*key)
                t = tables[key]
                if t is not None and t.sd is not None:
                    p.sd = copy.deepcopy(t.sd)
                    p.sd.location = None

    def _table(self, db: str, name: str) -> Table | None:
        """Table ``db.name`` of this zone's metastore (None when it cannot be read)."""
        try:
            return cast(Table, self._call_with_fallback(self.registry.primary, "get_table", [db, name]))
        except Exception:  # unknown table: the write answers for itself
            return None

    def _database_location(self, rule: LiveRule) -> Callable[[str], str | None]:
        def location(name: str) -> str | None:
            """Database ``name``'s location as a ``hivemesh-live:`` path (None: unknown or outside
            the rule). Read from the zone's metastore once, and again after the applier applied a
            command that may change the database (:meth:`Applier.database_generation`)."""
            key = name.lower()
            generation = self.applier.database_generation(key)
            cached = self._db_locations.get(key)
            if cached is not None and cached[0] == generation:
                uri = cached[1]
            else:
                try:
                    uri = self.call_member(self.registry.primary, "get_database", [name]).locationUri
                except Exception:  # unknown database: the create answers for itself
                    return None
                if len(self._db_locations) > 10_000:
                    self._db_locations.clear()
                self._db_locations[key] = (generation, uri)
            return neutral_location(rule, self.zone, uri)

        return location
