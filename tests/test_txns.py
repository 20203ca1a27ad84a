"""Transactions and write ids over real Thrift (SQLite and PostgreSQL): Hive's TxnHandler semantics."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AbortTxnsRequest,
    AddDynamicPartitions,
    AllocateTableWriteIdsRequest,
    CommitTxnRequest,
    Database,
    GetValidWriteIdsRequest,
    HeartbeatRequest,
    HeartbeatTxnRangeRequest,
    MaxAllocatedTableWriteIdRequest,
    MetaException,
    NoSuchLockException,
    NoSuchTxnException,
    NotificationEventRequest,
    OpenTxnRequest,
    SeedTxnIdRequest,
    TxnAbortedException,
    TxnState,
    TxnToWriteId,
    TxnType,
)
from thrift.Thrift import TApplicationException

from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.store import Store
from hivemesh.metastore.txns import java_bitset_bytes, parse_valid_txn_list
from tests.conftest import drop_pg_database, make_pg_database
from tests.support.servers import HivemeshProcess, ThriftClient

LONG_MAX = 9223372036854775807


def open_txns(hms, n: int = 1, **kw) -> list[int]:  # type: ignore[no-untyped-def]
    return hms.open_txns(OpenTxnRequest(num_txns=n, user="tester", hostname="localhost", **kw)).txn_ids


def valid_txn_list(hms, current: int | None = None) -> str:  # type: ignore[no-untyped-def]
    """ValidTxnList string from get_open_txns (Hive's TxnCommonUtils.createValidReadTxnList)."""
    return str(ValidTxnList.from_open_txns(hms.get_open_txns(), current))


def write_id_string(t) -> str:  # type: ignore[no-untyped-def]
    """ValidReaderWriteIdList.writeToString of a TableValidWriteIds."""
    return str(ValidWriteIdList.from_table_valid_write_ids(t))


def write_ids(hms, tables: list[str], current: int | None = None) -> dict[str, str]:  # type: ignore[no-untyped-def]
    resp = hms.get_valid_write_ids(
        GetValidWriteIdsRequest(fullTableNames=tables, validTxnList=valid_txn_list(hms, current))
    )
    return {t.fullTableName: write_id_string(t) for t in resp.tblValidWriteIds}


def allocate(hms, db: str, table: str, txns: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    r = hms.allocate_table_write_ids(AllocateTableWriteIdsRequest(dbName=db, tableName=table, txnIds=txns))
    assert [p.txnId for p in r.txnToWriteIds] == txns
    return [p.writeId for p in r.txnToWriteIds]


def test_java_bitset_bytes_matches_java_layout() -> None:
    assert java_bitset_bytes([]) == b""
    assert java_bitset_bytes([0]) == b"\x01"
    assert java_bitset_bytes([1, 9]) == b"\x02\x02"
    assert java_bitset_bytes([15]) == b"\x00\x80"


def test_parse_valid_txn_list() -> None:
    assert parse_valid_txn_list("174:9223372036854775807::") == (174, set(), set())
    assert parse_valid_txn_list("10:5:5,7:6") == (10, {5, 7}, {6})
    assert parse_valid_txn_list("12:1:1-5,8:9-11") == (
        12,
        {1, 2, 3, 4, 5, 8},
        {9, 10, 11},
    )  # Hive 3.1+ ranges
    with pytest.raises(MetaException):
        parse_valid_txn_list("x:1::")


def test_open_txns_ids_ascending_never_reused(hms) -> None:  # type: ignore[no-untyped-def]
    batch = open_txns(hms, 5)
    assert batch == list(range(batch[0], batch[0] + 5))
    for t in batch:
        hms.commit_txn(CommitTxnRequest(txnid=t))
    again = open_txns(hms, 2)
    assert again[0] == batch[-1] + 1
    hms.abort_txns(AbortTxnsRequest(txn_ids=again))
    # open_txns declares no exception: the message travels in a TApplicationException, as from Java
    with pytest.raises(TApplicationException, match="Invalid input for number of txns: 0"):
        open_txns(hms, 0)


def test_open_txns_listing_and_aborted_bits(hms) -> None:  # type: ignore[no-untyped-def]
    a, b, c = open_txns(hms, 3)
    hms.abort_txn(AbortTxnRequest(txnid=b))
    r = hms.get_open_txns()
    assert r.txn_high_water_mark >= c
    pos = {t: i for i, t in enumerate(r.open_txns)}
    assert a in pos and b in pos and c in pos
    bits = int.from_bytes(r.abortedBits, "little")
    assert bits >> pos[b] & 1 and not bits >> pos[a] & 1 and not bits >> pos[c] & 1
    info = {t.id: t for t in hms.get_open_txns_info().open_txns}
    assert info[a].state == TxnState.OPEN and info[b].state == TxnState.ABORTED
    assert info[a].user == "tester" and info[a].hostname == "localhost" and info[a].startedTime > 0
    hms.commit_txn(CommitTxnRequest(txnid=a))
    hms.commit_txn(CommitTxnRequest(txnid=c))
    r2 = hms.get_open_txns()
    assert a not in r2.open_txns and c not in r2.open_txns and b in r2.open_txns  # aborted txns stay listed


def test_read_only_txns_are_not_listed(hms) -> None:  # type: ignore[no-untyped-def]
    (ro,) = open_txns(hms, 1, txn_type=TxnType.READ_ONLY)
    assert ro not in hms.get_open_txns().open_txns
    with pytest.raises(MetaException, match="Read-only"):
        allocate(hms, "default", "ro_table", [ro])
    hms.commit_txn(CommitTxnRequest(txnid=ro))


def test_commit_and_abort_exceptions(hms) -> None:  # type: ignore[no-untyped-def]
    committed, aborted = open_txns(hms, 2)
    hms.commit_txn(CommitTxnRequest(txnid=committed))
    hms.abort_txn(AbortTxnRequest(txnid=aborted))
    hms.commit_txn(CommitTxnRequest(txnid=committed))  # idempotent retry, as in Hive
    hms.abort_txn(AbortTxnRequest(txnid=aborted))  # idempotent too
    with pytest.raises(TxnAbortedException, match=f"Transaction txnid:{aborted} already aborted"):
        hms.commit_txn(CommitTxnRequest(txnid=aborted))
    with pytest.raises(NoSuchTxnException, match=f"Transaction txnid:{committed} is already committed"):
        hms.abort_txn(AbortTxnRequest(txnid=committed))
    with pytest.raises(NoSuchTxnException, match="No such transaction txnid:999999999"):
        hms.commit_txn(CommitTxnRequest(txnid=999999999))
    with pytest.raises(NoSuchTxnException, match="No such transaction"):
        hms.heartbeat(HeartbeatRequest(txnid=999999999))
    with pytest.raises(TxnAbortedException):
        hms.heartbeat(HeartbeatRequest(txnid=aborted))
    with pytest.raises(NoSuchLockException, match="lockid:987654321"):
        hms.heartbeat(HeartbeatRequest(lockid=987654321))
    with pytest.raises(TxnAbortedException):
        allocate(hms, "default", "x", [aborted])


def test_heartbeat_txn_range(hms) -> None:  # type: ignore[no-untyped-def]
    ids = open_txns(hms, 4)
    hms.abort_txn(AbortTxnRequest(txnid=ids[1]))
    hms.commit_txn(CommitTxnRequest(txnid=ids[2]))
    before = {t.id: t.lastHeartbeatTime for t in hms.get_open_txns_info().open_txns}
    time.sleep(0.01)
    r = hms.heartbeat_txn_range(HeartbeatTxnRangeRequest(min=ids[0], max=ids[3] + 1))
    assert r.aborted == {ids[1]}
    assert r.nosuch == {ids[2], ids[3] + 1}
    after = {t.id: t for t in hms.get_open_txns_info().open_txns}
    assert after[ids[0]].lastHeartbeatTime > before[ids[0]] and after[ids[0]].heartbeatCount == 1
    hms.abort_txns(AbortTxnsRequest(txn_ids=ids))


def test_write_ids_per_table_consecutive_and_idempotent(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    t1, t2, t3 = open_txns(hms, 3)
    assert allocate(hms, "default", unique_name, [t1, t2]) == [1, 2]
    assert allocate(hms, "default", unique_name, [t2, t1]) == [2, 1]  # same ids again
    assert allocate(hms, "default", unique_name + "_b", [t2]) == [1]  # per table
    assert allocate(hms, "DEFAULT", unique_name.upper(), [t3]) == [3]  # names are case-insensitive
    mx = hms.get_max_allocated_table_write_id(
        MaxAllocatedTableWriteIdRequest(dbName="default", tableName=unique_name)
    )
    assert mx.maxWriteId == 3
    for t in (t1, t2, t3):
        hms.commit_txn(CommitTxnRequest(txnid=t))


def test_valid_write_ids_follow_hive(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    full = f"default.{unique_name}"
    assert write_ids(hms, [full]) == {full: f"{full}:0:{LONG_MAX}::"}  # never written
    a, b, c, d = open_txns(hms, 4)
    assert allocate(hms, "default", unique_name, [a, b, c, d]) == [1, 2, 3, 4]
    hms.commit_txn(CommitTxnRequest(txnid=a))
    hms.abort_txn(AbortTxnRequest(txnid=b))
    # c, d open: write ids 3, 4 invalid and open; 2 aborted
    assert write_ids(hms, [full]) == {full: f"{full}:4:3:3,4:2"}
    hms.commit_txn(CommitTxnRequest(txnid=d))
    assert write_ids(hms, [full]) == {full: f"{full}:4:3:3:2"}
    # a reader whose snapshot predates txn d (its txn id is below d) does not see write id 4
    (late,) = open_txns(hms, 1)
    snap_before_d = f"{d - 1}:{c}:{c}:{b}"
    resp = hms.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=snap_before_d))
    assert write_id_string(resp.tblValidWriteIds[0]) == f"{full}:3:3:3:2"
    hms.commit_txn(CommitTxnRequest(txnid=c))
    assert write_ids(hms, [full]) == {full: f"{full}:4:{LONG_MAX}::2"}
    hms.commit_txn(CommitTxnRequest(txnid=late))
    with pytest.raises(MetaException):
        hms.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=None))


