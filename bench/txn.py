"""Transactions, locks, write ids and the notification log: hivemesh (SQLite, PostgreSQL) against HMS 2.3.10.

Usage::

    python bench/txn.py [--quick] [--only sqlite,postgres,java] [--json out.json]

Starts each server in turn (a fresh SQLite file, a fresh PostgreSQL database, a fresh Derby-backed
HMS 2.3.10 from the PySpark wheel's jars with its transaction tables), drives it with the same Python
Thrift client (``hive_metastore`` bindings, TBinaryProtocolAccelerated, unframed), stops it, and
prints a table with the ratio to the real HMS (above 1 means hivemesh is faster). Measured:

- ``open_txns`` + ``commit_txn`` pairs per second, from 1 client and from 8 concurrent clients;
- ``lock`` + ``check_lock`` + ``unlock`` round trips per second, table locks without a txn:
  SHARED_READ and EXCLUSIVE from 1 client, SHARED_READ on one table from 8 clients;
- ``get_valid_write_ids`` for 100 tables, each with write ids from committed, aborted and one open
  txn (HMS 2.3 has no write ids: "n/a");
- ``get_next_notification`` of 10,000 events, in batches of 1,000 as a replication client reads
  them, and in one call. hivemesh logs an event per metadata change, so its log is filled with
  open/commit pairs; HMS 2.3 from the wheel has no DbNotificationListener (nothing writes its
  NOTIFICATION_LOG), so its log is filled with the same number of rows by Derby's ``ij`` (in the
  wheel's derbytools jar) before it starts, and its reads are timed on that.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support and bench.metastore

from bench import runner  # noqa: E402
from bench.metastore import LABELS, Server, _pg_available  # noqa: E402
from bench.metastore import start_server as start_hivemesh  # noqa: E402
from hive_metastore.ttypes import (  # noqa: E402
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    CheckLockRequest,
    CommitTxnRequest,
    Database,
    DataOperationType,
    FieldSchema,
    GetValidWriteIdsRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    NotificationEventRequest,
    OpenTxnRequest,
    SerDeInfo,
    StorageDescriptor,
    Table,
    UnlockRequest,
)
from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402
from tests.support.javahms import JavaHMS, java_available, pyspark_jars_dir  # noqa: E402
from tests.support.servers import ThriftClient  # noqa: E402
from thrift.Thrift import TApplicationException  # noqa: E402

SERVERS = runner.SERVERS  # hivemesh on SQLite and PostgreSQL, HMS 2.3.10 (bench/metastore.py adds Hive 4)
DB = "txnbench"
USER = "bench"
HOST = platform.node() or "localhost"
ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
)


# ---------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    """Durations, repetitions and sizes of one run."""

    seconds: float  # each throughput measurement (open/commit, locks)
    warmup: int  # operations before timing, shared by the clients (the JVM compiles its hot paths)
    clients: int  # concurrent clients
    tables: int  # tables in a get_valid_write_ids request
    write_txns: int  # txns that each allocate a write id on every table (every third one aborts)
    valid_write_ids_reps: int
    events: int  # notification log size read back
    batch: int  # maxEvents of a batched read
    fetch_reps: int  # timed reads of the whole log (after one warm-up read)
    per_call_reps: int  # rounds timed call by call, for the per-call p50 in the notes


FULL = Settings(
    seconds=5.0,
    warmup=200,
    clients=8,
    tables=100,
    write_txns=4,
    valid_write_ids_reps=100,
    events=10_000,
    batch=1_000,
    fetch_reps=3,
    per_call_reps=100,
)
QUICK = Settings(
    seconds=1.0,
    warmup=20,
    clients=8,
    tables=100,
    write_txns=3,
    valid_write_ids_reps=10,
    events=2_000,
    batch=1_000,
    fetch_reps=1,
    per_call_reps=20,
)


class NotAvailable(Exception):
    """The server does not have the calls a measurement needs (its cells print "n/a")."""


def _unknown_method(e: BaseException) -> bool:
    return isinstance(e, TApplicationException) and e.type == TApplicationException.UNKNOWN_METHOD


# ---------------------------------------------------------------------------------------------- timing
def _summary(lat: list[float], wall: float, per: str) -> dict[str, Any]:
    ms = [x * 1000 for x in lat]
    return {
        "ops": len(ms),
        f"{per}_per_s": len(ms) / wall,
        "mean_ms": statistics.fmean(ms),
        "p50_ms": statistics.median(ms),
        "seconds": wall,
    }


def run_clients(
    srv: Server,
    clients: int,
    seconds: float,
    warmup: int,
    op: Callable[[Any, int], None],
    per: str,
) -> dict[str, Any]:
    """``clients`` threads, each with its own connection, repeating ``op(client, index)``.

    Together they warm up with ``warmup`` operations (at least 5 each: a new connection is a new
    server thread, and HMS 2.3 sets up its txn handler on its first txn call), then all start
    together and run for ``seconds``; returns operations per second (key ``<per>_per_s``) and ms per
    operation (mean, p50).
    """
    warmup = max(5, warmup // clients)
    barrier = threading.Barrier(clients + 1)
    lats: list[list[float]] = []
    errors: list[BaseException] = []
    stop_at: list[float] = []

    def worker(index: int) -> None:
        lat: list[float] = []
        try:
            with ThriftClient(srv.host, srv.port) as c:
                for _ in range(warmup):
                    op(c, index)
                barrier.wait()
                end = stop_at[0]
                now = time.perf_counter()
                while now < end:
                    op(c, index)
                    t1 = time.perf_counter()
                    lat.append(t1 - now)
                    now = t1
        except threading.BrokenBarrierError:
            return
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            errors.append(e)
            barrier.abort()
            return
        lats.append(lat)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    try:
        # every client has warmed up: fix the end time, then release them all
        while barrier.n_waiting < clients and not errors:
            time.sleep(0.005)
        stop_at.append(time.perf_counter() + seconds)
        t0, cpu0 = time.perf_counter(), time.process_time()
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    wall = time.perf_counter() - t0
    out = _summary([x for lat in lats for x in lat], wall, per)
    out["clients"] = clients
    out["client_cpu_share"] = (time.process_time() - cpu0) / wall  # all client threads, one GIL
    return out


# ---------------------------------------------------------------------------------------------- operations
def open_commit(c: Any, _index: int = 0) -> None:
    """One ``open_txns`` (1 txn) and its ``commit_txn``."""
    txn = c.open_txns(OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]
    c.commit_txn(CommitTxnRequest(txnid=txn))


def lock_round(lock_type: int, table: Callable[[int], str]) -> Callable[[Any, int], None]:
    """``lock`` + ``check_lock`` + ``unlock`` of a table lock (no txn) of ``lock_type``."""
    operation = DataOperationType.SELECT if lock_type == LockType.SHARED_READ else DataOperationType.NO_TXN

    def op(c: Any, index: int) -> None:
        comp = LockComponent(
            type=lock_type, level=LockLevel.TABLE, dbname=DB, tablename=table(index), operationType=operation
        )
        lock_id = c.lock(LockRequest(component=[comp], user=USER, hostname=HOST)).lockid
        state = c.check_lock(CheckLockRequest(lockid=lock_id)).state
        assert state == LockState.ACQUIRED, (
            f"lock {lock_id} is {LockState._VALUES_TO_NAMES.get(state, state)}"
        )
        c.unlock(UnlockRequest(lockid=lock_id))

    return op


Step = tuple[str, Callable[[Any, dict[str, Any]], None]]


def open_commit_steps() -> list[Step]:
    """``open_commit`` as separately timed calls (for :func:`per_call`)."""

    def open_(c: Any, st: dict[str, Any]) -> None:
        st["txn"] = c.open_txns(OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]

    return [
        ("open_txns", open_),
        ("commit_txn", lambda c, st: c.commit_txn(CommitTxnRequest(txnid=st["txn"]))),
    ]


def lock_steps(lock_type: int, table: str) -> list[Step]:
    """A ``lock_round`` as separately timed calls (for :func:`per_call`)."""
    operation = DataOperationType.SELECT if lock_type == LockType.SHARED_READ else DataOperationType.NO_TXN
    comp = LockComponent(
        type=lock_type, level=LockLevel.TABLE, dbname=DB, tablename=table, operationType=operation
    )

    def lock(c: Any, st: dict[str, Any]) -> None:
        st["lock"] = c.lock(LockRequest(component=[comp], user=USER, hostname=HOST)).lockid

    return [
        ("lock", lock),
        ("check_lock", lambda c, st: c.check_lock(CheckLockRequest(lockid=st["lock"]))),
        ("unlock", lambda c, st: c.unlock(UnlockRequest(lockid=st["lock"]))),
    ]


def per_call(srv: Server, reps: int, steps: Sequence[Step]) -> dict[str, float]:
    """p50 ms of each call of ``steps``, run ``reps`` times in order on one connection (diagnostic)."""
    times: dict[str, list[float]] = {name: [] for name, _ in steps}
    with ThriftClient(srv.host, srv.port) as c:
        for _ in range(reps):
            state: dict[str, Any] = {}
            for name, fn in steps:
                t0 = time.perf_counter()
                fn(c, state)
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) * 1000 for name, v in times.items()}


def make_table(name: str, location: str) -> Table:
    """A small transactional ORC table (``transactional=true``); bucketed, as HMS 2.3 requires for ACID."""
    return Table(
        tableName=name,
        dbName=DB,
        owner=USER,
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", None), FieldSchema("value", "string", None)],
            location=location,
            inputFormat=ORC[1],
            outputFormat=ORC[2],
            compressed=False,
            numBuckets=2,
            serdeInfo=SerDeInfo(serializationLib=ORC[0], parameters={}),
            bucketCols=["id"],
            sortCols=[],
            parameters={},
        ),
        partitionKeys=[],
        parameters={"transactional": "true", "transactional_properties": "default"},
        tableType="MANAGED_TABLE",
    )


def valid_txn_list(c: Any) -> str:
    """The reader's txn snapshot as Hive's ValidReadTxnList string ``hwm:minOpen:open,..:aborted,..``."""
    r = c.get_open_txns()
    bits = int.from_bytes(r.abortedBits or b"", "little")  # java.util.BitSet.toByteArray
    txns = sorted(r.open_txns or [])
    aborted = [t for i, t in enumerate(txns) if bits >> i & 1]
    open_ = [t for i, t in enumerate(txns) if not bits >> i & 1]
    min_open = r.min_open_txn if r.min_open_txn is not None else 2**63 - 1
    return f"{r.txn_high_water_mark}:{min_open}:{','.join(map(str, open_))}:{','.join(map(str, aborted))}"


# ---------------------------------------------------------------------------------------------- sections
def bench_txns(srv: Server, cfg: Settings, say: Callable[[str], None]) -> dict[str, Any]:
    """open_txns + commit_txn pairs: 1 client, then ``cfg.clients`` clients."""
    say(f"open+commit pairs: 1 client, then {cfg.clients} clients, {cfg.seconds:g} s each")
    out = {
        "open_commit_1": run_clients(srv, 1, cfg.seconds, cfg.warmup, open_commit, "pairs"),
        "open_commit_n": run_clients(srv, cfg.clients, cfg.seconds, cfg.warmup, open_commit, "pairs"),
    }
    out["open_commit_1"]["per_call_p50_ms"] = per_call(srv, cfg.per_call_reps, open_commit_steps())
    return out


def bench_locks(srv: Server, cfg: Settings, say: Callable[[str], None]) -> dict[str, Any]:
    """lock/check_lock/unlock rounds: SHARED_READ and EXCLUSIVE alone, SHARED_READ from many clients."""
    say(f"lock rounds: SHARED_READ, EXCLUSIVE, SHARED_READ x {cfg.clients} clients, {cfg.seconds:g} s each")
    with ThriftClient(srv.host, srv.port) as c:
        db_loc = c.get_database(DB).locationUri.rstrip("/")
        for name in ("lk_read", "lk_excl"):
            c.create_table(make_table(name, f"{db_loc}/{name}"))
    out = {
        "lock_shared_1": run_clients(
            srv, 1, cfg.seconds, cfg.warmup, lock_round(LockType.SHARED_READ, lambda i: "lk_read"), "rounds"
        ),
        "lock_exclusive_1": run_clients(
            srv, 1, cfg.seconds, cfg.warmup, lock_round(LockType.EXCLUSIVE, lambda i: "lk_excl"), "rounds"
        ),
        "lock_shared_n": run_clients(
            srv,
            cfg.clients,
            cfg.seconds,
            cfg.warmup,
            lock_round(LockType.SHARED_READ, lambda i: "lk_read"),
            "rounds",
        ),
    }
    for key, lock_type, table in (
        ("lock_shared_1", LockType.SHARED_READ, "lk_read"),
        ("lock_exclusive_1", LockType.EXCLUSIVE, "lk_excl"),
    ):
        out[key]["per_call_p50_ms"] = per_call(srv, cfg.per_call_reps, lock_steps(lock_type, table))
    return out


def bench_write_ids(srv: Server, cfg: Settings, say: Callable[[str], None]) -> dict[str, Any]:
    """get_valid_write_ids of ``cfg.tables`` tables with committed, aborted and open write ids."""
    names = [f"wid_{i:03d}" for i in range(cfg.tables)]
    full = [f"{DB}.{n}" for n in names]
    with ThriftClient(srv.host, srv.port) as c:
        try:
            c.get_valid_write_ids(
                GetValidWriteIdsRequest(fullTableNames=[f"{DB}.lk_read"], validTxnList="0:0::")
            )
        except TApplicationException as e:
            if _unknown_method(e):
                raise NotAvailable("no get_valid_write_ids (UNKNOWN_METHOD)") from None
            raise
        t0 = time.perf_counter()
        say(f"get_valid_write_ids: {cfg.tables} tables, {cfg.write_txns} txns writing each, one open")
        db_loc = c.get_database(DB).locationUri.rstrip("/")
        for n in names:
            c.create_table(make_table(n, f"{db_loc}/{n}"))

        def write_all(txn: int) -> None:
            for n in names:
                c.allocate_table_write_ids(AllocateTableWriteIdsRequest(dbName=DB, tableName=n, txnIds=[txn]))

        try:
            for i in range(cfg.write_txns):
                txn = c.open_txns(OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]
                write_all(txn)
                if i % 3 == 1:
                    c.abort_txn(AbortTxnRequest(txnid=txn))
                else:
                    c.commit_txn(CommitTxnRequest(txnid=txn))
        except TApplicationException as e:
            if _unknown_method(e):
                raise NotAvailable(f"a write-id setup call is missing: {e.message}") from None
            raise
        open_txn = c.open_txns(OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]
        write_all(open_txn)
        setup_s = time.perf_counter() - t0
        snapshot = valid_txn_list(c)
        req = GetValidWriteIdsRequest(fullTableNames=full, validTxnList=snapshot)
        res = c.get_valid_write_ids(req)
        got = {t.fullTableName: t for t in res.tblValidWriteIds}
        assert set(got) == set(full), f"get_valid_write_ids answered for {sorted(got)[:3]}..."
        sample = got[full[0]]
        expect_hwm = cfg.write_txns + 1
        assert sample.writeIdHighWaterMark == expect_hwm, sample
        assert len(sample.invalidWriteIds) == 1 + len(range(1, cfg.write_txns, 3)), sample  # open + aborted
        lat: list[float] = []
        for _ in range(max(3, cfg.valid_write_ids_reps // 5)):  # warm-up
            c.get_valid_write_ids(req)
        w0 = time.perf_counter()
        for _ in range(cfg.valid_write_ids_reps):
            t1 = time.perf_counter()
            c.get_valid_write_ids(req)
            lat.append(time.perf_counter() - t1)
        out = _summary(lat, time.perf_counter() - w0, "calls")
        c.abort_txn(AbortTxnRequest(txnid=open_txn))
    out["setup_s"] = setup_s
    out["tables"] = cfg.tables
    out["snapshot"] = snapshot
    out["sample"] = {
        "table": sample.fullTableName,
        "writeIdHighWaterMark": sample.writeIdHighWaterMark,
        "invalidWriteIds": list(sample.invalidWriteIds),
        "minOpenWriteId": sample.minOpenWriteId,
    }
    return out


def fill_events(srv: Server, cfg: Settings, say: Callable[[str], None]) -> float:
    """Open/commit pairs from ``cfg.clients`` clients until the log holds ``cfg.events`` events."""
    with ThriftClient(srv.host, srv.port) as c:
        have = c.get_current_notificationEventId().eventId
    if have >= cfg.events:
        return 0.0
    say(f"filling the notification log: {have:,} -> {cfg.events:,} events (open+commit pairs)")
    pairs = (cfg.events - have + 1) // 2
    lock = threading.Lock()
    left = [pairs]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with ThriftClient(srv.host, srv.port) as c:
                while True:
                    with lock:
                        if left[0] <= 0:
                            return
                        left[0] -= 1
                    open_commit(c)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(cfg.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def bench_notifications(srv: Server, cfg: Settings, say: Callable[[str], None]) -> dict[str, Any]:
    """Read the first ``cfg.events`` events back: in batches of ``cfg.batch``, and in one call."""
    fill_s = fill_events(srv, cfg, say) if srv.name != "java" else None
    n = cfg.events
    say(f"get_next_notification: {n:,} events in batches of {cfg.batch:,}, and in one call")
    with ThriftClient(srv.host, srv.port, timeout_ms=600_000) as c:

        def batched() -> list[Any]:
            got: list[Any] = []
            last = 0
            while len(got) < n:
                req = NotificationEventRequest(lastEvent=last, maxEvents=min(cfg.batch, n - len(got)))
                events = c.get_next_notification(req).events or []
                if not events:
                    break
                got.extend(events)
                last = events[-1].eventId
            return got

        def one_call() -> list[Any]:
            return c.get_next_notification(NotificationEventRequest(lastEvent=0, maxEvents=n)).events or []

        def check(events: list[Any]) -> None:
            ids = [e.eventId for e in events]
            assert len(ids) == n, f"read {len(ids)} events, expected {n}"
            assert ids == sorted(ids) and len(set(ids)) == n, "event ids out of order or repeated"

        check(batched())  # warm-up
        check(one_call())
        out: dict[str, Any] = {"events": n, "batch": cfg.batch, "fill_s": fill_s}
        for key, fn in (("batched", batched), ("one_call", one_call)):
            samples = []
            for _ in range(cfg.fetch_reps):
                t0 = time.perf_counter()
                events = fn()
                samples.append(time.perf_counter() - t0)
                check(events)
            ms = [s * 1000 for s in samples]
            out[key] = {"mean_ms": statistics.fmean(ms), "min_ms": min(ms), "n": len(ms)}
        out["events_per_s_batched"] = n / (out["batched"]["mean_ms"] / 1000)
        out["message_bytes_mean"] = statistics.fmean(len(e.message or "") for e in events)
        out["event_types"] = sorted({e.eventType for e in events})
    return out


# ---------------------------------------------------------------------------------------------- servers
_DERBY_NOTIFICATION_DDL = """\
CREATE TABLE NOTIFICATION_LOG (NL_ID BIGINT NOT NULL, DB_NAME VARCHAR(128), EVENT_ID BIGINT NOT NULL,
  EVENT_TIME INTEGER NOT NULL, EVENT_TYPE VARCHAR(32) NOT NULL, MESSAGE LONG VARCHAR,
  MESSAGE_FORMAT VARCHAR(16), TBL_NAME VARCHAR(256), CONSTRAINT NOTIFICATION_LOG_PK PRIMARY KEY (NL_ID));
