"""TLS on every port (issue 18): the metastore's Thrift and metrics ports, the proxy's, our client,
the proxy's member connections, and Spark's own Hive client with ``hive.metastore.use.SSL``.

A throw-away PKI (``tests/support/tls.py``) gives a CA, a server certificate for
localhost/127.0.0.1, a client certificate and a second, unrelated CA. Every server is real (TCP,
TLS handshakes by OpenSSL); the Spark check runs a separate PySpark process whose JVM reads a JKS
truststore made by ``keytool``.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hive_metastore import ThriftHiveMetastore
from hive_metastore.ttypes import Database
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient
from hivemesh.config import ConfigError, MetastoreConfig, load_config
from hivemesh.federation.config import load_federation_config
from hivemesh.federation.service import ProxyService
from hivemesh.metastore.service import MetastoreService, StartupError
from hivemesh.tls import TlsError, client_context, server_context
from tests.support.javahms import JAVA_SKIP_REASON, java_available
from tests.support.spark_roundtrip import spark_roundtrip
from tests.support.tls import TRUSTSTORE_PASSWORD, Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _metastore(tmp: Path, pki: Pki, **extra: object) -> MetastoreService:
    cfg = MetastoreConfig(
        db=f"sqlite:///{tmp / 'ms.db'}",
        warehouse=str(tmp / "wh"),
        port=0,
        metrics_port=0,
        tls_cert=str(pki.server_cert),
        tls_key=str(pki.server_key),
        **extra,  # type: ignore[arg-type]
    )
    return MetastoreService(cfg).start()


@pytest.fixture(scope="module")
def tls_metastore(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[MetastoreService]:
    svc = _metastore(tmp_path_factory.mktemp("tls-ms"), pki)
    yield svc
    svc.stop()


def _client(uri: str, tls: ssl.SSLContext | None, **kw: object) -> MetastoreClient:
    return MetastoreClient(uri, tls=tls, timeout_s=5, retries=0, **kw)  # type: ignore[arg-type]


def test_client_talks_to_a_tls_metastore(tls_metastore: MetastoreService, pki: Pki, tmp_path: Path) -> None:
    with _client(tls_metastore.uri, client_context(str(pki.ca))) as c:
        c.raw.create_database(Database(name="tls_db", locationUri=str(tmp_path / "tls_db")))
        assert "tls_db" in c.raw.get_all_databases()
        assert c.txn_timeout_s == 300  # read with get_config_value over the TLS connection


def test_plaintext_and_untrusting_clients_are_refused_and_the_server_stays_up(
    tls_metastore: MetastoreService, pki: Pki
) -> None:
    # a plaintext client is told why, whichever framing and protocol it speaks
    with pytest.raises(TApplicationException, match="the server requires TLS"):
        _client(tls_metastore.uri, None)
    host, port = tls_metastore.uri.removeprefix("thrift://").split(":")
    for framed, compact in ((False, False), (True, False), (False, True), (True, True)):
        sock = TSocket.TSocket(host, int(port))
        trans = TTransport.TFramedTransport(sock) if framed else TTransport.TBufferedTransport(sock)
        proto = (
            TCompactProtocol.TCompactProtocol(trans) if compact else TBinaryProtocol.TBinaryProtocol(trans)
        )
        trans.open()
        try:
            with pytest.raises(TApplicationException, match="the server requires TLS") as told:
                ThriftHiveMetastore.Client(proto).get_all_databases()
            assert told.value.type == TApplicationException.UNSUPPORTED_CLIENT_TYPE
        finally:
            trans.close()
    # a client trusting another CA refuses our certificate
    with pytest.raises(TRANSPORT_ERRORS) as err:
        _client(tls_metastore.uri, client_context(str(pki.other_ca)))
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "certificate verify failed" in str(err.value)
    # name checks: the certificate names localhost and 127.0.0.1, not 127.0.0.2
    host_uri = tls_metastore.uri.replace("127.0.0.1", "localhost")
    with _client(host_uri, client_context(str(pki.ca))) as c:
        assert c.raw.get_all_databases()
    with _client(tls_metastore.uri, client_context(str(pki.ca))) as c:  # still serving
        assert "default" in c.raw.get_all_databases()


def test_metrics_and_health_over_https(tls_metastore: MetastoreService, pki: Pki) -> None:
    url = f"https://127.0.0.1:{tls_metastore.metrics_port}"
    ctx = client_context(str(pki.ca))
    with urllib.request.urlopen(f"{url}/health", context=ctx, timeout=10) as r:
        health = json.loads(r.read())
    assert health["status"] == "ok" and health["store"] == "ok"
    with urllib.request.urlopen(f"{url}/metrics", context=ctx, timeout=10) as r:
        assert b"hivemesh_" in r.read()
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP on the TLS port
        urllib.request.urlopen(f"http://127.0.0.1:{tls_metastore.metrics_port}/health", timeout=10)
    with urllib.request.urlopen(f"{url}/health", context=ctx, timeout=10) as r:  # still serving
        assert r.status == 200


def test_mutual_tls_requires_a_client_certificate(tmp_path: Path, pki: Pki) -> None:
    svc = _metastore(tmp_path, pki, tls_client_ca=str(pki.ca))
    try:
        with pytest.raises(TRANSPORT_ERRORS):
            _client(svc.uri, client_context(str(pki.ca))).client.get_all_databases()
        # a certificate from another CA is refused too
        with pytest.raises(TRANSPORT_ERRORS):
            _client(svc.uri, client_context(str(pki.ca), str(pki.other_cert), str(pki.other_key)))
        with _client(svc.uri, client_context(str(pki.ca), str(pki.client_cert), str(pki.client_key))) as c:
            assert "default" in c.raw.get_all_databases()
    finally:
        svc.stop()


def test_unusable_tls_material_is_a_clear_startup_error(tmp_path: Path, pki: Pki) -> None:
    cfg = MetastoreConfig(
        db=f"sqlite:///{tmp_path / 'x.db'}", port=0, tls_cert=str(pki.server_cert), tls_key=str(pki.other_key)
    )
    with pytest.raises(StartupError, match="does not belong to the certificate"):
        MetastoreService(cfg).start()
    cfg = MetastoreConfig(db=f"sqlite:///{tmp_path / 'x.db'}", port=0, tls_cert=str(tmp_path / "nope.pem"))
    with pytest.raises(StartupError, match=r"nope\.pem: no such file"):
        MetastoreService(cfg).start()
    with pytest.raises(TlsError, match="no key given"):  # a certificate without its key
        server_context(str(pki.server_cert))
    with pytest.raises(TlsError, match="no usable PEM certificate"):
        client_context(str(pki.server_key))


def test_tls_settings_are_validated_and_relative_to_the_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tls_key and tls_client_ca need tls_cert"):
        load_config(None, metastore__tls_key="k.pem")
    conf = tmp_path / "etc" / "mesh.yaml"
    conf.parent.mkdir()
    conf.write_text(yaml.safe_dump({"metastore": {"tls_cert": "certs/s.pem", "tls_key": "/abs/s.key"}}))
    cfg = load_config(conf).metastore
    assert cfg.tls_cert == str((tmp_path / "etc" / "certs" / "s.pem").resolve())
    assert cfg.tls_key == "/abs/s.key"
    mesh = tmp_path / "etc" / "proxy.yaml"
    mesh.write_text(
        yaml.safe_dump(
            {
                "proxy": {"tls_cert": "s.pem"},
                "primary": {"name": "p", "uris": ["thrift://h:9083"], "tls_ca": "ca.pem"},
                "federated": [{"name": "g", "glue_config": {}, "tls": True}],
            }
        )
    )
    with pytest.raises(ConfigError, match="tls applies to uris"):
        load_federation_config(mesh)
    data = yaml.safe_load(mesh.read_text())
    data["federated"] = []
    mesh.write_text(yaml.safe_dump(data))
    fc = load_federation_config(mesh)
    assert fc.proxy.tls_cert == str((tmp_path / "etc" / "s.pem").resolve())
    assert fc.primary.tls and fc.primary.tls_ca == str((tmp_path / "etc" / "ca.pem").resolve())


@pytest.fixture(scope="module")
def tls_proxy(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki, tls_metastore: MetastoreService
) -> Iterator[ProxyService]:
    d = tmp_path_factory.mktemp("tls-proxy")
    mesh = d / "mesh.yaml"
    mesh.write_text(
        yaml.safe_dump(
            {
                "proxy": {
                    "port": 0,
                    "metrics_port": 0,
                    "store": f"sqlite:///{d / 'proxy.db'}",
                    "tls_cert": str(pki.server_cert),
                    "tls_key": str(pki.server_key),
                    "reload_on_change": False,
                },
                "primary": {
                    "name": "main",
                    "uris": [tls_metastore.uri],
                    "access_control": "read_and_write_and_create",
                    "tls_ca": str(pki.ca),
                },
                "federated": [
                    # the same TLS metastore, trusted through the wrong CA: must show as unavailable
                    {"name": "wrongca", "uris": [tls_metastore.uri], "tls_ca": str(pki.other_ca)},
                    # and reached without TLS at all
                    {"name": "plain", "uris": [tls_metastore.uri], "connect_timeout_ms": 3000},
                ],
            }
        )
    )
    svc = ProxyService(mesh).start()
    yield svc
    svc.stop()


def test_proxy_serves_tls_and_reaches_its_members_over_tls(tls_proxy: ProxyService, pki: Pki) -> None:
    with _client(tls_proxy.uri, client_context(str(pki.ca))) as c:
        c.raw.create_database(Database(name="through_tls_proxy"))
        assert "through_tls_proxy" in c.raw.get_all_databases()
    with _client(tls_proxy.uri.replace("127.0.0.1", "localhost"), client_context(str(pki.ca))) as c:
        assert "through_tls_proxy" in c.raw.get_all_databases()
    with pytest.raises(TApplicationException, match="the server requires TLS"):
        _client(tls_proxy.uri, None)
    ok, details = tls_proxy.health()
    members = details["members"]
    assert ok and members["main"]["status"] == "AVAILABLE"
    assert members["main"]["endpoint"].endswith("(TLS)")
    assert members["wrongca"]["status"] == "UNAVAILABLE"
    assert "certificate" in (members["wrongca"]["error"] or "").lower()
    assert members["plain"]["status"] == "UNAVAILABLE"
    assert "the server requires TLS" in (members["plain"]["error"] or ""), members["plain"]
    url = f"https://127.0.0.1:{tls_proxy.metrics_port}/health"
    with urllib.request.urlopen(url, context=client_context(str(pki.ca)), timeout=10) as r:
        assert json.loads(r.read())["members"]["main"]["status"] == "AVAILABLE"


@pytest.mark.skipif(not java_available(), reason=JAVA_SKIP_REASON + " (Spark's Hive client needs Java)")
def test_spark_hive_client_with_use_ssl(
    tls_metastore: MetastoreService, tls_proxy: ProxyService, pki: Pki, tmp_path: Path
) -> None:
    """Spark's built-in Hive 2.3 client, configured as Hive documents (use.SSL + a JKS
    truststore), creates, writes and reads tables through the TLS metastore and the TLS proxy."""
    assert pki.truststore is not None, "keytool (from the JDK) makes the truststore"
    conf = {
        "spark.hadoop.hive.metastore.use.SSL": "true",
        "spark.hadoop.hive.metastore.truststore.path": str(pki.truststore),
        "spark.hadoop.hive.metastore.truststore.password": TRUSTSTORE_PASSWORD,
    }
    targets = [
        ("metastore", tls_metastore.uri, "spark_tls_metastore"),
        ("proxy", tls_proxy.uri, "spark_tls_proxy"),
    ]
    seen = spark_roundtrip(tmp_path, targets, conf)
    assert seen["metastore"]["sum"] == 6 and seen["proxy"]["sum"] == 6
    assert "spark_tls_metastore" in seen["metastore"]["databases"]
    # the proxy's primary is the same TLS metastore: both databases are seen through it
    assert {"spark_tls_metastore", "spark_tls_proxy"} <= set(seen["proxy"]["databases"])


def test_replication_between_tls_zones(tmp_path: Path, pki: Pki, tls_metastore: MetastoreService) -> None:
    """A policy whose zones' metastores serve TLS replicates over TLS (CA file relative to mesh.yaml)."""
    from hivemesh.replication.config import load_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore

    target = _metastore(tmp_path / "b", pki)
    try:
        src_wh = str(tmp_path / "wh-a")
        with _client(tls_metastore.uri, client_context(str(pki.ca))) as c:
            c.raw.create_database(Database(name="repl_tls", locationUri=f"{src_wh}/repl_tls.db"))
        (tmp_path / "ca.pem").write_bytes(pki.ca.read_bytes())
        mesh = tmp_path / "mesh.yaml"
        mesh.write_text(
            yaml.safe_dump(
                {
                    "zones": {
                        "a": {"metastore": tls_metastore.uri, "warehouse": src_wh, "tls_ca": "ca.pem"},
                        "b": {
                            "metastore": target.uri,
                            "warehouse": str(tmp_path / "wh-b"),
                            "tls_ca": "ca.pem",
                        },
                    },
                    "replication": {
                        "store": "sqlite:///repl.db",
                        "policies": [{"name": "p", "source": "a", "target": "b", "databases": ["repl_tls"]}],
                    },
                }
            )
        )
        config = load_replication_config(mesh)
        assert config.zones["a"].tls_ca == str((tmp_path / "ca.pem").resolve())
        store = ReplicationStore(config.replication.store)
        try:
            assert run_once(config, store) == {}
        finally:
            store.dispose()
        with _client(target.uri, client_context(str(pki.ca))) as c:
            db = c.raw.get_database("repl_tls")
        assert db.name == "repl_tls"  # the target metastore is a fresh one: replicated over TLS
        # the same policy without the CA: the zone's metastore is reached, its certificate refused
        data = yaml.safe_load(mesh.read_text())
        for z in data["zones"].values():
            z.pop("tls_ca")
            z["tls"] = True
        mesh.write_text(yaml.safe_dump(data))
        store = ReplicationStore(load_replication_config(mesh).replication.store)
        try:
            failures = run_once(load_replication_config(mesh), store)
        finally:
            store.dispose()
        assert "certificate verify failed" in failures["p"]
    finally:
        target.stop()


def test_acid_cli_reaches_a_tls_metastore(tls_metastore: MetastoreService, pki: Pki) -> None:
    """``hivemesh acid files`` with ``--tls-ca`` talks to the TLS metastore (which answers that the
    table does not exist); without it the handshake fails, reported in one line."""
    from click.testing import CliRunner

    from hivemesh.cli import main

    runner = CliRunner()
    args = ["acid", "files", "nodb.t", "--metastore-uri", tls_metastore.uri]
    r = runner.invoke(main, [*args, "--tls-ca", str(pki.ca)])
    assert r.exit_code == 1 and "nodb" in r.output and "Traceback" not in r.output, r.output
    r = runner.invoke(main, args)
    assert r.exit_code == 1 and "cannot reach the metastore" in r.output, r.output
    assert "the server requires TLS" in r.output and len(r.output.strip().splitlines()) == 1, r.output
