"""Delta Lake for Spark on a hivemesh metastore: ``hivemesh.spark.session(..., delta=True)``.

Delta tables created through Spark SQL are registered in the hivemesh metastore the way Spark's
Delta catalog registers them (provider ``delta``, the table's location holding ``_delta_log``),
and Delta's DML (UPDATE, DELETE, MERGE) and time travel work on them. A Delta-enabled session
needs Delta's SQL extension, a static setting, so this module stops the shared SparkSession and
builds its own in the same JVM (the suite's JVM starts with Delta's jars on its class path): it is
marked ``proxy_spark`` and runs last.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hivemesh.spark
from hivemesh.client.metastore import MetastoreClient
from hivemesh.jvm import JvmArtifactError, resolve
from tests.support.servers import HivemeshProcess
from tests.support.spark_reference import SPARK_MASTER, SPARK_TEST_CONF, driver_java_options, write_log4j2

pytestmark = [pytest.mark.spark, pytest.mark.proxy_spark]


def _require_delta() -> None:
    try:
        resolve("delta")
    except JvmArtifactError as e:
        reason = f"needs Delta Lake for Spark from Maven Central (hivemesh.jvm bundle 'delta'): {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """A Delta-enabled SparkSession on its own hivemesh metastore (SQLite), and that metastore."""
    _require_delta()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    base = tmp_path_factory.mktemp("delta")
    with HivemeshProcess(
        f"sqlite:///{base / 'metastore.db'}", base / "warehouse", base / "metastore.log"
    ) as ms:
        conf = dict(SPARK_TEST_CONF)
        log4j2 = write_log4j2(base / "log4j2.properties")
        conf["spark.driver.extraJavaOptions"] = driver_java_options(log4j2)
        conf["spark.pyspark.python"] = sys.executable
        spark = hivemesh.spark.session(
            ms.uri,
            warehouse=str(ms.warehouse),
            app_name="hivemesh-delta",
            master=SPARK_MASTER,
            delta=True,
            **conf,
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            yield spark, ms
        finally:
            spark.stop()


def test_session_sets_delta_extension_and_catalog(delta_spark: tuple) -> None:
    spark, _ = delta_spark
    assert "io.delta.sql.DeltaSparkSessionExtension" in spark.conf.get("spark.sql.extensions")
    assert (
        spark.conf.get("spark.sql.catalog.spark_catalog") == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    )


def test_delta_table_in_hivemesh_metastore(delta_spark: tuple, tmp_path: Path) -> None:
    spark, ms = delta_spark
    spark.sql(f"CREATE DATABASE dl LOCATION '{tmp_path / 'dl'}'")
    spark.sql(
        "CREATE TABLE dl.orders (id INT, amount DOUBLE, region STRING) USING delta PARTITIONED BY (region)"
    )
    spark.sql("INSERT INTO dl.orders VALUES (1, 10.0, 'eu'), (2, 20.0, 'us'), (3, 30.0, 'eu')")
    spark.sql("UPDATE dl.orders SET amount = amount * 2 WHERE region = 'eu'")
    spark.sql("DELETE FROM dl.orders WHERE id = 2")
    spark.sql(
        "MERGE INTO dl.orders t USING (SELECT 4 AS id, 40.0 AS amount, 'us' AS region) s "
        "ON t.id = s.id WHEN NOT MATCHED THEN INSERT *"
    )
    rows = sorted(tuple(r) for r in spark.sql("SELECT id, amount, region FROM dl.orders").collect())
    assert rows == [(1, 20.0, "eu"), (3, 60.0, "eu"), (4, 40.0, "us")]

    # registered in the hivemesh metastore as Spark's Delta catalog does
    with MetastoreClient(ms.uri) as client:
        table = client.raw.get_table("dl", "orders")
    assert table.parameters.get("spark.sql.sources.provider") == "delta"
    location = Path(table.sd.location.removeprefix("file:"))
    commits = sorted((location / "_delta_log").glob("*.json"))
    assert len(commits) == 5  # CREATE, INSERT, UPDATE, DELETE, MERGE
    first = [json.loads(line) for line in commits[0].read_text().splitlines()]
    meta = next(a["metaData"] for a in first if "metaData" in a)
    assert meta["partitionColumns"] == ["region"]

    # time travel reads version 1 (after the INSERT) from the same table name
    v1 = sorted(tuple(r) for r in spark.sql("SELECT id, amount FROM dl.orders VERSION AS OF 1").collect())
    assert v1 == [(1, 10.0), (2, 20.0), (3, 30.0)]
    history = spark.sql("DESCRIBE HISTORY dl.orders").select("operation").collect()
    assert [r.operation for r in history][::-1] == ["CREATE TABLE", "WRITE", "UPDATE", "DELETE", "MERGE"]


def test_hive_and_delta_tables_side_by_side(delta_spark: tuple, tmp_path: Path) -> None:
    """Delta's catalog delegates non-Delta tables to the Hive metastore unchanged."""
    spark, ms = delta_spark
    spark.sql(f"CREATE DATABASE mixed LOCATION '{tmp_path / 'mixed'}'")
    spark.sql("CREATE TABLE mixed.h (id INT) STORED AS ORC")
    spark.sql("CREATE TABLE mixed.d (id INT) USING delta")
    spark.sql("INSERT INTO mixed.h VALUES (1), (2)")
    spark.sql("INSERT INTO mixed.d SELECT id * 10 FROM mixed.h")
    assert sorted(r.id for r in spark.sql("SELECT id FROM mixed.d").collect()) == [10, 20]
    with MetastoreClient(ms.uri) as client:
        h = client.raw.get_table("mixed", "h")
        d = client.raw.get_table("mixed", "d")
    assert "orc" in h.sd.inputFormat.lower()
    assert d.parameters.get("spark.sql.sources.provider") == "delta"
    assert sorted(r.tableName for r in spark.sql("SHOW TABLES IN mixed").collect()) == ["d", "h"]


