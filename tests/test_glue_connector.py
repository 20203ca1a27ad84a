"""GlueCatalog (AWS Glue through the HMS Thrift interface) against a real moto server over HTTP.

Real boto3 talks HTTP to ``moto.server.ThreadedMotoServer``. moto never pages GetDatabases,
GetTables or GetPartitions and never leaves BatchGetPartition keys unprocessed, so most tests go
through :class:`GluePagingProxy`, an HTTP proxy that pages those responses as Glue does
(``MaxResults``/``NextToken``) and records the requests; one test talks to moto directly.
moto does evaluate GetPartitions ``Expression`` (Glue's grammar), so filters are checked for real.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
from hive_metastore.ttypes import (
    Database,
    GetAllFunctionsResponse,
    GetDatabaseRequest,
    GetTableRequest,
    GetTableResult,
    GetTablesRequest,
    MetaException,
    NoSuchObjectException,
    Order,
    Partition,
    Table,
    UnknownDBException,
    UnknownTableException,
)
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TTransport import TMemoryBuffer

from hivemesh.federation.connectors.glue import GlueCatalog, hive_filter_to_glue_expression
from tests.support.moto_glue import CREDENTIAL_ENV, GluePagingProxy, MotoGlue
from tests.support.servers import free_port

ACCOUNT = "123456789012"  # moto's default account
DATES = [f"2024-01-{d:02d}" for d in range(1, 26)]  # 25 days x 10 hours = 250 partitions
HOURS = list(range(10))
ORDERS_LOC = "s3://warehouse/sales/orders"
PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


def _orders_sd(location: str) -> dict[str, Any]:
    return {
        "Columns": [
            {"Name": "order_id", "Type": "bigint", "Comment": "order key"},
            {"Name": "amount", "Type": "decimal(12,2)"},
            {"Name": "tags", "Type": "array<string>"},
        ],
        "Location": location,
        "InputFormat": PARQUET_IN,
        "OutputFormat": PARQUET_OUT,
        "SerdeInfo": {"SerializationLibrary": PARQUET_SERDE, "Parameters": {"serialization.format": "1"}},
    }


def _populate(c: Any) -> None:
    """2 databases; sales.orders (250 partitions), sales.orders_v (view), sales.customers
    (unpartitioned, serde parameters, buckets, sort, skew), hr.employees (bare minimum)."""
    c.create_database(
        DatabaseInput={
            "Name": "sales",
            "Description": "sales data",
            "LocationUri": "s3://warehouse/sales",
            "Parameters": {"team": "bi"},
        }
    )
    c.create_database(DatabaseInput={"Name": "hr"})
    c.create_table(
        DatabaseName="sales",
        TableInput={
            "Name": "orders",
            "Owner": "etl",
            "TableType": "EXTERNAL_TABLE",
            "Retention": 0,
            "StorageDescriptor": _orders_sd(ORDERS_LOC),
            "PartitionKeys": [{"Name": "ds", "Type": "string"}, {"Name": "hr", "Type": "int"}],
            "Parameters": {"EXTERNAL": "TRUE", "comment": "orders by hour"},
        },
    )
    parts = [
        {
            "Values": [ds, str(hr)],
            "StorageDescriptor": _orders_sd(f"{ORDERS_LOC}/ds={ds}/hr={hr}"),
            "Parameters": {"numRows": str(hr * 10)},
        }
        for ds in DATES
        for hr in HOURS
    ]
    for i in range(0, len(parts), 100):  # Glue's BatchCreatePartition takes 100 at most
        resp = c.batch_create_partition(
            DatabaseName="sales", TableName="orders", PartitionInputList=parts[i : i + 100]
        )
        assert not resp.get("Errors")
    c.create_table(
        DatabaseName="sales",
        TableInput={
            "Name": "orders_v",
            "TableType": "VIRTUAL_VIEW",
            "Owner": "analyst",
            "ViewOriginalText": "SELECT order_id, amount FROM orders",
            "ViewExpandedText": "SELECT `orders`.`order_id`, `orders`.`amount` FROM `sales`.`orders`",
            "StorageDescriptor": {
                "Columns": [
                    {"Name": "order_id", "Type": "bigint"},
                    {"Name": "amount", "Type": "decimal(12,2)"},
                ]
            },
        },
    )
    c.create_table(
        DatabaseName="sales",
        TableInput={
            "Name": "customers",
            "Description": "customer master",
            "Owner": "crm",
            "Retention": 7,
            "LastAccessTime": 1_700_000_000,
            "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {
                "Columns": [
                    {"Name": "id", "Type": "int", "Comment": "customer id"},
                    {"Name": "name", "Type": "string"},
                    {"Name": "country", "Type": "string"},
                ],
                "Location": "s3://warehouse/sales/customers",
                "InputFormat": TEXT_IN,
                "OutputFormat": TEXT_OUT,
                "Compressed": True,
                "NumberOfBuckets": 4,
                "BucketColumns": ["id"],
                "SortColumns": [{"Column": "id", "SortOrder": 1}, {"Column": "name", "SortOrder": 0}],
                "SerdeInfo": {
                    "Name": "csv",
                    "SerializationLibrary": LAZY_SERDE,
                    "Parameters": {"field.delim": ",", "serialization.format": ",", "escape.delim": "\\"},
                },
                "Parameters": {"sd.param": "x"},
                "SkewedInfo": {
                    "SkewedColumnNames": ["country"],
                    "SkewedColumnValues": ["US", "DE"],
                    "SkewedColumnValueLocationMaps": {"US": "s3://warehouse/sales/customers/country=US"},
                },
                "StoredAsSubDirectories": False,
            },
            "Parameters": {"EXTERNAL": "TRUE", "skip.header.line.count": "1"},
        },
    )
    c.create_table(DatabaseName="hr", TableInput={"Name": "employees"})


@pytest.fixture(scope="module")
def aws_env():
    with pytest.MonkeyPatch.context() as mp:
        for k, v in CREDENTIAL_ENV.items():
            mp.setenv(k, v)
        yield


@pytest.fixture(scope="module")
def moto(aws_env):
    with MotoGlue() as server:
        _populate(server.client())
        yield server


@pytest.fixture(scope="module")
def proxy(moto):
    with GluePagingProxy(moto.endpoint_url) as p:
        yield p


@pytest.fixture(scope="module")
def glue(proxy):
    """The catalog under test: through the paging proxy, 100 items per page, CatalogId sent."""
    cat = GlueCatalog(endpoint_url=proxy.endpoint_url, account_id=ACCOUNT, name="aws-prod", page_size=100)
    yield cat
    cat.close()


@pytest.fixture
def px(proxy):
    """The proxy with an empty request log and no deferred BatchGetPartition keys."""
    proxy.clear()
    proxy.unprocessed_rounds = 0
    yield proxy
    proxy.unprocessed_rounds = 0


def _names(parts: list[Partition]) -> list[str]:
    return [f"ds={p.values[0]}/hr={p.values[1]}" for p in parts]


ALL_NAMES = sorted(f"ds={ds}/hr={hr}" for ds in DATES for hr in HOURS)


def _roundtrip(obj: Any) -> Any:
    buf = TMemoryBuffer()
    obj.write(TBinaryProtocolAccelerated(buf))
    back = type(obj)()
    back.read(TBinaryProtocolAccelerated(TMemoryBuffer(buf.getvalue())))
    return back


# ---------------------------------------------------------------- databases
def test_database_names_and_patterns(glue):
    assert glue.get_all_databases() == ["hr", "sales"]
    assert glue.get_databases("*") == ["hr", "sales"]
    assert glue.get_databases("s*") == ["sales"]
    assert glue.get_databases("HR|nothing*") == ["hr"]
    assert glue.get_databases("*a*|h?") == ["sales"]  # '?' is literal in Hive patterns
    assert glue.get_databases("x*") == []


def test_get_database(glue):
    d = glue.get_database("sales")
    assert isinstance(d, Database)
    assert (d.name, d.description, d.locationUri, d.parameters) == (
        "sales",
        "sales data",
        "s3://warehouse/sales",
        {"team": "bi"},
    )
    assert d.catalogName == "hive" and d.createTime > 1_600_000_000
    bare = glue.get_database("HR")  # names are case-insensitive
    assert (bare.name, bare.parameters, bare.locationUri, bare.description) == ("hr", {}, None, None)
    assert glue.get_database("@hive#sales").name == "sales"
    assert glue.get_database_req(GetDatabaseRequest(name="sales", catalogName="hive")) == d
    with pytest.raises(NoSuchObjectException, match="There is no database named nope"):
        glue.get_database("nope")
    with pytest.raises(NoSuchObjectException):
        glue.get_database_req(GetDatabaseRequest(name="nope"))


def test_default_warehouse_gives_databases_a_location(proxy):
    cat = GlueCatalog(endpoint_url=proxy.endpoint_url, default_warehouse="s3://wh/")
    assert cat.get_database("hr").locationUri == "s3://wh/hr.db"
    assert cat.get_database("sales").locationUri == "s3://warehouse/sales"  # Glue's own wins


# ---------------------------------------------------------------- table names
def test_table_names_and_patterns(glue):
    assert glue.get_all_tables("sales") == ["customers", "orders", "orders_v"]
    assert glue.get_all_tables("hr") == ["employees"]
    assert glue.get_tables("sales", "ord*") == ["orders", "orders_v"]
    assert glue.get_tables("sales", "*_V|CUST*") == ["customers", "orders_v"]
    assert glue.get_tables("sales", "orders") == ["orders"]
    assert glue.get_tables("sales", "*") == ["customers", "orders", "orders_v"]
    assert glue.get_tables_by_type("sales", "*", "VIRTUAL_VIEW") == ["orders_v"]
    assert glue.get_tables_by_type("sales", "*", "EXTERNAL_TABLE") == ["customers", "orders"]
    assert glue.get_tables_by_type("sales", "o*", "EXTERNAL_TABLE") == ["orders"]
    assert glue.get_tables_by_type("hr", "*", "EXTERNAL_TABLE") == ["employees"]  # no TableType in Glue
    assert glue.get_tables_by_type("sales", "*", "MANAGED_TABLE") == []
    # a missing database has no tables (as in the HMS)
    assert glue.get_all_tables("nope") == [] and glue.get_tables("nope", "*") == []
    assert glue.get_tables_by_type("nope", "*", "VIRTUAL_VIEW") == []


# ---------------------------------------------------------------- tables
def test_partitioned_table(glue):
    t = glue.get_table("sales", "orders")
    assert isinstance(t, Table)
    assert (t.tableName, t.dbName, t.owner, t.tableType, t.catName) == (
        "orders",
        "sales",
        "etl",
        "EXTERNAL_TABLE",
        "hive",
    )
    assert isinstance(t.createTime, int) and abs(t.createTime - time.time()) < 3600
    assert t.lastAccessTime == 0 and t.retention == 0
    assert t.parameters == {"EXTERNAL": "TRUE", "comment": "orders by hour"}
    assert [(f.name, f.type, f.comment) for f in t.partitionKeys] == [
        ("ds", "string", None),
        ("hr", "int", None),
    ]
    sd = t.sd
    assert [(f.name, f.type, f.comment) for f in sd.cols] == [
        ("order_id", "bigint", "order key"),
        ("amount", "decimal(12,2)", None),
        ("tags", "array<string>", None),
    ]
    assert (sd.location, sd.inputFormat, sd.outputFormat) == (ORDERS_LOC, PARQUET_IN, PARQUET_OUT)
    assert sd.serdeInfo.serializationLib == PARQUET_SERDE
    assert sd.serdeInfo.parameters == {"serialization.format": "1"}
    # absent in Glue -> Hive's defaults, never None
    assert (sd.compressed, sd.numBuckets, sd.bucketCols, sd.sortCols, sd.parameters) == (
        False,
        -1,
        [],
        [],
        {},
    )
    assert sd.storedAsSubDirectories is False
    assert sd.skewedInfo.skewedColNames == [] and sd.skewedInfo.skewedColValueLocationMaps == {}
    assert t.viewOriginalText is None and t.viewExpandedText is None


def test_view(glue):
    v = glue.get_table("sales", "orders_v")
    assert v.tableType == "VIRTUAL_VIEW"
    assert v.viewOriginalText == "SELECT order_id, amount FROM orders"
    assert v.viewExpandedText.startswith("SELECT `orders`.`order_id`")
    assert [f.name for f in v.sd.cols] == ["order_id", "amount"]
    assert v.sd.location is None and v.partitionKeys == [] and v.parameters == {}
    assert v.owner == "analyst"


def test_table_with_serde_buckets_sort_and_skew(glue):
    t = glue.get_table("sales", "customers")
    assert t.tableType == "EXTERNAL_TABLE" and t.owner == "crm"
    assert t.retention == 7 and t.lastAccessTime == 1_700_000_000
    # Glue's Description becomes Hive's "comment" parameter
    assert t.parameters == {"EXTERNAL": "TRUE", "skip.header.line.count": "1", "comment": "customer master"}
    sd = t.sd
    assert [(f.name, f.type, f.comment) for f in sd.cols] == [
        ("id", "int", "customer id"),
        ("name", "string", None),
        ("country", "string", None),
    ]
    assert (sd.location, sd.inputFormat, sd.outputFormat) == (
        "s3://warehouse/sales/customers",
        TEXT_IN,
        TEXT_OUT,
    )
    assert sd.compressed is True and sd.numBuckets == 4 and sd.bucketCols == ["id"]
    assert sd.sortCols == [Order(col="id", order=1), Order(col="name", order=0)]
    assert sd.serdeInfo.name == "csv" and sd.serdeInfo.serializationLib == LAZY_SERDE
    assert sd.serdeInfo.parameters == {"field.delim": ",", "serialization.format": ",", "escape.delim": "\\"}
    assert sd.parameters == {"sd.param": "x"}
    assert sd.skewedInfo.skewedColNames == ["country"]
    assert sd.skewedInfo.skewedColValues == [["US"], ["DE"]]
    assert sd.skewedInfo.skewedColValueLocationMaps == {}  # list-keyed map: see the module docstring
    assert t.partitionKeys == []


def test_minimal_glue_table_gets_hive_defaults(glue):
    t = glue.get_table("hr", "employees")
    assert t.tableType == "EXTERNAL_TABLE" and t.parameters == {} and t.partitionKeys == []
    assert t.owner is None and t.retention == 0 and t.catName == "hive"
    sd = t.sd
    assert sd is not None and sd.cols == [] and sd.bucketCols == [] and sd.sortCols == []
    assert sd.parameters == {} and sd.serdeInfo.parameters == {} and sd.numBuckets == -1
    assert glue.get_fields("hr", "employees") == [] and glue.get_schema("hr", "employees") == []


def test_get_table_req_and_missing_tables(glue):
    res = glue.get_table_req(GetTableRequest(dbName="sales", tblName="ORDERS", catName="hive"))
    assert isinstance(res, GetTableResult) and res.table == glue.get_table("sales", "orders")
    with pytest.raises(NoSuchObjectException) as e:
        glue.get_table("sales", "nope")
    assert e.value.message == "sales.nope table not found"  # the HMS's words
    with pytest.raises(NoSuchObjectException) as e:
        glue.get_table("nope", "orders")
    assert e.value.message == "nope.orders table not found"
    with pytest.raises(NoSuchObjectException, match="table not found"):
        glue.get_table_req(GetTableRequest(dbName="sales", tblName="nope"))


def test_get_table_objects_by_name(glue):
    got = glue.get_table_objects_by_name("sales", ["orders_v", "nope", "ORDERS", "orders"])
    assert [t.tableName for t in got] == ["orders_v", "orders"]
    assert got[1] == glue.get_table("sales", "orders")
    assert glue.get_table_objects_by_name("sales", ["nope"]) == []
    assert glue.get_table_objects_by_name("sales", []) == []
    # more than 10 names: one paged GetTables instead of a GetTable each
    many = [f"missing_{i}" for i in range(10)] + ["customers", "orders"]
    assert [t.tableName for t in glue.get_table_objects_by_name("sales", many)] == ["customers", "orders"]
    with pytest.raises(UnknownDBException, match="nope"):
        glue.get_table_objects_by_name("nope", ["orders"])
    with pytest.raises(UnknownDBException):
        glue.get_table_objects_by_name("nope", many)
    res = glue.get_table_objects_by_name_req(GetTablesRequest(dbName="sales", tblNames=["customers"]))
    assert [t.tableName for t in res.tables] == ["customers"]
    res = glue.get_table_objects_by_name_req(GetTablesRequest(dbName="sales", tablesPattern="ord*"))
    assert [t.tableName for t in res.tables] == ["orders", "orders_v"]
    res = glue.get_table_objects_by_name_req(GetTablesRequest(dbName="sales"))
    assert [t.tableName for t in res.tables] == ["customers", "orders", "orders_v"]
    with pytest.raises(UnknownDBException):
        glue.get_table_objects_by_name_req(GetTablesRequest(dbName="nope"))


def test_get_table_meta(glue):
    metas = glue.get_table_meta("*", "*", [])
    assert [(m.dbName, m.tableName, m.tableType, m.comments, m.catName) for m in metas] == [
        ("hr", "employees", "EXTERNAL_TABLE", None, "hive"),
        ("sales", "customers", "EXTERNAL_TABLE", "customer master", "hive"),
        ("sales", "orders", "EXTERNAL_TABLE", "orders by hour", "hive"),
        ("sales", "orders_v", "VIRTUAL_VIEW", None, "hive"),
    ]
    assert [m.tableName for m in glue.get_table_meta("sal*", "ord*", ["VIRTUAL_VIEW"])] == ["orders_v"]
    assert [m.tableName for m in glue.get_table_meta("@hive#sales", "*", None)] == [
        "customers",
        "orders",
        "orders_v",
    ]
    assert [m.tableName for m in glue.get_table_meta("hr|sales", "c*|e*", ["EXTERNAL_TABLE"])] == [
        "employees",
        "customers",
    ]
    assert glue.get_table_meta("nope", "*", []) == []


def test_fields_and_schema(glue):
    assert [(f.name, f.type) for f in glue.get_fields("sales", "orders")] == [
        ("order_id", "bigint"),
        ("amount", "decimal(12,2)"),
        ("tags", "array<string>"),
    ]
    assert [(f.name, f.type) for f in glue.get_schema("sales", "orders")] == [
        ("order_id", "bigint"),
        ("amount", "decimal(12,2)"),
        ("tags", "array<string>"),
        ("ds", "string"),
        ("hr", "int"),
    ]
    with pytest.raises(UnknownTableException, match=r"sales\.nope table not found"):
        glue.get_fields("sales", "nope")
    with pytest.raises(UnknownTableException, match=r"nope\.orders table not found"):
        glue.get_schema("nope", "orders")


# ---------------------------------------------------------------- partitions
def test_get_partitions_crosses_pages(glue, px):
    parts = glue.get_partitions("sales", "orders", -1)
    assert len(parts) == 250 and _names(parts) == ALL_NAMES
    p = parts[0]
    assert isinstance(p, Partition)
    assert (p.values, p.dbName, p.tableName, p.catName) == (["2024-01-01", "0"], "sales", "orders", "hive")
    assert p.sd.location == f"{ORDERS_LOC}/ds=2024-01-01/hr=0"
    assert [f.name for f in p.sd.cols] == ["order_id", "amount", "tags"]
    assert p.sd.serdeInfo.serializationLib == PARQUET_SERDE
    assert p.parameters == {"numRows": "0"} and isinstance(p.createTime, int) and p.createTime > 0
    assert p.lastAccessTime == 0
    by_name = {n: q for n, q in zip(_names(parts), parts, strict=True)}
    assert by_name["ds=2024-01-25/hr=9"].sd.location == f"{ORDERS_LOC}/ds=2024-01-25/hr=9"
    assert by_name["ds=2024-01-25/hr=9"].parameters == {"numRows": "90"}
    # 250 partitions, 100 per page: three GetPartitions requests chained by NextToken
    calls = px.calls("GetPartitions")
    assert len(calls) == 3
    assert [c.get("NextToken") for c in calls] == [None, "100", "200"]
    assert all(c["MaxResults"] == 100 and c["CatalogId"] == ACCOUNT for c in calls)


def test_max_parts(glue):
    assert _names(glue.get_partitions("sales", "orders", 10)) == ALL_NAMES[:10]
    assert glue.get_partitions("sales", "orders", 0) == []
    assert len(glue.get_partitions("sales", "orders", 1000)) == 250
    assert glue.get_partition_names("sales", "orders", 3) == ALL_NAMES[:3]


def test_get_partition_names(glue, px):
    assert glue.get_partition_names("sales", "orders", -1) == ALL_NAMES
    calls = px.calls("GetPartitions")
    assert len(calls) == 3 and all(c.get("ExcludeColumnSchema") is True for c in calls)
    assert glue.get_partition_names("sales", "customers", -1) == []  # unpartitioned
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partition_names("sales", "nope", -1)
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partitions("sales", "nope", -1)


def test_get_partition_and_by_name(glue):
    p = glue.get_partition("sales", "orders", ["2024-01-07", "3"])
    assert p.values == ["2024-01-07", "3"] and p.sd.location == f"{ORDERS_LOC}/ds=2024-01-07/hr=3"
    assert p.parameters == {"numRows": "30"} and p.catName == "hive"
    assert glue.get_partition_by_name("sales", "orders", "ds=2024-01-07/hr=3") == p
    assert glue.get_partition_by_name("sales", "orders", "hr=3/DS=2024-01-07") == p  # key order, case
    with pytest.raises(NoSuchObjectException, match=r"partition values=\['2024-01-07', '99'\]"):
        glue.get_partition("sales", "orders", ["2024-01-07", "99"])
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partition("sales", "nope", ["2024-01-07", "3"])
    with pytest.raises(MetaException, match="Invalid partition key & values"):
        glue.get_partition("sales", "orders", ["2024-01-07"])
    with pytest.raises(NoSuchObjectException, match="ds=2030-01-01/hr=1 of sales.orders not found"):
        glue.get_partition_by_name("sales", "orders", "ds=2030-01-01/hr=1")
    with pytest.raises(NoSuchObjectException, match="table not found"):
        glue.get_partition_by_name("nope", "orders", "ds=2024-01-07/hr=3")
    with pytest.raises(MetaException, match="Invalid partition name"):
        glue.get_partition_by_name("sales", "orders", "ds=2024-01-07")
    with pytest.raises(MetaException):
        glue.get_partition_by_name("sales", "orders", "garbage")


def test_get_partitions_by_names(glue, px):
    names = ["ds=2024-01-09/hr=2", "ds=2024-01-02/hr=5", "ds=2030-01-01/hr=0", "ds=2024-01-02/hr=5"]
    got = glue.get_partitions_by_names("sales", "orders", names)
    assert _names(got) == ["ds=2024-01-02/hr=5", "ds=2024-01-09/hr=2"]  # missing left out, ordered
    assert got[0].sd.location == f"{ORDERS_LOC}/ds=2024-01-02/hr=5"
    assert glue.get_partitions_by_names("sales", "orders", []) == []
    # all 250 at once: 100 keys per BatchGetPartition, and unprocessed keys are asked again
    px.clear()
    px.unprocessed_rounds = 2
    got = glue.get_partitions_by_names("sales", "orders", list(reversed(ALL_NAMES)))
    assert _names(got) == ALL_NAMES
    batches = px.calls("BatchGetPartition")
    assert len(batches) == 5  # 3 batches + 2 resubmissions of what was left unprocessed
    assert all(len(b["PartitionsToGet"]) <= 100 for b in batches)
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partitions_by_names("sales", "nope", names)
    with pytest.raises(MetaException, match="Invalid partition name"):
        glue.get_partitions_by_names("sales", "orders", ["hr=1"])


def test_unprocessed_keys_forever_is_a_meta_exception(glue, px):
    px.unprocessed_rounds = 1000
    with pytest.raises(
        MetaException,
        match="glue catalog .+aws-prod.+BatchGetPartition left 1 partition.s. of sales.orders unprocessed",
    ):
        glue.get_partitions_by_names("sales", "orders", ALL_NAMES[:4])


def test_get_partitions_by_filter_is_evaluated_by_glue(glue, px):
    # moto evaluates GetPartitions Expression with Glue's grammar, so these results are real.
    got = glue.get_partitions_by_filter("sales", "orders", 'ds = "2024-01-03" and hr >= 5', -1)
    assert _names(got) == [f"ds=2024-01-03/hr={h}" for h in range(5, 10)]
    assert px.calls("GetPartitions")[0]["Expression"] == "ds = '2024-01-03' and hr >= 5"
    got = glue.get_partitions_by_filter("sales", "orders", "ds = '2024-01-03' and hr >= 5", 2)
    assert _names(got) == ["ds=2024-01-03/hr=5", "ds=2024-01-03/hr=6"]
    assert len(glue.get_partitions_by_filter("sales", "orders", "hr between 1 and 2", -1)) == 50
    assert len(glue.get_partitions_by_filter("sales", "orders", 'ds != "2024-01-01"', -1)) == 240
    assert len(glue.get_partitions_by_filter("sales", "orders", "ds = 2024-01-04", -1)) == 10  # bare date
    assert len(glue.get_partitions_by_filter("sales", "orders", "ds like '2024-01-1%'", -1)) == 100
    assert (
        len(glue.get_partitions_by_filter("sales", "orders", "hr in (1, 3) or ds > '2024-01-24'", -1)) == 58
    )
    assert len(glue.get_partitions_by_filter("sales", "orders", "", -1)) == 250
    assert glue.get_partitions_by_filter("sales", "orders", "ds = '1999-01-01'", -1) == []
    with pytest.raises(
        MetaException, match=r"glue catalog .+aws-prod.+GetPartitions failed: InvalidInputException"
    ):
        glue.get_partitions_by_filter("sales", "orders", "ds = = 1", -1)
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partitions_by_filter("sales", "nope", "hr = 1", -1)


def test_get_partitions_ps(glue, px):
    got = glue.get_partitions_ps("sales", "orders", ["2024-01-03"], -1)
    assert _names(got) == [f"ds=2024-01-03/hr={h}" for h in HOURS]
    assert px.calls("GetPartitions")[0]["Expression"] == "ds = '2024-01-03'"  # string key pushed to Glue
    assert _names(glue.get_partitions_ps("sales", "orders", ["2024-01-03"], 3)) == [
        f"ds=2024-01-03/hr={h}" for h in range(3)
    ]
    got = glue.get_partitions_ps("sales", "orders", ["", "7"], -1)
    assert _names(got) == [f"ds={ds}/hr=7" for ds in DATES]
    assert _names(glue.get_partitions_ps("sales", "orders", ["2024-01-03", "7"], -1)) == [
        "ds=2024-01-03/hr=7"
    ]
    assert len(glue.get_partitions_ps("sales", "orders", [], -1)) == 250
    assert glue.get_partitions_ps("sales", "orders", ["2030-01-01"], -1) == []
    with pytest.raises(MetaException, match="Incorrect number of partition values"):
        glue.get_partitions_ps("sales", "orders", ["2024-01-03", "7", "x"], -1)
    with pytest.raises(NoSuchObjectException, match=r"sales\.nope table not found"):
        glue.get_partitions_ps("sales", "nope", ["x"], -1)


# ---------------------------------------------------------------- the rest
def test_functions_and_config(glue):
    assert glue.get_all_functions() == GetAllFunctionsResponse(functions=[])
    assert glue.get_functions("sales", "*") == []
    assert glue.get_config_value("hive.metastore.try.direct.sql", "true") == "true"


def test_catalog_id_on_every_request(glue, px):
    glue.get_all_databases()
    glue.get_table("sales", "orders")
    glue.get_partition("sales", "orders", ["2024-01-01", "1"])
    glue.get_partitions_by_names("sales", "orders", ["ds=2024-01-01/hr=1"])
    assert len(px.requests) >= 4
    assert all(body.get("CatalogId") == ACCOUNT for _, body in px.requests)


def test_direct_moto_without_page_size(moto):
    """Straight to moto, which answers each list call in one response (no NextToken)."""
    cat = GlueCatalog(client=moto.client())
    assert cat.get_all_databases() == ["hr", "sales"]
    assert cat.get_partition_names("sales", "orders", -1) == ALL_NAMES
    assert len(cat.get_partitions_by_names("sales", "orders", ALL_NAMES)) == 250
    cat.ping()


def test_ping(glue):
    glue.ping()


def test_dead_endpoint_is_a_meta_exception_quickly(aws_env):
    dead = GlueCatalog(
        endpoint_url=f"http://127.0.0.1:{free_port()}", name="gone", connect_timeout_s=1, max_attempts=2
    )
    for call in (dead.ping, dead.get_all_databases, lambda: dead.get_table("sales", "orders")):
        start = time.monotonic()
        with pytest.raises(MetaException) as e:
            call()
        assert time.monotonic() - start < 10
        assert re.match(
            r"glue catalog 'gone' \(http://127\.0\.0\.1:\d+\): Get\w+ failed: EndpointConnectionError",
            e.value.message,
        )


def test_concurrent_calls_share_one_lazily_made_client(proxy):
    cat = GlueCatalog(endpoint_url=proxy.endpoint_url)
    errors: list[BaseException] = []
    results: list[str] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(cat.get_table("sales", "orders").tableName)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == ["orders"] * 40
    cat.close()


def test_converted_objects_are_wire_valid(glue):
    """Every converted object survives the Thrift binary protocol unchanged."""
    for db, tbl in (("sales", "orders"), ("sales", "orders_v"), ("sales", "customers"), ("hr", "employees")):
        t = glue.get_table(db, tbl)
        assert _roundtrip(t) == t
    parts = glue.get_partitions("sales", "orders", 5)
    assert [_roundtrip(p) for p in parts] == parts
    d = glue.get_database("sales")
    assert _roundtrip(d) == d
    res = glue.get_table_req(GetTableRequest(dbName="sales", tblName="customers"))
    assert _roundtrip(res) == res


@pytest.mark.parametrize(
    ("hive", "glue_expr"),
    [
        ('ds = "2024-01-01"', "ds = '2024-01-01'"),
        ("ds = '2024-01-01'", "ds = '2024-01-01'"),
        ('name = "O\'Brien"', "name = 'O''Brien'"),
        ("hr != 3 and hr == 4", "hr <> 3 and hr = 4"),
        ("ds >= 2020-01-01", "ds >= '2020-01-01'"),
        ("`ds` = 'x'", "ds = 'x'"),
        ("(hr) IN (1, 2)", "(hr) IN (1, 2)"),
        ("  ", ""),
        (None, ""),
    ],
)
def test_hive_filter_to_glue_expression(hive, glue_expr):
    assert hive_filter_to_glue_expression(hive) == glue_expr
