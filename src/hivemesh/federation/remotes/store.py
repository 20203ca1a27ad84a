"""The proxy's own store of remotes: a SQL database (SQLite or PostgreSQL) with the table
``HIVEMESH_REMOTES``, its schema versioned by Alembic as the metastore's is (the scripts in
``remotes/migrations``, their version in ``HIVEMESH_REMOTES_VERSION`` so a store may share a
database with a metastore). Engine, upgrades and transactions are :class:`~hivemesh.storage.sql.SqlStore`'s.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hivemesh.federation.remotes.spec import RemoteError, RemoteExistsError, RemoteSpec
from hivemesh.storage.sql import SqlStore

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "HIVEMESH_REMOTES_VERSION"
"""Alembic's version table of the remotes schema (not ``alembic_version``: that is the metastore's)."""

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
_PG_CREATE_LOCK = 0x484D5245  # advisory lock key serialising concurrent schema upgrades on PostgreSQL


class RemoteStore(SqlStore):
    """The remotes of a proxy in a SQL store at a SQLAlchemy URL (``sqlite:///path`` or
    ``postgresql+psycopg://user@host/db``; plain ``postgresql://`` means psycopg).

    The schema is created or upgraded to the newest revision on construction (a SQLite file's
    directory is created too). Every method is one database transaction; several processes may
    share one store (SQLite in WAL mode, or PostgreSQL, where a concurrent duplicate ``add`` still
    raises RemoteExistsError).
    Raises ConfigError for a URL that is neither SQLite nor PostgreSQL, and
    ``sqlalchemy.exc.OperationalError`` when the database cannot be reached.
    """

    def __init__(self, url: str):
        super().__init__(
            url,
            MIGRATIONS,
            VERSION_TABLE,
            _PG_CREATE_LOCK,
            pool_size=4,
            what="store",
            postgresql_pool={"pool_size": 2, "max_overflow": 4},
        )

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
            with self.write() as conn:
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
        with self.write() as conn:
            res = conn.execute(
                sa.delete(REMOTES).where(
                    c.LOCAL_DB == local_db.lower(), c.LOCAL_TABLE == (local_table or "").lower()
                )
            )
            return res.rowcount > 0

    def drop_database_links(self, local_db: str) -> int:
        """Remove the database link ``local_db`` and every table link inside that database (as
        when the local database is dropped). Returns how many links were removed."""
        with self.write() as conn:
            res = conn.execute(sa.delete(REMOTES).where(REMOTES.c.LOCAL_DB == local_db.lower()))
            return res.rowcount

    def get(self, local_db: str, local_table: str | None = None) -> RemoteSpec | None:
        """The database link ``local_db`` (``local_table`` None) or table link
        ``local_db.local_table`` (names case-insensitive), or None."""
        c = REMOTES.c
        with self.read() as conn:
            row = conn.execute(
                sa.select(REMOTES).where(
                    c.LOCAL_DB == local_db.lower(), c.LOCAL_TABLE == (local_table or "").lower()
                )
            ).first()
        return None if row is None else _spec(row)

    def list(self) -> list[RemoteSpec]:
        """Every remote, ordered by local name (a database link before the table links inside it)."""
        c = REMOTES.c
        with self.read() as conn:
            rows = conn.execute(sa.select(REMOTES).order_by(c.LOCAL_DB, c.LOCAL_TABLE)).all()
        return [_spec(r) for r in rows]

    def close(self) -> None:
        """Close every pooled connection (the store can still be used; it reconnects)."""
        self.dispose()


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
