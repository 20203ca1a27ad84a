"""Run the real Apache Hive Metastore 2.3.10 (from the PySpark wheel's jars) for tests and benchmarks.

The metastore runs as a plain ``java`` subprocess on a free port with embedded Derby, a ``file:``
warehouse and its own log, all inside one fresh directory::

    with JavaHMS() as hms:
        with ThriftClient(hms.host, hms.port) as client:
            client.get_all_databases()

Needs Java 17 on ``PATH`` (see :func:`java_available`); tests that use it carry
``@pytest.mark.javahms`` and skip with :data:`JAVA_SKIP_REASON` otherwise.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from tests.support.servers import ThriftClient, die_with_parent, free_port

__all__ = [
    "JAVA_SKIP_REASON",
    "TXN_CONF",
    "JavaHMS",
    "JavaHMSError",
    "java_available",
    "pyspark_jars_dir",
    "rss_bytes",
]

JAVA_SKIP_REASON = "needs Java 17 to start the real Apache HMS 2.3.10 from the PySpark wheel; CI has it"

_MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"

# Java 17 module opens, as Spark itself passes them; harmless where unused.
_ADD_OPENS = [
    "java.base/java.lang",
    "java.base/java.lang.invoke",
    "java.base/java.lang.reflect",
    "java.base/java.io",
    "java.base/java.net",
    "java.base/java.nio",
    "java.base/java.util",
    "java.base/java.util.concurrent",
    "java.base/java.util.concurrent.atomic",
    "java.base/sun.nio.ch",
    "java.base/sun.nio.cs",
    "java.base/sun.security.action",
    "java.base/sun.util.calendar",
]

# Log4j 2 configuration picked up by HiveMetaStore (our conf directory is first on the classpath):
# everything goes to stderr, which start() redirects into JavaHMS.log; DataNucleus chatter is muted.
_LOG4J2 = """\
status = WARN
name = JavaHMSTest
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = ERROR
logger.datastore.name = Datastore
logger.datastore.level = ERROR
logger.jpox.name = JPOX
logger.jpox.level = ERROR
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""

# hive-site.xml properties for ``JavaHMS(txn=True)``. HMS 2.3 never creates its transaction tables (TXNS,
# HIVE_LOCKS, NEXT_TXN_ID...) itself: without them open_txns answers "Internal error processing
# open_txns". With hive.in.test its TxnHandler runs TxnDbUtil.prepDb() on the metastore's Derby database
# (once per handler thread: the first txn call of a new connection costs ~30-40 ms more, the very first
# ~0.3 s); the other properties are what a Hive client with ACID enabled sets, the compactor stays off.
TXN_CONF = {
    "hive.in.test": "true",
    "hive.support.concurrency": "true",
    "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
    "hive.compactor.initiator.on": "false",
    "hive.compactor.worker.threads": "0",
}


class JavaHMSError(RuntimeError):
    """The Java metastore could not be started (it exited, or did not answer in time)."""


def java_available() -> bool:
    """True when a ``java`` of version 17 or later runs and the PySpark wheel has the Hive 2.3 jars."""
    java = shutil.which("java")
    if java is None:
        return False
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    if out.returncode != 0:
        return False
    major = _java_major(out.stderr + out.stdout)
    if major is None or major < 17:
        return False
    try:
        jars = pyspark_jars_dir()
    except ImportError:
        return False
    return any(jars.glob("hive-metastore-2.3.*.jar"))


def _java_major(version_text: str) -> int | None:
    for line in version_text.splitlines():
        if "version" not in line or '"' not in line:
            continue
        ver = line.split('"')[1]
        head = ver.split(".")[0].split("-")[0].split("+")[0]
        if head == "1":  # 1.8.0_x style
            parts = ver.split(".")
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        return int(head) if head.isdigit() else None
    return None


def pyspark_jars_dir() -> Path:
    """The ``jars`` directory of the installed PySpark wheel (Hive 2.3.10, Derby, DataNucleus...)."""
    import pyspark

    return Path(os.path.dirname(pyspark.__file__)) / "jars"


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (``VmRSS`` from ``/proc/<pid>/status``)."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                value, unit = line.split()[1:3]
                assert unit.lower() == "kb", line
                return int(value) * 1024
    raise ValueError(f"no VmRSS for pid {pid} (a zombie or kernel thread?)")


def _pid_listens(pid: int, port: int) -> bool:
    """True if process ``pid`` holds a TCP socket listening on ``port`` (Linux ``/proc``; else True)."""
    if not os.path.isdir(f"/proc/{pid}/fd"):
        return True
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local_address is HEXIP:HEXPORT, state 0A is LISTEN, field 9 is the socket inode
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def _site_xml(props: dict[str, str]) -> str:
    rows = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}\n</configuration>\n'


