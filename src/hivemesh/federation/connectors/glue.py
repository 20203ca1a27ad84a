"""AWS Glue Data Catalog seen through the Hive metastore (HMS) Thrift interface, read side only.

:class:`GlueCatalog` has the read methods of ``ThriftHiveMetastore.Iface`` (same names, same
positional arguments) and answers with ``hive_metastore.ttypes`` objects, so the federation proxy can
put a Glue catalog where it would put a Thrift metastore. Writes are not implemented: the proxy
treats Glue members and remotes as read-only.

Conversion (Glue API shapes -> Thrift):

* times (``CreateTime``, ``LastAccessTime``, ``CreationTime``) become whole epoch seconds (int);
* absent collections become empty ones (``parameters`` ``{}``, ``sd.cols`` ``[]``, ...), absent
  flags ``False`` and an absent bucket count ``-1``, because Hive and Spark clients dereference
  them without null checks; a table or partition without a ``StorageDescriptor`` gets an empty one
  (a partition: a copy of its table's, without the location);
* a table without ``TableType`` is ``VIRTUAL_VIEW`` when it has a view text, else
  ``EXTERNAL_TABLE``; a table ``Description`` becomes the ``comment`` parameter unless one is set;
* a column without ``Type`` is reported as ``string``;
* skewed-value tuples encoded as ``<len>$<value>...`` strings are decoded; the skewed-value location
  map is left empty: its keys are lists, which the Python Thrift bindings cannot decode (TypeError),
  so a Python client could not read the table back;
* ``catName`` is ``"hive"`` on every returned object.

Names are lower-cased (Glue and Hive both store them so) and a Hive 3 ``@cat#db`` prefix is accepted
and ignored: the Glue catalog is the ``account_id`` given to the constructor. Every listing follows
``NextToken`` to the end. Partition lists are read completely, then ordered by partition name as the
HMS orders them, then cut to ``max_parts`` (negative = all).

Errors: Glue ``EntityNotFoundException`` becomes ``NoSuchObjectException`` (or the exception the
method declares, e.g. ``UnknownTableException`` for ``get_fields``) with Hive's message
(``"sales.orders table not found"``); any other Glue error, and failures to reach the endpoint,
become ``MetaException("glue catalog 'name' (endpoint): GetTable failed: <AWS code>: <message>")``.
Only exceptions the Thrift method declares are raised, except by ``get_table_objects_by_name``,
which Hive 4's IDL declares without any: it raises what Hive 2.3 declares for it
(``UnknownDBException`` for a missing database, ``MetaException``).

Glue listings are read with the largest page each call allows (``page_size`` lowers it):
``GetTables``/``GetDatabases`` 100, ``GetPartitions``/``BatchGetPartition`` 1000. Partition names
are read with ``ExcludeColumnSchema``, table names with ``AttributesToGet=["NAME"]``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    GetAllFunctionsResponse,
    GetTableResult,
    GetTablesResult,
    MetaException,
    NoSuchObjectException,
    Order,
    Partition,
    PrincipalType,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    Table,
    TableMeta,
    UnknownDBException,
    UnknownTableException,
)

from hivemesh.hive.names import (
    DEFAULT_CATALOG,
    escape_path_name,
    matches_pattern,
    parse_db_name,
    split_part_name,
)

log = logging.getLogger(__name__)

__all__ = ["GlueCatalog", "glue_client", "hive_filter_to_glue_expression"]

# Largest page each Glue call accepts (MaxResults / entries per request).
_MAX_PAGE = {"GetDatabases": 100, "GetTables": 100, "GetPartitions": 1000, "BatchGetPartition": 1000}
_UNPROCESSED_ROUNDS = 6  # BatchGetPartition retries of UnprocessedKeys before giving up
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _EntityNotFound(Exception):
    """Glue's EntityNotFoundException, before a method turns it into its HMS exception."""


