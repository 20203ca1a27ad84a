"""TLS contexts from PEM files, for the Thrift ports, the HTTP ports and the clients.

Hive switches TLS on with ``hive.metastore.use.SSL`` and reads Java keystores
(``hive.metastore.keystore.path`` on the server, ``hive.metastore.truststore.path`` on clients);
hivemesh reads the same material as PEM files: a certificate chain and its private key on a
server, a CA bundle on a client. A Java client gets the CA into a truststore with
``keytool -importcert -file ca.pem -keystore truststore.jks``.

Both sides speak TLS 1.2 or newer. A server given ``client_ca`` requires a client certificate
signed by it (mutual TLS), which Hive's own server does not offer but a load balancer may.
Errors (a missing file, a key that does not match its certificate, a file that is not PEM) raise
:class:`TlsError` naming the file.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from hivemesh.errors import HivemeshError

__all__ = ["HANDSHAKE_TIMEOUT_S", "TlsError", "client_context", "server_context"]

HANDSHAKE_TIMEOUT_S = 10.0
"""How long a server waits for a client to finish the TLS handshake, seconds (a client that
connects and says nothing must not hold a thread forever)."""


class TlsError(HivemeshError, ValueError):
    """TLS material cannot be used; the message names the file and the reason."""


def _readable(path: str, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise TlsError(f"{what} {path}: no such file")
    try:
        with p.open("rb") as f:
            f.read(1)
    except OSError as e:
        raise TlsError(f"{what} {path}: {e.strerror}") from e
    return str(p)


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None) -> None:
    cert_path = _readable(cert, "TLS certificate")
    key_path = _readable(key, "TLS private key") if key else None
    try:
        ctx.load_cert_chain(cert_path, key_path)
    except ssl.SSLError as e:
        reason = e.reason or str(e)
        if "KEY_VALUES_MISMATCH" in str(reason).upper():
            raise TlsError(f"TLS private key {key} does not belong to the certificate {cert}") from e
        raise TlsError(
            f"cannot load the TLS certificate {cert}"
            + (f" with the key {key}" if key else " (no key given: the file must hold the key too)")
            + f": {reason}"
        ) from e


def _load_ca(ctx: ssl.SSLContext, ca: str, what: str) -> None:
    path = _readable(ca, what)
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as e:
        raise TlsError(f"{what} {ca} holds no usable PEM certificate: {e.reason or e}") from e


def server_context(cert: str, key: str | None = None, client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side context: ``cert`` (PEM certificate chain, server's certificate first) and
    ``key`` (PEM private key; None when ``cert`` holds it). ``client_ca`` (PEM CA bundle) makes
    client certificates required and verified against it. Raises TlsError."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, cert, key)
    if client_ca:
        _load_ca(ctx, client_ca, "TLS client CA")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(
    ca: str | None = None,
    cert: str | None = None,
    key: str | None = None,
    verify_hostname: bool = True,
) -> ssl.SSLContext:
    """A client-side context verifying the server's certificate against ``ca`` (PEM CA bundle;
    None: the system's trusted CAs). ``verify_hostname=False`` accepts any name in a trusted
    certificate (what Hive's Java client does). ``cert``/``key``: a client certificate for servers
    that require one. Raises TlsError."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca:
        _load_ca(ctx, ca, "TLS CA")
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cert:
        _load_chain(ctx, cert, key)
    return ctx