CREATE TABLE NOTIFICATION_SEQUENCE (NNI_ID BIGINT NOT NULL, NEXT_EVENT_ID BIGINT NOT NULL,
  CONSTRAINT NOTIFICATION_SEQUENCE_PK PRIMARY KEY (NNI_ID));
"""


def _event_row(event_id: int, now: int) -> str:
    """One NOTIFICATION_LOG row: alternately OPEN_TXN and COMMIT_TXN of txn ``(event_id + 1) // 2``."""
    txn = (event_id + 1) // 2
    if event_id % 2:
        kind = "OPEN_TXN"
        body = f'"txnIds":[{txn}],"timestamp":{now},"fromTxnId":{txn},"toTxnId":{txn}'
    else:
        kind = "COMMIT_TXN"
        nulls = ("writeIds", "databases", "tables", "partitions", "tableObjs", "partitionObjs", "files")
        body = f'"txnid":{txn},"timestamp":{now},' + ",".join(f'"{k}":null' for k in nulls)
    msg = "{" + body + ',"server":"","servicePrincipal":""}'
    return f"({event_id}, NULL, {event_id}, {now}, '{kind}', '{msg}', 'json-0.2', NULL)"


def prefill_derby_notifications(db_dir: Path, events: int) -> float:
    """Create the Derby database ``db_dir`` with a NOTIFICATION_LOG of ``events`` rows; returns seconds.

    The tables have the columns, types and primary key that DataNucleus gives them when HMS 2.3
    creates them itself (``datanucleus.schema.autoCreateAll``), so the metastore started on this
    database afterwards uses them as they are and creates the rest of its schema around them.
    Runs Derby's ``ij`` from the PySpark wheel's derbytools jar.
    """
    t0 = time.perf_counter()
    now = int(time.time())
    lines = [f"connect 'jdbc:derby:{db_dir};create=true';", _DERBY_NOTIFICATION_DDL]
    for start in range(1, events + 1, 200):
        rows = ",\n".join(_event_row(i, now) for i in range(start, min(start + 200, events + 1)))
        lines.append(f"INSERT INTO NOTIFICATION_LOG VALUES\n{rows};")
    lines.append(f"INSERT INTO NOTIFICATION_SEQUENCE VALUES (1, {events + 1});")
    lines.append("SELECT COUNT(*) FROM NOTIFICATION_LOG;")
    lines.append("disconnect;")
    script = db_dir.parent / "prefill_notifications.sql"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    jars = pyspark_jars_dir()
    cp = os.pathsep.join(
        str(j) for pat in ("derby-*.jar", "derbyshared-*.jar", "derbytools-*.jar") for j in jars.glob(pat)
    )
    proc = subprocess.run(
        [shutil.which("java") or "java", f"-Dderby.stream.error.file={db_dir.parent / 'derby-ij.log'}", "-cp", cp,
         "org.apache.derby.tools.ij", str(script)],
        cwd=db_dir.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0 or "ERROR" in proc.stdout or f"\n{events}" not in proc.stdout.replace(" ", ""):
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise RuntimeError(f"ij could not fill the Derby notification log (exit {proc.returncode}):\n{tail}")
    return time.perf_counter() - t0


@contextmanager
def start_server(name: str, workdir: Path, java_opts: Sequence[str], events: int) -> Iterator[Server]:
    """One of the three servers on a fresh store; the Java HMS with txn tables and a filled log."""
    if name != "java":
        with start_hivemesh(name, workdir, java_opts) as srv:
            yield srv
        return
    base = workdir / "java"
    base.mkdir(parents=True, exist_ok=True)
    fill_s = prefill_derby_notifications(base / "metastore_db", events)
    hms = JavaHMS(base_dir=base, log_level="WARN", java_opts=java_opts, txn=True)
    try:
        hms.start(timeout=300)
        assert hms.pid is not None
        note = f"{events:,} events written by ij in {fill_s:.1f} s; started in {hms.startup_seconds:.1f} s"
        yield Server(name, hms.host, hms.port, hms.pid, note=note)
    except BaseException:
        hms.kill()
        raise
    finally:
        hms.stop()


SECTIONS: list[tuple[str, Callable[[Server, Settings, Callable[[str], None]], dict[str, Any]]]] = [
    ("txns", bench_txns),
    ("locks", bench_locks),
    ("write_ids", bench_write_ids),
    ("notifications", bench_notifications),
]


def bench_server(
    name: str, cfg: Settings, workdir: Path, java_opts: Sequence[str], console: Console
) -> dict[str, Any]:
    """All sections on one server; a section that fails or is not available is recorded, not fatal."""
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"  [dim]{LABELS[name]}: {msg}[/dim]")

    res: dict[str, Any] = {}
    with start_server(name, workdir, java_opts, cfg.events) as srv:
        if srv.note:
            say(srv.note)
        with ThriftClient(srv.host, srv.port) as c:
            c.create_database(Database(name=DB, description="hivemesh txn benchmark", parameters={}))
        for key, fn in SECTIONS:
            try:
                res[key] = fn(srv, cfg, say)
            except NotAvailable as e:
                res[key] = {"na": str(e)}
                say(f"{key}: n/a ({e})")
            except Exception as e:
                if _unknown_method(e):
                    res[key] = {"na": f"not implemented: {e}"}
                    say(f"{key}: n/a (not implemented: {e})")
                    continue
                res[key] = {"error": f"{type(e).__name__}: {e}"}
                console.print(f"[red]{LABELS[name]}: {key} failed:[/red]")
                console.print(traceback.format_exc(), markup=False)
    res["wall_s"] = time.perf_counter() - t_start
    say(f"done in {res['wall_s']:.0f} s")
    return res


