"""Rows <-> Thrift objects: storage descriptors, tables, partitions, read and written in bulk.

Every function takes an open SQLAlchemy connection inside the caller's transaction. Reads of many
partitions issue a fixed number of queries (no query per partition): the children of all selected
rows are fetched with one ``IN (subquery)`` query per child table.
"""

from __future__ import annotations

from collections import defaultdict, namedtuple
from collections.abc import Iterable, Sequence
from typing import Any, cast

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
from sqlalchemy import BigInteger

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
    conn: sa.Connection, table: sa.Table, owner_col: str, pairs: Iterable[tuple[int, dict[str, Any]]]
) -> None:
    """Insert ``(owner id, {key: value})`` pairs into a *_PARAMS table."""
    rows = [
        {owner_col: owner, "PARAM_KEY": k, "PARAM_VALUE": v}
        for owner, params in pairs
        if params
        for k, v in params.items()
    ]
    if rows:
        conn.execute(table.insert(), rows)


def insert_returning(conn: sa.Connection, table: sa.Table, pk: str, rows: list[dict[str, Any]]) -> list[int]:
    """Insert rows and return their generated primary keys, in order."""
    if not rows:
        return []
    if len(rows) == 1:
        # one row inserted: SQLAlchemy types inserted_primary_key Optional, None only for no row
        return [cast("sa.Row[Any]", conn.execute(table.insert().values(**rows[0])).inserted_primary_key)[0]]
    res = conn.execute(table.insert().returning(table.c[pk], sort_by_parameter_order=True), rows)
    return [r[0] for r in res]


def insert_columns(conn: sa.Connection, cols: Sequence[FieldSchema] | None) -> int:
    """Insert a column descriptor (CDS + COLUMNS_V2); returns CD_ID. Column names are lower-cased."""
    cd_id: int = cast("sa.Row[Any]", conn.execute(CDS.insert()).inserted_primary_key)[0]  # one row inserted
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
        .where(COLUMNS_V2.c.CD_ID == cd_id)
        .order_by(COLUMNS_V2.c.INTEGER_IDX)
    )
    return [FieldSchema(name=n, type=t, comment=c) for n, t, c in conn.execute(q)]


def columns_key(cols: Sequence[FieldSchema] | None) -> tuple[Any, ...]:
    """A hashable identity of a column list (names lower-cased, types, comments)."""
    return tuple((c.name.lower(), c.type, c.comment) for c in cols or [])


def insert_sds(
    conn: sa.Connection,
    sds: Sequence[StorageDescriptor],
    shared_cd: tuple[int, tuple[Any, ...]] | None = None,
) -> list[int]:
    """Insert storage descriptors with their SerDe, params, bucket and sort columns; returns SD_IDs.

    ``shared_cd``: ``(CD_ID, columns key)`` of a column descriptor to reuse when an SD has the same
    columns (partitions share their table's, as in Hive).
    """
    serde_rows, cd_ids = [], []
    cd_cache: dict[tuple[Any, ...], int] = {}
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
            # unset: Thrift's default 0, as Hive stores it
            "NUM_BUCKETS": sd.numBuckets if sd.numBuckets is not None else 0,
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


# PostgreSQL: delete_sds in one statement (one round trip instead of up to five). The sub-statements
# of a WITH share one snapshot, so the SDS rows being deleted are still visible to the CDS check and
# are excluded by id; the foreign keys (NO ACTION) are checked at the statement's end, when the
# referencing SDS rows are gone.
_PG_SD_CTES = """
    d AS (
        DELETE FROM "SDS" WHERE "SD_ID" = ANY(CAST(:ids AS bigint[])) RETURNING "SERDE_ID", "CD_ID"
    ), s AS (
        DELETE FROM "SERDES" WHERE "SERDE_ID" IN (SELECT "SERDE_ID" FROM d)
    ), c AS (
        DELETE FROM "CDS" WHERE "CD_ID" IN (SELECT "CD_ID" FROM d)
          AND NOT EXISTS (SELECT 1 FROM "SDS" o
                          WHERE o."CD_ID" = "CDS"."CD_ID" AND o."SD_ID" <> ALL(CAST(:ids AS bigint[])))
    )
    SELECT count(*) FROM d
"""
_PG_DELETE_SDS = sa.text("WITH " + _PG_SD_CTES)
_PG_DELETE_TABLE = sa.text(
    """
    WITH p AS (DELETE FROM "PARTITIONS" WHERE "TBL_ID" = :tbl),
         t AS (DELETE FROM "TBLS" WHERE "TBL_ID" = :tbl),
    """
    + _PG_SD_CTES
)


