"""Location safety of replication (issue 28, section 1): however a zone's warehouse or a policy's
``paths`` spell a directory, the target's tables land under the target's warehouse, and a target
never points at the source's files.

Two real ``hivemesh metastore`` processes on SQLite are zones ``a`` (source) and ``b`` (target);
each test uses databases of its own. The spellings (a plain path, ``file:///``, ``file:/``, a
trailing ``/``, an upper-case scheme) are those of the same directories the metastores store as
``file:/...``; each case ends with the target's files under the target's warehouse, ``verify``
finding no difference, and the source's data file still there after the target dropped its table
with ``deleteData=True``. Then: what the configuration alone shows is refused when the file is
loaded (naming the policy and the ``paths`` entry that fixes it); a table or partition outside
every source prefix is refused when it is replicated (bootstrap and event), and the suggested
entry fixes it;
``verify`` reports a target location in the source zone and a propagated drop leaves the source's
files alone. A database's ``managedLocationUri`` follows the same rule (bootstrap, events,
verify), and a ``format: delta`` policy's verify reports a replica off the rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import Database, Partition

from hivemesh.config import ConfigError
from hivemesh.replication.config import load_replication_config, parse_replication_config
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.delta.runner import replica_table
from hivemesh.replication.service import make_runner, run_once
from hivemesh.replication.state import ReplicationStore
from hivemesh.replication.verify import compare
from hivemesh.storage.locations import clean_location, local_path, location_key
from tests.support.servers import HivemeshProcess, ThriftClient
from tests.test_replication import COLS, _sd, _warehouse, add_partition, make_table, put_file, tree


@dataclass
class Zones:
    procs: dict[str, HivemeshProcess]
    hms: dict[str, Any]
    warehouse: dict[str, str]  # as the metastores write locations: file:/...
    base: Path


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zones]:
    """Zones a and b: hivemesh servers on fresh SQLite stores and their own warehouses."""
    base = tmp_path_factory.mktemp("repl-locations")
    procs = {s: HivemeshProcess(f"sqlite:///{base / s}.db", base / f"w{s}", base / f"{s}.log") for s in "ab"}
    clients: list[ThriftClient] = []
    try:
        for p in procs.values():
            p.start()
        clients = [ThriftClient(procs[s].host, procs[s].port) for s in "ab"]
        hms = {"a": clients[0].client, "b": clients[1].client}
        yield Zones(procs, hms, {s: _warehouse(hms[s]) for s in "ab"}, base)
    finally:
        for c in clients:
            c.close()
        for p in procs.values():
            p.stop()


def write_mesh(
    zones: Zones, tmp_path: Path, policy: dict[str, Any], warehouse: dict[str, str] | None = None
) -> Path:
    """``tmp_path/mesh.yaml`` with zones a and b (warehouses as given, default as stored) and one policy."""
    wh = warehouse or zones.warehouse
    data = {
        "zones": {s: {"metastore": zones.procs[s].uri, "warehouse": wh[s]} for s in "ab"},
        "replication": {"store": f"sqlite:///{tmp_path / 'replication.db'}", "policies": [policy]},
    }
    path = tmp_path / "mesh.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run(path: Path) -> dict[str, str]:
    """``run_once`` of the file's policies; ``{policy: error}`` of those that failed."""
    cfg = load_replication_config(path)
    store = ReplicationStore(cfg.replication.store)
    try:
        return run_once(cfg, store)
    finally:
        store.dispose()


def differences(path: Path) -> list[Any]:
    """:func:`compare` of the file's policy, as ``replicate verify`` runs it."""
    cfg = load_replication_config(path)
    policy = cfg.replication.policies[0]
    paths = cfg.paths(policy)
    with (
        ThriftClient(*_host_port(cfg, policy.source)) as s,
        ThriftClient(*_host_port(cfg, policy.target)) as t,
    ):
        return compare(
            s, t, policy, paths.relocate, ZoneStorage(), ZoneStorage(), source_zone=paths.source_roots
        )