def glue_client(
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    connect_timeout_s: float = 2,
    read_timeout_s: float = 60,
    max_attempts: int = 2,
    max_pool_connections: int = 20,
) -> Any:
    """A boto3 ``glue`` client with bounded connect/read timeouts (seconds) and attempts.

    ``max_attempts`` counts the first try (botocore "standard" retry mode). Credentials come from
    boto3's usual chain (environment, profile, instance role). Raises nothing until first used.
    """
    # boto3/botocore are heavy to import: only a proxy with a Glue member or remote loads them
    import boto3
    from botocore.config import Config

    config = Config(
        region_name=region,
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        retries={"max_attempts": max(1, int(max_attempts)), "mode": "standard"},
        max_pool_connections=max_pool_connections,
    )
    return boto3.session.Session().client("glue", endpoint_url=endpoint_url, config=config)


# ---------------------------------------------------------------- conversion helpers
def _epoch(value: Any) -> int:
    """A Glue timestamp (datetime, or seconds) as whole epoch seconds; 0 when absent."""
    if value is None:
        return 0
    if isinstance(value, datetime):
        return int(value.timestamp())
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _str_dict(value: Any) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in (value or {}).items()}


def _decode_skewed_value(text: str, width: int) -> list[str]:
    """``"4$2024" "1$x"`` style ``<len>$<value>`` concatenations -> ``["2024", "x"]``.

    A string that is not such an encoding of exactly ``width`` values is one value.
    """
    out, i = [], 0
    while i < len(text):
        m = re.match(r"(\d+)\$", text[i:])
        if not m:
            return [text]
        n, start = int(m.group(1)), i + m.end()
        if start + n > len(text):
            return [text]
        out.append(text[start : start + n])
        i = start + n
    return out if out and len(out) == width else [text]


def _columns(cols: Any) -> list[FieldSchema]:
    return [
        FieldSchema(
            name=(c.get("Name") or "").lower(), type=c.get("Type") or "string", comment=c.get("Comment")
        )
        for c in cols or []
    ]


def _skewed(info: Any) -> SkewedInfo:
    info = info or {}
    names = list(info.get("SkewedColumnNames") or [])
    values = [_decode_skewed_value(str(v), len(names)) for v in info.get("SkewedColumnValues") or []]
    return SkewedInfo(skewedColNames=names, skewedColValues=values, skewedColValueLocationMaps={})


def _sd(sd: Any, keep_location: bool = True) -> StorageDescriptor:
    """A Glue StorageDescriptor (dict, may be None) as a complete Thrift StorageDescriptor."""
    sd = sd or {}
    serde = sd.get("SerdeInfo") or {}
    buckets = sd.get("NumberOfBuckets")
    return StorageDescriptor(
        cols=_columns(sd.get("Columns")),
        location=sd.get("Location") if keep_location else None,
        inputFormat=sd.get("InputFormat"),
        outputFormat=sd.get("OutputFormat"),
        compressed=bool(sd.get("Compressed", False)),
        numBuckets=int(buckets) if buckets is not None else -1,
        serdeInfo=SerDeInfo(
            name=serde.get("Name"),
            serializationLib=serde.get("SerializationLibrary"),
            parameters=_str_dict(serde.get("Parameters")),
        ),
        bucketCols=[str(c).lower() for c in sd.get("BucketColumns") or []],
        sortCols=[
            Order(col=(o.get("Column") or "").lower(), order=int(o.get("SortOrder", 1)))
            for o in sd.get("SortColumns") or []
        ],
        parameters=_str_dict(sd.get("Parameters")),
        skewedInfo=_skewed(sd.get("SkewedInfo")),
        storedAsSubDirectories=bool(sd.get("StoredAsSubDirectories", False)),
    )


def _table_type(t: dict[str, Any]) -> str:
    if t.get("TableType"):
        return str(t["TableType"])
    return "VIRTUAL_VIEW" if t.get("ViewOriginalText") else "EXTERNAL_TABLE"


def _table_comment(t: dict[str, Any]) -> str | None:
    return (t.get("Parameters") or {}).get("comment") or t.get("Description")


def _key_names(t: dict[str, Any]) -> list[str]:
    return [(k.get("Name") or "").lower() for k in t.get("PartitionKeys") or []]


def _part_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """Hive's escaped ``k1=v1/k2=v2`` (extra or missing values are tolerated, not validated)."""
    return "/".join(
        f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in zip(keys, values, strict=False)
    )


