"""A TCP relay for tests and benchmarks: a WAN link between a client and a server on one machine.

:class:`Relay` listens on a loopback port and forwards every connection to a target
``host:port``. Each direction of the link, ``"c2s"`` (client to server) and ``"s2c"`` (server to
client), can be changed while connections are open:

- :meth:`Relay.delay`: every chunk read from one side is delivered to the other ``ms``
  milliseconds later. Chunks are scheduled, not serialised: a writer thread per connection and
  direction sends each chunk at its due time, in the order read, so a delay adds latency without
  cutting throughput to one chunk per delay. A delay changed at run time applies to the chunks
  read after the change (a chunk never overtakes an earlier one).
- :meth:`Relay.blackhole`: bytes in that direction are read and discarded, including chunks
  waiting for their due time; the peer sees silence, no RST, no FIN. New connections are still
  accepted (and connected to the target). Bytes discarded are gone, so :meth:`Relay.heal` closes
  the connections that lost any (their streams could not be resumed intact).
- :meth:`Relay.cut`: the link drops: open connections are closed and new ones refused (the
  listening socket is closed, so a connect gets ECONNREFUSED; :meth:`Relay.heal` listens again on
  the same port).
- :meth:`Relay.heal`: no delay, no black hole, listening.

Thread-based, standard library only. :meth:`Relay.stop` (or ``with``) closes everything.

``python -m tests.support.relay --target HOST:PORT [--target ...] [--delay-ms N]`` runs relays in
a process of their own (see :class:`RelayProcess`): it prints ``relay <listen port> <target>`` per
target, then ``ready``, and takes commands on stdin, one a line, each answered with ``ok`` or
``error <reason>``: ``delay MS [c2s|s2c|both]``, ``blackhole [c2s|s2c|both]``, ``cut``, ``heal``,
``stop``. A benchmark uses that to keep the relays' threads off its own GIL.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

__all__ = ["DIRECTIONS", "Direction", "Relay", "RelayProcess"]

Direction = Literal["c2s", "s2c", "both"]
DIRECTIONS: tuple[str, str] = ("c2s", "s2c")
"""The two directions of a link: client to server, server to client."""

_CHUNK = 65536
_EOF = object()
"""Queued after the last chunk of a direction: the reader saw the end of its stream."""


def _directions(direction: str) -> tuple[str, ...]:
    if direction == "both":
        return DIRECTIONS
    if direction in DIRECTIONS:
        return (direction,)
    raise ValueError(f"direction must be 'c2s', 's2c' or 'both' (got {direction!r})")


def _parse_target(target: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(target, tuple):
        return target[0], int(target[1])
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"target must be host:port (got {target!r})")
    return host.strip("[]"), int(port)


class _Pipe:
    """One direction of one connection: a reader thread stamps each chunk with its due time, a
    writer thread delivers the chunks in order at their due times."""

    def __init__(self, conn: _Connection, direction: str, src: socket.socket, dst: socket.socket) -> None:
        self.conn = conn
        self.direction = direction
        self.src = src
        self.dst = dst
        self.queue: collections.deque[tuple[float, object]] = collections.deque()
        self.ready = threading.Condition()

    def start(self) -> list[threading.Thread]:
        name = f"relay-{self.conn.relay.port}-{self.direction}"
        threads = [
            threading.Thread(target=self.read, name=f"{name}-read", daemon=True),
            threading.Thread(target=self.write, name=f"{name}-write", daemon=True),
        ]
        for t in threads:
            t.start()
        return threads

    def push(self, item: object) -> None:
        due = time.monotonic() + self.conn.relay.delay_ms(self.direction) / 1000
        with self.ready:
            self.queue.append((due, item))
            self.ready.notify()

    def read(self) -> None:
        relay = self.conn.relay
        while not self.conn.closed.is_set():
            try:
                data = self.src.recv(_CHUNK)
            except OSError:
                self.conn.close()
                return
            if not data:
                if relay.blackholed(self.direction):
                    self.conn.lost_bytes = True  # the end of stream is swallowed too: silence
                else:
                    self.push(_EOF)
                return
            if relay.blackholed(self.direction):
                self.conn.lost_bytes = True
                continue
            self.push(data)

    def _next(self) -> tuple[float, object] | None:
        with self.ready:
            while not self.queue:
                if self.conn.closed.is_set():
                    return None
                self.ready.wait(0.2)
            return self.queue.popleft()

    def write(self) -> None:
        relay = self.conn.relay
        while True:
            item = self._next()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0 and self.conn.closed.wait(wait):
                return
            if data is _EOF and not relay.blackholed(self.direction):
                with contextlib.suppress(OSError):
                    self.dst.shutdown(socket.SHUT_WR)  # half-close, as the source did
                self.conn.ended(self.direction)
                return
            if relay.blackholed(self.direction):
                self.conn.lost_bytes = True
                continue
            try:
                assert isinstance(data, bytes)
                self.dst.sendall(data)
            except OSError:
                self.conn.close()
                return


class _Connection:
    """A client connection and its connection to the target."""

    def __init__(self, relay: Relay, client: socket.socket, server: socket.socket) -> None:
        self.relay = relay
        self.client = client
        self.server = server
        self.closed = threading.Event()
        self.lost_bytes = False
        self._ended: set[str] = set()
        self._lock = threading.Lock()
        self.pipes = [_Pipe(self, "c2s", client, server), _Pipe(self, "s2c", server, client)]

    def start(self) -> None:
        for p in self.pipes:
            p.start()

    def ended(self, direction: str) -> None:
        """``direction`` delivered its end of stream; both ended: the connection is done."""
        with self._lock:
            self._ended.add(direction)
            done = len(self._ended) == 2
        if done:
            self.close()

    def close(self) -> None:
        """Close both sockets (idempotent); shutting them down first wakes the blocked readers."""
        with self._lock:
            if self.closed.is_set():
                return
            self.closed.set()
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for p in self.pipes:
            with p.ready:
                p.ready.notify_all()
        self.relay._forget(self)


class Relay:
    """Relays connections from ``host:port`` (0: a free port, see :attr:`port`) to ``target``
    (``"host:port"`` or a tuple), with per-direction delay, black hole and cut (see the module
    doc). ``connect_timeout_s``: how long a connection to the target may take."""

    def __init__(
        self,
        target: str | tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.target = _parse_target(target)
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        self._delay_ms = {d: 0.0 for d in DIRECTIONS}
        self._blackholed = {d: False for d in DIRECTIONS}
        self._cut = False
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._listener: socket.socket | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.accepted = 0
        """Connections accepted so far."""

    # ------------------------------------------------------------------ life cycle
    def start(self) -> Relay:
        """Listen and start relaying in a background thread; :attr:`port` is then the port."""
        self._listen()
        self._thread = threading.Thread(target=self._accept_loop, name=f"relay-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting and close every connection."""
        self._stopped.set()
        self._close_listener()
        for c in self.connections():
            c.close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.host}:{self.port}"

    def connections(self) -> list[_Connection]:
        """The open connections."""
        with self._lock:
            return list(self._connections)

    # ------------------------------------------------------------------ faults
    def delay(self, ms: float, direction: Direction = "both") -> None:
        """Deliver the chunks read from now on in ``direction`` ``ms`` milliseconds late."""
        if ms < 0:
            raise ValueError(f"delay must be >= 0 ms (got {ms})")
        with self._lock:
            for d in _directions(direction):
                self._delay_ms[d] = float(ms)

    def blackhole(self, direction: Direction = "both") -> None:
        """Read and discard everything sent in ``direction`` (open and new connections)."""
        with self._lock:
            for d in _directions(direction):
                self._blackholed[d] = True

    def cut(self) -> None:
        """Close every open connection and refuse new ones until :meth:`heal`."""
        with self._lock:
            self._cut = True
        self._close_listener()
        for c in self.connections():
            c.close()

    def heal(self) -> None:
        """No delay, no black hole; listening again after a cut. Connections that lost bytes to a
        black hole are closed."""
        with self._lock:
            self._delay_ms = {d: 0.0 for d in DIRECTIONS}
            self._blackholed = {d: False for d in DIRECTIONS}
            was_cut, self._cut = self._cut, False
        for c in self.connections():
            if c.lost_bytes:
                c.close()
        if was_cut and not self._stopped.is_set():
            self._listen()

    def delay_ms(self, direction: str) -> float:
        """The delay of ``direction`` now, milliseconds."""
        return self._delay_ms[direction]

    def blackholed(self, direction: str) -> bool:
        """Whether ``direction`` is black-holed now."""
        return self._blackholed[direction]

    # ------------------------------------------------------------------ internals
    def _listen(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, self.port))
        except OSError:
            s.close()
            raise
        s.listen(128)
        self.port = s.getsockname()[1]
        with self._lock:
            self._listener = s

    def _close_listener(self) -> None:
        with self._lock:
            s, self._listener = self._listener, None
        if s is not None:
            # shutdown first: the accept thread's select() holds the socket open until it returns,
            # and a listening socket shut down refuses connections at once (Linux)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:  # cut: wait for heal()
                self._stopped.wait(0.05)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):  # closed by cut() or stop() meanwhile
                continue
            threading.Thread(
                target=self._open, args=(client,), name=f"relay-{self.port}-open", daemon=True
            ).start()

    def _open(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target, timeout=self.connect_timeout_s)
        except OSError:
            client.close()  # the target refused: so does the relay
            return
        server.settimeout(None)
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(self, client, server)
        with self._lock:
            if self._cut or self._stopped.is_set():
                refused = True
            else:
                refused = False
                self._connections.add(conn)
                self.accepted += 1
        if refused:
            conn.close()
            return
        conn.start()

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._connections.discard(conn)


