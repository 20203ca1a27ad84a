"""``hivemesh quickstart --live``: TPC-H written through two zones' live proxies, every table in both
zones, the queries run in each zone and checked against the files.

Everything lives under ``DATA_DIR/live/``: a single-member etcd (Debian's ``etcd``, data in
``etcd/``) holds the command log; two hivemesh metastores on SQLite stand for the zones ``onprem``
and ``cloud`` (``<zone>/metastore.db``, warehouse ``<zone>/warehouse``); ``mesh.yaml`` has both
zones and a live rule ``tpch`` for the database ``tpch`` whose path in each zone is that zone's
warehouse; both zones' live proxies (:class:`hivemesh.live.service.LiveService`: proxy and
applier) run in this process. Steps:

1. generate the TPC-H files (shared with the plain quickstart: ``DATA_DIR/tpch/sf<scale>``);
2. start etcd, both metastores and both live proxies;
3. with a SparkSession bound to onprem's live proxy, create the database and load the dimension
   tables; once cloud applied all of it, with one bound to cloud's proxy (a session holds one
   metastore URI: the first is stopped), load the fact tables (``orders``, ``lineitem``). Each
   write is agreed through the log and applied in both zones, the files copied into the other
   zone's own path first (Spark's size statistics updated after each INSERT: see
   :data:`LIVE_SPARK_CONF`);
4. wait until both zones applied the whole log, and run ``hivemesh live check``'s comparison
   (:func:`hivemesh.live.check.check`);
5. run the quickstart's queries with Spark in zone cloud (the session of step 3), then in zone
   onprem (a new session on onprem's proxy), each checked against the same query over the files
   (read once, in the first zone).

A second run reuses it all: the files, etcd's data (the log), the zones' stores, files and
applier positions, so the tables are found loaded in both zones and nothing is written. Remove
``DATA_DIR/live`` to start clean.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import yaml
from pyspark.sql import SparkSession
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hivemesh.client.metastore import MetastoreClient
from hivemesh.live.check import CheckReport, check, open_zones
from hivemesh.live.config import load_live_config
from hivemesh.live.repair import wait_for
from hivemesh.live.service import LiveService
from hivemesh.quickstart.embedded import embedded_metastore
from hivemesh.quickstart.etcd import EtcdServer, etcd_binary
from hivemesh.quickstart.federated import CLOUD_TABLES, Steps, Zone, load_zone_tables, query_steps
from hivemesh.quickstart.load import LoadResult, register_file_views
from hivemesh.quickstart.queries import QUERIES, FileResults, Query, QueryResult
from hivemesh.quickstart.report import MATCH, MISMATCH, print_failure, print_results, step_progress
from hivemesh.quickstart.session import quickstart_session
from hivemesh.quickstart.tpch import TABLES, GenerateResult, generate, scale_dir
from hivemesh.storage.copy import list_tree
from hivemesh.storage.locations import local_path

log = logging.getLogger(__name__)

#: The live database.
DATABASE = "tpch"
#: The live rule covering it.
RULE = "tpch"
#: The zones, in the order Spark writes through them.
ZONES: tuple[str, ...] = ("onprem", "cloud")
#: The tables Spark writes through each zone's live proxy: the facts through cloud, the rest through onprem.
WRITTEN_THROUGH: dict[str, tuple[str, ...]] = {
    "onprem": tuple(t for t in TABLES if t not in CLOUD_TABLES),
    "cloud": CLOUD_TABLES,
}
#: The zones the queries run in, in order: the last writer first (its session is bound to it already).
QUERY_ZONES: tuple[str, ...] = (ZONES[-1], *ZONES[:-1])
#: Spark settings of the sessions writing through a live proxy. Spark writes an INSERT into an
#: unpartitioned Hive ORC table as a data source write that makes no metastore call at all, so no
#: live proxy would see it and no other zone would get its files; with the size statistics
#: updated after each write, the INSERT ends with an ``alter_table`` (of ``spark.sql.statistics.
#: totalSize``), a live write that has the table's files copied into every zone before it applies.
LIVE_SPARK_CONF: dict[str, str] = {"spark.sql.statistics.size.autoUpdate.enabled": "true"}
#: How long both zones may take to apply the whole log (files copied included), seconds.
APPLY_TIMEOUT_S = 300.0


def live_dir(data_dir: Path) -> Path:
    """``DATA_DIR/live``: etcd's data, the zones and mesh.yaml."""
    return Path(data_dir).resolve() / "live"


def zone(data_dir: Path, name: str) -> Zone:
    """Zone ``name``: its store and warehouse (the rule's path in it) in ``DATA_DIR/live/<name>``."""
    return Zone(name, live_dir(data_dir) / name)


