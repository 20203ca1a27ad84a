"""hive.tjson.from_thrift_json (spec-driven over the C JSON parser) reads exactly what the Thrift
library's TJSONProtocol reads, for the objects Hive's notification messages carry."""

from __future__ import annotations

import pytest
from hive_metastore.ttypes import (
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    Database,
    DoubleColumnStatsData,
    FieldSchema,
    Function,
    Partition,
    PrincipalPrivilegeSet,
    PrivilegeGrantInfo,
    ResourceUri,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    StringColumnStatsData,
    Table,
)
from thrift.TSerialization import deserialize

from hivemesh.hive.tjson import _JSON_FACTORY, from_thrift_json, thrift_json


def _sd(location: str) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "bigint", "the key"), FieldSchema("name", "string", None)],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        compressed=False,
        numBuckets=4,
        serdeInfo=SerDeInfo("s", "org.apache.hadoop.hive.ql.io.orc.OrcSerde", {"serialization.format": "1"}),
        bucketCols=["id"],
        sortCols=[],
        parameters={"k": 'v \u00e9 "quoted" \\ back'},
        skewedInfo=SkewedInfo(["name"], [["a"]], {}),
        storedAsSubDirectories=False,
    )


OBJECTS = [
    Table(tableName="t", dbName="d", owner="o", createTime=1, sd=_sd("file:/w/d.db/t"),
          partitionKeys=[FieldSchema("dt", "string", None)], parameters={"a": "1"}, tableType="MANAGED_TABLE",
          temporary=False, rewriteEnabled=True, writeId=7),
    Partition(values=["2024-01-01"], dbName="d", tableName="t", createTime=2, sd=_sd("file:/w/d.db/t/dt=2024-01-01"),
              parameters={"numFiles": "3"}),
    ColumnStatistics(
        statsDesc=ColumnStatisticsDesc(isTblLevel=False, dbName="d", tableName="t", partName="dt=1"),
        statsObj=[
            ColumnStatisticsObj("x", "double", ColumnStatisticsData(doubleStats=DoubleColumnStatsData(
                lowValue=-1.5e-7, highValue=float("inf"), numNulls=1, numDVs=2, bitVectors=b"\x00\x01\xfe"))),
            ColumnStatisticsObj("s", "string", ColumnStatisticsData(stringStats=StringColumnStatsData(
                maxColLen=9, avgColLen=2.25, numNulls=0, numDVs=4))),
        ],
        engine="hive",
    ),
    Function(functionName="f", dbName="d", className="C", ownerName="o", ownerType=1, createTime=1,
             functionType=1, resourceUris=[ResourceUri(1, "file:/x.jar")]),
    Database(name="d", description="", locationUri="s3a://b/w/d.db", parameters={"p": "q"},
             privileges=PrincipalPrivilegeSet(userPrivileges={"u": [PrivilegeGrantInfo("ALL", 1, "g", 1, True)]})),
]  # fmt: skip


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: type(o).__name__)
def test_reads_what_the_library_reads(obj: object) -> None:
    text = thrift_json(obj)
    expected = deserialize(type(obj)(), text.encode("utf-8"), _JSON_FACTORY)
    got = from_thrift_json(type(obj), text)
    assert got == expected
    assert got == obj  # and the round trip is exact


def test_unknown_fields_are_ignored_and_none_is_none() -> None:
    assert from_thrift_json(Table, None) is None
    got = from_thrift_json(
        FieldSchema, '{"1":{"str":"a"},"2":{"str":"int"},"99":{"str":"new in a later Hive"}}'
    )
    assert got == FieldSchema("a", "int", None)


def test_malformed_text_raises() -> None:
    with pytest.raises(Exception):  # noqa: B017 - json or Thrift error, both say where
        from_thrift_json(Table, '{"1":')
