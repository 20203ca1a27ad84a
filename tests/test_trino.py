"""Trino (476, the ``trino-server`` bundle) as a client of a hivemesh metastore, compared with Spark.

One Trino JVM for the test session, with a ``hive`` catalog per metastore backend of the shared
Spark fixture (created on first use): Trino reads Spark-created Hive tables (with partition
pruning), Spark reads what Trino wrote through the metastore, and Trino, an independent reader of
Hive ACID, reads a hivemesh-written full ACID table with deletes with the same rows as
``read_acid``.

Trino's ``iceberg`` connector (``iceberg.catalog.type = hive_metastore``) reads a partitioned
Iceberg table that pyiceberg's ``HiveCatalog`` created and appended to (twice) on the same
metastore, with the same rows, snapshots and pruning, and its own commit is seen by pyiceberg. And a
``hive`` catalog pointed at a ``hivemesh proxy`` (PREFIXED, the Spark fixture's metastore federated
under ``sp_`` with writes allowed) reads Spark's partitioned table under the proxy's name for its
database, while what Trino creates and inserts through the proxy is read by Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.access import is_write
from hivemesh.spark.acid import acid_session
from tests.support import federation as fed
from tests.support.trino import TrinoServer

pytestmark = [pytest.mark.spark, pytest.mark.trino]

B0 = 536870912  # bucket 0, statement 0 (Hive's bucket property)


def _catalog(server: TrinoServer, kind: str, metastore: Any) -> tuple[TrinoServer, str]:
    """(the server, the name of its ``kind`` catalog on ``metastore``), created on first use."""
    name = f"{kind}_{metastore.backend}_{metastore.port}"
    if name not in server.catalogs:  # type: ignore[attr-defined]
        getattr(server, f"add_{kind}_catalog")(name, metastore.uri)
        server.catalogs.add(name)  # type: ignore[attr-defined]
    return server, name


@pytest.fixture()
def trino(trino_server: TrinoServer, spark_metastore: Any) -> tuple[TrinoServer, str]:
    """(the server, the name of its ``hive`` catalog on the ``spark`` fixture's metastore)."""
    return _catalog(trino_server, "hive", spark_metastore)


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


# ------------------------------------------------------------------------------------ Iceberg

# pyiceberg polls check_lock with waits from 2 s up; short polls keep its commits quick
ICEBERG_LOCK_POLLING = {
    "lock-check-min-wait-time": "0.02",
    "lock-check-max-wait-time": "0.1",
    "lock-check-retries": "600",
}


@pytest.fixture()
def trino_iceberg(trino_server: TrinoServer, spark_metastore: Any) -> tuple[TrinoServer, str]:
    """(the server, the name of its ``iceberg`` catalog on the ``spark`` fixture's metastore)."""
    return _catalog(trino_server, "iceberg", spark_metastore)


def test_trino_reads_pyiceberg_tables(
    trino_iceberg: tuple[TrinoServer, str],
    spark_metastore: Any,
    client: MetastoreClient,
    db: str,
    tmp_path: Path,
) -> None:
    """pyiceberg creates a table partitioned by ``region`` and appends twice; Trino's Iceberg
    connector, finding it through the metastore's ``metadata_location``, reads the same rows, the
    same two snapshots (and the first by time travel), prunes by partition; pyiceberg reads what
    Trino then inserts."""
    from pyiceberg.catalog.hive import HiveCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    server, cat = trino_iceberg
    catalog = HiveCatalog(
        "hm", uri=spark_metastore.uri, warehouse=f"file://{tmp_path / 'warehouse'}", **ICEBERG_LOCK_POLLING
    )
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "region", StringType(), required=False),
        NestedField(4, "amount", DoubleType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="region")
    )
    table = catalog.create_table(
        f"{db}.events", schema, partition_spec=spec, location=f"file://{tmp_path / 'events'}"
    )
    arrow = schema.as_arrow()
    first = {
        "id": [1, 2, 3],
        "name": ["a", "b", "c"],
        "region": ["eu", "us", "eu"],
        "amount": [1.5, 2.5, 3.5],
    }
    table.append(pa.table(first, schema=arrow))
    second = {"id": [4, 5], "name": ["d", "e"], "region": ["us", "ap"], "amount": [4.5, None]}
    table.append(pa.table(second, schema=arrow))
    hive = client.raw.get_table(db, "events")
    assert hive.parameters["table_type"] == "ICEBERG"
    assert hive.parameters["metadata_location"] == table.metadata_location

    want = sorted(
        [[r["id"], r["name"], r["region"], r["amount"]] for r in table.scan().to_arrow().to_pylist()]
    )
    assert want == [
        [1, "a", "eu", 1.5],
        [2, "b", "us", 2.5],
        [3, "c", "eu", 3.5],
        [4, "d", "us", 4.5],
        [5, "e", "ap", None],
    ]
    t = f"{cat}.{db}.events"
    assert [r[:2] for r in server.query(f"DESCRIBE {t}")] == [
        ["id", "bigint"], ["name", "varchar"], ["region", "varchar"], ["amount", "double"],
    ]  # fmt: skip
    assert sorted(server.query(f"SELECT id, name, region, amount FROM {t}")) == want
    assert server.query(f"SELECT count(*), sum(amount) FROM {t}") == [[5, 12.0]]
    assert sorted(server.query(f"SELECT id FROM {t} WHERE region = 'eu'")) == [[1], [3]]
    files = server.query(f"SELECT DISTINCT \"$path\" FROM {t} WHERE region = 'us'")
    assert len(files) == 2 and all("/region=us/" in f[0] for f in files)  # one file per append

    s1, s2 = (s.snapshot_id for s in table.snapshots())
    snaps = f'{cat}.{db}."events$snapshots"'
    assert server.query(f"SELECT count(*) FROM {snaps}") == [[2]]
    assert server.query(f"SELECT snapshot_id, parent_id, operation FROM {snaps} ORDER BY committed_at") == [
        [s1, None, "append"], [s2, s1, "append"],
    ]  # fmt: skip
    assert sorted(server.query(f"SELECT id FROM {t} FOR VERSION AS OF {s1}")) == [[1], [2], [3]]
    parts = f'{cat}.{db}."events$partitions"'
    assert sorted(server.query(f"SELECT partition.region, record_count FROM {parts}")) == [
        ["ap", 1], ["eu", 2], ["us", 2],
    ]  # fmt: skip

    # Trino commits through the metastore (lock, alter_table to a new metadata_location); pyiceberg sees it
    server.query(f"INSERT INTO {t} VALUES (6, 'f', 'eu', 6.5)")
    table = catalog.load_table(f"{db}.events")
    assert client.raw.get_table(db, "events").parameters["metadata_location"] == table.metadata_location
    assert [s.snapshot_id for s in table.snapshots()][:2] == [s1, s2] and len(table.snapshots()) == 3
    got = sorted(
        [[r["id"], r["name"], r["region"], r["amount"]] for r in table.scan().to_arrow().to_pylist()]
    )
    assert got == [*want, [6, "f", "eu", 6.5]]
    assert sorted(server.query(f"SELECT id FROM {t} WHERE region = 'eu'")) == [[1], [3], [6]]


