"""Hive notification events: type names, JSON message builders, and decoding back to Thrift objects.

Every successful metadata change appends a ``NotificationEvent`` (``notification_log.py``) whose
``message`` follows Hive's JSON message format ``json-0.2`` (Hive's ``JSONMessageEncoder``: the
``org.apache.hadoop.hive.metastore.messaging.json.JSON*Message`` classes, serialized by Jackson
with only their ``@JsonProperty`` fields). The rules taken from Hive:

- a message is one JSON object without spaces; ``timestamp`` is in seconds;
- ``server`` and ``servicePrincipal`` are the metastore's URI and Kerberos principal ("" here);
- Thrift objects travel as strings holding their **TJSONProtocol** serialization (what Hive's
  ``MessageBuilder.create*ObjJson`` makes with ``TSerializer(new TJSONProtocol.Factory())``):
  ``dbJson``, ``tableObjJson``, ``partitionListJson``, ``functionObjJson``, ``colStatsJson``, ...;
- booleans that Hive keeps as strings (``isTruncateOp``, ``replace``) are ``"true"``/``"false"``;
- file lists hold ReplChangeManager-encoded URIs (:func:`encode_file_uri`).

:func:`thrift_json` is a fast TJSONProtocol writer (the Thrift library's pure-Python protocol is
about ten times slower, which matters for ``add_partitions`` of thousands of partitions); it writes
what Java's TJSONProtocol writes (Java ``Double.toString`` numbers, unpadded base64).
:func:`parse_event` turns a stored event back into a typed message with its Thrift objects.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from hive_metastore.ttypes import (
    ColumnStatistics,
    Database,
    FieldSchema,
    Function,
    InsertEventRequestData,
    NotificationEvent,
    Partition,
    Table,
    TxnToWriteId,
    WriteEventInfo,
)
from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.Thrift import TType
from thrift.TSerialization import deserialize, serialize

from hivemesh.hive.constants import now_s
from hivemesh.hive.names import make_part_name

# ---------------------------------------------------------------- event types (Hive's MessageBuilder)
CREATE_DATABASE = "CREATE_DATABASE"
ALTER_DATABASE = "ALTER_DATABASE"
DROP_DATABASE = "DROP_DATABASE"
CREATE_TABLE = "CREATE_TABLE"
ALTER_TABLE = "ALTER_TABLE"
DROP_TABLE = "DROP_TABLE"
ADD_PARTITION = "ADD_PARTITION"
ALTER_PARTITION = "ALTER_PARTITION"
DROP_PARTITION = "DROP_PARTITION"
INSERT = "INSERT"
CREATE_FUNCTION = "CREATE_FUNCTION"
DROP_FUNCTION = "DROP_FUNCTION"
OPEN_TXN = "OPEN_TXN"
COMMIT_TXN = "COMMIT_TXN"
ABORT_TXN = "ABORT_TXN"
ALLOC_WRITE_ID_EVENT = "ALLOC_WRITE_ID_EVENT"
ACID_WRITE_EVENT = "ACID_WRITE_EVENT"
UPDATE_TBL_COL_STAT_EVENT = "UPDATE_TBL_COL_STAT_EVENT"
DELETE_TBL_COL_STAT_EVENT = "DELETE_TBL_COL_STAT_EVENT"
UPDATE_PART_COL_STAT_EVENT = "UPDATE_PART_COL_STAT_EVENT"
DELETE_PART_COL_STAT_EVENT = "DELETE_PART_COL_STAT_EVENT"

SERVER = ""  # Hive: hive.metastore.uris of the metastore that wrote the event
SERVICE_PRINCIPAL = ""  # Hive: hive.metastore.kerberos.principal

# ---------------------------------------------------------------- Thrift JSON (TJSONProtocol)
_TAGS = {
    TType.BOOL: "tf",
    TType.BYTE: "i8",
    TType.I16: "i16",
    TType.I32: "i32",
    TType.I64: "i64",
    TType.DOUBLE: "dbl",
    TType.STRING: "str",
    TType.STRUCT: "rec",
    TType.MAP: "map",
    TType.LIST: "lst",
    TType.SET: "set",
}
_INTS = (TType.BYTE, TType.I16, TType.I32, TType.I64)
_quote: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]
_JSON_FACTORY = TJSONProtocolFactory()
_Encoder = Callable[[Any], str]
_struct_encoders: dict[type, _Encoder] = {}


class _NotPlain(Exception):
    """A value the fast writer does not handle (a map keyed by a container): use Thrift's writer."""


