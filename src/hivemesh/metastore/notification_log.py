"""The notification log: appending events with dense ids, and reading them back.

Event ids come from the single row of ``NOTIFICATION_SEQUENCE``, read ``FOR UPDATE`` by the
writing transaction just before it commits: concurrent writers queue on that row, so ids are
dense (no gaps, no duplicates) and increase in commit order. Events are written last in a call's
transaction to keep that row locked as briefly as possible.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import NotificationEvent

from hivemesh.hive.names import DEFAULT_CATALOG
from hivemesh.metastore.txn_schema import NOTIFICATION_LOG, NOTIFICATION_SEQUENCE

MESSAGE_FORMAT = "json-0.2"  # Hive's JSONMessageEncoder format name


@dataclass
class PendingEvent:
    """A notification event recorded by a call, written to ``NOTIFICATION_LOG`` when its transaction
    ends: Hive's event type, its JSON message, and the catalog/database/table it is about."""

    event_type: str
    message: str
    db: str | None = None
    table: str | None = None
    catalog: str | None = DEFAULT_CATALOG


# PostgreSQL: the sequence row's update (which locks it, as SELECT ... FOR UPDATE would) and the
# events' insert in one statement, one round trip instead of three. The events come as parallel
# arrays, numbered by their position (WITH ORDINALITY counts from 1).
_PG_APPEND = sa.text(
    """
    WITH seq AS (
        UPDATE "NOTIFICATION_SEQUENCE" SET "NEXT_EVENT_ID" = "NEXT_EVENT_ID" + :n
        WHERE "NNI_ID" = 1
        RETURNING "NEXT_EVENT_ID" - :n AS first
    )
    INSERT INTO "NOTIFICATION_LOG" ("NL_ID", "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "CAT_NAME",
                                    "DB_NAME", "TBL_NAME", "MESSAGE", "MESSAGE_FORMAT")
    SELECT seq.first + e.i - 1, seq.first + e.i - 1, :now, e.type, e.cat, e.db, e.tbl, e.msg, :fmt
    FROM seq, unnest(CAST(:types AS text[]), CAST(:cats AS text[]), CAST(:dbs AS text[]),
                     CAST(:tbls AS text[]), CAST(:msgs AS text[]))
              WITH ORDINALITY AS e(type, cat, db, tbl, msg, i)
    RETURNING "EVENT_ID"
    """
)


def append_events(conn: sa.Connection, events: Sequence[PendingEvent]) -> list[int]:
    """Write ``events`` to NOTIFICATION_LOG with the next dense event ids; returns the ids assigned,
    in the order of ``events``. Raises ``sqlalchemy.exc.NoResultFound`` (SQLite) or
    ``RuntimeError`` (PostgreSQL) when the sequence row is missing, and the database's errors (a
    value too long for its column...)."""
    if not events:
        return []
    if conn.dialect.name == "postgresql":
        ids = sorted(
            conn.execute(
                _PG_APPEND,
                {
                    "n": len(events),
                    "now": int(time.time()),
                    "fmt": MESSAGE_FORMAT,
                    "types": [e.event_type for e in events],
                    "cats": [e.catalog for e in events],
                    "dbs": [e.db for e in events],
                    "tbls": [e.table for e in events],
                    "msgs": [e.message for e in events],
                },
            ).scalars()
        )
        if len(ids) != len(events):
            raise RuntimeError("NOTIFICATION_SEQUENCE has no row 1: the metastore schema is incomplete")
        return ids
    seq = conn.execute(
        sa.select(NOTIFICATION_SEQUENCE.c.NEXT_EVENT_ID)
        .where(NOTIFICATION_SEQUENCE.c.NNI_ID == 1)
        .with_for_update()
    ).scalar_one()
    now = int(time.time())
    ids = list(range(seq, seq + len(events)))
    conn.execute(
        NOTIFICATION_LOG.insert(),
        [
            {
                "NL_ID": eid,
                "EVENT_ID": eid,
                "EVENT_TIME": now,
                "EVENT_TYPE": e.event_type,
                "CAT_NAME": e.catalog,
                "DB_NAME": e.db,
                "TBL_NAME": e.table,
                "MESSAGE": e.message,
                "MESSAGE_FORMAT": MESSAGE_FORMAT,
            }
            for eid, e in zip(ids, events, strict=True)
        ],
    )
    conn.execute(
        NOTIFICATION_SEQUENCE.update()
        .where(NOTIFICATION_SEQUENCE.c.NNI_ID == 1)
        .values(NEXT_EVENT_ID=seq + len(events))
    )
    return ids


