"""The ``zones:``/``replication:`` sections of mesh.yaml: defaults, matching rules, and every
rejected key named precisely (all problems at once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivemesh.client.metastore import MetastoreClient
from hivemesh.config import ConfigError
from hivemesh.replication.config import (
    DEFAULT_STORE,
    DataMode,
    TargetFormat,
    load_replication_config,
    parse_replication_config,
)

ZONES = {
    "onprem": {"metastore": "thrift://hms-onprem:9083", "warehouse": "hdfs://nn:8020/warehouse"},
    "cloud": {"metastore": "thrift://hms-cloud:9083,thrift://hms-cloud-2:9083", "warehouse": "s3a://lake/wh"},
}


def _policy(**over: object) -> dict[str, object]:
    return {"name": "sales-to-cloud", "source": "onprem", "target": "cloud", "databases": ["sales"], **over}


def test_the_documented_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(
        """
metastore: {port: 9083}          # other commands' sections are left alone
zones:
  onprem: {metastore: "thrift://hms-onprem:9083", warehouse: "hdfs://nn:8020/warehouse"}
  cloud:  {metastore: "thrift://hms-cloud:9083",  warehouse: "s3a://lake/warehouse"}
replication:
  store: "sqlite:///hivemesh-data/replication.db"
  policies:
    - name: sales-to-cloud
      source: onprem
      target: cloud
      databases: ["sales", "fin_.*"]
      tables: {Sales: ["orders", "line.*"]}
      format: Delta
      data: Copy
      paths: {"hdfs://nn:8020/warehouse": "s3a://lake/warehouse"}
      propagate_drops: false
