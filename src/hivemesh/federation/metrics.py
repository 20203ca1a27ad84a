"""Prometheus metrics, ``/health`` and the audit log of the proxy.

``/metrics``: client calls (``hivemesh_proxy_calls_total``, ``..._errors_total``,
``..._call_seconds`` by method), member calls (``hivemesh_proxy_member_calls_total``,
``..._member_errors_total``, ``..._member_call_seconds`` by member and method), member status
(``hivemesh_proxy_member_up``), open connections, duplicate database names and config reloads.
``/health``: JSON with every member's status; HTTP 200 when the primary is available, else 503.
Audit log (logger ``hivemesh.audit``, INFO): one line per call with user, peer, method, member, ms
and the outcome.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from hivemesh.federation.routing import current
from hivemesh.thrift.server import connection

audit_log = logging.getLogger("hivemesh.audit")
_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ProxyMetrics:
    """The proxy's metrics in their own registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.calls = Counter("hivemesh_proxy_calls", "Client calls served", ["method"], registry=r)
        self.errors = Counter(
            "hivemesh_proxy_errors",
            "Client calls answered with an exception",
            ["method", "error"],
            registry=r,
        )
        self.latency = Histogram(
            "hivemesh_proxy_call_seconds",
            "Client call latency, seconds",
            ["method"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.member_calls = Counter(
            "hivemesh_proxy_member_calls", "Calls sent to members", ["member", "method"], registry=r
        )
        self.member_errors = Counter(
            "hivemesh_proxy_member_errors",
            "Member calls that raised (HMS exception, Unavailable, Timeout)",
            ["member", "method", "error"],
            registry=r,
        )
        self.member_latency = Histogram(
            "hivemesh_proxy_member_call_seconds",
            "Member call latency, seconds",
            ["member", "method"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.member_up = Gauge(
            "hivemesh_proxy_member_up", "1 if the member answers", ["member", "role"], registry=r
        )
        self.connections = Gauge("hivemesh_proxy_connections", "Open client connections", registry=r)
        self.duplicates = Gauge(
            "hivemesh_proxy_duplicate_databases", "Database names found in more than one member", registry=r
        )
        self.reloads = Counter(
            "hivemesh_proxy_config_reloads", "Configuration reloads", ["result"], registry=r
        )
        self.audit = True

    def observe_member(self, member: str, method: str, seconds: float, error: str | None) -> None:
        """Record one member call (the federation's observer)."""
        self.member_calls.labels(member, method).inc()
        self.member_latency.labels(member, method).observe(seconds)
        if error:
            self.member_errors.labels(member, method, error).inc()

    def observe_call(self, method: str, seconds: float, error: str | None) -> None:
        """Record one client call and write its audit line (the processor's observer)."""
        self.calls.labels(method).inc()
        self.latency.labels(method).observe(seconds)
        if error:
            self.errors.labels(method, error).inc()
        member = getattr(current, "member", None)
        current.member = None
        if self.audit:
            state = connection()
            audit_log.info(
                "user=%s peer=%s method=%s member=%s ms=%.2f result=%s",
                state.user or "-", state.peer or "-", method, member or "-", seconds * 1000, error or "ok",
            )  # fmt: skip


class HealthServer:
    """``/metrics`` and ``/health`` over HTTP. ``health()`` returns (ok, JSON-able details)."""

    def __init__(self, metrics: ProxyMetrics, health: Callable[[], tuple[bool, dict[str, Any]]]):
        self.metrics = metrics
        self.health = health
        self.httpd: ThreadingHTTPServer | None = None

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Start serving in a daemon thread; returns the port (0 picks a free one)."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.startswith("/metrics"):
                    body, ctype, code = generate_latest(outer.metrics.registry), CONTENT_TYPE_LATEST, 200
                elif self.path.startswith("/health"):
                    ok, details = outer.health()
                    body = json.dumps(details, indent=2, sort_keys=True).encode()
                    ctype, code = "application/json", 200 if ok else 503
                else:
                    body, ctype, code = b"not found: try /metrics or /health\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server API
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="proxy-http", daemon=True).start()
        return self.httpd.server_address[1]

    def stop(self) -> None:
        """Stop serving HTTP."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
