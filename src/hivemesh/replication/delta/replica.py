"""One Delta Lake replica of one Hive table: created, evolved and synced through delta-rs.

:meth:`DeltaReplica.sync` makes the replica's rows for some partitions (or all) equal to the
source's: it lists the source files as units (:mod:`hivemesh.replication.delta.files`), writes a
Parquet file for each unit the replica lacks, and commits the adds and the removes of the units
the source no longer has in **one** Delta commit (delta-rs's commit protocol: the commit is the
atomic put of the next ``_delta_log`` entry). The commit carries ``commitInfo`` entries
``hivemesh.source`` (``db.table``), ``hivemesh.eventId`` and, for ACID tables,
``hivemesh.writeId``, plus a Delta ``txn`` action (``appId`` ``hivemesh:<policy>:<db.table>``,
``version`` = the source write id for ACID tables, else the event id), so ``DESCRIBE HISTORY``
says which Hive snapshot each Delta version is and a restart never commits one twice.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from hivemesh.replication.data import FsSpec, open_fs, spark_context
from hivemesh.replication.delta.files import FileLayout, Unit, WrittenFile, read_unit, unit_key_of, write_unit
from hivemesh.replication.delta.schema import SchemaChange, plan_schema_change
from hivemesh.replication.delta.spark_ddl import run_statements

__all__ = ["DeltaReplica", "PartitionSource", "ReplicaSync", "partition_directory"]

log = logging.getLogger("hivemesh.replication.delta")

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
COLUMN_MAPPING = "delta.columnMapping.mode"
ENABLE_COLUMN_MAPPING = (
    "ALTER TABLE {table} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
    "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
)
_PHYSICAL = b"delta.columnMapping.physicalName"
_FIELD_ID = b"delta.columnMapping.id"


def physical_names(schema: pa.Schema) -> dict[str, str]:
    """``{logical name: physical name}`` of a column-mapped replica's top-level columns (empty
    without column mapping)."""
    out = {}
    for f in schema:
        meta = f.metadata or {}
        if _PHYSICAL in meta:
            out[f.name] = meta[_PHYSICAL].decode()
    return out


def to_physical(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (logical column names) as a column-mapped replica's data files hold them: columns
    named by their physical names, with their Parquet field ids (nested fields keep their
    names: Delta maps nested fields of files written this way by name). Raises KeyError for a column of
    ``rows`` that ``schema`` lacks."""
    fields = []
    by_name = {f.name: f for f in schema}
    for name in rows.column_names:
        f = by_name[name]
        meta = f.metadata or {}
        field_meta = {b"PARQUET:field_id": meta[_FIELD_ID]} if _FIELD_ID in meta else None
        fields.append(
            pa.field(meta.get(_PHYSICAL, name.encode()).decode(), rows[name].type, metadata=field_meta)
        )
    return pa.Table.from_arrays(rows.columns, schema=pa.schema(fields))


_SAFE_DIR = re.compile(r"^[A-Za-z0-9_.=:-]+$")


def partition_directory(keys: Sequence[str], values: Sequence[str | None]) -> str:
    """The replica directory of a partition: ``k1=v1/k2=v2`` when every value is plain
    (letters, digits, ``_.:-``), else ``k1=v1/_hm_<hash>`` so that no value needs escaping in
    the Delta log's file URIs (readers take partition values from the log, not the path). Raises ValueError
    when ``keys`` and ``values`` differ in length."""
    import hashlib

    parts = []
    for k, v in zip(keys, values, strict=True):
        part = f"{k}={HIVE_DEFAULT_PARTITION if v is None else v}"
        if not _SAFE_DIR.match(part):
            rest = "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))
            parts.append("_hm_" + hashlib.sha1(rest.encode()).hexdigest()[:12])
            break
        parts.append(part)
    return "/".join(parts)


ConvertTask = tuple[Any, str, Unit, FileLayout, Any, str, str, "pa.Schema | None"]
"""One unit to convert: ``(source FsSpec, source location path, unit, layout, replica FsSpec,
replica root, directory under it, replica schema when column-mapped else None)``."""


def convert_unit(task: ConvertTask) -> WrittenFile | None:
    """Read one unit and write its Parquet file into the replica (module-level: Spark executors
    run it too). None when the unit has no rows. Raises what
    :func:`~hivemesh.replication.delta.files.read_unit` and
    :func:`~hivemesh.replication.delta.files.write_unit` raise (OSError, ValueError /
    ``pyarrow.ArrowInvalid``)."""
    src_spec, src_root, unit, layout, dst_spec, dst_root, directory, schema = task
    rows = read_unit(unit, layout, open_fs(src_spec), src_root)
    if schema is not None:
        rows = to_physical(rows, schema)
    return write_unit(rows, open_fs(dst_spec), dst_root, directory, unit.key)


