"""Replication benchmark: bootstrap throughput against a plain parallel copy, bootstrap and event
stream at scale in bounded memory, and commit-to-visible lag under a steady stream of changes.

    .venv/bin/python bench/replication.py [--quick] [--backend sqlite|postgres] [--json out.json]

Two ``hivemesh metastore`` processes (source and target zones, each on a fresh store) and the
replicator as its own process (``hivemesh replicate run``), so its peak RSS is its own (read from
``wait4``). Sections:

- **bootstrap**: a table of ``--data-partitions`` partitions with ``--files`` files of
  ``--file-mb`` MiB each; ``replicate run --once`` bootstraps it (metadata and data). In the same
  run the same files are copied by a plain parallel copy with ``pyarrow.fs`` (8 threads, one
  ``copy_files`` per file, no checksums, no metastore): the competitor. Ratio = hivemesh MB/s /
  plain MB/s (aim >= 0.8).
- **scale**: ``--partitions`` partitions (100,000 in a full run) bootstrapped with
  ``data: metadata_only`` (partitions/s, peak RSS), then ``--events`` ALTER_PARTITION events (each
  ``alter_partitions`` call of 1,000 partitions writes 1,000) applied incrementally (events/s, peak
  RSS).
- **lag**: the replicator runs continuously (poll interval 0.25 s); one partition is added on the
  source every ``1/--rate`` s for ``--seconds`` s; for each the time until the target has it is
  measured: p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.fs as pafs  # noqa: E402
from bench.metastore import DB, HOURS, add_parts, make_partitions, make_table  # noqa: E402
from bench.runner import print_total, wide_console  # noqa: E402
from hive_metastore.ttypes import Database  # noqa: E402
from tests.support.servers import HivemeshProcess, ThriftClient  # noqa: E402

QUICK = {
    "data_partitions": 20,
    "files": 4,
    "file_mb": 4,
    "partitions": 10_000,
    "events": 10_000,
    "seconds": 10,
}
FULL = {
    "data_partitions": 50,
    "files": 8,
    "file_mb": 8,
    "partitions": 100_000,
    "events": 100_000,
    "seconds": 60,
}


def _servers(work: Path, backend: str) -> tuple[HivemeshProcess, HivemeshProcess, list[str]]:
    urls = []
    for side in ("source", "target"):
        (work / side).mkdir(parents=True, exist_ok=True)
        if backend == "sqlite":
            urls.append(f"sqlite:///{work / side / 'metastore.db'}")
        else:
            from tests.conftest import make_pg_database

            urls.append(make_pg_database(f"hivemesh_replbench_{side}"))
    procs = [
        HivemeshProcess(urls[i], work / side / "warehouse", work / f"{side}.log").start()
        for i, side in enumerate(("source", "target"))
    ]
    return procs[0], procs[1], urls


def _mesh(work: Path, src: HivemeshProcess, dst: HivemeshProcess, data: str, name: str) -> Path:
    path = work / f"{name}.yaml"
    path.write_text(
        f"""zones:
  source: {{metastore: "{src.uri}", warehouse: "file:{src.warehouse}"}}
  target: {{metastore: "{dst.uri}", warehouse: "file:{dst.warehouse}"}}
replication:
  store: "sqlite:///{work / (name + "-state.db")}"
  poll_interval_s: 0.25
  policies:
    - {{name: {name}, source: source, target: target, databases: ["{DB}"], data: {data}}}
