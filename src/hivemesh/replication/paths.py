"""Where a policy puts its tables on the target, and the rule that keeps the target off the
source's data.

A policy maps source location prefixes to target ones (its ``paths``; by default the source
zone's warehouse to the target zone's). Locations and prefixes are compared in one normal form,
:func:`hivemesh.storage.locations.location_key` (``/data/wh``, ``file:///data/wh/`` and
``file:/data/wh`` are one directory; scheme and authority in any case; ``hdfs://nn/x`` is
``hdfs://nn:8020/x`` but not ``hdfs://nn:9000/x``).

**The rule.** A target location must not be, nor lie under, a location of the source zone: the
source object's own location, any source prefix of the policy's ``paths``, or the source zone's
warehouse. A target metastore pointing into the source's directories would have the source's
files deleted by a ``drop_table(..., deleteData=True)`` on the target, and a replica written
over them. The rule is checked where it can be when the configuration is loaded
(:meth:`PolicyPaths.problems`: a target prefix inside the source zone), and for every location
the policy relocates (:meth:`PolicyPaths.relocate_checked`, raising :class:`LocationRefused`: a
table outside every source prefix keeps its location, which the rule refuses), a database's
``managedLocationUri`` included (:meth:`PolicyPaths.check_database`). Both formats
(``hive``, ``delta``) and both data modes follow it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from hive_metastore.ttypes import Database

from hivemesh.errors import HivemeshError
from hivemesh.metastore.replay import Relocate, relocator_for
from hivemesh.storage.locations import (
    clean_location,
    key_relpath,
    location_key,
)

__all__ = ["LocationRefused", "PolicyPaths", "parent_location"]


class LocationRefused(HivemeshError, RuntimeError):
    """A location the policy would write to the target lies in the source zone (see the module
    docstring); the message names the location, the source directory it falls in and the
    ``paths`` entry that would fix it. ``source_location``/``target_location``: the pair."""

    def __init__(self, message: str, source_location: str, target_location: str):
        super().__init__(message)
        self.source_location = source_location
        self.target_location = target_location


def parent_location(location: str) -> str:
    """The directory holding ``location`` in :func:`~hivemesh.storage.locations.clean_location`
    form (``file:/ext/t`` -> ``file:/ext``; a root is its own parent)."""
    cleaned = clean_location(location)
    if cleaned.endswith(":/") or "/" not in cleaned.split("://", 1)[-1]:
        return cleaned
    parent = cleaned.rsplit("/", 1)[0]
    return parent + "/" if parent.endswith(":") else parent


@dataclass
class PolicyPaths:
    """The location mapping of one policy: ``name`` (the policy's), ``source``/``target`` (zone
    names), ``mapping`` (source prefix -> target prefix, as configured: the policy's ``paths``, or
    the source zone's warehouse -> the target zone's when ``configured`` is False) and
    ``source_warehouse`` (the source zone's, as configured)."""

    name: str
    source: str
    target: str
    mapping: tuple[tuple[str, str], ...]
    source_warehouse: str
    configured: bool
    _relocate: Relocate = field(init=False, repr=False, compare=False)
    _roots: dict[str, str] = field(init=False, repr=False, compare=False)  # location_key -> as written

    def __post_init__(self) -> None:
        self._relocate = relocator_for(dict(self.mapping))
        self._roots = {}
        for root in (*(src for src, _ in self.mapping), self.source_warehouse):
            self._roots.setdefault(location_key(root), root)

    @classmethod
    def of(
        cls,
        name: str,
        source: str,
        target: str,
        paths: Mapping[str, str],
        source_warehouse: str,
        target_warehouse: str,
    ) -> PolicyPaths:
        """The mapping of policy ``name`` from zone ``source`` to zone ``target``: ``paths`` when
        not empty, else ``{source_warehouse: target_warehouse}``."""
        mapping = dict(paths) or {source_warehouse: target_warehouse}
        return cls(name, source, target, tuple(mapping.items()), source_warehouse, bool(paths))

    @property
    def source_roots(self) -> tuple[str, ...]:
        """Every configured directory of the source zone: the source prefixes, then the warehouse
        (each directory once, as first written)."""
        return tuple(self._roots.values())

    def relocate(self, location: str | None) -> str | None:
        """``location`` mapped to the target (see
        :func:`hivemesh.metastore.replay.relocator_for`, which this uses: the longest matching
        prefix; a location under none, and None, are returned as they are). Never raises."""
        return self._relocate(location)

    def source_root_of(self, location: str | None) -> str | None:
        """The configured source directory (:attr:`source_roots`) that ``location`` is or lies
        under, or None."""
        return self._root_of_key(location_key(location)) if location else None

    def _root_of_key(self, key: str) -> str | None:
        for root_key, root in self._roots.items():
            if key_relpath(key, root_key) is not None:
                return root
        return None

    def fix_hint(self, source_location: str) -> str:
        """The ``paths`` entry that would move a table at ``source_location`` off the source: its
        parent directory mapped to a directory of the target zone (and, when the policy has no
        ``paths`` yet, the warehouse mapping it then needs as well)."""
        entry = {parent_location(source_location): f"<a directory of zone {self.target}>"}
        if not self.configured:
            (src, dst), *_ = self.mapping
            entry[src] = dst
        return f"add to policy {self.name}'s paths: {json.dumps(entry)}"

    def refusal(self, what: str, source_location: str | None, target_location: str | None) -> str | None:
        """Why ``what`` (``"table db.t"``, ``"partition db.t/k=v"``, ``"database db"``) at
        ``source_location`` must not be written to the target at ``target_location``, or None
        when the target location is outside the source zone (or either is empty). Never raises: the callers
        raise LocationRefused with this text."""
        if not source_location or not target_location:
            return None
        target_key = location_key(target_location)
        rel = key_relpath(target_key, location_key(source_location))
        if rel is not None:
            if rel == "":
                where = "its own source directory"
            else:
                where = f"inside its source directory {source_location}"
            mapped = self.source_root_of(source_location)
            why = (
                f"mapped by the paths entry {mapped!r}"
                if mapped
                else f"under no source prefix of the policy ({', '.join(map(repr, self.source_roots))})"
            )
            return (
                f"policy {self.name}: {what} is at {source_location}, {why}: its target location "
                f"{target_location} would be {where}, so a drop with deleteData on zone {self.target} "
                f"would delete zone {self.source}'s files; {self.fix_hint(source_location)}"
            )
        root = self._root_of_key(target_key)
        if root is None:
            return None
        return (
            f"policy {self.name}: {what} at {source_location} would be at {target_location} on zone "
            f"{self.target}, inside {root} of zone {self.source}; map it to a directory of zone "
            f"{self.target} outside zone {self.source}'s in the policy's paths"
        )

    def relocate_checked(self, location: str | None, what: str | None = None) -> str | None:
        """:meth:`relocate`, refusing a result inside the source zone (see :meth:`refusal`;
        ``what`` names the object, default ``"a location"``). Raises LocationRefused."""
        target = self.relocate(location)
        why = self.refusal(what or "a location", location, target)
        if why is not None:
            assert location is not None and target is not None
            raise LocationRefused(why, location, target)
        return target

    def check_database(self, database: Database) -> None:
        """Refuse ``database`` when its location or its managed location (``managedLocationUri``,
        Hive 3+: where the target would put the database's managed tables) would lie in the source
        zone once relocated; raises LocationRefused naming the database, the field and the
        ``paths`` entry that fixes it."""
        name = database.name
        self.relocate_checked(database.locationUri, f"database {name}")
        self.relocate_checked(database.managedLocationUri, f"database {name}'s managedLocationUri")

    def problems(self, key: str) -> list[str]:
        """What the configuration alone shows to break the rule: each mapping whose target prefix
        is, or lies under, a source directory (:attr:`source_roots`); ``key`` is the policy's key
        in the file (``replication.policies[0]``). Never raises: the config loader reports them."""
        out: list[str] = []
        for src, dst in self.mapping:
            root = self.source_root_of(dst)
            if root is None:
                continue
            same = location_key(dst) == location_key(root)
            how = "the same directory as" if same else "inside"
            if self.configured:
                out.append(
                    f"{key}.paths: {src!r} -> {dst!r}: the target prefix is {how} {root!r} of the "
                    f"source zone {self.source!r}, so the target would point at (or into) the "
                    f"source's files; map {src!r} to a directory of zone {self.target!r} outside them"
                )
            else:
                suggestion = json.dumps({clean_location(src): f"<a directory of zone {self.target}>"})
                out.append(
                    f"{key}: policy {self.name!r} maps zones.{self.source}.warehouse {src!r} to "
                    f"zones.{self.target}.warehouse {dst!r}, {how} {root!r}: every table would keep "
                    f"zone {self.source!r}'s files as its own; give zone {self.target!r} a warehouse "
                    f"outside it or the policy paths: {suggestion}"
                )
        return out
