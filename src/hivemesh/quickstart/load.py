"""Load the TPC-H Parquet files into Hive ORC tables through Spark, and expose the files as views.

Both paths share :func:`read_table_files`, so the Hive tables and the direct-file views have the same
columns in the same order, the year partition columns (``l_year``, ``o_year``) derived the same way.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hivemesh.quickstart.tpch import PARTITIONING, TABLES, row_count, table_file

log = logging.getLogger(__name__)

#: Prefix of the temporary views over the Parquet files (``tpch_files_lineitem``, ...).
VIEW_PREFIX = "tpch_files_"


@dataclass(frozen=True)
class LoadResult:
    """One table: ``loaded`` is False when the existing table already had ``rows`` rows."""

    table: str
    rows: int
    loaded: bool
    seconds: float


def read_table_files(spark: SparkSession, files_dir: Path, table: str) -> DataFrame:
    """The Parquet file of ``table`` as a DataFrame, with its year partition column appended if any."""
    df = spark.read.parquet(str(table_file(files_dir, table)))
    if table in PARTITIONING:
        part_col, date_col = PARTITIONING[table]
        df = df.withColumn(part_col, F.year(F.col(date_col)))
    return df


def view_name(table: str) -> str:
    """Name of the temporary view over the Parquet file of ``table``."""
    return VIEW_PREFIX + table


def register_file_views(spark: SparkSession, files_dir: Path) -> dict[str, str]:
    """Create (or replace) a temporary view per TPC-H table over its Parquet file; no metastore involved.

    Returns table name -> view name.
    """
    views = {}
    for table in TABLES:
        read_table_files(spark, files_dir, table).createOrReplaceTempView(view_name(table))
        views[table] = view_name(table)
    return views


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def create_table_ddl(df: DataFrame, database: str, table: str) -> str:
    """``CREATE TABLE ... STORED AS ORC`` (a Hive SerDe table) with the columns of ``df``.

    The partition column of ``table`` (see :data:`PARTITIONING`) goes into ``PARTITIONED BY``.
    """
    part_col = PARTITIONING.get(table, (None, None))[0]
    cols = [f"{_quote(f.name)} {f.dataType.simpleString()}" for f in df.schema.fields if f.name != part_col]
    ddl = f"CREATE TABLE {_quote(database)}.{_quote(table)} ({', '.join(cols)})"
    if part_col is not None:
        part_type = df.schema[part_col].dataType.simpleString()
        ddl += f" PARTITIONED BY ({_quote(part_col)} {part_type})"
    return ddl + " STORED AS ORC"


def table_rows(spark: SparkSession, database: str, table: str) -> int | None:
    """Row count of ``database.table``, or None when the table does not exist."""
    name = f"{_quote(database)}.{_quote(table)}"
    if not spark.catalog.tableExists(name):
        return None
    return spark.table(name).count()


def load_table(spark: SparkSession, files_dir: Path, database: str, table: str) -> LoadResult:
    """Load one TPC-H table from its Parquet file into the Hive ORC table ``database.table``.

    Skips the load when the table exists with as many rows as the file; otherwise drops and
    recreates it, then inserts (dynamic partitions for ``lineitem`` and ``orders``). The database
    must exist. Raises RuntimeError when the loaded table does not hold the expected row count.
    """
    start = time.perf_counter()
    expected = row_count(files_dir, table)
    existing = table_rows(spark, database, table)
    if existing == expected:
        log.info("%s.%s: exists with %d rows, reused", database, table, existing)
        return LoadResult(table, expected, False, time.perf_counter() - start)
    if existing is not None:
        log.info("%s.%s: has %d rows, %d expected: reloading", database, table, existing, expected)
        spark.sql(f"DROP TABLE {_quote(database)}.{_quote(table)}")
    df = read_table_files(spark, files_dir, table)
    spark.sql(create_table_ddl(df, database, table))
    source = f"tpch_load_{table}"
    df.createOrReplaceTempView(source)
    try:
        if table in PARTITIONING:
            part_col = PARTITIONING[table][0]
            spark.conf.set("hive.exec.dynamic.partition", "true")
            spark.conf.set("hive.exec.dynamic.partition.mode", "nonstrict")
            spark.sql(
                f"INSERT OVERWRITE TABLE {_quote(database)}.{_quote(table)} PARTITION ({_quote(part_col)}) "
                f"SELECT * FROM {source}"
            )
        else:
            spark.sql(f"INSERT OVERWRITE TABLE {_quote(database)}.{_quote(table)} SELECT * FROM {source}")
    finally:
        spark.catalog.dropTempView(source)
    loaded = table_rows(spark, database, table)
    if loaded != expected:
        raise RuntimeError(f"{database}.{table} holds {loaded} rows after loading, expected {expected}")
    seconds = time.perf_counter() - start
    log.info("%s.%s: loaded %d rows in %.1f s", database, table, loaded, seconds)
    return LoadResult(table, expected, True, seconds)


def create_database(spark: SparkSession, database: str) -> None:
    """Create ``database`` unless it exists (located under the session's warehouse)."""
    if not spark.catalog.databaseExists(database):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(database)}")


def load_tpch(spark: SparkSession, files_dir: Path, database: str = "tpch") -> list[LoadResult]:
    """Create ``database`` if needed and load all eight TPC-H tables into it (see :func:`load_table`)."""
    create_database(spark, database)
    return [load_table(spark, files_dir, database, table) for table in TABLES]
