"""Smoke tests of the benchmarks: ``bench/metastore.py`` and ``bench/txn.py`` with ``--quick --only sqlite``, ``bench/replication.py`` at tiny sizes,
``bench/acid_read.py`` at scale 0.01, ``bench/delta.py``, ``bench/acid_replication.py`` and ``bench/live.py`` at tiny sizes.

Checks that each script exits 0 and prints its tables with numbers; no timing is asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import repo_root

OPERATIONS = [
    "get_table",
    "get_all_databases",
    "create_table",
    "drop_table",
    "add_partitions.1000",
    "get_partitions.1000",
    "get_partition_names.1000",
    "get_partitions_by_filter",
]
# the calls bench/metastore.py's Java client times (its JAVA_OPS)
JAVA_OPS = [
    "get_table",
    "get_table_req",
    "create_table",
    "drop_table",
    "get_partitions",
    "get_partition_names",
]
NUMBER_CELL = re.compile(r"^\s*\d[\d,]*(?:\.\d+)?\s*$")
MEAN_P50 = re.compile(r"\d[\d,]*(?:\.\d+)? / \d[\d,]*(?:\.\d+)?")


def run_quick_sqlite(script: str, out_json: Path) -> str:
    """Run ``bench/<script> --quick --only sqlite --json out_json``; assert exit 0; return stdout."""
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root() / "bench" / script),
            "--quick",
            "--only",
            "sqlite",
            "--json",
            str(out_json),
        ],
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250"},  # one table row per line
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def test_quick_sqlite_run_prints_the_table(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    out = run_quick_sqlite("metastore.py", out_json)
    rows: dict[str, list[str]] = {}  # first cell -> cells of the first table row starting with it
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)]
        if len(cells) > 2 and cells[1]:
            rows.setdefault(cells[1], cells)
    header = rows.get("operation")
    assert header is not None, out
    for col in ("hivemesh-sqlite", "hivemesh-postgres", "HMS 2.3.10", "ratio sqlite", "ratio postgres"):
        assert col in header, header

    for op in OPERATIONS:
        row = next((cells for name, cells in rows.items() if name.startswith(op)), None)
        assert row is not None, f"no row for {op}:\n{out}"
        assert MEAN_P50.fullmatch(row[2]), f"no mean / p50 for {op} on sqlite: {row}"
        assert row[3] == "skipped" and row[4] == "skipped", row  # postgres and java not selected

    conc = next(
        cells for name, cells in rows.items() if name.startswith("get_table, 16 clients") and "ops/s" in name
    )
    assert float(conc[2].replace(",", "")) > 0, conc
    rss = next(cells for name, cells in rows.items() if name.startswith("RSS after the run"))
    assert float(rss[2].replace(",", "")) > 10, rss
    assert "get_partitions_by_filter as the table grows" in out
    assert re.search(r"hivemesh-sqlite\s*│\s*1,000\s*│\s*" + MEAN_P50.pattern, out), out

    doc = json.loads(out_json.read_text(encoding="utf-8"))
    sqlite = doc["servers"]["sqlite"]
    assert set(doc["skipped"]) == {"postgres", "java", "hive4"}
    for key in sqlite["ops"]:
        assert sqlite["ops"][key]["mean_ms"] > 0 and sqlite["ops"][key]["n"] > 0
    assert sqlite["concurrency"]["ops"] > 0
    assert [g["partitions"] for g in sqlite["growth"]][0] == 1000
    assert all(g["eq"]["mean_ms"] > 0 and g["range"]["mean_ms"] > 0 for g in sqlite["growth"])

    # the Java client (bench/java/MetastoreLoad.java) ran in the same run, where a JDK and the PySpark
    # jars are there (CI has them: the Java metastore tests need them too)
    if os.environ.get("CI", "").lower() == "true":
        assert doc["java_client_unavailable"] is None, doc["java_client_unavailable"]
    if doc["java_client_unavailable"] is None:
        java = sqlite["java_client"]
        assert "error" not in java, java
        assert set(java["ops"]) == set(JAVA_OPS), java["ops"]
        for x in java["ops"].values():
            assert x["calls"] > 0 and x["p50_ms"] > 0, x
        assert [x["clients"] for x in java["clients"]] == doc["clients"]
        assert all(x["ops_per_s"] > 0 and x["server_cpus"] >= 0 for x in java["clients"]), java["clients"]
        java_table = out[out.index("Java client (") :]
        row = next(line for line in java_table.splitlines() if line.startswith("│ drop_table"))
        assert NUMBER_CELL.search(row.split("│")[2]), row
        assert "aim met" in java_table


TXN_ROWS = [
    ("open_txns + commit_txn, 1 client", "pairs/s"),
    ("open_txns + commit_txn, 8 clients", "pairs/s"),
    ("lock + check_lock + unlock, SHARED_READ, 1 client", "rounds/s"),
    ("lock + check_lock + unlock, EXCLUSIVE, 1 client", "rounds/s"),
    ("lock + check_lock + unlock, SHARED_READ, 8 clients", "rounds/s"),
    ("get_valid_write_ids, 100 tables", "calls/s"),
    ("get_next_notification", "ms in batches of 1,000"),
    ("", "ms in one call"),
]
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def test_quick_sqlite_txn_run_prints_the_table(tmp_path: Path) -> None:
    """``bench/txn.py --quick --only sqlite``: exits 0, a number in every sqlite cell, sane JSON."""
    out_json = tmp_path / "txn.json"
    out = run_quick_sqlite("txn.py", out_json)
    lines = [[c.strip() for c in re.split(r"[│┃]", line)] for line in out.splitlines()]
    table = [cells[1:-1] for cells in lines if len(cells) > 8]
    header = table[0]
    assert header[:7] == [
        "operation",
        "unit",
        "hivemesh-sqlite",
        "hivemesh-postgres",
        "HMS 2.3.10",
        "ratio sqlite",
        "ratio postgres",
    ], header
    for label, unit in TXN_ROWS:
        row = next((r for r in table if r[0].startswith(label) and r[1] == unit), None)
        assert row is not None, f"no row {label!r} / {unit!r}:\n{out}"
        assert NUMBER.fullmatch(row[2]), f"no number for sqlite in {row}"
        assert row[3] == "skipped" and row[4] == "skipped", row

    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert set(doc["skipped"]) == {"postgres", "java"}
    sqlite = doc["servers"]["sqlite"]
    assert sqlite["txns"]["open_commit_1"]["pairs_per_s"] > 0
    assert sqlite["txns"]["open_commit_n"]["clients"] == 8
    assert sqlite["locks"]["lock_exclusive_1"]["rounds_per_s"] > 0
    assert sqlite["write_ids"]["calls_per_s"] > 0 and sqlite["write_ids"]["tables"] == 100
    notes = sqlite["notifications"]
    assert notes["batched"]["mean_ms"] > 0 and notes["one_call"]["mean_ms"] > 0
    assert {"OPEN_TXN", "COMMIT_TXN"} <= set(notes["event_types"])


@pytest.mark.spark
def test_acid_read_bench_tiny_run(tmp_path: Path) -> None:
    """``bench/acid_read.py`` at scale 0.01, one timed run: exits 0 (so every ACID read returned the
    plain ORC table's rows), a time in every cell of the comparison table, sane JSON."""
    out_json = tmp_path / "acid.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root() / "bench" / "acid_read.py"),
            "--scale",
            "0.01",
            "--repeat",
            "1",
            "--spark-memory",
            "1g",
            "--keep",
            str(tmp_path / "data"),
            "--json",
            str(out_json),
            "--no-trino",  # Trino's reads are checked by the full runs (its start alone takes ~20 s)
        ],
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    out = proc.stdout
    table = [[c.strip() for c in re.split(r"[│┃]", line)][1:-1] for line in out.splitlines()]
    table = [cells for cells in table if len(cells) == 8]
    assert table and table[0][:4] == ["read", "plain ORC s", "ACID s", "plain/ACID"], out
    for label in (
        "count(*), no deletes",
        "Q1 aggregate, no deletes",
        "count(*), 10% deleted",
        "Q1 aggregate, 10% deleted",
    ):
        row = next((r for r in table if r[0] == label), None)
        assert row is not None, f"no row {label!r}:\n{out}"
        for cell in (row[1], row[2], row[3], row[5], row[6]):  # plain, ACID, ratio, hive impl, hive/native
            assert NUMBER.fullmatch(cell), f"{label}: {row}"
    assert "Spark writes plain ORC (zlib), all rows" in out and "JVM driver peak RSS" in out

    doc = json.loads(out_json.read_text(encoding="utf-8"))
    rows, deleted = doc["rows"], doc["deleted"]
    assert rows > 50_000 and abs(deleted - rows / 10) <= 8, (rows, deleted)  # every 10th row of 8 files
    variants = doc["variants"]
    assert set(variants) == {
        "plain_full", "acid_nodel", "plain_90", "acid_del", "acid_del_shuffle", "plain_full_hive", "acid_nodel_hive",
        "acid_del_hive", "acid_nodel_sparkonly", "acid_del_sparkonly",
    }  # fmt: skip
    for key, v in variants.items():
        expect = rows if key.startswith(("plain_full", "acid_nodel")) else rows - deleted
        assert v["count"]["result"] == expect, (key, v["count"])
        assert v["q1"]["result"] == variants["plain_full" if expect == rows else "plain_90"]["q1"]["result"]
        assert v["count"]["best_s"] > 0 and len(v["q1"]["runs_s"]) == 1
    assert doc["build"]["built_now"] and len(doc["build"]["acid"]["inserts"]) == 8