def test_replicated_delta_tables_read_by_spark(
    delta_spark: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``format: delta`` policy from a hivemesh zone of Hive tables into this session's
    metastore, its conversions run as Spark jobs on this session (``spark_copy_threshold_mb: 0``):
    Spark with Delta reads every replica by name and by path, equal to the source, and ``VERSION
    AS OF`` the Delta version of an ACID write id equals that Hive snapshot."""
    import logging

    caplog.set_level(logging.INFO, logger="hivemesh.replication.delta")
    import pyarrow as pa
    from hive_metastore.ttypes import Database, FieldSchema, Partition

    from hivemesh.acid.arrow_reader import read_acid_location, table_layout
    from hivemesh.acid.tables import create_transactional_table
    from hivemesh.acid.writer import AcidWriter
    from hivemesh.replication.config import parse_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore
    from hivemesh.storage.locations import local_path
    from tests.support.servers import ThriftClient
    from tests.test_replication import _warehouse
    from tests.test_replication_delta import ORC, PARQUET, _sd, _table, _write

    spark, ms = delta_spark
    with (
        HivemeshProcess(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "wa", tmp_path / "a.log") as zone_a,
        ThriftClient(zone_a.host, zone_a.port) as ca,
        ThriftClient(ms.host, ms.port) as cb,
        MetastoreClient(zone_a.uri) as src,
    ):
        a, b = ca, cb
        db = "dl_spark"
        a.create_database(Database(name=db))
        orders = _table(a, db, "orders", [FieldSchema("id", "bigint", None), FieldSchema("amount", "decimal(10,2)", None),
                                          FieldSchema("ts", "timestamp", None)], ORC, [FieldSchema("day", "date", None)])  # fmt: skip
        import datetime as dt
        from decimal import Decimal

        for day, ids in (("2024-01-01", [1, 2]), ("2024-01-02", [3])):
            loc = f"{orders.sd.location}/day={day}"
            _write(loc, "000000_0", pa.table({
                "id": ids, "amount": pa.array([Decimal(f"{i}.50") for i in ids], pa.decimal128(10, 2)),
                "ts": pa.array([dt.datetime(2024, 1, 1, 12, i) for i in ids], pa.timestamp("ns")),
            }), ORC)  # fmt: skip
            a.add_partition(
                Partition(
                    values=[day],
                    dbName=db,
                    tableName="orders",
                    sd=_sd(orders.sd.cols, ORC, loc),
                    parameters={},
                )
            )
        items = _table(a, db, "items", [FieldSchema("sku", "string", None), FieldSchema("tags", "array<string>", None),
                                        FieldSchema("attrs", "map<string,int>", None)], PARQUET)  # fmt: skip
        _write(items.sd.location, "p.parquet", pa.table({
            "sku": ["a"], "tags": [["x", "y"]], "attrs": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int32())),
        }), PARQUET)  # fmt: skip
        create_transactional_table(src, db, "events", [("id", "bigint"), ("v", "string")])
        cfg = parse_replication_config({
            "zones": {"a": {"metastore": zone_a.uri, "warehouse": _warehouse(a)},
                      "b": {"metastore": ms.uri, "warehouse": _warehouse(b)}},
            "replication": {"store": f"sqlite:///{tmp_path / 'r.db'}", "spark_copy_threshold_mb": 0,
                            "policies": [{"name": "to-delta", "source": "a", "target": "b", "databases": [db], "format": "delta"}]},
        })  # fmt: skip
        store = ReplicationStore(cfg.replication.store)
        assert run_once(cfg, store) == {}
        w = AcidWriter(src, db, "events")
        w.insert([(i, f"r{i}") for i in range(10)])
        rows = read_acid_location(local_path(a.get_table(db, "events").sd.location), f"{db}.events:1:{2**63 - 1}::",
                                  table_layout(a.get_table(db, "events")), with_row_ids=True)  # fmt: skip
        w.delete(
            rows.filter(pa.compute.less(rows["id"], 3)).select(["originalTransaction", "bucket", "rowId"])
        )
        # a column renamed at the source: column mapping on the replica, and a file converted
        # afterwards (physical column names, written by delta-rs) read by Spark with the others
        orders = a.get_table(db, "orders")
        orders.sd.cols = [orders.sd.cols[0], FieldSchema("total", "decimal(10,2)", None), orders.sd.cols[2]]
        a.alter_table(db, "orders", orders)
        loc = f"{orders.sd.location}/day=2024-01-02"
        _write(loc, "000001_0", pa.table({
            "id": [4], "total": pa.array([Decimal("4.50")], pa.decimal128(10, 2)),
            "ts": pa.array([dt.datetime(2024, 1, 1, 12, 4)], pa.timestamp("ns")),
        }), ORC)  # fmt: skip
        a.alter_partition(db, "orders", a.get_partition(db, "orders", ["2024-01-02"]))
        assert run_once(cfg, store) == {}
        store.dispose()

        assert "as a Spark job" in caplog.text
        got = sorted(tuple(r) for r in spark.sql(f"SELECT id, total, ts, day FROM {db}.orders").collect())
        assert got == [
            (1, Decimal("1.50"), dt.datetime(2024, 1, 1, 12, 1), dt.date(2024, 1, 1)),
            (2, Decimal("2.50"), dt.datetime(2024, 1, 1, 12, 2), dt.date(2024, 1, 1)),
            (3, Decimal("3.50"), dt.datetime(2024, 1, 1, 12, 3), dt.date(2024, 1, 2)),
            (4, Decimal("4.50"), dt.datetime(2024, 1, 1, 12, 4), dt.date(2024, 1, 2)),
        ]
        props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {db}.orders").collect()}
        assert props["delta.columnMapping.mode"] == "name"
        assert spark.sql(f"SELECT count(*) FROM {db}.orders WHERE day = DATE'2024-01-02'").first()[0] == 2
        assert [tuple(r) for r in spark.sql(f"SELECT sku, tags, attrs FROM {db}.items").collect()] == [
            ("a", ["x", "y"], {"k": 1})
        ]
        path = b.get_table(db, "events").sd.location
        latest = sorted(r.id for r in spark.read.format("delta").load(path).collect())
        assert latest == list(range(3, 10))
        history = {r.version: r for r in spark.sql(f"DESCRIBE HISTORY {db}.events").collect()}
        assert len(history) == 3  # created, write id 1, write id 2
        v1 = sorted(r.id for r in spark.sql(f"SELECT id FROM {db}.events VERSION AS OF 1").collect())
        assert v1 == list(range(10))
        assert spark.sql(f"SELECT count(*) FROM {db}.events VERSION AS OF 2").first()[0] == 7
