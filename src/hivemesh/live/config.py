"""Typed configuration of Live Hive: the ``live:`` section of mesh.yaml and the etcd cluster behind
the command log::

    zones:                                  # as for replication
      onprem: {metastore: "thrift://hms-onprem:9083", warehouse: "hdfs://nn:8020/warehouse"}
      cloud:  {metastore: "thrift://hms-cloud:9083",  warehouse: "s3a://lake/warehouse"}
    live:
      etcd:
        endpoints: ["https://etcd-a:2379", "https://etcd-b:2379", "https://etcd-c:2379"]
        prefix: /hivemesh/live          # every key of the log lies under it
        timeout_s: 5                    # budget of one log operation, all its attempts together
        max_request_bytes: 1572864      # the cluster's --max-request-bytes (etcd's default: 1.5 MiB)
        tls_ca: /etc/hivemesh/etcd-ca.pem
        tls_cert: /etc/hivemesh/etcd-client.pem
        tls_key: /etc/hivemesh/etcd-client-key.pem
      rules:
        - name: sales
          databases: ["sales", "fin_.*"]        # regexes, as replication policies
          tables: {sales: ["orders", "line.*"]}
          paths: {onprem: "hdfs://nn:8020/warehouse/live", cloud: "s3a://lake/warehouse/live"}
          acid_owner: onprem                    # owns txns, locks and write ids of transactional tables
      max_apply_lag_s: 30

Validation reports every problem at once, each with its key (``live.rules[0].acid_owner: unknown
zone 'onprem2' (known: cloud, onprem)``, ``endpoints[1]: must be http://host:port ...``;
:func:`hivemesh.config.format_errors` prints them).

**The safety rule.** A zone writes only its own files: no zone's rule path (in any rule) is, lies
under, or contains another zone's rule path or another zone's warehouse. Locations are compared in
one normal form, :func:`hivemesh.storage.locations.location_key` (on path boundaries: ``/w2`` is not
under ``/w``). A database has one rule, and is either live or replicated one way by a
``replication:`` policy of the same file, never both. Relative paths are refused (they would depend
on the working directory). What a configuration refuses is never guessed at.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hivemesh.config import (
    MULTI,
    TLS_FILE_KEYS,
    ConfigError,
    anchor_paths,
    format_errors,
    read_yaml,
)
from hivemesh.replication.config import (
    ReplicationConfig,
    Selection,
    ZoneConfig,
    anchor_file_paths,
    shared_databases,
    unknown_zone,
)
from hivemesh.storage.locations import (
    clean_location,
    join_location,
    key_relpath,
    location_key,
    location_relpath,
)

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "EtcdConfig",
    "LiveConfig",
    "LiveFile",
    "LiveRule",
    "load_live_config",
    "neutral",
    "parse_live_config",
    "to_zone",
]

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
        description="the cluster's --max-request-bytes: larger commands are stored in parts of this size",
    )
    max_command_bytes: int = Field(
        64 * 1024 * 1024,
        ge=4096,
        description="the largest command the log takes (a larger one is refused: split it)",
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


class LiveRule(Selection):
    """One rule of Live Hive: the databases (and optionally tables) every zone may write, the data
    root of each zone for them, and the zone that owns the transactions of their ACID tables.
    ``matches_database(name)``/``matches_table(db, table)``: full-match regexes, any case
    (:class:`hivemesh.replication.config.Selection`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="unique name: letters, digits, '_' and '-'")
    databases: list[str] = Field(min_length=1, description="regular expressions of database names")
    tables: dict[str, list[str]] = Field(
        default_factory=dict,
        description="per database (one the rule's databases match), regular expressions of table "
        "names (default: all)",
    )
    paths: dict[str, str] = Field(
        description="zone -> the data root of the rule's tables in that zone (an absolute path or URI), "
        "one for every zone; no zone's root may be, lie under or contain another zone's root or warehouse",
    )
    acid_owner: str = Field(
        description="the zone that owns the transactions, locks and write ids of transactional tables"
    )


