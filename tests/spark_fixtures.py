"""Spark fixtures shared by the whole suite: one SparkSession per backend, one JVM per test session.

``spark_metastore`` is a real ``hivemesh metastore`` subprocess (with Prometheus metrics on) on a
fresh SQLite file or a fresh PostgreSQL database; ``spark`` is a SparkSession with Hive support
(``local[2]``, 2 shuffle partitions, no UI, errors-only JVM logs) whose catalog is that metastore.
Every Spark test runs on ``sqlite``; those marked ``spark_postgres`` run on ``postgres`` too
(``conftest.pytest_generate_tests``), after all the others (``conftest._order``), so each
SparkSession is built once. The metastore's PostgreSQL semantics (txns, locks, write ids, every
call) are tested without Spark, on both backends. The PostgreSQL instance is skipped with
``conftest.PG_SKIP_REASON`` only when no PostgreSQL can be had.

Design: a new SparkSession per backend in the same JVM (option b)
------------------------------------------------------------------
A SparkSession's Hive client is bound to one metastore URI (``hive.metastore.uris`` is a static
setting read when the session's external catalog is first used). Starting a JVM costs ~10-20 s, so
the JVM is started once; when pytest moves from the ``sqlite`` parameter to ``postgres`` it tears
down the ``sqlite`` instances of these session fixtures (the SparkSession is stopped, then its
metastore) and builds the ``postgres`` ones: a new SparkContext and SparkSession in the same JVM
(PySpark keeps the Py4J gateway), whose SharedState builds a new HiveExternalCatalog. With the
built-in Hive 2.3 jars and no CliSessionState, Spark creates that Hive client in a fresh isolated
class loader, so nothing of the previous client (HiveConf, Hive.get() thread-locals, open Thrift
sockets) survives: the new client talks to the new URI. The fixture checks this every time: the
``get_database`` counter of the *new* server must move when the new session looks up a database
(:func:`_check_bound`), otherwise it raises.

Why not (a), one fixed port and swapping the server behind it: the session would keep state that
belongs to the first catalog (the relation cache of data-source tables, ``spark.sql.warehouse.dir``
shared by both backends so managed table directories would collide, the ``default`` database
created by Spark only at catalog start-up). Reconnection after a broken transport is still tested,
by ``tests/test_spark_persistence.py``, which restarts the metastore process under the live session.

Each backend gets its own warehouse directory, used both as the server's ``--warehouse`` and as
``spark.sql.warehouse.dir``. If another SparkSession is active when ``spark`` is set up (made by a
test with different settings), it is stopped first: otherwise ``getOrCreate()`` would return it,
bound to the wrong metastore.
"""

from __future__ import annotations

import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hive_metastore.ttypes import Database

from hivemesh.client.metastore import MetastoreClient
from hivemesh.jvm import JvmArtifactError
from hivemesh.jvm import resolve as resolve_jvm
from tests.support.resources import SessionResources
from tests.support.servers import HivemeshProcess
from tests.support.spark_reference import SPARK_MASTER, SPARK_TEST_CONF, driver_java_options, write_log4j2

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkMetastore", "client", "db", "spark", "spark_metastore", "spark_store_url"]

_METRICS = re.compile(r"hivemesh metastore metrics on (http://\S+/metrics)")
_CALLS = re.compile(r'^hivemesh_thrift_calls_total\{method="([^"]+)"\} (\S+)$', re.MULTILINE)


class SparkMetastore(HivemeshProcess):
    """A :class:`HivemeshProcess` started with ``--metrics-port 0`` that can read its call counters.

    ``backend`` is ``"sqlite"`` or ``"postgres"``. ``start()`` may be called again after ``stop()``:
    the process comes back on the same Thrift port and the same store (its counters restart at 0).
    """

    def __init__(self, backend: str, db_url: str, warehouse: Path, log: Path):
        super().__init__(db_url, warehouse, log, extra_args=["--metrics-port", "0"])
        self.backend = backend
        self.metrics_url: str | None = None

    def start(self, timeout: float = 60.0) -> SparkMetastore:
        offset = self.log.stat().st_size if self.log.exists() else 0
        super().start(timeout)
        deadline = time.monotonic() + timeout
        while True:  # the metrics line follows the "listening" line on stdout (copied to the log)
            with open(self.log, encoding="utf-8", errors="replace") as f:
                f.seek(offset)
                found = _METRICS.search(f.read())
            if found:
                self.metrics_url = found.group(1)
                return self
            if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None):
                raise RuntimeError(f"hivemesh metastore did not report its metrics port; see {self.log}")
            time.sleep(0.05)

    def calls(self) -> dict[str, float]:
        """``hivemesh_thrift_calls_total`` per Thrift method since this process started."""
        assert self.metrics_url is not None, "not started"
        with urllib.request.urlopen(self.metrics_url, timeout=30) as resp:
            text = resp.read().decode()
        return {m.group(1): float(m.group(2)) for m in _CALLS.finditer(text)}


