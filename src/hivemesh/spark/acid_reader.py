"""Build the DataFrame of a Hive ACID table (or directory) under a snapshot whose files are chosen.

Scan path, chosen by measurement (``bench/acid_read.py``, README "Hive ACID"): the JVM source of
:mod:`hivemesh.spark.jvm_reader` (``AcidOrcSource.java``) when it can be built and added to the
session. It reads every base/delta and delete-delta file of the snapshot in one scan, with the
partition index as a column, decoding only the columns a query uses (Spark's vectorized ORC batch
reader under an ACID-shaped reader schema), ``count()`` from footers when nothing filters rows, and
streaming files cut at their flushed length in the JVM. The write-id filter (only for directories
spanning invalid write ids) and the delete join are the same Spark operators on both paths.

Without it (no ``javac``; ``spark.hivemesh.acid.jvmReader=false``): Spark's own vectorized ORC
reader, kept working on ACID files by always reading all six ACID columns. Why: ORC's
``SchemaEvolution`` recognizes an ACID file by its six top-level column names; when the schema
Spark asks for is not ACID-shaped (Spark pruned columns: ``count()``, selecting a few
fields) ORC wraps it in the ACID event schema again and the read fails with
ArrayIndexOutOfBounds/ClassCastException (README "Hive ACID"). Asking for all six columns
(``row`` pruned to the fields used) keeps the shapes equal. The scan filter below references every
ACID column plus the cheapest ``row`` field, so Spark's column pruning can never drop one; its
conditions are true for every insert event Hive writes, so it costs only their decoding.
``spark.sql.orc.impl=hive`` is row-based, measured 2.5-4x slower on the lineitem aggregate and
10-20x on ``count()`` (``bench/acid_read.py``), and needs ORC filter pushdown off on ACID files
(ArrayIndexOutOfBounds in ``OrcInputFormat.getSargColumnNames``); pyarrow in a Python data source
cannot prune columns.

Two kinds of files need more than a plain scan on that path (original files on both); neither
needs Python workers (so a SparkSession whose executors' Python lacks pyarrow or hivemesh reads
them too):

* Original (pre-ACID) files are read by Spark's ORC reader with their own column names (matched to
  the table's columns by position, as Hive does) and get Hive's synthesized ROW__ID:
  ``originalTransaction`` 0, ``bucket`` from the file name, ``rowId`` the row's position in its
  bucket (files of a bucket in Hive's order). Spark 4.2 has no ``_metadata.row_index`` for ORC
  (Parquet only). Within one task a split's rows come in file order with consecutive
  ``monotonically_increasing_id()`` values, so the position is that id minus the first id of its
  split (``_metadata.file_block_start``), plus the rows of the file's earlier splits, plus the rows
  of the bucket's earlier files (footers, read on the driver). The per-split first ids and counts
  come from a second scan of the files that decodes no column (an aggregate, broadcast): no
  shuffle of the rows. Both scans split the files alike; a row whose id falls outside its split's
  range fails the query (``raise_error``) instead of getting a wrong id. This is built only when a
  row id is used (``with_row_ids`` or delete deltas in that location).
* Streaming files still open (a ``_flush_length`` side file) may be read only up to their last
  flushed footer, and Spark's ORC reader cannot be told a length (``orc.max.file.length`` is
  ignored by its footer read, measured). They are read on the DRIVER with pyarrow, when the
  DataFrame is built, and handed to Spark as Arrow data (``createDataFrame``, no Python worker).
  So these rows are fixed at construction (a consistent cut) and pass through driver memory:
  only the open batches' files have side files. Above ``spark.hivemesh.acid.streamingDriverMaxBytes``
  flushed bytes in total (default 64 MiB) they are read with pyarrow on the executors
  (``mapInArrow``) instead, after :func:`require_python_workers` checked, before any job, that the
  executors' Python can import pyarrow and hivemesh (:class:`PythonWorkersError` otherwise).

Deleted rows are removed with a join on 64-row masks of deleted row ids per (partition,
``originalTransaction``, ``bucket``) (:func:`_without_deleted`), broadcast while the delete delta
files hold up to ``spark.hivemesh.acid.broadcastDeletesBytes`` bytes (default 256 MiB), else left
to Spark's join planning (a sort-merge join: no limit from the driver's memory).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, reduce
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    _parse_datatype_string,
)

from hivemesh.acid.arrow_reader import (
    HIVE_TEXT_NULL,
    OriginalFileInfo,
    TableLayout,
    acid_events,
    arrow_row_type,
    flush_length,
    original_events,
    original_files_info,
)
from hivemesh.acid.names import encode_bucket_property
from hivemesh.acid.selection import DataFile, SnapshotFiles
from hivemesh.errors import HivemeshError
from hivemesh.hive.txn_lists import ValidWriteIdList
from hivemesh.spark import jvm_reader
from hivemesh.spark.jvm_reader import SOURCE_CLASS
from hivemesh.spark.session import use_configured_python

PARTITION_INDEX = "__hivemesh_partition"  # joins delete events to rows of the same location
BROADCAST_DELETES_BYTES_CONF = "spark.hivemesh.acid.broadcastDeletesBytes"
BROADCAST_DELETES_BYTES = 256 * 1024 * 1024  # delete files up to this size (bytes) are broadcast
STREAMING_DRIVER_MAX_BYTES_CONF = "spark.hivemesh.acid.streamingDriverMaxBytes"
STREAMING_DRIVER_MAX_BYTES = 64 * 1024 * 1024  # flushed streaming bytes read on the driver, in total


@lru_cache(maxsize=1024)
def spark_type(hive_type: str) -> DataType:
    """The Spark type of a Hive column type (``char``/``varchar`` read as strings)."""
    text = re.sub(r"\b(?:var)?char\s*\(\s*\d+\s*\)", "string", hive_type.strip(), flags=re.IGNORECASE)
    return _parse_datatype_string(text)


def row_struct(columns: Sequence[tuple[str, str]]) -> StructType:
    """Spark struct of ``(name, hive type)`` columns."""
    return StructType([StructField(name, spark_type(t), True) for name, t in columns])


def acid_file_schema(columns: Sequence[tuple[str, str]]) -> StructType:
    """Spark schema of a full-ACID ORC file (Hive ``OrcRecordUpdater``)."""
    return StructType(
        [
            StructField("operation", IntegerType()),
            StructField("originalTransaction", LongType()),
            StructField("bucket", IntegerType()),
            StructField("rowId", LongType()),
            StructField("currentTransaction", LongType()),
            StructField("row", row_struct(columns)),
        ]
    )


_CHEAP = [
    BooleanType,
    ByteType,
    ShortType,
    StringType,
    IntegerType,
    DateType,
    LongType,
    FloatType,
    DoubleType,
    TimestampType,
    DecimalType,
]


def _cheapest_field(row: StructType) -> str:
    def cost(f: StructField) -> int:
        """Rank of ``f``'s type in decoding cost (0 cheapest); nested types last."""
        for i, t in enumerate(_CHEAP):
            if isinstance(f.dataType, t):
                return i
        return 100 if not isinstance(f.dataType, ArrayType | MapType | StructType) else 200

    return min(row.fields, key=cost).name


