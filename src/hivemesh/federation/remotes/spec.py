"""What a remote is: its definition from ``hivemesh.remote.*`` properties, validated.

A remote is an ordinary ``CREATE DATABASE`` / ``CREATE TABLE`` sent through the proxy with
``hivemesh.remote.*`` properties (the "Hive remote databases/tables" proposal, in plain HiveQL)::

    CREATE DATABASE sales_eu WITH DBPROPERTIES (
        'hivemesh.remote.uris'='thrift://eu-hms:9083', 'hivemesh.remote.database'='sales')
    CREATE TABLE db.t (x INT) TBLPROPERTIES (
        'hivemesh.remote.table'='remote_db.remote_tbl', 'hivemesh.remote.uris'='thrift://h:9083')

Properties (keys are case-sensitive; values are stripped of surrounding blanks):

* ``hivemesh.remote.via``: ``thrift`` (default), ``ssh`` or ``glue``.
* ``hivemesh.remote.uris``: comma-separated ``thrift://host:port``, tried in order; required for
  thrift and ssh, optional for glue.
* ``hivemesh.remote.database``: the remote database (default: the local database name).
* ``hivemesh.remote.table`` (tables only): ``db.table``, or ``table`` in the database given by
  ``hivemesh.remote.database`` (default: the local database name); default: the local table name.
* via ssh: ``ssh.tunnel.route`` (required, ``user@host[:port] -> user@host[:port]``),
  ``ssh.tunnel.private.keys`` (comma-separated paths), ``ssh.tunnel.known.hosts``,
  ``ssh.tunnel.port`` (default 22), ``ssh.tunnel.strict.host.key.checking`` (true/false).
* via glue: ``glue.region`` (default us-east-1), ``glue.account.id`` (12 digits), ``glue.endpoint``.

Any ``hivemesh.remote.*`` property makes the object a remote, and every such property must be
valid: a misspelt key is an error rather than a silently created normal database. So is an
``ssh.*`` / ``glue.*`` key a remote does not use (unknown, or for another ``via``).

Remote names are lower-cased like every Hive name. :class:`~hivemesh.federation.remotes.store.RemoteStore`
keeps the links in the proxy's own store.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from hivemesh.errors import HivemeshError
from hivemesh.federation.config import GlueConfig, SshTunnelConfig

REMOTE_PREFIX = "hivemesh.remote."
VIA = "hivemesh.remote.via"
URIS = "hivemesh.remote.uris"
DATABASE = "hivemesh.remote.database"
TABLE = "hivemesh.remote.table"

VIAS = ("thrift", "ssh", "glue")
DATABASE_KEYS = (VIA, URIS, DATABASE)
TABLE_KEYS = (VIA, URIS, DATABASE, TABLE)

SSH_PROPERTIES = {  # property -> SshTunnelConfig field
    "ssh.tunnel.route": "route",
    "ssh.tunnel.private.keys": "private_keys",
    "ssh.tunnel.known.hosts": "known_hosts",
    "ssh.tunnel.port": "port",
    "ssh.tunnel.strict.host.key.checking": "strict_host_key_checking",
}
GLUE_PROPERTIES = {  # property -> GlueConfig field
    "glue.region": "region",
    "glue.account.id": "glue_account_id",
    "glue.endpoint": "glue_endpoint",
}

_URI = re.compile(r"^thrift://([^\s:/]+):(\d{1,5})$")
_NAME = re.compile(r"^[\w-]+$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_ACCOUNT = re.compile(r"^\d{12}$")
_ENDPOINT = re.compile(r"^https?://\S+$")


class RemoteError(HivemeshError, ValueError):
    """An invalid remote definition; the message names the property and what was expected."""


class RemoteExistsError(RemoteError):
    """A remote with that local name already exists (or the name is inside a remote database)."""


class FrozenProperties(Mapping[str, str]):
    """An immutable, hashable ``str -> str`` mapping; equal to any mapping with the same items."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, str] | None = None):
        self._items: dict[str, str] = dict(items or {})
        self._hash: int | None = None

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._items == dict(other.items())

    def __repr__(self) -> str:
        return f"FrozenProperties({self._items!r})"


