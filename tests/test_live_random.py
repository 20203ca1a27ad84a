"""Live Hive, seeded and randomized: three zones (``z1`` and ``z2`` hivemesh metastores, ``z3`` the
real Apache Hive 4.2 metastore (the session's ``hive4``, Derby); zone ``z3``'s live proxy a
``hivemesh live serve`` subprocess, zone ``z1`` reaching etcd through TCP relays) take writes from
one writer per zone at once, some on shared names (conflicts), while faults are injected at
random: the etcd leader hung (SIGSTOP) then resumed, an etcd member killed -9 and restarted, zone
``z3``'s live process killed -9 and restarted, zone ``z2``'s metastore stopped and restarted, and
zone ``z1``'s links to etcd black-holed (one direction or both) then healed.

After the faults are healed and the writes quiesce, every zone must reach the log's head and:

- ``live check`` finds the zones consistent, and the canonical dumps (tables, columns, partitions,
  locations relative to each zone's rule path) are equal;
- every acknowledged write is there: each table a writer created (unique names) and did not drop
  exists, with every partition it added; a write answered with a deterministic error is not;
  a write whose outcome was unknown may be either;
- exactly once: each zone's notification log holds one CREATE_TABLE event per unique table (in
  Hive 4.2 too, whose live process is the one killed -9).

The Hive 4.2 metastore is shared with the session's other Hive 4 tests: the run's database has a
name of its own, and the rule covers that database only.

``HIVEMESH_LIVE_SEED`` repeats a run (the seed is in every failure message).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    GetTableRequest,
    InvalidObjectException,
    NoSuchObjectException,
    Partition,
)
from thrift.Thrift import TException
from thrift.transport.TTransport import TTransportException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.live.check import check, open_zones
from hivemesh.live.config import load_live_config
from hivemesh.live.log import CommandLog
from hivemesh.live.service import LiveService
from hivemesh.metastore.service import MetastoreService
from tests.support.etcd import EtcdCluster
from tests.support.hive4 import Hive4Metastore
from tests.support.live import start_metastore, table
from tests.support.live_process import LiveProcess
from tests.support.relay import Relay
from tests.support.servers import ThriftClient

DB = f"fin_rand_{uuid.uuid4().hex[:8]}"
ZONES = ("z1", "z2", "z3")
HIVEMESH_ZONES = ("z1", "z2")  # z3: Hive 4.2
OPS_PER_WRITER = 60


@dataclass
class Writer:
    """What one zone's writer did: per unique table, whether its create was acknowledged
    (True), refused (False) or unknown (None), its drop likewise, and the partitions acknowledged."""

    zone: str
    created: dict[str, bool | None] = field(default_factory=dict)
    dropped: dict[str, bool | None] = field(default_factory=dict)
    partitions: dict[str, set[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Zones:
    def __init__(self, base: Path, cluster: EtcdCluster, hive4: Hive4Metastore) -> None:
        self.base = base
        self.hive4 = hive4
        self.metastores: dict[str, MetastoreService] = {}
        self.ports: dict[str, int] = {"z3": hive4.port}
        for z in ZONES:
            (base / z).mkdir()
        for z in HIVEMESH_ZONES:
            self.start_metastore(z)
        self.relays = [Relay(ep.removeprefix("http://")).start() for ep in cluster.endpoints]
        prefix = f"/hivemesh-test/random-{uuid.uuid4().hex[:8]}"
        self.config = self._write(base / "mesh.yaml", cluster.endpoints, prefix)
        self.config_z1 = self._write(
            base / "mesh-z1.yaml", [f"http://{r.address}" for r in self.relays], prefix
        )  # same mesh, z1's own route to etcd

    def _write(self, path: Path, endpoints: list[str], prefix: str) -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "zones": {
                        z: {
                            "metastore": f"thrift://127.0.0.1:{self.ports[z]}",
                            "warehouse": f"file:{self.hive4.warehouse}"
                            if z == "z3"
                            else str(self.base / z / "wh"),
                        }
                        for z in ZONES
                    },
                    "live": {
                        "etcd": {"endpoints": endpoints, "prefix": prefix, "timeout_s": 2.0},
                        "rules": [
                            {
                                "name": "all",
                                "databases": [DB],
                                "paths": {z: str(self.base / z / "live") for z in ZONES},
                                "acid_owner": "z1",
                            }
                        ],
                        "max_apply_lag_s": 8,
                        "state_dir": str(self.base / "state"),
                        "store": f"sqlite:///{self.base / 'live.db'}",
                    },
                }
            )
        )
        return path

    def start_metastore(self, zone: str) -> None:
        svc = start_metastore(self.base / zone, self.ports.get(zone, 0))
        assert svc.server is not None
        self.metastores[zone], self.ports[zone] = svc, svc.server.port

    def dump(self, zone: str) -> dict[str, Any]:
        root = str(self.base / zone / "live") + "/"
        with ThriftClient("127.0.0.1", self.ports[zone]) as c:
            out = {}
            for name in sorted(c.get_all_tables(DB)):
                t = c.get_table_req(GetTableRequest(dbName=DB, tblName=name)).table  # Hive 4.2: no get_table
                out[name] = (
                    [(f.name, f.type) for f in t.sd.cols],
                    t.sd.location.removeprefix("file:").removeprefix(root),
                    sorted(c.get_partition_names(DB, name, -1)),
                )
            return out

    def create_events(self, zone: str) -> dict[str, int]:
        with MetastoreClient(f"thrift://127.0.0.1:{self.ports[zone]}") as c:
            counts: dict[str, int] = {}
            for e in c.next_notification(0, db=DB):
                if e.eventType == "CREATE_TABLE":
                    counts[e.tableName] = counts.get(e.tableName, 0) + 1
            return counts

    def stop(self) -> None:
        for r in self.relays:
            r.stop()
        for m in self.metastores.values():
            m.stop()


@pytest.fixture()
def zones(etcd_cluster: EtcdCluster, hive4: Hive4Metastore, tmp_path: Path) -> Iterator[Zones]:
    z = Zones(tmp_path, etcd_cluster, hive4)
    try:
        yield z
    finally:
        etcd_cluster.heal()
        z.stop()


def unknown(e: BaseException) -> bool:
    """An answer that leaves the outcome open: the proxy says so, or the connection broke."""
    if isinstance(e, TTransportException | OSError | EOFError):
        return True
    return "unknown" in str(getattr(e, "message", "") or e)


@pytest.mark.parametrize("hive4", ["derby"], indirect=True)
def test_random_writes_and_faults_end_consistent_with_every_acknowledged_write_once(
    zones: Zones, etcd_cluster: EtcdCluster, tmp_path: Path
) -> None:
    seed = int(os.environ.get("HIVEMESH_LIVE_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    proxies: dict[str, Any] = {
        "z1": LiveService(zones.config_z1, "z1", port=0, wait_s=8.0).start(),
        "z2": LiveService(zones.config, "z2", port=0, wait_s=8.0).start(),
    }
    z3 = LiveProcess(zones.config, "z3", tmp_path / "z3.log").start()
    ports = {"z1": proxies["z1"].server.port, "z2": proxies["z2"].server.port, "z3": z3.port}
    with ThriftClient("127.0.0.1", ports["z1"]) as c:
        c.create_database(Database(name=DB))
    writers = {z: Writer(z) for z in ZONES}
    faults: list[str] = []

    def write(zone: str, w: Writer, wrnd: random.Random) -> None:
        client: ThriftClient | None = None

        def call(fn: Callable[[Any], Any]) -> bool | None:
            """True: acknowledged; False: a deterministic error; None: unknown."""
            nonlocal client
            for _ in range(200):
                if client is None:
                    try:
                        client = ThriftClient("127.0.0.1", ports[zone], timeout_ms=15_000)
                    except (TException, OSError):
                        time.sleep(0.1)  # the zone's proxy is restarting: nothing was sent
                        continue
                try:
                    fn(client.client)
                    return True
                except (AlreadyExistsException, NoSuchObjectException, InvalidObjectException):
                    return False  # deterministic (Hive 4.2: InvalidObject for partitions of a missing table)
                except (TTransportException, OSError, EOFError):
                    client.close()
                    client = None
                    return None  # the call may have been proposed before the connection broke
                except TException as e:
                    message = str(getattr(e, "message", "") or e)
                    if "refuses writes" in message:
                        time.sleep(0.2)  # the zone is behind: nothing was proposed
                        continue
                    if unknown(e):
                        return None
                    w.errors.append(f"{type(e).__name__}: {message}")
                    return False
            w.errors.append("gave up: the zone refused writes for 200 tries")
            return False

        mine: list[str] = []
        for i in range(OPS_PER_WRITER):
            roll = wrnd.random()
            if roll < 0.35 or not mine:
                name = f"{zone}_t{i}"
                w.created[name] = call(lambda c, n=name: c.create_table(table(DB, n)))
                if w.created[name] is not False:
                    mine.append(name)
            elif roll < 0.7:
                name = wrnd.choice(mine)
                value = f"p{i}"
                part = Partition(values=[value], dbName=DB, tableName=name, parameters={})
                if call(lambda c, p=part: c.add_partitions([p])):
                    w.partitions.setdefault(name, set()).add(f"ds={value}")
            elif roll < 0.8:
                name = wrnd.choice(mine)
                mine.remove(name)
                w.dropped[name] = call(lambda c, n=name: c.drop_table(DB, n, False))
            else:  # shared names: writers of every zone race on them
                name = f"shared_{wrnd.randrange(3)}"
                if wrnd.random() < 0.5:
                    call(lambda c, n=name: c.create_table(table(DB, n)))
                else:
                    call(lambda c, n=name: c.drop_table(DB, n, False))
        if client is not None:
            client.close()

    def inject_faults(writers_alive: Callable[[], bool]) -> None:
        """Faults at random until the writers are done. In this (the main) thread: processes
        restarted here must not die with a helper thread (they are spawned with PDEATHSIG)."""
        while writers_alive():
            time.sleep(rnd.uniform(0.2, 0.8))
            kind = rnd.choice(["pause-leader", "kill-member", "kill-z3", "z2-metastore", "z1-blackhole"])
            faults.append(kind)
            if kind == "pause-leader":
                leader = etcd_cluster.leader()
                etcd_cluster.pause(leader)
                time.sleep(rnd.uniform(0.3, 1.0))
                etcd_cluster.resume(leader)
            elif kind == "kill-member":
                m = rnd.choice(etcd_cluster.members)
                etcd_cluster.kill(m)
                time.sleep(rnd.uniform(0.1, 0.5))
                etcd_cluster.restart(m)
            elif kind == "kill-z3":
                z3.kill()
                time.sleep(rnd.uniform(0.0, 0.3))
                z3.start()
            elif kind == "z2-metastore":
                zones.metastores["z2"].stop()
                time.sleep(rnd.uniform(0.2, 1.0))
                zones.start_metastore("z2")
            else:
                direction = rnd.choice(["c2s", "s2c", "both"])
                for r in zones.relays:
                    r.blackhole(direction)  # type: ignore[arg-type]
                time.sleep(rnd.uniform(0.3, 1.5))
                for r in zones.relays:
                    r.heal()

    threads = [
        threading.Thread(target=write, args=(z, writers[z], random.Random(rnd.random())), daemon=True)
        for z in ZONES
    ]
    try:
        for t in threads:
            t.start()
        started = time.monotonic()
        inject_faults(lambda: any(t.is_alive() for t in threads) and time.monotonic() - started < 240)
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads), f"seed {seed}: writers stuck (faults {faults})"
        etcd_cluster.heal()
        for r in zones.relays:
            r.heal()
        log = CommandLog(load_live_config(zones.config).live.etcd)
        try:
            deadline = time.monotonic() + 60
            while True:
                head, _ = log.head()
                at = {z: int(s.get("position", 0)) for z, s in log.zone_states().items()}
                if all(at.get(z, 0) >= head for z in ZONES):
                    break
                assert time.monotonic() < deadline, (
                    f"seed {seed}: zones {at} not at head {head} (faults {faults})"
                )
                time.sleep(0.1)
        finally:
            log.close()
    finally:
        z3.stop()
        for p in proxies.values():
            p.stop()
    context = f"seed {seed}, faults {faults}"
    for w in writers.values():
        assert not w.errors, f"{context}: unexpected errors in {w.zone}: {w.errors[:5]}"
    cfg = load_live_config(zones.config)
    clients = open_zones(cfg)
    try:
        report = check(cfg, clients)
    finally:
        for c in clients.values():
            c.close()
    assert report.consistent, f"{context}: {report.divergences[:5]}"
    dumps = {z: zones.dump(z) for z in ZONES}
    assert dumps["z1"] == dumps["z2"] == dumps["z3"], context
    final = dumps["z1"]
    for w in writers.values():
        for name, ok in w.created.items():
            gone = w.dropped.get(name)
            if ok is True and gone is not True and gone is None and name not in w.dropped:
                assert name in final, f"{context}: acknowledged create of {name} lost"
                assert w.partitions.get(name, set()) <= set(final[name][2]), (
                    f"{context}: partitions of {name} lost"
                )
            if ok is False:
                assert name not in final, f"{context}: refused create of {name} is there"
            if gone is True:
                assert name not in final, f"{context}: acknowledged drop of {name} did not happen"
    for z in ZONES:
        counts = zones.create_events(z)
        unique = {n: k for n, k in counts.items() if not n.startswith("shared_")}
        assert all(k == 1 for k in unique.values()), f"{context}: zone {z} created a table twice: {unique}"
    assert len(faults) >= 3, context
