"""Hive locks: ``lock``, ``check_lock``, ``unlock``, ``show_locks`` on table ``HIVE_LOCKS``.

Semantics are those of Hive 3/4's transaction handler, written from its documented behaviour.

Storage
    One ``HIVE_LOCKS`` row per component of a request: ``HL_LOCK_EXT_ID`` is the lock id handed to
    the client (from the single-row counter ``NEXT_LOCK_ID``), ``HL_LOCK_INT_ID`` the component's
    position in the request, from 1. ``HL_LOCK_STATE`` is ``a`` (acquired) or ``w`` (waiting);
    ``HL_LOCK_TYPE`` is one of :data:`TYPE_CODES`. Times are epoch milliseconds. Locks taken inside a
    transaction (``HL_TXNID`` > 0) keep ``HL_LAST_HEARTBEAT`` = 0, as in Hive: the transaction's
    heartbeat keeps them alive and commit/abort releases them (:meth:`LockMixin.release_txn_locks`).
    Locks without a transaction (``HL_TXNID`` = 0) expire when their last heartbeat is older than
    ``hive.txn.timeout`` (:meth:`LockMixin.expire_locks`).

Compatibility of lock types (symmetric; "x" = conflict)::

                    SHARED_READ  SHARED_WRITE  EXCL_WRITE  EXCLUSIVE
      SHARED_READ        .            .            .           x
      SHARED_WRITE       .            .            x           x
      EXCL_WRITE         .            x            x           x
      EXCLUSIVE          x            x            x           x

    SHARED_WRITE is compatible with itself since Hive 2.1: concurrent writers of an ACID table are
    reconciled at commit (write-set conflict detection), not by locks. EXCL_WRITE (Hive 4) is the
    exclusive writer lock that still lets readers in.

    One exception, as in Hive 3/4: a database-level SHARED_READ (taken by Hive on the database of
    every object a query touches, to keep it from being dropped) does not conflict with an
    EXCLUSIVE on a table or partition of that database; an EXCLUSIVE on the database itself does
    conflict with it.

Overlap
    Two components overlap when they name the same database and either is database-level, or they
    name the same table and either is table-level or both name the same partition. Different
    partitions of one table never conflict; a table-level lock overlaps all of its partitions.

Granting
    A request is all-or-nothing: every component is acquired, or the whole request waits. Granting
    is first come, first served: a component waits behind ANY earlier lock (lower ext id), acquired
    or waiting, that overlaps it with an incompatible type, so a waiting EXCLUSIVE is not starved by
    a stream of later readers. Locks of the same transaction never block each other. Because only
    earlier locks block, waits cannot form a cycle. The blocked component records its blocker in
    ``HL_BLOCKEDBY_EXT_ID``/``HL_BLOCKEDBY_INT_ID`` (shown by ``show_locks``).

Concurrency
    Every call is one database transaction. ``lock``, ``check_lock``, ``unlock`` and lock expiry
    first take the ``NEXT_LOCK_ID`` row ``FOR UPDATE`` (on PostgreSQL; SQLite serialises all writers
    anyway), so lock decisions are made one at a time; at READ COMMITTED each later statement of the
    transaction sees every grant committed before the row lock was obtained, so two conflicting locks
    can never both be granted. For a txn's lock they then lock the ``TXNS`` row, in the same order
    as commit/abort (``TXNS`` row, then ``HIVE_LOCKS`` rows), so a lock is never stored for a txn that
    is ending and no two calls wait on each other in a cycle. A lock heartbeat takes the counter
    too (before any TXNS row), so it never updates lock rows in another order than a decision.
    Commit/abort (:meth:`~LockMixin.release_txn_locks`) do not take it: they only delete rows, so at
    worst a concurrent decision still sees a lock that is going away and answers WAITING, which the
    client's next ``check_lock`` corrects.

Lock calls record no notification events.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    CheckLockRequest,
    DataOperationType,
    LockComponent,
    LockLevel,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
    MetaException,
    NoSuchLockException,
    ShowLocksRequest,
    ShowLocksResponse,
    ShowLocksResponseElement,
    TxnOpenException,
    UnlockRequest,
)
from thrift.Thrift import TApplicationException

from hivemesh.hive.constants import now_ms
from hivemesh.metastore.base import CatalogBase, request_user
from hivemesh.metastore.txn.common import release_txn_locks
from hivemesh.metastore.txn_schema import HIVE_LOCKS, NEXT_LOCK_ID, TXN_COMPONENTS, TXN_TO_WRITE_ID, TXNS

log = logging.getLogger(__name__)

#: ``HL_LOCK_TYPE`` codes (Hive's) by Thrift ``LockType``.
TYPE_CODES: dict[int, str] = {
    LockType.EXCLUSIVE: "e",
    LockType.EXCL_WRITE: "x",
    LockType.SHARED_WRITE: "w",
    LockType.SHARED_READ: "r",
}
_CODE_TYPES = {code: lock_type for lock_type, code in TYPE_CODES.items()}

#: Lock type codes each type code conflicts with (the matrix of the module docstring).
CONFLICTS: dict[str, frozenset[str]] = {
    "e": frozenset("exwr"),
    "x": frozenset("exw"),
    "w": frozenset("ex"),
    "r": frozenset("e"),
}
assert all((b in CONFLICTS[a]) == (a in CONFLICTS[b]) for a in CONFLICTS for b in CONFLICTS), "not symmetric"

ACQUIRED = "a"
WAITING = "w"
_STATES = {ACQUIRED: LockState.ACQUIRED, WAITING: LockState.WAITING}

#: ``TXN_COMPONENTS.TC_OPERATION_TYPE`` for the write operations that record a component.
_WRITE_OPS = {DataOperationType.INSERT: "i", DataOperationType.UPDATE: "u", DataOperationType.DELETE: "d"}

_TEXT_LIMIT = 128  # HL_USER, HL_HOST, HL_AGENT_INFO column width


def bad_lock_request(message: str) -> TApplicationException:
    """The error for a malformed lock request. ``lock`` declares no MetaException in the IDL, so a
    Java metastore answers such requests with TApplicationException(INTERNAL_ERROR) too; this one
    carries the reason."""
    return TApplicationException(
        TApplicationException.INTERNAL_ERROR, f"Internal error processing lock: {message}"
    )


def lock_id_text(ext_id: int) -> str:
    """Hive's spelling of a lock id in messages: ``lockid:N``."""
    return f"lockid:{ext_id}"


