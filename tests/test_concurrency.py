"""Consistency of the store under concurrent clients and after ``kill -9``, on SQLite and PostgreSQL.

* 64 clients (a thread and a connection each) create their own tables and partitions and, all at
  once, alter one shared table (complete new definitions, so each version is recognisable) and
  their own partition of it. No call may fail, every client must read back its own last write, and
  at the end every successful call's effect is there: no lost update, no torn object, no orphan rows.
* ``kill -9`` of the server in the middle of 1,000 ``add_partitions`` calls (10 partitions each,
  from 4 client threads), then a restart on the same store: every call is fully applied or not at
  all, and every call that returned before the kill is fully there.

Times are deadlines only (so that a hang fails instead of blocking), never assertions about speed.
"""

from __future__ import annotations

import threading
import traceback
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    FieldSchema,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.metastore.schema import CDS, PARTITIONS, SDS, SERDES, TBLS
from tests.conftest import PG_SKIP_REASON, make_pg_database, pg_admin_url, postgres_available
from tests.support.servers import HivemeshProcess, ThriftClient

DEADLINE_S = 120.0
DB = "conc"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each backend (a PostgreSQL database is dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'metastore.db'}"
        return
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    url = make_pg_database("hivemesh_conc")
    try:
        yield url
    finally:
        eng = sa.create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(sa.text(f'DROP DATABASE IF EXISTS "{sa.make_url(url).database}" WITH (FORCE)'))
        eng.dispose()


def _orphans(url: str) -> dict[str, int]:
    """Rows no object refers to any more (leaks of replaced or half-written descriptors)."""
    eng = sa.create_engine(url)
    try:
        with eng.connect() as c:
            used_sds = sa.union(
                sa.select(TBLS.c.SD_ID).where(TBLS.c.SD_ID.is_not(None)),
                sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.SD_ID.is_not(None)),
            )
            count = sa.func.count()
            return {
                "SDS": c.execute(sa.select(count).where(SDS.c.SD_ID.not_in(used_sds))).scalar_one(),
                "SERDES": c.execute(
                    sa.select(count).where(
                        SERDES.c.SERDE_ID.not_in(sa.select(SDS.c.SERDE_ID).where(SDS.c.SERDE_ID.is_not(None)))
                    )
                ).scalar_one(),
                "CDS": c.execute(
                    sa.select(count).where(
                        CDS.c.CD_ID.not_in(sa.select(SDS.c.CD_ID).where(SDS.c.CD_ID.is_not(None)))
                    )
                ).scalar_one(),
            }
    finally:
        eng.dispose()


def _run_threads(targets: list[threading.Thread]) -> None:
    for t in targets:
        t.start()
    for t in targets:
        t.join(DEADLINE_S * 3)
    hung = [t.name for t in targets if t.is_alive()]
    assert not hung, f"{len(hung)} client threads hung: {hung[:5]}"


# ---------------------------------------------------------------- 64 concurrent clients

N_CLIENTS = 64
ROUNDS = 3
OWN_PARTS = 4


def _shared_table(writer: str, seq: int, location: str | None = None) -> Table:
    """A complete definition of the shared table; every part of it names its (writer, seq)."""
    tag = f"{writer}:{seq}"
    return Table(
        tableName="shared",
        dbName=DB,
        owner="shared-owner",
        tableType="MANAGED_TABLE",
        parameters={"writer": writer, "seq": str(seq), "spark.sql.sources.schema.part.0": tag * 20},
        partitionKeys=[FieldSchema("owner", "string", "client")],
        sd=StorageDescriptor(
            cols=[FieldSchema(f"c{i}", "string", f"{tag}:{i}") for i in range(6)],
            location=location,
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            serdeInfo=SerDeInfo(
                serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                parameters={"serialization.format": "1", "writer": tag},
            ),
            parameters={"writer": tag},
            bucketCols=[],
            sortCols=[],
        ),
    )


