"""Delta schema changes delta-rs cannot make, run through Delta Lake for Spark.

Renaming, dropping, reordering and widening columns of a Delta table without rewriting its data
needs Delta column mapping (``delta.columnMapping.mode=name``) and Delta's own ``ALTER TABLE``;
delta-rs has neither rename nor drop. :func:`run_statements` runs such statements on a path-based
table (``delta.`<uri>```) in a short-lived Python process with a local SparkSession and the
``delta`` JVM bundle (:mod:`hivemesh.jvm`), so the replicator itself never holds a JVM and a user's
SparkSession is never touched. Each statement is one Delta commit (Delta's commit protocol).

Run as ``python -m hivemesh.replication.delta.spark_ddl`` with a JSON object on stdin:
``{"uri": ..., "statements": ["ALTER TABLE {table} RENAME COLUMN a TO b", ...], "master":
"local[1]", "conf": {...}}`` (``{table}`` stands for the table).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

from hivemesh.errors import HivemeshError

__all__ = ["SparkDdlError", "run_statements"]

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

#: Settings for the DDL process's short life on metadata-sized work (a request's ``conf`` wins):
#: the JIT's quick tier only (the C2 compiler's warm-up costs more CPU than such a process runs),
#: and a table's snapshot rebuilt in one task rather than Delta's default 50 (run one at a time on
#: ``local[1]``). Neither changes what a statement does; measured on a 2-core machine, two DDL
#: calls took 74 s of CPU without them, 26-29 s with them.
SHORT_LIVED_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.databricks.delta.snapshotPartitions": "1",
}


class SparkDdlError(HivemeshError, RuntimeError):
    """A Delta DDL statement failed (the message holds Spark's error), or Spark could not start."""


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (backquoted)."""
    return "`" + name.replace("`", "``") + "`"


def run_statements(
    uri: str,
    statements: Sequence[str],
    master: str = "local[1]",
    conf: dict[str, str] | None = None,
    timeout_s: float = 900.0,
) -> None:
    """Run ``statements`` (``{table}`` = the Delta table at ``uri``) in order in a Spark process.
    Raises SparkDdlError with the failing statement and Spark's message; statements before it
    are committed (each is its own Delta commit)."""
    if not statements:
        return
    request = json.dumps({"uri": uri, "statements": list(statements), "master": master, "conf": conf or {}})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hivemesh.replication.delta.spark_ddl"],
            input=request,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )
    except subprocess.TimeoutExpired as e:
        raise SparkDdlError(f"Delta DDL on {uri} did not finish in {timeout_s:.0f}s") from e
    if proc.returncode != 0:
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        tail = [line for line in lines if line.startswith("hivemesh-ddl-error:")] or lines[-5:]
        raise SparkDdlError(
            f"Delta DDL on {uri} failed: " + " ".join(tail).removeprefix("hivemesh-ddl-error: ")
        )


def _main() -> int:
    request = json.loads(sys.stdin.read())
    from pyspark.sql import SparkSession

    from hivemesh.jvm import resolve

    jars = ",".join(str(j) for j in resolve("delta").jars())
    builder = (
        SparkSession.builder.master(request.get("master") or "local[1]")
        .appName("hivemesh-delta-ddl")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
    )
    for k, v in SHORT_LIVED_CONF.items():
        builder = builder.config(k, v)
    for k, v in (request.get("conf") or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    table = "delta." + quote(request["uri"])
    try:
        for statement in request["statements"]:
            sql = statement.replace("{table}", table)
            try:
                spark.sql(sql)
            except Exception as e:  # Spark's AnalysisException etc.: reported on one line
                message = str(e).splitlines()[0] if str(e) else type(e).__name__
                print(f"hivemesh-ddl-error: {sql}: {message}", flush=True)
                return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
