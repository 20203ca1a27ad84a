"""The housekeeper's txn work: aborting txns past hive.txn.timeout (in batches) and purging the
records of txns every snapshot has left behind (Hive's AcidHouseKeeperService)."""

from __future__ import annotations

import sqlalchemy as sa
from hive_metastore.ttypes import TxnType

from hivemesh.metastore.txn.abort_txns import abort_open_txn
from hivemesh.metastore.txn.common import ABORTED, COMMITTED, OPEN, Outcome
from hivemesh.metastore.txn_schema import (
    MIN_HISTORY_LEVEL,
    NEXT_TXN_ID,
    TXN_COMPONENTS,
    TXN_TO_WRITE_ID,
    TXNS,
    WRITE_SET,
)

ABORT_BATCH = 1000  # TxnStore.TIMED_OUT_TXN_ABORT_BATCH_SIZE: timed-out txns aborted per transaction


def abort_timed_out_batch(conn: sa.Connection, after: int, cutoff: int) -> Outcome[list[int]]:
    """Abort up to :data:`ABORT_BATCH` open txns above id ``after`` whose last heartbeat (ms) is
    before ``cutoff``, ascending (their TXNS rows locked); replicated txns are left alone (the
    source decides their fate). Returns their ids, with one ABORT_TXN event each."""
    ids = list(
        conn.execute(
            sa.select(TXNS.c.TXN_ID)
            .where(
                TXNS.c.TXN_STATE == OPEN,
                TXNS.c.TXN_ID > after,
                TXNS.c.TXN_LAST_HEARTBEAT < cutoff,
                TXNS.c.TXN_TYPE != TxnType.REPL_CREATED,
            )
            .order_by(TXNS.c.TXN_ID)
            .limit(ABORT_BATCH)
            .with_for_update()
        ).scalars()
    )
    out = Outcome(ids)
    for t in ids:
        out.events.extend(abort_open_txn(conn, t, False))
    return out


def purge_completed_txns(conn: sa.Connection, ended_before: int) -> Outcome[int]:
    """Remove TXNS rows of txns that ended before ``ended_before`` (ms) and lie below every open
    txn's snapshot (MIN_HISTORY_LEVEL): committed ones with their write-id mappings, and aborted
    ones that allocated no write id; then TXN_COMPONENTS of removed txns and WRITE_SET rows no
    open txn can conflict with. Returns how many txns were removed (no events)."""
    floor = conn.execute(sa.select(sa.func.min(MIN_HISTORY_LEVEL.c.MHL_MIN_OPEN_TXNID))).scalar()
    if floor is None:
        floor = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one()
    old = (TXNS.c.TXN_ENDED < ended_before, TXNS.c.TXN_ID < floor)
    _drop_committed_mappings(conn, sa.select(TXNS.c.TXN_ID).where(TXNS.c.TXN_STATE == COMMITTED, *old))
    n = conn.execute(TXNS.delete().where(TXNS.c.TXN_STATE == COMMITTED, *old)).rowcount or 0
    wrote = sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID)
    n += (
        conn.execute(
            TXNS.delete().where(TXNS.c.TXN_STATE == ABORTED, *old, TXNS.c.TXN_ID.not_in(wrote))
        ).rowcount
        or 0
    )
    conn.execute(TXN_COMPONENTS.delete().where(TXN_COMPONENTS.c.TC_TXNID.not_in(sa.select(TXNS.c.TXN_ID))))
    # Hive's write-set GC: no open txn began at or before these commits any more
    conn.execute(WRITE_SET.delete().where(WRITE_SET.c.WS_COMMIT_ID < floor))
    return Outcome(n)


def _drop_committed_mappings(conn: sa.Connection, committed: sa.Select[tuple[int]]) -> None:
    """Delete the TXN_TO_WRITE_ID rows of the ``committed`` txns but, per table, the one with the
    highest write id: get_valid_write_ids derives a snapshot's write-id high watermark from the
    mappings under its txn high watermark, and that one stands for all purged (committed) write
    ids below it."""
    t2 = TXN_TO_WRITE_ID.alias("t2")
    top = (
        sa.select(sa.func.max(t2.c.T2W_WRITEID))
        .where(
            t2.c.T2W_DATABASE == TXN_TO_WRITE_ID.c.T2W_DATABASE,
            t2.c.T2W_TABLE == TXN_TO_WRITE_ID.c.T2W_TABLE,
            t2.c.T2W_TXNID.in_(committed),
        )
        .scalar_subquery()
    )
    conn.execute(
        TXN_TO_WRITE_ID.delete().where(
            TXN_TO_WRITE_ID.c.T2W_TXNID.in_(committed), TXN_TO_WRITE_ID.c.T2W_WRITEID < top
        )
    )
