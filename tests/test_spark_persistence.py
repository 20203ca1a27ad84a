"""The catalog really persists: another SparkSession, and a restarted metastore process, see it all.

- a second, independent SparkSession (a new Python process with its own JVM, on the same
  ``thrift://`` URI) reads what the shared session created, and what it creates is seen back;
- the metastore process is stopped and started again on the same store and port, under the live
  shared session: Spark's Hive client reconnects (the broken transport is retried) and every
  table, partition, view and function is still there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark_fixtures import SparkMetastore
from tests.support.servers import ThriftClient
from tests.support.spark_reference import run_reference, run_statements

pytestmark = pytest.mark.spark

SETUP = [
    "CREATE DATABASE {db} COMMENT 'persisted'",
    "CREATE TABLE {db}.orders (id INT, amount DECIMAL(12,2), note STRING)"
    " PARTITIONED BY (region STRING, day DATE) STORED AS ORC TBLPROPERTIES ('purpose'='persistence')",
    "INSERT INTO {db}.orders PARTITION (region, day) VALUES"
    " (1, 10.50, 'a', 'eu', DATE'2024-01-01'), (2, 3.25, NULL, 'eu', DATE'2024-01-02'),"
    " (3, 99.99, 'c', 'us', DATE'2024-01-01')",
    "CREATE TABLE {db}.items USING parquet AS SELECT id, concat('item-', id) AS name FROM range(5) AS r(id)",
    "CREATE TABLE {db}.notes (k STRING, v STRING) STORED AS TEXTFILE",
    "INSERT INTO {db}.notes VALUES ('x', 'y')",
    "CREATE VIEW {db}.v_totals AS SELECT region, sum(amount) AS total FROM {db}.orders GROUP BY region",
    "CREATE FUNCTION {db}.shout AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper'",
    "ANALYZE TABLE {db}.items COMPUTE STATISTICS FOR COLUMNS id",
]
READ = [
    "SHOW DATABASES LIKE '{db}'",
    "SHOW TABLES IN {db}",
    "SHOW VIEWS IN {db}",
    "SELECT * FROM {db}.orders",
    "SHOW PARTITIONS {db}.orders",
    "SELECT id FROM {db}.orders WHERE region = 'eu' AND day = DATE'2024-01-02'",
    "DESCRIBE {db}.orders",
    "SHOW TBLPROPERTIES {db}.orders ('purpose')",
    "SELECT * FROM {db}.items",
    "DESCRIBE EXTENDED {db}.items id",
    "SELECT * FROM {db}.notes",
    "SELECT * FROM {db}.v_totals",
    "SELECT {db}.shout(name) FROM {db}.items",
    "SHOW USER FUNCTIONS IN {db}",
]
#: Written by the second session, read back by the shared one.
SECOND_WRITES = [
    "CREATE TABLE {db}.made_by_second STORED AS PARQUET AS SELECT id * 10 AS id FROM {db}.items",
    "ALTER TABLE {db}.orders ADD PARTITION (region='apac', day=DATE'2024-02-01')",
    "INSERT INTO {db}.notes VALUES ('from', 'second')",
]


def _sorted(results: list[dict[str, Any]]) -> list[Any]:
    return [r.get("error") or sorted(map(repr, r["rows"])) for r in results]


def _setup(spark: Any, db: str) -> dict[str, str]:
    params = {"db": db, "warehouse": spark.conf.get("spark.sql.warehouse.dir")}
    done = run_statements(spark, SETUP, params)
    assert [r for r in done if "error" in r] == []
    return params


def test_second_session_sees_the_catalog(
    spark: Any, spark_metastore: SparkMetastore, unique_name: str, tmp_path: Path
) -> None:
    params = _setup(spark, unique_name)
    mine = run_statements(spark, READ, params)
    assert [r for r in mine if "error" in r] == []
    assert len(mine[3]["rows"]) == 3 and len(mine[8]["rows"]) == 5  # orders, items

    theirs = run_reference(
        READ + SECOND_WRITES, tmp_path / "second", params, metastore_uri=spark_metastore.uri
    )
    assert _sorted(theirs[: len(READ)]) == _sorted(mine)
    assert [r for r in theirs if "error" in r] == []

    # and the other way round: the shared session sees what the second one wrote
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {unique_name}.made_by_second").collect()) == [
        0,
        10,
        20,
        30,
        40,
    ]
    parts = [r.partition for r in spark.sql(f"SHOW PARTITIONS {unique_name}.orders").collect()]
    assert "region=apac/day=2024-02-01" in parts and len(parts) == 4
    notes = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {unique_name}.notes").collect())
    assert notes == [("from", "second"), ("x", "y")]
    spark.sql(f"DROP DATABASE {unique_name} CASCADE")


def test_restarted_metastore_keeps_everything(
    spark: Any, spark_metastore: SparkMetastore, unique_name: str
) -> None:
    params = _setup(spark, unique_name)
    before = run_statements(spark, READ, params)
    assert [r for r in before if "error" in r] == []
    port = spark_metastore.port

    assert spark_metastore.stop() == 0  # SIGTERM: a clean shutdown
    spark_metastore.start()
    assert spark_metastore.port == port
    assert spark_metastore.calls().get("get_table", 0) == 0  # a new process

    # the live session's Hive client reconnects (the broken transport is retried) to the new process
    after = run_statements(spark, READ, params)
    assert _sorted(after) == _sorted(before)
    assert spark_metastore.calls().get("get_table", 0) > 0

    with ThriftClient(spark_metastore.host, spark_metastore.port) as hms:
        assert sorted(hms.get_all_tables(unique_name)) == ["items", "notes", "orders", "v_totals"]
        assert sorted(hms.get_partition_names(unique_name, "orders", -1)) == [
            "region=eu/day=2024-01-01",
            "region=eu/day=2024-01-02",
            "region=us/day=2024-01-01",
        ]
        assert hms.get_function(unique_name, "shout").className.endswith("GenericUDFUpper")
        assert hms.get_table(unique_name, "orders").parameters["purpose"] == "persistence"

    # and it keeps working for writes
    spark.sql(f"INSERT INTO {unique_name}.notes VALUES ('after', 'restart')")
    assert spark.sql(f"SELECT count(*) FROM {unique_name}.notes").collect()[0][0] == 2
    spark.sql(f"DROP DATABASE {unique_name} CASCADE")
