"""``truncate_table`` and ``truncate_table_req``: a table's (or some partitions') data removed and
their statistics reset, as Hive 4's TruncateTableHandler does.

The data goes first, outside the database transaction (storage is not transactional, and Hive
deletes before it alters): every file and directory inside the table's directory, or inside each
chosen partition's, the directory itself kept. Then, in one transaction: the basic statistics
present (``numFiles``, ``numRows``, ``totalSize``, ``rawDataSize``, ``numFilesErasureCoded``) set
to 0 and ``COLUMN_STATS_ACCURATE`` to ``{"BASIC_STATS":"true"}`` (accurate basic statistics, no
accurate column statistics), the column statistics rows deleted, and one ALTER_TABLE (or one
ALTER_PARTITION per partition) event marked as a truncate.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import MetaException, NoSuchObjectException, TruncateTableResponse

from hivemesh import storage
from hivemesh.hive import events
from hivemesh.hive.constants import COLUMN_STATS_ACCURATE, NUM_FILES, TOTAL_SIZE, now_s
from hivemesh.hive.names import split_part_name
from hivemesh.metastore import rows
from hivemesh.metastore.base import CatalogBase, Tx, env_props
from hivemesh.metastore.schema import (
    PART_COL_STATS,
    PARTITION_KEYS,
    PARTITION_PARAMS,
    PARTITIONS,
    SDS,
    TAB_COL_STATS,
    TABLE_PARAMS,
    TBLS,
)

BASIC_STATS = (NUM_FILES, "numRows", TOTAL_SIZE, "rawDataSize", "numFilesErasureCoded")
"""Hive's StatsSetupConst.SUPPORTED_STATS: the statistics a truncate sets to 0 where present."""
SKIP_DATA_DELETION = "truncateSkipDataDeletion"
"""EnvironmentContext property: keep the files (a transactional table gets an empty base instead)."""
DDL_TIME = "transient_lastDdlTime"


def truncated_params(params: dict[str, str]) -> dict[str, str]:
    """Parameters after a truncate (a copy): basic statistics present set to ``0``,
    ``COLUMN_STATS_ACCURATE`` saying the basic statistics are accurate and no column's are."""
    out = dict(params)
    for key in BASIC_STATS:
        if key in out:
            out[key] = "0"
    out[COLUMN_STATS_ACCURATE] = json.dumps({"BASIC_STATS": "true"}, separators=(",", ":"))
    return out


def _is_transactional(params: dict[str, str]) -> bool:
    return any(k.lower() == "transactional" and (v or "").lower() == "true" for k, v in params.items())


