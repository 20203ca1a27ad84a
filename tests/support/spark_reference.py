"""Run a script of Spark SQL statements and return every result as JSON-able rows.

The same script runs twice: in the test process against hivemesh (the shared ``spark`` fixture),
and here, in a separate Python process, against Spark's own built-in catalog (Hive support with
an embedded Derby metastore in a temporary directory: no metastore URI, no Thrift). The test then
compares the two lists statement by statement.

Statements are templates: ``{name}`` is replaced by ``params[name]`` (plain text substitution, so
SQL braces are left alone), and the same values are turned back into ``{name}`` in the results,
so that runs with different database names or directories compare equal.

Command line (what :func:`run_reference` starts)::

    python -m tests.support.spark_reference SCRIPT.json RESULTS.json WORKDIR [--metastore-uri URI]

SCRIPT.json holds ``{"statements": [...], "params": {...}}``; params may use ``{workdir}``. Without
``--metastore-uri`` the session uses embedded Derby in WORKDIR; with it, that metastore (a second,
independent SparkSession on the same catalog).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Spark settings shared by the test suite's session and the reference session (same results).
SPARK_TEST_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # INSERT ... PARTITION (p) SELECT with only dynamic partitions is refused in Hive's strict mode.
    "spark.hadoop.hive.exec.dynamic.partition.mode": "nonstrict",
    "spark.driver.memory": "1g",
    # a Delta table's snapshot rebuilt from its log in one small job, not Delta's 50 tasks
    "spark.databricks.delta.snapshotPartitions": "2",
}
SPARK_MASTER = "local[2]"
REPO_ROOT = Path(__file__).resolve().parents[2]


def write_log4j2(path: Path) -> Path:
    """Write a Log4j 2 configuration (errors only) to ``path``; pass it with :func:`driver_java_options`."""
    from hivemesh.quickstart.session import write_log4j2_config

    return write_log4j2_config(path, "error")


def driver_java_options(log4j2: Path, *extra: str) -> str:
    return " ".join([f"-Dlog4j2.configurationFile={log4j2.resolve().as_uri()}", *extra])


# --------------------------------------------------------------------------------------------- results


def jsonable(value: Any) -> Any:
    """A Spark result value as JSON (Rows and structs become lists, decimals/dates strings)."""
    from pyspark.sql import Row

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value else "NaN"
    if isinstance(value, decimal.Decimal | dt.date | dt.datetime | dt.time | dt.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return "b64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, Row):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return sorted(([jsonable(k), jsonable(v)] for k, v in value.items()), key=json.dumps)
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def _substitute(text: str, params: Mapping[str, str]) -> str:
    for key, value in params.items():
        text = text.replace("{" + key + "}", value)
    return text


def _normalize(value: Any, params: Mapping[str, str]) -> Any:
    """Replace every parameter value by its ``{name}`` (longest first) inside result strings."""
    if isinstance(value, str):
        for key, text in sorted(params.items(), key=lambda kv: -len(kv[1])):
            if text:
                value = value.replace(text, "{" + key + "}")
        return value
    if isinstance(value, list):
        return [_normalize(v, params) for v in value]
    return value


def error_name(exc: BaseException) -> str:
    """``ExceptionClass[CONDITION]`` of a Spark error (its message is not compared: it names paths)."""
    condition = None
    get = getattr(exc, "getCondition", None)
    if get is not None:
        try:
            condition = get()
        except Exception:
            condition = None
    return f"{type(exc).__name__}[{condition}]"


def run_statements(spark: Any, statements: Sequence[str], params: Mapping[str, str]) -> list[dict[str, Any]]:
    """Run each statement in order; return ``{"sql", "columns", "rows"}`` or ``{"sql", "error"}`` each.

    ``sql`` is the template as given; ``seconds`` the statement's run time (informative only). Rows keep Spark's order (the caller sorts when order is not
    part of the result). A failing statement does not stop the script.
    """
    from pyspark.logger import PySparkLogger

    # PySpark logs every failing SQL statement (with its Java stack) at ERROR; expected errors are
    # part of the scripts, and each result keeps the error's kind and first message line anyway.
    error_log = PySparkLogger.getLogger("SQLQueryContextLogger")
    level = error_log.level
    error_log.setLevel(logging.CRITICAL)
    try:
        return _run(spark, statements, params)
    finally:
        error_log.setLevel(level)


def _run(spark: Any, statements: Sequence[str], params: Mapping[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for template in statements:
        sql = _substitute(template, params)
        started = time.perf_counter()
        try:
            df = spark.sql(sql)
            rows = [jsonable(r) for r in df.collect()]
            result = {
                "sql": template,
                "columns": _normalize(list(df.columns), params),
                "rows": _normalize(rows, params),
            }
        except Exception as e:  # a Py4J/Spark error: record its kind, keep going
            result = {"sql": template, "error": error_name(e), "message": str(e).splitlines()[0][:500]}
        result["seconds"] = round(time.perf_counter() - started, 3)
        out.append(result)
    return out


# ------------------------------------------------------------------------------------ the subprocess


def reference_session(workdir: Path) -> Any:
    """A SparkSession on Spark's own catalog: Hive support, embedded Derby under ``workdir``."""
    from pyspark.sql import SparkSession

    log4j2 = write_log4j2(workdir / "log4j2.properties")
    builder = (
        SparkSession.builder.appName("hivemesh-spark-reference")
        .master(SPARK_MASTER)
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", "")  # no Thrift: Spark's in-process metastore
        .config("spark.sql.warehouse.dir", (workdir / "warehouse").resolve().as_uri())
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true",
        )
        .config(
            "spark.driver.extraJavaOptions",
            driver_java_options(log4j2, f"-Dderby.stream.error.file={workdir / 'derby.log'}"),
        )
    )
    for key, value in SPARK_TEST_CONF.items():
        builder = builder.config(key, value)
    return builder.enableHiveSupport().getOrCreate()


