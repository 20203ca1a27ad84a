"""Hive locks over real Thrift servers, on SQLite and PostgreSQL: ``lock``, ``check_lock``, ``unlock``,
``show_locks`` (and the lock side of txns: release at commit/abort, TXN_COMPONENTS, expiry).

* Compatibility: every ordered pair of lock types on one table, then pairs across levels (db vs
  table vs partition, different tables/partitions/databases).
* Granting: all-or-nothing requests, first-come-first-served waiting (a compatible request waits
  behind an earlier waiting one), blockers reported by ``show_locks``.
* Release by ``unlock``, ``commit_txn`` and ``abort_txn``; the exceptions of each call.
* Expiry: a server with ``--txn-timeout 2`` drops txn-less locks that miss heartbeats (in
  ``lock``/``check_lock`` themselves, and from the housekeeper), keeps heartbeated ones.
* Stress: threads taking EXCLUSIVE and SHARED_READ locks on one table (with and without txns)
  never hold incompatible locks at the same time.

Each test locks objects of its own database name (locks need no real database or table).
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AbortTxnRequest as AbortReq,
)
from hive_metastore.ttypes import (
    AllocateTableWriteIdsRequest,
    CheckLockRequest,
    CommitTxnRequest,
    DataOperationType,
    HeartbeatRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
    NoSuchLockException,
    NoSuchTxnException,
    OpenTxnRequest,
    ShowLocksRequest,
    ShowLocksResponseElement,
    TxnAbortedException,
    TxnOpenException,
    UnlockRequest,
)
from thrift.Thrift import TApplicationException

from hivemesh.metastore.txn_schema import TXN_COMPONENTS
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available
from tests.support.servers import HivemeshProcess, ThriftClient

Client = ThriftHiveMetastore.Client

SR, SW, EW, X = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE
DEADLINE_S = 120.0


# ---------------------------------------------------------------------------------------------- helpers
def comp(
    lock_type: int,
    db: str,
    table: str | None = None,
    part: str | None = None,
    op: int = DataOperationType.UNSET,
    transactional: bool = False,
    dynamic: bool = False,
) -> LockComponent:
    """A lock component whose level follows the names given (db, table, partition)."""
    level = LockLevel.PARTITION if part else LockLevel.TABLE if table else LockLevel.DB
    return LockComponent(
        type=lock_type,
        level=level,
        dbname=db,
        tablename=table,
        partitionname=part,
        operationType=op,
        isTransactional=transactional,
        isDynamicPartitionWrite=dynamic,
    )


def lock(client: Client, *components: LockComponent, txnid: int | None = None) -> LockResponse:
    """``lock`` with a request made of ``components``."""
    return client.lock(
        LockRequest(
            component=list(components), txnid=txnid, user="tester", hostname="testhost", agentInfo="t"
        )
    )


def check(client: Client, lockid: int) -> int:
    """State of ``lockid`` after ``check_lock``."""
    return client.check_lock(CheckLockRequest(lockid=lockid)).state


def unlock(client: Client, lockid: int) -> None:
    """``unlock`` of ``lockid``."""
    client.unlock(UnlockRequest(lockid=lockid))


def locks_of(client: Client, db: str, **filters: object) -> list[ShowLocksResponseElement]:
    """``show_locks`` filtered on ``db`` (and more filters), as Hive returns them."""
    return client.show_locks(ShowLocksRequest(dbname=db, **filters)).locks or []


def open_txn(client: Client) -> int:
    """The id of a newly opened txn."""
    return client.open_txns(OpenTxnRequest(num_txns=1, user="tester", hostname="testhost")).txn_ids[0]


def wait_acquired(client: Client, lockid: int, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``check_lock`` until the lock is acquired (fails after ``deadline_s``)."""
    end = time.monotonic() + deadline_s
    while check(client, lockid) != LockState.ACQUIRED:
        assert time.monotonic() < end, f"lock {lockid} still waiting after {deadline_s}s"
        time.sleep(0.005)


