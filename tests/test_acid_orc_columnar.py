"""The columnar ACID insert writer (Arrow's ORC writer + ACID user metadata appended to the
footer) writes the same files as the row-wise pyorc writer, and Java's ORC reader (Spark's) reads
its metadata."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyorc
import pytest

from hivemesh.acid import orc_columnar
from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.orc_columnar import (
    ColumnarInsertWriter,
    add_user_metadata,
    columnar_supported,
    open_insert_writer,
)
from hivemesh.acid.orcfile import AcidOrcWriter

COLUMNS = [
    ("id", "bigint"),
    ("s", "string"),
    ("d", "date"),
    ("amount", "decimal(12,2)"),
    ("tags", "array<int>"),
    ("st", "struct<a:int,b:string>"),
    ("f", "double"),
    ("flag", "boolean"),
    ("tiny", "tinyint"),
    ("bin", "binary"),
]


def sample(n: int, offset: int = 0) -> pa.Table:
    """``n`` rows of every supported type, some nulls."""
    ids = range(offset, offset + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": [f"x{i}" if i % 7 else None for i in ids],
            "d": pa.array([dt.date(1969, 12, 1) + dt.timedelta(days=i % 1000) for i in ids]),
            "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
            "tags": [[i, i + 1] if i % 5 else None for i in ids],
            "st": [{"a": i, "b": str(i)} for i in ids],
            "f": [i / 3 for i in ids],
            "flag": [i % 2 == 0 for i in ids],
            "tiny": pa.array([i % 100 for i in ids], pa.int8()),
            "bin": [bytes([i % 256]) * 3 for i in ids],
        }
    )


def orc(path: Path) -> pyorc.Reader:
    return pyorc.Reader(path.open("rb"))


def stripe_last_keys(reader: pyorc.Reader) -> tuple[tuple[int, int, int], ...]:
    """The ROW__ID of every stripe's last row, read back from the file."""
    keys = []
    for i in range(reader.num_of_stripes):
        rows = list(reader.read_stripe(i))
        keys.append(tuple(rows[-1][1:4]))
    return tuple(keys)


