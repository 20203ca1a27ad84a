"""Remotes as data: parsing and validation of hivemesh.remote.* properties, RemoteStore on SQLite
and PostgreSQL, and the ``hivemesh remote`` CLI (real click group, tmp SQLite store)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hivemesh.federation.remote_cli import remote
from hivemesh.federation.remotes import (
    RemoteError,
    RemoteExistsError,
    RemoteSpec,
    RemoteStore,
    database_remote,
    table_remote,
)
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available

URI = "thrift://eu-hms:9083"
SSH = {
    "hivemesh.remote.via": "ssh",
    "hivemesh.remote.uris": "thrift://metastore.domain:9083",
    "ssh.tunnel.route": "bastionuser@bastion-host.domain -> user@cluster-node.domain",
    "ssh.tunnel.private.keys": "/home/user/.ssh/a.pem, /home/user/.ssh/b.pem",
    "ssh.tunnel.known.hosts": "/home/user/.ssh/known_hosts",
}


# ---------------------------------------------------------------------------------------------- parsing
def test_not_a_remote() -> None:
    assert database_remote("db", None) is None
    assert database_remote("db", {}) is None
    assert database_remote("db", {"comment": "x", "ssh.tunnel.route": "a@b"}) is None
    assert table_remote("db", "t", {"transient_lastDdlTime": "1", "glue.region": "eu-west-1"}) is None


def test_database_defaults() -> None:
    s = database_remote("Sales_EU", {"hivemesh.remote.uris": URI})
    assert s is not None
    assert (s.kind, s.local_db, s.local_table, s.remote_db, s.remote_table) == (
        "database",
        "sales_eu",
        None,
        "sales_eu",
        None,
    )
    assert s.via == "thrift" and s.uris == (URI,)
    assert s.local_name == "sales_eu" and s.owner is None and s.create_time == 0
    assert dict(s.properties) == {"hivemesh.remote.uris": URI}


def test_database_remote_name_and_uris_list() -> None:
    s = database_remote(
        "sales_eu",
        {
            "hivemesh.remote.uris": " thrift://a:9083 , thrift://b:9084 ",
            "hivemesh.remote.database": "Sales",
            "hivemesh.remote.via": "THRIFT",
        },
        owner="ann",
    )
    assert s is not None
    assert s.remote_db == "sales" and s.via == "thrift" and s.owner == "ann"
    assert s.uris == ("thrift://a:9083", "thrift://b:9084")


def test_database_via_only_is_a_remote() -> None:
    s = database_remote("gl", {"hivemesh.remote.via": "glue"})
    assert s is not None and s.via == "glue" and s.uris == () and s.remote_db == "gl"


def test_table_defaults() -> None:
    s = table_remote("DB", "T", {"hivemesh.remote.uris": URI})
    assert s is not None
    assert (s.kind, s.local_db, s.local_table, s.remote_db, s.remote_table) == ("table", "db", "t", "db", "t")
    assert s.local_name == "db.t" and s.remote_name == "db.t"


def test_table_qualified_and_bare_remote_names() -> None:
    s = table_remote(
        "db", "t", {"hivemesh.remote.table": "remote_db.Remote_Tbl", "hivemesh.remote.uris": URI}
    )
    assert s is not None and (s.remote_db, s.remote_table) == ("remote_db", "remote_tbl")
    s = table_remote("db", "t", {"hivemesh.remote.table": "other", "hivemesh.remote.uris": URI})
    assert s is not None and (s.remote_db, s.remote_table) == ("db", "other")
    s = table_remote(
        "db",
        "t",
        {"hivemesh.remote.table": "other", "hivemesh.remote.database": "rdb", "hivemesh.remote.uris": URI},
    )
    assert s is not None and (s.remote_db, s.remote_table) == ("rdb", "other")
    s = table_remote("db", "t", {"hivemesh.remote.database": "rdb", "hivemesh.remote.uris": URI})
    assert s is not None and (s.remote_db, s.remote_table) == ("rdb", "t")


def test_table_with_only_remote_table_needs_uris() -> None:
    with pytest.raises(RemoteError, match=r"hivemesh\.remote\.uris is required for via 'thrift'"):
        table_remote("db", "t", {"hivemesh.remote.table": "r.t"})


def test_ssh_remote() -> None:
    s = database_remote("d", SSH)
    assert s is not None and s.via == "ssh"
    cfg = s.ssh_tunnel_config()
    assert cfg is not None
    assert cfg.route == "bastionuser@bastion-host.domain -> user@cluster-node.domain"
    assert cfg.private_keys == ["/home/user/.ssh/a.pem", "/home/user/.ssh/b.pem"]
    assert cfg.known_hosts == "/home/user/.ssh/known_hosts"
    assert cfg.port == 22 and cfg.strict_host_key_checking is True
    s2 = database_remote(
        "d", {**SSH, "ssh.tunnel.port": "2222", "ssh.tunnel.strict.host.key.checking": "FALSE"}
    )
    assert s2 is not None
    cfg2 = s2.ssh_tunnel_config()
    assert cfg2 is not None and cfg2.port == 2222 and cfg2.strict_host_key_checking is False
    assert s.glue_config() is None


def test_glue_remote_without_uris() -> None:
    s = table_remote(
        "db",
        "t",
        {
            "hivemesh.remote.via": "glue",
            "hivemesh.remote.table": "gdb.gt",
            "glue.region": "eu-west-1",
            "glue.account.id": "123456789012",
            "glue.endpoint": "http://127.0.0.1:5000",
        },
    )
    assert s is not None and s.uris == () and (s.remote_db, s.remote_table) == ("gdb", "gt")
    g = s.glue_config()
    assert g is not None
    assert (g.region, g.glue_account_id, g.glue_endpoint) == (
        "eu-west-1",
        "123456789012",
        "http://127.0.0.1:5000",
    )
    default = database_remote("d", {"hivemesh.remote.via": "glue"})
    assert default is not None and default.glue_config().region == "us-east-1"  # type: ignore[union-attr]
    assert s.ssh_tunnel_config() is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"hivemesh.remote.uri": URI}, r"unknown property 'hivemesh\.remote\.uri'; a remote database takes"),
        (
            {"hivemesh.remote.uris": URI, "hivemesh.remote.table": "a.b"},
            r"unknown property 'hivemesh\.remote\.table'",
        ),
        ({"Hivemesh.Remote.URIS": URI}, r"unknown property 'Hivemesh\.Remote\.URIS'"),
        ({"hivemesh.remote.uris": ""}, r"hivemesh\.remote\.uris must not be empty"),
        (
            {"hivemesh.remote.uris": URI, "hivemesh.remote.via": "jdbc"},
            r"via must be thrift, ssh or glue \(got 'jdbc'\)",
        ),
        ({"hivemesh.remote.uris": "eu-hms:9083"}, r"'eu-hms:9083' is not thrift://host:port"),
        ({"hivemesh.remote.uris": "thrift://h:99999"}, r"'thrift://h:99999' is not thrift://host:port"),
        ({"hivemesh.remote.uris": "thrift://a:1,,thrift://b:2"}, r"'' is not thrift://host:port"),
        ({"hivemesh.remote.uris": "http://h:9083"}, r"'http://h:9083' is not thrift://host:port"),
        ({"hivemesh.remote.database": "sales"}, r"hivemesh\.remote\.uris is required for via 'thrift'"),
        (
            {"hivemesh.remote.via": "ssh", "hivemesh.remote.uris": URI},
            r"ssh\.tunnel\.route is required for via 'ssh'",
        ),
        (
            {"hivemesh.remote.via": "ssh", "ssh.tunnel.route": "u@h"},
            r"hivemesh\.remote\.uris is required for via 'ssh'",
        ),
        (
            {**SSH, "ssh.tunnel.route": "bastion -> u@h"},
            r"ssh\.tunnel\.route: hop 'bastion' must be user@host",
        ),
        ({**SSH, "ssh.tunnel.port": "0"}, r"ssh\.tunnel\.port must be a port 1-65535 \(got '0'\)"),
        ({**SSH, "ssh.tunnel.port": "ssh"}, r"ssh\.tunnel\.port must be a port"),
        (
            {**SSH, "ssh.tunnel.strict.host.key.checking": "yes"},
            r"strict\.host\.key\.checking must be true or false",
        ),
        (
            {**SSH, "ssh.tunnel.knownhosts": "x"},
            r"unknown property 'ssh\.tunnel\.knownhosts'; ssh remotes take",
        ),
        (
            {"hivemesh.remote.uris": URI, "ssh.tunnel.route": "u@h"},
            r"ssh\.tunnel\.route is only used with hivemesh\.remote\.via='ssh'",
        ),
        (
            {"hivemesh.remote.uris": URI, "glue.region": "eu-west-1"},
            r"glue\.region is only used with hivemesh\.remote\.via='glue'",
        ),
        (
            {"hivemesh.remote.via": "glue", "glue.regoin": "eu-west-1"},
            r"unknown property 'glue\.regoin'; glue remotes take",
        ),
        ({"hivemesh.remote.via": "glue", "glue.region": "Europe"}, r"glue\.region must be an AWS region"),
        ({"hivemesh.remote.via": "glue", "glue.account.id": "42"}, r"glue\.account\.id must be a 12-digit"),
        (
            {"hivemesh.remote.via": "glue", "glue.endpoint": "glue.aws"},
            r"glue\.endpoint must be an http\(s\):// URL",
        ),
        (
            {"hivemesh.remote.uris": URI, "hivemesh.remote.database": "a.b"},
            r"hivemesh\.remote\.database: 'a\.b' is not a valid name",
        ),
        ({"hivemesh.remote.uris": URI, "hivemesh.remote.database": "a b"}, r"'a b' is not a valid name"),
    ],
)
def test_database_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(RemoteError, match=message) as exc:
        database_remote("sales_eu", params)
    assert str(exc.value).startswith("remote database sales_eu: ")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"hivemesh.remote.tabel": "a.b", "hivemesh.remote.uris": URI},
            r"unknown property 'hivemesh\.remote\.tabel'; a remote table takes",
        ),
        (
            {"hivemesh.remote.table": "a.b.c", "hivemesh.remote.uris": URI},
            r"must be 'table' or 'database\.table' \(got 'a\.b\.c'\)",
        ),
        (
            {"hivemesh.remote.table": ".b", "hivemesh.remote.uris": URI},
            r"hivemesh\.remote\.table: '\.b' is not a valid name",
        ),
        (
            {"hivemesh.remote.table": "a.", "hivemesh.remote.uris": URI},
            r"hivemesh\.remote\.table: 'a\.' is not a valid name",
        ),
        (
            {"hivemesh.remote.table": "  ", "hivemesh.remote.uris": URI},
            r"hivemesh\.remote\.table must not be empty",
        ),
        (
            {"hivemesh.remote.table": "x.t", "hivemesh.remote.database": "y", "hivemesh.remote.uris": URI},
            r"hivemesh\.remote\.table names database 'x' but hivemesh\.remote\.database is 'y'",
        ),
    ],
)
def test_table_errors(params: dict[str, str], message: str) -> None:
    with pytest.raises(RemoteError, match=message) as exc:
        table_remote("db", "t", params)
    assert str(exc.value).startswith("remote table db.t: ")


def test_bad_local_names() -> None:
    with pytest.raises(RemoteError, match="database name ''"):
        database_remote("", {"hivemesh.remote.uris": URI})
    with pytest.raises(RemoteError, match="table name 'a.b'"):
        table_remote("db", "a.b", {"hivemesh.remote.uris": URI})


def test_remote_error_is_value_error() -> None:
    assert issubclass(RemoteError, ValueError) and issubclass(RemoteExistsError, RemoteError)


# ------------------------------------------------------------------------------------ described/keys
def test_described_parameters_database() -> None:
    s = database_remote("sales_eu", {"hivemesh.remote.uris": "thrift://a:1, thrift://b:2"})
    assert s is not None
    assert s.described_parameters() == {
        "hivemesh.remote.via": "thrift",
        "hivemesh.remote.uris": "thrift://a:1,thrift://b:2",
        "hivemesh.remote.database": "sales_eu",
    }


def test_described_parameters_table_and_connector_props() -> None:
    s = table_remote("db", "t", {**SSH, "hivemesh.remote.table": "tbl"})
    assert s is not None
    assert s.described_parameters() == {
        "hivemesh.remote.via": "ssh",
        "hivemesh.remote.uris": "thrift://metastore.domain:9083",
        "hivemesh.remote.database": "db",
        "hivemesh.remote.table": "db.tbl",
        "ssh.tunnel.route": SSH["ssh.tunnel.route"],
        "ssh.tunnel.private.keys": SSH["ssh.tunnel.private.keys"],
        "ssh.tunnel.known.hosts": SSH["ssh.tunnel.known.hosts"],
    }
    g = database_remote("g", {"hivemesh.remote.via": "glue", "glue.region": "eu-west-1"})
    assert g is not None
    assert g.described_parameters() == {
        "hivemesh.remote.via": "glue",
        "hivemesh.remote.database": "g",
        "glue.region": "eu-west-1",
    }


@pytest.mark.parametrize("kind", ["database", "table"])
def test_described_parameters_parse_back_to_the_same_remote(kind: str) -> None:
    params = {**SSH, "hivemesh.remote.database": "rdb"}
    s = database_remote("d", params) if kind == "database" else table_remote("d", "t", params)
    assert s is not None
    again = (
        database_remote("d", s.described_parameters())
        if kind == "database"
        else table_remote("d", "t", s.described_parameters())
    )
    assert again is not None
    assert (again.remote_db, again.remote_table, again.via, again.uris) == (
        s.remote_db,
        s.remote_table,
        s.via,
        s.uris,
    )
    assert again.connector_key() == s.connector_key()


def test_connector_key_sharing() -> None:
    a = database_remote("a", {"hivemesh.remote.uris": URI, "hivemesh.remote.database": "x"})
    b = table_remote("b", "t", {"hivemesh.remote.uris": URI, "hivemesh.remote.table": "y.z"})
    c = database_remote("c", {"hivemesh.remote.uris": "thrift://other:9083"})
    d = database_remote("d", {"hivemesh.remote.uris": f"thrift://other:9083,{URI}"})
    assert a and b and c and d
    assert a.connector_key() == b.connector_key()
    assert len({a.connector_key(), b.connector_key(), c.connector_key(), d.connector_key()}) == 3

    s1 = database_remote("s1", SSH)
    s2 = database_remote(
        "s2",
        {
            **SSH,
            "ssh.tunnel.port": "22",
            "ssh.tunnel.route": "bastionuser@bastion-host.domain->user@cluster-node.domain",
        },
    )
    s3 = database_remote("s3", {**SSH, "ssh.tunnel.port": "2222"})
    plain = database_remote("p", {"hivemesh.remote.uris": SSH["hivemesh.remote.uris"]})
    assert s1 and s2 and s3 and plain
    assert s1.connector_key() == s2.connector_key()  # defaults and spacing normalised
    assert s1.connector_key() != s3.connector_key()
    assert s1.connector_key() != plain.connector_key()

    g1 = database_remote("g1", {"hivemesh.remote.via": "glue"})
    g2 = database_remote("g2", {"hivemesh.remote.via": "glue", "glue.region": "us-east-1"})
    g3 = database_remote("g3", {"hivemesh.remote.via": "glue", "glue.region": "eu-west-1"})
    assert g1 and g2 and g3
    assert g1.connector_key() == g2.connector_key() != g3.connector_key()


def test_spec_is_frozen_hashable_and_comparable() -> None:
    a = database_remote("a", {"hivemesh.remote.uris": URI})
    b = database_remote("A", {"hivemesh.remote.uris": URI})
    assert a is not None and a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a.properties == {"hivemesh.remote.uris": URI}
    with pytest.raises(TypeError):
        a.properties["x"] = "y"  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.via = "ssh"  # type: ignore[misc]
    direct = RemoteSpec("database", "a", None, "a", None, "thrift", [URI], {"hivemesh.remote.uris": URI})  # type: ignore[arg-type]
    assert direct == a and direct.uris == (URI,)


# ---------------------------------------------------------------------------------------------- store
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store URL: a SQLite file in a not-yet-existing directory, or a new PG database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nested' / 'proxy.db'}"
        return
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database("hivemesh_remotes")
    yield url
    drop_pg_database(url)


def _db(name: str, **extra: str) -> RemoteSpec:
    s = database_remote(name, {"hivemesh.remote.uris": URI, **extra}, owner="ann")
    assert s is not None
    return s


def _tbl(db: str, name: str, **extra: str) -> RemoteSpec:
    s = table_remote(db, name, {"hivemesh.remote.uris": URI, **extra})
    assert s is not None
    return s


def test_store_add_get_list_and_reopen(store_url: str) -> None:
    store = RemoteStore(store_url)
    try:
        assert store.list() == []
        added = store.add(_db("sales_eu", **{"hivemesh.remote.database": "sales"}))
        assert added.create_time > 0
        ssh = database_remote("tunnelled", SSH)
        assert ssh is not None
        ssh = store.add(ssh)
        store.add(_tbl("local", "t", **{"hivemesh.remote.table": "rdb.rt"}))
        store.add(_tbl("local", "a"))
        got = store.get("SALES_EU")
        assert got == added and got.owner == "ann" and got.remote_db == "sales"
        assert store.get("sales_eu", "x") is None and store.get("nope") is None
        t = store.get("local", "T")
        assert t is not None and (t.remote_db, t.remote_table, t.local_name) == ("rdb", "rt", "local.t")
    finally:
        store.close()

    reopened = RemoteStore(store_url)
    try:
        specs = reopened.list()
        assert [s.local_name for s in specs] == ["local.a", "local.t", "sales_eu", "tunnelled"]
        tun = reopened.get("tunnelled")
        assert tun is not None and tun == ssh and tun.properties == ssh.properties
        assert tun.connector_key() == ssh.connector_key()
        assert tun.described_parameters() == ssh.described_parameters()
        g = database_remote("g", {"hivemesh.remote.via": "glue"})
        assert g is not None
        reopened.add(g)
        assert reopened.get("g").uris == ()  # type: ignore[union-attr]
    finally:
        reopened.close()


def test_store_duplicates(store_url: str) -> None:
    with RemoteStore(store_url) as store:
        store.add(_db("d"))
        with pytest.raises(RemoteExistsError, match="remote d already exists"):
            store.add(_db("D", **{"hivemesh.remote.database": "other"}))
        store.add(_tbl("x", "t"))
        with pytest.raises(RemoteExistsError, match=r"remote x\.t already exists"):
            store.add(_tbl("x", "t"))
        with pytest.raises(RemoteExistsError, match="d is a remote database"):
            store.add(_tbl("d", "t"))
        with pytest.raises(RemoteError, match=r"database x holds table links \(t\)"):
            store.add(_db("x"))
        assert [s.local_name for s in store.list()] == ["d", "x.t"]


def test_store_drop_and_drop_database_links(store_url: str) -> None:
    with RemoteStore(store_url) as store:
        store.add(_db("d"))
        store.add(_tbl("x", "t1"))
        store.add(_tbl("x", "t2"))
        store.add(_tbl("xy", "t1"))
        assert store.drop("x", "T1") is True
        assert store.drop("x", "t1") is False
        assert store.drop("x") is False  # no database link named x
        assert store.drop_database_links("X") == 1
        assert store.drop_database_links("x") == 0
        assert store.drop_database_links("d") == 1
        assert [s.local_name for s in store.list()] == ["xy.t1"]
        store.add(_db("x"))  # x holds no table links any more
        store.add(_tbl("x2", "a"))
        assert store.drop_database_links("x") == 1
        assert store.drop("d") is False


def test_two_stores_share_one_database(store_url: str) -> None:
    """Two proxies on one store: each sees the other's links, one add of a name wins."""
    a, b = RemoteStore(store_url), RemoteStore(store_url)
    try:
        a.add(_db("d"))
        assert b.get("d") is not None
        with pytest.raises(RemoteExistsError):
            b.add(_db("d"))
        errors: list[BaseException] = []
        done: list[str] = []
        barrier = threading.Barrier(8)

        def racer(store: RemoteStore) -> None:
            barrier.wait()
            try:
                done.append(store.add(_tbl("race", "t")).local_name)
            except RemoteExistsError as e:
                errors.append(e)

        threads = [threading.Thread(target=racer, args=(s,)) for s in (a, b) * 4]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert done == ["race.t"] and len(errors) == 7
        assert b.drop("d") and a.get("d") is None
    finally:
        a.close()
        b.close()


