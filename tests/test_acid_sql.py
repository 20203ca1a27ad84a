"""``AcidSession.sql`` (hivemesh.spark.acid_sql): Spark SQL whose transactional tables are read
through the ACID reader and whose other tables go through Spark's own catalog.

Real Spark (``spark`` fixture) on a real metastore (``spark_metastore``, SQLite and PostgreSQL);
transactional tables written with ``AcidWriter`` (deletes and updates included, so a plain Spark
read would be wrong); plain tables created with Spark SQL.

* the Spark Direct Reader article's ``emp_acid`` join ``dept_ext``, unchanged;
* CTEs, IN/EXISTS/scalar subqueries, qualified names, an unaliased table whose columns are
  qualified with its name, a self-join (one snapshot), TABLE and TABLESAMPLE;
* statements naming no transactional table run untouched (no txn), and temp views / CTEs named
  like a transactional table shadow it as in Spark;
* partition pruning: the metastore is asked with a filter (``get_partitions_by_filter``, counted)
  and a partition whose directory is broken (a file where the directory should be: listing it
  fails) is never listed; filters inferred through a join prune too;
* DML on a transactional table through SQL is refused; the temporary views do not outlive the call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hivemesh.acid.names import encode_bucket_property
from hivemesh.acid.tables import create_transactional_table
from hivemesh.acid.writer import AcidWriter
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid import AcidSession, acid_session
from hivemesh.spark.acid_sql import VIEW_PREFIX
from tests.support.acid import break_partition

pytestmark = pytest.mark.spark

B0 = encode_bucket_property(0)
EMP_COLS = [
    ("emp_id", "int"),
    ("first_name", "string"),
    ("e_mail", "string"),
    ("city", "string"),
    ("dept_id", "int"),
]
EMP_ROWS = [
    (677509, "Lois", "lois.walker@hotmail.com", "Denver", 4),
    (940761, "Brenda", "brenda.robinson@gmail.com", "Stonewall", 5),
    (428945, "Joe", "joe.robinson@gmail.com", "Michigantown", 3),
    (111111, "Gone", "gone@example.com", "Nowhere", 4),
]


@contextmanager
def current_database(spark: Any, db: str) -> Iterator[None]:
    """USE ``db`` for the block, then restore the session's current database."""
    before = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(db)
    try:
        yield
    finally:
        spark.catalog.setCurrentDatabase(before)


def make_emp(client: MetastoreClient, spark: Any, db: str) -> None:
    """``emp_acid`` (full ACID: an insert, a delete, an update) and ``dept_ext`` (Spark SQL table)."""
    create_transactional_table(client, db, "emp_acid", EMP_COLS)
    w = AcidWriter(client, db, "emp_acid")
    wid = w.insert(EMP_ROWS).write_id
    w.delete([(wid, B0, 3)])  # Gone
    w.update([(wid, B0, 2)], [(428945, "Joe", "joe.robinson@gmail.com", "Indianapolis", 3)])
    spark.sql(f"CREATE TABLE {db}.dept_ext (id INT, name STRING) STORED AS ORC")
    spark.sql(f"INSERT INTO {db}.dept_ext VALUES (3, 'ADMIN'), (4, 'HR'), (5, 'FINANCE'), (6, 'IT')")


def make_sales(client: MetastoreClient, db: str) -> dict[str, str]:
    """Partitioned ``sales`` (ds string, hr int): three partitions; their locations by ds."""
    create_transactional_table(
        client, db, "sales", [("id", "int"), ("amount", "int")], [("ds", "string"), ("hr", "int")]
    )
    w = AcidWriter(client, db, "sales")
    w.insert([(1, 10, "a", 1), (2, 20, "a", 2), (3, 30, "b", 1), (4, 40, "c", 1)])
    w.delete([(1, B0, 0)], partition={"ds": "a", "hr": 2})  # id 2
    parts = client.call("get_partitions", db, "sales", -1)
    return {p.values[0] + "/" + p.values[1]: p.sd.location for p in parts}


def rows(df: Any) -> set[tuple]:
    return {tuple(r) for r in df.collect()}


