"""``hivemesh remote``: add, list and drop remotes in the proxy's store from the command line.

The same links users create with ``CREATE DATABASE ... WITH DBPROPERTIES ('hivemesh.remote.uris'=...)``
through the proxy, validated by the same rules (:mod:`hivemesh.federation.remotes`). A running proxy
re-reads the store periodically, so these commands work whether or not it runs.

Exit codes: 0 done, 1 no such remote (drop), 2 invalid input, configuration or store.
"""

from __future__ import annotations

import getpass
import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn

import click
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from hivemesh.config import ConfigError
from hivemesh.federation.config import ProxySettings, load_federation_config
from hivemesh.federation.remotes import (
    DATABASE,
    TABLE,
    URIS,
    VIA,
    VIAS,
    RemoteError,
    RemoteSpec,
    RemoteStore,
    database_remote,
    table_remote,
)


def _fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with ``code``."""
    one_line = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
    click.echo(f"error: {one_line}", err=True)
    sys.exit(code)


def _store_url(config_path: str | None, store: str | None) -> str:
    if store:
        return store
    if config_path:
        return load_federation_config(config_path).proxy.store
    return ProxySettings().store


def _with_store(fn: Callable[..., None]) -> Callable[..., None]:
    """Adds --config/--store; calls ``fn(store: RemoteStore, ...)``; turns errors into exit 2."""

    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        help="mesh.yaml whose proxy.store is used.",
    )
    @click.option(
        "--store",
        default=None,
        help="SQLAlchemy URL of the proxy store (wins over --config).  "
        "[default: sqlite:///hivemesh-data/proxy.db]",
    )
    @wraps(fn)
    def wrapper(config_path: str | None, store: str | None, **kw: Any) -> None:
        try:
            rs = RemoteStore(_store_url(config_path, store))
        except (RemoteError, ConfigError) as e:
            _fail(str(e))
        except sa.exc.SQLAlchemyError as e:
            _fail(f"cannot open the remote store: {getattr(e, 'orig', None) or e}")
        if "config_path" in fn.__code__.co_varnames:
            kw["config_path"] = config_path
        try:
            fn(rs, **kw)
        except (RemoteError, ConfigError) as e:
            _fail(str(e))
        except sa.exc.SQLAlchemyError as e:
            _fail(f"remote store {rs.display_url}: {getattr(e, 'orig', None) or e}")
        finally:
            rs.close()

    return wrapper


def _split_name(name: str, what: str) -> tuple[str, str | None]:
    parts = name.strip().split(".")
    if len(parts) > 2 or not all(parts):
        _fail(f"{what} {name!r} must be 'db' or 'db.table'")
    return parts[0], (parts[1] if len(parts) == 2 else None)


def _describe(spec: RemoteSpec) -> str:
    where = f" ({','.join(spec.uris)})" if spec.uris else ""
    return f"remote {spec.kind} {spec.local_name} -> {spec.remote_name} via {spec.via}{where}"


@click.group()
def remote() -> None:
    """Links to databases and tables of other metastores (remotes) in the proxy's store."""
    # each command reports its failure in one line; the members' warnings ("... is unavailable")
    # would say the same first
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


