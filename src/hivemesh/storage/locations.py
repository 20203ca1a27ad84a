"""Warehouse locations and file-system operations on table directories: the one place where a
location becomes a ``pyarrow.fs`` file system and a path on it (:func:`resolve_location`).

Locations of the ``file`` scheme are written as Hadoop does (``file:/abs/path``); other schemes are
stored as given and their directories are managed through ``pyarrow.fs`` when it supports the
scheme. Two kinds of operations:

* on a location (what the metastore manages: :func:`make_dirs`, :func:`delete_dir`,
  :func:`move_dir`, :func:`exists`, :func:`quick_stats`): a location that cannot be reached logs
  and reports failure instead of raising;
* on a resolved ``(file system, path)`` (what the ACID readers and writers use: :func:`path_exists`,
  :func:`list_dir`, :func:`remove_path`): storage errors raise OSError, except in
  :func:`remove_path`, which is best effort.
"""

from __future__ import annotations

import logging
import os
import posixpath
from pathlib import Path

import pyarrow.fs as pafs

from hivemesh.storage.hdfs import hdfs_filesystem, split_hdfs_location

log = logging.getLogger("hivemesh.storage.locations")


def local_path(location: str) -> str:
    """The path of a ``file:`` location, taken literally as Hadoop does (``%2F`` stays ``%2F``).

    ``file:/x``, ``file:///x`` and ``file://localhost/x`` all give ``/x``. Pure; never raises.
    """
    rest = location[len("file:") :]
    if rest.startswith("//"):
        authority_and_path = rest[2:]
        slash = authority_and_path.find("/")
        rest = authority_and_path[slash:] if slash >= 0 else "/"
    return rest or "/"


def _clean_path(path: str) -> str:
    """``/a/./b/../c/`` -> ``/a/c``: ``.`` and ``..`` segments resolved, repeated and trailing
    slashes dropped (never above the root)."""
    if path.startswith("/") and "//" not in path and "/." not in path and not path.endswith("/"):
        return path  # already clean (the common case)
    cleaned = posixpath.normpath("/" + path.lstrip("/"))
    return "/" if cleaned in ("/", "//") else cleaned.lstrip("/").join(("/", ""))


def normalize_location(location: str) -> str:
    """A plain path -> ``file:/abs/path``; ``file:///x`` -> ``file:/x``; ``.`` and ``..`` segments
    resolved (``file:///tmp/x/../../b`` -> ``file:/b``, ``s3a://b/w/x/..`` -> ``s3a://b/w``);
    other URIs otherwise unchanged.

    Nothing is percent-decoded: escaped partition values (``k=a%2Fb``) name directories literally. Only a
    plain path touches the file system (``Path.resolve``: OSError, or RuntimeError for a symbolic-link loop);
    otherwise pure and never raises.
    """
    if "://" not in location and not location.startswith("file:"):
        return "file:" + str(Path(location).resolve())
    if location.startswith("file:"):
        return "file:" + _clean_path(local_path(location))
    scheme, rest = location.split("://", 1)
    authority, slash, path = rest.partition("/")
    if not slash:
        return location
    if "/." in "/" + path:
        cleaned = _clean_path(path)
        return f"{scheme}://{authority}{'' if cleaned == '/' else cleaned}"
    return location.rstrip("/") if len(location) > 1 else location


DEFAULT_PORTS: dict[str, str] = {"hdfs": "8020"}
"""Schemes whose authority names the same file system with or without its default port:
``hdfs://nn/x`` is ``hdfs://nn:8020/x`` (the NameNode's default RPC port); ``hdfs://nn:9000/x`` is
neither of them."""


def _location_parts(location: str) -> tuple[str, str, str]:
    """``(scheme, authority, path)`` of a location in the form :func:`clean_location` describes."""
    head = location.split("/", 1)[0]
    if ":" not in head:  # a plain path (a colon only after the first slash is part of the path)
        return "file", "", _clean_path(os.path.abspath(location))
    scheme, rest = location.split(":", 1)
    scheme = scheme.lower()
    if scheme == "file":
        return "file", "", _clean_path(local_path("file:" + rest))
    authority = ""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
    return scheme, authority, _clean_path(rest)


def _join_parts(scheme: str, authority: str, path: str) -> str:
    if scheme == "file":
        return "file:" + path
    if not authority:
        return f"{scheme}:{path}"
    return f"{scheme}://{authority}{'' if path == '/' else path}"


def clean_location(location: str) -> str:
    """``location`` as Hadoop's ``Path`` makes it: a plain path is a local one (``/data/wh`` ->
    ``file:/data/wh``, a relative path made absolute against the working directory, symbolic links
    left alone); ``file:///x``, ``file://localhost/x`` and ``file:/x`` -> ``file:/x``; the scheme
    lower case (``HDFS://NN:8020/x`` -> ``hdfs://NN:8020/x``: the authority is kept as written, an
    HA nameservice or a legacy bucket may need its case); ``.``, ``..``, repeated and trailing
    slashes removed from the path. Nothing is percent-decoded and the port is kept as written.
    Pure (no file system access); never raises."""
    return _join_parts(*_location_parts(location))