def acid_views(spark: Any) -> list[str]:
    return [t.name for t in spark.catalog.listTables() if t.name.startswith(VIEW_PREFIX)]


# --- the article's join ------------------------------------------------------------------------------


def test_emp_acid_join_dept_ext(spark: Any, client: MetastoreClient, db: str) -> None:
    make_emp(client, spark, db)
    query = (
        "select e.emp_id, e.first_name, d.name department from emp_acid e join dept_ext d on e.dept_id = d.id"
    )
    with current_database(spark, db), acid_session(spark) as acid:
        df = acid.sql(query)
        assert df.columns == ["emp_id", "first_name", "department"]
        assert rows(df) == {(677509, "Lois", "HR"), (940761, "Brenda", "FINANCE"), (428945, "Joe", "ADMIN")}
        assert acid.txn_id is not None  # read under the session's txn
        assert set(acid.snapshots) == {f"{db}.emp_acid"}
        # the updated row has its new value; the deleted one is gone
        assert rows(acid.sql("select first_name, city from emp_acid where dept_id in (3, 4)")) == {
            ("Lois", "Denver"),
            ("Joe", "Indianapolis"),
        }
    assert acid_views(spark) == []


def test_cte_subqueries_and_qualified_names(spark: Any, client: MetastoreClient, db: str) -> None:
    make_emp(client, spark, db)
    with acid_session(spark) as acid:
        q = f"""
            with hr as (select id from {db}.dept_ext where name in ('HR', 'ADMIN')),
                 staff as (select e.* from spark_catalog.{db}.emp_acid e where e.dept_id in (select id from hr))
            select s.first_name,
                   (select count(*) from {db}.emp_acid x where x.dept_id = s.dept_id) as same_dept
            from staff s
            where exists (select 1 from {db}.dept_ext d where d.id = s.dept_id)
        """
        assert rows(acid.sql(q)) == {("Lois", 1), ("Joe", 1)}
        # no alias: the columns qualified with the table's name still resolve
        q2 = f"select emp_acid.first_name from {db}.emp_acid where emp_acid.emp_id > 500000"
        assert rows(acid.sql(q2)) == {("Lois",), ("Brenda",)}
        # a self-join reads one snapshot (one table snapshot in the session)
        q3 = f"select a.emp_id, b.emp_id from {db}.emp_acid a join {db}.emp_acid b on a.dept_id = b.dept_id"
        assert rows(acid.sql(q3)) == {(r[0], r[0]) for r in EMP_ROWS[:3]}
        assert list(acid.snapshots) == [f"{db}.emp_acid"]
        # TABLE statement, TABLESAMPLE without alias, a UNION with a plain table
        assert len(acid.sql(f"table {db}.emp_acid").collect()) == 3
        q4 = f"select emp_acid.emp_id from {db}.emp_acid tablesample (100 percent) order by 1"
        assert [r[0] for r in acid.sql(q4).collect()] == [428945, 677509, 940761]
        q5 = f"select dept_id from {db}.emp_acid union select id from {db}.dept_ext"
        assert rows(acid.sql(q5)) == {(3,), (4,), (5,), (6,)}
    assert acid_views(spark) == []


def test_non_acid_queries_pass_through(spark: Any, client: MetastoreClient, db: str) -> None:
    make_emp(client, spark, db)
    spark.createDataFrame([(1,)], "x int").createOrReplaceTempView("emp_acid")
    try:
        with current_database(spark, db):
            acid = AcidSession(spark)
            try:
                q = "select d.name from dept_ext d where d.id > 4"
                assert rows(acid.sql(q)) == rows(spark.sql(q)) == {("FINANCE",), ("IT",)}
                # a temp view and a CTE named like the transactional table shadow it, as in Spark
                assert rows(acid.sql("select * from emp_acid")) == {(1,)}
                assert rows(acid.sql("with emp_acid as (select 7 as y) select * from emp_acid")) == {(7,)}
                assert acid.txn_id is None  # no transactional table: no txn opened
                assert acid.snapshots == {}
                # qualified, it is the table again
                assert len(acid.sql(f"select * from {db}.emp_acid").collect()) == 3
                assert acid.txn_id is not None
            finally:
                acid.close()
    finally:
        spark.catalog.dropTempView("emp_acid")


