"""The metastore's PostgreSQL pool: no ping on a busy connection, and dead connections replaced.

A pooled connection is pinged only when it sat idle for more than ``IDLE_PING_S``
(:func:`hivemesh.storage.sql.ping_when_idle`), so a busy server spends no round trip on pings.
These tests count the pings, then cut every connection of the store from the server side
(``pg_terminate_backend``, what a PostgreSQL restart or a failover does to a pool) and check the
metastore carries on: after an idle spell without a single failed call, right away with at most one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from hive_metastore.ttypes import Database

from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.store import Store
from hivemesh.storage.sql import IDLE_PING_S
from tests.conftest import pg_admin_url, pg_database


@pytest.fixture()
def metastore(tmp_path: Path) -> Iterator[tuple[LocalMetastore, str]]:
    with pg_database("hivemesh_reconnect") as url:
        store = Store(url)
        handler = LocalMetastore(store, str(tmp_path / "warehouse"))
        handler.create_database(Database(name="r", description="", parameters={}))
        try:
            yield handler, url
        finally:
            store.dispose()


@pytest.fixture()
def pings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pings the PostgreSQL dialect sends (one entry per ping)."""
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    seen: list[int] = []
    original = PGDialect_psycopg.do_ping

    def counted(self: PGDialect_psycopg, dbapi_connection: object) -> bool:
        seen.append(1)
        return original(self, dbapi_connection)

    monkeypatch.setattr(PGDialect_psycopg, "do_ping", counted)
    return seen


def _cut_connections(url: str) -> int:
    """Terminate every server process serving the database of ``url``; returns how many."""
    name = url.rsplit("/", 1)[1]
    eng = sa.create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            return len(
                c.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :d AND pid <> pg_backend_pid()"
                    ),
                    {"d": name},
                ).all()
            )
    finally:
        eng.dispose()


def _busy(handler: LocalMetastore, calls: int) -> None:
    """``calls`` get_database calls from 4 threads at once (so several pooled connections are used)."""
    with ThreadPoolExecutor(4) as pool:
        names = list(pool.map(lambda _: handler.get_database("r").name, range(calls)))
    assert names == ["r"] * calls


def test_busy_connections_are_not_pinged(metastore: tuple[LocalMetastore, str], pings: list[int]) -> None:
    handler, _ = metastore
    _busy(handler, 200)
    assert pings == [], f"{len(pings)} pings for 200 back-to-back calls"
    time.sleep(IDLE_PING_S + 0.5)
    handler.get_database("r")
    assert len(pings) == 1, "a connection idle for longer than IDLE_PING_S is pinged once before use"


def test_dead_connections_after_an_idle_spell_are_replaced_without_an_error(
    metastore: tuple[LocalMetastore, str], pings: list[int]
) -> None:
    handler, url = metastore
    _busy(handler, 40)
    assert _cut_connections(url) >= 1
    time.sleep(IDLE_PING_S + 0.5)
    _busy(handler, 40)  # every call succeeds: the pings found the dead connections
    assert pings, "the idle, dead connections were pinged"
    handler.alter_database("r", Database(name="r", description="after the cut", parameters={}))
    assert handler.get_database("r").description == "after the cut"


def test_dead_connections_right_away_fail_at_most_one_call(metastore: tuple[LocalMetastore, str]) -> None:
    handler, url = metastore
    _busy(handler, 40)
    assert _cut_connections(url) >= 1
    outcomes: list[str] = []
    for _ in range(10):
        try:
            handler.get_database("r")
            outcomes.append("ok")
        except sa.exc.OperationalError:
            outcomes.append("failed")
    assert outcomes.count("failed") <= 1, outcomes
    assert outcomes[-9:] == ["ok"] * 9, outcomes
