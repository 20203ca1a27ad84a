"""The test relay (tests/support/relay.py): bytes arrive intact and in order through a delay, a
black-holed direction delivers nothing while the other still does, a cut closes connections and
refuses new ones, heal undoes it. No assertion on how long anything took."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support.relay import Relay, RelayProcess

GREETING = b"hello\n"


class EchoServer:
    """Sends GREETING on each connection, then echoes every byte back; keeps what it received."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self.got = threading.Condition()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.sendall(GREETING)
            while data := conn.recv(65536):
                with self.got:
                    self.received += data
                    self.got.notify_all()
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    def wait_received(self, n: int, timeout_s: float = 10.0) -> bytes:
        with self.got:
            self.got.wait_for(lambda: len(self.received) >= n, timeout_s)
            return bytes(self.received)

    def close(self) -> None:
        self.sock.close()
        for c in self._conns:
            c.close()


@pytest.fixture()
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture()
def relay(echo: EchoServer) -> Iterator[Relay]:
    with Relay(("127.0.0.1", echo.port)) as r:
        yield r


def connect(relay: Relay, timeout_s: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", relay.port), timeout=timeout_s)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        data = s.recv(n - len(buf))
        assert data, f"connection closed after {len(buf)} of {n} bytes"
        buf += data
    return bytes(buf)


def test_bytes_arrive_intact_and_in_order_through_a_delay_changed_midway(relay: Relay) -> None:
    relay.delay(50)
    messages = [f"message {i:04d} ".encode() * (1 + i % 7) for i in range(300)]
    with connect(relay) as s:
        assert recv_exactly(s, len(GREETING)) == GREETING
        sent = bytearray()
        for i, m in enumerate(messages):  # pipelined: no waiting for answers
            if i == 150:
                relay.delay(0, "c2s")  # later chunks are due earlier: they must not overtake
            s.sendall(m)
            sent += m
        assert recv_exactly(s, len(sent)) == bytes(sent)


def test_a_large_transfer_is_relayed_whole(relay: Relay) -> None:
    relay.delay(5)
    payload = bytes(range(256)) * 8192  # 2 MiB, many chunks in flight at once
    with connect(relay) as s:
        recv_exactly(s, len(GREETING))
        sender = threading.Thread(target=s.sendall, args=(payload,))
        sender.start()
        got = recv_exactly(s, len(payload))
        sender.join()
    assert got == payload


def test_a_black_holed_direction_delivers_nothing_while_the_other_does(
    relay: Relay, echo: EchoServer
) -> None:
    with connect(relay, timeout_s=0.5) as s:
        assert recv_exactly(s, len(GREETING)) == GREETING
        relay.blackhole("s2c")
        s.sendall(b"ping")
        assert echo.wait_received(4) == b"ping"  # client -> server still delivers
        with pytest.raises(TimeoutError):  # silence: no answer, no FIN, no RST
            s.recv(100)

    relay.heal()
    relay.blackhole("c2s")
    with connect(relay, timeout_s=0.5) as s:
        assert recv_exactly(s, len(GREETING)) == GREETING  # server -> client still delivers
        s.sendall(b"lost")
        with pytest.raises(TimeoutError):  # the server got nothing to echo
            s.recv(100)
    assert echo.wait_received(5, timeout_s=0.3) == b"ping"


def test_heal_closes_connections_that_lost_bytes_and_relays_new_ones(relay: Relay) -> None:
    s = connect(relay, timeout_s=5)
    recv_exactly(s, len(GREETING))
    relay.blackhole()
    s.sendall(b"gone")
    with pytest.raises(TimeoutError):
        s.settimeout(0.3)
        s.recv(100)
    relay.heal()
    s.settimeout(5)
    try:
        assert s.recv(100) == b""  # closed: its stream lost bytes and cannot resume
    except ConnectionResetError:
        pass
    s.close()
    with connect(relay) as s2:
        recv_exactly(s2, len(GREETING))
        s2.sendall(b"back")
        assert recv_exactly(s2, 4) == b"back"


def test_cut_closes_connections_and_refuses_new_ones_until_healed(relay: Relay) -> None:
    with connect(relay) as s:
        recv_exactly(s, len(GREETING))
        relay.cut()
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
    assert relay.connections() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", relay.port), timeout=5).close()
    relay.heal()
    with connect(relay) as s:
        assert recv_exactly(s, len(GREETING)) == GREETING
        s.sendall(b"again")
        assert recv_exactly(s, 5) == b"again"


def test_relay_process_relays_and_takes_commands(echo: EchoServer) -> None:
    with RelayProcess([f"127.0.0.1:{echo.port}"], delay_ms=1) as rp:
        host, port = rp.addresses[0].split(":")
        rp.command("delay 10 s2c")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            assert recv_exactly(s, len(GREETING)) == GREETING
            s.sendall(b"through")
            assert recv_exactly(s, 7) == b"through"
        with pytest.raises(RuntimeError, match="error"):
            rp.command("delay x")
        rp.command("cut")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5).close()
