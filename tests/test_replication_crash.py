"""Replication killed anywhere loses nothing: ``hivemesh replicate run --once`` as a real process.

Real parts only: hivemesh metastore processes over TCP (SQLite stores; one source A and one target
B for the module), the replicator started by its command line and killed with SIGKILL, a moto S3
server over HTTP, Spark in local mode.

- :func:`test_killed_anywhere_loses_nothing`: a source database of partitioned and unpartitioned
  managed tables with 2-8 MB data files is replicated while the replicator is killed ~37 times at
  seeded random points: during its bootstrap (after a random number of the tables it syncs, plus a
  random delay), then during incremental rounds, the source changing between rounds (partitions
  added and dropped, files rewritten, inserts, parameter and statistics changes, tables created and
  dropped, and a second database joining the policy's rules: bootstrapped in the background). The
  incremental kills come from process start + a random delay, or after the run's k-th directory
  sync, k-th target metastore change (right after an apply, before its checkpoint), k-th checkpoint,
  or a random delay after it took its lease. A last run must exit 0 and leave the target equal to
  the source (:func:`hivemesh.replication.verify.compare`, data by MD5), no hidden temporary file,
  no file the source lacks, a target notification log where no table or partition was created
  twice; a run after it changes nothing on the target. Each kill is classified from the state it
  left (phase and checkpoint in the replicator's store, new temporaries, source events past the
  checkpoint whose effect is already on the target: killed between a metastore apply and its
  checkpoint) and the coverage printed with the last stderr line of each killed run
  (``HIVEMESH_CRASH_SEED`` picks other kill points).
- :func:`test_second_run_refused_then_takes_over_after_kill`: the policy lease: a second run is
  refused naming the holder; after kill -9 of the holder a new run takes over at once.
- :func:`test_s3_target`: a target zone on S3 (moto) whose metastore stores ``s3a://`` locations;
  killed mid-upload once, then the files, the ledger, a second pass and a re-copied file.
- :func:`test_spark_copy`: :class:`hivemesh.replication.data.DataMover` above its Spark threshold
  in the suite's SparkSession; :func:`test_spark_copy_in_the_replicators_own_session`: the
  replicator's own local Spark session, whose Python workers must import hivemesh.
- :func:`test_crash_before_every_step`: deterministic: a crash simulated in-process before each
  side effect (metastore write, file copy, removal, store write) of a bootstrap and of a round.
"""

from __future__ import annotations

import collections
import fnmatch
import hashlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from hive_metastore.ttypes import (
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    Database,
    FieldSchema,
    FireEventRequest,
    FireEventRequestData,
    Function,
    InsertEventRequestData,
    LongColumnStatsData,
    NotificationEventRequest,
    Partition,
    ResourceUri,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.client.hms import HmsCalls
from hivemesh.hive import event_messages as ev
from hivemesh.hive.names import make_part_name
from hivemesh.metastore.replay import relocator
from hivemesh.replication.config import PolicyConfig, S3Options, load_replication_config
from hivemesh.replication.data import DataMover, ZoneStorage
from hivemesh.replication.runner import PolicyRunner
from hivemesh.replication.state import ReplicationStore, lease_owner
from hivemesh.replication.verify import compare
from hivemesh.storage.locations import local_path
from tests.support.moto_glue import MotoGlue
from tests.support.servers import HivemeshProcess, ThriftClient, die_with_parent, free_port

MB = 1 << 20
SEED = int(os.environ.get("HIVEMESH_CRASH_SEED", "20240611"))  # another seed explores other kill points
TEMPORARY = ".*.hivemesh-*.tmp"
LEASE_WAIT_S = 300.0  # bound of every wait for a replicator to reach a point (a hang guard, not a check)


# ---------------------------------------------------------------- servers and configuration
@dataclass
class Zones:
    """Source A and target B (hivemesh metastores on SQLite), their clients and warehouse roots."""

    a: HivemeshProcess
    b: HivemeshProcess
    src: Any
    dst: Any
    src_root: Path
    dst_root: Path

    @property
    def src_warehouse(self) -> str:
        return f"file:{self.src_root}"

    @property
    def dst_warehouse(self) -> str:
        return f"file:{self.dst_root}"


@pytest.fixture(scope="module")
def zones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zones]:
    base = tmp_path_factory.mktemp("repl-crash")
    a = HivemeshProcess(f"sqlite:///{base / 'a.db'}", base / "wa", base / "a.log")
    b = HivemeshProcess(f"sqlite:///{base / 'b.db'}", base / "wb", base / "b.log")
    clients: list[ThriftClient] = []
    try:
        for p in (a, b):
            p.start()
            clients.append(ThriftClient(p.host, p.port))
        yield Zones(
            a, b, clients[0].client, clients[1].client, (base / "wa").resolve(), (base / "wb").resolve()
        )
    finally:
        for c in clients:
            c.close()
        for p in (a, b):
            p.stop()


def _local_zones(zones: Zones) -> dict[str, Any]:
    """The ``zones:`` of a policy from the source server (``onprem``) to the target (``local``)."""
    return {
        "onprem": {"metastore": zones.a.uri, "warehouse": zones.src_warehouse},
        "local": {"metastore": zones.b.uri, "warehouse": zones.dst_warehouse},
    }


def _write_config(
    path: Path, store: str, zones: dict[str, Any], policies: list[dict[str, Any]], **settings: Any
) -> Path:
    """A mesh.yaml (JSON is YAML) with ``zones`` and ``replication``."""
    doc = {"zones": zones, "replication": {"store": store, "policies": policies, **settings}}
    path.write_text(json.dumps(doc, indent=2))
    return path


# ---------------------------------------------------------------- the replicator as a process
class Replicator:
    """One ``hivemesh replicate run --once`` subprocess; stderr in ``err``."""

    def __init__(self, config: Path, err: Path, env: dict[str, str] | None = None):
        self.err = err
        with open(err, "w", encoding="utf-8") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hivemesh.cli", "replicate", "run", "--config", str(config), "--once"],
                stdout=subprocess.DEVNULL,
                stderr=f,
                env=env,
                preexec_fn=die_with_parent,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> bool:
        """SIGKILL; True when the process was still running (False: it had ended on its own)."""
        if self.proc.poll() is not None:
            return False
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return True

    def wait(self, timeout: float = 300.0) -> int:
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def last_line(self) -> str:
        lines = [ln for ln in self.stderr().splitlines() if ln.strip()]
        return lines[-1][:200] if lines else "(no output yet)"


def _holds_lease(store: ReplicationStore, policy: str, pid: int) -> bool:
    st = store.get(policy)
    return st is not None and st.lease_owner is not None and f":{pid}:" in st.lease_owner


def _wait_for(predicate: Any, proc: Replicator, what: str, poll_s: float = 0.003) -> bool:
    """Poll ``predicate`` until true (True) or the process ended (False)."""
    deadline = time.monotonic() + LEASE_WAIT_S
    while not predicate():
        if not proc.running():
            return False
        assert time.monotonic() < deadline, f"the replicator did not reach {what}; stderr:\n{proc.stderr()}"
        time.sleep(poll_s)
    return True


