"""``hivemesh live check`` and ``hivemesh live repair`` on two zones (:mod:`tests.support.live`).

Writes through the proxies leave the zones consistent (exit 0). Out-of-band writes made straight
to one zone's metastore (a new table, a changed column, an extra partition, a dropped partition,
changed column statistics) are found by ``check`` (exit 1, naming object and zone) and mended by
``repair --from`` the right zone through the command log, after which ``check`` exits 0 again and
the data files under both zones' rule paths are untouched. A location outside a zone's rule path
is a difference in itself; a zone whose metastore cannot be reached stops the check (exit 2); a
zone whose applier is down is reported as not having applied the repair, and applies it once back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hive_metastore.ttypes import (
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    Database,
    FieldSchema,
    Function,
    FunctionType,
    LongColumnStatsData,
    Partition,
    PrincipalType,
)

from hivemesh.cli import main
from hivemesh.live.compaction import Compactor
from tests.support.etcd import EtcdCluster
from tests.support.live import Mesh, Zone, live_mesh, sd, table
from tests.support.servers import free_port

DB = "fin_chk"
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")


@pytest.fixture(scope="module")
def mesh(etcd_cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    with live_mesh(etcd_cluster, tmp_path_factory.mktemp("live-check")) as m:
        yield m


def live(mesh: Mesh, *args: str) -> Result:
    return CliRunner().invoke(main, ["live", *args, "--config", str(mesh.config)], env={"COLUMNS": "250"})


def report(result: Result, code: int) -> Any:
    assert result.exit_code == code, result.output
    return json.loads(result.output)


def stats(column: str, nulls: int) -> ColumnStatistics:
    data = ColumnStatisticsData(
        longStats=LongColumnStatsData(numNulls=nulls, numDVs=3, lowValue=1, highValue=9)
    )
    return ColumnStatistics(
        statsDesc=ColumnStatisticsDesc(
            isTblLevel=True, dbName=DB, tableName="orders", lastAnalyzed=1764288000
        ),
        statsObj=[ColumnStatisticsObj(column, "bigint", data)],
        engine="hive",
    )


def partition(day: str) -> Partition:
    return Partition(values=[day], dbName=DB, tableName="orders", sd=sd(None), parameters={})


def write_file(z: Zone, relpath: str) -> None:
    path = Path(z.live_path) / relpath / "part-0.orc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"{z.name}:{relpath}".encode())


def files(mesh: Mesh) -> dict[str, bytes]:
    """Every file under every zone's rule path, by path."""
    return {
        str(p): p.read_bytes()
        for z in mesh.zones.values()
        for p in sorted(Path(z.live_path).rglob("*"))
        if p.is_file()
    }


def found(divergences: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["object"], d["name"]): d for d in divergences}


def test_consistent_after_writes_through_the_proxies(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name=DB, description="check", parameters={"team": "x"}))
        c.create_table(table(DB, "orders"))
        c.create_function(
            Function(
                functionName="clean",
                dbName=DB,
                className="com.example.Clean",
                ownerName="alice",
                ownerType=PrincipalType.USER,
                createTime=0,
                functionType=FunctionType.JAVA,
                resourceUris=[],
            )
        )
    with west.via_proxy() as c:
        assert c.add_partitions([partition(d) for d in DAYS]) == len(DAYS)
        assert c.update_table_column_statistics(stats("id", 0)) is True
    for z in (east, west):  # the data mover's copies in each zone
        for d in DAYS:
            write_file(z, f"{DB}.db/orders/ds={d}")
    mesh.wait_caught_up()
    out = report(live(mesh, "check", "--json"), 0)
    assert out["consistent"] is True and out["divergences"] == []
    assert out["zones"] == ["east", "west"] and out["rules"] == ["sales"]
    compared = out["compared"]
    assert compared["database"] >= 1 and compared["function"] >= 1 and compared["partition"] >= len(DAYS)
    assert compared["table_column_statistics"] >= 1
    assert out["positions"] == {"east": out["head"], "west": out["head"]}
    text = live(mesh, "check")
    assert text.exit_code == 0 and "consistent" in text.output, text.output


