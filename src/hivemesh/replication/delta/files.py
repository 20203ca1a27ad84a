"""Source data files as Delta data files: one *unit* per source file.

A unit is one data file of a Hive table or partition location together with what decides its
rows: for a plain table the file's path, size and modification time; for an ACID table also the
snapshot's delete events that hit it, its flushed length (streaming files) and whether rows of
invalid write ids are filtered out. The unit's *key* (16 hex digits of a SHA-1 of all that) names
the Parquet file it becomes (``hm-<key>.parquet``), so the Delta log itself records which source
state each replica file holds: a sync adds the units whose key the replica lacks and removes the
replica files whose key the source no longer has. A change therefore costs the files it touched,
never the table; a crashed sync leaves at most unreferenced Parquet files, and a repeated one finds
nothing to do.

Reading: ORC and text files map columns by position (as Hive does), Parquet files by name; columns
a file lacks (added after it was written) read as nulls. Avro is not supported yet.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.orc as paorc
import pyarrow.parquet as pq

from hivemesh import storage
from hivemesh.acid.arrow_reader import (
    HIVE_TEXT_DELIMITER,
    HIVE_TEXT_NULL,
    KEY_COLUMNS,
    acid_events,
    apply_snapshot,
    arrow_row_type,
    delete_keys,
    flush_length,
    original_events,
    original_row_id_starts,
)
from hivemesh.acid.names import BASE
from hivemesh.acid.selection import DataFile, ListedFile, SnapshotFiles, select_files
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList
from hivemesh.storage.copy import is_temporary

__all__ = [
    "FileLayout",
    "Unit",
    "acid_units",
    "plain_units",
    "read_unit",
    "replica_file_name",
    "unit_key_of",
    "write_unit",
]

_NAME = re.compile(r"^hm-([0-9a-f]{16})\.parquet$")


@dataclass(frozen=True)
class FileLayout:
    """How to read a table's files: ``columns`` ``(name, hive type)`` in table order, the target
    Arrow ``schema`` of those columns, ``file_format`` (``orc``, ``parquet``, ``textfile``), the
    text field delimiter, and ``acid``: ``"full"``, ``"insert_only"`` or None (not
    transactional)."""

    columns: tuple[tuple[str, str], ...]
    schema: pa.Schema
    file_format: str = "orc"
    field_delimiter: str = HIVE_TEXT_DELIMITER
    acid: str | None = None


@dataclass(frozen=True)
class Unit:
    """One source data file to hold in the replica.

    ``location``: the table or partition location it is under; ``path``: relative to it;
    ``size``: bytes; ``key``: see the module docstring. ACID units also carry the
    :class:`DataFile` chosen by the snapshot, the ROW__IDs deleted from it, the snapshot's write
    ids, and for an original file the first synthesized row id."""

    location: str
    path: str
    size: int
    key: str
    data_file: DataFile | None = None
    deleted: pa.Table | None = None
    write_ids: ValidWriteIdList | None = None
    row_id_start: int = 0


def _key(*parts: object) -> str:
    return hashlib.sha1("|".join(str(p) for p in parts).encode()).hexdigest()[:16]


def replica_file_name(key: str) -> str:
    """The Parquet file name of the unit with ``key``."""
    return f"hm-{key}.parquet"


def unit_key_of(path: str) -> str | None:
    """The unit key a replica file path names, None for a file hivemesh did not write."""
    m = _NAME.match(path.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def _hidden(rel: str) -> bool:
    return any(part.startswith(("_", ".")) or is_temporary(part) for part in rel.split("/"))


def plain_units(location: str, fs: pafs.FileSystem, root: str) -> list[Unit]:
    """The units of a non-transactional table or partition directory (``root`` on ``fs``; an
    absent directory has none): every visible file, keyed by path, size and mtime (ns). Raises OSError for
    a storage error."""
    if not storage.path_exists(fs, root):
        return []
    out = []
    for info in storage.list_dir(fs, root, recursive=True):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(root.rstrip("/")) + 1 :]
        if _hidden(rel) or info.size == 0:
            continue
        out.append(Unit(location, rel, info.size, _key("plain", rel, info.size, info.mtime_ns)))
    return sorted(out, key=lambda u: u.path)


def _bucket_ids(bucket: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Bucket ids of BucketCodec V1 ``bucket`` values (bits 27-16)."""
    return pc.bit_wise_and(pc.shift_right(bucket, 16), pa.scalar(0xFFF, pa.int32()))


