"""The federation proxy over real Thrift: routing, name mapping, access control, merged calls with
deadlines, dead and hung members, transactions and locks per member, remotes, metrics and health.

Members are real ``hivemesh metastore`` subprocesses; the proxy runs in this process
(:class:`ProxyService`, so its state can be inspected) or as a ``hivemesh proxy`` subprocess where
signals and the CLI matter. Clients are plain Thrift clients over TCP.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    DropDatabaseRequest,
    FieldSchema,
    GetTableRequest,
    InvalidObjectException,
    LockComponent,
    LockLevel,
    LockRequest,
    LockType,
    MetaException,
    NoSuchObjectException,
    OpenTxnRequest,
    Partition,
    PartitionsByExprRequest,
    SerDeInfo,
    ShowLocksRequest,
    StorageDescriptor,
    Table,
    UnlockRequest,
)
from thrift.Thrift import TApplicationException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.config import FederationConfig
from hivemesh.federation.members import Member
from hivemesh.federation.service import ProxyService
from hivemesh.storage.locations import local_path
from tests.support.proxy import ProxyProcess, write_mesh
from tests.support.servers import HivemeshProcess, ThriftClient, free_port


# ---------------------------------------------------------------------------------------------- helpers
def _sd(location: str, cols: tuple[str, ...] = ("id", "name")) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema(c, "string" if c == "name" else "int", "") for c in cols],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        parameters={},
    )


def _table(db: str, name: str, location: str, part_keys: tuple[str, ...] = (), **kw: object) -> Table:
    return Table(
        tableName=name,
        dbName=db,
        owner="test",
        sd=_sd(location),
        partitionKeys=[FieldSchema(k, "string", "") for k in part_keys],
        parameters=kw.pop("parameters", {}),
        tableType=kw.pop("tableType", "EXTERNAL_TABLE"),
        **kw,
    )


def _client(uri: str) -> MetastoreClient:
    return MetastoreClient(uri, retries=0)


def _populate(uri: str, root: Path) -> None:
    """Databases sales (orders, lineitem partitioned by day with 3 partitions, secret, a view),
    and hr (people)."""
    c = _client(uri).raw
    for db in ("sales", "hr"):
        c.create_database(
            Database(name=db, locationUri=str(root / f"{db}.db"), parameters={"zone": str(root)})
        )
    c.create_table(_table("sales", "orders", str(root / "orders")))
    c.create_table(_table("sales", "secret", str(root / "secret")))
    c.create_table(_table("sales", "lineitem", str(root / "lineitem"), ("day",)))
    c.add_partitions(
        [
            Partition(
                values=[d],
                dbName="sales",
                tableName="lineitem",
                sd=_sd(str(root / f"lineitem/day={d}")),
                parameters={},
            )
            for d in ("d1", "d2", "d3")
        ]
    )
    c.create_table(
        _table(
            "sales",
            "big_orders",
            "",
            tableType="VIRTUAL_VIEW",
            viewOriginalText="SELECT o.id FROM sales.orders o JOIN hr.people p ON o.id = p.id",
            viewExpandedText="SELECT `o`.`id` FROM `sales`.`orders` `o` JOIN `hr`.`people` `p` ON `o`.`id` = `p`.`id`",
        )
    )
    c.create_table(_table("hr", "people", str(root / "people")))


def _mesh(tmp: Path, primary_uri: str, federated: list[dict], **proxy: object) -> Path:
    settings = {"port": 0, "store": f"sqlite:///{tmp / 'proxy.db'}", "status_polling_delay_ms": 500, **proxy}
    return write_mesh(
        tmp / "mesh.yaml",
        settings,
        {"name": "main", "uris": [primary_uri], "access_control": "read_and_write_and_create"},
        federated,
    )


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HivemeshProcess]]:
    """Three hivemesh metastores: main (primary), eu and us (federated), eu and us populated."""
    root = tmp_path_factory.mktemp("zones")
    procs = {}
    for name in ("main", "eu", "us"):
        d = root / name
        d.mkdir()
        procs[name] = HivemeshProcess(f"sqlite:///{d / 'm.db'}", d / "wh", d / "m.log").start()
    _populate(procs["eu"].uri, root / "eu")
    _populate(procs["us"].uri, root / "us")
    yield procs
    for p in procs.values():
        p.stop()


@pytest.fixture()
def prefixed(zones: dict[str, HivemeshProcess], tmp_path: Path) -> Iterator[ProxyService]:
    cfg = _mesh(
        tmp_path,
        zones["main"].uri,
        [
            {"name": "eu", "uris": [zones["eu"].uri], "access_control": "read_only"},
            {
                "name": "us",
                "uris": [zones["us"].uri],
                "database_prefix": "us_",
                "access_control": "read_and_write_on_database_whitelist",
                "writable_database_white_list": ["hr"],
                "mapped_tables": {"sales": ["orders", "line.*", "big_orders"]},
            },
        ],
        metrics_port=0,
    )
    svc = ProxyService(cfg).start()
    yield svc
    svc.stop()


# ---------------------------------------------------------------------------------------------- config
def test_cross_member_config_errors_are_all_reported_with_their_keys(tmp_path: Path) -> None:
    """Every problem across members at once, one line each, each with its key; never the whole
    configuration as the offending value."""
    from hivemesh.config import ConfigError
    from hivemesh.federation.config import load_federation_config

    cfg = tmp_path / "mesh.yaml"
    cfg.write_text(
        "primary: {name: main, uris: ['thrift://h:9083'], database_prefix: p_}\n"
        "federated:\n"
        "  - {name: main, uris: ['thrift://a:1'], access_control: read_and_write_and_create}\n"
        "  - {name: b, uris: ['thrift://b:1'], database_prefix: x_, read_only_uris: ['thrift://r:1']}\n"
        "  - {name: c, uris: ['thrift://c:1'], database_prefix: X_}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_federation_config(cfg)
    lines = str(e.value).splitlines()
    assert lines[0] == f"invalid configuration in {cfg}:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "primary, federated[0].name",
        "federated[0].access_control",
        "federated[1].read_only_uris",
        "federated[2].database_prefix",
        "primary.database_prefix",
    ]
    assert "thrift://c:1" not in str(e.value)  # the configuration itself is not printed


def test_field_errors_name_list_positions_as_cross_member_errors_do(tmp_path: Path) -> None:
    """A member's own bad value is ``federated[1].uris``, the notation of the cross-member checks
    (it was ``federated.1.uris``)."""
    from hivemesh.config import ConfigError
    from hivemesh.federation.config import load_federation_config

    cfg = tmp_path / "mesh.yaml"
    cfg.write_text(
        "primary: {name: main, uris: ['thrift://h:9083']}\n"
        "federated:\n"
        "  - {name: a, uris: ['thrift://a:1']}\n"
        "  - {name: b, uris: ['http://h:1']}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_federation_config(cfg)
    assert str(e.value).splitlines()[1:] == ["  federated[1].uris: 'http://h:1' is not thrift://host:port"]


def test_config_errors_are_precise() -> None:
    base = {"primary": {"name": "main", "uris": ["thrift://h:9083"]}}
    with pytest.raises(
        ValueError, match=r"primary, federated\[0\].name: member names must be unique \('main' used twice\)"
    ):
        FederationConfig.model_validate({**base, "federated": [{"name": "main", "uris": ["thrift://x:1"]}]})
    with pytest.raises(
        ValueError,
        match=r"federated\[0\].access_control: must be read_only or read_and_write_on_database_whitelist",
    ):
        FederationConfig.model_validate(
            {
                **base,
                "federated": [
                    {"name": "eu", "uris": ["thrift://x:1"], "access_control": "read_and_write_and_create"}
                ],
            }
        )
    with pytest.raises(
        ValueError, match=r"federated\[0\].mapped_databases: required with MANUAL database_resolution"
    ):
        FederationConfig.model_validate(
            {
                **base,
                "proxy": {"database_resolution": "MANUAL"},
                "federated": [{"name": "eu", "uris": ["thrift://x:1"]}],
            }
        )
    with pytest.raises(ValueError, match="is not thrift://host:port"):
        FederationConfig.model_validate({"primary": {"name": "main", "uris": ["http://h:9083"]}})
    with pytest.raises(ValueError, match=r"federated\[1\].database_prefix: 'x_' is also federated\[0\]'s"):
        FederationConfig.model_validate(
            {
                **base,
                "federated": [
                    {"name": "a", "uris": ["thrift://x:1"], "database_prefix": "x_"},
                    {"name": "b", "uris": ["thrift://x:2"], "database_prefix": "X_"},
                ],
            }
        )
    with pytest.raises(ValueError, match="must be user@host or user@host:port"):
        FederationConfig.model_validate(
            {
                **base,
                "federated": [
                    {"name": "a", "uris": ["thrift://x:1"], "ssh_tunnel": {"route": "bastion -> u@h"}}
                ],
            }
        )
    cfg = FederationConfig.model_validate(
        {**base, "federated": [{"name": "eu", "uris": ["thrift://x:1"], "access_control": "READ-ONLY"}]}
    )
    assert cfg.federated[0].database_prefix == "eu_"  # Waggle Dance's default: <name>_


# ---------------------------------------------------------------------------------------------- routing
def test_prefixed_databases_tables_and_partitions(prefixed: ProxyService) -> None:
    c = _client(prefixed.uri).raw
    dbs = c.get_all_databases()
    assert {"default", "eu_sales", "eu_hr", "us_sales", "us_hr", "eu_default", "us_default"} <= set(dbs)
    assert c.get_databases("eu_*") == ["eu_default", "eu_hr", "eu_sales"]
    assert c.get_database("eu_sales").name == "eu_sales"
    t = c.get_table("eu_sales", "orders")
    assert (t.dbName, t.tableName) == ("eu_sales", "orders")
    assert t.sd.location.endswith("/eu/orders")
    parts = c.get_partitions("eu_sales", "lineitem", -1)
    assert [(p.dbName, p.values) for p in parts] == [
        ("eu_sales", ["d1"]),
        ("eu_sales", ["d2"]),
        ("eu_sales", ["d3"]),
    ]
    assert c.get_partition_names("eu_sales", "lineitem", -1) == ["day=d1", "day=d2", "day=d3"]
    # catalog-qualified names (Hive 3+ clients) reach a member as plain names and come back prefixed
    assert c.get_table("@hive#eu_sales", "orders").dbName == "eu_sales"
    res = c.get_table_req(GetTableRequest(dbName="eu_sales", tblName="orders", catName="hive"))
    assert res.table.dbName == "eu_sales"
    metas = c.get_table_meta("eu_*", "*", [])
    assert {(m.dbName, m.tableName) for m in metas} >= {("eu_sales", "orders"), ("eu_hr", "people")}
    assert all(m.dbName.startswith("eu_") for m in metas)
    with pytest.raises(NoSuchObjectException):
        c.get_table("eu_sales", "nope")


def test_view_text_is_rewritten_both_ways(prefixed: ProxyService, zones: dict[str, HivemeshProcess]) -> None:
    c = _client(prefixed.uri).raw
    v = c.get_table("eu_sales", "big_orders")
    assert v.viewOriginalText == "SELECT o.id FROM eu_sales.orders o JOIN eu_hr.people p ON o.id = p.id"
    assert v.viewExpandedText == (
        "SELECT `o`.`id` FROM `eu_sales`.`orders` `o` JOIN `eu_hr`.`people` `p` ON `o`.`id` = `p`.`id`"
    )
    # a view created through the proxy in a writable database of 'us' is stored with real names
    view = _table(
        "us_hr",
        "v_people",
        "",
        tableType="VIRTUAL_VIEW",
        viewOriginalText="SELECT p.id FROM us_hr.people p",
        viewExpandedText="SELECT `p`.`id` FROM `us_hr`.`people` `p`",
    )
    c.create_table(view)
    stored = _client(zones["us"].uri).raw.get_table("hr", "v_people")
    assert stored.viewOriginalText == "SELECT p.id FROM hr.people p"
    assert stored.viewExpandedText == "SELECT `p`.`id` FROM `hr`.`people` `p`"
    assert c.get_table("us_hr", "v_people").viewOriginalText == "SELECT p.id FROM us_hr.people p"
    c.drop_table("us_hr", "v_people", False)


def test_mapped_tables_hide_the_others(prefixed: ProxyService) -> None:
    c = _client(prefixed.uri).raw
    assert c.get_all_tables("us_sales") == ["big_orders", "lineitem", "orders"]
    assert c.get_tables("us_sales", "l*") == ["lineitem"]
    assert "secret" in c.get_all_tables("eu_sales")  # eu maps every table
    with pytest.raises(NoSuchObjectException, match="not mapped"):
        c.get_table("us_sales", "secret")
    assert not [m for m in c.get_table_meta("us_*", "*", []) if m.tableName == "secret"]
    objs = c.get_table_objects_by_name("us_sales", ["orders", "secret"])
    assert [t.tableName for t in objs] == ["orders"]


def test_access_control_refuses_before_forwarding(
    prefixed: ProxyService, zones: dict[str, HivemeshProcess]
) -> None:
    c = _client(prefixed.uri).raw
    eu = _client(zones["eu"].uri).raw
    before = eu.get_all_tables("sales")
    with pytest.raises(MetaException, match="refused: metastore 'eu' is read_only"):
        c.create_table(_table("eu_sales", "new_t", "/tmp/x"))
    with pytest.raises(MetaException, match="refused: metastore 'eu' is read_only"):
        c.drop_table("eu_sales", "orders", False)
    with pytest.raises(MetaException, match="cannot be created"):
        c.create_database(Database(name="eu_newdb", parameters={}))
    with pytest.raises(MetaException, match="writable_database_white_list"):
        c.create_table(_table("us_sales", "t2", "/tmp/x"))
    assert eu.get_all_tables("sales") == before
    assert "newdb" not in eu.get_all_databases()
    # the white-listed database of 'us' is writable, and the primary is
    c.create_table(_table("us_hr", "t_ok", "/tmp/us_hr_t"))
    assert "t_ok" in _client(zones["us"].uri).raw.get_all_tables("hr")
    c.drop_table("us_hr", "t_ok", False)
    c.create_database(Database(name="main_only", parameters={}))
    assert "main_only" in _client(zones["main"].uri).raw.get_all_databases()
    c.drop_database("main_only", True, True)


def test_manual_resolution_aliases_and_duplicates(zones: dict[str, HivemeshProcess], tmp_path: Path) -> None:
    cfg = _mesh(
        tmp_path,
        zones["main"].uri,
        [
            {
                "name": "eu",
                "uris": [zones["eu"].uri],
                "mapped_databases": ["sales", "default"],
                "database_name_mapping": {"sales": "eu_sales_alias"},
            },
            {"name": "us", "uris": [zones["us"].uri], "mapped_databases": ["hr", "sales"]},
        ],
        database_resolution="manual",
    )
    with ProxyService(cfg) as svc:  # 'default' (main, eu) and 'sales' (eu alias aside, us) collide
        c = _client(svc.uri).raw
        dbs = c.get_all_databases()
        assert dbs.count("default") == 1
        assert {"eu_sales_alias", "hr", "sales"} <= set(dbs)
        # the real name and the alias both work; results carry the alias
        assert c.get_table("eu_sales_alias", "orders").dbName == "eu_sales_alias"
        assert c.get_table("sales", "orders").dbName == "eu_sales_alias"  # first mapping member wins
        assert c.get_table("hr", "people").sd.location.endswith("/us/people")
        assert svc.fed.registry.duplicates["default"] == ["main", "eu"]
        status, details = svc.health()
        assert details["duplicate_databases"]["default"] == ["main", "eu"]


# ---------------------------------------------------------------------------------------------- failures
def test_dead_member_is_left_out_and_recovers(zones: dict[str, HivemeshProcess], tmp_path: Path) -> None:
    root = tmp_path / "tmpzone"
    root.mkdir()
    proc = HivemeshProcess(f"sqlite:///{root / 'm.db'}", root / "wh", root / "m.log").start()
    _populate(proc.uri, root)
    cfg = _mesh(
        tmp_path,
        zones["main"].uri,
        [{"name": "tmp", "uris": [proc.uri]}, {"name": "eu", "uris": [zones["eu"].uri]}],
    )
    with ProxyService(cfg) as svc:
        c = _client(svc.uri).raw
        assert "tmp_sales" in c.get_all_databases()
        proc.kill()
        t0 = time.monotonic()
        dbs = c.get_all_databases()
        assert "tmp_sales" not in dbs and "eu_sales" in dbs
        # the text the README documents
        documented = r"hivemesh proxy: federated metastore 'tmp' \(thrift://[^)]+\) is unavailable \(.+; down for \d+ s\)"
        with pytest.raises(MetaException, match=documented):
            c.get_table("tmp_sales", "orders")
        assert time.monotonic() - t0 < 3  # fail fast, no connect timeouts piling up
        assert c.get_table("eu_sales", "orders").tableName == "orders"  # others unaffected
        proc.start()  # same port and store
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not svc.fed.registry.member("tmp").available:
            time.sleep(0.1)
        assert c.get_table("tmp_sales", "orders").dbName == "tmp_sales"
        assert "tmp_sales" in c.get_all_databases()
    proc.stop()


def test_hung_member_never_stalls_merged_calls(zones: dict[str, HivemeshProcess], tmp_path: Path) -> None:
    """Waggle Dance #73: one hung member (SIGSTOP: accepts TCP, never answers) stalled clients."""
    root = tmp_path / "hung"
    root.mkdir()
    proc = HivemeshProcess(f"sqlite:///{root / 'm.db'}", root / "wh", root / "m.log").start()
    _populate(proc.uri, root)
    cfg = _mesh(
        tmp_path,
        zones["main"].uri,
        [{"name": "hung", "uris": [proc.uri], "latency_ms": 0}, {"name": "eu", "uris": [zones["eu"].uri]}],
        databases_timeout_ms=400,
        status_polling_delay_ms=60000,  # the poller must not be what saves the call
    )
    with ProxyService(cfg) as svc:
        c = _client(svc.uri).raw
        assert "hung_sales" in c.get_all_databases()
        assert proc.proc is not None
        os.kill(proc.proc.pid, signal.SIGSTOP)
        try:
            # kill() returns before a busy process is stopped (each of its threads stops when it
            # next runs): wait until every thread is (state T), or a thread still running answers
            tasks = Path(f"/proc/{proc.proc.pid}/task")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(
                (t / "stat").read_text().rsplit(")", 1)[1].split()[0] != "T" for t in tasks.iterdir()
            ):
                time.sleep(0.01)
            t0 = time.monotonic()
            dbs = c.get_all_databases()
            took = time.monotonic() - t0
            state = Path(f"/proc/{proc.proc.pid}/stat").read_text().split()[2]  # T: stopped
            assert "eu_sales" in dbs and "hung_sales" not in dbs, (took, state)
            assert took < 2.0, f"merged call took {took:.2f}s with a 400 ms deadline"
            t0 = time.monotonic()
            metas = c.get_table_meta("*", "*", [])
            assert any(m.dbName == "eu_sales" for m in metas)
            assert time.monotonic() - t0 < 2.0
        finally:
            os.kill(proc.proc.pid, signal.SIGCONT)
    proc.stop()


