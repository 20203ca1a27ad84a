"""``allocate_table_write_ids``: a write id per txn for a table (TXN_TO_WRITE_ID, NEXT_WRITE_ID),
and its replication form forcing the source's write ids on the mapped target txns."""

from __future__ import annotations

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AllocateTableWriteIdsRequest,
    AllocateTableWriteIdsResponse,
    MetaException,
    NoSuchTxnException,
    TxnToWriteId,
    TxnType,
)

from hivemesh.hive import events
from hivemesh.metastore.notification_log import PendingEvent
from hivemesh.metastore.txn.common import (
    ABORTED,
    Outcome,
    lock_next_write_id,
    open_txn_row,
    set_next_write_id,
    target_txn,
    txn_str,
)
from hivemesh.metastore.txn_schema import TXN_TO_WRITE_ID, TXNS


def allocate_table_write_ids(
    conn: sa.Connection, rqst: AllocateTableWriteIdsRequest
) -> Outcome[AllocateTableWriteIdsResponse]:
    """AllocateTableWriteIdsRequest -> one write id per txn for ``dbName.tableName``.

    A txn that already has a write id for the table gets the same one again (idempotent);
    new ids are consecutive in the order of ``txnIds``. Every txn must be open
    (NoSuchTxnException / TxnAbortedException) and not read-only (MetaException). Replication
    form (``replPolicy`` + ``srcTxnToWriteIdList``): the source's write ids are forced on the
    mapped target txns (NoSuchTxnException for an unmapped source txn) and the table's next write
    id moves past them. Gives one ALLOC_WRITE_ID_EVENT for new ids (none in the replication form).
    MetaException without dbName, tableName or txnIds.
    """
    db, table = (rqst.dbName or "").lower(), (rqst.tableName or "").lower()
    if not db or not table:
        raise MetaException("allocate_table_write_ids needs dbName and tableName")
    nxt = lock_next_write_id(conn, db, table)
    if rqst.replPolicy and rqst.srcTxnToWriteIdList:
        return Outcome(_allocate_replicated(conn, db, table, nxt, rqst.replPolicy, rqst.srcTxnToWriteIdList))
    txn_ids = list(rqst.txnIds or [])
    if not txn_ids:
        raise MetaException("allocate_table_write_ids needs txnIds")
    existing = _existing_write_ids(conn, db, table, txn_ids)
    out: list[TxnToWriteId] = []
    fresh: list[TxnToWriteId] = []
    for t in txn_ids:
        if t in existing:
            out.append(TxnToWriteId(txnId=t, writeId=existing[t]))
            continue
        if open_txn_row(conn, t).TXN_TYPE == TxnType.READ_ONLY:
            raise MetaException(f"Read-only transaction {txn_str(t)} cannot allocate write ids")
        fresh.append(TxnToWriteId(txnId=t, writeId=nxt + len(fresh)))
        out.append(fresh[-1])
    if not fresh:
        return Outcome(AllocateTableWriteIdsResponse(txnToWriteIds=out))
    conn.execute(TXN_TO_WRITE_ID.insert(), [_mapping(p.txnId, db, table, p.writeId) for p in fresh])
    set_next_write_id(conn, db, table, nxt + len(fresh))
    return Outcome(AllocateTableWriteIdsResponse(txnToWriteIds=out), [alloc_event(db, table, fresh)])


def alloc_event(db: str, table: str, fresh: list[TxnToWriteId]) -> PendingEvent:
    """The ALLOC_WRITE_ID_EVENT of write ids newly allocated for ``db.table``."""
    return PendingEvent(
        events.ALLOC_WRITE_ID_EVENT, events.alloc_write_id_message(db, table, fresh), db, table
    )


def _mapping(txn_id: int, db: str, table: str, write_id: int) -> dict[str, object]:
    return {"T2W_TXNID": txn_id, "T2W_DATABASE": db, "T2W_TABLE": table, "T2W_WRITEID": write_id}


def _existing_write_ids(conn: sa.Connection, db: str, table: str, txn_ids: list[int]) -> dict[int, int]:
    """Txn id -> write id of those of ``txn_ids`` that already have one for the table."""
    return dict(
        conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID, TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                TXN_TO_WRITE_ID.c.T2W_TXNID.in_(txn_ids),
            )
        ).all()
    )


def _allocate_replicated(
    conn: sa.Connection, db: str, table: str, nxt: int, policy: str, pairs: list[TxnToWriteId]
) -> AllocateTableWriteIdsResponse:
    """Force the source's (txn, write id) pairs on the target txns REPL_TXN_MAP maps them to."""
    out = []
    for p in pairs:
        target = target_txn(conn, policy, p.txnId)
        if target is None:
            raise NoSuchTxnException(
                f"No target transaction for source {txn_str(p.txnId)} of policy {policy}"
            )
        have: int | None = conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                TXN_TO_WRITE_ID.c.T2W_TXNID == target,
            )
        ).scalar()
        if have is None:
            drop_placeholder(conn, db, table, p.writeId)
            conn.execute(TXN_TO_WRITE_ID.insert().values(_mapping(target, db, table, p.writeId)))
            have = p.writeId
        out.append(TxnToWriteId(txnId=target, writeId=have))
        nxt = max(nxt, have + 1)
    set_next_write_id(conn, db, table, nxt)
    return AllocateTableWriteIdsResponse(txnToWriteIds=out)


def drop_placeholder(conn: sa.Connection, db: str, table: str, write_id: int) -> None:
    """Forget the aborted placeholder txn ``repl_tbl_writeid_state`` recorded for a write id that
    was open at the source: its real txn is being replicated now."""
    rows = (
        conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID)
            .join(TXNS, TXNS.c.TXN_ID == TXN_TO_WRITE_ID.c.T2W_TXNID)
            .where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                TXN_TO_WRITE_ID.c.T2W_WRITEID == write_id,
                TXNS.c.TXN_STATE == ABORTED,
                TXNS.c.TXN_TYPE == TxnType.REPL_CREATED,
            )
        )
        .scalars()
        .all()
    )
    for txn in rows:
        conn.execute(TXN_TO_WRITE_ID.delete().where(TXN_TO_WRITE_ID.c.T2W_TXNID == txn))
        conn.execute(TXNS.delete().where(TXNS.c.TXN_ID == txn))
