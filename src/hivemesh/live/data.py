"""Data before metadata: the directories a live command makes visible, and their copy into a zone.

A write that makes files visible names their directories in its command (``data``, zone-neutral
paths relative to the rule's root; :func:`data_dirs` finds them when the write is proposed):

- adding or altering partitions (``add_partition*``, ``alter_partition*``): each partition's
  directory (its location, or the table's location and the partition name when it has none);
- creating or altering an unpartitioned table (``create_table*``, ``alter_table*``, not views
  nor renames, where each zone's metastore moves its own directory): the table's directory (a
  CTAS or an external table over existing files with the ``create_table``; Spark's INSERT into
  such a table with the ``alter_table`` of its size, made only when the session sets
  ``spark.sql.statistics.size.autoUpdate.enabled=true``).

Every zone but the proposing one makes each directory equal to the proposing zone's (files copied
by content, files the proposing zone no longer has removed: :class:`hivemesh.replication.data.DataMover`)
before it applies the command, so a reader in any zone never sees metadata pointing at files it
lacks. The proposing zone applies at once: its writers put the files there.

ACID writes make files visible by committing their txn, not by a metastore write: a live proxy
that sees a txn allocate write ids for a live table ships, when the client commits it, the
directories holding those write ids (:func:`acid_write_dirs`) to every zone in a
:data:`~hivemesh.live.commands.COPY_DATA` command, and sends the commit on to the ``acid_owner``
zone only once every zone applied it.

Not covered: ``append_partition*`` (the metastore creates an empty directory in each zone),
``add_partitions_pspec``, and files written without any metastore call (Spark's INSERT into an
unpartitioned table without that setting, or into an existing partition by its default writer):
they stay in the writing zone until a write naming their directory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pyarrow.fs as pafs
from hive_metastore.ttypes import Partition, Table

from hivemesh.acid.names import BASE, parse_acid_dir
from hivemesh.federation.rewrite import Collector, method_plan, rename_args
from hivemesh.hive.hms_methods import positional_args
from hivemesh.hive.names import make_part_name
from hivemesh.live.commands import NEUTRAL, Command, structs
from hivemesh.live.config import LiveFile, LiveRule, neutral, to_zone
from hivemesh.replication.data import DataMover, SyncResult, ZoneStorage
from hivemesh.replication.state import ReplicationStore

__all__ = ["DataCopier", "acid_write_dirs", "data_dirs"]

log = logging.getLogger(__name__)

_VIEWS = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})
_PARTITION_DATA = ("add_partition", "alter_partition")
_TABLE_DATA = ("create_table", "alter_table")


def _rel(location: str | None) -> str | None:
    """The relative path of a pinned (``hivemesh-live:``) location, else None."""
    if location and location.startswith(NEUTRAL):
        return location[len(NEUTRAL) :]
    return None


def data_dirs(
    method: str,
    args: Any,
    rule: LiveRule,
    zone: str,
    table_of: Callable[[str, str], Table | None],
) -> tuple[str, ...]:
    """The directories (relative to the rule's root) whose files write ``method`` makes visible
    (see the module doc), from its pinned ``<method>_args`` struct ``args``; ``table_of(db,
    table)``: the table as ``zone``'s metastore has it (None when unknown), for partitions
    without a location. Sorted, without duplicates."""
    out: set[str] = set()
    if method.startswith(_PARTITION_DATA):
        tables: dict[tuple[str, str], tuple[str, list[str]] | None] = {}  # (dir, keys), read once
        for p in structs(args):
            if not isinstance(p, Partition):
                continue
            rel = _rel(p.sd.location if p.sd is not None else None)
            if rel is None and p.dbName and p.tableName and p.values:
                key = (p.dbName.lower(), p.tableName.lower())
                if key not in tables:
                    t = table_of(*key)
                    base = _table_dir(t, rule, zone)
                    tables[key] = (
                        None if t is None or base is None else (base, [k.name for k in t.partitionKeys or []])
                    )
                known = tables[key]
                if known is not None:
                    rel = _join(known[0], make_part_name(known[1], p.values))
            if rel is not None:
                out.add(rel)
    elif method.startswith(_TABLE_DATA):
        col = Collector()
        rename_args(method_plan(method), positional_args(args), col)
        if len({t.lower() for _, t in col.tables if t}) > 1:
            return ()  # a rename: each zone's metastore moves its own directory
        for t in structs(args):
            if (
                isinstance(t, Table)
                and not t.partitionKeys
                and t.tableType not in _VIEWS
                and t.sd is not None
            ):
                rel = _rel(t.sd.location)
                if rel is not None:
                    out.add(rel)
    return tuple(sorted(out))


def acid_write_dirs(
    storage: ZoneStorage, table: Table, write_ids: set[int], rule: LiveRule, zone: str
) -> tuple[str, ...]:
    """The directories (relative to the rule's root) of ``table`` (``zone``'s definition) that hold
    rows of ``write_ids``: each delta and delete delta whose write-id range holds one of them, and
    each base of one, under the table's directory or under every partition directory (``k=v``
    levels walked down to the table's number of partition keys). Sorted; empty when the table's
    location is outside the rule's path or missing. Raises OSError from the storage."""
    base = _table_dir(table, rule, zone)
    if base is None or table.sd is None:
        return ()
    fs, root = storage.resolve(table.sd.location)
    root = root.rstrip("/")
    dirs = [root]
    for _ in table.partitionKeys or ():
        dirs = [
            info.path
            for d in dirs
            for info in fs.get_file_info(pafs.FileSelector(d, allow_not_found=True))
            if info.type == pafs.FileType.Directory and "=" in info.base_name
        ]
    out: list[str] = []
    for d in dirs:
        for info in fs.get_file_info(pafs.FileSelector(d, allow_not_found=True)):
            acid = parse_acid_dir(info.base_name) if info.type == pafs.FileType.Directory else None
            if acid is None:
                continue
            if acid.kind == BASE:
                hit = acid.max_write_id in write_ids
            else:
                hit = any(acid.min_write_id <= w <= acid.max_write_id for w in write_ids)
            if hit:
                out.append(_join(base, info.path[len(root) :].lstrip("/")))
    return tuple(sorted(out))


def _table_dir(table: Table | None, rule: LiveRule, zone: str) -> str | None:
    if table is None or table.sd is None or not table.sd.location:
        return None
    return neutral(rule, zone, table.sd.location)


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base else rel


class DataCopier:
    """Copies a command's directories from its proposing zone into ``zone`` (see the module doc),
    with a :class:`~hivemesh.replication.data.DataMover` per proposing zone whose file ledger is
    in ``store`` (policy ``live-<from>-to-<zone>``). ``threads``: files copied at once."""

    def __init__(self, cfg: LiveFile, zone: str, store: ReplicationStore, threads: int = 8) -> None:
        self.cfg = cfg
        self.zone = zone
        self.store = store
        self.threads = threads
        self._movers: dict[str, DataMover] = {}
        self.copying: str | None = None
        """The directory being copied now (for status), else None."""

    def _mover(self, origin: str) -> DataMover:
        mover = self._movers.get(origin)
        if mover is None:
            mover = self._movers[origin] = DataMover(
                f"live-{origin}-to-{self.zone}",
                self.store,
                ZoneStorage(self.cfg.zones[origin].s3),
                ZoneStorage(self.cfg.zones[self.zone].s3),
                threads=self.threads,
            )
        return mover

    def copy(self, command: Command, rule: LiveRule) -> SyncResult | None:
        """Make each of ``command.data`` in this zone equal to the proposing zone's (None: nothing
        to do, the command was proposed here or names no directory). A directory the proposing
        zone no longer has is left alone: a later command removed it there, and removes it here
        when applied. Raises OSError naming the file (a rerun finishes the work)."""
        if command.zone == self.zone or not command.data:
            return None
        mover = self._mover(command.zone)
        pairs: list[tuple[str, str]] = []
        for rel in command.data:
            src = to_zone(rule, command.zone, rel)
            fs, path = mover.source.resolve(src)
            if fs.get_file_info(path).type == pafs.FileType.NotFound:
                log.info("zone %s: %s is gone in zone %s; not copied", self.zone, src, command.zone)
                continue
            pairs.append((src, to_zone(rule, self.zone, rel)))
        if not pairs:
            return None
        self.copying = pairs[0][0] if len(pairs) == 1 else f"{pairs[0][0]} and {len(pairs) - 1} more"
        try:
            result = mover.sync_many(pairs, delete_extra=True)
        finally:
            self.copying = None
        log.info(
            "zone %s: copied %d file(s), %d bytes of %d director%s from zone %s",
            self.zone, result.copied, result.bytes_copied, len(pairs), "y" if len(pairs) == 1 else "ies", command.zone,
        )  # fmt: skip
        return result

    def close(self) -> None:
        """Stop the copy threads."""
        for m in self._movers.values():
            m.close()