def test_member_down_is_logged_once_then_rarely_and_once_back(
    zones: dict[str, HivemeshProcess],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 18: a member that is down is logged once (WARNING, name and reason), not on every
    health poll; then "still unavailable" at most every ``Member.still_down_log_interval_s``; and
    once (INFO) when it answers again."""
    port = free_port()
    cfg = _mesh(
        tmp_path,
        zones["main"].uri,
        [{"name": "late", "uris": [f"thrift://127.0.0.1:{port}"], "connect_timeout_ms": 500}],
        status_polling_delay_ms=100,
    )
    caplog.set_level(logging.INFO)

    def lines(pattern: str) -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "hivemesh.federation.members" and re.search(pattern, r.getMessage())
        ]

    with ProxyService(cfg) as svc:
        time.sleep(2)  # ~20 health polls
        down = lines(r"federated metastore 'late' \(thrift://127\.0\.0\.1:\d+\) is unavailable: ")
        assert len(down) == 1, [r.getMessage() for r in down]
        assert down[0].levelno == logging.WARNING
        assert "TTransportException: Could not connect" in down[0].getMessage()
        assert not lines("still unavailable")  # the default interval is minutes
        monkeypatch.setattr(Member, "still_down_log_interval_s", 0.5)
        time.sleep(1.6)
        still = lines(r"federated metastore 'late' .+ still unavailable for \d+s: TTransportException: ")
        assert 2 <= len(still) <= 4, [r.getMessage() for r in still]
        assert all(r.levelno == logging.WARNING for r in still)
        root = tmp_path / "late"
        root.mkdir()
        proc = HivemeshProcess(f"sqlite:///{root / 'm.db'}", root / "wh", root / "m.log", port=port).start()
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not svc.fed.registry.member("late").available:
                time.sleep(0.05)
            time.sleep(0.5)  # more polls: nothing more is logged
            back = lines(r"federated metastore 'late' .+ is available again \(down for \d+s\)")
            assert len(back) == 1 and back[0].levelno == logging.INFO, [r.getMessage() for r in back]
            assert len(lines("'late'.+ is unavailable: ")) == 1
        finally:
            proc.stop()


# ---------------------------------------------------------------------------------------------- txns
def test_txns_and_locks_go_to_the_owning_member(
    prefixed: ProxyService, zones: dict[str, HivemeshProcess]
) -> None:
    """Waggle Dance #111: txn and lock calls for federated tables went to the primary."""
    c = _client(prefixed.uri).raw
    eu = _client(zones["eu"].uri).raw
    main = _client(zones["main"].uri).raw
    txn = c.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    lock = c.lock(
        LockRequest(
            component=[
                LockComponent(
                    type=LockType.SHARED_READ, level=LockLevel.TABLE, dbname="eu_sales", tablename="orders"
                )
            ],
            txnid=txn,
            user="u",
            hostname="h",
        )
    )
    assert lock.state == 1 or lock.state == 0  # ACQUIRED (1) or WAITING
    eu_locks = eu.show_locks(ShowLocksRequest()).locks or []
    assert [(x.dbname, x.tablename) for x in eu_locks] == [("sales", "orders")]
    assert not (main.show_locks(ShowLocksRequest()).locks or [])
    member_txn = eu_locks[0].txnid
    assert member_txn in eu.get_open_txns().open_txns
    # write locks on a read-only member are refused (lock declares no MetaException: Thrift sends
    # the message as an application error, as the Java metastore does)
    with pytest.raises(TApplicationException, match="write lock .* refused"):
        c.lock(
            LockRequest(
                component=[
                    LockComponent(
                        type=LockType.EXCL_WRITE, level=LockLevel.TABLE, dbname="eu_sales", tablename="orders"
                    )
                ],
                txnid=txn,
                user="u",
                hostname="h",
            )
        )
    from hive_metastore.ttypes import CommitTxnRequest, GetValidWriteIdsRequest, HeartbeatRequest

    c.heartbeat(HeartbeatRequest(txnid=txn))
    snap = c.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=["eu_sales.orders"], validTxnList=""))
    assert [t.fullTableName for t in snap.tblValidWriteIds] == ["eu_sales.orders"]
    c.commit_txn(CommitTxnRequest(txnid=txn))
    assert not (eu.show_locks(ShowLocksRequest()).locks or [])
    assert member_txn not in (eu.get_open_txns().open_txns or [])
    # txn-less lock on a member: the lock id encodes the member, unlock finds it
    lock2 = c.lock(
        LockRequest(
            component=[LockComponent(type=LockType.SHARED_READ, level=LockLevel.DB, dbname="eu_hr")],
            user="u",
            hostname="h",
        )
    )
    assert lock2.lockid >> 48 != 0
    assert len(eu.show_locks(ShowLocksRequest()).locks or []) == 1
    c.unlock(UnlockRequest(lockid=lock2.lockid))
    assert not (eu.show_locks(ShowLocksRequest()).locks or [])


