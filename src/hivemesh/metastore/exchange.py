"""``exchange_partition`` and ``exchange_partitions`` (``ALTER TABLE dest EXCHANGE PARTITION (...)
WITH TABLE source``): partitions moved from one table to another of the same schema, with their
data, as Hive 4's ExchangePartitionsHandler does.

The partitions matching a (partial) specification leave the source table and join the destination
table at its default partition locations, in one database transaction (one ADD_PARTITION event
for the destination, one DROP_PARTITION per source partition). The directory of the specification
(``<source location>/<k=v/...>``) is moved to the same place under the destination's location last
in that transaction, and moved back when the commit fails.
"""

from __future__ import annotations

import sqlalchemy as sa
from hive_metastore.ttypes import MetaException, NoSuchObjectException, Partition, StorageDescriptor

from hivemesh import storage
from hivemesh.hive.names import make_part_name, parse_db_name
from hivemesh.metastore import rows
from hivemesh.metastore.partition_writes import TableInfo
from hivemesh.metastore.partitions import PartitionMixin
from hivemesh.metastore.schema import COLUMNS_V2, DATABASE_PARAMS, DBS, PARTITIONS

REPL_SOURCE_FOR = "repl.source.for"
"""Database parameter of a replication source: its tables' partitions stay in the database."""