def delete_table_rows_pg(conn: sa.Connection, tbl_id: int, sd_ids: Sequence[int]) -> None:
    """PostgreSQL only: delete a table's row, its partitions' rows (their children and the table's
    go by ON DELETE CASCADE) and the storage descriptors ``sd_ids`` (the table's and its
    partitions') with their SerDes and unused column descriptors, in one statement: one round trip
    where :func:`delete_sds` after the two deletes takes three."""
    conn.execute(_PG_DELETE_TABLE, {"tbl": tbl_id, "ids": list(sd_ids)})


def delete_sds(conn: sa.Connection, sd_ids: sa.Select[Any] | Sequence[int]) -> None:
    """Delete storage descriptors, their SerDes and column descriptors no longer referenced.
    ``sd_ids``: SD_IDs, or a SELECT of them."""
    if conn.dialect.name == "postgresql" and not isinstance(sd_ids, sa.Select):
        for chunk in _chunks(list(sd_ids)):
            conn.execute(_PG_DELETE_SDS, {"ids": list(chunk)})
        return
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
#
# A read is two queries whatever the number of objects: the base rows (joined with their storage
# descriptor and SerDe), then every child row (parameters, columns, keys, bucket and sort columns)
# in one UNION ALL of (kind, owner, k, v, c, idx) tuples.

SD_PARAM, SERDE_PARAM, COLUMN, BUCKET, SORT, TABLE_PARAM, PART_KEY, PART_PARAM, PART_VAL = range(9)

_SD_FIELDS = [
    SDS.c.SD_ID.label("sd_id"),
    SDS.c.CD_ID.label("sd_cd_id"),
    SDS.c.SERDE_ID.label("sd_serde_id"),
    SDS.c.INPUT_FORMAT.label("sd_input"),
    SDS.c.OUTPUT_FORMAT.label("sd_output"),
    SDS.c.LOCATION.label("sd_location"),
    SDS.c.IS_COMPRESSED.label("sd_compressed"),
    SDS.c.IS_STOREDASSUBDIRECTORIES.label("sd_subdirs"),
    SDS.c.NUM_BUCKETS.label("sd_buckets"),
    SERDES.c.NAME.label("se_name"),
    SERDES.c.SLIB.label("se_slib"),
    SERDES.c.DESCRIPTION.label("se_desc"),
    SERDES.c.SERIALIZER_CLASS.label("se_ser"),
    SERDES.c.DESERIALIZER_CLASS.label("se_deser"),
    SERDES.c.SERDE_TYPE.label("se_type"),
]
NO_SKEW = SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={})
"""The skew information of every storage descriptor read (skewed columns are not kept); shared."""
_NULL_TEXT = sa.cast(sa.null(), sa.Text)
_ZERO = sa.cast(sa.literal(0), sa.Integer)


def stored_params(d: dict[str, Any] | None) -> dict[str, str]:
    """Parameters as they read back from a ``*_PARAMS`` table (None values become "")."""
    return {k: v if v is not None else "" for k, v in (d or {}).items()}


def stored_sd(sd: StorageDescriptor, cols: list[FieldSchema]) -> StorageDescriptor:
    """``sd`` as :func:`load_partitions` reads it back after :func:`insert_sds`, with ``cols`` as its
    columns (so that events carry what ``get_partition`` returns without reading thousands of
    partitions again). Keep in step with :func:`_sd_from_row`."""
    si = sd.serdeInfo or SerDeInfo()
    return StorageDescriptor(
        cols=cols,
        location=sd.location,
        inputFormat=sd.inputFormat,
        outputFormat=sd.outputFormat,
        compressed=bool(sd.compressed),
        numBuckets=sd.numBuckets if sd.numBuckets is not None else 0,
        serdeInfo=SerDeInfo(
            name=si.name,
            serializationLib=si.serializationLib,
            parameters=stored_params(si.parameters),
            description=si.description,
            serializerClass=si.serializerClass,
            deserializerClass=si.deserializerClass,
            serdeType=si.serdeType,
        ),
        bucketCols=list(sd.bucketCols or []),
        sortCols=[Order(col=o.col, order=int(o.order)) for o in sd.sortCols or []],
        parameters=stored_params(sd.parameters),
        skewedInfo=NO_SKEW,
        storedAsSubDirectories=bool(sd.storedAsSubDirectories),
    )