def write_mesh_config(data_dir: Path, etcd_endpoint: str, metastores: Mapping[str, str]) -> Path:
    """Write ``DATA_DIR/live/mesh.yaml``: the zones (their metastores at ``metastores``), the
    command log on etcd at ``etcd_endpoint`` and the rule :data:`RULE` (database
    :data:`DATABASE`, each zone's path its warehouse; acid_owner onprem). Returns its path."""
    base = live_dir(data_dir)
    zones = {z: zone(data_dir, z) for z in ZONES}
    doc: dict[str, Any] = {
        "zones": {
            z.name: {"metastore": metastores[z.name], "warehouse": str(z.warehouse)} for z in zones.values()
        },
        "live": {
            "etcd": {"endpoints": [etcd_endpoint], "prefix": "/hivemesh/quickstart"},
            "rules": [
                {
                    "name": RULE,
                    "databases": [DATABASE],
                    "paths": {z.name: str(z.warehouse) for z in zones.values()},
                    "acid_owner": ZONES[0],
                }
            ],
            "store": f"sqlite:///{base / 'live.db'}",
            "state_dir": str(base / "state"),
        },
    }
    base.mkdir(parents=True, exist_ok=True)
    path = base / "mesh.yaml"
    header = [
        f"hivemesh quickstart --live: database {DATABASE} live in zones {' and '.join(ZONES)}.",
        "etcd and the zones' metastores on the ports below were the quickstart's own and stopped when it ended;",
        f"to serve a zone's live proxy again, start them on those ports (etcd with --data-dir {base / 'etcd'}),",
        f"then: hivemesh live serve --config {path} --zone {ZONES[0]} --port 9083",
    ]
    path.write_text(
        "".join(f"# {line}\n" for line in header) + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8"
    )
    return path


@dataclass(frozen=True)
class TableFiles:
    """One table: the zone Spark wrote it through, its rows, its location relative to each zone's
    rule path, and per zone its data files (``name -> size``, hidden and ``_`` files left out)."""

    table: str
    written_through: str
    rows: int
    location: str
    files: dict[str, dict[str, int]]

    @property
    def same(self) -> bool:
        """The same data files (names and sizes) in every zone."""
        return len({tuple(sorted(f.items())) for f in self.files.values()}) == 1


def _data_files(directory: str) -> dict[str, int]:
    """Data files below ``directory`` (relative path -> size); names starting with ``.`` or ``_``
    (checksums, ``_SUCCESS``) are left out."""
    out = {}
    for f in list_tree(pafs.LocalFileSystem(), directory):
        if not any(part.startswith((".", "_")) for part in f.path.split("/")):
            out[f.path] = f.size
    return out


def _table_files(
    cfg_zones: Mapping[str, str], loads: Mapping[str, LoadResult], data_dir: Path
) -> list[TableFiles]:
    """Each table's location and files in every zone, asked of each zone's own metastore."""
    locations: dict[str, dict[str, str]] = {t: {} for t in TABLES}
    for name, uri in cfg_zones.items():
        with MetastoreClient(uri) as client:
            for table in TABLES:
                locations[table][name] = local_path(client.hms.get_table(DATABASE, table).sd.location)
    out = []
    for table in TABLES:
        through = next(z for z, tables in WRITTEN_THROUGH.items() if table in tables)
        rel = {str(Path(loc).relative_to(zone(data_dir, z).warehouse)) for z, loc in locations[table].items()}
        out.append(
            TableFiles(
                table,
                through,
                loads[table].rows,
                " / ".join(sorted(rel)),
                {z: _data_files(loc) for z, loc in locations[table].items()},
            )
        )
    return out


def _proposals(service: LiveService) -> tuple[int, int]:
    """(writes this zone's proxy proposed, of which answered ok) so far."""
    total = ok = 0
    for family in service.metrics.proposals.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                total += int(sample.value)
                ok += int(sample.value) if sample.labels["outcome"] == "ok" else 0
    return total, ok


def _wait_applied(services: Mapping[str, LiveService]) -> int:
    """Wait until every zone applied the whole log; returns its head. Raises RuntimeError naming
    the zones behind after :data:`APPLY_TIMEOUT_S`."""
    commands = next(iter(services.values())).log
    assert commands is not None
    head, _ = commands.head()
    behind = wait_for(commands, services, head, APPLY_TIMEOUT_S)
    if behind:
        lagging = ", ".join(
            f"{z} at {p} (last error: {getattr(services[z].applier, 'last_error', None)})"
            for z, p in behind.items()
        )
        raise RuntimeError(f"zones not at log position {head} after {APPLY_TIMEOUT_S:g} s: {lagging}")
    return head