def test_out_of_band_writes_are_found_and_repaired_from_the_right_zone(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with west.direct() as c:  # bypassing the proxy: nothing goes through the log
        c.create_table(table(DB, "sneaky", partitioned=False, location=f"{west.live_path}/{DB}.db/sneaky"))
        orders = c.get_table(DB, "orders")
        orders.sd.cols.append(FieldSchema("amount", "decimal(10,2)", None))
        c.alter_table(DB, "orders", orders)
        c.add_partitions([partition("2026-11-09")])
        assert c.drop_partition(DB, "orders", ["2026-11-02"], False) is True
        assert c.update_table_column_statistics(stats("id", 7)) is True
    with east.direct() as c:
        c.create_table(
            table(DB, "east_only", partitioned=False, location=f"{east.live_path}/{DB}.db/east_only")
        )
    write_file(west, f"{DB}.db/orders/ds=2026-11-09")
    write_file(west, f"{DB}.db/sneaky")
    before = files(mesh)

    out = report(live(mesh, "check", "--json"), 1)
    got = found(out["divergences"])
    assert got[("table", f"{DB}.sneaky")]["absent"] == ["east"]
    assert got[("table", f"{DB}.east_only")]["absent"] == ["west"]
    orders = got[("table", f"{DB}.orders")]
    assert sorted(map(sorted, orders["variants"])) == [["east"], ["west"]] and "amount" in orders["detail"]
    assert got[("partition", f"{DB}.orders/ds=2026-11-09")]["absent"] == ["east"]
    assert got[("partition", f"{DB}.orders/ds=2026-11-02")]["absent"] == ["west"]
    assert "numNulls" in got[("table_column_statistics", f"{DB}.orders.id")]["detail"]
    text = live(mesh, "check")
    assert text.exit_code == 1
    assert f"{DB}.orders/ds=2026-11-09" in text.output and "absent in east" in text.output

    fixed = report(live(mesh, "repair", "--from", "east", "--json"), 0)
    assert fixed["consistent"] is True and fixed["after"]["consistent"] is True
    methods = {c["method"] for c in fixed["commands"]}
    assert {
        "create_table",
        "alter_table",
        "drop_table",
        "add_partitions_req",
        "drop_partitions_req",
    } <= methods
    assert all(c["request_id"].startswith("repair.") for c in fixed["commands"])
    assert fixed["lagging"] == {} and fixed["skipped"] == {}

    report(live(mesh, "check", "--json"), 0)
    for z in (east, west):
        with z.direct() as c:
            assert sorted(c.get_all_tables(DB)) == ["east_only", "orders"]
            assert [f.name for f in c.get_table(DB, "orders").sd.cols] == ["id", "name"]
            assert sorted(c.get_partition_names(DB, "orders", -1)) == [f"ds={d}" for d in DAYS]
            assert c.get_table(DB, "east_only").sd.location.removeprefix("file:") == (
                f"{z.live_path}/{DB}.db/east_only"
            )
    assert files(mesh) == before  # no data file deleted, none written


def test_a_location_outside_the_rule_path_is_a_difference(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_out"))
    mesh.wait_caught_up()
    for z in (east, west):  # the same out-of-band table in both, each in its zone's warehouse
        with z.direct() as c:
            c.create_table(table("fin_out", "t", partitioned=False, location=f"{z.root}/wh/fin_out.db/t"))
    out = report(live(mesh, "check", "--rule", "sales", "--json"), 1)
    d = found(out["divergences"])[("table", "fin_out.t")]
    assert set(d["problems"]) == {"east", "west"} and "outside rule 'sales'" in d["problems"]["west"]
    fixed = report(live(mesh, "repair", "--from", "east", "fin_out.t", "--json"), 1)
    assert "fin_out.t" in next(iter(fixed["skipped"])) and fixed["commands"] == []
    for z in (east, west):
        with z.direct() as c:
            c.drop_table("fin_out", "t", False)
    report(live(mesh, "check", "--json"), 0)


def test_check_cannot_run_without_every_zone(mesh: Mesh, tmp_path: Path) -> None:
    cfg = yaml.safe_load(mesh.config.read_text())
    cfg["zones"]["west"]["metastore"] = f"thrift://127.0.0.1:{free_port()}"
    broken = tmp_path / "mesh.yaml"
    broken.write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(main, ["live", "check", "--config", str(broken)])
    assert result.exit_code == 2 and "zone west" in result.output, result.output
    result = CliRunner().invoke(main, ["live", "check", "--config", str(mesh.config), "--rule", "nope"])
    assert result.exit_code == 2 and "no live rule named 'nope'" in result.output, result.output
    result = CliRunner().invoke(main, ["live", "repair", "--config", str(mesh.config), "--from", "north"])
    assert result.exit_code == 2 and "unknown zone 'north'" in result.output, result.output


def test_a_database_one_zone_lacks_is_created_with_its_contents_or_dropped_without_its_files(
    mesh: Mesh,
) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.direct() as c:
        c.create_database(Database(name="fin_new", locationUri=f"{east.live_path}/fin_new.db"))
        c.create_table(table("fin_new", "p", location=f"{east.live_path}/fin_new.db/p"))
        c.add_partitions([Partition(values=[d], dbName="fin_new", tableName="p", sd=sd(None)) for d in DAYS])
        part_stats = stats("id", 2)
        part_stats.statsDesc = ColumnStatisticsDesc(False, "fin_new", "p", f"ds={DAYS[0]}", 1764288000)
        assert c.update_partition_column_statistics(part_stats) is True
    with west.direct() as c:
        c.create_database(Database(name="fin_gone", locationUri=f"{west.live_path}/fin_gone.db"))
        c.create_table(table("fin_gone", "t", partitioned=False, location=f"{west.live_path}/fin_gone.db/t"))
    write_file(west, "fin_gone.db/t")
    before = files(mesh)
    out = report(live(mesh, "check", "--json"), 1)
    got = found(out["divergences"])
    assert got[("database", "fin_new")]["absent"] == ["west"]
    assert got[("database", "fin_gone")]["absent"] == ["east"]

    fixed = report(live(mesh, "repair", "--from", "east", "--json"), 0)
    methods = {c["method"] for c in fixed["commands"]}
    assert {
        "create_database",
        "drop_database",
        "create_table",
        "add_partitions_req",
        "update_partition_column_statistics",
    } <= methods
    with west.direct() as c:
        assert "fin_gone" not in c.get_all_databases()
        assert sorted(c.get_partition_names("fin_new", "p", -1)) == [f"ds={d}" for d in DAYS]
        assert c.get_database("fin_new").locationUri.removeprefix("file:") == f"{west.live_path}/fin_new.db"
    assert files(mesh) == before  # fin_gone's files stay in west
    after = report(live(mesh, "check", "--json"), 0)
    assert after["compared"]["partition_column_statistics"] >= 1


def test_a_zone_that_is_down_gets_the_repair_when_it_comes_back(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with west.direct() as c:
        c.create_database(Database(name="fin_late", locationUri=f"{west.live_path}/fin_late.db"))
    mesh.stop_proxy("west")  # west's applier stops: it cannot apply the repair now
    try:
        out = report(live(mesh, "repair", "--from", "east", "fin_late", "--timeout", "1", "--json"), 1)
        assert list(out["lagging"]) == ["west"] and [c["method"] for c in out["commands"]] == [
            "drop_database"
        ]
        text = live(mesh, "repair", "--from", "east", "fin_late", "--timeout", "1")
        assert text.exit_code == 1 and "zone west did not apply the repair within 1s" in text.output, (
            text.output
        )
    finally:
        mesh.start_proxy("west")
    mesh.wait_caught_up()
    with west.direct() as c:
        assert "fin_late" not in c.get_all_databases()
    report(live(mesh, "check", "--json"), 0)
    with east.direct() as c:
        assert "fin_late" not in c.get_all_databases()


def test_a_zone_behind_the_compaction_point_resyncs_by_comparison(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_resync"))
    mesh.wait_caught_up()
    mesh.stop_proxy("west")
    try:
        with east.via_proxy() as c:  # west misses these, then the log forgets them
            c.create_table(table("fin_resync", "t1"))
            c.add_partitions(
                [Partition(values=[d], dbName="fin_resync", tableName="t1", parameters={}) for d in DAYS]
            )
            c.create_table(table("fin_resync", "t2", partitioned=False))
        data = Path(east.live_path) / "fin_resync.db" / "t1" / f"ds={DAYS[0]}"
        data.mkdir(parents=True, exist_ok=True)
        (data / "part-0").write_text("rows\n")
        assert east.proxy is not None and east.proxy.log is not None
        log = east.proxy.log
        mesh.wait_caught_up()  # east only
        head, _ = log.head()
        log.compact(head)
    finally:
        mesh.start_proxy("west")
    mesh.wait_caught_up()
    assert west.proxy is not None and west.proxy.applier is not None
    assert west.proxy.applier.resynced_from == "east"
    with west.direct() as c:
        assert sorted(c.get_all_tables("fin_resync")) == ["t1", "t2"]
        assert c.get_partition_names("fin_resync", "t1", -1) == [f"ds={d}" for d in DAYS]
    assert (
        Path(west.live_path) / "fin_resync.db" / "t1" / f"ds={DAYS[0]}" / "part-0"
    ).read_text() == "rows\n"
    report(live(mesh, "check", "--json"), 0)
    with east.via_proxy() as c:  # and the log is followed again after the head it read
        c.create_table(table("fin_resync", "t3", partitioned=False))
    mesh.wait_caught_up()
    with west.direct() as c:
        assert sorted(c.get_all_tables("fin_resync")) == ["t1", "t2", "t3"]


def test_the_log_is_compacted_one_round_late_and_never_past_the_slowest_zone(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    assert east.proxy is not None and east.proxy.log is not None
    log = east.proxy.log
    compactor = Compactor(log, ["east", "west"], interval_s=3600)
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_compact"))
    mesh.wait_caught_up()
    assert compactor.run_once() is None  # the first round only notes the head
    first_head, _ = log.head()
    mesh.stop_proxy("west")
    try:
        with east.via_proxy() as c:
            c.create_table(table("fin_compact", "t", partitioned=False))
        mesh.wait_caught_up()
        west_at = int(log.zone_states()["west"]["position"])
        below = compactor.run_once()
        assert below == min(west_at, first_head) + 1  # commands of the last round are kept
        assert log.compacted_below() == below
        assert compactor.run_once() == west_at + 1 or log.compacted_below() == west_at + 1
        assert log.compacted_below() <= west_at + 1  # never past west: it can still follow the log
    finally:
        mesh.start_proxy("west")
    mesh.wait_caught_up()
    assert west.proxy is not None and west.proxy.applier is not None
    assert west.proxy.applier.resynced_from is None  # it followed the log, no re-sync needed
    with west.direct() as c:
        assert c.get_all_tables("fin_compact") == ["t"]
    broken = Compactor(log, ["east", "west", "north"], interval_s=3600)
    broken.run_once()
    assert broken.run_once() is None  # a zone that never stored a position stops compaction


def out_of_band_counts(watchers: dict[str, Any]) -> dict[str, int]:
    """One round of each zone's out-of-band watcher; the out-of-band writes each found so far."""
    counts = {}
    for name, w in watchers.items():
        assert w is not None
        w.run_once()
        counts[name] = w.count
    return counts


def test_out_of_band_writes_are_found_in_the_zones_notification_log(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_oob"))
        c.create_table(table("fin_oob", "proxied"))
    mesh.wait_caught_up()
    watchers = {z.name: z.proxy.watcher for z in (east, west) if z.proxy is not None}
    before = out_of_band_counts(watchers)  # the proxied writes: explained by the appliers' windows
    with west.direct() as c:  # straight to west's metastore
        c.create_table(table("fin_oob", "sneaky"))
    with east.via_proxy() as c:  # a proxied write at the same time, in both zones
        c.create_table(table("fin_oob", "proxied2"))
    mesh.wait_caught_up()
    found = {name: n - before[name] for name, n in out_of_band_counts(watchers).items()}
    assert found == {"east": 0, "west": 1}
    west_watcher = watchers["west"]
    assert west_watcher is not None and west_watcher.recent[-1]["object"] == "fin_oob.sneaky"
    assert west_watcher.recent[-1]["type"] == "CREATE_TABLE"
    assert west.proxy is not None and west.proxy.health()[1]["out_of_band"] >= 1
    with west.direct() as c:
        c.drop_table("fin_oob", "sneaky", False)  # undone: the zones agree again
    result = live(mesh, "status", "--json")  # what the zone stored for status
    for _ in range(100):
        if report(result, 0)["zones"]["west"]["out_of_band"] >= 1:
            break
        threading.Event().wait(0.05)
        result = live(mesh, "status", "--json")
    west_status = report(result, 0)["zones"]["west"]
    assert west_status["out_of_band"] >= 1 and west_status["last_out_of_band"]["object"] == "fin_oob.sneaky"
    assert "out-of-band writes" in live(mesh, "status").output


def test_concurrent_proxied_writes_are_never_taken_for_out_of_band_ones(mesh: Mesh) -> None:
    """Eight writers through both zones at once, for two seconds: every event in either zone's
    notification log is explained by the command that made it (the appliers share event-id reads
    between commands on other objects, and read them ahead while idle; none may leave a running
    command's events outside its window)."""
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_busy"))
    mesh.wait_caught_up()
    watchers = {z.name: z.proxy.watcher for z in (east, west) if z.proxy is not None}
    before = out_of_band_counts(watchers)
    stop = time.monotonic() + 2.0
    done: list[int] = []

    def writer(z: Zone, i: int) -> None:
        with z.via_proxy() as c:
            k = 0
            while time.monotonic() < stop:
                c.create_table(table("fin_busy", f"t{z.name}{i}_{k}"))
                c.drop_table("fin_busy", f"t{z.name}{i}_{k}", False)
                k += 1
            done.append(k)

    threads = [threading.Thread(target=writer, args=(z, i)) for z in (east, west) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(done) == 8 and sum(done) > 8, done
    mesh.wait_caught_up()
    found = {name: n - before[name] for name, n in out_of_band_counts(watchers).items()}
    assert found == {"east": 0, "west": 0}, [w.recent for w in watchers.values() if w is not None]


def test_data_files_are_compared_and_mended_on_request(mesh: Mesh) -> None:
    east, west = mesh.zones["east"], mesh.zones["west"]
    with east.via_proxy() as c:
        c.create_database(Database(name="fin_files"))
        c.create_table(table("fin_files", "flat", partitioned=False))
        c.create_table(table("fin_files", "parted"))
        c.add_partitions([Partition(values=["a"], dbName="fin_files", tableName="parted", parameters={})])
    mesh.wait_caught_up()
    east_db, west_db = Path(east.live_path) / "fin_files.db", Path(west.live_path) / "fin_files.db"
    for d in (east_db, west_db):
        (d / "flat").mkdir(parents=True, exist_ok=True)
        (d / "parted" / "ds=a").mkdir(parents=True, exist_ok=True)
        (d / "flat" / "part-0").write_text("same\n")
    (east_db / "parted" / "ds=a" / "part-0").write_text("east's rows\n")  # west lacks it
    (west_db / "flat" / "part-0").write_text("same!\n")  # a different size
    (west_db / "flat" / "stray").write_text("x\n")  # a file east does not have
    assert report(live(mesh, "check", "--json"), 0)["consistent"]  # metadata alone: the same
    found = report(live(mesh, "check", "--data", "--json"), 1)["divergences"]
    assert {(d["object"], d["name"]) for d in found} == {
        ("table_data", "fin_files.flat"),
        ("partition_data", "fin_files.parted/ds=a"),
    }
    assert report(live(mesh, "repair", "--from", "east", "--data", "--json"), 0)["consistent"]
    assert (west_db / "flat" / "part-0").read_text() == "same\n"
    assert not (west_db / "flat" / "stray").exists()  # the directory mirrors east's
    assert (west_db / "parted" / "ds=a" / "part-0").read_text() == "east's rows\n"
    assert (east_db / "flat" / "part-0").read_text() == "same\n"  # the source untouched
    with_md5 = live(mesh, "check", "--data", "--checksums", "--json")  # other tests' files differ by content
    assert [
        d["name"] for d in json.loads(with_md5.output)["divergences"] if d["name"].startswith("fin_files")
    ] == []