def _branch(
    kind: int, owner: Any, k: Any, v: Any, c: Any, idx: Any, frm: Any, where: Any
) -> sa.Select[*tuple[Any, ...]]:
    return (
        sa.select(
            sa.cast(sa.literal(kind), sa.Integer).label("kind"),
            sa.cast(owner, BigInteger).label("owner"),
            sa.cast(k, sa.Text).label("k"),
            sa.cast(v, sa.Text).label("v"),
            sa.cast(c, sa.Text).label("c"),
            sa.cast(idx, sa.Integer).label("idx"),
        )
        .select_from(frm)
        .where(where)
    )


def _sd_branches(sd_ids: Any = None, cd_ids: Any = None) -> list[sa.Select[*tuple[Any, ...]]]:
    """Child rows of the storage descriptors in ``sd_ids`` (default: the list ``:sd_ids``; or a
    select of SD_IDs) and of the column descriptors in ``cd_ids`` (default: the list ``:cd_ids``)."""
    if sd_ids is None:
        sd_ids = sa.bindparam("sd_ids", expanding=True)
    if cd_ids is None:
        cd_ids = sa.bindparam("cd_ids", expanding=True)
    return [
        _branch(SD_PARAM, SD_PARAMS.c.SD_ID, SD_PARAMS.c.PARAM_KEY, SD_PARAMS.c.PARAM_VALUE, _NULL_TEXT, _ZERO,
                SD_PARAMS, SD_PARAMS.c.SD_ID.in_(sd_ids)),
        _branch(SERDE_PARAM, SDS.c.SD_ID, SERDE_PARAMS.c.PARAM_KEY, SERDE_PARAMS.c.PARAM_VALUE, _NULL_TEXT, _ZERO,
                SERDE_PARAMS.join(SDS, SDS.c.SERDE_ID == SERDE_PARAMS.c.SERDE_ID), SDS.c.SD_ID.in_(sd_ids)),
        _branch(COLUMN, COLUMNS_V2.c.CD_ID, COLUMNS_V2.c.COLUMN_NAME, COLUMNS_V2.c.TYPE_NAME, COLUMNS_V2.c.COMMENT,
                COLUMNS_V2.c.INTEGER_IDX, COLUMNS_V2, COLUMNS_V2.c.CD_ID.in_(cd_ids)),
        _branch(BUCKET, BUCKETING_COLS.c.SD_ID, BUCKETING_COLS.c.BUCKET_COL_NAME, _NULL_TEXT, _NULL_TEXT,
                BUCKETING_COLS.c.INTEGER_IDX, BUCKETING_COLS, BUCKETING_COLS.c.SD_ID.in_(sd_ids)),
        _branch(SORT, SORT_COLS.c.SD_ID, SORT_COLS.c.COLUMN_NAME, SORT_COLS.c.ORDER, _NULL_TEXT,
                SORT_COLS.c.INTEGER_IDX, SORT_COLS, SORT_COLS.c.SD_ID.in_(sd_ids)),
    ]  # fmt: skip


