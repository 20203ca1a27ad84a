"""Replication against the real peers: Apache Hive 4.2 as source and as target, and Spark as writer.

Every test runs :func:`hivemesh.replication.service.run_once` (bootstrap, then the notification
log) between real metastore processes over Thrift, with the data files copied between the zones'
warehouse directories, and checks the target with :func:`hivemesh.replication.verify.compare`
(databases, functions, tables, table column statistics, partitions and every data file by size
and MD5) and directly (:func:`check_target`: names, parameters, locations, files, and no files
left behind by drops and renames; for Spark, the rows read through the target):

1. Hive 4 -> hivemesh: a database with a function, a partitioned and two unpartitioned managed
   tables, an external table, table and partition column statistics and data files, bootstrapped;
   then partitions added, altered (with a new file), dropped and renamed, a table altered and
   renamed, a table created and dropped, a table dropped, a function created and statistics
   updated (:func:`change`), all applied from Hive 4's notification log; ``hivemesh replicate
   verify`` (the command) agrees.
2. Round trip Hive 4 -> hivemesh -> Hive 4: two chained policies (zone ``h4`` -> ``hm`` ->
   ``h4b``), the second Hive 4 being :func:`hive4_default`; each hop and the first Hive 4 against
   the second end equal. The tables are as a Hive 4 in its default configuration holds non-ACID
   tables (external tables that purge their data, see 3), which its transformer leaves alone.
3. hivemesh -> Hive 4, twice. Into the suite's Hive 4 (:func:`tests.hive4_fixtures.hive4`, whose
   metadata transformer is off, as ``HIVE4_CONF`` sets it for every Hive 4 test): equal, managed
   tables staying managed. Into :func:`hive4_default`, a Hive 4 with its shipped default
   transformer (``MetastoreDefaultTransformer``): it turns every managed non-ACID table it is asked
   to create into an external one (``EXTERNAL_TABLE`` with ``EXTERNAL``, ``external.table.purge``
   and ``TRANSLATED_TO_EXTERNAL`` set to ``TRUE``, at the location it was given; processor
   capabilities in ``create_table_req`` change nothing), yet takes the managed type back from an
   ``alter_table``; and it moves a database located in its managed warehouse to its external
   one. The replicator does not fight Hive 4's policy: the test pins exactly those differences.
4. Spark -> hivemesh -> hivemesh: Spark, bound to a hivemesh federation proxy that presents the
   source metastore as primary and the target under the prefix ``tgt_``, creates and fills a
   partitioned Parquet table; after replication it reads the same rows through ``tgt_<db>`` as
   through ``<db>``. An ``INSERT INTO`` an existing partition through Hive's load path makes one
   ALTER_PARTITION (statistics) and is replicated from the log; one with Spark's default settings
   makes no event at all, so only a resync (``verify --repair``) brings its file over.

Hive 4 facts found while writing these tests: Hive 4.2 no longer has the plain ``get_table``
(the replicator and ``verify`` fall back to ``get_table_req``); its notification messages are
``gzip(json-2.0)`` (base64 of gzipped JSON); a database created without a location is put in the
*external* warehouse (``metastore.warehouse.external.dir``) while its managed tables go to the
managed one, so a policy maps both roots (``paths``), and a target whose default table location
is ``<database location>/<table>`` (hivemesh) does not follow a rename of such a table by itself;
a table rename moves the directory of managed and of translated (purging external) tables, and
dropping a translated table or partition deletes its files; a database created without an owner
gets the server's user as owner.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hive_metastore import ttypes as T

from hivemesh.client.metastore import MetastoreClient
from hivemesh.replication.config import PolicyConfig, ReplicationFile, load_replication_config
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.runner import PolicyRunner, relocator_for
from hivemesh.replication.service import run_once
from hivemesh.replication.state import PolicyState, ReplicationStore, lease_owner
from hivemesh.replication.verify import Difference, compare
from hivemesh.storage.locations import local_path
from tests.support.federation import Mesh, SparkSwitch
from tests.support.hive4 import Hive4Metastore, require_hive4
from tests.support.servers import HivemeshProcess, ThriftClient

TEXT = (
    "org.apache.hadoop.mapred.TextInputFormat",
    "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
)
DEFAULT_TRANSFORMER = "org.apache.hadoop.hive.metastore.MetastoreDefaultTransformer"
TRANSLATED = {"EXTERNAL": "TRUE", "external.table.purge": "TRUE", "TRANSLATED_TO_EXTERNAL": "TRUE"}
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


# ---------------------------------------------------------------------------------- zones
@dataclass
class Zone:
    """A metastore of the test and its two warehouse roots, as the metastore writes locations."""

    name: str
    uri: str
    managed: str
    external: str

    def client(self) -> ThriftClient:
        host, port = self.uri.removeprefix("thrift://").rsplit(":", 1)
        return ThriftClient(host, int(port))


def hive4_zone(name: str, hms: Hive4Metastore) -> Zone:
    """A Hive 4 zone: managed tables under ``metastore.warehouse.dir``, databases created without
    a location (and external tables) under ``metastore.warehouse.external.dir``."""
    return Zone(name, hms.uri, f"file:{hms.warehouse}", f"file:{hms.warehouse}-external")


def hivemesh_zone(name: str, proc: HivemeshProcess, external: Path) -> Zone:
    """A hivemesh zone: its warehouse root as it writes it (a probe database's parent), and
    ``external`` for what Hive 4 keeps in its external warehouse."""
    probe = "probe_" + uuid.uuid4().hex[:8]
    with ThriftClient(proc.host, proc.port) as c:
        c.create_database(T.Database(name=probe, parameters={}))
        root = c.get_database(probe).locationUri.rstrip("/").rsplit("/", 1)[0]
        c.drop_database(probe, True, True)
    external.mkdir(parents=True, exist_ok=True)
    return Zone(name, proc.uri, root, f"file:{external}")


@pytest.fixture(scope="module")
def hm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zone]:
    """A hivemesh metastore (SQLite) for the module's tests (each test uses its own database)."""
    base = tmp_path_factory.mktemp("repl-peers-hm")
    with HivemeshProcess(f"sqlite:///{base / 'hm.db'}", base / "warehouse", base / "hm.log") as proc:
        yield hivemesh_zone("hm", proc, base / "external")


@pytest.fixture(scope="session")
def hive4_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hive4Metastore]:
    """A second Hive 4 (Derby) with Hive's shipped default metadata transformer (the suite's
    ``hive4`` has it off): the round trip's second Hive 4 and the target of
    :func:`test_hivemesh_to_hive4_with_its_default_transformer`. Session-scoped (defined here, so
    only this module uses it): in a whole-suite run pytest groups the tests by ``hive4`` backend
    across modules, and a module-scoped JVM would start once per group."""
    require_hive4()
    hms = Hive4Metastore(
        base_dir=tmp_path_factory.mktemp("hive4-default"),
        hive_conf={"metastore.metadata.transformer.class": DEFAULT_TRANSFORMER},
    )
    try:
        hms.start()
        yield hms
    finally:
        hms.stop()


