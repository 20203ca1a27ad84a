"""Typed configuration of ``hivemesh proxy``: the proxy, its primary and its federated metastores.

The settings are Waggle Dance's, with the same meaning, in snake_case (the README maps each to
Waggle Dance's name). Sections of mesh.yaml: ``proxy:``, ``primary:``, ``federated:``.
Validation errors name the key and say what was expected (pydantic).
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hivemesh.config import (
    DEFAULT_DATA_DIR,
    MULTI,
    TLS_FILE_KEYS,
    ClientTls,
    ConfigError,
    LogFormat,
    LogLevel,
    ServerSecurity,
    anchor_paths,
    check_regexes,
    env_overrides,
    format_errors,
    lower_enum,
    read_yaml,
    relative_to,
)
from hivemesh.kerberos import service_principal


class DatabaseResolution(StrEnum):
    """How database names pick a member (Waggle Dance ``database-resolution``)."""

    MANUAL = "manual"  # each member lists its databases (mapped_databases); names are unique
    PREFIXED = "prefixed"  # a member's databases appear as <database_prefix><name>


class AccessControl(StrEnum):
    """What clients may do on a member (Waggle Dance ``access-control-type``)."""

    READ_ONLY = "read_only"
    READ_AND_WRITE_AND_CREATE = "read_and_write_and_create"
    READ_AND_WRITE_ON_DATABASE_WHITELIST = "read_and_write_on_database_whitelist"
    READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST = "read_and_write_and_create_on_database_whitelist"


FEDERATED_ACCESS = (AccessControl.READ_ONLY, AccessControl.READ_AND_WRITE_ON_DATABASE_WHITELIST)

_URI = re.compile(r"^thrift://[^\s:/]+:\d{1,5}$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


class SshTunnelConfig(BaseModel):
    """An SSH tunnel to a member's metastore (Waggle Dance ``metastore-tunnel``).

    ``route``: hops from here to the host that can reach the metastore,
    ``"user@bastion -> user@emr-master"``; a hop may name its port, ``user@host:2222``.
    """

    model_config = ConfigDict(extra="forbid")

    route: str = Field(description="hops 'user@host[:port] -> user@host[:port]'")
    private_keys: list[str] = Field(default_factory=list, description="private key files tried on every hop")
    known_hosts: str | None = Field(
        None, description="known_hosts file every hop's host key is checked against"
    )
    port: int = Field(22, ge=1, le=65535, description="SSH port of hops that do not name one")
    localhost: str = Field("127.0.0.1", description="local address the tunnel listens on")
    timeout_ms: int = Field(60000, ge=1, description="SSH connect timeout, ms")
    strict_host_key_checking: bool = Field(True, description="refuse hosts missing from known_hosts")

    @field_validator("route")
    @classmethod
    def _route(cls, v: str) -> str:
        hops = [h.strip() for h in v.split("->")]
        for hop in hops:
            if not re.fullmatch(r"[^@\s]+@[^@\s:]+(:\d{1,5})?", hop):
                raise ValueError(f"hop {hop!r} must be user@host or user@host:port")
        return " -> ".join(hops)


class GlueConfig(BaseModel):
    """AWS Glue Data Catalog as a member (Waggle Dance ``glue-config``)."""

    model_config = ConfigDict(extra="forbid")

    glue_account_id: str | None = Field(
        None, description="catalog id (the AWS account); default: the caller's"
    )
    glue_endpoint: str | None = Field(
        None, description="endpoint URL, e.g. https://glue.eu-west-1.amazonaws.com"
    )
    region: str = Field("us-east-1", description="AWS region")


class EmbeddedConfig(BaseModel):
    """A hivemesh metastore run inside the proxy process (no Thrift hop)."""

    model_config = ConfigDict(extra="forbid")

    db: str = Field(
        f"sqlite:///{DEFAULT_DATA_DIR / 'metastore.db'}", description="SQLAlchemy URL of its store"
    )
    warehouse: str = Field(str(DEFAULT_DATA_DIR / "warehouse"), description="root of managed tables")
    txn_timeout_s: float = Field(300, gt=0, description="hive.txn.timeout, seconds")


class MemberConfig(ClientTls):
    """One metastore of the federation. Exactly one of ``uris``, ``glue_config``, ``embedded``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique member name (metrics, logs, errors)")
    uris: list[str] = Field(
        default_factory=list, description="thrift://host:port of the metastore, tried in order"
    )
    embedded: EmbeddedConfig | None = None
    glue_config: GlueConfig | None = None
    ssh_tunnel: SshTunnelConfig | None = None
    database_prefix: str | None = Field(None, description="PREFIXED mode: prefix of this member's databases")
    access_control: AccessControl = AccessControl.READ_ONLY
    writable_database_white_list: list[str] = Field(
        default_factory=list, description="regexes of databases writable under *_on_database_whitelist"
    )
    mapped_databases: list[str] | None = Field(
        None, description="regexes of the databases exposed (None: all); MANUAL mode: the ones it owns"
    )
    mapped_tables: dict[str, list[str]] = Field(
        default_factory=dict, description="database -> regexes of the tables exposed (others are hidden)"
    )
    database_name_mapping: dict[str, str] = Field(
        default_factory=dict, description="real database name -> alias; both names work"
    )
    latency_ms: int = Field(0, ge=0, description="added to this member's timeouts, ms")
    read_only_uris: list[str] = Field(
        default_factory=list, description="primary only: a read-only endpoint for reads"
    )
    framed: bool = False
    compact: bool = False
    kerberos_principal: str | None = Field(
        None,
        description="the member's hive.metastore.kerberos.principal (hive/_HOST@REALM, _HOST: the URI's "
        "host): the proxy authenticates with Kerberos, as proxy.kerberos_principal when set, else from "
        "the ticket cache",
    )
    connect_timeout_ms: int = Field(2000, ge=1, description="TCP connect timeout, ms (plus latency_ms)")
    call_timeout_ms: int = Field(
        600000, ge=1, description="socket timeout of a routed call, ms (plus latency_ms)"
    )

    _access = field_validator("access_control", mode="before")(lambda cls, v: lower_enum(v))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be letters, digits, '_' or '-'")
        return v

    @field_validator("uris", "read_only_uris")
    @classmethod
    def _uris(cls, v: list[str]) -> list[str]:
        for u in v:
            if not _URI.match(u):
                raise ValueError(f"{u!r} is not thrift://host:port")
        return v

    @field_validator("writable_database_white_list")
    @classmethod
    def _wl(cls, v: list[str]) -> list[str]:
        return check_regexes(v)

    @field_validator("mapped_databases")
    @classmethod
    def _md(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_regexes(v)

    @field_validator("mapped_tables")
    @classmethod
    def _mt(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for regexes in v.values():
            check_regexes(regexes)
        return {k.lower(): regexes for k, regexes in v.items()}

    @field_validator("database_name_mapping")
    @classmethod
    def _dnm(cls, v: dict[str, str]) -> dict[str, str]:
        out = {k.lower(): a.lower() for k, a in v.items()}
        if len(set(out.values())) != len(out):
            raise ValueError("two databases are mapped to the same alias")
        return out

    @model_validator(mode="after")
    def _one_kind(self) -> MemberConfig:
        kinds = [
            k
            for k, v in (("uris", self.uris), ("embedded", self.embedded), ("glue_config", self.glue_config))
            if v
        ]
        if len(kinds) != 1:
            raise ValueError(
                f"member {self.name!r} needs exactly one of uris, embedded, glue_config (got {kinds or 'none'})"
            )
        if self.ssh_tunnel is not None and not self.uris:
            raise ValueError(f"member {self.name!r}: ssh_tunnel needs uris")
        self.tls = self.tls_enabled
        if self.tls and not self.uris:
            raise ValueError(f"member {self.name!r}: tls applies to uris (Thrift) members only")
        if self.kerberos_principal and not self.uris:
            raise ValueError(
                f"member {self.name!r}: kerberos_principal applies to uris (Thrift) members only"
            )
        if self.tls_key and not self.tls_cert:
            raise ValueError(f"member {self.name!r}: tls_key needs tls_cert")
        return self


_BOOL_WORDS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


class ProxySettings(ServerSecurity):
    """Settings of the proxy itself (section ``proxy:``). Its ``kerberos_principal`` is also its
    identity towards Kerberized members."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=9083, ge=0, le=65535, description="Thrift port (0 = any free port)")
    database_resolution: DatabaseResolution = DatabaseResolution.PREFIXED
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="HTTP port of /metrics and /health"
    )
    store: str = Field(
        default=f"sqlite:///{DEFAULT_DATA_DIR / 'proxy.db'}",
        description="SQLAlchemy URL of the proxy's own store (remotes)",
    )
    status_polling_delay_ms: int = Field(
        default=5000, ge=100, description="health poll interval of members, ms"
    )
    databases_timeout_ms: int = Field(
        default=8000, ge=1, description="per-member deadline of get_all_databases/get_databases"
    )
    table_meta_timeout_ms: int = Field(default=400, ge=1, description="per-member deadline of get_table_meta")
    functions_timeout_ms: int = Field(
        default=1000, ge=1, description="per-member deadline of get_all_functions"
    )
    remote_refresh_ms: int = Field(
        default=5000, ge=100, description="how often remotes are re-read from the store, ms"
    )
    reload_on_change: bool = Field(
        default=True, description="reload the config file when it changes (and on SIGHUP)"
    )
    audit_log: bool | str = Field(
        default=True,
        description="one log line per call (user, peer, method, member, ms, result): true = in the "
        "normal log, false = none, a file path = to that file only (at INFO whatever log_level is)",
    )
    log_level: LogLevel = "INFO"
    log_format: LogFormat = Field(
        default="text", description="log lines: text, or json (one object per line)"
    )
    framed: bool = False
    compact: bool = False
    max_message_mb: int = Field(default=100, ge=1, le=2048)

    @property
    def kerberos_principal_name(self) -> str | None:
        """The proxy's own principal as a client (``_HOST`` becoming this machine's fully qualified
        name, whatever address the proxy listens on)."""
        if not self.kerberos_principal:
            return None
        return service_principal(self.kerberos_principal, "")

    _res = field_validator("database_resolution", mode="before")(lambda cls, v: lower_enum(v))

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    _fmt = field_validator("log_format", mode="before")(lambda cls, v: lower_enum(v))

    @field_validator("audit_log", mode="before")
    @classmethod
    def _audit_sink(cls, v: Any) -> Any:
        """``true``/``false`` (as an environment variable spells them) or a file path."""
        if isinstance(v, str):
            if v.strip().lower() in _BOOL_WORDS:
                return _BOOL_WORDS[v.strip().lower()]
            if not v.strip():
                raise ValueError("give true, false or the path of the audit log file")
        return v


class FederationConfig(BaseModel):
    """``proxy`` + ``primary`` + ``federated``, checked together."""

    model_config = ConfigDict(extra="forbid")

    proxy: ProxySettings = Field(default_factory=ProxySettings)
    primary: MemberConfig
    federated: list[MemberConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> FederationConfig:
        """Checks across members; every problem is reported (one per line, each with its key)."""
        problems: list[str] = []
        names = [self.primary.name] + [m.name for m in self.federated]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            where = ["primary" if i == 0 else f"federated[{i - 1}]" for i, n in enumerate(names) if n == dup]
            problems.append(f"{', '.join(where)}.name: member names must be unique ({dup!r} used twice)")
        prefixed = self.proxy.database_resolution is DatabaseResolution.PREFIXED
        seen: dict[str, int] = {}
        for i, m in enumerate(self.federated):
            key = f"federated[{i}]"
            if m.access_control not in FEDERATED_ACCESS:
                problems.append(
                    f"{key}.access_control: must be read_only or read_and_write_on_database_whitelist for a "
                    f"federated member (got {m.access_control.value})"
                )
            if m.read_only_uris:
                problems.append(f"{key}.read_only_uris: for the primary only")
            if prefixed:
                if m.database_prefix is None:
                    m.database_prefix = f"{m.name}_"
                m.database_prefix = m.database_prefix.lower()
                if not m.database_prefix:
                    problems.append(f"{key}.database_prefix: must not be empty")
                elif m.database_prefix in seen:
                    problems.append(
                        f"{key}.database_prefix: {m.database_prefix!r} is also federated[{seen[m.database_prefix]}]'s"
                    )
                else:
                    seen[m.database_prefix] = i
            elif m.mapped_databases is None:
                problems.append(f"{key}.mapped_databases: required with MANUAL database_resolution")
        if self.primary.database_prefix:
            # Waggle Dance allows a primary prefix; we keep the primary's names as they are
            problems.append("primary.database_prefix: not supported; the primary's names are kept")
        if problems:
            raise ValueError(MULTI + "\n".join(problems))
        return self


def _anchor_member(member: Any, base: Path) -> Any:
    """A member read from the file with its embedded store/warehouse, TLS and SSH key files made
    relative to the file's directory."""
    if not isinstance(member, dict):
        return member
    out = anchor_paths(member, TLS_FILE_KEYS, base)
    out["embedded"] = anchor_paths(member.get("embedded"), ("db", "warehouse"), base)
    tunnel = member.get("ssh_tunnel")
    if isinstance(tunnel, dict):
        tunnel = anchor_paths(tunnel, ("known_hosts",), base)
        if isinstance(tunnel.get("private_keys"), list):
            tunnel["private_keys"] = [relative_to(base, k) for k in tunnel["private_keys"]]
        out["ssh_tunnel"] = tunnel
    return {k: v for k, v in out.items() if v is not None or k in member}


def load_federation_config(path: str | os.PathLike[str], **overrides: Any) -> FederationConfig:
    """Read ``proxy``/``primary``/``federated`` from a mesh.yaml. ``overrides``: ``proxy`` settings
    given on the command line (``None`` values ignored). Raises ConfigError listing every problem."""
    raw = read_yaml(path)
    base = Path(path).parent  # paths written in the file are relative to the file
    section = dict(anchor_paths(raw.get("proxy"), ("store", *TLS_FILE_KEYS), base) or {})
    audit = section.get("audit_log")
    if isinstance(audit, str) and audit.strip().lower() not in _BOOL_WORDS:
        section["audit_log"] = relative_to(base, audit)  # a file path, relative to the file
    section.update(env_overrides("proxy", ProxySettings))  # HIVEMESH_PROXY_<OPTION>
    section.update({k: v for k, v in overrides.items() if v is not None})
    body = {
        "proxy": section,
        "primary": _anchor_member(raw.get("primary"), base),
        "federated": [_anchor_member(m, base) for m in raw.get("federated") or []],
    }
    if body["primary"] is None:
        raise ConfigError(f"{path}: a proxy needs a primary: section (name, uris or embedded)")
    try:
        return FederationConfig.model_validate(body)
    except ValidationError as e:
        raise ConfigError(format_errors(str(path), e)) from e
