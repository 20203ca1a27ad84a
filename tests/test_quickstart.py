"""The quickstart: TPC-H generation, loading into Hive ORC tables, queries checked against the files.

The Spark tests use the suite's shared SparkSession (fixture ``spark`` from tests/spark_fixtures.py,
a hivemesh metastore on SQLite and on PostgreSQL), and TPC-H at scale 0.01.
"""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from hivemesh.quickstart import compare, tpch
from hivemesh.quickstart.queries import QUERIES, Query, run_query
from hivemesh.quickstart.tpch import TABLES, generate

SCALE = 0.01


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def tpch_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TPC-H sf0.01 as Parquet, generated once per test session."""
    return generate(SCALE, tpch.scale_dir(tmp_path_factory.mktemp("quickstart"), SCALE)).directory


@pytest.fixture(scope="session")
def tpch_db(spark, tpch_files: Path) -> str:
    """A database of the shared metastore holding TPC-H sf0.01, loaded once by ``load_tpch``."""
    from hivemesh.quickstart import load_tpch

    database = "tpch_" + uuid.uuid4().hex[:8]
    results = load_tpch(spark, tpch_files, database)
    assert [r.table for r in results] == list(TABLES)
    assert all(r.loaded for r in results)
    return database


# --------------------------------------------------------------------------- generation


def test_generate_writes_every_table_then_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files_dir = tpch.scale_dir(tmp_path, SCALE)
    assert files_dir == tmp_path / "tpch" / "sf0.01"

    first = generate(SCALE, files_dir)
    assert first.generated
    assert tpch.is_complete(files_dir)
    assert tpch.row_count(files_dir, "nation") == 25
    assert tpch.row_count(files_dir, "lineitem") > 50_000
    assert sorted(p.name for p in tmp_path.joinpath("tpch").iterdir()) == ["sf0.01"]  # no temp dir left
    mtimes = {p.name: p.stat().st_mtime_ns for p in files_dir.iterdir()}

    def no_generator(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"tpchgen-cli ran again: {args}")

    monkeypatch.setattr(tpch.subprocess, "run", no_generator)
    second = generate(SCALE, files_dir)
    assert not second.generated
    assert second.directory == files_dir
    assert {p.name: p.stat().st_mtime_ns for p in files_dir.iterdir()} == mtimes


def test_generate_replaces_an_incomplete_directory(tmp_path: Path) -> None:
    files_dir = tpch.scale_dir(tmp_path, SCALE)
    files_dir.mkdir(parents=True)
    (files_dir / "region.parquet").write_bytes(b"truncated")
    result = generate(SCALE, files_dir, threads=1)
    assert result.generated
    assert tpch.row_count(files_dir, "region") == 5


def test_generate_reports_a_failing_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(tpch.GenerationError, match="positive"):
        generate(-1, tmp_path / "bad")
    monkeypatch.setattr(tpch, "tpchgen_executable", lambda: "false")
    with pytest.raises(tpch.GenerationError, match="exited with 1"):
        generate(SCALE, tmp_path / "failed")
    assert not (tmp_path / "failed").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary directory left behind


# --------------------------------------------------------------------------- comparison


def test_rows_match_ignores_order_and_tiny_float_differences() -> None:
    left = [("b", 2, 1.0000000000001), ("a", 1, None), ("c", Decimal("1.50"), date(1995, 1, 1))]
    right = [("a", 1, None), ("c", Decimal("1.5"), date(1995, 1, 1)), ("b", 2, 1.0)]
    assert compare.rows_match(left, right)
    assert compare.first_difference(left, right) is None


def test_rows_match_detects_differences() -> None:
    assert not compare.rows_match([("a", 1.0)], [("a", 1.001)])
    assert not compare.rows_match([("a", Decimal("1.00"))], [("a", Decimal("1.01"))])
    assert not compare.rows_match([("a", 1)], [("a", 1), ("a", 1)])
    assert not compare.rows_match([("a", None)], [("a", 0.0)])
    assert compare.rows_match([(math.nan,)], [(math.nan,)])
    assert "2 rows" in (compare.first_difference([(1,), (2,)], [(1,)]) or "")
    assert "column 1" in (compare.first_difference([("x", 1)], [("x", 2)]) or "")


def test_queries_are_named_and_render_for_both_sides() -> None:
    names = [q.name for q in QUERIES]
    assert len(names) == len(set(names)) >= 8
    for q in QUERIES:
        sql = q.render({t: f"db.{t}" for t in TABLES})
        assert "{" not in sql and "db." in sql, q.name
    for column in ("l_year", "o_year"):
        pattern = rf"(WHERE|AND)\s+(\w+\.)?{column}\b"
        assert any(re.search(pattern, q.sql) for q in QUERIES), f"no query filters on {column}"


def test_results_are_printed_with_marks() -> None:
    from rich.console import Console

    from hivemesh.quickstart.queries import QueryResult
    from hivemesh.quickstart.report import print_results

    console = Console(file=io.StringIO(), width=120, color_system=None)
    print_results(
        console,
        [
            QueryResult("good", 4, 0.5, 0.4, True),
            QueryResult("bad", 3, 0.25, 0.2, False, "row 0 column 1: [1] vs [2]"),
        ],
    )
    out = console.file.getvalue()
    assert "good" in out and "✓" in out and "✗" in out and "0.25" in out
    assert "row 0 column 1: [1] vs [2]" in out  # not swallowed as markup
    assert "1/2 queries match" in out


def test_run_reports_a_failure_and_returns_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from hivemesh.quickstart import run

    monkeypatch.setattr(tpch, "tpchgen_executable", lambda: "false")
    console = Console(file=io.StringIO(), width=120, color_system=None)
    assert run(None, SCALE, tmp_path, console=console) == 1
    assert "quickstart failed: GenerationError: tpchgen-cli exited with 1" in console.file.getvalue()
    # not a terminal: each step is a line as it starts (rich's bar would print nothing meanwhile)
    assert re.search(r"^\[ +\d+s\] generating TPC-H sf0.01$", console.file.getvalue(), re.M)


# --------------------------------------------------------------------------- Spark: load and query


@pytest.mark.spark
def test_load_creates_partitioned_hive_orc_tables(
    spark, tpch_db: str, tpch_files: Path, spark_metastore
) -> None:
    from tests.support.servers import ThriftClient

    with ThriftClient(spark_metastore.host, spark_metastore.port) as hms:
        for table in TABLES:
            t = hms.get_table(tpch_db, table)
            assert t.tableType == "MANAGED_TABLE", table
            assert t.sd.serdeInfo.serializationLib == "org.apache.hadoop.hive.ql.io.orc.OrcSerde", table
            assert t.sd.inputFormat == "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat", table
            assert "spark.sql.sources.provider" not in (t.parameters or {}), f"{table} is a datasource table"
            expected_keys = [tpch.PARTITIONING[table][0]] if table in tpch.PARTITIONING else []
            assert [k.name for k in t.partitionKeys] == expected_keys, table
        names = hms.get_partition_names(tpch_db, "lineitem", -1)
        assert sorted(names) == [f"l_year={y}" for y in range(1992, 1999)]
        assert len(hms.get_partition_names(tpch_db, "orders", -1)) == 7

    for table in TABLES:
        assert spark.table(f"{tpch_db}.{table}").count() == tpch.row_count(tpch_files, table), table
    years = spark.sql(f"SELECT count(*) FROM {tpch_db}.lineitem WHERE l_year <> year(l_shipdate)").collect()[
        0
    ][0]
    assert years == 0


@pytest.mark.spark
def test_second_load_reuses_the_tables(spark, tpch_db: str, tpch_files: Path) -> None:
    from hivemesh.quickstart import load_tpch

    again = load_tpch(spark, tpch_files, tpch_db)
    assert [(r.table, r.loaded) for r in again] == [(t, False) for t in TABLES]
    assert {r.table: r.rows for r in again} == {t: tpch.row_count(tpch_files, t) for t in TABLES}


@pytest.mark.spark
def test_queries_on_metastore_tables_match_the_files(spark, tpch_db: str, tpch_files: Path) -> None:
    from hivemesh.quickstart import run_queries

    results = run_queries(spark, tpch_db, tpch_files)
    assert not [t for t in spark.catalog.listTables() if t.isTemporary]  # its file views are dropped
    assert [r.name for r in results] == [q.name for q in QUERIES]
    failed = {r.name: r.detail for r in results if not r.match}
    assert not failed
    assert all(r.rows > 0 for r in results), {r.name: r.rows for r in results}


@pytest.mark.spark
def test_a_differing_result_is_reported(spark, tpch_db: str, tpch_files: Path) -> None:
    from hivemesh.quickstart.load import register_file_views

    views = register_file_views(spark, tpch_files)
    spark.table(views["nation"]).where("n_nationkey <> 7").createOrReplaceTempView("tpch_files_nation_short")
    query = Query("nations", "every nation", "SELECT n_nationkey, n_name FROM {nation}")
    result = run_query(spark, query, tpch_db, {**views, "nation": "tpch_files_nation_short"})
    assert not result.match
    assert result.rows == 25
    assert "25 rows vs 24 rows" in (result.detail or "")

    broken = Query("broken", "a failing query", "SELECT no_such_column FROM {nation}")
    result = run_query(spark, broken, tpch_db, views)
    assert not result.match and "metastore tables" in (result.detail or "")
    for view in [*views.values(), "tpch_files_nation_short"]:  # leave the shared session clean
        spark.catalog.dropTempView(view)


# --------------------------------------------------------------------------- the command


@pytest.mark.spark
def test_quickstart_command_end_to_end(tmp_path: Path) -> None:
    """``hivemesh quickstart`` in its own process (its own JVM): embedded hivemesh metastore, exit 0.

    Reuse on a second run is covered above (generation and loading), so one run keeps this short.
    """
    cmd = [
        sys.executable,
        "-m",
        "hivemesh.cli",
        "quickstart",
        "--scale",
        str(SCALE),
        "--data-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(QUERIES)}/{len(QUERIES)} queries match" in proc.stdout
    assert "✗" not in proc.stdout
    assert "generated in" in proc.stdout and "8 loaded in" in proc.stdout
    assert (tmp_path / "metastore.db").is_file()
    assert (tmp_path / "warehouse" / "tpch.db" / "lineitem" / "l_year=1995").is_dir()
