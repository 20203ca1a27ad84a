"""Live Hive with an Apache Hive 2.3.10 metastore as a zone (the real HMS from the PySpark wheel's
jars, on Derby, without a notification listener: the jars have none) beside a hivemesh zone, each
behind its own live proxy on the session's etcd cluster.

What it proves: the writes Hive 2.3's clients make (databases, tables, partitions over files,
schema changes, drops) through either zone's proxy are agreed and applied by HMS 2.3.10 as by
hivemesh; racing creates of one table from both zones have one winner everywhere, and the loser
gets HMS's own AlreadyExistsException; `live check --data` finds both zones the same, files
included (each partition's files copied to the other zone before its metadata).

HMS 2.3 without a notification log cannot tell the applier whether an interrupted call took
effect: such a command is applied again after a crash (README: exactly once needs the log), so
no kill -9 here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hive_metastore.ttypes import AlreadyExistsException, Database, FieldSchema, Partition

from hivemesh.config import MetastoreConfig
from hivemesh.live.check import check, open_zones
from hivemesh.live.config import load_live_config
from hivemesh.live.service import LiveService
from hivemesh.metastore.service import MetastoreService
from tests.support.etcd import EtcdCluster
from tests.support.javahms import JavaHMS, java_available
from tests.support.live import sd, table, write_mesh_config
from tests.support.servers import ThriftClient

pytestmark = pytest.mark.javahms

DB = "fin_h23"


@pytest.fixture(scope="module")
def zones(etcd_cluster: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """Zone ``hm`` (hivemesh on SQLite, in this process) and ``h23`` (HMS 2.3.10), one rule over
    ``fin_.*`` with each zone's root in this module's tmp dir, and both live proxies."""
    if not java_available():
        pytest.skip("needs Java 17 to run the real Apache HMS 2.3.10 from the PySpark wheel")
    base = tmp_path_factory.mktemp("live-h23")
    hms = JavaHMS(log_level="WARN")
    hms.start(timeout=180)
    (base / "hm").mkdir()
    ms = MetastoreService(
        MetastoreConfig(db=f"sqlite:///{base / 'hm' / 'ms.db'}", warehouse=str(base / "hm" / "wh"), port=0)  # type: ignore[arg-type]
    ).start()
    roots = {"hm": base / "hm" / "live", "h23": base / "h23" / "live"}
    for root in roots.values():
        root.mkdir(parents=True)
    config = write_mesh_config(
        base / "mesh.yaml",
        etcd_cluster,
        {"hm": (ms.uri, str(base / "hm" / "wh")), "h23": (hms.uri, f"file:{hms.warehouse}")},
        "fin",
        ["fin_.*"],
        roots,
        acid_owner="hm",
    )
    proxies: dict[str, LiveService] = {}
    try:
        for name in ("hm", "h23"):
            proxies[name] = LiveService(config, name, port=0, metrics_port=0, wait_s=60.0).start()
        yield SimpleNamespace(config=config, roots=roots, proxies=proxies, hms=hms)
    finally:
        for p in proxies.values():
            p.stop()
        ms.stop()
        hms.stop()


def via_proxy(z: SimpleNamespace, name: str) -> ThriftClient:
    server = z.proxies[name].server
    return ThriftClient("127.0.0.1", server.port, timeout_ms=120_000)


def caught_up(z: SimpleNamespace, timeout_s: float = 60.0) -> None:
    import time

    services = list(z.proxies.values())
    deadline = time.monotonic() + timeout_s
    while True:
        head, _ = services[0].log.head()
        if all(s.applier.position >= head for s in services):
            return
        assert time.monotonic() < deadline, f"zones not at head {head}"
        time.sleep(0.05)


def test_hive23_and_hivemesh_zones_agree_on_every_write_and_file(zones: SimpleNamespace) -> None:
    with via_proxy(zones, "h23") as c:
        c.create_database(Database(name=DB, description="from hive 2.3", parameters={}))
        c.create_table(table(DB, "events"))  # no location: pinned under each zone's rule path
        location = Path(c.get_table(DB, "events").sd.location.removeprefix("file:"))
        assert location == zones.roots["h23"] / f"{DB}.db" / "events"
        parts = []
        for ds in ("2026-11-01", "2026-11-02"):
            (location / f"ds={ds}").mkdir(parents=True)
            (location / f"ds={ds}" / "part-0.orc").write_bytes(f"rows of {ds}".encode() * 100)
            parts.append(
                Partition(
                    values=[ds],
                    dbName=DB,
                    tableName="events",
                    sd=sd(f"file:{location}/ds={ds}"),
                    parameters={},
                )
            )
        assert c.add_partitions(parts) == 2
    with via_proxy(zones, "hm") as c:
        c.create_table(table(DB, "orders", partitioned=False))
        t = c.get_table(DB, "events")
        t.sd.cols.append(FieldSchema("amount", "decimal(10,2)", None))
        c.alter_table(DB, "events", t)
        assert c.drop_partition(DB, "events", ["2026-11-01"], False) is True

    outcomes: dict[str, Any] = {}

    def create(zone: str) -> None:
        try:
            with via_proxy(zones, zone) as c:
                c.create_table(table(DB, "contested"))
            outcomes[zone] = "created"
        except AlreadyExistsException as e:
            outcomes[zone] = e
        except Exception as e:  # noqa: BLE001 - asserted below
            outcomes[zone] = e

    threads = [threading.Thread(target=create, args=(z,)) for z in ("hm", "h23")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(type(v).__name__ if not isinstance(v, str) else v for v in outcomes.values()) == [
        "AlreadyExistsException",
        "created",
    ], outcomes

    caught_up(zones)
    cfg = load_live_config(zones.config)
    clients = open_zones(cfg)
    try:
        report = check(cfg, clients, data=True, checksums=True)
    finally:
        for cl in clients.values():
            cl.close()
    assert report.consistent, report.divergences[:5]
    with ThriftClient(zones.hms.host, zones.hms.port) as c:
        assert sorted(c.get_all_tables(DB)) == ["contested", "events", "orders"]
        assert c.get_partition_names(DB, "events", -1) == ["ds=2026-11-02"]
        assert [f.name for f in c.get_table(DB, "events").sd.cols][-1] == "amount"
    copied = zones.roots["hm"] / f"{DB}.db" / "events" / "ds=2026-11-02" / "part-0.orc"
    assert copied.read_bytes() == b"rows of 2026-11-02" * 100
