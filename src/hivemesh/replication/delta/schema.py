"""Hive table schemas as Delta Lake schemas, and how a Hive schema change maps onto Delta.

Types (Hive -> Delta): tinyint/smallint/int/bigint -> byte/short/integer/long, float/double,
decimal(p,s) -> decimal(p,s), boolean, string/varchar(n)/char(n) -> string (the length is not
enforced by Delta; the Hive type is kept in the column's ``hive.type`` metadata), binary, date,
timestamp -> timestamp_ntz (Hive TIMESTAMP is wall-clock time without a zone: exact),
timestamp with local time zone -> timestamp (an instant), array/map/struct -> array/map/struct
of the mapped types. ``uniontype`` has no Delta counterpart: a table using it is refused
(:class:`UnsupportedSchemaError`) and reported, never replicated with the column dropped.

Schema changes (:func:`plan_schema_change`) never rewrite data when Delta can express them:
columns added at the end and comment changes are delta-rs metadata commits; renames, drops,
reorders (Hive ``CHANGE COLUMN``, ``REPLACE COLUMNS``) are Delta ``ALTER TABLE`` statements on a table with column mapping (``delta.columnMapping.mode=name``, turned on
at the first such change), run by Delta Lake for Spark
(:mod:`hivemesh.replication.delta.spark_ddl`). Which old column a new one is depends on how Hive
reads the files: ORC and text files (and ACID tables) by position, Parquet files by name. A type
change makes the replica written again with the new schema in one commit: Delta's type widening
table feature would stop delta-rs (and readers without it) from using the table.
"""

from __future__ import annotations

import json
import re
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
    """How a Delta replica follows a Hive schema change (see the module docstring).

    ``added``/``comments``: what delta-rs applies (columns appended, comments by column name)
    when nothing else changed; ``statements``: Delta ``ALTER TABLE {table} ...`` statements
    (Spark SQL) otherwise, ``column_mapping`` True when they need column mapping turned on first;
    ``rewrite`` (with ``reason``) when Delta cannot express the change. Empty when nothing
    changed."""

    added: list[pa.Field] = field(default_factory=list)
    comments: dict[str, str] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    column_mapping: bool = False
    rewrite: bool = False
    reason: str = ""

    @property
    def empty(self) -> bool:
        """True when the replica needs no change."""
        return not self.added and not self.comments and not self.statements and not self.rewrite


FieldSig = tuple[str, str, str]
"""``(name, Delta type as JSON, comment)`` of one replica column (see :func:`field_signatures`)."""


def field_signatures(schema: pa.Schema) -> list[FieldSig]:
    """Compare-ready ``(name, Delta type JSON, comment)`` of each field of ``schema`` (an Arrow
    schema, or anything exporting one, such as delta-rs's schema), typed the way Delta stores
    them so that a schema read back from the Delta log compares equal to the one written. Raises
    ImportError without the ``deltalake`` package, and delta-rs's error for an Arrow type Delta has no type
    for."""
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


_INTEGERS = ["byte", "short", "integer", "long"]
_SQL = {
    "byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT", "float": "FLOAT",
    "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "binary": "BINARY", "date": "DATE",
    "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ",
}  # fmt: skip
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def sql_type(delta_type: object) -> str:
    """Spark SQL DDL of a Delta type (its JSON form, parsed). Raises KeyError for a primitive type name it
    does not know."""
    if isinstance(delta_type, str):
        m = _DECIMAL.match(delta_type)
        if m:
            return f"DECIMAL({m.group(1)},{m.group(2)})"
        return _SQL[delta_type]
    assert isinstance(delta_type, dict)
    kind = delta_type["type"]
    if kind == "array":
        return f"ARRAY<{sql_type(delta_type['elementType'])}>"
    if kind == "map":
        return f"MAP<{sql_type(delta_type['keyType'])},{sql_type(delta_type['valueType'])}>"
    return (
        "STRUCT<" + ",".join(f"{quote(f['name'])}:{sql_type(f['type'])}" for f in delta_type["fields"]) + ">"
    )


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def widens(old: str, new: str) -> bool:
    """Whether Delta's type widening takes a column of Delta type ``old`` to ``new`` (JSON forms)
    without rewriting data: a wider integer type, float to double, a decimal with at least as
    many integer and fraction digits, date to timestamp_ntz."""
    o, n = json.loads(old), json.loads(new)
    if not isinstance(o, str) or not isinstance(n, str):
        return False
    if o in _INTEGERS and n in _INTEGERS:
        return _INTEGERS.index(n) > _INTEGERS.index(o)
    if (o, n) in (("float", "double"), ("date", "timestamp_ntz")):
        return True
    mo, mn = _DECIMAL.match(o), _DECIMAL.match(n)
    if mo and mn:
        po, so, pn, sn = (int(x) for x in (*mo.groups(), *mn.groups()))
        return sn >= so and pn - sn >= po - so and (pn, sn) != (po, so)
    return False