@pytest.mark.parametrize("compression", ["zlib", "none", "snappy", "zstd", "lz4"])
def test_same_file_as_the_row_wise_writer(
    tmp_path: Path, compression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema, every event (two write ids: row ids restart), user metadata and stripe keys equal
    the pyorc writer's; several stripes (a small stripe size) get one key each, and inputs are
    converted in several chunks."""
    monkeypatch.setattr(orc_columnar, "_BATCH_ROWS", 7000)
    data = sample(30_000)
    out = {}
    for cls in (AcidOrcWriter, ColumnarInsertWriter):
        path = tmp_path / f"{cls.__name__}.orc"
        with cls(
            str(path),
            COLUMNS,
            bucket_id=3,
            statement_id=2,
            compression=compression,
            stripe_size=16 << 10,
            compression_block_size=64 << 10,
        ) as w:
            assert w.insert(data.slice(0, 20_000), 5) == 20_000
            w.insert(data.slice(20_000), 5)
            assert w.next_row_id(5) == 30_000
            w.insert(data.slice(0, 100), 6)
        out[cls] = (path, w.stats)
    (row_path, row_stats), (col_path, col_stats) = out[AcidOrcWriter], out[ColumnarInsertWriter]
    a, b = orc(row_path), orc(col_path)
    assert str(b.schema) == str(a.schema)
    assert list(b) == list(a)
    assert b.compression == a.compression and b.compression_block_size == a.compression_block_size
    assert b.row_index_stride == a.row_index_stride
    meta = b.user_metadata
    assert meta["hive.acid.stats"] == b"30100,0,0" and meta["hive.acid.version"] == b"2"
    assert list(meta) == ["hive.acid.key.index", "hive.acid.stats", "hive.acid.version"]
    keys = stripe_last_keys(orc(col_path))
    assert col_stats is not None and row_stats is not None
    assert col_stats.stripes > 1 and col_stats.key_index == keys
    assert meta["hive.acid.key.index"] == col_stats.key_index_text.encode()
    assert keys[-1] == (6, col_stats.key_index[-1][1], 99)
    assert (col_stats.rows, col_stats.min_write_id, col_stats.max_write_id) == (30_100, 5, 6)
    assert (col_stats.bucket_id, col_stats.statement_id) == (3, 2)
    assert col_stats.length == col_path.stat().st_size


def test_write_bucket_file_uses_it_and_falls_back(tmp_path: Path) -> None:
    """Arrow inserts of supported types take the columnar writer; varchar/char columns (Arrow has
    only strings) and lzo take the row-wise one, with the declared ORC types kept."""
    assert columnar_supported([("a", "int"), ("m", "map<string,array<decimal(5,1)>>")])
    assert not columnar_supported([("a", "varchar(10)")])
    assert not columnar_supported([("a", "struct<x:char(2)>")])
    assert not columnar_supported([("a", "uniontype<int,string>")])
    assert not columnar_supported([("a", "int")], "lzo")
    assert not columnar_supported([("a", "timestamp")])
    assert not columnar_supported([("a", "array<struct<t:timestamp with local time zone>>")])
    w = open_insert_writer(str(tmp_path / "x"), [("a", "varchar(10)")])
    assert isinstance(w, AcidOrcWriter)
    w.discard()
    w = open_insert_writer(str(tmp_path / "y"), [("a", "int")])
    assert isinstance(w, ColumnarInsertWriter)
    w.discard()
    assert not (tmp_path / "y").exists()

    table = pa.table({"a": pa.array([1, 2], pa.int32()), "v": ["p", "q"]})
    stats = write_bucket_file(str(tmp_path / "d1"), [("a", "int"), ("v", "varchar(4)")], 1, 0, 3, table)
    assert stats is not None and str(orc(Path(stats.path)).schema).endswith("row:struct<a:int,v:varchar(4)>>")
    stats = write_bucket_file(str(tmp_path / "d2"), [("a", "int"), ("v", "string")], 1, 0, 3, table)
    assert stats is not None
    reader = orc(Path(stats.path))
    assert reader.user_metadata["hive.acid.key.index"] == b"3,536936448,1;"
    assert [r[5] for r in reader] == [(1, "p"), (2, "q")]


def test_remote_file_system_and_discard(tmp_path: Path) -> None:
    """On a file system other than the local one the file is written locally, then copied up; an
    error inside the ``with`` block leaves no file."""
    (tmp_path / "store").mkdir()
    fs = pafs.SubTreeFileSystem(str(tmp_path / "store"), pafs.LocalFileSystem())
    with ColumnarInsertWriter("delta_1_1/bucket_00000", [("n", "bigint")], filesystem=fs) as w:
        w.insert(pa.table({"n": np.arange(1000)}), 1)
    assert (
        w.stats is not None and w.stats.length == (tmp_path / "store/delta_1_1/bucket_00000").stat().st_size
    )
    assert [r[3] for r in orc(tmp_path / "store/delta_1_1/bucket_00000")] == list(range(1000))
    with pytest.raises(RuntimeError), ColumnarInsertWriter(str(tmp_path / "gone"), [("n", "bigint")]) as w:
        w.insert(pa.table({"n": [1]}), 1)
        raise RuntimeError("boom")
    assert not (tmp_path / "gone").exists()
    with pytest.raises(ValueError, match="discarded"):
        w.insert(pa.table({"n": [1]}), 1)


def test_add_user_metadata_rejects_a_file_that_is_not_orc(tmp_path: Path) -> None:
    bad = tmp_path / "not.orc"
    bad.write_bytes(b"\x00" * 40 + b"\x05")
    with pytest.raises(ValueError, match="no ORC PostScript"):
        add_user_metadata(str(bad), [("k", b"v")])
    assert bad.read_bytes() == b"\x00" * 40 + b"\x05"


def test_java_orc_reader_reads_the_appended_metadata(spark, tmp_path: Path) -> None:
    """Java's ORC reader (Spark's JVM) parses the rewritten tail: the ACID metadata, row count and
    stripes, and Spark reads the events."""
    path = tmp_path / "delta_0000001_0000001_0000" / "bucket_00000"
    with ColumnarInsertWriter(str(path), [("id", "bigint"), ("s", "string")], compression="zstd") as w:
        w.insert(pa.table({"id": np.arange(5000), "s": [str(i) for i in range(5000)]}), 1)
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    reader = jvm.org.apache.orc.OrcFile.createReader(
        jvm.org.apache.hadoop.fs.Path(path.as_uri()), jvm.org.apache.orc.OrcFile.readerOptions(conf)
    )
    keys = sorted(str(k) for k in reader.getMetadataKeys())
    assert keys == ["hive.acid.key.index", "hive.acid.stats", "hive.acid.version"]
    value = reader.getMetadataValue("hive.acid.key.index")
    text = jvm.java.nio.charset.StandardCharsets.UTF_8.decode(value).toString()
    assert text == "1,536870912,4999;"
    assert reader.getNumberOfRows() == 5000 and len(list(reader.getStripes())) == 1
    rows = spark.read.orc(path.as_uri()).collect()  # all six columns: Spark cannot prune ACID files
    assert [(r.operation, r.originalTransaction, r.rowId, r.currentTransaction) for r in rows] == [
        (0, 1, i, 1) for i in range(5000)
    ]
    assert [tuple(r.row) for r in rows] == [(i, str(i)) for i in range(5000)]


def test_timestamps_take_the_row_wise_writer(tmp_path: Path) -> None:
    """A time before 1970 with a fraction of a second: Arrow's ORC writer would store negative
    nanoseconds (misread by Java), so such tables take the row-wise writer, and the value reads
    back exactly; so do years beyond Arrow's nanosecond range."""
    values = [dt.datetime(1900, 1, 1, 0, 0, 0, 123456), dt.datetime(9999, 12, 31, 23, 59, 59)]
    table = pa.table({"t": pa.array(values, pa.timestamp("us"))})
    stats = write_bucket_file(str(tmp_path / "d"), [("t", "timestamp")], 0, 0, 1, table)
    assert stats is not None
    assert [r[5][0].replace(tzinfo=None) for r in orc(Path(stats.path))] == values
    w = open_insert_writer(str(tmp_path / "x"), [("t", "timestamp")])
    assert isinstance(w, AcidOrcWriter)
    w.discard()


