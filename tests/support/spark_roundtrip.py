"""Spark's own Hive client against a metastore, in a separate PySpark process (its own JVM), so a
test can give the JVM settings the suite's shared SparkSession does not have (TLS truststores,
Kerberos). For each target it creates a database and a Parquet table, inserts 3 rows and reads
them back, and reports the databases it sees and the sum of the rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import hivemesh.spark
    from tests.support.federation import stop_active_spark

    targets, conf, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    seen = {}
    for name, uri, warehouse, db in targets:  # one JVM: each session rebinds its Hive client
        spark = hivemesh.spark.session(
            uri, warehouse=warehouse, master="local[1]", **{"spark.sql.shuffle.partitions": "1", **conf}
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
        spark.sql(f"CREATE TABLE {db}.t (id INT) STORED AS PARQUET")
        spark.sql(f"INSERT INTO {db}.t VALUES (1), (2), (3)")
        seen[name] = {
            "databases": sorted(r[0] for r in spark.sql("SHOW DATABASES").collect()),
            "sum": spark.sql(f"SELECT sum(id) FROM {db}.t").collect()[0][0],
        }
        stop_active_spark()
    with open(out, "w") as f:
        json.dump(seen, f)
    """
)


def spark_roundtrip(
    tmp_path: Path,
    targets: list[tuple[str, str, str]],
    conf: dict[str, str],
    env: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run the round trip for ``targets`` (``(name, metastore URI, database)``) with the Spark
    settings ``conf`` (JVM options included) and extra environment ``env``; returns
    ``{name: {"databases": [...], "sum": 6}}``. Fails the test with Spark's stderr when it fails."""
    out = tmp_path / "spark-roundtrip.json"
    script = tmp_path / "spark_roundtrip.py"
    script.write_text(_SCRIPT)
    rows = [(name, uri, str(tmp_path / f"wh-{name}"), db) for name, uri, db in targets]
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(rows), json.dumps(conf), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())