def _deletes_of(f: DataFile, deleted: pa.Table, bucket_ids: pa.Array) -> pa.Table:
    """The deleted ROW__IDs that may be rows of ``f``: same bucket, and an original transaction
    inside what ``f`` holds (0 for an original file, up to the base's write id for a base, the
    delta's write-id range for a delta). Over-inclusion only costs a rewrite of ``f``."""
    if not deleted.num_rows:
        return deleted
    otx = deleted["originalTransaction"]
    mask = pc.equal(bucket_ids, pa.scalar(f.bucket_id if f.bucket_id is not None else -1, pa.int32()))
    if f.bucket_id is None:
        mask = pc.is_valid(otx)  # unknown bucket: every delete may hit it
    d = f.directory
    if d is None:
        mask = pc.and_(mask, pc.equal(otx, 0))
    elif d.kind == BASE:
        mask = pc.and_(mask, pc.less_equal(otx, d.max_write_id))
    else:
        mask = pc.and_(
            mask, pc.and_(pc.greater_equal(otx, d.min_write_id), pc.less_equal(otx, d.max_write_id))
        )
    return deleted.filter(mask)


def _digest(table: pa.Table) -> str:
    if not table.num_rows:
        return "0"
    ordered = table.sort_by([(c, "ascending") for c in KEY_COLUMNS])
    h = hashlib.sha1()
    for c in KEY_COLUMNS:
        h.update(ordered[c].combine_chunks().to_numpy(zero_copy_only=False).tobytes())
    return f"{table.num_rows}:{h.hexdigest()[:16]}"


def acid_units(
    location: str,
    listing: Sequence[ListedFile],
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None,
    layout: FileLayout,
    fs: pafs.FileSystem,
) -> list[Unit]:
    """The units of a transactional table or partition at the snapshot ``write_ids`` (format:
    Hive ValidReaderWriteIdList), its files chosen as Hive's reader chooses them; ``listing``:
    the location's recursive listing. Delete events are read once per call (their cost is the
    delete deltas' size) and attributed to the files they may hit. Raises NotEnoughHistoryError
    when the snapshot is older than the oldest base."""
    insert_only = layout.acid == "insert_only"
    files: SnapshotFiles = select_files(listing, write_ids, txns, insert_only=insert_only)
    snapshot = write_ids.to_string().split(":", 1)[1]
    if insert_only:
        return [
            Unit(location, f.path, f.size, _key("insert_only", f.path, f.size), f, None, write_ids)
            for f in files.data_files
        ]
    deleted = delete_keys(location, files.delete_files, write_ids, fs) if files.delete_files else None
    if deleted is not None and deleted.num_rows:
        bucket_ids = _bucket_ids(deleted["bucket"])
    else:
        deleted, bucket_ids = None, pa.array([], pa.int32())
    starts = dict(
        zip(
            (f.path for f in files.original_files),
            original_row_id_starts(location, files.original_files, fs),
            strict=True,
        )
    )
    out = []
    for f in files.data_files:
        mine = _deletes_of(f, deleted, bucket_ids) if deleted is not None else None
        length = flush_length(location, f, fs) if f.side_file else None
        filtered = snapshot if f.write_id_filter else ""
        key = _key(
            "acid",
            f.path,
            f.size,
            length,
            filtered,
            starts.get(f.path, 0),
            _digest(mine) if mine is not None else "0",
        )
        out.append(Unit(location, f.path, f.size, key, f, mine, write_ids, starts.get(f.path, 0)))
    return out


