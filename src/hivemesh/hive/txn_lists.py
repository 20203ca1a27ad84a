"""Transaction snapshots of Hive ACID, in Hive's exact string forms.

Three immutable values, each printing and parsing the same text as its Hive counterpart
(``writeToString`` / ``readFromString`` of ``org.apache.hadoop.hive.common``):

* :class:`ValidTxnList` (Hive ``ValidReadTxnList``, conf key ``hive.txn.valid.txns``):
  ``<highWatermark>:<minOpenTxn>:<open txn ids, comma separated>:<aborted txn ids>``,
  e.g. ``174:9223372036854775807::`` (nothing open or aborted) or ``12:5:5,7:6``. Since Hive 3.1
  (storage-api 2.7) a run of 5 or more consecutive txn ids is written ``first-last``:
  ``12:1:1-10:11``. Write-id lists never use ranges.
* :class:`ValidWriteIdList` (Hive ``ValidReaderWriteIdList``, conf key ``hive.txn.valid.writeids``):
  ``<db.table>:<highWatermark>:<minOpenWriteId>:<open write ids>:<aborted write ids>``,
  e.g. ``db.t:3:9223372036854775807::2`` (write id 2 aborted).
* :class:`ValidTxnWriteIdList` (Hive ``ValidTxnWriteIdList``, conf key
  ``hive.txn.tables.valid.writeids``): ``<txnId>$<ValidWriteIdList>$<ValidWriteIdList>...``.

``minOpen`` is ``Long.MAX_VALUE`` (9223372036854775807) when the snapshot has no open id. A reader
treats an id as valid (committed and visible) when it is ``<= highWatermark`` and neither open nor
aborted. Built from metastore answers exactly as Hive's ``TxnCommonUtils.createValidReadTxnList``
and ``createValidReaderWriteIdList`` do (see :meth:`ValidTxnList.from_open_txns` and
:meth:`ValidWriteIdList.from_table_valid_write_ids`); the ``abortedBits`` of those answers are Java
``BitSet.toByteArray()`` bytes (see :func:`bitset_from_bytes` / :func:`bitset_to_bytes`).

Pure Python: no Thrift connection, no Spark.
"""

from __future__ import annotations

import bisect
import enum
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

LONG_MAX = 9223372036854775807  # Java Long.MAX_VALUE: "no open id" in a snapshot
LONG_MIN = -9223372036854775808

VALID_TXNS_KEY = "hive.txn.valid.txns"  # ValidTxnList.VALID_TXNS_KEY
VALID_WRITEIDS_KEY = "hive.txn.valid.writeids"  # ValidWriteIdList.VALID_WRITEIDS_KEY
VALID_TABLES_WRITEIDS_KEY = "hive.txn.tables.valid.writeids"  # ValidTxnWriteIdList.VALID_TABLES_WRITEIDS_KEY

MIN_RANGE_LENGTH = 5  # ValidReadTxnList writes a run of at least 5 consecutive txn ids as "first-last"
MAX_PARSED_IDS = 10_000_000  # refuse snapshot strings whose "a-b" ranges expand to more ids

_LONG = re.compile(r"[+-]?[0-9]+")


class RangeResponse(enum.Enum):
    """Hive ``ValidTxnList.RangeResponse``: how many ids of an inclusive range match."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


# --- Java helpers -----------------------------------------------------------------------------


def bitset_from_bytes(data: bytes | bytearray | memoryview | None) -> frozenset[int]:
    """The set bit indexes of Java ``BitSet.valueOf(byte[])``: little-endian, bit ``n`` is bit
    ``n % 8`` of byte ``n // 8``. ``None`` or empty bytes give the empty set."""
    if not data:
        return frozenset()
    value = int.from_bytes(bytes(data), "little")
    out = []
    i = 0
    while value:
        if value & 1:
            out.append(i)
        value >>= 1
        i += 1
    return frozenset(out)


def bitset_to_bytes(indexes: Iterable[int]) -> bytes:
    """Java ``BitSet.toByteArray()`` of a BitSet with ``indexes`` set: little-endian, no trailing
    zero bytes (the empty set gives ``b""``). Raises ValueError for a negative index."""
    value = 0
    for i in indexes:
        if i < 0:
            raise ValueError(f"negative bit index {i}")
        value |= 1 << i
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


