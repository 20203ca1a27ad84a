"""Which column type changes ``alter_table`` accepts (Hive's rule for
``hive.metastore.disallow.incompatible.col.type.changes``, on by default).

Hive compares the old and new columns position by position (up to the shorter list) by type *name*
(``varchar(10)`` and ``varchar(20)`` are both ``varchar``): a change is compatible when the names are
equal, both are string types, both numeric with the new one wider in Hive's cast order, the old one
is ``void``, or a numeric or date/time type becomes a string type. Complex types must stay exactly
the same name (``array``, ``map``, ``struct``, ``uniontype``). A binary SerDe would otherwise read old
files with the wrong type (HIVE-4409).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hive_metastore.ttypes import FieldSchema, InvalidOperationException

__all__ = ["EXEMPT_SERDES", "check_type_changes", "compatible", "incompatible_columns", "type_name"]

#: SerDes whose tables may change column types freely (Hive 4's default of
#: ``metastore.allow.incompatible.col.type.changes.serdes``).
EXEMPT_SERDES = frozenset(
    {"org.apache.hadoop.hive.kudu.KuduSerDe", "org.apache.iceberg.mr.hive.HiveIcebergSerDe"}
)

_STRING = frozenset({"string", "varchar", "char"})
_NUMERIC_ORDER = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4, "decimal": 5, "float": 6, "double": 7}
_DATETIME = frozenset({"date", "datetime", "timestamp", "timestamp with time zone"})
_PRIMITIVE = (
    _STRING
    | set(_NUMERIC_ORDER)
    | _DATETIME
    | {"void", "boolean", "interval_year_month", "interval_day_time", "binary"}
)
_ALIASES = {"integer": "int", "numeric": "decimal"}
_WORD = re.compile(r"\W")


def type_name(type_string: str) -> str:
    """The type's name without parameters, lower case: ``"VARCHAR(10)"`` -> ``"varchar"``,
    ``"array<int>"`` -> ``"array"``, ``"integer"`` -> ``"int"`` (Hive ColumnType.getTypeName)."""
    word = _WORD.split(type_string.lower(), maxsplit=1)[0]
    return _ALIASES.get(word, word)


def compatible(old: str, new: str) -> bool:
    """Whether a column of type name ``old`` may become ``new`` (names from :func:`type_name`)."""
    if old == new:
        return True
    if old not in _PRIMITIVE or new not in _PRIMITIVE:
        return False
    if old in _STRING and new in _STRING:
        return True
    if old in _NUMERIC_ORDER and new in _NUMERIC_ORDER:
        return _NUMERIC_ORDER[old] < _NUMERIC_ORDER[new]
    if old == "void":
        return True
    return (old in _DATETIME or old in _NUMERIC_ORDER) and new in _STRING


def incompatible_columns(old_cols: Sequence[FieldSchema], new_cols: Sequence[FieldSchema]) -> list[str]:
    """Names of the new columns whose type cannot replace the old column at the same position."""
    return [
        new.name
        for old, new in zip(old_cols, new_cols, strict=False)
        if not compatible(type_name(old.type or ""), type_name(new.type or ""))
    ]


def check_type_changes(
    old_cols: Sequence[FieldSchema], new_cols: Sequence[FieldSchema], serde: str | None
) -> None:
    """Raise InvalidOperationException (Hive's text: "The following columns have types incompatible
    with the existing columns in their respective positions :\\n<names, comma-separated>") unless
    every change is compatible or the table's SerDe is in :data:`EXEMPT_SERDES`."""
    bad = incompatible_columns(old_cols, new_cols)
    if bad and serde not in EXEMPT_SERDES:
        raise InvalidOperationException(
            "The following columns have types incompatible with the existing columns in their "
            "respective positions :\n" + ",".join(bad)
        )
