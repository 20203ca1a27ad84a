"""Run the local metastore as a service: store + handler + Thrift server (+ metrics)."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from types import FrameType
from typing import Any

import sqlalchemy as sa

from hivemesh import __version__
from hivemesh.config import MetastoreConfig
from hivemesh.errors import HivemeshError
from hivemesh.hive.constants import now_ms
from hivemesh.kerberos import KerberosAcceptor, KerberosError
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.housekeeper import Housekeeper
from hivemesh.metastore.metrics import ServiceMetrics
from hivemesh.metastore.store import Store
from hivemesh.storage.sql import SchemaTooNewError
from hivemesh.thrift.http import MetricsHttpServer
from hivemesh.thrift.processor import HMSProcessor
from hivemesh.thrift.server import ThriftServer, tune_gc
from hivemesh.tls import TlsError, server_context

log = logging.getLogger(__name__)


class StartupError(HivemeshError, RuntimeError):
    """The service cannot start: its metadata store could not be opened (unreachable, bad URL, no
    permission, ...) or its metrics port is taken. The message says which."""


class MetastoreService:
    """A hivemesh metastore serving Thrift, in the current process.

    ``start()`` binds and serves from a background thread; ``uri`` is then
    ``thrift://host:port``; ``stop()`` closes the listener and every connection.
    ``start()`` raises StartupError (store unreachable or its schema newer than this hivemesh
    knows, metrics port taken) or OSError (Thrift port in use).
    """

    def __init__(self, cfg: MetastoreConfig, sock: socket.socket | None = None, worker: int | None = None):
        self.cfg = cfg
        self.listening_socket = sock  # shared by the worker processes of `workers`
        self.worker = worker
        self.store: Store | None = None
        self.handler: LocalMetastore | None = None
        self.server: ThriftServer | None = None
        self.housekeeper: Housekeeper | None = None
        self.metrics = ServiceMetrics()
        self.metrics_port: int | None = None
        self.http: MetricsHttpServer | None = None
        self.started_ms: int | None = None
        self._thread: threading.Thread | None = None

    @property
    def own_metrics_port(self) -> int:
        """The metrics port of this process: ``metrics_port``, plus the worker's number for the
        worker processes of ``workers`` (worker 0 on ``metrics_port``, 1 on the next, ...; 0 stays
        0: any free port)."""
        assert self.cfg.metrics_port is not None
        if self.cfg.metrics_port == 0 or not self.worker:
            return self.cfg.metrics_port
        return self.cfg.metrics_port + self.worker

    @property
    def uri(self) -> str:
        """``thrift://host:port`` of the running server."""
        assert self.server is not None, "not started"
        return f"thrift://{self.server.host}:{self.server.port}"

    def start(self) -> MetastoreService:
        """Open the store (creating or upgrading its schema), bind the port and serve in a thread."""
        t0 = time.perf_counter()
        tls = None
        if self.cfg.tls_cert:
            try:
                tls = server_context(self.cfg.tls_cert, self.cfg.tls_key, self.cfg.tls_client_ca)
            except TlsError as e:
                raise StartupError(str(e)) from e
        kerberos = None
        if self.cfg.kerberos_principal and self.cfg.kerberos_keytab:
            try:
                kerberos = KerberosAcceptor(  # _HOST: this machine's name, never the listen address
                    self.cfg.kerberos_principal,
                    self.cfg.kerberos_keytab,
                    proxy_users=self.cfg.kerberos_proxy_users,
                )
            except KerberosError as e:
                raise StartupError(str(e)) from e
        try:
            self.store = Store(self.cfg.db, pool_size=self.cfg.effective_db_pool_size)
        except SchemaTooNewError as e:
            raise StartupError(
                f"the metadata store's schema ({e.url}) is at revision {e.current}, newer than this "
                f"hivemesh {__version__} knows (head {e.head}): upgrade hivemesh"
            ) from e
        except Exception as e:
            raise StartupError(f"cannot open the metadata store {self.cfg.db}: {_first_line(e)}") from e
        self.handler = LocalMetastore(
            self.store,
            self.cfg.warehouse,
            txn_timeout_s=self.cfg.txn_timeout_s,
            allowed_locations=self.cfg.allowed_locations,
        )
        self.housekeeper = Housekeeper(
            self.handler,
            self.cfg.housekeeping_interval_s,
            self.cfg.txn_retention_s,
            self.cfg.event_retention_s,
        ).start()
        processor = HMSProcessor(self.handler, observer=self.metrics.observe)
        self.server = ThriftServer(
            processor,
            host=self.cfg.host,
            port=self.cfg.port,
            framed=self.cfg.framed,
            compact=self.cfg.compact,
            max_message_bytes=self.cfg.max_message_mb * 1024 * 1024,
            tls=tls,
            kerberos=kerberos,
        )
        self.server.listen(self.listening_socket)
        server = self.server
        self.metrics.connections.set_function(lambda: server.active_connections)
        if self.cfg.metrics_port is not None:
            try:
                self.http = MetricsHttpServer(
                    self.metrics.registry, self.health, name="metastore-http", tls=tls
                )
                self.metrics_port = self.http.serve(self.own_metrics_port, self.cfg.host)
            except OSError as e:
                self.server.stop()
                raise StartupError(
                    f"cannot serve metrics on {self.cfg.host}:{self.own_metrics_port}: {e.strerror or e}"
                ) from e
        self.started_ms = now_ms()
        self._thread = threading.Thread(target=self.server.serve_forever, name="hms-accept", daemon=True)
        self._thread.start()
        log.info(
            "metastore on %s%s (store %s, warehouse %s, %d methods) ready in %.2fs",
            self.uri, _security(tls is not None, kerberos), self.store.url.render_as_string(hide_password=True),
            self.handler.warehouse, len(processor.methods), time.perf_counter() - t0,
        )  # fmt: skip
        return self

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``/health``: ``(ok, details)``: serving, and the metadata store answering a query
        (``SELECT 1``, its time in ms); not ok (HTTP 503) when the store does not answer."""
        details: dict[str, Any] = {"service": "metastore", "uri": self.uri if self.server else None}
        if self.worker is not None:
            details["worker"] = self.worker
        if self.started_ms is not None:
            details["uptime_s"] = round((now_ms() - self.started_ms) / 1000, 1)
        if self.server is not None:
            details["connections"] = self.server.active_connections
        if self.store is None:
            return False, {**details, "status": "starting"}
        t0 = time.perf_counter()
        try:
            with self.store.read() as conn:
                conn.execute(sa.text("SELECT 1"))
        except Exception as e:
            return False, {**details, "status": "store unavailable", "store": _first_line(e)}
        details["store_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return True, {**details, "status": "ok", "store": "ok"}

    def stop(self) -> None:
        """Stop serving and release the store's connections."""
        if self.http is not None:
            self.http.stop()
        if self.housekeeper is not None:
            self.housekeeper.stop()
        if self.server is not None:
            self.server.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.store is not None:
            self.store.dispose()

    def __enter__(self) -> MetastoreService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _security(tls: bool, kerberos: KerberosAcceptor | None) -> str:
    """`` (TLS, Kerberos hive/host@R)`` for the ready lines; empty when neither is on."""
    parts = (["TLS"] if tls else []) + ([f"Kerberos {kerberos.principal}"] if kerberos else [])
    return f" ({', '.join(parts)})" if parts else ""


