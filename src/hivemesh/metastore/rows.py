"""Rows <-> Thrift objects: storage descriptors, tables, partitions, read and written in bulk.

Every function takes an open SQLAlchemy connection inside the caller's transaction. Reads of many
partitions issue a fixed number of queries (no query per partition): the children of all selected
rows are fetched with one ``IN (subquery)`` query per child table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    FieldSchema,
    Order,
    Partition,
    PrincipalType,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.metastore.schema import (
    BUCKETING_COLS,
    CDS,
    COLUMNS_V2,
    DBS,
    PARTITION_KEY_VALS,
    PARTITION_KEYS,
    PARTITION_PARAMS,
    PARTITIONS,
    SD_PARAMS,
    SDS,
    SERDE_PARAMS,
    SERDES,
    SORT_COLS,
    TABLE_PARAMS,
    TBLS,
)

# ---------------------------------------------------------------- writing


def insert_params(
    conn: sa.Connection, table: sa.Table, owner_col: str, pairs: Iterable[tuple[int, dict]]
) -> None:
    rows = [
        {owner_col: owner, "PARAM_KEY": k, "PARAM_VALUE": v}
        for owner, params in pairs
        if params
        for k, v in params.items()
    ]
    if rows:
        conn.execute(table.insert(), rows)


def insert_returning(conn: sa.Connection, table: sa.Table, pk: str, rows: list[dict]) -> list[int]:
    if not rows:
        return []
    if len(rows) == 1:
        return [conn.execute(table.insert().values(**rows[0])).inserted_primary_key[0]]
    res = conn.execute(table.insert().returning(table.c[pk], sort_by_parameter_order=True), rows)
    return [r[0] for r in res]


def insert_columns(conn: sa.Connection, cols: Sequence[FieldSchema] | None) -> int:
    """Insert a column descriptor (CDS + COLUMNS_V2); returns CD_ID. Column names are lower-cased."""
    cd_id = conn.execute(CDS.insert()).inserted_primary_key[0]
    rows = [
        {
            "CD_ID": cd_id,
            "COLUMN_NAME": c.name.lower(),
            "TYPE_NAME": c.type,
            "COMMENT": c.comment,
            "INTEGER_IDX": i,
        }
        for i, c in enumerate(cols or [])
    ]
    if rows:
        conn.execute(COLUMNS_V2.insert(), rows)
    return cd_id


def load_columns(conn: sa.Connection, cd_id: int) -> list[FieldSchema]:
    """The columns of one column descriptor, in order."""
    q = (
        sa.select(COLUMNS_V2.c.COLUMN_NAME, COLUMNS_V2.c.TYPE_NAME, COLUMNS_V2.c.COMMENT)
        .where(cd_id == COLUMNS_V2.c.CD_ID)
        .order_by(COLUMNS_V2.c.INTEGER_IDX)
    )
    return [FieldSchema(name=n, type=t, comment=c) for n, t, c in conn.execute(q)]


def columns_key(cols: Sequence[FieldSchema] | None) -> tuple:
    """A hashable identity of a column list (names lower-cased, types, comments)."""
    return tuple((c.name.lower(), c.type, c.comment) for c in cols or [])


def insert_sds(
    conn: sa.Connection, sds: Sequence[StorageDescriptor], shared_cd: tuple[int, tuple] | None = None
) -> list[int]:
    """Insert storage descriptors with their SerDe, params, bucket and sort columns; returns SD_IDs.

    ``shared_cd``: ``(CD_ID, columns key)`` of a column descriptor to reuse when an SD has the same
    columns (partitions share their table's, as in Hive).
    """
    serde_rows, cd_ids = [], []
    cd_cache: dict[tuple, int] = {}
    if shared_cd is not None:
        cd_cache[shared_cd[1]] = shared_cd[0]
    for sd in sds:
        si = sd.serdeInfo or SerDeInfo()
        serde_rows.append(
            {
                "NAME": si.name,
                "SLIB": si.serializationLib,
                "DESCRIPTION": si.description,
                "SERIALIZER_CLASS": si.serializerClass,
                "DESERIALIZER_CLASS": si.deserializerClass,
                "SERDE_TYPE": si.serdeType,
            }
        )
        key = columns_key(sd.cols)
        if key not in cd_cache:
            cd_cache[key] = insert_columns(conn, sd.cols)
        cd_ids.append(cd_cache[key])
    serde_ids = insert_returning(conn, SERDES, "SERDE_ID", serde_rows)
    insert_params(
        conn,
        SERDE_PARAMS,
        "SERDE_ID",
        ((sid, (sd.serdeInfo or SerDeInfo()).parameters) for sid, sd in zip(serde_ids, sds, strict=True)),
    )
    sd_rows = [
        {
            "CD_ID": cd,
            "SERDE_ID": sid,
            "INPUT_FORMAT": sd.inputFormat,
            "OUTPUT_FORMAT": sd.outputFormat,
            "LOCATION": sd.location,
            "IS_COMPRESSED": bool(sd.compressed),
            "IS_STOREDASSUBDIRECTORIES": bool(sd.storedAsSubDirectories),
            "NUM_BUCKETS": sd.numBuckets if sd.numBuckets is not None else -1,
        }
        for sd, cd, sid in zip(sds, cd_ids, serde_ids, strict=True)
    ]
    sd_ids = insert_returning(conn, SDS, "SD_ID", sd_rows)
    insert_params(conn, SD_PARAMS, "SD_ID", zip(sd_ids, (sd.parameters for sd in sds), strict=True))
    buckets = [
        {"SD_ID": i, "BUCKET_COL_NAME": c, "INTEGER_IDX": n}
        for i, sd in zip(sd_ids, sds, strict=True)
        for n, c in enumerate(sd.bucketCols or [])
    ]
    if buckets:
        conn.execute(BUCKETING_COLS.insert(), buckets)
    sorts = [
        {"SD_ID": i, "COLUMN_NAME": o.col, "ORDER": o.order, "INTEGER_IDX": n}
        for i, sd in zip(sd_ids, sds, strict=True)
        for n, o in enumerate(sd.sortCols or [])
    ]
    if sorts:
        conn.execute(SORT_COLS.insert(), sorts)
    return sd_ids


def delete_sds(conn: sa.Connection, sd_ids: sa.Select | Sequence[int]) -> None:
    """Delete storage descriptors, their SerDes and column descriptors no longer referenced."""
    sel = sd_ids if isinstance(sd_ids, sa.Select) else list(sd_ids)
    rows = conn.execute(sa.select(SDS.c.SD_ID, SDS.c.SERDE_ID, SDS.c.CD_ID).where(SDS.c.SD_ID.in_(sel))).all()
    if not rows:
        return
    ids = [r[0] for r in rows]
    serdes = [r[1] for r in rows if r[1] is not None]
    cds = {r[2] for r in rows if r[2] is not None}
    for chunk in _chunks(ids):
        conn.execute(SDS.delete().where(SDS.c.SD_ID.in_(chunk)))
    for chunk in _chunks(serdes):
        conn.execute(SERDES.delete().where(SERDES.c.SERDE_ID.in_(chunk)))
    delete_unused_cds(conn, cds)


def delete_unused_cds(conn: sa.Connection, cd_ids: Iterable[int]) -> None:
    """Delete the column descriptors among ``cd_ids`` that no storage descriptor uses any more."""
    cds = set(cd_ids)
    if not cds:
        return
    used = {r[0] for r in conn.execute(sa.select(SDS.c.CD_ID).where(SDS.c.CD_ID.in_(cds)).distinct())}
    unused = list(cds - used)
    if unused:
        conn.execute(CDS.delete().where(CDS.c.CD_ID.in_(unused)))


def _chunks(ids: Sequence[int], size: int = 10_000) -> Iterable[Sequence[int]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


# ---------------------------------------------------------------- reading


def _group_params(
    conn: sa.Connection, table: sa.Table, owner_col: str, owners: Any
) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = defaultdict(dict)
    q = sa.select(table.c[owner_col], table.c.PARAM_KEY, table.c.PARAM_VALUE).where(
        table.c[owner_col].in_(owners)
    )
    for owner, k, v in conn.execute(q):
        out[owner][k] = v if v is not None else ""
    return out


def load_sds(conn: sa.Connection, sd_ids: Any) -> dict[int, StorageDescriptor]:
    """Storage descriptors by SD_ID; ``sd_ids`` is a list or a select of SD_IDs."""
    base = conn.execute(
        sa.select(SDS, SERDES)
        .select_from(SDS.outerjoin(SERDES, SDS.c.SERDE_ID == SERDES.c.SERDE_ID))
        .where(SDS.c.SD_ID.in_(sd_ids))
    ).all()
    if not base:
        return {}
    serde_sel = sa.select(SDS.c.SERDE_ID).where(SDS.c.SD_ID.in_(sd_ids))
    cd_sel = sa.select(SDS.c.CD_ID).where(SDS.c.SD_ID.in_(sd_ids))
    sd_params = _group_params(conn, SD_PARAMS, "SD_ID", sd_ids)
    serde_params = _group_params(conn, SERDE_PARAMS, "SERDE_ID", serde_sel)
    cols: dict[int, list[FieldSchema]] = defaultdict(list)
    for cd, name, typ, comment in conn.execute(
        sa.select(COLUMNS_V2.c.CD_ID, COLUMNS_V2.c.COLUMN_NAME, COLUMNS_V2.c.TYPE_NAME, COLUMNS_V2.c.COMMENT)
        .where(COLUMNS_V2.c.CD_ID.in_(cd_sel))
        .order_by(COLUMNS_V2.c.CD_ID, COLUMNS_V2.c.INTEGER_IDX)
    ):
        cols[cd].append(FieldSchema(name=name, type=typ, comment=comment))
    buckets: dict[int, list[str]] = defaultdict(list)
    for sd, col in conn.execute(
        sa.select(BUCKETING_COLS.c.SD_ID, BUCKETING_COLS.c.BUCKET_COL_NAME)
        .where(BUCKETING_COLS.c.SD_ID.in_(sd_ids))
        .order_by(BUCKETING_COLS.c.SD_ID, BUCKETING_COLS.c.INTEGER_IDX)
    ):
        buckets[sd].append(col)
    sorts: dict[int, list[Order]] = defaultdict(list)
    for sd, col, order in conn.execute(
        sa.select(SORT_COLS.c.SD_ID, SORT_COLS.c.COLUMN_NAME, SORT_COLS.c.ORDER)
        .where(SORT_COLS.c.SD_ID.in_(sd_ids))
        .order_by(SORT_COLS.c.SD_ID, SORT_COLS.c.INTEGER_IDX)
    ):
        sorts[sd].append(Order(col=col, order=order))
    out = {}
    for r in base:
        m = r._mapping
        sd_id = m[SDS.c.SD_ID]
        serde_id = m[SDS.c.SERDE_ID]
        out[sd_id] = StorageDescriptor(
            cols=list(cols.get(m[SDS.c.CD_ID], [])),
            location=m[SDS.c.LOCATION],
            inputFormat=m[SDS.c.INPUT_FORMAT],
            outputFormat=m[SDS.c.OUTPUT_FORMAT],
            compressed=bool(m[SDS.c.IS_COMPRESSED]),
            numBuckets=m[SDS.c.NUM_BUCKETS],
            serdeInfo=SerDeInfo(
                name=m[SERDES.c.NAME],
                serializationLib=m[SERDES.c.SLIB],
                parameters=serde_params.get(serde_id, {}),
                description=m[SERDES.c.DESCRIPTION],
                serializerClass=m[SERDES.c.SERIALIZER_CLASS],
                deserializerClass=m[SERDES.c.DESERIALIZER_CLASS],
                serdeType=m[SERDES.c.SERDE_TYPE],
            )
            if serde_id is not None
            else None,
            bucketCols=buckets.get(sd_id, []),
            sortCols=sorts.get(sd_id, []),
            parameters=sd_params.get(sd_id, {}),
            skewedInfo=SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
            storedAsSubDirectories=bool(m[SDS.c.IS_STOREDASSUBDIRECTORIES]),
        )
    return out


def table_select() -> sa.Select:
    """SELECT of TBLS joined with its database's name and catalog."""
    return sa.select(TBLS, DBS.c.NAME.label("DB_NAME"), DBS.c.CTLG_NAME).select_from(
        TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID)
    )


