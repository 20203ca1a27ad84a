"""``hivemesh live repair --from ZONE``: make every zone's catalog equal to ZONE's, through the log.

The repair never writes a metastore itself. It appends ordinary commands to the command log, the
same commands a live proxy proposes (:func:`hivemesh.live.commands.pin`: ZONE's locations made
zone-neutral under the rule's path of ZONE), so every zone's applier runs them in log order,
after the writes before them and before the writes after them. Steps (:func:`repair`):

1. Wait until ZONE's applier has reached the log's head (ZONE's catalog then holds every agreed
   write so far), then run :func:`hivemesh.live.check.check` and keep the divergences of the
   objects asked for (``db`` or ``db.table``: that object and everything in it; default: all).
2. Read ZONE's definitions and build the commands (:func:`plan`), per divergence in
   :data:`hivemesh.live.check.OBJECTS` order (containers before what they contain):

   - ZONE has it, another zone lacks it: ``create_database`` / ``create_function`` /
     ``create_table`` and everything in a created database or table (functions, tables,
     ``add_partitions_req`` with ``ifNotExists`` in batches, column statistics);
     ``add_partitions_req`` (``ifNotExists``) for partitions;
   - ZONE's definition differs from another zone's: ``alter_database`` / ``alter_function`` /
     ``alter_table`` (then all of ZONE's table column statistics again: an alter that changes
     columns may drop statistics) / ``alter_partitions`` with ZONE's definitions;
     ``update_table_column_statistics`` / ``update_partition_column_statistics`` with ZONE's
     statistics;
   - another zone has it, ZONE does not: ``drop_database`` (``deleteData=False``, cascade),
     ``drop_table`` (``deleteData=False``), ``drop_partitions_req`` (``deleteData=False``,
     ``ifExists``), ``drop_function``, ``delete_table_column_statistics`` /
     ``delete_partition_column_statistics``. **No such command deletes data files.**
   - only with ``data=True``, a data directory that differs (``table_data``, ``partition_data``):
     ZONE's definition of the table (``alter_table``) or partition (``alter_partitions``)
     proposed again, naming the directory, which every other zone then makes equal to ZONE's
     (:mod:`hivemesh.live.data`: files ZONE lacks are removed from that zone's copy).

   Definitions travel without ids, write ids, catalog names and grants (see
   :data:`hivemesh.live.check.EXCLUDED_FIELDS`). Column statistics are sent with the repair's
   clock as ``lastAnalyzed`` (the statistics calls the check compares do not return it, and
   metastores, Hive's and hivemesh's, record their own time of the update anyway).
3. Append the commands under request ids ``repair.<uuid>.<n>``, wait until every zone's stored
   position (:meth:`hivemesh.live.log.CommandLog.zone_states`) has passed the last one (zones that
   do not within the timeout are reported), and run the check again.

Why every command may run in every zone, ZONE included: each is either a no-op where the zone
already has ZONE's definition (ZONE itself, or a zone that already agreed) or ends in the same
deterministic error in every zone that has the same state: a create of what exists
(AlreadyExistsException; ``add_partitions_req`` with ``ifNotExists`` skips it), an alter to the
definition the zone already holds (``transient_lastDdlTime`` travels set, so the metastore keeps
it), a drop of what the zone lacks (NoSuchObjectException; ``drop_partitions_req`` with
``ifExists`` skips it). The applier records such errors as the command's answer and goes on, so
the zones end equal whatever each held before.

Limits: a write appended by a proxy between the read of ZONE's definitions and the repair's
commands is overwritten by them when it touches the same object (the report counts the commands
that came between: run ``check`` again, or repair in a quiet moment). A ZONE whose own location
lies outside its rule path cannot be the source for that object (the object is listed as
skipped). Constraints and data files are not repaired.
"""

from __future__ import annotations

import getpass
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hive_metastore.ttypes import (
    AddPartitionsRequest,
    ColumnStatistics,
    ColumnStatisticsDesc,
    DropPartitionsRequest,
    MetaException,
    NoSuchObjectException,
    PartitionsStatsRequest,
    RequestPartsSpec,
    TableStatsRequest,
)

