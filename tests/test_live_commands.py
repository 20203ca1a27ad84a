"""Live Hive commands without servers (:mod:`hivemesh.live.commands`, :mod:`hivemesh.live.data`):
what the proposer pins, how a command maps into each zone, which directories it carries."""

from __future__ import annotations

from typing import Any

import pytest
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    MetaException,
    Partition,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.hive.hms_methods import args_struct
from hivemesh.live.commands import PROPOSED, decode, encode, for_zone, named_objects, pin
from hivemesh.live.config import LiveRule
from hivemesh.live.data import data_dirs
from hivemesh.live.errors import InvalidCommand
from hivemesh.live.log import encode_command

RULE = LiveRule(
    name="sales",
    databases=["sales"],
    paths={"east": "hdfs://nn:8020/live", "west": "s3a://lake/live"},
    acid_owner="east",
)
NOW_MS = 1_764_288_000_123


def args(method: str, *values: Any) -> Any:
    return args_struct(method)(*values)


def table(name: str = "orders", location: str | None = None, keys: tuple[str, ...] = ("ds",)) -> Table:
    return Table(
        tableName=name,
        dbName="sales",
        sd=StorageDescriptor(
            cols=[FieldSchema("id", "bigint", None)], location=location, serdeInfo=SerDeInfo()
        ),
        partitionKeys=[FieldSchema(k, "string", None) for k in keys],
        tableType="EXTERNAL_TABLE",
        parameters={},
    )


def roundtrip(command: Any) -> Any:
    return decode(encode_command(encode(command)))


def test_a_new_database_and_table_are_pinned_under_the_rule_root_for_every_zone() -> None:
    db = pin(
        "create_database", args("create_database", Database(name="Sales")), RULE, "east", "alice", NOW_MS
    )
    assert db.args.database.locationUri == "hivemesh-live:sales.db"
    assert db.args.database.ownerName == "alice"
    t = pin(
        "create_table",
        args("create_table", table()),
        RULE,
        "east",
        "alice",
        NOW_MS,
        database_location=lambda name: "hivemesh-live:sales.db",
    )
    assert t.args.tbl.sd.location == "hivemesh-live:sales.db/orders"
    assert (t.args.tbl.owner, t.args.tbl.createTime) == ("alice", NOW_MS // 1000)
    assert t.args.tbl.parameters["transient_lastDdlTime"] == str(NOW_MS // 1000)
    west = for_zone(roundtrip(t), RULE, "west")
    assert west[0].sd.location == "s3a://lake/live/sales.db/orders"
    east = for_zone(roundtrip(t), RULE, "east")
    assert east[0].sd.location == "hdfs://nn:8020/live/sales.db/orders"


def test_given_locations_become_neutral_and_foreign_ones_are_refused() -> None:
    t = table(location="hdfs://nn:8020/live/sales.db/custom")
    t.sd.skewedInfo = SkewedInfo(
        ["id"],
        [["1"]],
        {("1",): "hdfs://nn:8020/live/sales.db/custom/id=1"},  # type: ignore[dict-item]
    )
    cmd = pin("create_table", args("create_table", t), RULE, "east", "bob", NOW_MS)
    assert cmd.args.tbl.sd.location == "hivemesh-live:sales.db/custom"
    assert list(cmd.args.tbl.sd.skewedInfo.skewedColValueLocationMaps.values()) == [
        "hivemesh-live:sales.db/custom/id=1"
    ]
    with pytest.raises(MetaException, match="outside live rule 'sales'.*zone east"):
        pin(
            "create_table",
            args("create_table", table(location="s3a://lake/live/sales.db/x")),
            RULE,
            "east",
            "b",
        )
    with pytest.raises(MetaException, match="outside"):  # a sibling of the root is not under it
        pin("create_table", args("create_table", table(location="hdfs://nn:8020/live2/t")), RULE, "east", "b")


def test_an_alter_keeps_times_given_and_pins_missing_ones() -> None:
    t = table(location="hdfs://nn:8020/live/sales.db/orders")
    t.parameters = {"transient_lastDdlTime": "0"}
    cmd = pin("alter_table", args("alter_table", "sales", "orders", t), RULE, "east", "alice", NOW_MS)
    assert cmd.args.new_tbl.parameters["transient_lastDdlTime"] == str(NOW_MS // 1000)
    assert cmd.args.new_tbl.createTime is None  # not a create: left as the client sent it
    t.parameters = {"transient_lastDdlTime": "17"}
    cmd = pin("alter_table", args("alter_table", "sales", "orders", t), RULE, "east", "alice", NOW_MS)
    assert cmd.args.new_tbl.parameters["transient_lastDdlTime"] == "17"


def test_commands_decode_or_are_refused_precisely() -> None:
    cmd = pin("drop_table", args("drop_table", "sales", "orders", True), RULE, "east", "alice", NOW_MS)
    back = roundtrip(cmd)
    assert (back.method, back.rule, back.zone, back.user, back.time_ms) == (
        "drop_table",
        "sales",
        "east",
        "alice",
        NOW_MS,
    )
    assert named_objects(back) == ("sales", ("orders",))
    with pytest.raises(InvalidCommand, match="not a version-1 live command"):
        decode(b'{"v": 2}')
    with pytest.raises(InvalidCommand, match="not a method live proxies propose"):
        decode(
            b'{"v": 1, "method": "open_txns", "args": "", "rule": "r", "zone": "z", "user": "u", "time_ms": 1}'
        )
    assert "open_txns" not in PROPOSED and "lock" not in PROPOSED
    assert {"create_table", "add_partitions", "alter_partitions", "drop_database"} <= PROPOSED


def test_partition_writes_carry_their_directories_and_renames_none() -> None:
    orders = table(location="hdfs://nn:8020/live/sales.db/orders", keys=("ds", "hr"))
    parts = [
        Partition(values=["2026-11-27", "1"], dbName="sales", tableName="orders", parameters={}),
        Partition(
            values=["x", "2"],
            dbName="sales",
            tableName="orders",
            sd=StorageDescriptor(location="hdfs://nn:8020/live/elsewhere/p"),
            parameters={},
        ),
    ]
    cmd = pin("add_partitions", args("add_partitions", parts), RULE, "east", "alice", NOW_MS)
    dirs = data_dirs("add_partitions", cmd.args, RULE, "east", lambda db, name: orders)
    assert dirs == ("elsewhere/p", "sales.db/orders/ds=2026-11-27/hr=1")
    unpartitioned = table("totals", location="hdfs://nn:8020/live/sales.db/totals", keys=())
    cmd = pin("alter_table", args("alter_table", "sales", "totals", unpartitioned), RULE, "east", "a", NOW_MS)
    assert data_dirs("alter_table", cmd.args, RULE, "east", lambda db, name: None) == ("sales.db/totals",)
    renamed = table("totals2", location="hdfs://nn:8020/live/sales.db/totals", keys=())
    cmd = pin("alter_table", args("alter_table", "sales", "totals", renamed), RULE, "east", "a", NOW_MS)
    assert data_dirs("alter_table", cmd.args, RULE, "east", lambda db, name: None) == ()
    view = table("v", keys=())
    view.tableType, view.sd.location = "VIRTUAL_VIEW", None
    cmd = pin("create_table", args("create_table", view), RULE, "east", "a", NOW_MS)
    assert cmd.args.tbl.sd.location is None  # views have no directory
    assert data_dirs("create_table", cmd.args, RULE, "east", lambda db, name: None) == ()
