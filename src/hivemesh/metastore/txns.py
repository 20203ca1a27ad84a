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
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

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
    OpenTxnRequest,
    OpenTxnsResponse,
    ReplTblWriteIdStateRequest,
    SeedTableWriteIdsRequest,
    SeedTxnIdRequest,
    TxnInfo,
    TxnState,
    TxnType,
)

from hivemesh.hive.constants import now_ms
from hivemesh.metastore.base import CatalogBase, request_user
from hivemesh.metastore.txn import (
    abort_txns,
    allocate_table_write_ids,
    commit_txn,
    common,
    get_valid_write_ids,
    housekeeping,
    open_txns,
    repl_tbl_writeid_state,
)
from hivemesh.metastore.txn.common import (
    ABORTED,
    CONFLICTING_OPS,
    OPEN,
    Outcome,
    java_bitset_bytes,
    parse_valid_txn_list,
    txn_str,
)
from hivemesh.metastore.txn_schema import (
    HIVE_LOCKS,
    NEXT_TXN_ID,
    NEXT_WRITE_ID,
    TXN_COMPONENTS,
    TXN_TO_WRITE_ID,
    TXN_WRITE_NOTIFICATION_LOG,
    TXNS,
    WRITE_SET,
)

__all__ = ["TxnMixin", "java_bitset_bytes", "parse_valid_txn_list", "txn_str"]

log = logging.getLogger(__name__)

MAX_HEARTBEAT_RANGE = 100_000  # heartbeat_txn_range covers at most this many ids
OPERATION_CODES = {1: "s", 2: "i", 3: "u", 4: "d", 5: "p", 6: "p"}  # DataOperationType -> TC_OPERATION_TYPE

P = ParamSpec("P")
R = TypeVar("R")


_PG_FORGET_TABLE = sa.text(
    """
    WITH a AS (DELETE FROM "TXN_TO_WRITE_ID" WHERE "T2W_DATABASE" = :db AND "T2W_TABLE" = :tbl),
         b AS (DELETE FROM "NEXT_WRITE_ID" WHERE "NWI_DATABASE" = :db AND "NWI_TABLE" = :tbl),
         c AS (DELETE FROM "TXN_COMPONENTS" WHERE "TC_DATABASE" = :db AND "TC_TABLE" = :tbl)
    DELETE FROM "WRITE_SET" WHERE "WS_DATABASE" = :db AND "WS_TABLE" = :tbl
    """
)