# Statements are built once: SQLAlchemy then only looks them up in its compiled cache per call.
_SD_CHILDREN = sa.union_all(*_sd_branches())
_TABLE_CHILDREN = sa.union_all(
    *_sd_branches(),
    _branch(TABLE_PARAM, TABLE_PARAMS.c.TBL_ID, TABLE_PARAMS.c.PARAM_KEY, TABLE_PARAMS.c.PARAM_VALUE, _NULL_TEXT,
            _ZERO, TABLE_PARAMS, TABLE_PARAMS.c.TBL_ID.in_(sa.bindparam("tbl_ids", expanding=True))),
    _branch(PART_KEY, PARTITION_KEYS.c.TBL_ID, PARTITION_KEYS.c.PKEY_NAME, PARTITION_KEYS.c.PKEY_TYPE,
            PARTITION_KEYS.c.PKEY_COMMENT, PARTITION_KEYS.c.INTEGER_IDX, PARTITION_KEYS,
            PARTITION_KEYS.c.TBL_ID.in_(sa.bindparam("tbl_ids", expanding=True))),
)  # fmt: skip
_PART_CHILDREN = sa.union_all(
    *_sd_branches(),
    _branch(PART_PARAM, PARTITION_PARAMS.c.PART_ID, PARTITION_PARAMS.c.PARAM_KEY, PARTITION_PARAMS.c.PARAM_VALUE,
            _NULL_TEXT, _ZERO, PARTITION_PARAMS, PARTITION_PARAMS.c.PART_ID.in_(sa.bindparam("part_ids", expanding=True))),
    _branch(PART_VAL, PARTITION_KEY_VALS.c.PART_ID, PARTITION_KEY_VALS.c.PART_KEY_VAL, _NULL_TEXT, _NULL_TEXT,
            PARTITION_KEY_VALS.c.INTEGER_IDX, PARTITION_KEY_VALS,
            PARTITION_KEY_VALS.c.PART_ID.in_(sa.bindparam("part_ids", expanding=True))),
)  # fmt: skip
_SD_BASE = (
    sa.select(*_SD_FIELDS)
    .select_from(SDS.outerjoin(SERDES, SDS.c.SERDE_ID == SERDES.c.SERDE_ID))
    .where(SDS.c.SD_ID.in_(sa.bindparam("sd_ids", expanding=True)))
)
_TABLE_BASE = sa.select(TBLS, DBS.c.NAME.label("DB_NAME"), DBS.c.CTLG_NAME, *_SD_FIELDS).select_from(
    TBLS.join(DBS, TBLS.c.DB_ID == DBS.c.DB_ID)
    .outerjoin(SDS, TBLS.c.SD_ID == SDS.c.SD_ID)
    .outerjoin(SERDES, SDS.c.SERDE_ID == SERDES.c.SERDE_ID)
)
TABLE_BY_NAME = _TABLE_BASE.where(
    DBS.c.CTLG_NAME == sa.bindparam("cat"),
    DBS.c.NAME == sa.bindparam("db"),
    TBLS.c.TBL_NAME == sa.bindparam("tbl"),
)
"""Prebuilt select of one table by ``cat``, ``db``, ``tbl`` (for :func:`load_tables`)."""


def _table_with_children() -> sa.Select[*tuple[Any, ...]]:
    """One table by ``cat``, ``db``, ``tbl`` and its child rows, in one statement: the table's
    columns repeated on each child row, the child row's ``(kind, owner, k, v, c, idx)`` after them
    (NULLs when it has none). One statement reads one snapshot, so it needs no transaction."""
    t = TABLE_BY_NAME.cte("t")
    tbl_ids = sa.select(t.c.TBL_ID).scalar_subquery()
    children = sa.union_all(
        *_sd_branches(sa.select(t.c.sd_id), sa.select(t.c.sd_cd_id)),
        _branch(TABLE_PARAM, TABLE_PARAMS.c.TBL_ID, TABLE_PARAMS.c.PARAM_KEY, TABLE_PARAMS.c.PARAM_VALUE,
                _NULL_TEXT, _ZERO, TABLE_PARAMS, TABLE_PARAMS.c.TBL_ID == tbl_ids),
        _branch(PART_KEY, PARTITION_KEYS.c.TBL_ID, PARTITION_KEYS.c.PKEY_NAME, PARTITION_KEYS.c.PKEY_TYPE,
                PARTITION_KEYS.c.PKEY_COMMENT, PARTITION_KEYS.c.INTEGER_IDX, PARTITION_KEYS,
                PARTITION_KEYS.c.TBL_ID == tbl_ids),
    ).subquery("ch")  # fmt: skip
    return sa.select(t, *children.c).select_from(t.outerjoin(children, sa.true()))


