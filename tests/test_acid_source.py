"""``spark.read.format("hiveacid")`` (hivemesh.spark.acid_source), the Python data source.

Real Spark on a real metastore (SQLite and PostgreSQL):

* a full-ACID table with deletes and updates, by ``load("db.t")`` and ``option("table")``, with and
  without ``with_row_ids``; an insert-only table; partition columns typed;
* partition filters pushed by Spark become a Hive filter: ``get_partitions_by_filter`` is asked
  (``get_partitions`` never), and a partition whose directory is broken is never listed;
* the read txn is committed once planning is done (no lock, no open txn left behind);
* ``valid_txns``/``valid_write_ids`` read an older snapshot;
* the filter translation itself (unit tests, no Spark job).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql.datasource import EqualNullSafe, EqualTo, GreaterThan, In, IsNull, LessThanOrEqual, Not

from hivemesh.acid.names import encode_bucket_property
from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid_source import filter_to_hive, filters_to_hive
from hivemesh.spark.session import register_hiveacid as register
from tests.support.acid import break_partition

pytestmark = pytest.mark.spark

B0 = encode_bucket_property(0)


@pytest.fixture()
def hiveacid(spark: Any) -> Any:
    register(spark)
    return spark


def rows(df: Any) -> set[tuple]:
    return {tuple(r) for r in df.collect()}


def make_sales(client: MetastoreClient, db: str) -> dict[str, str]:
    create_transactional_table(
        client, db, "sales", [("id", "int"), ("amount", "int")], [("ds", "string"), ("hr", "int")]
    )
    w = AcidWriter(client, db, "sales")
    w.insert([(1, 10, "a", 1), (2, 20, "a", 2), (3, 30, "b", 1), (4, 40, "c", 1)])
    w.update([(1, B0, 0)], [(1, 11)], partition={"ds": "a", "hr": 1})
    parts = client.call("get_partitions", db, "sales", -1)
    return {p.values[0] + "/" + p.values[1]: p.sd.location for p in parts}


def test_reads_full_acid_tables(
    hiveacid: Any, spark_metastore: Any, client: MetastoreClient, db: str
) -> None:
    spark = hiveacid
    create_transactional_table(client, db, "t", [("id", "int"), ("name", "string"), ("day", "date")])
    w = AcidWriter(client, db, "t")
    wid = w.insert([(1, "a", dt.date(2024, 1, 1)), (2, "b", None), (3, "c", dt.date(2024, 3, 1))]).write_id
    w.delete([(wid, B0, 1)])
    up = w.update([(wid, B0, 2)], [(3, "C", dt.date(2024, 3, 2))]).write_id
    df = spark.read.format("hiveacid").load(f"{db}.t")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == [
        ("id", "int"),
        ("name", "string"),
        ("day", "date"),
    ]
    assert rows(df) == {(1, "a", dt.date(2024, 1, 1)), (3, "C", dt.date(2024, 3, 2))}
    assert df.count() == 2
    assert rows(df.where("name = 'a'").select("id")) == {(1,)}
    by_option = (
        spark.read.format("hiveacid")
        .option("metastore.uri", spark_metastore.uri)
        .option("table", f"{db}.t")
        .option("with_row_ids", "true")
        .load()
    )
    assert by_option.columns == ["originalTransaction", "bucket", "rowId", "id", "name", "day"]
    assert rows(by_option.select("originalTransaction", "bucket", "rowId", "id")) == {
        (wid, B0, 0, 1),
        (up, B0, 0, 3),
    }
    # planning committed its read txn: no lock is left on the table
    assert client.show_locks(db, "t") == []


def test_insert_only_table(hiveacid: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(
        client,
        db,
        "mm",
        [("id", "int"), ("v", "string")],
        [("p", "int")],
        insert_only=True,
        file_format="parquet",
    )
    w = AcidWriter(client, db, "mm")
    w.insert([(1, "x", 7), (2, "y", 8)])
    w.insert([(3, "z", 7)])
    df = hiveacid.read.format("hiveacid").load(f"{db}.mm")
    assert rows(df) == {(1, "x", 7), (2, "y", 8), (3, "z", 7)}
    assert rows(df.where("p = 7").select("id")) == {(1,), (3,)}


def test_partition_pushdown_prunes(
    hiveacid: Any, spark_metastore: Any, client: MetastoreClient, db: str
) -> None:
    spark = hiveacid
    locations = make_sales(client, db)
    break_partition(locations["c/1"])

    def load() -> Any:  # one load per query with partition_pushdown (see the module doc)
        return spark.read.format("hiveacid").option("partition_pushdown", "true").load(f"{db}.sales")

    assert [(f.name, f.dataType.simpleString()) for f in load().schema][2:] == [
        ("ds", "string"),
        ("hr", "int"),
    ]
    before = spark_metastore.calls()
    assert rows(load().where("ds = 'a'")) == {(1, 11, "a", 1), (2, 20, "a", 2)}
    assert rows(load().where("ds in ('a', 'b') and hr = 1").select("id")) == {(1,), (3,)}
    assert rows(load().where("ds <> 'c' and amount > 15").select("id")) == {(2,), (3,)}
    assert rows(load().where("ds < 'c' and hr >= 2").select("id")) == {(2,)}
    after = spark_metastore.calls()
    assert after.get("get_partitions_by_filter", 0) >= before.get("get_partitions_by_filter", 0) + 4
    assert after.get("get_partitions", 0) == before.get("get_partitions", 0)
    # Spark pushes no OR across columns, and nothing else prunes: the broken partition is listed
    with pytest.raises(Exception, match="(?i)directory"):
        load().where("ds = 'b' or hr = 2").collect()
    with pytest.raises(Exception, match="(?i)directory"):
        load().collect()


def test_partition_filter_option(
    hiveacid: Any, spark_metastore: Any, client: MetastoreClient, db: str
) -> None:
    locations = make_sales(client, db)
    break_partition(locations["c/1"])
    df = hiveacid.read.format("hiveacid").option("partition_filter", 'ds < "c"').load(f"{db}.sales")
    before = spark_metastore.calls()
    assert rows(df.select("id")) == {(1,), (2,), (3,)}
    assert rows(df.where("hr = 1").select("id")) == {(1,), (3,)}
    after = spark_metastore.calls()
    assert after.get("get_partitions", 0) == before.get("get_partitions", 0)
    assert after.get("get_partitions_by_filter", 0) > before.get("get_partitions_by_filter", 0)


def test_default_reader_is_safe_to_reuse(hiveacid: Any, client: MetastoreClient, db: str) -> None:
    """Without partition_pushdown a filtered query does not narrow later queries over the same
    loaded DataFrame (PySpark 4.3 reuses a DataFrame's planned read, see the module doc)."""
    make_sales(client, db)
    df = hiveacid.read.format("hiveacid").load(f"{db}.sales")
    assert rows(df.where("ds = 'a'").select("id")) == {(1,), (2,)}
    assert rows(df.select("id")) == {(1,), (2,), (3,), (4,)}
    assert df.count() == 4
    assert rows(df.where("hr = 1 and ds = 'c'").select("id")) == {(4,)}
    assert df.count() == 4


def test_snapshot_options(hiveacid: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "t", [("id", "int")])
    w = AcidWriter(client, db, "t")
    w.insert([(1,), (2,)])
    txns = client.valid_txn_list()
    write_ids = client.valid_write_ids([f"{db}.t"], txns)[f"{db}.t"]
    w.insert([(3,)])
    old = (
        hiveacid.read.format("hiveacid")
        .option("valid_txns", str(txns))
        .option("valid_write_ids", str(write_ids))
        .load(f"{db}.t")
    )
    assert rows(old) == {(1,), (2,)}
    assert rows(hiveacid.read.format("hiveacid").load(f"{db}.t")) == {(1,), (2,), (3,)}


def test_not_transactional(hiveacid: Any, db: str) -> None:
    hiveacid.sql(f"CREATE TABLE {db}.plain (id INT) STORED AS ORC")
    with pytest.raises(Exception, match="not transactional"):
        hiveacid.read.format("hiveacid").load(f"{db}.plain")


# --- filter translation (no Spark job) ------------------------------------------------------------------

TYPES = {"ds": "string", "hr": "int", "day": "date", "v": "varchar(10)", "price": "decimal(10,2)"}


@pytest.mark.parametrize(
    ("spark_filter", "hive"),
    [
        (EqualTo(("ds",), "2024-01-01"), 'ds = "2024-01-01"'),
        (EqualTo(("DS",), 'say "hi"'), "ds = 'say \"hi\"'"),
        (EqualNullSafe(("hr",), 3), "hr = 3"),
        (GreaterThan(("hr",), -1), "hr > -1"),
        (LessThanOrEqual(("day",), dt.date(2024, 2, 29)), 'day <= "2024-02-29"'),
        (In(("hr",), (1, 2)), "(hr = 1 or hr = 2)"),
        (Not(In(("v",), ("x", "y"))), '(v <> "x" and v <> "y")'),
        (Not(EqualTo(("ds",), "a")), 'ds <> "a"'),
        (EqualTo(("id",), 1), None),  # not a partition column
        (EqualTo(("ds",), 1), None),  # a number for a string column
        (EqualTo(("hr",), "1"), None),  # a string for an integral column
        (EqualTo(("hr",), True), None),
        (EqualTo(("ds",), "a\\b"), None),  # backslashes cannot be written exactly
        (EqualTo(("ds",), "'\""), None),  # nor both quote kinds
        (EqualTo(("price",), 1), None),  # decimal keys: not pushed
        (EqualNullSafe(("hr",), None), None),
        (IsNull(("hr",)), None),
        (Not(GreaterThan(("hr",), 1)), None),
    ],
)
def test_filter_to_hive(spark_filter: Any, hive: str | None) -> None:
    assert filter_to_hive(spark_filter, TYPES) == hive


def test_filters_are_a_conjunction() -> None:
    filters = [EqualTo(("ds",), "a"), EqualTo(("id",), 1), In(("hr",), (1,))]
    assert filters_to_hive(filters, TYPES) == 'ds = "a" and (hr = 1)'
    assert filters_to_hive([EqualTo(("id",), 1)], TYPES) is None
