"""Copying files between locations by content, as replication needs it.

A file is copied when the target lacks it or its size or checksum differs; it is written under a
hidden temporary name in the target directory (``.<name>.hivemesh-<random>.tmp``: Hive, Spark and
Trino skip names starting with ``.``) and then renamed into place, so a reader of the target never
sees a partial file. Any file system ``pyarrow.fs`` supports works on either side (local, S3,
HDFS, ...); on object stores the rename is a server-side copy, still never a partial object.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow.fs as pafs

from hivemesh.storage.hdfs import input_stream, output_stream
from hivemesh.storage.locations import path_exists, resolve_location

__all__ = [
    "CHUNK",
    "CopyResult",
    "FileState",
    "checksum",
    "copy_file",
    "is_temporary",
    "list_tree",
    "staged",
    "sync_tree",
]

log = logging.getLogger(__name__)

CHUNK = 8 * 1024 * 1024
"""Bytes read or written at a time (8 MiB)."""


@dataclass(frozen=True)
class FileState:
    """A file below a directory: ``path`` relative to it (``/``-separated), ``size`` in bytes."""

    path: str
    size: int


@dataclass(frozen=True)
class CopyResult:
    """What :func:`sync_tree` did: files and bytes copied, files left as they were (same size and
    checksum), files removed from the target (only with ``delete_extra``)."""

    copied: int
    bytes_copied: int
    unchanged: int
    deleted: int


def checksum(fs: pafs.FileSystem, path: str) -> str:
    """MD5 of a file's content as 32 hex digits (read in :data:`CHUNK` pieces). Raises OSError."""
    digest = hashlib.md5(usedforsecurity=False)
    with input_stream(fs, path) as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def staged(dst_fs: pafs.FileSystem, dst: str) -> Iterator[str]:
    """A hidden temporary path beside ``dst`` to write to; renamed to ``dst`` when the block ends,
    deleted when it raises (``dst`` then left as it was). The parent directory is created."""
    parent, name = posixpath.split(dst)
    dst_fs.create_dir(parent, recursive=True)
    tmp = posixpath.join(parent, f".{name}.hivemesh-{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        dst_fs.move(tmp, dst)
    except BaseException:
        try:
            dst_fs.delete_file(tmp)
        except OSError:
            pass
        raise


def copy_file(src_fs: pafs.FileSystem, src: str, dst_fs: pafs.FileSystem, dst: str) -> int:
    """Copy one file, atomically for readers of ``dst``; returns the bytes copied.

    The parent directory of ``dst`` is created when missing. On failure the temporary file is
    removed and the error (OSError) raised; an existing ``dst`` is then left as it was.
    """
    with staged(dst_fs, dst) as tmp:
        size = src_fs.get_file_info(src).size
        if isinstance(src_fs, pafs.PyFileSystem) or isinstance(dst_fs, pafs.PyFileSystem):
            # HDFS (a Python-implemented file system): a plain loop of CHUNK reads and writes on
            # the client's own streams; pyarrow's copy_files moves such streams at under half the speed
            with input_stream(src_fs, src) as f, output_stream(dst_fs, tmp) as out:
                while chunk := f.read(CHUNK):
                    out.write(chunk)
        else:
            pafs.copy_files(
                src, tmp, source_filesystem=src_fs, destination_filesystem=dst_fs, chunk_size=CHUNK
            )
    return int(size or 0)


def is_temporary(name: str) -> bool:
    """Whether file name ``name`` is a hidden temporary copy (``.<name>.hivemesh-<random>.tmp``)."""
    return name.startswith(".") and ".hivemesh-" in name and name.endswith(".tmp")


def list_tree(fs: pafs.FileSystem, root: str) -> Iterator[FileState]:
    """Every file below directory ``root`` (any depth), hidden temporary copies excluded; nothing
    when ``root`` does not exist. Raises OSError for other storage errors."""
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    base = root.rstrip("/") + "/"
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or is_temporary(info.base_name):
            continue
        yield FileState(info.path[len(base) :] if info.path.startswith(base) else info.base_name, info.size)


def sync_tree(
    source: str, target: str, *, verify_checksums: bool = True, delete_extra: bool = False
) -> CopyResult:
    """Make directory location ``target`` hold the files of ``source`` (locations as the metastore
    stores them: ``file:/...``, ``s3://...``, ...).

    A file is copied when the target lacks it or its size differs, or (``verify_checksums``) its MD5
    differs. ``delete_extra`` removes target files the source does not have. Raises OSError naming
    the file for a storage error; files already copied stay copied (a rerun finishes the work).
    """
    src_fs, src_root = resolve_location(source)
    dst_fs, dst_root = resolve_location(target)
    wanted = {f.path: f for f in list_tree(src_fs, src_root)}
    present = {f.path: f for f in list_tree(dst_fs, dst_root)}
    copied = nbytes = unchanged = deleted = 0
    for rel, f in sorted(wanted.items()):
        src, dst = posixpath.join(src_root, rel), posixpath.join(dst_root, rel)
        have = present.get(rel)
        same = have is not None and have.size == f.size
        if same and verify_checksums:
            same = checksum(src_fs, src) == checksum(dst_fs, dst)
        if same:
            unchanged += 1
            continue
        try:
            nbytes += copy_file(src_fs, src, dst_fs, dst)
        except OSError as e:
            raise OSError(f"copying {source}/{rel} to {target}/{rel} failed: {e}") from e
        copied += 1
    if delete_extra:
        for rel in sorted(set(present) - set(wanted)):
            path = posixpath.join(dst_root, rel)
            if path_exists(dst_fs, path):
                dst_fs.delete_file(path)
                deleted += 1
    log.debug(
        "sync %s -> %s: %d copied (%d bytes), %d unchanged, %d deleted",
        source,
        target,
        copied,
        nbytes,
        unchanged,
        deleted,
    )
    return CopyResult(copied=copied, bytes_copied=nbytes, unchanged=unchanged, deleted=deleted)
