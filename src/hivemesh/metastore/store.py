"""The SQL engine of the metadata store: connection set-up, schema upgrades, transactions.

One database transaction per Thrift call: :meth:`Store.write` and :meth:`Store.read` give a
connection inside a transaction that commits when the block ends and rolls back on any error, so
a failed call leaves the store as it was. SQLite runs in WAL mode with writers serialised inside
the process (``BEGIN IMMEDIATE``), PostgreSQL through psycopg 3 at READ COMMITTED with row locks.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
import sqlalchemy.pool
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"


def _sqlite_path(url: sa.URL) -> Path | None:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


class Store:
    """A metadata store at a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).

    The schema is created or upgraded to the newest Alembic revision on construction.
    Raises ``sqlalchemy.exc.OperationalError`` when the database cannot be reached.
    """

    def __init__(self, url: str, pool_size: int = 16):
        self.url = sa.make_url(url)
        if self.url.drivername == "postgresql":
            self.url = self.url.set(drivername="postgresql+psycopg")
        self.dialect = self.url.get_backend_name()
        self._write_lock = threading.RLock() if self.dialect == "sqlite" else None
        if self.dialect == "sqlite":
            path = _sqlite_path(self.url)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            if path is None:  # in-memory: one connection shared by every thread
                self.engine = sa.create_engine(
                    self.url, connect_args={"check_same_thread": False}, poolclass=sa.pool.StaticPool
                )
            else:
                self.engine = sa.create_engine(
                    self.url,
                    connect_args={"check_same_thread": False, "timeout": 60},
                    pool_size=pool_size,
                    max_overflow=64,
                )
            sa.event.listen(self.engine, "connect", self._sqlite_on_connect)
            sa.event.listen(self.engine, "begin", self._sqlite_on_begin)
            self.read_engine = self.engine  # SQLite transactions already read one snapshot
        else:
            # PostgreSQL allows 100 connections by default for all its clients: stay well below it
            # (a call waits for a pooled connection rather than failing). Writes run at READ
            # COMMITTED with row locks; reads get their own pool at REPEATABLE READ (one snapshot
            # per call without switching a connection's isolation level on every checkout).
            def pg_engine(isolation: str) -> sa.Engine:
                """A pooled psycopg engine whose transactions run at ``isolation``."""
                return sa.create_engine(
                    self.url,
                    pool_size=min(pool_size, 6),
                    max_overflow=10,
                    pool_timeout=120,
                    pool_pre_ping=True,
                    isolation_level=isolation,
                )

            self.engine = pg_engine("READ COMMITTED")
            self.read_engine = pg_engine("REPEATABLE READ")
        self.upgrade()

    @staticmethod
    def _sqlite_on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()

    @staticmethod
    def _sqlite_on_begin(conn: sa.Connection) -> None:
        mode = conn.info.get("begin_mode", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    def upgrade(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``)."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.write() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
            head = ScriptDirectory.from_config(cfg).get_current_head()
            if current != head:
                log.info("upgrading metastore schema from %s to %s", current, head)
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")

    @contextmanager
    def write(self) -> Iterator[sa.Connection]:
        """A connection in a write transaction; commits on success, rolls back on error."""
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
        """A connection in a read transaction with one snapshot for the whole call.

        A read takes several queries (base rows, then child rows); PostgreSQL runs it at
        REPEATABLE READ so that a writer committing in between cannot tear the objects it returns.
        SQLite transactions already read one snapshot.
        """
        with self.read_engine.begin() as conn:
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()