def _any_value(column: Column) -> Column:
    """True for every value of ``column``, null or not (keeps it referenced in a scan filter)."""
    return column.isNull() | column.isNotNull()


def _anchor(row: StructType) -> Column:
    """True for every insert event; references all six ACID columns so none is pruned."""
    field = F.col("row").getField(_cheapest_field(row))
    return (
        (F.col("operation") != 2)
        & F.col("originalTransaction").isNotNull()
        & F.col("bucket").isNotNull()
        & F.col("rowId").isNotNull()
        & F.col("currentTransaction").isNotNull()
        & _any_value(field)
    )


def _packed_key(row_id: str, owid: str, bucket: str, partition: str) -> Column:
    """One long mixing a ROW__ID and the partition index, with bit operations only (no ANSI
    overflow). Different ROW__IDs may share it: the join also compares every part exactly."""
    return (
        F.col(row_id)
        .bitwiseXOR(F.shiftleft(F.col(owid), 40))
        .bitwiseXOR(F.shiftleft(F.col(bucket).cast("long"), 20))
        .bitwiseXOR(F.shiftleft(F.col(partition).cast("long"), 52))
    )


def valid_write_id_column(column: Column, write_ids: ValidWriteIdList) -> Column:
    """Spark condition: ``column`` holds a write id valid in ``write_ids``."""
    cond = column <= F.lit(write_ids.high_watermark)
    invalid = [w for w in write_ids.exceptions if w <= write_ids.high_watermark]
    if invalid:
        cond = cond & ~column.isin(invalid)
    return cond


@dataclass(frozen=True)
class LocationFiles:
    """One table or partition location with its chosen files. ``partition_values``: the partition
    column values as the metastore stores them (strings), empty for unpartitioned tables."""

    location: str
    files: SnapshotFiles
    partition_values: tuple[str, ...] = ()


def _uri(location: str, relative: str) -> str:
    base = location.rstrip("/")
    if "://" not in base and not base.startswith("file:"):
        base = "file://" + base
    return base + "/" + relative


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)


def _arrow_events_schema(columns: Sequence[tuple[str, str]]) -> StructType:
    return StructType([*acid_file_schema(columns).fields, StructField(PARTITION_INDEX, IntegerType())])


