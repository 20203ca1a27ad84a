"""A zone applier's durable state on its own host: the last position applied and the marker of the
command being applied, so it survives kill -9 and power loss at the cost of one local data sync per
command rather than a round trip to etcd.

The file holds two slots of equal size (at least 16 KiB each). A save writes the state, as a
record, over the slot holding the older one and syncs the file's data (``fdatasync``: the file's
size never changes, so no metadata is flushed, no rename, no directory sync). A record is
``HMLS1`` + sequence number (8 bytes, big-endian) + JSON length (4) + CRC-32 of the JSON (4) +
the JSON; load takes the valid record with the highest sequence number, so a save torn by a crash
leaves the state before it. The file is created, and replaced with larger slots when a state
outgrows them, the slow way: a temporary file synced, renamed over the old one, the directory
synced. A plain JSON file (the format of earlier hivemesh versions) is read as the state.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["StateFile"]

_MAGIC = b"HMLS1"
_HEADER = struct.Struct(">5sQII")  # magic, sequence, JSON length, CRC-32 of the JSON
_MIN_SLOT = 16 * 1024


class StateFile:
    """The state file at ``path`` (its directory is created when missing). Thread-safe; one
    process writes a given file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._slot = 0  # bytes per slot of the open file
        self._seq = 0  # sequence number of the newest record

    def load(self) -> dict[str, Any] | None:
        """The stored state, or None when there is no file yet. Raises OSError (unreadable) and
        ValueError (neither slot holds a valid record, and the file is no JSON object: not written
        by hivemesh)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if raw[:1] == b"{":
            state = json.loads(raw)
            if not isinstance(state, dict):
                raise ValueError(f"{self.path}: not a live applier state (a JSON object): {raw[:80]!r}")
            return state
        best: tuple[int, dict[str, Any]] | None = None
        slot = len(raw) // 2
        for offset in (0, slot):
            record = _read_record(raw, offset)
            if record is not None and (best is None or record[0] > best[0]):
                best = record
        if best is None:
            raise ValueError(f"{self.path}: not a live applier state (no valid record): {raw[:80]!r}")
        return best[1]

    def save(self, state: Mapping[str, Any]) -> None:
        """Replace the stored state with ``state`` (JSON-serialisable), durably. Raises OSError."""
        data = json.dumps(dict(state), sort_keys=True).encode()
        with self._lock:
            if self._fd is None:
                self._open()
            seq = self._seq + 1
            record = _HEADER.pack(_MAGIC, seq, len(data), zlib.crc32(data)) + data
            if len(record) > self._slot:
                self._create(record, 2 * len(record))
            else:
                assert self._fd is not None
                os.pwrite(self._fd, record, (seq % 2) * self._slot)
                os.fdatasync(self._fd)
            self._seq = seq

    def close(self) -> None:
        """Close the open file (a later save opens it again)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _open(self) -> None:
        """Open the existing two-slot file for saves, or create one holding the current state."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if raw[:1] not in (b"", b"{") and len(raw) >= 2 * _MIN_SLOT:
            slot = len(raw) // 2
            seqs = [r[0] for r in (_read_record(raw, 0), _read_record(raw, slot)) if r is not None]
            if seqs:
                self._fd = os.open(self.path, os.O_WRONLY)
                self._slot, self._seq = slot, max(seqs)
                return
        # no file, a plain JSON one, or no valid record: start a two-slot file with the state as read
        current = self.load() if raw else None
        data = json.dumps(current or {}, sort_keys=True).encode()
        self._seq = 0
        self._create(_HEADER.pack(_MAGIC, 0, len(data), zlib.crc32(data)) + data, _MIN_SLOT)

    def _create(self, record: bytes, slot: int) -> None:
        """Replace the file with one of two ``slot``-byte slots, ``record`` in the one its sequence
        number picks, atomically (temporary file, fsync, rename, directory fsync)."""
        slot = max(slot, _MIN_SLOT)
        seq = _HEADER.unpack_from(record)[1]
        image = bytearray(2 * slot)
        image[(seq % 2) * slot : (seq % 2) * slot + len(record)] = record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, bytes(image))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY)
        self._slot = slot


def _read_record(raw: bytes, offset: int) -> tuple[int, dict[str, Any]] | None:
    """(sequence, state) of the record at ``offset``, or None when there is no valid one there."""
    if offset + _HEADER.size > len(raw):
        return None
    magic, seq, length, crc = _HEADER.unpack_from(raw, offset)
    start = offset + _HEADER.size
    data = raw[start : start + length]
    if magic != _MAGIC or len(data) != length or zlib.crc32(data) != crc:
        return None
    try:
        state = json.loads(data)
    except ValueError:
        return None
    return (seq, state) if isinstance(state, dict) else None
