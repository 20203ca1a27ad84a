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
    ``AcidUtils.OrcAcidVersion.writeVersionFile``) unless it exists."""
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
    fs, dir_path = storage.resolve_location(directory, filesystem)
    fs.create_dir(dir_path, recursive=True)
    path = storage.join_location(dir_path, file_name)
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