def test_struct_fields_by_position_and_empty_files(tmp_path: Path) -> None:
    """Nested struct fields are matched by position, as the row-wise writer does (Arrow's cast
    alone matches by name and would write nulls); a different field count is an error; a writer
    closed without rows leaves a valid file of no events."""
    cols = [("s", "struct<a:int,b:string>"), ("l", "array<struct<x:bigint>>")]
    data = pa.table(
        {
            "S": pa.array([{"A": 1, "B": "x"}, None]),
            "L": pa.array([[{"X": 5}], []]),
        }
    )
    with ColumnarInsertWriter(str(tmp_path / "f"), cols) as w:
        assert w.insert(data, 1) == 2
    assert [r[5] for r in orc(tmp_path / "f")] == [((1, "x"), [(5,)]), (None, [])]
    with (
        pytest.raises(ValueError, match="does not match"),
        ColumnarInsertWriter(str(tmp_path / "g"), cols) as w,
    ):
        w.insert(pa.table({"s": pa.array([{"a": 1}]), "l": pa.array([[{"x": 5}]])}), 1)
    assert not (tmp_path / "g").exists()
    with ColumnarInsertWriter(str(tmp_path / "empty"), cols) as w:
        assert w.insert(data.slice(0, 0), 1) == 0
    assert w.stats is not None and (w.stats.rows, w.stats.stripes, w.stats.key_index) == (0, 0, ())
    reader = orc(tmp_path / "empty")
    assert len(reader) == 0 and reader.user_metadata["hive.acid.stats"] == b"0,0,0"