from hivemesh.client.metastore import MetastoreClient
from hivemesh.hive.hms_methods import args_struct
from hivemesh.live.check import CheckReport, Divergence, check, read_zone
from hivemesh.live.commands import Command, encode, pin
from hivemesh.live.config import LiveFile, LiveRule
from hivemesh.live.data import data_dirs
from hivemesh.live.errors import LiveError
from hivemesh.live.log import CommandLog
from hivemesh.replication.verify import PARTITION_BATCH

__all__ = ["PlannedCommand", "RepairResult", "plan", "repair", "select"]

PARTITIONS_PER_COMMAND = 100
"""Partitions per ``add_partitions_req``/``alter_partitions``/``drop_partitions_req`` command
(halved until the command fits etcd's request limit)."""

_SCRUB = (
    "catalogName",
    "catName",
    "privileges",
    "writeId",
    "isStatsCompliant",
    "txnId",
    "id",
    "colStats",
    "fileMetadata",
    "dictionary",
    "accessType",
    "requiredReadCapabilities",
    "requiredWriteCapabilities",
)
"""Fields of ZONE's objects not sent: the zone's own ids, txn state, catalog and grants."""


@dataclass(frozen=True)
class PlannedCommand:
    """One repair command: the HMS ``method``, its pinned :class:`Command`, what it mends
    (``object``: ``"table sales.orders"``) and, once appended, its log ``position`` and
    ``request_id``."""

    method: str
    command: Command
    object: str
    position: int = 0
    request_id: str = ""


@dataclass
class RepairResult:
    """What :func:`repair` did: the check before (``before``, the divergences asked for in
    ``selected``), the commands appended (with positions), the objects it could not repair from
    the source zone (``skipped``: object -> why), the zones that did not reach the last command
    within the timeout (``lagging``: zone -> its position), the commands of other writers that
    came between the read of the source and the last repair command (``intervening``), and the
    check after (``after``; None when no command was needed)."""

    source: str
    before: CheckReport
    selected: list[Divergence]
    commands: list[PlannedCommand] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    lagging: dict[str, int] = field(default_factory=dict)
    intervening: int = 0
    after: CheckReport | None = None

    @property
    def consistent(self) -> bool:
        """True when the check after the repair (or before, when nothing was to do) found no difference."""
        report = self.after if self.after is not None else self.before
        return report.consistent and not self.lagging and not self.skipped

    def to_json(self) -> dict[str, Any]:
        """JSON-able: ``{"source", "consistent", "commands": [{"position", "request_id",
        "method", "object"}], "skipped", "lagging", "intervening", "before", "after"}``."""
        return {
            "source": self.source,
            "consistent": self.consistent,
            "commands": [
                {"position": c.position, "request_id": c.request_id, "method": c.method, "object": c.object}
                for c in self.commands
            ],
            "skipped": self.skipped,
            "lagging": self.lagging,
            "intervening": self.intervening,
            "before": self.before.to_json(),
            "after": self.after.to_json() if self.after is not None else None,
        }


def select(divergences: Iterable[Divergence], objects: Iterable[str]) -> list[Divergence]:
    """The divergences of ``objects`` (``db``: the database and all in it; ``db.table``: the table,
    its partitions and statistics; names in any case); all of them when ``objects`` is empty.
    Raises ValueError for a name of another form."""
    wanted = [o.lower() for o in objects]
    for o in wanted:
        if not o or o.count(".") > 1 or "/" in o:
            raise ValueError(f"{o!r}: name a database (db) or a table (db.table)")
    if not wanted:
        return list(divergences)
    out = []
    for d in divergences:
        for o in wanted:
            if ("." in o and d.table == o) or ("." not in o and d.database == o):
                out.append(d)
                break
    return out


def _scrub(obj: Any) -> Any:
    for name in _SCRUB:
        if hasattr(obj, name):
            setattr(obj, name, None)
    return obj