def _java_split(text: str, sep: str) -> list[str]:
    """Java ``String.split`` with a one-character literal separator: trailing empty strings are
    dropped, and ``""`` gives ``[""]``."""
    if text == "":
        return [""]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_long(text: str) -> int:
    """Java ``Long.parseLong``: optional sign, ASCII digits, 64-bit range; ValueError otherwise."""
    if not _LONG.fullmatch(text):
        raise ValueError(f"not a long: {text!r}")
    value = int(text)
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValueError(f"long out of range: {text!r}")
    return value


def _java_binary_search(values: Sequence[int], key: int) -> int:
    """``Collections.binarySearch`` on an ascending list: the index, or ``-(insertion point) - 1``."""
    i = bisect.bisect_left(values, key)
    if i < len(values) and values[i] == key:
        return i
    return -i - 1


def _java_string_hash(key: str | None) -> int:
    """Java ``String.hashCode`` (over UTF-16 code units) as an unsigned 32-bit value; 0 for null."""
    if key is None:
        return 0
    h = 0
    raw = key.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Sequence[str | None]) -> list[int]:
    """Positions of distinct ``keys`` (inserted in this order into a ``new HashMap<>()``) in the
    order Java 8+ ``HashMap`` iterates them.

    Emulates the table growth (capacity 16, load factor 0.75, doubling; a bin reaching 9 entries
    doubles a table smaller than 64) and bucket order (``(n - 1) & (h ^ (h >>> 16))``, insertion
    order inside a bucket). Bins that Java would turn into trees (9+ colliding keys in a table of
    64+) keep insertion order here, which may differ from Java.
    """
    hashes: list[int] = []
    cap = 16
    for key in keys:
        h = _java_string_hash(key)
        h = h ^ (h >> 16)
        idx = h & (cap - 1)
        in_bin = sum(1 for other in hashes if other & (cap - 1) == idx)
        hashes.append(h)
        if in_bin >= 8 and cap < 64:  # treeifyBin on a small table resizes instead
            cap *= 2
        if len(hashes) > cap * 3 // 4:
            cap *= 2
    return sorted(range(len(hashes)), key=lambda i: (hashes[i] & (cap - 1), i))


# --- the shared logic of ValidReadTxnList and ValidReaderWriteIdList ----------------------------


