"""A seeded random workload on ``hivemesh metastore --workers 3`` with a kill -9 midway (issue 16).

``hivemesh metastore --workers 3`` on its own PostgreSQL database serves 32 clients, each with its
own connection: 26 run a seeded random mix of DDL (create, alter, drop tables), partition calls
(``add_partitions`` of 4-partition batches, ``drop_partition``, ``get_partition_names`` /
``get_partitions`` listings) and transactions (``open_txns``, ``allocate_table_write_ids``, a lock of
a random type, commit or abort); 4 stream rows into full-ACID tables with hivemesh's Hive Streaming
API (:mod:`hivemesh.acid.streaming`: transaction batches, heartbeats, commits and aborts); 2 page
through the notification log. Midway the worker serving the most connections is frozen (SIGSTOP)
for a second, so that calls pile up in it (a bare kill mostly finds idle connections, and it may
hold row locks of an open database transaction meanwhile), then killed with SIGKILL; the parent
restarts it and the clients reconnect and go on. A call cut by the kill has an unknown outcome:
the clients record it as "maybe" and the checks accept either outcome for it, but only one, the
one the notification log (written in the same database transaction as the change) reports, and
the final state must agree with that log. A txn the reaper aborts (its client stalled behind the
frozen worker for longer than ``--txn-timeout``) is an accepted outcome too, counted in the summary.

Checked at the end: txn ids are unique and each txn ended exactly once; per table, write ids are
unique, dense and increase in allocation order; no two conflicting locks were ever held at once
(intervals where both were certainly held: from the grant to the commit that succeeded); the
notification log is dense, each reader saw it without a gap and in the same order, event ids follow
commit order (a call that returned before another was sent has the lower id), and every call that
returned has its event and every event its call; no partition listing ever showed a torn batch or
missed a client's own committed write; the final partitions, tables and streamed rows (read with
the Spark-free ACID reader under a final snapshot) are exactly what the log says was committed;
the killed worker was replaced, every client made progress after the kill, and the server is
healthy (no open txn or lock left once the reaper ran, a fresh txn and lock work).

Clients run as 4 spawned processes of 8 threads each: processes so the clients are not serialized
by one GIL next to the checks (and so the kill sees connections from several client processes),
threads inside them because 32 spawned interpreters would cost this 2-CPU machine more start-up
time and memory than the run itself. Clocks: ``time.monotonic`` (CLOCK_MONOTONIC, one clock for
every process of the machine), so client times compare across processes.

The seed is printed and named in every failure; ``HIVEMESH_RANDOM_SEED=<n>`` repeats a run's mix
(thread scheduling still differs). Times are deadlines only, never assertions about speed.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import queue
import random
import signal
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import pytest
from hive_metastore.ttypes import (
    Database,
    DataOperationType,
    FieldSchema,
    LockState,
    LockType,
    NoSuchTxnException,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TxnAbortedException,
    TxnState,
)

from hivemesh.acid.arrow_reader import TableLayout, read_acid_location
from hivemesh.acid.streaming import StreamingConnection, StreamingError
from hivemesh.acid.tables import create_transactional_table
from hivemesh.client.metastore import TRANSPORT_ERRORS, LockTimeoutError, MetastoreClient, lock_component
from tests.conftest import pg_database
from tests.support.servers import HivemeshProcess, client_connections, worker_pids

SEED = int(os.environ.get("HIVEMESH_RANDOM_SEED") or random.SystemRandom().randrange(2**32))
PROCESSES = 4
THREADS = 8  # per process: 32 clients
STREAMER_SLOT = 0  # thread 0 of every process streams
READER_SLOT, READER_PROCESSES = 1, (0, 1)  # thread 1 of processes 0 and 1 reads the log
RUN_S = 18.0
KILL_AT_S = 6.0
FREEZE_S = 1.0  # the victim is stopped (SIGSTOP) this long before the SIGKILL: see the module doc
LOCK_TIMEOUT_S = 40.0
DEADLINE_S = 120.0  # for anything that should take seconds: a hang fails instead of blocking

DB = "r"
LOCK_TABLES = ("lk0", "lk1", "lk2", "lk3")
STREAM_TABLES = ("st0", "st1")
PART_TABLES = ("pt0", "pt1", "pt2")
BATCH = 4  # partitions per add_partitions call
STREAM_COLS = (("a", "string"), ("b", "int"))
PAGE = 500  # events per get_next_notification of a reader

OK, MAYBE, NOT_DONE = "ok", "maybe", "not done"
COMMITTED, UNCOMMITTED = "committed", "uncommitted"
LOCK_TYPES = (LockType.EXCLUSIVE, LockType.EXCL_WRITE, LockType.SHARED_WRITE, LockType.SHARED_READ)
OPERATION = {
    LockType.EXCLUSIVE: DataOperationType.NO_TXN,
    LockType.EXCL_WRITE: DataOperationType.INSERT,
    LockType.SHARED_WRITE: DataOperationType.INSERT,
    LockType.SHARED_READ: DataOperationType.SELECT,
}
CONFLICTS = {  # the matrix of hivemesh.metastore.locks (Hive 3/4)
    LockType.EXCLUSIVE: set(LOCK_TYPES),
    LockType.EXCL_WRITE: {LockType.EXCLUSIVE, LockType.EXCL_WRITE, LockType.SHARED_WRITE},
    LockType.SHARED_WRITE: {LockType.EXCLUSIVE, LockType.EXCL_WRITE},
    LockType.SHARED_READ: {LockType.EXCLUSIVE},
}
TEXT_FORMAT = (
    "org.apache.hadoop.mapred.TextInputFormat",
    "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
)


class Op(NamedTuple):
    """One call of a client. ``status``: OK (it returned: done), MAYBE (transport error: unknown),
    NOT_DONE (the metastore refused it). ``t0``: before the request went out; ``t1``: after the
    answer (``t0`` for MAYBE). ``key``/``info`` by kind: open ``(txn ids)``; alloc
    ``(table, (txn ids))`` / ``(write ids)``; commit, abort ``txn``; create, alter, drop ``table``
    (alter: ``info`` = the value it sets, also its rank among the table's alters); add
    ``(table, batch)``; dropp ``(table, batch, index)``."""

    cid: int
    kind: str
    key: Any
    status: str
    t0: float
    t1: float
    info: Any = None


class Held(NamedTuple):
    """A txn's lock, certainly held from ``granted`` (lock() returned ACQUIRED) to ``released``
    (just before the commit that then succeeded was sent)."""

    table: str
    ltype: int
    txn: int
    cid: int
    granted: float
    released: float


class Streamed(NamedTuple):
    """One streaming txn: its rows and whether it committed (COMMITTED, UNCOMMITTED, MAYBE)."""

    cid: int
    table: str
    txn: int
    write_id: int
    rows: tuple[tuple[str, int], ...]
    status: str


def now() -> float:
    return time.monotonic()


def _plain_table(name: str, partitioned: bool = False) -> Table:
    inp, out, serde = TEXT_FORMAT
    return Table(
        tableName=name,
        dbName=DB,
        owner="random",
        tableType="MANAGED_TABLE",
        parameters={},
        partitionKeys=[FieldSchema("b", "string", None), FieldSchema("i", "int", None)]
        if partitioned
        else [],
        sd=StorageDescriptor(
            cols=[FieldSchema("x", "string", None)],
            inputFormat=inp,
            outputFormat=out,
            serdeInfo=SerDeInfo(serializationLib=serde, parameters={"serialization.format": "1"}),
            bucketCols=[],
            sortCols=[],
        ),
    )


def _name_values(name: str) -> tuple[str, int]:
    """``b=c3n7/i=2`` -> ``("c3n7", 2)``."""
    b, i = (kv.split("=", 1)[1] for kv in name.split("/"))
    return b, int(i)


def _torn(listed: Iterable[tuple[str, int]]) -> list[str]:
    """Batches of a listing that no sequence of whole adds and in-order drops (index 0 first) can
    leave: each batch's indices must be a non-empty suffix of ``range(BATCH)``."""
    by_batch: dict[str, set[int]] = defaultdict(set)
    for b, i in listed:
        by_batch[b].add(i)
    return [f"{b}: {sorted(ix)}" for b, ix in by_batch.items() if ix != set(range(BATCH - len(ix), BATCH))]


# ---------------------------------------------------------------- a client (a thread of a process)
class Client:
    """One client with its own connection; records what it did for the checks of the parent."""

    def __init__(self, cid: int, role: str, uri: str, seed: int, start_event: int, stop: Any):
        self.cid, self.role = cid, role
        self.rnd = random.Random(f"{seed}/{cid}")
        self.start_event = start_event
        self.stop = stop
        self.c = MetastoreClient(uri, timeout_s=60, retries=6, retry_backoff_s=0.1)
        self.ops: list[Op] = []
        self.held: list[Held] = []
        self.streamed: list[Streamed] = []
        self.events: list[tuple[int, str, str | None, str | None]] = []  # what a reader saw
        self.problems: list[str] = []
        self.counts: Counter[str] = Counter()
        self.last_ok = 0.0  # time of the last call that returned
        self.ended = 0.0
        self.n = 0  # names: tables and batches of this client
        self.ddl_live: dict[str, int] = {}  # own tables certainly there -> alters done
        self.batches: dict[tuple[str, str], int] = {}  # own batches certainly added -> next index to drop
        self.gone: set[tuple[str, str]] = set()  # own batches certainly dropped whole

    def note(self, what: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(f"client {self.cid} ({self.role}): {what}")

    def lost(self, where: str) -> None:
        """The connection failed (the killed worker's): the next call reconnects."""
        self.counts[f"transport error in {where}"] += 1
        self.c.close()

    def done(self, op: Op) -> None:
        self.ops.append(op)
        if op.status == OK:
            self.last_ok = op.t1

    def run(self) -> None:
        hard_stop = now() + RUN_S + DEADLINE_S
        try:
            while not self.stop.is_set() and now() < hard_stop:
                if self.role == "reader":
                    self.read_step()
                elif self.role == "streamer":
                    self.stream_connection()
                else:
                    r = self.rnd.random()
                    if r < 0.15:
                        self.ddl_step()
                    elif r < 0.40:
                        self.partition_step()
                    else:
                        self.txn_step()
        except BaseException as e:  # a bug of this test or an unexpected error: report it whole
            self.note(f"crashed: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        finally:
            self.c.close()
            self.ended = now()

    # ------------------------------------------------------------ txns, write ids, locks
    def abort_quietly(self, txn: int) -> None:
        """Clean up a txn whose fate this client lost track of (a reaper would, later)."""
        try:
            self.c.abort_txn(txn)
        except TRANSPORT_ERRORS:
            self.lost("abort")
        except Exception:  # committed after all, or already gone: the log tells which
            pass

    def txn_step(self) -> None:
        rnd, c, cid = self.rnd, self.c, self.cid
        table = rnd.choice(LOCK_TABLES) if rnd.random() < 0.85 else rnd.choice(STREAM_TABLES)
        ltype = rnd.choice(LOCK_TYPES)
        t0 = now()
        try:
            txn = c.open_txn()
        except TRANSPORT_ERRORS:
            self.lost("open_txns")
            self.done(Op(cid, "open", None, MAYBE, t0, t0))
            return
        self.done(Op(cid, "open", (txn,), OK, t0, now()))
        stage, t0 = "alloc", now()
        try:
            wid = c.allocate_write_ids(DB, table, [txn])[txn]
            self.done(Op(cid, "alloc", (table, (txn,)), OK, t0, now(), (wid,)))
            stage = "lock"
            if not self.acquire(txn, table, ltype):
                self.abort_quietly(txn)
                return
            granted = now()
            time.sleep(rnd.random() * 0.01)
            stage = "commit" if rnd.random() < 0.8 else "abort"
            t0 = now()
            if stage == "commit":
                c.commit_txn(txn)
                self.held.append(Held(table, ltype, txn, cid, granted, t0))
            else:
                c.abort_txn(txn)
            self.done(Op(cid, stage, txn, OK, t0, now()))
            return
        except TRANSPORT_ERRORS:
            self.lost(stage)
            if stage != "lock":
                self.done(Op(cid, stage, txn if stage != "alloc" else (table, (txn,)), MAYBE, t0, t0))
        except (TxnAbortedException, NoSuchTxnException) as e:
            # the reaper aborted the txn (no heartbeat for --txn-timeout while the server was busy)
            self.counts["reaped"] += 1
            if stage == "commit":
                self.done(Op(cid, "commit", txn, NOT_DONE, t0, now(), str(e)))
            return
        except Exception as e:
            self.note(f"{stage} of txn {txn} on {table}: {type(e).__name__}: {e}")
        self.abort_quietly(txn)

    def acquire(self, txn: int, table: str, ltype: int) -> bool:
        """``lock`` without waiting, then ``check_lock`` until ACQUIRED, polling faster than
        :meth:`MetastoreClient.lock` does (the run is short); False when the run ends or
        LOCK_TIMEOUT_S passes first (the caller aborts the txn, which drops the waiting lock)."""
        c = self.c
        component = lock_component(DB, table, lock_type=ltype, operation=OPERATION[ltype])
        resp = c.lock([component], txn_id=txn, wait=False)
        deadline, delay = now() + LOCK_TIMEOUT_S, 0.01
        while resp.state == LockState.WAITING:
            if self.stop.is_set() or now() > deadline:
                self.counts["lock waits given up"] += 1
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
            resp = c.check_lock(resp.lockid, txn)
        if resp.state != LockState.ACQUIRED:
            self.note(f"lock of txn {txn} on {table}: state {LockState._VALUES_TO_NAMES.get(resp.state)}")
            return False
        return True

    # ------------------------------------------------------------ DDL
    def ddl_step(self) -> None:
        rnd, c, cid, live = self.rnd, self.c, self.cid, self.ddl_live
        if len(live) < 2 or rnd.random() < 0.35:
            kind, name, value = "create", f"d{cid}_{self.n}", None
            self.n += 1
        else:
            name = rnd.choice(sorted(live))
            kind, value = ("alter", live[name] + 1) if rnd.random() < 0.6 else ("drop", None)
        if kind == "alter":
            try:
                table = c.call("get_table", DB, name, idempotent=True)
            except TRANSPORT_ERRORS:
                self.lost("get_table")
                return
            table.parameters = {**(table.parameters or {}), "v": str(value)}
        t0 = now()
        try:
            if kind == "create":
                c.call("create_table", _plain_table(name))
            elif kind == "alter":
                c.call("alter_table", DB, name, table)
            else:
                c.call("drop_table", DB, name, True)
        except TRANSPORT_ERRORS:
            self.lost("ddl")
            self.done(Op(cid, kind, name, MAYBE, t0, t0, value))
            live.pop(name, None)  # its state is unknown: left alone from now on
            return
        except Exception as e:  # nobody else touches this client's tables: nothing may fail
            self.note(f"{kind} {name}: {type(e).__name__}: {e}")
            live.pop(name, None)
            return
        self.done(Op(cid, kind, name, OK, t0, now(), value))
        if kind == "drop":
            del live[name]
        else:
            live[name] = value or 0

    # ------------------------------------------------------------ partitions
    def partition_step(self) -> None:
        rnd, c, cid = self.rnd, self.c, self.cid
        table = rnd.choice(PART_TABLES)
        mine = {k: v for k, v in self.batches.items() if k[0] == table}
        r = rnd.random()
        if r < 0.35:
            batch = f"c{cid}n{self.n}"
            self.n += 1
            parts = [Partition(values=[batch, str(i)], dbName=DB, tableName=table) for i in range(BATCH)]
            t0 = now()
            try:
                added = c.call("add_partitions", parts)
            except TRANSPORT_ERRORS:
                self.lost("add_partitions")
                self.done(Op(cid, "add", (table, batch), MAYBE, t0, t0))
                return
            except Exception as e:
                self.note(f"add_partitions {table} {batch}: {type(e).__name__}: {e}")
                return
            self.done(Op(cid, "add", (table, batch), OK, t0, now()))
            if added != BATCH:
                self.note(f"add_partitions {table} {batch} returned {added}, not {BATCH}")
            self.batches[(table, batch)] = 0
        elif r < 0.75 and mine:
            key = rnd.choice(sorted(mine))
            index = mine[key]
            t0 = now()
            try:
                c.call("drop_partition", DB, table, [key[1], str(index)], False)
            except TRANSPORT_ERRORS:
                self.lost("drop_partition")
                self.done(Op(cid, "dropp", (*key, index), MAYBE, t0, t0))
                del self.batches[key]  # unknown: left alone from now on
                return
            except Exception as e:
                self.note(f"drop_partition {key} {index}: {type(e).__name__}: {e}")
                del self.batches[key]
                return
            self.done(Op(cid, "dropp", (*key, index), OK, t0, now()))
            if index + 1 == BATCH:
                del self.batches[key]
                self.gone.add(key)
            else:
                self.batches[key] = index + 1
        else:
            full = rnd.random() < 0.3
            try:
                if full:
                    listed = [
                        (p.values[0], int(p.values[1]))
                        for p in c.call("get_partitions", DB, table, -1, idempotent=True)
                    ]
                else:
                    names = c.call("get_partition_names", DB, table, -1, idempotent=True)
                    listed = [_name_values(n) for n in names]
            except TRANSPORT_ERRORS:
                self.lost("listing")
                return
            self.last_ok = now()
            self.counts["listings"] += 1
            what = "get_partitions" if full else "get_partition_names"
            torn = _torn(listed)
            if torn:
                self.note(f"{what} {table} shows torn batches: {torn[:5]}")
            seen: dict[str, set[int]] = defaultdict(set)
            for b, i in listed:
                seen[b].add(i)
            for (_, b), index in mine.items():  # read your own writes, whichever worker answers
                if seen.get(b, set()) != set(range(index, BATCH)):
                    self.note(f"{what} {table}: own batch {b} shows {sorted(seen.get(b, ()))}, not {index}..")
            for t, b in self.gone:
                if t == table and b in seen:
                    self.note(f"{what} {table}: own dropped batch {b} still shows {sorted(seen[b])}")

    # ------------------------------------------------------------ streaming
    def stream_connection(self) -> None:
        rnd = self.rnd
        table = STREAM_TABLES[self.cid % len(STREAM_TABLES)]
        shared_write = rnd.random() < 0.5
        try:
            conn = StreamingConnection(
                self.c,
                DB,
                table,
                transactions_per_batch=rnd.randint(1, 4),
                heartbeat_interval_s=1.0,
                shared_write=shared_write,
                lock_timeout_s=LOCK_TIMEOUT_S,
            )
        except TRANSPORT_ERRORS:
            self.lost("streaming connect")
            return
        ltype = LockType.SHARED_WRITE if shared_write else LockType.SHARED_READ
        try:
            for _ in range(rnd.randint(1, 4)):
                if self.stop.is_set() or not self.stream_batch(conn, table, ltype):
                    break
        finally:
            try:
                conn.close()
            except Exception as e:
                self.note(f"closing a streaming connection: {type(e).__name__}: {e}")

    def stream_batch(self, conn: StreamingConnection, table: str, ltype: int) -> bool:
        """One transaction batch; False when the connection should be replaced."""
        cid, rnd = self.cid, self.rnd
        t0 = now()
        try:
            batch = conn.fetch_transaction_batch()
        except TRANSPORT_ERRORS:  # open_txns or allocate_table_write_ids: the ids are unknown
            self.lost("fetch_transaction_batch")
            self.done(Op(cid, "open", None, MAYBE, t0, t0))
            return False
        except Exception as e:
            self.note(f"fetch_transaction_batch: {type(e).__name__}: {e}")
            return False
        t1 = now()
        txns = tuple(batch.txn_ids)
        self.done(Op(cid, "open", txns, OK, t0, t1))
        self.done(Op(cid, "alloc", (table, txns), OK, t0, t1, tuple(batch.write_ids)))
        ok = True
        try:
            while batch.remaining_transactions() > 0 and not self.stop.is_set():
                stage, rows, txn = "lock", (), None
                try:
                    txn = batch.begin_next_transaction()
                    granted = now()
                    wid = batch.current_write_id
                    assert wid is not None
                    rows = tuple((f"{cid}:{txn}:{j}", j) for j in range(rnd.randint(1, 4)))
                    stage = "write"
                    batch.write(list(rows))
                    if rnd.random() < 0.85:
                        stage, t0 = "commit", now()
                        batch.commit()
                        self.done(Op(cid, "commit", txn, OK, t0, now()))
                        self.held.append(Held(table, ltype, txn, cid, granted, t0))
                        self.streamed.append(Streamed(cid, table, txn, wid, rows, COMMITTED))
                    else:
                        stage, t0 = "abort", now()
                        batch.abort()
                        self.done(Op(cid, "abort", txn, OK, t0, now()))
                        self.streamed.append(Streamed(cid, table, txn, wid, rows, UNCOMMITTED))
                    continue
                except TRANSPORT_ERRORS:
                    self.lost("streaming txn")
                    fate = MAYBE if stage == "commit" else UNCOMMITTED
                    if stage == "commit":
                        self.done(Op(cid, "commit", txn, MAYBE, t0, t0))
                except (StreamingError, TxnAbortedException, NoSuchTxnException) as e:
                    # the heartbeat or the commit found the txns aborted by the reaper
                    self.counts["reaped"] += 1
                    fate = UNCOMMITTED
                    if stage == "commit":
                        self.done(Op(cid, "commit", txn, NOT_DONE, t0, now(), str(e)))
                except LockTimeoutError:
                    self.counts["lock timeouts"] += 1
                    fate = UNCOMMITTED
                except Exception as e:
                    self.note(f"streaming {stage} of txn {txn}: {type(e).__name__}: {e}")
                    fate = MAYBE if stage == "commit" else UNCOMMITTED
                if rows and txn is not None:
                    self.streamed.append(Streamed(cid, table, txn, batch.current_write_id or -1, rows, fate))
                ok = False
                break
        finally:
            try:
                batch.close()  # aborts the txns not committed (the reaper does if this cannot)
            except TRANSPORT_ERRORS:
                self.lost("batch close")
                ok = False
            except Exception as e:
                self.note(f"closing a transaction batch: {type(e).__name__}: {e}")
                ok = False
        return ok

    # ------------------------------------------------------------ notification readers
    def read_step(self) -> None:
        last = self.events[-1][0] if self.events else self.start_event
        try:
            events = self.c.next_notification(last, PAGE)
        except TRANSPORT_ERRORS:
            self.lost("reader")
            return
        self.last_ok = now()
        for e in events:
            if e.eventId != last + 1:
                self.note(f"after event {last} came {e.eventId}")
            self.events.append((e.eventId, e.eventType, e.dbName, e.tableName))
            last = e.eventId
        if len(events) < PAGE:
            time.sleep(0.05)

    def result(self) -> dict[str, Any]:
        return {
            "cid": self.cid,
            "role": self.role,
            "ops": self.ops,
            "held": self.held,
            "streamed": self.streamed,
            "events": self.events,
            "problems": self.problems,
            "counts": dict(self.counts),
            "last_ok": self.last_ok,
            "ended": self.ended,
        }


def _role(pno: int, slot: int) -> str:
    if slot == STREAMER_SLOT:
        return "streamer"
    if slot == READER_SLOT and pno in READER_PROCESSES:
        return "reader"
    return "mixed"


def client_process(
    pno: int, seed: int, uri: str, start_event: int, go: Any, stop: Any, ready: Any, out: str
) -> None:
    """A spawned client process: THREADS clients, connected before ``ready`` hears of them, started
    by ``go``, ended by ``stop``; what they did is pickled to ``out``."""
    clients = [
        Client(pno * THREADS + slot, _role(pno, slot), uri, seed, start_event, stop)
        for slot in range(THREADS)
    ]
    ready.put(pno)
    if not go.wait(DEADLINE_S):
        return
    threads = [threading.Thread(target=cl.run, name=f"client-{cl.cid}") for cl in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "wb") as f:
        pickle.dump([cl.result() for cl in clients], f)


# ---------------------------------------------------------------- the server
@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_database("hivemesh_workers_random") as url:
        yield url


@pytest.fixture(scope="module")
def workers(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    base = tmp_path_factory.mktemp("workers_random")
    args = ["--workers", "3", "--txn-timeout", "5", "--housekeeping-interval", "1"]
    with HivemeshProcess(pg_url, base / "wh", base / "metastore.log", extra_args=args) as proc:
        yield proc


def _wait_for(what: str, check: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = now() + timeout
    while not check():
        if now() > deadline:
            raise AssertionError(f"[seed {SEED}] timed out waiting for {what}")
        time.sleep(0.1)


# ---------------------------------------------------------------- the log as the truth
class EventLog:
    """The notification log of the run, parsed: which txns opened, committed, aborted, which write
    ids went to which txn, the DDL and partition events, and the event id of each call's event."""

    def __init__(self, events: list[Any]):
        self.events = events
        self.ids = [e.eventId for e in events]
        self.by_key: dict[tuple, int] = {}  # a call's identity (see _event_key) -> its event id
        self.opened: Counter[int] = Counter()
        self.committed: dict[int, int] = {}
        self.aborted: dict[int, int] = {}
        self.duplicates: list[str] = []
        self.write_ids: dict[str, list[tuple[int, int, int]]] = defaultdict(
            list
        )  # table -> (event, txn, wid)
        self.ddl: dict[str, list[str]] = defaultdict(list)  # table -> event types in order
        self.added: dict[tuple[str, str], list[int]] = defaultdict(list)  # (table, batch) -> indices
        self.dropped: set[tuple[str, str, int]] = set()
        self.other: Counter[str] = Counter()
        for e in events:
            self._one(e)

    def _key(self, key: tuple, eid: int) -> None:
        if key in self.by_key:
            self.duplicates.append(f"{key} in events {self.by_key[key]} and {eid}")
        self.by_key[key] = eid

    def _one(self, e: Any) -> None:
        eid, kind = e.eventId, e.eventType
        msg = json.loads(e.message) if e.message else {}
        if kind == "OPEN_TXN":
            for t in msg["txnIds"]:
                self.opened[t] += 1
            self._key(("open", msg["txnIds"][0]), eid)
        elif kind in ("COMMIT_TXN", "ABORT_TXN"):
            t = msg["txnid"]
            if t in self.committed or t in self.aborted:
                self.duplicates.append(f"txn {t}: {kind} in event {eid} after an earlier end")
            (self.committed if kind == "COMMIT_TXN" else self.aborted)[t] = eid
            if kind == "COMMIT_TXN":
                self._key(("commit", t), eid)
        elif kind == "ALLOC_WRITE_ID_EVENT":
            table = msg["tableName"]
            for t, w in zip(msg["txnIdList"], msg["writeIdList"], strict=True):
                self.write_ids[table].append((eid, t, w))
            self._key(("alloc", table, msg["txnIdList"][0]), eid)
        elif kind in ("CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE") and (e.tableName or "").startswith("d"):
            self.ddl[e.tableName].append(kind)
            n = self.ddl[e.tableName].count(kind)
            self._key((kind.split("_")[0].lower(), e.tableName, n), eid)
        elif kind in ("ADD_PARTITION", "DROP_PARTITION"):
            batches: dict[str, list[int]] = defaultdict(list)
            for kv in msg["partitions"]:
                batches[kv["b"]].append(int(kv["i"]))
            for b, ix in batches.items():
                if kind == "ADD_PARTITION":
                    if (e.tableName, b) in self.added:
                        self.duplicates.append(f"batch {e.tableName} {b} added again in event {eid}")
                    self.added[(e.tableName, b)] = sorted(ix)
                    self._key(("add", e.tableName, b), eid)
                else:
                    for i in ix:
                        self.dropped.add((e.tableName, b, i))
                        self._key(("dropp", e.tableName, b, i), eid)
        else:
            self.other[f"{kind} {e.dbName}.{e.tableName}"] += 1


def _event_key(op: Op) -> tuple | None:
    """The EventLog key of the event a call that returned must have produced."""
    if op.kind == "open":
        return ("open", op.key[0])
    if op.kind == "alloc":
        return ("alloc", op.key[0], op.key[1][0])
    if op.kind == "commit":
        return ("commit", op.key)
    if op.kind in ("create", "drop"):
        return (op.kind, op.key, 1)
    if op.kind == "alter":
        return ("alter", op.key, op.info)
    if op.kind == "add":
        return ("add", *op.key)
    if op.kind == "dropp":
        return ("dropp", *op.key)
    return None  # abort: the reaper may have aborted the txn before (then the abort is a no-op)


def _order_violations(items: list[tuple[Any, float, float, str]], what: str) -> list[str]:
    """``(order, sent, returned, label)`` of calls: a call that returned before another was sent
    must come first in ``order``. Sorted by ``order``, no earlier item may have been sent after a
    later one returned."""
    out = []
    latest: tuple[float, str] | None = None
    for order, sent, returned, label in sorted(items, key=lambda x: x[0]):
        if latest is not None and latest[0] > returned:
            out.append(f"{what}: {label} (#{order}) returned before {latest[1]} was sent, yet comes after it")
        if latest is None or sent > latest[0]:
            latest = (sent, f"{label} (#{order})")
    return out


def _overlaps(held: list[Held]) -> list[str]:
    """Conflicting locks of two txns both certainly held at one moment."""
    out = []
    by_table: dict[str, list[Held]] = defaultdict(list)
    for h in held:
        by_table[h.table].append(h)
    for table, hs in by_table.items():
        hs.sort(key=lambda h: h.granted)
        for i, a in enumerate(hs):
            for b in hs[i + 1 :]:
                if b.granted >= a.released:
                    break
                if b.ltype in CONFLICTS[a.ltype] and a.txn != b.txn:
                    out.append(
                        f"{DB}.{table}: txn {a.txn} held {LockType._VALUES_TO_NAMES[a.ltype]} and txn {b.txn} "
                        f"{LockType._VALUES_TO_NAMES[b.ltype]} at once ({b.granted - a.granted:.4f}s apart)"
                    )
    return out


class Final(NamedTuple):
    """The metastore's state after the run: per partitioned table the partitions (``(batch, index)``)
    by ``get_partition_names`` and by ``get_partitions``; the clients' tables (``d*``) and their
    parameter ``v``; per txn table the write-id high watermark; per streamed table the rows a
    final snapshot reads, with the write id that wrote each (``(a, b, write id)``)."""

    partitions: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]]
    tables: dict[str, str | None]
    high_watermarks: dict[str, int]
    visible: dict[str, list[tuple[str, int, int]]]


def invariants(results: list[dict[str, Any]], events: list[Any], start_event: int, final: Final) -> list[str]:
    """What the clients did (``results``), the notification log after ``start_event`` and the
    final state checked against each other; the broken invariants."""
    ops: list[Op] = [op for r in results for op in r["ops"]]
    # ---- the notification log: dense, and what the readers saw of it
    log = EventLog(events)
    ids = log.ids
    bad: list[str] = []
    if ids != list(range(start_event + 1, start_event + 1 + len(ids))):
        gaps = [(a, b) for a, b in zip([start_event, *ids], ids, strict=False) if b != a + 1]
        bad.append(f"the log is not dense after event {start_event}: {gaps[:5]}")
    final_view = {e.eventId: (e.eventId, e.eventType, e.dbName, e.tableName) for e in events}
    for r in results:
        if r["role"] != "reader":
            continue
        seen = r["events"]
        if [s[0] for s in seen] != ids[: len(seen)]:
            bad.append(f"reader {r['cid']} saw other ids than the final log")
        elif any(final_view[s[0]] != s for s in seen):
            bad.append(f"reader {r['cid']} saw events that later changed")
        if len(seen) < len(ids) // 2:
            bad.append(f"reader {r['cid']} saw only {len(seen)} of {len(ids)} events")
    bad += log.duplicates[:5]

    # ---- every call that returned has its event; every event a call; events in commit order
    txn_ops = [op for op in ops if op.kind in ("open", "alloc", "commit", "abort")]
    order_items = []
    for op in ops:
        key = _event_key(op) if op.status == OK else None
        if key is None:
            continue
        eid = log.by_key.get(key)
        if eid is None:
            bad.append(f"client {op.cid}: {op.kind} {op.key} returned but has no event ({key})")
        else:
            order_items.append((eid, op.t0, op.t1, f"client {op.cid} {op.kind} {op.key}"))
    bad += _order_violations(order_items, "event ids out of commit order")[:5]

    # ---- txns: unique ids, each ended once, as the clients saw it
    seen_txns = [t for op in txn_ops if op.kind == "open" and op.status == OK for t in op.key]
    dup = [t for t, n in Counter(seen_txns).items() if n > 1]
    if dup:
        bad.append(f"txn ids handed out twice: {dup[:5]}")
    if [t for t, n in log.opened.items() if n > 1]:
        bad.append(f"txn ids opened twice in the log: {[t for t, n in log.opened.items() if n > 1][:5]}")
    if set(seen_txns) - set(log.opened):
        bad.append(f"txns without OPEN_TXN event: {sorted(set(seen_txns) - set(log.opened))[:5]}")
    unended = [t for t in log.opened if t not in log.committed and t not in log.aborted]
    if unended:
        bad.append(f"txns opened but never committed nor aborted: {unended[:5]}")
    if set(log.committed) - set(log.opened) or set(log.aborted) - set(log.opened):
        bad.append("txns ended in the log without being opened in it")
    for op in txn_ops:
        if op.kind == "commit" and op.status == NOT_DONE and op.key in log.committed:
            bad.append(
                f"txn {op.key}: commit refused ({op.info}) but COMMIT_TXN in event {log.committed[op.key]}"
            )
        if op.kind == "abort" and op.status == OK and op.key in log.committed:
            bad.append(f"txn {op.key}: aborted by client {op.cid} but committed in the log")

    # ---- write ids: unique, dense, increasing in allocation order, as the clients were told
    allocated: dict[str, dict[int, int]] = {}
    for table, rows in log.write_ids.items():
        by_txn = {t: w for _, t, w in rows}
        wids = [w for _, _, w in rows]
        if len(by_txn) != len(rows):
            bad.append(f"{table}: a txn got two write ids")
        if sorted(wids) != list(range(1, len(wids) + 1)):
            bad.append(f"{table}: write ids not unique and dense: {sorted(wids)[:20]}...")
        if wids != sorted(wids):
            bad.append(f"{table}: write ids not increasing in event order")
        if final.high_watermarks.get(table, max(wids)) != max(wids):
            bad.append(
                f"{table}: high watermark {final.high_watermarks[table]} but write ids up to {max(wids)} allocated"
            )
        allocated[table] = by_txn
    wid_items: dict[str, list[tuple[Any, float, float, str]]] = defaultdict(list)
    for op in txn_ops:
        if op.kind == "alloc" and op.status == OK:
            table, txns = op.key
            got = tuple(allocated.get(table, {}).get(t) for t in txns)
            if got != op.info:
                bad.append(
                    f"client {op.cid}: {table} write ids {op.info} for txns {txns}, the log says {got}"
                )
            wid_items[table].append((op.info[0], op.t0, op.t1, f"client {op.cid} {table} txns {txns}"))
    for table, items in wid_items.items():
        bad += _order_violations(items, f"{table} write ids out of allocation order")[:3]

    # ---- locks: never two conflicting ones held at once
    held = [h for r in results for h in r["held"]]
    bad += _overlaps(held)[:5]

    # ---- DDL: the log tells each table's history; the clients' calls and the final state agree
    ddl_ops: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind in ("create", "alter", "drop"):
            ddl_ops[op.key].append(op)
    for name in sorted(set(ddl_ops) | set(log.ddl) | set(final.tables)):
        history = [op.kind.upper() + "_TABLE" for op in ddl_ops.get(name, []) if op.status == OK]
        maybe = [op.kind.upper() + "_TABLE" for op in ddl_ops.get(name, []) if op.status == MAYBE]
        logged = log.ddl.get(name, [])
        if logged not in (history, history + maybe[:1]) or len(maybe) > 1:
            bad.append(f"table {name}: calls {history} (maybe {maybe}), the log says {logged}")
        exists = bool(logged) and logged[-1] != "DROP_TABLE"
        alters = logged.count("ALTER_TABLE")
        if exists != (name in final.tables):
            bad.append(
                f"table {name}: log {logged}, but it {'is' if name in final.tables else 'is not'} there"
            )
        elif exists and final.tables[name] != (str(alters) if alters else None):
            bad.append(f"table {name}: parameter v={final.tables[name]} after {alters} alters")

    # ---- partitions: listings agree, and are what the log says was added and not dropped
    part_ops = {(op.kind, op.key): op for op in ops if op.kind in ("add", "dropp")}
    for table in PART_TABLES:
        names, parts = final.partitions[table]
        if names != parts:
            bad.append(f"{table}: get_partition_names and get_partitions differ")
        expected = sorted(
            (b, i)
            for (t, b), ix in log.added.items()
            if t == table
            for i in ix
            if (t, b, i) not in log.dropped
        )
        if names != expected:
            bad.append(f"{table}: partitions {len(names)}, the log says {len(expected)}")
        if _torn(names):
            bad.append(f"{table}: torn batches at the end: {_torn(names)[:5]}")
    for (t, b), ix in log.added.items():
        if ix != list(range(BATCH)):
            bad.append(f"{t} {b}: ADD_PARTITION event with indices {ix}")
        if ("add", (t, b)) not in part_ops:
            bad.append(f"{t} {b}: added in the log but by no call")
    for t, b, i in log.dropped:
        if ("dropp", (t, b, i)) not in part_ops:
            bad.append(f"{t} {b} {i}: dropped in the log but by no call")

    # ---- streaming: exactly the rows of committed txns are visible
    streamed = [s for r in results for s in r["streamed"]]
    for table in STREAM_TABLES:
        rows = final.visible[table]
        if len(rows) != len(set(rows)):
            bad.append(f"{table}: rows visible twice")
        want: set[tuple[str, int, int]] = set()
        for s in streamed:
            if s.table != table:
                continue
            committed = s.txn in log.committed
            if s.status == COMMITTED and not committed:
                bad.append(f"{table}: streaming txn {s.txn} committed but not in the log")
            if s.status == UNCOMMITTED and committed:
                bad.append(f"{table}: streaming txn {s.txn} not committed but COMMIT_TXN in the log")
            if committed:
                want.update((a, b, s.write_id) for a, b in s.rows)
        got = set(rows)
        if got != want:
            bad.append(
                f"{table}: {len(want - got)} committed rows missing ({sorted(want - got)[:3]}), "
                f"{len(got - want)} rows of uncommitted txns visible ({sorted(got - want)[:3]})"
            )

    return bad


# ---------------------------------------------------------------- the test
def test_random_workload_keeps_every_invariant_while_a_worker_is_killed(
    workers: HivemeshProcess, tmp_path: Path
) -> None:
    print(f"HIVEMESH_RANDOM_SEED={SEED}")
    tag = f"[seed {SEED}]"
    _wait_for("three workers", lambda: len(worker_pids(workers)) == 3)
    with MetastoreClient(workers.uri) as c:
        c.raw.create_database(Database(name=DB, locationUri=str(tmp_path / f"{DB}.db")))
        for t in LOCK_TABLES:
            create_transactional_table(c, DB, t, [("id", "int")])
        for t in STREAM_TABLES:
            create_transactional_table(c, DB, t, list(STREAM_COLS))
        for t in PART_TABLES:
            c.raw.create_table(_plain_table(t, partitioned=True))
        start_event = c.current_notification_event_id()

    ctx = mp.get_context("spawn")
    go, stop, ready = ctx.Event(), ctx.Event(), ctx.Queue()
    outs = [tmp_path / f"clients-{p}.pickle" for p in range(PROCESSES)]
    procs = [
        ctx.Process(
            target=client_process,
            args=(p, SEED, workers.uri, start_event, go, stop, ready, str(outs[p])),
            name=f"clients-{p}",
            daemon=True,
        )
        for p in range(PROCESSES)
    ]
    spawned = now()
    try:
        for p in procs:
            p.start()
        deadline = now() + DEADLINE_S
        waiting = PROCESSES
        while waiting:
            try:
                ready.get(timeout=1)
                waiting -= 1
            except queue.Empty:
                dead = [(p.name, p.exitcode) for p in procs if not p.is_alive()]
                assert not dead and now() < deadline, f"{tag} client processes did not start: {dead}"
        go.set()
        started = now()
        time.sleep(KILL_AT_S)
        before = worker_pids(workers)
        served = {pid: client_connections(pid, workers.port) for pid in before}
        victim = max(served, key=lambda pid: served[pid])
        psutil.Process(victim).send_signal(signal.SIGSTOP)  # calls pile up in it, unanswered
        time.sleep(FREEZE_S)
        psutil.Process(victim).send_signal(signal.SIGKILL)
        killed = now()
        _wait_for(
            "the killed worker to be replaced",
            lambda: len(worker_pids(workers)) == 3 and victim not in worker_pids(workers),
        )
        replaced = now()
        time.sleep(max(0.0, started + RUN_S - now()))
        stop.set()
        for p in procs:
            p.join(DEADLINE_S)
        assert not [p.name for p in procs if p.is_alive()], f"{tag} a client process hung"
        assert [p.exitcode for p in procs] == [0] * PROCESSES, (
            f"{tag} client exit codes {[p.exitcode for p in procs]}"
        )
    finally:
        stop.set()
        for p in procs:
            if p.is_alive():
                p.kill()
    results = [r for out in outs for r in pickle.loads(out.read_bytes())]
    ops = [op for r in results for op in r["ops"]]
    problems = [p for r in results for p in r["problems"]]
    assert not problems, f"{tag} during the run:\n" + "\n".join(problems[:20])

    # quiescence: txns the kill orphaned (and their locks) are reaped after --txn-timeout
    with MetastoreClient(workers.uri, timeout_s=60) as c:

        def settled() -> bool:
            info = c.call("get_open_txns_info", idempotent=True)
            return not [t for t in info.open_txns if t.state == TxnState.OPEN] and not c.show_locks()

        ended = now()
        _wait_for("the reaper to end every orphaned txn and lock", settled, timeout=60)
        quiet = now()
        events: list[Any] = []
        while True:
            page = c.next_notification(events[-1].eventId if events else start_event, 2000)
            if not page:
                break
            events += page
        final_parts = {
            t: (
                sorted(_name_values(n) for n in c.call("get_partition_names", DB, t, -1, idempotent=True)),
                sorted((p.values[0], int(p.values[1])) for p in c.call("get_partitions", DB, t, -1)),
            )
            for t in PART_TABLES
        }
        final_tables = {
            n: c.call("get_table", DB, n, idempotent=True).parameters.get("v")
            for n in c.call("get_all_tables", DB, idempotent=True)
            if n.startswith("d")
        }
        hwm = {
            full.split(".")[1]: w.high_watermark
            for full, w in c.valid_write_ids(
                [f"{DB}.{t}" for t in LOCK_TABLES + STREAM_TABLES], c.valid_txn_list()
            ).items()
        }
        snapshot = c.valid_write_ids([f"{DB}.{t}" for t in STREAM_TABLES], c.valid_txn_list())
        visible = {}
        for t in STREAM_TABLES:
            location = c.call("get_table", DB, t, idempotent=True).sd.location
            rows = read_acid_location(
                location, snapshot[f"{DB}.{t}"], TableLayout(STREAM_COLS), with_row_ids=True
            ).to_pylist()
            visible[t] = [(r["a"], r["b"], r["originalTransaction"]) for r in rows]
        final = Final(final_parts, final_tables, hwm, visible)
        bad: list[str] = []
        try:  # healthy: a txn with an EXCLUSIVE lock goes through at once
            with c.transaction(heartbeat=False) as tx:
                tx.allocate_write_id(DB, LOCK_TABLES[0])
                tx.lock([lock_component(DB, LOCK_TABLES[0], lock_type=LockType.EXCLUSIVE)], timeout_s=10)
        except Exception as e:
            bad.append(f"a txn with an EXCLUSIVE lock after the run: {type(e).__name__}: {e}")

    bad += invariants(results, events, start_event, final)

    # ---- the kill: it hit live connections, the worker came back, every client went on
    server_log = workers.log.read_text()
    if "ended (killed by SIGKILL); restarting it" not in server_log:
        bad.append("the parent did not report restarting the killed worker")
    if "Traceback" in server_log:
        bad.append("Traceback in the server log:\n" + server_log[server_log.index("Traceback") :][:3000])
    if served[victim] <= 0:
        bad.append(f"the killed worker served no connection: {served}")
    idle = [(r["cid"], r["role"]) for r in results if r["last_ok"] <= replaced]
    if idle:
        bad.append(f"clients with no call returning after the restart: {idle}")

    counts: Counter[str] = Counter()
    for r in results:
        counts.update(r["counts"])
    kinds = Counter(f"{op.kind}:{op.status}" for op in ops)
    last = max(results, key=lambda r: r["ended"])
    summary = (
        f"seed {SEED}: {len(ops)} calls {dict(sorted(kinds.items()))}, {len(events)} events, "
        f"{sum(len(r['held']) for r in results)} certain lock intervals, "
        f"{sum(len(v) for v in final.visible.values())} streamed rows visible, "
        f"{dict(counts)}, other events {dict(EventLog(events).other)}; connections per worker at the "
        f"kill {sorted(served.values())}, kill at {killed - started:.1f}s, replaced {replaced - killed:.1f}s "
        f"later; clients ready in {started - spawned:.1f}s, the last ({last['role']}) ended "
        f"{last['ended'] - started - RUN_S:.1f}s after the stop, reaper done {quiet - ended:.1f}s later, "
        f"checks {now() - quiet:.1f}s"
    )
    print(summary)
    assert not bad, f"{tag} invariants broken:\n" + "\n".join(bad[:30]) + f"\n{summary}"
    # the workload was a real one (deadlines only: these are far below what a slow machine does)
    assert kinds["commit:ok"] > 50 and kinds["add:ok"] > 5 and kinds["create:ok"] > 5, summary
    assert sum(s.status == COMMITTED for r in results for s in r["streamed"]) > 5, summary
