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
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
import sqlalchemy.pool
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from hivemesh import __version__
from hivemesh.config import ConfigError
from hivemesh.errors import HivemeshError

__all__ = [
    "SchemaStatus",
    "SchemaTooNewError",
    "SqlStore",
    "backup_sqlite",
    "inspect_schema",
    "normalize_url",
]

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


class SchemaTooNewError(HivemeshError, RuntimeError):
    """The store's schema is at an Alembic revision this hivemesh does not know: a newer hivemesh
    upgraded it. ``current``: that revision; ``head``: the newest one this hivemesh knows;
    ``url``: the store (password hidden)."""

    def __init__(self, url: str, current: str, head: str):
        self.url, self.current, self.head = url, current, head
        super().__init__(
            f"the schema of {url} is at revision {current}, newer than this hivemesh {__version__} "
            f"knows (head {head}): upgrade hivemesh"
        )


SchemaState = Literal["empty", "up to date", "needs upgrade", "newer"]


@dataclass(frozen=True)
class SchemaStatus:
    """Where a store's schema stands against the migrations of this hivemesh.

    ``url``: the store, password hidden. ``current``: the revision in its version table (``None``:
    no schema yet). ``head``: the newest revision this hivemesh knows. ``pending``: ``(revision,
    first line of its docstring)`` of every migration an upgrade would apply, oldest first (empty
    when up to date or newer).
    """

    url: str
    current: str | None
    head: str
    pending: tuple[tuple[str, str], ...]
    known: bool

    @property
    def state(self) -> SchemaState:
        """``"empty"`` (no schema), ``"up to date"``, ``"needs upgrade"`` or ``"newer"`` (a
        revision this hivemesh does not know)."""
        if self.current is None:
            return "empty"
        if not self.known:
            return "newer"
        return "needs upgrade" if self.pending else "up to date"

    def describe(self) -> str:
        """The state in words, e.g. ``needs upgrade (1 migration: 0004)``."""
        state = self.state
        if state == "empty":
            return "empty (no schema)"
        if state == "newer":
            return f"newer than this hivemesh (revision {self.current} unknown)"
        if state == "needs upgrade":
            n = len(self.pending)
            revs = ", ".join(rev for rev, _ in self.pending)
            return f"needs upgrade ({n} migration{'s' if n != 1 else ''}: {revs})"
        return "up to date"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: url, current, head, state, pending (``[{revision, description}]``),
        hivemesh_version."""
        return {
            "url": self.url,
            "current": self.current,
            "head": self.head,
            "state": self.state,
            "pending": [{"revision": r, "description": d} for r, d in self.pending],
            "hivemesh_version": __version__,
        }


def _script_directory(migrations: Path) -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations))
    return ScriptDirectory.from_config(cfg)


def _status(url: str, script: ScriptDirectory, current: str | None) -> SchemaStatus:
    head = script.get_current_head()
    assert head is not None, "migrations without revisions"
    chain = list(script.walk_revisions())  # newest first
    known = current is None or any(s.revision == current for s in chain)
    pending: list[tuple[str, str]] = []
    if known:
        for s in chain:
            if s.revision == current:
                break
            pending.append((s.revision, (s.doc or "").strip()))
    return SchemaStatus(url, current, head, tuple(reversed(pending)), known)


def inspect_schema(url: str, migrations: Path, version_table: str, what: str = "store") -> SchemaStatus:
    """The schema status of the store at ``url`` against the Alembic scripts in ``migrations``,
    read without writing anything (a SQLite file that does not exist is not created: ``empty``).

    Raises ConfigError (naming ``what``) for a bad URL, ``sqlalchemy.exc.OperationalError`` when
    the database cannot be reached.
    """
    parsed = normalize_url(url, what)
    shown = parsed.render_as_string(hide_password=True)
    script = _script_directory(migrations)
    db = parsed.database
    on_file = parsed.get_backend_name() == "sqlite" and db and db != ":memory:" and not db.startswith("file:")
    if on_file and not Path(str(db)).exists():
        return _status(shown, script, None)  # not created by looking
    engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(
                conn, opts={"version_table": version_table}
            ).get_current_revision()
    finally:
        engine.dispose()
    return _status(shown, script, current)


def backup_sqlite(url: str, dest: Path, what: str = "store") -> None:
    """Copy the SQLite store at ``url`` to the new file ``dest`` with SQLite's online backup API: a
    consistent snapshot (committed WAL content included) taken in one read transaction, safe while
    the store is served (writers are not blocked). ``dest`` is written beside itself first and
    renamed into place, in rollback-journal mode so the one file is the whole backup.

    Raises ConfigError for a URL that is not a SQLite file, a source file that does not exist or a
    ``dest`` that exists; ``sqlite3.Error`` when the copy fails (``dest`` is then not created).
    """
    parsed = normalize_url(url, what)
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        shown = parsed.render_as_string(hide_password=True)
        raise ConfigError(f"{what}: {shown} is not a SQLite file (for PostgreSQL use pg_dump -Fc)")
    if not Path(db).is_file():
        raise ConfigError(f"{what}: {db} does not exist")
    dest = Path(dest)
    if dest.exists():
        raise ConfigError(f"{dest} exists: remove it or choose another name")
    tmp = dest.with_name(f".{dest.name}.partial")
    tmp.unlink(missing_ok=True)
    try:
        with closing(sqlite3.connect(db, timeout=60)) as src, closing(sqlite3.connect(tmp)) as out:
            src.backup(out)  # all pages in one step: one snapshot
            out.execute("PRAGMA journal_mode=DELETE")
            (check,) = out.execute("PRAGMA quick_check").fetchone()
            if check != "ok":
                raise sqlite3.DatabaseError(f"the copy fails its check: {check}")
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)


WAL_SWITCH_RETRY_S = 60.0  # how long a new connection retries switching a busy database to WAL


def _sqlite_on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    dbapi_conn.isolation_level = None  # BEGIN is issued by _sqlite_on_begin
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=60000")
    _switch_to_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _switch_to_wal(cur: sqlite3.Cursor) -> None:
    """``PRAGMA journal_mode=WAL``, retried while the database is locked: connections opening a new
    database together all try the switch, which needs an exclusive lock, and SQLite answers
    "database is locked" at once instead of waiting when waiting could deadlock (seen in CI with
    three stores opened at the same moment). Idempotent; raises the last error after
    :data:`WAL_SWITCH_RETRY_S` seconds."""
    deadline = time.monotonic() + WAL_SWITCH_RETRY_S
    delay = 0.01
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _sqlite_on_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql(f"BEGIN {conn.info.get('begin_mode', 'DEFERRED')}")


IDLE_PING_S = 2.0
"""A pooled PostgreSQL connection unused for longer than this (seconds) is pinged before use."""


def ping_when_idle(engine: sa.Engine, idle_s: float = IDLE_PING_S) -> None:
    """Ping a pooled connection at checkout only when it sat idle for more than ``idle_s`` seconds.

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: one more round trip on every call, most
    of a single-object call's time on a busy server. A connection back in the pool moments ago is
    alive as far as a ping can tell, so only idle ones are checked; a dead one is replaced (the
    pool's own retry on ``DisconnectionError``). A database that restarts while a connection is
    busy or just returned still fails that connection's next statement once; SQLAlchemy then
    recycles the whole pool, so the calls after it reconnect.
    """

    @sa.event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @sa.event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("returned_at")
        if returned is None or time.monotonic() - returned <= idle_s:
            return  # just connected, or back in the pool moments ago
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as e:
            log.info("pooled connection to %s is gone (%s); reconnecting", engine.url.host, e)
            raise sa.exc.DisconnectionError() from e
        if alive is False:
            raise sa.exc.DisconnectionError()


class SqlStore:
    """A SQL database at a SQLAlchemy URL whose schema is the Alembic scripts in ``migrations``.

    ``version_table``: Alembic's version table of this schema. ``advisory_lock``: the PostgreSQL
    advisory lock key that serialises concurrent upgrades of this schema. ``pool_size``: pooled
    connections. ``what``: the setting the URL comes from, named in errors.

    Keyword options for stores with other needs: ``sqlite_pool`` and ``postgresql_pool`` are extra
    ``create_engine`` arguments (``pool_size``, ``max_overflow``, ``pool_timeout``) for a SQLite
    file and for PostgreSQL, over the defaults; ``read_isolation`` gives :meth:`read` its own
    PostgreSQL engine at that isolation level (e.g. ``"REPEATABLE READ"``, one snapshot per read;
    SQLite transactions already read one snapshot). ``migrate=False`` leaves the schema as it is
    (call :meth:`upgrade`).

    Raises ConfigError for a bad URL, ``sqlalchemy.exc.OperationalError`` when the database
    cannot be reached and SchemaTooNewError when its schema is newer than these migrations.
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
        migrate: bool = True,
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
                **(postgresql_pool or {}),
            }
            self.engine = sa.create_engine(self.url, isolation_level="READ COMMITTED", **options)
            ping_when_idle(self.engine)
            self.read_engine = self.engine
            if read_isolation is not None:
                self.read_engine = sa.create_engine(self.url, isolation_level=read_isolation, **options)
                ping_when_idle(self.read_engine)
        if migrate:
            self.upgrade()

    @property
    def display_url(self) -> str:
        """The URL with any password hidden."""
        return self.url.render_as_string(hide_password=True)

    def upgrade(self, on_applied: Callable[[str, str], None] | None = None) -> SchemaStatus:
        """Bring the schema to the newest revision (Alembic ``upgrade head``) in one transaction
        that concurrent processes opening the same store wait for; returns the status found before
        (its ``pending``: the migrations applied).

        ``on_applied(revision, description)`` is called after each migration runs (inside the
        transaction; an environment that passes ``config.attributes["on_version_apply"]`` on to
        Alembic is needed). Raises SchemaTooNewError, changing nothing, when the store is at a
        revision these migrations do not know.
        """
        cfg = Config()
        cfg.set_main_option("script_location", str(self.migrations))
        script = ScriptDirectory.from_config(cfg)
        with self.write() as conn:
            if self.dialect == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(self._advisory_lock)))
            context = MigrationContext.configure(conn, opts={"version_table": self.version_table})
            status = _status(self.display_url, script, context.get_current_revision())
            if status.state == "newer":
                assert status.current is not None
                raise SchemaTooNewError(status.url, status.current, status.head)
            if status.pending:
                if status.current is None:
                    log.info("creating a new schema (%s) at revision %s in %s", self.version_table,
                             status.head, self.display_url)  # fmt: skip
                else:
                    log.info(
                        "upgrading %s schema from %s to %s (%s)", self.version_table, status.current,
                        status.head, ", ".join(rev for rev, _ in status.pending),
                    )  # fmt: skip
                cfg.attributes["connection"] = conn
                cfg.attributes["version_table"] = self.version_table
                if on_applied is not None:

                    def _applied(*, step: Any, **_: Any) -> None:
                        on_applied(step.up_revision_id, (step.up_revision.doc or "").strip())

                    cfg.attributes["on_version_apply"] = [_applied]
                command.upgrade(cfg, "head")
        return status

    @contextmanager
    def write(self) -> Iterator[sa.Connection]:
        """A connection in a write transaction; commits when the block ends, rolls back on error. Raises
        ``sqlalchemy.exc.OperationalError`` when the database cannot be reached (or, on SQLite, stays
        locked past the 60 s busy timeout) and the database's other errors
        (``sqlalchemy.exc.IntegrityError`` ...); the block's own exception propagates after the rollback."""
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
    def exclusive(self, key: int) -> Iterator[bool]:
        """Whether this process holds the store-wide lock ``key`` for the block: on PostgreSQL a
        session advisory lock (``pg_try_advisory_lock``, never waiting; released at the end, or by
        the server when the process dies), so one of several processes on the store runs the
        block; on SQLite always True (writers are serialised by the database itself). Raises
        ``sqlalchemy.exc.OperationalError`` when PostgreSQL cannot be reached."""
        if self.dialect == "sqlite":
            yield True
            return
        with self.engine.connect() as conn:
            got = bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            conn.commit()
            try:
                yield got
            finally:
                if got:
                    conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    conn.commit()

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A connection in a read transaction (on PostgreSQL at ``read_isolation`` when given). Raises
        ``sqlalchemy.exc.OperationalError`` when the database cannot be reached; the block's own exception
        propagates after the rollback."""
        with self._read_lock or nullcontext(), self.read_engine.begin() as conn:
            yield conn

    @contextmanager
    def read_statement(self) -> Iterator[sa.Connection]:
        """A connection for a read made of a single statement, which reads one snapshot by itself:
        on PostgreSQL in autocommit mode, so no BEGIN and COMMIT round trips surround it (the
        statement is then the call's only round trip); on SQLite the same as :meth:`read`. Raises
        ``sqlalchemy.exc.OperationalError`` when the database cannot be reached."""
        if self.dialect == "sqlite":
            with self.read() as conn:
                yield conn
            return
        with self.read_engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection (the store can still be used; it reconnects)."""
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()
