"""Live Hive: every zone writable, each write agreed through etcd and applied in one order.

This package holds the first piece, the ordered command log (:mod:`hivemesh.live.log`): proposers
append commands to it idempotently, keyed by request id; every zone's applier follows it from its
own position. The proxy that turns writes into commands and the applier do not exist yet (see
``docs/live-hive.md`` in the shared docs for the design).

Modules, bottom up: :mod:`~hivemesh.live.errors` (what the log raises), :mod:`~hivemesh.live.config`
(``EtcdConfig``), :mod:`~hivemesh.live.etcd` (calls to etcd's v3 JSON gateway with a deadline and
failover between members), :mod:`~hivemesh.live.log` (``CommandLog``, ``Entry``, ``LogFollower``).
"""

from __future__ import annotations

from hivemesh.live.config import EtcdConfig
from hivemesh.live.errors import (
    CommandTooLarge,
    InvalidCommand,
    LiveError,
    LogCompacted,
    LogRefused,
    LogUnavailable,
    RequestIdConflict,
)
from hivemesh.live.log import CommandLog, Entry, LogFollower

__all__ = [
    "CommandLog",
    "CommandTooLarge",
    "Entry",
    "EtcdConfig",
    "InvalidCommand",
    "LiveError",
    "LogCompacted",
    "LogFollower",
    "LogRefused",
    "LogUnavailable",
    "RequestIdConflict",
]