def hive_filter_to_glue_expression(text: str | None) -> str:
    """Hive's partition filter -> Glue's ``Expression`` (the same language, small spelling changes).

    Double-quoted literals become single-quoted (a ``'`` inside is doubled, as Glue escapes it),
    ``!=`` becomes ``<>``, ``==`` becomes ``=``, a bare date ``2024-01-31`` (what Spark sends for
    DATE keys) is quoted, and backquotes around a plain key name are dropped. Everything else is
    passed unchanged: Glue parses and evaluates the expression (rejecting what it does not support
    with InvalidInputException). ``None`` or blank -> ``""`` (no filter).
    """
    if not text or not text.strip():
        return ""
    token = re.compile(
        r"""'(?P<sq>(?:[^'\\]|\\.)*)'|"(?P<dq>(?:[^"\\]|\\.)*)"|`(?P<bq>[^`]*)`"""
        r"""|(?P<ne>!=)|(?P<eq>==)|(?P<date>(?<![\w.-])\d{4}-\d{2}-\d{2}(?![\w.-]))"""
    )
    out: list[str] = []
    pos = 0
    for m in token.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        if m.group("sq") is not None:
            out.append("'" + m.group("sq").replace("'", "''") + "'")
        elif m.group("dq") is not None:
            out.append("'" + m.group("dq").replace("'", "''") + "'")
        elif m.group("bq") is not None:
            name = m.group("bq")
            out.append(name if _SIMPLE_KEY.match(name) else m.group(0))
        elif m.group("ne"):
            out.append("<>")
        elif m.group("eq"):
            out.append("=")
        else:
            out.append(f"'{m.group('date')}'")
    out.append(text[pos:])
    return "".join(out).strip()


