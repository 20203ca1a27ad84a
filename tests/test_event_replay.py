"""Replaying a metastore's notification log rebuilds its catalog in an empty metastore.

On each backend: two real hivemesh servers (A and B, fresh stores, separate warehouses). A long
seeded random mix of DDL, partition changes, functions, column statistics and transactions (open,
allocate write ids, ACID write notifications, commit, abort) runs on A through a Thrift client;
then A's whole log is replayed into B with :mod:`hivemesh.metastore.replay` (in two halves, resuming
from the first half's checkpoint), and both catalogs must be equal.

Compared modulo, and why:
- locations: under each server's own warehouse (replay maps A's warehouse prefix to B's);
- ``createTime`` of tables and partitions, and table ``id``: the target sets them on create, as Hive
  does (a replicated object is a new object there);
- ``createTime`` of the ``default`` database: each server creates its own at start-up;
- txn ids: B has its own (mapped per replication policy); compared are the write-id lists
  (ValidWriteIdList strings) each side gives for its own current snapshot, and the numbers of open
  and aborted txns.
Not generated: ``alter_function`` and ``alter_table`` with CASCADE, which Hive's event format does
not carry (see replay.py).
"""

from __future__ import annotations

import ast
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AddPartitionsRequest,
    AllocateTableWriteIdsRequest,
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    CommitTxnRequest,
    Database,
    DoubleColumnStatsData,
    DropPartitionsRequest,
    FieldSchema,
    FireEventRequest,
    FireEventRequestData,
    Function,
    GetValidWriteIdsRequest,
    InsertEventRequestData,
    InvalidOperationException,
    LongColumnStatsData,
    OpenTxnRequest,
    Partition,
    PartitionsStatsRequest,
    RequestPartsSpec,
    ResourceUri,
    SerDeInfo,
    SetPartitionsStatsRequest,
    StorageDescriptor,
    StringColumnStatsData,
    Table,
    TableStatsRequest,
    WriteNotificationLogRequest,
)
from thrift.Thrift import TException

from hivemesh import metastore
from hivemesh.hive import event_messages, events
from hivemesh.metastore import replay
from tests.conftest import drop_pg_database, make_pg_database
from tests.support.servers import HivemeshProcess, ThriftClient

LONG_MAX = 9223372036854775807
STEPS = 450


