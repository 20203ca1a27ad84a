"""Verifying a replication target: what differs between a policy's source objects and the target's.

:func:`compare` walks the databases, functions, tables, table column statistics, partitions and
(for ``data: copy`` policies) data files of a policy's scope on the source and the target
metastore, and returns each difference as a :class:`Difference`: ``missing`` (the source has it,
the target does not), ``extra`` (the target has it in the policy's scope, the source does not) or
``different`` (both have it; ``detail`` names the fields and both values). Repairing is not done
here: ``hivemesh replicate verify --repair`` re-runs a bootstrap with pruning.

Compared, source against target:

- databases: description, parameters, owner name and type, location and managed location
  (``managedLocationUri``; the source's relocated; locations compared in
  :func:`hivemesh.storage.locations.location_key` form);
- functions of the databases: class name, function type, resource URIs, owner name;
- tables: table type, owner, storage descriptor (columns, input/output formats, compressed,
  number of buckets, SerDe library and parameters, bucket and sort columns, location relocated),
  partition keys, view texts and parameters without the bookkeeping keys
  (:data:`BOOKKEEPING_PARAMETERS`, and every key starting with ``impala_``); times, ids, write ids
  and catalog names are not compared;
- table column statistics (``get_table_statistics_req`` for every column): column type and
  statistics data per column. Partition column statistics are *not* compared: one call per
  partition on each side is too costly for tables of many partitions;
- partitions, by name, and each partition's storage descriptor and parameters as a table's; the
  partition list is paged (names at once, partitions :data:`PARTITION_BATCH` at a time), so memory
  stays bounded for tables of 100,000 partitions and more;
- data files (``data: copy`` policies only): the location tree of an unpartitioned table, or of
  each partition of a partitioned one, on both sides (:func:`hivemesh.storage.copy.list_tree`:
  hidden temporaries of running copies are skipped): a file is missing, extra, or different in
  size or (for equal sizes) MD5.

A target database, table or partition whose location (or a database's managed location) lies in
the source zone (is, or is under, the source object's own location or one of the ``source_zone``
directories) is reported as ``different`` too, whatever the relocation says: a drop with
``deleteData`` on the target would delete the source's files.

The target is expected in the policy's Hive form (``format: hive``); the contents of a missing
database or table are not reported one by one (the missing object says it all), nor are data files
of missing partitions.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hive_metastore.ttypes import NoSuchObjectException, StorageDescriptor, TableStatsRequest

from hivemesh.acid.names import SIDE_FILE_SUFFIX, is_side_file
from hivemesh.hive.constants import VIRTUAL_VIEW
from hivemesh.hive.names import make_part_name
from hivemesh.hive.txn_lists import ValidTxnList
from hivemesh.metastore.replay import Relocate
from hivemesh.replication.config import DataMode, PolicyConfig
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.streaming import open_streaming_file_problem
from hivemesh.replication.visibility import TxnSnapshot, target_relpath
from hivemesh.storage.copy import FileState, checksum, list_tree
from hivemesh.storage.locations import location_key, location_within

__all__ = [
    "BOOKKEEPING_PARAMETERS",
    "KINDS",
    "OBJECTS",
    "PARTITION_BATCH",
    "Difference",
    "compare",
    "describe_differences",
    "summarize",
    "to_json",
]

KINDS = ("missing", "extra", "different")
"""The kinds of :class:`Difference`."""

OBJECTS = ("database", "function", "table", "column_statistics", "partition", "file")
"""The objects a :class:`Difference` concerns, in the order :func:`compare` sorts them."""

BOOKKEEPING_PARAMETERS = frozenset(
    {
        "transient_lastDdlTime",
        "numFiles",
        "totalSize",
        "numRows",
        "rawDataSize",
        "numFilesErasureCoded",
        "COLUMN_STATS_ACCURATE",
        "DO_NOT_UPDATE_STATS",
        "last_modified_time",
        "last_modified_by",
    }
)
"""Table and partition parameters each metastore keeps for itself (statistics, DDL times): not
compared. Neither are keys starting with :data:`BOOKKEEPING_PREFIX`."""

BOOKKEEPING_PREFIX = "impala_"

PARTITION_BATCH = 500
"""Partitions fetched per ``get_partitions_by_names`` call."""

MAX_DETAILS = 5
"""Differing fields named in one :class:`Difference` detail (the rest are counted)."""

_VALUE_WIDTH = 60
_ORDER = {name: i for i, name in enumerate(OBJECTS)}


@dataclass(frozen=True)
class Difference:
    """One difference between a source object and the target.

    ``kind``: ``missing`` (on the target), ``extra`` (on the target only) or ``different``.
    ``object``: one of :data:`OBJECTS`. ``name``: ``db``, ``db.table``, ``db.function``,
    ``db.table.column`` (column statistics), ``db.table/k=v`` (partition), or for a file the
    table or partition name and the file's path below its directory (``db.table/k=v/part-0.orc``).
    ``detail``: short human text, e.g. ``parameters['comment']: 'a' != 'b'`` (source value first).
    """

    kind: str
    object: str
    name: str
    detail: str


class _Absent:
    """A dict key or list item one side lacks."""

    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def _is_struct(value: Any) -> bool:
    return hasattr(type(value), "thrift_spec")


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (dict, list, tuple)) and not value)


def _field_diffs(path: str, a: Any, b: Any, out: list[str]) -> None:
    """Append ``"path: a != b"`` for every differing leaf of ``a`` (source) and ``b`` (target):
    Thrift structs field by field, dicts key by key, lists item by item. None and an empty
    container are equal."""
    if _empty(a) and _empty(b):
        return
    if _is_struct(a) and type(a) is type(b):
        for name in vars(a):
            _field_diffs(f"{path}.{name}", getattr(a, name), getattr(b, name, None), out)
    elif isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _field_diffs(f"{path}[{key!r}]", a.get(key, _ABSENT), b.get(key, _ABSENT), out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for i in range(max(len(a), len(b))):
            _field_diffs(
                f"{path}[{i}]", a[i] if i < len(a) else _ABSENT, b[i] if i < len(b) else _ABSENT, out
            )
    elif a != b:
        out.append(f"{path}: {_short(a)} != {_short(b)}")


def describe_differences(pairs: Iterable[tuple[str, Any, Any]]) -> str:
    """The differences of ``(field, source value, target value)`` pairs as one line ("" when
    equal); at most :data:`MAX_DETAILS` fields named."""
    out: list[str] = []
    for path, a, b in pairs:
        _field_diffs(path, a, b, out)
    if len(out) > MAX_DETAILS:
        out = [*out[:MAX_DETAILS], f"and {len(out) - MAX_DETAILS} more"]
    return "; ".join(out)


def _same_fields(source: Any, target: Any, *fields: str) -> list[tuple[str, Any, Any]]:
    """``(field, source value, target value)`` for each of ``fields`` (Thrift attribute names)."""
    return [(f, getattr(source, f), getattr(target, f)) for f in fields]


def _parameters(params: Mapping[str, str] | None) -> dict[str, str]:
    """``params`` without the bookkeeping keys."""
    return {
        k: v
        for k, v in (params or {}).items()
        if k not in BOOKKEEPING_PARAMETERS and not k.startswith(BOOKKEEPING_PREFIX)
    }


def _location(location: str | None) -> str | None:
    return location_key(location) if location else None


def _sd_pairs(
    source: StorageDescriptor | None, target: StorageDescriptor | None, relocate: Relocate
) -> list[tuple[str, Any, Any]]:
    """The compared storage descriptor fields as ``(field, source value, target value)``."""
    s, t = source or StorageDescriptor(), target or StorageDescriptor()
    ss, ts = s.serdeInfo, t.serdeInfo
    return [
        ("sd.cols", s.cols, t.cols),
        ("sd.inputFormat", s.inputFormat, t.inputFormat),
        ("sd.outputFormat", s.outputFormat, t.outputFormat),
        ("sd.compressed", s.compressed, t.compressed),
        ("sd.numBuckets", s.numBuckets, t.numBuckets),
        ("sd.serdeInfo.serializationLib", ss and ss.serializationLib, ts and ts.serializationLib),
        ("sd.serdeInfo.parameters", ss and ss.parameters, ts and ts.parameters),
        ("sd.bucketCols", s.bucketCols, t.bucketCols),
        ("sd.sortCols", s.sortCols, t.sortCols),
        ("sd.location", _location(relocate(s.location)), _location(t.location)),
    ]


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class _Verifier:
    """One :func:`compare` run; differences collected in ``out``."""

    def __init__(
        self,
        source: Any,
        target: Any,
        policy: PolicyConfig,
        relocate: Relocate,
        source_storage: ZoneStorage,
        target_storage: ZoneStorage,
        check_data: bool,
        propagate_drops: bool,
        progress: Callable[[str], None] | None,
        source_zone: Sequence[str] = (),
    ):
        self.source = source
        self.target = target
        self.policy = policy
        self.relocate = relocate
        self.source_storage = source_storage
        self.target_storage = target_storage
        self.check_data = check_data and policy.data == DataMode.COPY
        self.report_extra = propagate_drops
        self.source_zone = tuple(source_zone)
        self.progress = progress
        self.out: list[Difference] = []
        self.txns = TxnSnapshot(lambda: ValidTxnList.from_open_txns(source.get_open_txns()))

    def add(self, kind: str, obj: str, name: str, detail: str) -> None:
        """Record one :class:`Difference` (extra objects only when drops are propagated; extra files always)."""
        if kind == "extra" and not self.report_extra and obj != "file":
            return
        self.out.append(Difference(kind, obj, name, detail))

    def in_source_zone(
        self, obj: str, name: str, source: str | None, target: str | None, field: str = "location"
    ) -> None:
        """Report target location ``target`` (the ``field`` of ``obj`` ``name``) when it lies in
        the source zone: at or under the source object's own ``source``, or a ``source_zone``
        directory."""
        if not target:
            return
        inside = [d for d in (source, *self.source_zone) if d and location_within(target, d)]
        if inside:
            self.add(
                "different",
                obj,
                name,
                f"{field}: {target} is in the source zone (under {inside[0]}): a drop with deleteData "
                "on the target would delete the source's files",
            )

    def status(self, text: str) -> None:
        """Report what is being compared to the ``progress`` callback, if any."""
        if self.progress is not None:
            self.progress(text)

    # ------------------------------------------------------------------ databases
    def run(self) -> None:
        """Compare every database of the policy's scope, then what each holds."""
        src_dbs = sorted(d for d in self.source.get_all_databases() if self.policy.matches_database(d))
        tgt_dbs = {d for d in self.target.get_all_databases() if self.policy.matches_database(d)}
        for name in sorted(tgt_dbs - set(src_dbs)):
            self.add("extra", "database", name, "absent at the source")
        for name in src_dbs:
            self.status(f"database {name}")
            if name not in tgt_dbs:
                self.add("missing", "database", name, "absent at the target")
                continue
            self.database(name)

    def database(self, name: str) -> None:
        """Compare database ``name`` on both sides (it exists on both), then its functions and tables."""
        s, t = self.source.get_database(name), self.target.get_database(name)
        detail = describe_differences(
            [
                *_same_fields(s, t, "description", "parameters", "ownerName", "ownerType"),
                ("locationUri", _location(self.relocate(s.locationUri)), _location(t.locationUri)),
                (
                    "managedLocationUri",
                    _location(self.relocate(s.managedLocationUri)),
                    _location(t.managedLocationUri),
                ),
            ]
        )
        if detail:
            self.add("different", "database", name, detail)
        self.in_source_zone("database", name, s.locationUri, t.locationUri)
        self.in_source_zone(
            "database", name, s.managedLocationUri, t.managedLocationUri, "managedLocationUri"
        )
        self.functions(name)
        src_tables = sorted(n for n in self.source.get_all_tables(name) if self.policy.matches_table(name, n))
        tgt_tables = {n for n in self.target.get_all_tables(name) if self.policy.matches_table(name, n)}
        for table in sorted(tgt_tables - set(src_tables)):
            self.add("extra", "table", f"{name}.{table}", "absent at the source")
        for table in src_tables:
            if table not in tgt_tables:
                self.add("missing", "table", f"{name}.{table}", "absent at the target")
                continue
            self.table(name, table)

    # ------------------------------------------------------------------ functions
    def functions(self, db: str) -> None:
        """Compare the functions of database ``db``."""
        src = set(self.source.get_functions(db, "*") or [])
        tgt = set(self.target.get_functions(db, "*") or [])
        for fn in sorted(tgt - src):
            self.add("extra", "function", f"{db}.{fn}", "absent at the source")
        for fn in sorted(src):
            if fn not in tgt:
                self.add("missing", "function", f"{db}.{fn}", "absent at the target")
                continue
            s, t = self.source.get_function(db, fn), self.target.get_function(db, fn)
            detail = describe_differences(
                _same_fields(s, t, "className", "functionType", "resourceUris", "ownerName")
            )
            if detail:
                self.add("different", "function", f"{db}.{fn}", detail)

    # ------------------------------------------------------------------ tables
    def table(self, db: str, name: str) -> None:
        """Compare table ``db.name`` (present on both sides): metadata, column statistics, then its partitions or files."""
        qualified = f"{db}.{name}"
        self.status(f"table {qualified}")
        s, t = self.source.get_table(db, name), self.target.get_table(db, name)
        detail = describe_differences(
            [
                *_same_fields(s, t, "tableType", "owner"),
                *_sd_pairs(s.sd, t.sd, self.relocate),
                *_same_fields(s, t, "partitionKeys", "viewOriginalText", "viewExpandedText"),
                ("parameters", _parameters(s.parameters), _parameters(t.parameters)),
            ]
        )
        if detail:
            self.add("different", "table", qualified, detail)
        self.in_source_zone("table", qualified, s.sd and s.sd.location, t.sd and t.sd.location)
        if s.tableType == VIRTUAL_VIEW:
            return
        self.column_statistics(db, name, s, t)
        if s.partitionKeys:
            self.partitions(db, name, s)
        elif self.check_data:
            self.files(qualified, s.sd and s.sd.location, t.sd and t.sd.location)

    def column_statistics(self, db: str, name: str, s: Any, t: Any) -> None:
        """Compare the table-level column statistics of ``db.name`` (``s``/``t``: the source's and target's Table)."""
        src, tgt = self._stats(self.source, db, name, s), self._stats(self.target, db, name, t)
        for col in sorted(set(tgt) - set(src)):
            self.add("extra", "column_statistics", f"{db}.{name}.{col}", "absent at the source")
        for col, obj in sorted(src.items()):
            other = tgt.get(col)
            if other is None:
                self.add("missing", "column_statistics", f"{db}.{name}.{col}", "absent at the target")
                continue
            detail = describe_differences(_same_fields(obj, other, "colType", "statsData"))
            if detail:
                self.add("different", "column_statistics", f"{db}.{name}.{col}", detail)

    @staticmethod
    def _stats(hms: Any, db: str, name: str, table: Any) -> dict[str, Any]:
        cols = [c.name for c in (table.sd.cols if table.sd else None) or []]
        if not cols:
            return {}
        try:
            result = hms.get_table_statistics_req(
                TableStatsRequest(dbName=db, tblName=name, colNames=cols, engine="hive")
            )
        except NoSuchObjectException:
            return {}
        return {o.colName.lower(): o for o in result.tableStats or []}

    # ------------------------------------------------------------------ partitions
    def partitions(self, db: str, name: str, table: Any) -> None:
        """Compare the partitions of ``db.name`` by name, then each pair, in pages of 500."""
        qualified = f"{db}.{name}"
        keys = [k.name for k in table.partitionKeys]
        src_names = list(self.source.get_partition_names(db, name, -1) or [])
        tgt_names = set(self.target.get_partition_names(db, name, -1) or [])
        src_set = set(src_names)
        for part in sorted(tgt_names - src_set):
            self.add("extra", "partition", f"{qualified}/{part}", "absent at the source")
        del src_set
        done = 0
        for chunk in _chunks(src_names, PARTITION_BATCH):
            present = [n for n in chunk if n in tgt_names]
            for part in chunk:
                if part not in tgt_names:
                    self.add("missing", "partition", f"{qualified}/{part}", "absent at the target")
            if present:
                src_parts = self.source.get_partitions_by_names(db, name, present) or []
                tgt_parts = {
                    tuple(p.values): p for p in self.target.get_partitions_by_names(db, name, present) or []
                }
                for s in src_parts:
                    t = tgt_parts.get(tuple(s.values))
                    part = make_part_name(keys, s.values)
                    if t is None:  # dropped between the name listing and now
                        self.add("missing", "partition", f"{qualified}/{part}", "absent at the target")
                        continue
                    self.partition(f"{qualified}/{part}", s, t)
            done += len(chunk)
            self.status(f"table {qualified}: {done}/{len(src_names)} partitions")

    def partition(self, name: str, s: Any, t: Any) -> None:
        """Compare one partition present on both sides (``name``: ``db.table/partition name``), then its files."""
        detail = describe_differences(
            [
                *_sd_pairs(s.sd, t.sd, self.relocate),
                ("parameters", _parameters(s.parameters), _parameters(t.parameters)),
            ]
        )
        if detail:
            self.add("different", "partition", name, detail)
        self.in_source_zone("partition", name, s.sd and s.sd.location, t.sd and t.sd.location)
        if self.check_data:
            self.files(name, s.sd and s.sd.location, t.sd and t.sd.location)

    # ------------------------------------------------------------------ data files
    def files(self, name: str, source: str | None, target: str | None) -> None:
        """Compare the file trees of directory locations ``source`` and ``target`` (the target
        object's own location: what readers of the target read)."""
        if not source or not target:
            return
        src_fs, src_root = self.source_storage.resolve(source)
        tgt_fs, tgt_root = self.target_storage.resolve(target)
        src: dict[str, FileState] = {}  # by the target's path (visibility suffixes: see data.py)
        for f in list_tree(src_fs, src_root):
            trel = target_relpath(f.path, self.txns)
            if trel is not None:
                src[trel] = f
        tgt: dict[str, FileState] = {f.path: f for f in list_tree(tgt_fs, tgt_root)}
        for rel in sorted(set(tgt) - set(src)):
            path = posixpath.join(tgt_root, rel)
            self.add("extra", "file", f"{name}/{rel}", f"{path} ({tgt[rel].size} bytes) absent at the source")
        for rel, f in sorted(src.items()):
            src_path, tgt_path = posixpath.join(src_root, f.path), posixpath.join(tgt_root, rel)
            other = tgt.get(rel)
            if is_side_file(rel) and rel[: -len(SIDE_FILE_SUFFIX)] in src:
                continue  # checked with its data file
            if rel + SIDE_FILE_SUFFIX in src:
                # a file of an open streaming batch: the target may hold less (up to an earlier
                # flushed length), never other bytes nor a side file naming more than it holds
                problem = open_streaming_file_problem(src_fs, src_path, tgt_fs, tgt_path)
                if problem is not None:
                    self.add("different" if other else "missing", "file", f"{name}/{rel}", problem)
                continue
            if other is None:
                self.add(
                    "missing", "file", f"{name}/{rel}", f"{tgt_path} absent ({f.size} bytes at the source)"
                )
            elif other.size != f.size:
                self.add("different", "file", f"{name}/{rel}", f"size: {f.size} != {other.size} ({tgt_path})")
            else:
                a, b = checksum(src_fs, src_path), checksum(tgt_fs, tgt_path)
                if a != b:
                    self.add("different", "file", f"{name}/{rel}", f"md5: {a} != {b} ({tgt_path})")


