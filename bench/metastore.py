"""hmsbench-style metastore benchmark: hivemesh (SQLite, PostgreSQL) against the real Apache HMS 2.3.10.

Usage::

    python bench/metastore.py [--quick] [--only sqlite,postgres,java] [--json out.json]

Starts each server in turn (a fresh SQLite file, a fresh PostgreSQL database, a fresh Derby-backed
HMS 2.3.10 from the PySpark wheel's jars), runs the same workload through the same Python Thrift
client against it (``hive_metastore`` bindings, TBinaryProtocolAccelerated, unframed), reads its
resident memory, stops it, and prints milliseconds per operation with the ratio to the real HMS
(Java time / hivemesh time: above 1 means hivemesh is faster). A second table shows how
``get_partitions_by_filter`` grows with the number of partitions of a table.

The workload (hmsbench-like): get_table, get_all_databases, create_table, drop_table,
add_partitions of 1,000 (``add_partitions_req`` with ``needResult``, as Spark's Hive client sends it),
get_partitions of 1,000, get_partition_names, get_partitions_by_filter, and 16 concurrent clients,
each with its own connection, calling get_table for a fixed time. Tables have Spark's shape for an
ORC Hive table (16 columns, ORC SerDe, a few table parameters, partitioned by ``ds string, hr int``)
and every partition carries its own full storage descriptor with an explicit location, as Spark
sends them. PostgreSQL and Java are skipped, with a printed note, when they are not available.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support (the server harnesses shared with the tests)

from bench import runner  # noqa: E402
from hive_metastore.ttypes import (  # noqa: E402
    AddPartitionsRequest,
    Database,
    FieldSchema,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402
from tests.support.javahms import JavaHMS, java_available, rss_bytes  # noqa: E402
from tests.support.servers import HivemeshProcess, ThriftClient  # noqa: E402

SERVERS = runner.SERVERS
LABELS = {"sqlite": "hivemesh-sqlite", "postgres": "hivemesh-postgres", "java": "HMS 2.3.10"}
DB = "bench"
HOURS = 10  # partitions per day: values of the second partition key hr = 0..9
FIRST_DAY = dt.date(2000, 1, 1)

ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
COLUMNS = [
    ("event_id", "bigint"),
    ("user_id", "bigint"),
    ("session_id", "string"),
    ("event_type", "string"),
    ("event_time", "timestamp"),
    ("event_date", "date"),
    ("country", "string"),
    ("device", "string"),
    ("app_version", "string"),
    ("duration_ms", "int"),
    ("revenue", "decimal(18,2)"),
    ("score", "double"),
    ("is_test", "boolean"),
    ("tags", "array<string>"),
    ("attributes", "map<string,string>"),
    ("geo", "struct<lat:double,lon:double,city:string>"),
]
PART_KEYS = [("ds", "string"), ("hr", "int")]


# ---------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    """Repetitions of each operation (after warm-up) and the sizes of the filter-growth run."""

    get_table: int
    get_all_databases: int
    create_drop: int
    add_partitions: int
    add_partitions_java: int
    get_partitions: int
    get_partition_names: int
    by_filter: int
    warmup: int  # calls before timing cheap operations (the JVM needs them to compile its hot paths)
    warmup_heavy: int  # before create/drop pairs, get_partitions.1000 and each filter-growth size
    concurrency_seconds: float
    growth_sizes: tuple[int, ...]
    growth_sizes_java_max: int
    growth_reps: int


FULL = Settings(
    get_table=300,
    get_all_databases=300,
    create_drop=60,
    add_partitions=5,
    add_partitions_java=2,
    get_partitions=20,
    get_partition_names=50,
    by_filter=50,
    warmup=100,
    warmup_heavy=10,
    concurrency_seconds=10.0,
    growth_sizes=(1_000, 10_000, 100_000),
    growth_sizes_java_max=10_000,
    growth_reps=20,
)
QUICK = Settings(
    get_table=50,
    get_all_databases=50,
    create_drop=10,
    add_partitions=2,
    add_partitions_java=1,
    get_partitions=5,
    get_partition_names=10,
    by_filter=10,
    warmup=10,
    warmup_heavy=2,
    concurrency_seconds=2.0,
    growth_sizes=(1_000, 3_000),
    growth_sizes_java_max=1_000,
    growth_reps=5,
)


# ---------------------------------------------------------------------------------------------- objects
def day(i: int) -> str:
    """The ``i``-th partition day after FIRST_DAY, ISO format (``2024-01-01``)."""
    return (FIRST_DAY + dt.timedelta(days=i)).isoformat()


def storage(location: str | None) -> StorageDescriptor:
    """An ORC storage descriptor with the benchmark's 16 columns."""
    return StorageDescriptor(
        cols=[FieldSchema(name, typ, f"{name} column") for name, typ in COLUMNS],
        location=location,
        inputFormat=ORC_IN,
        outputFormat=ORC_OUT,
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(name=None, serializationLib=ORC_SERDE, parameters={"serialization.format": "1"}),
        bucketCols=[],
        sortCols=[],
        parameters={},
        storedAsSubDirectories=False,
    )