def _first_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None)  # SQLAlchemy wraps the driver's error; its text has no SQL
    text = str(orig if orig is not None else e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run_forever(cfg: MetastoreConfig) -> int:
    """Serve until SIGTERM or SIGINT; print ``hivemesh metastore listening on HOST:PORT`` when ready."""
    svc = MetastoreService(cfg)
    try:
        svc.start()
    except StartupError as e:
        log.error("%s", e)
        return 2
    except OSError as e:
        log.error("cannot listen on %s:%s: %s", cfg.host, cfg.port, e)
        return 2
    tune_gc()
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    def _on_hup(_signum: int, _frame: FrameType | None) -> None:
        # logrotate and `systemctl reload` send SIGHUP; its default action would end the process
        log.warning(
            "received SIGHUP: the metastore reads its settings at start only; nothing reloaded, still serving"
        )

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGHUP, _on_hup)
    assert svc.server is not None
    tls = _security(svc.server.tls is not None, svc.server.kerberos)
    print(f"hivemesh metastore listening on {svc.server.host}:{svc.server.port}{tls}", flush=True)
    if svc.metrics_port is not None:
        scheme = "https" if svc.server.tls is not None else "http"
        print(
            f"hivemesh metastore metrics on {scheme}://{svc.server.host}:{svc.metrics_port}/metrics "
            f"(health: /health)",
            flush=True,
        )
    stop.wait()
    svc.stop()
    log.info("stopped")
    return 0
