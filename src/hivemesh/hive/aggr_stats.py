"""Column statistics of a set of partitions merged into one per column: ``get_aggr_stats_for``.

Follows the Hive 4 metastore's direct-SQL aggregation with its defaults (no NDV density function,
``hive.metastore.stats.ndv.tuner`` 0, bit vectors not fetched):

- a column with statistics in every requested partition, or in fewer than two: lows are the
  minimum, highs the maximum, null/true/false counts the sum, the number of distinct values, the
  average and the maximum length the maximum over the partitions; for integer, date and timestamp
  columns the distinct count is capped by ``high - low + 1``;
- a column with statistics in some (at least two) but not all requested partitions is
  *extrapolated* linearly: the partitions are numbered in request order, a low or high (or a
  maximum such as the distinct count) is extended from the partitions holding the smallest and the
  largest value to the border of the range, and sums are scaled to the number of requested
  partitions (``sum / found * requested``, integer division).

Which statistics a column has, and how the result is typed, follows the column type recorded with
the statistics (``COLUMN_TYPE``), as Hive does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal as PyDecimal
from typing import Any

from hive_metastore.ttypes import (
    BinaryColumnStatsData,
    BooleanColumnStatsData,
    ColumnStatisticsData,
    ColumnStatisticsObj,
    Date,
    DateColumnStatsData,
    Decimal,
    DecimalColumnStatsData,
    DoubleColumnStatsData,
    LongColumnStatsData,
    StringColumnStatsData,
    Timestamp,
    TimestampColumnStatsData,
)

__all__ = ["PartitionStats", "aggregate_column", "decimal_of", "stat_values"]

# Hive's statistics columns (PART_COL_STATS), in the order its extrapolation numbers them.
LONG_LOW, LONG_HIGH, DOUBLE_LOW, DOUBLE_HIGH, DEC_LOW, DEC_HIGH = range(6)
NUM_NULLS, NUM_DISTINCTS, AVG_COL_LEN, MAX_COL_LEN, NUM_TRUES, NUM_FALSES = range(6, 12)
_N_STATS = 12
_MIN = frozenset({LONG_LOW, DOUBLE_LOW, DEC_LOW})
_SUM = frozenset({NUM_NULLS, NUM_TRUES, NUM_FALSES})
_FLOATING = frozenset({DOUBLE_LOW, DOUBLE_HIGH, AVG_COL_LEN})
_DECIMAL = frozenset({DEC_LOW, DEC_HIGH})
_LONG_KIND = (LONG_LOW, LONG_HIGH, NUM_NULLS, NUM_DISTINCTS)
# the statistics extrapolated for each column type name (exact, lower case); others: all of them
_EXTRAPOLATED: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("bigint", "int", "smallint", "tinyint", "date", "timestamp", "long"), _LONG_KIND),
    **dict.fromkeys(("double", "float"), (DOUBLE_LOW, DOUBLE_HIGH, NUM_NULLS, NUM_DISTINCTS)),
    **dict.fromkeys(("varchar", "char", "string"), (AVG_COL_LEN, MAX_COL_LEN, NUM_NULLS, NUM_DISTINCTS)),
    "boolean": (NUM_TRUES, NUM_FALSES, NUM_NULLS),
    "binary": (AVG_COL_LEN, MAX_COL_LEN, NUM_NULLS),
    "decimal": (DEC_LOW, DEC_HIGH, NUM_NULLS, NUM_DISTINCTS),
}
_INTEGER_TYPES = frozenset({"bigint", "int", "smallint", "tinyint"})


@dataclass(frozen=True)
class PartitionStats:
    """One partition's statistics of one column: its position in the request and the values of
    :func:`stat_values` (None where unset)."""

    index: int
    values: tuple[Any, ...]


def decimal_of(value: Decimal | None) -> PyDecimal | None:
    """A Thrift ``Decimal`` (big-endian two's complement ``unscaled``, ``scale``) as a Python Decimal."""
    if value is None or value.unscaled is None:
        return None
    unscaled = int.from_bytes(value.unscaled, "big", signed=True)
    return PyDecimal(unscaled).scaleb(-(value.scale or 0))


def _thrift_decimal(value: PyDecimal) -> Decimal:
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -int(exponent)
    if scale < 0:  # Hive keeps no negative scales
        unscaled, scale = unscaled * 10**-scale, 0
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return Decimal(unscaled=unscaled.to_bytes(length, "big", signed=True), scale=scale)


def stat_values(data: ColumnStatisticsData) -> tuple[Any, ...]:
    """The twelve PART_COL_STATS values of one ``ColumnStatisticsData`` (Hive's column order)."""
    out: list[Any] = [None] * _N_STATS
    if data.booleanStats is not None:
        s = data.booleanStats
        out[NUM_TRUES], out[NUM_FALSES], out[NUM_NULLS] = s.numTrues, s.numFalses, s.numNulls
    elif data.longStats is not None:
        s = data.longStats
        out[LONG_LOW], out[LONG_HIGH], out[NUM_NULLS], out[NUM_DISTINCTS] = (
            s.lowValue, s.highValue, s.numNulls, s.numDVs,
        )  # fmt: skip
    elif data.doubleStats is not None:
        s = data.doubleStats
        out[DOUBLE_LOW], out[DOUBLE_HIGH], out[NUM_NULLS], out[NUM_DISTINCTS] = (
            s.lowValue, s.highValue, s.numNulls, s.numDVs,
        )  # fmt: skip
    elif data.stringStats is not None:
        s = data.stringStats
        out[MAX_COL_LEN], out[AVG_COL_LEN], out[NUM_NULLS], out[NUM_DISTINCTS] = (
            s.maxColLen, s.avgColLen, s.numNulls, s.numDVs,
        )  # fmt: skip
    elif data.binaryStats is not None:
        s = data.binaryStats
        out[MAX_COL_LEN], out[AVG_COL_LEN], out[NUM_NULLS] = s.maxColLen, s.avgColLen, s.numNulls
    elif data.decimalStats is not None:
        s = data.decimalStats
        out[DEC_LOW], out[DEC_HIGH] = decimal_of(s.lowValue), decimal_of(s.highValue)
        out[NUM_NULLS], out[NUM_DISTINCTS] = s.numNulls, s.numDVs
    elif data.dateStats is not None:
        s = data.dateStats
        out[LONG_LOW] = s.lowValue.daysSinceEpoch if s.lowValue else None
        out[LONG_HIGH] = s.highValue.daysSinceEpoch if s.highValue else None
        out[NUM_NULLS], out[NUM_DISTINCTS] = s.numNulls, s.numDVs
    elif data.timestampStats is not None:
        s = data.timestampStats
        out[LONG_LOW] = s.lowValue.secondsSinceEpoch if s.lowValue else None
        out[LONG_HIGH] = s.highValue.secondsSinceEpoch if s.highValue else None
        out[NUM_NULLS], out[NUM_DISTINCTS] = s.numNulls, s.numDVs
    return tuple(out)


def _java_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (Java's ``long / long``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _plain(rows: Sequence[PartitionStats]) -> list[Any]:
    out: list[Any] = [None] * _N_STATS
    for i in range(_N_STATS):
        present = [r.values[i] for r in rows if r.values[i] is not None]
        if not present:
            continue
        if i in _SUM:
            out[i] = sum(present)
        elif i in _MIN:
            out[i] = min(present)
        else:
            out[i] = max(present)
    return out


def _extrapolate_border(stat: int, low: PartitionStats, high: PartitionStats, last: int) -> Any:
    """Linear extrapolation from the partitions with the smallest (``low``) and largest (``high``)
    value of one statistic to the border of the partition range ``[0, last]``."""
    lo, hi, li, hj = low.values[stat], high.values[stat], low.index, high.index
    if li == hj:
        return lo
    as_float = stat in _FLOATING or stat in _DECIMAL
    if as_float:
        lo, hi = float(lo), float(hi)
    if stat not in _MIN:  # a maximum: extend towards the side the values grow to
        if li < hj:
            value = (
                lo + (hi - lo) * (last - li) / (hj - li)
                if as_float
                else lo + _java_div((hi - lo) * (last - li), hj - li)
            )
        else:
            value = lo + (hi - lo) * li / (li - hj) if as_float else lo + _java_div((hi - lo) * li, li - hj)
    elif li < hj:  # a minimum at the left border
        value = hi - (hi - lo) * hj / (hj - li) if as_float else hi - _java_div((hi - lo) * hj, hj - li)
    else:  # a minimum at the right border
        value = (
            hi - (hi - lo) * (last - hj) / (li - hj)
            if as_float
            else hi - _java_div((hi - lo) * (last - hj), li - hj)
        )
    if stat in _DECIMAL:
        return PyDecimal(repr(value))
    return value


def _extrapolated(col_type: str, rows: Sequence[PartitionStats], requested: int) -> list[Any]:
    out: list[Any] = [None] * _N_STATS
    found = len(rows)
    kind = "decimal" if col_type.startswith("decimal") else col_type
    for stat in _EXTRAPOLATED.get(kind, tuple(range(_N_STATS))):
        if stat in _SUM:
            present = [r.values[stat] for r in rows if r.values[stat] is not None]
            out[stat] = _java_div(sum(present), found) * requested if present else None
            continue
        # ascending by value, unset values last (as SQL orders NULLs on Derby and PostgreSQL)
        ordered = sorted(rows, key=lambda r: (r.values[stat] is None, r.values[stat] or 0, r.index))
        low, high = ordered[0], ordered[-1]
        if low.values[stat] is None or high.values[stat] is None:
            continue
        out[stat] = _extrapolate_border(stat, low, high, requested - 1)
    return out


def _distinct(values: list[Any], capped: bool) -> int:
    ndv = values[NUM_DISTINCTS] or 0
    if capped and values[LONG_LOW] is not None and values[LONG_HIGH] is not None:
        ndv = min(ndv, values[LONG_HIGH] - values[LONG_LOW] + 1)
    return int(ndv)


def _typed(col_type: str, v: list[Any]) -> ColumnStatisticsData:
    """Hive's StatObjectConverter.fillColumnStatisticsData for the aggregated values."""
    t = col_type.lower()
    nulls = v[NUM_NULLS]
    if t == "boolean":
        return ColumnStatisticsData(
            booleanStats=BooleanColumnStatsData(
                numTrues=v[NUM_TRUES], numFalses=v[NUM_FALSES], numNulls=nulls
            )
        )
    if t == "string" or t.startswith(("varchar", "char")):
        avg = None if v[AVG_COL_LEN] is None else float(v[AVG_COL_LEN])
        return ColumnStatisticsData(
            stringStats=StringColumnStatsData(
                maxColLen=v[MAX_COL_LEN], avgColLen=avg, numNulls=nulls, numDVs=v[NUM_DISTINCTS]
            )
        )
    if t == "binary":
        avg = None if v[AVG_COL_LEN] is None else float(v[AVG_COL_LEN])
        return ColumnStatisticsData(
            binaryStats=BinaryColumnStatsData(maxColLen=v[MAX_COL_LEN], avgColLen=avg, numNulls=nulls)
        )
    if t in _INTEGER_TYPES:
        return ColumnStatisticsData(
            longStats=LongColumnStatsData(
                lowValue=v[LONG_LOW], highValue=v[LONG_HIGH], numNulls=nulls, numDVs=_distinct(v, True)
            )
        )
    if t == "date":
        return ColumnStatisticsData(
            dateStats=DateColumnStatsData(
                lowValue=None if v[LONG_LOW] is None else Date(v[LONG_LOW]),
                highValue=None if v[LONG_HIGH] is None else Date(v[LONG_HIGH]),
                numNulls=nulls,
                numDVs=_distinct(v, True),
            )
        )
    if t == "timestamp":
        return ColumnStatisticsData(
            timestampStats=TimestampColumnStatsData(
                lowValue=None if v[LONG_LOW] is None else Timestamp(v[LONG_LOW]),
                highValue=None if v[LONG_HIGH] is None else Timestamp(v[LONG_HIGH]),
                numNulls=nulls,
                numDVs=_distinct(v, True),
            )
        )
    if t in ("double", "float"):
        return ColumnStatisticsData(
            doubleStats=DoubleColumnStatsData(
                lowValue=None if v[DOUBLE_LOW] is None else float(v[DOUBLE_LOW]),
                highValue=None if v[DOUBLE_HIGH] is None else float(v[DOUBLE_HIGH]),
                numNulls=nulls,
                numDVs=_distinct(v, False),
            )
        )
    if t.startswith("decimal"):
        return ColumnStatisticsData(
            decimalStats=DecimalColumnStatsData(
                lowValue=None if v[DEC_LOW] is None else _thrift_decimal(v[DEC_LOW]),
                highValue=None if v[DEC_HIGH] is None else _thrift_decimal(v[DEC_HIGH]),
                numNulls=nulls,
                numDVs=_distinct(v, False),
            )
        )
    return ColumnStatisticsData()


def aggregate_column(
    col_name: str, col_type: str, rows: Sequence[PartitionStats], requested: int
) -> ColumnStatisticsObj:
    """One column's statistics over ``requested`` partitions, ``rows`` being those that have them.

    Rows come from partitions in the request (``index``: the position of the partition's name in
    it). Raises nothing: statistics a partition lacks are left out of the aggregate.
    """
    if len(rows) == requested or len(rows) < 2:
        values = _plain(rows)
    else:
        values = _extrapolated(col_type.lower(), rows, requested)
    return ColumnStatisticsObj(colName=col_name, colType=col_type, statsData=_typed(col_type, values))
