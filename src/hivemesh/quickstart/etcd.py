"""A single-member etcd for ``hivemesh quickstart --live``: Debian's ``etcd`` (package
``etcd-server``) run as a child process on loopback, its data dir kept between runs.

:func:`etcd_binary` finds the server (``etcd`` on ``PATH``, else ``/usr/bin/etcd``);
:class:`EtcdServer` starts it on free ports of 127.0.0.1 (its log next to the data dir), waits
until it answers ``/health``, and stops it with SIGTERM. A data dir from an earlier run is
reused: the command log and the zones' positions in it survive, on new ports.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from hivemesh.errors import HivemeshError
from hivemesh.metastore.workers import _die_with_parent

log = logging.getLogger(__name__)

#: Where Debian's ``etcd-server`` package installs the server.
DEBIAN_ETCD = "/usr/bin/etcd"
#: The member's name (a single-member cluster).
MEMBER = "quickstart"


class EtcdUnavailable(HivemeshError, RuntimeError):
    """etcd is not installed, or did not start: the message says what to do or shows its log."""


def etcd_binary() -> str:
    """The etcd server: ``etcd`` on ``PATH``, else Debian's ``/usr/bin/etcd``. Raises
    EtcdUnavailable naming the package to install when there is neither."""
    found = shutil.which("etcd")
    if found is not None:
        return found
    if os.access(DEBIAN_ETCD, os.X_OK):
        return DEBIAN_ETCD
    raise EtcdUnavailable(
        f"etcd not found (neither on PATH nor at {DEBIAN_ETCD}): install Debian's etcd-server package "
        "(apt-get install etcd-server)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """One etcd member serving clients on ``http://127.0.0.1:<free port>`` with its data in
    ``data_dir`` and its log in ``<data_dir>.log``. A context manager: started on entry, stopped
    on exit."""

    def __init__(self, data_dir: Path, binary: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.log_file = self.data_dir.with_name(self.data_dir.name + ".log")
        self.binary = binary or etcd_binary()
        self.client_port = _free_port()
        self.peer_port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The client URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.client_port}"

    def version(self) -> str:
        """The server's version as ``/version`` reports it (``3.4.23``), or ``?``."""
        try:
            return str(requests.get(f"{self.endpoint}/version", timeout=2).json().get("etcdserver", "?"))
        except (requests.RequestException, ValueError):
            return "?"

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _healthy(self) -> bool:
        try:
            r = requests.get(f"{self.endpoint}/health", timeout=1)
            return r.status_code == 200 and r.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def start(self, timeout_s: float = 60.0) -> EtcdServer:
        """Start the member and wait until it is healthy. Raises EtcdUnavailable with the tail of
        its log when it exits or is not healthy within ``timeout_s`` seconds."""
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # the mode etcd asks for
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            self.binary, "--name", MEMBER, "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{MEMBER}={peer}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-level", "warn",
        ]  # fmt: skip
        log.info("starting etcd: %s", " ".join(cmd))
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + timeout_s
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = f"exited with {self.proc.returncode}" if self.proc.poll() is not None else "not healthy"
                self.stop()
                raise EtcdUnavailable(
                    f"etcd ({self.binary}) {why}; its log {self.log_file} ends:\n{self._log_tail()}"
                )
            time.sleep(0.1)
        log.info("etcd at %s (data %s)", self.endpoint, self.data_dir)
        return self

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
