"""ACID replication of open streaming transaction batches (issue 15): readers on the source and the
target see the same rows after every applied source event.

Real parts: the two ``hivemesh metastore`` processes of :mod:`tests.test_replication` (zones ``a``
source and ``b`` target, on SQLite and on PostgreSQL), real ORC files written by
:class:`hivemesh.acid.streaming.StreamingConnection` (one data file per batch that stays open, its
``_flush_length`` side file) and :class:`hivemesh.acid.writer.AcidWriter`, the replicator run in
this process (``run_once``) after every source step.

After each step, :class:`Sides` compares the two zones: the ValidWriteIdList strings of a fresh
snapshot on each side, the rows a fresh reader gets (the Spark-free reader, and Spark's
``read_acid`` at chosen steps), and the rows of every reader opened at an earlier step (its
snapshot kept: the rows it saw then must not change on either side). Covered:

- the seed's timeline (``../shared/seeds/002_*``): a batch of 10 txns with write ids 19..28, rows
  100..107 in txns 1-3, a concurrent txn updating row 101 that commits mid-batch (write id 29), then
  txns 4..10; with ``streaming_copy`` ``append`` (design B: the bytes copied of the batch's data
  file equal its size) and ``rewrite`` (design A: the readable prefix copied at every commit); on a
  partitioned table; with the batch's last txn aborted (txns 1..9 stay on the target);
- a replicator that starts (bootstrap) while a batch is open: the source's txns are not aborted and
  the target converges as they commit;
- a crash simulated before each side effect of applying a commit (after the data bytes, after the
  side file, before and after the target metastore commit): the next run ends equal, with no
  duplicate txn on the target;
- random interleavings (seeded) of streaming commits and aborts, updates, deletes and inserts and
  replicator runs, compared after every run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

import tests.test_replication as repl
from hivemesh.acid.arrow_reader import TableLayout, read_acid_location
from hivemesh.acid.names import encode_flush_length, parse_flush_lengths
from hivemesh.acid.streaming import StreamingConnection, TransactionBatch
from hivemesh.acid.tables import create_transactional_table, table_locations
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.hms import HmsCalls
from hivemesh.client.metastore import MetastoreClient
from hivemesh.replication.state import ReplicationStore
from hivemesh.storage.locations import local_path
from tests.test_replication import Mesh, Zones

COLS = (("id", "int"), ("v", "string"))
LAYOUT = TableLayout(COLS)

# the zones, store and mesh.yaml fixtures of the replication tests (this module gets its own zones)
zones = repl.zones
store_url = repl.store_url
mesh = repl.mesh
B0 = 536870912  # bucket property of bucket 0 (BucketCodec V1)
READERS_CHECKED = 12  # readers of earlier steps re-read at each step: the first and the latest ones
FUZZ_SEED = int(os.environ.get("HIVEMESH_STREAM_SEED", "15"))  # another seed, other interleavings


def _rows(client: MetastoreClient, db: str, snapshot: str) -> list[tuple[Any, ...]]:
    """Rows of ``db.events`` (partition values appended) under a ValidWriteIdList string."""
    table = client.raw.get_table(db, "events")
    out: list[tuple[Any, ...]] = []
    for loc, values in table_locations(client, table):
        for r in read_acid_location(loc, snapshot, LAYOUT).to_pylist():
            out.append((r["id"], r["v"], *values))
    return sorted(out)


class Sides:
    """The source and target of one table: fresh snapshots, rows, and the readers opened so far
    (their snapshots and the rows they saw), checked after every step."""

    def __init__(self, zones: Zones, mesh: Mesh, db: str, spark: Any = None):
        self.mesh = mesh
        self.db = db
        self.full = f"{db}.events"
        self.src = MetastoreClient(zones.procs["a"].uri)
        self.tgt = MetastoreClient(zones.procs["b"].uri)
        self.spark = spark
        self.readers: list[tuple[str, str, str, list[tuple[Any, ...]]]] = []
        self.steps = 0

    def close(self) -> None:
        self.src.close()
        self.tgt.close()

    def snapshot(self, client: MetastoreClient) -> str:
        return str(client.valid_write_ids([self.full], client.valid_txn_list())[self.full])

    def replicate(self) -> None:
        self.mesh.once()

    def check(self, what: str, expected: list[tuple[Any, ...]] | None = None, spark: bool = False) -> None:
        """Replicate, then compare the sides (module docstring); ``expected``: the rows the
        source must show."""
        self.replicate()
        self.steps += 1
        s_snap, t_snap = self.snapshot(self.src), self.snapshot(self.tgt)
        assert t_snap == s_snap, f"after {what}: ValidWriteIdList differs"
        rows = _rows(self.src, self.db, s_snap)
        assert _rows(self.tgt, self.db, t_snap) == rows, f"after {what}: rows differ"
        if expected is not None:
            assert rows == sorted(expected), f"after {what}: the source shows other rows"
        for when, s_old, t_old, seen in self.readers[:1] + self.readers[1:][-READERS_CHECKED:]:
            assert _rows(self.src, self.db, s_old) == seen, f"after {what}: source reader of {when} moved"
            assert _rows(self.tgt, self.db, t_old) == seen, f"after {what}: target reader of {when} moved"
        if spark and self.spark is not None:
            assert self._spark_rows(self.src, s_snap) == self._spark_rows(self.tgt, t_snap) == rows
        self.readers.append((what, s_snap, t_snap, rows))

    def _spark_rows(self, client: MetastoreClient, snapshot: str) -> list[tuple[Any, ...]]:
        from hivemesh.spark.acid import read_acid

        table = client.raw.get_table(self.db, "events")
        out: list[tuple[Any, ...]] = []
        for loc, values in table_locations(client, table):
            df = read_acid(self.spark, path=loc, valid_write_ids=snapshot, schema=list(COLS))
            out += [(r["id"], r["v"], *values) for r in df.collect()]
        return sorted(out)


@pytest.fixture()
def sides_factory(zones: Zones, mesh: Mesh) -> Iterator[Callable[..., Sides]]:
    made: list[Sides] = []

    def make(db: str, spark: Any = None, **replication: Any) -> Sides:
        mesh.write([{"name": "stream", "source": "a", "target": "b", "databases": [db]}], **replication)
        s = Sides(zones, mesh, db, spark)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _events_table(sides: Sides, partitioned: bool) -> dict[str, Any]:
    from hive_metastore.ttypes import Database

    sides.src.raw.create_database(Database(name=sides.db, parameters={}))
    create_transactional_table(
        sides.src, sides.db, "events", list(COLS), [("dt", "string")] if partitioned else ()
    )
    return {"partition": {"dt": "2026-11-26"}} if partitioned else {}


def _target_dir(sides: Sides, zones: Zones, part: dict[str, Any]) -> Path:
    table = sides.tgt.raw.get_table(sides.db, "events")
    if part:
        return Path(
            local_path(
                sides.tgt.raw.get_partition(sides.db, "events", list(part["partition"].values())).sd.location
            )
        )
    return Path(local_path(table.sd.location))


@pytest.mark.parametrize("case", ["rewrite", "partitioned", "last-aborted"])
def test_seed_timeline(sides_factory: Callable[..., Sides], zones: Zones, case: str) -> None:
    """The seed's timeline, compared after every source step (module docstring)."""
    _seed_timeline(sides_factory, zones, case, None)


