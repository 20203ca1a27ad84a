"""Reading a Hive ACID table with ``read_acid`` against Spark reading the same rows as plain ORC.

Usage::

    python bench/acid_read.py [--scale 1] [--repeat 3] [--quick] [--keep DIR] [--spark-memory 4g]
                              [--no-hive-impl] [--no-trino] [--trino-heap 3G] [--rebuild] [--json out.json]

Data (built once, cached in ``--keep DIR``, default ``<tmp>/hivemesh-bench-acid``):

- TPC-H ``lineitem`` from ``tpchgen-cli`` (one Parquet file; ~6M rows at scale 1);
- ``bench.lineitem_acid``: a full-ACID table registered in a hivemesh metastore (SQLite, kept in the
  same directory so a rerun finds the table and its write ids), written with
  :func:`hivemesh.acid.files.write_bucket_file` by a pool of processes: 4 insert txns (write ids
  1-4), each writing its quarter of the rows as 2 bucket files, then one delete txn (write id 5)
  writing a delete event for every 10th row id of every file (10% of the rows);
- two plain ORC directories written by Spark (zlib): all rows, and the 90% the delete leaves.

Measured, best of ``--repeat`` after one warm-up, on ``local[2]``: ``count()`` and a TPC-H Q1-like
aggregate (group by ``l_returnflag, l_linestatus``: ``sum(l_quantity)``,
``sum(l_extendedprice * (1 - l_discount))``, ``count(*)``) of

- the ACID table under the snapshot before the delete (``read_acid(path=..., valid_write_ids=...)``)
  against the plain ORC of all rows;
- the ACID table as it is, 10% deleted (``read_acid(spark, "bench.lineitem_acid")``) against the
  plain ORC of the remaining rows, once with the delete masks broadcast (the default below
  ``spark.hivemesh.acid.broadcastDeletesBytes``) and once with broadcasting off (the sort-merge
  join that delete deltas larger than the driver's memory take);
- ``read_acid`` reads through its JVM source (``hivemesh.spark.jvm_reader``: only the columns a
  query uses, ``count()`` from ORC footers); the same two ACID reads also run on its Spark-only path
  (``spark.hivemesh.acid.jvmReader=false``: Spark's ORC reader with every ACID column decoded, what
  a machine without ``javac`` gets), so both paths are measured in the same run;
- with ``spark.sql.orc.impl=hive`` (Spark's Hive ORC reader, row by row), the same ACID reads (on
  the Spark-only path) and the plain read of all rows;
- Trino (the ``trino-server`` bundle from Maven Central, Java 24+; ``--no-trino`` skips it), one
  server per run started with ``tests/support/trino.py``: its own JVM (heap ``--trino-heap``,
  default 3G) on the same 2 CPUs, with a ``hive`` catalog on the benchmark's metastore. It runs the
  same two queries in SQL (``count(*)``; Q1's grouping, sums and count) on ``bench.lineitem_acid``
  as it is, 10% deleted (Trino's own Hive ACID reader, its own txn and write-id snapshot from the
  metastore, so it sees the delete), and on ``bench.lineitem_plain_90``, an external plain ORC
  table over the 90% directory that Trino registers (again) on every run. Trino's queries take
  their turn in the same rounds, after Spark's: one query at a time, never two engines at once.
  Timed from the client: statement sent to last row received.

The ACID write (the 4 insert txns, columnar: :class:`hivemesh.acid.orc_columnar.ColumnarInsertWriter`
behind ``write_bucket_file``) is compared with Spark writing the same rows as plain ORC (speed
ratio = Spark's time / the ACID write's time; run with ``--rebuild`` to time it again).

The ratios printed are plain time / ACID time (1 = as fast as plain ORC), and for the deleted
snapshot Trino/hivemesh = Trino's ACID time / ``read_acid``'s time (>1 = hivemesh is faster), and
Trino's own plain / ACID time. Every ACID result must equal the plain result (counts, and the
aggregate rows exactly); Trino's must equal Spark's on the same rows (the count exactly; the Q1
group keys and counts exactly, its decimal sums exactly, or to half a unit in the last place where
one engine gives fewer decimal places; doubles to a relative 1e-9). A difference, or a Trino query
that fails, fails the run; a Trino that cannot start is reported and the run goes on without it.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support and bench.runner

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from bench import runner  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table as RichTable  # noqa: E402

from hivemesh.acid.files import write_bucket_file  # noqa: E402
from hivemesh.acid.names import delta_dir_name, encode_bucket_property  # noqa: E402

DB = "bench"
TABLE = "lineitem_acid"
FULL_NAME = f"{DB}.{TABLE}"
INSERT_TXNS = 4
FILES_PER_TXN = 2
DELETE_EVERY = 10  # a delete event for every 10th row id of every insert file
LAYOUT_VERSION = 1  # bump when the cached tables must be rebuilt
MASTER = "local[2]"
#: Spark's Hive ORC reader (row by row). Its search-argument pushdown fails on ACID files
#: (ArrayIndexOutOfBoundsException in OrcInputFormat.getSargColumnNames: it maps the pushed
#: columns onto the file's top-level ACID columns), so it runs without filter pushdown.
#: ``read_acid`` without its JVM source (``hivemesh.spark.jvm_reader``): Spark's own ORC reader with
#: every ACID column decoded, the path taken where no ``javac`` is available
SPARK_ONLY = (("spark.hivemesh.acid.jvmReader", "false"),)
#: Spark's Hive SerDe ORC reader; ``read_acid`` then takes its Spark-only path (the JVM source
#: reads ORC itself, whatever ``spark.sql.orc.impl`` says)
HIVE_IMPL = (("spark.sql.orc.impl", "hive"), ("spark.sql.orc.filterPushdown", "false"), *SPARK_ONLY)
TRINO_CATALOG = "hm"  # Trino's hive catalog on the benchmark's metastore
TRINO_PLAIN_TABLE = "lineitem_plain_90"  # Trino's external table over the plain ORC of the 90%
#: Hive column types that Trino spells differently (the others are spelled alike)
TRINO_TYPES = {"int": "integer", "string": "varchar"}

#: lineitem as tpchgen-cli writes it (Arrow) -> the Hive column types of the ACID table
COLUMNS: list[tuple[str, str]] = [
    ("l_orderkey", "bigint"),
    ("l_partkey", "bigint"),
    ("l_suppkey", "bigint"),
    ("l_linenumber", "int"),
    ("l_quantity", "decimal(15,2)"),
    ("l_extendedprice", "decimal(15,2)"),
    ("l_discount", "decimal(15,2)"),
    ("l_tax", "decimal(15,2)"),
    ("l_returnflag", "string"),
    ("l_linestatus", "string"),
    ("l_shipdate", "date"),
    ("l_commitdate", "date"),
    ("l_receiptdate", "date"),
    ("l_shipinstruct", "string"),
    ("l_shipmode", "string"),
    ("l_comment", "string"),
]


# ---------------------------------------------------------------------------------------------- data
def generate_lineitem(scale: float, directory: Path) -> tuple[Path, float | None]:
    """``directory/lineitem.parquet`` from ``tpchgen-cli`` unless it exists; (path, seconds or
    None when reused). Written into a temporary sibling and renamed, so a file that exists is whole."""
    from hivemesh.quickstart.tpch import tpchgen_executable

    target = directory / "lineitem.parquet"
    if target.is_file():
        return target, None
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    cmd = [tpchgen_executable(), "parquet", "--scale-factor", f"{scale:g}", "--tables", "lineitem",
           "--output-dir", str(tmp), "--quiet"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not (tmp / "lineitem.parquet").is_file():
        raise RuntimeError(f"tpchgen-cli failed ({proc.returncode}): {proc.stderr.strip()}")
    (tmp / "lineitem.parquet").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return target, time.perf_counter() - t0


def chunk_bounds(rows: int, chunks: int) -> list[int]:
    """``chunks + 1`` row positions splitting ``rows`` into nearly equal contiguous chunks whose
    starts are multiples of :data:`DELETE_EVERY`: a row's row id in its file is then
    ``position - start``, and "every 10th row id" is "every position divisible by 10"."""
    bounds = [min(rows, round(rows * k / chunks / DELETE_EVERY) * DELETE_EVERY) for k in range(chunks)]
    return [*bounds, rows]


def _read_rows(parquet: str, start: int, end: int) -> pa.Table:
    """Rows ``start..end-1`` of a Parquet file (only the row groups holding them are read)."""
    f = pq.ParquetFile(parquet)
    groups, first, pos = [], None, 0
    for i in range(f.metadata.num_row_groups):
        n = f.metadata.row_group(i).num_rows
        if pos < end and pos + n > start:
            groups.append(i)
            first = pos if first is None else first
        pos += n
    if not groups:
        return f.schema_arrow.empty_table()
    return f.read_row_groups(groups).slice(start - first, end - start)


def _write_insert_file(task: dict[str, Any]) -> dict[str, Any]:
    """Pool task: one insert bucket file of rows ``start..end-1``."""
    t0 = time.perf_counter()
    rows = _read_rows(task["parquet"], task["start"], task["end"])
    stats = write_bucket_file(task["directory"], COLUMNS, task["bucket_id"], 0, task["write_id"], rows)
    assert stats is not None and stats.rows == task["end"] - task["start"], stats
    return {
        **task,
        "rows": stats.rows,
        "bytes": stats.length,
        "path": stats.path,
        "seconds": time.perf_counter() - t0,
    }


def _write_delete_file(task: dict[str, Any]) -> dict[str, Any]:
    """Pool task: the delete events of one bucket id, for every 10th row id of each insert file."""
    t0 = time.perf_counter()
    owid, bucket, row_id = [], [], []
    prop = encode_bucket_property(task["bucket_id"], 0)
    for write_id, n in task["files"]:
        ids = list(range(0, n, DELETE_EVERY))
        owid += [write_id] * len(ids)
        bucket += [prop] * len(ids)
        row_id += ids
    keys = pa.table(
        {
            "originalTransaction": pa.array(owid, pa.int64()),
            "bucket": pa.array(bucket, pa.int32()),
            "rowId": pa.array(row_id, pa.int64()),
        }
    )
    stats = write_bucket_file(
        task["directory"], COLUMNS, task["bucket_id"], 0, task["write_id"], keys, delete=True
    )
    assert stats is not None and stats.deletes == keys.num_rows, stats
    return {
        **task,
        "rows": stats.rows,
        "bytes": stats.length,
        "path": stats.path,
        "seconds": time.perf_counter() - t0,
    }


def build_acid(uri: str, parquet: Path, rows: int, procs: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Create ``bench.lineitem_acid`` and write it: 4 insert txns (2 files each, written by a pool
    of ``procs`` processes), then the delete txn. Returns what the manifest records."""
    from hive_metastore.ttypes import Database, DataOperationType, LockType

    from hivemesh.acid.tables import create_transactional_table
    from hivemesh.client.metastore import MetastoreClient, lock_component

    chunks = INSERT_TXNS * FILES_PER_TXN
    bounds = chunk_bounds(rows, chunks)
    ctx = multiprocessing.get_context("fork")  # forked before Spark starts its JVM
    out: dict[str, Any] = {"inserts": [], "deletes": []}
    with ctx.Pool(procs) as pool, MetastoreClient(uri) as client:
        client.raw.create_database(
            Database(name=DB, description="hivemesh ACID read benchmark", parameters={})
        )
        table = create_transactional_table(client, DB, TABLE, COLUMNS)
        location = table.sd.location
        out["location"] = location
        t0 = time.perf_counter()
        for i in range(INSERT_TXNS):
            with client.transaction() as tx:
                tx.lock([lock_component(DB, TABLE, None, LockType.SHARED_READ, DataOperationType.INSERT)])
                write_id = tx.allocate_write_id(DB, TABLE)
                directory = f"{location.rstrip('/')}/{delta_dir_name(write_id, write_id, 0)}"
                tasks = [
                    {
                        "parquet": str(parquet),
                        "start": bounds[k],
                        "end": bounds[k + 1],
                        "directory": directory,
                        "bucket_id": b,
                        "write_id": write_id,
                    }
                    for b, k in enumerate(range(i * FILES_PER_TXN, (i + 1) * FILES_PER_TXN))
                ]
                done = pool.map(_write_insert_file, tasks)
                out["inserts"] += done
                say(f"insert txn {tx.txn_id}: write id {write_id}, {sum(d['rows'] for d in done):,} rows")
        out["insert_s"] = time.perf_counter() - t0
        snapshot = client.valid_write_ids([FULL_NAME], client.valid_txn_list())[FULL_NAME]
        out["snapshot_before_delete"] = snapshot.to_string()
        t0 = time.perf_counter()
        with client.transaction() as tx:
            tx.lock([lock_component(DB, TABLE, None, LockType.EXCL_WRITE, DataOperationType.DELETE)])
            write_id = tx.allocate_write_id(DB, TABLE)
            directory = f"{location.rstrip('/')}/{delta_dir_name(write_id, write_id, 0, delete=True)}"
            tasks = [
                {
                    "directory": directory,
                    "bucket_id": b,
                    "write_id": write_id,
                    "files": [(d["write_id"], d["rows"]) for d in out["inserts"] if d["bucket_id"] == b],
                }
                for b in range(FILES_PER_TXN)
            ]
            out["deletes"] = pool.map(_write_delete_file, tasks)
            say(
                f"delete txn {tx.txn_id}: write id {write_id}, {sum(d['rows'] for d in out['deletes']):,} delete events"
            )
        out["delete_s"] = time.perf_counter() - t0
        out["snapshot_after_delete"] = client.valid_write_ids([FULL_NAME], client.valid_txn_list())[
            FULL_NAME
        ].to_string()
    # the pool's processes have ended and been waited for: their peak RSS is in RUSAGE_CHILDREN
    out["writer_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out["processes"] = procs
    return out


def dir_stats(path: Path) -> tuple[int, int]:
    """(data files, bytes) under ``path``, ignoring hidden files and Spark's ``_SUCCESS``/``.crc``."""
    files = [p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
    return len(files), sum(p.stat().st_size for p in files)


def write_plain(spark: Any, parquet: Path, full_dir: Path, ninety_dir: Path) -> dict[str, Any]:
    """Spark writes the plain ORC tables (zlib): every row, and the rows the delete txn leaves."""
    from pyspark.sql import functions as F

    out = {}
    for key, target, keep in (("full", full_dir, None), ("ninety", ninety_dir, DELETE_EVERY)):
        t0 = time.perf_counter()
        df = spark.read.parquet(str(parquet))
        if keep is not None:  # the row's position in the Parquet file decides, as for the ACID files
            df = df.filter(F.col("_metadata.row_index") % keep != 0)
        df.write.mode("overwrite").option("compression", "zlib").orc(str(target))
        files, size = dir_stats(target)
        out[key] = {"seconds": time.perf_counter() - t0, "files": files, "bytes": size}
    return out


# ---------------------------------------------------------------------------------------------- Spark
def start_spark(uri: str, workdir: Path, memory: str) -> Any:
    """A ``local[2]`` SparkSession on the benchmark's metastore, quiet JVM logs."""
    import hivemesh.spark
    from hivemesh.quickstart.session import write_log4j2_config

    log4j2 = write_log4j2_config(workdir / "spark-log4j2.properties", "error")
    conf = {
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j2.as_uri()}",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    spark = hivemesh.spark.session(
        uri,
        warehouse=str(workdir / "spark-warehouse"),
        app_name="hivemesh-acid-read-bench",
        master=MASTER,
        **conf,
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class JvmMemory:
    """Heap pools and resident set of the Spark driver's JVM."""

    def __init__(self, spark: Any):
        self.jvm = spark._jvm
        self.pid = int(self.jvm.java.lang.ProcessHandle.current().pid())

    def _heap_pools(self) -> list[Any]:
        pools = self.jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        return [p for p in pools if str(p.getType().name()) == "HEAP"]

    def reset_peaks(self) -> None:
        """Collect garbage, then restart every heap pool's peak from its current use."""
        self.jvm.java.lang.System.gc()
        for p in self._heap_pools():
            p.resetPeakUsage()

    def heap_peak_mb(self) -> float:
        """Sum of the heap pools' peaks since :meth:`reset_peaks` (an upper bound of the heap peak)."""
        return sum(int(p.getPeakUsage().getUsed()) for p in self._heap_pools()) / 2**20

    def old_gen_peak_mb(self) -> float:
        """Peak of the old generation since :meth:`reset_peaks` (what survived young collections)."""
        pools = [
            p
            for p in self._heap_pools()
            if "old" in str(p.getName()).lower() or "tenured" in str(p.getName()).lower()
        ]
        return sum(int(p.getPeakUsage().getUsed()) for p in pools) / 2**20

    def max_heap_mb(self) -> float:
        """The JVM's maximum heap (``Runtime.maxMemory``), MB."""
        return int(self.jvm.java.lang.Runtime.getRuntime().maxMemory()) / 2**20

    def rss_peak_mb(self) -> float | None:
        """VmHWM of the JVM process (peak resident set)."""
        return peak_rss_mb(self.pid)


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM of process ``pid`` (its peak resident set), MB; None when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ---------------------------------------------------------------------------------------------- queries
def q_count(df: Any) -> int:
    """The ``count()`` query: rows of ``df``."""
    return df.count()


def q1(df: Any) -> list[tuple[Any, ...]]:
    """TPC-H Q1's shape without its date filter: a full scan grouped by return flag and status."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum(F.col("l_extendedprice") * (F.lit(1) - F.col("l_discount"))).alias("sum_disc_price"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .collect()
    )
    return sorted(tuple(r) for r in rows)


QUERIES: dict[str, Callable[[Any], Any]] = {"count": q_count, "q1": q1}


@dataclass(frozen=True)
class Variant:
    """One way of reading: ``make`` builds the DataFrame (inside the timing); ``after`` runs after
    each timed run, outside it (ends the read txn of a ``read_acid`` by table name)."""

    key: str
    label: str
    make: Callable[[], Any]
    after: Callable[[], None] | None = None
    conf: tuple[tuple[str, str], ...] = ()  # Spark settings for this variant's reads

    @property
    def impl(self) -> str:
        """``spark.sql.orc.impl`` of this variant: ``native`` or ``hive``."""
        return dict(self.conf).get("spark.sql.orc.impl", "native")


def scan_info(df: Any) -> dict[str, Any]:
    """Scan partitions and whether the file scans are vectorized (``Batched: true``)."""
    plan = str(df._jdf.queryExecution().executedPlan().toString())
    batched = [s.split(",")[0].strip() for s in plan.split("Batched: ")[1:]]
    return {"partitions": df.rdd.getNumPartitions(), "batched": batched}


@contextmanager
def settings(spark: Any, conf: Sequence[tuple[str, str]]) -> Iterator[None]:
    """Spark settings for the block; the previous values come back after it."""
    saved = {k: spark.conf.get(k, None) for k, _ in conf}
    for k, value in conf:
        spark.conf.set(k, value)
    try:
        yield
    finally:
        for k, value in saved.items():
            if value is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, value)


# ---------------------------------------------------------------------------------------------- Trino
def trino_count(server: Any, table: str) -> int:
    """The ``count()`` query in Trino: ``SELECT count(*)`` of ``table`` (``catalog.schema.name``)."""
    return int(server.query(f"SELECT count(*) FROM {table}")[0][0])


def trino_q1(server: Any, table: str) -> list[tuple[Any, ...]]:
    """:func:`q1` in Trino SQL (the same grouping, sums and count), its rows sorted as :func:`q1` sorts
    them. Trino returns the sums as ``decimal(38, s)``, which its Python client gives as ``Decimal``."""
    rows = server.query(
        "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, "
        "sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, count(*) AS count_order "
        f"FROM {table} GROUP BY l_returnflag, l_linestatus"
    )
    return sorted(tuple(r) for r in rows)


#: the queries of :data:`QUERIES`, in Trino: (server, table) -> the result as the Spark query gives it
TRINO_QUERIES: dict[str, Callable[[Any, str], Any]] = {"count": trino_count, "q1": trino_q1}


def sums_close(a: Any, b: Any) -> bool:
    """Whether two sums are equal up to what their types allow: two decimals (exact in both
    engines; only a rounding to a coarser result scale may differ) to half a unit in the last
    place of the coarser of their scales, so at equal scales exactly; anything else (a double)
    to a relative 1e-9."""
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        exponent = max(int(a.as_tuple().exponent), int(b.as_tuple().exponent))
        return abs(a - b) <= Decimal(1).scaleb(exponent) / 2
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def q1_difference(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]]) -> str | None:
    """``None`` when the Q1 rows ``got`` (Trino's) equal ``want`` (Spark's, both sorted): the group
    keys and ``count_order`` exactly, the two sums by :func:`sums_close`; else what differs."""
    if len(got) != len(want):
        return f"{len(got)} groups, expected {len(want)}"
    for g, w in zip(got, want, strict=True):
        if (g[0], g[1], g[4]) != (w[0], w[1], w[4]):
            return f"group {g[0]}/{g[1]} count {g[4]} != {w[0]}/{w[1]} count {w[4]}"
        for i, name in ((2, "sum_qty"), (3, "sum_disc_price")):
            if not sums_close(g[i], w[i]):
                return f"group {g[0]}/{g[1]} {name} {g[i]} != {w[i]}"
    return None


@dataclass(frozen=True)
class TrinoVariant:
    """One table Trino reads with :data:`TRINO_QUERIES`; ``table`` is its Trino name
    (``catalog.schema.name``)."""

    key: str
    label: str
    table: str


def start_trino(
    metastore_uri: str, plain_dir: Path, heap: str, say: Callable[[str], None]
) -> tuple[Any | None, list[TrinoVariant], dict[str, Any]]:
    """Start one Trino server (``tests/support/trino.py``, heap ``heap``), give it the ``hive``
    catalog :data:`TRINO_CATALOG` on ``metastore_uri`` and register ``plain_dir`` (the plain ORC of
    the 90%) as the external ORC table :data:`TRINO_PLAIN_TABLE`, dropped first if a previous run
    left it (an external table: dropping it leaves the files). Returns (the server or ``None`` when
    Trino cannot run, the tables to time, info: ``heap``, ``start_s`` (seconds from launch until
    it answers a query), ``version``, ``notes``, ``error`` when it did not start)."""
    info: dict[str, Any] = {"heap": heap, "notes": []}
    try:
        from tests.support.trino import TrinoServer

        from hivemesh.jvm import JavaNotFound, JvmArtifactError, find_java, resolve
    except ImportError as e:  # the trino client or pytest missing
        info["error"] = f"cannot import the Trino test support: {e}"
        return None, [], info
    try:
        resolve("trino-server")
        find_java(24)
    except (JvmArtifactError, JavaNotFound) as e:
        info["error"] = f"needs the trino-server bundle and Java 24+: {e}"
        return None, [], info
    server = TrinoServer(heap=heap)
    info["workdir"] = str(server.base)
    t0 = time.perf_counter()
    try:
        server.start()
    except Exception as e:
        info["error"] = f"did not start ({time.perf_counter() - t0:.0f} s; its log: {server.log}): {e}"
        return None, [], info
    info["start_s"] = time.perf_counter() - t0
    try:
        info["version"] = str(server.query("SELECT node_version FROM system.runtime.nodes")[0][0])
        server.add_hive_catalog(TRINO_CATALOG, metastore_uri)
    except Exception as e:
        info["error"] = f"started in {info['start_s']:.0f} s, but its hive catalog failed: {e}"
        server.stop()
        return None, [], info
    say(f"Trino {info['version']} started in {info['start_s']:.1f} s (heap {heap})")
    variants = [TrinoVariant("trino_acid_del", "Trino, ACID 10% deleted", f"{TRINO_CATALOG}.{FULL_NAME}")]
    plain = f"{TRINO_CATALOG}.{DB}.{TRINO_PLAIN_TABLE}"
    columns = ", ".join(f"{name} {TRINO_TYPES.get(kind, kind)}" for name, kind in COLUMNS)
    try:
        server.query(f"DROP TABLE IF EXISTS {plain}")
        server.query(
            f"CREATE TABLE {plain} ({columns}) "
            f"WITH (external_location = '{plain_dir.resolve().as_uri()}', format = 'ORC')"
        )
        variants.append(TrinoVariant("trino_plain_90", "Trino, plain ORC 90%", plain))
    except Exception as e:
        info["notes"].append(f"Trino could not register the plain ORC table, so it reads only ACID: {e}")
    return server, variants, info


def _record(q: dict[str, Any], rnd: int, dt: float, result: Any, same: Callable[[Any, Any], bool]) -> None:
    """Record run ``rnd`` (0 = the warm-up) of a query that took ``dt`` seconds in ``q``, and the
    result when it differs (by ``same``) from the warm-up's: the same read must answer the same."""
    if rnd == 0:
        q["warmup_s"] = dt
        q["result"] = result
    else:
        q["runs_s"].append(dt)
    if not same(result, q["result"]):
        q["unstable"] = result


def _last_run(q: dict[str, Any], rnd: int) -> str:
    """The seconds of run ``rnd`` (0 = the warm-up) of a query recorded by :func:`_record`, or
    ``error`` when it did not run."""
    dt = q.get("warmup_s") if rnd == 0 else (q["runs_s"][-1] if len(q["runs_s"]) == rnd else None)
    return "error" if dt is None else f"{dt:.2f}"


def _trino_same(name: str) -> Callable[[Any, Any], bool]:
    """How two Trino results of query ``name`` are compared: Q1 by :func:`q1_difference`, else exactly."""
    if name == "q1":
        return lambda a, b: q1_difference(a, b) is None
    return lambda a, b: a == b


def measure(
    spark: Any,
    variants: Sequence[Variant],
    repeat: int,
    mem: JvmMemory,
    say: Callable[[str], None],
    trino: Any | None = None,
    trino_variants: Sequence[TrinoVariant] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``repeat + 1`` rounds (the first is the warm-up); each round runs every query on every
    variant in turn, then on every Trino table (``trino_variants`` on the server ``trino``, one
    query at a time: Spark is idle meanwhile), so a change in the machine's load falls on all of
    them alike. Per variant: the timed runs and best time (s) of each query, its result, and for
    Spark's the JVM heap peak of its runs (peaks reset, after a GC, before each run). Returns
    (Spark's variants, Trino's); a Trino table whose query fails gets ``error`` and is not run again."""
    out: dict[str, Any] = {}
    for v in variants:
        with settings(spark, v.conf):
            info = scan_info(v.make())
            if v.after:
                v.after()
        out[v.key] = {"label": v.label, "impl": v.impl, "conf": dict(v.conf), **info}
        out[v.key].update({name: {"runs_s": []} for name in QUERIES})
        out[v.key].update(heap_peak_mb=0.0, old_gen_peak_mb=0.0)
    tout: dict[str, Any] = {
        tv.key: {"label": tv.label, "table": tv.table, **{name: {"runs_s": []} for name in QUERIES}}
        for tv in trino_variants
    }
    for rnd in range(repeat + 1):
        for v in variants:
            r = out[v.key]
            with settings(spark, v.conf):
                for name, query in QUERIES.items():
                    mem.reset_peaks()
                    t0 = time.perf_counter()
                    result = query(v.make())
                    dt = time.perf_counter() - t0
                    if v.after:
                        v.after()
                    r["heap_peak_mb"] = max(r["heap_peak_mb"], mem.heap_peak_mb())
                    r["old_gen_peak_mb"] = max(r["old_gen_peak_mb"], mem.old_gen_peak_mb())
                    _record(r[name], rnd, dt, result, lambda a, b: a == b)
        for tv in trino_variants:
            r = tout[tv.key]
            for name, tquery in TRINO_QUERIES.items():
                if "error" in r:
                    break
                t0 = time.perf_counter()
                try:
                    result = tquery(trino, tv.table)
                except Exception as e:  # Trino's error, e.g. a feature of the files it does not read
                    r["error"] = f"{type(e).__name__}: {e}"
                    r["error_query"] = name
                    say(escape(f"Trino failed on {tv.table} ({name}): {r['error']}"))
                    break
                _record(r[name], rnd, time.perf_counter() - t0, result, _trino_same(name))

        say(
            ("warm-up" if rnd == 0 else f"round {rnd}/{repeat}")
            + ": "
            + "; ".join(
                f"{r['label']} " + "/".join(_last_run(r[n], rnd) for n in QUERIES)
                for r in [*out.values(), *tout.values()]
            )
            + " s (count/q1)"
        )
    for r in [*out.values(), *tout.values()]:
        for name in QUERIES:
            r[name]["best_s"] = min(r[name]["runs_s"]) if r[name]["runs_s"] else None
    return out, tout


# ---------------------------------------------------------------------------------------------- report
def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


ROWS = [  # (label, query, plain variant, ACID variant, target ratio: issue 17's aims)
    ("count(*), no deletes", "count", "plain_full", "acid_nodel", 0.8),
    ("Q1 aggregate, no deletes", "q1", "plain_full", "acid_nodel", 0.95),
    ("count(*), 10% deleted", "count", "plain_90", "acid_del", 0.5),
    ("Q1 aggregate, 10% deleted", "q1", "plain_90", "acid_del", 0.85),
    ("count(*), 10% deleted, deletes not broadcast", "count", "plain_90", "acid_del_shuffle", 0.5),
    ("Q1 aggregate, 10% deleted, deletes not broadcast", "q1", "plain_90", "acid_del_shuffle", 0.85),
    ("count(*), no deletes, Spark-only reader", "count", "plain_full", "acid_nodel_sparkonly", 0.8),
    ("Q1 aggregate, no deletes, Spark-only reader", "q1", "plain_full", "acid_nodel_sparkonly", 0.95),
    ("count(*), 10% deleted, Spark-only reader", "count", "plain_90", "acid_del_sparkonly", 0.5),
    ("Q1 aggregate, 10% deleted, Spark-only reader", "q1", "plain_90", "acid_del_sparkonly", 0.85),
]
#: the read of delete deltas too large to broadcast (``spark.hivemesh.acid.broadcastDeletesBytes``
#: 0, and Spark may not broadcast on its own): the path that holds beyond the driver's memory
NO_BROADCAST = (
    ("spark.hivemesh.acid.broadcastDeletesBytes", "0"),
    ("spark.sql.autoBroadcastJoinThreshold", "-1"),
)
WRITE_TARGET = 0.8  # ACID write speed / Spark's plain ORC write speed (issue 17's aim)


def trino_ratios(res: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per query, on the deleted snapshot: Trino's best times (s) on the ACID table and on the plain
    ORC of the 90%, ``read_acid``'s best time (s), Trino time / ``read_acid`` time (>1 = hivemesh is
    faster) and Trino's plain time / its ACID time; ``None`` where a time is missing."""
    tv, v = res["trino"].get("variants", {}), res["variants"]
    out: dict[str, dict[str, float | None]] = {}
    for name in QUERIES:
        t = tv.get("trino_acid_del", {}).get(name, {}).get("best_s")
        tp = tv.get("trino_plain_90", {}).get(name, {}).get("best_s")
        h = v["acid_del"][name]["best_s"] if "acid_del" in v else None
        out[name] = {
            "trino_acid_s": t,
            "trino_plain_s": tp,
            "hivemesh_acid_s": h,
            "trino_over_hivemesh": t / h if t and h else None,
            "trino_plain_over_acid": tp / t if tp and t else None,
        }
    return out


def render(console: Console, res: dict[str, Any], mismatches: list[str], title: str) -> None:
    """The comparison table (with Trino's columns when Trino ran), the setup table and the notes."""
    v = res["variants"]
    trino = res["trino"]
    tv = trino.get("variants", {})
    ratios = trino_ratios(res) if tv else {}

    def best(key: str, query: str) -> float | None:
        return v[key][query]["best_s"] if key in v else None

    # the hive-impl columns only when those reads ran (not with --no-hive-impl)
    hive = any(x["impl"] == "hive" for x in v.values())
    t = RichTable(title=title, title_justify="left")
    for col, just in [
        ("read", "left"),
        ("plain ORC s", "right"),
        ("ACID s", "right"),
        ("plain/ACID", "right"),
        ("target", "right"),
        *(
            [("ACID hive-impl s", "right"), ("hive/native ACID", "right"), ("plain hive-impl s", "right")]
            if hive
            else []
        ),
        *([("Trino ACID s", "right"), ("Trino/hivemesh", "right")] if tv else []),
        *([("Trino plain s", "right"), ("Trino plain/ACID", "right")] if "trino_plain_90" in tv else []),
    ]:
        t.add_column(col, justify=just)
    bad = {m.split(":")[0] for m in mismatches}

    def trino_cells(acid: str, query: str) -> list[str]:
        """Trino's cells of a row: its times and ratios on the deleted snapshot, else dashes."""
        cells: list[str] = []
        for key, ratio_key in (
            ("trino_acid_del", "trino_over_hivemesh"),
            ("trino_plain_90", "trino_plain_over_acid"),
        ):
            if key not in tv:
                continue
            if acid != "acid_del":
                cells += ["-", "-"]
                continue
            r = ratios[query]
            time_s = r["trino_acid_s" if key == "trino_acid_del" else "trino_plain_s"]
            ttext = "[red]MISMATCH[/red]" if f"{key}/{query}" in bad else _s(time_s)
            if "error" in tv[key]:
                ttext = "[red]ERROR[/red]"
            ratio = r[ratio_key]
            rtext = "-" if ratio is None else f"{ratio:.2f}"
            if ratio is not None and key == "trino_acid_del":
                rtext = f"[green]{rtext}[/green]" if ratio >= 1 else f"[yellow]{rtext}[/yellow]"
            cells += [ttext, rtext]
        return cells

    for label, query, plain, acid, target in ROWS:
        p, a = best(plain, query), best(acid, query)
        ratio = p / a if p and a else None
        rtext = "-" if ratio is None else f"{ratio:.2f}"
        if ratio is not None:
            rtext = f"[green]{rtext}[/green]" if ratio >= target else f"[yellow]{rtext}[/yellow]"
        h = best(acid + "_hive", query)
        ph = best(plain + "_hive", query)
        atext = _s(a) if f"{acid}/{query}" not in bad else "[red]MISMATCH[/red]"
        htext = _s(h) if f"{acid}_hive/{query}" not in bad else "[red]MISMATCH[/red]"
        t.add_row(
            label,
            _s(p),
            atext,
            rtext,
            f">= {target}",
            *([htext, "-" if a is None or h is None else f"{h / a:.2f}", _s(ph)] if hive else []),
            *trino_cells(acid, query),
            end_section=query == "q1",
        )
    console.print(t)
    if trino.get("skipped"):
        console.print(f"Trino: not run ({trino['skipped']}).")
    elif "error" in trino:
        console.print(f"[yellow]Trino: not run, it could not start: {escape(trino['error'])}[/yellow]")
    else:
        peak = trino.get("peak_rss_mb")
        console.print(
            f"Trino {trino['version']}: its own JVM (heap {trino['heap']}, peak RSS {_mb(peak)} MB) on the same "
            f"{os.cpu_count()} CPUs as Spark, started in {trino['start_s']:.1f} s; its queries ran one at a "
            "time in the same rounds as Spark's, never at the same moment; it reads "
            f"{FULL_NAME} with its own Hive ACID reader and its own snapshot from the metastore, timed "
            "from the client (statement sent to last row)."
        )
        for note in trino["notes"]:
            console.print(f"[yellow]Trino: {escape(note)}[/yellow]")

    b = res["build"]
    s = RichTable(
        title=f"Setup ({'built in this run' if b['built_now'] else 'cached, built ' + b['built_at']})",
        title_justify="left",
    )
    for col in ("step", "seconds", "rows", "files", "MB"):
        s.add_column(col, justify="left" if col == "step" else "right")
    gen = res["generate_s"]
    s.add_row(
        "tpchgen-cli lineitem.parquet",
        "cached" if gen is None else f"{gen:.1f}",
        f"{res['rows']:,}",
        "1",
        _mb(res["parquet_bytes"] / 2**20),
    )
    acid = b["acid"]
    s.add_row(
        f"ACID write: {INSERT_TXNS} insert txns x {FILES_PER_TXN} files, {acid['processes']} processes",
        f"{acid['insert_s']:.1f}",
        f"{sum(d['rows'] for d in acid['inserts']):,}",
        str(len(acid["inserts"])),
        _mb(sum(d["bytes"] for d in acid["inserts"]) / 2**20),
    )
    s.add_row(
        "ACID delete txn: every 10th row id",
        f"{acid['delete_s']:.1f}",
        f"{sum(d['rows'] for d in acid['deletes']):,}",
        str(len(acid["deletes"])),
        _mb(sum(d["bytes"] for d in acid["deletes"]) / 2**20),
    )
    for key, what, n in (
        ("full", "all rows", res["rows"]),
        ("ninety", "the remaining 90%", res["rows"] - res["deleted"]),
    ):
        pl = b["plain"][key]
        s.add_row(
            f"Spark writes plain ORC (zlib), {what}",
            f"{pl['seconds']:.1f}",
            f"{n:,}",
            str(pl["files"]),
            _mb(pl["bytes"] / 2**20),
        )
    console.print(s)
    write_ratio = b["plain"]["full"]["seconds"] / acid["insert_s"]
    console.print(
        f"ACID write vs Spark writing the same rows as plain ORC: {acid['insert_s']:.1f} s vs "
        f"{b['plain']['full']['seconds']:.1f} s, speed ratio "
        + (
            f"[green]{write_ratio:.2f}[/green]"
            if write_ratio >= WRITE_TARGET
            else f"[yellow]{write_ratio:.2f}[/yellow]"
        )
        + f" (target >= {WRITE_TARGET}; both read the Parquet file and write zlib ORC on {os.cpu_count()} CPUs)"
    )

    m = res["memory"]
    console.print(
        f"memory: Python driver peak RSS {_mb(m['python_peak_rss_mb'])} MB; JVM driver peak RSS "
        f"{_mb(m['jvm_peak_rss_mb'])} MB (max heap {_mb(m['jvm_max_heap_mb'])} MB, --spark-memory "
        f"{res['spark_memory']})"
        + (f"; ACID writer processes peak RSS {_mb(acid['writer_peak_rss_mb'])} MB" if b["built_now"] else "")
        + "."
    )
    console.print(
        "JVM heap peak per read, MB (sum of heap pools' peaks / old generation): "
        + "; ".join(
            f"{x['label']} {_mb(x['heap_peak_mb'])} / {_mb(x['old_gen_peak_mb'])}" for x in v.values()
        )
        + "."
    )
    console.print(
        "scan partitions (vectorized file scans): "
        + "; ".join(f"{x['label']} {x['partitions']} ({'/'.join(x['batched']) or '?'})" for x in v.values())
        + "."
    )
    console.print(
        f"ACID snapshot without deletes: {res['snapshot_before_delete']}; with: {res['snapshot_after_delete']}; "
        f"{res['deleted']:,} of {res['rows']:,} rows deleted."
    )


# ---------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (options: ``--help``); exit status 1 when a result differs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, help="TPC-H scale factor (default 1; 0.05 with --quick)")
    ap.add_argument(
        "--repeat", type=int, help="timed runs per query after one warm-up (default 3; 1 with --quick)"
    )
    ap.add_argument("--quick", action="store_true", help="scale 0.05, one timed run")
    ap.add_argument(
        "--keep",
        type=Path,
        default=Path(tempfile.gettempdir()) / "hivemesh-bench-acid",
        help="data directory, reused between runs (default: %(default)s)",
    )
    ap.add_argument("--spark-memory", default="4g", help="spark.driver.memory (default %(default)s)")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 2, help="ACID writer processes")
    ap.add_argument("--no-hive-impl", action="store_true", help="skip the spark.sql.orc.impl=hive reads")
    ap.add_argument("--no-trino", action="store_true", help="skip the Trino reads")
    ap.add_argument("--trino-heap", default="3G", help="Trino's JVM heap, -Xmx (default %(default)s)")
    ap.add_argument("--rebuild", action="store_true", help="write the tables again even when cached")
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    scale = args.scale if args.scale is not None else 0.05 if args.quick else 1.0
    repeat = args.repeat if args.repeat is not None else 1 if args.quick else 3
    if repeat < 1 or scale <= 0:
        ap.error("--repeat must be >= 1 and --scale > 0")

    # the hive-impl columns and Trino's together need more than the usual 150 columns
    console = runner.wide_console(150 if args.no_hive_impl or args.no_trino else 200)

    def say(msg: str) -> None:
        console.print(f"  [dim]{msg}[/dim]")

    runner.print_banner(console, f"hivemesh ACID read benchmark, TPC-H sf{scale:g}", args.quick, {}, {})
    t_start = time.perf_counter()
    from tests.support.servers import HivemeshProcess

    from hivemesh.spark import acid as acid_mod

    base = args.keep.resolve() / f"sf{scale:g}"
    parquet, gen_s = generate_lineitem(scale, base)
    meta = pq.ParquetFile(parquet).metadata
    rows = meta.num_rows
    say(
        f"lineitem: {rows:,} rows in {parquet}" + (f" (generated in {gen_s:.1f} s)" if gen_s else " (cached)")
    )

    tables = base / f"tables-v{LAYOUT_VERSION}"
    manifest_path = tables / "manifest.json"
    manifest: dict[str, Any] | None = None
    if manifest_path.is_file() and not args.rebuild:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        say(f"reusing the tables in {tables} (built {manifest['built_at']}; --rebuild writes them again)")
    else:
        shutil.rmtree(tables, ignore_errors=True)
        tables.mkdir(parents=True)
    built_now = manifest is None
    plain_full, plain_90 = tables / "plain_full", tables / "plain_90"

    ms = HivemeshProcess(
        f"sqlite:///{tables / 'metastore.sqlite'}", tables / "warehouse", tables / "metastore.log"
    )
    ms.start()
    spark = None
    trino: Any | None = None
    trino_info: dict[str, Any] = {"skipped": "--no-trino"} if args.no_trino else {}
    keep_trino_log = True  # unless Trino's reads all went well
    try:
        if manifest is None:
            say(
                f"writing {FULL_NAME}: {INSERT_TXNS} insert txns, then the delete txn ({args.processes} processes)"
            )
            acid = build_acid(ms.uri, parquet, rows, args.processes, say)
        spark = start_spark(ms.uri, tables, args.spark_memory)
        mem = JvmMemory(spark)
        if manifest is None:
            say("Spark writes the plain ORC tables")
            plain = write_plain(spark, parquet, plain_full, plain_90)
            manifest = {
                "layout": LAYOUT_VERSION,
                "scale": scale,
                "rows": rows,
                "built_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "acid": acid,
                "plain": plain,
            }
            manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        acid = manifest["acid"]
        deleted = sum(d["rows"] for d in acid["deletes"])
        location = acid["location"]

        def before_delete() -> Any:
            return acid_mod.read_acid(
                spark, path=location, valid_write_ids=acid["snapshot_before_delete"], schema=COLUMNS
            )

        def as_it_is() -> Any:
            return acid_mod.read_acid(spark, FULL_NAME, metastore_uri=ms.uri)

        def commit() -> None:
            acid_mod.commit(spark)

        variants = [
            Variant("plain_full", "plain ORC, all rows", lambda: spark.read.orc(str(plain_full))),
            Variant("acid_nodel", "ACID before the delete", before_delete),
            Variant("plain_90", "plain ORC, 90%", lambda: spark.read.orc(str(plain_90))),
            Variant("acid_del", "ACID, 10% deleted", as_it_is, after=commit),
            Variant(
                "acid_del_shuffle", "ACID, 10% deleted, deletes not broadcast", as_it_is, commit, NO_BROADCAST
            ),
            Variant(
                "acid_nodel_sparkonly",
                "ACID before the delete, Spark-only reader",
                before_delete,
                conf=SPARK_ONLY,
            ),
            Variant(
                "acid_del_sparkonly", "ACID, 10% deleted, Spark-only reader", as_it_is, commit, SPARK_ONLY
            ),
        ]
        if not args.no_hive_impl:
            variants += [
                Variant(v.key + "_hive", v.label + " (hive impl)", v.make, v.after, HIVE_IMPL)
                for v in variants
                if v.key in ("plain_full", "acid_nodel", "acid_del")
            ]
        trino_variants: list[TrinoVariant] = []
        if not args.no_trino:  # started while Spark is idle, before the timing
            say(f"starting Trino (heap {args.trino_heap})")
            trino, trino_variants, trino_info = start_trino(ms.uri, plain_90, args.trino_heap, say)
            if trino is None:
                console.print(
                    "[bold yellow]Trino could not start; going on without it:[/bold yellow] "
                    + escape(trino_info["error"])
                )
            for note in trino_info["notes"]:
                say(escape(f"Trino: {note}"))
        say(
            f"timing {len(variants)} reads x {len(QUERIES)} queries"
            + (f" and {len(trino_variants)} Trino reads" if trino_variants else "")
            + f": 1 warm-up round + {repeat}"
        )
        results, trino_results = measure(spark, variants, repeat, mem, say, trino, trino_variants)

        # every result against the plain read of the same rows, and the counts against the files
        mismatches = []
        expected = {"plain_full": rows, "plain_90": rows - deleted}
        for key, r in results.items():
            ref_key = "plain_full" if key.startswith(("plain_full", "acid_nodel")) else "plain_90"
            ref = results[ref_key]
            if r["count"]["result"] != expected[ref_key]:
                mismatches.append(
                    f"{key}/count: {r['count']['result']:,} rows, expected {expected[ref_key]:,}"
                )
            if r["q1"]["result"] != ref["q1"]["result"]:
                mismatches.append(f"{key}/q1: {r['q1']['result']} != {ref_key}: {ref['q1']['result']}")
            for name in QUERIES:
                if "unstable" in r[name]:
                    mismatches.append(
                        f"{key}/{name}: runs differ: {r[name]['result']} then {r[name]['unstable']}"
                    )
            if sum(row[-1] for row in r["q1"]["result"]) != expected[ref_key]:
                mismatches.append(
                    f"{key}/q1: count_order sums to {sum(row[-1] for row in r['q1']['result'])}"
                )
        # Trino reads the rows the delete left: against Spark's plain read of them
        for key, r in trino_results.items():
            if "error" in r:
                mismatches.append(f"{key}/{r['error_query']}: Trino failed on {r['table']}: {r['error']}")
            want = results["plain_90"]
            if "result" in r["count"] and r["count"]["result"] != expected["plain_90"]:
                mismatches.append(
                    f"{key}/count: {r['count']['result']:,} rows, expected {expected['plain_90']:,}"
                )
            if "result" in r["q1"]:
                diff = q1_difference(r["q1"]["result"], want["q1"]["result"])
                if diff is not None:
                    mismatches.append(
                        f"{key}/q1: {diff}; Trino {r['q1']['result']} != plain_90: {want['q1']['result']}"
                    )
            for name in QUERIES:
                if "unstable" in r[name]:
                    mismatches.append(
                        f"{key}/{name}: runs differ: {r[name]['result']} then {r[name]['unstable']}"
                    )
        keep_trino_log = any(m.startswith("trino_") for m in mismatches)
        if trino is not None:
            trino_info.update(variants=trino_results, peak_rss_mb=peak_rss_mb(trino.proc.pid))

        res = {
            "scale": scale,
            "repeat": repeat,
            "rows": rows,
            "deleted": deleted,
            "parquet_bytes": parquet.stat().st_size,
            "generate_s": gen_s,
            "spark_memory": args.spark_memory,
            "snapshot_before_delete": acid["snapshot_before_delete"],
            "snapshot_after_delete": acid["snapshot_after_delete"],
            "build": {
                "built_now": built_now,
                "built_at": manifest["built_at"],
                "acid": acid,
                "plain": manifest["plain"],
            },
            "variants": results,
            "trino": trino_info,
            "memory": {
                "python_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "jvm_peak_rss_mb": mem.rss_peak_mb(),
                "jvm_max_heap_mb": mem.max_heap_mb(),
            },
        }
    finally:
        if trino is not None:
            trino.stop()
            if keep_trino_log:
                say(f"Trino's log kept: {trino.log}")
            else:
                shutil.rmtree(trino.base, ignore_errors=True)
        if spark is not None:
            acid_mod.commit(spark)
            spark.stop()
        ms.stop()

    console.print()
    render(
        console,
        res,
        mismatches,
        f"ACID read vs plain ORC: TPC-H lineitem sf{scale:g}, {rows:,} rows, {MASTER}; best of {repeat} after "
        "1 warm-up; plain/ACID = plain time / ACID time (1 = as fast)"
        + (
            "; hive/native = time with spark.sql.orc.impl=hive / time with Spark's native ORC reader "
            "(>1 = the hive reader is slower)"
            if not args.no_hive_impl
            else ""
        )
        + (
            "; Trino/hivemesh = Trino time / read_acid time, 10% deleted (>1 = hivemesh is faster); "
            "Trino plain/ACID = Trino's plain time / its ACID time"
            if res["trino"].get("variants")
            else ""
        ),
    )
    if mismatches:
        console.print(
            "[bold red]RESULTS DIFFER: the ACID reads (or Trino's) did not return the plain table's rows"
            "[/bold red]"
        )
        for m in mismatches:
            console.print(f"[red]  {escape(m)}[/red]", markup=True)
    runner.print_total(console, t_start)
    if args.json_out:
        if res["trino"].get("variants"):
            res["trino"]["ratios"] = trino_ratios(res)
        for r in [*res["variants"].values(), *res["trino"].get("variants", {}).values()]:
            if "result" in r["q1"]:
                r["q1"]["result"] = [[str(x) for x in row] for row in r["q1"]["result"]]
            if "unstable" in r["q1"]:
                r["q1"]["unstable"] = [[str(x) for x in row] for row in r["q1"]["unstable"]]
        args.json_out.write_text(json.dumps(res, indent=2), encoding="utf-8")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
