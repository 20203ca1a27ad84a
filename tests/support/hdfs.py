"""A real HDFS for tests and benchmarks: one NameNode and one DataNode in one JVM (Hadoop's
``MiniDFSCluster`` from the ``hadoop-minicluster`` bundle, Maven Central), on loopback ports the
system picks, with WebHDFS on.

``tests/support/java/HdfsCluster.java`` (and ``HdfsCopy.java``, a copy through Hadoop's own Java
client for ``bench/hdfs.py``: :func:`java_copy`) is compiled once per process with ``javac``; the cluster
runs until its standard input closes (:meth:`HdfsCluster.stop`, or this process dying). The
mini-cluster jar is run unpacked (once, into ``<jvm cache>/<bundle>-classes``): from the jar,
Jetty copies each web application out of it and Jersey scans it entry by entry, which made the
start 17 s instead of 7 s. :func:`require_hdfs` skips a test (fails it under ``CI=true``) when the
bundle, Java 17 or ``javac`` is missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hivemesh.jvm import JavaNotFound, JvmArtifactError, cache_dir, find_java, find_javac, resolve
from tests.support.servers import die_with_parent

__all__ = ["HdfsCluster", "HdfsClusterError", "java_copy", "require_hdfs"]

BUNDLE = "hadoop-minicluster"
_SOURCES = [Path(__file__).parent / "java" / name for name in ("HdfsCluster.java", "HdfsCopy.java")]
_ADD_OPENS = ["java.base/java.lang", "java.base/java.util", "java.base/java.nio", "java.base/sun.nio.ch"]
_compiled: Path | None = None
_lock = threading.Lock()


class HdfsClusterError(RuntimeError):
    """The cluster did not start (the message ends with its log), or javac failed."""


def _javac() -> str:
    return str(find_javac(17))


def require_hdfs() -> None:
    """Skip the calling test when the mini cluster cannot run here (no bundle, Java 17 or javac);
    under ``CI=true`` fail instead, naming what is missing."""
    try:
        resolve(BUNDLE)
        _javac()
    except (JvmArtifactError, JavaNotFound) as e:
        reason = f"needs an HDFS mini cluster (hivemesh.jvm bundle {BUNDLE!r}) and a JDK: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _unpacked(jar: Path) -> Path:
    """The classes and resources of ``jar``, unpacked once into the JVM cache (a file lock keeps
    parallel processes from unpacking it twice)."""
    target = cache_dir() / f"{jar.stem}-classes"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{jar.stem}-classes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            work = Path(tempfile.mkdtemp(prefix=f".{jar.stem}-", dir=target.parent))
            try:
                with zipfile.ZipFile(jar) as zf:
                    zf.extractall(work)
                (work / ".complete").write_text("unpacked\n", encoding="utf-8")
                shutil.rmtree(target, ignore_errors=True)
                work.rename(target)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
    return target


def _classpath() -> str:
    """The driver's classes, the unpacked mini-cluster jar, then the bundle's other jars."""
    global _compiled
    bundle = resolve(BUNDLE)
    jars = bundle.jars()
    mini = [j for j in jars if j.name.startswith("hadoop-client-minicluster")]
    rest = [str(j) for j in jars if j not in mini]
    with _lock:
        if _compiled is None:
            out = Path(tempfile.mkdtemp(prefix="hdfs-cluster-driver-"))
            done = subprocess.run(
                [_javac(), "-cp", bundle.classpath(), "-d", str(out), *map(str, _SOURCES)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                raise HdfsClusterError(f"javac failed:\n{done.stdout}{done.stderr}")
            _compiled = out
        unpacked = [str(_unpacked(j)) for j in mini]
    return os.pathsep.join([str(_compiled), *unpacked, *rest])


def java_copy(src: str, dst: str) -> tuple[int, float]:
    """Copy file ``src`` to ``dst`` (``file:/...`` or ``hdfs://...`` URIs) with Hadoop's Java client
    in a JVM of its own; returns ``(bytes, seconds of the copy alone)``. Raises
    :class:`HdfsClusterError` when the copy fails."""
    cmd = [str(find_java(17)), "-Xmx512m", *(f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS),
           "-cp", _classpath(), "HdfsCopy", src, dst]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise HdfsClusterError(f"HdfsCopy {src} {dst} failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return int(answer["bytes"]), int(answer["millis"]) / 1000


class HdfsCluster:
    """One NameNode and one DataNode. After :meth:`start`: ``uri`` (``hdfs://127.0.0.1:PORT``, the
    NameNode's RPC address), ``rpc_port``, ``http_port`` (the NameNode's HTTP port: WebHDFS at
    ``http://127.0.0.1:{http_port}/webhdfs/v1``), ``conf_dir`` (a client ``core-site.xml`` and
    ``hdfs-site.xml``, for ``HADOOP_CONF_DIR``); ``base`` holds the name and data directories and
    ``log`` the JVM's output."""

    def __init__(self, base: Path | None = None, heap: str = "512m"):
        self.base = Path(base) if base is not None else Path(tempfile.mkdtemp(prefix="hdfs-"))
        self.log = self.base / "cluster.log"
        self.heap = heap
        self.proc: subprocess.Popen[str] | None = None
        self.rpc_port = 0
        self.http_port = 0
        self.conf_dir = Path()
        self.start_seconds = 0.0

    @property
    def uri(self) -> str:
        """``hdfs://127.0.0.1:PORT``: the file system's URI, prefix of its locations."""
        return f"hdfs://127.0.0.1:{self.rpc_port}"

    def start(self, timeout: float = 120.0) -> HdfsCluster:
        """Start the cluster and wait until it is up (both nodes registered); raises
        :class:`HdfsClusterError` with the log tail when it does not come up within ``timeout``
        seconds."""
        began = time.monotonic()
        cmd = [str(find_java(17)), f"-Xmx{self.heap}",
               *(f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS),
               "-cp", _classpath(), "HdfsCluster", str(self.base)]  # fmt: skip
        self.base.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as logf:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, text=True,
                cwd=self.base, preexec_fn=die_with_parent,
            )  # fmt: skip
        assert self.proc.stdout is not None
        answer: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: answer.update(self._first_line()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not answer:
            self.stop()
            tail = self.log.read_text(errors="replace")[-3000:]
            raise HdfsClusterError(f"the HDFS mini cluster did not start within {timeout:.0f} s:\n{tail}")
        self.rpc_port = int(answer["rpc_port"])
        self.http_port = int(answer["http_port"])
        self.conf_dir = Path(answer["conf_dir"])
        self.start_seconds = time.monotonic() - began
        return self

    def _first_line(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            parsed = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def stop(self, timeout: float = 30.0) -> None:
        """Close the cluster's standard input (it shuts down and exits); kill it if it does not."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __enter__(self) -> HdfsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
