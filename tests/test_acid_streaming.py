"""hivemesh.acid.streaming: Hive Streaming v2 transaction batches against real metastores."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest
from hive_metastore.ttypes import Database, LockType

from hivemesh.acid.names import parse_flush_lengths
from hivemesh.acid.streaming import StreamingConnection, StreamingError, TransactionBatch
from hivemesh.acid.tables import create_transactional_table
from hivemesh.client.metastore import MetastoreClient
from hivemesh.storage import resolve_location
from tests.support.servers import HivemeshProcess

MAX = "9223372036854775807"
B0 = 536870912
COLS = [("a", "string"), ("b", "int")]


def table_dir(client: MetastoreClient, db: str, name: str) -> Path:
    return Path(resolve_location(client.raw.get_table(db, name).sd.location)[1])


def read_events(data: bytes) -> list[tuple]:
    """(operation, owid, bucket, rowId, cwid, row) of ORC bytes, read by pyorc AND pyarrow (must agree)."""
    by_pyorc = [tuple(r) for r in pyorc.Reader(io.BytesIO(data)).read()]
    by_arrow = [
        (
            r["operation"],
            r["originalTransaction"],
            r["bucket"],
            r["rowId"],
            r["currentTransaction"],
            None if r["row"] is None else tuple(r["row"].values()),
        )
        for r in po.ORCFile(io.BytesIO(data)).read().to_pylist()
    ]
    assert by_pyorc == by_arrow
    return by_pyorc


def snapshot(client: MetastoreClient, full: str) -> str:
    return str(client.valid_write_ids([full], client.valid_txn_list())[full])


def open_snapshot(full: str, first_open: int) -> str:
    """The write-id snapshot while write ids ``first_open``..5 of a 5-txn batch are open."""
    if first_open > 5:
        return f"{full}:5:{MAX}::"
    return f"{full}:5:{first_open}:{','.join(str(w) for w in range(first_open, 6))}:"


def rows_for(txn_index: int) -> list[tuple[str, int]]:
    return [(f"t{txn_index}r{i}", txn_index * 10 + i) for i in range(txn_index + 1)]


def test_batch_of_five(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "s", COLS)
    full = f"{db}.s"
    conn = StreamingConnection(client, db, "s", transactions_per_batch=5)
    batch = conn.fetch_transaction_batch()
    assert batch.write_ids == [1, 2, 3, 4, 5]
    assert batch.txn_ids == list(range(batch.txn_ids[0], batch.txn_ids[0] + 5))
    delta = table_dir(client, db, "s") / "delta_0000001_0000005"
    data_file = delta / "bucket_00000"
    side = delta / "bucket_00000_flush_length"
    expected: list[tuple] = []
    for i in range(5):
        txn = batch.begin_next_transaction()
        assert txn == batch.txn_ids[i] and batch.current_write_id == i + 1
        locks = client.show_locks(db)
        assert [(lk.type, lk.tablename, lk.txnid) for lk in locks] == [(LockType.SHARED_READ, "s", txn)]
        if i == 2:
            batch.write(pa.table({"b": [r[1] for r in rows_for(i)], "a": [r[0] for r in rows_for(i)]}))
        else:
            batch.write(rows_for(i))
        expected += [(0, i + 1, B0, rid, i + 1, row) for rid, row in enumerate(rows_for(i))]
        assert snapshot(client, full) == open_snapshot(full, i + 1)  # not visible yet
        batch.commit()
        assert batch.current_transaction_state == "committed"
        assert snapshot(client, full) == open_snapshot(full, i + 2)
        if i < 4:
            lengths = parse_flush_lengths(side.read_bytes())
            assert len(lengths) == i + 1
            assert lengths == batch.flush_lengths
            # what a reader sees: the file cut at the last committed length
            truncated = data_file.read_bytes()[: lengths[-1]]
            assert read_events(truncated) == expected
            assert pyorc.Reader(io.BytesIO(truncated)).user_metadata == {"hive.acid.version": b"2"}
        else:
            assert not side.exists()  # the last commit closed the file
    assert batch.remaining_transactions() == 0
    with pytest.raises(StreamingError):
        batch.begin_next_transaction()
    batch.close()
    conn.close()
    assert sorted(p.name for p in delta.iterdir()) == ["_orc_acid_version", "bucket_00000"]
    whole = data_file.read_bytes()
    assert read_events(whole) == expected
    r = pyorc.Reader(io.BytesIO(whole))
    assert r.num_of_stripes == 5
    assert r.user_metadata["hive.acid.stats"] == b"15,0,0"
    assert r.user_metadata["hive.acid.key.index"] == b"".join(f"{i + 1},{B0},{i};".encode() for i in range(5))
    assert (
        batch.stats is not None
        and batch.stats.key_index_text == r.user_metadata["hive.acid.key.index"].decode()
    )
    assert client.show_locks(db) == []
    assert snapshot(client, full) == f"{full}:5:{MAX}::"


def test_abort_in_the_middle_and_close(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "s", COLS)
    full = f"{db}.s"
    with StreamingConnection(client, db, "s", transactions_per_batch=5) as conn:
        batch = conn.fetch_transaction_batch()
        for i in range(3):
            batch.begin_next_transaction()
            batch.write(rows_for(i))
            if i == 1:
                batch.abort()
                assert batch.current_transaction_state == "aborted"
                with pytest.raises(StreamingError):
                    batch.write(rows_for(i))
            else:
                batch.commit()
        assert batch.states == ["committed", "aborted", "committed", "open", "open"]
        delta = table_dir(client, db, "s") / "delta_0000001_0000005"
        side = delta / "bucket_00000_flush_length"
        assert len(parse_flush_lengths(side.read_bytes())) == 2
        # the aborted txn's rows are in the committed range, under write id 2
        events = read_events((delta / "bucket_00000").read_bytes()[: batch.flush_lengths[-1]])
        assert [(e[1], e[3], e[5]) for e in events if e[1] == 2] == [
            (2, 0, rows_for(1)[0]),
            (2, 1, rows_for(1)[1]),
        ]
    # closing the connection closed the batch: txns 4 and 5 aborted, file finished, side file gone
    assert batch.closed and batch.states == ["committed", "aborted", "committed", "aborted", "aborted"]
    assert not side.exists()
    events = read_events((delta / "bucket_00000").read_bytes())
    assert sorted({e[1] for e in events}) == [1, 2, 3]
    assert len(events) == 1 + 2 + 3
    assert snapshot(client, full) == f"{full}:5:{MAX}::2,4,5"
    assert client.show_locks(db) == []
    with pytest.raises(StreamingError):
        batch.begin_next_transaction()


def test_single_txn_batches_have_no_side_file(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "p", COLS, [("ds", "string")])
    full = f"{db}.p"
    conn = StreamingConnection(
        client, db, "p", partition={"ds": "x"}, transactions_per_batch=1, shared_write=True
    )
    assert client.raw.get_partition_names(db, "p", -1) == ["ds=x"]  # created at connect
    for n in range(2):
        with conn.fetch_transaction_batch() as batch:
            batch.begin_next_transaction()
            (lock,) = client.show_locks(db)
            assert (lock.type, lock.tablename, lock.partname) == (LockType.SHARED_WRITE, "p", "ds=x")
            batch.write([("a", n)])
            assert batch.side_file_path is None
            assert not list(table_dir(client, db, "p").rglob("*_flush_length"))
            batch.commit()
    conn.close()
    part = table_dir(client, db, "p") / "ds=x"
    assert sorted(p.name for p in part.iterdir()) == ["delta_0000001_0000001", "delta_0000002_0000002"]
    assert read_events((part / "delta_0000002_0000002" / "bucket_00000").read_bytes()) == [
        (0, 2, B0, 0, 2, ("a", 1))
    ]
    assert snapshot(client, full) == f"{full}:2:{MAX}::"


def test_connection_checks(client: MetastoreClient, db: str) -> None:
    create_transactional_table(client, db, "p", COLS, [("ds", "string")])
    create_transactional_table(client, db, "m", COLS, insert_only=True)
    with pytest.raises(ValueError, match="static partition"):
        StreamingConnection(client, db, "p")
    with pytest.raises(ValueError, match="insert-only"):
        StreamingConnection(client, db, "m")
    with pytest.raises(ValueError):
        StreamingConnection(client, db, "p", transactions_per_batch=0, partition={"ds": "1"})
    conn = StreamingConnection(client, db, "p", partition="ds=1", transactions_per_batch=2)
    batch = conn.fetch_transaction_batch()
    with pytest.raises(StreamingError):
        batch.write([("a", 1)])  # no txn begun
    batch.begin_next_transaction()
    with pytest.raises(StreamingError):
        batch.begin_next_transaction()  # the current one is still open
    batch2 = conn.fetch_transaction_batch()  # closes the first batch: its txns are aborted
    assert batch.closed and batch.states == ["aborted", "aborted"]
    assert batch2.write_ids == [3, 4]
    conn.close()
    assert batch2.closed and snapshot(client, f"{db}.p") == f"{db}.p:4:{MAX}::1,2,3,4"
    assert client.show_locks(db) == []


def test_heartbeats_cover_the_open_range(
    client: MetastoreClient, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_transactional_table(client, db, "s", COLS)
    calls: list[tuple[int, int]] = []
    real = MetastoreClient.heartbeat_txn_range

    def spy(self, lo, hi):  # type: ignore[no-untyped-def]
        calls.append((lo, hi))
        return real(self, lo, hi)

    monkeypatch.setattr(MetastoreClient, "heartbeat_txn_range", spy)
    with StreamingConnection(client, db, "s", transactions_per_batch=3, heartbeat_interval_s=0.05) as conn:
        batch = conn.fetch_transaction_batch()
        first, last = batch.txn_ids[0], batch.txn_ids[-1]
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        assert calls[0] == (first, last)
        batch.begin_next_transaction()
        batch.write([("x", 1)])
        batch.commit()
        n = len(calls)
        deadline = time.monotonic() + 5
        while len(calls) == n and time.monotonic() < deadline:
            time.sleep(0.02)
        assert calls[-1] == (first + 1, last)
    n = len(calls)
    time.sleep(0.2)
    assert len(calls) == n  # stopped with the batch
    assert batch.error is None


@pytest.fixture(scope="module")
def short_timeout_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HivemeshProcess]:
    """A metastore with hive.txn.timeout = 2 s, reaping every 0.2 s (SQLite)."""
    base = tmp_path_factory.mktemp("stream-timeout")
    args = ["--txn-timeout", "2", "--housekeeping-interval", "0.2"]
    with HivemeshProcess(f"sqlite:///{base / 'm.db'}", base / "wh", base / "m.log", extra_args=args) as proc:
        yield proc


def test_heartbeats_keep_a_batch_alive(short_timeout_server: HivemeshProcess, tmp_path: Path) -> None:
    with MetastoreClient(short_timeout_server.uri) as client:
        assert client.txn_timeout_s == 2
        client.raw.create_database(Database(name="hb", locationUri=str(tmp_path / "hb"), parameters={}))
        create_transactional_table(client, "hb", "s", COLS)
        with StreamingConnection(client, "hb", "s", transactions_per_batch=2) as conn:
            batch = conn.fetch_transaction_batch()
            batch.begin_next_transaction()
            batch.write([("a", 1)])
            time.sleep(3.0)  # longer than the timeout: only the heartbeats keep the txns open
            batch.commit()
            batch.begin_next_transaction()
            batch.write([("b", 2)])
            batch.commit()
        assert snapshot(client, "hb.s") == f"hb.s:2:{MAX}::"
        # without heartbeats the metastore aborts the txns
        conn2 = StreamingConnection(client, "hb", "s", transactions_per_batch=2, heartbeat_interval_s=60)
        batch2 = conn2.fetch_transaction_batch()
        batch2.begin_next_transaction()
        time.sleep(3.0)
        with pytest.raises(Exception):  # noqa: B017 - TxnAbortedException from the metastore
            batch2.commit()
        conn2.close()
        assert isinstance(batch2, TransactionBatch) and batch2.closed
