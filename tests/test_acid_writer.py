"""hivemesh.acid.orcfile / tables / writer: Hive-format ACID files and DML through a real metastore."""

from __future__ import annotations

import datetime as dt
import io
import itertools
import os
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pyarrow.parquet as pq
import pyorc
import pytest
from hive_metastore.ttypes import DataOperationType, LockLevel, LockType

from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import encode_bucket_property, parse_acid_dir
from hivemesh.acid.orcfile import AcidOrcWriter, acid_schema, hive_to_arrow_type, hive_to_orc_type
from hivemesh.acid.tables import (
    ORC_INPUT_FORMAT,
    ORC_SERDE,
    PARQUET_SERDE,
    create_transactional_table,
    is_full_acid,
    is_insert_only,
    is_transactional,
    transactional_table,
)
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.hive.txn_lists import ValidWriteIdList
from hivemesh.storage import resolve_location
from tests.conftest import shared_dir

MAX = "9223372036854775807"
B0 = 536870912  # bucket 0, statement 0
NATION = shared_dir() / "fixtures/hive-acid/nationFile25kRowsSortedOnNationKey/bucket_00000"
NATION_DELETE = (
    shared_dir() / "fixtures/hive-acid/nation_delete_deltas/delete_delta_0000003_0000003_0000/bucket_00000"
)
COLS = [("id", "int"), ("name", "string")]


# --- helpers -------------------------------------------------------------------------------------


def orc_reader(path: str | Path, length: int | None = None) -> pyorc.Reader:
    data = Path(path).read_bytes()
    return pyorc.Reader(io.BytesIO(data if length is None else data[:length]))


def acid_rows(path: str | Path) -> list[tuple]:
    """Rows of an ACID file as (operation, owid, bucket, rowId, cwid, row) via pyarrow."""
    out = []
    for r in po.ORCFile(str(path)).read().to_pylist():
        row = None if r["row"] is None else tuple(r["row"].values())
        out.append(
            (r["operation"], r["originalTransaction"], r["bucket"], r["rowId"], r["currentTransaction"], row)
        )
    return out


def stripe_ends(path: str | Path) -> list[int]:
    r = orc_reader(path)
    return list(itertools.accumulate(len(r.read_stripe(i)) for i in range(r.num_of_stripes)))


def key_index(path: str | Path) -> list[tuple[int, int, int]]:
    text = orc_reader(path).user_metadata["hive.acid.key.index"].decode()
    return [tuple(int(x) for x in e.split(",")) for e in text.split(";") if e]


def visible_rows(location: Path, wids: ValidWriteIdList) -> list[tuple]:
    """A minimal full-ACID reader for checks: rows of valid deltas minus valid delete events."""
    inserts, deleted = [], set()
    for d in sorted(location.iterdir()):
        parsed = parse_acid_dir(d.name)
        if parsed is None:
            continue
        for f in sorted(d.glob("bucket_*")):
            for op, owid, bucket, rid, cwid, row in acid_rows(f):
                if not wids.is_write_id_valid(cwid):
                    continue
                if op == 2:
                    deleted.add((owid, bucket, rid))
                else:
                    inserts.append(((owid, bucket, rid), row))
    return sorted(row for key, row in inserts if key not in deleted)


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- type mapping and tables (no server) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("hive", "orc"),
    [
        ("INT", "int"),
        ("integer", "int"),
        ("bigint", "bigint"),
        ("decimal", "decimal(10,0)"),
        ("decimal(7)", "decimal(7,0)"),
        ("decimal(12, 3)", "decimal(12,3)"),
        ("varchar(10)", "varchar(10)"),
        ("char(2)", "char(2)"),
        ("double precision", "double"),
        ("array<struct<a:int,b:map<string,date>>>", "array<struct<a:int,b:map<string,date>>>"),
        ("struct<`x y`:timestamp>", "struct<`x y`:timestamp>"),
    ],
)
def test_hive_to_orc_type(hive: str, orc: str) -> None:
    assert hive_to_orc_type(hive) == orc


