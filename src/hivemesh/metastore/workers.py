"""Serve one port from several metastore processes (``hivemesh metastore --workers N``).

One Python process is bound by the GIL; a production HMS runs several instances on one database.
The parent process upgrades the schema once, binds the listening socket and forks ``N`` worker
processes that each run a whole :class:`~hivemesh.metastore.service.MetastoreService` (own store
connections, own housekeeper) accepting on that shared socket: the kernel hands each new
connection to one of them. Workers coordinate only through the database, as independent metastore
hosts on one PostgreSQL database do: ids come from rows read ``FOR UPDATE``, locks are decided
under the ``NEXT_LOCK_ID`` row lock, notification events are numbered in commit order, and one
housekeeping pass runs at a time (a PostgreSQL advisory lock).

The parent restarts a worker that dies (after a kill -9, say) and stops them all on SIGTERM or
SIGINT; SIGHUP is logged and ignored. Workers die with the parent (Linux ``PR_SET_PDEATHSIG``).
Worker ``k`` serves ``/metrics`` and ``/health`` on ``metrics_port + k``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import time
from types import FrameType

from hivemesh.config import MetastoreConfig
from hivemesh.metastore.service import MetastoreService, StartupError, run_forever
from hivemesh.metastore.store import PG_OVERFLOW, Store
from hivemesh.storage.sql import SchemaTooNewError
from hivemesh.thrift.server import listen_socket, tune_gc

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30.0  # how long the parent waits for workers to stop before SIGKILL
RESTART_BACKOFF_S = (0.5, 1, 2, 5, 10)  # delays before restarting a worker that keeps dying


def serve(cfg: MetastoreConfig) -> int:
    """Serve with ``cfg.effective_workers`` processes until SIGTERM/SIGINT; the exit code
    (0 stopped, 2 could not start)."""
    n = cfg.effective_workers
    if n <= 1:
        return run_forever(cfg)
    return run_workers(cfg, n)


def _die_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _worker_main(cfg: MetastoreConfig, sock: socket.socket, worker: int) -> int:
    """The body of worker process ``worker``: serve on ``sock`` until SIGTERM."""
    _die_with_parent()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the parent logs it
    svc = MetastoreService(cfg, sock=sock, worker=worker)
    try:
        svc.start()
    except StartupError as e:
        log.error("worker %d: %s", worker, e)
        return 2
    tune_gc()
    if svc.metrics_port is not None:
        log.info("worker %d (pid %d): metrics on port %d", worker, os.getpid(), svc.metrics_port)
    stop.wait()
    svc.stop()
    return 0


class _Workers:
    """The parent's view of its worker processes."""

    def __init__(self, cfg: MetastoreConfig, sock: socket.socket, n: int):
        self.cfg = cfg
        self.sock = sock
        self.n = n
        self.pids: dict[int, int] = {}  # pid -> worker number
        self.started: dict[int, float] = {}  # worker number -> monotonic start time
        self.failures: dict[int, int] = {}  # worker number -> consecutive quick deaths

    def spawn(self, worker: int) -> None:
        """Fork worker ``worker``; the child serves until SIGTERM and exits (never returns)."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns into the parent's code
            code = 1
            try:
                code = _worker_main(self.cfg, self.sock, worker)
            except BaseException:
                log.exception("worker %d failed", worker)
            finally:
                logging.shutdown()
                os._exit(code)
        self.pids[pid] = worker
        self.started[worker] = time.monotonic()

    def reap(self) -> list[tuple[int, int]]:
        """Workers that ended since the last call: ``[(worker, wait status)]``."""
        ended = []
        while self.pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            worker = self.pids.pop(pid, None)
            if worker is not None:
                ended.append((worker, status))
        return ended

    def signal_all(self, signum: int) -> None:
        """Send ``signum`` to every running worker (one already gone is skipped)."""
        for pid in list(self.pids):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _check_connections(store: Store, cfg: MetastoreConfig, n: int) -> None:
    """Warn when ``n`` workers' pools may open more PostgreSQL connections than the server allows."""
    if store.dialect != "postgresql":
        return
    with store.read() as conn:
        allowed = int(conn.exec_driver_sql("SHOW max_connections").scalar_one())
    pool = cfg.effective_db_pool_size
    most = n * (pool + PG_OVERFLOW)
    if most > allowed:
        log.warning(
            "%d workers x (db_pool_size %d + %d) = %d PostgreSQL connections at most, above the "
            "server's max_connections %d (shared with its other clients): lower db_pool_size or "
            "workers, or raise max_connections",
            n, pool, PG_OVERFLOW, most, allowed,
        )  # fmt: skip


def run_workers(cfg: MetastoreConfig, n: int) -> int:
    """Upgrade the schema, bind, fork ``n`` workers, keep them running until SIGTERM/SIGINT;
    prints ``hivemesh metastore listening on HOST:PORT (N workers)`` when bound."""
    try:
        store = Store(cfg.db, pool_size=1)  # one schema upgrade, before any worker opens the store
        _check_connections(store, cfg, n)
        store.dispose()
    except SchemaTooNewError as e:
        log.error("%s", e)
        return 2
    except Exception as e:
        log.error("cannot open the metadata store %s: %s", cfg.db, str(e).splitlines()[0] if str(e) else e)
        return 2
    try:
        sock = listen_socket(cfg.host, cfg.port)
    except OSError as e:
        log.error("cannot listen on %s:%s: %s", cfg.host, cfg.port, e.strerror or e)
        return 2
    stopping = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping %d workers", signal.Signals(signum).name, n)
        stopping.set()

    def _on_hup(_signum: int, _frame: FrameType | None) -> None:
        log.warning("received SIGHUP: the metastore reads its settings at start only; nothing reloaded")

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_hup)
    workers = _Workers(cfg, sock, n)
    for k in range(n):
        workers.spawn(k)
    host, port = sock.getsockname()[:2]
    print(f"hivemesh metastore listening on {host}:{port} ({n} workers)", flush=True)
    if cfg.metrics_port:
        print(
            f"hivemesh metastore metrics on http://{host}:{cfg.metrics_port}/metrics "
            f"(worker k on port {cfg.metrics_port}+k; health: /health)",
            flush=True,
        )
    code = 0
    pending: dict[int, float] = {}  # worker -> monotonic time of its restart
    while not stopping.is_set():
        for worker, status in workers.reap():
            quick = time.monotonic() - workers.started.get(worker, 0) < 10
            workers.failures[worker] = workers.failures.get(worker, 0) + 1 if quick else 0
            if quick and os.WIFEXITED(status) and os.waitstatus_to_exitcode(status) == 2:
                log.error("worker %d could not start (%s): stopping", worker, _describe(status))
                code = 2
                stopping.set()
                break
            delay = RESTART_BACKOFF_S[min(workers.failures[worker], len(RESTART_BACKOFF_S) - 1)]
            log.warning("worker %d ended (%s); restarting it in %.1fs", worker, _describe(status), delay)
            pending[worker] = time.monotonic() + delay
        for worker, at in list(pending.items()):
            if time.monotonic() >= at and not stopping.is_set():
                del pending[worker]
                workers.spawn(worker)
        stopping.wait(0.1)
    workers.signal_all(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while workers.pids and time.monotonic() < deadline:
        workers.reap()
        time.sleep(0.05)
    if workers.pids:
        log.warning("%d workers did not stop in %.0fs: killing them", len(workers.pids), STOP_TIMEOUT_S)
        workers.signal_all(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while workers.pids and time.monotonic() < deadline:
            workers.reap()
            time.sleep(0.05)
    sock.close()
    log.info("stopped")
    return code
