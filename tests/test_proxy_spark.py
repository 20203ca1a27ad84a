"""End to end: Spark through ``hivemesh proxy`` in front of real metastores.

The mesh (``tests/support/federation.py``), started once for the module:

* ``primary``: a hivemesh metastore subprocess (SQLite);
* ``hms23``: the real Apache HMS 2.3.10 (Java, from the PySpark wheel), holding database ``tpch``
  with the TPC-H tables of :data:`HMS23_TABLES` as EXTERNAL Parquet tables (registered over
  Thrift on copies of the generated files);
* ``eu``: a second hivemesh metastore with database ``tpch_eu`` (every TPC-H table but
  ``partsupp``, Parquet, ``orders``/``lineitem`` partitioned by year) and ``eu_private``;
* proxy ``prefixed`` (PREFIXED): primary + ``hms23`` (prefix ``hms23_``, read_only) + ``eu``
  (prefix ``eu_``, read_only);
* proxy ``manual`` (MANUAL): primary + ``eu`` owning ``tpch_eu`` only, with ``mapped_tables``
  exposing ``orders`` and ``line.*``.

Spark talks to one proxy at a time (:class:`~tests.support.federation.SparkSwitch`); the suite's
shared SparkSession is stopped for that, so these tests are marked ``proxy_spark`` and run last
(``tests/conftest.py``). Query results are compared with the same query over the generated files
read without any metastore (the quickstart's file views and comparison).
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from hive_metastore.ttypes import LockState, LockType, TxnState

from hivemesh.acid.files import write_bucket_file
from hivemesh.acid.names import base_dir_name, encode_bucket_property
from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.access import is_write
from hivemesh.quickstart.compare import first_difference
from hivemesh.quickstart.load import create_database, load_table, register_file_views
from hivemesh.quickstart.queries import QUERIES, Query
from hivemesh.quickstart.tpch import TABLES, generate, row_count, scale_dir
from hivemesh.spark import acid_session
from hivemesh.storage import resolve_location
from tests.support import federation as fed
from tests.support.javahms import JAVA_SKIP_REASON, java_available

pytestmark = [
    pytest.mark.spark,
    pytest.mark.javahms,
    pytest.mark.proxy_spark,
    pytest.mark.skipif(not java_available(), reason=JAVA_SKIP_REASON + " (and Spark needs Java)"),
]

SCALE = 0.01
PRIMARY_TABLES = ("orders", "lineitem")  # created and loaded by Spark through the proxy
HMS23_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp")  # EXTERNAL Parquet
EU_TABLES = ("customer", "part", "supplier", "orders", "lineitem")  # tpch_eu on the eu member
EU_VISIBLE = ("lineitem", "orders")  # what mapped_tables {tpch_eu: [orders, line.*]} exposes
HQ_TABLES = ("region", "nation", "customer", "part")  # tpch_hq on the primary (MANUAL joins)


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def tpch_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TPC-H sf0.01 Parquet files, generated with the quickstart's tpchgen-cli helper."""
    return generate(SCALE, scale_dir(tmp_path_factory.mktemp("proxy-tpch"), SCALE)).directory


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, tpch_files: Path) -> Iterator[SimpleNamespace]:
    """The metastores and both proxies (see the module doc). The Java HMS is still starting when
    this returns (its port is known): fixture ``hms23_tpch`` waits for it."""
    base = tmp_path_factory.mktemp("proxy-mesh")
    m = fed.Mesh(base)
    try:
        hms23 = m.adopt(fed.BackgroundJavaHMS(base / "hms23", log_level="WARN")).start()
        primary = m.metastore("primary")
        eu = m.metastore("eu")
        data = base / "external"
        with fed.thrift(eu) as c:
            fed.create_database(c, "tpch_eu", data / "eu" / "tpch_eu")
            fed.create_database(c, "eu_private", data / "eu" / "eu_private")
            for t in EU_TABLES:
                fed.register_parquet_table(c, "tpch_eu", t, tpch_files, data / "eu")
        with fed.thrift(primary) as c:
            fed.create_database(c, "tpch_hq", data / "primary" / "tpch_hq")
            for t in HQ_TABLES:
                fed.register_parquet_table(c, "tpch_hq", t, tpch_files, data / "primary")
        primary_cfg = {
            "name": "primary",
            "uris": [primary.uri],
            "access_control": "read_and_write_and_create",
        }
        prefixed = m.proxy(
            "prefixed",
            "prefixed",
            primary_cfg,
            [
                {
                    "name": "hms23",
                    "uris": [hms23.uri],
                    "database_prefix": "hms23_",
                    "access_control": "read_only",
                },
                {"name": "eu", "uris": [eu.uri], "database_prefix": "eu_", "access_control": "read_only"},
            ],
        )
        manual = m.proxy(
            "manual",
            "manual",
            primary_cfg,
            [
                {
                    "name": "eu",
                    "uris": [eu.uri],
                    "access_control": "read_only",
                    "mapped_databases": ["tpch_eu"],
                    "mapped_tables": {"tpch_eu": ["orders", "line.*"]},
                }
            ],
        )
        yield SimpleNamespace(
            mesh=m, primary=primary, eu=eu, hms23=hms23, prefixed=prefixed, manual=manual, data=data
        )
    finally:
        m.close()


