"""What the txn operations share: TXNS states, the outcome of an operation, and the small SQL
steps several operations take (txn ids from NEXT_TXN_ID, a table's NEXT_WRITE_ID row, a txn's
state, the REPL_TXN_MAP lookup, ending a txn)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar

import sqlalchemy as sa
from hive_metastore.ttypes import MetaException, NoSuchTxnException, TxnAbortedException
from sqlalchemy.dialects import postgresql, sqlite

from hivemesh.hive.txn_lists import ValidTxnList
from hivemesh.metastore.notification_log import PendingEvent
from hivemesh.metastore.txn_schema import (
    HIVE_LOCKS,
    MIN_HISTORY_LEVEL,
    NEXT_TXN_ID,
    NEXT_WRITE_ID,
    REPL_TXN_MAP,
    TXNS,
)

OPEN, ABORTED, COMMITTED = "o", "a", "c"
"""TXNS.TXN_STATE values."""
LONG_MAX = 9223372036854775807
CONFLICTING_OPS = ("u", "d")  # TC_OPERATION_TYPE of updates and deletes (write-write conflicts)

Clock = Callable[[], int]
"""Epoch milliseconds now (``hivemesh.hive.constants.now_ms``; a test may pass its own)."""

R = TypeVar("R")


@dataclass
class Outcome(Generic[R]):
    """What a txn operation gives back: the Thrift response (None for calls that answer nothing)
    and the notification events to append in the same transaction."""

    response: R
    events: list[PendingEvent] = field(default_factory=list)


def txn_event(event_type: str, message: str) -> PendingEvent:
    """A notification event about txns (no catalog, database or table, as Hive writes them)."""
    return PendingEvent(event_type, message, None, None, None)


def txn_str(txn_id: int) -> str:
    """Hive's JavaUtils.txnIdToString: ``txnid:N``."""
    return f"txnid:{txn_id}"


def java_bitset_bytes(bits: Iterable[int]) -> bytes:
    """The bytes of java.util.BitSet.toByteArray for the set bit positions (little-endian, trimmed)."""
    value = 0
    for b in bits:
        value |= 1 << b
    return value.to_bytes((value.bit_length() + 7) // 8, "little") if value else b""


def parse_valid_txn_list(text: str) -> tuple[int, set[int], set[int]]:
    """High watermark, open ids and aborted ids of a ValidTxnList string.

    format: Hive ValidReadTxnList.writeToString, ``hwm:minOpen:open:aborted`` with ids
    comma-separated and, since Hive 3.1, runs of consecutive ids as ``a-b``;
    raises MetaException when malformed.
    """
    try:
        v = ValidTxnList.parse(text)
    except ValueError as e:
        raise MetaException(f"Invalid ValidTxnList {text!r}: {e}") from None
    return v.high_watermark, set(v.open_txns), set(v.aborted_txns)


# ---------------------------------------------------------------------- txns
def take_txn_ids(conn: sa.Connection, n: int) -> list[int]:
    """``n`` new txn ids, ascending, from the NEXT_TXN_ID row (locked until the transaction ends)."""
    first: int = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT).with_for_update()).scalar_one()
    conn.execute(NEXT_TXN_ID.update().values(NTXN_NEXT=first + n))
    return list(range(first, first + n))


def txn_state(conn: sa.Connection, txn_id: int, for_update: bool = False) -> str | None:
    """The TXNS state of ``txn_id``: o/a/c; ``c`` for a purged past txn; None when never opened."""
    q = sa.select(TXNS.c.TXN_STATE).where(TXNS.c.TXN_ID == txn_id)
    if for_update:
        q = q.with_for_update()
    state: str | None = conn.execute(q).scalar()
    if state is not None:
        return state
    nxt = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one()
    return COMMITTED if 0 < txn_id < nxt else None