class _Planner:
    """Builds the commands of one repair (see the module doc)."""

    def __init__(self, cfg: LiveFile, source: str, client: MetastoreClient, user: str, now_ms: int) -> None:
        self.cfg = cfg
        self.source = source
        self.client = client
        self.user = user
        self.now_ms = now_ms
        self.out: list[PlannedCommand] = []
        self.skipped: dict[str, str] = {}
        self.dropped: set[str] = set()  # databases and tables dropped: nothing more to do inside

    # ------------------------------------------------------------------ helpers
    def read(self, method: str, *args: Any) -> Any:
        """HMS read on the source zone (:func:`hivemesh.live.check.read_zone`)."""
        return read_zone(self.source, self.client, method, *args)

    def add(self, rule: LiveRule, what: str, method: str, *argv: Any) -> bool:
        """Pin and queue one command; False (and the object skipped) when ZONE's locations are
        outside its rule path."""
        try:
            command = pin(method, args_struct(method)(*argv), rule, self.source, self.user, self.now_ms)
        except MetaException as e:
            self.skipped[what] = f"cannot repair from zone {self.source}: {e.message}"
            return False
        self.out.append(PlannedCommand(method, command, what))
        return True

    def fits(self, command: Command) -> bool:
        """Whether ``command`` stays well within etcd's request limit."""
        size = len(str(encode(command))) + 1024
        return size < self.cfg.live.etcd.max_request_bytes

    def add_batched(
        self, rule: LiveRule, what: str, method: str, items: list[Any], make: Callable[[list[Any]], list[Any]]
    ) -> None:
        """Queue ``method`` over ``items`` in commands of at most :data:`PARTITIONS_PER_COMMAND`,
        halved until each fits (``make(batch)``: the positional arguments)."""
        size = PARTITIONS_PER_COMMAND
        i = 0
        while i < len(items):
            batch = items[i : i + size]
            try:
                command = pin(
                    method, args_struct(method)(*make(batch)), rule, self.source, self.user, self.now_ms
                )
            except MetaException as e:
                self.skipped[what] = f"cannot repair from zone {self.source}: {e.message}"
                return
            if not self.fits(command) and size > 1:
                size = max(1, size // 2)
                continue
            self.out.append(PlannedCommand(method, command, f"{what} ({len(batch)} partition(s))"))
            i += len(batch)

    def stats_command(self, db: str, table: str, part: str | None, objs: list[Any]) -> ColumnStatistics:
        """Column statistics ``objs`` of ``db.table`` (partition name ``part``; None: table level) as
        one ColumnStatistics, stamped with the repair's clock (``lastAnalyzed``, seconds)."""
        desc = ColumnStatisticsDesc(
            isTblLevel=part is None,
            dbName=db,
            tableName=table,
            partName=part,
            lastAnalyzed=self.now_ms // 1000,
        )
        return ColumnStatistics(statsDesc=desc, statsObj=objs, engine="hive")

    def table_stats(self, db: str, table: Any, cols: list[str] | None = None) -> dict[str, Any]:
        """ZONE's column statistics of ``table`` (columns ``cols``; None: all), by column name."""
        names = cols if cols is not None else [c.name for c in (table.sd.cols if table.sd else None) or []]
        if not names:
            return {}
        try:
            result = self.read(
                "get_table_statistics_req",
                TableStatsRequest(dbName=db, tblName=table.tableName, colNames=names, engine="hive"),
            )
        except NoSuchObjectException:
            return {}
        return {o.colName.lower(): o for o in result.tableStats or []}

    def send_table_stats(self, rule: LiveRule, db: str, table: Any) -> None:
        """Queue ZONE's table column statistics of ``table`` (nothing when it has none)."""
        stats = self.table_stats(db, table)
        if stats:
            what = f"table_column_statistics {db}.{table.tableName}"
            cs = self.stats_command(db, table.tableName, None, list(stats.values()))
            self.add(rule, what, "update_table_column_statistics", cs)

    # ------------------------------------------------------------------ whole objects
    def fill_database(self, rule: LiveRule, db: str) -> None:
        """Every function and in-scope table of ZONE's database ``db``, with their contents."""
        for fn in sorted(self.read("get_functions", db, "*") or []):
            f = _scrub(self.read("get_function", db, fn))
            self.add(rule, f"function {db}.{fn}", "create_function", f)
        for t in sorted(self.read("get_all_tables", db) or []):
            if rule.matches_table(db, t):
                self.fill_table(rule, db, t, create=True)

    def fill_table(self, rule: LiveRule, db: str, name: str, *, create: bool) -> None:
        """ZONE's table ``db.name`` (created, or altered), its column statistics and, when
        created, its partitions and their statistics."""
        table = _scrub(self.read("get_table", db, name))
        what = f"table {db}.{name}"
        if not self.add(
            rule,
            what,
            "create_table" if create else "alter_table",
            *([table] if create else [db, name, table]),
        ):
            return
        self.send_table_stats(rule, db, table)
        if create and table.partitionKeys:
            names = list(self.read("get_partition_names", db, name, -1) or [])
            for i in range(0, len(names), PARTITION_BATCH):
                self.add_partitions(rule, db, table, names[i : i + PARTITION_BATCH])

    def add_partitions(self, rule: LiveRule, db: str, table: Any, names: list[str]) -> None:
        """``add_partitions_req`` (ifNotExists) of ZONE's partitions ``names`` of ``table``, then
        their column statistics."""
        if not names:
            return
        parts = [_scrub(p) for p in self.read("get_partitions_by_names", db, table.tableName, names) or []]

        def request(batch: list[Any]) -> list[Any]:
            """The arguments of ``add_partitions_req`` for ``batch`` (if not exists)."""
            return [AddPartitionsRequest(db, table.tableName, batch, ifNotExists=True, needResult=False)]

        self.add_batched(rule, f"partitions of {db}.{table.tableName}", "add_partitions_req", parts, request)
        self.partition_stats(rule, db, table, names)

    def partition_stats(
        self, rule: LiveRule, db: str, table: Any, names: list[str], cols: list[str] | None = None
    ) -> None:
        """ZONE's column statistics of partitions ``names`` (all columns, or ``cols``)."""
        cols = cols if cols is not None else [c.name for c in (table.sd.cols if table.sd else None) or []]
        if not cols or not names:
            return
        try:
            req = PartitionsStatsRequest(
                dbName=db, tblName=table.tableName, colNames=cols, partNames=names, engine="hive"
            )
            result = self.read("get_partitions_statistics_req", req).partStats or {}
        except NoSuchObjectException:
            return
        for pname, objs in sorted(result.items()):
            if objs:
                cs = self.stats_command(db, table.tableName, pname, list(objs))
                self.add(
                    rule,
                    f"partition_column_statistics {db}.{table.tableName}/{pname}",
                    "update_partition_column_statistics",
                    cs,
                )

    # ------------------------------------------------------------------ divergences
    def divergence(self, rule: LiveRule, d: Divergence) -> None:
        """Queue the commands that make every zone hold ZONE's version of ``d``."""
        src = self.source
        if src not in d.absent and not any(src in g for g in d.variants):
            return  # ZONE lacks the container: its drop covers this
        if d.database in self.dropped or (d.table is not None and d.table in self.dropped):
            return
        has = src not in d.absent
        mend = _Mend(
            rule,
            d,
            has=has,
            others_lack=has and bool(d.absent),
            differ=has and (len(d.variants) > 1 or any(z != src for z in d.problems)),
        )
        try:
            getattr(self, f"_mend_{d.object}")(mend)
        except NoSuchObjectException:
            self.skipped[f"{d.object} {d.name}"] = (
                f"gone from zone {src} since the check (a write in between): run repair again"
            )

    def _mend_database(self, m: _Mend) -> None:
        db, what = m.d.database, f"database {m.d.database}"
        if not m.has:
            self.add(m.rule, what, "drop_database", db, False, True)
            self.dropped.add(db)
            return
        if m.others_lack:
            self.add(m.rule, what, "create_database", _scrub(self.read("get_database", db)))
        if m.differ:
            self.add(m.rule, what, "alter_database", db, _scrub(self.read("get_database", db)))
        if m.others_lack:
            self.fill_database(m.rule, db)

    def _mend_function(self, m: _Mend) -> None:
        db, fn = m.d.name.split(".", 1)
        what = f"function {m.d.name}"
        if not m.has:
            self.add(m.rule, what, "drop_function", db, fn)
            return
        f = _scrub(self.read("get_function", db, fn))
        if m.others_lack:
            self.add(m.rule, what, "create_function", f)
        if m.differ:
            self.add(m.rule, what, "alter_function", db, fn, f)

    def _mend_table(self, m: _Mend) -> None:
        db, name = m.d.name.split(".", 1)
        if not m.has:
            self.add(m.rule, f"table {m.d.name}", "drop_table", db, name, False)
            self.dropped.add(m.d.name)
            return
        if m.others_lack:
            self.fill_table(m.rule, db, name, create=True)
        if m.differ:
            self.fill_table(m.rule, db, name, create=False)

    def _mend_table_column_statistics(self, m: _Mend) -> None:
        qualified, col = m.d.name.rsplit(".", 1)
        db, name = qualified.split(".", 1)
        what = f"column statistics {m.d.name}"
        if not m.has:
            self.add(m.rule, what, "delete_table_column_statistics", db, name, col, "hive")
            return
        stats = self.table_stats(db, self.read("get_table", db, name), [col])
        if col in stats:
            cs = self.stats_command(db, name, None, [stats[col]])
            self.add(m.rule, what, "update_table_column_statistics", cs)

    def _mend_partition(self, m: _Mend) -> None:
        qualified, pname = m.d.name.split("/", 1)
        db, name = qualified.split(".", 1)
        if not m.has:
            spec = RequestPartsSpec(names=[pname])
            req = DropPartitionsRequest(db, name, spec, deleteData=False, ifExists=True, needResult=False)
            self.add(m.rule, f"partition {m.d.name}", "drop_partitions_req", req)
            return
        if m.others_lack:
            self.add_partitions(m.rule, db, self.read("get_table", db, name), [pname])
        if m.differ:
            parts = [_scrub(p) for p in self.read("get_partitions_by_names", db, name, [pname]) or []]
            self.add_batched(
                m.rule, f"partition {m.d.name}", "alter_partitions", parts, lambda b: [db, name, b]
            )

    def _mend_partition_column_statistics(self, m: _Mend) -> None:
        head, col = m.d.name.rsplit(".", 1)
        qualified, pname = head.split("/", 1)
        db, name = qualified.split(".", 1)
        if not m.has:
            what = f"column statistics {m.d.name}"
            self.add(m.rule, what, "delete_partition_column_statistics", db, name, pname, col, "hive")
            return
        self.partition_stats(m.rule, db, self.read("get_table", db, name), [pname], [col])

    def _mend_table_data(self, m: _Mend) -> None:
        db, name = m.d.name.split(".", 1)
        if m.has:
            self.add_with_data(
                m.rule,
                f"data of table {m.d.name}",
                "alter_table",
                db,
                name,
                _scrub(self.read("get_table", db, name)),
            )

    def _mend_partition_data(self, m: _Mend) -> None:
        qualified, pname = m.d.name.split("/", 1)
        db, name = qualified.split(".", 1)
        if m.has:
            parts = [_scrub(p) for p in self.read("get_partitions_by_names", db, name, [pname]) or []]
            self.add_with_data(m.rule, f"data of partition {m.d.name}", "alter_partitions", db, name, parts)

    def add_with_data(self, rule: LiveRule, what: str, method: str, *argv: Any) -> None:
        """:meth:`add`, the command naming the directories it makes visible (copied from ZONE)."""
        if self.add(rule, what, method, *argv):
            pc = self.out[-1]

            def table_of(db: str, table: str) -> Any:
                """ZONE's table ``db.table``."""
                return self.read("get_table", db, table)

            dirs = data_dirs(method, pc.command.args, rule, self.source, table_of)
            self.out[-1] = replace(pc, command=replace(pc.command, data=dirs))


@dataclass(frozen=True)
class _Mend:
    """One divergence to mend: its rule, whether the source zone has the object, whether another
    zone lacks it, whether another zone's definition differs from the source's."""

    rule: LiveRule
    d: Divergence
    has: bool
    others_lack: bool
    differ: bool


def plan(
    cfg: LiveFile,
    source: str,
    client: MetastoreClient,
    divergences: Iterable[Divergence],
    *,
    user: str | None = None,
    now_ms: int | None = None,
) -> tuple[list[PlannedCommand], dict[str, str]]:
    """The commands that make every zone equal to zone ``source`` for ``divergences`` (read
    from ``client``, the source zone's metastore; see the module doc), and the objects that cannot
    be repaired from it (object -> why). ``user``: the owner recorded in the commands (default:
    this process's user); ``now_ms``: the repair's clock, ms. Raises the client's Thrift and
    transport errors."""
    rules = {r.name: r for r in cfg.live.rules}
    p = _Planner(
        cfg, source, client, user or getpass.getuser(), int(time.time() * 1000) if now_ms is None else now_ms
    )
    for d in divergences:
        p.divergence(rules[d.rule], d)
    return p.out, p.skipped


def _positions(log: CommandLog) -> dict[str, int]:
    return {z: int(s.get("position", 0)) for z, s in log.zone_states().items()}


def wait_for(log: CommandLog, zones: Iterable[str], position: int, timeout_s: float) -> dict[str, int]:
    """Wait until every zone of ``zones`` stored a position at or past ``position``; returns those
    that did not within ``timeout_s`` seconds, with their positions ({} when all did). Raises
    LiveError (etcd unreachable)."""
    deadline = time.monotonic() + timeout_s
    zones = list(zones)
    while True:
        at = _positions(log)
        behind = {z: at.get(z, 0) for z in zones if at.get(z, 0) < position}
        if not behind or time.monotonic() >= deadline:
            return behind
        time.sleep(0.1)


def repair(
    cfg: LiveFile,
    log: CommandLog,
    clients: Mapping[str, MetastoreClient],
    source: str,
    objects: Iterable[str] = (),
    *,
    timeout_s: float = 60.0,
    data: bool = False,
) -> RepairResult:
    """Make every zone's objects of ``objects`` (default: all that differ) equal to zone
    ``source``'s through the command log (see the module doc). ``clients``: every zone's
    metastore (:func:`hivemesh.live.check.open_zones`); ``timeout_s``: how long to wait for the
    source zone to reach the log's head, and then for every zone to apply the repair, seconds each;
    ``data``: compare and mend the data files too (a differing directory is made equal to the
    source's by re-proposing the source's definition of its table or partition with the directory:
    every other zone copies it, :mod:`hivemesh.live.data`).

    Raises ValueError (an unknown zone or a bad object name), LiveError (etcd unreachable; the
    source zone did not reach the log's head within ``timeout_s``: repairing from a zone behind
    would undo the writes it has not applied yet),
    :class:`hivemesh.live.check.ZoneUnavailable`.
    """
    if source not in cfg.zones:
        raise ValueError(f"unknown zone {source!r} (zones: {', '.join(sorted(cfg.zones))})")
    objects = list(objects)
    select([], objects)  # the names' form, before anything is read
    head, _ = log.head()
    behind = wait_for(log, [source], head, timeout_s)
    if behind:
        raise LiveError(
            f"zone {source} is at log position {behind[source]}, behind the head {head} after {timeout_s:g}s: "
            "repairing from it would undo the writes it has not applied yet"
        )
    before = check(cfg, clients, positions=_positions(log), head=head, data=data)
    result = RepairResult(source, before, select(before.divergences, objects))
    if not result.selected:
        return result
    planned, result.skipped = plan(cfg, source, clients[source], result.selected)
    run = uuid.uuid4().hex
    last = head
    for i, pc in enumerate(planned):
        request_id = f"repair.{run}.{i:05d}"
        try:
            position = log.append(request_id, encode(pc.command))
        except LiveError as e:
            raise LiveError(
                f"repair from zone {source}: appending command {i + 1} of {len(planned)} ({pc.method} of "
                f"{pc.object}) failed: {e}; the {i} before it are in the log (last position {last}) and "
                "will be applied in every zone: run check, then repair again"
            ) from e
        result.commands.append(PlannedCommand(pc.method, pc.command, pc.object, position, request_id))
        last = max(last, position)
    result.lagging = wait_for(log, sorted(cfg.zones), last, timeout_s)
    between = log.read(head, limit=max(1, len(planned) * 2 + 1000)) if planned else []
    result.intervening = sum(
        1 for e in between if e.position <= last and not e.request_id.startswith(f"repair.{run}.")
    )
    result.after = check(cfg, clients, positions=_positions(log), head=log.head()[0], data=data)
    return result
