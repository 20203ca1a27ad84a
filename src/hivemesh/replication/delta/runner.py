"""Running a ``format: delta`` policy: Hive tables of the source zone kept as Delta Lake tables.

A :class:`DeltaPolicyRunner` has the interface of :class:`~hivemesh.replication.runner.PolicyRunner`
(``step``, ``run_once``, ``rescan``, ``resync``, ``lag``, ``close``) and keeps, for every source
table in scope (views excepted), a Delta table at the relocated location, registered in the target
metastore the way Spark's Delta catalog registers one (external table, provider ``delta``, the
schema in the Delta log):

1. **Bootstrap** (and resync, rescan): the source's current event id is recorded, then every table
   is synced as the source has it now (:meth:`DeltaReplica.sync` with every partition; ACID tables
   at the source's current snapshot) and replicas of tables gone from the source are dropped
   (``propagate_drops``). The checkpoint becomes the recorded id.
2. **Events**: data changes of plain tables (CREATE_TABLE, ALTER_TABLE, ADD/ALTER/DROP_PARTITION,
   INSERT) mark the table or its partitions dirty; dirty tables are synced at the end of each batch
   (one Delta commit per table per batch) and before anything that needs them current. Each
   committed txn that wrote an ACID table becomes one Delta commit of that table at the txn's
   write id (the snapshot a reader would have had right after the commit: later write ids and the
   txns still open then are excluded), tagged with ``hivemesh.writeId``. DROP_TABLE drops the
   replica (its files too when the source table owned its data); a rename drops the old replica
   and builds the new one. Schema changes follow (see :mod:`hivemesh.replication.delta.schema`).

A restart repeats the batch after the checkpoint: syncs compare the replica's files with the
source's, so a repeated one commits nothing, and an ACID commit whose write id Delta already
recorded (its ``txn`` action) is skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from hive_metastore.ttypes import (
    AlreadyExistsException,
    FieldSchema,
    NoSuchObjectException,
    NotificationEvent,
    SerDeInfo,
    StorageDescriptor,
    Table,
    WriteEventInfo,
)

from hivemesh.acid.arrow_reader import HIVE_TEXT_DELIMITER, list_location
from hivemesh.acid.tables import is_insert_only, is_transactional, table_file_format
from hivemesh.hive import event_messages as ev
from hivemesh.hive.events import ABORT_TXN, ALLOC_WRITE_ID_EVENT, COMMIT_TXN, OPEN_TXN
from hivemesh.hive.txn_lists import LONG_MAX, ValidTxnList, ValidWriteIdList
from hivemesh.replication.config import ZoneConfig
from hivemesh.replication.data import SyncResult
from hivemesh.replication.delta.files import FileLayout, acid_units, plain_units
from hivemesh.replication.delta.replica import DeltaReplica, PartitionSource, ReplicaSync
from hivemesh.replication.delta.schema import UnsupportedSchemaError, arrow_type, delta_schema
from hivemesh.replication.errors import ReplicationError
from hivemesh.replication.paths import LocationRefused
from hivemesh.replication.planner import PutPartitions
from hivemesh.replication.policy import PolicyLoop, StepResult
from hivemesh.replication.runner import LOOKBACK_EVENTS, PAGE
from hivemesh.replication.scope import event_object
from hivemesh.replication.state import PolicyState
from hivemesh.replication.tables import is_view, owns_data
from hivemesh.replication.txn_writes import committed_writes
from hivemesh.storage.locations import location_key

__all__ = ["DeltaPolicyRunner", "delta_storage_options", "replica_table"]

log = logging.getLogger("hivemesh.replication.delta")

ALL = None  # every partition of a dirty table
TXN_EVENTS = frozenset({OPEN_TXN, ALLOC_WRITE_ID_EVENT, COMMIT_TXN, ABORT_TXN})
PROVIDER = "spark.sql.sources.provider"
SOURCE_KEY = "hivemesh.replica.source"


def delta_storage_options(zone: ZoneConfig) -> dict[str, str]:
    """delta-rs object-store options of a zone's S3 settings (``AWS_ENDPOINT_URL``, keys, region;
    ``AWS_ALLOW_HTTP`` for an ``http`` endpoint; conditional puts for safe commits)."""
    s3 = zone.s3
    out: dict[str, str] = {}
    if s3.endpoint_override:
        url = s3.endpoint_override
        if "://" not in url:
            url = f"{s3.scheme or 'https'}://{url}"
        out["AWS_ENDPOINT_URL"] = url
        if url.startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    for key, opt in (("AWS_ACCESS_KEY_ID", s3.access_key), ("AWS_SECRET_ACCESS_KEY", s3.secret_key),
                     ("AWS_SESSION_TOKEN", s3.session_token), ("AWS_REGION", s3.region)):  # fmt: skip
        if opt:
            out[key] = opt
    out["conditional_put"] = "etag"  # S3 If-None-Match: a Delta version is committed once
    return out


def _delta_uri(location: str) -> str:
    """The URI delta-rs opens for a metastore location (``file:`` -> a path, ``s3a://`` ->
    ``s3://``)."""
    if location.startswith("file:"):
        from hivemesh.storage import local_path

        return local_path(location)
    for scheme in ("s3a://", "s3n://"):
        if location.startswith(scheme):
            return "s3://" + location[len(scheme) :]
    return location


def replica_table(source: Table, location: str) -> Table:
    """The target metastore's entry of the Delta replica of ``source`` at ``location``, as Spark's
    Delta catalog writes one: an external table, provider ``delta``, a placeholder column (the
    schema lives in the Delta log), the location also as the SerDe's ``path``."""
    params = {
        "EXTERNAL": "TRUE",
        PROVIDER: "delta",
        "spark.sql.partitionProvider": "catalog",
        "spark.sql.sources.schema": '{"type":"struct","fields":[]}',
        SOURCE_KEY: f"{source.dbName}.{source.tableName}",
    }
    if (source.parameters or {}).get("comment"):
        params["comment"] = source.parameters["comment"]
    sd = StorageDescriptor(
        cols=[FieldSchema("col", "array<string>", "from deserializer")],
        location=location,
        inputFormat="org.apache.hadoop.mapred.SequenceFileInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(
            serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
            parameters={"path": location, "serialization.format": "1"},
        ),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return Table(
        tableName=source.tableName,
        dbName=source.dbName,
        owner=source.owner,
        createTime=source.createTime,
        lastAccessTime=0,
        retention=0,
        sd=sd,
        partitionKeys=[],
        parameters=params,
        tableType="EXTERNAL_TABLE",
    )


def _layout(table: Table) -> FileLayout:
    """How the source table's files are read (UnsupportedSchemaError for a type Delta lacks,
    ValueError for a storage format not read yet)."""
    columns = tuple((c.name.lower(), c.type) for c in table.sd.cols or [])
    import pyarrow as pa

    schema = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    acid = None
    if is_transactional(table):
        acid = "insert_only" if is_insert_only(table) else "full"
    fmt = table_file_format(table) if acid != "full" else "orc"
    serde = table.sd.serdeInfo
    params = (serde.parameters if serde is not None else None) or {}
    delimiter = params.get("field.delim") or params.get("serialization.format") or HIVE_TEXT_DELIMITER
    if delimiter.isdigit() and len(delimiter) <= 3:
        delimiter = chr(int(delimiter))
    return FileLayout(columns, schema, fmt, delimiter, acid)


def _wanted_schema(table: Table) -> Any:
    return delta_schema(
        [(c.name, c.type, c.comment) for c in table.sd.cols or []],
        [(c.name, c.type, c.comment) for c in table.partitionKeys or []],
    )


def _values(name: str) -> tuple[str | None, ...]:
    """Partition values of a Hive partition name (``a=1/b=x``); the default partition is None."""
    from hivemesh.hive.names import unescape_path_name

    out: list[str | None] = []
    for part in name.split("/"):
        v = unescape_path_name(part.split("=", 1)[1])
        out.append(None if v == "__HIVE_DEFAULT_PARTITION__" else v)
    return tuple(out)


def _last_valid(w: ValidWriteIdList) -> int:
    """The highest write id valid in ``w`` (0 when none is)."""
    invalid = set(w.open_write_ids) | set(w.aborted_write_ids)
    last = w.high_watermark
    while last > 0 and last in invalid:
        last -= 1
    return last


@dataclass
class _Write:
    """An ACID write seen in the source's events: table ``db.name`` got write id ``write_id``."""

    db: str
    table: str
    write_id: int


class DeltaPolicyRunner(PolicyLoop):
    """Runs ``policy`` (``format: delta``) of ``config`` with its state in ``store``: the executor
    of :class:`~hivemesh.replication.policy.PolicyLoop` for a Delta target (see the module
    docstring). Same constructor and interface as PolicyRunner. Raises ReplicationError naming the
    peer when a metastore cannot be reached."""

    logger = log

    def _setup(self) -> None:
        """Delta's storage options, the dirty tables and the source's txns as followed."""
        self.storage_options = delta_storage_options(self.target_zone)
        self.threads = self.config.replication.copy_threads
        self._dirty: dict[tuple[str, str], set[str] | None] = {}
        # the source's txns as of the last event applied (saved with each checkpoint):
        self._txn_hwm: int | None = None  # the highest source txn id opened
        self._open: set[int] = set()  # source txns open
        self._writes: dict[int, list[_Write]] = {}  # open source txn -> its write ids in scope
        self._refused: set[tuple[str, str]] = set()
        self.last_syncs: list[ReplicaSync] = []

    # ------------------------------------------------------------------ replicas
    def _options(self, location: str) -> dict[str, str] | None:
        """delta-rs storage options for a target location (the zone's S3 ones for S3)."""
        return self.storage_options if _delta_uri(location).startswith("s3://") else None

    def replica(self, table: Table) -> DeltaReplica:
        """The Delta replica of source ``table`` (at its relocated location). Raises LocationRefused when
        that location would be in the source zone, ReplicationError when the table has no location,
        OSError/ValueError when its file system cannot be opened."""
        # the rule of hivemesh.replication.paths: never into the source zone (LocationRefused)
        location = self.paths.relocate_checked(table.sd.location, f"table {table.dbName}.{table.tableName}")
        if not location:
            raise ReplicationError(f"{table.dbName}.{table.tableName} has no location")
        fs, root = self.target_storage.resolve(location)
        rc = self.config.replication
        return DeltaReplica(
            _delta_uri(location), fs, root, self._options(location), threads=self.threads,
            spec=self.target_storage.spec(location)[0],
            spark_threshold_bytes=rc.spark_copy_threshold_mb * 1024 * 1024, spark_master=rc.spark_master,
        )  # fmt: skip

    def _register(self, table: Table) -> None:
        """Create (or update) the target metastore's entry of ``table``'s replica, and its
        database when missing."""
        location = self.relocate(table.sd.location)
        assert location is not None
        try:
            self.target_calls.get_database(table.dbName)
        except NoSuchObjectException:
            database = self.source_calls.get_database(table.dbName)
            self.paths.check_database(database)  # its managedLocationUri too: never the source's
            self.replayer.put_database(database)
        entry = replica_table(table, location)
        try:
            self.target_calls.create_table(entry)
        except AlreadyExistsException:
            existing = self.target_calls.get_table(table.dbName, table.tableName)
            if (existing.parameters or {}).get(PROVIDER) != "delta":
                raise ReplicationError(
                    f"policy {self.name}: {table.dbName}.{table.tableName} exists on the target as a "
                    "table that is not a Delta table; not replacing it"
                ) from None
            if (
                location_key(existing.sd.location or "") != location_key(location)
                or existing.parameters != entry.parameters
            ):
                entry.parameters = {**(existing.parameters or {}), **entry.parameters}
                self.target_calls.alter_table(table.dbName, table.tableName, entry)

    def _snapshot(
        self, table: Table, write_id: int | None = None, txn: int | None = None
    ) -> tuple[ValidWriteIdList, ValidTxnList]:
        """The write-id snapshot of an ACID ``table``: the source's current one, or the one a
        reader had right after txn ``txn`` committed (its write id ``write_id``)."""
        full = f"{table.dbName}.{table.tableName}"
        vtl = self.source.valid_txn_list()
        if txn is not None and self._txn_hwm is not None:
            # as of the COMMIT_TXN event: txns opened by then, those not ended by then still open
            hwm = max(self._txn_hwm, txn)
            open_then = sorted(t for t in self._open if t != txn and t <= hwm)
            aborted = tuple(t for t in vtl.aborted_txns if t <= hwm and t not in self._open)
            vtl = ValidTxnList(hwm, min(open_then) if open_then else LONG_MAX, tuple(open_then), aborted)
        # A replay after a crash between a batch's Delta commits and its checkpoint follows the
        # txns from the saved state, which may be past this commit: the snapshot is then a later
        # one, tagged with its own high watermark (Delta's txn version skips what is in already).
        return self.source.valid_write_ids([full], vtl)[full], vtl

    def _partition_sources(
        self,
        table: Table,
        layout: FileLayout,
        names: set[str] | None,
        snapshot: tuple[ValidWriteIdList, ValidTxnList] | None,
    ) -> tuple[list[PartitionSource], bool]:
        """The partitions to sync (all when ``names`` is None, then ``complete``)."""

        def units(location: str | None) -> list[Any]:
            """The files under ``location`` to copy (plain files, or the snapshot's ACID files)."""
            if not location:
                return []
            fs, root = self.source_storage.resolve(location)
            if layout.acid is None:
                return plain_units(location, fs, root)
            assert snapshot is not None
            return acid_units(location, list_location(root, fs), snapshot[0], snapshot[1], layout, fs)

        if not table.partitionKeys:
            return [PartitionSource((), units(table.sd.location))], True
        db, name = table.dbName, table.tableName
        if names is None:
            all_names = list(self.source_calls.get_partition_names(db, name, -1) or [])
            out = []
            for i in range(0, len(all_names), PAGE):
                for p in self.source_calls.get_partitions_by_names(db, name, all_names[i : i + PAGE]) or []:
                    out.append(
                        PartitionSource(
                            tuple(None if v == "__HIVE_DEFAULT_PARTITION__" else v for v in p.values),
                            units(p.sd.location),
                        )
                    )
            return out, True
        out = []
        for pname in sorted(names):
            try:
                p = self.source_calls.get_partition_by_name(db, name, pname)
                out.append(
                    PartitionSource(
                        tuple(None if v == "__HIVE_DEFAULT_PARTITION__" else v for v in p.values),
                        units(p.sd.location),
                    )
                )
            except NoSuchObjectException:
                out.append(PartitionSource(_values(pname), None))
        return out, False

    def sync_table(
        self,
        db: str,
        name: str,
        partitions: set[str] | None = ALL,
        *,
        write_id: int | None = None,
        txn: int | None = None,
        event_id: int | None = None,
    ) -> ReplicaSync | None:
        """Make the replica of ``db.name`` equal to the source table (only ``partitions`` when
        given; an ACID table at ``write_id``, committed by source txn ``txn``, else at the
        current snapshot). Creates and registers the replica when missing. None when the source
        table is gone, a view, or refused (a type Delta lacks, an unsupported format: logged). Raises
        LocationRefused as :meth:`replica`, the metastores' exceptions (MetaException, transport errors),
        OSError and ``pyarrow.ArrowInvalid`` reading the source's files, and delta-rs's ``DeltaError``
        committing."""
        try:
            table = self.source_calls.get_table(db, name)
        except NoSuchObjectException:
            return None
        if is_view(table):
            return None
        try:
            layout = _layout(table)
            wanted = _wanted_schema(table)
        except (UnsupportedSchemaError, ValueError) as e:
            if (db, name) not in self._refused:
                self._refused.add((db, name))
                log.error("policy %s: %s.%s is not replicated as Delta: %s", self.name, db, name, e)
            return None
        replica = self.replica(table)
        part_cols = [c.name.lower() for c in table.partitionKeys or []]
        if not replica.exists():
            replica.create(wanted, part_cols, name, (table.parameters or {}).get("comment"))
            partitions = ALL
        import pyarrow as pa

        from hivemesh.replication.delta.schema import plan_schema_change

        current = replica.table()  # one load of the replica's log for the two reads below
        change = plan_schema_change(pa.schema(current.schema().to_arrow()), wanted, part_cols)
        if change.rewrite:
            log.warning("policy %s: %s.%s: %s; the Delta replica is written again with the new schema",
                        self.name, db, name, change.reason)  # fmt: skip
            partitions = ALL
        snapshot = None
        app_version = event_id
        meta = {"hivemesh.source": f"{db}.{name}", "hivemesh.policy": self.name}
        if event_id is not None:
            meta["hivemesh.eventId"] = str(event_id)
        # Delta's txn action of the replica records the source event each commit came from
        # (monotonic, unlike write ids, which txns may commit out of order)
        app_id = f"hivemesh:{self.name}:{db}.{name}"
        if event_id is not None:
            done: int | None = current.transaction_version(app_id)
            if done is not None and event_id <= done:  # committed before a restart
                return None
        if layout.acid is not None:
            snapshot = self._snapshot(table, write_id, txn)
            committed = _last_valid(snapshot[0]) if write_id is None else write_id
            meta["hivemesh.writeId"] = str(committed)
            meta["hivemesh.validWriteIds"] = snapshot[0].to_string()
        sources, complete = self._partition_sources(table, layout, partitions, snapshot)
        result = replica.sync(
            wanted, part_cols, layout, sources, self.source_storage.spec, complete=complete,
            metadata=meta, app_id=app_id, app_version=app_version,
        )  # fmt: skip
        self._register(table)
        self.last_syncs.append(result)
        if self.metrics is not None and result.added:
            self.metrics.files_copied.labels(self.name).inc(result.added)
            self.metrics.bytes_copied.labels(self.name).inc(result.bytes_written)
        if result.version is not None:
            log.info("policy %s: %s.%s -> Delta version %d (+%d -%d files, %d rows)%s", self.name, db, name,
                     result.version, result.added, result.removed, result.rows_written,
                     f", write id {meta['hivemesh.writeId']}" if layout.acid else "")  # fmt: skip
        return result

    def drop_replica(self, db: str, name: str, source: Table | None) -> None:
        """Unregister the replica of ``db.name`` and delete its files when the source table owned
        its data (``source``: the dropped table, when known). A replica already unregistered is not an
        error; raises MetaException / NoSuchObjectException from ``drop_table``, transport errors, and
        OSError deleting the files."""
        try:
            entry = self.target_calls.get_table(db, name)
        except NoSuchObjectException:
            return
        if (entry.parameters or {}).get(PROVIDER) != "delta":
            return
        self.target_calls.drop_table(db, name, False)
        if source is None or owns_data(source):
            fs, root = self.target_storage.resolve(entry.sd.location)
            DeltaReplica(_delta_uri(entry.sd.location), fs, root, self._options(entry.sd.location)).delete()
        log.info("policy %s: dropped the Delta replica of %s.%s", self.name, db, name)

    # ------------------------------------------------------------------ verify
    def source_rows(self, table: Table) -> Any:
        """The source table's rows now (ACID: at the current snapshot), partition values as
        columns, in the replica's schema. Raises UnsupportedSchemaError / ValueError for a table Delta
        cannot hold, the source's exceptions (NoSuchObjectException, MetaException, transport errors), and
        OSError / ``pyarrow.ArrowInvalid`` reading its files."""
        import pyarrow as pa

        from hivemesh.replication.delta.files import read_unit

        layout = _layout(table)
        wanted = _wanted_schema(table)
        snapshot = self._snapshot(table) if layout.acid is not None else None
        sources, _ = self._partition_sources(table, layout, None, snapshot)
        parts = []
        part_fields = [f for f in wanted if f.name in {c.name.lower() for c in table.partitionKeys or []}]
        for src in sources:
            for unit in src.units or []:
                fs, root = self.source_storage.resolve(unit.location)
                rows = read_unit(unit, layout, fs, root)
                for f, v in zip(part_fields, src.values, strict=True):
                    col = (
                        pa.array([v] * rows.num_rows).cast(f.type)
                        if v is not None
                        else pa.nulls(rows.num_rows, f.type)
                    )
                    rows = rows.append_column(pa.field(f.name, f.type), col)
                parts.append(rows)
        plain = pa.schema([pa.field(f.name, f.type) for f in wanted])
        return pa.concat_tables([t.cast(plain) for t in parts]) if parts else plain.empty_table()

    def compare(self, check_data: bool = True) -> list[Any]:
        """Differences of every replica from its source table (registration, a location outside
        the source zone, schema, partitions, and with ``check_data`` the rows by checksum) as
        :class:`~hivemesh.replication.verify.Difference`. Raises the metastores' exceptions (transport
        errors; NoSuchObjectException for a source table dropped meanwhile) and, with ``check_data``, what
        reading the source's files and the replicas raises (OSError, ``pyarrow.ArrowInvalid``,
        ``DeltaError``)."""
        from hivemesh.replication.delta.schema import field_signatures
        from hivemesh.replication.delta.verify import read_delta, rows_digest
        from hivemesh.replication.verify import Difference

        diffs: list[Difference] = []
        for db in [d for d in self.source_calls.get_all_databases() if self.scope.database(d)]:
            for name in [t for t in self.source_calls.get_all_tables(db) if self.scope.table(db, t)]:
                table = self.source_calls.get_table(db, name)
                full = f"{db}.{name}"
                if is_view(table):
                    continue
                try:
                    wanted = _wanted_schema(table)
                except (UnsupportedSchemaError, ValueError) as e:
                    diffs.append(Difference("missing", "table", full, f"not replicable as Delta: {e}"))
                    continue
                try:
                    entry = self.target_calls.get_table(db, name)
                except NoSuchObjectException:
                    diffs.append(Difference("missing", "table", full, "no Delta replica registered"))
                    continue
                if (entry.parameters or {}).get(PROVIDER) != "delta":
                    diffs.append(
                        Difference("different", "table", full, "the target table is not a Delta table")
                    )
                    continue
                why = self.paths.refusal(f"table {full}", table.sd.location, entry.sd and entry.sd.location)
                if why is not None:  # registered at the source's files (by hand, or an older replicator)
                    diffs.append(
                        Difference("different", "table", full, f"location in the source zone: {why}")
                    )
                    continue
                try:
                    replica = self.replica(table)
                except LocationRefused as e:
                    diffs.append(Difference("different", "table", full, f"location: {e}"))
                    continue
                if not replica.exists():
                    diffs.append(Difference("missing", "table", full, f"no Delta table at {replica.uri}"))
                    continue
                parts = {c.name.lower() for c in table.partitionKeys or []}
                got_fields, want_fields = field_signatures(replica.schema()), field_signatures(wanted)
                # data columns in order; partition columns wherever Delta put them
                got = [g[:2] for g in got_fields if g[0] not in parts] + sorted(
                    g[:2] for g in got_fields if g[0] in parts
                )
                want = [w[:2] for w in want_fields if w[0] not in parts] + sorted(
                    w[:2] for w in want_fields if w[0] in parts
                )
                if got != want:
                    diffs.append(
                        Difference(
                            "different",
                            "table",
                            full,
                            f"schema {want} != {got}",
                        )
                    )
                    continue
                if not check_data:
                    continue
                src = self.source_rows(table)
                dst = read_delta(
                    replica.uri,
                    storage_options=replica.storage_options,
                    filesystem=replica.fs,
                    root=replica.root,
                )
                dst = dst.select(src.column_names)
                a, b = rows_digest(src), rows_digest(dst)
                if a != b:
                    diffs.append(
                        Difference(
                            "different",
                            "file",
                            full,
                            f"rows {a[0]} (checksum {a[1][:12]}) != {b[0]} (checksum {b[1][:12]})",
                        )
                    )
                part_cols = [c.name.lower() for c in table.partitionKeys or []]
                if part_cols:
                    sp = {tuple(r.values()) for r in src.select(part_cols).to_pylist()}
                    dp = {tuple(r.values()) for r in dst.select(part_cols).to_pylist()}
                    for v in sorted(sp - dp, key=str):
                        diffs.append(
                            Difference("missing", "partition", f"{full}/{v}", "no rows in the replica")
                        )
                    for v in sorted(dp - sp, key=str):
                        diffs.append(
                            Difference("extra", "partition", f"{full}/{v}", "rows only in the replica")
                        )
        return diffs

    # ------------------------------------------------------------------ bootstrap
    def bootstrap(self, prune: bool = False) -> SyncResult:
        """Sync every table in scope as the source has it now; ``prune``: drop replicas (and empty
        databases) the source no longer has, when ``propagate_drops``. Raises as :meth:`sync_table` and
        :meth:`drop_replica`."""
        out = SyncResult()
        dbs = [d for d in self.source_calls.get_all_databases() if self.scope.database(d)]
        task = (
            self.progress.add_task(f"{self.name}: Delta bootstrap", total=len(dbs)) if self.progress else None
        )
        for db in dbs:
            tables = [t for t in self.source_calls.get_all_tables(db) if self.scope.table(db, t)]
            for t in tables:
                res = self.sync_table(db, t)
                if res is not None:
                    out.copied += res.added
                    out.bytes_copied += res.bytes_written
            if prune and self.policy.propagate_drops:
                try:
                    present = self.target_calls.get_all_tables(db)
                except NoSuchObjectException:
                    present = []
                for t in present:
                    if t not in tables and self.scope.table(db, t):
                        self.drop_replica(db, t, None)
            if task is not None:
                self.progress.advance(task)
        return out

    # ------------------------------------------------------------------ events
    def _mark(self, db: str, table: str, partitions: list[str] | None) -> None:
        key = (db.lower(), table.lower())
        if partitions is None:
            self._dirty[key] = ALL
        elif key not in self._dirty:
            self._dirty[key] = set(partitions)
        elif self._dirty[key] is not None:
            self._dirty[key].update(partitions)  # type: ignore[union-attr]

    def _flush(self, only: tuple[str, str] | None = None, event_id: int | None = None) -> None:
        """Sync the dirty tables (or only ``only``)."""
        keys = [only] if only is not None else list(self._dirty)
        for key in keys:
            if key not in self._dirty:
                continue
            parts = self._dirty.pop(key)
            self.sync_table(key[0], key[1], parts, event_id=event_id)

    def _part_names(self, table: Table, partitions: list[Any]) -> list[str]:
        from hivemesh.hive.names import make_part_name

        keys = [c.name for c in table.partitionKeys or []]
        return [make_part_name(keys, list(p.values if hasattr(p, "values") else p)) for p in partitions]

    def put_partitions(self, action: PutPartitions, out: StepResult) -> None:
        """Mark the partitions a run of ALTER_PARTITION events of one table altered dirty (synced
        at the end of the batch); counts the events applied. Raises as :meth:`apply`."""
        self._mark(
            action.table.dbName, action.table.tableName, self._part_names(action.table, list(action.images))
        )
        out.applied += len(action.messages)

    def apply(self, event: NotificationEvent, out: StepResult, msg: ev.Message | None = None) -> bool:
        """Apply one source event a plan says to apply (see the module docstring; ``msg``: it
        decoded); True when it changed what the replicas will hold. Raises as :meth:`sync_table` for
        the tables it syncs, and the source's exceptions reading the committed txn's writes."""
        if msg is None:
            msg = ev.parse_event(event)
        if isinstance(msg, (ev.OpenTxn, ev.AllocWriteId, ev.AbortTxn)):
            self._track_txn(msg)
            return False
        if isinstance(msg, ev.CommitTxn):
            writes = self._track_txn(msg)
            if not writes and not msg.writes and not any(self.scope.database(d) for d in msg.databases):
                return False
            reported = committed_writes(self.source_calls, msg)
            if not writes:  # allocated before what this policy saw: the source lists them
                writes = [
                    _Write(w.database.lower(), w.table.lower(), w.writeId)
                    for w in reported
                    if w.database and w.table and self.scope.table(w.database.lower(), w.table.lower())
                ]
            return self._commit(msg, event, writes, reported)
        db, table = event_object(msg)
        assert db is not None and table is not None  # the plan skips events of no table
        if isinstance(msg, ev.AlterTable):
            return self._alter_table(msg, event)
        if isinstance(msg, ev.CreateTable):
            if not is_view(msg.table):
                self._mark(db, table, ALL)
        elif isinstance(msg, ev.DropTable):
            self._dirty.pop((db, table), None)
            if self.policy.propagate_drops:
                self.drop_replica(msg.table.dbName, msg.table.tableName, msg.table)
        elif isinstance(msg, ev.AddPartition):
            if not is_transactional(msg.table):
                self._mark(db, table, self._part_names(msg.table, msg.partitions))
        elif isinstance(msg, ev.AlterPartition):
            self._mark(db, table, sorted(set(self._part_names(msg.table, [msg.before, msg.after]))))
        elif isinstance(msg, ev.DropPartition):
            if self.policy.propagate_drops:
                self._mark(db, table, self._part_names(msg.table, msg.values))
        elif isinstance(msg, ev.Insert):
            if not is_transactional(msg.table):
                parts = self._part_names(msg.table, [msg.partition]) if msg.partition is not None else ALL
                self._mark(db, table, parts)
        else:
            return False
        return True

    def _alter_table(self, msg: ev.AlterTable, event: NotificationEvent) -> bool:
        before, after = msg.before, msg.after
        old = (before.dbName.lower(), before.tableName.lower())
        new = (after.dbName.lower(), after.tableName.lower())
        was, now = self.scope.table(*old), self.scope.table(*new)
        if not was and not now:
            return False
        if old != new:
            self._dirty.pop(old, None)
            if was and self.policy.propagate_drops:
                self.drop_replica(before.dbName, before.tableName, before)
            if now and not is_view(after):
                self._mark(*new, ALL)
            return True
        if is_view(after):
            return False
        self._mark(*new, ALL if not after.partitionKeys else set())  # type: ignore[arg-type]
        return True

    def _track_txn(self, msg: ev.Message) -> list[_Write]:
        """Follow the source's txns: OPEN_TXN, ALLOC_WRITE_ID (write ids of tables in scope),
        ABORT_TXN, COMMIT_TXN. Returns the write ids in scope of a committed txn."""
        if isinstance(msg, ev.OpenTxn):
            self._open.update(msg.txn_ids)
            self._txn_hwm = max([self._txn_hwm or 0, *msg.txn_ids])
        elif isinstance(msg, ev.AllocWriteId):
            db, name = (msg.write_db or "").lower(), (msg.write_table or "").lower()
            if db and name and self.scope.table(db, name):
                for pair in msg.txn_to_write_ids:
                    if all((w.db, w.table) != (db, name) for w in self._writes.get(pair.txnId, [])):
                        self._writes.setdefault(pair.txnId, []).append(_Write(db, name, pair.writeId))
        elif isinstance(msg, ev.AbortTxn):
            self._open.discard(msg.txn_id)
            self._writes.pop(msg.txn_id, None)
        elif isinstance(msg, ev.CommitTxn):
            self._open.discard(msg.txn_id)
            return [w for w in self._writes.pop(msg.txn_id, []) if self.scope.table(w.db, w.table)]
        return []

    def _commit(
        self,
        msg: ev.CommitTxn,
        event: NotificationEvent,
        writes: list[_Write],
        reported: list[WriteEventInfo],
    ) -> bool:
        """Sync the tables a committed txn wrote (``writes``): the partitions its ``reported``
        writes name (get_all_write_event_info), or every partition when it reported none."""
        if not writes:
            return False
        for w in writes:
            parts = {
                p
                for p in (
                    x.partition
                    for x in reported
                    if (x.database or "").lower() == w.db and (x.table or "").lower() == w.table
                )
                if p
            }
            self._flush((w.db, w.table))
            self.sync_table(
                w.db, w.table, parts or ALL, write_id=w.write_id, txn=msg.txn_id, event_id=event.eventId
            )
        return True

    # ------------------------------------------------------------------ rules
    def _rule_changes(self, state: PolicyState) -> None:
        """When the policy's rules changed since they were recorded, sync every table now in
        scope (new ones get their replicas; the others compare equal and commit nothing).
        Replicas of tables no longer in scope are left as they are."""
        old = state.rules
        if old is not None and old != self._rules():
            log.info("policy %s: its rules changed; syncing the tables now in scope", self.name)
            self.bootstrap(prune=False)
        if old != self._rules():
            self.store.update(self.name, rules=self._rules())

    # ------------------------------------------------------------------ source txns
    def _before_batch(self, checkpoint: int, out: StepResult) -> None:
        self._load_source_txns()

    def _load_source_txns(self) -> None:
        hwm, open_txns, writes = self.store.source_txns(self.name)
        self._txn_hwm, self._open = hwm, open_txns
        self._writes = {t: [_Write(d, n, w) for d, n, w in ws] for t, ws in writes.items()}

    def _save_source_txns(self, checkpoint: tuple[int, int | None, int] | None = None) -> None:
        """Store the source's txns as followed so far (with ``checkpoint``: in one transaction)."""
        writes = {
            t: [(w.db, w.table, w.write_id) for w in ws] for t, ws in self._writes.items() if t in self._open
        }
        self.store.save_source_txns(self.name, self._txn_hwm, self._open, writes, checkpoint)

    def _init_source_txns(self, start: int) -> None:
        """The source's txns as of event ``start`` (a bootstrap's): txns opened and write ids
        allocated in the :data:`LOOKBACK_EVENTS` events up to it and not ended there, plus the
        txns open now; the highest txn id opened, from the source now. Saved at once."""
        self._open, self._writes = set(), {}
        after = max(0, start - LOOKBACK_EVENTS)
        while after < start:
            events = [e for e in self.read_events(after, 5000) if e.eventId <= start]
            if not events:
                break
            for e in events:
                if e.eventType in TXN_EVENTS:
                    self._track_txn(ev.parse_event(e))
            after = events[-1].eventId
        vtl = self.source.valid_txn_list()
        self._open |= set(vtl.open_txns)
        self._txn_hwm = max(vtl.high_watermark, self._txn_hwm or 0)
        self._save_source_txns()

    # ------------------------------------------------------------------ steps
    def _read_batch(self, checkpoint: int) -> tuple[list[NotificationEvent], str | None]:
        events = self.read_events(checkpoint, self.config.replication.batch_events)
        if events and events[0].eventId > checkpoint + 1:
            return [], f"the source's notification log was purged past the checkpoint {checkpoint}"
        return events, None

    def _full_sync(self, start: int, prune: bool) -> SyncResult:
        """The source's txns as of event ``start``, then every table synced."""
        self._init_source_txns(start)
        return self.bootstrap(prune=prune)

    def _store_checkpoint(self, out: StepResult, event_time: int | None) -> None:
        """The dirty tables synced, then the checkpoint stored with the source's txns."""
        self._flush(event_id=out.last_event_id)
        if out.last_event_id is not None:
            self._save_source_txns((out.last_event_id, event_time, out.applied))
