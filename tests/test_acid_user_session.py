"""ACID reads on a SparkSession a user built themselves, whose Python workers lack pyarrow/hivemesh.

Before the fix, ``read_acid`` read original (pre-ACID) files and streaming files cut at their
``_flush_length`` with pyarrow inside ``mapInArrow``, so on such a session it failed at the first
action with "An exception was thrown from the Python worker". Now original files are read by
Spark's ORC reader (row ids synthesized with Spark functions) and streaming files on the driver,
so no Python worker runs; the executor fallback for large streaming files fails on the driver,
before any job, with a message naming the interpreter and what to set.

How the "user session" is made: there is one SparkContext per JVM and the suite shares one
(``tests/spark_fixtures.py``). PySpark fixes the workers' interpreter, ``SparkContext.pythonExec``,
when the context is created, from ``$PYSPARK_PYTHON`` (default ``python3``; ``spark.pyspark.python``
counts only under spark-submit). A user session without ``hivemesh.spark.session`` therefore runs
whatever ``python3`` is found. The ``bare_workers`` fixture sets ``sc.pythonExec`` (and
``$PYSPARK_PYTHON``, which hivemesh consults) to a fresh venv without packages for the duration of
a test and restores both afterwards.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as po
import pytest

from hivemesh.acid.arrow_reader import TableLayout, read_acid_location
from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import parse_flush_lengths
from hivemesh.acid.streaming import StreamingConnection
from hivemesh.acid.tables import create_transactional_table
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid import AcidSession, read_acid
from hivemesh.spark.acid_reader import STREAMING_DRIVER_MAX_BYTES_CONF, PythonWorkersError
from hivemesh.spark.jvm_reader import JVM_READER_CONF
from hivemesh.storage import resolve_location
from tests.conftest import shared_dir

pytestmark = pytest.mark.spark

FIXTURES = shared_dir() / "fixtures" / "hive-acid"
MAX = "9223372036854775807"
B0, B1, B2 = 536870912, 536936448, 537001984  # BucketCodec V1 of buckets 0, 1, 2 (statement 0)
DUMMY_COLS = (("id", "int"), ("data", "string"), ("comment", "string"))


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python interpreter that cannot import pyarrow (a venv with no packages)."""
    venv = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import pyarrow"], capture_output=True, check=False)
    assert probe.returncode != 0, "the throwaway venv must not see pyarrow"
    return python