def _check(mesh: Path, head: int) -> CheckReport:
    """``hivemesh live check``'s comparison of both zones' metastores."""
    cfg = load_live_config(mesh)
    clients = open_zones(cfg)
    try:
        return check(cfg, clients, positions=None, head=head)
    finally:
        for c in clients.values():
            c.close()


def _zone_session(stack: ExitStack, steps: Steps, z: Zone, service: LiveService, what: str) -> SparkSession:
    """A SparkSession bound to zone ``z``'s live proxy (the session before it stopped first),
    stopped when ``stack`` closes."""
    steps.step(f"starting Spark on zone {z.name}'s live proxy to {what}")
    spark = quickstart_session(service.uri, z.directory, conf=LIVE_SPARK_CONF)
    stack.callback(spark.stop)  # before the proxy stops
    steps.done()
    return spark


def _zone_queries(
    steps: Steps,
    spark: SparkSession,
    name: str,
    files_dir: Path,
    queries: Sequence[Query],
    file_results: FileResults,
) -> list[QueryResult]:
    """``queries`` on zone ``name``'s tables (the session's), each checked against the files (read
    in the first zone, then taken from ``file_results``)."""
    views = register_file_views(spark, files_dir) if any(q.name not in file_results for q in queries) else {}
    return query_steps(steps, spark, queries, views, where=f" in zone {name}", file_results=file_results)


@dataclass
class _Run:
    """What a run found, for the summary."""

    gen: GenerateResult
    etcd: str
    etcd_version: str
    mesh: Path
    head: int
    proxies: dict[str, str]
    metastores: dict[str, str]
    proposals: dict[str, tuple[int, int]]
    loads: dict[str, LoadResult]
    tables: list[TableFiles]
    report: CheckReport
    results: dict[str, list[QueryResult]]


def run_live(
    scale: float, data_dir: Path, *, console: Console | None = None, queries: Sequence[Query] = QUERIES
) -> int:
    """Run the live quickstart (see the module doc); 0 when every query matches the files in both
    zones, ``live check`` finds the zones consistent and each table has the same files in both.
    ``queries``: the queries to run (default: all of the quickstart's).

    Failures are logged and printed, and give 1. Creates and stops its own SparkSessions: call it
    in a process without one.
    """
    console = console or Console()
    data_dir = Path(data_dir).resolve()
    files_dir = scale_dir(data_dir, scale)
    zones = {z: zone(data_dir, z) for z in ZONES}
    started = time.perf_counter()
    loads: dict[str, LoadResult] = {}
    with ExitStack() as outer:
        progress = outer.enter_context(step_progress(console))
        sessions = 2 * len(ZONES)  # a session to load and one to query, per zone
        steps = Steps(progress, total=4 + sessions + len(TABLES) + len(ZONES) * len(queries))
        try:
            binary = etcd_binary()  # before generating: a missing etcd is said at once
            steps.step(f"generating TPC-H sf{scale:g}")
            gen = generate(scale, files_dir)
            steps.done()

            steps.step("starting etcd, the zones' metastores and live proxies")
            etcd = outer.enter_context(EtcdServer(live_dir(data_dir) / "etcd", binary))
            metastores: dict[str, str] = {}
            for name, z in zones.items():
                uri = outer.enter_context(embedded_metastore(z.directory))
                assert uri is not None  # a hivemesh metastore, not Spark's Derby
                metastores[name] = uri
            mesh = write_mesh_config(data_dir, etcd.endpoint, metastores)
            services: dict[str, LiveService] = {}
            for name in ZONES:
                services[name] = LiveService(mesh, name, port=0).start()
                outer.callback(services[name].stop)  # after the Spark sessions (closed first)
            steps.done()

            session = ExitStack()  # the SparkSession of the moment: one metastore URI at a time
            outer.callback(session.close)  # before the live proxies stop
            for name in ZONES:
                session.close()
                _wait_applied(services)  # this zone holds what was written through the others
                spark = _zone_session(session, steps, zones[name], services[name], "load tables")
                load_zone_tables(steps, spark, files_dir, zones[name], WRITTEN_THROUGH[name], loads)
            steps.step("waiting until both zones applied every write")
            head = _wait_applied(services)
            steps.done()
            steps.step("live check: comparing both zones' metastores")
            report = _check(mesh, head)
            tables = _table_files(metastores, loads, data_dir)
            steps.done()

            file_results: FileResults = {}
            results: dict[str, list[QueryResult]] = {}
            for name in QUERY_ZONES:
                if name == ZONES[-1]:
                    steps.done()  # the last writer's session is bound to this zone already
                else:
                    session.close()
                    spark = _zone_session(session, steps, zones[name], services[name], "query")
                results[name] = _zone_queries(steps, spark, name, files_dir, queries, file_results)
            session.close()
            run = _Run(
                gen,
                etcd.endpoint,
                etcd.version(),
                mesh,
                head,
                {n: s.uri for n, s in services.items()},
                metastores,
                {n: _proposals(s) for n, s in services.items()},
                loads,
                tables,
                report,
                results,
            )
            steps.step("done")
        except Exception as e:
            print_failure(console, progress, "quickstart --live", e)
            return 1
    elapsed = time.perf_counter() - started
    _print_summary(console, run, data_dir, elapsed)
    ok = all(r.match for rs in run.results.values() for r in rs) and run.report.consistent
    ok = ok and all(t.same for t in run.tables)
    log.info("live quickstart finished in %.1f s: %s", elapsed, "all match" if ok else "differences")
    return 0 if ok else 1


