"""AWS Glue behind the proxy, on a real moto server over HTTP: as a federated member (glue_config,
PREFIXED) and as a remote database created by a client with ``hivemesh.remote.via=glue``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import Database, MetaException, NoSuchObjectException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.service import ProxyService
from tests.support.moto_glue import CREDENTIAL_ENV, GluePagingProxy, MotoGlue
from tests.support.proxy import write_mesh
from tests.support.servers import HivemeshProcess, free_port


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


class _FailingGlue(GluePagingProxy):
    """Forwards to moto until ``refuse`` is set, then answers every call AccessDeniedException."""

    refuse = False

    def _answer(
        self, op: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, str], bytes]:
        if self.refuse:
            error = {"__type": "AccessDeniedException", "message": f"not allowed to {op}"}
            return 400, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(error).encode()
        return super()._answer(op, headers, body)


def test_glue_failures_name_the_member_once(glue: MotoGlue, primary: HivemeshProcess, tmp_path: Path) -> None:
    """Issue 18: a Glue member's errors name the member by its configured name (not "glue"), once
    and unwrapped: when a call fails while the member is up (the Glue error passes through), and
    when the poller has marked it down (the proxy's "unavailable" message, the Glue reason inside)."""
    with _FailingGlue(glue.endpoint_url) as gate:
        cfg = write_mesh(
            tmp_path / "mesh.yaml",
            {"port": 0, "store": f"sqlite:///{tmp_path / 'proxy.db'}", "status_polling_delay_ms": 60000},
            {"name": "main", "uris": [primary.uri]},
            [
                {
                    "name": "aws_eu",
                    "glue_config": {"glue_endpoint": gate.endpoint_url, "region": "us-east-1"},
                },
                {"name": "aws_us", "glue_config": {"glue_endpoint": f"http://127.0.0.1:{free_port()}"}},
            ],
        )
        with ProxyService(cfg) as svc:
            c = MetastoreClient(svc.uri, retries=0).raw
            assert c.get_table("aws_eu_lake", "orders").dbName == "aws_eu_lake"
            gate.refuse = True
            # still up (no poll since): the Glue error passes through, naming the member once
            with pytest.raises(MetaException) as up:
                c.get_table("aws_eu_lake", "orders")
            text = up.value.message
            assert re.fullmatch(
                r"glue catalog 'aws_eu' \(http://127\.0\.0\.1:\d+\): GetTable failed: "
                r"AccessDeniedException: not allowed to GetTable",
                text,
            ), text
            # marked down by the poller: the proxy's message names the member, the reason follows once
            assert svc.poller is not None
            svc.poller.poll_once()
            with pytest.raises(MetaException) as down:
                c.get_table("aws_eu_lake", "orders")
            text = down.value.message
            assert re.fullmatch(
                r"hivemesh proxy: federated metastore 'aws_eu' \(glue http://127\.0\.0\.1:\d+\) is unavailable "
                r"\(GetDatabases failed: AccessDeniedException: not allowed to GetDatabases; down for \d+ s\)",
                text,
            ), text
            # a Glue endpoint nobody listens on, down since the first poll
            with pytest.raises(MetaException) as gone:
                c.get_table("aws_us_lake", "orders")
            text = gone.value.message
            assert re.fullmatch(
                r"hivemesh proxy: federated metastore 'aws_us' \(glue http://127\.0\.0\.1:\d+\) is unavailable "
                r"\(GetDatabases failed: EndpointConnectionError: [^;]+; down for \d+ s\)",
                text,
            ), text
            for text in (up.value.message, down.value.message, gone.value.message):
                assert len(re.findall(r"aws_(eu|us)", text)) == 1, text
                assert "'glue'" not in text and "MetaException" not in text, text