@pytest.mark.parametrize("bad", ["void", "interval_day_time", "array<int", "decimal(40,2)", "int x"])
def test_hive_to_orc_type_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        hive_to_orc_type(bad)


def test_hive_to_arrow_type() -> None:
    assert hive_to_arrow_type("map<string,array<decimal(5,2)>>") == pa.map_(
        pa.string(), pa.list_(pa.decimal128(5, 2))
    )
    assert hive_to_arrow_type("timestamp") == pa.timestamp("ns")


def test_acid_schema_is_hives() -> None:
    cols = [("n_nationkey", "int"), ("n_name", "string"), ("n_regionkey", "int"), ("n_comment", "string")]
    assert acid_schema(cols) == str(orc_reader(NATION).schema)


def test_transactional_table_objects() -> None:
    t = transactional_table("DB", "T", [("ID", "int"), ("v", "string", "a comment")], [("ds", "string")])
    assert (t.dbName, t.tableName, t.tableType) == ("db", "t", "MANAGED_TABLE")
    assert t.parameters == {
        "transactional": "true",
        "transactional_properties": "default",
        "bucketing_version": "2",
    }
    assert (t.sd.serdeInfo.serializationLib, t.sd.inputFormat) == (ORC_SERDE, ORC_INPUT_FORMAT)
    assert [(c.name, c.type, c.comment) for c in t.sd.cols] == [
        ("id", "int", None),
        ("v", "string", "a comment"),
    ]
    assert [k.name for k in t.partitionKeys] == ["ds"]
    assert is_transactional(t) and is_full_acid(t) and not is_insert_only(t)
    mm = transactional_table("db", "m", [("a", "int")], insert_only=True, file_format="parquet")
    assert mm.parameters["transactional_properties"] == "insert_only"
    assert mm.sd.serdeInfo.serializationLib == PARQUET_SERDE
    assert is_insert_only(mm) and not is_full_acid(mm)
    mm.parameters = {"TRANSACTIONAL": "TRUE", "transactional_properties": "INSERT_ONLY"}
    assert is_insert_only(mm)
    with pytest.raises(ValueError, match="ORC"):
        transactional_table("db", "x", [("a", "int")], file_format="parquet")
    with pytest.raises(ValueError):
        transactional_table("db", "x", [("a", "int")], [("a", "string")])
    with pytest.raises(ValueError):
        transactional_table("db", "x", [("a", "void")])


def test_resolve_location(tmp_path: Path) -> None:
    _, p = resolve_location(f"file:{tmp_path}")
    assert p == str(tmp_path)
    _, p = resolve_location(f"file://{tmp_path}")
    assert p == str(tmp_path)
    _, p = resolve_location(str(tmp_path))
    assert p == str(tmp_path)


# --- one ACID ORC file ----------------------------------------------------------------------------


def test_insert_file_matches_the_hive_written_one(tmp_path: Path) -> None:
    hive = orc_reader(NATION)
    cols = [("n_nationkey", "int"), ("n_name", "string"), ("n_regionkey", "int"), ("n_comment", "string")]
    rows = [r[5] for r in hive.read()]
    path = tmp_path / "delta_0000002_0000002_0000" / "bucket_00000"
    with AcidOrcWriter(path, cols) as w:
        assert w.insert(rows, 2) == 25000
    ours = orc_reader(path)
    assert str(ours.schema) == str(hive.schema)
    assert set(ours.user_metadata) == set(hive.user_metadata)
    assert ours.user_metadata["hive.acid.stats"] == hive.user_metadata["hive.acid.stats"] == b"25000,0,0"
    assert ours.user_metadata["hive.acid.version"] == b"2"
    assert ours.compression == hive.compression  # ZLIB
    assert ours.row_index_stride == 10000
    assert key_index(path) == [(2, B0, e - 1) for e in stripe_ends(path)] == [(2, B0, 24999)]
    assert [tuple(r) for r in orc_reader(path).read()] == [tuple(r) for r in orc_reader(NATION).read()]
    assert acid_rows(path)[:2] == [(0, 2, B0, 0, 2, rows[0]), (0, 2, B0, 1, 2, rows[1])]
    assert (
        w.stats is not None
        and w.stats.length == path.stat().st_size
        and w.stats.key_index_text == "2,536870912,24999;"
    )


