"""Members of a federation: a connector, its names, its access rules and its health.

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
from typing import Any, cast

from hive_metastore.ttypes import MetaException

from hivemesh.client.metastore import TRANSPORT_ERRORS
from hivemesh.errors import HivemeshError
from hivemesh.federation.access import AccessRules, is_read
from hivemesh.federation.connectors.base import Connection, Connector
from hivemesh.federation.naming import NameMap

log = logging.getLogger(__name__)

_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*TRANSPORT_ERRORS, ConnectionError)
"""Errors of opening a connection to a member: it is down."""


class MemberUnavailableError(HivemeshError):
    """A member cannot be reached; ``str()`` is the message clients get in a MetaException."""


class MemberIndexes:
    """Small integers for member names, stable for the life of this object (one per proxy): 0 is
    the primary, the others count from 1. They tag lock ids with their member (see
    :mod:`hivemesh.federation.txns`). Thread-safe."""

    def __init__(self) -> None:
        self._by_name: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._lock = threading.Lock()

    def of(self, name: str, primary: bool = False) -> int:
        """The index of member ``name`` (0 for the primary), given on first use."""
        if primary:
            return 0
        with self._lock:
            index = self._by_name.get(name)
            if index is None:
                index = self._by_name[name] = len(self._by_name) + 1
                self._names[index] = name
            return index

    def name(self, index: int) -> str | None:
        """The member name given ``index`` (None for 0 and for indexes never given)."""
        with self._lock:
            return self._names.get(index)


class Session:
    """Per client connection: one open connection per member, and the client's ``set_ugi``."""

    def __init__(self) -> None:
        self.conns: dict[object, Connection] = {}  # keyed by the member (or its read connector)
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

    ``connector``: how it is reached; ``read_connector``: the primary's read-only endpoint for
    reads, if configured. ``names``: how its names look to clients. ``access``: what clients may
    do. ``index``: its :class:`MemberIndexes` number (0: the primary). ``deadline_extra_s``: Waggle
    Dance's ``latency``. ``config``: its configuration (a MemberConfig, None for remotes);
    ``remote_spec``: the RemoteSpec of a remote (None for configured members).
    """

    still_down_log_interval_s: float = 300.0
    """While a member stays down, "still unavailable" is logged at most this often (seconds)."""

    def __init__(
        self,
        name: str,
        role: str,
        connector: Connector,
        names: NameMap,
        access: AccessRules,
        *,
        index: int = 0,
        read_connector: Connector | None = None,
        deadline_extra_s: float = 0.0,
        config: Any = None,
        remote_spec: Any = None,
    ):
        self.name = name
        self.role = role  # "primary", "federated" or "remote"
        self.connector = connector
        self.read_connector = read_connector
        self.names = names
        self.access = access
        self.index = index
        self.deadline_extra_s = deadline_extra_s
        self.config = config
        self.remote_spec = remote_spec
        self.available = True
        self.last_error: str | None = None
        self.changed_at = time.time()
        self._logged_at = self.changed_at  # when "unavailable" was last logged
        self._health_lock = threading.Lock()
        self.databases: frozenset[str] = frozenset()  # real names, as last listed by the poller
        self.missing: set[str] = set()  # HMS methods the member answered "Invalid method name" to

    @property
    def keeps_connections(self) -> bool:
        """True when calls go over connections kept in client sessions (Thrift members)."""
        return self.connector.sessions

    def describe(self) -> str:
        """``primary metastore 'main' (thrift://h:9083)`` for messages."""
        what = {"primary": "primary metastore", "federated": "federated metastore", "remote": "remote"}[
            self.role
        ]
        return f"{what} '{self.name}' ({self.connector.describe()})"

    # ------------------------------------------------------------------ health
    def error_text(self, error: BaseException | str) -> str:
        """``error`` as the reason in health messages: a Thrift exception's own message rather than
        its repr, without the connector's own name when the message starts with it (the member is
        named by the message around it), and the exception type unless it is a MetaException."""
        if isinstance(error, str):
            return error
        message = getattr(error, "message", None)
        if not isinstance(message, str) or not message:
            return f"{type(error).__name__}: {error}".rstrip(": ")
        label = getattr(self.connector, "error_label", None)
        if isinstance(label, str) and label and message.startswith(f"{label}: "):
            message = message[len(label) + 2 :]
        return message if isinstance(error, MetaException) else f"{type(error).__name__}: {message}"

    def mark_down(self, error: BaseException | str) -> None:
        """Record that the member cannot be reached (calls then fail fast). Logged as a WARNING
        when it goes down, then at most every :attr:`still_down_log_interval_s` while it stays
        down (every health poll calls this)."""
        text = self.error_text(error)
        now = time.time()
        with self._health_lock:
            if self.available:
                log.warning("%s is unavailable: %s", self.describe(), text)
                self.changed_at = self._logged_at = now
            elif now - self._logged_at >= self.still_down_log_interval_s:
                log.warning(
                    "%s still unavailable for %s: %s", self.describe(), _duration(now - self.changed_at), text
                )
                self._logged_at = now
            self.available = False
            self.last_error = text

    def mark_up(self) -> None:
        """Record that the member answers again (logged once, as INFO, when it was down)."""
        with self._health_lock:
            if not self.available:
                now = time.time()
                log.info(
                    "%s is available again (down for %s)", self.describe(), _duration(now - self.changed_at)
                )
                self.changed_at = now
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
        return self.connector.relays

    def relay(self, session: Session, method: str, args: Any, timeout_s: float | None = None) -> bytes:
        """Send one call and return its reply message undecoded (see :meth:`Connection.relay`).
        Errors as :meth:`call`."""
        return cast(bytes, self.call(session, method, args, timeout_s, relay=True))

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
        connector = self.read_connector if (read and self.read_connector is not None) else self.connector
        if not connector.sessions:
            return connector.call(method, args)
        key = self if connector is self.connector else connector
        conn = session.take(key)
        if conn is not None and conn.stale():
            conn.close()
            conn = None
        for attempt in (1, 2):
            fresh = conn is None
            if fresh:
                conn = self._connect(connector, session)
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

    def _connect(self, connector: Connector, session: Session) -> Connection:
        try:
            conn = connector.connect()
        except _CONNECT_ERRORS as e:
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
        for connector in (self.connector, self.read_connector):
            if connector is not None:
                try:
                    connector.close()
                except Exception as e:
                    log.warning("closing %s: %s", self.name, e)


def _duration(seconds: float) -> str:
    """``42s``, ``5m``, ``5m 30s``, ``2h 5m`` for log lines."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m" + (f" {s % 60}s" if s % 60 else "")
    return f"{s // 3600}h" + (f" {s % 3600 // 60}m" if s % 3600 // 60 else "")


def unavailable(e: MemberUnavailableError) -> MetaException:
    """The MetaException a client gets for an unreachable member."""
    return MetaException(str(e))
