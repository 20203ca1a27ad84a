"""Notification events: every metadata change appends Hive's event(s) in the same transaction.

Through a real hivemesh server on each backend (SQLite, PostgreSQL): the exact event types, Hive's
JSON field names, the Thrift-JSON objects decoding to what get_* returns, no event for a failed
call, dense ids. Plus unit tests of the Thrift JSON writer and the message builders.
"""

from __future__ import annotations

import json
import threading

import pytest
from hive_metastore.ttypes import (
    AddPartitionsRequest,
    AlreadyExistsException,
    BinaryColumnStatsData,
    BooleanColumnStatsData,
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    Database,
    Decimal,
    DecimalColumnStatsData,
    DoubleColumnStatsData,
    DropPartitionsRequest,
    FieldSchema,
    Function,
    InsertEventRequestData,
    InvalidObjectException,
    InvalidOperationException,
    LongColumnStatsData,
    MetaException,
    NoSuchObjectException,
    NotificationEvent,
    NotificationEventRequest,
    Order,
    Partition,
    PartitionsStatsRequest,
    RequestPartsSpec,
    ResourceUri,
    SerDeInfo,
    SetPartitionsStatsRequest,
    SkewedInfo,
    StorageDescriptor,
    StringColumnStatsData,
    Table,
    TableStatsRequest,
    TxnToWriteId,
    WriteEventInfo,
)
from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.TSerialization import deserialize, serialize

from hivemesh.hive import event_messages, events, tjson
from tests.support.servers import ThriftClient

HEAD = {"server", "servicePrincipal"}


# ---------------------------------------------------------------- helpers
def current(hms) -> int:  # type: ignore[no-untyped-def]
    return hms.get_current_notificationEventId().eventId


def since(hms, last: int) -> list[NotificationEvent]:  # type: ignore[no-untyped-def]
    return list(
        hms.get_next_notification(NotificationEventRequest(lastEvent=last, maxEvents=-1)).events or []
    )


def body(e: NotificationEvent) -> dict:
    return json.loads(e.message)


def tbl_of(text: str) -> Table:
    return tjson.from_thrift_json(Table, text)  # type: ignore[return-value]


def part_of(text: str) -> Partition:
    return tjson.from_thrift_json(Partition, text)  # type: ignore[return-value]


def sd(cols: list[FieldSchema] | None = None, location: str | None = None, **kw) -> StorageDescriptor:  # type: ignore[no-untyped-def]
    return StorageDescriptor(
        cols=cols or [FieldSchema("id", "bigint", "key"), FieldSchema("Name", "string", None)],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.ql.io.orc.OrcSerde", {"serialization.format": "1"}),
        **kw,
    )


def make_table(hms, db: str, name: str, partitioned: bool = True, **params: str) -> Table:  # type: ignore[no-untyped-def]
    hms.create_table(
        Table(
            tableName=name,
            dbName=db,
            owner="alice",
            sd=sd(),
            partitionKeys=[FieldSchema("ds", "string", None), FieldSchema("hr", "int", None)]
            if partitioned
            else [],
            tableType="MANAGED_TABLE",
            parameters=dict(params),
        )
    )
    return hms.get_table(db, name)


def check_common(e: NotificationEvent, etype: str, db: str | None, table: str | None) -> dict:
    assert e.eventType == etype
    assert e.dbName == db
    assert e.tableName == table
    assert e.messageFormat == "json-0.2"
    assert e.catName == "hive"
    b = body(e)
    assert b["server"] == "" and b["servicePrincipal"] == ""
    assert isinstance(b["timestamp"], int) and abs(b["timestamp"] - e.eventTime) <= 5  # seconds
    return b


@pytest.fixture()
def db(hms, unique_name):  # type: ignore[no-untyped-def]
    hms.create_database(Database(name=unique_name, description="events"))
    yield unique_name
    try:
        hms.drop_database(unique_name, True, True)
    except NoSuchObjectException:
        pass


