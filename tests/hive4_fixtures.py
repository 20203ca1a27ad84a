"""Session fixtures for the real Hive 4 metastore (:mod:`tests.support.hive4`): one JVM per backend.

``hive4`` is parametrized over ``derby`` and ``postgres`` (a fresh database in the tests' private
PostgreSQL cluster); each JVM starts once per test session, on first use, and stays up until the
session ends. ``hive4_client`` is a Thrift client on it. Test modules that use them carry ``pytestmark = pytest.mark.hive4``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from tests.support.hive4 import Hive4Metastore, require_hive4
from tests.support.resources import SessionResources
from tests.support.servers import ThriftClient

__all__ = ["hive4", "hive4_client"]


@contextmanager
def _hive4(db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hive4Metastore]:
    from tests import conftest

    require_hive4()
    with ExitStack() as stack:
        url = stack.enter_context(conftest.pg_database("hive4")) if db == "postgres" else None
        hms = Hive4Metastore(postgres_url=url, base_dir=tmp_path_factory.mktemp(f"hive4-{db}"))
        try:
            hms.start()
            yield hms
        finally:
            hms.stop()


@pytest.fixture(scope="session", params=["derby", pytest.param("postgres", marks=pytest.mark.postgres)])
def hive4(
    request: pytest.FixtureRequest,
    session_resources: SessionResources,
    tmp_path_factory: pytest.TempPathFactory,
) -> Hive4Metastore:
    """The running Hive 4 metastore on ``derby`` or ``postgres`` (schema by Hive's schematool),
    each started once per test session (:mod:`tests.support.resources`)."""
    return session_resources.get(("hive4", request.param), lambda: _hive4(request.param, tmp_path_factory))


@pytest.fixture()
def hive4_client(hive4: Hive4Metastore) -> Iterator:
    """A Thrift client (``hive_metastore.ThriftHiveMetastore.Client``) on :func:`hive4`."""
    with ThriftClient(hive4.host, hive4.port, timeout_ms=60_000) as client:
        yield client
