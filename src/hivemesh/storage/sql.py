"""A SQL database that hivemesh keeps its own state in: SQLite (embedded) or PostgreSQL.

:class:`SqlStore` sets up the engine (SQLite in WAL mode with one writer at a time inside the
process, PostgreSQL through psycopg 3 at READ COMMITTED), brings an Alembic schema to its newest
revision on construction (concurrent processes serialised by a PostgreSQL advisory lock), and gives
one database transaction per block (:meth:`SqlStore.write`, :meth:`SqlStore.read`): a block that
raises leaves the database as it was. Each schema keeps its Alembic revision in its own version
table, so several stores (the replicator's, the proxy's remotes, a metastore) may share one database.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import sqlalchemy.pool
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from hivemesh.config import ConfigError

__all__ = ["SqlStore", "normalize_url"]

log = logging.getLogger(__name__)


def normalize_url(url: str, what: str = "store") -> sa.URL:
    """``url`` parsed, plain ``postgresql://`` meaning psycopg 3.

    Raises ConfigError (naming ``what``) for text that is not a SQLAlchemy URL, or a database other
    than SQLite and PostgreSQL.
    """
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as e:
        raise ConfigError(f"{what}: {url!r} is not a SQLAlchemy URL") from e
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        shown = parsed.render_as_string(hide_password=True)
        raise ConfigError(f"{what}: {shown} must start with sqlite:/// or postgresql+psycopg://")
    return parsed


def _sqlite_on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    dbapi_conn.isolation_level = None  # BEGIN is issued by _sqlite_on_begin
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql(f"BEGIN {conn.info.get('begin_mode', 'DEFERRED')}")


class SqlStore:
    """A SQL database at a SQLAlchemy URL whose schema is the Alembic scripts in ``migrations``.

    ``version_table``: Alembic's version table of this schema. ``advisory_lock``: the PostgreSQL
    advisory lock key that serialises concurrent upgrades of this schema. ``pool_size``: pooled
    connections. ``what``: the setting the URL comes from, named in errors.

    Keyword options for stores with other needs: ``sqlite_pool`` and ``postgresql_pool`` are extra
    ``create_engine`` arguments (``pool_size``, ``max_overflow``, ``pool_timeout``) for a SQLite
    file and for PostgreSQL, over the defaults; ``read_isolation`` gives :meth:`read` its own
    PostgreSQL engine at that isolation level (e.g. ``"REPEATABLE READ"``, one snapshot per read;
    SQLite transactions already read one snapshot).

    Raises ConfigError for a bad URL and ``sqlalchemy.exc.OperationalError`` when the database
    cannot be reached.
    """

    def __init__(
        self,
        url: str,
        migrations: Path,
        version_table: str,
        advisory_lock: int,
        pool_size: int = 4,
        what: str = "store",
        *,
        sqlite_pool: Mapping[str, Any] | None = None,
        postgresql_pool: Mapping[str, Any] | None = None,
        read_isolation: str | None = None,
    ):
        self.url = normalize_url(url, what)
        self.dialect = self.url.get_backend_name()
        self.migrations = migrations
        self.version_table = version_table
        self._advisory_lock = advisory_lock
        self._write_lock: threading.RLock | None = None
        self._read_lock: threading.RLock | None = None
        if self.dialect == "sqlite":
            self._write_lock = threading.RLock()
            db = self.url.database
            if not db or db == ":memory:" or db.startswith("file:"):
                # one connection shared by every thread: reads wait for it as writes do
                self._read_lock = self._write_lock
                self.engine = sa.create_engine(
                    self.url, connect_args={"check_same_thread": False}, poolclass=sa.pool.StaticPool
                )
            else:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
                self.engine = sa.create_engine(
                    self.url,
                    connect_args={"check_same_thread": False, "timeout": 60},
                    **{"pool_size": pool_size, **(sqlite_pool or {})},
                )
            sa.event.listen(self.engine, "connect", _sqlite_on_connect)
            sa.event.listen(self.engine, "begin", _sqlite_on_begin)
            self.read_engine = self.engine
        else:
            options: dict[str, Any] = {
                "pool_size": pool_size,
                "max_overflow": pool_size,
                "pool_timeout": 60,
                "pool_pre_ping": True,
                **(postgresql_pool or {}),
            }
            self.engine = sa.create_engine(self.url, isolation_level="READ COMMITTED", **options)
            self.read_engine = self.engine
            if read_isolation is not None:
                self.read_engine = sa.create_engine(self.url, isolation_level=read_isolation, **options)
        self.upgrade()

    @property
    def display_url(self) -> str:
        """The URL with any password hidden."""
        return self.url.render_as_string(hide_password=True)

    def upgrade(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``) in one transaction
        that concurrent processes opening the same store wait for."""
        cfg = Config()
        cfg.set_main_option("script_location", str(self.migrations))
        with self.write() as conn:
            if self.dialect == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(self._advisory_lock)))
            context = MigrationContext.configure(conn, opts={"version_table": self.version_table})
            current = context.get_current_revision()
            head = ScriptDirectory.from_config(cfg).get_current_head()
            if current != head:
                log.info("upgrading %s schema from %s to %s", self.version_table, current, head)
                cfg.attributes["connection"] = conn
                cfg.attributes["version_table"] = self.version_table
                command.upgrade(cfg, "head")

    @contextmanager
    def write(self) -> Iterator[sa.Connection]:
        """A connection in a write transaction; commits when the block ends, rolls back on error."""
        if self._write_lock is None:
            with self.engine.begin() as conn:
                yield conn
            return
        with self._write_lock, self.engine.connect() as conn:
            conn.info["begin_mode"] = "IMMEDIATE"
            try:
                with conn.begin():
                    yield conn
            finally:
                conn.info["begin_mode"] = "DEFERRED"

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A connection in a read transaction (on PostgreSQL at ``read_isolation`` when given)."""
        with self._read_lock or nullcontext(), self.read_engine.begin() as conn:
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection (the store can still be used; it reconnects)."""
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()
