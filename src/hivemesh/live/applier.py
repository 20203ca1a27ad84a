"""The applier of one zone: the command log applied in order to the zone's own metastore.

:class:`Applier` follows the log (:class:`hivemesh.live.log.LogFollower`) from the zone's stored
position (``P/zones/<zone>`` in etcd, see :meth:`CommandLog.save_zone`) and, per command, maps its
zone-neutral locations to the zone (:func:`hivemesh.live.commands.for_zone`), calls the method on
the zone's metastore and stores the new position before taking the next command.

- **Deterministic outcomes** (an HMS exception: AlreadyExists, NoSuchObject, InvalidOperation,
  MetaException; a TApplicationException) are the command's answer, the same in every zone: the
  applier records it and goes on.
- **Data before metadata**: a command proposed in another zone that makes files visible has them
  copied from that zone first (:mod:`hivemesh.live.data`); a copy that fails is retried like an
  environmental error.
- **Environmental errors** (the metastore unreachable, a broken connection) are retried, after a
  growing pause (0.2 s up to 5 s), on the same command: the zone falls behind, and its proxy
  refuses writes once the lag passes ``max_apply_lag_s``. When a connection broke during the call,
  the call may have been made: the retry's error is then reported as an unknown outcome.
- **Exactly once**: before each call the applier stores a marker (the last position applied, the
  command's position and an event id of the zone metastore's notification log read after every
  command applied since named only other objects, at most 50 ms ago, else read just before this
  call: see :meth:`Applier._marker_event_id`) in its state file on this host (:class:`hivemesh.live.state.StateFile`: one local data sync per command; without one, in
  etcd: one etcd write per command); etcd gets the position within 0.2 s, for status and compaction. The caller is answered as soon as
  the call returns. A command found
  marked after a restart (or after a connection broke during its call) is applied only when the
  zone's notification log has no event of the objects it names after the marked id: a metastore
  writes a call's events in the call's own transaction, so an event there means the call took
  effect. A metastore without a notification log (``get_current_notificationEventId`` unknown)
  gets the command again; a second application of a proposed write changes no object (it meets
  the object it created, removed or already changed the same way), and its error is then
  reported as an unknown outcome.

Each outcome is handed to the proxy call waiting for it (:meth:`Applier.expect`), by request id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hive_metastore.ttypes import MetaException
from thrift.Thrift import TApplicationException, TException

from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient
from hivemesh.hive.hms_methods import returns_value
from hivemesh.live.commands import COPY_DATA, decode, for_zone, named_objects
from hivemesh.live.config import LiveRule
from hivemesh.live.data import DataCopier
from hivemesh.live.errors import InvalidCommand, LiveError, LogCompacted
from hivemesh.live.log import CommandLog, Entry
from hivemesh.live.out_of_band import ApplyWindows
from hivemesh.live.state import StateFile

__all__ = ["Applier", "Outcome", "Waiter"]

log = logging.getLogger(__name__)

_PAUSES = (0.2, 0.5, 1.0, 2.0, 5.0)
_FLUSH_S = 0.2
"""How soon an idle applier stores its position, seconds."""
_FRESH_S = 0.05
"""How old an event id read earlier may be to serve as a command's marker, seconds: an out-of-band
write on the command's objects within that time would be taken for the command's own (by a
restart's exactly-once check and by the out-of-band watcher)."""

Objects = tuple[str, tuple[str, ...]]
"""(database, tables) a command names (:func:`hivemesh.live.commands.named_objects`)."""


@dataclass
class _EventBase:
    """An event id of the zone's notification log read at monotonic time ``at``, and the objects of
    the commands applied since (database -> tables; None: the database itself)."""

    event_id: int | None
    at: float
    touched: dict[str, set[str] | None]

    def fits(self, objects: Objects | None) -> bool:
        """Whether a command on ``objects`` may use this id: no command since named its objects."""
        if objects is None or time.monotonic() - self.at > _FRESH_S:
            return False
        db, tables = objects
        if db not in self.touched:
            return True
        seen = self.touched[db]
        return seen is not None and bool(tables) and not seen.intersection(tables)

    def add(self, objects: Objects) -> None:
        """Count a command on ``objects`` as applied since the id was read."""
        db, tables = objects
        if not tables:
            self.touched[db] = None
        elif self.touched.get(db, set()) is not None:
            self.touched.setdefault(db, set()).update(tables)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Outcome:
    """What applying one command gave in this zone: ``value`` (the method's return value) or
    ``error`` (the exception it raised); ``unknown``: a connection broke during an earlier
    attempt, so the error may hide an earlier success."""

    position: int
    value: Any = None
    error: BaseException | None = None
    unknown: bool = False


class Waiter:
    """A proxy call waiting for its command's outcome in this zone."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.outcome: Outcome | None = None

    def resolve(self, outcome: Outcome) -> None:
        """Hand over the outcome and wake the waiting call."""
        self.outcome = outcome
        self._done.set()

    def wait(self, timeout_s: float) -> Outcome | None:
        """The outcome, or None when none came within ``timeout_s`` seconds."""
        self._done.wait(timeout_s)
        return self.outcome


class Applier:
    """Applies the command log to zone ``zone``'s metastore (see the module doc).

    ``log``: the command log; ``rules``: the live rules by name; ``client``: a client of the
    zone's metastore (not connected yet is fine; reconnected after transport errors); ``copier``:
    brings the files a command makes visible from its proposing zone first (None: metadata only);
    ``resyncer``: called when the log was compacted past this zone's position, returns the
    position to go on from (:func:`hivemesh.live.resync.resync`; None: the zone stops applying);
    ``windows``: where each command's notification-event window is recorded
    (:mod:`hivemesh.live.out_of_band`; None: not recorded); ``state_extras``: more fields of the
    stored state (shown by ``live status``); ``state_file``: where the position and the markers are kept on this host (one local fsync per
    command; etcd then gets the position within 0.2 s, for status and compaction); None: in etcd
    (one etcd write per command). Runs in a
    thread of its own after :meth:`start`; :meth:`stop` ends it. Thread-safe."""

    def __init__(
        self,
        log: CommandLog,
        rules: Mapping[str, LiveRule],
        zone: str,
        client: MetastoreClient,
        *,
        on_apply: Callable[[Outcome, float], None] | None = None,
        copier: DataCopier | None = None,
        resyncer: Callable[[], tuple[int, str, int]] | None = None,
        state_file: StateFile | None = None,
        windows: ApplyWindows | None = None,
        state_extras: Callable[[], Mapping[str, Any]] | None = None,
        event_client: MetastoreClient | None = None,
    ) -> None:
        self.log = log
        self.event_client = event_client
        self.rules = dict(rules)
        self.zone = zone
        self.client = client
        self.on_apply = on_apply
        self.copier = copier
        self.resyncer = resyncer
        self.state_file = state_file
        self.windows = windows
        self.state_extras = state_extras
        self.resynced_from: str | None = None
        """The zone this one was last re-synced from (by this process), else None."""
        self.position = 0
        """The last position applied in this zone (0: none yet)."""
        self._file_position = 0  # the position the state file holds
        self.applied = 0
        """Commands applied by this process."""
        self.last_error: str | None = None
        """The last environmental error (None once a command applied after it)."""
        self.needs_resync: LogCompacted | None = None
        """Set when the log was compacted past this zone's position: it cannot follow any more."""
        self._pending_since_ms: int | None = None
        self._resume: dict[str, Any] | None = None  # the stored marker of a command being applied
        self._events: bool | None = None  # False: the zone's metastore keeps no notification log
        self._base: _EventBase | None = None  # the event id the next markers may use
        self._base_lock = threading.Lock()
        self._marked = 0  # markers taken (a prefetched id read while one was taken is not kept)
        self._prefetch_marked = -1  # the count when the last command ended (its id may be read then)
        self._store_now = False  # store the position as soon as the command being applied ends
        self._last_objects: Objects | None = None  # what the command being applied names
        self._prefetch_wanted = threading.Event()
        self._db_changes: dict[str, int] = {}  # database -> its database-level commands applied
        self._any_changes = 0  # commands applied that name no single database
        self._waiters: dict[str, Waiter] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._applying = False
        self._dirty = False  # applied past the stored position
        self._save_lock = threading.Lock()  # a store of the position vs a command's marker
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._follower: Any = None

    # ------------------------------------------------------------------ waiting
    def expect(self, request_id: str) -> Waiter:
        """A waiter for the command of ``request_id``: register it before appending."""
        w = Waiter()
        with self._lock:
            self._waiters[request_id] = w
        return w

    def forget(self, request_id: str) -> None:
        """Drop the waiter of ``request_id`` (its call gave up)."""
        with self._lock:
            self._waiters.pop(request_id, None)

    def database_generation(self, db: str) -> tuple[int, int]:
        """A value that changes whenever this zone applies a command that may change database
        ``db`` itself (create, alter or drop of the database, or a command naming no single
        database): what a cache of the database's definition is valid for."""
        return self._any_changes, self._db_changes.get(db.lower(), 0)

    def _count_change(self, objects: tuple[str, tuple[str, ...]] | None) -> None:
        if objects is None:
            self._any_changes += 1
        elif not objects[1]:
            self._db_changes[objects[0]] = self._db_changes.get(objects[0], 0) + 1

    def lag_s(self) -> float:
        """Seconds since the proposer appended the oldest command this zone has seen but not
        applied (0 when caught up with what it has seen)."""
        since = self._pending_since_ms
        return 0.0 if since is None else max(0.0, time.time() - since / 1000)

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout_s: float = 30.0) -> Applier:
        """Read the zone's stored position and start applying in a background thread. Raises
        LiveError when the position cannot be read within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                state = self.log.zone_states().get(self.zone, {})
                break
            except LiveError as e:
                if time.monotonic() > deadline:
                    raise LiveError(f"zone {self.zone}: cannot read its log position: {e}") from e
                time.sleep(0.5)
        if self.state_file is not None:
            try:
                local = self.state_file.load()
            except (OSError, ValueError) as e:
                raise LiveError(f"zone {self.zone}: cannot read its state file: {e}") from e
            if local is not None:
                state = local
        self.position = int(state.get("position", 0))
        self._file_position = self.position  # the position the state file holds
        self._resume = dict(state) if state.get("applying") else None
        log.info("zone %s: applying the command log after position %d", self.zone, self.position)
        self._thread = threading.Thread(target=self._run, name=f"live-applier-{self.zone}", daemon=True)
        self._thread.start()
        threading.Thread(target=self._flush_loop, name=f"live-position-{self.zone}", daemon=True).start()
        if self.event_client is not None:
            threading.Thread(
                target=self._prefetch_loop, name=f"live-event-id-{self.zone}", daemon=True
            ).start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop applying (a command being applied finishes first, within ``timeout_s`` seconds)
        and close the client. A thread waiting on the log for the next command is not waited for:
        it ends when its watch wakes, without applying anything."""
        self._stop.set()
        follower = self._follower
        if follower is not None:
            follower.close()
        if self._thread is not None:
            with self._lock:
                busy = self._applying
            self._thread.join(timeout_s if busy else 0.05)
        try:
            self._flush()
        except Exception:  # best effort: the next start re-checks the last command by its marker
            log.debug("zone %s: last position not stored", self.zone, exc_info=True)
        self.client.close()
        if self.event_client is not None:
            self.event_client.close()
        if self.state_file is not None:
            self.state_file.close()

    def _run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            try:
                self._follower = self.log.follow(self.position)
                for entry in self._follower:
                    self._take(entry)
                    turn = 0
                    if self._stop.is_set():
                        return
            except LogCompacted as e:
                self.needs_resync = e
                self.last_error = str(e)
                if self.resyncer is None:
                    log.error("zone %s: %s; it stops applying until it is re-synced", self.zone, e)
                    self._stop.wait(5.0)
                    continue
                log.warning("zone %s: %s; re-syncing by comparison with a healthy zone", self.zone, e)
                try:
                    position, source, _ = self.resyncer()
                except (LiveError, OSError, TException) as err:
                    self.last_error = f"re-sync failed: {err}"
                    log.error("zone %s: %s; trying again", self.zone, self.last_error)
                    self._stop.wait(5.0)
                    continue
                self.position, self.resynced_from = position, source
                self.needs_resync = None
                self.last_error = None
                self._pending_since_ms = None
                if self.state_file is not None:
                    self.state_file.save(self._state())
                    self._file_position = self.position
                self._save()
            except LiveError as e:
                self.last_error = str(e)
                log.warning("zone %s: the command log: %s; retrying", self.zone, e)
                self._stop.wait(_PAUSES[min(turn, len(_PAUSES) - 1)])
                turn += 1
            except Exception:  # a bug must not end the thread: log it and start over
                log.exception(
                    "zone %s: applier failed; starting over from position %d", self.zone, self.position
                )
                self._stop.wait(1.0)

    def _take(self, entry: Entry) -> None:
        """Apply one entry and hand the outcome to its waiter (the position is stored by the next
        command's marker, or by :meth:`_flush` once the applier is idle)."""
        with self._save_lock:
            if self._stop.is_set():
                return
            self._applying = True
        try:
            self._take_one(entry)
        finally:
            with self._save_lock:
                self._applying = False
        if self._store_now:  # an ACID commit waits for every zone's stored position past it
            self._store_now = False
            self._flush()

    def _flush_loop(self) -> None:
        while not self._stop.wait(_FLUSH_S):
            self._flush()

    def _flush(self) -> None:
        """Store the position when commands were applied since the last store: in the state file
        first, then in etcd, so etcd's copy (what compaction goes by) is never ahead of the zone's
        own. While a command is being applied its marker in the state file must not be
        overwritten: the state file already holds the position before it, and only etcd gets it
        (so a busy zone's position reaches etcd every 0.2 s too; ACID commits wait on it)."""
        with self._save_lock:
            if not self._dirty:
                return
            if self.state_file is None:
                if self._applying:
                    return  # the marker lives in etcd: not while a command is being applied
                self._dirty = False
                self._save()
                return
            state = self._state()
            self._dirty = False  # (a command being applied sets it again at its end)
            if self._applying:  # never ahead of the state file's position
                state["position"] = min(self.position, self._file_position)
            else:
                try:
                    self.state_file.save(state)
                except OSError as e:
                    self._dirty = True
                    log.warning("zone %s: cannot write its state file: %s", self.zone, e)
                    return
                self._file_position = state["position"]
        self._save(state)  # etcd's copy, outside the lock: the next command need not wait for it

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now if no command is being applied, holding the next one back meanwhile."""
        with self._save_lock:
            if not self._applying:
                fn()

    def _mark(self, marker: Mapping[str, Any]) -> None:
        """Store the marker of the command about to be called (with the last position applied):
        in the state file when there is one (etcd gets the position later), else in etcd."""
        if self.state_file is None:
            self._save(marker)
            return
        try:
            state = self._state()
            self.state_file.save({**state, **marker})
            self._file_position = state["position"]
        except OSError as e:
            raise LiveError(
                f"zone {self.zone}: cannot write its state file {self.state_file.path}: {e}"
            ) from e
        self._dirty = True

    def _take_one(self, entry: Entry) -> None:
        t0 = time.perf_counter()
        self._last_objects = None
        outcome = self._apply(entry)
        self._count_change(self._last_objects)
        if outcome is None:  # stopped while retrying: not applied
            return
        self.position = entry.position
        self.applied += 1
        self._pending_since_ms = None
        self._dirty = True
        with self._lock:
            waiter = self._waiters.pop(entry.request_id, None)
        if waiter is not None:
            waiter.resolve(outcome)
        if self.on_apply is not None:
            self.on_apply(outcome, time.perf_counter() - t0)
        if self.event_client is not None:
            with self._base_lock:  # no command is being applied now: the count says so
                self._prefetch_marked = self._marked
            self._prefetch_wanted.set()

    def _prefetch_loop(self) -> None:
        """Read the metastore's newest event id once a command was applied and no other started
        within 1 ms (the caller answered meanwhile): the next command's marker then need not read
        it. On :attr:`event_client`, a connection of its own."""
        assert self.event_client is not None
        while not self._stop.is_set():
            if not self._prefetch_wanted.wait(0.5):
                continue
            self._prefetch_wanted.clear()
            with self._base_lock:
                marked = self._prefetch_marked  # taken when the last command had ended
            if self._stop.wait(0.001) or self._events is False:
                continue
            with self._base_lock:
                if self._marked != marked:
                    continue  # busy: the commands share the id read for the first of them
            try:
                event_id = self.event_client.current_notification_event_id()
            except (*TRANSPORT_ERRORS, TException) as e:  # the next command reads it itself
                log.debug("zone %s: reading the newest event id failed: %s", self.zone, e)
                continue
            with self._base_lock:
                if self._marked == marked:  # no command began meanwhile: every one before is done
                    self._base = _EventBase(event_id, time.monotonic(), {})

    def _marker_event_id(self, objects: Objects | None) -> int | None:
        """The event id for the marker of a command on ``objects`` (serial: every command before it
        is done). One read at most 50 ms ago serves while the commands applied since it named
        other objects: an event on ``objects`` after it can then only be this command's (or an
        out-of-band write's). Else the id is read now."""
        with self._base_lock:
            self._marked += 1
            base = self._base
            if base is not None and base.fits(objects):
                assert objects is not None
                base.add(objects)
                return base.event_id
            self._base = None
        event_id = self._event_id()
        with self._base_lock:
            if objects is not None:
                self._base = _EventBase(event_id, time.monotonic(), {})
                self._base.add(objects)
        return event_id

    def _apply(self, entry: Entry) -> Outcome | None:
        try:
            command = decode(entry.command)
            rule = self.rules.get(command.rule)
            if rule is None:
                raise InvalidCommand(
                    f"command names live rule {command.rule!r}, unknown in this zone's config"
                )
            args = for_zone(command, rule, self.zone)
        except InvalidCommand as e:
            log.error("zone %s: position %d (%s): %s", self.zone, entry.position, entry.request_id, e)
            return Outcome(entry.position, error=MetaException(f"hivemesh live: {e}"))
        self._pending_since_ms = command.time_ms
        objects = named_objects(command)
        self._count_change(objects)  # before and after the call: a cache read in between is not kept
        self._last_objects = objects
        marker = self._resume if self._resume and self._resume.get("applying") == entry.position else None
        self._resume = None
        event_id: int | None = (
            int(marker["event_id"]) if marker and marker.get("event_id") is not None else None
        )
        attempted = marker is not None  # a call may have been made before a crash or a broken connection
        turn = 0
        uncertain = False  # a call may have taken effect and the notification log cannot tell
        copied = self.copier is None or marker is not None  # a marked command copied its data before
        while not self._stop.is_set():
            if not copied:
                assert self.copier is not None
                try:
                    self.copier.copy(command, rule)
                    copied = True
                except (OSError, ValueError) as e:
                    self.last_error = (
                        f"copying the data of position {entry.position} from zone {command.zone}: {e}"
                    )
                    log.warning("zone %s: %s; retrying", self.zone, self.last_error)
                    self._stop.wait(_PAUSES[min(turn, len(_PAUSES) - 1)])
                    turn += 1
                    continue
            if command.method == COPY_DATA:  # its files are here now: nothing to call
                self.last_error = None
                self._store_now = True
                return Outcome(entry.position)
            try:
                if attempted:
                    uncertain = event_id is None or objects is None
                    if self._applied_since(event_id, objects):
                        log.info(
                            "zone %s: position %d %s was applied before (its notification event is there)",
                            self.zone, entry.position, command.method,
                        )  # fmt: skip
                        return Outcome(entry.position, unknown=returns_value(command.method))
                if attempted:  # a retry: the id is read anew, and no later command uses an older one
                    with self._base_lock:
                        self._marked += 1
                        self._base = None
                    event_id = self._event_id()
                else:
                    event_id = self._marker_event_id(objects)
                self._mark({"applying": entry.position, "event_id": event_id})
                if self.windows is not None:
                    self.windows.open(event_id, objects)
                attempted = True
                value = self.client.call(command.method, *args)
                self.last_error = None
                return Outcome(entry.position, value=value)
            except TRANSPORT_ERRORS as e:
                host, port = self.client.endpoints[0]
                self.last_error = f"metastore {host}:{port}: {e}"
                log.warning(
                    "zone %s: position %d %s: %s; retrying",
                    self.zone,
                    entry.position,
                    command.method,
                    self.last_error,
                )
                self._stop.wait(_PAUSES[min(turn, len(_PAUSES) - 1)])
                turn += 1
            except TException as e:  # HMS exceptions and TApplicationException: the answer
                log.info(
                    "zone %s: position %d %s: %s: %s",
                    self.zone, entry.position, command.method, type(e).__name__, getattr(e, "message", e),
                )  # fmt: skip
                return Outcome(entry.position, error=e, unknown=uncertain)
            except Exception as e:
                log.exception("zone %s: position %d %s failed", self.zone, entry.position, command.method)
                return Outcome(entry.position, error=MetaException(f"hivemesh live: {type(e).__name__}: {e}"))
        return None

    def _event_id(self) -> int | None:
        """The zone metastore's newest notification event id (None: it keeps no notification log)."""
        if self._events is False:
            return None
        try:
            return self.client.current_notification_event_id()
        except TApplicationException:
            self._events = False
            log.warning(
                "zone %s: the metastore keeps no notification log; a command interrupted by a crash is applied again",
                self.zone,
            )
            return None

    def _applied_since(self, event_id: int | None, objects: tuple[str, tuple[str, ...]] | None) -> bool:
        """Whether the zone's notification log has an event of ``objects`` (database, tables) after
        ``event_id``: the interrupted call took effect (HMS writes a call's events in its own
        transaction). False when that cannot be told (no notification log, no object named)."""
        if event_id is None or objects is None:
            return False
        db, tables = objects
        return bool(self.client.next_notification(event_id, db=db, tables=tables or None))

    def _state(self) -> dict[str, Any]:
        extras = dict(self.state_extras()) if self.state_extras is not None else {}
        return {
            **extras,
            "position": self.position,
            "time_ms": int(time.time() * 1000),
            "error": self.last_error,
            "resynced_from": self.resynced_from,
        }

    def state_changed(self) -> None:
        """Have the state (with ``state_extras``) stored again soon, applied commands or not."""
        self._dirty = True

    def _save(self, extra: Mapping[str, Any] | None = None) -> None:
        """Store the position in etcd (and ``extra``: the marker of the command being applied, or a
        state taken earlier); retried until stored (a zone that cannot reach etcd cannot read the
        log either)."""
        turn = 0
        state = self._state()
        while True:
            try:
                self.log.save_zone(self.zone, {**state, **(extra or {})})
                return
            except LiveError as e:
                if self._stop.is_set():
                    return
                self.last_error = str(e)
                self._stop.wait(_PAUSES[min(turn, len(_PAUSES) - 1)])
                turn += 1