def java_double(x: float) -> str:
    """A double as Java's TJSONProtocol writes it: ``Double.toString`` (``1.0``, ``1.5E10``,
    ``1.0E-5``), and the quoted strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(float(x))  # shortest round-trip digits, always with a fractional part
    sign, digits, exp = Decimal(repr(float(x))).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e10 = len(digits) + int(exp) - 1
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{e10}"


def _binary(v: bytes) -> str:
    return '"' + base64.b64encode(v).decode("ascii").rstrip("=") + '"'


def _int(v: int) -> str:
    return str(int(v))


def _bool(v: bool) -> str:
    return "1" if v else "0"


def _encoder(ttype: int, args: Any) -> _Encoder:
    """The writer of one value of Thrift type ``ttype`` (with its thrift_spec type arguments)."""
    if ttype == TType.STRING:
        return _binary if args == "BINARY" else _quote
    if ttype in _INTS:
        return _int
    if ttype == TType.BOOL:
        return _bool
    if ttype == TType.DOUBLE:
        return java_double
    if ttype == TType.STRUCT:
        return _LazyStruct(args[0])
    if ttype in (TType.LIST, TType.SET):
        etype, eargs = args[0], args[1]
        enc = _encoder(etype, eargs)
        head = '["' + _TAGS[etype] + '",'

        def seq(v: Iterable[Any]) -> str:
            """TJSONProtocol list/set: ``["<elem tag>",<count>,<items>...]``."""
            items = [enc(x) for x in v]
            return head + str(len(items)) + "".join(["," + i for i in items]) + "]"

        return seq
    if ttype == TType.MAP:
        ktype, kargs, vtype, vargs = args[0], args[1], args[2], args[3]
        kenc: _Encoder | None = None
        if ktype == TType.STRING and kargs != "BINARY":
            kenc = _quote
        elif ktype in _INTS:

            def kenc(k: Any) -> str:
                """An integer map key, quoted as TJSONProtocol writes keys."""
                return '"' + str(int(k)) + '"'

        venc = _encoder(vtype, vargs)
        head = '["' + _TAGS[ktype] + '","' + _TAGS[vtype] + '",'

        def mapping(v: Mapping[Any, Any]) -> str:
            """TJSONProtocol map: ``["<key tag>","<value tag>",<count>,{"k":v,...}]``."""
            if not v:
                return head + "0,{}]"
            if kenc is None:
                raise _NotPlain
            return (
                head + str(len(v)) + ",{" + ",".join([kenc(k) + ":" + venc(x) for k, x in v.items()]) + "}]"
            )

        return mapping
    raise _NotPlain


class _LazyStruct:
    """Writer of a nested struct, compiled on first use (structs may refer to themselves)."""

    __slots__ = ("cls", "enc")

    def __init__(self, cls: type):
        self.cls = cls
        self.enc: _Encoder | None = None

    def __call__(self, v: Any) -> str:
        enc = self.enc
        if enc is None:
            enc = self.enc = _struct_encoder(self.cls)
        return enc(v)


_columns: dict[tuple[Any, Any, Any], str] = {}


def _field_schema(c: FieldSchema) -> str:
    """FieldSchema writer, memoized: every partition repeats its table's columns."""
    key = (c.name, c.type, c.comment)
    out = _columns.get(key)
    if out is None:
        if len(_columns) > 50_000:
            _columns.clear()
        out = _columns[key] = _plain_struct_encoder(FieldSchema)(c)
    return out


def _struct_encoder(cls: type) -> _Encoder:
    if cls is FieldSchema:
        return _field_schema
    return _plain_struct_encoder(cls)


def _plain_struct_encoder(cls: type) -> _Encoder:
    """Compile the writer of one struct class: straight-line code, one test per field (generated
    from ``thrift_spec``; about three times faster than walking the spec per object)."""
    enc = _struct_encoders.get(cls)
    if enc is not None:
        return enc
    env: dict[str, Any] = {"Q": _quote}
    lines = ["def encode(obj):", "    d = obj.__dict__", "    out = []", "    add = out.append"]
    for i, spec in enumerate(s for s in cls.thrift_spec or () if s is not None):  # type: ignore[attr-defined]
        fid, ftype, name, fargs = spec[0], spec[1], spec[2], spec[3]
        env[f"P{i}"] = f'"{fid}":{{"{_TAGS[ftype]}":'
        if ftype == TType.STRING and fargs != "BINARY":
            call = "Q(v)"
        elif ftype in _INTS:
            call = "str(int(v))"
        else:
            env[f"F{i}"] = _encoder(ftype, fargs)
            call = f"F{i}(v)"
        lines += [f"    v = d.get({name!r})", "    if v is not None:", f"        add(P{i} + {call} + '}}')"]
    lines.append("    return '{' + ','.join(out) + '}'")
    exec("\n".join(lines), env)  # noqa: S102 - code generated from the class's own thrift_spec
    enc = _struct_encoders[cls] = env["encode"]
    return enc


