"""The quickstart's SparkSession: ``local[2]``, few shuffle partitions, and quiet JVM logs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

import hivemesh.spark

log = logging.getLogger(__name__)

#: Spark settings for quickstart-sized data on a small machine.
QUICKSTART_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.showConsoleProgress": "false",
}

#: Delta's settings for quickstart-sized tables: a table's snapshot is rebuilt from its log in one
#: small job instead of Delta's default of 50 tasks (``spark.databricks.delta.snapshotPartitions``).
QUICKSTART_DELTA_CONF: dict[str, str] = {
    "spark.databricks.delta.snapshotPartitions": "2",
}

_LOG4J2 = """\
# Written by hivemesh: JVM log output of a Spark driver.
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = error
# PySpark's gateway counts as a shell: Spark resets the root level to the gateway logger's level
# (WARN unless configured) and prints a notice about it, unless the two agree.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""


def spark_log_level() -> str:
    """``WARN`` when Python logging shows INFO (or more), else ``ERROR``: Spark stays quiet by default."""
    return "WARN" if logging.getLogger().getEffectiveLevel() <= logging.INFO else "ERROR"


def write_log4j2_config(path: Path, level: str) -> Path:
    """Write a Log4j 2 properties file sending JVM logs at ``level`` and above to stderr."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_LOG4J2.format(level=level.lower()), encoding="utf-8")
    return path


def quickstart_session(
    metastore_uri: str | None,
    data_dir: Path,
    master: str = "local[2]",
    delta: bool = False,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession for the quickstart whose warehouse is ``data_dir/warehouse``; ``delta``:
    Delta Lake for Spark on (see :func:`hivemesh.spark.session`); ``conf``: more Spark settings.

    ``metastore_uri``: ``thrift://host:port`` of a Hive metastore; None uses Spark's own embedded
    Derby catalog in ``data_dir/derby`` (a development fallback: no Thrift metastore involved).
    Raises RuntimeError if this process already has an active SparkSession: its metastore and
    warehouse settings would silently win over these.
    """
    if SparkSession.getActiveSession() is not None:
        raise RuntimeError("a SparkSession is already active in this process; the quickstart needs its own")
    data_dir = Path(data_dir).resolve()
    level = spark_log_level()
    log4j2 = write_log4j2_config(data_dir / "spark-log4j2.properties", level)
    java_opts = [f"-Dlog4j2.configurationFile={log4j2.as_uri()}"]
    settings = dict(QUICKSTART_CONF)
    if delta:
        settings.update(QUICKSTART_DELTA_CONF)
    settings.update(conf or {})
    if metastore_uri is None:
        settings["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={data_dir / 'derby'};create=true"
        )
        java_opts.append(f"-Dderby.stream.error.file={data_dir / 'derby.log'}")
    settings["spark.driver.extraJavaOptions"] = " ".join(java_opts)
    log.info("starting Spark (%s) on metastore %s", master, metastore_uri or "embedded Derby")
    spark = hivemesh.spark.session(
        metastore_uri or "",
        warehouse=str(data_dir / "warehouse"),
        app_name="hivemesh-quickstart",
        master=master,
        delta=delta,
        **settings,
    )
    spark.sparkContext.setLogLevel(level)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark
