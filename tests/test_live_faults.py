"""Live Hive under faults, on loopback: a zone's metastore down (its applier waits and catches up,
its proxy refuses writes past ``max_apply_lag_s``, the writing zone is not delayed), the etcd
quorum lost (writes fail with a MetaException that says so, reads go on) and a zone's
``hivemesh live serve`` process killed -9 at random points while another zone writes (restarted,
it applies every command exactly once: both zones' notification logs hold the same events).

Two zones of hivemesh metastores (SQLite) and the session's 3-member etcd cluster; every fault is
undone after its test. ``HIVEMESH_LIVE_SEED`` repeats the random kill points of a run.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    FieldSchema,
    MetaException,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.client.metastore import MetastoreClient
from hivemesh.live.log import CommandLog
from hivemesh.live.service import LiveService
from hivemesh.metastore.service import MetastoreService
from tests.support.etcd import EtcdCluster
from tests.support.live import start_metastore
from tests.support.live_process import LiveProcess
from tests.support.servers import ThriftClient

T = TypeVar("T")
MAX_LAG_S = 1.0


def eventually(fn: Callable[[], T], what: str, timeout_s: float = 30.0) -> T:
    """``fn()``'s first truthy value, trying every 50 ms; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout_s}s (last: {last!r})")


class Zones:
    """Two zones' metastores (restartable on their ports) and the mesh.yaml naming them."""

    def __init__(self, base: Path, endpoints: list[str]) -> None:
        self.base = base
        self.metastores: dict[str, MetastoreService] = {}
        self.ports: dict[str, int] = {}
        for zone in ("east", "west"):
            (base / zone).mkdir()
            self.start_metastore(zone)
        self.config = base / "mesh.yaml"
        self.prefix = f"/hivemesh-test/faults-{uuid.uuid4().hex[:8]}"
        self.config.write_text(
            yaml.safe_dump(
                {
                    "zones": {
                        z: {
                            "metastore": f"thrift://127.0.0.1:{self.ports[z]}",
                            "warehouse": str(base / z / "wh"),
                        }
                        for z in self.ports
                    },
                    "live": {
                        "etcd": {"endpoints": endpoints, "prefix": self.prefix, "timeout_s": 2.0},
                        "rules": [
                            {
                                "name": "all",
                                "databases": ["fin_.*"],
                                "paths": {z: str(base / z / "live") for z in self.ports},
                                "acid_owner": "east",
                            }
                        ],
                        "max_apply_lag_s": MAX_LAG_S,
                    },
                }
            )
        )

    def start_metastore(self, zone: str) -> None:
        svc = start_metastore(self.base / zone, self.ports.get(zone, 0))
        assert svc.server is not None
        self.metastores[zone], self.ports[zone] = svc, svc.server.port

    def direct(self, zone: str) -> ThriftClient:
        return ThriftClient("127.0.0.1", self.ports[zone])

    def dump(self, zone: str, db: str) -> dict[str, Any]:
        """Tables (columns, location relative to the zone's rule path) and partitions of ``db``."""
        root = str(self.base / zone / "live") + "/"
        with self.direct(zone) as c:
            out = {}
            for name in sorted(c.get_all_tables(db)):
                t = c.get_table(db, name)
                parts = c.get_partitions(db, name, -1)
                out[name] = (
                    [f.name for f in t.sd.cols],
                    t.sd.location.removeprefix("file:").removeprefix(root),
                    sorted(tuple(p.values) for p in parts),
                )
            return out

    def events(self, zone: str, db: str) -> list[tuple[str, str | None]]:
        with MetastoreClient(f"thrift://127.0.0.1:{self.ports[zone]}") as c:
            return [(e.eventType, e.tableName) for e in c.next_notification(0, db=db)]

    def stop(self) -> None:
        for svc in self.metastores.values():
            svc.stop()


@pytest.fixture(scope="module")
def zones(etcd_cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zones]:
    z = Zones(tmp_path_factory.mktemp("live-faults"), etcd_cluster.endpoints)
    yield z
    z.stop()


@pytest.fixture()
def cluster(etcd_cluster: EtcdCluster) -> Iterator[EtcdCluster]:
    try:
        yield etcd_cluster
    finally:
        etcd_cluster.heal()


@pytest.fixture()
def proxies(zones: Zones) -> Iterator[dict[str, LiveService]]:
    out = {z: LiveService(zones.config, z, port=0, wait_s=20.0).start() for z in ("east", "west")}
    yield out
    for svc in out.values():
        svc.stop()


def table(db: str, name: str) -> Table:
    sd = StorageDescriptor(
        cols=[FieldSchema("id", "bigint", None)],
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
    )
    return Table(
        tableName=name,
        dbName=db,
        sd=sd,
        partitionKeys=[FieldSchema("ds", "string", None)],
        tableType="EXTERNAL_TABLE",
        parameters={"EXTERNAL": "TRUE"},
    )


def via(svc: LiveService) -> ThriftClient:
    assert svc.server is not None
    return ThriftClient("127.0.0.1", svc.server.port)