# ---------------------------------------------------------------------------------------------- remotes
def test_remote_database_and_table_links(prefixed: ProxyService, zones: dict[str, HivemeshProcess]) -> None:
    c = _client(prefixed.uri).raw
    c.create_database(
        Database(
            name="sales_link",
            parameters={"hivemesh.remote.uris": zones["us"].uri, "hivemesh.remote.database": "sales"},
        )
    )
    assert "sales_link" in c.get_all_databases()
    db = c.get_database("sales_link")
    assert db.name == "sales_link"
    assert db.parameters["hivemesh.remote.database"] == "sales"
    assert db.parameters["hivemesh.remote.via"] == "thrift"
    assert db.parameters["zone"].endswith("/us")  # the remote's own description
    assert "secret" in c.get_all_tables("sales_link")
    t = c.get_table("sales_link", "orders")
    assert (t.dbName, t.tableName) == ("sales_link", "orders")
    assert t.parameters["hivemesh.remote.uris"] == zones["us"].uri
    assert [p.dbName for p in c.get_partitions("sales_link", "lineitem", -1)] == ["sales_link"] * 3
    with pytest.raises(MetaException, match="remote 'remote:sales_link' is read_only"):
        c.drop_table("sales_link", "orders", False)
    # a table link inside a primary database
    c.create_database(Database(name="local_db", parameters={}))
    c.create_table(
        _table(
            "local_db",
            "eu_orders",
            "/tmp/ignored",
            parameters={"hivemesh.remote.table": "sales.orders", "hivemesh.remote.uris": zones["eu"].uri},
        )
    )
    assert c.get_all_tables("local_db") == ["eu_orders"]
    lt = c.get_table("local_db", "eu_orders")
    assert (lt.dbName, lt.tableName) == ("local_db", "eu_orders")
    assert lt.sd.location.endswith("/eu/orders")
    assert lt.parameters["hivemesh.remote.table"] == "sales.orders"
    with pytest.raises(AlreadyExistsException):
        c.create_table(
            _table(
                "local_db",
                "eu_orders",
                "/x",
                parameters={"hivemesh.remote.table": "sales.orders", "hivemesh.remote.uris": zones["eu"].uri},
            )
        )
    with pytest.raises(NoSuchObjectException, match="remote table sales.nope not found"):
        c.create_table(
            _table(
                "local_db",
                "bad",
                "/x",
                parameters={"hivemesh.remote.table": "sales.nope", "hivemesh.remote.uris": zones["eu"].uri},
            )
        )
    with pytest.raises(InvalidObjectException, match="hivemesh.remote.typo"):
        c.create_database(Database(name="bad_link", parameters={"hivemesh.remote.typo": "x"}))
    # a link to a database the remote lacks: an exception create_database declares, no link made
    with pytest.raises(InvalidObjectException, match="remote database nosuch not found"):
        c.create_database(
            Database(
                name="ghost_link",
                parameters={"hivemesh.remote.uris": zones["us"].uri, "hivemesh.remote.database": "nosuch"},
            )
        )
    assert "ghost_link" not in c.get_all_databases()
    # links persist in the proxy's store: a new proxy on the same store sees them
    with ProxyService(prefixed.config_path) as again:
        c2 = _client(again.uri).raw
        assert c2.get_table("sales_link", "orders").tableName == "orders"
        assert c2.get_table("local_db", "eu_orders").tableName == "eu_orders"
    # DROP removes only the links; the remote objects are untouched. CASCADE of a remote database
    # is refused (as Spark's DROP DATABASE ... CASCADE is, at its first drop_table), in both forms
    us = _client(zones["us"].uri).raw
    data = Path(local_path(us.get_table("sales", "orders").sd.location)) / "cascade-probe.orc"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(b"rows")
    us_tables = sorted(us.get_all_tables("sales"))
    cascade = "DROP DATABASE sales_link CASCADE refused: it is a remote database.*drop it without CASCADE"
    with pytest.raises(MetaException, match=cascade):
        c.drop_database("sales_link", True, True)
    with pytest.raises(MetaException, match=cascade):
        c.drop_database_req(DropDatabaseRequest(name="sales_link", deleteData=True, cascade=True))
    assert c.get_table("sales_link", "orders").tableName == "orders"  # the link is still there
    c.drop_table("local_db", "eu_orders", True)
    c.drop_database("sales_link", True, False)
    assert "sales_link" not in c.get_all_databases()
    assert sorted(us.get_all_tables("sales")) == us_tables
    assert us.get_database("sales").name == "sales"
    assert data.read_bytes() == b"rows"
    data.unlink()
    assert "orders" in _client(zones["eu"].uri).raw.get_all_tables("sales")
    c.drop_database("local_db", True, True)


