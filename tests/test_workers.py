"""Several metastore processes on one PostgreSQL database behave as one metastore (issue 16).

``hivemesh metastore --workers 3`` (a real subprocess: a parent and three forked workers on one
port) serves 16 client threads that open txns, allocate write ids, take EXCLUSIVE locks, commit,
create and drop tables, while a reader pages through the notification log; midway one worker is
killed with SIGKILL and the parent restarts it. Checked: every txn id is unique, no two txns got
the same write id of a table, EXCLUSIVE locks on a table were never held by two txns at once,
notification event ids are dense and never appear out of order, the worker came back, and one
housekeeping pass runs at a time across processes.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hive_metastore.ttypes import Database, LockType

from hivemesh.acid.tables import create_transactional_table
from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient, lock_component
from hivemesh.metastore.housekeeper import HOUSEKEEPING_LOCK
from hivemesh.metastore.store import Store
from tests.conftest import pg_database
from tests.support.servers import HivemeshProcess, client_connections, worker_pids

CLIENTS = 16
TABLES = [f"t{i}" for i in range(4)]
RUN_S = 12.0
KILL_AT_S = 4.0


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with pg_database("hivemesh_workers") as url:
        yield url


@pytest.fixture(scope="module")
def workers(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    base = tmp_path_factory.mktemp("workers")
    args = ["--workers", "3", "--txn-timeout", "5", "--housekeeping-interval", "1"]
    with HivemeshProcess(pg_url, base / "wh", base / "metastore.log", extra_args=args) as proc:
        yield proc


def _wait_for(what: str, check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_workers_keep_every_invariant_while_one_is_killed(workers: HivemeshProcess, tmp_path: Path) -> None:
    _wait_for("three workers", lambda: len(worker_pids(workers)) == 3)
    with MetastoreClient(workers.uri) as c:
        c.raw.create_database(Database(name="w", locationUri=str(tmp_path / "w.db")))
        for t in TABLES:
            create_transactional_table(c, "w", t, [("id", "int")])
    start_event = MetastoreClient(workers.uri).current_notification_event_id()

    lock = threading.Lock()
    txn_ids: list[int] = []
    write_ids: dict[str, dict[int, int]] = defaultdict(dict)  # table -> write id -> txn
    duplicate_write_ids: list[str] = []
    held: dict[str, list[tuple[float, float, int]]] = defaultdict(list)  # table -> (granted, released, txn)
    transport_errors = [0]
    other_errors: list[str] = []
    event_problems: list[str] = []
    stop = threading.Event()

    def client(n: int) -> None:
        rnd = random.Random(n)
        c = MetastoreClient(workers.uri, timeout_s=30, retries=3, retry_backoff_s=0.1)
        i = 0
        while not stop.is_set():
            i += 1
            try:
                if rnd.random() < 0.1:  # DDL: events from another kind of call
                    name = f"tmp_{n}_{i}"
                    create_transactional_table(c, "w", name, [("x", "string")])
                    c.raw.drop_table("w", name, True)
                    continue
                table = rnd.choice(TABLES)
                txn = c.open_txn()
                with lock:
                    txn_ids.append(txn)
                wid = c.allocate_write_ids("w", table, [txn])[txn]
                with lock:
                    other = write_ids[table].setdefault(wid, txn)
                    if other != txn:
                        duplicate_write_ids.append(f"w.{table} write id {wid}: txns {other} and {txn}")
                c.lock([lock_component("w", table, lock_type=LockType.EXCLUSIVE)], txn_id=txn, timeout_s=60)
                granted = time.monotonic()
                time.sleep(rnd.random() * 0.005)
                released = time.monotonic()  # the lock is held at least until commit is sent
                with lock:
                    held[table].append((granted, released, txn))
                c.commit_txn(txn)
            except TRANSPORT_ERRORS:
                transport_errors[0] += 1  # the killed worker's connections; the client reconnects
                c.close()
            except Exception as e:  # an HMS exception: only a txn aborted by the reaper is expected
                if "aborted" not in str(e).lower() and "does not exist" not in str(e).lower():
                    other_errors.append(f"{type(e).__name__}: {e}")
                c.close()
        c.close()

    def reader() -> None:
        c = MetastoreClient(workers.uri, timeout_s=30, retries=5, retry_backoff_s=0.1)
        last = start_event
        while not stop.is_set():
            try:
                events = c.next_notification(last, 1000)
            except TRANSPORT_ERRORS:
                c.close()
                continue
            for e in events:
                if e.eventId != last + 1:
                    event_problems.append(f"after event {last} came {e.eventId}")
                last = e.eventId
            time.sleep(0.02)
        c.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    time.sleep(KILL_AT_S)
    before = worker_pids(workers)
    served = {pid: client_connections(pid, workers.port) for pid in before}
    victim = max(served, key=lambda pid: served[pid])  # the worker serving the most clients
    txns_at_kill = len(txn_ids)
    psutil.Process(victim).send_signal(signal.SIGKILL)
    _wait_for(
        "the killed worker to be replaced",
        lambda: len(worker_pids(workers)) == 3 and victim not in worker_pids(workers),
    )
    time.sleep(max(0.0, RUN_S - KILL_AT_S))
    stop.set()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a client is stuck"

    assert not other_errors, other_errors[:5]
    assert len(txn_ids) == len(set(txn_ids)), "a txn id was handed out twice"
    assert len(txn_ids) > 50, f"only {len(txn_ids)} txns in {RUN_S}s"
    assert not duplicate_write_ids, duplicate_write_ids[:5]
    for table, intervals in held.items():
        intervals.sort()
        for (_, r1, t1), (g2, _, t2) in zip(intervals, intervals[1:], strict=False):
            assert g2 >= r1, f"w.{table}: txns {t1} and {t2} held EXCLUSIVE locks at once"
    assert not event_problems, event_problems[:5]
    with MetastoreClient(workers.uri) as c:  # the whole log since the start: dense
        ids = [e.eventId for e in c.next_notification(start_event, 1_000_000)]
    assert ids == list(range(start_event + 1, start_event + 1 + len(ids))) and len(ids) > 50
    log = workers.log.read_text()
    assert "ended (killed by SIGKILL); restarting it" in log, log[-2000:]
    assert "Traceback" not in log, log[-3000:]
    # the kill hit live client connections, and every client went on (a client finding its
    # connection dead before a call reconnects without losing the call)
    assert served[victim] > 0, served
    assert len(txn_ids) - txns_at_kill > 20, (txns_at_kill, len(txn_ids))
    print(
        f"{len(txn_ids)} txns, {len(ids)} events, connections per worker {sorted(served.values())}, "
        f"{transport_errors[0]} transport errors around the kill"
    )


def test_one_housekeeping_pass_at_a_time() -> None:
    """The advisory lock housekeeping takes: a second process on the store skips its turn. On a
    database of its own: the module's metastore housekeeps ``pg_url`` every second and may hold
    the lock at any moment."""
    with pg_database("hivemesh_housekeeping_lock") as url:
        a, b = Store(url), Store(url)
        try:
            with a.exclusive(HOUSEKEEPING_LOCK) as mine:
                assert mine
                with b.exclusive(HOUSEKEEPING_LOCK) as theirs:
                    assert not theirs
            with b.exclusive(HOUSEKEEPING_LOCK) as theirs:
                assert theirs  # released at the end of a's pass
        finally:
            a.dispose()
            b.dispose()


def test_sigterm_stops_every_worker(pg_url: str, tmp_path: Path) -> None:
    """SIGTERM to one worker stops it alone (restarted; its siblings keep accepting on the shared
    socket); SIGTERM to the parent stops all, quietly (no ``accept failed`` lines)."""
    proc = HivemeshProcess(
        pg_url, tmp_path / "wh", tmp_path / "ms.log", extra_args=["--workers", "2"]
    ).start()
    assert proc.proc is not None
    _wait_for("two workers", lambda: len(worker_pids(proc)) == 2)
    first = worker_pids(proc)
    os.kill(first[0], signal.SIGTERM)
    _wait_for("the worker's restart", lambda: len(set(worker_pids(proc)) - set(first)) == 1)
    kids = [psutil.Process(p) for p in worker_pids(proc)]
    for _ in range(6):  # each connection goes to one worker or the other
        with MetastoreClient(proc.uri, retries=0) as c:
            assert "default" in c.raw.get_all_databases()
    assert proc.stop() == 0
    gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive
    log = proc.log.read_text()
    assert "accept failed" not in log and "Traceback" not in log, log[-3000:]


def test_pools_larger_than_max_connections_are_warned_about(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 workers x (250 + 4) connections exceed the test server's max_connections (400 for the
    private cluster the tests start)."""
    monkeypatch.setenv("HIVEMESH_METASTORE_DB_POOL_SIZE", "250")
    log = tmp_path / "metastore.log"
    with HivemeshProcess(pg_url, tmp_path / "wh", log, extra_args=["--workers", "2", "--log-level", "INFO"]):
        pass
    text = log.read_text(encoding="utf-8")
    assert "2 workers x (db_pool_size 250 + 4) = 508 PostgreSQL connections at most" in text, text[-2000:]
    assert re.search(r"above the server's max_connections \d+", text)
