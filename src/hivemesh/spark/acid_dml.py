"""INSERT, DELETE and UPDATE of Hive transactional tables from Spark, written as Hive writes them.

``insert_acid(spark, df, "db.t")``, ``delete_acid(spark, "db.t", "id < 10")`` and
``update_acid(spark, "db.t", {"name": F.upper("name")}, "id = 3")`` each run ONE Hive statement:

* the driver runs the statement's txn side with :class:`hivemesh.acid.statement.WriteStatement`, as
  :class:`hivemesh.acid.writer.AcidWriter` does: it opens one write txn (heartbeated), takes Hive's
  lock (INSERT a SHARED_READ with operation INSERT, UPDATE and DELETE an EXCL_WRITE, Hive 4's
  ``hive.txn.xlock.write=true``; table-level, marked ``isDynamicPartitionWrite`` for partitioned
  tables, whose partitions are then reported with ``add_dynamic_partitions``) and allocates the
  table's write id;
* the executors write the files (``mapInArrow``): each Spark task writes its own
  ``bucket_<task partition id>`` of ``delta_<w>_<w>_0000`` in every partition it sees (insert-only
  tables: a plain ``<task>_0`` file), so no two tasks share a file and row ids restart at 0 per file
  as in Hive; a retried task attempt writes ``bucket_<N>_<attempt id>`` and only the files of the
  attempts Spark kept are kept. DELETE events go to ``delete_delta_<w>_<w>_0000/bucket_<N>``,
  where N is the bucket decoded from the deleted rows' bucket property: the rows to delete are
  shuffled by (partition, N) and sorted by (originalTransaction, bucket, rowId), so each such file
  is written by one task, in key order. UPDATE is Hive 3's split update, as AcidWriter writes it:
  the delete events plus the new rows, same write id and statement id, in one pass over the rows
  (the condition and the new values are computed once);
* the driver then writes ``_orc_acid_version`` into each new directory, removes files of failed
  task attempts, creates the missing partitions (partitioned inserts write under the table's
  default partition path; when a partition exists elsewhere the new delta is moved there),
  reports the partitions and commits.

On any error (the job, the metastore, the commit) the txn is aborted and the directories of this
write id are removed (best effort: readers skip an aborted write id anyway), so nothing is
half-visible.

DELETE and UPDATE read the rows to change with their ROW__IDs under the snapshot of the write txn
itself (its ValidTxnList and the table's ValidWriteIdList, taken after the lock is granted), so
they see every commit that preceded them and nothing of concurrent writers.

Not supported: bucketed (``CLUSTERED BY``) tables, UPDATE of partition columns (Hive refuses it
too), DELETE/UPDATE of insert-only tables (Hive too), text-format insert-only tables, INSERT
OVERWRITE, more than 4096 tasks in one write (BucketCodec V1 holds 12-bit bucket ids: coalesce
first). DELETE/UPDATE read every partition (the condition is not pushed to the metastore). An
unqualified table name is in Spark's current database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from hivemesh import storage
from hivemesh.acid.arrow_reader import list_location, table_layout
from hivemesh.acid.files import write_acid_version_file, write_plain_file
from hivemesh.acid.names import (
    ACID_VERSION_FILE,
    bucket_file_name,
    delta_dir_name,
    parse_acid_dir,
    partition_value_text,
)
from hivemesh.acid.orc_columnar import open_insert_writer
from hivemesh.acid.orcfile import AcidOrcWriter
from hivemesh.acid.selection import select_files
from hivemesh.acid.statement import DELETE, INSERT, UPDATE, WriteStatement, WriteTable, lock_components
from hivemesh.acid.tables import split_name, table_locations
from hivemesh.client.metastore import MetastoreClient
from hivemesh.hive.names import make_part_name
from hivemesh.spark.acid import AcidSession, metastore_uri_of
from hivemesh.spark.acid_reader import LocationFiles, snapshot_dataframe, spark_type
from hivemesh.spark.session import use_configured_python

log = logging.getLogger("hivemesh.spark.acid_dml")

AGENT_INFO = "hivemesh-spark-acid-dml"
MAX_TASKS = 4096  # BucketCodec V1: 12-bit bucket ids
STATEMENT_ID = 0
OWID, BUCKET, ROWID, BUCKET_ID = "__hm_owid", "__hm_bucket", "__hm_rowid", "__hm_bucket_id"
RESULT_SCHEMA = "kind string, partition string, pvalues array<string>, path string, rows long"
_RESULT_ARROW_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("partition", pa.string()),
        ("pvalues", pa.list_(pa.string())),
        ("path", pa.string()),
        ("rows", pa.int64()),
    ]
)


@dataclass(frozen=True)
class DmlResult:
    """What one statement did: its ``txn_id`` and ``write_id`` (committed), rows ``inserted`` and
    ``deleted`` (an UPDATE counts each changed row in both), the Hive ``partitions`` written
    (``k=v/k2=v2``; empty for unpartitioned tables) and the data ``files`` written."""

    operation: str
    txn_id: int
    write_id: int
    inserted: int
    deleted: int
    partitions: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class _Spec:
    """What the executors need to write (picklable)."""

    mode: str  # insert | delete | update
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[str, ...]
    table_location: str
    partition_locations: tuple[tuple[str, str], ...]  # known partition name -> location
    write_id: int
    statement_id: int
    insert_only: bool
    file_format: str
    compression: str
    time_zone: str


# --- executors ---------------------------------------------------------------------------------------


def _naive_timestamps(batch: pa.RecordBatch, time_zone: str) -> pa.RecordBatch:
    """Spark hands timestamps as UTC instants; Hive files hold wall-clock values (what Spark's
    reader shows in the session time zone)."""
    arrays, changed = [], False
    for col in batch.columns:
        if pa.types.is_timestamp(col.type) and col.type.tz is not None:
            col = pc.local_timestamp(col.cast(pa.timestamp(col.type.unit, time_zone)))
            changed = True
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names) if changed else batch


def _task_writer(spec: _Spec):
    """The ``mapInArrow`` function: writes one task's files and yields one result row per file."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        first_attempt = ctx is None or ctx.attemptNumber() == 0
        attempt = None if first_attempt else int(ctx.taskAttemptId())
        if task >= MAX_TASKS and spec.mode != DELETE:
            raise ValueError(
                f"task {task}: Hive bucket ids have 12 bits; write with at most {MAX_TASKS} Spark partitions"
            )
        writer = _TaskFiles(spec, task, attempt)
        try:
            for batch in batches:
                writer.feed(_naive_timestamps(batch, spec.time_zone))
            results = writer.close()
        except BaseException:
            writer.discard()
            raise
        if results:
            yield pa.RecordBatch.from_pylist(results, schema=_RESULT_ARROW_SCHEMA)

    return run


