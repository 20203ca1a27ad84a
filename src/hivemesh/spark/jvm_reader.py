"""The JVM half of the ACID reader: ``java/io/hivemesh/spark/AcidOrcSource.java``, a Spark
DataSource V2 shipped as source in this package, compiled once per Spark version and source digest
with ``javac`` against the running Spark's own jars into the JVM cache
(:func:`hivemesh.jvm.cache_dir`), and added to a session with ``ADD JAR`` on first use.

What it gives the reader (:mod:`hivemesh.spark.acid_reader`): ACID files read with only the
columns a query uses (Spark's own ORC readers fail as soon as an ACID column is pruned),
``count()`` from ORC footers, and streaming files cut at their ``_flush_length`` read in the JVM.
Without ``javac`` or with ``spark.hivemesh.acid.jvmReader=false`` the reader keeps its Spark-only
path (every ACID column decoded, streaming files read with pyarrow); the reason is logged once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from pyspark.sql import SparkSession

from hivemesh.jvm import cache_dir

__all__ = ["JVM_READER_CONF", "SOURCE_CLASS", "build_jar", "enable", "spark_jars_dir"]

log = logging.getLogger(__name__)

JVM_READER_CONF = "spark.hivemesh.acid.jvmReader"  # "false": never use the JVM reader
SOURCE_CLASS = "io.hivemesh.spark.AcidOrcSource"
SOURCE = Path(__file__).parent / "java" / "io" / "hivemesh" / "spark" / "AcidOrcSource.java"
COMPILE_TIMEOUT_S = 300


def spark_jars_dir() -> Path | None:
    """The jars of the Spark that PySpark launches: ``$SPARK_HOME/jars`` when ``SPARK_HOME`` is
    set (PySpark starts that Spark), else the PySpark wheel's ``jars``; None when neither exists."""
    import pyspark

    candidates = [Path(pyspark.__file__).parent / "jars"]
    if os.environ.get("SPARK_HOME"):
        candidates.insert(0, Path(os.environ["SPARK_HOME"]) / "jars")
    for c in candidates:
        if c.is_dir() and any(c.glob("spark-sql_*.jar")):
            return c
    return None


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found:
        return found
    java = shutil.which("java")
    if java:
        sibling = Path(os.path.realpath(java)).parent / "javac"
        if sibling.exists():
            return str(sibling)
    return None


def _digest(jars: Path) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    for jar in sorted(jars.glob("spark-sql_*.jar")) + sorted(jars.glob("orc-core-*.jar")):
        h.update(jar.name.encode())
    return h.hexdigest()[:16]


def build_jar(javac: str | None = None, jars: Path | None = None) -> Path:
    """Compile the source (``--release 17``) into ``<jvm cache>/hivemesh-spark/acid-orc-<digest>.jar``
    unless that jar exists; returns its path. The jar is written under a temporary name and
    renamed, so concurrent processes never see half a jar.

    Raises RuntimeError (naming what is missing) without ``javac`` or Spark's jars, and
    subprocess.CalledProcessError/TimeoutExpired when compiling fails (timeout 300 s)."""
    jars = jars or spark_jars_dir()
    if jars is None:
        raise RuntimeError("Spark's jars not found (neither the PySpark wheel's jars nor $SPARK_HOME/jars)")
    javac = javac or _javac()
    if javac is None:
        raise RuntimeError("javac not found (set JAVA_HOME to a JDK 17 or later)")
    target = cache_dir() / "hivemesh-spark" / f"acid-orc-{_digest(jars)}.jar"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hivemesh-javac-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [
            javac,
            "-nowarn",
            "--release",
            "17",
            "-cp",
            f"{jars}{os.sep}*",
            "-d",
            str(classes),
            str(SOURCE),
        ]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        archive = shutil.make_archive(str(Path(tmp) / "classes"), "zip", classes)  # a jar is a zip
        fd, staged = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        shutil.copyfile(archive, staged)
        Path(staged).replace(target)
    log.info("compiled the ACID ORC reader into %s", target)
    return target


_build_lock = threading.Lock()


@lru_cache(maxsize=1)
def _jar_or_reason() -> tuple[Path | None, str]:
    try:
        with _build_lock:  # one javac per process (lru_cache does not serialise its callers)
            return build_jar(), ""
    except subprocess.CalledProcessError as e:
        return None, f"javac failed: {(e.stderr or e.stdout or '').strip()[:2000]}"
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)


_added: set[str] = set()  # "<application id> <jar>" already added in this process


def enable(spark: SparkSession) -> bool:
    """Make ``format("io.hivemesh.spark.AcidOrcSource")`` usable in ``spark``: build the jar if
    needed and ``ADD JAR`` it once per application. False (the caller uses its Spark-only path)
    when ``spark.hivemesh.acid.jvmReader`` is ``false``, or the jar cannot be built or added; the
    reason is logged once at WARNING."""
    if spark.conf.get(JVM_READER_CONF, "true").strip().lower() == "false":
        return False
    jar, reason = _jar_or_reason()
    if jar is None:
        _warn_once(f"the JVM ACID reader is off: {reason}")
        return False
    try:
        key = f"{spark.sparkContext.applicationId} {jar}"
        if key not in _added:
            listed = [r[0] for r in spark.sql("LIST JARS").collect()]
            if not any(str(x).endswith("/" + jar.name) for x in listed):
                spark.sql(f"ADD JAR '{jar}'")
            _added.add(key)
        # ADD JAR puts the session's jar class loader on the calling JVM thread only, and Spark
        # looks data sources up through the thread's context class loader: with PySpark's
        # pinned threads every Python thread has its own JVM thread, so set it on this one
        loader = spark._jsparkSession.sharedState().jarClassLoader()  # type: ignore[attr-defined]
        spark._jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - any failure leaves the Spark-only path working
        _warn_once(f"the JVM ACID reader is off: ADD JAR {jar} failed: {e}")
        return False
    return True


@lru_cache(maxsize=8)
def _warn_once(message: str) -> None:
    log.warning("%s", message)
