"""Warehouse locations and file-system operations on table directories.

Locations of the ``file`` scheme are written as Hadoop does (``file:/abs/path``); other schemes are
stored as given and their directories are managed through ``pyarrow.fs`` when it supports the
scheme. Operations on a location that cannot be reached log and report failure instead of raising.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow.fs as pafs

log = logging.getLogger("hivemesh.storage.locations")


def _local_path(location: str) -> str:
    """The path of a ``file:`` location, taken literally as Hadoop does (``%2F`` stays ``%2F``).

    ``file:/x``, ``file:///x`` and ``file://localhost/x`` all give ``/x``.
    """
    rest = location[len("file:") :]
    if rest.startswith("//"):
        authority_and_path = rest[2:]
        slash = authority_and_path.find("/")
        rest = authority_and_path[slash:] if slash >= 0 else "/"
    return rest or "/"


def normalize_location(location: str) -> str:
    """A plain path -> ``file:/abs/path``; ``file:///x`` -> ``file:/x``; other URIs unchanged.

    Nothing is percent-decoded: escaped partition values (``k=a%2Fb``) name directories literally.
    """
    if "://" not in location and not location.startswith("file:"):
        return "file:" + str(Path(location).resolve())
    if location.startswith("file:"):
        path = _local_path(location)
        return "file:" + (path.rstrip("/") or "/")
    return location.rstrip("/") if len(location) > 1 else location


def join_location(base: str, *parts: str) -> str:
    """``file:/w`` + ``db.db`` -> ``file:/w/db.db``."""
    return "/".join([base.rstrip("/"), *parts])


def _fs_and_path(location: str) -> tuple[pafs.FileSystem, str] | None:
    if location.startswith("file:"):
        return pafs.LocalFileSystem(), _local_path(location)
    try:
        return pafs.FileSystem.from_uri(location)
    except Exception as e:  # unsupported scheme or no credentials: leave the storage alone
        log.info("not managing storage at %s: %s", location, e)
        return None


def _target(location: str | None) -> tuple[pafs.FileSystem, str] | None:
    """File system and path of a location hivemesh manages, or None (no location, or a scheme
    pyarrow cannot open here)."""
    return _fs_and_path(location) if location else None


def make_dirs(location: str | None) -> bool:
    """Create a directory (and parents) if missing; True when it exists afterwards."""
    target = _target(location)
    if target is None:
        return False
    fs, path = target
    try:
        fs.create_dir(path, recursive=True)
        return True
    except OSError as e:
        log.warning("could not create %s: %s", location, e)
        return False


def delete_dir(location: str | None) -> bool:
    """Delete a directory tree if it exists; True when something was deleted. Never raises."""
    target = _target(location)
    if target is None:
        return False
    fs, path = target
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return False
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path)
        else:
            fs.delete_file(path)
        return True
    except OSError as e:
        log.warning("could not delete %s: %s", location, e)
        return False


def move_dir(src: str, dst: str) -> bool:
    """Move a directory (a rename on the same file system); True when moved."""
    a, b = _fs_and_path(src), _fs_and_path(dst)
    if a is None or b is None:
        return False
    fs, src_path = a
    _, dst_path = b
    try:
        if fs.get_file_info(src_path).type == pafs.FileType.NotFound:
            return False
        fs.create_dir(os.path.dirname(dst_path), recursive=True)
        fs.move(src_path, dst_path)
        return True
    except OSError as e:
        log.warning("could not move %s to %s: %s", src, dst, e)
        raise


def is_subdir(child: str | None, parent: str | None) -> bool:
    """True when location ``child`` is ``parent`` or lies below it."""
    if not child or not parent:
        return False
    p = parent.rstrip("/")
    return child == p or child.startswith(p + "/")


def exists(location: str | None) -> bool:
    """True when the location exists on a file system hivemesh can reach."""
    target = _target(location)
    if target is None:
        return False
    fs, path = target
    try:
        return fs.get_file_info(path).type != pafs.FileType.NotFound
    except OSError:
        return False


def quick_stats(location: str | None) -> tuple[int, int] | None:
    """``(number of files, total bytes)`` below a location, recursively, leaving out hidden
    entries (names starting with ``_`` or ``.`` at any level, as Hive's HIDDEN_FILES_PATH_FILTER);
    None when the storage cannot be listed."""
    target = _target(location)
    if target is None:
        return None
    fs, path = target
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except OSError as e:
        log.warning("could not list %s: %s", location, e)
        return None
    base = path.rstrip("/") + "/"
    files = size = 0
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(base) :] if info.path.startswith(base) else info.base_name
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        files += 1
        size += info.size or 0
    return files, size
