"""Running one replication policy: bootstrap, then the source's notification log, forever.

A :class:`PolicyRunner` keeps the target zone's copy of the policy's databases and tables equal to
the source's:

1. **Bootstrap** (a policy that never ran): the source's current event id is recorded first, then
   every database, function, table (with column statistics) and partition in scope is written to
   the target as the source has it now, partitions in pages of :data:`PAGE`, data directories
   synced. The checkpoint becomes the recorded id, so the events that happened during the
   bootstrap are applied afterwards: no gap, and applying them again is harmless (every apply is
   of an after-image, see :mod:`hivemesh.metastore.replay`). The source's open txns are left
   alone. A bootstrap killed half-way restarts from the same recorded id.
2. **Incremental**: events after the checkpoint are read in batches, those in scope applied (data
   first, so a reader of the target never sees a partition or table change whose files are not
   there yet; then the metadata), and the checkpoint stored after each batch. A crash between an
   apply and its checkpoint applies the batch again with the same outcome.
3. **Resync**: when the source purged events past the checkpoint (its first event is beyond the
   checkpoint + 1), the policy re-syncs by comparison: the bootstrap again with pruning (objects
   in scope the source no longer has are dropped on the target), copying only files that differ;
   status and metrics say so. ``verify --repair`` runs the same.
4. **Rule changes**: a table or database newly matching the policy's rules is bootstrapped on its
   own in the background while the others keep flowing; the events it missed are applied when it
   is done. One no longer matching is left on the target and recorded as ``stopped``.

Events an object of the target cannot take (it is missing, e.g. dropped on the target by hand)
are healed from the source: the object is written again as the source has it now, or dropped when
the source no longer has it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hive_metastore.ttypes import (
    AbortTxnRequest,
    AllocateTableWriteIdsRequest,
    ColumnStatistics,
    CommitTxnRequest,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    NotificationEvent,
    NotificationEventRequest,
    OpenTxnRequest,
    PartitionsStatsRequest,
    ReplTblWriteIdStateRequest,
    Table,
    TableStatsRequest,
)
from thrift.Thrift import TApplicationException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.errors import HivemeshError
from hivemesh.hive import event_messages as ev
from hivemesh.hive.constants import now_ms
from hivemesh.hive.events import ALLOC_WRITE_ID_EVENT
from hivemesh.hive.hms_methods import REQUEST_FORMS
from hivemesh.hive.names import make_part_name
from hivemesh.metastore.replay import Replayer, relocator_for
from hivemesh.replication.config import DataMode, PolicyConfig, ReplicationFile, TargetFormat, ZoneConfig
from hivemesh.replication.data import DataMover, SyncResult, ZoneStorage
from hivemesh.replication.paths import LocationRefused
from hivemesh.replication.scope import Scope, event_object
from hivemesh.replication.state import PolicyState, ReplicationStore
from hivemesh.replication.txn_writes import committed_writes
from hivemesh.storage.locations import location_key

__all__ = ["PAGE", "PolicyRunner", "ReplicationError", "StepResult", "ThriftCalls", "relocator_for"]

log = logging.getLogger(__name__)

PAGE = 500
"""Partitions read and written per metastore call in bootstraps."""
LOOKBACK_EVENTS = 100_000
"""How far back a bootstrap looks for the allocations of write ids open at the source."""
LEASE_MS = 30_000
VIEW_TYPES = ("VIRTUAL_VIEW", "MATERIALIZED_VIEW")


class ReplicationError(HivemeshError, RuntimeError):
    """A policy cannot go on; the message names the policy and the peer."""


def zone_client(zone: ZoneConfig, timeout_s: float, retries: int = 3) -> MetastoreClient:
    """A connected client of ``zone``'s metastore, over TLS and with Kerberos as the zone's settings
    say (``timeout_s``: socket timeout, seconds). Raises what MetastoreClient raises (transport
    errors), TlsError or KerberosError."""
    return MetastoreClient(
        zone.metastore,
        timeout_s=timeout_s,
        retries=retries,
        tls=zone.tls_context(),
        kerberos=zone.kerberos_initiator(),
    )


def connect_zone(policy: str, name: str, zone: ZoneConfig, timeout_s: float) -> MetastoreClient:
    """:func:`zone_client` for policy ``policy``'s zone ``name``; raises ReplicationError naming
    the policy, the zone and its metastore when it cannot be reached."""
    try:
        return zone_client(zone, timeout_s)
    except Exception as e:
        raise ReplicationError(
            f"policy {policy}: zone {name!r} metastore {zone.metastore} is unreachable: {e}"
        ) from e


# plain calls Hive 4.2 dropped -> their request forms (sent once the peer says it lacks the call)
_DROPPED_BY_HIVE4 = {
    REQUEST_FORMS[m].plain: REQUEST_FORMS[m] for m in ("get_table_req", "get_table_objects_by_name_req")
}


class ThriftCalls:
    """The HMS Thrift methods of a :class:`MetastoreClient` as plain attributes (what
    :class:`Replayer` calls), each one call with the client's timeout and reconnection. The plain
    calls Hive 4.2 dropped (``get_table``, ``get_table_objects_by_name``) go as their request forms
    to a peer that answers "Invalid method name" (remembered per connection)."""

    def __init__(self, client: MetastoreClient):
        self._client = client
        self._missing: set[str] = set()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        form = _DROPPED_BY_HIVE4.get(name)

        def call(*args: Any) -> Any:
            """``name`` on the peer, or its request form when the peer dropped the plain call."""
            if form is not None and name in self._missing:
                return form.unwrap(self._client.call(form.method, form.build(list(args))))
            try:
                return self._client.call(name, *args)
            except TApplicationException as e:
                if form is None or e.type != TApplicationException.UNKNOWN_METHOD:
                    raise
                self._missing.add(name)
                return call(*args)

        return call


@dataclass
class StepResult:
    """What one :meth:`PolicyRunner.step` did."""

    applied: int = 0
    skipped: int = 0
    last_event_id: int | None = None
    bootstrapped: bool = False
    resynced: bool = False
    data: SyncResult = field(default_factory=SyncResult)


def _transactional(table: Table) -> bool:
    flag: str = (table.parameters or {}).get("transactional", "")
    return flag.lower() == "true"


def is_view(table: Table) -> bool:
    """Whether ``table`` is a view (VIRTUAL_VIEW or MATERIALIZED_VIEW, in any case): no data to copy."""
    return (table.tableType or "").upper() in VIEW_TYPES


def owns_data(table: Table) -> bool:
    """Whether dropping ``table`` or its partitions deletes their data: a managed table (its type
    in any case), or an external one with ``external.table.purge`` (Hive 4 makes its non-ACID
    managed tables so)."""
    purge = (table.parameters or {}).get("external.table.purge", "")
    return (table.tableType or "").upper() == "MANAGED_TABLE" or purge.lower() == "true"


def _location(obj: Any) -> str | None:
    sd = getattr(obj, "sd", None)
    return sd.location if sd is not None else None


class PolicyRunner:
    """Replicates ``policy`` of ``config`` with its state in ``store``.

    ``owner``: this process's lease name (:func:`hivemesh.replication.state.lease_owner`).
    ``metrics``: a :class:`hivemesh.replication.metrics.ReplicationMetrics` or None.
    ``progress``: a ``rich.progress.Progress`` for bootstraps and large copies, or None.
    Raises ReplicationError naming the peer when a metastore cannot be reached.
    """

    def __init__(
        self,
        config: ReplicationFile,
        policy: PolicyConfig,
        store: ReplicationStore,
        owner: str,
        metrics: Any = None,
        progress: Any = None,
    ):
        self.config = config
        self.policy = policy
        self.name = policy.name
        self.store = store
        self.owner = owner
        self.metrics = metrics
        self.progress = progress
        rc = config.replication
        if policy.format != TargetFormat.HIVE:
            raise ReplicationError(
                f"policy {policy.name}: format {policy.format.value} runs through "
                "hivemesh.replication.service.make_runner (DeltaPolicyRunner), not PolicyRunner"
            )
        self.source_zone = config.zones[policy.source]
        self.target_zone = config.zones[policy.target]
        opposite = [p for p in rc.policies if (p.source, p.target) == (policy.target, policy.source)]
        self.scope = Scope(policy, opposite)
        timeout_s = config.replication.timeout_s
        self.source = connect_zone(policy.name, policy.source, self.source_zone, timeout_s)
        self.target = connect_zone(policy.name, policy.target, self.target_zone, timeout_s)
        self.source_calls = ThriftCalls(self.source)
        self.target_calls = ThriftCalls(self.target)
        self.paths = config.paths(policy)
        self.relocate = self.paths.relocate_checked  # every location written: never into the source zone
        self.replayer = Replayer(
            self.target_calls, repl_policy=f"hivemesh.{policy.name}", relocate=self.relocate
        )
        self.source_storage = ZoneStorage(self.source_zone.s3)
        self.target_storage = ZoneStorage(self.target_zone.s3)
        self.mover: DataMover | None = None
        if policy.data == DataMode.COPY:
            self.mover = DataMover(
                policy.name,
                store,
                self.source_storage,
                self.target_storage,
                threads=rc.copy_threads,
                spark_threshold_bytes=rc.spark_copy_threshold_mb * 1024 * 1024,
                spark_master=rc.spark_master,
                on_bytes=self._on_bytes,
                streaming_copy=rc.streaming_copy,
                source_txns=lambda: self.source.valid_txn_list(),
            )
        self._bootstraps: dict[tuple[str, str], Future[SyncResult]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bootstrap-{policy.name}")
        self._stopping = threading.Event()
        self._warned: set[str] = set()
        self._progress_lock = threading.Lock()
        self._copy_task: Any = None
        self._copied_bytes = 0
        self._rules_checked = False
        self._lease_renew_at = 0.0  # time.monotonic() after which the lease is renewed
        self.state = store.ensure(policy.name, policy.source, policy.target)

    def close(self) -> None:
        """Stop background work and close connections (the lease is released). Never raises: a store that
        cannot release the lease is logged (the lease then expires)."""
        self._stopping.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.mover is not None:
            self.mover.close()
        try:
            self.store.release(self.name, self.owner)
        except Exception as e:  # the store may be gone at shutdown: the lease then expires
            log.warning("policy %s: could not release its lease: %s", self.name, e)
        self.source.close()
        self.target.close()

    # ------------------------------------------------------------------ helpers
    def _on_bytes(self, n: int) -> None:
        """Called by the copy threads with the bytes of each copied file."""
        if self.metrics is not None:
            self.metrics.bytes_copied.labels(self.name).inc(n)
        progress = self.progress
        if progress is not None:
            with self._progress_lock:
                if self._copy_task is None:
                    self._copy_task = progress.add_task(f"{self.name}: MiB copied", total=None)
                self._copied_bytes += n
                progress.update(self._copy_task, completed=self._copied_bytes // 2**20)

    def _sync(self, source_location: str | None, into: SyncResult | None = None) -> None:
        """Sync the data directory ``source_location`` to its relocated target location."""
        self._sync_all([source_location], into)

    def _sync_all(self, source_locations: list[str | None], into: SyncResult | None = None) -> None:
        """Sync several data directories to their relocated target locations, their copies in
        one batch (the store's ``copying`` says which)."""
        if self.mover is None:
            return
        pairs = []
        for loc in source_locations:
            if loc:
                target = self.relocate(loc)
                assert target is not None
                pairs.append((loc, target))
        if not pairs:
            return
        self.store.update(
            self.name, copying=pairs[0][1] if len(pairs) == 1 else f"{pairs[0][1]} and {len(pairs) - 1} more"
        )
        result = self.mover.sync_many(pairs)
        if self.metrics is not None and result.copied:
            self.metrics.files_copied.labels(self.name).inc(result.copied)
        if into is not None:
            into.add(result)

    def current_event_id(self) -> int:
        """The source's current notification event id, also set as the policy's
        ``hivemesh_replication_source_event_id`` metric. Raises what the source's call raises."""
        current = int(self.source.current_notification_event_id())
        if self.metrics is not None:
            self.metrics.source_event_id.labels(self.name).set(current)
        return current

    def _lease(self) -> None:
        """Hold the policy's lease: renewed in the store once half of it has run out (not on every
        poll). Raises ReplicationError naming the holder when another process runs the policy."""
        if time.monotonic() < self._lease_renew_at:
            return
        if not self.store.acquire(self.name, self.owner, LEASE_MS):
            st = self.store.get(self.name)
            holder = st.lease_owner if st else "?"
            raise ReplicationError(f"policy {self.name} is being run by {holder}; not starting a second copy")
        self._lease_renew_at = time.monotonic() + LEASE_MS / 2000

    # ------------------------------------------------------------------ bootstrap
    def _source_tables(self, db: str) -> list[str]:
        return [t for t in self.source_calls.get_all_tables(db) if self.scope.table(db, t)]

    def _source_databases(self) -> list[str]:
        return [d for d in self.source_calls.get_all_databases() if self.scope.database(d)]

    def bootstrap(self, prune: bool = False) -> SyncResult:
        """Write every database and table in scope to the target as the source has it now (see
        the module docstring). ``prune``: drop target objects in scope the source lacks (when
        ``propagate_drops``). Returns what was copied. Raises LocationRefused as
        :meth:`bootstrap_database`, the metastores' exceptions (MetaException, NoSuchObjectException, ...,
        transport errors) and OSError from the copies; what was written before stays."""
        out = SyncResult()
        dbs = self._source_databases()
        task = None
        if self.progress is not None:
            task = self.progress.add_task(f"{self.name}: bootstrap", total=len(dbs))
        for db in dbs:
            out.add(self.bootstrap_database(db, prune=prune))
            if task is not None:
                self.progress.advance(task)
        if prune and self.policy.propagate_drops:
            for db in self.target_calls.get_all_databases():
                if self.scope.database(db) and db not in dbs:
                    log.info("policy %s: dropping database %s (gone at the source)", self.name, db)
                    for t in self.target_calls.get_all_tables(db):
                        self._drop_target_table(db, t)
                    self._drop_target_database(db)
        return out

    def bootstrap_database(self, db: str, prune: bool = False, tables: list[str] | None = None) -> SyncResult:
        """Bootstrap database ``db`` (its functions and its tables in scope, or only ``tables``).
        Raises LocationRefused for a database whose target location or managed location would be
        in the source zone."""
        out = SyncResult()
        database = self.source_calls.get_database(db)
        self.paths.check_database(database)
        self.replayer.put_database(database)
        for fname in self.source_calls.get_functions(db, "*") or []:
            self.replayer.put_function(self.source_calls.get_function(db, fname))
        names = tables if tables is not None else self._source_tables(db)
        for t in names:
            out.add(self.bootstrap_table(db, t, prune=prune))
        if prune and tables is None and self.policy.propagate_drops:
            wanted = {t.lower() for t in names}
            for t in self.target_calls.get_all_tables(db):
                if self.scope.table(db, t) and t.lower() not in wanted:
                    log.info("policy %s: dropping table %s.%s (gone at the source)", self.name, db, t)
                    self._drop_target_table(db, t)
            wanted_fns = set(self.source_calls.get_functions(db, "*") or [])
            for f in self.target_calls.get_functions(db, "*") or []:
                if f not in wanted_fns:
                    self.target_calls.drop_function(db, f)
        return out

    def bootstrap_table(self, db: str, name: str, prune: bool = False) -> SyncResult:
        """Bootstrap one table: metadata, column statistics, partitions in pages, data. A table
        the source no longer has is dropped on the target (with ``propagate_drops``). Raises
        LocationRefused, before writing anything, for a table whose target location would be in
        the source zone (:mod:`hivemesh.replication.paths`)."""
        out = SyncResult()
        try:
            table = self.source_calls.get_table(db, name)
        except NoSuchObjectException:
            if self.policy.propagate_drops:
                self._drop_target_table(db, name)
            return out
        self.paths.relocate_checked(_location(table), f"table {db}.{name}")
        if not table.partitionKeys and not is_view(table):
            self._sync(_location(table), out)
        self.replayer.put_table(table)
        self._copy_table_stats(table)
        if table.partitionKeys:
            out.add(self._bootstrap_partitions(table, prune))
        if _transactional(table):
            self._copy_write_id_state(table)
        return out

    def _copy_write_id_state(self, table: Table) -> None:
        """Give the target an ACID table's write-id state as the source has it now (after its
        files are there, so readers of the target see its rows from then on). Write ids still open
        at the source are replicated as the open txns they are when their allocation is in the last
        :data:`LOOKBACK_EVENTS` events (then their commit or abort follows); others are recorded as
        aborted on the target (their rows appear with the next resync)."""
        db, name = table.dbName, table.tableName
        full = f"{db}.{name}"
        wil = self.source.valid_write_ids([full], self.source.valid_txn_list())[full]
        # the state first: an adopted allocation moves the target's next write id past the open
        # ids, and the state records no aborted id below it; the adoption then replaces the
        # aborted placeholder of each open id it finds
        self.target_calls.repl_tbl_writeid_state(
            ReplTblWriteIdStateRequest(
                validWriteIdlist=wil.to_string(),
                user=self.replayer.user,
                hostName=self.replayer.host,
                dbName=db,
                tableName=name,
            )
        )
        if wil.open_write_ids:
            # ids whose txns are already replicated (open on the target) need no look back
            there = self.target.valid_write_ids([full], self.target.valid_txn_list())[full]
            missing = set(wil.open_write_ids) - set(there.open_write_ids)
            if missing:
                self._adopt_open_writes(db, name, missing)

    def _adopt_open_writes(self, db: str, name: str, open_ids: set[int]) -> None:
        """Open on the target the source txns that hold ``open_ids`` of ``db.name``, found in the
        ALLOC_WRITE_ID events of the last :data:`LOOKBACK_EVENTS` events, and allocate their write
        ids there (forced to the source's)."""
        now = self.current_event_id()
        after = max(0, now - LOOKBACK_EVENTS)
        wanted = set(open_ids)
        while wanted and after < now:
            events = self.read_events(after, self.config.replication.batch_events)
            if not events:
                break
            for e in events:
                if e.eventType != ALLOC_WRITE_ID_EVENT or (e.dbName or "").lower() != db.lower():
                    continue
                if (e.tableName or "").lower() != name.lower():
                    continue
                msg = ev.parse_event(e)
                assert isinstance(msg, ev.AllocWriteId)
                pairs = [t for t in msg.txn_to_write_ids if t.writeId in wanted]
                if pairs:
                    self._open_on_target([t.txnId for t in pairs])
                    self.store.txn_wrote(
                        self.name, [(t.txnId, msg.write_db, msg.write_table, t.writeId) for t in pairs]
                    )
                    self.target_calls.allocate_table_write_ids(
                        AllocateTableWriteIdsRequest(
                            dbName=msg.write_db,
                            tableName=msg.write_table,
                            replPolicy=self.replayer.policy,
                            srcTxnToWriteIdList=pairs,
                        )
                    )
                    wanted -= {t.writeId for t in pairs}
            after = events[-1].eventId
        if wanted:
            log.warning(
                "policy %s: write ids %s of %s.%s are open at the source and their allocation is not in "
                "the last %d events: recorded as aborted on the target",
                self.name, sorted(wanted), db, name, LOOKBACK_EVENTS,
            )  # fmt: skip

    def _bootstrap_partitions(self, table: Table, prune: bool) -> SyncResult:
        out = SyncResult()
        db, name = table.dbName, table.tableName
        names = list(self.source_calls.get_partition_names(db, name, -1) or [])
        task = None
        if self.progress is not None and len(names) > PAGE:
            task = self.progress.add_task(f"{self.name}: {db}.{name} partitions", total=len(names))
        for i in range(0, len(names), PAGE):
            chunk = names[i : i + PAGE]
            parts = self.source_calls.get_partitions_by_names(db, name, chunk) or []
            try:  # both relocate every partition's location, refusing one into the source zone
                self._sync_all([_location(p) for p in parts], out)
                self.replayer.put_partitions(table, parts)
            except LocationRefused as e:
                raise self._partition_refused(table, parts, e) from None
            self._copy_partition_stats(table, chunk)
            if task is not None:
                self.progress.advance(task, len(chunk))
        if prune and self.policy.propagate_drops:
            wanted = set(names)
            extra = [n for n in self.target_calls.get_partition_names(db, name, -1) or [] if n not in wanted]
            for i in range(0, len(extra), PAGE):
                for p in self.target_calls.get_partitions_by_names(db, name, extra[i : i + PAGE]) or []:
                    self._drop_target_partition(table, p.values)
        return out

    def _partition_refused(self, table: Table, parts: list[Any], e: LocationRefused) -> LocationRefused:
        """``e`` (a partition location of ``table`` refused) naming the partition among ``parts``."""
        keys = [k.name for k in table.partitionKeys]
        found = [p for p in parts if _location(p) == e.source_location]
        what = f"{table.dbName}.{table.tableName}/" + (
            make_part_name(keys, found[0].values) if found else "?"
        )
        why = self.paths.refusal(f"partition {what}", e.source_location, e.target_location)
        return LocationRefused(why or str(e), e.source_location, e.target_location)

    def _copy_table_stats(self, table: Table) -> None:
        cols = [c.name for c in (table.sd.cols if table.sd else []) or []]
        if not cols or is_view(table):
            return
        try:
            res = self.source_calls.get_table_statistics_req(
                TableStatsRequest(dbName=table.dbName, tblName=table.tableName, colNames=cols, engine="hive")
            )
        except (MetaException, NoSuchObjectException) as e:
            log.debug("no column statistics for %s.%s: %s", table.dbName, table.tableName, e)
            return
        objs = list(res.tableStats or [])
        if objs:
            from hive_metastore.ttypes import ColumnStatisticsDesc

            desc = ColumnStatisticsDesc(isTblLevel=True, dbName=table.dbName, tableName=table.tableName)
            self.target_calls.update_table_column_statistics(
                ColumnStatistics(statsDesc=desc, statsObj=objs, engine="hive")
            )

    def _copy_partition_stats(self, table: Table, part_names: list[str]) -> None:
        cols = [c.name for c in (table.sd.cols if table.sd else []) or []]
        if not cols or not part_names:
            return
        try:
            res = self.source_calls.get_partitions_statistics_req(
                PartitionsStatsRequest(
                    dbName=table.dbName,
                    tblName=table.tableName,
                    colNames=cols,
                    partNames=part_names,
                    engine="hive",
                )
            )
        except (MetaException, NoSuchObjectException) as e:
            log.debug("no partition statistics for %s.%s: %s", table.dbName, table.tableName, e)
            return
        from hive_metastore.ttypes import ColumnStatisticsDesc

        for part_name, objs in (res.partStats or {}).items():
            if objs:
                desc = ColumnStatisticsDesc(
                    isTblLevel=False, dbName=table.dbName, tableName=table.tableName, partName=part_name
                )
                self.target_calls.update_partition_column_statistics(
                    ColumnStatistics(statsDesc=desc, statsObj=list(objs), engine="hive")
                )

    # ------------------------------------------------------------------ drops on the target
    def _drop_target_table(self, db: str, name: str, source: Table | None = None) -> None:
        """Drop ``db.name`` on the target, its files first when it owns them (a kill in between
        leaves the table to drop again). ``source``: the source's table (of a DROP_TABLE event),
        whose relocated directory is cleared when the target lacks the table (a bootstrap killed
        after copying its files, before writing it)."""
        try:
            table = self.target_calls.get_table(db, name)
        except NoSuchObjectException:
            if source is not None and owns_data(source) and not is_view(source):
                self._remove_target(self.paths.relocate(_location(source)), _location(source))
            return
        if owns_data(table) and self.mover is not None and _location(table):
            self._remove_target(_location(table), _location(source) if source is not None else None)
        try:
            self.target_calls.drop_table(db, name, False)
        except NoSuchObjectException:
            return

    def _remove_target(self, target_location: str | None, source_location: str | None = None) -> None:
        """Delete a target directory, unless it lies in the source zone (in a configured source
        directory, or in ``source_location``, the source object's own): a target left pointing
        at the source's files (by an older replicator) must not have them deleted by a drop."""
        if self.mover is None or not target_location:
            return
        why = self.paths.refusal("a dropped object", source_location, target_location)
        root = self.paths.source_root_of(target_location)
        if why is not None or root is not None:
            log.error(
                "policy %s: not deleting %s on the target: it lies in zone %s (%s)",
                self.name, target_location, self.policy.source, why or f"under {root}",
            )  # fmt: skip
            return
        self.mover.remove(target_location)

    def _drop_target_partition(self, table: Table, values: list[str]) -> None:
        """Drop a partition of source ``table`` on the target, its files first when the table owns
        them (a kill in between leaves the partition to drop again). When the target lacks it, its
        default directory is cleared (a bootstrap killed after copying its files, before writing
        it)."""
        db, name = table.dbName, table.tableName
        owns = owns_data(table) and self.mover is not None
        try:
            part = self.target_calls.get_partition(db, name, values)
        except NoSuchObjectException:
            if owns and _location(table):
                keys = [k.name for k in table.partitionKeys or []]
                default = f"{_location(table)}/{make_part_name(keys, values)}"
                self._remove_target(self.paths.relocate(default), default)
            return
        if owns:
            self._remove_target(_location(part))
        try:
            self.target_calls.drop_partition(db, name, values, False)
        except NoSuchObjectException:
            return

    def _drop_target_database(self, db: str) -> None:
        try:
            self.target_calls.drop_database(db, False, True)
        except NoSuchObjectException:
            pass

    # ------------------------------------------------------------------ events
    def read_events(self, after: int, limit: int) -> list[NotificationEvent]:
        """Up to ``limit`` source events after id ``after``. Raises what the source's call raises
        (transport errors; the HMS call declares no exception)."""
        resp = self.source_calls.get_next_notification(
            NotificationEventRequest(lastEvent=after, maxEvents=limit)
        )
        return list(resp.events or [])

    def _in_scope(self, db: str | None, table: str | None) -> bool:
        if db is None:
            return True
        conflicts = self.scope.conflicts(db)
        if conflicts and db not in self._warned:
            self._warned.add(db)
            log.error(
                "policy %s: database %s also matches %s in the other direction; its changes are not "
                "replicated (a database cannot be replicated both ways)",
                self.name, db, ", ".join(conflicts),
            )  # fmt: skip
        if table is None:
            return self.scope.database(db) and (db, "") not in self._bootstraps
        return (
            self.scope.table(db, table)
            and (db, table) not in self._bootstraps
            and (db, "") not in self._bootstraps
        )

    def _coalescable(self, msg: ev.Message) -> bool:
        """An ALTER_PARTITION that is no rename, of a table in scope: consecutive ones of one table
        are applied as one ``alter_partitions`` call (the last after-image of each partition)."""
        return (
            isinstance(msg, ev.AlterPartition)
            and list(msg.before.values or []) == list(msg.after.values or [])
            and self._in_scope(msg.table.dbName.lower(), msg.table.tableName.lower())
        )

    def _apply_run(self, run: list[ev.AlterPartition], out: StepResult) -> None:
        """Apply consecutive ALTER_PARTITION events of one table: data of every partition, then
        one ``alter_partitions`` with the last after-image of each; on a target that cannot take
        it (a partition missing), one event at a time (with healing)."""
        latest: dict[tuple[str, ...], Any] = {}
        for m in run:
            latest[tuple(m.after.values or [])] = m.after
        table = run[0].table
        try:
            self._sync_all([_location(p) for p in latest.values()], out.data)
            self.replayer.put_partition_images(table, list(latest.values()))
        except (NoSuchObjectException, InvalidObjectException, InvalidOperationException):
            for m in run:
                self.apply(m.event, out, m)
        out.applied += len(run)

    def apply(self, event: NotificationEvent, out: StepResult, msg: ev.Message | None = None) -> bool:
        """Apply one source event if it is in scope (data, then metadata); True when applied.
        ``msg``: the event already decoded. Raises LocationRefused naming the event and its object
        when a location it would write to the target lies in the source zone."""
        if msg is None:
            msg = ev.parse_event(event)
        try:
            return self._apply_event(event, msg, out)
        except LocationRefused as e:  # name the object the event is about
            db, table = event_object(msg)
            what = f"{db}.{table}" if table else f"database {db}"
            database = msg.database if isinstance(msg, ev.CreateDatabase) else None
            database = msg.after if isinstance(msg, ev.AlterDatabase) else database
            if database is not None and e.source_location == database.managedLocationUri:
                what += "'s managedLocationUri"
            why = self.paths.refusal(f"{what} (event {event.eventId}, {event.eventType})", e.source_location,
                                     e.target_location)  # fmt: skip
            raise LocationRefused(why or str(e), e.source_location, e.target_location) from None

    def _apply_event(self, event: NotificationEvent, msg: ev.Message, out: StepResult) -> bool:
        db, table = event_object(msg)
        if isinstance(msg, ev.OpenTxn):
            return False
        if isinstance(msg, (ev.CommitTxn, ev.AbortTxn)):
            return self._apply_txn_end(msg, out)
        if isinstance(msg, ev.AlterTable):
            return self._apply_alter_table(msg, out)
        if not self._in_scope(db, table):
            return False
        try:
            return self._apply(msg, out)
        except (NoSuchObjectException, InvalidObjectException, InvalidOperationException) as e:
            if db is None:
                raise
            log.info("policy %s: event %d (%s) does not apply to the target (%s); healing %s from the source",
                     self.name, event.eventId, event.eventType, e, f"{db}.{table}" if table else db)  # fmt: skip
            self._heal(db, table, out)
            return True

    def _apply(self, msg: ev.Message, out: StepResult) -> bool:
        drops = self.policy.propagate_drops
        if isinstance(msg, ev.CreateTable):
            if not msg.table.partitionKeys and not is_view(msg.table):
                self._sync(_location(msg.table), out.data)
            self.replayer.apply(msg.event)
        elif isinstance(msg, ev.AddPartition):
            self._sync_all([_location(p) for p in msg.partitions], out.data)
            self.replayer.apply(msg.event)
        elif isinstance(msg, ev.AlterPartition):
            renamed = list(msg.before.values or []) != list(msg.after.values or [])
            if not renamed:
                self._sync(_location(msg.after), out.data)
            self.replayer.apply(msg.event)
            if renamed:
                self._sync(_location(msg.after), out.data)
        elif isinstance(msg, (ev.Insert, ev.AcidWrite)):
            self._sync(
                _location(msg.partition) if msg.partition is not None else _location(msg.table), out.data
            )
        elif isinstance(msg, ev.DropTable):
            if not drops:
                return False
            self._drop_target_table(msg.table.dbName, msg.table.tableName, msg.table)
        elif isinstance(msg, ev.DropPartition):
            if not drops:
                return False
            for values in msg.values:
                self._drop_target_partition(msg.table, values)
        elif isinstance(msg, ev.DropDatabase):
            if not drops:
                return False
            self.replayer.apply(msg.event)
        elif isinstance(msg, ev.AllocWriteId):
            self._open_on_target([t.txnId for t in msg.txn_to_write_ids])
            self.store.txn_wrote(
                self.name, [(t.txnId, msg.write_db, msg.write_table, t.writeId) for t in msg.txn_to_write_ids]
            )
            self.replayer.apply(msg.event)
        else:
            return self.replayer.apply(msg.event)
        return True

    def _open_on_target(self, source_txns: list[int]) -> None:
        """Open the source txns not yet open on the target there (Hive's replication form: the
        target maps them to its own), and record them."""
        for txn in source_txns:
            if not self.store.txn_is_open(self.name, txn):
                self.target_calls.open_txns(
                    OpenTxnRequest(num_txns=1, user=self.replayer.user, hostname=self.replayer.host,
                                   replPolicy=self.replayer.policy, replSrcTxnIds=[txn])
                )  # fmt: skip
                self.store.txn_opened(self.name, txn)

    def _apply_txn_end(self, msg: ev.CommitTxn | ev.AbortTxn, out: StepResult) -> bool:
        if not self.store.txn_is_open(self.name, msg.txn_id):
            return False
        if isinstance(msg, ev.CommitTxn):
            # the files first, then the commit that makes them visible on the target
            writes = committed_writes(self.source_calls, msg)
            reported = set()
            for w in writes:
                if self.scope.table(w.database, w.table):
                    self._sync_write(w.database, w.table, w.partition, out)
                    reported.add((w.database.lower(), w.table.lower()))
            for db, table, _ in self.store.txn_writes(self.name, msg.txn_id):
                if (db, table) not in reported and self.scope.table(db, table):
                    self._sync_write(db, table, None, out, every_partition=True)
            msg = dataclasses.replace(msg, writes=writes)  # the target's commit records them
        self.replayer.apply(msg.event, msg)
        self.store.txn_ended(self.name, msg.txn_id)
        return True

    def _sync_write(
        self, db: str, table: str, partition: str | None, out: StepResult, every_partition: bool = False
    ) -> None:
        """Sync the files of one ACID write: of ``partition`` (a Hive partition name), of the table,
        or with ``every_partition`` of all its partitions (a write the writer did not report with
        ``add_write_notification_log``, such as a streaming batch's txn: only its allocation is
        known)."""
        if self.mover is None:
            return
        try:
            if partition:
                p = self.source_calls.get_partition_by_name(db, table, partition)
                self._sync(_location(p), out.data)
                return
            t = self.source_calls.get_table(db, table)
            if every_partition and t.partitionKeys:
                # only partitions the target has: one it lacks gets its files with the event that
                # adds (or renames) it there, and files of a later state must not land first
                there = set(self.target_calls.get_partition_names(db, table, -1))
                parts = self.source_calls.get_partitions(db, table, -1)
                keys = [k.name for k in t.partitionKeys]
                self._sync_all(
                    [_location(p) for p in parts if make_part_name(keys, p.values) in there], out.data
                )
            else:
                self._sync(_location(t), out.data)
        except NoSuchObjectException:
            return

    def _apply_alter_table(self, msg: ev.AlterTable, out: StepResult) -> bool:
        before, after = msg.before, msg.after
        was = self._in_scope(before.dbName.lower(), before.tableName.lower())
        now = self._in_scope(after.dbName.lower(), after.tableName.lower())
        if not was and not now:
            return False
        renamed = (before.dbName.lower(), before.tableName.lower()) != (
            after.dbName.lower(),
            after.tableName.lower(),
        )
        if renamed and was and not now:  # renamed out of scope: it is gone for this policy
            if self.policy.propagate_drops:
                self._drop_target_table(before.dbName, before.tableName)
            return True
        if renamed and now and not was:  # renamed into scope: a new table for this policy
            out.data.add(self.bootstrap_table(after.dbName, after.tableName))
            return True
        unpartitioned = not after.partitionKeys and not is_view(after)
        try:
            if unpartitioned and not renamed:
                self._sync(_location(after), out.data)
            self.replayer.apply(msg.event)
            if renamed and not is_view(after):
                self._follow_rename(after, out)
        except (NoSuchObjectException, InvalidObjectException, InvalidOperationException) as e:
            log.info("policy %s: ALTER_TABLE of %s.%s does not apply to the target (%s); healing it from the source",
                     self.name, after.dbName, after.tableName, e)  # fmt: skip
            self._heal(after.dbName, after.tableName, out)
        return True

    def _follow_rename(self, after: Table, out: StepResult) -> None:
        """After a table rename: a target that did not move the table where the source did (its
        default location differs, e.g. a Hive 4 source whose database is in its external
        warehouse while its managed tables are in the managed one) gets the table written again
        as the source has it (data synced to the new place, partitions re-pointed), and the
        directory it left removed. Otherwise only an unpartitioned table's data is synced."""
        want = self.relocate(_location(after))
        target = self.target_calls.get_table(after.dbName, after.tableName)
        got = _location(target)
        if not want or not got or location_key(got) == location_key(want):
            if not after.partitionKeys:
                self._sync(_location(after), out.data)
            return
        log.info("policy %s: renamed table %s.%s is at %s on the target, not at %s; writing it again from the source",
                 self.name, after.dbName, after.tableName, got, want)  # fmt: skip
        out.data.add(self.bootstrap_table(after.dbName, after.tableName))
        try:
            now = _location(self.target_calls.get_table(after.dbName, after.tableName)) or ""
        except NoSuchObjectException:
            now = ""
        if owns_data(target) and (not now or location_key(now) != location_key(got)):
            self._remove_target(got)

    def _put_database(self, db: str) -> None:
        """Write database ``db`` to the target as the source has it now (LocationRefused when
        the rule refuses its location or managed location)."""
        database = self.source_calls.get_database(db)
        self.paths.check_database(database)
        self.replayer.put_database(database)

    def _heal(self, db: str, table: str | None, out: StepResult) -> None:
        """Write ``db`` (or ``db.table``) to the target as the source has it now."""
        try:
            self.source_calls.get_database(db)
        except NoSuchObjectException:
            if self.policy.propagate_drops:
                self._drop_target_database(db)
            return
        if table is None:
            self._put_database(db)
            return
        try:
            self.target_calls.get_database(db)
        except NoSuchObjectException:
            self._put_database(db)
        out.data.add(self.bootstrap_table(db, table))

    # ------------------------------------------------------------------ rule changes
    def _rules(self) -> dict[str, Any]:
        return {"databases": self.policy.databases, "tables": self.policy.tables}

    def _rule_changes(self, state: PolicyState) -> None:
        """Start background bootstraps of objects newly in scope; record those out of scope."""
        old = state.rules
        if old is None or old == self._rules():
            for obj in self.store.objects(self.name):
                if obj.state == "bootstrapping":
                    self._start_bootstrap(obj.db, obj.table or None, obj.event_id or 0)
            self.store.update(self.name, rules=self._rules())
            return
        previous = PolicyConfig(name=self.name, source=self.policy.source, target=self.policy.target,
                                databases=old["databases"], tables=old.get("tables") or {})  # fmt: skip
        before = Scope(previous, self.scope.opposite)
        start = state.event_id or 0
        for db in self.source_calls.get_all_databases():
            if self.scope.database(db) and not before.database(db):
                self.store.put_object(self.name, db, "", "bootstrapping", self.current_event_id())
                continue
            if before.database(db) and not self.scope.database(db):
                log.info(
                    "policy %s: database %s no longer matches; its target copy is left as it is",
                    self.name,
                    db,
                )
                self.store.put_object(self.name, db, "", "stopped", start)
                continue
            if not self.scope.database(db):
                continue
            for t in self.source_calls.get_all_tables(db):
                if self.scope.table(db, t) and not before.table(db, t):
                    self.store.put_object(self.name, db, t, "bootstrapping", self.current_event_id())
                elif before.table(db, t) and not self.scope.table(db, t):
                    log.info(
                        "policy %s: table %s.%s no longer matches; its target copy is left", self.name, db, t
                    )
                    self.store.put_object(self.name, db, t, "stopped", start)
        self.store.update(self.name, rules=self._rules())
        for obj in self.store.objects(self.name):
            if obj.state == "bootstrapping":
                self._start_bootstrap(obj.db, obj.table or None, obj.event_id or 0)

    def _start_bootstrap(self, db: str, table: str | None, event_id: int) -> None:
        key = (db, table or "")
        if key in self._bootstraps:
            return
        log.info(
            "policy %s: bootstrapping %s on its own (newly in scope)",
            self.name,
            f"{db}.{table}" if table else db,
        )
        runner = self._clone()

        def work() -> SyncResult:
            """The bootstrap on its own connections."""
            try:
                if table is None:
                    return runner.bootstrap_database(db)
                return runner.bootstrap_table(db, table)
            finally:
                runner.source.close()
                runner.target.close()

        future = self._pool.submit(work)
        future.event_id = event_id  # type: ignore[attr-defined]
        self._bootstraps[key] = future

    def _clone(self) -> PolicyRunner:
        """A runner of the same policy with its own connections, for a background bootstrap."""
        other = object.__new__(PolicyRunner)
        other.__dict__.update(self.__dict__)
        other.source = self.source.clone()
        other.target = self.target.clone()
        other.source_calls = ThriftCalls(other.source)
        other.target_calls = ThriftCalls(other.target)
        other.replayer = Replayer(
            other.target_calls, repl_policy=self.replayer.policy, relocate=self.relocate
        )
        other.progress = None
        return other

    def _finish_bootstraps(self, checkpoint: int, out: StepResult) -> None:
        """Bootstraps that ended: apply the events they missed, then let their events flow."""
        for key, future in list(self._bootstraps.items()):
            if not future.done():
                continue
            db, table = key
            out.data.add(future.result())  # a failed bootstrap raises here and is retried
            start = getattr(future, "event_id", 0)
            del self._bootstraps[key]
            after = start
            while after < checkpoint:
                events = [
                    e
                    for e in self.read_events(after, self.config.replication.batch_events)
                    if e.eventId <= checkpoint
                ]
                if not events:
                    break
                for e in events:
                    msg = ev.parse_event(e)
                    edb, etable = event_object(msg)
                    if edb == db and (not table or etable == table):
                        self.apply(e, out)
                after = events[-1].eventId
            self.store.put_object(self.name, db, table, "replicating", start)
            log.info(
                "policy %s: %s bootstrapped; its events flow with the others",
                self.name,
                f"{db}.{table}" if table else db,
            )

    # ------------------------------------------------------------------ steps
    def step(self, until: int | None = None) -> StepResult:
        """One pass: bootstrap or resync when needed, then apply up to one batch of events (never
        beyond event id ``until``). Raises on any error; the state stays where the last
        checkpoint left it."""
        self._lease()
        out = StepResult()
        state = self.store.get(self.name)
        assert state is not None
        if state.phase in ("new", "bootstrapping"):
            self._run_bootstrap(state, out)
            return out
        if state.phase == "resyncing":
            self._run_resync(state.resync_reason or "interrupted resync", out)
            return out
        if not self._rules_checked:
            self._rules_checked = True
            self._rule_changes(state)
        checkpoint = state.event_id or 0
        self._finish_bootstraps(checkpoint, out)
        batch = self.config.replication.batch_events
        events = self.read_events(checkpoint, batch)
        current = self.current_event_id() if not events else None
        if current is not None and current > checkpoint:
            # Events up to ``current`` were committed before it was read: a second read that
            # finds none means the log was purged past the checkpoint to its end.
            events = self.read_events(checkpoint, batch)
            if not events:
                self._run_resync(
                    f"the source's notification log was purged past the checkpoint: no event after it, "
                    f"current event {current}, checkpoint {checkpoint}",
                    out,
                )
                return out
        if events and events[0].eventId > checkpoint + 1:
            self._run_resync(
                f"the source's notification log was purged past the checkpoint: next event {events[0].eventId}, "
                f"checkpoint {checkpoint}",
                out,
            )
            return out
        if until is not None:
            events = [e for e in events if e.eventId <= until]
        last_time = state.event_time
        run: list[ev.AlterPartition] = []  # consecutive plain ALTER_PARTITIONs of one table
        for e in events:
            if self._stopping.is_set():
                break
            msg = ev.parse_event(e)
            if self._coalescable(msg):
                assert isinstance(msg, ev.AlterPartition)
                if run and (run[0].table.dbName, run[0].table.tableName) != (
                    msg.table.dbName,
                    msg.table.tableName,
                ):
                    self._apply_run(run, out)
                    run = []
                run.append(msg)
            else:
                if run:
                    self._apply_run(run, out)
                    run = []
                if self.apply(e, out, msg):
                    out.applied += 1
                else:
                    out.skipped += 1
            out.last_event_id = e.eventId
            last_time = e.eventTime
        if run:
            self._apply_run(run, out)
        if out.last_event_id is not None:
            self.store.checkpoint(self.name, out.last_event_id, last_time, out.applied)
        if self.metrics is not None:
            self.metrics.events_applied.labels(self.name).inc(out.applied)
            self.metrics.events_skipped.labels(self.name).inc(out.skipped)
        return out

    def _run_bootstrap(self, state: PolicyState, out: StepResult) -> None:
        start = state.bootstrap_event_id
        if start is None:
            start = self.current_event_id()
            self.store.update(self.name, phase="bootstrapping", bootstrap_event_id=start)
        log.info("policy %s: bootstrap from source event %d", self.name, start)
        t0 = time.monotonic()
        out.data.add(self.bootstrap(prune=state.phase == "bootstrapping"))
        self.store.update(self.name, phase="replicating", event_id=start, rules=self._rules(), copying=None)
        self.store.checkpoint(self.name, start, None, 0)
        out.bootstrapped = True
        out.last_event_id = start
        log.info("policy %s: bootstrap done in %.1fs (%d files, %d bytes copied)", self.name,
                 time.monotonic() - t0, out.data.copied, out.data.bytes_copied)  # fmt: skip

    def rescan(self) -> StepResult:
        """Compare and repair now (continuous mode's ``rescan_interval_s``): like a resync, but
        not counted as one; files are judged by size, the ledger and checksums. Raises ReplicationError
        when another process holds the policy's lease, and the metastore, storage (OSError) and
        LocationRefused errors of the comparison."""
        self._lease()
        out = StepResult()
        self._run_resync("scheduled rescan", out, count=False)
        return out

    def _run_resync(self, reason: str, out: StepResult, count: bool = True) -> None:
        start = self.current_event_id()
        st = self.store.get(self.name)
        assert st is not None
        if count and st.phase != "resyncing":
            log.warning("policy %s: re-syncing by comparison: %s", self.name, reason)
            self.store.update(self.name, phase="resyncing", resync_reason=reason, resyncs=st.resyncs + 1)
            if self.metrics is not None:
                self.metrics.resyncs.labels(self.name).inc()
        out.data.add(self.bootstrap(prune=True))
        self._settle_txns()
        self.store.update(self.name, phase="replicating", copying=None)
        self.store.checkpoint(self.name, start, None, 0)
        out.resynced = True
        out.last_event_id = start

    def _settle_txns(self) -> None:
        """End on the target the replicated txns the source ended while its events were not
        read (a resync skips them): committed or aborted as at the source; still open ones stay."""
        tracked = self.store.txns(self.name)
        if not tracked:
            return
        vtl = self.source.valid_txn_list()
        for txn in tracked:
            if txn in vtl.open_txns:
                continue
            if txn in vtl.aborted_txns:
                self.target_calls.abort_txn(AbortTxnRequest(txnid=txn, replPolicy=self.replayer.policy))
            else:
                self.target_calls.commit_txn(CommitTxnRequest(txnid=txn, replPolicy=self.replayer.policy))
            self.store.txn_ended(self.name, txn)

    def resync(self, reason: str = "requested") -> StepResult:
        """Re-sync by comparison now (what ``verify --repair`` runs): the target made equal to the
        source, copying only what differs; the checkpoint moves to the source's current event. Raises as
        :meth:`rescan`."""
        self._lease()
        out = StepResult()
        if self.mover is not None:  # the target's files may have changed behind the ledger's back
            self.mover.trust_ledger = False
        try:
            self._run_resync(reason, out)
        finally:
            if self.mover is not None:
                self.mover.trust_ledger = True
        return out

    def run_once(self) -> Iterator[StepResult]:
        """Steps until every event up to the source's current id (read at the start) is applied
        and background bootstraps are done; yields each step's result. Raises as :meth:`step` (from the
        iteration that meets the error)."""
        until = self.current_event_id()
        while True:
            res = self.step(until)
            yield res
            st = self.store.get(self.name)
            assert st is not None
            if st.phase == "replicating" and (st.event_id or 0) >= until and not self._bootstraps:
                return
            if res.applied == 0 and res.skipped == 0 and not res.bootstrapped and not res.resynced:
                if self._bootstraps:
                    time.sleep(0.05)
                    continue
                return

    def lag(self) -> tuple[int, float]:
        """``(events, seconds)`` the target is behind the source: events after the checkpoint, and
        the age of the oldest of them (0 when caught up). Updates the stored source event id. Raises what
        the source's calls raise and the store's errors."""
        st = self.store.get(self.name)
        checkpoint = (st.event_id if st else None) or 0
        current = self.current_event_id()
        self.store.update(self.name, source_event_id=current)
        if current <= checkpoint:
            return 0, 0.0
        nxt = self.read_events(checkpoint, 1)
        age = max(0.0, time.time() - nxt[0].eventTime) if nxt else 0.0
        return current - checkpoint, age

    def stop(self) -> None:
        """Ask a running step to stop after its current event."""
        self._stopping.set()


def record_failure(store: ReplicationStore, policy: str, error: BaseException) -> str:
    """Store ``error`` as the policy's last error; returns the message. Never raises: a store that cannot
    record it is logged."""
    message = f"{type(error).__name__}: {error}"
    try:
        store.record_error(policy, message)
    except Exception as e:  # the store itself failing: logged by the caller with the original
        log.error("policy %s: could not record its error in the store: %s", policy, e)
    return message


def since_ms(ms: int | None) -> float | None:
    """Seconds since ``ms`` (ms since the epoch), None for None."""
    return None if ms is None else max(0.0, (now_ms() - ms) / 1000.0)