def _many_tables_in_one_call(hms, prefix: str, n: int = 120) -> None:  # type: ignore[no-untyped-def]
    tables = [f"{prefix}_{i}" for i in range(n)]
    txns = open_txns(hms, 6)
    written = n * 3 // 4  # the rest are never written
    for i, t in enumerate(tables[:written]):
        allocate(hms, "default", t, [txns[i % 6], txns[(i + 1) % 6]])
    hms.commit_txn(CommitTxnRequest(txnid=txns[0]))
    hms.abort_txn(AbortTxnRequest(txnid=txns[1]))
    hms.commit_txn(CommitTxnRequest(txnid=txns[4]))
    names = [f"default.{t}" for t in tables] + [f"DEFAULT.{tables[3].upper()}"]
    vtl = valid_txn_list(hms)
    together = hms.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=names, validTxnList=vtl))
    assert [t.fullTableName for t in together.tblValidWriteIds] == [n.lower() for n in names]
    for name, t in zip(names, together.tblValidWriteIds, strict=True):
        alone = hms.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=[name], validTxnList=vtl))
        assert write_id_string(t) == write_id_string(alone.tblValidWriteIds[0]), name
    assert together.tblValidWriteIds[-2].writeIdHighWaterMark == 0  # never written
    assert any(t.abortedBits for t in together.tblValidWriteIds[:written])  # txns[1] aborted
    assert any(t.minOpenWriteId for t in together.tblValidWriteIds[:written])  # txns 2, 3, 5 open
    for t in txns[2:4] + txns[5:]:
        hms.commit_txn(CommitTxnRequest(txnid=t))