_TABLE_WITH_CHILDREN = _table_with_children()
_TableRow = namedtuple("_TableRow", [c.key for c in _TABLE_BASE.selected_columns])  # type: ignore[misc]
_N_TABLE = len(_TableRow._fields)
_PART_SELECT = sa.select(
    PARTITIONS.c.PART_ID,
    PARTITIONS.c.CREATE_TIME,
    PARTITIONS.c.LAST_ACCESS_TIME,
    PARTITIONS.c.WRITE_ID,
    *_SD_FIELDS,
).select_from(
    PARTITIONS.outerjoin(SDS, PARTITIONS.c.SD_ID == SDS.c.SD_ID).outerjoin(
        SERDES, SDS.c.SERDE_ID == SERDES.c.SERDE_ID
    )
)
_PART_BASE = _PART_SELECT.where(PARTITIONS.c.PART_ID.in_(sa.bindparam("part_ids", expanding=True))).order_by(
    PARTITIONS.c.PART_NAME
)
# Every partition of one table (``:tbl_id``): no id lists at all, which matters for thousands of
# partitions (PostgreSQL drivers re-parse long statements with thousands of placeholders per call).
_TBL: sa.BindParameter[Any] = sa.bindparam("tbl_id")
_PART_BASE_OF_TABLE = _PART_SELECT.where(PARTITIONS.c.TBL_ID == _TBL).order_by(PARTITIONS.c.PART_NAME)
_PART_CHILDREN_OF_TABLE = sa.union_all(
    *_sd_branches(sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.TBL_ID == _TBL)),
    _branch(PART_PARAM, PARTITION_PARAMS.c.PART_ID, PARTITION_PARAMS.c.PARAM_KEY, PARTITION_PARAMS.c.PARAM_VALUE,
            _NULL_TEXT, _ZERO, PARTITION_PARAMS.join(PARTITIONS, PARTITIONS.c.PART_ID == PARTITION_PARAMS.c.PART_ID),
            PARTITIONS.c.TBL_ID == _TBL),
    _branch(PART_VAL, PARTITION_KEY_VALS.c.PART_ID, PARTITION_KEY_VALS.c.PART_KEY_VAL, _NULL_TEXT, _NULL_TEXT,
            PARTITION_KEY_VALS.c.INTEGER_IDX, PARTITION_KEY_VALS, PARTITION_KEY_VALS.c.TBL_ID == _TBL),
)  # fmt: skip
_PART_SD, _PART_CD = 4, 5  # positions of sd_id and sd_cd_id in a _PART_SELECT row
CHUNK = 5000  # ids per IN list (SQLite allows 32,766 variables per statement)