def _host_port(cfg: Any, zone: str) -> tuple[str, int]:
    host, port = cfg.zones[zone].metastore.removeprefix("thrift://").split(":")
    return host, int(port)


def local(location: str) -> Path:
    return Path(local_path(clean_location(location)))


# ---------------------------------------------------------------- the normal form
def test_one_directory_has_one_key() -> None:
    """Hadoop's ``Path`` rules for a local zone, case of scheme and authority, trailing slashes,
    and hdfs's default port: equal only when it is 8020 or written the same on both sides."""
    same = ["/data/wh", "/data/wh/", "file:/data/wh", "file:///data/wh", "FILE:///data/wh/", "File:/data//wh"]
    assert {location_key(s) for s in same} == {"file:/data/wh"}
    assert location_key("HDFS://NN:8020/wh/") == location_key("hdfs://nn/wh") == "hdfs://nn/wh"
    assert location_key("hdfs://nn:9000/wh") == "hdfs://nn:9000/wh" != location_key("hdfs://nn/wh")
    assert location_key("s3a://Lake/wh/") == "s3a://lake/wh"
    assert clean_location("HDFS://NN:8020/wh/") == "hdfs://NN:8020/wh"  # written: authority as given


# ---------------------------------------------------------------- every spelling
def _spell(location: str, how: str) -> str:
    path = local_path(location)
    return {
        "plain": path,
        "file-triple": f"file://{path}",
        "file": f"file:{path}",
        "trailing-slash": f"{path}/",
        "scheme-case": f"FILE://{path}/",
    }[how]


SPELLINGS = ["plain", "file-triple", "file", "trailing-slash", "scheme-case"]


@pytest.mark.parametrize(
    ("how", "in_paths"), [*((h, False) for h in SPELLINGS), ("file-triple", True), ("plain", True)]
)
def test_every_spelling_replicates_under_the_target_warehouse(
    zones: Zones, tmp_path: Path, how: str, in_paths: bool
) -> None:
    """The warehouses (or the policy's ``paths``) spelled ``how``: the target's tables and files
    are under the target's warehouse, verify finds nothing, and a drop with deleteData on the
    target leaves the source's file."""
    a, b = zones.hms["a"], zones.hms["b"]
    db = f"loc_{how.replace('-', '_')}_{int(in_paths)}"
    a.create_database(Database(name=db, parameters={}))
    t = make_table(a, db, "t")
    src_file = put_file(t.sd.location, "f", b"source bytes")
    p = make_table(a, db, "p", ("dt",))
    add_partition(a, p, ["1"], {"g": b"partition bytes"})
    spelled = {s: _spell(zones.warehouse[s], how) for s in "ab"}
    policy: dict[str, Any] = {"name": "loc", "source": "a", "target": "b", "databases": [db]}
    if in_paths:
        policy["paths"] = {spelled["a"]: spelled["b"]}
    path = write_mesh(zones, tmp_path, policy, None if in_paths else spelled)

    assert run(path) == {}
    tb, pb = b.get_table(db, "t"), b.get_partition(db, "p", ["1"])
    for loc in (tb.sd.location, pb.sd.location):
        assert location_key(loc).startswith(zones.warehouse["b"] + "/"), loc
    assert tree(tb.sd.location) == {"f": b"source bytes"}
    assert tree(pb.sd.location) == {"g": b"partition bytes"}
    assert differences(path) == []

    b.drop_table(db, "t", True)
    b.drop_table(db, "p", True)
    assert not local(tb.sd.location).exists() and not local(pb.sd.location).exists()
    assert src_file.read_bytes() == b"source bytes"
    assert tree(a.get_partition(db, "p", ["1"]).sd.location) == {"g": b"partition bytes"}