# ---------------------------------------------------------------- databases
def test_database_events(hms, unique_name) -> None:  # type: ignore[no-untyped-def]
    start = current(hms)
    hms.create_database(Database(name=unique_name, description="d1", parameters={"a": "1"}, ownerName="bob"))
    created = hms.get_database(unique_name)
    hms.alter_database(unique_name, Database(name=unique_name, description="d2", parameters={"b": "2"}))
    altered = hms.get_database(unique_name)
    hms.drop_database(unique_name, True, False)
    got = since(hms, start)
    assert [e.eventType for e in got] == ["CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE"]
    assert [e.eventId for e in got] == [start + 1, start + 2, start + 3]

    b = check_common(got[0], "CREATE_DATABASE", unique_name, None)
    assert set(b) == HEAD | {"db", "dbJson", "timestamp"}
    assert b["db"] == unique_name
    assert tjson.from_thrift_json(Database, b["dbJson"]) == created

    b = check_common(got[1], "ALTER_DATABASE", unique_name, None)
    assert set(b) == HEAD | {"db", "dbObjBeforeJson", "dbObjAfterJson", "timestamp"}
    assert tjson.from_thrift_json(Database, b["dbObjBeforeJson"]) == created
    assert tjson.from_thrift_json(Database, b["dbObjAfterJson"]) == altered
    assert altered.parameters == {"b": "2"}

    b = check_common(got[2], "DROP_DATABASE", unique_name, None)
    assert set(b) == HEAD | {"db", "timestamp"} and b["db"] == unique_name


def test_drop_database_cascade_events(hms, unique_name) -> None:  # type: ignore[no-untyped-def]
    hms.create_database(Database(name=unique_name))
    make_table(hms, unique_name, "p1")
    make_table(hms, unique_name, "u1", partitioned=False)
    hms.add_partitions([Partition(values=["a", "1"], dbName=unique_name, tableName="p1")])
    hms.create_function(Function("f1", unique_name, "com.example.F", "bob", 1, 0, 1, []))
    last = hms.get_table(unique_name, "p1")
    start = current(hms)
    hms.drop_database(unique_name, True, True)
    got = since(hms, start)
    # Hive's drop_database_core: functions, then tables (no DROP_PARTITION), then the database
    assert [e.eventType for e in got] == ["DROP_FUNCTION", "DROP_TABLE", "DROP_TABLE", "DROP_DATABASE"]
    assert body(got[0])["functionName"] == "f1"
    dropped = {e.tableName: tbl_of(body(e)["tableObjJson"]) for e in got[1:3]}
    assert set(dropped) == {"p1", "u1"}
    assert dropped["p1"] == last
    assert got[3].dbName == unique_name


# ---------------------------------------------------------------- tables
def test_table_events(hms, db) -> None:  # type: ignore[no-untyped-def]
    hms.create_database(Database(name=db + "_other"))
    try:
        start = current(hms)
        created = make_table(hms, db, "t1", partitioned=False, k="v")
        new = hms.get_table(db, "t1")
        new.parameters["k"] = "v2"
        new.sd.cols.append(FieldSchema("extra", "double", None))
        hms.alter_table(db, "t1", new)
        altered = hms.get_table(db, "t1")
        renamed_req = hms.get_table(db, "t1")
        renamed_req.dbName, renamed_req.tableName = db + "_other", "t2"
        hms.alter_table(db, "t1", renamed_req)
        renamed = hms.get_table(db + "_other", "t2")
        hms.drop_table(db + "_other", "t2", True)
        got = since(hms, start)
    finally:
        hms.drop_database(db + "_other", True, True)
    assert [e.eventType for e in got] == ["CREATE_TABLE", "ALTER_TABLE", "ALTER_TABLE", "DROP_TABLE"]

    b = check_common(got[0], "CREATE_TABLE", db, "t1")
    assert set(b) == HEAD | {"db", "table", "tableType", "tableObjJson", "timestamp", "files"}
    assert (b["db"], b["table"], b["tableType"], b["files"]) == (db, "t1", "MANAGED_TABLE", [])
    assert tbl_of(b["tableObjJson"]) == created

    b = check_common(got[1], "ALTER_TABLE", db, "t1")
    assert set(b) == HEAD | {
        "db",
        "table",
        "tableType",
        "tableObjBeforeJson",
        "tableObjAfterJson",
        "isTruncateOp",
        "timestamp",
        "writeId",
    }
    assert b["isTruncateOp"] == "false"
    assert tbl_of(b["tableObjBeforeJson"]) == created
    assert tbl_of(b["tableObjAfterJson"]) == altered
    assert b["writeId"] == (altered.writeId if altered.writeId is not None else -1)

    # a rename is an ALTER_TABLE named after the new table; the message names the old one
    b = check_common(got[2], "ALTER_TABLE", db + "_other", "t2")
    assert (b["db"], b["table"]) == (db, "t1")
    assert tbl_of(b["tableObjBeforeJson"]) == altered
    assert tbl_of(b["tableObjAfterJson"]) == renamed

    b = check_common(got[3], "DROP_TABLE", db + "_other", "t2")
    assert set(b) == HEAD | {"db", "table", "tableType", "tableObjJson", "timestamp"}
    assert tbl_of(b["tableObjJson"]) == renamed