def test_valid_write_ids_of_many_tables_in_one_call_equal_one_call_each(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    """120 tables, a quarter never written, one named twice in mixed case, with open, aborted and
    committed writers: one call answers each table, in the order asked, as a call for it alone."""
    _many_tables_in_one_call(hms, unique_name)


def test_valid_write_ids_across_statement_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same in process, with chunks of 7 tables per statement (the last one partial)."""
    import hivemesh.metastore.txn.get_valid_write_ids as operation
    from hivemesh.metastore.handler import LocalMetastore
    from hivemesh.metastore.store import Store

    monkeypatch.setattr(operation, "_TABLES_PER_STATEMENT", 7)
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        _many_tables_in_one_call(LocalMetastore(store, str(tmp_path / "wh")), "chunked", n=30)
    finally:
        store.dispose()


def test_own_writes_visible_to_the_writing_txn(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    full = f"default.{unique_name}"
    other, me = open_txns(hms, 2)
    assert allocate(hms, "default", unique_name, [other]) == [1]
    assert allocate(hms, "default", unique_name, [me]) == [2]
    # ValidTxnList of txn `me` leaves itself out of the exceptions: its own write id 2 is valid
    assert write_ids(hms, [full], current=me) == {full: f"{full}:2:1:1:"}
    hms.abort_txns(AbortTxnsRequest(txn_ids=[other, me]))


def test_add_dynamic_partitions_needs_open_txn(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    (t,) = open_txns(hms, 1)
    (w,) = allocate(hms, "default", unique_name, [t])
    hms.add_dynamic_partitions(
        AddDynamicPartitions(
            txnid=t, writeid=w, dbname="default", tablename=unique_name, partitionnames=["p=1", "p=2"]
        )
    )
    hms.commit_txn(CommitTxnRequest(txnid=t))
    with pytest.raises(NoSuchTxnException):
        hms.add_dynamic_partitions(
            AddDynamicPartitions(
                txnid=t, writeid=w, dbname="default", tablename=unique_name, partitionnames=["p=3"]
            )
        )


def test_replication_forms_map_txns_and_force_write_ids(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    policy = f"repl_{unique_name}"
    targets = open_txns(hms, 2, replPolicy=policy, replSrcTxnIds=[700, 701])
    assert len(set(targets)) == 2
    assert open_txns(hms, 2, replPolicy=policy, replSrcTxnIds=[700, 701]) == targets  # idempotent
    r = hms.allocate_table_write_ids(
        AllocateTableWriteIdsRequest(
            dbName="default",
            tableName=unique_name,
            replPolicy=policy,
            srcTxnToWriteIdList=[TxnToWriteId(txnId=700, writeId=41), TxnToWriteId(txnId=701, writeId=42)],
        )
    )
    assert [(p.txnId, p.writeId) for p in r.txnToWriteIds] == [(targets[0], 41), (targets[1], 42)]
    hms.commit_txn(CommitTxnRequest(txnid=700, replPolicy=policy))
    hms.abort_txn(AbortTxnRequest(txnid=701, replPolicy=policy))
    hms.commit_txn(CommitTxnRequest(txnid=700, replPolicy=policy))  # replayed twice: no error
    full = f"default.{unique_name}"
    assert write_ids(hms, [full]) == {full: f"{full}:42:{LONG_MAX}::42"}
    (local,) = open_txns(hms, 1)
    assert allocate(hms, "default", unique_name, [local]) == [43]  # the next id moved past the forced ones
    hms.commit_txn(CommitTxnRequest(txnid=local))


def _events_after(hms, last: int, **kw) -> list:  # type: ignore[no-untyped-def]
    return hms.get_next_notification(NotificationEventRequest(lastEvent=last, **kw)).events


def test_txn_events_and_filters(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    start = hms.get_current_notificationEventId().eventId
    a, b = open_txns(hms, 2)
    allocate(hms, "default", unique_name, [a])
    hms.commit_txn(CommitTxnRequest(txnid=a))
    hms.abort_txn(AbortTxnRequest(txnid=b))
    evs = _events_after(hms, start)
    assert [e.eventType for e in evs] == ["OPEN_TXN", "ALLOC_WRITE_ID_EVENT", "COMMIT_TXN", "ABORT_TXN"]
    assert [e.eventId for e in evs] == list(range(start + 1, start + 5))
    assert hms.get_current_notificationEventId().eventId == start + 4
    opened = json.loads(evs[0].message)
    assert opened["txnIds"] == [a, b] and opened["fromTxnId"] == a and opened["toTxnId"] == b
    assert evs[1].dbName == "default" and evs[1].tableName == unique_name
    assert all(e.messageFormat == "json-0.2" and e.eventTime > 0 for e in evs)
    assert [e.eventType for e in _events_after(hms, start, maxEvents=2)] == [
        "OPEN_TXN",
        "ALLOC_WRITE_ID_EVENT",
    ]
    skipped = _events_after(hms, start, eventTypeSkipList=["OPEN_TXN", "ABORT_TXN"])
    assert [e.eventType for e in skipped] == ["ALLOC_WRITE_ID_EVENT", "COMMIT_TXN"]
    scoped = _events_after(hms, start, dbName="default", tableNames=[unique_name.upper()])
    assert [e.eventType for e in scoped] == ["ALLOC_WRITE_ID_EVENT"]
    assert _events_after(hms, start, eventTypeList=["COMMIT_TXN"])[0].eventType == "COMMIT_TXN"
    from hive_metastore.ttypes import NotificationEventsCountRequest

    count = hms.get_notification_events_count(
        NotificationEventsCountRequest(fromEventId=start, dbName="default")
    )
    assert count.eventsCount == 1


def test_event_ids_dense_under_concurrent_writers(hivemesh_server: HivemeshProcess, unique_name: str) -> None:
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        start = c.get_current_notificationEventId().eventId
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
                for j in range(15):
                    if j % 3 == 0:
                        c.create_database(Database(name=f"{unique_name}_{i}_{j}", locationUri=None))
                    (t,) = open_txns(c, 1)
                    c.commit_txn(CommitTxnRequest(txnid=t))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        evs = [e for e in _events_after(c, start)]
        ids = [e.eventId for e in evs]
        ours = [
            e for e in evs if e.eventType == "CREATE_DATABASE" and (e.dbName or "").startswith(unique_name)
        ]
    assert ids == list(range(start + 1, start + 1 + len(ids)))  # dense, ordered, no duplicate
    assert len(ids) >= 8 * (15 * 2 + 5)
    assert len(ours) == 8 * 5


@pytest.fixture()
def fresh_url(backend_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty store of the same kind as ``backend_url`` (SQLite file or PostgreSQL database)."""
    if backend_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'own.db'}"
        return
    url = make_pg_database("hivemesh_txn")
    yield url
    drop_pg_database(url)


