"""Members and remotes through SSH tunnels: a real OpenSSH bastion and target on loopback, two hops,
keys per hop and known_hosts checked, in front of a real hivemesh metastore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import Database, MetaException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.service import ProxyService
from tests.support.proxy import write_mesh
from tests.support.servers import HivemeshProcess
from tests.support.sshd import SSHD_SKIP_REASON, SshServer, make_key, sshd_available
from tests.test_proxy import _populate

pytestmark = pytest.mark.skipif(not sshd_available(), reason=SSHD_SKIP_REASON)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("ssh_site")
    keys = {
        "bastion": make_key(root / "keys" / "bastion_rsa", "rsa"),
        "target": make_key(root / "keys" / "target"),
    }
    with (
        SshServer(root / "bastion", [keys["bastion"]], log_level="DEBUG1") as bastion,
        SshServer(root / "target", [keys["target"]]) as target,
    ):
        known = root / "known_hosts"
        known.write_text(f"{bastion.host_key_line}\n{target.host_key_line}\n")
        zone = HivemeshProcess(f"sqlite:///{root / 'zone.db'}", root / "wh_zone", root / "zone.log").start()
        main = HivemeshProcess(f"sqlite:///{root / 'main.db'}", root / "wh_main", root / "main.log").start()
        _populate(zone.uri, root / "zone")
        try:
            yield {
                "root": root,
                "route": f"{bastion.route_hop()} -> {target.route_hop()}",
                "keys": [str(keys["bastion"]), str(keys["target"])],
                "known_hosts": str(known),
                "bastion": bastion,
                "target": target,
                "zone": zone,
                "main": main,
            }
        finally:
            zone.stop()
            main.stop()


def test_federated_member_through_two_hops(site: dict, tmp_path: Path) -> None:
    cfg = write_mesh(
        tmp_path / "mesh.yaml",
        {"port": 0, "store": f"sqlite:///{tmp_path / 'proxy.db'}"},
        {"name": "main", "uris": [site["main"].uri], "access_control": "read_and_write_and_create"},
        [
            {
                "name": "emr",
                "uris": [site["zone"].uri],  # as the target host sees it
                "ssh_tunnel": {
                    "route": site["route"],
                    "private_keys": site["keys"],
                    "known_hosts": site["known_hosts"],
                },
            }
        ],
    )
    with ProxyService(cfg) as svc:
        c = MetastoreClient(svc.uri, retries=0).raw
        assert "emr_sales" in c.get_all_databases()
        t = c.get_table("emr_sales", "orders")
        assert (t.dbName, t.tableName) == ("emr_sales", "orders")
        assert [p.values for p in c.get_partitions("emr_sales", "lineitem", -1)] == [["d1"], ["d2"], ["d3"]]
        zone_port = site["zone"].port
        # both hops were used: the bastion forwarded to the target's sshd, the target to the metastore
        assert site["bastion"].wait_for_log(f"127.0.0.1 port {site['target'].port}", timeout=5)
        assert site["target"].wait_for_log("Accepted publickey", timeout=5)
        assert zone_port


def test_remote_database_over_ssh_created_by_a_client(site: dict, tmp_path: Path) -> None:
    cfg = write_mesh(
        tmp_path / "mesh.yaml",
        {"port": 0, "store": f"sqlite:///{tmp_path / 'proxy.db'}"},
        {"name": "main", "uris": [site["main"].uri], "access_control": "read_and_write_and_create"},
        [],
    )
    props = {
        "hivemesh.remote.via": "ssh",
        "hivemesh.remote.uris": site["zone"].uri,
        "hivemesh.remote.database": "sales",
        "ssh.tunnel.route": site["route"],
        "ssh.tunnel.private.keys": ",".join(site["keys"]),
        "ssh.tunnel.known.hosts": site["known_hosts"],
    }
    with ProxyService(cfg) as svc:
        c = MetastoreClient(svc.uri, retries=0).raw
        c.create_database(Database(name="emr_sales_link", parameters=props))
        db = c.get_database("emr_sales_link")
        assert db.parameters["ssh.tunnel.route"] == site["route"]
        assert db.parameters["hivemesh.remote.via"] == "ssh"
        assert "orders" in c.get_all_tables("emr_sales_link")
        assert c.get_table("emr_sales_link", "orders").dbName == "emr_sales_link"
        # a host key missing from known_hosts: refused, naming the hop, and no link is stored
        bad_known = tmp_path / "known_hosts_bastion_only"
        bad_known.write_text(site["bastion"].host_key_line + "\n")
        with pytest.raises(MetaException, match=r"SSH hop .*2/2.*host key unknown"):
            c.create_database(
                Database(name="bad_link", parameters={**props, "ssh.tunnel.known.hosts": str(bad_known)})
            )
        assert "bad_link" not in c.get_all_databases()
        c.drop_database("emr_sales_link", False, False)
        assert "emr_sales_link" not in c.get_all_databases()
