"""SSH tunnels to member metastores through one or more SSH hops (Waggle Dance's ``metastore-tunnel``).

A route such as ``"ec2-user@bastion -> hadoop@emr-master:2222"`` is opened as a chain of paramiko
transports: the first connects over TCP to the first hop; each further hop runs a new transport over a
``direct-tcpip`` channel opened through the previous one. :meth:`SshTunnel.forward` then listens on a
local port and carries every accepted connection over a ``direct-tcpip`` channel of the last transport to
``remote_host:remote_port`` as seen from the last hop (typically the metastore's ``localhost:9083``).

Authentication is by private key files only (no agent, no password); every hop's host key is checked
against a known_hosts file. The chain is opened lazily and re-opened when it is found dead, so a restarted
SSH server costs the connections that were open at the time, not the tunnel.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import paramiko

from hivemesh.errors import HivemeshError

log = logging.getLogger(__name__)

_BUF = 64 * 1024  # bytes per read when pumping forwarded connections
_KEEPALIVE_S = 30  # SSH keepalive interval of every transport of a chain, s
_PROBE_MAX_S = 10.0  # longest wait for a liveness probe of a chain that did not answer a channel open, s
_ROUTE_SYNTAX = "'user@host[:port] -> user@host[:port] -> ...'"
_HOP = re.compile(
    r"(?P<user>[^@\s]+)@(?:\[(?P<host6>[^\[\]@\s]+)\]|(?P<host>[^\[\]@\s:]+))(?::(?P<port>\d+))?"
)
# channel-open failure reasons (RFC 4254 section 5.1); paramiko keeps only the code, not the server's text
_OPEN_FAILURES = {
    1: "forwarding administratively prohibited (is AllowTcpForwarding off?)",
    2: "connect failed (connection refused, or host unreachable)",
    3: "unknown channel type",
    4: "resource shortage",
}


@dataclass(frozen=True)
class Hop:
    """One SSH hop of a route: log in as ``user`` on ``host``:``port`` (an IPv6 host has no brackets)."""

    user: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH files this hop's host key under: ``host`` on port 22, else ``[host]:port``."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def parse_route(route: str, default_port: int = 22) -> list[Hop]:
    """Parse ``"user@host[:port] -> user@host[:port] -> ..."`` into hops, first hop first.

    Whitespace around ``->`` is optional; an IPv6 host is written in brackets (``user@[::1]:2222``);
    hops without a port get ``default_port``. Raises ValueError naming the offending hop (1-based)
    when the route is empty, a hop is empty, lacks ``user@``, or has a port outside 1..65535.
    """
    if not 1 <= default_port <= 65535:
        raise ValueError(f"SSH default port {default_port} is not in 1..65535")
    if not isinstance(route, str) or not route.strip():
        raise ValueError(f"SSH route is empty; expected {_ROUTE_SYNTAX}")
    hops: list[Hop] = []
    parts = route.split("->")
    for i, raw in enumerate(parts, 1):
        text = raw.strip()
        where = f"SSH route {route!r}: hop {i} of {len(parts)}"
        if not text:
            raise ValueError(f"{where} is empty; expected {_ROUTE_SYNTAX}")
        m = _HOP.fullmatch(text)
        if m is None:
            raise ValueError(f"{where} {text!r} must be user@host or user@host:port")
        port = default_port if m["port"] is None else int(m["port"])
        if not 1 <= port <= 65535:
            raise ValueError(f"{where} {text!r}: port {port} is not in 1..65535")
        hops.append(Hop(m["user"], m["host6"] or m["host"], port))
    return hops


class SshTunnelError(HivemeshError, ConnectionError):
    """Cannot establish the tunnel. The message names the hop (``user@host:port``) and the reason:
    authentication failed, host key unknown / mismatch, timed out, connection refused, ...

    ``hop`` is the failing :class:`Hop`, or None for failures not tied to one hop (a private key file
    that cannot be read, a closed tunnel).
    """

    def __init__(self, message: str, hop: Hop | None = None):
        super().__init__(message)
        self.hop = hop


class SshTunnel:
    """Local TCP ports forwarded through a chain of SSH hops.

    ``route``: see :func:`parse_route` (ValueError when malformed); ``private_keys``: private key files
    (RSA, ECDSA or Ed25519, unencrypted, OpenSSH or PEM format) tried in order on every hop;
    ``known_hosts``: OpenSSH known_hosts file every hop's host key is checked against (None: the
    user's ``~/.ssh/known_hosts`` if it exists, else no known hosts); ``port``: SSH port of hops
    without one; ``localhost``: address the local listeners bind to; ``timeout_ms``: limit for
    establishing each hop (connect, SSH handshake, authentication) and for opening each forwarded
    channel, ms; ``strict_host_key_checking``: refuse hosts missing from known_hosts (False: accept
    them with a warning). A host whose key differs from the one in known_hosts is always refused.

    Thread-safe. Nothing is connected until :meth:`forward` or :meth:`check`. Use :meth:`close`
    (or the tunnel as a context manager) to release listeners, connections and SSH sessions.
    """

    def __init__(
        self,
        route: str,
        private_keys: Sequence[str] = (),
        known_hosts: str | None = None,
        port: int = 22,
        localhost: str = "127.0.0.1",
        timeout_ms: int = 60000,
        strict_host_key_checking: bool = True,
    ):
        if timeout_ms <= 0:
            raise ValueError(f"SSH timeout_ms must be positive, got {timeout_ms}")
        if isinstance(private_keys, str):
            private_keys = [private_keys]
        self.route = route
        self.hops = parse_route(route, port)
        self.private_keys = [str(p) for p in private_keys]
        self.known_hosts = None if known_hosts is None else str(known_hosts)
        self.localhost = localhost
        self.timeout_ms = timeout_ms
        self.strict_host_key_checking = strict_host_key_checking
        self._label = " -> ".join(str(h) for h in self.hops)
        self._chain_lock = threading.RLock()  # guards _transports and chain (re)opening
        self._transports: list[paramiko.Transport] = []
        self._attempts = 0  # finished chain-open attempts
        self._last_error: SshTunnelError | None = None
        self._ever_opened = False
        self._keys: list[tuple[str, paramiko.PKey]] | None = None
        self._state_lock = threading.Lock()  # guards _closed, _listeners, _forwards
        self._closed = False
        self._listeners: dict[tuple[str, int], _Listener] = {}
        self._forwards: set[_Forward] = set()
        self._probe_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SshTunnel({self._label!r}, alive={self.is_alive})"

    def __enter__(self) -> SshTunnel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ public API

    def forward(self, remote_host: str, remote_port: int) -> tuple[str, int]:
        """Local ``(host, port)`` whose connections reach ``remote_host:remote_port`` from the last hop.

        The first call for a destination starts a listener on ``localhost`` (a free port); later calls
        return the same address. The SSH chain is opened now if it is not open (or died); every new
        local connection checks it again and re-opens it when needed. Raises SshTunnelError when the
        chain cannot be established or the tunnel is closed, ValueError for a port outside 1..65535,
        OSError when the local listener cannot bind ``localhost``.
        """
        if not 1 <= int(remote_port) <= 65535:
            raise ValueError(f"remote port {remote_port} is not in 1..65535")
        self._ensure_chain()
        key = (remote_host, int(remote_port))
        with self._state_lock:
            if self._closed:
                raise SshTunnelError(f"SSH tunnel {self._label} is closed")
            listener = self._listeners.get(key)
            if listener is None:
                listener = _Listener(self, remote_host, int(remote_port))
                self._listeners[key] = listener
                log.info(
                    "SSH tunnel listening on %s:%d -> %s:%d via %s",
                    *listener.address, remote_host, remote_port, self._label,
                )  # fmt: skip
            return listener.address

    def check(self) -> None:
        """Open the SSH chain now if it is not open (or died). Raises SshTunnelError naming the hop."""
        self._ensure_chain()

    def close(self) -> None:
        """Stop the listeners, close forwarded connections and the SSH transports. Idempotent; may wait
        for a chain open in progress in another thread (at most ``timeout_ms`` per hop)."""
        with self._state_lock:
            was_closed = self._closed
            self._closed = True
            listeners = list(self._listeners.values())
            forwards = list(self._forwards)
            self._listeners.clear()
            self._forwards.clear()
        for listener in listeners:
            listener.close()
        for fwd in forwards:
            fwd.close()
        with self._chain_lock:
            self._close_transports()
        if not was_closed:
            log.info("SSH tunnel %s closed", self._label)

    @property
    def is_alive(self) -> bool:
        """True when the chain is open and every hop's transport is active."""
        transports = self._transports
        return bool(transports) and all(t.is_active() for t in transports)

    # ------------------------------------------------------------------ chain management

    def _ensure_chain(self) -> paramiko.Transport:
        """The last hop's transport, opening the chain when needed (SshTunnelError otherwise)."""
        attempts_seen = self._attempts
        with self._chain_lock:
            if self._closed:
                raise SshTunnelError(f"SSH tunnel {self._label} is closed")
            if self.is_alive:
                return self._transports[-1]
            if self._attempts != attempts_seen and self._last_error is not None:
                # another thread tried while we waited for the lock and failed: do not hammer the hops
                raise SshTunnelError(str(self._last_error), self._last_error.hop)
            reopening = self._ever_opened
            if reopening:
                log.warning("SSH chain %s is down; re-opening it", self._label)
            self._close_transports()
            started = time.monotonic()
            try:
                self._transports = self._open_chain()
                self._last_error = None
            except SshTunnelError as e:
                self._last_error = e
                log.error("SSH chain %s cannot be opened: %s", self._label, e)
                raise
            finally:
                self._attempts += 1
            self._ever_opened = True
            log.info(
                "SSH chain %s %s in %.0f ms",
                self._label, "re-opened" if reopening else "opened", (time.monotonic() - started) * 1000,
            )  # fmt: skip
            if self._closed:  # close() ran while we were connecting
                self._close_transports()
                raise SshTunnelError(f"SSH tunnel {self._label} is closed")
            return self._transports[-1]

    def _close_transports(self) -> None:
        transports, self._transports = self._transports, []
        for t in reversed(transports):
            try:
                t.close()
            except Exception:  # pragma: no cover - closing a broken transport
                pass

    def _drop_chain(self, last: paramiko.Transport) -> None:
        """Close the chain if ``last`` is still its last transport (it was found unresponsive)."""
        with self._chain_lock:
            if self._transports and self._transports[-1] is last:
                self._close_transports()

    def _responsive(self, t: paramiko.Transport) -> bool:
        """Whether ``t`` (and so every hop before it) answers a global request within a few seconds."""
        done = threading.Event()

        def probe() -> None:
            try:
                t.global_request("keepalive@openssh.com", wait=True)  # OpenSSH answers "failure"
            except Exception:
                return
            done.set()

        with self._probe_lock:  # paramiko keeps one pending global request per transport
            threading.Thread(target=probe, name="ssh-tunnel-probe", daemon=True).start()
            answered = done.wait(min(self.timeout_ms / 1000, _PROBE_MAX_S))
        return answered and t.is_active()

    def _open_chain(self) -> list[paramiko.Transport]:
        keys = self._load_keys()
        hostkeys, hostkeys_desc = self._load_known_hosts()
        transports: list[paramiko.Transport] = []
        try:
            for i, hop in enumerate(self.hops):
                prev = transports[-1] if transports else None
                try:
                    transports.append(self._open_hop(i, hop, prev, keys, hostkeys, hostkeys_desc))
                except SshTunnelError:
                    raise
                except Exception as e:  # anything paramiko raises that the steps above do not translate
                    raise SshTunnelError(f"{self._where(i)}: {type(e).__name__}: {e}", hop) from e
        except BaseException:
            for t in reversed(transports):
                t.close()
            raise
        return transports

    def _where(self, i: int) -> str:
        return f"SSH hop {self.hops[i]} ({i + 1}/{len(self.hops)})"

    def _open_hop(
        self,
        i: int,
        hop: Hop,
        prev: paramiko.Transport | None,
        keys: list[tuple[str, paramiko.PKey]],
        hostkeys: paramiko.HostKeys,
        hostkeys_desc: str,
    ) -> paramiko.Transport:
        where = self._where(i)
        deadline = time.monotonic() + self.timeout_ms / 1000

        def remaining() -> float:
            return max(0.001, deadline - time.monotonic())

        def fail(reason: str) -> SshTunnelError:
            return SshTunnelError(f"{where}: {reason}", hop)

        timed_out = f"timed out after {self.timeout_ms} ms"
        sock: socket.socket | paramiko.Channel
        if prev is None:
            try:
                sock = socket.create_connection((hop.host, hop.port), timeout=remaining())
            except TimeoutError:
                raise fail(f"connect {timed_out}") from None
            except ConnectionRefusedError:
                raise fail("connection refused") from None
            except socket.gaierror as e:
                raise fail(f"cannot resolve host: {e.strerror}") from None
            except OSError as e:
                raise fail(f"cannot connect: {e.strerror or e}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            through = self.hops[i - 1]
            try:
                sock = prev.open_channel(
                    "direct-tcpip", (hop.host, hop.port), ("127.0.0.1", 0), timeout=remaining()
                )
            except paramiko.ChannelException as e:
                raise fail(f"{through} cannot connect to it: {_open_failure(e)}") from None
            except (paramiko.SSHException, EOFError, OSError) as e:
                if "timeout" in str(e).lower():
                    raise fail(f"connect through {through} {timed_out}") from None
                raise fail(f"cannot open a channel through {through}: {e}") from None

        t = paramiko.Transport(sock)
        try:
            self._handshake(t, hop, fail, remaining, timed_out, hostkeys, hostkeys_desc)
            self._authenticate(t, hop, fail, remaining, timed_out, keys)
        except BaseException:
            t.close()
            raise
        t.set_keepalive(_KEEPALIVE_S)
        log.info("SSH hop %s established (%d/%d)", hop, i + 1, len(self.hops))
        return t

    def _handshake(
        self,
        t: paramiko.Transport,
        hop: Hop,
        fail: Callable[[str], SshTunnelError],
        remaining: Callable[[], float],
        timed_out: str,
        hostkeys: paramiko.HostKeys,
        hostkeys_desc: str,
    ) -> None:
        name = hop.known_hosts_name
        known = hostkeys.lookup(name)
        if known:  # negotiate only key types known_hosts can vouch for (as OpenSSH does)
            known_types = set(known.keys())
            allowed = [k for k in t.get_security_options().key_types if _key_family(k) in known_types]
            if allowed:
                t.get_security_options().key_types = allowed
        # paramiko's own limits a little later than ours, so that running out of time reads as a timeout
        t.banner_timeout = t.handshake_timeout = remaining() + 1.0
        negotiated = threading.Event()
        try:
            t.start_client(event=negotiated)
        except (paramiko.SSHException, EOFError, OSError) as e:  # pragma: no cover - start() failures
            raise fail(f"SSH handshake failed: {e}") from None
        if not negotiated.wait(remaining()):
            raise fail(f"SSH handshake {timed_out}")
        if not t.is_active():
            err = t.get_exception()
            text = str(err) if err is not None else "connection closed"
            if known and isinstance(err, paramiko.IncompatiblePeer) and "host key" in text:
                raise fail(
                    f"host key mismatch: the server offers none of the key types known_hosts "
                    f"({hostkeys_desc}) has for {name} ({', '.join(sorted(known.keys()))})"
                )
            if "banner" in text.lower() and isinstance(getattr(err, "__context__", None), TimeoutError):
                raise fail(f"SSH handshake {timed_out} (no SSH banner)")
            raise fail(f"SSH handshake failed: {text}")
        key = t.get_remote_server_key()
        if not known:
            if self.strict_host_key_checking:
                raise fail(
                    f"host key unknown: {name} is not in known_hosts ({hostkeys_desc}); the server "
                    f"offers {key.get_name()} {key.fingerprint}"
                )
            log.warning(
                "SSH hop %s: host key unknown (%s is not in known_hosts %s); accepting %s %s because "
                "strict_host_key_checking is off",
                hop, name, hostkeys_desc, key.get_name(), key.fingerprint,
            )  # fmt: skip
            return
        expected = known.get(key.get_name())
        if expected is None or expected.asbytes() != key.asbytes():
            have = ", ".join(f"{k.get_name()} {k.fingerprint}" for k in known.values())
            raise fail(
                f"host key mismatch: the server offers {key.get_name()} {key.fingerprint} but known_hosts "
                f"({hostkeys_desc}) has {have} for {name} - possible man-in-the-middle; refusing"
            )

    def _authenticate(
        self,
        t: paramiko.Transport,
        hop: Hop,
        fail: Callable[[str], SshTunnelError],
        remaining: Callable[[], float],
        timed_out: str,
        keys: list[tuple[str, paramiko.PKey]],
    ) -> None:
        if not keys:
            raise fail(f"authentication failed: no private keys configured for {hop.user}")
        for path, key in keys:
            t.auth_timeout = remaining()
            try:
                more = t.auth_publickey(hop.user, key)
            except paramiko.BadAuthenticationType as e:
                raise fail(
                    f"authentication failed: the server does not accept public keys "
                    f"(it allows {', '.join(e.allowed_types) or 'nothing'})"
                ) from None
            except paramiko.AuthenticationException as e:
                if "timeout" in str(e).lower():
                    raise fail(f"authentication {timed_out}") from None
                log.debug("SSH hop %s: key %s (%s) not accepted for %s", hop, path, key.get_name(), hop.user)
                continue
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise fail(f"authentication failed: {e or type(e).__name__} (after trying {path})") from None
            if more:
                raise fail(
                    f"authentication failed: key {path} was accepted but the server also wants "
                    f"{', '.join(more)} (not supported)"
                )
            if t.is_authenticated():
                log.debug("SSH hop %s: authenticated with %s (%s)", hop, path, key.get_name())
                return
        tried = ", ".join(path for path, _ in keys)
        raise fail(f"authentication failed: no private key was accepted for {hop.user} (tried {tried})")

    def _load_keys(self) -> list[tuple[str, paramiko.PKey]]:
        if self._keys is not None:
            return self._keys
        keys: list[tuple[str, paramiko.PKey]] = []
        for path in self.private_keys:
            try:
                keys.append((path, paramiko.PKey.from_path(path)))
            except OSError as e:
                raise SshTunnelError(f"SSH private key {path}: cannot read it: {e.strerror or e}") from None
            except TypeError as e:  # cryptography: "Password was not given but private key is encrypted"
                if "encrypted" in str(e):
                    raise SshTunnelError(
                        f"SSH private key {path} is encrypted; passphrase-protected keys are not supported"
                    ) from None
                raise SshTunnelError(f"SSH private key {path} cannot be loaded: {e}") from None
            except Exception as e:
                raise SshTunnelError(f"SSH private key {path} cannot be loaded: {e}") from None
        self._keys = keys
        return keys

    def _load_known_hosts(self) -> tuple[paramiko.HostKeys, str]:
        """Read known_hosts anew on every chain open, so edits take effect on the next re-open."""
        hostkeys = paramiko.HostKeys()
        path = self.known_hosts
        if path is None:
            default = os.path.expanduser("~/.ssh/known_hosts")
            if not os.path.exists(default):
                return hostkeys, "none given"
            path = default
        try:
            hostkeys.load(path)
        except OSError as e:
            if self.strict_host_key_checking or self.known_hosts is None:
                raise SshTunnelError(f"SSH known_hosts {path}: cannot read it: {e.strerror or e}") from None
            log.warning("SSH known_hosts %s cannot be read (%s); no host is known", path, e.strerror or e)
        except Exception as e:
            raise SshTunnelError(f"SSH known_hosts {path} cannot be parsed: {e}") from None
        return hostkeys, path

    # ------------------------------------------------------------------ forwarded connections

    def _open_channel(self, remote: tuple[str, int], peer: tuple[str, int]) -> paramiko.Channel:
        """A direct-tcpip channel from the last hop to ``remote``, re-opening a dead chain (once more if
        the chain looked alive but did not answer)."""
        last_hop = self.hops[-1]
        for attempt in (1, 2):
            t = self._ensure_chain()
            try:
                return t.open_channel("direct-tcpip", remote, peer, timeout=self.timeout_ms / 1000)
            except paramiko.ChannelException as e:
                raise SshTunnelError(
                    f"SSH hop {last_hop} cannot connect to {remote[0]}:{remote[1]}: {_open_failure(e)}",
                    last_hop,
                ) from None
            except (paramiko.SSHException, EOFError, OSError) as e:
                timeout = "timeout" in str(e).lower()
                if attempt == 2 or (timeout and self._responsive(t)):
                    raise SshTunnelError(
                        f"SSH hop {last_hop} cannot open a channel to {remote[0]}:{remote[1]}: {e}", last_hop
                    ) from None
                log.warning("SSH chain %s failed opening a channel (%s); re-opening it", self._label, e)
                self._drop_chain(t)
        raise AssertionError("unreachable")  # pragma: no cover

    def _serve(self, client: socket.socket, peer: tuple[str, int], remote: tuple[str, int]) -> None:
        """Carry one accepted local connection to ``remote`` (runs in its own thread)."""
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            chan = self._open_channel(remote, (str(peer[0]), int(peer[1])))
        except Exception as e:
            log.error("SSH tunnel %s: dropping local connection from %s:%s: %s", self._label, *peer[:2], e)
            _close_socket(client)
            return
        fwd = _Forward(client, chan)
        with self._state_lock:
            if self._closed:
                fwd.close()
                return
            self._forwards.add(fwd)
        log.debug("SSH tunnel %s: %s:%s -> %s:%d open", self._label, *peer[:2], *remote)
        try:
            fwd.run()
        finally:
            with self._state_lock:
                self._forwards.discard(fwd)
            log.debug("SSH tunnel %s: %s:%s -> %s:%d closed", self._label, *peer[:2], *remote)


def _key_family(key_type: str) -> str:
    """The known_hosts key type a host key algorithm is checked against (rsa-sha2-* signs ssh-rsa keys)."""
    return "ssh-rsa" if key_type.startswith("rsa-sha2-") else key_type


def _open_failure(e: paramiko.ChannelException) -> str:
    return _OPEN_FAILURES.get(e.code, f"channel open failed: {e.text} (code {e.code})")


def _close_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class _Listener:
    """A local listening socket whose accepted connections are handed to ``SshTunnel._serve``."""

    def __init__(self, tunnel: SshTunnel, remote_host: str, remote_port: int):
        self.tunnel = tunnel
        self.remote = (remote_host, remote_port)
        family, type_, proto, _, addr = socket.getaddrinfo(
            tunnel.localhost, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self.sock = socket.socket(family, type_, proto)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(addr)
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        host, port = self.sock.getsockname()[:2]
        self.address: tuple[str, int] = (host, port)
        self._closed = False
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"ssh-tunnel-accept-{port}", daemon=True
        )
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, peer = self.sock.accept()
            except OSError as e:
                if self._closed:
                    return
                log.warning("SSH tunnel listener %s:%d: accept failed: %s", *self.address, e)
                time.sleep(0.05)
                continue
            threading.Thread(
                target=self.tunnel._serve,
                args=(client, peer, self.remote),
                name="ssh-tunnel-conn",
                daemon=True,
            ).start()

    def close(self) -> None:
        """Stop accepting (the accept loop ends) and wait for it, up to 5 s."""
        self._closed = True
        _close_socket(self.sock)  # shutdown wakes the blocked accept() on Linux
        self._thread.join(timeout=5)


class _Forward:
    """One forwarded connection: pumps bytes local socket <-> SSH channel, honouring half-closes."""

    def __init__(self, sock: socket.socket, chan: paramiko.Channel):
        self.sock = sock
        self.chan = chan
        self._lock = threading.Lock()
        self._closed = False

    def run(self) -> None:
        """Pump bytes both ways until both directions have ended (half-closes honoured), then close."""
        up = threading.Thread(target=self._local_to_channel, name="ssh-tunnel-up", daemon=True)
        up.start()
        self._channel_to_local()
        up.join()
        self.close()

    def _local_to_channel(self) -> None:
        try:
            while True:
                data = self.sock.recv(_BUF)
                if not data:
                    break
                self.chan.sendall(data)
            self.chan.shutdown_write()  # the local client half-closed: send EOF, keep reading replies
        except Exception:
            self.close()

    def _channel_to_local(self) -> None:
        try:
            while True:
                data = self.chan.recv(_BUF)
                if not data:
                    break
                self.sock.sendall(data)
            if self.chan.closed:  # the remote end (or the SSH chain) is gone: no more writes either
                self.close()
            else:
                self.sock.shutdown(socket.SHUT_WR)
        except Exception:
            self.close()

    def close(self) -> None:
        """Close the local socket and the channel (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _close_socket(self.sock)
        try:
            self.chan.close()
        except Exception:  # pragma: no cover - channel of a dead transport
            pass
