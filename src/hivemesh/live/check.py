"""``hivemesh live check``: is every zone's catalog the same for the objects of the live rules?

:func:`check` reads, for each rule, the databases, functions, tables, table column statistics,
partitions and partition column statistics of the rule's scope from every zone's own metastore
(the ``zones:`` metastores, not the live proxies), makes each object a **canonical dump** and
compares the zones' dumps object by object. Each object that is not the same in every zone is a
:class:`Divergence`: the zones that lack it, the zones grouped by equal definitions, what differs
(:func:`hivemesh.replication.verify.describe_differences` between the groups) and per-zone
problems.

Canonical dump: a Thrift struct becomes a dict of its fields (nested structs alike, lists in
order, sets sorted), without the excluded fields below and without unset or empty fields (a field
newer Hive versions added counts as its default where a metastore leaves it unset:
:data:`FIELD_DEFAULTS`).
Locations (``locationUri``, ``managedLocationUri`` of databases, ``sd.location`` of tables and
partitions) become zone-neutral ``hivemesh-live:<relpath>`` paths relative to the zone's path of
the rule (``paths``), in :func:`hivemesh.storage.locations.location_key` form; a location that is
not under that path is a difference in itself (a per-zone problem, even when the zones' values are
equal): another zone could not map it, and a drop with ``deleteData`` would delete files that are
not the zone's own. Object names are the metastores' (lower case); a partition is named by its
table's keys and its values (``db.table/ds=2026-11-01``).

What is not compared, and why:

- Keys (``Database.name``, ``Table.tableName``/``dbName``, ``Partition.values``/``dbName``/
  ``tableName``, ``Function.functionName``/``dbName``, ``ColumnStatisticsObj.colName``): they are
  the object's name, by which zones are matched.
- ``createTime`` of databases, tables, partitions and functions: Apache Hive's ``create_table``
  and ``add_partition(s)`` stamp the metastore's own clock over the proposer's pin (hivemesh's
  metastore does the same), so each zone has its own; for databases and functions it is left out
  too, so zones running different metastores do not differ by what their metastore does on create.
  A creation time is no part of a definition a reader uses. (``transient_lastDdlTime``, which
  readers use for caching, is pinned by the proposer and **is** compared.)
- ``lastAccessTime`` of tables and partitions: updated by reads, which stay in each zone.
- Ids: ``Table.id`` (the zone's TBL_ID), ``Table.txnId``, and ``writeId``/``isStatsCompliant`` of
  tables and partitions: transaction state of the zone's own metastore (transactional tables follow
  by ACID replication, with their own write ids per zone).
- Catalog names (``catalogName``, ``catName``): each zone's metastore answers in its default
  catalog, whose name is the zone's configuration; live rules name databases, not catalogs.
- ``privileges``: grants are not live writes (grant and revoke are not proposed) and are returned
  only on request.
- ``Table.colStats``, ``fileMetadata``, ``dictionary`` (tables and partitions): filled only when a
  request asks for them; column statistics are compared as objects of their own.
- ``Table.accessType``, ``requiredReadCapabilities``, ``requiredWriteCapabilities``: computed per
  caller by Hive 4's metastore transformer from the client's capabilities, not stored.
- ``Table.creationMetadata`` (materialized views): the valid write-id lists of the zone's own
  transactions.
- Table and partition parameters ``numFiles``, ``totalSize`` and ``numFilesErasureCoded``
  (:data:`ZONE_PARAMETERS`): each zone's metastore sets them from a listing of its own files when
  the object is created or altered (Hive's fast stats; hivemesh's
  :mod:`hivemesh.metastore.fast_stats`), so they depend on when the zone's copy of the data was
  there, not on the agreed command. Every other parameter is compared, ``numRows``,
  ``rawDataSize`` and ``COLUMN_STATS_ACCURATE`` included: clients send those, and a zone whose
  statistics differ answers queries differently.
- Column statistics are compared as ``get_table_statistics_req`` and
  ``get_partitions_statistics_req`` return them (column type and statistics data per column);
  ``ColumnStatisticsDesc.lastAnalyzed`` is not among what those return.

Data files (``data=True``, ``live check --data``): the files below the directory of each
unpartitioned table and each partition, by path relative to it and size (``checksums=True``: and
MD5), hidden temporaries left out, compared as objects ``table_data`` and ``partition_data``
among the zones holding the table or partition (a listing that fails is a difference naming the
error). Not compared at all: constraints (primary, foreign, unique, not null, default, check), and
objects outside every rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hive_metastore.ttypes import NoSuchObjectException, PartitionsStatsRequest, TableStatsRequest
from thrift.Thrift import TApplicationException, TException

from hivemesh.client.metastore import TRANSPORT_ERRORS, MetastoreClient
from hivemesh.federation.compat import FALLBACKS
from hivemesh.hive.names import make_part_name
from hivemesh.live.commands import NEUTRAL
from hivemesh.live.config import LiveFile, LiveRule, neutral
from hivemesh.live.errors import LiveError
from hivemesh.replication.data import ZoneStorage
from hivemesh.replication.verify import PARTITION_BATCH, describe_differences
from hivemesh.storage.copy import checksum, list_tree
from hivemesh.storage.locations import location_key

__all__ = [
    "EXCLUDED_FIELDS",
    "FIELD_DEFAULTS",
    "OBJECTS",
    "ZONE_PARAMETERS",
    "CheckReport",
    "Divergence",
    "ZoneUnavailable",
    "check",
    "open_zones",
    "call_compat",
    "read_zone",
]

OBJECTS = (
    "database",
    "function",
    "table",
    "table_column_statistics",
    "partition",
    "partition_column_statistics",
    "table_data",
    "partition_data",
)
"""The kinds of objects compared, in the order a report lists them (the ``*_data`` ones only with
``data=True``: the files of unpartitioned tables and of partitions)."""

_KEY = "the object's name, by which zones are matched"
_CREATE = "stamped by a metastore's own clock on create (Hive's create_table, add_partition)"
_CATALOG = "the zone's default catalog, a zone setting; rules name databases, not catalogs"
_GRANTS = "grants are not live writes, and are returned only on request"
_TXN = "transaction state of the zone's own metastore (ACID tables follow by ACID replication)"
_ON_REQUEST = "filled only when a request asks for it"
_CAPS = "computed per caller from its capabilities by Hive 4's transformer, not stored"
_STORED_PER_ZONE = {
    "createTime": _CREATE,
    "lastAccessTime": "updated by reads, which stay in each zone",
    "catName": _CATALOG,
    "privileges": _GRANTS,
    "writeId": _TXN,
    "isStatsCompliant": _TXN,
    "colStats": _ON_REQUEST,
    "fileMetadata": _ON_REQUEST,
}
"""The fields tables and partitions both leave out."""
EXCLUDED_FIELDS: Mapping[str, Mapping[str, str]] = {
    "Database": {
        "name": _KEY,
        "createTime": _CREATE,
        "catalogName": _CATALOG,
        "privileges": _GRANTS,
    },
    "Table": {
        "tableName": _KEY,
        "dbName": _KEY,
        **_STORED_PER_ZONE,
        "dictionary": _ON_REQUEST,
        "txnId": _TXN,
        "id": "the zone's TBL_ID",
        "creationMetadata": _TXN,
        "accessType": _CAPS,
        "requiredReadCapabilities": _CAPS,
        "requiredWriteCapabilities": _CAPS,
    },
    "Partition": {"values": _KEY, "dbName": _KEY, "tableName": _KEY, **_STORED_PER_ZONE},
    "Function": {"functionName": _KEY, "dbName": _KEY, "createTime": _CREATE, "catName": _CATALOG},
    "ColumnStatisticsObj": {"colName": _KEY},
}
"""Per Thrift struct, the fields left out of the canonical dump and why (see the module doc)."""

FIELD_DEFAULTS: Mapping[tuple[str, str], Any] = {
    ("Database", "type"): 1,  # DatabaseType.NATIVE
}
"""Fields newer Hive versions added, compared as their default where an older metastore leaves them
unset (Hive 2.3 and 3.1 have no ``Database.type``: every database there is NATIVE)."""

ZONE_PARAMETERS = frozenset({"numFiles", "totalSize", "numFilesErasureCoded"})
"""Table and partition parameters each zone's metastore computes from its own files: not compared."""

