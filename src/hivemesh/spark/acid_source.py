"""``spark.read.format("hiveacid")``: Hive transactional tables as a Python data source.

Usage, once registered in the session (:func:`hivemesh.spark.session.register_hiveacid`, which
:func:`hivemesh.spark.session` runs)::

    df = (spark.read.format("hiveacid")
          .option("metastore.uri", "thrift://127.0.0.1:9083")   # default: the session's
          .load("db.table"))                                     # or .option("table", "db.table")
    df.where("ds = '2024-01-01'").show()

Options: ``table`` (or the ``load`` path; an unqualified name is in ``default``: the data source
cannot see Spark's current database), ``metastore.uri`` (default: the SparkSession's
``hive.metastore.uris`` when it was registered), ``partition_filter`` (a Hive partition filter,
``ds >= "2024-01-01" and hr = 1``, sent to ``get_partitions_by_filter``: only those partitions are
listed and read), ``partition_pushdown`` (``true``: also derive a partition filter from Spark's
pushed filters; read the caveat below), ``with_row_ids`` (``true``: Hive's ROW__ID columns
``originalTransaction``, ``bucket``, ``rowId`` first; full ACID only), ``valid_txns`` +
``valid_write_ids`` (read under a snapshot the caller holds, e.g. an
:class:`~hivemesh.spark.acid.AcidSession`'s ``valid_txn_list`` and ``snapshot(t).write_ids``: then
no txn is opened and no lock taken here), ``split_bytes`` (target bytes of data files per Spark
task; default 256 MiB).

Schema: the metastore table's columns, then its partition columns (Hive types as Spark DDL,
``char``/``varchar`` as strings). This path always reads every column: the Python data source API
of PySpark 4.3 has no column pruning (Spark drops the unused columns after the scan), and files are
read with pyarrow on the executors (:func:`hivemesh.acid.arrow_reader.read_snapshot_files`), so
original (pre-ACID) files, streaming deltas and delete deltas are handled as in the Spark-free
reader. :func:`hivemesh.spark.acid.read_acid` / ``AcidSession.sql`` use Spark's vectorized ORC scan
with column pruning and prune partitions from the query (:mod:`hivemesh.spark.acid_sql`).

Partition pushdown (``partition_pushdown=true``): ``pushFilters`` receives the filters Spark can
push (a conjunction); comparisons of a partition column with a literal (``=``, ``<=>`` with a
non-null value, ``<``, ``<=``, ``>``, ``>=``, ``IN``, and ``<>`` / ``NOT IN``) on string, varchar,
integral and date partition columns become a Hive partition filter (``ds = "2024-01-01" and (hr = 1
or hr = 2)``), ANDed with ``partition_filter``. Every filter is still handed back to Spark, which
evaluates it again on the rows: the metastore's filter semantics only decide what is read. It
needs ``spark.sql.python.filterPushdown.enabled=true``, which registering sets. Caveat, why it is
off by default: PySpark 4.3 keeps the planned read (input partitions and read function) on the
data source instance of the loaded DataFrame (``PythonDataSourceV2.getOrCreateReadInfo``) and
replaces it whenever filters are pushed (``setReadInfo``); a later query over the same loaded
DataFrame with no pushable filter reuses the last planned read. With pushdown that read may be
pruned for another query's filter and the later query would miss rows. So with
``partition_pushdown`` use one ``load()`` per query; ``partition_filter`` has no such problem (it
belongs to the loaded DataFrame).

Transaction lifetime: Spark plans a Python data source in a short-lived Python worker on the
driver (``reader()``, ``pushFilters()``, ``partitions()``), then runs ``read()`` in executor
workers, and tells the source nothing when the query ends: Python data sources have no end-of-query
hook (no commit callback for batch reads, and the planning worker does not live until then). So
``partitions()`` opens a READ_ONLY txn, takes its ValidTxnList, a table-level SHARED_READ lock and
the table's ValidWriteIdList, lists the partitions and chooses every file with
:func:`hivemesh.acid.selection.select_files`, then COMMITS the txn before returning. The snapshot
(which files, which write ids and delete events count) is fixed at that moment and shipped to the
executors inside the input partitions, so a query reads one consistent snapshot; but the lock is
gone while the executors read, so a compaction whose cleaner runs between planning and reading can
remove files the snapshot chose (the read then fails with a missing file; run it again). As said
above, PySpark 4.3 reuses a loaded DataFrame's planned read for queries without pushable filters
(same snapshot) and plans again (new txn, new snapshot) for queries with some. To hold a lock for
a whole job, read inside an :class:`~hivemesh.spark.acid.AcidSession` (``acid.read(...)``), or pass
that session's snapshot with ``valid_txns`` / ``valid_write_ids``.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from hive_metastore.ttypes import TxnType
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from hivemesh.acid.arrow_reader import list_location, read_snapshot_files, table_layout
from hivemesh.acid.selection import select_files
from hivemesh.acid.tables import is_insert_only, split_name, table_locations
from hivemesh.client.metastore import MetastoreClient, lock_component
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList

log = logging.getLogger(__name__)

NAME = "hiveacid"
AGENT_INFO = "hivemesh-spark-acid-source"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
DEFAULT_SPLIT_BYTES = 256 * 1024 * 1024
_INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint"}
_STRINGS = {"string"}


# --- table metadata ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableInfo:
    """What the source needs of the metastore table (picklable)."""

    db: str
    name: str
    columns: tuple[tuple[str, str], ...]
    partition_cols: tuple[tuple[str, str], ...]
    insert_only: bool


def _connect(uri: str) -> Any:
    return MetastoreClient(uri).connect()


def _table_info(client: Any, table: str) -> tuple[TableInfo, Any]:
    db, name = split_name(table)
    tbl = client.hms.get_table(db, name)
    table_layout(tbl)  # NotTransactionalError when it is not transactional
    info = TableInfo(
        db=tbl.dbName,
        name=tbl.tableName,
        columns=tuple((c.name, c.type) for c in tbl.sd.cols),
        partition_cols=tuple((k.name, k.type) for k in tbl.partitionKeys or []),
        insert_only=is_insert_only(tbl),
    )
    return info, tbl


def _ddl_type(hive_type: str) -> str:
    """A Hive column type as Spark DDL (``char``/``varchar`` read as strings, as
    :func:`hivemesh.spark.acid_reader.spark_type` does); no JVM needed."""
    return re.sub(r"\b(?:var)?char\s*\(\s*\d+\s*\)", "string", hive_type.strip(), flags=re.IGNORECASE)


def _schema_ddl(info: TableInfo, with_row_ids: bool) -> str:
    """The source's schema as a DDL string (``schema()`` runs in a Python worker without a
    JVM, where a StructType of Hive type strings cannot be parsed)."""
    fields = [f"`{n.replace('`', '``')}` {_ddl_type(t)}" for n, t in (*info.columns, *info.partition_cols)]
    if with_row_ids:
        fields = ["`originalTransaction` bigint", "`bucket` int", "`rowId` bigint", *fields]
    return ", ".join(fields)


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


# --- filters -> Hive partition filter ------------------------------------------------------------


def _base_type(hive_type: str) -> str:
    return hive_type.strip().lower().split("(", 1)[0].strip()


def hive_literal(value: Any, hive_type: str) -> str | None:
    """``value`` as a Hive partition-filter literal for a key of ``hive_type``; None when it
    cannot be written exactly (other types, strings with a backslash or both quote kinds)."""
    base = _base_type(hive_type)
    if base in _INTEGRAL:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return None
    if base == "date":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return f'"{value.isoformat()}"'
        return None
    if base in _STRINGS or base == "varchar":
        if not isinstance(value, str) or "\\" in value:
            return None
        if '"' not in value:
            return f'"{value}"'
        if "'" not in value:
            return f"'{value}'"
    return None


def hive_key(name: str) -> str:
    """A partition column name as written in a Hive partition filter (backquoted unless plain)."""
    return name if name.replace("_", "a").isalnum() and not name.isdigit() else f"`{name}`"


_OPS = {
    EqualTo: "=",
    EqualNullSafe: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


def filter_to_hive(f: Filter, partition_types: dict[str, str]) -> str | None:
    """One pushed Spark filter as a Hive partition filter, or None when it is not a comparison of
    a partition column (``partition_types``: lower-case name -> Hive type) with literals."""
    negated = isinstance(f, Not)
    inner = f.child if negated else f
    attribute = getattr(inner, "attribute", None)
    if not attribute or len(attribute) != 1:
        return None
    column = attribute[0].lower()
    hive_type = partition_types.get(column)
    if hive_type is None:
        return None
    key = hive_key(column)
    if isinstance(inner, In):
        literals = [hive_literal(v, hive_type) for v in inner.value]
        if not literals or any(x is None for x in literals):
            return None
        if negated:
            return "(" + " and ".join(f"{key} <> {x}" for x in literals) + ")"
        return "(" + " or ".join(f"{key} = {x}" for x in literals) + ")"
    op = next((o for cls, o in _OPS.items() if type(inner) is cls), None)
    if op is None or inner.value is None:
        return None
    literal = hive_literal(inner.value, hive_type)
    if literal is None:
        return None
    if negated:
        if op != "=":
            return None  # NOT (a < 1) also holds for NULL partitions in Hive's filter; keep it simple
        return f"{key} <> {literal}"
    return f"{key} {op} {literal}"


def filters_to_hive(filters: Sequence[Filter], partition_types: dict[str, str]) -> str | None:
    """The conjunction of the filters :func:`filter_to_hive` can translate (None: none can)."""
    parts = [p for p in (filter_to_hive(f, partition_types) for f in filters) if p]
    return " and ".join(parts) if parts else None


# --- planning ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcidSplit:
    """One Spark task's work: some files of one table/partition location under a snapshot."""

    location: str
    files: Any  # SnapshotFiles restricted to this split (delete files: all of the location's)
    write_ids: Any  # ValidWriteIdList
    layout: Any  # TableLayout
    partition_cols: tuple[tuple[str, str], ...]
    partition_values: tuple[str, ...]


