"""Find and rename database (and table) names inside HMS call arguments and results.

Works from the Thrift specs of the generated bindings, so every method and struct of the Hive 4 IDL
is covered without a hand-written list: plain string arguments (``db_name``, ``dbname``,
``dbName``, ``source_db``, ...), fields of request and result structs at any depth (``dbName`` of
Table, Partition, TableMeta, ColumnStatisticsDesc, LockComponent, SQLPrimaryKey ``table_db``, ...),
``Database.name``, ``db.table`` full names (``fullTableName(s)``, ``tablesUsed``), ``@cat#db``
forms, and the database qualifiers inside view text. Only fields that can hold a name are visited:
a Table's columns are never walked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hive_metastore import ThriftHiveMetastore, ttypes
from thrift.Thrift import TType

from hivemesh.hive.names import DEFAULT_CATALOG, parse_db_name, qualify_db_name

# database field -> the table field that goes with it in the same struct
_DB_FIELDS: dict[str, tuple[str, ...]] = {
    "dbName": ("tableName", "tblName"),
    "dbname": ("tablename", "tableName"),
    "db_name": ("tbl_name", "table_name"),
    "table_db": ("table_name",),
    "parent_db_name": ("parent_tbl_name",),
    "foreign_db_name": ("foreign_tbl_name",),
    "pktable_db": ("pktable_name",),
    "fktable_db": ("fktable_name",),
    "databaseName": ("tableName",),
}
# structs whose database field has a generic name
_CLASS_DB_FIELDS: dict[str, tuple[str, str | None]] = {
    "Database": ("name", None),
    "GetDatabaseRequest": ("name", None),
    "DropDatabaseRequest": ("name", None),
    "GetTablesExtRequest": ("database", None),
    "ReplLastIdInfo": ("database", "table"),
    "WriteEventInfo": ("database", "table"),
    "WriteNotificationLogRequest": ("db", "table"),
    "WriteNotificationLogBatchRequest": ("db", "table"),
}
_FULL_NAME_FIELDS = frozenset({"fullTableName", "fullTableNames", "tablesUsed"})
_VIEW_FIELDS = ("viewOriginalText", "viewExpandedText")
SPARK_VIEW_DB_KEY = "view.catalogAndNamespace.part.1"  # Spark 3/4: the current database of a view

# method -> its plain string arguments: (index, "db" | "table" | ..., paired table index)
_ARG_DB = {"db_name", "dbname", "dbName", "source_db", "dest_db"}
_ARG_TABLE_OF = {
    "db_name": ("tbl_name", "table_name"),
    "dbname": ("tbl_name", "name"),
    "dbName": ("tableName", "tbl_name"),
    "source_db": ("source_table_name",),
    "dest_db": ("dest_table_name",),
}
_DB_AS_NAME = frozenset({"get_database", "drop_database", "alter_database"})


class Renamer:
    """Callbacks of one rewrite: ``db(name)`` -> name, ``table(db, table)`` -> table (``db`` as
    it was before renaming), ``view(text)`` -> text. Defaults keep everything."""

    def db(self, name: str) -> str:
        """A database name as it should be sent on."""
        return name

    def table(self, db: str, table: str) -> str:
        """A table name of database ``db`` (as it was before renaming) as it should be sent on."""
        return table

    def view(self, text: str) -> str:
        """View SQL text with its database references renamed."""
        return text


class Collector(Renamer):
    """Collects the database names a call mentions (unchanged), in order."""

    def __init__(self) -> None:
        self.dbs: list[str] = []
        self.tables: list[tuple[str, str]] = []

    def db(self, name: str) -> str:
        """Record ``name`` and keep it."""
        self.dbs.append(name)
        return name

    def table(self, db: str, table: str) -> str:
        """Record ``(db, table)`` and keep the name."""
        self.tables.append((db, table))
        return table


# ---------------------------------------------------------------------------------------- plans
_Plan = list[tuple[Any, ...]]
_plans: dict[type, _Plan] = {}
_building: set[type] = set()


def _elem_plan(ttype: int, spec: Any) -> tuple[str, Any] | None:
    """How to visit a value of ``ttype``/``spec``: ("struct", cls) / ("seq", inner) / ("map", inner)."""
    if ttype == TType.STRUCT:
        cls = spec[0]
        return ("struct", cls) if _plan(cls) else None
    if ttype in (TType.LIST, TType.SET):
        inner = _elem_plan(spec[0], spec[1])
        return ("seq", inner) if inner else None
    if ttype == TType.MAP:
        inner = _elem_plan(spec[2], spec[3])
        return ("map", inner) if inner else None
    return None


def _plan(cls: type) -> _Plan:
    """What to visit in instances of ``cls`` (empty: nothing can hold a database name)."""
    plan = _plans.get(cls)
    if plan is not None:
        return plan
    if cls in _building:
        return [("recursive",)]
    _building.add(cls)
    try:
        spec = [f for f in (getattr(cls, "thrift_spec", None) or ()) if f]
        names = {f[2]: f for f in spec}
        plan = []
        special = _CLASS_DB_FIELDS.get(cls.__name__)
        if special and special[0] in names:
            tbl = special[1] if special[1] in names else None
            plan.append(("db", special[0], tbl))
        for fname, tables in _DB_FIELDS.items():
            f = names.get(fname)
            if f is not None and f[1] == TType.STRING:
                tbl = next((t for t in tables if t in names and names[t][1] == TType.STRING), None)
                plan.append(("db", fname, tbl))
        for fname in _FULL_NAME_FIELDS & names.keys():
            plan.append(("full", fname))
        if cls is ttypes.Table:
            plan.append(("view",))
        for f in spec:
            if f[1] in (TType.STRUCT, TType.LIST, TType.SET, TType.MAP):
                how = _elem_plan(f[1], f[3])
                if how:
                    plan.append(("child", f[2], how))
    finally:
        _building.discard(cls)
    _plans[cls] = plan
    return plan


def _rename_full(value: str, r: Renamer) -> str:
    db, dot, table = value.partition(".")
    if not dot:
        return value
    return f"{r.db(db)}.{r.table(db, table)}"


def _visit(value: Any, how: tuple[str, Any], r: Renamer) -> None:
    kind, inner = how
    if value is None:
        return
    if kind == "struct":
        rename_struct(value, r)
    elif kind == "seq":
        for v in value:
            _visit(v, inner, r)
    elif kind == "map":
        for v in value.values():
            _visit(v, inner, r)


def rename_struct(obj: Any, r: Renamer) -> None:
    """Rename, in place, every database/table name in ``obj`` (a ttypes struct) and below."""
    if obj is None:
        return
    for step in _plan(type(obj)):
        kind = step[0]
        if kind == "db":
            _, dbf, tblf = step
            db = getattr(obj, dbf, None)
            if db is None:
                continue
            if tblf is not None:
                tbl = getattr(obj, tblf, None)
                if tbl is not None:
                    setattr(obj, tblf, r.table(db, tbl))
            setattr(obj, dbf, r.db(db))
        elif kind == "full":
            v = getattr(obj, step[1], None)
            if isinstance(v, str):
                setattr(obj, step[1], _rename_full(v, r))
            elif isinstance(v, list):
                setattr(obj, step[1], [_rename_full(x, r) for x in v])
            elif isinstance(v, set):
                setattr(obj, step[1], {_rename_full(x, r) for x in v})
        elif kind == "view":
            for vf in _VIEW_FIELDS:
                text = getattr(obj, vf, None)
                if text:
                    setattr(obj, vf, r.view(text))
            params = obj.parameters
            if params and SPARK_VIEW_DB_KEY in params:
                params[SPARK_VIEW_DB_KEY] = r.db(params[SPARK_VIEW_DB_KEY])
        elif kind == "child":
            _visit(getattr(obj, step[1], None), step[2], r)
        elif kind == "recursive":  # a struct that contains itself: walk it generically
            for f in type(obj).thrift_spec or ():
                if f and f[1] == TType.STRUCT:
                    rename_struct(getattr(obj, f[2], None), r)


def rename_value(value: Any, cls_or_how: Any, r: Renamer) -> Any:
    """Rename inside a result value whose Thrift type is described by ``cls_or_how`` (see
    :func:`result_plan`). Strings that are database names are returned renamed."""
    if cls_or_how is None or value is None:
        return value
    kind, inner = cls_or_how
    if kind == "db":
        return r.db(value)
    if kind == "dbs":
        return [r.db(v) for v in value]
    _visit(value, cls_or_how, r)
    return value


# ------------------------------------------------------------------------------------- methods
class MethodPlan:
    """Where a method's arguments carry names: ``db_args`` [(index, paired table index or None)],
    ``struct_args`` [(index, how)], and how to visit its result (``result``)."""

    __slots__ = ("name", "db_args", "struct_args", "result")

    def __init__(self, name: str):
        self.name = name
        args_cls = getattr(ThriftHiveMetastore, f"{name}_args", None)
        spec = [f for f in (getattr(args_cls, "thrift_spec", None) or ()) if f]
        index = {f[2]: i for i, f in enumerate(spec)}
        self.db_args: list[tuple[int, int | None]] = []
        self.struct_args: list[tuple[int, tuple[str, Any]]] = []
        for i, f in enumerate(spec):
            fname, ftype = f[2], f[1]
            if ftype == TType.STRING and (fname in _ARG_DB or (fname == "name" and name in _DB_AS_NAME)):
                tbl = next((index[t] for t in _ARG_TABLE_OF.get(fname, ()) if t in index), None)
                self.db_args.append((i, tbl))
            elif ftype in (TType.STRUCT, TType.LIST, TType.SET, TType.MAP):
                how = _elem_plan(ftype, f[3])
                if how:
                    self.struct_args.append((i, how))
        self.result = result_plan(name)

    @property
    def names_databases(self) -> bool:
        """True if any argument can hold a database name."""
        return bool(self.db_args or self.struct_args)


def result_plan(method: str) -> tuple[str, Any] | None:
    """How to visit the result of ``method`` (None: it holds no database names)."""
    res_cls = getattr(ThriftHiveMetastore, f"{method}_result", None)
    spec = getattr(res_cls, "thrift_spec", None) or ()
    success = next((f for f in spec if f and f[2] == "success"), None)
    if success is None:
        return None
    if method in ("get_all_databases", "get_databases"):
        return ("dbs", None)
    ttype = success[1]
    if ttype in (TType.STRUCT, TType.LIST, TType.SET, TType.MAP):
        return _elem_plan(ttype, success[3])
    return None


_method_plans: dict[str, MethodPlan] = {}


def method_plan(method: str) -> MethodPlan:
    """The (cached) :class:`MethodPlan` of an HMS method."""
    plan = _method_plans.get(method)
    if plan is None:
        plan = _method_plans[method] = MethodPlan(method)
    return plan


def split_catalog(name: str) -> tuple[str | None, str]:
    """``"@hive#sales"`` -> ``("hive", "sales")``; ``"sales"`` -> ``(None, "sales")``."""
    if name.startswith("@"):
        cat, db = parse_db_name(name)
        return cat, db or ""
    return None, name


def strip_default_catalog(name: str, rename: Callable[[str], str]) -> str:
    """Rename the database part of a possibly ``@cat#db`` name. The default catalog's prefix is
    dropped, so members of every Hive version (2.x has no catalogs) understand the name."""
    cat, db = split_catalog(name)
    if cat is None:
        return rename(db)
    if not db:
        return name
    new = rename(db)
    return new if cat == DEFAULT_CATALOG else qualify_db_name(cat, new)


def rename_args(plan: MethodPlan, args: list[Any], r: Renamer) -> None:
    """Rename, in place, every database/table name in ``args`` (the Thrift positional arguments)."""
    for i, tbl in plan.db_args:
        db = args[i]
        if db is None:
            continue
        if tbl is not None and args[tbl] is not None:
            args[tbl] = r.table(db, args[tbl])
        args[i] = r.db(db)
    for i, how in plan.struct_args:
        _visit(args[i], how, r)