def test_a_zone_metastore_down_lags_refuses_writes_and_catches_up(
    zones: Zones, proxies: dict[str, LiveService]
) -> None:
    east, west = proxies["east"], proxies["west"]
    zones.metastores["west"].stop()
    try:
        with via(east) as c:  # acknowledged by east alone: east does not wait for west
            c.create_database(Database(name="fin_down"))
            c.create_table(table("fin_down", "t1"))
            assert c.get_table("fin_down", "t1").tableName == "t1"
        assert west.applier is not None
        eventually(lambda: west.applier.lag_s() > MAX_LAG_S, "west's applier lagging")  # type: ignore[union-attr]
        assert "metastore 127.0.0.1" in (west.applier.last_error or "")
        ok, details = west.health()
        assert not ok and details["lag_s"] > MAX_LAG_S
        with via(west) as c, pytest.raises(MetaException, match="zone west refuses writes: it is .* behind"):
            c.create_table(table("fin_down", "t2"))
    finally:
        zones.start_metastore("west")  # same port, same SQLite file
    assert west.applier is not None and east.log is not None
    head, _ = east.log.head()
    eventually(lambda: west.applier.position >= head and west.health()[0], "west caught up")  # type: ignore[union-attr]
    with via(west) as c:
        c.create_table(table("fin_down", "t2"))
    eventually(lambda: zones.dump("east", "fin_down") == zones.dump("west", "fin_down"), "both zones equal")
    assert sorted(zones.dump("west", "fin_down")) == ["t1", "t2"]


def test_lost_quorum_fails_writes_with_a_clear_error_and_reads_go_on(
    zones: Zones, proxies: dict[str, LiveService], cluster: EtcdCluster
) -> None:
    east = proxies["east"]
    with via(east) as c:
        c.create_database(Database(name="fin_quorum"))
    leader = cluster.leader()
    others = [m for m in cluster.members if m is not leader]
    cluster.pause(others[0])
    cluster.pause(others[1])  # one of three left: no quorum
    with via(east) as c:
        with pytest.raises(
            MetaException, match="outcome of create_table unknown: the command log is unavailable"
        ) as e:
            c.create_table(table("fin_quorum", "t"))
        assert "etcd http://" in str(e.value.message)
        assert c.get_database("fin_quorum").name == "fin_quorum"  # reads need no agreement
    cluster.heal()

    def create() -> bool:
        with via(east) as c:
            try:
                c.create_table(table("fin_quorum", "t"))
            except AlreadyExistsException:
                pass  # the write of unknown outcome was taken when the members came back: allowed
        return True

    eventually(create, "a write after quorum came back")
    eventually(
        lambda: zones.dump("west", "fin_quorum") == zones.dump("east", "fin_quorum") != {}, "both zones equal"
    )


def test_live_process_killed_at_random_points_applies_everything_once(zones: Zones, tmp_path: Path) -> None:
    seed = int(os.environ.get("HIVEMESH_LIVE_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    east = LiveService(zones.config, "east", port=0, wait_s=20.0).start()
    west = LiveProcess(zones.config, "west", tmp_path / "west.log").start()
    done = threading.Event()
    errors: list[BaseException] = []

    def workload() -> None:
        try:
            with via(east) as c:
                c.create_database(Database(name="fin_crash"))
                for i in range(12):
                    c.create_table(table("fin_crash", f"t{i}"))
                    c.add_partitions(
                        [
                            Partition(values=[f"d{j}"], dbName="fin_crash", tableName=f"t{i}", parameters={})
                            for j in range(3)
                        ]
                    )
                    t = c.get_table("fin_crash", f"t{i}")
                    t.sd.cols.append(FieldSchema("extra", "string", None))
                    c.alter_table("fin_crash", f"t{i}", t)
                    if i % 3 == 0:
                        c.drop_partition("fin_crash", f"t{i}", ["d0"], False)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=workload, daemon=True)
    writer.start()
    kills = 0
    try:
        while not done.is_set() and kills < 4:
            time.sleep(rnd.uniform(0.05, 0.4))
            west.kill()
            kills += 1
            time.sleep(rnd.uniform(0.0, 0.2))
            west.start()
        writer.join(120)
        assert not errors, f"seed {seed}: {errors[0]!r}"
        assert kills >= 1, f"seed {seed}: the workload ended before the first kill"
        log = CommandLog(east.cfg.live.etcd)
        try:
            head, _ = log.head()
            eventually(
                lambda: log.zone_states()["west"]["position"] >= head, f"seed {seed}: west at the head"
            )
        finally:
            log.close()
    finally:
        west.stop()
        east.stop()
    assert zones.dump("west", "fin_crash") == zones.dump("east", "fin_crash"), f"seed {seed}"
    events = zones.events("east", "fin_crash")
    assert len(events) == 1 + 12 * 3 + 4, (
        f"seed {seed}: {events}"
    )  # database, 12 x (table, partitions, alter), drops
    assert zones.events("west", "fin_crash") == events, (
        f"seed {seed}: west applied a command twice or not at all"
    )
