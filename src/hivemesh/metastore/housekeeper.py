"""Background housekeeping of the local metastore (Hive's AcidHouseKeeperService and event cleaner).

Every ``interval_s`` seconds: abort open txns past ``hive.txn.timeout``, expire locks without a
txn that missed their heartbeats, purge completed txn records after their retention (never below
an open txn's snapshot) and remove notification events older than the event retention (never
after a position a reader is paging from). Each step is its own database transaction; a failing
step is logged and retried at the next run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hivemesh.hive.constants import now_ms
from hivemesh.metastore.handler import LocalMetastore

log = logging.getLogger(__name__)

HOUSEKEEPING_LOCK = 0x68697665_6D657368 & 0x7FFFFFFFFFFFFFFF
"""PostgreSQL advisory lock key of a housekeeping pass ("hivemesh" in ASCII, as a positive bigint)."""


class Housekeeper:
    """Runs :meth:`run_once` on a daemon thread every ``interval_s`` seconds until :meth:`stop`.

    ``txn_retention_s``: how long committed/aborted txn records stay (seconds);
    ``event_retention_s``: how long notification events stay (seconds).
    """

    def __init__(
        self, handler: LocalMetastore, interval_s: float, txn_retention_s: int, event_retention_s: int
    ):
        self.handler = handler
        self.interval_s = interval_s
        self.txn_retention_s = txn_retention_s
        self.event_retention_s = event_retention_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> dict[str, int]:
        """One pass; returns how many txns were aborted, locks expired, txns and events purged.
        When another process on the same store is in its pass (several metastore processes on one
        PostgreSQL database), this one skips its turn and returns zeros."""
        done = {"aborted_txns": 0, "expired_locks": 0, "purged_txns": 0, "purged_events": 0}
        try:
            with self.handler.store.exclusive(HOUSEKEEPING_LOCK) as mine:
                if not mine:
                    log.debug("housekeeping: another metastore process on this store is at it; skipped")
                    return done
                return self._pass(done)
        except Exception:
            log.exception("housekeeping could not take its turn; retrying at the next run")
            return done

    def _pass(self, done: dict[str, int]) -> dict[str, int]:
        h = self.handler
        steps: tuple[tuple[str, Callable[[], int]], ...] = (
            ("aborted_txns", lambda: len(h.abort_timed_out_txns(should_stop=self._stop.is_set))),
            ("expired_locks", self._expire_locks),
            ("purged_txns", lambda: h.purge_completed_txns(self.txn_retention_s * 1000)),
            ("purged_events", lambda: h.purge_events(self.event_retention_s)),
        )
        for name, step in steps:
            try:
                done[name] = step()
            except Exception:
                log.exception("housekeeping step %s failed; retrying at the next run", name)
        if any(done.values()):
            log.info("housekeeping: %s", ", ".join(f"{k}={v}" for k, v in done.items() if v))
        return done

    def _expire_locks(self) -> int:
        with self.handler.write() as tx:
            return self.handler.expire_locks(tx.conn, now_ms())

    def start(self) -> Housekeeper:
        """Start the background thread."""
        self._thread = threading.Thread(target=self._loop, name="hms-housekeeper", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            t0 = time.perf_counter()
            self.run_once()
            log.debug("housekeeping pass took %.3fs", time.perf_counter() - t0)

    def stop(self) -> None:
        """Stop the thread (waits for a running pass to end)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
