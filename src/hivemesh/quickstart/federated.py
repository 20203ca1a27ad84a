"""``hivemesh quickstart --federated``: TPC-H spread over two zones, queried through the proxy as one catalog.

Two hivemesh metastores on SQLite stand for two zones: ``onprem`` (the primary) and ``cloud``,
each with its own store and warehouse under ``DATA_DIR/zones/<zone>/``. The fact tables
(``lineitem``, ``orders``) live in the cloud zone's database ``tpch``, the dimension tables in the
onprem zone's database ``tpch``. A hivemesh proxy (``DATA_DIR/zones/mesh.yaml``, PREFIXED database
resolution) serves both zones as one catalog: onprem's databases keep their names, cloud's appear
as ``cloud_<name>`` and are read-only. Steps:

1. generate the TPC-H files (shared with the plain quickstart: ``DATA_DIR/tpch/sf<scale>``);
2. serve the cloud zone's metastore over Thrift and load the fact tables into it with a
   SparkSession bound to it directly (the proxy would refuse: cloud is read-only through it);
3. stop that session and the cloud metastore, start the proxy, whose members are both zones run
   inside it (``embedded``), and a SparkSession bound to the proxy; load the dimension tables
   through the proxy into the primary (onprem);
4. through that session, run the quickstart's queries over ``cloud_tpch.lineitem``,
   ``cloud_tpch.orders`` and ``tpch.<dimension>``, each checked against the same query over the
   generated files.

The mesh.yaml written in step 3 needs nothing else running: ``hivemesh proxy --config
DATA_DIR/zones/mesh.yaml --port 9083`` serves the two zones again for any Hive client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from hivemesh.client.metastore import MetastoreClient
from hivemesh.config import MetastoreConfig
from hivemesh.federation.service import ProxyService
from hivemesh.metastore.service import MetastoreService
from hivemesh.quickstart.load import LoadResult, create_database, load_table, register_file_views
from hivemesh.quickstart.queries import QUERIES, FileResults, Query, QueryResult, run_query
from hivemesh.quickstart.report import print_failure, print_results, step_progress
from hivemesh.quickstart.session import quickstart_session
from hivemesh.quickstart.tpch import TABLES, GenerateResult, generate, scale_dir

log = logging.getLogger(__name__)

#: The database holding TPC-H in each zone.
DATABASE = "tpch"
#: The primary zone: its databases keep their names through the proxy; writable.
PRIMARY_ZONE = "onprem"
#: The federated zone: read-only through the proxy, its databases prefixed with :data:`CLOUD_PREFIX`.
CLOUD_ZONE = "cloud"
CLOUD_PREFIX = "cloud_"
#: The fact tables, kept in the cloud zone; the dimension tables stay on premises.
CLOUD_TABLES: tuple[str, ...] = ("orders", "lineitem")
PRIMARY_TABLES: tuple[str, ...] = tuple(t for t in TABLES if t not in CLOUD_TABLES)


@dataclass(frozen=True)
class Zone:
    """One zone: a hivemesh metastore on SQLite in ``directory`` (store and warehouse inside)."""

    name: str
    directory: Path

    @property
    def db_url(self) -> str:
        """SQLAlchemy URL of the zone's SQLite store."""
        return f"sqlite:///{self.directory / 'metastore.db'}"

    @property
    def warehouse(self) -> Path:
        """The zone's warehouse directory."""
        return self.directory / "warehouse"


@dataclass(frozen=True)
class Placement:
    """Where one TPC-H table lives: its zone (database :data:`DATABASE` there) and its name through the proxy."""

    table: str
    zone: str
    proxy_name: str
    rows: int
    location: str


def zones_dir(data_dir: Path) -> Path:
    """``DATA_DIR/zones``: the zones' stores and warehouses, and the proxy's mesh.yaml."""
    return Path(data_dir) / "zones"