@dataclass(frozen=True)
class RemoteSpec:
    """One remote: a local database (``kind="database"``) or table (``"table"``) that stands for a
    database/table of another metastore, reached through the connector ``via``.

    ``local_db``/``local_table``/``remote_db``/``remote_table`` are lower-cased
    (``local_table``/``remote_table`` are None for a database link); ``uris`` are the
    ``thrift://host:port`` endpoints in the order they are tried (may be empty for glue);
    ``properties`` holds every ``hivemesh.remote.*``, ``ssh.*`` and ``glue.*`` property as given;
    ``create_time`` is in epoch seconds (0 until stored). Build specs with :func:`database_remote`
    and :func:`table_remote`, which validate; the constructor does not.
    """

    kind: Literal["database", "table"]
    local_db: str
    local_table: str | None
    remote_db: str
    remote_table: str | None
    via: Literal["thrift", "ssh", "glue"]
    uris: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=FrozenProperties)
    owner: str | None = None
    create_time: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "uris", tuple(self.uris))
        if not isinstance(self.properties, FrozenProperties):
            object.__setattr__(self, "properties", FrozenProperties(self.properties))

    @property
    def local_name(self) -> str:
        """``db`` for a database link, ``db.table`` for a table link."""
        return self.local_db if self.local_table is None else f"{self.local_db}.{self.local_table}"

    @property
    def remote_name(self) -> str:
        """``db`` for a database link, ``db.table`` for a table link (names on the remote side)."""
        return self.remote_db if self.remote_table is None else f"{self.remote_db}.{self.remote_table}"

    def ssh_tunnel_config(self) -> SshTunnelConfig | None:
        """The tunnel of a ``via="ssh"`` remote from its ``ssh.tunnel.*`` properties, else None.
        Raises RemoteError if a property is invalid (never for a spec from :func:`database_remote`
        or :func:`table_remote`)."""
        if self.via != "ssh":
            return None
        return _ssh_config(self.properties, f"{self.kind} {self.local_name}")

    def glue_config(self) -> GlueConfig | None:
        """The catalog of a ``via="glue"`` remote from its ``glue.*`` properties, else None.
        Raises RemoteError if a property is invalid (as :meth:`ssh_tunnel_config`)."""
        if self.via != "glue":
            return None
        return _glue_config(self.properties, f"{self.kind} {self.local_name}")

    def connector_key(self) -> tuple[Any, ...]:
        """The identity of the connection: ``(via, uris, settings)`` where ``settings`` are the
        normalised ssh tunnel or Glue settings (defaults filled in, so ``ssh.tunnel.port=22`` and no
        port are the same). Remotes with equal keys share one connector. Hashable."""
        settings: tuple[Any, ...] = ()
        ssh = self.ssh_tunnel_config()
        if ssh is not None:
            settings = (
                ssh.route,
                tuple(ssh.private_keys),
                ssh.known_hosts,
                ssh.port,
                ssh.strict_host_key_checking,
            )
        glue = self.glue_config()
        if glue is not None:
            settings = (glue.region, glue.glue_account_id, glue.glue_endpoint)
        return (self.via, self.uris, settings)

    def described_parameters(self) -> dict[str, str]:
        """What DESCRIBE appends to the remote object's parameters: ``hivemesh.remote.via``,
        ``hivemesh.remote.uris`` (comma-separated; left out when empty, glue only),
        ``hivemesh.remote.database`` and, for tables, ``hivemesh.remote.table`` (``db.table``),
        defaults filled in, then the ``ssh.*`` / ``glue.*`` properties as given. Parsing these
        parameters again gives the same remote."""
        out: dict[str, str] = {VIA: self.via}
        if self.uris:
            out[URIS] = ",".join(self.uris)
        out[DATABASE] = self.remote_db
        if self.remote_table is not None:
            out[TABLE] = f"{self.remote_db}.{self.remote_table}"
        for k, v in self.properties.items():
            if not k.lower().startswith(REMOTE_PREFIX):
                out[k] = v
        return out


# ---------------------------------------------------------------------------------------------- parsing
def database_remote(
    db_name: str, params: Mapping[str, str] | None, *, owner: str | None = None
) -> RemoteSpec | None:
    """The database link defined by a database's parameters (DBPROPERTIES).

    Returns None when ``params`` has no ``hivemesh.remote.*`` property (a normal database).
    Raises RemoteError when the definition is invalid: an unknown ``hivemesh.remote.*`` key
    (``hivemesh.remote.table`` included), a bad via, uri or name, a missing required property, or an
    ``ssh.*``/``glue.*`` property the connector does not take.
    """
    return _parse("database", db_name, None, params, owner)