def make_table(name: str, location: str) -> Table:
    """A managed, partitioned ORC table as Spark's Hive client creates it (explicit location)."""
    return Table(
        tableName=name,
        dbName=DB,
        owner="bench",
        ownerType=1,  # USER
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=storage(location),
        partitionKeys=[FieldSchema(k, t, None) for k, t in PART_KEYS],
        parameters={
            "comment": "hivemesh benchmark table",
            "orc.compress": "ZSTD",
            "spark.sql.create.version": "4.0.0",
            "created_by": "bench/metastore.py",
        },
        tableType="MANAGED_TABLE",
        temporary=False,
    )


def make_partitions(table_location: str, name: str, first_day: int, days: int) -> list[Partition]:
    """``days * HOURS`` partitions, each with its own full storage descriptor and location."""
    parts = []
    for d in range(first_day, first_day + days):
        ds = day(d)
        for hr in range(HOURS):
            parts.append(
                Partition(
                    values=[ds, str(hr)],
                    dbName=DB,
                    tableName=name,
                    createTime=0,
                    lastAccessTime=0,
                    sd=storage(f"{table_location}/ds={ds}/hr={hr}"),
                    parameters={"numFiles": "1", "numRows": "1000", "totalSize": "65536", "rawDataSize": "0"},
                )
            )
    return parts


# ---------------------------------------------------------------------------------------------- timing
@dataclass
class Timing:
    """Samples of one operation, seconds each."""

    samples: list[float] = field(default_factory=list)  # seconds

    def summary(self) -> dict[str, float]:
        """``mean_ms``, ``p50_ms`` and the sample count ``n``."""
        ms = [s * 1000 for s in self.samples]
        return {"mean_ms": statistics.fmean(ms), "p50_ms": statistics.median(ms), "n": len(ms)}


