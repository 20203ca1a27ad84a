"""Hive notification events read back: one typed message class per event type, with its Thrift objects.

:func:`parse_event` decodes a stored ``NotificationEvent`` whose message is in Hive's ``json-0.2``
format (as :mod:`hivemesh.hive.events` writes it, and as Hive's ``JSONMessageEncoder`` does) into
an instance of the class :data:`REGISTRY` names for its event type; each class reads its own
fields in :meth:`Message.from_json`. Thrift objects (``tableObjJson``, ``partitionListJson``, ...)
come back as ``hive_metastore.ttypes`` objects; an object missing from the message comes back as
None. Event types not in the registry decode to :class:`Unknown`.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Self, cast

from hive_metastore.ttypes import (
    ColumnStatistics,
    Database,
    Function,
    NotificationEvent,
    Partition,
    SQLCheckConstraint,
    SQLDefaultConstraint,
    SQLForeignKey,
    SQLNotNullConstraint,
    SQLPrimaryKey,
    SQLUniqueConstraint,
    Table,
    TxnToWriteId,
    WriteEventInfo,
)

from hivemesh.hive import events as ev
from hivemesh.hive.tjson import from_thrift_json

Body = dict[str, Any]  # an event's message, parsed from JSON


# ---------------------------------------------------------------- field readers
def _table(b: Body, key: str = "tableObjJson") -> Table:
    """The Table in field ``key`` (None when the field is missing or null)."""
    return from_thrift_json(Table, b.get(key))


def _partition(b: Body, key: str) -> Partition:
    """The Partition in field ``key`` (None when the field is missing or null)."""
    return from_thrift_json(Partition, b.get(key))


def _is_true(value: Any) -> bool:
    """A boolean Hive keeps as a string (``"true"``/``"false"``, any case)."""
    return str(value).lower() == "true"


def _write_id(b: Body) -> int:
    """The ``writeId`` field, -1 when missing or null."""
    w = b.get("writeId")
    return int(w) if w is not None else -1


def _values(table: Table, kv: Mapping[str, str]) -> list[str]:
    """A dropped partition's ``{key: value}`` as values in the table's key order (the map's own
    order when the table's keys are unknown or do not all appear)."""
    keys = [k.name for k in table.partitionKeys or []]
    lower = {k.lower(): v for k, v in kv.items()}
    return (
        [lower[k.lower()] for k in keys]
        if keys and all(k.lower() in lower for k in keys)
        else list(kv.values())
    )


def _txn_ids(b: Body) -> list[int]:
    """OPEN_TXN's ids: ``txnIds`` when present, else the range ``fromTxnId``..``toTxnId``."""
    if b.get("txnIds") is not None:
        return [int(x) for x in b["txnIds"]]
    if b.get("fromTxnId") is None:
        return []
    return list(range(int(b["fromTxnId"]), int(b["toTxnId"]) + 1))


def _column(b: Body, name: str, i: int) -> Any:
    """Entry ``i`` of the message's parallel list ``name`` (None when the list is missing or short)."""
    vals = b.get(name) or []
    return vals[i] if i < len(vals) else None


def _writes(b: Body) -> list[WriteEventInfo]:
    """COMMIT_TXN's ACID writes: one WriteEventInfo per entry of its parallel lists."""
    return [
        WriteEventInfo(
            writeId=int(w),
            database=_column(b, "databases", i),
            table=_column(b, "tables", i),
            files=_column(b, "files", i),
            partition=_column(b, "partitions", i),
            tableObj=_column(b, "tableObjs", i),
            partitionObj=_column(b, "partitionObjs", i),
        )
        for i, w in enumerate(b.get("writeIds") or [])
    ]


# ---------------------------------------------------------------- messages
@dataclass
class Message:
    """A decoded event: ``event`` as stored, ``body`` its parsed JSON message."""

    event: NotificationEvent
    body: Body

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """The message of ``event`` from its parsed JSON ``body``; KeyError when a field this
        event type always has is missing."""
        raise NotImplementedError(f"{cls.__name__} has no decoder")

    @property
    def db(self) -> str | None:
        """Database of the event (the event's ``dbName``)."""
        return cast("str | None", self.event.dbName)

    @property
    def table_name(self) -> str | None:
        """Table of the event (the event's ``tableName``)."""
        return cast("str | None", self.event.tableName)


@dataclass
class CreateDatabase(Message):
    """CREATE_DATABASE: the database as created (Hive JSONCreateDatabaseMessage ``dbJson``)."""

    database: Database

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``dbJson``."""
        return cls(event, body, from_thrift_json(Database, body["dbJson"]))


@dataclass
class AlterDatabase(Message):
    """ALTER_DATABASE: the database before and after (``dbObjBeforeJson``/``dbObjAfterJson``)."""

    before: Database
    after: Database

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``dbObjBeforeJson`` and ``dbObjAfterJson``."""
        return cls(
            event,
            body,
            from_thrift_json(Database, body["dbObjBeforeJson"]),
            from_thrift_json(Database, body["dbObjAfterJson"]),
        )


@dataclass
class DropDatabase(Message):
    """DROP_DATABASE: the dropped database's name (``db``)."""

    name: str

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``db`` (the event's ``dbName`` when absent)."""
        return cls(event, body, body.get("db") or event.dbName)


@dataclass
class CreateTable(Message):
    """CREATE_TABLE: the table as created and the encoded file URIs under it (``tableObjJson``, ``files``)."""

    table: Table
    files: list[str]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson`` and ``files``."""
        return cls(event, body, _table(body), list(body.get("files") or []))


@dataclass
class AlterTable(Message):
    """ALTER_TABLE (renames included): table before/after, ``isTruncateOp`` and the write id (-1: none)."""

    before: Table
    after: Table
    is_truncate: bool
    write_id: int

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjBeforeJson``, ``tableObjAfterJson``, ``isTruncateOp``, ``writeId``."""
        return cls(
            event,
            body,
            _table(body, "tableObjBeforeJson"),
            _table(body, "tableObjAfterJson"),
            _is_true(body.get("isTruncateOp")),
            _write_id(body),
        )


@dataclass
class DropTable(Message):
    """DROP_TABLE: the table as it was before the drop (``tableObjJson``)."""

    table: Table

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson``; without it, a Table of ``db``, ``table`` and ``tableType``."""
        table = _table(body) or Table(
            dbName=body.get("db"), tableName=body.get("table"), tableType=body.get("tableType")
        )
        return cls(event, body, table)


@dataclass
class AddPartition(Message):
    """ADD_PARTITION: the table, the added partitions (``partitionListJson``) and their files."""

    table: Table
    partitions: list[Partition]
    files: dict[str, list[str]]  # partition name -> encoded file URIs

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson``, ``partitionListJson`` and ``partitionFiles``."""
        parts = [from_thrift_json(Partition, p) for p in body.get("partitionListJson") or []]
        files = {f["partitionName"]: list(f.get("files") or []) for f in body.get("partitionFiles") or []}
        return cls(event, body, _table(body), parts, files)


@dataclass
class AlterPartition(Message):
    """ALTER_PARTITION (renames included): table, partition before/after, ``isTruncateOp``, write id."""

    table: Table
    before: Partition
    after: Partition
    is_truncate: bool
    write_id: int

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson``, ``partitionObjBeforeJson``, ``partitionObjAfterJson``,
        ``isTruncateOp`` and ``writeId``."""
        return cls(
            event,
            body,
            _table(body),
            from_thrift_json(Partition, body["partitionObjBeforeJson"]),
            from_thrift_json(Partition, body["partitionObjAfterJson"]),
            _is_true(body.get("isTruncateOp")),
            _write_id(body),
        )


@dataclass
class DropPartition(Message):
    """DROP_PARTITION: the table and each dropped partition's values in partition-key order."""

    table: Table
    values: list[list[str]]  # values of each dropped partition, in key order

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson`` (without it, a Table of ``db`` and ``table``) and ``partitions``."""
        table = _table(body) or Table(dbName=body.get("db"), tableName=body.get("table"), partitionKeys=[])
        return cls(event, body, table, [_values(table, kv) for kv in body.get("partitions") or []])


@dataclass
class CreateFunction(Message):
    """CREATE_FUNCTION: the function as created (``functionObjJson``)."""

    function: Function

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``functionObjJson``."""
        return cls(event, body, from_thrift_json(Function, body["functionObjJson"]))


@dataclass
class DropFunction(Message):
    """DROP_FUNCTION: database and name of the dropped function."""

    function_db: str
    function_name: str

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``db`` (the event's ``dbName`` when absent) and ``functionName``."""
        return cls(event, body, body.get("db") or event.dbName, body["functionName"])


@dataclass
class Insert(Message):
    """INSERT (fire_listener_event): table, partition (None for unpartitioned), ``replace`` and files."""

    table: Table
    partition: Partition | None
    replace: bool
    files: list[str]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``tableObjJson``, ``ptnObjJson``, ``replace`` (true when absent) and ``files``."""
        return cls(
            event,
            body,
            _table(body),
            _partition(body, "ptnObjJson"),
            _is_true(body.get("replace", "true")),
            list(body.get("files") or []),
        )


@dataclass
class OpenTxn(Message):
    """OPEN_TXN: the ids of the txns opened by one open_txns call, ascending."""

    txn_ids: list[int]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``txnIds``, or the range ``fromTxnId``..``toTxnId`` (Hive 4 writes only that)."""
        return cls(event, body, _txn_ids(body))


@dataclass
class CommitTxn(Message):
    """COMMIT_TXN: the txn id, its (database, write id) pairs as the parallel lists ``databases``
    and ``write_ids`` (Hive 4.2 and hivemesh write only these), and ``writes``: one WriteEventInfo
    per write id/table/partition when the message lists tables too (hivemesh before it matched
    Hive 4.2), else ``[]`` (ask the source's get_all_write_event_info)."""

    txn_id: int
    writes: list[WriteEventInfo]
    databases: list[str] = field(default_factory=list)
    write_ids: list[int] = field(default_factory=list)

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``txnid``, ``databases``, ``writeIds`` and, when ``tables`` is set, the writes
        from the parallel lists ``writeIds``, ``databases``, ``tables``, ..."""
        writes = _writes(body) if body.get("tables") else []
        dbs = [str(d) for d in body.get("databases") or []]
        return cls(event, body, int(body["txnid"]), writes, dbs, [int(w) for w in body.get("writeIds") or []])


@dataclass
class AbortTxn(Message):
    """ABORT_TXN: the txn id and the databases it wrote to."""

    txn_id: int
    databases: list[str]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``txnid`` and ``dbsUpdated``."""
        return cls(event, body, int(body["txnid"]), list(body.get("dbsUpdated") or []))


@dataclass
class AllocWriteId(Message):
    """ALLOC_WRITE_ID_EVENT: database, table and the txn -> write id pairs handed out."""

    write_db: str
    write_table: str
    txn_to_write_ids: list[TxnToWriteId]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``dbName``, ``tableName`` (the event's when absent) and the parallel lists
        ``txnIdList``/``writeIdList`` (ValueError when their lengths differ)."""
        pairs = [
            TxnToWriteId(txnId=int(x), writeId=int(w))
            for x, w in zip(body.get("txnIdList") or [], body.get("writeIdList") or [], strict=True)
        ]
        return cls(
            event, body, body.get("dbName") or event.dbName, body.get("tableName") or event.tableName, pairs
        )


@dataclass
class AcidWrite(Message):
    """ACID_WRITE_EVENT (add_write_notification_log): txn, write id, table, partition and files."""

    txn_id: int
    write_id: int
    table: Table
    partition: Partition | None
    partition_name: str
    files: list[str]

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``txnid``, ``writeId``, ``tableObjJson``, ``partitionObjJson``, ``partition``
        (the partition name, "" for a table) and ``files``."""
        return cls(
            event,
            body,
            int(body["txnid"]),
            int(body["writeId"]),
            _table(body),
            _partition(body, "partitionObjJson"),
            body.get("partition") or "",
            list(body.get("files") or []),
        )


@dataclass
class UpdateTableColumnStats(Message):
    """UPDATE_TBL_COL_STAT_EVENT: the ColumnStatistics, the table, table parameters, write id."""

    stats: ColumnStatistics
    table: Table
    parameters: dict[str, str]
    write_id: int

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``colStatsJson``, ``tableObjJson``, ``parameters`` and ``writeId``."""
        return cls(
            event,
            body,
            from_thrift_json(ColumnStatistics, body["colStatsJson"]),
            _table(body),
            dict(body.get("parameters") or {}),
            _write_id(body),
        )


@dataclass
class UpdatePartitionColumnStats(Message):
    """UPDATE_PART_COL_STAT_EVENT: the ColumnStatistics, table, partition values, parameters, write id."""

    stats: ColumnStatistics
    table: Table
    part_vals: list[str]
    parameters: dict[str, str]
    write_id: int

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``colStatsJson``, ``tableObj`` (Hive's name for the table here), ``partVals``,
        ``parameters`` and ``writeId``."""
        return cls(
            event,
            body,
            from_thrift_json(ColumnStatistics, body["colStatsJson"]),
            _table(body, "tableObj"),
            list(body.get("partVals") or []),
            dict(body.get("parameters") or {}),
            _write_id(body),
        )


@dataclass
class DeleteTableColumnStats(Message):
    """DELETE_TBL_COL_STAT_EVENT: the column (None: all) and engine whose statistics went."""

    col_name: str | None
    engine: str | None

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``colName`` and ``engine`` (the table is the event's ``tableName``)."""
        return cls(event, body, body.get("colName"), body.get("engine"))


@dataclass
class DeletePartitionColumnStats(Message):
    """DELETE_PART_COL_STAT_EVENT: partition name and values, column (None: all) and engine."""

    part_name: str
    part_vals: list[str]
    col_name: str | None
    engine: str | None

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``partName``, ``partValues``, ``colName`` and ``engine``."""
        return cls(
            event,
            body,
            body.get("partName") or "",
            list(body.get("partValues") or []),
            body.get("colName"),
            body.get("engine"),
        )


@dataclass
class _AddConstraints(Message):
    """An ADD_* constraint event: the constraint structs added, as stored (names set)."""

    constraints: list[Any]
    struct: ClassVar[type] = SQLPrimaryKey
    event_type: ClassVar[str] = ev.ADD_PRIMARYKEY

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads the list field of the event type (``primaryKeyListJson``, ...)."""
        field_name = ev.CONSTRAINT_LIST_FIELDS[cls.event_type]
        return cls(event, body, [from_thrift_json(cls.struct, j) for j in body.get(field_name) or []])


@dataclass
class AddPrimaryKey(_AddConstraints):
    """ADD_PRIMARYKEY: SQLPrimaryKey columns (``primaryKeyListJson``)."""


@dataclass
class AddForeignKey(_AddConstraints):
    """ADD_FOREIGNKEY: SQLForeignKey columns (``foreignKeyListJson``); the event names the
    referenced table."""

    struct: ClassVar[type] = SQLForeignKey
    event_type: ClassVar[str] = ev.ADD_FOREIGNKEY


@dataclass
class AddUniqueConstraint(_AddConstraints):
    """ADD_UNIQUECONSTRAINT: SQLUniqueConstraint columns (``uniqueConstraintListJson``)."""

    struct: ClassVar[type] = SQLUniqueConstraint
    event_type: ClassVar[str] = ev.ADD_UNIQUECONSTRAINT


@dataclass
class AddNotNullConstraint(_AddConstraints):
    """ADD_NOTNULLCONSTRAINT: SQLNotNullConstraint columns (``notNullConstraintListJson``)."""

    struct: ClassVar[type] = SQLNotNullConstraint
    event_type: ClassVar[str] = ev.ADD_NOTNULLCONSTRAINT


@dataclass
class AddDefaultConstraint(_AddConstraints):
    """ADD_DEFAULTCONSTRAINT: SQLDefaultConstraint columns (``defaultConstraintListJson``)."""

    struct: ClassVar[type] = SQLDefaultConstraint
    event_type: ClassVar[str] = ev.ADD_DEFAULTCONSTRAINT


@dataclass
class AddCheckConstraint(_AddConstraints):
    """ADD_CHECKCONSTRAINT: SQLCheckConstraint columns (``checkConstraintListJson``)."""

    struct: ClassVar[type] = SQLCheckConstraint
    event_type: ClassVar[str] = ev.ADD_CHECKCONSTRAINT


@dataclass
class DropConstraint(Message):
    """DROP_CONSTRAINT: the table's database and name and the constraint dropped."""

    db_name: str
    table: str
    constraint_name: str

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Reads ``dbName``, ``tableName`` and ``constraintName``."""
        return cls(event, body, body["dbName"], body["tableName"], body["constraintName"])


@dataclass
class Unknown(Message):
    """An event type this module does not decode (kept for the caller to skip or handle)."""

    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, event: NotificationEvent, body: Body) -> Self:
        """Keeps the event and its body only."""
        return cls(event, body)


# ---------------------------------------------------------------- the registry
REGISTRY: Mapping[str, type[Message]] = MappingProxyType(
    {
        ev.CREATE_DATABASE: CreateDatabase,
        ev.ALTER_DATABASE: AlterDatabase,
        ev.DROP_DATABASE: DropDatabase,
        ev.CREATE_TABLE: CreateTable,
        ev.ALTER_TABLE: AlterTable,
        ev.DROP_TABLE: DropTable,
        ev.ADD_PARTITION: AddPartition,
        ev.ALTER_PARTITION: AlterPartition,
        ev.DROP_PARTITION: DropPartition,
        ev.INSERT: Insert,
        ev.CREATE_FUNCTION: CreateFunction,
        ev.DROP_FUNCTION: DropFunction,
        ev.OPEN_TXN: OpenTxn,
        ev.COMMIT_TXN: CommitTxn,
        ev.ABORT_TXN: AbortTxn,
        ev.ALLOC_WRITE_ID_EVENT: AllocWriteId,
        ev.ACID_WRITE_EVENT: AcidWrite,
        ev.UPDATE_TBL_COL_STAT_EVENT: UpdateTableColumnStats,
        ev.UPDATE_PART_COL_STAT_EVENT: UpdatePartitionColumnStats,
        ev.DELETE_TBL_COL_STAT_EVENT: DeleteTableColumnStats,
        ev.DELETE_PART_COL_STAT_EVENT: DeletePartitionColumnStats,
        ev.ADD_PRIMARYKEY: AddPrimaryKey,
        ev.ADD_FOREIGNKEY: AddForeignKey,
        ev.ADD_UNIQUECONSTRAINT: AddUniqueConstraint,
        ev.ADD_NOTNULLCONSTRAINT: AddNotNullConstraint,
        ev.ADD_DEFAULTCONSTRAINT: AddDefaultConstraint,
        ev.ADD_CHECKCONSTRAINT: AddCheckConstraint,
        ev.DROP_CONSTRAINT: DropConstraint,
    }
)
"""Event type -> the message class it decodes to (the class's ``from_json`` is its parser).
Covers every type of :data:`hivemesh.hive.events.EVENT_TYPES` and of ``READ_ONLY_EVENT_TYPES``."""


def parse_event(event: NotificationEvent) -> Message:
    """Decode a NotificationEvent written in Hive's ``json-0.2`` format (or Hive 4's
    ``gzip(json-2.0)``: the same JSON, gzipped and base64-encoded) into a typed message with its
    Thrift objects restored (Database, Table, Partition, Function, ColumnStatistics, ...).

    Event types missing from :data:`REGISTRY` give :class:`Unknown`; raises ValueError for a
    message that is not JSON (and KeyError for one without a field its type always has).
    """
    text = event.message or "{}"
    if (event.messageFormat or "").startswith("gzip"):  # Hive 4: base64 of gzipped json-2.0
        try:
            text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
        except (ValueError, OSError, EOFError) as e:
            raise ValueError(f"event {event.eventId} ({event.eventType}): message is not gzip: {e}") from e
    try:
        body: Body = json.loads(text)
    except ValueError as e:
        raise ValueError(f"event {event.eventId} ({event.eventType}): message is not JSON: {e}") from e
    return REGISTRY.get(event.eventType, Unknown).from_json(event, body)
