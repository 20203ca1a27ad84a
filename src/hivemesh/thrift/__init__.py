"""Thrift plumbing: the HMS server (bytes <-> calls on a catalog object) and name parsing."""

from hive_metastore import ttypes as _hms_ttypes

from hivemesh.thrift.compat import add_notification_filters, add_table_txn_list, allow_exception_chaining

allow_exception_chaining(_hms_ttypes)
add_notification_filters()
add_table_txn_list()
