"""Hive-compatible DML on transactional tables: INSERT, DELETE and UPDATE through a metastore.

:class:`AcidWriter` runs one Hive write statement per call (:class:`~hivemesh.acid.statement.WriteStatement`):
open txn (or join the caller's) -> lock -> allocate the table write id -> create missing
partitions -> write files (:mod:`hivemesh.acid.files`) -> ``add_dynamic_partitions``
(dynamic-partition inserts) -> commit. On any error the files written by the call are removed
(best effort) and a txn the call opened is aborted, so nothing is half-visible.

Directories and files (Hive ``AcidUtils``, ``OrcRecordUpdater``, Hive 3 split update):

* INSERT into a full-ACID table: ``delta_<w>_<w>_<stmt>/bucket_00000`` + ``_orc_acid_version``;
* DELETE: ``delete_delta_<w>_<w>_<stmt>/bucket_<N>``, one file per bucket id decoded from the
  deleted rows' bucket property, events sorted by ROW__ID;
* UPDATE: the DELETE of the old ROW__IDs plus the INSERT of the new rows, same txn, write id and
  statement id (ACID v2 "split update");
* INSERT into an insert-only table: ``delta_<w>_<w>_<stmt>/000000_0``, a plain ORC or Parquet file
  of the table columns (no ACID columns, no ``_orc_acid_version``).

Locks (:func:`~hivemesh.acid.statement.lock_components`; ``shared_write=True`` is Hive 4's
``hive.txn.xlock.write=false``): components are partition-level for a static partition (and for
each partition an UPDATE/DELETE touches), table-level with ``isDynamicPartitionWrite`` for
dynamic-partition inserts (their partitions are then reported with ``add_dynamic_partitions``),
table-level for unpartitioned tables.

Storage: table and partition locations are local paths or ``file:`` URIs; other URIs go through
``pyarrow.fs`` (a ``filesystem`` may be passed instead). Not done here: bucketed (``CLUSTERED BY``)
tables (Hive's bucket hash), INSERT OVERWRITE (``base_*``), text-format insert-only files, table
and partition statistics, write notification events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from hive_metastore.ttypes import LockComponent

from hivemesh import storage
from hivemesh.acid import orcfile
from hivemesh.acid.files import Data, write_acid_version_file, write_plain_file
from hivemesh.acid.names import bucket_file_name, decode_bucket_property, delta_dir_name, partition_value_text
from hivemesh.acid.orc_columnar import ColumnarInsertWriter, open_insert_writer
from hivemesh.acid.orcfile import AcidOrcWriter, FileStats
from hivemesh.acid.statement import (
    DELETE,
    INSERT,
    UPDATE,
    PartitionSpec,
    WriteStatement,
    WriteTable,
    lock_components,
)
from hivemesh.client.metastore import MetastoreClient

log = logging.getLogger("hivemesh.acid.writer")


@dataclass(frozen=True)
class WriteResult:
    """The outcome of one :class:`AcidWriter` call.

    ``operation``: ``insert``/``delete``/``update``; ``committed``: False when the call ran in the
    caller's txn (the caller commits); ``partitions``: Hive names (``k=v/k2=v2``) written, empty for
    an unpartitioned table; ``files``: every data file written; ``inserted``/``deleted``: rows.
    """

    operation: str
    txn_id: int
    write_id: int
    statement_id: int
    committed: bool
    partitions: tuple[str, ...]
    files: tuple[FileStats, ...]
    inserted: int
    deleted: int


@dataclass
class _Target:
    """The files of one partition (or of the unpartitioned table) in one statement."""

    values: tuple[str, ...]
    name: str  # Hive partition name, "" for an unpartitioned table
    rows: Any = None  # pa.Table or list of tuples (inserts)
    keys: list[tuple[int, int, int]] | None = None  # deletes
    location: str | None = None


@dataclass
class _Output:
    """What one statement writes: its write id and statement id, the directories it created (to
    remove on failure) and the files it wrote."""

    write_id: int
    statement_id: int
    dirs: list[tuple[pafs.FileSystem, str]] = field(default_factory=list)
    files: list[FileStats] = field(default_factory=list)


class AcidWriter(WriteTable):
    """INSERT / DELETE / UPDATE on one transactional table of a metastore.

    ``client``: a connected :class:`MetastoreClient` (used from this thread only). ``db``/``table``:
    the table (must be transactional: NotTransactionalError, a ValueError, otherwise;
    NotImplementedError for bucketed tables). Table attributes and partition helpers: see
    :class:`~hivemesh.acid.statement.WriteTable`. ``shared_write``: Hive's ``hive.txn.xlock.write=false`` lock choice (see the module
    doc). ``lock_timeout_s``: how long to wait for locks (LockTimeoutError after). ``filesystem``:
    a ``pyarrow.fs.FileSystem`` for the table's locations (default: local paths / from the URI).
    ``compression``: ORC/Parquet codec (default: the table's ``orc.compress`` /
    ``parquet.compression``, else ``zlib`` / ``snappy``). ``stripe_size``: ORC stripe bytes.

    Every call runs in one txn: a new one (committed at the end, aborted on error) or the caller's
    ``txn_id`` (then the call never commits or aborts; statements of one txn get statement ids 0,
    1, ... in call order, as Hive numbers the statements of a multi-statement txn).
    """

    def __init__(
        self,
        client: MetastoreClient,
        db: str,
        table: str,
        *,
        shared_write: bool = False,
        lock_timeout_s: float = 60.0,
        filesystem: pafs.FileSystem | None = None,
        compression: str | None = None,
        stripe_size: int = orcfile.DEFAULT_STRIPE_SIZE,
        agent_info: str = "hivemesh-writer",
    ):
        super().__init__(client, db, table, compression=compression)
        self.shared_write = shared_write
        self.lock_timeout_s = lock_timeout_s
        self.filesystem = filesystem
        self.stripe_size = stripe_size
        self.agent_info = agent_info
        self._statements: dict[int, int] = {}

    # ------------------------------------------------------------------ public DML
    def insert(
        self, data: Data, partition: PartitionSpec | None = None, *, txn_id: int | None = None
    ) -> WriteResult:
        """INSERT ``data`` (row tuples in column order, or Arrow data with columns by name).

        Partitioned tables: with ``partition`` (static) the rows hold the data columns only;
        without, each row also carries the partition key values after the data columns (Arrow:
        the partition key columns by name, else the last ones) and rows go to their partitions
        (dynamic partitioning). Missing partitions are created. Full ACID: one
        ``delta_<w>_<w>_<stmt>/bucket_00000`` per partition; insert-only: ``000000_0``. Raises ValueError for
        data or a partition spec that does not match the table's columns and keys, FileExistsError when a file
        to write exists already (a statement id reused in one txn), OSError from the storage, and the
        metastore's errors (NoSuchTxnException / TxnAbortedException, LockTimeoutError / LockNotAcquiredError,
        MetaException); a txn of its own is then aborted, and the files written are removed unless a
        commit's outcome is unknown.
        """
        targets = self._insert_targets(data, partition)
        dynamic = bool(self.partition_keys) and partition is None
        return self._run(INSERT, targets, [], dynamic, txn_id)

    def delete(
        self,
        row_ids: Iterable[Sequence[Any]] | pa.Table,
        partition: PartitionSpec | None = None,
        *,
        txn_id: int | None = None,
    ) -> WriteResult:
        """DELETE the rows with these ROW__IDs.

        ``row_ids``: ``(originalTransaction, bucket property, rowId)`` tuples (with ``partition``
        for a partitioned table) or 4-tuples whose last item is the row's partition spec; or Arrow
        data with columns ``originalTransaction``, ``bucket``, ``rowId`` (plus the partition key
        columns when ``partition`` is None). Full-ACID tables only (NotImplementedError for
        insert-only tables, as in Hive). Partitions must exist (NoSuchObjectException).
        """
        self.check_operation(DELETE)
        targets = self._delete_targets(row_ids, partition)
        return self._run(DELETE, [], targets, False, txn_id)

    def update(
        self,
        row_ids: Iterable[Sequence[Any]] | pa.Table,
        data: Data,
        partition: PartitionSpec | None = None,
        *,
        txn_id: int | None = None,
    ) -> WriteResult:
        """UPDATE as Hive 3+ does (split update): delete ``row_ids`` (as :meth:`delete`) and insert
        the new ``data`` rows (as :meth:`insert`) in one txn, with one write id and statement id:
        ``delete_delta_<w>_<w>_<stmt>/`` + ``delta_<w>_<w>_<stmt>/``. Full-ACID tables only. Raises
        NotImplementedError for an insert-only table, and as :meth:`delete` and :meth:`insert`."""
        self.check_operation(UPDATE)
        deletes = self._delete_targets(row_ids, partition)
        inserts = self._insert_targets(data, partition)
        return self._run(UPDATE, inserts, deletes, False, txn_id)

    # ------------------------------------------------------------------ grouping
    def _insert_targets(self, data: Data, partition: PartitionSpec | None) -> list[_Target]:
        if not self.partition_keys:
            if partition is not None:
                raise ValueError(f"{self.full_name} is not partitioned")
            return [_Target((), "", rows=data)]
        if partition is not None:
            values = self.partition_values(partition)
            return [_Target(values, self.partition_name(values), rows=data)]
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        groups = self._split_arrow_rows(data) if isinstance(data, pa.Table) else self._split_row_tuples(data)
        return [_Target(v, self.partition_name(v), rows=rows) for v, rows in sorted(groups.items())]

    def _split_arrow_rows(self, data: pa.Table) -> dict[tuple[str, ...], pa.Table]:
        """Dynamic partitioning of Arrow rows: partition values -> the rows' table columns. The
        partition key columns are taken by name, else they are the last columns."""
        keys = self.partition_keys
        names = [n for n, _ in self.columns]
        lower = [n.lower() for n in data.schema.names]
        if all(k in lower for k in keys):
            key_cols = [data.column(lower.index(k)) for k in keys]
            data_cols = orcfile.select_columns(
                data.drop_columns([data.schema.names[lower.index(k)] for k in keys]), names
            )
        else:
            n = len(names)
            if data.num_columns != n + len(keys):
                raise ValueError(
                    f"dynamic partition insert needs columns {names + keys}, got {data.schema.names}"
                )
            key_cols = [data.column(n + i) for i in range(len(keys))]
            data_cols = [data.column(i) for i in range(n)]
        body = pa.Table.from_arrays(data_cols, names=names)
        positions: dict[tuple[str, ...], list[int]] = {}
        for i, vals in enumerate(zip(*[c.to_pylist() for c in key_cols], strict=True)):
            positions.setdefault(tuple(partition_value_text(v) for v in vals), []).append(i)
        return {values: body.take(pa.array(rows, type=pa.int64())) for values, rows in positions.items()}

    def _split_row_tuples(
        self, data: Iterable[Sequence[Any]]
    ) -> dict[tuple[str, ...], list[tuple[Any, ...]]]:
        """Dynamic partitioning of row tuples (table columns, then the partition key values)."""
        n, k = len(self.columns), len(self.partition_keys)
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for row in data:
            row = tuple(row)
            if len(row) != n + k:
                raise ValueError(f"dynamic partition insert rows need {n + k} values, got {len(row)}")
            groups.setdefault(tuple(partition_value_text(v) for v in row[n:]), []).append(row[:n])
        return groups

    def _delete_targets(
        self, row_ids: Iterable[Sequence[Any]] | pa.Table, partition: PartitionSpec | None
    ) -> list[_Target]:
        static = self.partition_values(partition) if partition is not None else None
        if isinstance(row_ids, pa.RecordBatch):
            row_ids = pa.Table.from_batches([row_ids])
        if isinstance(row_ids, pa.Table):
            groups = self._split_arrow_keys(row_ids, static)
        else:
            groups = self._split_key_tuples(row_ids, static)
        named = bool(self.partition_keys)
        return [
            _Target(values, self.partition_name(values) if named else "", keys=ks)
            for values, ks in sorted(groups.items())
        ]

    def _split_arrow_keys(
        self, row_ids: pa.Table, static: tuple[str, ...] | None
    ) -> dict[tuple[str, ...], list[tuple[int, int, int]]]:
        """ROW__IDs from Arrow columns by partition: the static one, else the partition key columns."""
        keys = self.partition_keys
        ids = orcfile.arrow_keys(row_ids)
        if not keys or static is not None:
            return {static or (): ids}
        lower = [n.lower() for n in row_ids.schema.names]
        missing = [k for k in keys if k not in lower]
        if missing:
            raise ValueError(f"delete keys need partition columns {missing} (or a static partition)")
        cols = [row_ids.column(lower.index(k)).to_pylist() for k in keys]
        groups: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
        for key, vals in zip(ids, zip(*cols, strict=True), strict=True):
            groups.setdefault(tuple(partition_value_text(v) for v in vals), []).append(key)
        return groups

    def _split_key_tuples(
        self, row_ids: Iterable[Sequence[Any]], static: tuple[str, ...] | None
    ) -> dict[tuple[str, ...], list[tuple[int, int, int]]]:
        """ROW__ID tuples by partition: the static one, else each 4-tuple's own."""
        partitioned = bool(self.partition_keys)
        groups: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
        for item in row_ids:
            item = tuple(item)
            if len(item) == 3:
                if partitioned and static is None:
                    raise ValueError("a partitioned table needs a partition per key or a static partition")
                part = static or ()
            elif len(item) == 4 and partitioned:
                part = self.partition_values(item[3])
            else:
                raise ValueError(f"bad ROW__ID {item!r}: (originalTransaction, bucket, rowId[, partition])")
            groups.setdefault(part, []).append((int(item[0]), int(item[1]), int(item[2])))
        return groups

    def _location(self, target: _Target, create: bool) -> str:
        if not self.partition_keys:
            loc = self.table.sd.location if self.table.sd else None
            if not loc:
                raise ValueError(f"{self.full_name} has no location")
            return loc
        return self.partition_location(target.values, create)

    # ------------------------------------------------------------------ the statement
    def _lock_components(self, op: str, targets: Sequence[_Target], dynamic: bool) -> list[LockComponent]:
        partitions = None if not self.partition_keys or dynamic else [t.name for t in targets]
        return lock_components(
            self.db, self.table_name, op, partitions, dynamic=dynamic, shared_write=self.shared_write
        )

    def _statement_id(self, txn_id: int | None) -> int:
        """0 in a txn of the call's own; in the caller's txn, 0, 1, ... in call order."""
        if txn_id is None:
            return 0
        stmt = self._statements.get(txn_id, 0)
        self._statements[txn_id] = stmt + 1
        return stmt

    def _run(
        self,
        op: str,
        inserts: list[_Target],
        deletes: list[_Target],
        dynamic: bool,
        txn_id: int | None,
    ) -> WriteResult:
        txn_id = None if txn_id is None else int(txn_id)
        stmt = self._statement_id(txn_id)
        statement = WriteStatement(
            self.client,
            self.db,
            self.table_name,
            op,
            txn_id=txn_id,
            agent_info=self.agent_info,
            lock_timeout_s=self.lock_timeout_s,
        )
        out: _Output | None = None
        try:
            out = _Output(statement.begin(self._lock_components(op, [*deletes, *inserts], dynamic)), stmt)
            for t in deletes:
                t.location = self._location(t, create=False)
            for t in inserts:
                t.location = self._location(t, create=True)
            deleted = sum(self._write_deletes(t, out) for t in deletes)
            inserted = sum(self._write_inserts(t, out) for t in inserts)
            if dynamic and inserts:
                statement.add_dynamic_partitions([t.name for t in inserts])
            committed = statement.commit()
        except BaseException:
            if statement.abort() and out is not None:
                for fs, path in reversed(out.dirs):
                    storage.remove_path(fs, path)
            raise
        assert statement.txn_id is not None
        return WriteResult(
            operation=op,
            txn_id=statement.txn_id,
            write_id=out.write_id,
            statement_id=stmt,
            committed=committed,
            partitions=tuple(sorted({t.name for t in [*deletes, *inserts] if t.name})),
            files=tuple(out.files),
            inserted=inserted,
            deleted=deleted,
        )

    def _new_dir(self, location: str | None, name: str, out: _Output) -> tuple[pafs.FileSystem, str]:
        assert location is not None
        fs, base = storage.resolve_location(location, self.filesystem)
        path = storage.join_location(base, name)
        if storage.path_exists(fs, path):
            raise FileExistsError(f"{path} exists already (statement id reused in one txn?)")
        out.dirs.append((fs, path))
        fs.create_dir(path, recursive=True)
        return fs, path

    def _bucket_writer(
        self, fs: pafs.FileSystem, directory: str, bucket_id: int, stmt: int, arrow: bool = False
    ) -> AcidOrcWriter | ColumnarInsertWriter:
        """The writer of ``bucket_<bucket_id>`` in ``directory``; ``arrow``: inserts of Arrow data
        (:func:`~hivemesh.acid.orc_columnar.open_insert_writer` picks the columnar writer)."""
        return (open_insert_writer if arrow else AcidOrcWriter)(
            storage.join_location(directory, bucket_file_name(bucket_id)),
            self.columns,
            bucket_id=bucket_id,
            statement_id=stmt,
            filesystem=fs,
            compression=self.compression(),
            stripe_size=self.stripe_size,
        )

    def _write_deletes(self, t: _Target, out: _Output) -> int:
        """The delete delta of one partition: a ``bucket_N`` per bucket id of the deleted rows."""
        by_bucket: dict[int, list[tuple[int, int, int]]] = {}
        for k in t.keys or []:
            by_bucket.setdefault(decode_bucket_property(k[1])[0], []).append(k)
        if not by_bucket:
            return 0
        w_id, stmt = out.write_id, out.statement_id
        fs, path = self._new_dir(t.location, delta_dir_name(w_id, w_id, stmt, delete=True), out)
        write_acid_version_file(fs, path)
        count = 0
        for bucket_id, keys in sorted(by_bucket.items()):
            with self._bucket_writer(fs, path, bucket_id, stmt) as w:
                count += w.delete(keys, w_id)
            assert w.stats is not None
            out.files.append(w.stats)
        return count

    def _write_inserts(self, t: _Target, out: _Output) -> int:
        """The insert delta of one partition: ``bucket_00000`` (full ACID) or ``000000_0``."""
        w_id, stmt = out.write_id, out.statement_id
        fs, path = self._new_dir(t.location, delta_dir_name(w_id, w_id, stmt), out)
        if self.insert_only:
            stats = write_plain_file(
                path,
                self.columns,
                t.rows,
                file_format=self.file_format,
                filesystem=fs,
                compression=self.compression(),
            )
            if stats is None:  # no rows: no delta
                storage.remove_path(fs, path)
                return 0
            out.files.append(stats)
            return stats.rows
        write_acid_version_file(fs, path)
        # Arrow data column by column when the types allow
        with self._bucket_writer(fs, path, 0, stmt, arrow=isinstance(t.rows, pa.Table | pa.RecordBatch)) as w:
            w.insert(t.rows, w_id)
        assert w.stats is not None
        if w.stats.rows == 0:  # no rows: no delta
            storage.remove_path(fs, path)
            return 0
        out.files.append(w.stats)
        return w.stats.rows