def to_event(row: sa.Row[Any]) -> NotificationEvent:
    """A NOTIFICATION_LOG row as the Thrift NotificationEvent (eventTime in seconds)."""
    return NotificationEvent(
        eventId=row.EVENT_ID,
        eventTime=row.EVENT_TIME,
        eventType=row.EVENT_TYPE,
        dbName=row.DB_NAME,
        tableName=row.TBL_NAME,
        message=row.MESSAGE,
        messageFormat=row.MESSAGE_FORMAT,
        catName=row.CAT_NAME,
    )


def read_events(
    conn: sa.Connection,
    last_event: int,
    max_events: int | None,
    skip_types: Iterable[str] = (),
    catalog: str | None = None,
    db: str | None = None,
    tables: Iterable[str] | None = None,
    only_types: Iterable[str] | None = None,
) -> list[NotificationEvent]:
    """Events with id > ``last_event`` in id order, at most ``max_events`` (all when None or <= 0),
    leaving out ``skip_types`` and, when given, keeping only ``only_types`` and one
    catalog/database/tables."""
    q = sa.select(NOTIFICATION_LOG).where(NOTIFICATION_LOG.c.EVENT_ID > last_event)
    skip = [t for t in skip_types if t]
    if skip:
        q = q.where(NOTIFICATION_LOG.c.EVENT_TYPE.not_in(skip))
    only = [t for t in only_types or () if t]
    if only:
        q = q.where(NOTIFICATION_LOG.c.EVENT_TYPE.in_(only))
    q = _scope(q, catalog, db, tables)
    q = q.order_by(NOTIFICATION_LOG.c.EVENT_ID)
    if max_events is not None and max_events > 0:
        q = q.limit(max_events)
    return [to_event(r) for r in conn.execute(q)]


def _scope(
    q: sa.Select[Any], catalog: str | None, db: str | None, tables: Iterable[str] | None
) -> sa.Select[Any]:
    """``q`` restricted to one catalog, database and tables (case-insensitive; None: no restriction)."""
    if catalog:
        q = q.where(sa.func.lower(NOTIFICATION_LOG.c.CAT_NAME) == catalog.lower())
    if db:
        q = q.where(sa.func.lower(NOTIFICATION_LOG.c.DB_NAME) == db.lower())
    names = [t.lower() for t in tables or () if t]
    if names:
        q = q.where(sa.func.lower(NOTIFICATION_LOG.c.TBL_NAME).in_(names))
    return q


def current_event_id(conn: sa.Connection) -> int:
    """Id of the newest event (0 when none was ever written)."""
    return int(
        conn.execute(
            sa.select(NOTIFICATION_SEQUENCE.c.NEXT_EVENT_ID).where(NOTIFICATION_SEQUENCE.c.NNI_ID == 1)
        ).scalar_one()
        - 1
    )


def count_events(
    conn: sa.Connection,
    from_event: int,
    to_event: int | None = None,
    catalog: str | None = None,
    db: str | None = None,
    limit: int | None = None,
) -> int:
    """Number of events with ``from_event`` < id (<= ``to_event``), scoped like :func:`read_events`;
    capped at ``limit`` when given and positive (Hive's NotificationEventsCountRequest)."""
    q = (
        sa.select(sa.func.count())
        .select_from(NOTIFICATION_LOG)
        .where(NOTIFICATION_LOG.c.EVENT_ID > from_event)
    )
    if to_event is not None and to_event > 0:
        q = q.where(NOTIFICATION_LOG.c.EVENT_ID <= to_event)
    q = _scope(q, catalog, db, None)
    n = int(conn.execute(q).scalar_one())
    return min(n, limit) if limit is not None and limit > 0 else n


def delete_older_than(conn: sa.Connection, event_time_s: int, keep_after_id: int | None = None) -> int:
    """Remove events older than ``event_time_s`` (seconds); never those with id > ``keep_after_id``.
    Returns how many were removed."""
    q = NOTIFICATION_LOG.delete().where(NOTIFICATION_LOG.c.EVENT_TIME < event_time_s)
    if keep_after_id is not None:
        q = q.where(NOTIFICATION_LOG.c.EVENT_ID <= keep_after_id)
    return conn.execute(q).rowcount or 0
