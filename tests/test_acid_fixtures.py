"""Real Hive-written ACID files (``shared/fixtures/hive-acid``) read through both readers.

Every fixture is read under several snapshots with the Spark reader
(``hivemesh.spark.acid.read_acid(spark, path=..., valid_write_ids=...)``) and with the Spark-free
``hivemesh.acid.arrow_reader.read_acid_location``; the two must return the same rows and both must
match the known result. Table directories are built in ``tmp_path`` from symlinks to the fixture
files (the fixtures are never copied into the repository). Snapshots are Hive
``ValidReaderWriteIdList`` strings ``db.t:<hwm>:<minOpen>:<open>:<aborted>``.

These reads use no metastore, so they run once, on the ``sqlite`` instance of the shared
``spark`` fixture (the session fixture is parametrized indirectly below).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pytest

from hivemesh.acid.arrow_reader import TableLayout, list_location, read_acid_location
from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import encode_bucket_property
from hivemesh.acid.orcfile import AcidOrcWriter
from hivemesh.acid.selection import select_files
from hivemesh.hive.txn_lists import ValidWriteIdList
from hivemesh.spark.acid import read_acid
from tests.conftest import shared_dir

FIXTURES = shared_dir() / "fixtures" / "hive-acid"
MAX = "9223372036854775807"
B0 = 536870912  # bucket 0, statement 0 (BucketCodec V1)
B1 = 536936448  # bucket 1
B2 = 537001984  # bucket 2
KEYS = ("originalTransaction", "bucket", "rowId")

NATION_COLS = (("n_nationkey", "int"), ("n_name", "string"), ("n_regionkey", "int"), ("n_comment", "string"))
NATION_NAMES = [
    "ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY", "INDIA",
    "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO", "MOZAMBIQUE", "PERU", "CHINA",
    "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES",
]  # fmt: skip
DUMMY_COLS = (("id", "int"), ("data", "string"), ("comment", "string"))
ALLTYPES_COLS = (
    ("id", "int"), ("bool_col", "boolean"), ("tinyint_col", "tinyint"), ("smallint_col", "smallint"),
    ("int_col", "int"), ("bigint_col", "bigint"), ("float_col", "float"), ("double_col", "double"),
    ("date_string_col", "string"), ("string_col", "string"), ("timestamp_col", "timestamp"),
    ("year", "int"), ("month", "int"),
)  # fmt: skip

# Path reads need no metastore: run them on the sqlite instance of the shared Spark session only.
pytestmark = pytest.mark.spark


# --- helpers -------------------------------------------------------------------------------------


def table_dir(root: Path, links: dict[str, Path], name: str = "t") -> Path:
    """``root/name`` with a symlink per entry: relative path inside the table -> fixture path."""
    location = root / name
    for rel, target in links.items():
        link = location / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    location.mkdir(parents=True, exist_ok=True)
    return location


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):  # a Spark Row (struct)
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(_plain(v) for v in value.values())
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


def _arrow_for_compare(table: pa.Table) -> pa.Table:
    """Timestamps as microseconds since the epoch (what ``unix_micros`` gives on the Spark side)."""
    cols = []
    for field, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            col = pc.cast(pc.cast(col, pa.timestamp("us")), pa.int64())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def read_both(
    spark: Any,
    location: Path,
    write_ids: str,
    columns: tuple[tuple[str, str], ...],
    *,
    with_row_ids: bool = False,
    schema: Any = None,
) -> list[tuple]:
    """The snapshot's rows (sorted tuples) read by Spark and by the Spark-free reader, which must
    agree. ``schema`` is passed to ``read_acid`` (None: it takes the columns from the files)."""
    from pyspark.sql import functions as F

    df = read_acid(
        spark, path=str(location), valid_write_ids=write_ids, schema=schema, with_row_ids=with_row_ids
    )
    expected_names = [*(KEYS if with_row_ids else ()), *(n for n, _ in columns)]
    assert df.columns == expected_names
    types = dict(columns)
    df = df.select(*[F.unix_micros(c).alias(c) if types.get(c) == "timestamp" else c for c in df.columns])
    by_spark = sorted(tuple(_plain(v) for v in row) for row in df.collect())
    table = read_acid_location(str(location), write_ids, TableLayout(columns), with_row_ids=with_row_ids)
    assert table.column_names == expected_names
    by_arrow = sorted(tuple(_plain(v) for v in r.values()) for r in _arrow_for_compare(table).to_pylist())
    assert by_spark == by_arrow
    return by_spark


def nation_summary(spark: Any, location: Path, write_ids: str) -> dict[int, tuple[str, int, int, int]]:
    """Per nation key: (name, rows, min rowId, max rowId) of a snapshot of the 25k-row nation
    table, aggregated by Spark and by the Spark-free reader (must agree)."""
    from pyspark.sql import functions as F

    df = read_acid(
        spark, path=str(location), valid_write_ids=write_ids, schema=list(NATION_COLS), with_row_ids=True
    )
    agg = df.groupBy("n_nationkey", "n_name").agg(
        F.count("*").alias("n"),
        F.min("rowId").alias("lo"),
        F.max("rowId").alias("hi"),
        F.collect_set("originalTransaction").alias("owids"),
        F.collect_set("bucket").alias("buckets"),
    )
    collected = agg.collect()
    assert all(r.owids == [2] and r.buckets == [B0] for r in collected)
    by_spark = {r.n_nationkey: (r.n_name, r.n, r.lo, r.hi) for r in collected}
    table = read_acid_location(str(location), write_ids, TableLayout(NATION_COLS), with_row_ids=True)
    by_arrow: dict[int, tuple[str, int, int, int]] = {}
    grouped = table.group_by(["n_nationkey", "n_name"]).aggregate(
        [("rowId", "count"), ("rowId", "min"), ("rowId", "max")]
    )
    for r in grouped.to_pylist():
        by_arrow[r["n_nationkey"]] = (r["n_name"], r["rowId_count"], r["rowId_min"], r["rowId_max"])
    assert by_spark == by_arrow
    assert set(pc.unique(table["originalTransaction"]).to_pylist()) <= {2}
    assert set(pc.unique(table["bucket"]).to_pylist()) <= {B0}
    return by_spark


# --- nation file + delete deltas -----------------------------------------------------------------


@pytest.fixture()
def nation_table(tmp_path: Path) -> Path:
    deletes = FIXTURES / "nation_delete_deltas"
    return table_dir(
        tmp_path,
        {
            "delta_0000002_0000002_0000/bucket_00000": FIXTURES
            / "nationFile25kRowsSortedOnNationKey/bucket_00000",
            "delete_delta_0000003_0000003_0000": deletes / "delete_delta_0000003_0000003_0000",
            "delete_delta_0000004_0000004_0000": deletes / "delete_delta_0000004_0000004_0000",
        },
    )


def full_nation(without: tuple[int, ...] = ()) -> dict[int, tuple[str, int, int, int]]:
    """The expected summary: key k holds rowIds 1000k .. 1000k+999 (file sorted on the key)."""
    return {k: (NATION_NAMES[k], 1000, 1000 * k, 1000 * k + 999) for k in range(25) if k not in without}


@pytest.mark.parametrize(
    ("write_ids", "gone"),
    [
        (f"d.t:2:{MAX}::", ()),  # the deletes are above the high watermark
        (f"d.t:3:{MAX}::", (5,)),  # delete 3 only
        (f"d.t:4:{MAX}::", (5, 19)),  # both
        (f"d.t:4:{MAX}::3", (19,)),  # delete 3 aborted
        (f"d.t:4:{MAX}::4", (5,)),  # delete 4 aborted
        (f"d.t:4:{MAX}::3,4", ()),  # both aborted
        ("d.t:4:3:3:", (19,)),  # delete 3 still open
        ("d.t:4:4:4:", (5,)),  # delete 4 still open
        ("d.t:4:3:3,4:", ()),  # both open
    ],
)
def test_nation_with_delete_deltas(
    spark: Any, nation_table: Path, write_ids: str, gone: tuple[int, ...]
) -> None:
    summary = nation_summary(spark, nation_table, write_ids)
    assert summary == full_nation(gone)
    assert sum(v[1] for v in summary.values()) == 25_000 - 1000 * len(gone)


def test_nation_rows_in_full(spark: Any, nation_table: Path) -> None:
    """Every column of every row (and its ROW__ID) of the 23,000-row snapshot, Spark vs pyarrow,
    with the schema taken from the files."""
    rows = read_both(spark, nation_table, f"d.t:4:{MAX}::", NATION_COLS, with_row_ids=True)
    assert len(rows) == 23_000
    assert [r[:3] for r in rows] == [
        (2, B0, i) for i in range(25_000) if not 5000 <= i < 6000 and not 19000 <= i < 20000
    ]
    assert Counter(r[3] for r in rows) == {k: 1000 for k in range(25) if k not in (5, 19)}
    assert all(r[4] == NATION_NAMES[r[3]] for r in rows)


def test_nation_insert_not_visible(spark: Any, nation_table: Path) -> None:
    """The insert's write id 2 aborted, or above the high watermark: nothing at all."""
    for write_ids in (f"d.t:4:{MAX}::2", f"d.t:1:{MAX}::"):
        assert read_both(spark, nation_table, write_ids, NATION_COLS, schema=list(NATION_COLS)) == []


