"""Kerberos on the Thrift transport: SASL GSSAPI as Hive's ``hive.metastore.sasl.enabled`` speaks it.

The wire format is Thrift's SASL transport (``TSaslTransport``): during the negotiation each
message is ``[status: 1 byte][length: 4 bytes, big-endian][payload]`` with status START (1; its
payload is the mechanism name, ``GSSAPI``), OK (2), BAD (3), ERROR (4) or COMPLETE (5). The
GSSAPI mechanism follows RFC 4752: context tokens go back and forth until the security context is
established, then the server offers security layers in a wrapped 4-byte word and the client
answers with its choice (and an optional authorization id). hivemesh offers and chooses the
"no security layer" option, Hive's default (``hadoop.rpc.protection=authentication``): after the
negotiation every Thrift message travels in one frame, ``[length: 4 bytes][message]``, which is
Thrift's framed transport. Confidentiality comes from TLS (:mod:`hivemesh.tls`), not from SASL.

A failed negotiation is answered with a BAD message naming the reason, which a Java client reports
as ``TTransportException: Peer indicated failure: <reason>``, and the connection is closed.

Principals are written as Hive writes them: ``hive/_HOST@EXAMPLE.COM``, ``_HOST`` standing for the
host name: on a server its machine's fully qualified name (``socket.getfqdn()``, as Hadoop's
``SecurityUtil`` gives it; never the listen address), on a client the host of the metastore URI.

Needs the ``gssapi`` package (``pip install 'hivemesh[kerberos]'``, which builds against MIT
Kerberos' headers: Debian's ``libkrb5-dev``); it is imported only when Kerberos is configured.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hivemesh.errors import HivemeshError

__all__ = [
    "KerberosAcceptor",
    "KerberosError",
    "KerberosInitiator",
    "SaslError",
    "service_principal",
    "short_name",
]

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
MECHANISM = b"GSSAPI"
MAX_NEGOTIATION_BYTES = 1024 * 1024  # a Kerberos token with a large PAC is tens of KiB
NO_SECURITY_LAYER = 1  # RFC 4752 security layer bit: authentication only
MAX_BUFFER = 0xFFFFFF


class KerberosError(HivemeshError, ValueError):
    """Kerberos is configured but cannot be used: no ``gssapi`` package, an unreadable keytab, a
    principal without keys in it, no ticket. The message says which."""


class SaslError(HivemeshError, ConnectionError):
    """The SASL negotiation with the peer failed (wrong or missing ticket, a client that does not
    speak SASL, a peer that refused us); the message says why."""


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise KerberosError(
            "Kerberos needs the Python package gssapi: pip install 'hivemesh[kerberos]' "
            "(it builds against MIT Kerberos' headers, Debian's libkrb5-dev)"
        ) from e
    return gssapi


def service_principal(pattern: str, host: str) -> str:
    """``pattern`` with ``_HOST`` replaced by ``host`` in lower case (Hadoop's
    ``SecurityUtil.getServerPrincipal``): ``hive/_HOST@R`` + ``Meta1.corp`` -> ``hive/meta1.corp@R``.
    A wildcard or empty ``host`` stands for this machine's fully qualified name."""
    if "_HOST" not in pattern:
        return pattern
    if not host or host in ("0.0.0.0", "::", "*"):
        host = socket.getfqdn()
    return pattern.replace("_HOST", host.lower())


def short_name(principal: str) -> str:
    """The user name of a principal, as Hadoop's default ``auth_to_local`` rule gives it:
    ``alice@R`` -> ``alice``, ``hive/meta1.corp@R`` -> ``hive``."""
    return principal.split("@", 1)[0].split("/", 1)[0]


# ---------------------------------------------------------------- the wire
def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise SaslError("the peer closed the connection during the SASL negotiation")
        buf += chunk
    return bytes(buf)


def _send(sock: socket.socket, status: int, payload: bytes) -> None:
    sock.sendall(struct.pack(">BI", status, len(payload)) + payload)


