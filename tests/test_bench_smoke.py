"""Smoke test of the metastore benchmark: ``bench/metastore.py --quick --only sqlite`` runs and reports.

Checks that the script exits 0 and prints its tables with numbers; no timing is asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

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
MEAN_P50 = re.compile(r"\d[\d,]*(?:\.\d+)? / \d[\d,]*(?:\.\d+)?")


def test_quick_sqlite_run_prints_the_table(tmp_path: Path) -> None:
    out_json = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root() / "bench" / "metastore.py"),
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
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    out = proc.stdout
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
    assert set(doc["skipped"]) == {"postgres", "java"}
    for key in sqlite["ops"]:
        assert sqlite["ops"][key]["mean_ms"] > 0 and sqlite["ops"][key]["n"] > 0
    assert sqlite["concurrency"]["ops"] > 0
    assert [g["partitions"] for g in sqlite["growth"]][0] == 1000
    assert all(g["eq"]["mean_ms"] > 0 and g["range"]["mean_ms"] > 0 for g in sqlite["growth"])
