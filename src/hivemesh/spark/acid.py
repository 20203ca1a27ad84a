"""Hive ACID tables as Spark DataFrames: ``read_acid``, ``acid_session`` and ``AcidSession``.

Transactions, as Hive's own readers (and the Spark Direct Reader) hold them, but safer:

* an :class:`AcidSession` opens ONE read-only txn at its first read; the ValidTxnList of that txn
  fixes what every table read in the session sees, and each table's ValidWriteIdList is taken
  once and reused, so a self-join, or a table read twice, reads one snapshot (the reference
  readers open a txn per table and may read two);
* each table read takes a SHARED_READ lock (table level, with the txn) so a compactor's cleaner
  keeps the files the snapshot needs; locks go when the txn ends;
* a daemon thread heartbeats the txn every ``hive.txn.timeout``/3 while it is open;
* the txn commits when the ``with`` block ends, aborts when it raises or the interpreter exits,
  and :meth:`AcidSession.commit` ends it explicitly (the next read opens a new txn with a fresh
  snapshot). A reader that crashes stops heartbeating and the metastore aborts its txn after
  ``hive.txn.timeout``.

``read_acid(spark, "db.table")`` outside a session uses a new implicit session per call (a fresh
snapshot); those txns stay open until :func:`commit` or the interpreter exits, like the Direct
Reader's ``commitTxn(spark)``.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hive_metastore.ttypes import TxnType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from hivemesh.acid.arrow_reader import TableLayout, list_location, schema_from_files, table_layout
from hivemesh.acid.selection import select_files
from hivemesh.acid.tables import NotTransactionalError, split_name, table_locations
from hivemesh.client.metastore import Heartbeater, MetastoreClient, lock_component
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList
from hivemesh.spark.acid_reader import LocationFiles, snapshot_dataframe
from hivemesh.spark.acid_sql import acid_sql
from hivemesh.spark.session import metastore_uri_of

log = logging.getLogger(__name__)

__all__ = [
    "AGENT_INFO",
    "AcidSession",
    "NotTransactionalError",
    "TableSnapshot",
    "acid_session",
    "commit",
    "metastore_uri_of",
    "read_acid",
    "read_acid_path",
    "split_name",
    "table_layout",
]

AGENT_INFO = "hivemesh-spark-acid-reader"


@dataclass(frozen=True)
class TableSnapshot:
    """What a session read of one table: its metastore ``table``, ``write_ids`` and lock id."""

    table: Any
    write_ids: ValidWriteIdList
    lock_id: int | None
    valid_txns: ValidTxnList | None = None  # the table's own txn list (a proxy's federated member)


class AcidSession:
    """Reads Hive transactional tables under one read txn (see the module doc).

    ``metastore_uri``: ``thrift://host:port`` (default: the SparkSession's
    ``hive.metastore.uris``). Use as a context manager or call :meth:`commit`/:meth:`abort`.
    """

    def __init__(self, spark: SparkSession, metastore_uri: str | None = None, *, user: str | None = None):
        self.spark = spark
        self.metastore_uri = metastore_uri or metastore_uri_of(spark)
        self.client = MetastoreClient(self.metastore_uri, user=user)
        self.txn_id: int | None = None
        self.valid_txn_list: ValidTxnList | None = None
        self.snapshots: dict[str, TableSnapshot] = {}
        self._heartbeater: Heartbeater | None = None
        self._lock = threading.RLock()
        self.closed = False
        _open_sessions.add(self)

    # ---------------------------------------------------------------- txn lifetime
    def _ensure_txn(self) -> int:
        if self.closed:
            raise RuntimeError("this AcidSession is closed")
        if self.txn_id is None:
            self.txn_id = self.client.open_txn(txn_type=TxnType.READ_ONLY, agent_info=AGENT_INFO)
            self.valid_txn_list = self.client.valid_txn_list(self.txn_id)
            self._heartbeater = Heartbeater(self.client, self.client.heartbeat_interval_s, txn_id=self.txn_id)
            log.info("read txn %s opened, ValidTxnList %s", self.txn_id, self.valid_txn_list)
        return self.txn_id

    def _end(self, commit: bool) -> None:
        with self._lock:
            if self.txn_id is None:
                return
            txn, self.txn_id = self.txn_id, None
            if self._heartbeater is not None:
                self._heartbeater.stop()
                self._heartbeater = None
            self.snapshots.clear()
            self.valid_txn_list = None
            try:
                if commit:
                    self.client.commit_txn(txn)
                else:
                    self.client.abort_txn(txn)
                log.info("read txn %s %s", txn, "committed" if commit else "aborted")
            except Exception as e:
                if commit:
                    raise
                log.warning("could not abort read txn %s: %s", txn, getattr(e, "message", e))

    def commit(self) -> None:
        """Commit the open txn (releasing its locks); the next read starts a new one."""
        self._end(True)

    def abort(self) -> None:
        """Abort the open txn (releasing its locks)."""
        self._end(False)

    def close(self, commit: bool = True) -> None:
        """End the txn (commit or abort) and the metastore connection."""
        try:
            self._end(commit)
        finally:
            self.closed = True
            self.client.close()
            _open_sessions.discard(self)

    def __enter__(self) -> AcidSession:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self.close(commit=exc_type is None)

    # ---------------------------------------------------------------- reads
    def snapshot(self, table: str) -> TableSnapshot:
        """The session's snapshot of ``db.table``: taken (with its SHARED_READ lock) at the first
        call, the same afterwards until the txn ends. NoSuchObjectException when the table does
        not exist, NotTransactionalError when it is not transactional."""
        db, name = split_name(table)
        key = f"{db}.{name}"
        with self._lock:
            if key in self.snapshots:
                return self.snapshots[key]
            txn = self._ensure_txn()
            tbl = self.client.hms.get_table(db, name)
            table_layout(tbl)  # raises when not transactional
            resp = self.client.lock([lock_component(db, name)], txn_id=txn, agent_info=AGENT_INFO)
            own: dict[str, ValidTxnList] = {}
            write_ids = self.client.valid_write_ids([key], self.valid_txn_list, txn_lists=own)[key]
            snap = TableSnapshot(tbl, write_ids, resp.lockid, own.get(key))
            self.snapshots[key] = snap
            log.info("%s: snapshot %s (txn %s, lock %s)", key, write_ids, txn, resp.lockid)
            return snap

    def read(
        self, table: str, *, partition_filter: str | None = None, with_row_ids: bool = False
    ) -> DataFrame:
        """DataFrame of ``db.table`` under the session's snapshot: its columns, then its partition
        columns (``with_row_ids``: ``originalTransaction``, ``bucket``, ``rowId`` first).

        ``partition_filter``: a Hive partition filter (``"ds >= '2024-01-01' and hr = 1"``) pushed
        to the metastore (``get_partitions_by_filter``); only those partitions are listed and read.
        """
        snap = self.snapshot(table)
        tbl = snap.table
        layout = table_layout(tbl)
        partition_cols = [(k.name, k.type) for k in tbl.partitionKeys or []]
        targets = table_locations(self.client, tbl, partition_filter)
        locations = [
            LocationFiles(
                loc,
                select_files(
                    list_location(loc),
                    snap.write_ids,
                    snap.valid_txns or self.valid_txn_list,
                    insert_only=layout.insert_only,
                ),
                values,
            )
            for loc, values in targets
        ]
        return snapshot_dataframe(
            self.spark, locations, snap.write_ids, layout, partition_cols, with_row_ids=with_row_ids
        )

    def sql(self, query: str) -> DataFrame:
        """Run Spark SQL with the transactional tables it names read through this session
        (:mod:`hivemesh.spark.acid_sql`); other tables go through Spark's own catalog."""
        return acid_sql(self, query)