def _splits(
    location: str,
    files: Any,
    write_ids: Any,
    layout: Any,
    partition_cols: tuple[tuple[str, str], ...],
    values: tuple[str, ...],
    split_bytes: int,
) -> list[AcidSplit]:
    """Split a location's files into groups of about ``split_bytes`` of data files. Original files
    stay in the first group (their row ids count rows of earlier originals); every group reads
    all the location's delete files."""
    acid_files = [f for f in files.data_files if f.directory is not None]
    groups: list[list[Any]] = [[]]
    size = sum(f.size for f in files.original_files)
    for f in acid_files:
        if groups[-1] and size + f.size > split_bytes:
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += f.size
    out = []
    for i, group in enumerate(groups):
        originals = files.original_files if i == 0 else ()
        if not group and not originals:
            continue
        part = replace(files, data_files=(*originals, *group), original_files=originals)
        out.append(AcidSplit(location, part, write_ids, layout, partition_cols, values))
    return out


class HiveAcidReader(DataSourceReader):
    """Plans (driver-side Python worker) and reads (executors) one Hive transactional table."""

    def __init__(self, options: dict[str, str], uri: str, info: TableInfo | None, schema: StructType):
        self.options = dict(options)
        self.uri = uri
        self.info = info
        self.schema = schema
        self.pushed_filter: str | None = None  # set by PushdownHiveAcidReader.pushFilters

    def _ensure_info(self, client: Any | None = None) -> TableInfo:
        if self.info is None:
            own = client is None
            client = client or _connect(self.uri)
            try:
                self.info = _table_info(client, _table_option(self.options))[0]
            finally:
                if own:
                    client.close()
        return self.info

    def partitions(self) -> list[InputPartition]:
        """Plan the read on the driver: the snapshot (a read txn, SHARED_READ lock and
        ValidWriteIdList, committed before returning, unless the options carry a snapshot), the
        pruned partitions and their files, grouped into :class:`AcidSplit` s of about
        ``split_bytes``. NotTransactionalError, NotEnoughHistoryError, MetaException."""
        split_bytes = int(self.options.get("split_bytes") or DEFAULT_SPLIT_BYTES)
        client = _connect(self.uri)
        txn = None
        try:
            info = self._ensure_info(client)
            full = f"{info.db}.{info.name}"
            tbl = client.hms.get_table(info.db, info.name)
            layout = table_layout(tbl)
            given_txns, given_ids = self.options.get("valid_txns"), self.options.get("valid_write_ids")
            if bool(given_txns) != bool(given_ids):
                raise ValueError("give both valid_txns and valid_write_ids, or neither")
            if given_txns:
                txns = ValidTxnList.parse(given_txns)
                write_ids = ValidWriteIdList.parse(given_ids)
            else:
                txn = client.open_txn(txn_type=TxnType.READ_ONLY, agent_info=AGENT_INFO)
                txns = client.valid_txn_list(txn)
                client.lock([lock_component(info.db, info.name)], txn_id=txn, agent_info=AGENT_INFO)
                own: dict[str, Any] = {}
                write_ids = client.valid_write_ids([full], txns, txn_lists=own)[full]
                txns = own.get(full, txns)  # a proxy's federated member: its own txn ids
            given = self.options.get("partition_filter")
            partition_filter = " and ".join(f"({f})" for f in (given, self.pushed_filter) if f) or None
            targets = table_locations(client, tbl, partition_filter)
            splits: list[AcidSplit] = []
            for location, values in sorted(targets, key=lambda t: t[1]):
                files = select_files(list_location(location), write_ids, txns, insert_only=layout.insert_only)
                splits.extend(
                    _splits(location, files, write_ids, layout, info.partition_cols, values, split_bytes)
                )
            if txn is not None:
                client.commit_txn(txn)  # no end-of-query hook: see the module doc
                txn = None
            log.info("%s: %d splits in %d locations, snapshot %s", full, len(splits), len(targets), write_ids)
            return [InputPartition(s) for s in splits]
        finally:
            if txn is not None:
                try:
                    client.abort_txn(txn)
                except Exception as e:  # the error being raised is the news
                    log.warning("could not abort read txn %s: %s", txn, e)
            client.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one split on an executor with pyarrow: Arrow RecordBatches of the table's columns,
        then its partition columns (ROW__ID first with ``with_row_ids``)."""
        split: AcidSplit | None = partition.value
        if split is None:  # Spark's single empty partition when there is nothing to read
            return
        with_row_ids = _flag(self.options.get("with_row_ids", "false"))
        table = read_snapshot_files(
            split.location, split.files, split.write_ids, split.layout, with_row_ids=with_row_ids
        )
        if table.num_rows == 0:
            return
        target = to_arrow_schema(self.schema, timezone="UTC")
        n = table.num_rows
        columns = [table.column(i) for i in range(table.num_columns)]
        for _, value in zip(split.partition_cols, split.partition_values, strict=True):
            index = len(columns)
            arrow_type = target.field(index).type
            if value == "__HIVE_DEFAULT_PARTITION__":
                columns.append(pa.nulls(n, arrow_type))
            else:
                columns.append(pa.array([value] * n, pa.string()).cast(arrow_type))
        out = pa.Table.from_arrays(
            [c.cast(target.field(i).type) for i, c in enumerate(columns)], schema=target
        )
        yield from out.to_batches(max_chunksize=64 * 1024)


class PushdownHiveAcidReader(HiveAcidReader):
    """:class:`HiveAcidReader` that also turns Spark's pushed filters on partition columns into a
    metastore partition filter (option ``partition_pushdown``; see the module doc for the PySpark
    4.3 caveat)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Turn the pushed filters on partition columns into a Hive partition filter for
        :meth:`partitions`; every filter is handed back, so Spark still applies it to the rows."""
        info = self._ensure_info()
        types = {n.lower(): t for n, t in info.partition_cols}
        self.pushed_filter = filters_to_hive(filters, types) if types else None
        if self.pushed_filter:
            log.info("%s.%s: pushed partition filter %s", info.db, info.name, self.pushed_filter)
        # Every filter goes back to Spark: the partition filter only narrows what is read.
        yield from filters


def _table_option(options: Any) -> str:
    table = options.get("table") or options.get("path")
    if not table:
        raise ValueError('format("hiveacid") needs a table: .load("db.table") or .option("table", ...)')
    return str(table)


class HiveAcidDataSource(DataSource):
    """The ``hiveacid`` Python data source (see the module doc)."""

    default_metastore_uri: str | None = None  # set on the subclass register_hiveacid makes

    @classmethod
    def name(cls) -> str:
        """``hiveacid``: the name for ``spark.read.format``."""
        return NAME

    def _uri(self) -> str:
        uri = self.options.get("metastore.uri") or type(self).default_metastore_uri
        if not uri:
            raise ValueError('format("hiveacid") needs .option("metastore.uri", "thrift://host:port")')
        return str(uri)

    def schema(self) -> str:
        """The table's columns, then its partition columns, as Spark DDL (from the metastore)."""
        client = _connect(self._uri())
        try:
            self._info, _ = _table_info(client, _table_option(self.options))
        finally:
            client.close()
        with_row_ids = _flag(self.options.get("with_row_ids", "false"))
        if with_row_ids and self._info.insert_only:
            raise ValueError("insert-only tables have no row ids (ROW__ID)")
        return _schema_ddl(self._info, with_row_ids)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader: with partition pushdown when the ``partition_pushdown`` option is true."""
        cls = (
            PushdownHiveAcidReader
            if _flag(self.options.get("partition_pushdown", "false"))
            else HiveAcidReader
        )
        return cls(self.options, self._uri(), getattr(self, "_info", None), schema)