# ---------------------------------------------------------------- refused when loaded
def test_a_target_in_the_source_zone_is_refused_when_the_file_is_loaded() -> None:
    """Warehouses naming one directory (spelled apart, or hdfs with and without its default
    port), and a paths entry into the source: refused with the policy, the key and the fix."""

    def problems(a: str, b: str, **policy: Any) -> str:
        cfg = {
            "zones": {"a": {"metastore": "thrift://h:1", "warehouse": a}, "b": {"metastore": "thrift://h:2", "warehouse": b}},
            "replication": {"policies": [{"name": "sales", "source": "a", "target": "b", "databases": ["s"], **policy}]},
        }  # fmt: skip
        with pytest.raises(ConfigError) as e:
            parse_replication_config(cfg, "mesh.yaml")
        return str(e.value)

    text = problems("/data/wh", "file:///data/wh/")
    assert "replication.policies[0]: policy 'sales' maps zones.a.warehouse '/data/wh'" in text
    assert "the same directory as" in text and 'paths: {"file:/data/wh": "<a directory of zone b>"}' in text
    assert "policy 'sales'" in problems("hdfs://NN:8020/wh", "hdfs://nn/wh", format="delta")
    text = problems("/data/wh", "/data/other", paths={"FILE:/data/wh": "/data/wh/replica"})
    assert "replication.policies[0].paths: 'FILE:/data/wh' -> '/data/wh/replica'" in text
    assert "inside 'FILE:/data/wh'" in text
    # another port is another file system; a sibling directory is outside
    for a, b in (("hdfs://nn:9000/wh", "hdfs://nn/wh"), ("/data/wh", "/data/wh2")):
        cfg = {
            "zones": {"a": {"metastore": "thrift://h:1", "warehouse": a}, "b": {"metastore": "thrift://h:2", "warehouse": b}},
            "replication": {"policies": [{"name": "p", "source": "a", "target": "b", "databases": ["s"]}]},
        }  # fmt: skip
        parse_replication_config(cfg)


# ---------------------------------------------------------------- refused when replicated
def test_a_table_outside_every_source_prefix_is_refused_then_mapped(zones: Zones, tmp_path: Path) -> None:
    """An external table outside the source warehouse would keep its location on the target:
    the bootstrap refuses it (naming it and the paths entry), as does the event of one created
    later; with the suggested entry it is replicated to the target's directory."""
    a, b = zones.hms["a"], zones.hms["b"]
    ext = zones.base / "outside"
    db, db2 = "loc_refused", "loc_refused_later"
    for name in (db, db2):
        a.create_database(Database(name=name, parameters={}))
    e = make_table(a, db, "e", external_at=f"file:{ext}/e")
    src_file = put_file(e.sd.location, "f", b"external bytes")
    path = write_mesh(
        zones, tmp_path, {"name": "ext", "source": "a", "target": "b", "databases": ["loc_refused.*"]}
    )

    failures = run(path)
    assert set(failures) == {"ext"}
    assert (
        "table loc_refused.e is at file:" in failures["ext"] and "its own source directory" in failures["ext"]
    )
    hint = f'"file:{ext}": "<a directory of zone b>", "{zones.warehouse["a"]}": "{zones.warehouse["b"]}"'
    assert hint in failures["ext"], failures["ext"]
    assert "e" not in (b.get_all_tables(db) if db in b.get_all_databases() else [])

    mapped = {zones.warehouse["a"]: zones.warehouse["b"], f"file:{ext}": f"file:{zones.base}/outside-b"}
    policy = {"name": "ext", "source": "a", "target": "b", "databases": ["loc_refused.*"], "paths": mapped}
    write_mesh(zones, tmp_path, policy)
    assert run(path) == {}
    assert location_key(b.get_table(db, "e").sd.location) == f"file:{zones.base}/outside-b/e"
    assert tree(b.get_table(db, "e").sd.location) == {"f": b"external bytes"}

    # created later, at a location no entry maps: the event is refused, naming the table
    make_table(a, db2, "late", external_at=f"file:{zones.base}/elsewhere/late")
    failures = run(path)
    assert "loc_refused_later.late" in failures["ext"] and "CREATE_TABLE" in failures["ext"]
    assert "late" not in b.get_all_tables(db2)
    b.drop_table(db, "e", True)
    assert src_file.read_bytes() == b"external bytes"


