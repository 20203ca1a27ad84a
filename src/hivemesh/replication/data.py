"""Moving a policy's data files: directories of the target zone made equal to the source's.

:class:`DataMover` syncs table and partition directories (:meth:`DataMover.sync`,
:meth:`DataMover.sync_many` for several at once): a file is copied when the target lacks it or its
size differs, or when its content differs (MD5 of both sides) and the file ledger cannot vouch for
it (the target file was copied from a source file of the same size and modification time).
Copies go through :func:`hivemesh.storage.copy.copy_file` (``pyarrow.fs.copy_files`` to a hidden
temporary name renamed into place: a reader never sees a partial file; no checksum on the copy
path, ``verify`` computes them), run on ``copy_threads`` threads, and as a Spark job (the file
list spread over the executors) when one batch copies more than ``spark_copy_threshold_mb``. Hidden temporaries left by a killed copier are
removed first; files the source no longer has are deleted. Storage is anything ``pyarrow.fs``
opens; a zone's ``s3`` options are used for ``s3://``, ``s3a://`` and ``s3n://`` locations.
"""

from __future__ import annotations

import logging
import os
import posixpath
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from hivemesh.acid.names import SIDE_FILE_SUFFIX, is_side_file
from hivemesh.hive.txn_lists import ValidTxnList
from hivemesh.replication.config import S3Options
from hivemesh.replication.state import FileRecord, ReplicationStore
from hivemesh.replication.streaming import (
    StreamingCopy,
    StreamingCopyResult,
    StreamingTask,
    copy_streaming_file,
    read_flush_length,
)
from hivemesh.replication.visibility import TxnSnapshot, target_relpath
from hivemesh.storage.copy import checksum, copy_file, is_temporary
from hivemesh.storage.hdfs import hdfs_filesystem, split_hdfs_location
from hivemesh.storage.locations import delete_path, local_path, resolve_location

__all__ = [
    "CopyTask",
    "DataMover",
    "FsSpec",
    "SyncPlan",
    "SyncResult",
    "ZoneStorage",
    "copy_task",
    "open_fs",
    "spark_context",
]

log = logging.getLogger(__name__)

S3_SCHEMES = ("s3", "s3a", "s3n")
LEDGER_BATCH = 500


@dataclass(frozen=True)
class FsSpec:
    """A file system that can be opened anywhere (on a Spark executor too): ``kind`` is ``s3``
    (``options`` for ``pyarrow.fs.S3FileSystem``), ``local``, ``hdfs`` (``options["authority"]``,
    the NameNode or name service, through :func:`hivemesh.storage.hdfs.hdfs_filesystem`'s client),
    or ``uri`` (``options["uri"]`` given to ``pyarrow.fs.FileSystem.from_uri``)."""

    kind: str
    options: tuple[tuple[str, str], ...] = ()

    def open(self) -> pafs.FileSystem:
        """The pyarrow file system. Raises OSError/ValueError when it cannot be opened."""
        opts = dict(self.options)
        if self.kind == "s3":
            return pafs.S3FileSystem(**opts)
        if self.kind == "local":
            return pafs.LocalFileSystem()
        if self.kind == "hdfs":
            return hdfs_filesystem(opts["authority"])
        return pafs.FileSystem.from_uri(opts["uri"])[0]


_FS_CACHE: dict[FsSpec, pafs.FileSystem] = {}
_FS_LOCK = threading.Lock()


def open_fs(spec: FsSpec) -> pafs.FileSystem:
    """The file system of ``spec``, opened once per process (on Spark executors too). Raises
    OSError/ValueError as :meth:`FsSpec.open` (the failure is not cached)."""
    return _open(spec)


def _open(spec: FsSpec) -> pafs.FileSystem:
    with _FS_LOCK:
        fs = _FS_CACHE.get(spec)
        if fs is None:
            fs = _FS_CACHE[spec] = spec.open()
        return fs


