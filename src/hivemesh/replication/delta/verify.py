"""Reading a Delta replica and comparing it with its Hive source table.

:func:`read_delta` reads a Delta table (any version) from the files its log lists, with pyarrow;
it reads tables hivemesh writes (column mapping included; no deletion vectors) and refuses others.
:func:`compare_replica` compares one replica with its source: schema (names and types as
:func:`~hivemesh.replication.delta.schema.delta_schema` maps them), partitions, and rows by an
order-independent checksum of their contents.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["ReplicaDiff", "read_delta", "rows_digest"]


def read_delta(
    uri: str,
    version: int | None = None,
    storage_options: dict[str, str] | None = None,
    filesystem: Any = None,
    root: str | None = None,
) -> pa.Table:
    """The rows of the Delta table at ``uri`` (``version`` None: the latest) in its schema's
    column order, partition values as typed columns. ``filesystem``/``root``: where to read the
    data files (default: local paths under ``uri``). Column mapping (name mode) is followed.
    Raises ValueError for a table using deletion vectors."""
    from deltalake import DeltaTable

    dt = DeltaTable(uri, version=version, storage_options=storage_options)
    schema = pa.schema(dt.schema().to_arrow())
    physical = {
        f.name: (f.metadata or {}).get(b"delta.columnMapping.physicalName", f.name.encode()).decode()
        for f in schema
    }
    part_cols = list(dt.metadata().partition_columns)
    actions = pa.table(dt.get_add_actions(flatten=True))
    dv = "deletionVector.storageType"
    if dv in actions.column_names and actions[dv].null_count < actions.num_rows:
        raise ValueError(f"{uri}: deletion vectors are not read by hivemesh's Delta reader")
    base = (root or uri).rstrip("/")
    plain = pa.schema([pa.field(f.name, f.type) for f in schema])
    parts = []
    for i, path in enumerate(actions["path"].to_pylist()):
        full = path if "://" in path or path.startswith("/") else f"{base}/{path}"
        t = pq.read_table(full, filesystem=filesystem)
        cols = []
        for f in schema:
            if f.name in part_cols:
                key = f"partition.{f.name}"
                if key not in actions.column_names:
                    key = f"partition.{physical[f.name]}"
                v = actions[key][i].as_py()
                cols.append(
                    pa.array([v] * t.num_rows).cast(f.type) if v is not None else pa.nulls(t.num_rows, f.type)
                )
            elif physical[f.name] in t.column_names:
                cols.append(t[physical[f.name]].cast(f.type))
            else:
                cols.append(pa.nulls(t.num_rows, f.type))
        parts.append(pa.Table.from_arrays(cols, schema=plain))
    return pa.concat_tables(parts) if parts else plain.empty_table()


def rows_digest(table: pa.Table) -> tuple[int, str]:
    """``(rows, checksum)`` of a table's contents, independent of row order: the sorted SHA-1s of
    each row's values (as Python values, so equal values of different physical types match)."""
    digests = sorted(
        hashlib.sha1(repr(tuple(row.values())).encode()).hexdigest() for row in table.to_pylist()
    )
    return table.num_rows, hashlib.sha1("".join(digests).encode()).hexdigest()


@dataclass
class ReplicaDiff:
    """Differences of one Delta replica from its source: ``schema`` (wanted vs found), ``rows``
    (source vs replica ``(count, checksum)``), ``partitions`` only at one side."""

    table: str
    problems: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        """True when nothing differs."""
        return not self.problems
