"""Transactions and locks through the proxy, each sent to the metastore that owns the tables.

A client's transaction is opened on the primary (its id is the one the client sees). When the
transaction first touches a table of another member (a lock, write ids, a write-id snapshot), the
proxy opens a transaction on that member too and keeps the pair; commit, abort and heartbeats go
to every member involved. So a read spanning two members holds one transaction per member, and an
ACID read of a federated member's table runs under that member's own snapshot (Waggle Dance sends
every txn call to the primary, #111). Lock ids of other members are returned as
``(member index << 48) | lock id`` so ``check_lock``/``unlock``/``heartbeat`` find their member
without state. The pairs live in the proxy's memory: after a proxy restart, member transactions end
by their own timeout (no more heartbeats).

A write transaction may write (allocate write ids, take write locks) in one metastore only: there
is no two-phase commit across metastores.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, overload

from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsResponse,
    CommitTxnRequest,
    GetValidWriteIdsRequest,
    GetValidWriteIdsResponse,
    HeartbeatRequest,
    LockType,
    MetaException,
    NoSuchLockException,
    OpenTxnRequest,
    TxnToWriteId,
)

from hivemesh.federation.access import AccessDeniedError, denied
from hivemesh.federation.members import Member, MemberIndexes
from hivemesh.federation.routes import PER_OWNER, methods_of
from hivemesh.federation.routing import MemberCalls
from hivemesh.hive.txn_lists import ValidTxnList
from hivemesh.thrift.server import connection

log = logging.getLogger(__name__)

LOCK_SHIFT = 48
_LOCAL_MASK = (1 << LOCK_SHIFT) - 1
_WRITE_LOCKS = (LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE)


class TxnRouter:
    """The txn and lock calls of the proxy (:data:`HMS_METHODS`), sent through ``fed`` to the
    members involved; ``indexes`` numbers the members in lock ids."""

    HMS_METHODS = methods_of(PER_OWNER)

    def __init__(self, fed: MemberCalls, indexes: MemberIndexes):
        self.fed = fed
        self.indexes = indexes
        self._lock = threading.Lock()
        self._pairs: dict[int, dict[str, int]] = {}  # proxy txn -> {member name: member txn}
        self._writer: dict[int, str] = {}  # proxy txn -> the member it writes to
        self._who: dict[int, tuple[str | None, str | None, int | None]] = {}
        self._open_locks: dict[tuple[int, str], threading.Lock] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def primary(self) -> Member:
        """The primary member (txns are opened there)."""
        return self.fed.registry.primary

    def _member_by_index(self, index: int) -> Member:
        if index == 0:
            return self.primary
        name = self.indexes.name(index)
        member = self.fed.member_named(name) if name is not None else None
        if member is not None:
            return member
        raise NoSuchLockException(f"hivemesh proxy: no metastore with index {index} for this lock id")

    def _decode(self, lockid: int) -> tuple[Member, int]:
        return self._member_by_index(lockid >> LOCK_SHIFT), lockid & _LOCAL_MASK

    @staticmethod
    def _encode(member: Member, lockid: int) -> int:
        return lockid if member.index == 0 else (member.index << LOCK_SHIFT) | lockid

    @overload
    def member_txn(self, member: Member, txn: int) -> int: ...
    @overload
    def member_txn(self, member: Member, txn: None) -> None: ...
    @overload
    def member_txn(self, member: Member, txn: int | None) -> int | None: ...
    def member_txn(self, member: Member, txn: int | None) -> int | None:
        """The member's txn paired with proxy txn ``txn`` (opened on first use)."""
        if not txn or member.index == 0:
            return txn
        with self._lock:
            got = self._pairs.get(txn, {}).get(member.name)
            if got is not None:
                return got
            gate = self._open_locks.setdefault((txn, member.name), threading.Lock())
        with gate:
            with self._lock:
                got = self._pairs.get(txn, {}).get(member.name)
            if got is not None:
                return got
            user, host, txn_type = self._who.get(txn, (None, None, None))
            req = OpenTxnRequest(num_txns=1, user=user or "hivemesh", hostname=host or "hivemesh-proxy",
                                 agentInfo=f"hivemesh proxy txn {txn}", txn_type=txn_type)  # fmt: skip
            resp = self.fed.call_member(member, "open_txns", [req])
            mt: int = resp.txn_ids[0]
            with self._lock:
                self._pairs.setdefault(txn, {})[member.name] = mt
                self._open_locks.pop((txn, member.name), None)
            log.info("txn %d: opened txn %d on %s", txn, mt, member.describe())
            return mt

    def _pairs_of(self, txn: int) -> dict[str, int]:
        with self._lock:
            return dict(self._pairs.get(txn, {}))

    def _forget(self, txn: int) -> None:
        with self._lock:
            self._pairs.pop(txn, None)
            self._writer.pop(txn, None)
            self._who.pop(txn, None)
        session = self.fed.session()
        if txn in session.txns:
            session.txns.remove(txn)

    def _check_writer(self, txn: int | None, member: Member) -> None:
        if not txn:
            return
        with self._lock:
            other = self._writer.setdefault(txn, member.name)
        if other != member.name:
            raise MetaException(
                f"hivemesh proxy: txn {txn} already writes to metastore '{other}'; a transaction can "
                f"write to one metastore only (no two-phase commit across metastores)"
            )

    def _resolve_db(self, db: str) -> tuple[Member, str]:
        return self.fed.resolve(db)

    # ------------------------------------------------------------------ txns
    def open_txns(self, rqst: Any) -> Any:
        """Open txns on the primary; their ids are the client's."""
        _as_authenticated(rqst)
        resp = self.fed.call_member(self.primary, "open_txns", [rqst])
        session = self.fed.session()
        with self._lock:
            for t in resp.txn_ids or []:
                self._who[t] = (rqst.user, rqst.hostname, rqst.txn_type)
        session.txns.extend(resp.txn_ids or [])
        return resp

    def commit_txn(self, rqst: Any) -> None:
        """Commit the member txns paired with ``rqst.txnid``, then the primary's."""
        txn = rqst.txnid
        pairs = self._pairs_of(txn)
        done: list[str] = []
        try:
            for name, mt in pairs.items():
                member = self.fed.member_named(name)
                if member is None:
                    continue
                self.fed.call_member(member, "commit_txn", [CommitTxnRequest(txnid=mt)])
                done.append(name)
        except Exception:
            for name, mt in pairs.items():
                if name not in done:
                    self._abort_member(name, mt)
            try:
                self.fed.call_member(self.primary, "abort_txn", [AbortTxnRequest(txnid=txn)])
            except Exception as e:
                log.warning("txn %d: abort on the primary after a failed member commit: %s", txn, e)
            self._forget(txn)
            raise
        try:
            self.fed.call_member(self.primary, "commit_txn", [rqst])
        finally:
            self._forget(txn)

    def _abort_member(self, name: str, mt: int) -> None:
        member = self.fed.member_named(name)
        if member is None:
            return
        try:
            self.fed.call_member(member, "abort_txn", [AbortTxnRequest(txnid=mt)])
        except Exception as e:
            log.warning("aborting txn %d on %s: %s", mt, name, e)

    def abort_txn(self, rqst: Any) -> None:
        """Abort the member txns paired with ``rqst.txnid`` and the primary's."""
        for name, mt in self._pairs_of(rqst.txnid).items():
            self._abort_member(name, mt)
        try:
            self.fed.call_member(self.primary, "abort_txn", [rqst])
        finally:
            self._forget(rqst.txnid)

    def abort_txns(self, rqst: Any) -> None:
        """Abort several txns (as :meth:`abort_txn`)."""
        for t in rqst.txn_ids or []:
            for name, mt in self._pairs_of(t).items():
                self._abort_member(name, mt)
        try:
            self.fed.call_member(self.primary, "abort_txns", [rqst])
        finally:
            for t in rqst.txn_ids or []:
                self._forget(t)

    def heartbeat(self, ids: Any) -> None:
        """Heartbeat a txn (and its member txns) or a txn-less lock on its member."""
        if ids.txnid:
            for name, mt in self._pairs_of(ids.txnid).items():
                member = self.fed.member_named(name)
                if member is not None:
                    self.fed.call_member(member, "heartbeat", [HeartbeatRequest(txnid=mt)])
            lockid = ids.lockid
            if lockid and lockid >> LOCK_SHIFT:
                ids = HeartbeatRequest(txnid=ids.txnid)
            self.fed.call_member(self.primary, "heartbeat", [ids])
            return
        if ids.lockid:
            member, local = self._decode(ids.lockid)
            self.fed.call_member(member, "heartbeat", [HeartbeatRequest(lockid=local)])
            return
        self.fed.call_member(self.primary, "heartbeat", [ids])

    def heartbeat_txn_range(self, txns: Any) -> Any:
        """Heartbeat a range of txns on the primary and their member txns."""
        resp = self.fed.call_member(self.primary, "heartbeat_txn_range", [txns])
        with self._lock:
            pairs = {t: dict(p) for t, p in self._pairs.items() if txns.min <= t <= txns.max}
        for _t, p in pairs.items():
            for name, mt in p.items():
                member = self.fed.member_named(name)
                if member is not None:
                    try:
                        self.fed.call_member(member, "heartbeat", [HeartbeatRequest(txnid=mt)])
                    except Exception as e:
                        log.warning("heartbeat of txn %d on %s: %s", mt, name, e)
        return resp

    # ------------------------------------------------------------------ write ids
    def allocate_table_write_ids(self, rqst: Any) -> Any:
        """Write ids from the metastore owning ``rqst.dbName``, for the paired member txns."""
        member, real = self._resolve_db(rqst.dbName)
        try:
            member.access.check("allocate_table_write_ids", real, rqst.dbName)
        except AccessDeniedError as e:
            raise denied(e) from e
        if member.index == 0:
            if rqst.dbName.startswith("@"):
                rqst.dbName = real
            return self.fed.call_member(member, "allocate_table_write_ids", [rqst])
        if rqst.replPolicy or rqst.srcTxnToWriteIdList:
            raise MetaException("hivemesh proxy: replication write ids are for the primary only")
        back: dict[int, int] = {}
        mapped = []
        for t in rqst.txnIds or []:
            self._check_writer(t, member)
            mt = self.member_txn(member, t)
            back[mt] = t
            mapped.append(mt)
        rqst.txnIds = mapped
        rqst.dbName = real
        rqst.tableName = member.names.table_in(real, rqst.tableName)
        resp = self.fed.call_member(member, "allocate_table_write_ids", [rqst])
        return AllocateTableWriteIdsResponse(
            txnToWriteIds=[
                TxnToWriteId(txnId=back.get(p.txnId, p.txnId), writeId=p.writeId) for p in resp.txnToWriteIds
            ]
        )

    def get_valid_write_ids(self, rqst: Any) -> Any:
        """Write-id snapshots per table, each from the metastore owning it. Tables of a member other
        than the primary are read under that member's own ValidTxnList (for the member txn paired
        with the client's current txn, when it has one)."""
        groups: dict[int, tuple[Member, list[tuple[int, str, str]]]] = {}
        for pos, full in enumerate(rqst.fullTableNames or []):
            db, dot, table = full.partition(".")
            member, real = self._resolve_db(db)
            groups.setdefault(id(member), (member, []))[1].append(
                (pos, full, f"{real}.{member.names.table_in(real, table)}" if dot else full)
            )
        out: list[Any] = [None] * len(rqst.fullTableNames or [])
        session = self.fed.session()
        current_txn = session.txns[-1] if session.txns else None
        for member, items in groups.values():
            if member.index == 0:
                req = GetValidWriteIdsRequest(
                    fullTableNames=[i[2] for i in items], validTxnList=rqst.validTxnList, writeId=rqst.writeId
                )
            else:
                mt = self.member_txn(member, current_txn)
                open_txns = self.fed.call_member(member, "get_open_txns", [])
                vtl = ValidTxnList.from_open_txns(open_txns, mt)
                req = GetValidWriteIdsRequest(
                    fullTableNames=[i[2] for i in items], validTxnList=str(vtl), writeId=rqst.writeId
                )
            resp = self.fed.call_member(member, "get_valid_write_ids", [req])
            by_name = {t.fullTableName.lower(): t for t in resp.tblValidWriteIds or []}
            for pos, full, sent in items:
                t = by_name.get(sent.lower())
                if t is None:
                    continue
                t.fullTableName = full
                if member.index != 0:  # the member's txn ids are its own: give readers its txn list
                    t.hivemeshValidTxnList = req.validTxnList
                out[pos] = t
        return GetValidWriteIdsResponse(tblValidWriteIds=[t for t in out if t is not None])

    def add_dynamic_partitions(self, rqst: Any) -> None:
        """Record dynamic partitions on the metastore owning ``rqst.dbname``."""
        member, real = self._resolve_db(rqst.dbname)
        try:
            member.access.check("add_dynamic_partitions", real, rqst.dbname)
        except AccessDeniedError as e:
            raise denied(e) from e
        self._check_writer(rqst.txnid, member)
        rqst.txnid = self.member_txn(member, rqst.txnid)
        rqst.dbname = real
        self.fed.call_member(member, "add_dynamic_partitions", [rqst])

    # ------------------------------------------------------------------ locks
    def lock(self, rqst: Any) -> Any:
        """Take a lock on the metastore owning its components' databases (all in one metastore)."""
        _as_authenticated(rqst)
        member: Member | None = None
        real_by_db: dict[str, str] = {}
        for c in rqst.component or []:
            if not c.dbname:
                continue
            m, real = self._resolve_db(c.dbname)
            if member is not None and m is not member:
                raise MetaException(
                    f"hivemesh proxy: a lock request cannot span metastores ({member.name} and {m.name}); "
                    f"take one lock per metastore"
                )
            member = m
            real_by_db[c.dbname] = real
        member = member or self.primary
        for c in rqst.component or []:
            if not c.dbname:
                continue
            real = real_by_db[c.dbname]
            try:
                member.access.check_lock([c.type], real, c.dbname)
            except AccessDeniedError as e:
                raise denied(e) from e
            if c.tablename:
                c.tablename = member.names.table_in(real, c.tablename)
            c.dbname = real
        if member.index != 0:
            if any(c.type in _WRITE_LOCKS for c in rqst.component or []):
                self._check_writer(rqst.txnid, member)
            rqst.txnid = self.member_txn(member, rqst.txnid)
        resp = self.fed.call_member(member, "lock", [rqst])
        resp.lockid = self._encode(member, resp.lockid)
        return resp

    def check_lock(self, rqst: Any) -> Any:
        """Poll a lock on its member."""
        member, local = self._decode(rqst.lockid)
        rqst.lockid = local
        rqst.txnid = self.member_txn(member, rqst.txnid) if rqst.txnid else rqst.txnid
        resp = self.fed.call_member(member, "check_lock", [rqst])
        resp.lockid = self._encode(member, resp.lockid)
        return resp

    def unlock(self, rqst: Any) -> None:
        """Release a lock on its member."""
        member, local = self._decode(rqst.lockid)
        rqst.lockid = local
        self.fed.call_member(member, "unlock", [rqst])


def _as_authenticated(rqst: Any) -> None:
    """A request from a Kerberos-authenticated client carries its principal's user, whatever the
    client wrote (the members trust the proxy, a Kerberos proxy user, to say who acts)."""
    state = connection()
    if state.principal is not None and not state.may_impersonate and state.user:
        rqst.user = state.user