# ---------------------------------------------------------------------------------------------- compatibility
# (first lock, second lock, does the second wait?). Components are (type, table, partition) on one db.
TYPE_PAIRS = [
    (SR, SR, False), (SR, SW, False), (SR, EW, False), (SR, X, True),
    (SW, SR, False), (SW, SW, False), (SW, EW, True), (SW, X, True),
    (EW, SR, False), (EW, SW, True), (EW, EW, True), (EW, X, True),
    (X, SR, True), (X, SW, True), (X, EW, True), (X, X, True),
]  # fmt: skip
_NAMES = {SR: "SR", SW: "SW", EW: "EW", X: "X"}

LEVEL_CASES = [
    # id, first (type, table, part), second (type, table, part), waits
    ("db X / table SR", (X, None, None), (SR, "t", None), True),
    ("table SR / db X", (SR, "t", None), (X, None, None), True),
    ("db SR / db X", (SR, None, None), (X, None, None), True),
    ("db SR / db SR", (SR, None, None), (SR, None, None), False),
    ("db SW / table X", (SW, None, None), (X, "t", None), True),
    ("db EW / table SW", (EW, None, None), (SW, "t", None), True),
    ("table SW / db EW", (SW, "t", None), (EW, None, None), True),
    # Hive: a db-level SHARED_READ and a table/partition EXCLUSIVE do not conflict (either order)
    ("db SR / table X", (SR, None, None), (X, "t", None), False),
    ("table X / db SR", (X, "t", None), (SR, None, None), False),
    ("partition X / db SR", (X, "t", "p=1"), (SR, None, None), False),
    ("db X / partition SR", (X, None, None), (SR, "t", "p=1"), True),
    ("table X / partition SR", (X, "t", None), (SR, "t", "p=1"), True),
    ("partition SR / table X", (SR, "t", "p=1"), (X, "t", None), True),
    ("partition SW / table EW", (SW, "t", "p=1"), (EW, "t", None), True),
    ("partition X / same partition SR", (X, "t", "p=1"), (SR, "t", "p=1"), True),
    ("partition X / other partition X", (X, "t", "p=1"), (X, "t", "p=2"), False),
    ("partition EW / other partition EW", (EW, "t", "p=1"), (EW, "t", "p=2"), False),
    ("table X / other table X", (X, "t", None), (X, "u", None), False),
    ("table X / partition of other table X", (X, "t", None), (X, "u", "p=1"), False),
]


def _pair(hms: Client, db: str, first: tuple, second: tuple, waits: bool) -> None:
    """Lock ``first`` then ``second`` ((type, table, partition) on ``db``): the second waits, blocked
    by the first, exactly when ``waits``; after the first goes, the second is granted."""
    a = lock(hms, comp(first[0], db, first[1], first[2]))
    assert a.state == LockState.ACQUIRED
    b = lock(hms, comp(second[0], db, second[1], second[2]))
    assert b.state == (LockState.WAITING if waits else LockState.ACQUIRED)
    assert check(hms, b.lockid) == b.state  # re-evaluation agrees
    shown = {e.lockid: e for e in locks_of(hms, db)}
    if waits:
        assert (shown[b.lockid].blockedByExtId, shown[b.lockid].blockedByIntId) == (a.lockid, 1)
        unlock(hms, a.lockid)
        assert check(hms, b.lockid) == LockState.ACQUIRED
        unlock(hms, b.lockid)
    else:
        assert shown[b.lockid].blockedByExtId is None
        unlock(hms, b.lockid)
        unlock(hms, a.lockid)
    assert locks_of(hms, db) == []


