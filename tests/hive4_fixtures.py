"""Session fixtures for the real Hive 4 metastore (:mod:`tests.support.hive4`): one JVM per backend.

``hive4`` is parametrized over ``derby`` and ``postgres`` (a fresh database in the tests' private
PostgreSQL cluster); each JVM starts once per test session, on first use. ``hive4_client`` is a
Thrift client on it. Test modules that use them carry ``pytestmark = pytest.mark.hive4``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.hive4 import Hive4Metastore, require_hive4
from tests.support.servers import ThriftClient

__all__ = ["hive4", "hive4_client"]


@pytest.fixture(scope="session", params=["derby", "postgres"])
def hive4(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hive4Metastore]:
    """The running Hive 4 metastore on ``derby`` or ``postgres`` (schema by Hive's schematool)."""
    from tests import conftest

    require_hive4()
    url = None
    if request.param == "postgres":
        if not conftest.postgres_available():
            pytest.skip(conftest.PG_SKIP_REASON)
        url = conftest.make_pg_database("hive4")
    hms = Hive4Metastore(postgres_url=url, base_dir=tmp_path_factory.mktemp(f"hive4-{request.param}"))
    try:
        hms.start()
        yield hms
    finally:
        hms.stop()
        if url is not None:
            conftest.drop_pg_database(url)


@pytest.fixture()
def hive4_client(hive4: Hive4Metastore) -> Iterator:
    """A Thrift client (``hive_metastore.ThriftHiveMetastore.Client``) on :func:`hive4`."""
    with ThriftClient(hive4.host, hive4.port, timeout_ms=60_000) as client:
        yield client
