"""docs/configuration.md, the configuration reference, is generated from the pydantic models and the
click options (:mod:`hivemesh.config_reference`) and must match them: these tests fail when it is
stale (run ``make docs``) or when the reference misstates a key."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from hivemesh import config_reference
from hivemesh.config import MetastoreConfig, env_overrides, load_config, option_name
from hivemesh.federation.config import FederationConfig, MemberConfig, ProxySettings
from hivemesh.replication.config import ReplicationConfig, ReplicationFile

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / config_reference.DOC_PATH
COLUMNS = ("key", "type", "default", "option", "env", "description")


@pytest.fixture(scope="module")
def rendered() -> str:
    return config_reference.render()


def _row(doc: str, key: str) -> dict[str, str]:
    """The cells of the table row of ``key`` (``metastore.port``)."""
    rows = [line for line in doc.splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"{key}: {len(rows)} rows in the reference"
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", rows[0])[1:-1]]
    assert len(cells) == len(COLUMNS), rows[0]
    return dict(zip(COLUMNS, cells, strict=True))


def test_docs_configuration_md_is_up_to_date(rendered: str) -> None:
    assert DOC.exists(), f"{config_reference.DOC_PATH} is missing: run `make docs`"
    if DOC.read_text(encoding="utf-8") != rendered:
        diff = config_reference.check(DOC)
        pytest.fail(
            f"{config_reference.DOC_PATH} is stale (the config models or CLI options changed): run "
            f"`make docs` and commit it.\n" + "\n".join(diff[:40]),
            pytrace=False,
        )


def test_every_metastore_key_has_its_working_environment_variable(rendered: str) -> None:
    for field in MetastoreConfig.model_fields:
        env = _row(rendered, f"metastore.{field}")["env"]
        name = "HIVEMESH_METASTORE_" + option_name(field).replace("-", "_").upper()
        assert f"`{name}`" in env, (field, env)
        for listed in re.findall(r"`(HIVEMESH_[A-Z0-9_]+)`", env):  # each one the code really reads
            assert env_overrides("metastore", MetastoreConfig, {listed: "1"}) == {field: "1"}, listed


def test_proxy_keys_have_proxy_variables_and_members_none(rendered: str) -> None:
    for field in ProxySettings.model_fields:
        env = _row(rendered, f"proxy.{field}")["env"]
        for listed in re.findall(r"`(HIVEMESH_[A-Z0-9_]+)`", env):
            assert env_overrides("proxy", ProxySettings, {listed: "1"}) == {field: "1"}, listed
        assert env.startswith("`HIVEMESH_PROXY_"), (field, env)
    for field in MemberConfig.model_fields:
        for key in (f"primary.{field}", f"federated[].{field}"):
            row = _row(rendered, key)
            assert (row["env"], row["option"]) == ("—", "—"), key


def test_the_documented_variable_is_applied(monkeypatch: pytest.MonkeyPatch, rendered: str) -> None:
    assert "`HIVEMESH_METASTORE_TXN_TIMEOUT`" in _row(rendered, "metastore.txn_timeout_s")["env"]
    monkeypatch.setenv("HIVEMESH_METASTORE_TXN_TIMEOUT", "601")
    assert load_config().metastore.txn_timeout_s == 601


def test_options_come_from_the_click_commands(rendered: str) -> None:
    assert _row(rendered, "metastore.txn_timeout_s")["option"] == "`--txn-timeout`"
    assert _row(rendered, "metastore.housekeeping_interval_s")["option"] == "`--housekeeping-interval`"
    assert _row(rendered, "metastore.framed")["option"] == "`--framed/--unframed`"
    assert _row(rendered, "metastore.allowed_locations")["option"] == "`--allowed-locations` (repeatable)"
    assert _row(rendered, "proxy.port")["option"] == "`--port`"
    assert _row(rendered, "proxy.store")["option"] == "—"  # `hivemesh proxy` has no --store
    import click

    from hivemesh.cli import main

    command = main.get_command(click.Context(main), "metastore")
    assert command is not None
    for param in command.params:  # every option named after a key is listed against that key
        if param.name in MetastoreConfig.model_fields:
            assert _row(rendered, f"metastore.{param.name}")["option"] != "—", param.name


def test_defaults_are_rendered_as_the_models_hold_them(rendered: str) -> None:
    assert _row(rendered, "metastore.port")["default"] == "`9083`"
    assert _row(rendered, "proxy.port")["default"] == "`9083`"
    assert _row(rendered, "metastore.txn_timeout_s")["default"] == "`300`"
    assert _row(rendered, "metastore.metrics_port")["default"] == "unset"
    assert _row(rendered, "metastore.framed")["default"] == "`false`"
    assert _row(rendered, "metastore.db")["default"] == "`sqlite:///hivemesh-data/metastore.db`"
    assert _row(rendered, "primary.name")["default"] == "**required**"
    assert _row(rendered, "primary.access_control")["default"] == "`read_only`"
    assert _row(rendered, "replication.poll_interval_s")["default"] == "`0.25`"
    assert _row(rendered, "metastore.port")["type"] == "integer, ≥ 0, ≤ 65535"


def test_the_proxy_defaults_are_stated_truthfully(rendered: str) -> None:
    minimal = FederationConfig.model_validate({"primary": {"name": "p", "uris": ["thrift://h:9083"]}})
    assert minimal.primary.access_control.value == "read_only"
    assert "makes a `read_only` primary" in rendered
    assert f"the proxy listens on `{minimal.proxy.host}:{minimal.proxy.port}`" in rendered
    assert minimal.proxy.port == 9083


def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        out.append(f"{prefix}.{name}")
        nested = config_reference._nested(info.annotation)
        if nested is not None:
            out.extend(_keys(nested[1], f"{prefix}.{name}{nested[0]}"))
    return out


def test_every_key_of_every_section_has_a_row(rendered: str) -> None:
    keys = [
        *_keys(MetastoreConfig, "metastore"),
        *_keys(ProxySettings, "proxy"),
        *_keys(MemberConfig, "primary"),
        *_keys(MemberConfig, "federated[]"),
        *_keys(typing.get_args(ReplicationFile.model_fields["zones"].annotation)[1], "zones.<name>"),
        *_keys(ReplicationConfig, "replication"),
    ]
    assert "federated[].database_prefix" in keys and "zones.<name>.s3.region" in keys
    assert "replication.policies[].databases" in keys and "primary.ssh_tunnel.route" in keys
    for key in keys:
        _row(rendered, key)
    for key in keys:  # replication reads no options and no variables
        if key.startswith(("zones.", "replication.")):
            row = _row(rendered, key)
            assert (row["option"], row["env"]) == ("—", "—"), key


def test_check_names_the_stale_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], rendered: str) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(rendered.replace("| `metastore.port` | integer", "| `metastore.port` | int"), "utf-8")
    assert config_reference.main(["--check", str(stale)]) == 1
    err = capsys.readouterr().err
    assert "is stale" in err and "make docs" in err and "metastore.port" in err
    stale.write_text(rendered, "utf-8")
    assert config_reference.main(["--check", str(stale)]) == 0
    assert config_reference.main(["--check", str(tmp_path / "missing.md")]) == 1
