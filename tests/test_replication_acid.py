"""Replication of ACID tables' write-id state (issue 13): bootstraps, resyncs and rescans.

On each backend (SQLite, PostgreSQL) the two real ``hivemesh metastore`` processes of
:mod:`tests.test_replication` (its ``zones``/``mesh`` fixtures, imported) are zones ``a`` (source)
and ``b`` (target). Covered:

1. ``repl_tbl_writeid_state`` of a hivemesh metastore through Thrift: the write-id state it
   takes, idempotence, never moving back, a malformed list, and a later replicated allocation of
   a write id it recorded as aborted.
2. The bootstrap of transactional tables (ORC, as Hive makes them; partitioned and not) with
   committed, aborted and still open txns: the target's ValidWriteIdList equals the source's, the
   source's open txn is left open, and its commit follows. With the open txn's allocation out of
   the bootstrap's lookback (:data:`hivemesh.replication.runner.LOOKBACK_EVENTS`) the write id is
   recorded as aborted on the target; the commit at the source is then not an event the target can
   take, and a resync (``verify --repair``) makes the write id valid.
3. A resync (the source's log purged past the checkpoint) ends on the target the replicated txns
   the source ended meanwhile.
4. Continuous mode's ``rescan_interval_s`` copies a file written into a partition without any
   metastore call, and is not counted as a resync; without it the file stays behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    CommitTxnRequest,
    Database,
    FieldSchema,
    GetValidWriteIdsRequest,
    InsertEventRequestData,
    MaxAllocatedTableWriteIdRequest,
    NotificationEventRequest,
    OpenTxnRequest,
    Partition,
    ReplTblWriteIdStateRequest,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TxnToWriteId,
    WriteNotificationLogRequest,
)
from thrift.Thrift import TApplicationException

import hivemesh.replication.runner as runner_module
import tests.test_replication as repl
from hivemesh.hive.names import make_part_name
from hivemesh.replication.runner import PolicyRunner
from hivemesh.replication.service import ReplicationService
from hivemesh.replication.state import ReplicationStore, lease_owner
from tests.test_event_replay import _valid_txn_list, _write_id_list
from tests.test_replication import (
    Mesh,
    Zones,
    _purge,
    _wait_for_polls,
    add_partition,
    current_id,
    make_table,
    put_file,
    tree,
    wait_for,
)

# the zones, store and mesh.yaml fixtures of the replication tests (this module gets its own zones)
zones = repl.zones
store_url = repl.store_url
mesh = repl.mesh

LONG_MAX = 2**63 - 1

ORC = {
    "inputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "outputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
}
COLS = [FieldSchema("id", "bigint", None), FieldSchema("name", "string", None)]


# ---------------------------------------------------------------- helpers
def orc_sd(location: str | None = None) -> StorageDescriptor:
    return StorageDescriptor(
        cols=list(COLS),
        location=location,
        inputFormat=ORC["inputFormat"],
        outputFormat=ORC["outputFormat"],
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(None, ORC["serde"], {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def make_acid_table(hms: Any, db: str, name: str, keys: tuple[str, ...] = ()) -> Table:
    """A managed full-ACID ORC table as Hive creates one; returns it as stored."""
    hms.create_table(
        Table(
            tableName=name,
            dbName=db,
            owner="hive",
            sd=orc_sd(),
            partitionKeys=[FieldSchema(k, "string", None) for k in keys],
            tableType="MANAGED_TABLE",
            parameters={"transactional": "true", "bucketing_version": "2"},
        )
    )
    t = hms.get_table(db, name)
    assert t.parameters["transactional_properties"] == "default"
    return t


def add_acid_partition(hms: Any, table: Table, value: str) -> Partition:
    hms.add_partition(
        Partition(values=[value], dbName=table.dbName, tableName=table.tableName, sd=orc_sd(), parameters={})
    )
    return hms.get_partition(table.dbName, table.tableName, [value])


def delta(write_id: int) -> str:
    return f"delta_{write_id:07d}_{write_id:07d}_0000"


def write_ids(hms: Any, full: str) -> str:
    """``db.table``'s ValidWriteIdList (Hive's string form) under a current ValidTxnList."""
    (v,) = hms.get_valid_write_ids(
        GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=_valid_txn_list(hms)[0])
    ).tblValidWriteIds
    return _write_id_list(v)


def hwm_and_invalid(hms: Any, full: str) -> tuple[int, set[int], set[int]]:
    """(high watermark, invalid write ids, the aborted ones among them) of ``db.table`` now."""
    (v,) = hms.get_valid_write_ids(
        GetValidWriteIdsRequest(fullTableNames=[full], validTxnList=_valid_txn_list(hms)[0])
    ).tblValidWriteIds
    bits = int.from_bytes(v.abortedBits or b"", "little")
    inv = list(v.invalidWriteIds or [])
    return v.writeIdHighWaterMark, set(inv), {w for i, w in enumerate(inv) if bits >> i & 1}


def txn_states(hms: Any) -> tuple[set[int], set[int]]:
    """(open, aborted) txn ids of ``hms`` now."""
    r = hms.get_open_txns()
    bits = int.from_bytes(r.abortedBits or b"", "little")
    ids = list(r.open_txns or [])
    return {t for i, t in enumerate(ids) if not bits >> i & 1}, {
        t for i, t in enumerate(ids) if bits >> i & 1
    }


def max_write_id(hms: Any, db: str, table: str) -> int:
    return hms.get_max_allocated_table_write_id(MaxAllocatedTableWriteIdRequest(db, table)).maxWriteId


class Writer:
    """ACID writes at the source as Hive's writers make them: open a txn, allocate the table's
    write id, put a small file at ``<location>/delta_N_N_0000/bucket_00000`` and note it
    (add_write_notification_log), then commit, abort or leave the txn open."""

    def __init__(self, hms: Any):
        self.hms = hms

    def open(self, table: Table, partition: str | None = None, data: bytes | None = None) -> tuple[int, int]:
        """Open a txn writing ``table`` (in partition ``partition``, a value): (txn id, write id)."""
        (tid,) = self.hms.open_txns(OpenTxnRequest(1, "etl", "host")).txn_ids
        (w,) = self.hms.allocate_table_write_ids(
            AllocateTableWriteIdsRequest(table.dbName, table.tableName, txnIds=[tid])
        ).txnToWriteIds
        if data is not None:
            self.write(table, tid, w.writeId, partition, data)
        return tid, w.writeId

    def write(self, table: Table, tid: int, write_id: int, partition: str | None, data: bytes) -> None:
        location = table.sd.location
        if partition is not None:
            location = f"{location}/{make_part_name([k.name for k in table.partitionKeys], [partition])}"
        put_file(location, f"{delta(write_id)}/bucket_00000", data)
        self.hms.add_write_notification_log(
            WriteNotificationLogRequest(
                tid, write_id, table.dbName, table.tableName,
                InsertEventRequestData(filesAdded=[f"{location}/{delta(write_id)}/bucket_00000"]),
                partitionVals=[partition] if partition is not None else None,
            )
        )  # fmt: skip

    def commit(self, tid: int) -> None:
        self.hms.commit_txn(CommitTxnRequest(txnid=tid))

    def abort(self, tid: int) -> None:
        self.hms.abort_txn(AbortTxnRequest(txnid=tid))

    def txn(
        self, table: Table, outcome: str, partition: str | None = None, data: bytes | None = None
    ) -> tuple[int, int]:
        tid, w = self.open(table, partition, data)
        if outcome == "commit":
            self.commit(tid)
        elif outcome == "abort":
            self.abort(tid)
        return tid, w


def policy_state(mesh: Mesh, name: str) -> Any:
    store = ReplicationStore(mesh.store)
    try:
        return store.get(name)
    finally:
        store.dispose()


# ---------------------------------------------------------------- 1. repl_tbl_writeid_state
def test_repl_tbl_writeid_state_takes_a_tables_write_id_state(zones: Zones) -> None:
    b = zones.b
    b.create_database(Database(name="wis_db", parameters={}))
    make_acid_table(b, "wis_db", "t")
    full = "wis_db.t"

    def state(text: str) -> None:
        b.repl_tbl_writeid_state(
            ReplTblWriteIdStateRequest(
                validWriteIdlist=text, user="repl", hostName="host", dbName="wis_db", tableName="t"
            )
        )

    assert max_write_id(b, "wis_db", "t") == 0
    state(f"{full}:5:3:3:2")  # high watermark 5, 3 open, 2 aborted: 1, 4, 5 committed
    assert hwm_and_invalid(b, full) == (5, {2, 3}, {2, 3})  # open at the source: aborted here
    assert write_ids(b, full) == f"{full}:5:{LONG_MAX}::2,3"
    assert max_write_id(b, "wis_db", "t") == 5
    txns = b.get_open_txns()

    state(f"{full}:5:3:3:2")  # again: nothing changes, no txn taken
    assert write_ids(b, full) == f"{full}:5:{LONG_MAX}::2,3"
    assert max_write_id(b, "wis_db", "t") == 5
    assert b.get_open_txns() == txns

    state(f"{full}:3:3:3:2")  # an older state: a lower high watermark never moves the table back
    assert max_write_id(b, "wis_db", "t") == 5
    assert write_ids(b, full) == f"{full}:5:{LONG_MAX}::2,3"
    assert b.get_open_txns() == txns

    # the server's MetaException; the call's IDL declares no exception, so Thrift carries it
    # as an internal error with its message
    for bad in ("wis_db.t:five:3:3:2", "wis_db.t", "wis_db.t:5:3:x,3:2", ""):
        with pytest.raises(TApplicationException, match="Invalid ValidWriteIdList") as info:
            state(bad)
        assert info.value.type == TApplicationException.INTERNAL_ERROR
    assert "wis_db" in b.get_all_databases()  # the server is up
    assert max_write_id(b, "wis_db", "t") == 5

    # the txn that held write id 3 at the source is replicated now: 3 is its write id, the
    # aborted txn recorded for it is gone
    aborted = txn_states(b)[1]
    policy = "hivemesh.wis"
    (target_txn,) = b.open_txns(
        OpenTxnRequest(1, "repl", "host", replPolicy=policy, replSrcTxnIds=[9_000_001])
    ).txn_ids
    (got,) = b.allocate_table_write_ids(
        AllocateTableWriteIdsRequest(
            dbName="wis_db", tableName="t", replPolicy=policy,
            srcTxnToWriteIdList=[TxnToWriteId(txnId=9_000_001, writeId=3)],
        )
    ).txnToWriteIds  # fmt: skip
    assert (got.txnId, got.writeId) == (target_txn, 3)
    assert write_ids(b, full) == f"{full}:5:3:3:2"  # 3 open (its txn), 2 aborted
    assert len(aborted - txn_states(b)[1]) == 1 and not txn_states(b)[1] - aborted
    b.commit_txn(CommitTxnRequest(txnid=9_000_001, replPolicy=policy))
    assert write_ids(b, full) == f"{full}:5:{LONG_MAX}::2"
    assert hwm_and_invalid(b, full) == (5, {2}, {2})
    assert max_write_id(b, "wis_db", "t") == 5
    assert target_txn not in txn_states(b)[0]


# ---------------------------------------------------------------- 2. ACID bootstrap
def _acid_source(a: Any, db: str) -> tuple[dict[str, Table], dict[str, tuple[int, int]], Writer]:
    """Database ``db`` at the source with ACID tables ``flat`` (unpartitioned) and ``parts``
    (partitioned by dt): committed txns, an aborted one and one left open per table (the open
    one allocated before later commits of ``flat``). Returns the tables, the open txns as
    (txn id, write id) by table, and the writer."""
    a.create_database(Database(name=db, parameters={}))
    flat = make_acid_table(a, db, "flat")
    parts = make_acid_table(a, db, "parts", ("dt",))
    for d in ("1", "2"):
        add_acid_partition(a, parts, d)
    w = Writer(a)
    opened: dict[str, tuple[int, int]] = {}
    assert w.txn(flat, "commit", data=b"flat 1\n")[1] == 1
    assert w.txn(flat, "abort", data=b"flat 2 aborted\n")[1] == 2
    opened["flat"] = w.open(flat)  # write id 3; its file comes later
    assert opened["flat"][1] == 3
    assert w.txn(flat, "commit", data=b"flat 4\n")[1] == 4
    assert w.txn(flat, "commit", data=b"flat 5\n")[1] == 5
    assert w.txn(parts, "commit", "1", b"parts 1\n")[1] == 1
    assert w.txn(parts, "commit", "2", b"parts 2\n")[1] == 2
    assert w.txn(parts, "abort", "1", b"parts 3 aborted\n")[1] == 3
    opened["parts"] = w.open(parts)
    assert opened["parts"][1] == 4
    w.txn(parts, "commit", "2", b"parts 5\n")
    return {"flat": flat, "parts": parts}, opened, w


def test_acid_bootstrap_gives_the_target_the_sources_write_ids(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    db = "acidboot_db"
    tables, opened, w = _acid_source(a, db)
    source_open_before = txn_states(a)[0]
    assert {t for t, _ in opened.values()} <= source_open_before
    want = {name: write_ids(a, f"{db}.{name}") for name in tables}
    assert want["flat"] == f"{db}.flat:5:3:3:2"
    assert want["parts"] == f"{db}.parts:5:4:4:3"
    target_open_before = txn_states(b)[0]

    mesh.write([{"name": "acidboot", "source": "a", "target": "b", "databases": [db]}])
    mesh.once()  # the policy never ran: a bootstrap
    st = policy_state(mesh, "acidboot")
    assert (st.phase, st.resyncs, st.event_id) == ("replicating", 0, current_id(a))
    for name in tables:
        full = f"{db}.{name}"
        assert hwm_and_invalid(b, full)[:2] == hwm_and_invalid(a, full)[:2]
        assert write_ids(b, full) == want[name]  # the open write id open there too, not aborted
        assert max_write_id(b, db, name) == max_write_id(a, db, name) == 5
    # the source's open txns are left alone; the target holds one open txn for each
    assert txn_states(a)[0] == source_open_before
    assert len(txn_states(b)[0] - target_open_before) == 2
    assert tree(b.get_table(db, "flat").sd.location) == {
        f"{delta(1)}/bucket_00000": b"flat 1\n",
        f"{delta(2)}/bucket_00000": b"flat 2 aborted\n",
        f"{delta(4)}/bucket_00000": b"flat 4\n",
        f"{delta(5)}/bucket_00000": b"flat 5\n",
    }
    assert tree(b.get_partition(db, "parts", ["2"]).sd.location) == {
        f"{delta(2)}/bucket_00000": b"parts 2\n",
        f"{delta(5)}/bucket_00000": b"parts 5\n",
    }

    # the open txns write their files and commit at the source: the target follows
    w.write(tables["flat"], *opened["flat"], None, b"flat 3, late\n")
    w.write(tables["parts"], *opened["parts"], "1", b"parts 4, late\n")
    for tid, _ in opened.values():
        w.commit(tid)
    mesh.once()
    for name in tables:
        full = f"{db}.{name}"
        assert write_ids(b, full) == write_ids(a, full)
        assert hwm_and_invalid(b, full)[1] == hwm_and_invalid(a, full)[1] == ({2} if name == "flat" else {3})
    assert txn_states(b)[0] == target_open_before
    assert tree(b.get_table(db, "flat").sd.location)[f"{delta(3)}/bucket_00000"] == b"flat 3, late\n"
    assert tree(b.get_partition(db, "parts", ["1"]).sd.location) == {
        f"{delta(1)}/bucket_00000": b"parts 1\n",
        f"{delta(3)}/bucket_00000": b"parts 3 aborted\n",
        f"{delta(4)}/bucket_00000": b"parts 4, late\n",
    }
    assert mesh.compare("acidboot") == []


def test_acid_bootstrap_beyond_the_lookback_records_the_open_write_id_as_aborted(
    zones: Zones, mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open txn's allocation is older than the bootstrap's lookback: its write id is recorded
    as aborted on the target (readers there never see a partial write). The source's commit of
    that txn is skipped by the incremental replay (the txn was never opened on the target), so the
    write id stays invalid until a resync (what ``verify --repair`` runs) takes the source's
    write-id state again, which makes it valid."""
    a, b = zones.a, zones.b
    db = "acidlook_db"
    a.create_database(Database(name=db, parameters={}))
    t = make_acid_table(a, db, "t")
    w = Writer(a)
    w.txn(t, "commit", data=b"one\n")
    tid, wid = w.open(t, data=b"two, open\n")
    assert wid == 2
    w.txn(t, "commit", data=b"three\n")
    w.txn(t, "abort")  # write id 4
    full = f"{db}.t"
    assert write_ids(a, full) == f"{full}:4:2:2:4"
    monkeypatch.setattr(runner_module, "LOOKBACK_EVENTS", 2)

    mesh.write([{"name": "acidlook", "source": "a", "target": "b", "databases": [db]}])
    mesh.once()
    assert hwm_and_invalid(b, full) == (4, {2, 4}, {2, 4})  # 2 aborted here, not open
    assert tid in txn_states(a)[0]  # still open at the source
    assert tree(b.get_table(db, "t").sd.location)[f"{delta(2)}/bucket_00000"] == b"two, open\n"

    w.commit(tid)
    assert write_ids(a, full) == f"{full}:4:{LONG_MAX}::4"
    mesh.once()  # the COMMIT_TXN of a txn the target never opened: skipped
    assert hwm_and_invalid(b, full) == (4, {2, 4}, {2, 4})
    st = policy_state(mesh, "acidlook")
    assert (st.phase, st.event_id) == ("replicating", current_id(a))

    store = ReplicationStore(mesh.store)
    runner = PolicyRunner(mesh.config(), mesh.config().replication.policy("acidlook"), store, lease_owner())
    try:
        res = runner.resync("verify --repair")
    finally:
        runner.close()
        store.dispose()
    assert res.resynced
    assert hwm_and_invalid(b, full) == (4, {4}, {4})
    assert write_ids(b, full) == write_ids(a, full)
    assert policy_state(mesh, "acidlook").resyncs == 1


