"""Live Hive's cost: reads and writes through ``hivemesh live serve`` against the same calls direct
to the zone's metastore, with and without a WAN delay between the writing zone and etcd.

Usage::

    python bench/live.py [--quick] [--delay-ms 20] [--writers 16] [--seconds 10] [--reads 2000]
                         [--writes 200] [--lag-samples 100] [--json out.json] [--keep]

Two zones, ``east`` and ``west``, each a ``hivemesh metastore`` on its own SQLite file with its own
live proxy (``hivemesh live serve``), the command log on a 3-member etcd cluster on loopback
(``tests/support/etcd.py``), and a federation proxy (``hivemesh proxy``, default configuration)
in front of east's metastore. East's live proxy reaches etcd through relays
(``tests/support/relay.py``, in a process of their own), one per member, which add the one-way
delay of the case to both directions: 0 ms, then ``--delay-ms``. West's live proxy talks to etcd
directly. Every server is a subprocess; the clients run in this process. Measured:

- reads: ``get_table`` p50/p95 from one client direct to east's metastore, through the federation
  proxy and through east's live proxy (the routes interleaved in rounds);
- writes: ``create_table`` and ``drop_table`` p50/p95 from one client through east's live proxy
  (a live database) and direct to east's metastore (a database of its own), at each delay, the
  routes interleaved; the issue's target ``live p50 <= direct p50 + one round trip + 5 ms`` is
  computed per row (one round trip: twice the one-way delay);
- ``--writers`` concurrent writers (threads of this process, one connection each), each creating
  and dropping tables of its own for ``--seconds``: DDL calls per second through the live proxy
  and direct, and the ratio (target >= 0.5x), at each delay;
- apply lag in west: after each create through east's live proxy answers, west's metastore is
  polled directly until it shows the table; p50/p95 of that time, and how often the table was
  there at the first look;
- data copy: a partition of ``--copy-files`` files of ``--copy-mib`` MiB each added through east's
  live proxy, timed from the call until west's metastore shows it (west copied the files first):
  MiB/s, at each delay;
- Spark ACID writes (``--spark-acid``, on in the full run): ``insert_acid`` of ``--acid-rows`` rows
  into a full-ACID table, through the rule's ``acid_owner`` zone (east's live proxy), through the
  other zone (west's live proxy: its txn, lock and write-id calls go to east's metastore) and,
  for reference, straight to east's metastore (a table no rule covers): seconds p50 per insert,
  at each delay. In the delay case west reaches east's metastore through a relay with the same
  one-way delay (the WAN between the zones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support (the server harnesses shared with the tests)

import psutil  # noqa: E402
import yaml  # noqa: E402
from bench import runner  # noqa: E402
from hive_metastore.ttypes import (  # noqa: E402
    Database,
    FieldSchema,
    NoSuchObjectException,
    Partition,
    SerDeInfo,
    StorageDescriptor,
    Table,
)
from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402
from tests.support.etcd import ETCD_SKIP_REASON, EtcdCluster, etcd_binary  # noqa: E402
from tests.support.proxy import ProxyProcess, write_mesh  # noqa: E402
from tests.support.relay import RelayProcess  # noqa: E402
from tests.support.servers import HivemeshProcess, ManagedProcess, ThriftClient, die_with_parent, free_port  # noqa: E402

from hivemesh.acid.tables import create_transactional_table  # noqa: E402
from hivemesh.client.metastore import MetastoreClient  # noqa: E402

ZONES = ("east", "west")
LIVE_DB = "live_bench"
LOCAL_DB = "local_bench"
READ_TABLE = "t"
AIM_SLACK_MS = 5.0
AIM_RATIO = 0.5
ACID_TABLE = "acid_w"
COPY_TABLE = "copy_t"
COLUMNS = [("id", "bigint"), ("name", "string"), ("amount", "decimal(18,2)"), ("created", "timestamp")]
ORC = "org.apache.hadoop.hive.ql.io.orc."


# ---------------------------------------------------------------------------------------------- data
def make_table(db: str, name: str) -> Table:
    """An external ORC table without a location (the metastore, or the live rule, places it)."""
    return Table(
        tableName=name,
        dbName=db,
        owner="bench",
        sd=StorageDescriptor(
            cols=[FieldSchema(c, t, None) for c, t in COLUMNS],
            location=None,
            inputFormat=ORC + "OrcInputFormat",
            outputFormat=ORC + "OrcOutputFormat",
            serdeInfo=SerDeInfo(None, ORC + "OrcSerde", {"serialization.format": "1"}),
        ),
        partitionKeys=[FieldSchema("ds", "string", None)],
        tableType="EXTERNAL_TABLE",
        parameters={"EXTERNAL": "TRUE", "comment": "hivemesh live benchmark"},
    )


# ---------------------------------------------------------------------------------------------- stats
def pct(sorted_ms: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank of an ascending list."""
    return sorted_ms[max(0, math.ceil(q * len(sorted_ms)) - 1)]


