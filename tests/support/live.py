"""Two Live Hive zones on one machine for tests: each a hivemesh metastore (SQLite) that a live
proxy (:class:`hivemesh.live.service.LiveService`) may front, the command log on the session's
etcd cluster under a prefix of its own, and one rule ``sales`` (databases ``sales`` and ``fin_.*``;
in ``fin_q`` only the tables ``live_.*``) whose path in each zone is ``<zone root>/live``.

:func:`live_mesh` builds it (a context manager for module-scoped fixtures); :func:`table` and
:func:`sd` make the test tables.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

from hivemesh.config import MetastoreConfig
from hivemesh.live.service import LiveService
from hivemesh.metastore.service import MetastoreService
from tests.support.etcd import EtcdCluster
from tests.support.servers import ThriftClient

ZONES = ("east", "west")


@dataclass
class Zone:
    name: str
    root: Path
    metastore: MetastoreService
    proxy: LiveService | None = None

    @property
    def live_path(self) -> str:
        return str(self.root / "live")

    def direct(self) -> ThriftClient:
        """A client of the zone's own metastore, bypassing its proxy (out-of-band writes)."""
        assert self.metastore.server is not None
        return ThriftClient("127.0.0.1", self.metastore.server.port)

    def via_proxy(self) -> ThriftClient:
        assert self.proxy is not None and self.proxy.server is not None
        return ThriftClient("127.0.0.1", self.proxy.server.port)


def start_metastore(root: Path, port: int = 0) -> MetastoreService:
    """A hivemesh metastore on SQLite under ``root`` (``ms.db``, warehouse ``wh``), on ``port``
    (0: a free one; the same port again for a restart)."""
    cfg = MetastoreConfig(db=f"sqlite:///{root / 'ms.db'}", warehouse=str(root / "wh"), port=port)  # type: ignore[arg-type]
    return MetastoreService(cfg).start()


@dataclass
class Mesh:
    config: Path
    zones: dict[str, Zone]

    def start_proxy(self, name: str) -> LiveService:
        z = self.zones[name]
        z.proxy = LiveService(self.config, name, port=0, metrics_port=0, wait_s=20.0).start()
        return z.proxy

    def stop_proxy(self, name: str) -> None:
        z = self.zones[name]
        if z.proxy is not None:
            z.proxy.stop()
            z.proxy = None

    def wait_caught_up(self, timeout_s: float = 20.0) -> None:
        """Every running applier at the log's head, and its position stored."""
        deadline = time.monotonic() + timeout_s
        while True:
            proxies = [z.proxy for z in self.zones.values() if z.proxy is not None]
            assert proxies and proxies[0].log is not None
            head, _ = proxies[0].log.head()
            stored = proxies[0].log.zone_states()
            running = [p.zone for p in proxies]
            if all(p.applier is not None and p.applier.position >= head for p in proxies) and all(
                int(stored.get(z, {}).get("position", 0)) >= head for z in running
            ):
                return
            assert time.monotonic() < deadline, (
                f"appliers not at head {head}: {[p.applier.position for p in proxies if p.applier]}"
            )
            time.sleep(0.05)


def write_mesh_config(
    path: Path,
    cluster: EtcdCluster,
    zones: dict[str, tuple[str, str]],
    rule: str,
    databases: list[str],
    roots: dict[str, Path],
    acid_owner: str,
) -> Path:
    """mesh.yaml at ``path``: ``zones`` (name -> (metastore URI, warehouse)), the live section on
    ``cluster`` under a prefix of its own, one rule ``rule`` over ``databases`` with each zone's
    root in ``roots``, ``max_apply_lag_s`` 60 and the store beside the file."""
    path.write_text(
        yaml.safe_dump(
            {
                "zones": {z: {"metastore": uri, "warehouse": wh} for z, (uri, wh) in zones.items()},
                "live": {
                    "etcd": {
                        "endpoints": cluster.endpoints,
                        "prefix": f"/hivemesh-test/{rule}-{uuid.uuid4().hex[:8]}",
                    },
                    "rules": [
                        {
                            "name": rule,
                            "databases": databases,
                            "paths": {z: str(p) for z, p in roots.items()},
                            "acid_owner": acid_owner,
                        }
                    ],
                    "max_apply_lag_s": 60,
                    "store": f"sqlite:///{path.parent / 'live.db'}",
                },
            }
        )
    )
    return path


@contextmanager
def live_mesh(etcd_cluster: EtcdCluster, base: Path) -> Iterator[Mesh]:
    """Both zones under ``base``, their proxies started; everything stopped on exit."""
    zones: dict[str, Zone] = {}
    for name in ZONES:
        root = base / name
        root.mkdir()
        zones[name] = Zone(name, root, start_metastore(root))
    config = base / "mesh.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "zones": {
                    z.name: {"metastore": z.metastore.uri, "warehouse": str(z.root / "wh")}
                    for z in zones.values()
                },
                "live": {
                    "etcd": {
                        "endpoints": etcd_cluster.endpoints,
                        "prefix": f"/hivemesh-test/live-{uuid.uuid4().hex[:8]}",
                    },
                    "rules": [
                        {
                            "name": "sales",
                            "databases": ["sales", "fin_.*"],
                            "tables": {"fin_q": ["live_.*"]},
                            "paths": {z.name: z.live_path for z in zones.values()},
                            "acid_owner": "east",
                        }
                    ],
                    "max_apply_lag_s": 10,
                },
            }
        )
    )
    m = Mesh(config, zones)
    try:
        for name in ZONES:
            m.start_proxy(name)
        yield m
    finally:
        for name in ZONES:
            m.stop_proxy(name)
        for z in zones.values():
            z.metastore.stop()


def sd(location: str | None = None) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "bigint", None), FieldSchema("name", "string", None)],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.ql.io.orc.OrcSerde", {"serialization.format": "1"}),
    )


def table(db: str, name: str, location: str | None = None, partitioned: bool = True) -> Table:
    return Table(
        tableName=name,
        dbName=db,
        owner="alice",
        sd=sd(location),
        partitionKeys=[FieldSchema("ds", "string", None)] if partitioned else [],
        tableType="EXTERNAL_TABLE",
        parameters={"EXTERNAL": "TRUE"},
    )
