"""INSERT / DELETE / UPDATE through Spark (hivemesh.spark.acid_dml), read back with ``read_acid``.

Real Spark on a real metastore (SQLite and PostgreSQL):

* unpartitioned and dynamically partitioned full-ACID tables: insert (columns by name, any order
  and case), delete, update; the table read back equals the expected rows; the files are where and
  what Hive writes (one ``bucket_<task>`` per task, delete events per original bucket, one write
  id per statement) and every statement leaves no lock and no open txn;
* insert-only ORC and Parquet tables; a partition that lives outside its default path;
* failures (a task raising while other tasks wrote files, a condition raising at execution, the
  commit failing): nothing visible changes, the txn is aborted and the new directories are gone;
* refusals: partition columns in an update, DELETE on insert-only tables, wrong columns, plain
  tables.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.orc as po
import pytest
from hive_metastore.ttypes import Partition, TxnState
from pyspark.sql import functions as F

from hivemesh.acid.names import decode_bucket_property, parse_acid_dir
from hivemesh.acid.tables import create_transactional_table
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark import acid_dml
from hivemesh.spark.acid import NotTransactionalError, acid_session
from hivemesh.spark.acid_dml import AGENT_INFO, _remove_orphans, delete_acid, insert_acid, update_acid
from hivemesh.storage import resolve_location

pytestmark = pytest.mark.spark


def table_rows(spark: Any, table: str, *, row_ids: bool = False) -> set[tuple]:
    with acid_session(spark) as acid:
        return {tuple(r) for r in acid.read(table, with_row_ids=row_ids).collect()}


def table_dir(client: MetastoreClient, db: str, table: str) -> Path:
    return Path(resolve_location(client.raw.get_table(db, table).sd.location)[1])


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def dml_txns(client: MetastoreClient) -> dict[int, int]:
    """State (TxnState) of every open or aborted txn this module opened."""
    info = client.call("get_open_txns_info")
    return {t.id: t.state for t in info.open_txns if t.agentInfo == AGENT_INFO}


def assert_clean(client: MetastoreClient, db: str, table: str) -> None:
    assert client.show_locks(db, table) == []
    assert TxnState.OPEN not in dml_txns(client).values()


def person(i: int) -> tuple:
    day = dt.date(2024, 1, 1) + dt.timedelta(days=i)
    return (
        i,
        f"name-{i}",
        Decimal(f"{i}.50"),
        day,
        dt.datetime(2024, 2, 29, 12, 30, 1, 123456) + dt.timedelta(hours=i),
    )


def people(spark: Any, n: int, partitions: int = 3) -> Any:
    schema = "ID int, Name string, price decimal(10,2), day date, ts timestamp"
    return spark.createDataFrame([person(i) for i in range(n)], schema).repartition(partitions)


COLS = [("id", "int"), ("name", "string"), ("price", "decimal(10,2)"), ("day", "date"), ("ts", "timestamp")]


def expected(n: int) -> set[tuple]:
    return {person(i) for i in range(n)}


# --- unpartitioned ------------------------------------------------------------------------------------


@pytest.mark.spark_postgres  # also on PostgreSQL: the Spark path through a PostgreSQL store
def test_insert_delete_update(spark: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "t", COLS)
    full = f"{db}.t"
    df = people(spark, 20).select("ts", "day", "price", "Name", "ID")  # any order, any case
    r1 = insert_acid(spark, df, full)
    assert (r1.operation, r1.inserted, r1.deleted, r1.partitions) == ("insert", 20, 0, ())
    assert table_rows(spark, full) == expected(20)
    base = table_dir(client, db, "t")
    delta = f"delta_{r1.write_id:07d}_{r1.write_id:07d}_0000"
    assert tree(base) >= {delta, f"{delta}/_orc_acid_version"}
    assert {p.name for p in (base / delta).glob("bucket_*")} == {
        "bucket_00000",
        "bucket_00001",
        "bucket_00002",
    }
    assert_clean(client, db, "t")

    r2 = delete_acid(spark, full, "id % 3 = 0")
    assert (r2.operation, r2.inserted, r2.deleted) == ("delete", 0, 7)
    assert r2.write_id == r1.write_id + 1
    assert table_rows(spark, full) == {r for r in expected(20) if r[0] % 3 != 0}
    dd = base / f"delete_delta_{r2.write_id:07d}_{r2.write_id:07d}_0000"
    # one delete file per original bucket, named by it
    assert {p.name for p in dd.glob("bucket_*")} <= {"bucket_00000", "bucket_00001", "bucket_00002"}
    assert_clean(client, db, "t")

    r3 = update_acid(spark, full, {"name": F.upper("name"), "price": "price * 2"}, F.col("id") < 5)
    assert (r3.operation, r3.inserted, r3.deleted) == ("update", 3, 3)  # ids 1, 2, 4
    want = {r for r in expected(20) if r[0] % 3 != 0}
    want = {(i, n.upper(), p * 2, d, t) if i < 5 else (i, n, p, d, t) for i, n, p, d, t in want}
    assert table_rows(spark, full) == want
    # the updated rows are new rows of the update's write id; the others kept their ROW__IDs
    ids = {r[3]: r[0] for r in table_rows(spark, full, row_ids=True)}
    assert {i for i, w in ids.items() if w == r3.write_id} == {1, 2, 4}
    assert {i for i, w in ids.items() if w == r1.write_id} == {i for i in range(5, 20) if i % 3 != 0}
    assert_clean(client, db, "t")

    # INSERT ... SELECT from the table itself, read in an AcidSession (compatible locks)
    with acid_session(spark) as acid:
        source = acid.read(full).where("id > 15").withColumn("id", F.col("id") + 100)
        r_self = insert_acid(spark, source, full, session=acid)
    assert r_self.inserted == 3  # 16, 17, 19
    want |= {(i + 100, n, p, d, t) for i, n, p, d, t in want if i > 15}
    assert table_rows(spark, full) == want

    r4 = delete_acid(spark, full, None)
    assert r4.deleted == len(want)
    assert table_rows(spark, full) == set()
    # nothing to change: a committed statement that wrote nothing
    r5 = delete_acid(spark, full, "id = 1")
    assert (r5.deleted, r5.files) == (0, ())
    assert_clean(client, db, "t")


# --- partitioned ----------------------------------------------------------------------------------


def test_dynamic_partitions(spark: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(
        client, db, "p", [("id", "int"), ("v", "string")], [("ds", "string"), ("hr", "int")]
    )
    full = f"{db}.p"
    data = [(i, f"v{i}", f"2024-01-0{i % 3 + 1}", i % 2) for i in range(12)]
    df = spark.createDataFrame(data, "id int, v string, ds string, hr int").repartition(2)
    r1 = insert_acid(spark, df, full)
    assert r1.inserted == 12
    assert set(r1.partitions) == {f"ds=2024-01-0{d}/hr={h}" for d in (1, 2, 3) for h in (0, 1)}
    names = client.call("get_partition_names", db, "p", -1)
    assert sorted(names) == sorted(r1.partitions)
    assert table_rows(spark, full) == set(data)

    r2 = delete_acid(spark, full, "id > 8 or hr = 1")
    assert r2.deleted == 7
    assert set(r2.partitions) == {
        "ds=2024-01-01/hr=1",
        "ds=2024-01-02/hr=0",
        "ds=2024-01-02/hr=1",
        "ds=2024-01-03/hr=1",
    }
    r3 = update_acid(spark, full, {"v": "concat(v, '!')"}, "ds = '2024-01-01'")
    assert (r3.inserted, r3.deleted, r3.partitions) == (2, 2, ("ds=2024-01-01/hr=0",))
    want = {
        (i, v + "!" if ds == "2024-01-01" else v, ds, hr) for i, v, ds, hr in data if not (i > 8 or hr == 1)
    }
    assert table_rows(spark, full) == want
    # delete events sit in the deleted rows' partitions, one file per original bucket, sorted
    for f in r2.files:
        path = Path(resolve_location(f)[1])
        assert path.parent.name.startswith("delete_delta_")
        bucket = int(path.name.split("_")[1])
        events = po.ORCFile(str(path)).read().to_pylist()
        keys = [(e["originalTransaction"], e["bucket"], e["rowId"]) for e in events]
        assert keys == sorted(keys)
        assert {decode_bucket_property(k[1])[0] for k in keys} == {bucket}
    assert_clean(client, db, "p")


def test_partition_outside_its_default_path(
    spark: Any, client: MetastoreClient, db: str, tmp_path: Path
) -> None:
    tbl = create_transactional_table(client, db, "p", [("id", "int")], [("ds", "string")])
    elsewhere = tmp_path / "elsewhere" / "x"
    sd = tbl.sd
    sd.location = str(elsewhere)
    client.call("add_partition", Partition(values=["x"], dbName=db, tableName="p", sd=sd, parameters={}))
    df = spark.createDataFrame([(1, "x"), (2, "x"), (3, "y")], "id int, ds string")
    r = insert_acid(spark, df, f"{db}.p")
    assert set(r.partitions) == {"ds=x", "ds=y"}
    assert table_rows(spark, f"{db}.p") == {(1, "x"), (2, "x"), (3, "y")}
    assert any(p.name.startswith("delta_") for p in elsewhere.iterdir())
    assert not (table_dir(client, db, "p") / "ds=x").exists()  # moved, and the empty dir removed
    assert delete_acid(spark, f"{db}.p", "ds = 'x' and id = 1").deleted == 1
    assert table_rows(spark, f"{db}.p") == {(2, "x"), (3, "y")}
    assert any(p.name.startswith("delete_delta_") for p in elsewhere.iterdir())


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
def test_insert_only(spark: Any, client: MetastoreClient, db: str, fmt: str) -> None:
    create_transactional_table(
        client, db, "mm", [("id", "int"), ("v", "string")], [("p", "int")], insert_only=True, file_format=fmt
    )
    df = spark.createDataFrame(
        [(i, f"v{i}", i % 2) for i in range(6)], "id int, v string, p int"
    ).repartition(2)
    insert_acid(spark, df, f"{db}.mm")
    insert_acid(spark, df.where("id < 2"), f"{db}.mm")
    with acid_session(spark) as acid:
        got = sorted(tuple(r) for r in acid.read(f"{db}.mm").collect())
    assert got == sorted([(i, f"v{i}", i % 2) for i in range(6)] + [(0, "v0", 0), (1, "v1", 1)])
    with pytest.raises(NotImplementedError, match="insert-only"):
        delete_acid(spark, f"{db}.mm", "id = 1")


# --- failures -----------------------------------------------------------------------------------------


def _txns_after(client: MetastoreClient, before: dict[int, int]) -> dict[int, int]:
    return {t: s for t, s in dml_txns(client).items() if t not in before}


def test_failing_task_leaves_nothing(
    spark: Any, client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_transactional_table(client, db, "t", [("id", "int")])
    full = f"{db}.t"
    insert_acid(spark, spark.createDataFrame([(100,)], "id int"), full)
    base = table_dir(client, db, "t")
    files_before, txns_before = tree(base), dml_txns(client)
    seen: list[set[str]] = []
    original = acid_dml._remove_write_dirs

    def spy(*args: Any) -> None:  # what the cleanup finds
        seen.append(tree(base) - files_before)
        original(*args)

    monkeypatch.setattr(acid_dml, "_remove_write_dirs", spy)
    # two tasks; the second fails after the first wrote its file
    bad = spark.range(0, 10, numPartitions=2).select(
        F.when(F.col("id") == 9, F.raise_error(F.lit("boom"))).otherwise(F.col("id")).cast("int").alias("id")
    )
    with pytest.raises(Exception, match="boom"):
        insert_acid(spark, bad, full)
    assert any(p.endswith("/bucket_00000") for p in seen[0])  # the first task's file was written
    assert table_rows(spark, full) == {(100,)}
    assert tree(base) == files_before
    assert list(_txns_after(client, txns_before).values()) == [TxnState.ABORTED]
    assert_clean(client, db, "t")


def test_failing_condition_leaves_nothing(spark: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "p", [("id", "int")], [("k", "int")])
    full = f"{db}.p"
    insert_acid(spark, spark.createDataFrame([(i, i % 3) for i in range(9)], "id int, k int"), full)
    base = table_dir(client, db, "p")
    files_before, txns_before = tree(base), dml_txns(client)
    with pytest.raises(Exception, match="no such row"):
        delete_acid(spark, full, "case when id = 7 then raise_error('no such row') else id < 5 end")
    with pytest.raises(Exception, match="no such value"):
        update_acid(
            spark, full, {"id": "case when id = 4 then raise_error('no such value') else id end"}, "id > 1"
        )
    assert table_rows(spark, full) == {(i, i % 3) for i in range(9)}
    assert tree(base) == files_before
    assert list(_txns_after(client, txns_before).values()) == [TxnState.ABORTED, TxnState.ABORTED]
    assert_clean(client, db, "p")


def test_failing_commit_aborts_and_removes_files(
    spark: Any, client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_transactional_table(client, db, "p", [("id", "int")], [("k", "int")])
    full = f"{db}.p"
    insert_acid(spark, spark.createDataFrame([(i, i % 2) for i in range(6)], "id int, k int"), full)
    base = table_dir(client, db, "p")
    files_before, txns_before = tree(base), dml_txns(client)

    def refuse(self: MetastoreClient, txn_id: int, **kwargs: Any) -> None:
        raise RuntimeError("injected commit failure")

    monkeypatch.setattr(MetastoreClient, "commit_txn", refuse)
    with pytest.raises(RuntimeError, match="injected"):
        update_acid(spark, full, {"id": "id + 100"}, "k = 1")
    with pytest.raises(RuntimeError, match="injected"):
        insert_acid(spark, spark.createDataFrame([(50, 7)], "id int, k int"), full)
    monkeypatch.undo()
    assert table_rows(spark, full) == {(i, i % 2) for i in range(6)}
    # the insert created partition k=7 (as Hive's MoveTask would) but no file stays in it
    assert {p for p in tree(base) - files_before if parse_acid_dir(Path(p).name)} == set()
    assert list(_txns_after(client, txns_before).values()) == [TxnState.ABORTED, TxnState.ABORTED]
    assert_clean(client, db, "p")


def test_remove_orphans(tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    for name in ("bucket_00000", "bucket_00001", "bucket_00001_7", "_orc_acid_version"):
        (tmp_path / name).write_text("x")
    _remove_orphans(pafs.LocalFileSystem(), str(tmp_path), {"bucket_00000", "bucket_00001_7"})
    assert {p.name for p in tmp_path.iterdir()} == {"bucket_00000", "bucket_00001_7", "_orc_acid_version"}


# --- refusals -----------------------------------------------------------------------------------------


def test_refusals(spark: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "p", [("id", "int"), ("v", "string")], [("k", "int")])
    full = f"{db}.p"
    with pytest.raises(ValueError, match="partition column"):
        update_acid(spark, full, {"k": "1"}, None)
    with pytest.raises(ValueError, match="no column"):
        update_acid(spark, full, {"nope": "1"}, None)
    with pytest.raises(ValueError, match="missing"):
        insert_acid(spark, spark.createDataFrame([(1, "a")], "id int, v string"), full)
    with pytest.raises(ValueError, match="extra"):
        insert_acid(spark, spark.createDataFrame([(1, "a", 1, 2)], "id int, v string, k int, x int"), full)
    spark.sql(f"CREATE TABLE {db}.plain (id INT) STORED AS ORC")
    with pytest.raises(NotTransactionalError):
        insert_acid(spark, spark.createDataFrame([(1,)], "id int"), f"{db}.plain")
    assert dml_txns(client) == {} or TxnState.OPEN not in dml_txns(client).values()
