"""Members of a federation: a catalog connector, its names, its access rules and its health.

Every client connection of the proxy has a :class:`Session` holding its own Thrift connection to
each member it used (Thrift clients are not thread-safe, and ``set_ugi`` is per connection), so
clients never queue behind each other in the proxy. A member connection found closed by the
peer is replaced before a call is sent; a read that fails on the wire is retried once on a new
connection; a member that cannot be reached is marked unavailable, and calls routed to it then
fail at once with a MetaException naming it until the health poller sees it again.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from hive_metastore.ttypes import MetaException

from hivemesh.federation.access import AccessRules, is_read
from hivemesh.federation.connectors.thrift import TRANSPORT_ERRORS, Connection, ThriftCatalog
from hivemesh.federation.naming import NameMap

log = logging.getLogger("hivemesh.federation.members")


class MemberUnavailableError(Exception):
    """A member cannot be reached; ``str()`` is the message clients get in a MetaException."""


class Session:
    """Per client connection: one open connection per member, and the client's ``set_ugi``."""

    def __init__(self) -> None:
        self.conns: dict[object, Connection] = {}  # keyed by the member (or catalog) object
        self.ugi: tuple[str, list[str]] | None = None
        self.txns: list[int] = []  # txns this client opened and has not ended (newest last)
        self.closed = False
        self._lock = threading.Lock()

    def take(self, member: object) -> Connection | None:
        """The session's idle connection to ``member`` (removed while in use)."""
        with self._lock:
            return self.conns.pop(member, None)

    def give(self, member: object, conn: Connection) -> None:
        """Return a healthy connection after a call (closed if the session has ended)."""
        with self._lock:
            if not self.closed and member not in self.conns:
                self.conns[member] = conn
                return
        conn.close()

    def close(self) -> None:
        """Close every member connection (the client went away)."""
        with self._lock:
            self.closed = True
            conns, self.conns = list(self.conns.values()), {}
        for c in conns:
            c.close()


class Member:
    """One metastore of the federation.

    ``catalog``: a :class:`ThriftCatalog` or a direct (in-process) catalog; ``read_catalog``: the
    primary's read-only endpoint for reads, if configured. ``names``: how its names look to
    clients. ``access``: what clients may do. ``deadline_extra_s``: Waggle Dance's ``latency``.
    """

    def __init__(
        self,
        name: str,
        role: str,
        catalog: Any,
        names: NameMap,
        access: AccessRules,
        *,
        read_catalog: Any = None,
        deadline_extra_s: float = 0.0,
        config: Any = None,
    ):
        self.name = name
        self.role = role  # "primary", "federated" or "remote"
        self.catalog = catalog
        self.read_catalog = read_catalog
        self.names = names
        self.access = access
        self.deadline_extra_s = deadline_extra_s
        self.config = config
        self.index = 0  # small integer id, stable for the process (lock id encoding)
        self.available = True
        self.last_error: str | None = None
        self.changed_at = time.time()
        self.databases: frozenset[str] = frozenset()  # real names, as last listed by the poller
        self.remote_spec: Any = None  # a RemoteSpec for links
        self.missing: set[str] = set()  # HMS methods the member answered "Invalid method name" to

    @property
    def is_thrift(self) -> bool:
        """True for members reached over Thrift (their connections live in sessions)."""
        return isinstance(self.catalog, ThriftCatalog)

    def describe(self) -> str:
        """``primary metastore 'main' (thrift://h:9083)`` for messages."""
        what = {"primary": "primary metastore", "federated": "federated metastore", "remote": "remote"}[
            self.role
        ]
        return f"{what} '{self.name}' ({self.catalog.describe()})"

    # ------------------------------------------------------------------ health
    def mark_down(self, error: BaseException | str) -> None:
        """Record that the member cannot be reached (calls then fail fast)."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}".rstrip(": ")
        if self.available:
            log.warning("%s is unavailable: %s", self.describe(), text)
            self.changed_at = time.time()
        self.available = False
        self.last_error = text

    def mark_up(self) -> None:
        """Record that the member answers again."""
        if not self.available:
            log.info("%s is available again", self.describe())
            self.changed_at = time.time()
        self.available = True
        self.last_error = None

    def unavailable_error(self) -> MemberUnavailableError:
        """The error calls routed to this member get while it is down: names it, its last error and for how long."""
        since = time.time() - self.changed_at
        return MemberUnavailableError(
            f"hivemesh proxy: {self.describe()} is unavailable ({self.last_error}; down for {since:.0f} s)"
        )

    # ------------------------------------------------------------------ calls
    @property
    def relays(self) -> bool:
        """True if replies can be relayed as bytes: unframed binary Thrift to this member."""
        return self.is_thrift and not self.catalog.framed and not self.catalog.compact

    def relay(self, session: Session, method: str, args: Any, timeout_s: float | None = None) -> bytes:
        """Send one call and return its reply message undecoded (see :meth:`Connection.relay`).
        Errors as :meth:`call`."""
        return self.call(session, method, args, timeout_s, relay=True)

    def call(
        self,
        session: Session,
        method: str,
        args: Any,
        timeout_s: float | None = None,
        relay: bool = False,
    ) -> Any:
        """Send one HMS call (``args``: positional arguments, or the args struct with ``relay``).
        HMS exceptions pass through; MemberUnavailableError when the member is marked down or
        cannot be reached (it is then marked down)."""
        if not self.available:
            raise self.unavailable_error()
        read = is_read(method)
        catalog = self.read_catalog if (read and self.read_catalog is not None) else self.catalog
        if not isinstance(catalog, ThriftCatalog):
            return catalog.call(method, args)
        key = self if catalog is self.catalog else self.read_catalog
        conn = session.take(key)
        if conn is not None and conn.stale():
            conn.close()
            conn = None
        for attempt in (1, 2):
            fresh = conn is None
            if fresh:
                conn = self._connect(catalog, session)
            assert conn is not None
            try:
                result = conn.relay(method, args, timeout_s) if relay else conn.call(method, args, timeout_s)
            except TRANSPORT_ERRORS as e:
                conn.close()
                conn = None
                if attempt == 1 and read:
                    continue  # a reused connection may have gone stale in flight: retry once
                if fresh or attempt == 2:
                    self.mark_down(e)
                raise MemberUnavailableError(
                    f"hivemesh proxy: {self.describe()} failed during {method}: {type(e).__name__}: {e}"
                ) from e
            except Exception:
                session.give(key, conn)  # an HMS exception: the connection is still in sync
                raise
            session.give(key, conn)
            return result
        raise AssertionError("unreachable")

    def _connect(self, catalog: ThriftCatalog, session: Session) -> Connection:
        try:
            conn = catalog.connect()
        except (*TRANSPORT_ERRORS, ConnectionError) as e:
            self.mark_down(e)
            raise MemberUnavailableError(
                f"hivemesh proxy: cannot connect to {self.describe()}: {type(e).__name__}: {e}"
            ) from e
        if session.ugi is not None:
            try:
                conn.call("set_ugi", session.ugi)
            except Exception as e:  # an old or restricted metastore: the call itself still works
                log.debug("set_ugi on %s failed: %s", self.name, e)
        return conn

    def close(self) -> None:
        """Release the connector (in-process members stop their housekeeping)."""
        for cat in (self.catalog, self.read_catalog):
            if cat is not None:
                try:
                    cat.close()
                except Exception as e:
                    log.warning("closing %s: %s", self.name, e)


def unavailable(e: MemberUnavailableError) -> MetaException:
    """The MetaException a client gets for an unreachable member."""
    return MetaException(str(e))