def _arrow_tasks_reader(columns: tuple[tuple[str, str], ...], out_schema_json: str):
    """The ``mapInArrow`` function that reads original and flushed-length files on executors (the
    fallback for streaming files too large to read on the driver)."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Each task row (kind, path, length, bucket id, first row id, partition index) read as
        Arrow events of ``out_schema_json``, in batches of up to 64K rows."""
        out_schema = to_arrow_schema(
            StructType.fromJson(json.loads(out_schema_json)),
            timezone="UTC",
            prefers_large_types=False,
        )
        row_type = arrow_row_type(columns)
        for batch in batches:
            for task in batch.to_pylist():
                if task["kind"] == "original":
                    events = original_events(task["path"], row_type, task["bucket_id"], task["first_row_id"])
                else:
                    events = acid_events(task["path"], row_type, length=task["length"])
                events = events.append_column(
                    PARTITION_INDEX, pa.array([task["pindex"]] * events.num_rows, pa.int32())
                )
                for out in events.to_batches(max_chunksize=65536):
                    yield pa.RecordBatch.from_arrays(
                        [out.column(i).cast(out_schema.field(i).type) for i in range(out.num_columns)],
                        schema=out_schema,
                    )

    return read


class PythonWorkersError(HivemeshError, RuntimeError):
    """The executors' Python interpreter cannot run hivemesh's Python worker code (it lacks
    pyarrow or hivemesh, or does not start). Raised on the driver before the job that needs it."""


_WORKERS_OK: set[tuple[str, str]] = set()  # (application id, interpreter) already checked
_WORKER_IMPORTS = "import pyarrow, hivemesh.acid.arrow_reader"


