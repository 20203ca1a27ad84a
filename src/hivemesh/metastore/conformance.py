"""HMS calls common clients make that answer as the real Hive 4 metastore does (checked against
Apache Hive 4.2.0 in ``tests/test_hive4_differential.py``): the session settings ``getMetaConf`` /
``setMetaConf``, ``get_partitions_req``, ``get_partition_values``, ``get_table_names_by_filter`` and
the partition marks ``markPartitionForEvent`` / ``isPartitionMarkedForEvent``.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from hive_metastore.ttypes import (
    InvalidPartitionException,
    MetaException,
    NoSuchObjectException,
    PartitionsResponse,
    PartitionValuesResponse,
    PartitionValuesRow,
    UnknownDBException,
    UnknownTableException,
)

from hivemesh.hive.names import db_ref, split_part_name
from hivemesh.metastore import partition_filter
from hivemesh.metastore.base import CatalogBase
from hivemesh.metastore.schema import DBS, PARTITION_EVENTS
from hivemesh.thrift.server import connection

__all__ = ["META_CONF_DEFAULTS", "ConformanceMixin", "is_meta_conf", "meta_conf"]

# Hive's "metaConf" settings: the metastore settings a client may read and change for its own
# connection (MetastoreConf's metaConfVars), with Hive 4's defaults as getMetaConf prints them.
META_CONF_DEFAULTS: dict[str, str] = {
    "hive.metastore.try.direct.sql": "true",
    "hive.metastore.try.direct.sql.ddl": "true",
    "hive.metastore.client.socket.timeout": "600s",
    "hive.metastore.partition.name.whitelist.pattern": "",
    "hive.metastore.client.capability.check": "true",
    "hive.metastore.disallow.incompatible.col.type.changes": "true",
    "hive.metastore.expression.proxy": "org.apache.hadoop.hive.ql.optimizer.ppr.PartitionExpressionForMetastore",
}
# each setting also answers under its metastore.* name (Hive 3+ MetastoreConf)
_META_ALIASES = {"metastore." + k.removeprefix("hive.metastore."): k for k in META_CONF_DEFAULTS}

# get_table_names_by_filter: the filter language of Hive's ObjectStore.listTableNamesByFilter
_PARAMS_PREFIX = "hive_filter_field_params__"
_OWNER = "hive_filter_field_owner__"
_LAST_ACCESS = "hive_filter_field_last_access__"


def _meta_key(key: str) -> str:
    name = _META_ALIASES.get(key, key)
    if name not in META_CONF_DEFAULTS:
        raise MetaException(f"Invalid configuration key {key}")
    return name


def is_meta_conf(key: str) -> bool:
    """True for a metaConf setting (:data:`META_CONF_DEFAULTS`, also under its ``metastore.*`` name)."""
    return _META_ALIASES.get(key, key) in META_CONF_DEFAULTS


def meta_conf(key: str) -> str:
    """The calling connection's value of a metaConf setting (its ``setMetaConf``, else the default).

    Outside a Thrift connection (in-process callers) this is the default. Raises MetaException for
    a key that is not a metaConf setting.
    """
    name = _meta_key(key)
    confs: dict[str, str] = connection().attrs.get("meta_conf", {})  # setMetaConf stores str values
    return confs.get(name, META_CONF_DEFAULTS[name])


class ConformanceMixin(CatalogBase):
    """getMetaConf/setMetaConf, get_partitions_req, get_partition_values, get_table_names_by_filter."""

    def getMetaConf(self, key: str) -> str:  # noqa: N802
        """The connection's value of a Hive metaConf setting (``setMetaConf``), else the default.

        Keys: :data:`META_CONF_DEFAULTS` (also under their ``metastore.*`` names). Raises
        MetaException("Invalid configuration key <key>") for any other key, as Hive does.
        """
        return meta_conf(key)

    def setMetaConf(self, key: str, value: str) -> None:  # noqa: N802
        """Set a metaConf setting for this connection only (Hive's session-scoped metastore conf).

        Raises MetaException("Invalid configuration key <key>") for a key that is not a metaConf
        setting. As in Hive the value is not checked. ``alter_table`` on this connection honours
        ``hive.metastore.disallow.incompatible.col.type.changes`` (``false`` allows any type change).
        """
        name = _meta_key(key)
        connection().attrs.setdefault("meta_conf", {})[name] = "" if value is None else str(value)

    def get_partitions_req(self, req: Any) -> PartitionsResponse:
        """PartitionsRequest -> PartitionsResponse: at most ``maxParts`` partitions (-1 or unset:
        all), ordered by name; a missing table gives no partitions (as Hive 4 answers)."""
        db = db_ref(req.dbName, req.catName)
        max_parts = -1 if req.maxParts is None else req.maxParts
        try:
            parts = self.get_partitions(db, req.tblName, max_parts)
        except Exception as e:
            if type(e).__name__ != "NoSuchObjectException":
                raise
            parts = []
        return PartitionsResponse(partitions=parts)

    def get_partition_values(self, request: Any) -> PartitionValuesResponse:
        """PartitionValuesRequest -> one row per partition with the values of ``partitionKeys``.

        Partitions are taken in name order, narrowed by ``filter`` (Hive's partition filter
        language) and cut at ``maxParts``; rows repeat unless ``applyDistinct`` (default true).
        A requested key the table does not have gives ``""`` (as Hive 4 answers). Raises
        MetaException for a missing table or a bad filter.
        """
        db = db_ref(request.dbName, request.catName)
        names = [k.name.lower() for k in request.partitionKeys or []]
        try:
            if request.filter:
                parts = self.get_partitions_by_filter(db, request.tblName, request.filter, -1)
                table_keys = [k.name.lower() for k in self.get_table(db, request.tblName).partitionKeys]
                specs = [dict(zip(table_keys, p.values, strict=False)) for p in parts]
            else:
                specs = [
                    {k.lower(): v for k, v in split_part_name(n)}
                    for n in self.get_partition_names(db, request.tblName, -1)
                ]
        except Exception as e:
            if type(e).__name__ != "NoSuchObjectException":
                raise
            raise MetaException(
                f"Error retrieving partition values: table {db}.{request.tblName} not found"
            ) from e
        rows: list[list[str]] = []
        seen: set[tuple[str, ...]] = set()
        distinct = request.applyDistinct is None or request.applyDistinct
        for spec in specs:
            row = [spec.get(k, "") for k in names]
            if distinct:
                if tuple(row) in seen:
                    continue
                seen.add(tuple(row))
            rows.append(row)
            if request.maxParts is not None and 0 <= request.maxParts <= len(rows):
                break
        return PartitionValuesResponse(partitionValues=[PartitionValuesRow(row=r) for r in rows])

    def get_table_names_by_filter(self, dbname: str, filter: str, max_tables: int) -> list[str]:  # noqa: A002
        """Names of the tables of ``dbname`` whose parameters, owner or last access time match a
        filter such as ``hive_filter_field_params__k = "v"``, ``hive_filter_field_owner__ like
        "a.*"`` or ``hive_filter_field_last_access__ > 0`` (and/or/not, Hive's partition filter
        syntax); sorted by name, at most ``max_tables`` (-1: all). Raises UnknownDBException for a
        missing database and MetaException for a filter that does not parse or names another field.
        """
        try:
            expr = partition_filter.parse_filter(filter, keep_case=True)
        except partition_filter.FilterError as e:
            raise MetaException(f"Error parsing partition filter: {e}") from e
        keys = partition_filter.referenced_keys(expr)
        bad = sorted(k for k in keys if not k.startswith(_PARAMS_PREFIX) and k not in (_OWNER, _LAST_ACCESS))
        if bad:
            raise MetaException(f"Error parsing partition filter: unsupported table filter key(s) {bad}")
        db = db_ref(dbname, None)
        cat, dbn = self.db_name(db)
        with self.read() as conn:
            if (
                conn.execute(sa.select(DBS.c.DB_ID).where(DBS.c.CTLG_NAME == cat, DBS.c.NAME == dbn)).first()
                is None
            ):
                raise UnknownDBException(f"Could not find database {cat}.{dbn}")
            tables = self.get_table_objects_by_name(db, self.get_all_tables(db))
        key_types = {k: ("bigint" if k == _LAST_ACCESS else "string") for k in keys}
        limit = -1 if max_tables is None else max_tables
        out: list[str] = []
        for t in sorted(tables, key=lambda t: t.tableName):
            if 0 <= limit <= len(out):
                break
            values = {_OWNER: t.owner or "", _LAST_ACCESS: str(t.lastAccessTime or 0)}
            params = t.parameters or {}
            values.update({k: params[k.removeprefix(_PARAMS_PREFIX)] for k in keys if k.startswith(_PARAMS_PREFIX)
                           and k.removeprefix(_PARAMS_PREFIX) in params})  # fmt: skip
            if any(k not in values for k in keys):
                continue  # a parameter the table does not have matches nothing (Hive's inner join)
            if partition_filter.evaluate(expr, values, key_types):
                out.append(t.tableName)
        return out

    # ---------------------------------------------------------------- partition events
    def _event_partition(
        self, conn: sa.Connection, db_name: str, tbl_name: str, part_vals: dict[str, str]
    ) -> tuple[str, str, str, str]:
        """(catalog, database, table, Hive's partition string) of a marked partition; raises
        UnknownTableException or InvalidPartitionException as Hive's ObjectStore does."""
        db = db_ref(db_name, None)
        try:
            row = self.table_row(conn, db, tbl_name)
        except NoSuchObjectException as e:
            raise UnknownTableException(f"Table: {tbl_name} is not found.") from e
        keys = self._key_names(conn, row.TBL_ID)
        spec = dict(part_vals or {})
        if len(keys) != len(spec):
            raise InvalidPartitionException(
                f"Number of partition columns in table: {len(keys)} doesn't match with number of "
                f"supplied partition values: {len(spec)}"
            )
        values = []
        for k in keys:
            if spec.get(k) is None:
                raise InvalidPartitionException(f"No value found for partition column: {k}")
            values.append(spec[k])
        return row.CTLG_NAME, row.DB_NAME, row.TBL_NAME, ",".join(values)

    def markPartitionForEvent(  # noqa: N802, N803
        self, db_name: str, tbl_name: str, part_vals: dict[str, str], eventType: int
    ) -> None:
        """Record that the partition ``part_vals`` (``{key: value}``, every partition key) of a
        table had ``eventType`` (PartitionEventType.LOAD_DONE) now. The partition need not exist.

        Raises UnknownTableException ("Table: <t> is not found.") for a missing table or database
        and InvalidPartitionException for a spec that does not name every partition key.
        """
        with self.write() as tx:
            cat, db, tbl, part = self._event_partition(tx.conn, db_name, tbl_name, part_vals)
            tx.conn.execute(
                PARTITION_EVENTS.insert().values(
                    CAT_NAME=cat, DB_NAME=db, TBL_NAME=tbl, PARTITION_NAME=part,
                    EVENT_TYPE=int(eventType), EVENT_TIME=int(time.time() * 1000),
                )
            )  # fmt: skip

    def isPartitionMarkedForEvent(  # noqa: N802, N803
        self, db_name: str, tbl_name: str, part_vals: dict[str, str], eventType: int
    ) -> bool:
        """Whether :meth:`markPartitionForEvent` recorded ``eventType`` for this partition (marks
        never expire: Hive's ``hive.metastore.event.expiry.duration`` default 0). Raises as
        :meth:`markPartitionForEvent`."""
        with self.read() as conn:
            cat, db, tbl, part = self._event_partition(conn, db_name, tbl_name, part_vals)
            hit = conn.execute(
                sa.select(PARTITION_EVENTS.c.PART_NAME_ID).where(
                    PARTITION_EVENTS.c.CAT_NAME == cat, PARTITION_EVENTS.c.DB_NAME == db,
                    PARTITION_EVENTS.c.TBL_NAME == tbl, PARTITION_EVENTS.c.PARTITION_NAME == part,
                    PARTITION_EVENTS.c.EVENT_TYPE == int(eventType),
                ).limit(1)
            ).first()  # fmt: skip
        return hit is not None