def plan_schema_change(
    current: pa.Schema, wanted: pa.Schema, partition_names: Sequence[str], positional: bool = True
) -> SchemaChange:
    """How the replica with schema ``current`` gets the ``wanted`` one (:func:`delta_schema`).
    ``positional``: the source's files map columns by position (ORC, text, ACID), else by name
    (Parquet). See the module docstring. Raises as :func:`field_signatures`."""
    parts = set(partition_names)
    cur_all, new_all = field_signatures(current), field_signatures(wanted)
    if [f[0] for f in cur_all if f[0] in parts] != [f[0] for f in new_all if f[0] in parts]:
        return SchemaChange(rewrite=True, reason="the partition keys changed")
    cur = [f for f in cur_all if f[0] not in parts]
    new = [f for f in new_all if f[0] not in parts]
    # which current column each wanted one is (None: a new column)
    if positional:
        source: list[FieldSig | None] = [cur[i] if i < len(cur) else None for i in range(len(new))]
    else:
        by_name = {c[0]: c for c in cur}
        source = [by_name.get(n[0]) for n in new]
    kept = {s[0] for s in source if s is not None}
    dropped = [c[0] for c in cur if c[0] not in kept]
    renames = [(s[0], n[0]) for s, n in zip(source, new, strict=True) if s is not None and s[0] != n[0]]
    retyped = [(n[0], s[1], n[1]) for s, n in zip(source, new, strict=True) if s is not None and s[1] != n[1]]
    for name, old, new_type in retyped:  # Delta's type widening would lock delta-rs out: rewrite
        what = "a widening" if widens(old, new_type) else "no Delta type widening"
        return SchemaChange(
            rewrite=True, reason=f"column {name}: {json.loads(old)} -> {json.loads(new_type)} ({what})"
        )
    # simulate the replica's data column order through the statements
    order = [c[0] for c in cur if c[0] not in dropped]
    out = SchemaChange()
    if not dropped and not renames and not retyped:
        appended = [n for s, n in zip(source, new, strict=True) if s is None]
        if [n[0] for n in new] == order + [n[0] for n in appended]:
            by_field = {f.name: f for f in wanted}
            out.added = [by_field[n[0]] for n in appended]
            for s, n in zip(source, new, strict=True):
                if s is not None and s[2] != n[2]:
                    out.comments[n[0]] = n[2]
            return out
    st = out.statements
    out.column_mapping = True
    if dropped:
        st.append("ALTER TABLE {table} DROP COLUMNS (" + ", ".join(quote(d) for d in dropped) + ")")
    if renames:
        taken = set(order)
        direct = all(new_name not in taken for _, new_name in renames)
        steps = (
            renames
            if direct
            else [(o, f"__hm_{i}") for i, (o, _) in enumerate(renames)]
            + [(f"__hm_{i}", n) for i, (_, n) in enumerate(renames)]
        )
        for old_name, new_name in steps:
            st.append(f"ALTER TABLE {{table}} RENAME COLUMN {quote(old_name)} TO {quote(new_name)}")
        final = dict(renames)
        order = [final.get(c, c) for c in order]
    if retyped:
        st.append("ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for name, _, new_type in retyped:
            st.append(
                f"ALTER TABLE {{table}} ALTER COLUMN {quote(name)} TYPE {sql_type(json.loads(new_type))}"
            )
    for i, (s, n) in enumerate(zip(source, new, strict=True)):
        if s is None:
            where = " FIRST" if i == 0 else f" AFTER {quote(new[i - 1][0])}"
            comment = f" COMMENT {_literal(n[2])}" if n[2] else ""
            st.append(
                f"ALTER TABLE {{table}} ADD COLUMNS ({quote(n[0])} {sql_type(json.loads(n[1]))}{comment}{where})"
            )
            order.insert(0 if i == 0 else order.index(new[i - 1][0]) + 1, n[0])
    wanted_order = [n[0] for n in new]
    if order != wanted_order:
        for i, name in enumerate(wanted_order):
            where = "FIRST" if i == 0 else f"AFTER {quote(wanted_order[i - 1])}"
            st.append(f"ALTER TABLE {{table}} ALTER COLUMN {quote(name)} {where}")
    for s, n in zip(source, new, strict=True):
        if s is not None and s[2] != n[2]:
            st.append(f"ALTER TABLE {{table}} ALTER COLUMN {quote(n[0])} COMMENT {_literal(n[2])}")
    return out