def metastore_session(uri: str, workdir: Path) -> Any:
    """A SparkSession on the metastore at ``uri`` (through hivemesh's own session helper)."""
    import hivemesh.spark

    log4j2 = write_log4j2(workdir / "log4j2.properties")
    conf = dict(SPARK_TEST_CONF)
    conf["spark.driver.extraJavaOptions"] = driver_java_options(log4j2)
    return hivemesh.spark.session(
        uri,
        warehouse=str(workdir / "warehouse"),
        app_name="hivemesh-second-session",
        master=SPARK_MASTER,
        **conf,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script", type=Path)
    ap.add_argument("results", type=Path)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--metastore-uri")
    args = ap.parse_args(argv)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    script = json.loads(args.script.read_text(encoding="utf-8"))
    params = {k: v.replace("{workdir}", str(workdir)) for k, v in script.get("params", {}).items()}
    spark = (
        metastore_session(args.metastore_uri, workdir) if args.metastore_uri else reference_session(workdir)
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        params.setdefault("warehouse", spark.conf.get("spark.sql.warehouse.dir"))
        results = run_statements(spark, script["statements"], params)
    finally:
        spark.stop()
    args.results.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGKILL when pytest dies (its JVM follows: PySpark's gateway exits on
    stdin EOF)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class SparkScriptRun:
    """:func:`run_statements` in a new Python process (its own JVM), started now, awaited later.

    Without ``metastore_uri``: Spark's built-in catalog (embedded Derby in ``workdir``). With it: a
    second, independent SparkSession on that metastore. :meth:`results` waits for the process and
    returns its result list, or raises RuntimeError with the process output if it failed.
    """

    def __init__(
        self,
        statements: Sequence[str],
        workdir: Path,
        params: Mapping[str, str] | None = None,
        metastore_uri: str | None = None,
    ):
        self.workdir = Path(workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self.workdir / "script.json"
        self.results_path = self.workdir / "results.json"
        self.output_path = self.workdir / "output.log"
        payload = {"statements": list(statements), "params": dict(params or {})}
        script.write_text(json.dumps(payload), encoding="utf-8")
        self.cmd = [
            sys.executable, "-m", "tests.support.spark_reference",
            str(script), str(self.results_path), str(self.workdir),
        ]  # fmt: skip
        if metastore_uri:
            self.cmd += ["--metastore-uri", metastore_uri]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        self._output = open(self.output_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in results()
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=self.workdir,
            env=env,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self._results: list[dict[str, Any]] | None = None

    def results(self, timeout: float = 900) -> list[dict[str, Any]]:
        if self._results is None:
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                code = None
            self._output.close()
            if code != 0 or not self.results_path.exists():
                output = self.output_path.read_text(encoding="utf-8", errors="replace")
                raise RuntimeError(
                    f"Spark subprocess failed (exit {code}): {' '.join(self.cmd)}\n{output[-12000:]}"
                )
            self._results = json.loads(self.results_path.read_text(encoding="utf-8"))
        return self._results

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._output.close()


def run_reference(
    statements: Sequence[str],
    workdir: Path,
    params: Mapping[str, str] | None = None,
    metastore_uri: str | None = None,
    timeout: float = 900,
) -> list[dict[str, Any]]:
    """Run ``statements`` in a new Python process and wait for it (see :class:`SparkScriptRun`)."""
    return SparkScriptRun(statements, workdir, params, metastore_uri).results(timeout)


if __name__ == "__main__":
    sys.exit(main())
