"""``abort_txn`` and ``abort_txns``: end open txns as aborted and release their locks (also the
housekeeper's abort of timed-out txns)."""

from __future__ import annotations

import sqlalchemy as sa
from hive_metastore.ttypes import AbortTxnRequest, AbortTxnsRequest

from hivemesh.hive import events
from hivemesh.hive.constants import now_ms
from hivemesh.metastore.notification_log import PendingEvent
from hivemesh.metastore.txn import common
from hivemesh.metastore.txn.common import ABORTED, OPEN, Clock, Outcome
from hivemesh.metastore.txn_schema import TXN_COMPONENTS, TXN_TO_WRITE_ID


def abort_txn(conn: sa.Connection, rqst: AbortTxnRequest, clock: Clock = now_ms) -> Outcome[None]:
    """AbortTxnRequest: abort an open txn and release its locks; aborting an aborted txn is a
    no-op; raises NoSuchTxnException for unknown or committed txns. With ``replPolicy`` the id is
    the source txn id (an unmapped one is ignored) and no event is given; else one ABORT_TXN."""
    ending = common.ending_txn(conn, rqst.txnid, rqst.replPolicy)
    if ending is None:
        return Outcome(None)
    txn_id, state = ending
    if state == ABORTED:
        return Outcome(None)
    if state != OPEN:
        common.raise_state(state, txn_id)
    return Outcome(None, abort_open_txn(conn, txn_id, bool(rqst.replPolicy), clock))


def abort_txns(conn: sa.Connection, rqst: AbortTxnsRequest, clock: Clock = now_ms) -> Outcome[None]:
    """AbortTxnsRequest(txn_ids): abort those of the txns that are open (ascending); others are
    ignored. One ABORT_TXN event per aborted txn."""
    out: Outcome[None] = Outcome(None)
    for txn_id in sorted(set(rqst.txn_ids or [])):
        if common.txn_state(conn, txn_id, for_update=True) == OPEN:
            out.events.extend(abort_open_txn(conn, txn_id, False, clock))
    return out


def abort_open_txn(
    conn: sa.Connection, txn_id: int, replicated: bool, clock: Clock = now_ms
) -> list[PendingEvent]:
    """Abort ``txn_id`` (open, its TXNS row taken by the caller); its ABORT_TXN event with the
    databases it wrote and its write ids (none for a ``replicated`` txn)."""
    dbs = _written_dbs(conn, txn_id)
    write_ids = [
        int(w)
        for w in conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID)
            .where(TXN_TO_WRITE_ID.c.T2W_TXNID == txn_id)
            .order_by(TXN_TO_WRITE_ID.c.T2W_WRITEID)
        ).scalars()
    ]
    common.end_txn(conn, txn_id, ABORTED, clock())
    # its write notifications stay, as in Hive 4.2 (get_all_write_event_info answers them),
    # until the event retention removes them (purge_events)
    if replicated:
        return []
    return [common.txn_event(events.ABORT_TXN, events.abort_txn_message(txn_id, dbs, write_ids))]


def _written_dbs(conn: sa.Connection, txn_id: int) -> list[str]:
    """The databases a txn wrote (TXN_COMPONENTS and TXN_TO_WRITE_ID), sorted."""
    dbs = set(
        conn.execute(
            sa.select(TXN_COMPONENTS.c.TC_DATABASE).where(TXN_COMPONENTS.c.TC_TXNID == txn_id)
        ).scalars()
    )
    dbs |= set(
        conn.execute(
            sa.select(TXN_TO_WRITE_ID.c.T2W_DATABASE).where(TXN_TO_WRITE_ID.c.T2W_TXNID == txn_id)
        ).scalars()
    )
    return sorted(dbs)
