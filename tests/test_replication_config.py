"""The ``zones:``/``replication:`` sections of mesh.yaml: defaults, matching rules, and every
rejected key named precisely (all problems at once)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
      data: metadata-only
      paths: {"hdfs://nn:8020/warehouse": "s3a://lake/warehouse"}
      propagate_drops: false
""",
        encoding="utf-8",
    )
    cfg = load_replication_config(path)
    p = cfg.replication.policy("sales-to-cloud")
    assert (p.format, p.data, p.propagate_drops) == (TargetFormat.DELTA, DataMode.METADATA_ONLY, False)
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
        "replication.policies.0.name",
        "replication.policies.0.databases",
        "replication.policies.0.format",
        "replication.policies.1.databases",
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
