"""Members called in-process: an embedded hivemesh metastore, or an adapter such as AWS Glue."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from thrift.Thrift import TApplicationException

log = logging.getLogger("hivemesh.federation.direct")


class DirectCatalog:
    """Calls the HMS methods of ``target`` (an object with ``ThriftHiveMetastore.Iface`` methods)
    in this process. A method ``target`` lacks answers ``TApplicationException(UNKNOWN_METHOD)``,
    as a metastore without it would. ``kind``: ``"embedded"`` or ``"glue"`` (for messages)."""

    def __init__(self, target: Any, kind: str, description: str, closer: Any = None):
        from hive_metastore import ThriftHiveMetastore

        self.target = target
        self.kind = kind
        self._description = description
        self._closer = closer
        self.methods = frozenset(
            name
            for name in dir(ThriftHiveMetastore.Iface)
            if not name.startswith("_")
            and callable(getattr(type(target), name, None))
            and getattr(type(target), name) is not getattr(ThriftHiveMetastore.Iface, name, None)
        )

    def describe(self) -> str:
        """What the member is, for messages."""
        return self._description

    def call(self, method: str, args: Sequence[Any]) -> Any:
        """Call ``method(*args)`` on the target. Raises what the target raises."""
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


def embedded_catalog(db: str, warehouse: str, txn_timeout_s: float = 300) -> DirectCatalog:
    """A hivemesh metastore on ``db`` (SQLAlchemy URL) run inside this process, with its
    housekeeping (txn reaper, purges). Raises what opening the store raises."""
    from hivemesh.metastore.handler import LocalMetastore
    from hivemesh.metastore.housekeeper import Housekeeper
    from hivemesh.metastore.store import Store

    store = Store(db)
    handler = LocalMetastore(store, warehouse, txn_timeout_s=txn_timeout_s)
    keeper = Housekeeper(handler, 60, 86400, 7 * 86400).start()

    def close() -> None:
        keeper.stop()
        store.dispose()

    return DirectCatalog(
        handler, "embedded", f"embedded hivemesh metastore {store.url.render_as_string()}", close
    )