@dataclass
class PartitionSource:
    """What a sync reads for one partition (or the whole unpartitioned table): its partition
    ``values`` (None for a NULL partition value; empty for an unpartitioned table) and its
    ``units``; ``units`` None means the partition is gone at the source (its replica files are
    removed)."""

    values: tuple[str | None, ...]
    units: list[Unit] | None


@dataclass
class ReplicaSync:
    """What one sync did: Delta ``version`` committed (None: nothing to commit), files
    ``added``/``removed``/``kept``, ``rows_written``, ``bytes_written``, and ``rewritten``
    (the schema change needed every file written again, with ``reason``)."""

    version: int | None = None
    added: int = 0
    removed: int = 0
    kept: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    rewritten: bool = False
    reason: str = ""
    schema_change: SchemaChange = field(default_factory=SchemaChange)


class DeltaReplica:
    """The Delta table at ``uri`` (``storage_options``: delta-rs's object-store options), whose
    files are written through ``fs`` at ``root`` (the same place as a pyarrow path; ``spec``: how
    a Spark executor opens ``fs``). Syncs converting at least ``spark_threshold_bytes`` of source
    files (None: never) run the conversions as a Spark job (``spark_master``); the commit stays
    here. ``spark_conf``: settings of the Spark process that runs schema changes."""

    def __init__(
        self,
        uri: str,
        fs: pafs.FileSystem,
        root: str,
        storage_options: dict[str, str] | None = None,
        threads: int = 4,
        spark_conf: dict[str, str] | None = None,
        spec: FsSpec | None = None,
        spark_threshold_bytes: int | None = None,
        spark_master: str | None = None,
    ):
        self.uri = uri
        self.spark_conf = spark_conf or {}
        self.spec = spec
        self.spark_threshold_bytes = spark_threshold_bytes
        self.spark_master = spark_master
        self.fs = fs
        self.root = root.rstrip("/")
        self.storage_options = storage_options or None
        self.threads = max(1, threads)

    # ------------------------------------------------------------------ table
    def exists(self) -> bool:
        """True when a Delta table is at the location. Raises OSError (or
        ``deltalake.exceptions.DeltaError``) when the storage cannot be reached."""
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(self.uri, storage_options=self.storage_options))

    def table(self) -> Any:
        """The current ``deltalake.DeltaTable``. Raises ``deltalake.exceptions.TableNotFoundError`` when no
        Delta table is there, another ``DeltaError`` or OSError when the log cannot be read."""
        from deltalake import DeltaTable

        return DeltaTable(self.uri, storage_options=self.storage_options)

    def create(
        self, schema: pa.Schema, partition_by: Sequence[str], name: str, description: str | None
    ) -> None:
        """Create the empty table (version 0) with ``schema``; nothing when one exists. Raises
        ``deltalake.exceptions.DeltaError`` (or OSError) when delta-rs cannot write the log."""
        from deltalake import DeltaTable

        DeltaTable.create(
            self.uri,
            schema,
            mode="ignore",
            partition_by=list(partition_by) or None,
            name=name,
            description=description,
            storage_options=self.storage_options,
        )

    def schema(self) -> pa.Schema:
        """The replica's current schema (Arrow). Raises as :meth:`table`."""
        return pa.schema(self.table().schema().to_arrow())

    def partition_columns(self) -> list[str]:
        """The replica's partition columns. Raises as :meth:`table`."""
        return list(self.table().metadata().partition_columns)

    def applied_version(self, app_id: str) -> int | None:
        """The last ``txn`` version Delta recorded for ``app_id`` (None: never). Raises as :meth:`table`."""
        version: int | None = self.table().transaction_version(app_id)
        return version

    def delete(self) -> None:
        """Delete the replica's directory (log and data). A missing directory is not an error; raises
        OSError for other storage errors."""
        try:
            self.fs.delete_dir(self.root)
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ files
    def files(
        self, partition_by: Sequence[str], physical: dict[str, str] | None = None, *, table: Any = None
    ) -> dict[tuple[str | None, ...], dict[str, tuple[str, int]]]:
        """The replica's live files by partition values then unit key: ``{values: {key: (path,
        size)}}``; a file hivemesh did not write gets the key ``?<path>`` (removed by a sync).
        ``physical``: :func:`physical_names` of a column-mapped replica. ``table``: a
        ``DeltaTable`` of the replica already loaded (None: the current one). Raises as :meth:`table`."""
        if table is None:
            table = self.table()
        actions = pa.table(table.get_add_actions(flatten=True))
        out: dict[tuple[str | None, ...], dict[str, tuple[str, int]]] = {}
        if not actions.num_rows:
            return out
        paths = actions["path"].to_pylist()
        sizes = actions["size_bytes"].to_pylist()
        physical = physical or {}
        names = set(actions.column_names)

        def column(k: str) -> str:
            """The Delta log column of partition value ``k`` (logical name, else physical)."""
            logical = f"partition.{k}"
            return logical if logical in names else f"partition.{physical.get(k, k)}"

        parts = [actions[column(k)].cast(pa.string()).to_pylist() for k in partition_by]
        for i, path in enumerate(paths):
            values = tuple(p[i] for p in parts)
            key = unit_key_of(path) or f"?{path}"
            out.setdefault(values, {})[key] = (path, sizes[i])
        return out

    # ------------------------------------------------------------------ sync
    def sync(
        self,
        wanted: pa.Schema,
        partition_by: Sequence[str],
        layout: FileLayout,
        sources: Iterable[PartitionSource],
        resolve: Callable[[str], tuple[FsSpec, str]],
        *,
        complete: bool = False,
        metadata: dict[str, str] | None = None,
        app_id: str | None = None,
        app_version: int | None = None,
    ) -> ReplicaSync:
        """Make the replica's rows of the partitions in ``sources`` equal to the source's, with
        ``wanted`` as its schema, in one Delta commit (see the module docstring).

        ``complete``: ``sources`` lists every partition the source has, so replica partitions
        not in it are removed. ``resolve``: a source location -> ``(FsSpec, path)``.
        ``metadata``: extra ``commitInfo`` entries. ``app_id``/``app_version``: the Delta
        ``txn`` recorded with the commit; a version not above the recorded one commits nothing
        (the change is already in the replica). Raises what reading the source or delta-rs
        raises; the replica is then unchanged."""
        from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

        out = ReplicaSync()
        # One load of the log for what the sync reads before its commit (each load replays the
        # log, so it grows with the replica's versions), again only after a schema change.
        table = self.table()
        if app_id is not None and app_version is not None:
            done: int | None = table.transaction_version(app_id)
            if done is not None and app_version <= done:
                log.info(
                    "%s: version %d of %s already committed; nothing to do", self.uri, app_version, app_id
                )
                return out
        positional = layout.acid == "full" or layout.file_format != "parquet"
        change = plan_schema_change(pa.schema(table.schema().to_arrow()), wanted, partition_by, positional)
        out.schema_change = change
        if change.rewrite and not complete:
            raise ValueError(
                f"{self.uri}: {change.reason}: the replica must be written again; sync every partition"
            )
        if change.rewrite:
            out.rewritten, out.reason = True, change.reason
        elif change.statements:
            self._alter(change)
            table = self.table()
        elif change.added or change.comments:
            self._evolve(change)
            table = self.table()
        schema = pa.schema(table.schema().to_arrow())
        physical = physical_names(schema)
        current = self.files(partition_by, physical, table=table)
        sources = list(sources)
        seen: set[tuple[str | None, ...]] = set()
        todo: list[tuple[Unit, dict[str, str | None], str]] = []
        removes: list[tuple[str, int, dict[str, str | None]]] = []
        for src in sources:
            seen.add(src.values)
            pv = dict(zip(partition_by, src.values, strict=True))
            have = current.get(src.values, {})
            want = {u.key: u for u in (src.units or [])}
            for key, (path, size) in have.items():
                if out.rewritten or key not in want:
                    removes.append((path, size, pv))
                else:
                    out.kept += 1
            directory = partition_directory(partition_by, src.values) if partition_by else ""
            for key, unit in want.items():
                if out.rewritten or key not in have:
                    todo.append((unit, pv, directory))
        for values, have in current.items():
            if values in seen or not (complete or out.rewritten):
                continue
            pv = dict(zip(partition_by, values, strict=True))
            removes.extend((path, size, pv) for path, size in have.values())
        if not todo and not removes and not out.rewritten:
            return out

        tasks = [
            (
                *resolve(unit.location),
                unit,
                layout,
                self.spec,
                self.root,
                directory,
                schema if physical else None,
            )
            for unit, _, directory in todo
        ]
        written_files = self._convert(tasks, sum(unit.size for unit, _, _ in todo))
        actions: list[Any] = []
        for written, (_, pv, _) in zip(written_files, todo, strict=True):
            if written is None:
                continue
            pv = {physical.get(k, k): v for k, v in pv.items()}
            actions.append(AddAction(written.path, written.size, pv, written.mtime_ms, True, written.stats))
            out.added += 1
            out.rows_written += written.rows
            out.bytes_written += written.size
        now = int(time.time() * 1000)
        if not out.rewritten:
            for path, size, pv in removes:
                pv = {physical.get(k, k): v for k, v in pv.items()}
                actions.append(RemoveAction(path, True, now, size, pv))
        out.removed = len(removes)
        if not actions and not out.rewritten:
            return out
        props = CommitProperties(
            custom_metadata=dict(metadata or {}),
            app_transactions=[Transaction(app_id, app_version)]
            if app_id and app_version is not None
            else None,
        )
        if out.rewritten and physical:
            wanted = self._annotate(wanted, schema)
        self.table().create_write_transaction(
            actions,
            "overwrite" if out.rewritten else "append",
            wanted if out.rewritten else schema,
            partition_by=list(partition_by) or None,
            commit_properties=props,
        )
        out.version = self.table().version()
        return out

    def _convert(self, tasks: list[ConvertTask], source_bytes: int) -> list[WrittenFile | None]:
        """Run :func:`convert_unit` over ``tasks``: on this machine's threads, or as a Spark job
        when ``source_bytes`` reaches the threshold."""
        if self.spec is None:
            raise ValueError(f"{self.uri}: no file system spec to write the replica's files with")
        if self.spark_threshold_bytes is not None and source_bytes >= self.spark_threshold_bytes and tasks:
            sc = spark_context(self.spark_master, "hivemesh-delta-convert")
            slices = max(1, min(len(tasks), sc.defaultParallelism * 4))
            log.info("%s: converting %d files (%d bytes) as a Spark job", self.uri, len(tasks), source_bytes)
            return list(sc.parallelize(tasks, slices).map(convert_unit).collect())
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="delta-convert") as pool:
            return list(pool.map(convert_unit, tasks))

    def column_mapping(self) -> bool:
        """Whether the replica uses Delta column mapping. Raises as :meth:`table`."""
        mode: str = (self.table().metadata().configuration or {}).get(COLUMN_MAPPING, "none")
        return mode != "none"

    def _annotate(self, wanted: pa.Schema, current: pa.Schema) -> Any:
        """``wanted`` as a delta-rs schema with the column-mapping annotations a column-mapped
        replica's schema needs: those of the current column of the same name, fresh ones (above
        the table's ``delta.columnMapping.maxColumnId``, raised) for new names."""
        import uuid

        from deltalake import Schema as DeltaSchema
        from deltalake.schema import Field

        by_name = {f.name: f for f in current}
        config = self.table().metadata().configuration or {}
        before = int(config.get("delta.columnMapping.maxColumnId") or 0)
        top = max([before, *(int((f.metadata or {}).get(_FIELD_ID, b"0")) for f in current)])
        fields = []
        for f in DeltaSchema.from_arrow(wanted).fields:
            meta: dict[str, Any] = dict(f.metadata or {})
            old = (by_name[f.name].metadata or {}) if f.name in by_name else {}
            if _PHYSICAL in old:
                meta["delta.columnMapping.physicalName"] = old[_PHYSICAL].decode()
                meta["delta.columnMapping.id"] = int(old[_FIELD_ID])
            else:
                top += 1
                meta["delta.columnMapping.physicalName"] = f"col-{uuid.uuid4()}"
                meta["delta.columnMapping.id"] = top
            fields.append(Field(f.name, f.type, nullable=f.nullable, metadata=meta))
        if top > before:
            self.table().alter.set_table_properties({"delta.columnMapping.maxColumnId": str(top)})
        return DeltaSchema(fields)

    def _alter(self, change: SchemaChange) -> None:
        """Run the change's ALTER TABLE statements through Delta Lake for Spark, turning column
        mapping on first when the replica has none (each statement one Delta commit)."""
        statements = list(change.statements)
        if change.column_mapping and not self.column_mapping():
            statements.insert(0, ENABLE_COLUMN_MAPPING)
        log.info("%s: schema change through Delta Lake for Spark: %s", self.uri, "; ".join(statements))
        run_statements(self.uri, statements, conf=self.spark_conf)

    def _evolve(self, change: SchemaChange) -> None:
        """Apply added columns and comment changes as Delta metadata commits."""
        from deltalake.schema import Field

        table = self.table()
        if change.added:
            table.alter.add_columns([Field.from_arrow(f) for f in change.added])
        for name, comment in change.comments.items():
            self.table().alter.set_column_metadata(name, {"comment": comment})
