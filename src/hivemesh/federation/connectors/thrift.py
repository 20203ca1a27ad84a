"""A member metastore reached over Thrift (any Hive 2.x/3.x/4.x metastore, Java or hivemesh).

:class:`ThriftCatalog` opens connections; :class:`Connection` is one Thrift client on one socket
(not thread-safe: the proxy keeps one per client connection and member, see
:mod:`hivemesh.federation.members`). Both implement the protocols of
:mod:`hivemesh.federation.connectors.base`. An optional SSH tunnel carries the TCP connections.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
from collections.abc import Sequence
from io import BytesIO
from typing import Any

from hive_metastore import ThriftHiveMetastore
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TSocket, TTransport
from thrift.transport.TTransport import TTransportException

from hivemesh.client.metastore import TRANSPORT_ERRORS, open_transport, parse_uris
from hivemesh.kerberos import KerberosInitiator

log = logging.getLogger(__name__)

READ_BUFFER = 64 * 1024  # bytes per socket read: a 1,000-partition answer is ~0.7 MB


class _Skip:
    """Decoding target with no fields: the C decoder skips every field (fast, nothing built)."""

    thrift_spec = ()

    def __init__(self, **_: Any) -> None:
        pass


class _Recorder(TTransport.TTransportBase, TTransport.CReadableTransport):  # type: ignore[misc]  # thrift ships no type hints
    """A readable transport over a socket that keeps every byte it received, so the C decoder can
    skip over one message in a single pass and the bytes it consumed can be relayed as they are."""

    def __init__(self, sock: socket.socket, initial: bytes):
        self.sock = sock
        self.data = bytearray(initial)
        self.end = len(initial)  # bytes of ``data`` handed to the decoder so far
        self.buf = BytesIO(initial)

    @property
    def cstringio_buf(self) -> BytesIO:
        """The buffer the C decoder reads from."""
        return self.buf

    def cstringio_refill(self, partialread: bytes, reqlen: int) -> BytesIO:
        """A new buffer: ``partialread`` and at least ``reqlen`` bytes in all, received and recorded."""
        need = reqlen - len(partialread)
        while len(self.data) - self.end < need:
            chunk = self.sock.recv(max(READ_BUFFER, need))
            if not chunk:
                raise TTransportException(
                    TTransportException.END_OF_FILE, "the metastore closed the connection"
                )
            self.data += chunk
        fresh = bytes(self.data[self.end :])
        self.end = len(self.data)
        self.buf = BytesIO(partialread + fresh)
        return self.buf

    def read(self, sz: int) -> bytes:
        """Up to ``sz`` bytes (exactly ``sz`` unless the stream ends), recorded (pure-Python reads)."""
        ret = self.buf.read(sz)
        if len(ret) < sz:
            self.cstringio_refill(ret, sz)
            ret = self.buf.read(sz)
        return ret

    def consumed(self) -> int:
        """Bytes of ``data`` the decoder has consumed."""
        return self.end - (self.buf.getbuffer().nbytes - self.buf.tell())


def read_raw_message(transport: Any, sock: socket.socket) -> bytes:
    """Read one whole reply message from ``sock`` as bytes (what ``transport`` already buffered
    first): the C decoder skips over it in one pass, building nothing. Raises
    TTransportException at end of stream, OSError on timeout."""
    rec = _Recorder(sock, transport.cstringio_buf.read())
    proto = TBinaryProtocol.TBinaryProtocolAccelerated(rec)
    proto.readMessageBegin()
    proto._fast_decode(_Skip(), proto, [_Skip, ()])
    proto.readMessageEnd()
    end = rec.consumed()
    if end < len(rec.data):  # never in request/response, but do not lose bytes
        transport._TBufferedTransport__rbuf = BytesIO(bytes(rec.data[end:]))
    return bytes(rec.data[:end])


class Connection:
    """One open Thrift connection to a member (a :class:`hivemesh.federation.connectors.base.Connection`).
    ``call(method, args)`` sends one HMS call and returns its result (HMS exceptions raised
    unchanged; transport errors as TTransportException, OSError or EOFError)."""

    __slots__ = ("client", "endpoint", "socket", "transport", "_timeout_ms")

    def __init__(self, endpoint: str, sock: TSocket.TSocket, transport: Any, client: Any, timeout_ms: int):
        self.endpoint = endpoint
        self.socket = sock
        self.transport = transport
        self.client = client
        self._timeout_ms = timeout_ms

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """Call ``method`` with the Thrift positional ``args``; ``timeout_s`` bounds this call."""
        if timeout_s is None:
            return getattr(self.client, method)(*args)
        self.socket.setTimeout(max(1, int(timeout_s * 1000)))
        try:
            return getattr(self.client, method)(*args)
        finally:
            if self.socket.handle is not None:
                self.socket.setTimeout(self._timeout_ms)

    def relay(self, method: str, args: Any, timeout_s: float | None = None) -> bytes:
        """Send ``method`` with its decoded ``args`` struct and return the raw bytes of the reply
        message (binary protocol; header included, seqid 0), without decoding the reply."""
        if timeout_s is not None:
            self.socket.setTimeout(max(1, int(timeout_s * 1000)))
        try:
            proto = self.client._oprot
            proto.writeMessageBegin(method, TMessageType.CALL, 0)
            args.write(proto)
            proto.writeMessageEnd()
            proto.trans.flush()
            return read_raw_message(self.transport, self.socket.handle)
        finally:
            if timeout_s is not None and self.socket.handle is not None:
                self.socket.setTimeout(self._timeout_ms)

    def stale(self) -> bool:
        """True when the peer closed the connection (readable with nothing asked): reconnect
        before sending, so a write call is not lost to a metastore restart."""
        handle = self.socket.handle
        if handle is None:
            return True
        try:
            readable, _, _ = select.select([handle], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        try:
            self.transport.close()
        except Exception:
            pass


class ThriftCatalog:
    """Connections to one metastore: ``uris`` tried in order (``thrift://host:port``).

    ``connect_timeout_s`` bounds opening a connection; ``call_timeout_s`` is the socket timeout of
    calls. ``tunnel`` (an :class:`~hivemesh.federation.connectors.ssh.SshTunnel`) carries the
    connections: its ``forward(host, port)`` gives the local address to dial for a URI. ``tls``
    (a client-side ``ssl.SSLContext``) makes the connections TLS (through the tunnel too; the
    certificate's name is checked against the URI's host, not the tunnel's local address).
    ``kerberos`` (:class:`hivemesh.kerberos.KerberosInitiator`) authenticates each connection
    with SASL GSSAPI to the service principal of the URI's host.
    """

    kind = "thrift"

    def __init__(
        self,
        uris: Sequence[str],
        *,
        connect_timeout_s: float = 2.0,
        call_timeout_s: float = 600.0,
        framed: bool = False,
        compact: bool = False,
        tunnel: Any = None,
        tls: ssl.SSLContext | None = None,
        kerberos: KerberosInitiator | None = None,
    ):
        self.uris = list(uris)
        self.endpoints = [ep for uri in self.uris for ep in parse_uris(uri)]
        if not self.endpoints:
            raise ValueError("a Thrift member needs at least one thrift://host:port URI")
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.framed = framed
        self.compact = compact
        self.tunnel = tunnel
        self.tls = tls
        self.kerberos = kerberos

    def describe(self) -> str:
        """The URIs (and the SSH route), for messages."""
        secured = [
            w for w, on in (("TLS", self.tls is not None), ("Kerberos", self.kerberos is not None)) if on
        ]
        uris = ",".join(self.uris) + (f" ({', '.join(secured)})" if secured else "")
        return f"{uris} via ssh {self.tunnel.route}" if self.tunnel is not None else uris

    @property
    def sessions(self) -> bool:
        """True: each client session keeps its own connections (Thrift clients are not thread-safe)."""
        return True

    @property
    def relays(self) -> bool:
        """True when replies can be relayed as bytes: unframed binary Thrift."""
        return not self.framed and not self.compact and self.kerberos is None

    def connect(self) -> Connection:
        """Open a connection to the first endpoint that answers. Raises the last transport error."""
        last: BaseException | None = None
        for host, port in self.endpoints:
            try:
                dial_host, dial_port = self.tunnel.forward(host, port) if self.tunnel else (host, port)
                sock, transport = open_transport(
                    dial_host,
                    dial_port,
                    self.connect_timeout_s,
                    tls=self.tls,
                    kerberos=self.kerberos,
                    framed=self.framed,
                    server_hostname=host,
                    read_buffer=READ_BUFFER,
                )
            except TRANSPORT_ERRORS as e:
                last = e
                continue
            except ConnectionError as e:  # an SSH tunnel that cannot be opened
                last = e
                continue
            handle = sock.handle
            if handle is not None:
                handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            timeout_ms = int(self.call_timeout_s * 1000)
            sock.setTimeout(timeout_ms)
            protocol = (
                TCompactProtocol.TCompactProtocolAccelerated(transport)
                if self.compact
                else TBinaryProtocol.TBinaryProtocolAccelerated(transport)
            )
            return Connection(
                f"{host}:{port}", sock, transport, ThriftHiveMetastore.Client(protocol), timeout_ms
            )
        assert last is not None
        raise last

    def call(self, method: str, args: Sequence[Any], timeout_s: float | None = None) -> Any:
        """One call over a new connection, closed after it (health checks). Raises what
        :meth:`connect` and :meth:`Connection.call` raise."""
        conn = self.connect()
        try:
            return conn.call(method, args, timeout_s)
        finally:
            conn.close()

    def ping(self, timeout_s: float) -> None:
        """Open a fresh connection and ask ``getStatus`` (fb303); a metastore that answers with an
        unknown-method error is alive too. Raises the transport error otherwise."""
        conn = self.connect()
        try:
            try:
                conn.call("getStatus", (), timeout_s)
            except TApplicationException:
                pass
        finally:
            conn.close()

    def close(self) -> None:
        """Close the SSH tunnel, if any (connections belong to client sessions)."""
        if self.tunnel is not None:
            self.tunnel.close()