# ---------------------------------------------------------------- partitions
def test_partition_events(hms, db) -> None:  # type: ignore[no-untyped-def]
    table = make_table(hms, db, "p")
    start = current(hms)
    parts = [
        Partition(values=["2024-01-01", "1"], dbName=db, tableName="p"),  # the table's sd
        Partition(
            values=["2024-01-01", "2"],
            dbName=db,
            tableName="p",
            sd=sd(
                cols=[FieldSchema("ID", "bigint", "key"), FieldSchema("other", "int", None)],
                sortCols=[Order("id", 0)],
                bucketCols=["id"],
                numBuckets=4,
                parameters={"sdp": "1"},
                skewedInfo=SkewedInfo([], [], {}),
                compressed=True,
            ),
            parameters={"pp": "x", "é": "ü"},
        ),
        Partition(values=["a/b c", "3"], dbName=db, tableName="p", lastAccessTime=7),
    ]
    hms.add_partitions_req(AddPartitionsRequest(db, "p", parts, ifNotExists=False, needResult=True))
    after_add = hms.get_partitions(db, "p", -1)
    got = since(hms, start)
    assert [e.eventType for e in got] == ["ADD_PARTITION"]  # one event for the batch
    b = check_common(got[0], "ADD_PARTITION", db, "p")
    assert set(b) == HEAD | {
        "db",
        "table",
        "tableType",
        "tableObjJson",
        "timestamp",
        "partitions",
        "partitionListJson",
        "partitionFiles",
    }
    assert tbl_of(b["tableObjJson"]) == table
    decoded = sorted((part_of(p) for p in b["partitionListJson"]), key=lambda p: p.values)
    assert decoded == sorted(after_add, key=lambda p: p.values)
    assert b["partitions"] == [
        {"ds": "2024-01-01", "hr": "1"},
        {"ds": "2024-01-01", "hr": "2"},
        {"ds": "a/b c", "hr": "3"},
    ]
    assert [f["partitionName"] for f in b["partitionFiles"]] == [
        "ds=2024-01-01/hr=1",
        "ds=2024-01-01/hr=2",
        "ds=a%2Fb c/hr=3",
    ]
    assert all(f["files"] == [] for f in b["partitionFiles"])

    # nothing new with ifNotExists: no event
    start = current(hms)
    hms.add_partitions_req(AddPartitionsRequest(db, "p", parts[:1], ifNotExists=True, needResult=True))
    assert since(hms, start) == []

    # alter_partitions: one ALTER_PARTITION per partition
    before = {tuple(p.values): p for p in hms.get_partitions(db, "p", -1)}
    changed = [hms.get_partition(db, "p", ["2024-01-01", "1"]), hms.get_partition(db, "p", ["a/b c", "3"])]
    for p in changed:
        p.parameters["new"] = "yes"
    start = current(hms)
    hms.alter_partitions(db, "p", changed)
    got = since(hms, start)
    assert [e.eventType for e in got] == ["ALTER_PARTITION", "ALTER_PARTITION"]
    for e, p in zip(got, changed, strict=True):
        b = check_common(e, "ALTER_PARTITION", db, "p")
        assert set(b) == HEAD | {
            "db",
            "table",
            "tableType",
            "tableObjJson",
            "isTruncateOp",
            "timestamp",
            "writeId",
            "keyValues",
            "partitionObjBeforeJson",
            "partitionObjAfterJson",
        }
        assert b["keyValues"] == {"ds": p.values[0], "hr": p.values[1]}
        assert part_of(b["partitionObjBeforeJson"]) == before[tuple(p.values)]
        assert part_of(b["partitionObjAfterJson"]) == hms.get_partition(db, "p", p.values)
        assert part_of(b["partitionObjAfterJson"]).parameters["new"] == "yes"

    # rename_partition: ALTER_PARTITION from the old to the new partition
    old = hms.get_partition(db, "p", ["2024-01-01", "2"])
    start = current(hms)
    hms.rename_partition(db, "p", ["2024-01-01", "2"], Partition(values=["2024-01-02", "2"]))
    got = since(hms, start)
    assert [e.eventType for e in got] == ["ALTER_PARTITION"]
    b = body(got[0])
    assert b["keyValues"] == {"ds": "2024-01-01", "hr": "2"}
    assert part_of(b["partitionObjBeforeJson"]) == old
    assert part_of(b["partitionObjAfterJson"]) == hms.get_partition(db, "p", ["2024-01-02", "2"])

    # drops: one DROP_PARTITION per partition
    start = current(hms)
    hms.drop_partitions_req(
        DropPartitionsRequest(
            db, "p", RequestPartsSpec(names=["ds=2024-01-01/hr=1", "ds=a%2Fb c/hr=3"]), deleteData=True
        )
    )
    hms.drop_partition(db, "p", ["2024-01-02", "2"], True)
    got = since(hms, start)
    assert [e.eventType for e in got] == ["DROP_PARTITION"] * 3
    b = check_common(got[0], "DROP_PARTITION", db, "p")
    assert set(b) == HEAD | {"db", "table", "tableType", "tableObjJson", "timestamp", "partitions"}
    assert sorted(json.dumps(body(e)["partitions"]) for e in got) == sorted(
        json.dumps([kv])
        for kv in (
            {"ds": "2024-01-01", "hr": "1"},
            {"ds": "a/b c", "hr": "3"},
            {"ds": "2024-01-02", "hr": "2"},
        )
    )
    assert tbl_of(b["tableObjJson"]) == hms.get_table(db, "p")
    assert hms.get_partitions(db, "p", -1) == []


