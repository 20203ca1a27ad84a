"""What every runner of a replication policy does, whatever its target's format.

:class:`PolicyLoop` holds the policy's lease, reads the source's notification log after the
checkpoint, has each batch planned (:func:`hivemesh.replication.planner.plan_batch`), runs the
actions through its executor's methods and stores the checkpoint; it bootstraps a policy that never
ran and re-syncs one whose checkpoint the source's log no longer reaches. The executors
(:class:`hivemesh.replication.runner.PolicyRunner` for a Hive target,
:class:`hivemesh.replication.delta.runner.DeltaPolicyRunner` for a Delta one) say how a bootstrap,
an event and a put of partitions are applied to their target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hive_metastore.ttypes import NotificationEvent, NotificationEventRequest

from hivemesh.client.hms import HmsCalls
from hivemesh.client.metastore import MetastoreClient
from hivemesh.hive import event_messages as ev
from hivemesh.metastore.replay import Replayer
from hivemesh.replication.config import PolicyConfig, ReplicationFile
from hivemesh.replication.data import SyncResult, ZoneStorage
from hivemesh.replication.errors import ReplicationError
from hivemesh.replication.planner import Action, Bootstrapping, Plan, PutPartitions, Skip, plan_batch
from hivemesh.replication.scope import Scope
from hivemesh.replication.state import PolicyState, ReplicationStore
from hivemesh.replication.zones import connect_zone

__all__ = ["LEASE_MS", "PolicyLoop", "StepResult"]

LEASE_MS = 30_000
"""How long a policy's lease lasts, milliseconds; renewed once half of it has run out."""


@dataclass
class StepResult:
    """What one :meth:`PolicyLoop.step` did: events applied and skipped, the checkpoint it stored
    (``last_event_id``), whether it bootstrapped or re-synced, and the files it copied."""

    applied: int = 0
    skipped: int = 0
    last_event_id: int | None = None
    bootstrapped: bool = False
    resynced: bool = False
    data: SyncResult = field(default_factory=SyncResult)


