"""Reading a table while Hive-Streaming-style ingest writes it (real files, real metastore).

One ``StreamingConnection`` batch of 10 txns writes ``delta_0000001_0000010/bucket_00000`` with its
``bucket_00000_flush_length`` side file; txns 1..3 commit, then an ``AcidWriter`` UPDATE in its own
txn (write id 11) commits, then txns 4..10 run (txn 7 aborts). After every step a new
``AcidSession`` must see exactly the committed rows (Spark and the Spark-free reader agree), a
reader opened early keeps its snapshot (its later reads equal its first), and a read while the
file holds bytes beyond its last flushed footer (an open txn wrote a stripe) succeeds and shows
only committed rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hivemesh.acid.arrow_reader import TableLayout, read_acid_location
from hivemesh.acid.names import parse_flush_lengths
from hivemesh.acid.streaming import StreamingConnection
from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid import AcidSession
from hivemesh.storage import resolve_location

pytestmark = pytest.mark.spark

B0 = 536870912
COLS = (("a", "string"), ("b", "int"))
BIG_TXN = 5  # writes enough rows for the ORC writer to emit a stripe before the txn commits
BIG_ROWS = 500
ABORTED_TXN = 7


def rows_of(i: int) -> list[tuple[str, int]]:
    if i == BIG_TXN:
        return [(f"t{i}-{j}-{j * 7919 % 100_003}", i * 100_000 + j) for j in range(BIG_ROWS)]
    return [(f"t{i}-{j}", i * 100 + j) for j in range(i % 3 + 1)]


class Reader:
    """An AcidSession whose reads return sorted row tuples: the Spark-free reader's under the
    session's snapshot, checked against Spark's (``with_spark``; costs a Spark job)."""

    def __init__(self, spark: Any, full: str):
        self.session = AcidSession(spark)
        self.full = full

    def read(self, with_spark: bool = True) -> list[tuple]:
        snap = self.session.snapshot(self.full)
        table = read_acid_location(snap.table.sd.location, snap.write_ids, TableLayout(COLS))
        rows = sorted(tuple(r.values()) for r in table.to_pylist())
        if with_spark:
            assert sorted(tuple(r) for r in self.session.read(self.full).collect()) == rows
        return rows

    def close(self) -> None:
        self.session.close()


def test_readers_during_streaming_ingest(spark: Any, client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "s", list(COLS))
    full = f"{db}.s"
    # uncompressed, small stripes: the ORC writer emits stripes of an open txn to the file early
    conn = StreamingConnection(
        client, db, "s", transactions_per_batch=10, stripe_size=64 * 1024, compression="none"
    )
    batch = conn.fetch_transaction_batch()
    assert batch.write_ids == list(range(1, 11))
    table_dir = Path(resolve_location(client.raw.get_table(db, "s").sd.location)[1])
    data_file = table_dir / "delta_0000001_0000010" / "bucket_00000"
    side_file = table_dir / "delta_0000001_0000010" / "bucket_00000_flush_length"

    committed: list[tuple] = []

    def fresh_read(with_spark: bool = True) -> list[tuple]:
        r = Reader(spark, full)
        try:
            return r.read(with_spark)
        finally:
            r.close()

    first_reader = Reader(spark, full)  # before anything was written
    assert first_reader.read() == []
    early_reader: Reader | None = None
    early_rows: list[tuple] = []

    for i in range(1, 4):
        batch.begin_next_transaction()
        batch.write(rows_of(i))
        if i == 2:  # written (and in the file once flushed) but not committed: invisible
            assert fresh_read() == sorted(committed)
        batch.commit()
        committed += rows_of(i)
        assert side_file.exists() and len(parse_flush_lengths(side_file.read_bytes())) == i
        assert fresh_read(with_spark=i == 3) == sorted(committed)
        if i == 1:
            early_reader = Reader(spark, full)
            early_rows = early_reader.read()
            assert early_rows == sorted(rows_of(1))
    assert early_reader is not None

    # a concurrent UPDATE in its own txn: write id 11 while write ids 4..10 are still open
    with_ids = AcidSession(spark)
    try:
        keyed = {
            (r.a, r.b): (r.originalTransaction, r.bucket, r.rowId)
            for r in with_ids.read(full, with_row_ids=True).collect()
        }
        assert str(with_ids.snapshot(full).write_ids) == f"{full}:10:4:4,5,6,7,8,9,10:"
    finally:
        with_ids.close()
    assert keyed[("t1-0", 100)] == (1, B0, 0) and keyed[("t3-0", 300)] == (3, B0, 0)
    result = AcidWriter(client, db, "s").update([keyed[("t1-0", 100)]], [("t1-0 updated", 199)])
    assert result.write_id == 11
    committed.remove(("t1-0", 100))
    committed.append(("t1-0 updated", 199))
    assert fresh_read() == sorted(committed)
    assert early_reader.read() == early_rows  # its snapshot did not move

    middle_reader: Reader | None = None
    middle_rows: list[tuple] = []
    for i in range(4, 11):
        batch.begin_next_transaction()
        batch.write(rows_of(i))
        if i == BIG_TXN:
            # the open txn's rows reached the file: bytes beyond the last flushed footer
            flushed = parse_flush_lengths(side_file.read_bytes())[-1]
            assert data_file.stat().st_size > flushed
            middle_reader = Reader(spark, full)
            middle_rows = middle_reader.read()
            assert middle_rows == sorted(committed)
        if i == ABORTED_TXN:
            batch.abort()
        else:
            batch.commit()
            committed += rows_of(i)
        if i < 10:
            assert side_file.exists()
        got = fresh_read(with_spark=i in (BIG_TXN, ABORTED_TXN, 10))
        assert len(got) == len(committed)
        assert got == sorted(committed)
    assert batch.states == ["committed"] * 6 + ["aborted", "committed", "committed", "committed"]
    assert not side_file.exists()  # the last commit closed the file
    conn.close()
    assert middle_reader is not None

    # the early readers still see their snapshots, now from the finished file
    assert first_reader.read() == []
    assert early_reader.read() == early_rows
    assert middle_reader.read() == middle_rows
    for r in (first_reader, early_reader, middle_reader):
        r.close()
    final = fresh_read()
    assert final == sorted(committed)
    assert not any(a.startswith(f"t{ABORTED_TXN}-") for a, _ in final)
    assert sum(1 for a, _ in final if a.startswith(f"t{BIG_TXN}-")) == BIG_ROWS
    assert client.show_locks(db) == []
