"""hivemesh.client.hms.HmsCalls (the typed HMS calls) and hivemesh.client.errors, against a real
hivemesh metastore over TCP, some calls through a small TCP proxy that sees each call's method name
and can refuse a method (as Hive 4.2 refuses get_table) or cut the connection before a reply."""

from __future__ import annotations

import inspect
import operator
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hive_metastore import ThriftHiveMetastore, ttypes
from hive_metastore.ttypes import (
    AlreadyExistsException,
    CommitTxnRequest,
    ConfigValSecurityException,
    Database,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    NoSuchTxnException,
    StorageDescriptor,
    Table,
)
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TException, TMessageType
from thrift.transport import TTransport
from thrift.transport.TTransport import TTransportException

from hivemesh.acid.tables import transactional_table
from hivemesh.client.errors import (
    TRANSLATED,
    AlreadyExistsError,
    ConfigValSecurityError,
    HmsError,
    InvalidObjectError,
    InvalidOperationError,
    MetaError,
    MetastoreClientError,
    NoSuchObjectError,
    NoSuchTxnError,
    error_name,
    translate,
)
from hivemesh.client.hms import RETRY, HmsCalls, Retry
from hivemesh.client.metastore import MetastoreClient
from tests.support.servers import HivemeshProcess

HMS_METHODS = sorted(n for n, f in inspect.getmembers(HmsCalls, inspect.isfunction) if not n.startswith("_"))


# --- the typed class against the Thrift interface ------------------------------------------------


def test_every_method_is_an_hms_call_with_its_thrift_parameters() -> None:
    assert len(HMS_METHODS) > 50
    for name in HMS_METHODS:
        iface = getattr(ThriftHiveMetastore.Iface, name, None)
        assert iface is not None, f"HmsCalls.{name} is no method of ThriftHiveMetastore.Iface"
        ours = list(inspect.signature(getattr(HmsCalls, name)).parameters)
        thrift = list(inspect.signature(iface).parameters)
        assert ours == thrift, name
        assert getattr(HmsCalls, name).__doc__, f"HmsCalls.{name} has no docstring"


def test_retry_table_has_one_entry_per_method() -> None:
    assert set(RETRY) == set(HMS_METHODS)
    assert RETRY["get_table"] is Retry.IDEMPOTENT
    assert RETRY["create_table"] is Retry.ONCE
    assert RETRY["open_txns"] is Retry.ONCE
    assert RETRY["heartbeat"] is Retry.IDEMPOTENT


