"""HMS notification-log methods: reading the log, INSERT events, ACID write notifications, retention.

Metadata changes append their events themselves (``Tx.event`` in each mixin); this mixin serves
``get_next_notification`` / ``get_current_notificationEventId`` / ``get_notification_events_count``,
appends the events clients fire (``fire_listener_event``: INSERT), keeps the writes of ACID txns
(``add_write_notification_log``, read back by ``get_all_write_event_info``: no event, as Hive 4.2)
and removes old events and write notifications.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    CurrentNotificationEventId,
    FireEventRequest,
    FireEventResponse,
    GetAllWriteEventInfoRequest,
    InsertEventRequestData,
    MetaException,
    NotificationEventRequest,
    NotificationEventResponse,
    NotificationEventsCountRequest,
    NotificationEventsCountResponse,
    Partition,
    Table,
    WriteEventInfo,
    WriteNotificationLogBatchRequest,
    WriteNotificationLogBatchResponse,
    WriteNotificationLogRequest,
    WriteNotificationLogResponse,
)

from hivemesh.hive import events
from hivemesh.hive.constants import now_s
from hivemesh.hive.names import make_part_name
from hivemesh.hive.tjson import thrift_json
from hivemesh.metastore import notification_log
from hivemesh.metastore.base import CatalogBase
from hivemesh.metastore.txn_schema import NOTIFICATION_LOG, TXN_WRITE_NOTIFICATION_LOG, TXNS

READER_MEMORY_S = 3600  # a get_next_notification position pins the events after it this long


class NotificationMixin(CatalogBase):
    """Notification-log methods of :class:`LocalMetastore`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._reader_lock = threading.Lock()
        self._reader_positions: dict[int, float] = {}  # lastEvent -> time.monotonic() it was asked for

    def _note_reader(self, last_event: int) -> None:
        now = time.monotonic()
        with self._reader_lock:
            self._reader_positions[last_event] = now
            for pos, seen in list(self._reader_positions.items()):
                if now - seen > READER_MEMORY_S:
                    del self._reader_positions[pos]

    def oldest_reader_position(self) -> int | None:
        """The lowest ``lastEvent`` asked for by get_next_notification in the last hour (None: none).
        Retention never removes events after it, so a reader paging through the log sees no gap."""
        now = time.monotonic()
        with self._reader_lock:
            live = [p for p, seen in self._reader_positions.items() if now - seen <= READER_MEMORY_S]
        return min(live) if live else None

    # ------------------------------------------------------------------ reading
    def get_next_notification(self, rqst: NotificationEventRequest) -> NotificationEventResponse:
        """NotificationEventRequest -> events with id > ``lastEvent`` in id order.

        ``maxEvents`` caps the count (all when unset or <= 0); ``eventTypeSkipList`` leaves types
        out; Hive 4's ``catName``/``dbName``/``tableNames`` and ``eventTypeList`` filter further.
        """
        self._note_reader(rqst.lastEvent or 0)
        with self.read() as conn:
            events = notification_log.read_events(
                conn,
                rqst.lastEvent or 0,
                rqst.maxEvents,
                rqst.eventTypeSkipList or (),
                getattr(rqst, "catName", None),
                getattr(rqst, "dbName", None),
                getattr(rqst, "tableNames", None),
                getattr(rqst, "eventTypeList", None),
            )
        return NotificationEventResponse(events=events)

    def get_current_notificationEventId(self) -> CurrentNotificationEventId:  # noqa: N802 - Thrift name
        """Id of the newest event (0 when the log is empty and was always empty)."""
        with self.read() as conn:
            return CurrentNotificationEventId(eventId=notification_log.current_event_id(conn))

    def get_notification_events_count(
        self, rqst: NotificationEventsCountRequest
    ) -> NotificationEventsCountResponse:
        """NotificationEventsCountRequest(fromEventId, dbName, catName, toEventId, limit) -> count of
        events after ``fromEventId`` (up to ``toEventId``) in that database, capped at ``limit``."""
        with self.read() as conn:
            n = notification_log.count_events(
                conn, rqst.fromEventId or 0, rqst.toEventId, rqst.catName, rqst.dbName, rqst.limit
            )
        return NotificationEventsCountResponse(eventsCount=n)

    # ------------------------------------------------------------------ events fired by clients
    def _event_objects(
        self, db: str, table: str, partition_vals: list[str] | None
    ) -> tuple[Table, Partition | None]:
        tbl = self.get_table(db, table)
        part = None
        if partition_vals:
            part = self.get_partition(db, table, list(partition_vals))
        return tbl, part

    def fire_listener_event(self, rqst: FireEventRequest) -> FireEventResponse:
        """FireEventRequest(successful, data{insertData | insertDatas}, dbName, tableName,
        partitionVals) -> the ids of the INSERT events appended (one per insert data; an
        ``insertDatas`` entry names its partition in ``partitionVal``). Nothing is appended for an
        unsuccessful request. A missing table or partition raises NoSuchObjectException, which reaches
        Thrift clients as TApplicationException(INTERNAL_ERROR) with its message (the IDL declares none)."""
        data = rqst.data
        if data is None:
            raise MetaException("FireEventRequest without data")
        if not rqst.successful:
            return FireEventResponse(eventIds=[])
        items: list[tuple[InsertEventRequestData, list[str] | None]] = []
        if data.insertData is not None:
            items.append((data.insertData, rqst.partitionVals))
        for d in data.insertDatas or []:
            items.append((d, d.partitionVal or rqst.partitionVals))
        if not items:
            raise MetaException("Only INSERT events can be fired (FireEventRequestData.insertData)")
        prepared = []
        for d, vals in items:
            tbl, part = self._event_objects(rqst.dbName, rqst.tableName, vals)
            prepared.append((tbl, part, d))
        with self.write() as tx:
            for tbl, part, d in prepared:
                tx.event(
                    events.INSERT,
                    events.insert_message(tbl, part, d),
                    db=tbl.dbName,
                    table=tbl.tableName,
                    catalog=tbl.catName,
                )
            ids = tx.flush_events()
        return FireEventResponse(eventIds=ids)

    def add_write_notification_log(self, rqst: WriteNotificationLogRequest) -> WriteNotificationLogResponse:
        """WriteNotificationLogRequest(txnId, writeId, db, table, fileInfo, partitionVals): record
        the files an open txn wrote in TXN_WRITE_NOTIFICATION_LOG, where get_all_write_event_info
        reads them. Like Hive 4.2 it appends no event (no ACID_WRITE_EVENT), and the txn's COMMIT_TXN
        names only its databases and write ids. NoSuchTxnException / TxnAbortedException when the txn is not open,
        NoSuchObjectException for a missing table or partition; over Thrift these arrive as
        TApplicationException(INTERNAL_ERROR) with the message (the IDL declares no exception)."""
        self._write_notifications([rqst])
        return WriteNotificationLogResponse()

    def add_write_notification_log_in_batch(
        self, rqst: WriteNotificationLogBatchRequest
    ) -> WriteNotificationLogBatchResponse:
        """WriteNotificationLogBatchRequest(catalog, db, table, requestList): several
        :meth:`add_write_notification_log` calls in one transaction."""
        self._write_notifications(list(rqst.requestList or []))
        return WriteNotificationLogBatchResponse()

    def _write_notifications(self, requests: list[WriteNotificationLogRequest]) -> None:
        prepared = []
        for r in requests:
            tbl, part = self._event_objects(r.db, r.table, r.partitionVals)
            prepared.append((r, tbl, part))
        with self.write() as tx:
            for r, tbl, part in prepared:
                self.open_txn_row(tx.conn, r.txnId)
                info = r.fileInfo or InsertEventRequestData(filesAdded=[])
                files = ",".join(info.filesAdded or [])
                part_name = None
                if part is not None:
                    part_name = make_part_name([k.name for k in tbl.partitionKeys], part.values)
                tx.conn.execute(
                    TXN_WRITE_NOTIFICATION_LOG.insert().values(
                        WNL_TXNID=r.txnId,
                        WNL_WRITEID=r.writeId,
                        WNL_DATABASE=tbl.dbName,
                        WNL_TABLE=tbl.tableName,
                        WNL_PARTITION=part_name or "",
                        WNL_TABLE_OBJ=thrift_json(tbl),
                        WNL_PARTITION_OBJ=thrift_json(part) if part is not None else None,
                        WNL_FILES=files,
                        WNL_EVENT_TIME=now_s(),
                    )
                )

    def get_all_write_event_info(self, rqst: GetAllWriteEventInfoRequest) -> list[WriteEventInfo]:
        """GetAllWriteEventInfoRequest(txnId, dbName, tableName) -> the writes txn ``txnId``
        reported with add_write_notification_log, ordered by database, table, then report order.

        Each is WriteEventInfo(writeId, database, table, files, partition: the partition name,
        ``""`` for a table write, tableObj / partitionObj: the Table / Partition as Thrift JSON,
        partitionObj None for a table write). ``files`` is in Hive 4.2's form: each added file as
        ReplChangeManager encodes it without a change manager (``path###``), joined with ``]``,
        e.g. ``file:/t/p=a/delta_1_1/b0###]file:/t/p=a/delta_1_1/b1###``; no sub-directories
        (add_write_notification_log does not keep them). ``dbName`` and ``tableName`` filter when
        set and not ``*``; like Hive they are compared as given (names are stored lower case, so
        ``DB1`` matches nothing). As in Hive, the writes stay after the txn commits or aborts
        (Hive's replication dump asks after the commit) until the event retention removes them:
        only an unknown or purged txn gets ``[]``. Raises nothing of its own (storage errors come
        as MetaException).
        """
        w = TXN_WRITE_NOTIFICATION_LOG.c
        q = sa.select(TXN_WRITE_NOTIFICATION_LOG).where(w.WNL_TXNID == rqst.txnId)
        if rqst.dbName is not None and rqst.dbName != "*":
            q = q.where(w.WNL_DATABASE == rqst.dbName)
        if rqst.tableName is not None and rqst.tableName != "*":
            q = q.where(w.WNL_TABLE == rqst.tableName)
        with self.read() as conn:
            rows = conn.execute(q.order_by(w.WNL_DATABASE, w.WNL_TABLE, w.WNL_ID)).all()
        return [
            WriteEventInfo(
                writeId=r.WNL_WRITEID,
                database=r.WNL_DATABASE,
                table=r.WNL_TABLE,
                files="]".join(events.encode_file_uri(f) for f in (r.WNL_FILES or "").split(",") if f),
                partition=r.WNL_PARTITION or "",
                tableObj=r.WNL_TABLE_OBJ,
                partitionObj=r.WNL_PARTITION_OBJ,
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ retention
    def purge_events(self, retention_s: int, now: int | None = None) -> int:
        """Remove events older than ``retention_s`` seconds, keeping every event after the oldest
        position a reader asked for in the last hour; and the write notifications (what
        get_all_write_event_info reads; Hive's cleanWriteNotificationEvents) of txns that ended
        before the oldest event kept, so a replicator reading a kept COMMIT_TXN still finds its
        writes. Returns how many events were removed."""
        now = now if now is not None else now_s()
        keep_after = self.oldest_reader_position()
        with self.write() as tx:
            removed = notification_log.delete_older_than(tx.conn, now - retention_s, keep_after)
            cutoff = now - retention_s
            if keep_after is not None:
                oldest_kept = tx.conn.execute(
                    sa.select(sa.func.min(NOTIFICATION_LOG.c.EVENT_TIME)).where(
                        NOTIFICATION_LOG.c.EVENT_ID > keep_after
                    )
                ).scalar()
                cutoff = min(cutoff, oldest_kept if oldest_kept is not None else cutoff)
            w = TXN_WRITE_NOTIFICATION_LOG.c
            recent = sa.or_(TXNS.c.TXN_STATE == "o", TXNS.c.TXN_ENDED >= cutoff * 1000)
            tx.conn.execute(
                TXN_WRITE_NOTIFICATION_LOG.delete().where(
                    w.WNL_EVENT_TIME < cutoff, w.WNL_TXNID.not_in(sa.select(TXNS.c.TXN_ID).where(recent))
                )
            )
            return removed