@pytest.mark.parametrize("arrow", [False, True])
def test_key_index_has_one_entry_per_stripe(tmp_path: Path, arrow: bool) -> None:
    rnd = random.Random(7)
    rows = [(rnd.getrandbits(62), f"{rnd.getrandbits(64):x}") for _ in range(30000)]
    path = tmp_path / "bucket_00003"
    with AcidOrcWriter(
        path, [("a", "bigint"), ("b", "string")], bucket_id=3, statement_id=2, stripe_size=100_000
    ) as w:
        if arrow:
            w.insert(pa.table({"b": [r[1] for r in rows], "a": [r[0] for r in rows]}), 9)  # by name
        else:
            w.insert(rows[:12345], 9)
            w.insert(rows[12345:], 9)
    prop = encode_bucket_property(3, 2)
    ends = stripe_ends(path)
    assert len(ends) > 1
    assert key_index(path) == [(9, prop, e - 1) for e in ends]
    assert po.ORCFile(str(path)).nstripes == len(ends)
    got = acid_rows(path)
    assert [g[3] for g in got] == list(range(30000))
    assert {(g[0], g[1], g[2], g[4]) for g in got} == {(0, 9, prop, 9)}
    assert [g[5] for g in got] == rows


def test_arrow_types_round_trip(tmp_path: Path) -> None:
    cols = [
        ("t", "tinyint"),
        ("s", "smallint"),
        ("i", "int"),
        ("l", "bigint"),
        ("b", "boolean"),
        ("f", "float"),
        ("d", "double"),
        ("str", "string"),
        ("vc", "varchar(5)"),
        ("dec", "decimal(10,2)"),
        ("dt", "date"),
        ("ts", "timestamp"),
        ("bin", "binary"),
        ("arr", "array<int>"),
        ("m", "map<string,int>"),
        ("st", "struct<x:int,y:string>"),
    ]
    ts = [dt.datetime(2024, 2, 29, 12, 30, 1, 123456), dt.datetime(1969, 12, 31, 23, 59, 58, 500000), None]
    table = pa.table(
        {
            "t": pa.array([1, -2, None], pa.int8()),
            "s": pa.array([300, None, -5], pa.int16()),
            "i": pa.array([1, 2, 3], pa.int32()),
            "l": pa.array([2**40, None, -1], pa.int64()),
            "b": [True, False, None],
            "f": pa.array([1.5, None, 2.25], pa.float32()),
            "d": [0.1, 2.5, None],
            "str": ["a", None, "ccc"],
            "vc": ["abc", "de", None],
            "dec": pa.array([Decimal("1.25"), None, Decimal("-3.50")], pa.decimal128(10, 2)),
            "dt": pa.array([dt.date(2024, 1, 1), dt.date(1960, 5, 5), None], pa.date32()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "bin": [b"\x00\x01", None, b""],
            "arr": [[1, 2], [], None],
            "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int32())),
            "st": pa.array(
                [{"x": 1, "y": "a"}, None, {"x": None, "y": "b"}],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
        }
    )
    path = tmp_path / "bucket_00000"
    with AcidOrcWriter(path, cols) as w:
        w.insert(table, 1)
    got = po.ORCFile(str(path)).read()
    rows = got.column("row").combine_chunks()
    for name in table.column_names:
        assert rows.field(name).to_pylist() == table.column(name).to_pylist(), name
    # the same rows given as Python tuples write the same values
    path2 = tmp_path / "tuples" / "bucket_00000"
    tuples = [tuple(r.values()) for r in table.to_pylist()]
    tuples = [r[:15] + ((r[15]["x"], r[15]["y"]) if r[15] else None,) for r in tuples]
    tuples = [r[:14] + (dict(r[14]) if r[14] is not None else None,) + r[15:] for r in tuples]
    with AcidOrcWriter(path2, cols) as w2:
        w2.insert(tuples, 1)
    assert po.ORCFile(str(path2)).read().column("row").to_pylist() == got.column("row").to_pylist()


def test_delete_file_matches_hive(tmp_path: Path) -> None:
    hive = orc_reader(NATION_DELETE)
    keys = [(r[1], r[2], r[3]) for r in hive.read()]
    random.Random(1).shuffle(keys)
    cols = [("n_nationkey", "int"), ("n_name", "string"), ("n_regionkey", "int"), ("n_comment", "string")]
    path = tmp_path / "delete_delta_0000003_0000003_0000" / "bucket_00000"
    with AcidOrcWriter(path, cols) as w:
        assert w.delete(keys, 3) == 1000
    ours = orc_reader(path)
    assert ours.user_metadata == orc_reader(NATION_DELETE).user_metadata
    assert [tuple(r) for r in ours.read()] == [tuple(r) for r in orc_reader(NATION_DELETE).read()]
    assert acid_rows(path)[0] == (2, 2, B0, 5000, 3, None)


def test_delete_key_checks(tmp_path: Path) -> None:
    with AcidOrcWriter(tmp_path / "bucket_00001", COLS, bucket_id=1) as w:
        with pytest.raises(ValueError, match="bucket"):
            w.delete([(1, B0, 0)], 5)  # a bucket 0 key in bucket 1's file
        w.delete([(1, encode_bucket_property(1, 3), 7), (1, encode_bucket_property(1, 0), 9)], 5)
        with pytest.raises(ValueError, match="ascending"):
            w.delete([(1, encode_bucket_property(1, 0), 1)], 5)
    assert [(r[1], r[2], r[3], r[4]) for r in acid_rows(tmp_path / "bucket_00001")] == [
        (1, encode_bucket_property(1, 0), 9, 5),
        (1, encode_bucket_property(1, 3), 7, 5),
    ]


def test_discard_on_error_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bucket_00000"
    with pytest.raises(TypeError), AcidOrcWriter(path, COLS) as w:
        w.insert([(1, "a"), ("not an int", "b")], 1)
    assert w.state == "discarded" and not path.exists()


def test_write_bucket_file_is_deterministic(tmp_path: Path) -> None:
    batches = [
        pa.record_batch({"id": [1, 2], "name": ["a", "b"]}),
        pa.record_batch({"id": [3], "name": ["c"]}),
    ]
    stats = [write_bucket_file(str(tmp_path / d), COLS, 5, 0, 4, batches) for d in ("one", "two")]
    assert stats[0] is not None and stats[1] is not None
    a, b = (tmp_path / d / "bucket_00005" for d in ("one", "two"))
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "one" / "_orc_acid_version").read_bytes() == b"2"
    prop = encode_bucket_property(5, 0)
    assert acid_rows(a) == [(0, 4, prop, i, 4, r) for i, r in enumerate([(1, "a"), (2, "b"), (3, "c")])]
    assert (stats[0].rows, stats[0].inserts, stats[0].min_write_id, stats[0].max_write_id) == (3, 3, 4, 4)
    assert write_bucket_file(str(tmp_path / "empty"), COLS, 0, 0, 4, []) is None
    assert not (tmp_path / "empty").exists()
    keys = pa.table({"originalTransaction": [4, 4], "bucket": [prop, prop], "rowId": [2, 0]})
    st = write_bucket_file(f"file:{tmp_path}/dd", COLS, 5, 0, 6, keys, delete=True)
    assert st is not None and st.deletes == 2
    assert acid_rows(tmp_path / "dd" / "bucket_00005") == [(2, 4, prop, 0, 6, None), (2, 4, prop, 2, 6, None)]


# --- DML through a metastore -----------------------------------------------------------------------


def table_dir(client: MetastoreClient, db: str, name: str) -> Path:
    _, path = resolve_location(client.raw.get_table(db, name).sd.location)
    return Path(path)


def snapshot(client: MetastoreClient, full: str) -> ValidWriteIdList:
    return client.valid_write_ids([full], client.valid_txn_list())[full]


class LockSpy:
    """Records the lock components a client asks for."""

    def __init__(self, client: MetastoreClient, monkeypatch: pytest.MonkeyPatch):
        self.calls: list[list] = []
        real = client.lock

        def lock(components, txn_id=None, **kw):  # type: ignore[no-untyped-def]
            self.calls.append(list(components))
            return real(components, txn_id, **kw)

        monkeypatch.setattr(client, "lock", lock)

    def last(self) -> list[tuple]:
        return [
            (c.type, c.level, c.tablename, c.partitionname, c.operationType, bool(c.isDynamicPartitionWrite))
            for c in self.calls[-1]
        ]


def test_insert_delete_update(client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    create_transactional_table(client, db, "t", COLS)
    full = f"{db}.t"
    spy = LockSpy(client, monkeypatch)
    w = AcidWriter(client, db, "t")
    loc = table_dir(client, db, "t")

    r1 = w.insert([(1, "a"), (2, "b"), (3, "c")])
    assert (r1.write_id, r1.statement_id, r1.inserted, r1.committed) == (1, 0, 3, True)
    assert spy.last() == [(LockType.SHARED_READ, LockLevel.TABLE, "t", None, DataOperationType.INSERT, False)]
    assert tree(loc) == [
        "delta_0000001_0000001_0000",
        "delta_0000001_0000001_0000/_orc_acid_version",
        "delta_0000001_0000001_0000/bucket_00000",
    ]
    assert (loc / "delta_0000001_0000001_0000/_orc_acid_version").read_text() == "2"
    assert acid_rows(loc / "delta_0000001_0000001_0000/bucket_00000") == [
        (0, 1, B0, 0, 1, (1, "a")),
        (0, 1, B0, 1, 1, (2, "b")),
        (0, 1, B0, 2, 1, (3, "c")),
    ]
    assert str(snapshot(client, full)) == f"{full}:1:{MAX}::"
    assert client.valid_txn_list().is_txn_valid(r1.txn_id)
    assert client.show_locks(db) == []

    r2 = w.insert(pa.table({"name": ["d"], "id": [4]}))
    assert r2.write_id == 2
    r3 = w.delete([(1, B0, 1), (2, B0, 0)])
    assert (r3.write_id, r3.deleted) == (3, 2)
    assert spy.last() == [(LockType.EXCL_WRITE, LockLevel.TABLE, "t", None, DataOperationType.DELETE, False)]
    dd = loc / "delete_delta_0000003_0000003_0000"
    assert sorted(p.name for p in dd.iterdir()) == ["_orc_acid_version", "bucket_00000"]
    assert acid_rows(dd / "bucket_00000") == [(2, 1, B0, 1, 3, None), (2, 2, B0, 0, 3, None)]
    assert orc_reader(dd / "bucket_00000").user_metadata["hive.acid.stats"] == b"0,0,2"

    r4 = w.update([(1, B0, 0)], [(1, "A")])
    assert (r4.write_id, r4.deleted, r4.inserted, r4.statement_id) == (4, 1, 1, 0)
    assert spy.last() == [(LockType.EXCL_WRITE, LockLevel.TABLE, "t", None, DataOperationType.UPDATE, False)]
    assert (loc / "delete_delta_0000004_0000004_0000/bucket_00000").exists()
    assert acid_rows(loc / "delta_0000004_0000004_0000/bucket_00000") == [(0, 4, B0, 0, 4, (1, "A"))]

    wids = snapshot(client, full)
    assert str(wids) == f"{full}:4:{MAX}::"
    assert visible_rows(loc, wids) == [(1, "A"), (3, "c")]
    assert client.show_locks(db) == []


def test_arrow_inserts_write_columnar_files_and_empty_ones_nothing(client: MetastoreClient, db: str) -> None:
    """Arrow inserts take the columnar writer (``hivemesh.acid.orc_columnar``): the same events; an
    empty Arrow insert writes no delta, as an empty list of tuples does."""
    create_transactional_table(client, db, "t", COLS)
    w = AcidWriter(client, db, "t")
    loc = table_dir(client, db, "t")
    empty = pa.table({"id": pa.array([], pa.int32()), "name": pa.array([], pa.string())})
    assert w.insert(empty).inserted == 0
    assert w.insert(pa.table({"ID": pa.array([7, 8], pa.int64()), "NAME": ["p", "q"]})).inserted == 2
    assert tree(loc) == [
        "delta_0000002_0000002_0000",
        "delta_0000002_0000002_0000/_orc_acid_version",
        "delta_0000002_0000002_0000/bucket_00000",
    ]
    assert acid_rows(loc / "delta_0000002_0000002_0000/bucket_00000") == [
        (0, 2, B0, 0, 2, (7, "p")),
        (0, 2, B0, 1, 2, (8, "q")),
    ]


def test_shared_write_locks(client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    create_transactional_table(client, db, "t", COLS)
    spy = LockSpy(client, monkeypatch)
    w = AcidWriter(client, db, "t", shared_write=True)
    w.insert([(1, "a")])
    assert spy.last()[0][:2] == (LockType.SHARED_WRITE, LockLevel.TABLE)
    w.delete([(1, B0, 0)])
    assert spy.last()[0][0] == LockType.SHARED_WRITE


def test_partitions_static_and_dynamic(
    client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_transactional_table(client, db, "p", COLS, [("ds", "string"), ("hr", "int")])
    full = f"{db}.p"
    spy = LockSpy(client, monkeypatch)
    w = AcidWriter(client, db, "p")
    loc = table_dir(client, db, "p")

    r1 = w.insert([(1, "a"), (2, "b")], partition={"DS": "2024-01-01", "hr": 1})
    assert r1.partitions == ("ds=2024-01-01/hr=1",)
    assert spy.last() == [
        (
            LockType.SHARED_READ,
            LockLevel.PARTITION,
            "p",
            "ds=2024-01-01/hr=1",
            DataOperationType.INSERT,
            False,
        )
    ]
    part = client.raw.get_partition(db, "p", ["2024-01-01", "1"])
    assert Path(resolve_location(part.sd.location)[1]) == loc / "ds=2024-01-01" / "hr=1"
    assert (loc / "ds=2024-01-01/hr=1/delta_0000001_0000001_0000/bucket_00000").exists()

    data = pa.table(
        {
            "id": [3, 4, 5],
            "name": ["c", "d", "e"],
            "ds": ["2024-01-01", "2024-01-02", "2024-01-02"],
            "hr": [1, 7, 7],
        }
    )
    r2 = w.insert(data)
    assert r2.partitions == ("ds=2024-01-01/hr=1", "ds=2024-01-02/hr=7")
    assert spy.last() == [(LockType.SHARED_READ, LockLevel.TABLE, "p", None, DataOperationType.INSERT, True)]
    assert sorted(client.raw.get_partition_names(db, "p", -1)) == ["ds=2024-01-01/hr=1", "ds=2024-01-02/hr=7"]
    new = loc / "ds=2024-01-02/hr=7/delta_0000002_0000002_0000/bucket_00000"
    assert [r[5] for r in acid_rows(new)] == [(4, "d"), (5, "e")]

    r3 = w.insert([(6, "f", "2024-01-03", 0)])  # dynamic, tuples carry the partition values last
    assert r3.partitions == ("ds=2024-01-03/hr=0",)

    r4 = w.delete([(1, B0, 0, {"ds": "2024-01-01", "hr": 1}), (2, B0, 1, "ds=2024-01-02/hr=7")])
    assert r4.partitions == ("ds=2024-01-01/hr=1", "ds=2024-01-02/hr=7")
    assert sorted(c[3] for c in spy.last()) == ["ds=2024-01-01/hr=1", "ds=2024-01-02/hr=7"]
    assert {c[0] for c in spy.last()} == {LockType.EXCL_WRITE}
    wids = snapshot(client, full)
    assert visible_rows(loc / "ds=2024-01-01/hr=1", wids) == [(2, "b"), (3, "c")]
    assert visible_rows(loc / "ds=2024-01-02/hr=7", wids) == [(4, "d")]
    assert client.show_locks(db) == []


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
def test_insert_only(client: MetastoreClient, db: str, fmt: str) -> None:
    create_transactional_table(
        client, db, "m", [("id", "bigint"), ("ts", "timestamp")], insert_only=True, file_format=fmt
    )
    w = AcidWriter(client, db, "m")
    when = dt.datetime(2024, 5, 6, 7, 8, 9)
    r = w.insert([(1, when), (2, None)])
    loc = table_dir(client, db, "m")
    assert tree(loc) == ["delta_0000001_0000001_0000", "delta_0000001_0000001_0000/000000_0"]
    path = loc / "delta_0000001_0000001_0000/000000_0"
    read = po.read_table if fmt == "orc" else pq.read_table
    got = read(str(path))
    assert got.column("id").to_pylist() == [1, 2]
    assert [v.replace(tzinfo=None) if v else v for v in got.column("ts").to_pylist()] == [when, None]
    assert r.files[0].rows == 2
    with pytest.raises(NotImplementedError):
        w.delete([(1, B0, 0)])
    assert str(snapshot(client, f"{db}.m")) == f"{db}.m:1:{MAX}::"


def test_failed_write_aborts_and_leaves_nothing(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "t", COLS, [("ds", "string")])
    full = f"{db}.t"
    w = AcidWriter(client, db, "t")
    loc = table_dir(client, db, "t")
    with pytest.raises(TypeError):
        w.insert([(1, "a", "x"), (2, "b", "y"), ("bad", "c", "y")])
    assert str(snapshot(client, full)) == f"{full}:1:{MAX}::1"
    assert not list(loc.rglob("delta_*"))
    assert client.show_locks(db) == []
    assert client.valid_txn_list().is_txn_aborted(client.get_open_txns().txn_high_water_mark)  # ours


def test_failed_commit_aborts_and_removes_files(
    client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_transactional_table(client, db, "t", COLS)
    w = AcidWriter(client, db, "t")
    w.insert([(1, "a")])

    def broken_commit(txn_id: int, **kw: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(client, "commit_txn", broken_commit)
    with pytest.raises(RuntimeError, match="injected"):
        w.update([(1, B0, 0)], [(1, "b")])
    loc = table_dir(client, db, "t")
    assert [p.name for p in loc.iterdir()] == ["delta_0000001_0000001_0000"]
    assert str(snapshot(client, f"{db}.t")) == f"{db}.t:2:{MAX}::2"
    assert client.show_locks(db) == []


def test_statements_of_a_caller_txn(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "t", COLS)
    w = AcidWriter(client, db, "t")
    with client.transaction() as tx:
        a = w.insert([(1, "a")], txn_id=tx.txn_id)
        b = w.delete([(1, encode_bucket_property(0, 0), 0)], txn_id=tx.txn_id)
        assert (a.committed, a.write_id, a.statement_id) == (False, 1, 0)
        assert (b.write_id, b.statement_id) == (1, 1)
        assert str(snapshot(client, f"{db}.t")) == f"{db}.t:1:1:1:"
    loc = table_dir(client, db, "t")
    assert sorted(p.name for p in loc.iterdir()) == [
        "delete_delta_0000001_0000001_0001",
        "delta_0000001_0000001_0000",
    ]
    assert visible_rows(loc, snapshot(client, f"{db}.t")) == []


def test_not_transactional_is_refused(client: MetastoreClient, db: str) -> None:
    t = transactional_table(db, "plain", COLS)
    t.parameters = {}
    client.raw.create_table(t)
    with pytest.raises(ValueError, match="not a transactional"):
        AcidWriter(client, db, "plain")
    assert os.path.isdir(table_dir(client, db, "plain"))
