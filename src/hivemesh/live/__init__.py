"""Live Hive: every zone writable, each write agreed through etcd and applied in one order.

Proposers append commands to the ordered command log (:mod:`hivemesh.live.log`) idempotently,
keyed by request id; every zone's applier follows it from its own position (see ``docs/live-hive.md``
in the shared docs for the design).

Modules, bottom up: :mod:`~hivemesh.live.errors` (what the log raises), :mod:`~hivemesh.live.config`
(``EtcdConfig``), :mod:`~hivemesh.live.etcd` (calls to etcd's v3 JSON gateway with a deadline and
failover between members), :mod:`~hivemesh.live.log` (``CommandLog``, ``Entry``, ``LogFollower``),
:mod:`~hivemesh.live.commands` (which writes are proposed, pinned into zone-neutral commands),
:mod:`~hivemesh.live.applier` (a zone's applier), :mod:`~hivemesh.live.proxy` and
:mod:`~hivemesh.live.service` (a zone's live proxy), :mod:`~hivemesh.live.check` (are the zones'
catalogs the same) and :mod:`~hivemesh.live.repair` (make them so, through the log).
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