def table_remote(
    db_name: str, table_name: str, params: Mapping[str, str] | None, *, owner: str | None = None
) -> RemoteSpec | None:
    """The table link defined by a table's parameters (TBLPROPERTIES) in database ``db_name``.

    Returns None when ``params`` has no ``hivemesh.remote.*`` property (a normal table).
    Raises RemoteError as :func:`database_remote`.
    """
    return _parse("table", db_name, table_name, params, owner)


def _parse(
    kind: Literal["database", "table"],
    db_name: str,
    table_name: str | None,
    params: Mapping[str, str] | None,
    owner: str | None,
) -> RemoteSpec | None:
    if not params or not any(str(k).lower().startswith(REMOTE_PREFIX) for k in params):
        return None
    local_db = _local_name("database name", db_name)
    local_table = None if table_name is None else _local_name("table name", table_name)
    where = f"remote {kind} {local_db if local_table is None else f'{local_db}.{local_table}'}"

    def fail(msg: str) -> RemoteError:
        return RemoteError(f"{where}: {msg}")

    given = _remote_properties(params)
    values = {k: v.strip() for k, v in given.items()}
    _check_remote_keys(kind, values, fail)
    via = values.get(VIA, "thrift").lower()
    if via not in VIAS:
        raise fail(f"{VIA} must be thrift, ssh or glue (got {values[VIA]!r})")
    _check_connector_keys(values, via, fail)
    uris = _parse_uris(values.get(URIS), fail)
    if not uris and via != "glue":
        raise fail(f"{URIS} is required for via {via!r} (comma-separated thrift://host:port)")
    remote_db, remote_table = _remote_names(kind, local_db, local_table, values, fail)
    spec = RemoteSpec(
        kind=kind,
        local_db=local_db,
        local_table=local_table,
        remote_db=remote_db,
        remote_table=remote_table,
        via=via,  # type: ignore[arg-type]
        uris=uris,
        properties=given,
        owner=owner,
    )
    spec.ssh_tunnel_config()  # validates the connector properties (raises RemoteError)
    spec.glue_config()
    return spec


Fail = Callable[[str], RemoteError]
"""Makes the RemoteError of one remote definition from a message (prefixed with the remote)."""


def _remote_properties(params: Mapping[str, str]) -> dict[str, str]:
    """The ``hivemesh.remote.*``, ``ssh.*`` and ``glue.*`` properties, values as strings."""
    given: dict[str, str] = {}
    for k, v in params.items():
        key = str(k)
        low = key.lower()
        if low.startswith(REMOTE_PREFIX) or low.startswith("ssh.") or low.startswith("glue."):
            given[key] = "" if v is None else str(v)
    return given


def _check_remote_keys(kind: str, values: Mapping[str, str], fail: Fail) -> None:
    """Every ``hivemesh.remote.*`` key is one a remote ``kind`` takes, and none is empty."""
    allowed = DATABASE_KEYS if kind == "database" else TABLE_KEYS
    for k, v in values.items():
        if k.lower().startswith(REMOTE_PREFIX):
            if k not in allowed:
                raise fail(f"unknown property {k!r}; a remote {kind} takes {', '.join(allowed)}")
            if not v:
                raise fail(f"{k} must not be empty")


def _check_connector_keys(values: Mapping[str, str], via: str, fail: Fail) -> None:
    """Every ``ssh.*``/``glue.*`` key is a known one, for the connector ``via``."""
    for k in values:
        low = k.lower()
        if low.startswith("ssh.") or low.startswith("glue."):
            known = SSH_PROPERTIES if low.startswith("ssh.") else GLUE_PROPERTIES
            needs = "ssh" if low.startswith("ssh.") else "glue"
            if k not in known:
                raise fail(f"unknown property {k!r}; {needs} remotes take {', '.join(known)}")
            if via != needs:
                raise fail(f"{k} is only used with {VIA}={needs!r} (this remote is via {via!r})")


