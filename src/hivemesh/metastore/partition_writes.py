"""Writing partitions (add_partitions, alter_partitions): the preparation of a request, the SQL
and the objects of its events, as functions of a connection. No storage I/O happens here: fast
statistics come from :class:`~hivemesh.metastore.fast_stats.Listings` taken before the write
transaction, directories are made after it commits (:class:`~hivemesh.metastore.partitions.PartitionMixin`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AlreadyExistsException,
    FieldSchema,
    MetaException,
    Partition,
    StorageDescriptor,
)

from hivemesh import storage
from hivemesh.hive.constants import now_s
from hivemesh.hive.names import make_part_name
from hivemesh.metastore import fast_stats, rows
from hivemesh.metastore.schema import PARTITION_KEY_VALS, PARTITION_KEYS, PARTITION_PARAMS, PARTITIONS, SDS

DDL_TIME = "transient_lastDdlTime"


class TableInfo:
    """What partition calls need to know about their table."""

    def __init__(self, conn: sa.Connection, row: sa.Row[Any]):
        self.row = row
        self.id = row.TBL_ID
        self.db = row.DB_NAME
        self.name = row.TBL_NAME
        self.cat = row.CTLG_NAME
        self.managed = row.TBL_TYPE == "MANAGED_TABLE"
        self.keys = conn.execute(
            sa.select(PARTITION_KEYS.c.PKEY_NAME, PARTITION_KEYS.c.PKEY_TYPE)
            .where(PARTITION_KEYS.c.TBL_ID == row.TBL_ID)
            .order_by(PARTITION_KEYS.c.INTEGER_IDX)
        ).all()
        self.key_names = [k for k, _ in self.keys]
        self.key_types = {k: t for k, t in self.keys}
        sd = (
            conn.execute(sa.select(SDS.c.LOCATION, SDS.c.CD_ID).where(SDS.c.SD_ID == row.SD_ID)).first()
            if row.SD_ID
            else None
        )
        self.location = sd.LOCATION if sd else None
        self.cd_id = sd.CD_ID if sd else None

    def part_name(self, values: Sequence[str]) -> str:
        """Hive's escaped partition name for ``values``; MetaException when their count is wrong."""
        if len(values or []) != len(self.key_names):
            # Hive's text (Warehouse.makePartName): each item followed by ", "
            keys = "".join(f"{k}, " for k in self.key_names)
            vals = "".join(f"{v}, " for v in values or [])
            raise MetaException(f"Invalid partition key & values; keys [{keys}], values [{vals}]")
        return make_part_name(self.key_names, values)


def location(part: Partition) -> str | None:
    """The location of a partition's storage descriptor (None without one)."""
    return part.sd.location if part.sd else None


def existing_names(conn: sa.Connection, info: TableInfo, names: list[str]) -> set[str]:
    """Those of ``names`` that are partitions of the table (5,000 names per statement)."""
    existing: set[str] = set()
    for i in range(0, len(names), 5000):
        existing.update(
            conn.execute(
                sa.select(PARTITIONS.c.PART_NAME).where(
                    info.id == PARTITIONS.c.TBL_ID, PARTITIONS.c.PART_NAME.in_(names[i : i + 5000])
                )
            ).scalars()
        )
    return existing


def stored_partitions(
    info: TableInfo, new_parts: Sequence[Partition], part_rows: Sequence[dict[str, Any]]
) -> list[Partition]:
    """The added partitions as stored (as get_partition answers them), for the ADD_PARTITION event;
    partitions with the same columns share one list of FieldSchema objects."""
    cols_cache: dict[tuple[Any, ...], list[FieldSchema]] = {}
    stored = []
    for p, row in zip(new_parts, part_rows, strict=True):
        key = rows.columns_key(p.sd.cols)
        if key not in cols_cache:
            cols_cache[key] = [FieldSchema(name=n, type=t, comment=c) for n, t, c in key]
        stored.append(
            Partition(
                values=list(p.values),
                dbName=info.db,
                tableName=info.name,
                createTime=p.createTime,
                lastAccessTime=row["LAST_ACCESS_TIME"],
                sd=rows.stored_sd(p.sd, list(cols_cache[key])),
                parameters=rows.stored_params(p.parameters),
                catName=info.cat,
                writeId=row["WRITE_ID"] or -1,  # as get_partitions answers (Hive 4: -1, none)
            )
        )
    return stored


