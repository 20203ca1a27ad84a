"""Build a SparkSession with Hive support that uses a Hive metastore over Thrift."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def _as_uri(path_or_uri: str) -> str:
    if "://" in path_or_uri or path_or_uri.startswith("file:"):
        return path_or_uri
    return Path(path_or_uri).resolve().as_uri()


DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def delta_conf(conf: dict[str, Any]) -> dict[str, str]:
    """The Spark settings that turn Delta Lake on, merged with ``conf`` (the caller's settings).

    Adds the ``delta`` JVM bundle's jars (Delta Lake for Spark, fetched from Maven Central on first
    use, or ``$HIVEMESH_JARS_DELTA``) to ``spark.jars``, Delta's SQL extension to
    ``spark.sql.extensions`` and Delta's catalog as ``spark_catalog`` (so ``CREATE TABLE ... USING
    delta`` registers the table in the Hive metastore, as Spark with Delta does). Settings the caller
    gave are kept: extensions and jars are appended to, an explicit ``spark_catalog`` wins. Raises
    :class:`hivemesh.jvm.JvmArtifactError` when the jars cannot be had.
    """
    from hivemesh.jvm import resolve

    jars = [str(j) for j in resolve("delta").jars()]
    out = {k: str(v) for k, v in conf.items()}
    given = [j for j in out.get("spark.jars", "").split(",") if j]
    out["spark.jars"] = ",".join([*given, *[j for j in jars if j not in given]])
    extensions = [e for e in out.get("spark.sql.extensions", "").split(",") if e]
    if DELTA_EXTENSION not in extensions:
        extensions.append(DELTA_EXTENSION)
    out["spark.sql.extensions"] = ",".join(extensions)
    out.setdefault("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    return out


def session(
    metastore_uri: str,
    warehouse: str | None = None,
    app_name: str = "hivemesh",
    master: str | None = None,
    delta: bool = False,
    **conf: Any,
) -> SparkSession:
    """Return a SparkSession (Hive support on) whose catalog is the metastore at ``metastore_uri``.

    ``metastore_uri``: ``thrift://host:port`` (a comma-separated list is allowed, as in Hive).
    ``warehouse``: ``spark.sql.warehouse.dir`` (a path or URI); where Spark puts managed tables of
    databases created without a location. ``master``: defaults to ``$SPARK_MASTER`` or
    ``local[*]``. Extra keyword arguments are Spark settings, dots written as given, e.g.
    ``session("thrift://127.0.0.1:9083", **{"spark.sql.shuffle.partitions": "4"})``.

    Example::

        import hivemesh.spark
        spark = hivemesh.spark.session("thrift://127.0.0.1:9083", warehouse="/data/warehouse")
        spark.sql("show databases").show()

    ``delta=True`` turns on Delta Lake for Spark (:func:`delta_conf`: its jars, SQL extension and
    catalog); the jars must be on the class path when the JVM starts, so pass it to the first
    session of the process.

    If a SparkSession is already active in this process, its settings win for the static ones
    (Spark's own rule): stop it first to point at another metastore.
    """
    if delta:
        conf = delta_conf(conf)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("SPARK_MASTER", "local[*]"))
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", metastore_uri)
        .config("spark.sql.hive.metastorePartitionPruning", "true")
        .config("spark.ui.enabled", "false")
    )
    # Python workers (ACID reads of original/streaming files, DML writers, the hiveacid data
    # source) must run an interpreter with pyarrow and hivemesh. A driver started from Python
    # takes the workers' interpreter from $PYSPARK_PYTHON only (spark.pyspark.python counts under
    # spark-submit), so default both to this interpreter; an explicit setting wins.
    python = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", str(python))
    builder = builder.config("spark.pyspark.python", str(python))
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", _as_uri(warehouse))
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.enableHiveSupport().getOrCreate()
    from hivemesh.spark.acid_source import register

    register(spark)  # spark.read.format("hiveacid")
    return spark
