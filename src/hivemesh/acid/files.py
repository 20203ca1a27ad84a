"""Files of Hive ACID deltas, written from Arrow data: no metastore, no transaction (Spark
executors use them too).

:func:`write_bucket_file` writes one ``bucket_N`` file of a full-ACID ``delta_*`` or
``delete_delta_*`` directory (plus its ``_orc_acid_version``, :func:`write_acid_version_file`);
:func:`write_plain_file` writes one plain file (``000000_0``) of an insert-only delta. Row ids
restart at 0 in every file, so a (write id, bucket, statement id) file is deterministic; two
writers must never share one (give each Spark task its own bucket id, as Hive gives each task its
own ``bucket_N``).

Locations are plain paths, ``file:`` URIs or any URI ``pyarrow.fs`` opens (a ``filesystem`` may be
passed instead; see :func:`hivemesh.storage.resolve_location`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pyarrow.parquet as pq
import pyorc

from hivemesh import storage
from hivemesh.acid import orcfile
from hivemesh.acid.names import ACID_VERSION_FILE, ORC_ACID_VERSION, bucket_file_name
from hivemesh.acid.orc_columnar import open_insert_writer
from hivemesh.acid.orcfile import AcidOrcWriter, FileStats

PLAIN_FILE_NAME = "000000_0"  # Hive's first task file name (taskId_attempt) in insert-only deltas

#: rows to write: Arrow data (columns by name, else position) or row tuples in column order
Data = pa.Table | pa.RecordBatch | Iterable[Sequence[Any]]


def write_acid_version_file(fs: pafs.FileSystem, directory: str) -> None:
    """Write ``<directory>/_orc_acid_version`` holding ``2`` (Hive
    ``AcidUtils.OrcAcidVersion.writeVersionFile``) unless it exists. Raises OSError when the storage
    refuses."""
    path = storage.join_location(directory, ACID_VERSION_FILE)
    if storage.path_exists(fs, path):
        return
    with fs.open_output_stream(path, compression=None) as out:
        out.write(str(ORC_ACID_VERSION).encode())


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
    ``bucket_id``; they are sorted here. Inserts of types :func:`hivemesh.acid.orc_columnar.
    columnar_supported` accepts are written column by column, others row by row (the same events).
    Raises ValueError for keys of another bucket, pyarrow's ArrowInvalid for values that cannot be
    cast to the column types, OSError for storage errors (a partly written file is removed).
    """
    fs, dir_path = storage.resolve_location(directory, filesystem)
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
    path = storage.join_location(dir_path, bucket_file_name(bucket_id, attempt))
    options: dict[str, Any] = {
        "bucket_id": bucket_id,
        "statement_id": statement_id,
        "filesystem": fs,
        "compression": compression,
        "stripe_size": stripe_size,
    }
    if delete:
        with AcidOrcWriter(path, columns, **options) as w:
            w.delete(keys, write_id)
        return w.stats
    with open_insert_writer(path, columns, **options) as iw:
        for item in itertools.chain([first], items):
            iw.insert(item, write_id)
    return iw.stats


def _timestamp_units(t: pa.DataType) -> set[str]:
    """The units of the timestamps an Arrow type is or holds (struct fields, list items, map keys
    and values); empty when it holds none."""
    if pa.types.is_timestamp(t):
        return {str(t.unit)}
    if pa.types.is_struct(t):
        return set().union(*(_timestamp_units(t.field(i).type) for i in range(t.num_fields)))
    if pa.types.is_map(t):
        return _timestamp_units(t.key_type) | _timestamp_units(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _timestamp_units(t.value_type)
    return set()


def _with_unit(t: pa.DataType, unit: str) -> pa.DataType:
    """``t`` with every timestamp (nested ones too) in ``unit``, time zones kept."""
    if pa.types.is_timestamp(t):
        return pa.timestamp(unit, tz=t.tz)
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(_with_unit(t.field(i).type, unit)) for i in range(t.num_fields)]
        )
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_with_unit(t.key_type, unit)),
            t.item_field.with_type(_with_unit(t.item_type, unit)),
        )
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_with_unit(t.value_type, unit)))
    return t