class _Recorder:
    """A stand-in for MetastoreClient: records each call and answers None."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], bool]] = []

    def call(self, method: str, *args: Any, idempotent: bool = False) -> Any:
        self.calls.append((method, args, idempotent))
        return None


def test_each_method_sends_its_own_name_and_arguments_with_its_retry_class() -> None:
    for name in HMS_METHODS:
        recorder = _Recorder()
        params = list(inspect.signature(getattr(HmsCalls, name)).parameters)[1:]
        args = tuple(f"<{p}>" for p in params)
        getattr(HmsCalls(recorder), name)(*args)
        assert recorder.calls == [(name, args, RETRY[name] is Retry.IDEMPOTENT)], name


def test_keyword_arguments_are_thrift_names() -> None:
    recorder = _Recorder()
    HmsCalls(recorder).drop_table(dbname="db", name="t", deleteData=False)
    assert recorder.calls == [("drop_table", ("db", "t", False), False)]


# --- the exception table -------------------------------------------------------------------------


def _thrift_exception_classes() -> list[type[Exception]]:
    return [
        cls
        for _, cls in inspect.getmembers(ttypes, inspect.isclass)
        if issubclass(cls, TException) and cls.__module__ == ttypes.__name__
    ]


def test_every_hms_exception_has_a_hivemesh_error_that_still_is_it() -> None:
    classes = _thrift_exception_classes()
    assert len(classes) == 15 and set(TRANSLATED) == set(classes)
    for thrift_cls in classes:
        cls = TRANSLATED[thrift_cls]
        original = thrift_cls(message="the text")
        error = translate(original)
        assert type(error) is cls and cls is not thrift_cls
        assert isinstance(error, thrift_cls) and isinstance(error, HmsError)
        assert isinstance(error, MetastoreClientError)
        assert error.message == "the text"
        assert str(error) == f"{cls.__name__}(message='the text')"
        assert error == original and original == error
        assert operator.ne(error, original) is False and operator.ne(original, error) is False
        assert hash(error) == hash(original)
        assert error != thrift_cls(message="other text")
        assert error_name(error) == thrift_cls.__name__
        assert translate(error) is error  # translated once only
        with pytest.raises(thrift_cls) as caught:
            raise error from original
        assert caught.value.__cause__ is original


def test_translate_leaves_other_errors_alone() -> None:
    for error in (
        TApplicationException(TApplicationException.UNKNOWN_METHOD, "x"),
        TTransportException(),
        OSError(),
    ):
        assert translate(error) is error
    assert error_name(OSError()) == "OSError"


# --- against a real metastore --------------------------------------------------------------------


@pytest.fixture()
def client(hivemesh_server: HivemeshProcess) -> Iterator[MetastoreClient]:
    with MetastoreClient(hivemesh_server.uri) as c:
        yield c


@pytest.fixture()
def db(client: MetastoreClient, unique_name: str) -> Iterator[str]:
    client.hms.create_database(Database(name=unique_name, description="hms calls", parameters={}))
    client.hms.create_table(transactional_table(unique_name, "t", [("a", "int")]))
    yield unique_name
    client.hms.drop_database(unique_name, True, True)


def _expect(call: Callable[[], Any], error: type[HmsError], thrift: type[Exception], *words: str) -> HmsError:
    with pytest.raises(thrift) as caught:
        call()
    e = caught.value
    assert type(e) is error, type(e)
    assert isinstance(e.__cause__, thrift) and type(e.__cause__) is thrift
    assert all(w in (e.message or "") for w in words), e.message
    assert e.message == e.__cause__.message
    return e


def test_hms_exceptions_arrive_translated(client: MetastoreClient, db: str) -> None:
    hms = client.hms
    _expect(lambda: hms.get_table(db, "nope"), NoSuchObjectError, NoSuchObjectException, "nope")
    _expect(lambda: hms.get_database(db + "_nope"), NoSuchObjectError, NoSuchObjectException, db)
    _expect(
        lambda: hms.create_database(Database(name=db, parameters={})),
        AlreadyExistsError,
        AlreadyExistsException,
        db,
    )
    _expect(lambda: hms.drop_database(db, False, False), InvalidOperationError, InvalidOperationException, db)
    _expect(
        lambda: hms.create_table(Table(dbName=db, tableName="bad name", sd=StorageDescriptor(cols=[]))),
        InvalidObjectError,
        InvalidObjectException,
        "bad name",
    )
    _expect(lambda: hms.get_partitions_by_filter(db, "t", "a >>>", -1), MetaError, MetaException, "filter")
    _expect(
        lambda: hms.commit_txn(CommitTxnRequest(txnid=2**40)), NoSuchTxnError, NoSuchTxnException, str(2**40)
    )
    _expect(
        lambda: hms.get_config_value("javax.jdo.option.ConnectionPassword", "x"),
        ConfigValSecurityError,
        ConfigValSecurityException,
        "javax.jdo.option.ConnectionPassword",
    )
    # the client's own typed methods go through the same boundary
    _expect(lambda: client.commit_txn(2**40), NoSuchTxnError, NoSuchTxnException, str(2**40))
    # the connection is still usable, and the database still there
    assert hms.get_database(db).name == db


def test_application_errors_pass_unchanged(client: MetastoreClient) -> None:
    with pytest.raises(TApplicationException) as caught:
        client.call("get_partitions_by_expr", None)
    assert type(caught.value) is TApplicationException
    assert caught.value.type == TApplicationException.UNKNOWN_METHOD


# --- a proxy that sees the calls -----------------------------------------------------------------


def _method_of(data: bytes) -> tuple[str, int] | None:
    """Method name and seqid of a strict binary Thrift call starting ``data``, or None."""
    if len(data) < 8:
        return None
    version, size = struct.unpack("!iI", data[:8])
    if version & TBinaryProtocol.TBinaryProtocol.VERSION_MASK != TBinaryProtocol.TBinaryProtocol.VERSION_1:
        return None
    if len(data) < 12 + size:
        return None
    (seqid,) = struct.unpack("!i", data[8 + size : 12 + size])
    return data[8 : 8 + size].decode(), seqid


def _unknown_method_reply(name: str, seqid: int) -> bytes:
    buf = TTransport.TMemoryBuffer()
    out = TBinaryProtocol.TBinaryProtocol(buf)
    out.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
    TApplicationException(TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'").write(out)
    out.writeMessageEnd()
    return bytes(buf.getvalue())


class CallProxy:
    """A TCP proxy to ``host:port`` that reads the method name of each call (unframed binary
    protocol; a call is taken to arrive in one read, true of these small calls over loopback).

    ``calls``: the methods seen, in order. ``refuse``: methods answered here with UNKNOWN_METHOD.
    ``cut``: methods whose next call is forwarded, and whose reply is then dropped with the
    connection (once each). ``connections``: connections accepted.
    """

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.calls: list[str] = []
        self.refuse: set[str] = set()
        self.cut: set[str] = set()
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self.upstream)
            state = {"cutting": False}
            threading.Thread(target=self._requests, args=(conn, upstream, state), daemon=True).start()
            threading.Thread(target=self._replies, args=(conn, upstream, state), daemon=True).start()

    def _requests(self, conn: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        try:
            while data := conn.recv(1 << 16):
                head = _method_of(data)
                if head is not None:
                    name, seqid = head
                    self.calls.append(name)
                    if name in self.refuse:
                        conn.sendall(_unknown_method_reply(name, seqid))
                        continue
                    if name in self.cut:
                        self.cut.discard(name)
                        state["cutting"] = True
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(conn, upstream)

    def _replies(self, conn: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        try:
            while data := upstream.recv(1 << 16):
                if state["cutting"]:  # the metastore did the call: its answer is lost with the connection
                    break
                conn.sendall(data)
        except OSError:
            pass
        finally:
            _close(conn, upstream)

    def close(self) -> None:
        self._stop = True
        self._listener.close()


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


@pytest.fixture()
def proxy(hivemesh_server: HivemeshProcess) -> Iterator[CallProxy]:
    p = CallProxy(hivemesh_server.host, hivemesh_server.port)
    yield p
    p.close()


@pytest.fixture()
def proxied(proxy: CallProxy) -> Iterator[MetastoreClient]:
    with MetastoreClient(proxy.uri, retries=2, retry_backoff_s=0.01) as c:
        yield c


def test_calls_dropped_by_hive4_go_as_their_request_forms(
    proxy: CallProxy, proxied: MetastoreClient, db: str
) -> None:
    proxy.refuse = {"get_table", "get_table_objects_by_name"}
    hms = HmsCalls(proxied)
    proxy.calls.clear()
    assert hms.get_table(db, "t").tableName == "t"
    assert proxy.calls == ["get_table", "get_table_req"]
    assert hms.get_table(db, "t").dbName == db  # remembered: the request form at once
    assert [t.tableName for t in hms.get_table_objects_by_name(db, ["t", "nope"])] == ["t"]
    assert proxy.calls == [
        "get_table",
        "get_table_req",
        "get_table_req",
        "get_table_objects_by_name",
        "get_table_objects_by_name_req",
    ]
    _expect(lambda: hms.get_table(db, "nope"), NoSuchObjectError, NoSuchObjectException, "nope")
    # a call without a request form is not rewritten: the refusal reaches the caller
    proxy.refuse.add("get_all_tables")
    with pytest.raises(TApplicationException) as caught:
        hms.get_all_tables(db)
    assert caught.value.type == TApplicationException.UNKNOWN_METHOD
    assert "get_all_tables_req" not in proxy.calls


def test_plain_calls_go_plain_to_a_peer_that_has_them(
    proxy: CallProxy, proxied: MetastoreClient, db: str
) -> None:
    proxy.calls.clear()
    assert proxied.hms.get_table(db, "t").tableName == "t"
    assert proxy.calls == ["get_table"]


def test_a_read_is_sent_again_after_the_connection_drops(proxy: CallProxy, proxied: MetastoreClient) -> None:
    proxy.calls.clear()
    before = proxy.connections
    proxy.cut = {"get_all_databases"}
    assert "default" in proxied.hms.get_all_databases()
    assert proxy.calls == ["get_all_databases", "get_all_databases"]
    assert proxy.connections == before + 1  # on a new connection


def test_a_write_is_not_sent_again_after_the_connection_drops(
    proxy: CallProxy, proxied: MetastoreClient, client: MetastoreClient, unique_name: str
) -> None:
    proxy.calls.clear()
    proxy.cut = {"create_database"}
    with pytest.raises(TTransportException):
        proxied.hms.create_database(Database(name=unique_name, parameters={}))
    assert proxy.calls == ["create_database"]
    try:
        assert client.hms.get_database(unique_name).name == unique_name  # the metastore did it, once
        assert proxied.hms.get_all_databases().count(unique_name) == 1  # the client works again
    finally:
        client.hms.drop_database(unique_name, False, False)