class _TaskFiles:
    """The files one task writes; input rows arrive grouped by partition (and, for deletes, by
    bucket), so at most one insert and one delete file are open at a time."""

    def __init__(self, spec: _Spec, task: int, attempt: int | None):
        self.spec = spec
        self.task = task
        self.attempt = attempt
        self.names = [n for n, _ in spec.columns]
        self.known = dict(spec.partition_locations)
        self.results: list[dict[str, Any]] = []
        self.insert_key: tuple[str, ...] | None = None
        self.insert_writer: Any = None
        self.plain_batches: list[pa.RecordBatch] = []
        self.delete_key: tuple[tuple[str, ...], int] | None = None
        self.delete_writer: Any = None

    # -- locations
    def _location(self, values: tuple[str, ...]) -> tuple[str, str]:
        if not self.spec.partition_keys:
            return "", self.spec.table_location
        name = make_part_name(self.spec.partition_keys, list(values))
        return name, self.known.get(name) or storage.join_location(self.spec.table_location, name)

    def _dir(self, values: tuple[str, ...], delete: bool) -> tuple[str, Any, str, str]:
        """(partition name, file system, path on it, location URI) of the new (delete) delta."""
        name, location = self._location(values)
        w = self.spec.write_id
        uri = storage.join_location(location, delta_dir_name(w, w, self.spec.statement_id, delete=delete))
        fs, path = storage.resolve_location(uri)
        fs.create_dir(path, recursive=True)
        return name, fs, path, uri

    # -- feeding
    def feed(self, batch: pa.RecordBatch) -> None:
        """Write one Arrow batch's rows into the bucket files of their partitions (and delete deltas for updates and deletes)."""
        if batch.num_rows == 0:
            return
        keys = self.spec.partition_keys
        pvals = [[partition_value_text(v) for v in batch.column(k).to_pylist()] for k in keys]
        buckets = batch.column(BUCKET_ID).to_pylist() if self.spec.mode != INSERT else None
        start = 0
        n = batch.num_rows
        for i in range(1, n + 1):
            if i < n:
                same = all(p[i] == p[start] for p in pvals) and (
                    buckets is None or buckets[i] == buckets[start]
                )
                if same:
                    continue
            values = tuple(p[start] for p in pvals)
            part = batch.slice(start, i - start)
            if self.spec.mode in (INSERT, UPDATE):
                self._insert(values, part)
            if self.spec.mode in (DELETE, UPDATE):
                assert buckets is not None
                self._delete(values, int(buckets[start]), part)
            start = i

    def _insert(self, values: tuple[str, ...], part: pa.RecordBatch) -> None:
        if self.insert_key != values:
            self._close_insert()
            self.insert_key = values
        if self.spec.insert_only:
            self.plain_batches.append(part.select(self.names))
            return
        if self.insert_writer is None:
            name, fs, path, uri = self._dir(values, delete=False)
            file_name = bucket_file_name(self.task, self.attempt)
            self.insert_writer = open_insert_writer(
                path + "/" + file_name,
                self.spec.columns,
                bucket_id=self.task,
                statement_id=self.spec.statement_id,
                filesystem=fs,
                compression=self.spec.compression,
            )
            self.insert_meta = (name, values, uri + "/" + file_name)
        self.insert_writer.insert(part.select(self.names), self.spec.write_id)

    def _close_insert(self) -> None:
        if self.insert_key is None:
            return
        values = self.insert_key
        self.insert_key = None
        if self.spec.insert_only:
            batches, self.plain_batches = self.plain_batches, []
            if not batches:
                return
            name, fs, path, uri = self._dir(values, delete=False)
            file_name = f"{self.task:06d}_{self.attempt if self.attempt is not None else 0}"
            stats = write_plain_file(
                path,
                self.spec.columns,
                pa.Table.from_batches(batches),
                file_name=file_name,
                file_format=self.spec.file_format,
                filesystem=fs,
                compression=self.spec.compression,
            )
            if stats is not None:
                self._result(INSERT, name, values, uri + "/" + file_name, stats.rows)
            return
        w, self.insert_writer = self.insert_writer, None
        if w is not None:
            w.close()
            name, vals, file_uri = self.insert_meta
            self._result(INSERT, name, vals, file_uri, w.inserts)

    def _delete(self, values: tuple[str, ...], bucket_id: int, part: pa.RecordBatch) -> None:
        key = (values, bucket_id)
        if self.delete_key != key:
            self._close_delete()
            name, fs, path, uri = self._dir(values, delete=True)
            file_name = bucket_file_name(bucket_id, self.attempt)
            self.delete_key = key
            self.delete_writer = AcidOrcWriter(
                path + "/" + file_name,
                self.spec.columns,
                bucket_id=bucket_id,
                statement_id=self.spec.statement_id,
                filesystem=fs,
                compression=self.spec.compression,
            )
            self.delete_meta = (name, values, uri + "/" + file_name)
        keys = pa.table({"originalTransaction": part[OWID], "bucket": part[BUCKET], "rowId": part[ROWID]})
        self.delete_writer.delete(keys, self.spec.write_id)

    def _close_delete(self) -> None:
        w, self.delete_writer = self.delete_writer, None
        self.delete_key = None
        if w is not None:
            w.close()
            name, values, file_uri = self.delete_meta
            self._result(DELETE, name, values, file_uri, w.deletes)

    def _result(self, kind: str, name: str, values: tuple[str, ...], path: str, rows: int) -> None:
        self.results.append(
            {"kind": kind, "partition": name, "pvalues": list(values), "path": path, "rows": rows}
        )

    def close(self) -> list[dict[str, Any]]:
        """Close every open file; returns one record per file written (kind, partition, values, path, rows)."""
        self._close_insert()
        self._close_delete()
        return self.results

    def discard(self) -> None:
        """Close and delete every file written (the task failed)."""
        for w in (self.insert_writer, self.delete_writer):
            if w is not None:
                try:
                    w.discard()
                except Exception:
                    pass


