"""JVM peers and libraries from Maven Central: one pinned declaration (:mod:`.artifacts`), fetched
on first use into a cache outside the repository (:mod:`.resolve`), and the Java to run them on
(:mod:`.java`)."""

from hivemesh.jvm.artifacts import BUNDLES, Bundle
from hivemesh.jvm.java import JavaNotFound, find_java, find_javac
from hivemesh.jvm.resolve import JvmArtifactError, ResolvedBundle, cache_dir, resolve

__all__ = [
    "BUNDLES",
    "Bundle",
    "JavaNotFound",
    "JvmArtifactError",
    "ResolvedBundle",
    "cache_dir",
    "find_java",
    "find_javac",
    "resolve",
]
