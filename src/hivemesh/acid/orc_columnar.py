"""Full-ACID insert files written column by column with Arrow's ORC writer (ORC C++).

:class:`ColumnarInsertWriter` writes the same files as :class:`hivemesh.acid.orcfile.AcidOrcWriter`
does for inserts (schema, event values, compression, stripe size, row index stride, user metadata;
see that module for Hive's format), from Arrow data without turning it into Python tuples:
the ACID columns are built as Arrow arrays (constants and a row id range) and the table columns
become the ``row`` struct as they are. Measured by ``bench/acid_read.py`` (the ACID write against
Spark writing plain ORC).

Arrow's ORC writer takes no user metadata, so :meth:`ColumnarInsertWriter.close` appends it to the
finished file's footer: an ORC footer is a protobuf message, so appending the encoded
``UserMetadataItem`` fields (footer field 5, ``metadata``) to its bytes yields the footer with those items
added; with a compression codec the bytes go in one more compression chunk stored as is (the chunk
header's "original" bit, valid for every codec), so the compressed footer is not touched. The
PostScript is then written again with the new footer length (its other fields copied byte for
byte). Stripe boundaries for ``hive.acid.key.index`` come from the finished file's stripe row
offsets. Source: ORC specification (file tail, compression chunks), ``orc_proto.proto`` (field numbers checked against ORC's generated ``OrcProto``).

Only tables whose column types Arrow writes as the row-wise writer does take this path
(:func:`columnar_supported`): not ``char``/``varchar`` (Arrow has plain strings), ``uniontype`` or
``timestamp`` (see there), nor ``lzo``. Known differences in the files, none in the events: the
stripe footers name the writer time zone ``GMT`` instead of ``UTC`` (the same zone), the writer's
ORC C++ version, and a decimal cast that would lose digits raises instead of rounding.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pyorc

from hivemesh import storage
from hivemesh.acid.names import INSERT, ORC_ACID_VERSION, encode_bucket_property
from hivemesh.acid.orcfile import (
    ACID_KEY_INDEX_KEY,
    ACID_STATS_KEY,
    ACID_VERSION_KEY,
    DEFAULT_COMPRESSION_BLOCK_SIZE,
    DEFAULT_ROW_INDEX_STRIDE,
    DEFAULT_STRIPE_SIZE,
    AcidOrcWriter,
    FileStats,
    Key,
    WriterContext,
    hive_to_arrow_type,
    hive_to_orc_type,
    select_columns,
)

#: our compression names -> Arrow ORC writer's
_ARROW_COMPRESSION = {
    "none": "uncompressed",
    "uncompressed": "uncompressed",
    "zlib": "zlib",
    "snappy": "snappy",
    "lz4": "lz4",
    "zstd": "zstd",
}
_CHUNK_MAX = (1 << 23) - 1  # an ORC compression chunk header holds a 23-bit length
_BATCH_ROWS = 64 * 1024  # rows turned into one Arrow events table at a time


def _positional_names(have: pa.DataType, want: pa.DataType) -> pa.DataType:
    """``have`` with the field names of ``want``'s structs, matched by position, at every depth
    (the child types stay ``have``'s); ValueError when a struct's field count differs."""
    if pa.types.is_struct(want):
        if not pa.types.is_struct(have) or have.num_fields != want.num_fields:
            raise ValueError(f"Arrow type {have} does not match the table's struct {want}")
        return pa.struct(
            [
                pa.field(want.field(i).name, _positional_names(have.field(i).type, want.field(i).type))
                for i in range(want.num_fields)
            ]
        )
    if pa.types.is_list(want) and (pa.types.is_list(have) or pa.types.is_large_list(have)):
        inner = _positional_names(have.value_type, want.value_type)
        return pa.large_list(inner) if pa.types.is_large_list(have) else pa.list_(inner)
    if pa.types.is_map(want) and pa.types.is_map(have):
        return pa.map_(
            _positional_names(have.key_type, want.key_type), _positional_names(have.item_type, want.item_type)
        )
    return have


def _conform(column: pa.Array | pa.ChunkedArray, want: pa.DataType) -> pa.ChunkedArray:
    """``column`` cast to ``want``, nested struct fields matched by position (Arrow's cast matches
    them by name and fills the missing ones with nulls)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    renamed = _positional_names(column.type, want)
    if renamed != column.type:
        chunks = [c.view(renamed) for c in chunks]
    return pa.chunked_array([c.cast(want) for c in chunks], type=want)


def columnar_supported(columns: Sequence[tuple[str, str]], compression: str = "zlib") -> bool:
    """True when :class:`ColumnarInsertWriter` writes the same events as
    :class:`~hivemesh.acid.orcfile.AcidOrcWriter` for a table with these ``(name, hive type)``
    columns: every type, at every depth, has an Arrow type that maps back to the same ORC type (no
    ``char``/``varchar``/``uniontype``), no ``timestamp`` of either kind (Arrow's ORC writer
    splits a time before 1970 with a fraction of a second into negative nanoseconds, which Java
    readers misread; its nanosecond unit also ends at year 2262), and the compression is one
    Arrow writes (not ``lzo``). Never raises: an unknown type gives False."""
    if str(compression).lower() not in _ARROW_COMPRESSION:
        return False
    for _, hive_type in columns:
        try:
            orc_type = hive_to_orc_type(hive_type)
            hive_to_arrow_type(hive_type)
        except ValueError:
            return False
        if any(word in orc_type for word in ("char(", "uniontype", "timestamp")):
            return False
    return bool(columns)


# --- protobuf pieces of the ORC tail ----------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(message: bytes) -> list[tuple[int, int, bytes]]:
    """``(field number, wire type, the field's bytes with its tag)`` of a protobuf message."""
    out = []
    pos = 0
    while pos < len(message):
        start = pos
        tag, pos = _read_varint(message, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = _read_varint(message, pos)
        elif wire == 2:
            size, pos = _read_varint(message, pos)
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"ORC PostScript: unsupported protobuf wire type {wire}")
        out.append((number, wire, message[start:pos]))
    return out


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def user_metadata_fields(items: Sequence[tuple[str, bytes]]) -> bytes:
    """Footer field 5 (``metadata``) entries, ``UserMetadataItem {name = 1; value = 2}``, for ``items``."""
    return b"".join(
        _length_delimited(5, _length_delimited(1, name.encode()) + _length_delimited(2, value))
        for name, value in items
    )


def add_user_metadata(path: str, items: Sequence[tuple[str, bytes]]) -> None:
    """Append ``items`` to the user metadata of the finished ORC file at local ``path`` (rewrites
    its footer tail in place; see the module doc). Raises ValueError for a file without an ORC
    PostScript, or when the new PostScript would not fit its one-byte length (255 bytes)."""
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 256))
        tail = f.read()
        ps_len = tail[-1] if tail else 0
        postscript = tail[-1 - ps_len : -1]
        values: dict[int, int] = {}
        try:
            fields = _fields(postscript)
            for number, wire, raw in fields:
                if wire == 0:
                    values[number] = _read_varint(raw, len(_varint(number << 3)))[0]
        except (IndexError, ValueError):
            values = {}
        if 1 not in values or not postscript.endswith(b"ORC") or ps_len + 1 > size:
            raise ValueError(f"{path}: no ORC PostScript at the end of the file")
        footer_length, compression = values[1], values.get(2, 0)
        extra = user_metadata_fields(items)
        if compression:  # stored-as-is chunks, each behind a 3-byte header with the original bit
            chunks = []
            step = min(values.get(3, 256 * 1024), _CHUNK_MAX)  # readers refuse chunks above the block size
            for i in range(0, len(extra), step):
                part = extra[i : i + step]
                chunks.append(((len(part) << 1) | 1).to_bytes(3, "little") + part)
            extra = b"".join(chunks)
        new_ps = b"".join(
            _varint(1 << 3) + _varint(footer_length + len(extra)) if number == 1 else raw
            for number, _, raw in fields
        )
        if len(new_ps) > 255:
            raise ValueError(f"{path}: ORC PostScript would exceed 255 bytes")
        f.seek(size - 1 - ps_len)
        f.truncate()
        f.write(extra + new_ps + bytes([len(new_ps)]))