@pytest.mark.parametrize(
    "first,second,waits", TYPE_PAIRS, ids=[f"{_NAMES[a]}-then-{_NAMES[b]}" for a, b, _ in TYPE_PAIRS]
)
@pytest.mark.parametrize("level", ["table", "partition", "db"])
def test_type_compatibility_matrix(
    hms: Client, unique_name: str, level: str, first: int, second: int, waits: bool
) -> None:
    """The 4x4 matrix of lock types, with both locks on one database, table or partition."""
    table, part = {"db": (None, None), "table": ("t", None), "partition": ("t", "k=1")}[level]
    _pair(hms, unique_name, (first, table, part), (second, table, part), waits)


@pytest.mark.parametrize("first,second,waits", [c[1:] for c in LEVEL_CASES], ids=[c[0] for c in LEVEL_CASES])
def test_level_overlap(hms: Client, unique_name: str, first: tuple, second: tuple, waits: bool) -> None:
    """Locks at different levels conflict exactly when they cover a common object."""
    _pair(hms, unique_name, first, second, waits)


def test_other_database_never_conflicts(hms: Client, unique_name: str) -> None:
    a = lock(hms, comp(X, unique_name))
    b = lock(hms, comp(X, unique_name + "_other"))
    assert (a.state, b.state) == (LockState.ACQUIRED, LockState.ACQUIRED)
    unlock(hms, a.lockid)
    unlock(hms, b.lockid)


def test_names_are_case_insensitive(hms: Client, unique_name: str) -> None:
    a = lock(hms, comp(X, unique_name, "Tbl"))
    b = lock(hms, comp(SR, unique_name.upper(), "TBL"))
    assert b.state == LockState.WAITING
    assert {(e.dbname, e.tablename) for e in locks_of(hms, unique_name)} == {(unique_name, "tbl")}
    unlock(hms, a.lockid)
    unlock(hms, b.lockid)


# ---------------------------------------------------------------------------------------------- granting
def test_request_is_all_or_nothing(hms: Client, unique_name: str) -> None:
    """A request with one blocked component waits as a whole; none of its components is acquired."""
    db = unique_name
    blocker = lock(hms, comp(X, db, "b"))
    req = lock(hms, comp(SR, db, "a"), comp(SW, db, "b"), comp(SR, db, "c", "p=1"))
    assert req.state == LockState.WAITING
    mine = [e for e in locks_of(hms, db) if e.lockid == req.lockid]
    assert [e.lockIdInternal for e in mine] == [1, 2, 3]
    assert {e.state for e in mine} == {LockState.WAITING}
    assert all(e.acquiredat is None for e in mine)
    assert [(e.blockedByExtId, e.blockedByIntId) for e in mine] == [
        (None, None),
        (blocker.lockid, 1),
        (None, None),
    ]
    # another request for table a alone is not held back by the waiting SR on a
    other = lock(hms, comp(SW, db, "a"))
    assert other.state == LockState.ACQUIRED
    unlock(hms, blocker.lockid)
    assert check(hms, req.lockid) == LockState.ACQUIRED
    mine = [e for e in locks_of(hms, db) if e.lockid == req.lockid]
    assert {e.state for e in mine} == {LockState.ACQUIRED}
    assert all(e.acquiredat and e.blockedByExtId is None for e in mine)
    for lid in (req.lockid, other.lockid):
        unlock(hms, lid)