class LiveConfig(BaseModel):
    """The ``live:`` section: where the command log lives (``etcd``), the rules, and how far a zone
    may fall behind the log."""

    model_config = ConfigDict(extra="forbid")

    etcd: EtcdConfig = Field(description="the etcd cluster of the command log")
    rules: list[LiveRule] = Field(default_factory=list, description="the live databases, one rule each")
    max_apply_lag_s: float = Field(
        30.0, gt=0, description="how far, in seconds, a zone may fall behind the command log"
    )
    store: str = Field(
        "sqlite:///hivemesh-data/live.db",
        description="SQLAlchemy URL of the zone's file ledger (which files it copied, so unchanged files "
        "are not checksummed again); relative SQLite paths are relative to the mesh.yaml",
    )
    copy_threads: int = Field(8, ge=1, le=256, description="files a zone copies at once")
    compact_interval_s: float = Field(
        300.0,
        ge=0,
        description="how often, in seconds, the log is compacted below the slowest zone's position "
        "(commands are removed at least one interval after they were appended); 0: never",
    )
    state_dir: str = Field(
        "hivemesh-data",
        description="directory of each zone's applier state file (live-<zone>.json: the last position "
        "applied and the marker of the command being applied); relative to the mesh.yaml",
    )

    def rule_for(self, database: str) -> LiveRule | None:
        """The rule database ``database`` (any case) is live under, or None when it is not live.
        A validated configuration has at most one rule per literal name; of two regexes that only
        overlap, the first rule wins."""
        return next((r for r in self.rules if r.matches_database(database)), None)


class LiveFile(BaseModel):
    """The parts of mesh.yaml Live Hive reads: ``zones``, ``live`` and, to refuse a database that
    is both live and replicated, ``replication`` (other sections are left to their own commands)."""

    model_config = ConfigDict(extra="ignore")

    zones: dict[str, ZoneConfig] = Field(default_factory=dict)
    live: LiveConfig
    replication: ReplicationConfig | None = None


def to_zone(rule: LiveRule, zone: str, relpath: str) -> str:
    """The location in ``zone`` of ``relpath``, a zone-neutral path relative to the rule's roots
    (``sales.db/orders``; ``""``: the zone's root itself): ``rule.paths[zone]`` joined with it.

    Raises KeyError for a zone the rule has no path for, ValueError for a ``relpath`` that is
    absolute or has ``.``/``..`` or empty segments (it could leave the zone's root)."""
    root = rule.paths[zone]
    if not relpath:
        return clean_location(root)
    if (
        relpath.startswith("/")
        or posixpath.normpath(relpath) != relpath
        or relpath.split("/")[0] in (".", "..")
    ):
        raise ValueError(f"not a relative path below the zone's root: {relpath!r}")
    return join_location(clean_location(root), relpath)


def neutral(rule: LiveRule, zone: str, location: str) -> str | None:
    """The zone-neutral relative path of ``location`` of ``zone`` (the inverse of :func:`to_zone`):
    ``""`` for the zone's root, ``sales.db/orders`` below it, None when the location is not under
    the zone's root (on path boundaries: ``/w2`` is not under ``/w``). Raises KeyError for a zone
    the rule has no path for."""
    return location_relpath(location, rule.paths[zone])


def _is_relative(location: str) -> bool:
    """A path that is not absolute: no scheme and no leading ``/`` (``~/x`` included: it depends
    on the user running the command)."""
    return ":" not in location.split("/", 1)[0] and not location.startswith("/")


def _overlap(a: str, b: str) -> str | None:
    """How location ``a`` stands to ``b``: ``"is"``, ``"lies under"``, ``"contains"`` or None."""
    ka, kb = location_key(a), location_key(b)
    if ka == kb:
        return "is"
    if key_relpath(ka, kb) is not None:
        return "lies under"
    if key_relpath(kb, ka) is not None:
        return "contains"
    return None


def _rule_problems(cfg: LiveFile, i: int, rule: LiveRule) -> list[str]:
    """The problems of one rule alone: its tables' databases, its zones, its paths' form."""
    key = f"live.rules[{i}]"
    out: list[str] = []
    for db in rule.tables:
        if not rule.matches_database(db):
            out.append(
                f"{key}.tables: database {db!r} matches none of the rule's databases "
                f"({', '.join(rule.databases)}); its table list would never apply"
            )
    for zone, location in rule.paths.items():
        if zone not in cfg.zones:
            out.append(unknown_zone(f"{key}.paths", zone, cfg.zones))
        if _is_relative(location):
            out.append(
                f"{key}.paths.{zone}: {location!r} is a relative path; write an absolute path or a URI "
                "(a relative one would depend on the working directory)"
            )
    missing = sorted(set(cfg.zones) - set(rule.paths))
    if missing:
        out.append(
            f"{key}.paths: no path for zone(s) {', '.join(missing)}; a rule names the data root of every zone"
        )
    if len(rule.paths) < 2:
        out.append(f"{key}.paths: names {len(rule.paths)} zone(s); Live Hive needs at least two zones")
    if rule.acid_owner not in cfg.zones:
        out.append(unknown_zone(f"{key}.acid_owner", rule.acid_owner, cfg.zones))
    return out


