"""Replication between zones (issue 13), end to end: hivemesh metastores as source and target.

On each backend (SQLite, PostgreSQL) two real ``hivemesh metastore`` processes are zones ``a``
and ``b`` (fresh stores, their own warehouses); every test writes its own mesh.yaml (``zones:`` and
``replication:``, the replicator's store a SQLite file or a fresh PostgreSQL database) and uses
databases of its own, so the tests share the servers without seeing each other's objects.
Replication runs in-process (:func:`hivemesh.replication.service.run_once`,
:class:`~hivemesh.replication.service.ReplicationService`) and through the real CLI
(``python -m hivemesh.cli replicate run|status|verify``). The target is checked with
:func:`hivemesh.replication.verify.compare`, with the catalog snapshot of the replay test
(partition column statistics and write-id lists too) and by reading the data files themselves.

Not covered: ``exchange_partitions`` and ``truncate_table`` as such (their events are the
ADD_PARTITION/DROP_PARTITION and ALTER_TABLE/ALTER_PARTITION events covered here).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    CommitTxnRequest,
    Database,
    FieldSchema,
    Function,
    GetValidWriteIdsRequest,
    InsertEventRequestData,
    LongColumnStatsData,
    NotificationEventRequest,
    OpenTxnRequest,
    Partition,
    ResourceUri,
    SerDeInfo,
    SetPartitionsStatsRequest,
    StorageDescriptor,
    StringColumnStatsData,
    Table,
    WriteNotificationLogRequest,
)
from thrift.Thrift import TException

from hivemesh.hive import event_messages as ev
from hivemesh.hive.names import make_part_name
from hivemesh.metastore.replay import read_events
from hivemesh.replication.config import load_replication_config
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.runner import PolicyRunner, relocator_for
from hivemesh.replication.service import ReplicationService, run_once
from hivemesh.replication.state import ReplicationStore
from hivemesh.replication.verify import compare
from hivemesh.storage.locations import local_path
from tests.conftest import drop_pg_database, make_pg_database
from tests.support.servers import HivemeshProcess, ThriftClient, free_port
from tests.test_event_replay import Workload, _valid_txn_list, _write_id_list, assert_same_catalog, snapshot

WAIT_S = 90.0
"""Deadline of every wait for a background effect (a failure, not a timing assertion)."""


# ---------------------------------------------------------------- the zones
@dataclass
class Zones:
    """Zones ``a`` and ``b`` of one backend: servers, clients, warehouses as locations show them."""

    kind: str
    procs: dict[str, HivemeshProcess]
    hms: dict[str, Any]
    warehouse: dict[str, str]
    store_urls: dict[str, str]

    @property
    def a(self) -> Any:
        return self.hms["a"]

    @property
    def b(self) -> Any:
        return self.hms["b"]


def _warehouse(hms: Any) -> str:
    """The server's warehouse root as its locations show it (``file:/...``)."""
    probe = "probe_wh"
    hms.create_database(Database(name=probe))
    try:
        return hms.get_database(probe).locationUri.rstrip("/").rsplit("/", 1)[0]
    finally:
        hms.drop_database(probe, True, True)


@pytest.fixture(scope="module")
def zones(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zones]:
    """Zones a and b: hivemesh servers on fresh stores of ``backend_url``'s kind."""
    kind = "sqlite" if backend_url.startswith("sqlite") else "postgres"
    base = tmp_path_factory.mktemp("replication")
    urls: dict[str, str] = {}
    for side in "ab":
        urls[side] = f"sqlite:///{base / side}.db" if kind == "sqlite" else make_pg_database("hivemesh_zone")
    procs = {s: HivemeshProcess(urls[s], base / f"w{s}", base / f"{s}.log") for s in "ab"}
    clients: list[ThriftClient] = []
    try:
        for p in procs.values():
            p.start()
        clients = [ThriftClient(procs[s].host, procs[s].port) for s in "ab"]
        hms = {"a": clients[0].client, "b": clients[1].client}
        yield Zones(kind, procs, hms, {s: _warehouse(hms[s]) for s in "ab"}, urls)
    finally:
        for c in clients:
            c.close()
        for p in procs.values():
            p.stop()
        for u in urls.values():
            if not u.startswith("sqlite"):
                drop_pg_database(u)


@pytest.fixture()
def store_url(zones: Zones, tmp_path: Path) -> Iterator[str]:
    """The replicator's store: a SQLite file, or a fresh PostgreSQL database on that backend."""
    if zones.kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'replication.db'}"
        return
    url = make_pg_database("hivemesh_replstore")
    yield url
    drop_pg_database(url)