# ------------------------------------------------------------------------------------ proxy


@pytest.fixture(scope="module")
def trino_proxy(
    trino_server: TrinoServer, spark_metastore: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimpleNamespace]:
    """A PREFIXED ``hivemesh proxy``: a fresh hivemesh metastore as primary and the ``spark``
    fixture's metastore federated under ``sp_`` (writes allowed to every database), with a Trino
    ``hive`` catalog on the proxy. ``prefix``, ``catalog``, ``proxy``."""
    mesh = fed.Mesh(tmp_path_factory.mktemp(f"trino-proxy-{spark_metastore.backend}"))
    name = None
    try:
        primary = mesh.metastore("primary")
        proxy = mesh.proxy(
            "trino",
            "prefixed",
            {"name": "primary", "uris": [primary.uri], "access_control": "read_and_write_and_create"},
            [
                {
                    "name": "sp",
                    "uris": [spark_metastore.uri],
                    "database_prefix": "sp_",
                    "access_control": "read_and_write_on_database_whitelist",
                    "writable_database_white_list": [".*"],
                }
            ],
        )
        mesh.wait_available("trino", "sp")
        name = f"px_{spark_metastore.backend}_{proxy.port}"
        trino_server.add_hive_catalog(name, proxy.uri)
        yield SimpleNamespace(prefix="sp_", catalog=name, proxy=proxy)
    finally:
        if name is not None:
            trino_server.query(f"DROP CATALOG {name}")
        mesh.close()


