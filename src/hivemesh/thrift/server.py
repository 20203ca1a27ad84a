"""The HMS Thrift server: a thread per connection, unframed binary protocol by default.

Hive clients keep pooled connections open for hours, so a small fixed worker pool (Thrift's
``TThreadPoolServer`` defaults to 10) makes the 11th client hang. This server runs one daemon thread
per connection with no small cap. A bad connection (random bytes, truncated message, wrong
protocol) only ends that connection. The per-connection state (the user given by ``set_ugi``) is
kept in :data:`connection` (thread-local; one thread per connection).
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.transport import TSocket, TTransport

from hivemesh.thrift.processor import HMSProcessor

log = logging.getLogger("hivemesh.thrift.server")


@dataclass
class ConnectionState:
    """What the server knows about the connection the current thread serves."""

    peer: str = ""
    user: str | None = None
    groups: list[str] = field(default_factory=list)


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
        proto = super().getProtocol(trans)
        proto.strictRead = True
        return proto


class ThriftServer:
    """Serves an :class:`HMSProcessor` on a TCP port.

    ``port=0`` picks a free port (read ``port`` after :meth:`listen`). ``max_message_bytes`` caps
    strings and containers in a message (Java HMS default: 100 MB).
    """

    def __init__(
        self,
        processor: HMSProcessor,
        host: str = "127.0.0.1",
        port: int = 9083,
        framed: bool = False,
        compact: bool = False,
        max_message_bytes: int = 100 * 1024 * 1024,
    ):
        self.processor = processor
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
        self._sock: socket.socket | None = None
        self._stopping = threading.Event()
        self._clients: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.active_connections = 0

    def listen(self) -> None:
        """Bind and listen; afterwards ``port`` is the real port."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(1024)
        self.port = sock.getsockname()[1]
        self._sock = sock

    def serve_forever(self) -> None:
        """Accept connections until :meth:`stop`; one daemon thread per connection."""
        if self._sock is None:
            self.listen()
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                client, addr = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    break
                log.exception("accept failed")
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=self._serve_client, args=(client, addr), daemon=True)
            t.name = f"hms-conn-{addr[0]}:{addr[1]}"
            t.start()

    def _serve_client(self, client: socket.socket, addr: tuple[Any, ...]) -> None:
        with self._lock:
            self._clients.add(client)
            self.active_connections += 1
        _local.state = ConnectionState(peer=f"{addr[0]}:{addr[1]}")
        tsock = TSocket.TSocket()
        tsock.setHandle(client)
        trans: Any = (
            TTransport.TFramedTransport(tsock) if self.framed else TTransport.TBufferedTransport(tsock)
        )
        iprot = self._proto.getProtocol(trans)
        oprot = self._proto.getProtocol(trans)
        try:
            while not self._stopping.is_set():
                self.processor.process(iprot, oprot)
        except TTransport.TTransportException:
            pass  # client closed the connection
        except Exception as e:  # bad bytes, protocol errors: end this connection only
            log.warning("closing connection from %s: %s: %s", _local.state.peer, type(e).__name__, e)
        finally:
            _local.state = None
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
        if self._sock is not None:
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
