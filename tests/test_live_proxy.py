"""Live Hive end to end on one machine: two zones, each a hivemesh metastore (SQLite) behind its
own live proxy (:class:`hivemesh.live.service.LiveService`), the command log on the session's
3-member etcd cluster. Writes through either zone's proxy reach both metastores, with locations
mapped to each zone's rule path; errors are the same a direct call gives; writes outside the
rules stay local; a zone that was down catches up from its stored position.

Fields left out of the comparison of the two zones: ``createTime`` of tables and partitions (a
Hive metastore sets it from its own clock, as Hive's does), storage locations (compared after
mapping each zone's rule path), and ids.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    AlreadyExistsException,
    CommitTxnRequest,
    Database,
    FieldSchema,
    GetValidWriteIdsRequest,
    MetaException,
    NoSuchObjectException,
    OpenTxnRequest,
    Partition,
)

from hivemesh.acid.tables import transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.cli import main
from hivemesh.client.metastore import MetastoreClient
from hivemesh.hive.txn_lists import ValidTxnList
from tests.support.etcd import EtcdCluster
from tests.support.live import Mesh, Zone, live_mesh, sd, table


@pytest.fixture(scope="module")
def mesh(etcd_cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    with live_mesh(etcd_cluster, tmp_path_factory.mktemp("live")) as m:
        yield m


def canonical(z: Zone, db: str) -> dict[str, Any]:
    """Database ``db`` of zone ``z`` as compared across zones: locations relative to the zone's
    rule path, createTime left out."""
    root = z.live_path

    def rel(location: str | None) -> str | None:
        if not location:
            return location
        path = location.removeprefix("file:")
        assert path.startswith(root + "/"), f"{location} is not under zone {z.name}'s rule path {root}"
        return path[len(root) + 1 :]

    with z.direct() as c:
        d = c.get_database(db)
        out: dict[str, Any] = {"db": (rel(d.locationUri), d.ownerName, d.parameters), "tables": {}}
        for name in sorted(c.get_all_tables(db)):
            t = c.get_table(db, name)
            parts = c.get_partitions(db, name, -1)
            out["tables"][name] = {
                "cols": [(f.name, f.type) for f in t.sd.cols],
                "location": rel(t.sd.location),
                "owner": t.owner,
                "params": t.parameters,
                "partitions": sorted(
                    (tuple(p.values), rel(p.sd.location), p.parameters.get("transient_lastDdlTime"))
                    for p in parts
                ),
            }
    return out


def test_writes_through_either_zone_reach_both_with_locations_mapped(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="sales", description="orders", parameters={"team": "x"}))
        c.create_table(table("sales", "orders"))  # no location: pinned under each zone's rule path
        assert c.get_table("sales", "orders").sd.location.endswith("/live/sales.db/orders")
    with west.via_proxy() as c:
        parts = [
            Partition(
                values=[f"2026-11-{d:02d}"], dbName="sales", tableName="orders", sd=sd(None), parameters={}
            )
            for d in (1, 2, 3)
        ]
        assert c.add_partitions(parts) == 3
        new = c.get_table("sales", "orders")
        new.sd.cols.append(FieldSchema("amount", "decimal(10,2)", None))
        c.alter_table("sales", "orders", new)
        assert c.drop_partition("sales", "orders", ["2026-11-02"], False) is True
    mesh.wait_caught_up()
    dumps = {name: canonical(z, "sales") for name, z in mesh.zones.items()}
    assert dumps["east"] == dumps["west"]
    orders = dumps["east"]["tables"]["orders"]
    assert orders["location"] == "sales.db/orders"
    assert [c for c, _ in orders["cols"]] == ["id", "name", "amount"]
    assert [p[0] for p in orders["partitions"]] == [("2026-11-01",), ("2026-11-03",)]
    assert orders["partitions"][0][1] == "sales.db/orders/ds=2026-11-01"
    assert orders["partitions"][0][2] is not None  # the DDL time pinned by the proposer: equal in both
    with west.direct() as c:  # each zone's files are its own
        assert c.get_database("sales").locationUri.removeprefix("file:") == f"{west.live_path}/sales.db"


def test_new_tables_follow_a_database_moved_through_the_proxy(mesh: Mesh) -> None:
    """The proxy keeps each database's location once read (it pins new tables under it) until its
    zone applies a command on the database: a table created after an alter_database that moves
    the database lands under the new location, in both zones."""
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_moved", description="", parameters={}))
        c.create_table(table("fin_moved", "before"))  # reads and keeps the database's location
        db = c.get_database("fin_moved")
        db.locationUri = f"{east.live_path}/elsewhere/fin_moved.db"
        c.alter_database("fin_moved", db)
        c.create_table(table("fin_moved", "after"))
    mesh.wait_caught_up()
    for z in (east, west):
        with z.direct() as c:
            where = {
                t: c.get_table("fin_moved", t).sd.location.removeprefix("file:") for t in ("before", "after")
            }
        assert where == {
            "before": f"{z.live_path}/fin_moved.db/before",
            "after": f"{z.live_path}/elsewhere/fin_moved.db/after",
        }, z.name


def test_errors_are_the_ones_a_metastore_gives_and_change_nothing(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_errors"))
        with pytest.raises(NoSuchObjectException):
            c.drop_table("fin_errors", "missing", True)
        with pytest.raises(AlreadyExistsException):
            c.create_database(Database(name="fin_errors"))
        with pytest.raises(MetaException, match="outside live rule 'sales'"):  # another zone's files
            c.create_table(table("fin_errors", "t", location=f"{west.live_path}/fin_errors.db/t"))
    mesh.wait_caught_up()
    for z in (east, west):
        with z.direct() as c:
            assert c.get_all_tables("fin_errors") == []


def test_concurrent_creates_from_two_zones_have_one_winner_everywhere(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_race"))
    outcomes: dict[str, str] = {}

    def create(z: Zone, cols: str) -> None:
        t = table("fin_race", "t", partitioned=False)
        t.sd.cols = [FieldSchema(cols, "string", None)]
        try:
            with z.via_proxy() as c:
                c.create_table(t)
            outcomes[z.name] = "created"
        except AlreadyExistsException:
            outcomes[z.name] = "AlreadyExists"

    threads = [threading.Thread(target=create, args=(z, f"col_{z.name}")) for z in (east, west)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes.values()) == ["AlreadyExists", "created"]
    winner = next(name for name, o in outcomes.items() if o == "created")
    mesh.wait_caught_up()
    for z in (east, west):
        with z.direct() as c:
            assert [f.name for f in c.get_table("fin_race", "t").sd.cols] == [f"col_{winner}"]


def test_writes_outside_the_rules_stay_in_their_zone(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="scratch"))  # no rule: east only
        c.create_database(Database(name="fin_q"))  # live database, only live_.* tables live
        c.create_table(table("fin_q", "local_only", partitioned=False, location=f"{east.root}/wh/fin_q.db/x"))
        c.create_table(table("fin_q", "live_orders", partitioned=False))
    mesh.wait_caught_up()
    with west.direct() as c:
        with pytest.raises(NoSuchObjectException):
            c.get_database("scratch")
        assert c.get_all_tables("fin_q") == ["live_orders"]
    with east.direct() as c:
        assert sorted(c.get_all_tables("fin_q")) == ["live_orders", "local_only"]


def test_a_zone_that_was_down_catches_up_from_its_position(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    mesh.stop_proxy("west")  # its applier stops with it; its position stays in etcd
    try:
        with east.via_proxy() as c:
            c.create_database(Database(name="fin_later"))
            c.create_table(table("fin_later", "t1", partitioned=False))
        for _ in range(100):  # east stores its position within 0.2 s of going idle
            result = CliRunner().invoke(main, ["live", "status", "--config", str(mesh.config), "--json"])
            assert result.exit_code == 0, result.output
            report = json.loads(result.output)
            if report["zones"]["east"]["behind"] == 0:
                break
            threading.Event().wait(0.05)
        assert report["zones"]["west"]["behind"] == 2 and report["zones"]["east"]["behind"] == 0
        assert report["zones"]["west"]["lag_s"] > 0
    finally:
        mesh.start_proxy("west")
    mesh.wait_caught_up()
    with west.direct() as c:
        assert c.get_all_tables("fin_later") == ["t1"]
    assert canonical(east, "fin_later") == canonical(west, "fin_later")
    result = CliRunner().invoke(main, ["live", "status", "--config", str(mesh.config), "--json"])
    assert json.loads(result.output)["zones"]["west"]["behind"] == 0


def test_txns_of_live_acid_tables_go_to_the_acid_owner_zone(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]  # the rule's acid_owner is east
    acid = table("fin_acid", "acid_orders", partitioned=False)
    acid.tableType, acid.parameters = "MANAGED_TABLE", {"transactional": "true"}
    with west.via_proxy() as c:
        c.create_database(Database(name="fin_acid"))
        c.create_table(acid)  # DDL: agreed and applied in both zones
        txn = c.open_txns(OpenTxnRequest(num_txns=1, user="alice", hostname="h")).txn_ids[0]
        got = c.allocate_table_write_ids(
            AllocateTableWriteIdsRequest("fin_acid", "acid_orders", txnIds=[txn])
        )
        assert [w.writeId for w in got.txnToWriteIds] == [1]
        c.commit_txn(CommitTxnRequest(txnid=txn))
    mesh.wait_caught_up()

    def high_water_mark(z: Zone) -> int:
        with z.direct() as c:
            snapshot = c.get_open_txns()
            txns = ValidTxnList(snapshot.txn_high_water_mark).to_string()  # no txn open here now
            valid = c.get_valid_write_ids(
                GetValidWriteIdsRequest(["fin_acid.acid_orders"], validTxnList=txns)
            )
            return int(valid.tblValidWriteIds[0].writeIdHighWaterMark)

    assert high_water_mark(east) == 1  # the write id came from the owner zone's metastore
    assert high_water_mark(west) == 0  # none was allocated in the writing zone
    with west.direct() as c:
        assert c.get_table("fin_acid", "acid_orders").parameters["transactional"] == "true"


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_acid_writes_through_any_zone_are_in_every_zone_when_their_commit_returns(mesh: Mesh) -> None:
    """An ACID write through a live proxy (here hivemesh's own writer: txn, lock and write id from
    the acid_owner zone east, files in the writing zone) has its delta directories copied to every
    zone before the commit reaches the owner: once the commit returns, every zone has the files.
    An aborted txn's files are never copied."""
    east, west = mesh.zones["east"], mesh.zones["west"]
    db = "fin_acidw"
    with west.via_proxy() as c:
        c.create_database(Database(name=db))
        c.create_table(transactional_table(db, "orders", [("id", "bigint"), ("name", "string")]))
        c.create_table(transactional_table(db, "events", [("id", "bigint")], [("ds", "string")]))
    mesh.wait_caught_up()
    west_db, east_db = Path(west.live_path) / f"{db}.db", Path(east.live_path) / f"{db}.db"

    def uri(z: Zone) -> str:
        assert z.proxy is not None and z.proxy.server is not None
        return f"thrift://127.0.0.1:{z.proxy.server.port}"

    with MetastoreClient(uri(west)) as mc:  # the other zone: its files start in west
        AcidWriter(mc, db, "orders").insert([(1, "apple"), (2, "pear")])
        AcidWriter(mc, db, "events").insert([(1, "2026-11-01"), (2, "2026-11-02")])  # dynamic partitions
    for rel in ("orders", "events/ds=2026-11-01", "events/ds=2026-11-02"):
        files = files_under(west_db / rel)
        assert any(f.startswith("delta_") for f in files), files
        assert files_under(east_db / rel) == files, rel  # no wait: there when the commit returned
    with MetastoreClient(uri(east)) as mc:  # the owner zone: shipped to west likewise
        AcidWriter(mc, db, "orders").insert([(3, "fig")])
    assert files_under(west_db / "orders") == files_under(east_db / "orders")
    assert len([f for f in files_under(east_db / "orders") if f.endswith("bucket_00000")]) == 2

    with west.via_proxy() as c:  # an aborted txn: its directory stays in west
        txn = c.open_txns(OpenTxnRequest(num_txns=1, user="alice", hostname="h")).txn_ids[0]
        wid = c.allocate_table_write_ids(AllocateTableWriteIdsRequest(db, "orders", txnIds=[txn]))
        stray = (
            west_db
            / "orders"
            / f"delta_{wid.txnToWriteIds[0].writeId:07d}_{wid.txnToWriteIds[0].writeId:07d}_0000"
        )
        stray.mkdir()
        (stray / "bucket_00000").write_bytes(b"never committed")
        c.abort_txn(AbortTxnRequest(txnid=txn))
    mesh.wait_caught_up()
    assert not (east_db / "orders" / stray.name).exists()


