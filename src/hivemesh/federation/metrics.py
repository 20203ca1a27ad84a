"""Prometheus metrics, ``/health`` and the audit log of the proxy.

``/metrics``: client calls (``hivemesh_proxy_calls_total``, ``..._errors_total``,
``..._call_seconds`` by method), member calls (``hivemesh_proxy_member_calls_total``,
``..._member_errors_total``, ``..._member_call_seconds`` by member and method), member status
(``hivemesh_proxy_member_up``), open connections, duplicate database names and config reloads.
``/health``: JSON with every member's status; HTTP 200 when the primary is available, else 503.
Audit log (logger ``hivemesh.audit``, INFO): one line per call with user, peer, method, member, ms
and the outcome (also as fields of the record, for ``log_format: json``).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from hivemesh.federation.routing import current
from hivemesh.thrift.http import MetricsHttpServer
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
            user, peer, member, ms, result = (
                state.user or "-", state.peer or "-", member or "-", round(seconds * 1000, 2), error or "ok"
            )  # fmt: skip
            audit_log.info(
                "user=%s peer=%s method=%s member=%s ms=%.2f result=%s",
                user, peer, method, member, ms, result,
                extra={"user": user, "peer": peer, "method": method, "member": member, "ms": ms, "result": result},
            )  # fmt: skip


class HealthServer(MetricsHttpServer):
    """``/metrics`` and ``/health`` of the proxy over HTTP. ``health()`` returns (ok, JSON-able details)."""

    def __init__(
        self,
        metrics: ProxyMetrics,
        health: Callable[[], tuple[bool, dict[str, Any]]],
        tls: ssl.SSLContext | None = None,
    ):
        super().__init__(metrics.registry, health, name="proxy-http", tls=tls)
        self.metrics = metrics