def test_reaper_aborts_txns_without_heartbeat(fresh_url: str, tmp_path: Path) -> None:
    args = ["--txn-timeout", "1.5", "--housekeeping-interval", "0.2"]
    with (
        HivemeshProcess(fresh_url, tmp_path / "wh", tmp_path / "log", extra_args=args) as srv,
        ThriftClient(srv.host, srv.port) as c,
    ):
        assert c.get_config_value("hive.txn.timeout", "") == "1.5s"
        kept, dropped = open_txns(c, 2)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            c.heartbeat(HeartbeatRequest(txnid=kept))
            time.sleep(0.3)
        states = {t.id: t.state for t in c.get_open_txns_info().open_txns}
        assert states[kept] == TxnState.OPEN
        assert states[dropped] == TxnState.ABORTED
        with pytest.raises(TxnAbortedException):
            c.commit_txn(CommitTxnRequest(txnid=dropped))
        c.commit_txn(CommitTxnRequest(txnid=kept))
        kinds = [e.eventType for e in _events_after(c, 0)]
        assert kinds.count("ABORT_TXN") == 1


def test_seed_txn_id_only_grows(hms) -> None:  # type: ignore[no-untyped-def]
    (t,) = open_txns(hms, 1)
    hms.commit_txn(CommitTxnRequest(txnid=t))
    with pytest.raises(MetaException):
        hms.seed_txn_id(SeedTxnIdRequest(seedTxnId=1))
    hms.seed_txn_id(SeedTxnIdRequest(seedTxnId=t + 1000))
    assert open_txns(hms, 1)[0] == t + 1000