def _java_str(value: object) -> str:
    """``value`` as Java's string concatenation writes it into a message (None is ``null``)."""
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class Component:
    """One lock component as stored: ``table``/``partition`` are None above their level."""

    ext_id: int
    int_id: int
    txn_id: int
    db: str
    table: str | None
    partition: str | None
    type_code: str
    state: str = WAITING

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> Component:
        """A component from a HIVE_LOCKS row."""
        return cls(
            row.HL_LOCK_EXT_ID,
            row.HL_LOCK_INT_ID,
            row.HL_TXNID,
            row.HL_DB,
            row.HL_TABLE,
            row.HL_PARTITION,
            row.HL_LOCK_TYPE,
            row.HL_LOCK_STATE,
        )


def overlaps(a: Component, b: Component) -> bool:
    """True when ``a`` and ``b`` cover a common object (same db; db-level, or same table and
    table-level or same partition)."""
    if a.db != b.db:
        return False
    if a.table is None or b.table is None:
        return True
    if a.table != b.table:
        return False
    return a.partition is None or b.partition is None or a.partition == b.partition


def conflicts(req: Component, held: Component) -> bool:
    """True when ``req`` must wait for ``held`` (an earlier lock, acquired or waiting).

    Same-transaction locks never conflict; otherwise the components must overlap and their types
    be incompatible, except a db-level SHARED_READ against a table/partition EXCLUSIVE (either way).
    """
    if req.txn_id != 0 and req.txn_id == held.txn_id:
        return False
    if held.type_code not in CONFLICTS[req.type_code] or not overlaps(req, held):
        return False
    for reader, writer in ((req, held), (held, req)):
        if (
            reader.type_code == "r"
            and reader.table is None
            and writer.type_code == "e"
            and writer.table is not None
        ):
            return False
    return True


