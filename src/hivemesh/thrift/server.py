"""The HMS Thrift server: a thread per connection, unframed binary protocol by default.

Hive clients keep pooled connections open for hours, so a small fixed worker pool (Thrift's
``TThreadPoolServer`` defaults to 10) makes the 11th client hang. This server runs one daemon thread
per connection with no small cap. A bad connection (random bytes, truncated message, wrong
protocol) only ends that connection. The per-connection state (the user given by ``set_ugi``) is
kept in :data:`connection` (thread-local; one thread per connection).
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TTransport
from thrift.transport.TTransport import TTransportException

from hivemesh.kerberos import KerberosAcceptor, SaslError, short_name
from hivemesh.thrift.processor import HMSProcessor
from hivemesh.tls import HANDSHAKE_TIMEOUT_S

log = logging.getLogger("hivemesh.thrift.server")


@dataclass
class ConnectionState:
    """What the server knows about the connection the current thread serves."""

    peer: str = ""
    user: str | None = None
    principal: str | None = None  # the Kerberos principal the connection authenticated as
    may_impersonate: bool = False  # a Kerberos proxy user: its set_ugi and request users are trusted
    groups: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)  # per-connection state of the handler
    on_close: list[Any] = field(default_factory=list)  # callables run when the connection ends

    def close(self) -> None:
        """Run the ``on_close`` callbacks (errors are logged, not raised)."""
        callbacks, self.on_close = self.on_close, []
        for cb in callbacks:
            try:
                cb()
            except Exception as e:
                log.warning("connection close hook failed: %s", e)


_local = threading.local()


def connection() -> ConnectionState:
    """The state of the connection served by the calling thread (a fresh one outside a server)."""
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = ConnectionState()
    return state


class _StrictBinaryFactory(TBinaryProtocol.TBinaryProtocolAcceleratedFactory):
    """Accelerated binary protocol that rejects messages without a version header at once.

    Hive's Java clients always write strict headers; strict reading makes a framed client talking
    to an unframed server fail on its first bytes instead of hanging on a bogus length.
    """

    def getProtocol(self, trans: Any) -> Any:  # noqa: N802 - Thrift API name
        """A strict accelerated binary protocol over ``trans``."""
        proto = super().getProtocol(trans)
        proto.strictRead = True
        return proto


_CHUNK = 1024 * 1024  # largest single socket read


class _SocketTransport(TTransport.TTransportBase, TTransport.CReadableTransport):
    """Buffered (unframed) transport over a connected socket, readable by the C codecs.

    Unlike Thrift's ``TBufferedTransport`` over ``TSocket``, a long read (a 50 MB string) is
    accumulated in a ``bytearray`` instead of by repeated ``bytes +=`` (quadratic: ~10 s of CPU for
    100 MB, slowing every other connection). Memory is only taken as bytes arrive, never for a
    length a client merely claims. Socket errors become ``TTransportException``.

    While :meth:`hold` is in effect, :meth:`flush` keeps the reply buffered; :meth:`release` sends
    it. The server holds each call's reply until the call's metrics and audit line are recorded, so
    a client that has its answer also finds its call counted on ``/metrics``.
    """

    def __init__(self, sock: socket.socket, rbuf_size: int = 64 * 1024):
        self._sock = sock
        self._rbuf = BytesIO(b"")
        self._wbuf = BytesIO()
        self._rbuf_size = rbuf_size
        self._held = False

    def hold(self) -> None:
        """Keep flushed bytes buffered until :meth:`release`."""
        self._held = True

    def release(self) -> None:
        """End :meth:`hold` and send whatever was flushed meanwhile."""
        self._held = False
        if self._wbuf.tell():
            self.flush()

    def isOpen(self) -> bool:  # noqa: N802 - Thrift API name
        """Thrift transport API: True until closed."""
        return self._sock.fileno() >= 0

    def close(self) -> None:
        """Thrift transport API: close the socket."""
        self._sock.close()

    def _recv_some(self, size: int) -> bytes:
        try:
            data = self._sock.recv(size)
        except OSError as e:
            raise TTransportException(TTransportException.UNKNOWN, f"socket read failed: {e}", inner=e) from e
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "connection closed by the client")
        return data

    def _recv_exact(self, size: int) -> bytes:
        # grows as bytes arrive (a bare length claim costs nothing) in amortised linear time
        buf = bytearray()
        while len(buf) < size:
            try:
                chunk = self._sock.recv(min(size - len(buf), _CHUNK))
            except OSError as e:
                raise TTransportException(
                    TTransportException.UNKNOWN, f"socket read failed: {e}", inner=e
                ) from e
            if not chunk:
                raise TTransportException(
                    TTransportException.END_OF_FILE,
                    "connection closed by the client in the middle of a message",
                )
            buf += chunk
        return bytes(buf)

    def read(self, sz: int) -> bytes:
        """Thrift transport API: up to ``sz`` bytes (blocks for at least one)."""
        ret = self._rbuf.read(sz)
        if ret:
            return ret
        self._rbuf = BytesIO(self._recv_some(max(sz, self._rbuf_size)))
        return self._rbuf.read(sz)

    def readAll(self, sz: int) -> bytes:  # noqa: N802 - Thrift API name
        """Thrift transport API: exactly ``sz`` bytes; TTransportException at end of stream."""
        ret = self._rbuf.read(sz)
        if len(ret) < sz:
            ret += self._recv_exact(sz - len(ret))
        return ret

    def write(self, buf: bytes) -> None:
        """Thrift transport API: buffer bytes until :meth:`flush`."""
        self._wbuf.write(buf)

    def flush(self) -> None:
        """Thrift transport API: send the buffered bytes (kept until :meth:`release` while held)."""
        if self._held:
            return
        out = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        try:
            self._sock.sendall(out)
        except OSError as e:
            raise TTransportException(
                TTransportException.UNKNOWN, f"socket write failed: {e}", inner=e
            ) from e

    # CReadableTransport: the C codecs read from this buffer and ask for a refill when it runs dry
    @property
    def cstringio_buf(self) -> BytesIO:
        """The read buffer the C codecs decode from."""
        return self._rbuf

    def cstringio_refill(self, partialread: bytes, reqlen: int) -> BytesIO:
        """Refill the read buffer with at least ``reqlen`` bytes for the C codecs."""
        data = partialread
        if len(data) < reqlen:
            data += self._recv_some(min(max(reqlen - len(data), self._rbuf_size), _CHUNK))
        if len(data) < reqlen:
            data += self._recv_exact(reqlen - len(data))
        self._rbuf = BytesIO(data)
        return self._rbuf


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port) and listening (backlog 1024).
    Raises OSError (address in use, no permission)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


class ThriftServer:
    """Serves an :class:`HMSProcessor` on a TCP port.

    ``port=0`` picks a free port (read ``port`` after :meth:`listen`). ``max_message_bytes`` caps
    strings and containers in a message (Java HMS default: 100 MB). ``tls``: a server-side
    ``ssl.SSLContext`` (:func:`hivemesh.tls.server_context`) makes every connection TLS, as
    ``hive.metastore.use.SSL`` does; the handshake runs on the connection's own thread and a client
    that does not finish it within :data:`hivemesh.tls.HANDSHAKE_TIMEOUT_S` is dropped.
    ``kerberos`` (:class:`hivemesh.kerberos.KerberosAcceptor`) requires every client to
    authenticate with SASL GSSAPI first (``hive.metastore.sasl.enabled``; inside TLS when both are
    on); the principal becomes the connection's user, and messages then travel in SASL frames.
    """

    def __init__(
        self,
        processor: HMSProcessor,
        host: str = "127.0.0.1",
        port: int = 9083,
        framed: bool = False,
        compact: bool = False,
        max_message_bytes: int = 100 * 1024 * 1024,
        tls: ssl.SSLContext | None = None,
        kerberos: KerberosAcceptor | None = None,
    ):
        self.processor = processor
        self.tls = tls
        self.kerberos = kerberos
        self.host = host
        self.port = port
        self.framed = framed
        self.compact = compact
        if compact:
            self._proto = TCompactProtocol.TCompactProtocolAcceleratedFactory(
                string_length_limit=max_message_bytes, container_length_limit=max_message_bytes
            )
        else:
            self._proto = _StrictBinaryFactory(
                string_length_limit=max_message_bytes, container_length_limit=max_message_bytes
            )
        self.max_message_bytes = max_message_bytes
        self._sock: socket.socket | None = None
        self._shared = False  # the listening socket came from the caller (shared by workers)
        self._wake: tuple[int, int] | None = None  # a pipe waking a shared socket's accept loop
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.active_connections = 0

    def listen(self, sock: socket.socket | None = None) -> None:
        """Bind and listen, or serve ``sock`` (a listening socket made by :func:`listen_socket`,
        shared by several worker processes); afterwards ``port`` is the real port."""
        self._shared = sock is not None
        sock = sock if sock is not None else listen_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        self._sock = sock

    def serve_forever(self) -> None:
        """Accept connections until :meth:`stop`; one daemon thread per connection.

        A socket of its own is woken by shutting it down. One shared with other processes
        (``hivemesh metastore --workers``) must not be: that would stop the siblings' accepts
        too (``EINVAL``); it is waited on with a wake-up pipe and accepted from without blocking."""
        if self._sock is None:
            self.listen()
        assert self._sock is not None
        poller = None
        if self._shared:
            self._wake = os.pipe()
            poller = select.poll()
            poller.register(self._sock.fileno(), select.POLLIN)
            poller.register(self._wake[0], select.POLLIN)
            self._sock.setblocking(False)
        try:
            self._accept_loop(poller)
        finally:
            with self._lock:  # not while stop() writes to it
                wake, self._wake = self._wake, None
                for fd in wake or ():
                    os.close(fd)

    def _accept_loop(self, poller: select.poll | None) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                if poller is not None:
                    poller.poll()
                    if self._stopping.is_set():
                        break
                client, addr = self._sock.accept()
            except BlockingIOError:  # a sibling process took the connection
                continue
            except OSError as e:
                if self._stopping.is_set():
                    break
                # out of file descriptors or memory: wait for connections to close instead of
                # spinning on accept (the pending client stays in the listen backlog meanwhile)
                log.error("accept failed: %s", e)
                time.sleep(
                    0.5 if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM) else 0.05
                )
                continue
            try:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # dead peers (a crashed client host) do not hold a thread forever
                client.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                t = threading.Thread(target=self._serve_client, args=(client, addr), daemon=True)
                t.name = f"hms-conn-{addr[0]}:{addr[1]}"
                t.start()
            except Exception as e:  # e.g. "can't start new thread": drop this client, keep accepting
                log.error("cannot serve connection from %s:%s: %s", addr[0], addr[1], e)
                try:
                    client.close()
                except OSError:
                    pass
                time.sleep(0.05)

    def _handshake(self, client: socket.socket, addr: tuple[Any, ...]) -> socket.socket | None:
        """``client`` wrapped in TLS (None, closed, when the handshake fails: logged with the peer).
        A client sending a plaintext Thrift message instead is answered, in plaintext, with a
        TApplicationException (UNSUPPORTED_CLIENT_TYPE) saying :data:`TLS_REQUIRED`."""
        assert self.tls is not None
        try:
            client.settimeout(HANDSHAKE_TIMEOUT_S)
            if _refused_plaintext(client):
                log.warning("a plaintext Thrift client at %s:%s on the TLS port: told so", addr[0], addr[1])
                client.close()
                return None
            wrapped = self.tls.wrap_socket(client, server_side=True)
            wrapped.settimeout(None)
            return wrapped
        except (ssl.SSLError, OSError) as e:
            # a plaintext Thrift client, a client not trusting our certificate, a port scanner
            reason = getattr(e, "reason", None) or e
            log.warning("TLS handshake with %s:%s failed: %s", addr[0], addr[1], reason)
            try:
                client.close()
            except OSError:
                pass
            return None

    def _authenticate(self, client: socket.socket, addr: tuple[Any, ...]) -> str | None:
        """The client's Kerberos principal (None, connection closed, when it does not authenticate)."""
        assert self.kerberos is not None
        try:
            client.settimeout(HANDSHAKE_TIMEOUT_S)
            principal = self.kerberos.negotiate(client)
            client.settimeout(None)
            return principal
        except (SaslError, OSError) as e:
            log.warning("Kerberos authentication of %s:%s failed: %s", addr[0], addr[1], e)
            try:
                client.close()
            except OSError:
                pass
            return None

    def _serve_client(self, client: socket.socket, addr: tuple[Any, ...]) -> None:
        if self.tls is not None:
            wrapped = self._handshake(client, addr)
            if wrapped is None:
                return
            client = wrapped
        principal = None
        if self.kerberos is not None:
            principal = self._authenticate(client, addr)
            if principal is None:
                return
        with self._lock:
            self._clients.add(client)
            self.active_connections += 1
        _local.state = ConnectionState(peer=f"{addr[0]}:{addr[1]}")
        if principal is not None:
            _local.state.principal = principal
            _local.state.user = short_name(principal)
            _local.state.may_impersonate = _local.state.user in self.kerberos.proxy_users  # type: ignore[union-attr]
        sock = _SocketTransport(client)
        trans: Any = sock
        if self.framed or principal is not None:  # SASL frames are framed-transport frames
            frame_limit = min(self.max_message_bytes, TTransport.HARD_MAX_FRAME_SIZE)
            trans = TTransport.TFramedTransport(trans, max_frame_size=frame_limit)
        iprot = self._proto.getProtocol(trans)
        oprot = self._proto.getProtocol(trans)
        try:
            while not self._stopping.is_set():
                sock.hold()
                try:
                    self.processor.process(iprot, oprot)
                finally:
                    sock.release()  # the reply goes out after the call's metrics are recorded
        except TTransport.TTransportException:
            pass  # client closed the connection
        except Exception as e:  # bad bytes, protocol errors: end this connection only
            log.warning("closing connection from %s: %s: %s", _local.state.peer, type(e).__name__, e)
        finally:
            state, _local.state = _local.state, None
            if state is not None:
                state.close()
            with self._lock:
                self._clients.discard(client)
                self.active_connections -= 1
            try:
                client.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Stop accepting and close every open connection (in-flight calls finish or fail)."""
        self._stopping.set()
        with self._lock:
            if self._wake is not None:
                os.write(self._wake[1], b"x")
        if self._sock is not None:
            if not self._shared:  # wakes the accept; on a shared socket it would stop the siblings'
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._sock.close()
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


TLS_REQUIRED = "the server requires TLS (hive.metastore.use.SSL): connect with TLS"
"""What a plaintext Thrift client is told on a TLS port (a TApplicationException's message)."""

_TLS_HANDSHAKE = 0x16  # the content type of a TLS record opening a handshake (ClientHello)


def _thrift_head(head: bytes) -> tuple[bool, bool] | None:
    """``(framed, compact)`` when ``head`` opens a Thrift message in a protocol this server
    speaks (binary with a version header, or compact; framed or not), else None."""

    def opens(b: bytes) -> bool | None:
        """True: a compact-protocol message starts at ``b``; False: a binary one; None: neither."""
        if b[:2] == b"\x80\x01":
            return False
        if b[:1] == b"\x82":
            return True
        return None

    unframed = opens(head)
    if unframed is not None:
        return False, unframed
    framed = opens(head[4:])
    return (True, framed) if framed is not None else None


def _refused_plaintext(client: socket.socket) -> bool:
    """On a TLS port: when the client's first bytes are a plaintext Thrift message, answer it with
    :data:`TLS_REQUIRED` (in its own protocol and framing, so every Thrift client shows the
    reason) and return True; False for anything else (a TLS ClientHello goes on to the handshake).
    Reads nothing but a plaintext message's header. Raises OSError (timeout, reset)."""
    deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
    while True:
        head = client.recv(6, socket.MSG_PEEK)  # waits for the first bytes (the socket's timeout)
        if len(head) >= 6 or not head or head[0] == _TLS_HANDSHAKE or time.monotonic() >= deadline:
            break
        time.sleep(0.01)  # the rest of a message header is on its way
    kind = _thrift_head(head)
    if kind is None:
        return False
    framed, compact = kind
    trans: Any = _SocketTransport(client)
    if framed:
        trans = TTransport.TFramedTransport(trans)
    proto_cls = TCompactProtocol.TCompactProtocol if compact else TBinaryProtocol.TBinaryProtocol
    try:
        name, _type, seqid = proto_cls(trans).readMessageBegin()
    except (TProtocolException, TTransport.TTransportException, EOFError):
        return False
    out = proto_cls(trans)
    out.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
    TApplicationException(TApplicationException.UNSUPPORTED_CLIENT_TYPE, TLS_REQUIRED).write(out)
    out.writeMessageEnd()
    try:
        trans.flush()
    except TTransport.TTransportException:
        pass
    return True


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the hot path of a long-running server.

    Everything loaded at start-up (the large generated Thrift modules, SQLAlchemy) is moved to the
    permanent generation so full collections do not rescan it, and collections run less often:
    replies of thousands of partitions allocate many short-lived objects that are freed by
    reference counting anyway. Measured here: get_partitions of 1,000 went from 55-160 ms to 35-40 ms.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