_LOCATION_FIELDS = ("location", "locationUri", "managedLocationUri")


class ZoneUnavailable(LiveError):
    """A zone's metastore could not be reached or failed to answer: the check cannot run. The
    message names the zone and its metastore."""


@dataclass(frozen=True)
class Divergence:
    """One object that is not the same in every zone.

    ``rule``: the live rule; ``object``: one of :data:`OBJECTS`; ``name``: ``db``, ``db.fn``,
    ``db.table``, ``db.table/k=v``, or for column statistics the table or partition name and the
    column (``db.table.col``, ``db.table/k=v.col``). ``absent``: the zones without it;
    ``variants``: the zones that have it, grouped by equal canonical dumps (largest group first);
    ``detail``: what differs between the first group and each other one (``"west vs east:
    sd['cols'][2]: ... != ..."``); ``problems``: per zone, a location outside the zone's rule path.
    Column statistics and partitions are only compared among the zones that hold their table.
    """

    rule: str
    object: str
    name: str
    absent: tuple[str, ...] = ()
    variants: tuple[tuple[str, ...], ...] = ()
    detail: str = ""
    problems: Mapping[str, str] = field(default_factory=dict)

    @property
    def table(self) -> str | None:
        """``db.table`` of a table, partition or column statistics divergence (None otherwise)."""
        if self.object in ("database", "function"):
            return None
        head = self.name.split("/", 1)[0]
        if self.object == "table_column_statistics":
            head = head.rsplit(".", 1)[0]
        return head

    @property
    def database(self) -> str:
        """The database the object belongs to."""
        return self.name.split("/", 1)[0].split(".", 1)[0]

    def zones(self) -> list[str]:
        """The zones that differ from the largest group (or lack the object, or have a problem)."""
        rest = [z for group in self.variants[1:] for z in group]
        return sorted({*self.absent, *rest, *self.problems})


