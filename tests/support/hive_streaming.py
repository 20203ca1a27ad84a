"""Hive's own streaming writer (``HiveStreamingConnection``, the ``hive-streaming`` bundle) driven
step by step from a test.

``tests/support/java/StreamingDriver.java`` is compiled once per process with ``javac`` against the
bundle's jars; :class:`StreamingDriver` runs it and sends one command per call (``connect``,
``begin``, ``write``, ``commit``, ``abort``, ``close``), so a test can read the table between the
steps of a transaction batch while its delta file is still open::

    with StreamingDriver() as hive:
        hive.send(f"connect {metastore_uri} db table 4")
        hive.send("begin"); hive.send("write 1,one"); hive.send("commit")

The writer uses Hadoop's raw local file system, whose ``hflush`` reaches the file as on HDFS.
:func:`require_hive_streaming` skips a test (fails it under ``CI=true``) when the bundle, Java 17
or ``javac`` is missing.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from hivemesh.jvm import JavaNotFound, JvmArtifactError, find_java, find_javac, resolve
from tests.support.servers import die_with_parent

__all__ = ["StreamingDriver", "StreamingDriverError", "require_hive_streaming"]

_SOURCE = Path(__file__).parent / "java" / "StreamingDriver.java"
_ADD_OPENS = ["java.base/java.lang", "java.base/java.lang.reflect", "java.base/java.io", "java.base/java.net",
              "java.base/java.nio", "java.base/java.util", "java.base/sun.nio.ch"]  # fmt: skip
_compiled: Path | None = None
_lock = threading.Lock()


class StreamingDriverError(RuntimeError):
    """The driver answered ``error ...`` (Hive's exception class and message), or died."""


def _javac() -> str:
    return str(find_javac(17))


def require_hive_streaming() -> None:
    """Skip the calling test when Hive's streaming writer cannot run here (no bundle, Java or
    javac); under ``CI=true`` fail instead, naming what is missing."""
    try:
        resolve("hive-streaming")
        _javac()
    except (JvmArtifactError, JavaNotFound) as e:
        reason = f"needs Hive's streaming writer (hivemesh.jvm bundle 'hive-streaming') and a JDK: {e}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _classes() -> Path:
    global _compiled
    with _lock:
        if _compiled is None:
            out = Path(tempfile.mkdtemp(prefix="hive-streaming-driver-"))
            cp = resolve("hive-streaming").classpath()
            done = subprocess.run(
                [_javac(), "-cp", cp, "-d", str(out), str(_SOURCE)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                raise StreamingDriverError(f"javac failed:\n{done.stdout}{done.stderr}")
            _compiled = out
        return _compiled


class StreamingDriver:
    """The driver JVM; :meth:`send` runs one command and returns the text after ``ok``.
    ``log`` holds the JVM's stderr (Hive's and Hadoop's logging)."""

    def __init__(self) -> None:
        self.log = Path(tempfile.mkstemp(prefix="hive-streaming-", suffix=".log")[1])
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> StreamingDriver:
        """Compile (once per process) and start the driver."""
        cp = os.pathsep.join([str(_classes()), resolve("hive-streaming").classpath()])
        cmd = [str(find_java(17)), "-Xmx512m", *(f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS),
               "-cp", cp, "StreamingDriver"]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.log, "w"),  # noqa: SIM115
            text=True, preexec_fn=die_with_parent,
        )  # fmt: skip
        return self

    def send(self, command: str) -> str:
        """Send one command line; returns the answer after ``ok``; raises StreamingDriverError."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer.startswith("ok"):
            return answer[2:].strip()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise StreamingDriverError(f"{command!r} -> {answer or 'no answer (the JVM died)'}\n{tail}")

    def stop(self) -> None:
        """Ask the driver to quit; kill it if it does not."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.write("quit\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> StreamingDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
