"""Hive's formats, without I/O: names, transaction and write-id lists, column types, statistics
rules, notification event messages, and the Thrift types of the HMS API as hivemesh uses them.

Importing this package adjusts the generated ``hive_metastore`` Thrift types once
(:mod:`hivemesh.hive.thrift_types`): exceptions that chain, the notification filters of Hive 4,
and a table's txn list field. Every layer above reaches the HMS types through here.
"""

from hive_metastore import ttypes as _hms_ttypes

from hivemesh.hive.thrift_types import add_notification_filters, add_table_txn_list, allow_exception_chaining

allow_exception_chaining(_hms_ttypes)
add_notification_filters()
add_table_txn_list()