@dataclass
class CheckReport:
    """The result of :func:`check`: the zones compared, the rules, the divergences (sorted by rule,
    :data:`OBJECTS` order and name), how many objects were compared per kind, and, when the
    command log could be read, each zone's applied position and the log's head (differences
    while a zone is behind may only be commands it has not applied yet)."""

    zones: list[str]
    rules: list[str]
    divergences: list[Divergence]
    compared: dict[str, int]
    positions: dict[str, int] | None = None
    head: int | None = None

    @property
    def consistent(self) -> bool:
        """True when no object differs."""
        return not self.divergences

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-able data: ``{"consistent", "zones", "rules", "compared",
        "positions", "head", "divergences": [{"rule", "object", "name", "absent", "variants",
        "detail", "problems"}, ...]}``."""
        out: list[dict[str, Any]] = []
        for d in self.divergences:
            item = asdict(d)
            item["absent"] = list(d.absent)
            item["variants"] = [list(g) for g in d.variants]
            item["problems"] = dict(d.problems)
            out.append(item)
        return {
            "consistent": self.consistent,
            "zones": self.zones,
            "rules": self.rules,
            "compared": self.compared,
            "positions": self.positions,
            "head": self.head,
            "divergences": out,
        }


# ------------------------------------------------------------------------------------ dumps
def _canonical(value: Any, locate: Callable[[str], str], struct: str = "") -> Any:
    """``value`` as plain data (see the module doc); ``locate`` maps a location field's value."""
    if hasattr(type(value), "thrift_spec"):
        name = type(value).__name__
        skip = EXCLUDED_FIELDS.get(name, {})
        out: dict[str, Any] = {}
        for spec in type(value).thrift_spec or ():
            if spec is None or spec[2] in skip:
                continue
            v = getattr(value, spec[2], None)
            if v is None:
                v = FIELD_DEFAULTS.get((name, spec[2]))
            if spec[2] in _LOCATION_FIELDS and isinstance(v, str) and v:
                out[spec[2]] = locate(v)
                continue
            if spec[2] == "parameters" and name in ("Table", "Partition") and isinstance(v, dict):
                v = {k: p for k, p in v.items() if k not in ZONE_PARAMETERS}
            c = _canonical(v, locate, name)
            if c is not None and c != [] and c != {}:
                out[spec[2]] = c
        return out
    if isinstance(value, list | tuple):
        return [_canonical(v, locate, struct) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v, locate, struct) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: _canonical(v, locate, struct) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return value


