"""Copying Hive streaming files while their transaction batch is still open.

A streaming batch (Hive ``HiveStreamingConnection``, :class:`hivemesh.acid.streaming.StreamingConnection`)
writes every txn of the batch into one ORC file per bucket, ``delta_<min>_<max>/bucket_N``, that
stays open until the batch ends. After each txn the writer appends an intermediate ORC footer and
then the file's new readable length to the side file ``bucket_N_flush_length`` (8-byte big-endian
longs); readers read the data file only up to the side file's last length. The data file only grows:
the bytes before a flushed length never change. Rows of txns not committed yet are in the file too,
hidden from readers by their write id.

So the target of a txn's commit needs the data file up to a flushed length at least as large as the
one written for that txn, and a side file that never names more bytes than the target's data file
holds. :func:`copy_streaming_file` does that for one data file, given the source side file's last
length ``L`` read *before* the data (so the source holds at least ``L`` bytes):

1. the target data file is brought to exactly the source's bytes ``[0, L)``:
   * ``append`` (design B of seed 002): only ``[T, L)`` is appended, ``T`` being the target's size,
     when the target already has this file's side file (its readers then read up to their side
     length, never the bytes being appended) and the last 4 KiB before ``T`` equal the source's.
     A copier killed mid-append leaves bytes past the target's side length: they are the source's
     own bytes at those offsets (the source only appends), so the next run appends from there.
   * ``rewrite`` (design A: object stores cannot append, and the first copy of a file): ``[0, L)``
     is written to a hidden temporary and renamed into place (readers holding the old file keep
     reading it; its bytes are a prefix of the new one);
2. then ``L`` is added to the target side file (appended in place, or the whole side file rewritten
   through a temporary), so a reader never sees a length larger than the data there.

When the batch has ended at the source (no side file, final footer written) the rest of the file is
copied the same way and the target side file deleted afterwards. Bytes of txns that are still open
or aborted travel with the file and stay hidden on the target by the same write ids (the target's
write-id state is the source's). Units: bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from hivemesh.acid.names import SIDE_FILE_SUFFIX, encode_flush_length, parse_flush_lengths, side_file_name
from hivemesh.replication.config import StreamingCopy
from hivemesh.storage.copy import staged

__all__ = [
    "StreamingCopy",
    "StreamingCopyResult",
    "StreamingTask",
    "copy_streaming_file",
    "open_streaming_file_problem",
    "read_flush_length",
]

CHUNK = 8 * 1024 * 1024
TAIL_CHECK = 4096


@dataclass(frozen=True)
class StreamingTask:
    """One streaming data file to bring up to date: source and target paths on their file systems,
    ``length``: the source side file's last length (bytes; None: the batch ended, copy the whole
    file and drop the target side file), ``append``: design B allowed."""

    source: str
    target: str
    length: int | None
    append: bool


@dataclass
class StreamingCopyResult:
    """What one :func:`copy_streaming_file` did: data bytes written (``appended`` of them in place),
    side-file bytes written, and the target data file's size afterwards."""

    target: str
    data_bytes: int = 0
    appended: int = 0
    side_bytes: int = 0
    size: int = 0


def read_flush_length(fs: pafs.FileSystem, side_path: str) -> tuple[bool, int | None]:
    """``(exists, last length)`` of a side file: ``(False, None)`` when it is gone (the batch
    ended), ``(True, None)`` when it holds no complete length yet. Raises OSError."""
    try:
        with fs.open_input_stream(side_path) as f:
            data = f.read()
    except FileNotFoundError:
        return False, None
    lengths = parse_flush_lengths(data)
    return True, lengths[-1] if lengths else None


def _size(fs: pafs.FileSystem, path: str) -> int | None:
    info = fs.get_file_info(path)
    return info.size if info.type == pafs.FileType.File else None


def _read(fs: pafs.FileSystem, path: str, offset: int, n: int) -> bytes:
    with fs.open_input_file(path) as f:
        return bytes(f.read_at(n, offset)) if n > 0 else b""


def _copy_range(src_fs: pafs.FileSystem, src: str, out: pa.NativeFile, start: int, end: int) -> int:
    with src_fs.open_input_file(src) as f:
        pos = start
        while pos < end:
            chunk = f.read_at(min(CHUNK, end - pos), pos)
            if not chunk:
                raise OSError(f"{src} ended at {pos} bytes, before its flushed length {end}")
            out.write(chunk)
            pos += len(chunk)
    return end - start


