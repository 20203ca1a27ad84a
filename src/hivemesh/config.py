"""Typed configuration of ``hivemesh metastore`` (the ``metastore:`` section of ``mesh.yaml``).

Precedence, highest first: command-line options, environment variables
``HIVEMESH_<SECTION>_<OPTION>`` named after the option (``HIVEMESH_METASTORE_TXN_TIMEOUT`` for
``--txn-timeout``; the YAML key's spelling ``..._TXN_TIMEOUT_S`` works too; an unknown one is an
error: :func:`env_overrides`), the YAML file given with ``--config`` (relative paths in it are
relative to it), built-in defaults. Validation errors name the offending key and say what was
expected (pydantic). The proxy's section is read by :mod:`hivemesh.federation.config` with the
same rule (``HIVEMESH_PROXY_<OPTION>``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hivemesh.errors import HivemeshError

DEFAULT_DATA_DIR = Path("hivemesh-data")
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["text", "json"]


class ConfigError(HivemeshError, ValueError):
    """A configuration file or value is invalid; the message lists every problem with its key."""


class ServerSecurity(BaseModel):
    """TLS and Kerberos of a server's ports: the settings ``metastore:`` and ``proxy:`` share."""

    model_config = ConfigDict(extra="forbid")

    tls_cert: str | None = Field(
        default=None,
        description="hive.metastore.use.SSL: PEM certificate chain; when set, the Thrift port and "
        "the metrics port speak TLS only",
    )
    tls_key: str | None = Field(
        default=None, description="PEM private key of tls_cert (unset: tls_cert holds it)"
    )
    tls_client_ca: str | None = Field(
        default=None,
        description="PEM CA bundle: when set, clients must present a certificate it signed (mutual TLS)",
    )
    kerberos_principal: str | None = Field(
        default=None,
        description="hive.metastore.kerberos.principal, e.g. hive/_HOST@EXAMPLE.COM (_HOST: this "
        "host's name): when set, clients must authenticate with Kerberos (hive.metastore.sasl.enabled)",
    )
    kerberos_keytab: str | None = Field(
        default=None,
        description="hive.metastore.kerberos.keytab.file: the keytab holding kerberos_principal's keys",
    )

    @model_validator(mode="after")
    def _complete(self) -> ServerSecurity:
        if (self.tls_key or self.tls_client_ca) and not self.tls_cert:
            raise ValueError("tls_key and tls_client_ca need tls_cert (the server's certificate)")
        if bool(self.kerberos_principal) != bool(self.kerberos_keytab):
            raise ValueError("kerberos_principal and kerberos_keytab go together")
        return self


class ClientTls(BaseModel):
    """How a client reaches a metastore serving TLS: the settings a proxy member and a
    replication zone share (``tls_enabled`` tells whether any is on)."""

    model_config = ConfigDict(extra="forbid")

    tls: bool = Field(
        False,
        description="hive.metastore.use.SSL: reach the metastore over TLS (on when tls_ca or tls_cert is set)",
    )
    tls_ca: str | None = Field(
        None, description="PEM CA bundle that signed the metastore's certificate (unset: system CAs)"
    )
    tls_cert: str | None = Field(None, description="PEM client certificate, for a metastore requiring one")
    tls_key: str | None = Field(None, description="PEM private key of tls_cert (unset: tls_cert holds it)")
    tls_verify_hostname: bool = Field(
        True, description="the certificate must name the host of the URI (Hive's own client does not check)"
    )

    @property
    def tls_enabled(self) -> bool:
        """True when the metastore is reached over TLS."""
        return bool(self.tls or self.tls_ca or self.tls_cert)


