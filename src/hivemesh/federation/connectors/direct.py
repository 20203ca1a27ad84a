"""Members called in-process: an embedded hivemesh metastore, or an adapter such as AWS Glue."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from thrift.Thrift import TApplicationException

from hivemesh.hive.hms_methods import implemented_methods
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.housekeeper import Housekeeper
from hivemesh.metastore.store import Store

log = logging.getLogger(__name__)


class DirectCatalog:
    """A :class:`~hivemesh.federation.connectors.base.Connector` that calls the HMS methods of
    ``target`` (an object with ``ThriftHiveMetastore.Iface`` methods) in this process, from any
    thread. A method ``target`` lacks answers ``TApplicationException(UNKNOWN_METHOD)``, as a
    metastore without it would. ``kind``: ``"embedded"`` or ``"glue"`` (for messages);
    ``closer``: called by :meth:`close`."""

    def __init__(self, target: Any, kind: str, description: str, closer: Callable[[], None] | None = None):
        self.target = target
        self.kind = kind
        self._description = description
        self._closer = closer
        self.methods = implemented_methods(target)

    @property
    def sessions(self) -> bool:
        """False: calls need no connection of a client session."""
        return False

    @property
    def relays(self) -> bool:
        """False: answers are objects, never reply bytes."""
        return False

    def describe(self) -> str:
        """What the member is, for messages."""
        return self._description

    @property
    def error_label(self) -> str | None:
        """How the target's own error messages begin (a Glue catalog's ``glue catalog 'x'
        (endpoint)``), so messages that name the member already can leave it out; None if unknown."""
        label = getattr(self.target, "error_label", None)
        return label if isinstance(label, str) else None

    def connect(self) -> _DirectConnection:
        """A connection object over :meth:`call` (in-process calls need none; for the protocol)."""
        return _DirectConnection(self)

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """Call ``method(*args)`` on the target (``timeout_s`` is not enforced in-process).
        Raises what the target raises."""
        if method not in self.methods:
            raise TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{method}'"
            )
        return getattr(self.target, method)(*args)

    def ping(self, timeout_s: float) -> None:
        """Health check: the target's own ``ping`` when it has one."""
        ping = getattr(self.target, "ping", None)
        if callable(ping):
            ping()

    def close(self) -> None:
        """Release the target (stop an embedded metastore's housekeeping, close its store)."""
        if self._closer is not None:
            try:
                self._closer()
            except Exception as e:
                log.warning("closing %s failed: %s", self._description, e)


class _DirectConnection:
    """:class:`~hivemesh.federation.connectors.base.Connection` over a :class:`DirectCatalog`."""

    def __init__(self, catalog: DirectCatalog):
        self._catalog = catalog

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """As :meth:`DirectCatalog.call`."""
        return self._catalog.call(method, args, timeout_s)

    def relay(self, method: str, args: Any, timeout_s: float | None = None) -> bytes:
        """Not possible in-process (:attr:`DirectCatalog.relays` is False): NotImplementedError."""
        raise NotImplementedError("an in-process member answers with objects, not reply bytes")

    def stale(self) -> bool:
        """False: nothing to go stale."""
        return False

    def close(self) -> None:
        """Nothing to close."""


def embedded_catalog(db: str, warehouse: str, txn_timeout_s: float = 300) -> DirectCatalog:
    """A hivemesh metastore on ``db`` (SQLAlchemy URL) run inside this process, with its
    housekeeping (txn reaper, purges). Raises what opening the store raises."""
    store = Store(db)
    handler = LocalMetastore(store, warehouse, txn_timeout_s=txn_timeout_s)
    keeper = Housekeeper(handler, 60, 86400, 7 * 86400).start()

    def close() -> None:
        keeper.stop()
        store.dispose()

    return DirectCatalog(
        handler, "embedded", f"embedded hivemesh metastore {store.url.render_as_string()}", close
    )