""",
        encoding="utf-8",
    )
    cfg = load_replication_config(path)
    p = cfg.replication.policy("sales-to-cloud")
    assert (p.format, p.data, p.propagate_drops) == (TargetFormat.DELTA, DataMode.COPY, False)
    assert p.paths == {"hdfs://nn:8020/warehouse": "s3a://lake/warehouse"}
    assert cfg.zones["cloud"].warehouse == "s3a://lake/warehouse"
    # databases by regex (full match, any case); tables only where listed for that database
    assert p.matches_database("SALES") and p.matches_database("fin_eu") and not p.matches_database("finance")
    assert p.matches_table("sales", "line_items") and not p.matches_table("sales", "customers")
    assert p.matches_table("fin_eu", "anything")
    assert not p.matches_table("hr", "orders")


def test_defaults() -> None:
    cfg = parse_replication_config({"zones": ZONES, "replication": {"policies": [_policy()]}})
    p = cfg.replication.policies[0]
    assert cfg.replication.store == DEFAULT_STORE
    assert (p.format, p.data, p.propagate_drops, p.paths, p.tables) == (
        TargetFormat.HIVE,
        DataMode.COPY,
        True,
        {},
        {},
    )
    assert parse_replication_config({}).replication.policies == []
    with pytest.raises(ConfigError, match="no replication policy 'nope' \\(known: sales-to-cloud\\)"):
        cfg.replication.policy("nope")


def test_every_problem_is_reported_with_its_key() -> None:
    bad = {
        "zones": {"onprem": {"metastore": "http://x:1", "warehouse": "/w", "colour": "red"}},
        "replication": {
            "policies": [
                _policy(name="-bad", databases=["sales("], format="parquet"),
                _policy(databases=[]),
            ],
            "stores": "x",
        },
    }
    with pytest.raises(ConfigError) as e:
        parse_replication_config(bad, "mesh.yaml")
    text = str(e.value)
    for key in (
        "zones.onprem.metastore",
        "zones.onprem.colour",
        "replication.policies[0].name",
        "replication.policies[0].databases",
        "replication.policies[0].format",
        "replication.policies[1].databases",
        "replication.stores",
    ):
        assert key in text, key
    assert text.startswith("invalid configuration in mesh.yaml:")


def test_cross_key_problems_are_all_reported() -> None:
    cfg = {
        "zones": ZONES,
        "replication": {
            "policies": [
                _policy(source="onprem2"),
                _policy(target="onprem", source="onprem", name="loop"),
                _policy(name="loop", databases=["x"]),
            ]
        },
    }
    with pytest.raises(ConfigError) as e:
        parse_replication_config(cfg, "mesh.yaml")
    lines = str(e.value).splitlines()
    assert lines[0] == "invalid configuration in mesh.yaml:"
    assert "  replication.policies[0].source: unknown zone 'onprem2' (known: cloud, onprem)" in lines
    assert "  replication.policies[1].target: the same zone as its source ('onprem')" in lines
    assert "  replication.policies[2].name: 'loop' is also the name of policies[1]" in lines


def test_a_database_replicated_both_ways_is_refused() -> None:
    there = _policy(databases=["sales", "ml_.*"])
    back = _policy(name="back", source="cloud", target="onprem", databases=["ml_models", "hr"])
    with pytest.raises(ConfigError) as e:
        parse_replication_config({"zones": ZONES, "replication": {"policies": [there, back]}})
    assert "replication.policies[1].databases: ml_models would be replicated both ways" in str(e.value)
    # opposite directions on different databases run together
    back["databases"] = ["ml", "hr"]
    cfg = parse_replication_config({"zones": ZONES, "replication": {"policies": [there, back]}})
    assert [p.name for p in cfg.replication.policies] == ["sales-to-cloud", "back"]


def test_runtime_settings_s3_options_and_store_url_are_checked() -> None:
    cfg = parse_replication_config(
        {
            "zones": {
                "a": {"metastore": "thrift://a:9083", "warehouse": "/w"},
                "b": {"metastore": "thrift://b:9083", "warehouse": "s3a://lake/w",
                      "s3": {"endpoint_override": "127.0.0.1:9000", "scheme": "http", "region": "eu-west-1"}},
            },
            "replication": {"store": "postgresql://u@db/repl", "rescan_interval_s": 3600, "copy_threads": 4,
                            "policies": [{"name": "p", "source": "a", "target": "b", "databases": ["x"]}]},
        }
    )  # fmt: skip
    assert cfg.zones["b"].s3.endpoint_override == "127.0.0.1:9000" and cfg.zones["b"].s3.scheme == "http"
    assert cfg.zones["a"].s3.endpoint_override is None
    assert cfg.replication.rescan_interval_s == 3600 and cfg.replication.copy_threads == 4
    with pytest.raises(ConfigError) as err:
        parse_replication_config(
            {
                "zones": {"a": {"metastore": "thrift://a:9083", "warehouse": "/w",
                                "s3": {"endpoint": "x", "scheme": "ftp"}}},
                "replication": {"store": "mysql://x/y", "rescan_interval_s": 0, "poll_interval_s": -1},
            }
        )  # fmt: skip
    text = str(err.value)
    assert "zones.a.s3.endpoint: Extra inputs are not permitted" in text
    assert "zones.a.s3.scheme:" in text
    assert "replication.store:" in text and "sqlite:///" in text
    assert "replication.rescan_interval_s:" in text and "replication.poll_interval_s:" in text


def test_delta_policies_need_data_and_their_own_runner(tmp_path: Path) -> None:
    from hivemesh.replication.runner import PolicyRunner, ReplicationError
    from hivemesh.replication.state import ReplicationStore

    with pytest.raises(ConfigError, match=r"policies\[0\]\.data: metadata_only cannot make Delta tables"):
        parse_replication_config(
            {"zones": ZONES, "replication": {"policies": [_policy(format="delta", data="metadata_only")]}}
        )
    cfg = parse_replication_config({"zones": ZONES, "replication": {"policies": [_policy(format="delta")]}})
    store = ReplicationStore(f"sqlite:///{tmp_path / 'r.db'}")
    with pytest.raises(ReplicationError, match="runs through hivemesh.replication.service.make_runner"):
        PolicyRunner(cfg, cfg.replication.policies[0], store, "me")
    assert store.get("sales-to-cloud") is None  # nothing recorded for it
    store.dispose()


class _Client(MetastoreClient):
    """A metastore client as its owner holds it (never connected here: the runner under test
    must not call it), recording whether it was closed."""

    closed = False

    def __init__(self) -> None:
        super().__init__("thrift://127.0.0.1:1", connect=False)

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fmt", ["hive", "delta"])
def test_runners_use_the_clients_they_are_given(tmp_path: Path, fmt: str) -> None:
    """A runner given its clients connects none of its own (the zones' metastores here resolve
    nowhere) and leaves them open at close: their owner closes them."""
    from hivemesh.replication.service import make_runner
    from hivemesh.replication.state import ReplicationStore

    cfg = parse_replication_config({"zones": ZONES, "replication": {"policies": [_policy(format=fmt)]}})
    store = ReplicationStore(f"sqlite:///{tmp_path / 'r.db'}")
    source, target = _Client(), _Client()
    runner = make_runner(cfg, cfg.replication.policies[0], store, "me", source=source, target=target)
    assert (runner.source, runner.target) == (source, target)
    assert type(runner).__name__ == ("PolicyRunner" if fmt == "hive" else "DeltaPolicyRunner")
    assert store.get("sales-to-cloud") is not None
    runner.close()
    assert not source.closed and not target.closed
    store.dispose()


def test_an_unreachable_zone_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """``replicate verify`` and ``run --once`` against a zone nobody listens on: one line naming
    the zone, exit 2, neither a traceback nor Thrift's own "Could not connect" log lines; and
    ``status`` piped shows its columns whole (no 80-column cut)."""
    import subprocess
    import sys

    from tests.support.servers import free_port

    zones = {
        s: {"metastore": f"thrift://127.0.0.1:{free_port()}", "warehouse": str(tmp_path / s)} for s in "ab"
    }
    path = tmp_path / "mesh.yaml"
    path.write_text(
        json.dumps(
            {
                "zones": zones,
                "replication": {
                    "store": f"sqlite:///{tmp_path / 'r.db'}",
                    "timeout_s": 2,
                    "policies": [{"name": POLICY, "source": "a", "target": "b", "databases": ["sales"]}],
                },
            }
        ),
        encoding="utf-8",
    )
    for args in (["verify"], ["verify", "--repair"], ["run", "--once"]):
        cmd = [sys.executable, "-m", "hivemesh.cli", "replicate", *args, "--config", str(path)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        # lines but the INFO one of the store's creation
        lines = [line for line in r.stderr.strip().splitlines() if " INFO " not in line]
        assert r.returncode == 2, r.stderr
        assert len(lines) == 1 and "Could not connect to ('127" not in r.stderr, r.stderr
        assert "zone 'a'" in lines[0] and zones["a"]["metastore"] in lines[0] and "unreachable" in lines[0]
        assert r.stdout == ""
    cmd = [sys.executable, "-m", "hivemesh.cli", "replicate", "status", "--config", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if POLICY in line]
    assert f"source zone 'a' ({zones['a']['metastore']}) unreachable" in row
    assert f"target zone 'b' ({zones['b']['metastore']}) unreachable" in row


POLICY = "sales-to-the-cloud-every-night"
