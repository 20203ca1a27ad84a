"""One full-ACID ORC file, written exactly as Hive's ``OrcRecordUpdater`` writes it.

Format (Hive ``OrcRecordUpdater``, ``OrcAcidUtils``):

* the ORC schema is ``struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,
  currentTransaction:bigint,row:struct<...table columns...>>`` (:func:`acid_schema`);
* an insert event is ``(0, writeId, bucketProperty, rowId, writeId, row)``; row ids count from 0 per
  write id within the file (a streaming file holding several write ids restarts at 0 for each, as
  ``OrcRecordUpdater`` does when its current write id changes);
* a delete event is ``(2, originalWriteId, bucketProperty, rowId, deletingWriteId, null)`` where the
  first three fields are the ROW__ID of the deleted row; events of a file are sorted by that key;
* ``bucketProperty`` is BucketCodec V1 (:func:`hivemesh.acid.names.encode_bucket_property`);
* ORC user metadata: ``hive.acid.version`` = ``2``, ``hive.acid.stats`` = ``<inserts>,<updates>,
  <deletes>`` and ``hive.acid.key.index`` = ``<owid>,<bucket>,<rowId>;`` once per stripe, the last
  key of that stripe (Hive's ``KeyIndexBuilder``);
* ZLIB compression, 256 KiB compression blocks, 64 MiB stripes, a row index every 10,000 rows
  (Hive's defaults ``orc.compress``, ``orc.compress.size``, ``orc.stripe.size``,
  ``orc.row.index.stride``); timestamps are written with writer time zone UTC.

Stripe boundaries: the key index needs the last key of every stripe, which the ORC library does not
report. :class:`AcidOrcWriter` feeds rows to the ORC writer one ORC batch at a time and watches
the bytes it emits: the C++ ORC writer only writes to the file when it finishes a stripe (or a
footer), so growth after a batch marks a stripe that ends with that batch's last row.

Streaming files (``flushable=True``): :meth:`AcidOrcWriter.flush` writes an intermediate footer
(``Writer.writeIntermediateFooter``) and returns the length a reader may read (to append to the
``_flush_length`` side file). The C++ ORC writer appends user metadata instead of replacing it, and
C++ readers take the FIRST value of a key, so metadata cannot be updated between footers: the
intermediate footers carry ``hive.acid.version`` only, and ``hive.acid.stats`` and
``hive.acid.key.index`` appear in the final footer written by :meth:`AcidOrcWriter.close`. (Hive's
intermediate footers carry all three; its readers treat a missing key index as "no bounds".)

Pure Python + pyorc (ORC C++): no Spark, no metastore.
"""

from __future__ import annotations

import calendar
import itertools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, BinaryIO

import pyarrow as pa
import pyorc
from pyorc.converters import DecimalConverter, ORCConverter
from pyorc.enums import CompressionKind, TypeKind

from hivemesh import storage
from hivemesh.acid.names import (
    DELETE,
    INSERT,
    ORC_ACID_VERSION,
    decode_bucket_property,
    encode_bucket_property,
)

ACID_VERSION_KEY = "hive.acid.version"  # OrcRecordUpdater.ACID_FORMAT ... user metadata keys
ACID_STATS_KEY = "hive.acid.stats"
ACID_KEY_INDEX_KEY = "hive.acid.key.index"

DEFAULT_STRIPE_SIZE = 64 * 1024 * 1024  # orc.stripe.size
DEFAULT_COMPRESSION_BLOCK_SIZE = 256 * 1024  # orc.compress.size
DEFAULT_ROW_INDEX_STRIDE = 10_000  # orc.row.index.stride
DEFAULT_BATCH_SIZE = 1024  # rows per ORC batch handed to the C++ writer
_CHUNK_ROWS = 8192  # rows converted to Python tuples at a time from a plain iterable

_COMPRESSIONS = {
    "none": CompressionKind.NONE,
    "uncompressed": CompressionKind.NONE,
    "zlib": CompressionKind.ZLIB,
    "snappy": CompressionKind.SNAPPY,
    "lzo": CompressionKind.LZO,
    "lz4": CompressionKind.LZ4,
    "zstd": CompressionKind.ZSTD,
}

_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
_NANOS = 1_000_000_000

Key = tuple[int, int, int]  # (originalTransaction, bucket property, rowId): a ROW__ID