# ---------------------------------------------------------------------------------------------- service
def test_metrics_health_and_audit_log(zones: dict[str, HivemeshProcess], tmp_path: Path) -> None:
    cfg = _mesh(tmp_path, zones["main"].uri, [{"name": "eu", "uris": [zones["eu"].uri]}], metrics_port=0)
    with ProxyProcess(cfg, tmp_path / "proxy.log") as p, ThriftClient(p.host, p.port) as c:
        c.set_ugi("alice", [])
        c.get_table("eu_sales", "orders")
        with pytest.raises(NoSuchObjectException):
            c.get_table("eu_sales", "missing")
        with pytest.raises(MetaException):  # refused by the proxy (a read-only federated member)
            c.drop_table("eu_sales", "orders", False)
        with pytest.raises(TApplicationException) as unknown:  # the member lacks it: relayed, quietly
            c.get_partitions_by_expr(PartitionsByExprRequest(dbName="eu_sales", tblName="orders", expr=b""))
        assert unknown.value.type == TApplicationException.UNKNOWN_METHOD
        text = p.metrics()
        assert 'hivemesh_proxy_member_calls_total{member="eu",method="get_table"} 2.0' in text
        assert 'hivemesh_proxy_errors_total{error="NoSuchObjectException",method="get_table"} 1.0' in text
        assert 'hivemesh_proxy_member_up{member="eu",role="federated"} 1.0' in text
        status, health = p.health()
        assert status == 200 and health["members"]["eu"]["status"] == "AVAILABLE"
        time.sleep(0.2)
        log = (tmp_path / "proxy.log").read_text()
        assert (
            "user=alice" in log
            and "method=get_table member=eu" in log
            and "result=NoSuchObjectException" in log
        )
        assert "method=drop_table member=eu" in log and "result=MetaException" in log  # refused, named
        assert ": primary metastore '" in log and "primary primary" not in log  # the start line
        assert "Traceback" not in log and "TApplication exception in handler" not in log


