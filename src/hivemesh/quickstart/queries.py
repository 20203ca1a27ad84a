"""The quickstart's analytical queries, run on the metastore tables and on the raw Parquet files.

Each query is Spark SQL with ``{table}`` placeholders: filled with ``database.table`` it reads the
Hive ORC tables through the metastore; filled with the temporary views of
:func:`hivemesh.quickstart.load.register_file_views` it reads the Parquet files directly. Both
results must hold the same rows.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from hivemesh.quickstart.compare import first_difference
from hivemesh.quickstart.load import register_file_views
from hivemesh.quickstart.tpch import TABLES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Query:
    """A named query; ``sql`` refers to tables as ``{lineitem}``, ``{orders}``, ..."""

    name: str
    description: str
    sql: str

    def render(self, tables: dict[str, str]) -> str:
        """The SQL with each ``{table}`` replaced by ``tables[table]``."""
        return self.sql.format(**tables)


@dataclass(frozen=True)
class QueryResult:
    """Outcome of one query: row count and time on the metastore tables, and whether the files agree."""

    name: str
    rows: int
    seconds: float
    files_seconds: float
    match: bool
    detail: str | None = None  # the first difference, or the error


QUERIES: tuple[Query, ...] = (
    Query(
        "pricing_summary",
        "quantities, prices and discounts of shipped lines by return flag and status",
        """
        SELECT l_returnflag, l_linestatus,
               count(*) AS lines,
               sum(l_quantity) AS quantity,
               sum(l_extendedprice) AS gross,
               sum(l_extendedprice * (1 - l_discount)) AS net,
               sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS billed,
               avg(l_quantity) AS avg_quantity,
               avg(l_discount) AS avg_discount,
               max(l_shipdate) AS last_ship
        FROM {lineitem}
        WHERE l_shipdate <= DATE '1998-08-01'
        GROUP BY l_returnflag, l_linestatus
        """,
    ),
    Query(
        "top_unshipped_orders",
        "ten most valuable MACHINERY orders placed before 1995-03-15 with lines still to ship",
        """
        SELECT o.o_orderkey, o.o_orderdate, o.o_shippriority,
               sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue
        FROM {customer} c
        JOIN {orders} o ON o.o_custkey = c.c_custkey
        JOIN {lineitem} l ON l.l_orderkey = o.o_orderkey
        WHERE c.c_mktsegment = 'MACHINERY'
          AND o.o_orderdate < DATE '1995-03-15'
          AND l.l_shipdate > DATE '1995-03-15'
        GROUP BY o.o_orderkey, o.o_orderdate, o.o_shippriority
        ORDER BY revenue DESC, o.o_orderkey
        LIMIT 10
        """,
    ),
    Query(
        "revenue_by_nation_year",
        "European revenue and order count by customer nation and order year (5 tables)",
        """
        SELECT n.n_name, o.o_year,
               count(DISTINCT o.o_orderkey) AS orders,
               sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue
        FROM {region} r
        JOIN {nation} n ON n.n_regionkey = r.r_regionkey
        JOIN {customer} c ON c.c_nationkey = n.n_nationkey
        JOIN {orders} o ON o.o_custkey = c.c_custkey
        JOIN {lineitem} l ON l.l_orderkey = o.o_orderkey
        WHERE r.r_name = 'EUROPE'
        GROUP BY n.n_name, o.o_year
        """,
    ),
    Query(
        "stock_value_by_nation",
        "value of the stock of large parts by supplier nation and manufacturer",
        """
        SELECT n.n_name, p.p_mfgr,
               count(DISTINCT ps.ps_partkey) AS parts,
               sum(ps.ps_availqty) AS units,
               sum(ps.ps_supplycost * ps.ps_availqty) AS stock_value
        FROM {partsupp} ps
        JOIN {supplier} s ON s.s_suppkey = ps.ps_suppkey
        JOIN {nation} n ON n.n_nationkey = s.s_nationkey
        JOIN {part} p ON p.p_partkey = ps.ps_partkey
        WHERE p.p_size >= 25
        GROUP BY n.n_name, p.p_mfgr
        """,
    ),
    Query(
        "cheapest_brass_suppliers",
        "for each brass part of size 10-20, the suppliers offering it at its lowest cost",
        """
        SELECT p.p_partkey, p.p_brand, s.s_name, n.n_name, ps.ps_supplycost
        FROM {part} p
        JOIN {partsupp} ps ON ps.ps_partkey = p.p_partkey
        JOIN {supplier} s ON s.s_suppkey = ps.ps_suppkey
        JOIN {nation} n ON n.n_nationkey = s.s_nationkey
        WHERE p.p_type LIKE '%BRASS' AND p.p_size BETWEEN 10 AND 20
          AND ps.ps_supplycost = (
              SELECT min(ps2.ps_supplycost) FROM {partsupp} ps2 WHERE ps2.ps_partkey = p.p_partkey)
        """,
    ),
    Query(
        "late_lines_by_mode_1994_1995",
        "late lines and mean transit days by ship mode, shipped in 1994-1995 (partition filter on l_year)",
        """
        SELECT l_year, l_shipmode,
               count(*) AS lines,
               sum(CASE WHEN l_receiptdate > l_commitdate THEN 1 ELSE 0 END) AS late_lines,
               avg(CAST(datediff(l_receiptdate, l_shipdate) AS DOUBLE)) AS avg_transit_days
        FROM {lineitem}
        WHERE l_year BETWEEN 1994 AND 1995
        GROUP BY l_year, l_shipmode
        """,
    ),
    Query(
        "late_orders_by_priority_1996",
        "orders of 1996 with a line received after its commit date, by priority (filters on o_year, l_year)",
        """
        SELECT o.o_orderpriority, count(*) AS late_orders, sum(o.o_totalprice) AS value
        FROM {orders} o
        WHERE o.o_year = 1996
          AND EXISTS (
              SELECT 1 FROM {lineitem} l
              WHERE l.l_orderkey = o.o_orderkey AND l.l_year IN (1996, 1997)
                AND l.l_receiptdate > l.l_commitdate)
        GROUP BY o.o_orderpriority
        """,
    ),
    Query(
        "promo_share_by_year",
        "share of revenue from promotional parts, by ship year",
        """
        SELECT l.l_year,
               sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
               100 * sum(CASE WHEN p.p_type LIKE 'PROMO%'
                              THEN l.l_extendedprice * (1 - l.l_discount) ELSE 0 END)
                   / sum(l.l_extendedprice * (1 - l.l_discount)) AS promo_pct
        FROM {lineitem} l
        JOIN {part} p ON p.p_partkey = l.l_partkey
        GROUP BY l.l_year
        """,
    ),
    Query(
        "idle_customers_by_segment",
        "customers without any order: count and balance statistics by nation and segment",
        """
        SELECT n.n_name, c.c_mktsegment,
               count(*) AS customers,
               avg(c.c_acctbal) AS avg_balance,
               stddev_samp(CAST(c.c_acctbal AS DOUBLE)) AS stddev_balance
        FROM {customer} c
        JOIN {nation} n ON n.n_nationkey = c.c_nationkey
        WHERE NOT EXISTS (SELECT 1 FROM {orders} o WHERE o.o_custkey = c.c_custkey)
        GROUP BY n.n_name, c.c_mktsegment
        """,
    ),
)


FileResults = dict[str, tuple[list[tuple[Any, ...]], float]]
"""Query name -> (rows, seconds) of the query over the Parquet files (see :func:`run_query`)."""


def _collect(spark: SparkSession, sql: str) -> tuple[list[tuple[Any, ...]], float]:
    start = time.perf_counter()
    rows = [tuple(r) for r in spark.sql(sql).collect()]
    return rows, time.perf_counter() - start


def _summary(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def run_query(
    spark: SparkSession,
    query: Query,
    database: str,
    views: dict[str, str],
    *,
    tables: dict[str, str] | None = None,
    file_results: FileResults | None = None,
) -> QueryResult:
    """Run ``query`` on ``database``'s tables and on the file ``views``; compare the results.

    ``tables``: table -> qualified name to read instead of ``database.table`` (tables spread over
    several databases, e.g. the zones of a federation). ``file_results``: the file side's rows by
    query, read from it when it holds ``query`` (``views`` are then not used), filled when not: the
    tables of several zones checked against one reading of the files. An error on either side is
    reported as a mismatch (with the error in ``detail``), not raised.
    """
    names = tables if tables is not None else {t: f"`{database}`.`{t}`" for t in TABLES}
    try:
        hive_rows, seconds = _collect(spark, query.render(names))
    except Exception as e:  # any failure is this query's result
        log.error("query %s failed on the metastore tables: %s", query.name, e)
        return QueryResult(query.name, 0, 0.0, 0.0, False, f"metastore tables: {_summary(e)}")
    try:
        if file_results is not None and query.name in file_results:
            file_rows, files_seconds = file_results[query.name]
        else:
            file_rows, files_seconds = _collect(spark, query.render(views))
            if file_results is not None:
                file_results[query.name] = (file_rows, files_seconds)
    except Exception as e:
        log.error("query %s failed on the Parquet files: %s", query.name, e)
        return QueryResult(query.name, len(hive_rows), seconds, 0.0, False, f"Parquet files: {_summary(e)}")
    diff = first_difference(hive_rows, file_rows)
    if diff is None:
        log.info(
            "query %s: %d rows, %.2f s (files %.2f s), results match",
            query.name,
            len(hive_rows),
            seconds,
            files_seconds,
        )
    else:
        log.warning("query %s: results differ: %s", query.name, diff)
    return QueryResult(query.name, len(hive_rows), seconds, files_seconds, diff is None, diff)


def run_queries(
    spark: SparkSession, database: str, files_dir: Path, queries: tuple[Query, ...] = QUERIES
) -> list[QueryResult]:
    """Run every query on the tables of ``database`` and on the Parquet files in ``files_dir``.

    The file side uses temporary views (no metastore; see :func:`run_query`), dropped afterwards so
    the caller's session is left as it was.
    """
    views = register_file_views(spark, files_dir)
    try:
        return [run_query(spark, q, database, views) for q in queries]
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)
