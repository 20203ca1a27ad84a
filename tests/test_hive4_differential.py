"""Differential tests against the real Apache Hive 4.2 metastore (``tests/support/hive4.py``).

One scenario of HMS Thrift calls runs against Hive 4 (on Derby and on PostgreSQL, schema by Hive's
schematool, ``DbNotificationListener``, ACID on) and against hivemesh (on SQLite and PostgreSQL);
the normalised answers must be equal call by call. The scenario covers what Hive 2.3 (the other
Java peer) cannot check: transactions (open, commit, abort, heartbeat, the open-txn lists and their
aborted bits), write ids (allocation, the ValidWriteIdList fields), locks (conflict, waiting,
release), the notification log (event types, order, names and the keys of each decoded message)
and the Hive 3/4 request forms and metaConf calls that third-party clients use.

Normalisation: txn ids relative to the scenario's first txn, the scenario's database name as
``{db}``, warehouse paths and times dropped. Where hivemesh differs on purpose, :data:`KNOWN` says
why and gives both answers, so the difference stays pinned down.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hive_metastore import ttypes as T

from tests.support.hive4 import Hive4Metastore
from tests.support.servers import HivemeshProcess, ThriftClient

pytestmark = pytest.mark.hive4

ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
)
STATE = T.LockState._VALUES_TO_NAMES
LTYPE = T.LockType._VALUES_TO_NAMES


def _sd(location: str | None = None) -> T.StorageDescriptor:
    return T.StorageDescriptor(
        cols=[T.FieldSchema("id", "int", None), T.FieldSchema("name", "string", "the name")],
        location=location,
        inputFormat=ORC[0],
        outputFormat=ORC[1],
        serdeInfo=T.SerDeInfo(serializationLib=ORC[2], parameters={}),
        numBuckets=-1,
        parameters={},
        compressed=False,
        bucketCols=[],
        sortCols=[],
    )


def _table(
    db: str, name: str, keys: list[str], params: dict[str, str], ttype: str = "MANAGED_TABLE"
) -> T.Table:
    return T.Table(
        tableName=name,
        dbName=db,
        owner="alice",
        sd=_sd(),
        partitionKeys=[T.FieldSchema(k, "string", None) for k in keys],
        parameters=params,
        tableType=ttype,
    )


def _decode(event: T.NotificationEvent) -> dict[str, Any]:
    """The JSON message of an event (Hive 4 sends ``gzip(json-2.0)``: base64 of gzipped JSON)."""
    text = event.message
    if (event.messageFormat or "").startswith("gzip"):
        text = gzip.decompress(base64.b64decode(text)).decode()
    return json.loads(text)


class Recorder:
    """Runs calls, keeping each answer (or the exception's type and message) under a label."""

    def __init__(self) -> None:
        self.out: dict[str, Any] = {}

    def __call__(self, label: str, call: Callable[[], Any], message: bool = True) -> Any:
        """``message=False`` keeps only an exception's type: its text differs between Hive
        versions (hivemesh's follows Hive 2.3's) and clients match on the type."""
        try:
            value = call()
        except T.TException as e:
            value = f"{type(e).__name__}: {getattr(e, 'message', e)}" if message else type(e).__name__
        self.out[label] = value
        return value


def scenario(c: Any, warehouse: Path) -> tuple[str, dict[str, Any]]:
    """The scenario's database name, and the calls in order with their answers."""
    db = "h4d_" + uuid.uuid4().hex[:8]
    r = Recorder()
    start = c.get_current_notificationEventId().eventId
    c.create_database(T.Database(name=db, locationUri=f"file:{warehouse}/{db}.db", parameters={"k": "v"}))
    acid = _table(db, "acid", ["p"], {"transactional": "true"})
    c.create_table(acid)
    c.create_table(_table(db, "plain", [], {"a": "2"}, "EXTERNAL_TABLE"))
    c.create_table(_table(db, "parts", ["p", "q"], {"a": "1"}))

    # --- transactions and write ids
    ids = c.open_txns(T.OpenTxnRequest(num_txns=3, user="alice", hostname="h1")).txn_ids
    base = ids[0]
    r("open", lambda: [i - base for i in ids])
    alloc = T.AllocateTableWriteIdsRequest(dbName=db, tableName="acid", txnIds=ids[:2])
    r(
        "allocate",
        lambda: [(x.txnId - base, x.writeId) for x in c.allocate_table_write_ids(alloc).txnToWriteIds],
    )
    r(
        "allocate again",
        lambda: [(x.txnId - base, x.writeId) for x in c.allocate_table_write_ids(alloc).txnToWriteIds],
    )

    def open_txns() -> Any:
        """hwm, then (txn, aborted?) for this scenario's txns (the servers are shared: earlier
        aborted txns stay listed), and the lowest open txn; ids relative to the first txn."""
        o = c.get_open_txns()
        bits = o.abortedBits or b""
        listed = [
            (t - base, bool(bits[n // 8] >> (n % 8) & 1) if n // 8 < len(bits) else False)
            for n, t in enumerate(o.open_txns)
            if t >= base
        ]
        return (o.txn_high_water_mark - base, listed, o.min_open_txn - base)

    r("open txns", open_txns)
    r("commit 0", lambda: c.commit_txn(T.CommitTxnRequest(txnid=ids[0])))
    r("abort 2", lambda: c.abort_txn(T.AbortTxnRequest(txnid=ids[2])))
    r("commit aborted", lambda: c.commit_txn(T.CommitTxnRequest(txnid=ids[2])))
    r("heartbeat aborted", lambda: c.heartbeat(T.HeartbeatRequest(txnid=ids[2])))
    r("commit unknown", lambda: c.commit_txn(T.CommitTxnRequest(txnid=ids[2] + 10_000)).__class__)
    r("open txns after", open_txns)
    r(
        "open txns info",
        lambda: [
            (i.id - base, i.state, i.user, i.hostname)
            for i in c.get_open_txns_info().open_txns
            if i.id >= base
        ],
    )
    hwm = c.get_open_txns().txn_high_water_mark
    # ValidTxnList as Hive's client writes it: hwm:minOpen:open txns:aborted txns
    valid_txns = f"{hwm}:{ids[1]}:{ids[1]}:{ids[2]}"
    r(
        "valid write ids",
        lambda: [
            (
                x.fullTableName.replace(db, "{db}"),
                x.writeIdHighWaterMark,
                x.invalidWriteIds,
                x.minOpenWriteId,
                x.abortedBits,
            )
            for x in c.get_valid_write_ids(
                T.GetValidWriteIdsRequest(fullTableNames=[f"{db}.acid"], validTxnList=valid_txns)
            ).tblValidWriteIds
        ],
    )

    # --- locks: an exclusive lock makes a shared read wait until it is released
    def lock(kind: int, op: int) -> T.LockResponse:
        comp = T.LockComponent(
            type=kind, level=T.LockLevel.TABLE, dbname=db, tablename="plain", operationType=op
        )
        return c.lock(T.LockRequest(component=[comp], user="alice", hostname="h1"))

    excl = lock(T.LockType.EXCLUSIVE, T.DataOperationType.NO_TXN)
    shared = lock(T.LockType.SHARED_READ, T.DataOperationType.SELECT)
    r("lock states", lambda: (STATE[excl.state], STATE[shared.state]))
    r(
        "show locks",
        lambda: sorted(
            (
                STATE[x.state],
                LTYPE[x.type],
                x.tablename,
                x.txnid,
                x.user,
                x.hostname,
                x.blockedByExtId is not None,
            )
            for x in c.show_locks(T.ShowLocksRequest(dbname=db)).locks
        ),
    )
    c.unlock(T.UnlockRequest(lockid=excl.lockid))
    r("check after unlock", lambda: STATE[c.check_lock(T.CheckLockRequest(lockid=shared.lockid)).state])
    c.unlock(T.UnlockRequest(lockid=shared.lockid))
    r("commit 1", lambda: c.commit_txn(T.CommitTxnRequest(txnid=ids[1])))

    # --- partitions and request forms
    for values in (["x", "1"], ["x", "2"], ["y", "1"]):
        c.add_partition(T.Partition(values=values, dbName=db, tableName="parts", sd=_sd(), parameters={}))
    r(
        "append partition",
        lambda: (lambda p: (p.values, p.writeId, p.lastAccessTime))(
            c.append_partition(db, "parts", ["z", "9"])
        ),
    )
    r(
        "get partitions",
        lambda: [(p.values, p.writeId, p.lastAccessTime) for p in c.get_partitions(db, "parts", -1)],
    )
    r(
        "get_partitions_req",
        lambda: [
            (p.values, p.writeId)
            for p in c.get_partitions_req(
                T.PartitionsRequest(dbName=db, tblName="parts", maxParts=2)
            ).partitions
        ],
    )
    r(
        "get_partitions_req missing table",
        lambda: c.get_partitions_req(T.PartitionsRequest(dbName=db, tblName="nope")).partitions,
    )
    r(
        "get_table_req",
        lambda: (lambda t: (t.tableName, t.writeId, t.tableType, t.parameters.get("a")))(
            c.get_table_req(T.GetTableRequest(dbName=db, tblName="plain")).table
        ),
    )
    r(
        "get_table_objects_by_name_req",
        lambda: sorted(
            (t.tableName, t.writeId)
            for t in c.get_table_objects_by_name_req(
                T.GetTablesRequest(dbName=db, tblNames=["acid", "plain", "nope"])
            ).tables
        ),
    )
    r(
        "objects, missing db",
        lambda: c.get_table_objects_by_name_req(T.GetTablesRequest(dbName=db + "_no", tblNames=["x"])),
    )
    r(
        "objects, missing db, no names",
        lambda: c.get_table_objects_by_name_req(T.GetTablesRequest(dbName=db + "_no", tblNames=[])).tables,
    )

    def get_database(**req: Any) -> Any:
        d = c.get_database_req(T.GetDatabaseRequest(**req))
        return (d.name, d.parameters, d.catalogName)

    r("get_database_req", lambda: get_database(name=db, catalogName="hive"))
    r("get_database_req, no catalog", lambda: get_database(name=db))
    # created without an owner on a connection without set_ugi: Hive 3/4 take the server's user
    r("database owner, no set_ugi", lambda: (lambda d: (d.ownerName, d.ownerType))(c.get_database(db)))
    r("get_database_req missing", lambda: get_database(name=db + "_no", catalogName="hive"), message=False)
    keys = [T.FieldSchema("p", "string", None)]
    r(
        "partition values",
        lambda: [
            x.row
            for x in c.get_partition_values(
                T.PartitionValuesRequest(dbName=db, tblName="parts", partitionKeys=keys)
            ).partitionValues
        ],
    )
    r(
        "partition values, max 1",
        lambda: [
            x.row
            for x in c.get_partition_values(
                T.PartitionValuesRequest(dbName=db, tblName="parts", partitionKeys=keys, maxParts=1)
            ).partitionValues
        ],
    )
    r(
        "partition values, unknown key",
        lambda: [
            x.row
            for x in c.get_partition_values(
                T.PartitionValuesRequest(
                    dbName=db, tblName="parts", partitionKeys=[T.FieldSchema("zz", "string", None)]
                )
            ).partitionValues
        ],
    )
    r(
        "tables by filter, params",
        lambda: c.get_table_names_by_filter(db, 'hive_filter_field_params__a = "2"', -1),
    )
    # Hive lists these in no particular order (its query has no ORDER BY); hivemesh sorts by name
    r(
        "tables by filter, owner",
        lambda: sorted(c.get_table_names_by_filter(db, 'hive_filter_field_owner__ = "alice"', -1)),
    )
    r(
        "tables by filter, like",
        lambda: c.get_table_names_by_filter(db, 'hive_filter_field_params__a like "1"', -1),
    )
    r(
        "tables by filter, missing db",
        lambda: c.get_table_names_by_filter(db + "_no", 'hive_filter_field_owner__ = "x"', -1),
    )

    # --- metaConf: per-connection settings
    for key in ("hive.metastore.try.direct.sql", "hive.metastore.client.socket.timeout", "metastore.try.direct.sql.ddl",
                "hive.metastore.disallow.incompatible.col.type.changes", "hive.metastore.warehouse.dir", "hive.nope"):  # fmt: skip
        r(f"getMetaConf {key}", lambda key=key: c.getMetaConf(key))
    r("setMetaConf", lambda: c.setMetaConf("hive.metastore.client.socket.timeout", "30"))
    r("getMetaConf after set", lambda: c.getMetaConf("hive.metastore.client.socket.timeout"))
    r("setMetaConf not settable", lambda: c.setMetaConf("hive.metastore.warehouse.dir", "/x"))

    # --- DDL errors
    r("create existing table", lambda: c.create_table(_table(db, "plain", [], {})), message=False)
    r(
        "add existing partition",
        lambda: c.add_partition(
            T.Partition(values=["x", "1"], dbName=db, tableName="parts", sd=_sd(), parameters={})
        ),
        message=False,
    )
    r("drop missing table", lambda: c.drop_table(db, "nope", True), message=False)
    c.drop_table(db, "plain", True)

    # --- the notification log of everything above
    events = c.get_next_notification(T.NotificationEventRequest(lastEvent=start, maxEvents=10_000)).events
    mine = [e for e in events if e.dbName in (db, None)]
    r("event types", lambda: [e.eventType for e in mine])
    r(
        "event names",
        lambda: [(e.eventType, (e.dbName or "").replace(db, "{db}"), e.tableName, e.catName) for e in mine],
    )
    r("event message keys", lambda: [(e.eventType, sorted(_decode(e))) for e in mine])
    r(
        "event count",
        lambda: (
            c.get_notification_events_count(
                T.NotificationEventsCountRequest(fromEventId=start, dbName=db)
            ).eventsCount
        ),
    )
    r("abort writeIds", lambda: [_decode(e).get("writeIds") for e in mine if e.eventType == "ABORT_TXN"])
    statistics_and_marks(c, r, db + "_s", warehouse)
    txn_lists_and_unlock(c, r, db)
    # txn ids in exception messages, relative to the scenario's first txn; lock ids dropped
    for label, value in r.out.items():
        if isinstance(value, str):
            value = re.sub(r"txnid:(\d+)", lambda m: f"txnid:+{int(m.group(1)) - base}", value)
            r.out[label] = re.sub(r"lockid:\d+", "lockid:<id>", value)
    return db, r.out


def txn_lists_and_unlock(c: Any, r: Recorder, db: str) -> None:
    """get_open_txns_req with excludeTxnTypes (an empty list excludes nothing) and unlock of a
    txn's lock; after the notification checks above, since OPEN_TXN events have no database."""
    ro = c.open_txns(T.OpenTxnRequest(num_txns=1, user="alice", hostname="h1", txn_type=T.TxnType.READ_ONLY))
    rw = c.open_txns(T.OpenTxnRequest(num_txns=1, user="alice", hostname="h1"))
    first = ro.txn_ids[0]

    def open_req(**req: Any) -> Any:
        o = c.get_open_txns_req(T.GetOpenTxnsRequest(**req))
        return [t - first for t in o.open_txns if t >= first], o.min_open_txn - first

    r("get_open_txns_req, excluding none", lambda: open_req(excludeTxnTypes=[]))
    r("get_open_txns_req, excluding READ_ONLY", lambda: open_req(excludeTxnTypes=[T.TxnType.READ_ONLY]))
    r("get_open_txns_req, excluding DEFAULT", lambda: open_req(excludeTxnTypes=[T.TxnType.DEFAULT]))
    comp = T.LockComponent(
        type=T.LockType.SHARED_READ, level=T.LockLevel.TABLE, dbname=db, tablename="acid",
        operationType=T.DataOperationType.SELECT, isTransactional=True,
    )  # fmt: skip
    held = c.lock(T.LockRequest(component=[comp], txnid=rw.txn_ids[0], user="alice", hostname="h1"))
    r("unlock a txn's lock", lambda: c.unlock(T.UnlockRequest(lockid=held.lockid)))
    for txn in (*ro.txn_ids, *rw.txn_ids):
        c.abort_txn(T.AbortTxnRequest(txnid=txn))


def _long_stats(
    db: str, part: str, col: str, low: int, high: int, nulls: int, ndv: int
) -> T.ColumnStatistics:
    return T.ColumnStatistics(
        statsDesc=T.ColumnStatisticsDesc(
            isTblLevel=False, dbName=db, tableName="st", partName=part, catName="hive"
        ),
        statsObj=[
            T.ColumnStatisticsObj(
                colName=col,
                colType="int",
                statsData=T.ColumnStatisticsData(
                    longStats=T.LongColumnStatsData(lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv)
                ),
            )
        ],
        engine="hive",
    )


def _string_stats(
    db: str, part: str, max_len: int, avg_len: float, nulls: int, ndv: int
) -> T.ColumnStatistics:
    data = T.StringColumnStatsData(maxColLen=max_len, avgColLen=avg_len, numNulls=nulls, numDVs=ndv)
    return T.ColumnStatistics(
        statsDesc=T.ColumnStatisticsDesc(
            isTblLevel=False, dbName=db, tableName="st", partName=part, catName="hive"
        ),
        statsObj=[
            T.ColumnStatisticsObj(
                colName="name", colType="string", statsData=T.ColumnStatisticsData(stringStats=data)
            )
        ],
        engine="hive",
    )


def statistics_and_marks(c: Any, r: Recorder, db: str, warehouse: Path) -> None:
    """Fast stats of tables created over files, get_aggr_stats_for (plain and extrapolated),
    partition marks and column type changes, in a database of their own (so the scenario's
    notification checks above stay as they are)."""
    c.create_database(T.Database(name=db, locationUri=f"file:{warehouse}/{db}.db", parameters={}))

    def get_table(name: str) -> T.Table:  # Hive 4.2 has only the request form
        return c.get_table_req(T.GetTableRequest(dbName=db, tblName=name)).table

    for name, keys in (("over_plain", []), ("over_parted", ["p"])):
        loc = warehouse / f"{db}.db" / name
        (loc / "p=1").mkdir(parents=True)
        (loc / "f0").write_bytes(b"x" * 10)
        (loc / "p=1" / "f1").write_bytes(b"y" * 32)
        t = _table(db, name, keys, {}, "EXTERNAL_TABLE")
        t.sd.location = f"file:{loc}"
        c.create_table(t)
        r(
            f"fast stats, {name} over files",
            lambda name=name: {k: v for k, v in get_table(name).parameters.items()
                               if k in ("numFiles", "totalSize", "numRows", "COLUMN_STATS_ACCURATE")},
        )  # fmt: skip

    # --- get_aggr_stats_for: id (int) and name (string) over partitions p=a..p=d
    c.create_table(_table(db, "st", ["p"], {}))
    for p in "abcd":
        c.add_partition(T.Partition(values=[p], dbName=db, tableName="st", sd=_sd(), parameters={}))
    c.update_partition_column_statistics(_long_stats(db, "p=a", "id", 1, 10, 1, 10))
    c.update_partition_column_statistics(_long_stats(db, "p=b", "id", 5, 40, 2, 30))
    c.update_partition_column_statistics(_long_stats(db, "p=c", "id", 20, 22, 0, 8))
    c.update_partition_column_statistics(_string_stats(db, "p=a", 7, 3.5, 1, 4))
    c.update_partition_column_statistics(_string_stats(db, "p=b", 12, 5.25, 0, 9))

    def aggr(parts: list[str], cols: list[str], table: str = "st") -> Any:
        got = c.get_aggr_stats_for(T.PartitionsStatsRequest(dbName=db, tblName=table, colNames=cols,
                                                           partNames=parts, engine="hive"))  # fmt: skip
        return [sorted(got.colStats or [], key=lambda o: o.colName), got.partsFound]

    r("aggr stats, all found", lambda: aggr(["p=a", "p=b"], ["id", "name"]))
    r("aggr stats, id of a..c", lambda: aggr(["p=a", "p=b", "p=c"], ["id"]))
    r("aggr stats, id extrapolated to d", lambda: aggr(["p=a", "p=b", "p=c", "p=d"], ["id"]))
    r("aggr stats, reversed order", lambda: aggr(["p=d", "p=c", "p=b", "p=a"], ["id"]))
    # Hive 4.2 fails these two (see KNOWN): its text is the database's, so only the type is kept
    r("aggr stats, name over a..c", lambda: aggr(["p=a", "p=b", "p=c"], ["name", "id"]), message=False)
    r("aggr stats, missing partition", lambda: aggr(["p=a", "p=zz"], ["id"]), message=False)
    r("aggr stats, no columns", lambda: aggr(["p=a"], []))
    r("aggr stats, no partitions", lambda: aggr([], ["id"]))
    r("aggr stats, missing table", lambda: aggr(["p=a"], ["id"], "nope"), message=False)

    merge_statistics(c, r, db)

    # --- partition marks
    load_done = T.PartitionEventType.LOAD_DONE
    r("mark partition", lambda: c.markPartitionForEvent(db, "st", {"p": "a"}, load_done))
    r("marked", lambda: c.isPartitionMarkedForEvent(db, "st", {"p": "a"}, load_done))
    r("not marked", lambda: c.isPartitionMarkedForEvent(db, "st", {"p": "b"}, load_done))
    r(
        "mark a partition that does not exist",
        lambda: c.markPartitionForEvent(db, "st", {"p": "new"}, load_done),
    )
    r("marked, does not exist", lambda: c.isPartitionMarkedForEvent(db, "st", {"p": "new"}, load_done))
    r("mark, missing table", lambda: c.markPartitionForEvent(db, "nope", {"p": "a"}, load_done))
    r("mark, wrong key", lambda: c.markPartitionForEvent(db, "st", {"q": "a"}, load_done))
    r("mark, too many keys", lambda: c.markPartitionForEvent(db, "st", {"p": "a", "q": "b"}, load_done))
    r("marked, missing table", lambda: c.isPartitionMarkedForEvent(db, "nope", {"p": "a"}, load_done))

    # --- column type changes in alter_table (hive.metastore.disallow.incompatible.col.type.changes)
    def retype(table: str, *types: str) -> Any:
        t = get_table(table)
        t.sd.cols = [T.FieldSchema(f"c{i}", ty, None) for i, ty in enumerate(types)]
        c.alter_table(db, table, t)
        return [(f.name, f.type) for f in get_table(table).sd.cols]

    c.create_table(_table(db, "ty", [], {}))
    r("retype: widen and to string", lambda: retype("ty", "bigint", "string"))
    r("retype: more columns", lambda: retype("ty", "decimal(10,2)", "varchar(10)", "int", "date"))
    r("retype: bigint to int", lambda: retype("ty", "int", "varchar(10)", "int", "date"))
    r("retype: string to int, date to int", lambda: retype("ty", "decimal(12,2)", "int", "int", "int"))
    r("retype: to a struct", lambda: retype("ty", "struct<a:int>", "string", "bigint", "string"))
    r("retype: fewer columns, narrowing", lambda: retype("ty", "double", "char(3)"))
    r(
        "setMetaConf allow type changes",
        lambda: c.setMetaConf("hive.metastore.disallow.incompatible.col.type.changes", "false"),
    )
    r("retype when allowed", lambda: retype("ty", "int", "boolean"))
    c.setMetaConf("hive.metastore.disallow.incompatible.col.type.changes", "true")


def _stats_obj(col: str, low: int, high: int, nulls: int, ndv: int) -> T.ColumnStatisticsObj:
    data = T.LongColumnStatsData(lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv)
    return T.ColumnStatisticsObj(col, "int", T.ColumnStatisticsData(longStats=data))


def merge_statistics(c: Any, r: Recorder, db: str) -> None:
    """set_aggr_stats_for with needMerge (what Hive's INSERT INTO sends): only the columns that
    COLUMN_STATS_ACCURATE marks accurate are merged into the stored statistics, the others dropped."""
    cols = [T.FieldSchema(n, t, None) for n, t in (("a", "int"), ("b", "int"), ("s", "string"))]
    for name, keys in (("mt", []), ("mp", ["p"])):
        t = _table(db, name, keys, {})
        t.sd.cols = cols
        c.create_table(t)
    c.add_partition(T.Partition(values=["1"], dbName=db, tableName="mp", sd=_sd(), parameters={}))

    def desc(table: str) -> T.ColumnStatisticsDesc:
        part = "p=1" if table == "mp" else None
        return T.ColumnStatisticsDesc(isTblLevel=part is None, dbName=db, tableName=table, partName=part)

    def put(table: str, merge: bool, *objs: T.ColumnStatisticsObj) -> bool:
        stats = T.ColumnStatistics(statsDesc=desc(table), statsObj=list(objs), engine="hive")
        return c.set_aggr_stats_for(
            T.SetPartitionsStatsRequest(colStats=[stats], needMerge=merge, engine="hive")
        )

    def stored(table: str) -> Any:
        """The statistics of a, b and s, and the columns COLUMN_STATS_ACCURATE marks accurate."""
        names = ["a", "b", "s"]
        if table == "mp":
            req = T.PartitionsStatsRequest(
                dbName=db, tblName=table, colNames=names, partNames=["p=1"], engine="hive"
            )
            objs = c.get_partitions_statistics_req(req).partStats.get("p=1", [])
            params = c.get_partition(db, table, ["1"]).parameters
        else:
            objs = c.get_table_statistics_req(
                T.TableStatsRequest(dbName=db, tblName=table, colNames=names, engine="hive")
            ).tableStats
            params = get_table(table).parameters
        accurate = json.loads(params.get("COLUMN_STATS_ACCURATE", "{}")).get("COLUMN_STATS", {})
        return sorted(objs, key=lambda o: o.colName), sorted(accurate)  # fmt: skip

    def get_table(name: str) -> T.Table:
        return c.get_table_req(T.GetTableRequest(dbName=db, tblName=name)).table

    results = [put("mt", True, _stats_obj("a", 1, 10, 1, 5))]
    r("merge stats, nothing stored yet", lambda: stored("mt"))
    results.append(put("mt", False, _stats_obj("a", 1, 10, 1, 5), _stats_obj("b", 3, 4, 0, 2)))
    s_obj = T.ColumnStatisticsObj(
        "s", "string", T.ColumnStatisticsData(stringStats=T.StringColumnStatsData(4, 2.0, 1, 3))
    )
    results.append(put("mt", True, _stats_obj("a", 0, 5, 2, 8), _stats_obj("b", 5, 9, 1, 1), s_obj))
    r("merge stats, accurate columns merged, s dropped", lambda: stored("mt"))
    t = get_table("mt")
    t.parameters["COLUMN_STATS_ACCURATE"] = json.dumps({"COLUMN_STATS": {"a": "true"}})
    c.alter_table_with_environment_context(db, "mt", t, T.EnvironmentContext({"DO_NOT_UPDATE_STATS": "true"}))
    results.append(put("mt", True, _stats_obj("a", -3, 4, 1, 2), _stats_obj("b", 100, 200, 5, 50)))
    r("merge stats, b no longer accurate", lambda: stored("mt"))
    c.update_partition_column_statistics(
        T.ColumnStatistics(statsDesc=desc("mp"), statsObj=[_stats_obj("a", 1, 10, 1, 5)], engine="hive")
    )
    results.append(put("mp", True, _stats_obj("a", 0, 20, 3, 7), _stats_obj("b", 1, 1, 0, 1)))
    r("merge stats, partition", lambda: stored("mp"))
    r("merge stats, results", lambda: results)
    # set_aggr_stats_for (no merge) on a partition without COLUMN_STATS_ACCURATE: see KNOWN
    c.add_partition(T.Partition(values=["2"], dbName=db, tableName="mp", sd=_sd(), parameters={}))
    two = T.ColumnStatisticsDesc(isTblLevel=False, dbName=db, tableName="mp", partName="p=2")
    c.set_aggr_stats_for(
        T.SetPartitionsStatsRequest(
            colStats=[
                T.ColumnStatistics(statsDesc=two, statsObj=[_stats_obj("a", 1, 2, 0, 2)], engine="hive")
            ],
            engine="hive",
        )
    )
    r(
        "set_aggr_stats_for partition, accuracy",
        lambda: c.get_partition(db, "mp", ["2"]).parameters.get("COLUMN_STATS_ACCURATE"),
    )


# Deliberate differences: label -> (why, hivemesh's answer, Hive 4.2's answer).
_AGGR_BUG = (
    "Hive 4.2 cannot aggregate when some requested partitions lack statistics of a column that "
    "others have in all or in fewer than two of them: its direct SQL still names "
    "PART_COL_STATS.PARTITION_NAME, a column HIVE-27725 removed, and its JDO fallback is not "
    "implemented (MetaException). hivemesh aggregates these columns as Hive did before 4.1"
)


def _long_obj(low: int, high: int, nulls: int, ndv: int) -> T.ColumnStatisticsObj:
    data = T.LongColumnStatsData(lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv)
    return T.ColumnStatisticsObj("id", "int", T.ColumnStatisticsData(longStats=data))


KNOWN: dict[str, tuple[str, Any, Any]] = {
    "aggr stats, name over a..c": (
        _AGGR_BUG,
        [
            [
                _long_obj(1, 40, 3, 30),
                T.ColumnStatisticsObj(
                    "name",
                    "string",
                    T.ColumnStatisticsData(
                        stringStats=T.StringColumnStatsData(
                            maxColLen=17, avgColLen=7.0, numNulls=0, numDVs=14
                        )
                    ),
                ),
            ],
            2,
        ],
        "MetaException",
    ),
    "aggr stats, missing partition": (_AGGR_BUG, [[_long_obj(1, 10, 1, 10)], 1], "MetaException"),
    "set_aggr_stats_for partition, accuracy": (
        "Hive 4.2's batch update of partition statistics (set_aggr_stats_for, by direct SQL) also "
        "marks the basic statistics of a partition without COLUMN_STATS_ACCURATE accurate, which "
        "update_partition_column_statistics does not; hivemesh marks the columns only, since "
        "BASIC_STATS=true lets Hive answer count(*) from a numRows that nobody set",
        '{"COLUMN_STATS":{"a":"true"}}',
        '{"BASIC_STATS":"true","COLUMN_STATS":{"a":"true"}}',
    ),
    "merge stats, results": (
        "set_aggr_stats_for with needMerge of partition statistics: Hive 4.2 answers false when it "
        "stores them by direct SQL (its result is set on the JDO path only); hivemesh answers true",
        [True, True, True, True, True],
        [True, True, True, True, False],
    ),
    "get_database_req, no catalog": (
        "Hive 4.2 fails on a GetDatabaseRequest without catalogName (a NullPointerException in its "
        "name normalisation, sent as NoSuchObjectException); hivemesh takes the default catalog",
        ["{db}", {"k": "v"}, "hive"],
        'NoSuchObjectException: database null.{db}: Cannot invoke "String.trim()" because "identifier" is null',
    ),
    "event count": (
        "asked for one database, Hive 4 also counts the events without a database (OPEN_TXN, "
        "COMMIT_TXN, ABORT_TXN); hivemesh counts that database's events, as get_next_notification "
        "filters them",
        10,
        14,
    ),
}


def _normalise(db: str, value: Any) -> Any:
    """``value`` as JSON would give it back, with the database name ``db`` (if any) as ``{db}``."""
    text = json.dumps(value, default=repr)
    return json.loads(text.replace(db, "{db}") if db else text)


@pytest.fixture(scope="module")
def hive4_answers(hive4: Hive4Metastore) -> dict[str, Any]:
    """The scenario's answers from Hive 4 (once per Hive 4 backend)."""
    with ThriftClient(hive4.host, hive4.port) as c:
        return _normalise(*scenario(c, hive4.warehouse))


def test_hivemesh_answers_as_hive4(hive4_answers: dict[str, Any], hivemesh_server: HivemeshProcess) -> None:
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        ours = _normalise(*scenario(c, hivemesh_server.warehouse))
    assert_as_hive4(ours, hive4_answers, KNOWN, lambda value: _normalise("", value))


def assert_as_hive4(
    ours: dict[str, Any],
    hive4: dict[str, Any],
    known: dict[str, tuple[str, Any, Any]],
    normalise: Callable[[Any], Any],
) -> None:
    """The same labels in the same order, equal answers except the ``known`` ones, and those still
    exactly the pinned pair (``normalise`` brings a pinned answer into the recorded form)."""
    assert list(ours) == list(hive4)
    diffs = [
        f"{label}:\n  hive4:    {hive4[label]}\n  hivemesh: {ours[label]}"
        for label in ours
        if ours[label] != hive4[label] and label not in known
    ]
    assert not diffs, f"{len(diffs)} answer(s) differ from Hive 4:\n" + "\n".join(diffs)
    for label, (why, mine, hives) in known.items():  # the known differences are still exactly these
        assert (ours[label], hive4[label]) == (normalise(mine), normalise(hives)), f"{label}: {why}"


# ---------------------------------------------------------------------------------------------------
# Second block: the calls of issue 28 section 2 (constraints, truncate, catalogs, partition specs,
# exchange_partitions, get_latest_txnid_in_conflict). Its own scenario and known differences, on
# the same Hive 4 and hivemesh servers.
_GENERATED = re.compile(r"^(pk|fk|uk|nn|dc)_\d+_\d+_\d+$")
_TIME_KEYS = {"createTime", "lastAccessTime", "transient_lastDdlTime"}


def _plain(value: Any) -> Any:
    """A Thrift struct as a dict of its set fields (recursively); times dropped, generated
    constraint names as ``<pk>`` ..."""
    if hasattr(type(value), "thrift_spec"):
        return {k: _plain(v) for k, v in vars(value).items() if v is not None and k not in _TIME_KEYS}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items()) if k not in _TIME_KEYS}
    if isinstance(value, str) and _GENERATED.match(value):
        return f"<{value.split('_')[0]}>"
    return value


def _stats_params(params: dict[str, str] | None) -> dict[str, Any]:
    keep = ("numFiles", "numRows", "totalSize", "rawDataSize", "COLUMN_STATS_ACCURATE")
    out: dict[str, Any] = {k: v for k, v in (params or {}).items() if k in keep}
    if "COLUMN_STATS_ACCURATE" in out:
        out["COLUMN_STATS_ACCURATE"] = json.loads(out["COLUMN_STATS_ACCURATE"])
    return out


def api_scenario(c: Any, warehouse: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The replacements that normalise the answers (names, paths), and the calls with answers."""
    tag = uuid.uuid4().hex[:8]
    db, cat = f"h4api_{tag}", f"h4cat_{tag}"
    r = Recorder()
    wh = f"file:{warehouse}"
    c.set_ugi("root", [])  # the owner of databases created without one (Hive: the UGI's user)
    c.create_database(T.Database(name=db, locationUri=f"{wh}/{db}.db", parameters={}))
    cols = [T.FieldSchema("id", "int", None), T.FieldSchema("name", "string", None)]

    def table(name: str, keys: list[str] = (), **params: str) -> T.Table:  # type: ignore[assignment]
        t = _table(db, name, list(keys), dict(params))
        t.sd.cols = list(cols)
        return t

    def part(name: str, values: list[str], **params: str) -> T.Partition:
        sd = _sd()
        sd.cols = list(cols)
        return T.Partition(values=values, dbName=db, tableName=name, sd=sd, parameters=dict(params))

    # --- constraints
    first_event = c.get_current_notificationEventId().eventId
    pk = T.SQLPrimaryKey(db, "p", "id", 1, "p_pk", True, False, True)
    r(
        "create with constraints",
        lambda: c.create_table_with_constraints(
            table("p"),
            [pk],
            [],
            [T.SQLUniqueConstraint("hive", db, "p", "name", 1, "p_uk", False, False, False)],
            [T.SQLNotNullConstraint("hive", db, "p", "name", "p_nn", True, True, False)],
            [T.SQLDefaultConstraint("hive", db, "p", "name", "'x'", "p_dc", True, False, False)],
            [T.SQLCheckConstraint("hive", db, "p", "id", "id > 0", "p_cc", True, False, False)],
        ),
    )
    r("primary keys", lambda: _plain(c.get_primary_keys(T.PrimaryKeysRequest(db, "P", "hive"))))
    r("unique", lambda: _plain(c.get_unique_constraints(T.UniqueConstraintsRequest("hive", db, "p"))))
    r("not null", lambda: _plain(c.get_not_null_constraints(T.NotNullConstraintsRequest("hive", db, "p"))))
    r("default", lambda: _plain(c.get_default_constraints(T.DefaultConstraintsRequest("hive", db, "p"))))
    r("check", lambda: _plain(c.get_check_constraints(T.CheckConstraintsRequest("hive", db, "p"))))
    c.create_table(table("c"))
    fk = T.SQLForeignKey(db, "p", "id", db, "c", "id", 1, 0, 0, "c_fk", None, False, False, True, "hive")
    r("add foreign key", lambda: c.add_foreign_key(T.AddForeignKeyRequest([fk])))
    r(
        "foreign keys by child",
        lambda: _plain(c.get_foreign_keys(T.ForeignKeysRequest(None, None, db, "c", "hive"))),
    )
    r(
        "foreign keys by parent",
        lambda: _plain(c.get_foreign_keys(T.ForeignKeysRequest(db, "p", None, None, "hive"))),
    )
    r("all of c", lambda: _plain(c.get_all_table_constraints(T.AllTableConstraintsRequest(db, "c", "hive"))))
    c.create_table(table("g"))
    r(
        "generated pk",
        lambda: c.add_primary_key(
            T.AddPrimaryKeyRequest([T.SQLPrimaryKey(db, "g", "id", 1, None, False, False, False, "hive")])
        ),
    )
    r(
        "generated nn",
        lambda: c.add_not_null_constraint(
            T.AddNotNullConstraintRequest(
                [T.SQLNotNullConstraint("hive", db, "g", "name", None, False, False, False)]
            )
        ),
    )
    r("all of g", lambda: _plain(c.get_all_table_constraints(T.AllTableConstraintsRequest(db, "g", "hive"))))
    r(
        "second pk",
        lambda: c.add_primary_key(
            T.AddPrimaryKeyRequest(
                [T.SQLPrimaryKey(db, "p", "name", 1, "p_pk2", False, False, False, "hive")]
            )
        ),
    )
    r(
        "taken name",
        lambda: c.add_unique_constraint(
            T.AddUniqueConstraintRequest(
                [T.SQLUniqueConstraint("hive", db, "c", "name", 1, "C_FK", False, False, False)]
            )
        ),
    )
    r(
        "unknown column",
        lambda: c.add_not_null_constraint(
            T.AddNotNullConstraintRequest(
                [T.SQLNotNullConstraint("hive", db, "c", "nope", "x_nn", False, False, False)]
            )
        ),
    )
    r(
        "unknown table",
        lambda: c.add_primary_key(
            T.AddPrimaryKeyRequest(
                [T.SQLPrimaryKey(db, "nope", "id", 1, "x_pk", False, False, False, "hive")]
            )
        ),
    )
    r(
        "fk to no key",
        lambda: c.add_foreign_key(
            T.AddForeignKeyRequest(
                [
                    T.SQLForeignKey(
                        db, "c", "id", db, "g", "id", 1, 0, 0, "g_fk", None, False, False, False, "hive"
                    )
                ]
            )
        ),
    )
    r(
        "fk to a non-key",
        lambda: c.add_foreign_key(
            T.AddForeignKeyRequest(
                [
                    T.SQLForeignKey(
                        db, "p", "name", db, "c", "name", 1, 0, 0, "c_fk2", None, False, False, False, "hive"
                    )
                ]
            )
        ),
    )
    r(
        "constraints of a missing table",
        lambda: _plain(c.get_primary_keys(T.PrimaryKeysRequest(db, "nope", "hive"))),
    )
    r("drop unknown constraint", lambda: c.drop_constraint(T.DropConstraintRequest(db, "p", "nope", "hive")))
    r("drop fk from its table", lambda: c.drop_constraint(T.DropConstraintRequest(db, "c", "c_fk", "hive")))
    r(
        "foreign keys after drop",
        lambda: _plain(c.get_foreign_keys(T.ForeignKeysRequest(None, None, db, "c", "hive"))),
    )
    r("drop pk", lambda: c.drop_constraint(T.DropConstraintRequest(db, "p", "P_PK", "hive")))
    r("primary keys after drop", lambda: _plain(c.get_primary_keys(T.PrimaryKeysRequest(db, "p", "hive"))))
    r(
        "constraint events",
        lambda: [
            (e.eventType, e.catName, e.dbName, e.tableName, sorted(_decode(e)))
            for e in c.get_next_notification(T.NotificationEventRequest(first_event)).events
        ],
    )

    # --- truncate
    stats = {"numFiles": "2", "numRows": "10", "totalSize": "20", "rawDataSize": "30"}
    c.create_table(table("t", **stats))
    loc = Path(warehouse, db + ".db", "t")
    loc.mkdir(parents=True, exist_ok=True)
    (loc / "f1").write_bytes(b"0123456789")
    data = T.ColumnStatisticsData(
        longStats=T.LongColumnStatsData(lowValue=1, highValue=9, numNulls=0, numDVs=3)
    )
    stats_obj = T.ColumnStatisticsObj("id", "int", data)
    col_stats = T.ColumnStatistics(T.ColumnStatisticsDesc(True, db, "t"), [stats_obj], engine="hive")
    c.update_table_column_statistics_req(T.SetPartitionsStatsRequest([col_stats], engine="hive"))
    r("truncate", lambda: c.truncate_table(db, "t", None))
    r(
        "column statistics after truncate",
        lambda: _plain(c.get_table_statistics_req(T.TableStatsRequest(db, "t", ["id"], engine="hive"))),
    )
    r("truncated params", lambda: _stats_params(c.get_table_req(T.GetTableRequest(db, "t")).table.parameters))
    r("truncated files", lambda: sorted(p.name for p in loc.iterdir()))
    c.create_table(table("tp", ["ds"]))
    c.add_partitions([part("tp", [d], **stats) for d in ("a", "b")])
    r("truncate a partition", lambda: c.truncate_table_req(T.TruncateTableRequest(db, "tp", ["ds=a"])))
    r(
        "truncated partitions",
        lambda: {p.values[0]: _stats_params(p.parameters) for p in c.get_partitions(db, "tp", -1)},
    )
    r("truncate a missing table", lambda: c.truncate_table(db, "nope", None))

    # --- a database with a managed location, dropped with its data
    mdb = db + "_m"
    loc, managed = Path(warehouse, "ext", mdb + ".db"), Path(warehouse, "managed", mdb + ".db")
    c.create_database(
        T.Database(name=mdb, locationUri=f"file:{loc}", managedLocationUri=f"file:{managed}", parameters={})
    )
    r("directories of a new database", lambda: (loc.is_dir(), managed.is_dir()))
    for d in (loc, managed):
        d.mkdir(parents=True, exist_ok=True)
        (d / "f").write_bytes(b"x")
    r("drop database with its data", lambda: c.drop_database(mdb, True, True))
    r("directories after the drop", lambda: (loc.exists(), managed.exists()))

    # --- catalogs
    cat_loc = f"{wh}/{cat}"
    r("create catalog", lambda: c.create_catalog(T.CreateCatalogRequest(T.Catalog(cat, "d", cat_loc))))
    r("get catalog", lambda: _plain(c.get_catalog(T.GetCatalogRequest(cat))))
    r("catalog listed", lambda: cat in c.get_catalogs().names)
    r("its databases", lambda: c.get_databases(f"@{cat}#"))
    r("its default database", lambda: _plain(c.get_database(f"@{cat}#default")))
    r("create catalog again", lambda: c.create_catalog(T.CreateCatalogRequest(T.Catalog(cat, "d", cat_loc))))
    r("catalog without location", lambda: c.create_catalog(T.CreateCatalogRequest(T.Catalog(cat + "x"))))
    r(
        "database in a missing catalog",
        lambda: c.create_database(T.Database(name="x", catalogName=cat + "x", parameters={})),
    )
    c.create_database(T.Database(name="sales", catalogName=cat, parameters={}))
    r("database of the catalog", lambda: _plain(c.get_database(f"@{cat}#sales")))
    r("drop non-empty catalog", lambda: c.drop_catalog(T.DropCatalogRequest(cat)))
    c.drop_database(f"@{cat}#sales", True, False)
    r("drop catalog", lambda: c.drop_catalog(T.DropCatalogRequest(cat)))
    r("dropped catalog", lambda: c.get_catalog(T.GetCatalogRequest(cat)))
    r("drop hive catalog", lambda: c.drop_catalog(T.DropCatalogRequest("hive")))

    # before the exchanges: Hive 4.2's failed exchange_partitions leaves its metadata transaction
    # open, so the next call writing an event through it keeps Derby's NOTIFICATION_SEQUENCE lock
    write_event_info(c, r, db, table, part)

    # --- partition specs and exchange
    c.create_table(table("s", ["ds", "hr"]))
    c.create_table(table("d", ["ds", "hr"]))
    c.add_partitions([part("s", [d, h]) for d in ("1", "2") for h in ("0", "1")])
    r("part specs", lambda: _plain(c.get_part_specs_by_filter(db, "s", 'ds = "1"', -1)))
    r("exchange", lambda: sorted(p.values for p in c.exchange_partitions({"ds": "1"}, db, "s", db, "d")))
    r("source after", lambda: c.get_partition_names(db, "s", -1))
    r("destination after", lambda: [(p.values, p.sd.location) for p in c.get_partitions(db, "d", -1)])
    r("exchange one", lambda: _plain(c.exchange_partition({"ds": "2", "hr": "1"}, db, "s", db, "d")))
    r("exchange nothing", lambda: c.exchange_partitions({"ds": "9"}, db, "s", db, "d"))
    # not "exchange across schemas": Hive 4.2 then leaves a transaction open that holds Derby's
    # NOTIFICATION_SEQUENCE lock, and every later call writing an event times out (a Hive bug)
    r("exchange from a missing table", lambda: c.exchange_partitions({"ds": "2"}, db, "nope", db, "d"))

    # --- write-write conflicts
    def txn() -> int:
        return c.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]

    def update_lock(t: int) -> None:
        comp = T.LockComponent(
            type=T.LockType.SHARED_WRITE, level=T.LockLevel.TABLE, dbname=db, tablename="t",
            operationType=T.DataOperationType.UPDATE, isTransactional=True,
        )  # fmt: skip
        c.lock(T.LockRequest(component=[comp], txnid=t, user="u", hostname="h"))

    first, second = txn(), txn()
    update_lock(first)
    update_lock(second)
    r("no conflict yet", lambda: c.get_latest_txnid_in_conflict(second))
    c.commit_txn(T.CommitTxnRequest(txnid=first))
    r("conflict", lambda: c.get_latest_txnid_in_conflict(second) - first)
    c.abort_txn(T.AbortTxnRequest(txnid=second))
    c.drop_database(db, True, True)
    return [(cat, "{cat}"), (db, "{db}"), (wh, "{wh}"), (str(warehouse), "{wh}")], r.out


def write_event_info(
    c: Any, r: Recorder, db: str, table: Callable[..., T.Table], part: Callable[..., T.Partition]
) -> None:
    """get_all_write_event_info over the writes of an open, then committed txn (a table and a
    partition), with and without database/table filters, and of unknown and aborted txns."""
    c.create_table(table("wf", transactional="true"))
    c.create_table(table("wp", ["p"], transactional="true"))
    c.add_partitions([part("wp", ["a"])])
    first_event = c.get_current_notificationEventId().eventId
    t = c.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    for name, vals, files in (
        ("wp", ["a"], ["file:/x/p=a/delta_1/b0", "file:/x/p=a/delta_1/b1"]),
        ("wf", None, []),
    ):
        req = T.AllocateTableWriteIdsRequest(dbName=db, tableName=name, txnIds=[t])
        w = c.allocate_table_write_ids(req).txnToWriteIds[0].writeId
        rq = T.WriteNotificationLogRequest(
            txnId=t, writeId=w, db=db, table=name,
            fileInfo=T.InsertEventRequestData(filesAdded=files), partitionVals=vals,
        )  # fmt: skip
        r(f"add_write_notification_log {name}", lambda rq=rq: _plain(c.add_write_notification_log(rq)))

    def info(txn: int, dbname: str | None = None, tablename: str | None = None) -> Any:
        rq = T.GetAllWriteEventInfoRequest(txnId=txn, dbName=dbname, tableName=tablename)
        return [
            (
                i.writeId, i.database, i.table, i.files, i.partition,
                json.loads(i.tableObj)["1"]["str"] if i.tableObj else i.tableObj,
                json.loads(i.partitionObj)["1"]["lst"] if i.partitionObj else i.partitionObj,
            )
            for i in c.get_all_write_event_info(rq)
        ]  # fmt: skip

    r("write event info", lambda: info(t))
    r("write event info, database", lambda: info(t, db))
    r("write event info, table", lambda: info(t, db, "wp"))
    r("write event info, table only", lambda: info(t, None, "wf"))
    r("write event info, all", lambda: info(t, "*", "*"))
    r("write event info, upper case", lambda: info(t, db.upper(), "WP"))
    r("write event info, other database", lambda: info(t, db + "_no"))
    idle = c.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    c.commit_txn(T.CommitTxnRequest(txnid=idle))  # a txn without writes
    c.commit_txn(T.CommitTxnRequest(txnid=t))
    # the notification log of the txns: Hive writes no event for add_write_notification_log (only
    # TXN_WRITE_NOTIFICATION_LOG rows), and its COMMIT_TXN names neither files nor tables
    # (OPEN_TXN is left out: hivemesh also writes its txnIds list, which Hive 4.2 leaves null, so a
    # reader of another id set than a range keeps working; see events.open_txn_message)
    head = {"txnid", "timestamp", "server", "servicePrincipal"}
    txn_events = c.get_next_notification(T.NotificationEventRequest(first_event)).events
    r("write notification event types", lambda: [e.eventType for e in txn_events])
    r(
        "write notification messages",
        lambda: [
            (e.eventType, sorted(k for k, v in _decode(e).items() if v is not None and k not in head))
            for e in txn_events
            if e.eventType != "OPEN_TXN"
        ],
    )
    r(
        "commit message",
        lambda: [
            (_decode(e)["databases"], _decode(e)["writeIds"])
            for e in txn_events
            if e.eventType == "COMMIT_TXN"
        ],
    )
    r("write event info, committed", lambda: info(t))
    r("write event info, unknown txn", lambda: info(t + 1_000_000))
    a = c.open_txns(T.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(dbName=db, tableName="wf", txnIds=[a]))
    c.add_write_notification_log(
        T.WriteNotificationLogRequest(
            txnId=a, writeId=2, db=db, table="wf", fileInfo=T.InsertEventRequestData(filesAdded=["file:/x/f"])
        )
    )
    r("write event info, open", lambda: info(a))
    c.abort_txn(T.AbortTxnRequest(txnid=a))
    r("write event info, aborted", lambda: info(a))


_INTERNAL = "TApplicationException: Internal error processing "
API_KNOWN: dict[str, tuple[str, Any, Any]] = {
    "unknown column": (
        "Hive 4.2 fails with an InvalidObjectException the call does not declare (an internal "
        "error); hivemesh sends it as the MetaException the call declares, with its reason",
        "MetaException: InvalidObjectException: Parent column not found: nope",
        _INTERNAL + "add_not_null_constraint",
    ),
    "unknown table": (
        "as 'unknown column'",
        "MetaException: InvalidObjectException: Parent table not found: nope",
        _INTERNAL + "add_primary_key",
    ),
    "drop unknown constraint": (
        "Hive 4.2 turns its NoSuchObjectException into an InvalidObjectException the call does not "
        "declare (an internal error); hivemesh answers the declared NoSuchObjectException, as Hive 3",
        "NoSuchObjectException: The constraint: nope does not exist for the associated table: {db}.p",
        _INTERNAL + "drop_constraint",
    ),
    "foreign keys after drop": (
        "Hive 4.2's direct-SQL get_foreign_keys joins each foreign key column to a primary key "
        "column of the referenced table, so a foreign key onto a unique constraint (c_fk2, which "
        "both store) is never listed; hivemesh lists it",
        {
            "foreignKeys": [
                {
                    "pktable_db": "{db}",
                    "pktable_name": "p",
                    "pkcolumn_name": "name",
                    "fktable_db": "{db}",
                    "fktable_name": "c",
                    "fkcolumn_name": "name",
                    "key_seq": 1,
                    "update_rule": 0,
                    "delete_rule": 0,
                    "fk_name": "c_fk2",
                    "pk_name": "p_pk",
                    "enable_cstr": False,
                    "validate_cstr": False,
                    "rely_cstr": False,
                    "catName": "hive",
                }
            ]
        },  # fmt: skip
        {"foreignKeys": []},
    ),
    "column statistics after truncate": (
        "Hive 4.2 keeps a truncated table's column statistics (only COLUMN_STATS_ACCURATE says they "
        "are stale); hivemesh deletes them, so readers that do not check that flag (Trino) never "
        "plan an empty table with the statistics of its old rows",
        {"tableStats": []},
        {
            "tableStats": [
                {
                    "colName": "id",
                    "colType": "int",
                    "statsData": {"longStats": {"lowValue": 1, "highValue": 9, "numNulls": 0, "numDVs": 3}},
                }
            ]
        },  # fmt: skip
    ),
    "truncate a missing table": (
        "Hive 4.2 fails with a NoSuchObjectException truncate_table does not declare (an internal "
        "error); hivemesh answers the MetaException it declares",
        "MetaException: {db}.nope table not found",
        _INTERNAL + "truncate_table",
    ),
}
"""Differences of :func:`api_scenario` kept on purpose: label -> (why, hivemesh's, Hive 4's)."""


def _api_normalise(replacements: list[tuple[str, str]], value: Any) -> Any:
    text = json.dumps(value, default=repr)
    for old, new in replacements:
        text = text.replace(old, new)
    return json.loads(text)


@pytest.fixture(scope="module")
def hive4_api_answers(hive4: Hive4Metastore) -> dict[str, Any]:
    """:func:`api_scenario`'s answers from Hive 4 (once per Hive 4 backend)."""
    with ThriftClient(hive4.host, hive4.port) as c:
        names, out = api_scenario(c, hive4.warehouse)
    return _api_normalise(names, out)


def test_hms_api_calls_answer_as_hive4(
    hive4_api_answers: dict[str, Any], hivemesh_server: HivemeshProcess
) -> None:
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        names, out = api_scenario(c, hivemesh_server.warehouse)
    assert_as_hive4(_api_normalise(names, out), hive4_api_answers, API_KNOWN, lambda v: _api_normalise([], v))
