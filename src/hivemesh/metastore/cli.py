"""``hivemesh metastore schema status|upgrade`` and ``hivemesh metastore backup``: operating a
metastore's metadata store without serving it.

``schema status`` exits 0 when the schema is up to date and 1 otherwise (empty, needs upgrade,
newer than this hivemesh); every command exits 2 when it cannot do its work (bad URL or config,
store unreachable, schema newer than this hivemesh knows, backup refused), with a one-line error
and no traceback. The store's modules are imported when a command runs, not when ``hivemesh``
starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hivemesh.config import ConfigError, load_config

__all__ = ["backup", "schema"]

_DB_HELP = (
    "SQLAlchemy URL of the metadata store (sqlite:///file.db or postgresql+psycopg://user@host/db)."
    "  [default: the metastore's db setting: --config, HIVEMESH_METASTORE_DB or "
    "sqlite:///hivemesh-data/metastore.db]"
)


class _Failure(click.ClickException):
    """The command could not do its work: ``Error: <message>`` on stderr, exit code 2."""

    exit_code = 2


def _store_options(f: Any) -> Any:
    f = click.option("--db", default=None, help=_DB_HELP)(f)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        help="mesh.yaml whose metastore: section gives the db setting.",
    )(f)


def _db_url(config_path: str | None, db: str | None) -> str:
    """The metastore's db setting: ``--db``, else the config file, the environment, the default
    (``--db`` and ``--config`` also count when given before the command: ``hivemesh metastore
    --db URL schema status``)."""
    ctx = click.get_current_context(silent=True)
    parent = ctx.find_object(dict) if ctx is not None else None
    if parent:
        db = db if db is not None else parent.get("db")
        config_path = config_path if config_path is not None else parent.get("config_path")
    try:
        return load_config(config_path, metastore__db=db).metastore.db
    except ConfigError as e:
        raise _Failure(str(e)) from e


def _first_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None)  # SQLAlchemy wraps the driver's error; its text has no SQL
    text = str(orig if orig is not None else e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _status(url: str) -> Any:
    from hivemesh.metastore.store import schema_status

    try:
        return schema_status(url)
    except ConfigError as e:
        raise _Failure(str(e)) from e
    except Exception as e:  # unreachable, no permission, not a database, ...
        raise _Failure(f"cannot read the metadata store {_shown(url)}: {_first_line(e)}") from e


def _shown(url: str) -> str:
    try:
        import sqlalchemy as sa

        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(the configured URL)"


def _too_new(st: Any) -> str:
    from hivemesh import __version__

    return (
        f"the metadata store's schema ({st.url}) is at revision {st.current}, newer than this "
        f"hivemesh {__version__} knows (head {st.head}): upgrade hivemesh"
    )


@click.group()
def schema() -> None:
    """Check or upgrade the metadata store's schema (Alembic revisions) without serving."""


@schema.command()
@_store_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object (url, current, head, state, pending, hivemesh_version, description).",
)
def status(config_path: str | None, db: str | None, fmt: str) -> None:
    """Show the schema's revision against this hivemesh's newest (head); changes nothing.

    The state is one of: up to date; needs upgrade (N migrations: ...); newer than this hivemesh
    (revision X unknown); empty (no schema). Exit code 0 when up to date, 1 otherwise, 2 when the
    store cannot be read.
    """
    from hivemesh import __version__

    st = _status(_db_url(config_path, db))
    if fmt == "json":
        click.echo(json.dumps({**st.as_dict(), "description": st.describe()}, indent=2))
    else:
        click.echo(f"store:    {st.url}")
        click.echo(f"current:  {st.current or '(none)'}")
        click.echo(f"head:     {st.head} (hivemesh {__version__})")
        click.echo(f"status:   {st.describe()}")
        for rev, doc in st.pending:
            click.echo(f"  {rev}  {doc}")
    raise SystemExit(0 if st.state == "up to date" else 1)


@schema.command()
@_store_options
def upgrade(config_path: str | None, db: str | None) -> None:
    """Apply the pending migrations (creating the schema in an empty store), one line per
    migration applied, all in one transaction. Nothing to do when up to date; refused (exit 2) when
    the schema is newer than this hivemesh knows.

    Stop metastores of an older hivemesh on this store first: they do not know the new schema.
    """
    from hivemesh.metastore.store import Store
    from hivemesh.storage.sql import SchemaTooNewError

    url = _db_url(config_path, db)
    before = _status(url)
    if before.state == "newer":
        raise _Failure(_too_new(before))
    if before.state == "up to date":
        click.echo(f"{before.url}: schema up to date at revision {before.head}; nothing to do")
        return
    n = len(before.pending)
    click.echo(
        f"{before.url}: upgrading the schema from {before.current or '(empty)'} to {before.head} "
        f"({n} migration{'s' if n != 1 else ''})"
    )
    try:
        store = Store(url, pool_size=1, migrate=False)
    except ConfigError as e:
        raise _Failure(str(e)) from e
    except Exception as e:
        raise _Failure(f"cannot open the metadata store {before.url}: {_first_line(e)}") from e
    try:
        store.upgrade(on_applied=lambda rev, doc: click.echo(f"  applied {rev}: {doc}"))
    except SchemaTooNewError as e:  # a newer hivemesh upgraded it meanwhile
        raise _Failure(_too_new(_status(url))) from e
    except Exception as e:
        raise _Failure(f"upgrade failed, the schema is unchanged: {_first_line(e)}") from e
    finally:
        store.dispose()
    after = _status(url)
    click.echo(f"{after.url}: schema {after.describe()} at revision {after.current}")
    if after.state != "up to date":  # pragma: no cover - Alembic reached head or raised
        raise SystemExit(1)


@click.command()
@_store_options
@click.option(
    "--to",
    "dest",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The backup file to write (must not exist).",
)
def backup(config_path: str | None, db: str | None, dest: Path) -> None:
    """Copy a SQLite metadata store to a file with SQLite's online backup API: one consistent
    snapshot, safe while the metastore serves (it is not stopped; writers are not blocked).

    The copy is a complete SQLite database (no -wal file): restore it by stopping the metastore,
    deleting metastore.db, metastore.db-wal and metastore.db-shm, and copying the backup to
    metastore.db. For PostgreSQL use pg_dump -Fc (README, "Backup and restore").
    """
    from hivemesh.metastore.store import schema_status
    from hivemesh.storage.sql import backup_sqlite

    url = _db_url(config_path, db)
    try:
        backup_sqlite(url, dest, what="metastore.db")
    except ConfigError as e:
        raise _Failure(str(e)) from e
    except Exception as e:
        raise _Failure(f"backup of {_shown(url)} failed: {_first_line(e)}") from e
    st = schema_status(f"sqlite:///{dest.resolve()}")
    click.echo(
        f"backed up {_shown(url)} to {dest} ({dest.stat().st_size} bytes, schema revision "
        f"{st.current or '(none)'})"
    )
