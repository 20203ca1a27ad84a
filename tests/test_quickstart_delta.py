"""``hivemesh quickstart --delta``: TPC-H as Hive tables in zone onprem, replicated as Delta
tables into zone lake, queried there with Spark and Delta (a subprocess: its own JVM with Delta's
jars), every query checked against the files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from hivemesh.quickstart.queries import QUERIES
from hivemesh.quickstart.tpch import TABLES
from hivemesh.replication.config import TargetFormat, load_replication_config

SCALE = 0.01


def test_mesh_config_says_its_metastores_are_gone_and_how_to_serve_them(tmp_path: Path) -> None:
    """The quickstart's metastores stop with it: mesh.yaml's header says so and gives commands
    (valid ``hivemesh`` command lines) serving each zone's store on the port the file names."""
    from hivemesh.quickstart.delta import write_mesh_config
    from tests.test_readme_examples import check_hivemesh

    uris = {"onprem": "thrift://127.0.0.1:41001", "lake": "thrift://127.0.0.1:41002"}
    mesh = write_mesh_config(tmp_path, uris)
    header = [line[2:] for line in mesh.read_text().splitlines() if line.startswith("# ")]
    assert "stopped when it ended" in " ".join(header)
    commands = [line.strip().rstrip(" &").split() for line in header if line.startswith("  hivemesh ")]
    assert [c[1] for c in commands] == ["metastore", "metastore", "replicate"]
    for c in commands:
        assert check_hivemesh(c[1:]) == [], c
    zones = load_replication_config(mesh).zones
    for c, zone in zip(commands, ("onprem", "lake"), strict=False):
        assert (
            c[c.index("--port") + 1] == uris[zone].rsplit(":", 1)[1] and zones[zone].metastore == uris[zone]
        )
        assert (
            c[c.index("--db") + 1]
            == f"sqlite:///{tmp_path.resolve() / 'delta-zones' / zone / 'metastore.db'}"
        )
    assert commands[2][-1] == str(mesh)


@pytest.mark.spark
def test_delta_quickstart_end_to_end(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "hivemesh.cli", "quickstart", "--delta", "--scale", str(SCALE),
           "--data-dir", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"}
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-20000:]
    assert f"{len(QUERIES)}/{len(QUERIES)} queries match" in out
    assert "✗" not in out
    assert f"{len(TABLES)} loaded in" in out
    lake = tmp_path / "delta-zones" / "lake" / "warehouse" / "tpch.db"
    for table in TABLES:  # every table a Delta table in the lake zone's warehouse
        assert DeltaTable(str(lake / table)).version() >= 1, table
    cfg = load_replication_config(tmp_path / "delta-zones" / "mesh.yaml")
    assert cfg.replication.policies[0].format == TargetFormat.DELTA

    # a second run reuses the tables and the replicas: nothing is converted again
    versions = {t: DeltaTable(str(lake / t)).version() for t in TABLES}
    again = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"}
    )
    assert again.returncode == 0, again.stdout + again.stderr[-20000:]
    assert "all reused" in again.stdout
    assert {t: DeltaTable(str(lake / t)).version() for t in TABLES} == versions
