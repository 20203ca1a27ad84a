"""Shared fixtures: metastore backends (SQLite, PostgreSQL) and running hivemesh servers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.etcd import EtcdCluster, require_etcd
from tests.support.postgres import PostgresCluster, PostgresError
from tests.support.resources import SessionResources
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


@pytest.fixture(scope="session")
def session_resources() -> Iterator[SessionResources]:
    """The cache that keeps one instance of each parametrized peer for the whole test session."""
    resources = SessionResources()
    yield resources
    resources.close()


@contextmanager
def _store_url(backend: str, tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp(f'{prefix}-sqlite') / 'metastore.db'}"
    else:
        with pg_database(prefix) as url:
            yield url


# The PostgreSQL parameters carry the ``postgres`` mark, so ``-m "not postgres"`` deselects them.
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session", params=BACKENDS)
def backend_url(
    request: pytest.FixtureRequest,
    session_resources: SessionResources,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """A fresh metadata store URL, one for SQLite and one for PostgreSQL, each made once per test
    session (the PostgreSQL database is dropped at the end)."""
    return session_resources.get(
        ("store", request.param), lambda: _store_url(request.param, tmp_path_factory, "hivemesh_test")
    )


@pytest.fixture(scope="session")
def hivemesh_server(
    backend_url: str, session_resources: SessionResources, tmp_path_factory: pytest.TempPathFactory
) -> HivemeshProcess:
    """A running ``hivemesh metastore`` process on each backend, started once per test session."""

    def start() -> HivemeshProcess:
        base = tmp_path_factory.mktemp("hivemesh")
        return HivemeshProcess(backend_url, base / "warehouse", base / "metastore.log")

    return session_resources.get(("hivemesh_server", backend_url), start)


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A 3-member etcd cluster on loopback (:mod:`tests.support.etcd`), started once per test
    session (per pytest-xdist worker: its tests form the ``etcd`` group, so one worker starts it).
    Skips without Debian's etcd-server, fails under ``CI=true``."""
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"), binary=require_etcd())
    try:
        yield cluster.start()
    finally:
        cluster.stop()


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "proxy_spark: replaces the shared SparkSession; runs last")
    config.addinivalue_line(
        "markers",
        "spark_postgres: a Spark test that also runs with the Spark metastore on PostgreSQL (the rest "
        "run on SQLite only: the metastore's PostgreSQL semantics are tested without Spark)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The ``spark_store_url`` parameter: ``sqlite`` for every Spark test, ``postgres`` too for
    those marked ``spark_postgres`` (a SparkSession's warm-up is tens of seconds, and one JVM holds
    one session at a time, so each backend costs a session of its own)."""
    if "spark_store_url" in metafunc.fixturenames:
        backends: list[object] = ["sqlite"]
        if metafunc.definition.get_closest_marker("spark_postgres") is not None:
            backends.append(pytest.param("postgres", marks=pytest.mark.postgres))
        metafunc.parametrize("spark_store_url", backends, indirect=True, scope="session")


# Markers that follow from the fixtures a test uses, so ``-m`` selections (``make test-quick``)
# need no hand-kept list.
_FIXTURE_MARKS = {
    "spark": "spark",
    "spark_metastore": "spark",
    "hive4": "hive4",
    "etcd_cluster": "etcd",
    "hdfs_cluster": "hdfs",
}


# With pytest-xdist (``-n 2 --dist loadgroup``), tests run in groups, a group on one worker: each
# JVM peer a group of its own, so it starts on one worker only (one SparkSession per JVM, and the
# Spark tests' order of backends kept), and so the etcd cluster and the HDFS mini cluster, every
# other test with the rest of its file, so module fixtures start once.
_JVM_GROUPS = ("spark", "proxy_spark", "hive4", "etcd", "hdfs")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark a test by the peers its fixtures start (before ``-m`` selects), and put it in its
    pytest-xdist group."""
    names = getattr(item, "fixturenames", ())
    for fixture, mark in _FIXTURE_MARKS.items():
        if fixture in names and item.get_closest_marker(mark) is None:
            item.add_marker(mark)
    if item.get_closest_marker("xdist_group") is None:
        group = next((g for g in _JVM_GROUPS if item.get_closest_marker(g) is not None), item.path.name)
        item.add_marker(pytest.mark.xdist_group("spark" if group == "proxy_spark" else group))


def _order(item: pytest.Item) -> tuple[int, int]:
    """The longest group first, so that pytest-xdist hands it out first (``--no-loadscope-reorder``
    keeps this order): (0, ...) the Spark tests, (1, 0) the Hive 4 ones, (2, 0) the rest. Within
    the Spark tests: (0, 0) on the shared SparkSession, (0, 1) on PostgreSQL (a SparkSession of its
    own, built once after the SQLite one is done), (0, 2) ``proxy_spark`` tests, which stop the
    shared SparkSession."""
    if item.get_closest_marker("proxy_spark") is not None:
        return 0, 2
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("spark_store_url") == "postgres":
        return 0, 1
    if item.get_closest_marker("spark") is not None:
        return 0, 0
    return (1, 0) if item.get_closest_marker("hive4") is not None else (2, 0)


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


# Parameters of session and module fixtures, most expensive first: within a module, tests are
# grouped by these in this order, so a module fixture on ``hive4`` is built once per Hive 4 backend.
_PARAM_PRIORITY = ("hive4", "spark_store_url", "backend_url")


def _param_key(item: pytest.Item, first_seen: dict[tuple[str, str], int]) -> tuple[tuple[int, int], ...]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ()
    defs = item._fixtureinfo.name2fixturedefs  # type: ignore[attr-defined]
    names = [
        n for n in callspec.params if n in defs and defs[n][-1].scope in ("session", "package", "module")
    ]
    names.sort(key=lambda n: (_PARAM_PRIORITY.index(n) if n in _PARAM_PRIORITY else len(_PARAM_PRIORITY), n))
    key = []
    for rank, name in enumerate(names):
        value = (name, repr(callspec.params[name]))
        key.append((rank, first_seen.setdefault(value, len(first_seen))))
    return tuple(key)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One order that starts each peer as few times as possible (trylast: after pytest's own
    reordering, which splits modules and so rebuilds their module fixtures once per piece):
    every module's tests together, in file order, grouped within by their session and module
    parameters (:data:`_PARAM_PRIORITY`); the session-parametrized peers themselves are cached
    (:mod:`tests.support.resources`), so switching between modules costs nothing. Tests that need
    another SparkSession run after all those on the shared one (:func:`_order`)."""
    first_seen: dict[tuple[str, str], int] = {}
    keys = {id(item): _param_key(item, first_seen) for item in items}
    position = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda i: (_order(i), str(i.path), keys[id(i)], position[id(i)]))


from tests.hdfs_fixtures import *  # noqa: E402,F401,F403 - the HDFS mini cluster
from tests.hive4_fixtures import *  # noqa: E402,F401,F403 - the Hive 4 metastore peers
from tests.spark_fixtures import *  # noqa: E402,F401,F403 - the shared Spark fixtures
from tests.trino_fixtures import *  # noqa: E402,F401,F403 - the Trino server