# ---------------------------------------------------------------- files
def _temporaries(root: Path) -> set[str]:
    return {str(p) for p in root.rglob(TEMPORARY)} if root.exists() else set()


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Files below ``root`` (relative path -> size, MD5), hidden temporaries included."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (p.stat().st_size, hashlib.md5(p.read_bytes()).hexdigest())
    return out


def _path(location: str) -> Path:
    return Path(local_path(location) if location.startswith("file:") else location)


# ---------------------------------------------------------------- the source database and its changes
def _sd(location: str | None = None) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "bigint", None), FieldSchema("payload", "binary", "random bytes")],
        location=location,
        inputFormat="org.apache.hadoop.mapred.SequenceFileInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


class SourceDb:
    """Database ``db`` on the source, changed the way writers change a warehouse: every data change
    comes with its event (ADD_PARTITION, ALTER_PARTITION, ALTER_TABLE, INSERT). Partition values and
    parameter revisions are never reused, so each event's effect on the target is recognizable."""

    def __init__(self, hms: Any, db: str, rng: random.Random, sizes: tuple[int, int]):
        self.hms = hms
        self.db = db
        self.rng = rng
        self.sizes = sizes
        self.serial = 0
        self.round = 0
        self.log: list[str] = []

    def note(self, what: str) -> None:
        self.log.append(f"[{self.round:2d}] {what}")

    def _next(self) -> int:
        self.serial += 1
        return self.serial

    def _bytes(self, n: int | None = None) -> bytes:
        return self.rng.randbytes(n if n is not None else self.rng.randint(*self.sizes))

    def write(self, location: str, name: str, n: int | None = None) -> None:
        path = _path(location) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self._bytes(n))

    # ---- objects
    def create_database(self) -> None:
        self.hms.create_database(Database(name=self.db, description="crash test", parameters={"team": "ops"}))
        self.hms.create_function(
            Function(
                "mask", self.db, "com.example.Mask", "ops", 1, 0, 1, [ResourceUri(1, "file:/opt/udf/m.jar")]
            )
        )

    def tables(self, partitioned: bool | None = None) -> list[str]:
        out = []
        for name in self.hms.get_all_tables(self.db):
            t = self.hms.get_table(self.db, name)
            if t.tableType != "MANAGED_TABLE":
                continue
            if partitioned is None or bool(t.partitionKeys) == partitioned:
                out.append(name)
        return sorted(out)

    def create_table(self, name: str, keys: list[str], partitions: int, files: int) -> None:
        self.hms.create_table(
            Table(
                tableName=name,
                dbName=self.db,
                owner="etl",
                sd=_sd(),
                partitionKeys=[FieldSchema(k, "string", None) for k in keys],
                tableType="MANAGED_TABLE",
                parameters={"created_by": "crash-test"},
            )
        )
        if keys:
            self.add_partitions(name, partitions, files)
        else:
            loc = self.hms.get_table(self.db, name).sd.location
            for i in range(files):
                self.write(loc, f"000{i}_0")
        self.note(f"create table {name}")

    def create_view(self, name: str, of: str) -> None:
        self.hms.create_table(
            Table(
                tableName=name,
                dbName=self.db,
                owner="etl",
                sd=_sd(),
                partitionKeys=[],
                tableType="VIRTUAL_VIEW",
                viewOriginalText=f"select id from {of}",
                viewExpandedText=f"select `{of}`.`id` from `{self.db}`.`{of}`",
                parameters={},
            )
        )

    def add_partitions(self, table: str, count: int, files: int) -> None:
        t = self.hms.get_table(self.db, table)
        keys = [k.name for k in t.partitionKeys]
        parts = []
        for _ in range(count):
            n = self._next()
            values = [f"2024-{1 + n // 28:02d}-{1 + n % 28:02d}", f"{n % 24:02d}"][: len(keys)]
            parts.append(Partition(values=values, dbName=self.db, tableName=table, sd=_sd(), parameters={}))
        self.hms.add_partitions(parts)
        for p in parts:
            loc = self.hms.get_partition(self.db, table, p.values).sd.location
            for i in range(files):
                self.write(loc, f"part-{i:05d}")
            self.note(f"add {table}/{make_part_name(keys, p.values)}")

    def _some_partition(self, table: str) -> Partition | None:
        names = self.hms.get_partition_names(self.db, table, -1)
        if not names:
            return None
        return self.hms.get_partition_by_name(self.db, table, self.rng.choice(sorted(names)))

    def drop_partition(self, table: str) -> None:
        if len(self.hms.get_partition_names(self.db, table, -1)) < 2:
            return self.add_partitions(table, 1, 1)
        p = self._some_partition(table)
        assert p is not None
        self.hms.drop_partition(self.db, table, p.values, True)
        self.note(f"drop {table}/{p.values}")

    def rewrite_partition(self, table: str) -> None:
        """A file rewritten in place (same size, new bytes), a file added, then ALTER_PARTITION."""
        p = self._some_partition(table)
        if p is None:
            return self.add_partitions(table, 1, 1)
        root = _path(p.sd.location)
        files = sorted(f for f in root.iterdir() if f.is_file())
        if files:
            victim = self.rng.choice(files)
            victim.write_bytes(self._bytes(victim.stat().st_size))
        self.write(p.sd.location, f"part-r{self._next():04d}")
        p.parameters = {**(p.parameters or {}), "rev": str(self._next())}
        self.hms.alter_partition(self.db, table, p)
        self.note(f"rewrite {table}/{p.values}")

    def insert(self, table: str) -> None:
        """A new file in an unpartitioned table and its INSERT event (fire_listener_event)."""
        loc = self.hms.get_table(self.db, table).sd.location
        name = f"ins-{self._next():04d}"
        self.write(loc, name)
        self.hms.fire_listener_event(
            FireEventRequest(
                successful=True,
                data=FireEventRequestData(
                    insertData=InsertEventRequestData(replace=False, filesAdded=[f"{loc}/{name}"])
                ),
                dbName=self.db,
                tableName=table,
            )
        )
        self.note(f"insert {table}/{name}")

    def shrink_table(self, table: str) -> None:
        """A file of an unpartitioned table deleted, then ALTER_TABLE (a parameter revision)."""
        t = self.hms.get_table(self.db, table)
        files = sorted(f for f in _path(t.sd.location).iterdir() if f.is_file())
        if len(files) > 1:
            self.rng.choice(files).unlink()
        self.alter_table(table)

    def alter_table(self, table: str) -> None:
        t = self.hms.get_table(self.db, table)
        t.parameters = {**(t.parameters or {}), "rev": str(self._next())}
        self.hms.alter_table(self.db, table, t)
        self.note(f"alter {table} rev={t.parameters['rev']}")

    def statistics(self, table: str) -> None:
        n = self._next()
        self.hms.update_table_column_statistics(
            ColumnStatistics(
                ColumnStatisticsDesc(True, self.db, table),
                [
                    ColumnStatisticsObj(
                        "id", "bigint", ColumnStatisticsData(longStats=LongColumnStatsData(0, n, 0, n))
                    )
                ],
                engine="hive",
            )
        )
        self.note(f"statistics {table}")

    def drop_table(self, table: str) -> None:
        self.hms.drop_table(self.db, table, True)
        self.note(f"drop table {table}")

    def change(self) -> None:
        """One random change."""
        partitioned, plain = self.tables(True), self.tables(False)
        kind = self.rng.choices(
            ["add", "drop", "rewrite", "insert", "shrink", "alter", "stats", "create", "drop_table"],
            weights=[4, 3, 3, 3, 1, 1, 1, 1, 1],
        )[0]
        if kind == "add" and partitioned:
            self.add_partitions(self.rng.choice(partitioned), self.rng.randint(1, 2), self.rng.randint(1, 2))
        elif kind == "drop" and partitioned:
            self.drop_partition(self.rng.choice(partitioned))
        elif kind == "rewrite" and partitioned:
            self.rewrite_partition(self.rng.choice(partitioned))
        elif kind == "insert" and plain:
            self.insert(self.rng.choice(plain))
        elif kind == "shrink" and plain:
            self.shrink_table(self.rng.choice(plain))
        elif kind == "alter":
            self.alter_table(self.rng.choice(partitioned + plain))
        elif kind == "stats":
            self.statistics(self.rng.choice(partitioned + plain))
        elif kind == "create" or len(partitioned) + len(plain) < 4:
            n = self._next()
            if self.rng.random() < 0.5:
                self.create_table(f"t{n}", ["dt"], partitions=self.rng.randint(1, 2), files=1)
            else:
                self.create_table(f"t{n}", [], partitions=0, files=self.rng.randint(1, 2))
        elif kind == "drop_table":
            self.drop_table(self.rng.choice(partitioned + plain))
        else:
            self.alter_table(self.rng.choice(partitioned + plain))