def spark_context(master: str | None, app_name: str) -> Any:
    """The SparkContext a replication job runs on: this process's active session's, else a new
    session's (``master``, default ``local[*]``). A local context started here runs its Python
    workers on this interpreter (they must import hivemesh). Raises ImportError without pyspark, and
    Spark's error when the context cannot start (e.g. no Java: ``pyspark.errors.PySparkRuntimeError``)."""
    from pyspark.sql import SparkSession  # heavy: only for jobs above the threshold

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif SparkSession.getActiveSession() is None:
        builder = builder.master("local[*]")
    if SparkSession.getActiveSession() is None and (master or "local").startswith("local"):
        # local Python workers must import hivemesh: a context started from Python runs them on
        # $PYSPARK_PYTHON, else on whatever ``python3`` is on PATH; make it this interpreter
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return builder.getOrCreate().sparkContext


class ZoneStorage:
    """Resolves a zone's locations (as its metastore stores them) to ``(file system, path)``."""

    def __init__(self, s3: S3Options | None = None):
        opts = (s3 or S3Options()).model_dump(exclude_none=True)
        self._s3 = FsSpec("s3", tuple(sorted(opts.items())))

    def spec(self, location: str) -> tuple[FsSpec, str]:
        """``(file system spec, path on it)`` of ``location``. Raises ValueError/OSError for a URI scheme
        pyarrow cannot open (:func:`~hivemesh.storage.locations.resolve_location`)."""
        scheme = location.split("://", 1)[0].lower() if "://" in location else ""
        if scheme in S3_SCHEMES:
            return self._s3, location.split("://", 1)[1].rstrip("/")
        if scheme == "" or location.startswith("file:"):
            return FsSpec("local"), local_path(location) if location.startswith("file:") else location
        if scheme == "hdfs":
            authority, path = split_hdfs_location(location)
            return FsSpec("hdfs", (("authority", authority),)), path.rstrip("/") or "/"
        return FsSpec("uri", (("uri", location),)), resolve_location(location)[1]

    def resolve(self, location: str) -> tuple[pafs.FileSystem, str]:
        """``(pyarrow file system, path on it)`` of ``location``. Raises OSError/ValueError when the file
        system cannot be opened."""
        spec, path = self.spec(location)
        if spec.kind == "uri":
            return resolve_location(location)
        return _open(spec), path


CopyTask = tuple[FsSpec, str, FsSpec, str]
"""One file to copy: ``(source fs, source path, target fs, target path)``."""


def copy_task(task: CopyTask) -> tuple[str, int, str | None]:
    """Copy one file ``(source fs, source path, target fs, target path)``; returns ``(target path,
    bytes, None)`` (the MD5 is not computed on the copy path: the ledger vouches by size and
    source modification time, ``verify`` computes checksums). Module-level so that Spark
    executors can run it. Raises OSError when the file cannot be read or written (the target then left as
    it was)."""
    src_spec, src, dst_spec, dst = task
    nbytes = copy_file(_open(src_spec), src, _open(dst_spec), dst)
    return dst, nbytes, None


@dataclass
class SyncResult:
    """What syncs did: files and bytes copied, files found equal, files deleted, hidden temporaries
    removed, and whether a Spark job did the copying."""

    copied: int = 0
    bytes_copied: int = 0
    unchanged: int = 0
    deleted: int = 0
    temporaries: int = 0
    spark: bool = False
    copied_paths: list[str] = field(default_factory=list)
    appended: int = 0  # of bytes_copied: streaming-file bytes appended in place

    def add(self, other: SyncResult) -> None:
        """Add ``other``'s counts to this one."""
        self.copied += other.copied
        self.bytes_copied += other.bytes_copied
        self.appended += other.appended
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.temporaries += other.temporaries
        self.spark = self.spark or other.spark
        self.copied_paths.extend(other.copied_paths)


@dataclass
class SyncPlan:
    """What syncing one ``target`` directory takes: the copy ``tasks``, each task's source file
    ``(size in bytes, mtime in ns)`` by source path, the ``counts`` so far (unchanged files,
    temporaries removed), the target files to delete (``extra``), and ledger entries confirmed by
    checksum."""

    target: str
    tasks: list[CopyTask] = field(default_factory=list)
    sources: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    counts: SyncResult = field(default_factory=SyncResult)
    extra: list[str] = field(default_factory=list)
    confirmed: list[FileRecord] = field(default_factory=list)
    streaming: list[StreamingTask] = field(default_factory=list)