# ---------------------------------------------------------------------------------------------- report
def _num(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ratio(r: float) -> str:
    return f"{r:.1f}x" if r < 100 else f"{r:.0f}x"


@dataclass(frozen=True)
class Row:
    """A table row: ``section``/``key`` select the result; ``value`` is the figure the ratio uses."""

    label: str
    unit: str
    section: str
    key: str | None
    value: Callable[[dict[str, Any]], float]
    text: Callable[[dict[str, Any]], str]
    higher_is_better: bool


def rows(cfg: Settings) -> list[Row]:
    """The rows of the report table."""
    n = cfg.clients

    def rate(field: str) -> tuple[Callable[[dict[str, Any]], float], Callable[[dict[str, Any]], str]]:
        return (lambda r: r[field]), (lambda r: _num(r[field]))

    def lat() -> tuple[Callable[[dict[str, Any]], float], Callable[[dict[str, Any]], str]]:
        return (lambda r: r["mean_ms"]), (lambda r: f"{_num(r['mean_ms'])} / {_num(r['p50_ms'])}")

    out: list[Row] = []
    for label, section, key, per in [
        ("open_txns + commit_txn, 1 client", "txns", "open_commit_1", "pairs"),
        (f"open_txns + commit_txn, {n} clients", "txns", "open_commit_n", "pairs"),
        ("lock + check_lock + unlock, SHARED_READ, 1 client", "locks", "lock_shared_1", "rounds"),
        ("lock + check_lock + unlock, EXCLUSIVE, 1 client", "locks", "lock_exclusive_1", "rounds"),
        (
            f"lock + check_lock + unlock, SHARED_READ, {n} clients, 1 table",
            "locks",
            "lock_shared_n",
            "rounds",
        ),
    ]:
        out.append(Row(label, f"{per}/s", section, key, *rate(f"{per}_per_s"), True))
        out.append(Row("", f"ms per {per[:-1]}, mean / p50", section, key, *lat(), False))
    wid = f"get_valid_write_ids, {cfg.tables} tables"
    out.append(Row(wid, "calls/s", "write_ids", None, *rate("calls_per_s"), True))
    out.append(Row("", "ms per call, mean / p50", "write_ids", None, *lat(), False))
    ev = f"get_next_notification, {cfg.events:,} events"
    out.append(
        Row(
            ev,
            f"ms in batches of {cfg.batch:,}",
            "notifications",
            "batched",
            lambda r: r["mean_ms"],
            lambda r: _num(r["mean_ms"]),
            False,
        )
    )
    out.append(
        Row(
            "",
            "ms in one call",
            "notifications",
            "one_call",
            lambda r: r["mean_ms"],
            lambda r: _num(r["mean_ms"]),
            False,
        )
    )
    return out


def render(results: dict[str, Any], skipped: dict[str, str], cfg: Settings, console: Console) -> None:
    """Print the comparison table."""

    def part(server: str, row: Row) -> dict[str, Any] | str:
        """The result dict of ``row`` on ``server``, or the text of its cell when there is none."""
        if server in skipped:
            return "[dim]skipped[/dim]"
        r = results.get(server)
        if r is None or "error" in r:
            return "[red]failed[/red]"
        sec = r.get(row.section)
        if sec is None:
            return "-"
        if "na" in sec:
            return "n/a"
        if "error" in sec:
            return "[red]failed[/red]"
        return sec[row.key] if row.key else sec

    t = RichTable(
        title="Transactions, locks, write ids, notifications (ratio = hivemesh vs HMS 2.3.10; >1 = hivemesh faster)",
        title_justify="left",
    )
    t.add_column("operation")
    t.add_column("unit")
    for s in SERVERS:
        t.add_column(LABELS[s], justify="right")
    t.add_column("ratio sqlite", justify="right")
    t.add_column("ratio postgres", justify="right")
    for row in rows(cfg):
        cells = []
        for s in SERVERS:
            p = part(s, row)
            cells.append(p if isinstance(p, str) else row.text(p))
        ratios = []
        java = part("java", row)
        for s in ("sqlite", "postgres"):
            mine = part(s, row)
            if isinstance(java, dict) and isinstance(mine, dict):
                a, b = row.value(java), row.value(mine)
                ratios.append(_ratio(b / a if row.higher_is_better else a / b) if a and b else "-")
            else:
                ratios.append("-")
        t.add_row(
            row.label, row.unit, *cells, *ratios, end_section=row.unit.startswith(("ms in one", "ms per"))
        )
    console.print(t)


# ---------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the selected servers one after the other, print and save the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runner.add_common_options(ap, "a smoke run (well under a minute for all three)")
    args = ap.parse_args(argv)
    skipped = runner.skipped_servers(ap, args.only, _pg_available, java_available)
    cfg = QUICK if args.quick else FULL
    console = runner.wide_console()
    load = runner.print_banner(console, "hivemesh transaction benchmark", args.quick, skipped, LABELS)
    t0 = time.perf_counter()
    results, failed = runner.run_servers(
        console,
        skipped,
        LABELS,
        "hivemesh-txnbench-",
        args.keep,
        lambda s, workdir: bench_server(s, cfg, workdir, args.java_opts.split(), console),
    )

    console.print()
    render(results, skipped, cfg, console)
    for s in SERVERS:
        r = results.get(s, {})
        for key, _ in SECTIONS:
            sec = r.get(key) or {}
            if "na" in sec:
                console.print(f"note: {LABELS[s]}: {key} n/a: {sec['na']}.")
        notif = r.get("notifications") or {}
        if "message_bytes_mean" in notif:
            how = (
                "written by Derby's ij before start"
                if notif.get("fill_s") is None
                else f"topped up with open/commit pairs in {notif['fill_s']:.1f} s"
                if notif["fill_s"]
                else "all from the sections before (no top-up needed)"
            )
            console.print(
                f"note: {LABELS[s]} log: {', '.join(notif['event_types'])}, {notif['message_bytes_mean']:.0f} bytes "
                f"per message on average, {how}."
            )
        wid = r.get("write_ids") or {}
        if "setup_s" in wid:
            console.print(
                f"note: {LABELS[s]} write-id setup ({wid['tables']} tables, {cfg.write_txns + 1} txns) took "
                f"{wid['setup_s']:.1f} s; snapshot {wid['snapshot']}, {wid['sample']['table']}: "
                f"hwm {wid['sample']['writeIdHighWaterMark']}, invalid {wid['sample']['invalidWriteIds']}."
            )
        txns, locks = r.get("txns") or {}, r.get("locks") or {}
        calls = [
            (what, sec[key]["per_call_p50_ms"])
            for what, sec, key in (
                ("open/commit", txns, "open_commit_1"),
                ("SHARED_READ", locks, "lock_shared_1"),
                ("EXCLUSIVE", locks, "lock_exclusive_1"),
            )
            if "per_call_p50_ms" in sec.get(key, {})
        ]
        if calls:
            console.print(
                f"note: {LABELS[s]} p50 ms per call, 1 client: "
                + "; ".join(
                    f"{what}: " + ", ".join(f"{k} {_num(v)}" for k, v in d.items()) for what, d in calls
                )
                + "."
            )
        for key in ("open_commit_n", "lock_shared_n"):
            share = ((r.get("txns") or {}) | (r.get("locks") or {})).get(key, {}).get("client_cpu_share")
            if share is not None and share > 0.6:
                console.print(
                    f"[yellow]note: {LABELS[s]} {key}: the {cfg.clients} client threads used {share:.0%} of one "
                    "CPU, the client may be the limit[/yellow]"
                )
    if "java" in results and "error" not in results["java"]:
        console.print(
            "note: HMS 2.3.10 ran on embedded Derby (the wheel has no PostgreSQL JDBC driver) with "
            "hive.in.test=true, so that its TxnHandler creates the txn tables; JVM options: "
            f"{args.java_opts or 'none'}."
        )
    end_load = runner.print_total(console, t0)
    if args.json_out:
        doc = {
            "quick": args.quick,
            "settings": cfg.__dict__,
            "cpus": os.cpu_count(),
            "load_average_start": load,
            "load_average_end": end_load,
            "skipped": skipped,
            "servers": results,
        }
        args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