_MISSING: weakref.WeakKeyDictionary[MetastoreClient, set[str]] = weakref.WeakKeyDictionary()
"""Per client: the calls its metastore lacks (Hive 4.2 dropped ``get_table``), sent in their
equivalent form after the first refusal."""


def call_compat(client: MetastoreClient, method: str, *args: Any, idempotent: bool = False) -> Any:
    """HMS ``method`` on ``client``; when the metastore lacks it (Hive 4.2 has no ``get_table`` nor
    ``get_table_objects_by_name``; Hive 2.3 no request forms), the call of the same meaning
    (:data:`hivemesh.federation.compat.FALLBACKS`), its answer converted back. Raises what
    :meth:`MetastoreClient.call` raises."""
    missing = _MISSING.setdefault(client, set())
    fallback = FALLBACKS.get(method)
    if fallback is not None and method in missing:
        other, args_of, wrap = fallback
        return wrap(client.call(other, *args_of(list(args)), idempotent=idempotent))
    try:
        return client.call(method, *args, idempotent=idempotent)
    except TApplicationException as e:
        if fallback is None or e.type != TApplicationException.UNKNOWN_METHOD:
            raise
        missing.add(method)
    return call_compat(client, method, *args, idempotent=idempotent)


def read_zone(zone: str, client: MetastoreClient, method: str, *args: Any) -> Any:
    """HMS read ``method`` on zone ``zone``'s metastore (retried once after a transport error).
    Raises NoSuchObjectException as the metastore does; any other failure as ZoneUnavailable
    naming the zone, its metastore and the call."""
    try:
        return call_compat(client, method, *args, idempotent=True)
    except NoSuchObjectException:
        raise
    except (*TRANSPORT_ERRORS, TException) as e:
        where = ",".join(f"{h}:{p}" for h, p in client.endpoints)
        raise ZoneUnavailable(
            f"zone {zone}: metastore {where}: {method} failed: {type(e).__name__}: "
            f"{getattr(e, 'message', None) or e}"
        ) from e


