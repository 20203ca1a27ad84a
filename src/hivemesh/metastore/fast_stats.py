"""Hive's "fast stats": ``numFiles`` and ``totalSize`` kept in table and partition parameters
(with Hive 3+'s ``numFilesErasureCoded``, always 0 here: no file is stored with HDFS erasure coding).

The Java HMS (``hive.stats.autogather``, on by default) lists a table's or partition's files when
it is created over an existing directory, added, or altered, and stores the count and total size;
Spark reads ``totalSize`` as the size of a Hive table it has not analysed (and so decides on
broadcast joins). Rules follow Hive 2.3 MetaStoreUtils.requireCalStats / updateTableStatsFast /
updatePartitionStatsFast and StatsSetupConst.setBasicStatsState.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hivemesh import storage
from hivemesh.errors import HivemeshError
from hivemesh.hive.constants import (
    COLUMN_STATS_ACCURATE,
    DO_NOT_UPDATE_STATS,
    NUM_ERASURE_CODED_FILES,
    NUM_FILES,
    STATS_GENERATED,
    TOTAL_SIZE,
)

FAST_STATS = (NUM_FILES, TOTAL_SIZE)


def _true(value: str | None) -> bool:
    return str(value).lower() == "true"


def require_cal_stats(
    env: Mapping[str, str] | None,
    is_view: bool,
    old_params: Mapping[str, str] | None = None,
    new_params: Mapping[str, str] | None = None,
    partition: bool = False,
) -> bool:
    """Whether the fast stats must be (re)computed for this change (Hive's requireCalStats).

    ``env``: the call's EnvironmentContext properties. For a table pass ``partition=False``; for a
    partition pass its old parameters (None when it is new) and new parameters.
    """
    env = env or {}
    if _true(env.get(DO_NOT_UPDATE_STATS)) or is_view:
        return False
    if not partition:
        return True
    if new_params is None or not all(k in new_params for k in FAST_STATS):
        return True
    if env.get(STATS_GENERATED) in ("TASK", "USER"):
        return True
    old = old_params or {}
    return any(old.get(k) != new_params.get(k) for k in FAST_STATS)


def update_fast(
    params: dict[str, str], location: str | None, env: Mapping[str, str] | None, new_dir: bool, force: bool
) -> None:
    """Set ``numFiles``/``totalSize`` in ``params`` from a listing of ``location`` (in place), and
    ``numFilesErasureCoded`` to 0 as Hive 3+ does (Hive 2.3 had no such key).

    Nothing happens for a directory the metastore is about to create (``new_dir``), when the
    parameters already hold both values and ``force`` is off, or when the storage cannot be listed.
    A ``DO_NOT_UPDATE_STATS`` parameter is removed and honoured. After a listing, the basic
    statistics are marked accurate only when the engine says it computed them (``STATS_GENERATED``
    = ``TASK``); otherwise ``COLUMN_STATS_ACCURATE`` is dropped, as Hive 2.3 does.
    """
    listed = storage.quick_stats(location) if would_list(params, force) and not new_dir else None
    apply_listing(params, listed, env, force)


def would_list(params: Mapping[str, str], force: bool) -> bool:
    """Whether :func:`update_fast` lists the location for these parameters (no ``DO_NOT_UPDATE_STATS``
    marker, and ``force`` or a fast statistic missing)."""
    return not _true(params.get(DO_NOT_UPDATE_STATS)) and (force or not all(k in params for k in FAST_STATS))


def may_list(env: Mapping[str, str] | None, params: Mapping[str, str] | None, force: bool) -> bool:
    """Whether a partition change with these parameters could need a listing (for any old
    parameters): False lets a call skip gathering listings before its write transaction."""
    return not _true((env or {}).get(DO_NOT_UPDATE_STATS)) and would_list(params or {}, force)


def apply_listing(
    params: dict[str, str], listed: tuple[int, int] | None, env: Mapping[str, str] | None, force: bool
) -> None:
    """:func:`update_fast` with the listing taken already: ``listed`` is ``(number of files, total
    bytes)``, or None for a directory about to be created or storage that cannot be listed."""
    marker = params.pop(DO_NOT_UPDATE_STATS, None)
    if _true(marker):
        return
    if not force and all(k in params for k in FAST_STATS):
        return
    if listed is None:
        return
    params[NUM_FILES], params[TOTAL_SIZE] = str(listed[0]), str(listed[1])
    params[NUM_ERASURE_CODED_FILES] = "0"  # as Hive 3+ writes it for files without erasure coding
    if (env or {}).get(STATS_GENERATED) == "TASK":
        _set_basic_stats_accurate(params)
    else:
        params.pop(COLUMN_STATS_ACCURATE, None)


class UnlistedLocations(HivemeshError):
    """A write transaction needs listings of locations not taken before it: the call rolls it
    back, lists them and runs it again (never reaches a client)."""

    def __init__(self, locations: list[str | None]):
        super().__init__(locations)
        self.locations = locations


@dataclass
class Listings:
    """Listings of locations taken before a call's write transaction (storage I/O never holds the
    database's locks): location -> ``(number of files, total bytes)``, or None when it cannot be
    listed or, with ``new_dirs``, does not exist (a directory the metastore is about to create)."""

    new_dirs: bool
    taken: dict[str | None, tuple[int, int] | None] = field(default_factory=dict)

    def take(self, locations: Iterable[str | None]) -> None:
        """List each location not listed yet."""
        for loc in dict.fromkeys(locations):
            if loc not in self.taken:
                gone = self.new_dirs and not storage.exists(loc)
                self.taken[loc] = None if gone else storage.quick_stats(loc)

    def missing(self, locations: Iterable[str | None]) -> list[str | None]:
        """The locations not listed yet, in order, once each."""
        return [loc for loc in dict.fromkeys(locations) if loc not in self.taken]

    def require(self, locations: Iterable[str | None]) -> None:
        """Raise :class:`UnlistedLocations` when any of ``locations`` is not listed yet."""
        missing = self.missing(locations)
        if missing:
            raise UnlistedLocations(missing)


def _load_state(params: Mapping[str, str]) -> dict[str, Any]:
    try:
        state = json.loads(params.get(COLUMN_STATS_ACCURATE) or "{}")
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def _store_state(params: dict[str, str], state: dict[str, Any]) -> None:
    params[COLUMN_STATS_ACCURATE] = json.dumps({k: state[k] for k in sorted(state)}, separators=(",", ":"))


def _set_basic_stats_accurate(params: dict[str, str]) -> None:
    state = _load_state(params)
    state["BASIC_STATS"] = "true"
    _store_state(params, state)


def mark_columns_accurate(params: dict[str, str], columns: list[str]) -> None:
    """Add ``columns`` to ``COLUMN_STATS`` of the ``COLUMN_STATS_ACCURATE`` parameter (in place)."""
    if not columns:
        return
    state = _load_state(params)
    cols = dict(state.get("COLUMN_STATS") or {})
    cols.update({c: "true" for c in columns})
    state["COLUMN_STATS"] = dict(sorted(cols.items()))
    _store_state(params, state)