@pytest.fixture(scope="module")
def hms23_tpch(mesh: SimpleNamespace, tpch_files: Path) -> list[str]:
    """``tpch`` on the Java HMS: :data:`HMS23_TABLES` as EXTERNAL Parquet tables, registered with a
    plain Thrift client once the JVM answers; returns when the PREFIXED proxy sees it available."""
    mesh.hms23.wait()
    with fed.thrift(mesh.hms23) as c:
        fed.create_database(c, "tpch", mesh.data / "hms23" / "tpch")
        for t in HMS23_TABLES:
            fed.register_parquet_table(c, "tpch", t, tpch_files, mesh.data / "hms23")
    mesh.mesh.wait_available("prefixed", "hms23")
    return list(HMS23_TABLES)


@pytest.fixture(scope="module")
def sparks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fed.SparkSwitch]:
    """The module's SparkSession, bound to one proxy at a time; stopped at the end."""
    switch = fed.SparkSwitch(tmp_path_factory.mktemp("proxy-spark-logs"))
    try:
        yield switch
    finally:
        switch.stop()


def prefixed_spark(mesh: SimpleNamespace, sparks: fed.SparkSwitch) -> Any:
    return sparks.bind(mesh.prefixed.uri, mesh.primary.warehouse)


@pytest.fixture(scope="module")
def primary_tpch(mesh: SimpleNamespace, sparks: fed.SparkSwitch, tpch_files: Path) -> list[Any]:
    """``tpch`` on the primary: :data:`PRIMARY_TABLES` created and loaded by Spark through the
    PREFIXED proxy with the quickstart's loader (ORC, ``orders``/``lineitem`` partitioned)."""
    spark = prefixed_spark(mesh, sparks)
    create_database(spark, "tpch")
    return [load_table(spark, tpch_files, "tpch", t) for t in PRIMARY_TABLES]


# ------------------------------------------------------------------------------------ helpers


def tables_of(query: Query) -> set[str]:
    """The TPC-H tables a quickstart query reads (its ``{table}`` placeholders)."""
    return {t for t in TABLES if "{" + t + "}" in query.sql}


class FileResults:
    """Results of the quickstart queries over the TPC-H files read without any metastore (the
    quickstart's temporary views), computed once per query for the module (the data is the same
    whichever proxy the tables are read through)."""

    def __init__(self, files_dir: Path):
        self.files_dir = files_dir
        self.rows: dict[str, list[tuple[Any, ...]]] = {}

    def compute(self, spark: Any, queries: list[Query]) -> None:
        missing = [q for q in queries if q.name not in self.rows]
        if not missing:
            return
        views = register_file_views(spark, self.files_dir)
        try:
            for q in missing:
                self.rows[q.name] = [tuple(r) for r in spark.sql(q.render(views)).collect()]
        finally:
            for v in views.values():
                spark.catalog.dropTempView(v)


@pytest.fixture(scope="module")
def file_results(tpch_files: Path) -> FileResults:
    return FileResults(tpch_files)


