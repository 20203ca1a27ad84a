"""Start real hivemesh metastore processes for tests and benchmarks (real TCP, real subprocess)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import psutil
from hive_metastore import ThriftHiveMetastore
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport


def die_with_parent() -> None:
    """For ``preexec_fn``: ask Linux to SIGTERM the child when the thread that started it exits,
    so an interrupted test run leaves no server behind (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now ("" probes every interface)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


_LISTEN = re.compile(r"hivemesh metastore listening on (\S+):(\d+)")


class ManagedProcess:
    """Stopping a server subprocess held in ``proc``: SIGTERM then SIGKILL, or SIGKILL at once.
    Subclasses define ``start()``; instances are context managers."""

    proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 60.0) -> ManagedProcess:
        raise NotImplementedError

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL (for crash tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HivemeshProcess(ManagedProcess):
    """A ``hivemesh metastore`` subprocess on a free port.

    ``db_url``: SQLAlchemy URL of its store; ``warehouse``: a directory. Use as a context manager or
    call ``start()``/``stop()``; ``kill()`` sends SIGKILL (for crash tests). Output goes to ``log``.
    """

    def __init__(
        self, db_url: str, warehouse: Path, log: Path, extra_args: Sequence[str] = (), port: int = 0
    ):
        self.db_url = db_url
        self.warehouse = Path(warehouse)
        self.log = Path(log)
        self.extra_args = list(extra_args)
        self.port = port
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen[str] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> HivemeshProcess:
        cmd = [
            sys.executable, "-m", "hivemesh.cli", "metastore",
            "--host", self.host, "--port", str(self.port),
            "--db", self.db_url, "--warehouse", str(self.warehouse),
            "--log-level", os.environ.get("HIVEMESH_TEST_LOG_LEVEL", "WARNING"),
            # one process unless a test asks for more: kill() and restarts on the same port stay simple
            *([] if "--workers" in self.extra_args else ["--workers", "1"]),
            *self.extra_args,
        ]  # fmt: skip
        logf = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=logf, text=True, preexec_fn=die_with_parent
        )
        found: list[tuple[str, int]] = []

        def _read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                logf.write(line)
                logf.flush()
                m = _LISTEN.search(line)
                if m and not found:
                    found.append((m.group(1), int(m.group(2))))

        threading.Thread(target=_read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hivemesh metastore exited with {self.proc.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"hivemesh metastore did not start in {timeout}s; see {self.log}")
            time.sleep(0.05)
        self.host, self.port = found[0]
        return self


class ThriftClient:
    """A plain HMS Thrift client (unframed binary, like Hive's) usable as a context manager."""

    def __init__(self, host: str, port: int, timeout_ms: int = 60_000):
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(timeout_ms)
        self.transport = TTransport.TBufferedTransport(sock)
        self.client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocolAccelerated(self.transport))
        self.transport.open()

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> ThriftHiveMetastore.Client:
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.close()


def worker_pids(proc: HivemeshProcess) -> list[int]:
    """Process ids of a ``hivemesh metastore --workers N`` process's workers (its children)."""
    assert proc.proc is not None
    return sorted(c.pid for c in psutil.Process(proc.proc.pid).children())


def client_connections(pid: int, port: int) -> int:
    """Established TCP connections process ``pid`` serves on ``port``."""
    return sum(
        1
        for conn in psutil.Process(pid).net_connections(kind="tcp")
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_ESTABLISHED
    )
