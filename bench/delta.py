"""Delta replication benchmark: Hive ORC tables converted into Delta replicas, against Spark
converting the same files, and what an incremental change costs.

    .venv/bin/python bench/delta.py [--scale 1] [--quick] [--json out.json]

Two ``hivemesh metastore`` processes (source and target zones, SQLite) and a ``format: delta``
policy run in this process (``hivemesh.replication.service.run_once``: conversion on this
machine's cores through pyarrow and delta-rs). Sections:

- **convert**: TPC-H ``lineitem`` (``tpchgen-cli``; ~6M rows at scale 1) as a Hive ORC table
  partitioned by ``l_shipmode`` (7 partitions, 2 files each), bootstrapped into a Delta replica.
  The competitor, in the same run: Spark (``local[2]``, its own ORC reader) reading the same
  table's files and writing them as a partitioned Parquet table (``spark.read.orc`` ->
  ``write.partitionBy(...).parquet``), after a warm-up run. Ratio = Spark's time / hivemesh's
  (aim >= 0.8).
- **insert**: a new ORC file (1/100 of the table) into one partition, with its INSERT event:
  seconds until the replica has it, bytes written to the replica.
- **acid**: a full-ACID copy of the first ``--acid-rows`` rows (4 insert txns, one file each),
  replicated; then a DELETE of 1% of its rows clustered by key (one file's rows: the usual
  ``WHERE key BETWEEN``) and one of 1% scattered over every file: seconds and bytes written for
  each. A replica file is one source file, so a change rewrites the files it touched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.orc as paorc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from bench.acid_read import generate_lineitem  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402

COLUMNS = [
    ("l_orderkey", "bigint"), ("l_partkey", "bigint"), ("l_suppkey", "bigint"), ("l_linenumber", "int"),
    ("l_quantity", "decimal(15,2)"), ("l_extendedprice", "decimal(15,2)"), ("l_discount", "decimal(15,2)"),
    ("l_tax", "decimal(15,2)"), ("l_returnflag", "string"), ("l_linestatus", "string"), ("l_shipdate", "date"),
    ("l_commitdate", "date"), ("l_receiptdate", "date"), ("l_shipinstruct", "string"), ("l_comment", "string"),
]  # fmt: skip
PARTITION = "l_shipmode"
ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
)
MASTER = "local[2]"


def _arrow(lineitem: pa.Table) -> pa.Table:
    """lineitem with the Hive table's Arrow types (strings, decimals, dates)."""
    from hivemesh.acid.orcfile import hive_to_arrow_type

    cols = {n: lineitem[n].cast(hive_to_arrow_type(t)) for n, t in COLUMNS}
    cols[PARTITION] = lineitem[PARTITION].cast(pa.string())
    return pa.table(cols)


def _sd(location: str) -> Any:
    from hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor

    return StorageDescriptor(
        cols=[FieldSchema(n, t, None) for n, t in COLUMNS], location=location, inputFormat=ORC[1],
        outputFormat=ORC[2], compressed=False, numBuckets=-1, serdeInfo=SerDeInfo(None, ORC[0], {}),
        bucketCols=[], sortCols=[], parameters={},
    )  # fmt: skip