def _shared_version(t: Table) -> tuple[str, int]:
    """(writer, seq) of a shared-table definition read back; fails if parts of it disagree."""
    writer, seq = t.parameters.get("writer"), t.parameters.get("seq")
    assert writer is not None and seq is not None, f"table parameters lost: {t.parameters}"
    tag = f"{writer}:{seq}"
    problems = []
    if t.parameters.get("spark.sql.sources.schema.part.0") != tag * 20:
        problems.append("parameters")
    if [(c.name, c.type, c.comment) for c in t.sd.cols] != [
        (f"c{i}", "string", f"{tag}:{i}") for i in range(6)
    ]:
        problems.append(f"columns {[c.comment for c in t.sd.cols]}")
    if t.sd.parameters != {"writer": tag}:
        problems.append(f"sd parameters {t.sd.parameters}")
    if t.sd.serdeInfo is None or t.sd.serdeInfo.parameters != {"serialization.format": "1", "writer": tag}:
        problems.append(f"serde {t.sd.serdeInfo}")
    if [(k.name, k.type) for k in t.partitionKeys] != [("owner", "string")]:
        problems.append(f"partition keys {t.partitionKeys}")
    if not t.sd.location or not t.sd.location.endswith("/conc.db/shared"):
        problems.append(f"location {t.sd.location}")
    assert not problems, f"torn shared table (params say {tag}): {problems}"
    return writer, int(seq)


def _own_table(cid: int) -> Table:
    return Table(
        tableName=f"own_{cid}",
        dbName=DB,
        owner=f"user{cid}",
        tableType="MANAGED_TABLE",
        parameters={"client": str(cid)},
        partitionKeys=[FieldSchema("p", "string", None)],
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", None), FieldSchema("v", "string", f"client {cid}")],
            inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        ),
    )


def _client_work(c: ThriftHiveMetastore.Client, cid: int, phase: threading.Barrier) -> None:
    """What one of the 64 clients does; every assertion is about its own writes being visible."""
    assert c.set_ugi(f"user{cid}", [f"group{cid}"]) == [f"group{cid}"]
    own = f"own_{cid}"
    mine = [f"c{cid}"]
    # phase 1, all clients at once: create my table and partitions, add my partition to the shared
    # table (adding partitions while the table itself is altered: test_add_partitions_during_alters)
    c.create_table(_own_table(cid))
    own_parts = [
        Partition(values=[str(i)], dbName=DB, tableName=own, parameters={"client": str(cid), "v": "0"})
        for i in range(OWN_PARTS)
    ]
    assert c.add_partitions(own_parts) == OWN_PARTS
    shared_part = Partition(
        values=mine, dbName=DB, tableName="shared", parameters={"client": str(cid), "v": "0"}
    )
    c.add_partition(shared_part)
    phase.wait(DEADLINE_S)
    # phase 2, all clients at once: alter the shared table, my partition of it, my table
    for r in range(ROUNDS):
        # the shared table: replaced by a whole new version (whole reads: test_reads_see_whole_objects)
        if r % 2:
            c.alter_table_with_environment_context(DB, "shared", _shared_table(f"w{cid}", r), None)
        else:
            c.alter_table(DB, "shared", _shared_table(f"w{cid}", r))
        # my partition of the shared table: read-modify-write
        p = c.get_partition(DB, "shared", mine)
        assert p.parameters.get("v") == str(r) and p.parameters.get("client") == str(cid), p.parameters
        p.parameters["v"] = str(r + 1)
        c.alter_partition(DB, "shared", p)
        # my own table and its partitions
        t = c.get_table(DB, own)
        assert t.parameters.get("round", "-1") == str(r - 1), t.parameters
        t.parameters["round"] = str(r)
        c.alter_table(DB, own, t)
        parts = c.get_partitions(DB, own, -1)
        assert [q.parameters.get("v") for q in parts] == [str(r)] * OWN_PARTS
        for q in parts:
            q.parameters["v"] = str(r + 1)
        c.alter_partitions(DB, own, parts)
        assert c.get_partition(DB, "shared", mine).parameters["v"] == str(r + 1)