def _local_python_problem(python: str) -> str | None:
    """Why ``python`` (run on this machine, as local-mode workers are) cannot import what the
    workers need, or None."""
    try:
        proc = subprocess.run(
            [python, "-c", _WORKER_IMPORTS], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _cluster_python_problem(spark: SparkSession) -> str | None:
    """Why the executors' Python cannot import what the workers need, from a one-task probe job,
    or None."""

    def probe(_: Iterator[int]) -> Iterator[str]:
        """One line: empty when both imports work, else the interpreter and the import error."""
        try:
            __import__("pyarrow")
            __import__("hivemesh.acid.arrow_reader")
        except Exception as e:  # reported to the driver
            yield f"{sys.executable}: {type(e).__name__}: {e}"
        else:
            yield ""

    try:
        found = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()
    except Exception as e:  # the worker did not even start
        text = str(e).strip().splitlines()
        return text[0] if text else type(e).__name__
    return next((p for p in found if p), None)


def require_python_workers(spark: SparkSession, purpose: str) -> None:
    """Raise :class:`PythonWorkersError` unless Python workers of ``spark`` can import pyarrow and
    hivemesh (``purpose``: what needs them, for the message).

    The interpreter checked is ``SparkContext.pythonExec`` (``$PYSPARK_PYTHON`` when the context
    was created, else ``python3``; see :func:`hivemesh.spark.session.use_configured_python`). With
    a ``local`` master it is started once on the driver machine (no Spark job); otherwise a
    one-task probe job runs. A success is remembered per application and interpreter, so the check
    costs once."""
    sc = spark.sparkContext
    python = str(getattr(sc, "pythonExec", None) or "python3")
    key = (sc.applicationId, python)
    if key in _WORKERS_OK:
        return
    if sc.master.startswith("local"):
        problem = _local_python_problem(python)
    else:
        problem = _cluster_python_problem(spark)
    if problem is not None:
        raise PythonWorkersError(
            f"{purpose} runs Python workers that need pyarrow and hivemesh, but the executors' Python "
            f"({python}) cannot import them: {problem}. Set PYSPARK_PYTHON (before the SparkContext "
            "starts; spark.pyspark.python under spark-submit) to an interpreter that has them, or "
            "build the session with hivemesh.spark.session(...), which does so."
        )
    _WORKERS_OK.add(key)


def _uri_path(uri: str) -> str:
    """The path part of a location-built URI or plain path, as written (not decoded)."""
    if "://" in uri:
        rest = uri.split("://", 1)[1]
        path = rest[rest.index("/") :] if "/" in rest else "/"
    elif uri.startswith("file:"):
        path = uri[len("file:") :]
    else:
        path = uri
    return re.sub("/+", "/", path)


def _spark_file_path(reported: str) -> str:
    """The decoded path part of a file path as Spark reports it (``file:/a%20b/x``)."""
    return re.sub("/+", "/", unquote(urlsplit(reported).path))


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


_FILE, _START, _SEQ = "__hivemesh_file", "__hivemesh_start", "__hivemesh_seq"
_SCHEME_AUTHORITY = r"^[A-Za-z][A-Za-z0-9+.\-]*:(//[^/]*)?"  # of a URI: "file:", "hdfs://nn:8020"


def _original_events(
    spark: SparkSession, loc: LocationFiles, pindex: int, columns: Sequence[tuple[str, str]], need_ids: bool
) -> list[DataFrame]:
    """Insert events (ACID columns + partition index) of ``loc``'s original files, read by Spark's
    ORC reader; ``need_ids``: synthesize ``bucket`` and ``rowId`` (else 0: nothing uses them)."""
    originals = loc.files.original_files
    infos = original_files_info(loc.location, originals)
    frames = []
    for names, members in _by_column_names(loc, infos, columns).items():  # one scan per naming
        read_schema = StructType(
            [StructField(n, spark_type(t), True) for n, (_, t) in zip(names, columns, strict=True)]
        )
        paths = [_uri(loc.location, originals[i].path) for i in members]
        scan = spark.read.schema(read_schema).orc(paths)
        row = F.struct(*[_quoted(n).alias(name) for n, (name, _) in zip(names, columns, strict=True)])
        if need_ids:
            starts = _file_starts(scan, paths, [(originals[i], infos[i]) for i in members])
            df, bucket, row_id = _with_row_positions(spark, scan, starts)
        else:
            df, bucket, row_id = scan, F.lit(0), F.lit(0)
        frames.append(
            df.select(
                F.lit(0).cast("int").alias("operation"),
                F.lit(0).cast("long").alias("originalTransaction"),
                bucket.cast("int").alias("bucket"),
                row_id.cast("long").alias("rowId"),
                F.lit(0).cast("long").alias("currentTransaction"),
                row.alias("row"),
                F.lit(pindex).alias(PARTITION_INDEX),
            )
        )
    return frames


def _by_column_names(
    loc: LocationFiles, infos: Sequence[OriginalFileInfo], columns: Sequence[tuple[str, str]]
) -> dict[tuple[str, ...], list[int]]:
    """The non-empty original files of ``loc`` (indexes into its ``original_files``) grouped by
    their physical column names; ValueError when a file's column count is not the table's."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (f, info) in enumerate(zip(loc.files.original_files, infos, strict=True)):
        if len(info.column_names) != len(columns):
            raise ValueError(
                f"{_uri(loc.location, f.path)}: {len(info.column_names)} columns, table has {len(columns)}"
            )
        if info.rows:
            groups.setdefault(info.column_names, []).append(i)
    return groups


def _file_starts(
    scan: DataFrame, paths: Sequence[str], files: Sequence[tuple[DataFile, OriginalFileInfo]]
) -> list[tuple[str, int, int]]:
    """For each file of ``scan`` (``paths[i]`` is ``files[i]``), keyed by its path as
    ``_metadata.file_path`` spells it without scheme and authority: its first row id in its bucket
    and its encoded bucket property. RuntimeError when Spark's file list does not match ``paths``."""
    by_path = {_uri_path(p): i for i, p in enumerate(paths)}
    starts = []
    for reported in scan.inputFiles():
        i = by_path.pop(_spark_file_path(reported), None)
        if i is None:
            raise RuntimeError(f"cannot match the file Spark lists, {reported}, to {sorted(by_path)}")
        f, info = files[i]
        bucket_id = f.bucket_id if f.bucket_id is not None else 0
        key = re.sub(_SCHEME_AUTHORITY, "", reported)
        starts.append((key, info.first_row_id, encode_bucket_property(bucket_id)))
    if by_path:
        raise RuntimeError(f"Spark does not list the original files {sorted(by_path)}")
    return starts


def _with_row_positions(
    spark: SparkSession, scan: DataFrame, starts: list[tuple[str, int, int]]
) -> tuple[DataFrame, Column, Column]:
    """``scan`` with the columns that give each row its ``bucket`` and ``rowId`` (its position in
    its bucket), from the ``starts`` of :func:`_file_starts`: (frame, bucket, row id)."""
    # The nondeterministic id right above the scan keeps filters from being pushed below
    # it: partition index << 33 + the row's index in its task, so consecutive within a split.
    df = scan.select(
        "*",
        # Spark spells a file "file:/x" here and "file:///x" in inputFiles(): key on the path
        F.regexp_replace(F.col("_metadata.file_path"), _SCHEME_AUTHORITY, "").alias(_FILE),
        F.col("_metadata.file_block_start").alias(_START),
        F.monotonically_increasing_id().alias(_SEQ),
    )
    # Per split (file, block start): its first id and row count, from a second scan that
    # decodes no column; the splits before it in the file give its first position.
    splits = df.groupBy(_FILE, _START).agg(
        F.min(_SEQ).alias("__hivemesh_first_seq"), F.count(F.lit(1)).alias("__hivemesh_n")
    )
    earlier = F.sum("__hivemesh_n").over(Window.partitionBy(_FILE).orderBy(_START))
    splits = splits.withColumn("__hivemesh_before", earlier - F.col("__hivemesh_n"))
    files = spark.createDataFrame(starts, f"{_FILE} string, __hivemesh_first long, __hivemesh_bucket int")
    df = df.join(F.broadcast(splits.join(files, _FILE)), [_FILE, _START])
    offset = F.col(_SEQ) - F.col("__hivemesh_first_seq")
    # Both scans split the files alike (same relation, same settings); if they ever did
    # not, ids fall outside their split's range: fail rather than return wrong row ids.
    row_id = F.when(
        (offset >= 0) & (offset < F.col("__hivemesh_n")),
        F.col("__hivemesh_first") + F.col("__hivemesh_before") + offset,
    ).otherwise(F.raise_error(F.lit("hivemesh: original file splits differ between scans")))
    return df, F.col("__hivemesh_bucket"), row_id


def _conf_bytes(spark: SparkSession, key: str, default: int) -> int:
    """Spark setting ``key``: a plain integer, bytes (ValueError otherwise); ``default`` when unset."""
    value = spark.conf.get(key, None)
    return default if value in (None, "") else int(value)


def _broadcast_deletes_bytes(spark: SparkSession) -> int:
    return _conf_bytes(spark, BROADCAST_DELETES_BYTES_CONF, BROADCAST_DELETES_BYTES)


def _streaming_driver_max_bytes(spark: SparkSession) -> int:
    return _conf_bytes(spark, STREAMING_DRIVER_MAX_BYTES_CONF, STREAMING_DRIVER_MAX_BYTES)


def _streaming_events(
    spark: SparkSession, tasks: list[dict[str, Any]], columns: Sequence[tuple[str, str]]
) -> DataFrame:
    """Events (ACID columns + partition index) of streaming files cut at their flushed length:
    read on the driver (pyarrow, now) up to the configured total, else on the executors."""
    out_schema = _arrow_events_schema(columns)
    total = sum(t["length"] for t in tasks)
    if total <= _streaming_driver_max_bytes(spark):
        target = to_arrow_schema(out_schema, timezone="UTC", prefers_large_types=False)
        row_type = arrow_row_type(columns)
        parts = []
        for t in tasks:
            events = acid_events(t["path"], row_type, length=t["length"])
            events = events.append_column(
                PARTITION_INDEX, pa.array([t["pindex"]] * events.num_rows, pa.int32())
            )
            parts.append(
                pa.Table.from_arrays(
                    [events.column(i).cast(target.field(i).type) for i in range(events.num_columns)],
                    schema=target,
                )
            )
        return spark.createDataFrame(pa.concat_tables(parts) if parts else target.empty_table(), out_schema)
    use_configured_python(spark)
    require_python_workers(spark, f"reading {len(tasks)} streaming file(s) ({total} flushed bytes)")
    task_df = spark.createDataFrame(
        tasks, "kind string, path string, length long, bucket_id int, first_row_id long, pindex int"
    ).repartition(min(len(tasks), spark.sparkContext.defaultParallelism))
    return task_df.mapInArrow(_arrow_tasks_reader(tuple(columns), out_schema.json()), out_schema)


def _partition_literals(partition_cols: Sequence[tuple[str, str]], values: Sequence[str]) -> list[Column]:
    cols = []
    for (name, hive_type), value in zip(partition_cols, values, strict=True):
        lit = F.lit(None) if value == "__HIVE_DEFAULT_PARTITION__" else F.lit(value)
        cols.append(lit.cast(spark_type(hive_type)).alias(name))
    return cols


def snapshot_dataframe(
    spark: SparkSession,
    locations: Sequence[LocationFiles],
    write_ids: ValidWriteIdList,
    layout: TableLayout,
    partition_cols: Sequence[tuple[str, str]] = (),
    *,
    with_row_ids: bool = False,
) -> DataFrame:
    """The rows of ``locations`` under ``write_ids``: the table columns, then the partition
    columns; with ``with_row_ids`` first ``originalTransaction``, ``bucket``, ``rowId`` (Hive's
    ROW__ID, needed to delete or update rows; full ACID only).

    ``layout``: the table's columns and kind (full ACID or insert-only, file format). Spark reads
    the files when the DataFrame is evaluated, except streaming files cut at their flushed length
    (read here, on the driver, up to ``spark.hivemesh.acid.streamingDriverMaxBytes``; see the
    module doc). Original files' footers are read here (row counts, column names). No Python
    worker runs unless the streaming files exceed that limit; then :class:`PythonWorkersError` is
    raised here when the executors' Python lacks pyarrow or hivemesh. ValueError when an original
    file's column count differs from the table's."""
    if layout.insert_only:
        if with_row_ids:
            raise ValueError("insert-only tables have no row ids (ROW__ID)")
        return _insert_only_dataframe(spark, locations, layout, partition_cols)
    columns = layout.columns
    scans = _EventScans(spark, columns, write_ids, jvm=jvm_reader.enable(spark))
    for pindex, loc in enumerate(locations):
        scans.add_location(loc, pindex, need_ids=with_row_ids or bool(loc.files.delete_files))
    events = scans.live_inserts()
    out = [F.col(_flat(i)).alias(name) for i, (name, _) in enumerate(columns)]
    if with_row_ids:
        out = [F.col("originalTransaction"), F.col("bucket"), F.col("rowId"), *out]
    if partition_cols:
        return _with_partitions(events.select(*out, PARTITION_INDEX), locations, partition_cols)
    return events.select(*out)


@dataclass
class _EventScans:
    """The scans of a full-ACID snapshot, added location by location (``pindex``: the location's
    index, kept in the :data:`PARTITION_INDEX` column): insert events, streaming files to read
    up to their flushed length, and the ROW__IDs of delete events."""

    spark: SparkSession
    columns: Sequence[tuple[str, str]]
    write_ids: ValidWriteIdList
    inserts: list[DataFrame] = field(default_factory=list)
    deletes: list[DataFrame] = field(default_factory=list)
    stream_tasks: list[dict[str, Any]] = field(default_factory=list)
    jvm: bool = False  # read ACID files with the JVM source (:mod:`hivemesh.spark.jvm_reader`)
    jvm_inserts: list[str] = field(default_factory=list)  # its ``files`` lines
    jvm_deletes: list[str] = field(default_factory=list)
    delete_bytes: int = 0
    needs_filter: bool = False  # some file holds events of write ids not valid in the snapshot
    file_schema: StructType = field(init=False)
    row: StructType = field(init=False)

    def __post_init__(self) -> None:
        self.file_schema = acid_file_schema(self.columns)
        self.row = row_struct(self.columns)

    def add_location(self, loc: LocationFiles, pindex: int, need_ids: bool) -> None:
        """Add ``loc``'s original files (``need_ids``: with their synthesized row ids), its ACID
        data files and its delete files."""
        if loc.files.original_files:
            self.inserts.extend(_original_events(self.spark, loc, pindex, self.columns, need_ids))
        self._add_acid_files(loc, pindex)
        self._add_delete_files(loc, pindex)

    def _add_acid_files(self, loc: LocationFiles, pindex: int) -> None:
        plain: list[str] = []
        for f in loc.files.data_files:
            if f.directory is None:  # original files are also listed here; read above
                continue
            self.needs_filter = self.needs_filter or f.write_id_filter
            length = flush_length(loc.location, f)
            if self.jvm:
                if length != 0:  # 0: no footer flushed yet, nothing readable
                    self.jvm_inserts.append(_files_line(pindex, length, f.size, _uri(loc.location, f.path)))
            elif length is None:
                plain.append(_uri(loc.location, f.path))
            elif length > 0:  # 0: no footer flushed yet, nothing readable
                self.stream_tasks.append(
                    {
                        "kind": "acid",
                        "path": _uri(loc.location, f.path),
                        "length": length,
                        "bucket_id": 0,
                        "first_row_id": 0,
                        "pindex": pindex,
                    }
                )
        if plain:
            df = self.spark.read.schema(self.file_schema).orc(plain).filter(_anchor(self.row))
            self.inserts.append(df.withColumn(PARTITION_INDEX, F.lit(pindex)))

    def _add_delete_files(self, loc: LocationFiles, pindex: int) -> None:
        delete_paths = [_uri(loc.location, f.path) for f in loc.files.delete_files]
        self.delete_bytes += sum(f.size for f in loc.files.delete_files)
        if self.jvm:
            self.jvm_deletes.extend(
                _files_line(pindex, None, f.size, p)
                for f, p in zip(loc.files.delete_files, delete_paths, strict=True)
            )
            return
        if not delete_paths:
            return
        dd = self.spark.read.schema(self.file_schema).orc(delete_paths)
        dd = dd.filter(
            (F.col("operation") == 2)
            # Hive's delete reader ignores ``row``; one field is referenced (always true) only so
            # the scan keeps the sixth ACID column, with one field instead of every column
            & _any_value(F.col("row").getField(_cheapest_field(self.row)))
            & valid_write_id_column(F.col("currentTransaction"), self.write_ids)
        )
        self.deletes.append(_delete_keys(dd, F.lit(pindex)))

    def live_inserts(self) -> DataFrame:
        """The insert events valid in the snapshot and not deleted: the ROW__ID columns, the
        partition index and the table's columns as top-level columns (:func:`_flat` names).
        Reads the streaming files (on the driver, or checks the executors' Python).

        The ``row`` fields are lifted out before the delete join: Spark prunes nested fields only
        in projections right above the scan, so a join on the ``row`` struct would read every
        table column (measured: all 16 lineitem columns for a Q1 that needs 5)."""
        inserts = list(self.inserts)
        if self.jvm_inserts:
            inserts.append(self._jvm_events(self.jvm_inserts, "insert"))
        deletes = list(self.deletes)
        if self.jvm_deletes:
            dd = self._jvm_events(self.jvm_deletes, "delete").filter(
                valid_write_id_column(F.col("currentTransaction"), self.write_ids)
            )
            deletes.append(_delete_keys(dd, F.col(PARTITION_INDEX)))
        if self.stream_tasks:
            streamed = _streaming_events(self.spark, self.stream_tasks, self.columns)
            inserts.append(streamed.filter(F.col("operation") != 2))
        if not inserts:
            empty = StructType([*self.file_schema.fields, StructField(PARTITION_INDEX, IntegerType())])
            inserts.append(self.spark.createDataFrame([], empty))
        events = _union(inserts)
        if self.needs_filter:
            events = events.filter(valid_write_id_column(F.col("currentTransaction"), self.write_ids))
        events = events.select(
            "originalTransaction",
            "bucket",
            "rowId",
            PARTITION_INDEX,
            *(F.col("row").getField(name).alias(_flat(i)) for i, (name, _) in enumerate(self.columns)),
        )
        if not deletes:
            return events
        dels = _union(deletes)  # duplicates set the same bit again
        return _without_deleted(events, dels, self.delete_bytes <= _broadcast_deletes_bytes(self.spark))

    def _jvm_events(self, lines: list[str], events: str) -> DataFrame:
        """The events of ``lines``' files (``events``: ``insert`` or ``delete``) through the JVM
        source: its columns are the ACID file schema plus :data:`PARTITION_INDEX`, and Spark
        reads only those a query uses (no anchor filter needed)."""
        return (
            self.spark.read.format(SOURCE_CLASS)
            .schema(StructType([*self.file_schema.fields, StructField(PARTITION_INDEX, IntegerType())]))
            .option("files", "\n".join(lines))
            .option("events", events)
            .load()
        )


def _delete_keys(deletes: DataFrame, partition: Column) -> DataFrame:
    """The ROW__IDs of delete events with their location's index, as :func:`_without_deleted`
    takes them (``d_rowId``, ``d_owid``, ``d_bucket``, ``d_p``)."""
    return deletes.select(
        F.col("rowId").alias("d_rowId"),
        F.col("originalTransaction").alias("d_owid"),
        F.col("bucket").alias("d_bucket"),
        partition.alias("d_p"),
    )


def _files_line(pindex: int, length: int | None, size: int, uri: str) -> str:
    """One line of the JVM source's ``files`` option: partition index, readable length (-1: the
    whole file), size as listed (bytes), path URI; tab-separated."""
    if "\n" in uri or "\t" in uri:
        raise ValueError(f"a path with a tab or newline cannot be read: {uri!r}")
    return f"{pindex}\t{-1 if length is None else length}\t{size}\t{uri}"


def _flat(i: int) -> str:
    """The top-level name of the table's ``i``-th column in :meth:`_EventScans.live_inserts`."""
    return f"__hivemesh_c{i}"


def _without_deleted(events: DataFrame, dels: DataFrame, broadcast: bool) -> DataFrame:
    """``events`` without those whose ROW__ID and partition index are in ``dels`` (columns
    ``d_rowId``, ``d_owid``, ``d_bucket``, ``d_p``).

    The delete events are first folded into 64-bit masks, one per run of 64 row ids
    (``rowId >> 6``) of one (partition, original write id, bucket): Hive deletes cluster in row id
    order, so the join's table is up to 64 times smaller than the list of deleted ROW__IDs
    (measured on lineitem with every 10th row deleted: 600,122 keys into about 94,000 masks, count()
    2.2 -> 1.6 s). Each event then probes its word's mask with a left join and keeps itself when
    its bit is clear. ``broadcast``: ship the masks to every task (no shuffle of the events);
    otherwise Spark plans the join itself (a sort-merge join of both sides when they are large,
    so deletes larger than the driver's memory still work)."""
    word = F.shiftright(F.col("d_rowId"), 6)
    masks = dels.groupBy("d_p", "d_owid", "d_bucket", word.alias("d_word")).agg(
        F.expr("bit_or(shiftleft(1L, cast(d_rowId & 63 as int)))").alias("d_mask")
    )
    if broadcast:
        masks = F.broadcast(masks)
    # One long join key (Spark builds a LongHashedRelation, measured 25% faster than a
    # 4-column key); the exact comparison of every part is written as differences so Spark
    # keeps it as the join condition instead of adding it to the key.
    columns = events.columns
    events = events.withColumn("__hivemesh_word", F.shiftright(F.col("rowId"), 6))
    events = events.withColumn(
        "__k", _packed_key("__hivemesh_word", "originalTransaction", "bucket", PARTITION_INDEX)
    )
    masks = masks.withColumn("d_k", _packed_key("d_word", "d_owid", "d_bucket", "d_p"))
    cond = (
        (events["__k"] == masks["d_k"])
        & ((events["__hivemesh_word"] - masks["d_word"]) == 0)
        & ((events["originalTransaction"] - masks["d_owid"]) == 0)
        & ((events["bucket"] - masks["d_bucket"]) == 0)
        & ((events[PARTITION_INDEX] - masks["d_p"]) == 0)
    )
    live = F.col("d_mask").isNull() | (F.expr("shiftright(d_mask, cast(rowId & 63 as int)) & 1") == 0)
    return events.join(masks, cond, "left").filter(live).select(*columns)


CASE_PARTITIONS_MAX = 32  # up to this many partitions values come from a CASE, beyond from a join


def _with_partitions(
    df: DataFrame, locations: Sequence[LocationFiles], partition_cols: Sequence[tuple[str, str]]
) -> DataFrame:
    """Replace the partition index column by the partition columns' values (typed): literals for
    one location, a CASE on the index for a few, a broadcast join with a small table of values for
    many."""
    names = [name for name, _ in partition_cols]
    data_cols = [c for c in df.columns if c != PARTITION_INDEX and c not in names]

    def value(loc: LocationFiles, i: int) -> str | None:
        """``loc``'s ``i``-th partition value as the metastore stores it; None for Hive's default."""
        v = loc.partition_values[i]
        return None if v == "__HIVE_DEFAULT_PARTITION__" else v

    if len(locations) > CASE_PARTITIONS_MAX:
        spark = df.sparkSession
        rows = [(pindex, *(value(loc, i) for i in range(len(names)))) for pindex, loc in enumerate(locations)]
        schema = StructType(
            [
                StructField(PARTITION_INDEX, IntegerType()),
                *(StructField(f"__v{i}", StringType()) for i in range(len(names))),
            ]
        )
        values = spark.createDataFrame(rows, schema).select(
            PARTITION_INDEX,
            *(F.col(f"__v{i}").cast(spark_type(t)).alias(n) for i, (n, t) in enumerate(partition_cols)),
        )
        return df.join(F.broadcast(values), PARTITION_INDEX).select(*data_cols, *names)
    if len(locations) == 1:  # every row comes from that location: its values as literals
        return df.select(*data_cols, *_partition_literals(partition_cols, locations[0].partition_values))
    columns = []
    for i, (name, hive_type) in enumerate(partition_cols):
        expr = None
        for pindex, loc in enumerate(locations):
            lit = F.lit(value(loc, i))
            cond = F.col(PARTITION_INDEX) == pindex
            expr = F.when(cond, lit) if expr is None else expr.when(cond, lit)
        col = expr if expr is not None else F.lit(None)
        columns.append(col.cast(spark_type(hive_type)).alias(name))
    return df.select(*data_cols, *columns)


def _insert_only_dataframe(
    spark: SparkSession,
    locations: Sequence[LocationFiles],
    layout: TableLayout,
    partition_cols: Sequence[tuple[str, str]],
) -> DataFrame:
    row = row_struct(layout.columns)
    frames = []
    for loc in locations:
        paths = [_uri(loc.location, f.path) for f in loc.files.data_files]
        if not paths:
            continue
        reader = spark.read.schema(row)
        if layout.file_format == "orc":
            df = reader.orc(paths)
        elif layout.file_format == "parquet":
            df = reader.parquet(*paths)  # varargs: a list argument fails in the JVM
        elif layout.file_format == "text":
            df = (
                reader.option("sep", layout.field_delimiter)
                .option("nullValue", HIVE_TEXT_NULL)
                .option("quote", "")
                .csv(paths)
            )
        else:
            raise ValueError(
                f"unsupported insert-only file format {layout.file_format!r} (orc, parquet, text)"
            )
        frames.append(
            df.select(*row.fieldNames(), *_partition_literals(partition_cols, loc.partition_values))
        )
    if not frames:
        schema = StructType([*row.fields, *[StructField(n, spark_type(t)) for n, t in partition_cols]])
        return spark.createDataFrame([], schema)
    return _union(frames)
