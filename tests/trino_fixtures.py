"""Session fixture for the Trino server (:mod:`tests.support.trino`): one JVM per test session.

Shared by every module that queries Trino (``tests/test_trino.py``, ``tests/test_live_peers.py``),
so a run starts it once: a fixture defined in a test module and imported into another would be a
second fixture, and a second Trino JVM. Catalogs are added with ``CREATE CATALOG`` per metastore;
``server.catalogs`` holds the names made so far.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.trino import TrinoServer, require_trino

__all__ = ["trino_server"]


@pytest.fixture(scope="session")
def trino_server() -> Iterator[TrinoServer]:
    """The session's Trino server (skips without it and Java 24+, fails under ``CI=true``)."""
    require_trino()
    server = TrinoServer().start()
    server.catalogs = set()  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()
