"""One Hive write statement on one transactional table, run through a metastore as Hive's Driver
runs it: open a txn (or join the caller's) and heartbeat it -> lock -> allocate the table's write
id -> [the caller writes its delta files, creating missing partitions] ->
``add_dynamic_partitions`` (dynamic-partition writes) -> commit; on any error the txn is aborted
and the caller removes the files it wrote, so nothing is half-visible.

* :class:`WriteTable`: the table as writers need it (columns, partition keys, full ACID or
  insert-only, file format, compression) and its partitions (values, names, locations, creation).
* :func:`lock_components`: Hive 4 ``AcidUtils.makeLockComponents`` for one write.
* :class:`WriteStatement`: the txn side of one statement.

Used by :class:`hivemesh.acid.writer.AcidWriter`, by Spark DML (:mod:`hivemesh.spark.acid_dml`,
whose executors write the files) and, for the table and its locks, by Hive Streaming
(:mod:`hivemesh.acid.streaming`, whose batches open many txns at once).

Locks (Hive 4 with its default ``hive.txn.xlock.write=true``): INSERT takes SHARED_READ (operation
INSERT); UPDATE/DELETE take EXCL_WRITE (operation UPDATE / DELETE). ``shared_write=True`` is
``hive.txn.xlock.write=false``: SHARED_WRITE for all three, only safe with a metastore that detects
write-write conflicts at commit (Hive's WRITE_SET check; hivemesh does not do it).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

from hive_metastore.ttypes import (
    AddDynamicPartitions,
    AlreadyExistsException,
    DataOperationType,
    LockComponent,
    LockType,
    NoSuchObjectException,
    Partition,
    Table,
)

from hivemesh import storage
from hivemesh.acid.names import partition_value_text
from hivemesh.acid.tables import NotTransactionalError, is_insert_only, is_transactional, table_file_format
from hivemesh.client.metastore import Heartbeater, MetastoreClient, lock_component
from hivemesh.hive.names import make_part_name, split_part_name

log = logging.getLogger("hivemesh.acid.statement")

INSERT, DELETE, UPDATE = "insert", "delete", "update"  # the operations of a write statement
_DATA_OPERATION = {
    INSERT: DataOperationType.INSERT,
    UPDATE: DataOperationType.UPDATE,
    DELETE: DataOperationType.DELETE,
}

#: a partition: a dict by key name, a sequence of values in key order, or a Hive name ``k=v/k2=v2``
PartitionSpec = dict[str, Any] | Sequence[Any] | str


def lock_components(
    db: str,
    table: str,
    operation: str,
    partitions: Sequence[str] | None = None,
    *,
    dynamic: bool = False,
    shared_write: bool = False,
) -> list[LockComponent]:
    """The locks of one write (Hive 4 ``AcidUtils.makeLockComponents``): ``operation``
    ``insert`` -> SHARED_READ, ``update``/``delete`` -> EXCL_WRITE (SHARED_WRITE for all with
    ``shared_write``), with that DataOperationType. ``partitions`` (Hive names): one
    partition-level component each (sorted, without repeats); None: one table-level component,
    marked ``isDynamicPartitionWrite`` when ``dynamic``. KeyError for an unknown operation."""
    data_operation = _DATA_OPERATION[operation]
    if shared_write:
        lock_type = LockType.SHARED_WRITE
    else:
        lock_type = LockType.SHARED_READ if operation == INSERT else LockType.EXCL_WRITE
    if partitions is None:
        comp = lock_component(db, table, None, lock_type, data_operation)
        if dynamic:
            comp.isDynamicPartitionWrite = True
        return [comp]
    return [lock_component(db, table, name, lock_type, data_operation) for name in sorted(set(partitions))]


class WriteTable:
    """A transactional table as its writers see it, loaded from the metastore.

    ``client``: a connected :class:`MetastoreClient` (used from this thread only). ``db``/``table``:
    the table (lower-cased here). ``compression``: the codec files are written with (default: see
    :meth:`compression`). Attributes, reloaded by :meth:`refresh`: ``table`` (the metastore
    Table), ``insert_only``, ``file_format`` (``orc``, ``parquet``, ``textfile``), ``columns``
    and ``partition_cols`` (``(name, hive type)``), ``partition_keys`` (names).

    Raises NotTransactionalError (a ValueError) for a table that is not transactional,
    NotImplementedError for a bucketed (``CLUSTERED BY``) one; HMS exceptions pass through
    (NoSuchObjectException for a missing table).
    """

    def __init__(self, client: MetastoreClient, db: str, table: str, *, compression: str | None = None):
        self.client = client
        self.db = db.lower()
        self.table_name = table.lower()
        self._compression = compression
        self.table: Table = self.refresh()

    def refresh(self) -> Table:
        """Reload the table from the metastore (after DDL) and check it can be written. Raises
        NoSuchObjectException for a missing table, MetaException, NotTransactionalError for a table that is
        not transactional and NotImplementedError for a bucketed one."""
        t = self.client.hms.get_table(self.db, self.table_name)
        if not is_transactional(t):
            raise NotTransactionalError(f"{self.full_name} is not a transactional table")
        if t.sd is not None and (t.sd.numBuckets or 0) > 0 and t.sd.bucketCols:
            raise NotImplementedError(f"{self.full_name} is bucketed (CLUSTERED BY): not supported")
        self.table = t
        self.insert_only = is_insert_only(t)
        self.file_format = table_file_format(t)
        self.columns = [(c.name, c.type) for c in t.sd.cols]
        self.partition_cols = [(k.name, k.type) for k in t.partitionKeys or []]
        self.partition_keys = [k for k, _ in self.partition_cols]
        return t

    @property
    def full_name(self) -> str:
        """``db.table``."""
        return f"{self.db}.{self.table_name}"

    def compression(self) -> str:
        """The codec files are written with, lower case: the one given, else the table's
        ``orc.compress`` (default ``zlib``) or, for insert-only Parquet tables,
        ``parquet.compression`` (default ``snappy``)."""
        if self._compression:
            return self._compression
        params = self.table.parameters or {}
        if self.insert_only and self.file_format == "parquet":
            return params.get("parquet.compression", "snappy").lower()
        return params.get("orc.compress", "zlib").lower()

    def check_operation(self, operation: str) -> None:
        """NotImplementedError for an UPDATE or DELETE of an insert-only table (Hive refuses them)."""
        if self.insert_only and operation != INSERT:
            raise NotImplementedError(
                f"{operation.upper()} on insert-only table {self.full_name} (Hive does not allow it)"
            )

    def partition_values(self, spec: PartitionSpec) -> tuple[str, ...]:
        """Normalize a partition spec to its values (strings, in key order): a dict by key name
        (case-insensitive), a sequence of values, or a Hive name ``k=v/k2=v2``. ValueError when
        the table is not partitioned or the spec does not match its keys."""
        keys = self.partition_keys
        if not keys:
            raise ValueError(f"{self.full_name} is not partitioned")
        if isinstance(spec, str):
            spec = dict(split_part_name(spec))
        if isinstance(spec, dict):
            lower = {str(k).lower(): v for k, v in spec.items()}
            if set(lower) != set(keys):
                raise ValueError(f"partition spec {spec} does not match keys {keys}")
            return tuple(partition_value_text(lower[k]) for k in keys)
        values = list(spec)
        if len(values) != len(keys):
            raise ValueError(f"partition values {values} do not match keys {keys}")
        return tuple(partition_value_text(v) for v in values)

    def partition_name(self, values: Sequence[str]) -> str:
        """Hive's name of a partition (escaped ``k=v/k2=v2``). Raises ValueError when the count of
        values differs from the partition keys'."""
        return make_part_name(self.partition_keys, list(values))

    def default_location(self, values: Sequence[str]) -> str | None:
        """Where a partition goes unless told otherwise: ``<table location>/<partition name>``
        (None when the table has no location)."""
        base = self.table.sd.location if self.table.sd else None
        return storage.join_location(base, self.partition_name(values)) if base else None

    def add_partition(self, values: Sequence[str]) -> bool:
        """Create the partition with these values at its :meth:`default_location`, with the
        table's storage descriptor (as Hive's MoveTask does); False when it exists already
        (created concurrently). HMS exceptions pass through. Raises InvalidObjectException (e.g. the table
        is gone) or MetaException."""
        sd = copy.deepcopy(self.table.sd)
        sd.location = self.default_location(values)
        part = Partition(values=list(values), dbName=self.db, tableName=self.table_name, sd=sd, parameters={})
        try:
            self.client.hms.add_partition(part)
            return True
        except AlreadyExistsException:
            return False

    def partition_location(self, values: Sequence[str], create: bool = True) -> str:
        """The location of the partition with these values (strings, key order; see
        :meth:`partition_values`). A missing partition is created when ``create`` (see
        :meth:`add_partition`), else NoSuchObjectException. ValueError when it has no location."""
        try:
            p = self.client.hms.get_partition(self.db, self.table_name, list(values))
        except NoSuchObjectException:
            if not create:
                raise
            self.add_partition(values)
            p = self.client.hms.get_partition(self.db, self.table_name, list(values))
        if not p.sd or not p.sd.location:
            raise ValueError(f"partition {self.partition_name(values)} of {self.full_name} has no location")
        return p.sd.location


