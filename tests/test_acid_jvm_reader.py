"""The JVM ACID reader (``hivemesh.spark.jvm_reader``, ``AcidOrcSource.java``): ``count()`` answered
from ORC footers with the same numbers as the Spark-only path, reads that decode only the columns
used (no ACID column when none is used), delete deltas and open write ids still applied, ACID v1
delete events in a data file refused by name, the Spark-only path when it is switched off, and the
jar compiled once per source and Spark version. Streaming files cut at ``_flush_length`` read in
the JVM are covered by ``test_acid_user_session`` and ``test_acid_stream_read``."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import delta_dir_name, encode_bucket_property
from hivemesh.spark import jvm_reader
from hivemesh.spark.acid import read_acid
from hivemesh.spark.jvm_reader import JVM_READER_CONF

pytestmark = pytest.mark.spark

COLUMNS = [("id", "bigint"), ("note", "string"), ("amount", "decimal(10,2)")]
MAX = "9223372036854775807"


def _rows(w: int, b: int, n: int) -> pa.Table:
    ids = [w * 10_000 + b * 1000 + r for r in range(n)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "note": [f"n{i}" for i in ids],
            "amount": pa.array([None if i % 7 == 0 else i / 100 for i in ids]).cast(pa.decimal128(10, 2)),
        }
    )


def _table(root: Path, deletes: bool = False) -> Path:
    """Write ids 1 and 2, buckets 0 and 1, 200 rows each; with ``deletes`` write id 3 deletes row
    ids 0..49 of write id 1, bucket 1."""
    for w in (1, 2):
        for b in (0, 1):
            write_bucket_file(str(root / delta_dir_name(w, w, 0)), COLUMNS, b, 0, w, _rows(w, b, 200))
    if deletes:
        keys = pa.table(
            {
                "originalTransaction": [1] * 50,
                "bucket": pa.array([encode_bucket_property(1, 0)] * 50, pa.int32()),
                "rowId": list(range(50)),
            }
        )
        write_bucket_file(
            str(root / delta_dir_name(3, 3, 0, delete=True)), COLUMNS, 1, 0, 3, keys, delete=True
        )
    return root


def _read(spark: SparkSession, root: Path, write_ids: str, **kw: object) -> DataFrame:
    return read_acid(spark, path=str(root), valid_write_ids=write_ids, schema=COLUMNS, **kw)


def _plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _count_plan(df: DataFrame) -> str:
    return _plan(df.groupBy().count())


@pytest.fixture()
def spark_only(spark: SparkSession) -> Iterator[None]:
    spark.conf.set(JVM_READER_CONF, "false")
    try:
        yield
    finally:
        spark.conf.unset(JVM_READER_CONF)


def test_count_from_footers_and_pruned_columns(spark: SparkSession, tmp_path: Path) -> None:
    root = _table(tmp_path / "t")
    df = _read(spark, root, f"d.t:2:{MAX}::")
    assert df.count() == 800
    plan = _count_plan(df)
    assert "hivemesh-acid-orc [count(*) from footers]" in plan
    # a read of one column decodes that field only: no ACID column, no other row field
    one = df.select("id")
    scan = [line for line in _plan(one).splitlines() if "hivemesh-acid-orc" in line]
    assert scan and all(
        "operation" not in s and "note" not in s and "row:struct<id:bigint>" in s for s in scan
    )
    assert sorted(r.id for r in one.collect()) == sorted(
        w * 10_000 + b * 1000 + r for w in (1, 2) for b in (0, 1) for r in range(200)
    )
    # the same rows, ROW__IDs included, as the Spark-only path
    jvm_rows = sorted(tuple(r) for r in _read(spark, root, f"d.t:2:{MAX}::", with_row_ids=True).collect())
    spark.conf.set(JVM_READER_CONF, "false")
    try:
        fallback = _read(spark, root, f"d.t:2:{MAX}::", with_row_ids=True)
        assert "hivemesh-acid-orc" not in _plan(fallback)
        assert jvm_rows == sorted(tuple(r) for r in fallback.collect())
        assert fallback.count() == 800
    finally:
        spark.conf.unset(JVM_READER_CONF)
    assert len(jvm_rows) == 800 and any(r[5] is None for r in jvm_rows)  # null decimals kept
    # no column at all, without the footer count: batches of row counts only
    assert df.select(F.lit(1).alias("x")).distinct().collect() == [(1,)]
    assert df.filter(F.rand(7) >= 0).count() == 800


def test_snapshots_that_need_row_filters_do_not_count_from_footers(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Deletes and a snapshot with write id 2 open both need the rows: the counts are exact and
    the plan does not take the footer count."""
    root = _table(tmp_path / "t", deletes=True)
    deleted = _read(spark, root, f"d.t:3:{MAX}::")
    assert deleted.count() == 750
    assert "from footers" not in _count_plan(deleted)
    assert 1_1000 not in {r.id for r in deleted.collect()} and 1_1050 in {r.id for r in deleted.collect()}
    # the footer count is right when whole directories drop out of the snapshot
    two_open = _read(spark, root, "d.t:2:2:2:")
    assert two_open.count() == 400 and "from footers" in _count_plan(two_open)
    # a streaming directory spanning write ids 1..2 with 2 open needs the write id filter
    stream = tmp_path / "s"
    for w in (1, 2):
        write_bucket_file(str(stream / delta_dir_name(1, 2)), COLUMNS, w - 1, 0, w, _rows(w, w - 1, 30))
    partly = _read(spark, stream, "d.t:2:2:2:")
    assert partly.count() == 30 and "from footers" not in _count_plan(partly)
    assert {r.id // 10_000 for r in partly.collect()} == {1}
    assert _read(spark, stream, f"d.t:2:{MAX}::").count() == 60


def test_acid_v1_delete_events_in_a_data_file_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    """Hive ACID v1 (before split-update) kept delete events in delta directories; reading them as
    inserts would return deleted rows, so both the footer count and a row read fail, naming the
    file."""
    root = _table(tmp_path / "t")
    keys = pa.table(
        {
            "originalTransaction": [1],
            "bucket": pa.array([encode_bucket_property(0, 0)], pa.int32()),
            "rowId": [0],
        }
    )
    write_bucket_file(str(root / delta_dir_name(3, 3, 0)), COLUMNS, 0, 0, 3, keys, delete=True)
    df = _read(spark, root, f"d.t:3:{MAX}::")
    for action in (df.count, df.collect):
        with pytest.raises(Exception, match="ACID v1") as err:
            action()
        assert "delta_0000003_0000003_0000/bucket_00000" in str(err.value)


def test_empty_files_and_reads_from_other_threads(spark: SparkSession, tmp_path: Path) -> None:
    """A 0-byte bucket file (Hive writes them for buckets without rows) reads as no rows; a read
    from another Python thread (its own JVM thread, where ADD JAR did not run) finds the source."""
    root = _table(tmp_path / "t")
    (root / delta_dir_name(2, 2, 0) / "bucket_00002").write_bytes(b"")
    df = _read(spark, root, f"d.t:2:{MAX}::")
    assert df.count() == 800 and len(df.select("id").collect()) == 800
    out: list[object] = []

    def read() -> None:
        try:
            out.append(_read(spark, root, f"d.t:2:{MAX}::").select("note").count())
        except Exception as e:  # noqa: BLE001 - reported below
            out.append(e)

    worker = threading.Thread(target=read)
    worker.start()
    worker.join(timeout=300)
    assert out == [800]


def test_switched_off_reads_with_spark_only(spark: SparkSession, tmp_path: Path, spark_only: None) -> None:
    root = _table(tmp_path / "t", deletes=True)
    df = _read(spark, root, f"d.t:3:{MAX}::")
    assert "hivemesh-acid-orc" not in _plan(df)
    assert df.count() == 750


def test_jar_is_compiled_once_per_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVEMESH_JVM_CACHE", str(tmp_path / "cache"))
    jar = jvm_reader.build_jar()
    assert jar.parent == tmp_path / "cache" / "hivemesh-spark" and jar.stat().st_size > 1000
    import zipfile

    with zipfile.ZipFile(jar) as z:
        assert "io/hivemesh/spark/AcidOrcSource.class" in z.namelist()
    stamp = jar.stat().st_mtime_ns
    assert jvm_reader.build_jar() == jar and jar.stat().st_mtime_ns == stamp  # cached
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no temporary file left
    monkeypatch.setattr(jvm_reader, "_javac", lambda: None)
    os.remove(jar)
    with pytest.raises(RuntimeError, match="javac not found"):
        jvm_reader.build_jar()
