"""Connecting to a zone's metastore, as a replication policy does."""

from __future__ import annotations

from hivemesh.client.metastore import MetastoreClient
from hivemesh.replication.config import ZoneConfig
from hivemesh.replication.errors import ReplicationError

__all__ = ["connect_zone", "zone_client"]


def zone_client(zone: ZoneConfig, timeout_s: float, retries: int = 3) -> MetastoreClient:
    """A connected client of ``zone``'s metastore, over TLS and with Kerberos as the zone's settings
    say (``timeout_s``: socket timeout, seconds). Raises what MetastoreClient raises (transport
    errors), TlsError or KerberosError."""
    return MetastoreClient(
        zone.metastore,
        timeout_s=timeout_s,
        retries=retries,
        tls=zone.tls_context(),
        kerberos=zone.kerberos_initiator(),
    )


def connect_zone(policy: str, name: str, zone: ZoneConfig, timeout_s: float) -> MetastoreClient:
    """:func:`zone_client` for policy ``policy``'s zone ``name``; raises ReplicationError naming
    the policy, the zone and its metastore when it cannot be reached."""
    try:
        return zone_client(zone, timeout_s)
    except Exception as e:
        raise ReplicationError(
            f"policy {policy}: zone {name!r} metastore {zone.metastore} is unreachable: {e}"
        ) from e