@pytest.mark.spark
def test_seed_timeline_read_by_spark(sides_factory: Callable[..., Sides], zones: Zones, spark: Any) -> None:
    """The seed's timeline with design B (append), Spark's ``read_acid`` reading both sides at
    chosen steps too."""
    _seed_timeline(sides_factory, zones, "append", spark)


def _seed_timeline(sides_factory: Callable[..., Sides], zones: Zones, case: str, spark: Any) -> None:
    db = f"stream_seed_{case.replace('-', '_')}"
    sides = sides_factory(db, spark, streaming_copy="rewrite" if case == "rewrite" else "append")
    part = _events_table(sides, case == "partitioned")
    suffix = tuple(part["partition"].values()) if part else ()
    sides.check("create table", [])
    # write ids 1..18 before the batch, as in the seed (one row each, ids 1..18)
    writer = AcidWriter(sides.src, db, "events")
    expected = [(i, f"pre {i}", *suffix) for i in range(1, 19)]
    for i in range(1, 19):
        writer.insert([(i, f"pre {i}")], **part)
    sides.check("18 inserts", expected)

    conn = StreamingConnection(sides.src, db, "events", transactions_per_batch=10, **part)
    batch = conn.fetch_transaction_batch()
    assert batch.write_ids == list(range(19, 29))
    sides.check("batch opened", expected)
    txn_rows = {1: [100, 101, 102], 2: [103, 104, 105, 106], 3: [107]}
    for k in range(4, 11):
        txn_rows[k] = [100 + 10 * k + j for j in range(k % 3 + 1)]
    flushes: list[int] = []

    def run_txn(k: int, outcome: str = "commit") -> None:
        batch.begin_next_transaction()
        batch.write([(i, f"txn {k}") for i in txn_rows[k]])
        sides.check(f"txn {k} written, not committed", expected)
        if outcome == "commit":
            batch.commit()
            expected.extend((i, f"txn {k}", *suffix) for i in txn_rows[k])
        else:
            batch.abort()
        flushes[:] = batch.flush_lengths
        sides.check(f"txn {k} {outcome}", expected, spark=k in (1, 3, 10))

    for k in (1, 2, 3):
        run_txn(k)
    # txn 11, concurrent: updates row 101 (write id 19, row id 1) and commits mid-batch
    result = writer.update([(19, B0, 1)], [(101, "updated by txn 11")], **part)
    assert result.write_id == 29
    expected.remove((101, "txn 1", *suffix))
    expected.append((101, "updated by txn 11", *suffix))
    sides.check("txn 11 (update of row 101) commit", expected, spark=True)
    for k in range(4, 10):
        run_txn(k)
    run_txn(10, "abort" if case == "last-aborted" else "commit")
    batch.close()
    conn.close()
    sides.check("batch closed", expected, spark=True)
    assert all(str(i) in {str(r[0]) for r in expected} for i in txn_rows[9])  # txns 1..9 kept

    # the batch's data file: equal on both sides, no side file left on the target
    delta = _target_dir(sides, zones, part) / "delta_0000019_0000028"
    loc = sides.src.raw.get_table(db, "events").sd.location
    if part:
        loc = sides.src.raw.get_partition(db, "events", list(part["partition"].values())).sd.location
    source_file = Path(local_path(loc)) / "delta_0000019_0000028" / "bucket_00000"
    if case == "last-aborted":
        # the file was closed after the abort, with no metastore event: the target keeps the
        # file up to the last committed flush (a prefix), its side file naming that length
        copied = (delta / "bucket_00000").read_bytes()
        assert source_file.read_bytes().startswith(copied)
        assert parse_flush_lengths((delta / "bucket_00000_flush_length").read_bytes())[-1] == len(copied)
    else:
        assert (delta / "bucket_00000").read_bytes() == source_file.read_bytes()
        assert not (delta / "bucket_00000_flush_length").exists()
    assert len(sides.readers) == sides.steps


