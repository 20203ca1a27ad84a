"""The replicator's own store (:class:`hivemesh.replication.state.ReplicationStore`) on SQLite and
PostgreSQL: its Alembic revisions, policy state, leases, objects, txns, the file ledger, and
sharing one database with the remotes store and a metastore (each schema has its version table).

Every test gets a fresh, empty database (a SQLite file, or a new PostgreSQL database): the
session-wide ``backend_url`` database is compared table by table with the metastore schema by
``tests/test_migrations.py``, so these tables must not land in it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from hivemesh.config import ConfigError
from hivemesh.federation.remotes import RemoteStore, database_remote
from hivemesh.hive.constants import now_ms
from hivemesh.metastore.store import Store
from hivemesh.replication import state
from hivemesh.replication.state import FileRecord, ObjectState, ReplicationStore
from hivemesh.storage import sql
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available

HOUR_MS = 3_600_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL: a SQLite file in a not-yet-existing directory, or a new PG database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'replication.db'}"
        return
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database("hivemesh_repl")
    yield url
    drop_pg_database(url)


@pytest.fixture()
def store(store_url: str) -> Iterator[ReplicationStore]:
    s = ReplicationStore(store_url)
    yield s
    s.dispose()


def _head(migrations: Path) -> str:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def _versions(url: str) -> dict[str, list[str]]:
    """The Alembic version tables in the database at ``url`` and the revisions each holds."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                t: [r[0] for r in conn.execute(sa.text(f'SELECT version_num FROM "{t}"'))]
                for t in sa.inspect(conn).get_table_names()
                if t == "alembic_version" or t.endswith("_VERSION")
            }
    finally:
        engine.dispose()


