"""The SQL engine of the metadata store: connection set-up, schema upgrades, transactions.

One database transaction per Thrift call: :meth:`Store.write` and :meth:`Store.read` give a
connection inside a transaction that commits when the block ends and rolls back on any error, so
a failed call leaves the store as it was. SQLite runs in WAL mode with writers serialised inside
the process (``BEGIN IMMEDIATE``), PostgreSQL through psycopg 3 at READ COMMITTED with row locks.
The machinery is :class:`~hivemesh.storage.sql.SqlStore`'s; the schema's Alembic revision is kept
in Alembic's default table ``alembic_version``, as it always was.
"""

from __future__ import annotations

from pathlib import Path

from hivemesh.storage.sql import SchemaStatus, SqlStore, inspect_schema

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"
"""Alembic's version table of the metastore schema (its default: existing stores have it)."""
_PG_LOCK = 0x484D534D  # advisory lock key serialising concurrent schema upgrades on PostgreSQL


PG_OVERFLOW = 4
"""PostgreSQL connections a store may open beyond its pool under load (closed when returned)."""

SQLITE_POOL = 64
"""SQLite connections a store keeps open once opened (at least ``pool_size``). Beyond the pool a
connection is opened for the call and closed after it, and opening one (its PRAGMAs, the WAL check)
was 11% of the server's time in a py-spy profile of 64 concurrent get_table_req clients, which then
got fewer calls through than 16 clients did. A SQLite connection is cheap to keep: no server
process behind it, its page cache grows only with the pages it reads."""


class Store(SqlStore):
    """A metadata store at a SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).

    The schema is created or upgraded to the newest Alembic revision on construction (unless
    ``migrate=False``). ``pool_size``: pooled connections (on PostgreSQL plus :data:`PG_OVERFLOW`
    under load; the metastore's ``db_pool_size``). Raises
    ConfigError for a URL that is neither SQLite nor PostgreSQL, ``sqlalchemy.exc.OperationalError``
    when the database cannot be reached, :class:`~hivemesh.storage.sql.SchemaTooNewError` when its
    schema is at a revision this hivemesh does not know (a newer hivemesh upgraded it).

    :meth:`read` gets one snapshot for the whole call: a read takes several queries (base rows,
    then child rows), and PostgreSQL runs it at REPEATABLE READ on a pool of its own so that a
    writer committing in between cannot tear the objects it returns (without switching a
    connection's isolation level on every checkout). SQLite transactions already read one snapshot.
    """

    def __init__(self, url: str, pool_size: int = 12, *, migrate: bool = True):
        # PostgreSQL: ``pool_size`` connections stay open and at most PG_OVERFLOW more are opened
        # under load (a call waits for a pooled connection rather than failing). Connections beyond
        # the pool are closed when returned, so a pool smaller than the concurrent calls makes
        # PostgreSQL start a backend per call: measured, 16 clients on 2 workers got 1,020 get_table
        # calls/s with 6 (+10) and 1,399 with 12 (bench/metastore.py). Writes run at READ
        # COMMITTED with row locks.
        super().__init__(
            url,
            MIGRATIONS,
            VERSION_TABLE,
            _PG_LOCK,
            pool_size=pool_size,
            what="metastore.db",
            sqlite_pool={"pool_size": max(pool_size, SQLITE_POOL), "max_overflow": 64},
            postgresql_pool={"pool_size": pool_size, "max_overflow": PG_OVERFLOW, "pool_timeout": 120},
            read_isolation="REPEATABLE READ",
            migrate=migrate,
        )


def schema_status(url: str) -> SchemaStatus:
    """The metastore schema's status at ``url`` (current and head revision, pending migrations),
    read without changing anything. Raises ConfigError for a bad URL,
    ``sqlalchemy.exc.OperationalError`` when the database cannot be reached."""
    return inspect_schema(url, MIGRATIONS, VERSION_TABLE, what="metastore.db")