class TruncateMixin(CatalogBase):
    """HMS truncate calls."""

    def truncate_table(self, dbName: str, tableName: str, partNames: list[str] | None) -> None:  # noqa: N803
        """Truncate a table, or the partitions named ``k=v/...`` in ``partNames`` (None: the whole
        table, every partition of a partitioned one; names of missing partitions are skipped).
        Raises MetaException for a missing table or when the storage refuses a deletion (the
        metadata is then unchanged)."""
        self._truncate(dbName, tableName, partNames, {}, -1)

    def truncate_table_req(self, req: Any) -> TruncateTableResponse:
        """TruncateTableRequest form of :meth:`truncate_table`. ``writeId`` > 0 becomes the table's
        or partitions' write id; with the EnvironmentContext property ``truncateSkipDataDeletion``
        the files are kept, a transactional table getting an empty ``base_<writeId>`` instead (a
        transactional reader then sees no rows), as Hive does for ACID truncates."""
        self._truncate(
            req.dbName,
            req.tableName,
            req.partNames,
            env_props(req.environmentContext),
            req.writeId if req.writeId is not None else -1,
        )
        return TruncateTableResponse()

    def _truncate(
        self, db: str, tbl: str, part_names: list[str] | None, env: dict[str, str], write_id: int
    ) -> None:
        with self.read() as conn:
            try:
                row = self.table_row(conn, db, tbl)
            except NoSuchObjectException as e:  # Hive: the call declares MetaException only
                raise MetaException(e.message) from e
            params = dict(
                conn.execute(
                    sa.select(TABLE_PARAMS.c.PARAM_KEY, TABLE_PARAMS.c.PARAM_VALUE).where(
                        TABLE_PARAMS.c.TBL_ID == row.TBL_ID
                    )
                ).all()
            )
            partitioned = (
                conn.execute(
                    sa.select(PARTITION_KEYS.c.TBL_ID).where(PARTITION_KEYS.c.TBL_ID == row.TBL_ID)
                ).first()
                is not None
            )
            parts = self._truncated_partitions(conn, row.TBL_ID, partitioned, part_names)
            if partitioned:
                locations = [loc for _, loc in parts]
            else:
                locations = [
                    conn.execute(sa.select(SDS.c.LOCATION).where(SDS.c.SD_ID == row.SD_ID)).scalar()
                    if row.SD_ID
                    else None
                ]
        skip = env.get(SKIP_DATA_DELETION, "").lower() == "true"
        if not skip or _is_transactional(params):
            for loc in locations:
                self._truncate_location(loc, skip, write_id)
        with self.write() as tx:
            if partitioned:
                self._truncate_partitions_tx(tx, db, tbl, [pid for pid, _ in parts], write_id)
            else:
                self._truncate_table_tx(tx, db, tbl, write_id)

    @staticmethod
    def _truncated_partitions(
        conn: sa.Connection, tbl_id: int, partitioned: bool, part_names: list[str] | None
    ) -> list[tuple[int, str | None]]:
        """(PART_ID, location) of the partitions a truncate empties: every one of a partitioned
        table when ``part_names`` is None, else those named (none of an unpartitioned table)."""
        if not partitioned:
            return []
        q = (
            sa.select(PARTITIONS.c.PART_ID, SDS.c.LOCATION)
            .select_from(PARTITIONS.outerjoin(SDS, SDS.c.SD_ID == PARTITIONS.c.SD_ID))
            .where(PARTITIONS.c.TBL_ID == tbl_id)
            .order_by(PARTITIONS.c.PART_NAME)
        )
        if part_names is not None:
            q = q.where(PARTITIONS.c.PART_NAME.in_(list(part_names)))
        return [(pid, loc) for pid, loc in conn.execute(q)]

    @staticmethod
    def _truncate_location(location: str | None, skip_deletion: bool, write_id: int) -> None:
        """Empty one directory, or (``skip_deletion``, a transactional table) add an empty
        ``base_<writeId>`` with its ``_metadata_acid`` saying it comes from a truncate.
        MetaException when the storage refuses."""
        if not location:
            return
        try:
            if skip_deletion:
                base = storage.join_location(location, f"base_{write_id:07d}", "_metadata_acid")
                storage.write_file(base, b'{"thisFileVersion":"0","dataFormat":"truncated"}')
            elif not storage.empty_dir(location):
                raise OSError("hivemesh cannot reach this storage")
        except OSError as e:
            raise MetaException(f"Could not truncate {location}: {e}") from e

    def _truncate_table_tx(self, tx: Tx, db: str, tbl: str, write_id: int) -> None:
        conn = tx.conn
        row = self.table_row(conn, db, tbl, exc=MetaException, for_update=True)
        before = self._table_image(conn, row.CTLG_NAME, row.DB_NAME, row.TBL_NAME)
        params = truncated_params(dict(before.parameters or {}))
        conn.execute(TABLE_PARAMS.delete().where(TABLE_PARAMS.c.TBL_ID == row.TBL_ID))
        rows.insert_params(conn, TABLE_PARAMS, "TBL_ID", [(row.TBL_ID, params)])
        if write_id > 0:
            conn.execute(TBLS.update().where(TBLS.c.TBL_ID == row.TBL_ID).values(WRITE_ID=write_id))
        after = self._table_image(conn, row.CTLG_NAME, row.DB_NAME, row.TBL_NAME)
        scope = {"db": row.DB_NAME, "table": row.TBL_NAME, "catalog": row.CTLG_NAME}
        tx.event(
            events.ALTER_TABLE,
            events.alter_table_message(before, after, True, write_id if write_id > 0 else -1),
            **scope,
        )
        engines = conn.execute(
            sa.select(TAB_COL_STATS.c.ENGINE).where(TAB_COL_STATS.c.TBL_ID == row.TBL_ID).distinct()
        ).scalars()
        for engine in sorted(engines):
            tx.event(
                events.DELETE_TBL_COL_STAT_EVENT,
                events.delete_table_col_stat_message(row.DB_NAME, row.TBL_NAME, None, engine),
                **scope,
            )
        conn.execute(TAB_COL_STATS.delete().where(TAB_COL_STATS.c.TBL_ID == row.TBL_ID))

    def _truncate_partitions_tx(self, tx: Tx, db: str, tbl: str, part_ids: list[int], write_id: int) -> None:
        conn = tx.conn
        row = self.table_row(conn, db, tbl, exc=MetaException, for_update=True)
        # partitions dropped since the files went are left out
        ids = list(
            conn.execute(
                sa.select(PARTITIONS.c.PART_ID)
                .where(PARTITIONS.c.TBL_ID == row.TBL_ID, PARTITIONS.c.PART_ID.in_(part_ids))
                .order_by(PARTITIONS.c.PART_NAME)
            ).scalars()
        )
        if not ids:
            return
        before = rows.load_partitions(conn, row.DB_NAME, row.TBL_NAME, row.CTLG_NAME, ids)
        ddl_time = str(now_s())
        new_params = [{**truncated_params(dict(p.parameters or {})), DDL_TIME: ddl_time} for p in before]
        conn.execute(PARTITION_PARAMS.delete().where(PARTITION_PARAMS.c.PART_ID.in_(ids)))
        rows.insert_params(conn, PARTITION_PARAMS, "PART_ID", zip(ids, new_params, strict=True))
        if write_id > 0:
            conn.execute(PARTITIONS.update().where(PARTITIONS.c.PART_ID.in_(ids)).values(WRITE_ID=write_id))
        after = rows.load_partitions(conn, row.DB_NAME, row.TBL_NAME, row.CTLG_NAME, ids)
        table = self._table_image(conn, row.CTLG_NAME, row.DB_NAME, row.TBL_NAME)
        scope = {"db": row.DB_NAME, "table": row.TBL_NAME, "catalog": row.CTLG_NAME}
        names = dict(
            conn.execute(
                sa.select(PARTITIONS.c.PART_ID, PARTITIONS.c.PART_NAME).where(PARTITIONS.c.PART_ID.in_(ids))
            )
            .tuples()
            .all()
        )
        for old, new in zip(before, after, strict=True):  # both in PART_NAME order
            tx.event(
                events.ALTER_PARTITION,
                events.alter_partition_message(table, old, new, True, write_id if write_id > 0 else -1),
                **scope,
            )
        stats = conn.execute(
            sa.select(PART_COL_STATS.c.PART_ID, PART_COL_STATS.c.ENGINE)
            .where(PART_COL_STATS.c.PART_ID.in_(ids))
            .distinct()
            .order_by(PART_COL_STATS.c.PART_ID, PART_COL_STATS.c.ENGINE)
        ).all()
        for pid, engine in stats:
            name = names[pid]
            tx.event(
                events.DELETE_PART_COL_STAT_EVENT,
                events.delete_part_col_stat_message(
                    row.DB_NAME, row.TBL_NAME, name, [v for _, v in split_part_name(name)], None, engine
                ),
                **scope,
            )
        conn.execute(PART_COL_STATS.delete().where(PART_COL_STATS.c.PART_ID.in_(ids)))