@pytest.mark.parametrize(
    ("write_ids", "gone"),
    [
        (f"d.t:4:{MAX}::", (5, 19)),
        (f"d.t:4:{MAX}::3", (19,)),  # the directory is read, but write 3's events are dropped
        ("d.t:4:4:4:", (5,)),  # write 4 still open
        (f"d.t:3:{MAX}::", (5,)),  # write 4 above the high watermark
    ],
)
def test_nation_delete_delta_spanning_two_write_ids(
    spark: Any, tmp_path: Path, write_ids: str, gone: tuple[int, ...]
) -> None:
    """The fixture's two delete deltas merged into one ``delete_delta_0000003_0000004`` (what
    minor compaction writes): events are kept by their own ``currentTransaction``."""
    location = table_dir(
        tmp_path,
        {
            "delta_0000002_0000002_0000/bucket_00000": FIXTURES
            / "nationFile25kRowsSortedOnNationKey/bucket_00000"
        },
    )
    with AcidOrcWriter(location / "delete_delta_0000003_0000004" / "bucket_00000", NATION_COLS) as w:
        for wid in (3, 4):
            src = FIXTURES / f"nation_delete_deltas/delete_delta_{wid:07d}_{wid:07d}_0000/bucket_00000"
            events = po.ORCFile(str(src)).read()
            assert set(events["currentTransaction"].to_pylist()) == {wid}
            w.delete(events.select(list(KEYS)), wid)
    assert nation_summary(spark, location, write_ids) == full_nation(gone)


