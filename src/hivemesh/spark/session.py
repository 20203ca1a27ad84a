"""Set up a SparkSession for hivemesh: Hive support on a metastore over Thrift, the interpreter of
the Python workers, the ``hiveacid`` data source and, on request, Delta Lake.

The one place that configures a session: :func:`session` builds one; :func:`use_configured_python`
(worker Python) and :func:`register_hiveacid` also serve sessions built elsewhere, and
:func:`metastore_uri_of` reads a session's metastore. The rest of :mod:`hivemesh.spark` imports
these and none of them imports the rest (the data source, :mod:`.acid_source`, sits below).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from hivemesh.jvm import resolve
from hivemesh.spark.acid_source import PUSHDOWN_CONF, HiveAcidDataSource


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


# --- the Python workers' interpreter ---------------------------------------------------------------
# Python workers (ACID reads of large streaming files, DML writers, the hiveacid data source) must
# run an interpreter with pyarrow and hivemesh. A driver started from Python (not spark-submit)
# takes the workers' interpreter from $PYSPARK_PYTHON only (SparkContext.pythonExec, fixed when the
# context starts, default python3) and ignores spark.pyspark.python, which counts under
# spark-submit only.


def _worker_python(conf: dict[str, Any]) -> str:
    """The workers' interpreter for a new session: ``spark.pyspark.python`` in ``conf``, else
    ``$PYSPARK_PYTHON``, else this interpreter; also made ``$PYSPARK_PYTHON``'s default, so a
    context started from Python uses it."""
    python = str(conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON") or sys.executable)
    os.environ.setdefault("PYSPARK_PYTHON", python)
    return python


def use_configured_python(spark: SparkSession) -> None:
    """Make the Python workers of ``spark`` run ``spark.pyspark.python`` (set by :func:`session` to
    an interpreter with pyarrow and hivemesh), before a job that starts Python workers.

    Without this, a session whose context was started from Python would run whatever ``python3``
    is found (``SparkContext.pythonExec``). No change when ``$PYSPARK_PYTHON`` is set (it wins) or
    the setting is absent."""
    sc = spark.sparkContext
    if os.environ.get("PYSPARK_PYTHON"):
        return
    configured = sc.getConf().get("spark.pyspark.python")
    if configured and getattr(sc, "pythonExec", None) != configured:
        sc.pythonExec = configured


# --- the session -----------------------------------------------------------------------------------


def metastore_uri_of(spark: SparkSession) -> str:
    """``hive.metastore.uris`` of a SparkSession (``spark.hadoop.hive.metastore.uris``);
    ValueError when it has none."""
    conf = spark.sparkContext.getConf()
    uri = conf.get("spark.hadoop.hive.metastore.uris") or spark.conf.get(
        "spark.hadoop.hive.metastore.uris", None
    )
    if not uri:
        raise ValueError("no metastore: pass metastore_uri= or set spark.hadoop.hive.metastore.uris")
    return uri


def register_hiveacid(spark: Any, metastore_uri: str | None = None) -> None:
    """Register the ``hiveacid`` Python data source (:mod:`hivemesh.spark.acid_source`) in
    ``spark`` as ``format("hiveacid")`` (:func:`session` does it), turn on
    ``spark.sql.python.filterPushdown.enabled`` (which partition pushdown needs) and make the
    planning and reading workers run the configured Python (:func:`use_configured_python`).

    ``metastore_uri``: the default ``metastore.uri`` option (default: the session's
    ``hive.metastore.uris``, if any)."""
    use_configured_python(spark)
    if metastore_uri is None:
        try:
            metastore_uri = metastore_uri_of(spark)
        except ValueError:
            metastore_uri = None
    spark.conf.set(PUSHDOWN_CONF, "true")
    source = type(
        "HiveAcidDataSourceWithDefaults",
        (HiveAcidDataSource,),
        {"default_metastore_uri": metastore_uri, "__module__": HiveAcidDataSource.__module__},
    )
    spark.dataSource.register(source)


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

    The Python workers run ``spark.pyspark.python`` when given, else ``$PYSPARK_PYTHON``, else
    this interpreter; ``format("hiveacid")`` is registered (:func:`register_hiveacid`).
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
        .config("spark.pyspark.python", _worker_python(conf))
    )
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", _as_uri(warehouse))
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.enableHiveSupport().getOrCreate()
    register_hiveacid(spark)  # spark.read.format("hiveacid")
    return spark
