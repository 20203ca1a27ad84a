"""Hive's names: catalog-qualified database names of Hive 3+ (``@cat#db``), name normalisation,
Hive name patterns, and partition names.

Partition names are ``k1=v1/k2=v2`` with Hive's path escaping (``FileUtils.escapePathName``:
``%XX`` upper-case hex for control characters and ``"#%'*/:=?\\\x7f{[]^``); an empty or null value
becomes ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from hive_metastore.ttypes import MetaException

DEFAULT_CATALOG = "hive"
CATALOG_PREFIX = "@"
CATALOG_DB_SEPARATOR = "#"
DB_EMPTY_MARKER = "!"


def parse_db_name(name: str | None) -> tuple[str, str | None]:
    """Split a possibly catalog-qualified database name into ``(catalog, database)``.

    ``"sales"`` -> ``("hive", "sales")``; ``"@hive#sales"`` -> ``("hive", "sales")``;
    ``"@hive#"`` -> ``("hive", None)`` (all databases); ``"@hive#!"`` -> ``("hive", "")``.
    Names are lower-cased as Hive does. Source: Hive MetaStoreUtils.parseDbName.
    Raises MetaException for a leading ``@`` without ``#``.
    """
    if name is None:
        return DEFAULT_CATALOG, None
    if not name.startswith(CATALOG_PREFIX):
        return DEFAULT_CATALOG, name.lower()
    cat, sep, db = name[1:].partition(CATALOG_DB_SEPARATOR)
    if not sep:
        raise MetaException(f"Database name is malformed: {name}")
    cat = cat.lower() or DEFAULT_CATALOG
    if db == "":
        return cat, None
    if db == DB_EMPTY_MARKER:
        return cat, ""
    return cat, db.lower()


def qualify_db_name(catalog: str, db: str | None) -> str:
    """The inverse of :func:`parse_db_name`: ``("hive", "x")`` -> ``"@hive#x"``."""
    if db is None:
        return f"{CATALOG_PREFIX}{catalog}{CATALOG_DB_SEPARATOR}"
    return f"{CATALOG_PREFIX}{catalog}{CATALOG_DB_SEPARATOR}{db or DB_EMPTY_MARKER}"


def db_ref(db: str | None, catalog: str | None = None) -> str | None:
    """The database name to resolve: ``@catalog#db`` when a catalog is given (request structs
    carry ``catName``), else ``db`` as it came (it may itself be ``@cat#db``)."""
    return qualify_db_name(catalog, db) if catalog else db


@lru_cache(maxsize=1024)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    alts = [p.strip() for p in pattern.split("|")]
    wildcards = {"*": ".*", ".": "."}
    return re.compile(
        "|".join("(?:" + "".join(wildcards.get(ch) or re.escape(ch) for ch in p) + ")" for p in alts),
        re.IGNORECASE,
    )


def matches_pattern(name: str, pattern: str | None) -> bool:
    """Hive metastore name patterns: ``*`` any characters, ``.`` any one character, ``|``
    alternatives, case-insensitive; the whole name must match.

    As Hive 2.3 (a Java regex with ``*`` made ``.*``) and Hive 4 (the same regex, which the
    metastore's RDBMS runs as SQL LIKE: ``%`` and ``_``) agree on names: ``"p.*"`` matches
    ``plain`` but not ``p``. Other regex characters match themselves.
    """
    if pattern is None or pattern in ("", "*", ".*"):
        return True
    return _pattern_regex(pattern).fullmatch(name) is not None


# ---------------------------------------------------------------- partition names
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    """Hive's FileUtils.escapePathName: ``a/b`` -> ``a%2Fb``; empty/None -> the default partition."""
    if not value:
        return DEFAULT_PARTITION_NAME
    return "".join(f"%{ord(ch):02X}" if (ch in _ESCAPED or ord(ch) < 0x20) else ch for ch in value)


def unescape_path_name(text: str) -> str:
    """Inverse of :func:`escape_path_name` (a ``%`` not followed by two hex digits is kept)."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 2 < len(text):
            code = text[i + 1 : i + 3]
            try:
                out.append(chr(int(code, 16)))
                i += 3
                continue
            except ValueError:
                pass
        out.append(ch)
        i += 1
    return "".join(out)


def make_part_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """``(["ds","hr"], ["2020-01-01","1"])`` -> ``ds=2020-01-01/hr=1`` (escaped, keys lower-cased)."""
    return "/".join(
        f"{escape_path_name(k.lower())}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True)
    )


def split_part_name(name: str) -> list[tuple[str, str]]:
    """``ds=2020-01-01/hr=1`` -> ``[("ds","2020-01-01"), ("hr","1")]`` (unescaped).

    Raises ValueError for a component without ``=``.
    """
    out = []
    for comp in name.split("/"):
        if not comp:
            continue
        k, sep, v = comp.partition("=")
        if not sep:
            raise ValueError(f"Invalid partition name {name!r}: component {comp!r} has no '='")
        out.append((unescape_path_name(k), unescape_path_name(v)))
    return out
