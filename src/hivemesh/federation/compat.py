"""Equivalent calls for members that lack one: older for newer, and newer for older.

Hive 4 clients send request-struct forms (``get_database_req``, ``get_fields_req``, ...) that a
Hive 2.3 metastore does not have; the Java metastore answers "Invalid method name" and those
clients do not fall back. Hive 4.2 in turn dropped older calls that Hive 2/3 clients (Spark's
built-in Hive 2.3 client among them) still send: ``get_table``, ``get_table_objects_by_name``.
When a member answers so, the proxy sends the call with the same meaning and converts its answer
(Waggle Dance needed per-version shims, #340). Each member remembers which methods it lacks, so
the fallback costs one round trip only once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hive_metastore import ttypes

from hivemesh.hive.names import parse_db_name

# (the equivalent method, its arguments from the original call's argument list, the original
# method's answer from the equivalent's)
Fallback = tuple[str, Callable[[list[Any]], list[Any]], Callable[[Any], Any]]


def _db_and_catalog(name: str) -> dict[str, Any]:
    """``dbName`` and ``catName`` of a request from an older call's ``@cat#db`` or plain name."""
    if name and name.startswith("@"):
        cat, db = parse_db_name(name)
        return {"dbName": db, "catName": cat}
    return {"dbName": name}


FALLBACKS: dict[str, Fallback] = {
    "get_database_req": ("get_database", lambda a: [a[0].name], lambda db: db),
    "get_table_req": (
        "get_table",
        lambda a: [a[0].dbName, a[0].tblName],
        lambda t: ttypes.GetTableResult(table=t),
    ),
    "get_table_objects_by_name_req": (
        "get_table_objects_by_name",
        lambda a: [a[0].dbName, a[0].tblNames or []],
        lambda ts: ttypes.GetTablesResult(tables=ts),
    ),
    "get_fields_req": (
        "get_fields",
        lambda a: [a[0].dbName, a[0].tblName],
        lambda fs: ttypes.GetFieldsResponse(fields=fs),
    ),
    "get_schema_req": (
        "get_schema",
        lambda a: [a[0].dbName, a[0].tblName],
        lambda fs: ttypes.GetSchemaResponse(fields=fs),
    ),
    "get_partitions_req": (
        "get_partitions",
        lambda a: [a[0].dbName, a[0].tblName, a[0].maxParts if a[0].maxParts is not None else -1],
        lambda ps: ttypes.PartitionsResponse(partitions=ps),
    ),
    "get_partitions_by_names_req": (
        "get_partitions_by_names",
        lambda a: [a[0].db_name, a[0].tbl_name, a[0].names or []],
        lambda ps: ttypes.GetPartitionsByNamesResult(partitions=ps),
    ),
    # Hive 4.2 dropped these older calls
    "get_table": (
        "get_table_req",
        lambda a: [ttypes.GetTableRequest(tblName=a[1], **_db_and_catalog(a[0]))],
        lambda r: r.table,
    ),
    "get_table_objects_by_name": (
        "get_table_objects_by_name_req",
        lambda a: [ttypes.GetTablesRequest(tblNames=list(a[1] or []), **_db_and_catalog(a[0]))],
        lambda r: list(r.tables or []),
    ),
}
"""method -> (the equivalent method, its arguments, the method's answer from the equivalent's)."""