# ---------------------------------------------------------------- 3. resync settles txns
def test_resync_ends_the_replicated_txns_the_source_ended_meanwhile(zones: Zones, mesh: Mesh) -> None:
    a, b = zones.a, zones.b
    db = "settle_db"
    a.create_database(Database(name=db, parameters={}))
    t = make_acid_table(a, db, "t")
    w = Writer(a)
    w.txn(t, "commit", data=b"one\n")
    mesh.write([{"name": "settle", "source": "a", "target": "b", "databases": [db]}])
    mesh.once()
    full = f"{db}.t"
    assert write_ids(b, full) == write_ids(a, full) == f"{full}:1:{LONG_MAX}::"

    target_open_before = txn_states(b)[0]
    to_commit, w2 = w.open(t, data=b"two\n")
    to_abort, w3 = w.open(t, data=b"three, aborted\n")
    assert (w2, w3) == (2, 3)
    mesh.once()  # their allocations: open on the target
    opened_here = txn_states(b)[0] - target_open_before
    assert len(opened_here) == 2
    assert write_ids(b, full) == write_ids(a, full) == f"{full}:3:2:2,3:"
    checkpoint = policy_state(mesh, "settle").event_id
    assert checkpoint == current_id(a)

    # the replicator is down: one txn commits, the other aborts, a third writes and commits;
    # the log past the checkpoint is purged
    w.commit(to_commit)
    w.abort(to_abort)
    w.txn(t, "commit", data=b"four\n")
    now = current_id(a)
    assert _purge(zones, checkpoint) == now - checkpoint > 0
    assert write_ids(a, full) == f"{full}:4:{LONG_MAX}::3"

    mesh.once()
    st = policy_state(mesh, "settle")
    assert (st.phase, st.resyncs, st.event_id) == ("replicating", 1, now)
    assert "purged" in st.resync_reason
    open_now, aborted_now = txn_states(b)
    assert not opened_here & open_now  # none of them left open
    assert len(opened_here & aborted_now) == 1  # the aborted one, as at the source
    assert write_ids(b, full) == write_ids(a, full)
    assert hwm_and_invalid(b, full) == (4, {3}, {3})
    assert tree(b.get_table(db, "t").sd.location) == {
        f"{delta(1)}/bucket_00000": b"one\n",
        f"{delta(2)}/bucket_00000": b"two\n",
        f"{delta(3)}/bucket_00000": b"three, aborted\n",
        f"{delta(4)}/bucket_00000": b"four\n",
    }
    store = ReplicationStore(mesh.store)
    try:
        assert store.txns("settle") == []
    finally:
        store.dispose()


