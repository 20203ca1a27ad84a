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

The loop itself (lease, checkpoint, batches, resync detection) is
:class:`~hivemesh.replication.policy.PolicyLoop`'s, which events are applied and which go together
is :mod:`hivemesh.replication.planner`'s; PolicyRunner applies them to a Hive target.

Events an object of the target cannot take (it is missing, e.g. dropped on the target by hand)
are healed from the source: the object is written again as the source has it now, or dropped when
the source no longer has it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
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
    OpenTxnRequest,
    PartitionsStatsRequest,
    ReplTblWriteIdStateRequest,
    Table,
    TableStatsRequest,
)

from hivemesh.client.errors import error_name
from hivemesh.hive import event_messages as ev
from hivemesh.hive.constants import now_ms
from hivemesh.hive.events import ALLOC_WRITE_ID_EVENT
from hivemesh.hive.names import make_part_name
from hivemesh.metastore.replay import Replayer, relocator_for
from hivemesh.replication.config import DataMode, PolicyConfig, TargetFormat
from hivemesh.replication.data import DataMover, SyncResult
from hivemesh.replication.errors import ReplicationError
from hivemesh.replication.paths import LocationRefused
from hivemesh.replication.planner import Bootstrapping, Plan, PutPartitions
from hivemesh.replication.policy import PolicyLoop, StepResult
from hivemesh.replication.scope import Scope, event_object
from hivemesh.replication.state import PolicyState, ReplicationStore
from hivemesh.replication.tables import is_view, owns_data
from hivemesh.replication.txn_writes import committed_writes
from hivemesh.replication.zones import connect_zone, zone_client
from hivemesh.storage.locations import location_key

__all__ = [
    "PAGE",
    "PolicyRunner",
    "ReplicationError",
    "StepResult",
    "connect_zone",
    "is_view",
    "owns_data",
    "relocator_for",
    "zone_client",
]

log = logging.getLogger(__name__)

PAGE = 500
"""Partitions read and written per metastore call in bootstraps."""
LOOKBACK_EVENTS = 100_000
"""How far back a bootstrap looks for the allocations of write ids open at the source."""


def _transactional(table: Table) -> bool:
    flag: str = (table.parameters or {}).get("transactional", "")
    return flag.lower() == "true"


def _location(obj: Any) -> str | None:
    sd = getattr(obj, "sd", None)
    return sd.location if sd is not None else None


