"""``hivemesh quickstart``: TPC-H through Spark on a hivemesh metastore, checked against the files.

Steps: generate TPC-H Parquet files (:mod:`.tpch`), load them into Hive ORC tables through the
metastore (:mod:`.load`), run analytical queries on the tables and on the files directly and compare
(:mod:`.queries`, :mod:`.compare`), print the results (:mod:`.report`). The core steps take an
existing SparkSession, so tests and other jobs can run them on their own session::

    load_tpch(spark, files_dir, "tpch")
    results = run_queries(spark, "tpch", files_dir)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hivemesh.quickstart.embedded import EmbeddedKind, embedded_metastore
from hivemesh.quickstart.load import LoadResult, create_database, load_table, load_tpch, register_file_views
from hivemesh.quickstart.queries import QUERIES, Query, QueryResult, run_queries, run_query
from hivemesh.quickstart.report import print_failure, print_results, step_progress
from hivemesh.quickstart.session import quickstart_session
from hivemesh.quickstart.tpch import TABLES, GenerateResult, generate, scale_dir

__all__ = [
    "DATABASE",
    "QUERIES",
    "GenerateResult",
    "LoadResult",
    "Query",
    "QueryResult",
    "generate",
    "load_tpch",
    "run",
    "run_queries",
]

log = logging.getLogger(__name__)

#: The database the quickstart loads TPC-H into.
DATABASE = "tpch"


def run(
    metastore_uri: str | None,
    scale: float,
    data_dir: Path,
    *,
    embedded: EmbeddedKind = "hivemesh",
    console: Console | None = None,
) -> int:
    """Run the quickstart; return 0 when every query matches the files, 1 otherwise.

    ``metastore_uri``: a ``thrift://host:port`` metastore to use; None starts an embedded one
    (``embedded="hivemesh"``: hivemesh on SQLite in ``data_dir/metastore.db``; ``"derby"``: Spark's
    own Derby catalog, for development). ``scale``: TPC-H scale factor. ``data_dir``: holds the
    embedded metastore, the warehouse (``data_dir/warehouse``) and the files (``data_dir/tpch``).
    A second run reuses the generated files and the loaded tables. Failures are logged and
    printed, and give 1. Creates and stops its own SparkSession: call it in a process without one
    (a job with its own session runs :func:`load_tpch` and :func:`run_queries` instead).
    """
    console = console or Console()
    data_dir = Path(data_dir).resolve()
    files_dir = scale_dir(data_dir, scale)
    started = time.perf_counter()
    loads: list[LoadResult] = []
    results: list[QueryResult] = []
    with ExitStack() as stack:
        progress = stack.enter_context(step_progress(console))
        task = progress.add_task("starting", total=1 + len(TABLES) + len(QUERIES))
        try:
            progress.update(task, description=f"generating TPC-H sf{scale:g}")
            gen = generate(scale, files_dir)
            progress.advance(task)

            progress.update(task, description="starting the metastore and Spark")
            uri = metastore_uri
            if uri is None:
                uri = stack.enter_context(embedded_metastore(data_dir, embedded))
            spark = quickstart_session(uri, data_dir)
            stack.callback(spark.stop)  # before the embedded metastore stops

            create_database(spark, DATABASE)
            for table in TABLES:
                progress.update(task, description=f"loading {DATABASE}.{table}")
                loads.append(load_table(spark, files_dir, DATABASE, table))
                progress.advance(task)

            views = register_file_views(spark, files_dir)
            for query in QUERIES:
                progress.update(task, description=f"query {query.name}")
                results.append(run_query(spark, query, DATABASE, views))
                progress.advance(task)
            progress.update(task, description="done")
        except Exception as e:
            print_failure(console, progress, "quickstart", e)
            return 1
    elapsed = time.perf_counter() - started
    _print_summary(console, gen, loads, results, uri, elapsed)
    matched = sum(r.match for r in results)
    log.info("quickstart finished in %.1f s: %d/%d queries match", elapsed, matched, len(results))
    return 0 if matched == len(results) else 1


def _print_summary(
    console: Console,
    gen: GenerateResult,
    loads: Sequence[LoadResult],
    results: Sequence[QueryResult],
    uri: str | None,
    elapsed: float,
) -> None:
    files = f"generated in {gen.seconds:.1f} s" if gen.generated else "reused"
    loaded = [x for x in loads if x.loaded]
    tables = f"{len(loaded)} loaded in {sum(x.seconds for x in loaded):.1f} s" if loaded else "all reused"
    if 0 < len(loaded) < len(loads):
        tables += f", {len(loads) - len(loaded)} reused"
    console.print(
        f"TPC-H files {escape(str(gen.directory))}: {files}; tables {DATABASE}.*: {tables}; "
        f"metastore {escape(uri or 'embedded Derby')}",
        highlight=False,
    )
    print_results(console, results, title=f"metastore tables vs Parquet files, {elapsed:.0f} s")