# ---------------------------------------------------------------- functions
def test_function_events(hms, db) -> None:  # type: ignore[no-untyped-def]
    func = Function("MyUpper", db, "com.example.Upper", "bob", 1, 0, 1, [ResourceUri(1, "file:/tmp/x.jar")])
    start = current(hms)
    hms.create_function(func)
    created = hms.get_function(db, "myupper")
    hms.alter_function(db, "myupper", Function("myupper", db, "com.example.Upper2", "bob", 1, 0, 1, []))
    hms.drop_function(db, "myupper")
    got = since(hms, start)
    # Hive has no ALTER_FUNCTION event: alter_function notifies nothing
    assert [e.eventType for e in got] == ["CREATE_FUNCTION", "DROP_FUNCTION"]
    b = check_common(got[0], "CREATE_FUNCTION", db, None)
    assert set(b) == HEAD | {"db", "functionObjJson", "timestamp"}
    assert tjson.from_thrift_json(Function, b["functionObjJson"]) == created
    b = check_common(got[1], "DROP_FUNCTION", db, None)
    assert set(b) == HEAD | {"db", "functionName", "timestamp"}
    assert (b["db"], b["functionName"]) == (db, "myupper")


# ---------------------------------------------------------------- statistics
def _stats(db: str, table: str, part_name: str | None = None) -> ColumnStatistics:
    return ColumnStatistics(
        statsDesc=ColumnStatisticsDesc(part_name is None, db, table, part_name, 123),
        statsObj=[
            ColumnStatisticsObj(
                "ID",
                "bigint",
                ColumnStatisticsData(longStats=LongColumnStatsData(-5, 10**12, 1, 7, b"\x00\xff\x10")),
            ),
            ColumnStatisticsObj(
                "name",
                "string",
                ColumnStatisticsData(stringStats=StringColumnStatsData(12, 3.25, 0, 9)),
            ),
        ],
        engine="hive",
    )