def test_64_concurrent_clients_lose_no_update(store_url: str, tmp_path: Path) -> None:
    with HivemeshProcess(store_url, tmp_path / "warehouse", tmp_path / "metastore.log") as server:
        with ThriftClient(server.host, server.port) as c:
            c.create_database(Database(name=DB, description="concurrency"))
            c.create_table(_shared_table("none", -1))
        errors: list[str] = []
        start, phase = threading.Barrier(N_CLIENTS), threading.Barrier(N_CLIENTS)

        def client(cid: int) -> None:
            try:
                with ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)) as c:
                    start.wait(DEADLINE_S)
                    _client_work(c, cid, phase)
            except threading.BrokenBarrierError:
                errors.append(f"client {cid}: stopped because another client failed")
            except Exception as e:  # noqa: BLE001 - collected: any failure of any call is a bug
                errors.insert(0, f"client {cid}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
                phase.abort()

        _run_threads(
            [threading.Thread(target=client, args=(i,), name=f"client-{i}") for i in range(N_CLIENTS)]
        )
        assert not errors, f"{len(errors)} clients failed:\n" + "\n".join(errors[:5])

        with ThriftClient(server.host, server.port) as c:
            names = sorted(c.get_all_tables(DB))
            assert names == sorted(["shared", *(f"own_{i}" for i in range(N_CLIENTS))])
            # the shared table is one whole version: the last one of the client that wrote last
            shared = c.get_table(DB, "shared")
            writer, seq = _shared_version(shared)
            assert writer.startswith("w") and seq == ROUNDS - 1
            parts = c.get_partitions(DB, "shared", -1)
            assert sorted(p.values[0] for p in parts) == sorted(f"c{i}" for i in range(N_CLIENTS))
            for p in parts:
                cid = p.values[0][1:]
                assert p.parameters.get("client") == cid and p.parameters.get("v") == str(ROUNDS), p
                assert p.sd.location.endswith(f"/conc.db/shared/owner={p.values[0]}"), p.sd.location
            assert len(c.get_partition_names(DB, "shared", -1)) == N_CLIENTS
            tables = {t.tableName: t for t in c.get_table_objects_by_name(DB, names)}
            for i in range(N_CLIENTS):
                t = tables[f"own_{i}"]
                assert t.owner == f"user{i}"
                assert t.parameters.get("client") == str(i) and t.parameters.get("round") == str(ROUNDS - 1)
                assert [col.comment for col in t.sd.cols] == [None, f"client {i}"]
                own_parts = c.get_partitions(DB, f"own_{i}", -1)
                assert [p.values for p in own_parts] == [[str(k)] for k in range(OWN_PARTS)]
                assert all(p.parameters.get("v") == str(ROUNDS) for p in own_parts), own_parts
        assert _orphans(store_url) == {"SDS": 0, "SERDES": 0, "CDS": 0}
        log = server.log.read_text(encoding="utf-8", errors="replace")
        assert "Traceback" not in log, log[-4000:]


WRITERS, READERS, ALTERS = 6, 6, 12


def _tagged_partition(value: str, tag: str) -> Partition:
    return Partition(
        values=[value],
        dbName=DB,
        tableName="shared",
        parameters={"writer": tag},
        sd=StorageDescriptor(
            cols=[FieldSchema(f"c{j}", "string", f"{tag}:{j}") for j in range(6)],
            location=None,
            inputFormat="org.apache.hadoop.mapred.TextInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            serdeInfo=SerDeInfo(
                serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                parameters={"serialization.format": "1", "writer": tag},
            ),
            parameters={"writer": tag},
        ),
    )


def _partition_version(p: Partition) -> str:
    tag = p.parameters.get("writer")
    problems = []
    if [c.comment for c in p.sd.cols] != [f"{tag}:{j}" for j in range(6)]:
        problems.append(f"columns {[c.comment for c in p.sd.cols]}")
    if p.sd.parameters != {"writer": tag}:
        problems.append(f"sd parameters {p.sd.parameters}")
    if p.sd.serdeInfo is None or p.sd.serdeInfo.parameters.get("writer") != tag:
        problems.append(f"serde {p.sd.serdeInfo}")
    assert not problems, f"torn partition {p.values} (parameters say {tag}): {problems}"
    return str(tag)