def test_reload_under_load_loses_no_call(zones: dict[str, HivemeshProcess], tmp_path: Path) -> None:
    cfg = _mesh(tmp_path, zones["main"].uri, [{"name": "eu", "uris": [zones["eu"].uri]}], metrics_port=0)
    with ProxyProcess(cfg, tmp_path / "proxy.log") as p:
        errors: list[BaseException] = []
        calls = [0]
        stop = threading.Event()

        def hammer() -> None:
            with ThriftClient(p.host, p.port) as c:
                while not stop.is_set():
                    try:
                        assert c.get_table("eu_sales", "orders").dbName == "eu_sales"
                        calls[0] += 1
                    except BaseException as e:  # noqa: BLE001 - every failure counts
                        errors.append(e)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        # add a member by editing the file (picked up by the watcher) ...
        _mesh(
            tmp_path,
            zones["main"].uri,
            [{"name": "eu", "uris": [zones["eu"].uri]}, {"name": "us", "uris": [zones["us"].uri]}],
            metrics_port=0,
        )
        deadline = time.monotonic() + 10
        with ThriftClient(p.host, p.port) as c:
            while time.monotonic() < deadline and "us_sales" not in c.get_all_databases():
                time.sleep(0.1)
            assert "us_sales" in c.get_all_databases()
            # ... then remove it again with SIGHUP after an edit with an unchanged mtime window
            _mesh(tmp_path, zones["main"].uri, [{"name": "eu", "uris": [zones["eu"].uri]}], metrics_port=0)
            p.hup()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "us_sales" in c.get_all_databases():
                time.sleep(0.1)
            assert "us_sales" not in c.get_all_databases()
        # an invalid file is refused and the running configuration kept
        (tmp_path / "mesh.yaml").write_text("proxy: {port: 'x'}\nprimary: {name: main}\n")
        p.hup()
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert calls[0] > 100
        assert 'hivemesh_proxy_config_reloads_total{result="invalid"}' in p.metrics()
        log = (tmp_path / "proxy.log").read_text()
        assert "configuration not reloaded" in log
        assert p.proc is not None and p.proc.poll() is None


