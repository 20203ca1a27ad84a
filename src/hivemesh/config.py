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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hivemesh.errors import HivemeshError

DEFAULT_DATA_DIR = Path("hivemesh-data")
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class ConfigError(HivemeshError, ValueError):
    """A configuration file or value is invalid; the message lists every problem with its key."""


class MetastoreConfig(BaseModel):
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

    @field_validator("allowed_locations", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        """``HIVEMESH_METASTORE_ALLOWED_LOCATIONS=file:/data,s3a://lake``: a comma-separated list."""
        return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v

    log_level: LogLevel = "INFO"
    framed: bool = Field(False, description="framed Thrift transport (Hive default: unframed)")
    compact: bool = Field(False, description="compact Thrift protocol (Hive default: binary)")
    max_message_mb: int = Field(100, ge=1, le=2048, description="largest string/message accepted, MiB")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="HTTP port serving Prometheus /metrics (off when unset)"
    )
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


class MeshConfig(BaseModel):
    """The whole of mesh.yaml. Unknown top-level keys are errors."""

    model_config = ConfigDict(extra="forbid")

    metastore: MetastoreConfig = Field(default_factory=MetastoreConfig)
    # sections of `hivemesh proxy`, validated by hivemesh.federation.config when that command runs
    proxy: dict[str, Any] | None = None
    primary: dict[str, Any] | None = None
    federated: list[Any] | None = None


MULTI = "problems:\n"
"""Starts the message of a model validator that reports several problems, one per line, each
beginning with its key (``federated[1].database_prefix: ...``): :func:`format_errors` prints them
as they are, without the whole section as the offending input."""


def _format_errors(source: str, err: ValidationError) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
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
        raw["metastore"] = anchor_paths(raw.get("metastore"), ("db", "warehouse"), Path(path).parent)
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
