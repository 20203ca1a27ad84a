"""``hivemesh replicate verify``'s comparison (:func:`hivemesh.replication.verify.compare`).

Two real hivemesh servers (A the source, B the target, separate warehouses) get the same
database, tables, partitions, function, column statistics and data files; compare() must find
nothing. Then one divergence at a time is made on B (each test in its own database) and must be
reported exactly: deleted, changed and extra files, a dropped partition, changed table parameter
and column type, a missing function, extra tables (reported only when the policy matches them),
and differences the comparison must ignore (tables outside the policy, bookkeeping parameters).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import (
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    Database,
    EnvironmentContext,
    FieldSchema,
    Function,
    LongColumnStatsData,
    Partition,
    ResourceUri,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.metastore.replay import relocator
from hivemesh.replication.config import DataMode, PolicyConfig
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.verify import Difference, compare, summarize, to_json
from hivemesh.storage.locations import local_path
from tests.support.servers import HivemeshProcess, ThriftClient

DAYS = ["2024-01-01", "2024-01-02"]


@dataclass
class Servers:
    a: Any
    b: Any
    relocate: Any


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Source A and target B: hivemesh servers on fresh SQLite stores and their own warehouses."""
    base = tmp_path_factory.mktemp("verify")
    procs = [
        HivemeshProcess(f"sqlite:///{base / side}.db", base / f"wh_{side}", base / f"{side}.log")
        for side in "ab"
    ]
    clients: list[ThriftClient] = []
    try:
        for p in procs:
            p.start()
        clients = [ThriftClient(p.host, p.port) for p in procs]
        a, b = clients[0].client, clients[1].client
        yield Servers(a, b, relocator(_warehouse(a), _warehouse(b)))
    finally:
        for c in clients:
            c.close()
        for p in procs:
            p.stop()


def _warehouse(hms: Any) -> str:
    """The server's warehouse root as it writes locations (the default database's parent)."""
    probe = "probe_" + uuid.uuid4().hex[:8]
    hms.create_database(Database(name=probe))
    try:
        return hms.get_database(probe).locationUri.rstrip("/").rsplit("/", 1)[0]
    finally:
        hms.drop_database(probe, True, True)


# ---------------------------------------------------------------- the mirrored content
def _sd(cols: list[FieldSchema]) -> StorageDescriptor:
    return StorageDescriptor(
        cols=cols,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"field.delim": ","}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def _cols() -> list[FieldSchema]:
    return [FieldSchema("id", "int", None), FieldSchema("amount", "double", "in EUR")]


def _write(location: str, rel: str, data: bytes) -> Path:
    path = Path(local_path(location) if location.startswith("file:") else location) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _table(hms: Any, db: str, name: str, partitioned: bool, params: dict[str, str] | None = None) -> Table:
    hms.create_table(
        Table(
            tableName=name,
            dbName=db,
            owner="alice",
            sd=_sd(_cols()),
            partitionKeys=[FieldSchema("dt", "string", None)] if partitioned else [],
            tableType="EXTERNAL_TABLE",
            parameters={"EXTERNAL": "TRUE", "comment": "orders of the day", **(params or {})},
        )
    )
    return hms.get_table(db, name)


def _build(hms: Any, db: str) -> None:
    """The same catalog and files on either server (locations under its own warehouse)."""
    hms.create_database(Database(name=db, description="sales data", parameters={"team": "fin"}))
    orders = _table(hms, db, "orders", partitioned=True)
    for day in DAYS:
        sd = _sd(_cols())
        sd.location = f"{orders.sd.location}/dt={day}"
        hms.add_partition(
            Partition(values=[day], dbName=db, tableName="orders", sd=sd, parameters={"src": "etl"})
        )
        _write(sd.location, "part-0.txt", f"1,2.5\n2,{day}\n".encode())
        _write(sd.location, "sub/part-1.txt", b"3,4.0\n")
    items = _table(hms, db, "items", partitioned=False)
    _write(items.sd.location, "items-0.txt", b"7,1.0\n8,2.0\n")
    other = _table(hms, db, "other", partitioned=False)
    _write(other.sd.location, "o.txt", b"x\n")
    hms.update_table_column_statistics(
        ColumnStatistics(
            ColumnStatisticsDesc(True, db, "items"),
            [
                ColumnStatisticsObj(
                    "id", "int", ColumnStatisticsData(longStats=LongColumnStatsData(7, 8, 0, 2))
                )
            ],
            engine="hive",
        )
    )
    hms.create_function(
        Function("f1", db, "com.example.F1", "bob", 1, 0, 1, [ResourceUri(1, "file:/opt/udf/f1.jar")])
    )


