"""``hivemesh quickstart --delta``: TPC-H loaded into Hive tables in one zone, replicated into
Delta Lake tables in another, and queried there with Spark and Delta.

Two hivemesh metastores on SQLite stand for two zones, each with its own store and warehouse
under ``DATA_DIR/delta-zones/<zone>/``: ``onprem`` holds the Hive ORC tables, ``lake`` their Delta
replicas. Steps:

1. generate the TPC-H files (shared with the plain quickstart: ``DATA_DIR/tpch/sf<scale>``);
2. serve both zones' metastores; load the tables into ``onprem``'s database ``tpch`` with a
   SparkSession bound to it (Hive ORC tables, as the plain quickstart loads them);
3. run the ``format: delta`` replication policy of ``DATA_DIR/delta-zones/mesh.yaml`` once
   (``hivemesh replicate run --once`` in this process): every table becomes a Delta table in
   ``lake`` (registered in its metastore, provider ``delta``);
4. with a SparkSession bound to ``lake`` (Delta Lake for Spark on), run the quickstart's queries
   over the Delta tables by name, each checked against the same query over the generated files.

The mesh.yaml keeps working on its own: ``hivemesh replicate run --config
DATA_DIR/delta-zones/mesh.yaml`` follows the Hive tables live once both zones are served
(``hivemesh metastore`` with each zone's store, on the ports written in it). The quickstart's own
metastores stop with it, so the file's header comment says so and gives those commands.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hivemesh.client.metastore import parse_uris
from hivemesh.config import MetastoreConfig
from hivemesh.metastore.service import MetastoreService
from hivemesh.quickstart.load import LoadResult, create_database, load_table, register_file_views
from hivemesh.quickstart.queries import QUERIES, QueryResult, run_query
from hivemesh.quickstart.report import print_failure, print_results, step_progress
from hivemesh.quickstart.session import quickstart_session
from hivemesh.quickstart.tpch import TABLES, generate, scale_dir

log = logging.getLogger(__name__)

DATABASE = "tpch"
SOURCE_ZONE = "onprem"
TARGET_ZONE = "lake"
POLICY = "tpch-as-delta"


def zones_dir(data_dir: Path) -> Path:
    """Where the two zones and mesh.yaml live."""
    return Path(data_dir).resolve() / "delta-zones"


def _serve(stack: ExitStack, directory: Path) -> MetastoreService:
    (directory / "warehouse").mkdir(parents=True, exist_ok=True)
    cfg = MetastoreConfig(
        host="127.0.0.1",
        port=0,
        db=f"sqlite:///{directory / 'metastore.db'}",
        warehouse=str(directory / "warehouse"),
    )
    service = MetastoreService(cfg).start()
    stack.callback(service.stop)
    return service


def write_mesh_config(data_dir: Path, uris: dict[str, str]) -> Path:
    """``DATA_DIR/delta-zones/mesh.yaml``: the two zones (their metastores at ``uris``) and the
    ``format: delta`` policy from ``onprem`` to ``lake``. Returns its path."""
    base = zones_dir(data_dir)
    doc = {
        "zones": {
            z: {"metastore": uris[z], "warehouse": f"file:{base / z / 'warehouse'}"}
            for z in (SOURCE_ZONE, TARGET_ZONE)
        },
        "replication": {
            "store": f"sqlite:///{base / 'replication.db'}",
            "policies": [
                {
                    "name": POLICY,
                    "source": SOURCE_ZONE,
                    "target": TARGET_ZONE,
                    "databases": [DATABASE],
                    "format": "delta",
                }
            ],
        },
    }
    base.mkdir(parents=True, exist_ok=True)
    path = base / "mesh.yaml"
    header = [
        f"hivemesh quickstart --delta: Hive tables of zone {SOURCE_ZONE} kept as Delta tables in zone "
        f"{TARGET_ZONE}.",
        "The metastores on the ports below were the quickstart's own and stopped when it ended.",
        "To follow the Hive tables live, serve both zones on those ports, then run the replicator:",
    ]
    for z in (SOURCE_ZONE, TARGET_ZONE):
        port = parse_uris(uris[z])[0][1]
        header.append(
            f"  hivemesh metastore --db sqlite:///{base / z / 'metastore.db'} "
            f"--warehouse {base / z / 'warehouse'} --port {port} &"
        )
    header.append(f"  hivemesh replicate run --config {path}")
    path.write_text(
        "".join(f"# {line}\n" for line in header) + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8"
    )
    return path


def _replicas(uri: str) -> list[tuple[str, int, int, str]]:
    """``(table, Delta version, data files, location)`` of each replica in the lake zone."""
    from deltalake import DeltaTable

    from hivemesh.client.metastore import MetastoreClient
    from hivemesh.storage.locations import local_path

    out = []
    with MetastoreClient(uri) as client:
        for name in sorted(client.hms.get_all_tables(DATABASE)):
            loc = client.hms.get_table(DATABASE, name).sd.location
            dt = DeltaTable(local_path(loc))
            out.append((name, dt.version(), len(dt.file_uris()), loc))
    return out


def run_delta(scale: float, data_dir: Path, *, console: Console | None = None) -> int:
    """Run the Delta quickstart; 0 when every query over the Delta tables matches the files, 1
    otherwise (failures are logged and printed). Creates and stops its own SparkSessions: call it
    in a process without one."""
    from hivemesh.replication.config import load_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore

    console = console or Console()
    data_dir = Path(data_dir).resolve()
    files_dir = scale_dir(data_dir, scale)
    base = zones_dir(data_dir)
    started = time.perf_counter()
    loads: list[LoadResult] = []
    results: list[QueryResult] = []
    replicate_s = 0.0
    with ExitStack() as stack:
        progress = stack.enter_context(step_progress(console))
        task = progress.add_task("starting", total=3 + len(TABLES) + len(QUERIES))
        try:
            progress.update(task, description=f"generating TPC-H sf{scale:g}")
            generate(scale, files_dir)
            progress.advance(task)

            progress.update(task, description="starting the zones' metastores and Spark")
            services = {z: _serve(stack, base / z) for z in (SOURCE_ZONE, TARGET_ZONE)}
            mesh = write_mesh_config(data_dir, {z: s.uri for z, s in services.items()})
            with ExitStack() as load_stack:
                spark = quickstart_session(services[SOURCE_ZONE].uri, base / SOURCE_ZONE, delta=True)
                load_stack.callback(spark.stop)
                create_database(spark, DATABASE)
                for table in TABLES:
                    progress.update(task, description=f"loading {DATABASE}.{table} into zone {SOURCE_ZONE}")
                    loads.append(load_table(spark, files_dir, DATABASE, table))
                    progress.advance(task)

            progress.update(
                task, description=f"replicating {DATABASE} into Delta tables in zone {TARGET_ZONE}"
            )
            cfg = load_replication_config(mesh)
            store = ReplicationStore(cfg.replication.store)
            t0 = time.perf_counter()
            try:
                failures = run_once(cfg, store)
            finally:
                store.dispose()
            replicate_s = time.perf_counter() - t0
            if failures:
                raise RuntimeError(f"replication failed: {failures[POLICY]}")
            progress.advance(task)

            progress.update(task, description=f"starting Spark with Delta on zone {TARGET_ZONE}")
            spark = quickstart_session(services[TARGET_ZONE].uri, base / TARGET_ZONE, delta=True)
            stack.callback(spark.stop)
            views = register_file_views(spark, files_dir)
            progress.advance(task)
            for query in QUERIES:
                progress.update(task, description=f"query {query.name} on the Delta tables")
                results.append(run_query(spark, query, DATABASE, views))
                progress.advance(task)
            replicas = _replicas(services[TARGET_ZONE].uri)
            progress.update(task, description="done")
        except Exception as e:
            print_failure(console, progress, "quickstart --delta", e)
            return 1
    elapsed = time.perf_counter() - started
    _print_summary(console, loads, replicas, replicate_s, mesh, results, elapsed)
    matched = sum(r.match for r in results)
    return 0 if matched == len(results) else 1


def _print_summary(
    console: Console,
    loads: list[LoadResult],
    replicas: list[tuple[str, int, int, str]],
    replicate_s: float,
    mesh: Path,
    results: list[QueryResult],
    elapsed: float,
) -> None:
    loaded = [x for x in loads if x.loaded]
    console.print(
        f"Hive tables {DATABASE}.* in zone {SOURCE_ZONE}: "
        + (f"{len(loaded)} loaded in {sum(x.seconds for x in loaded):.1f} s" if loaded else "all reused")
        + f"; replicated as Delta tables into zone {TARGET_ZONE} in {replicate_s:.1f} s "
        f"(policy {POLICY} of {escape(str(mesh))})",
        highlight=False,
    )
    table = Table(title=f"Delta replicas in zone {TARGET_ZONE}")
    for col in ("table", "Delta version", "files", "location"):
        table.add_column(col)
    for name, version, files, loc in replicas:
        table.add_row(f"{DATABASE}.{name}", str(version), str(files), escape(loc))
    console.print(table)
    print_results(console, results, title=f"Delta tables vs Parquet files, {elapsed:.0f} s")
