"""``hivemesh quickstart --live``: TPC-H written through two zones' live proxies (a single-member
etcd holding the command log), every table in both zones with its files in each zone's own path,
the queries run in both zones, each checked against the files.

The end-to-end run is a subprocess (its own JVM), as the other quickstarts' tests, and runs two of
the queries, which read all eight tables between them (written through either zone): the others
are checked by the plain and federated quickstarts' tests, and each query costs seconds per zone.
"""

from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from rich.console import Console

from hivemesh.cli import main
from hivemesh.live.config import load_live_config
from hivemesh.quickstart import etcd as quickstart_etcd
from hivemesh.quickstart.live import QUERY_ZONES, WRITTEN_THROUGH, ZONES, run_live, write_mesh_config, zone
from hivemesh.quickstart.queries import QUERIES
from hivemesh.quickstart.tpch import TABLES
from tests.support.etcd import require_etcd
from tests.test_quickstart_federated import _tables

SCALE = 0.01
#: The queries of the end-to-end run: between them they read every table (written through either zone).
E2E_QUERIES = ("revenue_by_nation_year", "stock_value_by_nation")


def test_every_table_is_written_through_one_zone_and_each_zone_writes() -> None:
    written = [t for z in ZONES for t in WRITTEN_THROUGH[z]]
    assert sorted(written) == sorted(TABLES)  # each table once
    assert set(WRITTEN_THROUGH["cloud"]) == {"orders", "lineitem"} and len(WRITTEN_THROUGH["onprem"]) == 6
    assert QUERY_ZONES == ("cloud", "onprem")  # the last writer's session queries first
    read = {t for q in QUERIES if q.name in E2E_QUERIES for t in re.findall(r"\{(\w+)\}", q.sql)}
    assert read == set(TABLES)  # the end-to-end run's queries read every table


def test_mesh_config_is_a_live_config_with_each_zones_path_in_its_own_dir(tmp_path: Path) -> None:
    """mesh.yaml validates as Live Hive's configuration; the rule's path of each zone is that
    zone's warehouse under ``DATA_DIR/live/<zone>``; its header's command is a valid command line."""
    from tests.test_readme_examples import check_hivemesh

    uris = {"onprem": "thrift://127.0.0.1:41001", "cloud": "thrift://127.0.0.1:41002"}
    mesh = write_mesh_config(tmp_path, "http://127.0.0.1:42379", uris)
    assert mesh == tmp_path.resolve() / "live" / "mesh.yaml"
    cfg = load_live_config(mesh)
    assert {z: c.metastore for z, c in cfg.zones.items()} == uris
    assert cfg.live.etcd.endpoints == ["http://127.0.0.1:42379"]
    (rule,) = cfg.live.rules
    assert rule.matches_database("tpch") and not rule.matches_database("default")
    for name in ZONES:
        z = zone(tmp_path, name)
        assert z.directory == tmp_path.resolve() / "live" / name
        assert rule.paths[name] == str(z.warehouse) == cfg.zones[name].warehouse
    assert cfg.live.store == f"sqlite:///{tmp_path.resolve() / 'live' / 'live.db'}"
    header = [line[2:] for line in mesh.read_text().splitlines() if line.startswith("# ")]
    (command,) = [line.split("then: ", 1)[1] for line in header if "then: hivemesh " in line]
    assert check_hivemesh(command.split()[1:]) == []


def test_without_etcd_the_run_names_the_package_before_generating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quickstart_etcd.shutil, "which", lambda name: None)
    monkeypatch.setattr(quickstart_etcd, "DEBIAN_ETCD", str(tmp_path / "no-etcd"))
    with pytest.raises(quickstart_etcd.EtcdUnavailable, match="install Debian's etcd-server package"):
        quickstart_etcd.etcd_binary()
    console = Console(file=io.StringIO(), width=200, color_system=None)
    assert run_live(SCALE, tmp_path, console=console) == 1
    out = console.file.getvalue()
    assert "quickstart --live failed: EtcdUnavailable: etcd not found" in out
    assert "etcd-server" in out
    assert not (tmp_path / "tpch").exists()  # nothing generated