# ---------------------------------------------------------------- retention, in process
@pytest.fixture()
def local(fresh_url: str, tmp_path: Path) -> Iterator[LocalMetastore]:
    """A LocalMetastore of its own (the housekeeping it runs would disturb a shared store)."""
    store = Store(fresh_url)
    yield LocalMetastore(store, str(tmp_path / "wh"))
    store.dispose()


def _string(m: LocalMetastore, full: str, txn_list: str) -> str:
    r = m.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=txn_list))
    return write_id_string(r.tblValidWriteIds[0])


def test_purge_keeps_every_snapshot_answer(local: LocalMetastore, unique_name: str) -> None:
    m = local
    full = f"default.{unique_name}"

    def open_(n: int = 1) -> list[int]:
        return m.open_txns(OpenTxnRequest(num_txns=n, user="u", hostname="h")).txn_ids

    def alloc(t: int) -> int:
        r = m.allocate_table_write_ids(
            AllocateTableWriteIdsRequest(dbName="default", tableName=unique_name, txnIds=[t])
        )
        return r.txnToWriteIds[0].writeId

    early, late = open_(2)
    assert alloc(late) < alloc(early)  # write ids out of txn order: early holds the highest one
    m.commit_txn(CommitTxnRequest(txnid=early))
    (aborted,) = open_(1)
    alloc(aborted)
    m.abort_txn(AbortTxnRequest(txnid=aborted))
    (ro,) = open_(1)
    m.abort_txn(AbortTxnRequest(txnid=ro))  # aborted without writing
    m.commit_txn(CommitTxnRequest(txnid=late))
    (reader,) = open_(1)
    snapshot = f"{reader}:{reader}:{reader}:{aborted}"
    before = _string(m, full, snapshot)
    assert before == f"{full}:3:{LONG_MAX}::3"
    purged = m.purge_completed_txns(retention_ms=0, now=int(time.time() * 1000) + 10)
    assert purged >= 3  # early, late, ro (the reader is open; the aborted writer must stay)
    assert _string(m, full, snapshot) == before
    info = {t.id: t.state for t in m.get_open_txns_info().open_txns}
    assert info[aborted] == TxnState.ABORTED and ro not in info
    with pytest.raises(TxnAbortedException):
        m.commit_txn(CommitTxnRequest(txnid=aborted))
    m.commit_txn(CommitTxnRequest(txnid=early))  # purged committed txn: still a no-op commit
    m.commit_txn(CommitTxnRequest(txnid=reader))