class MetastoreConfig(ServerSecurity):
    """Settings of ``hivemesh metastore`` (section ``metastore:`` of mesh.yaml)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(9083, ge=0, le=65535, description="Thrift port (0 = any free port)")
    db: str = Field(
        f"sqlite:///{DEFAULT_DATA_DIR / 'metastore.db'}",
        description="SQLAlchemy URL of the metadata store: sqlite:///path or postgresql+psycopg://...",
    )
    warehouse: str = Field(
        str(DEFAULT_DATA_DIR / "warehouse"),
        description="default root of managed databases and tables (a path or a URI)",
    )
    allowed_locations: list[str] = Field(
        default_factory=list,
        description="roots under which database, table and partition locations may be (paths or URIs; "
        "the warehouse always is); a location elsewhere is refused with MetaException. Default: anywhere",
    )

    workers: int | None = Field(
        None,
        ge=1,
        le=256,
        description="processes serving the port (one listening socket, the kernel spreading "
        "connections); unset: the CPU count on PostgreSQL, 1 on SQLite (whose writers queue anyway)",
    )
    db_pool_size: int | None = Field(
        None,
        ge=1,
        le=500,
        description="PostgreSQL connections each metastore process keeps open, plus up to 4 more under "
        "load; workers x (db_pool_size + 4) must fit the server's max_connections (PostgreSQL's "
        "default: 100; a warning at start says when it may not). Calls beyond it wait for a "
        "connection. Unset: 12, fewer when needed to keep workers x (db_pool_size + 4) within 80",
    )
    log_level: LogLevel = "INFO"
    log_format: LogFormat = Field(
        "text", description="log lines on stderr: text, or json (one object per line)"
    )
    framed: bool = Field(False, description="framed Thrift transport (Hive default: unframed)")
    compact: bool = Field(False, description="compact Thrift protocol (Hive default: binary)")
    max_message_mb: int = Field(100, ge=1, le=2048, description="largest string/message accepted, MiB")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="HTTP port serving Prometheus /metrics (off when unset)"
    )
    kerberos_proxy_users: list[str] = Field(
        default_factory=list,
        description="as hadoop.proxyuser.*: Kerberos users (principals' short names, e.g. the hivemesh "
        "proxy's 'hive') trusted to name the user they act for (set_ugi, txn and lock requests)",
    )

    @field_validator("allowed_locations", "kerberos_proxy_users", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        """A list from an environment variable: ``HIVEMESH_METASTORE_ALLOWED_LOCATIONS=file:/data,s3a://lake``."""
        return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v

    txn_timeout_s: float = Field(
        300,
        gt=0,
        description="hive.txn.timeout: open txns and txn-less locks without a heartbeat this long "
        "(seconds) are aborted / released",
    )
    housekeeping_interval_s: float = Field(
        60, gt=0, description="how often timed-out txns and locks are reaped and old records purged, seconds"
    )
    txn_retention_s: int = Field(
        86400,
        ge=0,
        description="how long completed txn records are kept, seconds (never below an open snapshot)",
    )
    event_retention_s: int = Field(
        7 * 86400,
        ge=0,
        description="how long notification events are kept, seconds (never ahead of a reader)",
    )

    @property
    def effective_workers(self) -> int:
        """``workers``, or its default: the CPU count on PostgreSQL, 1 on SQLite."""
        if self.workers is not None:
            return self.workers
        return 1 if self.db.startswith("sqlite:") else max(1, os.cpu_count() or 1)

    @property
    def effective_db_pool_size(self) -> int:
        """``db_pool_size``, or its default: 12, fewer so that all workers' pools open at most 80
        PostgreSQL connections (at least 2 each)."""
        if self.db_pool_size is not None:
            return self.db_pool_size
        return max(2, min(12, 80 // self.effective_workers - 4))

    @field_validator("db")
    @classmethod
    def _check_db(cls, v: str) -> str:
        if not (v.startswith("sqlite:") or v.startswith("postgresql")):
            raise ValueError("must be a SQLAlchemy URL starting with sqlite:/// or postgresql+psycopg://")
        return v

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    _fmt = field_validator("log_format", mode="before")(lambda cls, v: lower_enum(v))


class MeshConfig(BaseModel):
    """The whole of mesh.yaml. Unknown top-level keys are errors."""

    model_config = ConfigDict(extra="forbid")

    metastore: MetastoreConfig = Field(default_factory=MetastoreConfig)
    # sections of `hivemesh proxy`, validated by hivemesh.federation.config when that command runs
    proxy: dict[str, Any] | None = None
    primary: dict[str, Any] | None = None
    federated: list[Any] | None = None
    # sections of `hivemesh replicate`, validated by hivemesh.replication.config when that command runs
    zones: dict[str, Any] | None = None
    replication: dict[str, Any] | None = None


TLS_FILE_KEYS = ("tls_cert", "tls_key", "tls_client_ca", "tls_ca", "kerberos_keytab")
"""Keys naming PEM and keytab files: relative to the configuration file that names them."""

MULTI = "problems:\n"
"""Starts the message of a model validator that reports several problems, one per line, each
beginning with its key (``federated[1].database_prefix: ...``): :func:`format_errors` prints them
as they are, without the whole section as the offending input."""


def key_path(loc: Iterable[str | int]) -> str:
    """A setting's place as the error messages write it: list positions in brackets,
    ``("federated", 0, "uris")`` -> ``federated[0].uris``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _format_errors(source: str, err: ValidationError) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        loc = key_path(e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        if msg.startswith(MULTI):
            prefix = f"{loc}." if loc else ""
            lines.extend(f"  {prefix}{line}" for line in msg[len(MULTI) :].splitlines())
        elif isinstance(e.get("input"), dict | list):  # a whole section: its key says enough
            lines.append(f"  {loc or '(top level)'}: {msg}")
        else:
            lines.append(f"  {loc or '(top level)'}: {msg} (got {e.get('input')!r})")
    return "\n".join(lines)


ENV_ELSEWHERE = frozenset({"HIVEMESH_METASTORE_URI"})
"""``HIVEMESH_<SECTION>_*`` variables that belong to other commands (``hivemesh acid``'s
``--metastore-uri``), not to a section's settings."""


def option_name(field: str) -> str:
    """The command-line spelling of a setting: ``txn_timeout_s`` -> ``txn-timeout`` (units
    suffixes ``_s``/``_ms`` dropped only where the CLI drops them: seconds)."""
    return (field[:-2] if field.endswith("_s") else field).replace("_", "-")


def env_overrides(
    section: str, model: type[BaseModel], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Settings of ``section`` from ``HIVEMESH_<SECTION>_<NAME>`` variables, ``<NAME>`` being the
    option's name (``HIVEMESH_METASTORE_TXN_TIMEOUT`` for ``--txn-timeout``) or the YAML key
    (``HIVEMESH_METASTORE_TXN_TIMEOUT_S``). Raises ConfigError naming every unknown
    ``HIVEMESH_<SECTION>_*`` variable (a typo must not be silently ignored)."""
    env = os.environ if environ is None else environ
    prefix = f"HIVEMESH_{section.upper()}_"
    names: dict[str, str] = {}
    for field in model.model_fields:
        names[field.upper()] = field
        names[option_name(field).replace("-", "_").upper()] = field
    out: dict[str, str] = {}
    unknown = []
    for key, value in env.items():
        if not key.startswith(prefix) or key in ENV_ELSEWHERE:
            continue
        field = names.get(key[len(prefix) :])
        if field is None:
            unknown.append(key)
        else:
            out[field] = value
    if unknown:
        known = ", ".join(
            sorted(prefix + option_name(f).replace("-", "_").upper() for f in model.model_fields)
        )
        raise ConfigError(f"unknown environment variable(s) {', '.join(sorted(unknown))} (known: {known})")
    return out


def lower_enum(value: Any) -> Any:
    """An enum setting as written by hand (``Read-Only``) in the form the enum holds (``read_only``);
    other values unchanged (a pydantic ``mode="before"`` validator)."""
    return value.lower().replace("-", "_") if isinstance(value, str) else value


def check_regexes(values: list[str]) -> list[str]:
    """``values`` unchanged when each is a valid Python regular expression; raises ValueError
    naming the first that is not (a pydantic field validator)."""
    for v in values:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"{v!r} is not a valid regular expression: {e}") from e
    return values


def format_errors(source: str, err: ValidationError) -> str:
    """A pydantic error as one line per problem: ``key.path: message (got value)``."""
    return _format_errors(source, err)


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The top-level mapping of a YAML file. Raises ConfigError (unreadable, invalid, not a mapping)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read configuration file {path}: {e.strerror}") from e
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from e
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping (metastore: ...)")
    return loaded


def relative_to(base: Path, value: Any) -> Any:
    """A path or SQLite URL written in a configuration file, made absolute against ``base`` (the
    file's directory) when relative: ``sqlite:///hm/x.db`` -> ``sqlite:////etc/hivemesh/hm/x.db``,
    ``data/warehouse`` -> ``/etc/hivemesh/data/warehouse``. URLs of other schemes (``s3a://``,
    ``hdfs://``, ``file:``), absolute paths, ``~`` paths and non-strings are returned as they are."""
    if not isinstance(value, str) or not value:
        return value
    if value.startswith("sqlite:///"):
        rest = value[len("sqlite:///") :]
        if rest and not rest.startswith(("/", ":", "~")):
            return f"sqlite:///{base.resolve() / rest}"
        return value
    if ":" in value.split("/", 1)[0] or value.startswith(("/", "~")):
        return value  # a URL (scheme:...), an absolute or a home path
    return str(base.resolve() / value)


def anchor_paths(section: Any, keys: tuple[str, ...], base: Path) -> Any:
    """``section`` (a mapping read from a file) with its ``keys`` made absolute by
    :func:`relative_to`; anything else is returned unchanged."""
    if not isinstance(section, dict):
        return section
    return {k: relative_to(base, v) if k in keys else v for k, v in section.items()}


def load_config(path: str | os.PathLike[str] | None = None, **cli: Any) -> MeshConfig:
    """Build the configuration from a YAML file, the environment and CLI options.

    ``cli`` holds ``section__key=value`` pairs (e.g. ``metastore__port=9084``); ``None`` values are
    ignored (an option the user did not give). Raises ConfigError with every problem listed.
    """
    raw: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        raw = read_yaml(path)
        # paths written in the file are relative to the file, not to the working directory
        raw["metastore"] = anchor_paths(
            raw.get("metastore"), ("db", "warehouse", *TLS_FILE_KEYS), Path(path).parent
        )
    for section, model in (("metastore", MetastoreConfig),):
        sect = dict(raw.get(section) or {})
        sect.update(env_overrides(section, model))
        for k, v in cli.items():
            if v is not None and k.startswith(section + "__"):
                sect[k.split("__", 1)[1]] = v
        raw[section] = sect
    try:
        return MeshConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(source + " / environment / options", e)) from e
