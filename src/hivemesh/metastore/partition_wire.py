"""Partitions encoded straight from store rows into Thrift's binary protocol.

``get_partitions`` of a whole table is the metastore's largest common answer: 1,000 partitions
are about 10,000 Thrift objects (each partition's values, storage descriptor, SerDe and
parameters) that the generated code builds in Python only for the C encoder to walk them again.
:func:`encode_partitions` writes the same bytes from the rows :mod:`hivemesh.metastore.rows`
reads, without building any object: the parts every partition of a table shares (its column list,
the empty skew information, database, table and catalog names) are encoded once per call. The
output is byte for byte what ``TBinaryProtocolAccelerated`` writes for the
:func:`hivemesh.metastore.rows.load_table_partitions` objects (tested), field ids and types taken
from the generated ``thrift_spec`` so they cannot drift from the IDL.

Format: a Thrift binary-protocol ``list<Partition>`` body (element type, size, structs), as
``get_partitions_result.success`` carries it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import FieldSchema, Order, Partition, SerDeInfo, StorageDescriptor
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.Thrift import TType
from thrift.transport.TTransport import TMemoryBuffer

from hivemesh.metastore import rows

__all__ = ["GET_PARTITIONS_SUCCESS", "encode_partitions", "list_header"]

_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_STOP = b"\x00"
_TRUE = b"\x01"
_FALSE = b"\x00"


def _header(cls: type, name: str) -> bytes:
    """The binary field header (type byte, i16 id) of field ``name`` of a generated struct."""
    for spec in cls.thrift_spec:  # type: ignore[attr-defined]
        if spec is not None and spec[2] == name:
            return struct.pack(">bh", spec[1], spec[0])
    raise KeyError(f"{cls.__name__} has no field {name}")


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I32(len(b)) + b


def list_header(element_type: int, size: int) -> bytes:
    """A binary-protocol list header: element type byte and i32 size."""
    return struct.pack(">bi", element_type, size)


def _string_list(values: Sequence[str]) -> bytes:
    return b"".join([list_header(TType.STRING, len(values)), *map(_string, values)])


def _encoded(obj: Any) -> bytes:
    """``obj`` (a generated struct) encoded by the thrift library, for parts shared by all rows."""
    buf = TMemoryBuffer()
    obj.write(TBinaryProtocolAccelerated(buf))
    data: bytes = buf.getvalue()
    return data


GET_PARTITIONS_SUCCESS = _header(ThriftHiveMetastore.get_partitions_result, "success")
"""The field header of ``get_partitions_result.success`` (a list): what precedes the list body."""
_P_VALUES = _header(Partition, "values")
_P_DB = _header(Partition, "dbName")
_P_TABLE = _header(Partition, "tableName")
_P_CREATE = _header(Partition, "createTime")
_P_ACCESS = _header(Partition, "lastAccessTime")
_P_SD = _header(Partition, "sd")
_P_PARAMS = _header(Partition, "parameters")
_P_CAT = _header(Partition, "catName")
_P_WRITE_ID = _header(Partition, "writeId")
_SD_COLS = _header(StorageDescriptor, "cols")
_SD_LOCATION = _header(StorageDescriptor, "location")
_SD_INPUT = _header(StorageDescriptor, "inputFormat")
_SD_OUTPUT = _header(StorageDescriptor, "outputFormat")
_SD_COMPRESSED = _header(StorageDescriptor, "compressed")
_SD_BUCKETS = _header(StorageDescriptor, "numBuckets")
_SD_SERDE = _header(StorageDescriptor, "serdeInfo")
_SD_BUCKET_COLS = _header(StorageDescriptor, "bucketCols")
_SD_SORT_COLS = _header(StorageDescriptor, "sortCols")
_SD_PARAMS = _header(StorageDescriptor, "parameters")
_SD_SKEW = _header(StorageDescriptor, "skewedInfo") + _encoded(rows.NO_SKEW)
_SD_SUBDIRS = _header(StorageDescriptor, "storedAsSubDirectories")
_SE_FIELDS = [  # SerDeInfo's fields after its parameters, with their positions in a row
    (_header(SerDeInfo, "description"), 11),
    (_header(SerDeInfo, "serializerClass"), 12),
    (_header(SerDeInfo, "deserializerClass"), 13),
]
_SE_NAME = _header(SerDeInfo, "name")
_SE_LIB = _header(SerDeInfo, "serializationLib")
_SE_PARAMS = _header(SerDeInfo, "parameters")
_SE_TYPE = _header(SerDeInfo, "serdeType")
_EMPTY_STRINGS = list_header(TType.STRING, 0)
_EMPTY_MAP = struct.pack(">bbi", TType.STRING, TType.STRING, 0)


class _Encoder:
    """One call's encoder: strings, maps, column lists and SerDe structs that repeat across the
    partitions of a table (formats, parameter keys and values, the SerDe) are encoded once."""

    def __init__(self, ch: rows.Children):
        self.ch = ch
        self._strings: dict[str, bytes] = {}
        self._maps: dict[tuple[tuple[str, str], ...], bytes] = {}
        self._columns: dict[Any, bytes] = {}
        self._serdes: dict[tuple[Any, ...], bytes] = {}

    def string(self, s: str) -> bytes:
        """``s`` as a binary-protocol string (i32 byte length, UTF-8 bytes)."""
        got = self._strings.get(s)
        if got is None:
            got = self._strings[s] = _string(s)
        return got

    def string_map(self, d: dict[str, str] | None) -> bytes:
        """``d`` (None: empty) as a binary-protocol ``map<string,string>``: key and value type
        bytes, i32 size, then each key and value in ``d``'s order (the library's order)."""
        if not d:
            return _EMPTY_MAP
        key = tuple(d.items())
        got = self._maps.get(key)
        if got is None:
            s = self.string
            parts = [struct.pack(">bbi", TType.STRING, TType.STRING, len(d))]
            for k, v in key:
                parts.append(s(k))
                parts.append(s(v))
            got = self._maps[key] = b"".join(parts)
        return got

    def columns(self, cd: Any) -> bytes:
        """The ``cols`` field of a column descriptor."""
        got = self._columns.get(cd)
        if got is None:
            cols = [FieldSchema(name=k, type=v, comment=c) for _, k, v, c in self.ch.ordered(rows.COLUMN, cd)]
            body = b"".join(_encoded(c) for c in cols)
            got = self._columns[cd] = _SD_COLS + list_header(TType.STRUCT, len(cols)) + body
        return got

    def serde(self, f: Sequence[Any], params: dict[str, str] | None) -> bytes:
        """The ``serdeInfo`` field from the SerDe values of a row and the SerDe's parameters."""
        key = (*f[9:15], *(params or {}).items())
        got = self._serdes.get(key)
        if got is None:
            s = self.string
            out = [_SD_SERDE]
            if f[9] is not None:
                out.append(_SE_NAME + s(f[9]))
            if f[10] is not None:
                out.append(_SE_LIB + s(f[10]))
            out.append(_SE_PARAMS + self.string_map(params))
            for header, i in _SE_FIELDS:
                if f[i] is not None:
                    out.append(header + s(f[i]))
            if f[14] is not None:
                out.append(_SE_TYPE + _I32(f[14]))
            out.append(_STOP)
            got = self._serdes[key] = b"".join(out)
        return got

    def sd(self, f: Sequence[Any], out: list[bytes]) -> None:
        """Append the StorageDescriptor struct of the :data:`rows._SD_FIELDS` values ``f``."""
        sd_id, cd, serde_id, input_fmt, output_fmt, location, compressed, subdirs, buckets = f[:9]
        ch, s = self.ch, self.string
        out.append(self.columns(cd))
        if location is not None:
            out.append(_SD_LOCATION + _string(location))
        if input_fmt is not None:
            out.append(_SD_INPUT + s(input_fmt))
        if output_fmt is not None:
            out.append(_SD_OUTPUT + s(output_fmt))
        out.append(_SD_COMPRESSED + (_TRUE if compressed else _FALSE))
        if buckets is not None:
            out.append(_SD_BUCKETS + _I32(buckets))
        if serde_id is not None:
            out.append(self.serde(f, ch.params.get((rows.SERDE_PARAM, sd_id))))
        bucket_cols = ch.ordered(rows.BUCKET, sd_id)
        out.append(
            _SD_BUCKET_COLS
            + (_string_list([k for _, k, _, _ in bucket_cols]) if bucket_cols else _EMPTY_STRINGS)
        )
        sort_cols = ch.ordered(rows.SORT, sd_id)
        out.append(_SD_SORT_COLS + list_header(TType.STRUCT, len(sort_cols)))
        for _, k, v, _ in sort_cols:
            out.append(_encoded(Order(col=k, order=int(v))))
        out.append(_SD_PARAMS + self.string_map(ch.params.get((rows.SD_PARAM, sd_id))))
        out.append(_SD_SKEW)
        out.append(_SD_SUBDIRS + (_TRUE if subdirs else _FALSE))
        out.append(_STOP)


