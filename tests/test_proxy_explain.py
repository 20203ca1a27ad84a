"""``hivemesh proxy explain METHOD [DATABASE [TABLE]]``, and ``hivemesh proxy --config`` still
serving now that ``proxy`` is a group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from hivemesh.cli import main


@pytest.fixture
def mesh(tmp_path: Path) -> Path:
    """A primary (embedded: explain must not open its store) and a prefixed federated member."""
    path = tmp_path / "mesh.yaml"
    body = {
        "proxy": {"port": 0},
        "primary": {
            "name": "main",
            "embedded": {"db": f"sqlite:///{tmp_path / 'main.db'}", "warehouse": str(tmp_path / "wh")},
        },
        "federated": [{"name": "fed", "uris": ["thrift://127.0.0.1:1"], "database_prefix": "prefix_"}],
    }
    path.write_text(yaml.safe_dump(body))
    return path


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_a_database_routed_call_names_its_member_and_the_names_it_is_sent(mesh: Path) -> None:
    r = _run("proxy", "explain", "get_table", "prefix_sales", "orders", "--config", str(mesh))
    assert r.exit_code == 0, r.output
    assert (
        r.output.splitlines()[0]
        == "get_table: by database name; writes no metadata; database names in: dbname"
    )
    assert "-> federated metastore fed (thrift://127.0.0.1:1)" in r.output
    assert "prefix_sales -> sales" in r.output and "orders -> orders" in r.output
    assert "primary" not in r.output
    assert not (mesh.parent / "main.db").exists()  # nothing was opened


def test_group_config_and_primary_and_refusal(mesh: Path) -> None:
    r = _run("proxy", "--config", str(mesh), "explain", "add_partitions", "sales")
    assert r.exit_code == 0, r.output
    assert "-> primary metastore main (embedded sqlite:///" in r.output
    assert "sales -> sales" in r.output and "refused" in r.output  # the primary is read_only by default
    r = _run("proxy", "explain", "add_partitions", "prefix_sales", "--config", str(mesh))
    assert "-> federated metastore fed" in r.output
    assert (
        "refused: MetaException: hivemesh proxy: add_partitions on database 'prefix_sales' refused"
        in r.output
    )


def test_a_merged_call_lists_every_member(mesh: Path) -> None:
    r = _run("proxy", "explain", "get_all_databases", "--config", str(mesh))
    assert r.exit_code == 0, r.output
    assert "merged over federated metastores" in r.output.splitlines()[0]
    assert "-> primary metastore main" in r.output and "-> federated metastore fed" in r.output
    assert "prefix_<db> -> <db>" in r.output


def test_a_txn_call_goes_to_the_primary(mesh: Path) -> None:
    r = _run("proxy", "explain", "open_txns", "--config", str(mesh))
    assert r.exit_code == 0, r.output
    assert "per owning member (txns, locks)" in r.output and "-> primary metastore main" in r.output


def test_unknown_method_and_bad_arguments_exit_2_on_one_line(mesh: Path) -> None:
    r = _run("proxy", "explain", "add_partiton", "--config", str(mesh))
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "error: unknown HMS method 'add_partiton'; did you mean add_partition, add_partitions, add_partitions_req?"
    ]
    r = _run("proxy", "explain", "getVersion", "sales", "--config", str(mesh))
    assert r.exit_code == 2 and "names no database" in r.stderr
    r = _run("proxy", "explain", "get_table", "a", "b", "c", "--config", str(mesh))
    assert r.exit_code == 2 and "DATABASE [TABLE]" in r.stderr
    r = _run("proxy", "explain", "get_table")
    assert r.exit_code == 2 and "Missing option '--config'" in r.stderr


def test_proxy_config_still_serves(mesh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []

    def run_forever(config_path: Any, **opts: Any) -> int:
        calls.append((config_path, opts))
        return 0

    monkeypatch.setattr("hivemesh.federation.service.run_forever", run_forever)
    monkeypatch.setattr("hivemesh.cli._setup_logging", lambda *a: None)
    r = _run("proxy", "--config", str(mesh), "--port", "0")
    assert r.exit_code == 0, r.output
    assert calls == [(str(mesh), {"host": None, "port": 0, "metrics_port": None, "log_level": None,
                                  "log_format": None, "audit_log": None})]  # fmt: skip
    r = _run("proxy")
    assert r.exit_code == 2 and "Missing option '--config'" in r.stderr and calls[1:] == []