class PolicyRunner(PolicyLoop):
    """Replicates ``policy`` (``format: hive``) of ``config`` with its state in ``store``: the
    executor of :class:`~hivemesh.replication.policy.PolicyLoop` for a Hive target (see the module
    docstring). Arguments as PolicyLoop's (``source`` / ``target``: clients to use instead of
    connecting). Raises ReplicationError for a policy of another format, and naming the peer when a
    metastore cannot be reached.
    """

    def _check_format(self, policy: PolicyConfig) -> None:
        if policy.format != TargetFormat.HIVE:
            raise ReplicationError(
                f"policy {policy.name}: format {policy.format.value} runs through "
                "hivemesh.replication.service.make_runner (DeltaPolicyRunner), not PolicyRunner"
            )

    def _setup(self) -> None:
        """The copy threads (``data: copy``) and the pool of background bootstraps."""
        policy, rc = self.policy, self.config.replication
        self.mover: DataMover | None = None
        if policy.data == DataMode.COPY:
            self.mover = DataMover(
                policy.name,
                self.store,
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
        self._warned: set[str] = set()
        self._progress_lock = threading.Lock()
        self._copy_task: Any = None
        self._copied_bytes = 0

    def _end_background(self) -> None:
        """Background bootstraps stopped, the copy threads closed."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.mover is not None:
            self.mover.close()

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
    def _bootstrapping(self) -> Bootstrapping:
        """Objects bootstrapped in the background (newly in scope): their events wait."""
        return frozenset(self._bootstraps)

    def plan(self, events: list[NotificationEvent]) -> Plan:
        """The plan of a batch (see :func:`~hivemesh.replication.planner.plan_batch`); a database
        that a policy of the other direction matches too is logged, once.
        Raises ValueError for an event that cannot be decoded."""
        for e in events:
            if e.dbName:
                self._warn_conflicts(e.dbName.lower())
        return super().plan(events)

    def _warn_conflicts(self, db: str) -> None:
        conflicts = self.scope.conflicts(db)
        if conflicts and db not in self._warned:
            self._warned.add(db)
            log.error(
                "policy %s: database %s also matches %s in the other direction; its changes are not "
                "replicated (a database cannot be replicated both ways)",
                self.name, db, ", ".join(conflicts),
            )  # fmt: skip

    def _in_scope(self, db: str, table: str) -> bool:
        """Whether table ``db.table`` is in scope and not bootstrapping in the background."""
        return (
            self.scope.table(db, table)
            and (db, table) not in self._bootstraps
            and (db, "") not in self._bootstraps
        )

    def put_partitions(self, action: PutPartitions, out: StepResult) -> None:
        """Apply consecutive ALTER_PARTITION events of one table: data of every partition, then
        one ``alter_partitions`` with the last after-image of each; on a target that cannot take
        it (a partition missing), one event at a time (with healing). Raises as :meth:`apply`."""
        images = list(action.images)
        try:
            self._sync_all([_location(p) for p in images], out.data)
            self.replayer.put_partition_images(action.table, images)
        except (NoSuchObjectException, InvalidObjectException, InvalidOperationException):
            for m in action.messages:
                self.apply(m.event, out, m)
        out.applied += len(action.messages)

    def apply(self, event: NotificationEvent, out: StepResult, msg: ev.Message | None = None) -> bool:
        """Apply one source event that a plan says to apply (:class:`~hivemesh.replication.planner.Apply`:
        in scope, a type the target takes): data, then metadata; True when applied, False when the
        target had nothing to do (a txn this policy never opened). ``msg``: the event already decoded. Raises LocationRefused naming the event and its object
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
        if isinstance(msg, (ev.CommitTxn, ev.AbortTxn)):
            return self._apply_txn_end(msg, out)
        if isinstance(msg, ev.AlterTable):
            return self._apply_alter_table(msg, out)
        db, table = event_object(msg)
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
            self._drop_target_table(msg.table.dbName, msg.table.tableName, msg.table)
        elif isinstance(msg, ev.DropPartition):
            for values in msg.values:
                self._drop_target_partition(msg.table, values)
        elif isinstance(msg, ev.DropDatabase):
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
        other.source_calls = other.source.hms
        other.target_calls = other.target.hms
        other.replayer = Replayer(
            other.target_calls, repl_policy=self.replayer.policy, relocate=self.relocate
        )
        other.progress = None
        return other

    def _before_batch(self, checkpoint: int, out: StepResult) -> None:
        self._finish_bootstraps(checkpoint, out)

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
                self._catch_up(db, table, events, out)
                after = events[-1].eventId
            self.store.put_object(self.name, db, table, "replicating", start)
            log.info(
                "policy %s: %s bootstrapped; its events flow with the others",
                self.name,
                f"{db}.{table}" if table else db,
            )

    def _catch_up(self, db: str, table: str, events: list[NotificationEvent], out: StepResult) -> None:
        """Apply the ``events`` of ``db`` (``db.table`` when ``table``) that its own bootstrap
        missed, as planned; they are not counted in ``out`` (its data is)."""
        mine = []
        for e in events:
            edb, etable = event_object(ev.parse_event(e))
            if edb == db and (not table or etable == table):
                mine.append(e)
        uncounted = StepResult(data=out.data)
        for action in self.plan(mine).actions:
            self.execute(action, uncounted)

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

    def _after_resync(self) -> None:
        self._settle_txns()

    def resync(self, reason: str = "requested") -> StepResult:
        """Re-sync by comparison now (what ``verify --repair`` runs): the target made equal to the
        source, copying only what differs (files judged without trusting the ledger); the checkpoint
        moves to the source's current event. Raises as :meth:`rescan`."""
        if self.mover is not None:  # the target's files may have changed behind the ledger's back
            self.mover.trust_ledger = False
        try:
            return super().resync(reason)
        finally:
            if self.mover is not None:
                self.mover.trust_ledger = True


def record_failure(store: ReplicationStore, policy: str, error: BaseException) -> str:
    """Store ``error`` as the policy's last error; returns the message. Never raises: a store that cannot
    record it is logged."""
    message = f"{error_name(error)}: {error}"
    try:
        store.record_error(policy, message)
    except Exception as e:  # the store itself failing: logged by the caller with the original
        log.error("policy %s: could not record its error in the store: %s", policy, e)
    return message


def since_ms(ms: int | None) -> float | None:
    """Seconds since ``ms`` (ms since the epoch), None for None. Never raises."""
    return None if ms is None else max(0.0, (now_ms() - ms) / 1000.0)
