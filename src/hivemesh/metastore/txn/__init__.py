"""Txn operations of the metastore, one module per HMS call (or small group of calls): the shape of
Hive's newer ``txn/jdbc/functions/*Function`` classes. Each operation is a function taking the
write transaction's SQLAlchemy connection and what else it needs (the request, the calling user,
a clock) and returning an :class:`~hivemesh.metastore.txn.common.Outcome`: the Thrift response and
the notification events to append. :class:`~hivemesh.metastore.txns.TxnMixin` opens the
transaction, calls the function and records the events; nothing here opens a transaction of its
own, reads the calling connection's state or touches storage.

Adding a txn call: write ``txn/<call>.py`` (a pure preparation of the request, the SQL in small
helpers, the events built from plain values with the message builders of ``hive/events.py``, and
one function of the connection tying them together), then a thin method of the same name in
``metastore/txns.py`` (``self._in_write(<call>.<call>, rqst, ...)``; the Thrift processor finds
it by its name on ``LocalMetastore``), and the call's route in ``federation/routes.py`` (the
proxy). A new event type also needs its replay (``metastore/replay.py``) or a reason to skip it.

Write transactions
    Every call is ONE database transaction, opened by ``CatalogBase.write`` (``Store.write``): on
    SQLite the process's writer lock, then ``BEGIN IMMEDIATE``, which takes the database's single
    write lock at once, so writers run one after another and a read-then-write never races (other
    processes wait up to the 60 s busy timeout); on PostgreSQL a READ COMMITTED
    transaction in which the rows a decision depends on are taken ``SELECT ... FOR UPDATE`` (a
    no-op on SQLite). The notification events of the call are appended last, in the same
    transaction (``NOTIFICATION_SEQUENCE`` is locked briefly at the end): no event without its
    change, no change without its event. An exception anywhere rolls everything back, and the
    client gets the HMS exception the function raised (MetaException, NoSuchTxnException,
    TxnAbortedException ...).

Order of the rows locked (the same in every call, so no two calls wait on each other in a cycle)
    1. ``NEXT_LOCK_ID`` (only calls that decide locks: lock, check_lock, unlock, a lock heartbeat);
    2. ``NEXT_WRITE_ID`` of the table (allocate_table_write_ids, repl_tbl_writeid_state,
       seed_write_id);
    3. ``NEXT_TXN_ID`` (open_txns, repl_tbl_writeid_state's placeholder txns; commit reads it
       unlocked as the write set's commit id);
    4. ``TXNS`` rows, by ascending txn id where several are taken (commit, abort, heartbeat);
    5. then ``TXN_TO_WRITE_ID``, ``TXN_COMPONENTS``, ``WRITE_SET``, ``MIN_HISTORY_LEVEL``,
       ``HIVE_LOCKS``, ``REPL_TXN_MAP`` rows of those txns (written, not locked first);
    6. ``NOTIFICATION_SEQUENCE`` last (the events).

Idempotence and retries
    A client that lost the answer retries the call; what the retry does:

    - ``open_txns``: not idempotent; the retry opens new txns (the lost ones time out and are
      aborted by the housekeeper). With ``replPolicy`` + ``replSrcTxnIds`` it is: the
      ``REPL_TXN_MAP`` row (policy, source txn id) -> target txn id is reused, so a retried or
      replayed open answers the same target txns.
    - ``commit_txn``: committing a committed txn is a no-op; with ``replPolicy`` the id is the
      source's, mapped through ``REPL_TXN_MAP`` (an unmapped one is ignored).
    - ``abort_txn``: aborting an aborted txn is a no-op; ``abort_txns`` ignores txns not open.
    - ``allocate_table_write_ids``: a txn that already has a write id for the table gets the same
      one again (``TXN_TO_WRITE_ID``); the replicated form (``srcTxnToWriteIdList``) forces the
      source's write ids on the mapped target txns, keeping ones already recorded.
    - ``repl_tbl_writeid_state``: write ids already recorded for the table are left alone, except
      placeholders recorded aborted by an earlier call that the new list says are valid (they
      become committed); the table's next write id only moves forward.

    Replicated txns (``TXN_TYPE`` REPL_CREATED) append no notification events: the target's
    events are the copy of the source's.

Times are epoch milliseconds.
"""