def test_cli_flag_and_its_conflicts() -> None:
    runner = CliRunner()
    assert "--live" in runner.invoke(main, ["quickstart", "--help"]).output
    r = runner.invoke(main, ["quickstart", "--live", "--metastore-uri", "thrift://127.0.0.1:9083"])
    assert r.exit_code == 2 and "leave out --metastore-uri" in r.output
    r = runner.invoke(main, ["quickstart", "--live", "--federated"])
    assert r.exit_code == 2 and "choose one of --federated, --delta and --live" in r.output


def _kv(endpoint: str, op: str, **body: str) -> dict[str, object]:
    b64 = {k: base64.b64encode(v.encode()).decode() for k, v in body.items()}
    r = requests.post(f"{endpoint}/v3/kv/{op}", json=b64, timeout=10)
    r.raise_for_status()
    return dict(r.json())


def test_etcd_keeps_its_data_across_runs_on_new_ports(tmp_path: Path) -> None:
    """A second run starts etcd on the first run's data dir (on other free ports): what the first
    stored is there; stop ends the process."""
    binary = require_etcd()
    with quickstart_etcd.EtcdServer(tmp_path / "etcd", binary) as first:
        _kv(first.endpoint, "put", key="/hivemesh/quickstart/k", value="v1")
        assert first.version().startswith("3.")
    assert first.proc is not None and first.proc.poll() is not None
    assert oct((tmp_path / "etcd").stat().st_mode & 0o777) == "0o700"
    with quickstart_etcd.EtcdServer(tmp_path / "etcd", binary) as second:
        kvs = _kv(second.endpoint, "range", key="/hivemesh/quickstart/k")["kvs"]
        assert [base64.b64decode(kv["value"]).decode() for kv in kvs] == ["v1"]  # type: ignore[attr-defined]


def _data_files(directory: Path) -> dict[str, int]:
    """Data files (not hidden, not ``_``-prefixed) below ``directory``: relative path -> size."""
    return {
        str(p.relative_to(directory)): p.stat().st_size
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(directory).parts)
    }


@pytest.mark.spark
def test_live_quickstart_end_to_end(tmp_path: Path) -> None:
    """Dimensions written through onprem's live proxy, facts through cloud's; both zones hold all
    eight tables with their own copies of the files, live check finds them consistent, and the
    queries in each zone match the files."""
    require_etcd()
    code = (
        "import sys; from pathlib import Path; from hivemesh.quickstart.live import run_live; "
        "from hivemesh.quickstart.queries import QUERIES; "
        f"sys.exit(run_live({SCALE}, Path({str(tmp_path)!r}), "
        f"queries=[q for q in QUERIES if q.name in {E2E_QUERIES!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250"},
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-20000:]
    n = len(E2E_QUERIES)
    assert out.count(f"{n}/{n} queries match the Parquet files") == 2, out
    assert "✗" not in out
    assert "8 loaded in" in out
    assert "live check: consistent" in out
    for zone_name in ZONES:  # every query ran in each zone
        assert f"zone {zone_name}: its tables vs Parquet files" in out
    assert re.search(r"region\s*│\s*onprem\s*│", out), out
    assert re.search(r"lineitem\s*│\s*cloud\s*│", out), out
    proposed = {
        z: (int(total), int(ok))
        for z, total, ok in re.findall(r"(\w+)\s*│\s*thrift://\S+\s*│\s*(\d+) \((\d+)\)", out)
    }
    assert set(proposed) == set(ZONES), out
    for z, (total, ok) in proposed.items():  # each zone's proxy agreed writes through the log, all ok
        assert total == ok > 0, (z, out)

    # both zones' stores hold every table, each zone's files in its own warehouse, the same files
    onprem, cloud = zone(tmp_path, "onprem"), zone(tmp_path, "cloud")
    for z in (onprem, cloud):
        assert {t for db, t in _tables(z.db_url) if db == "tpch"} == set(TABLES), z.name
    for table in TABLES:
        files = _data_files(onprem.warehouse / "tpch.db" / table)
        assert files, table
        assert _data_files(cloud.warehouse / "tpch.db" / table) == files, table
    assert (onprem.warehouse / "tpch.db" / "lineitem" / "l_year=1995").is_dir()  # copied from cloud

    # etcd stopped with the run; its data stays for the next
    endpoint = re.search(r"etcd \S+ at (http://127\.0\.0\.1:\d+)", out)
    assert endpoint is not None, out
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{endpoint.group(1)}/health", timeout=2)
    assert (tmp_path / "live" / "etcd" / "member").is_dir()