@pytest.mark.spark_postgres  # also on PostgreSQL: the Spark path through a PostgreSQL store
def test_partition_filters_reach_the_metastore(
    spark: Any, spark_metastore: Any, client: MetastoreClient, db: str
) -> None:
    locations = make_sales(client, db)
    break_partition(locations["c/1"])
    spark.sql(f"CREATE TABLE {db}.days (ds STRING, label STRING) STORED AS ORC")
    spark.sql(f"INSERT INTO {db}.days VALUES ('a', 'first'), ('b', 'second'), ('c', 'third')")
    with acid_session(spark) as acid:
        before = spark_metastore.calls()
        df = acid.sql(f"select id, amount, ds, hr from {db}.sales where ds = 'a' or (ds = 'b' and hr = 1)")
        assert rows(df) == {(1, 10, "a", 1), (3, 30, "b", 1)}
        after = spark_metastore.calls()
        assert after.get("get_partitions_by_filter", 0) > before.get("get_partitions_by_filter", 0)
        assert after.get("get_partitions", 0) == before.get("get_partitions", 0)
        # a filter inferred through a join condition prunes the transactional side too
        q = f"select s.id, d.label from {db}.sales s join {db}.days d on s.ds = d.ds where d.ds = 'b'"
        assert rows(acid.sql(q)) == {(3, "second")}
        # IN on the integral partition column, and NOT IN on the string one
        q = f"select id from {db}.sales where hr in (2, 3) or ds not in ('a', 'c')"
        assert rows(acid.sql(q)) == {(3,)}
        # the query inside EXPLAIN, INSERT ... SELECT and CREATE TABLE ... AS SELECT is pruned too
        plan = acid.sql(f"explain select * from {db}.sales where ds = 'b'").collect()[0][0]
        assert "b AS ds" in plan  # listing the broken partition would have failed
        spark.sql(f"CREATE TABLE {db}.sales_a (id INT, amount INT) STORED AS ORC")
        acid.sql(f"insert into {db}.sales_a select id, amount from {db}.sales where ds = 'a'")
        acid.sql(f"create table {db}.sales_b stored as orc as select * from {db}.sales where ds = 'b'")
        assert rows(spark.table(f"{db}.sales_a")) == {(1, 10)}
        assert rows(spark.table(f"{db}.sales_b")) == {(3, 30, "b", 1)}
        # a use of the table without any partition predicate lists every partition: it fails here
        with pytest.raises(Exception, match="(?i)directory"):
            acid.sql(f"select * from {db}.sales s1 join {db}.sales s2 on s1.id = s2.id where s1.ds = 'a'")
    assert acid_views(spark) == []


def test_cte_used_twice_gets_the_union_of_its_filters(spark: Any, client: MetastoreClient, db: str) -> None:
    locations = make_sales(client, db)
    break_partition(locations["c/1"])
    with acid_session(spark) as acid:
        q = f"""
            with s as (select * from {db}.sales)
            select x.id, y.id from s x join s y on x.amount < y.amount where x.ds = 'a' and y.ds = 'b'
        """
        assert rows(acid.sql(q)) == {(1, 3)}


def test_sql_dml_on_transactional_tables_is_refused(spark: Any, client: MetastoreClient, db: str) -> None:
    make_emp(client, spark, db)
    with acid_session(spark) as acid:
        for statement in (
            f"delete from {db}.emp_acid where emp_id = 1",
            f"update {db}.emp_acid set city = 'x'",
            f"insert into {db}.emp_acid select * from {db}.emp_acid",
        ):
            with pytest.raises(NotImplementedError, match="acid_dml"):
                acid.sql(statement)
        # writing a plain table from a transactional one is fine
        acid.sql(f"create table {db}.emp_copy stored as orc as select emp_id, city from {db}.emp_acid")
    assert rows(spark.table(f"{db}.emp_copy")) == {
        (677509, "Denver"),
        (940761, "Stonewall"),
        (428945, "Indianapolis"),
    }
