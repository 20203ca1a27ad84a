"""``AcidSession.sql``: Spark SQL in which the Hive transactional tables are read through the session.

``acid.sql("select e.emp_id, e.first_name, d.name department from emp_acid e join dept_ext d on
e.dept_id = d.id")`` runs unchanged: ``emp_acid`` (transactional) is read by the ACID reader under
the session's snapshot, ``dept_ext`` (a plain table) by Spark's own catalog and reader.

How (nothing of Spark's analyzer touches a transactional table as a Hive table):

1. The statement is parsed with Spark's own parser (``sessionState.sqlParser.parsePlan``; ``${var}``
   substitution first, as ``spark.sql`` does). Every ``UnresolvedRelation`` is collected from the
   plan, its subqueries (``IN``/``EXISTS``/scalar/lateral) and its CTE definitions, with the
   position of its name in the SQL text (the parser keeps ``origin.startIndex/stopIndex`` per node:
   character offsets, code points like Python's). A one-part name that is a CTE in scope or a
   temporary view is not a table; ``global_temp.*`` and names in other catalogs are left alone.
   Others resolve as Spark resolves them: ``t`` in the current database (of ``spark_catalog``),
   ``db.t``, ``spark_catalog.db.t``.
2. The metastore says which of them are transactional (``get_table``, once per table); views and
   plain tables stay Spark's. No transactional table: the statement runs as given (no txn opened).
3. Each occurrence of a transactional table becomes a uniquely named temporary view of
   ``session.read(table, partition_filter=...)`` and the SQL text is rewritten at the name's
   position only: ``emp_acid e`` -> ```__hivemesh_acid_<id>_0` e``; a name without an alias gets
   one (```__hivemesh_acid_<id>_0` AS `emp_acid```, after a TABLESAMPLE clause when there is one)
   so ``emp_acid.col`` still resolves. The views are dropped once ``spark.sql`` has analyzed the
   rewritten statement (the DataFrame keeps the analyzed plan).
4. Partition pruning, for partitioned transactional tables in a query (or in the query part of
   EXPLAIN, INSERT ... SELECT and CREATE TABLE ... AS SELECT; other commands, and CTEs placed
   before an INSERT, read every partition): that query is first analyzed and optimized (a second
   analysis, no job) with placeholders, i.e. empty RDD-backed relations (``LogicalRDD``, which the
   optimizer cannot prove empty) with each table's schema. Spark pushes
   predicates down to them, through joins, CTEs and subqueries, and infers new ones from join
   conditions; the ``Filter`` right above each placeholder then holds what constrains that
   occurrence. Conjuncts comparing a partition column with literals (``=``, ``<``, ``<=``, ``>``,
   ``>=``, ``IN``/``InSet``, ``<>``/``NOT IN``, ``AND``/``OR`` of those) on string, varchar,
   integral and date partition columns become a Hive partition filter, passed to ``session.read``
   as ``partition_filter`` (``get_partitions_by_filter``). Untranslatable conjuncts are dropped
   (a weaker filter reads more, never less); a placeholder used several times (a CTE inlined twice)
   gets the OR of its uses, and no filter at all if one use has none. Spark still evaluates every
   predicate on the rows read, so the metastore's filter semantics only decide what is read.

Transactions: every table is read under the session's one read txn and snapshot
(:class:`~hivemesh.spark.acid.AcidSession`, seen here as a :class:`SqlSession`), so a self-join
reads one snapshot.

Limits: DML on a transactional table (``INSERT INTO``/``UPDATE``/``DELETE``/``MERGE`` naming it as the
target) raises NotImplementedError (use :mod:`hivemesh.spark.acid_dml`); transactional tables read
through a persistent view are read by Spark's own reader (which does not apply ACID semantics); a
column qualified with the database (``db.emp_acid.col``) does not resolve for an unaliased
transactional table (``emp_acid.col`` does); time travel clauses are not supported on them.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hive_metastore.ttypes import NoSuchObjectException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from hivemesh.acid.tables import is_transactional
from hivemesh.client.metastore import MetastoreClient
from hivemesh.spark.acid_reader import spark_type
from hivemesh.spark.acid_source import hive_key, hive_literal

log = logging.getLogger(__name__)

SESSION_CATALOG = "spark_catalog"
VIEW_PREFIX = "__hivemesh_acid_"
_DML_TARGETS = {
    "DeleteFromTable": "table",
    "UpdateTable": "table",
    "MergeIntoTable": "targetTable",
    "InsertIntoStatement": "table",
}
_ALIAS_NODES = {"SubqueryAlias", "UnresolvedSubqueryColumnAliases"}
_SAMPLE_NODES = {"Sample", "LocalLimit", "GlobalLimit"}
_COMPARISONS = {
    "EqualTo": "=",
    "EqualNullSafe": "=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
}
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class SqlSession(Protocol):
    """What :func:`acid_sql` needs of a session (:class:`hivemesh.spark.acid.AcidSession` is one;
    a protocol, so this module does not import the session's, which imports this one)."""

    spark: SparkSession
    client: MetastoreClient

    def snapshot(self, table: str) -> Any:
        """The session's snapshot of ``db.table`` (``.table``: the metastore table), taken once."""
        ...

    def read(self, table: str, *, partition_filter: str | None = None) -> DataFrame:
        """``db.table`` under the session's snapshot, only the partitions ``partition_filter`` selects."""
        ...


@dataclass
class RelationRef:
    """One table name in the statement: its parts, where it is in the text, how to rewrite it."""

    parts: tuple[str, ...]
    start: int
    stop: int  # inclusive
    has_alias: bool
    alias_at: int | None = None  # where to insert " AS name" (after a TABLESAMPLE clause), else stop+1
    target: bool = False  # the table a DML statement writes
    table: str | None = None  # db.table when it names a transactional table
    partitioned: bool = False
    view: str | None = None
    partition_filter: str | None = None
    conditions: list[str | None] = field(default_factory=list)


def _seq(scala_seq: Any) -> list[Any]:
    out = []
    it = scala_seq.iterator()
    while it.hasNext():
        out.append(it.next())
    return out


def _opt_int(option: Any) -> int | None:
    return option.get() if option.isDefined() else None


def _cls(node: Any) -> str:
    return node.getClass().getSimpleName()


# --- collecting the relations --------------------------------------------------------------------


def _preceded_by_table_keyword(text: str, start: int) -> bool:
    return re.search(r"(?:^|[^\w`])table\s*$", text[:start], flags=re.IGNORECASE) is not None


def collect_relations(plan: Any, text: str) -> list[RelationRef]:
    """Every ``UnresolvedRelation`` of a parsed plan that is not a CTE reference in scope, with
    its position in ``text`` (subqueries and CTE definitions included)."""
    out: list[RelationRef] = []
    seen: set[int] = set()

    def relation(node: Any, parent: Any, parent_is_cte: bool, scope: frozenset[str], target: bool) -> None:
        parts = tuple(str(p) for p in _seq(node.multipartIdentifier()))
        if len(parts) == 1 and parts[0].lower() in scope:
            return
        start, stop = _opt_int(node.origin().startIndex()), _opt_int(node.origin().stopIndex())
        if start is None or stop is None:
            start = stop = -1  # no position: an error if it names a transactional table
        elif start in seen:
            return
        seen.add(start)
        pcls = _cls(parent) if parent is not None else ""
        has_alias = pcls in _ALIAS_NODES and not parent_is_cte
        alias_at = None
        if pcls in _SAMPLE_NODES:
            pstart, pstop = _opt_int(parent.origin().startIndex()), _opt_int(parent.origin().stopIndex())
            if pstart is not None and pstop is not None and pstart > stop:
                alias_at = pstop + 1
        if _preceded_by_table_keyword(text, start):
            has_alias = True  # TABLE t: no alias allowed, none needed
        out.append(RelationRef(parts, start, stop, has_alias, alias_at, target))

    def walk(
        node: Any, parent: Any, parent_is_cte: bool, scope: frozenset[str], target: bool = False
    ) -> None:
        cls = _cls(node)
        if cls == "UnresolvedRelation":
            relation(node, parent, parent_is_cte, scope, target)
            return
        if cls == "UnresolvedWith":
            try:
                recursive = bool(node.allowRecursion())  # WITH RECURSIVE (Spark 4.1+)
            except Exception:
                recursive = False
            names: set[str] = set()
            for pair in _seq(node.cteRelations()):
                name = str(pair._1()).lower()
                inner = frozenset(scope | names | ({name} if recursive else set()))
                walk(pair._2(), node, True, inner)
                names.add(name)
            walk(node.child(), node, False, frozenset(scope | names))
            return
        if cls in _DML_TARGETS:
            table = getattr(node, _DML_TARGETS[cls])()
            walk(table, node, False, scope, True)
        if cls == "ExplainCommand":
            walk(node.logicalPlan(), node, False, scope)
        for child in _seq(node.children()):
            walk(child, node, False, scope, target)
        for sub in _seq(node.subqueries()):
            walk(sub, node, False, scope)

    walk(plan, None, False, frozenset())
    return out


def _is_command(spark: Any, plan: Any) -> bool:
    """True when the parsed statement is a command or DML (``spark.sql`` runs those at once)."""
    node = plan
    while _cls(node) == "UnresolvedWith":
        node = node.child()
    loader = node.getClass().getClassLoader()
    for name in (
        "org.apache.spark.sql.catalyst.plans.logical.Command",
        "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement",
    ):
        if spark._jvm.java.lang.Class.forName(name, False, loader).isInstance(node):
            return True
    return False


def _query_span(spark: Any, plan: Any, text: str) -> tuple[int, int] | None:
    """The part of the statement that is a query, as (start, stop inclusive): all of it for a
    query; for EXPLAIN, INSERT ... SELECT, CREATE TABLE ... AS SELECT the query inside; None when
    there is none (the pruning pass must not run a command)."""
    if not _is_command(spark, plan):
        return 0, len(text) - 1
    if _cls(plan) == "UnresolvedWith":
        return None  # WITH ... INSERT: the query needs the CTEs outside it
    for getter in ("query", "logicalPlan"):
        try:
            inner = getattr(plan, getter)()
            start, stop = _opt_int(inner.origin().startIndex()), _opt_int(inner.origin().stopIndex())
        except Exception:
            continue
        if start is not None and stop is not None and not _is_command(spark, inner):
            return start, stop
    return None


# --- naming ----------------------------------------------------------------------------------------


class _Resolver:
    """Maps table names to ``db.table`` the way Spark resolves them, and asks the metastore which
    are transactional (cached)."""

    def __init__(self, session: SqlSession):
        self.session = session
        spark = session.spark
        jsession = spark._jsparkSession
        self.catalog = jsession.sessionState().catalog()
        self.catalogs = jsession.sessionState().catalogManager()
        self.current_catalog = spark.catalog.currentCatalog()
        self.current_db = spark.catalog.currentDatabase()
        self.global_temp = str(spark.conf.get("spark.sql.globalTempDatabase", "global_temp")).lower()
        self.tables: dict[str, Any] = {}

    def name(self, parts: tuple[str, ...]) -> str | None:
        """``db.table`` (lower case) in the session catalog, or None (temp view, other catalog)."""
        lower = [p.lower() for p in parts]
        if len(parts) == 1:
            if self.catalog.getTempView(parts[0]).isDefined():
                return None
            if self.current_catalog.lower() != SESSION_CATALOG:
                return None
            return f"{self.current_db.lower()}.{lower[0]}"
        if len(parts) == 2:
            if lower[0] == self.global_temp or self.current_catalog.lower() != SESSION_CATALOG:
                return None
            if lower[0] != SESSION_CATALOG and self.catalogs.isCatalogRegistered(parts[0]):
                return None
            if lower[0] == SESSION_CATALOG:
                return None
            return f"{lower[0]}.{lower[1]}"
        if len(parts) == 3 and lower[0] == SESSION_CATALOG and lower[1] != self.global_temp:
            return f"{lower[1]}.{lower[2]}"
        return None

    def transactional(self, name: str) -> Any | None:
        """The metastore table when ``name`` is a transactional table (not a view), else None."""
        if name not in self.tables:
            db, table = name.split(".", 1)
            try:
                tbl = self.session.client.hms.get_table(db, table)
            except NoSuchObjectException:
                tbl = None
            if tbl is not None and (tbl.tableType == "VIRTUAL_VIEW" or not is_transactional(tbl)):
                tbl = None
            self.tables[name] = tbl
        return self.tables[name]


# --- partition filters from the optimized plan -----------------------------------------------------


def _python_value(value: Any, spark_type: str) -> Any:
    """A Catalyst internal value of a type (``simpleString``) as Python: strings, integers and
    dates; :class:`_Unsupported` for other types."""
    if value is None:
        return None
    if spark_type == "string" or spark_type.startswith(("varchar", "string ")):
        return str(value.toString())
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if spark_type == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    return _Unsupported


class _Unsupported:
    pass


def _attribute(expr: Any, columns: dict[int, tuple[str, str]]) -> tuple[str, str] | None:
    if _cls(expr) != "AttributeReference":
        return None
    return columns.get(expr.exprId().id())


def _literal(expr: Any, hive_type: str) -> str | None:
    if _cls(expr) != "Literal":
        return None
    value = _python_value(expr.value(), str(expr.dataType().simpleString()))
    if value is None or value is _Unsupported:
        return None
    return hive_literal(value, hive_type)


def expression_to_hive(expr: Any, columns: dict[int, tuple[str, str]], partial: bool = True) -> str | None:
    """A Catalyst predicate over a placeholder's attributes as a Hive partition filter.

    ``columns``: exprId -> (partition column, Hive type) of the placeholder's partition columns.
    With ``partial`` untranslatable conjuncts are dropped (the result may be weaker, never
    stronger); None when nothing constrains the partition columns."""
    cls = _cls(expr)
    if cls == "And":
        left = expression_to_hive(expr.left(), columns, partial)
        right = expression_to_hive(expr.right(), columns, partial)
        if left and right:
            return f"({left} and {right})"
        return (left or right) if partial else None
    if cls == "Or":
        left = expression_to_hive(expr.left(), columns, partial)
        right = expression_to_hive(expr.right(), columns, partial)
        return f"({left} or {right})" if left and right else None
    if cls == "Not":
        child = expr.child()
        ccls = _cls(child)
        if ccls == "EqualTo":
            inner = expression_to_hive(child, columns, False)
            return inner.replace(" = ", " <> ", 1) if inner else None
        if ccls in ("In", "InSet"):
            values = _in_values(child, columns)
            if values is None:
                return None
            key, literals = values
            return "(" + " and ".join(f"{key} <> {x}" for x in literals) + ")"
        return None
    if cls in _COMPARISONS:
        op = _COMPARISONS[cls]
        left, right = expr.left(), expr.right()
        col = _attribute(left, columns)
        other = right
        if col is None:
            col, other, op = _attribute(right, columns), left, _FLIPPED[op]
        if col is None:
            return None
        literal = _literal(other, col[1])
        return f"{hive_key(col[0])} {op} {literal}" if literal is not None else None
    if cls in ("In", "InSet"):
        values = _in_values(expr, columns)
        if values is None:
            return None
        key, literals = values
        return "(" + " or ".join(f"{key} = {x}" for x in literals) + ")"
    return None


def _in_values(expr: Any, columns: dict[int, tuple[str, str]]) -> tuple[str, list[str]] | None:
    cls = _cls(expr)
    target = expr.value() if cls == "In" else expr.child()
    col = _attribute(target, columns)
    if col is None:
        return None
    literals: list[str | None] = []
    if cls == "In":
        literals = [_literal(v, col[1]) for v in _seq(expr.list())]
    else:
        spark_type = str(target.dataType().simpleString())
        for v in _seq(expr.hset().toSeq()):
            value = _python_value(v, spark_type)
            if value is None or value is _Unsupported:
                return None
            literals.append(hive_literal(value, col[1]))
    if not literals or any(x is None for x in literals):
        return None
    return hive_key(col[0]), [x for x in literals if x is not None]


def _collect_conditions(
    plan: Any, placeholders: dict[int, tuple[RelationRef, list[str], dict[str, str]]]
) -> None:
    """Record on each placeholder's ref the partition filter of every use in an optimized plan."""

    def walk(node: Any, parent: Any) -> None:
        cls = _cls(node)
        if cls == "LogicalRDD":
            entry = placeholders.get(node.rdd().id())
            if entry is not None:
                ref, names, partition_types = entry
                columns = {}
                for name, attr in zip(names, _seq(node.output()), strict=True):
                    if name.lower() in partition_types:
                        columns[attr.exprId().id()] = (name, partition_types[name.lower()])
                condition = None
                if parent is not None and _cls(parent) == "Filter":
                    condition = expression_to_hive(parent.condition(), columns)
                ref.conditions.append(condition)
            return
        for child in _seq(node.children()):
            walk(child, node)
        for sub in _seq(node.subqueries()):
            walk(sub, node)

    walk(plan, None)


# --- the statement ---------------------------------------------------------------------------------


def _rewrite(text: str, refs: list[RelationRef], views: list[str]) -> str:
    edits: list[tuple[int, int, str]] = []  # (start, stop exclusive, replacement)
    for ref, view in zip(refs, views, strict=True):
        edits.append((ref.start, ref.stop + 1, f"`{view}`"))
        if not ref.has_alias:
            alias = " AS `" + ref.parts[-1].replace("`", "``") + "`"
            at = ref.alias_at if ref.alias_at is not None else ref.stop + 1
            if at == ref.stop + 1:
                edits[-1] = (ref.start, ref.stop + 1, f"`{view}`{alias}")
            else:
                edits.append((at, at, alias))
    out, pos = [], 0
    for start, stop, replacement in sorted(edits):
        out.append(text[pos:start])
        out.append(replacement)
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _drop_views(spark: Any, views: list[str]) -> None:
    for v in views:
        try:
            spark.catalog.dropTempView(v)
        except Exception as e:  # best effort
            log.warning("could not drop temp view %s: %s", v, e)


def acid_sql(session: SqlSession, query: str) -> DataFrame:
    """``spark.sql(query)`` with the transactional tables it reads read through ``session``
    (see the module doc). Raises NotImplementedError when it writes a transactional table."""
    spark = session.spark
    text = query
    if "${" in text:  # spark.sql substitutes variables before parsing: positions refer to that text
        text = str(spark._jvm.org.apache.spark.sql.internal.VariableSubstitution().substitute(text))
    parser = spark._jsparkSession.sessionState().sqlParser()
    plan = parser.parsePlan(text)
    refs = collect_relations(plan, text)
    resolver = _Resolver(session)
    acid_refs: list[RelationRef] = []
    for ref in refs:
        name = resolver.name(ref.parts)
        tbl = resolver.transactional(name) if name else None
        if tbl is None:
            continue
        if ref.start < 0:
            raise ValueError(f"cannot rewrite {name}: the parser kept no position for it")
        if ref.target:
            raise NotImplementedError(
                f"{name} is a transactional table: write it with hivemesh.spark.acid_dml, not SQL DML"
            )
        ref.table = name
        ref.partitioned = bool(tbl.partitionKeys)
        acid_refs.append(ref)
    if not acid_refs:
        return spark.sql(query)

    token = uuid.uuid4().hex[:12]
    views = [f"{VIEW_PREFIX}{token}_{i}" for i in range(len(acid_refs))]
    for ref in acid_refs:
        session.snapshot(ref.table)  # one txn, one snapshot per table for the whole statement
    span = _query_span(spark, plan, text) if any(r.partitioned for r in acid_refs) else None
    if span is not None:
        _prune(session, text, span, acid_refs, views)
    frames: dict[tuple[str, str | None], DataFrame] = {}
    try:
        for ref, view in zip(acid_refs, views, strict=True):
            key = (ref.table, ref.partition_filter)
            if key not in frames:
                frames[key] = session.read(ref.table, partition_filter=ref.partition_filter)
            frames[key].createOrReplaceTempView(view)
        rewritten = _rewrite(text, acid_refs, views)
        log.info("acid sql: %s", rewritten)
        return spark.sql(rewritten)
    finally:
        _drop_views(spark, views)


def _prune(
    session: SqlSession, text: str, span: tuple[int, int], all_refs: list[RelationRef], all_views: list[str]
) -> None:
    """Set ``partition_filter`` on the partitioned refs from the optimized plan of the statement's
    query part (``span`` of ``text``) over empty placeholders (see the module doc, step 4)."""
    spark = session.spark
    first, last = span
    inside = [(r, v) for r, v in zip(all_refs, all_views, strict=True) if first <= r.start and r.stop <= last]
    refs = [r for r, _ in inside]
    views = [v for _, v in inside]
    shifted = [
        replace(
            r,
            start=r.start - first,
            stop=r.stop - first,
            alias_at=None if r.alias_at is None else r.alias_at - first,
            conditions=[],
        )
        for r in refs
    ]
    placeholders: dict[int, tuple[RelationRef, list[str], dict[str, str]]] = {}
    try:
        for ref, view in zip(refs, views, strict=True):
            tbl = session.snapshot(ref.table).table
            columns = [(c.name, c.type) for c in tbl.sd.cols]
            keys = [(k.name, k.type) for k in tbl.partitionKeys or []]
            schema = StructType([StructField(n, spark_type(t), True) for n, t in (*columns, *keys)])
            df = spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
            rdd_ids = [
                n.rdd().id()
                for n in _seq(df._jdf.queryExecution().analyzed().collectLeaves())
                if _cls(n) == "LogicalRDD"
            ]
            if len(rdd_ids) != 1:
                return
            placeholders[rdd_ids[0]] = (
                ref,
                [n for n, _ in (*columns, *keys)],
                {k.lower(): t for k, t in keys},
            )
            df.createOrReplaceTempView(view)
        query = _rewrite(text[first : last + 1], shifted, views)
        optimized = spark.sql(query)._jdf.queryExecution().optimizedPlan()
        _collect_conditions(optimized, placeholders)
    except Exception as e:  # pruning is an optimization: read every partition instead
        log.warning("no partition pruning for %s: %s", text, e)
        for ref in refs:
            ref.conditions.clear()
        return
    finally:
        _drop_views(spark, views)
    for ref in refs:
        if not ref.partitioned or not ref.conditions or any(c is None for c in ref.conditions):
            continue
        unique = sorted(set(ref.conditions))  # type: ignore[arg-type]
        ref.partition_filter = unique[0] if len(unique) == 1 else "(" + " or ".join(unique) + ")"
        log.info("%s: partition filter %s", ref.table, ref.partition_filter)