# --- Hive types -> ORC types ----------------------------------------------------------------------

_PRIMITIVES = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "boolean": "boolean",
    "float": "float",
    "double": "double",
    "double precision": "double",
    "string": "string",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp with local time zone": "timestamp with local time zone",
    "binary": "binary",
}
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9]+")
_FIELD = re.compile(r"[^:,<>`\s]+")


class _TypeParser:
    """Recursive-descent parser of Hive type strings (``TypeInfoUtils.TypeInfoParser`` grammar)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> ValueError:
        """A ValueError naming what was expected and where in the type string."""
        return ValueError(f"bad Hive type {self.text!r} at {self.pos}: {what}")

    def skip_ws(self) -> None:
        """Skip blanks."""
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, ch: str) -> None:
        """Consume ``ch`` (after blanks); ValueError if something else is there."""
        self.skip_ws()
        if not self.text.startswith(ch, self.pos):
            raise self.fail(f"expected {ch!r}")
        self.pos += 1

    def peek(self) -> str:
        """The next non-blank character ('' at the end), not consumed."""
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def word(self) -> str:
        """A type keyword (letters, digits, '_'), lower-cased."""
        self.skip_ws()
        m = _WORD.match(self.text, self.pos)
        if not m:
            raise self.fail("expected a type name")
        self.pos = m.end()
        return m.group(0).lower()

    def number(self) -> int:
        """A non-negative decimal integer."""
        self.skip_ws()
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.fail("expected a number")
        self.pos = m.end()
        return int(m.group(0))

    def field_name(self) -> str:
        """A struct field name, plain or in backquotes (returned without them)."""
        self.skip_ws()
        if self.peek() == "`":
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                raise self.fail("unterminated `name`")
            name = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return name
        m = _FIELD.match(self.text, self.pos)
        if not m:
            raise self.fail("expected a field name")
        self.pos = m.end()
        return m.group(0)

    def params(self) -> list[int]:
        """Comma-separated integers up to the closing parenthesis (the ``10,2)`` of ``decimal(10,2)``)."""
        out = [self.number()]
        while self.peek() == ",":
            self.pos += 1
            out.append(self.number())
        self.expect(")")
        return out

    def parse_type(self) -> str:
        """One Hive type (recursively for array, map, struct, uniontype), as ORC's type string."""
        name = self.word()
        if name in ("double", "timestamp"):  # two- and four-word names
            rest = self.text[self.pos :].lower()
            for suffix in (" precision", " with local time zone"):
                m = re.match(r"\s+" + suffix.strip().replace(" ", r"\s+") + r"\b", rest)
                if m:
                    self.pos += m.end()
                    name += suffix
                    break
        if name in ("varchar", "char"):
            self.expect("(")
            (length,) = self.params()
            return f"{name}({length})"
        if name in ("decimal", "numeric"):
            precision, scale = 10, 0  # HiveDecimal.USER_DEFAULT_PRECISION / SCALE
            if self.peek() == "(":
                self.pos += 1
                p = self.params()
                if len(p) > 2:
                    raise self.fail("decimal takes (precision[, scale])")
                precision = p[0]
                scale = p[1] if len(p) == 2 else 0
            if not (1 <= precision <= 38 and 0 <= scale <= precision):
                raise self.fail(f"decimal({precision},{scale}) out of range")
            return f"decimal({precision},{scale})"
        if name == "array":
            self.expect("<")
            inner = self.parse_type()
            self.expect(">")
            return f"array<{inner}>"
        if name == "map":
            self.expect("<")
            key = self.parse_type()
            self.expect(",")
            value = self.parse_type()
            self.expect(">")
            return f"map<{key},{value}>"
        if name == "struct":
            self.expect("<")
            fields = []
            while True:
                fname = self.field_name()
                self.expect(":")
                fields.append(f"{_orc_field_name(fname)}:{self.parse_type()}")
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect(">")
                break
            return "struct<" + ",".join(fields) + ">"
        if name == "uniontype":
            self.expect("<")
            members = [self.parse_type()]
            while self.peek() == ",":
                self.pos += 1
                members.append(self.parse_type())
            self.expect(">")
            return "uniontype<" + ",".join(members) + ">"
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        raise self.fail(f"type {name!r} cannot be stored in ORC")