def _remote_names(
    kind: str, local_db: str, local_table: str | None, values: Mapping[str, str], fail: Fail
) -> tuple[str, str | None]:
    """(remote database, remote table or None) from ``hivemesh.remote.database``/``.table``;
    the local names by default."""
    remote_db = local_db
    if DATABASE in values:
        remote_db = _remote_name(DATABASE, values[DATABASE], fail)
    if kind != "table":
        return remote_db, None
    remote_table = local_table
    if TABLE in values:
        raw = values[TABLE]
        parts = raw.split(".")
        if len(parts) > 2:
            raise fail(f"{TABLE} must be 'table' or 'database.table' (got {raw!r})")
        remote_table = _remote_name(TABLE, parts[-1], fail, raw)
        if len(parts) == 2:
            db = _remote_name(TABLE, parts[0], fail, raw)
            if DATABASE in values and db != remote_db:
                raise fail(f"{TABLE} names database {db!r} but {DATABASE} is {remote_db!r}")
            remote_db = db
    return remote_db, remote_table


def _local_name(what: str, name: str) -> str:
    out = (name or "").strip().lower()
    if not out or not _NAME.match(out):
        raise RemoteError(f"{what} {name!r} must be letters, digits, '_' or '-'")
    return out


def _remote_name(prop: str, name: str, fail: Fail, whole: str | None = None) -> str:
    out = name.strip().lower()
    if not out or not _NAME.match(out):
        got = whole if whole is not None else name
        raise fail(f"{prop}: {got!r} is not a valid name (letters, digits, '_' or '-')")
    return out


def _parse_uris(raw: str | None, fail: Fail) -> tuple[str, ...]:
    if raw is None:
        return ()
    out = []
    for part in raw.split(","):
        uri = part.strip()
        m = _URI.match(uri)
        if not m or not 1 <= int(m.group(2)) <= 65535:
            raise fail(f"{URIS}: {uri!r} is not thrift://host:port (comma-separated list)")
        out.append(uri)
    return tuple(out)


def _ssh_config(props: Mapping[str, str], where: str) -> SshTunnelConfig:
    values = {k: v.strip() for k, v in props.items() if k in SSH_PROPERTIES}
    if not values.get("ssh.tunnel.route"):
        raise RemoteError(
            f"remote {where}: ssh.tunnel.route is required for via 'ssh' ('user@bastion -> user@host')"
        )
    body: dict[str, Any] = {"route": values["ssh.tunnel.route"]}
    keys = values.get("ssh.tunnel.private.keys")
    if keys:
        body["private_keys"] = [p.strip() for p in keys.split(",") if p.strip()]
    if values.get("ssh.tunnel.known.hosts"):
        body["known_hosts"] = values["ssh.tunnel.known.hosts"]
    if "ssh.tunnel.port" in values:
        port = values["ssh.tunnel.port"]
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise RemoteError(f"remote {where}: ssh.tunnel.port must be a port 1-65535 (got {port!r})")
        body["port"] = int(port)
    if "ssh.tunnel.strict.host.key.checking" in values:
        flag = values["ssh.tunnel.strict.host.key.checking"].lower()
        if flag not in ("true", "false"):
            raise RemoteError(
                f"remote {where}: ssh.tunnel.strict.host.key.checking must be true or false (got {flag!r})"
            )
        body["strict_host_key_checking"] = flag == "true"
    try:
        return SshTunnelConfig.model_validate(body)
    except ValidationError as e:
        fields = {f: p for p, f in SSH_PROPERTIES.items()}
        err = e.errors()[0]
        prop = fields.get(str(err["loc"][0]) if err["loc"] else "", "ssh.tunnel.*")
        msg = err["msg"].removeprefix("Value error, ")
        raise RemoteError(f"remote {where}: {prop}: {msg}") from e


def _glue_config(props: Mapping[str, str], where: str) -> GlueConfig:
    values = {k: v.strip() for k, v in props.items() if k in GLUE_PROPERTIES}
    region = values.get("glue.region")
    if region is not None and not _REGION.match(region):
        raise RemoteError(
            f"remote {where}: glue.region must be an AWS region like eu-west-1 (got {region!r})"
        )
    account = values.get("glue.account.id")
    if account is not None and not _ACCOUNT.match(account):
        raise RemoteError(
            f"remote {where}: glue.account.id must be a 12-digit AWS account id (got {account!r})"
        )
    endpoint = values.get("glue.endpoint")
    if endpoint is not None and not _ENDPOINT.match(endpoint):
        raise RemoteError(f"remote {where}: glue.endpoint must be an http(s):// URL (got {endpoint!r})")
    body = {GLUE_PROPERTIES[k]: v for k, v in values.items() if v}
    return GlueConfig.model_validate(body)
