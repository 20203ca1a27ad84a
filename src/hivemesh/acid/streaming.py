"""Hive Streaming (v2) style ingest: transaction batches writing one ORC delta file.

Follows Hive's ``org.apache.hive.streaming`` (``HiveStreamingConnection``, ``TransactionBatch``,
``AbstractRecordWriter``) and ``OrcRecordUpdater``:

* :meth:`StreamingConnection.fetch_transaction_batch` opens ``transactions_per_batch`` txns in one
  ``open_txns`` call and allocates the table's write ids for all of them in one
  ``allocate_table_write_ids`` call. The batch writes ``delta_<firstWriteId>_<lastWriteId>/`` (no
  statement suffix) holding one ``bucket_00000`` (bucket property 536870912) that stays open across
  the batch, plus ``_orc_acid_version``. Row ids restart at 0 for every write id.
* Per txn: :meth:`TransactionBatch.begin_next_transaction` takes the txn's lock (see below),
  :meth:`~TransactionBatch.write` appends rows under its write id, :meth:`~TransactionBatch.commit`
  flushes (an intermediate ORC footer whose end offset is appended as an 8-byte big-endian long to
  ``bucket_00000_flush_length``) and then commits the txn; for the last txn of the batch the file
  is closed (final footer) and the side file deleted before the commit, as Hive does.
  :meth:`~TransactionBatch.abort` aborts the txn; rows it wrote stay in the file under its write
  id (readers drop them: the write id is aborted).
* The side file exists only for batches of more than one txn (Hive: min write id != max). A reader
  reads a data file only up to the last length in its side file; with no side file, all of it.
* A daemon thread heartbeats the txns still open with ``heartbeat_txn_range(min, max)`` every
  ``heartbeat_interval_s`` (default: a third of the metastore's ``hive.txn.timeout``) on its own
  connection, serialized with commit/abort so it never beats a txn that just ended; when the
  metastore answers that a txn is aborted or unknown the batch is dead (:class:`StreamingError`).
* :meth:`TransactionBatch.close` aborts the txns not committed, writes the final footer and
  deletes the side file.

Locks: Hive 4's ``TransactionBatch.createLockRequest`` takes SHARED_READ with operation INSERT on
the table, or on the partition for a static partition (``shared_write=True`` takes SHARED_WRITE
instead). Only static partitions are supported (one partition per connection, created at connect
if missing, as Hive's connection does); dynamic partitioning is not.

Units: ``*_s`` are seconds. A connection and its batches are used from one thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from hivemesh import storage
from hivemesh.acid import orcfile
from hivemesh.acid.files import write_acid_version_file
from hivemesh.acid.names import bucket_file_name, delta_dir_name, encode_flush_length, side_file_name
from hivemesh.acid.orcfile import AcidOrcWriter, FileStats
from hivemesh.acid.statement import INSERT, PartitionSpec, WriteTable, lock_components
from hivemesh.client.metastore import MetastoreClient
from hivemesh.errors import HivemeshError

log = logging.getLogger("hivemesh.acid.streaming")

INACTIVE, OPEN, COMMITTED, ABORTED = (
    "inactive",
    "open",
    "committed",
    "aborted",
)  # HiveStreamingConnection.TxnState


class StreamingError(HivemeshError, RuntimeError):
    """A streaming call that cannot proceed: no transaction open, batch exhausted or closed, a
    heartbeat found the txns aborted, or an earlier failure made the batch unusable."""


class StreamingConnection:
    """A connection streaming rows into one full-ACID table (or one static partition of it).

    ``client``: a connected :class:`MetastoreClient` (used from this thread only; heartbeats use
    their own connection). ``partition``: the static partition (dict, values, or ``k=v`` name),
    required for a partitioned table. ``transactions_per_batch``: txns per batch (>= 1).
    ``heartbeat_interval_s``: None = a third of ``hive.txn.timeout``. ``agent_info``: recorded on
    txns and locks. ``shared_write``: SHARED_WRITE locks instead of Hive's SHARED_READ.
    ``lock_timeout_s``: wait for a lock at most this long. ``compression``/``stripe_size``: of the
    ORC file (default: the table's ``orc.compress`` or ZLIB, 64 MiB).

    Raises ValueError for a table that is not full ACID, or a missing/unexpected partition.
    """

    def __init__(
        self,
        client: MetastoreClient,
        db: str,
        table: str,
        *,
        partition: PartitionSpec | None = None,
        transactions_per_batch: int = 10,
        heartbeat_interval_s: float | None = None,
        agent_info: str = "hivemesh-streaming",
        shared_write: bool = False,
        lock_timeout_s: float = 60.0,
        filesystem: pafs.FileSystem | None = None,
        compression: str | None = None,
        stripe_size: int = orcfile.DEFAULT_STRIPE_SIZE,
    ):
        if transactions_per_batch < 1:
            raise ValueError("transactions_per_batch must be >= 1")
        self.client = client
        self.transactions_per_batch = transactions_per_batch
        self.heartbeat_interval_s = heartbeat_interval_s or client.heartbeat_interval_s
        self.agent_info = agent_info
        self.shared_write = shared_write
        self.lock_timeout_s = lock_timeout_s
        self.stripe_size = stripe_size
        self._table = WriteTable(client, db, table, compression=compression)
        if self._table.insert_only:
            raise ValueError(f"{self._table.full_name} is insert-only: streaming needs a full ACID table")
        self.db = self._table.db
        self.table = self._table.table_name
        self.columns = list(self._table.columns)
        self.partition_name: str | None = None
        if self._table.partition_keys:
            if partition is None:
                raise ValueError(f"{self._table.full_name} is partitioned: give a static partition")
            values = self._table.partition_values(partition)
            self.partition_name = self._table.partition_name(values)
            self.location = self._table.partition_location(values, create=True)
        else:
            if partition is not None:
                raise ValueError(f"{self._table.full_name} is not partitioned")
            self.location = self._table.table.sd.location
        self.filesystem, self.base_path = storage.resolve_location(self.location, filesystem)
        self.compression = self._table.compression()
        self.current_batch: TransactionBatch | None = None
        self.closed = False

    @property
    def full_name(self) -> str:
        """``db.table``."""
        return self._table.full_name

    def fetch_transaction_batch(self) -> TransactionBatch:
        """Open the next batch of txns (closing the current batch first, which aborts its txns
        not yet committed). Raises StreamingError when the connection is closed; the metastore's errors
        opening the txns or allocating their write ids (NoSuchTxnException, TxnAbortedException,
        MetaException, a transport error) pass through, the txns opened being aborted."""
        if self.closed:
            raise StreamingError("the streaming connection is closed")
        if self.current_batch is not None and not self.current_batch.closed:
            self.current_batch.close()
        self.current_batch = TransactionBatch(self, self.transactions_per_batch)
        return self.current_batch

    def close(self) -> None:
        """Close the current batch (see :meth:`TransactionBatch.close`); idempotent. Raises what
        :meth:`TransactionBatch.close` raises."""
        if self.closed:
            return
        self.closed = True
        if self.current_batch is not None:
            self.current_batch.close()

    def __enter__(self) -> StreamingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TransactionBatch:
    """A batch of txns of a :class:`StreamingConnection`, used one after the other.

    Attributes: ``txn_ids`` and ``write_ids`` (ascending, one per txn), ``states`` (per txn:
    ``open`` in the metastore and not yet used, ``committed``, ``aborted``), ``delta_path`` /
    ``file_path`` / ``side_file_path`` (paths on the connection's file system; the side file only
    for batches of more than one txn), ``flush_lengths`` (values appended to the side file),
    ``stats`` (the :class:`FileStats` after the file was closed; None when nothing was written).
    Context manager: ``close()`` at the end.
    """

    def __init__(self, conn: StreamingConnection, size: int):
        self.conn = conn
        client = conn.client
        self.txn_ids: list[int] = client.open_txns(size, agent_info=conn.agent_info)
        self.states: list[str] = [OPEN] * len(self.txn_ids)
        self.closed = False
        self.error: BaseException | None = None
        self.stats: FileStats | None = None
        self.flush_lengths: list[int] = []
        self._index = -1
        self._current = (
            INACTIVE  # state of the txn at _index: inactive (not begun) / open / committed / aborted
        )
        self._writer: AcidOrcWriter | None = None
        self._side: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._min_open: int | None = self.txn_ids[0]
        self._hb_thread: threading.Thread | None = None
        try:
            mapping = client.allocate_write_ids(conn.db, conn.table, self.txn_ids)
            self.write_ids = [mapping[t] for t in self.txn_ids]
        except BaseException:
            self._abort_all_quietly()
            self.closed = True
            raise
        self.min_write_id, self.max_write_id = self.write_ids[0], self.write_ids[-1]
        self.delta_path = storage.join_location(
            conn.base_path, delta_dir_name(self.min_write_id, self.max_write_id)
        )
        self.file_path = storage.join_location(self.delta_path, bucket_file_name(0))
        self.side_file_path: str | None = (
            side_file_name(self.file_path) if self.max_write_id != self.min_write_id else None
        )
        self._hb_client = client.clone(connect=False)
        self._hb_thread = threading.Thread(
            target=self._heartbeat_loop, name="hivemesh-streaming-heartbeat", daemon=True
        )
        self._hb_thread.start()

    # ------------------------------------------------------------------ state
    def __enter__(self) -> TransactionBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def current_txn_id(self) -> int | None:
        """The txn begun last (None before :meth:`begin_next_transaction`)."""
        return self.txn_ids[self._index] if self._index >= 0 else None

    @property
    def current_write_id(self) -> int | None:
        """The write id of :attr:`current_txn_id`."""
        return self.write_ids[self._index] if self._index >= 0 else None

    @property
    def current_transaction_state(self) -> str:
        """``inactive`` (none begun), ``open``, ``committed`` or ``aborted``."""
        return self._current

    def remaining_transactions(self) -> int:
        """Txns not yet begun (Hive ``remainingTransactions``)."""
        return len(self.txn_ids) - 1 - self._index

    def _check_usable(self) -> None:
        if self.closed:
            raise StreamingError("the transaction batch is closed")
        if self.error is not None:
            raise StreamingError(f"the transaction batch is unusable: {self.error}") from self.error

    def _check_open_txn(self) -> None:
        self._check_usable()
        if self._current != OPEN:
            raise StreamingError(f"no open transaction (current state {self._current})")

    # ------------------------------------------------------------------ heartbeats
    def _heartbeat_loop(self) -> None:
        try:
            while not self._stop.wait(self.conn.heartbeat_interval_s):
                with self._lock:
                    lo = self._min_open
                    if lo is None or self._stop.is_set():
                        continue
                    try:
                        resp = self._hb_client.heartbeat_txn_range(lo, self.txn_ids[-1])
                    except Exception as e:  # transport trouble outlasting retries: try again later
                        log.warning("heartbeat of txns %s..%s failed: %s", lo, self.txn_ids[-1], e)
                        continue
                    gone = set(resp.aborted or ()) | set(resp.nosuch or ())
                    if gone:
                        self.error = StreamingError(f"heartbeat: txns {sorted(gone)} are aborted or unknown")
                        log.error("%s", self.error)
                        return
        finally:
            self._hb_client.close()

    def _advance_min_open(self) -> None:
        nxt = self._index + 1
        self._min_open = self.txn_ids[nxt] if nxt < len(self.txn_ids) else None

    # ------------------------------------------------------------------ txns
    def begin_next_transaction(self) -> int:
        """Start the next txn of the batch and take its lock; returns its txn id. StreamingError
        when the current txn is still open or none is left; LockTimeoutError /
        LockNotAcquiredError when the lock is not granted."""
        self._check_usable()
        if self._current == OPEN:
            raise StreamingError(f"txn {self.current_txn_id} is still open: commit or abort it first")
        if self.remaining_transactions() <= 0:
            raise StreamingError("no more transactions in this batch")
        self._index += 1
        self._current = OPEN
        conn = self.conn
        partitions = None if conn.partition_name is None else [conn.partition_name]
        components = lock_components(conn.db, conn.table, INSERT, partitions, shared_write=conn.shared_write)
        try:
            conn.client.lock(
                components,
                txn_id=self.txn_ids[self._index],
                timeout_s=conn.lock_timeout_s,
                agent_info=conn.agent_info,
            )
        except BaseException as e:
            self.error = e
            raise
        return self.txn_ids[self._index]

    def _open_writer(self) -> AcidOrcWriter:
        if self._writer is None:
            conn = self.conn
            fs = conn.filesystem
            fs.create_dir(self.delta_path, recursive=True)
            write_acid_version_file(fs, self.delta_path)
            if self.side_file_path is not None:
                self._side = fs.open_output_stream(self.side_file_path, compression=None)
            self._writer = AcidOrcWriter(
                self.file_path,
                conn.columns,
                bucket_id=0,
                statement_id=0,
                filesystem=fs,
                flushable=True,
                compression=conn.compression,
                stripe_size=conn.stripe_size,
            )
        return self._writer

    def write(self, rows: Iterable[Sequence[Any]] | pa.Table | pa.RecordBatch) -> int:
        """Append rows (tuples in column order, or Arrow data) to the current txn; returns how
        many. Nothing is visible before :meth:`commit`. Raises StreamingError when no txn is open or the
        batch is closed or unusable; the writer's errors (ValueError for data that does not fit the
        columns, OSError) make the batch unusable."""
        self._check_open_txn()
        try:
            return self._open_writer().insert(rows, self.write_ids[self._index])
        except BaseException as e:
            self.error = e
            raise

    def commit(self) -> None:
        """Make the current txn's rows durable and commit it: flush + side file (batches of more
        than one txn), the final footer for the last txn, then ``commit_txn``. On failure the
        batch becomes unusable (close it; its open txns are then aborted). Raises StreamingError when no
        txn is open or the batch is closed or unusable; OSError from the file and NoSuchTxnException /
        TxnAbortedException from ``commit_txn`` make the batch unusable."""
        self._check_open_txn()
        try:
            last = self._index == len(self.txn_ids) - 1
            if self._writer is not None:
                if self._side is not None:
                    length = self._writer.flush()
                    self._side.write(encode_flush_length(length))
                    self._side.flush()
                    self.flush_lengths.append(length)
                if last:
                    self._finish_file()
            with self._lock:
                self.conn.client.commit_txn(self.txn_ids[self._index])
                self.states[self._index] = COMMITTED
                self._current = COMMITTED
                self._advance_min_open()
        except BaseException as e:
            self.error = e
            raise

    def abort(self) -> None:
        """Abort the current txn (its rows stay in the file under its aborted write id). Raises
        StreamingError when no txn is open or the batch is closed or unusable; the metastore's error from
        ``abort_txn`` (NoSuchTxnException ...) makes the batch unusable."""
        self._check_usable()
        if self._current != OPEN:
            raise StreamingError(f"no open transaction (current state {self._current})")
        with self._lock:
            try:
                self.conn.client.abort_txn(self.txn_ids[self._index])
            except BaseException as e:
                self.error = e
                raise
            self.states[self._index] = ABORTED
            self._current = ABORTED
            self._advance_min_open()

    def _finish_file(self) -> None:
        """Final footer, then the side file goes (Hive ``OrcRecordUpdater.close``)."""
        if self._writer is not None and self._writer.state == "open":
            self.stats = self._writer.close()
        if self._side is not None:
            self._side.close()
            self._side = None
            if self.side_file_path is not None:
                try:
                    self.conn.filesystem.delete_file(self.side_file_path)
                except FileNotFoundError:
                    pass

    def _abort_all_quietly(self) -> None:
        for i, t in enumerate(self.txn_ids):
            if self.states[i] == OPEN:
                try:
                    self.conn.client.abort_txn(t)
                except Exception as e:
                    log.warning("could not abort txn %s: %s", t, getattr(e, "message", e))
                self.states[i] = ABORTED

    def close(self) -> None:
        """Abort every txn not committed, close the file (final footer) and delete the side file;
        stop heartbeating. Idempotent. A file whose writer failed keeps its side file (readers
        stop at the last committed length); a failed file of a single-txn batch is removed. Failed aborts
        are only logged; raises OSError when the final footer or the side file's removal fails."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        with self._lock:
            self._min_open = None
            self._abort_all_quietly()
            if self._current == OPEN:
                self._current = ABORTED
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(30.0)
        writer = self._writer
        if writer is None:
            return
        if writer.state in ("open", "closed"):
            self._finish_file()
        elif self._side is None:
            writer.discard()  # broken single-txn file: nothing in it was committed
        else:
            self._side.close()
            self._side = None