def test_fifo_a_compatible_request_waits_behind_an_earlier_waiting_one(hms: Client, unique_name: str) -> None:
    """A (SHARED_READ) acquired, B (EXCLUSIVE) waits, C (SHARED_READ, compatible with A) waits
    behind B, so B is not starved; B then C are granted as the locks ahead of them go."""
    db = unique_name
    a = lock(hms, comp(SR, db, "t"))
    b = lock(hms, comp(X, db, "t"))
    c = lock(hms, comp(SR, db, "t"))
    d = lock(hms, comp(SR, db, "u"))  # another table: not held back
    assert [r.state for r in (a, b, c, d)] == [
        LockState.ACQUIRED, LockState.WAITING, LockState.WAITING, LockState.ACQUIRED,
    ]  # fmt: skip
    shown = {e.lockid: e for e in locks_of(hms, db)}
    assert shown[b.lockid].blockedByExtId == a.lockid
    assert shown[c.lockid].blockedByExtId == b.lockid
    for _ in range(3):  # polling changes nothing while A is held
        assert (check(hms, c.lockid), check(hms, b.lockid)) == (LockState.WAITING, LockState.WAITING)
    unlock(hms, a.lockid)
    assert check(hms, c.lockid) == LockState.WAITING  # B is still ahead of C, even though only waiting
    assert check(hms, b.lockid) == LockState.ACQUIRED
    assert check(hms, c.lockid) == LockState.WAITING
    assert {e.lockid: e for e in locks_of(hms, db)}[c.lockid].blockedByExtId == b.lockid
    late = lock(hms, comp(SR, db, "t"))
    assert late.state == LockState.WAITING
    unlock(hms, b.lockid)
    assert check(hms, late.lockid) == LockState.ACQUIRED  # readers share once the writer is gone
    assert check(hms, c.lockid) == LockState.ACQUIRED
    for lid in (c.lockid, d.lockid, late.lockid):
        unlock(hms, lid)
    assert locks_of(hms, db) == []


def test_giving_up_a_waiting_lock_unblocks_those_behind_it(hms: Client, unique_name: str) -> None:
    db = unique_name
    a = lock(hms, comp(SR, db, "t"))
    b = lock(hms, comp(X, db, "t"))
    c = lock(hms, comp(SR, db, "t"))
    assert c.state == LockState.WAITING
    unlock(hms, b.lockid)  # B gives up waiting
    assert check(hms, c.lockid) == LockState.ACQUIRED
    unlock(hms, a.lockid)
    unlock(hms, c.lockid)


def test_locks_of_one_txn_do_not_block_each_other(hms: Client, unique_name: str) -> None:
    db = unique_name
    txn = open_txn(hms)
    a = lock(hms, comp(X, db, "t"), txnid=txn)
    b = lock(hms, comp(EW, db, "t"), comp(SR, db), txnid=txn)
    assert (a.state, b.state) == (LockState.ACQUIRED, LockState.ACQUIRED)
    other = lock(hms, comp(SR, db, "t"))
    assert other.state == LockState.WAITING
    hms.commit_txn(CommitTxnRequest(txnid=txn))
    assert check(hms, other.lockid) == LockState.ACQUIRED
    unlock(hms, other.lockid)


# ---------------------------------------------------------------------------------------------- release
@pytest.mark.parametrize("end", ["commit", "abort"])
def test_txn_locks_are_released_when_the_txn_ends(hms: Client, unique_name: str, end: str) -> None:
    db = unique_name
    txn = open_txn(hms)
    held = lock(hms, comp(X, db, "t"), comp(SW, db, "u", "p=1"), txnid=txn)
    assert held.state == LockState.ACQUIRED
    shown = locks_of(hms, db, txnid=txn)
    assert [(e.lockid, e.txnid, e.lastheartbeat) for e in shown] == [(held.lockid, txn, 0)] * 2
    waiter = lock(hms, comp(SR, db, "t"))
    assert waiter.state == LockState.WAITING
    with pytest.raises(TxnOpenException, match="Unlocking locks associated with transaction not permitted"):
        unlock(hms, held.lockid)
    assert check(hms, held.lockid) == LockState.ACQUIRED
    if end == "commit":
        hms.commit_txn(CommitTxnRequest(txnid=txn))
    else:
        hms.abort_txn(AbortReq(txnid=txn))
    assert locks_of(hms, db, txnid=txn) == []
    with pytest.raises(NoSuchLockException, match=f"No such lock lockid:{held.lockid}"):
        check(hms, held.lockid)
    assert check(hms, waiter.lockid) == LockState.ACQUIRED
    unlock(hms, waiter.lockid)
    # a lock for an ended txn is refused
    exc = NoSuchTxnException if end == "commit" else TxnAbortedException
    with pytest.raises(exc):
        lock(hms, comp(SR, db, "t"), txnid=txn)
    assert locks_of(hms, db) == []