class Mesh:
    """One test's mesh.yaml and the ways to run replication with it."""

    def __init__(self, zones: Zones, path: Path, store: str):
        self.zones = zones
        self.path = path
        self.store = store

    def write(self, policies: list[dict[str, Any]], **replication: Any) -> Mesh:
        data = {
            "zones": {
                s: {"metastore": self.zones.procs[s].uri, "warehouse": self.zones.warehouse[s]} for s in "ab"
            },
            "replication": {"store": self.store, "policies": policies, **replication},
        }
        self.path.write_text(json.dumps(data, indent=2), encoding="utf-8")  # JSON is YAML
        return self

    def config(self) -> Any:
        return load_replication_config(self.path)

    def once(self) -> None:
        """``run_once`` in this process; every policy must succeed."""
        store = ReplicationStore(self.store)
        try:
            failures = run_once(self.config(), store)
        finally:
            store.dispose()
        assert failures == {}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [
            sys.executable,
            "-m",
            "hivemesh.cli",
            "replicate",
            args[0],
            "--config",
            str(self.path),
            *args[1:],
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    def once_cli(self) -> None:
        r = self.cli("run", "--once")
        assert r.returncode == 0, r.stderr
        assert "replication up to date" in r.stderr

    def status(self) -> dict[str, dict[str, Any]]:
        r = self.cli("status", "--json")
        assert r.returncode == 0, r.stderr
        return {s["policy"]: s for s in json.loads(r.stdout)}

    def relocate(self, name: str) -> Callable[[str | None], str | None]:
        policy = self.config().replication.policy(name)
        wh = self.zones.warehouse
        return relocator_for(policy.paths or {wh[policy.source]: wh[policy.target]})

    def compare(self, name: str, **kw: Any) -> list[Any]:
        """:func:`hivemesh.replication.verify.compare` of policy ``name``."""
        policy = self.config().replication.policy(name)
        hms = self.zones.hms
        return compare(
            hms[policy.source],
            hms[policy.target],
            policy,
            self.relocate(name),
            ZoneStorage(),
            ZoneStorage(),
            **kw,
        )


@pytest.fixture()
def mesh(zones: Zones, store_url: str, tmp_path: Path) -> Mesh:
    return Mesh(zones, tmp_path / "mesh.yaml", store_url)


# ---------------------------------------------------------------- objects and files
SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


def _sd(cols: list[FieldSchema], location: str | None = None) -> StorageDescriptor:
    return StorageDescriptor(
        cols=cols,
        location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(None, SERDE, {"field.delim": ","}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


COLS = [FieldSchema("id", "bigint", None), FieldSchema("name", "string", "who")]


def make_table(
    hms: Any,
    db: str,
    name: str,
    keys: tuple[str, ...] = (),
    external_at: str | None = None,
    params: dict[str, str] | None = None,
) -> Table:
    """Create a managed table (or an external one at ``external_at``); returns it as stored."""
    hms.create_table(
        Table(
            tableName=name,
            dbName=db,
            owner="alice",
            sd=_sd(list(COLS), external_at),
            partitionKeys=[FieldSchema(k, "string", None) for k in keys],
            tableType="EXTERNAL_TABLE" if external_at else "MANAGED_TABLE",
            parameters={**({"EXTERNAL": "TRUE"} if external_at else {}), **(params or {})},
        )
    )
    return hms.get_table(db, name)


def add_partition(
    hms: Any, table: Table, values: list[str], files: dict[str, bytes] | None = None
) -> Partition:
    """Write ``files`` into the partition's directory, then add the partition (as writers do: a
    replicator that sees the partition finds its files); returns it as stored."""
    keys = [k.name for k in table.partitionKeys]
    for rel, data in (files or {}).items():
        put_file(f"{table.sd.location}/{make_part_name(keys, values)}", rel, data)
    hms.add_partition(
        Partition(
            values=values, dbName=table.dbName, tableName=table.tableName, sd=_sd(list(COLS)), parameters={}
        )
    )
    part = hms.get_partition(table.dbName, table.tableName, values)
    assert tree(part.sd.location) == (files or {})
    return part


def path_of(location: str) -> Path:
    assert location.startswith("file:"), location
    return Path(local_path(location))


def put_file(location: str, rel: str, data: bytes) -> Path:
    p = path_of(location) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def tree(location: str | None) -> dict[str, bytes]:
    """The files below ``location`` by relative path, with their bytes ({} when absent)."""
    if not location:
        return {}
    root = path_of(location)
    if not root.is_dir():
        return {}
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}


def stats_params(location: str) -> dict[str, str]:
    files = tree(location)
    return {"numFiles": str(len(files)), "totalSize": str(sum(len(b) for b in files.values()))}


def table_stats(db: str, table: str, part: str | None = None) -> ColumnStatistics:
    desc = ColumnStatisticsDesc(part is None, db, table, part)
    objs = [
        ColumnStatisticsObj(
            "id", "bigint", ColumnStatisticsData(longStats=LongColumnStatsData(1, 99, 0, 42))
        ),
        ColumnStatisticsObj(
            "name", "string", ColumnStatisticsData(stringStats=StringColumnStatsData(12, 5.5, 1, 40))
        ),
    ]
    return ColumnStatistics(desc, objs, engine="hive")


def data_differences(
    src: Any, tgt: Any, dbs: list[str], relocate: Callable[[str | None], str | None]
) -> tuple[list[str], int]:
    """Data files of every table and partition of ``dbs`` at the source that the target lacks or
    holds with other bytes (or extra ones), read directly; and the number of source files seen."""
    diffs: list[str] = []
    seen = 0
    for db in dbs:
        for name in src.get_all_tables(db):
            t = src.get_table(db, name)
            if t.tableType == "VIRTUAL_VIEW":
                continue
            locations = (
                [p.sd.location for p in src.get_partitions(db, name, -1)]
                if t.partitionKeys
                else [t.sd.location]
            )
            for loc in locations:
                want, got = tree(loc), tree(relocate(loc))
                seen += len(want)
                if want != got:
                    missing = sorted(set(want) - set(got))
                    extra = sorted(set(got) - set(want))
                    changed = sorted(k for k in set(want) & set(got) if want[k] != got[k])
                    diffs.append(f"{loc}: missing {missing} extra {extra} changed {changed}")
    return diffs, seen


def assert_catalogs_equal(
    a: Any,
    b: Any,
    dbs: list[str],
    relocate: Callable[[str | None], str | None],
    write_tables: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    """The replay test's snapshot of ``dbs`` equal on both sides (tables and partitions whole,
    column statistics of tables and partitions, functions, write-id lists); returns the source's."""
    want = snapshot(a, dbs, set(write_tables), relocate)
    got = snapshot(b, dbs, set(write_tables))
    assert set(got["dbs"]) == set(want["dbs"])
    assert_same_catalog(got, want, ("dbs", "functions"))
    return want


def wait_for(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    """Poll ``check`` until it returns a true value; fails after ``timeout`` seconds. A Thrift
    error, or a file gone between listing and reading it (a replicator's temporary file renamed
    into place meanwhile), counts as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except (TException, FileNotFoundError):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def current_id(hms: Any) -> int:
    return hms.get_current_notificationEventId().eventId


def has_table(hms: Any, db: str, name: str) -> bool:
    return name in (hms.get_all_tables(db) if db in hms.get_all_databases() else [])


# ---------------------------------------------------------------- 1. bootstrap then incremental
class ReplWorkload(Workload):
    """The replay test's seeded random workload, plus views and data written without a catalog
    change of its own (files dropped into a partition then its statistics parameters altered;
    files of an unpartitioned table replaced then the table altered)."""

    OPS = [
        *Workload.OPS,
        ("op_create_view", 2),
        ("op_write_partition_files", 8),
        ("op_replace_table_files", 5),
    ]

    def __init__(self, hms: Any, seed: int, dbs: list[str]):
        super().__init__(hms, seed)
        self.dbs = dbs
        self.files_written = 0

    def steps(self, n: int) -> None:
        names = [op for op, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for _ in range(n):
            op = self.rng.choices(names, weights)[0]
            try:
                getattr(self, op)()
                self.ok += 1
            except TException:  # an HMS refusal: no change, no event
                self.failed += 1

    def op_create_view(self) -> None:
        got = self.pick_table()
        if got:
            db, t = got
            text = f"select * from {db}.{t.tableName}"
            self.hms.create_table(
                Table(
                    tableName=self.name("v"),
                    dbName=db,
                    owner="alice",
                    sd=StorageDescriptor(
                        cols=list(t.sd.cols), serdeInfo=SerDeInfo(parameters={}), parameters={}
                    ),
                    partitionKeys=[],
                    tableType="VIRTUAL_VIEW",
                    viewOriginalText=text,
                    viewExpandedText=text,
                    parameters={},
                )
            )

    def op_write_partition_files(self) -> None:
        got = self._pick_partition()
        if got:
            db, t, p = got
            put_file(p.sd.location, f"part-{self.name('')}", self.rng.randbytes(self.rng.randrange(1, 300)))
            self.files_written += 1
            p.parameters = {**(p.parameters or {}), **stats_params(p.sd.location)}
            self.hms.alter_partition(db, t.tableName, p)

    def op_replace_table_files(self) -> None:
        got = self.pick_table(partitioned=False)
        if got and got[1].tableType != "VIRTUAL_VIEW":
            db, t = got
            root = path_of(t.sd.location)
            for f in list(root.rglob("*")) if root.is_dir() else []:
                if f.is_file():
                    f.unlink()
            for _ in range(self.rng.randrange(1, 3)):
                put_file(
                    t.sd.location, f"data-{self.name('')}", self.rng.randbytes(self.rng.randrange(1, 300))
                )
                self.files_written += 1
            t.parameters = {**(t.parameters or {}), **stats_params(t.sd.location)}
            self.hms.alter_table(db, t.tableName, t)


def populate(hms: Any, warehouse: str, prefix: str) -> list[str]:
    """Databases ``{prefix}_hr`` and ``{prefix}_sales`` with managed and external tables (partitioned
    ones with data files), a view, functions and column statistics; returns the database names."""
    hr, sales = f"{prefix}_hr", f"{prefix}_sales"
    for db in (hr, sales):
        hms.create_database(Database(name=db, description=f"{db} data", parameters={"team": db}))
    people = make_table(hms, hr, "people", external_at=f"{warehouse}/ext/{prefix}_people")
    put_file(people.sd.location, "people.csv", b"1,ann\n2,bob\n")
    hms.create_function(
        Function("fn_mask", hr, "com.example.Mask", "bob", 1, 0, 1, [ResourceUri(1, "file:/jars/m.jar")])
    )
    orders = make_table(hms, sales, "orders", ("dt",), params={"comment": "orders"})
    for i, dt in enumerate(["2024-01-01", "2024-01-02", "2024-01-03"]):
        add_partition(
            hms, orders, [dt], {"part-0": f"{i},x\n".encode() * (i + 1), f"sub/part-{i}": b"nested"}
        )
    hms.update_table_column_statistics(table_stats(sales, "orders"))
    hms.set_aggr_stats_for(
        SetPartitionsStatsRequest(colStats=[table_stats(sales, "orders", f"dt=2024-01-0{i}") for i in (1, 2)])
    )
    customers = make_table(hms, sales, "customers")
    put_file(customers.sd.location, "c-0", b"7,carol\n")
    put_file(customers.sd.location, "c-1", b"8,dave\n")
    hms.update_table_column_statistics(table_stats(sales, "customers"))
    events = make_table(hms, sales, "clicks", ("day",), external_at=f"{warehouse}/ext/{prefix}_clicks")
    for d in ("mon", "tue"):
        add_partition(hms, events, [d], {"c.json": f'{{"d":"{d}"}}'.encode()})
    make_table(hms, sales, "tmp_stage")
    text = f"select id from {sales}.orders"
    hms.create_table(
        Table(
            tableName="v_orders",
            dbName=sales,
            owner="alice",
            partitionKeys=[],
            tableType="VIRTUAL_VIEW",
            sd=StorageDescriptor(cols=[COLS[0]], serdeInfo=SerDeInfo(parameters={}), parameters={}),
            viewOriginalText=text,
            viewExpandedText=text,
            parameters={},
        )  # fmt: skip
    )
    hms.create_function(Function("fn_total", sales, "com.example.Total", "bob", 1, 0, 1, []))
    return [hr, sales]


def test_bootstrap_then_incremental_rounds_keep_the_target_equal(
    zones: Zones, mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = zones.a, zones.b
    dbs = populate(a, zones.warehouse["a"], "r_boot")
    mesh.write([{"name": "main", "source": "a", "target": "b", "databases": ["r_.*"]}], batch_events=37)

    # The bootstrap runs in a thread; right after its first table (r_boot_hr.people) this thread
    # changes the source: the table already copied, a table not yet copied, and new objects.
    reached, changed = threading.Event(), threading.Event()
    original = PolicyRunner.bootstrap_table
    copied: list[str] = []

    def bootstrap_table(self: PolicyRunner, db: str, name: str, prune: bool = False) -> Any:
        out = original(self, db, name, prune=prune)
        copied.append(f"{db}.{name}")
        if len(copied) == 1:
            reached.set()
            assert changed.wait(WAIT_S)
        return out

    monkeypatch.setattr(PolicyRunner, "bootstrap_table", bootstrap_table)
    results: list[Any] = []
    store = ReplicationStore(mesh.store)
    worker = threading.Thread(target=lambda: results.append(run_once(mesh.config(), store)))
    worker.start()
    try:
        assert reached.wait(WAIT_S)
        assert copied == ["r_boot_hr.people"]
        people = a.get_table("r_boot_hr", "people")
        put_file(people.sd.location, "people.csv", b"1,ann\n2,bob\n3,cid\n")
        people.parameters = {**people.parameters, "during": "1", **stats_params(people.sd.location)}
        a.alter_table("r_boot_hr", "people", people)
        late = make_table(a, "r_boot_hr", "late")
        put_file(late.sd.location, "l-0", b"late\n")
        a.create_function(Function("fn_during", "r_boot_hr", "com.example.During", "bob", 1, 0, 1, []))
        add_partition(a, a.get_table("r_boot_sales", "orders"), ["during"], {"part-0": b"during\n"})
        a.drop_table("r_boot_sales", "tmp_stage", True)
    finally:
        changed.set()
        worker.join(WAIT_S)
        store.dispose()
    monkeypatch.undo()
    assert results == [{}]
    # the bootstrap took what it had not copied yet as the source had it then...
    assert "dt=during" in b.get_partition_names("r_boot_sales", "orders", -1)
    assert "tmp_stage" not in b.get_all_tables("r_boot_sales")
    # ...and what it copied before the changes waits for their events
    assert "during" not in b.get_table("r_boot_hr", "people").parameters
    assert not has_table(b, "r_boot_hr", "late")
    assert mesh.status()["main"]["phase"] == "replicating"

    mesh.once_cli()  # the events of the bootstrap's time
    people_b = b.get_table("r_boot_hr", "people")
    assert people_b.parameters["during"] == "1"
    assert tree(people_b.sd.location) == {"people.csv": b"1,ann\n2,bob\n3,cid\n"}
    assert people_b.sd.location == f"{zones.warehouse['b']}/ext/r_boot_people"
    assert tree(b.get_table("r_boot_hr", "late").sd.location) == {"l-0": b"late\n"}
    assert "fn_during" in b.get_functions("r_boot_hr", "*")
    assert b.get_table("r_boot_sales", "v_orders").viewExpandedText == "select id from r_boot_sales.orders"
    relocate = mesh.relocate("main")
    assert mesh.compare("main") == []
    assert_catalogs_equal(a, b, dbs, relocate)
    diffs, seen = data_differences(a, b, dbs, relocate)
    assert diffs == [] and seen == 13

    # Rounds of random changes; replication between some of them only (in-process and CLI).
    work = ReplWorkload(a, seed=20240613, dbs=["r_w0", "r_w1", "r_w2", "r_w3"])
    start = current_id(a)
    for d in work.dbs[:2]:
        a.create_database(Database(name=d))
    for i, (steps, how) in enumerate(
        [(70, "cli"), (60, None), (70, "once"), (60, "cli"), (60, None), (50, "once")]
    ):
        work.steps(steps)
        if how == "cli":
            mesh.once_cli()
        elif how == "once":
            mesh.once()
        if how is not None and i == 2:  # a check half-way
            assert mesh.compare("main") == []
    work.finale()
    mesh.once_cli()

    all_dbs = [*dbs, *work.dbs]
    in_scope = [d for d in a.get_all_databases() if d.startswith("r_")]
    assert set(in_scope) <= set(all_dbs)
    assert mesh.compare("main") == []
    want = assert_catalogs_equal(a, b, all_dbs, relocate, work.written_tables)
    diffs, seen = data_differences(a, b, in_scope, relocate)
    assert diffs == []
    # a workload worth comparing
    assert work.ok >= 300 and work.files_written >= 40
    assert seen >= 25
    assert len(want["tables"]) >= 15
    assert sum(len(p) for p in want["partitions"].values()) >= 20
    assert any(v for k, v in want["stats"].items() if k.endswith("/parts"))
    assert any(t.tableType == "VIRTUAL_VIEW" for t in want["tables"].values())
    assert any(t.tableType == "EXTERNAL_TABLE" for t in want["tables"].values())
    events = list(read_events(a, start, batch=200))
    kinds = {e.eventType for e in events}
    messages = [ev.parse_event(e) for e in events if e.eventType in ("ALTER_PARTITION", "ALTER_TABLE")]
    assert any(isinstance(m, ev.AlterPartition) and m.before.values != m.after.values for m in messages)
    assert any(
        isinstance(m, ev.AlterTable) and m.before.tableName != m.after.tableName and m.after.partitionKeys
        for m in messages
    )
    assert kinds >= {
        "CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE", "CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE",
        "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION", "CREATE_FUNCTION", "DROP_FUNCTION",
        "UPDATE_TBL_COL_STAT_EVENT", "UPDATE_PART_COL_STAT_EVENT", "DELETE_TBL_COL_STAT_EVENT",
        "ALLOC_WRITE_ID_EVENT", "COMMIT_TXN", "ABORT_TXN", "INSERT",
    }  # fmt: skip
    st = mesh.status()["main"]
    assert st["phase"] == "replicating" and st["applied_event_id"] == current_id(a) and st["lag_events"] == 0
    assert st["resyncs"] == 0 and st["last_error"] is None and st["events_applied"] > 300


# ---------------------------------------------------------------- 2. drops
def _drop_fixture(hms: Any, warehouse: str, db: str) -> dict[str, Any]:
    hms.create_database(Database(name=db, parameters={}))
    m = make_table(hms, db, "m", ("dt",))
    p1 = add_partition(hms, m, ["1"], {"f": b"one"})
    p2 = add_partition(hms, m, ["2"], {"f": b"two"})
    e = make_table(hms, db, "e", external_at=f"{warehouse}/ext/{db}_e")
    put_file(e.sd.location, "f", b"external")
    u = make_table(hms, db, "u")
    put_file(u.sd.location, "f", b"managed")
    return {"m": m, "p1": p1, "p2": p2, "e": e, "u": u}


def test_propagate_drops(zones: Zones, mesh: Mesh) -> None:
    """``propagate_drops: false`` keeps what the source dropped; ``true`` drops it and the data
    directories of managed tables and partitions, but not an external table's."""
    a, b = zones.a, zones.b
    objs = {db: _drop_fixture(a, zones.warehouse["a"], db) for db in ("drops_keep", "drops_prop")}
    mesh.write(
        [
            {
                "name": "keep",
                "source": "a",
                "target": "b",
                "databases": ["drops_keep"],
                "propagate_drops": False,
            },
            {"name": "prop", "source": "a", "target": "b", "databases": ["drops_prop"]},
        ]
    )
    mesh.once_cli()
    relocate = mesh.relocate("keep")
    target = {db: {k: relocate(o.sd.location) for k, o in objs[db].items()} for db in objs}
    for db in objs:
        assert tree(target[db]["p1"]) == {"f": b"one"} and tree(target[db]["e"]) == {"f": b"external"}
        assert tree(target[db]["u"]) == {"f": b"managed"}
    for db in objs:
        a.drop_partition(db, "m", ["1"], True)
        a.drop_table(db, "e", True)
        a.drop_table(db, "u", True)
    mesh.once_cli()

    # kept: the tables, the partition and their files
    assert sorted(b.get_all_tables("drops_keep")) == ["e", "m", "u"]
    assert b.get_partition_names("drops_keep", "m", -1) == ["dt=1", "dt=2"]
    for k, data in (("p1", b"one"), ("p2", b"two"), ("e", b"external"), ("u", b"managed")):
        assert tree(target["drops_keep"][k]) == {"f": data}, k
    assert mesh.compare("keep") == []  # what only the target has is not a difference there
    assert {(d.kind, d.name) for d in mesh.compare("keep", propagate_drops=True)} == {
        ("extra", "drops_keep.e"),
        ("extra", "drops_keep.u"),
        ("extra", "drops_keep.m/dt=1"),
    }
    # propagated: gone, with the managed data; the external table's files stay
    assert b.get_all_tables("drops_prop") == ["m"]
    assert b.get_partition_names("drops_prop", "m", -1) == ["dt=2"]
    assert not path_of(target["drops_prop"]["p1"]).exists()
    assert not path_of(target["drops_prop"]["u"]).exists()
    assert tree(target["drops_prop"]["p2"]) == {"f": b"two"}
    assert tree(target["drops_prop"]["e"]) == {"f": b"external"}
    assert mesh.compare("prop") == []

    # a database dropped at the source
    a.drop_database("drops_prop", True, True)
    a.drop_database("drops_keep", True, True)
    mesh.once_cli()
    assert "drops_prop" not in b.get_all_databases()
    assert not path_of(target["drops_prop"]["p2"]).exists()
    assert tree(target["drops_prop"]["e"]) == {"f": b"external"}
    assert "drops_keep" in b.get_all_databases()
    assert tree(target["drops_keep"]["p2"]) == {"f": b"two"}


# ---------------------------------------------------------------- 3. metadata only
def test_metadata_only_copies_no_file(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    a.create_database(Database(name="meta_db", parameters={}))
    t = make_table(a, "meta_db", "t", ("dt",))
    add_partition(a, t, ["1"], {"f": b"one", "g": b"gee"})
    u = make_table(a, "meta_db", "u")
    put_file(u.sd.location, "f", b"unpartitioned")
    mesh.write(
        [{"name": "meta", "source": "a", "target": "b", "databases": ["meta_db"], "data": "metadata_only"}]
    )
    mesh.once()
    add_partition(a, t, ["2"], {"f": b"two"})
    p1 = a.get_partition("meta_db", "t", ["1"])
    put_file(p1.sd.location, "h", b"more")
    p1.parameters = {**p1.parameters, **stats_params(p1.sd.location), "marker": "x"}
    a.alter_partition("meta_db", "t", p1)
    put_file(u.sd.location, "f2", b"more")
    u = a.get_table("meta_db", "u")
    u.parameters = {**u.parameters, "marker": "y"}
    a.alter_table("meta_db", "u", u)
    mesh.once_cli()

    assert b.get_partition_names("meta_db", "t", -1) == ["dt=1", "dt=2"]
    p1b = b.get_partition("meta_db", "t", ["1"])
    assert p1b.parameters["marker"] == "x" and p1b.parameters["numFiles"] == "3"  # the source's figures
    assert p1b.sd.location.startswith(zones.warehouse["b"] + "/meta_db.db/")
    assert b.get_table("meta_db", "u").parameters["marker"] == "y"
    files = [f for f in path_of(zones.warehouse["b"] + "/meta_db.db").rglob("*") if f.is_file()]
    assert files == []
    assert mesh.compare("meta") == []  # metadata equal; files are not compared for this mode
    r = mesh.cli("verify", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == {"meta": []}


# ---------------------------------------------------------------- 4. rule changes
def test_rule_change_bootstraps_new_matches_and_stops_old_ones(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    for db in ("rule_a", "rule_b"):
        a.create_database(Database(name=db, parameters={}))
    t1 = make_table(a, "rule_a", "t1")
    put_file(t1.sd.location, "f", b"t1")
    t2 = make_table(a, "rule_a", "t2", ("dt",))
    add_partition(a, t2, ["1"], {"f": b"t2/1"})
    t3 = make_table(a, "rule_b", "t3")
    put_file(t3.sd.location, "f", b"t3")
    policy = {"name": "rules", "source": "a", "target": "b"}
    mesh.write([{**policy, "databases": ["rule_a"], "tables": {"rule_a": ["t1"]}}])
    mesh.once_cli()
    assert b.get_all_tables("rule_a") == ["t1"]
    assert "rule_b" not in b.get_all_databases()
    assert mesh.status()["rules"]["objects"] == []

    # changed while the replicator is down: t1 (to stop) and t2 (to start)
    t1 = a.get_table("rule_a", "t1")
    t1.parameters = {**t1.parameters, "after_stop": "1"}
    a.alter_table("rule_a", "t1", t1)
    add_partition(a, t2, ["2"], {"f": b"t2/2"})
    mesh.write([{**policy, "databases": ["rule_a", "rule_b"], "tables": {"rule_a": ["t2"]}}])
    mesh.once_cli()
    objects = {(o["database"], o["table"]): o["state"] for o in mesh.status()["rules"]["objects"]}
    assert objects == {
        ("rule_a", "t1"): "stopped",
        ("rule_a", "t2"): "replicating",
        ("rule_b", None): "replicating",
    }
    assert sorted(b.get_all_tables("rule_a")) == ["t1", "t2"]
    assert b.get_partition_names("rule_a", "t2", -1) == ["dt=1", "dt=2"]
    assert tree(b.get_partition("rule_a", "t2", ["2"]).sd.location) == {"f": b"t2/2"}
    assert b.get_all_tables("rule_b") == ["t3"]
    assert tree(b.get_table("rule_b", "t3").sd.location) == {"f": b"t3"}
    t1b = b.get_table("rule_a", "t1")
    assert "after_stop" not in t1b.parameters and tree(t1b.sd.location) == {"f": b"t1"}

    # afterwards their changes flow; t1's do not
    add_partition(a, t2, ["3"], {"f": b"t2/3"})
    t4 = make_table(a, "rule_b", "t4")
    put_file(t4.sd.location, "f", b"t4")
    t3 = a.get_table("rule_b", "t3")
    t3.parameters = {**t3.parameters, "later": "1"}
    a.alter_table("rule_b", "t3", t3)
    a.drop_table("rule_a", "t1", True)
    mesh.once()
    assert b.get_partition_names("rule_a", "t2", -1) == ["dt=1", "dt=2", "dt=3"]
    assert sorted(b.get_all_tables("rule_b")) == ["t3", "t4"]
    assert b.get_table("rule_b", "t3").parameters["later"] == "1"
    assert tree(b.get_table("rule_b", "t4").sd.location) == {"f": b"t4"}
    assert "after_stop" not in b.get_table("rule_a", "t1").parameters  # stopped: left as it was
    assert mesh.compare("rules") == []


# ---------------------------------------------------------------- 5. both directions
def _sample(metrics: Any, name: str, policy: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"policy": policy})


def _wait_for_polls(service: ReplicationService, policies: tuple[str, ...]) -> None:
    """Wait until each policy's loop has succeeded a step after now."""
    name = "hivemesh_replication_last_success_timestamp_seconds"
    seen = {p: _sample(service.metrics, name, p) or 0 for p in policies}
    wait_for("more polls", lambda: all((_sample(service.metrics, name, p) or 0) > seen[p] for p in policies))


def test_two_directions_run_together_without_echo(zones: Zones, mesh: Mesh, tmp_path: Path) -> None:
    a, b = zones.a, zones.b
    a.create_database(Database(name="sales", parameters={}))
    orders = make_table(a, "sales", "orders", ("dt",))
    add_partition(a, orders, ["1"], {"f": b"sale 1"})
    b.create_database(Database(name="ml", parameters={}))
    models = make_table(b, "ml", "models")
    put_file(models.sd.location, "m.bin", b"\x00model")
    mesh.write(
        [
            {"name": "a2b", "source": "a", "target": "b", "databases": ["sales"]},
            {"name": "b2a", "source": "b", "target": "a", "databases": ["ml"]},
        ],
        poll_interval_s=0.05,
    )
    store = ReplicationStore(mesh.store)
    service = ReplicationService(mesh.config(), store).start()
    try:
        wait_for("sales on b", lambda: "dt=1" in b.get_partition_names("sales", "orders", -1))
        wait_for("ml on a", lambda: has_table(a, "ml", "models"))
        # changes on each side while both run
        add_partition(a, orders, ["2"], {"f": b"sale 2"})
        models = b.get_table("ml", "models")
        put_file(models.sd.location, "m.bin", b"\x01model")
        models.parameters = {**models.parameters, "version": "2", **stats_params(models.sd.location)}
        b.alter_table("ml", "models", models)
        make_table(b, "ml", "features")
        wait_for("dt=2 on b", lambda: "dt=2" in b.get_partition_names("sales", "orders", -1))
        wait_for("features on a", lambda: has_table(a, "ml", "features"))
        wait_for("models v2 on a", lambda: a.get_table("ml", "models").parameters.get("version") == "2")

        def settled() -> tuple[int, int] | None:
            ids = current_id(a), current_id(b)
            st = store.get("a2b"), store.get("b2a")
            if st[0] and st[1] and (st[0].event_id, st[1].event_id) == ids:
                return ids
            return None

        ids = wait_for("both checkpoints at their source's current event", settled)
        # both policies poll on: two more idle polls each, and no event id moved
        for _ in range(2):
            _wait_for_polls(service, ("a2b", "b2a"))
        assert (current_id(a), current_id(b)) == ids
        assert _sample(service.metrics, "hivemesh_replication_lag_events", "a2b") == 0
        assert _sample(service.metrics, "hivemesh_replication_source_event_id", "a2b") == ids[0]
        assert _sample(service.metrics, "hivemesh_replication_source_event_id", "b2a") == ids[1]
    finally:
        service.stop()
        store.dispose()
    assert tree(a.get_table("ml", "models").sd.location) == {"m.bin": b"\x01model"}
    assert tree(b.get_partition("sales", "orders", ["2"]).sd.location) == {"f": b"sale 2"}
    mesh.once()  # nothing left to do, nothing written
    assert (current_id(a), current_id(b)) == ids
    assert mesh.compare("a2b") == [] and mesh.compare("b2a") == []
    assert mesh.status()["b2a"]["applied_event_id"] == ids[1]

    # the same database both ways is refused before anything runs (the CLI's exit and message)
    bad = Mesh(zones, tmp_path / "both.yaml", mesh.store).write(
        [
            {"name": "there", "source": "a", "target": "b", "databases": ["sales"]},
            {"name": "back", "source": "b", "target": "a", "databases": ["sales", "ml"]},
        ]
    )
    r = bad.cli("run", "--once")
    assert r.returncode == 2
    assert "sales would be replicated both ways" in r.stderr


# ---------------------------------------------------------------- 6. purged log
def _purge(zones: Zones, after: int, upto: int | None = None) -> int:
    """Delete zone a's NOTIFICATION_LOG rows with ids > ``after`` (and <= ``upto``) directly in
    its store, as a purge of the log would; returns how many went."""
    eng = sa.create_engine(zones.store_urls["a"])
    try:
        with eng.begin() as c:
            q = 'DELETE FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" > :after'
            params = {"after": after}
            if upto is not None:
                q += ' AND "EVENT_ID" <= :upto'
                params["upto"] = upto
            return c.execute(sa.text(q), params).rowcount
    finally:
        eng.dispose()


def test_a_purged_log_resyncs_by_comparison(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    a.create_database(Database(name="purge_db", parameters={}))
    t = make_table(a, "purge_db", "t", ("dt",))
    for d in ("1", "2"):
        add_partition(a, t, [d], {"f": f"p{d}".encode(), "g": b"same"})
    u = make_table(a, "purge_db", "u")
    put_file(u.sd.location, "f", b"before")
    make_table(a, "purge_db", "gone")
    mesh.write([{"name": "purge", "source": "a", "target": "b", "databases": ["purge_db"]}])
    mesh.once_cli()
    checkpoint = mesh.status()["purge"]["applied_event_id"]
    assert checkpoint == current_id(a)

    # the replicator is down; the source changes; the log past the checkpoint is purged
    add_partition(a, t, ["3"], {"f": b"p3"})
    a.drop_table("purge_db", "gone", True)
    p1 = a.get_partition("purge_db", "t", ["1"])
    put_file(p1.sd.location, "f", b"P1")  # same size, other bytes
    p1.parameters = {**p1.parameters, "touched": "1"}
    a.alter_partition("purge_db", "t", p1)
    put_file(u.sd.location, "f", b"after, longer")
    u = a.get_table("purge_db", "u")
    u.parameters = {**u.parameters, **stats_params(u.sd.location)}
    a.alter_table("purge_db", "u", u)
    now = current_id(a)
    assert _purge(zones, checkpoint) == now - checkpoint > 0
    assert a.get_next_notification(NotificationEventRequest(lastEvent=checkpoint, maxEvents=10)).events == []
    assert current_id(a) == now  # the server takes the purge

    mesh.once_cli()
    st = mesh.status()["purge"]
    assert st["phase"] == "replicating" and st["resyncs"] == 1
    assert "purged" in st["resync_reason"]
    assert st["applied_event_id"] == now and st["last_error"] is None
    assert b.get_all_tables("purge_db") == ["t", "u"]
    assert b.get_partition_names("purge_db", "t", -1) == ["dt=1", "dt=2", "dt=3"]
    assert b.get_partition("purge_db", "t", ["1"]).parameters["touched"] == "1"
    assert tree(b.get_partition("purge_db", "t", ["1"]).sd.location) == {"f": b"P1", "g": b"same"}
    assert tree(b.get_table("purge_db", "u").sd.location) == {"f": b"after, longer"}
    assert mesh.compare("purge") == []
    assert data_differences(a, b, ["purge_db"], mesh.relocate("purge")) == ([], 6)

    # a partial purge: the oldest events past the checkpoint gone, newer ones kept
    checkpoint = now
    a.drop_partition("purge_db", "t", ["2"], True)
    add_partition(a, t, ["4"], {"f": b"p4"})
    u = a.get_table("purge_db", "u")
    u.parameters = {**u.parameters, "second": "1"}
    a.alter_table("purge_db", "u", u)
    assert _purge(zones, checkpoint, checkpoint + 1) == 1
    mesh.once_cli()
    st = mesh.status()["purge"]
    assert (st["phase"], st["resyncs"], st["applied_event_id"]) == ("replicating", 2, current_id(a))
    assert f"checkpoint {checkpoint}" in st["resync_reason"]
    assert b.get_partition_names("purge_db", "t", -1) == ["dt=1", "dt=3", "dt=4"]
    assert b.get_table("purge_db", "u").parameters["second"] == "1"
    assert mesh.compare("purge") == []


# ---------------------------------------------------------------- 7. verify --repair
def _mtimes(location: str) -> dict[str, int]:
    root = path_of(location)
    return {str(f.relative_to(root)): f.stat().st_mtime_ns for f in root.rglob("*") if f.is_file()}


def test_verify_finds_injected_divergence_and_repair_copies_only_it(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    a.create_database(Database(name="ver_db", parameters={}))
    t = make_table(a, "ver_db", "t", ("dt",))
    for d in ("1", "2", "3"):
        add_partition(a, t, [d], {"part-0": f"p{d}-0".encode() * 50, "part-1": f"p{d}-1".encode() * 50})
    u = make_table(a, "ver_db", "u")
    put_file(u.sd.location, "part-0", b"u0" * 100)
    put_file(u.sd.location, "part-1", b"u1" * 100)
    mesh.write([{"name": "ver", "source": "a", "target": "b", "databases": ["ver_db"]}])
    mesh.once_cli()
    r = mesh.cli("verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ver: target equal to source" in r.stdout

    db_root = zones.warehouse["b"] + "/ver_db.db"
    (path_of(db_root) / "t/dt=1/part-0").unlink()
    flipped = path_of(db_root) / "u/part-1"
    data = bytearray(flipped.read_bytes())
    data[7] ^= 0xFF
    flipped.write_bytes(bytes(data))
    b.drop_partition("ver_db", "t", ["2"], True)
    before = _mtimes(db_root)

    r = mesh.cli("verify", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    found = {(d["kind"], d["object"], d["name"]) for d in json.loads(r.stdout)["ver"]}
    assert found == {
        ("missing", "file", "ver_db.t/dt=1/part-0"),
        ("different", "file", "ver_db.u/part-1"),
        ("missing", "partition", "ver_db.t/dt=2"),
    }
    r = mesh.cli("verify")  # the same, for people
    assert r.returncode == 1
    assert "ver: 3 difference(s)" in r.stdout and "ver_db.u/part-1" in r.stdout

    r = mesh.cli("verify", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    repaired = [line for line in r.stdout.splitlines() if line.startswith("ver: repaired ")]
    assert sorted(line.split("  ")[0] for line in repaired) == [
        "ver: repaired different file ver_db.u/part-1",
        "ver: repaired missing file ver_db.t/dt=1/part-0",
        "ver: repaired missing partition ver_db.t/dt=2",
    ]
    assert r.stdout.splitlines()[-1] == "ver: target equal to source"
    after = _mtimes(db_root)
    rewritten = {k for k in after if before.get(k) != after[k]}
    assert rewritten == {"t/dt=1/part-0", "u/part-1", "t/dt=2/part-0", "t/dt=2/part-1"}
    assert flipped.read_bytes() == b"u1" * 100
    r = mesh.cli("verify")
    assert r.returncode == 0, r.stdout + r.stderr
    assert data_differences(a, b, ["ver_db"], mesh.relocate("ver")) == ([], 8)


# ---------------------------------------------------------------- 8. ACID write ids
def _write_ids(hms: Any, table: str) -> str:
    txns = _valid_txn_list(hms)[0]
    (v,) = hms.get_valid_write_ids(
        GetValidWriteIdsRequest(fullTableNames=[table], validTxnList=txns)
    ).tblValidWriteIds
    return _write_id_list(v)


def test_write_ids_of_transactional_tables_follow_the_source(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    for db in ("acid_db", "acid_out"):
        a.create_database(Database(name=db, parameters={}))
    props = {"transactional": "true", "transactional_properties": "insert_only"}
    events = make_table(a, "acid_db", "events", params=props)
    make_table(a, "acid_out", "other", params=props)
    mesh.write([{"name": "acid", "source": "a", "target": "b", "databases": ["acid_db"]}])
    mesh.once_cli()
    hwm_before = b.get_open_txns().txn_high_water_mark

    def txn(table: str, outcome: str, data: bytes | None = None) -> int:
        (tid,) = a.open_txns(OpenTxnRequest(1, "etl", "host")).txn_ids
        db, name = table.split(".")
        (w,) = a.allocate_table_write_ids(AllocateTableWriteIdsRequest(db, name, txnIds=[tid])).txnToWriteIds
        if data is not None:
            delta = f"delta_{w.writeId:07d}_{w.writeId:07d}_0000"
            put_file(events.sd.location, f"{delta}/000000_0", data)
            a.add_write_notification_log(
                WriteNotificationLogRequest(
                    tid, w.writeId, db, name,
                    InsertEventRequestData(filesAdded=[f"{events.sd.location}/{delta}/000000_0"]),
                )
            )  # fmt: skip
        if outcome == "commit":
            a.commit_txn(CommitTxnRequest(txnid=tid))
        elif outcome == "abort":
            a.abort_txn(AbortTxnRequest(txnid=tid))
        return tid

    txn("acid_db.events", "commit", b"first\n")
    txn("acid_db.events", "abort")
    txn("acid_out.other", "commit")  # out of scope: never opened on the target
    txn("acid_db.events", "commit", b"third\n")
    still_open = txn("acid_db.events", "open")
    mesh.once()

    source = _write_ids(a, "acid_db.events")
    assert source.split(":")[1:] == ["4", "4", "4", "2"]  # high watermark, min open, open, aborted
    assert _write_ids(b, "acid_db.events") == source
    assert b.get_open_txns().txn_high_water_mark - hwm_before == 4
    assert tree(b.get_table("acid_db", "events").sd.location) == {
        "delta_0000001_0000001_0000/000000_0": b"first\n",
        "delta_0000003_0000003_0000/000000_0": b"third\n",
    }
    assert "acid_out" not in b.get_all_databases()

    put_file(events.sd.location, "delta_0000004_0000004_0000/000000_0", b"fourth\n")
    a.add_write_notification_log(
        WriteNotificationLogRequest(
            still_open, 4, "acid_db", "events",
            InsertEventRequestData(filesAdded=[f"{events.sd.location}/delta_0000004_0000004_0000/000000_0"]),
        )
    )  # fmt: skip
    a.commit_txn(CommitTxnRequest(txnid=still_open))
    mesh.once_cli()
    source = _write_ids(a, "acid_db.events")
    assert source.split(":")[1:] == ["4", str(2**63 - 1), "", "2"]
    assert _write_ids(b, "acid_db.events") == source
    assert (
        tree(b.get_table("acid_db", "events").sd.location)["delta_0000004_0000004_0000/000000_0"]
        == b"fourth\n"
    )
    assert b.get_open_txns().txn_high_water_mark - hwm_before == 4
    assert mesh.compare("acid") == []


# ---------------------------------------------------------------- 9. continuous mode, CLI
def _metric(text: str, name: str, policy: str) -> float | None:
    prefix = f'{name}{{policy="{policy}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None


def test_continuous_cli_follows_the_source_serves_metrics_and_stops_on_sigterm(
    zones: Zones, mesh: Mesh, tmp_path: Path
) -> None:
    a, b = zones.a, zones.b
    a.create_database(Database(name="cont_db", parameters={}))
    t = make_table(a, "cont_db", "t", ("dt",))
    add_partition(a, t, ["1"], {"f": b"one"})
    mesh.write(
        [{"name": "cont", "source": "a", "target": "b", "databases": ["cont_db"]}], poll_interval_s=0.05
    )
    port = free_port()
    log = tmp_path / "replicate.log"
    with open(log, "w", encoding="utf-8") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hivemesh.cli", "replicate", "run", "--config", str(mesh.path),
             "--metrics-port", str(port)],
            stdout=logf, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        wait_for("the bootstrap", lambda: "dt=1" in b.get_partition_names("cont_db", "t", -1))
        add_partition(a, t, ["2"], {"f": b"two"})
        wait_for("the new partition on b", lambda: "dt=2" in b.get_partition_names("cont_db", "t", -1))
        assert tree(b.get_partition("cont_db", "t", ["2"]).sd.location) == {"f": b"two"}

        def scrape() -> str | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            applied = _metric(text, "hivemesh_replication_events_applied_total", "cont")
            return text if applied and _metric(text, "hivemesh_replication_lag_events", "cont") == 0 else None

        text = wait_for("metrics of the applied event", lambda: _try(scrape))
        assert _metric(text, "hivemesh_replication_events_applied_total", "cont") >= 1
        assert _metric(text, "hivemesh_replication_lag_seconds", "cont") is not None
        assert "hivemesh_replication_lag_seconds Age of the oldest source event not yet applied" in text
        assert _metric(text, "hivemesh_replication_files_copied_total", "cont") >= 2
        assert mesh.status()["cont"]["running_by"] is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0, log.read_text()
    st = mesh.status()["cont"]
    assert st["running_by"] is None and st["phase"] == "replicating"


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except OSError:  # not serving yet
        return None