def _path_problems(cfg: LiveFile) -> list[str]:
    """Every rule path that is, lies under or contains another zone's rule path (in any rule) or
    another zone's warehouse."""
    out: list[str] = []
    roots: list[tuple[str, str, str]] = []  # (key, zone, location)
    for i, rule in enumerate(cfg.live.rules):
        for zone, location in rule.paths.items():
            if _is_relative(location):
                continue
            key = f"live.rules[{i}].paths.{zone}"
            for other_key, other_zone, other in roots:
                how = _overlap(location, other) if other_zone != zone else None
                if how:
                    out.append(
                        f"{key}: {location!r} {how} zone {other_zone!r}'s path {other!r} ({other_key}); "
                        f"zone {zone!r} would write zone {other_zone!r}'s files"
                    )
            for wzone, wcfg in cfg.zones.items():
                how = _overlap(location, wcfg.warehouse) if wzone != zone else None
                if how:
                    out.append(
                        f"{key}: {location!r} {how} zone {wzone!r}'s warehouse {wcfg.warehouse!r}; "
                        f"zone {zone!r} would write zone {wzone!r}'s files"
                    )
            roots.append((key, zone, location))
    return out


def _database_problems(cfg: LiveFile) -> list[str]:
    """Duplicate rule names, a database of two rules, a database both live and replicated."""
    out: list[str] = []
    rules = cfg.live.rules
    seen: dict[str, int] = {}
    for i, rule in enumerate(rules):
        if rule.name in seen:
            out.append(f"live.rules[{i}].name: {rule.name!r} is also the name of rules[{seen[rule.name]}]")
        seen.setdefault(rule.name, i)
        policies = cfg.replication.policies if cfg.replication else []
        others = [
            (f"in rules[{j}] {r.name!r}", r.databases, "a database has one rule")
            for j, r in enumerate(rules[:i])
        ]
        others += [
            (
                f"replicated by replication.policies[{j}] {p.name!r}",
                p.databases,
                "a database is either replicated one way or live, not both",
            )
            for j, p in enumerate(policies)
        ]
        for where, patterns, why in others:
            both = shared_databases(patterns, rule.databases)
            if both:
                out.append(f"live.rules[{i}].databases: {', '.join(both)} also {where}; {why}")
    return out


def parse_live_config(data: dict[str, Any], source: str = "configuration") -> LiveFile:
    """Validate the ``zones``/``live`` (and, when present, ``replication``) sections of a loaded
    mesh.yaml mapping.

    Raises ConfigError listing every problem, one per line, each with its key
    (``live.rules[0].acid_owner: unknown zone 'onprem2' (known: cloud, onprem)``).
    """
    try:
        cfg = LiveFile.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(source, e)) from e
    problems = [p for i, r in enumerate(cfg.live.rules) for p in _rule_problems(cfg, i, r)]
    problems += _path_problems(cfg) + _database_problems(cfg)
    if problems:
        raise ConfigError("\n".join([f"invalid configuration in {source}:", *(f"  {p}" for p in problems)]))
    return cfg


def load_live_config(path: str | os.PathLike[str]) -> LiveFile:
    """Read and validate a mesh.yaml for Live Hive. Files it names (the zones' and etcd's TLS
    files, the replication store, ``live.store`` and ``live.state_dir``, also when left at their
    defaults) are relative to its directory. Raises ConfigError (unreadable
    file, invalid YAML, or every problem found, each with its key)."""
    base = Path(path).parent
    raw = anchor_file_paths(read_yaml(path), base)
    live = raw.get("live")
    if isinstance(live, dict):
        defaults = {k: LiveConfig.model_fields[k].default for k in ("store", "state_dir")}
        live = anchor_paths({**defaults, **live}, ("store", "state_dir"), base)  # defaults too
        if isinstance(live.get("etcd"), dict):
            live = {**live, "etcd": anchor_paths(live["etcd"], TLS_FILE_KEYS, base)}
        raw["live"] = live
    return parse_live_config(raw, str(path))
