"""``open_txns``: new open txns, or (replication) the target txns of a policy's source txns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import MetaException, OpenTxnRequest, OpenTxnsResponse, TxnType

from hivemesh.hive import events
from hivemesh.hive.constants import now_ms
from hivemesh.metastore.txn.common import OPEN, Clock, Outcome, take_txn_ids, target_txn, txn_event
from hivemesh.metastore.txn_schema import MIN_HISTORY_LEVEL, REPL_TXN_MAP, TXNS

MAX_OPEN_BATCH = 1000  # hive.txn.max.open.batch (Hive's default): open_txns of more opens this many
MAX_OPEN_TXNS = 100_000  # hive.max.open.txns (Hive's default): open_txns refused beyond this many open


@dataclass(frozen=True)
class OpenPlan:
    """What an OpenTxnRequest asks for: ``count`` txns (at most :data:`MAX_OPEN_BATCH`) of
    ``txn_type`` (a TxnType value); for the replication form the policy and its source txn ids."""

    count: int
    txn_type: int
    policy: str | None = None
    src_ids: tuple[int, ...] = ()

    @property
    def replicated(self) -> bool:
        """True for the replication form (``replPolicy`` with ``replSrcTxnIds``)."""
        return bool(self.src_ids)


def plan(rqst: OpenTxnRequest) -> OpenPlan:
    """The request's :class:`OpenPlan`; raises MetaException for a non-positive count."""
    src_ids = tuple(rqst.replSrcTxnIds or []) if rqst.replPolicy else ()
    n = len(src_ids) if src_ids else (rqst.num_txns or 0)
    if n <= 0:
        raise MetaException(f"Invalid input for number of txns: {n}")
    if src_ids:
        return OpenPlan(min(n, MAX_OPEN_BATCH), TxnType.REPL_CREATED, rqst.replPolicy, src_ids)
    return OpenPlan(min(n, MAX_OPEN_BATCH), rqst.txn_type if rqst.txn_type is not None else TxnType.DEFAULT)


def open_txns(
    conn: sa.Connection, rqst: OpenTxnRequest, user: str, clock: Clock = now_ms
) -> Outcome[OpenTxnsResponse]:
    """OpenTxnRequest -> OpenTxnsResponse(txn_ids): ``num_txns`` new open txns (ids ascending),
    recorded as opened by ``user``, with one OPEN_TXN event.

    With ``replPolicy`` and ``replSrcTxnIds``: one target txn per source id, reusing the
    REPL_TXN_MAP mapping when it exists (idempotent), no event. Raises MetaException for a
    non-positive count or when hive.max.open.txns are open (not for replicated txns: the source
    already passed that guard).
    """
    p = plan(rqst)
    if not p.replicated:
        _refuse_beyond_limit(conn)
    known = _known_targets(conn, p.policy, p.src_ids) if p.policy else {}
    new_ids = take_txn_ids(conn, p.count - len(known)) if p.count > len(known) else []
    # after waiting for the NEXT_TXN_ID row lock: a txn opened while writers queued there
    # would otherwise reach its client with part of its timeout already gone
    ts = clock()
    if new_ids:
        min_open = conn.execute(
            sa.select(sa.func.min(TXNS.c.TXN_ID)).where(TXNS.c.TXN_STATE == OPEN)
        ).scalar()
        conn.execute(TXNS.insert(), txn_rows(new_ids, ts, user, rqst, p.txn_type))
        conn.execute(MIN_HISTORY_LEVEL.insert(), history_rows(new_ids, min_open))
    if p.policy:
        return Outcome(OpenTxnsResponse(txn_ids=_map_sources(conn, p.policy, p.src_ids, known, new_ids)))
    return Outcome(
        OpenTxnsResponse(txn_ids=new_ids), [txn_event(events.OPEN_TXN, events.open_txn_message(new_ids))]
    )


def txn_rows(ids: list[int], ts: int, user: str, rqst: OpenTxnRequest, txn_type: int) -> list[dict[str, Any]]:
    """TXNS rows of txns opened at ``ts`` (ms) by ``user`` from the request's host and agent."""
    return [
        {
            "TXN_ID": t,
            "TXN_STATE": OPEN,
            "TXN_STARTED": ts,
            "TXN_LAST_HEARTBEAT": ts,
            "TXN_USER": user,
            "TXN_HOST": rqst.hostname or "",
            "TXN_AGENT_INFO": rqst.agentInfo,
            "TXN_TYPE": txn_type,
        }
        for t in ids
    ]


def history_rows(ids: list[int], min_open: int | None) -> list[dict[str, int]]:
    """MIN_HISTORY_LEVEL rows of new txns: the lowest txn open when each began (itself or older)."""
    return [{"MHL_TXNID": t, "MHL_MIN_OPEN_TXNID": min(min_open, t) if min_open else t} for t in ids]


def _refuse_beyond_limit(conn: sa.Connection) -> None:
    """Hive's guard against runaway clients (hive.max.open.txns): MetaException when
    :data:`MAX_OPEN_TXNS` txns are open."""
    count = conn.execute(sa.select(sa.func.count()).where(TXNS.c.TXN_STATE == OPEN)).scalar_one()
    if count >= MAX_OPEN_TXNS:
        raise MetaException(
            f"Maximum allowed number of open transactions ({MAX_OPEN_TXNS}) has been reached. "
            f"Current number of open transactions: {count}"
        )


def _known_targets(conn: sa.Connection, policy: str, src_ids: tuple[int, ...]) -> dict[int, int]:
    """Source txn id -> target txn id of the source txns REPL_TXN_MAP already maps."""
    known: dict[int, int] = {}
    for src in src_ids:
        tgt = target_txn(conn, policy, src)
        if tgt is not None:
            known[src] = tgt
    return known


def _map_sources(
    conn: sa.Connection, policy: str, src_ids: tuple[int, ...], known: dict[int, int], new_ids: list[int]
) -> list[int]:
    """Map each unmapped source txn to the next new txn (REPL_TXN_MAP); the target of every source
    txn, in the request's order."""
    fresh = iter(new_ids)
    out = []
    for src in src_ids:
        if src not in known:
            known[src] = next(fresh)
            conn.execute(
                REPL_TXN_MAP.insert().values(
                    RTM_REPL_POLICY=policy, RTM_SRC_TXN_ID=src, RTM_TARGET_TXN_ID=known[src]
                )
            )
        out.append(known[src])
    return out
