"""Hive ACID tables: their on-disk format and the statements that read and write them.

Modules, lowest first: :mod:`~hivemesh.acid.names` (directory and file names, bucket property,
flush lengths), :mod:`~hivemesh.acid.orcfile` (one full-ACID ORC file), :mod:`~hivemesh.acid.tables`
(transactional ``Table`` objects), :mod:`~hivemesh.acid.selection` (which files a snapshot reads),
:mod:`~hivemesh.acid.arrow_reader` (reading them with pyarrow), :mod:`~hivemesh.acid.files` (writing
delta files, no metastore), :mod:`~hivemesh.acid.statement` (one Hive write statement: txn, lock,
write id, partitions, commit or abort), :mod:`~hivemesh.acid.writer` (INSERT/DELETE/UPDATE) and
:mod:`~hivemesh.acid.streaming` (Hive Streaming). Storage goes through :mod:`hivemesh.storage`.

The transaction snapshots (ValidTxnList, ValidWriteIdList) live in :mod:`hivemesh.hive.txn_lists`
and are re-exported here.
"""

from hivemesh.hive.txn_lists import (
    LONG_MAX,
    VALID_TABLES_WRITEIDS_KEY,
    VALID_TXNS_KEY,
    VALID_WRITEIDS_KEY,
    RangeResponse,
    ValidTxnList,
    ValidTxnWriteIdList,
    ValidWriteIdList,
)

__all__ = [
    "LONG_MAX",
    "VALID_TABLES_WRITEIDS_KEY",
    "VALID_TXNS_KEY",
    "VALID_WRITEIDS_KEY",
    "RangeResponse",
    "ValidTxnList",
    "ValidTxnWriteIdList",
    "ValidWriteIdList",
]
