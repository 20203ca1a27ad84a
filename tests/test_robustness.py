"""Robustness of ``hivemesh metastore`` as a network service (a real subprocess, real TCP).

One abusive connection (random bytes, truncated or oversized messages, the wrong transport or
protocol, a silent client, a client that vanishes mid-message or before reading its reply) must only
end that connection: a second connection opened before the abuse keeps getting correct answers
during and after it, new connections are served, the process stays up and logs no traceback. The
fb303 ``shutdown()`` that Hive clients send on close never stops the server; more than 200
simultaneous connections are all served (no small worker pool); 50 MB strings (under the 100 MB
message limit) get an answer; configuration and CLI errors give a precise message without a
traceback. Concurrency and crash consistency are in ``test_concurrency.py``.

Times in this file are deadlines only (so that a hung server fails a test instead of hanging it),
never assertions about speed.
"""

from __future__ import annotations

import inspect
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException, TException
from thrift.transport import TSocket, TTransport

from hivemesh.metastore.handler import LocalMetastore
from hivemesh.thrift.processor import implemented_methods
from hivemesh.thrift.server import _SocketTransport
from tests.conftest import PG_SKIP_REASON, make_pg_database, pg_admin_url, postgres_available
from tests.support.servers import HivemeshProcess, ThriftClient

DEADLINE_S = 60.0
MB = 1024 * 1024
MARKER_DB = "robust"
MARKER_PARAMS = {"marker": "still-here", "spark.sql.sources.provider": "orc"}


# ---------------------------------------------------------------- helpers


def _marker_table() -> Table:
    return Table(
        tableName="marker",
        dbName=MARKER_DB,
        owner="robust",
        tableType="EXTERNAL_TABLE",
        parameters={**MARKER_PARAMS, "EXTERNAL": "TRUE"},
        partitionKeys=[FieldSchema("dt", "string", "day")],
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", "key"), FieldSchema("name", "string", None)],
            location="file:/tmp/hivemesh-robust-marker",
            inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
        ),
    )


def _check_marker(client: ThriftHiveMetastore.Client) -> None:
    """A correct answer, not just any answer: the marker table exactly as it was created."""
    t = client.get_table(MARKER_DB, "marker")
    assert {k: t.parameters.get(k) for k in MARKER_PARAMS} == MARKER_PARAMS
    assert [(c.name, c.type, c.comment) for c in t.sd.cols] == [
        ("id", "bigint", "key"),
        ("name", "string", None),
    ]
    assert [(k.name, k.type) for k in t.partitionKeys] == [("dt", "string")]
    assert t.sd.serdeInfo.serializationLib == "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
    with pytest.raises(NoSuchObjectException):
        client.get_table(MARKER_DB, "no_such_table")


def _call_bytes(method: str, *args: object) -> bytes:
    """The exact bytes an unframed binary Hive client sends for one call."""
    buf = TTransport.TMemoryBuffer()
    client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocolAccelerated(buf))
    getattr(client, f"send_{method}")(*args)
    return buf.getvalue()


def _message_header(method: str, seqid: int = 1) -> bytes:
    name = method.encode()
    return struct.pack("!iI", -2147418111, len(name)) + name + struct.pack("!i", seqid)  # 0x80010001: CALL


def _raw(server: HivemeshProcess) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=DEADLINE_S)
    sock.settimeout(DEADLINE_S)
    return sock


def _send(sock: socket.socket, data: bytes) -> None:
    """Send, tolerating a server that already dropped the connection (that is allowed here)."""
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass


