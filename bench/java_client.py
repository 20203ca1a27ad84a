"""The JVM load client of bench/metastore.py: ``bench/java/MetastoreLoad.java`` compiled with
``javac`` (once per process, into a temporary directory) against the PySpark wheel's jars (Hive
2.3.10's Thrift client and libthrift: the metastore client Spark's Hive support ships) and run on
the same Java 17+ as HMS 2.3.10.

It times the calls as Spark and Trino make them: the reply is decoded by Java, so a figure is the
server's time plus a JVM client's, not the Python bindings' (which take ~40 ms for a reply of 1,000
partitions). :func:`run_java_client` runs one JVM for a list of steps and returns one dict per step:
``single:<op>:<calls>:<warmup>`` (one connection) or ``concurrent:<op>:<clients>:<seconds>:<warmup>``
(one thread and connection per client, one common window); see the Java source for the ops.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["JavaClientError", "java_client_unavailable", "run_java_client"]

SOURCE = Path(__file__).resolve().parent / "java" / "MetastoreLoad.java"
MAIN = "MetastoreLoad"
_compiled: Path | None = None
_lock = threading.Lock()


class JavaClientError(RuntimeError):
    """The Java client could not be compiled, or its JVM failed (the message has its stderr)."""


def _jars() -> Path:
    from tests.support.javahms import pyspark_jars_dir

    return pyspark_jars_dir()


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise JavaClientError("no java on PATH")
    return java


def _javac() -> str:
    from hivemesh.jvm import JavaNotFound, find_javac

    try:
        return str(find_javac(17))
    except JavaNotFound as e:
        raise JavaClientError(str(e)) from e


def java_client_unavailable() -> str | None:
    """Why the Java client cannot run here (no JDK, no PySpark Hive jars), or None when it can."""
    from tests.support.javahms import java_available

    if not java_available():
        return "needs Java 17+ and the PySpark wheel's Hive 2.3 jars"
    try:
        _javac()
    except JavaClientError as e:
        return str(e)
    return None


def classes_dir() -> Path:
    """The compiled client (compiled on the first call of the process); raises JavaClientError."""
    global _compiled
    with _lock:
        if _compiled is None:
            out = Path(tempfile.mkdtemp(prefix="hivemesh-java-client-"))
            done = subprocess.run(
                [_javac(), "--release", "17", "-cp", f"{_jars()}{os.sep}*", "-d", str(out), str(SOURCE)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                shutil.rmtree(out, ignore_errors=True)
                raise JavaClientError(f"javac failed:\n{done.stdout}{done.stderr}")
            _compiled = out
        return _compiled


def run_java_client(
    host: str,
    port: int,
    db: str,
    table: str,
    partitioned: str,
    steps: Sequence[str],
    on_window: Callable[[str, float, float], None] | None = None,
    java_opts: Sequence[str] = ("-Xmx512m",),
    timeout: float = 1800.0,
) -> list[dict[str, Any]]:
    """Run the client JVM once for ``steps`` against ``host:port`` (tables ``db.table`` and the
    partitioned ``db.partitioned`` must exist); one dict per step, in order: ``calls``, ``mean_ms``,
    ``p50_ms``, ``p99_ms`` (per call, ms), ``seconds`` and ``ops_per_s``; concurrent steps add
    ``clients`` and ``idle_clients``; a failed step has ``error`` instead (e.g. Hive 4's missing
    ``get_table``). Before each concurrent window ``on_window(step, start, end)`` is called with its
    instants on the ``time.monotonic()`` clock (ahead of ``start``; it may block until ``end``, to
    read the server's CPU there). Raises JavaClientError when the JVM fails or runs past ``timeout``
    seconds."""
    cp = os.pathsep.join([str(classes_dir()), f"{_jars()}{os.sep}*"])
    cmd = [_java(), *java_opts, "-cp", cp, MAIN, host, str(port), db, table, partitioned, *steps]
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        results: list[dict[str, Any]] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                doc = json.loads(line)
                if "window" in doc:
                    # System.nanoTime and time.monotonic are both CLOCK_MONOTONIC on Linux
                    if on_window is not None:
                        on_window(doc["window"], doc["start_ns"] / 1e9, doc["end_ns"] / 1e9)
                    continue
                results.append(doc)
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if rc != 0 or len(results) != len(steps):
            err.seek(0)
            raise JavaClientError(
                f"the Java client exited {rc} after {len(results)} of {len(steps)} steps:\n{err.read()[-3000:]}"
            )
    return results


def wait_until(instant: float) -> None:
    """Sleep until ``time.monotonic()`` reaches ``instant``."""
    time.sleep(max(0.0, instant - time.monotonic()))
