"""Configuration files: paths written in a mesh.yaml are relative to the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemesh.config import load_config


def test_relative_paths_in_a_file_follow_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths written in a mesh.yaml (metastore db and warehouse, proxy store, embedded
    members, SSH key files, the replicator's store) are relative to the file's directory, so a
    command run from elsewhere with ``--config ../x/mesh.yaml`` finds the same store; URLs and
    absolute paths are kept; command-line values stay relative to the working directory."""
    from hivemesh.federation.config import load_federation_config
    from hivemesh.replication.config import load_replication_config

    conf_dir = tmp_path / "x"
    conf_dir.mkdir()
    (conf_dir / "metastore.yaml").write_text("metastore: {db: 'sqlite:///state/ms.db', warehouse: wh}\n")
    (conf_dir / "mesh.yaml").write_text(
        "proxy: {store: 'sqlite:///state/proxy.db'}\n"
        "primary: {name: main, embedded: {db: 'sqlite:///state/main.db', warehouse: 'data/wh'}}\n"
        "federated:\n"
        "  - {name: lake, uris: ['thrift://lake:9083'], mapped_databases: [sales],\n"
        "     ssh_tunnel: {route: 'u@bastion', private_keys: [keys/id_ed25519, /abs/key], known_hosts: kh}}\n"
        "  - {name: s3wh, embedded: {db: 'sqlite:////abs/x.db', warehouse: 's3a://b/wh'}, mapped_databases: [x]}\n"
    )
    (conf_dir / "repl.yaml").write_text(
        "zones: {a: {metastore: 'thrift://a:9083', warehouse: 'file:/a'}, b: {metastore: 'thrift://b:9083', warehouse: 'file:/b'}}\n"
        "replication: {store: 'sqlite:///state/repl.db', policies: []}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    root = conf_dir.resolve()
    ms = load_config("../x/metastore.yaml").metastore
    assert ms.db == f"sqlite:///{root}/state/ms.db" and ms.warehouse == str(root / "wh")
    assert load_config("../x/metastore.yaml", metastore__warehouse="cli_wh").metastore.warehouse == "cli_wh"
    fed = load_federation_config("../x/mesh.yaml")
    assert fed.proxy.store == f"sqlite:///{root}/state/proxy.db"
    assert fed.primary.embedded is not None and fed.primary.embedded.db == f"sqlite:///{root}/state/main.db"
    assert fed.primary.embedded.warehouse == str(root / "data" / "wh")
    lake, s3wh = fed.federated
    assert lake.ssh_tunnel is not None
    assert lake.ssh_tunnel.private_keys == [str(root / "keys" / "id_ed25519"), "/abs/key"]
    assert lake.ssh_tunnel.known_hosts == str(root / "kh")
    assert s3wh.embedded is not None and (s3wh.embedded.db, s3wh.embedded.warehouse) == (
        "sqlite:////abs/x.db",
        "s3a://b/wh",
    )
    assert load_replication_config("../x/repl.yaml").replication.store == f"sqlite:///{root}/state/repl.db"


def test_one_environment_rule_for_every_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HIVEMESH_<SECTION>_<OPTION>`` named after the command-line option (or the YAML key), for
    the metastore and the proxy alike; an unknown ``HIVEMESH_METASTORE_*``/``HIVEMESH_PROXY_*`` is
    an error naming it; every metastore setting has a flag."""
    from click.testing import CliRunner

    from hivemesh.cli import main
    from hivemesh.config import ConfigError, MetastoreConfig, option_name
    from hivemesh.federation.config import load_federation_config

    monkeypatch.setenv("HIVEMESH_METASTORE_TXN_TIMEOUT", "42")  # as --txn-timeout
    monkeypatch.setenv("HIVEMESH_METASTORE_EVENT_RETENTION_S", "99")  # as the YAML key
    monkeypatch.setenv("HIVEMESH_METASTORE_URI", "thrift://x:1")  # hivemesh acid's, not a setting
    cfg = load_config().metastore
    assert (cfg.txn_timeout_s, cfg.event_retention_s) == (42, 99)
    monkeypatch.setenv("HIVEMESH_METASTORE_TXN_TIMOUT", "1")
    with pytest.raises(ConfigError, match="HIVEMESH_METASTORE_TXN_TIMOUT(?!_)"):
        load_config()
    monkeypatch.delenv("HIVEMESH_METASTORE_TXN_TIMOUT")
    mesh = tmp_path / "mesh.yaml"
    mesh.write_text("proxy: {port: 9001}\nprimary: {name: main, uris: ['thrift://m:9083']}\n")
    monkeypatch.setenv("HIVEMESH_PROXY_PORT", "9555")
    monkeypatch.setenv("HIVEMESH_PROXY_STATUS_POLLING_DELAY_MS", "700")
    fed = load_federation_config(mesh)
    assert (fed.proxy.port, fed.proxy.status_polling_delay_ms) == (9555, 700)
    assert load_federation_config(mesh, port=9666).proxy.port == 9666  # the option wins
    monkeypatch.setenv("HIVEMESH_PROXY_PROT", "1")
    with pytest.raises(ConfigError, match="HIVEMESH_PROXY_PROT"):
        load_federation_config(mesh)
    help_text = CliRunner().invoke(main, ["metastore", "--help"]).output
    missing = [f for f in MetastoreConfig.model_fields if f"--{option_name(f)}" not in help_text]
    assert missing == [], missing