class _ZoneReader:
    """One zone's metastore, read for one rule: canonical dumps, with location problems noted."""

    def __init__(self, zone: str, client: MetastoreClient, rule: LiveRule) -> None:
        self.zone = zone
        self.client = client
        self.rule = rule
        self.problems: dict[tuple[str, str], str] = {}

    def call(self, method: str, *args: Any) -> Any:
        """HMS read ``method`` (see :func:`read_zone`)."""
        return read_zone(self.zone, self.client, method, *args)

    def get(self, method: str, *args: Any) -> Any:
        """HMS read ``method``; None when the object is gone (dropped since it was listed)."""
        try:
            return self.call(method, *args)
        except NoSuchObjectException:
            return None

    def dump(self, kind: str, name: str, obj: Any) -> Any:
        """The canonical dump of ``obj`` (object ``kind`` ``name``), noting locations outside the
        zone's rule path."""

        def locate(location: str) -> str:
            """``location`` as a ``hivemesh-live:`` path; outside the rule path: kept, and noted as a problem."""
            rel = neutral(self.rule, self.zone, location)
            if rel is None:
                self.problems[(kind, name)] = (
                    f"location {location} is outside rule {self.rule.name!r}'s path for zone {self.zone} "
                    f"({self.rule.paths[self.zone]})"
                )
                return f"outside the rule's path: {location_key(location)}"
            return NEUTRAL + rel

        return _canonical(obj, locate)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class _Comparison:
    """One rule compared across zones; divergences collected in ``out``."""

    def __init__(
        self,
        rule: LiveRule,
        readers: dict[str, _ZoneReader],
        storages: Mapping[str, ZoneStorage] | None = None,
        checksums: bool = False,
    ) -> None:
        self.rule = rule
        self.readers = readers
        self.storages = storages  # None: data files are not compared
        self.checksums = checksums
        self.out: list[Divergence] = []
        self.compared: dict[str, int] = dict.fromkeys(OBJECTS, 0)

    def compare(self, kind: str, name: str, dumps: Mapping[str, Any], among: Iterable[str]) -> None:
        """Compare object ``kind`` ``name`` given each holding zone's dump, among zones ``among``."""
        self.compared[kind] += 1
        zones = sorted(among)
        groups: list[tuple[Any, list[str]]] = []
        for z in zones:
            if z not in dumps:
                continue
            for value, members in groups:
                if value == dumps[z]:
                    members.append(z)
                    break
            else:
                groups.append((dumps[z], [z]))
        groups.sort(key=lambda g: -len(g[1]))
        absent = tuple(z for z in zones if z not in dumps)
        problems = {z: p for z in zones if (p := self.readers[z].problems.get((kind, name)))}
        if not absent and len(groups) <= 1 and not problems:
            return
        details = []
        for value, members in groups[1:]:
            base, first = groups[0]
            keys = (
                sorted(set(base) | set(value)) if isinstance(base, dict) and isinstance(value, dict) else []
            )
            pairs = [(k, base.get(k), value.get(k)) for k in keys] if keys else [("value", base, value)]
            details.append(f"{first[0]} vs {members[0]}: {describe_differences(pairs)}")
        self.out.append(
            Divergence(
                self.rule.name,
                kind,
                name,
                absent,
                tuple(tuple(m) for _, m in groups),
                "; ".join(details),
                problems,
            )
        )

    def compare_data(self, kind: str, name: str, locations: Mapping[str, str]) -> None:
        """Compare the files below each zone's directory of object ``name`` (zone -> location)."""
        if self.storages is None:
            return
        dumps: dict[str, Any] = {}
        for z, location in locations.items():
            try:
                fs, root = self.storages[z].resolve(location)
                files = {f.path: f.size for f in list_tree(fs, root)}
                if self.checksums:
                    base = root.rstrip("/")
                    dumps[z] = {p: [n, checksum(fs, f"{base}/{p}")] for p, n in files.items()}
                else:
                    dumps[z] = files
            except (OSError, ValueError) as e:
                dumps[z] = {"listing failed": f"{type(e).__name__}: {e}"}
        self.compare(kind, name, dumps, list(locations))

    def names(self, zones: Iterable[str], fn: Callable[[_ZoneReader], Iterable[str]]) -> dict[str, set[str]]:
        """Per zone of ``zones``, the names ``fn`` lists there."""
        return {z: set(fn(self.readers[z])) for z in zones}

    def run(self) -> None:
        """Compare every database of the rule's scope, then what each holds."""
        dbs = self.names(
            self.readers,
            lambda r: (d.lower() for d in r.call("get_all_databases") if self.rule.matches_database(d)),
        )
        for db in sorted(set().union(*dbs.values())):
            found = {z: self.readers[z].get("get_database", db) for z, names in dbs.items() if db in names}
            dumps = {z: self.readers[z].dump("database", db, v) for z, v in found.items() if v is not None}
            self.compare("database", db, dumps, self.readers)
            self.database(db, list(dumps))

    def database(self, db: str, zones: list[str]) -> None:
        """Compare the functions and tables of database ``db`` among the ``zones`` holding it."""
        functions = self.names(zones, lambda r: r.call("get_functions", db, "*") or [])
        for fn in sorted(set().union(*functions.values())):
            got = {z: self.readers[z].get("get_function", db, fn) for z in zones if fn in functions[z]}
            dumps = {z: self.readers[z].dump("function", f"{db}.{fn}", v) for z, v in got.items() if v}
            self.compare("function", f"{db}.{fn}", dumps, zones)
        tables = self.names(
            zones,
            lambda r: (
                t.lower() for t in r.call("get_all_tables", db) or [] if self.rule.matches_table(db, t)
            ),
        )
        for t in sorted(set().union(*tables.values())):
            holding = [z for z in zones if t in tables[z]]
            found = {z: v for z in holding if (v := self.readers[z].get("get_table", db, t)) is not None}
            name = f"{db}.{t}"
            self.compare(
                "table", name, {z: self.readers[z].dump("table", name, v) for z, v in found.items()}, zones
            )
            self.table(db, t, found)

    def table(self, db: str, t: str, found: dict[str, Any]) -> None:
        """Compare the column statistics and partitions of table ``db.t`` (``found``: its Table
        per zone holding it)."""
        name = f"{db}.{t}"
        zones = list(found)
        cols = sorted(
            {c.name.lower() for tbl in found.values() for c in (tbl.sd.cols if tbl.sd else None) or []}
        )
        if cols:
            stats: dict[str, dict[str, Any]] = {}
            for z in zones:
                try:
                    result = self.readers[z].call(
                        "get_table_statistics_req",
                        TableStatsRequest(dbName=db, tblName=t, colNames=cols, engine="hive"),
                    )
                    objs = result.tableStats or []
                except NoSuchObjectException:
                    objs = []
                stats[z] = {o.colName.lower(): self.readers[z].dump("", "", o) for o in objs}
            for col in sorted(set().union(*(s.keys() for s in stats.values()))):
                dumps = {z: s[col] for z, s in stats.items() if col in s}
                self.compare("table_column_statistics", f"{name}.{col}", dumps, zones)
        keys = {z: [k.name for k in tbl.partitionKeys or []] for z, tbl in found.items()}
        flat = {z: tbl.sd.location for z, tbl in found.items() if not keys[z] and tbl.sd and tbl.sd.location}
        if flat and not any(tbl.tableType in ("VIRTUAL_VIEW", "MATERIALIZED_VIEW") for tbl in found.values()):
            self.compare_data("table_data", name, flat)
        zones = [z for z in zones if keys[z]]
        if zones:
            self.partitions(db, t, zones, keys, cols)

    def partitions(
        self, db: str, t: str, zones: list[str], keys: dict[str, list[str]], cols: list[str]
    ) -> None:
        """Compare the partitions of ``db.t`` and their column statistics among ``zones``, in pages
        of :data:`hivemesh.replication.verify.PARTITION_BATCH`."""
        table = f"{db}.{t}"
        names = self.names(zones, lambda r: r.call("get_partition_names", db, t, -1) or [])
        for chunk in _chunks(sorted(set().union(*names.values())), PARTITION_BATCH):
            parts: dict[str, dict[str, Any]] = {}
            stats: dict[str, dict[str, dict[str, Any]]] = {}
            locations: dict[str, dict[str, str]] = {}  # partition -> zone -> its directory
            for z in zones:
                r = self.readers[z]
                present = [n for n in chunk if n in names[z]]
                parts[z], stats[z] = {}, {}
                if not present:
                    continue
                for p in r.call("get_partitions_by_names", db, t, present) or []:
                    pname = make_part_name(keys[z], p.values)
                    parts[z][pname] = r.dump("partition", f"{table}/{pname}", p)
                    if p.sd is not None and p.sd.location:
                        locations.setdefault(pname, {})[z] = p.sd.location
                if cols:
                    req = PartitionsStatsRequest(
                        dbName=db, tblName=t, colNames=cols, partNames=present, engine="hive"
                    )
                    try:
                        result = r.call("get_partitions_statistics_req", req).partStats or {}
                    except NoSuchObjectException:
                        result = {}
                    for pname, objs in result.items():
                        stats[z][pname] = {o.colName.lower(): r.dump("", "", o) for o in objs or []}
            for pname in sorted(set().union(*(p.keys() for p in parts.values()))):
                full = f"{table}/{pname}"
                self.compare("partition", full, {z: p[pname] for z, p in parts.items() if pname in p}, zones)
                holding = [z for z in zones if pname in parts[z]]
                per_col = {z: stats[z].get(pname, {}) for z in holding}
                for col in sorted(set().union(*(s.keys() for s in per_col.values()))):
                    dumps = {z: s[col] for z, s in per_col.items() if col in s}
                    self.compare("partition_column_statistics", f"{full}.{col}", dumps, holding)
                if pname in locations:
                    self.compare_data("partition_data", full, locations[pname])


