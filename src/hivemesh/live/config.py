"""Typed configuration of the etcd cluster behind the command log::

    etcd:
      endpoints: ["https://etcd-a:2379", "https://etcd-b:2379", "https://etcd-c:2379"]
      prefix: /hivemesh/live          # every key of the log lies under it
      timeout_s: 5                    # budget of one log operation, all its attempts together
      max_request_bytes: 1572864      # the cluster's --max-request-bytes (etcd's default: 1.5 MiB)
      tls_ca: /etc/hivemesh/etcd-ca.pem
      tls_cert: /etc/hivemesh/etcd-client.pem
      tls_key: /etc/hivemesh/etcd-client-key.pem

Validation reports every problem at once, each with its key (``endpoints[1]: must be
http://host:port or https://host:port ...``; :func:`hivemesh.config.format_errors` prints them).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hivemesh.config import MULTI

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "EtcdConfig"]

DEFAULT_MAX_REQUEST_BYTES = 1_572_864
"""etcd's default ``--max-request-bytes`` (1.5 MiB)."""

_ENDPOINT = re.compile(r"^(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})/?$")
_PREFIX = re.compile(r"^(/[A-Za-z0-9._-]+)+$")


class EtcdConfig(BaseModel):
    """Where the command log lives: the etcd members' client URLs, the key prefix, the deadline of
    each operation and the TLS files (PEM paths; TLS needs ``https://`` endpoints)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: list[str] = Field(
        min_length=1, description="client URLs of the etcd members: http://host:port or https://host:port"
    )
    prefix: str = Field("/hivemesh/live", description="key prefix of the log: /name[/name...]")
    timeout_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="deadline of one log operation, all its attempts on every endpoint together, seconds",
    )
    max_request_bytes: int = Field(
        DEFAULT_MAX_REQUEST_BYTES,
        ge=4096,
        description="the cluster's --max-request-bytes: larger commands are refused before sending",
    )
    tls_ca: str | None = Field(None, description="PEM CA bundle that signed the members' certificates")
    tls_cert: str | None = Field(None, description="PEM client certificate (etcd's --client-cert-auth)")
    tls_key: str | None = Field(None, description="PEM private key of tls_cert (unset: tls_cert holds it)")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not _PREFIX.match(v):
            raise ValueError(
                "must be /name[/name...] (letters, digits, '.', '_', '-'; no trailing '/'), e.g. /hivemesh/live"
            )
        return v

    @model_validator(mode="after")
    def _check(self) -> EtcdConfig:
        problems = []
        seen: dict[str, int] = {}
        for i, url in enumerate(self.endpoints):
            m = _ENDPOINT.match(url)
            if not m or not 0 < int(m.group(3)) < 65536:
                problems.append(
                    f"endpoints[{i}]: must be http://host:port or https://host:port, an etcd client URL "
                    f"(got {url!r})"
                )
            elif url.rstrip("/") in seen:
                problems.append(f"endpoints[{i}]: {url} is also endpoints[{seen[url.rstrip('/')]}]")
            seen.setdefault(url.rstrip("/"), i)
        schemes = {u.split(":", 1)[0] for u in self.endpoints}
        if not problems and len(schemes) > 1:
            problems.append("endpoints: mixes http:// and https://; all members are reached the same way")
        if not problems and not self.tls_enabled and (self.tls_ca or self.tls_cert):
            key = "tls_ca" if self.tls_ca else "tls_cert"
            problems.append(f"{key}: set, but the endpoints are http://; TLS needs https:// endpoints")
        if self.tls_key and not self.tls_cert:
            problems.append("tls_key: set without tls_cert (the certificate it belongs to)")
        if problems:
            raise ValueError(MULTI + "\n".join(problems))
        # a trailing '/' is dropped (frozen model: set through the instance dict)
        self.__dict__["endpoints"] = [u.rstrip("/") for u in self.endpoints]
        return self

    @property
    def tls_enabled(self) -> bool:
        """True when the members are reached over TLS (``https://`` endpoints)."""
        return self.endpoints[0].startswith("https://")

    def describe(self) -> str:
        """``etcd <endpoint>,<endpoint>...``: how error messages name the cluster."""
        return "etcd " + ",".join(self.endpoints)
