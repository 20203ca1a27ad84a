"""Older calls for newer ones: Hive 3/4 clients against Hive 2 (or older) members.

Hive 4 clients send request-struct forms (``get_database_req``, ``get_fields_req``, ...) that a
Hive 2.3 metastore does not have; the Java metastore answers "Invalid method name" and those
clients do not fall back. When a member answers so, the proxy sends the older call with the same
meaning and wraps its answer in the newer response (Waggle Dance needed per-version shims, #340).
Each member remembers which methods it lacks, so the fallback costs one round trip only once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hive_metastore import ttypes

Fallback = tuple[str, Callable[[Any], list[Any]], Callable[[Any], Any]]

FALLBACKS: dict[str, Fallback] = {
    "get_database_req": ("get_database", lambda r: [r.name], lambda db: db),
    "get_table_req": (
        "get_table",
        lambda r: [r.dbName, r.tblName],
        lambda t: ttypes.GetTableResult(table=t),
    ),
    "get_table_objects_by_name_req": (
        "get_table_objects_by_name",
        lambda r: [r.dbName, r.tblNames or []],
        lambda ts: ttypes.GetTablesResult(tables=ts),
    ),
    "get_fields_req": (
        "get_fields",
        lambda r: [r.dbName, r.tblName],
        lambda fs: ttypes.GetFieldsResponse(fields=fs),
    ),
    "get_schema_req": (
        "get_schema",
        lambda r: [r.dbName, r.tblName],
        lambda fs: ttypes.GetSchemaResponse(fields=fs),
    ),
    "get_partitions_req": (
        "get_partitions",
        lambda r: [r.dbName, r.tblName, r.maxParts if r.maxParts is not None else -1],
        lambda ps: ttypes.PartitionsResponse(partitions=ps),
    ),
    "get_partitions_by_names_req": (
        "get_partitions_by_names",
        lambda r: [r.db_name, r.tbl_name, r.names or []],
        lambda ps: ttypes.GetPartitionsByNamesResult(partitions=ps),
    ),
}
"""newer method -> (older method, its arguments from the request, the newer answer from the older)."""