def open_zones(cfg: LiveFile, *, timeout_s: float = 60.0) -> dict[str, MetastoreClient]:
    """A connected client of every zone's own metastore (the ``zones:`` entries), by zone name.
    Raises ZoneUnavailable naming the first zone that cannot be reached (the others closed)."""
    clients: dict[str, MetastoreClient] = {}
    for zone in sorted(cfg.zones):
        z = cfg.zones[zone]
        try:
            clients[zone] = MetastoreClient(
                z.metastore,
                timeout_s=timeout_s,
                retries=1,
                tls=z.tls_context(),
                kerberos=z.kerberos_initiator(),
            )
        except Exception as e:
            for c in clients.values():
                c.close()
            raise ZoneUnavailable(
                f"zone {zone}: metastore {z.metastore} unreachable: {type(e).__name__}: {e}"
            ) from e
    return clients


def check(
    cfg: LiveFile,
    clients: Mapping[str, MetastoreClient],
    *,
    rule: str | None = None,
    positions: dict[str, int] | None = None,
    head: int | None = None,
    data: bool = False,
    checksums: bool = False,
) -> CheckReport:
    """Compare every zone's objects of the live rules (only rule ``rule`` when given) and return
    the :class:`CheckReport` (see the module doc for what is compared). ``clients``: one per zone
    of ``cfg.zones`` (:func:`open_zones`); ``positions``/``head``: the zones' log positions and
    the log's head, copied into the report; ``data``: compare the data files too (by size, and
    with ``checksums`` by MD5, read from each zone's storage with its ``s3`` settings).

    Raises ValueError (``rule`` names no rule; a zone without a client) and ZoneUnavailable (a
    zone's metastore failed to answer; the message names the zone).
    """
    rules = [r for r in cfg.live.rules if rule is None or r.name == rule]
    if rule is not None and not rules:
        known = ", ".join(r.name for r in cfg.live.rules) or "none"
        raise ValueError(f"no live rule named {rule!r} (rules: {known})")
    missing = sorted(set(cfg.zones) - set(clients))
    if missing:
        raise ValueError(f"no metastore client for zone(s) {', '.join(missing)}")
    divergences: list[Divergence] = []
    compared: dict[str, int] = dict.fromkeys(OBJECTS, 0)
    for r in rules:
        storages = {z: ZoneStorage(cfg.zones[z].s3) for z in cfg.zones} if data else None
        run = _Comparison(
            r, {z: _ZoneReader(z, clients[z], r) for z in sorted(cfg.zones)}, storages, checksums
        )
        run.run()
        divergences += run.out
        for k, n in run.compared.items():
            compared[k] += n
    order = {k: i for i, k in enumerate(OBJECTS)}
    divergences.sort(key=lambda d: (d.rule, order[d.object], d.name))
    return CheckReport(sorted(cfg.zones), [r.name for r in rules], divergences, compared, positions, head)