def _files(fs: pafs.FileSystem, root: str) -> tuple[dict[str, pafs.FileInfo], list[str]]:
    """Files below ``root`` by relative path, and the hidden temporaries' full paths."""
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    base = root.rstrip("/") + "/"
    files: dict[str, pafs.FileInfo] = {}
    temps: list[str] = []
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        if is_temporary(info.base_name):
            temps.append(info.path)
            continue
        rel = info.path[len(base) :] if info.path.startswith(base) else info.base_name
        files[rel] = info
    return files, temps


def _remove_empty_parents(fs: pafs.FileSystem, root: str, deleted: list[str]) -> None:
    """Remove the directories below ``root`` that deleting ``deleted`` left empty (a delta the
    source's cleaner removed), deepest first. Best effort: a directory that is not empty stays."""
    base = root.rstrip("/") + "/"
    dirs = {posixpath.dirname(p) for p in deleted}
    for d in sorted(dirs, key=lambda d: -d.count("/")):
        while d.startswith(base) and len(d) > len(base):
            try:
                if fs.get_file_info(pafs.FileSelector(d, allow_not_found=True)):
                    break
                fs.delete_dir(d)
            except OSError:
                break
            d = posixpath.dirname(d)


def _mtime_ns(info: pafs.FileInfo) -> int | None:
    return info.mtime_ns if info.mtime is not None else None