def test_bytes_copied_append_vs_rewrite(zones: Zones, tmp_path: Path) -> None:
    """Design B appends each flushed range once (the data file's bytes, plus 8 bytes a flush for
    the side file); design A copies the readable prefix at every commit: O(N^2) over a batch."""
    from hivemesh.replication.data import DataMover, ZoneStorage

    dst: dict[str, int] = {}
    client = MetastoreClient(zones.procs["a"].uri)
    from hive_metastore.ttypes import Database

    client.raw.create_database(Database(name="stream_bytes", parameters={}))
    table = create_transactional_table(client, "stream_bytes", "events", list(COLS))
    conn = StreamingConnection(client, "stream_bytes", "events", transactions_per_batch=20)
    batch = conn.fetch_transaction_batch()
    movers = {}
    for mode in ("append", "rewrite"):
        store = ReplicationStore(f"sqlite:///{tmp_path / mode}.db")
        from hivemesh.replication.config import StreamingCopy

        movers[mode] = (
            DataMover("p", store, ZoneStorage(), ZoneStorage(), streaming_copy=StreamingCopy(mode)),
            store,
        )
        dst[mode] = 0
    source = table.sd.location
    for k in range(20):
        batch.begin_next_transaction()
        batch.write([(k * 1000 + j, "x" * 50) for j in range(200)])
        batch.commit()
        for mode, (mover, _) in movers.items():
            dst[mode] += mover.sync(source, str(tmp_path / mode / "events")).bytes_copied
    conn.close()
    source_file = Path(local_path(source)) / "delta_0000001_0000020" / "bucket_00000"
    data = source_file.stat().st_size
    for mode, (mover, store) in movers.items():
        dst[mode] += mover.sync(source, str(tmp_path / mode / "events")).bytes_copied
        copied = (tmp_path / mode / "events" / "delta_0000001_0000020" / "bucket_00000").read_bytes()
        assert copied == source_file.read_bytes()
        mover.close()
        store.dispose()
    other = sum(
        f.stat().st_size
        for f in Path(local_path(source)).rglob("*")
        if f.is_file() and f.name != "bucket_00000"
    )
    assert dst["append"] <= data + other + 8 * 20 * 20  # each byte once (+ side-file records)
    assert dst["append"] <= 1.05 * data
    assert dst["rewrite"] > 5 * data  # the prefix again at every commit
    client.close()