def test_a_waiting_txn_lock_may_be_given_up(hms: Client, unique_name: str) -> None:
    db = unique_name
    blocker = lock(hms, comp(X, db, "t"))
    txn = open_txn(hms)
    waiting = lock(hms, comp(SW, db, "t"), txnid=txn)
    assert waiting.state == LockState.WAITING
    unlock(hms, waiting.lockid)
    assert locks_of(hms, db, txnid=txn) == []
    unlock(hms, blocker.lockid)
    hms.abort_txn(AbortReq(txnid=txn))


def test_unlock_and_check_lock_errors(hms: Client, unique_name: str) -> None:
    with pytest.raises(NoSuchLockException, match=r"No such lock lockid:987654321\b"):
        check(hms, 987654321)
    unlock(hms, 987654321)  # unknown: a no-op, as in Hive (unlock is idempotent)
    a = lock(hms, comp(X, unique_name, "t"))
    unlock(hms, a.lockid)
    unlock(hms, a.lockid)  # a retried unlock succeeds too
    assert locks_of(hms, unique_name) == []
    with pytest.raises(NoSuchLockException):
        check(hms, a.lockid)


def test_lock_errors(hms: Client, unique_name: str) -> None:
    db = unique_name
    with pytest.raises(NoSuchTxnException):
        lock(hms, comp(SR, db, "t"), txnid=10**12)
    # lock declares no MetaException: a Java HMS answers malformed requests with an internal
    # TApplicationException as well; hivemesh's carries the reason
    with pytest.raises(TApplicationException, match="at least one component"):
        hms.lock(LockRequest(component=[], user="u", hostname="h"))
    with pytest.raises(TApplicationException, match="needs a table name"):
        hms.lock(
            LockRequest(
                component=[LockComponent(type=X, level=LockLevel.TABLE, dbname=db)], user="u", hostname="h"
            )
        )
    with pytest.raises(TApplicationException, match="needs a table and a partition name"):
        hms.lock(
            LockRequest(
                component=[LockComponent(type=X, level=LockLevel.PARTITION, dbname=db, tablename="t")],
                user="u",
                hostname="h",
            )
        )
    # a failed request leaves nothing behind
    assert locks_of(hms, db) == []
    # an aborted txn cannot lock, and a check of its (released) lock is NoSuchLock
    txn = open_txn(hms)
    held = lock(hms, comp(SR, db, "t"), txnid=txn)
    hms.abort_txn(AbortReq(txnid=txn))
    with pytest.raises(TxnAbortedException):
        lock(hms, comp(SR, db, "t"), txnid=txn)
    with pytest.raises(NoSuchLockException):
        check(hms, held.lockid)


