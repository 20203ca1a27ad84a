"""``hdfs://`` locations as ``pyarrow.fs`` file systems, with no Hadoop installation needed.

Two clients, chosen by ``$HIVEMESH_HDFS_CLIENT``:

* ``native`` (the default): the ``hdfs-native`` wheel (PyPI; a Rust client of the NameNode RPC and
  DataNode transfer protocols, no JVM, no ``libhdfs``), wrapped as a ``pyarrow.fs.PyFileSystem``
  (:class:`NativeHdfsHandler`). It reads ``$HADOOP_CONF_DIR`` (``core-site.xml``,
  ``hdfs-site.xml``) when set, so HA name services and ``fs.defaultFS`` resolve as Hadoop's own
  client does, and supports Kerberos through the system's GSSAPI library.
* ``libhdfs``: ``pyarrow.fs.HadoopFileSystem``, Hadoop's own Java client through JNI, for a
  machine with a Hadoop client installed: it needs ``libhdfs.so`` (``$ARROW_LIBHDFS_DIR`` or
  ``$HADOOP_HOME/lib/native``), ``$JAVA_HOME`` and Hadoop's jars on ``$CLASSPATH``
  (``hadoop classpath --glob``). Maven Central's Hadoop jars do not ship ``libhdfs.so``.

Both take a location ``hdfs://authority/path``; ``hdfs://nn/x`` uses the NameNode RPC port 8020.

Known limit of the ``native`` client (0.14.7): a file still open for writing reads as empty, even
the bytes its writer flushed (``hflush``/``hsync``); Hadoop's Java client (and WebHDFS) asks the
DataNode for their visible length and reads them. Its writer's ``hsync`` does make them visible to
Java readers.

An unreachable NameNode fails the ``native`` client's call in 1-2 s (:data:`RETRY_DEFAULTS`: 3
attempts 0.1-1 s apart), where Hadoop's own defaults retry for about 3 minutes: a metastore call on
a location of a NameNode that is down should fail, not hang. A ``dfs.client.failover.*`` value set
in ``$HADOOP_CONF_DIR`` wins over these.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any
from xml.etree import ElementTree

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = [
    "CLIENT_ENV",
    "CLIENTS",
    "RETRY_DEFAULTS",
    "NativeHdfsHandler",
    "hdfs_client_name",
    "hdfs_filesystem",
    "input_stream",
    "output_stream",
    "split_hdfs_location",
]

CLIENT_ENV = "HIVEMESH_HDFS_CLIENT"
"""The environment variable that chooses the HDFS client: one of :data:`CLIENTS`."""

CLIENTS = ("native", "libhdfs")
"""The HDFS clients hivemesh can use (see the module docstring); the first is the default."""

RETRY_DEFAULTS: dict[str, str] = {
    "dfs.client.failover.max.attempts": "3",
    "dfs.client.failover.sleep.base.millis": "100",
    "dfs.client.failover.sleep.max.millis": "1000",
}
"""The ``native`` client's retry settings where ``$HADOOP_CONF_DIR`` sets none (milliseconds)."""

_CACHE: dict[tuple[str, str], pafs.FileSystem] = {}
_LOCK = threading.Lock()


def hdfs_client_name() -> str:
    """The HDFS client in force: ``$HIVEMESH_HDFS_CLIENT`` (lower case), else ``native``. Raises
    ValueError for a name not in :data:`CLIENTS`."""
    name = os.environ.get(CLIENT_ENV, "").strip().lower() or CLIENTS[0]
    if name not in CLIENTS:
        raise ValueError(f"{CLIENT_ENV}={name!r}: expected one of {', '.join(CLIENTS)}")
    return name


def split_hdfs_location(location: str) -> tuple[str, str]:
    """``hdfs://nn:8020/w/t`` -> ``("nn:8020", "/w/t")``: the authority as written and the path
    (``/`` when none). Pure; ValueError when ``location`` is not an ``hdfs://`` URI."""
    scheme, sep, rest = location.partition("://")
    if not sep or scheme.lower() != "hdfs":
        raise ValueError(f"not an hdfs:// location: {location!r}")
    authority, slash, path = rest.partition("/")
    return authority, "/" + path if slash else "/"


def hdfs_filesystem(authority: str, client: str | None = None) -> pafs.FileSystem:
    """The file system of the HDFS at ``authority`` (``host[:port]``, or an HA name service
    known to ``$HADOOP_CONF_DIR``; empty: ``fs.defaultFS``), one per authority and client in a
    process. ``client``: one of :data:`CLIENTS`, default :func:`hdfs_client_name`.

    Raises ImportError when the ``native`` client's wheel (``hdfs-native``) is missing, OSError
    when ``libhdfs`` cannot be loaded or the NameNode cannot be reached while opening, ValueError
    for an unknown client."""
    name = client or hdfs_client_name()
    if name not in CLIENTS:
        raise ValueError(f"unknown HDFS client {name!r}: expected one of {', '.join(CLIENTS)}")
    key = (name, authority)
    with _LOCK:
        fs = _CACHE.get(key)
        if fs is None:
            fs = _CACHE[key] = _open(name, authority)
        return fs


