"""The HMS interface as data: its methods, their argument and result structs, and the request forms
that mean the same as an older plain call.

Derived from the generated ``hive_metastore.ThriftHiveMetastore`` (the Hive 4 IDL) wherever the IDL
says it; only the pairing of a request form with its plain call is written by hand
(:data:`REQUEST_FORMS`). Used by the Thrift processor (which methods a handler implements, which
exceptions a method declares), the metastore's request-form methods, and the federation proxy
(which calls it routes, and which equivalent call it sends to a member that lacks one).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hive_metastore import ThriftHiveMetastore, ttypes
from thrift.Thrift import TException, TType

from hivemesh.hive.names import db_ref, parse_db_name

_IFACE: Any = ThriftHiveMetastore.Iface

METHODS: frozenset[str] = frozenset(n for n in dir(_IFACE) if not n.startswith("_"))
"""Every method of the HMS interface (Hive 4 IDL, fb303 included)."""


def implemented_methods(handler: object) -> frozenset[str]:
    """Names of the HMS methods ``handler`` really implements: callables its class defines or
    its instance holds, not the interface's unimplemented stubs it may inherit."""
    names = set()
    for name in METHODS:
        impl = getattr(handler, name, None)
        if callable(impl) and getattr(impl, "__func__", impl) is not getattr(_IFACE, name, None):
            names.add(name)
    return frozenset(names)


@functools.cache
def args_struct(method: str) -> Any:
    """The generated ``<method>_args`` struct class (its fields are the call's arguments)."""
    return getattr(ThriftHiveMetastore, f"{method}_args")


@functools.cache
def result_struct(method: str) -> Any:
    """The generated ``<method>_result`` struct class: ``success`` (when the call returns a
    value), then one field per declared exception. AttributeError for an unknown method."""
    return getattr(ThriftHiveMetastore, f"{method}_result")


def positional_args(args: Any) -> list[Any]:
    """The values of a decoded ``<method>_args`` struct, in the order of the call's arguments."""
    return [getattr(args, f[2]) for f in args.thrift_spec or () if f]


@functools.cache
def returns_value(method: str) -> bool:
    """True when ``method`` returns a value (its result struct has ``success``)."""
    return any(f and f[2] == "success" for f in result_struct(method).thrift_spec or ())


@functools.cache
def declared_exceptions(method: str) -> dict[str, type[Exception]]:
    """Result field name -> exception class, for the HMS exceptions ``method`` declares (in IDL
    order); empty for an unknown method."""
    cls = getattr(ThriftHiveMetastore, f"{method}_result", None)
    if cls is None:
        return {}
    return {f[2]: f[3][0] for f in cls.thrift_spec or () if f and f[2] != "success" and f[3]}


def result_field_class(method: str, field_id: int) -> type | None:
    """The struct class of field ``field_id`` of ``method``'s result (0: ``success``), or None
    when that field is not a struct or not declared."""
    spec = result_struct(method).thrift_spec or ()
    entry = spec[field_id] if 0 <= field_id < len(spec) else None
    return entry[3][0] if entry and isinstance(entry[3], list) else None


def _success_class(method: str) -> type | None:
    return result_field_class(method, 0)


