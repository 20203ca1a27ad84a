"""Catalog-qualified database names of Hive 3+ (``@cat#db``), name normalisation and Hive name
patterns."""

from __future__ import annotations

import re
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
    star = re.escape("*")
    return re.compile("|".join("(?:" + re.escape(p).replace(star, ".*") + ")" for p in alts), re.IGNORECASE)


def matches_pattern(name: str, pattern: str | None) -> bool:
    """Hive metastore name patterns: ``*`` any characters, ``|`` alternatives, case-insensitive."""
    if pattern is None or pattern in ("", "*", ".*"):
        return True
    return _pattern_regex(pattern).fullmatch(name) is not None