def fast_params(conn: sa.Connection, ids: Sequence[int]) -> dict[int, dict[str, str]]:
    """PART_ID -> the fast statistics among its parameters (partitions without any left out)."""
    old_fast: dict[int, dict[str, str]] = {}
    for pid, k, v in conn.execute(
        sa.select(
            PARTITION_PARAMS.c.PART_ID, PARTITION_PARAMS.c.PARAM_KEY, PARTITION_PARAMS.c.PARAM_VALUE
        ).where(PARTITION_PARAMS.c.PART_ID.in_(ids), PARTITION_PARAMS.c.PARAM_KEY.in_(fast_stats.FAST_STATS))
    ):
        old_fast.setdefault(pid, {})[k] = v
    return old_fast


def prepare_altered(p: Partition) -> None:
    """A partition of an alter request made ready for storing (in place, as Hive does): its own
    parameters with ``transient_lastDdlTime`` (now, unless given) and storage descriptor."""
    p.parameters = dict(p.parameters or {})
    p.parameters.setdefault(DDL_TIME, str(now_s()))
    if p.sd is not None and p.sd.location:
        p.sd = StorageDescriptor(**p.sd.__dict__)


def update_altered(conn: sa.Connection, ids: list[int], sd_ids: list[int], parts: list[Partition]) -> None:
    """Point altered partitions at their new storage descriptors and replace their parameters."""
    conn.execute(
        PARTITIONS.update()
        .where(sa.bindparam("pid") == PARTITIONS.c.PART_ID)
        .values(SD_ID=sa.bindparam("sd"), LAST_ACCESS_TIME=sa.bindparam("lat")),
        [
            {"pid": pid, "sd": sd, "lat": p.lastAccessTime or 0}
            for pid, sd, p in zip(ids, sd_ids, parts, strict=True)
        ],
    )
    conn.execute(PARTITION_PARAMS.delete().where(PARTITION_PARAMS.c.PART_ID.in_(ids)))
    rows.insert_params(
        conn, PARTITION_PARAMS, "PART_ID", zip(ids, (p.parameters for p in parts), strict=True)
    )


def table_cd(conn: sa.Connection, info: TableInfo) -> tuple[int, tuple[Any, ...]] | None:
    """The table's column descriptor, for partitions with the same columns to share."""
    if info.cd_id is None:
        return None
    return info.cd_id, rows.columns_key(rows.load_columns(conn, info.cd_id))


def prepare_partition(
    info: TableInfo,
    part: Partition,
    table_sd: StorageDescriptor | None,
    checked_location: Callable[[str], str],
) -> tuple[str, Partition]:
    """A partition of an add request as it is stored, with its name: in ``info``'s table, created
    now, with the table's storage descriptor when it has none, at its default location under the
    table's when it names none (else at ``checked_location`` of the one it names, which raises
    MetaException for a location outside the allowed ones). MetaException for a partition of
    another table or a wrong number of values."""
    if (
        part.dbName
        and part.dbName.lower() != info.db
        or part.tableName
        and part.tableName.lower() != info.name
    ):
        raise MetaException(
            f"Partition does not belong to target table {info.db}.{info.name}: {part.dbName}.{part.tableName}"
        )
    name = info.part_name(part.values)
    p = Partition(**part.__dict__)
    p.dbName, p.tableName, p.catName = info.db, info.name, info.cat
    p.createTime = now_s()
    p.parameters = dict(part.parameters or {})
    p.parameters.setdefault(DDL_TIME, str(p.createTime))
    p.lastAccessTime = p.lastAccessTime or 0  # returned as stored, as Hive does (not unset)
    sd = StorageDescriptor(**(part.sd or table_sd or StorageDescriptor()).__dict__)
    if part.sd is None:
        sd.location = None  # the table's storage descriptor, at the partition's default location
    if sd.location:
        sd.location = checked_location(sd.location)
    elif info.location:
        sd.location = storage.join_location(info.location, name)
    p.sd = sd
    return name, p


def new_partitions(
    conn: sa.Connection,
    info: TableInfo,
    parts: Sequence[Partition],
    if_not_exists: bool,
    checked_location: Callable[[str], str],
) -> dict[str, Partition]:
    """The request's partitions prepared for storing (:func:`prepare_partition`) by name, leaving out
    those that exist (``if_not_exists``; else AlreadyExistsException), in the request's order."""
    table_sd = None
    if any(p.sd is None for p in parts) and info.row.SD_ID is not None:
        table_sd = rows.load_sds(conn, [info.row.SD_ID])[info.row.SD_ID]
    prepared: dict[str, Partition] = {}
    for part in parts:
        name, p = prepare_partition(info, part, table_sd, checked_location)
        if name in prepared:
            if if_not_exists:
                continue
            raise AlreadyExistsException(f"Partition already exists: {info.db}.{info.name} {name}")
        prepared[name] = p
    existing = existing_names(conn, info, list(prepared))
    if existing and not if_not_exists:
        raise AlreadyExistsException(f"Partition already exists: {info.db}.{info.name} {sorted(existing)[0]}")
    return {n: p for n, p in prepared.items() if n not in existing}


