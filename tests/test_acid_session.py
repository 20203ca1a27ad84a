"""``AcidSession`` / ``acid_session`` / ``read_acid`` / ``commit`` against a real metastore.

* While a session is open its read txn (READ_ONLY) and SHARED_READ lock are on the metastore
  (``show_locks``, ``get_open_txns_info``; ``get_open_txns`` leaves READ_ONLY txns out); they are gone when it ends: committed at a normal
  exit, aborted when the block raises. ``read_acid`` outside a session keeps its implicit txn open
  until ``commit(spark)``.
* One snapshot per session: a table read twice (a self-join) and a second table read later both
  ignore commits made after the session's first read; ``commit()`` then starts a new snapshot.
* A reader process killed with SIGKILL stops heartbeating; the metastore aborts its txn and drops
  its lock after ``hive.txn.timeout`` (a metastore started with a 2 s timeout), while a live
  session's heartbeats keep its txn open past that timeout.
* The seed's example: ``acid.sql`` joining a transactional table with a plain one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import (
    Database,
    LockState,
    LockType,
    NoSuchTxnException,
    TxnAbortedException,
    TxnState,
)

from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid import AGENT_INFO, AcidSession, acid_session, commit, read_acid
from tests.support.servers import HivemeshProcess, die_with_parent

COLS = [("id", "int"), ("v", "string")]
ROWS = [(1, "a"), (2, "b"), (3, "c")]


def make_table(client: MetastoreClient, db: str, name: str = "t", rows: list[tuple] = ROWS) -> AcidWriter:
    create_transactional_table(client, db, name, COLS)
    w = AcidWriter(client, db, name)
    w.insert(rows)
    return w


def txn_state(client: MetastoreClient, txn: int) -> int | None:
    """TxnState of ``txn`` in ``get_open_txns_info`` (None when not listed: committed, or an
    aborted txn the metastore already cleaned)."""
    for info in client.raw.get_open_txns_info().open_txns:
        if info.id == txn:
            return info.state
    return None


def locks_of(client: MetastoreClient, db: str) -> list[tuple]:
    return [(lk.type, lk.state, lk.tablename, lk.txnid) for lk in client.show_locks(db)]


# --- txns and locks --------------------------------------------------------------------------------


@pytest.mark.spark_postgres  # also on PostgreSQL: the Spark path through a PostgreSQL store
@pytest.mark.spark
def test_session_txn_and_lock_are_visible_while_open(spark: Any, client: MetastoreClient, db: str) -> None:
    make_table(client, db)
    full = f"{db}.t"
    with acid_session(spark) as s:
        assert s.txn_id is None and client.show_locks(db) == []  # nothing before the first read
        df = s.read(full)
        txn = s.txn_id
        assert txn is not None
        assert locks_of(client, db) == [(LockType.SHARED_READ, LockState.ACQUIRED, "t", txn)]
        assert s.snapshot(full).lock_id == client.show_locks(db)[0].lockid
        assert client.show_locks(db)[0].agentInfo == AGENT_INFO
        opened = client.get_open_txns()
        # get_open_txns leaves READ_ONLY txns out (Hive 4: they never write, so no snapshot needs
        # them); get_open_txns_info lists every txn
        assert opened.txn_high_water_mark >= txn and txn not in opened.open_txns
        (info,) = [i for i in client.raw.get_open_txns_info().open_txns if i.id == txn]
        assert (info.state, info.agentInfo) == (TxnState.OPEN, AGENT_INFO)
        assert sorted(tuple(r) for r in df.collect()) == ROWS
    assert s.txn_id is None and s.closed
    assert client.show_locks(db) == []
    assert txn_state(client, txn) is None
    assert client.valid_txn_list().is_txn_valid(txn)  # committed
    with pytest.raises(RuntimeError, match="closed"):
        s.read(full)


@pytest.mark.spark
def test_session_aborts_when_the_block_raises(spark: Any, client: MetastoreClient, db: str) -> None:
    make_table(client, db)
    full = f"{db}.t"
    with pytest.raises(ZeroDivisionError), acid_session(spark) as s:
        s.read(full)
        txn = s.txn_id
        assert locks_of(client, db) == [(LockType.SHARED_READ, LockState.ACQUIRED, "t", txn)]
        1 / 0  # noqa: B018
    assert client.show_locks(db) == []
    assert txn is not None and not client.valid_txn_list().is_txn_valid(txn)
    assert txn_state(client, txn) in (TxnState.ABORTED, None)
    with pytest.raises((TxnAbortedException, NoSuchTxnException)):
        client.commit_txn(txn)

    # the same through the class: abort() and close(commit=False)
    s2 = AcidSession(spark)
    s2.snapshot(full)
    first = s2.txn_id
    s2.abort()
    assert s2.txn_id is None and client.show_locks(db) == []
    s2.snapshot(full)  # a new txn
    second = s2.txn_id
    assert second is not None and second != first
    s2.close(commit=False)
    assert client.show_locks(db) == []
    assert not client.valid_txn_list().is_txn_valid(first)
    assert not client.valid_txn_list().is_txn_valid(second)


@pytest.mark.spark
def test_implicit_read_acid_txns_end_with_commit(spark: Any, client: MetastoreClient, db: str) -> None:
    make_table(client, db)
    full = f"{db}.t"
    commit(spark)  # end implicit sessions other tests may have left
    a = read_acid(spark, full)
    b = read_acid(spark, full)  # each call: its own implicit session and txn
    locks = client.show_locks(db)
    assert len(locks) == 2 and {lk.type for lk in locks} == {LockType.SHARED_READ}
    txns = {lk.txnid for lk in locks}
    assert len(txns) == 2 and all(txn_state(client, t) == TxnState.OPEN for t in txns)
    assert sorted(tuple(r) for r in a.collect()) == sorted(tuple(r) for r in b.collect()) == ROWS
    assert commit(spark) == 2
    assert client.show_locks(db) == []
    assert all(client.valid_txn_list().is_txn_valid(t) for t in txns)
    assert commit(spark) == 0


# --- one snapshot per session ----------------------------------------------------------------------


@pytest.mark.spark
def test_self_join_reads_one_snapshot(spark: Any, client: MetastoreClient, db: str) -> None:
    w = make_table(client, db)
    w2 = make_table(client, db, "u", [(7, "u7")])
    full = f"{db}.t"
    with acid_session(spark) as s:
        left = s.read(full)
        txn = s.txn_id
        w.insert([(4, "d")])  # committed between the two reads of t ...
        w2.insert([(8, "u8")])  # ... and before the session's first read of u
        right = s.read(full)
        assert s.txn_id == txn
        joined = left.alias("l").join(right.alias("r"), "id").select("id", "l.v", "r.v")
        assert sorted(tuple(r) for r in joined.collect()) == [(i, v, v) for i, v in ROWS]
        assert sorted(tuple(r) for r in right.collect()) == ROWS
        # a table first read now still sees the state as of the session's txn
        assert sorted(tuple(r) for r in s.read(f"{db}.u").collect()) == [(7, "u7")]

        s.commit()  # the next read opens a new txn with a fresh snapshot
        assert s.txn_id is None and client.show_locks(db) == []
        again = s.read(full)
        assert s.txn_id is not None and s.txn_id != txn
        assert sorted(tuple(r) for r in again.collect()) == [*ROWS, (4, "d")]
        assert sorted(tuple(r) for r in s.read(f"{db}.u").collect()) == [(7, "u7"), (8, "u8")]
    assert client.show_locks(db) == []


# --- heartbeats and a crashed reader ---------------------------------------------------------------

CRASHING_READER = """
import sys, time
from hivemesh.spark.acid import AcidSession
session = AcidSession(None, sys.argv[1])  # no Spark needed to open the txn and take the lock
snap = session.snapshot(sys.argv[2])
print(session.txn_id, snap.lock_id, flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def short_timeout_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    """A metastore with hive.txn.timeout = 2 s that reaps timed-out txns every second (SQLite)."""
    base = tmp_path_factory.mktemp("acid-session-timeout")
    args = ["--txn-timeout", "2", "--housekeeping-interval", "1"]
    with HivemeshProcess(f"sqlite:///{base / 'm.db'}", base / "wh", base / "m.log", extra_args=args) as proc:
        yield proc


def test_crashed_reader_is_aborted_and_live_one_kept(
    short_timeout_server: HivemeshProcess, tmp_path: Path
) -> None:
    uri = short_timeout_server.uri
    with MetastoreClient(uri) as client:
        assert client.txn_timeout_s == 2
        client.raw.create_database(Database(name="hb", locationUri=str(tmp_path / "hb"), parameters={}))
        make_table(client, "hb")

        live = AcidSession(None, uri)  # type: ignore[arg-type]  # snapshots need no Spark
        live.snapshot("hb.t")
        live_txn = live.txn_id
        assert live_txn is not None

        proc = subprocess.Popen(
            [sys.executable, "-c", CRASHING_READER, uri, "hb.t"],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            crashed_txn, crashed_lock = (int(x) for x in line.split())
            assert txn_state(client, crashed_txn) == TxnState.OPEN
            assert (LockType.SHARED_READ, LockState.ACQUIRED, "t", crashed_txn) in locks_of(client, "hb")
        finally:
            proc.kill()  # SIGKILL: no abort, no more heartbeats
            proc.wait()

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            gone = txn_state(client, crashed_txn) != TxnState.OPEN
            unlocked = all(lk.lockid != crashed_lock for lk in client.show_locks("hb"))
            if gone and unlocked:
                break
            time.sleep(0.2)
        assert txn_state(client, crashed_txn) in (TxnState.ABORTED, None)
        assert [lk for lk in client.show_locks("hb") if lk.txnid == crashed_txn] == []
        assert not client.valid_txn_list().is_txn_valid(crashed_txn)
        with pytest.raises((TxnAbortedException, NoSuchTxnException)):
            client.commit_txn(crashed_txn)

        # the live session was opened before the crashed one: it has now been open longer than the
        # timeout, kept alive by its heartbeats only
        assert live._heartbeater is not None and live._heartbeater.beats >= 2
        assert live._heartbeater.error is None
        assert txn_state(client, live_txn) == TxnState.OPEN
        assert locks_of(client, "hb") == [(LockType.SHARED_READ, LockState.ACQUIRED, "t", live_txn)]
        live.close()  # commits
        assert client.valid_txn_list().is_txn_valid(live_txn)
        assert client.show_locks("hb") == []


# --- acid.sql: a transactional table joined with a plain one ---------------------------------------


@pytest.mark.spark
def test_acid_sql_joins_acid_and_plain_tables(
    spark: Any, client: MetastoreClient, db: str, tmp_path: Path
) -> None:
    create_transactional_table(
        client, db, "emp_acid", [("emp_id", "int"), ("first_name", "string"), ("dept_id", "int")]
    )
    w = AcidWriter(client, db, "emp_acid")
    w.insert([(1, "Ann", 10), (2, "Bob", 20), (3, "Cid", 10)])
    w.insert([(4, "Dee", 30)])
    with acid_session(spark) as s:
        bob = next(r for r in s.read(f"{db}.emp_acid", with_row_ids=True).collect() if r.emp_id == 2)
    w.delete([(bob.originalTransaction, bob.bucket, bob.rowId)])
    spark.sql(
        f"CREATE EXTERNAL TABLE {db}.dept_ext (id INT, name STRING) STORED AS PARQUET "
        f"LOCATION '{(tmp_path / 'dept_ext').as_uri()}'"
    )
    spark.sql(f"INSERT INTO {db}.dept_ext VALUES (10, 'Sales'), (20, 'Engineering'), (30, 'Ops')")

    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(db)  # the example names the tables without a database
    try:
        with acid_session(spark) as acid:
            df = acid.sql(
                "select e.emp_id, e.first_name, d.name department "
                "from emp_acid e join dept_ext d on e.dept_id = d.id"
            )
            assert df.columns == ["emp_id", "first_name", "department"]
            rows = sorted(tuple(r) for r in df.collect())
            assert list(acid.snapshots) == [f"{db}.emp_acid"]  # only the transactional table
            assert locks_of(client, db) == [
                (LockType.SHARED_READ, LockState.ACQUIRED, "emp_acid", acid.txn_id)
            ]
    finally:
        spark.catalog.setCurrentDatabase(previous)
    assert rows == [(1, "Ann", "Sales"), (3, "Cid", "Sales"), (4, "Dee", "Ops")]
    assert client.show_locks(db) == []
