"""Prometheus metrics of the replicator (served on ``--metrics-port`` at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

__all__ = ["ReplicationMetrics"]


class ReplicationMetrics:
    """Per policy: events applied and skipped, lag in events and seconds, files and bytes copied,
    errors, re-syncs, the phase and the time of the last success; in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events_applied = Counter(
            "hivemesh_replication_events_applied",
            "Source events applied to the target",
            ["policy"],
            registry=r,
        )
        self.events_skipped = Counter(
            "hivemesh_replication_events_skipped",
            "Source events out of the policy's scope",
            ["policy"],
            registry=r,
        )
        self.lag_events = Gauge(
            "hivemesh_replication_lag_events", "Source events not yet applied", ["policy"], registry=r
        )
        self.lag_seconds = Gauge(
            "hivemesh_replication_lag_seconds",
            "Age of the oldest source event not yet applied, seconds",
            ["policy"],
            registry=r,
        )
        self.files_copied = Counter(
            "hivemesh_replication_files_copied", "Data files copied to the target", ["policy"], registry=r
        )
        self.bytes_copied = Counter(
            "hivemesh_replication_bytes_copied", "Bytes of data copied to the target", ["policy"], registry=r
        )
        self.errors = Counter(
            "hivemesh_replication_errors", "Failed steps, by error class", ["policy", "error"], registry=r
        )
        self.resyncs = Counter(
            "hivemesh_replication_resyncs",
            "Re-syncs by comparison (event log purged past the checkpoint, or requested)",
            ["policy"],
            registry=r,
        )
        self.last_success = Gauge(
            "hivemesh_replication_last_success_timestamp_seconds",
            "When a step last succeeded, Unix time",
            ["policy"],
            registry=r,
        )
        self.source_event_id = Gauge(
            "hivemesh_replication_source_event_id",
            "The source's current notification event id",
            ["policy"],
            registry=r,
        )
        self.applied_event_id = Gauge(
            "hivemesh_replication_applied_event_id",
            "The last source event id applied (the checkpoint)",
            ["policy"],
            registry=r,
        )

    # fmt: skip

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` over HTTP on ``port`` (0 = any free port); returns the port. Raises OSError
        when the port is taken or ``host`` cannot be bound."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server.server_address[1]
