"""A throw-away PKI for TLS tests: a CA, a server certificate for localhost/127.0.0.1, a client
certificate, a certificate from another CA, and a Java truststore holding the CA (``keytool``)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

TRUSTSTORE_PASSWORD = "changeit"


@dataclass(frozen=True)
class Pki:
    """PEM files (and a JKS truststore when a JDK is here) in one directory."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting only it must fail
    other_cert: Path  # a server certificate signed by other_ca
    other_key: Path
    truststore: Path | None  # JKS with ``ca``, password TRUSTSTORE_PASSWORD
    dual_cert: Path  # a localhost certificate for server and client auth (etcd's gateway dials itself)
    dual_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, name: str, server: bool, client: bool = False
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH] * server
                + [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH] * (client or not server)
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """Write a fresh PKI into ``directory`` (created)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca = _ca("hivemesh test CA")
    skey, scert = _leaf(ca_key, ca, "localhost", server=True)
    ckey, ccert = _leaf(ca_key, ca, "hivemesh-client", server=False)
    oca_key, oca = _ca("some other CA")
    okey, ocert = _leaf(oca_key, oca, "localhost", server=True)
    dkey, dcert = _leaf(ca_key, ca, "localhost", server=True, client=True)
    truststore = None
    keytool = shutil.which("keytool")
    if keytool:
        truststore = d / "truststore.jks"
        truststore.unlink(missing_ok=True)
        subprocess.run(
            [
                keytool, "-importcert", "-noprompt", "-alias", "hivemesh-test-ca", "-file",
                str(_write_cert(ca, d / "ca.pem")), "-keystore", str(truststore), "-storetype", "JKS",
                "-storepass", TRUSTSTORE_PASSWORD,
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
    return Pki(
        ca=_write_cert(ca, d / "ca.pem"),
        server_cert=_write_cert(scert, d / "server.pem"),
        server_key=_write_key(skey, d / "server.key"),
        client_cert=_write_cert(ccert, d / "client.pem"),
        client_key=_write_key(ckey, d / "client.key"),
        other_ca=_write_cert(oca, d / "other-ca.pem"),
        other_cert=_write_cert(ocert, d / "other.pem"),
        other_key=_write_key(okey, d / "other.key"),
        truststore=truststore,
        dual_cert=_write_cert(dcert, d / "dual.pem"),
        dual_key=_write_key(dkey, d / "dual.key"),
    )
