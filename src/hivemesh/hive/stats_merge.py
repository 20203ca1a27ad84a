"""Merging new column statistics into stored ones: ``set_aggr_stats_for`` with ``needMerge``.

A writer that adds rows to a table or partition (an ``INSERT INTO``) sends statistics of the new
rows only and asks the metastore to merge them into those it holds. The rules follow Hive 4's
column statistics mergers, per kind of statistics:

- long, double, decimal, date and timestamp: the lower of the two lows and the higher of the two
  highs (a missing value gives way to the other), null counts added, the number of distinct
  values the larger of the two;
- string and binary: the larger maximum and average lengths, null counts added, for strings the
  larger distinct count;
- boolean: true, false and null counts added.

Bit vectors (NDV sketches) are not combined: the merged statistics keep the new entry's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hive_metastore.ttypes import ColumnStatisticsData

from hivemesh.hive.aggr_stats import decimal_of

__all__ = ["merge_stats_data", "set_field"]

_RANGE_KEYS: dict[str, Callable[[Any], Any]] = {
    "longStats": lambda v: v,
    "doubleStats": lambda v: v,
    "decimalStats": decimal_of,
    "dateStats": lambda v: v.daysSinceEpoch,
    "timestampStats": lambda v: v.secondsSinceEpoch,
}


def set_field(data: ColumnStatisticsData | None) -> str | None:
    """The name of the one field set in a ``ColumnStatisticsData`` (e.g. ``longStats``), or None."""
    if data is None:
        return None
    return next((spec[2] for spec in data.thrift_spec if spec and getattr(data, spec[2]) is not None), None)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def _larger(a: Any, b: Any) -> Any:
    return a if b is None else b if a is None else max(a, b)


def _extreme(a: Any, b: Any, key: Callable[[Any], Any], pick: Callable[..., Any]) -> Any:
    if a is None or key(a) is None:
        return b
    if b is None or key(b) is None:
        return a
    return pick(a, b, key=key)


def merge_stats_data(new: ColumnStatisticsData, old: ColumnStatisticsData) -> ColumnStatisticsData:
    """``new`` merged with ``old`` (a new object; neither argument changes).

    Statistics of different kinds (a column whose type changed) do not merge: the result is
    ``new``'s. Raises nothing.
    """
    kind = set_field(new)
    out = copy.deepcopy(new)
    if kind is None or kind != set_field(old):
        return out
    n, o = getattr(out, kind), getattr(old, kind)
    n.numNulls = _sum(n.numNulls, o.numNulls)
    if kind in _RANGE_KEYS:
        key = _RANGE_KEYS[kind]
        n.lowValue = copy.deepcopy(_extreme(n.lowValue, o.lowValue, key, min))
        n.highValue = copy.deepcopy(_extreme(n.highValue, o.highValue, key, max))
        n.numDVs = _larger(n.numDVs, o.numDVs)
    elif kind in ("stringStats", "binaryStats"):
        n.maxColLen = _larger(n.maxColLen, o.maxColLen)
        n.avgColLen = _larger(n.avgColLen, o.avgColLen)
        if kind == "stringStats":
            n.numDVs = _larger(n.numDVs, o.numDVs)
    elif kind == "booleanStats":
        n.numTrues = _sum(n.numTrues, o.numTrues)
        n.numFalses = _sum(n.numFalses, o.numFalses)
    return out