def find_blockers(request: Sequence[Component], earlier: Sequence[Component]) -> list[Component | None]:
    """For each component of ``request``, the first lock of ``earlier`` (sorted by ext id, int id)
    it must wait for, or None. The request may be granted when every entry is None."""
    return [next((held for held in earlier if conflicts(req, held)), None) for req in request]


class LockMixin(CatalogBase):
    """HMS lock calls on ``HIVE_LOCKS`` (see the module docstring for the rules)."""

    # ------------------------------------------------------------------ called by txns / housekeeper
    def release_txn_locks(self, conn: sa.Connection, txn_id: int) -> None:
        """Drop every lock held or awaited by ``txn_id`` (at commit or abort)."""
        release_txn_locks(conn, txn_id)

    def expire_locks(self, conn: sa.Connection, now_ms: int) -> int:
        """Remove locks without a txn whose last heartbeat (ms) is older than the txn timeout.

        Takes the NEXT_LOCK_ID row first (as lock decisions do), so that expiry by the housekeeper
        never interleaves its deletes with those of ``lock``/``check_lock``/``unlock``. Call it
        before locking any TXNS row in the transaction (the order lock calls use).
        Returns the number of HIVE_LOCKS rows (components) removed.
        """
        self._serialize_lock_decisions(conn)
        return (
            conn.execute(
                HIVE_LOCKS.delete().where(
                    HIVE_LOCKS.c.HL_TXNID == 0, HIVE_LOCKS.c.HL_LAST_HEARTBEAT < now_ms - self.txn_timeout_ms
                )
            ).rowcount
            or 0
        )

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _serialize_lock_decisions(conn: sa.Connection) -> int:
        """Take the NEXT_LOCK_ID row FOR UPDATE (held until the call's transaction ends); returns
        the next lock id."""
        row = conn.execute(sa.select(NEXT_LOCK_ID.c.NL_NEXT).with_for_update()).first()
        if row is None:
            raise MetaException("NEXT_LOCK_ID is empty: the metastore schema is not initialised")
        return int(row.NL_NEXT)

    @staticmethod
    def _lock_rows(conn: sa.Connection, ext_id: int) -> list[Component]:
        """The components of lock ``ext_id``, by int id (empty when the lock does not exist)."""
        rows = conn.execute(
            sa.select(HIVE_LOCKS)
            .where(HIVE_LOCKS.c.HL_LOCK_EXT_ID == ext_id)
            .order_by(HIVE_LOCKS.c.HL_LOCK_INT_ID)
        )
        return [Component.from_row(r) for r in rows]

    @staticmethod
    def _earlier_locks(conn: sa.Connection, ext_id: int, dbs: set[str]) -> list[Component]:
        """Every lock component on ``dbs`` with an ext id below ``ext_id``, oldest first."""
        q = (
            sa.select(HIVE_LOCKS)
            .where(HIVE_LOCKS.c.HL_DB.in_(sorted(dbs)), HIVE_LOCKS.c.HL_LOCK_EXT_ID < ext_id)
            .order_by(HIVE_LOCKS.c.HL_LOCK_EXT_ID, HIVE_LOCKS.c.HL_LOCK_INT_ID)
        )
        return [Component.from_row(r) for r in conn.execute(q)]

    def _decide(self, conn: sa.Connection, request: list[Component], ts: int) -> LockState:
        """Grant ``request`` (all its components) or leave it waiting, recording blockers.

        ``request`` must already be stored. Returns ``LockState.ACQUIRED`` or ``WAITING``.
        """
        ext_id = request[0].ext_id
        earlier = self._earlier_locks(conn, ext_id, {c.db for c in request})
        blockers = find_blockers(request, earlier)
        key = (HIVE_LOCKS.c.HL_LOCK_EXT_ID == ext_id,)
        if all(b is None for b in blockers):
            conn.execute(
                HIVE_LOCKS.update()
                .where(*key)
                .values(
                    HL_LOCK_STATE=ACQUIRED,
                    HL_ACQUIRED_AT=ts,
                    HL_BLOCKEDBY_EXT_ID=None,
                    HL_BLOCKEDBY_INT_ID=None,
                )
            )
            return LockState.ACQUIRED
        for comp, blocker in zip(request, blockers, strict=True):
            conn.execute(
                HIVE_LOCKS.update()
                .where(*key, HIVE_LOCKS.c.HL_LOCK_INT_ID == comp.int_id)
                .values(
                    HL_BLOCKEDBY_EXT_ID=blocker.ext_id if blocker else None,
                    HL_BLOCKEDBY_INT_ID=blocker.int_id if blocker else None,
                )
            )
        return LockState.WAITING

    @staticmethod
    def _component(ext_id: int, int_id: int, txn_id: int, lc: LockComponent) -> Component:
        """Validate one requested component; :func:`bad_lock_request` when its names do not fit its level."""
        code = TYPE_CODES.get(lc.type)
        if code is None:
            raise bad_lock_request(f"Unknown lock type {lc.type}")
        if not lc.dbname:
            raise bad_lock_request("A lock component needs a database name")
        db = lc.dbname.lower()
        table = (lc.tablename or "").lower() or None
        part = lc.partitionname or None
        if lc.level == LockLevel.DB:
            table = part = None
        elif lc.level == LockLevel.TABLE:
            part = None
            if table is None:
                raise bad_lock_request(f"A TABLE lock component needs a table name (db {db})")
        elif lc.level == LockLevel.PARTITION:
            if table is None or part is None:
                raise bad_lock_request(
                    f"A PARTITION lock component needs a table and a partition name (db {db})"
                )
        else:
            raise bad_lock_request(f"Unknown lock level {lc.level}")
        return Component(ext_id, int_id, txn_id, db, table, part, code)

    def _record_txn_components(
        self, conn: sa.Connection, txn_id: int, comps: list[Component], lcs: list[LockComponent]
    ) -> None:
        """TXN_COMPONENTS rows for the write components of a txn's lock request, as Hive records
        them: transactional objects, INSERT/UPDATE/DELETE, not dynamic-partition writes (those come
        with ``add_dynamic_partitions``). The write id is the txn's, when one was allocated."""
        for comp, lc in zip(comps, lcs, strict=True):
            op = _WRITE_OPS.get(lc.operationType)
            if op is None or not lc.isTransactional or lc.isDynamicPartitionWrite:
                continue
            write_id = None
            if comp.table is not None:
                write_id = conn.execute(
                    sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                        TXN_TO_WRITE_ID.c.T2W_TXNID == txn_id,
                        TXN_TO_WRITE_ID.c.T2W_DATABASE == comp.db,
                        TXN_TO_WRITE_ID.c.T2W_TABLE == comp.table,
                    )
                ).scalar()
            conn.execute(
                TXN_COMPONENTS.insert().values(
                    TC_TXNID=txn_id,
                    TC_DATABASE=comp.db,
                    TC_TABLE=comp.table,
                    TC_PARTITION=comp.partition,
                    TC_OPERATION_TYPE=op,
                    TC_WRITEID=write_id,
                )
            )

    # ------------------------------------------------------------------ HMS methods
    def lock(self, rqst: LockRequest) -> LockResponse:
        """Request the locks of ``rqst.component`` together; returns ``LockResponse(lockid, state)``
        with state ACQUIRED or WAITING (then poll ``check_lock``).

        With ``rqst.txnid`` the txn must be open (NoSuchTxnException / TxnAbortedException); its
        write components are recorded in TXN_COMPONENTS and the locks last until commit or abort.
        Without a txn the locks last until ``unlock`` or until they miss heartbeats for
        ``hive.txn.timeout``. With ``zeroWaitReadEnabled`` a read-only request that would wait is
        dropped at once and answered NOT_ACQUIRED. A malformed request (no components, a level
        without the names it needs) raises TApplicationException(INTERNAL_ERROR) with the reason.
        """
        lcs = list(rqst.component or [])
        if not lcs:
            raise bad_lock_request("a lock request needs at least one component")
        txn_id = int(rqst.txnid or 0)
        ts = now_ms()
        with self.write() as tx:
            conn = tx.conn
            ext_id = self._serialize_lock_decisions(conn)
            comps = [self._component(ext_id, i, txn_id, lc) for i, lc in enumerate(lcs, start=1)]
            if txn_id:  # row lock: a commit/abort cannot slip in before these locks are stored
                self.open_txn_row(conn, txn_id, for_update=True)
            self.expire_locks(conn, ts)
            conn.execute(NEXT_LOCK_ID.update().values(NL_NEXT=ext_id + 1))
            conn.execute(
                HIVE_LOCKS.insert(),
                [
                    {
                        "HL_LOCK_EXT_ID": ext_id,
                        "HL_LOCK_INT_ID": c.int_id,
                        "HL_TXNID": txn_id,
                        "HL_DB": c.db,
                        "HL_TABLE": c.table,
                        "HL_PARTITION": c.partition,
                        "HL_LOCK_STATE": WAITING,
                        "HL_LOCK_TYPE": c.type_code,
                        "HL_LAST_HEARTBEAT": 0 if txn_id else ts,
                        "HL_USER": (request_user(rqst.user))[:_TEXT_LIMIT],
                        "HL_HOST": (rqst.hostname or "")[:_TEXT_LIMIT],
                        "HL_AGENT_INFO": (rqst.agentInfo or "")[:_TEXT_LIMIT] or None,
                    }
                    for c in comps
                ],
            )
            if txn_id:
                self._record_txn_components(conn, txn_id, comps, lcs)
            state = self._decide(conn, comps, ts)
            if (
                state == LockState.WAITING
                and rqst.zeroWaitReadEnabled
                and all(c.type_code == "r" for c in comps)
            ):
                conn.execute(HIVE_LOCKS.delete().where(HIVE_LOCKS.c.HL_LOCK_EXT_ID == ext_id))
                return LockResponse(
                    lockid=ext_id,
                    state=LockState.NOT_ACQUIRED,
                    errorMessage=f"Unable to acquire read locks of {lock_id_text(ext_id)} without waiting",
                )
        return LockResponse(lockid=ext_id, state=state)

    def check_lock(self, rqst: CheckLockRequest) -> LockResponse:
        """Re-evaluate lock ``rqst.lockid``: ``LockResponse(lockid, ACQUIRED | WAITING)``.

        Refreshes the lock's heartbeat (its txn's heartbeat for a txn lock) after dropping timed-out
        locks. NoSuchLockException ("No such lock lockid:N") when the lock is unknown (released,
        expired, or its txn ended); TxnAbortedException / NoSuchTxnException when its txn is no
        longer open.
        """
        ext_id = int(rqst.lockid)
        ts = now_ms()
        with self.write() as tx:
            conn = tx.conn
            self._serialize_lock_decisions(conn)
            self.expire_locks(conn, ts)
            comps = self._lock_rows(conn, ext_id)
            if not comps:
                raise NoSuchLockException(f"No such lock {lock_id_text(ext_id)}")
            txn_id = comps[0].txn_id
            if txn_id:
                self.open_txn_row(conn, txn_id, for_update=True)
                conn.execute(
                    TXNS.update()
                    .where(TXNS.c.TXN_ID == txn_id, TXNS.c.TXN_STATE == "o")
                    .values(TXN_LAST_HEARTBEAT=ts)
                )
            else:
                conn.execute(
                    HIVE_LOCKS.update()
                    .where(HIVE_LOCKS.c.HL_LOCK_EXT_ID == ext_id)
                    .values(HL_LAST_HEARTBEAT=ts)
                )
            if all(c.state == ACQUIRED for c in comps):
                return LockResponse(lockid=ext_id, state=LockState.ACQUIRED)
            state = self._decide(conn, comps, ts)
        return LockResponse(lockid=ext_id, state=state)

    def unlock(self, rqst: UnlockRequest) -> None:
        """Release lock ``rqst.lockid`` (all its components).

        An unknown lock id is a no-op, as in Hive (unlock is idempotent). A lock of a transaction may only
        be given up while it is still WAITING; an acquired one raises TxnOpenException (it is released
        by commit or abort).
        """
        ext_id = int(rqst.lockid)
        with self.write() as tx:
            conn = tx.conn
            self._serialize_lock_decisions(conn)
            comps = self._lock_rows(conn, ext_id)
            if comps and comps[0].txn_id:  # wait for a commit/abort of its txn in progress, then re-read
                conn.execute(
                    sa.select(TXNS.c.TXN_ID).where(TXNS.c.TXN_ID == comps[0].txn_id).with_for_update()
                )
                comps = self._lock_rows(conn, ext_id)
            if not comps:
                # Hive's TxnHandler.unlock returns quietly here, so that unlock is idempotent: a client
                # retrying an unlock (pyiceberg after a successful commit) must not see an error.
                log.info("unlock(%s): no such lock (already released or expired)", lock_id_text(ext_id))
                return
            first = comps[0]
            if first.txn_id and any(c.state == ACQUIRED for c in comps):
                raise TxnOpenException(
                    "Unlocking locks associated with transaction not permitted.  "
                    f"{lock_id_text(ext_id)} intLockId:{first.int_id} txnid:{first.txn_id} "
                    f"db:{_java_str(first.db)} table:{_java_str(first.table)} "
                    f"partition:{_java_str(first.partition)} state:ACQUIRED "
                    f"type:{LockType._VALUES_TO_NAMES[_CODE_TYPES[first.type_code]]}"
                )
            conn.execute(HIVE_LOCKS.delete().where(HIVE_LOCKS.c.HL_LOCK_EXT_ID == ext_id))

    def show_locks(self, rqst: ShowLocksRequest) -> ShowLocksResponse:
        """Every lock component, or those matching ``rqst``'s dbname / tablename / partname / txnid
        (each optional), ordered by lock id then component; times in epoch ms."""
        q = sa.select(HIVE_LOCKS).order_by(HIVE_LOCKS.c.HL_LOCK_EXT_ID, HIVE_LOCKS.c.HL_LOCK_INT_ID)
        if rqst is not None:
            if rqst.dbname:
                q = q.where(HIVE_LOCKS.c.HL_DB == rqst.dbname.lower())
            if rqst.tablename:
                q = q.where(HIVE_LOCKS.c.HL_TABLE == rqst.tablename.lower())
            if rqst.partname:
                q = q.where(HIVE_LOCKS.c.HL_PARTITION == rqst.partname)
            if rqst.txnid:
                q = q.where(HIVE_LOCKS.c.HL_TXNID == rqst.txnid)
        with self.read() as conn:
            rows = conn.execute(q).all()
        return ShowLocksResponse(
            locks=[
                ShowLocksResponseElement(
                    lockid=r.HL_LOCK_EXT_ID,
                    dbname=r.HL_DB,
                    tablename=r.HL_TABLE,
                    partname=r.HL_PARTITION,
                    state=_STATES.get(r.HL_LOCK_STATE, LockState.WAITING),
                    type=_CODE_TYPES[r.HL_LOCK_TYPE],
                    txnid=r.HL_TXNID,
                    lastheartbeat=r.HL_LAST_HEARTBEAT,
                    acquiredat=r.HL_ACQUIRED_AT,
                    user=r.HL_USER,
                    hostname=r.HL_HOST,
                    heartbeatCount=r.HL_HEARTBEAT_COUNT,
                    agentInfo=r.HL_AGENT_INFO,
                    blockedByExtId=r.HL_BLOCKEDBY_EXT_ID,
                    blockedByIntId=r.HL_BLOCKEDBY_INT_ID,
                    lockIdInternal=r.HL_LOCK_INT_ID,
                )
                for r in rows
            ]
        )
