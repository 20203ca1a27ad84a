"""Shared machinery of the local metastore's handler mixins: transactions, lookups, name rules."""

from __future__ import annotations

import functools
import getpass
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidObjectException,
    MetaException,
    NoSuchObjectException,
    Partition,
    Table,
)

from hivemesh import storage
from hivemesh.hive.names import DEFAULT_CATALOG, parse_db_name
from hivemesh.metastore import fast_stats, notification_log
from hivemesh.metastore.notification_log import PendingEvent
from hivemesh.metastore.schema import DBS, TBLS
from hivemesh.metastore.store import Store
from hivemesh.thrift.server import connection

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_T = TypeVar("_T")


MAX_NAME_LENGTH = 128  # DBS.NAME and the other identifier columns of Hive's schema


def validate_name(name: str | None) -> bool:
    """Hive's MetaStoreUtils.validateName: ASCII letters, digits and underscore, at most 128 long."""
    if not name:
        return False
    return len(name) <= MAX_NAME_LENGTH and bool(_NAME.match(name))


@functools.cache
def server_user() -> str | None:
    """The user name the metastore process runs as (None when the system cannot say)."""
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # no USER/LOGNAME and no passwd entry for the uid
        return None


def calling_user() -> str | None:
    """The user of the calling connection (its ``set_ugi`` or Kerberos user), else the server's.

    As Hive 3/4, which take the UGI's user: without ``set_ugi`` that is the metastore process's own
    user (:func:`server_user`). (Hive 2.3 left a database created without an owner unowned.)
    """
    return connection().user or server_user()


def request_user(given: str | None) -> str:
    """The user to record on a txn or lock: the connection's Kerberos user when it authenticated
    (a client cannot claim another name) unless it is a proxy user acting for the request's user,
    else the name the request carries (``""`` when none)."""
    state = connection()
    if state.principal is not None and state.user and not (state.may_impersonate and given):
        return state.user
    return given or ""


def java_list(values: Any) -> str:
    """A sequence as Java's ``List.toString`` writes it, for messages copied from Hive:
    ``["eu", "1999"]`` -> ``[eu, 1999]``."""
    return "[" + ", ".join(str(v) for v in values or []) + "]"


