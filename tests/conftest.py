"""Shared fixtures: metastore backends (SQLite, PostgreSQL) and running hivemesh servers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.postgres import PostgresCluster, PostgresError
from tests.support.servers import HivemeshProcess, ThriftClient

_pg_cluster: PostgresCluster | None = None
_pg_error: str | None = None


def in_ci() -> bool:
    """True under CI (``CI=true``), where a missing PostgreSQL, Java, sshd or Maven artifact fails."""
    return os.environ.get("CI", "").lower() == "true"


def pg_admin_url() -> str:
    """Admin URL of the PostgreSQL server for tests: ``$HIVEMESH_TEST_PG`` when set, else a private
    cluster this test session starts once (:class:`tests.support.postgres.PostgresCluster`).

    Raises :class:`tests.support.postgres.PostgresError` when that cluster cannot start.
    """
    global _pg_cluster, _pg_error
    override = os.environ.get("HIVEMESH_TEST_PG")
    if override:
        return override
    if _pg_cluster is None:
        if _pg_error is not None:
            raise PostgresError(_pg_error)
        try:
            _pg_cluster = PostgresCluster().start()
        except PostgresError as e:
            _pg_error = str(e)
            raise
    return _pg_cluster.url


def postgres_available() -> bool:
    """True when PostgreSQL for tests answers (``$HIVEMESH_TEST_PG``, or the private cluster started)."""
    try:
        import sqlalchemy as sa

        eng = sa.create_engine(pg_admin_url(), connect_args={"connect_timeout": 3})
        with eng.connect():
            pass
        eng.dispose()
        return True
    except Exception as e:
        global _pg_error
        _pg_error = _pg_error or str(e)
        return False


PG_SKIP_REASON = (
    "needs PostgreSQL: the Debian package postgresql (tests start a private cluster with initdb) or "
    "HIVEMESH_TEST_PG=postgresql+psycopg://user@host:port/db; CI installs it and fails without it"
)


def make_pg_database(prefix: str = "hivemesh_test") -> str:
    """Create a fresh, empty PostgreSQL database and return its SQLAlchemy URL."""
    import sqlalchemy as sa

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    eng = sa.create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    eng.dispose()
    return pg_admin_url().rsplit("/", 1)[0] + "/" + name


@contextmanager
def pg_database(prefix: str = "hivemesh_test") -> Iterator[str]:
    """A fresh PostgreSQL database for the block (dropped after it); skips the test, naming what
    is missing, when there is no PostgreSQL (CI turns that skip into a failure)."""
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database(prefix)
    try:
        yield url
    finally:
        drop_pg_database(url)


def drop_pg_database(url: str) -> None:
    """Drop a database made by :func:`make_pg_database` (its connections are closed first)."""
    import sqlalchemy as sa

    name = url.rsplit("/", 1)[1]
    eng = sa.create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    eng.dispose()


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh metadata store URL, once for SQLite and once for PostgreSQL (dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'metastore.db'}"
        return
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture(scope="session")
def hivemesh_server(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    """A running ``hivemesh metastore`` process on each backend (shared by the session)."""
    base = tmp_path_factory.mktemp("hivemesh")
    with HivemeshProcess(backend_url, base / "warehouse", base / "metastore.log") as proc:
        yield proc


@pytest.fixture()
def hms(hivemesh_server: HivemeshProcess) -> Iterator:
    """A Thrift client (hive_metastore.ThriftHiveMetastore.Client) connected to hivemesh_server."""
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as client:
        yield client


@pytest.fixture()
def unique_name() -> str:
    """A lower-case identifier unique to the test (for databases and tables)."""
    return "t" + uuid.uuid4().hex[:10]


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """``../shared`` beside the repository (fixtures and docs)."""
    return repo_root().parent / "shared"


# Tests marked ``proxy_spark`` (tests/test_proxy_spark.py) stop the shared SparkSession of the
# ``spark`` fixture and start their own against hivemesh proxies (one SparkSession per JVM at a
# time). Running them last means no later test finds the shared session stopped. trylast: after
# pytest's own fixture-based reordering, so nothing moves them back.
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "proxy_spark: replaces the shared SparkSession; runs last")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the private PostgreSQL cluster, if this session started one."""
    global _pg_cluster
    if _pg_cluster is not None:
        _pg_cluster.stop()
        _pg_cluster = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Under CI (``CI=true``) a skipped test is a failure: the run must prove the whole suite ran,
    so a missing PostgreSQL, Java, sshd or Maven artifact cannot hide behind a skip there."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where nothing may skip: {reason}"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    last = [i for i in items if i.get_closest_marker("proxy_spark") is not None]
    if last:
        items[:] = [i for i in items if i.get_closest_marker("proxy_spark") is None] + last


from tests.hive4_fixtures import *  # noqa: E402,F401,F403 - the Hive 4 metastore peers
from tests.spark_fixtures import *  # noqa: E402,F401,F403 - the shared Spark fixtures