# ---------------------------------------------------------------- what a kill left
View = dict[str, tuple[str | None, dict[str, str | None]]]


def _view(hms: Any, dbs: list[str]) -> View:
    """The target's tables of ``dbs``: ``db.table`` -> (its ``rev`` parameter, {partition: its
    ``rev``})."""
    out: View = {}
    present = hms.get_all_databases()
    for db in dbs:
        if db not in present:
            continue
        for name in hms.get_all_tables(db):
            t = hms.get_table(db, name)
            parts: dict[str, str | None] = {}
            if t.partitionKeys:
                keys = [k.name for k in t.partitionKeys]
                for p in hms.get_partitions(db, name, -1):
                    parts[make_part_name(keys, p.values)] = (p.parameters or {}).get("rev")
            out[f"{db}.{name}"] = ((t.parameters or {}).get("rev"), parts)
    return out


def _parts(view: View, table: str) -> dict[str, str | None]:
    return view.get(table, (None, {}))[1]


def _effect_seen(msg: ev.Message, before: View, after: View) -> bool | None:
    """Whether the target changed between ``before`` and ``after`` as source event ``msg`` asks
    (None: the event has no visible metadata effect). Unambiguous because the source never reuses
    a partition value, table name or parameter revision."""
    if isinstance(msg, (ev.AddPartition, ev.DropPartition, ev.AlterPartition)):
        t, keys = f"{msg.table.dbName}.{msg.table.tableName}", [k.name for k in msg.table.partitionKeys]
        if isinstance(msg, ev.AddPartition):
            names = [make_part_name(keys, p.values) for p in msg.partitions]
            return any(n in _parts(after, t) and n not in _parts(before, t) for n in names)
        if isinstance(msg, ev.DropPartition):
            names = [make_part_name(keys, v) for v in msg.values]
            return any(n in _parts(before, t) and n not in _parts(after, t) for n in names)
        rev, name = (msg.after.parameters or {}).get("rev"), make_part_name(keys, msg.after.values)
        if rev is None:
            return None
        return _parts(after, t).get(name) == rev and _parts(before, t).get(name) != rev
    if isinstance(msg, (ev.CreateTable, ev.DropTable)):
        t = f"{msg.table.dbName}.{msg.table.tableName}"
        return (
            (t in after and t not in before)
            if isinstance(msg, ev.CreateTable)
            else (t in before and t not in after)
        )
    if isinstance(msg, ev.AlterTable):
        t, rev = f"{msg.after.dbName}.{msg.after.tableName}", (msg.after.parameters or {}).get("rev")
        if rev is None or t not in after:
            return None
        return after[t][0] == rev and before.get(t, (None, {}))[0] != rev
    return None


def _events(hms: Any, after: int, upto: int | None = None) -> list[Any]:
    out: list[Any] = []
    while True:
        got = (
            hms.get_next_notification(NotificationEventRequest(lastEvent=after, maxEvents=1000)).events or []
        )
        got = [e for e in got if upto is None or e.eventId <= upto]
        if not got:
            return out
        out.extend(got)
        after = got[-1].eventId


@dataclass
class Kill:
    """One SIGKILL and the state it left."""

    round: int
    phase: str  # phase the run started in
    trigger: str
    point: str
    copying: str | None
    last_line: str


@dataclass
class Coverage:
    kills: list[Kill] = field(default_factory=list)
    completed: int = 0

    def report(self) -> str:
        counts = collections.Counter(k.point for k in self.kills)
        lines = [f"{len(self.kills)} kills, {self.completed} runs ended before their kill; kill points:"]
        lines += [f"  {n:3d}  {point}" for point, n in sorted(counts.items())]
        lines.append("each kill: round | phase at start | trigger | point | copying | last stderr line")
        for k in self.kills:
            copying = (k.copying or "-").rsplit("/", 2)
            lines.append(
                f"  {k.round:2d} | {k.phase:13} | {k.trigger:22} | {k.point} | {'/'.join(copying[-2:])} | {k.last_line}"
            )
        return "\n".join(lines)


def _classify(
    phase: str,
    st: Any,
    objects: list[Any],
    new_temps: set[str],
    checkpoint_before: int | None,
    until: int,
    applied_past: tuple[int, int],
) -> str:
    mid = " (mid-copy: a new hidden temporary left)" if new_temps else ""
    if st.phase == "new" or (st.phase == "bootstrapping" and st.bootstrap_event_id is None):
        return "start-up, before the bootstrap" + mid
    if st.phase == "bootstrapping":
        return "bootstrap" + (mid or " (between copies / metadata writes)")
    busy = [o.db for o in objects if o.state == "bootstrapping"]
    also = f" while {', '.join(busy)} bootstraps in the background (rule change)" if busy else ""
    if (st.event_id or 0) >= until:
        return (
            ("rule change: background bootstrap" if busy else "after the last checkpoint (closing down)")
            + also
            + mid
        )
    if phase != "replicating":
        return "right after the bootstrap's checkpoint (incremental part of the same run)" + mid
    seen, checkable = applied_past
    if seen:
        return f"incremental: applied to the target, checkpoint not stored ({seen} of {checkable} checkable events){also}{mid}"
    if (st.event_id or 0) > (checkpoint_before or 0):
        return "incremental: after a checkpoint, before the next batch's first apply" + also + mid
    return "incremental: before the first apply (start-up, reading events, copying data)" + also + mid


