"""get_partitions encoded straight from rows (:mod:`hivemesh.metastore.partition_wire`) is byte for
byte what the thrift library encodes from the Partition objects, on both stores, for partitions of
every shape the store keeps; and over TCP the server answers with it only where it may."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    NoSuchObjectException,
    Order,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TFramedTransport, TMemoryBuffer, TTransportBase

from hivemesh.metastore import partition_wire, rows
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.store import Store
from tests.conftest import pg_database
from tests.support.servers import HivemeshProcess

COLS = [
    FieldSchema("id", "bigint", "the key"),
    FieldSchema("név", "string", None),
    FieldSchema("x", "int", ""),
]


def _sd(location: str | None, cols: list[FieldSchema] = COLS, **kw: object) -> StorageDescriptor:
    return StorageDescriptor(
        cols=cols,
        location=location,
        inputFormat=kw.get("inputFormat", "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"),  # type: ignore[arg-type]
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        compressed=bool(kw.get("compressed", False)),
        numBuckets=kw.get("numBuckets", -1),  # type: ignore[arg-type]
        serdeInfo=kw.get(  # type: ignore[arg-type]
            "serdeInfo",
            SerDeInfo(
                name=None,
                serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                parameters={"serialization.format": "1"},
            ),
        ),
        bucketCols=kw.get("bucketCols", []),  # type: ignore[arg-type]
        sortCols=kw.get("sortCols", []),  # type: ignore[arg-type]
        parameters=kw.get("parameters", {}),  # type: ignore[arg-type]
        storedAsSubDirectories=False,
    )


def _fill(handler: LocalMetastore, root: str) -> None:
    """A table whose partitions differ in every way the store keeps."""
    handler.create_database(Database(name="w", description="", parameters={}))
    handler.create_table(
        Table(
            tableName="t",
            dbName="w",
            owner="me",
            sd=_sd(f"{root}/t"),
            partitionKeys=[FieldSchema("ds", "string", None), FieldSchema("hr", "int", None)],
            parameters={},
            tableType="MANAGED_TABLE",
        )
    )
    shapes = [
        {},
        {"compressed": True, "numBuckets": 4, "bucketCols": ["id"], "sortCols": [Order("id", 1), Order("x", 0)]},
        {"parameters": {"a": "1", "b": "", "ünï": "cödé"}},
        {"serdeInfo": SerDeInfo(name="s", serializationLib="lib", parameters={}, description="d",
                                serializerClass="ser", deserializerClass="de", serdeType=1)},
        {"cols": [FieldSchema("other", "string", "own columns")]},
    ]  # fmt: skip
    parts = []
    for i, shape in enumerate(shapes * 3):
        cols = shape.pop("cols", COLS) if isinstance(shape, dict) and "cols" in shape else COLS
        parts.append(
            Partition(
                values=[f"2024-01-{i + 1:02d}", str(i)],
                dbName="w",
                tableName="t",
                sd=_sd(f"{root}/t/p{i}", cols, **shape),  # type: ignore[arg-type]
                parameters={"numRows": str(i), "x y": "z/é"} if i % 2 else {},
            )
        )
    handler.add_partitions(parts)


@pytest.fixture(params=["sqlite", "postgres"])
def handler(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalMetastore]:
    if request.param == "sqlite":
        store = Store(f"sqlite:///{tmp_path / 'm.db'}")
        yield LocalMetastore(store, str(tmp_path / "wh"))
        store.dispose()
        return
    with pg_database("hivemesh_wire") as url:
        store = Store(url)
        yield LocalMetastore(store, str(tmp_path / "wh"))
        store.dispose()


def _library_bytes(parts: list[Partition]) -> bytes:
    buf = TMemoryBuffer()
    ThriftHiveMetastore.get_partitions_result(success=parts).write(TBinaryProtocolAccelerated(buf))
    return buf.getvalue()


def test_rows_encode_to_the_librarys_bytes(handler: LocalMetastore, tmp_path: Path) -> None:
    _fill(handler, str(tmp_path / "wh"))
    objects = handler.get_partitions("w", "t", -1)
    assert len(objects) == 15 and {len(p.sd.cols) for p in objects} == {1, 3}
    with handler.read() as conn:
        info = handler._table_info(conn, "w", "t")
        base, ch = rows.table_partition_rows(conn, info.id)
    body = partition_wire.encode_partitions(base, ch, info.db, info.name, info.cat)
    assert partition_wire.GET_PARTITIONS_SUCCESS + body + b"\x00" == _library_bytes(objects)


def test_an_empty_table_encodes_an_empty_list(handler: LocalMetastore, tmp_path: Path) -> None:
    _fill(handler, str(tmp_path / "wh"))
    handler.create_table(
        Table(tableName="e", dbName="w", sd=_sd(None), partitionKeys=[FieldSchema("k", "string", None)],
              parameters={}, tableType="MANAGED_TABLE")
    )  # fmt: skip
    with handler.read() as conn:
        info = handler._table_info(conn, "w", "e")
        base, ch = rows.table_partition_rows(conn, info.id)
    body = partition_wire.encode_partitions(base, ch, info.db, info.name, info.cat)
    assert partition_wire.GET_PARTITIONS_SUCCESS + body + b"\x00" == _library_bytes([])


def test_over_tcp_binary_framed_and_compact_servers_give_the_same_partitions(tmp_path: Path) -> None:
    """A binary server answers with the direct encoding (unframed and framed), a compact one with
    the objects; a limit and a missing table take the normal path (NoSuchObjectException)."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = Store(url)
    handler = LocalMetastore(store, str(tmp_path / "wh"))
    _fill(handler, str(tmp_path / "wh"))
    expected = handler.get_partitions("w", "t", -1)
    store.dispose()
    assert len(expected) == 15 and expected[1].sd.sortCols == [Order("id", 1), Order("x", 0)]
    for protocol in ("--binary", "--framed", "--compact"):
        args = [protocol] if protocol != "--binary" else []
        with HivemeshProcess(url, tmp_path / "wh", tmp_path / f"{protocol}.log", extra_args=args) as proc:
            transport: TTransportBase = TSocket(proc.host, proc.port)
            transport = (
                TFramedTransport(transport) if protocol == "--framed" else TBufferedTransport(transport)
            )
            transport.open()
            try:
                proto = TCompactProtocolAccelerated if protocol == "--compact" else TBinaryProtocolAccelerated
                client = ThriftHiveMetastore.Client(proto(transport))
                assert client.get_partitions("w", "t", -1) == expected, protocol
                assert client.get_partitions("w", "t", 4) == expected[:4], protocol
                with pytest.raises(NoSuchObjectException):
                    client.get_partitions("w", "missing", -1)
                assert client.get_partitions("w", "t", -1) == expected, f"{protocol}: the connection goes on"
            finally:
                transport.close()


def test_the_relay_hook_answers_only_whole_table_reads_on_binary(
    handler: LocalMetastore, tmp_path: Path
) -> None:
    _fill(handler, str(tmp_path / "wh"))
    expected = handler.get_partitions("w", "t", -1)

    def relay(proto: type, max_parts: int, table: str = "t") -> tuple[bool, bytes]:
        buf = TMemoryBuffer()
        args = ThriftHiveMetastore.get_partitions_args(db_name="w", tbl_name=table, max_parts=max_parts)
        return handler.relay("get_partitions", args, 7, proto(buf)), buf.getvalue()

    answered, raw = relay(TBinaryProtocolAccelerated, -1)
    assert answered
    reply = TBinaryProtocolAccelerated(TMemoryBuffer(raw))
    assert reply.readMessageBegin()[1:] == (2, 7)  # REPLY, the call's sequence id
    result = ThriftHiveMetastore.get_partitions_result()
    result.read(reply)
    assert result.success == expected
    assert relay(TCompactProtocolAccelerated, -1) == (False, b"")
    assert relay(TBinaryProtocolAccelerated, 3) == (False, b"")
    assert relay(TBinaryProtocolAccelerated, -1, "missing") == (False, b"")
