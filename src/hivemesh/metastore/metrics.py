"""Prometheus metrics of the metastore service (served on ``--metrics-port`` at ``/metrics``, with
``/health`` beside them: see :class:`hivemesh.thrift.http.MetricsHttpServer`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ServiceMetrics:
    """Calls, errors and latency per Thrift method, and open connections, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "hivemesh_thrift_calls", "Thrift calls served", ["method"], registry=self.registry
        )
        self.errors = Counter(
            "hivemesh_thrift_errors", "Thrift calls answered with an HMS exception, or ended by a transport/protocol error or unknown method",
            ["method", "error"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "hivemesh_thrift_call_seconds", "Thrift call latency, seconds", ["method"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )  # fmt: skip
        self.connections = Gauge(
            "hivemesh_thrift_connections", "Open client connections", registry=self.registry
        )

    def observe(self, method: str, seconds: float, error: str | None) -> None:
        """Record one call (the :class:`~hivemesh.thrift.processor.HMSProcessor` observer)."""
        self.calls.labels(method).inc()
        self.latency.labels(method).observe(seconds)
        if error:
            self.errors.labels(method, error).inc()