def zone(data_dir: Path, name: str) -> Zone:
    """The zone ``name`` of the federated quickstart in ``data_dir``."""
    return Zone(name, zones_dir(data_dir) / name)


def zone_of(table: str) -> str:
    """The zone holding ``table``."""
    return CLOUD_ZONE if table in CLOUD_TABLES else PRIMARY_ZONE


def proxy_name(table: str) -> str:
    """``table``'s name as clients of the proxy see it: ``cloud_tpch.lineitem``, ``tpch.nation``."""
    prefix = CLOUD_PREFIX if zone_of(table) == CLOUD_ZONE else ""
    return f"{prefix}{DATABASE}.{table}"


def proxy_tables() -> dict[str, str]:
    """Table -> quoted qualified name through the proxy, for :meth:`Query.render`."""
    return {t: ".".join(f"`{part}`" for part in proxy_name(t).split(".")) for t in TABLES}


def write_mesh_config(data_dir: Path) -> Path:
    """Write ``DATA_DIR/zones/mesh.yaml``: the proxy over the two zones; returns its path.

    Both zones are ``embedded`` members (run inside the proxy on their SQLite stores), so the file
    works on its own with ``hivemesh proxy --config``. Ports are 0 (free ports).
    """
    data_dir = Path(data_dir).resolve()
    onprem, cloud = zone(data_dir, PRIMARY_ZONE), zone(data_dir, CLOUD_ZONE)
    config: dict[str, Any] = {
        "proxy": {
            "host": "127.0.0.1",
            "port": 0,
            "metrics_port": 0,
            "database_resolution": "prefixed",
            "store": f"sqlite:///{zones_dir(data_dir) / 'proxy.db'}",
        },
        "primary": {
            "name": onprem.name,
            "access_control": "read_and_write_and_create",
            "embedded": {"db": onprem.db_url, "warehouse": str(onprem.warehouse)},
        },
        "federated": [
            {
                "name": cloud.name,
                "database_prefix": CLOUD_PREFIX,
                "access_control": "read_only",
                "embedded": {"db": cloud.db_url, "warehouse": str(cloud.warehouse)},
            }
        ],
    }
    path = zones_dir(data_dir) / "mesh.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `hivemesh quickstart --federated`: zones onprem (primary) and cloud (read-only,\n"
        f"# databases prefixed {CLOUD_PREFIX}) served as one catalog. Serve them again with:\n"
        f"#   hivemesh proxy --config {path} --port 9083\n"
    )
    path.write_text(header + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _member_calls(metrics: Any) -> dict[str, int]:
    """Calls the proxy sent to each member so far (from its Prometheus counters)."""
    calls: dict[str, int] = {}
    for family in metrics.member_calls.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                member = sample.labels["member"]
                calls[member] = calls.get(member, 0) + int(sample.value)
    return calls


def _short_location(location: str, data_dir: Path, zone_name: str) -> str:
    """``location`` relative to its zone's directory when inside it, else to ``data_dir``, else as is."""
    path = Path(location.removeprefix("file:"))
    for base in (zone(data_dir, zone_name).directory, data_dir):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return location


def _placements(proxy_uri: str, loads: dict[str, LoadResult], data_dir: Path) -> list[Placement]:
    """Where each table lives, asked of the proxy (``get_table`` through it gives the location)."""
    out = []
    with MetastoreClient(proxy_uri) as client:
        for table in TABLES:
            db, name = proxy_name(table).split(".")
            location = _short_location(client.hms.get_table(db, name).sd.location, data_dir, zone_of(table))
            out.append(Placement(table, zone_of(table), proxy_name(table), loads[table].rows, location))
    return out


class Steps:
    """The run's progress bar: :meth:`step` names the step under way, :meth:`done` counts it."""

    def __init__(self, progress: Progress, total: int):
        self.progress = progress
        self.task = progress.add_task("starting", total=total)

    def step(self, description: str) -> None:
        """Show ``description`` as the step under way."""
        self.progress.update(self.task, description=description)

    def done(self) -> None:
        """Count the step under way as done."""
        self.progress.advance(self.task)


def load_zone_tables(
    steps: Steps,
    spark: SparkSession,
    files_dir: Path,
    zone: Zone,
    tables: Sequence[str],
    loads: dict[str, LoadResult],
) -> None:
    """Load ``tables`` from ``files_dir`` into database :data:`DATABASE` of the metastore ``spark``
    is bound to (``zone``: named in the progress), recording each in ``loads``."""
    create_database(spark, DATABASE)
    for table in tables:
        steps.step(f"loading {DATABASE}.{table} into zone {zone.name}")
        loads[table] = load_table(spark, files_dir, DATABASE, table)
        steps.done()


def _load_cloud_zone(steps: Steps, cloud: Zone, files_dir: Path, loads: dict[str, LoadResult]) -> None:
    """Step 2: serve the cloud zone's metastore on its own and load the fact tables with a
    SparkSession bound to it directly (the proxy would refuse: cloud is read-only through it).
    Both are stopped before returning."""
    steps.step(f"starting zone {cloud.name} and Spark")
    with ExitStack() as stack:
        cloud.warehouse.mkdir(parents=True, exist_ok=True)
        cfg = MetastoreConfig(host="127.0.0.1", port=0, db=cloud.db_url, warehouse=str(cloud.warehouse))
        service = MetastoreService(cfg).start()
        stack.callback(service.stop)
        log.info("zone %s: metastore %s (store %s)", cloud.name, service.uri, cfg.db)
        spark = quickstart_session(service.uri, cloud.directory)
        stack.callback(spark.stop)  # before its metastore stops
        steps.done()
        load_zone_tables(steps, spark, files_dir, cloud, CLOUD_TABLES, loads)


def _serve_both_zones(
    stack: ExitStack, steps: Steps, data_dir: Path, onprem: Zone, cloud: Zone
) -> tuple[ProxyService, SparkSession, Path]:
    """Step 3's start: write mesh.yaml, start the proxy over both zones and a SparkSession bound to
    it, both stopped when ``stack`` closes (the session first). Returns (proxy, session, mesh.yaml)."""
    steps.step("starting the proxy over both zones and Spark")
    onprem.warehouse.mkdir(parents=True, exist_ok=True)
    mesh = write_mesh_config(data_dir)
    proxy = ProxyService(mesh).start()
    stack.callback(proxy.stop)
    log.info("proxy %s over zones %s and %s (%s)", proxy.uri, onprem.name, cloud.name, mesh)
    spark = quickstart_session(proxy.uri, onprem.directory)
    stack.callback(spark.stop)  # before the proxy stops
    steps.done()
    return proxy, spark, mesh


def query_steps(
    steps: Steps,
    spark: SparkSession,
    queries: Sequence[Query],
    views: dict[str, str],
    *,
    where: str = "",
    tables: dict[str, str] | None = None,
    file_results: FileResults | None = None,
) -> list[QueryResult]:
    """Each of ``queries`` on the tables of database :data:`DATABASE` (or ``tables``) checked
    against the file ``views`` (:func:`run_query`), a step each (``query <name><where>``)."""
    results = []
    for query in queries:
        steps.step(f"query {query.name}{where}")
        results.append(run_query(spark, query, DATABASE, views, tables=tables, file_results=file_results))
        steps.done()
    return results


def _run_queries(steps: Steps, spark: SparkSession, files_dir: Path) -> list[QueryResult]:
    """Step 4: every quickstart query over the tables through the proxy, checked against the files."""
    views = register_file_views(spark, files_dir)
    return query_steps(steps, spark, QUERIES, views, tables=proxy_tables())


def run_federated(scale: float, data_dir: Path, *, console: Console | None = None) -> int:
    """Run the federated quickstart (see the module docstring); 0 when every query matches the files.

    A second run reuses the generated files and the loaded tables. Failures are logged and
    printed, and give 1. Creates and stops its own SparkSessions: call it in a process without one.
    """
    console = console or Console()
    data_dir = Path(data_dir).resolve()
    files_dir = scale_dir(data_dir, scale)
    onprem, cloud = zone(data_dir, PRIMARY_ZONE), zone(data_dir, CLOUD_ZONE)
    started = time.perf_counter()
    loads: dict[str, LoadResult] = {}
    with ExitStack() as outer:
        progress = outer.enter_context(step_progress(console))
        steps = Steps(progress, total=4 + len(TABLES) + len(QUERIES))
        try:
            steps.step(f"generating TPC-H sf{scale:g}")
            gen = generate(scale, files_dir)
            steps.done()
            _load_cloud_zone(steps, cloud, files_dir, loads)
            proxy, spark, mesh = _serve_both_zones(outer, steps, data_dir, onprem, cloud)
            load_zone_tables(steps, spark, files_dir, onprem, PRIMARY_TABLES, loads)
            steps.step("asking the proxy where the tables live")
            databases = sorted(r[0] for r in spark.sql("SHOW DATABASES").collect())
            placements = _placements(proxy.uri, loads, data_dir)
            steps.done()
            results = _run_queries(steps, spark, files_dir)
            calls = _member_calls(proxy.metrics)
            proxy_uri = proxy.uri
            steps.step("done")
        except Exception as e:
            print_failure(console, progress, "quickstart", e)
            return 1
    elapsed = time.perf_counter() - started
    _print_summary(console, gen, list(loads.values()), placements, databases, calls, proxy_uri, mesh)
    print_results(
        console,
        results,
        title=f"one catalog over zones {onprem.name} + {cloud.name} vs Parquet files, {elapsed:.0f} s",
    )
    matched = sum(r.match for r in results)
    log.info("federated quickstart finished in %.1f s: %d/%d queries match", elapsed, matched, len(results))
    return 0 if matched == len(results) else 1


def placements_table(placements: Sequence[Placement]) -> Table:
    """One row per table: its zone, its name through the proxy, rows, and the location the proxy reports
    (relative to the zone's directory ``DATA_DIR/zones/<zone>``)."""
    table = Table(title=f"where each table lives (database {DATABASE} of its zone)", pad_edge=False)
    table.add_column("table")
    table.add_column("zone")
    table.add_column("through the proxy", no_wrap=True)
    table.add_column("rows", justify="right")
    table.add_column("location in the zone", overflow="fold")
    for p in placements:
        table.add_row(p.table, p.zone, p.proxy_name, str(p.rows), p.location)
    return table


def _print_summary(
    console: Console,
    gen: GenerateResult,
    loads: Sequence[LoadResult],
    placements: Sequence[Placement],
    databases: Sequence[str],
    calls: dict[str, int],
    proxy_uri: str,
    mesh: Path,
) -> None:
    files = f"generated in {gen.seconds:.1f} s" if gen.generated else "reused"
    loaded = [x for x in loads if x.loaded]
    tables = f"{len(loaded)} loaded in {sum(x.seconds for x in loaded):.1f} s" if loaded else "all reused"
    if 0 < len(loaded) < len(loads):
        tables += f", {len(loads) - len(loaded)} reused"
    console.print(f"TPC-H files {escape(str(gen.directory))}: {files}; tables: {tables}", highlight=False)
    console.print(
        f"proxy {escape(proxy_uri)} (config {escape(str(mesh))}; serve it again with "
        f"hivemesh proxy --config {escape(str(mesh))} --port 9083)",
        highlight=False,
    )
    console.print(placements_table(placements))
    console.print(f"SHOW DATABASES through the proxy: {escape(', '.join(databases))}", highlight=False)
    routed = ", ".join(f"{n} to {escape(m)}" for m, n in sorted(calls.items()))
    console.print(f"metastore calls the proxy routed: {routed}", highlight=False)