# --- fullacid_delete_delta_test ------------------------------------------------------------------


def delete_delta_table(root: Path, compacted_4: bool) -> Path:
    """The three fixture delete deltas plus our inserts: write ids 1..7, one row each, keyed
    (owid k, bucket 536870912, rowId 0) with ``col = k``, in ``delta_k_k_0000`` (Hive's
    per-statement name) or, with ``compacted_4``, write id 4 in ``delta_0000004_0000004`` (the
    name minor compaction gives, beside the fixture's ``delete_delta_0000004_0000004``)."""
    src = FIXTURES / "fullacid_delete_delta_test"
    location = table_dir(root, {p.name: p for p in sorted(src.iterdir())})
    for k in range(1, 8):
        name = f"delta_{k:07d}_{k:07d}" + ("" if compacted_4 and k == 4 else "_0000")
        write_bucket_file(
            str(location / name), [("col", "int")], 0, 0, k, pa.table({"col": pa.array([k], pa.int32())})
        )
    return location


def test_delete_delta_with_and_without_statement_id(tmp_path: Path) -> None:
    """Hive's rule (AcidUtils findBestWorkingDeltas): of delete_delta_4_4 and
    delete_delta_4_4_0000 only the first (no statement id, sorted first) is read, and it makes
    every other directory of range 4..4 with a statement id obsolete, our delta_4_4_0000 too;
    a delta_4_4 without statement id is its twin and is read."""
    wids = ValidWriteIdList.parse(f"d.t:7:{MAX}::")
    files = select_files(list_location(str(delete_delta_table(tmp_path / "a", False))), wids)
    assert [d.name for d in files.delete_deltas] == [
        "delete_delta_0000004_0000004",
        "delete_delta_0000007_0000007_0000",
    ]
    assert [d.name for d in files.deltas] == [f"delta_{k:07d}_{k:07d}_0000" for k in (1, 2, 3, 5, 6, 7)]
    assert files.obsolete == ("delete_delta_0000004_0000004_0000", "delta_0000004_0000004_0000")
    files = select_files(list_location(str(delete_delta_table(tmp_path / "b", True))), wids)
    assert [d.name for d in files.delete_deltas] == [
        "delete_delta_0000004_0000004",
        "delete_delta_0000007_0000007_0000",
    ]
    assert [d.name for d in files.deltas] == [
        f"delta_{k:07d}_{k:07d}" + ("" if k == 4 else "_0000") for k in range(1, 8)
    ]
    assert files.obsolete == ("delete_delta_0000004_0000004_0000",)


