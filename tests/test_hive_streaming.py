"""Hive's own streaming writer (Hive 3.1.3's ``HiveStreamingConnection``) against a hivemesh
metastore, with hivemesh's ACID reader checked after every step of an open transaction batch.

This is the streaming timeline of ``../shared/seeds/002_*``: one delta directory and one open
bucket file for the whole batch, a ``_flush_length`` side file that grows with each commit. After
each commit a reader sees exactly the rows committed so far, while the batch's file is still open;
an aborted txn's rows never appear; after the batch closes everything committed is there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemesh.acid.tables import create_transactional_table
from hivemesh.spark import acid_session
from tests.support.hive_streaming import StreamingDriver, require_hive_streaming

pytestmark = [pytest.mark.spark, pytest.mark.hive_streaming]


def _rows(spark, table: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    with acid_session(spark) as acid:
        return sorted(tuple(r) for r in acid.read(table).collect())


def _files(location: str) -> dict[str, int]:
    root = Path(location.removeprefix("file:"))
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_reader_sees_each_commit_of_an_open_batch(spark, spark_metastore, client, db: str) -> None:  # type: ignore[no-untyped-def]
    require_hive_streaming()
    table = create_transactional_table(client, db, "events", [("id", "int"), ("name", "string")])
    name = f"{db}.events"
    with StreamingDriver() as hive:
        hive.send(f"connect {spark_metastore.uri} {db} events 4")
        assert _rows(spark, name) == []

        hive.send("begin")
        hive.send("write 1,one")
        hive.send("write 2,two")
        hive.send("commit")
        side = "delta_0000001_0000004/bucket_00000_flush_length"
        first = _files(table.sd.location).get(side, 0)
        assert first > 0  # the batch's file is open: its readable length is in the side file
        assert _rows(spark, name) == [(1, "one"), (2, "two")]

        hive.send("begin")
        hive.send("write 3,aborted")
        hive.send("abort")
        assert _rows(spark, name) == [(1, "one"), (2, "two")]

        hive.send("begin")
        hive.send("write 4,four")
        hive.send("commit")
        files = _files(table.sd.location)
        assert (
            files["delta_0000001_0000004/bucket_00000_flush_length"] == 24
        )  # three lengths: 2 commits, 1 abort
        assert _rows(spark, name) == [(1, "one"), (2, "two"), (4, "four")]

        hive.send("begin")  # the batch's last txn, left open: its rows are not visible
        hive.send("write 5,five")
        assert _rows(spark, name) == [(1, "one"), (2, "two"), (4, "four")]
        hive.send("commit")
        hive.send("close")
    files = _files(table.sd.location)
    assert side not in files  # removed when the batch closes
    assert _rows(spark, name) == [(1, "one"), (2, "two"), (4, "four"), (5, "five")]
    # the metastore agrees: txn 2's write id is aborted, the others committed
    snapshot = client.valid_write_ids([name], client.valid_txn_list())[name]
    assert snapshot.high_watermark == 4 and snapshot.aborted_write_ids == (2,)


def test_static_partition_batch(spark, spark_metastore, client, db: str) -> None:  # type: ignore[no-untyped-def]
    require_hive_streaming()
    create_transactional_table(client, db, "clicks", [("id", "int"), ("url", "string")], [("ds", "string")])
    name = f"{db}.clicks"
    with StreamingDriver() as hive:
        hive.send(f"connect {spark_metastore.uri} {db} clicks 2 2024-05-01")
        hive.send("begin")
        hive.send("write 1,/a")
        hive.send("commit")
        assert _rows(spark, name) == [(1, "/a", "2024-05-01")]
        hive.send("begin")
        hive.send("write 2,/b")
        hive.send("commit")
        hive.send("close")
    assert _rows(spark, name) == [(1, "/a", "2024-05-01"), (2, "/b", "2024-05-01")]
    assert [p.values for p in client.raw.get_partitions(db, "clicks", -1)] == [["2024-05-01"]]
