"""Start real OpenSSH servers (``/usr/sbin/sshd``) on loopback ports for SSH tunnel tests.

Each :class:`SshServer` has its own host key, authorized_keys file, config and log in a directory of
its own, logs in the current user (root included: ``PermitRootLogin prohibit-password``) by public key
only, and allows TCP forwarding. :func:`make_key` creates client key pairs with ``ssh-keygen``.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.servers import die_with_parent, free_port

SSHD = "/usr/sbin/sshd"
SSHD_SKIP_REASON = "needs OpenSSH's sshd (Debian package openssh-server); CI installs it"


def sshd_available() -> bool:
    """True when both ``/usr/sbin/sshd`` and ``ssh-keygen`` are installed."""
    return os.access(SSHD, os.X_OK) and shutil.which("ssh-keygen") is not None


def make_key(path: Path, key_type: str = "ed25519") -> Path:
    """Create an unencrypted key pair with ``ssh-keygen -t key_type`` (``rsa`` is 2048 bits, for speed).

    Returns ``path`` (the private key); the public key is ``path`` + ``.pub``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, Path(f"{path}.pub")):
        p.unlink(missing_ok=True)
    bits = ["-b", "2048"] if key_type == "rsa" else []
    subprocess.run(
        ["ssh-keygen", "-q", "-t", key_type, *bits, "-N", "", "-C", path.name, "-f", str(path)],
        check=True, capture_output=True,
    )  # fmt: skip
    return path


def public_key(path: Path | str) -> str:
    """``"<type> <base64>"`` of a key pair given by its private or public (``.pub``) file."""
    pub = Path(path) if str(path).endswith(".pub") else Path(f"{path}.pub")
    return " ".join(pub.read_text().split()[:2])


def _descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _exited(pid: int) -> bool:
    """True once ``pid`` is gone or a zombie (its sockets are closed either way)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _wait_exited(pids: Sequence[int], deadline: float) -> list[int]:
    """Wait until every pid has exited or ``deadline`` (time.monotonic) passes; returns those left."""
    left = list(pids)
    while left:
        left = [pid for pid in left if not _exited(pid)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return left


class SshServer:
    """A real ``sshd -D`` on ``127.0.0.1:port`` (a free port unless given), state kept in ``workdir``.

    ``authorized_keys``: key files (private or ``.pub``) whose public keys may log in;
    ``log_level``: sshd ``LogLevel`` (``DEBUG1`` also logs each ``direct-tcpip`` forward). The host key
    (Ed25519) is generated once, so a restarted server keeps its identity. ``log`` collects sshd's log
    (``-E``). ``stop()`` also ends the per-connection sessions, like a host reboot; ``kill()`` SIGKILLs.
    """

    def __init__(
        self,
        workdir: Path,
        authorized_keys: Sequence[Path | str] = (),
        port: int = 0,
        log_level: str = "VERBOSE",
        extra_config: Sequence[str] = (),
    ):
        if not sshd_available():
            raise RuntimeError(SSHD_SKIP_REASON)
        self.dir = Path(workdir).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.log = self.dir / "sshd.log"
        self.config = self.dir / "sshd_config"
        self.authorized_keys = self.dir / "authorized_keys"
        self.host_key = self.dir / "ssh_host_ed25519_key"
        self.proc: subprocess.Popen[bytes] | None = None
        if not self.host_key.exists():
            make_key(self.host_key, "ed25519")
        self.authorized_keys.write_text("".join(public_key(k) + "\n" for k in authorized_keys))
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.host}",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.authorized_keys}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "StrictModes no",
                    "UsePAM no",
                    "AllowTcpForwarding yes",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    f"LogLevel {log_level}",
                    *extra_config,
                ]
            )
            + "\n"
        )

    @property
    def host_key_line(self) -> str:
        """This server's known_hosts line: ``[127.0.0.1]:PORT ssh-ed25519 AAAA...``."""
        return f"[{self.host}]:{self.port} {public_key(self.host_key)}"

    def route_hop(self) -> str:
        """This server as a route hop: ``user@127.0.0.1:PORT``."""
        return f"{self.user}@{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for_log(self, pattern: str, timeout: float = 5.0) -> re.Match[str]:
        """The first match of the regex ``pattern`` in the log, waiting up to ``timeout`` s for it
        (sshd writes some lines after the client has moved on). AssertionError with the log if absent."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.log_text())
            if m is not None:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not in {self.log}:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)

    def start(self, timeout: float = 15.0) -> SshServer:
        """Start sshd and wait until it listens; RuntimeError with its log when it cannot."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        mark = len(self.log_text())
        stderr = open(self.dir / "sshd.stderr", "ab")  # noqa: SIM115 - inherited by the child, closed below
        try:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-E", str(self.log), "-f", str(self.config)],
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, preexec_fn=die_with_parent,
            )  # fmt: skip
        finally:
            stderr.close()
        listening = f"Server listening on {self.host} port {self.port}."
        deadline = time.monotonic() + timeout
        while listening not in self.log_text()[mark:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                err = (self.dir / "sshd.stderr").read_text(errors="replace")
                raise RuntimeError(
                    f"sshd on port {self.port} did not start:\n{err}\n{self.log_text()[mark:]}"
                )
            time.sleep(0.02)
        return self

    def _signal_all(self, sig: signal.Signals) -> list[int]:
        """Send ``sig`` to the listener, then to every session process; returns the sessions' pids."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        sessions = _descendants(self.proc.pid)  # per-connection sshd processes (own sessions via setsid)
        self.proc.send_signal(sig)  # the listener first, so no new session starts
        for pid in sessions:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return sessions

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM sshd and every open session, and wait until all have exited (SIGKILL after
        ``timeout`` s), so the SSH connections are dropped when this returns."""
        sessions = self._signal_all(signal.SIGTERM)
        if self.proc is None:
            return
        deadline = time.monotonic() + timeout
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        left = _wait_exited(sessions, deadline)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_exited(left, time.monotonic() + 5)

    def kill(self) -> None:
        """SIGKILL sshd and every open session, and wait until they have exited."""
        sessions = self._signal_all(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        _wait_exited(sessions, time.monotonic() + 5)

    def __enter__(self) -> SshServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