def fetch_tuples(conn: sa.Connection, stmt: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of ``stmt`` as the driver's plain tuples, by position.

    For statements whose columns need no result processing (integers, text, and booleans the caller
    passes through ``bool``): thousands of child rows come back about twice as fast as through
    SQLAlchemy's Row objects (measured with get_partitions of 1,000 on SQLite and PostgreSQL).
    """
    result = conn.execute(stmt, params)
    try:
        # DB-API drivers here (sqlite3, psycopg) return a list of tuples; the stubs say Sequence[Any]
        return cast("list[tuple[Any, ...]]", result.cursor.fetchall())
    finally:
        result.close()


class Children:
    """Child rows grouped by kind and owner."""

    def __init__(
        self,
        conn: sa.Connection | None,
        stmt: Any = None,
        params: dict[str, Any] | None = None,
        rows: Sequence[Sequence[Any]] = (),
    ):
        """The rows of ``stmt`` run on ``conn``, or the ``(kind, owner, k, v, c, idx)`` ``rows``
        already read."""
        self.params: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
        self.lists: dict[tuple[int, int], list[tuple[int, Any, Any, Any]]] = defaultdict(list)
        for kind, owner, k, v, c, idx in fetch_tuples(conn, stmt, params or {}) if conn is not None else rows:
            if kind in (SD_PARAM, SERDE_PARAM, TABLE_PARAM, PART_PARAM):
                self.params[(kind, owner)][k] = v if v is not None else ""
            else:
                self.lists[(kind, owner)].append((idx, k, v, c))

    def ordered(self, kind: int, owner: Any) -> list[tuple[int, Any, Any, Any]]:
        """The ``(idx, k, v, c)`` rows of one kind and owner, in INTEGER_IDX order."""
        items = self.lists.get((kind, owner))
        if not items:
            return []
        items.sort(key=lambda t: t[0])
        return items


_N_SD = len(_SD_FIELDS)


def _sd_from_row(
    f: Sequence[Any], ch: Children, cols_cache: dict[int, list[FieldSchema]]
) -> StorageDescriptor | None:
    """A StorageDescriptor from the :data:`_SD_FIELDS` values of a row (a tuple, by position: rows
    of thousands of partitions are read by index, several times faster than by name)."""
    sd_id, cd, serde_id, input_fmt, output_fmt, location, compressed, subdirs, buckets = f[:9]
    if sd_id is None:
        return None
    cols = cols_cache.get(cd)
    if cols is None:
        cols = cols_cache[cd] = [
            FieldSchema(name=k, type=v, comment=c) for _, k, v, c in ch.ordered(COLUMN, cd)
        ]
    serde = None
    if serde_id is not None:
        se_name, se_slib, se_desc, se_ser, se_deser, se_type = f[9:15]
        serde = SerDeInfo(
            name=se_name,
            serializationLib=se_slib,
            parameters=ch.params.get((SERDE_PARAM, sd_id), {}),
            description=se_desc,
            serializerClass=se_ser,
            deserializerClass=se_deser,
            serdeType=se_type,
        )
    return StorageDescriptor(
        cols=list(cols),
        location=location,
        inputFormat=input_fmt,
        outputFormat=output_fmt,
        compressed=bool(compressed),
        numBuckets=buckets,
        serdeInfo=serde,
        bucketCols=[k for _, k, _, _ in ch.ordered(BUCKET, sd_id)],
        sortCols=[Order(col=k, order=int(v)) for _, k, v, _ in ch.ordered(SORT, sd_id)],
        parameters=ch.params.get((SD_PARAM, sd_id), {}),
        skewedInfo=NO_SKEW,  # shared: read-only, skewed columns are not kept
        storedAsSubDirectories=bool(subdirs),
    )


def _cd_ids(base: Sequence[Any]) -> list[int]:
    return list({r.sd_cd_id for r in base if r.sd_cd_id is not None})


def load_sds(conn: sa.Connection, sd_ids: Sequence[int]) -> dict[int, StorageDescriptor]:
    """Storage descriptors by SD_ID (two queries)."""
    ids = [i for i in sd_ids if i is not None]
    if not ids:
        return {}
    base = conn.execute(_SD_BASE, {"sd_ids": ids}).all()
    if not base:
        return {}
    ch = Children(conn, _SD_CHILDREN, {"sd_ids": ids, "cd_ids": _cd_ids(base)})
    cache: dict[int, list[FieldSchema]] = {}
    return {r[0]: _sd_from_row(tuple(r), ch, cache) for r in base}


def load_tables(
    conn: sa.Connection,
    where: Any = None,
    order: bool = True,
    stmt: Any = None,
    params: dict[str, Any] | None = None,
) -> list[tuple[int, Table]]:
    """Tables as ``(TBL_ID, Table)`` pairs: those matching ``where`` (a condition on TBLS/DBS),
    ordered by database and name, or those of a prebuilt ``stmt`` (e.g. :data:`TABLE_BY_NAME`)."""
    if stmt is None:
        stmt = _TABLE_BASE.where(where)
        if order:
            stmt = stmt.order_by(DBS.c.NAME, TBLS.c.TBL_NAME)
    base = conn.execute(stmt, params or {}).all()
    if not base:
        return []
    ch = Children(
        conn,
        _TABLE_CHILDREN,
        {
            "sd_ids": [r.sd_id for r in base if r.sd_id is not None],
            "cd_ids": _cd_ids(base),
            "tbl_ids": [r.TBL_ID for r in base],
        },
    )
    cache: dict[int, list[FieldSchema]] = {}
    return [(r.TBL_ID, _table(r, ch, cache)) for r in base]


def load_table_by_name(conn: sa.Connection, cat: str, db: str, tbl: str) -> Table | None:
    """One table by catalog, database and (lower-case) name, or None: one statement, so ``conn``
    may be in autocommit mode (see :meth:`hivemesh.storage.sql.SqlStore.read_statement`)."""
    found = fetch_tuples(conn, _TABLE_WITH_CHILDREN, {"cat": cat, "db": db, "tbl": tbl})
    if not found:
        return None
    base = _TableRow(*found[0][:_N_TABLE])
    ch = Children(None, rows=[r[_N_TABLE:] for r in found if r[_N_TABLE] is not None])
    return _table(base, ch, {})


def table_write_id(stored: int | None, params: dict[str, str]) -> int:
    """``Table.writeId`` as Hive 4 answers it: a transactional table never written to (stored 0)
    has -1 (Hive keeps the writeId its client created it with, Thrift's default -1, until a write
    sets one); other tables their stored value (0 unless set)."""
    written = stored or 0
    if written <= 0 and any(k.lower() == "transactional" and v.lower() == "true" for k, v in params.items()):
        return -1
    return written


def _table(r: Any, ch: Children, cache: dict[int, list[FieldSchema]]) -> Table:
    """A Table from a :data:`_TABLE_BASE` row (by attribute) and its child rows."""
    params = ch.params.get((TABLE_PARAM, r.TBL_ID), {})
    return Table(
        tableName=r.TBL_NAME,
        dbName=r.DB_NAME,
        owner=r.OWNER,
        createTime=r.CREATE_TIME,
        lastAccessTime=r.LAST_ACCESS_TIME,
        retention=r.RETENTION,
        sd=_sd_from_row(tuple(r)[-_N_SD:], ch, cache),
        partitionKeys=[
            FieldSchema(name=k, type=v, comment=c) for _, k, v, c in ch.ordered(PART_KEY, r.TBL_ID)
        ],
        parameters=params,
        viewOriginalText=r.VIEW_ORIGINAL_TEXT,
        viewExpandedText=r.VIEW_EXPANDED_TEXT,
        tableType=r.TBL_TYPE,
        temporary=False,
        rewriteEnabled=bool(r.IS_REWRITE_ENABLED),
        catName=r.CTLG_NAME,
        ownerType=r.OWNER_TYPE if r.OWNER_TYPE is not None else PrincipalType.USER,
        writeId=table_write_id(r.WRITE_ID, params),
        id=r.TBL_ID,
    )


def _partitions(
    base: Sequence[Any], ch: Children, db: str, tbl: str, cat: str, cache: dict[int, list[FieldSchema]]
) -> list[Partition]:
    out = []
    params = ch.params
    for r in base:
        t = tuple(r)  # (PART_ID, CREATE_TIME, LAST_ACCESS_TIME, WRITE_ID, *_SD_FIELDS)
        pid = t[0]
        out.append(
            Partition(
                values=[k for _, k, _, _ in ch.ordered(PART_VAL, pid)],
                dbName=db,
                tableName=tbl,
                createTime=t[1],
                lastAccessTime=t[2],
                sd=_sd_from_row(t[4:], ch, cache),
                parameters=params.get((PART_PARAM, pid), {}),
                catName=cat,
                writeId=t[3] if t[3] and t[3] > 0 else -1,  # Hive 4 sends -1 for "no write id"
            )
        )
    return out


def table_partition_rows(conn: sa.Connection, tbl_id: int) -> tuple[list[tuple[Any, ...]], Children]:
    """The rows of every partition of a table, ordered by PART_NAME: the base rows
    (``PART_ID, CREATE_TIME, LAST_ACCESS_TIME, WRITE_ID``, then the storage descriptor's fields)
    and their child rows; two queries without id lists."""
    base = fetch_tuples(conn, _PART_BASE_OF_TABLE, {"tbl_id": tbl_id})
    if not base:
        return [], Children(None)
    cd_ids = list({r[_PART_CD] for r in base if r[_PART_CD] is not None})
    return base, Children(conn, _PART_CHILDREN_OF_TABLE, {"tbl_id": tbl_id, "cd_ids": cd_ids})


def load_table_partitions(
    conn: sa.Connection, db_name: str, tbl_name: str, cat_name: str, tbl_id: int
) -> list[Partition]:
    """Every partition of a table, ordered by PART_NAME (see :func:`table_partition_rows`)."""
    base, ch = table_partition_rows(conn, tbl_id)
    return _partitions(base, ch, db_name, tbl_name, cat_name, {})


def load_partitions(
    conn: sa.Connection, db_name: str, tbl_name: str, cat_name: str, part_ids: sa.Select[Any] | Sequence[int]
) -> list[Partition]:
    """Partitions whose PART_ID is in ``part_ids``: a select (its order is kept: order it by
    PART_NAME) or a list. The ids are resolved first, then loaded in chunks of :data:`CHUNK` with
    prebuilt statements, each chunk ordered by PART_NAME.
    """
    ids = conn.execute(part_ids).scalars().all() if isinstance(part_ids, sa.Select) else list(part_ids)
    out: list[Partition] = []
    cache: dict[int, list[FieldSchema]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        base = fetch_tuples(conn, _PART_BASE, {"part_ids": chunk})
        ch = Children(
            conn,
            _PART_CHILDREN,
            {
                "sd_ids": [r[_PART_SD] for r in base if r[_PART_SD] is not None],
                "cd_ids": list({r[_PART_CD] for r in base if r[_PART_CD] is not None}),
                "part_ids": chunk,
            },
        )
        out.extend(_partitions(base, ch, db_name, tbl_name, cat_name, cache))
    return out