def test_reads_see_whole_objects_during_alters(store_url: str, tmp_path: Path) -> None:
    """get_table / get_partitions while other clients replace the same objects: each answer is one
    whole version (parameters, columns, storage descriptor and SerDe of the same write)."""
    with HivemeshProcess(store_url, tmp_path / "warehouse", tmp_path / "metastore.log") as server:
        with ThriftClient(server.host, server.port) as c:
            c.create_database(Database(name=DB))
            c.create_table(_shared_table("none", -1))
            c.add_partitions([_tagged_partition(f"p{i}", "none:-1") for i in range(4)])
        errors: list[str] = []
        reads = [0]
        writing = threading.Event()
        writing.set()
        barrier = threading.Barrier(WRITERS + READERS)

        def writer(w: int) -> None:
            try:
                with ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)) as c:
                    barrier.wait(DEADLINE_S)
                    for n in range(ALTERS):
                        c.alter_table(DB, "shared", _shared_table(f"w{w}", n))
                        c.alter_partitions(
                            DB, "shared", [_tagged_partition(f"p{i}", f"w{w}:{n}") for i in range(4)]
                        )
            except Exception as e:  # noqa: BLE001 - collected
                errors.append(f"writer {w}: {type(e).__name__}: {e}")

        def reader(r: int) -> None:
            try:
                with ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)) as c:
                    barrier.wait(DEADLINE_S)
                    while writing.is_set():
                        _shared_version(c.get_table(DB, "shared"))
                        parts = c.get_partitions(DB, "shared", -1)
                        assert len(parts) == 4
                        for p in parts:
                            _partition_version(p)
                        reads[0] += 1
            except Exception as e:  # noqa: BLE001 - collected
                errors.append(f"reader {r}: {type(e).__name__}: {e}")

        writers = [threading.Thread(target=writer, args=(w,), name=f"writer-{w}") for w in range(WRITERS)]
        readers = [threading.Thread(target=reader, args=(r,), name=f"reader-{r}") for r in range(READERS)]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join(DEADLINE_S * 2)
        writing.clear()
        for t in readers:
            t.join(DEADLINE_S)
        assert not [t.name for t in readers + writers if t.is_alive()], "a client hung"
        assert not errors, f"{len(errors)} failures, e.g.:\n" + "\n".join(errors[:4])
        assert reads[0] > 0
        with ThriftClient(server.host, server.port) as c:
            writer_, seq = _shared_version(c.get_table(DB, "shared"))
            assert seq == ALTERS - 1
            assert {_partition_version(p) for p in c.get_partitions(DB, "shared", -1)} <= {
                f"w{w}:{ALTERS - 1}" for w in range(WRITERS)
            }
        assert _orphans(store_url) == {"SDS": 0, "SERDES": 0, "CDS": 0}


ALTERERS, ADDERS, ADDS = 4, 8, 12


def test_add_partitions_during_alters(store_url: str, tmp_path: Path) -> None:
    """Partitions are added to a table (with and without their own storage descriptor) while other
    clients replace the table's definition (new columns each time, as ALTER TABLE ... CHANGE does):
    every call succeeds and every added partition is there, whole."""
    with HivemeshProcess(store_url, tmp_path / "warehouse", tmp_path / "metastore.log") as server:
        with ThriftClient(server.host, server.port) as c:
            c.create_database(Database(name=DB))
            c.create_table(_shared_table("none", -1))
        errors: list[str] = []
        start = threading.Barrier(ALTERERS + ADDERS)

        def alterer(w: int) -> None:
            try:
                with ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)) as c:
                    start.wait(DEADLINE_S)
                    for n in range(ADDS):
                        c.alter_table(DB, "shared", _shared_table(f"w{w}", n))
            except Exception as e:  # noqa: BLE001 - collected
                errors.append(f"alter_table by {w}: {type(e).__name__}: {str(e)[:300]}")

        def adder(a: int) -> None:
            try:
                with ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)) as c:
                    start.wait(DEADLINE_S)
                    for n in range(ADDS):
                        name = f"a{a}_{n}"
                        if n % 3 == 0:  # no SD: the partition gets the table's
                            c.add_partition(Partition(values=[name], dbName=DB, tableName="shared"))
                        elif n % 3 == 1:
                            c.add_partitions([_tagged_partition(name, name)])
                        else:
                            c.append_partition(DB, "shared", [name])
            except Exception as e:  # noqa: BLE001 - collected
                errors.append(f"add by {a}: {type(e).__name__}: {str(e)[:300]}")

        threads = [threading.Thread(target=alterer, args=(w,), name=f"alterer-{w}") for w in range(ALTERERS)]
        threads += [threading.Thread(target=adder, args=(a,), name=f"adder-{a}") for a in range(ADDERS)]
        _run_threads(threads)
        assert not errors, f"{len(errors)} calls failed, e.g.:\n" + "\n".join(errors[:4])
        with ThriftClient(server.host, server.port) as c:
            _, seq = _shared_version(c.get_table(DB, "shared"))
            assert seq == ADDS - 1
            parts = c.get_partitions(DB, "shared", -1)
            assert sorted(p.values[0] for p in parts) == sorted(
                f"a{a}_{n}" for a in range(ADDERS) for n in range(ADDS)
            )
            for p in parts:
                assert len(p.sd.cols) == 6 and p.sd.location.endswith(f"/shared/owner={p.values[0]}"), p
        assert _orphans(store_url) == {"SDS": 0, "SERDES": 0, "CDS": 0}


