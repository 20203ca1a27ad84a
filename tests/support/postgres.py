"""A private PostgreSQL cluster for tests: ``initdb`` into a temp dir, trust auth, a free port.

The binaries are Debian's ``postgresql`` package (``/usr/lib/postgresql/<major>/bin``, the newest
major installed, or ``initdb``/``postgres`` on ``PATH``); ``.ci/run`` installs the package when it
is missing. The server runs as a child of the test process (not daemonized by ``pg_ctl``), so it
goes away with the test run even after a kill -9 of pytest (``PR_SET_PDEATHSIG``). As root (CI,
these machines) it runs as the ``postgres`` system user, since PostgreSQL refuses to run as root.

Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``): tests need speed and
correct transactions, not crash safety of the test cluster itself.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.servers import die_with_parent, free_port

__all__ = ["PostgresCluster", "PostgresError", "postgres_binaries"]


class PostgresError(RuntimeError):
    """The test cluster could not be created or started (the message has the log tail)."""


def postgres_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres`` (newest Debian major first), or ``None``."""
    majors = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
        reverse=True,
    )
    for initdb in majors:
        if os.access(initdb, os.X_OK) and os.access(
            os.path.join(os.path.dirname(initdb), "postgres"), os.X_OK
        ):
            return Path(initdb).parent
    on_path = shutil.which("initdb")
    if on_path:
        real = Path(os.path.realpath(on_path)).parent
        if (real / "postgres").exists():
            return real
    return None


class PostgresCluster:
    """One PostgreSQL server on ``127.0.0.1:<free port>`` with superuser ``postgres`` (trust auth).

    ``url`` is the SQLAlchemy admin URL (``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres``),
    ``base_dir`` holds ``data/``, the Unix socket directory and ``postgres.log``; ``stop()`` removes
    it. ``start()`` raises :class:`PostgresError` when the binaries are missing or the server does
    not accept connections within ``timeout`` seconds.
    """

    def __init__(self, base_dir: Path | None = None, max_connections: int = 400):
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="hivemesh-pg-")).resolve()
        self.port = 0
        self.max_connections = max_connections
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.base_dir / "postgres.log"

    @property
    def url(self) -> str:
        """The admin SQLAlchemy URL (database ``postgres``)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def jdbc_url(self) -> str:
        """The JDBC URL of database ``postgres`` (for Java peers such as Hive's metastore)."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    def _as_owner(self) -> dict[str, object]:
        if os.geteuid() != 0:
            return {}
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError as e:
            raise PostgresError("running as root and no 'postgres' user exists to run PostgreSQL as") from e
        for root, dirs, files in os.walk(self.base_dir):
            for name in [*dirs, *files]:
                os.chown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)
        os.chown(self.base_dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.base_dir, 0o755)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60.0) -> PostgresCluster:
        """initdb (first time only) and start the server; returns ``self`` once it accepts queries."""
        bindir = postgres_binaries()
        if bindir is None:
            raise PostgresError(
                "PostgreSQL binaries not found (Debian package postgresql: apt-get install postgresql)"
            )
        data = self.base_dir / "data"
        sock = self.base_dir / "sock"
        sock.mkdir(parents=True, exist_ok=True)
        owner = self._as_owner()
        if not (data / "PG_VERSION").exists():
            init = subprocess.run(
                [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                 "--no-sync", "--locale=C"],
                capture_output=True, text=True, timeout=120, cwd=self.base_dir, **owner,
            )  # fmt: skip
            if init.returncode != 0:
                raise PostgresError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        self.port = free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(sock),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "128MB",
            "max_locks_per_transaction": "256",
        }
        args = [str(bindir / "postgres"), "-D", str(data)]
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=self.base_dir,
                start_new_session=True, preexec_fn=die_with_parent, **owner,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PostgresError(f"postgres exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                import psycopg

                with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                                     connect_timeout=2) as conn:  # fmt: skip
                    conn.execute("select 1")
                return self
            except Exception as e:  # not up yet
                last = e
                time.sleep(0.1)
        self.stop()
        raise PostgresError(
            f"postgres did not accept connections in {timeout}s ({last!r}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"<no log: {e}>"

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT; SIGKILL after ``timeout`` s) and remove ``base_dir``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
