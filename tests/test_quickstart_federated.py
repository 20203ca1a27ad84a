"""``hivemesh quickstart --federated``: TPC-H over two zones, queried through the proxy as one catalog.

The command runs in its own process (its own JVM), so no SparkSession of it is left in the suite's
shared JVM, bound to a metastore that has stopped.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from hivemesh.federation.config import AccessControl, DatabaseResolution, load_federation_config
from hivemesh.quickstart import tpch
from hivemesh.quickstart.federated import (
    CLOUD_TABLES,
    PRIMARY_TABLES,
    proxy_name,
    proxy_tables,
    run_federated,
    write_mesh_config,
    zone,
)
from hivemesh.quickstart.queries import QUERIES

SCALE = 0.01


def _tables(db_url: str) -> set[tuple[str, str]]:
    """(database, table) of every table in a zone's SQLite store."""
    eng = sa.create_engine(db_url)
    try:
        with eng.connect() as c:
            rows = c.execute(
                sa.text('SELECT d."NAME", t."TBL_NAME" FROM "TBLS" t JOIN "DBS" d ON d."DB_ID" = t."DB_ID"')
            )
            return {(db, table) for db, table in rows}
    finally:
        eng.dispose()


def test_tables_are_named_by_zone() -> None:
    assert set(CLOUD_TABLES) == {"lineitem", "orders"}
    assert proxy_name("lineitem") == "cloud_tpch.lineitem"
    assert proxy_name("nation") == "tpch.nation"
    assert proxy_tables()["orders"] == "`cloud_tpch`.`orders`"
    for q in QUERIES:  # every query renders against the federated names
        assert "{" not in q.render(proxy_tables()), q.name


def test_mesh_config_serves_both_zones_on_its_own(tmp_path: Path) -> None:
    mesh = write_mesh_config(tmp_path)
    assert mesh == tmp_path.resolve() / "zones" / "mesh.yaml"
    cfg = load_federation_config(mesh)
    assert cfg.proxy.database_resolution is DatabaseResolution.PREFIXED
    assert (cfg.proxy.port, cfg.proxy.metrics_port) == (0, 0)
    assert cfg.primary.name == "onprem"
    assert cfg.primary.access_control is AccessControl.READ_AND_WRITE_AND_CREATE
    assert cfg.primary.embedded is not None
    assert cfg.primary.embedded.db == zone(tmp_path.resolve(), "onprem").db_url
    assert [(m.name, m.database_prefix, m.access_control) for m in cfg.federated] == [
        ("cloud", "cloud_", AccessControl.READ_ONLY)
    ]
    assert cfg.federated[0].embedded is not None
    assert cfg.federated[0].embedded.warehouse == str(zone(tmp_path.resolve(), "cloud").warehouse)


def test_federated_run_reports_a_failure_and_returns_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    monkeypatch.setattr(tpch, "tpchgen_executable", lambda: "false")
    console = Console(file=io.StringIO(), width=120, color_system=None)
    assert run_federated(SCALE, tmp_path, console=console) == 1
    assert "quickstart failed: GenerationError: tpchgen-cli exited with 1" in console.file.getvalue()
    assert "s] generating TPC-H sf0.01\n" in console.file.getvalue()  # a line per step off a terminal


@pytest.mark.spark
def test_federated_quickstart_end_to_end(tmp_path: Path) -> None:
    """Facts in zone cloud, dimensions in zone onprem, every query through the proxy matches the files."""
    cmd = [
        sys.executable,
        "-m",
        "hivemesh.cli",
        "quickstart",
        "--federated",
        "--scale",
        str(SCALE),
        "--data-dir",
        str(tmp_path),
        "--log-level",
        "INFO",  # the proxy's audit log: one line per call, with the member it went to
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"}
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-20000:]
    assert f"{len(QUERIES)}/{len(QUERIES)} queries match" in out
    assert "✗" not in out
    assert "8 loaded in" in out

    shown = re.search(r"SHOW DATABASES through the proxy: (.*)", out)
    assert shown is not None, out
    assert {"tpch", "cloud_tpch"} <= set(shown.group(1).split(", "))
    assert re.search(r"lineitem\s*│\s*cloud\s*│\s*cloud_tpch\.lineitem\s*│", out), out
    assert re.search(r"nation\s*│\s*onprem\s*│\s*tpch\.nation\s*│", out), out
    routed = dict(
        (m, int(n))
        for n, m in re.findall(r"(\d+) to (\w+)", out.split("metastore calls the proxy routed:")[1])
    )
    assert routed.get("cloud", 0) > 0 and routed.get("onprem", 0) > 0, out

    # the facts are in the cloud zone's store only, the dimensions in the onprem zone's only
    cloud_tables = _tables(zone(tmp_path, "cloud").db_url)
    onprem_tables = _tables(zone(tmp_path, "onprem").db_url)
    for table in CLOUD_TABLES:
        assert ("tpch", table) in cloud_tables and ("tpch", table) not in onprem_tables, table
    for table in PRIMARY_TABLES:
        assert ("tpch", table) in onprem_tables and ("tpch", table) not in cloud_tables, table
    assert (zone(tmp_path, "cloud").warehouse / "tpch.db" / "lineitem" / "l_year=1995").is_dir()

    # Spark read the partitioned facts through the proxy, which sent the partition calls to cloud
    partition_calls = re.findall(r"method=(get_partition\w*) member=cloud ms=\S+ result=ok", proc.stderr)
    assert partition_calls, proc.stderr[-20000:]

    mesh = tmp_path / "zones" / "mesh.yaml"
    assert f"hivemesh proxy --config {mesh}" in out.replace("\n", "")
    assert load_federation_config(mesh).federated[0].name == "cloud"