# --- driver --------------------------------------------------------------------------------------------


class _Statement:
    """One DML statement on one table: the table (:class:`WriteTable`), its txn side
    (:class:`WriteStatement`: txn, lock, write id, commit or abort) and the Spark job."""

    def __init__(self, spark: SparkSession, table: str, op: str, metastore_uri: str | None):
        self.spark = spark
        self.op = op
        self.client = MetastoreClient(metastore_uri or metastore_uri_of(spark)).connect()
        try:
            db, name = split_name(table, spark.catalog.currentDatabase())
            self.target = WriteTable(self.client, db, name)  # NotTransactionalError, bucketed tables
            self.target.check_operation(op)
            if self.target.insert_only and self.target.file_format not in ("orc", "parquet"):
                raise NotImplementedError(
                    f"writing {self.target.file_format} files of insert-only table {self.target.full_name}"
                )
        except BaseException:
            self.client.close()
            raise
        self.full_name = self.target.full_name
        self.write = WriteStatement(
            self.client, self.target.db, self.target.table_name, op, agent_info=AGENT_INFO
        )
        self.job_group: str | None = None
        self.locations: set[str] = set()  # partition locations outside the default paths

    def begin(self) -> None:
        """Open the txn, take the lock (waits), allocate the write id."""
        t = self.target
        self.write.begin(lock_components(t.db, t.table_name, self.op, None, dynamic=bool(t.partition_keys)))
        log.info(
            "%s %s: txn %s, write id %s", self.op, self.full_name, self.write.txn_id, self.write.write_id
        )

    def spec(self, partition_locations: dict[str, str] | None = None) -> _Spec:
        """What executors need to write this operation's files: mode, write id, statement id, schema, locations."""
        assert self.write.write_id is not None
        t = self.target
        return _Spec(
            mode=self.op,
            columns=tuple(t.columns),
            partition_keys=tuple(t.partition_keys),
            table_location=t.table.sd.location,
            partition_locations=tuple(sorted((partition_locations or {}).items())),
            write_id=self.write.write_id,
            statement_id=STATEMENT_ID,
            insert_only=t.insert_only,
            file_format=t.file_format,
            compression=t.compression(),
            time_zone=str(self.spark.conf.get("spark.sql.session.timeZone", "UTC")),
        )

    def snapshot_rows(self) -> tuple[DataFrame, dict[str, str]]:
        """The table under the write txn's own snapshot, with ROW__IDs (renamed ``__hm_*``), and
        the location of each partition."""
        assert self.write.txn_id is not None
        t = self.target
        txns = self.client.valid_txn_list(self.write.txn_id)
        write_ids = self.client.valid_write_ids([self.full_name], txns)[self.full_name]
        targets = table_locations(self.client, t.table)
        locations = [
            LocationFiles(loc, select_files(list_location(loc), write_ids, txns), values)
            for loc, values in targets
        ]
        df = snapshot_dataframe(
            self.spark,
            locations,
            write_ids,
            table_layout(t.table),
            tuple(t.partition_cols),
            with_row_ids=True,
        )
        df = df.toDF(OWID, BUCKET, ROWID, *[n for n, _ in t.columns], *t.partition_keys)
        known = {t.partition_name(v): loc for loc, v in targets if v}
        self.locations.update(known.values())
        return df, known

    def run(self, df: DataFrame, spec: _Spec) -> list[Any]:
        """Run the writing job (in its own job group, so a failure can wait for its tasks)."""
        use_configured_python(self.spark)
        sc = self.spark.sparkContext
        keys = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
        saved = {k: sc.getLocalProperty(k) for k in keys}
        self.job_group = f"hivemesh-acid-dml-{self.write.txn_id}"
        sc.setJobGroup(self.job_group, f"{self.op} {self.full_name} (txn {self.write.txn_id})", True)
        try:
            return df.mapInArrow(_task_writer(spec), RESULT_SCHEMA).collect()
        finally:
            for k, v in saved.items():
                sc.setLocalProperty(k, v)  # type: ignore[arg-type]

    def wait_for_tasks(self, timeout_s: float = 30.0) -> None:
        """After a failed job: wait until none of its tasks still runs (a task being killed could
        otherwise write a file after the directories are removed)."""
        if self.job_group is None:
            return
        tracker = self.spark.sparkContext.statusTracker()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stages = [
                s
                for j in tracker.getJobIdsForGroup(self.job_group)
                if (job := tracker.getJobInfo(j)) is not None
                for s in job.stageIds
            ]
            infos = [tracker.getStageInfo(s) for s in stages]
            if all(i is None or i.numActiveTasks == 0 for i in infos):
                return
            time.sleep(0.1)
        log.warning("tasks of %s still running after %.0fs", self.job_group, timeout_s)

    def finish(self, results: list[Any]) -> DmlResult:
        """Version files, orphan cleanup, partitions, commit."""
        txn, write_id = self.write.txn_id, self.write.write_id
        assert txn is not None and write_id is not None
        kept: dict[str, set[str]] = {}
        for r in results:
            directory, _, file_name = r.path.rpartition("/")
            kept.setdefault(directory, set()).add(file_name)
        for directory, names in kept.items():
            fs, path = storage.resolve_location(directory)
            _remove_orphans(fs, path, names)
            if not self.target.insert_only:
                write_acid_version_file(fs, path)
        partitions = sorted({(r.partition, tuple(r.pvalues)) for r in results if r.partition})
        if partitions and self.op == INSERT:
            self._place_partitions(partitions)
        if partitions:
            self.write.add_dynamic_partitions([name for name, _ in partitions])
        self.write.commit()
        log.info("%s %s: txn %s committed", self.op, self.full_name, txn)
        return DmlResult(
            operation=self.op,
            txn_id=txn,
            write_id=write_id,
            inserted=sum(r.rows for r in results if r.kind == INSERT),
            deleted=sum(r.rows for r in results if r.kind == DELETE),
            partitions=tuple(name for name, _ in partitions),
            files=tuple(sorted(r.path for r in results)),
        )

    def _place_partitions(self, partitions: list[tuple[str, tuple[str, ...]]]) -> None:
        """Create the partitions an insert wrote that do not exist; move the new delta of a
        partition that lives elsewhere than its default path."""
        t = self.target
        names = [name for name, _ in partitions]
        existing = {
            t.partition_name(p.values): p
            for p in self.client.hms.get_partitions_by_names(t.db, t.table_name, names)
        }
        for name, values in partitions:
            default = t.default_location(values)
            if default is None:
                raise ValueError(f"{self.full_name} has no location")
            part = existing.get(name)
            if part is None:
                if t.add_partition(values):
                    continue
                part = self.client.hms.get_partition(t.db, t.table_name, list(values))  # created concurrently
            if not storage.same_location(part.sd.location, default):
                self._move_delta(default, part.sd.location)

    def _move_delta(self, default: str, location: str) -> None:
        """Move this write's delta from a partition's default path to its real ``location``."""
        assert self.write.write_id is not None
        delta = delta_dir_name(self.write.write_id, self.write.write_id, STATEMENT_ID)
        src_fs, src = storage.resolve_location(storage.join_location(default, delta))
        dst_fs, dst_parent = storage.resolve_location(location)
        dst_fs.create_dir(dst_parent, recursive=True)
        dst = storage.join_location(dst_parent, delta)
        if type(src_fs) is not type(dst_fs):
            raise NotImplementedError(f"moving {src} to another file system ({location})")
        self.locations.add(location)
        src_fs.move(src, dst)
        log.info("%s: moved %s to the partition's location %s", self.full_name, src, dst)
        _remove_empty_dirs(
            src_fs,
            storage.resolve_location(default)[1],
            storage.resolve_location(self.target.table.sd.location)[1],
        )

    def fail(self) -> None:
        """Abort the txn and remove this write id's directories (best effort)."""
        self.write.close()
        try:
            self.wait_for_tasks()
        except Exception as e:  # the Spark context may be gone
            log.warning("could not wait for the tasks of txn %s: %s", self.write.txn_id, e)
        remove = self.write.abort()
        if self.write.write_id is None or not remove:
            return
        _remove_write_dirs(
            self.target.table.sd.location,
            len(self.target.partition_keys),
            self.write.write_id,
            self.locations,
        )

    def close(self) -> None:
        """Stop heartbeating and close the metastore connection."""
        self.write.close()
        self.client.close()