def _no_upgrades(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any Alembic upgrade fail: opening an up-to-date store must not run one."""

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("migrations ran again")

    monkeypatch.setattr(sql.command, "upgrade", refuse)


# ---------------------------------------------------------------------------------------------- schema
def test_revisions_build_the_declared_tables(store: ReplicationStore, store_url: str) -> None:
    """Revision 0001 (explicit ``op.create_table``) builds exactly what ``state.METADATA`` declares:
    names, columns, types, nullability, server defaults and primary keys."""

    def declared_or_foreign(name: str | None, kind: str, _parent: object) -> bool:
        return kind != "table" or name != state.VERSION_TABLE

    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_name": declared_or_foreign,
                },
            )
            diff = compare_metadata(ctx, state.METADATA)
            insp = sa.inspect(conn)
            tables = set(insp.get_table_names())
            pks = {t: insp.get_pk_constraint(t)["constrained_columns"] for t in state.METADATA.tables}
    finally:
        engine.dispose()
    assert diff == []
    assert tables == set(state.METADATA.tables) | {state.VERSION_TABLE}
    assert pks == {name: [c.name for c in t.primary_key.columns] for name, t in state.METADATA.tables.items()}
    assert _versions(store_url) == {state.VERSION_TABLE: [_head(state.MIGRATIONS)]}


def test_reopening_keeps_data_and_runs_no_migration(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = ReplicationStore(store_url)
    first.ensure("p", "src", "dst")
    first.checkpoint("p", 42, 1_700_000_000, 7)
    first.dispose()
    _no_upgrades(monkeypatch)
    again = ReplicationStore(store_url)
    try:
        st = again.get("p")
        assert st is not None and (st.event_id, st.events_applied, st.source) == (42, 7, "src")
    finally:
        again.dispose()
    assert _versions(store_url) == {state.VERSION_TABLE: [_head(state.MIGRATIONS)]}


def test_concurrent_opens_of_a_new_store(store_url: str) -> None:
    """Processes starting together on an empty database: one creates the schema, the others wait
    for it (advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and then find it done."""
    errors: list[BaseException] = []
    stores: list[ReplicationStore] = []

    def open_store() -> None:
        try:
            stores.append(ReplicationStore(store_url))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_store) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for s in stores:
        s.dispose()
    assert errors == [] and len(stores) == 3
    assert _versions(store_url) == {state.VERSION_TABLE: [_head(state.MIGRATIONS)]}


def test_bad_urls_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^replication\.store: .*must start with sqlite:/// or postgresql"
    ) as err:
        ReplicationStore("mysql://u:secret@h/db")
    assert "secret" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^replication\.store: 'not a url' is not a SQLAlchemy URL"):
        ReplicationStore("not a url")
    assert not list(tmp_path.iterdir())


def test_in_memory_store_across_threads() -> None:
    """``sqlite://`` is one connection shared by every thread: reads wait for writes to end."""
    s = ReplicationStore("sqlite://")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(30):
                s.ensure(f"p{n}", "a", "b")
                s.txn_opened(f"p{n}", i)
                assert s.txn_is_open(f"p{n}", i)
                assert s.get(f"p{n}") is not None
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    s.dispose()
    assert errors == []


# ---------------------------------------------------------------------------------------------- policies
def test_ensure_get_update(store: ReplicationStore) -> None:
    assert store.get("p") is None and store.all() == []
    before = now_ms()
    st = store.ensure("p", "eu", "us")
    assert (st.policy, st.source, st.target, st.phase) == ("p", "eu", "us", "new")
    assert (st.event_id, st.events_applied, st.resyncs, st.rules, st.lease_owner) == (None, 0, 0, None, None)
    assert st.updated_ms >= before
    store.update("p", phase="replicating", rules={"b": [1], "a": "x"}, bootstrap_event_id=5, resyncs=2)
    again = store.ensure("p", "eu2", "us2")  # zone names follow the configuration, the rest stays
    assert (again.source, again.target, again.phase) == ("eu2", "us2", "replicating")
    assert again.rules == {"a": "x", "b": [1]} and again.bootstrap_event_id == 5 and again.resyncs == 2
    store.update("p", rules=None)
    assert store.get("p").rules is None  # type: ignore[union-attr]
    store.ensure("a-first", "eu", "us")
    assert [s.policy for s in store.all()] == ["a-first", "p"]


def test_checkpoint_and_errors(store: ReplicationStore) -> None:
    store.ensure("p", "eu", "us")
    store.record_error("p", "boom " + "x" * 5000)
    st = store.get("p")
    assert st is not None and st.last_error is not None and st.last_error.startswith("boom ")
    assert len(st.last_error) == 4000 and st.last_error_ms is not None and st.last_success_ms is None
    store.checkpoint("p", 10, 1_700_000_000, 3)
    st = store.get("p")
    assert st is not None
    assert (st.event_id, st.event_time, st.events_applied, st.last_error) == (10, 1_700_000_000, 3, None)
    assert st.last_success_ms is not None and st.last_success_ms >= st.last_error_ms  # type: ignore[operator]
    store.checkpoint("p", 12, None, 2)
    st = store.get("p")
    assert st is not None and (st.event_id, st.event_time, st.events_applied) == (12, None, 5)
    store.record_error("p", "again")
    assert store.get("p").last_error == "again"  # type: ignore[union-attr]
    assert store.get("p").events_applied == 5  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- leases
def test_lease_acquire_renew_release(store: ReplicationStore) -> None:
    assert not store.acquire("p", "me", HOUR_MS)  # no such policy
    store.ensure("p", "eu", "us")
    me = state.lease_owner()
    other = "elsewhere:1:abc"  # another host: alive until its lease expires
    assert me.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    assert store.acquire("p", me, 1000)
    first = store.get("p")
    assert first is not None and first.lease_owner == me
    assert first.lease_expires_ms is not None and first.lease_expires_ms <= now_ms() + 1000
    assert not store.acquire("p", other, HOUR_MS)
    assert store.acquire("p", me, HOUR_MS)  # renewal
    renewed = store.get("p")
    assert renewed is not None and renewed.lease_owner == me
    assert (
        renewed.lease_expires_ms is not None
        and renewed.lease_expires_ms > first.lease_expires_ms + HOUR_MS // 2
    )
    store.release("p", other)  # not the holder: nothing happens
    assert store.get("p").lease_owner == me  # type: ignore[union-attr]
    store.release("p", me)
    released = store.get("p")
    assert released is not None and (released.lease_owner, released.lease_expires_ms) == (None, None)
    assert store.acquire("p", other, HOUR_MS)
    assert not store.acquire("p", me, HOUR_MS)


def test_lease_of_live_owner_blocks_until_it_expires(store: ReplicationStore) -> None:
    store.ensure("p", "eu", "us")
    live_here = f"{socket.gethostname()}:{os.getpid()}:other"  # this very process: alive
    store.update("p", lease_owner=live_here, lease_expires_ms=now_ms() + HOUR_MS)
    assert not store.acquire("p", "me:1:x", HOUR_MS)
    assert store.get("p").lease_owner == live_here  # type: ignore[union-attr]
    store.update("p", lease_expires_ms=now_ms() - 1)  # expired: free for anyone
    assert store.acquire("p", "me:1:x", HOUR_MS)
    assert store.get("p").lease_owner == "me:1:x"  # type: ignore[union-attr]


def test_lease_of_dead_process_on_this_host_is_taken_over(store: ReplicationStore) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    dead = f"{socket.gethostname()}:{proc.pid}:x"
    store.ensure("p", "eu", "us")
    store.update("p", lease_owner=dead, lease_expires_ms=now_ms() + HOUR_MS)
    assert store.acquire("p", "me:1:x", HOUR_MS)
    assert store.get("p").lease_owner == "me:1:x"  # type: ignore[union-attr]
    # the same pid on another host may well be alive: its lease holds
    store.update(
        "p", lease_owner=f"not-{socket.gethostname()}:{proc.pid}:x", lease_expires_ms=now_ms() + HOUR_MS
    )
    assert not store.acquire("p", "me:1:x", HOUR_MS)


# ---------------------------------------------------------------------------------------------- objects, txns
def test_objects_put_and_drop(store: ReplicationStore) -> None:
    store.ensure("p", "eu", "us")
    store.put_object("p", "sales", "orders", "bootstrapping", 7)
    store.put_object("p", "sales", "", "bootstrapping", 5)
    store.put_object("q", "sales", "orders", "stopped", 1)
    objs = store.objects("p")
    assert [(o.db, o.table, o.state, o.event_id) for o in objs] == [
        ("sales", "", "bootstrapping", 5),
        ("sales", "orders", "bootstrapping", 7),
    ]
    assert all(isinstance(o, ObjectState) and o.updated_ms > 0 for o in objs)
    store.put_object("p", "sales", "orders", "replicating", None)  # replaces, no duplicate key
    assert [(o.table, o.state, o.event_id) for o in store.objects("p")] == [
        ("", "bootstrapping", 5),
        ("orders", "replicating", None),
    ]
    store.drop_object("p", "sales", "")
    assert [(o.db, o.table) for o in store.objects("p")] == [("sales", "orders")]
    store.drop_object("p", "sales", "missing")  # nothing to drop: no error
    assert [(o.table, o.state) for o in store.objects("q")] == [("orders", "stopped")]


def test_txns(store: ReplicationStore) -> None:
    assert not store.txn_is_open("p", 11)
    store.txn_opened("p", 11)
    store.txn_opened("p", 11)  # twice (a replayed event): still one row
    store.txn_opened("p", 2**40)  # source txn ids are 64-bit
    assert store.txn_is_open("p", 11) and store.txn_is_open("p", 2**40)
    assert not store.txn_is_open("q", 11)
    store.txn_ended("p", 11)
    assert not store.txn_is_open("p", 11) and store.txn_is_open("p", 2**40)
    store.txn_ended("p", 11)  # already ended: no error
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(state.TXNS)).scalar() == 1


# ---------------------------------------------------------------------------------------------- ledger
def _rec(path: str, size: int = 1, mtime: int | None = 100, checksum: str = "0" * 32) -> FileRecord:
    return FileRecord(path, size, mtime, checksum)


def test_ledger_prefix_semantics(store: ReplicationStore) -> None:
    store.record_files(
        "p",
        [_rec("/a/b/f1"), _rec("/a/b/sub/f2", mtime=None), _rec("/a/bc/x"), _rec("/a/b"), _rec("/z/a/b/f")],
    )
    store.record_files("q", [_rec("/a/b/other")])
    store.record_files("p", [])  # nothing: no error
    assert set(store.ledger("p", "/a/b")) == {"/a/b/f1", "/a/b/sub/f2"}
    assert store.ledger("p", "/a/b/") == store.ledger("p", "/a/b")
    assert store.ledger("p", "/a/b")["/a/b/sub/f2"] == _rec("/a/b/sub/f2", mtime=None)
    assert set(store.ledger("p", "/a")) == {"/a/b/f1", "/a/b/sub/f2", "/a/bc/x", "/a/b"}
    assert store.ledger("p", "/nothing") == {}
    store.record_files("p", [_rec("/a/b/f1", size=2**40, mtime=2**62, checksum="f" * 32)])  # replaced
    assert store.ledger("p", "/a/b")["/a/b/f1"] == FileRecord("/a/b/f1", 2**40, 2**62, "f" * 32)

    store.forget_files("p", ["/a/b/f1", "/a/never"])
    assert set(store.ledger("p", "/a/b")) == {"/a/b/sub/f2"}
    store.forget_files("p", under="/a/b")
    assert store.ledger("p", "/a/b") == {}
    assert set(store.ledger("p", "/a")) == {"/a/bc/x", "/a/b"}  # neither the sibling nor the dir entry
    assert set(store.ledger("p", "/z")) == {"/z/a/b/f"}
    assert set(store.ledger("q", "/a/b")) == {"/a/b/other"}  # another policy's ledger


def test_ledger_paths_with_like_wildcards(store: ReplicationStore) -> None:
    store.record_files(
        "p", [_rec("/wh/t_1/f"), _rec("/wh/tx1/f"), _rec("/wh/d=1%3A00/f"), _rec("/wh/d=1xx3A00/f")]
    )
    assert set(store.ledger("p", "/wh/t_1")) == {"/wh/t_1/f"}
    assert set(store.ledger("p", "/wh/d=1%3A00")) == {"/wh/d=1%3A00/f"}
    store.forget_files("p", under="/wh/t_1")
    assert set(store.ledger("p", "/wh/tx1")) == {"/wh/tx1/f"}


def test_forget_policy(store: ReplicationStore) -> None:
    for policy in ("p", "q"):
        store.ensure(policy, "eu", "us")
        store.put_object(policy, "db", "t", "bootstrapping", 1)
        store.txn_opened(policy, 5)
        store.record_files(policy, [_rec("/a/f")])
    store.forget("p")
    assert store.get("p") is None and store.objects("p") == []
    assert not store.txn_is_open("p", 5) and store.ledger("p", "/a") == {}
    assert store.get("q") is not None and len(store.objects("q")) == 1
    assert store.txn_is_open("q", 5) and set(store.ledger("q", "/a")) == {"/a/f"}
    store.forget("never-ran")  # no error
    assert [s.policy for s in store.all()] == ["q"]


# ---------------------------------------------------------------------------------------------- sharing
def test_stores_share_one_database(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replicator's store, the proxy's remotes and a metastore in one database: each schema
    keeps its revision in its own version table, none upgrades another."""
    from hivemesh.federation.remotes import store as remotes_store
    from hivemesh.metastore import store as metastore_store

    repl = ReplicationStore(store_url)
    remotes = RemoteStore(store_url)
    meta = Store(store_url, pool_size=2)
    try:
        repl.ensure("p", "eu", "us")
        spec = database_remote("d", {"hivemesh.remote.uris": "thrift://h:9083"})
        assert spec is not None
        remotes.add(spec)
        with meta.write() as conn:
            conn.execute(
                sa.text('INSERT INTO "CTLGS" ("CTLG_ID", "NAME", "LOCATION_URI") VALUES (77, \'x\', \'/x\')')
            )
        with meta.read() as conn:
            assert conn.execute(sa.text('SELECT "NAME" FROM "CTLGS" WHERE "CTLG_ID" = 77')).scalar() == "x"
            if meta.dialect == "postgresql":  # metastore reads: one snapshot per call
                assert conn.execute(sa.text("SHOW transaction_isolation")).scalar() == "repeatable read"
        if meta.dialect == "postgresql":
            assert meta.read_engine is not meta.engine
            with meta.write() as conn:
                assert conn.execute(sa.text("SHOW transaction_isolation")).scalar() == "read committed"
            with repl.read() as conn:  # other stores read at READ COMMITTED
                assert conn.execute(sa.text("SHOW transaction_isolation")).scalar() == "read committed"
        else:
            assert meta.read_engine is meta.engine
    finally:
        for s in (repl, remotes, meta):
            s.dispose()
    assert _versions(store_url) == {
        state.VERSION_TABLE: [_head(state.MIGRATIONS)],
        remotes_store.VERSION_TABLE: [_head(remotes_store.MIGRATIONS)],
        "alembic_version": [_head(metastore_store.MIGRATIONS)],
    }

    _no_upgrades(monkeypatch)  # reopened in another order: every schema is already current
    meta = Store(store_url, pool_size=2)
    remotes = RemoteStore(store_url)
    repl = ReplicationStore(store_url)
    try:
        assert repl.get("p") is not None
        assert [s.local_name for s in remotes.list()] == ["d"]
        with meta.read() as conn:
            assert conn.execute(sa.text('SELECT count(*) FROM "CTLGS" WHERE "CTLG_ID" = 77')).scalar() == 1
    finally:
        for s in (repl, remotes, meta):
            s.dispose()
