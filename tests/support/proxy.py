"""Start real ``hivemesh proxy`` processes for tests and benchmarks (real TCP, real subprocess)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.support.servers import ManagedProcess, die_with_parent

_LISTEN = re.compile(r"hivemesh proxy listening on (\S+):(\d+)")
_METRICS = re.compile(r"hivemesh proxy metrics on (http://\S+)/metrics")


def write_mesh(
    path: Path, proxy: dict[str, Any], primary: dict[str, Any], federated: list[dict[str, Any]]
) -> Path:
    """Write a mesh.yaml with the ``proxy``, ``primary`` and ``federated`` sections."""
    path.write_text(
        yaml.safe_dump({"proxy": proxy, "primary": primary, "federated": federated}, sort_keys=False)
    )
    return path


class ProxyProcess(ManagedProcess):
    """``hivemesh proxy --config CONFIG`` as a subprocess (port and metrics port as in the file;
    use ``port: 0`` and ``metrics_port: 0`` for free ones). Output goes to ``log``.
    ``uri``, ``host``, ``port`` and ``http`` (``http://host:port`` of /metrics and /health) are set
    once it listens. ``kill()`` sends SIGKILL; ``hup()`` sends SIGHUP (reload)."""

    def __init__(self, config: Path, log: Path, extra_args: list[str] | None = None):
        self.config = Path(config)
        self.log = Path(log)
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen[str] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.http: str | None = None

    @property
    def uri(self) -> str:
        return f"thrift://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> ProxyProcess:
        cmd = [sys.executable, "-m", "hivemesh.cli", "proxy", "--config", str(self.config), *self.extra_args]
        env = dict(os.environ)
        logf = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=logf, text=True, preexec_fn=die_with_parent, env=env
        )
        found: dict[str, Any] = {}

        def _read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                logf.write(line)
                logf.flush()
                m = _LISTEN.search(line)
                if m and "listen" not in found:
                    found["listen"] = (m.group(1), int(m.group(2)))
                m = _METRICS.search(line)
                if m:
                    found["http"] = m.group(1)

        threading.Thread(target=_read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while "listen" not in found:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hivemesh proxy exited with {self.proc.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"hivemesh proxy did not start in {timeout}s; see {self.log}")
            time.sleep(0.05)
        self.host, self.port = found["listen"]
        time.sleep(0.05)
        self.http = found.get("http")
        return self

    def health(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON) of ``/health``."""
        assert self.http, "start the proxy with metrics_port set"
        try:
            with urllib.request.urlopen(f"{self.http}/health", timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metrics(self) -> str:
        """The text of ``/metrics``."""
        assert self.http, "start the proxy with metrics_port set"
        with urllib.request.urlopen(f"{self.http}/metrics", timeout=10) as r:
            return r.read().decode()

    def hup(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGHUP)