def thrift_json(obj: Any) -> str:
    """``obj`` (a hive_metastore.ttypes struct) in Thrift's TJSONProtocol, as Java writes it.

    Unset (None) fields are left out. Decodes with :func:`from_thrift_json` or any TJSONProtocol.
    """
    try:
        return _struct_encoder(type(obj))(obj)
    except _NotPlain:
        return serialize(obj, _JSON_FACTORY).decode("utf-8")


T = TypeVar("T")


def from_thrift_json(cls: type[T], text: str | None) -> T | None:
    """The Thrift object of class ``cls`` serialized in ``text`` (TJSONProtocol); None for None."""
    if text is None:
        return None
    return deserialize(cls(), text.encode("utf-8"), _JSON_FACTORY)


# ---------------------------------------------------------------- helpers
def _msg(fields: dict[str, Any]) -> str:
    """Jackson's output for a message object: compact, UTF-8 characters unescaped, nulls kept."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def _head() -> dict[str, Any]:
    return {"server": SERVER, "servicePrincipal": SERVICE_PRINCIPAL}


def encode_file_uri(
    path: str, checksum: str | None = None, sub_dir: str | None = None, cm_root: str | None = None
) -> str:
    """A file as Hive's ReplChangeManager.encodeFileUri lists it: ``path#checksum#cmroot#subdir``.

    The checksum and change-manager root are only kept when a change manager exists (``cm_root``);
    without one Hive writes ``path##`` + ``#subdir``, e.g. ``hdfs://nn/t/f###`` or
    ``hdfs://nn/t/delta_1_1/f###delta_1_1``.
    """
    out = f"{path}#{checksum}#{cm_root}" if checksum is not None and cm_root is not None else f"{path}##"
    return f"{out}#{sub_dir or ''}"


def decode_file_uri(encoded: str) -> tuple[str, str | None, str | None, str | None]:
    """``(path, checksum, cm_root, sub_dir)`` of an :func:`encode_file_uri` string (empty parts
    are None; a plain path decodes to itself)."""
    parts = encoded.split("#")
    parts += [""] * (4 - len(parts))
    path, chk, cm, sub = parts[0], parts[1], parts[2], parts[3]
    return path, chk or None, cm or None, sub or None


def _files(data: InsertEventRequestData | None, with_sub_dirs: bool) -> list[str]:
    """Encoded file URIs of an insert (Hive's FileChksumIterator)."""
    if data is None:
        return []
    files = list(data.filesAdded or [])
    chks = list(data.filesAddedChecksum or [])
    subs = list(data.subDirectoryList or []) if with_sub_dirs else []
    return [
        encode_file_uri(f, chks[i] if i < len(chks) else None, subs[i] if i < len(subs) else None)
        for i, f in enumerate(files)
    ]


def partition_key_values(table: Table, partition: Partition) -> dict[str, str]:
    """``{key: value}`` in key order (Hive's MessageBuilder.getPartitionKeyValues)."""
    keys = [k.name for k in table.partitionKeys or []]
    return dict(zip(keys, partition.values or [], strict=False))


def partition_name(table: Table, values: Sequence[str]) -> str:
    """Hive's escaped partition name ``k=v/k2=v2`` of ``values`` (Warehouse.makePartName)."""
    return make_part_name([k.name for k in table.partitionKeys or []], list(values))


def _table_head(table: Table) -> dict[str, Any]:
    return {
        **_head(),
        "db": table.dbName,
        "table": table.tableName,
        "tableType": table.tableType,
        "tableObjJson": thrift_json(table),
    }


def _write_id(obj: Any) -> int:
    w = getattr(obj, "writeId", None)
    return w if w is not None else -1


# ---------------------------------------------------------------- DDL messages
def create_database_message(db: Database) -> str:
    """CREATE_DATABASE (JSONCreateDatabaseMessage): server, servicePrincipal, db, dbJson, timestamp."""
    return _msg({**_head(), "db": db.name, "dbJson": thrift_json(db), "timestamp": now_s()})


def alter_database_message(before: Database, after: Database) -> str:
    """ALTER_DATABASE (JSONAlterDatabaseMessage): db, dbObjBeforeJson, dbObjAfterJson, timestamp."""
    return _msg(
        {
            **_head(),
            "db": before.name,
            "dbObjBeforeJson": thrift_json(before),
            "dbObjAfterJson": thrift_json(after),
            "timestamp": now_s(),
        }
    )


def drop_database_message(db: Database) -> str:
    """DROP_DATABASE (JSONDropDatabaseMessage): server, servicePrincipal, db, timestamp."""
    return _msg({**_head(), "db": db.name, "timestamp": now_s()})


def create_table_message(table: Table, files: Sequence[str] = ()) -> str:
    """CREATE_TABLE (JSONCreateTableMessage): db, table, tableType, tableObjJson, timestamp, files
    (encoded URIs of the files already under the location; Hive lists them, hivemesh sends none)."""
    return _msg({**_table_head(table), "timestamp": now_s(), "files": list(files)})


def alter_table_message(
    before: Table, after: Table, is_truncate: bool = False, write_id: int | None = None
) -> str:
    """ALTER_TABLE (JSONAlterTableMessage), also for renames: db/table/tableType of ``before``,
    tableObjBeforeJson, tableObjAfterJson, isTruncateOp ("true"/"false"), timestamp, writeId
    (the new table's writeId, -1 when unset)."""
    return _msg(
        {
            **_head(),
            "db": before.dbName,
            "table": before.tableName,
            "tableType": before.tableType,
            "tableObjBeforeJson": thrift_json(before),
            "tableObjAfterJson": thrift_json(after),
            "isTruncateOp": "true" if is_truncate else "false",
            "timestamp": now_s(),
            "writeId": write_id if write_id is not None else _write_id(after),
        }
    )


def drop_table_message(table: Table) -> str:
    """DROP_TABLE (JSONDropTableMessage): db, table, tableType, tableObjJson, timestamp."""
    return _msg({**_table_head(table), "timestamp": now_s()})


def add_partition_message(
    table: Table, partitions: Sequence[Partition], files: Mapping[str, Sequence[str]] | None = None
) -> str:
    """ADD_PARTITION (JSONAddPartitionMessage), one event for a whole batch: db, table, tableType,
    tableObjJson, timestamp, partitions (``[{key: value}]``), partitionListJson (each partition in
    Thrift JSON), partitionFiles (``[{"partitionName", "files"}]``; ``files``: encoded URIs per
    partition name, none by default)."""
    return _msg(
        {
            **_table_head(table),
            "timestamp": now_s(),
            "partitions": [partition_key_values(table, p) for p in partitions],
            "partitionListJson": [thrift_json(p) for p in partitions],
            "partitionFiles": [
                {"partitionName": n, "files": list((files or {}).get(n, ()))}
                for n in (partition_name(table, p.values or []) for p in partitions)
            ],
        }
    )


def alter_partition_message(
    table: Table, before: Partition, after: Partition, is_truncate: bool = False, write_id: int | None = None
) -> str:
    """ALTER_PARTITION (JSONAlterPartitionMessage), also for renames: db, table, tableType,
    tableObjJson, isTruncateOp, timestamp, writeId, keyValues (of ``before``),
    partitionObjBeforeJson, partitionObjAfterJson."""
    return _msg(
        {
            **_table_head(table),
            "isTruncateOp": "true" if is_truncate else "false",
            "timestamp": now_s(),
            "writeId": write_id if write_id is not None else _write_id(after),
            "keyValues": partition_key_values(table, before),
            "partitionObjBeforeJson": thrift_json(before),
            "partitionObjAfterJson": thrift_json(after),
        }
    )


def drop_partition_message(table: Table, partitions: Sequence[Partition]) -> str:
    """DROP_PARTITION (JSONDropPartitionMessage): db, table, tableType, tableObjJson, timestamp,
    partitions (``[{key: value}]``). Hive sends one event per dropped partition."""
    return _msg(
        {
            **_table_head(table),
            "timestamp": now_s(),
            "partitions": [partition_key_values(table, p) for p in partitions],
        }
    )


def create_function_message(func: Function) -> str:
    """CREATE_FUNCTION (JSONCreateFunctionMessage): db, functionObjJson, timestamp."""
    return _msg({**_head(), "db": func.dbName, "functionObjJson": thrift_json(func), "timestamp": now_s()})


def drop_function_message(func: Function) -> str:
    """DROP_FUNCTION (JSONDropFunctionMessage): db, functionName, timestamp."""
    return _msg({**_head(), "db": func.dbName, "functionName": func.functionName, "timestamp": now_s()})


def insert_message(table: Table, partition: Partition | None, data: InsertEventRequestData) -> str:
    """INSERT (JSONInsertMessage): db, table, tableType, tableObjJson, ptnObjJson (null for a table),
    timestamp, replace ("true" unless the request says false, as Hive), files (encoded URIs)."""
    return _msg(
        {
            **_table_head(table),
            "ptnObjJson": thrift_json(partition) if partition is not None else None,
            "timestamp": now_s(),
            "replace": "false" if data.replace is False else "true",
            "files": _files(data, with_sub_dirs=False),
        }
    )


# ---------------------------------------------------------------- statistics messages
def update_table_col_stat_message(
    stats: ColumnStatistics, table: Table, parameters: Mapping[str, str], write_id: int = -1
) -> str:
    """UPDATE_TBL_COL_STAT_EVENT (JSONUpdateTableColumnStatMessage): writeId, timestamp, database,
    colStatsJson (the ColumnStatistics), parameters (the table's parameters after the update),
    tableObjJson."""
    return _msg(
        {
            **_head(),
            "writeId": write_id,
            "timestamp": now_s(),
            "database": stats.statsDesc.dbName,
            "colStatsJson": thrift_json(stats),
            "parameters": dict(parameters),
            "tableObjJson": thrift_json(table),
        }
    )


def update_part_col_stat_message(
    stats: ColumnStatistics,
    part_vals: Sequence[str],
    parameters: Mapping[str, str],
    table: Table,
    write_id: int = -1,
) -> str:
    """UPDATE_PART_COL_STAT_EVENT (JSONUpdatePartitionColumnStatMessage): writeId, timestamp,
    database, colStatsJson, parameters (the partition's after the update), partVals, tableObj
    (the table in Thrift JSON; Hive names this one field ``tableObj``)."""
    return _msg(
        {
            **_head(),
            "writeId": write_id,
            "timestamp": now_s(),
            "database": stats.statsDesc.dbName,
            "colStatsJson": thrift_json(stats),
            "parameters": dict(parameters),
            "partVals": list(part_vals),
            "tableObj": thrift_json(table),
        }
    )


def delete_table_col_stat_message(db: str, table: str, col_name: str | None, engine: str) -> str:
    """DELETE_TBL_COL_STAT_EVENT (JSONDeleteTableColumnStatMessage): timestamp, database, colName
    (null: every column), engine (Hive 4's DeleteTableColumnStatEvent field; the table name is the
    event's ``tableName``)."""
    return _msg({**_head(), "timestamp": now_s(), "database": db, "colName": col_name, "engine": engine})


def delete_part_col_stat_message(
    db: str, table: str, part_name: str, part_vals: Sequence[str], col_name: str | None, engine: str
) -> str:
    """DELETE_PART_COL_STAT_EVENT (JSONDeletePartitionColumnStatMessage): timestamp, database,
    colName (null: every column), partName, partValues, engine."""
    return _msg(
        {
            **_head(),
            "timestamp": now_s(),
            "database": db,
            "colName": col_name,
            "partName": part_name,
            "partValues": list(part_vals),
            "engine": engine,
        }
    )


# ---------------------------------------------------------------- transaction messages
def open_txn_message(txn_ids: list[int]) -> str:
    """OPEN_TXN (JSONOpenTxnMessage): txnIds, timestamp, fromTxnId, toTxnId.

    Hive 4 writes only the range (``txnIds`` null) since its ids are consecutive; the explicit
    list is written too so that any id set survives (Hive's reader prefers ``txnIds``)."""
    ids = list(txn_ids)
    return _msg(
        {
            "txnIds": ids,
            "timestamp": now_s(),
            "fromTxnId": ids[0] if ids else None,
            "toTxnId": ids[-1] if ids else None,
            **_head(),
        }
    )


def commit_txn_message(txn_id: int, writes: list[WriteEventInfo]) -> str:
    """COMMIT_TXN (JSONCommitTxnMessage): txnid, timestamp, server, servicePrincipal, and the
    txn's ACID writes as parallel lists writeIds, databases, tables, partitions, tableObjs,
    partitionObjs, files (all null when the txn wrote nothing, as Hive)."""
    out: dict[str, Any] = {"txnid": txn_id, "timestamp": now_s(), **_head()}
    cols = ("writeIds", "databases", "tables", "partitions", "tableObjs", "partitionObjs", "files")
    attrs = ("writeId", "database", "table", "partition", "tableObj", "partitionObj", "files")
    for col, attr in zip(cols, attrs, strict=True):
        out[col] = [getattr(w, attr) for w in writes] if writes else None
    return _msg(out)


def abort_txn_message(txn_id: int, databases: list[str], write_ids: list[int] | None = None) -> str:
    """ABORT_TXN (JSONAbortTxnMessage): txnid, timestamp, server, servicePrincipal, dbsUpdated
    (Hive 4: the databases the txn wrote to) and writeIds (Hive 4: the write ids the txn was
    allocated, which the abort makes invalid)."""
    return _msg(
        {
            "txnid": txn_id,
            "timestamp": now_s(),
            **_head(),
            "dbsUpdated": list(databases),
            "writeIds": list(write_ids or []),
        }
    )


def alloc_write_id_message(db: str, table: str, txn_to_write_ids: list[TxnToWriteId]) -> str:
    """ALLOC_WRITE_ID_EVENT (JSONAllocWriteIdMessage): server, servicePrincipal, dbName, tableName,
    txnIdList and writeIdList (parallel), timestamp."""
    return _msg(
        {
            **_head(),
            "dbName": db,
            "tableName": table,
            "txnIdList": [p.txnId for p in txn_to_write_ids],
            "writeIdList": [p.writeId for p in txn_to_write_ids],
            "timestamp": now_s(),
        }
    )


def acid_write_message(
    txn_id: int, write_id: int, table: Table, partition: Partition | None, data: InsertEventRequestData
) -> str:
    """ACID_WRITE_EVENT (JSONAcidWriteMessage): txnid, writeId, timestamp, server,
    servicePrincipal, database, table, partition (the partition name, "" for an unpartitioned
    table), tableObjJson, partitionObjJson, files (encoded URIs with their sub-directories)."""
    return _msg(
        {
            "txnid": txn_id,
            "writeId": write_id,
            "timestamp": now_s(),
            **_head(),
            "database": table.dbName,
            "table": table.tableName,
            "partition": partition_name(table, partition.values or []) if partition is not None else "",
            "tableObjJson": thrift_json(table),
            "partitionObjJson": thrift_json(partition) if partition is not None else None,
            "files": _files(data, with_sub_dirs=True),
        }
    )


# ---------------------------------------------------------------- decoding
@dataclass
class Message:
    """A decoded event: ``event`` as stored, ``body`` its parsed JSON message."""

    event: NotificationEvent
    body: dict[str, Any]

    @property
    def db(self) -> str | None:
        """Database of the event (the event's ``dbName``)."""
        return self.event.dbName

    @property
    def table_name(self) -> str | None:
        """Table of the event (the event's ``tableName``)."""
        return self.event.tableName


@dataclass
class CreateDatabase(Message):
    """CREATE_DATABASE: the database as created (Hive JSONCreateDatabaseMessage ``dbJson``)."""

    database: Database


@dataclass
class AlterDatabase(Message):
    """ALTER_DATABASE: the database before and after (``dbObjBeforeJson``/``dbObjAfterJson``)."""

    before: Database
    after: Database


@dataclass
class DropDatabase(Message):
    """DROP_DATABASE: the dropped database's name (``db``)."""

    name: str


@dataclass
class CreateTable(Message):
    """CREATE_TABLE: the table as created and the encoded file URIs under it (``tableObjJson``, ``files``)."""

    table: Table
    files: list[str]


@dataclass
class AlterTable(Message):
    """ALTER_TABLE (renames included): table before/after, ``isTruncateOp`` and the write id (0: none)."""

    before: Table
    after: Table
    is_truncate: bool
    write_id: int


@dataclass
class DropTable(Message):
    """DROP_TABLE: the table as it was before the drop (``tableObjJson``)."""

    table: Table


@dataclass
class AddPartition(Message):
    """ADD_PARTITION: the table, the added partitions (``partitionListJson``) and their files."""

    table: Table
    partitions: list[Partition]
    files: dict[str, list[str]]  # partition name -> encoded file URIs


@dataclass
class AlterPartition(Message):
    """ALTER_PARTITION (renames included): table, partition before/after, ``isTruncateOp``, write id."""

    table: Table
    before: Partition
    after: Partition
    is_truncate: bool
    write_id: int


@dataclass
class DropPartition(Message):
    """DROP_PARTITION: the table and each dropped partition's values in partition-key order."""

    table: Table
    values: list[list[str]]  # values of each dropped partition, in key order


@dataclass
class CreateFunction(Message):
    """CREATE_FUNCTION: the function as created (``functionObjJson``)."""

    function: Function


@dataclass
class DropFunction(Message):
    """DROP_FUNCTION: database and name of the dropped function."""

    function_db: str
    function_name: str


@dataclass
class Insert(Message):
    """INSERT (fire_listener_event): table, partition (None for unpartitioned), ``replace`` and files."""

    table: Table
    partition: Partition | None
    replace: bool
    files: list[str]


@dataclass
class OpenTxn(Message):
    """OPEN_TXN: the ids of the txns opened by one open_txns call, ascending."""

    txn_ids: list[int]


@dataclass
class CommitTxn(Message):
    """COMMIT_TXN: the txn id and its ACID writes (one WriteEventInfo per write id/table/partition)."""

    txn_id: int
    writes: list[WriteEventInfo]


@dataclass
class AbortTxn(Message):
    """ABORT_TXN: the txn id and the databases it wrote to."""

    txn_id: int
    databases: list[str]


@dataclass
class AllocWriteId(Message):
    """ALLOC_WRITE_ID_EVENT: database, table and the txn -> write id pairs handed out."""

    write_db: str
    write_table: str
    txn_to_write_ids: list[TxnToWriteId]


@dataclass
class AcidWrite(Message):
    """ACID_WRITE_EVENT (add_write_notification_log): txn, write id, table, partition and files."""

    txn_id: int
    write_id: int
    table: Table
    partition: Partition | None
    partition_name: str
    files: list[str]


@dataclass
class UpdateTableColumnStats(Message):
    """UPDATE_TBL_COL_STAT_EVENT: the ColumnStatistics, the table, table parameters, write id."""

    stats: ColumnStatistics
    table: Table
    parameters: dict[str, str]
    write_id: int


@dataclass
class UpdatePartitionColumnStats(Message):
    """UPDATE_PART_COL_STAT_EVENT: the ColumnStatistics, table, partition values, parameters, write id."""

    stats: ColumnStatistics
    table: Table
    part_vals: list[str]
    parameters: dict[str, str]
    write_id: int


@dataclass
class DeleteTableColumnStats(Message):
    """DELETE_TBL_COL_STAT_EVENT: the column (None: all) and engine whose statistics went."""

    col_name: str | None
    engine: str | None


@dataclass
class DeletePartitionColumnStats(Message):
    """DELETE_PART_COL_STAT_EVENT: partition name and values, column (None: all) and engine."""

    part_name: str
    part_vals: list[str]
    col_name: str | None
    engine: str | None


@dataclass
class Unknown(Message):
    """An event type this module does not decode (kept for the caller to skip or handle)."""

    extra: dict[str, Any] = field(default_factory=dict)


def _values(table: Table, kv: Mapping[str, str]) -> list[str]:
    keys = [k.name for k in table.partitionKeys or []]
    lower = {k.lower(): v for k, v in kv.items()}
    return (
        [lower[k.lower()] for k in keys]
        if keys and all(k.lower() in lower for k in keys)
        else list(kv.values())
    )


def _txn_ids(b: Mapping[str, Any]) -> list[int]:
    if b.get("txnIds") is not None:
        return [int(x) for x in b["txnIds"]]
    if b.get("fromTxnId") is None:
        return []
    return list(range(int(b["fromTxnId"]), int(b["toTxnId"]) + 1))


def parse_event(event: NotificationEvent) -> Message:
    """Decode a NotificationEvent written in Hive's ``json-0.2`` format into a typed message with
    its Thrift objects restored (Database, Table, Partition, Function, ColumnStatistics, ...).

    Unknown event types give :class:`Unknown`; raises ValueError for a message that is not JSON.
    """
    try:
        b: dict[str, Any] = json.loads(event.message or "{}")
    except ValueError as e:
        raise ValueError(f"event {event.eventId} ({event.eventType}): message is not JSON: {e}") from e
    t = event.eventType
    tbl = lambda key="tableObjJson": from_thrift_json(Table, b.get(key))  # noqa: E731
    if t == CREATE_DATABASE:
        return CreateDatabase(event, b, from_thrift_json(Database, b["dbJson"]))  # type: ignore[arg-type]
    if t == ALTER_DATABASE:
        return AlterDatabase(
            event,
            b,
            from_thrift_json(Database, b["dbObjBeforeJson"]),
            from_thrift_json(Database, b["dbObjAfterJson"]),  # type: ignore[arg-type]
        )
    if t == DROP_DATABASE:
        return DropDatabase(event, b, b.get("db") or event.dbName)
    if t == CREATE_TABLE:
        return CreateTable(event, b, tbl(), list(b.get("files") or []))  # type: ignore[arg-type]
    if t == ALTER_TABLE:
        return AlterTable(
            event,
            b,
            tbl("tableObjBeforeJson"),  # type: ignore[arg-type]
            tbl("tableObjAfterJson"),  # type: ignore[arg-type]
            str(b.get("isTruncateOp")).lower() == "true",
            int(b.get("writeId") if b.get("writeId") is not None else -1),
        )
    if t == DROP_TABLE:
        table = tbl() or Table(dbName=b.get("db"), tableName=b.get("table"), tableType=b.get("tableType"))
        return DropTable(event, b, table)
    if t == ADD_PARTITION:
        parts = [from_thrift_json(Partition, p) for p in b.get("partitionListJson") or []]
        files = {f["partitionName"]: list(f.get("files") or []) for f in b.get("partitionFiles") or []}
        return AddPartition(event, b, tbl(), parts, files)  # type: ignore[arg-type]
    if t == ALTER_PARTITION:
        return AlterPartition(
            event,
            b,
            tbl(),  # type: ignore[arg-type]
            from_thrift_json(Partition, b["partitionObjBeforeJson"]),  # type: ignore[arg-type]
            from_thrift_json(Partition, b["partitionObjAfterJson"]),  # type: ignore[arg-type]
            str(b.get("isTruncateOp")).lower() == "true",
            int(b.get("writeId") if b.get("writeId") is not None else -1),
        )
    if t == DROP_PARTITION:
        table = tbl() or Table(dbName=b.get("db"), tableName=b.get("table"), partitionKeys=[])
        return DropPartition(event, b, table, [_values(table, kv) for kv in b.get("partitions") or []])
    if t == CREATE_FUNCTION:
        return CreateFunction(event, b, from_thrift_json(Function, b["functionObjJson"]))  # type: ignore[arg-type]
    if t == DROP_FUNCTION:
        return DropFunction(event, b, b.get("db") or event.dbName, b["functionName"])
    if t == INSERT:
        return Insert(
            event,
            b,
            tbl(),  # type: ignore[arg-type]
            from_thrift_json(Partition, b.get("ptnObjJson")),
            str(b.get("replace", "true")).lower() == "true",
            list(b.get("files") or []),
        )
    if t == OPEN_TXN:
        return OpenTxn(event, b, _txn_ids(b))
    if t == COMMIT_TXN:
        writes = []
        if b.get("writeIds"):
            for i, w in enumerate(b["writeIds"]):

                def col(name: str, i: int = i) -> Any:
                    """Entry ``i`` of the message's parallel list ``name`` (None when short)."""
                    vals = b.get(name) or []
                    return vals[i] if i < len(vals) else None

                writes.append(
                    WriteEventInfo(
                        writeId=int(w),
                        database=col("databases"),
                        table=col("tables"),
                        files=col("files"),
                        partition=col("partitions"),
                        tableObj=col("tableObjs"),
                        partitionObj=col("partitionObjs"),
                    )
                )
        return CommitTxn(event, b, int(b["txnid"]), writes)
    if t == ABORT_TXN:
        return AbortTxn(event, b, int(b["txnid"]), list(b.get("dbsUpdated") or []))
    if t == ALLOC_WRITE_ID_EVENT:
        pairs = [
            TxnToWriteId(txnId=int(x), writeId=int(w))
            for x, w in zip(b.get("txnIdList") or [], b.get("writeIdList") or [], strict=True)
        ]
        return AllocWriteId(
            event, b, b.get("dbName") or event.dbName, b.get("tableName") or event.tableName, pairs
        )
    if t == ACID_WRITE_EVENT:
        return AcidWrite(
            event,
            b,
            int(b["txnid"]),
            int(b["writeId"]),
            tbl(),  # type: ignore[arg-type]
            from_thrift_json(Partition, b.get("partitionObjJson")),
            b.get("partition") or "",
            list(b.get("files") or []),
        )
    if t == UPDATE_TBL_COL_STAT_EVENT:
        return UpdateTableColumnStats(
            event,
            b,
            from_thrift_json(ColumnStatistics, b["colStatsJson"]),  # type: ignore[arg-type]
            tbl(),  # type: ignore[arg-type]
            dict(b.get("parameters") or {}),
            int(b.get("writeId") if b.get("writeId") is not None else -1),
        )
    if t == UPDATE_PART_COL_STAT_EVENT:
        return UpdatePartitionColumnStats(
            event,
            b,
            from_thrift_json(ColumnStatistics, b["colStatsJson"]),  # type: ignore[arg-type]
            tbl("tableObj"),  # type: ignore[arg-type]
            list(b.get("partVals") or []),
            dict(b.get("parameters") or {}),
            int(b.get("writeId") if b.get("writeId") is not None else -1),
        )
    if t == DELETE_TBL_COL_STAT_EVENT:
        return DeleteTableColumnStats(event, b, b.get("colName"), b.get("engine"))
    if t == DELETE_PART_COL_STAT_EVENT:
        return DeletePartitionColumnStats(
            event,
            b,
            b.get("partName") or "",
            list(b.get("partValues") or []),
            b.get("colName"),
            b.get("engine"),
        )
    return Unknown(event, b)