_open_sessions: weakref.WeakSet[AcidSession] = weakref.WeakSet()
_implicit: dict[int, list[AcidSession]] = {}


def read_acid(
    spark: SparkSession,
    table: str | None = None,
    *,
    path: str | None = None,
    valid_write_ids: str | ValidWriteIdList | None = None,
    schema: Any = None,
    metastore_uri: str | None = None,
    partition_filter: str | None = None,
    with_row_ids: bool = False,
    insert_only: bool = False,
    session: AcidSession | None = None,
) -> DataFrame:
    """A Hive transactional table as a DataFrame, consistent with what Hive returns.

    With ``table`` (``db.table``): through the metastore (``metastore_uri``, default the
    SparkSession's) in ``session`` or, without one, a new implicit :class:`AcidSession` whose
    txn stays open until :func:`commit` or interpreter exit. ``partition_filter``: Hive filter
    pushed to the metastore. With ``path``: a table/partition directory read under the explicit
    snapshot ``valid_write_ids`` (format: Hive ValidReaderWriteIdList.writeToString, e.g.
    ``db.t:4:9223372036854775807::``) with no metastore; ``schema`` gives the columns (a Spark
    StructType, a DDL string ``"id int, name string"`` or ``(name, hive type)`` pairs; default:
    taken from the first ACID file's ``row`` struct). ``with_row_ids`` adds Hive's ROW__ID
    (``originalTransaction``, ``bucket``, ``rowId``) first.

    Raises NotTransactionalError, NotEnoughHistoryError, NoSuchObjectException, ValueError.
    """
    if path is not None:
        if table is not None:
            raise ValueError("give table or path, not both")
        if valid_write_ids is None:
            raise ValueError("read_acid(path=...) needs valid_write_ids")
        return read_acid_path(
            spark, path, valid_write_ids, schema=schema, with_row_ids=with_row_ids, insert_only=insert_only
        )
    if table is None:
        raise ValueError("read_acid needs a table name or path=")
    if session is None:
        session = AcidSession(spark, metastore_uri)
        _implicit.setdefault(id(spark), []).append(session)
    return session.read(table, partition_filter=partition_filter, with_row_ids=with_row_ids)