def test_data_reaches_a_zone_before_the_metadata_that_shows_it(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_data"))
        c.create_table(table("fin_data", "events"))
        c.create_table(table("fin_data", "totals", partitioned=False))
    mesh.wait_caught_up()
    east_dir = Path(east.live_path) / "fin_data.db"
    west_dir = Path(west.live_path) / "fin_data.db"
    part = east_dir / "events" / "ds=2026-11-27"
    part.mkdir(parents=True)
    (part / "part-0.orc").write_bytes(b"rows of the 27th" * 1000)
    (east_dir / "totals").mkdir(parents=True, exist_ok=True)
    (east_dir / "totals" / "part-0.csv").write_text("1,2\n")
    seen: dict[str, bool] = {}

    def watch_west() -> None:  # at the first moment west's metastore shows the partition, its files are there
        with west.direct() as c:
            for _ in range(400):
                if c.get_partition_names("fin_data", "events", -1):
                    seen["files"] = (west_dir / "events" / "ds=2026-11-27" / "part-0.orc").exists()
                    return
                threading.Event().wait(0.01)

    watcher = threading.Thread(target=watch_west)
    watcher.start()
    with east.via_proxy() as c:
        c.add_partitions(
            [Partition(values=["2026-11-27"], dbName="fin_data", tableName="events", parameters={})]
        )
        t = c.get_table("fin_data", "totals")
        t.parameters["numFiles"] = "1"  # what an INSERT's statistics update looks like
        c.alter_table("fin_data", "totals", t)
    watcher.join(10)
    mesh.wait_caught_up()
    assert seen == {"files": True}
    assert (west_dir / "events" / "ds=2026-11-27" / "part-0.orc").read_bytes() == b"rows of the 27th" * 1000
    assert (west_dir / "totals" / "part-0.csv").read_text() == "1,2\n"
    # an INSERT OVERWRITE: the old file replaced; the next statistics update mirrors it
    (east_dir / "totals" / "part-0.csv").unlink()
    (east_dir / "totals" / "part-1.csv").write_text("3,4\n")
    with east.via_proxy() as c:
        t = c.get_table("fin_data", "totals")
        t.parameters["numFiles"] = "1"
        t.parameters["totalSize"] = "4"
        c.alter_table("fin_data", "totals", t)
    mesh.wait_caught_up()
    assert sorted(p.name for p in (west_dir / "totals").iterdir()) == ["part-1.csv"]
    assert sorted(p.name for p in (east_dir / "totals").iterdir()) == [
        "part-1.csv"
    ]  # the source is untouched


def test_a_write_over_etcds_request_limit_is_agreed_whole(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_big"))
        c.create_table(table("fin_big", "t"))
        t = c.get_table("fin_big", "t")
        parts = []
        for i in range(4000):
            p_sd = copy.deepcopy(t.sd)
            p_sd.location = f"{t.sd.location}/ds=d{i:05d}"
            parts.append(
                Partition(values=[f"d{i:05d}"], dbName="fin_big", tableName="t", sd=p_sd, parameters={})
            )
        assert c.add_partitions(parts) == 4000  # one command of several MiB: stored in parts
    mesh.wait_caught_up()
    with west.direct() as c:
        names = c.get_partition_names("fin_big", "t", -1)
    assert len(names) == 4000 and names[0] == "ds=d00000" and names[-1] == "ds=d03999"


def test_a_partition_without_storage_gets_its_tables_in_every_zone(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_nosd"))
        c.create_table(table("fin_nosd", "t"))
        c.add_partitions([Partition(values=["a"], dbName="fin_nosd", tableName="t", parameters={})])
    mesh.wait_caught_up()
    for z in (east, west):
        with z.direct() as c:
            p = c.get_partition("fin_nosd", "t", ["a"])
            assert [f.name for f in p.sd.cols] == ["id", "name"]  # the table's, filled by the proposer
            assert p.sd.location.removeprefix("file:") == f"{z.live_path}/fin_nosd.db/t/ds=a"
