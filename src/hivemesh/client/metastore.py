"""A small typed client of the Hive Metastore Thrift API: transactions, write ids, locks, events.

:class:`MetastoreClient` wraps ``hive_metastore.ThriftHiveMetastore.Client`` over a TSocket with
TBufferedTransport and TBinaryProtocolAccelerated (unframed, as Hive's Java clients talk by default;
``framed=True``/``compact=True`` for servers configured otherwise). It talks to any HMS: hivemesh or
Apache Hive's.

- Calls take and return ``hive_metastore.ttypes`` objects or plain Python values as documented per
  method. They go through :attr:`MetastoreClient.hms` (:class:`hivemesh.client.hms.HmsCalls`, one
  typed method per HMS call hivemesh makes, with its retry class), so HMS exceptions arrive as the
  hivemesh errors of :mod:`hivemesh.client.errors` (``NoSuchTxnError``, ``TxnAbortedError``,
  ``NoSuchLockError``, ``TxnOpenError``, ``MetaError``, ...), each still an instance of the Thrift
  exception it stands for (``except NoSuchTxnException`` catches it). ``TApplicationException`` (a
  method the server lacks) passes unchanged; so does everything :meth:`MetastoreClient.call` raises.
- Transport errors (connection refused or reset, timeouts) close the connection. The call is then
  retried on a new connection, up to ``retries`` times with exponential backoff, when it is
  idempotent (reads, heartbeats, ``check_lock``, ``allocate_table_write_ids`` which answers the
  same ids again) or when the request never left this process (the connection could not be
  opened). Other calls (``open_txns``, ``commit_txn``, ``abort_txn(s)``, ``lock``, ``unlock``)
  re-raise the transport error: the server may or may not have done them.
- A client is not thread-safe (neither is the Thrift client under it): use one per thread,
  :meth:`MetastoreClient.clone` makes one. The heartbeat threads of :meth:`MetastoreClient.transaction`
  and :meth:`MetastoreClient.locked` use their own connection.

Units: ``*_s`` arguments are seconds; lock and txn ids are Hive's longs.
"""

from __future__ import annotations

import getpass
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AbortTxnsRequest,
    AllocateTableWriteIdsRequest,
    CheckLockRequest,
    CommitTxnRequest,
    DataOperationType,
    GetOpenTxnsResponse,
    GetValidWriteIdsRequest,
    HeartbeatRequest,
    HeartbeatTxnRangeRequest,
    HeartbeatTxnRangeResponse,
    LockComponent,
    LockLevel,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
    NoSuchLockException,
    NoSuchTxnException,
    NotificationEvent,
    NotificationEventRequest,
    OpenTxnRequest,
    ShowLocksRequest,
    ShowLocksResponseElement,
    TxnAbortedException,
    TxnToWriteId,
    UnlockRequest,
)
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException, TException
from thrift.transport import TSocket, TSSLSocket, TTransport
from thrift.transport.TTransport import TTransportException

import hivemesh.hive  # noqa: F401 - the HMS exceptions can propagate through `with`
from hivemesh.client.errors import MetastoreClientError
from hivemesh.client.hms import HmsCalls
from hivemesh.hive.txn_lists import ValidTxnList, ValidTxnWriteIdList, ValidWriteIdList
from hivemesh.kerberos import KerberosInitiator, SaslError

log = logging.getLogger("hivemesh.client")

DEFAULT_PORT = 9083
DEFAULT_TXN_TIMEOUT_S = 300.0  # Hive's default hive.txn.timeout
TXN_TIMEOUT_KEY = "hive.txn.timeout"
MAX_LOCK_POLL_S = 1.0  # check_lock backoff ceiling

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (TTransportException, OSError, EOFError)
"""Errors meaning the connection failed, not that the metastore answered (the proxy uses them too)."""

T = TypeVar("T")

_connecting = threading.local()


class _QuietWhileConnecting(logging.Filter):
    """Drops Thrift's own records about a failed connect ("Could not connect to any of [...]",
    with a traceback per address) made while :func:`open_transport` opens a socket: the caller
    gets the same reason in the TTransportException it raises, and reports it once itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False while this thread is inside :func:`open_transport`'s connect."""
        return not getattr(_connecting, "active", False)


for _name in ("thrift.transport.TSocket", "thrift.transport.TSSLSocket"):
    logging.getLogger(_name).addFilter(_QuietWhileConnecting())

_TIME = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*")
_UNITS_S = {
    "": 1.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "us": 1e-6, "usec": 1e-6, "usecs": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ns": 1e-9, "nsec": 1e-9, "nsecs": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
}  # fmt: skip


class LockNotAcquiredError(MetastoreClientError):
    """The metastore refused a lock (state ABORT or NOT_ACQUIRED). ``response``: its LockResponse."""

    def __init__(self, message: str, response: LockResponse):
        super().__init__(message)
        self.response = response