class DataMover:
    """Syncs directories of ``source`` storage into ``target`` storage for ``policy``, with the
    file ledger in ``store``.

    ``threads``: files copied at once. ``spark_threshold_bytes``: a sync copying more runs as a
    Spark job (None: never). ``on_bytes``: called with the bytes of each copied file (progress).
    ``streaming_copy``: how files of open streaming batches are brought over
    (:mod:`hivemesh.replication.streaming`; always on the copy threads, never as a Spark job).
    ``source_txns``: the source's ValidTxnList (a call): directories with a ``_v<txn>`` suffix are
    then copied once that txn is committed, without the suffix
    (:mod:`hivemesh.replication.visibility`); None: copied as they are.
    """

    def __init__(
        self,
        policy: str,
        store: ReplicationStore,
        source: ZoneStorage,
        target: ZoneStorage,
        threads: int = 8,
        spark_threshold_bytes: int | None = None,
        spark_master: str | None = None,
        on_bytes: Callable[[int], None] | None = None,
        streaming_copy: StreamingCopy = StreamingCopy.AUTO,
        source_txns: Callable[[], ValidTxnList] | None = None,
    ):
        self.policy = policy
        self.source_txns = source_txns
        self.store = store
        self.source = source
        self.target = target
        self.threads = threads
        self.spark_threshold_bytes = spark_threshold_bytes
        self.spark_master = spark_master
        self.on_bytes = on_bytes
        self.trust_ledger = True  # False: same-size files compared by MD5 even when the ledger vouches
        self.streaming_copy = streaming_copy
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"copy-{policy}")

    def close(self) -> None:
        """Stop the copy threads."""
        self._pool.shutdown(wait=True)

    # ------------------------------------------------------------------ one directory
    def plan(self, source: str, target: str) -> SyncPlan:
        """What :meth:`sync` would do for one directory (see :class:`SyncPlan`). Removes hidden
        temporaries below ``target`` (left by a killed copier). Raises OSError."""
        src_spec, src_root = self.source.spec(source)
        dst_spec, dst_root = self.target.spec(target)
        src_fs, dst_fs = self.source.resolve(source)[0], self.target.resolve(target)[0]
        wanted, _ = _files(src_fs, src_root)
        present, temps = _files(dst_fs, dst_root)
        out = SyncPlan(target)
        for path in temps:
            dst_fs.delete_file(path)
            out.counts.temporaries += 1
        kept = self._plan_streaming(src_fs, src_root, dst_root, dst_spec, wanted, present, out)
        ledger = self.store.ledger(self.policy, dst_root) if wanted and present and self.trust_ledger else {}
        txns = TxnSnapshot(self.source_txns) if self.source_txns is not None else None
        mapped: set[str] = set()
        for rel, info in sorted(wanted.items()):
            trel = target_relpath(rel, txns)
            if trel is None:  # in a compactor's directory whose txn is not committed
                continue
            mapped.add(trel)
            src, dst = posixpath.join(src_root, rel), posixpath.join(dst_root, trel)
            have = present.get(trel)
            if have is not None and have.size == info.size:
                rec = ledger.get(dst)
                if rec is not None and rec.size == info.size and rec.source_mtime_ns == _mtime_ns(info):
                    out.counts.unchanged += 1
                    continue
                md5 = checksum(src_fs, src)
                if md5 == checksum(dst_fs, dst):
                    out.counts.unchanged += 1
                    out.confirmed.append(FileRecord(dst, info.size, _mtime_ns(info), md5))
                    continue
            out.tasks.append((src_spec, src, dst_spec, dst))
            out.sources[src] = (info.size or 0, _mtime_ns(info))
        out.extra = [posixpath.join(dst_root, rel) for rel in sorted(set(present) - mapped - kept)]
        return out

    def _plan_streaming(
        self,
        src_fs: pafs.FileSystem,
        src_root: str,
        dst_root: str,
        dst_spec: FsSpec,
        wanted: dict[str, pafs.FileInfo],
        present: dict[str, pafs.FileInfo],
        out: SyncPlan,
    ) -> set[str]:
        """Take the streaming files out of ``wanted`` into ``out.streaming`` (see
        :mod:`hivemesh.replication.streaming`): data files with a side file at the source (its
        length read now, before the data), and data files whose batch ended at the source while
        the target still has their side file. Returns the target files the plan must not delete
        (handled by the streaming tasks)."""
        kept: set[str] = set()
        append = self.streaming_copy == StreamingCopy.APPEND or (
            self.streaming_copy == StreamingCopy.AUTO and dst_spec.kind != "s3"
        )
        for rel in sorted(r for r in wanted if is_side_file(r)):
            data = rel[: -len(SIDE_FILE_SUFFIX)]
            if data not in wanted:
                continue
            exists, length = read_flush_length(src_fs, posixpath.join(src_root, rel))
            del wanted[rel], wanted[data]
            kept |= {rel, data}
            if not exists:  # the batch ended since the listing: copy the whole file
                length = None
            elif length is None:  # nothing flushed yet: nothing a reader may read
                continue
            out.streaming.append(
                StreamingTask(posixpath.join(src_root, data), posixpath.join(dst_root, data), length, append)
            )
        for rel in sorted(r for r in present if is_side_file(r) and r not in kept):
            data = rel[: -len(SIDE_FILE_SUFFIX)]
            if data in wanted:  # ended at the source, still open on the target
                del wanted[data]
                kept |= {rel, data}
                out.streaming.append(
                    StreamingTask(
                        posixpath.join(src_root, data), posixpath.join(dst_root, data), None, append
                    )
                )
        return kept

    def sync(self, source: str, target: str, delete_extra: bool = True) -> SyncResult:
        """Make directory location ``target`` (of the target zone) hold exactly the files of
        ``source`` (of the source zone). Raises OSError naming the file on a storage error (what
        was copied stays copied and recorded; a rerun finishes the work)."""
        return self.sync_many([(source, target)], delete_extra)

    def sync_many(self, pairs: list[tuple[str, str]], delete_extra: bool = True) -> SyncResult:
        """:meth:`sync` of several ``(source, target)`` directory locations, their copies run as
        one batch (on the threads, or one Spark job above the threshold). Raises OSError naming the file on
        a storage error, and the store's errors (``sqlalchemy.exc.OperationalError``) recording the ledger;
        what was copied stays copied and recorded."""
        out = SyncResult()
        tasks: list[CopyTask] = []
        sources: dict[str, tuple[int, int | None]] = {}
        plans = []
        streaming: list[tuple[FsSpec, FsSpec, StreamingTask]] = []
        for source, target in pairs:
            plan = self.plan(source, target)
            self._record(plan.confirmed)
            out.add(plan.counts)
            tasks.extend(plan.tasks)
            sources.update(plan.sources)
            plans.append(plan)
            src_spec, dst_spec = self.source.spec(source)[0], self.target.spec(target)[0]
            streaming.extend((src_spec, dst_spec, t) for t in plan.streaming)
        self._copy_streaming(streaming, out)
        done = self.copy(tasks, out, sum(size for size, _ in sources.values()))
        self._record(FileRecord(dst, n, sources[src][1], md5) for (_, src, _, dst), (_, n, md5) in done)
        if delete_extra:
            for plan in plans:
                if not plan.extra:
                    continue
                dst_fs, dst_root = self.target.resolve(plan.target)
                for path in plan.extra:
                    try:
                        dst_fs.delete_file(path)
                    except FileNotFoundError:
                        continue
                    out.deleted += 1
                self.store.forget_files(self.policy, plan.extra)
                _remove_empty_parents(dst_fs, dst_root, plan.extra)
        return out

    def copy(
        self, tasks: list[CopyTask], out: SyncResult, total_bytes: int
    ) -> list[tuple[CopyTask, tuple[str, int, str | None]]]:
        """Run copy ``tasks`` of ``total_bytes`` (threads, or Spark above the threshold); counts
        added to ``out``; returns each task with its ``(target path, bytes, MD5 or None)``.
        Raises OSError naming the file."""
        if not tasks:
            return []
        results: list[tuple[str, int, str | None]]
        if self.spark_threshold_bytes is not None and total_bytes > self.spark_threshold_bytes:
            results = self._spark_copy(tasks)
            out.spark = True
        else:
            futures = [self._pool.submit(self._copy_one, t) for t in tasks]
            results = [f.result() for f in futures]
        for _, nbytes, _ in results:
            out.copied += 1
            out.bytes_copied += nbytes
        out.copied_paths.extend(r[0] for r in results)
        return list(zip(tasks, results, strict=True))

    def _copy_streaming(self, tasks: list[tuple[FsSpec, FsSpec, StreamingTask]], out: SyncResult) -> None:
        """Bring open (or just closed) streaming files up to date on the copy threads; counts into
        ``out`` (``bytes_copied`` holds data and side-file bytes, ``appended`` the data bytes
        appended in place). A closed file is then recorded in the ledger."""

        def run(item: tuple[FsSpec, FsSpec, StreamingTask]) -> StreamingCopyResult:
            """One task on a copy thread; OSError names source and target."""
            src_spec, dst_spec, task = item
            try:
                return copy_streaming_file(_open(src_spec), _open(dst_spec), task)
            except OSError as e:
                raise OSError(f"copying streaming file {task.source} to {task.target} failed: {e}") from e

        results = list(self._pool.map(run, tasks))
        closed: list[FileRecord] = []
        for (src_spec, _, task), r in zip(tasks, results, strict=True):
            nbytes = r.data_bytes + r.side_bytes
            if nbytes:
                out.copied += 1
                out.bytes_copied += nbytes
                out.appended += r.appended
                out.copied_paths.append(r.target)
                if self.on_bytes is not None:
                    self.on_bytes(nbytes)
            if task.length is None:
                info = _open(src_spec).get_file_info(task.source)
                closed.append(FileRecord(task.target, r.size, _mtime_ns(info), None))
        self._record(closed)

    def _copy_one(self, task: CopyTask) -> tuple[str, int, str | None]:
        try:
            result = copy_task(task)
        except OSError as e:
            raise OSError(f"copying {task[1]} to {task[3]} failed: {e}") from e
        if self.on_bytes is not None:
            self.on_bytes(result[1])
        return result

    def _spark_copy(self, tasks: list[CopyTask]) -> list[tuple[str, int, str | None]]:
        sc = spark_context(self.spark_master, "hivemesh-replication-copy")
        slices = max(1, min(len(tasks), sc.defaultParallelism * 4))
        log.info("copying %d files as a Spark job (%d tasks)", len(tasks), slices)
        results: list[tuple[str, int, str | None]] = sc.parallelize(tasks, slices).map(copy_task).collect()
        if self.on_bytes is not None:
            self.on_bytes(sum(r[1] for r in results))
        return results

    def _record(self, records: Iterable[FileRecord]) -> None:
        batch: list[FileRecord] = []
        for r in records:
            batch.append(r)
            if len(batch) >= LEDGER_BATCH:
                self.store.record_files(self.policy, batch)
                batch = []
        self.store.record_files(self.policy, batch)

    # ------------------------------------------------------------------ removal
    def remove(self, target: str) -> bool:
        """Delete directory location ``target`` of the target zone and its ledger entries; True
        when something was deleted. Raises OSError for storage errors other than absence."""
        fs, root = self.target.resolve(target)
        self.store.forget_files(self.policy, under=root)
        return delete_path(fs, root)