def summary(samples_s: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean in ms, and the sample count."""
    ms = sorted(s * 1000 for s in samples_s)
    return {"p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95), "mean_ms": statistics.fmean(ms), "n": len(ms)}


# ---------------------------------------------------------------------------------------------- servers
class LiveProcess(ManagedProcess):
    """``hivemesh live serve --config CONFIG --zone ZONE`` as a subprocess on a free port; its
    output goes to ``log``. ``start()`` returns once the port accepts connections."""

    def __init__(self, config: Path, zone: str, log: Path) -> None:
        self.config = config
        self.zone = zone
        self.log = log
        self.host = "127.0.0.1"
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 60.0) -> LiveProcess:
        self.port = free_port()
        cmd = [
            sys.executable, "-m", "hivemesh.cli", "live", "serve", "--config", str(self.config),
            "--zone", self.zone, "--host", self.host, "--port", str(self.port),
        ]  # fmt: skip
        with open(self.log, "a", encoding="utf-8") as logf:
            self.proc = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, text=True, preexec_fn=die_with_parent
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"live proxy of {self.zone} exited with {self.proc.returncode}; see {self.log}"
                )
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(
                        f"live proxy of {self.zone} did not listen in {timeout:g} s; see {self.log}"
                    ) from None
                time.sleep(0.05)


@dataclass(frozen=True)
class Endpoint:
    """Where a route's client connects: ``key`` (JSON), ``label`` (tables), host and port."""

    key: str
    label: str
    host: str
    port: int

    def client(self) -> ThriftClient:
        return ThriftClient(self.host, self.port, timeout_ms=120_000)


def write_live_config(
    path: Path, workdir: Path, metastores: dict[str, str], endpoints: list[str], prefix: str
) -> Path:
    """mesh.yaml with both zones and one live rule for database LIVE_DB; ``endpoints``: the etcd
    client URLs this zone's live proxy uses."""
    doc = {
        "zones": {
            z: {"metastore": uri, "warehouse": str(workdir / z / "wh")} for z, uri in metastores.items()
        },
        "live": {
            "etcd": {"endpoints": endpoints, "prefix": prefix},
            "rules": [
                {
                    "name": "bench",
                    "databases": [LIVE_DB],
                    "paths": {z: str(workdir / z / "live") for z in metastores},
                    "acid_owner": "east",
                }
            ],
        },
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


_HOLD = threading.Event()
"""Set once every server is stopped: until then the threads that started them wait."""


def start_all(servers: Sequence[Any], started: list[Any]) -> None:
    """Start ``servers`` at once, each in a thread (they take a second or two each); all are
    appended to ``started`` first, so a failure leaves none behind. Raises the first failure.
    Each thread then waits for _HOLD: the servers are started with ``PR_SET_PDEATHSIG``, which
    signals a child when the thread that started it ends."""
    started.extend(servers)
    errors: list[BaseException] = []
    ready = threading.Semaphore(0)

    def one(server: Any) -> None:
        try:
            server.start()
        except Exception as e:  # noqa: BLE001 - raised below
            errors.append(e)
        ready.release()
        _HOLD.wait()

    for s in servers:
        threading.Thread(target=one, args=(s,), daemon=True).start()
    for _ in servers:
        ready.acquire()
    if errors:
        raise errors[0]


def stop_all(started: Sequence[Any]) -> None:
    """Stop every server at once (a live proxy takes seconds to stop: its watch stream is only
    noticed closed at its read timeout), then etcd, which they may talk to until they stop."""
    etcd = [s for s in started if isinstance(s, EtcdCluster)]
    others = [s for s in started if not isinstance(s, EtcdCluster)]

    def stop(server: Any) -> None:
        with contextlib.suppress(Exception):
            server.stop()

    threads = [threading.Thread(target=stop, args=(s,)) for s in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in etcd:
        stop(s)
    _HOLD.set()


def _pid(p: Any) -> int:
    assert p.proc is not None
    return int(p.proc.pid)


# ---------------------------------------------------------------------------------------------- measures
def read_latency(routes: Sequence[Endpoint], reps: int, warmup: int, rounds: int) -> dict[str, Any]:
    """``reps`` timed ``get_table`` calls per route from one connection per route after
    ``warmup`` calls; the routes take turns in ``rounds`` rounds."""
    clients = {r.key: r.client() for r in routes}
    samples: dict[str, list[float]] = {r.key: [] for r in routes}
    rounds = max(1, min(rounds, reps))
    try:
        for r in routes:
            c = clients[r.key].client
            t = c.get_table(LIVE_DB, READ_TABLE)
            assert t.tableName == READ_TABLE and len(t.sd.cols) == len(COLUMNS), t
            for _ in range(warmup):
                c.get_table(LIVE_DB, READ_TABLE)
        for _ in range(rounds):
            for r in routes:
                c, out = clients[r.key].client, samples[r.key]
                for _ in range(reps // rounds):
                    t0 = time.perf_counter()
                    c.get_table(LIVE_DB, READ_TABLE)
                    out.append(time.perf_counter() - t0)
    finally:
        for tc in clients.values():
            tc.close()
    return {k: summary(v) for k, v in samples.items()}


def write_latency(live: Endpoint, direct: Endpoint, n: int, rounds: int, tag: str) -> dict[str, Any]:
    """``n`` timed ``create_table`` then ``drop_table`` calls per route from one connection per
    route (live: database LIVE_DB through the live proxy; direct: LOCAL_DB on the metastore), the
    routes taking turns in ``rounds`` rounds, after 3 untimed pairs each."""
    routes = ((live, LIVE_DB), (direct, LOCAL_DB))
    clients = {r.key: r.client() for r, _ in routes}
    samples: dict[str, dict[str, list[float]]] = {r.key: {"create": [], "drop": []} for r, _ in routes}
    try:

        def pair(r: Endpoint, db: str, name: str, out: dict[str, list[float]] | None) -> None:
            c = clients[r.key].client
            t0 = time.perf_counter()
            c.create_table(make_table(db, name))
            t1 = time.perf_counter()
            c.drop_table(db, name, False)
            t2 = time.perf_counter()
            if out is not None:
                out["create"].append(t1 - t0)
                out["drop"].append(t2 - t1)

        for r, db in routes:
            for i in range(3):
                pair(r, db, f"warm_{tag}_{i}", None)
        rounds = max(1, min(rounds, n))
        per_round = n // rounds
        for k in range(rounds):
            for r, db in routes:
                for i in range(per_round):
                    pair(r, db, f"w_{tag}_{k}_{i}", samples[r.key])
    finally:
        for tc in clients.values():
            tc.close()
    return {key: {op: summary(v) for op, v in s.items()} for key, s in samples.items()}


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds used so far by the processes ``pids`` (gone ones count 0)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
    return total


def concurrent_ddl(
    route: Endpoint, db: str, writers: int, seconds: float, tag: str, watch: dict[str, list[int]]
) -> dict[str, Any]:
    """``writers`` threads, each with its own connection, creating and dropping tables of their own
    in ``db`` for ``seconds``, all starting at one instant after one untimed pair each: the DDL
    calls completed inside the window per second, their p50/p95, and the CPUs used in the window
    by each group of processes in ``watch`` (label -> pids)."""
    barrier = threading.Barrier(writers + 1)
    start_end: list[float] = []
    done: list[list[float]] = [[] for _ in range(writers)]
    errors: list[str] = []

    def writer(w: int) -> None:
        try:
            with route.client() as c:
                c.create_table(make_table(db, f"c_{tag}_{w}_warm"))
                c.drop_table(db, f"c_{tag}_{w}_warm", False)
                barrier.wait()
                barrier.wait()  # the window is set between the two
                start, end = start_end
                time.sleep(max(0.0, start - time.monotonic()))
                i = 0
                while time.monotonic() < end:
                    name = f"c_{tag}_{w}_{i}"
                    t0 = time.monotonic()
                    c.create_table(make_table(db, name))
                    t1 = time.monotonic()
                    c.drop_table(db, name, False)  # also after the window: nothing left behind
                    t2 = time.monotonic()
                    done[w].extend(t for t, at in ((t1 - t0, t1), (t2 - t1, t2)) if at <= end)
                    i += 1
        except threading.BrokenBarrierError:
            pass
        except Exception as e:  # noqa: BLE001 - reported in the results
            errors.append(f"{type(e).__name__}: {getattr(e, 'message', None) or e}")
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.abort()

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
    for t in threads:
        t.start()
    cpu0: dict[str, float] = {}
    try:
        barrier.wait(timeout=120)
        start = time.monotonic() + 0.05
        start_end.extend((start, start + seconds))
        barrier.wait(timeout=10)
        time.sleep(max(0.0, start - time.monotonic()))
        cpu0 = {k: cpu_seconds(pids) for k, pids in watch.items()}
        time.sleep(max(0.0, start + seconds - time.monotonic()))
    except threading.BrokenBarrierError:
        pass
    cpus = {k: (cpu_seconds(pids) - cpu0[k]) / seconds for k, pids in watch.items() if k in cpu0}
    for t in threads:
        t.join(seconds + 180)
    if errors:
        raise RuntimeError(f"{route.label}: {len(errors)} writer(s) failed; first: {errors[0]}")
    calls = [s for per in done for s in per]
    return {
        "writers": writers,
        "seconds": seconds,
        "calls": len(calls),
        "calls_per_s": len(calls) / seconds,
        "latency": summary(calls) if calls else None,
        "cpus": cpus,
    }


def apply_lag(live: Endpoint, other: Endpoint, n: int, tag: str) -> dict[str, Any]:
    """``n`` creates through ``live``; after each answer, ``other`` (the other zone's metastore) is
    polled until it shows the table: that time's p50/p95, and how often it was there at once."""
    lags: list[float] = []
    first_look = 0
    with live.client() as lc, other.client() as oc:
        for i in range(n):
            name = f"lag_{tag}_{i}"
            lc.create_table(make_table(LIVE_DB, name))
            t0 = time.perf_counter()
            deadline = t0 + 60
            looks = 0
            while True:
                looks += 1
                try:
                    oc.get_table(LIVE_DB, name)
                    break
                except NoSuchObjectException:
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"{name} not in the other zone 60 s after the answer") from None
            lags.append(time.perf_counter() - t0)
            first_look += looks == 1
            lc.drop_table(LIVE_DB, name, False)
    return {**summary(lags), "first_look": first_look}


def copy_throughput(live: Endpoint, other: Endpoint, files: int, mib: int, tag: str) -> dict[str, Any]:
    """A partition of ``files`` files of ``mib`` MiB (random bytes) written under east's rule path and
    added through ``live`` (east's live proxy); timed from the call until ``other`` (west's
    metastore) shows the partition, whose directory must then hold every byte."""
    name = f"{COPY_TABLE}_{tag}"
    with live.client() as lc, other.client() as oc:
        lc.create_table(make_table(LIVE_DB, name))
        east_dir = Path(lc.get_table(LIVE_DB, name).sd.location.removeprefix("file:")) / "ds=1"
        east_dir.mkdir(parents=True)
        for i in range(files):
            (east_dir / f"part-{i:05d}").write_bytes(os.urandom(mib << 20))
        size = files * (mib << 20)
        t0 = time.perf_counter()
        lc.add_partitions([Partition(values=["1"], dbName=LIVE_DB, tableName=name, parameters={})])
        answered = time.perf_counter() - t0
        deadline = t0 + 600
        while True:
            try:
                part = oc.get_partition(LIVE_DB, name, ["1"])
                break
            except NoSuchObjectException:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"{name}/ds=1 not in west 600 s after it was added") from None
                time.sleep(0.002)
        visible = time.perf_counter() - t0
        west_dir = Path(part.sd.location.removeprefix("file:"))
        copied = sum(f.stat().st_size for f in west_dir.iterdir())
        if copied != size:
            raise RuntimeError(f"west's {west_dir} holds {copied} bytes, east's {size}")
        lc.drop_table(LIVE_DB, name, False)
    return {
        "bytes": size,
        "files": files,
        "answered_s": answered,
        "visible_s": visible,
        "mib_per_s": size / 2**20 / visible,
    }


def spark_acid_inserts(
    spark: Any, routes: Sequence[tuple[str, str, str]], rows: int, n: int
) -> dict[str, dict[str, float]]:
    """``n`` timed ``insert_acid`` calls of ``rows`` rows per route (key, metastore URI, table), the
    routes taking turns, after one untimed insert each; p50/p95/mean ms per route."""
    from hivemesh.spark.acid_dml import insert_acid

    df = spark.range(rows).selectExpr("id", "cast(id as string) as v").cache()
    df.count()
    samples: dict[str, list[float]] = {key: [] for key, _, _ in routes}
    for _, uri, table in routes:
        insert_acid(spark, df, table, metastore_uri=uri)
    for _ in range(n):
        for key, uri, table in routes:
            t0 = time.perf_counter()
            insert_acid(spark, df, table, metastore_uri=uri)
            samples[key].append(time.perf_counter() - t0)
    df.unpersist()
    return {key: summary(v) for key, v in samples.items()}


# ---------------------------------------------------------------------------------------------- report
def _ms(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _pp(s: dict[str, float] | None) -> str:
    return f"{_ms(s['p50_ms'])} / {_ms(s['p95_ms'])}" if s else "-"


def _mark(ok: bool) -> str:
    return "[green]met[/green]" if ok else "[red]not met[/red]"


def render(doc: dict[str, Any], console: Console) -> None:
    """One table: every measure by route, live against direct, the targets."""
    st = doc["settings"]
    t = RichTable(
        title=f"Live Hive: ms p50 / p95 (one client) or calls/s ({st['writers']} writers); "
        f"etcd delay = one-way, east's live proxy <-> etcd",
        title_justify="left",
    )
    for col, just in [
        ("measure", "left"),
        ("etcd delay", "right"),
        ("direct", "right"),
        ("federation proxy", "right"),
        ("live proxy", "right"),
        ("live vs direct", "right"),
        ("target", "right"),
        ("", "left"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    rd = doc["reads"]
    t.add_row(
        "get_table, 1 client",
        "-",
        _pp(rd["direct"]),
        _pp(rd["federation"]),
        _pp(rd["live"]),
        f"{rd['live']['p50_ms'] - rd['direct']['p50_ms']:+.2f} ms p50 (federation "
        f"{rd['federation']['p50_ms'] - rd['direct']['p50_ms']:+.2f})",
        "",
        "",
        end_section=True,
    )
    for case in doc["cases"]:
        d = case["delay_ms"]
        w = case["writes"]
        for op in ("create", "drop"):
            live, direct = w["live"][op], w["direct"][op]
            bound = direct["p50_ms"] + 2 * d + AIM_SLACK_MS
            t.add_row(
                f"{op}_table, 1 client",
                f"{d:g} ms",
                _pp(direct),
                "",
                _pp(live),
                f"{live['p50_ms'] - direct['p50_ms']:+.1f} ms p50",
                f"p50 <= {_ms(direct['p50_ms'])} + {2 * d:g} + {AIM_SLACK_MS:g} = {_ms(bound)}",
                _mark(live["p50_ms"] <= bound),
            )
        c = case["concurrency"]
        ratio = c["live"]["calls_per_s"] / c["direct"]["calls_per_s"] if c["direct"]["calls_per_s"] else 0.0
        t.add_row(
            f"DDL calls/s, {st['writers']} writers",
            f"{d:g} ms",
            f"{c['direct']['calls_per_s']:,.0f}",
            "",
            f"{c['live']['calls_per_s']:,.0f}",
            f"{ratio:.2f}x",
            f">= {AIM_RATIO}x",
            _mark(ratio >= AIM_RATIO),
        )
        t.add_row(
            f"  their ms p50 / p95, {st['writers']} writers",
            f"{d:g} ms",
            _pp(c["direct"]["latency"]),
            "",
            _pp(c["live"]["latency"]),
            "",
            "",
            "",
        )
        lag = case["lag"]
        t.add_row(
            "apply lag in west after east's answer",
            f"{d:g} ms",
            "",
            "",
            _pp(lag),
            f"there at the first look: {lag['first_look']} of {lag['n']}",
            "",
            "",
            end_section=True,
        )
    console.print(t)
    render_data_and_acid(doc, console)

    cpu = RichTable(
        title=f"CPUs used during the {st['writers']}-writer windows (CPU seconds / window; machine: "
        f"{doc['cpus']} CPUs)",
        title_justify="left",
    )
    cpu.add_column("etcd delay", justify="right")
    cpu.add_column("route", justify="left")
    groups = list(doc["cases"][0]["concurrency"]["direct"]["cpus"])
    for g in groups:
        cpu.add_column(g, justify="right")
    for case in doc["cases"]:
        for key, label in (("direct", "direct"), ("live", "live proxy")):
            c = case["concurrency"][key]["cpus"]
            cpu.add_row(f"{case['delay_ms']:g} ms", label, *(f"{c[g]:.2f}" for g in groups))
    console.print(cpu)


def render_data_and_acid(doc: dict[str, Any], console: Console) -> None:
    """The data copy and, when measured, the Spark ACID inserts, per delay."""
    st = doc["settings"]
    t = RichTable(
        title="Data before metadata: a partition added through east's live proxy, until west shows it "
        "(west copied its files first)",
        title_justify="left",
    )
    for col in ("delay (one way)", "files x MiB", "east answered, s", "in west, s", "MiB/s"):
        t.add_column(col, justify="right")
    for case in doc["cases"]:
        c = case["copy"]
        t.add_row(
            f"{case['delay_ms']:g} ms",
            f"{c['files']} x {st['copy_mib']}",
            f"{c['answered_s']:.3f}",
            f"{c['visible_s']:.3f}",
            f"{c['mib_per_s']:,.0f}",
        )
    console.print(t)
    if not any("acid" in case for case in doc["cases"]):
        return
    a = RichTable(
        title=f"Spark ACID insert of {st['acid_rows']:,} rows (insert_acid), ms p50 / p95; the rule's "
        "acid_owner is east",
        title_justify="left",
    )
    for col in ("delay (one way)", "direct (east's metastore)", "owner zone's proxy (east)",
                "other zone's proxy (west)", "other vs owner"):  # fmt: skip
        a.add_column(col, justify="right")
    for case in doc["cases"]:
        r = case.get("acid")
        if r is None:
            continue
        a.add_row(
            f"{case['delay_ms']:g} ms",
            _pp(r["direct"]),
            _pp(r["owner"]),
            _pp(r["other"]),
            f"{r['other']['p50_ms'] - r['owner']['p50_ms']:+,.0f} ms p50",
        )
    console.print(a)


def print_notes(doc: dict[str, Any], console: Console) -> None:
    st = doc["settings"]
    console.print(
        f"note: {st['reads']} get_table calls per route ({st['rounds']} rounds); {st['writes']} create + drop "
        f"pairs per route and delay; {st['writers']} writers for {st['seconds']:g} s per route and delay; "
        f"{st['lag_samples']} apply-lag samples per delay."
    )
    console.print(
        "note: live writes name a live database and are agreed through etcd; direct writes go to a "
        "database of east's metastore that no rule covers. West's live proxy reaches etcd without "
        "delay in every case; the relays stay in east's path at 0 ms (a pass-through)."
    )
    console.print(
        f"note: every server shares this machine's {os.cpu_count()} CPUs: 3 etcd members, 2 metastores, "
        "2 live proxies (each also applying every command), the federation proxy, the relays and "
        "the clients."
    )


# ---------------------------------------------------------------------------------------------- main
@dataclass(frozen=True)
class Settings:
    """Sizes and durations of a run (``--quick`` or full, then the options)."""

    delays_ms: tuple[float, ...]
    reads: int
    warmup: int
    rounds: int
    writes: int
    writers: int
    seconds: float
    lag_samples: int
    copy_files: int
    copy_mib: int
    spark_acid: bool
    acid_rows: int
    acid_inserts: int


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    return Settings(
        delays_ms=(0.0, args.delay_ms),
        reads=args.reads or (200 if quick else 2000),
        warmup=20 if quick else 200,
        rounds=5 if quick else 10,
        writes=args.writes or (20 if quick else 200),
        writers=args.writers,
        seconds=args.seconds or (2.0 if quick else 10.0),
        lag_samples=args.lag_samples or (10 if quick else 100),
        copy_files=args.copy_files or (2 if quick else 4),
        copy_mib=args.copy_mib or (1 if quick else 64),
        spark_acid=(not quick) if args.spark_acid is None else args.spark_acid,
        acid_rows=args.acid_rows,
        acid_inserts=3 if quick else 10,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts and short windows (about a minute)")
    ap.add_argument("--delay-ms", type=float, default=20.0, help="one-way delay of the WAN case (default 20)")
    ap.add_argument("--writers", type=int, default=16, help="concurrent writers (default 16)")
    ap.add_argument(
        "--seconds", type=float, default=0, help="seconds per concurrent case (default 10; quick 2)"
    )
    ap.add_argument(
        "--reads", type=int, default=0, help="get_table calls per route (default 2000; quick 200)"
    )
    ap.add_argument(
        "--writes",
        type=int,
        default=0,
        help="create + drop pairs per route and delay (default 200; quick 20)",
    )
    ap.add_argument(
        "--lag-samples", type=int, default=0, help="apply-lag samples per delay (default 100; quick 10)"
    )
    ap.add_argument(
        "--copy-files", type=int, default=0, help="files of the copied partition (default 4; quick 2)"
    )
    ap.add_argument("--copy-mib", type=int, default=0, help="MiB per copied file (default 64; quick 1)")
    ap.add_argument(
        "--spark-acid",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure Spark ACID inserts through the owner and the other zone (default: on, off with --quick)",
    )
    ap.add_argument(
        "--acid-rows", type=int, default=100_000, help="rows per Spark ACID insert (default 100,000)"
    )
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, SQLite files)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Start etcd, the zones, the relays and the proxies; measure; print the table."""
    args = parse_args(argv)
    st = settings_from(args)
    console = runner.wide_console()
    load = runner.print_banner(console, "hivemesh Live Hive benchmark", args.quick, {}, {})
    binary = etcd_binary()
    if binary is None:
        console.print(f"[red]{ETCD_SKIP_REASON}[/red]")
        return 2
    t_total = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"  [dim]{time.perf_counter() - t_total:5.1f} s  {msg}[/dim]")

    workdir = Path(tempfile.mkdtemp(prefix="hivemesh-bench-live-"))
    started: list[Any] = []
    spark: Any = None
    failed = True
    try:
        etcd = EtcdCluster(workdir / "etcd", binary=binary)  # its ports are chosen here
        metastores: dict[str, HivemeshProcess] = {}
        for z in ZONES:
            (workdir / z).mkdir()
            metastores[z] = HivemeshProcess(
                f"sqlite:///{workdir / z / 'ms.db'}",
                workdir / z / "wh",
                workdir / f"{z}-ms.log",
                port=free_port(),
            )
        # east's links to etcd, and west's link to east's metastore (the owner zone's txn calls)
        relays = RelayProcess(
            [*(e.removeprefix("http://") for e in etcd.endpoints), f"127.0.0.1:{metastores['east'].port}"]
        )  # they connect on demand
        start_all([etcd, *metastores.values(), relays], started)
        etcd_relays, wan_east = relays.addresses[:-1], relays.addresses[-1]
        prefix = f"/hivemesh-bench/live-{uuid.uuid4().hex[:8]}"
        uris = {z: m.uri for z, m in metastores.items()}
        configs = {
            "east": write_live_config(
                workdir / "east.yaml", workdir, uris, [f"http://{a}" for a in etcd_relays], prefix
            ),
            "west": write_live_config(
                workdir / "west.yaml",
                workdir,
                {**uris, "east": f"thrift://{wan_east}"},
                etcd.endpoints,
                prefix,
            ),
        }
        lives = {z: LiveProcess(configs[z], z, workdir / f"{z}-live.log") for z in ZONES}
        fed_cfg = write_mesh(
            workdir / "proxy.yaml",
            {"port": 0, "store": f"sqlite:///{workdir / 'proxy-store.db'}"},
            {"name": "main", "uris": [uris["east"]]},
            [],
        )
        fed = ProxyProcess(fed_cfg, workdir / "proxy.log")
        start_all([*lives.values(), fed], started)
        direct = Endpoint(
            "direct", "direct (east's metastore)", metastores["east"].host, metastores["east"].port
        )
        west_direct = Endpoint("west", "west's metastore", metastores["west"].host, metastores["west"].port)
        live = Endpoint("live", "live proxy (east)", lives["east"].host, lives["east"].port)
        federation = Endpoint("federation", "federation proxy", fed.host, fed.port)
        watch = {
            "clients (this process)": [os.getpid()],
            **{f"{z} metastore": [_pid(metastores[z])] for z in ZONES},
            **{f"{z} live proxy": [_pid(lives[z])] for z in ZONES},
            "etcd (3 members)": [_pid(m) for m in etcd.members],
            "relays": [_pid(relays)],
        }
        say(
            f"etcd {', '.join(etcd.endpoints)}; east's relays {', '.join(etcd_relays)}; west's relay to "
            f"east's metastore {wan_east}; servers up"
        )

        with live.client() as c:
            c.create_database(Database(name=LIVE_DB, description="hivemesh live benchmark"))
            c.create_table(make_table(LIVE_DB, READ_TABLE))
        with direct.client() as c:
            c.create_database(Database(name=LOCAL_DB, description="hivemesh live benchmark, local"))
        acid_routes: list[tuple[str, str, str]] = []
        if st.spark_acid:
            say("Spark ACID: starting Spark, creating the full-ACID tables")
            from bench.acid_read import start_spark

            spark = start_spark(metastores["east"].uri, workdir, "2g")
            cols = [("id", "bigint"), ("v", "string")]
            for uri, db in (
                (f"thrift://{live.host}:{live.port}", LIVE_DB),
                (metastores["east"].uri, LOCAL_DB),
            ):
                with MetastoreClient(uri) as mc:
                    create_transactional_table(mc, db, ACID_TABLE, cols)
            acid_routes = [
                ("direct", metastores["east"].uri, f"{LOCAL_DB}.{ACID_TABLE}"),
                ("owner", f"thrift://{live.host}:{live.port}", f"{LIVE_DB}.{ACID_TABLE}"),
                ("other", f"thrift://{lives['west'].host}:{lives['west'].port}", f"{LIVE_DB}.{ACID_TABLE}"),
            ]

        say(f"reads: get_table, {st.reads:,} calls per route")
        reads = read_latency([direct, federation, live], st.reads, st.warmup, st.rounds)
        cases = []
        for d in st.delays_ms:
            relays.command(f"delay {d:g}")
            tag = f"{d:g}".replace(".", "_")
            say(f"etcd delay {d:g} ms: create + drop, {st.writes} pairs per route")
            writes = write_latency(live, direct, st.writes, st.rounds, tag)
            say(f"etcd delay {d:g} ms: {st.writers} writers, {st.seconds:g} s per route")
            conc = {
                "direct": concurrent_ddl(direct, LOCAL_DB, st.writers, st.seconds, f"d{tag}", watch),
                "live": concurrent_ddl(live, LIVE_DB, st.writers, st.seconds, f"l{tag}", watch),
            }
            say(f"etcd delay {d:g} ms: apply lag in west, {st.lag_samples} samples")
            lag = apply_lag(live, west_direct, st.lag_samples, tag)
            say(f"delay {d:g} ms: data copy, {st.copy_files} x {st.copy_mib} MiB")
            copied = copy_throughput(live, west_direct, st.copy_files, st.copy_mib, tag)
            case = {"delay_ms": d, "writes": writes, "concurrency": conc, "lag": lag, "copy": copied}
            if spark is not None:
                say(f"delay {d:g} ms: Spark ACID inserts, {st.acid_inserts} per route")
                case["acid"] = spark_acid_inserts(spark, acid_routes, st.acid_rows, st.acid_inserts)
            cases.append(case)
        relays.command("delay 0")

        doc = {
            "quick": args.quick,
            "cpus": os.cpu_count(),
            "settings": asdict(st),
            "reads": reads,
            "cases": cases,
            "load_average_start": load,
        }
        console.print()
        render(doc, console)
        print_notes(doc, console)
        doc["load_average_end"] = runner.print_total(console, t_total)
        if args.json_out:
            args.json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        failed = False
        return 0
    finally:
        if spark is not None:
            spark.stop()
        stop_all(started)
        if args.keep or failed:
            console.print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
