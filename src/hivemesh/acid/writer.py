"""Hive-compatible DML on transactional tables: INSERT, DELETE and UPDATE through a metastore.

Two layers:

* File primitives, free of any metastore or transaction, for Spark executors too:
  :func:`write_bucket_file` writes one ``bucket_N`` file of a full-ACID ``delta_*`` or
  ``delete_delta_*`` directory (plus its ``_orc_acid_version``) from Arrow batches;
  :func:`write_plain_file` writes one plain file (``000000_0``) of an insert-only delta. Row ids
  restart at 0 in every file, so a (write id, bucket, statement id) file is deterministic; two
  writers must never share one (give each Spark task its own bucket id, as Hive gives each task
  its own ``bucket_N``).
* :class:`AcidWriter`, the statement layer: one metastore transaction per call, as Hive's Driver
  runs one statement: open txn (or join the caller's) -> lock -> allocate the table write id ->
  create missing partitions -> write files -> ``add_dynamic_partitions`` (dynamic-partition
  inserts) -> commit. On any error the files written by the call are removed (best effort) and a
  txn the call opened is aborted, so nothing is half-visible.

Directories and files (Hive ``AcidUtils``, ``OrcRecordUpdater``, Hive 3 split update):

* INSERT into a full-ACID table: ``delta_<w>_<w>_<stmt>/bucket_00000`` + ``_orc_acid_version``;
* DELETE: ``delete_delta_<w>_<w>_<stmt>/bucket_<N>``, one file per bucket id decoded from the
  deleted rows' bucket property, events sorted by ROW__ID;
* UPDATE: the DELETE of the old ROW__IDs plus the INSERT of the new rows, same txn, write id and
  statement id (ACID v2 "split update");
* INSERT into an insert-only table: ``delta_<w>_<w>_<stmt>/000000_0``, a plain ORC or Parquet file
  of the table columns (no ACID columns, no ``_orc_acid_version``).

Locks (Hive 4 ``AcidUtils.makeLockComponents`` with its default ``hive.txn.xlock.write=true``):
INSERT takes SHARED_READ (operation INSERT); UPDATE/DELETE take EXCL_WRITE (operation UPDATE /
DELETE). ``shared_write=True`` is Hive 4's ``hive.txn.xlock.write=false``: SHARED_WRITE for all
three, which is only safe with a metastore that detects write-write conflicts at commit (Hive's
WRITE_SET check; hivemesh does not do it). Components are partition-level for a static partition
(and for each partition an UPDATE/DELETE touches), table-level with ``isDynamicPartitionWrite``
for dynamic-partition inserts (their partitions are then reported with
``add_dynamic_partitions``), table-level for unpartitioned tables.

Storage: table and partition locations are local paths or ``file:`` URIs; other URIs go through
``pyarrow.fs`` (a ``filesystem`` may be passed instead). Not done here: bucketed (``CLUSTERED BY``)
tables (Hive's bucket hash), INSERT OVERWRITE (``base_*``), text-format insert-only files, table
and partition statistics, write notification events.
"""

from __future__ import annotations

import copy
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pyarrow.parquet as pq
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
from hivemesh.acid import orcfile
from hivemesh.acid.names import (
    ACID_VERSION_FILE,
    ORC_ACID_VERSION,
    bucket_file_name,
    decode_bucket_property,
    delta_dir_name,
)
from hivemesh.acid.orcfile import AcidOrcWriter, FileStats
from hivemesh.acid.tables import is_insert_only, is_transactional, table_file_format
from hivemesh.client.metastore import Heartbeater, MetastoreClient, lock_component
from hivemesh.hive.names import DEFAULT_PARTITION_NAME, make_part_name, split_part_name

log = logging.getLogger("hivemesh.acid.writer")

INSERT_OP, DELETE_OP, UPDATE_OP = "insert", "delete", "update"
PLAIN_FILE_NAME = "000000_0"  # Hive's first task file name (taskId_attempt) in insert-only deltas

Data = pa.Table | pa.RecordBatch | Iterable[Sequence[Any]]
PartitionSpec = dict[str, Any] | Sequence[Any] | str


# --- storage -----------------------------------------------------------------------------------