"""
    )
    return path


def _replicate(config: Path, once: bool = True) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "hivemesh.cli",
        "replicate",
        "--log-level",
        "WARNING",
        "run",
        "--config",
        str(config),
    ]
    return subprocess.Popen([*cmd, "--once"] if once else cmd, stderr=subprocess.PIPE, text=True)


def _wait(proc: subprocess.Popen[str]) -> tuple[int, int, float]:
    """Exit code, peak RSS in bytes (from wait4) and seconds until exit."""
    t0 = time.perf_counter()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"replicate exited with {proc.returncode}: {err[-2000:]}")
    return proc.returncode, usage.ru_maxrss * 1024, time.perf_counter() - t0


def _write_files(location: str, files: int, mb: int, seed: int) -> int:
    path = location.removeprefix("file:")
    os.makedirs(path, exist_ok=True)
    block = os.urandom(1024 * 1024)
    for i in range(files):
        with open(posixpath.join(path, f"part-{i:05d}-{seed}.orc"), "wb") as f:
            for j in range(mb):
                f.write(block[j:] + block[:j])
    return files * mb * 1024 * 1024


def _plain_copy(src_root: str, dst_root: str, threads: int = 8) -> tuple[int, float]:
    fs = pafs.LocalFileSystem()
    infos = [
        i
        for i in fs.get_file_info(pafs.FileSelector(src_root, recursive=True))
        if i.type == pafs.FileType.File
    ]
    t0 = time.perf_counter()

    def one(info: pafs.FileInfo) -> int:
        dst = posixpath.join(dst_root, posixpath.relpath(info.path, src_root))
        fs.create_dir(posixpath.dirname(dst), recursive=True)
        pafs.copy_files(info.path, dst, source_filesystem=fs, destination_filesystem=fs)
        return info.size

    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, infos))
    return total, time.perf_counter() - t0


def bench_bootstrap(work: Path, backend: str, cfg: dict[str, int], say: Any) -> dict[str, Any]:
    src, dst, _ = _servers(work / "bootstrap", backend)
    try:
        with ThriftClient(src.host, src.port) as a:
            a.create_database(Database(name=DB, parameters={}))
            table = make_table("events", None)  # type: ignore[arg-type]
            a.create_table(table)
            loc = a.get_table(DB, "events").sd.location
            days = -(-cfg["data_partitions"] // HOURS)
            parts = make_partitions(loc, "events", 0, days)[: cfg["data_partitions"]]
            add_parts(a, "events", parts)
            total = 0
            for i, p in enumerate(parts):
                total += _write_files(p.sd.location, cfg["files"], cfg["file_mb"], i)
        say(f"bootstrap: {len(parts)} partitions, {total / 2**20:.0f} MiB")
        config = _mesh(work / "bootstrap", src, dst, "copy", "boot")
        _, rss, secs = _wait(_replicate(config))
        plain_bytes, plain_secs = _plain_copy(str(src.warehouse), str(work / "bootstrap" / "plain"))
        ours = total / secs / 2**20
        plain = plain_bytes / plain_secs / 2**20
        return {
            "partitions": len(parts), "bytes": total, "seconds": secs, "mb_s": ours,
            "partitions_s": len(parts) / secs, "plain_mb_s": plain, "plain_seconds": plain_secs,
            "ratio": ours / plain, "peak_rss_mb": rss / 2**20,
        }  # fmt: skip
    finally:
        src.stop()
        dst.stop()


def bench_scale(work: Path, backend: str, cfg: dict[str, int], say: Any) -> dict[str, Any]:
    src, dst, _ = _servers(work / "scale", backend)
    try:
        with ThriftClient(src.host, src.port, timeout_ms=600_000) as a:
            a.create_database(Database(name=DB, parameters={}))
            a.create_table(make_table("big", None))  # type: ignore[arg-type]
            loc = a.get_table(DB, "big").sd.location
            days = -(-cfg["partitions"] // HOURS)
            t0 = time.perf_counter()
            for first in range(0, days, 40):
                parts = make_partitions(loc, "big", first, min(40, days - first))
                add_parts(a, "big", parts)
            n = len(a.get_partition_names(DB, "big", -1))
            say(f"scale: {n} partitions made in {time.perf_counter() - t0:.0f} s")
            config = _mesh(work / "scale", src, dst, "metadata_only", "scale")
            _, boot_rss, boot_secs = _wait(_replicate(config))
            # the event stream: alter_partitions of 1,000 partitions = 1,000 ALTER_PARTITION events
            names = a.get_partition_names(DB, "big", -1)
            before = a.get_current_notificationEventId().eventId
            done = 0
            i = 0
            while done < cfg["events"]:
                chunk = names[i % len(names) : i % len(names) + 1000]
                i += 1000
                parts = a.get_partitions_by_names(DB, "big", chunk)
                for p in parts:
                    p.parameters = {**(p.parameters or {}), "bench.round": str(i)}
                a.alter_partitions(DB, "big", parts)
                done += len(parts)
            events = a.get_current_notificationEventId().eventId - before
        say(f"scale: {events} events written")
        _, inc_rss, inc_secs = _wait(_replicate(config))
        with ThriftClient(dst.host, dst.port) as b:
            target_parts = len(b.get_partition_names(DB, "big", -1))
        return {
            "partitions": n, "target_partitions": target_parts, "bootstrap_seconds": boot_secs,
            "partitions_s": n / boot_secs, "bootstrap_peak_rss_mb": boot_rss / 2**20,
            "events": events, "incremental_seconds": inc_secs, "events_s": events / inc_secs,
            "incremental_peak_rss_mb": inc_rss / 2**20,
        }  # fmt: skip
    finally:
        src.stop()
        dst.stop()


def bench_lag(work: Path, backend: str, cfg: dict[str, int], rate: float, say: Any) -> dict[str, Any]:
    src, dst, _ = _servers(work / "lag", backend)
    proc = None
    try:
        with ThriftClient(src.host, src.port) as a, ThriftClient(dst.host, dst.port) as b:
            a.create_database(Database(name=DB, parameters={}))
            a.create_table(make_table("stream", None))  # type: ignore[arg-type]
            loc = a.get_table(DB, "stream").sd.location
            config = _mesh(work / "lag", src, dst, "metadata_only", "lag")
            proc = _replicate(config, once=False)
            deadline = time.monotonic() + 60
            while DB not in b.get_all_databases() or "stream" not in b.get_all_tables(DB):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the replicator did not bootstrap the lag table")
                time.sleep(0.05)
            made: dict[tuple[str, str], float] = {}
            seen: dict[tuple[str, str], float] = {}
            stop = threading.Event()

            def watch() -> None:
                with ThriftClient(dst.host, dst.port) as c:
                    while not stop.is_set() or len(seen) < len(made):
                        for name in c.get_partition_names(DB, "stream", -1):
                            ds, hr = (kv.split("=", 1)[1] for kv in name.split("/"))
                            seen.setdefault((ds, hr), time.monotonic())
                        if stop.is_set() and time.monotonic() > end + 30:
                            return
                        time.sleep(0.01)

            end = time.monotonic() + cfg["seconds"]
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            i = 0
            while time.monotonic() < end:
                p = make_partitions(loc, "stream", i // HOURS, 1)[i % HOURS]
                add_parts(a, "stream", [p])
                made[(p.values[0], p.values[1])] = time.monotonic()
                i += 1
                time.sleep(1.0 / rate)
            stop.set()
            watcher.join(60)
        lags = sorted(seen[k] - t for k, t in made.items() if k in seen)
        missing = len(made) - len(lags)
        q = statistics.quantiles(lags, n=100) if len(lags) >= 2 else lags * 99
        return {"changes": len(made), "missing": missing, "p50_s": q[49], "p99_s": q[98], "max_s": max(lags)}
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        src.stop()
        dst.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--only", default="bootstrap,scale,lag", help="sections to run")
    ap.add_argument("--rate", type=float, default=5.0, help="changes per second in the lag section")
    ap.add_argument("--json", dest="json_out", type=Path)
    for k, v in FULL.items():
        ap.add_argument(
            f"--{k.replace('_', '-')}", type=int, default=None, help=f"default {v} ({QUICK[k]} quick)"
        )
    args = ap.parse_args(argv)
    cfg = {k: getattr(args, k) or (QUICK if args.quick else FULL)[k] for k in FULL}
    console = wide_console()
    t0 = time.perf_counter()
    load = os.getloadavg()
    console.print(f"[bold]replication benchmark[/bold] ({'quick' if args.quick else 'full'}, {args.backend}, "
                  f"{os.cpu_count()} CPUs, load {load[0]:.2f}) {cfg}")  # fmt: skip
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="hivemesh-replbench-"))
    results: dict[str, Any] = {"config": cfg, "backend": args.backend}
    sections = args.only.split(",")
    if "bootstrap" in sections:
        r = results["bootstrap"] = bench_bootstrap(work, args.backend, cfg, console.print)
        console.print(
            f"bootstrap: {r['bytes'] / 2**20:.0f} MiB in {r['seconds']:.1f} s = {r['mb_s']:.0f} MB/s, "
            f"{r['partitions_s']:.0f} partitions/s; plain pyarrow parallel copy {r['plain_mb_s']:.0f} MB/s; "
            f"ratio {r['ratio']:.2f} (aim >= 0.8); peak RSS {r['peak_rss_mb']:.0f} MiB"
        )
    if "scale" in sections:
        r = results["scale"] = bench_scale(work, args.backend, cfg, console.print)
        console.print(
            f"scale: bootstrap of {r['partitions']} partitions in {r['bootstrap_seconds']:.0f} s "
            f"({r['partitions_s']:.0f}/s), peak RSS {r['bootstrap_peak_rss_mb']:.0f} MiB; "
            f"{r['events']} events in {r['incremental_seconds']:.0f} s ({r['events_s']:.0f}/s), "
            f"peak RSS {r['incremental_peak_rss_mb']:.0f} MiB"
        )
    if "lag" in sections:
        r = results["lag"] = bench_lag(work, args.backend, cfg, args.rate, console.print)
        console.print(
            f"lag ({r['changes']} partition adds at {args.rate}/s): p50 {r['p50_s']:.2f} s, "
            f"p99 {r['p99_s']:.2f} s, max {r['max_s']:.2f} s, {r['missing']} never seen"
        )
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))
    print_total(console, t0)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
