"""Writes made straight to a zone's metastore, bypassing its live proxy, found in the zone's
notification log.

Every write on a live object reaches a zone's metastore through the zone's applier, one command
at a time. The applier records a *window* per command: the metastore's newest event id before the
call (its marker) and, once the next command starts or the applier is idle, the newest id after
it, with the objects the command names (:class:`ApplyWindows`). :class:`OutOfBandWatcher` reads
the zone's notification log every few seconds and reports each catalog event (tables, partitions,
databases, functions, statistics, constraints; not transactions, locks or write ids) on an object
of a live rule that no window explains: inside no window, or inside one whose command names
other objects. An out-of-band write to the very object a command changes at the same moment (or
up to 50 ms before: a window may open at the id read right after the previous command) is not
told apart (``live check`` compares the catalogs and finds it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient
from hivemesh.live.config import LiveConfig

__all__ = ["ApplyWindows", "OutOfBandWatcher", "Window"]

log = logging.getLogger(__name__)

_NOT_CATALOG = frozenset(
    {
        "OPEN_TXN", "COMMIT_TXN", "ABORT_TXN", "ALLOC_WRITE_ID", "ACID_WRITE", "BATCH_ACID_WRITE",
        "COMMIT_COMPACTION", "UPDATE_TXN_STATE", "RELOAD", "INSERT",
    }
)  # fmt: skip
"""Event types that are no catalog change a live proxy proposes (INSERT: data written, which the
data copy of the command that shows it handles)."""


@dataclass
class Window:
    """The events of one applied command: ids in (``before``, ``after``] (``after`` None: still
    open) on ``objects`` (database, tables; None: any object)."""

    before: int
    after: int | None
    objects: tuple[str, tuple[str, ...]] | None

    def explains(self, event_id: int, db: str, table: str) -> bool:
        """Whether event ``event_id`` on ``db.table`` (``table`` "" for none) is this command's."""
        if event_id <= self.before or (self.after is not None and event_id > self.after):
            return False
        if self.objects is None:
            return True
        wdb, tables = self.objects
        return db == wdb and (not tables or not table or table in tables)


class ApplyWindows:
    """The windows of a zone's recent commands, oldest first (thread-safe)."""

    def __init__(self, keep: int = 10_000) -> None:
        self._windows: deque[Window] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def open(self, before: int | None, objects: tuple[str, tuple[str, ...]] | None) -> None:
        """A command on ``objects`` is about to be called, its events being after ``before``.
        Commands that share one ``before`` (the applier reads the id once for commands on
        distinct objects) stay open together; a new ``before`` closes the open windows there
        (None: unknown; they are then closed at their own start, explaining nothing more)."""
        with self._lock:
            for w in reversed(self._windows):  # the open ones, at the end
                if w.after is not None:
                    break
                if before is None:
                    w.after = w.before
                elif before != w.before:
                    w.after = before
            if before is not None:
                self._windows.append(Window(before, None, objects))

    def close(self, after: int) -> None:
        """The applier is idle and the metastore's newest event id is ``after``."""
        with self._lock:
            for w in reversed(self._windows):
                if w.after is not None:
                    break
                w.after = max(after, w.before)

    def explains(self, event_id: int, db: str, table: str) -> bool:
        """Whether a window explains the event."""
        with self._lock:
            return any(w.explains(event_id, db, table) for w in reversed(self._windows))

    def forget_before(self, event_id: int) -> None:
        """Drop the closed windows that end at or before ``event_id``."""
        with self._lock:
            while self._windows and self._windows[0].after is not None and self._windows[0].after <= event_id:
                self._windows.popleft()


class OutOfBandWatcher:
    """Reads zone ``zone``'s notification log (``client``, its own connection) every
    ``interval_s`` seconds after :meth:`start` and counts the out-of-band events on objects of
    ``live``'s rules (see the module doc). ``idle``: a call that, holding the applier still,
    runs its argument when no command is being applied (to close the last window);
    ``on_found``: called after a round that found some."""

    def __init__(
        self,
        zone: str,
        live: LiveConfig,
        client: MetastoreClient,
        windows: ApplyWindows,
        idle: Callable[[Callable[[], None]], None],
        interval_s: float = 2.0,
        on_found: Callable[[], None] | None = None,
    ) -> None:
        self.zone = zone
        self.live = live
        self.client = client
        self.windows = windows
        self.idle = idle
        self.interval_s = interval_s
        self.on_found = on_found
        self.count = 0
        """Out-of-band events found since this process started."""
        self.recent: deque[dict[str, Any]] = deque(maxlen=20)
        """The newest of them: ``{"event_id", "type", "object", "time_ms"}``."""
        self.last_seen: int | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()

    def start(self) -> OutOfBandWatcher:
        """Watch from the log's current end, in a background thread."""
        threading.Thread(target=self._run, name=f"live-out-of-band-{self.zone}", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop watching; close the client."""
        self._stop.set()
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
                self.last_error = None
            except TRANSPORT_ERRORS as e:
                self.last_error = f"metastore: {e}"
            except Exception as e:  # keep watching whatever one round met
                self.last_error = f"{type(e).__name__}: {e}"
                log.warning("zone %s: reading the notification log failed: %s", self.zone, e)
            self._stop.wait(self.interval_s)

    def run_once(self) -> int:
        """Close the applier's last window when it is idle, read the new events and count the
        out-of-band ones; returns how many this round found. Raises the client's errors."""
        self.idle(lambda: self.windows.close(self.client.current_notification_event_id()))
        if self.last_seen is None:
            self.last_seen = self.client.current_notification_event_id()
            return 0
        found = 0
        while True:
            events = self.client.next_notification(self.last_seen, max_events=1000)
            for e in events:
                db, table = (e.dbName or "").lower(), (e.tableName or "").lower()
                if self._live(e.eventType, db, table) and not self.windows.explains(e.eventId, db, table):
                    found += 1
                    self.recent.append(
                        {
                            "event_id": e.eventId,
                            "type": e.eventType,
                            "object": f"{db}.{table}" if table else db,
                            "time_ms": int(time.time() * 1000),
                        }
                    )
                    log.warning(
                        "zone %s: out-of-band %s on %s (event %d): made straight to the zone's metastore; "
                        "run `hivemesh live check`, then `live repair`",
                        self.zone, e.eventType, f"{db}.{table}" if table else db, e.eventId,
                    )  # fmt: skip
                self.last_seen = max(self.last_seen, e.eventId)
            if len(events) < 1000:
                break
        self.windows.forget_before(self.last_seen)
        self.count += found
        if found and self.on_found is not None:
            self.on_found()
        return found

    def state(self) -> dict[str, Any]:
        """What ``live status`` shows: ``{"out_of_band": count, "last_out_of_band": newest or None}``."""
        return {"out_of_band": self.count, "last_out_of_band": self.recent[-1] if self.recent else None}

    def _live(self, event_type: str, db: str, table: str) -> bool:
        if event_type in _NOT_CATALOG or not db:
            return False
        rule = self.live.rule_for(db)
        return rule is not None and (not table or rule.matches_table(db, table))
