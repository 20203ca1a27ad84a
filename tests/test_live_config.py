"""The ``live:`` section of mesh.yaml (:mod:`hivemesh.live.config`): a valid file parses with its
defaults, each refusal names its key, and the zone-neutral path mapping round-trips. Pure: no
server, no etcd."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from hivemesh.config import ConfigError
from hivemesh.live.config import LiveRule, load_live_config, neutral, parse_live_config, to_zone

ETCD = {
    "endpoints": ["https://etcd-1:2379", "https://etcd-2:2379", "https://etcd-3:2379"],
    "prefix": "/hivemesh/live",
}
ZONES = {
    "onprem": {"metastore": "thrift://hms-onprem:9083", "warehouse": "hdfs://nn:8020/warehouse"},
    "cloud": {"metastore": "thrift://hms-cloud:9083", "warehouse": "s3a://lake/warehouse"},
}
RULE = {
    "name": "sales",
    "databases": ["sales", "fin_.*"],
    "tables": {"sales": ["orders", "line.*"]},
    "paths": {"onprem": "hdfs://nn:8020/live", "cloud": "s3a://lake/live"},
    "acid_owner": "onprem",
}


def _mesh(**changes: Any) -> dict[str, Any]:
    """The documented example (rule paths beside the warehouses), with ``rules[0]`` keys replaced
    by ``changes`` (``rules=`` replaces the whole list)."""
    rules = changes.pop("rules", None) or [{**copy.deepcopy(RULE), **changes}]
    return {"zones": copy.deepcopy(ZONES), "live": {"etcd": dict(ETCD), "rules": rules}}


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as e:
        parse_live_config(data, "mesh.yaml")
    lines = str(e.value).splitlines()
    assert lines[0] == "invalid configuration in mesh.yaml:"
    return [line.strip() for line in lines[1:]]


def test_the_documented_example_parses_with_the_defaults() -> None:
    cfg = parse_live_config(_mesh())
    assert cfg.live.max_apply_lag_s == 30
    assert cfg.live.etcd.prefix == "/hivemesh/live" and cfg.live.etcd.tls_enabled
    assert cfg.replication is None
    (rule,) = cfg.live.rules
    assert rule.acid_owner == "onprem" and set(rule.paths) == {"onprem", "cloud"}
    assert cfg.zones["cloud"].warehouse == "s3a://lake/warehouse"


def test_the_file_loads_and_anchors_etcd_tls_files(tmp_path: Path) -> None:
    data = _mesh()
    data["live"]["etcd"]["tls_ca"] = "certs/ca.pem"
    data["live"]["max_apply_lag_s"] = 5
    (tmp_path / "mesh.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    cfg = load_live_config(tmp_path / "mesh.yaml")
    assert cfg.live.etcd.tls_ca == str(tmp_path.resolve() / "certs/ca.pem")
    assert cfg.live.max_apply_lag_s == 5


def test_a_missing_live_section_and_bad_lag_are_refused() -> None:
    assert _problems({"zones": ZONES}) == ["live: Field required"]
    data = _mesh()
    data["live"]["max_apply_lag_s"] = 0
    assert _problems(data) == ["live.max_apply_lag_s: Input should be greater than 0 (got 0)"]


def test_field_problems_are_all_reported_with_their_keys() -> None:
    problems = _problems(_mesh(name="", databases=["sales", "fin_("]))
    assert problems[0].startswith("live.rules[0].name: must be letters, digits, '_' and '-'")
    assert problems[1].startswith("live.rules[0].databases: 'fin_(' is not a valid regular expression")
    assert len(problems) == 2


def test_rule_names_are_unique() -> None:
    other = {**copy.deepcopy(RULE), "databases": ["hr"], "tables": {}}
    other["paths"] = {"onprem": "hdfs://nn/live2", "cloud": "s3a://lake/live2"}
    assert _problems(_mesh(rules=[copy.deepcopy(RULE), other])) == [
        "live.rules[1].name: 'sales' is also the name of rules[0]"
    ]


def test_tables_must_belong_to_the_rules_databases() -> None:
    assert _problems(_mesh(tables={"hr": ["x"], "FIN_EU": ["y"]})) == [
        "live.rules[0].tables: database 'hr' matches none of the rule's databases (sales, fin_.*); "
        "its table list would never apply"
    ]


def test_unknown_zones_and_acid_owner_are_refused() -> None:
    problems = _problems(_mesh(acid_owner="onprem2", paths={**RULE["paths"], "mars": "file:/mars"}))
    assert problems == [
        "live.rules[0].paths: unknown zone 'mars' (known: cloud, onprem)",
        "live.rules[0].acid_owner: unknown zone 'onprem2' (known: cloud, onprem)",
    ]


def test_every_zone_needs_a_path_and_a_rule_two_zones() -> None:
    assert _problems(_mesh(paths={"onprem": "hdfs://nn/live"})) == [
        "live.rules[0].paths: no path for zone(s) cloud; a rule names the data root of every zone",
        "live.rules[0].paths: names 1 zone(s); Live Hive needs at least two zones",
    ]
    one_zone = _mesh(paths={"onprem": "hdfs://nn/live"})
    del one_zone["zones"]["cloud"]
    assert _problems(one_zone) == ["live.rules[0].paths: names 1 zone(s); Live Hive needs at least two zones"]


def test_a_relative_path_is_refused() -> None:
    assert _problems(_mesh(paths={"onprem": "hdfs://nn/live", "cloud": "data/live"})) == [
        "live.rules[0].paths.cloud: 'data/live' is a relative path; write an absolute path or a URI "
        "(a relative one would depend on the working directory)"
    ]


@pytest.mark.parametrize(
    ("cloud", "how"),
    [
        ("hdfs://NN/live/", "is"),  # the same directory once normalised (default port, case, slash)
        ("hdfs://nn:8020/live/cloud", "lies under"),
        ("hdfs://nn:8020/", "contains"),
    ],
)
def test_a_zone_path_overlapping_another_zones_path_is_refused(cloud: str, how: str) -> None:
    problems = _problems(_mesh(paths={"onprem": "hdfs://nn:8020/live", "cloud": cloud}))
    assert (
        f"live.rules[0].paths.cloud: {cloud!r} {how} zone 'onprem''s path 'hdfs://nn:8020/live' "
        "(live.rules[0].paths.onprem); zone 'cloud' would write zone 'onprem''s files"
    ) in problems


def test_paths_of_different_rules_may_not_overlap_across_zones() -> None:
    second = {"name": "hr", "databases": ["hr"], "acid_owner": "cloud"}
    second["paths"] = {"onprem": "s3a://lake/live/hr", "cloud": "s3a://lake/hr"}
    assert _problems(_mesh(rules=[copy.deepcopy(RULE), second])) == [
        "live.rules[1].paths.onprem: 's3a://lake/live/hr' lies under zone 'cloud''s path 's3a://lake/live' "
        "(live.rules[0].paths.cloud); zone 'onprem' would write zone 'cloud''s files"
    ]


def test_path_boundaries_and_a_zones_own_directories_are_allowed() -> None:
    # /w2 is not under /w; a zone's path inside its own warehouse is its own business
    data = _mesh(paths={"onprem": "file:/w", "cloud": "/w2"})
    data["zones"]["onprem"]["warehouse"] = "/w/warehouse"
    data["zones"]["cloud"]["warehouse"] = "file:///w2"
    assert parse_live_config(data).live.rules[0].paths["cloud"] == "/w2"


def test_a_zone_path_in_another_zones_warehouse_is_refused() -> None:
    problems = _problems(_mesh(paths={"onprem": "hdfs://nn/live", "cloud": "hdfs://nn/warehouse/cloud"}))
    assert problems == [
        "live.rules[0].paths.cloud: 'hdfs://nn/warehouse/cloud' lies under zone 'onprem''s warehouse "
        "'hdfs://nn:8020/warehouse'; zone 'cloud' would write zone 'onprem''s files"
    ]
    problems = _problems(_mesh(paths={"onprem": "s3a://lake", "cloud": "s3a://other/live"}))
    assert problems == [
        "live.rules[0].paths.onprem: 's3a://lake' contains zone 'cloud''s warehouse "
        "'s3a://lake/warehouse'; zone 'onprem' would write zone 'cloud''s files"
    ]


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        (["sales"], ["SALES"], "SALES, sales"),  # two literals, any case (each spelling named)
        (["fin_.*"], ["fin_eu"], "fin_eu"),  # a literal the other's regex matches
        (["fin_.*"], ["fin_.*"], "fin_.*"),  # the same pattern
    ],
)
def test_a_database_has_one_rule(first: list[str], second: list[str], shared: str) -> None:
    a = {**copy.deepcopy(RULE), "databases": first, "tables": {}}
    b = {"name": "other", "databases": second, "acid_owner": "cloud"}
    b["paths"] = {"onprem": "hdfs://nn/other", "cloud": "s3a://lake/other"}
    assert _problems(_mesh(rules=[a, b])) == [
        f"live.rules[1].databases: {shared} also in rules[0] 'sales'; a database has one rule"
    ]


def test_overlapping_regexes_only_are_not_a_conflict_and_rule_for_takes_the_first() -> None:
    b = {"name": "other", "databases": ["f.*"], "acid_owner": "cloud"}
    b["paths"] = {"onprem": "hdfs://nn/other", "cloud": "s3a://lake/other"}
    live = parse_live_config(_mesh(rules=[copy.deepcopy(RULE), b])).live
    assert live.rule_for("FIN_eu") is live.rules[0]
    assert live.rule_for("fx") is live.rules[1]
    assert live.rule_for("hr") is None


def test_a_database_both_live_and_replicated_is_refused() -> None:
    data = _mesh()
    data["replication"] = {
        "policies": [
            {"name": "hr-to-cloud", "source": "onprem", "target": "cloud", "databases": ["hr"]},
            {"name": "fin-to-cloud", "source": "onprem", "target": "cloud", "databases": ["fin_eu"]},
        ]
    }
    assert _problems(data) == [
        "live.rules[0].databases: fin_eu also replicated by replication.policies[1] 'fin-to-cloud'; "
        "a database is either replicated one way or live, not both"
    ]
    data["replication"]["policies"].pop()
    assert parse_live_config(data).replication is not None


def test_matching_is_full_match_in_any_case() -> None:
    rule = LiveRule.model_validate(RULE)
    assert rule.matches_database("Sales") and rule.matches_database("fin_eu")
    assert not rule.matches_database("sales2") and not rule.matches_database("xfin_eu")
    assert rule.matches_table("SALES", "Orders") and rule.matches_table("sales", "lineitem")
    assert not rule.matches_table("sales", "customers")
    assert rule.matches_table("fin_eu", "anything")  # no table list: every table
    assert not rule.matches_table("hr", "orders")


def test_to_zone_and_neutral_round_trip() -> None:
    rule = LiveRule.model_validate({**RULE, "paths": {"onprem": "hdfs://nn:8020/live/", "cloud": "/w"}})
    for rel in ("", "sales.db", "sales.db/orders/ds=2024-01-01"):
        for zone in ("onprem", "cloud"):
            assert neutral(rule, zone, to_zone(rule, zone, rel)) == rel
    assert to_zone(rule, "onprem", "sales.db/orders") == "hdfs://nn:8020/live/sales.db/orders"
    assert to_zone(rule, "cloud", "sales.db") == "file:/w/sales.db"
    assert to_zone(rule, "cloud", "") == "file:/w"
    # one location, any spelling of its zone's root
    assert neutral(rule, "onprem", "HDFS://NN/live/sales.db/orders/") == "sales.db/orders"
    assert neutral(rule, "cloud", "file:///w/sales.db") == "sales.db"


def test_neutral_is_none_outside_the_zone_and_on_path_boundaries() -> None:
    rule = LiveRule.model_validate({**RULE, "paths": {"onprem": "hdfs://nn/live", "cloud": "/w"}})
    assert neutral(rule, "cloud", "/w2/sales.db") is None
    assert neutral(rule, "cloud", "file:/w/../x") is None
    assert neutral(rule, "onprem", "hdfs://nn:9000/live/sales.db") is None  # another file system
    assert neutral(rule, "onprem", "/w/sales.db") is None  # the other zone's root
    with pytest.raises(KeyError):
        neutral(rule, "mars", "/w")


@pytest.mark.parametrize("rel", ["/abs", "../x", "a/../../x", "a//b", "a/", ".", "a/./b"])
def test_to_zone_refuses_paths_that_could_leave_the_root(rel: str) -> None:
    rule = LiveRule.model_validate(RULE)
    with pytest.raises(ValueError, match="not a relative path below the zone's root"):
        to_zone(rule, "onprem", rel)
