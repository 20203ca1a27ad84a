"""Plain ORC files of insert-only tables (:func:`hivemesh.acid.files.write_plain_file`) holding
timestamps: Arrow's ORC writer stores a time before 1970 with a fraction of a second with negative
nanoseconds, which Java ORC readers reject (``nanos > 999999999 or < 0``), and Arrow's nanosecond
timestamps end in 2262; such files take the row-wise pyorc writer. Files without timestamps keep
Arrow's writer."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest

from hivemesh.acid.files import write_plain_file

VALUES = [
    dt.datetime(1900, 1, 1, 0, 0, 0, 123456),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    dt.datetime(1969, 12, 31, 23, 59, 58, 999999),
    dt.datetime(1970, 1, 1, 0, 0, 0),
    dt.datetime(2024, 2, 29, 12, 34, 56, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    None,
]
COLS = [("id", "int"), ("t", "timestamp")]
# What ORC readers give back. The one exception is not this writer's: ORC stores whole seconds and
# nanoseconds apart, and readers (Java's, and C++'s since ORC-763) take a second off a negative
# second only when the nanoseconds exceed 999999, so second -1 with >= 1 ms of fraction cannot be
# stored; Spark's own ORC writer reads 1969-12-31 23:59:59.999999 back as 1970-01-01 00:00:00.999999.
EXPECTED = [dt.datetime(1970, 1, 1, 0, 0, 0, 999999) if v == VALUES[1] else v for v in VALUES]


def _table(values: list[dt.datetime | None]) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(len(values)), pa.int32()), "t": pa.array(values, pa.timestamp("us"))}
    )


def spark_wall(value: dt.datetime | None) -> dt.datetime | None:
    """A timestamp collected from Spark (naive, in the Python process's local time zone) as the
    naive UTC wall clock written (the session time zone is UTC; as tests/test_acid_roundtrip.py)."""
    return None if value is None else value.astimezone(dt.UTC).replace(tzinfo=None)


def naive(value: dt.datetime | None) -> dt.datetime | None:
    """A timestamp read by pyorc or pyarrow (aware UTC or naive wall clock) as a naive wall clock."""
    return None if value is None else value.replace(tzinfo=None)


def test_spark_reads_the_timestamps_exactly(spark: Any, tmp_path: Path) -> None:
    stats = write_plain_file(str(tmp_path / "delta_0000001_0000001_0000"), COLS, _table(VALUES))
    assert stats is not None and stats.rows == len(VALUES)
    path = Path(stats.path)
    assert stats.length == path.stat().st_size
    rows = sorted(spark.read.orc(path.as_uri()).collect(), key=lambda r: r.id)
    assert [r.id for r in rows] == list(range(len(VALUES)))
    assert [spark_wall(r.t) for r in rows] == EXPECTED


def test_pyorc_and_pyarrow_read_the_timestamps_and_the_codec_is_kept(tmp_path: Path) -> None:
    stats = write_plain_file(str(tmp_path / "a"), COLS, _table(VALUES), compression="zstd")
    assert stats is not None
    with open(stats.path, "rb") as f:
        reader = pyorc.Reader(f)
        assert reader.compression == pyorc.CompressionKind.ZSTD
        assert [(i, naive(t)) for i, t in reader] == list(enumerate(EXPECTED))
    # pyarrow reads ORC timestamps in nanoseconds: everything but year 9999
    short = [v for v in VALUES if v is None or v.year < 2262]
    expected = [v for v in EXPECTED if v is None or v.year < 2262]
    stats = write_plain_file(str(tmp_path / "b"), COLS, _table(short), compression="snappy")
    assert stats is not None
    orc = po.ORCFile(stats.path)
    assert orc.compression == "SNAPPY"
    got = orc.read()
    assert got.column("id").to_pylist() == list(range(len(short)))
    assert [naive(v) for v in got.column("t").to_pylist()] == expected


def test_nested_timestamps_and_row_tuples(spark: Any, tmp_path: Path) -> None:
    """Timestamps inside struct/array/map columns also take the row-wise writer; row tuples (Python
    datetimes, years beyond 2262 included) are accepted as well."""
    cols = [
        ("id", "int"),
        ("s", "struct<n:int,ts:timestamp>"),
        ("a", "array<timestamp>"),
        ("m", "map<string,timestamp>"),
    ]
    old, neg, leap, last = VALUES[0], VALUES[2], VALUES[4], VALUES[5]
    rows = [
        (0, (1, old), [old, neg, None], {"k": last}),
        (1, (2, None), [leap, last], {"x": neg, "y": None}),
        (2, None, None, None),
    ]
    stats = write_plain_file(str(tmp_path / "d"), cols, rows)
    assert stats is not None and stats.rows == 3
    got = sorted(spark.read.orc(Path(stats.path).as_uri()).collect(), key=lambda r: r.id)
    out = [
        (
            r.id,
            None if r.s is None else (r.s.n, spark_wall(r.s.ts)),
            None if r.a is None else [spark_wall(x) for x in r.a],
            None if r.m is None else {k: spark_wall(x) for k, x in r.m.items()},
        )
        for r in got
    ]
    assert out == rows


@pytest.mark.parametrize("compression", [None, "snappy"])
def test_files_without_timestamps_keep_arrows_writer(tmp_path: Path, compression: str | None) -> None:
    """Byte for byte the file Arrow's ORC writer makes (pyorc bundles another ORC C++ release and
    records its own software version, so its file would differ)."""
    cols = [("id", "bigint"), ("s", "string"), ("d", "date"), ("l", "array<struct<x:double>>")]
    table = pa.table(
        {
            "id": pa.array([1, 2, None], pa.int64()),
            "s": ["a", None, "c"],
            "d": pa.array([dt.date(1900, 1, 1), None, dt.date(2024, 2, 29)], pa.date32()),
            "l": pa.array([[{"x": 1.5}], None, []], pa.list_(pa.struct([("x", pa.float64())]))),
        }
    )
    stats = write_plain_file(str(tmp_path / "d"), cols, table, compression=compression)
    assert stats is not None
    expected = io.BytesIO()
    po.write_table(table, expected, compression=compression or "zlib")
    assert Path(stats.path).read_bytes() == expected.getvalue()
    assert (
        po.ORCFile(stats.path).software_version
        == po.ORCFile(io.BytesIO(expected.getvalue())).software_version
    )