def resolve_location(location: str, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path)`` of a table/partition/delta location.

    With ``filesystem`` the location is a path on it (a URI's scheme and authority are dropped).
    Without: a plain path or ``file:`` URI -> the local file system (``file:/x``, ``file:///x``
    -> ``/x``; relative paths made absolute); any other URI -> ``pyarrow.fs.FileSystem.from_uri``
    (ValueError/OSError when pyarrow cannot open it).
    """
    if filesystem is not None:
        if location.startswith("file:"):
            return filesystem, orcfile.file_uri_path(location)
        if "://" in location:
            rest = location.split("://", 1)[1]
            return filesystem, "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return filesystem, location
    if location.startswith("file:"):
        return pafs.LocalFileSystem(), orcfile.file_uri_path(location)
    if "://" not in location:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    return pafs.FileSystem.from_uri(location)


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def write_acid_version_file(fs: pafs.FileSystem, directory: str) -> None:
    """Write ``<directory>/_orc_acid_version`` holding ``2`` (Hive
    ``AcidUtils.OrcAcidVersion.writeVersionFile``) unless it exists."""
    path = _join(directory, ACID_VERSION_FILE)
    if _exists(fs, path):
        return
    with fs.open_output_stream(path, compression=None) as out:
        out.write(str(ORC_ACID_VERSION).encode())


def _remove_dir(fs: pafs.FileSystem, path: str) -> None:
    try:
        if _exists(fs, path):
            fs.delete_dir(path)
    except Exception as e:  # best effort: the txn is aborted, readers skip the directory anyway
        log.warning("could not remove %s: %s", path, e)


# --- file primitives (no metastore) ------------------------------------------------------------


def _iter_arrow(data: Any) -> Iterator[pa.RecordBatch | pa.Table]:
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
        return
    for item in data:
        if not isinstance(item, pa.Table | pa.RecordBatch):
            raise TypeError(f"expected pyarrow RecordBatch/Table items, got {type(item).__name__}")
        yield item


def write_bucket_file(
    directory: str,
    columns: Sequence[tuple[str, str]],
    bucket_id: int,
    statement_id: int,
    write_id: int,
    batches: pa.Table | pa.RecordBatch | Iterable[pa.Table | pa.RecordBatch],
    *,
    delete: bool = False,
    attempt: int | None = None,
    filesystem: pafs.FileSystem | None = None,
    compression: str = "zlib",
    stripe_size: int = orcfile.DEFAULT_STRIPE_SIZE,
    version_file: bool = True,
) -> FileStats | None:
    """Write one full-ACID bucket file ``<directory>/bucket_<bucket_id>[_<attempt>]``; its
    :class:`FileStats`, or None (and no file) when there is no row.

    ``directory``: the ``delta_*`` (insert) or ``delete_delta_*`` (``delete=True``) directory,
    created if missing, with ``_orc_acid_version`` when ``version_file``. ``columns``: the table's
    ``(name, hive type)`` pairs. Inserts get ``bucket`` = BucketCodec V1 of (``bucket_id``,
    ``statement_id``), ``originalTransaction`` = ``currentTransaction`` = ``write_id`` and row ids
    0, 1, ... in batch order. Deletes: ``batches`` hold the deleted rows' ROW__IDs in columns
    ``originalTransaction``, ``bucket``, ``rowId`` (else the first three), all of bucket
    ``bucket_id``; they are sorted here. Raises ValueError for keys of another bucket, OSError for
    storage errors (a partly written file is removed).
    """
    fs, dir_path = resolve_location(directory, filesystem)
    items = iter(_iter_arrow(batches))
    if delete:
        keys: list[tuple[int, int, int]] = []
        for item in items:
            keys.extend(orcfile.arrow_keys(item))
        if not keys:
            return None
        first = None
    else:
        first = next((b for b in items if b.num_rows), None)
        if first is None:
            return None
    fs.create_dir(dir_path, recursive=True)
    if version_file:
        write_acid_version_file(fs, dir_path)
    path = _join(dir_path, bucket_file_name(bucket_id, attempt))
    with AcidOrcWriter(
        path,
        columns,
        bucket_id=bucket_id,
        statement_id=statement_id,
        filesystem=fs,
        compression=compression,
        stripe_size=stripe_size,
    ) as w:
        if delete:
            w.delete(keys, write_id)
        else:
            for item in itertools.chain([first], items):
                w.insert(item, write_id)
    return w.stats


def _arrow_table(data: Data, columns: Sequence[tuple[str, str]]) -> pa.Table:
    """``data`` as an Arrow table with the Arrow types of the Hive ``columns``."""
    schema = pa.schema([pa.field(n, orcfile.hive_to_arrow_type(t)) for n, t in columns])
    names = [n for n, _ in columns]
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        cols = orcfile.select_columns(data, names)
        return pa.Table.from_arrays(
            [c.cast(f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )
    rows = [tuple(r) for r in data]
    arrays = []
    for i, f in enumerate(schema):
        arrays.append(pa.array([r[i] for r in rows], type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_plain_file(
    directory: str,
    columns: Sequence[tuple[str, str]],
    data: Data,
    *,
    file_name: str = PLAIN_FILE_NAME,
    file_format: str = "orc",
    filesystem: pafs.FileSystem | None = None,
    compression: str | None = None,
) -> FileStats | None:
    """Write one plain data file ``<directory>/<file_name>`` of an insert-only table; its
    :class:`FileStats` (no ACID fields), or None when ``data`` has no row.

    ``data``: Arrow data (columns by name, else position; cast to the Hive types' Arrow types,
    ArrowInvalid when that fails) or row tuples. ``file_format``: ``"orc"`` (compression default
    ``zlib``) or ``"parquet"`` (default ``snappy``; timestamps as INT96, which Hive 3 reads).
    NotImplementedError for ``textfile``.
    """
    fmt = file_format.lower()
    table = _arrow_table(data, columns)
    if table.num_rows == 0:
        return None
    fs, dir_path = resolve_location(directory, filesystem)
    fs.create_dir(dir_path, recursive=True)
    path = _join(dir_path, file_name)
    try:
        with fs.open_output_stream(path, compression=None) as out:
            if fmt == "orc":
                po.write_table(table, out, compression=(compression or "zlib"))
            elif fmt == "parquet":
                pq.write_table(
                    table, out, compression=(compression or "snappy"), use_deprecated_int96_timestamps=True
                )
            else:
                raise NotImplementedError(f"writing {file_format} files of insert-only tables")
            length = out.tell()
    except BaseException:
        try:
            fs.delete_file(path)
        except Exception:
            pass
        raise
    return FileStats(
        path=path,
        length=length,
        rows=table.num_rows,
        inserts=table.num_rows,
        updates=0,
        deletes=0,
        stripes=0,
        key_index=(),
        min_write_id=0,
        max_write_id=0,
        bucket_id=0,
        statement_id=0,
    )


# --- statement layer ---------------------------------------------------------------------------


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


def partition_value_text(value: Any) -> str:
    """A partition value as Hive stores it: None/"" -> ``__HIVE_DEFAULT_PARTITION__``, booleans
    ``true``/``false``, dates ``yyyy-MM-dd``, timestamps ``yyyy-MM-dd HH:mm:ss[.fff]``, anything
    else ``str()``."""
    if value is None or value == "":
        return DEFAULT_PARTITION_NAME
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return str(value.replace(tzinfo=None))
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


@dataclass
class _Target:
    """The files of one partition (or of the unpartitioned table) in one statement."""

    values: tuple[str, ...]
    name: str  # Hive partition name, "" for an unpartitioned table
    rows: Any = None  # pa.Table or list of tuples (inserts)
    keys: list[tuple[int, int, int]] | None = None  # deletes
    location: str | None = None


class AcidWriter:
    """INSERT / DELETE / UPDATE on one transactional table of a metastore.

    ``client``: a connected :class:`MetastoreClient` (used from this thread only). ``db``/``table``:
    the table (must be transactional: ValueError otherwise; NotImplementedError for bucketed
    tables). ``shared_write``: Hive's ``hive.txn.xlock.write=false`` lock choice (see the module
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
        self.client = client
        self.db = db.lower()
        self.table_name = table.lower()
        self.shared_write = shared_write
        self.lock_timeout_s = lock_timeout_s
        self.filesystem = filesystem
        self._compression = compression
        self.stripe_size = stripe_size
        self.agent_info = agent_info
        self._statements: dict[int, int] = {}
        self.table: Table = self.refresh()

    # ------------------------------------------------------------------ table metadata
    def refresh(self) -> Table:
        """Reload the table from the metastore (after DDL) and check it can be written."""
        t = self.client.call("get_table", self.db, self.table_name, idempotent=True)
        if not is_transactional(t):
            raise ValueError(f"{self.db}.{self.table_name} is not a transactional table")
        if t.sd is not None and (t.sd.numBuckets or 0) > 0 and t.sd.bucketCols:
            raise NotImplementedError(
                f"{self.db}.{self.table_name} is bucketed (CLUSTERED BY): not supported"
            )
        self.table = t
        self.insert_only = is_insert_only(t)
        self.file_format = table_file_format(t)
        self.columns = [(c.name, c.type) for c in t.sd.cols]
        self.partition_keys = [k.name for k in (t.partitionKeys or [])]
        return t

    @property
    def full_name(self) -> str:
        """``db.table``."""
        return f"{self.db}.{self.table_name}"

    def compression(self) -> str:
        """The codec files are written with."""
        if self._compression:
            return self._compression
        params = self.table.parameters or {}
        if self.file_format == "parquet":
            return params.get("parquet.compression", "snappy").lower()
        return params.get("orc.compress", "zlib").lower()

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
        """Hive's name of a partition (escaped ``k=v/k2=v2``)."""
        return make_part_name(self.partition_keys, list(values))

    # ------------------------------------------------------------------ public DML
    def insert(
        self, data: Data, partition: PartitionSpec | None = None, *, txn_id: int | None = None
    ) -> WriteResult:
        """INSERT ``data`` (row tuples in column order, or Arrow data with columns by name).

        Partitioned tables: with ``partition`` (static) the rows hold the data columns only;
        without, each row also carries the partition key values after the data columns (Arrow:
        the partition key columns by name, else the last ones) and rows go to their partitions
        (dynamic partitioning). Missing partitions are created. Full ACID: one
        ``delta_<w>_<w>_<stmt>/bucket_00000`` per partition; insert-only: ``000000_0``.
        """
        targets = self._insert_targets(data, partition)
        dynamic = bool(self.partition_keys) and partition is None
        return self._run(INSERT_OP, targets, [], dynamic, txn_id)

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
        self._check_full_acid(DELETE_OP)
        targets = self._delete_targets(row_ids, partition)
        return self._run(DELETE_OP, [], targets, False, txn_id)

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
        ``delete_delta_<w>_<w>_<stmt>/`` + ``delta_<w>_<w>_<stmt>/``. Full-ACID tables only."""
        self._check_full_acid(UPDATE_OP)
        deletes = self._delete_targets(row_ids, partition)
        inserts = self._insert_targets(data, partition)
        return self._run(UPDATE_OP, inserts, deletes, False, txn_id)

    def _check_full_acid(self, op: str) -> None:
        if self.insert_only:
            raise NotImplementedError(
                f"{op.upper()} on insert-only table {self.full_name} (Hive does not allow it)"
            )

    # ------------------------------------------------------------------ grouping
    def _insert_targets(self, data: Data, partition: PartitionSpec | None) -> list[_Target]:
        keys = self.partition_keys
        names = [n for n, _ in self.columns]
        if not keys:
            if partition is not None:
                raise ValueError(f"{self.full_name} is not partitioned")
            return [_Target((), "", rows=data)]
        if partition is not None:
            values = self.partition_values(partition)
            return [_Target(values, self.partition_name(values), rows=data)]
        groups: dict[tuple[str, ...], Any] = {}
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, pa.Table):
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
            idx: dict[tuple[str, ...], list[int]] = {}
            key_values = [c.to_pylist() for c in key_cols]
            for i, vals in enumerate(zip(*key_values, strict=True)):
                idx.setdefault(tuple(partition_value_text(v) for v in vals), []).append(i)
            for values, positions in idx.items():
                groups[values] = body.take(pa.array(positions, type=pa.int64()))
        else:
            n = len(names)
            for row in data:
                row = tuple(row)
                if len(row) != n + len(keys):
                    raise ValueError(
                        f"dynamic partition insert rows need {n + len(keys)} values, got {len(row)}"
                    )
                values = tuple(partition_value_text(v) for v in row[n:])
                groups.setdefault(values, []).append(row[:n])
        return [_Target(v, self.partition_name(v), rows=rows) for v, rows in sorted(groups.items())]

    def _delete_targets(
        self, row_ids: Iterable[Sequence[Any]] | pa.Table, partition: PartitionSpec | None
    ) -> list[_Target]:
        keys = self.partition_keys
        static: tuple[str, ...] | None = None
        if keys and partition is not None:
            static = self.partition_values(partition)
        elif not keys and partition is not None:
            raise ValueError(f"{self.full_name} is not partitioned")
        groups: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
        if isinstance(row_ids, pa.RecordBatch):
            row_ids = pa.Table.from_batches([row_ids])
        if isinstance(row_ids, pa.Table):
            ids = orcfile.arrow_keys(row_ids)
            if keys and static is None:
                lower = [n.lower() for n in row_ids.schema.names]
                missing = [k for k in keys if k not in lower]
                if missing:
                    raise ValueError(f"delete keys need partition columns {missing} (or a static partition)")
                cols = [row_ids.column(lower.index(k)).to_pylist() for k in keys]
                for key, vals in zip(ids, zip(*cols, strict=True), strict=True):
                    groups.setdefault(tuple(partition_value_text(v) for v in vals), []).append(key)
            else:
                groups[static or ()] = ids
        else:
            for item in row_ids:
                item = tuple(item)
                if len(item) == 3:
                    if keys and static is None:
                        raise ValueError(
                            "a partitioned table needs a partition per key or a static partition"
                        )
                    part = static or ()
                elif len(item) == 4 and keys:
                    part = self.partition_values(item[3])
                else:
                    raise ValueError(
                        f"bad ROW__ID {item!r}: (originalTransaction, bucket, rowId[, partition])"
                    )
                groups.setdefault(part, []).append((int(item[0]), int(item[1]), int(item[2])))
        out = []
        for values, ks in sorted(groups.items()):
            out.append(_Target(values, self.partition_name(values) if keys else "", keys=ks))
        return out

    # ------------------------------------------------------------------ locks and partitions
    def _lock_components(self, op: str, targets: Sequence[_Target], dynamic: bool) -> list[LockComponent]:
        if op == INSERT_OP:
            lock_type = LockType.SHARED_WRITE if self.shared_write else LockType.SHARED_READ
            operation = DataOperationType.INSERT
        else:
            lock_type = LockType.SHARED_WRITE if self.shared_write else LockType.EXCL_WRITE
            operation = DataOperationType.UPDATE if op == UPDATE_OP else DataOperationType.DELETE
        if not self.partition_keys or dynamic:
            comp = lock_component(self.db, self.table_name, None, lock_type, operation)
            if dynamic:
                comp.isDynamicPartitionWrite = True
            return [comp]
        names = sorted({t.name for t in targets})
        return [lock_component(self.db, self.table_name, n, lock_type, operation) for n in names]

    def partition_location(self, values: Sequence[str], create: bool = True) -> str:
        """The location of the partition with these values (strings, key order; see
        :meth:`partition_values`). A missing partition is created when ``create`` (the table's
        storage descriptor at the metastore's default location; a concurrent creation is fine),
        else NoSuchObjectException."""
        try:
            p = self.client.call("get_partition", self.db, self.table_name, list(values), idempotent=True)
        except NoSuchObjectException:
            if not create:
                raise
            sd = copy.deepcopy(self.table.sd)
            base = self.table.sd.location if self.table.sd else None
            sd.location = storage.join_location(base, self.partition_name(values)) if base else None
            part = Partition(
                values=list(values), dbName=self.db, tableName=self.table_name, sd=sd, parameters={}
            )
            try:
                self.client.call("add_partition", part)
            except AlreadyExistsException:
                pass  # created concurrently
            p = self.client.call("get_partition", self.db, self.table_name, list(values), idempotent=True)
        if not p.sd or not p.sd.location:
            raise ValueError(f"partition {self.partition_name(values)} of {self.full_name} has no location")
        return p.sd.location

    def _location(self, target: _Target, create: bool) -> str:
        if not self.partition_keys:
            loc = self.table.sd.location if self.table.sd else None
            if not loc:
                raise ValueError(f"{self.full_name} has no location")
            return loc
        return self.partition_location(target.values, create)

    # ------------------------------------------------------------------ the statement
    def _run(
        self,
        op: str,
        inserts: list[_Target],
        deletes: list[_Target],
        dynamic: bool,
        txn_id: int | None,
    ) -> WriteResult:
        client = self.client
        own = txn_id is None
        if own:
            txn = client.open_txn(agent_info=self.agent_info)
            stmt = 0
        else:
            txn = int(txn_id)  # type: ignore[arg-type]
            stmt = self._statements.get(txn, 0)
            self._statements[txn] = stmt + 1
        hb = Heartbeater(client, client.heartbeat_interval_s, txn_id=txn) if own else None
        written_dirs: list[tuple[pafs.FileSystem, str]] = []
        files: list[FileStats] = []
        commit_attempted = False
        try:
            components = self._lock_components(op, [*deletes, *inserts], dynamic)
            client.lock(components, txn_id=txn, timeout_s=self.lock_timeout_s, agent_info=self.agent_info)
            write_id = client.allocate_write_ids(self.db, self.table_name, [txn])[txn]
            for t in deletes:
                t.location = self._location(t, create=False)
            for t in inserts:
                t.location = self._location(t, create=True)
            deleted = 0
            for t in deletes:
                deleted += self._write_deletes(t, write_id, stmt, written_dirs, files)
            inserted = 0
            for t in inserts:
                inserted += self._write_inserts(t, write_id, stmt, written_dirs, files)
            if dynamic and inserts:
                client.call(
                    "add_dynamic_partitions",
                    AddDynamicPartitions(
                        txnid=txn,
                        writeid=write_id,
                        dbname=self.db,
                        tablename=self.table_name,
                        partitionnames=[t.name for t in inserts],
                        operationType=DataOperationType.INSERT,
                    ),
                )
            if own:
                assert hb is not None
                hb.stop()
                commit_attempted = True
                client.commit_txn(txn)
        except BaseException:
            if hb is not None:
                hb.stop()
            aborted = False
            if own:
                try:
                    client.abort_txn(txn)
                    aborted = True
                except Exception as e:
                    log.warning("could not abort txn %s: %s", txn, getattr(e, "message", e))
            if not commit_attempted or aborted:
                for fs, path in reversed(written_dirs):
                    _remove_dir(fs, path)
            else:
                log.warning("commit of txn %s failed with unknown outcome; keeping its files", txn)
            raise
        return WriteResult(
            operation=op,
            txn_id=txn,
            write_id=write_id,
            statement_id=stmt,
            committed=own,
            partitions=tuple(sorted({t.name for t in [*deletes, *inserts] if t.name})),
            files=tuple(files),
            inserted=inserted,
            deleted=deleted,
        )

    def _new_dir(
        self, location: str, name: str, written_dirs: list[tuple[pafs.FileSystem, str]]
    ) -> tuple[pafs.FileSystem, str]:
        fs, base = resolve_location(location, self.filesystem)
        path = _join(base, name)
        if _exists(fs, path):
            raise FileExistsError(f"{path} exists already (statement id reused in one txn?)")
        written_dirs.append((fs, path))
        fs.create_dir(path, recursive=True)
        return fs, path

    def _bucket_writer(self, fs: pafs.FileSystem, directory: str, bucket_id: int, stmt: int) -> AcidOrcWriter:
        return AcidOrcWriter(
            _join(directory, bucket_file_name(bucket_id)),
            self.columns,
            bucket_id=bucket_id,
            statement_id=stmt,
            filesystem=fs,
            compression=self.compression(),
            stripe_size=self.stripe_size,
        )

    def _write_deletes(
        self,
        t: _Target,
        write_id: int,
        stmt: int,
        written_dirs: list[tuple[pafs.FileSystem, str]],
        files: list[FileStats],
    ) -> int:
        by_bucket: dict[int, list[tuple[int, int, int]]] = {}
        for k in t.keys or []:
            by_bucket.setdefault(decode_bucket_property(k[1])[0], []).append(k)
        if not by_bucket:
            return 0
        assert t.location is not None
        fs, path = self._new_dir(
            t.location, delta_dir_name(write_id, write_id, stmt, delete=True), written_dirs
        )
        write_acid_version_file(fs, path)
        count = 0
        for bucket_id, keys in sorted(by_bucket.items()):
            with self._bucket_writer(fs, path, bucket_id, stmt) as w:
                count += w.delete(keys, write_id)
            assert w.stats is not None
            files.append(w.stats)
        return count

    def _write_inserts(
        self,
        t: _Target,
        write_id: int,
        stmt: int,
        written_dirs: list[tuple[pafs.FileSystem, str]],
        files: list[FileStats],
    ) -> int:
        assert t.location is not None
        fs, path = self._new_dir(t.location, delta_dir_name(write_id, write_id, stmt), written_dirs)
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
                _remove_dir(fs, path)
                return 0
            files.append(stats)
            return stats.rows
        write_acid_version_file(fs, path)
        with self._bucket_writer(fs, path, 0, stmt) as w:
            w.insert(t.rows, write_id)
        assert w.stats is not None
        if w.stats.rows == 0:  # no rows: no delta
            _remove_dir(fs, path)
            return 0
        files.append(w.stats)
        return w.stats.rows