@dataclass(frozen=True)
class RequestForm:
    """A request-struct call (``get_fields_req(req)``) that means the same as a plain call
    (``get_fields(db_name, tbl_name)``).

    ``args``: the request fields giving the plain call's positional arguments, in order (the first
    names the database); ``empty``: what a field left None is sent as (lists are copied);
    ``answer_field``: the response field holding the plain call's answer (None: the response
    carries nothing, or is the plain answer itself when both calls return the same struct);
    ``many``: the plain answer is a list (a response field left None reads as ``[]``).
    """

    method: str
    plain: str
    args: tuple[str, ...]
    answer_field: str | None = None
    empty: Mapping[str, Any] = field(default_factory=dict)
    many: bool = False

    @property
    def request(self) -> Any:
        """The request struct class (the one argument of :attr:`method`)."""
        return args_struct(self.method).thrift_spec[1][3][0]

    @property
    def response(self) -> Any:
        """The response struct class :attr:`method` returns."""
        return _success_class(self.method)

    def plain_args(self, req: Any, *, with_catalog: bool = False) -> list[Any]:
        """The plain call's positional arguments from request ``req``; ``with_catalog``: the
        database as ``@cat#db`` when the request names a catalog (``catName``)."""
        out = []
        for i, name in enumerate(self.args):
            value = getattr(req, name)
            if value is None and name in self.empty:
                value = copy.copy(self.empty[name])
            if i == 0 and with_catalog:
                value = db_ref(value, getattr(req, "catName", None))
            out.append(value)
        return out

    def build(self, plain_args: list[Any]) -> Any:
        """The request struct for a plain call's arguments (``@cat#db`` becomes ``dbName`` and
        ``catName``)."""
        values: dict[str, Any] = {}
        for i, (name, value) in enumerate(zip(self.args, plain_args, strict=False)):
            if value is None and name in self.empty:
                value = copy.copy(self.empty[name])
            elif isinstance(self.empty.get(name), list):
                value = list(value)
            if i == 0 and isinstance(value, str) and value.startswith("@"):
                values["catName"], value = parse_db_name(value)
            values[name] = value
        return self.request(**values)

    def wrap(self, answer: Any) -> Any:
        """The response of :attr:`method` for the plain call's ``answer``."""
        if self.answer_field is not None:
            return self.response(**{self.answer_field: answer})
        if self.response is _success_class(self.plain):
            return answer
        return self.response()

    def unwrap(self, response: Any) -> Any:
        """The plain call's answer from a response of :attr:`method`."""
        if self.answer_field is None:
            return response
        value = getattr(response, self.answer_field)
        return list(value or []) if self.many else value


_FORMS = (
    RequestForm("get_database_req", "get_database", ("name",)),
    RequestForm("get_table_req", "get_table", ("dbName", "tblName"), "table"),
    RequestForm(
        "get_table_objects_by_name_req",
        "get_table_objects_by_name",
        ("dbName", "tblNames"),
        "tables",
        empty={"tblNames": []},
        many=True,
    ),
    RequestForm("get_fields_req", "get_fields", ("dbName", "tblName"), "fields", many=True),
    RequestForm("get_schema_req", "get_schema", ("dbName", "tblName"), "fields", many=True),
    RequestForm(
        "get_partitions_req",
        "get_partitions",
        ("dbName", "tblName", "maxParts"),
        "partitions",
        empty={"maxParts": -1},
        many=True,
    ),
    RequestForm(
        "get_partitions_by_names_req",
        "get_partitions_by_names",
        ("db_name", "tbl_name", "names"),
        "partitions",
        empty={"names": []},
        many=True,
    ),
    RequestForm("get_partition_req", "get_partition", ("dbName", "tblName", "partVals"), "partition"),
    RequestForm(
        "get_partition_names_ps_req",
        "get_partition_names_ps",
        ("dbName", "tblName", "partValues", "maxParts"),
        "names",
        empty={"partValues": [], "maxParts": -1},
        many=True,
    ),
    RequestForm(
        "get_partitions_ps_with_auth_req",
        "get_partitions_ps",
        ("dbName", "tblName", "partVals", "maxParts"),
        "partitions",
        empty={"partVals": [], "maxParts": -1},
        many=True,
    ),
    RequestForm("rename_partition_req", "rename_partition", ("dbName", "tableName", "partVals", "newPart")),
)
REQUEST_FORMS: Mapping[str, RequestForm] = {f.method: f for f in _FORMS}
"""Request-form method -> how it maps to its plain call."""


# I32 fields whose values are Thrift enums: (struct name, field name) -> the enum class name
_ENUM_FIELDS = {
    ("LockComponent", "type"): "LockType",
    ("LockComponent", "level"): "LockLevel",
    ("LockComponent", "operationType"): "DataOperationType",
    ("OpenTxnRequest", "txn_type"): "TxnType",
    ("AddDynamicPartitions", "operationType"): "DataOperationType",
}


