"""Typed configuration of replication: the ``zones:`` and ``replication:`` sections of mesh.yaml.

A zone is a metastore and its warehouse. A policy replicates the databases (and optionally
tables) matching its regular expressions from a source zone to a target zone::

    zones:
      onprem: {metastore: "thrift://hms-onprem:9083", warehouse: "hdfs://nn:8020/warehouse"}
      cloud:  {metastore: "thrift://hms-cloud:9083",  warehouse: "s3a://lake/warehouse"}
    replication:
      store: "sqlite:///hivemesh-data/replication.db"
      policies:
        - name: sales-to-cloud
          source: onprem
          target: cloud
          databases: ["sales", "fin_.*"]
          tables: {sales: ["orders", "line.*"]}
          format: hive              # hive | delta
          data: copy                # copy | metadata_only
          paths: {"hdfs://nn:8020/warehouse": "s3a://lake/warehouse"}
          propagate_drops: true
      poll_interval_s: 0.25         # continuous mode: how often an idle policy polls its source
      batch_events: 500             # events per get_next_notification
      copy_threads: 8               # files copied at once on this machine
      spark_copy_threshold_mb: 10240  # larger copies run as a Spark job
      streaming_copy: auto          # open streaming files: append | rewrite | auto (append but on S3)
      timeout_s: 60                 # socket timeout of every metastore call
      rescan_interval_s: 3600       # continuous mode: compare and repair this often (default: never)

Validation reports every problem at once, each with its key (``replication.policies[0].source:
unknown zone 'onprem2'``). A database replicated in both directions between two zones is refused:
two writers of one database need coordinated writes, which replication does not do. So is a
policy whose target prefix (a ``paths`` value, or by default the target zone's warehouse) is, or
lies under, a directory of its source zone: locations are compared in one normal form, and the
rule is :mod:`hivemesh.replication.paths`'s.
"""

from __future__ import annotations

import os
import re
import ssl
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hivemesh.config import (
    DEFAULT_DATA_DIR,
    TLS_FILE_KEYS,
    ClientTls,
    ConfigError,
    anchor_paths,
    check_regexes,
    format_errors,
    lower_enum,
    read_yaml,
)
from hivemesh.kerberos import KerberosInitiator
from hivemesh.replication.paths import PolicyPaths
from hivemesh.storage.sql import normalize_url
from hivemesh.tls import client_context

__all__ = [
    "DataMode",
    "PolicyConfig",
    "ReplicationConfig",
    "ReplicationFile",
    "S3Options",
    "StreamingCopy",
    "TargetFormat",
    "Selection",
    "ZoneConfig",
    "anchor_file_paths",
    "load_replication_config",
    "parse_replication_config",
    "shared_databases",
    "unknown_zone",
]