@dataclass
class Mirror:
    db: str
    a: Any
    b: Any
    policy: PolicyConfig
    relocate: Any

    def compare(self, **kw: Any) -> list[Difference]:
        return compare(self.a, self.b, self.policy, self.relocate, ZoneStorage(), ZoneStorage(), **kw)

    def location(self, hms: Any, table: str, part: str | None = None) -> Path:
        loc = (
            hms.get_partition_by_name(self.db, table, part).sd.location
            if part
            else hms.get_table(self.db, table).sd.location
        )
        return Path(local_path(loc) if loc.startswith("file:") else loc)


@pytest.fixture
def mirror(servers: Servers) -> Mirror:
    """A fresh database built alike on A and B; the policy replicates it with a table list."""
    db = "v_" + uuid.uuid4().hex[:8]
    for hms in (servers.a, servers.b):
        _build(hms, db)
    policy = PolicyConfig(
        name="p", source="a", target="b", databases=[db], tables={db: ["orders", "items", "extra_.*"]}
    )
    m = Mirror(db, servers.a, servers.b, policy, servers.relocate)
    assert m.compare() == []
    return m


def _only(diffs: list[Difference]) -> Difference:
    assert len(diffs) == 1, diffs
    return diffs[0]


# ---------------------------------------------------------------- data files
def test_file_deleted_on_target(mirror: Mirror) -> None:
    target = mirror.location(mirror.b, "orders", "dt=2024-01-02") / "sub" / "part-1.txt"
    target.unlink()
    d = _only(mirror.compare())
    assert (d.kind, d.object, d.name) == (
        "missing",
        "file",
        f"{mirror.db}.orders/dt=2024-01-02/sub/part-1.txt",
    )
    assert str(target) in d.detail and "6 bytes" in d.detail


def test_byte_flipped_same_size(mirror: Mirror) -> None:
    target = mirror.location(mirror.b, "items") / "items-0.txt"
    data = bytearray(target.read_bytes())
    data[0] ^= 1
    target.write_bytes(bytes(data))
    d = _only(mirror.compare())
    assert (d.kind, d.object, d.name) == ("different", "file", f"{mirror.db}.items/items-0.txt")
    assert d.detail.startswith("md5: ")
    assert mirror.compare(check_data=False) == []


def test_size_differs(mirror: Mirror) -> None:
    target = mirror.location(mirror.b, "orders", "dt=2024-01-01") / "part-0.txt"
    target.write_bytes(target.read_bytes() + b"9,9.9\n")
    d = _only(mirror.compare())
    assert (d.kind, d.object, d.name) == ("different", "file", f"{mirror.db}.orders/dt=2024-01-01/part-0.txt")
    assert d.detail.startswith("size: 19 != 25")


def test_extra_file_and_temporaries(mirror: Mirror) -> None:
    loc = mirror.location(mirror.b, "orders", "dt=2024-01-01")
    (loc / "stray.txt").write_bytes(b"stray\n")
    (loc / ".part-9.txt.hivemesh-0123456789ab.tmp").write_bytes(b"copy in progress")
    d = _only(mirror.compare())
    assert (d.kind, d.object, d.name) == ("extra", "file", f"{mirror.db}.orders/dt=2024-01-01/stray.txt")
    assert "absent at the source" in d.detail


def test_metadata_only_policy_skips_files(mirror: Mirror) -> None:
    (mirror.location(mirror.b, "items") / "items-0.txt").unlink()
    mirror.policy = mirror.policy.model_copy(update={"data": DataMode.METADATA_ONLY})
    assert mirror.compare() == []