def compare(spark: Any, queries: list[Query], tables: dict[str, str], files: FileResults) -> dict[str, Any]:
    """Run each query on ``tables`` (name -> ``db.table``, through the proxy) and compare with its
    result over the files: query name -> (rows through the proxy, first difference or None)."""
    files.compute(spark, queries)
    out = {}
    for q in queries:
        through_proxy = [tuple(r) for r in spark.sql(q.render(tables)).collect()]
        out[q.name] = (len(through_proxy), first_difference(through_proxy, files.rows[q.name]))
    return out


def spark_error(fn: Any) -> str:
    """The text of the error ``fn()`` raises (fails the test when it does not raise). PySpark's
    log line of every failing statement (with the Java stack) is muted: these errors are expected."""
    from pyspark.logger import PySparkLogger

    error_log = PySparkLogger.getLogger("SQLQueryContextLogger")
    level = error_log.level
    error_log.setLevel(logging.CRITICAL)
    try:
        with pytest.raises(Exception) as info:  # noqa: B017 - Spark wraps the metastore's MetaException
            fn()
    finally:
        error_log.setLevel(level)
    return str(info.value)


def column(spark: Any, sql: str, i: int = 0) -> list[Any]:
    return [r[i] for r in spark.sql(sql).collect()]


# ------------------------------------------------------------------------------------ PREFIXED


def test_prefixed_tpch_queries_span_hivemesh_and_the_java_hms(
    mesh: SimpleNamespace,
    sparks: fed.SparkSwitch,
    primary_tpch: list[Any],
    hms23_tpch: list[str],
    tpch_files: Path,
    file_results: FileResults,
) -> None:
    """Spark -> PREFIXED proxy: ``tpch.*`` on the primary (hivemesh, loaded through the proxy),
    ``hms23_tpch.*`` on the Java HMS 2.3.10; the quickstart queries joining both match the files."""
    spark = prefixed_spark(mesh, sparks)
    assert [r.rows for r in primary_tpch] == [row_count(tpch_files, t) for t in PRIMARY_TABLES]
    # Spark's CREATE DATABASE / CREATE TABLE / INSERT went to the primary, and only there
    with fed.thrift(mesh.primary) as c:
        assert sorted(c.get_all_tables("tpch")) == sorted(PRIMARY_TABLES)
        assert len(c.get_partition_names("tpch", "lineitem", -1)) == 7  # l_year 1992..1998
    with fed.thrift(mesh.hms23) as c:
        assert sorted(c.get_all_databases()) == ["default", "tpch"]
        assert sorted(c.get_all_tables("tpch")) == sorted(HMS23_TABLES)

    databases = set(column(spark, "SHOW DATABASES"))
    assert {"default", "tpch", "tpch_hq", "hms23_default", "hms23_tpch", "eu_tpch_eu"} <= databases
    assert "tpch_eu" not in databases  # the eu member's names always carry its prefix
    assert sorted(column(spark, "SHOW TABLES IN hms23_tpch", 1)) == sorted(HMS23_TABLES)
    assert spark.table("hms23_tpch.customer").count() == row_count(tpch_files, "customer")

    tables = {t: f"tpch.{t}" for t in PRIMARY_TABLES} | {t: f"hms23_tpch.{t}" for t in HMS23_TABLES}
    spanning = [q for q in QUERIES if tables_of(q) & set(PRIMARY_TABLES) and tables_of(q) & set(HMS23_TABLES)]
    assert len(spanning) >= 4, [q.name for q in spanning]  # each joins tables of both metastores
    results = compare(spark, spanning, tables, file_results)
    assert {name: diff for name, (_, diff) in results.items() if diff} == {}
    assert all(rows > 0 for rows, _ in results.values()), results