def load_tables(conn: sa.Connection, where: Any, order: bool = True) -> list[tuple[int, Table]]:
    """Tables matching a condition on TBLS/DBS, as ``(TBL_ID, Table)`` pairs ordered by name."""
    q = table_select().where(where)
    if order:
        q = q.order_by(DBS.c.NAME, TBLS.c.TBL_NAME)
    rows = conn.execute(q).all()
    if not rows:
        return []
    ids = [r.TBL_ID for r in rows]
    sds = load_sds(conn, [r.SD_ID for r in rows if r.SD_ID is not None])
    params = _group_params(conn, TABLE_PARAMS, "TBL_ID", ids)
    pkeys: dict[int, list[FieldSchema]] = defaultdict(list)
    for tid, name, typ, comment in conn.execute(
        sa.select(
            PARTITION_KEYS.c.TBL_ID,
            PARTITION_KEYS.c.PKEY_NAME,
            PARTITION_KEYS.c.PKEY_TYPE,
            PARTITION_KEYS.c.PKEY_COMMENT,
        )
        .where(PARTITION_KEYS.c.TBL_ID.in_(ids))
        .order_by(PARTITION_KEYS.c.TBL_ID, PARTITION_KEYS.c.INTEGER_IDX)
    ):
        pkeys[tid].append(FieldSchema(name=name, type=typ, comment=comment))
    out = []
    for r in rows:
        out.append(
            (
                r.TBL_ID,
                Table(
                    tableName=r.TBL_NAME,
                    dbName=r.DB_NAME,
                    owner=r.OWNER,
                    createTime=r.CREATE_TIME,
                    lastAccessTime=r.LAST_ACCESS_TIME,
                    retention=r.RETENTION,
                    sd=sds.get(r.SD_ID),
                    partitionKeys=pkeys.get(r.TBL_ID, []),
                    parameters=params.get(r.TBL_ID, {}),
                    viewOriginalText=r.VIEW_ORIGINAL_TEXT,
                    viewExpandedText=r.VIEW_EXPANDED_TEXT,
                    tableType=r.TBL_TYPE,
                    temporary=False,
                    rewriteEnabled=bool(r.IS_REWRITE_ENABLED),
                    catName=r.CTLG_NAME,
                    ownerType=r.OWNER_TYPE if r.OWNER_TYPE is not None else PrincipalType.USER,
                    writeId=r.WRITE_ID,
                    id=r.TBL_ID,
                ),
            )
        )
    return out