@pytest.mark.postgres
def test_pg_lost_race_unique_violation_becomes_exists() -> None:
    """A concurrent add the pre-check cannot see yet (uncommitted at READ COMMITTED) still ends in
    RemoteExistsError, from the unique constraint, once the other transaction commits."""
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    import time

    import sqlalchemy as sa

    from hivemesh.federation.remotes import store as mod

    url = make_pg_database("hivemesh_remotes")
    store = RemoteStore(url)
    other = sa.create_engine(url)
    try:
        spec = _db("d")
        outcome: list[BaseException] = []
        with other.connect() as conn:
            tx = conn.begin()
            conn.execute(sa.insert(mod.REMOTES).values(**mod._row(dataclasses.replace(spec, create_time=1))))

            def add() -> None:
                try:
                    store.add(spec)
                except BaseException as e:
                    outcome.append(e)

            th = threading.Thread(target=add)
            th.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the add waits on the uncommitted unique key
                waiting = conn.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock'"
                    )
                ).scalar()
                if waiting:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the add never waited on the other transaction")
            tx.commit()
            th.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], RemoteExistsError)
        assert isinstance(outcome[0].__cause__, sa.exc.IntegrityError)
        assert [s.local_name for s in store.list()] == ["d"]
    finally:
        store.close()
        other.dispose()
        drop_pg_database(url)