def _columns_of(schema: Any) -> list[tuple[str, str]]:
    if isinstance(schema, str):
        schema = StructType.fromDDL(schema)
    if isinstance(schema, StructType):
        return [(f.name, f.dataType.simpleString()) for f in schema.fields]
    return [(str(n), str(t)) for n, t in schema]


def read_acid_path(
    spark: SparkSession,
    path: str,
    valid_write_ids: str | ValidWriteIdList,
    *,
    schema: Any = None,
    valid_txns: str | ValidTxnList | None = None,
    with_row_ids: bool = False,
    insert_only: bool = False,
) -> DataFrame:
    """:func:`read_acid` of one directory under an explicit snapshot, without a metastore."""
    write_ids = (
        ValidWriteIdList.parse(valid_write_ids) if isinstance(valid_write_ids, str) else valid_write_ids
    )
    txns = ValidTxnList.parse(valid_txns) if isinstance(valid_txns, str) else valid_txns
    files = select_files(list_location(path), write_ids, txns, insert_only=insert_only)
    columns = _columns_of(schema) if schema is not None else schema_from_files(path, files)
    layout = TableLayout(tuple(columns), insert_only=insert_only)
    return snapshot_dataframe(
        spark, [LocationFiles(path, files)], write_ids, layout, with_row_ids=with_row_ids
    )


@contextmanager
def acid_session(
    spark: SparkSession, metastore_uri: str | None = None, *, user: str | None = None
) -> Iterator[AcidSession]:
    """``with acid_session(spark) as acid: acid.read("db.t"); acid.sql("...")``: one read txn for
    the block, committed at its end, aborted when it raises."""
    session = AcidSession(spark, metastore_uri, user=user)
    try:
        yield session
    except BaseException:
        session.close(commit=False)
        raise
    else:
        session.close(commit=True)


def commit(spark: SparkSession) -> int:
    """Commit the txns of the implicit sessions :func:`read_acid` opened for ``spark``; how many."""
    sessions = _implicit.pop(id(spark), [])
    for s in sessions:
        s.close(commit=True)
    return len(sessions)


@atexit.register
def _abort_open_sessions() -> None:
    for s in list(_open_sessions):
        try:
            s.close(commit=False)
        except Exception:
            pass
