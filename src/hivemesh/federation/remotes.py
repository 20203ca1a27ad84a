"""Remotes: links to databases and tables of other metastores that users create themselves.

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

Remote names are lower-cased like every Hive name. :class:`RemoteStore` keeps the links in the
proxy's own store (SQLite or PostgreSQL, table ``HIVEMESH_REMOTES``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
import sqlalchemy.pool
from pydantic import ValidationError

from hivemesh.config import ConfigError
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


class RemoteError(ValueError):
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
        out = {VIA: self.via}
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

    given: dict[str, str] = {}
    for k, v in params.items():
        key = str(k)
        low = key.lower()
        if not (low.startswith(REMOTE_PREFIX) or low.startswith("ssh.") or low.startswith("glue.")):
            continue
        given[key] = "" if v is None else str(v)
    values = {k: v.strip() for k, v in given.items()}
    allowed = DATABASE_KEYS if kind == "database" else TABLE_KEYS
    for k, v in values.items():
        if k.lower().startswith(REMOTE_PREFIX):
            if k not in allowed:
                raise fail(f"unknown property {k!r}; a remote {kind} takes {', '.join(allowed)}")
            if not v:
                raise fail(f"{k} must not be empty")

    via = values.get(VIA, "thrift").lower()
    if via not in VIAS:
        raise fail(f"{VIA} must be thrift, ssh or glue (got {values[VIA]!r})")
    for k in values:
        low = k.lower()
        if low.startswith("ssh.") or low.startswith("glue."):
            known = SSH_PROPERTIES if low.startswith("ssh.") else GLUE_PROPERTIES
            needs = "ssh" if low.startswith("ssh.") else "glue"
            if k not in known:
                raise fail(f"unknown property {k!r}; {needs} remotes take {', '.join(known)}")
            if via != needs:
                raise fail(f"{k} is only used with {VIA}={needs!r} (this remote is via {via!r})")

    uris = _parse_uris(values.get(URIS), fail)
    if not uris and via != "glue":
        raise fail(f"{URIS} is required for via {via!r} (comma-separated thrift://host:port)")

    remote_db = local_db
    if DATABASE in values:
        remote_db = _remote_name(DATABASE, values[DATABASE], fail)
    remote_table: str | None = None
    if kind == "table":
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


def _local_name(what: str, name: str) -> str:
    out = (name or "").strip().lower()
    if not out or not _NAME.match(out):
        raise RemoteError(f"{what} {name!r} must be letters, digits, '_' or '-'")
    return out


def _remote_name(prop: str, name: str, fail: Any, whole: str | None = None) -> str:
    out = name.strip().lower()
    if not out or not _NAME.match(out):
        got = whole if whole is not None else name
        raise fail(f"{prop}: {got!r} is not a valid name (letters, digits, '_' or '-')")
    return out


def _parse_uris(raw: str | None, fail: Any) -> tuple[str, ...]:
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


# ---------------------------------------------------------------------------------------------- store
_metadata = sa.MetaData()
REMOTES = sa.Table(
    "HIVEMESH_REMOTES",
    _metadata,
    sa.Column("REMOTE_ID", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("KIND", sa.String(16), nullable=False),
    sa.Column("LOCAL_DB", sa.String(256), nullable=False),
    sa.Column("LOCAL_TABLE", sa.String(256), nullable=False, server_default=""),
    sa.Column("REMOTE_DB", sa.String(256), nullable=False),
    sa.Column("REMOTE_TABLE", sa.String(256), nullable=True),
    sa.Column("VIA", sa.String(16), nullable=False),
    sa.Column("URIS", sa.Text, nullable=False),
    sa.Column("PROPERTIES", sa.Text, nullable=False),
    sa.Column("OWNER", sa.String(256), nullable=True),
    sa.Column("CREATE_TIME", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("LOCAL_DB", "LOCAL_TABLE", name="UQ_HIVEMESH_REMOTES_LOCAL"),
)
_PG_CREATE_LOCK = 0x484D5245  # advisory lock key serialising concurrent create_all on PostgreSQL


class RemoteStore:
    """The remotes of a proxy in a SQL store at a SQLAlchemy URL (``sqlite:///path`` or
    ``postgresql+psycopg://user@host/db``; plain ``postgresql://`` means psycopg).

    The table ``HIVEMESH_REMOTES`` is created when missing (a SQLite file's directory too). Every
    method is one database transaction; several processes may share one store (SQLite in WAL
    mode, or PostgreSQL, where a concurrent duplicate ``add`` still raises RemoteExistsError).
    Raises ConfigError for a URL that is neither SQLite nor PostgreSQL, and
    ``sqlalchemy.exc.OperationalError`` when the database cannot be reached.
    """

    def __init__(self, url: str):
        try:
            self.url = sa.make_url(url)
        except sa.exc.ArgumentError as e:
            raise ConfigError(f"store: {url!r} is not a SQLAlchemy URL") from e
        if self.url.drivername == "postgresql":
            self.url = self.url.set(drivername="postgresql+psycopg")
        self.dialect = self.url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"store: {self.display_url} must start with sqlite:/// or postgresql+psycopg://"
            )
        self._lock: threading.RLock | None = None
        if self.dialect == "sqlite":
            self._lock = threading.RLock()  # one writer at a time inside the process
            db = self.url.database
            memory = not db or db == ":memory:" or db.startswith("file:")
            if memory:
                self.engine = sa.create_engine(
                    self.url, connect_args={"check_same_thread": False}, poolclass=sa.pool.StaticPool
                )
            else:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
                self.engine = sa.create_engine(
                    self.url, connect_args={"check_same_thread": False, "timeout": 60}, pool_size=4
                )
            sa.event.listen(self.engine, "connect", _sqlite_on_connect)
            sa.event.listen(self.engine, "begin", _sqlite_on_begin)
            with self._begin(write=True) as conn:
                _metadata.create_all(conn)
        else:
            self.engine = sa.create_engine(
                self.url,
                pool_size=2,
                max_overflow=4,
                pool_timeout=60,
                pool_pre_ping=True,
                isolation_level="READ COMMITTED",
            )
            with self._begin(write=True) as conn:
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_CREATE_LOCK)))
                _metadata.create_all(conn)

    @property
    def display_url(self) -> str:
        """The store URL with any password hidden."""
        return self.url.render_as_string(hide_password=True)

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _begin(self, write: bool) -> Iterator[sa.Connection]:
        """A connection in one transaction: commits when the block ends, rolls back on error.
        SQLite writes take the database lock up front (``BEGIN IMMEDIATE``)."""
        with self._lock or nullcontext(), self.engine.connect() as conn:
            if self.dialect == "sqlite":
                conn.info["begin_mode"] = "IMMEDIATE" if write else "DEFERRED"
            with conn.begin():
                yield conn

    def add(self, spec: RemoteSpec) -> RemoteSpec:
        """Store ``spec`` and return it with ``create_time`` filled in (now, epoch seconds, when 0).

        Raises RemoteExistsError if a remote with that local name exists, or if a table link is
        added inside a database link; RemoteError if a database link is added over a database that
        holds table links (drop them first).
        """
        if spec.create_time == 0:
            spec = dataclasses.replace(spec, create_time=int(time.time()))
        c = REMOTES.c
        try:
            with self._begin(write=True) as conn:
                rows = conn.execute(
                    sa.select(c.LOCAL_TABLE).where(c.LOCAL_DB == spec.local_db).order_by(c.LOCAL_TABLE)
                ).all()
                tables = [r.LOCAL_TABLE for r in rows]
                if (spec.local_table or "") in tables:
                    raise RemoteExistsError(f"remote {spec.local_name} already exists")
                if spec.kind == "table" and "" in tables:
                    raise RemoteExistsError(
                        f"{spec.local_db} is a remote database: its tables come from the remote, "
                        f"so {spec.local_name} cannot be a table link"
                    )
                if spec.kind == "database" and tables:
                    raise RemoteError(
                        f"database {spec.local_db} holds table links ({', '.join(tables[:3])}"
                        f"{', ...' if len(tables) > 3 else ''}); drop them before linking the database"
                    )
                conn.execute(sa.insert(REMOTES).values(**_row(spec)))
        except sa.exc.IntegrityError as e:  # a concurrent add of the same name won
            raise RemoteExistsError(f"remote {spec.local_name} already exists") from e
        return spec

    def drop(self, local_db: str, local_table: str | None = None) -> bool:
        """Remove the link ``local_db`` (database link) or ``local_db.local_table`` (table link);
        the remote object is untouched. Returns False when there was no such link."""
        c = REMOTES.c
        with self._begin(write=True) as conn:
            res = conn.execute(
                sa.delete(REMOTES).where(
                    c.LOCAL_DB == local_db.lower(), c.LOCAL_TABLE == (local_table or "").lower()
                )
            )
            return res.rowcount > 0

    def drop_database_links(self, local_db: str) -> int:
        """Remove the database link ``local_db`` and every table link inside that database (as
        when the local database is dropped). Returns how many links were removed."""
        with self._begin(write=True) as conn:
            res = conn.execute(sa.delete(REMOTES).where(REMOTES.c.LOCAL_DB == local_db.lower()))
            return res.rowcount

    def get(self, local_db: str, local_table: str | None = None) -> RemoteSpec | None:
        """The database link ``local_db`` (``local_table`` None) or table link
        ``local_db.local_table`` (names case-insensitive), or None."""
        c = REMOTES.c
        with self._begin(write=False) as conn:
            row = conn.execute(
                sa.select(REMOTES).where(
                    c.LOCAL_DB == local_db.lower(), c.LOCAL_TABLE == (local_table or "").lower()
                )
            ).first()
        return None if row is None else _spec(row)

    def list(self) -> list[RemoteSpec]:
        """Every remote, ordered by local name (a database link before the table links inside it)."""
        c = REMOTES.c
        with self._begin(write=False) as conn:
            rows = conn.execute(sa.select(REMOTES).order_by(c.LOCAL_DB, c.LOCAL_TABLE)).all()
        return [_spec(r) for r in rows]

    def close(self) -> None:
        """Close every pooled connection (the store can still be used; it reconnects)."""
        self.engine.dispose()


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql(f"BEGIN {conn.info.get('begin_mode', 'DEFERRED')}")


def _row(spec: RemoteSpec) -> dict[str, Any]:
    return {
        "KIND": spec.kind,
        "LOCAL_DB": spec.local_db,
        "LOCAL_TABLE": spec.local_table or "",
        "REMOTE_DB": spec.remote_db,
        "REMOTE_TABLE": spec.remote_table,
        "VIA": spec.via,
        "URIS": ",".join(spec.uris),
        "PROPERTIES": json.dumps(dict(spec.properties)),
        "OWNER": spec.owner,
        "CREATE_TIME": spec.create_time,
    }


def _spec(row: sa.Row[Any]) -> RemoteSpec:
    return RemoteSpec(
        kind=row.KIND,
        local_db=row.LOCAL_DB,
        local_table=row.LOCAL_TABLE or None,
        remote_db=row.REMOTE_DB,
        remote_table=row.REMOTE_TABLE,
        via=row.VIA,
        uris=tuple(u for u in row.URIS.split(",") if u),
        properties=json.loads(row.PROPERTIES),
        owner=row.OWNER,
        create_time=int(row.CREATE_TIME),
    )