def test_store_bad_urls(tmp_path: Path) -> None:
    from hivemesh.config import ConfigError

    with pytest.raises(ConfigError, match="must start with sqlite:/// or postgresql"):
        RemoteStore("mysql://u@h/db")
    with pytest.raises(ConfigError, match="is not a SQLAlchemy URL"):
        RemoteStore("not a url")
    with RemoteStore("sqlite://") as mem:  # in-memory works too
        mem.add(_db("d"))
        assert [s.local_name for s in mem.list()] == ["d"]


# ---------------------------------------------------------------------------------------------- CLI
@pytest.fixture()
def cli_store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli' / 'proxy.db'}"


def _run(*args: str) -> Result:
    return CliRunner().invoke(remote, list(args), catch_exceptions=False)


def test_cli_add_list_drop(cli_store: str) -> None:
    r = _run(
        "add",
        "sales_eu",
        "--uris",
        URI,
        "--remote",
        "sales",
        "--store",
        cli_store,
        "--owner",
        "ann",
        "--no-check",
    )
    assert r.exit_code == 0, r.output
    assert "added remote database sales_eu -> sales via thrift (thrift://eu-hms:9083)" in r.output
    r = _run(
        "add",
        "Local.T",
        "--uris",
        "thrift://h:9083",
        "--remote",
        "remote_db.remote_tbl",
        "--store",
        cli_store,
        "--no-check",
    )
    assert r.exit_code == 0, r.output
    assert "added remote table local.t -> remote_db.remote_tbl" in r.output
    r = _run(
        "add", "tun", "--via", "ssh", "--uris", "thrift://m:9083", "--store", cli_store,
        "--property", "ssh.tunnel.route=u@bastion -> u@node", "--property", "ssh.tunnel.port=2222", "--no-check",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    r = _run(
        "add",
        "gl",
        "--via",
        "glue",
        "--property",
        "glue.region=eu-west-1",
        "--store",
        cli_store,
        "--no-check",
    )
    assert r.exit_code == 0, r.output

    r = _run("list", "--store", cli_store)
    assert r.exit_code == 0, r.output
    out = r.output
    for text in (
        "local name",
        "remote name",
        "sales_eu",
        "sales",
        "local.t",
        "remote_db.remote_tbl",
        "glue",
        "ssh",
    ):
        assert text in out
    assert out.index("gl ") < out.index("local.t") < out.index("sales_eu") < out.index("tun ")

    r = _run("list", "--store", cli_store, "--json")
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert [row["local_name"] for row in rows] == ["gl", "local.t", "sales_eu", "tun"]
    by = {row["local_name"]: row for row in rows}
    assert by["sales_eu"]["remote_db"] == "sales" and by["sales_eu"]["owner"] == "ann"
    assert by["sales_eu"]["uris"] == [URI] and by["sales_eu"]["kind"] == "database"
    assert by["local.t"]["remote_table"] == "remote_tbl" and by["local.t"]["kind"] == "table"
    assert by["tun"]["properties"]["ssh.tunnel.port"] == "2222" and by["tun"]["via"] == "ssh"
    assert by["gl"]["uris"] == [] and by["gl"]["create_time"] > 0

    with RemoteStore(cli_store) as store:  # what the proxy will read
        spec = store.get("local", "t")
        assert spec is not None and spec.remote_name == "remote_db.remote_tbl"

    r = _run("drop", "local.t", "--store", cli_store)
    assert r.exit_code == 0 and "dropped the link local.t" in r.output and "untouched" in r.output
    r = _run("drop", "local.t", "--store", cli_store)
    assert r.exit_code == 1
    assert "no remote table link named local.t" in r.output
    assert "Traceback" not in r.output
    r = _run("list", "--store", cli_store, "--json")
    assert [json.loads(x)["local_name"] for x in r.output.splitlines()] == ["gl", "sales_eu", "tun"]


def test_cli_empty_list(cli_store: str) -> None:
    r = _run("list", "--store", cli_store)
    assert r.exit_code == 0 and "no remotes" in r.output
    r = _run("list", "--store", cli_store, "--json")
    assert r.exit_code == 0 and r.output == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "d", "--uris", "eu-hms:9083"], "'eu-hms:9083' is not thrift://host:port"),
        (["add", "d"], "d: give --uris thrift://host:port (or --via glue)"),
        (["add", "d", "--via", "ssh", "--uris", URI], "ssh.tunnel.route is required for via 'ssh'"),
        (
            ["add", "d", "--uris", URI, "--property", "hivemesh.remote.urls=x"],
            "unknown property 'hivemesh.remote.urls'",
        ),
        (["add", "d", "--uris", URI, "--property", "novalue"], "--property 'novalue' must be KEY=VALUE"),
        (["add", "d", "--uris", URI, "--remote", "a.b"], "a database link names a remote database 'db'"),
        (["add", "a.b.c", "--uris", URI], "NAME 'a.b.c' must be 'db' or 'db.table'"),
        (["drop", "a..b"], "NAME 'a..b' must be 'db' or 'db.table'"),
        (["add", "d.t", "--uris", URI, "--remote", "x.y.z"], "must be 'table' or 'database.table'"),
    ],
)
def test_cli_invalid_exits_2(cli_store: str, args: list[str], message: str) -> None:
    r = _run(*args, "--store", cli_store)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_cli_duplicate_exits_2(cli_store: str) -> None:
    assert _run("add", "d", "--uris", URI, "--store", cli_store, "--no-check").exit_code == 0
    r = _run("add", "d", "--uris", URI, "--store", cli_store, "--no-check")
    assert r.exit_code == 2 and "error: remote d already exists" in r.output


