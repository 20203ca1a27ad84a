"""What a member needs from the way it reaches its metastore: the :class:`Connector` protocol.

Two kinds implement it. :class:`~hivemesh.federation.connectors.thrift.ThriftCatalog` reaches a
metastore over Thrift (directly or through an SSH tunnel): its connections are not thread-safe
and carry a client's ``set_ugi``, so each client session of the proxy keeps its own
(:attr:`Connector.sessions` is True). :class:`~hivemesh.federation.connectors.direct.DirectCatalog`
calls an HMS implementation in this process (an embedded hivemesh metastore, or
:class:`~hivemesh.federation.connectors.glue.GlueCatalog` over AWS Glue) from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Connection(Protocol):
    """One open connection to a metastore, used by one thread at a time."""

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """Send one HMS call with its positional ``args``; ``timeout_s`` bounds this call. HMS
        exceptions are raised unchanged, transport errors as ``TRANSPORT_ERRORS``."""
        ...

    def relay(self, method: str, args: Any, timeout_s: float | None = None) -> bytes:
        """Send one call with its decoded ``<method>_args`` struct and return the reply message
        undecoded (binary protocol, seqid 0). Errors as :meth:`call`."""
        ...

    def stale(self) -> bool:
        """True when the peer closed the connection (it must not be used)."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


class Connector(Protocol):
    """How a member reaches its metastore.

    ``kind``: ``"thrift"``, ``"embedded"`` or ``"glue"``. ``sessions``: True when client sessions
    call over connections of their own from :meth:`connect`; False when :meth:`call` serves every
    session from any thread. ``relays``: True when replies can be taken as bytes
    (:meth:`Connection.relay`: unframed binary Thrift).
    """

    kind: str

    @property
    def sessions(self) -> bool:
        """True: calls of client sessions go over their own connections (:meth:`connect`)."""
        ...

    @property
    def relays(self) -> bool:
        """True: connections can relay reply bytes undecoded."""
        ...

    def describe(self) -> str:
        """What and where the metastore is, for messages (``thrift://h:9083``)."""
        ...

    def connect(self) -> Connection:
        """A new connection for one client session. Raises a transport error or ConnectionError
        when the metastore cannot be reached."""
        ...

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """One call on its own, from any thread (in-process, or over a new connection closed
        after it). Raises what the metastore raises, transport errors included."""
        ...

    def ping(self, timeout_s: float) -> None:
        """Raise unless the metastore answers within ``timeout_s``."""
        ...

    def close(self) -> None:
        """Release what the connector holds (an SSH tunnel, an embedded store)."""
        ...