def _recv(sock: socket.socket) -> tuple[int, bytes]:
    status, length = struct.unpack(">BI", _recv_exact(sock, 5))
    if status not in (START, OK, BAD, ERROR, COMPLETE):
        raise SaslError(
            f"not a SASL negotiation message (status byte {status:#04x}): "
            "the peer does not speak Kerberos/SASL on this port"
        )
    if length > MAX_NEGOTIATION_BYTES:
        raise SaslError(f"SASL negotiation message of {length} bytes refused (limit {MAX_NEGOTIATION_BYTES})")
    return status, _recv_exact(sock, length)


def _refuse(sock: socket.socket, reason: str) -> None:
    try:
        _send(sock, BAD, reason.encode("utf-8", "replace"))
    except OSError:
        pass


def _gss_reason(e: BaseException) -> str:
    text = getattr(e, "gen_message", None)
    if callable(text):
        try:
            major = text()
            minor = e.min_message() if hasattr(e, "min_message") else ""  # type: ignore[attr-defined]
            return f"{major}{': ' + minor if minor else ''}"
        except Exception:
            pass
    return str(e).strip() or type(e).__name__


# ---------------------------------------------------------------- server side
class KerberosAcceptor:
    """The server side: accepts clients holding a service ticket for ``principal`` (``_HOST``
    replaced by ``host``, by default this machine's fully qualified name, see
    :func:`service_principal`), whose keys are in ``keytab``.

    ``proxy_users``: user names (principals' short names) allowed to act for other users, as
    Hadoop's ``hadoop.proxyuser.*``: the principal of a hivemesh proxy in front of this metastore.

    Raises KerberosError at construction when the keytab cannot be read or holds no key of the
    principal (a misconfigured server must not start).
    """

    def __init__(self, principal: str, keytab: str, host: str = "", proxy_users: Iterable[str] = ()):
        gssapi = _gssapi()
        self.proxy_users = frozenset(proxy_users)
        self.principal = service_principal(principal, host)
        self.keytab = str(Path(keytab).expanduser())
        if not Path(self.keytab).is_file():
            raise KerberosError(f"Kerberos keytab {keytab}: no such file")
        try:
            name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
            self.creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": self.keytab})
            self.creds.inquire()  # fails now, not at the first client, when the key is missing
        except gssapi.exceptions.GSSError as e:
            raise KerberosError(
                f"cannot use the Kerberos principal {self.principal} from keytab {keytab}: {_gss_reason(e)}"
            ) from e

    def negotiate(self, sock: socket.socket) -> str:
        """Run the server side of the negotiation on ``sock`` (a blocking socket with a timeout);
        returns the client's principal (``alice@EXAMPLE.COM``). On failure the client is sent a
        BAD message with the reason, and SaslError is raised."""
        gssapi = _gssapi()
        try:
            status, mech = _recv(sock)
            if status != START:
                raise SaslError(f"expected a SASL START message, got status {status}")
            if mech.upper() != MECHANISM:
                raise SaslError(
                    f"unsupported SASL mechanism {mech.decode('utf-8', 'replace')!r} (only GSSAPI)"
                )
            ctx = gssapi.SecurityContext(creds=self.creds, usage="accept")
            stage = 0  # 0: context tokens, 1: security layer offered, 2: done
            while True:
                status, payload = _recv(sock)
                if status in (BAD, ERROR):
                    raise SaslError(f"the client gave up: {payload.decode('utf-8', 'replace')}")
                if status not in (OK, COMPLETE):
                    raise SaslError(f"unexpected SASL status {status}")
                if stage == 0:
                    out = ctx.step(payload) or b""
                    if ctx.complete:
                        stage = 1
                        if not out:  # nothing to send back: offer the security layers now
                            out = ctx.wrap(
                                struct.pack(">I", (NO_SECURITY_LAYER << 24) | MAX_BUFFER), False
                            ).message
                            stage = 2
                    _send(sock, OK, out)
                elif stage == 1:
                    offer = struct.pack(">I", (NO_SECURITY_LAYER << 24) | MAX_BUFFER)
                    _send(sock, OK, ctx.wrap(offer, False).message)
                    stage = 2
                else:
                    answer = ctx.unwrap(payload).message
                    if len(answer) < 4 or not (answer[0] & NO_SECURITY_LAYER):
                        raise SaslError("the client chose a SASL security layer this server does not offer")
                    _send(sock, COMPLETE, b"")
                    return str(ctx.initiator_name)
        except gssapi.exceptions.GSSError as e:
            reason = f"Kerberos authentication failed: {_gss_reason(e)}"
            _refuse(sock, reason)
            raise SaslError(reason) from e
        except SaslError as e:
            _refuse(sock, str(e))
            raise
        except (OSError, struct.error) as e:
            raise SaslError(f"connection failed during the SASL negotiation: {e}") from e