def test_set_aggr_stats_for_is_all_or_nothing(hms, db) -> None:  # type: ignore[no-untyped-def]
    """A batch whose second entry names a missing partition stores none of it and logs no event."""
    make_table(hms, db, "aon")
    hms.add_partitions([Partition(values=["d", "0"], dbName=db, tableName="aon")])
    start = current(hms)
    with pytest.raises(Exception) as err:  # noqa: PT011 - Hive answers NoSuchObject or MetaException
        hms.set_aggr_stats_for(
            SetPartitionsStatsRequest(
                colStats=[_stats(db, "aon", "ds=d/hr=0"), _stats(db, "aon", "ds=d/hr=9")]
            )
        )
    assert type(err.value).__name__ in ("NoSuchObjectException", "MetaException", "InvalidObjectException")
    assert since(hms, start) == []
    got = hms.get_partitions_statistics_req(
        PartitionsStatsRequest(db, "aon", ["id", "name"], ["ds=d/hr=0"], engine="hive")
    ).partStats
    assert not got.get("ds=d/hr=0"), got


def test_statistics_events(hms, db) -> None:  # type: ignore[no-untyped-def]
    make_table(hms, db, "s")
    hms.add_partitions(
        [Partition(values=["d", str(i)], dbName=db, tableName="s") for i in range(2)],
    )
    start = current(hms)
    hms.update_table_column_statistics(_stats(db, "s"))
    table_after = hms.get_table(db, "s")
    stored = hms.get_table_statistics_req(
        TableStatsRequest(db, "s", ["id", "name"], engine="hive")
    ).tableStats
    hms.set_aggr_stats_for(
        SetPartitionsStatsRequest(colStats=[_stats(db, "s", "ds=d/hr=0"), _stats(db, "s", "ds=d/hr=1")])
    )
    hms.delete_table_column_statistics(db, "s", "id", "hive")
    hms.delete_partition_column_statistics(db, "s", "ds=d/hr=1", None, "hive")
    got = since(hms, start)
    assert [e.eventType for e in got] == [
        "UPDATE_TBL_COL_STAT_EVENT",
        "UPDATE_PART_COL_STAT_EVENT",
        "UPDATE_PART_COL_STAT_EVENT",
        "DELETE_TBL_COL_STAT_EVENT",
        "DELETE_PART_COL_STAT_EVENT",
    ]
    b = check_common(got[0], "UPDATE_TBL_COL_STAT_EVENT", db, "s")
    assert set(b) == HEAD | {"writeId", "timestamp", "database", "colStatsJson", "parameters", "tableObjJson"}
    cs = tjson.from_thrift_json(ColumnStatistics, b["colStatsJson"])
    assert cs.statsDesc.isTblLevel and cs.statsDesc.dbName == db and cs.statsDesc.tableName == "s"
    assert [o.colName for o in cs.statsObj] == ["id", "name"]
    assert sorted(cs.statsObj, key=lambda o: o.colName) == sorted(stored, key=lambda o: o.colName)
    assert b["parameters"] == table_after.parameters
    assert "COLUMN_STATS_ACCURATE" in b["parameters"]
    assert tbl_of(b["tableObjJson"]) == table_after
    assert b["writeId"] == -1

    b = check_common(got[1], "UPDATE_PART_COL_STAT_EVENT", db, "s")
    assert set(b) == HEAD | {
        "writeId",
        "timestamp",
        "database",
        "colStatsJson",
        "parameters",
        "partVals",
        "tableObj",
    }
    assert b["partVals"] == ["d", "0"]
    assert b["parameters"] == hms.get_partition(db, "s", ["d", "0"]).parameters
    assert tjson.from_thrift_json(ColumnStatistics, b["colStatsJson"]).statsDesc.partName == "ds=d/hr=0"
    assert body(got[2])["partVals"] == ["d", "1"]

    b = check_common(got[3], "DELETE_TBL_COL_STAT_EVENT", db, "s")
    assert (b["database"], b["colName"], b["engine"]) == (db, "id", "hive")
    b = check_common(got[4], "DELETE_PART_COL_STAT_EVENT", db, "s")
    assert (b["partName"], b["partValues"], b["colName"]) == ("ds=d/hr=1", ["d", "1"], None)