def test_trino_through_proxy_and_spark(
    spark: Any, trino_server: TrinoServer, trino_proxy: SimpleNamespace, client: MetastoreClient, db: str
) -> None:
    """Trino on the proxy reads Spark's partitioned table (database ``sp_<db>`` there) with the
    same rows as Spark, pruned by partition; its CREATE TABLE AS and INSERT through the proxy land
    in ``<db>`` of the Spark fixture's metastore, where Spark reads them."""
    server, cat, pdb = trino_server, trino_proxy.catalog, f"{trino_proxy.prefix}{db}"
    spark.sql(
        f"CREATE TABLE {db}.sales (id INT, amount DOUBLE, region STRING) STORED AS ORC PARTITIONED BY (yr INT)"
    )
    spark.sql(
        f"INSERT INTO {db}.sales PARTITION (yr) VALUES "
        "(1, 1.5, 'eu', 2023), (2, 2.5, 'us', 2024), (3, 3.5, 'eu', 2024), (4, 4.5, 'ap', 2025)"
    )
    assert [pdb] == [r[0] for r in server.query(f"SHOW SCHEMAS FROM {cat} LIKE '{pdb}'")]
    assert [r[0] for r in server.query(f"SHOW TABLES FROM {cat}.{pdb}")] == ["sales"]
    spark_rows = _spark_rows(spark, f"SELECT * FROM {db}.sales")
    assert len(spark_rows) == 4
    assert sorted(server.query(f"SELECT * FROM {cat}.{pdb}.sales")) == spark_rows
    assert sorted(server.query(f"SELECT id, region FROM {cat}.{pdb}.sales WHERE yr = 2024")) == _spark_rows(
        spark, f"SELECT id, region FROM {db}.sales WHERE yr = 2024"
    )
    files = server.query(f'SELECT DISTINCT "$path" FROM {cat}.{pdb}.sales WHERE yr = 2024')
    assert files and all("yr=2024" in f[0] for f in files)
    assert sorted(server.query(f'SELECT "$partition" FROM {cat}.{pdb}.sales GROUP BY 1')) == [
        ["yr=2023"], ["yr=2024"], ["yr=2025"],
    ]  # fmt: skip

    server.query(
        f"CREATE TABLE {cat}.{pdb}.big WITH (format = 'PARQUET', partitioned_by = ARRAY['region']) "
        f"AS SELECT id, amount * 10 AS amount10, region FROM {cat}.{pdb}.sales WHERE amount > 2"
    )
    server.query(f"INSERT INTO {cat}.{pdb}.big VALUES (9, 99.0, 'eu'), (10, 100.0, 'sa')")
    routed = fed.member_calls(trino_proxy.proxy)  # (member, method) -> calls the proxy sent
    assert routed.get(("sp", "create_table")) == 1 and routed.get(("sp", "add_partitions"), 0) >= 2, routed
    assert not [m for (member, m) in routed if member == "primary" and is_write(m)], routed
    stored = client.raw.get_table(db, "big")  # on the member, under its own name
    assert (stored.dbName, [k.name for k in stored.partitionKeys]) == (db, ["region"])
    want = [[2, 25.0, "us"], [3, 35.0, "eu"], [4, 45.0, "ap"], [9, 99.0, "eu"], [10, 100.0, "sa"]]
    assert sorted(server.query(f"SELECT * FROM {cat}.{pdb}.big")) == want
    spark.catalog.refreshTable(f"{db}.big")
    assert _spark_rows(spark, f"SELECT * FROM {db}.big") == want
    assert _spark_rows(spark, f"SHOW PARTITIONS {db}.big") == [
        ["region=ap"], ["region=eu"], ["region=sa"], ["region=us"],
    ]  # fmt: skip
    assert _spark_rows(spark, f"SELECT id FROM {db}.big WHERE region = 'eu'") == [[3], [9]]