# ---------------------------------------------------------------- client side
class KerberosInitiator:
    """The client side: authenticates to metastores whose service principal is ``service``
    (``hive/_HOST@EXAMPLE.COM``, ``_HOST`` becoming the host of the URI dialled).

    The client's own credentials come from ``keytab`` for ``principal`` when both are given (kept
    in a private in-memory cache), else from the default ticket cache (``kinit``; ``KRB5CCNAME``).
    Raises KerberosError at construction when those credentials cannot be had.
    """

    def __init__(self, service: str, principal: str | None = None, keytab: str | None = None):
        gssapi = _gssapi()
        self.service = service
        self.principal = principal
        self._lock = threading.Lock()
        try:
            if keytab:
                if not Path(keytab).expanduser().is_file():
                    raise KerberosError(f"Kerberos keytab {keytab}: no such file")
                if not principal:
                    raise KerberosError("a client keytab needs its principal")
                name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
                store = {
                    "client_keytab": str(Path(keytab).expanduser()),
                    "ccache": f"MEMORY:hivemesh-{uuid.uuid4().hex}",
                }
                self.creds = gssapi.Credentials(name=name, usage="initiate", store=store)
            else:
                name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
                self.creds = gssapi.Credentials(name=name, usage="initiate")
            self.name = str(self.creds.name)
        except gssapi.exceptions.GSSError as e:
            who = principal or "the default principal"
            where = f"keytab {keytab}" if keytab else "the ticket cache (run kinit)"
            raise KerberosError(f"no Kerberos credentials for {who} in {where}: {_gss_reason(e)}") from e

    def negotiate(self, sock: socket.socket, host: str) -> None:
        """Authenticate on ``sock`` (connected to ``host``) as the client. Raises SaslError with
        the reason (the server's BAD message, or the local Kerberos error)."""
        gssapi = _gssapi()
        target = service_principal(self.service, host)
        try:
            with self._lock:  # acquiring a service ticket updates the shared credentials' cache
                ctx = gssapi.SecurityContext(
                    name=gssapi.Name(target, gssapi.NameType.kerberos_principal),
                    creds=self.creds,
                    usage="initiate",
                    flags=[gssapi.RequirementFlag.mutual_authentication],
                )
                token = ctx.step() or b""
            _send(sock, START, MECHANISM)
            _send(sock, OK, token)
            while True:
                status, payload = _recv(sock)
                if status == COMPLETE:
                    if not ctx.complete:
                        raise SaslError("the server ended the negotiation before Kerberos completed")
                    return
                if status in (BAD, ERROR):
                    raise SaslError(f"the metastore refused us: {payload.decode('utf-8', 'replace')}")
                if status != OK:
                    raise SaslError(f"unexpected SASL status {status}")
                if not ctx.complete:
                    _send(sock, OK, ctx.step(payload) or b"")
                    continue
                offer = ctx.unwrap(payload).message
                if len(offer) != 4 or not (offer[0] & NO_SECURITY_LAYER):
                    raise SaslError("the metastore offers only SASL security layers hivemesh does not speak")
                _send(
                    sock,
                    OK,
                    ctx.wrap(struct.pack(">I", (NO_SECURITY_LAYER << 24) | MAX_BUFFER), False).message,
                )
        except gssapi.exceptions.GSSError as e:
            reason = f"Kerberos authentication to {target} failed: {_gss_reason(e)}"
            _refuse(sock, reason)
            raise SaslError(reason) from e
        except (OSError, struct.error) as e:
            raise SaslError(f"connection failed during the SASL negotiation with {host}: {e}") from e
