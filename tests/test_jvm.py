"""hivemesh.jvm: the pinned bundle declarations, the generated POM, unpacking, overrides, finding Java."""

from __future__ import annotations

import io
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hivemesh.jvm import BUNDLES, JvmArtifactError, find_java, resolve
from hivemesh.jvm.java import java_major
from hivemesh.jvm.resolve import _unpack, pom_xml

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_every_bundle_is_pinned() -> None:
    for bundle in BUNDLES.values():
        for coords in (*bundle.dependencies, *bundle.intransitive, *bundle.archives):
            version = coords.split(":")[2]
            assert version and not any(c in version for c in "[]()+,") and "SNAPSHOT" not in version, coords


def test_pom_excludes_transitively_and_copies_intransitive_jars_alone() -> None:
    bundle = BUNDLES["hive4-metastore"]
    root = ET.fromstring(pom_xml(bundle))
    deps = root.findall("m:dependencies/m:dependency", NS)
    assert len(deps) == len(bundle.dependencies) + len(bundle.intransitive)
    by_artifact = {d.findtext("m:artifactId", namespaces=NS): d for d in deps}
    listener = by_artifact["hive-hcatalog-server-extensions"]
    assert [(e.findtext("m:groupId", namespaces=NS), e.findtext("m:artifactId", namespaces=NS))
            for e in listener.findall("m:exclusions/m:exclusion", NS)] == [("*", "*")]  # fmt: skip
    hadoop = by_artifact["hadoop-common"]
    excluded = {
        e.findtext("m:artifactId", namespaces=NS) for e in hadoop.findall("m:exclusions/m:exclusion", NS)
    }
    assert {"jdk.tools", "slf4j-reload4j"} <= excluded
    item = root.find("m:build/m:plugins/m:plugin/m:configuration/m:artifactItems/m:artifactItem", NS)
    assert item is not None and item.findtext("m:classifier", namespaces=NS) == "bin"


def test_unpack_keeps_hard_linked_files_whose_target_is_left_out(tmp_path: Path) -> None:
    """Trino's tarball stores shared jars once (lib/) and hard-links them into plugin dirs."""
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        data = b"jar bytes"
        info = tarfile.TarInfo("pkg/shared/x.jar")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("pkg/plugin/hive/x.jar")
        link.type = tarfile.LNKTYPE
        link.linkname = "pkg/shared/x.jar"
        tf.addfile(link)
        other = tarfile.TarInfo("pkg/plugin/kafka/y.jar")
        other.size = 1
        tf.addfile(other, io.BytesIO(b"y"))
    _unpack(archive, tmp_path / "out", ("pkg/plugin/hive/**",))
    assert (tmp_path / "out/pkg/plugin/hive/x.jar").read_bytes() == b"jar bytes"
    assert not (tmp_path / "out/pkg/plugin/kafka").exists()
    assert not (tmp_path / "out/pkg/shared").exists()


def test_override_points_at_the_users_own_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "delta-spark_2.13-9.9.jar").write_bytes(b"")
    monkeypatch.setenv("HIVEMESH_JARS_DELTA", str(tmp_path))
    got = resolve("delta", fetch=False)
    assert got.jars() == [tmp_path / "delta-spark_2.13-9.9.jar"] and got.fetch_seconds == 0.0
    monkeypatch.setenv("HIVEMESH_JARS_DELTA", str(tmp_path / "nope"))
    with pytest.raises(JvmArtifactError, match="HIVEMESH_JARS_DELTA=.*no such directory"):
        resolve("delta", fetch=False)


def test_unknown_bundle_and_a_cold_cache_without_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(
        JvmArtifactError, match="unknown JVM bundle 'hive5'; known: delta, hadoop-minicluster, hive-streaming"
    ):
        resolve("hive5")
    monkeypatch.setenv("HIVEMESH_JVM_CACHE", str(tmp_path))
    with pytest.raises(JvmArtifactError, match="not in the cache .* hivemesh jars fetch trino-server"):
        resolve("trino-server", fetch=False)


def test_java_versions() -> None:
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_402"') == 8
    assert java_major('openjdk version "25" 2025-09-16') == 25
    assert java_major("no version here") is None
    java = find_java(17)
    assert java.exists()
