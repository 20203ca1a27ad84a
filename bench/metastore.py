"""hmsbench-style metastore benchmark: hivemesh (SQLite, PostgreSQL) against two real Java metastores,
Apache HMS 2.3.10 on Derby and Apache Hive 4 on PostgreSQL.

Usage::

    python bench/metastore.py [--quick] [--only sqlite,postgres,java,hive4] [--clients 1,16,64]
                              [--concurrency processes|threads] [--workers N] [--json out.json]

Starts each server in turn on a fresh store: hivemesh on a SQLite file (``sqlite``), hivemesh on a
PostgreSQL database (``postgres``), HMS 2.3.10 from the PySpark wheel's jars on embedded Derby
(``java``), and the Hive 4.2 metastore (``tests/support/hive4.py``: Maven Central jars, Java 21,
schema by Hive's schematool) on its own database of the same PostgreSQL server as hivemesh's
(``hive4``). It runs the same workload through the same Python Thrift client against each
(``hive_metastore`` bindings, TBinaryProtocolAccelerated, unframed), reads its memory, stops it,
and prints milliseconds per operation with the ratio to each Java metastore (Java time / hivemesh
time: above 1 means hivemesh is faster), get_table throughput from 1, 16 and 64 concurrent clients
with the same ratios, and how ``get_partitions_by_filter`` grows with the number of partitions.

The workload (hmsbench-like): get_table (not on Hive 4, which has only get_table_req),
get_table_req, get_all_databases, create_table, drop_table, add_partitions of 1,000
(``add_partitions_req`` with ``needResult``, as Spark's Hive client sends it), get_partitions of
1,000, get_partition_names, get_partitions_by_filter. Then the concurrency levels (``--clients``):
each client a light process of its own (``bench/load_client.py``; ``--concurrency threads`` for
threads of this process) with its own connection, all calling get_table_req in one common window
(every client connected and warmed up first, then one start and end instant for all), after an
untimed warm-up at the highest level. Tables have Spark's shape for an ORC Hive table (16
columns, ORC SerDe, a few table parameters, partitioned by ``ds string, hr int``) and every
partition carries its own full storage descriptor with an explicit location, as Spark sends them.
Memory: each server's RSS and peak RSS after the run (hivemesh: its parent and workers summed), and
for the PostgreSQL-backed ones the PSS of their backends. PostgreSQL, Java and Hive 4 are skipped,
with a printed note, when they are not available.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import queue
import random
import select
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support (the server harnesses shared with the tests)

from bench import java_client, load_client, runner  # noqa: E402
from hive_metastore.ttypes import (  # noqa: E402
    AddPartitionsRequest,
    Database,
    FieldSchema,
    GetTableRequest,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402
from tests.support.javahms import JavaHMS, java_available, rss_bytes  # noqa: E402
from tests.support.servers import HivemeshProcess, ThriftClient  # noqa: E402

SERVERS = (*runner.SERVERS, "hive4")
LABELS = {
    "sqlite": "hivemesh-sqlite",
    "postgres": "hivemesh-postgres",
    "java": "HMS 2.3.10",
    "hive4": "Hive 4 (PostgreSQL)",
}
HIVEMESH = ("sqlite", "postgres")
COMPETITORS = ("java", "hive4")  # the Java metastores every hivemesh figure is compared with
TABLE_CALL = "get_table_req"  # of the concurrent clients: every server has it (Hive 4 has no get_table)
DEFAULT_CLIENTS = (1, 16, 64)
HIVE4_HEAP = "768m"  # tests.support.hive4's default; --java-opts comes after it, so an -Xmx there wins
LOAD_CLIENT = Path(__file__).resolve().with_name("load_client.py")
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
    add_partitions_java: int  # for the Java metastores (HMS 2.3.10 takes ~14 s per call, Hive 4 ~5 s)
    get_partitions: int
    get_partition_names: int
    by_filter: int
    warmup: int  # calls before timing cheap operations (the JVM needs them to compile its hot paths)
    warmup_heavy: int  # before create/drop pairs, get_partitions.1000 and each filter-growth size
    concurrency_seconds: float  # the measured window of each concurrency level
    concurrency_warmup_seconds: float  # untimed load from the most clients before the first level
    growth_sizes: tuple[int, ...]
    growth_sizes_java_max: int  # the Java metastores stop here
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
    concurrency_warmup_seconds=10.0,
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
    concurrency_seconds=3.0,
    concurrency_warmup_seconds=3.0,
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


class LoadClients:
    """The concurrent get_table clients, each with its own connection: light processes
    (``bench/load_client.py``: Thrift and the bindings only), started when first needed and kept
    for the whole run, or threads of this process (``mode="threads"``).

    :meth:`measure` connects ``n`` of them and lets each warm up; once every one is ready it gives
    them all the same window (two ``time.monotonic()`` instants a little ahead: CLOCK_MONOTONIC is
    the same clock in every process); each counts the calls that complete inside it. The server's
    CPU (and its PostgreSQL backends') is sampled at the window's edges.
    """

    def __init__(self, mode: str):
        self.mode = mode
        self.procs: list[subprocess.Popen[str]] = []

    def _spawn(self, n: int) -> list[subprocess.Popen[str]]:
        """The first ``n`` client processes (started as needed)."""
        while len(self.procs) < n:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(LOAD_CLIENT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    bufsize=1,
                    cwd=ROOT,
                )
            )
        return self.procs[:n]

    @staticmethod
    def _send(procs: Sequence[subprocess.Popen[str]], cmd: dict[str, Any]) -> None:
        line = json.dumps(cmd) + "\n"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(line)
            p.stdin.flush()

    @staticmethod
    def _answers(procs: Sequence[subprocess.Popen[str]], op: str, timeout: float) -> list[dict[str, Any]]:
        """One answer line from each process (``op`` names the command, for the error message)."""
        deadline = time.monotonic() + timeout
        answers = []
        for p in procs:
            assert p.stdout is not None
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            text = p.stdout.readline() if ready else ""
            if not text:
                raise RuntimeError(
                    f"load client {p.pid} gave no answer to {op} "
                    f"({'exited ' + str(p.poll()) if p.poll() is not None else 'timed out'})"
                )
            answer = json.loads(text)
            if "error" in answer:
                raise RuntimeError(f"load client {p.pid}: {answer['error']}")
            answers.append(answer)
        return answers

    def measure(
        self, srv: Server, table: str, n: int, seconds: float, pids: Sequence[int], warmup: int = 5
    ) -> dict[str, Any]:
        """``n`` clients calling TABLE_CALL for ``seconds``: throughput, latency, CPUs used."""
        group: _Processes | _Threads = _Processes(self, n) if self.mode == "processes" else _Threads(n)
        try:
            group.connect(srv, table, warmup)
            postmaster = _pg_postmaster_pid() if srv.pg_db else None
            start = time.monotonic() + 0.3 + 0.005 * n  # time for every client to get the window
            end = start + seconds
            group.run(start, end)
            time.sleep(max(0.0, start - time.monotonic()))
            s0, g0 = _cpu_seconds(pids), _pg_cpu_seconds(postmaster)
            time.sleep(max(0.0, end - time.monotonic()))
            server_cpu, g1 = _cpu_seconds(pids) - s0, _pg_cpu_seconds(postmaster)
            results = group.results(timeout=seconds + 300)
        except BaseException:
            if self.mode == "processes":
                self.close()  # answers may be left in the pipes: the next measurement starts afresh
            raise
        flat = [x / 1000 for r in results for x in r["lat_us"]]
        calls = [r["calls"] for r in results]
        window = end - start
        return {
            "clients": n,
            "ops": sum(calls),
            "ops_per_s": sum(calls) / window,
            "mean_ms": statistics.fmean(flat) if flat else None,
            "p50_ms": statistics.median(flat) if flat else None,
            "p99_ms": _percentile(flat, 0.99) if flat else None,
            "min_client_calls": min(calls),
            "idle_clients": sum(1 for c in calls if c == 0),  # completed no call in the window
            "seconds": window,
            "server_cpus": server_cpu / window,
            "pg_cpus": (g1 - g0) / window if g0 is not None and g1 is not None else None,
            "client_cpus": sum(r["cpu_s"] for r in results) / window,
            "server_rss_mb": sum(_rss_or_zero(p) for p in pids) / 2**20,
        }

    def close(self) -> None:
        """End the client processes (``quit``, then a kill for any that does not exit)."""
        for p in self.procs:
            try:
                assert p.stdin is not None
                p.stdin.write(json.dumps({"op": "quit"}) + "\n")
                p.stdin.close()
            except (OSError, ValueError):
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


class _Processes:
    """``n`` of the pool's client processes driven through one measurement."""

    def __init__(self, pool: LoadClients, n: int):
        self.procs = pool._spawn(n)

    def connect(self, srv: Server, table: str, warmup: int) -> None:
        cmd = {"op": "connect", "host": srv.host, "port": srv.port, "db": DB, "table": table}
        LoadClients._send(self.procs, {**cmd, "method": TABLE_CALL, "warmup": warmup})
        LoadClients._answers(self.procs, "connect", timeout=300)

    def run(self, start: float, end: float) -> None:
        LoadClients._send(self.procs, {"op": "run", "start": start, "end": end})

    def results(self, timeout: float) -> list[dict[str, Any]]:
        return LoadClients._answers(self.procs, "run", timeout)


class _Threads:
    """``n`` client threads of this process (``--concurrency threads``) through one measurement."""

    def __init__(self, n: int):
        self.n = n
        self.ready: queue.Queue[BaseException | None] = queue.Queue()
        self.done: queue.Queue[dict[str, Any] | BaseException] = queue.Queue()
        self.go = threading.Event()
        self.window: list[float] = []

    def connect(self, srv: Server, table: str, warmup: int) -> None:
        def client() -> None:
            try:
                conn, transport = load_client.connect(srv.host, srv.port)
            except BaseException as e:  # noqa: BLE001 - reported by connect()
                self.ready.put(e)
                return
            try:
                call = load_client.table_call(conn, DB, table, TABLE_CALL)
                try:
                    load_client.warm_up(call, warmup)
                except BaseException as e:  # noqa: BLE001 - reported by connect()
                    self.ready.put(e)
                    return
                self.ready.put(None)
                self.go.wait()
                if self.window:
                    self.done.put(load_client.run_window(call, self.window[0], self.window[1]))
            except BaseException as e:  # noqa: BLE001 - reported by results()
                self.done.put(e)
            finally:
                transport.close()

        for _ in range(self.n):
            threading.Thread(target=client, daemon=True).start()
        errors = [e for e in (self.ready.get(timeout=300) for _ in range(self.n)) if e is not None]
        if errors:
            self.go.set()  # the others end without running
            raise errors[0]

    def run(self, start: float, end: float) -> None:
        self.window += [start, end]
        self.go.set()

    def results(self, timeout: float) -> list[dict[str, Any]]:
        out = []
        for _ in range(self.n):
            r = self.done.get(timeout=timeout)
            if isinstance(r, BaseException):
                raise r
            out.append(r)
        return out


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (a process that has gone counts 0)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _pg_postmaster_pid() -> int | None:
    """The PostgreSQL server's postmaster (the parent of a backend), or ``None`` when the server is
    not on this machine or its processes cannot be read."""
    import psutil
    import sqlalchemy as sa
    from tests.conftest import pg_admin_url

    eng = sa.create_engine(pg_admin_url())
    try:
        with eng.connect() as c:
            backend = int(c.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
            try:
                return int(psutil.Process(backend).ppid())
            except psutil.Error:
                return None
    finally:
        eng.dispose()


def _pg_cpu_seconds(postmaster: int | None) -> float | None:
    """CPU seconds of the whole PostgreSQL server so far: the postmaster, its live processes and
    the ones that have exited (the kernel adds a reaped child's CPU to its parent's ``cutime``), so
    backends that come and go inside a window (a connection pool's overflow) count too."""
    import psutil

    if postmaster is None:
        return None
    try:
        pm = psutil.Process(postmaster)
        t = pm.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        children = pm.children()
    except psutil.Error:
        return None
    for child in children:
        try:
            ct = child.cpu_times()
        except psutil.Error:
            continue  # exited since: its CPU is in cutime now, or is lost (a few ms)
        total += ct.user + ct.system
    return float(total)


def _rss_or_zero(pid: int) -> int:
    try:
        return rss_bytes(pid)
    except (OSError, ValueError):
        return 0


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


def _pg_backend_pids(db_url: str) -> list[int]:
    """Process ids of the PostgreSQL backends connected to ``db_url``'s database."""
    import sqlalchemy as sa
    from tests.conftest import pg_admin_url

    name = sa.make_url(db_url).database
    eng = sa.create_engine(pg_admin_url())
    try:
        with eng.connect() as c:
            return list(
                c.execute(
                    sa.text("SELECT pid FROM pg_stat_activity WHERE datname = :n"), {"n": name}
                ).scalars()
            )
    finally:
        eng.dispose()


def _pg_analyze(db_url: str) -> None:
    """``ANALYZE`` the database of ``db_url``: what autovacuum does within about a minute of a bulk
    load. Without it the reads measured right after ``add_partitions`` are planned on the
    statistics of empty tables (sequential scans instead of the indexes), for either metastore."""
    import sqlalchemy as sa

    eng = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            c.execute(sa.text("ANALYZE"))
    finally:
        eng.dispose()


def _pg_backends_pss(db_url: str) -> tuple[int, int] | None:
    """(number, total PSS bytes) of the PostgreSQL backends connected to ``db_url``'s database.

    PSS shares shared_buffers out between the processes touching it, so the sum is a fair estimate
    of what the PostgreSQL side costs for this metastore. ``None`` if /proc is not readable.
    """
    pids = _pg_backend_pids(db_url)
    total = pss_bytes(pids)
    return None if total is None else (len(pids), total)


def pss_bytes(pids: Sequence[int]) -> int | None:
    """Total PSS of ``pids`` (``/proc/<pid>/smaps_rollup``), or ``None`` if one cannot be read."""
    total = 0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
    except OSError:
        return None
    return total


def _pg_server_note() -> str:
    """Which PostgreSQL the PostgreSQL-backed servers shared, and its durability settings."""
    import sqlalchemy as sa
    from tests.conftest import pg_admin_url

    url = sa.make_url(pg_admin_url())
    eng = sa.create_engine(url)
    try:
        with eng.connect() as c:
            show = {
                k: c.execute(sa.text(f"SHOW {k}")).scalar()
                for k in (
                    "server_version",
                    "shared_buffers",
                    "fsync",
                    "synchronous_commit",
                    "max_connections",
                )
            }
    finally:
        eng.dispose()
    where = (
        "HIVEMESH_TEST_PG" if os.environ.get("HIVEMESH_TEST_PG") else "a private cluster started for this run"
    )
    return (
        f"PostgreSQL {show['server_version']} at {url.host}:{url.port} ({where}; shared_buffers "
        f"{show['shared_buffers']}, fsync {show['fsync']}, synchronous_commit {show['synchronous_commit']}, "
        f"max_connections {show['max_connections']})"
    )


def _pg_cluster_stop() -> None:
    """Stop the private PostgreSQL cluster tests.conftest started for this process, if it did."""
    from tests import conftest

    cluster = getattr(conftest, "_pg_cluster", None)
    if cluster is not None:
        cluster.stop()
        conftest._pg_cluster = None


def _hive4_unavailable() -> str | None:
    """Why the Hive 4 metastore cannot run here (no PostgreSQL, no bundle, no Java 21), or ``None``."""
    from tests.support.hive4 import hive4_bundle

    from hivemesh.jvm import JavaNotFound, JvmArtifactError, find_java

    if not _pg_available():
        return "needs PostgreSQL (HIVEMESH_TEST_PG or Debian's postgresql package for a private cluster)"
    try:
        hive4_bundle()  # fetched by Maven on first use (~1 minute)
        find_java(21, 23)
    except (JvmArtifactError, JavaNotFound) as e:
        return f"needs the hive4-metastore bundle (Maven Central via hivemesh.jvm) and Java 21: {e}"
    return None


def _hive4_description() -> str:
    from tests.support.hive4 import hive4_bundle

    return str(hive4_bundle().bundle.description).split(" with ")[0]


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


def _hive4_class() -> type:
    """tests.support.hive4's Hive4Metastore with ``java_opts`` appended to its JVM options (after
    its ``-Xmx``, so an ``-Xmx`` there wins)."""
    from tests.support.hive4 import Hive4Metastore

    class BenchHive4(Hive4Metastore):
        def __init__(self, *, java_opts: Sequence[str] = (), **kwargs: Any):
            super().__init__(**kwargs)
            self.java_opts = list(java_opts)

        def _java(self, classpath: list[str], main: str, *args: str) -> list[str]:
            cmd = super()._java(classpath, main, *args)
            return [*cmd[:2], *self.java_opts, *cmd[2:]]

    return BenchHive4


@contextmanager
def start_server(name: str, workdir: Path, java_opts: Sequence[str], workers: int = 1) -> Iterator[Server]:
    """Start one of the servers on a fresh store; stop it (and drop its database) afterwards.
    hivemesh-postgres and Hive 4 each get a fresh database on the same PostgreSQL server."""
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
    elif name == "hive4":
        from tests.conftest import make_pg_database

        url = make_pg_database("hive4_bench")
        h4 = _hive4_class()(
            postgres_url=url, base_dir=workdir / "hive4", heap=HIVE4_HEAP, java_opts=java_opts
        )
        try:
            h4.start(timeout=300)
            assert h4.proc is not None
            note = (
                f"started in {h4.startup_seconds:.1f} s (schematool, schema upgrade, bootstrap start), "
                f"database {url.rsplit('/', 1)[1]}, JVM -Xmx{h4.heap} {' '.join(java_opts)}".rstrip()
            )
            yield Server(name, h4.host, h4.port, h4.proc.pid, note=note, pg_db=url)
        except BaseException:
            h4.kill()
            raise
        finally:
            h4.stop()
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
    return str(client.get_table_req(GetTableRequest(dbName=DB, tblName=table)).table.sd.location)


def add_parts(client: Any, table: str, parts: list[Partition]) -> int:
    """``add_partitions_req`` as Spark's Hive client sends it (results requested)."""
    res = client.add_partitions_req(
        AddPartitionsRequest(dbName=DB, tblName=table, parts=parts, ifNotExists=False, needResult=True)
    )
    return len(res.partitions or [])


def setup_tables(srv: Server) -> None:
    """Only the tables the Java client needs (``--client java``): database ``bench``, table
    ``lookup`` and ``ap_0`` with 1,000 partitions (added as in :func:`run_workload`, untimed)."""
    with ThriftClient(srv.host, srv.port, timeout_ms=600_000) as c:
        c.create_database(Database(name=DB, description="hivemesh benchmark", parameters={}))
        db_loc = c.get_database(DB).locationUri.rstrip("/")
        c.create_table(make_table("lookup", f"{db_loc}/lookup"))
        c.create_table(make_table("ap_0", f"{db_loc}/ap_0"))
        assert add_parts(c, "ap_0", make_partitions(_location(c, "ap_0"), "ap_0", 0, 1000 // HOURS)) == 1000
    if srv.pg_db:
        _pg_analyze(srv.pg_db)  # as autovacuum would after the load


JAVA_OPS = (
    "get_table",
    "get_table_req",
    "create_table",
    "drop_table",
    "get_partitions",
    "get_partition_names",
)


def run_java_client(
    srv: Server,
    cfg: Settings,
    levels: Sequence[int],
    pids: Callable[[], list[int]],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """The Java client's measurements (``bench/java_client.py``, one JVM): each op of JAVA_OPS from
    one connection (get_partitions and get_partition_names on ``ap_0``, 1,000 partitions), then
    TABLE_CALL from each number of concurrent clients in ``levels`` (threads of the JVM, each with its
    own connection) after an untimed level at the most clients; with the server's and PostgreSQL's
    CPUs over each window. Returns ``{"ops": {op: {...}}, "clients": [{...} per level]}``; an op the
    server lacks (Hive 4's get_table) has ``error``."""
    top = max(levels)
    steps = [
        f"single:get_table:{cfg.get_table}:{cfg.warmup}",
        f"single:get_table_req:{cfg.get_table}:{cfg.warmup}",
        f"single:create_table:{cfg.create_drop}:{cfg.warmup_heavy}",
        f"single:drop_table:{cfg.create_drop}:0",
        f"single:get_partitions:{cfg.get_partitions}:{cfg.warmup_heavy}",
        f"single:get_partition_names:{cfg.get_partition_names}:{cfg.warmup}",
        f"concurrent:{TABLE_CALL}:{top}:{cfg.concurrency_warmup_seconds:g}:5",
        *(f"concurrent:{TABLE_CALL}:{n}:{cfg.concurrency_seconds:g}:5" for n in levels),
    ]
    cpus: dict[str, dict[str, float | None]] = {}

    def on_window(step: str, start: float, end: float) -> None:
        postmaster = _pg_postmaster_pid() if srv.pg_db else None
        watched = pids()
        java_client.wait_until(start)
        s0, g0 = _cpu_seconds(watched), _pg_cpu_seconds(postmaster)
        java_client.wait_until(end)
        s1, g1 = _cpu_seconds(watched), _pg_cpu_seconds(postmaster)
        cpus[step] = {
            "server_cpus": (s1 - s0) / (end - start),
            "pg_cpus": (g1 - g0) / (end - start) if g0 is not None and g1 is not None else None,
            "server_rss_mb": sum(_rss_or_zero(p) for p in watched) / 2**20,
        }

    say(f"Java client: {', '.join(JAVA_OPS)}, then {TABLE_CALL} from {', '.join(map(str, levels))} threads")
    results = java_client.run_java_client(srv.host, srv.port, DB, "lookup", "ap_0", steps, on_window)
    ops = {r["op"]: r for r in results[: len(JAVA_OPS)]}
    levels_out = [{**r, **cpus.get(r["step"], {})} for r in results[len(JAVA_OPS) + 1 :]]
    return {"ops": ops, "clients": levels_out}


def run_workload(srv: Server, cfg: Settings, say: Callable[[str], None]) -> dict[str, Any]:
    """The main workload on one server, one client; returns {"ops": {op: summary}}."""
    ops: dict[str, dict[str, float]] = {}
    with ThriftClient(srv.host, srv.port) as c:
        c.create_database(Database(name=DB, description="hivemesh benchmark", parameters={}))
        db_loc = c.get_database(DB).locationUri.rstrip("/")
        c.create_table(make_table("lookup", f"{db_loc}/lookup"))

        say("get_table, get_table_req, get_all_databases")
        if srv.name != "hive4":  # Hive 4 has no get_table (its clients send get_table_req)
            ops["get_table"] = timed(lambda: c.get_table(DB, "lookup"), cfg.get_table, cfg.warmup).summary()
        req = GetTableRequest(dbName=DB, tblName="lookup")
        ops["get_table_req"] = timed(lambda: c.get_table_req(req), cfg.get_table, cfg.warmup).summary()
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

        reps = cfg.add_partitions_java if srv.name in COMPETITORS else cfg.add_partitions
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

        if srv.pg_db:
            say("ANALYZE (as autovacuum would after the load)")
            _pg_analyze(srv.pg_db)
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
    return {"ops": ops}


def run_clients(
    srv: Server,
    cfg: Settings,
    levels: Sequence[int],
    clients: LoadClients,
    pids: Callable[[], list[int]],
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """TABLE_CALL from each number of concurrent clients in ``levels`` (table ``lookup``), one level
    after the other, each over a window of ``cfg.concurrency_seconds``; first, untimed, the most
    clients for ``cfg.concurrency_warmup_seconds`` (a JVM compiles the call's path under load, every
    server has its connection threads and caches warm, as a production metastore has)."""
    top = max(levels)
    say(
        f"warm-up: {top} clients ({clients.mode}) calling {TABLE_CALL} for {cfg.concurrency_warmup_seconds:g} s"
    )
    clients.measure(srv, "lookup", top, cfg.concurrency_warmup_seconds, pids())
    out = []
    for n in levels:
        say(
            f"{n} concurrent client(s) ({clients.mode}) calling {TABLE_CALL} for {cfg.concurrency_seconds:g} s"
        )
        out.append(clients.measure(srv, "lookup", n, cfg.concurrency_seconds, pids()))
    return out


def run_filter_growth(
    srv: Server, cfg: Settings, first_add_s: float, say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], str | None]:
    """get_partitions_by_filter at growing table sizes, adding partitions in batches of 1,000."""
    sizes = [s for s in cfg.growth_sizes if srv.name not in COMPETITORS or s <= cfg.growth_sizes_java_max]
    skipped = [s for s in cfg.growth_sizes if s not in sizes]
    note = None
    if skipped:
        note = (
            f"{LABELS[srv.name]} skipped at {', '.join(f'{s:,}' for s in skipped)} partitions "
            f"(its first add_partitions of 1,000 took {first_add_s:.1f} s)"
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
            if srv.pg_db:
                _pg_analyze(srv.pg_db)  # as autovacuum would after the load
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


def concurrency_headline(levels: Sequence[int]) -> int:
    """The client count of the main table's concurrency rows: 16 when measured, else the most."""
    return 16 if 16 in levels else max(levels)


def bench_server(
    name: str,
    cfg: Settings,
    levels: Sequence[int],
    clients: LoadClients,
    workdir: Path,
    java_opts: Sequence[str],
    console: Console,
    workers: int = 1,
    client: str = "python",
) -> dict[str, Any]:
    """Start metastore ``name`` (hivemesh with ``workers`` processes), run the workload, the
    concurrency levels and the filter growth against it with the Python client, and the Java
    client's measurements (``client``: ``python``, ``java`` or ``both``; ``java`` runs only the
    tables' setup and the Java client), read its memory; its results dict."""
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"  [dim]{LABELS[name]}: {msg}[/dim]")

    with start_server(name, workdir, java_opts, workers) as srv:
        if srv.note:
            say(srv.note)

        def pids() -> list[int]:  # a hivemesh parent and its workers; a JVM
            return _tree_pids(srv.pid) if name in HIVEMESH else [srv.pid]

        if client == "java":
            setup_tables(srv)
            res: dict[str, Any] = {"ops": {}, "clients": [], "growth": []}
        else:
            res = run_workload(srv, cfg, say)
        if client in ("java", "both"):
            try:
                res["java_client"] = run_java_client(srv, cfg, levels, pids, say)
            except java_client.JavaClientError as e:
                res["java_client"] = {"error": str(e)}
                console.print(f"[red]{LABELS[name]}: the Java client failed: {e}[/red]")
        if client != "java":
            res["clients"] = run_clients(srv, cfg, levels, clients, pids, say)
            res["concurrency"] = next(
                c for c in res["clients"] if c["clients"] == concurrency_headline(levels)
            )
            first_add_s = res["ops"]["add_partitions.1000"]["first_s"]
            res["growth"], res["growth_note"] = run_filter_growth(srv, cfg, first_add_s, say)
        res["rss_mb"] = sum(rss_bytes(p) for p in pids()) / 2**20
        res["peak_rss_mb"] = sum(peak_rss_bytes(p) for p in pids()) / 2**20
        pss = pss_bytes(pids())  # the RSS sum counts the pages forked workers share once per worker
        if pss is not None:
            res["pss_mb"] = pss / 2**20
        if srv.pg_db:
            backends = _pg_backends_pss(srv.pg_db)
            if backends is not None:
                res["pg_backends"], res["pg_backends_pss_mb"] = backends[0], backends[1] / 2**20
    res["wall_s"] = time.perf_counter() - t_start
    say(f"done in {res['wall_s']:.0f} s")
    return res


# ---------------------------------------------------------------------------------------------- report
OP_ROWS = [
    ("get_table", "get_table", "5x"),
    ("get_table_req", "get_table_req", "5x"),
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
    text = f"{r:.2f}x" if r < 1 else f"{r:.1f}x" if r < 100 else f"{r:.0f}x"
    if aim:
        need = float(aim.rstrip("x"))
        return f"[green]{text}[/green]" if r >= need else f"[red]{text}[/red]"
    return text


def _pg_total_mb(r: dict[str, Any]) -> float:
    """The server's RSS plus its PostgreSQL backends' PSS (SQLite and Derby run inside their server)."""
    return float(r["rss_mb"] + r.get("pg_backends_pss_mb", 0.0))


def render(
    results: dict[str, Any], skipped: dict[str, str], console: Console, mode: str, levels: Sequence[int]
) -> None:
    """Print the result tables: ms per call and memory with ratios against both Java metastores,
    get_table throughput per number of concurrent clients, get_partitions_by_filter growth."""

    def ok(server: str) -> bool:
        return server in results and "error" not in results[server]

    def cell(server: str, fn: Callable[[dict[str, Any]], str]) -> str:
        if server in skipped:
            return "[dim]skipped[/dim]"
        if "error" in results.get(server, {}):
            return "[red]failed[/red]"
        return fn(results[server])

    def ratio(
        server: str, competitor: str, fn: Callable[[dict[str, Any]], float | None], invert: bool, aim: str
    ) -> str:
        """competitor / server (``invert``: server / competitor, for throughput)."""
        if not (ok(server) and ok(competitor)):
            return "-"
        a, b = fn(results[competitor]), fn(results[server])
        return _ratio((b / a if invert else a / b) if a and b else None, aim)

    def ratios(fn: Callable[[dict[str, Any]], float | None], invert: bool, aim: str) -> list[str]:
        return [ratio(s, c, fn, invert, aim) for c in COMPETITORS for s in HIVEMESH]

    n = concurrency_headline(levels)
    t = RichTable(
        title="Metastore operations, ms per call (mean / p50). Ratios = Java metastore / hivemesh, >1 = hivemesh "
        "faster or smaller: 'ratio' against HMS 2.3.10, 'vs Hive 4' against Hive 4 (PostgreSQL). "
        f"The {n}-client rows: {TABLE_CALL} from {n} {mode}, as in the next table",
        title_justify="left",
    )
    t.add_column("operation")
    for s in SERVERS:
        t.add_column(LABELS[s], justify="right")
    for c in ("ratio sqlite", "ratio postgres", "vs Hive 4 sqlite", "vs Hive 4 postgres", "aim"):
        t.add_column(c, justify="right")

    def op_cell(r: dict[str, Any], k: str) -> str:
        if k not in r["ops"]:
            return "n/a"
        return f"{_ms(r['ops'][k]['mean_ms'])} / {_ms(r['ops'][k]['p50_ms'])}"

    def op_mean(r: dict[str, Any], k: str) -> float | None:
        return r["ops"][k]["mean_ms"] if k in r["ops"] else None

    for key, label, aim in OP_ROWS:
        t.add_row(
            label,
            *(cell(s, partial(op_cell, k=key)) for s in SERVERS),
            *ratios(partial(op_mean, k=key), False, aim),
            f"≥{aim}" if aim else "",
        )
    t.add_section()

    def conc(r: dict[str, Any], k: str) -> float | None:
        return r["concurrency"][k] if r.get("concurrency") else None

    t.add_row(
        f"get_table, {n} clients: ms per call",
        *(
            cell(
                s,
                lambda r: (
                    f"{_ms(r['concurrency']['mean_ms'])} / {_ms(r['concurrency']['p50_ms'])}"
                    if r.get("concurrency")
                    else "n/a"
                ),
            )
            for s in SERVERS
        ),
        *ratios(partial(conc, k="mean_ms"), False, ""),
        "",
    )
    t.add_row(
        f"get_table, {n} clients: ops/s",
        *(
            cell(s, lambda r: f"{r['concurrency']['ops_per_s']:,.0f}" if r.get("concurrency") else "n/a")
            for s in SERVERS
        ),
        *ratios(partial(conc, k="ops_per_s"), True, ""),
        "",
    )
    t.add_section()
    t.add_row(
        "RSS after the run, MB",
        *(cell(s, lambda r: f"{r['rss_mb']:,.0f}") for s in SERVERS),
        *ratios(lambda r: r["rss_mb"], False, "3x"),
        "≥3x",
    )
    t.add_row(
        "peak RSS, MB",
        *(cell(s, lambda r: f"{r['peak_rss_mb']:,.0f}") for s in SERVERS),
        *ratios(lambda r: r["peak_rss_mb"], False, ""),
        "",
    )
    t.add_row(
        "PSS after the run, MB",
        *(cell(s, lambda r: f"{r['pss_mb']:,.0f}" if "pss_mb" in r else "-") for s in SERVERS),
        *ratios(lambda r: r.get("pss_mb"), False, ""),
        "",
    )
    t.add_row(
        "PostgreSQL backends, PSS MB (count)",
        *(
            cell(
                s,
                lambda r: (
                    f"{r['pg_backends_pss_mb']:,.0f} ({r['pg_backends']})"
                    if "pg_backends_pss_mb" in r
                    else "-"
                ),
            )
            for s in SERVERS
        ),
        *ratios(lambda r: r.get("pg_backends_pss_mb"), False, ""),
        "",
    )
    t.add_row(
        "RSS + PostgreSQL backends, MB",
        *(cell(s, lambda r: f"{_pg_total_mb(r):,.0f}") for s in SERVERS),
        *ratios(_pg_total_mb, False, ""),
        "",
    )
    console.print(t)

    seconds = next((r["clients"][0]["seconds"] for r in results.values() if r.get("clients")), None)
    ct = RichTable(
        title=f"get_table from concurrent clients ({TABLE_CALL}; {mode}, each with its own connection), "
        + (
            f"{seconds:.0f} s window per level, the same for every client"
            if seconds
            else "no server measured"
        ),
        title_justify="left",
        caption="vs X = this server's ops/s / X's at the same number of clients (>1 = faster). CPUs = CPU time in "
        "the window / its length: server = hivemesh's parent and workers or the JVM; PostgreSQL = the whole "
        "PostgreSQL server (every backend, exited ones included); clients = the load clients. All share the "
        f"machine's {os.cpu_count()} CPUs.",
        caption_justify="left",
    )
    for col, just in [
        ("server", "left"),
        ("clients", "right"),
        ("ops/s", "right"),
        ("ms per call, mean / p50 / p99", "right"),
        ("vs HMS 2.3.10", "right"),
        ("vs Hive 4", "right"),
        ("server CPUs", "right"),
        ("PostgreSQL CPUs", "right"),
        ("client CPUs", "right"),
        ("server RSS MB", "right"),
    ]:
        ct.add_column(col, justify=just)  # type: ignore[arg-type]

    def level(server: str, clients: int) -> dict[str, Any] | None:
        if not ok(server):
            return None
        return next((x for x in results[server]["clients"] if x["clients"] == clients), None)

    for s in SERVERS:
        if not ok(s):
            continue
        for i, x in enumerate(results[s]["clients"]):
            vs = []
            for comp in COMPETITORS:
                other = level(comp, x["clients"])
                vs.append(
                    ""
                    if comp == s
                    else _ratio(x["ops_per_s"] / other["ops_per_s"], "")
                    if other and other["ops_per_s"] and x["ops_per_s"]
                    else "-"
                )
            lat = (
                f"{_ms(x['mean_ms'])} / {_ms(x['p50_ms'])} / {_ms(x['p99_ms'])}"
                if x["mean_ms"] is not None
                else "-"
            )
            ct.add_row(
                LABELS[s],
                str(x["clients"]),
                f"{x['ops_per_s']:,.0f}",
                lat,
                *vs,
                f"{x['server_cpus']:.2f}",
                f"{x['pg_cpus']:.2f}" if x["pg_cpus"] is not None else "-",
                f"{x['client_cpus']:.2f}",
                f"{x['server_rss_mb']:,.0f}",
                end_section=i == len(results[s]["clients"]) - 1,
            )
    console.print(ct)

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


# The aims for the Java client's table: (label, op or client count, aim vs HMS 2.3.10, aim vs
# Hive 4). A ratio is the Java metastore's p50 ms / hivemesh's (for the concurrent rows: hivemesh's
# ops/s / theirs), above 1 = hivemesh faster. get_partition_names: >= 3x HMS 2.3.10 and never slower
# than Hive 4.
JAVA_ROWS: list[tuple[str, str | int, float, float]] = [
    ("get_table", "get_table", 10.0, 10.0),
    ("get_table_req", "get_table_req", 0.0, 0.0),
    ("create_table", "create_table", 5.0, 5.0),
    ("drop_table", "drop_table", 5.0, 5.0),
    ("get_partitions of 1,000", "get_partitions", 3.0, 3.0),
    ("get_partition_names of 1,000", "get_partition_names", 3.0, 1.0),
]
JAVA_LEVEL_AIMS = {16: (3.0, 3.0), 64: (3.0, 3.0)}
MEMORY_AIM_VS_HIVE4 = 1.0  # PSS incl. PostgreSQL backends below Hive 4's


def _java_op(r: dict[str, Any], op: str, server: str) -> dict[str, Any] | None:
    """The Java client's figures for ``op`` on one server (Hive 4's get_table: its get_table_req,
    the call Hive 4's own clients send instead); None when not measured or failed."""
    jc = r.get("java_client") or {}
    ops = jc.get("ops") or {}
    x = ops.get(op)
    if (x is None or "error" in x) and server == "hive4" and op == "get_table":
        x = ops.get("get_table_req")
    return x if x is not None and "error" not in x else None


def _java_level(r: dict[str, Any], n: int) -> dict[str, Any] | None:
    jc = r.get("java_client") or {}
    return next((x for x in jc.get("clients") or [] if x.get("clients") == n), None)


def _pss_total_mb(r: dict[str, Any]) -> float | None:
    """The server's PSS (RSS where PSS is unreadable) plus its PostgreSQL backends' PSS."""
    if "rss_mb" not in r:
        return None
    return float(r.get("pss_mb", r["rss_mb"]) + r.get("pg_backends_pss_mb", 0.0))


def _aim_verdict(checks: list[tuple[float | None, float]]) -> str:
    """'met' / 'not met' over (ratio, aim) pairs with an aim; 'met where measured' when some ratio is
    missing and the others meet theirs; '-' when none was measured or there is no aim."""
    checks = [(r, a) for r, a in checks if a > 0]
    measured = [(r, a) for r, a in checks if r is not None]
    if not measured:
        return "-"
    if any(r < a for r, a in measured):
        return "[red]not met[/red]"
    return "[green]met[/green]" if len(measured) == len(checks) else "[green]met where measured[/green]"


def render_java(
    results: dict[str, Any],
    skipped: dict[str, str],
    console: Console,
    levels: Sequence[int],
    unavailable: str | None,
) -> dict[str, str]:
    """Print the Java client's table (the issue's rows, p50 ms and ops/s per server, the ratios to
    both Java metastores and whether each aim is met); returns {row label: verdict} (plain text)."""
    if unavailable:
        console.print(f"[yellow]note: the Java client did not run: {unavailable}[/yellow]")
        return {}

    def ran(server: str) -> bool:
        r = results.get(server, {})
        return "error" not in r and "java_client" in r and "error" not in r["java_client"]

    t = RichTable(
        title="Java client (bench/java/MetastoreLoad.java on Hive 2.3.10's Thrift client, as Spark's): p50 ms per "
        f"call; {TABLE_CALL} from N threads of one JVM, each with its own connection: ops/s (p50 ms). Ratios = "
        "Java metastore's time / hivemesh's (ops/s: hivemesh's / theirs), >1 = hivemesh faster. Hive 4's "
        "get_table: its get_table_req",
        title_justify="left",
    )
    t.add_column("operation")
    for s in SERVERS:
        t.add_column(LABELS[s], justify="right")
    pairs = [(s, c) for c in COMPETITORS for s in HIVEMESH]
    for s, c in pairs:
        t.add_column(f"{s} vs {'HMS 2.3' if c == 'java' else 'Hive 4'}", justify="right")
    t.add_column("aim (vs HMS 2.3, vs Hive 4)", justify="right")
    t.add_column("aim met", justify="right")
    verdicts: dict[str, str] = {}

    def add(label: str, value: Callable[[str], float | None], text: Callable[[str], str], invert: bool,
            aims: tuple[float, float], aim_text: str) -> None:  # fmt: skip
        cells = []
        for s in SERVERS:
            if s in skipped:
                cells.append("[dim]skipped[/dim]")
            elif not ran(s):
                cells.append("[red]failed[/red]")
            else:
                cells.append(text(s))
        ratio_cells, checks = [], []
        for s, c in pairs:
            a, b = (value(c), value(s)) if ran(s) and ran(c) else (None, None)
            r = (b / a if invert else a / b) if a and b else None
            aim = aims[0] if c == "java" else aims[1]
            ratio_cells.append(_ratio(r, f"{aim:g}x" if aim > 0 else ""))
            checks.append((r, aim))
        verdict = _aim_verdict(checks)
        verdicts[label] = (
            verdict.replace("[green]", "").replace("[red]", "").replace("[/green]", "").replace("[/red]", "")
        )
        t.add_row(label, *cells, *ratio_cells, aim_text, verdict)

    for label, op, aim_java, aim_h4 in JAVA_ROWS:

        def p50(s: str, op: str = str(op)) -> float | None:
            x = _java_op(results[s], op, s)
            return x["p50_ms"] if x else None

        def p50_text(s: str, op: str = str(op)) -> str:
            v = p50(s, op)
            return _ms(v) if v is not None else "n/a"

        aim_text = "" if not aim_java else f"≥{aim_java:g}x, ≥{aim_h4:g}x"
        add(label, p50, p50_text, False, (aim_java, aim_h4), aim_text)
    for n in levels:

        def ops(s: str, n: int = n) -> float | None:
            x = _java_level(results[s], n)
            return x["ops_per_s"] if x else None

        def ops_text(s: str, n: int = n) -> str:
            x = _java_level(results[s], n)
            return f"{x['ops_per_s']:,.0f} ({_ms(x['p50_ms'])})" if x else "n/a"

        aims = JAVA_LEVEL_AIMS.get(n, (0.0, 0.0))
        add(
            f"{TABLE_CALL}, {n} clients",
            ops,
            ops_text,
            True,
            aims,
            f"≥{aims[0]:g}x, ≥{aims[1]:g}x" if aims[0] else "",
        )
    t.add_section()

    def mem(s: str) -> float | None:
        return _pss_total_mb(results[s]) if s in results and "error" not in results[s] else None

    def mem_text(s: str) -> str:
        v = mem(s)
        return f"{v:,.0f}" if v is not None else "n/a"

    add("PSS incl. PostgreSQL backends, MB", mem, mem_text, False, (0.0, MEMORY_AIM_VS_HIVE4), "below Hive 4")
    console.print(t)
    return verdicts


# ---------------------------------------------------------------------------------------------- main
def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of client counts: {text!r}") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError(f"client counts must be 1 or more: {text!r}")
    return levels


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the selected servers one after the other, print and save the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runner.add_common_options(ap, "a smoke run (a minute or two per server)", SERVERS)
    ap.add_argument(
        "--clients",
        type=_levels,
        default=list(DEFAULT_CLIENTS),
        help="numbers of concurrent get_table clients, measured one after the other (default 1,16,64)",
    )
    ap.add_argument(
        "--concurrency",
        choices=("threads", "processes"),
        default="processes",
        help="run the concurrent get_table clients as separate light processes (default) or as threads "
        "of this process (their shared GIL can then be the limit: the CPU they use is printed)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="hivemesh metastore processes serving the port (--workers; RSS is their sum; default 1)",
    )
    ap.add_argument(
        "--client",
        choices=("both", "java", "python"),
        default="both",
        help="who makes the calls: the Python Thrift client (every table but the Java one), the JVM client "
        "(bench/java/MetastoreLoad.java: the issue's rows, single and concurrent; 'java' runs only it, "
        "after creating its tables), or both (default)",
    )
    args = ap.parse_args(argv)
    # Thrift logs every refused connection while a server starts and is polled; the polls report
    # their own failure, so keep the startup noise out of the output
    logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
    skipped = runner.skipped_servers(
        ap, args.only, _pg_available, java_available, SERVERS, {"hive4": _hive4_unavailable}
    )
    cfg = QUICK if args.quick else FULL
    java_unavailable = java_client.java_client_unavailable() if args.client != "python" else None
    client = "python" if java_unavailable else args.client
    if java_unavailable and args.client == "java":
        ap.error(f"--client java: {java_unavailable}")
    console = runner.wide_console(200)
    load = runner.print_banner(console, "hivemesh metastore benchmark", args.quick, skipped, LABELS)
    t0 = time.perf_counter()
    clients = LoadClients(args.concurrency)
    try:
        results, failed = runner.run_servers(
            console,
            skipped,
            LABELS,
            "hivemesh-bench-",
            args.keep,
            lambda s, workdir: bench_server(
                s, cfg, args.clients, clients, workdir, args.java_opts.split(), console, args.workers, client
            ),
            SERVERS,
        )
        pg_note = _pg_server_note() if any(s in results for s in ("postgres", "hive4")) else None
    finally:
        clients.close()
        _pg_cluster_stop()

    console.print()
    if client != "java":
        render(results, skipped, console, args.concurrency, args.clients)
    verdicts = (
        render_java(results, skipped, console, args.clients, java_unavailable)
        if args.client != "python"
        else {}
    )
    for s in SERVERS:
        r = results.get(s, {})
        if r.get("growth_note"):
            console.print(f"note: {r['growth_note']}.")
    console.print(
        "note: RSS is the server process's (hivemesh: its parent and workers summed; the JVM); "
        "a PostgreSQL-backed server's backends are counted apart (PSS: shared memory shared out), "
        "SQLite and Derby run inside their server."
    )
    if pg_note:
        console.print(f"note: {pg_note}; hivemesh-postgres and Hive 4 each had a fresh database on it.")
    if "java" in results and "error" not in results["java"]:
        opts = args.java_opts or "none (JVM default heap: up to 1/4 of RAM)"
        console.print(f"note: HMS 2.3.10 ran on embedded Derby; JVM options: {opts}.")
    if "hive4" in results and "error" not in results["hive4"]:
        console.print(
            f"note: Hive 4 (PostgreSQL) is the {_hive4_description()} on Java 21 (tests/support/hive4.py): "
            "schema by Hive's schematool, DbNotificationListener, ACID on, the metadata transformer and "
            f"compactor off; JVM -Xmx{HIVE4_HEAP}"
            + (f" then {args.java_opts}" if args.java_opts else "")
            + "."
        )
    if client != "java":
        console.print(
            f"note: the concurrent clients ran as {args.concurrency}, each with its own connection, on the "
            f"same {os.cpu_count()} CPUs as the server; hivemesh ran {args.workers} worker process(es)."
        )
    for s in SERVERS:
        for x in results.get(s, {}).get("clients") or []:
            if x["idle_clients"]:
                console.print(
                    f"[yellow]note: with {LABELS[s]} at {x['clients']} clients, {x['idle_clients']} client(s) "
                    f"completed no call in the window.[/yellow]"
                )
            if args.concurrency == "threads" and x["client_cpus"] > 0.6:
                console.print(
                    f"[yellow]note: with {LABELS[s]} at {x['clients']} clients the threaded clients used "
                    f"{x['client_cpus']:.0%} of one CPU: their GIL may be the limit, try --concurrency "
                    "processes.[/yellow]"
                )
    end_load = runner.print_total(console, t0)

    if args.json_out:
        doc = {
            "quick": args.quick,
            "concurrency_mode": args.concurrency,
            "clients": args.clients,
            "cpus": os.cpu_count(),
            "load_average_start": load,
            "load_average_end": end_load,
            "postgres": pg_note,
            "skipped": skipped,
            "client": client,
            "java_client_unavailable": java_unavailable,
            "aims_java_client": verdicts,
            "servers": results,
        }
        args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