# --- the writer -------------------------------------------------------------------------------------


class ColumnarInsertWriter(WriterContext):
    """Writes one full-ACID insert file (``bucket_N`` of a ``delta_*`` directory) from Arrow data.

    Arguments as :class:`~hivemesh.acid.orcfile.AcidOrcWriter` (``target``: a local path or
    ``file:`` URI, or a path on ``filesystem``; ``columns``: ``(name, hive type)`` pairs that
    :func:`columnar_supported` accepts, ValueError otherwise). A file on a remote file system is
    written to a local temporary file first and copied up by :meth:`close`. Use as a context
    manager: a normal exit closes, an exception discards (no file is left)."""

    def __init__(
        self,
        target: str | os.PathLike[str],
        columns: Sequence[tuple[str, str]],
        *,
        bucket_id: int = 0,
        statement_id: int = 0,
        filesystem: pafs.FileSystem | None = None,
        compression: str = "zlib",
        stripe_size: int = DEFAULT_STRIPE_SIZE,
        compression_block_size: int = DEFAULT_COMPRESSION_BLOCK_SIZE,
        row_index_stride: int = DEFAULT_ROW_INDEX_STRIDE,
    ):
        self.columns = [(str(n), str(t)) for n, t in columns]
        if not columnar_supported(self.columns, compression):
            raise ValueError(f"columns {self.columns} with {compression!r} need the row-wise ACID writer")
        self.column_names = [n for n, _ in self.columns]
        self.row_type = pa.struct([pa.field(n, hive_to_arrow_type(t)) for n, t in self.columns])
        self.bucket_id = bucket_id
        self.statement_id = statement_id
        self.bucket_property = encode_bucket_property(bucket_id, statement_id)
        path = os.fspath(target)
        if filesystem is None or isinstance(filesystem, pafs.LocalFileSystem):
            self.path = storage.local_path(path) if path.startswith("file:") else path
            parent = os.path.dirname(self.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._local = self.path
            self._remote: pafs.FileSystem | None = None
        else:
            self.path = path
            parent = path.rsplit("/", 1)[0] if "/" in path else ""
            if parent:
                filesystem.create_dir(parent, recursive=True)
            self._tmpdir = tempfile.mkdtemp(prefix="hivemesh-orc-")
            self._local = os.path.join(self._tmpdir, "bucket.orc")
            self._remote = filesystem
        try:
            self._writer = po.ORCWriter(
                self._local,
                stripe_size=stripe_size,
                compression=_ARROW_COMPRESSION[compression.lower()],
                compression_block_size=compression_block_size,
                row_index_stride=row_index_stride,
            )
        except BaseException:
            if self._remote is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
            raise
        self._runs: list[tuple[int, int, int, int]] = []  # (first position, rows, write id, first row id)
        self._next_row_id: dict[int, int] = {}
        self.inserts = 0
        self.min_write_id = 0
        self.max_write_id = 0
        self.state = "open"  # open | closed | discarded
        self.stats: FileStats | None = None

    @property
    def rows(self) -> int:
        """Events written so far (all inserts)."""
        return self.inserts

    def next_row_id(self, write_id: int) -> int:
        """The row id the next insert of ``write_id`` gets."""
        return self._next_row_id.get(write_id, 0)

    def insert(self, rows: pa.Table | pa.RecordBatch, write_id: int) -> int:
        """Append insert events for the rows of ``rows`` under ``write_id``; returns how many. Row
        ids continue from :meth:`next_row_id`.

        Columns are matched by name (case-insensitive), else by position; fields of nested structs
        by position, as the row-wise writer does (ValueError when their counts differ). Values are
        cast to the Hive types' Arrow types (ArrowInvalid/ArrowNotImplementedError when that
        fails). Converted in chunks of ``_BATCH_ROWS`` rows. After an error inside Arrow's writer
        the writer is ``broken``: only :meth:`discard` is allowed."""
        if self.state != "open":
            raise ValueError(f"ACID ORC writer of {self.path} is {self.state}")
        if write_id < 0:
            raise ValueError(f"negative write id {write_id}")
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        table = pa.Table.from_arrays(
            [
                _conform(c, f.type)
                for c, f in zip(select_columns(rows, self.column_names), self.row_type, strict=True)
            ],
            schema=pa.schema(list(self.row_type)),
        )
        count = 0
        for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
            n = batch.num_rows
            if n == 0:
                continue
            start = self._next_row_id.get(write_id, 0)
            events = pa.table(
                {
                    "operation": pa.array(np.full(n, INSERT, np.int32)),
                    "originalTransaction": pa.array(np.full(n, write_id, np.int64)),
                    "bucket": pa.array(np.full(n, self.bucket_property, np.int32)),
                    "rowId": pa.array(np.arange(start, start + n, dtype=np.int64)),
                    "currentTransaction": pa.array(np.full(n, write_id, np.int64)),
                    "row": pa.StructArray.from_arrays(batch.columns, fields=list(self.row_type)),
                }
            )
            try:
                self._writer.write(events)
            except BaseException:
                self.state = "broken"
                raise
            self._runs.append((self.inserts, n, write_id, start))
            self._next_row_id[write_id] = start + n
            self.inserts += n
            count += n
            self.min_write_id = write_id if self.min_write_id == 0 else min(self.min_write_id, write_id)
            self.max_write_id = max(self.max_write_id, write_id)
        return count

    def _empty_events(self) -> pa.Table:
        return pa.table(
            {
                "operation": pa.array([], pa.int32()),
                "originalTransaction": pa.array([], pa.int64()),
                "bucket": pa.array([], pa.int32()),
                "rowId": pa.array([], pa.int64()),
                "currentTransaction": pa.array([], pa.int64()),
                "row": pa.array([], self.row_type),
            }
        )

    def _key_at(self, position: int) -> Key:
        """The ROW__ID of the event at ``position`` in the file."""
        for first, count, write_id, first_row_id in reversed(self._runs):
            if position >= first:
                assert position < first + count
                return (write_id, self.bucket_property, first_row_id + position - first)
        raise IndexError(position)

    def _stripe_keys(self) -> list[Key]:
        with open(self._local, "rb") as f:
            reader = pyorc.Reader(f)
            offsets = [reader.read_stripe(i).row_offset for i in range(reader.num_of_stripes)]
            total = len(reader)
        ends = [*offsets[1:], total]
        return [self._key_at(end - 1) for end in ends if end > 0]

    def close(self) -> FileStats:
        """Finish the file (footer, then the ACID user metadata; copy up when remote) and return
        its :class:`FileStats` (a file of no events when nothing was inserted, as the row-wise
        writer leaves). Closing a closed writer returns the same stats. On an error the file is
        removed and the error raised (OSError for storage errors)."""
        if self.state == "closed" and self.stats is not None:
            return self.stats
        if self.state != "open":
            raise ValueError(f"ACID ORC writer of {self.path} is {self.state}")
        try:
            if self.inserts == 0:  # Arrow's writer leaves no ORC file at all without a write
                self._writer.write(self._empty_events())
            self._writer.close()
            keys = self._stripe_keys() if self.inserts else []
            # the order Hive's TreeMap of user metadata gives
            add_user_metadata(
                self._local,
                [
                    (ACID_KEY_INDEX_KEY, "".join(f"{o},{b},{r};" for o, b, r in keys).encode()),
                    (ACID_STATS_KEY, f"{self.inserts},0,0".encode()),
                    (ACID_VERSION_KEY, str(ORC_ACID_VERSION).encode()),
                ],
            )
            length = os.path.getsize(self._local)
            if self._remote is not None:
                with (
                    open(self._local, "rb") as src,
                    self._remote.open_output_stream(self.path, compression=None) as out,
                ):
                    shutil.copyfileobj(src, out, 8 * 1024 * 1024)
                shutil.rmtree(self._tmpdir, ignore_errors=True)
        except BaseException:
            self.discard()
            raise
        self.state = "closed"
        self.stats = FileStats(
            path=self.path,
            length=length,
            rows=self.inserts,
            inserts=self.inserts,
            updates=0,
            deletes=0,
            stripes=len(keys),
            key_index=tuple(keys),
            min_write_id=self.min_write_id,
            max_write_id=self.max_write_id,
            bucket_id=self.bucket_id,
            statement_id=self.statement_id,
        )
        return self.stats

    def discard(self) -> None:
        """Abandon the file and remove it (best effort, never raises)."""
        if self.state == "discarded":
            return
        self.state = "discarded"
        try:
            self._writer.close()
        except Exception:
            pass
        for remove in (
            lambda: os.remove(self._local),
            lambda: self._remote.delete_file(self.path) if self._remote is not None else None,
            lambda: shutil.rmtree(self._tmpdir) if self._remote is not None else None,
        ):
            try:
                remove()
            except Exception:
                pass


def open_insert_writer(
    target: str,
    columns: Sequence[tuple[str, str]],
    *,
    bucket_id: int = 0,
    statement_id: int = 0,
    filesystem: pafs.FileSystem | None = None,
    compression: str = "zlib",
    stripe_size: int = DEFAULT_STRIPE_SIZE,
) -> ColumnarInsertWriter | AcidOrcWriter:
    """The writer of one full-ACID insert file for Arrow data: :class:`ColumnarInsertWriter` when
    :func:`columnar_supported` accepts the columns and compression, else the row-wise
    :class:`~hivemesh.acid.orcfile.AcidOrcWriter` (same arguments, same files). Raises ValueError for a
    Hive type neither writer maps, OSError when the file cannot be created."""
    cls: type[ColumnarInsertWriter] | type[AcidOrcWriter]
    cls = ColumnarInsertWriter if columnar_supported(columns, compression) else AcidOrcWriter
    return cls(
        target,
        columns,
        bucket_id=bucket_id,
        statement_id=statement_id,
        filesystem=filesystem,
        compression=compression,
        stripe_size=stripe_size,
    )