def load_partitions(
    conn: sa.Connection, db_name: str, tbl_name: str, cat_name: str, part_ids: sa.Select
) -> list[Partition]:
    """Partitions whose PART_ID is in ``part_ids`` (a select), in the order of PART_NAME."""
    rows = conn.execute(
        sa.select(PARTITIONS).where(PARTITIONS.c.PART_ID.in_(part_ids)).order_by(PARTITIONS.c.PART_NAME)
    ).all()
    if not rows:
        return []
    sds = load_sds(conn, sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.PART_ID.in_(part_ids)))
    params = _group_params(conn, PARTITION_PARAMS, "PART_ID", part_ids)
    vals: dict[int, list[str]] = defaultdict(list)
    for pid, v in conn.execute(
        sa.select(PARTITION_KEY_VALS.c.PART_ID, PARTITION_KEY_VALS.c.PART_KEY_VAL)
        .where(PARTITION_KEY_VALS.c.PART_ID.in_(part_ids))
        .order_by(PARTITION_KEY_VALS.c.PART_ID, PARTITION_KEY_VALS.c.INTEGER_IDX)
    ):
        vals[pid].append(v)
    return [
        Partition(
            values=vals.get(r.PART_ID, []),
            dbName=db_name,
            tableName=tbl_name,
            createTime=r.CREATE_TIME,
            lastAccessTime=r.LAST_ACCESS_TIME,
            sd=sds.get(r.SD_ID),
            parameters=params.get(r.PART_ID, {}),
            catName=cat_name,
            writeId=r.WRITE_ID,
        )
        for r in rows
    ]