def location_key(location: str) -> str:
    """The normal form in which locations are compared (one directory, one key): as
    :func:`clean_location`, the authority in lower case (Hadoop compares it ignoring case) and a
    port that is its scheme's default (:data:`DEFAULT_PORTS`) left out, so ``hdfs://nn/x``,
    ``hdfs://NN:8020/x/`` and ``hdfs://nn:8020/x`` share the key ``hdfs://nn/x`` while
    ``hdfs://nn:9000/x`` keeps its own. Only for comparing: a location written to a metastore
    keeps its authority as written. Pure; never raises."""
    scheme, authority, path = _location_parts(location)
    authority = authority.lower()
    port = DEFAULT_PORTS.get(scheme)
    if port is not None and authority.endswith(":" + port):
        authority = authority[: -len(port) - 1]
    return _join_parts(scheme, authority, path)


def location_relpath(location: str, prefix: str) -> str | None:
    """Where ``location`` lies relative to directory location ``prefix``, both compared in their
    :func:`location_key` form (on path boundaries: ``file:/w/ab`` is not under ``file:/w/a``):
    ``""`` when they are the same directory, ``"db.db/t"`` when below it, None when outside. Pure; never
    raises."""
    return key_relpath(location_key(location), location_key(prefix))


def key_relpath(key: str, prefix_key: str) -> str | None:
    """:func:`location_relpath` of two locations already in :func:`location_key` form (for
    callers that compare many locations against the same prefixes). Pure; never raises."""
    if key == prefix_key:
        return ""
    boundary = prefix_key if prefix_key.endswith("/") else prefix_key + "/"
    return key[len(boundary) :] if key.startswith(boundary) else None


def location_within(location: str | None, prefix: str | None) -> bool:
    """True when ``location`` is directory ``prefix`` or lies below it (:func:`location_relpath`);
    False when either is empty. Pure; never raises."""
    return bool(location) and bool(prefix) and location_relpath(location or "", prefix or "") is not None


def join_location(base: str, *parts: str) -> str:
    """``file:/w`` + ``db.db`` -> ``file:/w/db.db``."""
    return "/".join([base.rstrip("/"), *parts])


