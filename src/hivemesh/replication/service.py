"""Running replication policies: once (``--once``) or continuously, and reporting their status.

:func:`run_once` takes each selected policy to the source's current event (bootstrapping what
needs it) and returns the failures. :class:`ReplicationService` runs every selected policy on its
own thread until :meth:`ReplicationService.stop` (SIGTERM): a policy that fails records its error,
waits (doubling from 1 s up to 60 s) and tries again from its checkpoint; the others keep going.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from hivemesh.client.errors import error_name
from hivemesh.replication.config import PolicyConfig, ReplicationFile, TargetFormat
from hivemesh.replication.metrics import ReplicationMetrics
from hivemesh.replication.runner import PolicyRunner, record_failure, since_ms, zone_client
from hivemesh.replication.state import ReplicationStore, lease_owner

__all__ = ["PolicyStatus", "ReplicationService", "run_once", "selected", "status"]

log = logging.getLogger(__name__)


def _unexpected(error: BaseException) -> bool:
    """Whether ``error`` is a bug rather than a peer's or the storage's failure (its traceback is
    then logged)."""
    from thrift.Thrift import TException

    from hivemesh.errors import HivemeshError

    return not isinstance(error, (HivemeshError, TException, OSError, ValueError))


def make_runner(
    config: ReplicationFile, policy: PolicyConfig, store: ReplicationStore, owner: str, **kw: Any
) -> Any:
    """The runner of ``policy``: a :class:`PolicyRunner` for ``format: hive``, a
    :class:`~hivemesh.replication.delta.runner.DeltaPolicyRunner` for ``format: delta``; ``kw``: their
    keyword arguments (``metrics``, ``progress``, and ``source`` / ``target`` clients to use instead of
    connecting). Raises ReplicationError naming the peer when a metastore cannot be reached (the
    runners' constructors)."""
    if policy.format == TargetFormat.DELTA:
        from hivemesh.replication.delta.runner import DeltaPolicyRunner

        return DeltaPolicyRunner(config, policy, store, owner, **kw)
    return PolicyRunner(config, policy, store, owner, **kw)


MAX_BACKOFF_S = 60.0


def selected(config: ReplicationFile, names: tuple[str, ...] | list[str] = ()) -> list[Any]:
    """The policies named (all when none); raises ConfigError for an unknown name."""
    if not names:
        return list(config.replication.policies)
    return [config.replication.policy(n) for n in names]


def run_once(
    config: ReplicationFile,
    store: ReplicationStore,
    names: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    metrics: ReplicationMetrics | None = None,
) -> dict[str, str]:
    """Bring each selected policy up to its source's current event; returns ``{policy: error}``
    for those that failed (empty when all succeeded), logged here only when the error looks like
    a bug (with its traceback). Raises ConfigError for an unknown policy name; a policy's own failure is
    returned, never raised."""
    owner = lease_owner()
    failures: dict[str, str] = {}
    for policy in selected(config, names):
        runner = None
        try:
            runner = make_runner(config, policy, store, owner, metrics=metrics, progress=progress)
            applied = 0
            for res in runner.run_once():
                applied += res.applied
            st = store.get(policy.name)
            log.info(
                "policy %s: at source event %s (%d events applied)",
                policy.name,
                st.event_id if st else None,
                applied,
            )
        except Exception as e:
            failures[policy.name] = record_failure(store, policy.name, e)
            if _unexpected(e):  # a bug: its traceback; the others the caller reports from the result
                log.error("policy %s failed: %s", policy.name, failures[policy.name], exc_info=True)
            else:
                log.debug("policy %s failed: %s", policy.name, failures[policy.name])
            if metrics is not None:
                metrics.errors.labels(policy.name, error_name(e)).inc()
        finally:
            if runner is not None:
                runner.close()
    return failures


class ReplicationService:
    """Runs the selected policies continuously, one thread each."""

    def __init__(
        self,
        config: ReplicationFile,
        store: ReplicationStore,
        names: tuple[str, ...] | list[str] = (),
        metrics: ReplicationMetrics | None = None,
    ):
        self.config = config
        self.store = store
        self.policies = selected(config, names)
        self.metrics = metrics or ReplicationMetrics()
        self.owner = lease_owner()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._runners: dict[str, Any] = {}

    def start(self) -> ReplicationService:
        """Start one thread per policy. A policy's failures are recorded and retried in its thread, never
        raised here."""
        for policy in self.policies:
            t = threading.Thread(
                target=self._loop, args=(policy,), name=f"replicate-{policy.name}", daemon=True
            )
            t.start()
            self._threads.append(t)
        return self

    def request_stop(self) -> None:
        """Ask every policy to stop after its current event (safe in a signal handler)."""
        self._stop.set()
        for r in list(self._runners.values()):
            r.stop()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every policy after its current event and wait for the threads. Never raises; a thread still
        running after ``timeout_s`` is left (daemon)."""
        self.request_stop()
        for t in self._threads:
            t.join(timeout_s)

    def wait(self) -> None:
        """Block until :meth:`stop` is called."""
        while not self._stop.wait(0.5):
            pass

    def _loop(self, policy: Any) -> None:
        backoff = 1.0
        interval = self.config.replication.poll_interval_s
        runner: Any = None
        last_lag = 0.0
        rescan_every = self.config.replication.rescan_interval_s
        last_rescan = time.monotonic()
        while not self._stop.is_set():
            try:
                if runner is None:
                    runner = make_runner(self.config, policy, self.store, self.owner, metrics=self.metrics)
                    self._runners[policy.name] = runner
                res = runner.step()
                if rescan_every is not None and time.monotonic() - last_rescan >= rescan_every:
                    log.info("policy %s: scheduled rescan", policy.name)
                    runner.rescan()
                    last_rescan = time.monotonic()
                backoff = 1.0
                self.metrics.last_success.labels(policy.name).set(time.time())
                if res.last_event_id is not None:
                    self.metrics.applied_event_id.labels(policy.name).set(res.last_event_id)
                now = time.monotonic()
                idle = res.applied == 0 and res.skipped == 0 and not res.bootstrapped and not res.resynced
                if idle or now - last_lag > 5.0:
                    last_lag = now
                    events, seconds = runner.lag()
                    self.metrics.lag_events.labels(policy.name).set(events)
                    self.metrics.lag_seconds.labels(policy.name).set(seconds)
                if idle:
                    self._stop.wait(interval)
            except Exception as e:
                message = record_failure(self.store, policy.name, e)
                self.metrics.errors.labels(policy.name, error_name(e)).inc()
                log.error(
                    "policy %s: %s; retrying in %.0fs", policy.name, message, backoff, exc_info=_unexpected(e)
                )
                if runner is not None:
                    runner.close()
                    runner = None
                    self._runners.pop(policy.name, None)
                self._stop.wait(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
        if runner is not None:
            runner.close()


@dataclass
class PolicyStatus:
    """What ``hivemesh replicate status`` shows for one policy."""

    policy: str
    source: str
    target: str
    phase: str
    applied_event_id: int | None
    source_event_id: int | None
    target_event_id: int | None
    lag_events: int | None
    events_applied: int
    last_success_s_ago: float | None
    last_error: str | None
    resyncs: int
    resync_reason: str | None
    copying: str | None
    running_by: str | None
    objects: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        """As a JSON-able dict."""
        return asdict(self)


def status(
    config: ReplicationFile, store: ReplicationStore, names: tuple[str, ...] | list[str] = ()
) -> list[PolicyStatus]:
    """The status of each selected policy: the stored state, and the source's and target's
    current event ids (None when a metastore does not answer: the error is in ``last_error``). Raises
    ConfigError for an unknown policy name and the store's errors; an unreachable metastore is reported,
    not raised."""

    out: list[PolicyStatus] = []
    for policy in selected(config, names):
        st = store.get(policy.name)
        ids: dict[str, int | None] = {}
        errors: list[str] = []
        for side in ("source", "target"):
            zone = config.zones[getattr(policy, side)]
            try:
                with zone_client(zone, min(10.0, config.replication.timeout_s), retries=0) as c:
                    ids[side] = c.current_notification_event_id()
            except Exception as e:
                ids[side] = None
                errors.append(f"{side} zone {getattr(policy, side)!r} ({zone.metastore}) unreachable: {e}")
        applied = st.event_id if st else None
        lag = ids["source"] - applied if ids["source"] is not None and applied is not None else None
        now_ms_ = int(time.time() * 1000)
        running = st.lease_owner if st and st.lease_expires_ms and st.lease_expires_ms > now_ms_ else None
        out.append(
            PolicyStatus(
                policy=policy.name,
                source=policy.source,
                target=policy.target,
                phase=st.phase if st else "never run",
                applied_event_id=applied,
                source_event_id=ids["source"],
                target_event_id=ids["target"],
                lag_events=max(0, lag) if lag is not None else None,
                events_applied=st.events_applied if st else 0,
                last_success_s_ago=since_ms(st.last_success_ms) if st else None,
                last_error="; ".join(errors) or (st.last_error if st else None),
                resyncs=st.resyncs if st else 0,
                resync_reason=st.resync_reason if st else None,
                copying=st.copying if st else None,
                running_by=running,
                objects=[
                    {"database": o.db, "table": o.table or None, "state": o.state, "event_id": o.event_id}
                    for o in store.objects(policy.name)
                ],
            )
        )
    return out