def test_lock_ids_increase(hms: Client, unique_name: str) -> None:
    ids = [lock(hms, comp(SR, unique_name, f"t{i}")).lockid for i in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5
    for lid in ids:
        unlock(hms, lid)


# ---------------------------------------------------------------------------------------------- show_locks
def test_show_locks_fields_and_filters(hms: Client, unique_name: str) -> None:
    db = unique_name
    before = int(time.time() * 1000)
    a = lock(hms, comp(EW, db, "t", "p=1"), comp(SR, db))
    txn = open_txn(hms)
    b = lock(hms, comp(SW, db, "t", "p=1"), txnid=txn)
    c = lock(hms, comp(SR, db, "u"))
    after = int(time.time() * 1000)
    assert b.state == LockState.WAITING

    everything = hms.show_locks(ShowLocksRequest()).locks
    assert {(a.lockid, 1), (a.lockid, 2), (b.lockid, 1), (c.lockid, 1)} <= {
        (e.lockid, e.lockIdInternal) for e in everything
    }
    shown = locks_of(hms, db)
    assert [(e.lockid, e.lockIdInternal) for e in shown] == [
        (a.lockid, 1),
        (a.lockid, 2),
        (b.lockid, 1),
        (c.lockid, 1),
    ]
    e1, e2, e3, e4 = shown
    assert (e1.dbname, e1.tablename, e1.partname, e1.type, e1.state) == (
        db,
        "t",
        "p=1",
        EW,
        LockState.ACQUIRED,
    )
    assert (e2.dbname, e2.tablename, e2.partname, e2.type) == (db, None, None, SR)
    assert (e1.user, e1.hostname, e1.agentInfo, e1.txnid) == ("tester", "testhost", "t", 0)
    assert before <= e1.lastheartbeat <= after and before <= e1.acquiredat <= after
    assert (e3.state, e3.type, e3.txnid, e3.lastheartbeat, e3.acquiredat) == (
        LockState.WAITING,
        SW,
        txn,
        0,
        None,
    )
    assert (e3.blockedByExtId, e3.blockedByIntId) == (a.lockid, 1)
    assert e4.heartbeatCount == 0

    assert [e.lockid for e in locks_of(hms, db, tablename="u")] == [c.lockid]
    assert [(e.lockid, e.lockIdInternal) for e in locks_of(hms, db, tablename="t", partname="p=1")] == [
        (a.lockid, 1), (b.lockid, 1),
    ]  # fmt: skip
    assert [e.lockid for e in hms.show_locks(ShowLocksRequest(txnid=txn)).locks] == [b.lockid]
    assert locks_of(hms, db + "_none") == []

    hms.abort_txn(AbortReq(txnid=txn))
    unlock(hms, a.lockid)
    unlock(hms, c.lockid)


def test_check_lock_refreshes_the_heartbeat(hms: Client, unique_name: str) -> None:
    db = unique_name
    a = lock(hms, comp(SR, db, "t"))
    first = locks_of(hms, db)[0].lastheartbeat
    time.sleep(0.05)
    assert check(hms, a.lockid) == LockState.ACQUIRED
    second = locks_of(hms, db)[0].lastheartbeat
    assert second >= first + 40
    time.sleep(0.05)
    hms.heartbeat(HeartbeatRequest(lockid=a.lockid))
    assert locks_of(hms, db)[0].lastheartbeat >= second + 40
    unlock(hms, a.lockid)


# ---------------------------------------------------------------------------------------------- TXN_COMPONENTS
def test_lock_in_a_txn_records_its_writes(
    hms: Client, hivemesh_server: HivemeshProcess, unique_name: str
) -> None:
    """Write components (INSERT/UPDATE/DELETE of transactional objects, not dynamic-partition ones)
    of a txn's lock request become TXN_COMPONENTS rows, with the txn's write id for the table."""
    db = unique_name
    txn = open_txn(hms)
    wid = hms.allocate_table_write_ids(AllocateTableWriteIdsRequest(dbName=db, tableName="t", txnIds=[txn]))
    write_id = wid.txnToWriteIds[0].writeId
    resp = lock(
        hms,
        comp(SW, db, "t", "p=1", op=DataOperationType.INSERT, transactional=True),
        comp(SW, db, "u", op=DataOperationType.UPDATE, transactional=True),
        comp(EW, db, "v", op=DataOperationType.DELETE, transactional=True),
        comp(SR, db, "w", op=DataOperationType.SELECT, transactional=True),
        comp(SW, db, "x", op=DataOperationType.INSERT, transactional=True, dynamic=True),
        comp(SW, db, "y", op=DataOperationType.INSERT, transactional=False),
        txnid=txn,
    )
    assert resp.state == LockState.ACQUIRED
    eng = sa.create_engine(hivemesh_server.db_url)
    try:
        with eng.connect() as c:
            rows = c.execute(
                sa.select(
                    TXN_COMPONENTS.c.TC_DATABASE,
                    TXN_COMPONENTS.c.TC_TABLE,
                    TXN_COMPONENTS.c.TC_PARTITION,
                    TXN_COMPONENTS.c.TC_OPERATION_TYPE,
                    TXN_COMPONENTS.c.TC_WRITEID,
                )
                .where(TXN_COMPONENTS.c.TC_TXNID == txn)
                .order_by(TXN_COMPONENTS.c.TC_TABLE)
            ).all()
    finally:
        eng.dispose()
    assert [tuple(r) for r in rows] == [
        (db, "t", "p=1", "i", write_id),
        (db, "u", None, "u", None),
        (db, "v", None, "d", None),
    ]
    # a lock without a txn records nothing
    plain = lock(hms, comp(SW, db, "z", op=DataOperationType.INSERT, transactional=True))
    unlock(hms, plain.lockid)
    hms.abort_txn(AbortReq(txnid=txn))


# ---------------------------------------------------------------------------------------------- expiry
@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def short_timeout_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A fresh store of each backend for the short-timeout servers."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('locks-timeout') / 'metastore.db'}"
        return
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database("hivemesh_locks")
    yield url
    drop_pg_database(url)


@pytest.fixture(scope="module")
def short_timeout_server(
    short_timeout_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HivemeshProcess]:
    """A metastore with hive.txn.timeout = 2 s and no housekeeping during the tests (1 h interval):
    only lock/check_lock themselves expire locks."""
    base = tmp_path_factory.mktemp("locks-timeout-server")
    args = ["--txn-timeout", "2", "--housekeeping-interval", "3600"]
    with HivemeshProcess(short_timeout_url, base / "wh", base / "ms.log", extra_args=args) as proc:
        yield proc


def test_locks_without_heartbeat_expire(short_timeout_server: HivemeshProcess, unique_name: str) -> None:
    """Timeout 2 s: a txn-less lock that misses heartbeats is dropped (its waiter then gets the
    lock); one kept alive by check_lock or heartbeat stays; txn locks live as long as their txn."""
    db = unique_name
    with ThriftClient(short_timeout_server.host, short_timeout_server.port) as hms:
        stale = lock(hms, comp(X, db, "t"))
        waiter = lock(hms, comp(X, db, "t"))
        kept = lock(hms, comp(X, db, "k"))
        txn = open_txn(hms)
        in_txn = lock(hms, comp(X, db, "x"), txnid=txn)
        assert [r.state for r in (stale, waiter, kept, in_txn)] == [
            LockState.ACQUIRED, LockState.WAITING, LockState.ACQUIRED, LockState.ACQUIRED,
        ]  # fmt: skip
        end = time.monotonic() + 3.0
        polled = []
        while time.monotonic() < end:
            polled.append(check(hms, waiter.lockid))  # the waiter keeps itself alive by polling
            hms.heartbeat(HeartbeatRequest(lockid=kept.lockid))
            hms.heartbeat(HeartbeatRequest(txnid=txn))
            time.sleep(0.4)
        assert polled[0] == LockState.WAITING
        assert polled[-1] == LockState.ACQUIRED  # stale expired after ~2 s, so the waiter got it
        with pytest.raises(NoSuchLockException, match=f"No such lock lockid:{stale.lockid}"):
            check(hms, stale.lockid)
        assert check(hms, kept.lockid) == LockState.ACQUIRED
        assert check(hms, in_txn.lockid) == LockState.ACQUIRED
        assert sorted(e.lockid for e in locks_of(hms, db)) == sorted(
            [waiter.lockid, kept.lockid, in_txn.lockid]
        )
        hms.commit_txn(CommitTxnRequest(txnid=txn))
        unlock(hms, waiter.lockid)
        unlock(hms, kept.lockid)


def test_lock_expires_stale_locks_first(short_timeout_server: HivemeshProcess, unique_name: str) -> None:
    """``lock`` drops timed-out locks before deciding: a conflicting request after the timeout is
    granted at once; the expired lock is gone (check_lock raises NoSuchLockException)."""
    db = unique_name
    with ThriftClient(short_timeout_server.host, short_timeout_server.port) as hms:
        old = lock(hms, comp(X, db))
        assert lock(hms, comp(SR, db, "t")).state == LockState.WAITING
        time.sleep(2.5)
        fresh = lock(hms, comp(X, db, "t"))
        assert fresh.state == LockState.ACQUIRED
        assert [e.lockid for e in locks_of(hms, db)] == [fresh.lockid]  # the old waiter expired too
        with pytest.raises(NoSuchLockException):
            check(hms, old.lockid)
        unlock(hms, fresh.lockid)


def test_housekeeper_expires_locks(short_timeout_url: str, tmp_path: Path, unique_name: str) -> None:
    """With nobody calling lock/check_lock, the housekeeper removes locks past the timeout."""
    # a store of its own, of the same backend (one server process per store)
    url = (
        f"sqlite:///{tmp_path / 'hk.db'}"
        if short_timeout_url.startswith("sqlite")
        else make_pg_database("hivemesh_hk")
    )
    args = ["--txn-timeout", "1", "--housekeeping-interval", "0.3"]
    try:
        with (
            HivemeshProcess(url, tmp_path / "wh", tmp_path / "hk.log", extra_args=args) as proc,
            ThriftClient(proc.host, proc.port) as hms,
        ):
            a = lock(hms, comp(X, unique_name, "t"))
            assert [e.lockid for e in locks_of(hms, unique_name)] == [a.lockid]
            end = time.monotonic() + 15
            while locks_of(hms, unique_name):
                assert time.monotonic() < end, "lock was never expired by the housekeeper"
                time.sleep(0.2)
            with pytest.raises(NoSuchLockException):
                check(hms, a.lockid)
    finally:
        if url.startswith("postgresql"):
            drop_pg_database(url)


# ---------------------------------------------------------------------------------------------- stress
def test_concurrent_lockers_never_share_an_exclusive_lock(
    hivemesh_server: HivemeshProcess, unique_name: str
) -> None:
    """12 threads (a connection each) take EXCLUSIVE or SHARED_READ locks on one table 20 times
    each, half of them inside txns released by commit. Inside the lock each thread records itself;
    an EXCLUSIVE holder must be alone, readers may share. Every request is granted in the end."""
    db, threads, rounds = unique_name, 12, 20
    state = {"readers": 0, "writers": 0, "max_readers": 0, "grants": 0}
    guard = threading.Lock()
    violations: list[str] = []
    errors: list[str] = []

    def enter(exclusive: bool) -> None:
        with guard:
            if exclusive and (state["writers"] or state["readers"]):
                violations.append(f"writer entered beside {state}")
            if not exclusive and state["writers"]:
                violations.append(f"reader entered beside {state}")
            state["writers" if exclusive else "readers"] += 1
            state["max_readers"] = max(state["max_readers"], state["readers"])
            state["grants"] += 1

    def leave(exclusive: bool) -> None:
        with guard:
            state["writers" if exclusive else "readers"] -= 1

    def worker(n: int) -> None:
        rnd = random.Random(n)
        try:
            with ThriftClient(hivemesh_server.host, hivemesh_server.port) as hms:
                for i in range(rounds):
                    exclusive = rnd.random() < 0.5
                    txn = open_txn(hms) if (n + i) % 2 else None
                    resp = lock(hms, comp(X if exclusive else SR, db, "t"), txnid=txn)
                    if resp.state != LockState.ACQUIRED:
                        wait_acquired(hms, resp.lockid)
                    enter(exclusive)
                    time.sleep(rnd.random() * 0.004)
                    leave(exclusive)
                    if txn is None:
                        unlock(hms, resp.lockid)
                    else:
                        hms.commit_txn(CommitTxnRequest(txnid=txn))
        except Exception:
            errors.append(traceback.format_exc())

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(DEADLINE_S)
    assert not any(t.is_alive() for t in pool), "a locker hung"
    assert errors == []
    assert violations == []
    assert state["grants"] == threads * rounds
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as hms:
        assert locks_of(hms, db) == []