def _size(n: int) -> str:
    """``n`` bytes in B, KB or MB."""
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def tables_table(tables: Sequence[TableFiles]) -> Table:
    """One row per table: the zone Spark wrote it through, rows, its location in each zone's rule
    path, each zone's data files, and whether both zones hold the same files."""
    t = Table(title=f"database {DATABASE}: each table written through one zone's live proxy, held by both")
    t.add_column("table")
    t.add_column("written through")
    t.add_column("rows", justify="right")
    t.add_column("location in each zone", overflow="fold")
    for z in ZONES:
        t.add_column(f"files in {z}", justify="right")
    t.add_column("same files", justify="center")
    for f in tables:
        counts = [f"{len(f.files[z])} ({_size(sum(f.files[z].values()))})" for z in ZONES]
        t.add_row(f.table, f.written_through, str(f.rows), f.location, *counts, MATCH if f.same else MISMATCH)
    return t


def zones_table(run: _Run, data_dir: Path) -> Table:
    """One row per zone: its live proxy, the writes agreed through the log from it, its metastore
    and store, and where its files are."""
    base = live_dir(data_dir)
    t = Table(title=f"the zones: hivemesh metastores behind live proxies, in {escape(str(base))}")
    for col in ("zone", "live proxy", "writes proposed (ok)", "metastore", "store", "files"):
        t.add_column(col, overflow="fold")
    for name in ZONES:
        z = zone(data_dir, name)
        total, ok = run.proposals[name]
        t.add_row(
            name,
            run.proxies[name],
            f"{total} ({ok})",
            run.metastores[name],
            str((z.directory / "metastore.db").relative_to(base)),
            str((z.warehouse / f"{DATABASE}.db").relative_to(base)),
        )
    return t


def _print_summary(console: Console, run: _Run, data_dir: Path, elapsed: float) -> None:
    files = f"generated in {run.gen.seconds:.1f} s" if run.gen.generated else "reused"
    loads = list(run.loads.values())
    loaded = [x for x in loads if x.loaded]
    tables = f"{len(loaded)} loaded in {sum(x.seconds for x in loaded):.1f} s" if loaded else "all reused"
    if 0 < len(loaded) < len(loads):
        tables += f", {len(loads) - len(loaded)} reused"
    console.print(f"TPC-H files {escape(str(run.gen.directory))}: {files}; tables: {tables}", highlight=False)
    base = live_dir(data_dir)
    console.print(
        f"etcd {escape(run.etcd_version)} at {escape(run.etcd)} (data {escape(str(base / 'etcd'))}): "
        f"command log head {run.head}; config {escape(str(run.mesh))} (rule {RULE})",
        highlight=False,
    )
    console.print(zones_table(run, data_dir))
    console.print(tables_table(run.tables))
    report = run.report
    compared = sum(report.compared.values())
    if report.consistent:
        console.print(
            f"[green]live check: consistent[/green]: {compared} objects of rule {RULE} are the same in zones "
            f"{', '.join(report.zones)}",
            highlight=False,
        )
    else:
        console.print(f"[red]live check: {len(report.divergences)} object(s) differ[/red]", highlight=False)
        for d in report.divergences:
            console.print(
                f"  {d.object} {escape(d.name)}: zones {', '.join(d.zones())} {escape(d.detail)}",
                highlight=False,
            )
    for name in QUERY_ZONES:
        print_results(
            console, run.results[name], title=f"zone {name}: its tables vs Parquet files, {elapsed:.0f} s"
        )
