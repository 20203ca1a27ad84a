"""PySpark 4 (Hive 2.3 client, ``enableHiveSupport()``) against a running ``hivemesh metastore``.

Runs on SQLite and PostgreSQL (fixtures ``spark`` / ``spark_metastore``, tests/spark_fixtures.py).

- :data:`SCRIPT` exercises databases, Hive ORC/Parquet/Avro/text tables (partitioned or not),
  ``USING parquet`` tables, CTAS, INSERT INTO/OVERWRITE with static and dynamic partitions, pruned
  SELECTs, ALTER TABLE (ADD COLUMNS, RENAME, SET/UNSET TBLPROPERTIES, ADD/DROP/RENAME PARTITION,
  RECOVER PARTITIONS, MSCK REPAIR), views, ANALYZE (also FOR COLUMNS), SHOW, DESCRIBE EXTENDED,
  temporary and permanent functions, DROP DATABASE CASCADE, and the errors Spark raises from
  metastore answers. The very same script runs on Spark's own built-in catalog (embedded Derby, in
  a separate Python process: tests/support/spark_reference.py) and every result must be equal.
- Partition pruning: Spark must ask ``get_partitions_by_filter`` (counted through the server's
  Prometheus metrics) and read only the matching partitions (input files / physical plan).

Separate sessions and metastore restarts: tests/test_spark_persistence.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import Database

from tests.spark_fixtures import SparkMetastore
from tests.support.servers import ThriftClient
from tests.support.spark_reference import SparkScriptRun, run_statements

pytestmark = pytest.mark.spark

UPPER_UDF = "org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper"  # in hive-exec-2.3.10-core.jar
LOWER_UDF = "org.apache.hadoop.hive.ql.udf.generic.GenericUDFLower"

#: The statements run on hivemesh and on Spark's built-in catalog. ``{db}``: a database name,
#: ``{ext}``: a directory for external tables. Expected errors are part of the script.
SCRIPT: list[str] = [
    # ------------------------------------------------------------------------------- databases
    "CREATE DATABASE {db} COMMENT 'hivemesh spark suite'",
    "CREATE DATABASE {db}",  # SCHEMA_ALREADY_EXISTS (AlreadyExistsException)
    "CREATE DATABASE IF NOT EXISTS {db}",
    "ALTER DATABASE {db} SET DBPROPERTIES ('team'='lake')",
    "SHOW DATABASES LIKE '{db}'",
    "DESCRIBE DATABASE EXTENDED {db}",
    # ------------------------------------------------------------- Hive text table, not partitioned
    "CREATE TABLE {db}.txt (id INT, name STRING, price DECIMAL(10,2))"
    " ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' STORED AS TEXTFILE",
    "CREATE TABLE {db}.txt (id INT) STORED AS TEXTFILE",  # TABLE_OR_VIEW_ALREADY_EXISTS
    "INSERT INTO {db}.txt VALUES (1, 'apple', 1.50), (2, 'pear', 2.25), (3, NULL, 0.99)",
    "INSERT INTO {db}.txt SELECT id + 10, upper(name), price * 2 FROM {db}.txt",
    "SELECT * FROM {db}.txt",
    # ---------------------- Hive ORC partitioned by two columns: static, mixed and dynamic partitions
    "CREATE TABLE {db}.sales (id INT, amount DOUBLE, note STRING)"
    " PARTITIONED BY (region STRING, yr INT) STORED AS ORC",
    "INSERT INTO {db}.sales PARTITION (region='eu', yr=2023) VALUES (1, 10.0, 'a'), (2, 20.5, 'b')",
    "INSERT INTO {db}.sales PARTITION (region='us', yr) VALUES (3, 5.0, 'c', 2023), (4, 7.5, 'd', 2024)",
    "INSERT INTO {db}.sales PARTITION (region, yr)"
    " SELECT id + 100, amount * 10, note, IF(id % 2 = 0, 'apac', 'eu'), 2024 FROM {db}.sales",
    "SHOW PARTITIONS {db}.sales",
    "SHOW PARTITIONS {db}.sales PARTITION (region='eu')",
    "SELECT region, yr, count(*), sum(amount) FROM {db}.sales GROUP BY region, yr",
    "SELECT * FROM {db}.sales WHERE region = 'us' AND yr = 2024",
    "SELECT id, region FROM {db}.sales WHERE yr > 2023 AND region <> 'apac'",
    "SELECT id FROM {db}.sales WHERE region IN ('apac', 'us')",
    "INSERT OVERWRITE TABLE {db}.sales PARTITION (region='eu', yr=2023) VALUES (9, 99.0, 'replaced')",
    "CREATE TABLE {db}.staging (id INT, amount DOUBLE, note STRING, region STRING, yr INT) STORED AS ORC",
    "INSERT INTO {db}.staging VALUES (50, 1.0, 'x', 'apac', 2024), (51, 2.0, 'y', 'latam', 2024)",
    "INSERT OVERWRITE TABLE {db}.sales PARTITION (region, yr) SELECT * FROM {db}.staging",
    "SELECT * FROM {db}.sales",
    "TRUNCATE TABLE {db}.staging",
    "SELECT count(*) FROM {db}.staging",
    # ----------------------------------------------------------------- Hive Parquet, partitioned
    "CREATE TABLE {db}.pq (k STRING, v BIGINT) PARTITIONED BY (dt STRING) STORED AS PARQUET",
    "INSERT OVERWRITE TABLE {db}.pq PARTITION (dt)"
    " SELECT CAST(id AS STRING), id * 1000, IF(id < 100, '2024-01-01', '2024-01-02') FROM {db}.sales",
    "INSERT INTO {db}.pq PARTITION (dt='2024-01-03') SELECT 'z', 0",
    "SELECT dt, count(*), sum(v) FROM {db}.pq GROUP BY dt",
    "SELECT * FROM {db}.pq WHERE dt = '2024-01-02'",
    "TRUNCATE TABLE {db}.pq PARTITION (dt='2024-01-03')",
    "SELECT dt, count(*) FROM {db}.pq GROUP BY dt",
    # ---------------------------------------------------------------------------------- Hive Avro
    # STORED AS AVRO works with the PySpark 4.3 wheel alone: the Hive AvroSerDe (hive-serde-2.3.10)
    # and Avro 1.12 ship in pyspark/jars (Spark logs a harmless "Failed to find data source: avro
    # when check data column names" error at CREATE). Spark's own `USING avro` data source is an
    # external module that the wheel does not contain: both catalogs refuse it the same way.
    "CREATE TABLE {db}.av (id INT, s STRING) STORED AS AVRO",
    "INSERT INTO {db}.av VALUES (1, 'one'), (2, 'two')",
    "SELECT * FROM {db}.av",
    "CREATE TABLE {db}.avp (id INT, s STRING) PARTITIONED BY (p INT) STORED AS AVRO",
    "INSERT INTO {db}.avp PARTITION (p) VALUES (1, 'one', 1), (2, 'two', 2)",
    "SELECT * FROM {db}.avp WHERE p = 2",
    "CREATE TABLE {db}.av_ds (id INT) USING avro",  # the Avro data source is not on the class path: both fail
    # ----------------------------------------------------------- data-source table (USING parquet)
    "CREATE TABLE {db}.ds (id BIGINT, name STRING, p INT) USING parquet PARTITIONED BY (p)",
    "INSERT INTO {db}.ds VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 2)",
    "INSERT INTO {db}.ds PARTITION (p=3) SELECT 4, 'd'",
    "INSERT OVERWRITE {db}.ds PARTITION (p=2) SELECT 5, 'e'",
    "SHOW PARTITIONS {db}.ds",
    "SELECT * FROM {db}.ds",
    "SELECT name FROM {db}.ds WHERE p >= 2",
    # ------------------------------------------------------------------------------------- CTAS
    "CREATE TABLE {db}.ctas_pq USING parquet AS SELECT region, sum(amount) AS total FROM {db}.sales GROUP BY region",
    "CREATE TABLE {db}.ctas_orc STORED AS ORC AS SELECT id, name FROM {db}.txt WHERE name IS NOT NULL",
    "CREATE TABLE {db}.ctas_part USING parquet PARTITIONED BY (region)"
    " AS SELECT id, amount, region FROM {db}.sales",
    "SELECT * FROM {db}.ctas_pq",
    "SELECT * FROM {db}.ctas_orc",
    "SHOW PARTITIONS {db}.ctas_part",
    "SELECT * FROM {db}.ctas_part WHERE region = 'latam'",
    # ------------------------------------------------------------------------------- ALTER TABLE
    "ALTER TABLE {db}.txt ADD COLUMNS (qty INT COMMENT 'added later')",
    "INSERT INTO {db}.txt VALUES (4, 'fig', 3.00, 7)",
    "SELECT * FROM {db}.txt",
    "DESCRIBE {db}.txt",
    "ALTER TABLE {db}.ds ADD COLUMNS (extra STRING)",
    "INSERT INTO {db}.ds PARTITION (p=4) SELECT 6, 'f', 'more'",
    "SELECT * FROM {db}.ds",
    "ALTER TABLE {db}.sales ADD COLUMNS (flag BOOLEAN)",
    "ALTER TABLE {db}.sales CHANGE COLUMN note note STRING COMMENT 'free text'",
    "INSERT INTO {db}.sales PARTITION (region='us', yr=2025) VALUES (60, 6.0, 'new', true)",
    "SELECT * FROM {db}.sales WHERE region = 'us'",
    "DESCRIBE {db}.sales",
    "ALTER TABLE {db}.sales SET TBLPROPERTIES ('team'='data', 'quality'='gold')",
    "SHOW TBLPROPERTIES {db}.sales ('quality')",
    "SHOW TBLPROPERTIES {db}.sales ('team')",
    "ALTER TABLE {db}.sales UNSET TBLPROPERTIES ('quality')",
    "SHOW TBLPROPERTIES {db}.sales ('quality')",
    "ALTER TABLE {db}.sales ADD PARTITION (region='mena', yr=2025) PARTITION (region='mena', yr=2026)",
    "ALTER TABLE {db}.sales ADD PARTITION (region='mena', yr=2025)",  # PARTITIONS_ALREADY_EXIST
    "ALTER TABLE {db}.sales ADD IF NOT EXISTS PARTITION (region='mena', yr=2025)",
    "SHOW PARTITIONS {db}.sales",
    "ALTER TABLE {db}.sales DROP PARTITION (region='mena', yr=2026)",
    "ALTER TABLE {db}.sales DROP PARTITION (region='nowhere', yr=1)",  # PARTITIONS_NOT_FOUND
    "ALTER TABLE {db}.sales DROP IF EXISTS PARTITION (region='apac')",  # a partial spec
    "ALTER TABLE {db}.sales PARTITION (region='mena', yr=2025) RENAME TO PARTITION (region='mena', yr=2027)",
    "SHOW PARTITIONS {db}.sales",
    "SELECT region, count(*) FROM {db}.sales GROUP BY region",
    "ALTER TABLE {db}.txt RENAME TO {db}.txt2",
    "SELECT * FROM {db}.txt2",
    "SELECT * FROM {db}.txt",  # TABLE_OR_VIEW_NOT_FOUND
    # the old directory must have moved with the rename: a new table of that name starts empty
    "CREATE TABLE {db}.txt (id INT, name STRING) STORED AS TEXTFILE",
    "SELECT * FROM {db}.txt",
    "ALTER TABLE {db}.ds RENAME TO {db}.ds2",
    "SELECT * FROM {db}.ds2 WHERE p = 4",
    # ----------------------------- RECOVER PARTITIONS / MSCK REPAIR on external tables (data kept)
    "CREATE TABLE {db}.ext (id INT, v STRING) PARTITIONED BY (d STRING) STORED AS PARQUET LOCATION '{ext}/ext'",
    "INSERT INTO {db}.ext PARTITION (d) VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'c', 'z')",
    "ALTER TABLE {db}.ext DROP PARTITION (d='x')",
    "ALTER TABLE {db}.ext DROP PARTITION (d='y')",
    "SHOW PARTITIONS {db}.ext",
    "SELECT * FROM {db}.ext",
    "MSCK REPAIR TABLE {db}.ext",
    "SHOW PARTITIONS {db}.ext",
    "SELECT * FROM {db}.ext",
    "ALTER TABLE {db}.ext DROP PARTITION (d='z')",
    "ALTER TABLE {db}.ext RECOVER PARTITIONS",
    "SELECT * FROM {db}.ext WHERE d = 'z'",
    "CREATE TABLE {db}.dsext (id INT, d STRING) USING parquet PARTITIONED BY (d) LOCATION '{ext}/dsext'",
    "INSERT INTO {db}.dsext VALUES (1, 'x'), (2, 'y')",
    "ALTER TABLE {db}.dsext DROP PARTITION (d='y')",
    "SELECT * FROM {db}.dsext",
    "MSCK REPAIR TABLE {db}.dsext",
    "SELECT * FROM {db}.dsext",
    # ------------------------------------------------------------------------------------ views
    "CREATE VIEW {db}.v_sales AS SELECT region, count(*) AS n FROM {db}.sales GROUP BY region",
    "SELECT * FROM {db}.v_sales",
    "ALTER VIEW {db}.v_sales AS"
    " SELECT region, sum(amount) AS total FROM {db}.sales WHERE yr >= 2024 GROUP BY region",
    "SELECT * FROM {db}.v_sales",
    "CREATE OR REPLACE VIEW {db}.v_txt (ident COMMENT 'the id', label) AS SELECT id, name FROM {db}.txt2",
    "SELECT * FROM {db}.v_txt",
    "SHOW VIEWS IN {db}",
    "DESCRIBE EXTENDED {db}.v_txt",
    # ------------------------------------------------------------------------------- statistics
    "ANALYZE TABLE {db}.txt2 COMPUTE STATISTICS",
    "DESCRIBE EXTENDED {db}.txt2",
    "ANALYZE TABLE {db}.txt2 COMPUTE STATISTICS FOR COLUMNS id, name, price",
    "DESCRIBE EXTENDED {db}.txt2 id",
    "DESCRIBE EXTENDED {db}.txt2 name",
    "DESCRIBE EXTENDED {db}.txt2 price",
    "ANALYZE TABLE {db}.sales PARTITION (region='eu', yr=2023) COMPUTE STATISTICS",
    "DESCRIBE EXTENDED {db}.sales PARTITION (region='eu', yr=2023)",
    "ANALYZE TABLE {db}.sales COMPUTE STATISTICS FOR ALL COLUMNS",
    "DESCRIBE EXTENDED {db}.sales amount",
    "ANALYZE TABLE {db}.ds2 COMPUTE STATISTICS FOR ALL COLUMNS",
    "DESCRIBE EXTENDED {db}.ds2 id",
    "DESCRIBE EXTENDED {db}.ds2",
    "DESCRIBE EXTENDED {db}.sales",
    "DESCRIBE EXTENDED {db}.av",  # never analyzed: see test_hms_fast_stats_match_builtin_catalog
    "DESCRIBE EXTENDED {db}.ext",
    # ------------------------------------------------------------------------------------- SHOW
    "SHOW TABLES IN {db}",
    "SHOW TABLES IN {db} LIKE 's*|c*'",
    "SHOW COLUMNS IN {db}.sales",
    "SHOW CREATE TABLE {db}.ctas_part",
    # -------------------------------------------------------------------------------- functions
    f"CREATE TEMPORARY FUNCTION hm_tmp_upper AS '{UPPER_UDF}'",
    "SELECT hm_tmp_upper(name) FROM {db}.txt2",
    f"CREATE FUNCTION {{db}}.hm_upper AS '{UPPER_UDF}'",
    f"CREATE FUNCTION {{db}}.hm_upper AS '{UPPER_UDF}'",  # ROUTINE_ALREADY_EXISTS
    f"CREATE FUNCTION {{db}}.hm_lower AS '{LOWER_UDF}'",
    "SELECT {db}.hm_upper(name), {db}.hm_lower(name) FROM {db}.txt2",
    "SHOW USER FUNCTIONS IN {db}",
    "DESCRIBE FUNCTION {db}.hm_upper",
    "DROP FUNCTION {db}.hm_upper",
    "DROP FUNCTION {db}.hm_upper",  # ROUTINE_NOT_FOUND
    "DROP FUNCTION IF EXISTS {db}.hm_upper",
    "SELECT {db}.hm_upper('x')",  # UNRESOLVED_ROUTINE
    "DROP TEMPORARY FUNCTION hm_tmp_upper",
    # ------------------------------------ partition values with characters that paths must escape
    "CREATE TABLE {db}.esc (id INT) PARTITIONED BY (s STRING) STORED AS PARQUET",
    "INSERT INTO {db}.esc PARTITION (s='a b/c:d=e%f') VALUES (1)",
    "INSERT INTO {db}.esc PARTITION (s) VALUES (2, 'x''y#z'), (3, NULL), (4, 'naïve 日本'), (5, '')",
    "SHOW PARTITIONS {db}.esc",
    "SELECT * FROM {db}.esc",
    "SELECT id FROM {db}.esc WHERE s = 'a b/c:d=e%f'",
    "SELECT id FROM {db}.esc WHERE s IS NULL",
    "SELECT id FROM {db}.esc WHERE s = 'naïve 日本'",
    "SELECT id FROM {db}.esc WHERE s > 'b'",
    "ALTER TABLE {db}.esc DROP PARTITION (s='a b/c:d=e%f')",
    "SHOW PARTITIONS {db}.esc",
    "CREATE TABLE {db}.esc_txt (id INT) PARTITIONED BY (s STRING) STORED AS TEXTFILE",
    "INSERT INTO {db}.esc_txt PARTITION (s) VALUES (1, 'a b/c:d=e%f'), (2, NULL)",
    "SELECT * FROM {db}.esc_txt WHERE s = 'a b/c:d=e%f'",
    "SHOW PARTITIONS {db}.esc_txt",
    # ------------------------------------------------------ typed partition columns and their filters
    "CREATE TABLE {db}.ev (id INT) PARTITIONED BY (d DATE, h TINYINT) STORED AS ORC",
    "INSERT INTO {db}.ev PARTITION (d, h)"
    " VALUES (1, DATE'2024-01-01', 1), (2, DATE'2024-01-02', 2), (3, DATE'2024-02-01', 3)",
    "SELECT id FROM {db}.ev WHERE d > DATE'2024-01-01'",
    "SELECT id FROM {db}.ev WHERE d BETWEEN DATE'2024-01-02' AND DATE'2024-01-31' AND h >= 2",
    "SHOW PARTITIONS {db}.ev",
    "CREATE TABLE {db}.bigp (id INT) PARTITIONED BY (b BIGINT, dec DECIMAL(5,2), flag BOOLEAN) STORED AS PARQUET",
    "INSERT INTO {db}.bigp PARTITION (b, dec, flag) VALUES (1, 9000000000, 1.50, true), (2, -5, 0.25, false)",
    "SELECT id FROM {db}.bigp WHERE b > 0",
    "SELECT id FROM {db}.bigp WHERE flag = false",
    "SHOW PARTITIONS {db}.bigp",
    # ------------------------------------------------ complex column types, non-ASCII comments
    "CREATE TABLE {db}.cx (id INT COMMENT 'clé primaire', tags ARRAY<STRING>, attrs MAP<STRING,INT>,"
    " pt STRUCT<x:DOUBLE,y:DOUBLE,label:STRING>) COMMENT 'Ünïcödé 表' STORED AS ORC",
    "INSERT INTO {db}.cx"
    " VALUES (1, array('a', 'b'), map('k', 1), named_struct('x', 1.5D, 'y', -2.0D, 'label', 'p'))",
    "SELECT id, tags, attrs, pt.x, pt.label FROM {db}.cx",
    "DESCRIBE {db}.cx",
    "CREATE TABLE {db}.cx_ds USING parquet AS SELECT * FROM {db}.cx",
    "SELECT id, tags[1], attrs['k'], pt.y FROM {db}.cx_ds",
    # a schema long enough to be split over several table parameters (spark.sql.sources.schema.part.N)
    "CREATE TABLE {db}.wide USING parquet AS SELECT "
    + ", ".join(f"id + {i} AS a_rather_long_column_name_number_{i:03d}" for i in range(120))
    + " FROM range(2) AS r(id)",
    "SELECT sum(a_rather_long_column_name_number_119), count(*) FROM {db}.wide",
    "DESCRIBE {db}.wide",
    # -------------------------------------------------------------- bucketing, CREATE TABLE LIKE
    "CREATE TABLE {db}.bk (id INT, v STRING) USING parquet CLUSTERED BY (id) SORTED BY (id) INTO 4 BUCKETS",
    "INSERT INTO {db}.bk SELECT id, CAST(id AS STRING) FROM range(10) AS r(id)",
    "SELECT count(*), sum(id) FROM {db}.bk",
    "DESCRIBE EXTENDED {db}.bk",
    "CREATE TABLE {db}.like_esc LIKE {db}.esc",
    "SHOW PARTITIONS {db}.like_esc",
    "DESCRIBE EXTENDED {db}.like_esc",
    # ------------------------------------------------ SET LOCATION of a partition and of a table
    "CREATE TABLE {db}.mv (id INT) PARTITIONED BY (p INT) STORED AS PARQUET",
    "INSERT INTO {db}.mv PARTITION (p=1) VALUES (1)",
    "INSERT INTO {db}.mv PARTITION (p=2) VALUES (2)",
    "ALTER TABLE {db}.mv PARTITION (p=2) SET LOCATION '{ext}/mv_p2'",
    "INSERT INTO {db}.mv PARTITION (p=2) VALUES (22)",
    "SELECT * FROM {db}.mv",
    "DESCRIBE EXTENDED {db}.mv PARTITION (p=2)",  # see test_hms_fast_stats_match_builtin_catalog
    "CREATE TABLE {db}.plain (id INT) STORED AS PARQUET",
    "ALTER TABLE {db}.plain SET LOCATION '{ext}/mv_p2'",
    "SELECT * FROM {db}.plain",
    "INSERT INTO {db}.plain VALUES (7)",
    "SELECT * FROM {db}.mv WHERE p = 2",
    "ALTER TABLE {db}.plain SET SERDEPROPERTIES ('k'='v')",
    "DESCRIBE EXTENDED {db}.plain",  # see test_hms_fast_stats_match_builtin_catalog
    # ------------------------------------------------- a function replaced in place; PURGE drops
    "CREATE FUNCTION {db}.fn AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFLower'",
    "SELECT {db}.fn('AbC')",
    "CREATE OR REPLACE FUNCTION {db}.fn AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper'",
    "SELECT {db}.fn('AbC')",
    "DESCRIBE FUNCTION EXTENDED {db}.fn",
    "SHOW FUNCTIONS IN {db} LIKE 'f*'",
    "ALTER TABLE {db}.mv DROP PARTITION (p=1) PURGE",
    "SHOW PARTITIONS {db}.mv",
    "DROP TABLE {db}.cx_ds PURGE",
    # ------------------------------------------------------- view properties, rename, SHOW CREATE
    "CREATE VIEW {db}.v1 (k COMMENT 'the key') TBLPROPERTIES ('a'='b') AS SELECT id AS k FROM {db}.esc WHERE id > 1",
    "ALTER VIEW {db}.v1 SET TBLPROPERTIES ('c'='d')",
    "ALTER VIEW {db}.v1 RENAME TO {db}.v2",
    "SELECT * FROM {db}.v2",
    "SHOW TBLPROPERTIES {db}.v2",
    "SHOW CREATE TABLE {db}.v2",
    # ---------- a database with its own location: DROP ... CASCADE deletes managed data, keeps external
    "CREATE DATABASE {db}_loc LOCATION '{ext}/dbloc'",
    "DESCRIBE DATABASE {db}_loc",
    "CREATE TABLE {db}_loc.managed (id INT) STORED AS PARQUET",
    "INSERT INTO {db}_loc.managed VALUES (1)",
    "CREATE TABLE {db}_loc.outside (id INT) STORED AS PARQUET LOCATION '{ext}/outside'",
    "INSERT INTO {db}_loc.outside VALUES (2)",
    "DROP DATABASE {db}_loc CASCADE",
    "SHOW DATABASES LIKE '{db}_loc'",
    "CREATE TABLE {db}.was_managed (id INT) STORED AS PARQUET LOCATION '{ext}/dbloc/managed'",
    "SELECT * FROM {db}.was_managed",
    "CREATE TABLE {db}.was_outside (id INT) STORED AS PARQUET LOCATION '{ext}/outside'",
    "SELECT * FROM {db}.was_outside",
    # ------------------------------------------------------------------------------------- DROP
    "DROP VIEW {db}.v_sales",
    "DROP TABLE {db}.ctas_orc",
    "DROP TABLE {db}.ctas_orc",  # TABLE_OR_VIEW_NOT_FOUND
    "DROP TABLE IF EXISTS {db}.ctas_orc",
    # a managed table's data went with it: a CTAS into the same location is allowed again
    "CREATE TABLE {db}.ctas_orc STORED AS ORC AS SELECT 1 AS id",
    "SELECT * FROM {db}.ctas_orc",
    "SHOW TABLES IN {db}",
    "DROP DATABASE {db}",  # SCHEMA_NOT_EMPTY (InvalidOperationException)
    "DROP DATABASE {db} CASCADE",
    "SHOW DATABASES LIKE '{db}'",
    # CASCADE removed the database directory and every table directory under it
    "CREATE DATABASE {db}",
    "CREATE TABLE {db}.sales STORED AS ORC AS SELECT 1 AS id",
    "SELECT * FROM {db}.sales",
    "SHOW TABLES IN {db}",
    "DROP DATABASE {db} CASCADE",
]

#: The statements of SCRIPT that fail (on both catalogs), in order, with Spark's error condition.
EXPECTED_ERRORS = [
    ("CREATE DATABASE {db}", "AnalysisException[SCHEMA_ALREADY_EXISTS]"),
    ("CREATE TABLE {db}.txt (id INT) STORED AS TEXTFILE", "AnalysisException[TABLE_OR_VIEW_ALREADY_EXISTS]"),
    # Spark 4.2 names this error _LEGACY_ERROR_TEMP_1139 (4.3: AVRO_DATA_SOURCE_NOT_ENABLED)
    ("CREATE TABLE {db}.av_ds (id INT) USING avro", "AnalysisException[_LEGACY_ERROR_TEMP_1139]"),
    (
        "ALTER TABLE {db}.sales ADD PARTITION (region='mena', yr=2025)",
        "AnalysisException[PARTITIONS_ALREADY_EXIST]",
    ),
    (
        "ALTER TABLE {db}.sales DROP PARTITION (region='nowhere', yr=1)",
        "AnalysisException[PARTITIONS_NOT_FOUND]",
    ),
    ("SELECT * FROM {db}.txt", "AnalysisException[TABLE_OR_VIEW_NOT_FOUND]"),
    (f"CREATE FUNCTION {{db}}.hm_upper AS '{UPPER_UDF}'", "AnalysisException[ROUTINE_ALREADY_EXISTS]"),
    ("DROP FUNCTION {db}.hm_upper", "AnalysisException[ROUTINE_NOT_FOUND]"),
    ("SELECT {db}.hm_upper('x')", "AnalysisException[UNRESOLVED_ROUTINE]"),
    ("DROP TABLE {db}.ctas_orc", "AnalysisException[TABLE_OR_VIEW_NOT_FOUND]"),
    ("DROP DATABASE {db}", "AnalysisException[SCHEMA_NOT_EMPTY]"),
]

# ---------------------------------------------------------------- what is left out of the comparison
#: DESCRIBE EXTENDED rows left out of the comparison, and why they differ between the two runs.
#: Locations are compared: the per-run warehouse and external directories are replaced by
#: ``{warehouse}`` / ``{ext}`` in both results. Owners are compared: both runs are the same OS user.
#: "Last Access" is compared: it is UNKNOWN (0) on both.
VOLATILE_DESCRIBE_ROWS = {
    "Created Time": "the wall-clock time of the CREATE (or of adding the partition): the two runs "
    "happen at different moments",
}
#: Table/partition parameters removed before comparing: from the "Table Properties" / "Partition
#: Parameters" rows of DESCRIBE EXTENDED, the rows of SHOW TBLPROPERTIES, and (value masked) the
#: TBLPROPERTIES of SHOW CREATE TABLE.
VOLATILE_PARAMETERS = {
    "transient_lastDdlTime": "the metastore stamps every DDL with its clock (seconds)",
}
#: HMS "fast stats" that the metastore writes into table and partition parameters by itself when
#: they are created over data, added or altered (hive.stats.autogather). Compared apart, in
#: test_hms_fast_stats_match_builtin_catalog, so that a difference there is named as such.
FAST_STATS_PARAMETERS = ("numFiles", "totalSize", "numFilesErasureCoded")
#: Fast stats that Hive 3+ writes beside numFiles (hivemesh too, as Hive 4) and the built-in
#: catalog (Hive 2.3's metastore code) does not: left out of the comparison with it and checked
#: on hivemesh's side alone.
HIVE3_FAST_STATS = ("numFilesErasureCoded",)
#: DESCRIBE of tables/partitions that were written but never analyzed: from the fast stats Spark
#: shows a "Statistics" / "Partition Statistics" row (from totalSize and numRows); same test.
FAST_STATS_STATEMENTS = (
    "DESCRIBE EXTENDED {db}.av",
    "DESCRIBE EXTENDED {db}.mv PARTITION (p=2)",
    "DESCRIBE EXTENDED {db}.plain",
)
FAST_STATS_ROWS = ("Statistics", "Partition Statistics")
_PARAM_ROWS = ("Table Properties", "Partition Parameters")
_PARAM = re.compile(r"([^,\[\] ]+)=([^,\]]*)")
_QUOTED_DDL_TIME = re.compile(r"'transient_lastDdlTime' = '\d+'")


def _params_text(text: str, drop: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in _PARAM.findall(text) if k not in drop) + "]"


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between hivemesh and the built-in catalog for one statement."""
    if "error" in result:  # the message names paths and times; the kind (error condition) must match
        return {"error": result["error"]}
    sql, rows = result["sql"], result["rows"]
    if sql.startswith("SHOW TBLPROPERTIES"):
        rows = [r for r in rows if r[0] not in VOLATILE_PARAMETERS]
    elif sql.startswith("SHOW CREATE TABLE"):
        rows = [[_QUOTED_DDL_TIME.sub("'transient_lastDdlTime' = '<time>'", r[0])] for r in rows]
    if not sql.startswith("DESCRIBE"):
        return {"columns": result["columns"], "rows": sorted(rows, key=json.dumps)}
    kept = []
    for row in rows:  # DESCRIBE: (col_name, data_type, comment); the order is part of the result
        name = row[0]
        if name in VOLATILE_DESCRIBE_ROWS or (name in FAST_STATS_ROWS and sql in FAST_STATS_STATEMENTS):
            continue
        if name in _PARAM_ROWS:
            row = [name, _params_text(row[1], (*VOLATILE_PARAMETERS, *FAST_STATS_PARAMETERS)), row[2]]
        kept.append(row)
    return {"columns": result["columns"], "rows": kept}