def test_quick_proxy_run_prints_the_tables(tmp_path: Path) -> None:
    """``bench/proxy.py --quick --no-java``: exits 0 and prints the latency, throughput and memory
    tables with a figure for every operation and route (the figures themselves are not checked)."""
    out_json = tmp_path / "proxy.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root() / "bench" / "proxy.py"),
            "--quick",
            "--no-java",
            "--json",
            str(out_json),
        ],
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250"},  # one table row per line
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    out = proc.stdout
    tables: list[list[list[str]]] = []  # the tables in order, each its rows of cells (header first)
    for line in out.splitlines():
        if line.startswith("┏"):
            tables.append([])
        elif line.startswith(("┃", "│")) and tables:
            tables[-1].append([c.strip() for c in re.split(r"[│┃]", line)][1:-1])
    assert len(tables) == 3, out
    latency, throughput, memory = tables
    assert latency[0][:6] == ["operation", "route", "calls", "p50 ms", "p99 ms", "added p50 ms"], latency[0]
    assert throughput[0][:3] == ["operation", "route", "calls/s"], throughput[0]
    routes = ["direct", "proxy (default: audit log on)", "proxy, log level WARNING", "via prefix (fed_bench)"]
    for table, figure in ((latency, 3), (throughput, 2)):
        op = ""
        seen: set[tuple[str, str]] = set()
        for row in table[1:]:
            op = row[0] or op
            assert NUMBER.fullmatch(row[figure]), f"no figure for {op} / {row[1]}: {row}"
            seen.add((op, row[1]))
        assert seen == {
            (o, r) for o in ("get_table", "get_partitions", "get_all_databases") for r in routes
        }, seen
    assert memory[0][:4] == ["process", "RSS idle after start", "peak RSS under load", "VmHWM"], memory[0]
    proxy_row = next(r for r in memory if r[0] == "proxy (default config)")
    assert all(NUMBER.fullmatch(c) for c in proxy_row[1:4]), proxy_row
    assert "aim: added p50 < 0.3 ms" in out and "aim: >= 0.8x direct throughput" in out

    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert doc["settings"]["clients"] == 32 and doc["memory"]["java_note"] == "not run (--no-java)"
    for op in ("get_table", "get_partitions", "get_all_databases"):
        for key in ("direct", "proxy", "quiet", "prefix"):
            assert doc["latency"][op][key]["n"] > 0 and doc["latency"][op][key]["p50_ms"] > 0
            case = doc["throughput"][op][key]
            # on a loaded machine a short window may end before every client completed a call: the
            # bench then flags the case as not steady (and gives no ratio) rather than a figure
            assert case["calls"] > 0 or not case["steady"], (op, key, case)
    assert doc["audit_log_lines"] > 0  # the default proxy logs every call


