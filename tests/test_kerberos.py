"""Kerberos on every Thrift port (issue 18): SASL GSSAPI as ``hive.metastore.sasl.enabled``.

A real MIT KDC (``tests/support/kdc.py``: realm HIVEMESH.TEST created in a temp dir) issues the
tickets. Principals: ``hive/localhost`` (the metastores' and the proxy's service principal, in a
keytab) and the users ``alice`` and ``bob`` (keytabs, and ticket caches made by ``kinit``).
Checked: our client with a ticket cache or a keytab, refusals of plaintext clients, of clients
without a ticket and of tickets for another service; the principal recorded as the user of txns
and locks whatever the client claims; the proxy serving Kerberos and authenticating to a
Kerberized member as a proxy user; and Spark's own Hive 2.3 client configured as Hive documents.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hive_metastore.ttypes import Database, LockType

from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient, lock_component
from hivemesh.config import MetastoreConfig
from hivemesh.federation.service import ProxyService
from hivemesh.kerberos import KerberosError, KerberosInitiator, service_principal, short_name
from hivemesh.metastore.service import MetastoreService, StartupError
from tests.support.javahms import JAVA_SKIP_REASON, java_available
from tests.support.kdc import KDC_SKIP_REASON, REALM, Kdc, kdc_available
from tests.support.spark_roundtrip import spark_roundtrip

pytestmark = pytest.mark.skipif(not kdc_available(), reason=KDC_SKIP_REASON)

SERVICE = f"hive/_HOST@{REALM}"
SERVER = f"hive/localhost@{REALM}"
"""The servers' principal: clients dial localhost (their ``_HOST``), and a server's ``_HOST`` is
its machine's name, which need not be localhost."""


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """The KDC, the keytabs and alice's ticket cache; the process uses the realm meanwhile."""
    root = tmp_path_factory.mktemp("kdc")
    kdc = Kdc(root).start()
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME")}
    try:
        service_keytab = kdc.add_principal("hive/localhost")
        alice_keytab = kdc.add_principal("alice")
        bob_keytab = kdc.add_principal("bob")
        os.environ.update(kdc.env())
        alice_cc = kdc.kinit("alice", alice_keytab, root / "alice.ccache")
        os.environ["KRB5CCNAME"] = f"FILE:{alice_cc}"
        yield SimpleNamespace(
            kdc=kdc, root=root, service_keytab=service_keytab, alice_keytab=alice_keytab,
            bob_keytab=bob_keytab, alice_cc=alice_cc,
        )  # fmt: skip
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        kdc.stop()


def _metastore(tmp: Path, realm: SimpleNamespace, **extra: object) -> MetastoreService:
    cfg = MetastoreConfig(
        host="localhost",
        db=f"sqlite:///{tmp / 'ms.db'}",
        warehouse=str(tmp / "wh"),
        port=0,
        kerberos_principal=SERVER,
        kerberos_keytab=str(realm.service_keytab),
        **extra,  # type: ignore[arg-type]
    )
    return MetastoreService(cfg).start()


@pytest.fixture(scope="module")
def krb_metastore(
    tmp_path_factory: pytest.TempPathFactory, realm: SimpleNamespace
) -> Iterator[MetastoreService]:
    svc = _metastore(tmp_path_factory.mktemp("krb-ms"), realm, kerberos_proxy_users=["hive"])
    yield svc
    svc.stop()


def _client(uri: str, kerberos: KerberosInitiator | None, **kw: object) -> MetastoreClient:
    return MetastoreClient(uri, kerberos=kerberos, timeout_s=10, retries=0, **kw)  # type: ignore[arg-type]


def test_principal_names() -> None:
    assert service_principal("hive/_HOST@R", "Meta1.Corp") == "hive/meta1.corp@R"
    assert service_principal("hive/fixed@R", "other") == "hive/fixed@R"
    assert short_name("alice@R") == "alice" and short_name("hive/meta1.corp@R") == "hive"


def test_ticket_cache_client_is_its_principal(krb_metastore: MetastoreService, tmp_path: Path) -> None:
    """alice (from the ticket cache) claims to be mallory: txns, locks and the database owner
    say alice."""
    with _client(krb_metastore.uri, KerberosInitiator(SERVICE), user="mallory") as c:
        c.raw.create_database(Database(name="krb_db", locationUri=str(tmp_path / "krb_db")))
        assert c.raw.get_database("krb_db").ownerName == "alice"
        with c.transaction(heartbeat=False) as txn:
            txn.lock([lock_component("krb_db", lock_type=LockType.SHARED_READ)])
            infos = {t.id: t for t in c.raw.get_open_txns_info().open_txns}
            assert infos[txn.txn_id].user == "alice"
            locks = [lk for lk in c.show_locks() if lk.txnid == txn.txn_id]
            assert locks and {lk.user for lk in locks} == {"alice"}
        c.raw.set_ugi("mallory", [])  # a Kerberos client cannot rename itself
        with c.transaction(heartbeat=False) as txn:
            infos = {t.id: t for t in c.raw.get_open_txns_info().open_txns}
            assert infos[txn.txn_id].user == "alice"


