"""``hivemesh live serve``: one zone's live proxy and applier in this process.

:class:`LiveService` opens the command log (etcd), starts the zone's applier
(:class:`hivemesh.live.applier.Applier`) from its stored position, and serves the HMS Thrift
interface with a :class:`hivemesh.live.proxy.LiveCatalog` over the zone's metastore. With a
metrics port it serves ``/metrics`` (the proxy's call metrics, plus
``hivemesh_live_proposals_total{method,outcome}``, ``hivemesh_live_applied_total{outcome}``,
``hivemesh_live_apply_seconds``, ``hivemesh_live_position``, ``hivemesh_live_apply_lag_seconds``)
and ``/health`` (HTTP 200 while the zone's metastore answers and the applier is within
``max_apply_lag_s``; JSON with the position, lag and last error).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from hivemesh.client.metastore import MetastoreClient
from hivemesh.config import ConfigError
from hivemesh.errors import HivemeshError
from hivemesh.federation.config import AccessControl, DatabaseResolution, MemberConfig, ProxySettings
from hivemesh.federation.factory import build_member
from hivemesh.federation.health import HealthPoller
from hivemesh.federation.members import MemberIndexes
from hivemesh.federation.metrics import HealthServer, ProxyMetrics
from hivemesh.federation.routing import Registry
from hivemesh.live.applier import Applier, Outcome
from hivemesh.live.compaction import Compactor
from hivemesh.live.config import LiveFile, load_live_config
from hivemesh.live.data import DataCopier
from hivemesh.live.log import CommandLog
from hivemesh.live.out_of_band import ApplyWindows, OutOfBandWatcher
from hivemesh.live.proxy import LiveCatalog
from hivemesh.live.resync import resync
from hivemesh.live.state import StateFile
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.state import ReplicationStore
from hivemesh.thrift.processor import HMSProcessor
from hivemesh.thrift.server import ThriftServer

__all__ = ["LiveMetrics", "LiveService", "LiveStartupError", "run_forever"]

log = logging.getLogger(__name__)


class LiveStartupError(HivemeshError, RuntimeError):
    """The live proxy cannot start: unknown zone, etcd unreachable, port taken. The message says which."""


class LiveMetrics(ProxyMetrics):
    """The proxy's metrics plus the live ones (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.proposals = Counter(
            "hivemesh_live_proposals", "Writes proposed to the command log", ["method", "outcome"], registry=r
        )
        self.applied = Counter(
            "hivemesh_live_applied", "Commands applied in this zone", ["outcome"], registry=r
        )
        self.apply_seconds = Histogram(
            "hivemesh_live_apply_seconds", "Time to apply one command in this zone, seconds", registry=r
        )
        self.position = Gauge("hivemesh_live_position", "Last log position applied in this zone", registry=r)
        self.lag = Gauge(
            "hivemesh_live_apply_lag_seconds",
            "Age of the oldest command not yet applied here, seconds",
            registry=r,
        )

    def observe_proposal(self, method: str, outcome: str) -> None:
        """Count one proposal (the catalog's observer)."""
        self.proposals.labels(method, outcome).inc()

    def observe_apply(self, outcome: Outcome, seconds: float) -> None:
        """Count one applied command (the applier's observer)."""
        self.applied.labels("ok" if outcome.error is None else type(outcome.error).__name__).inc()
        self.apply_seconds.observe(seconds)
        self.position.set(outcome.position)


def zone_member_config(cfg: LiveFile, zone: str, *, exposes: bool = True) -> MemberConfig:
    """The federation member of ``zone``'s metastore (its URIs, TLS and Kerberos settings), open
    to every read and write; ``exposes=False``: mapping no database (an ``acid_owner`` zone,
    reached for txn calls only)."""
    z = cfg.zones[zone]
    uris = [u.strip() for u in z.metastore.split(",") if u.strip()]
    tls = {k: getattr(z, k) for k in ("tls", "tls_ca", "tls_cert", "tls_key", "tls_verify_hostname")}
    return MemberConfig(
        name=zone,
        uris=uris,
        access_control=AccessControl.READ_AND_WRITE_AND_CREATE,  # clients may write
        mapped_databases=None if exposes else [],
        kerberos_principal=z.kerberos_principal,
        **tls,
    )