# ---------------------------------------------------------------------------------------------- process
class RelayProcess:
    """Relays to ``targets`` in a child process (``python -m tests.support.relay``), so their
    threads do not share the caller's GIL. :attr:`addresses` are the listening ``host:port`` in
    the order of ``targets``; :meth:`command` sends one stdin command (``delay 20``, ``cut`` ...)
    to every relay and waits for its answer."""

    def __init__(self, targets: Sequence[str], *, delay_ms: float = 0.0, root: Path | None = None) -> None:
        self.targets = list(targets)
        self.delay_ms = delay_ms
        self.root = root or Path(__file__).resolve().parents[2]
        self.proc: subprocess.Popen[str] | None = None
        self.addresses: list[str] = []
        self._out: queue.Queue[str | None] = queue.Queue()

    def start(self, timeout_s: float = 30.0) -> RelayProcess:
        cmd = [sys.executable, "-m", "tests.support.relay", "--delay-ms", str(self.delay_ms)]
        for t in self.targets:
            cmd += ["--target", t]
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, name="relay-process-out", daemon=True).start()
        for line in self._lines(timeout_s):
            if line == "ready":
                return self
            words = line.split()
            if len(words) == 3 and words[0] == "relay":
                self.addresses.append(f"127.0.0.1:{words[1]}")
        raise RuntimeError(f"relay process ended before it was ready (exit {self.proc.poll()})")

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._out.put(line.strip())
        self._out.put(None)

    def _lines(self, timeout_s: float) -> Iterator[str]:
        """The child's output lines until it ends; RuntimeError when it is silent for ``timeout_s``."""
        while True:
            try:
                line = self._out.get(timeout=timeout_s)
            except queue.Empty:
                raise RuntimeError(f"relay process: no answer within {timeout_s:g} s") from None
            if line is None:
                return
            yield line

    def command(self, line: str, timeout_s: float = 10.0) -> None:
        """Send ``line`` (see the module doc); raises RuntimeError unless it answers ``ok``."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = next(self._lines(timeout_s), "(process ended)")
        if answer != "ok":
            raise RuntimeError(f"relay process: {line!r}: {answer}")

    def stop(self) -> None:
        """Stop the relays and the process."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError, RuntimeError):
            self.command("stop", timeout_s=5)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> RelayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="TCP relays with delay, black hole and cut (see the module doc)")
    ap.add_argument("--target", action="append", required=True, help="host:port to relay to (repeatable)")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of both directions at start")
    args = ap.parse_args(argv)
    relays = [Relay(t).start() for t in args.target]
    for r in relays:
        r.delay(args.delay_ms)
        print(f"relay {r.port} {r.target[0]}:{r.target[1]}", flush=True)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            try:
                if words[0] == "stop":
                    print("ok", flush=True)
                    break
                if words[0] == "delay":
                    for r in relays:
                        r.delay(float(words[1]), *(words[2:3]))
                elif words[0] == "blackhole":
                    for r in relays:
                        r.blackhole(*(words[1:2]))
                elif words[0] in ("cut", "heal"):
                    for r in relays:
                        getattr(r, words[0])()
                else:
                    raise ValueError(f"unknown command {words[0]!r}")
            except (ValueError, IndexError, OSError) as e:
                print(f"error {e}", flush=True)
                continue
            print("ok", flush=True)
    finally:
        for r in relays:
            r.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
