"""The error of a replication policy that cannot go on."""

from __future__ import annotations

from hivemesh.errors import HivemeshError

__all__ = ["ReplicationError"]


class ReplicationError(HivemeshError, RuntimeError):
    """A policy cannot go on; the message names the policy and the peer."""
