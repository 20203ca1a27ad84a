"""Partition methods of the HMS interface: add (bulk), get (by values, names, partial spec, filter),
alter, rename and drop. Every multi-partition call is one transaction with a fixed number of queries."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa
from hive_metastore.ttypes import (
    AddPartitionsResult,
    AlterPartitionsResponse,
    DropPartitionsResult,
    GetPartitionsByNamesResult,
    InvalidObjectException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
    Partition,
    PartitionListComposingSpec,
    PartitionSpec,
    PartitionSpecWithSharedSD,
    PartitionWithoutSD,
    StorageDescriptor,
    Table,
)
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TMessageType

from hivemesh import storage
from hivemesh.hive import events
from hivemesh.hive.hms_methods import argument_problem, positional_args
from hivemesh.hive.names import db_ref, split_part_name, unescape_path_name
from hivemesh.metastore import (
    fast_stats,
    partition_filter,
    partition_wire,
    partition_writes,
    rows,
    statistics,
)
from hivemesh.metastore.base import CatalogBase, Tx, env_props, java_list
from hivemesh.metastore.partition_writes import TableInfo
from hivemesh.metastore.schema import (
    DBS,
    PARTITION_KEY_VALS,
    PARTITION_PARAMS,
    PARTITIONS,
    SDS,
    TABLE_PARAMS,
    TBLS,
)

log = logging.getLogger(__name__)

SPEC_GROUPING = "hive.hcatalog.partition.spec.grouping.enabled"
"""Table parameter: answer PartitionSpecs grouped by shared storage descriptor (Hive's switch)."""

UNCACHED_FILTER_TERMS = 64
"""Filters with more comparisons than this run without SQLAlchemy's compiled-statement cache."""


def _renamed(
    conn: sa.Connection, row: sa.Row[Any], new_part: Partition
) -> tuple[list[Partition], list[dict[str, str] | None]]:
    """For :func:`partition_writes.fill_fast_stats`: the renamed partition's new parameters (the
    request's, else its current ones) at its current location, and its current parameters."""
    old_params = dict(
        conn.execute(
            sa.select(PARTITION_PARAMS.c.PARAM_KEY, PARTITION_PARAMS.c.PARAM_VALUE).where(
                PARTITION_PARAMS.c.PART_ID == row.PART_ID
            )
        ).all()
    )
    params = dict(new_part.parameters) if new_part.parameters is not None else dict(old_params)
    return [Partition(parameters=params, sd=StorageDescriptor(location=row.LOCATION))], [old_params]


# get_partition_names: the table's id as a scalar subquery, so the names are read from the
# (TBL_ID, PART_NAME) unique index in its order (an index-only scan on PostgreSQL, a covering index
# on SQLite) rather than by joining the whole PARTITIONS table and sorting. Built once: building
# the statement on every call was ~15% of the call's time in a py-spy profile of the server.
_TBL_ID_BY_NAME = (
    sa.select(TBLS.c.TBL_ID)
    .select_from(TBLS.join(DBS, DBS.c.DB_ID == TBLS.c.DB_ID))
    .where(
        DBS.c.CTLG_NAME == sa.bindparam("cat"),
        DBS.c.NAME == sa.bindparam("db"),
        TBLS.c.TBL_NAME == sa.bindparam("tbl"),
    )
    .scalar_subquery()
)
_PART_NAMES = (
    sa.select(PARTITIONS.c.PART_NAME)
    .where(PARTITIONS.c.TBL_ID == _TBL_ID_BY_NAME)
    .order_by(PARTITIONS.c.TBL_ID, PARTITIONS.c.PART_NAME)
)
_PART_NAMES_LIMITED = _PART_NAMES.limit(sa.bindparam("lim", type_=sa.Integer))


class PartitionMixin(CatalogBase):
    """HMS partition calls."""

    relay_methods = frozenset({"get_partitions"})
    """Calls :meth:`relay` may answer with bytes encoded straight from rows (the processor's hook)."""

    def relay(self, method: str, args: Any, seqid: int, oprot: Any) -> bool:
        """Answer ``get_partitions`` of a whole table (``max_parts`` < 0) on a binary-protocol
        connection with the reply encoded straight from the rows (:mod:`partition_wire`: the same
        bytes, without building ~10,000 Thrift objects for 1,000 partitions). Returns False,
        having written nothing, for anything else (another protocol, a limit, a missing table,
        any error): the normal path then answers, with the exception a client expects."""
        if (
            method != "get_partitions"
            or not isinstance(oprot, TBinaryProtocol.TBinaryProtocol)
            or (args.max_parts is not None and args.max_parts >= 0)
            or argument_problem(method, positional_args(args)) is not None
        ):
            return False
        try:
            with self.read() as conn:
                info = self._table_info(conn, args.db_name, args.tbl_name)
                base, ch = rows.table_partition_rows(conn, info.id)
            body = partition_wire.encode_partitions(base, ch, info.db, info.name, info.cat)
        except Exception as e:  # noqa: BLE001 - the normal path answers it properly
            log.debug("get_partitions takes the normal path: %s", e)
            return False
        oprot.writeMessageBegin(method, TMessageType.REPLY, seqid)
        # get_partitions_result: its success field, the list, the struct's STOP
        oprot.trans.write(partition_wire.GET_PARTITIONS_SUCCESS + body + b"\x00")
        oprot.writeMessageEnd()
        oprot.trans.flush()
        return True

    def _table_info(
        self,
        conn: sa.Connection,
        db: str | None,
        tbl: str,
        exc: type[Exception] = NoSuchObjectException,
        lock: bool = False,
    ) -> TableInfo:
        return TableInfo(conn, self.table_row(conn, db, tbl, exc=exc, for_update=lock))

    def _ids(self, info: TableInfo, cond: Any = None, max_parts: int = -1) -> sa.Select[Any]:
        q = sa.select(PARTITIONS.c.PART_ID).where(info.id == PARTITIONS.c.TBL_ID)
        if cond is not None:
            q = q.where(cond)
        q = q.order_by(PARTITIONS.c.PART_NAME)
        if max_parts is not None and max_parts >= 0:
            q = q.limit(max_parts)
        return q

    def _load(
        self, conn: sa.Connection, info: TableInfo, ids: sa.Select[Any] | Sequence[int]
    ) -> list[Partition]:
        return rows.load_partitions(conn, info.db, info.name, info.cat, ids)

    def _event_table(self, conn: sa.Connection, info: TableInfo) -> Table:
        """The table as ``get_table`` returns it, for the objects of partition events."""
        return self._table_image(conn, info.cat, info.db, info.name)

    @staticmethod
    def _event(tx: Tx, info: TableInfo, event_type: str, message: str) -> None:
        """Record a partition event of ``info``'s table on ``tx``."""
        tx.event(event_type, message, db=info.db, table=info.name, catalog=info.cat)

    # ---------------------------------------------------------------- add
    def _add_partitions(
        self,
        db: str | None,
        tbl: str,
        parts: Sequence[Partition],
        if_not_exists: bool,
        env: dict[str, str] | None = None,
    ) -> list[Partition]:
        """Add partitions of table ``db.tbl`` in one write transaction with one ADD_PARTITION event;
        the added partitions (none when all exist and ``if_not_exists``).

        Storage I/O stays outside the transaction: listings for fast statistics are taken before
        it (:meth:`_gather_listings`), directories are made after it commits (a failed call makes
        none). Raises InvalidObjectException (no table), AlreadyExistsException, MetaException
        (wrong number of values, a partition of another table, a location outside the allowed ones).
        """
        listings = fast_stats.Listings(new_dirs=True)
        if any(fast_stats.may_list(env, p.parameters, force=False) for p in parts):

            def plan(conn: sa.Connection) -> list[str | None]:
                """The locations the write transaction will list (found in a read transaction)."""
                info = self._table_info(conn, db, tbl, exc=InvalidObjectException)
                new_parts = list(
                    partition_writes.new_partitions(
                        conn, info, parts, if_not_exists, self.checked_location
                    ).values()
                )
                return [
                    partition_writes.location(p)
                    for p in partition_writes.stats_to_list(new_parts, [None] * len(new_parts), env, False)
                ]

            self._gather_listings(listings, plan)

        def work(tx: Tx) -> list[Partition]:
            """The add in the write transaction; the added partitions as stored."""
            info = self._table_info(tx.conn, db, tbl, exc=InvalidObjectException, lock=True)
            return self._add_partitions_tx(tx, info, parts, if_not_exists, env, listings)

        return self._write_with_listings(listings, work)

    def _add_partitions_tx(
        self,
        tx: Tx,
        info: TableInfo,
        parts: Sequence[Partition],
        if_not_exists: bool,
        env: dict[str, str] | None,
        listings: fast_stats.Listings | None,
    ) -> list[Partition]:
        """Add partitions inside ``tx`` (the table's row locked); ``listings`` None lists locations
        inside the transaction (``exchange_partition``, which moves directories there too)."""
        new = partition_writes.new_partitions(tx.conn, info, parts, if_not_exists, self.checked_location)
        if not new:
            return []
        new_parts = list(new.values())
        # Hive's fast stats for partitions added over existing directories
        partition_writes.fill_fast_stats(new_parts, [None] * len(new_parts), env, False, listings)
        part_rows = partition_writes.insert_partitions(tx.conn, info, new)
        locs = [p.sd.location for p in new_parts if p.sd and p.sd.location]
        tx.after_commit.append(lambda: [storage.make_dirs(loc) for loc in locs])
        # One ADD_PARTITION event for the whole batch (Hive's add_partitions_core)
        stored = partition_writes.stored_partitions(info, new_parts, part_rows)
        table = self._event_table(tx.conn, info)
        self._event(tx, info, events.ADD_PARTITION, events.add_partition_message(table, stored))
        return new_parts

    def add_partition(self, new_part: Partition) -> Partition:
        """Add one partition; raises AlreadyExistsException, InvalidObjectException (no table),
        MetaException (wrong number of values)."""
        return self._add_partitions(self._part_db(new_part), new_part.tableName, [new_part], False)[0]

    def add_partition_with_environment_context(
        self, new_part: Partition, environment_context: Any
    ) -> Partition:
        """:meth:`add_partition`; ``DO_NOT_UPDATE_STATS``/``STATS_GENERATED`` are honoured."""
        env = env_props(environment_context)
        return self._add_partitions(self._part_db(new_part), new_part.tableName, [new_part], False, env)[0]

    def append_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Partition:
        """Add a partition by its values with the table's storage descriptor and default location."""
        return self.add_partition(Partition(values=part_vals, dbName=db_name, tableName=tbl_name))

    def add_partitions(self, new_parts: list[Partition]) -> int:
        """Add partitions of one table atomically; returns how many. Raises AlreadyExistsException."""
        if not new_parts:
            return 0
        first = new_parts[0]
        return len(self._add_partitions(self._part_db(first), first.tableName, new_parts, False))

    def add_partitions_req(self, request: Any) -> AddPartitionsResult:
        """AddPartitionsRequest: ``ifNotExists`` skips existing ones; ``needResult`` returns the added."""
        db = db_ref(request.dbName, request.catName)
        added = self._add_partitions(db, request.tblName, request.parts or [], bool(request.ifNotExists))
        return AddPartitionsResult(partitions=added if request.needResult in (None, True) else None)

    @staticmethod
    def _part_db(part: Partition) -> str | None:
        return db_ref(part.dbName, part.catName)

    # ---------------------------------------------------------------- get
    def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Partition:
        """Raises NoSuchObjectException when the table or partition is missing."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            name = info.part_name(part_vals)
            found = self._load(conn, info, self._ids(info, name == PARTITIONS.c.PART_NAME))
            if not found:
                raise NoSuchObjectException(f"partition values={java_list(part_vals)}")
            return found[0]

    def get_partition_with_auth(
        self, db_name: str, tbl_name: str, part_vals: list[str], user_name: str, group_names: list[str]
    ) -> Partition:
        """:meth:`get_partition` (no privileges are attached)."""
        return self.get_partition(db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Partition:
        """A partition by its name ``k=v/k2=v2``; raises NoSuchObjectException."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            name = self._canonical_name(info, part_name)
            found = self._load(conn, info, self._ids(info, name == PARTITIONS.c.PART_NAME))
            if not found:
                raise NoSuchObjectException(f"partition {part_name} of {info.db}.{info.name} not found")
            return found[0]

    @staticmethod
    def _canonical_name(info: TableInfo, part_name: str) -> str:
        try:
            kv = split_part_name(part_name)
        except ValueError as e:
            raise MetaException(str(e)) from e
        spec = {k.lower(): v for k, v in kv}
        if set(spec) != set(info.key_names):
            raise MetaException(f"Invalid partition name {part_name!r} for keys {info.key_names}")
        return info.part_name([spec[k] for k in info.key_names])

    def get_partitions(self, db_name: str | None, tbl_name: str, max_parts: int) -> list[Partition]:
        """All partitions (at most ``max_parts``; -1 = all), ordered by name."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            if max_parts is None or max_parts < 0:
                return rows.load_table_partitions(conn, info.db, info.name, info.cat, info.id)
            return self._load(conn, info, self._ids(info, None, max_parts))

    def get_partitions_with_auth(
        self, db_name: str, tbl_name: str, max_parts: int, user_name: str, group_names: list[str]
    ) -> list[Partition]:
        """:meth:`get_partitions`."""
        return self.get_partitions(db_name, tbl_name, max_parts)

    def get_partition_names(self, db_name: str | None, tbl_name: str, max_parts: int) -> list[str]:
        """Partition names ``k=v/...`` (escaped), ordered, at most ``max_parts`` (-1 = all); none
        for a missing table or database (as Hive 2.3 and 4 answer)."""
        cat, db = self.db_name(db_name)
        params: dict[str, Any] = {"cat": cat, "db": db, "tbl": (tbl_name or "").lower()}
        stmt = _PART_NAMES
        if max_parts is not None and max_parts >= 0:
            stmt, params["lim"] = _PART_NAMES_LIMITED, max_parts
        with self.read_statement() as conn:  # one statement: a missing table has no names either
            return [r[0] for r in rows.fetch_tuples(conn, stmt, params)]

    def _ps_cond(self, info: TableInfo, part_vals: Sequence[str]) -> Any:
        if len(part_vals or []) > len(info.key_names):
            raise MetaException(
                f"Incorrect number of partition values. numPartKeys={len(info.key_names)}, "
                f"part_val={java_list(part_vals)}"
            )
        conds = []
        for i, v in enumerate(part_vals or []):
            if v == "" or v is None:
                continue
            kv = PARTITION_KEY_VALS.alias(f"kv{i}")
            conds.append(
                sa.exists().where(
                    kv.c.PART_ID == PARTITIONS.c.PART_ID, kv.c.INTEGER_IDX == i, kv.c.PART_KEY_VAL == v
                )
            )
        return sa.and_(sa.true(), *conds)

    def get_partitions_ps(
        self, db_name: str, tbl_name: str, part_vals: list[str], max_parts: int
    ) -> list[Partition]:
        """Partitions matching a partial specification: values for leading keys, "" = any value."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            return self._load(conn, info, self._ids(info, self._ps_cond(info, part_vals), max_parts))

    def get_partitions_ps_with_auth(
        self,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        max_parts: int,
        user_name: str,
        group_names: list[str],
    ) -> list[Partition]:  # noqa: E501
        """:meth:`get_partitions_ps`."""
        return self.get_partitions_ps(db_name, tbl_name, part_vals, max_parts)

    def get_partition_names_ps(
        self, db_name: str, tbl_name: str, part_vals: list[str], max_parts: int
    ) -> list[str]:
        """Names of the partitions matching a partial specification."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            ids = self._ids(info, self._ps_cond(info, part_vals), max_parts)
            q = (
                sa.select(PARTITIONS.c.PART_NAME)
                .where(PARTITIONS.c.PART_ID.in_(ids))
                .order_by(PARTITIONS.c.PART_NAME)
            )
            return list(conn.execute(q).scalars())

    def _filter_ids(
        self, conn: sa.Connection, info: TableInfo, filter_text: str, max_parts: int
    ) -> sa.Select[Any] | list[int]:
        try:
            expr = partition_filter.parse_filter(filter_text)
        except partition_filter.FilterError as e:
            raise MetaException(f"Error parsing partition filter: {e}") from e
        if expr is None:
            return self._ids(info, None, max_parts)
        keys = {k: i for i, k in enumerate(info.key_names)}
        unknown = sorted(k for k in partition_filter.referenced_keys(expr) if k not in keys)
        if unknown:
            raise MetaException(
                f"Filter on unknown partition key(s) {unknown}; the keys are {info.key_names}"
            )
        aliases: dict[str, Any] = {}

        def value_column(key: str) -> Any:
            """The PART_KEY_VAL column of this key's PARTITION_KEY_VALS alias."""
            if key not in aliases:
                aliases[key] = PARTITION_KEY_VALS.alias(f"f_{keys[key]}")
            return aliases[key].c.PART_KEY_VAL

        try:
            cond = partition_filter.to_sqlalchemy(expr, value_column, info.key_types, self.store.dialect)
        except partition_filter.NotPushable:
            cond = None
        if cond is None:  # evaluate in Python over (name, values)
            q = (
                sa.select(PARTITIONS.c.PART_ID, PARTITIONS.c.PART_NAME)
                .where(info.id == PARTITIONS.c.TBL_ID)
                .order_by(PARTITIONS.c.PART_NAME)
            )
            ids = []
            for pid, name in conn.execute(q):
                values = {k.lower(): v for k, v in split_part_name(name)}
                if partition_filter.evaluate(expr, values, info.key_types):
                    ids.append(pid)
                    if 0 <= max_parts <= len(ids):
                        break
            return ids
        # Only the first key's values are selected by table (index TBL_ID, INTEGER_IDX, PART_KEY_VAL);
        # the other keys and PARTITIONS itself are reached by primary key. That keeps the plan linear
        # even when the database's statistics are stale (e.g. PostgreSQL right after a bulk add).
        q = sa.select(PARTITIONS.c.PART_ID).select_from(PARTITIONS)
        for n, (key, alias) in enumerate(aliases.items()):
            on = sa.and_(alias.c.PART_ID == PARTITIONS.c.PART_ID, alias.c.INTEGER_IDX == keys[key])
            if n == 0:
                on = sa.and_(on, alias.c.TBL_ID == info.id)
            q = q.join(alias, on)
        q = q.where(cond).order_by(PARTITIONS.c.PART_NAME)
        if max_parts is not None and max_parts >= 0:
            q = q.limit(max_parts)
        if partition_filter.term_count(expr) > UNCACHED_FILTER_TERMS:
            # a large filter's statement is run once, outside SQLAlchemy's compiled-statement cache:
            # hundreds of distinct large filters would otherwise keep megabytes each, for good
            return list(conn.execution_options(compiled_cache=None).execute(q).scalars())
        return q

    def get_partitions_by_filter(
        self, db_name: str | None, tbl_name: str, filter: str, max_parts: int
    ) -> list[Partition]:  # noqa: A002
        """Partitions matching a Hive partition filter (``k = "v" and n > 1``); MetaException on a bad filter."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            ids = self._filter_ids(conn, info, filter, max_parts)
            return self._load(conn, info, ids)

    def get_part_specs_by_filter(
        self,
        db_name: str,
        tbl_name: str,
        filter: str,
        max_parts: int,  # noqa: A002
    ) -> list[PartitionSpec]:
        """:meth:`get_partitions_by_filter` as PartitionSpecs (:meth:`_partition_specs`)."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            parts = self._load(conn, info, self._filter_ids(conn, info, filter, max_parts))
            return self._partition_specs(conn, info, parts)

    def get_partitions_pspec(self, db_name: str, tbl_name: str, max_parts: int) -> list[PartitionSpec]:
        """:meth:`get_partitions` as PartitionSpecs (:meth:`_partition_specs`)."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            return self._partition_specs(conn, info, self._load(conn, info, self._ids(info, None, max_parts)))

    def _partition_specs(
        self, conn: sa.Connection, info: TableInfo, parts: list[Partition]
    ) -> list[PartitionSpec]:
        """Partitions as Hive 4 answers them in PartitionSpecs: one spec listing them all (rooted
        at the table's location), unless the table has ``hive.hcatalog.partition.spec.grouping.enabled
        =true``: then partitions inside the table's directory sharing their storage descriptor
        (SerDe, formats, columns, bucket count) share one PartitionSpecWithSharedSD (its location
        the table's, each partition's path relative to it), and the others are listed in one
        more spec."""
        params = dict(
            conn.execute(
                sa.select(TABLE_PARAMS.c.PARAM_KEY, TABLE_PARAMS.c.PARAM_VALUE).where(
                    TABLE_PARAMS.c.TBL_ID == info.id
                )
            ).all()
        )
        names = {"catName": info.cat, "dbName": info.db, "tableName": info.name}
        if (params.get(SPEC_GROUPING) or "").lower() != "true":
            return [
                PartitionSpec(
                    partitionList=PartitionListComposingSpec(parts), rootPath=info.location, **names
                )
            ]
        root = info.location or ""
        groups: dict[Any, list[Partition]] = {}
        outside: list[Partition] = []
        first_buckets = parts[0].sd.numBuckets if parts and parts[0].sd else None
        for p in parts:
            sd = p.sd
            loc = sd.location if sd else None
            if (
                sd is None
                or not loc
                or not root
                or not loc.startswith(root)
                or sd.numBuckets != first_buckets
            ):
                outside.append(p)
                continue
            key = (
                sd.serdeInfo.serializationLib if sd.serdeInfo else None,
                sd.inputFormat,
                sd.outputFormat,
                tuple((c.name, c.type, c.comment) for c in sd.cols or []),
            )
            groups.setdefault(key, []).append(p)
        specs = []
        for members in groups.values():
            shared = StorageDescriptor(**members[0].sd.__dict__)
            shared.location = root
            specs.append(
                PartitionSpec(
                    sharedSDPartitionSpec=PartitionSpecWithSharedSD(
                        partitions=[
                            PartitionWithoutSD(
                                values=p.values,
                                createTime=p.createTime,
                                lastAccessTime=p.lastAccessTime,
                                relativePath=p.sd.location[len(root) :],
                                parameters=p.parameters,
                            )
                            for p in members
                        ],
                        sd=shared,
                    ),
                    rootPath=root,
                    **names,
                )
            )
        if outside:
            specs.append(PartitionSpec(partitionList=PartitionListComposingSpec(outside), **names))
        return specs

    def get_num_partitions_by_filter(self, db_name: str, tbl_name: str, filter: str) -> int:  # noqa: A002
        """How many partitions match a filter."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            ids = self._filter_ids(conn, info, filter, -1)
            if isinstance(ids, list):
                return len(ids)
            return conn.execute(sa.select(sa.func.count()).select_from(ids.subquery())).scalar_one()

    def get_partitions_by_names(self, db_name: str, tbl_name: str, names: list[str]) -> list[Partition]:
        """The existing partitions among ``names``; missing names are left out."""
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            canon = [self._canonical_name(info, n) for n in names or []]
            out: list[Partition] = []
            for i in range(0, len(canon), 5000):
                out += self._load(
                    conn, info, self._ids(info, PARTITIONS.c.PART_NAME.in_(canon[i : i + 5000]))
                )
            return out

    def get_partitions_by_names_req(self, req: Any) -> GetPartitionsByNamesResult:
        """Hive 3/4 GetPartitionsByNamesRequest form. With ``get_col_stats`` each partition that has
        column statistics (of ``engine``, default ``hive``) carries them in ``colStats``, as in Hive 4.
        Raises as :meth:`get_partitions_by_names`."""
        parts = self.get_partitions_by_names(req.db_name, req.tbl_name, req.names)
        if parts and getattr(req, "get_col_stats", None):
            with self.read() as conn:
                info = self._table_info(conn, req.db_name, req.tbl_name)
                names = {info.part_name(p.values): p for p in parts}
                ids = dict(
                    conn.execute(
                        sa.select(PARTITIONS.c.PART_ID, PARTITIONS.c.PART_NAME).where(
                            info.id == PARTITIONS.c.TBL_ID, PARTITIONS.c.PART_NAME.in_(list(names))
                        )
                    ).all()
                )
                found = statistics.partition_statistics(
                    conn, info.cat, info.db, info.name, ids, getattr(req, "engine", None)
                )
            for pid, cs in found.items():
                names[ids[pid]].colStats = cs
        return GetPartitionsByNamesResult(partitions=parts)

    @staticmethod
    def _lenient_spec(part_name: str) -> list[tuple[str, str]]:
        """``k=v`` components of a name; components without ``=`` are skipped, as Hive does."""
        out = []
        for comp in (part_name or "").split("/"):
            k, sep, v = comp.partition("=")
            if sep and k and v:
                out.append((unescape_path_name(k), unescape_path_name(v)))
        return out

    def partition_name_to_vals(self, part_name: str) -> list[str]:
        """``a=1/b=x`` -> ``["1", "x"]`` (components without ``=`` are skipped)."""
        return [v for _, v in self._lenient_spec(part_name)]

    def partition_name_to_spec(self, part_name: str) -> dict[str, str]:
        """``a=1/b=x`` -> ``{"a": "1", "b": "x"}`` (components without ``=`` are skipped)."""
        return dict(self._lenient_spec(part_name))

    # ---------------------------------------------------------------- alter / rename
    def _alter_partitions(
        self,
        db_name: str | None,
        tbl_name: str,
        new_parts: Sequence[Partition],
        env: dict[str, str] | None = None,
    ) -> None:
        """Replace the storage descriptors and parameters of existing partitions in one write
        transaction, with one ALTER_PARTITION event per partition in the request's order.

        Listings for fast statistics are taken before the transaction. Raises
        InvalidOperationException (no table, a partition missing), MetaException (wrong number of
        values).
        """
        listings = fast_stats.Listings(new_dirs=False)
        if any(fast_stats.may_list(env, p.parameters, force=True) for p in new_parts):

            def plan(conn: sa.Connection) -> list[str | None]:
                """The locations the write transaction will list (found in a read transaction)."""
                info, by_name, ids = self._altered(conn, db_name, tbl_name, new_parts, lock=False)
                old = partition_writes.fast_params(conn, ids)
                # copies: the request's partitions are prepared in the write transaction
                parts = [
                    Partition(values=p.values, sd=p.sd, parameters=dict(p.parameters or {}))
                    for p in by_name.values()
                ]
                to_list = partition_writes.stats_to_list(parts, [old.get(pid) for pid in ids], env, True)
                return [partition_writes.location(p) for p in to_list]

            self._gather_listings(listings, plan)

        def work(tx: Tx) -> None:
            """The alter in the write transaction."""
            self._alter_partitions_tx(tx, db_name, tbl_name, new_parts, env, listings)

        self._write_with_listings(listings, work)

    def _alter_partitions_tx(
        self,
        tx: Tx,
        db_name: str | None,
        tbl_name: str,
        new_parts: Sequence[Partition],
        env: dict[str, str] | None,
        listings: fast_stats.Listings,
    ) -> None:
        conn = tx.conn
        info, by_name, ids = self._altered(conn, db_name, tbl_name, new_parts, lock=True)
        before = {tuple(p.values): p for p in rows.load_partitions(conn, info.db, info.name, info.cat, ids)}
        old_sds = (
            conn.execute(sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.PART_ID.in_(ids))).scalars().all()
        )
        old_fast = partition_writes.fast_params(conn, ids)
        parts = list(by_name.values())
        for p in parts:
            partition_writes.prepare_altered(p)
        partition_writes.fill_fast_stats(parts, [old_fast.get(pid) for pid in ids], env, True, listings)
        new_sd_ids = rows.insert_sds(
            conn,
            [p.sd or StorageDescriptor() for p in parts],
            shared_cd=partition_writes.table_cd(conn, info),
        )
        partition_writes.update_altered(conn, ids, new_sd_ids, parts)
        rows.delete_sds(conn, old_sds)
        # Hive: one ALTER_PARTITION per partition, in the order of the request
        after = {tuple(p.values): p for p in rows.load_partitions(conn, info.db, info.name, info.cat, ids)}
        table = self._event_table(conn, info)
        for p in parts:
            key = tuple(p.values)
            self._event(
                tx,
                info,
                events.ALTER_PARTITION,
                events.alter_partition_message(table, before[key], after[key]),
            )

    def _altered(
        self,
        conn: sa.Connection,
        db_name: str | None,
        tbl_name: str,
        new_parts: Sequence[Partition],
        lock: bool,
    ) -> tuple[TableInfo, dict[str, Partition], list[int]]:
        """The table (its row locked with ``lock``), the request's partitions by name and their
        PART_IDs in that order; InvalidOperationException when the table or a partition is missing."""
        try:
            info = self._table_info(conn, db_name, tbl_name, lock=lock)
        except NoSuchObjectException as e:
            raise InvalidOperationException(f"alter is not possible: {e.message}") from e
        by_name = {info.part_name(p.values): p for p in new_parts}
        found = dict(
            conn.execute(
                sa.select(PARTITIONS.c.PART_NAME, PARTITIONS.c.PART_ID).where(
                    info.id == PARTITIONS.c.TBL_ID, PARTITIONS.c.PART_NAME.in_(list(by_name))
                )
            ).all()
        )
        missing = [n for n in by_name if n not in found]
        if missing:
            raise InvalidOperationException(
                f"alter is not possible: partition {missing[0]} of {info.db}.{info.name} does not exist"
            )
        return info, by_name, [found[n] for n in by_name]

    def alter_partition(self, db_name: str, tbl_name: str, new_part: Partition) -> None:
        """Replace a partition's storage descriptor and parameters; InvalidOperationException if missing."""
        self._alter_partitions(db_name, tbl_name, [new_part])

    def alter_partition_with_environment_context(
        self, db_name: str, tbl_name: str, new_part: Partition, environment_context: Any
    ) -> None:
        """:meth:`alter_partition`; ``DO_NOT_UPDATE_STATS``/``STATS_GENERATED`` are honoured."""
        self._alter_partitions(db_name, tbl_name, [new_part], env_props(environment_context))

    def alter_partitions(self, db_name: str, tbl_name: str, new_parts: list[Partition]) -> None:
        """Alter many partitions in one transaction."""
        self._alter_partitions(db_name, tbl_name, new_parts or [])

    def alter_partitions_with_environment_context(
        self, db_name: str, tbl_name: str, new_parts: list[Partition], environment_context: Any
    ) -> None:
        """:meth:`alter_partitions`; ``DO_NOT_UPDATE_STATS``/``STATS_GENERATED`` are honoured."""
        self._alter_partitions(db_name, tbl_name, new_parts or [], env_props(environment_context))

    def alter_partitions_req(self, req: Any) -> AlterPartitionsResponse:
        """Hive 4 AlterPartitionsRequest form."""
        db = db_ref(req.dbName, req.catName)
        self._alter_partitions(db, req.tableName, req.partitions or [], env_props(req.environmentContext))
        return AlterPartitionsResponse()

    def rename_partition(
        self, db_name: str, tbl_name: str, part_vals: list[str], new_part: Partition
    ) -> None:
        """Give a partition new values; a managed partition at its default location moves with it.

        The listing for its fast statistics is taken before the write transaction, the directory
        is moved inside it (see :meth:`_rename_partition_tx`). Raises InvalidOperationException
        (missing partition, or the target exists: Hive's IDL declares no AlreadyExistsException
        here).
        """
        listings = fast_stats.Listings(new_dirs=False)

        def plan(conn: sa.Connection) -> list[str | None]:
            """The renamed partition's location to list (found in a read transaction)."""
            info = self._table_info(conn, db_name, tbl_name, exc=InvalidOperationException)
            row = self._rename_source(conn, info, part_vals, new_part)
            return [
                p.sd.location
                for p in partition_writes.stats_to_list(*_renamed(conn, row, new_part), None, True)
            ]

        self._gather_listings(listings, plan)
        self._write_with_listings(
            listings,
            lambda tx: self._rename_partition_tx(tx, db_name, tbl_name, part_vals, new_part, listings),
        )

    def _rename_partition_tx(
        self,
        tx: Tx,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        new_part: Partition,
        listings: fast_stats.Listings,
    ) -> None:
        conn = tx.conn
        info = self._table_info(conn, db_name, tbl_name, exc=InvalidOperationException, lock=True)
        row = self._rename_source(conn, info, part_vals, new_part)
        renamed, old_params = _renamed(conn, row, new_part)
        partition_writes.fill_fast_stats(renamed, old_params, None, True, listings)
        before = rows.load_partitions(conn, info.db, info.name, info.cat, [row.PART_ID])[0]
        old_loc = row.LOCATION
        cur_loc = partition_writes.rename_rows(conn, info, row, part_vals, new_part.values)
        conn.execute(PARTITION_PARAMS.delete().where(PARTITION_PARAMS.c.PART_ID == row.PART_ID))
        rows.insert_params(conn, PARTITION_PARAMS, "PART_ID", [(row.PART_ID, renamed[0].parameters)])
        after = rows.load_partitions(conn, info.db, info.name, info.cat, [row.PART_ID])[0]
        self._event(  # Hive: a rename is an ALTER_PARTITION from the old to the new partition
            tx,
            info,
            events.ALTER_PARTITION,
            events.alter_partition_message(self._event_table(conn, info), before, after),
        )
        if cur_loc != old_loc:  # last: the directory moves only when everything else succeeded
            # Inside the write transaction on purpose: a move the storage refuses rolls the
            # rename back, so the store never names a directory that did not move (after the
            # commit, a failed move would leave the partition pointing at a missing directory).
            # cur_loc differs only when joined from an old_loc that matched a str location
            storage.move_dir(cast(str, old_loc), cast(str, cur_loc))

    @staticmethod
    def _rename_source(
        conn: sa.Connection, info: TableInfo, part_vals: list[str], new_part: Partition
    ) -> sa.Row[Any]:
        """PART_ID, SD_ID and LOCATION of the partition to rename; InvalidOperationException when it
        is missing or a partition with the new values exists."""
        old_name = info.part_name(part_vals)
        new_name = info.part_name(new_part.values)
        q: sa.Select[Any] = (
            sa.select(PARTITIONS.c.PART_ID, PARTITIONS.c.SD_ID, SDS.c.LOCATION)
            .select_from(PARTITIONS.outerjoin(SDS, SDS.c.SD_ID == PARTITIONS.c.SD_ID))
            .where(PARTITIONS.c.TBL_ID == info.id, PARTITIONS.c.PART_NAME == old_name)
        )
        row = conn.execute(q).first()
        if row is None:
            raise InvalidOperationException(
                f"Unable to rename partition: {old_name} of {info.db}.{info.name} does not exist"
            )
        if conn.execute(
            sa.select(PARTITIONS.c.PART_ID).where(
                PARTITIONS.c.TBL_ID == info.id, PARTITIONS.c.PART_NAME == new_name
            )
        ).first():
            raise InvalidOperationException(
                f"Partition already exists:{info.db}.{info.name}.{java_list(new_part.values)}"
            )
        return row

    # ---------------------------------------------------------------- drop
    def _delete_partition_rows(self, conn: sa.Connection, part_ids: sa.Select[Any] | list[int]) -> None:
        """Delete partitions (params, key values and column statistics go by ON DELETE CASCADE)."""
        conn.execute(PARTITIONS.delete().where(PARTITIONS.c.PART_ID.in_(part_ids)))

    def _drop_by_names(
        self,
        db_name: str | None,
        tbl_name: str,
        names: list[str] | None,
        delete_data: bool,
        if_exists: bool = False,
    ) -> list[Partition]:
        with self.write() as tx:
            conn = tx.conn
            info = self._table_info(conn, db_name, tbl_name, lock=True)
            canon = [self._canonical_name(info, n) for n in names or []]
            ids = (
                conn.execute(
                    sa.select(PARTITIONS.c.PART_ID).where(
                        info.id == PARTITIONS.c.TBL_ID, PARTITIONS.c.PART_NAME.in_(canon)
                    )
                )
                .scalars()
                .all()
            )
            if len(ids) != len(set(canon)) and not if_exists:
                raise NoSuchObjectException(
                    f"Partition doesn't exist: some of {canon} in {info.db}.{info.name}"
                )
            return self._drop_partition_ids(tx, info, ids, delete_data)

    def _drop_partition_ids(
        self, tx: Tx, info: TableInfo, ids: Sequence[int], delete_data: bool
    ) -> list[Partition]:
        """Drop partitions by PART_ID inside ``tx`` (one DROP_PARTITION each, as Hive's
        drop_partitions_req); a managed table's partition directories are deleted after the
        commit when ``delete_data``. Returns the dropped partitions."""
        if not ids:
            return []
        conn = tx.conn
        dropped = rows.load_partitions(conn, info.db, info.name, info.cat, list(ids))
        sd_ids = (
            conn.execute(sa.select(PARTITIONS.c.SD_ID).where(PARTITIONS.c.PART_ID.in_(ids))).scalars().all()
        )
        self._delete_partition_rows(conn, list(ids))
        rows.delete_sds(conn, sd_ids)
        table = self._event_table(conn, info)
        for p in dropped:
            self._event(tx, info, events.DROP_PARTITION, events.drop_partition_message(table, [p]))
        if delete_data and info.managed:
            locs = [p.sd.location for p in dropped if p.sd and p.sd.location]
            tx.after_commit.append(lambda: [storage.delete_dir(loc) for loc in locs])
        return dropped

    def drop_partition(self, db_name: str, tbl_name: str, part_vals: list[str], deleteData: bool) -> bool:  # noqa: N803
        """Drop a partition by values (its data too when the table is managed and ``deleteData``).

        Raises NoSuchObjectException when it does not exist.
        """
        with self.read() as conn:
            info = self._table_info(conn, db_name, tbl_name)
            name = info.part_name(part_vals)
        return bool(self._drop_by_names(db_name, tbl_name, [name], deleteData))

    def drop_partition_with_environment_context(
        self, db_name: str, tbl_name: str, part_vals: list[str], deleteData: bool, environment_context: Any
    ) -> bool:  # noqa: N803,E501
        """:meth:`drop_partition`."""
        return self.drop_partition(db_name, tbl_name, part_vals, deleteData)

    def drop_partition_by_name(self, db_name: str, tbl_name: str, part_name: str, deleteData: bool) -> bool:  # noqa: N803
        """Drop a partition by name ``k=v/...``."""
        return bool(self._drop_by_names(db_name, tbl_name, [part_name], deleteData))

    def drop_partition_by_name_with_environment_context(
        self, db_name: str, tbl_name: str, part_name: str, deleteData: bool, environment_context: Any
    ) -> bool:  # noqa: N803,E501
        """:meth:`drop_partition_by_name`."""
        return self.drop_partition_by_name(db_name, tbl_name, part_name, deleteData)

    def drop_partitions_req(self, req: Any) -> DropPartitionsResult:
        """DropPartitionsRequest by names (``parts.names``). Serialized Hive expressions
        (``parts.exprs``, Kryo-encoded Java objects) are refused with MetaException."""
        if req.parts is None or req.parts.names is None:
            raise MetaException(
                "drop_partitions_req: only partition names are supported, not serialized expressions"
            )
        db = db_ref(req.dbName, req.catName)
        dropped = self._drop_by_names(
            db,
            req.tblName,
            req.parts.names,
            req.deleteData if req.deleteData is not None else True,
            if_exists=bool(req.ifExists),
        )
        return DropPartitionsResult(partitions=dropped if req.needResult else None)
