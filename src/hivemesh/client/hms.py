"""The HMS Thrift calls hivemesh itself makes, one typed method each: :class:`HmsCalls`.

``HmsCalls(client)`` wraps a :class:`hivemesh.client.metastore.MetastoreClient` (every client has one
as ``client.hms``). Each method has the name and the positional arguments of the same method of
``hive_metastore.ThriftHiveMetastore.Client``, so an ``HmsCalls`` stands wherever a Thrift client or an
in-process metastore does (the replication :class:`~hivemesh.metastore.replay.Replayer`'s target).

- **Retries**, declared per call in :data:`RETRY`, the one place that says it: an
  :attr:`Retry.IDEMPOTENT` call (a read, or a write whose repetition answers the same, such as a
  heartbeat) is sent again on a new connection after a transport error, up to the client's
  ``retries``; a :attr:`Retry.ONCE` call (a change) is sent again only when it never left this process
  (the connection could not be opened), else the transport error is raised: the metastore may or
  may not have done it. See :meth:`MetastoreClient.call <hivemesh.client.metastore.MetastoreClient.call>`.
- **Errors**: an HMS exception the metastore answers is raised as the hivemesh error
  :data:`hivemesh.client.errors.TRANSLATED` names (``NoSuchObjectException`` ->
  :class:`~hivemesh.client.errors.NoSuchObjectError`, ...), which still is an instance of the Thrift
  class, with the same ``message``. Transport errors (TTransportException, OSError, EOFError) left
  after the retries, and TApplicationException (a method the server lacks, a server failure), pass
  unchanged.
- **Hive 4.2**: the plain calls it dropped (``get_table``, ``get_table_objects_by_name``) are sent as
  their request forms once the peer answers TApplicationException UNKNOWN_METHOD for them
  (remembered by this object, so one refusal per call per ``HmsCalls``).

Adding a call: its method here, in Thrift's name and argument order with a docstring giving the
answer's shape and the errors raised, and its entry in :data:`RETRY`; ``tests/test_hms_calls.py``
checks that both exist and match ``ThriftHiveMetastore.Iface``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Protocol, cast

from hive_metastore.ttypes import (
    AbortTxnRequest,
    AbortTxnsRequest,
    AddDynamicPartitions,
    AddPartitionsRequest,
    AddPartitionsResult,
    AllocateTableWriteIdsRequest,
    AllocateTableWriteIdsResponse,
    CheckLockRequest,
    ColumnStatistics,
    CommitTxnRequest,
    CurrentNotificationEventId,
    Database,
    EnvironmentContext,
    Function,
    GetAllWriteEventInfoRequest,
    GetOpenTxnsResponse,
    GetValidWriteIdsRequest,
    GetValidWriteIdsResponse,
    HeartbeatRequest,
    HeartbeatTxnRangeRequest,
    HeartbeatTxnRangeResponse,
    LockRequest,
    LockResponse,
    NotificationEventRequest,
    NotificationEventResponse,
    OpenTxnRequest,
    OpenTxnsResponse,
    Partition,
    PartitionsStatsRequest,
    PartitionsStatsResult,
    ReplTblWriteIdStateRequest,
    ShowLocksRequest,
    ShowLocksResponse,
    Table,
    TableStatsRequest,
    TableStatsResult,
    UnlockRequest,
    WriteEventInfo,
)
from thrift.Thrift import TApplicationException, TException

from hivemesh.client.errors import translate
from hivemesh.hive.hms_methods import REQUEST_FORMS

__all__ = ["RETRY", "Caller", "HmsCalls", "Retry"]


class Retry(enum.Enum):
    """How a call is retried after a transport error (see the module doc)."""

    IDEMPOTENT = "idempotent"
    """Sent again on a new connection: a read, or a call whose repetition answers the same."""
    ONCE = "once"
    """Sent again only when it never left this process: a change the metastore may have made."""


_IDEMPOTENT, _ONCE = Retry.IDEMPOTENT, Retry.ONCE

RETRY: Mapping[str, Retry] = {
    # reads
    "get_all_databases": _IDEMPOTENT,
    "get_all_tables": _IDEMPOTENT,
    "get_all_write_event_info": _IDEMPOTENT,
    "get_config_value": _IDEMPOTENT,
    "get_current_notificationEventId": _IDEMPOTENT,
    "get_database": _IDEMPOTENT,
    "get_function": _IDEMPOTENT,
    "get_functions": _IDEMPOTENT,
    "get_next_notification": _IDEMPOTENT,
    "get_open_txns": _IDEMPOTENT,
    "get_partition": _IDEMPOTENT,
    "get_partition_by_name": _IDEMPOTENT,
    "get_partition_names": _IDEMPOTENT,
    "get_partitions": _IDEMPOTENT,
    "get_partitions_by_filter": _IDEMPOTENT,
    "get_partitions_by_names": _IDEMPOTENT,
    "get_partitions_statistics_req": _IDEMPOTENT,
    "get_table": _IDEMPOTENT,
    "get_table_objects_by_name": _IDEMPOTENT,
    "get_table_statistics_req": _IDEMPOTENT,
    "get_valid_write_ids": _IDEMPOTENT,
    "show_locks": _IDEMPOTENT,
    # writes that answer the same when repeated
    "allocate_table_write_ids": _IDEMPOTENT,  # a txn that has a write id for the table gets it again
    "check_lock": _IDEMPOTENT,  # a poll (and heartbeat) of the lock
    "heartbeat": _IDEMPOTENT,
    "heartbeat_txn_range": _IDEMPOTENT,
    # writes
    "abort_txn": _ONCE,
    "abort_txns": _ONCE,
    "add_dynamic_partitions": _ONCE,
    "add_partition": _ONCE,
    "add_partitions_req": _ONCE,
    "alter_database": _ONCE,
    "alter_function": _ONCE,
    "alter_partitions_with_environment_context": _ONCE,
    "alter_table": _ONCE,
    "alter_table_with_environment_context": _ONCE,
    "commit_txn": _ONCE,
    "create_database": _ONCE,
    "create_function": _ONCE,
    "create_table": _ONCE,
    "create_table_with_environment_context": _ONCE,
    "delete_partition_column_statistics": _ONCE,
    "delete_table_column_statistics": _ONCE,
    "drop_database": _ONCE,
    "drop_function": _ONCE,
    "drop_partition": _ONCE,
    "drop_table": _ONCE,
    "lock": _ONCE,
    "open_txns": _ONCE,
    "rename_partition": _ONCE,
    "repl_tbl_writeid_state": _ONCE,
    "setMetaConf": _ONCE,  # a setting of the connection: lost with it anyway
    "unlock": _ONCE,
    "update_partition_column_statistics": _ONCE,
    "update_table_column_statistics": _ONCE,
}
"""HMS method -> its :class:`Retry`: one entry per method of :class:`HmsCalls`."""

# plain calls Hive 4.2 dropped -> their request forms (sent once the peer says it lacks the call)
_DROPPED_BY_HIVE4 = {
    REQUEST_FORMS[m].plain: REQUEST_FORMS[m] for m in ("get_table_req", "get_table_objects_by_name_req")
}


class Caller(Protocol):
    """What :class:`HmsCalls` sends through: :meth:`MetastoreClient.call
    <hivemesh.client.metastore.MetastoreClient.call>`."""

    def call(self, method: str, *args: Any, idempotent: bool = False) -> Any:
        """Call HMS ``method`` with ``args``; retried after a transport error as ``idempotent`` says."""
        ...


class HmsCalls:
    """The HMS calls hivemesh makes, typed, over ``client`` (a :class:`MetastoreClient
    <hivemesh.client.metastore.MetastoreClient>`): see the module doc for retries and errors.

    Every method raises, besides the errors its docstring names, the transport error left after
    the retries (TTransportException, OSError, EOFError), TApplicationException when the server
    lacks the method or fails without a declared exception, and :class:`~hivemesh.client.errors.MetaError`
    for a metastore failure (every call but the txn, lock and notification ones declares it).
    Not thread-safe, as the client under it.
    """

    def __init__(self, client: Caller):
        self.client = client
        self._missing: set[str] = set()  # plain calls the peer lacks (Hive 4.2)

    def _call(self, method: str, *args: Any) -> Any:
        """``method`` with ``args`` as :data:`RETRY` says, its HMS exceptions translated."""
        idempotent = RETRY[method] is Retry.IDEMPOTENT
        form = _DROPPED_BY_HIVE4.get(method)
        try:
            if form is not None and method in self._missing:
                return form.unwrap(
                    self.client.call(form.method, form.build(list(args)), idempotent=idempotent)
                )
            try:
                return self.client.call(method, *args, idempotent=idempotent)
            except TApplicationException as e:
                if form is None or e.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                self._missing.add(method)
            return self._call(method, *args)
        except TException as e:
            translated = translate(e)
            if translated is e:
                raise
            raise translated from e

    # ------------------------------------------------------------------ databases
    def get_all_databases(self) -> list[str]:
        """Names of every database (of the default catalog)."""
        return cast(list[str], self._call("get_all_databases"))

    def get_database(self, name: str) -> Database:
        """Database ``name``. Raises NoSuchObjectError when there is none."""
        return self._call("get_database", name)

    def create_database(self, database: Database) -> None:
        """Create ``database``. Raises AlreadyExistsError when it exists, InvalidObjectError when it is
        not valid."""
        self._call("create_database", database)

    def alter_database(self, dbname: str, db: Database) -> None:
        """Replace database ``dbname``'s definition with ``db``. Raises NoSuchObjectError when there is
        none."""
        self._call("alter_database", dbname, db)

    def drop_database(self, name: str, deleteData: bool, cascade: bool) -> None:
        """Drop database ``name`` (its data too with ``deleteData``; its tables and functions too with
        ``cascade``). Raises NoSuchObjectError when there is none, InvalidOperationError when it is not
        empty and not ``cascade``."""
        self._call("drop_database", name, deleteData, cascade)

    # ------------------------------------------------------------------ tables
    def get_all_tables(self, db_name: str) -> list[str]:
        """Names of every table and view of database ``db_name`` (``[]`` for an unknown database on
        most servers)."""
        return cast(list[str], self._call("get_all_tables", db_name))

    def get_table(self, dbname: str, tbl_name: str) -> Table:
        """Table ``dbname.tbl_name`` (``get_table_req`` to a Hive 4.2 peer). Raises NoSuchObjectError when
        there is none."""
        return self._call("get_table", dbname, tbl_name)

    def get_table_objects_by_name(self, dbname: str, tbl_names: list[str]) -> list[Table]:
        """The tables of ``dbname`` named in ``tbl_names`` that exist (``get_table_objects_by_name_req``
        to a Hive 4.2 peer). Raises InvalidOperationError or UnknownDBError for a bad database name."""
        return cast(list[Table], self._call("get_table_objects_by_name", dbname, tbl_names))

    def create_table(self, tbl: Table) -> None:
        """Create table ``tbl``. Raises AlreadyExistsError when it exists, InvalidObjectError when it is not
        valid or its database does not exist (NoSuchObjectError from some servers)."""
        self._call("create_table", tbl)

    def create_table_with_environment_context(
        self, tbl: Table, environment_context: EnvironmentContext | None
    ) -> None:
        """:meth:`create_table` with an ``environment_context`` (e.g. ``DO_NOT_UPDATE_STATS``). Raises as
        :meth:`create_table`."""
        self._call("create_table_with_environment_context", tbl, environment_context)

    def alter_table(self, dbname: str, tbl_name: str, new_tbl: Table) -> None:
        """Replace table ``dbname.tbl_name`` with ``new_tbl`` (a rename when its names differ). Raises
        InvalidOperationError when there is no such table or the change is refused."""
        self._call("alter_table", dbname, tbl_name, new_tbl)

    def alter_table_with_environment_context(
        self, dbname: str, tbl_name: str, new_tbl: Table, environment_context: EnvironmentContext | None
    ) -> None:
        """:meth:`alter_table` with an ``environment_context``. Raises as :meth:`alter_table`."""
        self._call("alter_table_with_environment_context", dbname, tbl_name, new_tbl, environment_context)

    def drop_table(self, dbname: str, name: str, deleteData: bool) -> None:
        """Drop table ``dbname.name`` (a managed table's data too with ``deleteData``). Raises
        NoSuchObjectError when there is none."""
        self._call("drop_table", dbname, name, deleteData)

    # ------------------------------------------------------------------ partitions
    def get_partition_names(self, db_name: str, tbl_name: str, max_parts: int) -> list[str]:
        """Hive names (``k=v/k2=v2``) of at most ``max_parts`` (-1: all) partitions of the table.
        Raises NoSuchObjectError when there is no such table."""
        return cast(list[str], self._call("get_partition_names", db_name, tbl_name, max_parts))

    def get_partitions(self, db_name: str, tbl_name: str, max_parts: int) -> list[Partition]:
        """At most ``max_parts`` (-1: all) partitions of the table. Raises NoSuchObjectError when there is
        no such table."""
        return cast(list[Partition], self._call("get_partitions", db_name, tbl_name, max_parts))

    def get_partitions_by_filter(
        self, db_name: str, tbl_name: str, filter: str, max_parts: int
    ) -> list[Partition]:
        """At most ``max_parts`` (-1: all) partitions of the table matching the Hive ``filter``
        (``ds >= '2024-01-01'``). Raises NoSuchObjectError when there is no such table, MetaError for a
        filter the metastore cannot read."""
        return cast(
            list[Partition], self._call("get_partitions_by_filter", db_name, tbl_name, filter, max_parts)
        )

    def get_partitions_by_names(self, db_name: str, tbl_name: str, names: list[str]) -> list[Partition]:
        """The partitions of the table named (Hive names) in ``names`` that exist. Raises
        NoSuchObjectError when there is no such table."""
        return cast(list[Partition], self._call("get_partitions_by_names", db_name, tbl_name, names))

    def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Partition:
        """The table's partition with values ``part_vals`` (key order). Raises NoSuchObjectError when
        there is none."""
        return self._call("get_partition", db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Partition:
        """The table's partition of Hive name ``part_name``. Raises NoSuchObjectError when there is
        none."""
        return self._call("get_partition_by_name", db_name, tbl_name, part_name)

    def add_partition(self, new_part: Partition) -> Partition:
        """Create partition ``new_part``; the partition as created. Raises AlreadyExistsError when it
        exists, InvalidObjectError when its table does not or it is not valid."""
        return self._call("add_partition", new_part)

    def add_partitions_req(self, request: AddPartitionsRequest) -> AddPartitionsResult:
        """Create the request's partitions (those existing skipped with ``ifNotExists``); the created
        ones when ``needResult``. Raises AlreadyExistsError, InvalidObjectError as :meth:`add_partition`."""
        return self._call("add_partitions_req", request)

    def alter_partitions_with_environment_context(
        self,
        db_name: str,
        tbl_name: str,
        new_parts: list[Partition],
        environment_context: EnvironmentContext | None,
    ) -> None:
        """Replace the table's partitions having the values of ``new_parts`` with them. Raises
        InvalidOperationError when one does not exist or the change is refused."""
        self._call(
            "alter_partitions_with_environment_context", db_name, tbl_name, new_parts, environment_context
        )

    def rename_partition(
        self, db_name: str, tbl_name: str, part_vals: list[str], new_part: Partition
    ) -> None:
        """Give the partition with values ``part_vals`` the values (and location) of ``new_part``. Raises
        InvalidOperationError when it does not exist or the new one does."""
        self._call("rename_partition", db_name, tbl_name, part_vals, new_part)

    def drop_partition(self, db_name: str, tbl_name: str, part_vals: list[str], deleteData: bool) -> bool:
        """Drop the partition with values ``part_vals`` (its data too with ``deleteData`` for a managed
        table); True when dropped. Raises NoSuchObjectError when there is none."""
        return cast(bool, self._call("drop_partition", db_name, tbl_name, part_vals, deleteData))

    # ------------------------------------------------------------------ functions
    def get_functions(self, dbName: str, pattern: str) -> list[str]:
        """Names of database ``dbName``'s functions matching the Hive ``pattern`` (``*`` for all)."""
        return cast(list[str], self._call("get_functions", dbName, pattern))

    def get_function(self, dbName: str, funcName: str) -> Function:
        """Function ``dbName.funcName``. Raises NoSuchObjectError when there is none."""
        return self._call("get_function", dbName, funcName)

    def create_function(self, func: Function) -> None:
        """Create function ``func``. Raises AlreadyExistsError when it exists, NoSuchObjectError or
        InvalidObjectError when its database does not exist, InvalidObjectError when it is not valid."""
        self._call("create_function", func)

    def alter_function(self, dbName: str, funcName: str, newFunc: Function) -> None:
        """Replace function ``dbName.funcName`` with ``newFunc``. Raises InvalidOperationError when there
        is none."""
        self._call("alter_function", dbName, funcName, newFunc)

    def drop_function(self, dbName: str, funcName: str) -> None:
        """Drop function ``dbName.funcName``. Raises NoSuchObjectError when there is none."""
        self._call("drop_function", dbName, funcName)

    # ------------------------------------------------------------------ column statistics
    def get_table_statistics_req(self, request: TableStatsRequest) -> TableStatsResult:
        """Column statistics of a table (``tableStats``: one ColumnStatisticsObj per column that has
        some). Raises NoSuchObjectError when there is no such table."""
        return self._call("get_table_statistics_req", request)

    def get_partitions_statistics_req(self, request: PartitionsStatsRequest) -> PartitionsStatsResult:
        """Column statistics of partitions (``partStats``: partition name -> ColumnStatisticsObj list).
        Raises NoSuchObjectError when there is no such table."""
        return self._call("get_partitions_statistics_req", request)

    def update_table_column_statistics(self, stats_obj: ColumnStatistics) -> bool:
        """Store table column statistics; True when stored. Raises NoSuchObjectError when the table or a
        column is missing, InvalidObjectError or InvalidInputError when the statistics are not valid."""
        return cast(bool, self._call("update_table_column_statistics", stats_obj))

    def update_partition_column_statistics(self, stats_obj: ColumnStatistics) -> bool:
        """Store partition column statistics; True when stored. Raises as
        :meth:`update_table_column_statistics` (NoSuchObjectError also for a missing partition)."""
        return cast(bool, self._call("update_partition_column_statistics", stats_obj))

    def delete_table_column_statistics(self, db_name: str, tbl_name: str, col_name: str, engine: str) -> bool:
        """Delete the table's statistics of column ``col_name`` (all columns when None) for ``engine``;
        True when deleted. Raises NoSuchObjectError when there are none or no such table,
        InvalidInputError for a bad argument."""
        return cast(bool, self._call("delete_table_column_statistics", db_name, tbl_name, col_name, engine))

    def delete_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str, engine: str
    ) -> bool:
        """Delete partition ``part_name``'s statistics of column ``col_name`` (all when None) for
        ``engine``; True when deleted. Raises as :meth:`delete_table_column_statistics`."""
        return cast(
            bool,
            self._call("delete_partition_column_statistics", db_name, tbl_name, part_name, col_name, engine),
        )

    # ------------------------------------------------------------------ transactions and write ids
    def open_txns(self, rqst: OpenTxnRequest) -> OpenTxnsResponse:
        """Open ``rqst.num_txns`` txns (``txn_ids``, ascending); the replication form maps
        ``replSrcTxnIds`` to new txns. Declares no HMS exception."""
        return self._call("open_txns", rqst)

    def commit_txn(self, rqst: CommitTxnRequest) -> None:
        """Commit txn ``rqst.txnid``. Raises NoSuchTxnError when it is unknown or ended, TxnAbortedError
        when it was aborted."""
        self._call("commit_txn", rqst)

    def abort_txn(self, rqst: AbortTxnRequest) -> None:
        """Abort txn ``rqst.txnid``. Raises NoSuchTxnError when it is unknown, TxnAbortedError when it
        was aborted already (some servers)."""
        self._call("abort_txn", rqst)

    def abort_txns(self, rqst: AbortTxnsRequest) -> None:
        """Abort txns ``rqst.txn_ids``. Raises NoSuchTxnError when one is unknown."""
        self._call("abort_txns", rqst)

    def get_open_txns(self) -> GetOpenTxnsResponse:
        """High watermark, open and aborted txns (``open_txns``, ``abortedBits``). Declares no HMS
        exception."""
        return self._call("get_open_txns")

    def heartbeat(self, ids: HeartbeatRequest) -> None:
        """Keep txn ``ids.txnid`` and/or lock ``ids.lockid`` alive. Raises NoSuchTxnError,
        TxnAbortedError, NoSuchLockError when they are gone."""
        self._call("heartbeat", ids)

    def heartbeat_txn_range(self, txns: HeartbeatTxnRangeRequest) -> HeartbeatTxnRangeResponse:
        """Heartbeat txns ``txns.min``..``txns.max``; the answer names those ``aborted`` and ``nosuch``.
        Declares no HMS exception."""
        return self._call("heartbeat_txn_range", txns)

    def allocate_table_write_ids(self, rqst: AllocateTableWriteIdsRequest) -> AllocateTableWriteIdsResponse:
        """Write ids of table ``rqst.dbName.tableName`` for the request's txns (``txnToWriteIds``; the
        replication form maps source txns' write ids). Raises NoSuchTxnError, TxnAbortedError when a
        txn is not open."""
        return self._call("allocate_table_write_ids", rqst)

    def get_valid_write_ids(self, rqst: GetValidWriteIdsRequest) -> GetValidWriteIdsResponse:
        """Write-id snapshots of ``rqst.fullTableNames`` under ``rqst.validTxnList``
        (``tblValidWriteIds``). Raises NoSuchTxnError for an unknown ``writeId`` txn, MetaError for a
        missing or malformed txn list."""
        return self._call("get_valid_write_ids", rqst)

    def repl_tbl_writeid_state(self, rqst: ReplTblWriteIdStateRequest) -> None:
        """Set a replicated table's write-id state (its high watermark and the source's open txns).
        Declares no HMS exception."""
        self._call("repl_tbl_writeid_state", rqst)

    def add_dynamic_partitions(self, rqst: AddDynamicPartitions) -> None:
        """Record the partitions a txn's dynamic-partition write wrote. Raises NoSuchTxnError,
        TxnAbortedError when the txn is not open."""
        self._call("add_dynamic_partitions", rqst)

    def get_all_write_event_info(self, request: GetAllWriteEventInfoRequest) -> list[WriteEventInfo]:
        """The writes txn ``request.txnId`` reported (``add_write_notification_log``), one per write
        id/table/partition; ``[]`` when none (or none kept)."""
        return cast(list[WriteEventInfo], self._call("get_all_write_event_info", request))

    # ------------------------------------------------------------------ locks
    def lock(self, rqst: LockRequest) -> LockResponse:
        """Request locks (``state`` ACQUIRED, WAITING, NOT_ACQUIRED or ABORT; ``lockid``). Raises
        NoSuchTxnError, TxnAbortedError when ``rqst.txnid`` is not open."""
        return self._call("lock", rqst)

    def check_lock(self, rqst: CheckLockRequest) -> LockResponse:
        """The state of lock ``rqst.lockid``. Raises NoSuchLockError, NoSuchTxnError, TxnAbortedError."""
        return self._call("check_lock", rqst)

    def unlock(self, rqst: UnlockRequest) -> None:
        """Release lock ``rqst.lockid``. Raises NoSuchLockError when there is none, TxnOpenError for an
        acquired lock of an open txn."""
        self._call("unlock", rqst)

    def show_locks(self, rqst: ShowLocksRequest) -> ShowLocksResponse:
        """Current locks (``locks``: ShowLocksResponseElement), of the request's database/table/
        partition or txn when given. Declares no HMS exception."""
        return self._call("show_locks", rqst)

    # ------------------------------------------------------------------ notifications
    def get_next_notification(self, rqst: NotificationEventRequest) -> NotificationEventResponse:
        """Events after ``rqst.lastEvent`` (``events``, oldest first, at most ``maxEvents``). Declares
        no HMS exception."""
        return self._call("get_next_notification", rqst)

    def get_current_notificationEventId(self) -> CurrentNotificationEventId:
        """The newest event id (``eventId``; 0 for an empty log). Declares no HMS exception."""
        return self._call("get_current_notificationEventId")

    # ------------------------------------------------------------------ configuration
    def get_config_value(self, name: str, defaultValue: str) -> str:
        """The metastore's value of ``name`` (``defaultValue`` when unset). Raises ConfigValSecurityError
        for a key it does not disclose (outside ``hive.*``, ``metastore.*``, ...)."""
        return cast(str, self._call("get_config_value", name, defaultValue))

    def setMetaConf(self, key: str, value: str) -> None:
        """Set metastore setting ``key`` for this connection only (lost when it reconnects). Raises
        MetaError for a key that cannot be set so."""
        self._call("setMetaConf", key, value)
