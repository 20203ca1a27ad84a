"""Tables of transactions, write ids, locks and the notification log (Hive's ``TXNS``, ``HIVE_LOCKS`` ...).

Named after Hive's ``hive-schema-4.*.sql`` so that operators find their way. Differences: ``TXNS``
keeps committed transactions (state ``c``, with ``TXN_ENDED``) until the housekeeper removes them
after the retention, instead of moving them to ``COMPLETED_TXN_COMPONENTS``; ``TXN_COMPONENTS`` keeps
the tables and partitions a transaction wrote (for the COMMIT_TXN event and ``add_dynamic_partitions``).
Created by Alembic revision 0002. Times are epoch milliseconds unless a column says otherwise.
"""

from __future__ import annotations

import sqlalchemy as sa

from hivemesh.metastore.schema import metadata

Long = sa.BigInteger()

# Single-row counters. Each is read FOR UPDATE by the transaction that takes the next value, so ids
# are handed out in commit order with no gaps and never reused.
NEXT_TXN_ID = sa.Table("NEXT_TXN_ID", metadata, sa.Column("NTXN_NEXT", Long, nullable=False))
NEXT_LOCK_ID = sa.Table("NEXT_LOCK_ID", metadata, sa.Column("NL_NEXT", Long, nullable=False))
NOTIFICATION_SEQUENCE = sa.Table(
    "NOTIFICATION_SEQUENCE",
    metadata,
    sa.Column("NNI_ID", Long, primary_key=True, autoincrement=False),
    sa.Column("NEXT_EVENT_ID", Long, nullable=False),
)

TXNS = sa.Table(
    "TXNS",
    metadata,
    sa.Column("TXN_ID", Long, primary_key=True, autoincrement=False),
    sa.Column("TXN_STATE", sa.String(1), nullable=False),  # o open, a aborted, c committed
    sa.Column("TXN_STARTED", Long, nullable=False),
    sa.Column("TXN_LAST_HEARTBEAT", Long, nullable=False),
    sa.Column("TXN_ENDED", Long),
    sa.Column("TXN_USER", sa.String(128), nullable=False, server_default=""),
    sa.Column("TXN_HOST", sa.String(128), nullable=False, server_default=""),
    sa.Column("TXN_AGENT_INFO", sa.String(128)),
    sa.Column("TXN_META_INFO", sa.String(128)),
    sa.Column("TXN_HEARTBEAT_COUNT", sa.Integer, nullable=False, server_default="0"),
    sa.Column("TXN_TYPE", sa.Integer, nullable=False, server_default="0"),
    sa.Index("TXNS_STATE", "TXN_STATE", "TXN_ID"),
)

TXN_COMPONENTS = sa.Table(
    "TXN_COMPONENTS",
    metadata,
    sa.Column("TC_TXNID", Long, nullable=False),
    sa.Column("TC_DATABASE", sa.String(128), nullable=False),
    sa.Column("TC_TABLE", sa.String(256)),
    sa.Column("TC_PARTITION", sa.String(767)),
    sa.Column("TC_OPERATION_TYPE", sa.String(1), nullable=False),  # i insert, u update, d delete, ...
    sa.Column("TC_WRITEID", Long),
    sa.Index("TC_TXNID_INDEX", "TC_TXNID"),
)

TXN_TO_WRITE_ID = sa.Table(
    "TXN_TO_WRITE_ID",
    metadata,
    sa.Column("T2W_TXNID", Long, nullable=False),
    sa.Column("T2W_DATABASE", sa.String(128), nullable=False),
    sa.Column("T2W_TABLE", sa.String(256), nullable=False),
    sa.Column("T2W_WRITEID", Long, nullable=False),
    sa.UniqueConstraint("T2W_DATABASE", "T2W_TABLE", "T2W_TXNID", name="TBL_TO_TXN_ID_IDX"),
    sa.UniqueConstraint("T2W_DATABASE", "T2W_TABLE", "T2W_WRITEID", name="TBL_TO_WRITE_ID_IDX"),
)

NEXT_WRITE_ID = sa.Table(
    "NEXT_WRITE_ID",
    metadata,
    sa.Column("NWI_DATABASE", sa.String(128), nullable=False),
    sa.Column("NWI_TABLE", sa.String(256), nullable=False),
    sa.Column("NWI_NEXT", Long, nullable=False),
    sa.PrimaryKeyConstraint("NWI_DATABASE", "NWI_TABLE"),
)

# Source txn id -> target txn id, for transactions opened by replication (open_txns with replPolicy).
REPL_TXN_MAP = sa.Table(
    "REPL_TXN_MAP",
    metadata,
    sa.Column("RTM_REPL_POLICY", sa.String(256), nullable=False),
    sa.Column("RTM_SRC_TXN_ID", Long, nullable=False),
    sa.Column("RTM_TARGET_TXN_ID", Long, nullable=False),
    sa.PrimaryKeyConstraint("RTM_REPL_POLICY", "RTM_SRC_TXN_ID"),
)