def resolve_location(location: str, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """``(file system, path on it)`` of a location (a table, partition, delta directory or file).

    With ``filesystem`` the location is a path on it (a URI's scheme and authority are dropped).
    Without: a plain path or ``file:`` URI -> the local file system (``file:/x``, ``file:///x``
    -> ``/x``; relative paths made absolute); ``hdfs://`` -> the HDFS client of
    :func:`hivemesh.storage.hdfs.hdfs_filesystem` (ImportError without its wheel); any other URI ->
    ``pyarrow.fs.FileSystem.from_uri`` (ValueError/OSError when pyarrow cannot open it).
    """
    if filesystem is not None:
        if location.startswith("file:"):
            return filesystem, local_path(location)
        if "://" in location:
            rest = location.split("://", 1)[1]
            return filesystem, "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return filesystem, location
    if location.startswith("file:"):
        return pafs.LocalFileSystem(), local_path(location)
    if "://" not in location:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    if location[:7].lower() == "hdfs://":
        authority, path = split_hdfs_location(location)
        return hdfs_filesystem(authority), _clean_path(path)
    filesystem, path = pafs.FileSystem.from_uri(location)
    return filesystem, str(path)


def same_location(a: str | None, b: str) -> bool:
    """True when locations ``a`` and ``b`` name the same directory (same kind of file system, for
    HDFS the same NameNode, same path but for trailing slashes); False when ``a`` is empty. Raises
    ValueError/OSError as :func:`resolve_location` when pyarrow cannot open the file system of
    either."""
    if not a:
        return False
    fa, pa_ = resolve_location(a)
    fb, pb = resolve_location(b)
    if type(fa) is not type(fb) or (isinstance(fa, pafs.PyFileSystem) and not fa.equals(fb)):
        return False  # a PyFileSystem (HDFS) names its NameNode in the handler, not in the path
    return pa_.rstrip("/") == pb.rstrip("/")


def _target(location: str | None) -> tuple[pafs.FileSystem, str] | None:
    """File system and path of a location hivemesh manages, or None (no location, or a scheme
    pyarrow cannot open here)."""
    if not location:
        return None
    try:
        return resolve_location(location)
    except Exception as e:  # unsupported scheme or no credentials: leave the storage alone
        log.info("not managing storage at %s: %s", location, e)
        return None


def make_dirs(location: str | None) -> bool:
    """Create a directory (and parents) if missing; True when it exists afterwards. Never raises: a
    location hivemesh does not manage, or a storage error (logged), gives False."""
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
    """Delete a directory tree (or a file) if it exists; True when something was deleted. Never raises."""
    target = _target(location)
    return target is not None and remove_path(*target)


def empty_dir(location: str | None) -> bool:
    """Delete everything inside a directory, hidden entries included, and leave it (created when
    missing) empty: what Hive's truncate does to a table or partition directory. False, having
    done nothing, for a location hivemesh does not manage (no location, a scheme pyarrow cannot
    open here); OSError when the storage refuses."""
    target = _target(location)
    if target is None:
        return False
    fs, path = target
    for info in list_dir(fs, path):
        delete_path(fs, info.path)
    fs.create_dir(path, recursive=True)
    return True


def write_file(location: str, data: bytes) -> None:
    """Write ``data`` as the file ``location``, its directory created when missing. OSError when
    the storage refuses or hivemesh cannot open its file system."""
    target = _target(location)
    if target is None:
        raise OSError(f"cannot write {location}: unsupported location")
    fs, path = target
    fs.create_dir(os.path.dirname(path), recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(data)


def move_dir(src: str, dst: str) -> bool:
    """Move a directory (a rename on the same file system); True when moved. False, having done nothing,
    when either location is not managed here or ``src`` is missing. Unlike the other location operations it
    raises OSError (after logging it) when the storage refuses."""
    a, b = _target(src), _target(dst)
    if a is None or b is None:
        return False
    fs, src_path = a
    _, dst_path = b
    try:
        if not path_exists(fs, src_path):
            return False
        fs.create_dir(os.path.dirname(dst_path), recursive=True)
        fs.move(src_path, dst_path)
        return True
    except OSError as e:
        log.warning("could not move %s to %s: %s", src, dst, e)
        raise


def is_subdir(child: str | None, parent: str | None) -> bool:
    """True when location ``child`` is ``parent`` or lies below it. Compares the strings as given (no
    :func:`location_key`); pure, never raises."""
    if not child or not parent:
        return False
    p = parent.rstrip("/")
    return child == p or child.startswith(p + "/")


def exists(location: str | None) -> bool:
    """True when the location exists on a file system hivemesh can reach. Never raises: a storage error, or
    a location hivemesh does not manage, gives False."""
    target = _target(location)
    if target is None:
        return False
    try:
        return path_exists(*target)
    except OSError:
        return False


def quick_stats(location: str | None) -> tuple[int, int] | None:
    """``(number of files, total bytes)`` below a location, recursively, leaving out hidden
    entries (names starting with ``_`` or ``.`` at any level, as Hive's HIDDEN_FILES_PATH_FILTER);
    None when the storage cannot be listed. Never raises: a storage error is logged."""
    target = _target(location)
    if target is None:
        return None
    fs, path = target
    try:
        listed = list_files(fs, path)
    except OSError as e:
        log.warning("could not list %s: %s", location, e)
        return None
    visible = [size for rel, size in listed if not any(p.startswith(("_", ".")) for p in rel.split("/"))]
    return len(visible), sum(visible)


# --- on a resolved (file system, path) ------------------------------------------------------------


def path_exists(fs: pafs.FileSystem, path: str) -> bool:
    """True when ``path`` (a file or directory) exists on ``fs``. OSError for storage errors."""
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def list_dir(fs: pafs.FileSystem, path: str, *, recursive: bool = False) -> list[pafs.FileInfo]:
    """The entries (files and directories) of directory ``path`` on ``fs``, below it at any depth
    when ``recursive``; empty when ``path`` does not exist. OSError for other storage errors."""
    return list(fs.get_file_info(pafs.FileSelector(path, recursive=recursive, allow_not_found=True)))


def list_files(fs: pafs.FileSystem, path: str) -> list[tuple[str, int]]:
    """Every file below directory ``path`` on ``fs``, at any depth, as ``(path relative to it,
    size in bytes)``; empty when ``path`` does not exist. OSError for other storage errors."""
    prefix = path.rstrip("/") + "/"
    return [
        (info.path[len(prefix) :] if info.path.startswith(prefix) else info.path, info.size or 0)
        for info in list_dir(fs, path, recursive=True)
        if info.type == pafs.FileType.File
    ]


def delete_path(fs: pafs.FileSystem, path: str) -> bool:
    """Delete a directory tree or a file on ``fs`` if it exists; True when something was deleted.
    Raises OSError for storage errors."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return False
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    else:
        fs.delete_file(path)
    return True


def remove_path(fs: pafs.FileSystem, path: str) -> bool:
    """:func:`delete_path`, best effort: storage errors are logged, never raised."""
    try:
        return delete_path(fs, path)
    except Exception as e:  # best effort: a caller cleaning up must not fail on it
        log.warning("could not delete %s: %s", path, e)
        return False