def java_double_string(x: float | None) -> str | None:
    """``x`` as Java's ``Double.toString`` writes it (what Hive shows when a float/double column
    is read as a string): ``10.0``, ``1.0E7``, ``1.0E-4``, ``NaN``, ``Infinity``."""
    if x is None:
        return None
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(float(x))
    import numpy as np

    mantissa, exponent = np.format_float_scientific(x, unique=True, trim="0").split("e")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}E{int(exponent)}"


def _cast(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    """Hive's conversion of a file's column to the table's type (Arrow's cast, except floating
    point to string, written as Java does)."""
    if pa.types.is_floating(col.type) and pa.types.is_string(to):
        return pa.chunked_array([pa.array([java_double_string(v) for v in col.to_pylist()], pa.string())])
    return col.cast(to, safe=False)


def _conform(table: pa.Table, layout: FileLayout, by_name: bool) -> pa.Table:
    """``table`` with exactly the layout's columns and types: by name or by position, missing
    columns as nulls, extra ones dropped."""
    arrays = []
    lower = {n.lower(): i for i, n in enumerate(table.column_names)}
    for i, field in enumerate(layout.schema):
        idx = lower.get(field.name.lower()) if by_name else (i if i < table.num_columns else None)
        if idx is None:
            arrays.append(pa.nulls(table.num_rows, field.type))
            continue
        col = table.column(idx)
        if col.type != field.type:
            col = _cast(col, field.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=layout.schema)


def _read_plain(path: str, layout: FileLayout, fs: pafs.FileSystem) -> pa.Table:
    fmt = layout.file_format
    if fmt == "orc":
        return _conform(paorc.ORCFile(fs.open_input_file(path)).read(), layout, by_name=False)
    if fmt == "parquet":
        return _conform(pq.read_table(path, filesystem=fs), layout, by_name=True)
    if fmt == "textfile":
        with fs.open_input_stream(path) as f:
            return _read_text(f.read(), layout)
    raise ValueError(f"unsupported file format {fmt!r} (orc, parquet, textfile)")


_MISSING = "\ufffe"  # marks a field a text row does not have (it reads as NULL, as in Hive)


def _parse(strings: pa.Array, to: pa.DataType) -> pa.Array:
    """Hive text values as ``to``: Arrow's cast; a value it cannot parse becomes NULL (as Hive
    reads it), one by one only when the whole-column cast fails."""
    if pa.types.is_string(to):
        return strings
    if pa.types.is_boolean(to):
        lowered = pc.utf8_lower(strings)
        return pc.if_else(
            pc.equal(lowered, "true"), True, pc.if_else(pc.equal(lowered, "false"), False, None)
        )
    try:
        return strings.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for v in strings.to_pylist():
            try:
                out.append(pa.array([v], pa.string()).cast(to)[0].as_py() if v is not None else None)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                out.append(None)
        return pa.array(out, to)


def _read_text(data: bytes, layout: FileLayout) -> pa.Table:
    """A LazySimpleSerDe text file: one row per line, fields split at the field delimiter by
    position; a row with fewer fields has NULLs after them (columns added later), extra fields
    are ignored, ``\\N`` is NULL. Nested column types are not read (ValueError)."""
    if any(pa.types.is_nested(f.type) for f in layout.schema):
        raise ValueError("text tables with array, map or struct columns are not read yet")
    text = data.decode("utf-8", errors="replace")
    if text.endswith("\n"):
        text = text[:-1]
    if not text:
        return layout.schema.empty_table()
    lines = pc.list_flatten(pc.split_pattern(pa.array([text]), "\n"))
    lines = pc.replace_substring_regex(lines, "\r$", "")
    n = len(layout.schema)
    padded = pc.binary_join_element_wise(lines, (layout.field_delimiter + _MISSING) * n, "")
    fields = pc.split_pattern(padded, layout.field_delimiter)
    arrays = []
    for i, field in enumerate(layout.schema):
        values = pc.list_element(fields, i)
        values = pc.if_else(
            pc.or_(pc.equal(values, _MISSING), pc.equal(values, HIVE_TEXT_NULL)), None, values
        )
        arrays.append(_parse(values, field.type))
    return pa.Table.from_arrays(arrays, schema=layout.schema)


def read_unit(unit: Unit, layout: FileLayout, fs: pafs.FileSystem, root: str) -> pa.Table:
    """The rows ``unit`` contributes to the snapshot, as the layout's schema (``root``: the
    unit's location on ``fs``). Raises ValueError for a file format other than ORC, Parquet and text,
    ``pyarrow.ArrowInvalid`` (a ValueError) for a file that does not parse or a value that does not
    convert, OSError when it cannot be read."""
    path = f"{root.rstrip('/')}/{unit.path}"
    if layout.acid != "full":
        return _read_plain(path, layout, fs)
    f = unit.data_file
    assert f is not None and unit.write_ids is not None
    row_type = arrow_row_type(layout.columns)
    if f.directory is None:
        events = original_events(path, row_type, f.bucket_id or 0, unit.row_id_start, filesystem=fs)
    else:
        length = flush_length(unit.location, f, fs) if f.side_file else None
        events = acid_events(path, row_type, length=length, filesystem=fs)
    rows = apply_snapshot(events, unit.deleted, unit.write_ids)
    row = rows["row"].combine_chunks()
    table = pa.Table.from_arrays(
        [row.field(i) for i in range(row.type.num_fields)], names=[n for n, _ in layout.columns]
    )
    return _conform(table, layout, by_name=False)


_STATS_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_date32)


