"""Run a Trino server (the ``trino-server`` bundle, Maven Central) for tests.

One coordinator that is also its only worker, on a free loopback port, with dynamic catalogs
(``CREATE CATALOG``) so one JVM serves every metastore a test session starts. It announces itself
at 127.0.0.1 (``node.internal-address``): left alone it would pick the machine's address. Catalogs
read local ``file:`` locations through Trino's Hadoop file system (``fs.hadoop.enabled``): its native
local file system lists no files under Hadoop-style ``file:/path`` locations. Needs Java 24+
(Temurin 25 on these machines); :func:`require_trino` skips (fails under ``CI=true``) without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hivemesh.jvm import JavaNotFound, JvmArtifactError, find_java, resolve
from tests.support.servers import die_with_parent, free_port

__all__ = ["TrinoServer", "require_trino"]


def require_trino() -> None:
    """Skip the calling test when Trino cannot run here; under ``CI=true`` fail, naming what is missing."""
    try:
        resolve("trino-server")
        find_java(24)
    except (JvmArtifactError, JavaNotFound) as e:
        reason = f"needs the Trino server (hivemesh.jvm bundle 'trino-server') and Java 24+: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


class TrinoServer:
    """``start()`` launches the server and waits until it answers queries; ``query(sql)`` runs one
    statement and returns its rows; ``add_hive_catalog(name, metastore_uri)`` creates a ``hive``
    catalog on a metastore, ``add_iceberg_catalog(name, metastore_uri)`` an ``iceberg`` one.
    ``log`` holds the server's output."""

    def __init__(self, heap: str = "2G"):
        self.base = Path(tempfile.mkdtemp(prefix="trino-"))
        self.log = self.base / "server.log"
        self.heap = heap
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> TrinoServer:
        """Start the server; raises RuntimeError with the log tail if it does not come up."""
        home = next(Path(str(resolve("trino-server").dist)).glob("trino-server-*"))
        self.port = free_port()
        etc = self.base / "etc"
        (etc / "catalog").mkdir(parents=True)
        (etc / "config.properties").write_text(
            "coordinator=true\nnode-scheduler.include-coordinator=true\n"
            f"http-server.http.port={self.port}\ndiscovery.uri=http://127.0.0.1:{self.port}\n"
            "query.max-memory=1GB\nquery.max-memory-per-node=512MB\ncatalog.management=dynamic\n"
        )
        cmd = [
            str(find_java(24)), f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djdk.attach.allowAttachSelf=true",
            "--enable-native-access=ALL-UNNAMED", f"-Dconfig={etc / 'config.properties'}",
            "-Dnode.environment=test", "-Dnode.id=hivemesh-tests", "-Dnode.internal-address=127.0.0.1",
            f"-Dnode.data-dir={self.base / 'data'}", f"-Dcatalog.config-dir={etc / 'catalog'}",
            f"-Dplugin.dir={home / 'plugin'}", "-cp", f"{home / 'lib'}{os.sep}*", "io.trino.server.TrinoServer",
        ]  # fmt: skip
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=self.base,
                start_new_session=True, preexec_fn=die_with_parent,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Trino exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/info", timeout=2) as r:
                    if b'"starting":false' in r.read() and self.query("SELECT 1") == [[1]]:
                        return self
            except Exception:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"Trino did not start in {timeout}s:\n{self.log_tail()}")

    def query(self, sql: str) -> list[list[Any]]:
        """Run one statement as user ``test``; its rows (``[]`` for DDL)."""
        import trino

        conn = trino.dbapi.connect(host="127.0.0.1", port=self.port, user="test", request_timeout=300)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [list(r) for r in cur.fetchall()]
        finally:
            conn.close()

    def add_hive_catalog(self, name: str, metastore_uri: str) -> None:
        """``CREATE CATALOG name USING hive`` on ``metastore_uri`` (local ``file:`` storage)."""
        self.query(
            f"CREATE CATALOG {name} USING hive WITH (\"hive.metastore.uri\" = '{metastore_uri}', "
            "\"fs.hadoop.enabled\" = 'true', \"hive.non-managed-table-writes-enabled\" = 'true')"
        )

    def add_delta_catalog(self, name: str, metastore_uri: str) -> None:
        """``CREATE CATALOG name USING delta_lake`` on ``metastore_uri``: Delta tables registered
        in a Hive metastore (as Spark's Delta catalog registers them), local ``file:`` storage."""
        self.query(
            f"CREATE CATALOG {name} USING delta_lake WITH (\"hive.metastore.uri\" = '{metastore_uri}', "
            "\"fs.hadoop.enabled\" = 'true')"
        )

    def add_iceberg_catalog(self, name: str, metastore_uri: str) -> None:
        """``CREATE CATALOG name USING iceberg`` on ``metastore_uri``: Iceberg tables registered in a
        Hive metastore (``iceberg.catalog.type = hive_metastore``), local ``file:`` storage as in
        :meth:`add_hive_catalog`."""
        self.query(
            f"CREATE CATALOG {name} USING iceberg WITH (\"iceberg.catalog.type\" = 'hive_metastore', "
            f"\"hive.metastore.uri\" = '{metastore_uri}', \"fs.hadoop.enabled\" = 'true')"
        )

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's output."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"<no log: {e}>"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