def _open_batch(
    sides: Sides, size: int, part: dict[str, Any]
) -> tuple[StreamingConnection, TransactionBatch]:
    conn = StreamingConnection(sides.src, sides.db, "events", transactions_per_batch=size, **part)
    return conn, conn.fetch_transaction_batch()


def _txn(batch: TransactionBatch, rows: list[tuple[int, str]], outcome: str = "commit") -> None:
    batch.begin_next_transaction()
    batch.write(rows)
    if outcome == "commit":
        batch.commit()
    elif outcome == "abort":
        batch.abort()


def test_bootstrap_while_a_batch_is_open(sides_factory: Callable[..., Sides]) -> None:
    """The policy's first run (its bootstrap) comes while a batch has committed 2 of its 5 txns
    and written rows of a third: the source's txns stay open and the target follows them."""
    sides = sides_factory("stream_boot")
    _events_table(sides, False)
    AcidWriter(sides.src, sides.db, "events").insert([(1, "before")])
    conn, batch = _open_batch(sides, 5, {})
    _txn(batch, [(10, "t1"), (11, "t1")])
    _txn(batch, [(20, "t2")])
    batch.begin_next_transaction()
    batch.write([(30, "t3")])
    open_before = set(sides.src.get_open_txns().open_txns)
    sides.check(
        "bootstrap with 3 txns of the batch open", [(1, "before"), (10, "t1"), (11, "t1"), (20, "t2")]
    )
    assert set(batch.txn_ids[2:]) <= open_before
    assert set(batch.txn_ids[2:]) <= set(sides.src.get_open_txns().open_txns)  # not aborted
    batch.commit()
    sides.check("txn 3 commit", [(1, "before"), (10, "t1"), (11, "t1"), (20, "t2"), (30, "t3")])
    # verify with the batch open: the target's copy is a prefix of the open file: no difference;
    # a target side file naming more bytes than its data file holds is one
    assert sides.mesh.compare("stream") == []
    side = next(
        Path(local_path(sides.tgt.raw.get_table(sides.db, "events").sd.location)).glob(
            "delta_*/*_flush_length"
        )
    )
    good = side.read_bytes()
    side.write_bytes(good + encode_flush_length(10**9))
    found = sides.mesh.compare("stream")
    assert [(d.kind, d.name.rsplit("/", 1)[-1]) for d in found] == [("different", "bucket_00000")], found
    assert "names 1000000000 bytes" in found[0].detail
    side.write_bytes(good)
    _txn(batch, [(40, "t4")], "abort")
    _txn(batch, [(50, "t5")])
    batch.close()
    conn.close()
    sides.check("batch end", [(1, "before"), (10, "t1"), (11, "t1"), (20, "t2"), (30, "t3"), (50, "t5")])


def _repl_txn_map(zones: Zones, source_txns: list[int]) -> dict[int, int]:
    """Target txns mapped to each of ``source_txns`` (the target's REPL_TXN_MAP, read in its store)."""
    import sqlalchemy as sa

    from hivemesh.metastore.txn_schema import REPL_TXN_MAP

    engine = sa.create_engine(zones.store_urls["b"])
    try:
        with engine.connect() as c:
            q = (
                sa.select(REPL_TXN_MAP.c.RTM_SRC_TXN_ID, sa.func.count())
                .where(
                    REPL_TXN_MAP.c.RTM_SRC_TXN_ID.in_(source_txns),
                    REPL_TXN_MAP.c.RTM_REPL_POLICY == "hivemesh.stream",
                )
                .group_by(REPL_TXN_MAP.c.RTM_SRC_TXN_ID)
            )
            return {int(t): int(n) for t, n in c.execute(q)}
    finally:
        engine.dispose()