def fast_stats_view(result: dict[str, Any]) -> dict[str, Any]:
    """The parts of a DESCRIBE result that come from the metastore's own fast stats."""
    view: dict[str, Any] = {}
    for row in result.get("rows", []):
        if row[0] == "Partition Parameters":
            keys = {k for k, _ in _PARAM.findall(row[1])}
            view["partition parameter keys"] = sorted(keys - set(HIVE3_FAST_STATS))
            if "numFiles" in keys:
                view["Hive 3+ fast stats"] = sorted(keys & set(HIVE3_FAST_STATS))
        if row[0] in FAST_STATS_ROWS:
            view[f"has a {row[0]} row"] = True
    return view


# --------------------------------------------------------------------------- reference fixture
@pytest.fixture(scope="session")
def builtin_catalog_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkScriptRun]:
    """:data:`SCRIPT` on Spark's built-in catalog, in its own process (started once, awaited lazily)."""
    workdir = tmp_path_factory.mktemp("spark-builtin-catalog")
    run = SparkScriptRun(SCRIPT, workdir, {"db": "builtin_db", "ext": "{workdir}/ext"})
    yield run
    run.kill()


@pytest.fixture(scope="module", autouse=True)
def _start_builtin_catalog_early(request: pytest.FixtureRequest) -> None:
    """Start the reference process with this module's first test, so that it overlaps other tests."""
    wanted = any(
        item.name.startswith("test_") and "builtin_catalog" in item.name for item in request.session.items
    )
    if wanted:
        request.getfixturevalue("builtin_catalog_run")