def _stats(table: pa.Table) -> str:
    """Delta file statistics (``numRecords``, and ``minValues``/``maxValues``/``nullCount`` of
    top-level numeric, date and short string columns) as the JSON Delta's ``add.stats`` holds."""
    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name in table.column_names:
        col = table[name]
        t = col.type
        if pa.types.is_nested(t):
            continue
        stats["nullCount"][name] = col.null_count
        if not table.num_rows or col.null_count == table.num_rows:
            continue
        if any(check(t) for check in _STATS_TYPES) or pa.types.is_string(t):
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if isinstance(lo, float) and (lo != lo or hi != hi):  # NaN: no bounds
                continue
            if isinstance(lo, str) and (len(lo) > 32 or len(hi) > 32):
                continue
            if pa.types.is_date32(t):
                lo, hi = lo.isoformat(), hi.isoformat()
            stats["minValues"][name], stats["maxValues"][name] = lo, hi
    return json.dumps(stats, separators=(",", ":"))


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file written for a unit: ``path`` relative to the replica root, ``size`` in
    bytes, ``rows``, Delta ``stats`` JSON and modification time (ms)."""

    path: str
    size: int
    rows: int
    stats: str
    mtime_ms: int


def write_unit(
    rows: pa.Table, fs: pafs.FileSystem, replica_root: str, directory: str, key: str
) -> WrittenFile | None:
    """Write ``rows`` as ``<directory>/hm-<key>.parquet`` under the replica; None (nothing
    written) when ``rows`` is empty. Raises OSError when the storage refuses (a partial file may remain
    under the same name, which a rerun overwrites)."""
    if not rows.num_rows:
        return None
    rel = f"{directory}/{replica_file_name(key)}" if directory else replica_file_name(key)
    full = f"{replica_root.rstrip('/')}/{rel}"
    fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
    pq.write_table(rows, full, filesystem=fs, compression="snappy")
    info = fs.get_file_info(full)
    return WrittenFile(rel, info.size, rows.num_rows, _stats(rows), (info.mtime_ns or 0) // 1_000_000)