# ---------------------------------------------------------------- kill -9 during add_partitions

CALLS = 1000
PER_CALL = 10
CLIENT_THREADS = 4
KILL_AFTER = 400  # successful calls before the kill (the others are in flight or never sent)
TABLE = "events"


def _events_table() -> Table:
    return Table(
        tableName=TABLE,
        dbName=DB,
        owner="loader",
        tableType="MANAGED_TABLE",
        parameters={},
        partitionKeys=[FieldSchema("call", "int", None), FieldSchema("i", "int", None)],
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", None), FieldSchema("payload", "string", None)],
            inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        ),
    )


def _call_partitions(k: int, root: str) -> list[Partition]:
    """The 10 partitions of call ``k``: each with its own parameters and storage descriptor."""
    return [
        Partition(
            values=[str(k), str(i)],
            dbName=DB,
            tableName=TABLE,
            parameters={"call": str(k), "i": str(i), "numFiles": str(k * 10 + i)},
            sd=StorageDescriptor(
                cols=[FieldSchema("id", "bigint", None), FieldSchema("payload", "string", None)],
                location=f"{root}/call={k}/i={i}",
                inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
                serdeInfo=SerDeInfo(
                    serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                    parameters={"call": str(k)},
                ),
                parameters={"i": str(i)},
            ),
        )
        for i in range(PER_CALL)
    ]


def _check_partition(p: Partition, root: str) -> None:
    k, i = p.values
    assert {key: p.parameters.get(key) for key in ("call", "i", "numFiles")} == {
        "call": k,
        "i": i,
        "numFiles": str(int(k) * 10 + int(i)),
    }, p
    assert p.sd.location == f"{root}/call={k}/i={i}", p.sd.location
    assert [(c.name, c.type) for c in p.sd.cols] == [("id", "bigint"), ("payload", "string")], p
    assert p.sd.serdeInfo.serializationLib == "org.apache.hadoop.hive.ql.io.orc.OrcSerde", p
    assert p.sd.serdeInfo.parameters == {"call": k}, p
    assert p.sd.parameters == {"i": i}, p
    assert p.sd.inputFormat == "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat", p