class WriteStatement:
    """The txn side of one write statement (``operation``: ``insert``, ``update``, ``delete``) on
    table ``db.table``.

    ``txn_id``: None opens a txn of the statement's own in :meth:`begin` (heartbeated from a
    daemon thread, committed by :meth:`commit`, aborted by :meth:`abort`); else the caller's
    txn, which is never committed or aborted here. ``agent_info``: recorded on the txn and locks.
    ``lock_timeout_s``: how long :meth:`begin` waits for the locks (LockTimeoutError after).

    Use: :meth:`begin` -> write the files -> :meth:`add_dynamic_partitions` (dynamic-partition
    writes) -> :meth:`commit`; on any error :meth:`abort`, which tells whether the statement's
    files must be removed. :meth:`close` stops the heartbeat (idempotent). Attributes: ``txn_id``,
    ``write_id`` (None before :meth:`begin`), ``commit_attempted``.
    """

    def __init__(
        self,
        client: MetastoreClient,
        db: str,
        table: str,
        operation: str,
        *,
        txn_id: int | None = None,
        agent_info: str,
        lock_timeout_s: float = 60.0,
    ):
        if operation not in _DATA_OPERATION:
            raise ValueError(f"unknown write operation {operation!r}")
        self.client = client
        self.db = db
        self.table = table
        self.operation = operation
        self.own = txn_id is None
        self.txn_id = txn_id
        self.write_id: int | None = None
        self.agent_info = agent_info
        self.lock_timeout_s = lock_timeout_s
        self.commit_attempted = False
        self._heartbeater: Heartbeater | None = None

    def begin(self, components: Sequence[LockComponent]) -> int:
        """Open the txn (own txns), take the locks (waits up to ``lock_timeout_s``) and allocate
        the table's write id; returns it. HMS and lock errors pass through (then :meth:`abort`). Raises
        NoSuchTxnException / TxnAbortedException, LockTimeoutError / LockNotAcquiredError, and the
        transport error left after the client's retries."""
        client = self.client
        if self.own:
            self.txn_id = client.open_txn(agent_info=self.agent_info)
            self._heartbeater = Heartbeater(client, client.heartbeat_interval_s, txn_id=self.txn_id)
        txn = self._txn()
        client.lock(components, txn_id=txn, timeout_s=self.lock_timeout_s, agent_info=self.agent_info)
        self.write_id = client.allocate_write_ids(self.db, self.table, [txn])[txn]
        return self.write_id

    def _txn(self) -> int:
        if self.txn_id is None:
            raise RuntimeError(f"the {self.operation} statement on {self.db}.{self.table} has no txn")
        return self.txn_id

    def add_dynamic_partitions(self, names: Sequence[str]) -> None:
        """Report the partitions a dynamic-partition write wrote (Hive names), with the
        statement's operation, so the metastore records them for the txn. Raises RuntimeError before
        :meth:`begin`, NoSuchTxnException / TxnAbortedException when the txn is no longer open."""
        txn = self._txn()
        self.client.hms.add_dynamic_partitions(
            AddDynamicPartitions(
                txnid=txn,
                writeid=self.write_id,
                dbname=self.db,
                tablename=self.table,
                partitionnames=list(names),
                operationType=_DATA_OPERATION[self.operation],
            ),
        )

    def commit(self) -> bool:
        """Commit an own txn (stopping its heartbeat first); True when committed here, False in the
        caller's txn (nothing is done). HMS exceptions pass through (then :meth:`abort`). Raises
        RuntimeError before :meth:`begin`, NoSuchTxnException / TxnAbortedException (e.g. a txn that timed
        out) and a transport error, after which the outcome is unknown."""
        if not self.own:
            return False
        txn = self._txn()
        self.close()
        self.commit_attempted = True
        self.client.commit_txn(txn)
        return True

    def abort(self) -> bool:
        """After an error: abort an own txn (best effort, logged) and say whether the files the
        statement wrote must be removed: True unless a commit was attempted and the abort failed
        (the commit's outcome is unknown: the files are kept). Never raises."""
        self.close()
        aborted = False
        if self.own and self.txn_id is not None:
            try:
                self.client.abort_txn(self.txn_id)
                aborted = True
            except Exception as e:
                log.warning("could not abort txn %s: %s", self.txn_id, getattr(e, "message", e))
        if self.commit_attempted and not aborted:
            log.warning("commit of txn %s failed with unknown outcome; keeping its files", self.txn_id)
            return False
        return True

    def close(self) -> None:
        """Stop heartbeating (idempotent)."""
        if self._heartbeater is not None:
            self._heartbeater.stop()
