"""Hive table schemas as Delta Lake schemas, and how a Hive schema change maps onto Delta.

Types (Hive -> Delta): tinyint/smallint/int/bigint -> byte/short/integer/long, float/double,
decimal(p,s) -> decimal(p,s), boolean, string/varchar(n)/char(n) -> string (the length is not
enforced by Delta; the Hive type is kept in the column's ``hive.type`` metadata), binary, date,
timestamp -> timestamp_ntz (Hive TIMESTAMP is wall-clock time without a zone: exact),
timestamp with local time zone -> timestamp (an instant), array/map/struct -> array/map/struct
of the mapped types. ``uniontype`` has no Delta counterpart: a table using it is refused
(:class:`UnsupportedSchemaError`) and reported, never replicated with the column dropped.

Schema changes (:func:`plan_schema_change`): columns appended at the end (Hive ``ADD COLUMNS``)
and comment changes are Delta metadata changes; anything else (RENAME, DROP, REPLACE COLUMNS,
reorder, type changes) makes the replica rewritten with the new schema in one Delta commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from hivemesh.acid.orcfile import hive_to_arrow_type
from hivemesh.errors import HivemeshError

__all__ = [
    "HIVE_TYPE_KEY",
    "SchemaChange",
    "UnsupportedSchemaError",
    "arrow_type",
    "delta_schema",
    "field_signatures",
    "plan_schema_change",
]

HIVE_TYPE_KEY = "hive.type"
"""Column metadata key holding the source column's Hive type (``varchar(10)``, ``char(3)``)."""

Column = tuple[str, str, str | None]
"""``(name, hive type, comment)`` of one column."""


class UnsupportedSchemaError(HivemeshError, ValueError):
    """A Hive table has a column type Delta Lake cannot represent (``uniontype``)."""


def _normalize(t: pa.DataType) -> pa.DataType:
    """Delta's physical types: timestamps in microseconds, plain strings and binaries."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _normalize(t.value_type), nullable=True))
    if pa.types.is_map(t):
        return pa.map_(_normalize(t.key_type), _normalize(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _normalize(f.type), nullable=True) for f in t])
    return t


def arrow_type(hive_type: str) -> pa.DataType:
    """The Arrow type of a Hive column type as Delta stores it (see the module docstring).
    Raises UnsupportedSchemaError for ``uniontype`` and types Hive does not define."""
    try:
        return _normalize(hive_to_arrow_type(hive_type))
    except ValueError as e:
        raise UnsupportedSchemaError(f"Hive type {hive_type!r} has no Delta Lake type: {e}") from e


def _field(name: str, hive_type: str, comment: str | None) -> pa.Field:
    meta = {HIVE_TYPE_KEY: hive_type}
    if comment:
        meta["comment"] = comment
    return pa.field(name.lower(), arrow_type(hive_type), nullable=True, metadata=meta)


def delta_schema(columns: Sequence[Column], partition_keys: Sequence[Column]) -> pa.Schema:
    """The Delta schema of a Hive table: its columns, then its partition keys (names lower case,
    as Hive stores them; all nullable). Raises UnsupportedSchemaError naming the column."""
    fields = []
    for name, hive_type, comment in [*columns, *partition_keys]:
        try:
            fields.append(_field(name, hive_type, comment))
        except UnsupportedSchemaError as e:
            raise UnsupportedSchemaError(f"column {name}: {e}") from e
    return pa.schema(fields)


@dataclass
class SchemaChange:
    """How a Delta replica follows a Hive schema change: ``added`` fields to append (``ADD
    COLUMNS``), ``comments`` to set by column name, or ``rewrite`` (with ``reason``) when the
    change is none of those. Empty when nothing changed."""

    added: list[pa.Field] = field(default_factory=list)
    comments: dict[str, str] = field(default_factory=dict)
    rewrite: bool = False
    reason: str = ""

    @property
    def empty(self) -> bool:
        """True when the replica needs no change."""
        return not self.added and not self.comments and not self.rewrite


FieldSig = tuple[str, str, str]
"""``(name, Delta type as JSON, comment)`` of one replica column (see :func:`field_signatures`)."""


def field_signatures(schema: pa.Schema) -> list[FieldSig]:
    """Compare-ready ``(name, Delta type JSON, comment)`` of each field of ``schema`` (an Arrow
    schema, or anything exporting one, such as delta-rs's schema), typed the way Delta stores
    them so that a schema read back from the Delta log compares equal to the one written."""
    from deltalake import Schema as DeltaSchema

    out = []
    for f in DeltaSchema.from_arrow(pa.schema(schema)).fields:
        meta = f.metadata or {}
        out.append(
            (
                f.name,
                json.dumps(json.loads(f.to_json())["type"], sort_keys=True),
                str(meta.get("comment") or ""),
            )
        )
    return out


def plan_schema_change(current: pa.Schema, wanted: pa.Schema, partition_names: Sequence[str]) -> SchemaChange:
    """Compare the replica's ``current`` schema with the ``wanted`` one (:func:`delta_schema`).

    Data columns of ``wanted`` that extend ``current``'s data columns at the end are ``added``;
    changed comments go to ``comments``; any other difference (a rename, a drop, a reorder, a
    type change, other partition keys) sets ``rewrite``."""
    parts = set(partition_names)
    cur_all, new_all = field_signatures(current), field_signatures(wanted)
    if [f[0] for f in cur_all if f[0] in parts] != [f[0] for f in new_all if f[0] in parts]:
        return SchemaChange(rewrite=True, reason="the partition keys changed")
    cur = [f for f in cur_all if f[0] not in parts]
    new = [f for f in new_all if f[0] not in parts]
    if len(new) < len(cur) or [f[:2] for f in new[: len(cur)]] != [f[:2] for f in cur]:
        gone = sorted({f[0] for f in cur} - {f[0] for f in new})
        changed = sorted(n[0] for n in new for c in cur if c[0] == n[0] and c[1] != n[1])
        what = []
        if gone:
            what.append(f"columns {', '.join(gone)} renamed or dropped")
        if changed:
            what.append(f"type of {', '.join(changed)} changed")
        return SchemaChange(rewrite=True, reason="; ".join(what) or "columns reordered")
    out = SchemaChange()
    by_name = {f.name: f for f in wanted}
    out.added = [by_name[f[0]] for f in new[len(cur) :]]
    for c, n in zip(cur, new, strict=False):
        if c[2] != n[2]:
            out.comments[n[0]] = n[2]
    return out
