"""Fetch a declared JVM bundle from Maven Central into a cache outside the repository, once.

The cache is ``$HIVEMESH_JVM_CACHE`` (default ``$XDG_CACHE_HOME/hivemesh/jvm``, else
``~/.cache/hivemesh/jvm``); each bundle lives in ``<cache>/<name>-<digest of its declaration>/``
with ``lib/`` (jars) and/or ``dist/`` (unpacked archives), finished by a ``.complete`` marker, so a
changed declaration gets a fresh directory and an interrupted fetch is redone. Maven (``mvn``) does
the fetching (its own ``~/.m2`` cache, mirrors and proxies apply); a file lock serializes fetches of
one bundle across processes (parallel test workers, a benchmark and a test run).
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from hivemesh.errors import HivemeshError
from hivemesh.jvm.artifacts import BUNDLES, Bundle

__all__ = ["JvmArtifactError", "ResolvedBundle", "cache_dir", "resolve"]

log = logging.getLogger(__name__)

_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_MVN_TIMEOUT_S = 1800


class JvmArtifactError(HivemeshError, RuntimeError):
    """A bundle could not be had: unknown name, no Maven, a failed download, a bad override."""


@dataclass(frozen=True)
class ResolvedBundle:
    """A bundle on disk. ``lib``: directory of jars (``None`` if the bundle has none); ``dist``:
    directory the archives were unpacked into (``None`` if none); ``home``: the entry itself;
    ``fetch_seconds``: time spent fetching in this call (0.0 when it was cached or overridden)."""

    bundle: Bundle
    home: Path
    lib: Path | None
    dist: Path | None
    fetch_seconds: float = 0.0

    def jars(self) -> list[Path]:
        """Every ``*.jar`` directly in ``lib`` (sorted by name)."""
        return sorted(self.lib.glob("*.jar")) if self.lib is not None else []

    def classpath(self) -> str:
        """``lib/*`` as a Java class path entry (empty string when there is no ``lib``)."""
        return f"{self.lib}{os.sep}*" if self.lib is not None else ""


def cache_dir() -> Path:
    """The cache root: ``$HIVEMESH_JVM_CACHE``, else ``$XDG_CACHE_HOME/hivemesh/jvm``, else
    ``~/.cache/hivemesh/jvm``."""
    explicit = os.environ.get("HIVEMESH_JVM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "hivemesh" / "jvm"


def _digest(bundle: Bundle) -> str:
    spec: list[object] = [
        bundle.dependencies,
        bundle.intransitive,
        bundle.archives,
        bundle.archive_includes,
        bundle.exclusions,
    ]
    if bundle.archives:
        spec.insert(0, 2)  # the unpacking method (2: tarfile, which keeps hard links)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]


def _coords_xml(coords: str) -> str:
    parts = coords.split(":")
    if len(parts) < 3:
        raise JvmArtifactError(f"bad Maven coordinates {coords!r}: expected group:artifact:version")
    group, artifact, version = parts[:3]
    xml = (
        f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
        f"<version>{escape(version)}</version>"
    )
    if len(parts) > 3 and parts[3]:
        xml += f"<type>{escape(parts[3])}</type>"
    if len(parts) > 4 and parts[4]:
        xml += f"<classifier>{escape(parts[4])}</classifier>"
    return xml


def pom_xml(bundle: Bundle) -> str:
    """The Maven POM that fetches ``bundle`` (``copy-dependencies`` into ``lib``, ``copy`` of the
    archives into ``archives``); written into the cache entry so a user can re-run it by hand."""
    exclusions = "".join(
        f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
        for g, _, a in (e.partition(":") for e in bundle.exclusions)
    )
    deps = "".join(
        f"<dependency>{_coords_xml(c)}<exclusions>{exclusions}</exclusions></dependency>"
        for c in bundle.dependencies
    ) + "".join(
        f"<dependency>{_coords_xml(c)}<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId>"
        "</exclusion></exclusions></dependency>"
        for c in bundle.intransitive
    )
    items = "".join(
        f"<artifactItem>{_coords_xml(c)}<outputDirectory>${{project.basedir}}/archives</outputDirectory>"
        "</artifactItem>"
        for c in bundle.archives
    )
    group, artifact, version = _DEPENDENCY_PLUGIN.split(":")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>hivemesh.jvm</groupId><artifactId>{escape(bundle.name)}</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        f"  <dependencies>{deps}</dependencies>\n"
        f"  <build><plugins><plugin><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version><configuration><artifactItems>{items}</artifactItems>"
        "<overWriteReleases>true</overWriteReleases></configuration></plugin></plugins></build>\n"
        "</project>\n"
    )


def _mvn(pom: Path, goal: str, *args: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmArtifactError(
            "Maven (mvn) is not on PATH: it fetches hivemesh's JVM bundles from Maven Central "
            "(Debian: apt-get install maven), or point HIVEMESH_JARS_<BUNDLE> at your own jars"
        )
    cmd = [mvn, "-B", "-q", "-f", str(pom), f"{_DEPENDENCY_PLUGIN}:{goal}", *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=_MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise JvmArtifactError(f"{' '.join(cmd)} took more than {_MVN_TIMEOUT_S} s") from e
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-25:])
        raise JvmArtifactError(f"Maven could not fetch bundle {pom.parent.name!r} ({goal}):\n{tail}")


def _included(name: str, patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return True
    for pattern in patterns:
        if pattern.endswith("/**"):
            prefix = pattern[:-3]
            if name == prefix or name.startswith(prefix + "/"):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def _unpack(archive: Path, dest: Path, includes: tuple[str, ...]) -> None:
    """Extract the members of a ``.tar.gz``/``.zip`` matching ``includes`` (``dir/**`` or a glob).
    Python's tarfile, not Maven's unpack: release tarballs (Trino's) store shared jars as hard links,
    which Maven's archiver turns into empty files; tarfile extracts a link whose target is left out
    from the target's data."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest, [n for n in zf.namelist() if _included(n.rstrip("/"), includes)])
        return
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if _included(m.name.rstrip("/"), includes)]
        tf.extractall(dest, members, filter="tar")


def _override(bundle: Bundle) -> ResolvedBundle | None:
    value = os.environ.get(bundle.env_var)
    if not value:
        return None
    home = Path(value).expanduser()
    if not home.is_dir():
        raise JvmArtifactError(f"{bundle.env_var}={value}: no such directory")
    lib = home / "lib" if (home / "lib").is_dir() else home
    dist = home / "dist" if (home / "dist").is_dir() else home
    has_lib = bool(bundle.dependencies or bundle.intransitive)
    return ResolvedBundle(bundle, home, lib if has_lib else None, dist if bundle.archives else None)


def resolve(name: str, fetch: bool = True) -> ResolvedBundle:
    """The bundle ``name`` (a key of :data:`~hivemesh.jvm.artifacts.BUNDLES`) on disk.

    ``$HIVEMESH_JARS_<NAME>`` (dashes as underscores, e.g. ``HIVEMESH_JARS_DELTA``) wins: a
    directory with ``lib/`` and/or ``dist/`` laid out like a cache entry, or a flat directory of
    jars (for an archive bundle: the unpacked archive). Otherwise the cache entry, fetched with
    Maven first when missing and ``fetch`` is true. Raises :class:`JvmArtifactError` (unknown name,
    not cached and ``fetch`` false, no ``mvn``, a failed download).
    """
    bundle = BUNDLES.get(name)
    if bundle is None:
        raise JvmArtifactError(f"unknown JVM bundle {name!r}; known: {', '.join(sorted(BUNDLES))}")
    own = _override(bundle)
    if own is not None:
        return own
    root = cache_dir()
    home = root / f"{bundle.name}-{_digest(bundle)}"
    has_lib = bool(bundle.dependencies or bundle.intransitive)
    entry = ResolvedBundle(
        bundle, home, home / "lib" if has_lib else None, home / "dist" if bundle.archives else None
    )
    if (home / ".complete").exists():
        return entry
    if not fetch:
        raise JvmArtifactError(
            f"JVM bundle {name!r} is not in the cache {root} (run: hivemesh jars fetch {name})"
        )
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{bundle.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching the same bundle
        if (home / ".complete").exists():
            return entry
        began = time.monotonic()
        log.info("fetching JVM bundle %s (~%d MB) from Maven Central into %s", name, bundle.approx_mb, home)
        work = Path(tempfile.mkdtemp(prefix=f".{bundle.name}-", dir=root))
        try:
            pom = work / "pom.xml"
            pom.write_text(pom_xml(bundle), encoding="utf-8")
            if bundle.dependencies or bundle.intransitive:
                _mvn(pom, "copy-dependencies", f"-DoutputDirectory={work / 'lib'}", "-DincludeScope=runtime")
            if bundle.archives:
                _mvn(pom, "copy")
                for archive in sorted((work / "archives").iterdir()):
                    _unpack(archive, work / "dist", bundle.archive_includes)
                shutil.rmtree(work / "archives")
            (work / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"), encoding="utf-8")
            shutil.rmtree(home, ignore_errors=True)
            work.rename(home)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        seconds = time.monotonic() - began
        log.info("fetched JVM bundle %s in %.1f s", name, seconds)
        return ResolvedBundle(bundle, home, entry.lib, entry.dist, fetch_seconds=seconds)
