"""Hive's constant names and the clock units of the HMS API.

Table types (``TableType``), the table parameters that make a table transactional
(``hive_metastoreConstants``), the statistics parameters of ``StatsSetupConst``, the SerDe and
format class names hivemesh writes, and ``now_s``/``now_ms`` (createTime-style seconds; lock,
txn and heartbeat milliseconds).
"""

from __future__ import annotations

import time

# TableType
MANAGED_TABLE = "MANAGED_TABLE"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
VIRTUAL_VIEW = "VIRTUAL_VIEW"

# hive_metastoreConstants / TransactionalValidationListener
TRANSACTIONAL = "transactional"
TRANSACTIONAL_PROPERTIES = "transactional_properties"
DEFAULT_PROPERTIES = "default"  # full ACID
INSERT_ONLY = "insert_only"  # insert-only ("micro-managed") tables
BUCKETING_VERSION = "bucketing_version"

# StatsSetupConst
DO_NOT_UPDATE_STATS = "DO_NOT_UPDATE_STATS"
STATS_GENERATED = "STATS_GENERATED"
COLUMN_STATS_ACCURATE = "COLUMN_STATS_ACCURATE"
NUM_FILES, TOTAL_SIZE = "numFiles", "totalSize"
NUM_ERASURE_CODED_FILES = "numFilesErasureCoded"  # Hive 3+: files stored with HDFS erasure coding

# SerDes and formats
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
ORC_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
TEXT_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


def now_s() -> int:
    """The current time in whole seconds since the epoch (createTime, event times)."""
    return int(time.time())


def now_ms() -> int:
    """The current time in milliseconds since the epoch (txn, lock and heartbeat times)."""
    return int(time.time() * 1000)
