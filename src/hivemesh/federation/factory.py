"""Build members from configuration: the connector (Thrift, SSH-tunnelled Thrift, embedded
hivemesh, AWS Glue), the name rules and the access rules."""

from __future__ import annotations

import ssl
from typing import TypedDict

from hivemesh.federation.access import AccessRules
from hivemesh.federation.config import (
    DatabaseResolution,
    GlueConfig,
    MemberConfig,
    ProxySettings,
    SshTunnelConfig,
)
from hivemesh.federation.connectors.base import Connector
from hivemesh.federation.connectors.direct import DirectCatalog, embedded_catalog
from hivemesh.federation.connectors.glue import GlueCatalog
from hivemesh.federation.connectors.thrift import ThriftCatalog
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.naming import NameMap
from hivemesh.kerberos import KerberosInitiator
from hivemesh.tls import client_context


class _ThriftOptions(TypedDict):
    """The keyword arguments of :func:`thrift_catalog` that :func:`build_member` passes."""

    connect_timeout_s: float
    call_timeout_s: float
    framed: bool
    compact: bool
    tls: ssl.SSLContext | None
    kerberos: KerberosInitiator | None


def thrift_catalog(
    uris: list[str] | tuple[str, ...],
    ssh: SshTunnelConfig | None = None,
    *,
    connect_timeout_s: float = 2.0,
    call_timeout_s: float = 600.0,
    framed: bool = False,
    compact: bool = False,
    tls: ssl.SSLContext | None = None,
    kerberos: KerberosInitiator | None = None,
) -> ThriftCatalog:
    """A Thrift connector, through an SSH tunnel when ``ssh`` is given, over TLS when ``tls``
    (a client-side context) is given."""
    tunnel = None
    if ssh is not None:
        # paramiko (heavy, imported by the ssh module) loads only when a tunnel is configured
        from hivemesh.federation.connectors.ssh import SshTunnel

        tunnel = SshTunnel(
            ssh.route,
            private_keys=ssh.private_keys,
            known_hosts=ssh.known_hosts,
            port=ssh.port,
            localhost=ssh.localhost,
            timeout_ms=ssh.timeout_ms,
            strict_host_key_checking=ssh.strict_host_key_checking,
        )
    return ThriftCatalog(
        list(uris),
        connect_timeout_s=connect_timeout_s,
        call_timeout_s=call_timeout_s,
        framed=framed,
        compact=compact,
        tunnel=tunnel,
        tls=tls,
        kerberos=kerberos,
    )


def member_tls(cfg: MemberConfig) -> ssl.SSLContext | None:
    """The client-side TLS context of a Thrift member (None when it is reached in plaintext).
    Raises TlsError naming an unusable file."""
    if not cfg.tls:
        return None
    return client_context(cfg.tls_ca, cfg.tls_cert, cfg.tls_key, verify_hostname=cfg.tls_verify_hostname)


def member_kerberos(cfg: MemberConfig, settings: ProxySettings) -> KerberosInitiator | None:
    """The Kerberos client side of a Thrift member with a ``kerberos_principal`` (None otherwise):
    the proxy's own principal and keytab when configured, else the ticket cache. Raises
    KerberosError when no credentials can be had."""
    if not cfg.kerberos_principal:
        return None
    return KerberosInitiator(
        cfg.kerberos_principal, settings.kerberos_principal_name, settings.kerberos_keytab
    )


def glue_catalog(cfg: GlueConfig, name: str = "glue") -> DirectCatalog:
    """An AWS Glue Data Catalog connector (read side of the HMS interface); ``name`` (the member's)
    is what its error messages call it."""
    # Glue databases often have no location; Spark cannot describe a database without one, so
    # such databases are shown at a placeholder glue://<catalog>/<db>.db (remotes are read-only)
    placeholder = f"glue://{cfg.glue_account_id or cfg.region}"
    target = GlueCatalog(
        region=cfg.region,
        endpoint_url=cfg.glue_endpoint,
        account_id=cfg.glue_account_id,
        name=name,
        default_warehouse=placeholder,
    )
    where = cfg.glue_endpoint or f"region {cfg.region}"
    return DirectCatalog(
        target, "glue", f"glue {where}" + (f" catalog {cfg.glue_account_id}" if cfg.glue_account_id else "")
    )


def member_names(cfg: MemberConfig, role: str, settings: ProxySettings) -> NameMap:
    """How the names of member ``cfg`` (``role``: "primary" or "federated") look to clients: its
    prefix (PREFIXED resolution, federated members only), aliases and mapped databases and tables."""
    prefixed = settings.database_resolution is DatabaseResolution.PREFIXED
    return NameMap(
        prefix=(cfg.database_prefix or "") if (prefixed and role != "primary") else "",
        aliases=cfg.database_name_mapping,
        mapped_databases=cfg.mapped_databases,
        mapped_tables=cfg.mapped_tables,
    )


def member_access(cfg: MemberConfig) -> AccessRules:
    """What clients may do on member ``cfg`` (its access_control and writable databases)."""
    return AccessRules(cfg.name, cfg.access_control, cfg.writable_database_white_list)


def build_member(cfg: MemberConfig, role: str, settings: ProxySettings, indexes: MemberIndexes) -> Member:
    """A configured member (``role``: "primary" or "federated"), numbered by ``indexes``. Raises
    what opening an embedded store raises; remote connectors connect lazily."""
    extra_s = cfg.latency_ms / 1000
    connector: Connector
    read_connector = None
    if cfg.embedded is not None:
        connector = embedded_catalog(cfg.embedded.db, cfg.embedded.warehouse, cfg.embedded.txn_timeout_s)
    elif cfg.glue_config is not None:
        connector = glue_catalog(cfg.glue_config, cfg.name)
    else:
        opts: _ThriftOptions = dict(
            connect_timeout_s=cfg.connect_timeout_ms / 1000 + extra_s,
            call_timeout_s=cfg.call_timeout_ms / 1000 + extra_s,
            framed=cfg.framed,
            compact=cfg.compact,
            tls=member_tls(cfg),
            kerberos=member_kerberos(cfg, settings),
        )
        connector = thrift_catalog(cfg.uris, cfg.ssh_tunnel, **opts)
        if cfg.read_only_uris:
            read_connector = thrift_catalog(cfg.read_only_uris, cfg.ssh_tunnel, **opts)
    return Member(
        cfg.name,
        role,
        connector,
        member_names(cfg, role, settings),
        member_access(cfg),
        index=indexes.of(cfg.name, primary=role == "primary"),
        read_connector=read_connector,
        deadline_extra_s=extra_s,
        config=cfg,
    )
