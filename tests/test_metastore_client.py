"""hivemesh.client.metastore.MetastoreClient against real hivemesh metastores over TCP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import (
    Database,
    LockState,
    LockType,
    NoSuchTxnException,
    TxnAbortedException,
)
from thrift.transport.TTransport import TTransportException

from hivemesh.acid import ValidTxnList
from hivemesh.client.metastore import (
    LockTimeoutError,
    MetastoreClient,
    lock_component,
    parse_time_s,
    parse_uris,
)
from tests.support.servers import HivemeshProcess, free_port

MAX = "9223372036854775807"


@pytest.fixture()
def client(hivemesh_server: HivemeshProcess) -> Iterator[MetastoreClient]:
    with MetastoreClient(hivemesh_server.uri) as c:
        yield c


@pytest.fixture(scope="module")
def short_timeout_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    """A metastore with hive.txn.timeout = 3 s, reaping every 0.3 s (SQLite; heartbeats are client-side)."""
    base = tmp_path_factory.mktemp("short-timeout")
    args = ["--txn-timeout", "3", "--housekeeping-interval", "0.3"]
    with HivemeshProcess(f"sqlite:///{base / 'm.db'}", base / "wh", base / "m.log", extra_args=args) as proc:
        yield proc


# --- pure helpers -------------------------------------------------------------------------------


def test_parse_uris() -> None:
    assert parse_uris("thrift://h1:9083") == [("h1", 9083)]
    assert parse_uris("thrift://h1:1,thrift://h2") == [("h1", 1), ("h2", 9083)]
    assert parse_uris("h3:77") == [("h3", 77)]
    assert parse_uris("thrift://[::1]:9") == [("::1", 9)]
    for bad in ["", "http://h:1", "thrift://h:x"]:
        with pytest.raises(ValueError):
            parse_uris(bad)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("300s", 300.0),
        ("300", 300.0),
        ("5m", 300.0),
        ("1500ms", 1.5),
        ("2h", 7200.0),
        ("1 sec", 1.0),
        ("x", None),
    ],
)
def test_parse_time_s(value: str, seconds: float | None) -> None:
    assert parse_time_s(value) == seconds


# --- connection ---------------------------------------------------------------------------------


def test_connect_reads_txn_timeout(
    hivemesh_server: HivemeshProcess, short_timeout_server: HivemeshProcess
) -> None:
    with MetastoreClient(host=hivemesh_server.host, port=hivemesh_server.port) as c:
        assert c.txn_timeout_s == 300.0 and c.heartbeat_interval_s == 100.0
    with MetastoreClient(short_timeout_server.uri) as c:
        assert c.txn_timeout_s == 3.0 and c.heartbeat_interval_s == 1.0
        assert c.clone().txn_timeout_s == 3.0


def test_unreachable_server_raises_after_retries() -> None:
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(TTransportException):
        MetastoreClient(f"thrift://127.0.0.1:{port}", retries=2, retry_backoff_s=0.05)
    assert time.monotonic() - t0 >= 0.15  # backoff 0.05 + 0.1 between the three attempts


def test_second_uri_is_used_when_first_is_down(hivemesh_server: HivemeshProcess) -> None:
    uri = f"thrift://127.0.0.1:{free_port()},{hivemesh_server.uri}"
    with MetastoreClient(uri, retries=0) as c:
        assert c.current_notification_event_id() >= 0


def test_idempotent_call_reconnects_after_a_broken_connection(client: MetastoreClient) -> None:
    before = client.raw
    client._transport.close()  # type: ignore[union-attr] - the socket dies under the client
    resp = client.get_open_txns()  # retried on a new connection
    assert resp.txn_high_water_mark >= 0
    assert client.raw is not before


def test_non_idempotent_call_is_not_retried(client: MetastoreClient) -> None:
    client._transport.close()  # type: ignore[union-attr]
    with pytest.raises(TTransportException):
        client.open_txns(1)
    hwm = client.get_open_txns().txn_high_water_mark  # the client works again afterwards
    (txn,) = client.open_txns(1)
    assert txn == hwm + 1
    client.abort_txn(txn)


def test_framed_compact(tmp_path: Path) -> None:
    args = ["--framed", "--compact"]
    proc = HivemeshProcess(
        f"sqlite:///{tmp_path / 'm.db'}", tmp_path / "wh", tmp_path / "m.log", extra_args=args
    )
    with proc, MetastoreClient(proc.uri, framed=True, compact=True) as c:
        (txn,) = c.open_txns(1)
        assert str(c.valid_txn_list(txn)) == f"{txn}:{MAX}::"
        c.commit_txn(txn)


# --- transactions and write ids -----------------------------------------------------------------


def test_open_commit_abort_and_snapshot(client: MetastoreClient) -> None:
    a, b, c = client.open_txns(3, user="alice", host="h1")
    assert (b, c) == (a + 1, a + 2)
    resp = client.get_open_txns()
    assert {a, b, c} <= set(resp.open_txns) and resp.txn_high_water_mark >= c
    client.abort_txn(b)
    snap = client.valid_txn_list(c)  # c's own snapshot: a open, b aborted, c itself excluded
    assert snap.high_watermark == c
    assert a in snap.open_txns and b in snap.aborted_txns and c not in snap.exceptions
    assert not snap.is_txn_valid(a) and snap.is_txn_aborted(b) and snap.is_txn_valid(c)
    client.commit_txn(a)
    client.commit_txn(c)
    assert client.valid_txn_list(None).is_txn_valid(a)
    with pytest.raises(TxnAbortedException):
        client.commit_txn(b)
    with pytest.raises(NoSuchTxnException):
        client.commit_txn(10**12)


def test_abort_txns_and_heartbeats(client: MetastoreClient) -> None:
    a, b = client.open_txns(2)
    client.heartbeat(txn_id=a)
    r = client.heartbeat_txn_range(a, b)
    assert (set(r.aborted), set(r.nosuch)) == (set(), set())
    client.abort_txns([a, b])
    r = client.heartbeat_txn_range(a, b + 1)
    assert set(r.aborted) == {a, b}
    with pytest.raises(TxnAbortedException):
        client.heartbeat(txn_id=a)


def test_write_ids(client: MetastoreClient, unique_name: str) -> None:
    t1, t2 = client.open_txns(2)
    table = f"{unique_name}.t"
    ids = client.allocate_write_ids(unique_name, "t", [t1, t2])
    assert ids == {t1: 1, t2: 2}
    assert client.allocate_write_ids(unique_name, "t", [t2]) == {t2: 2}  # same id again
    client.commit_txn(t1)
    client.abort_txn(t2)
    (r,) = client.open_txns(1)
    snap = client.valid_txn_list(r)
    wids = client.valid_write_ids([table, f"{unique_name}.never"], snap)
    assert [str(w) for w in wids.values()] == [f"{table}:2:{MAX}::2", f"{unique_name}.never:0:{MAX}::"]
    x = client.valid_txn_write_id_list(r, [table], snap)
    assert str(x) == f"{r}${table}:2:{MAX}::2"
    client.commit_txn(r)


# --- context managers ---------------------------------------------------------------------------


def test_transaction_commits_and_aborts(client: MetastoreClient) -> None:
    with client.transaction() as tx:
        assert client.get_open_txns().open_txns.count(tx.txn_id) == 1
        assert isinstance(tx.valid_txn_list(), ValidTxnList)
    assert tx.state == "committed"
    snap = client.valid_txn_list()
    assert snap.is_txn_valid(tx.txn_id) and tx.txn_id not in snap.exceptions

    with pytest.raises(KeyError), client.transaction() as tx2:
        raise KeyError("boom")
    assert tx2.state == "aborted"
    assert client.valid_txn_list().is_txn_aborted(tx2.txn_id)


def test_transaction_heartbeats_keep_it_alive(short_timeout_server: HivemeshProcess) -> None:
    with MetastoreClient(short_timeout_server.uri) as c:
        with c.transaction() as tx:
            time.sleep(4.5)  # longer than hive.txn.timeout (3 s)
            assert tx.heartbeater is not None and tx.heartbeater.beats >= 3
            assert tx.heartbeat_error is None
        assert tx.state == "committed"
        # without heartbeats the housekeeper aborts it and the commit says so
        with pytest.raises(TxnAbortedException), c.transaction(heartbeat=False):
            time.sleep(4.5)


def test_locks(client: MetastoreClient, unique_name: str) -> None:
    read = [lock_component(unique_name, "t")]
    excl = [lock_component(unique_name, "t", lock_type=LockType.EXCLUSIVE)]
    shared = client.lock(read)
    assert shared.state == LockState.ACQUIRED
    assert [lk.lockid for lk in client.show_locks(unique_name, "t")] == [shared.lockid]
    waiting = client.lock(excl, wait=False)  # behind the shared read lock
    assert waiting.state == LockState.WAITING
    assert client.check_lock(waiting.lockid).state == LockState.WAITING
    client.unlock(waiting.lockid)
    t0 = time.monotonic()
    with pytest.raises(LockTimeoutError) as info:
        client.lock(excl, timeout_s=1.0)
    assert 1.0 <= time.monotonic() - t0 < 5.0
    locks = client.show_locks(unique_name, "t")
    assert [lk.lockid for lk in locks] == [shared.lockid]  # the waiting lock was released
    assert info.value.lock_id != shared.lockid
    client.unlock(shared.lockid)
    assert client.show_locks(unique_name, "t") == []
    got = client.lock(excl, timeout_s=5.0)
    assert got.state == LockState.ACQUIRED
    client.unlock(got.lockid)


def test_locked_context_manager(client: MetastoreClient, unique_name: str) -> None:
    with client.locked([lock_component(unique_name, "t", lock_type=LockType.EXCLUSIVE)]) as resp:
        assert resp.state == LockState.ACQUIRED
        assert [lk.lockid for lk in client.show_locks(unique_name)] == [resp.lockid]
    assert client.show_locks(unique_name) == []
    with client.transaction() as tx:
        with client.locked(
            [lock_component(unique_name, "t", lock_type=LockType.SHARED_WRITE)], tx.txn_id
        ) as r:
            assert [lk.txnid for lk in client.show_locks(unique_name)] == [tx.txn_id]
        assert [lk.lockid for lk in client.show_locks(unique_name)] == [r.lockid]  # held until commit
    assert client.show_locks(unique_name) == []


# --- notifications ------------------------------------------------------------------------------


def test_notifications(client: MetastoreClient, unique_name: str, tmp_path: Path) -> None:
    start = client.current_notification_event_id()
    client.raw.create_database(Database(name=unique_name, locationUri=str(tmp_path / "db"), parameters={}))
    other = unique_name + "x"
    client.raw.create_database(Database(name=other, locationUri=str(tmp_path / "db2"), parameters={}))
    assert client.current_notification_event_id() >= start + 2
    mine = client.next_notification(start, db=unique_name.upper())
    assert [(e.eventType, e.dbName) for e in mine] == [("CREATE_DATABASE", unique_name)]
    both = client.next_notification(start, max_events=10)
    assert [e.dbName for e in both if e.eventType == "CREATE_DATABASE"][-2:] == [unique_name, other]
    assert [e.eventId for e in both] == sorted(e.eventId for e in both)
    assert all(e.eventId > start for e in both)
    assert client.next_notification(start, max_events=1)[0].eventId == both[0].eventId
    assert client.next_notification(start, skip_types=["CREATE_DATABASE"], db=unique_name) == []
