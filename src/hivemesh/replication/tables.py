"""What a replication policy needs to know of a source table's kind."""

from __future__ import annotations

from hive_metastore.ttypes import Table

__all__ = ["VIEW_TYPES", "is_view", "owns_data"]

VIEW_TYPES = ("VIRTUAL_VIEW", "MATERIALIZED_VIEW")


def is_view(table: Table) -> bool:
    """Whether ``table`` is a view (VIRTUAL_VIEW or MATERIALIZED_VIEW, in any case): no data to copy.
    Never raises."""
    return (table.tableType or "").upper() in VIEW_TYPES


def owns_data(table: Table) -> bool:
    """Whether dropping ``table`` or its partitions deletes their data: a managed table (its type
    in any case), or an external one with ``external.table.purge`` (Hive 4 makes its non-ACID
    managed tables so). Never raises."""
    purge = (table.parameters or {}).get("external.table.purge", "")
    return (table.tableType or "").upper() == "MANAGED_TABLE" or purge.lower() == "true"