def _java_map(spec: dict[str, str]) -> str:
    """A map as Java's ``Map.toString`` writes it: ``{ds=1, hr=2}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in spec.items()) + "}"


class ExchangeMixin(PartitionMixin):
    """HMS exchange-partition calls."""

    def exchange_partition(
        self,
        partitionSpecs: dict[str, str],  # noqa: N803 - Thrift names
        source_db: str,
        source_table_name: str,
        dest_db: str,
        dest_table_name: str,
    ) -> Partition:
        """:meth:`exchange_partitions`; returns an empty Partition, as Hive 4 does (not the
        partitions moved: those are what ``exchange_partitions`` returns)."""
        self.exchange_partitions(partitionSpecs, source_db, source_table_name, dest_db, dest_table_name)
        return Partition()

    def exchange_partitions(
        self,
        partitionSpecs: dict[str, str],  # noqa: N803 - Thrift names
        source_db: str,
        source_table_name: str,
        dest_db: str,
        dest_table_name: str,
    ) -> list[Partition]:
        """Move the partitions of ``source_db.source_table_name`` matching ``partitionSpecs``
        (partition key -> value; keys left out match any value) to ``dest_db.dest_table_name``;
        returns them as the destination now has them. MetaException (Hive's texts) for missing
        names or tables, tables in different catalogs or with different columns or partition
        keys, no matching partition, a partition the destination already has, a move out of a
        replication source database, or a directory move the storage refuses."""
        if partitionSpecs is None or None in (source_db, source_table_name, dest_db, dest_table_name):
            raise MetaException(
                "The DB and table name for the source and destination tables, and the partition specs must not be null."
            )
        if parse_db_name(source_db)[0] != parse_db_name(dest_db)[0]:
            raise MetaException("You cannot move a partition across catalogs")
        moved: tuple[str, str] | None = None
        try:
            with self.write() as tx:
                dest = self._exchange_table(tx.conn, dest_db, dest_table_name, "destination")
                source = self._exchange_table(tx.conn, source_db, source_table_name, "source")
                values = [partitionSpecs.get(k) or "" for k in source.key_names]
                ids = list(tx.conn.execute(self._ids(source, self._ps_cond(source, values))).scalars())
                if not ids:
                    raise MetaException(
                        f"No partition is found with the values {_java_map(partitionSpecs)} "
                        f"for the table {source.name}"
                    )
                self._check_same_schema(tx.conn, source, dest)
                parts = rows.load_partitions(tx.conn, source.db, source.name, source.cat, ids)
                dest_names = [make_part_name(dest.key_names, p.values) for p in parts]
                clash = tx.conn.execute(
                    sa.select(PARTITIONS.c.PART_NAME)
                    .where(PARTITIONS.c.TBL_ID == dest.id, PARTITIONS.c.PART_NAME.in_(dest_names))
                    .order_by(PARTITIONS.c.PART_NAME)
                ).first()
                if clash is not None:
                    raise MetaException(f"The partition {clash[0]} already exists in the table {dest.name}")
                if source.db != dest.db and (
                    self._repl_source(tx.conn, source) or self._repl_source(tx.conn, dest)
                ):
                    raise MetaException(
                        f"Exchange partition not allowed for {source.cat}.{source.db}.{source.name} Dest db : {dest.db}"
                    )
                moving = []
                for p, name in zip(parts, dest_names, strict=True):
                    copy = Partition(**p.__dict__)
                    copy.catName, copy.dbName, copy.tableName = dest.cat, dest.db, dest.name
                    copy.sd = StorageDescriptor(**(p.sd or StorageDescriptor()).__dict__)
                    copy.sd.location = storage.join_location(dest.location, name) if dest.location else None
                    moving.append(copy)
                # fast statistics listed inside this transaction: the directory move below is too
                added = self._add_partitions_tx(tx, dest, moving, False, None, None)
                self._drop_partition_ids(tx, source, ids, delete_data=False)
                present = [(k, v) for k, v in zip(source.key_names, values, strict=True) if v]
                spec_path = make_part_name([k for k, _ in present], [v for _, v in present])
                if source.location and dest.location:
                    src = storage.join_location(source.location, spec_path)
                    dst = storage.join_location(dest.location, spec_path)
                    try:
                        if storage.move_dir(src, dst):
                            moved = (src, dst)
                    except OSError as e:
                        raise MetaException(f"Unable to move {src} to {dst}: {e}") from e
            return added
        except Exception:
            if moved is not None:
                storage.move_dir(moved[1], moved[0])
            raise

    def _exchange_table(self, conn: sa.Connection, db: str, tbl: str, role: str) -> TableInfo:
        """The table of an exchange, locked; MetaException ("The source table cat.db.t not found")."""
        try:
            return self._table_info(conn, db, tbl, lock=True)
        except NoSuchObjectException as e:
            cat, name = parse_db_name(db)
            raise MetaException(f"The {role} table {cat}.{name}.{(tbl or '').lower()} not found") from e

    @staticmethod
    def _columns(conn: sa.Connection, info: TableInfo) -> list[tuple[str, str]]:
        if info.cd_id is None:
            return []
        return [
            (n, t)
            for n, t in conn.execute(
                sa.select(COLUMNS_V2.c.COLUMN_NAME, COLUMNS_V2.c.TYPE_NAME)
                .where(COLUMNS_V2.c.CD_ID == info.cd_id)
                .order_by(COLUMNS_V2.c.INTEGER_IDX)
            )
        ]

    def _check_same_schema(self, conn: sa.Connection, source: TableInfo, dest: TableInfo) -> None:
        """MetaException unless both tables have the same columns and partition keys (names and
        types, in order; comments may differ), as Hive's compareFieldColumns."""
        if self._columns(conn, source) != self._columns(conn, dest) or list(source.keys) != list(dest.keys):
            raise MetaException("The tables have different schemas. Their partitions cannot be exchanged.")

    @staticmethod
    def _repl_source(conn: sa.Connection, info: TableInfo) -> bool:
        """True when the table's database is a replication source (``repl.source.for`` set)."""
        value = conn.execute(
            sa.select(DATABASE_PARAMS.c.PARAM_VALUE)
            .select_from(DATABASE_PARAMS.join(DBS, DBS.c.DB_ID == DATABASE_PARAMS.c.DB_ID))
            .where(
                DBS.c.CTLG_NAME == info.cat,
                DBS.c.NAME == info.db,
                DATABASE_PARAMS.c.PARAM_KEY == REPL_SOURCE_FOR,
            )
        ).scalar()
        return bool((value or "").strip())