@pytest.mark.parametrize(
    ("write_ids", "per_statement", "compacted_4"),
    [
        # write 4 deletes row 2, write 7 deletes row 6; delta_4_4_0000 is obsolete (see above)
        (f"d.t:7:{MAX}::", [1, 3, 5, 7], [1, 3, 4, 5, 7]),
        (f"d.t:3:{MAX}::", [1, 2, 3], [1, 2, 3]),  # no delete visible yet
        (f"d.t:6:{MAX}::", [1, 3, 5, 6], [1, 3, 4, 5, 6]),
        (f"d.t:7:{MAX}::4", [1, 2, 3, 5, 7], [1, 2, 3, 5, 7]),  # write 4 (row 4, delete of row 2) aborted
        ("d.t:7:7:7:", [1, 3, 5, 6], [1, 3, 4, 5, 6]),  # write 7 open
        ("d.t:7:4:4:", [1, 2, 3, 5, 7], [1, 2, 3, 5, 7]),  # write 4 open
        (f"d.t:7:{MAX}::2,7", [1, 3, 5, 6], [1, 3, 4, 5, 6]),  # row 2 and the delete of row 6 aborted
    ],
)
def test_delete_delta_snapshots(
    spark: Any, tmp_path: Path, write_ids: str, per_statement: list[int], compacted_4: list[int]
) -> None:
    for compacted, expected in ((False, per_statement), (True, compacted_4)):
        location = delete_delta_table(tmp_path / str(compacted), compacted)
        rows = read_both(spark, location, write_ids, (("col", "int"),), with_row_ids=True, schema="col int")
        assert rows == [(k, B0, 0, k) for k in expected], compacted


# --- original files ------------------------------------------------------------------------------

DUMMY_ROWS = [  # (bucket property, synthesized rowId, id): per bucket, files in name order
    (B0, 0, 0), (B0, 1, 1), (B0, 2, 3), (B0, 3, 4),  # 000000_0
    (B1, 0, 5), (B1, 1, 6), (B1, 2, 7), (B1, 3, 8),  # 000001_0
    (B2, 0, 9), (B2, 1, 10), (B2, 2, 11), (B2, 3, 12),  # 000002_0
    (B2, 4, 13), (B2, 5, 14), (B2, 6, 15), (B2, 7, 16),  # 000002_0_copy_1
    (B2, 8, 17), (B2, 9, 18), (B2, 10, 19), (B2, 11, 20),  # 000002_0_copy_2
]  # fmt: skip


@pytest.mark.parametrize(
    ("write_ids", "deleted"),
    [
        (f"d.t:10000001:{MAX}::", True),
        (f"d.t:10000000:{MAX}::", False),  # the delete is above the high watermark
        (f"d.t:10000001:{MAX}::10000001", False),  # aborted
        ("d.t:10000001:10000001:10000001:", False),  # open
    ],
)
def test_dummy_original_files(spark: Any, tmp_path: Path, write_ids: str, deleted: bool) -> None:
    """Row ids are synthesized per bucket (file name ``N_M[_copy_K]``, rows of the earlier files of
    the bucket first); the delete event (owid 0, bucket 0, rowId 2) removes the row with id 3."""
    src = FIXTURES / "dummy_id_data_orc"
    location = table_dir(tmp_path, {p.name: p for p in sorted(src.iterdir())})
    rows = read_both(spark, location, write_ids, DUMMY_COLS, with_row_ids=True)
    expected = [r for r in DUMMY_ROWS if not (deleted and r[:2] == (B0, 2))]
    assert sorted((r[1], r[2], r[3]) for r in rows) == sorted(expected)
    assert {r[0] for r in rows} == {0}  # originalTransaction of original files
    assert all(r[4] == f"test{r[3]}" for r in rows)
    assert (3 in {r[3] for r in rows}) is not deleted