def _arrow_table(
    data: Data, columns: Sequence[tuple[str, str]], *, wide_timestamps: bool = False
) -> pa.Table:
    """``data`` as an Arrow table with the Arrow types of the Hive ``columns``.

    ``wide_timestamps``: timestamps (nested ones too) keep nanoseconds only when the Arrow data
    has them, else become microseconds (row tuples: nanoseconds, else microseconds when a value
    is out of their range), so years beyond 2262 are kept (for the row-wise ORC writer)."""
    schema = pa.schema([pa.field(n, orcfile.hive_to_arrow_type(t)) for n, t in columns])
    names = [n for n, _ in columns]
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        cols = orcfile.select_columns(data, names)
        if wide_timestamps:
            schema = pa.schema(
                [
                    f if "ns" in _timestamp_units(c.type) else f.with_type(_with_unit(f.type, "us"))
                    for c, f in zip(cols, schema, strict=True)
                ]
            )
        return pa.Table.from_arrays(
            [c.cast(f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )
    rows = [tuple(r) for r in data]
    fields = []
    arrays = []
    for i, f in enumerate(schema):
        values = [r[i] for r in rows]
        try:
            arr = pa.array(values, type=f.type)
        except pa.ArrowInvalid as err:
            if not (wide_timestamps and _timestamp_units(f.type)):
                raise
            arr = _us_array(values, f.type, err)  # out of the nanosecond range (beyond 2262)?
        fields.append(f.with_type(arr.type))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _us_array(values: list[Any], t: pa.DataType, err: Exception) -> pa.Array:
    """``values`` as an array of ``t`` with microsecond timestamps; ``err`` when that fails too."""
    try:
        return pa.array(values, type=_with_unit(t, "us"))
    except pa.ArrowInvalid:
        raise err from None


def _write_orc_rows(out: Any, columns: Sequence[tuple[str, str]], table: pa.Table, compression: str) -> None:
    """Write ``table`` (columns in ``columns`` order) as an ORC file to the stream ``out`` with
    pyorc, as :class:`AcidOrcWriter` writes its rows: values converted by
    :func:`hivemesh.acid.orcfile.arrow_rows` (timestamps as non-negative nanoseconds, writer time
    zone UTC), Hive's stripe, compression block and row index sizes. ``out`` is left open."""
    writer = pyorc.Writer(
        out,
        orcfile.row_schema(columns),
        batch_size=orcfile.DEFAULT_BATCH_SIZE,
        stripe_size=orcfile.DEFAULT_STRIPE_SIZE,
        row_index_stride=orcfile.DEFAULT_ROW_INDEX_STRIDE,
        compression=orcfile._compression(compression),
        compression_block_size=orcfile.DEFAULT_COMPRESSION_BLOCK_SIZE,
        converters=orcfile.CONVERTERS,
    )
    for chunk in orcfile._row_chunks(table, [n for n, _ in columns]):
        writer.writerows(chunk)
    writer.close()


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
    NotImplementedError for ``textfile``. ORC files of tables with timestamps (nested ones too)
    are written row by row with pyorc, as :class:`AcidOrcWriter` writes (Arrow's ORC writer
    stores a time before 1970 with a fraction of a second with negative nanoseconds, which Java
    readers reject, and Arrow's timestamps end in 2262); other ORC files with Arrow's writer.
    """
    fmt = file_format.lower()
    row_wise = fmt == "orc" and any(_timestamp_units(orcfile.hive_to_arrow_type(t)) for _, t in columns)
    table = _arrow_table(data, columns, wide_timestamps=row_wise)
    if table.num_rows == 0:
        return None
    fs, dir_path = storage.resolve_location(directory, filesystem)
    fs.create_dir(dir_path, recursive=True)
    path = storage.join_location(dir_path, file_name)
    try:
        with fs.open_output_stream(path, compression=None) as out:
            if row_wise:
                _write_orc_rows(out, columns, table, compression or "zlib")
            elif fmt == "orc":
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
