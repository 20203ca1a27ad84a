"""Hive ACID: transaction snapshots (ValidTxnList, ValidWriteIdList) and, later, the on-disk format."""

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