def _orc_field_name(name: str) -> str:
    return name if _SIMPLE_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def hive_to_orc_type(hive_type: str) -> str:
    """The ORC type string of a Hive column type (as the metastore stores it).

    ``int``/``integer``, ``bigint``, ``smallint``, ``tinyint``, ``boolean``, ``float``,
    ``double``/``double precision``, ``string``, ``varchar(n)``, ``char(n)``, ``decimal`` (=
    ``decimal(10,0)``), ``decimal(p)``, ``decimal(p,s)``, ``date``, ``timestamp``, ``timestamp with
    local time zone``, ``binary``, and nested ``array<T>``, ``map<K,V>``, ``struct<name:T,...>``,
    ``uniontype<T,...>``. Case and spaces are free. Raises ValueError for anything else (``void``,
    ``interval_*``) or a malformed string. Source: Hive ``TypeInfoUtils`` / ``OrcSerde`` type mapping.
    """
    p = _TypeParser(hive_type)
    out = p.parse_type()
    p.skip_ws()
    if p.pos != len(hive_type):
        raise p.fail("trailing text")
    return out


def _arrow_of(t: Any) -> pa.DataType:
    kind = t.kind
    simple = {
        TypeKind.BOOLEAN: pa.bool_(),
        TypeKind.BYTE: pa.int8(),
        TypeKind.SHORT: pa.int16(),
        TypeKind.INT: pa.int32(),
        TypeKind.LONG: pa.int64(),
        TypeKind.FLOAT: pa.float32(),
        TypeKind.DOUBLE: pa.float64(),
        TypeKind.STRING: pa.string(),
        TypeKind.VARCHAR: pa.string(),
        TypeKind.CHAR: pa.string(),
        TypeKind.BINARY: pa.binary(),
        TypeKind.DATE: pa.date32(),
        TypeKind.TIMESTAMP: pa.timestamp("ns"),
        TypeKind.TIMESTAMP_INSTANT: pa.timestamp("ns", tz="UTC"),
    }
    if kind in simple:
        return simple[kind]
    if kind == TypeKind.DECIMAL:
        return pa.decimal128(t.precision, t.scale)
    if kind == TypeKind.LIST:
        return pa.list_(_arrow_of(t.type))
    if kind == TypeKind.MAP:
        return pa.map_(_arrow_of(t.key), _arrow_of(t.value))
    if kind == TypeKind.STRUCT:
        return pa.struct([pa.field(n, _arrow_of(c)) for n, c in t.fields.items()])
    raise ValueError(f"no Arrow type for ORC type {t}")


def hive_to_arrow_type(hive_type: str) -> pa.DataType:
    """The Arrow type plain (insert-only) files use for a Hive column type: tinyint..bigint ->
    int8..int64, float/double -> float32/float64, string/varchar/char -> string, decimal(p,s) ->
    decimal128, date -> date32, timestamp -> timestamp[ns] (``with local time zone``: zoned
    UTC), binary, array -> list, map, struct. ValueError for ``uniontype`` and non-ORC types."""
    return _arrow_of(pyorc.TypeDescription.from_string(hive_to_orc_type(hive_type)))


def row_schema(columns: Sequence[tuple[str, str]]) -> str:
    """``struct<c1:T1,...>`` of ``(name, hive type)`` pairs (names kept as given). Raises ValueError for no
    columns or a Hive type :func:`hive_to_orc_type` does not map."""
    if not columns:
        raise ValueError("a table needs at least one column")
    return "struct<" + ",".join(f"{_orc_field_name(n)}:{hive_to_orc_type(t)}" for n, t in columns) + ">"


def acid_schema(columns: Sequence[tuple[str, str]]) -> str:
    """The ORC schema of a full-ACID file of a table with ``columns`` (``(name, hive type)`` pairs):
    ``struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,
    currentTransaction:bigint,row:struct<...>>`` (Hive ``OrcRecordUpdater.createEventSchema``). Raises
    ValueError as :func:`row_schema`."""
    return (
        "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
        f"currentTransaction:bigint,row:{row_schema(columns)}>"
    )


# --- value conversion -------------------------------------------------------------------------------