# ---------------------------------------------------------------- 4. rescan_interval_s
@pytest.fixture()
def service_runs() -> Iterator[list[ReplicationService]]:
    """Services a test starts, stopped at its end whatever happens."""
    started: list[ReplicationService] = []
    yield started
    for s in started:
        s.stop()


def test_rescan_copies_files_written_without_a_metastore_call(
    zones: Zones, mesh: Mesh, tmp_path: Path, service_runs: list[ReplicationService]
) -> None:
    a, b = zones.a, zones.b
    for db in ("rescan_db", "norescan_db"):
        a.create_database(Database(name=db, parameters={}))
        t = make_table(a, db, "t", ("dt",))
        add_partition(a, t, ["1"], {"part-0": b"first\n"})

    def run(m: Mesh, policy: str, db: str, **replication: Any) -> tuple[ReplicationService, ReplicationStore]:
        m.write([{"name": policy, "source": "a", "target": "b", "databases": [db]}], **replication)
        store = ReplicationStore(m.store)
        service = ReplicationService(m.config(), store).start()
        service_runs.append(service)
        wait_for(f"{db} bootstrapped", lambda: "dt=1" in b.get_partition_names(db, "t", -1))
        return service, store

    def spark_insert(db: str) -> str:
        """A file put into partition dt=1 with no metastore call; returns its target directory."""
        p = a.get_partition(db, "t", ["1"])
        put_file(p.sd.location, "part-1-spark", b"written by spark\n")
        return b.get_partition(db, "t", ["1"]).sd.location

    service, store = run(mesh, "rescan", "rescan_db", poll_interval_s=0.05, rescan_interval_s=1)
    try:
        events = current_id(a)
        target_dir = spark_insert("rescan_db")
        wait_for(
            "the file on the target",
            lambda: tree(target_dir) == {"part-0": b"first\n", "part-1-spark": b"written by spark\n"},
        )
        assert current_id(a) == events  # no event told the replicator
        _wait_for_polls(service, ("rescan",))
        st = store.get("rescan")
        assert (st.phase, st.resyncs, st.last_error) == ("replicating", 0, None)
    finally:
        service.stop()
        store.dispose()

    other = Mesh(zones, tmp_path / "norescan.yaml", mesh.store)
    service, store = run(other, "norescan", "norescan_db", poll_interval_s=0.05)
    try:
        target_dir = spark_insert("norescan_db")
        for _ in range(5):
            _wait_for_polls(service, ("norescan",))
        assert tree(target_dir) == {"part-0": b"first\n"}
        assert store.get("norescan").resyncs == 0
    finally:
        service.stop()
        store.dispose()