def test_nation_original_file_with_delete(spark: Any, tmp_path: Path) -> None:
    src = FIXTURES / "fullacidNationTableWithOriginalFiles"
    location = table_dir(tmp_path, {p.name: p for p in sorted(src.iterdir())})
    before = read_both(spark, location, f"d.t:10000000:{MAX}::", NATION_COLS, with_row_ids=True)
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in before] == [
        (0, B0, k, k, NATION_NAMES[k]) for k in range(25)
    ]
    after = read_both(spark, location, f"d.t:10000001:{MAX}::", NATION_COLS)
    assert len(after) == 24
    assert {r[0] for r in after} == set(range(24))  # key 24, UNITED STATES (rowId 24), is deleted
    assert "UNITED STATES" not in {r[1] for r in after}


# --- Impala's files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write_ids", "expected"),
    [
        ("d.t:2:2:2:", [("a1", "b2"), ("a3", "b4")]),  # write id 2 still open
        (f"d.t:1:{MAX}::", [("a1", "b2"), ("a3", "b4")]),  # high watermark 1
        (f"d.t:2:{MAX}::", [("a1", "b2"), ("a3", "b4"), ("a5", "b6"), ("a7", "b8")]),
        (f"d.t:2:{MAX}::1", [("a5", "b6"), ("a7", "b8")]),  # write id 1 aborted
        (f"d.t:2:{MAX}::1,2", []),
    ],
)
def test_impala_streaming_file(spark: Any, tmp_path: Path, write_ids: str, expected: list[tuple]) -> None:
    """A Hive Streaming file (write ids 1,1,2,2) in delta_1_2: rows of write ids not valid in the
    snapshot are dropped although the directory is read."""
    location = table_dir(tmp_path, {"delta_0000001_0000002/bucket_00000": FIXTURES / "impala/streaming.orc"})
    rows = read_both(
        spark, location, write_ids, (("a", "string"), ("b", "string")), schema="a string, b string"
    )
    assert rows == expected


def test_impala_lower_case_acid_columns(spark: Any, tmp_path: Path) -> None:
    """ACID column names in lower case and no ``hive.acid.version``: still an ACID file; our own
    delete delta (write id 4) removes its row of write id 3."""
    location = table_dir(
        tmp_path,
        {"delta_0000001_0000003/bucket_00000": FIXTURES / "impala/full_acid_schema_but_no_acid_version.orc"},
    )
    cols = (("i", "int"),)
    assert read_both(spark, location, f"d.t:3:{MAX}::", cols, with_row_ids=True) == [
        (1, B0, 0, 1),
        (2, B0, 0, 2),
        (3, B0, 0, 3),
    ]
    assert read_both(spark, location, f"d.t:3:{MAX}::2", cols) == [(1,), (3,)]
    write_bucket_file(
        str(location / "delete_delta_0000004_0000004_0000"),
        cols,
        0,
        0,
        4,
        pa.table({"originalTransaction": [3], "bucket": pa.array([B0], pa.int32()), "rowId": [0]}),
        delete=True,
    )
    assert read_both(spark, location, f"d.t:4:{MAX}::", cols, schema="i int") == [(1,), (2,)]
    assert read_both(spark, location, "d.t:4:4:4:", cols, schema="i int") == [(1,), (2,), (3,)]


def test_impala_plain_file_as_original(spark: Any, tmp_path: Path) -> None:
    """A plain (non-ACID) ORC file named like a task output is an original file: 7,300 rows with
    synthesized ROW__IDs (0, bucket 0, 0..7299) and every column type read the same way."""
    location = table_dir(tmp_path, {"000000_0": FIXTURES / "impala/alltypes_non_acid.orc"})
    rows = read_both(spark, location, f"d.t:0:{MAX}::", ALLTYPES_COLS, with_row_ids=True)
    assert len(rows) == 7300
    assert [r[:3] for r in rows] == [(0, B0, i) for i in range(7300)]
    assert sorted(r[3] for r in rows) == list(range(7300))  # the id column
    assert encode_bucket_property(0) == B0