def compare(
    source: Any,
    target: Any,
    policy: PolicyConfig,
    relocate: Relocate,
    source_storage: ZoneStorage,
    target_storage: ZoneStorage,
    *,
    check_data: bool = True,
    propagate_drops: bool | None = None,
    progress: Callable[[str], None] | None = None,
    source_zone: Sequence[str] = (),
) -> list[Difference]:
    """Every difference between the objects of ``policy``'s scope on ``source`` and on ``target``
    (see the module docstring for what is compared; partition column statistics are not).

    ``source``/``target``: HMS clients (the methods of ``ThriftHiveMetastore.Client``).
    ``relocate``: a source location -> the target location it should be (e.g.
    :func:`hivemesh.metastore.replay.relocator`). ``source_storage``/``target_storage``: how each
    zone's locations are read. ``check_data``: compare data files too (only ever for ``data:
    copy`` policies). ``propagate_drops``: whether the target should lack what the source lacks
    (default: the policy's); when False, databases, tables, partitions, functions and column
    statistics only the target has are not reported (extra files still are). ``progress``: called
    with a short status line as the walk goes. ``source_zone``: directories of the source zone
    (:attr:`hivemesh.replication.paths.PolicyPaths.source_roots`); a target location in one of
    them, or in its source object's own location, is a difference.

    Returns the differences sorted by object (:data:`OBJECTS` order) and name; ``[]`` when the
    target matches. Raises the clients' Thrift exceptions (TException) and OSError for storage
    errors.
    """
    verifier = _Verifier(
        source,
        target,
        policy,
        relocate,
        source_storage,
        target_storage,
        check_data,
        policy.propagate_drops if propagate_drops is None else propagate_drops,
        progress,
        source_zone,
    )
    verifier.run()
    return sorted(verifier.out, key=lambda d: (_ORDER.get(d.object, len(_ORDER)), d.name, d.kind, d.detail))


def summarize(diffs: Iterable[Difference]) -> dict[str, int]:
    """Counts of ``diffs`` per kind and object: ``{"missing table": 2, "different file": 1}``
    (only the pairs that occur, in :data:`OBJECTS` then :data:`KINDS` order)."""
    counts: dict[tuple[int, int, str, str], int] = {}
    for d in diffs:
        key = (
            _ORDER.get(d.object, len(_ORDER)),
            KINDS.index(d.kind) if d.kind in KINDS else len(KINDS),
            d.kind,
            d.object,
        )
        counts[key] = counts.get(key, 0) + 1
    return {f"{kind} {obj}": n for (_, _, kind, obj), n in sorted(counts.items())}


def to_json(diffs: Iterable[Difference]) -> list[dict[str, str]]:
    """``diffs`` as JSON-able dicts: ``[{"kind", "object", "name", "detail"}, ...]``."""
    return [asdict(d) for d in diffs]
