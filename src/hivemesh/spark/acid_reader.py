"""Build the DataFrame of a Hive ACID table (or directory) under a snapshot whose files are chosen.

Scan path, chosen by measurement (``bench/acid_read.py``, README "Hive ACID"): Spark's own
vectorized ORC reader, kept working on ACID files by always reading all six ACID columns.

Why: ORC's ``SchemaEvolution`` recognizes an ACID file by its six top-level column names; when the
schema Spark asks for is not ACID-shaped (Spark pruned columns: ``count()``, selecting a few
fields) ORC wraps it in the ACID event schema again and the read fails with
ArrayIndexOutOfBounds/ClassCastException (hive-acid.md, last section). Asking for all six columns
(``row`` pruned to the fields used) keeps the shapes equal. The scan filter below references every
ACID column plus the cheapest ``row`` field, so Spark's column pruning can never drop one; its
conditions are true for every insert event Hive writes, so it costs only their decoding.
``spark.sql.orc.impl=hive`` is row-based, measured 2.5-4x slower on the lineitem aggregate and
10-20x on ``count()`` (``bench/acid_read.py``), and needs ORC filter pushdown off on ACID files
(ArrayIndexOutOfBounds in ``OrcInputFormat.getSargColumnNames``); pyarrow in a Python data source
cannot prune columns.

Files Spark's reader cannot take are read with pyarrow on the executors (``mapInArrow``):
original (pre-ACID) files, whose row ids are synthesized, and streaming files that may only be read
up to their ``_flush_length``. Deleted rows are removed with a left anti join on
``(rowId, originalTransaction, bucket, partition)``, broadcast when the delete events are small.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
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
)

from hivemesh.acid.arrow_reader import HIVE_TEXT_NULL, TableLayout, flush_length, original_row_id_starts
from hivemesh.acid.selection import DataFile, SnapshotFiles
from hivemesh.acid.snapshots import ValidWriteIdList

PARTITION_INDEX = "__hivemesh_partition"  # joins delete events to rows of the same location
BROADCAST_DELETES_BYTES = 256 * 1024 * 1024  # delete files up to this size are broadcast


def spark_type(hive_type: str) -> DataType:
    """The Spark type of a Hive column type (``char``/``varchar`` read as strings)."""
    import re

    from pyspark.sql.types import _parse_datatype_string

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
        for i, t in enumerate(_CHEAP):
            if isinstance(f.dataType, t):
                return i
        return 100 if not isinstance(f.dataType, ArrayType | MapType | StructType) else 200

    return min(row.fields, key=cost).name


def _anchor(row: StructType) -> Column:
    """True for every insert event; references all six ACID columns so none is pruned."""
    field = F.col("row").getField(_cheapest_field(row))
    return (
        (F.col("operation") != 2)
        & F.col("originalTransaction").isNotNull()
        & F.col("bucket").isNotNull()
        & F.col("rowId").isNotNull()
        & F.col("currentTransaction").isNotNull()
        & (field.isNull() | field.isNotNull())
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
    """The ``mapInArrow`` function that reads original and flushed-length files on executors."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from hivemesh.acid.arrow_reader import acid_events, arrow_row_type, original_events

        out_schema = to_arrow_schema(
            StructType.fromJson(__import__("json").loads(out_schema_json)),
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


def _use_configured_python(spark: SparkSession) -> None:
    """Make the ``mapInArrow`` workers run ``spark.pyspark.python`` (set by
    :func:`hivemesh.spark.session` to an interpreter with pyarrow and hivemesh).

    A driver started from Python (not ``spark-submit``) takes the workers' interpreter from
    ``$PYSPARK_PYTHON`` only (``SparkContext.pythonExec``, default ``python3``) and ignores the
    setting, so without this the workers may run a ``python3`` that has neither. An explicit
    ``$PYSPARK_PYTHON`` wins."""
    import os

    sc = spark.sparkContext
    if os.environ.get("PYSPARK_PYTHON"):
        return
    configured = sc.getConf().get("spark.pyspark.python")
    if configured and getattr(sc, "pythonExec", None) != configured:
        sc.pythonExec = configured


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

    ``layout``: the table's columns and kind (full ACID or insert-only, file format). Nothing is
    read here: Spark reads when the DataFrame is evaluated."""
    if layout.insert_only:
        if with_row_ids:
            raise ValueError("insert-only tables have no row ids (ROW__ID)")
        return _insert_only_dataframe(spark, locations, layout, partition_cols)
    columns = layout.columns
    row = row_struct(columns)
    file_schema = acid_file_schema(columns)
    inserts: list[DataFrame] = []
    deletes: list[DataFrame] = []
    arrow_tasks: list[dict[str, Any]] = []
    delete_bytes = 0
    needs_filter = False
    for pindex, loc in enumerate(locations):
        plain: list[str] = []
        starts = original_row_id_starts(loc.location, loc.files.original_files)
        for f, first_row in zip(loc.files.original_files, starts, strict=True):
            bucket = f.bucket_id if f.bucket_id is not None else 0
            path = _uri(loc.location, f.path)
            arrow_tasks.append(
                {
                    "kind": "original",
                    "path": path,
                    "length": None,
                    "bucket_id": bucket,
                    "first_row_id": first_row,
                    "pindex": pindex,
                }
            )
        for f in loc.files.data_files:
            if f.directory is None:  # original files are also listed here; read above
                continue
            needs_filter = needs_filter or f.write_id_filter
            length = flush_length(loc.location, f)
            if length is not None:
                arrow_tasks.append(
                    {
                        "kind": "acid",
                        "path": _uri(loc.location, f.path),
                        "length": length,
                        "bucket_id": 0,
                        "first_row_id": 0,
                        "pindex": pindex,
                    }
                )
            else:
                plain.append(_uri(loc.location, f.path))
        if plain:
            df = spark.read.schema(file_schema).orc(plain).filter(_anchor(row))
            inserts.append(df.withColumn(PARTITION_INDEX, F.lit(pindex)))
        delete_paths = [_uri(loc.location, f.path) for f in loc.files.delete_files]
        delete_bytes += sum(f.size for f in loc.files.delete_files)
        if delete_paths:
            dd = spark.read.schema(file_schema).orc(delete_paths)
            dd = dd.filter(
                (F.col("operation") == 2)
                & F.col("row").isNull()
                & valid_write_id_column(F.col("currentTransaction"), write_ids)
            )
            deletes.append(
                dd.select(
                    F.col("rowId").alias("d_rowId"),
                    F.col("originalTransaction").alias("d_owid"),
                    F.col("bucket").alias("d_bucket"),
                    F.lit(pindex).alias("d_p"),
                )
            )
    if arrow_tasks:
        _use_configured_python(spark)
        out_schema = _arrow_events_schema(columns)
        tasks = spark.createDataFrame(
            arrow_tasks, "kind string, path string, length long, bucket_id int, first_row_id long, pindex int"
        ).repartition(min(len(arrow_tasks), spark.sparkContext.defaultParallelism))
        arrow_df = tasks.mapInArrow(_arrow_tasks_reader(tuple(columns), out_schema.json()), out_schema)
        inserts.append(arrow_df.filter(F.col("operation") != 2))
    if not inserts:
        empty = spark.createDataFrame(
            [], StructType([*file_schema.fields, StructField(PARTITION_INDEX, IntegerType())])
        )
        inserts.append(empty)
    events = _union(inserts)
    if needs_filter:
        events = events.filter(valid_write_id_column(F.col("currentTransaction"), write_ids))
    if deletes:
        dels = _union(deletes)  # duplicates do not change a left anti join
        if delete_bytes <= BROADCAST_DELETES_BYTES:
            dels = F.broadcast(dels)
        # One long join key (Spark builds a LongHashedRelation, measured 25% faster than a
        # 4-column key on lineitem); the exact ROW__ID comparison is written as differences so
        # Spark keeps it as the join condition instead of adding it to the key.
        events = events.withColumn(
            "__k", _packed_key("rowId", "originalTransaction", "bucket", PARTITION_INDEX)
        )
        dels = dels.withColumn("d_k", _packed_key("d_rowId", "d_owid", "d_bucket", "d_p"))
        cond = (
            (events["__k"] == dels["d_k"])
            & ((events["rowId"] - dels["d_rowId"]) == 0)
            & ((events["originalTransaction"] - dels["d_owid"]) == 0)
            & ((events["bucket"] - dels["d_bucket"]) == 0)
            & ((events[PARTITION_INDEX] - dels["d_p"]) == 0)
        )
        events = events.join(dels, cond, "left_anti")
    out = [F.col("row").getField(name).alias(name) for name, _ in columns]
    if with_row_ids:
        out = [F.col("originalTransaction"), F.col("bucket"), F.col("rowId"), *out]
    if partition_cols:
        return _with_partitions(events.select(*out, PARTITION_INDEX), locations, partition_cols)
    return events.select(*out)


CASE_PARTITIONS_MAX = 32  # up to this many partitions values come from a CASE, beyond from a join


def _with_partitions(
    df: DataFrame, locations: Sequence[LocationFiles], partition_cols: Sequence[tuple[str, str]]
) -> DataFrame:
    """Replace the partition index column by the partition columns' values (typed): a CASE on the
    index for a few partitions, a broadcast join with a small table of values for many."""
    names = [name for name, _ in partition_cols]
    data_cols = [c for c in df.columns if c != PARTITION_INDEX and c not in names]

    def value(loc: LocationFiles, i: int) -> str | None:
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


def data_file_uris(loc: LocationFiles) -> list[str]:
    """URIs of every data file ``loc`` reads (for logs and tests)."""
    files: list[DataFile] = list(loc.files.data_files)
    return [_uri(loc.location, f.path) for f in files]
