"""Replication of an open streaming transaction batch: design A (rewrite) against design B (append).

    .venv/bin/python bench/acid_replication.py [--txns 100] [--rows 10000] [--quick] [--json out.json]

Two ``hivemesh metastore`` processes (source and target zones, SQLite) and, for each design, a
``format: hive`` policy with ``streaming_copy: rewrite`` (A: the readable prefix of the batch's
data file copied again at every commit, side file first in Hive's order: read before the data) or
``append`` (B: only the bytes flushed since the last copy appended). One
:class:`hivemesh.acid.streaming.StreamingConnection` batch of ``--txns`` txns of ``--rows`` rows
each (id int, payload string of 40 characters) is written into a full-ACID table per design; after
each commit the policy's runner, created once and kept, applies the source's new events in this
process (:meth:`PolicyRunner.run_once`). Reported per design:

- **bytes copied**: data and side-file bytes the copier wrote, against the bytes the source wrote
  (its data file and side file); ratio copied / written (aim for B: <= 1.05);
- **lag** p50 / p99 / max: from ``commit_txn`` returning at the source to the runner having
  applied the commit (files copied, target txn committed), seconds. The poll interval of
  continuous mode (``poll_interval_s``, default 0.25 s) comes on top;
- the rows of both sides compared at the end (the same, or the run fails).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402

DESIGNS = {"rewrite": "A: rewrite the prefix", "append": "B: append new bytes"}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _payload(n: int) -> str:
    """40 characters that compress like real text would, not to nothing."""
    h = (n * 2654435761) % 2**32
    return f"{h:08x}-{h ^ 0x5BD1E995:08x}-customer-{n % 9973:05d}-{h % 977:03d}"


def _files_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def run_design(
    design: str, procs: list[Any], wh: dict[str, str], work: Path, txns: int, rows: int
) -> dict[str, Any]:
    from hive_metastore.ttypes import Database

    from hivemesh.acid.arrow_reader import TableLayout, read_acid_location
    from hivemesh.acid.streaming import StreamingConnection
    from hivemesh.acid.tables import create_transactional_table
    from hivemesh.client.metastore import MetastoreClient
    from hivemesh.replication.config import parse_replication_config
    from hivemesh.replication.service import make_runner
    from hivemesh.replication.state import ReplicationStore, lease_owner
    from hivemesh.storage.locations import local_path

    db = f"bench_stream_{design}"
    cols = [("id", "int"), ("payload", "string")]
    cfg = parse_replication_config({
        "zones": {s: {"metastore": p.uri, "warehouse": wh[s]} for s, p in zip("ab", procs, strict=True)},
        "replication": {
            "store": f"sqlite:///{work / design}.db",
            "streaming_copy": design,
            "policies": [{"name": design, "source": "a", "target": "b", "databases": [db]}],
        },
    })  # fmt: skip
    store = ReplicationStore(cfg.replication.store)
    src, tgt = MetastoreClient(procs[0].uri), MetastoreClient(procs[1].uri)
    src.raw.create_database(Database(name=db, parameters={}))
    table = create_transactional_table(src, db, "events", cols)
    runner = make_runner(cfg, cfg.replication.policies[0], store, lease_owner())
    for _ in runner.run_once():  # bootstrap: the empty table
        pass
    copied = appended = 0
    lags: list[float] = []
    conn = StreamingConnection(src, db, "events", transactions_per_batch=txns)
    batch = conn.fetch_transaction_batch()
    for _ in runner.run_once():  # the batch's txns opened on the target
        pass
    for k in range(txns):
        batch.begin_next_transaction()
        batch.write([(n, _payload(n)) for n in range(k * rows, (k + 1) * rows)])
        batch.commit()
        committed = time.perf_counter()
        for res in runner.run_once():
            copied += res.data.bytes_copied
            appended += res.data.appended
        lags.append(time.perf_counter() - committed)
    conn.close()
    for res in runner.run_once():  # nothing new: the file was closed by the last commit
        copied += res.data.bytes_copied
    runner.close()
    store.dispose()
    source_dir = Path(local_path(table.sd.location))
    written = _files_bytes(source_dir) + 8 * (txns - 1)  # the side file's records, deleted at the end
    target_dir = Path(local_path(tgt.raw.get_table(db, "events").sd.location))
    full = f"{db}.events"
    layout = TableLayout(cols)
    counts = []
    for client, d in ((src, source_dir), (tgt, target_dir)):
        wil = str(client.valid_write_ids([full], client.valid_txn_list())[full])
        counts.append(read_acid_location(str(d), wil, layout).num_rows)
    src.close()
    tgt.close()
    if counts[0] != counts[1] or counts[0] != txns * rows:
        raise SystemExit(f"{design}: rows differ: source {counts[0]}, target {counts[1]}, want {txns * rows}")
    return {
        "design": design,
        "bytes_written_by_source": written,
        "bytes_copied": copied,
        "bytes_appended": appended,
        "copied_per_written": round(copied / written, 3),
        "lag_p50_s": round(statistics.median(lags), 4),
        "lag_p99_s": round(_quantile(lags, 0.99), 4),
        "lag_max_s": round(max(lags), 4),
        "rows": counts[1],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--txns", type=int, default=100, help="txns in the streaming batch")
    ap.add_argument("--rows", type=int, default=10_000, help="rows per txn")
    ap.add_argument("--quick", action="store_true", help="10 txns of 1,000 rows")
    ap.add_argument("--json", type=Path, help="write the results here too")
    args = ap.parse_args(argv)
    if args.quick:
        args.txns, args.rows = 10, 1000
    from tests.support.servers import HivemeshProcess

    console = Console(stderr=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="hivemesh-bench-stream-") as tmp:
        work = Path(tmp)
        procs = [
            HivemeshProcess(f"sqlite:///{work / s}.db", work / f"w{s}", work / f"{s}.log").start()
            for s in "ab"
        ]
        try:
            wh = {s: f"file:{work / f'w{s}'}" for s in "ab"}
            for design in DESIGNS:
                console.print(f"design {DESIGNS[design]}: {args.txns} txns x {args.rows} rows ...")
                results.append(run_design(design, procs, wh, work, args.txns, args.rows))
        finally:
            for p in procs:
                p.stop()
    table = RichTable(
        title=f"one streaming batch of {args.txns} txns x {args.rows} rows, replicated after each commit"
    )
    for col in (
        "design",
        "source wrote MiB",
        "copied MiB",
        "copied / written",
        "lag p50 s",
        "lag p99 s",
        "lag max s",
    ):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            DESIGNS[r["design"]], f"{r['bytes_written_by_source'] / 2**20:.2f}", f"{r['bytes_copied'] / 2**20:.2f}",
            f"{r['copied_per_written']:.3f}", f"{r['lag_p50_s']:.3f}", f"{r['lag_p99_s']:.3f}", f"{r['lag_max_s']:.3f}",
        )  # fmt: skip
    out = Console(width=120)
    out.print(table)
    a, b = results
    out.print(
        f"design B copies {a['bytes_copied'] / max(1, b['bytes_copied']):.1f}x fewer bytes than design A; "
        f"B copied {b['copied_per_written']:.3f}x what the source wrote (aim <= 1.05)"
    )
    if args.json:
        args.json.write_text(json.dumps({"txns": args.txns, "rows": args.rows, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