class PolicyLoop:
    """Runs ``policy`` of ``config`` with its state in ``store``.

    ``owner``: this process's lease name (:func:`hivemesh.replication.state.lease_owner`).
    ``metrics``: a :class:`hivemesh.replication.metrics.ReplicationMetrics` or None.
    ``progress``: a ``rich.progress.Progress`` for bootstraps and large copies, or None.
    ``source`` / ``target``: connected clients of the source and target zones' metastores; each
    one not given is connected from the zone's settings (and closed by :meth:`close`; given ones
    are left to their owner). Raises ReplicationError naming the peer when a metastore cannot be
    reached.
    """

    logger: ClassVar[logging.Logger] = logging.getLogger("hivemesh.replication.runner")

    def __init__(
        self,
        config: ReplicationFile,
        policy: PolicyConfig,
        store: ReplicationStore,
        owner: str,
        metrics: Any = None,
        progress: Any = None,
        *,
        source: MetastoreClient | None = None,
        target: MetastoreClient | None = None,
    ):
        self._check_format(policy)
        self.config = config
        self.policy = policy
        self.name = policy.name
        self.store = store
        self.owner = owner
        self.metrics = metrics
        self.progress = progress
        rc = config.replication
        self.source_zone = config.zones[policy.source]
        self.target_zone = config.zones[policy.target]
        opposite = [p for p in rc.policies if (p.source, p.target) == (policy.target, policy.source)]
        self.scope = Scope(policy, opposite)
        self._owned: list[MetastoreClient] = []  # the clients close() closes
        if source is None:
            source = connect_zone(policy.name, policy.source, self.source_zone, rc.timeout_s)
            self._owned.append(source)
        if target is None:
            target = connect_zone(policy.name, policy.target, self.target_zone, rc.timeout_s)
            self._owned.append(target)
        self.source, self.target = source, target
        self.source_calls: HmsCalls = self.source.hms
        self.target_calls: HmsCalls = self.target.hms
        self.paths = config.paths(policy)
        self.relocate = self.paths.relocate_checked  # every location written: never into the source zone
        self.replayer = Replayer(
            self.target_calls, repl_policy=f"hivemesh.{policy.name}", relocate=self.relocate
        )
        self.source_storage = ZoneStorage(self.source_zone.s3)
        self.target_storage = ZoneStorage(self.target_zone.s3)
        self._stopping = threading.Event()
        self._rules_checked = False
        self._lease_renew_at = 0.0  # time.monotonic() after which the lease is renewed
        self._setup()
        self.state = store.ensure(policy.name, policy.source, policy.target)

    # ------------------------------------------------------------------ what an executor does
    def _check_format(self, policy: PolicyConfig) -> None:
        """Raise ReplicationError for a policy this executor does not run (before connecting)."""

    def _setup(self) -> None:
        """The executor's own state, set up once the clients are connected."""

    def bootstrap(self, prune: bool = False) -> SyncResult:
        """Write every object in scope to the target as the source has it now; ``prune``: drop
        the target's objects in scope the source lacks (when ``propagate_drops``).
        Raises ReplicationError naming the peer, LocationRefused for a location in the source zone."""
        raise NotImplementedError

    def apply(self, event: NotificationEvent, out: StepResult, msg: ev.Message | None = None) -> bool:
        """Apply one event a plan says to apply (``msg``: it decoded); True when applied.
        Raises as :meth:`bootstrap`, and the target's HMS exception it cannot heal."""
        raise NotImplementedError

    def put_partitions(self, action: PutPartitions, out: StepResult) -> None:
        """Apply a run of ALTER_PARTITION events of one table; counts them in ``out``.
        Raises as :meth:`apply`."""
        raise NotImplementedError

    def _rule_changes(self, state: PolicyState) -> None:
        """Act on the policy's rules having changed since ``state.rules`` were recorded."""
        raise NotImplementedError

    def _bootstrapping(self) -> Bootstrapping:
        """Objects being bootstrapped in the background (their events wait); none by default."""
        return frozenset()

    def _before_batch(self, checkpoint: int, out: StepResult) -> None:
        """Called before a batch of events after ``checkpoint`` is read."""

    def _full_sync(self, start: int, prune: bool) -> SyncResult:
        """The bootstrap of a bootstrap or resync starting from source event ``start``."""
        return self.bootstrap(prune=prune)

    def _after_resync(self) -> None:
        """Called when a resync wrote the target; before its checkpoint is stored."""

    def _end_background(self) -> None:
        """Stop background work (at :meth:`close`)."""

    def _store_checkpoint(self, out: StepResult, event_time: int | None) -> None:
        """Store the checkpoint a batch reached (``out.last_event_id``, the event's time)."""
        if out.last_event_id is not None:
            self.store.checkpoint(self.name, out.last_event_id, event_time, out.applied)

    # ------------------------------------------------------------------ source and lease
    def current_event_id(self) -> int:
        """The source's current notification event id, also set as the policy's
        ``hivemesh_replication_source_event_id`` metric. Raises what the source's call raises."""
        current = int(self.source.current_notification_event_id())
        if self.metrics is not None:
            self.metrics.source_event_id.labels(self.name).set(current)
        return current

    def read_events(self, after: int, limit: int) -> list[NotificationEvent]:
        """Up to ``limit`` source events after id ``after``. Raises what the source's call raises
        (transport errors; the HMS call declares no exception)."""
        resp = self.source_calls.get_next_notification(
            NotificationEventRequest(lastEvent=after, maxEvents=limit)
        )
        return list(resp.events or [])

    def _lease(self) -> None:
        """Hold the policy's lease: renewed in the store once half of it has run out (not on every
        poll). Raises ReplicationError naming the holder when another process runs the policy."""
        if time.monotonic() < self._lease_renew_at:
            return
        if not self.store.acquire(self.name, self.owner, LEASE_MS):
            st = self.store.get(self.name)
            holder = st.lease_owner if st else "?"
            raise ReplicationError(f"policy {self.name} is being run by {holder}; not starting a second copy")
        self._lease_renew_at = time.monotonic() + LEASE_MS / 2000

    def _rules(self) -> dict[str, Any]:
        """The policy's rules as recorded in the store."""
        return {"databases": self.policy.databases, "tables": self.policy.tables}

    # ------------------------------------------------------------------ steps
    def step(self, until: int | None = None) -> StepResult:
        """One pass: bootstrap or resync when needed, else up to one batch of events (never beyond
        event id ``until``) planned, applied and checkpointed. Raises ReplicationError when another
        process holds the policy's lease, and any error of the work (metastores, storage,
        LocationRefused); the state stays where the last checkpoint left it."""
        self._lease()
        out = StepResult()
        state = self.store.get(self.name)
        assert state is not None
        if state.phase in ("new", "bootstrapping"):
            self._run_bootstrap(state, out)
            return out
        if state.phase == "resyncing":
            self._run_resync(state.resync_reason or "interrupted resync", out)
            return out
        if not self._rules_checked:
            self._rules_checked = True
            self._rule_changes(state)
        checkpoint = state.event_id or 0
        self._before_batch(checkpoint, out)
        events, purged = self._read_batch(checkpoint)
        if purged is not None:
            self._run_resync(purged, out)
            return out
        if until is not None:
            events = [e for e in events if e.eventId <= until]
        last_time = state.event_time
        for action in self.plan(events).actions:
            if self._stopping.is_set():
                break
            self.execute(action, out)
            out.last_event_id = action.last_event.eventId
            last_time = action.last_event.eventTime
        self._store_checkpoint(out, last_time)
        if self.metrics is not None:
            self.metrics.events_applied.labels(self.name).inc(out.applied)
            self.metrics.events_skipped.labels(self.name).inc(out.skipped)
        return out

    def _read_batch(self, checkpoint: int) -> tuple[list[NotificationEvent], str | None]:
        """The next batch of events after ``checkpoint``, or why the policy must re-sync (the
        source's log purged past it)."""
        batch = self.config.replication.batch_events
        events = self.read_events(checkpoint, batch)
        current = self.current_event_id() if not events else None
        if current is not None and current > checkpoint:
            # Events up to ``current`` were committed before it was read: a second read that
            # finds none means the log was purged past the checkpoint to its end.
            events = self.read_events(checkpoint, batch)
            if not events:
                return [], (
                    f"the source's notification log was purged past the checkpoint: no event after it, "
                    f"current event {current}, checkpoint {checkpoint}"
                )
        if events and events[0].eventId > checkpoint + 1:
            return [], (
                f"the source's notification log was purged past the checkpoint: next event {events[0].eventId}, "
                f"checkpoint {checkpoint}"
            )
        return events, None

    def plan(self, events: list[NotificationEvent]) -> Plan:
        """The plan of a batch of ``events`` for this policy (see :func:`plan_batch`).
        Raises ValueError for an event that cannot be decoded."""
        return plan_batch(events, self.scope, self._bootstrapping())

    def execute(self, action: Action, out: StepResult) -> None:
        """Run one action of a plan, counting its events in ``out``. Raises as :meth:`apply` and
        :meth:`put_partitions`."""
        if isinstance(action, Skip):
            out.skipped += 1
        elif isinstance(action, PutPartitions):
            self.put_partitions(action, out)
        elif self.apply(action.message.event, out, action.message):
            out.applied += 1
        else:
            out.skipped += 1

    def _run_bootstrap(self, state: PolicyState, out: StepResult) -> None:
        start = state.bootstrap_event_id
        if start is None:
            start = self.current_event_id()
            self.store.update(self.name, phase="bootstrapping", bootstrap_event_id=start)
        self.logger.info("policy %s: bootstrap from source event %d", self.name, start)
        t0 = time.monotonic()
        out.data.add(self._full_sync(start, prune=state.phase == "bootstrapping"))
        self.store.update(self.name, phase="replicating", event_id=start, rules=self._rules(), copying=None)
        self.store.checkpoint(self.name, start, None, 0)
        out.bootstrapped = True
        out.last_event_id = start
        self.logger.info("policy %s: bootstrap done in %.1fs (%d files, %d bytes copied)", self.name,
                         time.monotonic() - t0, out.data.copied, out.data.bytes_copied)  # fmt: skip

    def _run_resync(self, reason: str, out: StepResult, count: bool = True) -> None:
        start = self.current_event_id()
        st = self.store.get(self.name)
        assert st is not None
        if count and st.phase != "resyncing":
            self.logger.warning("policy %s: re-syncing by comparison: %s", self.name, reason)
            self.store.update(self.name, phase="resyncing", resync_reason=reason, resyncs=st.resyncs + 1)
            if self.metrics is not None:
                self.metrics.resyncs.labels(self.name).inc()
        out.data.add(self._full_sync(start, prune=True))
        self._after_resync()
        self.store.update(self.name, phase="replicating", copying=None)
        self.store.checkpoint(self.name, start, None, 0)
        out.resynced = True
        out.last_event_id = start

    def rescan(self) -> StepResult:
        """Compare and repair now (continuous mode's ``rescan_interval_s``): like a resync, but
        not counted as one. Raises ReplicationError when another process holds the policy's lease,
        and the metastore, storage (OSError) and LocationRefused errors of the comparison."""
        self._lease()
        out = StepResult()
        self._run_resync("scheduled rescan", out, count=False)
        return out

    def resync(self, reason: str = "requested") -> StepResult:
        """Re-sync by comparison now (what ``verify --repair`` runs): the target made equal to the
        source, copying only what differs; the checkpoint moves to the source's current event.
        Raises as :meth:`rescan`."""
        self._lease()
        out = StepResult()
        self._run_resync(reason, out)
        return out

    def run_once(self) -> Iterator[StepResult]:
        """Steps until every event up to the source's current id (read at the start) is applied
        and background bootstraps are done; yields each step's result. Raises as :meth:`step` (from
        the iteration that meets the error)."""
        until = self.current_event_id()
        while True:
            res = self.step(until)
            yield res
            st = self.store.get(self.name)
            assert st is not None
            if st.phase == "replicating" and (st.event_id or 0) >= until and not self._bootstrapping():
                return
            if res.applied == 0 and res.skipped == 0 and not res.bootstrapped and not res.resynced:
                if self._bootstrapping():
                    time.sleep(0.05)
                    continue
                return

    def lag(self) -> tuple[int, float]:
        """``(events, seconds)`` the target is behind the source: events after the checkpoint, and
        the age of the oldest of them (0 when caught up). Updates the stored source event id.
        Raises what the source's calls raise and the store's errors."""
        st = self.store.get(self.name)
        checkpoint = (st.event_id if st else None) or 0
        current = self.current_event_id()
        self.store.update(self.name, source_event_id=current)
        if current <= checkpoint:
            return 0, 0.0
        nxt = self.read_events(checkpoint, 1)
        age = max(0.0, time.time() - nxt[0].eventTime) if nxt else 0.0
        return current - checkpoint, age

    def stop(self) -> None:
        """Ask a running step to stop after its current action. Never raises."""
        self._stopping.set()

    def close(self) -> None:
        """Stop background work, release the lease and close the clients this runner connected.
        Never raises: a store that cannot release the lease is logged (the lease then expires)."""
        self._stopping.set()
        self._end_background()
        try:
            self.store.release(self.name, self.owner)
        except Exception as e:  # the store may be gone at shutdown: the lease then expires
            self.logger.warning("policy %s: could not release its lease: %s", self.name, e)
        for client in self._owned:
            client.close()