def test_prefixed_writes_reach_the_primary_and_never_the_read_only_java_hms(
    mesh: SimpleNamespace, sparks: fed.SparkSwitch, hms23_tpch: list[str], tpch_files: Path
) -> None:
    """CREATE DATABASE/TABLE, INSERT and CTAS (reading the Java HMS) land on the primary; DDL on
    ``hms23_*`` is refused by the proxy naming the member and read_only; the Java HMS is untouched."""
    spark = prefixed_spark(mesh, sparks)
    with fed.thrift(mesh.hms23) as c:
        before_tables = sorted(c.get_all_tables("tpch"))
        before_params = dict(c.get_table("tpch", "customer").parameters)
    hms23_dir = mesh.data / "hms23" / "tpch"
    before_files = sorted(p.relative_to(hms23_dir) for p in hms23_dir.rglob("*"))

    spark.sql("CREATE DATABASE hq_writes")
    spark.sql("CREATE TABLE hq_writes.notes (id INT, note STRING) STORED AS ORC")
    spark.sql("INSERT INTO hq_writes.notes VALUES (1, 'one'), (2, 'two')")
    spark.sql("INSERT INTO hq_writes.notes VALUES (3, 'three')")
    assert sorted(tuple(r) for r in spark.table("hq_writes.notes").collect()) == [
        (1, "one"),
        (2, "two"),
        (3, "three"),
    ]
    spark.sql(
        "CREATE TABLE hq_writes.segments STORED AS PARQUET AS "
        "SELECT c_mktsegment, count(*) AS customers FROM hms23_tpch.customer GROUP BY c_mktsegment"
    )
    expected = [
        tuple(r)
        for r in spark.read.parquet(str(tpch_files / "customer.parquet"))
        .groupBy("c_mktsegment")
        .count()
        .collect()
    ]
    segments = [tuple(r) for r in spark.table("hq_writes.segments").collect()]
    assert first_difference(segments, expected) is None and len(segments) == 5
    with fed.thrift(mesh.primary) as c:
        assert sorted(c.get_all_tables("hq_writes")) == ["notes", "segments"]

    refused = {
        "create table": lambda: spark.sql("CREATE TABLE hms23_tpch.t (id INT) STORED AS PARQUET"),
        "ctas": lambda: spark.sql("CREATE TABLE hms23_tpch.t2 STORED AS PARQUET AS SELECT 1 AS id"),
        "drop table": lambda: spark.sql("DROP TABLE hms23_tpch.part"),
        "alter properties": lambda: spark.sql(
            "ALTER TABLE hms23_tpch.customer SET TBLPROPERTIES ('note' = 'changed')"
        ),
        "alter rename": lambda: spark.sql("ALTER TABLE hms23_tpch.supplier RENAME TO hms23_tpch.suppliers"),
        "alter add columns": lambda: spark.sql("ALTER TABLE hms23_tpch.customer ADD COLUMNS (extra INT)"),
        "create database": lambda: spark.sql("CREATE DATABASE hms23_newdb"),
    }
    for what, statement in refused.items():
        message = spark_error(statement)
        assert "'hms23'" in message and "read_only" in message, (what, message[:600])
        assert re.search(r"hivemesh proxy: \w+", message), (what, message[:600])

    with fed.thrift(mesh.hms23) as c:
        assert sorted(c.get_all_databases()) == ["default", "tpch"]
        assert sorted(c.get_all_tables("tpch")) == before_tables == sorted(HMS23_TABLES)
        customer = c.get_table("tpch", "customer")
        assert customer.parameters == before_params
        assert [f.name for f in customer.sd.cols][-1] == "c_comment"
    assert sorted(p.relative_to(hms23_dir) for p in hms23_dir.rglob("*")) == before_files
    # the proxy refused before forwarding: no metadata-changing call was ever sent to hms23
    sent = {method for (member, method) in fed.member_calls(mesh.prefixed) if member == "hms23"}
    assert sent and not {m for m in sent if is_write(m)}, sorted(sent)
    assert spark.table("hms23_tpch.part").count() == row_count(tpch_files, "part")


# ------------------------------------------------------------------------------------ ACID

ACID_COLS = [("id", "int"), ("v", "string")]


@pytest.fixture(scope="module")
def acid_db(mesh: SimpleNamespace) -> str:
    """Database ``acid_eu`` on the eu member (``eu_acid_eu`` through the PREFIXED proxy)."""
    with fed.thrift(mesh.eu) as c:
        fed.create_database(c, "acid_eu", mesh.data / "eu" / "acid_eu")
    return "acid_eu"


