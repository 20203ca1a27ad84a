"""The ordered command log of Live Hive, kept in etcd.

Keys, under the configured prefix ``P`` (default ``/hivemesh/live``):

- ``P/cmd/<request id>``: one command, its value the command's bytes (a dict is stored as compact
  JSON with sorted keys). The key is created once and never changed, so its ``create_revision``
  is the command's **position**: etcd revisions are one global order, the same for every reader.
  Positions increase but are not consecutive (other writes to the cluster take revisions too).
- ``P/part/<request id>/<sha256>/<n>``: the parts of a command too large for one etcd request, written
  before its entry, whose value is then a reference to them (readers get the command whole).
- ``P/compacted``: the log's compaction point, written by :meth:`CommandLog.compact`: every
  command at a position below it is gone.

Guarantees:

- :meth:`CommandLog.append` is one transaction, ``create_revision(P/cmd/<id>) == 0`` -> put,
  else read the key: appending a request id again (a retry after a lost answer) returns the
  position of the first append and appends nothing. It is retried on other members until the
  deadline, which that makes safe.
- :meth:`CommandLog.read` and :class:`LogFollower` give every reader the commands in position
  order, without gaps: reads are linearizable by default (they see every append acknowledged
  before them); a follower reads what is there, then watches from the revision of that read, and
  after any break (a member stopped, a watch cancelled by etcd's history compaction) reads again
  from the last position it yielded, so a restarted follower neither skips nor repeats.
- Without quorum, appends and linearizable reads fail with :class:`LogUnavailable` within
  ``timeout_s``; ``read(..., serializable=True)`` still answers from one member's committed state
  (possibly behind, never out of order): for status and diagnostics, not for appliers.
- etcd's own history compaction (``--auto-compaction-*``) removes no command: commands are live
  keys. Only :meth:`CommandLog.compact` removes them; a position below its point raises
  :class:`LogCompacted`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hivemesh.live.config import EtcdConfig
from hivemesh.live.errors import (
    CommandTooLarge,
    InvalidCommand,
    LiveError,
    LogCompacted,
    RequestIdConflict,
)
from hivemesh.live.etcd import EtcdGateway, EtcdServerError, WatchBroken, WatchStream, b64, prefix_end, unb64

__all__ = ["CommandLog", "Entry", "LogFollower"]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@+=-]{1,256}$")
_REQUEST_OVERHEAD = 512
"""Bytes of an append's etcd request besides its value and three copies of its key (compare, put,
range): protobuf framing and headers, rounded up."""
_DELETE_BATCH = 60
"""Entries removed per transaction by compact(), each with the range of its parts: etcd allows 128
operations per transaction."""
_PARTS = "hivemesh-parts"
"""Key of the reference a log entry holds to the parts of a large command."""


@dataclass(frozen=True)
class Entry:
    """One command of the log: its position (the etcd revision that created it), its request id
    and its bytes."""

    position: int
    request_id: str
    command: bytes

    def json(self) -> Any:
        """The command decoded from JSON (as appended when it was a dict). Raises ValueError."""
        return json.loads(self.command)


def encode_command(command: bytes | Mapping[str, Any]) -> bytes:
    """A command's bytes: ``bytes`` as they are, a mapping as compact JSON with sorted keys (so a
    retry of the same dict sends the same bytes). Raises InvalidCommand (not JSON-serialisable)."""
    if isinstance(command, bytes | bytearray):
        return bytes(command)
    if isinstance(command, Mapping):
        try:
            return json.dumps(command, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            raise InvalidCommand(f"command is not JSON-serialisable: {e}") from e
    raise InvalidCommand(f"command must be bytes or a dict, not {type(command).__name__}")


class CommandLog:
    """The command log under ``config.prefix`` in the etcd cluster ``config.endpoints``.

    Every method makes its etcd calls within ``config.timeout_s`` seconds (all attempts on all
    members together) and raises :class:`LogUnavailable` naming the endpoints when no member
    answered in time. Thread-safe; :meth:`close` (or ``with``) releases the connections.
    """

    def __init__(self, config: EtcdConfig) -> None:
        self.config = config
        self._gw = EtcdGateway(config)
        self._cmd = config.prefix + "/cmd/"
        self._marker = config.prefix + "/compacted"
        self._zones = config.prefix + "/zones/"
        self._parts = config.prefix + "/part/"

    def __enter__(self) -> CommandLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections to etcd."""
        self._gw.close()

    def _key(self, request_id: str) -> str:
        if not isinstance(request_id, str) or not _REQUEST_ID.match(request_id):
            raise InvalidCommand(
                f"request id must be 1-256 characters of letters, digits and ._:@+=- (got {request_id!r})"
            )
        return self._cmd + request_id

    def append(self, request_id: str, command: bytes | Mapping[str, Any]) -> int:
        """Append ``command`` under ``request_id`` and return its position; when ``request_id`` is
        already in the log with the same command, return that entry's position and append nothing.

        A command too large for one etcd request (``max_request_bytes``) is stored in parts
        first (``P/part/<request id>/<sha256>/<n>``, each its own request), then appended as a small
        reference to them; readers get it whole. Up to ``max_command_bytes``.

        Raises :class:`InvalidCommand` (a bad request id or command), :class:`CommandTooLarge` (over
        ``max_command_bytes``, or a single request over the cluster's own limit),
        :class:`RequestIdConflict` (the id is in the log with other bytes),
        :class:`LogUnavailable`, :class:`LogRefused`.
        """
        key = self._key(request_id)
        value = encode_command(command)
        if len(value) > self.config.max_command_bytes:
            raise CommandTooLarge(
                f"command of request {request_id} is {len(value)} bytes, over max_command_bytes "
                f"{self.config.max_command_bytes}: split it into smaller commands"
            )
        if len(value) + 3 * len(key.encode()) + _REQUEST_OVERHEAD > self.config.max_request_bytes:
            value = self._store_parts(request_id, value)
        k = b64(key)
        body = {
            "compare": [{"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
            "success": [{"request_put": {"key": k, "value": b64(value)}}],
            "failure": [{"request_range": {"key": k}}],
        }
        try:
            answer = self._gw.call("kv/txn", body, f"append of request {request_id}")
        except EtcdServerError as e:
            raise LiveError(f"{self._gw.describe}: append of request {request_id} failed: {e}") from e
        if answer.get("succeeded"):
            return int(answer["header"]["revision"])
        kvs = answer["responses"][0]["response_range"].get("kvs", [])
        if not kvs:  # cannot happen: the key existed when the comparison failed, in the same revision
            raise LiveError(f"{self._gw.describe}: append of request {request_id}: etcd answered neither way")
        if unb64(kvs[0].get("value", "")) != value:
            raise RequestIdConflict(
                f"request {request_id} is already in the log at position {kvs[0]['create_revision']} "
                "with a different command"
            )
        return int(kvs[0]["create_revision"])

    def _store_parts(self, request_id: str, value: bytes) -> bytes:
        """Put ``value`` in parts under ``P/part/<request id>/<sha256>/`` and return the reference the log
        entry holds instead: ``{"hivemesh-parts": n, "bytes": len, "sha256": hex}`` (a retry puts
        the same parts again: same keys, same bytes)."""
        digest = hashlib.sha256(value).hexdigest()
        base = f"{self._parts}{request_id}/{digest}/"  # a different command of the id: other keys
        size = max(1024, self.config.max_request_bytes - 2 * len(base.encode()) - _REQUEST_OVERHEAD - 64)
        chunks = [value[i : i + size] for i in range(0, len(value), size)]
        for i, chunk in enumerate(chunks):
            self._gw.call(
                "kv/put",
                {"key": b64(f"{base}{i:06d}"), "value": b64(chunk)},
                f"part {i + 1} of {len(chunks)} of request {request_id}",
            )
        ref = {_PARTS: len(chunks), "bytes": len(value), "sha256": digest}
        return json.dumps(ref, sort_keys=True).encode()

    def _whole(self, entry: Entry) -> Entry:
        """``entry`` with its command read back from its parts when it holds a reference to them."""
        if not entry.command.startswith(b'{"bytes":') or _PARTS.encode() not in entry.command:
            return entry
        try:
            ref = json.loads(entry.command)
        except ValueError:
            return entry
        if not isinstance(ref, dict) or not isinstance(ref.get(_PARTS), int):
            return entry
        base = f"{self._parts}{entry.request_id}/{ref.get('sha256')}/"
        answer = self._gw.call(
            "kv/range",
            {
                "key": b64(base),
                "range_end": b64(prefix_end(base)),
                "sort_order": "ASCEND",
                "sort_target": "KEY",
            },
            f"parts of request {entry.request_id}",
        )
        value = b"".join(unb64(kv.get("value", "")) for kv in answer.get("kvs", []))
        if len(answer.get("kvs", [])) != ref[_PARTS] or hashlib.sha256(value).hexdigest() != ref.get(
            "sha256"
        ):
            raise LiveError(
                f"{self._gw.describe}: the parts of request {entry.request_id} at position {entry.position} "
                f"are incomplete ({len(answer.get('kvs', []))} of {ref[_PARTS]})"
            )
        return Entry(entry.position, entry.request_id, value)

    def read(self, after: int = 0, limit: int = 1000, *, serializable: bool = False) -> list[Entry]:
        """Up to ``limit`` entries at positions above ``after``, in order.

        Linearizable by default: the read sees every append acknowledged before it started, and
        fails without quorum. ``serializable=True`` answers from the first member that replies,
        quorum or not, and may miss the newest entries.

        Raises :class:`LogCompacted` when entries after ``after`` were compacted away,
        :class:`LogUnavailable`, :class:`LogRefused`, ValueError (``after`` < 0, ``limit`` < 1).
        """
        return self._read(after, limit, serializable)[0]

    def _read(self, after: int, limit: int, serializable: bool = False) -> tuple[list[Entry], int, bool]:
        """Entries after ``after``, the revision the read saw and whether more entries follow."""
        if after < 0 or limit < 1:
            raise ValueError(f"after must be >= 0 and limit >= 1 (got after={after}, limit={limit})")
        ranges = [
            {"key": b64(self._marker), "serializable": serializable},
            {
                "key": b64(self._cmd),
                "range_end": b64(prefix_end(self._cmd)),
                "min_create_revision": str(after + 1),
                "sort_order": "ASCEND",
                "sort_target": "CREATE",
                "limit": str(limit),
                "serializable": serializable,
            },
        ]
        body = {"success": [{"request_range": r} for r in ranges]}  # read-only: one consistent snapshot
        try:
            answer = self._gw.call("kv/txn", body, f"read after position {after}")
        except EtcdServerError as e:
            raise LiveError(f"{self._gw.describe}: read after position {after} failed: {e}") from e
        marker, commands = (r["response_range"] for r in answer["responses"])
        below = int(unb64(marker["kvs"][0]["value"])) if marker.get("kvs") else 0
        if after < below - 1:
            raise LogCompacted(after, below, self._gw.describe)
        entries = [
            self._whole(
                Entry(
                    int(kv["create_revision"]),
                    unb64(kv["key"]).decode()[len(self._cmd) :],
                    unb64(kv.get("value", "")),
                )
            )
            for kv in commands.get("kvs", [])
        ]
        return entries, int(answer["header"]["revision"]), bool(commands.get("more"))

    def follow(self, after: int = 0, *, idle_s: float | None = None, batch: int = 1000) -> LogFollower:
        """An iterator of the entries after position ``after``, in order, waiting for new ones
        (see :class:`LogFollower`). ``idle_s``: how long a quiet watch lasts before the follower
        checks the log with a read, seconds (default: half of ``timeout_s``)."""
        return LogFollower(self, after, idle_s if idle_s is not None else self.config.timeout_s / 2, batch)

    # ------------------------------------------------------------------ zone positions
    def save_zone(self, zone: str, state: Mapping[str, Any]) -> None:
        """Store the applier state of ``zone`` (``P/zones/<zone>``: a JSON object whose
        ``position`` is the last command the zone applied). Raises :class:`LogUnavailable`,
        :class:`LogRefused`."""
        value = encode_command(dict(state))
        self._gw.call(
            "kv/put", {"key": b64(self._zones + zone), "value": b64(value)}, f"save of zone {zone}'s position"
        )

    def zone_states(self, *, serializable: bool = False) -> dict[str, dict[str, Any]]:
        """Every zone's stored applier state (see :meth:`save_zone`), by zone name. Raises
        :class:`LogUnavailable`, :class:`LogRefused`."""
        answer = self._gw.call(
            "kv/range",
            {
                "key": b64(self._zones),
                "range_end": b64(prefix_end(self._zones)),
                "serializable": serializable,
            },
            "read of the zones' positions",
        )
        out: dict[str, dict[str, Any]] = {}
        for kv in answer.get("kvs", []):
            try:
                out[unb64(kv["key"]).decode()[len(self._zones) :]] = json.loads(unb64(kv.get("value", "")))
            except ValueError:
                continue  # not written by an applier: ignored
        return out

    def head(self, *, serializable: bool = False) -> tuple[int, int]:
        """(position of the newest command, number of commands in the log; 0, 0 when empty).
        Raises :class:`LogUnavailable`, :class:`LogRefused`."""
        end = b64(prefix_end(self._cmd))
        answer = self._gw.call(
            "kv/range",
            {
                "key": b64(self._cmd),
                "range_end": end,
                "sort_order": "DESCEND",
                "sort_target": "CREATE",
                "limit": "1",
                "keys_only": True,
                "serializable": serializable,
            },
            "read of the log's head",
        )
        kvs = answer.get("kvs", [])
        return (int(kvs[0]["create_revision"]) if kvs else 0), int(answer.get("count", 0))

    def count_after(self, position: int, *, serializable: bool = False) -> int:
        """How many commands are at positions above ``position``. Raises :class:`LogUnavailable`,
        :class:`LogRefused`."""
        answer = self._gw.call(
            "kv/range",
            {
                "key": b64(self._cmd),
                "range_end": b64(prefix_end(self._cmd)),
                "min_create_revision": str(position + 1),
                "keys_only": True,
                "serializable": serializable,
            },
            f"count after position {position}",
        )  # etcd's count ignores the revision filters: count the keys
        return len(answer.get("kvs", []))

    def compacted_below(self) -> int:
        """The log's compaction point: commands at positions below it are gone (0: none)."""
        answer = self._gw.call("kv/range", {"key": b64(self._marker)}, "read of the compaction point")
        kvs = answer.get("kvs", [])
        return int(unb64(kvs[0]["value"])) if kvs else 0

    def compact(self, below: int) -> None:
        """Remove the commands at positions below ``below`` and compact etcd's history there.

        Call it only with a position every zone's applier has reached (the slowest zone's
        position, or lower): a zone behind ``below - 1`` then gets :class:`LogCompacted` and must
        re-sync. Removing an entry also forgets its request id, so a retried append of that id
        would append it again: compact well behind anything a proposer may still be retrying.
        Steps, each safe to repeat: the compaction point is raised first (so readers never see a
        log with a hole), then entries are deleted in batches, then etcd compacts its history
        (cluster-wide: the history of every key below ``below``; a watch from there is cancelled).

        Raises ValueError (``below`` < 1 or beyond the log's head, the cluster's current revision;
        nothing is changed then), :class:`LogUnavailable`, :class:`LogRefused`.
        """
        if below < 1:
            raise ValueError(f"below must be a position >= 1 (got {below})")
        self._raise_marker(below)
        end = b64(prefix_end(self._cmd))
        while True:
            answer = self._gw.call(
                "kv/range",
                {
                    "key": b64(self._cmd),
                    "range_end": end,
                    "max_create_revision": str(below - 1),
                    "keys_only": True,
                    "limit": str(_DELETE_BATCH),
                },
                f"compaction below {below}",
            )
            kvs = answer.get("kvs", [])
            if not kvs:
                break
            parts = [f"{self._parts}{unb64(kv['key']).decode()[len(self._cmd) :]}/" for kv in kvs]
            self._gw.call(
                "kv/txn",
                {
                    "compare": [
                        {
                            "key": kv["key"],
                            "target": "CREATE",
                            "result": "EQUAL",
                            "create_revision": kv["create_revision"],
                        }
                        for kv in kvs
                    ],
                    "success": [{"request_delete_range": {"key": kv["key"]}} for kv in kvs]
                    + [
                        {"request_delete_range": {"key": b64(p), "range_end": b64(prefix_end(p))}}
                        for p in parts
                    ],
                },
                f"compaction below {below}",
            )  # a failed comparison (another compaction got there first): the next range tells
        try:
            self._gw.call("kv/compaction", {"revision": str(below)}, f"etcd compaction at {below}")
        except EtcdServerError as e:
            if "compacted" not in e.message:  # already compacted as far or further: done
                raise LiveError(
                    f"{self._gw.describe}: etcd compaction at revision {below} failed: {e}"
                ) from e

    def _raise_marker(self, below: int) -> None:
        key = b64(self._marker)
        while True:
            answer = self._gw.call("kv/range", {"key": key}, f"compaction below {below}")
            kvs = answer.get("kvs", [])
            current = int(unb64(kvs[0]["value"])) if kvs else 0
            head = int(answer["header"]["revision"])
            if below > head:
                raise ValueError(
                    f"{self._gw.describe}: cannot compact below position {below}: the log's head is "
                    f"position {head} (compact below the slowest zone's position)"
                )
            if current >= below:
                return
            seen = kvs[0]["mod_revision"] if kvs else "0"
            txn = {
                "compare": [{"key": key, "target": "MOD", "result": "EQUAL", "mod_revision": seen}],
                "success": [{"request_put": {"key": key, "value": b64(str(below))}}],
            }
            if self._gw.call("kv/txn", txn, f"compaction below {below}").get("succeeded"):
                return

    def watch_from(self, revision: int, idle_s: float) -> WatchStream:
        """A watch stream of the log's new commands from ``revision`` on (creations only)."""
        return self._gw.watch(
            {
                "create_request": {
                    "key": b64(self._cmd),
                    "range_end": b64(prefix_end(self._cmd)),
                    "start_revision": str(revision),
                    "filters": ["NODELETE"],
                }
            },
            idle_s,
        )

    def entry_of(self, kv: Mapping[str, Any]) -> Entry | None:
        """The entry a watch event's key-value creates, or None (a change of an existing key, which
        appends never make)."""
        if str(kv.get("version", "")) != "1":
            return None
        return self._whole(
            Entry(
                int(kv["create_revision"]),
                unb64(kv["key"]).decode()[len(self._cmd) :],
                unb64(kv.get("value", "")),
            )
        )


class LogFollower:
    """The entries of a log after a position, in order, as they come: iterate to get them (each
    ``next`` blocks until the next entry exists); :attr:`position` is the last one yielded.

    It reads what is in the log (linearizably, ``batch`` entries a time), then watches from the
    revision of its last read; a watch that breaks (its member stops answering for ``idle_s``
    seconds, or etcd cancels it) is replaced by reading again after :attr:`position`. So a
    follower made again from the position an applier kept yields exactly the entries after it.

    Raises (from ``next``) :class:`LogCompacted` and :class:`LogUnavailable` (a read failed within
    ``timeout_s``): make a new follower from :attr:`position` to go on. :meth:`close`, also from
    another thread, ends the iteration.
    """

    def __init__(self, log: CommandLog, after: int, idle_s: float, batch: int) -> None:
        if after < 0:
            raise ValueError(f"after must be a position >= 0 (got {after})")
        self.position = after
        self._log = log
        self._idle_s = idle_s
        self._batch = batch
        self._closed = threading.Event()
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self._entries = self._run()

    def __iter__(self) -> LogFollower:
        return self

    @property
    def watching(self) -> str | None:
        """The endpoint whose watch stream the follower waits on now (None: reading, or closed)."""
        stream = self._stream
        return stream.endpoint if stream is not None else None

    def __next__(self) -> Entry:
        return next(self._entries)

    def close(self) -> None:
        """Stop: the iteration ends (a ``next`` waiting in another thread returns StopIteration)."""
        self._closed.set()
        with self._lock:
            if self._stream is not None:
                self._stream.close()

    def _run(self) -> Iterator[Entry]:
        while not self._closed.is_set():
            entries, revision, more = self._log._read(self.position, self._batch)
            for e in entries:
                self.position = e.position
                yield e
                if self._closed.is_set():
                    return
            if more:
                continue
            try:
                yield from self._watch(revision + 1)
            except WatchBroken:
                continue  # read again after self.position: nothing is lost or repeated

    def _watch(self, revision: int) -> Iterator[Entry]:
        stream = self._log.watch_from(revision, self._idle_s)
        with self._lock:
            if self._closed.is_set():
                stream.close()
                return
            self._stream = stream
        try:
            for message in stream.messages():
                if message.get("canceled"):  # e.g. history compacted past `revision`: read instead
                    return
                for event in message.get("events", []):
                    entry = self._log.entry_of(event.get("kv", {}))
                    if entry is None or entry.position <= self.position:
                        continue
                    self.position = entry.position
                    yield entry
                if self._closed.is_set():
                    return
        except WatchBroken:
            if self._closed.is_set():
                return
            raise
        finally:
            with self._lock:
                self._stream = None
            stream.close()
