"""The ACID writes of a committed source txn, which replication copies before it commits the txn on
the target.

Hive 4.2 (and hivemesh, which answers as it) keeps the files each txn wrote in
TXN_WRITE_NOTIFICATION_LOG (``add_write_notification_log``) and appends no event for them; its
COMMIT_TXN message names only the txn's databases and write ids. Hive's own replication dump reads
the writes with ``get_all_write_event_info`` when it meets the COMMIT_TXN, and so does hivemesh.
"""

from __future__ import annotations

import logging

from hive_metastore.ttypes import GetAllWriteEventInfoRequest, WriteEventInfo
from thrift.Thrift import TApplicationException

from hivemesh.client.hms import HmsCalls
from hivemesh.hive import event_messages as ev

log = logging.getLogger(__name__)


def committed_writes(source_calls: HmsCalls, msg: ev.CommitTxn) -> list[WriteEventInfo]:
    """The writes txn ``msg.txn_id`` reported with ``add_write_notification_log``, one
    WriteEventInfo per write id/table/partition (``partition``: the Hive partition name, ``""`` or
    None for a table write).

    Taken from the message when it lists them (hivemesh before it matched Hive 4.2), else asked of
    the source (``source_calls.get_all_write_event_info``; one call, only when the txn was
    allocated write ids). ``[]`` when the txn reported none (a streaming batch's txns report none:
    their allocations say which tables they wrote), when the source's event retention has removed
    them, or when the source has no such call (Hive before 4.0: TApplicationException
    UNKNOWN_METHOD, logged once per call at debug). Other errors of the source propagate.
    """
    if msg.writes:
        return list(msg.writes)
    if not msg.write_ids:
        return []
    try:
        infos = source_calls.get_all_write_event_info(GetAllWriteEventInfoRequest(txnId=msg.txn_id))
    except TApplicationException as e:
        if e.type != TApplicationException.UNKNOWN_METHOD:
            raise
        log.debug(
            "the source has no get_all_write_event_info; txn %d's writes come from its allocations",
            msg.txn_id,
        )
        return []
    return list(infos or [])
