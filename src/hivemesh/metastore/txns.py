"""Transactions and write ids: Hive's TxnHandler semantics on TXNS, TXN_TO_WRITE_ID and NEXT_WRITE_ID.

- Txn ids come from the single ``NEXT_TXN_ID`` row (read FOR UPDATE), so they are never reused.
- ``get_open_txns`` answers the high watermark (highest id handed out), the open and aborted ids
  below it and the aborted bits; a reader builds its ValidTxnList from that
  (``hivemesh.hive.txn_lists.ValidTxnList.from_open_txns``).
- Write ids are allocated per table from ``NEXT_WRITE_ID``; ``get_valid_write_ids`` follows
  TxnHandler.getValidWriteIdsForTable exactly, so its answers serialize to the same
  ValidReaderWriteIdList strings a Hive metastore gives.
- A committed txn keeps its TXNS row (state ``c``) until the housekeeper purges it after the
  retention, and only below every open txn's MIN_HISTORY_LEVEL; aborted txns that wrote keep
  their rows (their write ids must stay invalid), others are purged like committed ones.
- Replication forms: ``open_txns`` with ``replPolicy`` maps source txn ids to new target txns
  (REPL_TXN_MAP), ``allocate_table_write_ids`` with ``srcTxnToWriteIdList`` forces the source's
  write ids, ``commit_txn``/``abort_txn`` with ``replPolicy`` take source ids. Replicated txns
  append no notification events (they are the target's copy of the source's events).

Times are epoch milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AbortTxnsRequest,
    AddDynamicPartitions,
    AllocateTableWriteIdsRequest,
    AllocateTableWriteIdsResponse,
    CommitTxnRequest,
    GetOpenTxnsInfoResponse,
    GetOpenTxnsRequest,
    GetOpenTxnsResponse,
    GetValidWriteIdsRequest,
    GetValidWriteIdsResponse,
    HeartbeatRequest,
    HeartbeatTxnRangeRequest,
    HeartbeatTxnRangeResponse,
    MaxAllocatedTableWriteIdRequest,
    MaxAllocatedTableWriteIdResponse,
    MetaException,
    NoSuchLockException,
    NoSuchTxnException,
    OpenTxnRequest,
    OpenTxnsResponse,
    ReplTblWriteIdStateRequest,
    SeedTableWriteIdsRequest,
    SeedTxnIdRequest,
    TableValidWriteIds,
    TxnAbortedException,
    TxnInfo,
    TxnState,
    TxnToWriteId,
    TxnType,
)
from sqlalchemy.dialects import postgresql, sqlite

from hivemesh.hive import events
from hivemesh.hive.constants import now_ms
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList
from hivemesh.metastore.base import CatalogBase, Tx, request_user
from hivemesh.metastore.schema import TABLE_PARAMS
from hivemesh.metastore.txn_schema import (
    HIVE_LOCKS,
    MIN_HISTORY_LEVEL,
    NEXT_TXN_ID,
    NEXT_WRITE_ID,
    REPL_TXN_MAP,
    TXN_COMPONENTS,
    TXN_TO_WRITE_ID,
    TXN_WRITE_NOTIFICATION_LOG,
    TXNS,
    WRITE_SET,
)

log = logging.getLogger(__name__)

MAX_OPEN_BATCH = 1000  # hive.txn.max.open.batch (Hive's default): open_txns of more opens this many
MAX_OPEN_TXNS = 100_000  # hive.max.open.txns (Hive's default): open_txns refused beyond this many open
MAX_HEARTBEAT_RANGE = 100_000  # heartbeat_txn_range covers at most this many ids
ABORT_BATCH = 1000  # TxnStore.TIMED_OUT_TXN_ABORT_BATCH_SIZE: timed-out txns aborted per transaction
LONG_MAX = 9223372036854775807
OPEN, ABORTED, COMMITTED = "o", "a", "c"
CONFLICTING_OPS = ("u", "d")  # TC_OPERATION_TYPE of updates and deletes (write-write conflicts)
OPERATION_CODES = {1: "s", 2: "i", 3: "u", 4: "d", 5: "p", 6: "p"}  # DataOperationType -> TC_OPERATION_TYPE


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


_TABLES_PER_STATEMENT = 500
"""Tables named in one statement of get_valid_write_ids (two bound parameters each, within
SQLite's limit of 32,766 and PostgreSQL's of 65,535)."""


class TxnMixin(CatalogBase):
    """HMS transaction and write-id methods of :class:`LocalMetastore`."""

    # ------------------------------------------------------------------ helpers
    def _take_txn_ids(self, conn: sa.Connection, n: int) -> list[int]:
        first = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT).with_for_update()).scalar_one()
        conn.execute(NEXT_TXN_ID.update().values(NTXN_NEXT=first + n))
        return list(range(first, first + n))

    def _txn_state(self, conn: sa.Connection, txn_id: int, for_update: bool = False) -> str | None:
        """The TXNS state of ``txn_id``: o/a/c; ``c`` for a purged past txn; None when never opened."""
        q = sa.select(TXNS.c.TXN_STATE).where(TXNS.c.TXN_ID == txn_id)
        if for_update:
            q = q.with_for_update()
        state: str | None = conn.execute(q).scalar()
        if state is not None:
            return state
        nxt = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one()
        return COMMITTED if 0 < txn_id < nxt else None

    @staticmethod
    def _raise_state(state: str | None, txn_id: int) -> NoReturn:
        """Hive's TxnHandler.raiseTxnUnexpectedState."""
        if state == ABORTED:
            raise TxnAbortedException(f"Transaction {txn_str(txn_id)} already aborted")
        if state == COMMITTED:
            raise NoSuchTxnException(f"Transaction {txn_str(txn_id)} is already committed.")
        raise NoSuchTxnException(f"No such transaction {txn_str(txn_id)}")

    def open_txn_row(self, conn: sa.Connection, txn_id: int | None, for_update: bool = False) -> sa.Row[Any]:
        """The TXNS row of an open txn; raises NoSuchTxnException (unknown or committed) or
        TxnAbortedException (aborted)."""
        q = sa.select(TXNS).where(TXNS.c.TXN_ID == (txn_id or 0))
        if for_update:
            q = q.with_for_update()
        row = conn.execute(q).first()
        if row is None or row.TXN_STATE != OPEN:
            self._raise_state(
                row.TXN_STATE if row is not None else self._txn_state(conn, txn_id or 0), txn_id or 0
            )
        return row

    def _target_txn(self, conn: sa.Connection, policy: str, src_txn_id: int) -> int | None:
        return conn.execute(
            sa.select(REPL_TXN_MAP.c.RTM_TARGET_TXN_ID).where(
                REPL_TXN_MAP.c.RTM_REPL_POLICY == policy, REPL_TXN_MAP.c.RTM_SRC_TXN_ID == src_txn_id
            )
        ).scalar()

    # ------------------------------------------------------------------ open / list
    def open_txns(self, rqst: OpenTxnRequest) -> OpenTxnsResponse:
        """OpenTxnRequest -> OpenTxnsResponse(txn_ids): ``num_txns`` new open txns (ids ascending).

        With ``replPolicy`` and ``replSrcTxnIds``: one target txn per source id, reusing the
        mapping when it exists (idempotent). Raises MetaException for a non-positive count.
        Appends one OPEN_TXN event (not for replicated txns).
        """
        n = rqst.num_txns or 0
        policy = rqst.replPolicy
        src_ids = list(rqst.replSrcTxnIds or [])
        if policy and src_ids:
            n = len(src_ids)
        if n <= 0:
            raise MetaException(f"Invalid input for number of txns: {n}")
        n = min(n, MAX_OPEN_BATCH)
        txn_type = rqst.txn_type if rqst.txn_type is not None else TxnType.DEFAULT
        if policy and src_ids:
            txn_type = TxnType.REPL_CREATED
        with self.write() as tx:
            c = tx.conn
            if not (policy and src_ids):
                # Hive's guard against runaway clients (hive.max.open.txns); replicated txns
                # mirror a source that already passed it
                count = c.execute(sa.select(sa.func.count()).where(TXNS.c.TXN_STATE == OPEN)).scalar_one()
                if count >= MAX_OPEN_TXNS:
                    raise MetaException(
                        f"Maximum allowed number of open transactions ({MAX_OPEN_TXNS}) has been reached. "
                        f"Current number of open transactions: {count}"
                    )
            known: dict[int, int] = {}
            if policy and src_ids:
                for src in src_ids:
                    tgt = self._target_txn(c, policy, src)
                    if tgt is not None:
                        known[src] = tgt
            new_ids = self._take_txn_ids(c, n - len(known)) if n > len(known) else []
            # after waiting for the NEXT_TXN_ID row lock: a txn opened while writers queued there
            # would otherwise reach its client with part of its timeout already gone
            ts = now_ms()
            min_open = c.execute(
                sa.select(sa.func.min(TXNS.c.TXN_ID)).where(TXNS.c.TXN_STATE == OPEN)
            ).scalar()
            if new_ids:
                c.execute(
                    TXNS.insert(),
                    [
                        {
                            "TXN_ID": t,
                            "TXN_STATE": OPEN,
                            "TXN_STARTED": ts,
                            "TXN_LAST_HEARTBEAT": ts,
                            "TXN_USER": request_user(rqst.user),
                            "TXN_HOST": rqst.hostname or "",
                            "TXN_AGENT_INFO": rqst.agentInfo,
                            "TXN_TYPE": txn_type,
                        }
                        for t in new_ids
                    ],
                )
                c.execute(
                    MIN_HISTORY_LEVEL.insert(),
                    [
                        {"MHL_TXNID": t, "MHL_MIN_OPEN_TXNID": min(min_open, t) if min_open else t}
                        for t in new_ids
                    ],
                )
            if policy and src_ids:
                fresh = iter(new_ids)
                out = []
                for src in src_ids:
                    if src not in known:
                        known[src] = next(fresh)
                        c.execute(
                            REPL_TXN_MAP.insert().values(
                                RTM_REPL_POLICY=policy, RTM_SRC_TXN_ID=src, RTM_TARGET_TXN_ID=known[src]
                            )
                        )
                    out.append(known[src])
                return OpenTxnsResponse(txn_ids=out)
            tx.event(events.OPEN_TXN, events.open_txn_message(new_ids), catalog=None)
        return OpenTxnsResponse(txn_ids=new_ids)

    def _open_and_aborted(self, conn: sa.Connection) -> tuple[int, Sequence[sa.Row[Any]]]:
        hwm = conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one() - 1
        rows = conn.execute(
            sa.select(TXNS)
            .where(TXNS.c.TXN_STATE.in_([OPEN, ABORTED]), TXNS.c.TXN_ID <= hwm)
            .order_by(TXNS.c.TXN_ID)
        ).all()
        return hwm, rows

    def get_open_txns(self) -> GetOpenTxnsResponse:
        """Snapshot material for a ValidTxnList: high watermark, open and aborted ids (ascending),
        ``min_open_txn`` (when any is open) and ``abortedBits`` (java.util.BitSet bytes over that list).

        Read-only txns are left out, as in Hive 4 (they write nothing).
        """
        return self._open_txns_response({TxnType.READ_ONLY})

    def get_open_txns_req(self, getOpenTxnsRequest: GetOpenTxnsRequest | None) -> GetOpenTxnsResponse:  # noqa: N803
        """Hive 4 request form of :meth:`get_open_txns`: open txns of the ``excludeTxnTypes`` are
        left out; an empty list leaves none out, as in Hive 4 (READ_ONLY ones are listed too). With
        the field unset READ_ONLY txns are left out, as by :meth:`get_open_txns` (Hive 4 fails)."""
        excluded = getattr(getOpenTxnsRequest, "excludeTxnTypes", None)
        if excluded is None:
            excluded = [TxnType.READ_ONLY]
        return self._open_txns_response(set(excluded))

    def _open_txns_response(self, excluded: set[int]) -> GetOpenTxnsResponse:
        with self.read() as conn:
            hwm, rows = self._open_and_aborted(conn)
        ids: list[int] = []
        aborted: list[int] = []
        min_open = None
        for r in rows:
            if r.TXN_STATE == OPEN and min_open is None:
                min_open = r.TXN_ID  # over every open txn, also the excluded ones (as Hive 4)
            if r.TXN_STATE == OPEN and r.TXN_TYPE in excluded:
                continue
            if r.TXN_STATE == ABORTED:
                aborted.append(len(ids))
            ids.append(r.TXN_ID)
        return GetOpenTxnsResponse(
            txn_high_water_mark=hwm,
            open_txns=ids,
            min_open_txn=min_open,
            abortedBits=java_bitset_bytes(aborted),
        )

    def get_open_txns_info(self) -> GetOpenTxnsInfoResponse:
        """Every open and aborted txn up to the high watermark, with user, host and times (ms)."""
        with self.read() as conn:
            hwm, rows = self._open_and_aborted(conn)
        return GetOpenTxnsInfoResponse(
            txn_high_water_mark=hwm,
            open_txns=[
                TxnInfo(
                    id=r.TXN_ID,
                    state=TxnState.OPEN if r.TXN_STATE == OPEN else TxnState.ABORTED,
                    user=r.TXN_USER,
                    hostname=r.TXN_HOST,
                    agentInfo=r.TXN_AGENT_INFO,
                    heartbeatCount=r.TXN_HEARTBEAT_COUNT,
                    metaInfo=r.TXN_META_INFO,
                    startedTime=r.TXN_STARTED,
                    lastHeartbeatTime=r.TXN_LAST_HEARTBEAT,
                )
                for r in rows
            ],
        )

    # ------------------------------------------------------------------ commit / abort
    def _end_txn(self, conn: sa.Connection, txn_id: int, state: str) -> None:
        conn.execute(TXNS.update().where(TXNS.c.TXN_ID == txn_id).values(TXN_STATE=state, TXN_ENDED=now_ms()))
        conn.execute(MIN_HISTORY_LEVEL.delete().where(MIN_HISTORY_LEVEL.c.MHL_TXNID == txn_id))
        self.release_txn_locks(conn, txn_id)

    def _written_dbs(self, conn: sa.Connection, txn_id: int) -> list[str]:
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

    def commit_txn(self, rqst: CommitTxnRequest) -> None:
        """CommitTxnRequest: commit an open txn and release its locks.

        Committing a committed txn is a no-op (Hive makes it idempotent for retries); raises
        TxnAbortedException ("Transaction txnid:N already aborted") or NoSuchTxnException ("No such
        transaction txnid:N"). With ``replPolicy`` the id is the source txn id; an unmapped one is
        ignored. ``keyValue`` (Hive 4) sets a ``_meta`` table parameter in the same transaction.
        Appends COMMIT_TXN with the txn's distinct (database, write id) pairs, as Hive 4.2.
        """
        with self.write() as tx:
            c = tx.conn
            txn_id = rqst.txnid
            if rqst.replPolicy:
                target = self._target_txn(c, rqst.replPolicy, txn_id)
                if target is None:
                    return
                txn_id = target
            state = self._txn_state(c, txn_id, for_update=True)
            if state == COMMITTED:
                log.info("commit_txn(%s): already committed", txn_str(txn_id))
                return
            if state != OPEN:
                self._raise_state(state, txn_id)
            kv = rqst.keyValue
            if kv is not None:
                if not (kv.key or "").startswith("_meta"):
                    raise MetaException(f"CommitTxnKeyValue key must start with _meta: {kv.key}")
                done = c.execute(
                    TABLE_PARAMS.update()
                    .where(TABLE_PARAMS.c.TBL_ID == kv.tableId, TABLE_PARAMS.c.PARAM_KEY == kv.key)
                    .values(PARAM_VALUE=kv.value)
                ).rowcount
                if not done:
                    c.execute(
                        TABLE_PARAMS.insert().values(
                            TBL_ID=kv.tableId, PARAM_KEY=kv.key, PARAM_VALUE=kv.value
                        )
                    )
            t2w = TXN_TO_WRITE_ID.c
            written = [
                (db, wid)
                for db, wid in c.execute(
                    sa.select(t2w.T2W_DATABASE, t2w.T2W_WRITEID)
                    .where(t2w.T2W_TXNID == txn_id)
                    .distinct()
                    .order_by(t2w.T2W_DATABASE, t2w.T2W_WRITEID)
                )
            ]
            self._end_txn(c, txn_id, COMMITTED)
            self._record_write_set(c, txn_id)
            c.execute(TXN_COMPONENTS.delete().where(TXN_COMPONENTS.c.TC_TXNID == txn_id))
            # the txn's write notifications stay (get_all_write_event_info: Hive's replication dump
            # and hivemesh's replication read them after the commit) until the event retention
            # removes them (purge_events)
            if not rqst.replPolicy:
                tx.event(events.COMMIT_TXN, events.commit_txn_message(txn_id, written), catalog=None)

    @staticmethod
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
                .where(
                    tc.TC_TXNID == txn_id, tc.TC_OPERATION_TYPE.in_(CONFLICTING_OPS), tc.TC_TABLE.is_not(None)
                )
                .distinct(),
            )
        )

    def get_latest_txnid_in_conflict(self, txnId: int) -> int:  # noqa: N803 - Thrift names
        """The highest id of a committed txn that overlapped txn ``txnId`` (committed after it
        began) and updated or deleted in a table or partition ``txnId`` itself updates or deletes
        (as its lock requests recorded them); 0 when there is none (Hive answers 0, not -1, then)."""
        tc, ws = TXN_COMPONENTS.c, WRITE_SET.c
        cur = (
            sa.select(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, tc.TC_TXNID)
            .where(tc.TC_TXNID == txnId, tc.TC_OPERATION_TYPE.in_(CONFLICTING_OPS))
            .distinct()
            .subquery("cur")
        )
        q = (
            sa.select(sa.func.max(ws.WS_TXNID))
            .select_from(
                WRITE_SET.join(
                    cur,
                    sa.and_(
                        ws.WS_DATABASE == cur.c.TC_DATABASE,
                        ws.WS_TABLE == cur.c.TC_TABLE,
                        sa.or_(ws.WS_PARTITION == cur.c.TC_PARTITION, cur.c.TC_PARTITION.is_(None)),
                    ),
                )
            )
            .where(cur.c.TC_TXNID <= ws.WS_COMMIT_ID)
        )
        with self.read_statement() as conn:
            return int(conn.execute(q).scalar() or 0)

    def _abort(self, tx: Tx, txn_id: int, replicated: bool) -> None:
        dbs = self._written_dbs(tx.conn, txn_id)
        write_ids = [
            int(w)
            for w in tx.conn.execute(
                sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID)
                .where(TXN_TO_WRITE_ID.c.T2W_TXNID == txn_id)
                .order_by(TXN_TO_WRITE_ID.c.T2W_WRITEID)
            ).scalars()
        ]
        self._end_txn(tx.conn, txn_id, ABORTED)
        # its write notifications stay, as in Hive 4.2 (get_all_write_event_info answers them),
        # until the event retention removes them (purge_events)
        if not replicated:
            tx.event(events.ABORT_TXN, events.abort_txn_message(txn_id, dbs, write_ids), catalog=None)

    def abort_txn(self, rqst: AbortTxnRequest) -> None:
        """AbortTxnRequest: abort an open txn and release its locks; aborting an aborted txn is a
        no-op; NoSuchTxnException for unknown or committed txns. Appends ABORT_TXN."""
        with self.write() as tx:
            txn_id = rqst.txnid
            if rqst.replPolicy:
                target = self._target_txn(tx.conn, rqst.replPolicy, txn_id)
                if target is None:
                    return
                txn_id = target
            state = self._txn_state(tx.conn, txn_id, for_update=True)
            if state == ABORTED:
                return
            if state != OPEN:
                self._raise_state(state, txn_id)
            self._abort(tx, txn_id, bool(rqst.replPolicy))

    def abort_txns(self, rqst: AbortTxnsRequest) -> None:
        """AbortTxnsRequest(txn_ids): abort those of the txns that are open; others are ignored."""
        with self.write() as tx:
            for txn_id in sorted(set(rqst.txn_ids or [])):
                if self._txn_state(tx.conn, txn_id, for_update=True) == OPEN:
                    self._abort(tx, txn_id, False)

    # ------------------------------------------------------------------ heartbeats
    def heartbeat(self, ids: HeartbeatRequest) -> None:
        """HeartbeatRequest(lockid, txnid): keep a txn and/or a lock alive.

        Raises NoSuchTxnException / TxnAbortedException for a txn that is not open and
        NoSuchLockException ("No such lock: lockid:N") for an unknown lock.
        """
        ts = now_ms()
        with self.write() as tx:
            c = tx.conn
            if ids.lockid:
                # NEXT_LOCK_ID before any TXNS row: the order lock/check_lock take them in
                self._serialize_lock_decisions(c)
            if ids.txnid:
                self.open_txn_row(c, ids.txnid, for_update=True)
                c.execute(
                    TXNS.update()
                    .where(TXNS.c.TXN_ID == ids.txnid)
                    .values(TXN_LAST_HEARTBEAT=ts, TXN_HEARTBEAT_COUNT=TXNS.c.TXN_HEARTBEAT_COUNT + 1)
                )
            if ids.lockid:
                n = c.execute(
                    HIVE_LOCKS.update()
                    .where(HIVE_LOCKS.c.HL_LOCK_EXT_ID == ids.lockid)
                    .values(HL_LAST_HEARTBEAT=ts, HL_HEARTBEAT_COUNT=HIVE_LOCKS.c.HL_HEARTBEAT_COUNT + 1)
                ).rowcount
                if not n:
                    raise NoSuchLockException(f"No such lock: lockid:{ids.lockid}")

    def heartbeat_txn_range(self, txns: HeartbeatTxnRangeRequest) -> HeartbeatTxnRangeResponse:
        """HeartbeatTxnRangeRequest(min, max): heartbeat every open txn in [min, max]; the response
        lists the aborted ids and those that are not open otherwise (``nosuch``)."""
        ts = now_ms()
        lo, hi = txns.min, txns.max
        if hi < lo or hi - lo > MAX_HEARTBEAT_RANGE:
            raise MetaException(f"Invalid txn range {lo}..{hi}")
        with self.write() as tx:
            c = tx.conn
            states = dict(
                c.execute(
                    sa.select(TXNS.c.TXN_ID, TXNS.c.TXN_STATE)
                    .where(TXNS.c.TXN_ID.between(lo, hi))
                    .with_for_update()
                ).all()
            )
            c.execute(
                TXNS.update()
                .where(TXNS.c.TXN_ID.between(lo, hi), TXNS.c.TXN_STATE == OPEN)
                .values(TXN_LAST_HEARTBEAT=ts, TXN_HEARTBEAT_COUNT=TXNS.c.TXN_HEARTBEAT_COUNT + 1)
            )
        aborted = {t for t, s in states.items() if s == ABORTED}
        nosuch = {t for t in range(lo, hi + 1) if states.get(t) not in (OPEN, ABORTED)}
        return HeartbeatTxnRangeResponse(aborted=aborted, nosuch=nosuch)

    # ------------------------------------------------------------------ write ids
    def _lock_next_write_id(self, conn: sa.Connection, db: str, table: str) -> int:
        """NWI_NEXT of a table, its row locked (created at 1 when missing)."""
        key = (NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
        nxt: int | None = conn.execute(
            sa.select(NEXT_WRITE_ID.c.NWI_NEXT).where(*key).with_for_update()
        ).scalar()
        if nxt is not None:
            return nxt
        insert = postgresql.insert if self.store.dialect == "postgresql" else sqlite.insert
        conn.execute(
            insert(NEXT_WRITE_ID)
            .values(NWI_DATABASE=db, NWI_TABLE=table, NWI_NEXT=1)
            .on_conflict_do_nothing()
        )
        created: int = conn.execute(
            sa.select(NEXT_WRITE_ID.c.NWI_NEXT).where(*key).with_for_update()
        ).scalar_one()
        return created

    def allocate_table_write_ids(self, rqst: AllocateTableWriteIdsRequest) -> AllocateTableWriteIdsResponse:
        """AllocateTableWriteIdsRequest -> one write id per txn for ``dbName.tableName``.

        A txn that already has a write id for the table gets the same one again (idempotent);
        new ids are consecutive in the order of ``txnIds``. Every txn must be open
        (NoSuchTxnException / TxnAbortedException). Replication form (``replPolicy`` +
        ``srcTxnToWriteIdList``): the source's write ids are forced on the mapped target txns and
        the table's next write id moves past them. Appends ALLOC_WRITE_ID_EVENT for new ids.
        """
        db, table = (rqst.dbName or "").lower(), (rqst.tableName or "").lower()
        if not db or not table:
            raise MetaException("allocate_table_write_ids needs dbName and tableName")
        with self.write() as tx:
            c = tx.conn
            nxt = self._lock_next_write_id(c, db, table)
            if rqst.replPolicy and rqst.srcTxnToWriteIdList:
                return self._allocate_replicated(c, db, table, nxt, rqst.replPolicy, rqst.srcTxnToWriteIdList)
            txn_ids = list(rqst.txnIds or [])
            if not txn_ids:
                raise MetaException("allocate_table_write_ids needs txnIds")
            existing = dict(
                c.execute(
                    sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID, TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                        TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                        TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                        TXN_TO_WRITE_ID.c.T2W_TXNID.in_(txn_ids),
                    )
                ).all()
            )
            out: list[TxnToWriteId] = []
            fresh: list[TxnToWriteId] = []
            for t in txn_ids:
                if t in existing:
                    out.append(TxnToWriteId(txnId=t, writeId=existing[t]))
                    continue
                row = self.open_txn_row(c, t)
                if row.TXN_TYPE == TxnType.READ_ONLY:
                    raise MetaException(f"Read-only transaction {txn_str(t)} cannot allocate write ids")
                pair = TxnToWriteId(txnId=t, writeId=nxt)
                nxt += 1
                out.append(pair)
                fresh.append(pair)
            if fresh:
                c.execute(
                    TXN_TO_WRITE_ID.insert(),
                    [
                        {
                            "T2W_TXNID": p.txnId,
                            "T2W_DATABASE": db,
                            "T2W_TABLE": table,
                            "T2W_WRITEID": p.writeId,
                        }
                        for p in fresh
                    ],
                )
                c.execute(
                    NEXT_WRITE_ID.update()
                    .where(NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
                    .values(NWI_NEXT=nxt)
                )
                tx.event(
                    events.ALLOC_WRITE_ID_EVENT,
                    events.alloc_write_id_message(db, table, fresh),
                    db=db,
                    table=table,
                )
        return AllocateTableWriteIdsResponse(txnToWriteIds=out)

    def _drop_placeholder(self, c: sa.Connection, db: str, table: str, write_id: int) -> None:
        """Forget the aborted placeholder txn :meth:`repl_tbl_writeid_state` recorded for a write id
        that was open at the source: its real txn is being replicated now."""
        rows = (
            c.execute(
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
            c.execute(TXN_TO_WRITE_ID.delete().where(TXN_TO_WRITE_ID.c.T2W_TXNID == txn))
            c.execute(TXNS.delete().where(TXNS.c.TXN_ID == txn))

    def _allocate_replicated(
        self, c: sa.Connection, db: str, table: str, nxt: int, policy: str, pairs: list[TxnToWriteId]
    ) -> AllocateTableWriteIdsResponse:
        out = []
        for p in pairs:
            target = self._target_txn(c, policy, p.txnId)
            if target is None:
                raise NoSuchTxnException(
                    f"No target transaction for source {txn_str(p.txnId)} of policy {policy}"
                )
            have = c.execute(
                sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                    TXN_TO_WRITE_ID.c.T2W_DATABASE == db,
                    TXN_TO_WRITE_ID.c.T2W_TABLE == table,
                    TXN_TO_WRITE_ID.c.T2W_TXNID == target,
                )
            ).scalar()
            if have is None:
                self._drop_placeholder(c, db, table, p.writeId)
                c.execute(
                    TXN_TO_WRITE_ID.insert().values(
                        T2W_TXNID=target, T2W_DATABASE=db, T2W_TABLE=table, T2W_WRITEID=p.writeId
                    )
                )
                have = p.writeId
            out.append(TxnToWriteId(txnId=target, writeId=have))
            nxt = max(nxt, have + 1)
        c.execute(
            NEXT_WRITE_ID.update()
            .where(NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
            .values(NWI_NEXT=nxt)
        )
        return AllocateTableWriteIdsResponse(txnToWriteIds=out)

    def get_valid_write_ids(self, rqst: GetValidWriteIdsRequest) -> GetValidWriteIdsResponse:
        """GetValidWriteIdsRequest(fullTableNames ["db.table"], validTxnList) -> per table the
        write-id high watermark, the invalid (open or aborted) write ids below it in ascending
        order, ``minOpenWriteId`` and ``abortedBits`` (java.util.BitSet bytes over that list).

        Follows Hive's TxnHandler.getValidWriteIdsForTable: the high watermark is the highest write
        id allocated by a txn under the snapshot's txn high watermark, else NEXT_WRITE_ID - 1; a
        write id is invalid when its txn is not valid in ``validTxnList``. Tables never written
        answer high watermark 0. MetaException for a missing or malformed ValidTxnList.
        """
        if not rqst.validTxnList:
            raise MetaException("get_valid_write_ids needs validTxnList")
        txn_hwm, open_ids, aborted_ids = parse_valid_txn_list(rqst.validTxnList)
        exceptions = open_ids | aborted_ids
        names = [tuple(full.lower().partition(".")[::2]) for full in rqst.fullTableNames or []]
        wanted = sorted(set(names))
        hwms: dict[tuple[str, str], int] = {}
        candidates: dict[tuple[str, str], list[tuple[int, int]]] = {}
        t2w = TXN_TO_WRITE_ID.c
        with self.read() as conn:
            # three statements for any number of tables (per chunk of _TABLES_PER_STATEMENT)
            for i in range(0, len(wanted), _TABLES_PER_STATEMENT):
                chunk = wanted[i : i + _TABLES_PER_STATEMENT]
                in_chunk = sa.tuple_(t2w.T2W_DATABASE, t2w.T2W_TABLE).in_(chunk)
                for db, table, hwm in conn.execute(
                    sa.select(t2w.T2W_DATABASE, t2w.T2W_TABLE, sa.func.max(t2w.T2W_WRITEID))
                    .where(in_chunk, t2w.T2W_TXNID <= txn_hwm)
                    .group_by(t2w.T2W_DATABASE, t2w.T2W_TABLE)
                ):
                    hwms[(db, table)] = hwm or 0
                unwritten = [k for k in chunk if hwms.get(k, 0) <= 0]
                if unwritten:
                    nwi = NEXT_WRITE_ID.c
                    for db, table, nxt in conn.execute(
                        sa.select(nwi.NWI_DATABASE, nwi.NWI_TABLE, nwi.NWI_NEXT).where(
                            sa.tuple_(nwi.NWI_DATABASE, nwi.NWI_TABLE).in_(unwritten)
                        )
                    ):
                        if nxt is not None and nxt - 1 > 0:
                            hwms[(db, table)] = nxt - 1
                q = sa.select(t2w.T2W_DATABASE, t2w.T2W_TABLE, t2w.T2W_TXNID, t2w.T2W_WRITEID).where(in_chunk)
                if len(exceptions) <= 1000:  # fetch only the candidates, not the tables' whole history
                    after = t2w.T2W_TXNID > txn_hwm
                    q = q.where(sa.or_(after, t2w.T2W_TXNID.in_(exceptions)) if exceptions else after)
                for db, table, txn_id, write_id in conn.execute(q.order_by(t2w.T2W_WRITEID)):
                    candidates.setdefault((db, table), []).append((txn_id, write_id))
        out = []
        for db, table in names:
            hwm = hwms.get((db, table), 0)
            invalid: list[int] = []
            aborted_bits: list[int] = []
            min_open = LONG_MAX
            for txn_id, write_id in candidates.get((db, table), ()):
                if write_id > hwm or (txn_id <= txn_hwm and txn_id not in exceptions):
                    continue  # above the snapshot's high watermark, or committed in the snapshot
                invalid.append(write_id)
                if txn_id in aborted_ids:
                    aborted_bits.append(len(invalid) - 1)
                else:
                    min_open = min(min_open, write_id)
            out.append(
                TableValidWriteIds(
                    fullTableName=f"{db}.{table}",
                    writeIdHighWaterMark=hwm,
                    invalidWriteIds=invalid,
                    minOpenWriteId=min_open if min_open < LONG_MAX else None,
                    abortedBits=java_bitset_bytes(aborted_bits),
                )
            )
        return GetValidWriteIdsResponse(tblValidWriteIds=out)

    def get_max_allocated_table_write_id(
        self, rqst: MaxAllocatedTableWriteIdRequest
    ) -> MaxAllocatedTableWriteIdResponse:
        """MaxAllocatedTableWriteIdRequest(dbName, tableName) -> the highest write id handed out (0: none)."""
        with self.read() as conn:
            nxt = conn.execute(
                sa.select(NEXT_WRITE_ID.c.NWI_NEXT).where(
                    NEXT_WRITE_ID.c.NWI_DATABASE == (rqst.dbName or "").lower(),
                    NEXT_WRITE_ID.c.NWI_TABLE == (rqst.tableName or "").lower(),
                )
            ).scalar()
        return MaxAllocatedTableWriteIdResponse(maxWriteId=(nxt - 1) if nxt else 0)

    def seed_write_id(self, rqst: SeedTableWriteIdsRequest) -> None:
        """SeedTableWriteIdsRequest(dbName, tableName, seedWriteId): the next write id of a table
        becomes ``seedWriteId`` (replication bootstrap). MetaException if ids were already handed out
        at or above it."""
        db, table = (rqst.dbName or "").lower(), (rqst.tableName or "").lower()
        with self.write() as tx:
            nxt = self._lock_next_write_id(tx.conn, db, table)
            if rqst.seedWriteId < nxt and nxt > 1:
                raise MetaException(f"Write ids up to {nxt - 1} are already allocated for {db}.{table}")
            tx.conn.execute(
                NEXT_WRITE_ID.update()
                .where(NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
                .values(NWI_NEXT=rqst.seedWriteId)
            )

    def repl_tbl_writeid_state(self, rqst: ReplTblWriteIdStateRequest) -> None:
        """ReplTblWriteIdStateRequest(validWriteIdlist, user, hostName, dbName, tableName): take a
        replicated ACID table's write-id state from its source (a replication bootstrap, as Hive's
        REPL LOAD does). Write ids up to the list's high watermark count as committed, except its
        open and aborted ones, which are recorded as written by txns aborted here (readers never
        see their data); the table's next write id moves past the watermark, never back. A
        committed watermark gets a mapping of its own (a committed txn; get_valid_write_ids takes
        a snapshot's watermark from the highest mapping).

        format of ``validWriteIdlist``: Hive ValidReaderWriteIdList.writeToString
        (``db.table:hwm:minOpen:open:aborted``). Raises MetaException when it is malformed or
        empty (the call's IDL declares no exception: Thrift clients get an internal-error
        TApplicationException with its message). Idempotent: ids already recorded for the table
        are left as they are, except those recorded aborted by an earlier call (open at the
        source then) that the list now says are valid: committed at the source since, they
        become committed here (a resync).
        """
        try:
            if not rqst.validWriteIdlist:
                raise ValueError("empty")
            wil = ValidWriteIdList.parse(rqst.validWriteIdlist)
        except ValueError as e:
            raise MetaException(f"Invalid ValidWriteIdList {rqst.validWriteIdlist!r}: {e}") from None
        db, table = (rqst.dbName or "").lower(), (rqst.tableName or "").lower()
        invalid = sorted({*wil.open_write_ids, *wil.aborted_write_ids})
        ts = now_ms()
        with self.write() as tx:
            c = tx.conn
            nxt = self._lock_next_write_id(c, db, table)
            known = set(
                c.execute(
                    sa.select(TXN_TO_WRITE_ID.c.T2W_WRITEID).where(
                        TXN_TO_WRITE_ID.c.T2W_DATABASE == db, TXN_TO_WRITE_ID.c.T2W_TABLE == table
                    )
                ).scalars()
            )
            hwm = wil.high_watermark
            placeholders = c.execute(
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
            ).all()
            committed = [t for t, w in placeholders if w not in set(wil.exceptions)]
            if committed:
                c.execute(
                    TXNS.update()
                    .where(TXNS.c.TXN_ID.in_(committed))
                    .values(TXN_STATE=COMMITTED, TXN_ENDED=ts)
                )
            fresh = [(w, ABORTED) for w in invalid if w not in known and w >= nxt]
            if hwm >= nxt and hwm not in known and hwm not in invalid:
                fresh.append((hwm, COMMITTED))
            txn_ids = self._take_txn_ids(c, len(fresh)) if fresh else []
            if fresh:
                c.execute(
                    TXNS.insert(),
                    [
                        {"TXN_ID": t, "TXN_STATE": state, "TXN_STARTED": ts, "TXN_LAST_HEARTBEAT": ts,
                         "TXN_ENDED": ts if state == COMMITTED else None, "TXN_USER": request_user(rqst.user),
                         "TXN_HOST": rqst.hostName or "", "TXN_AGENT_INFO": None, "TXN_TYPE": TxnType.REPL_CREATED}
                        for t, (_, state) in zip(txn_ids, fresh, strict=True)
                    ],
                )  # fmt: skip
                c.execute(
                    TXN_TO_WRITE_ID.insert(),
                    [
                        {"T2W_TXNID": t, "T2W_DATABASE": db, "T2W_TABLE": table, "T2W_WRITEID": w}
                        for t, (w, _) in zip(txn_ids, fresh, strict=True)
                    ],
                )
            if wil.high_watermark + 1 > nxt:
                c.execute(
                    NEXT_WRITE_ID.update()
                    .where(NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table)
                    .values(NWI_NEXT=wil.high_watermark + 1)
                )

    def seed_txn_id(self, rqst: SeedTxnIdRequest) -> None:
        """SeedTxnIdRequest(seedTxnId): the next txn id becomes ``seedTxnId``; it can only grow
        (MetaException otherwise: txn ids are never reused)."""
        with self.write() as tx:
            nxt = tx.conn.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT).with_for_update()).scalar_one()
            if rqst.seedTxnId < nxt:
                raise MetaException(f"Txn ids up to {nxt - 1} are already used; cannot seed {rqst.seedTxnId}")
            tx.conn.execute(NEXT_TXN_ID.update().values(NTXN_NEXT=rqst.seedTxnId))

    def add_dynamic_partitions(self, rqst: AddDynamicPartitions) -> None:
        """AddDynamicPartitions(txnid, writeid, dbname, tablename, partitionnames, operationType):
        record the partitions an open txn wrote (TXN_COMPONENTS); NoSuchTxnException /
        TxnAbortedException when the txn is not open."""
        with self.write() as tx:
            self.open_txn_row(tx.conn, rqst.txnid)
            code = OPERATION_CODES.get(rqst.operationType or 5, "p")
            rows = [
                {
                    "TC_TXNID": rqst.txnid,
                    "TC_DATABASE": (rqst.dbname or "").lower(),
                    "TC_TABLE": (rqst.tablename or "").lower(),
                    "TC_PARTITION": p,
                    "TC_OPERATION_TYPE": code,
                    "TC_WRITEID": rqst.writeid,
                }
                for p in rqst.partitionnames or []
            ]
            if rows:
                tx.conn.execute(TXN_COMPONENTS.insert(), rows)

    # ------------------------------------------------------------------ catalog hooks
    def on_table_dropped(self, conn: sa.Connection, db: str, table: str) -> None:
        """Forget a dropped table's write ids and txn components (Hive's TxnHandler.cleanupRecords)."""
        db, table = db.lower(), table.lower()
        conn.execute(
            TXN_TO_WRITE_ID.delete().where(
                TXN_TO_WRITE_ID.c.T2W_DATABASE == db, TXN_TO_WRITE_ID.c.T2W_TABLE == table
            )
        )
        conn.execute(
            NEXT_WRITE_ID.delete().where(
                NEXT_WRITE_ID.c.NWI_DATABASE == db, NEXT_WRITE_ID.c.NWI_TABLE == table
            )
        )
        conn.execute(
            TXN_COMPONENTS.delete().where(
                TXN_COMPONENTS.c.TC_DATABASE == db, TXN_COMPONENTS.c.TC_TABLE == table
            )
        )
        conn.execute(WRITE_SET.delete().where(WRITE_SET.c.WS_DATABASE == db, WRITE_SET.c.WS_TABLE == table))

    def on_table_renamed(
        self, conn: sa.Connection, old_db: str, old_table: str, new_db: str, new_table: str
    ) -> None:
        """Move a renamed table's write ids, txn components and locks to its new name (Hive's onRename)."""
        o_db, o_t, n_db, n_t = old_db.lower(), old_table.lower(), new_db.lower(), new_table.lower()
        for tbl, dcol, tcol in (
            (TXN_TO_WRITE_ID, "T2W_DATABASE", "T2W_TABLE"),
            (NEXT_WRITE_ID, "NWI_DATABASE", "NWI_TABLE"),
            (TXN_COMPONENTS, "TC_DATABASE", "TC_TABLE"),
            (HIVE_LOCKS, "HL_DB", "HL_TABLE"),
            (TXN_WRITE_NOTIFICATION_LOG, "WNL_DATABASE", "WNL_TABLE"),
            (WRITE_SET, "WS_DATABASE", "WS_TABLE"),
        ):
            conn.execute(
                tbl.update().where(tbl.c[dcol] == o_db, tbl.c[tcol] == o_t).values({dcol: n_db, tcol: n_t})
            )

    # ------------------------------------------------------------------ housekeeping
    def abort_timed_out_txns(
        self, now: int | None = None, should_stop: Callable[[], bool] | None = None
    ) -> list[int]:
        """Abort open txns whose last heartbeat is older than hive.txn.timeout; returns their ids.
        Replicated txns are left alone (the source decides their fate). At most
        :data:`ABORT_BATCH` txns per database transaction, so other writers go between batches
        (as Hive's reaper does); ``should_stop`` is asked between batches (a stopping server)."""
        now = now if now is not None else now_ms()
        aborted: list[int] = []
        after = 0
        while should_stop is None or not should_stop():
            with self.write() as tx:
                ids = list(
                    tx.conn.execute(
                        sa.select(TXNS.c.TXN_ID)
                        .where(
                            TXNS.c.TXN_STATE == OPEN,
                            TXNS.c.TXN_ID > after,
                            TXNS.c.TXN_LAST_HEARTBEAT < now - self.txn_timeout_ms,
                            TXNS.c.TXN_TYPE != TxnType.REPL_CREATED,
                        )
                        .order_by(TXNS.c.TXN_ID)
                        .limit(ABORT_BATCH)
                        .with_for_update()
                    ).scalars()
                )
                for t in ids:
                    self._abort(tx, t, False)
            aborted.extend(ids)
            if len(ids) < ABORT_BATCH:
                break
            after = ids[-1]
        if len(aborted) > 20:
            log.info(
                "aborted %d txn(s) past hive.txn.timeout (%d ms): %s ... %s",
                len(aborted), self.txn_timeout_ms, aborted[:10], aborted[-10:],
            )  # fmt: skip
            return aborted
        if aborted:
            log.info(
                "aborted %d txn(s) past hive.txn.timeout (%d ms): %s",
                len(aborted),
                self.txn_timeout_ms,
                aborted,
            )
        return aborted

    def purge_completed_txns(self, retention_ms: int, now: int | None = None) -> int:
        """Remove TXNS rows of txns that ended more than ``retention_ms`` ago and lie below every
        open txn's snapshot (MIN_HISTORY_LEVEL): committed ones with their write-id mappings, and
        aborted ones that allocated no write id. Returns how many txns were removed."""
        now = now if now is not None else now_ms()
        with self.write() as tx:
            c = tx.conn
            floor = c.execute(sa.select(sa.func.min(MIN_HISTORY_LEVEL.c.MHL_MIN_OPEN_TXNID))).scalar()
            if floor is None:
                floor = c.execute(sa.select(NEXT_TXN_ID.c.NTXN_NEXT)).scalar_one()
            old = (TXNS.c.TXN_ENDED < now - retention_ms, TXNS.c.TXN_ID < floor)
            committed = sa.select(TXNS.c.TXN_ID).where(TXNS.c.TXN_STATE == COMMITTED, *old)
            # Keep, per table, the purged mapping with the highest write id: get_valid_write_ids
            # derives a snapshot's write-id high watermark from the mappings under its txn high
            # watermark, and that one stands for all purged (committed) write ids below it.
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
            c.execute(
                TXN_TO_WRITE_ID.delete().where(
                    TXN_TO_WRITE_ID.c.T2W_TXNID.in_(committed), TXN_TO_WRITE_ID.c.T2W_WRITEID < top
                )
            )
            n = c.execute(TXNS.delete().where(TXNS.c.TXN_STATE == COMMITTED, *old)).rowcount or 0
            wrote = sa.select(TXN_TO_WRITE_ID.c.T2W_TXNID)
            n += (
                c.execute(
                    TXNS.delete().where(TXNS.c.TXN_STATE == ABORTED, *old, TXNS.c.TXN_ID.not_in(wrote))
                ).rowcount
                or 0
            )
            c.execute(
                TXN_COMPONENTS.delete().where(TXN_COMPONENTS.c.TC_TXNID.not_in(sa.select(TXNS.c.TXN_ID)))
            )
            # Hive's write-set GC: no open txn began at or before these commits any more
            c.execute(WRITE_SET.delete().where(WRITE_SET.c.WS_COMMIT_ID < floor))
        if n:
            log.info("purged %d completed txn record(s)", n)
        return n
