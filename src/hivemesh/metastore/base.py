"""Shared machinery of the local metastore's handler mixins: transactions, lookups, name rules."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
)

from hivemesh import storage
from hivemesh.hive.names import DEFAULT_CATALOG, parse_db_name
from hivemesh.metastore import notification_log
from hivemesh.metastore.schema import DBS, TBLS
from hivemesh.metastore.store import Store

log = logging.getLogger("hivemesh.metastore")

_NAME = re.compile(r"^[A-Za-z0-9_]+$")


MAX_NAME_LENGTH = 128  # DBS.NAME and the other identifier columns of Hive's schema


def validate_name(name: str | None) -> bool:
    """Hive's MetaStoreUtils.validateName: ASCII letters, digits and underscore, at most 128 long."""
    return bool(name) and len(name) <= MAX_NAME_LENGTH and bool(_NAME.match(name))


def env_props(environment_context: object) -> dict[str, str]:
    """An EnvironmentContext's properties (empty when the context is absent)."""
    props = getattr(environment_context, "properties", None) if environment_context is not None else None
    return dict(props or {})


@dataclass
class PendingEvent:
    """A notification event recorded by a call, written to ``NOTIFICATION_LOG`` when its transaction ends."""

    event_type: str
    message: str
    db: str | None = None
    table: str | None = None
    catalog: str | None = DEFAULT_CATALOG


@dataclass
class Tx:
    """An open write transaction: the connection, its notification events, and file-system work
    to run after it commits.

    Events recorded with :meth:`event` are appended to the notification log inside the same
    database transaction (no event without the change, no change without the event).
    """

    conn: sa.Connection
    after_commit: list[Callable[[], object]] = field(default_factory=list)
    events: list[PendingEvent] = field(default_factory=list)

    def event(
        self,
        event_type: str,
        message: str,
        db: str | None = None,
        table: str | None = None,
        catalog: str | None = DEFAULT_CATALOG,
    ) -> None:
        """Record a notification event (Hive event type string, JSON message) for this transaction."""
        self.events.append(PendingEvent(event_type, message, db, table, catalog))

    def flush_events(self) -> list[int]:
        """Append the recorded events to the notification log now; returns their event ids."""
        ids = notification_log.append_events(self.conn, self.events)
        self.events = []
        return ids


class CatalogBase:
    """State and helpers common to every handler mixin of :class:`LocalMetastore`."""

    def __init__(self, store: Store, warehouse: str, txn_timeout_s: float = 300):
        self.store = store
        self.warehouse = storage.normalize_location(warehouse)
        self.txn_timeout_ms = int(txn_timeout_s * 1000)  # hive.txn.timeout

    # ---- transactions
    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One database transaction; file-system actions queued on it run only after commit."""
        with self.store.write() as conn:
            tx = Tx(conn)
            yield tx
            if tx.events:
                tx.flush_events()
        for action in tx.after_commit:
            try:
                action()
            except Exception:  # storage clean-up must not turn a committed call into an error
                log.exception("post-commit storage action failed")

    def read(self):  # type: ignore[no-untyped-def]
        """One read transaction (a consistent view for the whole call)."""
        return self.store.read()

    # ---- names
    @staticmethod
    def db_name(name: str | None) -> tuple[str, str]:
        """Catalog and lower-cased database name; raises MetaException for '@cat#' forms without a db."""
        cat, db = parse_db_name(name)
        if db is None:
            raise MetaException(f"Database name is required: {name!r}")
        return cat, db

    # ---- lookups
    def db_row(
        self, conn: sa.Connection, name: str | None, exc: type[Exception] = NoSuchObjectException
    ) -> sa.Row:
        """The DBS row of a database; raises ``exc`` ("There is no database named x") if missing."""
        cat, db = self.db_name(name)
        row = conn.execute(sa.select(DBS).where(cat == DBS.c.CTLG_NAME, db == DBS.c.NAME)).first()
        if row is None:
            raise exc(
                f"There is no database named {db}"
                if cat == DEFAULT_CATALOG
                else f"There is no database {cat}.{db}"
            )
        return row

    def table_row(
        self,
        conn: sa.Connection,
        db: str | None,
        tbl: str | None,
        exc: type[Exception] = NoSuchObjectException,
        for_update: bool = False,
    ) -> sa.Row:
        """The TBLS row (with DB_NAME, CTLG_NAME, DB_LOCATION_URI); raises ``exc`` if missing."""
        cat, dbn = self.db_name(db)
        tn = (tbl or "").lower()
        q = (
            sa.select(TBLS, DBS.c.NAME.label("DB_NAME"), DBS.c.CTLG_NAME, DBS.c.DB_LOCATION_URI)
            .select_from(TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID))
            .where(cat == DBS.c.CTLG_NAME, dbn == DBS.c.NAME, tn == TBLS.c.TBL_NAME)
        )
        if for_update:
            q = q.with_for_update(of=TBLS)
        row = conn.execute(q).first()
        if row is None:
            raise exc(f"{dbn}.{tn} table not found")
        return row

    @staticmethod
    def already_exists(what: str) -> AlreadyExistsException:
        """AlreadyExistsException with ``what`` as its message."""
        return AlreadyExistsException(what)

    @staticmethod
    def invalid_name(name: str | None) -> InvalidObjectException:
        """InvalidObjectException for a name Hive would refuse."""
        return InvalidObjectException(f"{name} is not a valid object name")
