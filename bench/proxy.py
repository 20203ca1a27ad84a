"""The federation proxy's overhead: the same calls direct to a metastore and through ``hivemesh proxy``.

Usage::

    python bench/proxy.py [--quick] [--partitions 1000] [--seconds 6] [--clients 32] [--procs 4]
                          [--postgres] [--java/--no-java] [--variants/--no-variants] [--json out.json]

One ``hivemesh metastore`` (SQLite in a temp directory, or a fresh PostgreSQL database with
``--postgres``) holds a database with a small table ``t`` and a partitioned table ``p`` of 1,000
partitions. ``hivemesh proxy`` runs in front of it with its default configuration (audit log on,
log level INFO: one audit line per call, written to the proxy's log file); with ``--variants`` two
more proxies run beside it: one at log level WARNING (no audit lines are written) and one with the
same metastore also federated under the prefix ``fed_`` (read only), whose calls on ``fed_bench``
take the name-rewriting path. Every route is driven by the same Python Thrift client in the same
run, so the differences are the proxy's cost:

- one client: p50 and p99 ms per call of get_table, get_partitions (all partitions) and
  get_all_databases, the routes interleaved in rounds, and the p50 the proxy adds;
- 32 concurrent clients (threads of a few client processes, each client with its own connection)
  for a fixed time per case: calls per second and the ratio proxy / direct; every route runs
  under the same load generator, the routes taking turns;
- memory: the proxy's and the metastore's RSS after start and their peak sampled during the
  32-client load, and (``--java``, the default) the same for the real HMS 2.3.10 holding the same
  data under the same load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing
import os
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support (the server harnesses shared with the tests)

import psutil  # noqa: E402
from bench import runner  # noqa: E402
from hive_metastore.ttypes import (  # noqa: E402
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
from tests.support.proxy import ProxyProcess, write_mesh  # noqa: E402
from tests.support.servers import HivemeshProcess, ThriftClient  # noqa: E402

DB = "bench"
FED_PREFIX = "fed_"
HOURS = 10  # partitions per day (hr = 0..9)
BATCH = 100  # partitions per add_partitions call
FIRST_DAY = dt.date(2000, 1, 1)
OPS = ("get_table", "get_partitions", "get_all_databases")

AIM_ADDED_P50_MS = 0.3
AIM_THROUGHPUT = 0.8
AIMS = (
    f"added p50 < {AIM_ADDED_P50_MS} ms per call; >= {AIM_THROUGHPUT}x direct throughput at 32 clients; "
    "memory a small fraction of a Java metastore"
)

ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
COLUMNS = [
    ("id", "bigint"),
    ("name", "string"),
    ("amount", "decimal(18,2)"),
    ("created", "timestamp"),
    ("tags", "array<string>"),
]
PART_KEYS = [("ds", "string"), ("hr", "int")]


@dataclass(frozen=True)
class Route:
    """One way to reach the metastore: ``key`` (JSON), ``label`` (tables), address, and the
    database name clients use on it (``fed_bench`` on the prefixed route)."""

    key: str
    label: str
    host: str
    port: int
    db: str
    pid: int


# ---------------------------------------------------------------------------------------------- data
def storage(location: str | None) -> StorageDescriptor:
    """An ORC storage descriptor with the benchmark's few columns."""
    return StorageDescriptor(
        cols=[FieldSchema(name, typ, None) for name, typ in COLUMNS],
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


def make_table(name: str, location: str, partitioned: bool) -> Table:
    """A managed ORC table with an explicit location, partitioned by (ds, hr) if asked."""
    return Table(
        tableName=name,
        dbName=DB,
        owner="bench",
        ownerType=1,  # USER
        createTime=int(time.time()),
        lastAccessTime=0,
        retention=0,
        sd=storage(location),
        partitionKeys=[FieldSchema(k, t, None) for k, t in PART_KEYS] if partitioned else [],
        parameters={"comment": "hivemesh proxy benchmark", "orc.compress": "ZSTD"},
        tableType="MANAGED_TABLE",
        temporary=False,
    )


def load_data(host: str, port: int, partitions: int) -> float:
    """Create database ``bench`` with ``t`` and ``p`` (``partitions`` partitions, added in batches
    of BATCH with add_partitions); returns the seconds it took."""
    t0 = time.perf_counter()
    with ThriftClient(host, port, timeout_ms=600_000) as c:
        c.create_database(Database(name=DB, description="hivemesh proxy benchmark", parameters={}))
        loc = c.get_database(DB).locationUri.rstrip("/")
        c.create_table(make_table("t", f"{loc}/t", partitioned=False))
        c.create_table(make_table("p", f"{loc}/p", partitioned=True))
        ploc = c.get_table(DB, "p").sd.location
        parts: list[Partition] = []
        for i in range(partitions):
            ds, hr = (FIRST_DAY + dt.timedelta(days=i // HOURS)).isoformat(), i % HOURS
            parts.append(
                Partition(
                    values=[ds, str(hr)],
                    dbName=DB,
                    tableName="p",
                    createTime=0,
                    lastAccessTime=0,
                    sd=storage(f"{ploc}/ds={ds}/hr={hr}"),
                    parameters={"numFiles": "1", "numRows": "1000", "totalSize": "65536"},
                )
            )
            if len(parts) == BATCH:
                c.add_partitions(parts)
                parts = []
        if parts:
            c.add_partitions(parts)
        got = len(c.get_partition_names(DB, "p", -1))
        assert got == partitions, f"{got} partitions loaded, expected {partitions}"
    return time.perf_counter() - t0


def call_op(client: Any, op: str, db: str) -> Any:
    """One call of ``op`` on ``client`` against database ``db``."""
    if op == "get_table":
        return client.get_table(db, "t")
    if op == "get_partitions":
        return client.get_partitions(db, "p", -1)
    if op == "get_all_databases":
        return client.get_all_databases()
    raise ValueError(op)


# ---------------------------------------------------------------------------------------------- stats
def pct(sorted_ms: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank of an ascending list."""
    return sorted_ms[max(0, math.ceil(q * len(sorted_ms)) - 1)]


def summary(samples_s: Sequence[float]) -> dict[str, float]:
    """p50, p99 and mean in ms, and the sample count."""
    ms = sorted(s * 1000 for s in samples_s)
    return {"p50_ms": pct(ms, 0.5), "p99_ms": pct(ms, 0.99), "mean_ms": statistics.fmean(ms), "n": len(ms)}


# ---------------------------------------------------------------------------------------------- one client
def single_client(
    routes: Sequence[Route], op: str, reps: int, warmup: int, rounds: int, expect: Callable[[Any], None]
) -> dict[str, dict[str, float]]:
    """``reps`` timed calls of ``op`` per route from one client connection per route, after
    ``warmup`` calls; the routes take turns in ``rounds`` rounds, so a change of the machine's
    load falls on every route alike."""
    clients = {r.key: ThriftClient(r.host, r.port) for r in routes}
    samples: dict[str, list[float]] = {r.key: [] for r in routes}
    try:
        for r in routes:
            c = clients[r.key].client
            expect(call_op(c, op, r.db))
            for _ in range(warmup):
                call_op(c, op, r.db)
        per_round = max(1, reps // rounds)
        for _ in range(rounds):
            for r in routes:
                c, out = clients[r.key].client, samples[r.key]
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    call_op(c, op, r.db)
                    out.append(time.perf_counter() - t0)
    finally:
        for tc in clients.values():
            tc.close()
    return {k: summary(v) for k, v in samples.items()}


# ------------------------------------------------------------------------------------------ load generator
class _LoadClient(threading.Thread):
    """One client of a load-generator process: a thread with its own connection to each route
    (opened on first use and kept, as a metastore client keeps its connection)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cases: queue.Queue[Any] = queue.Queue()
        self.conns: dict[tuple[str, int], ThriftClient] = {}

    def run(self) -> None:
        """Thread body: run each queued case on this thread's connections until a None arrives."""
        while True:
            case = self.cases.get()
            if case is None:
                break
            try:
                case.done_calls.append(self._run_case(case))
            except BaseException as e:  # noqa: BLE001 - sent to the parent
                case.errors.append(f"{type(e).__name__}: {e}")
                case.ready.abort()
            finally:
                case.done.release()
        for c in self.conns.values():
            c.close()

    def _run_case(self, case: _Case) -> list[tuple[float, float]]:
        """Warm up, wait for the start, call until the end: (monotonic time done, seconds) per call."""
        key = (case.host, case.port)
        if key not in self.conns:
            self.conns[key] = ThriftClient(case.host, case.port)
        c = self.conns[key].client
        for _ in range(case.warmup):
            call_op(c, case.op, case.db)
        case.ready.wait()
        case.go.wait()
        while time.monotonic() < case.start:
            time.sleep(0.0005)
        out: list[tuple[float, float]] = []
        while True:
            t0 = time.perf_counter()
            call_op(c, case.op, case.db)
            t1 = time.perf_counter()
            done = time.monotonic()
            if done > case.end:
                break  # finished after the end: not counted
            out.append((done, t1 - t0))
        return out


class _Case:
    """One case as the clients of a load-generator process share it."""

    def __init__(self, cmd: tuple[Any, ...], threads: int):
        self.host, self.port, self.op, self.db, self.seconds, self.warmup = cmd
        self.ready = threading.Barrier(threads + 1)
        self.go = threading.Event()
        self.done = threading.Semaphore(0)
        self.start = self.end = 0.0
        self.done_calls: list[list[tuple[float, float]]] = []
        self.errors: list[str] = []


def _loadgen_process(conn: Any, threads: int) -> None:
    """A load-generator process of ``threads`` clients. For each case it is sent (host, port, op,
    db, seconds, warmup): every client warms up on its connection to that address, the process
    answers "ready", and when sent the start time (``time.monotonic()``, one clock for every
    process) every client calls ``op`` until ``start + seconds``; the process then sends back the
    calls each client completed (when, and how long each took), its CPU seconds and any error.
    ``None`` ends it."""
    clients = [_LoadClient() for _ in range(threads)]
    for t in clients:
        t.start()
    while True:
        cmd = conn.recv()
        if cmd is None:
            break
        case = _Case(cmd, threads)
        for t in clients:
            t.cases.put(case)
        try:
            case.ready.wait(timeout=120)
        except threading.BrokenBarrierError:
            case.errors.append("a client did not get ready")
        conn.send("ready")
        case.start = conn.recv()
        case.end = case.start + case.seconds
        cpu0 = time.process_time()
        case.go.set()
        for _ in clients:
            case.done.acquire()
        conn.send(
            {
                "clients": case.done_calls,
                "cpu_s": time.process_time() - cpu0,
                "errors": case.errors,
            }
        )
    for t in clients:
        t.cases.put(None)
    for t in clients:
        t.join(timeout=10)


class LoadGenerator:
    """``procs`` client processes of ``clients / procs`` threads each, kept for the whole run."""

    def __init__(self, clients: int, procs: int):
        procs = max(1, min(procs, clients))
        ctx = multiprocessing.get_context("spawn")
        self.threads = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
        self.clients = clients
        self.pipes: list[Any] = []
        self.procs: list[Any] = []
        for n in self.threads:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_loadgen_process, args=(child, n), daemon=True)
            p.start()
            self.pipes.append(parent)
            self.procs.append(p)

    def describe(self) -> str:
        """``4 client processes x 8 threads``."""
        per_proc = "/".join(str(n) for n in sorted(set(self.threads)))
        return f"{len(self.threads)} client processes x {per_proc} threads"

    def run(self, route: Route, op: str, seconds: float, warmup: int, watch: Sequence[int]) -> dict[str, Any]:
        """All clients call ``op`` on ``route`` for ``seconds``; calls/s, latency under load, the
        CPU the load generator used, and the CPU and peak sampled RSS of the processes ``watch``."""
        for p in self.pipes:
            p.send((route.host, route.port, op, route.db, seconds, warmup))
        for p in self.pipes:
            p.recv()  # "ready": every client connected and warmed up
        procs = {pid: psutil.Process(pid) for pid in watch}
        sampler = RssSampler(procs)
        start_at = time.monotonic() + 0.2
        for p in self.pipes:
            p.send(start_at)
        time.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = {pid: sum(pr.cpu_times()[:2]) for pid, pr in procs.items()}
        sampler.start()
        results = [p.recv() for p in self.pipes]
        sampler.stop()
        cpu = {pid: sum(pr.cpu_times()[:2]) - cpu0[pid] for pid, pr in procs.items()}
        elapsed = time.monotonic() - start_at  # the window and the calls still running at its end
        errs = [e for r in results for e in r["errors"]]
        if errs:
            raise RuntimeError(f"{route.label}, {op}: a client failed: {errs[0]}")
        # Every client starts at once, so no call completes during the first call's time: the
        # window counted starts when every client has completed a call (steady state), and ends
        # at the end of the case.
        clients = [c for r in results for c in r["clients"]]
        end = start_at + seconds
        firsts = [c[0][0] for c in clients if c]
        w0 = max(firsts, default=end)  # a client that completed none: the others' last first call
        done = [lat for c in clients for t, lat in c if t > w0]
        return {
            "calls": len(done),
            "calls_per_s": len(done) / (end - w0) if end > w0 else 0.0,
            "all_clients_done": len(firsts) == len(clients),
            "window_s": end - w0,
            "latency": summary(done) if done else None,
            "loadgen_cpus": sum(r["cpu_s"] for r in results) / elapsed,
            "cpus": {pid: v / elapsed for pid, v in cpu.items()},
            "peak_rss": sampler.peak,
        }

    def close(self) -> None:
        """Stop the load generator's client processes (a None to each, join, kill after 10 s)."""
        for p in self.pipes:
            try:
                p.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


class RssSampler:
    """Samples the RSS of some processes every 50 ms in a thread; ``peak``: pid -> max bytes."""

    def __init__(self, procs: dict[int, psutil.Process]):
        self.procs = procs
        self.peak = {pid: 0 for pid in procs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for pid, p in self.procs.items():
            self.peak[pid] = max(self.peak[pid], p.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def start(self) -> None:
        """Start sampling RSS every 50 ms in a daemon thread."""
        self._sample()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; ``peak`` holds each process's peak RSS, bytes."""
        self._stop.set()
        self._thread.join()
        self._sample()


def vm_hwm(pid: int) -> int:
    """``VmHWM`` (peak resident set size over the process's life) of ``pid`` in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmHWM for pid {pid}")


# ---------------------------------------------------------------------------------------------- servers
def start_proxy(
    workdir: Path, name: str, metastore_uri: str, *, log_level: str | None = None, prefixed: bool = False
) -> ProxyProcess:
    """A ``hivemesh proxy`` with its defaults, except a free port, its own store in ``workdir``,
    and what the variant changes (log level, a federated member)."""
    proxy: dict[str, Any] = {"port": 0, "store": f"sqlite:///{workdir / f'{name}-store.db'}"}
    if log_level:
        proxy["log_level"] = log_level
    federated = []
    if prefixed:
        federated.append(
            {
                "name": "fed",
                "uris": [metastore_uri],
                "database_prefix": FED_PREFIX,
                "access_control": "read_only",
            }
        )
    cfg = write_mesh(workdir / f"{name}.yaml", proxy, {"name": "main", "uris": [metastore_uri]}, federated)
    return ProxyProcess(cfg, workdir / f"{name}.log").start()


def java_memory(
    workdir: Path,
    st: Settings,
    java_opts: Sequence[str],
    loadgen: LoadGenerator,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Start HMS 2.3.10 on Derby, load the same data, put it under the same concurrent load (half
    a route's time per operation), and read its memory."""
    hms = JavaHMS(base_dir=workdir / "java", log_level="WARN", java_opts=java_opts)
    try:
        hms.start(timeout=300)
        assert hms.pid is not None
        idle = rss_bytes(hms.pid)
        say(f"HMS 2.3.10 started in {hms.startup_seconds:.1f} s; loading {st.partitions:,} partitions")
        load_s = load_data(hms.host, hms.port, st.partitions)
        route = Route("java", "HMS 2.3.10", hms.host, hms.port, DB, hms.pid)
        say(f"HMS 2.3.10 under {st.clients} clients, {st.seconds / 2:g} s per operation")
        calls: dict[str, float] = {}
        peak = 0
        for op in OPS:
            warm = 1 if op == "get_partitions" else st.load_warmup
            r = loadgen.run(route, op, case_seconds(st, op) / 2, warm, [hms.pid])
            calls[op] = r["calls_per_s"]
            peak = max(peak, r["peak_rss"][hms.pid])
        return {
            "idle_rss": idle,
            "peak_rss": peak,
            "rss": rss_bytes(hms.pid),
            "hwm": vm_hwm(hms.pid),
            "calls_per_s": calls,
            "load_s": load_s,
            "startup_s": hms.startup_seconds,
        }
    except BaseException:
        hms.kill()
        raise
    finally:
        hms.stop()


# ---------------------------------------------------------------------------------------------- report
def _ms(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _mb(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def render(doc: dict[str, Any], console: Console) -> None:
    """The latency, throughput and memory tables, with the aims beside the figures."""
    labels = {r["key"]: r["label"] for r in doc["routes"]}
    lat = RichTable(
        title=f"One client: ms per call, p50 / p99 (routes in turn, {doc['settings']['rounds']} rounds); "
        f"aim: added p50 < {AIM_ADDED_P50_MS} ms",
        title_justify="left",
    )
    for col, just in [
        ("operation", "left"),
        ("route", "left"),
        ("calls", "right"),
        ("p50 ms", "right"),
        ("p99 ms", "right"),
        ("added p50 ms", "right"),
        ("added p99 ms", "right"),
        ("aim", "right"),
    ]:
        lat.add_column(col, justify=just)  # type: ignore[arg-type]
    for op in OPS:
        res = doc["latency"][op]
        d = res["direct"]
        for i, (key, s) in enumerate(res.items()):
            added = s["p50_ms"] - d["p50_ms"]
            if key == "direct":
                added_txt = added99 = aim = ""
            else:
                ok = added < AIM_ADDED_P50_MS
                added_txt = f"[{'green' if ok else 'red'}]{added:+.2f}[/]"
                added99 = f"{s['p99_ms'] - d['p99_ms']:+.2f}"
                aim = f"< {AIM_ADDED_P50_MS}"
            lat.add_row(
                op if i == 0 else "",
                labels[key],
                f"{s['n']:,}",
                _ms(s["p50_ms"]),
                _ms(s["p99_ms"]),
                added_txt,
                added99,
                aim,
                end_section=i == len(res) - 1,
            )
    console.print(lat)

    st = doc["settings"]
    thr = RichTable(
        title=f"{st['clients']} concurrent clients ({doc['loadgen']}), {st['seconds']:g} s per case "
        f"({2 * st['seconds']:g} s for get_partitions), calls/s; aim: proxy >= {AIM_THROUGHPUT}x direct",
        title_justify="left",
        caption="CPUs used: the load generator's client processes, the metastore and the proxy of the route "
        f"(machine: {os.cpu_count()} CPUs)",
        caption_justify="left",
    )
    for col, just in [
        ("operation", "left"),
        ("route", "left"),
        ("calls/s", "right"),
        ("ratio to direct", "right"),
        ("aim", "right"),
        ("p50 / p99 ms under load", "right"),
        ("CPUs: clients", "right"),
        ("metastore", "right"),
        ("proxy", "right"),
    ]:
        thr.add_column(col, justify=just)  # type: ignore[arg-type]
    for op in OPS:
        res = doc["throughput"][op]
        d = res["direct"]["calls_per_s"]
        for i, (key, r) in enumerate(res.items()):
            ratio = r["calls_per_s"] / d if d else 0.0
            if key == "direct":
                ratio_txt = aim = ""
            elif not d or not r["calls_per_s"]:  # no steady state on one side: no ratio to give
                ratio_txt, aim = "n/a", f">= {AIM_THROUGHPUT}x"
            else:
                ok = ratio >= AIM_THROUGHPUT
                ratio_txt = f"[{'green' if ok else 'red'}]{ratio:.2f}x[/]"
                aim = f">= {AIM_THROUGHPUT}x"
            lt = r["latency"]
            thr.add_row(
                op if i == 0 else "",
                labels[key],
                f"{r['calls_per_s']:,.0f}",
                ratio_txt,
                aim,
                f"{_ms(lt['p50_ms'])} / {_ms(lt['p99_ms'])}" if lt else "-",
                f"{r['loadgen_cpus']:.2f}",
                f"{r['metastore_cpus']:.2f}",
                f"{r['proxy_cpus']:.2f}" if r["proxy_cpus"] is not None else "-",
                end_section=i == len(res) - 1,
            )
    console.print(thr)

    mem = doc["memory"]
    java = mem.get("java")
    m = RichTable(
        title="Memory, MB; aim: the proxy a small fraction of a Java metastore", title_justify="left"
    )
    for col in ("process", "RSS idle after start", "peak RSS under load", "VmHWM", "peak / Java's peak"):
        m.add_column(col, justify="left" if col == "process" else "right")
    for row in mem["rows"]:
        share = f"{row['peak_rss'] / java['peak_rss']:.0%}" if java else "-"
        m.add_row(row["label"], _mb(row["idle_rss"]), _mb(row["peak_rss"]), _mb(row["hwm"]), share)
    if java:
        m.add_row(
            f"HMS 2.3.10 (Java, Derby; {doc['java_opts']})",
            _mb(java["idle_rss"]),
            _mb(java["peak_rss"]),
            _mb(java["hwm"]),
            "100%",
        )
    else:
        m.add_row("HMS 2.3.10 (Java)", f"[dim]{mem.get('java_note', 'not run')}[/dim]", "", "", "")
    console.print(m)


def verdicts(doc: dict[str, Any]) -> list[str]:
    """One line per aim with the headline route's figures (the proxy with its default config)."""
    lat, thr, mem = doc["latency"], doc["throughput"], doc["memory"]
    added = {op: lat[op]["proxy"]["p50_ms"] - lat[op]["direct"]["p50_ms"] for op in OPS}
    # a ratio only where both sides reached a steady state (calls completed in the window)
    ratio = {
        op: thr[op]["proxy"]["calls_per_s"] / thr[op]["direct"]["calls_per_s"]
        for op in OPS
        if thr[op]["direct"]["calls_per_s"] and thr[op]["proxy"]["calls_per_s"]
    }

    def mark(ok: bool) -> str:
        return "[green]met[/green]" if ok else "[red]not met[/red]"

    out = [
        f"aim: added p50 < {AIM_ADDED_P50_MS} ms per call: "
        + ", ".join(f"{op} {added[op]:+.2f} ms" for op in OPS)
        + f" — {mark(all(v < AIM_ADDED_P50_MS for v in added.values()))}",
        f"aim: >= {AIM_THROUGHPUT}x direct throughput at {doc['settings']['clients']} clients: "
        + ", ".join(f"{op} {ratio[op]:.2f}x" if op in ratio else f"{op} n/a (no steady state)" for op in OPS)
        + f" — {mark(all(v >= AIM_THROUGHPUT for v in ratio.values()))}"
        + ("" if len(ratio) == len(OPS) else " where measured"),
    ]
    proxy_rss = mem["rows"][0]["peak_rss"]
    java = mem.get("java")
    if java:
        share = proxy_rss / java["peak_rss"]
        out.append(
            f"aim: memory a small fraction of a Java metastore: proxy {_mb(proxy_rss)} MB peak against "
            f"{_mb(java['peak_rss'])} MB for HMS 2.3.10 under the same load: {share:.0%} of it "
            "(the issue sets no number)"
        )
    else:
        out.append(
            f"aim: memory a small fraction of a Java metastore: proxy {_mb(proxy_rss)} MB peak; "
            "no Java figure in this run"
        )
    return out


# ---------------------------------------------------------------------------------------------- main
@dataclass(frozen=True)
class Settings:
    """Sizes, repetitions and durations of a run (``--quick`` or full, then the options)."""

    partitions: int
    seconds: float
    clients: int
    procs: int
    reps: int  # single-client calls of get_table / get_all_databases per route
    reps_partitions: int  # single-client get_partitions calls per route
    warmup: int  # one-client calls before timing (a twentieth of it for get_partitions)
    load_warmup: int  # calls of every concurrent client before its case starts (2 for get_partitions)
    rounds: int  # one-client turns of the routes
    load_rounds: int  # concurrent turns of the routes (each gets seconds / load_rounds per turn)


def settings_from(args: argparse.Namespace) -> Settings:
    """The run's settings: the options given, else the full or quick defaults."""
    quick = args.quick
    return Settings(
        partitions=args.partitions or (100 if quick else 1000),
        seconds=args.seconds or (1.5 if quick else 6.0),
        clients=args.clients,
        procs=args.procs,
        reps=args.reps or (100 if quick else 2000),
        reps_partitions=args.reps_partitions or (10 if quick else 100),
        warmup=20 if quick else 200,
        load_warmup=3 if quick else 20,
        rounds=5 if quick else 10,
        load_rounds=1 if quick else 2,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``--postgres`` is refused when no PostgreSQL answers)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    ap.add_argument(
        "--partitions", type=int, default=0, help="partitions of table p (default 1000; quick 100)"
    )
    ap.add_argument(
        "--seconds", type=float, default=0, help="seconds per concurrent case (default 6; quick 1.5)"
    )
    ap.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    ap.add_argument("--procs", type=int, default=4, help="client processes the clients are spread over (4)")
    ap.add_argument(
        "--reps", type=int, default=0, help="one-client calls per route (default 2000; quick 100)"
    )
    ap.add_argument(
        "--reps-partitions",
        type=int,
        default=0,
        help="one-client get_partitions calls (default 100; quick 10)",
    )
    ap.add_argument("--postgres", action="store_true", help="the metastore on a fresh PostgreSQL database")
    ap.add_argument(
        "--java",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also load the data into HMS 2.3.10 (Java) and read its memory (default: on)",
    )
    ap.add_argument("--java-opts", default="", help="extra JVM options for the real HMS, e.g. -Xmx1g")
    ap.add_argument(
        "--variants",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure a proxy at log level WARNING and the prefixed route (default: on)",
    )
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, SQLite files)")
    args = ap.parse_args(argv)
    if args.postgres:
        from tests.conftest import postgres_available

        if not postgres_available():
            ap.error("--postgres: no PostgreSQL answers at 127.0.0.1:5432 (set HIVEMESH_TEST_PG)")
    return args


def start_routes(
    workdir: Path, ms: HivemeshProcess, variants: bool, started: list[Any]
) -> tuple[list[Route], dict[str, int]]:
    """Start the proxies in front of ``ms`` (appended to ``started``); the routes, direct first,
    and the proxies' pids by route key."""
    assert ms.proc is not None
    specs: list[tuple[str, str, str, dict[str, Any]]] = [("proxy", "proxy (default: audit log on)", DB, {})]
    if variants:
        specs.append(("quiet", "proxy, log level WARNING", DB, {"log_level": "WARNING"}))
        specs.append(("prefix", f"via prefix ({FED_PREFIX}{DB})", FED_PREFIX + DB, {"prefixed": True}))
    routes = [Route("direct", "direct", ms.host, ms.port, DB, ms.proc.pid)]
    pids: dict[str, int] = {}
    for key, label, db, opts in specs:
        px = start_proxy(workdir, f"proxy-{key}", ms.uri, **opts)
        started.append(px)
        assert px.proc is not None
        pids[key] = px.proc.pid
        routes.append(Route(key, label, px.host, px.port, db, px.proc.pid))
    return routes, pids


def expect(op: str, partitions: int) -> Callable[[Any], None]:
    """A check of the first answer of ``op`` on each route."""

    def check(res: Any) -> None:
        if op == "get_partitions":
            assert len(res) == partitions, f"get_partitions returned {len(res)}"
        elif op == "get_table":
            assert res.tableName == "t" and len(res.sd.cols) == len(COLUMNS), res
        else:
            assert DB in res, res

    return check


def case_seconds(st: Settings, op: str) -> float:
    """Seconds of a route's concurrent case: twice ``st.seconds`` for get_partitions (its calls
    take a second or more each under 32 clients on 2 CPUs)."""
    return st.seconds * (2 if op == "get_partitions" else 1)


def measure_load(
    loadgen: LoadGenerator,
    routes: Sequence[Route],
    st: Settings,
    metastore_pid: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every op on every route under the concurrent load; the routes take turns in
    ``st.load_rounds`` rounds of ``st.seconds / st.load_rounds``."""
    out: dict[str, Any] = {op: {} for op in OPS}
    for op in OPS:
        seconds = case_seconds(st, op)
        share = seconds / st.load_rounds
        say(f"{st.clients} clients ({loadgen.describe()}): {op}, {seconds:g} s per route")
        warm = 1 if op == "get_partitions" else st.load_warmup
        runs: dict[str, list[dict[str, Any]]] = {r.key: [] for r in routes}
        for _ in range(st.load_rounds):
            for r in routes:
                watch = [metastore_pid] + ([r.pid] if r.key != "direct" else [])
                runs[r.key].append(loadgen.run(r, op, share, warm, watch))
        for r in routes:
            rr = runs[r.key]
            lats = [x["latency"] for x in rr if x["latency"]]
            out[op][r.key] = {
                "calls": sum(x["calls"] for x in rr),
                "calls_per_s": sum(x["calls"] for x in rr) / max(1e-9, sum(x["window_s"] for x in rr)),
                "window_s": sum(x["window_s"] for x in rr),
                # steady: every client completed a call and calls completed after that (on a slow
                # machine the first calls can end just before the window does: no figure then)
                "steady": all(x["all_clients_done"] for x in rr) and sum(x["calls"] for x in rr) > 0,
                "seconds": seconds,
                # under load: the rounds' p50 and p99 averaged (each round holds many calls)
                "latency": {
                    k: statistics.fmean(lt[k] for lt in lats) for k in ("p50_ms", "p99_ms", "mean_ms")
                }
                if lats
                else None,
                "loadgen_cpus": statistics.fmean(x["loadgen_cpus"] for x in rr),
                "metastore_cpus": statistics.fmean(x["cpus"][metastore_pid] for x in rr),
                "proxy_cpus": statistics.fmean(x["cpus"][r.pid] for x in rr) if r.key != "direct" else None,
                "peak_rss": {str(pid): max(x["peak_rss"][pid] for x in rr) for pid in rr[0]["peak_rss"]},
            }
    return out


def memory_rows(
    throughput: dict[str, Any], pids: dict[str, int], idle: dict[int, int], metastore_pid: int, store: str
) -> list[dict[str, Any]]:
    """RSS right after start (``idle``: pid -> bytes), peak sampled RSS over every concurrent case,
    and VmHWM of the proxies and the metastore."""

    def peak(pid: int) -> int:
        return max(
            r["peak_rss"].get(str(pid), 0) for per_route in throughput.values() for r in per_route.values()
        )

    labels = {
        "proxy": "proxy (default config)",
        "quiet": "proxy, log level WARNING",
        "prefix": "proxy with the fed_ member",
    }
    rows = [
        {"label": labels[k], "idle_rss": idle[pid], "peak_rss": peak(pid), "hwm": vm_hwm(pid)}
        for k, pid in pids.items()
    ]
    what = "PostgreSQL: this process only" if store == "postgresql" else "SQLite"
    rows.append(
        {
            "label": f"hivemesh metastore ({what})",
            "idle_rss": idle[metastore_pid],
            "peak_rss": peak(metastore_pid),
            "hwm": vm_hwm(metastore_pid),
        }
    )
    return rows


def print_notes(doc: dict[str, Any], console: Console) -> None:
    """What the tables do not say: the data, the load generator, the memory columns, the audit log."""
    st = doc["settings"]
    console.print(
        f"note: store {doc['store']}; table p has {st['partitions']:,} partitions of {len(COLUMNS)} columns; "
        f"every route of a case runs under the same load generator ({doc['loadgen']}), the routes taking "
        f"turns in {st['load_rounds']} round(s)."
    )
    console.print(
        "note: calls/s counts the calls completed from the moment every client has completed one (all "
        "start at once) to the end of the case; the latencies under load are those calls'."
    )
    console.print(
        "note: memory: RSS idle right after start; peak RSS sampled every 50 ms during the concurrent "
        "cases; VmHWM the peak over the process's life (/proc)."
    )
    labels = {r["key"]: r["label"] for r in doc["routes"]}
    unsteady = [
        f"{op} {labels[k]}"
        for op, per in doc["throughput"].items()
        for k, r in per.items()
        if not r["steady"]
    ]
    if unsteady:
        console.print(
            "[yellow]note: in these cases a client completed no call before the end (the window is "
            f"short or missing; give more --seconds): {', '.join(unsteady)}[/yellow]"
        )
    lines, size, quiet = doc["audit_log_lines"], doc["audit_log_bytes"], doc["warning_log_bytes"]
    console.print(
        f"note: the default proxy (log level INFO) wrote {lines:,} audit lines to its log file "
        f"({size / 2**20:.1f} MB, ~{size / max(1, lines):.0f} bytes per call)"
        + (f"; the WARNING proxy wrote {quiet:,} bytes." if quiet is not None else ".")
    )
    if any(r["key"] == "prefix" for r in doc["routes"]):
        console.print(
            f"note: get_all_databases via the prefixed proxy merges the answers of two members (main and "
            f"fed, the same metastore): {FED_PREFIX}{DB} alongside {DB}."
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Start the metastore and the proxies, load the data, measure every route, print the tables."""
    import shutil
    import tempfile

    args = parse_args(argv)
    st = settings_from(args)
    console = runner.wide_console()
    load = runner.print_banner(console, "hivemesh proxy overhead benchmark", args.quick, {}, {})
    t_total = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"  [dim]{time.perf_counter() - t_total:5.1f} s  {msg}[/dim]")

    java_note = None
    if not args.java:
        java_note = "not run (--no-java)"
    elif not java_available():
        java_note = "skipped: needs Java 17+ and the PySpark wheel's Hive 2.3 jars"
        console.print(f"[yellow]note: HMS 2.3.10 {java_note}[/yellow]")
    pg_url = None
    if args.postgres:
        from tests.conftest import make_pg_database

        pg_url = make_pg_database("hivemesh_bench_proxy")
    workdir = Path(tempfile.mkdtemp(prefix="hivemesh-bench-proxy-"))
    failed = True
    started: list[Any] = []
    loadgen: LoadGenerator | None = None
    try:
        ms = HivemeshProcess(
            pg_url or f"sqlite:///{workdir / 'metastore.db'}",
            workdir / "warehouse",
            workdir / "metastore.log",
        )
        started.append(ms.start())
        assert ms.proc is not None
        idle = {ms.proc.pid: rss_bytes(ms.proc.pid)}
        kind = "PostgreSQL" if pg_url else "SQLite"
        say(f"metastore on {kind} at {ms.uri}; loading {st.partitions:,} partitions")
        load_s = load_data(ms.host, ms.port, st.partitions)
        loadgen = LoadGenerator(st.clients, st.procs)  # its processes start up meanwhile
        routes, pids = start_routes(workdir, ms, args.variants, started)
        idle.update({pid: rss_bytes(pid) for pid in pids.values()})
        say("routes: " + ", ".join(f"{r.label} :{r.port}" for r in routes))

        latency: dict[str, Any] = {}
        for op in OPS:
            reps = st.reps_partitions if op == "get_partitions" else st.reps
            warm = max(2, st.warmup // 20) if op == "get_partitions" else st.warmup
            say(f"one client: {op}, {reps:,} calls per route")
            latency[op] = single_client(routes, op, reps, warm, st.rounds, expect(op, st.partitions))

        throughput = measure_load(loadgen, routes, st, ms.proc.pid, say)
        loadgen_desc = loadgen.describe()
        store = "postgresql" if pg_url else "sqlite"
        memory: dict[str, Any] = {"rows": memory_rows(throughput, pids, idle, ms.proc.pid, store)}
        default_log = workdir / "proxy-proxy.log"
        with open(default_log, encoding="utf-8", errors="replace") as f:
            audit_lines = sum(1 for line in f if "hivemesh.audit" in line)
        quiet_log = workdir / "proxy-quiet.log"
        for p in reversed(started):
            p.stop()
        started.clear()

        if java_note is None:
            say("HMS 2.3.10: starting on Derby for the memory comparison")
            try:
                memory["java"] = java_memory(workdir, st, args.java_opts.split(), loadgen, say)
            except Exception as e:  # noqa: BLE001 - the other figures still stand
                java_note = f"failed: {type(e).__name__}: {e}"
                console.print(f"[red]HMS 2.3.10 {java_note}[/red]")
        if java_note:
            memory["java_note"] = java_note
        loadgen.close()
        loadgen = None

        doc = {
            "quick": args.quick,
            "cpus": os.cpu_count(),
            "store": store,
            "settings": st.__dict__,
            "loadgen": loadgen_desc,
            "routes": [{"key": r.key, "label": r.label} for r in routes],
            "latency": latency,
            "throughput": throughput,
            "memory": memory,
            "audit_log_lines": audit_lines,
            "audit_log_bytes": default_log.stat().st_size,
            "warning_log_bytes": quiet_log.stat().st_size if quiet_log.exists() else None,
            "java_opts": args.java_opts or "JVM default heap",
            "load_average_start": load,
            "data_load_s": load_s,
        }
        console.print()
        render(doc, console)
        for line in verdicts(doc):
            console.print(line)
        print_notes(doc, console)
        doc["load_average_end"] = runner.print_total(console, t_total)
        if args.json_out:
            args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        failed = False
        return 0
    finally:
        if loadgen is not None:
            loadgen.close()
        for p in reversed(started):
            p.stop()
        if pg_url:
            from tests.conftest import drop_pg_database

            drop_pg_database(pg_url)
        if args.keep or failed:
            console.print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