def test_purge_respects_open_snapshots(local: LocalMetastore, unique_name: str) -> None:
    m = local
    (old,) = m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
    (w,) = m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
    m.allocate_table_write_ids(
        AllocateTableWriteIdsRequest(dbName="default", tableName=unique_name, txnIds=[w])
    )
    m.commit_txn(CommitTxnRequest(txnid=w))
    # txn `old` was open when `w` ran: w's record must survive while `old` is open
    m.purge_completed_txns(retention_ms=0, now=int(time.time() * 1000) + 10)
    full = f"default.{unique_name}"
    assert _string(m, full, f"{w}:{old}:{old}:") == f"{full}:1:{LONG_MAX}::"
    # a snapshot taken before w (txn high watermark below it): write id 1 is there but invalid
    assert _string(m, full, f"{w - 1}:{old}:{old}:") == f"{full}:1:1:1:"
    m.commit_txn(CommitTxnRequest(txnid=old))


def test_event_retention_spares_readers(local: LocalMetastore) -> None:
    m = local
    for _ in range(5):
        (t,) = m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
        m.commit_txn(CommitTxnRequest(txnid=t))
    last = m.get_current_notificationEventId().eventId
    m.get_next_notification(NotificationEventRequest(lastEvent=last - 3, maxEvents=1))  # a reader at last-3
    removed = m.purge_events(retention_s=0, now=int(time.time()) + 10)
    left = [e.eventId for e in m.get_next_notification(NotificationEventRequest(lastEvent=0)).events]
    assert left == [last - 2, last - 1, last]
    assert removed == last - 3
    assert m.get_current_notificationEventId().eventId == last  # ids continue after a purge


def _table(db: str, name: str, partitioned: bool = False):  # type: ignore[no-untyped-def]
    from hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    sd = StorageDescriptor(
        cols=[FieldSchema("id", "int", None)],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
    )
    return Table(
        tableName=name,
        dbName=db,
        sd=sd,
        partitionKeys=[FieldSchema("p", "string", None)] if partitioned else [],
        parameters={"transactional": "true"},
        tableType="MANAGED_TABLE",
    )