def _remove_orphans(fs: Any, directory: str, keep: set[str]) -> None:
    """Remove files of failed task attempts from a new delta directory."""
    for info in storage.list_dir(fs, directory):
        if (
            info.type == pafs.FileType.File
            and info.base_name not in keep
            and info.base_name != ACID_VERSION_FILE
        ):
            log.info("removing %s (a failed task attempt's file)", info.path)
            fs.delete_file(info.path)


def _remove_empty_dirs(fs: Any, path: str, stop: str) -> None:
    path, stop = path.rstrip("/"), stop.rstrip("/")
    while path.startswith(stop + "/"):
        try:
            if storage.list_dir(fs, path):
                return
            fs.delete_dir(path)
        except Exception:
            return
        path = path.rsplit("/", 1)[0]


def _remove_write_dirs(table_location: str, depth: int, write_id: int, locations: Iterable[str] = ()) -> None:
    """Remove every ``delta_<w>_<w>_*`` / ``delete_delta_<w>_<w>_*`` directory of ``write_id`` in the
    table's (default) partition directories and in ``locations``."""

    def children(fs: Any, path: str) -> list[Any]:
        try:
            return [i for i in storage.list_dir(fs, path) if i.type == pafs.FileType.Directory]
        except OSError:
            return []

    fs, root = storage.resolve_location(table_location)
    places = [(fs, root.rstrip("/"))]
    for _ in range(depth):
        places = [(fs, i.path) for f, d in places for i in children(f, d) if "=" in i.base_name]
    places += [storage.resolve_location(loc) for loc in locations]
    for place_fs, place in places:
        for info in children(place_fs, place):
            acid_dir = parse_acid_dir(info.base_name)
            if acid_dir is None or acid_dir.is_base:
                continue
            if acid_dir.min_write_id == write_id == acid_dir.max_write_id and storage.remove_path(
                place_fs, info.path
            ):
                log.info("removed %s", info.path)