def _write_atomically(fs: pafs.FileSystem, path: str, write: Callable[[pa.NativeFile], object]) -> None:
    with staged(fs, path) as tmp, fs.open_output_stream(tmp, compression=None) as out:
        write(out)


def _tail_matches(src_fs: pafs.FileSystem, src: str, dst_fs: pafs.FileSystem, dst: str, end: int) -> bool:
    n = min(TAIL_CHECK, end)
    return _read(src_fs, src, end - n, n) == _read(dst_fs, dst, end - n, n)


def copy_streaming_file(
    src_fs: pafs.FileSystem, dst_fs: pafs.FileSystem, task: StreamingTask
) -> StreamingCopyResult:
    """Bring one streaming data file (and its side file) on the target up to ``task.length`` bytes
    of the source (module docstring). Idempotent; safe to rerun after a kill at any point. Raises
    OSError naming the file (the source shorter than its flushed length, storage errors)."""
    src, dst = task.source, task.target
    out = StreamingCopyResult(dst)
    src_size = _size(src_fs, src)
    if src_size is None:
        raise FileNotFoundError(f"{src}: streaming data file missing at the source")
    end = src_size if task.length is None else task.length
    if end > src_size:
        raise OSError(f"{src} holds {src_size} bytes, less than its flushed length {end}")
    dst_side = side_file_name(dst)
    side_exists, side_len = read_flush_length(dst_fs, dst_side)
    have = _size(dst_fs, dst)
    appendable = (
        task.append
        and have is not None
        and side_exists
        and side_len is not None
        and side_len <= have <= end
        and _tail_matches(src_fs, src, dst_fs, dst, have)
    )
    if have == end and (appendable or (not side_exists and _tail_matches(src_fs, src, dst_fs, dst, end))):
        pass  # the data is there already (a rerun)
    elif appendable:
        assert have is not None
        try:
            with dst_fs.open_append_stream(dst, compression=None) as f:
                out.data_bytes = out.appended = _copy_range(src_fs, src, f, have, end)
        except (NotImplementedError, pa.ArrowNotImplementedError):
            appendable = False
    if not appendable and not (have == end and _tail_matches(src_fs, src, dst_fs, dst, end)):
        _write_atomically(dst_fs, dst, lambda f: _copy_range(src_fs, src, f, 0, end))
        out.data_bytes = end
    out.size = end
    if task.length is None:
        if side_exists:
            dst_fs.delete_file(dst_side)
        return out
    if side_len == end:
        return out
    record = encode_flush_length(end)
    if appendable and side_exists:
        with dst_fs.open_append_stream(dst_side, compression=None) as f:
            f.write(record)
        out.side_bytes = len(record)
    else:
        previous = b""
        if side_exists:
            with dst_fs.open_input_stream(dst_side) as f:
                data = f.read()
            previous = data[: len(data) - len(data) % 8]
        _write_atomically(dst_fs, dst_side, lambda f: f.write(previous + record))
        out.side_bytes = len(previous) + len(record)
    return out


def _md5(fs: pafs.FileSystem, path: str, n: int) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with fs.open_input_file(path) as f:
        pos = 0
        while pos < n:
            chunk = f.read_at(min(CHUNK, n - pos), pos)
            if not chunk:
                break
            digest.update(chunk)
            pos += len(chunk)
    return digest.hexdigest()


def open_streaming_file_problem(
    src_fs: pafs.FileSystem, src: str, dst_fs: pafs.FileSystem, dst: str
) -> str | None:
    """What is wrong with the target copy of a data file (or side file, by either path) of a batch
    still open at the source, or None: the target data file must be a prefix of the source's (MD5
    of that many bytes), and its side file, if any, must name no more bytes than it holds. A target
    that lags (holds an earlier flushed length) is fine. Raises OSError for storage errors."""
    if src.endswith(SIDE_FILE_SUFFIX):
        src, dst = src[: -len(SIDE_FILE_SUFFIX)], dst[: -len(SIDE_FILE_SUFFIX)]
    have = _size(dst_fs, dst)
    _, side_len = read_flush_length(dst_fs, side_file_name(dst))
    if have is None:
        return f"{dst} absent" if side_len is not None else None
    src_size = _size(src_fs, src) or 0
    if have > src_size:
        return f"{dst} holds {have} bytes, more than the source's {src_size}"
    if _md5(src_fs, src, have) != _md5(dst_fs, dst, have):
        return f"{dst}: its {have} bytes differ from the source's first {have}"
    if side_len is not None and side_len > have:
        return f"{side_file_name(dst)} names {side_len} bytes, {dst} holds {have}"
    return None