def test_acid_write_and_insert_events(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    from hive_metastore.ttypes import (
        FireEventRequest,
        FireEventRequestData,
        GetAllWriteEventInfoRequest,
        InsertEventRequestData,
        Partition,
        WriteNotificationLogRequest,
    )

    hms.create_table(_table("default", unique_name, partitioned=True))
    tbl = hms.get_table("default", unique_name)
    sd = tbl.sd
    hms.add_partition(Partition(values=["a"], dbName="default", tableName=unique_name, sd=sd, parameters={}))
    start = hms.get_current_notificationEventId().eventId
    (t,) = open_txns(hms, 1)
    (w,) = allocate(hms, "default", unique_name, [t])
    files = [f"{sd.location}/p=a/delta_{w:07d}_{w:07d}_0000/bucket_00000"]
    hms.add_write_notification_log(
        WriteNotificationLogRequest(
            txnId=t, writeId=w, db="default", table=unique_name,
            fileInfo=InsertEventRequestData(filesAdded=files), partitionVals=["a"],
        )
    )  # fmt: skip
    hms.commit_txn(CommitTxnRequest(txnid=t))
    evs = _events_after(hms, start)
    # as Hive 4.2: the reported write appends no event (get_all_write_event_info has it), and
    # COMMIT_TXN names the txn's databases and write ids, not its tables or files
    assert [e.eventType for e in evs] == ["OPEN_TXN", "ALLOC_WRITE_ID_EVENT", "COMMIT_TXN"]
    commit = json.loads(evs[2].message)
    assert commit["txnid"] == t and commit["writeIds"] == [w] and commit["databases"] == ["default"]
    assert commit["tables"] is None and commit["files"] is None
    (info,) = hms.get_all_write_event_info(GetAllWriteEventInfoRequest(txnId=t))
    assert (info.writeId, info.table, info.partition, info.files) == (w, unique_name, "p=a", files[0] + "###")
    # the txn is over; the call declares no exception, so the message comes in a TApplicationException
    with pytest.raises(TApplicationException, match=f"Transaction txnid:{t} is already committed"):
        hms.add_write_notification_log(
            WriteNotificationLogRequest(
                txnId=t,
                writeId=w,
                db="default",
                table=unique_name,
                fileInfo=InsertEventRequestData(filesAdded=[]),
            )
        )
    ids = hms.fire_listener_event(
        FireEventRequest(
            successful=True, data=FireEventRequestData(insertData=InsertEventRequestData(filesAdded=["f1"])),
            dbName="default", tableName=unique_name, partitionVals=["a"],
        )
    ).eventIds  # fmt: skip
    (ins,) = _events_after(hms, ids[0] - 1)
    assert ins.eventType == "INSERT" and ins.eventId == ids[0] and "f1" in ins.message
    with pytest.raises(TApplicationException, match="table not found"):  # no declared exception either
        hms.fire_listener_event(
            FireEventRequest(
                successful=True, data=FireEventRequestData(insertData=InsertEventRequestData(filesAdded=[])),
                dbName="default", tableName=unique_name + "_missing",
            )
        )  # fmt: skip
    hms.drop_table("default", unique_name, True)


def test_get_all_write_event_info(hms, unique_name: str) -> None:  # type: ignore[no-untyped-def]
    """A txn's add_write_notification_log writes, filtered by database and table (as given: names
    are stored lower case), still answered after the commit (Hive's replication dump asks then);
    and after an abort, as Hive 4.2 does; an unknown txn has none."""
    from hive_metastore.ttypes import (
        GetAllWriteEventInfoRequest,
        InsertEventRequestData,
        Partition,
        WriteNotificationLogRequest,
    )

    part_t, flat_t = unique_name + "_p", unique_name + "_f"
    hms.create_table(_table("default", part_t, partitioned=True))
    hms.create_table(_table("default", flat_t))
    sd = hms.get_table("default", part_t).sd
    hms.add_partition(Partition(values=["a"], dbName="default", tableName=part_t, sd=sd, parameters={}))
    (t,) = open_txns(hms, 1)
    (wp,) = allocate(hms, "default", part_t, [t])
    (wf,) = allocate(hms, "default", flat_t, [t])
    pfiles = [f"{sd.location}/p=a/delta_{wp:07d}_{wp:07d}_0000/bucket_00000", f"{sd.location}/p=a/x"]
    ffiles = ["file:/w/f/delta_1/bucket_00000"]
    for table, w, files, pvals in ((flat_t, wf, ffiles, None), (part_t, wp, pfiles, ["a"])):
        hms.add_write_notification_log(
            WriteNotificationLogRequest(
                txnId=t, writeId=w, db="default", table=table,
                fileInfo=InsertEventRequestData(filesAdded=files), partitionVals=pvals,
            )
        )  # fmt: skip

    def ask(txn: int, db: str | None = None, table: str | None = None):  # type: ignore[no-untyped-def]
        return hms.get_all_write_event_info(
            GetAllWriteEventInfoRequest(txnId=txn, dbName=db, tableName=table)
        )

    every = ask(t)
    assert [(i.table, i.writeId) for i in every] == sorted([(flat_t, wf), (part_t, wp)])
    by_table = {i.table: i for i in every}
    p, f = by_table[part_t], by_table[flat_t]
    assert p.database == "default" and p.partition == "p=a"
    assert p.files == f"{pfiles[0]}###]{pfiles[1]}###"  # Hive 4.2: ReplChangeManager form, "]"
    assert json.loads(p.partitionObj)["1"]["lst"] == ["str", 1, "a"]  # Thrift JSON: values
    assert json.loads(p.tableObj)["1"]["str"] == part_t
    assert f.files == ffiles[0] + "###" and f.partition == "" and f.partitionObj is None
    assert json.loads(f.tableObj)["1"]["str"] == flat_t
    assert ask(t, "default") == every and ask(t, "*", "*") == every
    assert ask(t, "default", flat_t) == [f]
    assert ask(t, None, part_t) == [p]
    assert ask(t, "default", part_t.upper()) == [] and ask(t, "DEFAULT") == []
    assert ask(t, "no_such_db") == [] and ask(t, "default", "no_such_table") == []
    assert ask(t + 1_000_000) == []
    hms.commit_txn(CommitTxnRequest(txnid=t))
    assert ask(t) == every  # kept after the commit, for the replication dump
    (a,) = open_txns(hms, 1)
    allocate(hms, "default", flat_t, [a])
    hms.add_write_notification_log(
        WriteNotificationLogRequest(
            txnId=a,
            writeId=wf + 1,
            db="default",
            table=flat_t,
            fileInfo=InsertEventRequestData(filesAdded=[]),
        )
    )
    assert [i.files for i in ask(a)] == [""]
    hms.abort_txn(AbortTxnRequest(txnid=a))
    assert [(i.table, i.writeId) for i in ask(a)] == [(flat_t, wf + 1)]  # kept, as Hive 4.2 does
    hms.drop_table("default", part_t, True)
    hms.drop_table("default", flat_t, True)


def test_write_event_info_goes_with_the_event_retention(local: LocalMetastore) -> None:
    """purge_events removes the write notifications of ended txns older than the retention and
    keeps those of open txns."""
    from hive_metastore.ttypes import (
        GetAllWriteEventInfoRequest,
        InsertEventRequestData,
        WriteNotificationLogRequest,
    )

    m = local
    name = "wnl_retention"
    m.create_table(_table("default", name))
    done, still = m.open_txns(OpenTxnRequest(num_txns=2, user="u", hostname="h")).txn_ids
    for t in (done, still):
        (w,) = m.allocate_table_write_ids(
            AllocateTableWriteIdsRequest(dbName="default", tableName=name, txnIds=[t])
        ).txnToWriteIds
        m.add_write_notification_log(
            WriteNotificationLogRequest(
                txnId=t,
                writeId=w.writeId,
                db="default",
                table=name,
                fileInfo=InsertEventRequestData(filesAdded=["f"]),
            )
        )
    m.commit_txn(CommitTxnRequest(txnid=done))

    def count(t: int) -> int:
        return len(m.get_all_write_event_info(GetAllWriteEventInfoRequest(txnId=t)))

    m.purge_events(retention_s=3600)
    assert (count(done), count(still)) == (1, 1)
    # a reader paging from before the commit keeps its COMMIT_TXN event, and with it the txn's writes
    (commit,) = [
        e
        for e in m.get_next_notification(NotificationEventRequest(lastEvent=0)).events
        if e.eventType == "COMMIT_TXN" and json.loads(e.message)["txnid"] == done
    ]
    m.get_next_notification(NotificationEventRequest(lastEvent=commit.eventId - 1, maxEvents=1))
    m.purge_events(retention_s=0, now=int(time.time()) + 10)
    assert (count(done), count(still)) == (1, 1)
    m._reader_positions.clear()  # the reader went away (an hour without asking)
    m.purge_events(retention_s=0, now=int(time.time()) + 10)
    assert (count(done), count(still)) == (0, 1)
    m.abort_txn(AbortTxnRequest(txnid=still))


def test_oversized_open_txns_is_capped_and_runaway_clients_refused(
    local: LocalMetastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open_txns`` of more than hive.txn.max.open.batch (1,000) opens 1,000, as Hive does; once
    hive.max.open.txns are open (100,000; 1,500 here) new txns are refused with Hive's
    MetaException until some end. Replicated txns are not counted against the limit."""
    import hivemesh.metastore.txn.open_txns as operation

    m = local
    ids = m.open_txns(OpenTxnRequest(num_txns=5000, user="u", hostname="h")).txn_ids
    assert len(ids) == 1000 and ids == sorted(ids)
    monkeypatch.setattr(operation, "MAX_OPEN_TXNS", 1500)
    more = m.open_txns(OpenTxnRequest(num_txns=1000, user="u", hostname="h")).txn_ids
    assert len(more) == 1000
    with pytest.raises(MetaException, match=r"Maximum allowed number of open transactions \(1500\)"):
        m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h"))
    repl = m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h", replPolicy="p", replSrcTxnIds=[7]))
    assert len(repl.txn_ids) == 1
    m.abort_txns(AbortTxnsRequest(txn_ids=ids))
    assert len(m.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids) == 1


def test_reaper_aborts_in_batches_and_stops_between_them(local: LocalMetastore) -> None:
    """2,500 timed-out txns are aborted 1,000 per database transaction (other writers go in
    between); a stopping server ends the pass after the batch in progress."""
    m = local
    ids = []
    for _ in range(3):
        ids += m.open_txns(
            OpenTxnRequest(num_txns=1000 if len(ids) < 2000 else 500, user="u", hostname="h")
        ).txn_ids
    later = int(time.time() * 1000) + m.txn_timeout_ms + 60_000
    asked: list[int] = []

    def stop_after_first() -> bool:
        asked.append(1)
        return len(asked) > 1

    first = m.abort_timed_out_txns(now=later, should_stop=stop_after_first)
    assert first == ids[:1000]  # one batch, then the stop was seen
    calls: list[int] = []
    rest = m.abort_timed_out_txns(now=later, should_stop=lambda: bool(calls.append(1)))
    assert rest == ids[1000:] and len(calls) == 2  # two more batches (1,000 and 500)
    info = {t.id: t.state for t in m.get_open_txns_info().open_txns}
    assert all(info.get(t, TxnState.ABORTED) == TxnState.ABORTED for t in ids)
