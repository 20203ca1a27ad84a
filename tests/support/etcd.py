"""A 3-member etcd cluster on loopback for tests: Debian's ``etcd-server`` (etcd 3.4), each member
with its own data dir under a temp dir, client and peer ports free on 127.0.0.1, and
``--heartbeat-interval 50 --election-timeout 500`` so that a new leader is elected in about a
second. Members are children of the test process (``PR_SET_PDEATHSIG``).

Faults by process: :meth:`EtcdCluster.pause` / :meth:`EtcdCluster.resume` (SIGSTOP / SIGCONT: a
hung member, its sockets still accepting connections), :meth:`EtcdCluster.kill` (kill -9) and
:meth:`EtcdCluster.restart` (on the same data dir); :meth:`EtcdCluster.leader` finds the leader;
:meth:`EtcdCluster.heal` undoes every fault.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.servers import die_with_parent, free_port
from tests.support.tls import Pki

ETCD = "/usr/bin/etcd"
ETCD_SKIP_REASON = "needs etcd: Debian's etcd-server (scripts/test-deps.sh installs it; CI has it)"


def etcd_binary() -> str | None:
    """The etcd server binary: Debian's, else ``etcd`` on PATH, else None."""
    return ETCD if os.access(ETCD, os.X_OK) else shutil.which("etcd")


def require_etcd() -> str:
    """The etcd binary; skips the calling test without one, and fails it under ``CI=true``."""
    binary = etcd_binary()
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(ETCD_SKIP_REASON)
        pytest.skip(ETCD_SKIP_REASON)
    return binary


class EtcdMember:
    """One member: its name, ports, data dir and process (None when killed)."""

    def __init__(self, name: str, root: Path, tls: Pki | None = None) -> None:
        self.name = name
        self.tls = tls
        self.client_port = free_port()
        self.peer_port = free_port()
        self.data_dir = root / name
        self.log = root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    def _http(self) -> dict[str, Any]:
        """requests' TLS arguments for this member (the test PKI's CA and client certificate)."""
        if self.tls is None:
            return {}
        return {"verify": str(self.tls.ca), "cert": (str(self.tls.client_cert), str(self.tls.client_key))}

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        """Started, not killed and not paused."""
        return self.proc is not None and self.proc.poll() is None and not self.paused

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def status(self, timeout: float = 0.5) -> dict[str, Any] | None:
        """This member's ``maintenance/status`` (None: no answer)."""
        try:
            r = requests.post(
                f"{self.client_url}/v3/maintenance/status", json={}, timeout=timeout, **self._http()
            )
            return r.json() if r.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None

    def healthy(self) -> bool:
        """etcd's ``/health``: this member answers and the cluster has a leader with quorum."""
        try:
            r = requests.get(f"{self.client_url}/health", timeout=1, **self._http())
            return r.status_code == 200 and r.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False


class EtcdCluster:
    """Three (``size``) etcd members on loopback under ``root``; :attr:`endpoints` are their
    client URLs. Start with :meth:`start`, end with :meth:`stop`. With ``tls``, clients reach the
    members over TLS and must show a certificate signed by the PKI's CA (``--client-cert-auth``);
    peers still talk plain HTTP. The members' certificate is the PKI's ``dual_cert``: etcd 3.4's
    JSON gateway dials its own gRPC port with the member's certificate, which therefore needs the
    client-auth usage too (a server-only one fails every gateway call with "connection closed")."""

    def __init__(self, root: Path, size: int = 3, binary: str = ETCD, tls: Pki | None = None) -> None:
        self.root = Path(root)
        self.binary = binary
        self.tls = tls
        self.members = [EtcdMember(f"m{i}", self.root, tls) for i in range(size)]
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def _spawn(self, m: EtcdMember) -> None:
        m.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.binary, "--name", m.name, "--data-dir", str(m.data_dir),
            "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
            "--initial-cluster-token", f"hivemesh-test-{os.getpid()}",
            "--heartbeat-interval", "50", "--election-timeout", "500",
            "--logger", "zap", "--log-level", "warn",
        ]  # fmt: skip
        if self.tls is not None:
            cmd += [
                "--cert-file", str(self.tls.dual_cert), "--key-file", str(self.tls.dual_key),
                "--client-cert-auth", "--trusted-ca-file", str(self.tls.ca),
            ]  # fmt: skip
        with open(m.log, "ab") as log:
            m.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        m.paused = False

    def start(self, timeout: float = 60.0) -> EtcdCluster:
        """Start every member and wait until the cluster is healthy. Raises RuntimeError with the
        members' log tails when it is not within ``timeout`` seconds."""
        self.root.mkdir(parents=True, exist_ok=True)
        for m in self.members:
            self._spawn(m)
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until every member runs and reports the cluster healthy."""
        deadline = time.monotonic() + timeout
        while True:
            dead = [m.name for m in self.members if m.proc is None or m.proc.poll() is not None]
            if not dead and all(m.healthy() for m in self.members):
                return
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {m.name}\n{m.log_tail()}" for m in self.members)
                what = f"members exited: {', '.join(dead)}" if dead else f"not healthy within {timeout:g} s"
                raise RuntimeError(f"etcd cluster under {self.root}: {what}\n{logs}")
            time.sleep(0.1)

    def leader(self, timeout: float = 20.0) -> EtcdMember:
        """The member that is leader now, by the running members' own status (the one whose
        member id is the leader it reports). Raises RuntimeError when none is within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.members:
                if not m.running:
                    continue
                st = m.status()
                if st and st.get("leader") and st["leader"] == st["header"]["member_id"]:
                    return m
            time.sleep(0.05)
        raise RuntimeError(f"no etcd leader within {timeout:g} s")

    def pause(self, m: EtcdMember) -> None:
        """SIGSTOP: the member hangs (its kernel still accepts connections)."""
        assert m.proc is not None
        m.proc.send_signal(signal.SIGSTOP)
        m.paused = True

    def resume(self, m: EtcdMember) -> None:
        """SIGCONT a paused member."""
        if m.proc is not None and m.proc.poll() is None:
            m.proc.send_signal(signal.SIGCONT)
        m.paused = False

    def kill(self, m: EtcdMember) -> None:
        """kill -9 the member (its data dir stays)."""
        if m.proc is not None and m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()
        m.paused = False

    def restart(self, m: EtcdMember, timeout: float = 30.0) -> None:
        """Start a killed member again on its data dir and wait for the cluster to be healthy."""
        if m.proc is not None and m.proc.poll() is None:
            raise RuntimeError(f"{m.name} is still running")
        self._spawn(m)
        self.wait_healthy(timeout)

    def heal(self, timeout: float = 30.0) -> None:
        """Resume paused members, restart killed ones, wait until healthy."""
        for m in self.members:
            if m.paused:
                self.resume(m)
        for m in self.members:
            if m.proc is None or m.proc.poll() is not None:
                self._spawn(m)
        self.wait_healthy(timeout)

    def stop(self) -> None:
        """Kill every member: the cluster's data is thrown away with its temp dir, and a graceful
        stop of all members at once takes seconds (each tries to hand over leadership)."""
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.kill()
        for m in self.members:
            if m.proc is not None:
                m.proc.wait()
