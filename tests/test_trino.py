"""Trino (476, the ``trino-server`` bundle) as a client of a hivemesh metastore, compared with Spark.

One Trino JVM for the test session, with a ``hive`` catalog per metastore backend of the shared
Spark fixture (created on first use): Trino reads Spark-created Hive tables (with partition
pruning), Spark reads what Trino wrote through the metastore, and Trino, an independent reader of
Hive ACID, reads a hivemesh-written full ACID table with deletes with the same rows as
``read_acid``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.spark.acid import acid_session
from tests.support.trino import TrinoServer, require_trino

pytestmark = [pytest.mark.spark, pytest.mark.trino]

B0 = 536870912  # bucket 0, statement 0 (Hive's bucket property)


@pytest.fixture(scope="session")
def trino_server() -> Iterator[TrinoServer]:
    """The session's Trino server."""
    require_trino()
    server = TrinoServer().start()
    server.catalogs = set()  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def trino(trino_server: TrinoServer, spark_metastore: Any) -> tuple[TrinoServer, str]:
    """(the server, the name of its catalog on the ``spark`` fixture's metastore)."""
    name = f"hm_{spark_metastore.backend}_{spark_metastore.port}"
    if name not in trino_server.catalogs:  # type: ignore[attr-defined]
        trino_server.add_hive_catalog(name, spark_metastore.uri)
        trino_server.catalogs.add(name)  # type: ignore[attr-defined]
    return trino_server, name


def _spark_rows(spark: Any, sql: str) -> list[list[Any]]:
    return sorted([list(r) for r in spark.sql(sql).collect()])


def test_trino_reads_spark_tables_with_pruning(spark: Any, trino: tuple[TrinoServer, str], db: str) -> None:
    server, cat = trino
    spark.sql(
        f"CREATE TABLE {db}.sales (id INT, amount DOUBLE, region STRING) STORED AS ORC PARTITIONED BY (yr INT)"
    )
    spark.sql(
        f"INSERT INTO {db}.sales PARTITION (yr) VALUES (1, 1.5, 'eu', 2023), (2, 2.5, 'us', 2024), (3, 3.5, 'eu', 2024)"
    )
    spark.sql(f"CREATE TABLE {db}.plain (k STRING, v BIGINT) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {db}.plain VALUES ('a', 1), ('b', 2)")
    assert sorted(r[0] for r in server.query(f"SHOW TABLES FROM {cat}.{db}")) == ["plain", "sales"]
    assert [r[:2] for r in server.query(f"DESCRIBE {cat}.{db}.sales")] == [
        ["id", "integer"], ["amount", "double"], ["region", "varchar"], ["yr", "integer"],
    ]  # fmt: skip
    assert sorted(server.query(f"SELECT * FROM {cat}.{db}.sales")) == _spark_rows(
        spark, f"SELECT * FROM {db}.sales"
    )
    pruned = f"SELECT id, region FROM {cat}.{db}.sales WHERE yr = 2024"
    assert sorted(server.query(pruned)) == _spark_rows(
        spark, f"SELECT id, region FROM {db}.sales WHERE yr = 2024"
    )
    files = server.query(f'SELECT DISTINCT "$path" FROM {cat}.{db}.sales WHERE yr = 2024')
    assert files and all("yr=2024" in f[0] for f in files)  # only that partition's files were read
    assert sorted(server.query(f"SELECT * FROM {cat}.{db}.plain")) == [["a", 1], ["b", 2]]


def test_spark_reads_what_trino_wrote(spark: Any, trino: tuple[TrinoServer, str], db: str) -> None:
    server, cat = trino
    server.query(
        f"CREATE TABLE {cat}.{db}.events (id INTEGER, name VARCHAR, ds VARCHAR) "
        "WITH (format = 'ORC', partitioned_by = ARRAY['ds'])"
    )
    server.query(f"INSERT INTO {cat}.{db}.events VALUES (1, 'one', '2024-01-01'), (2, 'two', '2024-01-02')")
    server.query(f"INSERT INTO {cat}.{db}.events VALUES (3, 'three', '2024-01-02')")
    spark.catalog.refreshTable(f"{db}.events")
    assert _spark_rows(spark, f"SELECT * FROM {db}.events") == [
        [1, "one", "2024-01-01"], [2, "two", "2024-01-02"], [3, "three", "2024-01-02"],
    ]  # fmt: skip
    assert _spark_rows(spark, f"SHOW PARTITIONS {db}.events") == [["ds=2024-01-01"], ["ds=2024-01-02"]]


def test_trino_reads_hivemesh_acid_tables(
    spark: Any, trino: tuple[TrinoServer, str], client: Any, db: str
) -> None:
    """Trino's own Hive ACID reader (its txn and write-id snapshot from hivemesh) and read_acid
    agree on a full ACID table with a delete and an update, and on an insert-only table."""
    server, cat = trino
    create_transactional_table(client, db, "orders", [("id", "int"), ("item", "string")])
    w = AcidWriter(client, db, "orders")
    first = w.insert([(1, "apple"), (2, "pear"), (3, "plum")])
    w.insert([(4, "fig")])
    w.delete([(first.write_id, B0, 1)])  # pear
    w.update([(first.write_id, B0, 2)], [(3, "PLUM")])
    with acid_session(spark) as acid:
        want = sorted([list(r) for r in acid.read(f"{db}.orders").collect()])
    assert want == [[1, "apple"], [3, "PLUM"], [4, "fig"]]
    assert sorted(server.query(f"SELECT * FROM {cat}.{db}.orders")) == want

    create_transactional_table(client, db, "log", [("id", "int"), ("msg", "string")], insert_only=True)
    w = AcidWriter(client, db, "log")
    w.insert([(1, "a")])
    w.insert([(2, "b"), (3, "c")])
    with acid_session(spark) as acid:
        want = sorted([list(r) for r in acid.read(f"{db}.log").collect()])
    assert want == [[1, "a"], [2, "b"], [3, "c"]]
    assert sorted(server.query(f"SELECT * FROM {cat}.{db}.log")) == want