class LockTimeoutError(MetastoreClientError):
    """A lock was still WAITING after the timeout; it has been released (unlock) before raising."""

    def __init__(self, message: str, lock_id: int, blocked_s: float):
        super().__init__(message)
        self.lock_id = lock_id
        self.blocked_s = blocked_s


def parse_uris(uri: str) -> list[tuple[str, int]]:
    """``thrift://host:port`` (or ``host:port``, or a comma-separated list of either, as in
    ``hive.metastore.uris``) -> ``[(host, port), ...]``; the port defaults to 9083.
    Raises ValueError for an empty list or a bad port."""
    out = []
    for part in uri.split(","):
        part = part.strip()
        if not part:
            continue
        if "://" in part:
            scheme, _, part = part.partition("://")
            if scheme.lower() != "thrift":
                raise ValueError(f"not a thrift:// metastore URI: {uri!r}")
        part = part.rstrip("/")
        if part.startswith("["):  # [ipv6]:port
            host, _, rest = part[1:].partition("]")
            port = rest.lstrip(":") or str(DEFAULT_PORT)
        elif part.count(":") == 1:
            host, _, port = part.partition(":")
        else:
            host, port = part, str(DEFAULT_PORT)
        if not host or not port.isdigit():
            raise ValueError(f"bad metastore URI {uri!r}")
        out.append((host, int(port)))
    if not out:
        raise ValueError(f"no metastore in URI {uri!r}")
    return out