# Structs whose required fields are checked: those of transactions, locks, notifications and
# column statistics, which every client fills. Not all: the generated IDL marks some fields
# required that Hive 4.2 accepts unset (``engine`` of the statistics requests, added later).
_VALIDATED = frozenset({
    "OpenTxnRequest", "CommitTxnRequest", "AbortTxnRequest", "AbortTxnsRequest", "LockRequest",
    "LockComponent", "CheckLockRequest", "UnlockRequest", "HeartbeatTxnRangeRequest",
    "NotificationEventRequest", "AllocateTableWriteIdsRequest", "GetValidWriteIdsRequest",
    "ColumnStatistics", "ColumnStatisticsObj", "ColumnStatisticsDesc",
})  # fmt: skip
_CHECKED: dict[type, bool] = {}


def _needs_check(cls: type) -> bool:
    """Whether a struct class, or one it holds at any depth, has a required or an enum field
    (most do not: a Partition with its storage descriptor is then not walked at all)."""
    if cls in _CHECKED:
        return _CHECKED[cls]
    _CHECKED[cls] = False  # a cycle adds nothing
    own = cls.__name__ in _VALIDATED or any(k[0] == cls.__name__ for k in _ENUM_FIELDS)
    nested = False
    for f in getattr(cls, "thrift_spec", None) or ():
        if not f:
            continue
        if f[1] == TType.STRUCT:
            nested = nested or _needs_check(f[3][0])
        elif f[1] == TType.LIST and f[3] and f[3][0] == TType.STRUCT:
            nested = nested or _needs_check(f[3][1][0])
    _CHECKED[cls] = own or nested
    return _CHECKED[cls]


def _struct_problem(value: Any, path: str) -> str | None:
    if not _needs_check(type(value)):
        return None
    cls = type(value).__name__
    if cls in _VALIDATED:
        try:
            value.validate()
        except TException as e:
            return f"{path}: {getattr(e, 'message', None) or e}"
    for f in value.thrift_spec or ():
        if not f:
            continue
        _, ttype, fname, fargs, _default = f
        v = getattr(value, fname, None)
        if v is None:
            continue
        enum = _ENUM_FIELDS.get((cls, fname))
        if enum is not None and v not in getattr(ttypes, enum)._VALUES_TO_NAMES:
            return f"{path}.{fname}: {v!r} is not a {enum}"
        if ttype == TType.STRUCT and hasattr(v, "validate"):
            problem = _struct_problem(v, f"{path}.{fname}")
        elif ttype == TType.LIST and fargs and fargs[0] == TType.STRUCT:
            problem = next(
                (
                    p
                    for i, x in enumerate(v)
                    if x is not None and (p := _struct_problem(x, f"{path}.{fname}[{i}]"))
                ),
                None,
            )
        else:
            problem = None
        if problem is not None:
            return problem
    return None


def argument_problem(method: str, args: Sequence[Any]) -> tuple[bool, str] | None:
    """What makes the arguments of a call to ``method`` invalid before any work, or None.

    ``(False, text)``: the first argument, a struct (the call's request or subject), is missing;
    later struct arguments (an EnvironmentContext, ...) are optional. A Java server reads such a
    call and its handler fails: MetaException where declared, else an internal error.
    ``(True, text)``: a required field is unset in a struct of :data:`_VALIDATED` at any depth,
    or an enum field holds a value out of its enum; a Java server cannot even read such a call
    (a protocol error). Text such as ``rqst (CommitTxnRequest): Required field txnid is unset!``.
    """
    spec = getattr(getattr(ThriftHiveMetastore, f"{method}_args", None), "thrift_spec", None)
    fields = [f for f in spec or () if f]  # none for fb303's calls (getName, ...): no structs
    for i, (f, value) in enumerate(zip(fields, args, strict=False)):
        if f[1] != TType.STRUCT:
            continue
        label = f"{f[2]} ({f[3][0].__name__})"
        if value is None:
            if i == 0:  # the call's subject (its request, database, table); later ones are optional
                return False, f"{label}: missing"
            continue
        problem = _struct_problem(value, label)
        if problem is not None:
            return True, problem
    return None