# ---------------------------------------------------------------- servers
@pytest.fixture(scope="module")
def pair(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Source A and target B: hivemesh servers on fresh stores of ``backend_url``'s kind."""
    base = tmp_path_factory.mktemp("replay")
    urls: list[str] = []
    for side in ("a", "b"):
        if backend_url.startswith("sqlite"):
            urls.append(f"sqlite:///{base / side}.db")
        else:
            urls.append(make_pg_database("hivemesh_replay"))
    procs = [HivemeshProcess(u, base / f"wh_{s}", base / f"{s}.log") for u, s in zip(urls, "ab", strict=True)]
    try:
        for p in procs:
            p.start()
        clients = [ThriftClient(p.host, p.port) for p in procs]
        try:
            yield clients[0].client, clients[1].client
        finally:
            for c in clients:
                c.close()
    finally:
        for p in procs:
            p.stop()
        for u in urls:
            if not u.startswith("sqlite"):
                drop_pg_database(u)


# ---------------------------------------------------------------- the random workload
TYPES = ["int", "bigint", "string", "double", "boolean", "decimal(10,2)"]


class Workload:
    """A seeded random mix of metadata changes and transactions on one client."""

    def __init__(self, hms: Any, seed: int):
        self.hms = hms
        self.rng = random.Random(seed)
        self.dbs = ["r_" + uuid.uuid4().hex[:6] + f"_{i}" for i in range(4)]
        self.open_txns: list[int] = []
        self.written_tables: set[str] = set()
        self.counter = 0
        self.ok = 0
        self.failed = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- state
    def existing_dbs(self) -> list[str]:
        return [d for d in self.hms.get_all_databases() if d in self.dbs]

    def tables(self, db: str) -> list[str]:
        return list(self.hms.get_all_tables(db))

    def pick_table(self, partitioned: bool | None = None) -> tuple[str, Table] | None:
        dbs = self.existing_dbs()
        self.rng.shuffle(dbs)
        for db in dbs:
            names = self.tables(db)
            self.rng.shuffle(names)
            for n in names:
                t = self.hms.get_table(db, n)
                if partitioned is None or bool(t.partitionKeys) == partitioned:
                    return db, t
        return None

    # -- operations
    def op_create_db(self) -> None:
        missing = [d for d in self.dbs if d not in self.existing_dbs()]
        if missing:
            d = self.rng.choice(missing)
            self.hms.create_database(
                Database(
                    name=d, description=self.rng.choice([None, "desc"]), parameters={"p": str(self.counter)}
                )
            )

    def op_alter_db(self) -> None:
        dbs = self.existing_dbs()
        if dbs:
            d = self.rng.choice(dbs)
            db = self.hms.get_database(d)
            db.parameters = {**(db.parameters or {}), self.name("k"): "v"}
            db.description = self.name("desc ")
            self.hms.alter_database(d, db)

    def op_drop_db(self) -> None:
        dbs = self.existing_dbs()
        if dbs and self.rng.random() < 0.5:
            self.hms.drop_database(self.rng.choice(dbs), self.rng.random() < 0.5, True)

    def op_create_table(self) -> None:
        dbs = self.existing_dbs()
        if not dbs:
            return
        partitioned = self.rng.random() < 0.6
        cols = [
            FieldSchema(f"c{i}", self.rng.choice(TYPES), self.rng.choice([None, "comment"])) for i in range(3)
        ]
        external = self.rng.random() < 0.2
        self.hms.create_table(
            Table(
                tableName=self.name("t"),
                dbName=self.rng.choice(dbs),
                owner="alice",
                sd=StorageDescriptor(
                    cols=cols,
                    inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                    outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    serdeInfo=SerDeInfo(
                        None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {"a": "1"}
                    ),
                    bucketCols=[],
                    sortCols=[],
                    parameters={},
                ),
                partitionKeys=[FieldSchema("ds", "string", None), FieldSchema("hr", "int", None)]
                if partitioned
                else [],
                tableType="EXTERNAL_TABLE" if external else "MANAGED_TABLE",
                parameters={"EXTERNAL": "TRUE"} if external else {"transactional": "true"},
            )
        )

    def op_alter_table(self) -> None:
        got = self.pick_table()
        if got:
            db, t = got
            t.parameters = {**(t.parameters or {}), self.name("tp"): "x"}
            if self.rng.random() < 0.4:
                t.sd.cols.append(FieldSchema(self.name("n"), self.rng.choice(TYPES), None))
            self.hms.alter_table(db, t.tableName, t)

    def op_rename_table(self) -> None:
        got = self.pick_table()
        dbs = self.existing_dbs()
        if got and dbs:
            db, t = got
            old = t.tableName
            t.dbName = self.rng.choice(dbs)
            t.tableName = self.name("rn")
            self.hms.alter_table(db, old, t)

    def op_drop_table(self) -> None:
        got = self.pick_table()
        if got and self.rng.random() < 0.5:
            db, t = got
            self.hms.drop_table(db, t.tableName, self.rng.random() < 0.5)

    def _values(self) -> list[str]:
        return [self.rng.choice(["2024-01-01", "2024-01-02", "x y", "a/b"]), str(self.rng.randrange(4))]

    def op_add_partitions(self) -> None:
        got = self.pick_table(partitioned=True)
        if got:
            db, t = got
            parts = []
            for _ in range(self.rng.randrange(1, 6)):
                p = Partition(values=self._values(), dbName=db, tableName=t.tableName, parameters={"k": "v"})
                if self.rng.random() < 0.3:
                    p.sd = StorageDescriptor(**t.sd.__dict__)
                    p.sd.location = None
                    p.sd.cols = [*t.sd.cols, FieldSchema("pcol", "int", None)]
                parts.append(p)
            self.hms.add_partitions_req(
                AddPartitionsRequest(
                    db, t.tableName, parts, ifNotExists=self.rng.random() < 0.7, needResult=True
                )
            )

    def _pick_partition(self) -> tuple[str, Table, Partition] | None:
        got = self.pick_table(partitioned=True)
        if got:
            db, t = got
            parts = self.hms.get_partitions(db, t.tableName, -1)
            if parts:
                return db, t, self.rng.choice(parts)
        return None

    def op_alter_partition(self) -> None:
        got = self._pick_partition()
        if got:
            db, t, p = got
            p.parameters = {**(p.parameters or {}), self.name("pp"): "1"}
            self.hms.alter_partitions(db, t.tableName, [p])

    def op_rename_partition(self) -> None:
        got = self._pick_partition()
        if got:
            db, t, p = got
            self.hms.rename_partition(db, t.tableName, p.values, Partition(values=self._values()))

    def op_drop_partitions(self) -> None:
        got = self._pick_partition()
        if got:
            db, t, p = got
            if self.rng.random() < 0.5:
                self.hms.drop_partition(db, t.tableName, p.values, self.rng.random() < 0.5)
            else:
                names = self.hms.get_partition_names(db, t.tableName, -1)
                pick = self.rng.sample(names, min(len(names), 2))
                self.hms.drop_partitions_req(
                    DropPartitionsRequest(db, t.tableName, RequestPartsSpec(names=pick), deleteData=True)
                )

    def op_function(self) -> None:
        dbs = self.existing_dbs()
        if not dbs:
            return
        db = self.rng.choice(dbs)
        names = self.hms.get_functions(db, "*")
        if names and self.rng.random() < 0.4:
            self.hms.drop_function(db, self.rng.choice(names))
        else:
            uris = [ResourceUri(1, f"file:/jars/{self.counter}.jar")] if self.rng.random() < 0.5 else []
            self.hms.create_function(Function(self.name("fn"), db, "com.example.Fn", "bob", 1, 0, 1, uris))

    def _stats_obj(self, col: FieldSchema) -> ColumnStatisticsObj:
        r = self.rng
        if col.type in ("int", "bigint"):
            data = ColumnStatisticsData(
                longStats=LongColumnStatsData(
                    r.randrange(-9, 0), r.randrange(10**9), r.randrange(5), r.randrange(99)
                )
            )
        elif col.type == "double":
            data = ColumnStatisticsData(
                doubleStats=DoubleColumnStatsData(
                    -r.random() * 1e12, r.random() / 7, r.randrange(5), r.randrange(99)
                )
            )
        else:
            data = ColumnStatisticsData(
                stringStats=StringColumnStatsData(
                    r.randrange(50), r.random() * 10, r.randrange(5), r.randrange(99)
                )
            )
        return ColumnStatisticsObj(col.name, col.type, data)

    def op_stats(self) -> None:
        got = self.pick_table()
        if not got:
            return
        db, t = got
        cols = [c for c in t.sd.cols if c.type in ("int", "bigint", "double", "string")]
        if not cols:
            return
        objs = [self._stats_obj(c) for c in self.rng.sample(cols, self.rng.randrange(1, len(cols) + 1))]
        parts = self.hms.get_partition_names(db, t.tableName, -1) if t.partitionKeys else []
        roll = self.rng.random()
        if roll < 0.15:
            self.hms.delete_table_column_statistics(db, t.tableName, None, "hive")
        elif roll < 0.25 and parts:
            self.hms.delete_partition_column_statistics(db, t.tableName, self.rng.choice(parts), None, "hive")
        elif parts and roll < 0.7:
            chosen = self.rng.sample(parts, min(len(parts), 3))
            self.hms.set_aggr_stats_for(
                SetPartitionsStatsRequest(
                    colStats=[
                        ColumnStatistics(ColumnStatisticsDesc(False, db, t.tableName, n), objs, engine="hive")
                        for n in chosen
                    ]
                )
            )
        else:
            self.hms.update_table_column_statistics(
                ColumnStatistics(ColumnStatisticsDesc(True, db, t.tableName), objs, engine="hive")
            )

    def op_open_txns(self) -> None:
        if len(self.open_txns) < 8:
            self.open_txns += self.hms.open_txns(
                OpenTxnRequest(self.rng.randrange(1, 4), "etl", "host")
            ).txn_ids

    def op_allocate(self) -> None:
        got = self.pick_table()
        if got and self.open_txns:
            db, t = got
            txns = self.rng.sample(self.open_txns, min(len(self.open_txns), self.rng.randrange(1, 3)))
            res = self.hms.allocate_table_write_ids(
                AllocateTableWriteIdsRequest(db, t.tableName, txnIds=txns)
            )
            self.written_tables.add(f"{db}.{t.tableName}")
            if not t.partitionKeys and self.rng.random() < 0.5:
                p = res.txnToWriteIds[0]
                self.hms.add_write_notification_log(
                    WriteNotificationLogRequest(
                        p.txnId,
                        p.writeId,
                        db,
                        t.tableName,
                        InsertEventRequestData(filesAdded=[f"{t.sd.location}/delta_{p.writeId}/bucket_0"]),
                    )
                )
            if self.rng.random() < 0.2:
                self.hms.fire_listener_event(
                    FireEventRequest(
                        True,
                        FireEventRequestData(insertData=InsertEventRequestData(filesAdded=[], replace=False)),
                        db,
                        t.tableName,
                    )
                )

    def op_end_txn(self) -> None:
        if self.open_txns:
            txn = self.rng.choice(self.open_txns)
            self.open_txns.remove(txn)
            if self.rng.random() < 0.65:
                self.hms.commit_txn(CommitTxnRequest(txnid=txn))
            else:
                self.hms.abort_txn(AbortTxnRequest(txnid=txn))

    OPS = [
        ("op_create_db", 3),
        ("op_alter_db", 2),
        ("op_drop_db", 1),
        ("op_create_table", 8),
        ("op_alter_table", 4),
        ("op_rename_table", 2),
        ("op_drop_table", 2),
        ("op_add_partitions", 9),
        ("op_alter_partition", 4),
        ("op_rename_partition", 2),
        ("op_drop_partitions", 3),
        ("op_function", 3),
        ("op_stats", 6),
        ("op_open_txns", 4),
        ("op_allocate", 5),
        ("op_end_txn", 4),
    ]

    def finale(self) -> None:
        """Deterministic changes on a fresh database, so that every kind of event shapes the final
        catalog (the random part may drop what it changed)."""
        db = "r_" + uuid.uuid4().hex[:6] + "_fin"
        self.dbs.append(db)
        h = self.hms
        h.create_database(Database(name=db))
        cols = [FieldSchema("c0", "bigint", None), FieldSchema("c1", "string", None)]
        for name, keys in (("fin_p", [FieldSchema("ds", "string", None)]), ("fin_u", [])):
            h.create_table(
                Table(
                    tableName=name,
                    dbName=db,
                    sd=StorageDescriptor(cols=list(cols), serdeInfo=SerDeInfo(parameters={})),
                    partitionKeys=keys,
                    tableType="MANAGED_TABLE",
                    parameters={},
                )
            )
        h.add_partitions([Partition(values=[str(i)], dbName=db, tableName="fin_p") for i in range(4)])
        for name in ("fin_p", "fin_u"):
            h.update_table_column_statistics(
                ColumnStatistics(
                    ColumnStatisticsDesc(True, db, name), [self._stats_obj(c) for c in cols], engine="hive"
                )
            )
        h.set_aggr_stats_for(
            SetPartitionsStatsRequest(
                colStats=[
                    ColumnStatistics(
                        ColumnStatisticsDesc(False, db, "fin_p", f"ds={i}"),
                        [self._stats_obj(c) for c in cols],
                        engine="hive",
                    )
                    for i in range(3)
                ]
            )
        )
        h.delete_table_column_statistics(db, "fin_u", "c0", "hive")
        h.delete_partition_column_statistics(db, "fin_p", "ds=1", "c1", "hive")
        p = h.get_partition(db, "fin_p", ["2"])
        p.parameters["touched"] = "yes"
        h.alter_partition(db, "fin_p", p)
        h.rename_partition(db, "fin_p", ["0"], Partition(values=["9"]))
        h.drop_partition(db, "fin_p", ["3"], True)
        t = h.get_table(db, "fin_u")
        t.tableName = "fin_u2"
        h.alter_table(db, "fin_u", t)
        alter = h.get_database(db)
        alter.parameters = {"final": "1"}
        h.alter_database(db, alter)
        h.create_function(Function("fin_fn", db, "com.example.Fin", "bob", 1, 0, 1, []))
        txns = h.open_txns(OpenTxnRequest(3, "etl", "host")).txn_ids
        for name in ("fin_p", "fin_u2"):
            h.allocate_table_write_ids(AllocateTableWriteIdsRequest(db, name, txnIds=txns))
            self.written_tables.add(f"{db}.{name}")
        h.commit_txn(CommitTxnRequest(txnid=txns[0]))
        h.abort_txn(AbortTxnRequest(txnid=txns[1]))  # txns[2] stays open

    def run(self, steps: int) -> None:
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for d in self.dbs[:2]:
            self.hms.create_database(Database(name=d))
        for _ in range(steps):
            op = self.rng.choices(names, weights)[0]
            try:
                getattr(self, op)()
                self.ok += 1
            except TException:  # an HMS exception (e.g. AlreadyExists): no change, no event
                self.failed += 1
        self.finale()


# ---------------------------------------------------------------- catalog snapshots
def _valid_txn_list(hms: Any) -> tuple[str, int, int]:
    r = hms.get_open_txns()
    aborted_bits = int.from_bytes(r.abortedBits or b"", "little")
    ids = list(r.open_txns or [])
    aborted = [t for i, t in enumerate(ids) if aborted_bits >> i & 1]
    opened = [t for i, t in enumerate(ids) if not aborted_bits >> i & 1]
    text = "{}:{}:{}:{}".format(
        r.txn_high_water_mark,
        r.min_open_txn if r.min_open_txn is not None else LONG_MAX,
        ",".join(map(str, opened)),
        ",".join(map(str, aborted)),
    )
    return text, len(opened), len(aborted)


def _write_id_list(v: Any) -> str:
    """Hive's ValidReaderWriteIdList.writeToString of a TableValidWriteIds."""
    bits = int.from_bytes(v.abortedBits or b"", "little")
    inv = list(v.invalidWriteIds or [])
    opened = [w for i, w in enumerate(inv) if not bits >> i & 1]
    aborted = [w for i, w in enumerate(inv) if bits >> i & 1]
    min_open = v.minOpenWriteId if v.minOpenWriteId is not None else LONG_MAX
    return f"{v.fullTableName}:{v.writeIdHighWaterMark}:{min_open}:{','.join(map(str, opened))}:{','.join(map(str, aborted))}"


def snapshot(
    hms: Any, dbs: list[str], write_tables: set[str], relocate: replay.Relocate | None = None
) -> dict:
    """The catalog of ``dbs`` (and the ``default`` database) as comparable values."""
    rel = relocate or (lambda x: x)
    out: dict[str, Any] = {"dbs": {}, "tables": {}, "partitions": {}, "functions": {}, "stats": {}}
    for name in hms.get_all_databases():
        if name not in dbs and name != "default":
            continue
        db = hms.get_database(name)
        db.locationUri = rel(db.locationUri)
        if name == "default":
            db.createTime = None
        out["dbs"][name] = db
        for tname in hms.get_all_tables(name):
            t = hms.get_table(name, tname)
            t.createTime, t.id = None, None
            t.sd.location = rel(t.sd.location)
            out["tables"][f"{name}.{tname}"] = t
            cols = [c.name for c in t.sd.cols]
            tstats = hms.get_table_statistics_req(
                TableStatsRequest(name, tname, cols, engine="hive")
            ).tableStats
            out["stats"][f"{name}.{tname}"] = sorted(tstats, key=lambda o: o.colName)
            parts = hms.get_partitions(name, tname, -1)
            for p in parts:
                p.createTime = None
                p.sd.location = rel(p.sd.location)
            out["partitions"][f"{name}.{tname}"] = parts
            if parts:
                names = hms.get_partition_names(name, tname, -1)
                pstats = hms.get_partitions_statistics_req(
                    PartitionsStatsRequest(name, tname, cols, names, engine="hive")
                ).partStats
                out["stats"][f"{name}.{tname}/parts"] = {
                    k: sorted(v, key=lambda o: o.colName) for k, v in (pstats or {}).items()
                }
        out["functions"][name] = sorted(
            (hms.get_function(name, f) for f in hms.get_functions(name, "*")), key=lambda f: f.functionName
        )
    txn_list, n_open, n_aborted = _valid_txn_list(hms)
    out["txns"] = (n_open, n_aborted)
    names = sorted(write_tables | set(out["tables"]))
    resp = hms.get_valid_write_ids(GetValidWriteIdsRequest(fullTableNames=names, validTxnList=txn_list))
    out["write_ids"] = {v.fullTableName: _write_id_list(v) for v in resp.tblValidWriteIds}
    return out


# ---------------------------------------------------------------- the test
def test_replay_rebuilds_the_catalog(pair: tuple[Any, Any]) -> None:
    a, b = pair
    work = Workload(a, seed=20240611)
    work.run(STEPS)

    wh_a = a.get_config_value("hive.metastore.warehouse.dir", "")
    wh_b = b.get_config_value("hive.metastore.warehouse.dir", "")
    assert wh_a and wh_b and wh_a != wh_b
    relocate = replay.relocator(wh_a, wh_b)

    source = list(replay.read_events(a, 0, batch=100))
    assert [e.eventId for e in source] == list(range(1, len(source) + 1))  # dense from 1
    kinds = {e.eventType for e in source}
    for expected in (
        "CREATE_DATABASE",
        "ALTER_DATABASE",
        "CREATE_TABLE",
        "ALTER_TABLE",
        "DROP_TABLE",
        "ADD_PARTITION",
        "ALTER_PARTITION",
        "DROP_PARTITION",
        "CREATE_FUNCTION",
        "UPDATE_TBL_COL_STAT_EVENT",
        "UPDATE_PART_COL_STAT_EVENT",
        "OPEN_TXN",
        "COMMIT_TXN",
        "ABORT_TXN",
        "ALLOC_WRITE_ID_EVENT",
    ):
        assert expected in kinds, f"the workload made no {expected} event"

    # replay in two halves, the second resuming from the first's checkpoint
    half = len(source) // 2
    first = replay.replay(source[:half], b, "replay_test", relocate)
    assert first.last_event_id == half
    rest = replay.replay(replay.read_events(a, first.last_event_id, batch=50), b, "replay_test", relocate)
    assert rest.last_event_id == len(source)
    assert first.applied + rest.applied + first.skipped + rest.skipped == len(source)
    skipped = {**first.skipped_types}
    for k, v in rest.skipped_types.items():
        skipped[k] = skipped.get(k, 0) + v
    assert set(skipped) <= {"INSERT"}

    want = snapshot(a, work.dbs, work.written_tables, relocate)
    got = snapshot(b, work.dbs, work.written_tables)
    # a catalog worth comparing
    assert len(want["tables"]) >= 5
    assert sum(len(p) for p in want["partitions"].values()) >= 10
    assert any(v for k, v in want["stats"].items() if not k.endswith("/parts"))
    assert any(v for k, v in want["stats"].items() if k.endswith("/parts"))
    assert sum(len(f) for f in want["functions"].values()) >= 1
    assert any(":" in s and s.split(":")[1] != "0" for s in want["write_ids"].values())
    assert want["txns"][0] >= 1 and want["txns"][1] >= 1

    assert_same_catalog(got, want, ("dbs", "functions", "txns"))


def assert_same_catalog(got: dict[str, Any], want: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Two :func:`snapshot` results equal: ``keys`` whole, then tables and partitions one by one
    (so a failure names the object), column statistics and write-id lists."""
    for key in keys:
        assert got[key] == want[key], key
    assert set(got["tables"]) == set(want["tables"])
    for name, t in want["tables"].items():
        assert got["tables"][name] == t, name
    for name, parts in want["partitions"].items():
        assert got["partitions"][name] == parts, name
    assert got["stats"] == want["stats"]
    assert got["write_ids"] == want["write_ids"]


def test_every_event_type_hivemesh_writes_is_replayed_or_skipped_for_a_reason() -> None:
    """Each event type the metastore writes decodes to its own message class, which replay either
    applies (``HANDLERS``) or skips for a stated reason (``SKIPPED``): a new or renamed message
    class cannot silently become "skipped"."""
    written = set()
    for path in Path(metastore.__file__).parent.rglob("*.py"):  # with the txn operations (txn/)
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "events"
                and node.attr not in ("SERVER", "SERVICE_PRINCIPAL")
                and isinstance(getattr(events, node.attr, None), str)
            ):
                written.add(getattr(events, node.attr))
    assert written == set(events.EVENT_TYPES)
    assert set(event_messages.REGISTRY) == set(events.EVENT_TYPES) | set(events.READ_ONLY_EVENT_TYPES)
    for event_type, cls in event_messages.REGISTRY.items():
        assert (cls in replay.HANDLERS) != (cls in replay.SKIPPED), event_type
        assert cls in replay.HANDLERS or replay.SKIPPED[cls].strip(), event_type
    assert set(replay.HANDLERS) | set(replay.SKIPPED) == {
        *event_messages.REGISTRY.values(),
        event_messages.Unknown,
    }
    assert len(set(event_messages.REGISTRY.values())) == len(event_messages.REGISTRY)


def test_relocator() -> None:
    r = replay.relocator("file:/w/a/", "file:/w/b")
    assert r("file:/w/a/db.db/t") == "file:/w/b/db.db/t"
    assert r("file:/w/a") == "file:/w/b"
    assert r("file:/w/ab/t") == "file:/w/ab/t"
    assert r(None) is None


def test_replay_skips_unknown_and_data_events() -> None:
    """Events without a catalog change of their own are counted as skipped, not applied."""
    from hive_metastore.ttypes import NotificationEvent

    calls: list[str] = []

    class Target:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return lambda *a, **k: calls.append(name)

    evs = [
        NotificationEvent(1, 0, "INSERT", "d", "t", '{"tableObjJson":null,"files":[]}', "json-0.2", "hive"),
        NotificationEvent(2, 0, "NEW_KIND", "d", "t", "{}", "json-0.2", "hive"),
        NotificationEvent(3, 0, "ABORT_TXN", None, None, '{"txnid":7,"dbsUpdated":[]}', "json-0.2", None),
    ]
    res = replay.replay(evs, Target(), "p")
    assert (res.applied, res.skipped, res.last_event_id) == (1, 2, 3)
    assert res.skipped_types == {"INSERT": 1, "NEW_KIND": 1}
    assert calls == ["abort_txn"]


def test_replay_applies_type_changes_the_source_allowed(pair: tuple[Any, Any]) -> None:
    """A source that allowed an incompatible column type change (``setMetaConf`` of
    ``hive.metastore.disallow.incompatible.col.type.changes``) replicates; the target refuses the
    same change from an ordinary client, as Hive does by default."""
    a, b = pair
    start = a.get_current_notificationEventId().eventId  # only this test's events (``pair`` is shared)
    db = "retype_" + uuid.uuid4().hex[:6]
    a.create_database(Database(name=db, parameters={}))
    cols = [FieldSchema("x", "string", None), FieldSchema("y", "int", None)]
    sd = StorageDescriptor(
        cols=cols, serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde")
    )
    a.create_table(
        Table(tableName="t", dbName=db, sd=sd, partitionKeys=[], parameters={}, tableType="MANAGED_TABLE")
    )
    t = a.get_table(db, "t")
    t.sd.cols = [FieldSchema("x", "int", None), FieldSchema("y", "int", None)]
    with pytest.raises(InvalidOperationException, match="incompatible with the existing columns"):
        a.alter_table(db, "t", t)
    a.setMetaConf("hive.metastore.disallow.incompatible.col.type.changes", "false")
    try:
        a.alter_table(db, "t", t)
    finally:
        a.setMetaConf("hive.metastore.disallow.incompatible.col.type.changes", "true")
    wh_a = a.get_config_value("hive.metastore.warehouse.dir", "")
    wh_b = b.get_config_value("hive.metastore.warehouse.dir", "")
    result = replay.replay(replay.read_events(a, start), b, "retype", replay.relocator(wh_a, wh_b))
    assert result.skipped == 0
    assert [(c.name, c.type) for c in b.get_table(db, "t").sd.cols] == [("x", "int"), ("y", "int")]
    # the replayer allowed such changes on its own connection (per-connection, as in Hive)
    assert b.getMetaConf("hive.metastore.disallow.incompatible.col.type.changes") == "false"
    b.setMetaConf("hive.metastore.disallow.incompatible.col.type.changes", "true")
    back = b.get_table(db, "t")
    back.sd.cols = [FieldSchema("x", "boolean", None), FieldSchema("y", "int", None)]
    with pytest.raises(InvalidOperationException) as refused:
        b.alter_table(db, "t", back)
    assert refused.value.message.endswith("respective positions :\nx")