# ---------------------------------------------------------------- failures and ids
def test_failed_calls_write_no_event(hms, db) -> None:  # type: ignore[no-untyped-def]
    make_table(hms, db, "f")
    hms.add_partitions([Partition(values=["x", "1"], dbName=db, tableName="f")])
    hms.create_function(Function("fn", db, "com.example.F", "bob", 1, 0, 1, []))
    start = current(hms)
    failing = [
        (AlreadyExistsException, lambda: hms.create_database(Database(name=db))),
        (AlreadyExistsException, lambda: make_table(hms, db, "f")),
        (InvalidObjectException, lambda: make_table(hms, db + "_nodb", "f")),
        (InvalidOperationException, lambda: hms.alter_table(db, "missing", hms.get_table(db, "f"))),
        (AlreadyExistsException, lambda: hms.add_partitions([Partition(values=["x", "1"], dbName=db, tableName="f")])),
        (
            AlreadyExistsException,  # the batch is atomic: the new partition is not added either
            lambda: hms.add_partitions(
                [Partition(values=["y", "2"], dbName=db, tableName="f"), Partition(values=["x", "1"], dbName=db, tableName="f")]
            ),
        ),
        (MetaException, lambda: hms.add_partitions([Partition(values=["only-one"], dbName=db, tableName="f")])),
        (NoSuchObjectException, lambda: hms.drop_partition(db, "f", ["nope", "1"], True)),
        (InvalidOperationException, lambda: hms.alter_partition(db, "f", Partition(values=["nope", "1"]))),
        (NoSuchObjectException, lambda: hms.drop_table(db, "missing", True)),
        (AlreadyExistsException, lambda: hms.create_function(Function("fn", db, "com.example.F", "bob", 1, 0, 1, []))),
        (NoSuchObjectException, lambda: hms.drop_function(db, "nofn")),
        (InvalidOperationException, lambda: hms.drop_database(db, True, False)),
        (MetaException, lambda: hms.update_table_column_statistics(
            ColumnStatistics(
                ColumnStatisticsDesc(True, db, "f"),
                [ColumnStatisticsObj("nocol", "int", ColumnStatisticsData(longStats=LongColumnStatsData(numNulls=0, numDVs=0)))],
                engine="hive",
            )
        )),
        (NoSuchObjectException, lambda: hms.delete_table_column_statistics(db, "f", "id", "hive")),
    ]  # fmt: skip
    for exc, call in failing:
        with pytest.raises(exc):
            call()
    assert since(hms, start) == []
    assert current(hms) == start
    assert [p.values for p in hms.get_partitions(db, "f", -1)] == [["x", "1"]]


def test_event_ids_dense_under_concurrency(hivemesh_server, hms, db) -> None:  # type: ignore[no-untyped-def]
    """Writers on separate connections: every successful change has its event, ids have no gap."""
    make_table(hms, db, "c")
    start = current(hms)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
                for i in range(10):
                    c.add_partitions([Partition(values=[f"w{n}", str(i)], dbName=db, tableName="c")])
                    if i % 3 == 0:
                        make_table(c, db, f"t{n}_{i}", partitioned=False)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = since(hms, start)
    assert [e.eventId for e in got] == list(range(start + 1, start + 1 + len(got)))
    assert sorted(e.eventType for e in got) == sorted(["ADD_PARTITION"] * 40 + ["CREATE_TABLE"] * 16)
    assert current(hms) == start + 56


# ---------------------------------------------------------------- Thrift JSON and message builders (units)
_TJSON = TJSONProtocolFactory()


def _sample_table() -> Table:
    return Table(
        tableName="t",
        dbName="d",
        owner="o",
        createTime=5,
        lastAccessTime=0,
        retention=0,
        sd=sd(location="file:/w/d.db/t", sortCols=[Order("id", 1)], bucketCols=[], parameters={"a": 'q"\\'}),
        partitionKeys=[FieldSchema("ds", "string", None)],
        parameters={"transient_lastDdlTime": "5", "comment": "naïve ✓"},
        tableType="MANAGED_TABLE",
        temporary=False,
        rewriteEnabled=False,
        catName="hive",
        ownerType=1,
        writeId=0,
        id=42,
    )


def test_thrift_json_matches_thrift_tjsonprotocol() -> None:
    """Byte-equal to Thrift's own TJSONProtocol where both follow Java (no doubles, no controls)."""
    table = _sample_table()
    part = Partition(["2024"], "d", "t", 1, 0, table.sd, {"k": "v"}, None, "hive", 3)
    func = Function("f", "d", "c.F", "o", 1, 9, 1, [ResourceUri(1, "file:/x.jar")])
    for obj in (table, part, func, Database("d", "desc", "file:/w", {"a": "b"}, None, "o", 1, "hive", 3)):
        assert tjson.thrift_json(obj) == serialize(obj, _TJSON).decode("utf-8")
        assert tjson.from_thrift_json(type(obj), tjson.thrift_json(obj)) == obj


