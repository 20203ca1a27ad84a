"""``repl_tbl_writeid_state``: take a replicated ACID table's write-id state from its source (a
replication bootstrap, as Hive's REPL LOAD does).

Write ids up to the source list's high watermark count as committed, except its open and aborted
ones, which are recorded as written by placeholder txns aborted here (readers never see their
data); the table's next write id moves past the watermark, never back. A committed watermark
gets a mapping of its own (a committed txn: ``get_valid_write_ids`` takes a snapshot's watermark
from the highest mapping). Idempotent: ids already recorded for the table are left as they are,
except placeholders recorded aborted by an earlier call (open at the source then) that the list
now says are valid: committed at the source since, they become committed here (a resync).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import MetaException, ReplTblWriteIdStateRequest, TxnType

from hivemesh.hive.constants import now_ms
from hivemesh.hive.txn_lists import ValidWriteIdList
from hivemesh.metastore.txn.common import (
    ABORTED,
    COMMITTED,
    Clock,
    Outcome,
    lock_next_write_id,
    set_next_write_id,
    take_txn_ids,
)
from hivemesh.metastore.txn_schema import REPL_TXN_MAP, TXN_TO_WRITE_ID, TXNS


@dataclass(frozen=True)
class WriteIdState:
    """A parsed ReplTblWriteIdStateRequest: the table (lower case), the source's list, its invalid
    (open or aborted) write ids ascending, the time of the call (ms), the txns' user and host."""

    db: str
    table: str
    source: ValidWriteIdList
    invalid: tuple[int, ...]
    ts: int
    user: str
    host: str


def prepare(rqst: ReplTblWriteIdStateRequest, user: str, clock: Clock = now_ms) -> WriteIdState:
    """The request as a :class:`WriteIdState`; raises MetaException when ``validWriteIdlist`` is
    empty or malformed (format: Hive ValidReaderWriteIdList.writeToString,
    ``db.table:hwm:minOpen:open:aborted``)."""
    try:
        if not rqst.validWriteIdlist:
            raise ValueError("empty")
        wil = ValidWriteIdList.parse(rqst.validWriteIdlist)
    except ValueError as e:
        raise MetaException(f"Invalid ValidWriteIdList {rqst.validWriteIdlist!r}: {e}") from None
    invalid = tuple(sorted({*wil.open_write_ids, *wil.aborted_write_ids}))
    db, table = (rqst.dbName or "").lower(), (rqst.tableName or "").lower()
    return WriteIdState(db, table, wil, invalid, clock(), user, rqst.hostName or "")


def repl_tbl_writeid_state(conn: sa.Connection, state: WriteIdState) -> Outcome[None]:
    """Apply a :func:`prepare`\\ d write-id state to its table (see the module's description);
    gives no event (the call's IDL declares no exception: a MetaException of :func:`prepare`
    reaches Thrift clients as an internal-error TApplicationException with its message)."""
    db, table, hwm = state.db, state.table, state.source.high_watermark
    nxt = lock_next_write_id(conn, db, table)
    known = _recorded_write_ids(conn, db, table)
    valid_now = [t for t, w in _placeholders(conn, db, table, hwm) if w not in set(state.source.exceptions)]
    if valid_now:
        conn.execute(
            TXNS.update().where(TXNS.c.TXN_ID.in_(valid_now)).values(TXN_STATE=COMMITTED, TXN_ENDED=state.ts)
        )
    fresh = new_mappings(state.invalid, known, nxt, hwm)
    if fresh:
        txn_ids = take_txn_ids(conn, len(fresh))
        conn.execute(TXNS.insert(), placeholder_txn_rows(state, txn_ids, [s for _, s in fresh]))
        conn.execute(
            TXN_TO_WRITE_ID.insert(),
            [
                {"T2W_TXNID": t, "T2W_DATABASE": db, "T2W_TABLE": table, "T2W_WRITEID": w}
                for t, (w, _) in zip(txn_ids, fresh, strict=True)
            ],
        )
    if hwm + 1 > nxt:
        set_next_write_id(conn, db, table, hwm + 1)
    return Outcome(None)


def new_mappings(invalid: Sequence[int], known: set[int], nxt: int, hwm: int) -> list[tuple[int, str]]:
    """(write id, TXNS state) of the mappings to record: each invalid write id not yet recorded
    nor below the table's next write id ``nxt`` as aborted, then the high watermark ``hwm`` as
    committed when it is new and valid."""
    fresh = [(w, ABORTED) for w in invalid if w not in known and w >= nxt]
    if hwm >= nxt and hwm not in known and hwm not in invalid:
        fresh.append((hwm, COMMITTED))
    return fresh


def placeholder_txn_rows(state: WriteIdState, txn_ids: list[int], states: list[str]) -> list[dict[str, Any]]:
    """TXNS rows of the placeholder txns (REPL_CREATED, ended at once) standing for source write ids."""
    ts = state.ts
    return [
        {"TXN_ID": t, "TXN_STATE": s, "TXN_STARTED": ts, "TXN_LAST_HEARTBEAT": ts,
         "TXN_ENDED": ts if s == COMMITTED else None, "TXN_USER": state.user,
         "TXN_HOST": state.host, "TXN_AGENT_INFO": None, "TXN_TYPE": TxnType.REPL_CREATED}
        for t, s in zip(txn_ids, states, strict=True)
    ]  # fmt: skip


def _recorded_write_ids(conn: sa.Connection, db: str, table: str) -> set[int]:
    """The write ids TXN_TO_WRITE_ID holds for the table."""
    return set(
        conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db, TXN_TO_WRITE_ID.c.T2W_TABLE == table
            )
        ).scalars()
    )


def _placeholders(conn: sa.Connection, db: str, table: str, hwm: int) -> list[tuple[int, int]]:
    """(txn id, write id) of the aborted placeholder txns an earlier call recorded for the table
    at or below ``hwm`` (REPL_CREATED, not mapped from a source txn)."""
    return [
        (t, w)
        for t, w in conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID, TXN_TO_WRITE_ID.c.T2W_WRITEID)
            .join(TXNS, TXNS.c.TXN_ID == TXN_TO_WRITE_ID.c.T2W_TXNID)
            .where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                TXN_TO_WRITE_ID.c.T2W_WRITEID <= hwm,
                TXNS.c.TXN_STATE == ABORTED,
                TXNS.c.TXN_TYPE == TxnType.REPL_CREATED,
                TXN_TO_WRITE_ID.c.T2W_TXNID.not_in(sa.select(REPL_TXN_MAP.c.RTM_TARGET_TXN_ID)),
            )
        )
    ]
