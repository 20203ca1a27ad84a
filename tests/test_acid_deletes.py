"""Delete events applied by Spark reads (``hivemesh.spark.acid_reader._without_deleted``): the
64-row-id masks give exactly the rows Hive keeps, at word boundaries, across write ids and
buckets, both broadcast and through Spark's own (sort-merge) join when the delete deltas are above
``spark.hivemesh.acid.broadcastDeletesBytes``. Deletes in partitions and on original files are
covered by ``test_acid_roundtrip``/``test_acid_dml`` and the Hive-written fixtures of
``test_acid_fixtures``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import delta_dir_name, encode_bucket_property
from hivemesh.spark.acid import read_acid
from hivemesh.spark.acid_reader import BROADCAST_DELETES_BYTES_CONF

COLUMNS = [("id", "bigint"), ("note", "string")]
ROWS = 300  # per bucket file: row ids 0..299 span five 64-row words
#: row ids deleted in every (write id, bucket): word edges, a whole word, and the last row
DELETED = sorted({0, 1, 62, 63, 64, 65, 127, 128, *range(192, 256), 299})


def _table(root: Path) -> Path:
    """Write ids 1 and 2, buckets 0 and 1, ``ROWS`` rows each (id = write id * 10000 + bucket *
    1000 + row id); write id 3 deletes ``DELETED`` of write id 1's files and of bucket 1 of write
    id 2 (one delete file per bucket)."""
    for w in (1, 2):
        for b in (0, 1):
            ids = [w * 10_000 + b * 1000 + r for r in range(ROWS)]
            write_bucket_file(
                str(root / delta_dir_name(w, w, 0)),
                COLUMNS,
                b,
                0,
                w,
                pa.table({"id": pa.array(ids, pa.int64()), "note": [f"n{i}" for i in ids]}),
            )
    for b in (0, 1):
        keys = [(w, encode_bucket_property(b, 0), r) for w in (1, 2) for r in DELETED if w == 1 or b == 1]
        write_bucket_file(
            str(root / delta_dir_name(3, 3, 0, delete=True)),
            COLUMNS,
            b,
            0,
            3,
            pa.table(
                {
                    "originalTransaction": [k[0] for k in keys],
                    "bucket": pa.array([k[1] for k in keys], pa.int32()),
                    "rowId": [k[2] for k in keys],
                }
            ),
            delete=True,
        )
    return root


def _expected() -> list[int]:
    out = []
    for w in (1, 2):
        for b in (0, 1):
            deleted = set(DELETED) if (w == 1 or b == 1) else set()
            out += [w * 10_000 + b * 1000 + r for r in range(ROWS) if r not in deleted]
    return sorted(out)


@pytest.fixture()
def no_broadcast(spark: SparkSession) -> Iterator[None]:
    """Delete deltas count as too large to broadcast, and Spark may not broadcast on its own."""
    saved = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set(BROADCAST_DELETES_BYTES_CONF, "0")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        yield
    finally:
        spark.conf.unset(BROADCAST_DELETES_BYTES_CONF)
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", saved)


def _read(spark: SparkSession, root: Path, write_ids: str = "d.t:3:9223372036854775807::"):
    return read_acid(spark, path=str(root), valid_write_ids=write_ids, schema=COLUMNS)


def test_deletes_broadcast(spark: SparkSession, tmp_path: Path) -> None:
    root = _table(tmp_path / "t")
    df = _read(spark, root)
    assert sorted(r.id for r in df.collect()) == _expected()
    assert df.count() == len(_expected())
    assert "BroadcastHashJoin" in df._jdf.queryExecution().executedPlan().toString()
    # a snapshot before the delete sees every row; one where write id 3 is open sees them too
    assert _read(spark, root, "d.t:2:9223372036854775807::").count() == 4 * ROWS
    assert _read(spark, root, "d.t:3:3:3:").count() == 4 * ROWS


def test_deletes_above_the_broadcast_limit_use_a_shuffle_join(
    spark: SparkSession, tmp_path: Path, no_broadcast: None
) -> None:
    """The path for delete deltas larger than the driver's memory: no broadcast anywhere, the
    same rows, and the ROW__IDs of the survivors are the ones that were not deleted."""
    root = _table(tmp_path / "t")
    df = _read(spark, root)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Broadcast" not in plan and "SortMergeJoin" in plan
    assert sorted(r.id for r in df.collect()) == _expected()
    ids = read_acid(
        spark,
        path=str(root),
        valid_write_ids="d.t:3:9223372036854775807::",
        schema=COLUMNS,
        with_row_ids=True,
    )
    rows = ids.collect()
    assert all(r.rowId not in DELETED for r in rows if r.originalTransaction == 1)
    assert {r.rowId for r in rows if r.originalTransaction == 2 and r.id < 21_000} == set(range(ROWS))