def test_keytab_client_and_a_trusted_proxy_user(
    krb_metastore: MetastoreService, realm: SimpleNamespace
) -> None:
    bob = KerberosInitiator(SERVICE, f"bob@{REALM}", str(realm.bob_keytab))
    assert bob.name == f"bob@{REALM}"
    with _client(krb_metastore.uri, bob, user="alice") as c, c.transaction(heartbeat=False) as txn:
        infos = {t.id: t for t in c.raw.get_open_txns_info().open_txns}
        assert infos[txn.txn_id].user == "bob"
    # hive is a proxy user of this metastore: the user it names is recorded
    hive = KerberosInitiator(SERVICE, f"hive/localhost@{REALM}", str(realm.service_keytab))
    with _client(krb_metastore.uri, hive, user="carol") as c, c.transaction(heartbeat=False) as txn:
        infos = {t.id: t for t in c.raw.get_open_txns_info().open_txns}
        assert infos[txn.txn_id].user == "carol"


def test_clients_without_kerberos_or_ticket_are_refused(
    krb_metastore: MetastoreService, realm: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(TRANSPORT_ERRORS):  # plain Thrift: the server answers BAD and closes
        _client(krb_metastore.uri, None).raw.get_all_databases()
    # a ticket for another service: the KDC has no such principal
    with pytest.raises(TRANSPORT_ERRORS) as err:
        _client(krb_metastore.uri, KerberosInitiator(f"other/_HOST@{REALM}"))
    assert "Kerberos authentication to other/localhost" in str(err.value)
    # no ticket at all: the client says so before dialling
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty.ccache'}")
    with pytest.raises(KerberosError, match="no Kerberos credentials"):
        KerberosInitiator(SERVICE)
    with pytest.raises(KerberosError, match="no such file"):
        KerberosInitiator(SERVICE, "alice", str(tmp_path / "missing.keytab"))
    # the server is still up for a good client
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{realm.alice_cc}")
    with _client(krb_metastore.uri, KerberosInitiator(SERVICE)) as c:
        assert "default" in c.raw.get_all_databases()


def test_a_servers_host_is_its_machines_name_not_its_listen_address(
    tmp_path: Path, realm: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hive/_HOST@R`` on a server listening on 127.0.0.1 is ``hive/<socket.getfqdn()>@R``, as
    Hadoop's SecurityUtil makes it (it was ``hive/127.0.0.1@R``); clients naming that principal
    authenticate."""
    monkeypatch.setattr(socket, "getfqdn", lambda name="": "meta1.hivemesh.test")
    keytab = realm.kdc.add_principal("hive/meta1.hivemesh.test")
    cfg = MetastoreConfig(
        host="127.0.0.1",
        db=f"sqlite:///{tmp_path / 'ms.db'}",
        warehouse=str(tmp_path / "wh"),
        port=0,
        kerberos_principal=SERVICE,
        kerberos_keytab=str(keytab),
    )
    svc = MetastoreService(cfg).start()
    try:
        with _client(svc.uri, KerberosInitiator(f"hive/meta1.hivemesh.test@{REALM}")) as c:
            assert "default" in c.raw.get_all_databases()
    finally:
        svc.stop()


def test_a_server_without_its_key_does_not_start(tmp_path: Path, realm: SimpleNamespace) -> None:
    cfg = MetastoreConfig(
        db=f"sqlite:///{tmp_path / 'x.db'}",
        port=0,
        kerberos_principal=f"hive/elsewhere@{REALM}",
        kerberos_keytab=str(realm.service_keytab),
    )
    with pytest.raises(StartupError, match="hive/elsewhere"):
        MetastoreService(cfg).start()


@pytest.fixture(scope="module")
def krb_proxy(
    tmp_path_factory: pytest.TempPathFactory, realm: SimpleNamespace, krb_metastore: MetastoreService
) -> Iterator[ProxyService]:
    d = tmp_path_factory.mktemp("krb-proxy")
    mesh = d / "mesh.yaml"
    mesh.write_text(
        yaml.safe_dump(
            {
                "proxy": {
                    "host": "localhost",
                    "port": 0,
                    "store": f"sqlite:///{d / 'proxy.db'}",
                    "reload_on_change": False,
                    "kerberos_principal": SERVER,
                    "kerberos_keytab": str(realm.service_keytab),
                },
                "primary": {
                    "name": "main",
                    "uris": [krb_metastore.uri],
                    "access_control": "read_and_write_and_create",
                    "kerberos_principal": SERVICE,
                },
                # the same metastore without Kerberos: refused, so unavailable
                "federated": [{"name": "nokrb", "uris": [krb_metastore.uri]}],
            }
        )
    )
    svc = ProxyService(mesh).start()
    yield svc
    svc.stop()


def test_proxy_serves_kerberos_and_authenticates_to_its_member(
    krb_proxy: ProxyService, krb_metastore: MetastoreService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hivemesh.audit")
    with _client(krb_proxy.uri, KerberosInitiator(SERVICE), user="mallory") as c:
        c.raw.set_ugi("mallory", [])  # claims another name: the audit still says alice
        c.raw.create_database(Database(name="via_krb_proxy"))
        assert "via_krb_proxy" in c.raw.get_all_databases()
        with c.transaction(heartbeat=False) as txn:
            # the member authenticated the proxy (hive, a proxy user) acting for alice
            with _client(krb_metastore.uri, KerberosInitiator(SERVICE)) as direct:
                infos = {t.id: t for t in direct.raw.get_open_txns_info().open_txns}
            assert infos[txn.txn_id].user == "alice"
    audit = [r.getMessage() for r in caplog.records if r.name == "hivemesh.audit"]
    created = [line for line in audit if "method=create_database" in line]
    assert created and all(line.startswith("user=alice ") for line in created), audit
    assert not any("user=mallory" in line for line in audit)
    with pytest.raises(TRANSPORT_ERRORS):
        _client(krb_proxy.uri, None).raw.get_all_databases()
    ok, details = krb_proxy.health()
    assert ok and details["members"]["main"]["status"] == "AVAILABLE"
    assert "Kerberos" in details["members"]["main"]["endpoint"]
    assert details["members"]["nokrb"]["status"] == "UNAVAILABLE"


@pytest.mark.skipif(not java_available(), reason=JAVA_SKIP_REASON + " (Spark's Hive client needs Java)")
def test_spark_hive_client_with_sasl_enabled(
    realm: SimpleNamespace, krb_metastore: MetastoreService, krb_proxy: ProxyService, tmp_path: Path
) -> None:
    """Spark's built-in Hive 2.3 client with ``hive.metastore.sasl.enabled`` and alice's ticket
    cache creates, writes and reads a table through the Kerberized metastore and proxy."""
    java = f"-Djava.security.krb5.conf={realm.kdc.krb5_conf} -Djavax.security.auth.useSubjectCredsOnly=false"
    conf = {
        "spark.driver.extraJavaOptions": java,
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": SERVICE,
        "spark.hadoop.hadoop.security.authentication": "kerberos",
    }
    targets = [
        ("metastore", krb_metastore.uri, "spark_krb_metastore"),
        ("proxy", krb_proxy.uri, "spark_krb_proxy"),
    ]
    seen = spark_roundtrip(tmp_path, targets, conf, env={"KRB5CCNAME": f"FILE:{realm.alice_cc}"})
    assert seen["metastore"]["sum"] == 6 and "spark_krb_metastore" in seen["metastore"]["databases"]
    assert seen["proxy"]["sum"] == 6
    assert {"spark_krb_metastore", "spark_krb_proxy"} <= set(seen["proxy"]["databases"])
    with _client(krb_metastore.uri, KerberosInitiator(SERVICE)) as c:  # a server refusing all but SASL
        assert c.raw.get_table("spark_krb_metastore", "t").sd.cols[0].name == "id"
        assert c.raw.get_table("spark_krb_proxy", "t").sd.cols[0].name == "id"


def test_replication_between_kerberized_zones(
    krb_metastore: MetastoreService, realm: SimpleNamespace, tmp_path: Path
) -> None:
    """A policy whose zones require Kerberos: the replicator is bob (keytab, relative to
    mesh.yaml) towards the source and alice (ticket cache) towards the target."""
    from hivemesh.replication.config import load_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore

    target = _metastore(tmp_path / "b", realm)
    try:
        with _client(krb_metastore.uri, KerberosInitiator(SERVICE)) as c:
            c.raw.create_database(
                Database(name="repl_krb", locationUri=str(tmp_path / "wh-a" / "repl_krb.db"))
            )
        (tmp_path / "bob.keytab").write_bytes(realm.bob_keytab.read_bytes())
        zones = {
            "a": {
                "metastore": krb_metastore.uri,
                "warehouse": str(tmp_path / "wh-a"),
                "kerberos_principal": SERVICE,
                "kerberos_client_principal": f"bob@{REALM}",
                "kerberos_client_keytab": "bob.keytab",
            },
            "b": {
                "metastore": target.uri,
                "warehouse": str(tmp_path / "wh-b"),
                "kerberos_principal": SERVICE,
            },
        }
        mesh = tmp_path / "mesh.yaml"
        policy = {"name": "p", "source": "a", "target": "b", "databases": ["repl_krb"]}
        mesh.write_text(
            yaml.safe_dump(
                {"zones": zones, "replication": {"store": "sqlite:///repl.db", "policies": [policy]}}
            )
        )

        def once() -> dict[str, str]:
            config = load_replication_config(mesh)
            store = ReplicationStore(config.replication.store)
            try:
                return run_once(config, store)
            finally:
                store.dispose()

        assert once() == {}
        with _client(target.uri, KerberosInitiator(SERVICE)) as c:
            assert c.raw.get_database("repl_krb").name == "repl_krb"  # the target is a fresh metastore
        del zones["b"]["kerberos_principal"]  # a zone that requires Kerberos, reached without it
        mesh.write_text(
            yaml.safe_dump(
                {"zones": zones, "replication": {"store": "sqlite:///repl.db", "policies": [policy]}}
            )
        )
        failures = once()
        assert "zone 'b'" in failures["p"] and "unreachable" in failures["p"]
    finally:
        target.stop()