# ---------------------------------------------------------------- metadata
def test_partition_dropped_on_target(mirror: Mirror) -> None:
    mirror.b.drop_partition_by_name(mirror.db, "orders", "dt=2024-01-01", False)
    d = _only(mirror.compare())
    assert d == Difference(
        "missing", "partition", f"{mirror.db}.orders/dt=2024-01-01", "absent at the target"
    )


def test_partition_extra_on_target(mirror: Mirror) -> None:
    mirror.a.drop_partition_by_name(mirror.db, "orders", "dt=2024-01-02", False)
    d = _only(mirror.compare())
    assert d == Difference("extra", "partition", f"{mirror.db}.orders/dt=2024-01-02", "absent at the source")
    assert mirror.compare(propagate_drops=False) == []


def test_partition_parameter_changed(mirror: Mirror) -> None:
    part = mirror.b.get_partition_by_name(mirror.db, "orders", "dt=2024-01-02")
    part.parameters["src"] = "manual"
    mirror.b.alter_partition(mirror.db, "orders", part)
    d = _only(mirror.compare())
    assert d == Difference(
        "different", "partition", f"{mirror.db}.orders/dt=2024-01-02", "parameters['src']: 'etl' != 'manual'"
    )


def test_table_parameter_changed(mirror: Mirror) -> None:
    t = mirror.b.get_table(mirror.db, "orders")
    t.parameters["comment"] = "changed"
    mirror.b.alter_table(mirror.db, "orders", t)
    d = _only(mirror.compare())
    assert d == Difference(
        "different", "table", f"{mirror.db}.orders", "parameters['comment']: 'orders of the day' != 'changed'"
    )


def test_column_type_changed(mirror: Mirror) -> None:
    t = mirror.b.get_table(mirror.db, "orders")
    t.sd.cols[0].type = "bigint"
    mirror.b.alter_table(mirror.db, "orders", t)
    d = _only(mirror.compare())
    assert d == Difference("different", "table", f"{mirror.db}.orders", "sd.cols[0].type: 'int' != 'bigint'")


def test_bookkeeping_parameters_ignored(mirror: Mirror) -> None:
    t = mirror.b.get_table(mirror.db, "items")
    t.parameters.update({"numFiles": "42", "totalSize": "1", "impala_intermediate_stats_num_chunks": "3"})
    mirror.b.alter_table_with_environment_context(
        mirror.db, "items", t, EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})
    )
    assert mirror.b.get_table(mirror.db, "items").parameters["numFiles"] == "42"
    assert mirror.compare() == []


def test_database_changed(mirror: Mirror) -> None:
    db = mirror.b.get_database(mirror.db)
    db.parameters = {"team": "ops"}
    mirror.b.alter_database(mirror.db, db)
    d = _only(mirror.compare())
    assert d == Difference("different", "database", mirror.db, "parameters['team']: 'fin' != 'ops'")


def test_function_missing(mirror: Mirror) -> None:
    mirror.b.drop_function(mirror.db, "f1")
    d = _only(mirror.compare())
    assert d == Difference("missing", "function", f"{mirror.db}.f1", "absent at the target")


def test_column_statistics_changed(mirror: Mirror) -> None:
    mirror.b.update_table_column_statistics(
        ColumnStatistics(
            ColumnStatisticsDesc(True, mirror.db, "items"),
            [
                ColumnStatisticsObj(
                    "id", "int", ColumnStatisticsData(longStats=LongColumnStatsData(7, 8, 1, 2))
                )
            ],
            engine="hive",
        )
    )
    d = _only(mirror.compare())
    assert d == Difference(
        "different", "column_statistics", f"{mirror.db}.items.id", "statsData.longStats.numNulls: 0 != 1"
    )


def test_extra_tables_only_in_the_policy(mirror: Mirror) -> None:
    _table(mirror.b, mirror.db, "extra_t", partitioned=False)  # matches the policy's table rules
    _table(mirror.b, mirror.db, "scratch", partitioned=False)  # does not
    mirror.b.create_database(Database(name=mirror.db + "_x"))  # a database the policy does not match
    try:
        d = _only(mirror.compare())
        assert d == Difference("extra", "table", f"{mirror.db}.extra_t", "absent at the source")
        assert mirror.compare(propagate_drops=False) == []
    finally:
        mirror.b.drop_database(mirror.db + "_x", True, True)