def test_kill9_during_add_partitions_leaves_whole_calls(store_url: str, tmp_path: Path) -> None:
    root = (tmp_path / "data").resolve().as_uri().replace("file:///", "file:/")
    warehouse, log = tmp_path / "warehouse", tmp_path / "metastore.log"
    server = HivemeshProcess(store_url, warehouse, log).start()
    state = ["pending"] * CALLS  # -> "sent" -> "ok" | "failed"
    lock = threading.Lock()
    next_call = iter(range(CALLS))
    ok_count = [0]
    enough, killed = threading.Event(), threading.Event()
    premature: list[str] = []

    def loader() -> None:
        try:
            conn = ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000))
        except Exception as e:  # noqa: BLE001
            premature.append(f"connect: {e!r}")
            return
        try:
            while True:
                with lock:
                    k = next(next_call, None)
                    if k is None:
                        return
                    state[k] = "sent"
                try:
                    n = conn.client.add_partitions(_call_partitions(k, root))
                except Exception as e:  # noqa: BLE001 - after the kill every client fails
                    state[k] = "failed"
                    if not killed.is_set():
                        premature.append(f"call {k}: {type(e).__name__}: {e}")
                    return
                with lock:
                    state[k] = "ok" if n == PER_CALL else f"returned {n}"
                    ok_count[0] += 1
                    if ok_count[0] >= KILL_AFTER:
                        enough.set()
        finally:
            conn.close()

    try:
        with ThriftClient(server.host, server.port) as c:
            c.create_database(Database(name=DB))
            c.create_table(_events_table())
        threads = [threading.Thread(target=loader, name=f"loader-{i}") for i in range(CLIENT_THREADS)]
        for t in threads:
            t.start()
        reached = enough.wait(DEADLINE_S)
        killed.set()
        server.kill()  # SIGKILL: no clean-up of any kind
        for t in threads:
            t.join(DEADLINE_S)
        assert not [t.name for t in threads if t.is_alive()], "a client hung after the kill"
    finally:
        server.kill()
    assert not premature, "calls failed before the kill:\n" + "\n".join(premature[:5])
    assert reached, f"only {ok_count[0]} calls succeeded before the deadline"
    assert not [s for s in state if s.startswith("returned")], "add_partitions returned a wrong count"
    assert "pending" in state, "the kill came after the last call: not in the middle of the load"

    server = HivemeshProcess(store_url, warehouse, log).start()  # same store, new process
    try:
        with ThriftClient(server.host, server.port) as c:
            parts = c.get_partitions(DB, TABLE, -1)
            by_call: dict[int, list[Partition]] = defaultdict(list)
            for p in parts:
                by_call[int(p.values[0])].append(p)
            in_flight = [k for k, s in enumerate(state) if s in ("sent", "failed")]
            for k in range(CALLS):
                got = by_call.pop(k, [])
                if state[k] == "ok":
                    assert len(got) == PER_CALL, f"call {k} returned success but has {len(got)} partitions"
                elif state[k] == "pending":
                    assert not got, f"call {k} was never sent but has {len(got)} partitions"
                else:
                    assert len(got) in (0, PER_CALL), f"call {k} was applied partially: {len(got)} partitions"
                assert sorted(int(p.values[1]) for p in got) == (list(range(PER_CALL)) if got else [])
                for p in got:
                    _check_partition(p, root)
            assert not by_call, f"partitions of no call: {sorted(by_call)[:5]}"
            assert len(c.get_partition_names(DB, TABLE, -1)) == len(parts)

            # the store is usable: the calls in flight and some never sent can be (re)done
            applied = {int(p.values[0]) for p in parts}
            redo = in_flight + [k for k, s in enumerate(state) if s == "pending"][:20]
            for k in redo:
                if k in applied:
                    with pytest.raises(AlreadyExistsException):
                        c.add_partitions(_call_partitions(k, root))
                else:
                    assert c.add_partitions(_call_partitions(k, root)) == PER_CALL
            for k in redo:
                got = c.get_partitions_ps(DB, TABLE, [str(k), ""], -1)
                assert len(got) == PER_CALL, (k, len(got))
                for p in got:
                    _check_partition(p, root)
            expected_calls = sum(1 for s in state if s == "ok") + len(redo)
            assert len(c.get_partition_names(DB, TABLE, -1)) == PER_CALL * expected_calls
    finally:
        server.stop()
    assert _orphans(store_url) == {"SDS": 0, "SERDES": 0, "CDS": 0}


def test_servers_starting_at_once_on_one_store_both_bootstrap(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two servers starting at once may both find the ``hive`` catalog missing; the second insert
    then breaks the catalog name's unique key. Replayed here deterministically: the second server's
    check is made to miss the first one's row, and it must still start on the one catalog."""
    from hivemesh.metastore.handler import LocalMetastore
    from hivemesh.metastore.schema import CTLGS
    from hivemesh.metastore.store import Store

    first_store, second_store = Store(store_url), Store(store_url)
    try:
        LocalMetastore(first_store, str(tmp_path / "wh"))
        checks: list[bool] = []
        real = LocalMetastore._has_default_catalog

        def missed_once(conn: sa.Connection) -> bool:
            checks.append(True)
            return False if len(checks) == 1 else real(conn)

        monkeypatch.setattr(LocalMetastore, "_has_default_catalog", staticmethod(missed_once))
        second = LocalMetastore(second_store, str(tmp_path / "wh"))
        assert len(checks) == 2  # the insert failed and the catalog was found afterwards
        assert second.get_catalog("hive").catalog.name == "hive"
        with second_store.engine.connect() as c:
            assert c.execute(sa.select(sa.func.count()).select_from(CTLGS)).scalar() == 1
    finally:
        first_store.dispose()
        second_store.dispose()