def _ids(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _format_plain(ids: Sequence[int]) -> str:
    """A write-id list as ValidReaderWriteIdList writes it: every id, comma separated."""
    return ",".join(map(str, ids))


def _format_ranges(ids: Sequence[int]) -> str:
    """A txn-id list as ValidReadTxnList writes it: runs of consecutive ids (each one more than the
    previous, in list order) of at least :data:`MIN_RANGE_LENGTH` as ``first-last``, other ids one by
    one, comma separated. Like Hive, a run is tracked from -1, so ids below 0 are dropped and a
    list starting with 0 prints ``-1,0``."""
    parts: list[str] = []

    def flush(lo: int, hi: int) -> None:
        """Append the run ``lo..hi`` as ``a-b`` (5+ ids) or as single ids; nothing for an empty run."""
        if hi < 0:
            return
        if lo == hi:
            parts.append(str(lo))
        elif lo + MIN_RANGE_LENGTH - 1 > hi:
            parts.extend(str(t) for t in range(lo, hi + 1))
        else:
            parts.append(f"{lo}-{hi}")

    lo = hi = -1
    for t in ids:
        if hi + 1 == t:
            hi += 1
        else:
            flush(lo, hi)
            lo = hi = t
    flush(lo, hi)
    return ",".join(parts)


def _parse_plain(text: str) -> list[int]:
    return [_parse_long(v) for v in _java_split(text, ",")]


def _parse_ranges(text: str) -> list[int]:
    """The inverse of :func:`_format_ranges` (Hive ``readTxnListFromRangeString``): ``a-b`` expands
    to ``a..b`` (nothing when ``b < a``), a part after a second ``-`` is ignored."""
    out: list[int] = []
    for token in _java_split(text, ","):
        if "-" not in token:
            out.append(_parse_long(token))
            continue
        parts = _java_split(token, "-")
        if len(parts) < 2:
            raise ValueError(f"bad txn range {token!r}")
        lo, hi = _parse_long(parts[0]), _parse_long(parts[1])
        if len(out) + max(0, hi - lo + 1) > MAX_PARSED_IDS:
            raise ValueError(f"txn range {token!r} holds more than {MAX_PARSED_IDS} ids")
        out.extend(range(lo, hi + 1))
    return out


def _parse_id_lists(
    values: list[str], first: int, parse_list: Callable[[str], list[int]]
) -> tuple[list[int], list[int]]:
    """Open and aborted ids from ``values[first]`` and ``values[first + 1]`` (either may be absent
    or empty). Like Hive, an id listed twice is kept twice."""
    open_ids: list[int] = []
    aborted_ids: list[int] = []
    if len(values) > first and values[first]:
        open_ids = parse_list(values[first])
    if len(values) > first + 1 and values[first + 1]:
        aborted_ids = parse_list(values[first + 1])
    return open_ids, aborted_ids


def _java_merge(open_ids: Sequence[int], aborted_ids: Sequence[int]) -> tuple[int, ...]:
    """ValidReadTxnList's exceptions array after ``readFromString``: the two lists merged by
    comparing their heads (an aborted id goes first on a tie), each list keeping its own order."""
    out: list[int] = []
    i = j = 0
    while i < len(open_ids) or j < len(aborted_ids):
        if j == len(aborted_ids) or (i < len(open_ids) and open_ids[i] < aborted_ids[j]):
            out.append(open_ids[i])
            i += 1
        else:
            out.append(aborted_ids[j])
            j += 1
    return tuple(out)


class _IdSnapshot:
    """Validity checks shared by transaction and write-id snapshots (Hive's ids are longs)."""

    def _state(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        raise NotImplementedError

    @cached_property
    def exceptions(self) -> tuple[int, ...]:
        """Every open or aborted id, ascending (Hive ``getInvalidTransactions``/``getInvalidWriteIds``)."""
        _, _, open_ids, aborted_ids = self._state()
        return tuple(sorted(open_ids + aborted_ids))

    @cached_property
    def _invalid(self) -> frozenset[int]:
        return frozenset(self.exceptions)

    @cached_property
    def _aborted(self) -> frozenset[int]:
        return frozenset(self._state()[3])

    @property
    def aborted_bits(self) -> bytes:
        """Java ``BitSet.toByteArray()`` flagging the aborted entries of :attr:`exceptions`
        (the ``abortedBits`` field of ``GetOpenTxnsResponse``/``TableValidWriteIds``)."""
        return bitset_to_bytes(i for i, v in enumerate(self.exceptions) if v in self._aborted)

    def is_valid(self, id_: int) -> bool:
        """True when ``id_`` is committed in this snapshot: ``<= highWatermark`` and not an exception."""
        return id_ <= self._state()[0] and id_ not in self._invalid

    def is_aborted(self, id_: int) -> bool:
        """True when ``id_`` is listed as aborted."""
        return id_ in self._aborted

    def is_valid_range(self, min_id: int, max_id: int) -> RangeResponse:
        """How many ids of ``min_id..max_id`` (inclusive) are valid: Hive ``isTxnRangeValid`` /
        ``isWriteIdRangeValid`` (ids above the high watermark count as invalid)."""
        hwm = self._state()[0]
        exceptions = self.exceptions
        if min_id > hwm:
            return RangeResponse.NONE
        if exceptions and exceptions[0] > max_id:
            return RangeResponse.ALL
        count = max(0, max_id - hwm) + sum(1 for v in exceptions if min_id <= v <= max_id)
        if count == 0:
            return RangeResponse.ALL
        if count == max_id - min_id + 1:
            return RangeResponse.NONE
        return RangeResponse.SOME

    def is_aborted_range(self, min_id: int, max_id: int) -> RangeResponse:
        """How many ids of ``min_id..max_id`` (inclusive) are aborted: Hive ``isTxnRangeAborted`` /
        ``isWriteIdRangeAborted``."""
        hwm, _, _, aborted_ids = self._state()
        if hwm < min_id:
            return RangeResponse.NONE
        count = 0
        for v in aborted_ids:  # in exceptions order, stopping past the range as Hive does
            if v > max_id:
                break
            if v >= min_id:
                count += 1
        if count == 0:
            return RangeResponse.NONE
        if count == max_id - min_id + 1:
            return RangeResponse.ALL
        return RangeResponse.SOME


# --- ValidTxnList -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidTxnList(_IdSnapshot):
    """A reader's transaction snapshot: Hive ``ValidReadTxnList``.

    String form (``str()`` / :meth:`to_string`, parsed by :meth:`parse`):
    ``<highWatermark>:<minOpenTxn>:<open txn ids,>:<aborted txn ids,>``, e.g.
    ``174:9223372036854775807::``. ``min_open_txn`` is :data:`LONG_MAX` when nothing is open.
    ``open_txns``/``aborted_txns`` print in the order given (ascending in every list Hive builds).
    """

    high_watermark: int
    min_open_txn: int = LONG_MAX
    open_txns: tuple[int, ...] = ()
    aborted_txns: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_txns", _ids(self.open_txns))
        object.__setattr__(self, "aborted_txns", _ids(self.aborted_txns))

    def _state(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        return self.high_watermark, self.min_open_txn, self.open_txns, self.aborted_txns

    @property
    def min_open(self) -> int | None:
        """The lowest open txn id, or None when none is open (Hive ``getMinOpenTxn``)."""
        return None if self.min_open_txn == LONG_MAX else self.min_open_txn

    @cached_property
    def exceptions(self) -> tuple[int, ...]:
        """Every open or aborted txn id in Hive's array order (ascending in any list Hive builds;
        ``readFromString`` merges the open and aborted lists by their heads)."""
        return _java_merge(self.open_txns, self.aborted_txns)

    def to_string(self) -> str:
        """Hive ``ValidReadTxnList.writeToString`` (Hive 3.1+/4: runs of 5+ consecutive ids as ``a-b``)."""
        open_s, aborted_s = _format_ranges(self.open_txns), _format_ranges(self.aborted_txns)
        return f"{self.high_watermark}:{self.min_open_txn}:{open_s}:{aborted_s}"

    def __str__(self) -> str:
        return self.to_string()

    @classmethod
    def parse(cls, text: str | None) -> ValidTxnList:
        """Hive ``ValidReadTxnList.readFromString``. ``None`` or ``""`` gives the "everything
        valid" snapshot ``9223372036854775807:9223372036854775807::``. Raises ValueError for text
        Hive could not read (missing fields, bad numbers) and for an id listed twice."""
        if not text:
            return cls(LONG_MAX)
        values = _java_split(text, ":")
        if len(values) < 2:
            raise ValueError(f"not a ValidTxnList: {text!r}")
        open_ids, aborted_ids = _parse_id_lists(values, 2, _parse_ranges)
        return cls(_parse_long(values[0]), _parse_long(values[1]), tuple(open_ids), tuple(aborted_ids))

    def is_txn_valid(self, txn_id: int) -> bool:
        """Hive ``isTxnValid``: committed as of this snapshot."""
        return self.is_valid(txn_id)

    def is_txn_aborted(self, txn_id: int) -> bool:
        """Hive ``isTxnAborted``."""
        return self.is_aborted(txn_id)

    def is_txn_range_valid(self, min_txn: int, max_txn: int) -> RangeResponse:
        """Hive ``isTxnRangeValid`` (inclusive range)."""
        return self.is_valid_range(min_txn, max_txn)

    def is_txn_range_aborted(self, min_txn: int, max_txn: int) -> RangeResponse:
        """Hive ``isTxnRangeAborted`` (inclusive range)."""
        return self.is_aborted_range(min_txn, max_txn)

    @classmethod
    def from_open_txns(cls, response: Any, current_txn: int | None = None) -> ValidTxnList:
        """Hive ``TxnCommonUtils.createValidReadTxnList(GetOpenTxnsResponse, currentTxn)``.

        ``response``: a ``GetOpenTxnsResponse`` (``txn_high_water_mark``, ascending ``open_txns``
        holding open and aborted txns, ``abortedBits`` as Java BitSet bytes over ``open_txns``).
        ``current_txn``: the reader's own txn id, or None/0 for a reader outside a txn. With a
        current txn the high watermark is capped at it and only txns below it are kept, so the
        reader sees its own writes and nothing committed after it opened. ``minOpenTxn`` is the
        first kept txn that is not aborted (:data:`LONG_MAX` when none).

        Reproduces Hive 4's handling of a current txn that is missing from ``open_txns`` (e.g. a
        read-only txn the metastore leaves out): the exceptions array is sized
        ``min(|binarySearch|, len(open_txns))``, which leaves one unused slot, so a ``0`` is
        printed as an open txn when some listed txn is above the current one
        (``open_txns=[5, 9]``, current 7 -> ``7:5:5,0:``).
        """
        current = int(current_txn or 0)
        hwm = int(response.txn_high_water_mark)
        open_list = [int(t) for t in (response.open_txns or [])]
        if any(a >= b for a, b in zip(open_list, open_list[1:], strict=False)):
            raise ValueError("GetOpenTxnsResponse.open_txns is not strictly ascending")
        high_watermark = min(current, hwm) if current > 0 else hwm
        if current > 0:
            size = min(abs(_java_binary_search(open_list, current)), len(open_list))
        else:
            size = len(open_list)
        aborted_in = bitset_from_bytes(response.abortedBits)
        exceptions = [0] * size
        aborted_out: set[int] = set()
        min_open = LONG_MAX
        for i, txn in enumerate(open_list):
            if current > 0 and txn >= current:
                break
            if i in aborted_in:
                aborted_out.add(i)
            elif min_open == LONG_MAX:
                min_open = txn
            exceptions[i] = txn
        return cls(
            high_watermark,
            min_open if exceptions else LONG_MAX,
            tuple(t for j, t in enumerate(exceptions) if j not in aborted_out),
            tuple(t for j, t in enumerate(exceptions) if j in aborted_out),
        )


# --- ValidWriteIdList ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidWriteIdList(_IdSnapshot):
    """A reader's write-id snapshot of one table: Hive ``ValidReaderWriteIdList``.

    String form: ``<db.table>:<highWatermark>:<minOpenWriteId>:<open write ids,>:<aborted write
    ids,>``, e.g. ``db.t:3:9223372036854775807::2``. ``table_name`` None prints as ``null``.
    """

    table_name: str | None
    high_watermark: int
    min_open_write_id: int = LONG_MAX
    open_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_write_ids", _ids(self.open_write_ids))
        object.__setattr__(self, "aborted_write_ids", _ids(self.aborted_write_ids))

    def _state(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        return self.high_watermark, self.min_open_write_id, self.open_write_ids, self.aborted_write_ids

    @property
    def min_open(self) -> int | None:
        """The lowest open write id, or None when none is open (Hive ``getMinOpenWriteId``)."""
        return None if self.min_open_write_id == LONG_MAX else self.min_open_write_id

    def to_string(self) -> str:
        """Hive ``ValidReaderWriteIdList.writeToString``."""
        name = "null" if self.table_name is None else self.table_name
        open_s, aborted_s = _format_plain(self.open_write_ids), _format_plain(self.aborted_write_ids)
        return f"{name}:{self.high_watermark}:{self.min_open_write_id}:{open_s}:{aborted_s}"

    def __str__(self) -> str:
        return self.to_string()

    @classmethod
    def parse(cls, text: str | None) -> ValidWriteIdList:
        """Hive ``ValidReaderWriteIdList.readFromString``. A table name ``null`` (any case) reads
        as None; ``None``/``""`` gives ``null:9223372036854775807:9223372036854775807::``.
        Raises ValueError for text Hive could not read and for an id listed twice."""
        if not text:
            return cls(None, LONG_MAX)
        values = _java_split(text, ":")
        if len(values) < 3:
            raise ValueError(f"not a ValidWriteIdList: {text!r}")
        name: str | None = values[0]
        if name is not None and name.lower() == "null":
            name = None
        open_ids, aborted_ids = _parse_id_lists(values, 3, _parse_plain)
        # Hive sorts the ids of a parsed ValidReaderWriteIdList
        return cls(
            name,
            _parse_long(values[1]),
            _parse_long(values[2]),
            tuple(sorted(open_ids)),
            tuple(sorted(aborted_ids)),
        )

    def is_write_id_valid(self, write_id: int) -> bool:
        """Hive ``isWriteIdValid``: written by a txn committed as of this snapshot."""
        return self.is_valid(write_id)

    def is_write_id_aborted(self, write_id: int) -> bool:
        """Hive ``isWriteIdAborted``."""
        return self.is_aborted(write_id)

    def is_write_id_range_valid(self, min_write_id: int, max_write_id: int) -> RangeResponse:
        """Hive ``isWriteIdRangeValid`` (inclusive range)."""
        return self.is_valid_range(min_write_id, max_write_id)

    def is_write_id_range_aborted(self, min_write_id: int, max_write_id: int) -> RangeResponse:
        """Hive ``isWriteIdRangeAborted`` (inclusive range)."""
        return self.is_aborted_range(min_write_id, max_write_id)

    def is_valid_base(self, write_id: int) -> bool:
        """Hive ``isValidBase``: a ``base_<writeId>`` is usable only below every open write id
        and at or below the high watermark."""
        return write_id < self.min_open_write_id and write_id <= self.high_watermark

    def update_high_watermark(self, value: int) -> ValidWriteIdList:
        """Hive ``updateHighWatermark``: the same lists with another high watermark."""
        min_open = self.min_open_write_id if self.exceptions else LONG_MAX
        return replace(self, high_watermark=value, min_open_write_id=min_open)

    @classmethod
    def from_table_valid_write_ids(cls, t: Any) -> ValidWriteIdList:
        """Hive ``TxnCommonUtils.createValidReaderWriteIdList(TableValidWriteIds)``.

        ``t``: a ``TableValidWriteIds`` (``fullTableName``, ``writeIdHighWaterMark``, ascending
        ``invalidWriteIds``, optional ``minOpenWriteId``, ``abortedBits`` as Java BitSet bytes
        over ``invalidWriteIds``). ``minOpenWriteId`` is kept only when some id is invalid.
        """
        invalid = [int(w) for w in (t.invalidWriteIds or [])]
        aborted = bitset_from_bytes(t.abortedBits)
        min_open = LONG_MAX
        if t.minOpenWriteId is not None and invalid:
            min_open = int(t.minOpenWriteId)
        return cls(
            t.fullTableName,
            int(t.writeIdHighWaterMark),
            min_open,
            tuple(w for i, w in enumerate(invalid) if i not in aborted),
            tuple(w for i, w in enumerate(invalid) if i in aborted),
        )

    def to_table_valid_write_ids(self) -> Any:
        """This snapshot as a Thrift ``TableValidWriteIds`` (what ``get_valid_write_ids`` answers)."""
        from hive_metastore.ttypes import TableValidWriteIds

        return TableValidWriteIds(
            fullTableName=self.table_name,
            writeIdHighWaterMark=self.high_watermark,
            invalidWriteIds=list(self.exceptions),
            minOpenWriteId=self.min_open,
            abortedBits=self.aborted_bits,
        )


# --- ValidTxnWriteIdList ------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidTxnWriteIdList:
    """The write-id snapshots of every table a txn reads: Hive ``ValidTxnWriteIdList``.

    String form: ``<txnId>$<ValidWriteIdList>$<ValidWriteIdList>...`` (just ``<txnId>`` with no
    table). Hive keeps the tables in a ``HashMap`` keyed by full table name and prints them in its
    iteration order; :meth:`to_string` reproduces that order (:func:`java_hashmap_order`).
    ``tables`` holds one entry per name in insertion order; a repeated name replaces the earlier
    entry in place, as ``HashMap.put`` does.
    """

    txn_id: int
    tables: tuple[ValidWriteIdList, ...] = field(default=())

    def __post_init__(self) -> None:
        by_name: dict[str | None, ValidWriteIdList] = {}
        for t in self.tables:
            by_name[t.table_name] = t
        object.__setattr__(self, "tables", tuple(by_name.values()))

    def get(self, table_name: str | None) -> ValidWriteIdList | None:
        """The snapshot of ``table_name`` (``db.table``), or None (Hive ``getTableValidWriteIdList``)."""
        for t in self.tables:
            if t.table_name == table_name:
                return t
        return None

    @property
    def table_names(self) -> list[str | None]:
        """Names of the tables, in insertion order."""
        return [t.table_name for t in self.tables]

    def with_table(self, table: ValidWriteIdList) -> ValidTxnWriteIdList:
        """A copy with ``table`` added (or replacing the entry of the same name)."""
        return ValidTxnWriteIdList(self.txn_id, (*self.tables, table))

    def to_string(self) -> str:
        """Hive ``ValidTxnWriteIdList.writeToString``."""
        order = java_hashmap_order([t.table_name for t in self.tables])
        return "".join([str(self.txn_id), *("$" + self.tables[i].to_string() for i in order)])

    def __str__(self) -> str:
        return self.to_string()

    @classmethod
    def parse(cls, text: str) -> ValidTxnWriteIdList:
        """Hive ``ValidTxnWriteIdList.readFromString``. Raises ValueError for empty text (Hive
        would then hold no txn id and fail to print) and for malformed parts."""
        if not text:
            raise ValueError("empty ValidTxnWriteIdList")
        parts = _java_split(text, "$")
        if not parts:
            raise ValueError(f"not a ValidTxnWriteIdList: {text!r}")
        return cls(_parse_long(parts[0]), tuple(ValidWriteIdList.parse(p) for p in parts[1:]))

    @classmethod
    def from_table_valid_write_ids(cls, txn_id: int, tables: Iterable[Any]) -> ValidTxnWriteIdList:
        """Hive ``TxnCommonUtils.createValidTxnWriteIdList(currentTxnId, List<TableValidWriteIds>)``."""
        return cls(int(txn_id), tuple(ValidWriteIdList.from_table_valid_write_ids(t) for t in tables))
