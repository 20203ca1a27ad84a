"""Table and partition column statistics (``TAB_COL_STATS``, ``PART_COL_STATS``).

Each ``ColumnStatisticsData`` is stored as Thrift JSON in ``STATS_DATA``, so every statistics kind
(boolean, long, double, string, binary, decimal, date, timestamp) round-trips unchanged.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AggrStats,
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    InvalidInputException,
    MetaException,
    NoSuchObjectException,
    PartitionsStatsResult,
    TableStatsResult,
)
from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.TSerialization import deserialize, serialize

from hivemesh.hive import aggr_stats, events, stats_merge
from hivemesh.hive.constants import COLUMN_STATS_ACCURATE, now_s
from hivemesh.hive.names import db_ref, make_part_name, split_part_name
from hivemesh.metastore import rows
from hivemesh.metastore.base import CatalogBase, Tx
from hivemesh.metastore.schema import (
    PART_COL_STATS,
    PARTITION_KEYS,
    PARTITION_PARAMS,
    PARTITIONS,
    TAB_COL_STATS,
    TABLE_PARAMS,
)

_JSON = TJSONProtocolFactory()
DEFAULT_ENGINE = "hive"


def mark_column_stats(
    conn: sa.Connection,
    params: sa.Table,
    owner_col: str,
    owner: int,
    accurate: Sequence[str] = (),
    stale: Sequence[str] | None = None,
) -> None:
    """Maintain Hive's ``COLUMN_STATS_ACCURATE`` parameter of a table or partition.

    Format (Hive StatsSetupConst): ``{"BASIC_STATS":"true","COLUMN_STATS":{"a":"true","b":"true"}}``,
    column names sorted, no spaces. ``accurate`` columns are added; ``stale`` ones removed
    (``stale=[]`` with no ``accurate`` removes every column entry).
    """
    cur = conn.execute(
        sa.select(params.c.PARAM_VALUE).where(
            params.c[owner_col] == owner, params.c.PARAM_KEY == COLUMN_STATS_ACCURATE
        )
    ).scalar()
    try:
        state = json.loads(cur) if cur else {}
        if not isinstance(state, dict):
            state = {}
    except ValueError:
        state = {}
    cols = dict(state.get("COLUMN_STATS") or {})
    if stale is not None:
        for c in stale or list(cols):
            cols.pop(c, None)
    for c in accurate:
        cols[c] = "true"
    out = {k: v for k, v in state.items() if k not in ("COLUMN_STATS",)}
    if cols:
        out["COLUMN_STATS"] = dict(sorted(cols.items()))
    ordered = {k: out[k] for k in sorted(out)}
    conn.execute(
        params.delete().where(params.c[owner_col] == owner, params.c.PARAM_KEY == COLUMN_STATS_ACCURATE)
    )
    if ordered:
        conn.execute(
            params.insert().values(
                **{owner_col: owner},
                PARAM_KEY=COLUMN_STATS_ACCURATE,
                PARAM_VALUE=json.dumps(ordered, separators=(",", ":")),
            )
        )


def _dump(data: ColumnStatisticsData) -> str:
    text: str = serialize(data, _JSON).decode("utf-8")
    return text


def _load(text: str) -> ColumnStatisticsData:
    return deserialize(ColumnStatisticsData(), text.encode("utf-8"), _JSON)


def partition_statistics(
    conn: sa.Connection, cat: str, db: str, tbl: str, parts: dict[int, str], engine: str | None
) -> dict[int, ColumnStatistics]:
    """The column statistics of each partition of ``parts`` (``PART_ID`` -> partition name) that
    has any, as Hive 4 fills ``Partition.colStats``: every column's statistics of ``engine``
    (``hive`` when None), ``lastAnalyzed`` the latest of them."""
    if not parts:
        return {}
    engine = engine or DEFAULT_ENGINE
    q = (
        sa.select(
            PART_COL_STATS.c.PART_ID,
            PART_COL_STATS.c.COLUMN_NAME,
            PART_COL_STATS.c.COLUMN_TYPE,
            PART_COL_STATS.c.STATS_DATA,
            PART_COL_STATS.c.LAST_ANALYZED,
        )
        .where(PART_COL_STATS.c.PART_ID.in_(list(parts)), PART_COL_STATS.c.ENGINE == engine)
        .order_by(PART_COL_STATS.c.PART_ID, PART_COL_STATS.c.COLUMN_NAME)
    )
    out: dict[int, ColumnStatistics] = {}
    for pid, col, typ, data, analyzed in conn.execute(q):
        cs = out.get(pid)
        if cs is None:
            desc = ColumnStatisticsDesc(
                isTblLevel=False, dbName=db, tableName=tbl, partName=parts[pid], catName=cat
            )
            cs = out[pid] = ColumnStatistics(statsDesc=desc, statsObj=[], engine=engine)
        cs.statsDesc.lastAnalyzed = max(cs.statsDesc.lastAnalyzed or 0, analyzed or 0)
        cs.statsObj.append(ColumnStatisticsObj(colName=col, colType=typ, statsData=_load(data)))
    return out


class StatisticsMixin(CatalogBase):
    """update/get/delete of column statistics, per table and per partition."""

    def _part_id(self, conn: sa.Connection, tbl_id: int, part_name: str, key_names: list[str]) -> int:
        kv = dict((k.lower(), v) for k, v in split_part_name(part_name))
        name = make_part_name(key_names, [kv.get(k, "") for k in key_names])
        pid: int | None = conn.execute(
            sa.select(PARTITIONS.c.PART_ID).where(
                PARTITIONS.c.TBL_ID == tbl_id, PARTITIONS.c.PART_NAME == name
            )
        ).scalar()
        if pid is None:
            raise NoSuchObjectException(f"Partition {part_name} not found")
        return pid

    def _key_names(self, conn: sa.Connection, tbl_id: int) -> list[str]:
        """A table's partition key names, in key order."""
        return list(
            conn.execute(
                sa.select(PARTITION_KEYS.c.PKEY_NAME)
                .where(PARTITION_KEYS.c.TBL_ID == tbl_id)
                .order_by(PARTITION_KEYS.c.INTEGER_IDX)
            ).scalars()
        )

    def _upsert_stats(
        self,
        conn: sa.Connection,
        table: sa.Table,
        owner_col: str,
        owner: int,
        stats: ColumnStatistics,
        engine: str,
        analyzed: int,
    ) -> None:
        for obj in stats.statsObj or []:
            col = obj.colName.lower()
            conn.execute(
                table.delete().where(
                    table.c[owner_col] == owner, table.c.COLUMN_NAME == col, table.c.ENGINE == engine
                )
            )
            conn.execute(
                table.insert().values(
                    **{owner_col: owner},
                    COLUMN_NAME=col,
                    COLUMN_TYPE=obj.colType,
                    ENGINE=engine,
                    LAST_ANALYZED=analyzed,
                    STATS_DATA=_dump(obj.statsData),
                )
            )

    def _update(self, stats: ColumnStatistics, partition: bool, write_id: int = -1) -> bool:
        """Store one ColumnStatistics and append UPDATE_TBL_COL_STAT_EVENT or
        UPDATE_PART_COL_STAT_EVENT (``write_id``: the request's, -1 when none)."""
        with self.write() as tx:
            return self._update_in(tx, stats, partition, write_id)

    def _update_in(self, tx: Tx, stats: ColumnStatistics, partition: bool, write_id: int) -> bool:
        """:meth:`_update` inside the caller's transaction ``tx``."""
        desc = stats.statsDesc
        if desc is None:
            raise InvalidInputException("ColumnStatistics without statsDesc")
        db = db_ref(desc.dbName, desc.catName)
        engine = stats.engine or DEFAULT_ENGINE
        row = self.table_row(tx.conn, db, desc.tableName, for_update=True)
        cols = self._column_types(tx.conn, row)
        for obj in stats.statsObj or []:
            if obj.colName.lower() not in cols:
                raise MetaException(
                    f"Column {obj.colName} doesn't exist in table {row.TBL_NAME} in database {row.DB_NAME}"
                )
        names = [o.colName.lower() for o in stats.statsObj or []]
        analyzed = now_s()  # Hive records the server's time of the update, not the client's
        if partition:
            keys = self._key_names(tx.conn, row.TBL_ID)
            pid = self._part_id(tx.conn, row.TBL_ID, desc.partName or "", keys)
            self._upsert_stats(tx.conn, PART_COL_STATS, "PART_ID", pid, stats, engine, analyzed)
            mark_column_stats(tx.conn, PARTITION_PARAMS, "PART_ID", pid, accurate=names)
        else:
            self._upsert_stats(tx.conn, TAB_COL_STATS, "TBL_ID", row.TBL_ID, stats, engine, analyzed)
            mark_column_stats(tx.conn, TABLE_PARAMS, "TBL_ID", row.TBL_ID, accurate=names)
        table = self._table_image(tx.conn, row.CTLG_NAME, row.DB_NAME, row.TBL_NAME)
        stored = ColumnStatistics(
            statsDesc=ColumnStatisticsDesc(
                isTblLevel=not partition,
                dbName=row.DB_NAME,
                tableName=row.TBL_NAME,
                partName=None,
                lastAnalyzed=analyzed,
                catName=row.CTLG_NAME,
            ),
            statsObj=[
                ColumnStatisticsObj(colName=o.colName.lower(), colType=o.colType, statsData=o.statsData)
                for o in stats.statsObj or []
            ],
            engine=engine,
        )
        if partition:
            name = tx.conn.execute(
                sa.select(PARTITIONS.c.PART_NAME).where(PARTITIONS.c.PART_ID == pid)
            ).scalar_one()
            stored.statsDesc.partName = name
            part_vals = [v for _, v in split_part_name(name)]
            params = dict(
                tx.conn.execute(
                    sa.select(PARTITION_PARAMS.c.PARAM_KEY, PARTITION_PARAMS.c.PARAM_VALUE).where(
                        PARTITION_PARAMS.c.PART_ID == pid
                    )
                ).all()
            )
            message = events.update_part_col_stat_message(stored, part_vals, params, table, write_id)
            tx.event(
                events.UPDATE_PART_COL_STAT_EVENT,
                message,
                db=row.DB_NAME,
                table=row.TBL_NAME,
                catalog=row.CTLG_NAME,
            )
        else:
            message = events.update_table_col_stat_message(stored, table, table.parameters or {}, write_id)
            tx.event(
                events.UPDATE_TBL_COL_STAT_EVENT,
                message,
                db=row.DB_NAME,
                table=row.TBL_NAME,
                catalog=row.CTLG_NAME,
            )
        return True

    def _column_types(self, conn: sa.Connection, row: sa.Row[Any]) -> dict[str, str]:
        """Lower-cased column name -> type of the table in ``row`` (a TBLS row)."""
        sd = rows.load_sds(conn, [row.SD_ID]).get(row.SD_ID) if row.SD_ID else None
        return {c.name.lower(): c.type for c in (sd.cols if sd else [])}

    def update_table_column_statistics(self, stats_obj: ColumnStatistics) -> bool:
        """Store table-level statistics; NoSuchObjectException (table), InvalidObjectException (column)."""
        return self._update(stats_obj, partition=False)

    def update_partition_column_statistics(self, stats_obj: ColumnStatistics) -> bool:
        """Store statistics of the partition named in ``statsDesc.partName``."""
        return self._update(stats_obj, partition=True)

    def set_aggr_stats_for(self, request: Any) -> bool:
        """Store a batch of ColumnStatistics (table or partition level by ``statsDesc.isTblLevel``)
        in one transaction; one UPDATE_*_COL_STAT event per ColumnStatistics stored, as Hive 4.
        With ``needMerge`` the statistics are merged into the stored ones, of the columns marked
        accurate only (:meth:`_merged`); an entry left with no column stores nothing. An invalid
        entry (unknown table, partition or column) fails the call and stores none of them
        (NoSuchObjectException, MetaException, InvalidInputException without ``statsDesc``)."""
        write_id = request.writeId if getattr(request, "writeId", None) is not None else -1
        merge = bool(getattr(request, "needMerge", False))
        with self.write() as tx:  # all or nothing: one bad ColumnStatistics leaves the others unset
            for cs in request.colStats or []:
                if cs.statsDesc is None:
                    raise InvalidInputException("ColumnStatistics without statsDesc")
                partition = not cs.statsDesc.isTblLevel
                if merge:
                    cs = self._merged(tx.conn, cs, partition)
                    if not cs.statsObj:
                        continue
                self._update_in(tx, cs, partition=partition, write_id=write_id)
        return True

    def _merged(self, conn: sa.Connection, stats: ColumnStatistics, partition: bool) -> ColumnStatistics:
        """``stats`` as ``set_aggr_stats_for`` with ``needMerge`` stores them (Hive 4's rules): only
        the columns that ``COLUMN_STATS_ACCURATE`` of the table or partition marks accurate are
        kept, each merged with the statistics stored for it (:mod:`hivemesh.hive.stats_merge`);
        the others are dropped, since statistics of the new rows alone would understate the
        whole. Raises NoSuchObjectException for a missing table or partition."""
        desc = stats.statsDesc
        row = self.table_row(conn, db_ref(desc.dbName, desc.catName), desc.tableName, for_update=True)
        if partition:
            owner = self._part_id(conn, row.TBL_ID, desc.partName or "", self._key_names(conn, row.TBL_ID))
            params, stats_table, owner_col = PARTITION_PARAMS, PART_COL_STATS, "PART_ID"
        else:
            owner, params, stats_table, owner_col = row.TBL_ID, TABLE_PARAMS, TAB_COL_STATS, "TBL_ID"
        text = conn.execute(
            sa.select(params.c.PARAM_VALUE).where(
                params.c[owner_col] == owner, params.c.PARAM_KEY == COLUMN_STATS_ACCURATE
            )
        ).scalar()
        try:
            state = json.loads(text) if text else {}
        except ValueError:
            state = {}
        accurate = state.get("COLUMN_STATS") if isinstance(state, dict) else None
        accurate = {str(c).lower() for c in accurate} if isinstance(accurate, dict) else set()
        kept = [o for o in stats.statsObj or [] if o.colName.lower() in accurate]
        engine = stats.engine or DEFAULT_ENGINE
        old = {
            o.colName: o.statsData
            for o in self._objs(conn, stats_table, owner_col, [owner], [o.colName for o in kept], engine).get(
                owner, []
            )
        }
        merged = [
            ColumnStatisticsObj(
                colName=o.colName,
                colType=o.colType,
                statsData=(
                    stats_merge.merge_stats_data(o.statsData, old[o.colName.lower()])
                    if o.colName.lower() in old
                    else o.statsData
                ),
            )
            for o in kept
        ]
        return ColumnStatistics(
            statsDesc=desc, statsObj=merged, isStatsCompliant=stats.isStatsCompliant, engine=stats.engine
        )

    def _objs(
        self,
        conn: sa.Connection,
        table: sa.Table,
        owner_col: str,
        owners: Any,
        cols: list[str] | None,
        engine: str,
    ) -> dict[int, list[ColumnStatisticsObj]]:
        q = sa.select(table.c[owner_col], table.c.COLUMN_NAME, table.c.COLUMN_TYPE, table.c.STATS_DATA).where(
            table.c[owner_col].in_(owners), table.c.ENGINE == engine
        )
        if cols is not None:
            q = q.where(table.c.COLUMN_NAME.in_([c.lower() for c in cols]))
        out: dict[int, list[ColumnStatisticsObj]] = defaultdict(list)
        for owner, col, typ, data in conn.execute(q.order_by(table.c[owner_col], table.c.COLUMN_NAME)):
            out[owner].append(ColumnStatisticsObj(colName=col, colType=typ, statsData=_load(data)))
        return out

    @staticmethod
    def _last_analyzed(
        conn: sa.Connection, table: sa.Table, owner_col: str, owner: int, col: str
    ) -> int | None:
        return conn.execute(
            sa.select(table.c.LAST_ANALYZED).where(
                table.c[owner_col] == owner,
                table.c.COLUMN_NAME == col.lower(),
                table.c.ENGINE == DEFAULT_ENGINE,
            )
        ).scalar()

    def get_table_column_statistics(self, db_name: str, tbl_name: str, col_name: str) -> ColumnStatistics:
        """Statistics of one column (engine ``hive``, as Hive 4 sets it); NoSuchObjectException when
        there are none."""
        with self.read() as conn:
            row = self.table_row(conn, db_name, tbl_name)
            objs = self._objs(conn, TAB_COL_STATS, "TBL_ID", [row.TBL_ID], [col_name], DEFAULT_ENGINE).get(
                row.TBL_ID
            )
            if not objs:
                raise NoSuchObjectException(
                    f"Statistics for column {col_name} of {row.DB_NAME}.{row.TBL_NAME} not found"
                )
            return ColumnStatistics(
                statsDesc=ColumnStatisticsDesc(
                    isTblLevel=True,
                    dbName=row.DB_NAME,
                    tableName=row.TBL_NAME,
                    catName=row.CTLG_NAME,
                    lastAnalyzed=self._last_analyzed(conn, TAB_COL_STATS, "TBL_ID", row.TBL_ID, col_name),
                ),
                statsObj=objs,
                engine=DEFAULT_ENGINE,
            )

    def get_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str
    ) -> ColumnStatistics:
        """Statistics of one column of one partition (engine ``hive``); NoSuchObjectException when
        there are none."""
        with self.read() as conn:
            row = self.table_row(conn, db_name, tbl_name)
            pid = self._part_id(conn, row.TBL_ID, part_name, self._key_names(conn, row.TBL_ID))
            objs = self._objs(conn, PART_COL_STATS, "PART_ID", [pid], [col_name], DEFAULT_ENGINE).get(pid)
            if not objs:
                raise NoSuchObjectException(
                    f"Statistics for column {col_name} of partition {part_name} not found"
                )
            return ColumnStatistics(
                statsDesc=ColumnStatisticsDesc(
                    isTblLevel=False,
                    dbName=row.DB_NAME,
                    tableName=row.TBL_NAME,
                    partName=part_name,
                    catName=row.CTLG_NAME,
                    lastAnalyzed=self._last_analyzed(conn, PART_COL_STATS, "PART_ID", pid, col_name),
                ),
                statsObj=objs,
                engine=DEFAULT_ENGINE,
            )

    def get_table_statistics_req(self, request: Any) -> TableStatsResult:
        """TableStatsRequest: statistics of the named columns (missing ones left out)."""
        db = db_ref(request.dbName, request.catName)
        with self.read() as conn:
            row = self.table_row(conn, db, request.tblName)
            objs = self._objs(
                conn,
                TAB_COL_STATS,
                "TBL_ID",
                [row.TBL_ID],
                request.colNames,
                request.engine or DEFAULT_ENGINE,
            )
            return TableStatsResult(tableStats=objs.get(row.TBL_ID, []))

    def get_partitions_statistics_req(self, request: Any) -> PartitionsStatsResult:
        """PartitionsStatsRequest: ``{partName: [ColumnStatisticsObj]}`` for the named partitions."""
        db = db_ref(request.dbName, request.catName)
        with self.read() as conn:
            row = self.table_row(conn, db, request.tblName)
            keys = self._key_names(conn, row.TBL_ID)
            names = {}
            for n in request.partNames or []:
                try:
                    names[self._part_id(conn, row.TBL_ID, n, keys)] = n
                except NoSuchObjectException:
                    continue
            objs = self._objs(
                conn,
                PART_COL_STATS,
                "PART_ID",
                list(names),
                request.colNames,
                request.engine or DEFAULT_ENGINE,
            )
            return PartitionsStatsResult(partStats={names[pid]: o for pid, o in objs.items()})

    def get_aggr_stats_for(self, request: Any) -> AggrStats:
        """PartitionsStatsRequest -> AggrStats: each requested column's statistics merged over the
        requested partitions (rules: :mod:`hivemesh.hive.aggr_stats`), and ``partsFound``, the
        number of those partitions that have statistics for every requested column.

        No columns or no partitions requested: no statistics and ``partsFound`` 0. Partition names
        that do not exist count as partitions without statistics. Raises NoSuchObjectException
        for a missing table.
        """
        db = db_ref(request.dbName, request.catName)
        cols = [c.lower() for c in request.colNames or []]
        names = list(request.partNames or [])
        with self.read() as conn:
            row = self.table_row(conn, db, request.tblName)
            if not cols or not names:
                return AggrStats(colStats=[], partsFound=0)
            keys = self._key_names(conn, row.TBL_ID)
            index: dict[int, int] = {}
            for i, n in enumerate(names):
                try:
                    index.setdefault(self._part_id(conn, row.TBL_ID, n, keys), i)
                except NoSuchObjectException:
                    continue
            found: dict[tuple[str, str], list[aggr_stats.PartitionStats]] = defaultdict(list)
            per_part: dict[int, set[str]] = defaultdict(set)
            q = sa.select(
                PART_COL_STATS.c.PART_ID, PART_COL_STATS.c.COLUMN_NAME, PART_COL_STATS.c.COLUMN_TYPE,
                PART_COL_STATS.c.STATS_DATA,
            ).where(
                PART_COL_STATS.c.PART_ID.in_(list(index)),
                PART_COL_STATS.c.COLUMN_NAME.in_(cols),
                PART_COL_STATS.c.ENGINE == (request.engine or DEFAULT_ENGINE),
            )  # fmt: skip
            for pid, col, typ, data in conn.execute(q):
                values = aggr_stats.stat_values(_load(data))
                found[(col, typ)].append(aggr_stats.PartitionStats(index[pid], values))
                per_part[pid].add(col)
        order = {c: i for i, c in enumerate(cols)}
        objs = [
            aggr_stats.aggregate_column(col, typ, sorted(rows, key=lambda r: r.index), len(names))
            for (col, typ), rows in sorted(found.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        ]
        parts_found = sum(1 for got in per_part.values() if len(got) == len(cols))
        return AggrStats(colStats=objs, partsFound=parts_found)

    def delete_table_column_statistics(
        self, db_name: str, tbl_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:
        """Delete statistics of one column (all columns when ``col_name`` is None).

        Raises NoSuchObjectException when the table or (for one column) the statistics are missing.
        """
        with self.write() as tx:
            row = self.table_row(tx.conn, db_name, tbl_name, for_update=True)
            q = TAB_COL_STATS.delete().where(
                TAB_COL_STATS.c.TBL_ID == row.TBL_ID, TAB_COL_STATS.c.ENGINE == (engine or DEFAULT_ENGINE)
            )
            if col_name:
                q = q.where(TAB_COL_STATS.c.COLUMN_NAME == col_name.lower())
            n = tx.conn.execute(q).rowcount
            if col_name and not n:
                raise NoSuchObjectException(
                    f"Column stats doesn't exist for {row.DB_NAME}.{row.TBL_NAME}.{col_name}"
                )
            mark_column_stats(
                tx.conn, TABLE_PARAMS, "TBL_ID", row.TBL_ID, stale=[col_name.lower()] if col_name else []
            )
            tx.event(
                events.DELETE_TBL_COL_STAT_EVENT,
                events.delete_table_col_stat_message(
                    row.DB_NAME,
                    row.TBL_NAME,
                    col_name.lower() if col_name else None,
                    engine or DEFAULT_ENGINE,
                ),
                db=row.DB_NAME,
                table=row.TBL_NAME,
                catalog=row.CTLG_NAME,
            )
            return True

    def delete_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:  # noqa: E501
        """Delete statistics of a partition's column (all columns when ``col_name`` is None)."""
        with self.write() as tx:
            row = self.table_row(tx.conn, db_name, tbl_name, for_update=True)
            pid = self._part_id(tx.conn, row.TBL_ID, part_name, self._key_names(tx.conn, row.TBL_ID))
            q = PART_COL_STATS.delete().where(
                PART_COL_STATS.c.PART_ID == pid, PART_COL_STATS.c.ENGINE == (engine or DEFAULT_ENGINE)
            )
            if col_name:
                q = q.where(PART_COL_STATS.c.COLUMN_NAME == col_name.lower())
            n = tx.conn.execute(q).rowcount
            if col_name and not n:
                raise NoSuchObjectException(
                    f"Column stats doesn't exist for partition {part_name} column {col_name}"
                )
            # Hive 2.3 leaves the partition's COLUMN_STATS_ACCURATE as it was here (unlike for tables)
            name = tx.conn.execute(
                sa.select(PARTITIONS.c.PART_NAME).where(PARTITIONS.c.PART_ID == pid)
            ).scalar_one()
            tx.event(
                events.DELETE_PART_COL_STAT_EVENT,
                events.delete_part_col_stat_message(
                    row.DB_NAME,
                    row.TBL_NAME,
                    name,
                    [v for _, v in split_part_name(name)],
                    col_name.lower() if col_name else None,
                    engine or DEFAULT_ENGINE,
                ),
                db=row.DB_NAME,
                table=row.TBL_NAME,
                catalog=row.CTLG_NAME,
            )
            return True