@pytest.fixture(scope="session")
def spark_store_url(
    request: pytest.FixtureRequest,
    session_resources: SessionResources,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """A fresh, empty metadata store for the Spark tests' metastore, one per backend per test session
    (dropped at the end on PostgreSQL). Its parameter comes from ``conftest.pytest_generate_tests``:
    ``sqlite``, and ``postgres`` too for tests marked ``spark_postgres``."""
    from tests import conftest

    backend = request.param
    return session_resources.get(
        ("spark_store", backend), lambda: conftest._store_url(backend, tmp_path_factory, "hivemesh_spark")
    )


@pytest.fixture(scope="session")
def spark_metastore(
    spark_store_url: str, session_resources: SessionResources, tmp_path_factory: pytest.TempPathFactory
) -> SparkMetastore:
    """The running ``hivemesh metastore`` (metrics on) that the ``spark`` fixture's session uses."""

    def start() -> SparkMetastore:
        backend = "sqlite" if spark_store_url.startswith("sqlite") else "postgres"
        base = tmp_path_factory.mktemp(f"spark-metastore-{backend}")
        return SparkMetastore(backend, spark_store_url, base / "warehouse", base / "metastore.log")

    return session_resources.get(("spark_metastore", spark_store_url), start)


def _stop_active_session() -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if SparkContext._active_spark_context is not None:  # a context without a session
        SparkContext._active_spark_context.stop()


def _check_bound(spark: SparkSession, metastore: SparkMetastore) -> None:
    """Raise unless ``spark``'s Hive client really calls ``metastore`` (see the module docstring)."""
    before = metastore.calls().get("get_database", 0.0)
    exists = spark.catalog.databaseExists("default")
    after = metastore.calls().get("get_database", 0.0)
    conf_uri = spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
    if not exists or after <= before or conf_uri != metastore.uri:
        raise RuntimeError(
            f"the SparkSession is not bound to {metastore.uri} (hive.metastore.uris={conf_uri}, "
            f"default exists={exists}, get_database calls {before} -> {after})"
        )


@pytest.fixture(scope="session")
def spark(
    spark_metastore: SparkMetastore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkSession]:
    """A SparkSession with Hive support on ``spark_metastore`` (one per backend, same JVM).

    Settings: ``tests.support.spark_reference.SPARK_TEST_CONF`` (local[2], 2 shuffle partitions, UI
    off, UTC session time zone, non-strict dynamic partitions). Tests must use their own database
    names (e.g. from the ``unique_name`` fixture) and leave the session's current database alone.
    """
    import hivemesh.spark

    _stop_active_session()
    log4j2 = write_log4j2(tmp_path_factory.getbasetemp() / "spark-log4j2.properties")
    conf = dict(SPARK_TEST_CONF)
    conf["spark.driver.extraJavaOptions"] = driver_java_options(log4j2)  # used when the JVM starts
    conf["spark.pyspark.python"] = sys.executable
    # Delta Lake's jars join the JVM's class path at start (they can be added no later), so that
    # tests/test_delta_spark.py can build a Delta-enabled session in this JVM; the extension and
    # catalog stay off here. Without them that test fails (or skips outside CI) with the reason.
    try:
        conf["spark.jars"] = ",".join(str(j) for j in resolve_jvm("delta").jars())
    except JvmArtifactError:
        pass
    session = hivemesh.spark.session(
        spark_metastore.uri,
        warehouse=str(spark_metastore.warehouse),
        app_name=f"hivemesh-tests-{spark_metastore.backend}",
        master=SPARK_MASTER,
        **conf,
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        _check_bound(session, spark_metastore)
        yield session
    finally:
        session.stop()


@pytest.fixture()
def client(spark_metastore: SparkMetastore) -> Iterator[MetastoreClient]:
    """A :class:`MetastoreClient` on the ``spark`` fixture's metastore (ACID tests)."""
    with MetastoreClient(spark_metastore.uri) as c:
        yield c


@pytest.fixture()
def db(client: MetastoreClient, unique_name: str, tmp_path: Path) -> str:
    """A new database (named by ``unique_name``, located in the test's tmp dir) on that metastore."""
    client.raw.create_database(Database(name=unique_name, locationUri=str(tmp_path / "db"), parameters={}))
    return unique_name
