"""Work-arounds for the generated HMS Thrift bindings.

Thrift >= 0.14 generates exception classes whose ``__setattr__`` refuses every attribute, including
the ones Python itself sets while an exception propagates (``__traceback__``, ``__cause__``,
``__context__``): ``raise X from e`` and re-raising through ``contextlib`` then fail with
"can't modify immutable instance". :func:`allow_exception_chaining` lets those dunder attributes
through while keeping the declared fields immutable.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

from hive_metastore import ThriftHiveMetastore, ttypes
from hive_metastore.ttypes import NotificationEventRequest, TableValidWriteIds
from thrift.Thrift import TException, TType

_PYTHON_ATTRS = frozenset({"__traceback__", "__cause__", "__context__", "__suppress_context__", "__notes__"})


def _setattr(self: object, name: str, value: object) -> None:
    if name in _PYTHON_ATTRS:
        BaseException.__setattr__(self, name, value)
        return
    raise TypeError("can't modify immutable instance")


def allow_exception_chaining(*modules: ModuleType) -> None:
    """Patch every immutable TException subclass in ``modules`` (idempotent)."""
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, TException)
                and cls.__module__ == module.__name__
                and "__setattr__" in cls.__dict__
            ):
                cls.__setattr__ = _setattr  # type: ignore[method-assign]


_NOTIFICATION_FILTERS = (
    (4, "catName", None),
    (5, "dbName", None),
    (6, "tableNames", (11, "UTF8", False)),
    (7, "eventTypeList", (11, "UTF8", False)),
)


def add_notification_filters() -> None:
    """Teach ``NotificationEventRequest`` the filter fields of newer Hive IDLs (idempotent).

    The bindings shipped with pyiceberg stop at field 3 (eventTypeSkipList); Hive 4 adds
    ``4: catName``, ``5: dbName``, ``6: tableNames`` and Hive 4.1 ``7: eventTypeList``, which
    clients such as Hive's replication send. Without this they would be skipped on decode.
    The accelerated protocols use the extended spec; the pure-Python fallback still skips them.
    """

    cls: Any = NotificationEventRequest
    if getattr(cls, "_hivemesh_filters", False):
        return
    spec = list(cls.thrift_spec)
    for fid, name, elem in _NOTIFICATION_FILTERS:
        while len(spec) <= fid:
            spec.append(None)
        spec[fid] = (fid, TType.LIST, name, elem, None) if elem else (fid, TType.STRING, name, "UTF8", None)
    cls.thrift_spec = tuple(spec)
    base_init = cls.__init__

    def __init__(  # noqa: N803 - Thrift field names
        self: Any,
        lastEvent: int | None = None,
        maxEvents: int | None = None,
        eventTypeSkipList: list[str] | None = None,
        **filters: Any,
    ) -> None:
        base_init(self, lastEvent, maxEvents, eventTypeSkipList)
        for _, name, _ in _NOTIFICATION_FILTERS:
            setattr(self, name, filters.pop(name, None))
        if filters:
            raise TypeError(f"unexpected NotificationEventRequest fields: {sorted(filters)}")

    cls.__init__ = __init__
    ThriftHiveMetastore.get_next_notification_args.thrift_spec[1][3][1] = cls.thrift_spec
    cls._hivemesh_filters = True


TABLE_TXN_LIST_FIELD = 50
"""Field id of ``TableValidWriteIds.hivemeshValidTxnList`` (a hivemesh proxy extension)."""


def add_table_txn_list() -> None:
    """Teach ``TableValidWriteIds`` field 50, ``hivemeshValidTxnList`` (idempotent).

    A hivemesh proxy answers ``get_valid_write_ids`` for a table of a member other than its primary
    with that member's own ValidTxnList in this field (format: Hive ValidReadTxnList.writeToString):
    the member's txn ids are not the primary's, so a reader must judge that table's compacted
    ``base_N_vT`` directories with it. Other clients skip the unknown field, as Thrift does.
    """

    cls: Any = TableValidWriteIds
    if getattr(cls, "_hivemesh_txn_list", False):
        return
    spec = list(cls.thrift_spec)
    while len(spec) <= TABLE_TXN_LIST_FIELD:
        spec.append(None)
    spec[TABLE_TXN_LIST_FIELD] = (TABLE_TXN_LIST_FIELD, TType.STRING, "hivemeshValidTxnList", "UTF8", None)
    cls.thrift_spec = tuple(spec)
    cls.hivemeshValidTxnList = None
    _repoint_nested_specs(cls)
    cls._hivemesh_txn_list = True


def _repoint_nested_specs(cls: type) -> None:
    """Structs that contain ``cls`` carry ``[cls, spec]`` lists filled when the bindings were
    loaded; point them at ``cls``'s current spec (the C codecs read the nested one)."""

    def walk(spec: object) -> None:
        if isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], type):
            if spec[0] is cls:  # a reference to a struct: not walked into (specs may be cyclic)
                spec[1] = getattr(cls, "thrift_spec")  # noqa: B009 - set at run time by Thrift
            return
        if isinstance(spec, (tuple, list)):
            for item in spec:
                if isinstance(item, (tuple, list)):
                    walk(item)

    for module in (ttypes, ThriftHiveMetastore):
        for _, struct in inspect.getmembers(module, inspect.isclass):
            walk(getattr(struct, "thrift_spec", None) or ())