def encode_partitions(base: Sequence[Sequence[Any]], ch: rows.Children, db: str, tbl: str, cat: str) -> bytes:
    """The ``list<Partition>`` of the partition rows ``base`` (:data:`rows._PART_SELECT` order)
    and their child rows ``ch``, exactly as the generated code encodes the partitions
    :func:`rows.load_table_partitions` builds from the same rows (see the module doc)."""
    names = _P_DB + _string(db) + _P_TABLE + _string(tbl)
    catalog = _P_CAT + _string(cat)
    enc = _Encoder(ch)
    out: list[bytes] = [list_header(TType.STRUCT, len(base))]
    params_of, ordered, s = ch.params, ch.ordered, enc.string
    for t in base:  # (PART_ID, CREATE_TIME, LAST_ACCESS_TIME, WRITE_ID, *_SD_FIELDS)
        pid = t[0]
        values = ordered(rows.PART_VAL, pid)
        out.append(_P_VALUES + list_header(TType.STRING, len(values)))
        out.extend([s(k) for _, k, _, _ in values])
        out.append(names)
        if t[1] is not None:
            out.append(_P_CREATE + _I32(t[1]))
        if t[2] is not None:
            out.append(_P_ACCESS + _I32(t[2]))
        if t[4] is not None:
            out.append(_P_SD)
            enc.sd(t[4:], out)
        out.append(_P_PARAMS + enc.string_map(params_of.get((rows.PART_PARAM, pid))))
        out.append(catalog)
        out.append(_P_WRITE_ID + _I64(t[3] if t[3] and t[3] > 0 else -1))
        out.append(_STOP)
    return b"".join(out)