def _bytes_of_last_commit(location: str) -> tuple[int, int, int]:
    """(files added, bytes added, files removed) of a Delta table's last commit."""
    log = sorted(Path(location, "_delta_log").glob("*.json"))[-1]
    added = removed = size = 0
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            added += 1
            size += action["add"]["size"]
        elif "remove" in action:
            removed += 1
    return added, size, removed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, help="TPC-H scale factor (default 1; 0.05 with --quick)")
    ap.add_argument("--quick", action="store_true", help="scale 0.05, acid rows 50,000")
    ap.add_argument("--acid-rows", type=int, help="rows of the ACID table (default 600,000)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hivemesh-bench-acid",
                    help="where lineitem.parquet is kept between runs (default %(default)s)")  # fmt: skip
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark competitor")
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    scale = args.scale or (0.05 if args.quick else 1.0)
    acid_rows = args.acid_rows or (50_000 if args.quick else 600_000)
    console = Console(width=max(120, Console().width))

    from hive_metastore.ttypes import Database, FireEventRequest, FireEventRequestData, InsertEventRequestData
    from hive_metastore.ttypes import Partition as HPartition
    from tests.support.servers import HivemeshProcess

    from hivemesh.acid.arrow_reader import read_acid_location, table_layout
    from hivemesh.acid.tables import create_transactional_table
    from hivemesh.acid.writer import AcidWriter
    from hivemesh.client.metastore import MetastoreClient
    from hivemesh.replication.config import parse_replication_config
    from hivemesh.replication.service import run_once
    from hivemesh.replication.state import ReplicationStore
    from hivemesh.storage.locations import local_path

    parquet, _ = generate_lineitem(scale, args.cache / f"sf{scale:g}")
    lineitem = _arrow(pq.read_table(parquet))
    rows = lineitem.num_rows
    results: dict[str, Any] = {"scale": scale, "rows": rows, "machine_cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="hivemesh-bench-delta-") as tmp:
        work = Path(tmp)
        procs = [
            HivemeshProcess(f"sqlite:///{work / s}.db", work / f"w{s}", work / f"{s}.log").start()
            for s in "ab"
        ]
        try:
            src = MetastoreClient(procs[0].uri)
            a = src.raw
            a.create_database(Database(name="bench"))
            from hive_metastore.ttypes import FieldSchema, Table

            a.create_table(Table(tableName="lineitem", dbName="bench", owner="bench", sd=_sd(None),
                                 partitionKeys=[FieldSchema(PARTITION, "string", None)], parameters={},
                                 tableType="MANAGED_TABLE"))  # fmt: skip
            location = a.get_table("bench", "lineitem").sd.location
            t0 = time.perf_counter()
            total_bytes = 0
            for mode in sorted(set(lineitem[PARTITION].to_pylist())):
                part = lineitem.filter(pc.equal(lineitem[PARTITION], mode)).drop_columns([PARTITION])
                d = Path(local_path(location)) / f"{PARTITION}={mode}"
                d.mkdir(parents=True)
                half = part.num_rows // 2
                for i, chunk in enumerate((part.slice(0, half), part.slice(half))):
                    paorc.write_table(chunk, str(d / f"00000{i}_0"), compression="zlib")
                    total_bytes += (d / f"00000{i}_0").stat().st_size
                a.add_partition(HPartition(values=[mode], dbName="bench", tableName="lineitem",
                                           sd=_sd(f"{location}/{PARTITION}={mode}"), parameters={}))  # fmt: skip
            console.print(f"lineitem sf{scale:g}: {rows:,} rows, {total_bytes / 2**20:.0f} MiB of ORC "
                          f"(written in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
            wh = {
                s: f"file:{work / f'w{s}'}" for s in "ab"
            }  # the servers' warehouses, as locations show them
            cfg = parse_replication_config({
                "zones": {s: {"metastore": p.uri, "warehouse": wh[s]} for s, p in zip("ab", procs, strict=True)},
                "replication": {"store": f"sqlite:///{work / 'r.db'}",
                                "policies": [{"name": "bench", "source": "a", "target": "b", "databases": ["bench"],
                                              "format": "delta"}]},
            })  # fmt: skip
            store = ReplicationStore(cfg.replication.store)
            t0 = time.perf_counter()
            assert run_once(cfg, store) == {}
            convert_s = time.perf_counter() - t0
            replica = local_path(MetastoreClient(procs[1].uri).raw.get_table("bench", "lineitem").sd.location)
            results["convert"] = {"hivemesh_s": convert_s, "orc_mib": total_bytes / 2**20}

            if not args.no_spark:
                from pyspark.sql import SparkSession

                spark = (SparkSession.builder.master(MASTER).appName("bench-delta")
                         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                         .config("spark.sql.shuffle.partitions", "2")
                         .config("spark.driver.memory", "4g").getOrCreate())  # fmt: skip
                spark.sparkContext.setLogLevel("ERROR")
                src_dir = local_path(location)

                def spark_convert(out: str) -> float:
                    t = time.perf_counter()
                    spark.read.orc(src_dir).write.mode("overwrite").partitionBy(PARTITION).parquet(out)
                    return time.perf_counter() - t

                spark_convert(str(work / "spark-warmup"))
                spark_s = spark_convert(str(work / "spark-out"))
                spark.stop()
                results["convert"]["spark_s"] = spark_s
                results["convert"]["ratio"] = spark_s / convert_s

            # one partition's INSERT: a new file of 1% of the table
            new = lineitem.slice(0, max(1, rows // 100)).drop_columns([PARTITION])
            d = Path(local_path(location)) / f"{PARTITION}=AIR"
            paorc.write_table(new, str(d / "000009_0"), compression="zlib")
            a.fire_listener_event(FireEventRequest(successful=True, data=FireEventRequestData(
                insertData=InsertEventRequestData(filesAdded=[f"{location}/{PARTITION}=AIR/000009_0"], replace=False)),
                dbName="bench", tableName="lineitem", partitionVals=["AIR"]))  # fmt: skip
            t0 = time.perf_counter()
            assert run_once(cfg, store) == {}
            insert_s = time.perf_counter() - t0
            added, size, removed = _bytes_of_last_commit(replica)
            results["insert"] = {"rows": new.num_rows, "seconds": insert_s, "files_added": added,
                                 "bytes_written": size, "files_removed": removed}  # fmt: skip

            # ACID: insert, then 1% deletes clustered and scattered
            create_transactional_table(src, "bench", "lineitem_acid", COLUMNS)
            w = AcidWriter(src, "bench", "lineitem_acid")
            acid = lineitem.slice(0, acid_rows).drop_columns([PARTITION])
            t0 = time.perf_counter()
            for k in range(4):
                q = acid.slice(k * acid_rows // 4, acid_rows // 4)
                w.insert(q)
            write_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            assert run_once(cfg, store) == {}
            acid_replicate_s = time.perf_counter() - t0
            acid_loc = local_path(a.get_table("bench", "lineitem_acid").sd.location)
            acid_replica = local_path(
                MetastoreClient(procs[1].uri).raw.get_table("bench", "lineitem_acid").sd.location
            )
            results["acid"] = {"rows": acid_rows, "write_s": write_s, "replicate_inserts_s": acid_replicate_s}
            from deltalake import DeltaTable

            results["acid"]["replica_files"] = len(DeltaTable(acid_replica).file_uris())
            for kind in ("clustered", "scattered"):
                t = a.get_table("bench", "lineitem_acid")
                wids = src.valid_write_ids(["bench.lineitem_acid"], src.valid_txn_list())[
                    "bench.lineitem_acid"
                ]
                live = read_acid_location(acid_loc, wids, table_layout(t), with_row_ids=True)
                n = max(1, live.num_rows // 100)
                if kind == "clustered":
                    pick = live.slice(0, n)
                else:
                    pick = live.take(list(range(0, live.num_rows, max(1, live.num_rows // n)))[:n])
                w.delete(pick.select(["originalTransaction", "bucket", "rowId"]))
                t0 = time.perf_counter()
                assert run_once(cfg, store) == {}
                secs = time.perf_counter() - t0
                added, size, removed = _bytes_of_last_commit(acid_replica)
                results["acid"][kind] = {"rows_deleted": n, "seconds": secs, "files_added": added,
                                         "bytes_written": size, "files_removed": removed}  # fmt: skip
            store.dispose()
            src.close()
        finally:
            for p in procs:
                p.stop()

    table = RichTable(
        title=f"Hive -> Delta replication, TPC-H lineitem sf{scale:g} ({rows:,} rows), {os.cpu_count()} CPUs"
    )
    table.add_column("measurement")
    table.add_column("value", justify="right")
    c = results["convert"]
    table.add_row(
        "bootstrap conversion, hivemesh (pyarrow + delta-rs)",
        f"{c['hivemesh_s']:.1f} s ({c['orc_mib'] / c['hivemesh_s']:.0f} MiB/s of ORC)",
    )
    if "spark_s" in c:
        table.add_row(f"same files, Spark {MASTER} ORC -> Parquet", f"{c['spark_s']:.1f} s")
        table.add_row("ratio Spark / hivemesh (aim >= 0.8)", f"{c['ratio']:.2f}x")
    i = results["insert"]
    table.add_row(
        f"INSERT of {i['rows']:,} rows into one partition",
        f"{i['seconds']:.2f} s, {i['bytes_written'] / 2**20:.1f} MiB written, {i['files_added']} file(s) added, {i['files_removed']} removed",
    )
    ac = results["acid"]
    table.add_row(
        f"ACID table {ac['rows']:,} rows: 4 insert txns replicated", f"{ac['replicate_inserts_s']:.2f} s"
    )
    for kind in ("clustered", "scattered"):
        k = ac[kind]
        table.add_row(
            f"ACID DELETE of 1% ({k['rows_deleted']:,} rows), {kind}",
            f"{k['seconds']:.2f} s, {k['bytes_written'] / 2**20:.1f} MiB written, {k['files_removed']} of 8 files replaced",
        )
    console.print(table)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