# ---------------------------------------------------------------- final checks
def _log_duplicates(hms: Any, db: str) -> tuple[list[str], dict[str, set[str]]]:
    """Replay the target's notification log of ``db``: tables and partitions created while they
    existed (what a non-idempotent re-apply would leave), and the partitions the log ends with."""
    tables: dict[str, set[str]] = {}
    problems: list[str] = []
    for e in _events(hms, 0):
        if (e.dbName or "").lower() != db:
            continue
        msg = ev.parse_event(e)
        if isinstance(msg, ev.CreateTable):
            if msg.table.tableName in tables:
                problems.append(f"event {e.eventId}: table {msg.table.tableName} created twice")
            tables[msg.table.tableName] = set()
        elif isinstance(msg, ev.DropTable):
            tables.pop(msg.table.tableName, None)
        elif isinstance(msg, ev.AddPartition):
            keys = [k.name for k in msg.table.partitionKeys]
            have = tables.setdefault(msg.table.tableName, set())
            for p in msg.partitions:
                name = make_part_name(keys, p.values)
                if name in have:
                    problems.append(f"event {e.eventId}: partition {msg.table.tableName}/{name} added twice")
                have.add(name)
        elif isinstance(msg, ev.DropPartition):
            keys = [k.name for k in msg.table.partitionKeys]
            for v in msg.values:
                tables.get(msg.table.tableName, set()).discard(make_part_name(keys, v))
    return problems, tables


def _orphan_history(hms: Any, orphans: list[str]) -> str:
    """The target events that mention the directories of ``orphans`` (a failure's context)."""
    dirs = {part for o in orphans for part in o.split("/")[1:-1]}
    return "\n".join(
        f"target event {e.eventId} {e.eventType} {e.dbName}.{e.tableName}"
        for e in _events(hms, 0)
        if any(d in (e.message or "") for d in dirs)
    )


def _assert_equal(zones: Zones, dbs: list[str], policy: PolicyConfig, context: str = "") -> None:
    """The target is the source: compare() finds nothing, no temporaries, no orphan files, a
    notification log without double creates and with the source's partitions."""
    diffs = compare(
        zones.src,
        zones.dst,
        policy,
        relocator(zones.src_warehouse, zones.dst_warehouse),
        ZoneStorage(),
        ZoneStorage(),
        check_data=True,
    )
    assert diffs == [], "\n".join(f"{d.kind} {d.object} {d.name}: {d.detail}" for d in diffs) + context
    assert _temporaries(zones.dst_root) == set(), context
    for db in dbs:
        src_files = _files(zones.src_root / f"{db}.db")
        dst_files = _files(zones.dst_root / f"{db}.db")
        orphans = sorted(set(dst_files) - set(src_files))
        if orphans:
            context = _orphan_history(zones.dst, orphans) + "\n" + context
        assert orphans == [], f"files on the target the source lacks in {db}: {orphans}\n{context}"
        assert dst_files == src_files
        problems, logged = _log_duplicates(zones.dst, db)
        assert problems == [], context
        for t in zones.src.get_all_tables(db):
            names = set(zones.src.get_partition_names(db, t, -1) or [])
            assert set(zones.dst.get_partition_names(db, t, -1) or []) == names, t
            if names:
                assert logged.get(t) == names, f"{t}: the target's log ends with other partitions"
            # parameters are the source's (compare() leaves bookkeeping keys out; rev is not one)
            assert (zones.dst.get_table(db, t).parameters or {}).get("rev") == (
                zones.src.get_table(db, t).parameters or {}
            ).get("rev")
        assert sorted(zones.dst.get_all_tables(db)) == sorted(zones.src.get_all_tables(db))


# ---------------------------------------------------------------- 1. killed anywhere
N_BOOTSTRAP_KILLS = 8
RULE_CHANGE_ROUND = 20
N_KILLS = 38


