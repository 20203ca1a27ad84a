"""``hivemesh live serve`` as a subprocess, for crash tests (kill -9 and restart on the same port)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.servers import ManagedProcess, die_with_parent, free_port


class LiveProcess(ManagedProcess):
    """``hivemesh live serve --config CONFIG --zone ZONE`` on ``port`` (a free one by default, kept
    across restarts). Output goes to ``log``. ``start()`` returns once the port accepts connections."""

    def __init__(self, config: Path, zone: str, log: Path, port: int | None = None) -> None:
        self.config = config
        self.zone = zone
        self.log = log
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 60.0) -> LiveProcess:
        cmd = [
            sys.executable, "-m", "hivemesh.cli", "live", "serve",
            "--config", str(self.config), "--zone", self.zone, "--port", str(self.port),
            "--log-level", os.environ.get("HIVEMESH_TEST_LOG_LEVEL", "INFO"),
        ]  # fmt: skip
        logf = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, text=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hivemesh live serve exited with {self.proc.returncode}; see {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"hivemesh live serve did not listen in {timeout}s; see {self.log}")
            time.sleep(0.05)
