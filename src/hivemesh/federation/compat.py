"""Equivalent calls for members that lack one: older for newer, and newer for older.

Hive 4 clients send request-struct forms (``get_database_req``, ``get_fields_req``, ...) that a
Hive 2.3 metastore does not have; the Java metastore answers "Invalid method name" and those
clients do not fall back. Hive 4.2 in turn dropped older calls that Hive 2/3 clients (Spark's
built-in Hive 2.3 client among them) still send: ``get_table``, ``get_table_objects_by_name``.
When a member answers so, the proxy sends the call with the same meaning and converts its answer
(Waggle Dance needed per-version shims, #340). Each member remembers which methods it lacks, so
the fallback costs one round trip only once. The pairs of calls come from the table of request
forms (:data:`hivemesh.hive.hms_methods.REQUEST_FORMS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hivemesh.hive.hms_methods import REQUEST_FORMS, RequestForm

# (the equivalent method, its arguments from the original call's argument list, the original
# method's answer from the equivalent's)
Fallback = tuple[str, Callable[[list[Any]], list[Any]], Callable[[Any], Any]]

# request forms a Hive 2.3 metastore lacks (the request's catalog is dropped: Hive 2 has none)
_OLDER_FOR = (
    "get_database_req", "get_table_req", "get_table_objects_by_name_req", "get_fields_req",
    "get_schema_req", "get_partitions_req", "get_partitions_by_names_req",
)  # fmt: skip
# plain calls Hive 4.2 dropped
_NEWER_FOR = ("get_table_req", "get_table_objects_by_name_req")


def _older(form: RequestForm) -> Fallback:
    return (form.plain, lambda a: form.plain_args(a[0]), form.wrap)


def _newer(form: RequestForm) -> Fallback:
    return (form.method, lambda a: [form.build(a)], form.unwrap)


FALLBACKS: dict[str, Fallback] = {
    **{m: _older(REQUEST_FORMS[m]) for m in _OLDER_FOR},
    **{REQUEST_FORMS[m].plain: _newer(REQUEST_FORMS[m]) for m in _NEWER_FOR},
}
"""method -> (the equivalent method, its arguments, the method's answer from the equivalent's)."""