def _execute(statement: _Statement, build: Any) -> DmlResult:
    try:
        statement.begin()
        df, spec = build(statement)
        results = statement.run(df, spec)
        return statement.finish(results)
    except BaseException:
        statement.fail()
        raise
    finally:
        statement.close()


# --- public API ----------------------------------------------------------------------------------------


def _column(value: Column | str) -> Column:
    return F.expr(value) if isinstance(value, str) else value


def insert_acid(
    spark: SparkSession,
    df: DataFrame,
    table: str,
    *,
    metastore_uri: str | None = None,
    session: AcidSession | None = None,
) -> DmlResult:
    """INSERT the rows of ``df`` into transactional ``table`` (full ACID or insert-only ORC/Parquet).

    ``df`` holds the table's columns by name (case-insensitive, any order; cast to the table's
    types) and, for a partitioned table, the partition columns too (dynamic partitioning: each row
    goes to its partition, missing partitions are created). ``session``: an
    :class:`~hivemesh.spark.acid.AcidSession` whose metastore to use (the insert still runs in its
    own write txn, committed here). Raises ValueError for missing or extra columns."""
    if session is not None:
        metastore_uri = metastore_uri or session.metastore_uri
    statement = _Statement(spark, table, INSERT, metastore_uri)
    wanted = [*statement.target.columns, *statement.target.partition_cols]
    by_lower = {c.lower(): c for c in df.columns}
    missing = [n for n, _ in wanted if n.lower() not in by_lower]
    extra = sorted(set(by_lower) - {n.lower() for n, _ in wanted})
    if missing or extra:
        statement.close()
        raise ValueError(
            f"insert into {statement.full_name}: the DataFrame must have columns "
            f"{[n for n, _ in wanted]} (missing {missing}, extra {extra})"
        )
    data = df.select(*[F.col(f"`{by_lower[n.lower()]}`").cast(spark_type(t)).alias(n) for n, t in wanted])

    def build(st: _Statement) -> tuple[DataFrame, _Spec]:
        out = data.sortWithinPartitions(*st.target.partition_keys) if st.target.partition_keys else data
        return out, st.spec()

    return _execute(statement, build)


