"""The streaming-replication seed scenario on a hivemesh metastore (SQLite and PostgreSQL).

Seed (shared/seeds/002): a Hive Streaming transaction batch of 10 txns (1..10) on one table; txns
1, 2, 3 commit after writing rows 100-102 (write id 19), 103-106 (20) and 107 (21); a concurrent
txn 11 updates row 101 and commits; then txns 4..10 commit. Every reader must see a consistent
snapshot. Here only the metastore side runs (no files): at every step a NEW reader opens its own
txn, builds its ValidTxnList from get_open_txns (itself excluded, high watermark capped at it) and
asks get_valid_write_ids; both strings are compared with the literal strings Hive would give,
worked out by hand from Hive's rules:

- ValidTxnList ``hwm:minOpen:open:aborted``: hwm = the reader's txn; the exceptions are the
  open/aborted txns below it; 5+ consecutive ids are written ``a-b`` (Hive 3.1+/4).
- ValidReaderWriteIdList ``db.table:hwm:minOpenWriteId:open:aborted``: hwm = the highest write id
  allocated by a txn <= the snapshot's txn hwm; a write id is invalid when its txn is open or
  aborted in the snapshot (or above its hwm); minOpenWriteId = the lowest open one, else
  Long.MAX_VALUE.

The table's write ids are seeded to start at 19 (``seed_write_id``) so that the numbers are the
seed's. A long-lived reader (txn 12) opened before any commit keeps its snapshot throughout, and
is listed as open in every later reader's ValidTxnList.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    SeedTableWriteIdsRequest,
    SerDeInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.acid import ValidWriteIdList
from hivemesh.client.metastore import MetastoreClient
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available
from tests.support.servers import HivemeshProcess

MAX = "9223372036854775807"
DB, TABLE = "stream", "events"
FULL = f"{DB}.{TABLE}"

# The rows of the seed and the write id that wrote them (insert events); txn 11's update of row
# 101 is a delete event of (101, written by 19) plus an insert of 101 with write id 29.
INSERTS = {19: [100, 101, 102], 20: [103, 104, 105, 106], 21: [107], 29: [101]}
DELETES = {29: [(101, 19)]}


def visible_rows(snapshot: ValidWriteIdList) -> dict[int, int]:
    """Row -> write id of the row version a reader with ``snapshot`` sees (Hive ACID v2 rules:
    an insert is visible when its write id is valid, a delete event hides its row when valid)."""
    rows = {(row, wid) for wid, rs in INSERTS.items() if snapshot.is_write_id_valid(wid) for row in rs}
    for wid, deleted in DELETES.items():
        if snapshot.is_write_id_valid(wid):
            rows -= set(deleted)
    return dict(sorted(rows))


BEFORE = {}
AFTER_1 = {100: 19, 101: 19, 102: 19}
AFTER_2 = {**AFTER_1, 103: 20, 104: 20, 105: 20, 106: 20}
AFTER_3 = {**AFTER_2, 107: 21}
AFTER_11 = {**AFTER_3, 101: 29}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HivemeshProcess]:
    """A hivemesh metastore on an empty store, so that txn ids start at 1."""
    base = tmp_path_factory.mktemp(f"scenario-{request.param}")
    if request.param == "sqlite":
        url, drop = f"sqlite:///{base / 'metastore.db'}", None
    else:
        if not postgres_available():
            pytest.skip(PG_SKIP_REASON)
        url = make_pg_database("hivemesh_scenario")
        drop = url
    try:
        with HivemeshProcess(url, base / "warehouse", base / "metastore.log") as proc:
            yield proc
    finally:
        if drop:
            drop_pg_database(drop)


def create_acid_table(client: MetastoreClient, warehouse: Path) -> None:
    raw = client.raw
    raw.create_database(Database(name=DB, locationUri=str(warehouse / f"{DB}.db"), parameters={}))
    raw.create_table(
        Table(
            tableName=TABLE,
            dbName=DB,
            owner="streamer",
            sd=StorageDescriptor(
                cols=[FieldSchema("id", "int", None), FieldSchema("payload", "string", None)],
                location=str(warehouse / f"{DB}.db" / TABLE),
                inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
                serdeInfo=SerDeInfo(
                    serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}
                ),
                bucketCols=[],
                sortCols=[],
                parameters={},
            ),
            partitionKeys=[],
            parameters={"transactional": "true", "transactional_properties": "default"},
            tableType="MANAGED_TABLE",
        )
    )


def new_reader(client: MetastoreClient, keep_open: bool = False) -> tuple[int, str, str]:
    """A new reader: its txn id, ValidTxnList and ValidWriteIdList of the table (then it commits)."""
    txn = client.open_txn(user="reader")
    vtl = client.valid_txn_list(txn)
    wids = client.valid_write_ids([FULL], vtl)
    assert list(wids) == [FULL]
    if not keep_open:
        client.commit_txn(txn)
    return txn, str(vtl), str(wids[FULL])


def check_reader(
    client: MetastoreClient, label: str, expected: tuple[int, str, str], rows: dict[int, int]
) -> None:
    """A new reader gets exactly ``expected`` (txn id, ValidTxnList, ValidWriteIdList) and sees ``rows``."""
    got = new_reader(client)
    assert got == expected, label
    assert visible_rows(ValidWriteIdList.parse(got[2])) == rows, label


def test_streaming_batch_with_concurrent_update(fresh_server: HivemeshProcess) -> None:
    with MetastoreClient(fresh_server.uri) as client:
        create_acid_table(client, fresh_server.warehouse)
        client.raw.seed_write_id(SeedTableWriteIdsRequest(dbName=DB, tableName=TABLE, seedWriteId=19))
        # a reader outside any txn, before anything: write ids up to 18 count as committed history
        vtl = client.valid_txn_list()
        assert str(vtl) == f"0:{MAX}::"
        assert str(client.valid_write_ids([FULL], vtl)[FULL]) == f"{FULL}:18:{MAX}::"

        # the streaming batch (txns 1..10), the concurrent txn 11, the batch's write ids 19..28
        batch = client.open_txns(10, user="streamer")
        assert batch == list(range(1, 11))
        concurrent = client.open_txn(user="updater")
        assert concurrent == 11
        assert client.allocate_write_ids(DB, TABLE, batch) == {t: t + 18 for t in batch}

        # a reader that opens before any batch txn commits and stays open to the end
        long_txn, long_vtl, long_wids = new_reader(client, keep_open=True)
        assert (long_txn, long_vtl) == (12, "12:1:1-11:")
        assert long_wids == f"{FULL}:28:19:19,20,21,22,23,24,25,26,27,28:"
        assert visible_rows(ValidWriteIdList.parse(long_wids)) == BEFORE

        client.commit_txn(1)  # rows 100..102, write id 19
        check_reader(
            client,
            "txn 1 committed",
            (13, "13:2:2-12:", f"{FULL}:28:20:20,21,22,23,24,25,26,27,28:"),
            AFTER_1,
        )
        client.commit_txn(2)  # rows 103..106, write id 20
        check_reader(
            client, "txn 2 committed", (14, "14:3:3-12:", f"{FULL}:28:21:21,22,23,24,25,26,27,28:"), AFTER_2
        )
        client.commit_txn(3)  # row 107, write id 21
        check_reader(
            client, "txn 3 committed", (15, "15:4:4-12:", f"{FULL}:28:22:22,23,24,25,26,27,28:"), AFTER_3
        )

        # txn 11 takes its write id (29) to update row 101 while 4..10 are still open
        assert client.allocate_write_ids(DB, TABLE, [concurrent]) == {concurrent: 29}
        check_reader(
            client, "update in flight", (16, "16:4:4-12:", f"{FULL}:29:22:22,23,24,25,26,27,28,29:"), AFTER_3
        )
        client.commit_txn(concurrent)
        check_reader(
            client, "update committed", (17, "17:4:4-10,12:", f"{FULL}:29:22:22,23,24,25,26,27,28:"), AFTER_11
        )

        # the rest of the batch commits, one txn after the other
        expected_rest = [
            (18, "18:5:5-10,12:", f"{FULL}:29:23:23,24,25,26,27,28:"),
            (19, "19:6:6-10,12:", f"{FULL}:29:24:24,25,26,27,28:"),
            (20, "20:7:7,8,9,10,12:", f"{FULL}:29:25:25,26,27,28:"),  # a run of 4 is not a range
            (21, "21:8:8,9,10,12:", f"{FULL}:29:26:26,27,28:"),
            (22, "22:9:9,10,12:", f"{FULL}:29:27:27,28:"),
            (23, "23:10:10,12:", f"{FULL}:29:28:28:"),
            (24, "24:12:12:", f"{FULL}:29:{MAX}::"),
        ]
        for txn, expected in zip(range(4, 11), expected_rest, strict=True):
            client.commit_txn(txn)
            check_reader(client, f"txn {txn} committed", expected, AFTER_11)

        # the long-lived reader still reads through its own snapshot: nothing of the batch
        first = ValidWriteIdList.parse(long_wids)
        assert visible_rows(first) == BEFORE
        # asking again with its ValidTxnList gives the same visibility; the string now names write
        # id 29, allocated (to a txn open in that snapshot) after the snapshot was taken
        again = client.valid_write_ids([FULL], long_vtl)[FULL]
        assert str(again) == f"{FULL}:29:19:19,20,21,22,23,24,25,26,27,28,29:"
        assert [w for w in range(1, 40) if again.is_write_id_valid(w)] == list(range(1, 19))
        assert [w for w in range(1, 40) if first.is_write_id_valid(w)] == list(range(1, 19))
        # a ValidTxnList built now would be a new snapshot (read committed), not the reader's own
        assert str(client.valid_txn_list(long_txn)) == f"12:{MAX}::"
        client.commit_txn(long_txn)

        assert new_reader(client)[1:] == (f"25:{MAX}::", f"{FULL}:29:{MAX}::")
        resp = client.get_open_txns()  # nothing left open or aborted
        assert (resp.txn_high_water_mark, list(resp.open_txns)) == (25, [])