def test_trino_reads_delta_replicas(trino_server: TrinoServer, tmp_path: Path) -> None:
    """Trino's ``delta_lake`` connector on the target metastore of a ``format: delta`` policy
    reads the replicas by name: a partitioned ORC table after a column rename (a column-mapped
    replica with a file converted after the rename), and an ACID table, with ``FOR VERSION AS
    OF`` the Delta version of a write id equal to that Hive snapshot."""
    import pyarrow.orc as paorc
    from deltalake import DeltaTable
    from hive_metastore.ttypes import Database, FieldSchema, Partition

    from hivemesh.replication.config import parse_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore
    from hivemesh.storage.locations import local_path
    from tests.support.servers import HivemeshProcess, ThriftClient
    from tests.test_replication import _warehouse
    from tests.test_replication_delta import ORC, _sd, _table, _write

    with (
        HivemeshProcess(f"sqlite:///{tmp_path / 'a.db'}", tmp_path / "wa", tmp_path / "a.log") as zone_a,
        HivemeshProcess(f"sqlite:///{tmp_path / 'b.db'}", tmp_path / "wb", tmp_path / "b.log") as zone_b,
        ThriftClient(zone_a.host, zone_a.port) as a,
        ThriftClient(zone_b.host, zone_b.port) as b,
        MetastoreClient(zone_a.uri) as src,
    ):
        db = "dl_trino"
        a.create_database(Database(name=db))
        orders = _table(a, db, "orders", [FieldSchema("id", "bigint", None), FieldSchema("amount", "double", None)],
                        ORC, [FieldSchema("region", "string", None)])  # fmt: skip
        for region, ids in (("eu", [1, 2]), ("us", [3])):
            loc = f"{orders.sd.location}/region={region}"
            _write(loc, "000000_0", pa.table({"id": ids, "amount": [i * 1.5 for i in ids]}), ORC)
            a.add_partition(
                Partition(
                    values=[region],
                    dbName=db,
                    tableName="orders",
                    sd=_sd(orders.sd.cols, ORC, loc),
                    parameters={},
                )
            )
        create_transactional_table(src, db, "events", [("id", "bigint"), ("v", "string")])
        cfg = parse_replication_config({
            "zones": {"a": {"metastore": zone_a.uri, "warehouse": _warehouse(a)},
                      "b": {"metastore": zone_b.uri, "warehouse": _warehouse(b)}},
            "replication": {"store": f"sqlite:///{tmp_path / 'r.db'}",
                            "policies": [{"name": "to-delta", "source": "a", "target": "b", "databases": [db], "format": "delta"}]},
        })  # fmt: skip
        store = ReplicationStore(cfg.replication.store)
        assert run_once(cfg, store) == {}  # the bootstrap; then one Delta commit per write id
        w = AcidWriter(src, db, "events")
        w.insert([(i, f"r{i}") for i in range(6)])
        w.insert([(i, f"s{i}") for i in range(6, 9)])
        assert run_once(cfg, store) == {}
        orders = a.get_table(db, "orders")
        orders.sd.cols = [FieldSchema("order_id", "bigint", None), orders.sd.cols[1]]
        a.alter_table(db, "orders", orders)
        paorc.write_table(
            pa.table({"id": [4], "amount": [6.0]}), local_path(f"{orders.sd.location}/region=us/000001_0")
        )
        a.alter_partition(db, "orders", a.get_partition(db, "orders", ["us"]))
        assert run_once(cfg, store) == {}
        store.dispose()

        server, catalog = trino_server, f"delta_{zone_b.port}"
        server.add_delta_catalog(catalog, zone_b.uri)
        rows = server.query(f"SELECT order_id, amount, region FROM {catalog}.{db}.orders ORDER BY order_id")
        assert rows == [[1, 1.5, "eu"], [2, 3.0, "eu"], [3, 4.5, "us"], [4, 6.0, "us"]]
        assert server.query(f"SELECT count(*) FROM {catalog}.{db}.orders WHERE region = 'us'") == [[2]]
        path = local_path(b.get_table(db, "events").sd.location)
        history = {h["version"]: h for h in DeltaTable(path).history()}
        first = next(
            v for v, h in history.items() if "hivemesh.writeId" in h and int(h["hivemesh.writeId"]) == 1
        )
        assert server.query(f"SELECT count(*) FROM {catalog}.{db}.events") == [[9]]
        assert server.query(f"SELECT count(*) FROM {catalog}.{db}.events FOR VERSION AS OF {first}") == [[6]]