def test_killed_anywhere_loses_nothing(zones: Zones, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    crash = SourceDb(zones.src, "crash", rng, sizes=(2 * MB, 8 * MB))
    crash.create_database()
    crash.create_table("orders", ["dt"], partitions=4, files=2)
    crash.create_table("events", ["dt", "hr"], partitions=3, files=2)
    crash.create_table("customers", [], partitions=0, files=3)
    crash.create_table("products", [], partitions=0, files=2)
    crash.create_table("returns", ["dt"], partitions=2, files=1)
    crash.create_table("regions", [], partitions=0, files=1)
    crash.create_view("orders_v", "orders")
    crash.statistics("customers")
    crash.sizes = (1 * MB, 6 * MB)  # changes between rounds: smaller files, more of them
    more = SourceDb(zones.src, "crash_more", rng, sizes=(2 * MB, 8 * MB))  # joins the rules later
    sources = [crash]

    store_url = f"sqlite:///{tmp_path / 'replication.db'}"
    zone_map = _local_zones(zones)

    def configure(dbs: list[str]) -> Path:
        return _write_config(
            tmp_path / "mesh.yaml",
            store_url,
            zone_map,
            [{"name": "crash", "source": "onprem", "target": "local", "databases": dbs}],
            batch_events=3,  # several checkpoints per run: more apply/checkpoint boundaries to hit
            copy_threads=2,
        )

    config = configure(["crash"])
    store = ReplicationStore(store_url)
    store.ensure("crash", "onprem", "local")
    cover = Coverage()
    work_s = 0.5  # how long an incremental run works after taking its lease (measured as runs end)
    try:
        for rnd in range(N_KILLS):
            st = store.get("crash")
            assert st is not None
            phase = st.phase
            for src in (crash, more):
                src.round = rnd
            if rnd == RULE_CHANGE_ROUND:  # a database newly matching: bootstrapped in the background
                more.create_database()
                more.create_table("sales", ["dt"], partitions=3, files=2)
                more.create_table("stock", [], partitions=0, files=2)
                more.sizes = (1 * MB, 6 * MB)
                sources.append(more)
                config = configure(["crash", "crash_more"])
            elif rnd and (phase == "replicating" or rnd % 3 == 0):
                for _ in range(rng.randint(2, 5)):
                    rng.choice(sources).change()
            flowing = ["crash"] + [o.db for o in store.objects("crash") if o.state == "replicating"]
            before_view = _view(zones.dst, flowing)
            temps_before = _temporaries(zones.dst_root)
            until = zones.src.get_current_notificationEventId().eventId
            target_event = zones.dst.get_current_notificationEventId().eventId
            groups = len(crash.tables())  # the bootstrap syncs a table's directories in one go
            bootstrap = phase in ("new", "bootstrapping")
            mode = "start" if rnd and rng.random() < 0.1 else "bootstrap" if bootstrap else None
            if mode is None:
                mode = rng.choices(["copy", "apply", "checkpoint", "time"], weights=[3, 4, 1, 2])[0]
            # a bootstrap is killed before its last table: it stays to be finished by a later run
            k = rng.randint(1, groups - 1 if mode == "bootstrap" else 2)
            seen: set[Any] = set()

            def reached(
                mode: str = mode,
                k: int = k,
                seen: set[Any] = seen,
                target_event: int = target_event,
                until: int = until,
            ) -> bool:
                s = store.get("crash")
                assert s is not None
                if mode == "bootstrap":
                    if s.copying:
                        seen.add(s.copying)
                    return s.phase == "replicating" or len(seen) >= k
                if (s.event_id or 0) >= until and not any(
                    o.state == "bootstrapping" for o in store.objects("crash")
                ):
                    return True
                if mode == "copy":
                    if s.copying:
                        seen.add(s.copying)
                    return len(seen) >= k
                if mode == "checkpoint":
                    seen.add(s.event_id)
                    return len(seen) > k
                # mode == "apply": the target metastore changed k times (a kill right after an
                # apply, most likely before the checkpoint of its batch)
                return zones.dst.get_current_notificationEventId().eventId >= target_event + k

            run = Replicator(config, tmp_path / f"run-{rnd:02d}.err")
            if bootstrap and rnd >= N_BOOTSTRAP_KILLS:  # enough bootstrap kills: let it finish
                assert run.wait() == 0, run.stderr()
                cover.completed += 1
                continue
            extra = 0.0
            if mode == "start":  # anywhere from the process start (imports, store, connections)
                time.sleep(extra := rng.uniform(0.05, 1.2))
                trigger = f"start + {extra:.2f}s"
            elif _wait_for(lambda pid=run.pid: _holds_lease(store, "crash", pid), run, "its lease"):
                leased = time.monotonic()
                if mode == "time":
                    time.sleep(extra := rng.uniform(0, work_s))
                    trigger = f"lease + {extra:.2f}s"
                else:
                    _wait_for(reached, run, f"{mode} #{k}")
                    extra = rng.uniform(0, 0.02)
                    time.sleep(extra)
                    trigger = f"{mode} #{k} + {extra * 1000:.0f}ms"
                if not run.running() and not bootstrap:
                    work_s = max(0.1, time.monotonic() - leased)
            else:
                trigger = "ended before its lease was seen"
            if not run.kill():
                assert run.wait() == 0, run.stderr()
                cover.completed += 1
                continue
            after = store.get("crash")
            assert after is not None
            new_temps = _temporaries(zones.dst_root) - temps_before
            applied = (0, 0)
            if phase == "replicating":
                after_view = _view(zones.dst, flowing)
                pending = [
                    e
                    for e in _events(zones.src, after.event_id or 0, until)
                    if (e.dbName or "").lower() in flowing
                ]
                effects = [_effect_seen(ev.parse_event(e), before_view, after_view) for e in pending]
                checkable = [x for x in effects if x is not None]
                applied = (sum(checkable), len(checkable))
            objects = store.objects("crash")
            point = _classify(phase, after, objects, new_temps, st.event_id, until, applied)
            cover.kills.append(Kill(rnd, phase, trigger, point, after.copying, run.last_line()))

        for src in sources:
            src.round = N_KILLS
            src.change()
        final = Replicator(config, tmp_path / "run-final.err")
        assert final.wait() == 0, final.stderr()
        assert "replication up to date" in final.stderr()
        report = cover.report() + "\nsource changes:\n  " + "\n  ".join(crash.log + more.log)
        print("\n" + report)
        (tmp_path / "coverage.txt").write_text(report)

        policy = load_replication_config(config).replication.policy("crash")
        _assert_equal(zones, ["crash", "crash_more"], policy, context=report)
        assert [(o.db, o.table, o.state) for o in store.objects("crash")] == [
            ("crash_more", "", "replicating")
        ]
        # a run with nothing new changes nothing on the target
        target_event = zones.dst.get_current_notificationEventId().eventId
        again = Replicator(config, tmp_path / "run-again.err")
        assert again.wait() == 0, again.stderr()
        assert zones.dst.get_current_notificationEventId().eventId == target_event
        st = store.get("crash")
        assert st is not None and st.phase == "replicating" and st.lease_owner is None
        assert st.event_id == zones.src.get_current_notificationEventId().eventId
    finally:
        store.dispose()


# ---------------------------------------------------------------- 2. the policy lease
def _unlocked(db_path: Path) -> bool:
    """Whether the SQLite store at ``db_path`` takes a writer now (a process stopped inside a write
    transaction would hold its lock)."""
    conn = sqlite3.connect(db_path, timeout=0.2)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def test_second_run_refused_then_takes_over_after_kill(zones: Zones, tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    leased = SourceDb(zones.src, "leased", rng, sizes=(4 * MB, 8 * MB))
    leased.create_database()
    leased.create_table("big", ["dt"], partitions=4, files=3)  # a bootstrap long enough to catch
    store_path = tmp_path / "lease.db"
    config = _write_config(
        tmp_path / "mesh.yaml",
        f"sqlite:///{store_path}",
        _local_zones(zones),
        [{"name": "lease", "source": "onprem", "target": "local", "databases": ["leased"]}],
    )
    store = ReplicationStore(f"sqlite:///{store_path}")
    first = Replicator(config, tmp_path / "first.err")
    try:
        assert _wait_for(lambda: _holds_lease(store, "lease", first.pid), first, "its lease"), first.stderr()
        # frozen while holding the lease: alive, as a busy run is (never inside a store write)
        for _ in range(100):
            os.kill(first.pid, signal.SIGSTOP)
            if _unlocked(store_path):
                break
            os.kill(first.pid, signal.SIGCONT)
            time.sleep(0.01)
        assert _unlocked(store_path)
        st = store.get("lease")
        assert st is not None and st.lease_owner is not None and f":{first.pid}:" in st.lease_owner
        holder = st.lease_owner

        second = Replicator(config, tmp_path / "second.err")
        assert second.wait() == 2, second.stderr()
        assert (
            f"policy lease: ReplicationError: policy lease is being run by {holder}; not starting a second copy"
            in second.stderr()
        )
        st = store.get("lease")
        assert st is not None and st.lease_owner == holder and st.phase in ("new", "bootstrapping")

        os.kill(first.pid, signal.SIGKILL)  # kill -9 of the holder: its lease has not expired
        first.proc.wait()
        assert st.lease_expires_ms is not None and time.time() * 1000 < st.lease_expires_ms
        third = Replicator(config, tmp_path / "third.err")
        assert third.wait() == 0, third.stderr()
        assert "being run by" not in third.stderr()
        st = store.get("lease")
        assert (
            st is not None and st.phase == "replicating" and st.lease_owner is None and st.last_error is None
        )
        policy = load_replication_config(config).replication.policy("lease")
        _assert_equal(zones, ["leased"], policy)
    finally:
        if first.running():
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait()
        store.dispose()


# ---------------------------------------------------------------- 3. an S3 target zone
BUCKET = "lake"
S3_WAREHOUSE = f"s3a://{BUCKET}/warehouse"


@dataclass
class Cloud:
    """A moto S3 server with bucket ``lake``, and target metastore C whose warehouse is on it."""

    c: HivemeshProcess
    hms: Any
    s3: Any  # boto3 client
    options: dict[str, str]

    def fs(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(**self.options)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    import boto3

    base = tmp_path_factory.mktemp("repl-cloud")
    with MotoGlue() as moto:  # a moto server: every AWS service, S3 included
        s3 = boto3.client(
            "s3",
            region_name="us-east-1",
            endpoint_url=moto.endpoint_url,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        s3.create_bucket(Bucket=BUCKET)
        options = {
            "endpoint_override": f"127.0.0.1:{moto.port}",
            "scheme": "http",
            "access_key": "x",
            "secret_key": "x",
            "region": "us-east-1",
        }
        # the warehouse as an s3a URI (the later --warehouse wins); INFO shows what it does with it
        c = HivemeshProcess(
            f"sqlite:///{base / 'c.db'}",
            base / "unused",
            base / "c.log",
            extra_args=["--warehouse", S3_WAREHOUSE, "--log-level", "INFO"],
        )
        c.start()
        client = ThriftClient(c.host, c.port)
        try:
            yield Cloud(c, client.client, s3, options)
        finally:
            client.close()
            c.stop()


def _s3_files(fs: pafs.FileSystem, root: str) -> dict[str, tuple[int, str]]:
    """Objects below ``root`` (relative path -> size, MD5), hidden temporaries included, directory
    markers left out."""
    out = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as f:
                out[info.path[len(root) + 1 :]] = (info.size, hashlib.md5(f.read()).hexdigest())
    return out


def _is_hidden_temporary(path: str) -> bool:
    return fnmatch.fnmatch(path.rsplit("/", 1)[-1], TEMPORARY)


def test_s3_target(zones: Zones, cloud: Cloud, tmp_path: Path) -> None:
    rng = random.Random(SEED + 2)
    cloudy = SourceDb(zones.src, "cloudy", rng, sizes=(1 * MB, 3 * MB))
    cloudy.create_database()
    cloudy.create_table("clicks", ["dt"], partitions=3, files=2)
    cloudy.create_table("users", [], partitions=0, files=2)
    first = zones.src.get_partition_by_name(
        "cloudy", "clicks", zones.src.get_partition_names("cloudy", "clicks", -1)[0]
    )
    cloudy.write(first.sd.location, "part-big", 24 * MB)  # several multipart upload parts

    store_url = f"sqlite:///{tmp_path / 'cloud.db'}"
    config = _write_config(
        tmp_path / "mesh.yaml",
        store_url,
        {
            "onprem": {"metastore": zones.a.uri, "warehouse": zones.src_warehouse},
            "cloud": {"metastore": cloud.c.uri, "warehouse": S3_WAREHOUSE, "s3": cloud.options},
        },
        [{"name": "to-cloud", "source": "onprem", "target": "cloud", "databases": ["cloudy"]}],
    )
    cfg = load_replication_config(config)
    policy = cfg.replication.policy("to-cloud")
    store = ReplicationStore(store_url)
    fs = cloud.fs()
    root = f"{BUCKET}/warehouse/cloudy.db"

    def uploading() -> bool:
        ups = cloud.s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads") or []
        return any(_is_hidden_temporary(u["Key"]) for u in ups)

    def check(context: str = "") -> dict[str, tuple[int, str]]:
        src = _files(zones.src_root / "cloudy.db")
        dst = _s3_files(fs, root)
        assert [p for p in dst if _is_hidden_temporary(p)] == [], context
        assert sorted(set(dst) - set(src)) == [], f"objects the source lacks {context}"
        assert dst == src, context
        diffs = compare(
            zones.src,
            cloud.hms,
            policy,
            relocator(zones.src_warehouse, S3_WAREHOUSE),
            ZoneStorage(),
            ZoneStorage(S3Options(**cloud.options)),
            check_data=True,
        )
        assert diffs == [], "\n".join(f"{d.kind} {d.object} {d.name}: {d.detail}" for d in diffs)
        return dst

    try:
        # killed mid-upload (a hidden temporary's multipart upload in progress), then run again
        killed = Replicator(config, tmp_path / "killed.err")
        assert _wait_for(uploading, killed, "an upload to S3", poll_s=0.01), killed.stderr()
        assert killed.kill()
        left = {p for p in _s3_files(fs, root)}
        stale = [u["Key"] for u in cloud.s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads") or []]
        print(f"\nkilled mid-upload: {len(left)} objects there, unfinished multipart uploads: {stale}")
        assert stale and all(_is_hidden_temporary(k) for k in stale)  # never a visible partial object
        run = Replicator(config, tmp_path / "run.err")
        assert run.wait() == 0, run.stderr()
        files = check("after the recovery run")
        assert len(files) == 9
        # the metastore took the s3a locations as they are, without touching storage
        parts = cloud.hms.get_partitions("cloudy", "clicks", -1)
        assert {p.sd.location for p in parts} == {
            f"{S3_WAREHOUSE}/cloudy.db/clicks/{n}"
            for n in zones.src.get_partition_names("cloudy", "clicks", -1)
        }
        assert cloud.hms.get_table("cloudy", "users").sd.location == f"{S3_WAREHOUSE}/cloudy.db/users"
        log = Path(cloud.c.log).read_text()
        assert " ERROR " not in log and " WARNING " not in log, log

        # every copied file is in the ledger (size, source modification time, MD5 when computed):
        # a second pass copies nothing
        ledger = {p[len(root) + 1 :]: r for p, r in store.ledger("to-cloud", root).items()}
        assert {p: r.size for p, r in ledger.items()} == {p: f[0] for p, f in files.items()}
        assert all(r.checksum in (None, files[p][1]) for p, r in ledger.items())
        runner = PolicyRunner(cfg, policy, store, lease_owner())
        try:
            again = runner.resync("the test: a second pass")
        finally:
            runner.close()
        assert (again.data.copied, again.data.unchanged, again.data.deleted) == (0, 9, 0)

        # a source file rewritten (same size, new bytes) and its ALTER_PARTITION: copied again, alone
        second = zones.src.get_partition_by_name(
            "cloudy", "clicks", zones.src.get_partition_names("cloudy", "clicks", -1)[1]
        )
        victim = sorted(_path(second.sd.location).iterdir())[0]
        victim.write_bytes(rng.randbytes(victim.stat().st_size))
        second.parameters = {**(second.parameters or {}), "rev": "changed"}
        zones.src.alter_partition("cloudy", "clicks", second)
        runner = PolicyRunner(cfg, policy, store, lease_owner())
        try:
            steps = list(runner.run_once())
        finally:
            runner.close()
        assert [path for s in steps for path in s.data.copied_paths] == [
            f"{root}/{victim.relative_to(zones.src_root / 'cloudy.db')}"
        ]
        assert sum(s.applied for s in steps) == 1
        after = check("after the rewrite")
        changed = {p for p in after if after[p] != files[p]}
        assert changed == {str(victim.relative_to(zones.src_root / "cloudy.db"))}
    finally:
        store.dispose()


# ---------------------------------------------------------------- 4. copies as a Spark job
@pytest.mark.spark
def test_spark_copy(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(SEED + 3)
    src, dst = tmp_path / "src", tmp_path / "dst"
    for rel, size in {"000000_0": 3 * MB, "000001_0": MB + 17, "sub/000002_0": 2 * MB}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(rng.randbytes(size))
    (dst / "sub").mkdir(parents=True)
    (dst / "sub" / ".000002_0.hivemesh-0123456789ab.tmp").write_bytes(b"left by a killed copier")
    (dst / "stale_0").write_bytes(b"the source does not have me")
    store = ReplicationStore(f"sqlite:///{tmp_path / 'ledger.db'}")
    mover = DataMover("spark", store, ZoneStorage(), ZoneStorage(), threads=2, spark_threshold_bytes=0)
    try:
        first = mover.sync(f"file:{src}", f"file:{dst}")
        assert first.spark
        assert (first.copied, first.bytes_copied, first.temporaries, first.deleted) == (3, 6 * MB + 17, 1, 1)
        assert _files(dst) == _files(src)
        ledger = {p[len(str(dst)) + 1 :]: r for p, r in store.ledger("spark", str(dst)).items()}
        assert {p: r.size for p, r in ledger.items()} == {p: f[0] for p, f in _files(src).items()}
        assert all(r.checksum in (None, _files(src)[p][1]) for p, r in ledger.items())

        # nothing changed: nothing copied, no Spark job
        again = mover.sync(f"file:{src}", f"file:{dst}")
        assert (again.copied, again.unchanged, again.spark) == (0, 3, False)

        # a file rewritten with the same size: found by its modification time and MD5, copied by Spark
        (src / "000001_0").write_bytes(rng.randbytes(MB + 17))
        third = mover.sync(f"file:{src}", f"file:{dst}")
        assert (third.copied, third.unchanged, third.spark) == (1, 2, True)
        assert _files(dst) == _files(src)
    finally:
        mover.close()
        store.dispose()


@pytest.mark.spark
def test_spark_copy_in_the_replicators_own_session(zones: Zones, tmp_path: Path) -> None:
    """``replicate run`` above ``spark_copy_threshold_mb`` with no SparkSession of its own starts a
    local one: its Python workers must import hivemesh even when ``python3`` on PATH cannot."""
    rng = random.Random(SEED + 4)
    sparked = SourceDb(zones.src, "sparked", rng, sizes=(MB // 2, MB))
    sparked.create_database()
    sparked.create_table("facts", ["dt"], partitions=2, files=2)
    sparked.create_table("dims", [], partitions=0, files=2)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").write_text("#!/bin/sh\necho 'this python3 has no hivemesh' >&2\nexit 3\n")
    (shims / "python3").chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    }
    env["PATH"] = f"{shims}:{env.get('PATH', '')}"
    config = _write_config(
        tmp_path / "mesh.yaml",
        f"sqlite:///{tmp_path / 'spark.db'}",
        _local_zones(zones),
        [{"name": "sparked", "source": "onprem", "target": "local", "databases": ["sparked"]}],
        spark_copy_threshold_mb=0,
    )
    run = Replicator(config, tmp_path / "run.err", env=env)
    assert run.wait() == 0, run.stderr()
    assert "files as a Spark job" in run.stderr()
    _assert_equal(zones, ["sparked"], load_replication_config(config).replication.policy("sparked"))


def test_s3_delta_target(zones: Zones, cloud: Cloud, tmp_path: Path) -> None:
    """A ``format: delta`` policy into the S3 zone: Parquet files written through pyarrow's S3
    file system, Delta commits by delta-rs on S3 (conditional puts), the replica registered with
    its ``s3a://`` location; an INSERT follows, a second run commits nothing. The S3 server is a
    ``moto_server`` process of its own: delta-rs blocks the calling Python thread, so an S3
    server in this process (the module's ``ThreadedMotoServer``) could not answer it."""
    import boto3

    port = free_port()
    moto = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)  # fmt: skip
    try:
        _test_s3_delta_target(zones, cloud, tmp_path, port, boto3)
    finally:
        moto.kill()
        moto.wait()


def _test_s3_delta_target(zones: Zones, cloud: Cloud, tmp_path: Path, port: int, boto3: Any) -> None:
    import hive_metastore.ttypes as T
    import pyarrow as pa
    import pyarrow.orc as paorc
    from deltalake import DeltaTable

    from hivemesh.replication.delta.runner import delta_storage_options
    from hivemesh.replication.delta.verify import read_delta
    from hivemesh.replication.service import run_once

    options = {**cloud.options, "endpoint_override": f"127.0.0.1:{port}"}
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}",
                      aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            s3.create_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    db = "deltacloud"
    zones.src.create_database(T.Database(name=db))
    orc = ("org.apache.hadoop.hive.ql.io.orc.OrcSerde", "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
           "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat")  # fmt: skip
    sd = T.StorageDescriptor(
        cols=[T.FieldSchema("id", "bigint", None)], inputFormat=orc[1], outputFormat=orc[2], compressed=False,
        numBuckets=-1, serdeInfo=T.SerDeInfo(None, orc[0], {}), bucketCols=[], sortCols=[], parameters={},
    )  # fmt: skip
    zones.src.create_table(T.Table(tableName="ids", dbName=db, owner="x", sd=sd, partitionKeys=[],
                                   parameters={}, tableType="MANAGED_TABLE"))  # fmt: skip
    location = zones.src.get_table(db, "ids").sd.location
    Path(local_path(location)).mkdir(parents=True, exist_ok=True)
    paorc.write_table(pa.table({"id": [1, 2, 3]}), local_path(f"{location}/000000_0"))
    config = _write_config(
        tmp_path / "mesh.yaml",
        f"sqlite:///{tmp_path / 'delta-cloud.db'}",
        {
            "onprem": {"metastore": zones.a.uri, "warehouse": zones.src_warehouse},
            "cloud": {"metastore": cloud.c.uri, "warehouse": S3_WAREHOUSE, "s3": options},
        },
        [{"name": "to-delta", "source": "onprem", "target": "cloud", "databases": [db], "format": "delta"}],
    )
    cfg = load_replication_config(config)
    store = ReplicationStore(cfg.replication.store)
    try:
        assert run_once(cfg, store) == {}
        entry = cloud.hms.get_table(db, "ids")
        assert entry.sd.location == f"{S3_WAREHOUSE}/{db}.db/ids"
        assert entry.parameters["spark.sql.sources.provider"] == "delta"
        uri = f"s3://{BUCKET}/warehouse/{db}.db/ids"
        opts = delta_storage_options(cfg.zones["cloud"])
        root = f"{BUCKET}/warehouse/{db}.db/ids"

        def ids() -> list[int]:
            return sorted(
                read_delta(uri, storage_options=opts, filesystem=pafs.S3FileSystem(**options), root=root)[
                    "id"
                ].to_pylist()
            )

        assert ids() == [1, 2, 3]
        paorc.write_table(pa.table({"id": [4]}), local_path(f"{location}/000001_0"))
        zones.src.fire_listener_event(T.FireEventRequest(
            successful=True, dbName=db, tableName="ids",
            data=T.FireEventRequestData(insertData=T.InsertEventRequestData(filesAdded=[f"{location}/000001_0"])),
        ))  # fmt: skip
        assert run_once(cfg, store) == {}
        assert ids() == [1, 2, 3, 4]
        version = DeltaTable(uri, storage_options=opts).version()
        assert run_once(cfg, store) == {}
        assert DeltaTable(uri, storage_options=opts).version() == version == 2
    finally:
        store.dispose()


# ---------------------------------------------------------------- 5. a crash before every step
class Crash(BaseException):
    """A simulated kill -9: raised before a side effect, caught by no ``except Exception``."""


READS = ("get_", "current_notification", "show_", "check_")


class Effects:
    """Counts the side effects of a replicator (target metastore writes, file copies, directory
    removals, store writes) and raises :class:`Crash` before the ``crash_at``-th one."""

    def __init__(self) -> None:
        self.count = 0
        self.crash_at: int | None = None
        self.names: list[str] = []

    def step(self, what: str) -> None:
        self.count += 1
        self.names.append(what)
        if self.count == self.crash_at:
            raise Crash(what)


@pytest.fixture()
def effects(monkeypatch: pytest.MonkeyPatch) -> Effects:
    from hivemesh.replication import data as data_module

    fx = Effects()
    hms_call = HmsCalls._call

    def calls(self: HmsCalls, name: str, *args: Any) -> Any:
        if not name.startswith(READS):
            fx.step(f"target {name}")
        return hms_call(self, name, *args)

    monkeypatch.setattr(HmsCalls, "_call", calls)
    copy_task = data_module.copy_task

    def copy(task: Any) -> Any:
        fx.step(f"copy {task[3].rsplit('/', 2)[-2]}/{task[3].rsplit('/', 1)[-1]}")
        return copy_task(task)

    monkeypatch.setattr(data_module, "copy_task", copy)
    remove = DataMover.remove
    monkeypatch.setattr(
        DataMover, "remove", lambda self, t: (fx.step(f"remove {t.rsplit('/', 1)[-1]}"), remove(self, t))[1]
    )
    for name in ("checkpoint", "update", "record_files", "forget_files", "put_object"):
        original = getattr(ReplicationStore, name)

        def wrapped(self: Any, *args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            fx.step(f"store {_name}")
            return _original(self, *args, **kw)

        monkeypatch.setattr(ReplicationStore, name, wrapped)
    return fx


def _steps_world(zones: Zones, tmp_path: Path, db: str) -> tuple[SourceDb, Path]:
    src = SourceDb(zones.src, db, random.Random(db), sizes=(1000, 5000))
    src.create_database()
    src.create_table("p", ["dt"], partitions=3, files=1)
    src.create_table("u", [], partitions=0, files=2)
    src.create_table("gone", [], partitions=0, files=1)
    src.create_table("gone_p", ["dt"], partitions=1, files=1)
    config = _write_config(
        tmp_path / f"{db}.yaml",
        f"sqlite:///{tmp_path / db}.db",
        _local_zones(zones),
        [{"name": db, "source": "onprem", "target": "local", "databases": [db]}],
        batch_events=2,
        copy_threads=1,  # one copy at a time: the crash point is the n-th copy, not a race
    )
    return src, config


def _steps_round(src: SourceDb) -> None:
    """The same changes in every world (9 events, applied in batches of 2): partitions added,
    dropped and rewritten, an insert, a partition added to a table then dropped with it (one batch),
    a table dropped (with its files) and one created, a parameter changed."""
    src.add_partitions("p", 2, 1)
    first = sorted(src.hms.get_partition_names(src.db, "p", -1))[0]
    src.hms.drop_partition(src.db, "p", src.hms.get_partition_by_name(src.db, "p", first).values, True)
    src.rewrite_partition("p")
    src.insert("u")
    src.add_partitions("gone_p", 1, 1)
    src.drop_table("gone_p")
    src.drop_table("gone")
    src.create_table("fresh", [], partitions=0, files=1)
    src.alter_table("u")


def _steps_run(config: Path, store: ReplicationStore, owner: str) -> PolicyRunner:
    cfg = load_replication_config(config)
    runner = PolicyRunner(cfg, cfg.replication.policies[0], store, owner)
    for _ in runner.run_once():
        pass
    return runner


def _abandon(runner: PolicyRunner | None) -> None:
    """What a killed process leaves: its connections and threads go, its lease stays."""
    if runner is not None:
        runner._pool.shutdown(wait=True, cancel_futures=True)
        if runner.mover is not None:
            runner.mover.close()
        runner.source.close()
        runner.target.close()


@pytest.mark.parametrize("during", ["bootstrap", "round"])
def test_crash_before_every_step(zones: Zones, tmp_path: Path, effects: Effects, during: str) -> None:
    """A replicator killed before its n-th side effect, for every n, of a bootstrap (the source then
    changing before the next run) or of an incremental round: the next run leaves the target equal
    to the source, without orphans or temporaries. Deterministic: the kill is simulated in-process
    (:class:`Crash`), where the real kills of :func:`test_killed_anywhere_loses_nothing` fall at
    random."""
    dead = f"{socket.gethostname()}:{2**22 + 1}:killed"  # a pid above Linux's pid_max: not alive
    n, total, points = 0, None, []
    while total is None or n < total:
        n += 1
        db = f"steps_{during}_{n}"
        src, config = _steps_world(zones, tmp_path, db)
        store = ReplicationStore(f"sqlite:///{tmp_path / db}.db")
        crashed: PolicyRunner | None = None
        try:
            if during == "round":
                _steps_run(config, store, lease_owner()).close()
                _steps_round(src)
            effects.count, effects.names, effects.crash_at = 0, [], n
            try:
                crashed = _steps_run(config, store, dead)
            except Crash as e:
                points.append(str(e))
            else:  # fewer side effects than n: every point is covered
                total = n
                crashed.close()
                crashed = None
            finally:
                _abandon(crashed)
            effects.crash_at = None
            if during == "bootstrap":
                _steps_round(src)
            _steps_run(config, store, lease_owner()).close()
            policy = load_replication_config(config).replication.policies[0]
            _assert_equal(
                zones, [db], policy, context=f"\ncrashed before step {n}: {points[-1] if points else '-'}"
            )
        finally:
            store.dispose()
    print(f"\n{during}: crashed before each of {len(points)} steps: " + ", ".join(points))
    assert len(points) >= 10