def test_thrift_json_doubles_binary_and_escapes_round_trip() -> None:
    cs = ColumnStatistics(
        statsDesc=ColumnStatisticsDesc(True, "d", "t", None, 5, "hive"),
        statsObj=[
            ColumnStatisticsObj("a", "double", ColumnStatisticsData(doubleStats=DoubleColumnStatsData(1e20, -1.5e-7, 1, 2))),
            ColumnStatisticsObj("b", "double", ColumnStatisticsData(doubleStats=DoubleColumnStatsData(0.1, 12345678.9, 0, 1))),
            ColumnStatisticsObj(
                "c",
                "decimal(10,2)",
                ColumnStatisticsData(
                    decimalStats=DecimalColumnStatsData(Decimal(2, b"\x01\x02\xff"), Decimal(2, b"\x09"), 3, 4, b"\x00\x01\x02\x03")
                ),
            ),
            ColumnStatisticsObj("d", "boolean", ColumnStatisticsData(booleanStats=BooleanColumnStatsData(1, 2, 0))),
            ColumnStatisticsObj("e", "binary", ColumnStatisticsData(binaryStats=BinaryColumnStatsData(9, 2.5, 0))),
        ],
        engine="hive",
    )  # fmt: skip
    text = tjson.thrift_json(cs)
    assert '{"dbl":1.0E20}' in text and '{"dbl":-1.5E-7}' in text and '{"dbl":1.23456789E7}' in text
    assert '"AQL/"' in text  # base64 without padding, as Java writes it
    assert tjson.from_thrift_json(ColumnStatistics, text) == cs
    assert deserialize(ColumnStatistics(), text.encode(), _TJSON) == cs
    weird = FieldSchema('a\n\x01"/\\é😀', "t\tx", None)
    text = tjson.thrift_json(weird)
    assert "\\u0001" in text and '\\"' in text and "é😀" in text
    assert tjson.from_thrift_json(FieldSchema, text) == weird
    json.loads(text)  # valid JSON (Thrift's Python writer leaves control characters raw)