def insert_partitions(
    conn: sa.Connection, info: TableInfo, new: dict[str, Partition]
) -> list[dict[str, Any]]:
    """Store prepared partitions by name (storage descriptors, PARTITIONS, parameters, key
    values); their PARTITIONS rows."""
    new_parts = list(new.values())
    sd_ids = rows.insert_sds(conn, [p.sd for p in new_parts], shared_cd=table_cd(conn, info))
    part_rows = [
        {
            "TBL_ID": info.id,
            "PART_NAME": n,
            "SD_ID": sd_id,
            "CREATE_TIME": p.createTime,
            "LAST_ACCESS_TIME": p.lastAccessTime or 0,
            "WRITE_ID": p.writeId if p.writeId and p.writeId > 0 else 0,
        }
        for (n, p), sd_id in zip(new.items(), sd_ids, strict=True)
    ]
    part_ids = rows.insert_returning(conn, PARTITIONS, "PART_ID", part_rows)
    rows.insert_params(
        conn, PARTITION_PARAMS, "PART_ID", zip(part_ids, (p.parameters for p in new_parts), strict=True)
    )
    conn.execute(
        PARTITION_KEY_VALS.insert(),
        [
            {"PART_ID": pid, "TBL_ID": info.id, "PART_KEY_VAL": v, "INTEGER_IDX": i}
            for pid, p in zip(part_ids, new_parts, strict=True)
            for i, v in enumerate(p.values)
        ],
    )
    return part_rows


def stats_to_list(
    parts: Sequence[Partition],
    old_params: Sequence[dict[str, str] | None],
    env: dict[str, str] | None,
    force: bool,
) -> list[Partition]:
    """Those of ``parts`` (new parameters; ``old_params`` None for a new partition) whose fast
    statistics are recomputed from a listing of their location (Hive's requireCalStats)."""
    return [
        p
        for p, old in zip(parts, old_params, strict=True)
        if fast_stats.require_cal_stats(env, False, old, p.parameters, partition=True)
        and fast_stats.would_list(p.parameters or {}, force)
    ]


def fill_fast_stats(
    parts: Sequence[Partition],
    old_params: Sequence[dict[str, str] | None],
    env: dict[str, str] | None,
    force: bool,
    listings: fast_stats.Listings | None,
) -> None:
    """Set the fast statistics of ``parts``' parameters (in place) from ``listings``; raises
    :class:`~hivemesh.metastore.fast_stats.UnlistedLocations` (before changing anything) when a location to list was not listed
    before the transaction (the table changed in between: the call lists it and retries).
    ``listings`` None: list them now (new partitions: a missing directory is not listed)."""
    to_list = stats_to_list(parts, old_params, env, force)
    if listings is None:
        listings = fast_stats.Listings(new_dirs=True)
        listings.take(location(p) for p in to_list)
    listings.require(location(p) for p in to_list)
    for p, old in zip(parts, old_params, strict=True):
        if fast_stats.require_cal_stats(env, False, old, p.parameters, partition=True):
            fast_stats.apply_listing(p.parameters, listings.taken.get(location(p)), env, force)


def rename_rows(
    conn: sa.Connection,
    info: TableInfo,
    row: sa.Row[Any],
    part_vals: Sequence[str],
    new_values: Sequence[str],
) -> str | None:
    """Give partition ``row`` (PART_ID, SD_ID, LOCATION) the name and key values of
    ``new_values``; a managed partition at its default location gets the new default location.
    Returns its location now."""
    old_name, new_name = info.part_name(part_vals), info.part_name(new_values)
    conn.execute(PARTITIONS.update().where(PARTITIONS.c.PART_ID == row.PART_ID).values(PART_NAME=new_name))
    conn.execute(PARTITION_KEY_VALS.delete().where(PARTITION_KEY_VALS.c.PART_ID == row.PART_ID))
    conn.execute(
        PARTITION_KEY_VALS.insert(),
        [
            {"PART_ID": row.PART_ID, "TBL_ID": info.id, "PART_KEY_VAL": v, "INTEGER_IDX": i}
            for i, v in enumerate(new_values)
        ],
    )
    loc: str | None = row.LOCATION
    if info.managed and info.location and loc == storage.join_location(info.location, old_name):
        loc = storage.join_location(info.location, new_name)
        conn.execute(SDS.update().where(SDS.c.SD_ID == row.SD_ID).values(LOCATION=loc))
    return loc