def open_txn_ids(client: MetastoreClient) -> dict[int, Any]:
    """Txn id -> TxnInfo of every open or aborted txn (``get_open_txns_info`` lists READ_ONLY too)."""
    return {i.id: i for i in client.raw.get_open_txns_info().open_txns}


def test_acid_read_of_a_federated_member_runs_under_the_members_txn(
    mesh: SimpleNamespace, sparks: fed.SparkSwitch, acid_db: str
) -> None:
    """A transactional table on the ``eu`` member, written directly (3 commits, a delete, and an
    open txn whose rows must stay invisible), read with ``acid_session`` through the PREFIXED proxy
    as ``eu_acid_eu.events``: exactly the committed rows; meanwhile the MEMBER holds a txn and a
    SHARED_READ lock for the reader (Waggle Dance #111), both gone when the session ends."""
    with MetastoreClient(mesh.eu.uri) as member, MetastoreClient(mesh.primary.uri) as primary:
        create_transactional_table(member, acid_db, "events", ACID_COLS)
        w = AcidWriter(member, acid_db, "events")
        r1 = w.insert([(1, "a"), (2, "b"), (3, "c")])
        w.insert([(4, "d")])
        w.insert([(5, "e"), (6, "f")])
        assert w.delete([(r1.write_id, encode_bucket_property(0, r1.statement_id), 1)]).deleted == 1
        pending = member.open_txn()  # a writer still running on the member
        w.insert([(99, "uncommitted")], txn_id=pending)
        expected = [(1, "a"), (3, "c"), (4, "d"), (5, "e"), (6, "f")]

        spark = prefixed_spark(mesh, sparks)
        with acid_session(spark) as s:
            rows = sorted(tuple(r) for r in s.read(f"eu_{acid_db}.events").collect())
            assert rows == expected
            txn = s.txn_id
            assert txn is not None
            locks = [(lk.type, lk.state, lk.tablename, lk.txnid) for lk in member.show_locks(acid_db)]
            readers = [lk for lk in locks if lk[3] != pending]
            assert len(readers) == 1, locks
            member_txn = readers[0][3]
            assert readers[0][:3] == (LockType.SHARED_READ, LockState.ACQUIRED, "events")
            info = open_txn_ids(member)
            assert member_txn in info, (member_txn, sorted(info))
            assert info[member_txn].state == TxnState.OPEN
            assert info[member_txn].agentInfo == f"hivemesh proxy txn {txn}"  # paired with the client's
            assert primary.show_locks() == []  # the lock is on the member, not on the primary
            assert open_txn_ids(primary)[txn].state == TxnState.OPEN
        assert [lk.txnid for lk in member.show_locks(acid_db)] == [pending]
        assert member_txn not in open_txn_ids(member)
        assert member.valid_txn_list().is_txn_valid(member_txn)  # committed with the session
        assert txn not in open_txn_ids(primary)
        assert primary.valid_txn_list().is_txn_valid(txn)
        member.abort_txn(pending)
        assert member.show_locks(acid_db) == []


# ------------------------------------------------------------------------------------ MANUAL


