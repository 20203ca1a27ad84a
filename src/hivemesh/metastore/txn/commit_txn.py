"""``commit_txn``: end an open txn as committed, record its write set, release its locks."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from hive_metastore.ttypes import CommitTxnKeyValue, CommitTxnRequest, MetaException

from hivemesh.hive import events
from hivemesh.hive.constants import now_ms
from hivemesh.metastore.schema import TABLE_PARAMS
from hivemesh.metastore.txn.common import (
    COMMITTED,
    CONFLICTING_OPS,
    OPEN,
    Clock,
    Outcome,
    end_txn,
    ending_txn,
    raise_state,
    txn_event,
    txn_str,
)
from hivemesh.metastore.txn_schema import NEXT_TXN_ID, TXN_COMPONENTS, TXN_TO_WRITE_ID, WRITE_SET

log = logging.getLogger(__name__)


def commit_txn(conn: sa.Connection, rqst: CommitTxnRequest, clock: Clock = now_ms) -> Outcome[None]:
    """CommitTxnRequest: commit an open txn and release its locks.

    Committing a committed txn is a no-op (Hive makes it idempotent for retries); raises
    TxnAbortedException ("Transaction txnid:N already aborted") or NoSuchTxnException ("No such
    transaction txnid:N"). With ``replPolicy`` the id is the source txn id; an unmapped one is
    ignored. ``keyValue`` (Hive 4) sets a ``_meta`` table parameter in the same transaction
    (MetaException for another key). Gives COMMIT_TXN with the txn's distinct (database, write id)
    pairs, as Hive 4.2 (none for a replicated txn).
    """
    ending = ending_txn(conn, rqst.txnid, rqst.replPolicy)
    if ending is None:
        return Outcome(None)
    txn_id, state = ending
    if state == COMMITTED:
        log.info("commit_txn(%s): already committed", txn_str(txn_id))
        return Outcome(None)
    if state != OPEN:
        raise_state(state, txn_id)
    if rqst.keyValue is not None:
        _set_key_value(conn, rqst.keyValue)
    written = _written_pairs(conn, txn_id)
    end_txn(conn, txn_id, COMMITTED, clock())
    _record_write_set(conn, txn_id)
    conn.execute(TXN_COMPONENTS.delete().where(TXN_COMPONENTS.c.TC_TXNID == txn_id))
    # the txn's write notifications stay (get_all_write_event_info: Hive's replication dump
    # and hivemesh's replication read them after the commit) until the event retention
    # removes them (purge_events)
    if rqst.replPolicy:
        return Outcome(None)
    return Outcome(None, [txn_event(events.COMMIT_TXN, events.commit_txn_message(txn_id, written))])


def _set_key_value(conn: sa.Connection, kv: CommitTxnKeyValue) -> None:
    """Set table parameter ``kv.key`` of table ``kv.tableId``; MetaException unless the key starts
    with ``_meta``."""
    if not (kv.key or "").startswith("_meta"):
        raise MetaException(f"CommitTxnKeyValue key must start with _meta: {kv.key}")
    done = conn.execute(
        TABLE_PARAMS.update()
        .where(TABLE_PARAMS.c.TBL_ID == kv.tableId, TABLE_PARAMS.c.PARAM_KEY == kv.key)
        .values(PARAM_VALUE=kv.value)
    ).rowcount
    if not done:
        conn.execute(TABLE_PARAMS.insert().values(TBL_ID=kv.tableId, PARAM_KEY=kv.key, PARAM_VALUE=kv.value))


def _written_pairs(conn: sa.Connection, txn_id: int) -> list[tuple[str, int]]:
    """The txn's distinct (database, write id) pairs from TXN_TO_WRITE_ID, ordered."""
    t2w = TXN_TO_WRITE_ID.c
    return [
        (db, wid)
        for db, wid in conn.execute(
            sa.select(t2w.T2W_DATABASE, t2w.T2W_WRITEID)
            .where(t2w.T2W_TXNID == txn_id)
            .distinct()
            .order_by(t2w.T2W_DATABASE, t2w.T2W_WRITEID)
        )
    ]


def _record_write_set(conn: sa.Connection, txn_id: int) -> None:
    """WRITE_SET rows for the updates and deletes of a committing txn (its TXN_COMPONENTS),
    with the highest txn id handed out so far as their commit id (Hive's commitTxn)."""
    commit_id = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one() - 1
    tc = TXN_COMPONENTS.c
    conn.execute(
        WRITE_SET.insert().from_select(
            ["WS_DATABASE", "WS_TABLE", "WS_PARTITION", "WS_TXNID", "WS_COMMIT_ID", "WS_OPERATION_TYPE"],
            sa.select(
                tc.TC_DATABASE,
                tc.TC_TABLE,
                tc.TC_PARTITION,
                tc.TC_TXNID,
                sa.literal(commit_id, sa.BigInteger),
                tc.TC_OPERATION_TYPE,
            )
            .where(tc.TC_TXNID == txn_id, tc.TC_OPERATION_TYPE.in_(CONFLICTING_OPS), tc.TC_TABLE.is_not(None))
            .distinct(),
        )
    )
