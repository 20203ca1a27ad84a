"""The Thrift server's wire options (--framed, --compact), fb303 basics, unknown methods, metrics."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import Database, NoSuchObjectException
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

from tests.support.servers import HivemeshProcess, ThriftClient


def _client(
    port: int, framed: bool, compact: bool
) -> tuple[ThriftHiveMetastore.Client, TTransport.TTransportBase]:
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(30_000)
    trans = TTransport.TFramedTransport(sock) if framed else TTransport.TBufferedTransport(sock)
    proto = TCompactProtocol.TCompactProtocol(trans) if compact else TBinaryProtocol.TBinaryProtocol(trans)
    trans.open()
    return ThriftHiveMetastore.Client(proto), trans


@pytest.mark.parametrize(("framed", "compact"), [(True, False), (False, True), (True, True)])
def test_framed_and_compact_servers(tmp_path: Path, framed: bool, compact: bool) -> None:
    args = (["--framed"] if framed else []) + (["--compact"] if compact else [])
    db = f"sqlite:///{tmp_path / 'ms.db'}"
    with HivemeshProcess(db, tmp_path / "wh", tmp_path / "log", extra_args=args) as proc:
        client, trans = _client(proc.port, framed, compact)
        try:
            client.create_database(Database(name="wire", parameters={"k": "v"}))
            assert client.get_database("wire").parameters == {"k": "v"}
            assert "wire" in client.get_all_databases()
        finally:
            trans.close()


def test_fb303_set_ugi_config_and_unknown_methods(hms: ThriftHiveMetastore.Client) -> None:
    assert hms.getName() == "hivemesh"
    assert hms.getVersion().split(".")[0] == "4"
    assert hms.getStatus() == 2  # fb_status.ALIVE
    assert hms.aliveSince() > 1_600_000_000
    assert hms.set_ugi("alice", ["analysts", "eng"]) == ["analysts", "eng"]
    assert hms.get_config_value("hive.metastore.warehouse.dir", "x").startswith("file:")
    assert hms.get_config_value("hive.some.unknown.key", "fallback") == "fallback"
    with pytest.raises(TApplicationException) as err:
        hms.get_partitions_by_expr(None)
    assert err.value.type == TApplicationException.UNKNOWN_METHOD
    assert "get_partitions_by_expr" in err.value.message
    # the connection is still usable after an unknown method
    assert "default" in hms.get_all_databases()


def test_shutdown_is_a_per_connection_noop(hivemesh_server: HivemeshProcess) -> None:
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        c.shutdown()  # oneway: what a Hive client sends when it closes
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        assert "default" in c.get_all_databases()
    assert hivemesh_server.proc is not None and hivemesh_server.proc.poll() is None


def test_metrics_endpoint_counts_calls(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    db = f"sqlite:///{tmp_path / 'ms.db'}"
    with HivemeshProcess(
        db, tmp_path / "wh", tmp_path / "log", extra_args=["--metrics-port", str(metrics_port)]
    ) as p:
        with ThriftClient(p.host, p.port) as c:
            for _ in range(3):
                c.get_all_databases()
            with pytest.raises(NoSuchObjectException):
                c.get_database("missing_db")
        # a call is counted just after its reply is flushed: poll briefly for the last one
        deadline = time.monotonic() + 10
        while True:
            body = (
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
            )
            if 'method="get_database"' in body or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert 'hivemesh_thrift_calls_total{method="get_all_databases"} 3.0' in body
    assert 'hivemesh_thrift_calls_total{method="get_database"} 1.0' in body
    assert "hivemesh_thrift_call_seconds_bucket" in body
    assert re.search(r"^hivemesh_thrift_connections [01]\.0$", body, re.M)  # 0 or, while closing, 1
    assert 'hivemesh_thrift_errors_total{error="NoSuchObjectException",method="get_database"} 1.0' in body