class JavaHMS:
    """The real Apache Hive Metastore 2.3.10 as a subprocess on a free port.

    Everything lives in ``base_dir`` (a fresh temp directory by default, removed by ``stop()`` unless
    ``keep=True`` or start-up failed): ``conf/hive-site.xml``, the Derby database ``metastore_db``,
    the warehouse ``warehouse/`` and the process output ``hms.log``.

    Attributes: ``host``, ``port``, ``uri`` (``thrift://127.0.0.1:PORT``), ``pid`` (``None`` until
    started), ``warehouse`` (a local :class:`~pathlib.Path`; HMS sees it as ``file:<warehouse>``),
    ``log`` (path of the output file), ``base_dir``. ``hive_conf`` adds or overrides hive-site.xml
    properties; ``java_opts`` adds JVM options (e.g. ``-Xmx512m``); ``log_level`` is the root log level
    (``INFO`` logs every call, use ``WARN`` for benchmarks). With ``die_with_parent`` (Linux) the JVM
    gets SIGTERM when the *thread* that called ``start()`` exits, so start it from a long-lived thread.
    ``txn=True`` adds :data:`TXN_CONF` (before ``hive_conf``), so the transaction and lock calls
    (``open_txns``, ``commit_txn``, ``lock``...) work; HMS 2.3 has no write ids (no
    ``allocate_table_write_ids``/``get_valid_write_ids``: those answer ``UNKNOWN_METHOD``).
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str] | None = None,
        port: int = 0,
        hive_conf: dict[str, str] | None = None,
        java_opts: Sequence[str] = (),
        log_level: str = "INFO",
        keep: bool = False,
        die_with_parent: bool = True,
        txn: bool = False,
    ):
        self._own_dir = base_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="javahms-") if base_dir is None else base_dir).resolve()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = port
        self.warehouse = self.base_dir / "warehouse"
        self.log = self.base_dir / "hms.log"
        self.conf_dir = self.base_dir / "conf"
        self.hive_conf = dict(hive_conf or {})
        self.java_opts = list(java_opts)
        self.log_level = log_level
        self.keep = keep
        self.die_with_parent = die_with_parent
        self.txn = txn
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def uri(self) -> str:
        """The metastore URI, ``thrift://127.0.0.1:PORT``."""
        return f"thrift://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the JVM, ``None`` before ``start()``."""
        return self.proc.pid if self.proc is not None else None

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        db = self.base_dir / "metastore_db"
        props = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={db};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "datanucleus.schema.autoCreateAll": "true",
            # Hive 2.3 defaults to BoneCP, which the PySpark wheel does not ship: the ObjectStore copes,
            # but TxnHandler (used by drop_database via AcidEventListener) then kills the connection.
            "datanucleus.connectionPoolingType": "HikariCP",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": f"file:{self.warehouse}",
        }
        if self.txn:
            props.update(TXN_CONF)
        props.update(self.hive_conf)
        (self.conf_dir / "hive-site.xml").write_text(_site_xml(props), encoding="utf-8")
        (self.conf_dir / "hive-log4j2.properties").write_text(
            _LOG4J2.replace("{level}", self.log_level), encoding="utf-8"
        )

    def command(self) -> list[str]:
        """The ``java`` command line (valid once a port has been chosen)."""
        jars = pyspark_jars_dir()
        return [
            shutil.which("java") or "java",
            "-XX:+IgnoreUnrecognizedVMOptions",
            *(f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS),
            "-Djava.net.preferIPv4Stack=true",
            "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
            f"-Dlog4j2.configurationFile={self.conf_dir / 'hive-log4j2.properties'}",
            f"-Dderby.system.home={self.base_dir}",
            f"-Dderby.stream.error.file={self.base_dir / 'derby.log'}",
            *self.java_opts,
            "-cp",
            f"{self.conf_dir}{os.pathsep}{jars}{os.sep}*",
            _MAIN_CLASS,
            "-p",
            str(self.port),
        ]

    def start(self, timeout: float = 120) -> JavaHMS:
        """Start the JVM and wait until ``get_all_databases`` answers; raises :class:`JavaHMSError`.

        With an automatic port (``port=0``), a lost race for the port is retried on another one.
        """
        if self.proc is not None and self.proc.poll() is None:
            return self
        auto_port = not self.port
        began = time.monotonic()
        deadline = began + timeout
        for attempt in range(3 if auto_port else 1):
            if auto_port:
                self.port = free_port("")  # HMS 2.3 binds every interface
            self._write_conf()
            log_start = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as logf:
                self.proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    cwd=self.base_dir,
                    start_new_session=True,  # a Ctrl-C in the test run reaches pytest, which stops us
                    preexec_fn=die_with_parent if self.die_with_parent else None,
                )
            last_error: Exception | None = None
            while True:
                code = self.proc.poll()
                if code is not None:
                    if attempt < 2 and auto_port and self._port_clash(log_start):
                        break  # somebody took the port between probe and bind: next attempt
                    raise JavaHMSError(
                        f"Java HMS exited with code {code} during start-up; log {self.log}:\n{self.log_tail()}"
                    )
                last_error = self._probe()
                if last_error is None:
                    self.startup_seconds = time.monotonic() - began
                    return self
                if time.monotonic() > deadline:
                    self.kill()
                    raise JavaHMSError(
                        f"Java HMS did not answer get_all_databases on port {self.port} within {timeout}s "
                        f"(last error: {last_error!r}); log {self.log}:\n{self.log_tail()}"
                    )
                time.sleep(0.2)
        raise AssertionError("unreachable")

    def _port_clash(self, log_start: int) -> bool:
        with open(self.log, "rb") as f:
            f.seek(log_start)
            return b"Address already in use" in f.read()

    def _probe(self) -> Exception | None:
        """``None`` when the port accepts and ``get_all_databases`` answers, else the error."""
        try:  # plain TCP first: TSocket logs an error for every refused connection
            with socket.create_connection((self.host, self.port), timeout=1):
                pass
            with ThriftClient(self.host, self.port, timeout_ms=3_000) as client:
                client.get_all_databases()
        except Exception as e:
            return e
        if self.proc is not None and not _pid_listens(self.proc.pid, self.port):
            return JavaHMSError(f"port {self.port} answered, but not from our JVM (pid {self.proc.pid})")
        return None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the process output."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            return f"<no log: {e}>"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM the JVM (SIGKILL after ``timeout`` s), wait for it, remove a temp ``base_dir``.

        Returns the exit code (``None`` if never started).
        """
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
        if self._own_dir and not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        return code

    def kill(self) -> None:
        """SIGKILL the JVM (for crash tests) and reap it; keeps ``base_dir``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> JavaHMS:
        try:
            return self.start()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