def test_cli_store_from_config_and_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'from-config.db'}"
    cfg = tmp_path / "mesh.yaml"
    cfg.write_text(f"proxy:\n  store: {url}\nprimary:\n  name: local\n  uris: [thrift://127.0.0.1:9083]\n")
    r = _run("add", "d", "--uris", URI, "--config", str(cfg), "--no-check")
    assert r.exit_code == 0, r.output
    with RemoteStore(url) as store:
        assert store.get("d") is not None
    other = f"sqlite:///{tmp_path / 'other.db'}"
    r = _run("list", "--json", "--config", str(cfg), "--store", other)  # --store wins
    assert r.exit_code == 0 and r.output == ""

    bad = tmp_path / "bad.yaml"
    bad.write_text("proxy:\n  port: nope\nprimary:\n  name: local\n  uris: [thrift://h:1]\n")
    r = _run("list", "--config", str(bad))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid configuration") and "port" in lines[0]
    r = _run("list", "--config", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "cannot read configuration file" in r.output
    r = _run("list", "--store", "mysql://u@h/db")
    assert r.exit_code == 2 and "must start with sqlite:///" in r.output


def test_cli_default_store_is_the_proxy_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = _run("add", "d", "--uris", URI, "--no-check")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "hivemesh-data" / "proxy.db").exists()


