"""Hive tables replicated as Delta Lake tables (issue 14): ``format: delta`` policies.

On each backend (SQLite, PostgreSQL; the two long sequences on SQLite only) the two real ``hivemesh metastore`` processes of
:mod:`tests.test_replication` are zones ``a`` (source, Hive tables) and ``b`` (target, Delta
replicas). Source data files are written with pyarrow (ORC, Parquet, text) and with hivemesh's
ACID writer; the metastore events are the real ones. Replicas are read back with delta-rs (its
log: versions, ``txn`` actions, ``commitInfo``) and the Parquet files it lists; rows are compared
with the source files read independently (pyarrow, and ``read_acid_location`` for ACID tables at
each write id). Spark with Delta reads the replicas in :mod:`tests.test_delta_spark`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as paorc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    FireEventRequest,
    FireEventRequestData,
    InsertEventRequestData,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

import tests.test_replication as repl
from hivemesh.acid.arrow_reader import read_acid_location, table_layout
from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.replication.delta.verify import read_delta, rows_digest
from hivemesh.storage.locations import local_path
from tests.test_replication import Mesh, Zones

zones = repl.zones
store_url = repl.store_url
mesh = repl.mesh

ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
)
PARQUET = (
    "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
)
TEXT = (
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
    "org.apache.hadoop.mapred.TextInputFormat",
    "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
)


def _policy(db: str, **kw: Any) -> dict[str, Any]:
    return {"name": f"{db}-delta", "source": "a", "target": "b", "databases": [db], "format": "delta", **kw}


def _sd(cols: list[FieldSchema], fmt: tuple[str, str, str], location: str | None = None) -> StorageDescriptor:
    params = {"field.delim": ","} if fmt == TEXT else {}
    return StorageDescriptor(
        cols=cols, location=location, inputFormat=fmt[1], outputFormat=fmt[2], compressed=False, numBuckets=-1,
        serdeInfo=SerDeInfo(None, fmt[0], params), bucketCols=[], sortCols=[], parameters={},
    )  # fmt: skip


def _table(hms: Any, db: str, name: str, cols: list[FieldSchema], fmt: tuple[str, str, str],
           parts: list[FieldSchema] | None = None, external: bool = False) -> Table:  # fmt: skip
    t = Table(
        tableName=name, dbName=db, owner="alice", sd=_sd(cols, fmt), partitionKeys=parts or [],
        parameters={"EXTERNAL": "TRUE"} if external else {},
        tableType="EXTERNAL_TABLE" if external else "MANAGED_TABLE",
    )  # fmt: skip
    hms.create_table(t)
    return hms.get_table(db, name)


def _write(location: str, name: str, table: pa.Table, fmt: tuple[str, str, str]) -> str:
    path = Path(local_path(location)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == ORC:
        paorc.write_table(table, str(path))
    elif fmt == PARQUET:
        pq.write_table(table, str(path))
    else:
        lines = [",".join("\\N" if v is None else str(v) for v in row.values()) for row in table.to_pylist()]
        path.write_text("".join(line + "\n" for line in lines))
    return f"{location.rstrip('/')}/{name}"


def _insert_event(
    hms: Any, db: str, table: str, files: list[str], partition: list[str] | None = None
) -> None:
    hms.fire_listener_event(
        FireEventRequest(
            successful=True,
            data=FireEventRequestData(insertData=InsertEventRequestData(filesAdded=files, replace=False)),
            dbName=db,
            tableName=table,
            partitionVals=partition,
        )  # fmt: skip
    )


def _replica(zones: Zones, db: str, name: str) -> tuple[Table, str]:
    """The target's entry of the replica and the replica's local path."""
    entry = zones.b.get_table(db, name)
    return entry, local_path(entry.sd.location)


def _rows(t: pa.Table, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in cols) for r in t.to_pylist()), key=repr)


def _require_spark_ddl() -> None:
    """Renames go through Delta Lake for Spark (Java 17 and the ``delta`` JVM bundle)."""
    from hivemesh.jvm import JavaNotFound, JvmArtifactError, find_java, resolve

    try:
        find_java(17)
        resolve("delta")
    except (JavaNotFound, JvmArtifactError) as e:
        reason = f"needs Java 17 and Delta Lake for Spark from Maven Central for Delta column mapping: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


# The two long sequences below run on SQLite zones only (each is minutes on the 2-core CI machine).
# What they check is the conversion of Hive tables into Delta replicas, which does not depend on
# the backend. On PostgreSQL, the zones' metastore calls they make are covered call by call by
# test_replication, test_events and test_txns, and the Delta runner's state in the replicator's
# store by the other tests of this module (every write id one commit, kill -9, status and run
# through the CLI, rule changes), which keep both backends.
SQLITE_ONLY = pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_plain_tables_follow_ddl_and_data(zones: Zones, mesh: Mesh) -> None:
    _require_spark_ddl()
    a, b = zones.a, zones.b
    db = "dl_plain"
    a.create_database(Database(name=db))
    # an external, partitioned ORC table; a managed Parquet table; a text table
    orders = _table(a, db, "orders", [FieldSchema("id", "bigint", "key"), FieldSchema("amount", "double", None)],
                    ORC, [FieldSchema("region", "string", None)], external=True)  # fmt: skip
    for region, ids in (("eu", [1, 2]), ("us", [3])):
        loc = f"{orders.sd.location}/region={region}"
        _write(loc, "000000_0", pa.table({"id": ids, "amount": [float(i) * 10 for i in ids]}), ORC)
        a.add_partition(
            Partition(
                values=[region],
                dbName=db,
                tableName="orders",
                sd=_sd(orders.sd.cols, ORC, loc),
                parameters={},
            )
        )
    items = _table(
        a, db, "items", [FieldSchema("sku", "string", None), FieldSchema("qty", "int", None)], PARQUET
    )
    _write(
        items.sd.location,
        "part-0.parquet",
        pa.table({"sku": ["a", "b"], "qty": pa.array([1, 2], pa.int32())}),
        PARQUET,
    )
    notes = _table(a, db, "notes", [FieldSchema("n", "int", None), FieldSchema("txt", "string", None)], TEXT)
    _write(notes.sd.location, "000000_0", pa.table({"n": [1, 2], "txt": ["x", None]}), TEXT)
    _insert_event(a, db, "notes", [f"{notes.sd.location}/000000_0"])

    mesh.write([_policy(db)]).once()

    entry, path = _replica(zones, db, "orders")
    assert entry.parameters["spark.sql.sources.provider"] == "delta" and entry.tableType == "EXTERNAL_TABLE"
    assert entry.sd.serdeInfo.parameters["path"] == entry.sd.location
    dt = DeltaTable(path)
    assert list(dt.metadata().partition_columns) == ["region"]
    assert [f.name for f in dt.schema().fields] == ["id", "amount", "region"]
    assert dt.schema().fields[0].metadata["comment"] == "key"
    assert _rows(read_delta(path), ["id", "amount", "region"]) == [
        (1, 10.0, "eu"),
        (2, 20.0, "eu"),
        (3, 30.0, "us"),
    ]
    assert _rows(read_delta(_replica(zones, db, "items")[1]), ["sku", "qty"]) == [("a", 1), ("b", 2)]
    assert _rows(read_delta(_replica(zones, db, "notes")[1]), ["n", "txt"]) == [(1, "x"), (2, None)]
    v0 = dt.version()
    before = set(pa.table(dt.get_add_actions(flatten=True))["path"].to_pylist())

    # INSERT INTO one partition: only the new file is converted, in one Delta commit
    new = _write(f"{orders.sd.location}/region=eu", "000001_0", pa.table({"id": [4], "amount": [40.0]}), ORC)
    _insert_event(a, db, "orders", [new], ["eu"])
    # ADD PARTITION with data, DROP PARTITION
    loc = f"{orders.sd.location}/region=apac"
    _write(loc, "000000_0", pa.table({"id": [5], "amount": [50.0]}), ORC)
    a.add_partition(
        Partition(
            values=["apac"], dbName=db, tableName="orders", sd=_sd(orders.sd.cols, ORC, loc), parameters={}
        )
    )
    a.drop_partition(db, "orders", ["us"], False)
    mesh.once()
    dt = DeltaTable(path)
    assert dt.version() == v0 + 1  # the batch's changes of one table: one commit
    last = dt.history(1)[0]
    assert last["hivemesh.source"] == f"{db}.orders" and "hivemesh.eventId" in last
    assert _rows(read_delta(path), ["id", "region"]) == [(1, "eu"), (2, "eu"), (4, "eu"), (5, "apac")]
    after = set(pa.table(dt.get_add_actions(flatten=True))["path"].to_pylist())
    # eu's first file kept (not rewritten), us's removed, the new eu file and apac's added
    assert len(before - after) == 1 and len(after - before) == 2 and len(before & after) == 1
    assert [p for p in before - after if p.startswith("region=us/")]

    # ADD COLUMNS and a comment change: Delta metadata only; an INSERT OVERWRITE of a table
    items = a.get_table(db, "items")
    items.sd.cols = [*items.sd.cols, FieldSchema("note", "varchar(10)", "added")]
    a.alter_table(db, "items", items)
    (Path(local_path(items.sd.location)) / "part-0.parquet").unlink()
    _write(
        items.sd.location,
        "part-1.parquet",
        pa.table({"sku": ["c"], "qty": pa.array([3], pa.int32()), "note": ["hi"]}),
        PARQUET,
    )
    _insert_event(a, db, "items", [f"{items.sd.location}/part-1.parquet"])
    mesh.once()
    ipath = _replica(zones, db, "items")[1]
    idt = DeltaTable(ipath)
    assert [f.name for f in idt.schema().fields] == ["sku", "qty", "note"]
    assert idt.schema().fields[2].metadata == {"hive.type": "varchar(10)", "comment": "added"}
    assert _rows(read_delta(ipath), ["sku", "qty", "note"]) == [("c", 3, "hi")]

    # RENAME a column of the ORC table (Hive reads ORC by position): Delta column mapping, no
    # file rewritten; files converted later carry the physical names
    orders = a.get_table(db, "orders")
    orders.sd.cols = [FieldSchema("order_id", "bigint", "key"), orders.sd.cols[1]]
    a.alter_table(db, "orders", orders)
    mesh.once()
    dt = DeltaTable(path)
    assert [f.name for f in dt.schema().fields] == ["order_id", "amount", "region"]
    assert dt.metadata().configuration["delta.columnMapping.mode"] == "name"
    assert set(pa.table(dt.get_add_actions(flatten=True))["path"].to_pylist()) == after  # nothing rewritten
    new = _write(
        f"{orders.sd.location}/region=apac", "000001_0", pa.table({"id": [6], "amount": [60.0]}), ORC
    )
    _insert_event(a, db, "orders", [new], ["apac"])
    mesh.once()
    assert _rows(read_delta(path), ["order_id", "region"]) == [
        (1, "eu"),
        (2, "eu"),
        (4, "eu"),
        (5, "apac"),
        (6, "apac"),
    ]

    # the Parquet table (read by name): REPLACE COLUMNS dropping qty and adding price, qty's
    # values gone and price null for the old file; the text table (by position): INT -> BIGINT,
    # a type change: the replica is written again (Delta's type widening would lock delta-rs out)
    items = a.get_table(db, "items")
    items.sd.cols = [items.sd.cols[0], items.sd.cols[2], FieldSchema("price", "string", None)]
    a.alter_table(db, "items", items)
    notes = a.get_table(db, "notes")
    notes.sd.cols = [FieldSchema("n", "bigint", None), notes.sd.cols[1]]
    a.alter_table(db, "notes", notes)
    mesh.once()
    idt = DeltaTable(ipath)
    assert [(f.name, f.type.type) for f in idt.schema().fields] == [
        ("sku", "string"),
        ("note", "string"),
        ("price", "string"),
    ]
    assert _rows(read_delta(ipath), ["sku", "note", "price"]) == [("c", "hi", None)]
    npath = _replica(zones, db, "notes")[1]
    assert [(f.name, f.type.type) for f in DeltaTable(npath).schema().fields] == [
        ("n", "long"),
        ("txt", "string"),
    ]
    assert _rows(read_delta(npath), ["n", "txt"]) == [(1, "x"), (2, None)]
    # another type change (BIGINT -> STRING): written again too
    notes.sd.cols = [FieldSchema("n", "string", None), notes.sd.cols[1]]
    a.alter_table(db, "notes", notes)
    mesh.once()
    assert [(f.name, f.type.type) for f in DeltaTable(npath).schema().fields] == [
        ("n", "string"),
        ("txt", "string"),
    ]
    assert _rows(read_delta(npath), ["n", "txt"]) == [("1", "x"), ("2", None)]
    # a type change of the column-mapped ORC table: written again, still column-mapped
    orders = a.get_table(db, "orders")
    orders.sd.cols = [orders.sd.cols[0], FieldSchema("amount", "string", None)]
    a.alter_table(db, "orders", orders)
    mesh.once()
    assert [(f.name, f.type.type) for f in DeltaTable(path).schema().fields] == [
        ("order_id", "long"), ("amount", "string"), ("region", "string"),
    ]  # fmt: skip
    assert _rows(read_delta(path), ["order_id", "amount"]) == [
        (1, "10.0"),
        (2, "20.0"),
        (4, "40.0"),
        (5, "50.0"),
        (6, "60.0"),
    ]

    # verify: equal; then a replica file removed behind its back is found
    r = mesh.cli("verify", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == {f"{db}-delta": []}

    # DROP TABLE: the managed table's replica goes with its files; the external one's entry only
    a.drop_table(db, "items", True)
    a.drop_table(db, "orders", False)
    mesh.once()
    assert "items" not in b.get_all_tables(db) and "orders" not in b.get_all_tables(db)
    assert not Path(ipath).exists() and Path(path, "_delta_log").exists()


def test_unsupported_types_are_reported_and_the_rest_replicates(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    db = "dl_union"
    a.create_database(Database(name=db))
    _table(a, db, "u", [FieldSchema("x", "uniontype<int,string>", None)], ORC)
    ok = _table(a, db, "ok", [FieldSchema("x", "int", None)], ORC)
    _write(ok.sd.location, "000000_0", pa.table({"x": pa.array([7], pa.int32())}), ORC)
    mesh.write([_policy(db)]).once()
    assert b.get_all_tables(db) == ["ok"]
    r = mesh.cli("verify", "--json")
    assert r.returncode == 1
    diffs = json.loads(r.stdout)[f"{db}-delta"]
    assert [(d["kind"], d["name"]) for d in diffs] == [("missing", f"{db}.u")]
    assert "uniontype" in diffs[0]["detail"]


def _acid_rows(hms: Any, db: str, name: str, write_ids: str) -> list[tuple[Any, ...]]:
    t = hms.get_table(db, name)
    rows = read_acid_location(local_path(t.sd.location), write_ids, table_layout(t))
    return _rows(rows, ["id", "v"])


def test_acid_every_write_id_is_one_delta_commit(zones: Zones, mesh: Mesh) -> None:
    a = zones.a
    db = "dl_acid"
    a.create_database(Database(name=db))
    src = MetastoreClient(zones.procs["a"].uri)
    create_transactional_table(src, db, "events", [("id", "bigint"), ("v", "string")])
    mesh.write([_policy(db)]).once()  # bootstrap: an empty replica
    w = AcidWriter(src, db, "events")
    w.insert([(i, f"r{i}") for i in range(100)])  # write id 1
    w.insert([(i, f"s{i}") for i in range(100, 150)])  # write id 2
    # write id 3: DELETE of one row of the first file (1% of the table)
    first = read_acid_location(local_path(a.get_table(db, "events").sd.location), f"{db}.events:2:{2**63 - 1}::",
                               table_layout(a.get_table(db, "events")), with_row_ids=True)  # fmt: skip
    victim = first.filter(pa.compute.equal(first["id"], 5))
    w.delete(victim.select(["originalTransaction", "bucket", "rowId"]))
    # write id 4: UPDATE of one row of the second file
    upd = first.filter(pa.compute.equal(first["id"], 120))
    w.update(upd.select(["originalTransaction", "bucket", "rowId"]), [(120, "updated")])
    mesh.once()

    _, path = _replica(zones, db, "events")
    dt = DeltaTable(path)
    history = {h["version"]: h for h in dt.history()}
    by_write_id = {
        int(h["hivemesh.writeId"]): v for v, h in history.items() if "hivemesh.writeId" in h and v > 0
    }
    assert sorted(by_write_id) == [1, 2, 3, 4]  # one Delta commit per committed write id
    last_event = int(history[dt.version()]["hivemesh.eventId"])
    assert dt.transaction_version(f"hivemesh:{db}-delta:{db}.events") == last_event
    for write_id, version in by_write_id.items():  # time travel: each version = the Hive snapshot
        expected = _acid_rows(a, db, "events", f"{db}.events:{write_id}:{2**63 - 1}::")
        assert _rows(read_delta(path, version=version), ["id", "v"]) == expected, write_id
    # the DELETE rewrote one file (the first insert's), not the table
    v3 = DeltaTable(path, version=by_write_id[3])
    v2 = DeltaTable(path, version=by_write_id[2])
    before = set(pa.table(v2.get_add_actions(flatten=True))["path"].to_pylist())
    after = set(pa.table(v3.get_add_actions(flatten=True))["path"].to_pylist())
    assert len(before - after) == 1 and len(after - before) == 1
    latest = _rows(read_delta(path, version=by_write_id[4]), ["id", "v"])
    assert (5, "r5") not in latest and (120, "updated") in latest and len(latest) == 149

    # txns committing out of order: write id 6 commits while 5 is open, then 5 commits
    txn5 = src.open_txn()
    w.insert([(500, "five")], txn_id=txn5)
    w.insert([(600, "six")])
    src.commit_txn(txn5)
    mesh.once()
    dt = DeltaTable(path)
    history = {h["version"]: h for h in dt.history()}
    tagged = {int(h["hivemesh.writeId"]): v for v, h in history.items() if "hivemesh.writeId" in h and v > 0}
    assert tagged[6] < tagged[5]
    six = _rows(read_delta(path, version=tagged[6]), ["id", "v"])
    assert (600, "six") in six and (500, "five") not in six
    assert six == _acid_rows(a, db, "events", f"{db}.events:6:5:5:")
    assert (500, "five") in _rows(read_delta(path, version=tagged[5]), ["id", "v"])

    # a restart from an old checkpoint commits nothing twice
    store = repl.ReplicationStore(mesh.store)
    try:
        store.checkpoint(f"{db}-delta", 1, None, 0)
        store.update(f"{db}-delta", event_id=1)
    finally:
        store.dispose()
    version = DeltaTable(path).version()
    mesh.once()
    assert DeltaTable(path).version() == version
    assert rows_digest(read_delta(path)) == rows_digest(read_delta(path, version=version))
    src.close()


def test_cli_verify_finds_a_damaged_replica(zones: Zones, mesh: Mesh) -> None:
    a = zones.a
    db = "dl_verify"
    a.create_database(Database(name=db))
    t = _table(a, db, "t", [FieldSchema("x", "int", None)], PARQUET)
    _write(t.sd.location, "a.parquet", pa.table({"x": pa.array([1, 2], pa.int32())}), PARQUET)
    _write(t.sd.location, "b.parquet", pa.table({"x": pa.array([3], pa.int32())}), PARQUET)
    mesh.write([_policy(db)]).once()
    _, path = _replica(zones, db, "t")
    # a source file changes without any event: verify sees it, --repair mends it
    _write(t.sd.location, "b.parquet", pa.table({"x": pa.array([3, 4], pa.int32())}), PARQUET)
    r = mesh.cli("verify")
    assert r.returncode == 1 and f"{db}.t" in r.stdout and "rows 4" in r.stdout, r.stdout
    r = mesh.cli("verify", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _rows(read_delta(path), ["x"]) == [(1,), (2,), (3,), (4,)]


def test_status_and_run_through_the_cli(zones: Zones, mesh: Mesh) -> None:
    a = zones.a
    db = "dl_cli"
    a.create_database(Database(name=db))
    t = _table(a, db, "t", [FieldSchema("x", "int", None)], ORC)
    _write(t.sd.location, "000000_0", pa.table({"x": pa.array([1], pa.int32())}), ORC)
    mesh.write([_policy(db)]).once_cli()
    st = mesh.status()[f"{db}-delta"]
    assert st["phase"] == "replicating" and st["lag_events"] == 0
    assert _rows(read_delta(_replica(zones, db, "t")[1]), ["x"]) == [(1,)]
    proc = subprocess.run(
        [sys.executable, "-c", "import hivemesh.replication.delta.runner"], capture_output=True
    )
    assert proc.returncode == 0  # no delta-rs shutdown crash on import and exit


# ---------------------------------------------------------------- a randomized sequence
class _Source:
    """The source side of the randomized sequence, with independent readers of each table."""

    def __init__(self, zones: Zones, db: str):
        self.hms = zones.a
        self.db = db
        self.client = MetastoreClient(zones.procs["a"].uri)
        self.serial = 0

    def rows(self, name: str) -> list[tuple[Any, ...]]:
        """Every row of source table ``name`` now: data columns then partition values; ORC files
        by position, Parquet by name, missing columns None; ACID tables at the current snapshot."""
        t = self.hms.get_table(self.db, name)
        cols = [c.name for c in t.sd.cols]
        full = f"{self.db}.{name}"
        if (t.parameters or {}).get("transactional") == "true":
            w = self.client.valid_write_ids([full], self.client.valid_txn_list())[full]
            locs = [(p.sd.location, tuple(p.values)) for p in self.hms.get_partitions(self.db, name, -1)] or [
                (t.sd.location, ())
            ]
            out = []
            for loc, values in locs:
                rows = read_acid_location(local_path(loc), w, table_layout(t))
                out += [tuple(r[c] for c in cols) + tuple(int(v) for v in values) for r in rows.to_pylist()]
            return sorted(out, key=repr)
        locs = [(p.sd.location, tuple(p.values)) for p in self.hms.get_partitions(self.db, name, -1)]
        if not t.partitionKeys:
            locs = [(t.sd.location, ())]
        out = []
        for loc, values in locs:
            d = Path(local_path(loc))
            for f in sorted(d.glob("*")) if d.exists() else []:
                if t.sd.inputFormat == ORC[1]:
                    data = paorc.read_table(str(f))
                    got = [tuple(r.values()) for r in data.to_pylist()]
                    got = [r + (None,) * (len(cols) - len(r)) for r in got]
                else:
                    data = pq.read_table(str(f))
                    got = [tuple(r.get(c) for c in cols) for r in data.to_pylist()]
                out += [r + tuple(int(v) for v in values) for r in got]
        return sorted(out, key=repr)


@SQLITE_ONLY
def test_randomized_sequence_replica_equals_source_after_every_step(zones: Zones, mesh: Mesh) -> None:
    """Random DDL/DML on plain and ACID tables, a streaming batch among them; after every step
    (replicated with ``run_once``) every replica's rows equal its source table's."""
    import random

    from hivemesh.acid.streaming import StreamingConnection

    rnd = random.Random(14)
    a = zones.a
    db = "dl_random"
    a.create_database(Database(name=db))
    src = _Source(zones, db)
    part = _table(a, db, "p", [FieldSchema("id", "bigint", None), FieldSchema("v", "string", None)], ORC,
                  [FieldSchema("k", "int", None)], external=True)  # fmt: skip
    _table(a, db, "u", [FieldSchema("id", "bigint", None), FieldSchema("v", "string", None)], PARQUET)
    create_transactional_table(src.client, db, "acid", [("id", "bigint"), ("v", "string")], [("k", "int")])
    create_transactional_table(src.client, db, "stream", [("id", "bigint"), ("v", "string")])
    mesh.write([_policy(db)]).once()
    writer = AcidWriter(src.client, db, "acid")
    added_cols = 0

    def rows(n: int) -> list[tuple[int, str]]:
        out = []
        for _ in range(n):
            src.serial += 1
            out.append((src.serial, f"v{src.serial}"))
        return out

    def plain_file(loc: str, n: int, fmt: tuple[str, str, str], ncols: int) -> str:
        data = rows(n)
        cols: dict[str, Any] = {"id": [r[0] for r in data], "v": [r[1] for r in data]}
        for i in range(ncols - 2):
            cols[f"c{i}"] = [f"x{r[0]}" for r in data]
        src.serial += 1
        return _write(loc, f"f{src.serial:05d}", pa.table(cols), fmt)

    def check(step: str) -> None:
        mesh.once()
        for name in ("p", "u", "acid", "stream"):
            cols = [c.name for c in a.get_table(db, name).sd.cols] + [
                c.name for c in a.get_table(db, name).partitionKeys
            ]
            got = _rows(read_delta(_replica(zones, db, name)[1]), cols)
            assert got == src.rows(name), f"{step}: {name}"

    for step in range(250):
        op = rnd.choice(["p_insert", "p_insert", "p_overwrite", "p_drop", "p_addcol", "u_insert", "u_overwrite",
                         "u_truncate", "acid_insert", "acid_insert", "acid_delete", "acid_update"])  # fmt: skip
        if op == "p_insert":
            k = rnd.randrange(4)
            loc = f"{part.sd.location}/k={k}"
            ncols = len(a.get_table(db, "p").sd.cols)
            f = plain_file(loc, rnd.randint(1, 5), ORC, ncols)
            try:
                a.get_partition(db, "p", [str(k)])
                _insert_event(a, db, "p", [f], [str(k)])
            except Exception:
                a.add_partition(Partition(values=[str(k)], dbName=db, tableName="p",
                                          sd=_sd(a.get_table(db, "p").sd.cols, ORC, loc), parameters={}))  # fmt: skip
        elif op == "p_overwrite" and a.get_partition_names(db, "p", -1):
            name = rnd.choice(a.get_partition_names(db, "p", -1))
            loc = a.get_partition_by_name(db, "p", name).sd.location
            for f in Path(local_path(loc)).glob("*"):
                f.unlink()
            f = plain_file(loc, rnd.randint(1, 3), ORC, len(a.get_table(db, "p").sd.cols))
            _insert_event(a, db, "p", [f], [name.split("=")[1]])
        elif op == "p_drop" and a.get_partition_names(db, "p", -1):
            name = rnd.choice(a.get_partition_names(db, "p", -1))
            a.drop_partition(db, "p", [name.split("=")[1]], True)
        elif op == "p_addcol" and added_cols < 2:
            t = a.get_table(db, "p")
            t.sd.cols = [*t.sd.cols, FieldSchema(f"c{added_cols}", "string", None)]
            a.alter_table(db, "p", t)
            added_cols += 1
        elif op == "u_insert":
            u = a.get_table(db, "u")
            _insert_event(a, db, "u", [plain_file(u.sd.location, rnd.randint(1, 4), PARQUET, 2)])
        elif op in ("u_overwrite", "u_truncate"):
            u = a.get_table(db, "u")
            for f in Path(local_path(u.sd.location)).glob("*"):
                f.unlink()
            if op == "u_overwrite":
                _insert_event(a, db, "u", [plain_file(u.sd.location, 2, PARQUET, 2)])
            else:  # TRUNCATE: Hive's ALTER_TABLE of the emptied table
                u.parameters = {**(u.parameters or {}), "numFiles": "0", "last_truncate": str(step)}
                a.alter_table(db, "u", u)
        elif op == "acid_insert":
            writer.insert([(i, v, rnd.randrange(3)) for i, v in rows(rnd.randint(1, 6))])
        elif op in ("acid_delete", "acid_update"):
            t = a.get_table(db, "acid")
            parts = a.get_partitions(db, "acid", -1)
            if not parts:
                continue
            p = rnd.choice(parts)
            w = src.client.valid_write_ids([f"{db}.acid"], src.client.valid_txn_list())[f"{db}.acid"]
            live = read_acid_location(local_path(p.sd.location), w, table_layout(t), with_row_ids=True)
            if not live.num_rows:
                continue
            pick = live.take([rnd.randrange(live.num_rows)])
            ids = pick.select(["originalTransaction", "bucket", "rowId"])
            if op == "acid_delete":
                writer.delete(ids, partition=[p.values[0]])
            else:
                writer.update(ids, [(pick["id"][0].as_py(), "updated")], partition=[p.values[0]])
        else:
            continue
        check(f"step {step} {op}")
        if step == 120:  # a streaming batch of 4 txns: equal after each commit, and after an abort
            with StreamingConnection(src.client, db, "stream", transactions_per_batch=4) as conn:
                batch = conn.fetch_transaction_batch()
                for i in range(4):
                    batch.begin_next_transaction()
                    batch.write(rows(3))
                    if i == 2:
                        batch.abort()
                    else:
                        batch.commit()
                    check(f"streaming txn {i}")
                batch.close()
            check("streaming batch closed")
    src.client.close()


def test_kill_9_during_conversions_commits_nothing_twice(zones: Zones, mesh: Mesh, tmp_path: Path) -> None:
    """The replicator (its command line) killed with SIGKILL while it converts: first during a
    catch-up of 30 ACID write ids (one Delta commit each), then again after the restart has
    committed more; the last run ends with every write id committed exactly once, each Delta
    version equal to its Hive snapshot, and the plain table's rows equal (Parquet files written
    for a commit that never happened are not referenced)."""
    import time

    from tests.test_replication_crash import Replicator

    a = zones.a
    db = "dl_crash"
    a.create_database(Database(name=db))
    src = MetastoreClient(zones.procs["a"].uri)
    create_transactional_table(src, db, "events", [("id", "bigint"), ("v", "string")])
    plain = _table(a, db, "files", [FieldSchema("x", "bigint", None)], ORC)
    mesh.write([_policy(db)]).once()
    w = AcidWriter(src, db, "events")
    for i in range(30):
        w.insert([(i * 10 + j, f"w{i + 1}") for j in range(10)])
    for i in range(200):
        _write(plain.sd.location, f"{i:06d}_0", pa.table({"x": [i]}), ORC)
    _insert_event(a, db, "files", [f"{plain.sd.location}/{i:06d}_0" for i in range(200)])

    log_dir = None
    kills = 0
    for attempt, commits in enumerate((4, 12)):
        proc = Replicator(mesh.path, tmp_path / f"run{attempt}.log")
        deadline = time.monotonic() + 120
        while proc.running() and time.monotonic() < deadline:
            entry = None
            try:
                entry = zones.b.get_table(db, "events")
            except Exception:
                pass
            if entry is not None:
                log_dir = Path(local_path(entry.sd.location)) / "_delta_log"
                if len(list(log_dir.glob("*.json"))) >= commits:
                    break
            time.sleep(0.005)
        kills += proc.kill()
    assert kills >= 1, "the replicator finished before it could be killed"
    mesh.once_cli()

    _, path = _replica(zones, db, "events")
    history = DeltaTable(path).history()
    write_ids = [int(h["hivemesh.writeId"]) for h in history if "hivemesh.writeId" in h and h["version"] > 0]
    assert sorted(write_ids) == list(range(1, 31))  # each write id exactly once
    versions = {int(h["hivemesh.writeId"]): h["version"] for h in history if "hivemesh.writeId" in h}
    for write_id in (1, 7, 18, 30):
        expected = _acid_rows(a, db, "events", f"{db}.events:{write_id}:{2**63 - 1}::")
        assert _rows(read_delta(path, version=versions[write_id]), ["id", "v"]) == expected
    fpath = _replica(zones, db, "files")[1]
    assert _rows(read_delta(fpath), ["x"]) == sorted([(i,) for i in range(200)], key=repr)
    r = mesh.cli("verify", "--json")
    assert r.returncode == 0, r.stdout
    src.close()


def test_a_rule_change_brings_new_tables_in(zones: Zones, mesh: Mesh) -> None:
    """A database added to the policy's rules after its bootstrap gets its replicas at the next
    run; the events of the first database keep flowing."""
    a = zones.a
    first, second = "dl_rules_a", "dl_rules_b"
    for db in (first, second):
        a.create_database(Database(name=db))
        t = _table(a, db, "t", [FieldSchema("x", "int", None)], ORC)
        _write(t.sd.location, "000000_0", pa.table({"x": pa.array([1], pa.int32())}), ORC)
    policy = {**_policy(first), "name": "dl-rules"}
    mesh.write([policy]).once()
    assert second not in zones.b.get_all_databases()
    t = a.get_table(first, "t")
    new = _write(t.sd.location, "000001_0", pa.table({"x": pa.array([2], pa.int32())}), ORC)
    _insert_event(a, first, "t", [new])
    mesh.write([{**policy, "databases": [first, second]}]).once()
    assert _rows(read_delta(_replica(zones, second, "t")[1]), ["x"]) == [(1,)]
    assert _rows(read_delta(_replica(zones, first, "t")[1]), ["x"]) == [(1,), (2,)]


_READ_WITH_PYARROW_FS = """
import sys
import pyarrow.fs as pafs
from deltalake import DeltaTable
path = sys.argv[1]
table = DeltaTable(path).to_pyarrow_table(filesystem=pafs.SubTreeFileSystem(path, pafs.LocalFileSystem()))
print(table.num_rows, sorted(table.column("a").to_pylist()))
"""


def test_delta_rs_read_as_the_readme_says_exits_cleanly(tmp_path: Path) -> None:
    """The README's delta-rs reading (a pyarrow file system rooted at the table) exits 0: delta-rs's
    default Python file system makes the process abort at exit now and then (rc 134, 'terminate
    called without an active exception'; 2.5-54% of runs with deltalake 1.2-1.6 and pyarrow 18-26),
    so a few processes at once, each with the rows."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [3, 1, 2], "b": ["x", "y", "z"]}))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READ_WITH_PYARROW_FS, path],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert (p.returncode, out.strip()) == (0, "3 [1, 2, 3]"), err