@pytest.mark.parametrize(
    "value,text",
    [
        (1.0, "1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.001, "0.001"),
        (0.0009, "9.0E-4"),
        (1234567.5, "1234567.5"),
        (1e7, "1.0E7"),
        (123456789012.5, "1.234567890125E11"),
        (float("nan"), '"NaN"'),
        (float("-inf"), '"-Infinity"'),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert tjson.java_double(value) == text


def test_file_uri_encoding() -> None:
    assert events.encode_file_uri("hdfs://nn/t/f") == "hdfs://nn/t/f###"
    assert events.encode_file_uri("hdfs://nn/t/f", "abc", "delta_1_1") == "hdfs://nn/t/f###delta_1_1"
    assert (
        events.encode_file_uri("hdfs://nn/t/f", "abc", None, "hdfs://nn/cm")
        == "hdfs://nn/t/f#abc#hdfs://nn/cm#"
    )
    assert events.decode_file_uri("hdfs://nn/t/f#abc#hdfs://nn/cm#d1") == (
        "hdfs://nn/t/f",
        "abc",
        "hdfs://nn/cm",
        "d1",
    )
    assert events.decode_file_uri("hdfs://nn/t/f") == ("hdfs://nn/t/f", None, None, None)


def _event(etype: str, message: str, db: str | None = None, table: str | None = None) -> NotificationEvent:
    return NotificationEvent(1, 2, etype, db, table, message, "json-0.2", "hive")


def test_txn_messages_fields_and_decoding() -> None:
    b = json.loads(events.open_txn_message([5, 6, 7]))
    assert set(b) == HEAD | {"txnIds", "timestamp", "fromTxnId", "toTxnId"}
    assert (b["txnIds"], b["fromTxnId"], b["toTxnId"]) == ([5, 6, 7], 5, 7)
    assert event_messages.parse_event(
        _event("OPEN_TXN", json.dumps({"fromTxnId": 3, "toTxnId": 5}))
    ).txn_ids == [
        3,
        4,
        5,
    ]

    b = json.loads(events.commit_txn_message(9, []))
    assert set(b) == HEAD | {
        "txnid",
        "timestamp",
        "writeIds",
        "databases",
        "tables",
        "partitions",
        "tableObjs",
        "partitionObjs",
        "files",
    }
    assert b["txnid"] == 9 and b["writeIds"] == [] and b["databases"] == []
    b = json.loads(events.commit_txn_message(9, [("d", 3), ("e", 3)]))
    assert (b["databases"], b["writeIds"]) == (["d", "e"], [3, 3])
    assert all(b[k] is None for k in ("tables", "partitions", "tableObjs", "partitionObjs", "files"))
    m = event_messages.parse_event(_event("COMMIT_TXN", events.commit_txn_message(9, [("d", 3)])))
    assert isinstance(m, event_messages.CommitTxn) and m.txn_id == 9 and m.writes == []
    assert (m.databases, m.write_ids) == (["d"], [3])
    # a message that lists the writes themselves (hivemesh before it matched Hive 4.2) still reads
    writes = [
        WriteEventInfo(3, "d", "t", "f1,f2", "ds=1", "{}", "{}"),
        WriteEventInfo(4, "d", "u", "", None, "{}", None),
    ]
    old = {"txnid": 9, "writeIds": [3, 4], "databases": ["d", "d"], "tables": ["t", "u"],
           "partitions": ["ds=1", None], "tableObjs": ["{}", "{}"], "partitionObjs": ["{}", None],
           "files": ["f1,f2", ""]}  # fmt: skip
    m = event_messages.parse_event(_event("COMMIT_TXN", json.dumps(old)))
    assert isinstance(m, event_messages.CommitTxn) and m.writes == writes

    b = json.loads(events.abort_txn_message(9, ["d"]))
    assert set(b) == HEAD | {"txnid", "timestamp", "dbsUpdated", "writeIds"} and b["dbsUpdated"] == ["d"]

    pairs = [TxnToWriteId(5, 1), TxnToWriteId(6, 2)]
    text = events.alloc_write_id_message("d", "t", pairs)
    b = json.loads(text)
    assert set(b) == HEAD | {"dbName", "tableName", "txnIdList", "writeIdList", "timestamp"}
    assert (b["txnIdList"], b["writeIdList"]) == ([5, 6], [1, 2])
    assert (
        event_messages.parse_event(_event("ALLOC_WRITE_ID_EVENT", text, "d", "t")).txn_to_write_ids == pairs
    )

    table = _sample_table()
    part = Partition(["2024"], "d", "t", 1, 0, table.sd, {"k": "v"}, None, "hive", 3)
    data = InsertEventRequestData(
        replace=None,
        filesAdded=["file:/w/d.db/t/ds=2024/f1"],
        filesAddedChecksum=["c1"],
        subDirectoryList=["delta_3_3"],
    )
    # ACID_WRITE_EVENT: hivemesh and Hive 4.2 append none (add_write_notification_log only keeps
    # the write), but a source that does is still read
    acid_write = {
        "txnid": 9, "writeId": 3, "timestamp": 1, "database": "d", "table": "t", "partition": "ds=2024",
        "tableObjJson": tjson.thrift_json(table), "partitionObjJson": tjson.thrift_json(part),
        "files": ["file:/w/d.db/t/ds=2024/f1###delta_3_3"],
    }  # fmt: skip
    m = event_messages.parse_event(_event("ACID_WRITE_EVENT", json.dumps(acid_write), "d", "t"))
    assert isinstance(m, event_messages.AcidWrite) and m.table == table and m.partition == part

    text = events.insert_message(table, None, data)
    b = json.loads(text)
    assert set(b) == HEAD | {
        "db",
        "table",
        "tableType",
        "tableObjJson",
        "ptnObjJson",
        "timestamp",
        "replace",
        "files",
    }
    assert (b["replace"], b["ptnObjJson"], b["files"]) == ("true", None, ["file:/w/d.db/t/ds=2024/f1###"])
    data.replace = False
    m = event_messages.parse_event(_event("INSERT", events.insert_message(table, part, data), "d", "t"))
    assert (
        isinstance(m, event_messages.Insert)
        and m.replace is False
        and m.partition == part
        and m.table == table
    )

    assert isinstance(event_messages.parse_event(_event("SOMETHING_NEW", "{}")), event_messages.Unknown)
    with pytest.raises(ValueError):
        event_messages.parse_event(_event("CREATE_TABLE", "not json"))