HIVE_LOCKS = sa.Table(
    "HIVE_LOCKS",
    metadata,
    sa.Column("HL_LOCK_EXT_ID", Long, nullable=False),
    sa.Column("HL_LOCK_INT_ID", Long, nullable=False),
    sa.Column("HL_TXNID", Long, nullable=False, server_default="0"),
    sa.Column("HL_DB", sa.String(128), nullable=False),
    sa.Column("HL_TABLE", sa.String(256)),
    sa.Column("HL_PARTITION", sa.String(767)),
    sa.Column("HL_LOCK_STATE", sa.String(1), nullable=False),  # a acquired, w waiting
    sa.Column(
        "HL_LOCK_TYPE", sa.String(1), nullable=False
    ),  # e exclusive, x excl_write, w shared_write, r shared_read
    sa.Column("HL_LAST_HEARTBEAT", Long, nullable=False),
    sa.Column("HL_ACQUIRED_AT", Long),
    sa.Column("HL_USER", sa.String(128), nullable=False, server_default=""),
    sa.Column("HL_HOST", sa.String(128), nullable=False, server_default=""),
    sa.Column("HL_HEARTBEAT_COUNT", sa.Integer, nullable=False, server_default="0"),
    sa.Column("HL_AGENT_INFO", sa.String(128)),
    sa.Column("HL_BLOCKEDBY_EXT_ID", Long),
    sa.Column("HL_BLOCKEDBY_INT_ID", Long),
    sa.PrimaryKeyConstraint("HL_LOCK_EXT_ID", "HL_LOCK_INT_ID"),
    sa.Index("HL_TXNID_INDEX", "HL_TXNID"),
    sa.Index("HL_DB_TABLE_INDEX", "HL_DB", "HL_TABLE"),
)

NOTIFICATION_LOG = sa.Table(
    "NOTIFICATION_LOG",
    metadata,
    sa.Column("NL_ID", Long, primary_key=True, autoincrement=False),
    sa.Column("EVENT_ID", Long, nullable=False),
    sa.Column("EVENT_TIME", sa.Integer, nullable=False),  # seconds, as in Hive
    sa.Column("EVENT_TYPE", sa.String(32), nullable=False),
    sa.Column("CAT_NAME", sa.String(256)),
    sa.Column("DB_NAME", sa.String(128)),
    sa.Column("TBL_NAME", sa.String(256)),
    sa.Column("MESSAGE", sa.Text),
    sa.Column("MESSAGE_FORMAT", sa.String(16)),
    sa.UniqueConstraint("EVENT_ID", name="NOTIFICATION_LOG_EVENT_ID"),
    sa.Index("NOTIFICATION_LOG_TIME", "EVENT_TIME"),
)

# For each open txn, the lowest txn id that was open when it started (its snapshot's lower bound):
# committed txns below the minimum of these may be purged without changing any reader's snapshot.
MIN_HISTORY_LEVEL = sa.Table(
    "MIN_HISTORY_LEVEL",
    metadata,
    sa.Column("MHL_TXNID", Long, primary_key=True, autoincrement=False),
    sa.Column("MHL_MIN_OPEN_TXNID", Long, nullable=False),
)

# ACID writes reported by add_write_notification_log: get_all_write_event_info reads them (Hive's
# replication dump, hivemesh's replication on COMMIT_TXN); kept after the txn ends until the event
# retention.
TXN_WRITE_NOTIFICATION_LOG = sa.Table(
    "TXN_WRITE_NOTIFICATION_LOG",
    metadata,
    sa.Column(
        "WNL_ID", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    sa.Column("WNL_TXNID", Long, nullable=False),
    sa.Column("WNL_WRITEID", Long, nullable=False),
    sa.Column("WNL_DATABASE", sa.String(128), nullable=False),
    sa.Column("WNL_TABLE", sa.String(256), nullable=False),
    sa.Column("WNL_PARTITION", sa.String(767), nullable=False, server_default=""),
    sa.Column("WNL_TABLE_OBJ", sa.Text, nullable=False),
    sa.Column("WNL_PARTITION_OBJ", sa.Text),
    sa.Column("WNL_FILES", sa.Text),
    sa.Column("WNL_EVENT_TIME", sa.Integer, nullable=False),
    sa.Index("WNL_TXNID_INDEX", "WNL_TXNID"),
)

# Updates and deletes of committed txns (Hive's WRITE_SET): what get_latest_txnid_in_conflict
# compares an open txn's own updates and deletes with. WS_COMMIT_ID is the highest txn id handed out
# when the txn committed, so a committed txn overlapped an open one when WS_COMMIT_ID >= its id.
# Rows go when no open txn can overlap them any more (the housekeeper's txn purge). Created by
# Alembic revision 0006 (not in TXN_TABLES: revision 0002 stays as it was).
WRITE_SET = sa.Table(
    "WRITE_SET",
    metadata,
    sa.Column("WS_DATABASE", sa.String(128), nullable=False),
    sa.Column("WS_TABLE", sa.String(256), nullable=False),
    sa.Column("WS_PARTITION", sa.String(767)),
    sa.Column("WS_TXNID", Long, nullable=False),
    sa.Column("WS_COMMIT_ID", Long, nullable=False),
    sa.Column("WS_OPERATION_TYPE", sa.String(1), nullable=False),
    sa.Index("WRITE_SET_TABLE", "WS_DATABASE", "WS_TABLE"),
)

TXN_TABLES = [
    "NEXT_TXN_ID", "NEXT_LOCK_ID", "NOTIFICATION_SEQUENCE", "TXNS", "TXN_COMPONENTS", "TXN_TO_WRITE_ID",
    "NEXT_WRITE_ID", "REPL_TXN_MAP", "HIVE_LOCKS", "NOTIFICATION_LOG", "TXN_WRITE_NOTIFICATION_LOG",
    "MIN_HISTORY_LEVEL",
]  # fmt: skip
