"""``hivemesh proxy``: the federation served over Thrift, with health polling, metrics, remotes and
configuration reload (SIGHUP or a change of the file) without dropping client connections."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from hivemesh.config import ConfigError
from hivemesh.errors import HivemeshError
from hivemesh.federation.config import FederationConfig, load_federation_config
from hivemesh.federation.factory import build_member
from hivemesh.federation.handler import Federation
from hivemesh.federation.health import HealthPoller
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.metrics import HealthServer, ProxyMetrics
from hivemesh.federation.remotes.registry import LinkRegistry
from hivemesh.federation.remotes.store import RemoteStore
from hivemesh.federation.routing import Registry
from hivemesh.kerberos import KerberosAcceptor, KerberosError
from hivemesh.thrift.processor import HMSProcessor
from hivemesh.thrift.server import ThriftServer, tune_gc
from hivemesh.tls import TlsError, server_context

log = logging.getLogger(__name__)

RETIRE_AFTER_S = 60.0  # members replaced by a reload are closed this long after (in-flight calls end)


class ProxyStartupError(HivemeshError, RuntimeError):
    """The proxy cannot start (config, store, port); the message says which."""


class ProxyService:
    """The proxy in this process. ``config_path``: mesh.yaml; ``overrides``: ``proxy`` settings
    from the command line. ``start()`` serves from background threads; ``uri`` is then
    ``thrift://host:port``; ``reload()`` re-reads the file; ``stop()`` ends everything."""

    def __init__(self, config_path: str | os.PathLike[str], **overrides: Any):
        self.config_path = Path(config_path)
        self.overrides = overrides
        self.cfg: FederationConfig = load_federation_config(self.config_path, **overrides)
        self.metrics = ProxyMetrics()
        self.metrics.audit = self.cfg.proxy.audit_log is not False
        self.indexes = MemberIndexes()  # member numbers in lock ids, for the life of the service
        self.fed: Federation | None = None
        self.links: LinkRegistry | None = None
        self.server: ThriftServer | None = None
        self.poller: HealthPoller | None = None
        self.http: HealthServer | None = None
        self.metrics_port: int | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._reload_lock = threading.Lock()
        self._mtime = self._file_mtime()

    @property
    def uri(self) -> str:
        """``thrift://host:port`` of the running proxy."""
        assert self.server is not None, "not started"
        return f"thrift://{self.server.host}:{self.server.port}"

    # ------------------------------------------------------------------ members
    def _build_registry(self, cfg: FederationConfig, old: Registry | None) -> tuple[Registry, list[Member]]:
        """Members for ``cfg``; members whose configuration did not change are kept (with their
        health and connections). Returns the registry and the old members no longer used."""
        reuse = {m.name: m for m in (old.members if old else [])}
        kept: set[str] = set()

        def member(mcfg: Any, role: str) -> Member:
            prev = reuse.get(mcfg.name)
            if (
                prev is not None
                and prev.role == role
                and prev.config == mcfg
                and old is not None
                and (old.settings.database_resolution is cfg.proxy.database_resolution)
            ):
                kept.add(mcfg.name)
                return prev
            return build_member(mcfg, role, cfg.proxy, self.indexes)

        primary = member(cfg.primary, "primary")
        federated = [member(m, "federated") for m in cfg.federated]
        registry = Registry(cfg.proxy, primary, federated)
        retired = [m for name, m in reuse.items() if name not in kept]
        return registry, retired

    # ------------------------------------------------------------------ life cycle
    def start(self) -> ProxyService:
        """Open the store, build the members, poll them once, bind and serve.
        Raises ProxyStartupError."""
        t0 = time.perf_counter()
        s = self.cfg.proxy
        # Thrift logs every refused connection with a traceback; the proxy reports members itself
        logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
        try:
            registry, _ = self._build_registry(self.cfg, None)
        except Exception as e:
            raise ProxyStartupError(f"cannot set up the members: {e}") from e
        try:
            self.links = LinkRegistry(RemoteStore(s.store), self.indexes, s.remote_refresh_ms / 1000).start()
        except Exception as e:
            raise ProxyStartupError(f"cannot open the proxy store {s.store}: {e}") from e
        self.fed = Federation(registry, self.links, self.indexes, observe=self.metrics.observe_member)
        self.poller = HealthPoller(self.fed, s.status_polling_delay_ms / 1000, on_round=self._update_gauges)
        self.poller.poll_once()
        self.poller.start()
        tls = None
        if s.tls_cert:
            try:
                tls = server_context(s.tls_cert, s.tls_key, s.tls_client_ca)
            except TlsError as e:
                raise ProxyStartupError(str(e)) from e
        kerberos = None
        if s.kerberos_principal and s.kerberos_keytab:
            try:
                kerberos = KerberosAcceptor(
                    s.kerberos_principal, s.kerberos_keytab
                )  # _HOST: this machine's name
            except KerberosError as e:
                raise ProxyStartupError(str(e)) from e
        processor = HMSProcessor(self.fed, observer=self.metrics.observe_call)
        self.server = ThriftServer(
            processor,
            host=s.host,
            port=s.port,
            framed=s.framed,
            compact=s.compact,
            max_message_bytes=s.max_message_mb * 1024 * 1024,
            tls=tls,
            kerberos=kerberos,
        )
        try:
            self.server.listen()
        except OSError as e:
            raise ProxyStartupError(f"cannot listen on {s.host}:{s.port}: {e.strerror or e}") from e
        server = self.server
        self.metrics.connections.set_function(lambda: server.active_connections)
        if s.metrics_port is not None:
            self.http = HealthServer(self.metrics, self.health, tls=tls)
            try:
                self.metrics_port = self.http.serve(s.metrics_port, s.host)
            except OSError as e:
                self.server.stop()
                raise ProxyStartupError(
                    f"cannot serve metrics on {s.host}:{s.metrics_port}: {e.strerror or e}"
                ) from e
        t = threading.Thread(target=self.server.serve_forever, name="proxy-accept", daemon=True)
        t.start()
        self._threads.append(t)
        if s.reload_on_change:
            w = threading.Thread(target=self._watch, name="config-watch", daemon=True)
            w.start()
            self._threads.append(w)
        log.info(
            "proxy on %s: %s, %d federated (%s), %d remotes; ready in %.2fs",
            self.uri, registry.primary.describe(), len(registry.federated),
            s.database_resolution.value, len(self.links.specs()), time.perf_counter() - t0,
        )  # fmt: skip
        return self

    def stop(self) -> None:
        """Stop serving and close members, remotes and the store."""
        self._stop.set()
        if self.server is not None:
            self.server.stop()
        if self.poller is not None:
            self.poller.stop()
        if self.http is not None:
            self.http.stop()
        if self.fed is not None:
            for m in self.fed.registry.members:
                m.close()
            self.fed.close()
        if self.links is not None:
            self.links.close()

    def __enter__(self) -> ProxyService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ health
    def _update_gauges(self) -> None:
        assert self.fed is not None
        for m in self.fed.registry.members:
            self.metrics.member_up.labels(m.name, m.role).set(1 if m.available else 0)
        self.metrics.duplicates.set(len(self.fed.registry.duplicates))

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(primary available, details of every member, remotes and duplicate names)."""
        assert self.fed is not None
        reg = self.fed.registry

        def info(m: Member) -> dict[str, Any]:
            return {
                "role": m.role,
                "endpoint": m.connector.describe(),
                "status": "AVAILABLE" if m.available else "UNAVAILABLE",
                "error": m.last_error,
                "since": int(m.changed_at),
                "prefix": m.names.prefix or None,
                "access_control": m.access.mode.value,
            }

        details = {
            "status": "UP" if reg.primary.available else "DOWN",
            "database_resolution": reg.resolution.value,
            "members": {m.name: info(m) for m in reg.members},
            "duplicate_databases": reg.duplicates,
            "remotes": {
                m.remote_spec.local_name: info(m)
                for m in (self.links.members(tables=True) if self.links else [])
            },
        }
        return reg.primary.available, details

    # ------------------------------------------------------------------ reload
    def _file_mtime(self) -> float | None:
        try:
            return self.config_path.stat().st_mtime_ns
        except OSError:
            return None

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            mtime = self._file_mtime()
            if mtime is not None and mtime != self._mtime:
                self._mtime = mtime
                self.reload("file change")

    def reload(self, reason: str = "request") -> bool:
        """Re-read the configuration and swap the members in; unchanged members keep their
        connections, client connections stay open. An invalid file is logged and the running
        configuration kept. Returns True when the new configuration is in use."""
        assert self.fed is not None
        with self._reload_lock:
            try:
                cfg = load_federation_config(self.config_path, **self.overrides)
            except ConfigError as e:
                log.error("configuration not reloaded (%s): %s", reason, e)
                self.metrics.reloads.labels("invalid").inc()
                return False
            old = self.fed.registry
            for key in ("host", "port", "metrics_port", "store", "framed", "compact", "log_format"):
                if getattr(cfg.proxy, key) != getattr(old.settings, key):
                    log.warning("proxy.%s changed: it takes effect after a restart", key)
            sinks = (cfg.proxy.audit_log, old.settings.audit_log)
            if sinks[0] != sinks[1] and any(isinstance(s, str) for s in sinks):
                log.warning("proxy.audit_log's file changed: it takes effect after a restart")
            try:
                registry, retired = self._build_registry(cfg, old)
            except Exception as e:
                log.error("configuration not reloaded (%s): %s", reason, e)
                self.metrics.reloads.labels("failed").inc()
                return False
            registry.duplicates = old.duplicates
            for m in registry.members:  # new members start available; the poller corrects that
                if m not in old.members:
                    log.info("reload: %s added or changed", m.describe())
            self.fed.registry = registry
            self.cfg = cfg
            self.metrics.audit = cfg.proxy.audit_log is not False
            if self.poller is not None:
                self.poller.interval_s = cfg.proxy.status_polling_delay_ms / 1000
            for m in retired:
                log.info("reload: %s retired", m.describe())
                threading.Timer(RETIRE_AFTER_S, m.close).start()
            self.metrics.reloads.labels("ok").inc()
            log.info("configuration reloaded (%s): %d federated members", reason, len(registry.federated))
            return True


def run_forever(config_path: str, **overrides: Any) -> int:
    """Serve until SIGTERM/SIGINT; SIGHUP reloads. Prints ``hivemesh proxy listening on HOST:PORT``."""
    try:
        svc = ProxyService(config_path, **overrides)
        svc.start()
    except (ConfigError, ProxyStartupError) as e:
        log.error("%s", e)
        return 2
    tune_gc()
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    def _on_hup(_signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=svc.reload, args=("SIGHUP",), daemon=True).start()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_hup)
    assert svc.server is not None
    tls = svc.server.tls is not None
    print(
        f"hivemesh proxy listening on {svc.server.host}:{svc.server.port}{' (TLS)' if tls else ''}",
        flush=True,
    )
    if svc.metrics_port is not None:
        scheme = "https" if tls else "http"
        print(
            f"hivemesh proxy metrics on {scheme}://{svc.server.host}:{svc.metrics_port}/metrics", flush=True
        )
    stop.wait()
    svc.stop()
    log.info("stopped")
    return 0