def _changes(
    st: _Statement, condition: Column | str | None, assignments: dict[str, Column | str] | None
) -> tuple[DataFrame, _Spec]:
    """The rows to delete (with their new values for an UPDATE), shuffled by (partition, bucket)
    and sorted by ROW__ID."""
    rows, known = st.snapshot_rows()
    if condition is not None:
        rows = rows.filter(_column(condition))
    keys = [F.col(OWID), F.col(BUCKET), F.col(ROWID)]
    bucket_id = F.shiftright(F.col(BUCKET), 16).bitwiseAND(0xFFF).alias(BUCKET_ID)
    if assignments is None:
        selected = rows.select(*keys, *[F.col(k) for k in st.target.partition_keys], bucket_id)
    else:
        new_values = [
            (_column(assignments[n]) if n in assignments else F.col(f"`{n}`")).cast(spark_type(t)).alias(n)
            for n, t in st.target.columns
        ]
        selected = rows.select(*keys, *new_values, *[F.col(k) for k in st.target.partition_keys], bucket_id)
    shuffle = int(st.spark.conf.get("spark.sql.shuffle.partitions", "200"))
    n = max(1, min(shuffle, MAX_TASKS))
    grouped = selected.repartition(n, *[F.col(k) for k in st.target.partition_keys], F.col(BUCKET_ID))
    ordered = grouped.sortWithinPartitions(*st.target.partition_keys, BUCKET_ID, OWID, BUCKET, ROWID)
    return ordered, st.spec(known)