def timed(fn: Callable[[], Any], reps: int, warmup: int = 0) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``reps`` times timed."""
    for _ in range(warmup):
        fn()
    t = Timing()
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.samples.append(time.perf_counter() - t0)
    return t


def _concurrent_worker(
    host: str, port: int, table: str, seconds: float, warmup: int, barrier: Any, out: Any
) -> list[float] | None:
    """One client: connect, warm up, wait for the others, then get_table for ``seconds``."""
    lat: list[float] = []
    with ThriftClient(host, port) as client:
        for _ in range(warmup):
            client.get_table(DB, table)
        barrier.wait()
        end = time.perf_counter() + seconds
        now = time.perf_counter()
        while now < end:
            client.get_table(DB, table)
            t1 = time.perf_counter()
            lat.append(t1 - now)
            now = t1
    if out is not None:
        out.put(lat)
        return None
    return lat


def concurrent_get_table(
    host: str, port: int, table: str, clients: int, seconds: float, mode: str
) -> dict[str, float]:
    """``clients`` connections calling get_table for ``seconds``: throughput and per-call latency."""
    lats: list[list[float]] = []
    if mode == "threads":
        barrier = threading.Barrier(clients + 1)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                lats.append(_concurrent_worker(host, port, table, seconds, 5, barrier, None) or [])
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                barrier.abort()

        threads = [threading.Thread(target=run, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            for t in threads:
                t.join()
            raise errors[0] if errors else RuntimeError("a concurrent client failed") from None
        t0, cpu0 = time.perf_counter(), time.process_time()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        client_cpu = time.process_time() - cpu0
        if errors:
            raise errors[0]
    else:
        client_cpu = None
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(clients + 1)
        queue = ctx.Queue()
        procs = [
            ctx.Process(
                target=_concurrent_worker, args=(host, port, table, seconds, 5, barrier, queue), daemon=True
            )
            for _ in range(clients)
        ]
        for p in procs:
            p.start()
        barrier.wait(timeout=120)
        t0 = time.perf_counter()
        for _ in procs:
            lats.append(queue.get(timeout=seconds + 120))
        wall = time.perf_counter() - t0
        for p in procs:
            p.join(timeout=30)
        if any(p.exitcode for p in procs):
            raise RuntimeError(f"a concurrent client failed: exit codes {[p.exitcode for p in procs]}")
    flat = [x * 1000 for lat in lats for x in lat]
    return {
        "ops": len(flat),
        "ops_per_s": len(flat) / wall,
        "mean_ms": statistics.fmean(flat),
        "p50_ms": statistics.median(flat),
        "clients": clients,
        "seconds": wall,
        # CPU of the threaded client (all 16 threads share one GIL): its share of one CPU and per call
        "client_cpu_share": client_cpu / wall if client_cpu is not None else None,
        "client_cpu_us_per_call": client_cpu / len(flat) * 1e6 if client_cpu is not None and flat else None,
    }


# ---------------------------------------------------------------------------------------------- servers
@dataclass
class Server:
    """One metastore under test: its name, Thrift address and process id (for its memory)."""

    name: str
    host: str
    port: int
    pid: int
    note: str = ""
    pg_db: str | None = None


def _pg_available() -> bool:
    from tests.conftest import postgres_available

    return postgres_available()


def _pg_drop(url: str) -> None:
    from tests.conftest import drop_pg_database

    drop_pg_database(url)


def _pg_backends_pss(db_url: str) -> tuple[int, int] | None:
    """(number, total PSS bytes) of the PostgreSQL backends connected to ``db_url``'s database.

    PSS shares shared_buffers out between the processes touching it, so the sum is a fair estimate
    of what the PostgreSQL side costs for this metastore. ``None`` if /proc is not readable.
    """
    import sqlalchemy as sa
    from tests.conftest import pg_admin_url

    name = sa.make_url(db_url).database
    eng = sa.create_engine(pg_admin_url())
    try:
        with eng.connect() as c:
            pids = list(
                c.execute(
                    sa.text("SELECT pid FROM pg_stat_activity WHERE datname = :n"), {"n": name}
                ).scalars()
            )
    finally:
        eng.dispose()
    total = 0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
    except OSError:
        return None
    return len(pids), total


def peak_rss_bytes(pid: int) -> int:
    """``VmHWM`` (peak resident set size) of ``pid`` in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmHWM for pid {pid}")


def _tree_pids(pid: int) -> list[int]:
    """``pid`` and its worker processes (``hivemesh metastore --workers N`` forks them)."""
    import psutil

    return [pid, *(c.pid for c in psutil.Process(pid).children())]


@contextmanager
def start_server(name: str, workdir: Path, java_opts: Sequence[str], workers: int = 1) -> Iterator[Server]:
    """Start one of the three servers on a fresh store; stop it (and drop its database) afterwards."""
    if name in ("sqlite", "postgres"):
        base = workdir / name
        base.mkdir(parents=True, exist_ok=True)
        if name == "sqlite":
            url = f"sqlite:///{base / 'metastore.db'}"
        else:
            from tests.conftest import make_pg_database

            url = make_pg_database("hivemesh_bench")
        try:
            args = ["--workers", str(workers)]
            with HivemeshProcess(url, base / "warehouse", base / "metastore.log", extra_args=args) as proc:
                assert proc.proc is not None
                yield Server(
                    name, proc.host, proc.port, proc.proc.pid, pg_db=url if name == "postgres" else None
                )
        finally:
            if name == "postgres":
                _pg_drop(url)
    else:
        hms = JavaHMS(base_dir=workdir / "java", log_level="WARN", java_opts=java_opts)
        try:
            hms.start(timeout=300)
            assert hms.pid is not None
            yield Server(name, hms.host, hms.port, hms.pid, note=f"started in {hms.startup_seconds:.1f} s")
        except BaseException:
            hms.kill()
            raise
        finally:
            hms.stop()


