"""Pure rules behind ``get_aggr_stats_for`` and ``alter_table``'s column type check.

The common cases are compared with the real Hive 4.2 metastore in ``test_hive4_differential.py``;
these tests pin the corners that scenario does not reach (other statistics kinds, decimals,
negative values in Java's integer division, extrapolation to the left border, every type pair).
"""

from __future__ import annotations

from decimal import Decimal as PyDecimal

import pytest
from hive_metastore import ttypes as T

from hivemesh.hive import aggr_stats, column_types, stats_merge
from hivemesh.hive.aggr_stats import PartitionStats, aggregate_column, decimal_of, stat_values


def _rows(*datas: T.ColumnStatisticsData, at: tuple[int, ...] | None = None) -> list[PartitionStats]:
    return [
        PartitionStats(i if at is None else at[n], stat_values(d))
        for n, (i, d) in enumerate(enumerate(datas))
    ]


def _long(low: int, high: int, nulls: int, ndv: int) -> T.ColumnStatisticsData:
    return T.ColumnStatisticsData(
        longStats=T.LongColumnStatsData(lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv)
    )


def _dec(text: str) -> T.Decimal:
    value = PyDecimal(text)
    exp = -value.as_tuple().exponent
    unscaled = int(value.scaleb(exp))
    return T.Decimal(unscaled=unscaled.to_bytes(8, "big", signed=True), scale=exp)


def test_plain_aggregation_of_every_kind() -> None:
    booleans = aggregate_column(
        "b",
        "boolean",
        _rows(
            T.ColumnStatisticsData(
                booleanStats=T.BooleanColumnStatsData(numTrues=3, numFalses=1, numNulls=0)
            ),
            T.ColumnStatisticsData(
                booleanStats=T.BooleanColumnStatsData(numTrues=2, numFalses=5, numNulls=4)
            ),
        ),
        2,
    )
    assert booleans.statsData.booleanStats == T.BooleanColumnStatsData(numTrues=5, numFalses=6, numNulls=4)

    doubles = aggregate_column(
        "d",
        "double",
        _rows(
            T.ColumnStatisticsData(
                doubleStats=T.DoubleColumnStatsData(lowValue=-1.5, highValue=2.0, numNulls=1, numDVs=7)
            ),
            T.ColumnStatisticsData(
                doubleStats=T.DoubleColumnStatsData(lowValue=0.5, highValue=9.25, numNulls=2, numDVs=3)
            ),
        ),
        2,
    )
    # doubles are not capped by their range (only integer, date and timestamp columns are)
    assert doubles.statsData.doubleStats == T.DoubleColumnStatsData(
        lowValue=-1.5, highValue=9.25, numNulls=3, numDVs=7
    )

    # an integer column's distinct count is capped by high - low + 1
    ints = aggregate_column("i", "bigint", _rows(_long(1, 3, 0, 50), _long(2, 4, 0, 40)), 2)
    assert ints.statsData.longStats == T.LongColumnStatsData(lowValue=1, highValue=4, numNulls=0, numDVs=4)

    dates = aggregate_column(
        "dt",
        "date",
        _rows(
            T.ColumnStatisticsData(
                dateStats=T.DateColumnStatsData(
                    lowValue=T.Date(100), highValue=T.Date(110), numNulls=0, numDVs=11
                )
            ),
            T.ColumnStatisticsData(
                dateStats=T.DateColumnStatsData(
                    lowValue=T.Date(90), highValue=T.Date(95), numNulls=1, numDVs=6
                )
            ),
        ),
        2,
    )
    assert dates.statsData.dateStats == T.DateColumnStatsData(
        lowValue=T.Date(90), highValue=T.Date(110), numNulls=1, numDVs=11
    )

    decimals = aggregate_column(
        "m",
        "decimal(10,2)",
        _rows(
            T.ColumnStatisticsData(decimalStats=T.DecimalColumnStatsData(lowValue=_dec("-3.25"), highValue=_dec("10.50"), numNulls=0, numDVs=4)),
            T.ColumnStatisticsData(decimalStats=T.DecimalColumnStatsData(lowValue=_dec("1.00"), highValue=_dec("99.99"), numNulls=2, numDVs=9)),
        ),
        2,
    )  # fmt: skip
    got = decimals.statsData.decimalStats
    assert (decimal_of(got.lowValue), decimal_of(got.highValue), got.numNulls, got.numDVs) == (
        PyDecimal("-3.25"), PyDecimal("99.99"), 2, 9,
    )  # fmt: skip


def test_binary_and_timestamp_stats() -> None:
    binary = aggregate_column(
        "bin",
        "binary",
        _rows(
            T.ColumnStatisticsData(
                binaryStats=T.BinaryColumnStatsData(maxColLen=10, avgColLen=4.0, numNulls=1)
            ),
            T.ColumnStatisticsData(
                binaryStats=T.BinaryColumnStatsData(maxColLen=30, avgColLen=2.5, numNulls=1)
            ),
        ),
        2,
    )
    assert binary.statsData.binaryStats == T.BinaryColumnStatsData(maxColLen=30, avgColLen=4.0, numNulls=2)
    ts = aggregate_column(
        "ts",
        "timestamp",
        _rows(
            T.ColumnStatisticsData(timestampStats=T.TimestampColumnStatsData(
                lowValue=T.Timestamp(1000), highValue=T.Timestamp(1002), numNulls=0, numDVs=9)),
        ),
        1,
    )  # fmt: skip
    assert ts.statsData.timestampStats.numDVs == 3  # capped by the 3 seconds of its range
    assert ts.statsData.timestampStats.highValue == T.Timestamp(1002)