# ---------------------------------------------------------------- verify and drops
def test_verify_reports_a_target_in_the_source_zone_and_drops_leave_it(zones: Zones, tmp_path: Path) -> None:
    """A target table pointed at the source's directory (as an older replicator left it): verify
    (the CLI) reports it; the source's drop (without deleteData) propagated to the target drops
    the table there but leaves the source's files."""
    a, b = zones.hms["a"], zones.hms["b"]
    db = "loc_verify"
    a.create_database(Database(name=db, parameters={}))
    t = make_table(a, db, "t")
    src_file = put_file(t.sd.location, "f", b"source bytes")
    path = write_mesh(zones, tmp_path, {"name": "v", "source": "a", "target": "b", "databases": [db]})
    assert run(path) == {}
    bad = b.get_table(db, "t")
    bad.sd.location = t.sd.location  # into zone a
    b.alter_table(db, "t", bad)

    r = subprocess.run(
        [sys.executable, "-m", "hivemesh.cli", "replicate", "verify", "--config", str(path), "--json", "--no-data"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    diffs = json.loads(r.stdout)["v"]
    inside = [d for d in diffs if d["object"] == "table" and "is in the source zone" in d["detail"]]
    assert len(inside) == 1 and inside[0]["name"] == f"{db}.t", diffs
    assert zones.warehouse["a"] in inside[0]["detail"]

    a.drop_table(db, "t", False)
    assert run(path) == {}
    assert "t" not in b.get_all_tables(db)
    assert src_file.read_bytes() == b"source bytes"


def test_a_partition_outside_every_source_prefix_is_refused(zones: Zones, tmp_path: Path) -> None:
    """A partition added at a directory of its own, outside the source warehouse: the bootstrap
    refuses it by name before the target gets it, and its files stay where they are."""
    a, b = zones.hms["a"], zones.hms["b"]
    db = "loc_part_refused"
    a.create_database(Database(name=db, parameters={}))
    t = make_table(a, db, "t", ("dt",))
    outside = f"file:{zones.base}/landing/dt=1"
    src_file = put_file(outside, "f", b"landed bytes")
    a.add_partition(
        Partition(values=["1"], dbName=db, tableName="t", sd=_sd(list(COLS), outside), parameters={})
    )
    assert location_key(a.get_partition(db, "t", ["1"]).sd.location) == outside
    path = write_mesh(zones, tmp_path, {"name": "part", "source": "a", "target": "b", "databases": [db]})

    failures = run(path)
    assert f"partition {db}.t/dt=1 is at {outside}" in failures["part"], failures
    assert f'"file:{zones.base}/landing"' in failures["part"]
    assert b.get_partition_names(db, "t", -1) == []  # the table is there, the partition is not
    assert src_file.read_bytes() == b"landed bytes"
    assert t.sd.location.startswith(zones.warehouse["a"])


# ---------------------------------------------------------------- a database's managed location
def test_a_databases_managed_location_is_relocated_verified_and_refused(zones: Zones, tmp_path: Path) -> None:
    """``managedLocationUri`` (where the metastore puts a database's managed tables): relocated by
    the bootstrap and by ALTER_DATABASE, so a managed table created on the target lands in the
    target zone; verify reports a target one in the source zone; a database created later with
    one under no source prefix is refused by name with the paths entry that maps it."""
    a, b = zones.hms["a"], zones.hms["b"]
    wa, wb = zones.warehouse["a"], zones.warehouse["b"]
    db, later = "loc_mgd", "loc_mgd_later"
    a.create_database(Database(name=db, parameters={}, managedLocationUri=f"{wa}/managed/{db}.db"))
    t = make_table(a, db, "t")
    assert location_key(t.sd.location) == f"{wa}/managed/{db}.db/t"  # placed by the managed location
    put_file(t.sd.location, "f", b"managed bytes")
    path = write_mesh(
        zones, tmp_path, {"name": "mgd", "source": "a", "target": "b", "databases": ["loc_mgd.*"]}
    )

    assert run(path) == {}
    assert location_key(b.get_database(db).managedLocationUri) == f"{wb}/managed/{db}.db"
    assert tree(b.get_table(db, "t").sd.location) == {"f": b"managed bytes"}
    made_on_b = make_table(b, db, "spark_made")  # as a client of the target creates one
    assert location_key(made_on_b.sd.location) == f"{wb}/managed/{db}.db/spark_made"
    b.drop_table(db, "spark_made", True)

    moved = a.get_database(db)
    moved.managedLocationUri = f"{wa}/managed2/{db}.db"
    a.alter_database(db, moved)
    assert run(path) == {}
    assert location_key(b.get_database(db).managedLocationUri) == f"{wb}/managed2/{db}.db"
    assert differences(path) == []

    bad = b.get_database(db)
    bad.managedLocationUri = moved.managedLocationUri  # the source's, as an older replicator left it
    b.alter_database(db, bad)
    found = [d for d in differences(path) if d.object == "database"]
    assert [d.name for d in found] == [db, db], found
    compared, inside = sorted(found, key=lambda d: "is in the source zone" in d.detail)
    assert compared.detail.startswith("managedLocationUri: 'file:/") and " != 'file:/" in compared.detail
    assert inside.detail.startswith(f"managedLocationUri: {moved.managedLocationUri} is in the source zone")

    elsewhere = f"file:{zones.base}/elsewhere-managed"
    a.create_database(Database(name=later, parameters={}, managedLocationUri=f"{elsewhere}/{later}.db"))
    failures = run(path)
    assert f"database {later}'s managedLocationUri (event" in failures["mgd"], failures
    assert (
        "CREATE_DATABASE" in failures["mgd"]
        and f'"{elsewhere}": "<a directory of zone b>"' in failures["mgd"]
    )
    assert later not in b.get_all_databases()


# ---------------------------------------------------------------- Delta verify
def test_delta_verify_reports_locations_off_the_rule(zones: Zones, tmp_path: Path) -> None:
    """A ``format: delta`` policy's verify: a replica registered at the source table's own
    directory, and a source table the rule refuses (outside every source prefix), are each one
    ``different`` table naming the location; the comparison goes on past them."""
    a, b = zones.hms["a"], zones.hms["b"]
    db = "loc_delta"
    a.create_database(Database(name=db, parameters={}))
    t = make_table(a, db, "t")
    e = make_table(a, db, "e", external_at=f"file:{zones.base}/delta-outside/e")
    b.create_database(Database(name=db, parameters={}))
    b.create_table(replica_table(t, t.sd.location))  # into zone a, as by hand or an older replicator
    b.create_table(replica_table(e, f"{zones.warehouse['b']}/{db}.db/e"))
    path = write_mesh(
        zones, tmp_path, {"name": "dv", "source": "a", "target": "b", "databases": [db], "format": "delta"}
    )

    cfg = load_replication_config(path)
    store = ReplicationStore(cfg.replication.store)
    runner = make_runner(cfg, cfg.replication.policies[0], store, "test")
    try:
        diffs = {d.name: d for d in runner.compare(check_data=False)}
    finally:
        runner.close()
        store.dispose()
    assert set(diffs) == {f"{db}.t", f"{db}.e"}, diffs
    assert all(d.kind == "different" and d.object == "table" for d in diffs.values())
    assert diffs[f"{db}.t"].detail.startswith(f"location in the source zone: policy dv: table {db}.t is at")
    assert "its own source directory" in diffs[f"{db}.t"].detail
    assert diffs[f"{db}.e"].detail.startswith(
        f"location: policy dv: table {db}.e is at file:{zones.base}/delta-outside/e"
    )
    assert f'"file:{zones.base}/delta-outside": "<a directory of zone b>"' in diffs[f"{db}.e"].detail
