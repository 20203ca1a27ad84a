"""Spark SQL through the proxy: remotes created with plain SQL (Thrift, a two-hop SSH route through
real OpenSSH servers, AWS Glue on a local moto server), their DESCRIBE output, read-only-ness, DROP
and restart; and a federated member killed in the middle of a Spark session."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hive_metastore.ttypes import Database, FieldSchema, SerDeInfo, StorageDescriptor, Table

from tests.support.federation import Mesh, SparkSwitch, file_uri, thrift
from tests.support.moto_glue import CREDENTIAL_ENV, MotoGlue
from tests.support.proxy import ProxyProcess, write_mesh
from tests.support.servers import free_port
from tests.support.sshd import SshServer, make_key, sshd_available

pytestmark = [pytest.mark.spark, pytest.mark.proxy_spark]

PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
ROWS = [(1, 10.5), (2, 20.0), (3, 30.25)]


def _orders_files(root: Path) -> Path:
    d = root / "orders"
    d.mkdir(parents=True)
    ids, amounts = zip(*ROWS, strict=True)
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.int32()), "amount": pa.array(amounts, pa.float64())}),
        d / "part-0.parquet",
    )
    return d


def _register(client: object, db: str, location: Path) -> None:
    client.create_database(Database(name=db, locationUri=file_uri(location.parent), parameters={}))  # type: ignore[attr-defined]
    sd = StorageDescriptor(
        cols=[FieldSchema("id", "int", None), FieldSchema("amount", "double", None)],
        location=file_uri(location),
        inputFormat=PARQUET_IN,
        outputFormat=PARQUET_OUT,
        serdeInfo=SerDeInfo(serializationLib=PARQUET_SERDE, parameters={"serialization.format": "1"}),
        parameters={},
        bucketCols=[],
        sortCols=[],
        numBuckets=-1,
        compressed=False,
    )
    client.create_table(  # type: ignore[attr-defined]
        Table(
            tableName="orders",
            dbName=db,
            owner="t",
            sd=sd,
            partitionKeys=[],
            parameters={"EXTERNAL": "TRUE"},
            tableType="EXTERNAL_TABLE",
        )
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    base = tmp_path_factory.mktemp("spark_remotes")
    mesh = Mesh(base)
    switch = SparkSwitch(base)
    try:
        main = mesh.metastore("main")
        zone = mesh.metastore("zone")
        with thrift(zone) as c:
            _register(c, "sales", _orders_files(base / "zone_data" / "sales"))
        yield {"base": base, "mesh": mesh, "switch": switch, "main": main, "zone": zone}
    finally:
        switch.stop()
        mesh.close()


def _proxy(world: dict, name: str, federated: list[dict], port: int = 0) -> ProxyProcess:
    d = world["base"] / f"proxy-{name}"
    d.mkdir(exist_ok=True)
    cfg = write_mesh(
        d / "mesh.yaml",
        {
            "port": port,
            "metrics_port": 0,
            "store": f"sqlite:///{d / 'proxy.db'}",
            "status_polling_delay_ms": 500,
            "reload_on_change": False,
        },
        {"name": "main", "uris": [world["main"].uri], "access_control": "read_and_write_and_create"},
        federated,
    )
    return ProxyProcess(cfg, d / "proxy.log").start()


def _props(rows: list) -> dict[str, str]:
    """Properties out of DESCRIBE ... EXTENDED rows (Spark prints them as ((k,v), (k,v)) or k=v lines)."""
    text = " ".join(str(v) for r in rows for v in r.asDict().values() if v is not None)
    return {k: v for k, v in (p.split(",", 1) for p in text.replace("((", "(").split("(") if "," in p) if k}


def test_remotes_created_with_spark_sql(world: dict, tmp_path: Path) -> None:
    port = free_port()
    proxy = _proxy(world, "remotes", [], port=port)
    try:
        spark = world["switch"].bind(proxy.uri, world["base"] / "spark-wh")
        zone_uri = world["zone"].uri
        spark.sql(
            f"CREATE DATABASE sales_eu WITH DBPROPERTIES ('hivemesh.remote.uris'='{zone_uri}', "
            "'hivemesh.remote.database'='sales')"
        )
        assert [r.tableName for r in spark.sql("SHOW TABLES IN sales_eu").collect()] == ["orders"]
        got = spark.sql("SELECT id, amount FROM sales_eu.orders ORDER BY id").collect()
        assert [(r.id, r.amount) for r in got] == ROWS
        desc = " ".join(str(r) for r in spark.sql("DESCRIBE DATABASE EXTENDED sales_eu").collect())
        assert "hivemesh.remote.database" in desc and "sales" in desc and zone_uri in desc
        # a remote table in a local database, joined with a local table
        spark.sql("CREATE DATABASE analytics")
        spark.sql(
            "CREATE TABLE analytics.eu_orders (x INT) TBLPROPERTIES ("
            f"'hivemesh.remote.table'='sales.orders', 'hivemesh.remote.uris'='{zone_uri}')"
        )
        spark.sql("CREATE TABLE analytics.labels (id INT, label STRING) STORED AS PARQUET")
        spark.sql("INSERT INTO analytics.labels VALUES (1, 'one'), (3, 'three')")
        joined = spark.sql(
            "SELECT l.label, o.amount FROM analytics.eu_orders o JOIN analytics.labels l ON o.id = l.id ORDER BY o.id"
        ).collect()
        assert [(r.label, r.amount) for r in joined] == [("one", 10.5), ("three", 30.25)]
        tdesc = " ".join(str(r) for r in spark.sql("DESCRIBE TABLE EXTENDED analytics.eu_orders").collect())
        assert "hivemesh.remote.table" in tdesc and "sales.orders" in tdesc
        assert [r.col_name for r in spark.sql("DESCRIBE analytics.eu_orders").collect()][:2] == [
            "id",
            "amount",
        ]
        # read-only: no metadata change reaches the zone (an INSERT would be refused too, but only
        # after Spark wrote its data files: storage permissions protect data, see the README)
        with pytest.raises(Exception, match="read_only"):
            spark.sql("CREATE TABLE sales_eu.new_t (a INT) STORED AS PARQUET")
        with pytest.raises(Exception, match="read_only"):
            spark.sql("ALTER TABLE sales_eu.orders SET TBLPROPERTIES ('k'='v')")
        with thrift(world["zone"]) as z:
            assert z.get_table("sales", "orders").parameters.get("k") is None
            assert z.get_all_tables("sales") == ["orders"]
        # links survive a proxy restart (same port: Spark's Hive client reconnects)
        proxy.stop()
        proxy = ProxyProcess(proxy.config, proxy.log).start()
        assert proxy.port == port
        assert spark.sql("SELECT count(*) AS n FROM analytics.eu_orders").collect()[0].n == 3
        # DROP removes only the links
        spark.sql("DROP TABLE analytics.eu_orders")
        spark.sql("DROP DATABASE sales_eu")
        assert "sales_eu" not in [r.namespace for r in spark.sql("SHOW DATABASES").collect()]
        with thrift(world["zone"]) as z:
            assert z.get_all_tables("sales") == ["orders"]
        assert os.path.exists(world["base"] / "zone_data" / "sales" / "orders" / "part-0.parquet")
    finally:
        proxy.stop()


@pytest.mark.skipif(
    not sshd_available(), reason="needs OpenSSH's sshd (Debian package openssh-server); CI installs it"
)
def test_remote_over_two_hop_ssh_and_glue_from_spark_sql(
    world: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [make_key(tmp_path / "k" / "bastion", "rsa"), make_key(tmp_path / "k" / "target")]
    for k, v in CREDENTIAL_ENV.items():
        monkeypatch.setenv(k, v)  # the proxy subprocess inherits them (moto accepts any)
    with (
        SshServer(tmp_path / "bastion", [keys[0]], log_level="DEBUG1") as bastion,
        SshServer(tmp_path / "target", [keys[1]]) as target,
        MotoGlue() as glue,
    ):
        known = tmp_path / "known_hosts"
        known.write_text(f"{bastion.host_key_line}\n{target.host_key_line}\n")
        g = glue.client()
        g.create_database(DatabaseInput={"Name": "raw"})
        g.create_table(
            DatabaseName="raw",
            TableInput={
                "Name": "orders",
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {"EXTERNAL": "TRUE"},
                "StorageDescriptor": {
                    "Columns": [{"Name": "id", "Type": "int"}, {"Name": "amount", "Type": "double"}],
                    "Location": file_uri(world["base"] / "zone_data" / "sales" / "orders"),
                    "InputFormat": PARQUET_IN,
                    "OutputFormat": PARQUET_OUT,
                    "SerdeInfo": {
                        "SerializationLibrary": PARQUET_SERDE,
                        "Parameters": {"serialization.format": "1"},
                    },
                },
            },
        )
        proxy = _proxy(world, "ssh", [])
        try:
            spark = world["switch"].bind(proxy.uri, world["base"] / "spark-wh")
            spark.sql(
                "CREATE DATABASE emr WITH DBPROPERTIES ("
                "'hivemesh.remote.via'='ssh', "
                f"'hivemesh.remote.uris'='{world['zone'].uri}', 'hivemesh.remote.database'='sales', "
                f"'ssh.tunnel.route'='{bastion.route_hop()} -> {target.route_hop()}', "
                f"'ssh.tunnel.private.keys'='{keys[0]},{keys[1]}', 'ssh.tunnel.known.hosts'='{known}')"
            )
            assert spark.sql("SELECT sum(amount) AS s FROM emr.orders").collect()[0].s == sum(
                a for _, a in ROWS
            )
            bastion.wait_for_log(f"127.0.0.1 port {target.port}")  # the second hop went through it
            spark.sql(
                "CREATE DATABASE lake WITH DBPROPERTIES ('hivemesh.remote.via'='glue', "
                f"'hivemesh.remote.database'='raw', 'glue.endpoint'='{glue.endpoint_url}', 'glue.region'='us-east-1')"
            )
            assert spark.sql("SELECT count(*) AS n FROM lake.orders").collect()[0].n == 3
            desc = " ".join(str(r) for r in spark.sql("DESCRIBE DATABASE EXTENDED lake").collect())
            assert "glue" in desc and glue.endpoint_url in desc
            spark.sql("DROP DATABASE emr")
            spark.sql("DROP DATABASE lake")
            assert g.get_table(DatabaseName="raw", Name="orders")["Table"]["Name"] == "orders"
        finally:
            proxy.stop()


def test_member_killed_mid_session(world: dict) -> None:
    mesh: Mesh = world["mesh"]
    zone2 = mesh.metastore("zone2")
    with thrift(zone2) as c:
        _register(c, "sales", _orders_files(world["base"] / "zone2_data" / "sales"))
    proxy = _proxy(world, "kill", [{"name": "z2", "uris": [zone2.uri], "access_control": "read_only"}])
    try:
        spark = world["switch"].bind(proxy.uri, world["base"] / "spark-wh")
        spark.sql("CREATE DATABASE IF NOT EXISTS local_k")
        spark.sql("CREATE TABLE local_k.t (id INT) STORED AS PARQUET")
        spark.sql("INSERT INTO local_k.t VALUES (1), (2)")
        assert spark.sql("SELECT count(*) AS n FROM z2_sales.orders").collect()[0].n == 3
        zone2.kill()
        t0 = time.monotonic()
        assert spark.sql("SELECT count(*) AS n FROM local_k.t").collect()[0].n == 2  # others keep working
        dbs = [r.namespace for r in spark.sql("SHOW DATABASES").collect()]
        assert "local_k" in dbs and "z2_sales" not in dbs
        spark.catalog.clearCache()
        with pytest.raises(Exception, match="federated metastore 'z2'.*unavailable|failed during"):
            spark.sql("SELECT count(*) FROM z2_sales.orders").collect()
        assert time.monotonic() - t0 < 30
        zone2.start()
        deadline = time.monotonic() + 20
        while True:
            try:
                n = spark.sql("SELECT count(*) AS n FROM z2_sales.orders").collect()[0].n
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert n == 3
    finally:
        proxy.stop()