def test_cli_add_checks_what_the_proxy_checks(hivemesh_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``remote add`` asks the remote metastore for the linked database or table, and the primary
    (from --config) for a table link's local database, as the proxy does when a client creates
    the link: a missing object or an unreachable metastore is one error line (exit 2) and no link
    is stored; ``--no-check`` stores it without asking."""
    from hive_metastore.ttypes import Database, FieldSchema, SerDeInfo, StorageDescriptor, Table

    from tests.support.servers import ThriftClient

    uri = hivemesh_server.uri
    store = f"sqlite:///{tmp_path / 'proxy.db'}"
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        c.create_database(Database(name="cli_checked", parameters={}))
        c.create_table(Table(tableName="t1", dbName="cli_checked", parameters={}, partitionKeys=[],
                             sd=StorageDescriptor(cols=[FieldSchema("x", "string", None)], serdeInfo=SerDeInfo(),
                                                  bucketCols=[], sortCols=[], parameters={})))  # fmt: skip
    ok = _run("add", "linked", "--uris", uri, "--remote", "cli_checked", "--store", store)
    assert ok.exit_code == 0, ok.output

    def fails(*args: str) -> str:
        r = _run(*args, "--store", store)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
        return lines[0]

    assert "remote database nosuch not found" in fails("add", "ghost", "--uris", uri, "--remote", "nosuch")
    assert "cannot create database link" in fails(
        "add", "far", "--uris", "thrift://127.0.0.1:1", "--remote", "x"
    )
    # the real command: that one line only, no log lines saying it first (Thrift's, the member's)
    cmd = [sys.executable, "-m", "hivemesh.cli", "remote", "add", "far", "--uris", "thrift://127.0.0.1:1",
           "--remote", "x", "--store", store]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: ") and "cannot create database link" in r.stderr
    cfg = tmp_path / "mesh.yaml"
    cfg.write_text(f"proxy:\n  store: {store}\nprimary:\n  name: main\n  uris: [{uri}]\n")
    assert "no database nodb in the primary metastore 'main'" in fails(
        "add", "nodb.t", "--uris", uri, "--remote", "cli_checked.t1", "--config", str(cfg)
    )
    with RemoteStore(store) as rs:
        assert [s.local_name for s in rs.list()] == ["linked"]
    offline = _run("add", "ghost", "--uris", uri, "--remote", "nosuch", "--store", store, "--no-check")
    assert offline.exit_code == 0, offline.output