def test_reads_needing_no_rewrite_are_relayed_undecoded(
    prefixed: ProxyService, zones: dict[str, HivemeshProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Primary reads are relayed as the member's bytes (skipped over in C, never decoded); the
    answers are the same as directly, HMS exceptions included, and prefixed reads still rename."""
    from hivemesh.federation.connectors import thrift as thrift_connector

    relayed: list[str] = []
    original = thrift_connector.Connection.relay

    def spy(self: object, method: str, args: object, timeout_s: float | None = None) -> bytes:
        relayed.append(method)
        return original(self, method, args, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(thrift_connector.Connection, "relay", spy)
    direct = _client(zones["main"].uri).raw
    c = _client(prefixed.uri).raw
    c.create_database(Database(name="relay_db", locationUri="/tmp/relay_db", parameters={}))
    c.create_table(_table("relay_db", "p", "/tmp/relay_db/p", ("day",)))
    c.add_partitions(
        [
            Partition(
                values=[f"d{i:03d}"],
                dbName="relay_db",
                tableName="p",
                sd=_sd(f"/tmp/relay_db/p/day=d{i:03d}"),
                parameters={},
            )
            for i in range(300)
        ]
    )
    assert c.get_partitions("relay_db", "p", -1) == direct.get_partitions("relay_db", "p", -1)
    assert c.get_table("relay_db", "p") == direct.get_table("relay_db", "p")
    with pytest.raises(NoSuchObjectException):
        c.get_table("relay_db", "missing")
    assert relayed == ["get_config_value", "get_partitions", "get_table", "get_table"]
    assert c.get_table("eu_sales", "orders").dbName == "eu_sales"  # renamed: not relayed
    assert relayed[-1] == "get_table" and len(relayed) == 4
    c.drop_database("relay_db", True, True)


def test_readme_example_configuration_is_valid(tmp_path: Path) -> None:
    """The full mesh.yaml example in the README validates (and keeps meaning what it says)."""
    import re

    import yaml

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Federation") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    cfg = FederationConfig.model_validate(yaml.safe_load(block.group(1)))
    assert cfg.proxy.database_resolution.value == "prefixed"
    assert [(m.name, m.database_prefix) for m in cfg.federated] == [
        ("eu", "eu_"),
        ("lake", "lake_"),
        ("scratch", "scratch_"),
    ]
    assert cfg.federated[0].ssh_tunnel is not None and cfg.federated[0].mapped_tables == {
        "sales": ["orders", "line.*"]
    }