@pytest.fixture(scope="session")
def hivemesh_script_results(
    spark: Any, spark_metastore: SparkMetastore, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    """:data:`SCRIPT` on hivemesh through the shared session (once per backend)."""
    ext = tmp_path_factory.mktemp(f"spark-ext-{spark_metastore.backend}")
    params = {
        "db": f"script_{spark_metastore.backend}",
        "ext": str(ext),
        "warehouse": spark.conf.get("spark.sql.warehouse.dir"),
    }
    return run_statements(spark, SCRIPT, params)


# ------------------------------------------------------------------------------------- tests
@pytest.mark.spark_postgres  # also on PostgreSQL: the Spark path through a PostgreSQL store
def test_session_is_bound_to_this_metastore(
    spark: Any, spark_metastore: SparkMetastore, unique_name: str
) -> None:
    """The (re-created) session's Hive client talks to this backend's server, both directions."""
    spark.sql(f"CREATE DATABASE {unique_name} COMMENT 'made by spark'")
    with ThriftClient(spark_metastore.host, spark_metastore.port) as hms:
        db = hms.get_database(unique_name)
        assert db.description == "made by spark"
        assert db.locationUri.rstrip("/").endswith(f"{unique_name}.db")
        assert Path(db.locationUri.removeprefix("file:")).is_dir()
        hms.create_database(Database(name=f"{unique_name}_thrift", description="made over thrift"))
    rows = spark.sql(f"SHOW DATABASES LIKE '{unique_name}*'").collect()
    assert sorted(r[0] for r in rows) == [unique_name, f"{unique_name}_thrift"]
    assert spark_metastore.calls()["create_database"] >= 1
    spark.sql(f"DROP DATABASE {unique_name}")
    spark.sql(f"DROP DATABASE {unique_name}_thrift")
    assert spark.sql(f"SHOW DATABASES LIKE '{unique_name}*'").collect() == []


@pytest.mark.spark_postgres  # also on PostgreSQL: the Spark path through a PostgreSQL store
def test_catalog_api_sees_what_sql_created(
    spark: Any, spark_metastore: SparkMetastore, unique_name: str
) -> None:
    """spark.catalog (get_tables, get_table, get_functions, get_function) on what SQL made."""
    db = unique_name
    spark.sql(f"CREATE DATABASE {db} COMMENT 'api'")
    spark.sql(f"CREATE TABLE {db}.h (id INT, v STRING) PARTITIONED BY (p STRING) STORED AS ORC")
    spark.sql(f"CREATE TABLE {db}.d USING parquet CLUSTERED BY (x) INTO 2 BUCKETS AS SELECT 1 AS x, 'a' AS y")
    spark.sql(f"CREATE VIEW {db}.v AS SELECT id FROM {db}.h")
    spark.sql(f"CREATE FUNCTION {db}.up AS '{UPPER_UDF}'")
    catalog = spark.catalog
    assert {(d.name, d.description) for d in catalog.listDatabases(f"{db}*")} == {(db, "api")}
    tables = {(t.name, t.tableType, t.isTemporary) for t in catalog.listTables(db)}
    assert tables == {("h", "MANAGED", False), ("d", "MANAGED", False), ("v", "VIEW", False)}
    columns = {(c.name, c.dataType, c.isPartition, c.isBucket) for c in catalog.listColumns(f"{db}.h")}
    assert columns == {
        ("id", "int", False, False),
        ("v", "string", False, False),
        ("p", "string", True, False),
    }
    assert {(c.name, c.isBucket) for c in catalog.listColumns(f"{db}.d")} == {("x", True), ("y", False)}
    functions = [f for f in catalog.listFunctions(db) if f.namespace == [db]]
    assert [(f.name, f.className, f.isTemporary) for f in functions] == [("up", UPPER_UDF, False)]
    assert catalog.tableExists(f"{db}.v") and not catalog.tableExists(f"{db}.nope")
    assert catalog.functionExists(f"{db}.up") and not catalog.functionExists(f"{db}.nope")
    assert catalog.getTable(f"{db}.v").tableType == "VIEW"
    calls = spark_metastore.calls()
    assert calls.get("get_tables", 0) >= 1 and calls.get("get_functions", 0) >= 1
    spark.sql(f"DROP DATABASE {db} CASCADE")
    assert not catalog.databaseExists(db)


PRUNING_ROWS = 24  # id 0..23: p = 'k' || (id % 4), n = id % 3 -> 12 partitions of 2 rows
PRUNING_CASES = [
    ("p = 'k1' AND n = 1", lambda p, n: p == "k1" and n == 1),
    ("n > 1", lambda p, n: n > 1),
    ("p IN ('k0', 'k3') AND n <> 0", lambda p, n: p in ("k0", "k3") and n != 0),
    ("p >= 'k2' OR n = 0", lambda p, n: p >= "k2" or n == 0),
    ("p = 'nope'", lambda p, n: False),
]
_CREATE_PRUNED = {
    "hive_orc": "CREATE TABLE {t} (id INT, v STRING) PARTITIONED BY (p STRING, n INT) STORED AS ORC",
    "hive_text": "CREATE TABLE {t} (id INT, v STRING) PARTITIONED BY (p STRING, n INT) STORED AS TEXTFILE",
    "datasource_parquet": "CREATE TABLE {t} (id INT, v STRING, p STRING, n INT) USING parquet PARTITIONED BY (p, n)",
}


def _partitions_read(df: Any, kind: str, every: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """The (p, n) partitions that the physical scan of ``df`` reads (``every``: all the table has)."""
    plan = df._jdf.queryExecution().executedPlan()
    if kind == "hive_text":  # HiveTableScanExec: scans its relation's pruned partitions, else all
        scans = plan.collectLeaves()
        assert scans.length() == 1 and scans.apply(0).nodeName().startswith("Scan hive"), plan.toString()
        pruned = scans.apply(0).relation().prunedPartitions()
        if not pruned.isDefined():
            return set(every)
        parts = [pruned.get().apply(i).spec() for i in range(pruned.get().length())]
        return {(spec.apply("p"), int(spec.apply("n"))) for spec in parts}
    # converted Hive ORC and data-source Parquet: a file scan over the pruned file index
    assert "FileScan" in plan.toString() and "PartitionFilters: [" in plan.toString(), plan.toString()
    out = set()
    for f in df.inputFiles():
        m = re.search(r"/p=(\w+)/n=(\d+)/[^/]+$", f)
        assert m, f
        out.add((m.group(1), int(m.group(2))))
    return out


@pytest.mark.parametrize("kind", list(_CREATE_PRUNED))
def test_partition_pruning_uses_get_partitions_by_filter(
    spark: Any, spark_metastore: SparkMetastore, unique_name: str, kind: str
) -> None:
    t = f"{unique_name}.t"
    spark.sql(f"CREATE DATABASE {unique_name}")
    spark.sql(_CREATE_PRUNED[kind].format(t=t))
    spark.sql(
        f"INSERT INTO {t} PARTITION (p, n) SELECT id, CAST(id AS STRING), concat('k', id % 4), id % 3"
        f" FROM range({PRUNING_ROWS}) AS r(id)"
    )
    data = [(i, f"k{i % 4}", i % 3) for i in range(PRUNING_ROWS)]
    every = {(p, n) for _, p, n in data}
    assert len(every) == 12

    df = spark.sql(f"SELECT id FROM {t}")
    assert sorted(r.id for r in df.collect()) == list(range(PRUNING_ROWS))
    assert _partitions_read(df, kind, every) == every

    for where, keep in PRUNING_CASES:
        before = spark_metastore.calls()
        df = spark.sql(f"SELECT id, p, n FROM {t} WHERE {where}")
        rows = df.collect()
        after = spark_metastore.calls()
        delta = {m: after.get(m, 0) - before.get(m, 0) for m in after}
        expected = sorted((i, p, n) for i, p, n in data if keep(p, n))
        assert sorted((r.id, r.p, r.n) for r in rows) == expected, where
        assert delta.get("get_partitions_by_filter", 0) >= 1, (where, delta)
        assert delta.get("get_partitions", 0) == 0 and delta.get("get_partitions_ps_with_auth", 0) == 0, (
            where,
            delta,
        )
        wanted = {(p, n) for p, n in every if keep(p, n)}
        assert _partitions_read(df, kind, every) == wanted, where
        assert len(wanted) < len(every)
    spark.sql(f"DROP DATABASE {unique_name} CASCADE")


def test_statements_match_builtin_catalog(
    hivemesh_script_results: list[dict[str, Any]], builtin_catalog_run: SparkScriptRun
) -> None:
    """Every statement of SCRIPT gives on hivemesh what it gives on Spark's built-in catalog."""
    reference = builtin_catalog_run.results()
    assert [r["sql"] for r in reference] == SCRIPT
    assert [r["sql"] for r in hivemesh_script_results] == SCRIPT
    differences = []
    for ref, got in zip(reference, hivemesh_script_results, strict=True):
        if comparable(ref) != comparable(got):
            differences.append(
                f"{ref['sql']}\n  built-in: {ref.get('message') or json.dumps(comparable(ref))[:2000]}"
                f"\n  hivemesh: {got.get('message') or json.dumps(comparable(got))[:2000]}"
            )
    assert not differences, f"{len(differences)} statement(s) differ:\n" + "\n".join(differences)
    # the script really ran: the reference fails exactly where the script's comments say
    assert [(r["sql"], r["error"]) for r in reference if "error" in r] == EXPECTED_ERRORS


def test_hms_fast_stats_match_builtin_catalog(
    hivemesh_script_results: list[dict[str, Any]], builtin_catalog_run: SparkScriptRun
) -> None:
    reference = builtin_catalog_run.results()
    checked = hive3_checked = 0
    for ref, got in zip(reference, hivemesh_script_results, strict=True):
        if not ref["sql"].startswith("DESCRIBE EXTENDED"):
            continue
        mine, theirs = fast_stats_view(got), fast_stats_view(ref)
        theirs.pop("Hive 3+ fast stats", None)  # the built-in catalog (Hive 2.3) writes none
        hive3 = mine.pop("Hive 3+ fast stats", None)
        if hive3 is not None:  # hivemesh writes them wherever it writes numFiles, as Hive 4
            assert hive3 == sorted(HIVE3_FAST_STATS), ref["sql"]
            hive3_checked += 1
        if theirs != mine:
            raise AssertionError(f"{ref['sql']}: built-in {theirs}, hivemesh {mine}")
        checked += 1
    assert checked > 5 and hive3_checked > 0