@pytest.fixture()
def bare_workers(spark: Any, bare_python: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The shared session with its Python workers switched to ``bare_python`` (restored after)."""
    sc = spark.sparkContext
    saved = sc.pythonExec
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)
    sc.pythonExec = bare_python
    try:
        yield bare_python
    finally:
        sc.pythonExec = saved


def spark_rows(df: Any) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_python_workers_really_fail(spark: Any, bare_workers: str) -> None:
    """The setup is real: any job that needs a Python worker fails under this interpreter."""
    with pytest.raises(Exception, match="(?i)python"):
        spark.range(3).mapInArrow(lambda batches: batches, "id long").collect()


# --- original files ------------------------------------------------------------------------------

DUMMY_ROWS = [  # (bucket property, synthesized rowId, id): per bucket, files in name order
    (B0, 0, 0), (B0, 1, 1), (B0, 2, 3), (B0, 3, 4),  # 000000_0
    (B1, 0, 5), (B1, 1, 6), (B1, 2, 7), (B1, 3, 8),  # 000001_0
    (B2, 0, 9), (B2, 1, 10), (B2, 2, 11), (B2, 3, 12),  # 000002_0
    (B2, 4, 13), (B2, 5, 14), (B2, 6, 15), (B2, 7, 16),  # 000002_0_copy_1
    (B2, 8, 17), (B2, 9, 18), (B2, 10, 19), (B2, 11, 20),  # 000002_0_copy_2
]  # fmt: skip


@pytest.mark.parametrize(
    ("write_ids", "deleted"), [(f"d.t:10000001:{MAX}::", True), (f"d.t:1:{MAX}::", False)]
)
def test_hive_original_files(
    spark: Any, bare_workers: str, tmp_path: Path, write_ids: str, deleted: bool
) -> None:
    """Hive's converted table (5 original files over 3 buckets, copies, one delete event on an
    original row) in a directory whose name needs URL encoding: exact row ids, same rows as the
    Spark-free reader, no Python worker."""
    location = tmp_path / "a dir+with %chars" / "t"
    src = FIXTURES / "dummy_id_data_orc"
    for p in sorted(src.iterdir()):
        (location / p.name).parent.mkdir(parents=True, exist_ok=True)
        (location / p.name).symlink_to(p)
    df = read_acid(
        spark, path=str(location), valid_write_ids=write_ids, schema=list(DUMMY_COLS), with_row_ids=True
    )
    rows = spark_rows(df)
    expected = [r for r in DUMMY_ROWS if not (deleted and r[:2] == (B0, 2))]
    assert sorted((r[1], r[2], r[3]) for r in rows) == sorted(expected)
    assert {r[0] for r in rows} == {0}
    assert all(r[4] == f"test{r[3]}" for r in rows)
    normal = read_acid_location(str(location), write_ids, TableLayout(DUMMY_COLS), with_row_ids=True)
    assert rows == arrow_rows(normal)
    plain = spark_rows(
        read_acid(spark, path=str(location), valid_write_ids=write_ids, schema=list(DUMMY_COLS))
    )
    assert plain == sorted(r[3:] for r in rows)


BIG_COLS = (("id", "bigint"), ("s", "string"))


def _original(path: Path, first: int, n: int, names: tuple[str, str] = ("id", "s")) -> None:
    ids = list(range(first, first + n))
    table = pa.table({names[0]: ids, names[1]: [f"v{i}-{i * 7919 % 1009}" for i in ids]})
    po.write_table(table, str(path), stripe_size=32 * 1024, compression="uncompressed")


def test_original_files_split_across_tasks(spark: Any, bare_workers: str, tmp_path: Path) -> None:
    """Original files large enough for Spark to split into several tasks, a copy in the same bucket
    written with Hive-1 style ``_colN`` names, and delete events on both buckets: row ids are
    positions in the bucket (not ``monotonically_increasing_id``), deletes hit exactly their rows."""
    location = tmp_path / "t"
    location.mkdir()
    _original(location / "000000_0", 0, 60_000)
    _original(location / "000000_0_copy_1", 60_000, 25_000, names=("_col0", "_col1"))
    _original(location / "000001_0", 100_000, 15_000)
    gone = {(B0, 0), (B0, 59_999), (B0, 60_000), (B0, 84_999), (B1, 7)}
    for bucket_id, bucket in ((0, B0), (1, B1)):
        keys = sorted(r for b, r in gone if b == bucket)
        write_bucket_file(
            str(location / "delete_delta_0000001_0000001_0000"),
            BIG_COLS,
            bucket_id,
            0,
            1,
            pa.table(
                {
                    "originalTransaction": [0] * len(keys),
                    "bucket": pa.array([bucket] * len(keys), pa.int32()),
                    "rowId": keys,
                }
            ),
            delete=True,
        )
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(64 * 1024))
    try:
        blocks = spark.read.orc(str(location / "000000_0")).select("_metadata.file_block_start").distinct()
        assert blocks.count() > 2  # the file really is read by several tasks
        expected_all = [(0, B0, i, i, f"v{i}-{i * 7919 % 1009}") for i in range(85_000)] + [
            (0, B1, i, 100_000 + i, f"v{100_000 + i}-{(100_000 + i) * 7919 % 1009}") for i in range(15_000)
        ]
        for write_ids, removed in ((f"d.t:1:{MAX}::", gone), (f"d.t:0:{MAX}::", set())):
            df = read_acid(
                spark, path=str(location), valid_write_ids=write_ids, schema=list(BIG_COLS), with_row_ids=True
            )
            rows = spark_rows(df)
            expected = sorted(r for r in expected_all if (r[1], r[2]) not in removed)
            assert len(rows) == 100_000 - len(removed)
            assert rows == expected
            normal = read_acid_location(str(location), write_ids, TableLayout(BIG_COLS), with_row_ids=True)
            assert rows == arrow_rows(normal)
            # without row ids (the window is skipped when no delete delta is read)
            plain = read_acid(spark, path=str(location), valid_write_ids=write_ids, schema=list(BIG_COLS))
            assert plain.count() == len(expected)
            assert sorted(r.id for r in plain.select("id").collect()) == sorted(r[3] for r in expected)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


# --- streaming files -----------------------------------------------------------------------------

COLS = (("a", "string"), ("b", "int"))


def _rows(txn: int, n: int, width: int = 0) -> list[tuple[str, int]]:
    return [(f"t{txn}-{j}-{'x' * width}{j * 7919 % 100_003}", txn * 100_000 + j) for j in range(n)]


def test_streaming_file_read_without_python_workers(
    spark: Any, bare_workers: str, client: MetastoreClient, db: str
) -> None:
    """A Hive-Streaming batch still open: two committed txns (flushed), a third whose rows reached
    the file beyond the last flushed footer. The table reads (committed rows only, exact row ids)
    with no Python worker; forcing the executor fallback fails in ``read`` itself, before any job,
    with the interpreter's path and what to set."""
    create_transactional_table(client, db, "s", list(COLS))
    full = f"{db}.s"
    conn = StreamingConnection(
        client, db, "s", transactions_per_batch=3, stripe_size=64 * 1024, compression="none"
    )
    try:
        batch = conn.fetch_transaction_batch()
        committed: list[tuple] = []
        for txn, n in ((1, 3), (2, 2)):
            batch.begin_next_transaction()
            batch.write(_rows(txn, n))
            batch.commit()
            committed += _rows(txn, n)
        batch.begin_next_transaction()
        batch.write(_rows(3, 500, width=60))  # open txn: stripes past the flushed footer
        table_dir = Path(resolve_location(client.raw.get_table(db, "s").sd.location)[1])
        data_file = table_dir / "delta_0000001_0000003" / "bucket_00000"
        side = table_dir / "delta_0000001_0000003" / "bucket_00000_flush_length"
        flushed = parse_flush_lengths(side.read_bytes())[-1]
        assert data_file.stat().st_size > flushed

        with AcidSession(spark) as acid:
            df = acid.read(full, with_row_ids=True)
            rows = spark_rows(df)
            write_ids = acid.snapshot(full).write_ids
        # read in the JVM, cut at the flushed length (hivemesh.spark.jvm_reader)
        assert "hivemesh-acid-orc" in df._jdf.queryExecution().executedPlan().toString()
        assert sorted(r[3:] for r in rows) == sorted(committed)
        assert sorted(r[:3] for r in rows) == [(1, B0, 0), (1, B0, 1), (1, B0, 2), (2, B0, 0), (2, B0, 1)]
        normal = read_acid_location(str(table_dir), write_ids, TableLayout(COLS), with_row_ids=True)
        assert rows == arrow_rows(normal)

        sc = spark.sparkContext
        # the Spark-only path (no javac): too large for the driver, so the executors' pyarrow
        spark.conf.set(JVM_READER_CONF, "false")
        spark.conf.set(STREAMING_DRIVER_MAX_BYTES_CONF, "0")
        sc.setJobGroup("hivemesh-user-session", "must stay empty")
        try:
            with AcidSession(spark) as acid, pytest.raises(PythonWorkersError) as err:
                acid.read(full)
            assert sc.statusTracker().getJobIdsForGroup("hivemesh-user-session") == []
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            spark.conf.unset(STREAMING_DRIVER_MAX_BYTES_CONF)
            spark.conf.unset(JVM_READER_CONF)
        message = str(err.value)
        assert bare_workers in message
        assert "pyarrow" in message and "PYSPARK_PYTHON" in message and "hivemesh.spark.session" in message
        batch.commit()
    finally:
        conn.close()
    with AcidSession(spark) as acid:  # the batch closed: a plain delta again
        assert len(acid.read(full).collect()) == len(committed) + 500