def test_extrapolation_to_both_borders_with_java_division() -> None:
    # 5 requested partitions; statistics at positions 1 and 3 only. Lows fall to the right, so the
    # minimum extends to the right border; highs grow to the left, so the maximum extends left.
    rows = _rows(_long(-1, 20, 3, 5), _long(-8, 13, 4, 7), at=(1, 3))
    got = aggregate_column("id", "int", rows, 5).statsData.longStats
    # low: -1 - (-1 - -8) * (4 - 1) / (3 - 1) = -1 - 21 / 2 (Java: 10) = -11
    # high: 13 + (20 - 13) * 3 / (3 - 1) = 13 + 21 / 2 (Java: 10) = 23
    # nulls: (3 + 4) / 2 * 5 = 15 (integer division first); ndv: 5 -> 7 grows right: 5 + 2*3/2 = 8
    assert (got.lowValue, got.highValue, got.numNulls) == (-11, 23, 15)
    assert got.numDVs == 8


def test_extrapolation_needs_two_partitions_and_all_found_needs_none() -> None:
    one = aggregate_column("id", "int", _rows(_long(1, 5, 1, 3), at=(2,)), 4).statsData.longStats
    assert one == T.LongColumnStatsData(lowValue=1, highValue=5, numNulls=1, numDVs=3)  # as found
    assert aggr_stats._java_div(-7, 2) == -3 and aggr_stats._java_div(7, -2) == -3


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        ("int", "bigint", True), ("bigint", "int", False), ("tinyint", "decimal(5,2)", True),
        ("decimal(10,2)", "decimal(4,1)", True), ("decimal(10,2)", "float", True), ("double", "float", False),
        ("string", "varchar(3)", True), ("char(2)", "string", True), ("string", "int", False),
        ("date", "string", True), ("timestamp", "varchar(30)", True), ("string", "date", False),
        ("int", "string", True), ("boolean", "string", False), ("void", "boolean", True),
        ("array<int>", "array<bigint>", True), ("array<int>", "map<int,int>", False),
        ("struct<a:int>", "string", False), ("binary", "string", False), ("INTEGER", "Int", True),
    ],
)  # fmt: skip
def test_column_type_compatibility(old: str, new: str, ok: bool) -> None:
    assert column_types.compatible(column_types.type_name(old), column_types.type_name(new)) is ok


def test_type_check_names_columns_and_spares_exempt_serdes() -> None:
    old = [
        T.FieldSchema("a", "int", None),
        T.FieldSchema("b", "string", None),
        T.FieldSchema("c", "date", None),
    ]
    new = [T.FieldSchema("a", "string", None), T.FieldSchema("x", "int", None)]  # c dropped: fine
    with pytest.raises(T.InvalidOperationException) as e:
        column_types.check_type_changes(old, new, "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
    assert e.value.message.endswith(":\nx")
    column_types.check_type_changes(old, new, "org.apache.iceberg.mr.hive.HiveIcebergSerDe")


def test_merge_of_every_statistics_kind() -> None:
    """set_aggr_stats_for with needMerge: the differential merges int columns; the other kinds."""
    d = T.ColumnStatisticsData
    merge = stats_merge.merge_stats_data
    old_dec = d(decimalStats=T.DecimalColumnStatsData(_dec("-1.50"), _dec("9.25"), 1, 4))
    new_dec = d(decimalStats=T.DecimalColumnStatsData(_dec("0.5"), _dec("12"), 2, 3))
    got = merge(new_dec, old_dec).decimalStats
    assert (decimal_of(got.lowValue), decimal_of(got.highValue), got.numNulls, got.numDVs) == (
        PyDecimal("-1.50"), PyDecimal("12"), 3, 4,
    )  # fmt: skip
    got = merge(
        d(dateStats=T.DateColumnStatsData(T.Date(100), None, 0, 2)),
        d(dateStats=T.DateColumnStatsData(T.Date(50), T.Date(70), 1, 5)),
    ).dateStats
    assert (got.lowValue.daysSinceEpoch, got.highValue.daysSinceEpoch, got.numNulls, got.numDVs) == (
        50,
        70,
        1,
        5,
    )
    got = merge(
        d(doubleStats=T.DoubleColumnStatsData(0.5, 2.5, 0, 3)),
        d(doubleStats=T.DoubleColumnStatsData(1.0, 9.0, 4, 1)),
    ).doubleStats
    assert (got.lowValue, got.highValue, got.numNulls, got.numDVs) == (0.5, 9.0, 4, 3)
    got = merge(
        d(stringStats=T.StringColumnStatsData(5, 2.5, 1, 10)),
        d(stringStats=T.StringColumnStatsData(9, 1.5, 2, 4)),
    ).stringStats
    assert (got.maxColLen, got.avgColLen, got.numNulls, got.numDVs) == (9, 2.5, 3, 10)
    got = merge(
        d(binaryStats=T.BinaryColumnStatsData(3, 1.0, 0)), d(binaryStats=T.BinaryColumnStatsData(2, 2.0, 5))
    ).binaryStats
    assert (got.maxColLen, got.avgColLen, got.numNulls) == (3, 2.0, 5)
    got = merge(
        d(booleanStats=T.BooleanColumnStatsData(1, 2, 3)),
        d(booleanStats=T.BooleanColumnStatsData(10, 20, 30)),
    ).booleanStats
    assert (got.numTrues, got.numFalses, got.numNulls) == (11, 22, 33)
    # different kinds (the column's type changed): the new statistics as they are, unchanged inputs
    new = _long(1, 2, 0, 2)
    assert merge(new, d(stringStats=T.StringColumnStatsData(9, 1.5, 2, 4))) == new
    assert merge(new, _long(-5, 0, 1, 1)) == _long(-5, 2, 1, 2) and new == _long(1, 2, 0, 2)