def test_replication_bench_tiny_run(tmp_path: Path) -> None:
    """bench/replication.py at tiny sizes: every section runs and reports its figures (the
    replicated partition count equals the source's; the lag run saw every change)."""
    out_json = tmp_path / "repl.json"
    proc = subprocess.run(
        [sys.executable, str(repo_root() / "bench" / "replication.py"), "--quick",
         "--data-partitions", "3", "--files", "2", "--file-mb", "1", "--partitions", "300",
         "--events", "1000", "--seconds", "3", "--json", str(out_json)],
        cwd=repo_root(), capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    res = json.loads(out_json.read_text())
    boot = res["bootstrap"]
    assert boot["partitions"] == 3 and boot["bytes"] == 3 * 2 * 2**20
    assert boot["mb_s"] > 0 and boot["plain_mb_s"] > 0 and boot["peak_rss_mb"] > 0
    scale = res["scale"]
    assert scale["partitions"] == scale["target_partitions"] == 300
    assert scale["events"] >= 1000 and scale["events_s"] > 0
    assert res["lag"]["changes"] > 0 and res["lag"]["missing"] == 0
    assert "ratio" in proc.stdout and "p50" in proc.stdout


def test_delta_bench_tiny_run(tmp_path: Path) -> None:
    """``bench/delta.py`` at scale 0.01 without the Spark competitor: exits 0 and reports every
    section (conversion, one partition's INSERT, the two 1% ACID deletes) with sane figures."""
    out_json = tmp_path / "delta.json"
    proc = subprocess.run(
        [sys.executable, str(repo_root() / "bench" / "delta.py"), "--scale", "0.01", "--acid-rows", "4000",
         "--no-spark", "--cache", str(tmp_path / "cache"), "--json", str(out_json)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    data = json.loads(out_json.read_text())
    assert data["rows"] > 50_000 and data["convert"]["hivemesh_s"] > 0
    assert data["insert"]["files_added"] == 1 and data["insert"]["files_removed"] == 0
    clustered, scattered = data["acid"]["clustered"], data["acid"]["scattered"]
    assert clustered["files_removed"] == 1 and clustered["rows_deleted"] == 40
    assert 1 <= scattered["files_removed"] <= data["acid"]["replica_files"]


def test_acid_replication_bench_tiny_run(tmp_path: Path) -> None:
    """``bench/acid_replication.py`` with 6 txns of 500 rows: exits 0, both designs replicate every
    row, design B copies each byte once (about what the source wrote), design A several times."""
    out_json = tmp_path / "stream.json"
    proc = subprocess.run(
        [sys.executable, str(repo_root() / "bench" / "acid_replication.py"), "--txns", "6", "--rows", "500",
         "--json", str(out_json)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    assert "design B copies" in proc.stdout
    results = {r["design"]: r for r in json.loads(out_json.read_text())["results"]}
    assert results["append"]["rows"] == results["rewrite"]["rows"] == 3000
    assert results["append"]["copied_per_written"] <= 1.05
    assert results["rewrite"]["copied_per_written"] > 2


@pytest.mark.etcd
def test_live_bench_tiny_run(tmp_path: Path) -> None:
    """``bench/live.py`` with tiny counts (about 12 s: its own etcd cluster, two zones, the relays
    and the proxies start and stop): exits 0, prints a figure for every route of every measure and
    the targets, and writes sane JSON. No figure is checked against a bound."""
    from tests.support.etcd import require_etcd

    require_etcd()
    out_json = tmp_path / "live.json"
    proc = subprocess.run(
        [sys.executable, str(repo_root() / "bench" / "live.py"), "--quick", "--reads", "20", "--writes", "3",
         "--seconds", "0.5", "--lag-samples", "2", "--writers", "4", "--delay-ms", "5", "--copy-files", "1",
         "--json", str(out_json)],
        cwd=repo_root(), capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    tables: list[list[list[str]]] = []
    for line in proc.stdout.splitlines():
        if line.startswith("┏"):
            tables.append([])
        elif line.startswith(("┃", "│")) and tables:
            tables[-1].append([c.strip() for c in re.split(r"[│┃]", line)][1:-1])
    assert len(tables) == 3, proc.stdout  # --quick: no Spark ACID table
    main, copies, cpus = tables
    assert main[0][:5] == ["measure", "etcd delay", "direct", "federation proxy", "live proxy"], main[0]
    assert [r[:2] for r in copies[1:]] == [["0 ms", "1 x 1"], ["5 ms", "1 x 1"]], copies
    assert all(NUMBER.fullmatch(c) for r in copies[1:] for c in r[2:]), copies
    pair = re.compile(r"\d[\d,]*(?:\.\d+)? / \d[\d,]*(?:\.\d+)?")
    reads = next(r for r in main if r[0] == "get_table, 1 client")
    assert all(pair.fullmatch(c) for c in reads[2:5]), reads
    for delay in ("0 ms", "5 ms"):
        rows = {r[0]: r for r in main if r[1] == delay}
        for op in ("create_table, 1 client", "drop_table, 1 client"):
            assert pair.fullmatch(rows[op][2]) and pair.fullmatch(rows[op][4]), rows[op]
            assert rows[op][6].startswith("p50 <=") and rows[op][7] in ("met", "not met"), rows[op]
        ops = rows["DDL calls/s, 4 writers"]
        assert NUMBER.fullmatch(ops[2]) and NUMBER.fullmatch(ops[4]) and ops[5].endswith("x"), ops
        assert pair.fullmatch(rows["apply lag in west after east's answer"][4])
    assert cpus[0][:3] == ["etcd delay", "route", "clients (this process)"] and len(cpus) == 5, cpus

    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert {k: v["n"] for k, v in doc["reads"].items()} == {"direct": 20, "federation": 20, "live": 20}
    assert [c["delay_ms"] for c in doc["cases"]] == [0, 5]
    for case in doc["cases"]:
        for route in ("live", "direct"):
            assert case["writes"][route]["create"]["n"] == case["writes"][route]["drop"]["n"] == 3
            assert case["concurrency"][route]["calls"] > 0, case["concurrency"]
        assert case["lag"]["n"] == 2 and case["lag"]["p50_ms"] >= 0
        assert case["copy"]["bytes"] == 1 << 20 and case["copy"]["visible_s"] > 0, case["copy"]
        assert "acid" not in case