class TxnMixin(CatalogBase):
    """HMS transaction and write-id methods of :class:`LocalMetastore`."""

    # ------------------------------------------------------------------ helpers
    def _in_write(
        self,
        operation: Callable[Concatenate[sa.Connection, P], Outcome[R]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Run a txn operation (:mod:`hivemesh.metastore.txn`) in one write transaction, append its
        events in it, and return its response; the operation's exceptions reach the client."""
        with self.write() as tx:
            outcome = operation(tx.conn, *args, **kwargs)
            tx.events.extend(outcome.events)
        return outcome.response

    def open_txn_row(self, conn: sa.Connection, txn_id: int | None, for_update: bool = False) -> sa.Row[Any]:
        """The TXNS row of an open txn; raises NoSuchTxnException (unknown or committed) or
        TxnAbortedException (aborted)."""
        return common.open_txn_row(conn, txn_id, for_update)

    # ------------------------------------------------------------------ open / list
    def open_txns(self, rqst: OpenTxnRequest) -> OpenTxnsResponse:
        """OpenTxnRequest -> OpenTxnsResponse(txn_ids): ``num_txns`` new open txns (ids ascending).

        With ``replPolicy`` and ``replSrcTxnIds``: one target txn per source id, reusing the
        mapping when it exists (idempotent). Raises MetaException for a non-positive count.
        Appends one OPEN_TXN event (not for replicated txns).
        """
        return self._in_write(open_txns.open_txns, rqst, request_user(rqst.user))

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
    def commit_txn(self, rqst: CommitTxnRequest) -> None:
        """CommitTxnRequest: commit an open txn and release its locks.

        Committing a committed txn is a no-op (Hive makes it idempotent for retries); raises
        TxnAbortedException ("Transaction txnid:N already aborted") or NoSuchTxnException ("No such
        transaction txnid:N"). With ``replPolicy`` the id is the source txn id; an unmapped one is
        ignored. ``keyValue`` (Hive 4) sets a ``_meta`` table parameter in the same transaction.
        Appends COMMIT_TXN with the txn's distinct (database, write id) pairs, as Hive 4.2.
        """
        self._in_write(commit_txn.commit_txn, rqst)

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

    def abort_txn(self, rqst: AbortTxnRequest) -> None:
        """AbortTxnRequest: abort an open txn and release its locks; aborting an aborted txn is a
        no-op; NoSuchTxnException for unknown or committed txns. Appends ABORT_TXN."""
        self._in_write(abort_txns.abort_txn, rqst)

    def abort_txns(self, rqst: AbortTxnsRequest) -> None:
        """AbortTxnsRequest(txn_ids): abort those of the txns that are open; others are ignored."""
        self._in_write(abort_txns.abort_txns, rqst)

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
    def allocate_table_write_ids(self, rqst: AllocateTableWriteIdsRequest) -> AllocateTableWriteIdsResponse:
        """AllocateTableWriteIdsRequest -> one write id per txn for ``dbName.tableName``.

        A txn that already has a write id for the table gets the same one again (idempotent);
        new ids are consecutive in the order of ``txnIds``. Every txn must be open
        (NoSuchTxnException / TxnAbortedException). Replication form (``replPolicy`` +
        ``srcTxnToWriteIdList``): the source's write ids are forced on the mapped target txns and
        the table's next write id moves past them. Appends ALLOC_WRITE_ID_EVENT for new ids.
        """
        return self._in_write(allocate_table_write_ids.allocate_table_write_ids, rqst)

    def get_valid_write_ids(self, rqst: GetValidWriteIdsRequest) -> GetValidWriteIdsResponse:
        """GetValidWriteIdsRequest(fullTableNames ["db.table"], validTxnList) -> per table the
        write-id high watermark, the invalid (open or aborted) write ids below it in ascending
        order, ``minOpenWriteId`` and ``abortedBits`` (java.util.BitSet bytes over that list).

        Follows Hive's TxnHandler.getValidWriteIdsForTable
        (:mod:`hivemesh.metastore.txn.get_valid_write_ids`). Tables never written answer high
        watermark 0. MetaException for a missing or malformed ValidTxnList.
        """
        if not rqst.validTxnList:  # before opening a read transaction
            raise MetaException("get_valid_write_ids needs validTxnList")
        with self.read() as conn:
            return get_valid_write_ids.get_valid_write_ids(conn, rqst)

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
            nxt = common.lock_next_write_id(tx.conn, db, table)
            if rqst.seedWriteId < nxt and nxt > 1:
                raise MetaException(f"Write ids up to {nxt - 1} are already allocated for {db}.{table}")
            common.set_next_write_id(tx.conn, db, table, rqst.seedWriteId)

    def repl_tbl_writeid_state(self, rqst: ReplTblWriteIdStateRequest) -> None:
        """ReplTblWriteIdStateRequest(validWriteIdlist, user, hostName, dbName, tableName): take a
        replicated ACID table's write-id state from its source (a replication bootstrap, as Hive's
        REPL LOAD does; :mod:`hivemesh.metastore.txn.repl_tbl_writeid_state`). Idempotent.

        format of ``validWriteIdlist``: Hive ValidReaderWriteIdList.writeToString
        (``db.table:hwm:minOpen:open:aborted``). Raises MetaException when it is malformed or
        empty (the call's IDL declares no exception: Thrift clients get an internal-error
        TApplicationException with its message).
        """
        state = repl_tbl_writeid_state.prepare(rqst, request_user(rqst.user))
        self._in_write(repl_tbl_writeid_state.repl_tbl_writeid_state, state)

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
        if conn.dialect.name == "postgresql":  # one round trip instead of four
            conn.execute(_PG_FORGET_TABLE, {"db": db, "tbl": table})
            return
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
        :data:`~hivemesh.metastore.txn.housekeeping.ABORT_BATCH` txns per database transaction,
        so other writers go between batches (as Hive's reaper does); ``should_stop`` is asked
        between batches (a stopping server)."""
        now = now if now is not None else now_ms()
        aborted: list[int] = []
        after = 0
        while should_stop is None or not should_stop():
            ids = self._in_write(housekeeping.abort_timed_out_batch, after, now - self.txn_timeout_ms)
            aborted.extend(ids)
            if len(ids) < housekeeping.ABORT_BATCH:
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
        n = self._in_write(housekeeping.purge_completed_txns, now - retention_ms)
        if n:
            log.info("purged %d completed txn record(s)", n)
        return n