# ---------------------------------------------------------------------------------------------- workload
def _location(client: Any, table: str) -> str:
    return client.get_table(DB, table).sd.location


def add_parts(client: Any, table: str, parts: list[Partition]) -> int:
    """``add_partitions_req`` as Spark's Hive client sends it (results requested)."""
    res = client.add_partitions_req(
        AddPartitionsRequest(dbName=DB, tblName=table, parts=parts, ifNotExists=False, needResult=True)
    )
    return len(res.partitions or [])


def run_workload(srv: Server, cfg: Settings, mode: str, say: Callable[[str], None]) -> dict[str, Any]:
    """The main workload on one server; returns {op: summary} plus the concurrency figures."""
    ops: dict[str, dict[str, float]] = {}
    with ThriftClient(srv.host, srv.port) as c:
        c.create_database(Database(name=DB, description="hivemesh benchmark", parameters={}))
        db_loc = c.get_database(DB).locationUri.rstrip("/")
        c.create_table(make_table("lookup", f"{db_loc}/lookup"))

        say("get_table, get_all_databases")
        ops["get_table"] = timed(lambda: c.get_table(DB, "lookup"), cfg.get_table, cfg.warmup).summary()
        ops["get_all_databases"] = timed(c.get_all_databases, cfg.get_all_databases, cfg.warmup).summary()

        say("create_table, drop_table")
        for i in range(cfg.warmup_heavy):
            c.create_table(make_table(f"warm_{i}", f"{db_loc}/warm_{i}"))
            c.drop_table(DB, f"warm_{i}", True)
        names = [f"ct_{i}" for i in range(cfg.create_drop)]
        tables = [make_table(n, f"{db_loc}/{n}") for n in names]
        it = iter(tables)
        ops["create_table"] = timed(lambda: c.create_table(next(it)), len(tables)).summary()
        it_names = iter(names)
        ops["drop_table"] = timed(lambda: c.drop_table(DB, next(it_names), True), len(names)).summary()

        reps = cfg.add_partitions_java if srv.name == "java" else cfg.add_partitions
        say(f"add_partitions.1000 x {reps}")
        add = Timing()
        for i in range(reps):
            tname = f"ap_{i}"
            c.create_table(make_table(tname, f"{db_loc}/{tname}"))
            parts = make_partitions(_location(c, tname), tname, 0, 1000 // HOURS)
            t0 = time.perf_counter()
            n = add_parts(c, tname, parts)
            add.samples.append(time.perf_counter() - t0)
            assert n == 1000, f"add_partitions returned {n} partitions"
        ops["add_partitions.1000"] = {**add.summary(), "first_s": add.samples[0]}

        say("get_partitions, get_partition_names, get_partitions_by_filter")
        got = c.get_partitions(DB, "ap_0", -1)
        assert len(got) == 1000, f"get_partitions returned {len(got)}"
        assert got[0].sd and got[0].sd.cols and len(got[0].sd.cols) == len(COLUMNS)
        ops["get_partitions.1000"] = timed(
            lambda: c.get_partitions(DB, "ap_0", -1), cfg.get_partitions, cfg.warmup_heavy
        ).summary()
        assert len(c.get_partition_names(DB, "ap_0", -1)) == 1000
        ops["get_partition_names.1000"] = timed(
            lambda: c.get_partition_names(DB, "ap_0", -1), cfg.get_partition_names, cfg.warmup
        ).summary()
        rng = random.Random(7)

        def by_filter() -> None:
            res = c.get_partitions_by_filter(DB, "ap_0", f'ds = "{day(rng.randrange(100))}"', -1)
            assert len(res) == HOURS, len(res)

        ops["get_partitions_by_filter.10of1000"] = timed(by_filter, cfg.by_filter, cfg.warmup).summary()

    say(f"16 concurrent clients ({mode}) calling get_table for {cfg.concurrency_seconds:g} s")
    conc = concurrent_get_table(srv.host, srv.port, "lookup", 16, cfg.concurrency_seconds, mode)
    return {"ops": ops, "concurrency": conc}


def run_filter_growth(
    srv: Server, cfg: Settings, first_add_s: float, say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], str | None]:
    """get_partitions_by_filter at growing table sizes, adding partitions in batches of 1,000."""
    sizes = [s for s in cfg.growth_sizes if srv.name != "java" or s <= cfg.growth_sizes_java_max]
    skipped = [s for s in cfg.growth_sizes if s not in sizes]
    note = None
    if skipped:
        note = (
            f"HMS 2.3.10 skipped at {', '.join(f'{s:,}' for s in skipped)} partitions "
            f"(adding partitions costs it ~14 s per 1,000)"
        )
    out: list[dict[str, Any]] = []
    # The table starts as ap_0 of the main workload: 1,000 partitions (days 0-99) added in one call.
    tname = "ap_0"
    rng = random.Random(11)
    with ThriftClient(srv.host, srv.port, timeout_ms=600_000) as c:
        loc = _location(c, tname)
        have = len(c.get_partition_names(DB, tname, -1))
        for size in sizes:
            adds: list[float] = [first_add_s] if have == size == 1000 else []
            if have < size:
                say(f"filter growth: adding partitions up to {size:,}")
            while have < size:
                parts = make_partitions(loc, tname, have // HOURS, 1000 // HOURS)
                t0 = time.perf_counter()
                add_parts(c, tname, parts)
                adds.append(time.perf_counter() - t0)
                have += len(parts)
            days_total = have // HOURS
            span = max(1, days_total // 100)

            def eq(days_total: int = days_total) -> None:
                d = rng.randrange(days_total)
                res = c.get_partitions_by_filter(DB, tname, f'ds = "{day(d)}" and hr = 5', -1)
                assert len(res) == 1, f"equality filter returned {len(res)} partitions"

            def rangef(days_total: int = days_total, span: int = span) -> None:
                d = rng.randrange(days_total - span + 1)
                flt = f'ds >= "{day(d)}" and ds < "{day(d + span)}"'
                res = c.get_partitions_by_filter(DB, tname, flt, -1)
                assert len(res) == span * HOURS, f"range filter returned {len(res)} partitions"

            warm = cfg.warmup_heavy
            out.append(
                {
                    "partitions": have,
                    "eq": timed(eq, cfg.growth_reps, warm).summary(),
                    "range": timed(rangef, cfg.growth_reps, warm).summary(),
                    "range_rows": span * HOURS,
                    "add_1000_s": statistics.fmean(adds) if adds else None,
                }
            )
    return out, note


def bench_server(
    name: str,
    cfg: Settings,
    mode: str,
    workdir: Path,
    java_opts: Sequence[str],
    console: Console,
    workers: int = 1,
) -> dict[str, Any]:
    """Start metastore ``name`` (hivemesh with ``workers`` processes) and run every operation of
    ``mode`` against it; its results dict."""
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"  [dim]{LABELS[name]}: {msg}[/dim]")

    with start_server(name, workdir, java_opts, workers) as srv:
        if srv.note:
            say(srv.note)
        res = run_workload(srv, cfg, mode, say)
        first_add_s = res["ops"]["add_partitions.1000"]["first_s"]
        res["growth"], res["growth_note"] = run_filter_growth(srv, cfg, first_add_s, say)
        pids = _tree_pids(srv.pid) if name != "java" else [srv.pid]  # a parent and its workers
        res["rss_mb"] = sum(rss_bytes(p) for p in pids) / 2**20
        res["peak_rss_mb"] = sum(peak_rss_bytes(p) for p in pids) / 2**20
        if srv.pg_db:
            pss = _pg_backends_pss(srv.pg_db)
            if pss is not None:
                res["pg_backends"], res["pg_backends_pss_mb"] = pss[0], pss[1] / 2**20
    res["wall_s"] = time.perf_counter() - t_start
    say(f"done in {res['wall_s']:.0f} s")
    return res


# ---------------------------------------------------------------------------------------------- report
OP_ROWS = [
    ("get_table", "get_table", "5x"),
    ("get_all_databases", "get_all_databases", ""),
    ("create_table", "create_table", "5x"),
    ("drop_table", "drop_table", "5x"),
    ("add_partitions.1000", "add_partitions.1000", "20x"),
    ("get_partitions.1000", "get_partitions.1000", "3x"),
    ("get_partition_names.1000", "get_partition_names.1000", ""),
    ("get_partitions_by_filter.10of1000", "get_partitions_by_filter (10 of 1,000)", ""),
]


def _ms(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _ratio(r: float | None, aim: str) -> str:
    if r is None:
        return "-"
    text = f"{r:.1f}x" if r < 100 else f"{r:.0f}x"
    if aim:
        need = float(aim.rstrip("x"))
        return f"[green]{text}[/green]" if r >= need else f"[red]{text}[/red]"
    return text


def render(results: dict[str, Any], skipped: dict[str, str], console: Console, mode: str) -> None:
    """Print the results table (ms per call and ratios against the Java HMS)."""

    def cell(server: str, fn: Callable[[dict[str, Any]], str]) -> str:
        if server in skipped:
            return "[dim]skipped[/dim]"
        if "error" in results.get(server, {}):
            return "[red]failed[/red]"
        return fn(results[server])

    def ratio(server: str, fn: Callable[[dict[str, Any]], float], invert: bool, aim: str) -> str:
        ok = {s for s in (server, "java") if s in results and "error" not in results[s]}
        if ok != {server, "java"}:
            return "-"
        a, b = fn(results["java"]), fn(results[server])
        return _ratio((b / a if invert else a / b) if a and b else None, aim)

    t = RichTable(
        title="Metastore operations: ms per call, mean / p50 (ratio = HMS 2.3.10 mean / hivemesh mean; >1 = hivemesh faster)",
        title_justify="left",
    )
    t.add_column("operation")
    for s in SERVERS:
        t.add_column(LABELS[s], justify="right")
    t.add_column("ratio sqlite", justify="right")
    t.add_column("ratio postgres", justify="right")
    t.add_column("aim", justify="right")
    for key, label, aim in OP_ROWS:
        t.add_row(
            label,
            *(
                cell(s, lambda r, k=key: f"{_ms(r['ops'][k]['mean_ms'])} / {_ms(r['ops'][k]['p50_ms'])}")
                for s in SERVERS
            ),
            *(ratio(s, lambda r, k=key: r["ops"][k]["mean_ms"], False, aim) for s in ("sqlite", "postgres")),
            f"≥{aim}" if aim else "",
        )
    t.add_section()
    t.add_row(
        f"get_table, 16 clients ({mode}): ms per call",
        *(
            cell(s, lambda r: f"{_ms(r['concurrency']['mean_ms'])} / {_ms(r['concurrency']['p50_ms'])}")
            for s in SERVERS
        ),
        *(ratio(s, lambda r: r["concurrency"]["mean_ms"], False, "") for s in ("sqlite", "postgres")),
        "",
    )
    t.add_row(
        f"get_table, 16 clients ({mode}): ops/s",
        *(cell(s, lambda r: f"{r['concurrency']['ops_per_s']:,.0f}") for s in SERVERS),
        *(ratio(s, lambda r: r["concurrency"]["ops_per_s"], True, "") for s in ("sqlite", "postgres")),
        "",
    )
    t.add_section()
    t.add_row(
        "RSS after the run, MB (ratio = Java / hivemesh)",
        *(cell(s, lambda r: f"{r['rss_mb']:,.0f}") for s in SERVERS),
        *(ratio(s, lambda r: r["rss_mb"], False, "3x") for s in ("sqlite", "postgres")),
        "≥3x",
    )
    t.add_row(
        "peak RSS, MB",
        *(cell(s, lambda r: f"{r['peak_rss_mb']:,.0f}") for s in SERVERS),
        *(ratio(s, lambda r: r["peak_rss_mb"], False, "") for s in ("sqlite", "postgres")),
        "",
    )
    console.print(t)

    g = RichTable(
        title="get_partitions_by_filter as the table grows: ms per call, mean / p50",
        title_justify="left",
        caption='eq: ds = "<day>" and hr = 5 (1 partition); range: ds >= "<day>" and ds < "<day + 1% of the days>" '
        "(1% of the partitions, so its time follows the rows returned)",
        caption_justify="left",
    )
    for col, just in [
        ("server", "left"),
        ("partitions", "right"),
        ("eq (1 partition)", "right"),
        ("range (~1%)", "right"),
        ("range rows", "right"),
        ("add_partitions.1000 at this size, s", "right"),
    ]:
        g.add_column(col, justify=just)  # type: ignore[arg-type]
    for s in SERVERS:
        r = results.get(s)
        if s in skipped or r is None or "error" in r:
            continue
        for row in r["growth"]:
            g.add_row(
                LABELS[s],
                f"{row['partitions']:,}",
                f"{_ms(row['eq']['mean_ms'])} / {_ms(row['eq']['p50_ms'])}",
                f"{_ms(row['range']['mean_ms'])} / {_ms(row['range']['p50_ms'])}",
                f"{row['range_rows']:,}",
                f"{row['add_1000_s']:.2f}" if row["add_1000_s"] is not None else "-",
            )
        if len(r["growth"]) > 1:
            first, last = r["growth"][0], r["growth"][-1]
            growth = last["eq"]["p50_ms"] / first["eq"]["p50_ms"]
            g.add_row(
                LABELS[s],
                f"{first['partitions'] // 1000}k→{last['partitions'] // 1000}k",
                f"x{growth:.2f} (p50)",
                f"x{last['range']['p50_ms'] / first['range']['p50_ms']:.2f} (p50)",
                "",
                "",
                end_section=True,
            )
    console.print(g)


# ---------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the selected servers one after the other, print and save the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runner.add_common_options(ap, "a smoke run (well under a minute per server)")
    ap.add_argument(
        "--concurrency",
        choices=("threads", "processes"),
        default="threads",
        help="run the 16 concurrent get_table clients as threads of this process (default: measured "
        "here, their shared GIL is not the limit; the share of a CPU they use is printed) or as "
        "separate processes",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="hivemesh metastore processes serving the port (--workers; RSS is their sum; default 1)",
    )
    args = ap.parse_args(argv)
    skipped = runner.skipped_servers(ap, args.only, _pg_available, java_available)
    cfg = QUICK if args.quick else FULL
    console = runner.wide_console()
    load = runner.print_banner(console, "hivemesh metastore benchmark", args.quick, skipped, LABELS)
    t0 = time.perf_counter()
    results, failed = runner.run_servers(
        console,
        skipped,
        LABELS,
        "hivemesh-bench-",
        args.keep,
        lambda s, workdir: bench_server(
            s, cfg, args.concurrency, workdir, args.java_opts.split(), console, args.workers
        ),
    )

    console.print()
    render(results, skipped, console, args.concurrency)
    for s in SERVERS:
        r = results.get(s, {})
        if r.get("growth_note"):
            console.print(f"note: {r['growth_note']}.")
        if "pg_backends_pss_mb" in r:
            console.print(
                f"note: {LABELS[s]} RSS is hivemesh's (a parent and its workers summed with --workers); "
                f"its {r['pg_backends']} PostgreSQL backends add {r['pg_backends_pss_mb']:,.0f} MB PSS (SQLite and Derby run inside their server)."
            )
    if "java" in results and "error" not in results["java"]:
        opts = args.java_opts or "none (JVM default heap: up to 1/4 of RAM)"
        console.print(f"note: HMS 2.3.10 ran on embedded Derby; JVM options: {opts}.")
    console.print(
        f"note: the 16 concurrent clients ran as {args.concurrency}, each with its own connection, "
        f"on the same {os.cpu_count()} CPUs as the server; hivemesh ran {args.workers} worker process(es)."
    )
    for s in SERVERS:
        conc = results.get(s, {}).get("concurrency") or {}
        if conc.get("client_cpu_share") is not None:
            share = conc["client_cpu_share"]
            verdict = (
                "its GIL was not the limit"
                if share < 0.6
                else "[yellow]close to one CPU: the client may be the limit, try --concurrency processes[/yellow]"
            )
            console.print(
                f"note: with {LABELS[s]} the threaded client used {share:.0%} of one CPU "
                f"({conc['client_cpu_us_per_call']:.0f} µs per call): {verdict}."
            )
    end_load = runner.print_total(console, t0)

    if args.json_out:
        doc = {
            "quick": args.quick,
            "concurrency_mode": args.concurrency,
            "cpus": os.cpu_count(),
            "load_average_start": load,
            "load_average_end": end_load,
            "skipped": skipped,
            "servers": results,
        }
        args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