class GlueCatalog:
    """An AWS Glue Data Catalog with the read methods of ``ThriftHiveMetastore.Iface``.

    ``region``: AWS region; ``endpoint_url``: Glue endpoint (None = the region's); ``account_id``:
    sent as ``CatalogId`` on every request (None = the caller's account); ``client``: a ready boto3
    ``glue`` client (else one is made on first use with the timeouts below); ``name``: the member
    name used in error messages; ``connect_timeout_s``/``read_timeout_s``: seconds;
    ``max_attempts``: tries per request including the first; ``page_size``: MaxResults of list calls
    and entries per BatchGetPartition (None = each call's maximum, larger values are capped);
    ``default_warehouse``: when given, a database without ``LocationUri`` is reported at
    ``<default_warehouse>/<db>.db`` (Spark cannot open a database without a location).

    Thread-safe: boto3 clients are, and the lazily made client is created under a lock.
    """

    def __init__(
        self,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        account_id: str | None = None,
        client: Any | None = None,
        name: str = "glue",
        *,
        connect_timeout_s: float = 2,
        read_timeout_s: float = 60,
        max_attempts: int = 2,
        page_size: int | None = None,
        default_warehouse: str | None = None,
    ):
        self.region = region
        self.endpoint_url = endpoint_url
        self.account_id = account_id
        self.name = name
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_attempts = max_attempts
        self.page_size = page_size
        self.default_warehouse = default_warehouse.rstrip("/") if default_warehouse else None
        self._client = client
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GlueCatalog(name={self.name!r}, region={self.region!r}, endpoint_url={self.endpoint_url!r})"

    # ---------------------------------------------------------------- plumbing
    @property
    def client(self) -> Any:
        """The boto3 glue client (made on first use)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = glue_client(
                        self.region,
                        self.endpoint_url,
                        self.connect_timeout_s,
                        self.read_timeout_s,
                        self.max_attempts,
                    )
        return self._client

    def close(self) -> None:
        """Release the client's HTTP connections (a later call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            client.close()

    def _where(self) -> str:
        return self.endpoint_url or f"region {self.region}"

    @property
    def error_label(self) -> str:
        """``glue catalog 'name' (endpoint)``: how the MetaExceptions of failed Glue calls begin."""
        return f"glue catalog {self.name!r} ({self._where()})"

    def _call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """One Glue call by its API name (``GetTable``); raises _EntityNotFound or MetaException."""
        from botocore.exceptions import BotoCoreError, ClientError  # heavy: loaded with the client (above)

        if self.account_id:
            kwargs["CatalogId"] = self.account_id
        method = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
        try:
            return cast(dict[str, Any], getattr(self.client, method)(**kwargs))  # boto3: untyped JSON dicts
        except ClientError as e:
            err = e.response.get("Error") or {}
            code, message = err.get("Code") or "Unknown", err.get("Message") or str(e)
            if code == "EntityNotFoundException":
                raise _EntityNotFound(message) from e
            raise MetaException(f"{self.error_label}: {op} failed: {code}: {message}") from e
        except BotoCoreError as e:
            raise MetaException(f"{self.error_label}: {op} failed: {type(e).__name__}: {e}") from e

    def _page(self, op: str) -> int:
        cap = _MAX_PAGE[op]
        return cap if self.page_size is None else max(1, min(int(self.page_size), cap))

    def _pages(self, op: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item under ``key`` of a paginated Glue list call (follows NextToken)."""
        kwargs["MaxResults"] = self._page(op)
        token: str | None = None
        seen: set[str] = set()
        while True:
            resp = self._call(op, **({**kwargs, "NextToken": token} if token else kwargs))
            yield from resp.get(key) or []
            token = resp.get("NextToken")
            if not token:
                return
            if token in seen:
                raise MetaException(f"{self.error_label}: {op} returned the same NextToken twice")
            seen.add(token)

    @staticmethod
    def _db(name: str | None) -> str:
        """The Glue database of a (possibly ``@cat#db``) Hive database name."""
        _, db = parse_db_name(name)
        return db or ""

    # ---------------------------------------------------------------- conversion
    def _database(self, d: dict[str, Any]) -> Database:
        name = d.get("Name") or ""
        location = d.get("LocationUri")
        if not location and self.default_warehouse:
            location = f"{self.default_warehouse}/{name}.db"
        owner = d.get("OwnerName")  # not in Glue's API today; kept if an endpoint sends it
        return Database(
            name=name,
            description=d.get("Description"),
            locationUri=location,
            parameters=_str_dict(d.get("Parameters")),
            ownerName=owner,
            ownerType=PrincipalType.USER if owner else None,
            catalogName=DEFAULT_CATALOG,
            createTime=_epoch(d.get("CreateTime")) if d.get("CreateTime") is not None else None,
        )

    def _table(self, t: dict[str, Any]) -> Table:
        params = _str_dict(t.get("Parameters"))
        if t.get("Description") and "comment" not in params:
            params["comment"] = str(t["Description"])
        return Table(
            tableName=(t.get("Name") or "").lower(),
            dbName=(t.get("DatabaseName") or "").lower(),
            owner=t.get("Owner"),
            createTime=_epoch(t.get("CreateTime")),
            lastAccessTime=_epoch(t.get("LastAccessTime")),
            retention=int(t.get("Retention") or 0),
            sd=_sd(t.get("StorageDescriptor")),
            partitionKeys=_columns(t.get("PartitionKeys")),
            parameters=params,
            viewOriginalText=t.get("ViewOriginalText"),
            viewExpandedText=t.get("ViewExpandedText"),
            tableType=_table_type(t),
            temporary=False,
            rewriteEnabled=False,
            catName=DEFAULT_CATALOG,
        )

    def _partition(self, p: dict[str, Any], table: dict[str, Any]) -> Partition:
        sd = p.get("StorageDescriptor")
        return Partition(
            values=[str(v) for v in p.get("Values") or []],
            dbName=(p.get("DatabaseName") or table.get("DatabaseName") or "").lower(),
            tableName=(p.get("TableName") or table.get("Name") or "").lower(),
            createTime=_epoch(p.get("CreationTime")),
            lastAccessTime=_epoch(p.get("LastAccessTime")),
            sd=_sd(sd) if sd else _sd(table.get("StorageDescriptor"), keep_location=False),
            parameters=_str_dict(p.get("Parameters")),
            catName=DEFAULT_CATALOG,
        )

    # ---------------------------------------------------------------- lookups
    def _glue_table(self, db: str, tbl: str, exc: type[Exception] = NoSuchObjectException) -> dict[str, Any]:
        """The Glue table dict; raises ``exc("db.t table not found")``."""
        db, tbl = self._db(db), (tbl or "").lower()
        try:
            return cast(dict[str, Any], self._call("GetTable", DatabaseName=db, Name=tbl)["Table"])
        except _EntityNotFound as e:
            raise exc(f"{db}.{tbl} table not found") from e

    def _database_exists(self, db: str) -> bool:
        try:
            self._call("GetDatabase", Name=db)
            return True
        except _EntityNotFound:
            return False

    def _glue_tables(self, db: str) -> list[dict[str, Any]]:
        """Every Glue table dict of a database; [] when the database is missing."""
        try:
            return list(self._pages("GetTables", "TableList", DatabaseName=self._db(db)))
        except _EntityNotFound:
            return []

    def _table_names(self, db: str) -> list[str]:
        try:
            found = self._pages("GetTables", "TableList", DatabaseName=self._db(db), AttributesToGet=["NAME"])
            return sorted((t.get("Name") or "").lower() for t in found)
        except _EntityNotFound:
            return []

    def _glue_partitions(
        self, table: dict[str, Any], expression: str = "", exclude_columns: bool = False
    ) -> list[dict[str, Any]]:
        db, tbl = (table.get("DatabaseName") or "").lower(), (table.get("Name") or "").lower()
        kwargs: dict[str, Any] = {"DatabaseName": db, "TableName": tbl}
        if expression:
            kwargs["Expression"] = expression
        if exclude_columns:
            kwargs["ExcludeColumnSchema"] = True
        try:
            return list(self._pages("GetPartitions", "Partitions", **kwargs))
        except _EntityNotFound as e:  # dropped between GetTable and GetPartitions
            raise NoSuchObjectException(f"{db}.{tbl} table not found") from e

    @staticmethod
    def _ordered(
        table: dict[str, Any], parts: Iterable[dict[str, Any]], max_parts: int | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """(name, partition) pairs ordered by Hive partition name, at most ``max_parts`` (<0 = all)."""
        keys = _key_names(table)
        named = sorted(
            ((_part_name(keys, [str(v) for v in p.get("Values") or []]), p) for p in parts), key=_first
        )
        if max_parts is not None and max_parts >= 0:
            named = named[:max_parts]
        return named

    def _spec_values(self, table: dict[str, Any], part_name: str) -> list[str]:
        """Partition values, in key order, of a name ``k1=v1/k2=v2``; MetaException when it does
        not name every key exactly once."""
        keys = _key_names(table)
        try:
            spec = {k.lower(): v for k, v in split_part_name(part_name or "")}
        except ValueError as e:
            raise MetaException(str(e)) from e
        if set(spec) != set(keys) or not keys:
            raise MetaException(f"Invalid partition name {part_name!r} for keys {keys}")
        return [spec[k] for k in keys]

    # ---------------------------------------------------------------- databases
    def get_all_databases(self) -> list[str]:
        """Every database name of the catalog, sorted. Raises MetaException."""
        return sorted((d.get("Name") or "").lower() for d in self._pages("GetDatabases", "DatabaseList"))

    def get_databases(self, pattern: str) -> list[str]:
        """Database names matching a Hive pattern (``*`` wildcard, ``|`` alternatives,
        case-insensitive), sorted. Raises MetaException."""
        return [d for d in self.get_all_databases() if matches_pattern(d, pattern)]

    def get_database(self, name: str) -> Database:
        """Raises NoSuchObjectException ("There is no database named x"), MetaException."""
        db = self._db(name)
        try:
            return self._database(self._call("GetDatabase", Name=db)["Database"])
        except _EntityNotFound as e:
            raise NoSuchObjectException(f"There is no database named {db}") from e

    def get_database_req(self, request: Any) -> Database:
        """GetDatabaseRequest form of :meth:`get_database` (``catalogName`` is ignored)."""
        return self.get_database(request.name)

    # ---------------------------------------------------------------- tables
    def get_all_tables(self, db_name: str) -> list[str]:
        """Every table and view name of a database, sorted; [] for a missing database."""
        return self._table_names(db_name)

    def get_tables(self, db_name: str, pattern: str) -> list[str]:
        """Table and view names matching a Hive pattern, sorted; [] for a missing database."""
        return [t for t in self._table_names(db_name) if matches_pattern(t, pattern)]

    def get_tables_by_type(self, db_name: str, pattern: str, tableType: str) -> list[str]:
        """Names of tables of type ``tableType`` (e.g. ``VIRTUAL_VIEW``; None/"" = any) matching
        ``pattern``, sorted; [] for a missing database."""
        return sorted(
            (t.get("Name") or "").lower()
            for t in self._glue_tables(db_name)
            if matches_pattern((t.get("Name") or "").lower(), pattern)
            and (not tableType or _table_type(t) == tableType)
        )

    def get_table(self, dbname: str, tbl_name: str) -> Table:
        """Raises NoSuchObjectException ("db.t table not found"), MetaException."""
        return self._table(self._glue_table(dbname, tbl_name))

    def get_table_req(self, req: Any) -> GetTableResult:
        """GetTableRequest form of :meth:`get_table`: ``GetTableResult(table=...)``."""
        return GetTableResult(table=self.get_table(req.dbName, req.tblName))

    def get_table_objects_by_name(self, dbname: str, tbl_names: list[str]) -> list[Table]:
        """The existing tables among ``tbl_names``, in the order asked (missing names are left out,
        duplicates once). Raises UnknownDBException for a missing database, MetaException."""
        db = self._db(dbname)
        wanted = list(dict.fromkeys((n or "").lower() for n in tbl_names or []))
        if not wanted:
            if not self._database_exists(db):
                raise UnknownDBException(f"Could not find database {db}")
            return []
        found: dict[str, dict[str, Any]] = {}
        if len(wanted) <= 10:  # one GetTable each; Glue has no batch get of tables
            missing = False
            for n in wanted:
                try:
                    found[n] = self._call("GetTable", DatabaseName=db, Name=n)["Table"]
                except _EntityNotFound:
                    missing = True
            if missing and not found and not self._database_exists(db):
                raise UnknownDBException(f"Could not find database {db}")
        else:  # many names: one listing is cheaper
            try:
                for t in self._pages("GetTables", "TableList", DatabaseName=db):
                    found[(t.get("Name") or "").lower()] = t
            except _EntityNotFound as e:
                raise UnknownDBException(f"Could not find database {db}") from e
        return [self._table(found[n]) for n in wanted if n in found]

    def get_table_objects_by_name_req(self, req: Any) -> GetTablesResult:
        """GetTablesRequest form: the named tables, or without names every table matching
        ``tablesPattern`` (None = all). Raises UnknownDBException, MetaException."""
        if req.tblNames is not None:
            return GetTablesResult(tables=self.get_table_objects_by_name(req.dbName, req.tblNames))
        db = self._db(req.dbName)
        try:
            found = list(self._pages("GetTables", "TableList", DatabaseName=db))
        except _EntityNotFound as e:
            raise UnknownDBException(f"Could not find database {db}") from e
        tables = [self._table(t) for t in found]
        return GetTablesResult(
            tables=sorted(
                (t for t in tables if matches_pattern(t.tableName, req.tablesPattern)),
                key=lambda t: t.tableName,
            )
        )

    def get_table_meta(self, db_patterns: str, tbl_patterns: str, tbl_types: list[str]) -> list[TableMeta]:
        """TableMeta (db, name, type, comment) of the tables whose database matches ``db_patterns``,
        name ``tbl_patterns`` and type one of ``tbl_types`` (empty/None = any); ordered by database
        then name. Raises MetaException."""
        _, db_pat = parse_db_name(db_patterns) if db_patterns else (DEFAULT_CATALOG, None)
        out = []
        for db in self.get_databases(db_pat or "*"):
            for t in self._glue_tables(db):
                name, ttype = (t.get("Name") or "").lower(), _table_type(t)
                if matches_pattern(name, tbl_patterns) and (not tbl_types or ttype in tbl_types):
                    out.append(
                        TableMeta(
                            dbName=db,
                            tableName=name,
                            tableType=ttype,
                            comments=_table_comment(t),
                            catName=DEFAULT_CATALOG,
                        )
                    )
        return sorted(out, key=lambda m: (m.dbName, m.tableName))

    def get_fields(self, db_name: str, table_name: str) -> list[FieldSchema]:
        """The table's data columns (not its partition keys). Raises UnknownTableException
        ("db.t table not found"), MetaException."""
        return _columns(
            (self._glue_table(db_name, table_name, UnknownTableException).get("StorageDescriptor") or {}).get(
                "Columns"
            )
        )

    def get_schema(self, db_name: str, table_name: str) -> list[FieldSchema]:
        """Data columns followed by partition keys. Raises UnknownTableException, MetaException."""
        t = self._glue_table(db_name, table_name, UnknownTableException)
        return _columns((t.get("StorageDescriptor") or {}).get("Columns")) + _columns(t.get("PartitionKeys"))

    # ---------------------------------------------------------------- partitions
    def get_partitions(self, db_name: str, tbl_name: str, max_parts: int) -> list[Partition]:
        """The table's partitions ordered by name, at most ``max_parts`` (negative = all).
        Raises NoSuchObjectException (missing table), MetaException."""
        t = self._glue_table(db_name, tbl_name)
        return [self._partition(p, t) for _, p in self._ordered(t, self._glue_partitions(t), max_parts)]

    def get_partition_names(self, db_name: str, tbl_name: str, max_parts: int) -> list[str]:
        """Escaped names ``k1=v1/k2=v2``, ordered, at most ``max_parts`` (negative = all).
        Raises NoSuchObjectException (missing table), MetaException."""
        t = self._glue_table(db_name, tbl_name)
        return [n for n, _ in self._ordered(t, self._glue_partitions(t, exclude_columns=True), max_parts)]

    def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Partition:
        """The partition with these values (in key order). Raises NoSuchObjectException (missing
        table: "db.t table not found"; missing partition: "partition values=[...]"), MetaException
        (wrong number of values)."""
        db, tbl, values = self._db(db_name), (tbl_name or "").lower(), [str(v) for v in part_vals or []]
        try:
            p = self._call("GetPartition", DatabaseName=db, TableName=tbl, PartitionValues=values)[
                "Partition"
            ]
        except _EntityNotFound as e:
            keys = _key_names(self._glue_table(db, tbl))  # says whether the table or the partition is missing
            if len(values) != len(keys):
                raise MetaException(f"Invalid partition key & values; keys {keys}, values {values}") from e
            raise NoSuchObjectException(f"partition values={values}") from e
        # The table is only read when the partition has no storage descriptor of its own.
        t = self._glue_table(db, tbl) if not p.get("StorageDescriptor") else {"DatabaseName": db, "Name": tbl}
        return self._partition(p, t)

    def get_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Partition:
        """A partition by its name ``k1=v1/k2=v2``. Raises NoSuchObjectException, MetaException
        (a name that does not give every key once)."""
        t = self._glue_table(db_name, tbl_name)
        values = self._spec_values(t, part_name)
        db, tbl = (t.get("DatabaseName") or "").lower(), (t.get("Name") or "").lower()
        try:
            p = self._call("GetPartition", DatabaseName=db, TableName=tbl, PartitionValues=values)[
                "Partition"
            ]
        except _EntityNotFound as e:
            raise NoSuchObjectException(f"partition {part_name} of {db}.{tbl} not found") from e
        return self._partition(p, t)

    def get_partitions_by_names(self, db_name: str, tbl_name: str, names: list[str]) -> list[Partition]:
        """The existing partitions among ``names`` (missing ones are left out), ordered by name.
        Uses BatchGetPartition, resubmitting UnprocessedKeys. Raises NoSuchObjectException (missing
        table), MetaException (bad name, or keys Glue keeps leaving unprocessed)."""
        t = self._glue_table(db_name, tbl_name)
        db, tbl = (t.get("DatabaseName") or "").lower(), (t.get("Name") or "").lower()
        todo = list(dict.fromkeys(tuple(self._spec_values(t, n)) for n in names or []))
        found: list[dict[str, Any]] = []
        size = self._page("BatchGetPartition")
        for i in range(0, len(todo), size):
            batch = [{"Values": list(v)} for v in todo[i : i + size]]
            for attempt in range(_UNPROCESSED_ROUNDS + 1):
                try:
                    resp = self._call(
                        "BatchGetPartition", DatabaseName=db, TableName=tbl, PartitionsToGet=batch
                    )
                except _EntityNotFound as e:
                    raise NoSuchObjectException(f"{db}.{tbl} table not found") from e
                found += resp.get("Partitions") or []
                batch = list(resp.get("UnprocessedKeys") or [])
                if not batch:
                    break
                if attempt == _UNPROCESSED_ROUNDS:
                    raise MetaException(
                        f"{self.error_label}: BatchGetPartition left {len(batch)} partition(s) of "
                        f"{db}.{tbl} unprocessed after {_UNPROCESSED_ROUNDS} retries"
                    )
                time.sleep(min(0.05 * 2**attempt, 1.0))
        unique = {tuple(p.get("Values") or []): p for p in found}
        return [self._partition(p, t) for _, p in self._ordered(t, unique.values(), -1)]

    def get_partitions_by_filter(
        self, db_name: str, tbl_name: str, filter: str, max_parts: int
    ) -> list[Partition]:
        """Partitions matching a Hive partition filter (``ds = "2024-01-01" and hr > 5``), ordered by
        name, at most ``max_parts`` (negative = all); an empty filter matches all.

        Glue evaluates the filter: it is sent as GetPartitions ``Expression`` after the spelling
        changes of :func:`hive_filter_to_glue_expression`. Glue supports string, date, timestamp and
        integral/decimal keys in it; what it rejects raises MetaException naming InvalidInputException.
        Raises NoSuchObjectException (missing table).
        """
        t = self._glue_table(db_name, tbl_name)
        parts = self._glue_partitions(t, hive_filter_to_glue_expression(filter))
        return [self._partition(p, t) for _, p in self._ordered(t, parts, max_parts)]

    def get_partitions_ps(
        self, db_name: str, tbl_name: str, part_vals: list[str], max_parts: int
    ) -> list[Partition]:
        """Partitions matching a partial specification: values for the leading keys, ``""`` = any
        value; ordered by name, at most ``max_parts`` (negative = all). Equality on ``string`` keys
        is sent to Glue as an Expression; the whole specification is checked here. Raises
        NoSuchObjectException (missing table), MetaException (more values than keys)."""
        t = self._glue_table(db_name, tbl_name)
        keys = t.get("PartitionKeys") or []
        spec = [("" if v is None else str(v)) for v in part_vals or []]
        if len(spec) > len(keys):
            raise MetaException(f"Incorrect number of partition values: {spec} for keys {_key_names(t)}")
        pushed = [
            f"{k['Name']} = '{v}'"
            for k, v in zip(keys, spec, strict=False)
            if v
            and (k.get("Type") or "").lower() == "string"
            and _SIMPLE_KEY.match(k.get("Name") or "")
            and "'" not in v
            and "\\" not in v
        ]

        def match(p: dict[str, Any]) -> bool:
            values = [str(v) for v in p.get("Values") or []]
            return all(not want or (i < len(values) and values[i] == want) for i, want in enumerate(spec))

        parts = [p for p in self._glue_partitions(t, " AND ".join(pushed)) if match(p)]
        return [self._partition(p, t) for _, p in self._ordered(t, parts, max_parts)]

    # ---------------------------------------------------------------- functions, config, health
    def get_all_functions(self) -> GetAllFunctionsResponse:
        """Glue has no Hive functions: an empty GetAllFunctionsResponse."""
        return GetAllFunctionsResponse(functions=[])

    def get_functions(self, dbName: str, pattern: str) -> list[str]:
        """Glue has no Hive functions: []."""
        return []

    def get_config_value(self, name: str, defaultValue: str) -> str:
        """Glue has no metastore configuration: always ``defaultValue``."""
        return defaultValue

    def ping(self) -> None:
        """Cheap health check (GetDatabases, MaxResults=1). Raises MetaException when Glue does not
        answer or refuses (e.g. AccessDeniedException)."""
        try:
            self._call("GetDatabases", MaxResults=1)
        except _EntityNotFound as e:  # not expected from GetDatabases; still a failure
            raise MetaException(f"{self.error_label}: GetDatabases failed: {e}") from e


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]