@remote.command("add")
@click.argument("name")
@click.option("--uris", default=None, help="thrift://host:port[,...] of the remote metastore.")
@click.option(
    "--remote",
    "remote_name",
    default=None,
    help="Remote name: db for a database link, db.table or table for a table link.  [default: NAME]",
)
@click.option(
    "--via", type=click.Choice(VIAS, case_sensitive=False), default=None, help="Connector.  [default: thrift]"
)
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="ssh.tunnel.* / glue.* (or hivemesh.remote.*) property; repeatable.",
)
@click.option("--owner", default=None, help="Owner recorded with the link.  [default: the current user]")
@click.option(
    "--no-check",
    is_flag=True,
    help="Store the link without asking the remote metastore (and the primary, for a table link) "
    "that its objects exist (offline use).",
)
@_with_store
def add(
    store: RemoteStore,
    name: str,
    uris: str | None,
    remote_name: str | None,
    via: str | None,
    properties: tuple[str, ...],
    owner: str | None,
    no_check: bool,
    config_path: str | None = None,
) -> None:
    """Add a remote: NAME is db (database link) or db.table (table link).

    \b
    hivemesh remote add sales_eu --uris thrift://eu-hms:9083 --remote sales
    hivemesh remote add db.t --uris thrift://h:9083 --remote remote_db.remote_tbl
    hivemesh remote add gl --via glue --property glue.region=eu-west-1
    """
    db, table = _split_name(name, "NAME")
    params: dict[str, str] = {}
    for p in properties:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            _fail(f"--property {p!r} must be KEY=VALUE")
        params[key.strip()] = value
    if uris is not None:
        params[URIS] = uris
    if via is not None:
        params[VIA] = via
    if remote_name is not None:
        if table is None:
            if "." in remote_name:
                _fail(f"--remote {remote_name!r}: a database link names a remote database 'db'")
            params[DATABASE] = remote_name
        else:
            params[TABLE] = remote_name
    owner = owner or _current_user()
    spec = (
        database_remote(db, params, owner=owner)
        if table is None
        else table_remote(db, table, params, owner=owner)
    )
    if spec is None:
        _fail(f"{name}: give --uris thrift://host:port (or --via glue)")
    if not no_check:
        _check(spec, config_path)
    spec = store.add(spec)
    click.echo(f"added {_describe(spec)}")


def _check(spec: RemoteSpec, config_path: str | None) -> None:
    """What the proxy checks when a client creates the link: the remote object exists (its
    metastore answers), and a table link's local database exists in the primary (when --config
    names it). Exits 2 with the reason otherwise."""
    from hive_metastore.ttypes import NoSuchObjectException
    from thrift.Thrift import TException

    from hivemesh.federation.remotes.registry import check_remote

    try:
        check_remote(spec)
    except TException as e:
        _fail(getattr(e, "message", None) or str(e))
    if spec.local_table is None:
        return
    if config_path is None:
        click.echo(
            f"note: the local database {spec.local_db} was not checked (give --config to name the primary)",
            err=True,
        )
        return
    primary = load_federation_config(config_path).primary
    if not primary.uris:
        return  # an embedded primary is the proxy's own store: checked when the proxy serves it
    from hivemesh.client.metastore import MetastoreClient
    from hivemesh.federation.factory import member_tls
    from hivemesh.tls import TlsError

    try:
        with MetastoreClient(",".join(primary.uris), timeout_s=30, tls=member_tls(primary)) as client:
            client.hms.get_database(spec.local_db)
    except NoSuchObjectException:
        _fail(
            f"table link {spec.local_name}: no database {spec.local_db} in the primary metastore {primary.name!r}"
        )
    except (TException, OSError, TlsError) as e:
        _fail(f"cannot reach the primary metastore {primary.name!r} ({','.join(primary.uris)}): {e}")


@remote.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of a table.")
@_with_store
def list_(store: RemoteStore, as_json: bool) -> None:
    """List the remotes, ordered by local name."""
    specs = store.list()
    if as_json:
        for s in specs:
            click.echo(
                json.dumps(
                    {
                        "local_name": s.local_name,
                        "kind": s.kind,
                        "local_db": s.local_db,
                        "local_table": s.local_table,
                        "remote_db": s.remote_db,
                        "remote_table": s.remote_table,
                        "via": s.via,
                        "uris": list(s.uris),
                        "properties": dict(s.properties),
                        "owner": s.owner,
                        "create_time": s.create_time,
                    }
                )
            )
        return
    if not specs:
        click.echo("no remotes")
        return
    table = Table(title=f"remotes in {store.display_url}", title_justify="left")
    for col in ("local name", "kind", "remote name", "via"):
        table.add_column(col, no_wrap=True)
    table.add_column("uris", overflow="fold")
    for s in specs:
        table.add_row(s.local_name, s.kind, s.remote_name, s.via, ",".join(s.uris) or "-")
    Console(width=max(100, Console().width)).print(table)


@remote.command("drop")
@click.argument("name")
@_with_store
def drop(store: RemoteStore, name: str) -> None:
    """Drop the link NAME (db or db.table). The remote database/table itself is untouched."""
    db, table = _split_name(name, "NAME")
    if not store.drop(db, table):
        kind = "database" if table is None else "table"
        _fail(f"no remote {kind} link named {name.lower()}", code=1)
    click.echo(
        f"dropped the link {name.lower()} (the remote {'table' if table else 'database'} is untouched)"
    )


def _current_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
