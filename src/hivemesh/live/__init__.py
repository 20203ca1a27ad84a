"""Live Hive: every zone writable, each write agreed through etcd and applied in one order.

Proposers append commands to the ordered command log (:mod:`hivemesh.live.log`) idempotently,
keyed by request id; every zone's applier follows it from its own position (see ``docs/live-hive.md``
in the shared docs for the design).

Modules, bottom up: :mod:`~hivemesh.live.errors` (what the log raises), :mod:`~hivemesh.live.config`
(``EtcdConfig``), :mod:`~hivemesh.live.etcd` (calls to etcd's v3 JSON gateway with a deadline and
failover between members), :mod:`~hivemesh.live.log` (``CommandLog``, ``Entry``, ``LogFollower``),
:mod:`~hivemesh.live.commands` (which writes are proposed, pinned into zone-neutral commands),
:mod:`~hivemesh.live.state` (an applier's state file), :mod:`~hivemesh.live.out_of_band` (writes
made around the proxies, found in a zone's notification log), :mod:`~hivemesh.live.data` (the
directories a command makes visible, copied before it is applied), :mod:`~hivemesh.live.applier`
(a zone's applier), :mod:`~hivemesh.live.proxy` (the live proxy's catalog),
:mod:`~hivemesh.live.check` (are the zones' catalogs the same), :mod:`~hivemesh.live.repair` (make
them so, through the log), :mod:`~hivemesh.live.resync` (a zone the log was compacted past),
:mod:`~hivemesh.live.compaction` (the log kept short), :mod:`~hivemesh.live.service` and
:mod:`~hivemesh.live.cli` (``hivemesh live``).
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