class TimestampConverter(ORCConverter):
    """ORC TIMESTAMP values for pyorc: accepts ``(seconds, nanos)`` tuples, ints (nanoseconds since
    the epoch), naive datetimes (wall-clock time, stored as if UTC: Hive TIMESTAMP semantics with
    writer time zone UTC) and aware datetimes (their UTC instant). Nanoseconds of
    ``pandas.Timestamp`` are kept. Reads give aware datetimes in the reader's time zone."""

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone: Any) -> datetime:
        """``(seconds, nanoseconds)`` since the epoch (UTC) -> an aware datetime in ``timezone``
        (microsecond precision)."""
        value = _EPOCH_UTC + timedelta(seconds=seconds, microseconds=nanoseconds // 1000)
        return value.astimezone(timezone)

    @staticmethod
    def to_orc(obj: Any, timezone: Any) -> tuple[int, int]:
        """A value as ``(seconds, nanoseconds)`` since the epoch (see the class doc); TypeError for
        other types."""
        if type(obj) is tuple:
            return obj
        if isinstance(obj, int):
            s, ns = divmod(obj, _NANOS)
            return s, ns
        if isinstance(obj, datetime):
            delta = obj - (_EPOCH if obj.tzinfo is None else _EPOCH_UTC)
            seconds = delta.days * 86400 + delta.seconds
            return seconds, delta.microseconds * 1000 + getattr(obj, "nanosecond", 0)
        if isinstance(obj, date):
            return calendar.timegm(obj.timetuple()), 0
        raise TypeError(f"cannot write {type(obj).__name__} as an ORC timestamp")


class DateConverter(ORCConverter):
    """ORC DATE values for pyorc: accepts ``datetime.date`` (a datetime's date part) or an int
    (days since 1970-01-01, as Arrow ``date32`` holds them)."""

    @staticmethod
    def from_orc(days: int) -> date:
        """Days since 1970-01-01 -> ``datetime.date``."""
        return _EPOCH_DATE + timedelta(days=days)

    @staticmethod
    def to_orc(obj: Any) -> int:
        """A date, datetime (its date) or int -> days since 1970-01-01."""
        if isinstance(obj, int):
            return obj
        if isinstance(obj, datetime):
            obj = obj.date()
        return (obj - _EPOCH_DATE).days


CONVERTERS: dict[TypeKind, type[ORCConverter]] = {
    TypeKind.DATE: DateConverter,
    TypeKind.DECIMAL: DecimalConverter,
    TypeKind.TIMESTAMP: TimestampConverter,
    TypeKind.TIMESTAMP_INSTANT: TimestampConverter,
}


def _needs_fix(t: pa.DataType) -> bool:
    if pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_timestamp(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _needs_fix(t.value_type)
    return False


def _fix_value(v: Any, t: pa.DataType) -> Any:
    """A ``to_pylist`` value reshaped for pyorc: structs as tuples, maps as dicts."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_fix_value(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return {_fix_value(k, t.key_type): _fix_value(x, t.item_type) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_fix_value(x, t.value_type) for x in v]
    return v


def _unit_nanos(t: pa.TimestampType) -> int:
    return {"s": _NANOS, "ms": 1_000_000, "us": 1000, "ns": 1}[t.unit]


def arrow_column_values(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The values of one Arrow column as pyorc accepts them (one Python object per row).

    Timestamps become ``(seconds, nanos)`` (naive values are wall-clock times; zoned ones their UTC
    instant), dates days since the epoch, structs tuples, maps dicts; dictionary columns are
    decoded. Everything else is ``to_pylist()``.
    """
    if isinstance(arr, pa.ChunkedArray):
        return [v for chunk in arr.chunks for v in arrow_column_values(chunk)]
    t = arr.type
    if pa.types.is_dictionary(t):
        return arrow_column_values(arr.dictionary_decode())
    if pa.types.is_timestamp(t):
        factor = _unit_nanos(t)
        ints = arr.view(pa.int64()).to_pylist()
        return [None if v is None else divmod(v * factor, _NANOS) for v in ints]
    if pa.types.is_date32(t):
        return arr.view(pa.int32()).to_pylist()
    if pa.types.is_date64(t):
        return arr.cast(pa.date32()).view(pa.int32()).to_pylist()
    values = arr.to_pylist()
    if _needs_fix(t):
        return [_fix_value(v, t) for v in values]
    return values


def select_columns(batch: pa.RecordBatch | pa.Table, names: Sequence[str]) -> list[Any]:
    """The columns of ``batch`` in table column order: by name (case-insensitive) when every
    column name is present, else by position when the counts match. Raises ValueError when neither matches."""
    lower = [n.lower() for n in batch.schema.names]
    if all(n.lower() in lower for n in names):
        return [batch.column(lower.index(n.lower())) for n in names]
    if batch.num_columns == len(names):
        return [batch.column(i) for i in range(len(names))]
    raise ValueError(
        f"Arrow data with columns {batch.schema.names} does not match table columns {list(names)}"
    )


def arrow_rows(batch: pa.RecordBatch | pa.Table, names: Sequence[str]) -> list[tuple[Any, ...]]:
    """Row tuples (pyorc values, table column order) of an Arrow batch or table. Raises ValueError as
    :func:`select_columns`."""
    cols = [arrow_column_values(c) for c in select_columns(batch, names)]
    return list(zip(*cols, strict=True)) if cols else []


# --- writer ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStats:
    """What one written data file holds.

    ``path``: as given to the writer; ``length``: bytes; ``rows``: events (= inserts + updates +
    deletes for ACID files, rows for plain files); ``stripes``: ORC stripes (row groups for
    Parquet); ``key_index``: the last ROW__ID of each stripe (ACID files; ``()`` otherwise);
    ``min_write_id``/``max_write_id``: the write ids of its events (``currentTransaction``), 0 when
    none; ``bucket_id``/``statement_id``: of the writer's bucket property.
    """

    path: str
    length: int
    rows: int
    inserts: int
    updates: int
    deletes: int
    stripes: int
    key_index: tuple[Key, ...]
    min_write_id: int
    max_write_id: int
    bucket_id: int
    statement_id: int

    @property
    def key_index_text(self) -> str:
        """``hive.acid.key.index`` as written: ``owid,bucket,rowId;`` per stripe."""
        return "".join(f"{o},{b},{r};" for o, b, r in self.key_index)


class _CountingStream:
    """A binary output stream wrapper that counts the bytes the ORC writer emits."""

    def __init__(self, f: Any, name: str):
        self._f = f
        self.name = name
        self.n = 0

    @property
    def closed(self) -> bool:
        """True once closed (file-object protocol)."""
        return bool(self._f.closed)

    def write(self, data: bytes) -> int:
        """Write ``data`` and count its bytes; returns the number written."""
        self._f.write(data)
        self.n += len(data)
        return len(data)

    def flush(self) -> None:
        """Flush the underlying file."""
        self._f.flush()

    def close(self) -> None:
        """Close the underlying file."""
        self._f.close()


def _compression(value: str | CompressionKind | int) -> CompressionKind:
    if isinstance(value, str):
        try:
            return _COMPRESSIONS[value.lower()]
        except KeyError:
            raise ValueError(f"unknown ORC compression {value!r}") from None
    return CompressionKind(value)


class WriterContext:
    """The context-manager protocol of the ACID file writers: a normal exit closes the file (when
    still ``open``), an exception discards it."""

    state: str

    def close(self) -> FileStats:  # pragma: no cover - defined by the writers
        """Finish the file and return its :class:`FileStats` (each writer defines it)."""
        raise NotImplementedError

    def discard(self) -> None:  # pragma: no cover - defined by the writers
        """Abandon the file and remove it, never raising (each writer defines it)."""
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            if self.state == "open":
                self.close()
        else:
            self.discard()


class AcidOrcWriter(WriterContext):
    """Writes one full-ACID ORC file (``bucket_N`` of a delta or delete_delta) event by event.

    ``target``: a local path (``str``/``os.PathLike``, a ``file:`` URI) or, with ``filesystem``
    (a ``pyarrow.fs.FileSystem``), a path on it; an open binary stream is used as is (not closed
    by :meth:`close` unless ``close_stream``). Missing parent directories are created.
    ``columns``: the table's ``(name, hive type)`` pairs. ``bucket_id``/``statement_id`` give the
    ``bucket`` column (BucketCodec V1) of inserts. ``flushable``: allow :meth:`flush` (streaming;
    costs about 2x in write speed). ``compression``: ``"zlib"`` (default), ``"snappy"``, ``"lz4"``,
    ``"zstd"``, ``"none"``. Sizes in bytes.

    Use as a context manager: a normal exit closes (final footer); an exception discards
    (:meth:`discard`: the file is closed and removed). After an error inside the ORC writer the
    writer is broken: only :meth:`discard` is allowed.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | BinaryIO,
        columns: Sequence[tuple[str, str]],
        *,
        bucket_id: int = 0,
        statement_id: int = 0,
        filesystem: Any = None,
        flushable: bool = False,
        compression: str | CompressionKind = "zlib",
        stripe_size: int = DEFAULT_STRIPE_SIZE,
        compression_block_size: int = DEFAULT_COMPRESSION_BLOCK_SIZE,
        row_index_stride: int = DEFAULT_ROW_INDEX_STRIDE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        close_stream: bool = False,
    ):
        self.columns = [(str(n), str(t)) for n, t in columns]
        self.column_names = [n for n, _ in self.columns]
        self.schema = acid_schema(self.columns)
        self.bucket_id = bucket_id
        self.statement_id = statement_id
        self.bucket_property = encode_bucket_property(bucket_id, statement_id)
        self.flushable = flushable
        self._filesystem = filesystem
        self._owns_stream = True
        if hasattr(target, "write"):
            stream: Any = target
            self.path = str(getattr(target, "name", repr(target)))
            self._owns_stream = close_stream
        else:
            path = os.fspath(target)  # type: ignore[arg-type]
            if filesystem is None and path.startswith("file:"):
                path = storage.local_path(path)
            self.path = path
            if filesystem is None:
                parent = os.path.dirname(path)
                if parent:
                    os.makedirs(parent, exist_ok=True)
                stream = open(path, "wb")  # noqa: SIM115 - closed by close()/discard()
            else:
                parent = path.rsplit("/", 1)[0] if "/" in path else ""
                if parent:
                    filesystem.create_dir(parent, recursive=True)
                stream = filesystem.open_output_stream(path, compression=None)
        self._stream = _CountingStream(stream, self.path)
        self._batch_size = 1 if flushable else max(1, int(batch_size))
        try:
            self._orc = pyorc.Writer(
                self._stream,
                self.schema,
                batch_size=self._batch_size,
                stripe_size=stripe_size,
                row_index_stride=row_index_stride,
                compression=_compression(compression),
                compression_block_size=compression_block_size,
                converters=CONVERTERS,
            )
        except BaseException:
            if self._owns_stream:
                stream.close()
            raise
        self._bytes_seen = self._stream.n
        self._rows_in_orc = 0  # rows handed to pyorc
        self._rows_since_cut = 0  # rows since the last stripe boundary
        self._last_key: Key | None = None
        self._stripe_keys: list[Key] = []
        self._next_row_id: dict[int, int] = {}
        self._last_delete_key: Key | None = None
        self._metadata_added: set[str] = set()
        self._flush_length = 0
        self.inserts = 0
        self.updates = 0
        self.deletes = 0
        self.min_write_id = 0
        self.max_write_id = 0
        self.state = "open"  # open | closed | broken | discarded
        self.stats: FileStats | None = None

    # ------------------------------------------------------------------ properties
    @property
    def rows(self) -> int:
        """Events written so far."""
        return self.inserts + self.updates + self.deletes

    def next_row_id(self, write_id: int) -> int:
        """The row id the next insert of ``write_id`` gets."""
        return self._next_row_id.get(write_id, 0)

    # ------------------------------------------------------------------ writing
    def _check_open(self) -> None:
        if self.state != "open":
            raise ValueError(f"ACID ORC writer of {self.path} is {self.state}")

    def _note_write_id(self, write_id: int) -> None:
        if write_id < 0:
            raise ValueError(f"negative write id {write_id}")
        if self.min_write_id == 0 or write_id < self.min_write_id:
            self.min_write_id = write_id
        self.max_write_id = max(self.max_write_id, write_id)

    def _feed(self, events: list[tuple[Any, ...]]) -> None:
        """Hand events to pyorc, recording the last key of every stripe the ORC writer cuts."""
        if not events:
            return
        try:
            if self._batch_size == 1:
                write = self._orc.write
                stream = self._stream
                for e in events:
                    write(e)
                    self._rows_since_cut += 1
                    if stream.n != self._bytes_seen:
                        self._cut((e[1], e[2], e[3]))
                self._rows_in_orc += len(events)
            else:
                pos, n, b = 0, len(events), self._batch_size
                while pos < n:
                    step = min(n - pos, b - self._rows_in_orc % b)
                    self._orc.writerows(events[pos : pos + step])
                    pos += step
                    self._rows_in_orc += step
                    self._rows_since_cut += step
                    if self._stream.n != self._bytes_seen:
                        e = events[pos - 1]
                        self._cut((e[1], e[2], e[3]))
        except BaseException:
            self.state = "broken"
            raise
        e = events[-1]
        self._last_key = (e[1], e[2], e[3])

    def _cut(self, last_key: Key) -> None:
        self._stripe_keys.append(last_key)
        self._rows_since_cut = 0
        self._bytes_seen = self._stream.n

    def insert(self, rows: Iterable[Sequence[Any]] | pa.Table | pa.RecordBatch, write_id: int) -> int:
        """Append insert events for ``rows`` under ``write_id``; returns how many.

        ``rows``: tuples in table column order (values as pyorc takes them: ``datetime`` or
        ``(seconds, nanos)`` for timestamps, ``date`` or days for dates, ``Decimal``, tuples for
        structs, dicts for maps), or an Arrow ``Table``/``RecordBatch`` (columns by name, else by
        position; converted one batch at a time). Row ids continue from :meth:`next_row_id`. Raises ValueError
        for a negative ``write_id``, a writer not open (closed, discarded or broken) and Arrow columns
        matching the table's neither by name nor by count; a value pyorc cannot write (TypeError, ValueError)
        or a storage error (OSError) leaves the writer broken.
        """
        self._check_open()
        self._note_write_id(write_id)
        count = 0
        for chunk in _row_chunks(rows, self.column_names):
            start = self._next_row_id.get(write_id, 0)
            bucket = self.bucket_property
            events = [
                (INSERT, write_id, bucket, rid, write_id, tuple(r) if type(r) is not tuple else r)
                for rid, r in zip(itertools.count(start), chunk)
            ]
            self._feed(events)
            self._next_row_id[write_id] = start + len(events)
            self.inserts += len(events)
            count += len(events)
        return count

    def delete(self, keys: Iterable[Sequence[int]] | pa.Table | pa.RecordBatch, write_id: int) -> int:
        """Append delete events (``currentTransaction`` = ``write_id``) for the rows with these
        ROW__IDs; returns how many.

        ``keys``: ``(originalTransaction, bucket property, rowId)`` tuples, or Arrow data with
        columns ``originalTransaction``, ``bucket``, ``rowId`` (else the first three). They are
        sorted here; they must all sort at or after the keys of earlier :meth:`delete` calls on
        this file, and their bucket property must decode to this file's bucket id (ValueError
        otherwise). Duplicate keys are written once.
        """
        self._check_open()
        self._note_write_id(write_id)
        if isinstance(keys, pa.Table | pa.RecordBatch):
            key_list = arrow_keys(keys)
        else:
            key_list = [(int(k[0]), int(k[1]), int(k[2])) for k in keys]
        key_list = sorted(set(key_list))
        if not key_list:
            return 0
        if self._last_delete_key is not None and key_list[0] <= self._last_delete_key:
            raise ValueError(
                f"delete keys must be written in ascending order: {key_list[0]} after {self._last_delete_key}"
            )
        for prop in {k[1] for k in key_list}:
            bucket_id, _ = decode_bucket_property(prop)
            if bucket_id != self.bucket_id:
                raise ValueError(
                    f"delete key with bucket property {prop} (bucket {bucket_id}) in the file of bucket {self.bucket_id}"
                )
        for i in range(0, len(key_list), _CHUNK_ROWS):
            part = key_list[i : i + _CHUNK_ROWS]
            self._feed([(DELETE, o, b, r, write_id, None) for o, b, r in part])
        self._last_delete_key = key_list[-1]
        self.deletes += len(key_list)
        return len(key_list)

    def _add_metadata(self, key: str, value: str) -> None:
        if key not in self._metadata_added:
            self._orc._add_user_metadata(key, value.encode())
            self._metadata_added.add(key)

    def flush(self) -> int:
        """Write an intermediate footer; returns the file length up to it (bytes), the value Hive
        appends to the ``_flush_length`` side file (``OrcRecordUpdater.flush``). A flush with no
        new events returns the previous length; 0 when nothing was ever written (no footer yet).
        Only for ``flushable`` writers (ValueError otherwise)."""
        self._check_open()
        if not self.flushable:
            raise ValueError("flush() needs an AcidOrcWriter opened with flushable=True")
        if self.rows == 0:
            return self._flush_length
        try:
            pending = self._rows_since_cut > 0
            self._add_metadata(ACID_VERSION_KEY, str(ORC_ACID_VERSION))
            length = int(self._orc.write_intermediate_footer())
        except BaseException:
            self.state = "broken"
            raise
        if pending and self._last_key is not None:
            self._stripe_keys.append(self._last_key)
            self._rows_since_cut = 0
        self._bytes_seen = self._stream.n
        self._flush_length = length
        return length

    def close(self) -> FileStats:
        """Write the final footer with the ACID metadata and close the file; returns its
        :class:`FileStats`. Closing a closed writer returns the same stats. Raises ValueError for a
        discarded or broken writer; a storage error (OSError) leaves it broken (then :meth:`discard` it)."""
        if self.state == "closed" and self.stats is not None:
            return self.stats
        self._check_open()
        try:
            if self._rows_since_cut > 0 and self._last_key is not None:
                self._stripe_keys.append(self._last_key)  # the last stripe, cut by close
            keys = "".join(f"{o},{b},{r};" for o, b, r in self._stripe_keys)
            # the order Hive's TreeMap of user metadata gives
            self._add_metadata(ACID_KEY_INDEX_KEY, keys)
            self._add_metadata(ACID_STATS_KEY, f"{self.inserts},{self.updates},{self.deletes}")
            self._add_metadata(ACID_VERSION_KEY, str(ORC_ACID_VERSION))
            self._orc.close()
            if self._owns_stream:
                self._stream.close()
            else:
                self._stream.flush()
        except BaseException:
            self.state = "broken"
            raise
        self.state = "closed"
        self.stats = FileStats(
            path=self.path,
            length=self._stream.n,
            rows=self.rows,
            inserts=self.inserts,
            updates=self.updates,
            deletes=self.deletes,
            stripes=len(self._stripe_keys),
            key_index=tuple(self._stripe_keys),
            min_write_id=self.min_write_id,
            max_write_id=self.max_write_id,
            bucket_id=self.bucket_id,
            statement_id=self.statement_id,
        )
        return self.stats

    def discard(self) -> None:
        """Abandon the file: close the stream without a final footer and delete the file (paths
        only; best effort, never raises)."""
        if self.state in ("discarded",):
            return
        was_closed = self.state == "closed"
        self.state = "discarded"
        if not was_closed and self._owns_stream:
            try:
                self._stream.close()
            except Exception:
                pass
        if not self._owns_stream:
            return
        try:
            if self._filesystem is None:
                os.remove(self.path)
            else:
                self._filesystem.delete_file(self.path)
        except Exception:
            pass


def arrow_keys(data: pa.Table | pa.RecordBatch) -> list[Key]:
    """ROW__ID tuples from Arrow columns ``originalTransaction``, ``bucket``, ``rowId``
    (case-insensitive; else the first three columns). ValueError with fewer columns."""
    names = ["originalTransaction", "bucket", "rowId"]
    lower = [n.lower() for n in data.schema.names]
    if all(n.lower() in lower for n in names):
        cols = [data.column(lower.index(n.lower())) for n in names]
    elif data.num_columns >= 3:
        cols = [data.column(i) for i in range(3)]
    else:
        raise ValueError(
            f"delete keys need originalTransaction, bucket, rowId columns, got {data.schema.names}"
        )
    lists = [c.to_pylist() for c in cols]
    return list(zip(*lists, strict=True))


def _row_chunks(
    rows: Iterable[Sequence[Any]] | pa.Table | pa.RecordBatch, names: Sequence[str]
) -> Iterator[list[Any]]:
    """Rows in chunks of Python tuples: one chunk per Arrow record batch, else ``_CHUNK_ROWS``."""
    if isinstance(rows, pa.Table):
        for batch in rows.to_batches(max_chunksize=64 * 1024):
            if batch.num_rows:
                yield arrow_rows(batch, names)
        return
    if isinstance(rows, pa.RecordBatch):
        if rows.num_rows:
            yield arrow_rows(rows, names)
        return
    it = iter(rows)
    while True:
        chunk = list(itertools.islice(it, _CHUNK_ROWS))
        if not chunk:
            return
        yield chunk