_URI = re.compile(r"^thrift://[^\s:/,]+:\d{1,5}(,thrift://[^\s:/,]+:\d{1,5})*$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
DEFAULT_STORE = f"sqlite:///{DEFAULT_DATA_DIR}/replication.db"


def _matches(patterns: list[str], name: str) -> bool:
    """Whether ``name`` (any case) fully matches one of the regexes ``patterns``."""
    return any(re.fullmatch(p, name, re.IGNORECASE) for p in patterns)


class Selection(BaseModel):
    """What a replication policy and a live rule share: a ``name`` (letters, digits, '_' and '-'),
    the ``databases`` they select (regexes) and per database the ``tables`` (regexes; a database
    without an entry: all its tables), checked when validated, and the matching of names. Each
    subclass declares the three fields (its own descriptions and order)."""

    if TYPE_CHECKING:
        name: str
        databases: list[str]
        tables: dict[str, list[str]]

    @field_validator("name", check_fields=False)
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be letters, digits, '_' and '-' (not starting with '-')")
        return v

    @field_validator("databases", check_fields=False)
    @classmethod
    def _databases(cls, v: list[str]) -> list[str]:
        return check_regexes(v)

    @field_validator("tables", check_fields=False)
    @classmethod
    def _tables(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for patterns in v.values():
            check_regexes(patterns)
        return {db.lower(): patterns for db, patterns in v.items()}

    def matches_database(self, name: str) -> bool:
        """Whether database ``name`` (any case) is selected: it fully matches one of ``databases``."""
        return _matches(self.databases, name)

    def matches_table(self, database: str, table: str) -> bool:
        """Whether ``database.table`` is selected: its database matches and, when ``tables`` lists
        tables for that database, the table matches one of them (any case)."""
        if not self.matches_database(database):
            return False
        patterns = self.tables.get(database.lower())
        return patterns is None or _matches(patterns, table)


def shared_databases(a: list[str], b: list[str]) -> list[str]:
    """The database names both lists of regexes select, as far as the configuration shows them
    (sorted): a plain name of one matched by the other, or the same pattern in both. Two regexes
    that only overlap (``s.*`` and ``.*s``) are not found."""
    return sorted(
        {n for n in map(_literal, a) if n and _matches(b, n)}
        | {n for n in map(_literal, b) if n and _matches(a, n)}
        | (set(a) & set(b))
    )


def unknown_zone(key: str, zone: str, zones: dict[str, ZoneConfig]) -> str:
    """The problem line of a zone name that is no key of ``zones:``: ``key: unknown zone 'x'
    (known: a, b)``."""
    known = ", ".join(sorted(zones)) or "none defined under zones:"
    return f"{key}: unknown zone {zone!r} (known: {known})"


class StreamingCopy(StrEnum):
    """How open streaming files reach the target: ``append`` the new bytes (design B), ``rewrite``
    the readable prefix (design A), or ``auto``: append where the target storage can (local files,
    HDFS), rewrite on object stores."""

    AUTO = "auto"
    APPEND = "append"
    REWRITE = "rewrite"


class TargetFormat(StrEnum):
    """How a policy writes its target tables."""

    HIVE = "hive"  # the same Hive tables
    DELTA = "delta"  # Delta Lake tables (every Hive snapshot a Delta version)


class DataMode(StrEnum):
    """Whether a policy copies data files or only the metadata."""

    COPY = "copy"
    METADATA_ONLY = "metadata_only"


class S3Options(BaseModel):
    """How a zone reaches its S3 storage (``s3://``, ``s3a://`` and ``s3n://`` locations), as
    ``pyarrow.fs.S3FileSystem`` takes it; unset keys use the AWS defaults (environment, profile)."""

    model_config = ConfigDict(extra="forbid")

    endpoint_override: str | None = Field(None, description="host:port or URL of an S3-compatible service")
    scheme: str | None = Field(None, pattern="^(http|https)$", description="http or https")
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    connect_timeout: float | None = Field(
        None, gt=0, description="seconds to connect (default: the AWS SDK's)"
    )
    request_timeout: float | None = Field(
        None, gt=0, description="seconds per request (default: the AWS SDK's)"
    )


class ZoneConfig(ClientTls):
    """One zone: its metastore (``thrift://host:port``, several comma-separated for failover), the
    root of its warehouse (a URI or path, as the metastore's ``hive.metastore.warehouse.dir``; a
    plain path is a local ``file:`` directory, see :mod:`hivemesh.replication.paths` for how
    locations are compared) and how to reach its S3 storage."""

    model_config = ConfigDict(extra="forbid")

    metastore: str = Field(description="thrift://host:port[,thrift://host:port...]")
    warehouse: str = Field(
        min_length=1, description="warehouse root URI of the zone (a plain path is a local file: directory)"
    )
    s3: S3Options = Field(default_factory=S3Options, description="S3 connection of the zone's storage")

    kerberos_principal: str | None = Field(
        None,
        description="the zone metastore's hive.metastore.kerberos.principal (hive/_HOST@REALM, _HOST: "
        "the URI's host): the replicator authenticates with Kerberos",
    )
    kerberos_client_principal: str | None = Field(
        None, description="the replicator's own principal towards this zone (unset: the ticket cache's)"
    )
    kerberos_client_keytab: str | None = Field(
        None, description="keytab of kerberos_client_principal (unset: the ticket cache, kinit)"
    )

    def kerberos_initiator(self) -> KerberosInitiator | None:
        """The Kerberos client side for this zone's metastore (None: no Kerberos). Raises
        KerberosError when the replicator has no credentials."""
        if not self.kerberos_principal:
            return None
        return KerberosInitiator(
            self.kerberos_principal, self.kerberos_client_principal, self.kerberos_client_keytab
        )

    def tls_context(self) -> ssl.SSLContext | None:
        """The client-side TLS context for this zone's metastore (None: plaintext). Raises TlsError."""
        if not self.tls_enabled:
            return None
        return client_context(
            self.tls_ca, self.tls_cert, self.tls_key, verify_hostname=self.tls_verify_hostname
        )

    @field_validator("metastore")
    @classmethod
    def _uri(cls, v: str) -> str:
        if not _URI.match(v):
            raise ValueError("must be thrift://host:port (several separated by commas)")
        return v


class PolicyConfig(Selection):
    """One replication policy (see the module docstring for the meaning of each key)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique name: letters, digits, '_' and '-'")
    source: str = Field(description="zone replicated from")
    target: str = Field(description="zone replicated to")
    databases: list[str] = Field(min_length=1, description="regular expressions of database names")
    tables: dict[str, list[str]] = Field(
        default_factory=dict, description="per database, regular expressions of table names (default: all)"
    )
    format: TargetFormat = TargetFormat.HIVE
    data: DataMode = DataMode.COPY
    paths: dict[str, str] = Field(
        default_factory=dict,
        description="source location prefix -> target location prefix (default: warehouse -> warehouse); "
        "a target prefix inside the source zone is refused",
    )
    propagate_drops: bool = Field(True, description="drop on the target what the source dropped")

    @field_validator("format", "data", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return lower_enum(v)


class ReplicationConfig(BaseModel):
    """The ``replication:`` section: the replicator's own store (checkpoints and the file ledger;
    a SQLAlchemy URL, PostgreSQL in production) and the policies."""

    model_config = ConfigDict(extra="forbid")

    store: str = Field(DEFAULT_STORE, description="SQLAlchemy URL of the replicator's store")
    policies: list[PolicyConfig] = Field(default_factory=list)
    poll_interval_s: float = Field(
        0.25, gt=0, le=60, description="how often an idle policy asks its source for new events, seconds"
    )
    batch_events: int = Field(500, ge=1, le=100_000, description="events fetched per get_next_notification")
    copy_threads: int = Field(8, ge=1, le=256, description="files copied at once on this machine")
    spark_copy_threshold_mb: int = Field(
        10_240,
        ge=0,
        description="a copy of more than this many MiB runs as a Spark job (0: always, when Spark is set up)",
    )
    streaming_copy: StreamingCopy = Field(
        StreamingCopy.AUTO,
        description="how data files of open Hive streaming batches reach the target: append the new "
        "bytes (append), rewrite the readable prefix (rewrite), or append except on S3 (auto)",
    )
    spark_master: str | None = Field(
        None,
        description="Spark master of large copies (default: the SparkSession the process has, or local[*])",
    )
    timeout_s: float = Field(60.0, gt=0, description="socket timeout of every metastore call, seconds")
    rescan_interval_s: float | None = Field(
        None,
        gt=0,
        description="continuous mode: compare and repair each policy this often, seconds (catches "
        "writers that change files without a metastore event, such as Spark's INSERT into an "
        "existing partition of a converted table); unset: never",
    )

    @field_validator("store")
    @classmethod
    def _store(cls, v: str) -> str:
        try:
            normalize_url(v, "store")
        except ConfigError as e:
            raise ValueError(str(e).removeprefix("store: ")) from None
        return v

    def policy(self, name: str) -> PolicyConfig:
        """The policy called ``name``. Raises ConfigError naming the known policies."""
        for p in self.policies:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.policies) or "none"
        raise ConfigError(f"no replication policy {name!r} (known: {known})")


class ReplicationFile(BaseModel):
    """The parts of mesh.yaml replication reads: ``zones`` and ``replication`` (other sections are
    left to their own commands)."""

    model_config = ConfigDict(extra="ignore")

    zones: dict[str, ZoneConfig] = Field(default_factory=dict)
    replication: ReplicationConfig = Field(default_factory=ReplicationConfig)

    def paths(self, policy: PolicyConfig) -> PolicyPaths:
        """Where ``policy`` puts its tables on the target (:class:`hivemesh.replication.paths.
        PolicyPaths`: its ``paths``, else its source zone's warehouse -> its target zone's).
        Raises KeyError for a zone that is not defined (a validated file has none)."""
        return PolicyPaths.of(
            policy.name,
            policy.source,
            policy.target,
            policy.paths,
            self.zones[policy.source].warehouse,
            self.zones[policy.target].warehouse,
        )


def _literal(pattern: str) -> str | None:
    """The one name a regular expression matches, when it is a plain name."""
    return pattern if re.fullmatch(r"[A-Za-z0-9_]+", pattern) else None


def _cross_checks(cfg: ReplicationFile) -> list[str]:
    """Problems between keys: unknown zones, duplicate names, a zone replicated to itself, the same
    database replicated both ways, path mappings whose target lies in the source zone
    (:meth:`hivemesh.replication.paths.PolicyPaths.problems`), Delta without data."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, p in enumerate(cfg.replication.policies):
        key = f"replication.policies[{i}]"
        if p.name in seen:
            problems.append(f"{key}.name: {p.name!r} is also the name of policies[{seen[p.name]}]")
        seen.setdefault(p.name, i)
        for side in ("source", "target"):
            zone = getattr(p, side)
            if zone not in cfg.zones:
                problems.append(unknown_zone(f"{key}.{side}", zone, cfg.zones))
        if p.source == p.target:
            problems.append(f"{key}.target: the same zone as its source ({p.source!r})")
        elif p.source in cfg.zones and p.target in cfg.zones:
            problems.extend(cfg.paths(p).problems(key))
        if p.format == TargetFormat.DELTA and p.data == DataMode.METADATA_ONLY:
            problems.append(
                f"{key}.data: metadata_only cannot make Delta tables (their data is converted); use copy"
            )
    policies = cfg.replication.policies
    for i, a in enumerate(policies):
        for j in range(i + 1, len(policies)):
            b = policies[j]
            if (a.source, a.target) != (b.target, b.source):
                continue
            both = shared_databases(a.databases, b.databases)
            if both:
                problems.append(
                    f"replication.policies[{j}].databases: {', '.join(both)} would be replicated both "
                    f"ways between {a.source!r} and {a.target!r} (with policies[{i}] {a.name!r}); "
                    "replicating one database in both directions is not supported"
                )
    return problems


def parse_replication_config(data: dict[str, Any], source: str = "configuration") -> ReplicationFile:
    """Validate the ``zones``/``replication`` sections of a loaded mesh.yaml mapping.

    Raises ConfigError listing every problem, one per line, each with its key.
    """
    try:
        cfg = ReplicationFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(source, e)) from e
    problems = _cross_checks(cfg)
    if problems:
        raise ConfigError("\n".join([f"invalid configuration in {source}:", *(f"  {p}" for p in problems)]))
    return cfg


def load_replication_config(path: str | os.PathLike[str]) -> ReplicationFile:
    """Read and validate a mesh.yaml for replication. Raises ConfigError (unreadable file, invalid
    YAML, or every problem found, each with its key)."""
    raw = anchor_file_paths(read_yaml(path), Path(path).parent)
    return parse_replication_config(raw, str(path))


def anchor_file_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """A loaded mesh.yaml mapping with the files ``zones:`` and ``replication:`` name made absolute
    against ``base`` (the file's directory): the store's SQLite path, the zones' TLS and keytab
    files (:func:`hivemesh.config.relative_to`). Sections that are not mappings are left to the
    validation to refuse. Never raises."""
    raw = dict(raw)
    if isinstance(raw.get("replication"), dict):
        raw["replication"] = anchor_paths(raw["replication"], ("store",), base)
    if isinstance(raw.get("zones"), dict):
        keys = (*TLS_FILE_KEYS, "kerberos_client_keytab")
        raw["zones"] = {k: anchor_paths(z, keys, base) for k, z in raw["zones"].items()}
    return raw
