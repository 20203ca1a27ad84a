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