class LiveService:
    """Zone ``zone``'s live proxy (see the module doc). ``config_path``: mesh.yaml with ``zones:``
    and ``live:``; ``host``/``port``/``metrics_port``: where to listen (``port`` 0: any free one).
    ``start()`` serves from background threads; ``uri`` is then ``thrift://host:port``."""

    def __init__(
        self,
        config_path: str | os.PathLike[str],
        zone: str,
        *,
        host: str = "127.0.0.1",
        port: int = 9083,
        metrics_port: int | None = None,
        wait_s: float | None = None,
    ) -> None:
        self.config_path = Path(config_path)
        self.cfg = load_live_config(self.config_path)
        if zone not in self.cfg.zones:
            raise ConfigError(
                f"{config_path}: unknown zone {zone!r} (zones: {', '.join(sorted(self.cfg.zones)) or 'none'})"
            )
        self.zone = zone
        # MANUAL: a database is the primary's unless a federated member maps it, and the acid_owner
        # members map none, so every read stays in this zone
        self.settings = ProxySettings(
            host=host, port=port, metrics_port=metrics_port, database_resolution=DatabaseResolution.MANUAL
        )
        self.wait_s = wait_s if wait_s is not None else self.cfg.live.max_apply_lag_s
        self.metrics = LiveMetrics()
        self.log: CommandLog | None = None
        self.store: ReplicationStore | None = None
        self.copier: DataCopier | None = None
        self.compactor: Compactor | None = None
        self.watcher: OutOfBandWatcher | None = None
        self.applier: Applier | None = None
        self.catalog: LiveCatalog | None = None
        self.server: ThriftServer | None = None
        self.poller: HealthPoller | None = None
        self.http: HealthServer | None = None
        self.metrics_port: int | None = None

    @property
    def uri(self) -> str:
        """``thrift://host:port`` of the running proxy."""
        assert self.server is not None, "not started"
        return f"thrift://{self.server.host}:{self.server.port}"

    def start(self) -> LiveService:
        """Open the log, start the applier, bind and serve. Raises LiveStartupError."""
        t0 = time.perf_counter()
        logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
        live, zcfg = self.cfg.live, self.cfg.zones[self.zone]
        self.log = CommandLog(live.etcd)
        client = self._zone_client()
        try:
            self.store = ReplicationStore(live.store)
        except Exception as e:
            self.log.close()
            raise LiveStartupError(f"live.store {live.store}: cannot open it: {e}") from e
        self.copier = DataCopier(self.cfg, self.zone, self.store, live.copy_threads)
        log_, copier, cfg = self.log, self.copier, self.cfg
        windows = ApplyWindows()
        watcher_client = self._zone_client()
        self.watcher = OutOfBandWatcher(
            self.zone, live, watcher_client, windows, idle=lambda fn: applier.when_idle(fn)
        )
        applier = Applier(
            self.log,
            {r.name: r for r in live.rules},
            self.zone,
            client,
            on_apply=self.metrics.observe_apply,
            copier=self.copier,
            resyncer=lambda: resync(cfg, log_, self.zone, client, copier),
            state_file=StateFile(Path(live.state_dir) / f"live-{self.zone}.json"),
            windows=windows,
            state_extras=self.watcher.state,
            event_client=self._zone_client(),
        )
        self.watcher.on_found = applier.state_changed
        try:
            self.applier = applier.start(timeout_s=live.etcd.timeout_s * 2)
        except HivemeshError as e:
            self.log.close()
            raise LiveStartupError(f"zone {self.zone}: {e}") from e
        indexes = MemberIndexes()
        member = build_member(zone_member_config(self.cfg, self.zone), "primary", self.settings, indexes)
        owners = sorted({r.acid_owner for r in live.rules} - {self.zone})
        federated = [
            build_member(zone_member_config(self.cfg, z, exposes=False), "federated", self.settings, indexes)
            for z in owners
        ]
        self.catalog = LiveCatalog(
            Registry(self.settings, member, federated),
            indexes,
            live=live,
            zone=self.zone,
            log=self.log,
            applier=self.applier,
            wait_s=self.wait_s,
            observe=self.metrics.observe_member,
            observe_proposal=self.metrics.observe_proposal,
            storage=ZoneStorage(self.cfg.zones[self.zone].s3),
        )
        self.poller = HealthPoller(self.catalog, self.settings.status_polling_delay_ms / 1000)
        self.poller.poll_once()
        self.poller.start()
        self.server = ThriftServer(
            HMSProcessor(self.catalog, observer=self.metrics.observe_call),
            host=self.settings.host,
            port=self.settings.port,
        )
        try:
            self.server.listen()
        except OSError as e:
            self.stop()
            raise LiveStartupError(
                f"cannot listen on {self.settings.host}:{self.settings.port}: {e.strerror or e}"
            ) from e
        server = self.server
        self.watcher.start()
        if live.compact_interval_s > 0:
            self.compactor = Compactor(self.log, self.cfg.zones, live.compact_interval_s).start()
        self.metrics.connections.set_function(lambda: server.active_connections)
        self.metrics.lag.set_function(applier.lag_s)
        if self.settings.metrics_port is not None:
            self.http = HealthServer(self.metrics, self.health)
            try:
                self.metrics_port = self.http.serve(self.settings.metrics_port, self.settings.host)
            except OSError as e:
                self.stop()
                raise LiveStartupError(
                    f"cannot serve metrics on port {self.settings.metrics_port}: {e.strerror or e}"
                ) from e
        threading.Thread(target=server.serve_forever, name="live-accept", daemon=True).start()
        log.info(
            "live proxy of zone %s on %s: metastore %s, %s, %d rule(s), from log position %d; ready in %.2fs",
            self.zone, self.uri, zcfg.metastore, live.etcd.describe(), len(live.rules), applier.position,
            time.perf_counter() - t0,
        )  # fmt: skip
        return self

    def _zone_client(self) -> MetastoreClient:
        """A client of this zone's metastore that connects on first use; no retries of its own
        (the applier and the watcher retry a whole step)."""
        z = self.cfg.zones[self.zone]
        return MetastoreClient(
            z.metastore,
            timeout_s=60.0,
            retries=0,
            connect=False,
            tls=z.tls_context(),
            kerberos=z.kerberos_initiator(),
        )

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, details): the zone's metastore answers and the applier is within the lag bound."""
        assert self.catalog is not None and self.applier is not None
        member = self.catalog.registry.primary
        lag = self.applier.lag_s()
        ok = member.available and lag <= self.cfg.live.max_apply_lag_s and self.applier.needs_resync is None
        return ok, {
            "zone": self.zone,
            "metastore": {"available": member.available, "error": member.last_error},
            "position": self.applier.position,
            "lag_s": round(lag, 3),
            "last_error": self.applier.last_error,
            "needs_resync": self.applier.needs_resync is not None,
            "copying": self.copier.copying if self.copier is not None else None,
            **(self.watcher.state() if self.watcher is not None else {}),
        }

    def stop(self) -> None:
        """Stop serving and applying; close connections."""
        for part in (self.server, self.http, self.poller, self.compactor, self.watcher, self.applier):
            if part is not None:
                part.stop()
        if self.catalog is not None:
            self.catalog.close()
            for m in self.catalog.registry.members:
                m.close()
        if self.copier is not None:
            self.copier.close()
        if self.store is not None:
            self.store.dispose()
        if self.log is not None:
            self.log.close()

    def __enter__(self) -> LiveService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_forever(config_path: str, zone: str, **options: Any) -> int:
    """Serve zone ``zone`` until SIGTERM or SIGINT; returns the exit code (0 after a signal,
    1 when it cannot start, with the reason logged)."""
    try:
        svc = LiveService(config_path, zone, **options).start()
    except (LiveStartupError, ConfigError) as e:
        log.error("%s", e)
        return 1
    done = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping the live proxy of zone %s", signum, zone)
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    done.wait()
    svc.stop()
    return 0
