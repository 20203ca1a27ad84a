"""The Thrift server's wire options (--framed, --compact), fb303 basics, unknown methods, metrics."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path
from typing import Any

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


def test_sighup_keeps_serving_and_health_reports_the_store(tmp_path: Path) -> None:
    """SIGHUP (logrotate, ``systemctl reload``) is logged and ignored: the metastore keeps serving
    (its default action would end it with exit code 129). ``/health`` is JSON with HTTP 200 while
    the store answers; other paths are 404."""
    import json
    import os
    import signal
    import socket
    import urllib.error

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    with HivemeshProcess(
        f"sqlite:///{tmp_path / 'ms.db'}",
        tmp_path / "wh",
        tmp_path / "log",
        extra_args=["--metrics-port", str(metrics_port)],
    ) as p:
        assert p.proc is not None
        os.kill(p.proc.pid, signal.SIGHUP)
        with ThriftClient(p.host, p.port) as c:
            c.create_database(Database(name="after_hup"))
            assert "after_hup" in c.get_all_databases()
        assert p.proc.poll() is None
        health = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/health", timeout=10)
        details = json.loads(health.read())
        assert health.status == 200 and details["status"] == "ok" and details["store"] == "ok"
        assert details["uri"] == p.uri and details["uptime_s"] >= 0
        with pytest.raises(urllib.error.HTTPError) as e404:
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/nothing", timeout=10)
        assert e404.value.code == 404
    assert "received SIGHUP" in (tmp_path / "log").read_text()


def test_health_is_503_when_the_store_does_not_answer(tmp_path: Path) -> None:
    """``/health`` of a metastore whose store stops answering (its engine pointed at a database
    file that cannot be opened): HTTP 503 with the store's error; the Thrift port stays up."""
    import json
    import urllib.error

    import sqlalchemy as sa

    from hivemesh.config import MetastoreConfig
    from hivemesh.metastore.service import MetastoreService

    cfg = MetastoreConfig(
        db=f"sqlite:///{tmp_path / 'ms.db'}", warehouse=str(tmp_path / "wh"), port=0, metrics_port=0
    )
    with MetastoreService(cfg) as svc:
        url = f"http://127.0.0.1:{svc.metrics_port}/health"
        assert json.loads(urllib.request.urlopen(url, timeout=10).read())["status"] == "ok"
        assert svc.store is not None
        working = svc.store.engine, svc.store.read_engine
        broken = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'ms.db'}")
        svc.store.engine = svc.store.read_engine = broken
        try:
            with pytest.raises(urllib.error.HTTPError) as e503:
                urllib.request.urlopen(url, timeout=10)
        finally:
            broken.dispose()
            svc.store.engine, svc.store.read_engine = working
        assert e503.value.code == 503
        details = json.loads(e503.value.read())
        assert details["status"] == "store unavailable" and "unable to open database file" in details["store"]
        assert json.loads(urllib.request.urlopen(url, timeout=10).read())["status"] == "ok"


def test_missing_or_invalid_request_fields_get_hives_answers(hms: ThriftHiveMetastore.Client) -> None:
    """Requests a Java metastore could not read (a required field unset, at any depth; an enum
    value out of its enum) answer a protocol error naming the field; a missing request struct
    answers MetaException where the method declares it, else an internal error, as Hive's handler
    does; nothing is logged as a crash and the connection keeps serving."""
    from hive_metastore.ttypes import (
        ColumnStatistics,
        ColumnStatisticsDesc,
        ColumnStatisticsObj,
        CommitTxnRequest,
        CreateTableRequest,
        InvalidObjectException,
        LockComponent,
        LockRequest,
        MetaException,
        OpenTxnRequest,
    )

    def app_error(call: Any) -> TApplicationException:
        with pytest.raises(TApplicationException) as e:
            call()
        return e.value

    e = app_error(lambda: hms.commit_txn(CommitTxnRequest()))
    assert e.type == TApplicationException.PROTOCOL_ERROR and "Required field txnid is unset" in str(e)
    e = app_error(lambda: hms.open_txns(None))
    assert e.type == TApplicationException.INTERNAL_ERROR and "rqst (OpenTxnRequest): missing" in str(e)
    e = app_error(lambda: hms.get_next_notification(None))
    assert "NotificationEventRequest" in str(e)
    bad_lock = LockRequest(
        component=[LockComponent(type=99, level=3, dbname="default")], user="u", hostname="h"
    )
    e = app_error(lambda: hms.lock(bad_lock))
    assert (
        e.type == TApplicationException.PROTOCOL_ERROR and "component[0].type: 99 is not a LockType" in str(e)
    )
    no_level = LockRequest(component=[LockComponent(type=1, dbname="default")], user="u", hostname="h")
    assert "Required field level is unset" in str(app_error(lambda: hms.lock(no_level)))
    with pytest.raises(MetaException, match=r"database \(Database\): missing"):
        hms.create_database(None)
    with pytest.raises(MetaException, match=r"tbl \(Table\): missing"):
        hms.create_table(None)
    with pytest.raises(InvalidObjectException, match="CreateTableRequest has no table"):
        hms.create_table_req(CreateTableRequest())
    no_data = ColumnStatistics(
        statsDesc=ColumnStatisticsDesc(isTblLevel=True, dbName="default", tableName="t"),
        statsObj=[ColumnStatisticsObj(colName="a", colType="int")],
    )
    e = app_error(lambda: hms.update_table_column_statistics(no_data))
    assert "statsObj[0]: Required field statsData is unset" in str(e)
    # the connection and the server are fine
    txn = hms.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    hms.commit_txn(CommitTxnRequest(txnid=txn))
    assert "default" in hms.get_all_databases()