def open_socket(
    host: str,
    port: int,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> TSocket.TSocket:
    """An unopened Thrift socket to ``host:port`` with a ``timeout_s`` socket timeout; over TLS
    when ``tls`` (a client-side ``ssl.SSLContext``, :func:`hivemesh.tls.client_context`) is given,
    checking the server's name (``server_hostname``, default ``host``) only when the context does
    (Hive's Java client does not). Does not connect, so raises nothing about the network (its ``open()``
    raises TTransportException)."""
    sock: TSocket.TSocket
    name = server_hostname or host
    if tls is None:
        sock = TSocket.TSocket(host, port)
    elif tls.check_hostname:
        sock = _TlsSocket(host, port, ssl_context=tls, server_hostname=name)
    else:
        sock = _TlsSocket(host, port, ssl_context=tls, server_hostname=name, validate_callback=_no_name_check)
    sock.setTimeout(int(timeout_s * 1000))
    return sock


def open_transport(
    host: str,
    port: int,
    timeout_s: float,
    *,
    tls: ssl.SSLContext | None = None,
    kerberos: KerberosInitiator | None = None,
    framed: bool = False,
    server_hostname: str | None = None,
    read_buffer: int = 4096,
) -> tuple[TSocket.TSocket, TTransport.TTransportBase]:
    """An open connection to ``host:port``: the socket (:func:`open_socket`) and the Thrift
    transport over it, after the Kerberos (SASL GSSAPI) negotiation when ``kerberos`` is given,
    whose frames are Thrift's framed transport. Raises TTransportException (refused, timed out,
    TLS or Kerberos failure, with the reason) or OSError."""
    sock = open_socket(host, port, timeout_s, tls, server_hostname)
    _connecting.active = True
    try:
        sock.open()
    finally:
        _connecting.active = False
    if kerberos is not None:
        try:
            kerberos.negotiate(sock.handle, server_hostname or host)
        except SaslError as e:
            sock.close()
            raise TTransportException(TTransportException.NOT_OPEN, str(e), inner=e) from e
        return sock, TTransport.TFramedTransport(sock)
    if framed:
        return sock, TTransport.TFramedTransport(sock)
    return sock, TTransport.TBufferedTransport(sock, rbuf_size=read_buffer)


class _TlsSocket(TSSLSocket.TSSLSocket):  # type: ignore[misc]  # thrift ships no type hints
    """Thrift's TLS socket, whose failed handshake says why (Thrift's own message is only
    "Could not connect to any of [...]", hiding e.g. an untrusted certificate)."""

    def open(self) -> None:
        """Connect and handshake. Raises TTransportException (NOT_OPEN) naming the TLS reason."""
        try:
            super().open()
        except TTransportException as e:
            inner = getattr(e, "inner", None)
            if isinstance(inner, ssl.SSLError):
                raise TTransportException(
                    TTransportException.NOT_OPEN,
                    f"TLS handshake with {self.host}:{self.port} failed: {inner}",
                    inner=inner,
                ) from e
            raise


def _no_name_check(_cert: Any, _hostname: str) -> None:
    """Accept any name in a certificate the context already verified against its CAs."""


def parse_time_s(value: str | None, default_unit_s: float = 1.0) -> float | None:
    """A Hive time setting in seconds: ``"300s"``, ``"300"`` (``default_unit_s`` per unit),
    ``"5m"``, ``"1500ms"``, ``"2h"``, ``"1d"``, long unit names too. None when unreadable. Never raises: an
    unreadable value gives None."""
    if value is None:
        return None
    m = _TIME.fullmatch(value)
    if not m:
        return None
    unit = m.group(2).lower()
    if unit not in _UNITS_S:
        return None
    return float(m.group(1)) * (_UNITS_S[unit] if unit else default_unit_s)


def lock_component(
    db: str,
    table: str | None = None,
    partition: str | None = None,
    lock_type: int = LockType.SHARED_READ,
    operation: int = DataOperationType.SELECT,
    transactional: bool = True,
) -> LockComponent:
    """A LockComponent at the level its names give: database, table, or partition
    (``partition`` is Hive's partition name, e.g. ``ds=2024-01-01/hr=01``).
    ``lock_type``: ``LockType.SHARED_READ`` (readers), ``SHARED_WRITE`` (inserts),
    ``EXCL_WRITE``, ``EXCLUSIVE``; ``operation``: a ``DataOperationType``."""
    level = LockLevel.PARTITION if partition else LockLevel.TABLE if table else LockLevel.DB
    return LockComponent(
        type=lock_type,
        level=level,
        dbname=db,
        tablename=table,
        partitionname=partition,
        operationType=operation,
        isTransactional=transactional,
    )


class Heartbeater:
    """Heartbeats one txn or one txn-less lock from a daemon thread on its own connection.

    ``interval_s``: seconds between heartbeats (the first comes after one interval). Stops by
    itself when the metastore says the txn or lock is gone (NoSuchTxnException,
    TxnAbortedException, NoSuchLockException); that exception is kept in :attr:`error`. Other
    failures are logged, kept in :attr:`error` and retried at the next interval.
    """

    def __init__(
        self,
        client: MetastoreClient,
        interval_s: float,
        txn_id: int | None = None,
        lock_id: int | None = None,
    ):
        if txn_id is None and lock_id is None:
            raise ValueError("Heartbeater needs a txn id or a lock id")
        self.interval_s = interval_s
        self.txn_id = txn_id
        self.lock_id = lock_id
        self.beats = 0
        self.error: BaseException | None = None
        self._client = client.clone(connect=False)
        self._stop = threading.Event()
        what = f"txn{txn_id}" if txn_id is not None else f"lock{lock_id}"
        self._thread = threading.Thread(target=self._run, name=f"hms-heartbeat-{what}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    self._client.heartbeat(txn_id=self.txn_id, lock_id=self.lock_id)
                    self.beats += 1
                except (NoSuchTxnException, TxnAbortedException, NoSuchLockException) as e:
                    self.error = e
                    log.warning("heartbeat stopped: %s", getattr(e, "message", e))
                    return
                except Exception as e:  # transport trouble outlasting the retries: try next time
                    self.error = e
                    log.warning("heartbeat failed: %s: %s", type(e).__name__, e)
        finally:
            self._client.close()

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop heartbeating and wait (up to ``timeout_s``) for the thread to end. Never raises; a thread
        still running after ``timeout_s`` is left to end by itself (daemon)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class Transaction:
    """An open txn of :meth:`MetastoreClient.transaction`: ``txn_id`` and helpers bound to it.

    :meth:`commit`/:meth:`abort` end it early (the context manager then does nothing more);
    :attr:`state` is ``"open"``, ``"committed"`` or ``"aborted"``.
    """

    def __init__(self, client: MetastoreClient, txn_id: int, heartbeater: Heartbeater | None):
        self.client = client
        self.txn_id = txn_id
        self.heartbeater = heartbeater
        self.state = "open"

    @property
    def heartbeat_error(self) -> BaseException | None:
        """The last heartbeat failure (None when every heartbeat went through)."""
        return self.heartbeater.error if self.heartbeater else None

    def valid_txn_list(self) -> ValidTxnList:
        """This txn's snapshot: the ValidTxnList Hive builds for it (own txn excluded, capped). Raises a
        transport error (TTransportException, OSError) when the metastore stays unreachable after the
        retries."""
        return self.client.valid_txn_list(self.txn_id)

    def valid_write_ids(
        self, tables: Sequence[str], valid_txn_list: ValidTxnList | str | None = None
    ) -> dict[str, ValidWriteIdList]:
        """Write-id snapshots of ``tables`` (``db.table``) under ``valid_txn_list`` (default: a
        fresh :meth:`valid_txn_list`). Raises as :meth:`MetastoreClient.valid_write_ids`
        (NoSuchTxnException, MetaException)."""
        vtl = valid_txn_list if valid_txn_list is not None else self.valid_txn_list()
        return self.client.valid_write_ids(tables, vtl)

    def allocate_write_id(self, db: str, table: str) -> int:
        """This txn's write id for ``db.table`` (the same one on every call). Raises NoSuchTxnException /
        TxnAbortedException when this txn is no longer open."""
        return self.client.allocate_write_ids(db, table, [self.txn_id])[self.txn_id]

    def lock(
        self, components: Sequence[LockComponent], wait: bool = True, timeout_s: float = 60.0
    ) -> LockResponse:
        """Locks held by this txn until it ends (see :meth:`MetastoreClient.lock`). Raises
        LockTimeoutError, LockNotAcquiredError, and NoSuchTxnException / TxnAbortedException when this txn
        is no longer open."""
        return self.client.lock(components, txn_id=self.txn_id, wait=wait, timeout_s=timeout_s)

    def _end(self) -> None:
        if self.heartbeater is not None:
            self.heartbeater.stop()

    def commit(self) -> None:
        """Commit now. HMS exceptions pass through (e.g. TxnAbortedException after a timeout)."""
        if self.state != "open":
            raise MetastoreClientError(f"txn {self.txn_id} is already {self.state}")
        self._end()
        self.client.commit_txn(self.txn_id)
        self.state = "committed"

    def abort(self) -> None:
        """Abort now. Raises MetastoreClientError when already committed or aborted; NoSuchTxnException /
        TxnAbortedException from the metastore pass through."""
        if self.state != "open":
            raise MetastoreClientError(f"txn {self.txn_id} is already {self.state}")
        self._end()
        self.state = "aborted"
        self.client.abort_txn(self.txn_id)


class MetastoreClient:
    """A connection to a Hive metastore with typed txn, write-id, lock and notification calls.

    ``uri``: ``thrift://host:port`` (a comma-separated list is tried in order), or give ``host``
    and ``port``. ``framed``/``compact``: transport and protocol (default unframed binary).
    ``timeout_s``: socket timeout per call. ``retries``/``retry_backoff_s``: how often and how
    soon (doubling each time) a call is retried after a transport error (see the module doc).
    ``user``/``hostname``: recorded on txns and locks (default: this process's user and host). A
    ``user`` given is also sent with ``set_ugi`` on every new connection, as Hive's clients do, so
    the server (its audit log, the default owner of what is created) knows who calls; not over
    Kerberos, where the server takes the user from the authenticated principal.
    ``tls``: a client-side ``ssl.SSLContext`` for a metastore serving TLS
    (``hive.metastore.use.SSL``; :func:`hivemesh.tls.client_context` builds one from a PEM CA).
    ``kerberos``: a :class:`hivemesh.kerberos.KerberosInitiator` for a metastore requiring
    Kerberos (``hive.metastore.sasl.enabled``); messages then travel in SASL (framed) frames.
    ``connect=False`` defers connecting to the first call.

    At connect the client reads ``hive.txn.timeout`` with ``get_config_value`` into
    :attr:`txn_timeout_s` (300 s when the server does not say); heartbeats run every third of it.
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        host: str | None = None,
        port: int = DEFAULT_PORT,
        framed: bool = False,
        compact: bool = False,
        timeout_s: float = 60.0,
        retries: int = 3,
        retry_backoff_s: float = 0.2,
        user: str | None = None,
        hostname: str | None = None,
        connect: bool = True,
        tls: ssl.SSLContext | None = None,
        kerberos: KerberosInitiator | None = None,
    ):
        if uri is not None:
            self.endpoints = parse_uris(uri)
        elif host is not None:
            self.endpoints = [(host, int(port))]
        else:
            raise ValueError("MetastoreClient needs a uri or a host")
        self.framed = framed
        self.compact = compact
        self.tls = tls
        self.kerberos = kerberos
        self.timeout_s = timeout_s
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.user = user or _current_user()
        self.ugi_user = user if kerberos is None else None  # sent with set_ugi when set
        self.hostname = hostname or socket.gethostname()
        self.txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S
        self._txn_timeout_known = False
        self._transport: TTransport.TTransportBase | None = None
        self._client: ThriftHiveMetastore.Client | None = None
        self.hms = HmsCalls(self)
        """The HMS calls of this client, typed (:class:`hivemesh.client.hms.HmsCalls`)."""
        if connect:
            self.connect()

    # ------------------------------------------------------------------ connection
    def _open_once(self) -> None:
        last: BaseException | None = None
        for host, port in self.endpoints:
            try:
                _sock, transport = open_transport(
                    host, port, self.timeout_s, tls=self.tls, kerberos=self.kerberos, framed=self.framed
                )
            except TRANSPORT_ERRORS as e:
                last = e
                continue
            protocol = (
                TCompactProtocol.TCompactProtocolAccelerated(transport)
                if self.compact
                else TBinaryProtocol.TBinaryProtocolAccelerated(transport)
            )
            client = ThriftHiveMetastore.Client(protocol)
            if self.ugi_user:
                try:
                    client.set_ugi(self.ugi_user, [])
                except TRANSPORT_ERRORS as e:
                    transport.close()
                    last = e
                    continue
                except TException as e:  # a server without the call: it just does not learn the user
                    log.debug("set_ugi refused by %s:%d: %s", host, port, e)
            self._transport = transport
            self._client = client
            return
        assert last is not None
        raise last

    def connect(self) -> MetastoreClient:
        """Open the connection (retrying ``retries`` times with backoff) and read
        ``hive.txn.timeout`` once. Raises the last TTransportException when no endpoint answers,
        TApplicationException (UNSUPPORTED_CLIENT_TYPE) when the server refuses this kind of
        client, e.g. a hivemesh server requiring TLS reached without it ("the server requires TLS")."""
        if self._client is None:
            self._retry(self._open_once, idempotent=True)
        if not self._txn_timeout_known:
            self._txn_timeout_known = True
            try:
                value = self.get_config_value(TXN_TIMEOUT_KEY, f"{DEFAULT_TXN_TIMEOUT_S:g}s")
            except TRANSPORT_ERRORS:
                raise
            except TApplicationException as e:
                if e.type == TApplicationException.UNSUPPORTED_CLIENT_TYPE:  # e.g. "the server requires TLS"
                    self.close()
                    raise
                log.debug("cannot read %s: %s", TXN_TIMEOUT_KEY, e)
                value = None
            except Exception as e:  # a server without the call, or refusing the key: keep the default
                log.debug("cannot read %s: %s", TXN_TIMEOUT_KEY, e)
                value = None
            seconds = parse_time_s(value)
            if seconds and seconds > 0:
                self.txn_timeout_s = seconds
        return self

    def close(self) -> None:
        """Close the connection (a later call reconnects). Never raises: a failing close of the transport
        is ignored."""
        transport, self._transport, self._client = self._transport, None, None
        if transport is not None:
            try:
                transport.close()
            except Exception:
                pass

    def clone(self, connect: bool = True) -> MetastoreClient:
        """A new client with the same settings and its own connection (for another thread). With
        ``connect`` it raises what :meth:`connect` raises."""
        other = MetastoreClient(
            host=self.endpoints[0][0],
            port=self.endpoints[0][1],
            framed=self.framed,
            compact=self.compact,
            timeout_s=self.timeout_s,
            retries=self.retries,
            retry_backoff_s=self.retry_backoff_s,
            user=self.user,
            hostname=self.hostname,
            connect=False,
            tls=self.tls,
            kerberos=self.kerberos,
        )
        other.endpoints = list(self.endpoints)
        other.ugi_user = self.ugi_user
        other.txn_timeout_s = self.txn_timeout_s
        other._txn_timeout_known = self._txn_timeout_known
        if connect:
            other.connect()
        return other

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def raw(self) -> ThriftHiveMetastore.Client:
        """The underlying Thrift client (connecting first if needed). It is replaced after a
        reconnect, so fetch it again rather than keeping it. Raises what :meth:`connect` raises."""
        if self._client is None:
            self.connect()
        assert self._client is not None
        return self._client

    def _retry(self, fn: Callable[[], T], idempotent: bool) -> T:
        attempt = 0
        while True:
            try:
                return fn()
            except TRANSPORT_ERRORS as e:
                self.close()
                if not idempotent or attempt >= self.retries:
                    raise
                error = e
            delay = self.retry_backoff_s * (2**attempt)
            attempt += 1
            # DEBUG: the caller reports the error that remains after the last retry
            log.debug(
                "metastore transport error (%s); retry %d/%d in %.2fs", error, attempt, self.retries, delay
            )
            time.sleep(delay)

    def call(self, method: str, *args: Any, idempotent: bool = False) -> Any:
        """Call any HMS method by name (hivemesh's own calls go through the typed :attr:`hms`, which
        says per call whether it is idempotent). A transport error while connecting is always retried;
        one during the call only when ``idempotent`` (the connection is reopened either way). Raises the
        method's HMS exceptions unchanged, TApplicationException for a method the server lacks,
        AttributeError for a name the Thrift client lacks, and the transport error (TTransportException,
        OSError, EOFError) left after the retries."""

        def attempt() -> Any:
            """One try: (re)connect when needed, then the call; returns its result."""
            if self._client is None:
                try:
                    self._open_once()
                except TRANSPORT_ERRORS as e:
                    raise _NotSent(e) from e
            return getattr(self._client, method)(*args)

        tries = 0
        while True:
            try:
                return self._retry(attempt, idempotent)
            except _NotSent as e:
                if tries >= self.retries:
                    raise e.error from None
                time.sleep(self.retry_backoff_s * (2**tries))
                tries += 1

    # ------------------------------------------------------------------ config
    def get_config_value(self, name: str, default: str) -> str:
        """The metastore's value of ``name`` (``default`` when unset). ConfigValSecurityException
        for keys outside ``hive.*``/``hdfs.*``/``mapred.*``/``metastore.*``."""
        return str(self.hms.get_config_value(name, default))

    # ------------------------------------------------------------------ transactions
    def open_txns(
        self,
        n: int = 1,
        *,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
        txn_type: int | None = None,
        repl_policy: str | None = None,
        repl_src_txn_ids: Sequence[int] | None = None,
    ) -> list[int]:
        """Open ``n`` txns; their ids (consecutive, ascending). ``txn_type``: a ``TxnType``
        (default DEFAULT). Replication form: ``repl_policy`` + ``repl_src_txn_ids`` (source ids,
        mapped to new target txns). Not retried after a transport error during the call. Raises the
        transport error (TTransportException, OSError) unchanged; the HMS call declares no exception (a
        server failure arrives as TApplicationException)."""
        req = OpenTxnRequest(
            num_txns=n,
            user=user or self.user,
            hostname=host or self.hostname,
            agentInfo=agent_info,
            replPolicy=repl_policy,
            replSrcTxnIds=list(repl_src_txn_ids) if repl_src_txn_ids is not None else None,
            txn_type=txn_type,
        )
        return list(self.hms.open_txns(req).txn_ids)

    def open_txn(self, **kwargs: Any) -> int:
        """Open one txn; its id (keywords as :meth:`open_txns`). Raises as :meth:`open_txns`."""
        return self.open_txns(1, **kwargs)[0]

    def commit_txn(self, txn_id: int, *, repl_policy: str | None = None, **fields: Any) -> None:
        """Commit ``txn_id`` (its locks are released). NoSuchTxnException, TxnAbortedException.
        Extra ``CommitTxnRequest`` fields (``writeEventInfos``, ``keyValue``, ...) by keyword."""
        self.hms.commit_txn(CommitTxnRequest(txnid=txn_id, replPolicy=repl_policy, **fields))

    def abort_txn(self, txn_id: int, *, repl_policy: str | None = None) -> None:
        """Abort ``txn_id`` (its locks are released). NoSuchTxnException, TxnAbortedException."""
        self.hms.abort_txn(AbortTxnRequest(txnid=txn_id, replPolicy=repl_policy))

    def abort_txns(self, txn_ids: Iterable[int]) -> None:
        """Abort several txns. NoSuchTxnException when one is unknown."""
        self.hms.abort_txns(AbortTxnsRequest(txn_ids=list(txn_ids)))

    def heartbeat(self, txn_id: int | None = None, lock_id: int | None = None) -> None:
        """Keep a txn and/or a txn-less lock alive (``hive.txn.timeout``). NoSuchTxnException,
        TxnAbortedException, NoSuchLockException."""
        self.hms.heartbeat(HeartbeatRequest(lockid=lock_id, txnid=txn_id))

    def heartbeat_txn_range(self, min_txn: int, max_txn: int) -> HeartbeatTxnRangeResponse:
        """Heartbeat txns ``min_txn..max_txn`` (inclusive); the answer's ``aborted`` and ``nosuch``
        sets name those that could not be. Declares no HMS exception (a txn it cannot heartbeat is named in
        the answer); raises the transport error left after the retries."""
        return self.hms.heartbeat_txn_range(HeartbeatTxnRangeRequest(min=min_txn, max=max_txn))

    def get_open_txns(self) -> GetOpenTxnsResponse:
        """High watermark, open and aborted txn ids (ascending) and ``abortedBits``. Declares no HMS
        exception; raises the transport error left after the retries."""
        return self.hms.get_open_txns()

    def valid_txn_list(self, current_txn: int | None = None) -> ValidTxnList:
        """The ValidTxnList a reader uses (Hive ``createValidReadTxnList``): from
        :meth:`get_open_txns`, excluding ``current_txn`` and capping the high watermark at it. Raises as
        :meth:`get_open_txns`."""
        return ValidTxnList.from_open_txns(self.get_open_txns(), current_txn)

    # ------------------------------------------------------------------ write ids
    def allocate_write_ids(
        self,
        db: str,
        table: str,
        txn_ids: Sequence[int] = (),
        *,
        repl_policy: str | None = None,
        src_txn_to_write_ids: dict[int, int] | None = None,
    ) -> dict[int, int]:
        """Write ids of ``db.table`` for open ``txn_ids``: ``{txn_id: write_id}``. A txn that has
        one gets it again (so the call is retried like a read). Replication form:
        ``repl_policy`` + ``src_txn_to_write_ids`` (source txn -> source write id); the answer is
        then keyed by target txn id. NoSuchTxnException, TxnAbortedException."""
        req = AllocateTableWriteIdsRequest(dbName=db, tableName=table)
        if repl_policy is not None:
            req.replPolicy = repl_policy
            req.srcTxnToWriteIdList = [
                TxnToWriteId(txnId=t, writeId=w) for t, w in (src_txn_to_write_ids or {}).items()
            ]
        else:
            req.txnIds = list(txn_ids)
        resp = self.hms.allocate_table_write_ids(req)
        return {p.txnId: p.writeId for p in resp.txnToWriteIds}

    def valid_write_ids(
        self,
        tables: Sequence[str],
        valid_txn_list: ValidTxnList | str,
        write_id: int | None = None,
        txn_lists: dict[str, ValidTxnList] | None = None,
    ) -> dict[str, ValidWriteIdList]:
        """Write-id snapshots (Hive ``createValidReaderWriteIdList``) of ``tables`` (``db.table``)
        under ``valid_txn_list``, keyed by the metastore's full table name, in request order.

        ``txn_lists``, if given, receives the ValidTxnList a hivemesh proxy sent along for tables
        of a federated member (whose txn ids are not the primary's): judge those tables' files
        with it instead of ``valid_txn_list``. Raises NoSuchTxnException for an unknown ``write_id`` txn,
        MetaException (e.g. a missing or malformed ``valid_txn_list``), and the transport error
        left after the retries."""
        req = GetValidWriteIdsRequest(
            fullTableNames=list(tables), validTxnList=str(valid_txn_list), writeId=write_id
        )
        resp = self.hms.get_valid_write_ids(req)
        out = {}
        for t in resp.tblValidWriteIds or []:
            w = ValidWriteIdList.from_table_valid_write_ids(t)
            out[t.fullTableName] = w
            own = getattr(t, "hivemeshValidTxnList", None)
            if own and txn_lists is not None:
                txn_lists[t.fullTableName] = ValidTxnList.parse(own)
        return out

    def valid_txn_write_id_list(
        self, txn_id: int, tables: Sequence[str], valid_txn_list: ValidTxnList | str | None = None
    ) -> ValidTxnWriteIdList:
        """Hive's ``hive.txn.tables.valid.writeids`` value for reader ``txn_id`` over ``tables``
        (``valid_txn_list`` defaults to a fresh one for ``txn_id``). Raises as :meth:`valid_write_ids`."""
        vtl = valid_txn_list if valid_txn_list is not None else self.valid_txn_list(txn_id)
        return ValidTxnWriteIdList(txn_id, tuple(self.valid_write_ids(tables, vtl).values()))

    # ------------------------------------------------------------------ locks
    def lock(
        self,
        components: Sequence[LockComponent],
        txn_id: int | None = None,
        *,
        wait: bool = True,
        timeout_s: float = 60.0,
        user: str | None = None,
        host: str | None = None,
        agent_info: str | None = None,
    ) -> LockResponse:
        """Request locks (see :func:`lock_component`), held by ``txn_id`` until it ends, or
        txn-less (then :meth:`unlock` them and heartbeat them with ``lock_id``).

        With ``wait`` the call polls ``check_lock`` (50 ms, doubling up to 1 s) until ACQUIRED and
        returns that LockResponse; after ``timeout_s`` it unlocks the waiting lock and raises
        :class:`LockTimeoutError`; a lock refused (ABORT, NOT_ACQUIRED) raises
        :class:`LockNotAcquiredError`. Without ``wait`` the first answer is returned as is (state
        ACQUIRED or WAITING). HMS exceptions (NoSuchTxnException, TxnAbortedException, ...) pass
        through.
        """
        req = LockRequest(
            component=list(components),
            txnid=txn_id,
            user=user or self.user,
            hostname=host or self.hostname,
            agentInfo=agent_info,
        )
        resp: LockResponse = self.hms.lock(req)
        if not wait:
            return resp
        start = time.monotonic()
        delay = 0.05
        while resp.state == LockState.WAITING:
            waited = time.monotonic() - start
            if waited >= timeout_s:
                self._release_waiting(resp.lockid)
                raise LockTimeoutError(
                    f"lock {resp.lockid} still waiting after {waited:.1f}s (released)", resp.lockid, waited
                )
            time.sleep(min(delay, max(0.0, timeout_s - waited)))
            delay = min(delay * 2, MAX_LOCK_POLL_S)
            resp = self.check_lock(resp.lockid, txn_id)
        if resp.state != LockState.ACQUIRED:
            state = LockState._VALUES_TO_NAMES.get(resp.state, resp.state)
            detail = f": {resp.errorMessage}" if resp.errorMessage else ""
            raise LockNotAcquiredError(f"lock {resp.lockid} not acquired (state {state}){detail}", resp)
        return resp

    def _release_waiting(self, lock_id: int) -> None:
        try:
            self.unlock(lock_id)
        except Exception as e:  # already gone, or the server refuses: the timeout is the news
            log.warning("could not release waiting lock %s: %s", lock_id, getattr(e, "message", e))

    def check_lock(self, lock_id: int, txn_id: int | None = None) -> LockResponse:
        """The state of a lock (also a heartbeat of it). NoSuchLockException, NoSuchTxnException,
        TxnAbortedException."""
        return self.hms.check_lock(CheckLockRequest(lockid=lock_id, txnid=txn_id))

    def unlock(self, lock_id: int) -> None:
        """Release a txn-less lock (or a txn's lock still waiting). NoSuchLockException;
        TxnOpenException for an acquired lock of an open txn (those end with the txn)."""
        self.hms.unlock(UnlockRequest(lockid=lock_id))

    def show_locks(
        self,
        db: str | None = None,
        table: str | None = None,
        partition: str | None = None,
        *,
        txn_id: int | None = None,
        extended: bool = False,
    ) -> list[ShowLocksResponseElement]:
        """Current locks, optionally of one database/table/partition or txn. Declares no HMS exception;
        raises the transport error left after the retries."""
        req = ShowLocksRequest(
            dbname=db, tablename=table, partname=partition, isExtended=extended, txnid=txn_id
        )
        return list(self.hms.show_locks(req).locks or [])

    # ------------------------------------------------------------------ notifications
    def next_notification(
        self,
        last_event_id: int,
        max_events: int | None = None,
        skip_types: Iterable[str] | None = None,
        db: str | None = None,
        tables: Iterable[str] | None = None,
    ) -> list[NotificationEvent]:
        """Events with id > ``last_event_id``, oldest first; at most ``max_events`` (all when None).

        ``skip_types`` leaves event types out (``eventTypeSkipList``). ``db``/``tables`` keep the
        events of that database / those tables (case-insensitive); they are sent as Hive 4's
        ``dbName``/``tableNames`` filters and applied again here for servers that ignore them
        (with those, ``max_events`` counts events before this filtering). Declares no HMS
        exception; raises the transport error left after the retries.
        """
        table_names = [t.lower() for t in tables or ()]
        req = NotificationEventRequest(
            lastEvent=last_event_id,
            maxEvents=max_events,
            eventTypeSkipList=list(skip_types) if skip_types else None,
        )
        if db:
            req.dbName = db
        if table_names:
            req.tableNames = table_names
        events = list(self.hms.get_next_notification(req).events or [])
        if db:
            events = [e for e in events if (e.dbName or "").lower() == db.lower()]
        if table_names:
            events = [e for e in events if (e.tableName or "").lower() in table_names]
        return events

    def current_notification_event_id(self) -> int:
        """Id of the newest notification event (0 for an empty log). Declares no HMS exception; raises the
        transport error left after the retries."""
        return int(self.hms.get_current_notificationEventId().eventId)

    # ------------------------------------------------------------------ context managers
    @property
    def heartbeat_interval_s(self) -> float:
        """Seconds between heartbeats: a third of :attr:`txn_timeout_s`."""
        return self.txn_timeout_s / 3

    @contextmanager
    def transaction(
        self,
        *,
        user: str | None = None,
        host: str | None = None,
        txn_type: int | None = None,
        heartbeat: bool = True,
    ) -> Iterator[Transaction]:
        """Open a txn, heartbeat it every :attr:`heartbeat_interval_s` from a daemon thread (own
        connection), commit it when the block ends normally and abort it when the block raises
        (the block's exception propagates; a failing abort is only logged). Yields a
        :class:`Transaction`. Commit errors (TxnAbortedException after a timeout ...) pass through.
        """
        txn_id = self.open_txn(user=user, host=host, txn_type=txn_type)
        hb = Heartbeater(self, self.heartbeat_interval_s, txn_id=txn_id) if heartbeat else None
        tx = Transaction(self, txn_id, hb)
        try:
            yield tx
        except BaseException:
            tx._end()
            if tx.state == "open":
                tx.state = "aborted"
                try:
                    self.abort_txn(txn_id)
                except Exception as e:
                    log.warning("could not abort txn %s: %s", txn_id, getattr(e, "message", e))
            raise
        else:
            if tx.state == "open":
                tx.commit()
        finally:
            tx._end()

    @contextmanager
    def locked(
        self, components: Sequence[LockComponent], txn_id: int | None = None, timeout_s: float = 60.0
    ) -> Iterator[LockResponse]:
        """Hold locks for the block: :meth:`lock` (waiting up to ``timeout_s``), a heartbeat thread
        (the lock's, or the txn's when ``txn_id`` is given), and at the end :meth:`unlock` for
        txn-less locks (a txn's locks are released when the txn commits or aborts). Yields the
        ACQUIRED LockResponse. An unlock failure is raised only when the block itself succeeded.
        """
        resp = self.lock(components, txn_id, wait=True, timeout_s=timeout_s)
        hb = Heartbeater(
            self,
            self.heartbeat_interval_s,
            txn_id=txn_id,
            lock_id=resp.lockid if txn_id is None else None,
        )
        ok = False
        try:
            yield resp
            ok = True
        finally:
            hb.stop()
            if txn_id is None:
                try:
                    self.unlock(resp.lockid)
                except Exception as e:
                    if ok:
                        raise
                    log.warning("could not unlock %s: %s", resp.lockid, getattr(e, "message", e))


class _NotSent(Exception):
    """A call that failed before its request was sent (no connection): safe to retry."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "hivemesh"
