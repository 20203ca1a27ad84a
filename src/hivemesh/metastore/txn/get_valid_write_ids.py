"""``get_valid_write_ids``: per table the material of a ValidWriteIdList for a reader's txn
snapshot, following Hive's TxnHandler.getValidWriteIdsForTable (the same answers, so they
serialize to the same ValidReaderWriteIdList strings a Hive metastore gives)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from hive_metastore.ttypes import (
    GetValidWriteIdsRequest,
    GetValidWriteIdsResponse,
    MetaException,
    TableValidWriteIds,
)

from hivemesh.metastore.txn.common import LONG_MAX, java_bitset_bytes, parse_valid_txn_list
from hivemesh.metastore.txn_schema import NEXT_WRITE_ID, TXN_TO_WRITE_ID

_TABLES_PER_STATEMENT = 500
"""Tables named in one statement of get_valid_write_ids (two bound parameters each, within
SQLite's limit of 32,766 and PostgreSQL's of 65,535)."""

TableKey = tuple[str, str]
"""(database, table), lower case."""


def get_valid_write_ids(conn: sa.Connection, rqst: GetValidWriteIdsRequest) -> GetValidWriteIdsResponse:
    """GetValidWriteIdsRequest(fullTableNames ["db.table"], validTxnList) -> per table the
    write-id high watermark, the invalid (open or aborted) write ids below it in ascending
    order, ``minOpenWriteId`` and ``abortedBits`` (java.util.BitSet bytes over that list).

    The high watermark is the highest write id allocated by a txn under the snapshot's txn high
    watermark, else NEXT_WRITE_ID - 1; a write id is invalid when its txn is not valid in
    ``validTxnList``. Tables never written answer high watermark 0. Raises MetaException for a
    missing or malformed ValidTxnList. ``conn``: a read transaction (one snapshot for all tables).
    """
    if not rqst.validTxnList:
        raise MetaException("get_valid_write_ids needs validTxnList")
    txn_hwm, open_ids, aborted_ids = parse_valid_txn_list(rqst.validTxnList)
    names: list[TableKey] = [_table_key(full) for full in rqst.fullTableNames or []]
    wanted = sorted(set(names))
    hwms: dict[TableKey, int] = {}
    candidates: dict[TableKey, list[tuple[int, int]]] = {}
    # three statements for any number of tables (per chunk of _TABLES_PER_STATEMENT)
    for i in range(0, len(wanted), _TABLES_PER_STATEMENT):
        chunk = wanted[i : i + _TABLES_PER_STATEMENT]
        hwms.update(_write_id_hwms(conn, chunk, txn_hwm))
        for key, pair in _candidates(conn, chunk, txn_hwm, open_ids | aborted_ids):
            candidates.setdefault(key, []).append(pair)
    return GetValidWriteIdsResponse(
        tblValidWriteIds=[
            table_write_ids(key, hwms.get(key, 0), candidates.get(key, []), txn_hwm, open_ids, aborted_ids)
            for key in names
        ]
    )


def _table_key(full_name: str) -> TableKey:
    db, _, table = full_name.lower().partition(".")
    return db, table


def table_write_ids(
    key: TableKey,
    hwm: int,
    candidates: Sequence[tuple[int, int]],
    txn_hwm: int,
    open_ids: set[int],
    aborted_ids: set[int],
) -> TableValidWriteIds:
    """A table's TableValidWriteIds from its write-id high watermark and its (txn id, write id)
    mappings in ascending write id order that may be invalid in the snapshot (txn high watermark
    ``txn_hwm``, open and aborted txn ids)."""
    exceptions = open_ids | aborted_ids
    invalid: list[int] = []
    aborted_bits: list[int] = []
    min_open = LONG_MAX
    for txn_id, write_id in candidates:
        if write_id > hwm or (txn_id <= txn_hwm and txn_id not in exceptions):
            continue  # above the snapshot's high watermark, or committed in the snapshot
        invalid.append(write_id)
        if txn_id in aborted_ids:
            aborted_bits.append(len(invalid) - 1)
        else:
            min_open = min(min_open, write_id)
    return TableValidWriteIds(
        fullTableName=f"{key[0]}.{key[1]}",
        writeIdHighWaterMark=hwm,
        invalidWriteIds=invalid,
        minOpenWriteId=min_open if min_open < LONG_MAX else None,
        abortedBits=java_bitset_bytes(aborted_bits),
    )


def _write_id_hwms(conn: sa.Connection, chunk: list[TableKey], txn_hwm: int) -> dict[TableKey, int]:
    """Write-id high watermarks of the chunk's tables (absent: 0): the highest write id of a txn
    at or below ``txn_hwm``, else NEXT_WRITE_ID - 1 when positive."""
    t2w, nwi = TXN_TO_WRITE_ID.c, NEXT_WRITE_ID.c
    hwms: dict[TableKey, int] = {}
    for db, table, hwm in conn.execute(
        sa.select(t2w.T2W_DATABASE, t2w.T2W_TABLE, sa.func.max(t2w.T2W_WRITEID))
        .where(sa.tuple_(t2w.T2W_DATABASE, t2w.T2W_TABLE).in_(chunk), t2w.T2W_TXNID <= txn_hwm)
        .group_by(t2w.T2W_DATABASE, t2w.T2W_TABLE)
    ):
        hwms[(db, table)] = hwm or 0
    unwritten = [k for k in chunk if hwms.get(k, 0) <= 0]
    if unwritten:
        for db, table, nxt in conn.execute(
            sa.select(nwi.NWI_DATABASE, nwi.NWI_TABLE, nwi.NWI_NEXT).where(
                sa.tuple_(nwi.NWI_DATABASE, nwi.NWI_TABLE).in_(unwritten)
            )
        ):
            if nxt is not None and nxt - 1 > 0:
                hwms[(db, table)] = nxt - 1
    return hwms


def _candidates(
    conn: sa.Connection, chunk: list[TableKey], txn_hwm: int, exceptions: set[int]
) -> list[tuple[TableKey, tuple[int, int]]]:
    """((db, table), (txn id, write id)) of the chunk's mappings that may be invalid, by write id:
    those of txns above ``txn_hwm`` or in ``exceptions`` (every mapping when there are more than
    1,000 exceptions, rather than a statement with that many parameters)."""
    t2w = TXN_TO_WRITE_ID.c
    q = sa.select(t2w.T2W_DATABASE, t2w.T2W_TABLE, t2w.T2W_TXNID, t2w.T2W_WRITEID).where(
        sa.tuple_(t2w.T2W_DATABASE, t2w.T2W_TABLE).in_(chunk)
    )
    if len(exceptions) <= 1000:  # fetch only the candidates, not the tables' whole history
        after = t2w.T2W_TXNID > txn_hwm
        q = q.where(sa.or_(after, t2w.T2W_TXNID.in_(exceptions)) if exceptions else after)
    return [
        ((db, table), (txn_id, write_id))
        for db, table, txn_id, write_id in conn.execute(q.order_by(t2w.T2W_WRITEID))
    ]