def test_client_locations_are_normalized_and_can_be_confined(tmp_path: Path) -> None:
    """A location with ``..`` is stored resolved (``file:///x/a/../../b`` is ``file:/b``), so what
    the catalog says is where files go; with ``--allowed-locations`` a database, table or partition
    location outside those roots and the warehouse is refused with MetaException and no directory
    is made."""
    from hive_metastore.ttypes import (
        FieldSchema,
        MetaException,
        Partition,
        SerDeInfo,
        StorageDescriptor,
        Table,
    )

    def sd(location: str | None) -> StorageDescriptor:
        return StorageDescriptor(cols=[FieldSchema("x", "string", None)], location=location,
                                 serdeInfo=SerDeInfo(parameters={}), bucketCols=[], sortCols=[], parameters={})  # fmt: skip

    data, escape = tmp_path / "data", tmp_path / "escape"
    wh = tmp_path / "wh"
    sneaky = f"file://{data}/t/../../escape/t"
    with (
        HivemeshProcess(f"sqlite:///{tmp_path / 'a.db'}", wh, tmp_path / "a.log") as open_,
        ThriftClient(open_.host, open_.port) as c,
    ):
        c.create_table(Table(tableName="t", dbName="default", sd=sd(sneaky), parameters={}, partitionKeys=[]))
        assert c.get_table("default", "t").sd.location == f"file:{escape}/t"
    args = ["--allowed-locations", str(data)]
    with (
        HivemeshProcess(
            f"sqlite:///{tmp_path / 'b.db'}", wh, tmp_path / "b.log", extra_args=args
        ) as confined,
        ThriftClient(confined.host, confined.port) as c,
    ):
        c.create_database(Database(name="inside", locationUri=f"file:{data}/inside.db", parameters={}))
        c.create_database(Database(name="in_wh", parameters={}))  # the warehouse is always allowed
        with pytest.raises(MetaException, match="outside the locations this metastore allows"):
            c.create_database(Database(name="outside", locationUri=f"file:{escape}/o.db", parameters={}))
        with pytest.raises(MetaException, match=f"location file:{escape}/t2 is outside"):
            c.create_table(Table(tableName="t2", dbName="inside", sd=sd(f"file://{data}/../escape/t2"), parameters={},
                                 partitionKeys=[]))  # fmt: skip
        c.create_table(Table(tableName="p", dbName="inside", sd=sd(None), parameters={},
                             partitionKeys=[FieldSchema("k", "string", None)]))  # fmt: skip
        with pytest.raises(MetaException, match="outside"):
            c.add_partition(Partition(values=["1"], dbName="inside", tableName="p", sd=sd(f"file:{escape}/k=1"),
                                      parameters={}))  # fmt: skip
        c.add_partition(Partition(values=["2"], dbName="inside", tableName="p", sd=sd(None), parameters={}))
        assert c.get_partition_names("inside", "p", -1) == ["k=2"]
        assert sorted(c.get_all_databases()) == ["default", "in_wh", "inside"]
    assert not (escape / "o.db").exists() and not (escape / "t2").exists() and not (escape / "k=1").exists()


def test_kerberos_without_the_extra_fails_at_start_in_one_line(tmp_path: Path) -> None:
    """`make run` installs hivemesh without its ``kerberos`` extra: a metastore configured for
    Kerberos then stops at start with one line naming what to install (gssapi hidden here)."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['gssapi'] = None\n"  # import gssapi -> ImportError, as when not installed
        "from hivemesh.cli import main\n"
        "main()\n"
    )
    args = ["metastore", "--db", f"sqlite:///{tmp_path / 'm.db'}", "--warehouse", str(tmp_path / "wh")]
    args += ["--port", "0", "--kerberos-principal", "hive/_HOST@EXAMPLE.COM", "--kerberos-keytab", "/none"]
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "pip install 'hivemesh[kerberos]'" in lines[0]
    assert "listening" not in proc.stdout
