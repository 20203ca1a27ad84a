"""SSH tunnels (``hivemesh.federation.connectors.ssh``) against real OpenSSH servers and a real metastore.

Two sshd processes play a bastion and the metastore's host; every tunnel goes bastion -> target and
forwards to a hivemesh metastore, so each Thrift call crosses both SSH hops.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import Database
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from hivemesh.federation.connectors.ssh import Hop, SshTunnel, SshTunnelError, parse_route
from tests.support.servers import HivemeshProcess, free_port
from tests.support.sshd import SSHD_SKIP_REASON, SshServer, make_key, public_key, sshd_available

needs_sshd = pytest.mark.skipif(not sshd_available(), reason=SSHD_SKIP_REASON)


class Client:
    """A plain HMS Thrift client (TSocket + TBufferedTransport + TBinaryProtocol) to ``host:port``."""

    def __init__(self, addr: tuple[str, int], timeout_ms: int = 10_000):
        sock = TSocket.TSocket(addr[0], addr[1])
        sock.setTimeout(timeout_ms)
        self.transport = TTransport.TBufferedTransport(sock)
        self.hms = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        self.transport.open()

    def close(self) -> None:
        self.transport.close()


# ---------------------------------------------------------------------------------------- parse_route


def test_parse_route_accepts_hops_ports_and_spacing() -> None:
    assert parse_route("hadoop@emr-master") == [Hop("hadoop", "emr-master", 22)]
    assert parse_route("ec2-user@bastion:2222->hadoop@10.0.0.7", default_port=2200) == [
        Hop("ec2-user", "bastion", 2222),
        Hop("hadoop", "10.0.0.7", 2200),
    ]
    hops = parse_route("  a@h1 ->  b@h2:65535   ->c@[::1]:23 ")
    assert hops == [Hop("a", "h1", 22), Hop("b", "h2", 65535), Hop("c", "::1", 23)]
    assert [str(h) for h in hops] == ["a@h1:22", "b@h2:65535", "c@[::1]:23"]
    assert [h.known_hosts_name for h in hops] == ["h1", "[h2]:65535", "[::1]:23"]


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ("", "SSH route is empty"),
        ("   ", "SSH route is empty"),
        ("a@h1 ->", "hop 2 of 2 is empty"),
        ("-> a@h1", "hop 1 of 2 is empty"),
        ("a@h1 -> -> b@h2", "hop 2 of 3 is empty"),
        ("bastion", "hop 1 of 1 'bastion' must be user@host or user@host:port"),
        ("a@h1 -> h2:22", "hop 2 of 2 'h2:22' must be user@host or user@host:port"),
        ("a@h1:ssh", "'a@h1:ssh' must be user@host"),
        ("a@b@h1", "'a@b@h1' must be user@host"),
        ("a@h1 b@h2", "'a@h1 b@h2' must be user@host"),
        ("a@h1:0", "port 0 is not in 1..65535"),
        ("a@h1 -> b@h2:70000", "hop 2 of 2 'b@h2:70000': port 70000 is not in 1..65535"),
    ],
)
def test_parse_route_rejects_with_precise_messages(route: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_route(route)
    assert message in str(e.value)


def test_parse_route_checks_default_port_and_tunnel_checks_arguments() -> None:
    with pytest.raises(ValueError, match="default port 0 is not in 1..65535"):
        parse_route("a@h", default_port=0)
    with pytest.raises(ValueError, match="must be user@host"):
        SshTunnel("nobody-here")
    with pytest.raises(ValueError, match="timeout_ms must be positive"):
        SshTunnel("a@h", timeout_ms=0)


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Client keys of distinct types: the bastion accepts ``bastion`` only, the target ``target`` only."""
    d = tmp_path_factory.mktemp("client-keys")
    return {
        "bastion": make_key(d / "bastion_rsa", "rsa"),
        "target": make_key(d / "target_ecdsa", "ecdsa"),
        "stranger": make_key(d / "stranger_ed25519", "ed25519"),
    }


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    d = tmp_path_factory.mktemp("metastore")
    proc = HivemeshProcess(db_url=f"sqlite:///{d}/m.db", warehouse=d / "wh", log=d / "m.log").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def bastion(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[SshServer]:
    if not sshd_available():
        pytest.skip(SSHD_SKIP_REASON)
    # DEBUG1 makes sshd log each direct-tcpip request, which proves the second hop went through it
    with SshServer(tmp_path_factory.mktemp("bastion"), [keys["bastion"]], log_level="DEBUG1") as server:
        yield server


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> Iterator[SshServer]:
    if not sshd_available():
        pytest.skip(SSHD_SKIP_REASON)
    with SshServer(tmp_path_factory.mktemp("target"), [keys["target"]]) as server:
        yield server


def write_known_hosts(path: Path, *lines: str) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def both_keys(keys: dict[str, Path]) -> list[str]:
    return [str(keys["bastion"]), str(keys["target"])]


def route(*servers: SshServer) -> str:
    return " -> ".join(s.route_hop() for s in servers)


@pytest.fixture()
def known_hosts(tmp_path: Path, bastion: SshServer, target: SshServer) -> str:
    return write_known_hosts(tmp_path / "known_hosts", bastion.host_key_line, target.host_key_line)


def create_and_read(addr: tuple[str, int], name: str) -> Database:
    c = Client(addr)
    try:
        c.hms.create_database(Database(name=name, description="through ssh", parameters={}))
        return c.hms.get_database(name)
    finally:
        c.close()


# ---------------------------------------------------------------------------------------- two hops


@needs_sshd
def test_two_hop_tunnel_carries_thrift_calls(
    bastion: SshServer,
    target: SshServer,
    keys: dict[str, Path],
    known_hosts: str,
    metastore: HivemeshProcess,
) -> None:
    tunnel = SshTunnel(route(bastion, target), both_keys(keys), known_hosts, timeout_ms=10_000)
    try:
        assert not tunnel.is_alive  # lazy: nothing connected yet
        addr = tunnel.forward(metastore.host, metastore.port)
        assert tunnel.is_alive
        assert addr[0] == "127.0.0.1" and addr[1] not in (metastore.port, bastion.port, target.port)
        assert tunnel.forward(metastore.host, metastore.port) == addr  # listener reused

        db = create_and_read(addr, "via_ssh")
        assert db.name == "via_ssh" and db.description == "through ssh"
        assert db.locationUri and db.locationUri.endswith("via_ssh.db")

        # the target accepted its own (ECDSA) key; the bastion its (RSA) key and then carried a
        # direct-tcpip channel to the target's sshd
        target.wait_for_log(rf"Accepted publickey for {target.user} from 127\.0\.0\.1 port \d+ ssh2: ECDSA ")
        bastion.wait_for_log(rf"Accepted publickey for {bastion.user} from 127\.0\.0\.1 port \d+ ssh2: RSA ")
        bastion.wait_for_log(
            rf"server_request_direct_tcpip: originator \S+ port \d+, target 127\.0\.0\.1 port {target.port}\b"
        )
        # the metastore itself was reached from the target, not through the bastion
        assert f"target {metastore.host} port {metastore.port}" not in bastion.log_text()
    finally:
        tunnel.close()
    assert not tunnel.is_alive
    with pytest.raises(OSError):
        socket.create_connection(addr, timeout=2).close()
    tunnel.close()  # idempotent
    with pytest.raises(SshTunnelError, match="closed"):
        tunnel.forward(metastore.host, metastore.port)


# ---------------------------------------------------------------------------------------- failures


@needs_sshd
def test_strict_host_key_checking_refuses_an_unknown_target(
    tmp_path: Path, bastion: SshServer, target: SshServer, keys: dict[str, Path], metastore: HivemeshProcess
) -> None:
    only_bastion = write_known_hosts(tmp_path / "kh", bastion.host_key_line)
    with SshTunnel(route(bastion, target), both_keys(keys), only_bastion, timeout_ms=10_000) as tunnel:
        with pytest.raises(SshTunnelError) as e:
            tunnel.forward(metastore.host, metastore.port)
        msg = str(e.value)
        assert f"SSH hop {target.route_hop()} (2/2): host key unknown" in msg
        assert f"[127.0.0.1]:{target.port} is not in known_hosts ({only_bastion})" in msg
        assert e.value.hop == Hop(target.user, "127.0.0.1", target.port)
        assert not tunnel.is_alive

    # not even the first hop is known: the error names the bastion
    empty = write_known_hosts(tmp_path / "empty")
    with (
        SshTunnel(route(bastion, target), both_keys(keys), empty, timeout_ms=10_000) as tunnel,
        pytest.raises(SshTunnelError, match=rf"SSH hop {bastion.route_hop()} \(1/2\): host key unknown"),
    ):
        tunnel.check()

    # strict checking off: unknown hosts are accepted (with a warning) and calls go through
    with SshTunnel(
        route(bastion, target), both_keys(keys), empty, timeout_ms=10_000, strict_host_key_checking=False
    ) as tunnel:
        addr = tunnel.forward(metastore.host, metastore.port)
        assert tunnel.is_alive
        assert create_and_read(addr, "not_strict").name == "not_strict"


@needs_sshd
def test_a_different_host_key_is_refused_even_when_not_strict(
    tmp_path: Path, bastion: SshServer, target: SshServer, keys: dict[str, Path]
) -> None:
    impostor = make_key(tmp_path / "impostor", "ed25519")
    wrong = write_known_hosts(
        tmp_path / "kh", bastion.host_key_line, f"[127.0.0.1]:{target.port} {public_key(impostor)}"
    )
    for strict in (True, False):
        tunnel = SshTunnel(
            route(bastion, target), both_keys(keys), wrong, timeout_ms=10_000, strict_host_key_checking=strict
        )
        with tunnel, pytest.raises(SshTunnelError) as e:
            tunnel.check()
        assert f"SSH hop {target.route_hop()} (2/2): host key mismatch" in str(e.value)
        assert "possible man-in-the-middle" in str(e.value)

    # known_hosts vouches only for an RSA key the target does not have: refused, not silently accepted
    rsa_only = write_known_hosts(
        tmp_path / "kh_rsa", bastion.host_key_line, f"[127.0.0.1]:{target.port} {public_key(keys['bastion'])}"
    )
    with (
        SshTunnel(route(bastion, target), both_keys(keys), rsa_only, timeout_ms=10_000) as tunnel,
        pytest.raises(SshTunnelError, match=rf"{target.route_hop()} \(2/2\): host key mismatch"),
    ):
        tunnel.check()


@needs_sshd
def test_wrong_private_key_fails_authentication_naming_the_hop(
    bastion: SshServer, target: SshServer, keys: dict[str, Path], known_hosts: str
) -> None:
    with SshTunnel(route(bastion, target), [str(keys["stranger"])], known_hosts, timeout_ms=10_000) as t:
        with pytest.raises(SshTunnelError) as e:
            t.check()
        assert f"SSH hop {bastion.route_hop()} (1/2): authentication failed" in str(e.value)
        assert str(keys["stranger"]) in str(e.value)
    # the bastion's key gets through the bastion, but the target refuses it
    with (
        SshTunnel(route(bastion, target), [str(keys["bastion"])], known_hosts, timeout_ms=10_000) as t,
        pytest.raises(SshTunnelError, match=rf"SSH hop {target.route_hop()} \(2/2\): authentication failed"),
    ):
        t.check()
    with (
        SshTunnel(route(bastion), [], known_hosts, timeout_ms=10_000) as t,
        pytest.raises(SshTunnelError, match="authentication failed: no private keys configured"),
    ):
        t.check()
    with (
        SshTunnel(route(bastion), ["/nonexistent/id_rsa"], known_hosts) as t,
        pytest.raises(SshTunnelError, match="SSH private key /nonexistent/id_rsa: cannot read it"),
    ):
        t.check()


@needs_sshd
def test_refused_and_silent_hops_fail_fast_naming_the_hop(
    bastion: SshServer, keys: dict[str, Path], known_hosts: str
) -> None:
    closed = free_port()
    with (
        SshTunnel(f"root@127.0.0.1:{closed}", both_keys(keys), known_hosts, timeout_ms=5_000) as t,
        pytest.raises(
            SshTunnelError, match=rf"SSH hop root@127\.0\.0\.1:{closed} \(1/1\): connection refused"
        ),
    ):
        t.check()
    # the second hop's port is closed: the bastion reports the refusal
    with SshTunnel(f"{route(bastion)} -> root@127.0.0.1:{closed}", both_keys(keys), known_hosts) as t:
        with pytest.raises(SshTunnelError) as e:
            t.check()
        assert (
            f"SSH hop root@127.0.0.1:{closed} (2/2): {bastion.route_hop()} cannot connect to it: "
            "connect failed (connection refused, or host unreachable)"
        ) in str(e.value)
    # a server that accepts TCP but never speaks SSH: a timeout, within timeout_ms
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        port = silent.getsockname()[1]
        with SshTunnel(f"root@127.0.0.1:{port}", both_keys(keys), known_hosts, timeout_ms=400) as t:
            started = time.monotonic()
            with pytest.raises(
                SshTunnelError, match=rf"root@127\.0\.0\.1:{port} \(1/1\): SSH handshake timed out"
            ):
                t.check()
            assert time.monotonic() - started < 5  # not the 15 s default banner timeout
    finally:
        silent.close()


# ---------------------------------------------------------------------------------------- load


@needs_sshd
def test_many_concurrent_connections_through_one_tunnel(
    bastion: SshServer, target: SshServer, keys: dict[str, Path], known_hosts: str, metastore: HivemeshProcess
) -> None:
    threads, calls, reconnect_every = 16, 50, 10
    name = f"conc_{uuid.uuid4().hex[:8]}"
    with SshTunnel(route(bastion, target), both_keys(keys), known_hosts, timeout_ms=20_000) as tunnel:
        addr = tunnel.forward(metastore.host, metastore.port)
        create_and_read(addr, name)
        done: list[int] = []
        errors: list[BaseException] = []
        addrs: set[tuple[str, int]] = set()
        barrier = threading.Barrier(threads)

        def work(i: int) -> None:
            try:
                barrier.wait()
                addrs.add(tunnel.forward(metastore.host, metastore.port))
                client = None
                for n in range(calls):
                    if n % reconnect_every == 0:  # a fresh local connection (and SSH channel) every 10 calls
                        if client is not None:
                            client.close()
                        client = Client(addr)
                    assert client is not None
                    assert client.hms.get_database(name).name == name
                    done.append(i)
                assert client is not None
                client.close()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        started = time.monotonic()
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        elapsed = time.monotonic() - started
        assert not errors, errors[:3]
        assert len(done) == threads * calls
        assert addrs == {addr}
        assert tunnel.is_alive
        assert elapsed < 30, f"{threads * calls} calls took {elapsed:.1f}s"


# ---------------------------------------------------------------------------------------- restarts


@needs_sshd
def test_chain_is_reopened_after_the_bastion_restarts(
    tmp_path: Path,
    target: SshServer,
    keys: dict[str, Path],
    metastore: HivemeshProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hivemesh.federation.connectors.ssh")
    with SshServer(tmp_path / "bastion2", [keys["bastion"]]) as bastion:
        kh = write_known_hosts(tmp_path / "kh", bastion.host_key_line, target.host_key_line)
        with SshTunnel(route(bastion, target), both_keys(keys), kh, timeout_ms=10_000) as tunnel:
            addr = tunnel.forward(metastore.host, metastore.port)
            assert create_and_read(addr, "before_restart").name == "before_restart"
            old = Client(addr)
            assert old.hms.get_database("before_restart").name == "before_restart"

            bastion.stop()  # drops every SSH connection, as a reboot would
            deadline = time.monotonic() + 10
            while tunnel.is_alive and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not tunnel.is_alive
            with pytest.raises(TTransport.TTransportException):
                old.hms.get_database("before_restart")  # the connection open at the time is lost
            old.close()
            with pytest.raises(
                SshTunnelError, match=rf"SSH hop {bastion.route_hop()} \(1/2\): connection refused"
            ):
                tunnel.check()
            down = Client(addr)  # the listener still accepts, but cannot carry the connection
            with pytest.raises(TTransport.TTransportException):
                down.hms.get_database("before_restart")
            down.close()

            bastion.start()  # same port, same host key
            assert create_and_read(addr, "after_restart").name == "after_restart"
            assert tunnel.is_alive
            assert tunnel.forward(metastore.host, metastore.port) == addr
    assert any("re-opened" in r.getMessage() for r in caplog.records), caplog.text
    assert len(bastion.log_text().split("Accepted publickey for")) - 1 >= 2