def policy(name: str, source: Zone, target: Zone, db: str) -> dict[str, Any]:
    return {
        "name": name,
        "source": source.name,
        "target": target.name,
        "databases": [db],
        "paths": {source.managed: target.managed, source.external: target.external},
    }


def replication(tmp: Path, zones: list[Zone], policies: list[dict[str, Any]]) -> ReplicationFile:
    """``tmp/mesh.yaml`` with the ``zones:`` and ``replication:`` sections, as read back."""
    config = {
        "zones": {z.name: {"metastore": z.uri, "warehouse": z.managed} for z in zones},
        "replication": {"store": f"sqlite:///{tmp / 'replication.db'}", "policies": policies},
    }
    (tmp / "mesh.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return load_replication_config(tmp / "mesh.yaml")


def replicate(cfg: ReplicationFile, store: ReplicationStore) -> dict[str, PolicyState]:
    """``run_once`` of every policy (in order); fails on any policy's error; the states after."""
    failures = run_once(cfg, store)
    assert failures == {}, failures
    states = {p.name: store.get(p.name) for p in cfg.replication.policies}
    assert all(s is not None and s.phase == "replicating" for s in states.values()), states
    return states  # type: ignore[return-value]


def differences(source: Zone, target: Zone, rules: PolicyConfig) -> list[Difference]:
    """:func:`compare` of ``rules``'s scope on ``source`` and ``target``, data files included."""
    with MetastoreClient(source.uri) as s, MetastoreClient(target.uri) as t:
        return compare(
            s.hms,
            t.hms,
            rules,
            relocator_for(rules.paths),
            ZoneStorage(),
            ZoneStorage(),
            check_data=True,
        )


def assert_equal(source: Zone, target: Zone, rules: PolicyConfig) -> None:
    """The target equals the source in ``rules``'s scope (the differences listed otherwise)."""
    diffs = differences(source, target, rules)
    assert not diffs, f"{len(diffs)} difference(s) {source.name} -> {target.name}:\n" + "\n".join(
        f"  {d.kind} {d.object} {d.name}: {d.detail}" for d in diffs
    )


def current_event_id(zone: Zone) -> int:
    with zone.client() as c:
        return int(c.get_current_notificationEventId().eventId)


# ---------------------------------------------------------------------------------- objects
def _sd(location: str | None = None) -> T.StorageDescriptor:
    return T.StorageDescriptor(
        cols=[
            T.FieldSchema("id", "int", None),
            T.FieldSchema("name", "string", "the customer"),
            T.FieldSchema("amount", "double", "in EUR"),
        ],
        location=location,
        inputFormat=TEXT[0],
        outputFormat=TEXT[1],
        serdeInfo=T.SerDeInfo(
            serializationLib=TEXT[2], parameters={"field.delim": ",", "serialization.format": ","}
        ),
        numBuckets=-1,
        parameters={},
        compressed=False,
        bucketCols=[],
        sortCols=[],
    )


def get_table(c: Any, db: str, name: str) -> T.Table:
    """A table by the request form (Hive 4.2 has no plain ``get_table``)."""
    return c.get_table_req(T.GetTableRequest(dbName=db, tblName=name)).table


def create_table(
    c: Any, db: str, name: str, keys: list[str], params: dict[str, str], ttype: str = "MANAGED_TABLE",
    location: str | None = None,
) -> T.Table:  # fmt: skip
    c.create_table(
        T.Table(tableName=name, dbName=db, owner="alice", sd=_sd(location), tableType=ttype, parameters=params,
                partitionKeys=[T.FieldSchema(k, "string", None) for k in keys])
    )  # fmt: skip
    return get_table(c, db, name)


def write_file(location: str, name: str, data: str) -> Path:
    path = Path(local_path(location)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data, encoding="utf-8")
    return path


def rows(day: str, n: int) -> str:
    return "".join(f"{i},name {i} of {day},{i * 2.5}\n" for i in range(n))


def add_partition(c: Any, table: T.Table, day: str, params: dict[str, str] | None = None) -> T.Partition:
    """Add partition ``dt=day`` at its default location and write one data file into it."""
    c.add_partition(
        T.Partition(values=[day], dbName=table.dbName, tableName=table.tableName, sd=_sd(),
                    parameters=dict(params or {"source": "etl"}))
    )  # fmt: skip
    part = c.get_partition(table.dbName, table.tableName, [day])
    write_file(part.sd.location, "000000_0", rows(day, 3))
    return part


def function(db: str, name: str, cls: str) -> T.Function:
    return T.Function(
        functionName=name,
        dbName=db,
        className=cls,
        ownerName="alice",
        ownerType=T.PrincipalType.USER,
        createTime=1_700_000_000,
        functionType=T.FunctionType.JAVA,
        resourceUris=[T.ResourceUri(T.ResourceType.JAR, "file:/opt/udfs/replicated-udfs.jar")],
        catName="hive",
    )


def _stats_desc(db: str, table: str, part: str | None) -> T.ColumnStatisticsDesc:
    return T.ColumnStatisticsDesc(
        isTblLevel=part is None, dbName=db, tableName=table, partName=part, catName="hive"
    )


def column_stats(db: str, table: str, part: str | None, high: int, ndv: int) -> T.ColumnStatistics:
    long_data = T.LongColumnStatsData(lowValue=0, highValue=high, numNulls=0, numDVs=ndv)
    str_data = T.StringColumnStatsData(maxColLen=24, avgColLen=15.5, numNulls=1, numDVs=ndv)
    return T.ColumnStatistics(
        statsDesc=_stats_desc(db, table, part),
        statsObj=[
            T.ColumnStatisticsObj("id", "int", T.ColumnStatisticsData(longStats=long_data)),
            T.ColumnStatisticsObj("name", "string", T.ColumnStatisticsData(stringStats=str_data)),
        ],
        engine="hive",
    )


def build(
    c: Any, zone: Zone, db: str, kind: str = "MANAGED_TABLE", params: dict[str, str] | None = None
) -> None:
    """The source catalog: database ``db`` with function ``clean_name``; ``orders`` partitioned by
    ``dt`` (two partitions, each with a file, the first with column statistics), ``customers``
    (a file, table column statistics) and ``legacy`` (a file), all of table type ``kind`` with
    ``params``; ``events``, an external table in the zone's external warehouse (a file)."""
    extra = dict(params or {})
    # with an owner, as Hive's own clients send it (Hive 4 gives a database created without one
    # its server's user; hivemesh leaves it unset, so a replica on Hive 4 would differ there)
    c.create_database(T.Database(name=db, description="orders replicated between zones", parameters={"team": "fin"},
                                 ownerName="alice", ownerType=T.PrincipalType.USER))  # fmt: skip
    c.create_function(function(db, "clean_name", "com.example.udf.CleanName"))
    orders = create_table(c, db, "orders", ["dt"], {"comment": "orders of the day", **extra}, kind)
    for day in DAYS[:2]:
        add_partition(c, orders, day)
    c.update_partition_column_statistics(column_stats(db, "orders", f"dt={DAYS[0]}", 3, 3))
    for name in ("customers", "legacy"):
        table = create_table(c, db, name, [], {"comment": name, **extra}, kind)
        write_file(table.sd.location, "000000_0", rows(name, 4))
    c.update_table_column_statistics(column_stats(db, "customers", None, 4, 4))
    events = create_table(c, db, "events", [], {"EXTERNAL": "TRUE"}, "EXTERNAL_TABLE",
                          f"{zone.external}/{db}.db/events")  # fmt: skip
    write_file(events.sd.location, "events-0.txt", rows("events", 2))


def change(c: Any, db: str) -> None:
    """The changes replicated from the notification log (see :data:`EXPECTED`)."""
    orders = get_table(c, db, "orders")
    add_partition(c, orders, DAYS[2])  # ADD_PARTITION
    first = c.get_partition(db, "orders", [DAYS[0]])
    first.parameters = {**first.parameters, "checked": "yes"}
    write_file(first.sd.location, "000001_0", rows(DAYS[0] + " late", 2))
    c.alter_partition(db, "orders", first)  # ALTER_PARTITION with a new file
    c.drop_partition(db, "orders", [DAYS[1]], True)  # DROP_PARTITION (its files go)
    third = c.get_partition(db, "orders", [DAYS[2]])
    third.values = [DAYS[3]]
    c.rename_partition(db, "orders", [DAYS[2]], third)  # ALTER_PARTITION renaming dt=03 to dt=04
    c.update_partition_column_statistics(column_stats(db, "orders", f"dt={DAYS[3]}", 2, 3))
    customers = get_table(c, db, "customers")
    customers.sd.cols = [*customers.sd.cols, T.FieldSchema("tier", "string", "added")]
    customers.parameters = {**customers.parameters, "comment": "customers, with tiers"}
    c.alter_table(db, "customers", customers)  # ALTER_TABLE
    c.update_table_column_statistics(column_stats(db, "customers", None, 40, 35))
    customers = get_table(c, db, "customers")
    customers.tableName = "clients"
    c.alter_table(db, "customers", customers)  # ALTER_TABLE renaming customers to clients
    scratch = create_table(c, db, "scratch", [], {}, "MANAGED_TABLE")  # CREATE_TABLE, then DROP_TABLE
    write_file(scratch.sd.location, "000000_0", rows("scratch", 1))
    c.drop_table(db, "scratch", True)
    c.drop_table(db, "legacy", True)  # DROP_TABLE (its files go)
    c.create_function(function(db, "mask_email", "com.example.udf.MaskEmail"))  # CREATE_FUNCTION


EXPECTED = {
    "tables": ["clients", "events", "orders"],
    "partitions": [f"dt={DAYS[0]}", f"dt={DAYS[3]}"],
    "functions": ["clean_name", "mask_email"],
}
"""The source's catalog after :func:`build` and :func:`change`."""


def files_under(location: str) -> list[str]:
    root = Path(local_path(location))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def check_target(target: Zone, db: str, root: str | None = None) -> None:
    """The target holds :data:`EXPECTED`, with the data files where its own metadata says; its
    tables are in warehouse root ``root`` (default: the managed one)."""
    home = f"{root or target.managed}/{db}.db"
    with target.client() as c:
        assert sorted(c.get_all_tables(db)) == EXPECTED["tables"]
        assert sorted(c.get_partition_names(db, "orders", -1)) == EXPECTED["partitions"]
        assert sorted(c.get_functions(db, "*")) == EXPECTED["functions"]
        first, renamed = (c.get_partition(db, "orders", [d]) for d in (DAYS[0], DAYS[3]))
        assert first.parameters["checked"] == "yes"
        assert files_under(first.sd.location) == ["000000_0", "000001_0"]
        assert renamed.sd.location == f"{home}/orders/dt={DAYS[3]}"
        assert files_under(renamed.sd.location) == ["000000_0"]
        clients = get_table(c, db, "clients")
        assert clients.sd.location == f"{home}/clients"
        assert [f.name for f in clients.sd.cols][-1] == "tier"
        assert files_under(clients.sd.location) == ["000000_0"]
        assert get_table(c, db, "orders").sd.location == f"{home}/orders"
        # partition column statistics (compare() leaves them out): as build() and change() set them
        stats = c.get_partitions_statistics_req(
            T.PartitionsStatsRequest(dbName=db, tblName="orders", colNames=["id", "name"],
                                     partNames=EXPECTED["partitions"], engine="hive")
        ).partStats  # fmt: skip
        highs = {part: {o.colName: o.statsData.longStats.highValue for o in objs if o.colName == "id"}
                 for part, objs in stats.items()}  # fmt: skip
        assert highs == {f"dt={DAYS[0]}": {"id": 3}, f"dt={DAYS[3]}": {"id": 2}}
        assert not Path(local_path(f"{home}/orders/dt={DAYS[1]}")).exists()  # dropped: files removed
        assert not Path(local_path(f"{home}/legacy")).exists()
        assert not Path(local_path(f"{home}/customers")).exists()  # renamed: moved


# ---------------------------------------------------------------------------------- 1. Hive 4 -> hivemesh
@pytest.mark.hive4
def test_hive4_to_hivemesh(hive4: Hive4Metastore, hm: Zone, tmp_path: Path) -> None:
    """Hive 4 as the source: bootstrap, then every kind of change through its notification log."""
    h4 = hive4_zone("h4", hive4)
    db = "h4src_" + uuid.uuid4().hex[:8]
    with h4.client() as c:
        build(c, h4, db)
    cfg = replication(tmp_path, [h4, hm], [policy("h4-to-hm", h4, hm, db)])
    rules = cfg.replication.policies[0]
    store = ReplicationStore(cfg.replication.store)
    try:
        first = replicate(cfg, store)["h4-to-hm"]
        assert first.event_id == current_event_id(h4) and first.events_applied == 0  # a bootstrap
        assert_equal(h4, hm, rules)
        with hm.client() as c:
            assert sorted(c.get_all_tables(db)) == ["customers", "events", "legacy", "orders"]

        with h4.client() as c:
            change(c, db)
        after = replicate(cfg, store)["h4-to-hm"]
        assert after.event_id == current_event_id(h4)
        # every one of the 12 changes applied from the log (none skipped, no resync)
        assert after.events_applied == after.event_id - first.event_id == 12 and after.resyncs == 0
        assert_equal(h4, hm, rules)
        check_target(hm, db)
        # the command line's verify reads Hive 4 too
        verify = subprocess.run(
            [sys.executable, "-m", "hivemesh.cli", "replicate", "verify", "--config", str(tmp_path / "mesh.yaml"), "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert (verify.returncode, json.loads(verify.stdout or "null")) == (0, {"h4-to-hm": []}), (
            verify.stderr[-3000:]
        )
    finally:
        store.dispose()


@pytest.mark.hive4
def test_hive4_to_delta_replicas(hive4: Hive4Metastore, hm: Zone, tmp_path: Path) -> None:
    """Hive 4 as the source of a ``format: delta`` policy: its text tables (partitioned, renamed,
    with columns added, partitions added, altered, renamed and dropped, tables dropped) kept as
    Delta tables in the hivemesh zone, equal to the source after the bootstrap and after the
    changes (``hivemesh replicate verify`` on the Delta replicas)."""
    from deltalake import DeltaTable

    from hivemesh.replication.delta.verify import read_delta

    h4 = hive4_zone("h4", hive4)
    db = "h4delta_" + uuid.uuid4().hex[:8]
    with h4.client() as c:
        build(c, h4, db)
    rule = {**policy("h4-to-delta", h4, hm, db), "format": "delta"}
    cfg = replication(tmp_path, [h4, hm], [rule])
    store = ReplicationStore(cfg.replication.store)

    def verify() -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "hivemesh.cli", "replicate", "verify", "--config", str(tmp_path / "mesh.yaml"), "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return out.returncode, json.loads(out.stdout or "null")

    try:
        replicate(cfg, store)
        assert verify() == (0, {"h4-to-delta": []})
        with h4.client() as c:
            change(c, db)
        replicate(cfg, store)
        assert verify() == (0, {"h4-to-delta": []})
        with hm.client() as c:
            assert sorted(c.get_all_tables(db)) == EXPECTED["tables"]
            orders = c.get_table(db, "orders")
        assert orders.parameters["spark.sql.sources.provider"] == "delta"
        path = local_path(orders.sd.location)
        assert list(DeltaTable(path).metadata().partition_columns) == ["dt"]
        got = read_delta(path)
        assert sorted(set(got["dt"].to_pylist())) == [DAYS[0], DAYS[3]]
        assert got.num_rows == 3 + 2 + 3  # dt=01 with its late file, dt=04 (renamed from 03)
    finally:
        store.dispose()


# ---------------------------------------------------------------------------------- 2. round trip
@pytest.mark.hive4
def test_round_trip_hive4_hivemesh_hive4(
    hive4: Hive4Metastore, hive4_default: Hive4Metastore, hm: Zone, tmp_path: Path
) -> None:
    """Hive 4 -> hivemesh -> Hive 4: two chained policies; the second Hive 4 ends equal to the
    first. The tables are as a Hive 4 in its default configuration holds non-ACID tables
    (translated to external tables that purge their data), so that the second Hive 4's
    transformer leaves them as they are."""
    h4, h4b = hive4_zone("h4", hive4), hive4_zone("h4b", hive4_default)
    db = "trip_" + uuid.uuid4().hex[:8]
    with h4.client() as c:
        build(c, h4, db, "EXTERNAL_TABLE", TRANSLATED)
    cfg = replication(
        tmp_path, [h4, hm, h4b], [policy("h4-to-hm", h4, hm, db), policy("hm-to-h4b", hm, h4b, db)]
    )
    hop1, hop2 = cfg.replication.policies
    end_to_end = PolicyConfig(name="h4-to-h4b", source="h4", target="h4b", databases=[db],
                              paths={h4.managed: h4b.managed, h4.external: h4b.external})  # fmt: skip
    store = ReplicationStore(cfg.replication.store)
    try:
        replicate(cfg, store)
        assert_equal(h4, h4b, end_to_end)
        with h4.client() as c:
            change(c, db)
        states = replicate(cfg, store)
        assert states["h4-to-hm"].event_id == current_event_id(h4)
        assert states["hm-to-h4b"].event_id == current_event_id(hm)
        assert states["h4-to-hm"].events_applied > 0 and states["hm-to-h4b"].events_applied > 0
        assert_equal(h4, hm, hop1)
        assert_equal(hm, h4b, hop2)
        assert_equal(h4, h4b, end_to_end)
        check_target(h4b, db, h4b.external)
    finally:
        store.dispose()


# ---------------------------------------------------------------------------------- 3. hivemesh -> Hive 4
@pytest.mark.hive4
def test_hivemesh_to_hive4(hive4: Hive4Metastore, hm: Zone, tmp_path: Path) -> None:
    """hivemesh as the source, the suite's Hive 4 (metadata transformer off) as the target: the
    replayer's calls (``create_table_with_environment_context``, ``add_partitions_req``,
    ``alter_partitions_with_environment_context``, ``rename_partition``, column statistics,
    functions) leave Hive 4 equal to hivemesh, managed tables staying managed."""
    h4 = hive4_zone("h4", hive4)
    db = "hmsrc_" + uuid.uuid4().hex[:8]
    with hm.client() as c:
        build(c, hm, db)
    cfg = replication(tmp_path, [hm, h4], [policy("hm-to-h4", hm, h4, db)])
    rules = cfg.replication.policies[0]
    store = ReplicationStore(cfg.replication.store)
    try:
        replicate(cfg, store)
        assert_equal(hm, h4, rules)
        with hm.client() as c:
            change(c, db)
        state = replicate(cfg, store)["hm-to-h4"]
        assert state.event_id == current_event_id(hm) and state.resyncs == 0
        assert_equal(hm, h4, rules)
        check_target(h4, db)
        with h4.client() as c:
            assert get_table(c, db, "orders").tableType == "MANAGED_TABLE"
    finally:
        store.dispose()


@pytest.mark.hive4
def test_hivemesh_to_hive4_with_its_default_transformer(
    hive4_default: Hive4Metastore, hm: Zone, tmp_path: Path
) -> None:
    """hivemesh -> a Hive 4 with its shipped default metadata transformer. Hive 4 turns each
    managed non-ACID table the replayer creates into an external table that purges its data
    (:data:`TRANSLATED`), at the location it was given, but takes the managed type back from an
    ``alter_table``; and it moves a database whose location is given in its managed warehouse to
    its external one. After the bootstrap the database and every managed table differ exactly so,
    and a table altered later is managed again. Data files, partitions, statistics and functions
    are equal throughout, and drops remove the target's files (the tables purge)."""
    h4 = hive4_zone("h4d", hive4_default)
    db = "hmdef_" + uuid.uuid4().hex[:8]
    with hm.client() as c:
        build(c, hm, db)
    cfg = replication(tmp_path, [hm, h4], [policy("hm-to-h4d", hm, h4, db)])
    rules = cfg.replication.policies[0]
    store = ReplicationStore(cfg.replication.store)

    def translated(names: list[str]) -> list[tuple[str, str, str]]:
        """What compare() reports for Hive 4's transformations: the database's location, and the
        type and parameters of the tables ``names``."""
        return [("different", "database", db), *(("different", "table", f"{db}.{n}") for n in names)]

    def check(diffs: list[Difference]) -> None:
        assert diffs[0].detail.startswith("locationUri: "), diffs[0].detail  # (the paths shortened)
        with h4.client() as c:  # given in the managed warehouse, moved to the external one
            assert c.get_database(db).locationUri == f"{h4.external}/{db}.db"
        for d in diffs[1:]:
            assert d.detail.startswith("tableType: 'MANAGED_TABLE' != 'EXTERNAL_TABLE'"), d.detail
            for key in TRANSLATED:
                assert f"parameters[{key!r}]: absent != 'TRUE'" in d.detail, d.detail

    try:
        replicate(cfg, store)
        diffs = differences(hm, h4, rules)
        assert [(d.kind, d.object, d.name) for d in diffs] == translated(["customers", "legacy", "orders"])
        check(diffs)
        with h4.client() as c:
            orders = get_table(c, db, "orders")
            assert orders.tableType == "EXTERNAL_TABLE"
            assert {k: orders.parameters.get(k) for k in TRANSLATED} == TRANSLATED
            assert orders.sd.location == f"{h4.managed}/{db}.db/orders"  # where it was asked to be

        with hm.client() as c:
            change(c, db)
        replicate(cfg, store)
        diffs = differences(hm, h4, rules)
        # customers was altered (then renamed to clients): managed again; orders was not altered
        assert [(d.kind, d.object, d.name) for d in diffs] == translated(["orders"]), diffs
        check(diffs)
        check_target(h4, db)
        with h4.client() as c:
            assert get_table(c, db, "clients").tableType == "MANAGED_TABLE"
    finally:
        store.dispose()


# ---------------------------------------------------------------------------------- 4. Spark
@pytest.fixture(scope="module")
def spark_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """Source and target hivemesh metastores, a PREFIXED proxy presenting the source as primary
    and the target (read-only) under ``tgt_``, and the module's SparkSession switch."""
    base = tmp_path_factory.mktemp("repl-peers-spark")
    mesh = Mesh(base)
    sparks = SparkSwitch(base / "spark-logs")
    try:
        src, tgt = mesh.metastore("src"), mesh.metastore("tgt")
        proxy = mesh.proxy(
            "prefixed",
            "prefixed",
            {"name": "src", "uris": [src.uri], "access_control": "read_and_write_and_create"},
            [{"name": "tgt", "uris": [tgt.uri], "database_prefix": "tgt_", "access_control": "read_only"}],
        )
        yield SimpleNamespace(
            src=hivemesh_zone("src", src, base / "src-external"),
            tgt=hivemesh_zone("tgt", tgt, base / "tgt-external"),
            warehouse=src.warehouse,
            proxy=proxy,
            sparks=sparks,
        )
    finally:
        sparks.stop()
        mesh.close()


def events_since(zone: Zone, after: int) -> list[tuple[str, str | None]]:
    """``(event type, table)`` of ``zone``'s notification events after id ``after``."""
    with zone.client() as c:
        got = c.get_next_notification(T.NotificationEventRequest(lastEvent=after, maxEvents=1000)).events
    return [(e.eventType, e.tableName) for e in got or []]


@pytest.mark.spark
@pytest.mark.proxy_spark
def test_spark_writes_are_replicated(spark_mesh: SimpleNamespace, tmp_path: Path) -> None:
    """Spark writes a partitioned Parquet table on the source through the proxy; after
    replication it reads the same rows through the target's prefix. Then two ``INSERT INTO`` an
    existing partition:

    - through Hive's load path (``spark.sql.hive.convertInsertingPartitionedTable=false``): new
      files and one ALTER_PARTITION (its statistics) as the only event, replicated from the log;
    - with Spark's default settings, which write Parquet and ORC Hive tables with Spark's own
      data source writer: new files and *no* metastore event at all, so the log has nothing to
      replicate; ``compare()`` finds the missing file and a resync (what ``hivemesh replicate
      verify --repair`` runs) copies it.
    """
    m = spark_mesh
    spark = m.sparks.bind(m.proxy.uri, m.warehouse, app_name="hivemesh-replication-tests")
    db = "sales_" + uuid.uuid4().hex[:8]
    table = f"{db}.orders"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(
        f"CREATE TABLE {table} (id INT, name STRING, amount DOUBLE) PARTITIONED BY (dt STRING) STORED AS PARQUET"
    )
    spark.sql(f"INSERT INTO {table} PARTITION (dt='{DAYS[0]}') VALUES (1, 'a', 1.5), (2, 'b', 2.5)")
    spark.sql(f"INSERT INTO {table} PARTITION (dt='{DAYS[1]}') VALUES (3, 'c', 3.5)")
    expected = [(1, "a", 1.5, DAYS[0]), (2, "b", 2.5, DAYS[0]), (3, "c", 3.5, DAYS[1])]

    cfg = replication(tmp_path, [m.src, m.tgt], [policy("src-to-tgt", m.src, m.tgt, db)])
    rules = cfg.replication.policies[0]
    store = ReplicationStore(cfg.replication.store)

    def read(name: str) -> list[tuple[Any, ...]]:
        spark.catalog.refreshTable(name)  # Spark caches file listings
        return sorted(tuple(r) for r in spark.sql(f"SELECT id, name, amount, dt FROM {name}").collect())

    def insert(row: tuple[Any, ...]) -> list[tuple[str, str | None]]:
        """INSERT INTO the existing partition DAYS[0]; returns the source's events it made."""
        before = current_event_id(m.src)
        spark.sql(f"INSERT INTO {table} PARTITION (dt='{DAYS[0]}') VALUES {row[:3]!r}")
        expected.append(row)
        expected.sort()
        return events_since(m.src, before)

    try:
        replicate(cfg, store)
        assert_equal(m.src, m.tgt, rules)
        assert read(table) == read(f"tgt_{table}") == expected
        with m.tgt.client() as c:  # the target reads its own copy, in its own warehouse
            loc = c.get_partition(db, "orders", [DAYS[0]]).sd.location
            assert loc.startswith(m.tgt.managed) and any(f.startswith("part-") for f in files_under(loc))

        spark.conf.set("spark.sql.hive.convertInsertingPartitionedTable", "false")
        try:
            assert insert((4, "d", 4.5, DAYS[0])) == [("ALTER_PARTITION", "orders")]
        finally:
            spark.conf.unset("spark.sql.hive.convertInsertingPartitionedTable")
        state = replicate(cfg, store)["src-to-tgt"]
        assert state.events_applied == 1
        assert_equal(m.src, m.tgt, rules)
        assert read(table) == read(f"tgt_{table}") == expected

        assert insert((5, "e", 5.5, DAYS[0])) == []  # Spark's own writer: files, no event
        replicate(cfg, store)
        missing = differences(m.src, m.tgt, rules)
        assert {(d.kind, d.object) for d in missing} == {("missing", "file")}, missing
        data = [d.name for d in missing if "/part-" in d.name]  # and its Hadoop .crc beside it
        assert len(data) == 1 and data[0].startswith(f"{db}.orders/dt={DAYS[0]}/part-"), missing
        assert (5, "e", 5.5, DAYS[0]) not in read(f"tgt_{table}")
        runner = PolicyRunner(cfg, rules, store, lease_owner())
        try:
            assert runner.resync("Spark wrote files without an event").data.copied >= 1
        finally:
            runner.close()
        assert_equal(m.src, m.tgt, rules)
        assert read(table) == read(f"tgt_{table}") == expected
    finally:
        store.dispose()