def test_manual_mapped_tables_hide_the_rest_and_joins_match(
    mesh: SimpleNamespace, sparks: fed.SparkSwitch, tpch_files: Path, file_results: FileResults
) -> None:
    """Spark -> MANUAL proxy: ``tpch_eu`` belongs to the eu member and shows only ``orders`` and
    ``lineitem``; its other tables are not found; joins of primary tables with them match the files."""
    spark = sparks.bind(mesh.manual.uri, mesh.primary.warehouse)
    databases = set(column(spark, "SHOW DATABASES"))
    assert {"default", "tpch_hq", "tpch_eu"} <= databases
    assert "eu_private" not in databases  # on eu but not in its mapped_databases
    assert not any(d.startswith(("eu_", "hms23_")) for d in databases)
    assert sorted(column(spark, "SHOW TABLES IN tpch_eu", 1)) == sorted(EU_VISIBLE)
    with fed.thrift(mesh.eu) as c:  # the hidden tables are there, on the member
        assert sorted(c.get_all_tables("tpch_eu")) == sorted(EU_TABLES)
    for hidden in sorted(set(EU_TABLES) - set(EU_VISIBLE)):
        assert not spark.catalog.tableExists(f"tpch_eu.{hidden}")
        message = spark_error(lambda h=hidden: spark.sql(f"SELECT count(*) FROM tpch_eu.{h}").collect())
        assert "TABLE_OR_VIEW_NOT_FOUND" in message, message[:600]
    assert spark.table("tpch_eu.orders").count() == row_count(tpch_files, "orders")

    tables = {t: f"tpch_hq.{t}" for t in HQ_TABLES} | {t: f"tpch_eu.{t}" for t in EU_VISIBLE}
    spanning = [
        q
        for q in QUERIES
        if tables_of(q) <= set(tables) and tables_of(q) & set(HQ_TABLES) and tables_of(q) & set(EU_VISIBLE)
    ]
    assert len(spanning) >= 3, [q.name for q in spanning]
    results = compare(spark, spanning, tables, file_results)
    assert {name: diff for name, (_, diff) in results.items() if diff} == {}
    assert all(rows > 0 for rows, _ in results.values()), results


# ------------------------------------------------------------------------------------ compacted base


def test_acid_read_through_the_proxy_uses_a_members_compacted_base(
    mesh: SimpleNamespace, sparks: fed.SparkSwitch, acid_db: str
) -> None:
    """After a major compaction on the member (``base_<w>_v<member txn>``, old deltas cleaned), an
    ACID read through the proxy must read that base, as a read on the member itself does.

    The ``_v<txn>`` suffix is a txn id of the MEMBER, while the reader's ValidTxnList comes from
    ``get_open_txns`` on the proxy, i.e. the primary's txns. The proxy therefore sends the member's
    own ValidTxnList along with that table's write ids (``TableValidWriteIds`` field 50) and the
    reader judges the table's directories with it."""
    with MetastoreClient(mesh.eu.uri) as member, MetastoreClient(mesh.primary.uri) as primary:
        table = create_transactional_table(member, acid_db, "compacted", ACID_COLS)
        w = AcidWriter(member, acid_db, "compacted")
        r1 = w.insert([(1, "a"), (2, "b")])
        w.insert([(3, "c")])
        w.insert([(4, "d")])
        r4 = w.delete([(r1.write_id, encode_bucket_property(0, r1.statement_id), 1)])
        expected = [(1, "a"), (3, "c"), (4, "d")]

        # the member's compactor: its txn id is well above anything the primary has handed out
        while True:
            compactor = member.open_txn()
            if compactor > primary.get_open_txns().txn_high_water_mark + 5:
                break
            member.commit_txn(compactor)
        location = Path(resolve_location(table.sd.location)[1])
        base = location / base_dir_name(r4.write_id, compactor)
        write_bucket_file(
            str(base), ACID_COLS, 0, 0, r4.write_id, pa.table({"id": [1, 3, 4], "v": ["a", "c", "d"]})
        )
        member.commit_txn(compactor)
        for d in location.iterdir():  # the cleaner: the deltas the base replaces are gone
            if d.name.startswith(("delta_", "delete_delta_")):
                shutil.rmtree(d)
        assert sorted(p.name for p in location.iterdir()) == [base.name]

        # whichever proxy the module's session is bound to: the reads name their metastore
        spark = sparks.session or prefixed_spark(mesh, sparks)
        with acid_session(spark, mesh.eu.uri) as direct:  # on the member itself: the base is read
            assert sorted(tuple(r) for r in direct.read(f"{acid_db}.compacted").collect()) == expected
        with acid_session(spark, mesh.prefixed.uri) as s:
            rows = sorted(tuple(r) for r in s.read(f"eu_{acid_db}.compacted").collect())
            vtl = s.valid_txn_list
        assert rows == expected, (
            f"read_acid through the proxy of a member's table returned {rows}, expected {expected}: "
            f"the compacted directory {base.name} carries the member's txn {compactor}, which the "
            f"primary's ValidTxnList ({vtl}) does not show as committed"
        )
