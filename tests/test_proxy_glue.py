"""AWS Glue behind the proxy, on a real moto server over HTTP: as a federated member (glue_config,
PREFIXED) and as a remote database created by a client with ``hivemesh.remote.via=glue``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import Database, MetaException, NoSuchObjectException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.service import ProxyService
from tests.support.moto_glue import CREDENTIAL_ENV, MotoGlue
from tests.support.proxy import write_mesh
from tests.support.servers import HivemeshProcess


def _glue_table(name: str, location: str, partitioned: bool = False) -> dict:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet"},
        "StorageDescriptor": {
            "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "amount", "Type": "double"}],
            "Location": location,
            "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
            "SerdeInfo": {
                "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
            },
        },
        "PartitionKeys": [{"Name": "day", "Type": "string"}] if partitioned else [],
    }


@pytest.fixture(scope="module")
def glue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoGlue]:
    mp = pytest.MonkeyPatch()
    for k, v in CREDENTIAL_ENV.items():
        mp.setenv(k, v)
    with MotoGlue() as server:
        c = server.client()
        c.create_database(DatabaseInput={"Name": "lake", "LocationUri": "s3://bucket/lake"})
        c.create_table(DatabaseName="lake", TableInput=_glue_table("orders", "s3://bucket/lake/orders"))
        c.create_table(DatabaseName="lake", TableInput=_glue_table("events", "s3://bucket/lake/events", True))
        for day in ("2026-01-01", "2026-01-02"):
            c.create_partition(
                DatabaseName="lake",
                TableName="events",
                PartitionInput={
                    "Values": [day],
                    "StorageDescriptor": {"Location": f"s3://bucket/lake/events/day={day}", "Columns": []},
                },
            )
        yield server
    mp.undo()


@pytest.fixture(scope="module")
def primary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    d = tmp_path_factory.mktemp("glue_primary")
    with HivemeshProcess(f"sqlite:///{d / 'm.db'}", d / "wh", d / "m.log") as p:
        yield p


def test_glue_as_federated_member_and_as_remote(
    glue: MotoGlue, primary: HivemeshProcess, tmp_path: Path
) -> None:
    cfg = write_mesh(
        tmp_path / "mesh.yaml",
        {"port": 0, "store": f"sqlite:///{tmp_path / 'proxy.db'}"},
        {"name": "main", "uris": [primary.uri], "access_control": "read_and_write_and_create"},
        [{"name": "aws", "glue_config": {"glue_endpoint": glue.endpoint_url, "region": "us-east-1"}}],
    )
    with ProxyService(cfg) as svc:
        c = MetastoreClient(svc.uri, retries=0).raw
        assert "aws_lake" in c.get_all_databases()
        t = c.get_table("aws_lake", "orders")
        assert (t.dbName, t.tableName, t.sd.location) == ("aws_lake", "orders", "s3://bucket/lake/orders")
        assert [f.type for f in t.sd.cols] == ["bigint", "double"]
        parts = c.get_partitions("aws_lake", "events", -1)
        assert [(p.dbName, p.values) for p in parts] == [
            ("aws_lake", ["2026-01-01"]),
            ("aws_lake", ["2026-01-02"]),
        ]
        assert c.get_partition_names("aws_lake", "events", -1) == ["day=2026-01-01", "day=2026-01-02"]
        with pytest.raises(NoSuchObjectException):
            c.get_table("aws_lake", "nope")
        with pytest.raises(MetaException, match="read_only"):
            c.drop_table("aws_lake", "orders", False)
        # the same catalog linked by a user as a remote database
        c.create_database(
            Database(
                name="lake_link",
                parameters={
                    "hivemesh.remote.via": "glue",
                    "hivemesh.remote.database": "lake",
                    "glue.endpoint": glue.endpoint_url,
                    "glue.region": "us-east-1",
                },
            )
        )
        db = c.get_database("lake_link")
        assert db.name == "lake_link" and db.parameters["hivemesh.remote.via"] == "glue"
        assert sorted(c.get_all_tables("lake_link")) == ["events", "orders"]
        assert c.get_table("lake_link", "events").dbName == "lake_link"
        c.drop_database("lake_link", False, False)
        assert "lake_link" not in c.get_all_databases()
        assert glue.client().get_database(Name="lake")["Database"]["Name"] == "lake"  # untouched
