"""Read Hive ACID tables and files with pyarrow: listings, raw events, original files, snapshots.

This is the Spark-free reader. The Spark reader (:mod:`hivemesh.spark.acid_reader`) uses it on
executors for the files Spark's own ORC reader cannot take (pre-ACID "original" files, whose row
ids must be synthesized, and streaming files readable only up to their ``_flush_length``), and the
``hiveacid`` data source and tooling use it for whole snapshots.

Shapes: an *event table* has the ACID columns ``operation:int32, originalTransaction:int64,
bucket:int32, rowId:int64, currentTransaction:int64, row:struct<table columns>`` (Hive
``OrcRecordUpdater``; names are made canonical even when a file spells them in lower case).
Locations are plain paths, ``file:`` URIs or any URI ``pyarrow.fs`` opens.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.orc as paorc

from hivemesh import storage
from hivemesh.acid.names import ACID_COLUMNS, DELETE, encode_bucket_property, last_flush_length
from hivemesh.acid.orcfile import hive_to_arrow_type
from hivemesh.acid.selection import DataFile, ListedFile, SnapshotFiles, select_files
from hivemesh.acid.tables import NotTransactionalError, is_insert_only, is_transactional, table_file_format
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList

KEY_COLUMNS = ("originalTransaction", "bucket", "rowId")
_CANONICAL = {name.lower(): name for name in ACID_COLUMNS}
HIVE_TEXT_DELIMITER = "\x01"  # LazySimpleSerDe's default field delimiter (ctrl-A)
HIVE_TEXT_NULL = "\\N"  # LazySimpleSerDe's default null marker


def arrow_row_type(columns: Sequence[tuple[str, str]]) -> pa.StructType:
    """``struct<...>`` Arrow type of a table's ``(name, hive type)`` columns (ValueError on unknown
    types)."""
    return pa.struct([pa.field(name, hive_to_arrow_type(hive_type)) for name, hive_type in columns])


def list_location(location: str, filesystem: pafs.FileSystem | None = None) -> list[ListedFile]:
    """Every file under ``location`` (recursive) as :class:`ListedFile` with paths relative to it.

    An absent location lists as empty (a partition dir not yet written). Raises OSError for other
    storage errors."""
    fs, root = storage.resolve_location(location, filesystem)
    return [ListedFile(path, size) for path, size in storage.list_files(fs, root)]


def flush_length(location: str, data_file: DataFile, filesystem: pafs.FileSystem | None = None) -> int | None:
    """The readable length (bytes) of a streaming file: the last value of its ``_flush_length`` side
    file, or None (read the whole file) when there is no side file or it holds no complete value. A side
    file that vanishes meanwhile (the batch closed) gives None; raises OSError for other storage errors."""
    if data_file.side_file is None:
        return None
    fs, path = storage.resolve_location(storage.join_location(location, data_file.side_file), filesystem)
    try:
        with fs.open_input_stream(path) as f:
            return last_flush_length(f.read())
    except FileNotFoundError:  # the batch closed meanwhile: the file is complete
        return None


def open_orc(
    path: str, *, length: int | None = None, filesystem: pafs.FileSystem | None = None
) -> paorc.ORCFile:
    """An ORC file opened for reading; with ``length`` only its first ``length`` bytes are seen
    (a streaming file cut at its last flushed footer). OSError/ArrowInvalid for unreadable files."""
    fs, real = storage.resolve_location(path, filesystem)
    if length is None:
        return paorc.ORCFile(fs.open_input_file(real))
    with fs.open_input_file(real) as f:
        data = f.read(length)
    return paorc.ORCFile(io.BytesIO(data))


def _canonical_names(table: pa.Table) -> pa.Table:
    names = [
        _CANONICAL.get(n.lower(), n) if len(table.column_names) == len(ACID_COLUMNS) else n
        for n in table.column_names
    ]
    return table.rename_columns(names)


def is_acid_schema(schema: pa.Schema) -> bool:
    """True when ``schema`` has exactly the six ACID event columns (any case), as ORC's
    ``SchemaEvolution.checkAcidSchema`` decides."""
    return [n.lower() for n in schema.names] == [c.lower() for c in ACID_COLUMNS]


def _rename_row(row: pa.ChunkedArray | pa.Array, row_type: pa.StructType) -> pa.Array:
    """Cast a file's ``row`` struct to the table's row type, matching fields by position (Hive maps
    ACID rows positionally; old files name them ``_col0``...)."""
    arr = row.combine_chunks() if isinstance(row, pa.ChunkedArray) else row
    if arr.type.num_fields != row_type.num_fields:
        raise ValueError(f"file row has {arr.type.num_fields} columns, table has {row_type.num_fields}")
    children = [arr.field(i).cast(row_type.field(i).type) for i in range(row_type.num_fields)]
    return pa.StructArray.from_arrays(children, fields=list(row_type), mask=arr.is_null())


def acid_events(
    path: str,
    row_type: pa.StructType,
    *,
    length: int | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """All events of one full-ACID ORC file as an event table whose ``row`` has ``row_type``.
    ValueError when the file has no ACID schema."""
    table = _canonical_names(open_orc(path, length=length, filesystem=filesystem).read())
    if not is_acid_schema(table.schema):
        raise ValueError(f"{path}: not an ACID file (columns {table.column_names})")
    return table.set_column(5, "row", _rename_row(table.column("row"), row_type))


def original_row_count(path: str, filesystem: pafs.FileSystem | None = None) -> int:
    """Rows in an original (pre-ACID) ORC file, from its footer. Raises OSError (FileNotFoundError) when
    the file cannot be read, ``pyarrow.ArrowInvalid`` (a ValueError) when it is not ORC."""
    return open_orc(path, filesystem=filesystem).nrows


def original_events(
    path: str,
    row_type: pa.StructType,
    bucket_id: int,
    first_row_id: int,
    *,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """An original (pre-ACID) ORC file as insert events with synthesized row ids (Hive
    ``OrcRawRecordMerger.OriginalReaderPair``): ``originalTransaction`` = ``currentTransaction`` =
    0, ``bucket`` = BucketCodec V1 of ``bucket_id`` (statement 0), ``rowId`` = ``first_row_id`` +
    position. Columns are matched to ``row_type`` by position. Raises ValueError when the file's column
    count differs from ``row_type`` (or it is not ORC: ``pyarrow.ArrowInvalid``), ``pyarrow.ArrowInvalid``
    when a column does not cast, OSError when it cannot be read."""
    table = open_orc(path, filesystem=filesystem).read()
    n = table.num_rows
    if table.num_columns != row_type.num_fields:
        raise ValueError(f"{path}: {table.num_columns} columns, table has {row_type.num_fields}")
    children = [
        table.column(i).combine_chunks().cast(row_type.field(i).type) for i in range(row_type.num_fields)
    ]
    row = pa.StructArray.from_arrays(children, fields=list(row_type)) if n else pa.array([], row_type)
    return pa.table(
        {
            "operation": pa.array([0] * n, pa.int32()),
            "originalTransaction": pa.array([0] * n, pa.int64()),
            "bucket": pa.array([encode_bucket_property(bucket_id)] * n, pa.int32()),
            "rowId": pa.array(range(first_row_id, first_row_id + n), pa.int64()),
            "currentTransaction": pa.array([0] * n, pa.int64()),
            "row": row,
        }
    )


@dataclass(frozen=True)
class OriginalFileInfo:
    """What a reader needs from an original (pre-ACID) file's footer: ``first_row_id``, its
    first synthesized row id (rows of the earlier files of its bucket); ``rows``, its row count;
    ``column_names``, its top-level ORC column names (Hive matches them to the table's columns by
    position)."""

    first_row_id: int
    rows: int
    column_names: tuple[str, ...]


def original_files_info(
    location: str, originals: Sequence[DataFile], filesystem: pafs.FileSystem | None = None
) -> list[OriginalFileInfo]:
    """:class:`OriginalFileInfo` of each original file, same order as ``originals`` (which
    :func:`select_files` returns in Hive's (bucket, path) order). Reads each file's footer only;
    OSError/ArrowInvalid for unreadable files."""
    out, seen = [], {}
    for f in originals:
        bucket = f.bucket_id if f.bucket_id is not None else -1
        start = seen.get(bucket, 0)
        orc = open_orc(storage.join_location(location, f.path), filesystem=filesystem)
        out.append(OriginalFileInfo(start, orc.nrows, tuple(orc.schema.names)))
        seen[bucket] = start + orc.nrows
    return out


def original_row_id_starts(
    location: str, originals: Sequence[DataFile], filesystem: pafs.FileSystem | None = None
) -> list[int]:
    """First synthesized row id of each original file (same order as ``originals``, which
    :func:`select_files` returns in Hive's (bucket, path) order): the rows of the earlier files of
    the same bucket. Reads the originals' footers: raises OSError when one cannot be read,
    ``pyarrow.ArrowInvalid`` when one is not ORC."""
    return [info.first_row_id for info in original_files_info(location, originals, filesystem)]


def write_id_mask(values: pa.Array | pa.ChunkedArray, write_ids: ValidWriteIdList) -> pa.Array:
    """Boolean mask: which write ids in ``values`` are valid (committed) in ``write_ids``
    (``<= highWatermark`` and not open/aborted)."""
    mask = pc.less_equal(values, pa.scalar(write_ids.high_watermark, pa.int64()))
    invalid = [w for w in write_ids.exceptions if w <= write_ids.high_watermark]
    if invalid:
        mask = pc.and_(mask, pc.invert(pc.is_in(values, value_set=pa.array(invalid, pa.int64()))))
    return mask


def delete_keys(
    location: str,
    delete_files: Iterable[DataFile],
    write_ids: ValidWriteIdList,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """ROW__IDs deleted in the snapshot: ``(originalTransaction, bucket, rowId)`` of the delete
    events in ``delete_files`` whose deleting write id (``currentTransaction``) is valid. Raises OSError
    when a delete file cannot be read, ``pyarrow.ArrowInvalid`` when one is not ORC."""
    parts = []
    for f in delete_files:
        fs, path = storage.resolve_location(storage.join_location(location, f.path), filesystem)
        table = _canonical_names(paorc.ORCFile(fs.open_input_file(path)).read(columns=None))
        table = table.filter(
            pc.and_(
                pc.equal(table["operation"], DELETE), write_id_mask(table["currentTransaction"], write_ids)
            )
        )
        parts.append(table.select(list(KEY_COLUMNS)))
    if not parts:
        return pa.table(_empty_keys())
    return pa.concat_tables(parts).group_by(list(KEY_COLUMNS)).aggregate([])


def apply_snapshot(
    events: pa.Table, deleted: pa.Table | None, write_ids: ValidWriteIdList | None
) -> pa.Table:
    """Drop from an event table the non-insert events, the rows of write ids invalid in
    ``write_ids`` (None: no check) and the rows whose ROW__ID is in ``deleted``."""
    mask = pc.not_equal(events["operation"], DELETE)
    if write_ids is not None:
        mask = pc.and_(mask, write_id_mask(events["currentTransaction"], write_ids))
    events = events.filter(mask)
    if deleted is not None and deleted.num_rows and events.num_rows:
        keys = events.select(list(KEY_COLUMNS)).append_column(
            "__pos", pa.array(range(events.num_rows), pa.int64())
        )
        kept = keys.join(deleted, keys=list(KEY_COLUMNS), join_type="left anti", use_threads=True)
        positions = kept["__pos"]
        events = events.take(pc.take(positions, pc.sort_indices(positions)))
    return events


@dataclass(frozen=True)
class TableLayout:
    """What the Spark-free reader needs to know of a table: ``columns`` ``(name, hive type)``,
    ``insert_only`` and, for insert-only tables, ``file_format`` (``orc``, ``parquet``, ``text``)
    and the text field delimiter."""

    columns: tuple[tuple[str, str], ...]
    insert_only: bool = False
    file_format: str = "orc"
    field_delimiter: str = HIVE_TEXT_DELIMITER


_FORMATS = {"orc": "orc", "parquet": "parquet", "textfile": "text"}


def table_layout(table: Any) -> TableLayout:
    """:class:`TableLayout` of a metastore Table: its columns, full ACID or insert-only and, for
    insert-only, the file format and the text field delimiter (SerDe ``field.delim``, a character
    or its decimal code). NotTransactionalError when the table is not transactional; ValueError
    for an unsupported storage format."""
    if not is_transactional(table):
        raise NotTransactionalError(f"{table.dbName}.{table.tableName} is not transactional")
    columns = tuple((c.name, c.type) for c in table.sd.cols)
    if not is_insert_only(table):
        return TableLayout(columns)
    fmt = _FORMATS[table_file_format(table)]
    serde = table.sd.serdeInfo
    params = (serde.parameters if serde is not None else None) or {}
    delimiter = params.get("field.delim") or params.get("serialization.format") or HIVE_TEXT_DELIMITER
    if fmt == "text" and delimiter.isdigit() and len(delimiter) <= 3:
        delimiter = chr(int(delimiter))
    return TableLayout(columns, insert_only=True, file_format=fmt, field_delimiter=delimiter)


def read_plain_file(path: str, layout: TableLayout, filesystem: pafs.FileSystem | None = None) -> pa.Table:
    """One data file of an insert-only table (ORC, Parquet or Hive text), cast to the table's
    columns by position. Raises ValueError for a file format other than ORC, Parquet or text and for a file
    whose column count differs from the table's; ``pyarrow.ArrowInvalid`` (a ValueError) for a file that
    does not parse or a value that does not cast; OSError when it cannot be read."""
    row_type = arrow_row_type(layout.columns)
    fs, real = storage.resolve_location(path, filesystem)
    fmt = layout.file_format
    if fmt == "orc":
        table = paorc.ORCFile(fs.open_input_file(real)).read()
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(real, filesystem=fs)
    elif fmt == "text":
        import pyarrow.csv as pacsv

        with fs.open_input_stream(real) as f:
            table = pacsv.read_csv(
                f,
                read_options=pacsv.ReadOptions(column_names=[n for n, _ in layout.columns]),
                parse_options=pacsv.ParseOptions(delimiter=layout.field_delimiter, quote_char=False),
                convert_options=pacsv.ConvertOptions(
                    null_values=[HIVE_TEXT_NULL],
                    strings_can_be_null=True,
                    column_types={
                        n: f.type for n, f in zip((c for c, _ in layout.columns), row_type, strict=True)
                    },
                ),
            )
    else:
        raise ValueError(f"unsupported insert-only file format {fmt!r} (orc, parquet, text)")
    if table.num_columns != row_type.num_fields:
        raise ValueError(f"{path}: {table.num_columns} columns, table has {row_type.num_fields}")
    return pa.table(
        [table.column(i).cast(row_type.field(i).type) for i in range(row_type.num_fields)],
        schema=pa.schema(list(row_type)),
    )


def read_snapshot_files(
    location: str,
    files: SnapshotFiles,
    write_ids: ValidWriteIdList,
    layout: TableLayout,
    *,
    with_row_ids: bool = False,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """The rows of one table/partition location under a snapshot whose files were chosen by
    :func:`select_files`: table columns, plus ``originalTransaction``, ``bucket``, ``rowId``
    first when ``with_row_ids`` (full ACID only). Raises ValueError for ``with_row_ids`` on an insert-only
    table and what the file readers raise (:func:`read_plain_file`, :func:`delete_keys`: OSError,
    ``pyarrow.ArrowInvalid``)."""
    row_type = arrow_row_type(layout.columns)
    schema = pa.schema(list(row_type))
    if layout.insert_only:
        if with_row_ids:
            raise ValueError("insert-only tables have no row ids")
        parts = [
            read_plain_file(storage.join_location(location, f.path), layout, filesystem)
            for f in files.data_files
        ]
        return pa.concat_tables(parts) if parts else schema.empty_table()
    events = _snapshot_events(location, files, row_type, filesystem)
    if not events:
        empty = schema.empty_table()
        return pa.table(_empty_keys() | {n: empty[n] for n in empty.column_names}) if with_row_ids else empty
    table = pa.concat_tables(events)
    deleted = delete_keys(location, files.delete_files, write_ids, filesystem) if files.delete_files else None
    table = apply_snapshot(table, deleted, write_ids)
    row = table["row"].combine_chunks()
    columns = {field.name: row.field(i) for i, field in enumerate(row_type)}
    if with_row_ids:
        columns = {k: table[k] for k in KEY_COLUMNS} | columns
    return pa.table(columns)


def _snapshot_events(
    location: str, files: SnapshotFiles, row_type: pa.StructType, filesystem: pafs.FileSystem | None
) -> list[pa.Table]:
    """The event tables of a full-ACID snapshot's files: its original files (row ids synthesized)
    first, then its base and delta files (each cut at its flushed length)."""
    starts = original_row_id_starts(location, files.original_files, filesystem)
    events = [
        original_events(
            storage.join_location(location, f.path), row_type, f.bucket_id or 0, start, filesystem=filesystem
        )
        for f, start in zip(files.original_files, starts, strict=True)
    ]
    for f in files.data_files:
        if f.directory is None:  # an original file: read above
            continue
        length = flush_length(location, f, filesystem)
        path = storage.join_location(location, f.path)
        events.append(acid_events(path, row_type, length=length, filesystem=filesystem))
    return events


def _empty_keys() -> dict[str, pa.Array]:
    """Empty ROW__ID columns."""
    return {
        "originalTransaction": pa.array([], pa.int64()),
        "bucket": pa.array([], pa.int32()),
        "rowId": pa.array([], pa.int64()),
    }


def read_acid_location(
    location: str,
    write_ids: ValidWriteIdList | str,
    layout: TableLayout,
    *,
    txns: ValidTxnList | str | None = None,
    with_row_ids: bool = False,
    filesystem: pafs.FileSystem | None = None,
) -> pa.Table:
    """List ``location``, choose its files under ``write_ids`` (format: Hive
    ValidReaderWriteIdList.writeToString, e.g. ``db.t:4:9223372036854775807::``) and read them.
    Raises NotEnoughHistoryError when the snapshot is older than the oldest compacted base."""
    if isinstance(write_ids, str):
        write_ids = ValidWriteIdList.parse(write_ids)
    if isinstance(txns, str):
        txns = ValidTxnList.parse(txns)
    files = select_files(list_location(location, filesystem), write_ids, txns, insert_only=layout.insert_only)
    return read_snapshot_files(
        location, files, write_ids, layout, with_row_ids=with_row_ids, filesystem=filesystem
    )


def schema_from_files(location: str, files: SnapshotFiles) -> list[tuple[str, str]]:
    """``(name, hive type)`` columns of a snapshot's data: the ``row`` struct of its first ACID
    file, else the columns of its first original file. ValueError when it has no files."""
    for f in (*files.data_files, *files.delete_files):
        if f.directory is None:
            continue
        fs, real = storage.resolve_location(storage.join_location(location, f.path))
        row = paorc.ORCFile(fs.open_input_file(real)).schema.field(5).type
        return [(field.name, _hive_type_of(field.type)) for field in row]
    for f in files.original_files:
        fs, real = storage.resolve_location(storage.join_location(location, f.path))
        return [
            (field.name, _hive_type_of(field.type))
            for field in paorc.ORCFile(fs.open_input_file(real)).schema
        ]
    raise ValueError(f"{location}: no files to take the schema from; pass schema=")


def _hive_type_of(t: pa.DataType) -> str:
    simple = {
        pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
        pa.float32(): "float", pa.float64(): "double", pa.string(): "string", pa.bool_(): "boolean",
        pa.binary(): "binary", pa.date32(): "date",
    }  # fmt: skip
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t):
        return f"array<{_hive_type_of(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{_hive_type_of(t.key_type)},{_hive_type_of(t.item_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{_hive_type_of(f.type)}" for f in t) + ">"
    raise ValueError(f"no Hive type for Arrow type {t}")