def test_a_reported_write_syncs_exactly_its_partition(zones: Zones, mesh: Mesh) -> None:
    """COMMIT_TXN names no files (as Hive 4.2's): the replicator asks the source's
    get_all_write_event_info and syncs the partition the txn reported, not the table's others; a
    txn that reported nothing (a streaming writer's) gets every partition the target has synced."""
    a, b = zones.a, zones.b
    db = "reported_db"
    a.create_database(Database(name=db, parameters={}))
    t = make_acid_table(a, db, "t", ("p",))
    one, two = (add_acid_partition(a, t, v).sd.location for v in ("1", "2"))
    mesh.write([{"name": "reported", "source": "a", "target": "b", "databases": [db]}])
    mesh.once()  # the bootstrap
    start = current_id(a)
    w = Writer(a)
    tid, wid = w.open(t, "1", b"reported\n")
    put_file(two, "stray", b"written with no metastore call\n")
    w.commit(tid)
    events = a.get_next_notification(NotificationEventRequest(lastEvent=start)).events
    (commit,) = [e for e in events if e.eventType == "COMMIT_TXN"]
    assert "bucket_00000" not in commit.message and f'"databases":["{db}"]' in commit.message
    mesh.once()
    target_one, target_two = (b.get_partition(db, "t", [v]).sd.location for v in ("1", "2"))
    assert tree(target_one) == {f"{delta(wid)}/bucket_00000": b"reported\n"}
    assert tree(target_two) == {}  # the reported write named partition p=1 only

    tid, wid2 = w.open(t)  # reports nothing
    put_file(one, f"{delta(wid2)}/bucket_00000", b"unreported\n")
    w.commit(tid)
    mesh.once()
    assert tree(target_one)[f"{delta(wid2)}/bucket_00000"] == b"unreported\n"
    assert tree(target_two) == {"stray": b"written with no metastore call\n"}
    assert write_ids(b, f"{db}.t") == write_ids(a, f"{db}.t")
