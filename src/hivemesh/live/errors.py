"""What the command log raises. Every class derives from :class:`LiveError`, itself a
:class:`hivemesh.errors.HivemeshError`; the refusals of a caller's input are also ``ValueError``."""

from __future__ import annotations

from hivemesh.errors import HivemeshError

__all__ = [
    "CommandTooLarge",
    "InvalidCommand",
    "LiveError",
    "LogCompacted",
    "LogRefused",
    "LogUnavailable",
    "RequestIdConflict",
]


class LiveError(HivemeshError):
    """Base class of the errors of :mod:`hivemesh.live`."""


class LogUnavailable(LiveError):
    """etcd gave no answer within the operation's deadline (members down or hung, no quorum, no
    leader elected in time). The message names the endpoints and the last error seen. Trying again
    later is safe: every log operation is idempotent."""


class LogRefused(LiveError):
    """etcd answered with an error that trying again cannot mend (permission denied, a bad request,
    a certificate refused). The message names the endpoint and etcd's own words."""


class LogCompacted(LiveError):
    """Entries after ``position`` were removed by :meth:`hivemesh.live.log.CommandLog.compact`
    (every position below ``compacted_below`` is gone): a zone this far behind cannot follow the
    log and must re-sync by comparison."""

    def __init__(self, position: int, compacted_below: int, endpoints: str) -> None:
        self.position = position
        self.compacted_below = compacted_below
        super().__init__(
            f"{endpoints}: the command log is compacted below position {compacted_below}; reading "
            f"after position {position} would skip removed commands (re-sync the zone)"
        )


class InvalidCommand(LiveError, ValueError):
    """A command or request id the log refuses before sending anything."""


class CommandTooLarge(InvalidCommand):
    """A command larger than one etcd request may be (``max_request_bytes``, etcd's
    ``--max-request-bytes``, 1.5 MiB by default): the proposer must split it."""


class RequestIdConflict(InvalidCommand):
    """A request id already in the log with a different command: request ids must be unique per
    command (a retry sends the same bytes)."""