def delete_acid(
    spark: SparkSession,
    table: str,
    condition: Column | str | None,
    *,
    metastore_uri: str | None = None,
) -> DmlResult:
    """DELETE FROM full-ACID ``table`` WHERE ``condition`` (a Column or SQL expression over the
    table's columns and partition columns; None deletes every row)."""
    statement = _Statement(spark, table, DELETE, metastore_uri)
    return _execute(statement, lambda st: _changes(st, condition, None))


def update_acid(
    spark: SparkSession,
    table: str,
    assignments: dict[str, Column | str],
    condition: Column | str | None,
    *,
    metastore_uri: str | None = None,
) -> DmlResult:
    """UPDATE full-ACID ``table`` SET ``assignments`` (column -> Column or SQL expression over the
    old row) WHERE ``condition`` (None: every row). Partition columns cannot be assigned."""
    statement = _Statement(spark, table, UPDATE, metastore_uri)
    names = {n.lower(): n for n, _ in statement.target.columns}
    fixed: dict[str, Column | str] = {}
    for key, value in assignments.items():
        lower = key.lower()
        if lower in {k.lower() for k in statement.target.partition_keys}:
            statement.close()
            raise ValueError(f"cannot update partition column {key} of {statement.full_name} (Hive neither)")
        if lower not in names:
            statement.close()
            raise ValueError(f"{statement.full_name} has no column {key}")
        fixed[names[lower]] = value
    if not fixed:
        statement.close()
        raise ValueError("update_acid needs at least one assignment")
    return _execute(statement, lambda st: _changes(st, condition, fixed))
