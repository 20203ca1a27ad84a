"""Transactional (Hive ACID) tables as metastore ``Table`` objects.

:func:`transactional_table` builds the ``hive_metastore.ttypes.Table`` Hive 3/4 creates for
``CREATE TABLE ... STORED AS ORC TBLPROPERTIES ('transactional'='true')`` (full ACID) or
``('transactional'='true', 'transactional_properties'='insert_only')`` (insert-only, "MM"):
``MANAGED_TABLE``, table parameters ``transactional``, ``transactional_properties`` and
``bucketing_version=2``, and the SerDe / input / output format classes of the file format, with
``serialization.format=1`` as Hive's DDL sets it. Full ACID needs ORC (Hive's
``TransactionalValidationListener``); insert-only tables may be ORC, Parquet or text.

:func:`is_transactional` / :func:`is_insert_only` / :func:`is_full_acid` read those parameters
the way Hive's ``AcidUtils`` does (case-insensitive values).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hive_metastore.ttypes import (
    FieldSchema,
    PrincipalType,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.acid.orcfile import hive_to_orc_type
from hivemesh.errors import HivemeshError
from hivemesh.hive.constants import (
    BUCKETING_VERSION,
    DEFAULT_PROPERTIES,
    INSERT_ONLY,
    MANAGED_TABLE,
    ORC_INPUT_FORMAT,
    ORC_OUTPUT_FORMAT,
    ORC_SERDE,
    PARQUET_INPUT_FORMAT,
    PARQUET_OUTPUT_FORMAT,
    PARQUET_SERDE,
    TEXT_SERDE,
    TRANSACTIONAL,
    TRANSACTIONAL_PROPERTIES,
)

TEXT_INPUT_FORMAT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"

#: file format -> (SerDe, InputFormat, OutputFormat), as Hive's StorageFormatDescriptors give them
FORMATS: dict[str, tuple[str, str, str]] = {
    "orc": (ORC_SERDE, ORC_INPUT_FORMAT, ORC_OUTPUT_FORMAT),
    "parquet": (PARQUET_SERDE, PARQUET_INPUT_FORMAT, PARQUET_OUTPUT_FORMAT),
    "textfile": (TEXT_SERDE, TEXT_INPUT_FORMAT, TEXT_OUTPUT_FORMAT),
}
_FORMAT_ALIASES = {"text": "textfile", "textfile": "textfile", "orc": "orc", "parquet": "parquet"}

Columns = Sequence[tuple[str, str]] | Sequence[tuple[str, str, str | None]] | Sequence[FieldSchema]


def _field_schemas(columns: Columns) -> list[FieldSchema]:
    out = []
    for c in columns:
        if isinstance(c, FieldSchema):
            out.append(FieldSchema(name=c.name.lower(), type=c.type, comment=c.comment))
        else:
            name, type_ = c[0], c[1]
            comment = c[2] if len(c) > 2 else None  # type: ignore[misc]
            out.append(FieldSchema(name=str(name).lower(), type=str(type_), comment=comment))
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate column names in {names}")
    return out


def file_format_name(file_format: str) -> str:
    """``"orc"``, ``"parquet"`` or ``"textfile"`` (``"text"`` accepted); ValueError otherwise."""
    try:
        return _FORMAT_ALIASES[file_format.lower()]
    except KeyError:
        raise ValueError(f"unsupported file format {file_format!r} (orc, parquet, textfile)") from None


def transactional_table(
    db: str,
    name: str,
    columns: Columns,
    partition_keys: Columns = (),
    *,
    insert_only: bool = False,
    file_format: str = "orc",
    location: str | None = None,
    owner: str | None = None,
    parameters: dict[str, str] | None = None,
) -> Table:
    """A transactional ``Table`` as Hive creates it (not yet stored; see
    :func:`create_transactional_table`).

    ``columns``/``partition_keys``: ``(name, hive type[, comment])`` tuples or ``FieldSchema``;
    names are lower-cased as Hive does. ``insert_only``: ``transactional_properties=insert_only``
    (any ``file_format``) instead of full ACID ``default`` (ORC only). ``location``: None lets the
    metastore place it under the database. ``parameters``: extra table parameters (they cannot
    override the transactional ones). Raises ValueError for a full-ACID table not stored as ORC, a
    column type ORC cannot hold (ORC tables), duplicate or overlapping column names, or no columns.
    """
    fmt = file_format_name(file_format)
    if not insert_only and fmt != "orc":
        raise ValueError(
            "a full ACID table must be stored as ORC (Hive: 'The table must be stored using an ACID "
            "compliant format (such as ORC)'); use insert_only=True for other formats"
        )
    cols = _field_schemas(columns)
    keys = _field_schemas(partition_keys)
    if not cols:
        raise ValueError("a table needs at least one column")
    overlap = {c.name for c in cols} & {k.name for k in keys}
    if overlap:
        raise ValueError(f"partition keys {sorted(overlap)} repeat data columns")
    if fmt == "orc":
        for c in cols:
            hive_to_orc_type(c.type)  # raises ValueError for types ORC cannot store
    serde, input_format, output_format = FORMATS[fmt]
    params = dict(parameters or {})
    params.update(
        {
            TRANSACTIONAL: "true",
            TRANSACTIONAL_PROPERTIES: INSERT_ONLY if insert_only else DEFAULT_PROPERTIES,
            BUCKETING_VERSION: "2",
        }
    )
    sd = StorageDescriptor(
        cols=cols,
        location=location,
        inputFormat=input_format,
        outputFormat=output_format,
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(name=None, serializationLib=serde, parameters={"serialization.format": "1"}),
        bucketCols=[],
        sortCols=[],
        parameters={},
        skewedInfo=SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
        storedAsSubDirectories=False,
    )
    return Table(
        tableName=name.lower(),
        dbName=db.lower(),
        owner=owner,
        ownerType=PrincipalType.USER,
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=sd,
        partitionKeys=keys,
        parameters=params,
        tableType=MANAGED_TABLE,
    )


def _param(table: Any, key: str) -> str | None:
    params = getattr(table, "parameters", None) or {}
    if key in params:
        return params[key]
    upper = key.upper()
    return params.get(upper)


def is_transactional(table: Any) -> bool:
    """True when the table's parameter ``transactional`` is ``true`` (any case; the key
    ``TRANSACTIONAL`` too). Source: Hive ``AcidUtils.isTransactionalTable``."""
    value = _param(table, TRANSACTIONAL)
    return value is not None and value.strip().lower() == "true"


def is_insert_only(table: Any) -> bool:
    """True for a transactional table with ``transactional_properties=insert_only`` (any case).
    Source: Hive ``AcidUtils.isInsertOnlyTable``."""
    value = _param(table, TRANSACTIONAL_PROPERTIES)
    return is_transactional(table) and value is not None and value.strip().lower() == INSERT_ONLY


def is_full_acid(table: Any) -> bool:
    """True for a transactional table that is not insert-only (Hive ``AcidUtils.isFullAcidTable``)."""
    return is_transactional(table) and not is_insert_only(table)


def table_file_format(table: Any) -> str:
    """``"orc"``, ``"parquet"`` or ``"textfile"`` from the table's SerDe / input format; ValueError
    for anything else."""
    sd = table.sd
    serde = (sd.serdeInfo.serializationLib if sd and sd.serdeInfo else None) or ""
    input_format = (sd.inputFormat if sd else None) or ""
    for fmt, (s, i, _) in FORMATS.items():
        if serde == s or input_format == i:
            return fmt
    raise ValueError(
        f"unsupported storage format of {table.dbName}.{table.tableName}: {serde or input_format}"
    )


def create_transactional_table(
    client: Any, db: str, name: str, columns: Columns, *args: Any, **kwargs: Any
) -> Table:
    """Build a table with :func:`transactional_table` (same arguments), create it through
    ``client`` (a :class:`hivemesh.client.metastore.MetastoreClient`) and return the table as the
    metastore stored it (location filled in). HMS exceptions pass through
    (AlreadyExistsException, NoSuchObjectException for a missing database, ...)."""
    table = transactional_table(db, name, columns, *args, **kwargs)
    client.hms.create_table(table)
    return client.hms.get_table(table.dbName, table.tableName)


class NotTransactionalError(HivemeshError, ValueError):
    """The table is not a Hive transactional table (read it as a plain table)."""


def split_name(table: str, default_db: str = "default") -> tuple[str, str]:
    """``db.table`` -> ``(db, table)`` in lower case (``table`` alone -> ``default_db``); backticks
    are dropped. ValueError for more than two parts."""
    parts = table.strip().strip("`").lower().split(".")
    if len(parts) == 1:
        return default_db, parts[0]
    if len(parts) == 2:
        return parts[0].strip("`"), parts[1].strip("`")
    raise ValueError(f"table name {table!r}: expected db.table")


def table_locations(
    client: Any, table: Any, partition_filter: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """``(location, partition values)`` of what a read of ``table`` (a metastore Table) covers:
    its partitions (only those matching the Hive ``partition_filter``, pushed to
    ``get_partitions_by_filter``) or, unpartitioned, its own location with no values.
    ValueError for a filter on an unpartitioned table; MetaException for a bad filter."""
    if not table.partitionKeys:
        if partition_filter:
            raise ValueError(f"{table.dbName}.{table.tableName} is not partitioned: no partition_filter")
        return [(table.sd.location, ())]
    if partition_filter:
        parts = client.hms.get_partitions_by_filter(table.dbName, table.tableName, partition_filter, -1)
    else:
        parts = client.hms.get_partitions(table.dbName, table.tableName, -1)
    return [(p.sd.location, tuple(p.values)) for p in parts]