def _shut_wr(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # already reset by the server


def _server_closes(sock: socket.socket) -> bool:
    """True when the server ends the connection (FIN or RST) before the deadline."""
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _reset_close(sock: socket.socket) -> None:
    """Vanish abruptly: close with an RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _dropped_not_hung(fn: Callable[[], object]) -> None:
    """``fn`` must fail because the server closed the connection, not by timing out or answering."""
    with pytest.raises(TTransport.TTransportException) as info:
        fn()
    e = info.value
    assert e.type != TTransport.TTransportException.TIMED_OUT, "the server hung instead of closing"
    assert e.type == TTransport.TTransportException.END_OF_FILE or isinstance(
        getattr(e, "inner", None), ConnectionResetError
    ), f"unexpected transport error {e!r}"


@contextmanager
def _client(
    host: str, port: int, *, framed: bool = False, compact: bool = False, unlimited: bool = False
) -> Iterator[ThriftHiveMetastore.Client]:
    """A client with a deadline. ``unlimited``: no 16 MB limit on strings and frames it reads, and a
    transport that reads long messages in linear time (Thrift's ``TSocket.readAll`` is quadratic)."""
    if unlimited:
        sock = socket.create_connection((host, port), timeout=DEADLINE_S)
        trans: TTransport.TTransportBase = _SocketTransport(sock)
    else:
        tsock = TSocket.TSocket(host, port)
        tsock.setTimeout(int(DEADLINE_S * 1000))
        tsock.open()
        trans = TTransport.TBufferedTransport(tsock)
    if framed:
        limit = TTransport.HARD_MAX_FRAME_SIZE if unlimited else TTransport.DEFAULT_MAX_FRAME_SIZE
        trans = TTransport.TFramedTransport(trans, max_frame_size=limit)
    if compact:
        proto = TCompactProtocol.TCompactProtocolAccelerated(trans)
    elif unlimited:
        proto = TBinaryProtocol.TBinaryProtocolAccelerated(
            trans, string_length_limit=None, container_length_limit=None
        )
    else:
        proto = TBinaryProtocol.TBinaryProtocolAccelerated(trans)
    try:
        yield ThriftHiveMetastore.Client(proto)
    finally:
        trans.close()


def _drop_pg_database(url: str) -> None:
    eng = sa.create_engine(pg_admin_url(), isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            c.execute(sa.text(f'DROP DATABASE IF EXISTS "{sa.make_url(url).database}" WITH (FORCE)'))
    finally:
        eng.dispose()


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    """A dedicated server (SQLite) that the abuse tests may torment; has the marker table.

    After them all it must still stop cleanly on SIGTERM (exit code 0)."""
    base = tmp_path_factory.mktemp("robust")
    proc = HivemeshProcess(f"sqlite:///{base / 'metastore.db'}", base / "warehouse", base / "metastore.log")
    proc.start()
    try:
        with ThriftClient(proc.host, proc.port) as c:
            c.create_database(Database(name=MARKER_DB, description="robustness tests"))
            c.create_table(_marker_table())
            bulky = _marker_table()
            bulky.tableName = "bulky"
            bulky.parameters = {"blob": "b" * (4 * MB)}
            c.create_table(bulky)
        yield proc
    finally:
        code = proc.stop()
    assert code == 0, f"exit code {code} after SIGTERM; see {proc.log}"


class Health:
    """A connection opened before the abuse; checks that the server is still fully in service."""

    def __init__(self, server: HivemeshProcess):
        self.server = server
        self._log_start = server.log.stat().st_size
        self._cm = _client(server.host, server.port)
        self.client = self._cm.__enter__()
        self.client.set_ugi("healthy", ["robust"])
        _check_marker(self.client)

    def during(self) -> None:
        """Correct answers on the healthy connection while the abusive one is open."""
        _check_marker(self.client)
        assert self.client.getVersion().startswith(("3.", "4."))

    def after(self) -> None:
        self.after_without_log_check()
        log = self.server.log.read_bytes()[self._log_start :].decode("utf-8", errors="replace")
        assert "Traceback" not in log, f"the server logged a traceback:\n{log[-4000:]}"

    def after_without_log_check(self) -> None:
        assert self.server.proc is not None and self.server.proc.poll() is None, "the server died"
        _check_marker(self.client)  # the connection opened before the abuse still works
        with _client(self.server.host, self.server.port) as fresh:  # and a new one
            _check_marker(fresh)
            assert fresh.get_database(MARKER_DB).name == MARKER_DB

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


@pytest.fixture()
def health(server: HivemeshProcess) -> Iterator[Health]:
    h = Health(server)
    try:
        yield h
    finally:
        h.close()


# ---------------------------------------------------------------- abuse of one connection


def _random_bytes(server: HivemeshProcess, during: Callable[[], None]) -> None:
    rng = random.Random(9083)
    with _raw(server) as s:
        _send(s, b"\x17" + rng.randbytes(64 * 1024))  # no version header
        during()
        assert _server_closes(s)


def _garbage_after_header(server: HivemeshProcess, during: Callable[[], None]) -> None:
    rng = random.Random(2)
    with _raw(server) as s:
        _send(s, _message_header("get_table") + rng.randbytes(64 * 1024))
        during()
        _shut_wr(s)
        assert _server_closes(s)


def _truncated_then_eof(server: HivemeshProcess, during: Callable[[], None]) -> None:
    call = _call_bytes("get_table", MARKER_DB, "marker")
    with _raw(server) as s:
        _send(s, call[: len(call) // 2])
        during()  # the server waits for the rest of that message; others are served
        _shut_wr(s)
        assert _server_closes(s)


def _disconnect_mid_message(server: HivemeshProcess, during: Callable[[], None]) -> None:
    name = "half_" + uuid.uuid4().hex[:8]
    call = _call_bytes("create_database", Database(name=name, description="x" * 10_000))
    s = _raw(server)
    _send(s, call[: len(call) - 100])
    during()
    _reset_close(s)
    during()
    with _client(server.host, server.port) as c, pytest.raises(NoSuchObjectException):
        c.get_database(name)  # the half-sent call was not executed


def _close_before_reply(server: HivemeshProcess, during: Callable[[], None]) -> None:
    # a 4 MB reply (more than the socket buffers hold) to a client that vanishes while it is sent
    with _raw(server) as s:
        _send(s, _call_bytes("get_table", MARKER_DB, "bulky"))
        assert s.recv(1)  # the server has started writing the reply
        during()
        _reset_close(s)
    during()


def _oversized_string(server: HivemeshProcess, during: Callable[[], None]) -> None:
    # a 200 MB string (over the 100 MB limit): refused on its length, without waiting for the bytes
    field = b"\x0b\x00\x01" + struct.pack("!i", 200 * MB)  # get_database(name: string #1)
    with _raw(server) as s:
        _send(s, _message_header("get_database") + field + b"abc")
        during()
        assert _server_closes(s)


def _oversized_method_name(server: HivemeshProcess, during: Callable[[], None]) -> None:
    with _raw(server) as s:
        _send(s, struct.pack("!iI", -2147418111, 200 * MB) + b"get_")
        during()
        assert _server_closes(s)


def _negative_length(server: HivemeshProcess, during: Callable[[], None]) -> None:
    field = b"\x0b\x00\x01" + struct.pack("!i", -5)
    with _raw(server) as s:
        _send(s, _message_header("get_database") + field)
        during()
        assert _server_closes(s)


def _deep_nesting(server: HivemeshProcess, during: Callable[[], None]) -> None:
    # struct in struct in struct ... (a recursion bomb) in an unknown field of a known call
    with _raw(server) as s:
        _send(s, _message_header("get_database") + b"\x0c\x00\x09" * 100_000)
        during()
        _shut_wr(s)
        assert _server_closes(s)


def _framed_client(server: HivemeshProcess, during: Callable[[], None]) -> None:
    with _client(server.host, server.port, framed=True) as c:
        during()
        _dropped_not_hung(lambda: c.get_database("default"))


def _compact_client(server: HivemeshProcess, during: Callable[[], None]) -> None:
    with _client(server.host, server.port, compact=True) as c:
        during()
        _dropped_not_hung(lambda: c.get_database("default"))


def _silent_client(server: HivemeshProcess, during: Callable[[], None]) -> None:
    with _raw(server):
        during()  # an idle connection holds no shared resource
        with _raw(server):
            during()


ABUSES = {
    "random_bytes": _random_bytes,
    "garbage_after_header": _garbage_after_header,
    "truncated_then_eof": _truncated_then_eof,
    "disconnect_mid_message": _disconnect_mid_message,
    "close_before_reply": _close_before_reply,
    "oversized_string": _oversized_string,
    "oversized_method_name": _oversized_method_name,
    "negative_length": _negative_length,
    "deep_nesting": _deep_nesting,
    "framed_client_to_unframed_server": _framed_client,
    "compact_client_to_binary_server": _compact_client,
    "silent_client": _silent_client,
}


@pytest.mark.parametrize("abuse", list(ABUSES))
def test_abusive_connection_only_ends_itself(server: HivemeshProcess, health: Health, abuse: str) -> None:
    ABUSES[abuse](server, health.during)
    health.after()


def test_all_abuses_at_once_while_clients_work(server: HivemeshProcess, health: Health) -> None:
    """Every abuse on its own connection at the same time, while 8 clients keep calling."""
    errors: list[str] = []
    stop = threading.Event()

    def worker(i: int) -> None:
        try:
            with _client(server.host, server.port) as c:
                while not stop.is_set():
                    _check_marker(c)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"worker {i}: {e!r}")

    def during() -> None:  # from many threads at once: a connection each
        with _client(server.host, server.port) as c:
            _check_marker(c)

    def abuser(name: str) -> None:
        try:
            ABUSES[name](server, during)
        except BaseException as e:  # noqa: BLE001 - pytest.fail and assertions included
            errors.append(f"{name}: {e!r}")

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(8)]
    abusers = [threading.Thread(target=abuser, args=(n,), daemon=True) for n in ABUSES]
    for t in workers + abusers:
        t.start()
    for t in abusers:
        t.join(DEADLINE_S * 2)
    stop.set()
    for t in workers:
        t.join(DEADLINE_S)
    assert not [t.name for t in workers + abusers if t.is_alive()], "a client hung"
    assert not errors, "\n".join(errors)
    health.during()
    health.after()


def test_length_claims_do_not_reserve_memory(server: HivemeshProcess, health: Health) -> None:
    """Strings announced at 99 MB (under the limit) whose bytes never come: the server waits for
    them without setting aside the announced size (10 such connections would otherwise take 1 GB)."""
    psutil = pytest.importorskip("psutil")
    proc = psutil.Process(server.proc.pid)  # type: ignore[union-attr]
    before = proc.memory_info().rss
    field = b"\x0b\x00\x01" + struct.pack("!i", 99 * MB)  # get_database(name: string #1)
    socks = [_raw(server) for _ in range(10)]
    try:
        for s in socks:
            _send(s, _message_header("get_database") + field + b"n" * 1000)
        health.during()  # served while 10 connections wait for their 99 MB
        peak = max(proc.memory_info().rss for _ in range(20) if health.client.getVersion())
        assert peak - before < 300 * MB, f"server memory grew by {(peak - before) // MB} MB"
    finally:
        for s in socks:
            _reset_close(s)
    health.after()


def test_every_method_with_null_arguments_gets_an_answer(server: HivemeshProcess, health: Health) -> None:
    """Each implemented call with all arguments missing: a declared HMS exception (or, where the IDL
    declares none, TApplicationException INTERNAL_ERROR), never a dropped connection."""
    methods = sorted(implemented_methods(LocalMetastore.__new__(LocalMetastore)) - {"shutdown"})
    assert len(methods) > 50
    wrong: list[str] = []
    with _client(server.host, server.port) as c:
        for name in methods:
            fn = getattr(c, name)
            try:
                fn(*[None] * len(inspect.signature(fn).parameters))
            except TApplicationException as e:
                declares_meta = any(
                    spec and spec[3] and spec[3][0] is MetaException
                    for spec in getattr(ThriftHiveMetastore, f"{name}_result").thrift_spec or ()
                )
                if e.type != TApplicationException.INTERNAL_ERROR or declares_meta:
                    wrong.append(f"{name}: {e!r}")
            except TTransport.TTransportException as e:
                pytest.fail(f"{name}(None, ...) dropped the connection: {e!r}")
            except TException:
                pass  # a declared HMS exception: the expected answer
            assert c.getVersion()  # the same connection is still in sync
    assert not wrong, wrong
    health.during()
    health.after_without_log_check()


# ---------------------------------------------------------------- fb303 shutdown, connection count


def test_fb303_shutdown_never_stops_the_server(server: HivemeshProcess, health: Health) -> None:
    # What the Hive 2.3 client does: set_ugi on connect, calls, the oneway shutdown() on close.
    for _ in range(3):
        with _client(server.host, server.port) as c:
            assert c.set_ugi("spark", ["users"]) == ["users"]
            _check_marker(c)
            c.shutdown()
            _check_marker(c)  # the same connection is still served after shutdown()
            c.shutdown()
    health.client.shutdown()
    health.during()
    health.after()


def test_more_than_200_simultaneous_connections_are_all_served(server: HivemeshProcess) -> None:
    n = 220
    clients: list[ThriftClient] = []
    try:
        for _ in range(n):  # all connected before any call: a 10-worker pool would hang the 11th
            clients.append(ThriftClient(server.host, server.port, timeout_ms=int(DEADLINE_S * 1000)))
        barrier = threading.Barrier(n)
        answers: list[object] = [None] * n

        def call(i: int) -> None:
            try:
                barrier.wait(DEADLINE_S)
                c = clients[i].client
                answers[i] = (c.getVersion()[:1], c.get_table(MARKER_DB, "marker").parameters["marker"])
            except Exception as e:  # noqa: BLE001 - reported below
                answers[i] = e

        threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE_S * 2)
        version = answers[0][0] if isinstance(answers[0], tuple) else "4"
        bad = [(i, a) for i, a in enumerate(answers) if a != (version, "still-here")]
        assert not bad, f"{len(bad)} of {n} connections not served, e.g. {bad[:3]}"
        # every connection is still open and served, oldest last
        for i in reversed(range(n)):
            assert clients[i].client.get_database(MARKER_DB).name == MARKER_DB
    finally:
        for c in clients:
            c.close()
    with _client(server.host, server.port) as fresh:
        _check_marker(fresh)


# ---------------------------------------------------------------- 50 MB strings


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HivemeshProcess]:
    """A server on a fresh store of each backend (dropped afterwards)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'metastore.db'}"
    elif not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    else:
        url = make_pg_database("hivemesh_robust")
    try:
        with HivemeshProcess(url, tmp_path / "warehouse", tmp_path / "metastore.log") as proc:
            yield proc
    finally:
        if request.param == "postgres":
            _drop_pg_database(url)


def test_50mb_strings_get_an_answer(backend_server: HivemeshProcess) -> None:
    srv = backend_server
    big = 50 * MB
    with ThriftClient(srv.host, srv.port) as healthy, _client(srv.host, srv.port, unlimited=True) as c:
        healthy.create_database(Database(name="big"))
        healthy.create_table(
            Table(tableName="small", dbName="big", sd=StorageDescriptor(cols=[FieldSchema("a", "int", None)]))
        )
        # a 50 MB description: stored, or refused with an HMS exception (column sizes differ per
        # backend) but never a dropped connection, an internal error or a half-created database
        try:
            c.create_database(Database(name="bigdesc", description="d" * big))
        except (MetaException, InvalidObjectException):
            with pytest.raises(NoSuchObjectException):
                c.get_database("bigdesc")
        else:
            assert c.get_database("bigdesc").description == "d" * big
        assert healthy.get_table("big", "small").sd.cols[0].name == "a"

        # a 50 MB name that does not exist
        with pytest.raises(NoSuchObjectException):
            c.get_database("n" * big)

        # a 50 MB table parameter (Spark keeps schemas in parameters): kept verbatim
        value = ("".join(random.Random(5).choices("abcdefghij{}:,\"'é", k=MB)) * 50)[:big]
        c.create_table(
            Table(
                tableName="bigparam",
                dbName="big",
                parameters={"spark.sql.sources.schema": value},
                sd=StorageDescriptor(cols=[FieldSchema("a", "int", None)]),
            )
        )
        assert healthy.get_database("big").name == "big"
        assert c.get_table("big", "bigparam").parameters["spark.sql.sources.schema"] == value
        c.drop_database("big", True, True)
        assert srv.proc is not None and srv.proc.poll() is None
        assert "default" in c.get_all_databases()
        assert "default" in healthy.get_all_databases()


def test_framed_server_takes_messages_up_to_the_configured_limit(tmp_path: Path) -> None:
    """--framed: frames over Thrift's 16 MB default are accepted up to the limit, larger refused."""
    proc = HivemeshProcess(
        f"sqlite:///{tmp_path / 'm.db'}", tmp_path / "wh", tmp_path / "metastore.log", extra_args=["--framed"]
    )
    with proc, _client(proc.host, proc.port, framed=True, unlimited=True) as c:
        value = "v" * (24 * MB)
        c.create_table(
            Table(
                tableName="wide",
                dbName="default",
                parameters={"p": value},
                sd=StorageDescriptor(cols=[FieldSchema("a", "int", None)]),
            )
        )
        assert c.get_table("default", "wide").parameters["p"] == value
        with _raw(proc) as s:
            _send(s, struct.pack("!i", 200 * MB) + _call_bytes("get_database", "default"))
            assert _server_closes(s)
        assert c.get_table("default", "wide").tableName == "wide"
        assert proc.proc is not None and proc.proc.poll() is None


# ---------------------------------------------------------------- configuration and CLI errors


def _run_metastore(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVEMESH_")}
    cmd = [sys.executable, "-m", "hivemesh.cli", "metastore", "--log-level", "WARNING", *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=DEADLINE_S)


def _assert_clean_failure(r: subprocess.CompletedProcess[str], code: int | None, *needles: str) -> None:
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    if code is not None:
        assert r.returncode == code, out
    assert "Traceback" not in out, out
    assert "listening on" not in r.stdout, out
    for needle in needles:
        assert needle in out, f"{needle!r} not in:\n{out}"


def test_cli_invalid_db_url(tmp_path: Path) -> None:
    r = _run_metastore(tmp_path, "--port", "0", "--db", "mysql://root@localhost/hive")
    _assert_clean_failure(
        r, None, "metastore.db", "sqlite:///", "postgresql+psycopg://", "mysql://root@localhost/hive"
    )


def test_cli_unreachable_store(tmp_path: Path) -> None:
    r = _run_metastore(tmp_path, "--port", "0", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/nowhere")
    _assert_clean_failure(r, 2, "cannot open the metadata store", "127.0.0.1", "1")


def test_cli_sqlite_directory_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    r = _run_metastore(tmp_path, "--port", "0", "--db", f"sqlite:///{tmp_path / 'afile' / 'sub' / 'm.db'}")
    _assert_clean_failure(r, 2, "metadata store")
    assert "cannot listen" not in r.stderr


@pytest.mark.parametrize(
    ("yaml_text", "needles"),
    [
        ("metastore:\n  prot: 9083\n", ["metastore.prot", "Extra inputs are not permitted"]),
        ("metastor:\n  port: 9083\n", ["metastor", "Extra inputs are not permitted"]),
        (
            "metastore:\n  port: nine\n  framed: maybe\n",
            ["metastore.port", "valid integer", "'nine'", "metastore.framed", "valid boolean"],
        ),
        ("metastore:\n  port: 70000\n", ["metastore.port", "less than or equal to 65535"]),
        ("metastore:\n  port: [9083\n", ["is not valid YAML", "line"]),
        ("- metastore\n", ["top level must be a mapping"]),
    ],
    ids=["unknown_key", "unknown_section", "wrong_types", "out_of_range", "bad_yaml", "not_a_mapping"],
)
def test_cli_invalid_config_file(tmp_path: Path, yaml_text: str, needles: list[str]) -> None:
    cfg = tmp_path / "mesh.yaml"
    cfg.write_text(yaml_text, encoding="utf-8")
    r = _run_metastore(tmp_path, "--config", str(cfg))
    _assert_clean_failure(r, None, "mesh.yaml", *needles)


def test_cli_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = _run_metastore(
            tmp_path,
            "--port",
            str(port),
            "--db",
            f"sqlite:///{tmp_path / 'm.db'}",
            "--warehouse",
            str(tmp_path),
        )
    _assert_clean_failure(r, 2, f"cannot listen on 127.0.0.1:{port}", "Address already in use")
