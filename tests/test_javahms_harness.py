"""The JavaHMS harness: the real Apache HMS 2.3.10 starts, answers Thrift, and stops cleanly."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hive_metastore import ttypes

from tests.support.javahms import JAVA_SKIP_REASON, JavaHMS, java_available, rss_bytes
from tests.support.servers import ThriftClient

pytestmark = [pytest.mark.javahms, pytest.mark.skipif(not java_available(), reason=JAVA_SKIP_REASON)]

TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


@pytest.fixture(scope="module")
def java_hms() -> Iterator[JavaHMS]:
    """One real HMS 2.3.10 for this module (test_stop_frees_port, last, stops it)."""
    hms = JavaHMS()
    try:
        hms.start(timeout=180)
        yield hms
    finally:
        hms.stop()


def _sd(location: str | None = None) -> ttypes.StorageDescriptor:
    return ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema("id", "bigint", "key"), ttypes.FieldSchema("name", "string", None)],
        location=location,
        inputFormat=TEXT_IN,
        outputFormat=TEXT_OUT,
        compressed=False,
        numBuckets=-1,
        serdeInfo=ttypes.SerDeInfo(serializationLib=LAZY_SERDE, parameters={"field.delim": ","}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def test_process_attributes(java_hms: JavaHMS) -> None:
    assert java_hms.uri == f"thrift://127.0.0.1:{java_hms.port}"
    assert java_hms.pid is not None and java_hms.proc is not None and java_hms.proc.poll() is None
    assert rss_bytes(java_hms.pid) > 50 * 2**20
    assert java_hms.log.is_file()
    assert "Started the new metaserver" in java_hms.log.read_text(encoding="utf-8", errors="replace")


def test_database_table_partitions_round_trip(java_hms: JavaHMS) -> None:
    with ThriftClient(java_hms.host, java_hms.port) as client:
        assert "default" in client.get_all_databases()
        client.create_database(
            ttypes.Database(name="harness_db", description="made by the harness", parameters={"team": "x"})
        )
        db = client.get_database("harness_db")
        assert db.name == "harness_db"
        assert db.description == "made by the harness"
        assert db.parameters == {"team": "x"}
        assert db.locationUri == f"file:{java_hms.warehouse}/harness_db.db"

        client.create_table(
            ttypes.Table(
                tableName="events",
                dbName="harness_db",
                owner="tester",
                sd=_sd(),
                partitionKeys=[
                    ttypes.FieldSchema("ds", "string", None),
                    ttypes.FieldSchema("hr", "int", None),
                ],
                parameters={"comment": "hello"},
                tableType="MANAGED_TABLE",
            )
        )
        tbl = client.get_table("harness_db", "events")
        assert (tbl.dbName, tbl.tableName, tbl.owner, tbl.tableType) == (
            "harness_db",
            "events",
            "tester",
            "MANAGED_TABLE",
        )
        assert [(c.name, c.type, c.comment) for c in tbl.sd.cols] == [
            ("id", "bigint", "key"),
            ("name", "string", None),
        ]
        assert [(k.name, k.type) for k in tbl.partitionKeys] == [("ds", "string"), ("hr", "int")]
        assert tbl.sd.location == f"file:{java_hms.warehouse}/harness_db.db/events"
        assert (tbl.sd.inputFormat, tbl.sd.outputFormat) == (TEXT_IN, TEXT_OUT)
        assert tbl.sd.serdeInfo.serializationLib == LAZY_SERDE
        assert tbl.sd.serdeInfo.parameters == {"field.delim": ","}
        assert tbl.parameters["comment"] == "hello"
        assert int(tbl.parameters["transient_lastDdlTime"]) > 0
        assert tbl.createTime > 0
        assert (java_hms.warehouse / "harness_db.db" / "events").is_dir()
        assert client.get_all_tables("harness_db") == ["events"]

        for ds, hr in [("2024-01-01", "0"), ("2024-01-01", "1"), ("2024-01-02", "0")]:
            client.add_partition(
                ttypes.Partition(
                    values=[ds, hr], dbName="harness_db", tableName="events", sd=_sd(), parameters={}
                )
            )
        assert client.get_partition_names("harness_db", "events", -1) == [
            "ds=2024-01-01/hr=0",
            "ds=2024-01-01/hr=1",
            "ds=2024-01-02/hr=0",
        ]
        part = client.get_partition("harness_db", "events", ["2024-01-01", "1"])
        assert part.values == ["2024-01-01", "1"]
        assert (part.dbName, part.tableName) == ("harness_db", "events")
        assert part.sd.location == f"file:{java_hms.warehouse}/harness_db.db/events/ds=2024-01-01/hr=1"
        assert "transient_lastDdlTime" in part.parameters
        by_filter = client.get_partitions_by_filter("harness_db", "events", 'ds = "2024-01-01"', -1)
        assert sorted(p.values[1] for p in by_filter) == ["0", "1"]

        with pytest.raises(ttypes.NoSuchObjectException):
            client.get_table("harness_db", "missing")
        with pytest.raises(ttypes.AlreadyExistsException):
            client.add_partition(
                ttypes.Partition(
                    values=["2024-01-02", "0"],
                    dbName="harness_db",
                    tableName="events",
                    sd=_sd(),
                    parameters={},
                )
            )

        client.drop_table("harness_db", "events", True)
        client.drop_database("harness_db", True, False)
        assert "harness_db" not in client.get_all_databases()


def test_stop_frees_port(java_hms: JavaHMS) -> None:
    """Runs last in this module: stops the shared server."""
    port = java_hms.port
    proc = java_hms.proc
    assert proc is not None
    java_hms.stop()
    assert proc.poll() is not None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", port)) != 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", port))  # no listener is left on it