def env_props(environment_context: object) -> dict[str, str]:
    """An EnvironmentContext's properties (empty when the context is absent)."""
    props = getattr(environment_context, "properties", None) if environment_context is not None else None
    return dict(props or {})


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
    """State and helpers common to every handler mixin of :class:`LocalMetastore`.

    The methods declared at the end (for type checkers only) are implemented by one mixin and
    called by others; :class:`~hivemesh.metastore.handler.LocalMetastore` combines them all.
    """

    def __init__(
        self,
        store: Store,
        warehouse: str,
        txn_timeout_s: float = 300,
        allowed_locations: Sequence[str] = (),
    ):
        self.store = store
        self.warehouse = storage.normalize_location(warehouse)
        self.txn_timeout_ms = int(txn_timeout_s * 1000)  # hive.txn.timeout
        roots = [storage.normalize_location(r) for r in allowed_locations]
        self.allowed_locations = tuple(dict.fromkeys([self.warehouse, *roots])) if roots else ()

    def checked_location(self, location: str) -> str:
        """``location`` given by a client, normalized (:func:`hivemesh.storage.normalize_location`:
        ``..`` resolved); MetaException when the operator restricted locations
        (``metastore.allowed_locations``) and it is under none of them nor the warehouse, or when it
        holds a NUL character (no file system takes one)."""
        if "\x00" in location:
            raise MetaException(f"location {location!r} holds a NUL character")
        loc = storage.normalize_location(location)
        if self.allowed_locations and not any(
            loc == root or loc.startswith(root.rstrip("/") + "/") for root in self.allowed_locations
        ):
            raise MetaException(
                f"location {loc} is outside the locations this metastore allows "
                f"(metastore.allowed_locations: {', '.join(self.allowed_locations)})"
            )
        return loc

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

    # ---- storage I/O outside write transactions
    def _gather_listings(
        self, listings: fast_stats.Listings, plan: Callable[[sa.Connection], list[str | None]]
    ) -> None:
        """List, before the write transaction, the locations ``plan`` finds in a read transaction.
        Best effort: when the plan fails, nothing is listed and the write transaction raises the
        call's error (or finds what to list, see :meth:`_write_with_listings`)."""
        try:
            with self.read() as conn:
                locations = plan(conn)
        except Exception as e:  # noqa: BLE001 - the write transaction raises it to the client
            log.debug("no listings gathered before the write transaction: %s", e)
            return
        listings.take(locations)

    def _write_with_listings(self, listings: fast_stats.Listings, work: Callable[[Tx], _T]) -> _T:
        """``work`` in a write transaction; when it needs a location not listed yet (the table
        changed since :meth:`_gather_listings`), roll back, list it outside, and run it again."""
        while True:
            try:
                with self.write() as tx:
                    return work(tx)
            except fast_stats.UnlistedLocations as e:
                listings.take(e.locations)

    def read(self) -> AbstractContextManager[sa.Connection]:
        """One read transaction (a consistent view for the whole call)."""
        return self.store.read()

    def read_statement(self) -> AbstractContextManager[sa.Connection]:
        """A connection for a read of one statement (no transaction round trips on PostgreSQL)."""
        return self.store.read_statement()

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
    ) -> sa.Row[Any]:
        """The DBS row of a database; raises ``exc`` ("There is no database named x") if missing."""
        cat, db = self.db_name(name)
        row = conn.execute(sa.select(DBS).where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == db)).first()
        if row is None:
            self.db_row_missing(cat, db, exc)
        return row

    @staticmethod
    def db_row_missing(cat: str, db: str, exc: type[Exception] = NoSuchObjectException) -> NoReturn:
        """Raise ``exc`` ("There is no database named x") for a missing database."""
        raise exc(
            f"There is no database named {db}"
            if cat == DEFAULT_CATALOG
            else f"There is no database {cat}.{db}"
        )

    def table_row(
        self,
        conn: sa.Connection,
        db: str | None,
        tbl: str | None,
        exc: type[Exception] = NoSuchObjectException,
        for_update: bool = False,
    ) -> sa.Row[Any]:
        """The TBLS row (with DB_NAME, CTLG_NAME, DB_LOCATION_URI, DB_MANAGED_LOCATION_URI); raises
        ``exc`` if missing."""
        cat, dbn = self.db_name(db)
        tn = (tbl or "").lower()
        q = (
            sa.select(
                TBLS,
                DBS.c.NAME.label("DB_NAME"),
                DBS.c.CTLG_NAME,
                DBS.c.DB_LOCATION_URI,
                DBS.c.DB_MANAGED_LOCATION_URI,
            )
            .select_from(TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID))
            .where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == dbn, TBLS.c.TBL_NAME == tn)
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

    if TYPE_CHECKING:
        # ---- implemented by one mixin, called by others
        # TableMixin
        @staticmethod
        def _table_image(conn: sa.Connection, cat: str, db: str, tbl: str) -> Table:
            """The table as ``get_table`` returns it, inside ``conn``'s transaction."""
            ...

        def _drop_table_tx(self, tx: Tx, db: str | None, tbl: str, delete_data: bool) -> None:
            """Drop one table inside ``tx`` (with its DROP_TABLE event)."""
            ...

        def get_table(self, dbname: str | None, tbl_name: str) -> Table:
            """HMS get_table."""
            ...

        def get_all_tables(self, db_name: str | None) -> list[str]:
            """HMS get_all_tables."""
            ...

        def get_table_objects_by_name(self, dbname: str | None, tbl_names: list[str]) -> list[Table]:
            """HMS get_table_objects_by_name."""
            ...

        # PartitionMixin
        def _delete_partition_rows(self, conn: sa.Connection, part_ids: sa.Select[Any] | list[int]) -> None:
            """Delete partition rows (their children go by ON DELETE CASCADE)."""
            ...

        def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Partition:
            """HMS get_partition."""
            ...

        def get_partitions(self, db_name: str | None, tbl_name: str, max_parts: int) -> list[Partition]:
            """HMS get_partitions."""
            ...

        def get_partitions_by_filter(
            self, db_name: str | None, tbl_name: str, filter: str, max_parts: int
        ) -> list[Partition]:  # noqa: A002
            """HMS get_partitions_by_filter."""
            ...

        def get_partition_names(self, db_name: str | None, tbl_name: str, max_parts: int) -> list[str]:
            """HMS get_partition_names."""
            ...

        # DatabaseMixin
        def _create_database_tx(self, tx: Tx, database: Any) -> None:
            """Create a database inside ``tx`` (with its event)."""
            ...

        def _drop_database_tx(self, tx: Tx, name: str | None, delete_data: bool, cascade: bool) -> None:
            """Drop a database inside ``tx`` (with its events)."""
            ...

        # ConstraintMixin
        def add_table_constraints(self, tx: Tx, cat: str, constraints: Any) -> None:
            """Store the constraints of a table being created in ``tx``."""
            ...

        # StatisticsMixin
        def _key_names(self, conn: sa.Connection, tbl_id: int) -> list[str]:
            """A table's partition key names, in order."""
            ...

        # TxnMixin
        def open_txn_row(
            self, conn: sa.Connection, txn_id: int | None, for_update: bool = False
        ) -> sa.Row[Any]:
            """The TXNS row of an open txn; NoSuchTxnException / TxnAbortedException."""
            ...

        def on_table_dropped(self, conn: sa.Connection, db: str, table: str) -> None:
            """Forget a dropped table's write ids and txn components."""
            ...

        def on_table_renamed(
            self, conn: sa.Connection, old_db: str, old_table: str, new_db: str, new_table: str
        ) -> None:
            """Move a renamed table's write ids, txn components and locks to its new name."""
            ...

        # LockMixin
        @staticmethod
        def _serialize_lock_decisions(conn: sa.Connection) -> int:
            """Take the NEXT_LOCK_ID row FOR UPDATE; returns the next lock id."""
            ...

        def release_txn_locks(self, conn: sa.Connection, txn_id: int) -> None:
            """Drop every lock held or awaited by ``txn_id``."""
            ...