def _open(client: str, authority: str) -> pafs.FileSystem:
    if client == "libhdfs":
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "8020")
        return pafs.HadoopFileSystem(host or "default", int(port) if port else 8020)
    from hdfs_native import Client  # a native extension: loaded only when HDFS is used

    url = f"hdfs://{authority}" if authority else None
    return pafs.PyFileSystem(NativeHdfsHandler(Client(url, _client_config()), authority))


def _client_config() -> dict[str, str]:
    """:data:`RETRY_DEFAULTS` less the keys the Hadoop configuration files set."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR") or (
        os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop") if os.environ.get("HADOOP_HOME") else ""
    )
    configured: set[str] = set()
    for name in ("core-site.xml", "hdfs-site.xml"):
        path = os.path.join(conf_dir, name)
        if conf_dir and os.path.isfile(path):
            try:
                root = ElementTree.parse(path).getroot()
            except (OSError, ElementTree.ParseError):
                continue
            configured.update((p.findtext("name") or "").strip() for p in root.iter("property"))
    return {k: v for k, v in RETRY_DEFAULTS.items() if k not in configured}


def _os_error(e: Exception, path: str) -> OSError:
    """An error of the native client as OSError (it raises RuntimeError for some RPC errors), its
    message cut to the first line (the NameNode's Java stack trace follows)."""
    if isinstance(e, OSError):
        first = str(e).splitlines()[0] if str(e) else path
        return type(e)(e.errno, first) if e.errno is not None else type(e)(first)
    text = str(e)
    if "FileAlreadyExistsException" in text:
        return FileExistsError(f"{path}: already exists")
    if "FileNotFoundException" in text:
        return FileNotFoundError(f"{path}: not found")
    return OSError(f"{path}: {text.splitlines()[0] if text else type(e).__name__}")


class NativeHdfsHandler(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow has no type stubs
    """A ``pyarrow.fs.FileSystemHandler`` over an ``hdfs_native.Client``: paths are absolute HDFS
    paths (``/w/t/f``); every storage error is an OSError (FileNotFoundError for a missing path).
    Output streams overwrite and create missing parents, as Hadoop's ``FileSystem.create`` does;
    :meth:`move` replaces an existing file (pyarrow's contract)."""

    def __init__(self, client: Any, authority: str = ""):
        self.client = client
        self.authority = authority

    # -- identity
    def get_type_name(self) -> str:
        """``hdfs``."""
        return "hdfs"

    def equals(self, other: Any) -> bool:
        """Same kind of handler on the same authority."""
        return isinstance(other, NativeHdfsHandler) and other.authority == self.authority

    def normalize_path(self, path: str) -> str:
        """``path`` unchanged."""
        return path

    # -- metadata
    def _info(self, path: str, status: Any) -> pafs.FileInfo:
        kind = pafs.FileType.Directory if status.isdir else pafs.FileType.File
        return pafs.FileInfo(
            path,
            kind,
            mtime_ns=int(status.modification_time) * 1_000_000,
            size=None if status.isdir else int(status.length),
        )

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        """One ``FileInfo`` per path (``NotFound`` for a missing one); size in bytes, mtime to the
        millisecond."""
        out = []
        for path in paths:
            try:
                out.append(self._info(path, self.client.get_file_info(path)))
            except FileNotFoundError:
                out.append(pafs.FileInfo(path, pafs.FileType.NotFound))
            except Exception as e:
                raise _os_error(e, path) from e
        return out

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        """The entries below ``selector.base_dir`` (at any depth when recursive); paths as
        ``base_dir/...``."""
        base = selector.base_dir.rstrip("/") or "/"
        try:
            info = self.client.get_file_info(base)
            if not info.isdir:
                raise NotADirectoryError(f"{base}: not a directory")
            statuses = list(self.client.list_status(base, selector.recursive))
        except FileNotFoundError:
            if selector.allow_not_found:
                return []
            raise
        except OSError as e:
            raise _os_error(e, base) from e
        except Exception as e:
            raise _os_error(e, base) from e
        return [self._info(s.path, s) for s in statuses]

    # -- directories
    def create_dir(self, path: str, recursive: bool) -> None:
        """``mkdirs`` (an existing directory is fine)."""
        try:
            self.client.mkdirs(path, 0o755, recursive)
        except Exception as e:
            raise _os_error(e, path) from e

    def delete_dir(self, path: str) -> None:
        """Delete a directory tree; FileNotFoundError when missing."""
        try:
            if not self.client.get_file_info(path).isdir:
                raise NotADirectoryError(f"{path}: not a directory")
            self.client.delete(path, True)
        except Exception as e:
            raise _os_error(e, path) from e

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        """Delete everything inside a directory, leaving it."""
        try:
            entries = list(self.client.list_status(path, False))
        except FileNotFoundError:
            if missing_dir_ok:
                return
            raise
        except Exception as e:
            raise _os_error(e, path) from e
        for entry in entries:
            try:
                self.client.delete(entry.path, True)
            except Exception as e:
                raise _os_error(e, entry.path) from e

    def delete_root_dir_contents(self) -> None:
        """Delete everything in the file system."""
        self.delete_dir_contents("/", missing_dir_ok=True)

    # -- files
    def delete_file(self, path: str) -> None:
        """Delete one file; FileNotFoundError when missing."""
        try:
            if self.client.get_file_info(path).isdir:
                raise IsADirectoryError(f"{path}: is a directory")
            self.client.delete(path, False)
        except Exception as e:
            raise _os_error(e, path) from e

    def move(self, src: str, dest: str) -> None:
        """Rename ``src`` to ``dest`` (one NameNode call), replacing a file at ``dest``."""
        try:
            self.client.rename(src, dest, True)
        except Exception as e:
            raise _os_error(e, src) from e

    def copy_file(self, src: str, dest: str) -> None:
        """Copy one file through this process (HDFS has no server-side copy)."""
        with self.open_input_stream(src) as f, self.open_output_stream(dest, None) as out:
            while chunk := f.read(8 * 1024 * 1024):
                out.write(chunk)

    def _reader(self, path: str) -> Any:
        try:
            return self.client.read(path)
        except Exception as e:
            raise _os_error(e, path) from e

    def open_input_stream(self, path: str) -> pa.NativeFile:
        """A sequential reader of ``path``."""
        return pa.PythonFile(self._reader(path), mode="r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        """A random-access reader of ``path`` (seek, size, read_at)."""
        return pa.PythonFile(self._reader(path), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        """A writer of ``path``: an existing file is replaced, missing parents created. Readers see
        the bytes when the stream closes (or up to the last ``hsync``)."""
        from hdfs_native import WriteOptions

        try:
            writer = self.client.create(path, WriteOptions(overwrite=True, create_parent=True))
        except Exception as e:
            raise _os_error(e, path) from e
        return pa.PythonFile(_Writer(writer), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        """A writer appending to the existing file ``path`` (HDFS append)."""
        try:
            writer = self.client.append(path)
        except Exception as e:
            raise _os_error(e, path) from e
        return pa.PythonFile(_Writer(writer), mode="w")


class _Writer(io.RawIOBase):
    """An ``hdfs_native`` file writer that takes what pyarrow hands it (a ``pyarrow.Buffer``) as
    ``bytes``: given a buffer object, the native client reads it element by element (11 MB/s
    instead of 200). ``hsync`` makes the bytes written so far visible to readers (HDFS hflush
    semantics)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def writable(self) -> bool:
        """Always True: the stream is open for writing."""
        return True

    def write(self, data: Any) -> int:
        """Append ``data`` (bytes or a buffer); returns its length in bytes. Raises OSError
        naming the HDFS failure."""
        chunk = data if isinstance(data, bytes) else bytes(data)
        try:
            self.inner.write(chunk)
        except Exception as e:
            raise _os_error(e, "write") from e
        return len(chunk)

    def hsync(self) -> None:
        """Make the bytes written so far visible to readers (HDFS hflush); raises the client's error."""
        self.inner.hsync()

    def close(self) -> None:
        """Close the file (the DataNodes finish the last block); OSError when HDFS refuses. Idempotent."""
        if not self.closed:
            try:
                self.inner.close()
            except Exception as e:
                raise _os_error(e, "close") from e
            super().close()


def _native(fs: pafs.FileSystem) -> NativeHdfsHandler | None:
    handler = getattr(fs, "handler", None) if isinstance(fs, pafs.PyFileSystem) else None
    return handler if isinstance(handler, NativeHdfsHandler) else None


def input_stream(fs: pafs.FileSystem, path: str) -> Any:
    """A sequential reader of file ``path`` on ``fs`` (a context manager whose ``read(n)`` gives up
    to ``n`` bytes, empty at the end): on the native HDFS client its own reader, which skips
    pyarrow's wrapping of a Python file (half the speed on reads of 8 MiB); else
    ``fs.open_input_stream``. Raises OSError (FileNotFoundError for a missing file)."""
    native = _native(fs)
    return native._reader(path) if native is not None else fs.open_input_stream(path)


def output_stream(fs: pafs.FileSystem, path: str) -> Any:
    """A writer of file ``path`` on ``fs`` (a context manager with ``write(bytes)``; the file is
    replaced, missing parents created): on the native HDFS client its own writer, else
    ``fs.open_output_stream``. Raises OSError."""
    native = _native(fs)
    if native is None:
        return fs.open_output_stream(path)
    from hdfs_native import WriteOptions

    try:
        return _Writer(native.client.create(path, WriteOptions(overwrite=True, create_parent=True)))
    except Exception as e:
        raise _os_error(e, path) from e
