"""Hive notification events as hivemesh writes them: the event type names and the JSON message builders.

Every successful metadata change appends a ``NotificationEvent`` (``metastore/notification_log.py``)
whose ``message`` follows Hive's JSON message format ``json-0.2`` (Hive's ``JSONMessageEncoder``:
the ``org.apache.hadoop.hive.metastore.messaging.json.JSON*Message`` classes, serialized by Jackson
with only their ``@JsonProperty`` fields). The rules taken from Hive:

- a message is one JSON object without spaces; ``timestamp`` is in seconds;
- ``server`` and ``servicePrincipal`` are the metastore's URI and Kerberos principal ("" here);
- Thrift objects travel as strings holding their **TJSONProtocol** serialization (what Hive's
  ``MessageBuilder.create*ObjJson`` makes; :func:`hivemesh.hive.tjson.thrift_json`):
  ``dbJson``, ``tableObjJson``, ``partitionListJson``, ``functionObjJson``, ``colStatsJson``, ...;
- booleans that Hive keeps as strings (``isTruncateOp``, ``replace``) are ``"true"``/``"false"``;
- file lists hold ReplChangeManager-encoded URIs (:func:`encode_file_uri`).

Reading messages back (typed messages, one per event type): :mod:`hivemesh.hive.event_messages`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hive_metastore.ttypes import (
    ColumnStatistics,
    Database,
    Function,
    InsertEventRequestData,
    Partition,
    Table,
    TxnToWriteId,
)

from hivemesh.hive.constants import now_s
from hivemesh.hive.names import make_part_name
from hivemesh.hive.tjson import thrift_json

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
ADD_PRIMARYKEY = "ADD_PRIMARYKEY"
ADD_FOREIGNKEY = "ADD_FOREIGNKEY"
ADD_UNIQUECONSTRAINT = "ADD_UNIQUECONSTRAINT"
ADD_NOTNULLCONSTRAINT = "ADD_NOTNULLCONSTRAINT"
ADD_DEFAULTCONSTRAINT = "ADD_DEFAULTCONSTRAINT"
ADD_CHECKCONSTRAINT = "ADD_CHECKCONSTRAINT"
DROP_CONSTRAINT = "DROP_CONSTRAINT"

EVENT_TYPES: tuple[str, ...] = (
    CREATE_DATABASE,
    ALTER_DATABASE,
    DROP_DATABASE,
    CREATE_TABLE,
    ALTER_TABLE,
    DROP_TABLE,
    ADD_PARTITION,
    ALTER_PARTITION,
    DROP_PARTITION,
    INSERT,
    CREATE_FUNCTION,
    DROP_FUNCTION,
    OPEN_TXN,
    COMMIT_TXN,
    ABORT_TXN,
    ALLOC_WRITE_ID_EVENT,
    UPDATE_TBL_COL_STAT_EVENT,
    DELETE_TBL_COL_STAT_EVENT,
    UPDATE_PART_COL_STAT_EVENT,
    DELETE_PART_COL_STAT_EVENT,
    ADD_PRIMARYKEY,
    ADD_FOREIGNKEY,
    ADD_UNIQUECONSTRAINT,
    ADD_NOTNULLCONSTRAINT,
    ADD_DEFAULTCONSTRAINT,
    ADD_CHECKCONSTRAINT,
    DROP_CONSTRAINT,
)
"""Every event type hivemesh writes (each has a builder below and a message class in
:mod:`hivemesh.hive.event_messages`)."""

READ_ONLY_EVENT_TYPES: tuple[str, ...] = (ACID_WRITE_EVENT,)
"""Event types hivemesh reads but no longer writes: ACID_WRITE_EVENT, which hivemesh's
``add_write_notification_log`` appended before it answered as Hive 4.2 (stores upgraded since keep
such events until their retention, and replication still reads them)."""

SERVER = ""  # Hive: hive.metastore.uris of the metastore that wrote the event
SERVICE_PRINCIPAL = ""  # Hive: hive.metastore.kerberos.principal


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


def _files(data: InsertEventRequestData | None) -> list[str]:
    """Encoded file URIs of an insert, with their checksums (Hive's FileChksumIterator)."""
    if data is None:
        return []
    chks = list(data.filesAddedChecksum or [])
    return [
        encode_file_uri(f, chks[i] if i < len(chks) else None) for i, f in enumerate(data.filesAdded or [])
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
            "files": _files(data),
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


def commit_txn_message(txn_id: int, written: list[tuple[str, int]]) -> str:
    """COMMIT_TXN (JSONCommitTxnMessage): txnid, timestamp, server, servicePrincipal, and
    ``written``, the txn's distinct (database, write id) pairs, as the parallel lists databases and
    writeIds (Hive 4.2 takes them from TXN_TO_WRITE_ID; both ``[]`` when the txn was allocated no
    write id). tables, partitions, tableObjs, partitionObjs and files are null, as Hive 4.2 writes
    them: a txn's files are read with get_all_write_event_info."""
    out: dict[str, Any] = {"txnid": txn_id, "timestamp": now_s(), **_head()}
    out["writeIds"] = [w for _, w in written]
    out["databases"] = [d for d, _ in written]
    for col in ("tables", "partitions", "tableObjs", "partitionObjs", "files"):
        out[col] = None
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


CONSTRAINT_LIST_FIELDS: Mapping[str, str] = {
    ADD_PRIMARYKEY: "primaryKeyListJson",
    ADD_FOREIGNKEY: "foreignKeyListJson",
    ADD_UNIQUECONSTRAINT: "uniqueConstraintListJson",
    ADD_NOTNULLCONSTRAINT: "notNullConstraintListJson",
    ADD_DEFAULTCONSTRAINT: "defaultConstraintListJson",
    ADD_CHECKCONSTRAINT: "checkConstraintListJson",
}
"""The message field holding the constraints of each ADD_* constraint event type."""


def add_constraints_message(event_type: str, constraints: Sequence[Any]) -> str:
    """ADD_PRIMARYKEY, ADD_FOREIGNKEY, ADD_UNIQUECONSTRAINT, ADD_NOTNULLCONSTRAINT,
    ADD_DEFAULTCONSTRAINT, ADD_CHECKCONSTRAINT (JSONAdd*Message): timestamp and the constraint
    structs as stored (names set, identifiers lower-cased), each in Thrift JSON, in the field of
    :data:`CONSTRAINT_LIST_FIELDS`. KeyError for another event type."""
    field = CONSTRAINT_LIST_FIELDS[event_type]
    return _msg({**_head(), "timestamp": now_s(), field: [thrift_json(c) for c in constraints]})


def drop_constraint_message(db: str, table: str, constraint: str) -> str:
    """DROP_CONSTRAINT (JSONDropConstraintMessage): dbName, tableName, constraintName, timestamp."""
    return _msg(
        {**_head(), "dbName": db, "tableName": table, "constraintName": constraint, "timestamp": now_s()}
    )