def test_tables_outside_the_policy_ignored(mirror: Mirror) -> None:
    t = mirror.b.get_table(mirror.db, "other")
    t.parameters["comment"] = "changed"
    mirror.b.alter_table(mirror.db, "other", t)
    (mirror.location(mirror.b, "other") / "o.txt").unlink()
    mirror.b.drop_table(mirror.db, "other", False)
    assert mirror.compare() == []


def test_several_sorted_and_summarized(mirror: Mirror) -> None:
    mirror.b.drop_function(mirror.db, "f1")
    (mirror.location(mirror.b, "items") / "items-0.txt").unlink()
    mirror.b.drop_partition_by_name(mirror.db, "orders", "dt=2024-01-01", False)
    _table(mirror.b, mirror.db, "extra_t", partitioned=False)
    seen: list[str] = []
    diffs = mirror.compare(progress=seen.append)
    assert [(d.kind, d.object, d.name) for d in diffs] == [
        ("missing", "function", f"{mirror.db}.f1"),
        ("extra", "table", f"{mirror.db}.extra_t"),
        ("missing", "partition", f"{mirror.db}.orders/dt=2024-01-01"),
        ("missing", "file", f"{mirror.db}.items/items-0.txt"),
    ]
    assert summarize(diffs) == {
        "missing function": 1,
        "extra table": 1,
        "missing partition": 1,
        "missing file": 1,
    }
    assert to_json(diffs)[0] == {
        "kind": "missing",
        "object": "function",
        "name": f"{mirror.db}.f1",
        "detail": "absent at the target",
    }
    assert f"database {mirror.db}" in seen


def test_missing_database(servers: Servers) -> None:
    db = "v_" + uuid.uuid4().hex[:8]
    _build(servers.a, db)
    policy = PolicyConfig(name="p", source="a", target="b", databases=[db])
    diffs = compare(servers.a, servers.b, policy, servers.relocate, ZoneStorage(), ZoneStorage())
    assert diffs == [Difference("missing", "database", db, "absent at the target")]


# ---------------------------------------------------------------- paging (no server)
class _Fake:
    """An HMS client holding one partitioned table of ``n`` partitions in memory; records the
    sizes of the ``get_partitions_by_names`` calls."""

    def __init__(self, n: int):
        self.table = Table(
            tableName="big",
            dbName="d",
            owner="o",
            sd=_sd(_cols()),
            partitionKeys=[FieldSchema("k", "int", None)],
            tableType="MANAGED_TABLE",
            parameters={},
        )
        self.names = [f"k={i}" for i in range(n)]
        self.calls: list[int] = []

    def get_all_databases(self) -> list[str]:
        return ["d"]

    def get_database(self, name: str) -> Database:
        return Database(name=name)

    def get_functions(self, db: str, pattern: str) -> list[str]:
        return []

    def get_all_tables(self, db: str) -> list[str]:
        return ["big"]

    def get_table(self, db: str, name: str) -> Table:
        return self.table

    def get_table_statistics_req(self, req: Any) -> Any:
        return type("R", (), {"tableStats": []})()

    def get_partition_names(self, db: str, name: str, max_parts: int) -> list[str]:
        return list(self.names)

    def get_partitions_by_names(self, db: str, name: str, names: list[str]) -> list[Partition]:
        self.calls.append(len(names))
        return [
            Partition(values=[n.split("=")[1]], dbName=db, tableName=name, sd=_sd(_cols())) for n in names
        ]


def test_partitions_fetched_in_pages() -> None:
    a, b = _Fake(1234), _Fake(1234)
    b.names.remove("k=700")
    policy = PolicyConfig(name="p", source="a", target="b", databases=["d"], data="metadata_only")
    diffs = compare(a, b, policy, lambda x: x, ZoneStorage(), ZoneStorage())
    assert diffs == [Difference("missing", "partition", "d.big/k=700", "absent at the target")]
    assert a.calls == [500, 499, 234] and max(b.calls) <= 500