def raise_state(state: str | None, txn_id: int) -> NoReturn:
    """Hive's TxnHandler.raiseTxnUnexpectedState: TxnAbortedException for an aborted txn,
    NoSuchTxnException for a committed or unknown one."""
    if state == ABORTED:
        raise TxnAbortedException(f"Transaction {txn_str(txn_id)} already aborted")
    if state == COMMITTED:
        raise NoSuchTxnException(f"Transaction {txn_str(txn_id)} is already committed.")
    raise NoSuchTxnException(f"No such transaction {txn_str(txn_id)}")


def open_txn_row(conn: sa.Connection, txn_id: int | None, for_update: bool = False) -> sa.Row[Any]:
    """The TXNS row of an open txn; raises NoSuchTxnException (unknown or committed) or
    TxnAbortedException (aborted)."""
    q = sa.select(TXNS).where(TXNS.c.TXN_ID == (txn_id or 0))
    if for_update:
        q = q.with_for_update()
    row = conn.execute(q).first()
    if row is None or row.TXN_STATE != OPEN:
        raise_state(row.TXN_STATE if row is not None else txn_state(conn, txn_id or 0), txn_id or 0)
    return row


def target_txn(conn: sa.Connection, policy: str, src_txn_id: int) -> int | None:
    """The target txn REPL_TXN_MAP maps a replication policy's source txn to (None: unmapped)."""
    target: int | None = conn.execute(
        sa.select(REPL_TXN_MAP.c.RTM_TARGET_TXN_ID).where(
            REPL_TXN_MAP.c.RTM_REPL_POLICY == policy, REPL_TXN_MAP.c.RTM_SRC_TXN_ID == src_txn_id
        )
    ).scalar()
    return target


def ending_txn(conn: sa.Connection, txn_id: int, repl_policy: str | None) -> tuple[int, str | None] | None:
    """The txn a commit or abort ends and its state (:func:`txn_state`, its TXNS row locked):
    ``txn_id`` itself, or with ``repl_policy`` the target txn REPL_TXN_MAP maps the source txn
    ``txn_id`` to; None for an unmapped source txn (the call is then ignored)."""
    if repl_policy:
        target = target_txn(conn, repl_policy, txn_id)
        if target is None:
            return None
        txn_id = target
    return txn_id, txn_state(conn, txn_id, for_update=True)


def release_txn_locks(conn: sa.Connection, txn_id: int) -> None:
    """Drop every lock held or awaited by ``txn_id`` (at commit or abort)."""
    conn.execute(HIVE_LOCKS.delete().where(HIVE_LOCKS.c.HL_TXNID == txn_id))


def end_txn(conn: sa.Connection, txn_id: int, state: str, ended: int) -> None:
    """Mark ``txn_id`` committed or aborted at ``ended`` (ms), drop its MIN_HISTORY_LEVEL row and
    release its locks."""
    conn.execute(TXNS.update().where(TXNS.c.TXN_ID == txn_id).values(TXN_STATE=state, TXN_ENDED=ended))
    conn.execute(MIN_HISTORY_LEVEL.delete().where(MIN_HISTORY_LEVEL.c.MHL_TXNID == txn_id))
    release_txn_locks(conn, txn_id)


# ---------------------------------------------------------------------- write ids
def lock_next_write_id(conn: sa.Connection, db: str, table: str) -> int:
    """NWI_NEXT of a table, its row locked (created at 1 when missing)."""
    key = (NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
    nxt: int | None = conn.execute(sa.select(NEXT_WRITE_ID.c.NWI_NEXT).where(*key).with_for_update()).scalar()
    if nxt is not None:
        return nxt
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(
        insert(NEXT_WRITE_ID).values(NWI_DATABASE=db, NWI_TABLE=table, NWI_NEXT=1).on_conflict_do_nothing()
    )
    created: int = conn.execute(
        sa.select(NEXT_WRITE_ID.c.NWI_NEXT).where(*key).with_for_update()
    ).scalar_one()
    return created


def set_next_write_id(conn: sa.Connection, db: str, table: str, nxt: int) -> None:
    """Set a table's NEXT_WRITE_ID (its row taken by :func:`lock_next_write_id` first)."""
    conn.execute(
        NEXT_WRITE_ID.update()
        .where(NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
        .values(NWI_NEXT=nxt)
    )