class Crash(BaseException):
    """A simulated kill -9 (no ``except Exception`` catches it)."""


CRASH_POINTS = ("after data bytes", "after side file", "before target commit", "after target commit")


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_while_applying_a_streaming_commit(
    sides_factory: Callable[..., Sides],
    zones: Zones,
    point: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replicator dying at ``point`` of applying the commit of a batch's second txn; the next
    run ends with the same rows and ValidWriteIdList on both sides, one target txn per source
    txn, and the batch goes on."""
    from hivemesh.replication import streaming as streaming_module

    sides = sides_factory(f"stream_crash_{CRASH_POINTS.index(point)}")
    _events_table(sides, False)
    conn, batch = _open_batch(sides, 4, {})
    _txn(batch, [(1, "t1")])
    sides.check("txn 1", [(1, "t1")])
    _txn(batch, [(2, "t2"), (3, "t2")])
    armed = {"on": True}

    def crash(where: str) -> None:
        if armed["on"] and where == point:
            armed["on"] = False
            raise Crash(point)

    copy_range, copy_file = streaming_module._copy_range, streaming_module.copy_streaming_file

    def copy_range_then_crash(*args: Any) -> int:
        n = copy_range(*args)
        crash("after data bytes")
        return n

    def copy_file_then_crash(*args: Any) -> Any:
        result = copy_file(*args)
        crash("after side file")
        return result

    monkeypatch.setattr(streaming_module, "_copy_range", copy_range_then_crash)
    from hivemesh.replication import data as data_module

    monkeypatch.setattr(data_module, "copy_streaming_file", copy_file_then_crash)
    hms_call = HmsCalls._call

    def calls(self: HmsCalls, name: str, *args: Any) -> Any:
        if name != "commit_txn":
            return hms_call(self, name, *args)
        crash("before target commit")
        result = hms_call(self, name, *args)
        crash("after target commit")
        return result

    monkeypatch.setattr(HmsCalls, "_call", calls)
    with pytest.raises(Crash):
        sides.replicate()
    assert not armed["on"], f"{point} never reached"
    sides.check(f"restart after a crash {point}", [(1, "t1"), (2, "t2"), (3, "t2")])
    # one target txn for each source txn opened after the bootstrap (txn 1 had committed before)
    assert _repl_txn_map(zones, batch.txn_ids) == {t: 1 for t in batch.txn_ids[1:]}
    _txn(batch, [(4, "t3")])
    _txn(batch, [(5, "t4")])
    batch.close()
    conn.close()
    sides.check("batch end", [(1, "t1"), (2, "t2"), (3, "t2"), (4, "t3"), (5, "t4")])
    delta = next(Path(local_path(sides.tgt.raw.get_table(sides.db, "events").sd.location)).glob("delta_*"))
    source = Path(local_path(sides.src.raw.get_table(sides.db, "events").sd.location)) / delta.name
    assert (delta / "bucket_00000").read_bytes() == (source / "bucket_00000").read_bytes()
    assert not list(delta.glob(".*"))  # no temporaries


def test_random_interleavings(sides_factory: Callable[..., Sides]) -> None:
    """Seeded random interleavings of streaming txns (committed, aborted, or left open across
    other steps), concurrent inserts, updates and deletes (SHARED_WRITE, as Hive's
    ``hive.txn.xlock.write=false``) and replicator runs; after each run the sides are compared
    and the source is checked against a model of the rows."""
    rng = random.Random(FUZZ_SEED)
    sides = sides_factory("stream_fuzz", streaming_copy=rng.choice(["append", "rewrite"]))
    _events_table(sides, False)
    writer = AcidWriter(sides.src, sides.db, "events", shared_write=True)
    model: dict[int, str] = {}
    next_id = 1
    conn: StreamingConnection | None = None
    batch: TransactionBatch | None = None
    pending: list[tuple[int, str]] | None = None  # rows of the begun, unfinished streaming txn
    ops: list[str] = []

    def fresh(n: int, tag: str) -> list[tuple[int, str]]:
        nonlocal next_id
        rows = [(next_id + i, tag) for i in range(n)]
        next_id += n
        return rows

    def row_ids() -> dict[int, tuple[int, int, int]]:
        snap = sides.snapshot(sides.src)
        loc = sides.src.raw.get_table(sides.db, "events").sd.location
        t = read_acid_location(loc, snap, LAYOUT, with_row_ids=True).to_pylist()
        return {r["id"]: (r["originalTransaction"], r["bucket"], r["rowId"]) for r in t}

    for step in range(110):
        choices = ["replicate", "insert"] + (["update", "delete"] if model else [])
        if batch is None:
            choices.append("open batch")
        elif pending is None:
            choices += ["stream begin"] * 3 if batch.remaining_transactions() else ["close batch"]
        else:
            choices += ["stream commit"] * 3 + ["stream abort"]
        op = rng.choice(choices)
        ops.append(op)
        if op == "replicate":
            sides.check(f"step {step} ({', '.join(ops[-4:])})", [(k, v) for k, v in model.items()])
        elif op == "insert":
            rows = fresh(rng.randint(1, 3), f"insert {step}")
            writer.insert(rows)
            model.update(rows)
        elif op in ("update", "delete"):
            victim = rng.choice(sorted(model))
            key = row_ids()[victim]
            if op == "update":
                writer.update([key], [(victim, f"updated {step}")])
                model[victim] = f"updated {step}"
            else:
                writer.delete([key])
                del model[victim]
        elif op == "open batch":
            conn, batch = _open_batch(sides, rng.randint(2, 6), {})
        elif op == "stream begin":
            assert batch is not None
            batch.begin_next_transaction()
            pending = fresh(rng.randint(1, 4), f"stream {step}")
            batch.write(pending)
        elif op in ("stream commit", "stream abort"):
            assert batch is not None and pending is not None
            if op == "stream commit":
                batch.commit()
                model.update(pending)
            else:
                batch.abort()
            pending = None
        elif op == "close batch":
            assert batch is not None and conn is not None
            batch.close()
            conn.close()
            conn = batch = None
    if batch is not None and conn is not None:
        if pending is not None:
            batch.commit()
            model.update(pending)
        batch.close()
        conn.close()
    sides.check("the end", [(k, v) for k, v in model.items()])
    assert ops.count("replicate") >= 10 and "stream commit" in ops and "update" in ops


@pytest.mark.hive_streaming
def test_hive_streaming_writer_with_4_buckets(sides_factory: Callable[..., Sides], zones: Zones) -> None:
    """Hive's own streaming writer (Java ``HiveStreamingConnection``) writing a batch of 5 txns
    into a table of 4 buckets of the source metastore: 4 open files with 4 side files; the sides
    are compared after every step, with one txn aborted and the last left open across a run."""
    from hive_metastore.ttypes import Database

    from hivemesh.acid.tables import transactional_table
    from tests.support.hive_streaming import StreamingDriver, require_hive_streaming

    require_hive_streaming()
    sides = sides_factory("stream_java")
    sides.src.raw.create_database(Database(name=sides.db, parameters={}))
    table = transactional_table(sides.db, "events", list(COLS))
    table.sd.bucketCols, table.sd.numBuckets = ["id"], 4
    sides.src.raw.create_table(table)
    expected: list[tuple[Any, ...]] = []
    sides.check("create table", expected)
    with StreamingDriver() as hive:
        hive.send(f"connect {zones.procs['a'].uri} {sides.db} events 5")
        for k, outcome in enumerate(["commit", "commit", "abort", "commit", "commit"], start=1):
            rows = [(k * 100 + j, f"txn {k}") for j in range(12)]
            hive.send("begin")
            for r in rows:
                hive.send(f"write {r[0]},{r[1]}")
            sides.check(f"txn {k} written", expected)
            hive.send(outcome)
            if outcome == "commit":
                expected += rows
            sides.check(f"txn {k} {outcome}", expected)
        hive.send("close")
    sides.check("batch closed", expected)
    delta = (
        Path(local_path(sides.tgt.raw.get_table(sides.db, "events").sd.location)) / "delta_0000001_0000005"
    )
    assert len(list(delta.glob("bucket_0000[0-3]"))) == 4  # every bucket got rows


def test_compaction_result_with_visibility_suffix(sides_factory: Callable[..., Sides]) -> None:
    """A major compaction's ``base_<w>_v<T>`` (written as Hive 4's compactor does, in its own txn
    ``T``): not copied while ``T`` is open; once committed it reaches the target as ``base_<w>``
    (``T`` is a source txn id), and the target still reads the same rows after the source's
    cleaner removed the compacted deltas (the target then reads only the base)."""
    from hivemesh.acid.files import write_acid_version_file
    from hivemesh.acid.orcfile import AcidOrcWriter

    sides = sides_factory("stream_compacted")
    _events_table(sides, False)
    writer = AcidWriter(sides.src, sides.db, "events")
    expected: list[tuple[Any, ...]] = []
    for w in (1, 2, 3):
        rows = [(w * 10 + j, f"w{w}") for j in range(3)]
        writer.insert(rows)
        expected += rows
    sides.check("3 inserts", expected)
    src_dir = Path(local_path(sides.src.raw.get_table(sides.db, "events").sd.location))
    tgt_dir = Path(local_path(sides.tgt.raw.get_table(sides.db, "events").sd.location))
    compactor = sides.src.open_txn()
    base = src_dir / f"base_0000003_v{compactor:07d}"
    with AcidOrcWriter(base / "bucket_00000", list(COLS)) as orc:
        for w in (1, 2, 3):
            orc.insert([r for r in expected if r[1] == f"w{w}"], w)
    write_acid_version_file(pafs.LocalFileSystem(), str(base))
    writer.insert([(40, "w4")])  # a sync of the table's directory while the compaction is open
    expected.append((40, "w4"))
    sides.check("compaction written, its txn open", expected)
    assert not [p.name for p in tgt_dir.glob("base_*")]  # not copied: its txn is open
    sides.src.commit_txn(compactor)
    for d in src_dir.glob("delta_000000[123]_*"):  # the cleaner
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    writer.insert([(50, "w5")])
    expected.append((50, "w5"))
    sides.check("compaction committed, compacted deltas cleaned", expected)
    assert sorted(p.name for p in tgt_dir.iterdir() if not p.name.startswith(".")) == [
        "base_0000003", "delta_0000004_0000004_0000", "delta_0000005_0000005_0000",
    ]  # fmt: skip
    assert sides.mesh.compare("stream") == []  # verify maps the suffix the same way


def test_kill_9_at_random_while_a_batch_commits(
    sides_factory: Callable[..., Sides], mesh: Mesh, tmp_path: Path
) -> None:
    """``hivemesh replicate run --once`` as a process, SIGKILLed at a seeded random moment after it
    took its lease, once after each commit (or abort) of a 12-txn batch with txns of up to 20,000
    rows; every third txn an in-process run finishes the work and the sides are compared."""
    import time

    from tests.test_replication_crash import Replicator, _holds_lease, _wait_for

    rng = random.Random(FUZZ_SEED)
    sides = sides_factory("stream_kill")
    _events_table(sides, False)
    sides.check("create table", [])
    conn, batch = _open_batch(sides, 12, {})
    expected: list[tuple[Any, ...]] = []
    store = ReplicationStore(mesh.store)
    kills = 0
    try:
        for k in range(12):
            rows = [(k * 100_000 + i, f"txn {k} " + "x" * 30) for i in range(rng.choice([10, 5000, 20_000]))]
            outcome = "abort" if k == 5 else "commit"
            _txn(batch, rows, outcome)
            if outcome == "commit":
                expected += rows
            proc = Replicator(mesh.path, tmp_path / f"run{k}.err")
            if _wait_for(lambda p=proc: _holds_lease(store, "stream", p.pid), proc, "its lease"):
                time.sleep(rng.uniform(0.0, 0.4))
                kills += proc.kill()
            assert proc.wait() in (0, -9), proc.stderr()
            if k % 3 == 2:
                sides.check(f"after txn {k} and a kill", expected)
    finally:
        store.dispose()
    batch.close()
    conn.close()
    sides.check("batch closed", expected)
    assert kills >= 4, f"only {kills} of 12 runs were killed before they ended"
