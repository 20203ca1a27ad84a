"""What every hivemesh benchmark does around its measurements: the common options, choosing the
servers (hivemesh on SQLite, on PostgreSQL, the real HMS 2.3.10; a benchmark may add its own, as
bench/metastore.py adds Hive 4), the banner with the machine's load, running each server's part
with failures reported, and the closing line."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

SERVERS = ("sqlite", "postgres", "java")
NOT_SELECTED = "not selected (--only)"


def add_common_options(
    ap: argparse.ArgumentParser, quick_help: str, servers: Sequence[str] = SERVERS
) -> None:
    """``--quick``, ``--only`` (default: every one of ``servers``), ``--json``, ``--java-opts`` and
    ``--keep``."""
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--only", default=",".join(servers), help=f"comma-separated: {','.join(servers)}")
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    ap.add_argument(
        "--java-opts", default="", help="extra JVM options for the real Java metastore(s), e.g. -Xmx1g"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, SQLite file)")


def skipped_servers(
    ap: argparse.ArgumentParser,
    only_arg: str,
    pg_available: Callable[[], bool],
    java_available: Callable[[], bool],
    servers: Sequence[str] = SERVERS,
    other_checks: Mapping[str, Callable[[], str | None]] | None = None,
) -> dict[str, str]:
    """Server -> why it does not run: not in ``--only`` (an unknown name is a usage error), or
    PostgreSQL / Java missing on this machine. ``servers`` are the names this benchmark knows;
    ``other_checks`` maps a further server to a check run only when it is selected, which returns
    why it cannot run here or ``None``."""
    only = [s.strip() for s in only_arg.split(",") if s.strip()]
    bad = [s for s in only if s not in servers]
    if bad:
        ap.error(f"unknown server(s) {bad}; choose from {', '.join(servers)}")
    skipped = {s: NOT_SELECTED for s in servers if s not in only}
    if "postgres" in only and not pg_available():
        skipped["postgres"] = (
            "no PostgreSQL: neither HIVEMESH_TEST_PG nor a private cluster (Debian's postgresql package)"
        )
    if "java" in only and not java_available():
        skipped["java"] = "needs Java 17+ on PATH and the PySpark wheel's Hive 2.3 jars"
    for s, check in (other_checks or {}).items():
        if s in only:
            why = check()
            if why is not None:
                skipped[s] = why
    return skipped


def wide_console(min_width: int = 150) -> Console:
    """A console at least ``min_width`` columns wide (the result tables need it)."""
    return Console(width=max(Console().width, min_width), highlight=False)


def print_banner(
    console: Console, title: str, quick: bool, skipped: dict[str, str], labels: dict[str, str]
) -> tuple[float, float, float]:
    """The run's title, Python, CPUs and load average, and the servers that were left out;
    returns the load average at the start."""
    load = os.getloadavg()
    console.print(
        f"[bold]{title}[/bold] ({'quick' if quick else 'full'} run; "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})"
    )
    for s, why in skipped.items():
        if why != NOT_SELECTED:
            console.print(f"[yellow]note: {labels[s]} skipped: {why}[/yellow]")
    return load


def run_servers(
    console: Console,
    skipped: dict[str, str],
    labels: dict[str, str],
    workdir_prefix: str,
    keep: bool,
    bench_one: Callable[[str, Path], dict[str, Any]],
    servers: Sequence[str] = SERVERS,
) -> tuple[dict[str, Any], bool]:
    """Run ``bench_one(server, workdir)`` for each selected one of ``servers`` in turn; a failure is printed
    with its traceback and recorded as ``{"error": ...}``, and so is a result holding a section
    ``{"error": ...}``. Returns the results and whether anything failed. The work directory is
    removed unless ``keep`` or something failed."""
    workdir = Path(tempfile.mkdtemp(prefix=workdir_prefix))
    results: dict[str, Any] = {}
    failed = False
    try:
        for s in servers:
            if s in skipped:
                continue
            console.print(f"[bold]{labels[s]}[/bold]")
            try:
                results[s] = bench_one(s, workdir)
                failed |= any(isinstance(v, dict) and "error" in v for v in results[s].values())
            except Exception as e:
                failed = True
                results[s] = {"error": f"{type(e).__name__}: {e}"}
                console.print(f"[red]{labels[s]} failed:[/red]")
                console.print(traceback.format_exc(), markup=False)
    finally:
        if keep or failed:
            console.print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results, failed


def print_total(console: Console, t0: float) -> tuple[float, float, float]:
    """The run's duration since ``t0`` (perf_counter) and the load average now, which it returns."""
    end_load = os.getloadavg()
    console.print(
        f"total {time.perf_counter() - t0:.0f} s; load average at the end "
        f"{end_load[0]:.2f} {end_load[1]:.2f} {end_load[2]:.2f}"
    )
    return end_load
