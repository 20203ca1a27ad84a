"""Live Hive commands: which HMS writes are agreed through the log, and how a write becomes a
command every zone can apply the same way.

A command is a JSON object (stored by :class:`hivemesh.live.log.CommandLog`)::

    {"v": 1, "method": "add_partitions", "args": "<base64>", "rule": "sales", "zone": "onprem",
     "user": "alice", "time_ms": 1764288000123, "data": ["sales.db/orders/ds=2026-11-27"]}

``args`` is the method's ``<method>_args`` Thrift struct in the binary protocol (TBinaryProtocol),
base64-encoded, with everything that would differ per zone pinned by the proposer:

- **locations** (``location``, ``locationUri``, ``managedLocationUri``, ``rootPath`` of any
  struct: storage descriptors, databases, partition specs, create-database requests; the
  directories of skewed values) become
  zone-neutral ``hivemesh-live:<relpath>`` paths relative to the rule's ``paths`` root of the
  proposing zone; a location outside that root is refused (another zone could not map it, and
  must never be pointed at the proposing zone's files). Missing locations are pinned: a new
  database at ``<name>.db``, a new table (not a view) at ``<database's relpath>/<table>``.
  Partitions without a location stay so (each zone derives them from its table's location).
- **times**: ``createTime`` of new databases, tables, partitions and functions (when 0 or unset)
  and ``transient_lastDdlTime`` of tables and partitions (when unset or 0) become the proposer's
  clock, in seconds.
- **owner**: an unset owner of a new database, table or function becomes the calling user.

Every zone's applier decodes the args, maps each ``hivemesh-live:`` path through its own zone's
root (:func:`for_zone`) and calls the method on its own metastore. Ids (table, storage descriptor,
event ids) never travel.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hive_metastore.ttypes import Database, Function, MetaException, Partition, Table
from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport

from hivemesh.federation.rewrite import Collector, method_plan, rename_args, split_catalog
from hivemesh.hive.hms_methods import METHODS, args_struct, positional_args
from hivemesh.live.config import LiveRule, neutral, to_zone
from hivemesh.live.errors import InvalidCommand

__all__ = [
    "NEUTRAL",
    "COPY_DATA",
    "PROPOSED",
    "Command",
    "decode",
    "encode",
    "for_zone",
    "is_create",
    "named_objects",
    "neutral_location",
    "pin",
    "structs",
]

VERSION = 1
NEUTRAL = "hivemesh-live:"
"""Prefix of a zone-neutral location inside a command: ``hivemesh-live:sales.db/orders``."""
DDL_TIME = "transient_lastDdlTime"
_LOCATION_FIELDS = ("location", "locationUri", "managedLocationUri", "rootPath")
_VIEW_TYPES = frozenset({"VIRTUAL_VIEW", "MATERIALIZED_VIEW"})

_PROPOSED_PREFIXES = (
    "create_database",
    "alter_database",
    "drop_database",
    "create_table",
    "alter_table",
    "drop_table",
    "truncate_table",
    "add_partition",
    "append_partition",
    "alter_partition",
    "drop_partition",
    "rename_partition",
    "exchange_partition",
    "update_table_column_statistics",
    "update_partition_column_statistics",
    "delete_table_column_statistics",
    "delete_partition_column_statistics",
    "set_aggr_stats_for",
    "create_function",
    "alter_function",
    "drop_function",
    "add_primary_key",
    "add_foreign_key",
    "add_unique_constraint",
    "add_not_null_constraint",
    "add_default_constraint",
    "add_check_constraint",
    "drop_constraint",
)
PROPOSED: frozenset[str] = frozenset(m for m in METHODS if m.startswith(_PROPOSED_PREFIXES))
"""The HMS writes a live proxy proposes to the log when they name a live database: catalog DDL,
partitions, column statistics, functions and constraints. Other writes (transactions, locks,
write ids, compaction requests) go to the metastore that owns them."""

COPY_DATA = "hivemesh_copy_data"
"""The method name of a command that only copies data: the directories an ACID txn wrote in the
proposing zone (``data``), shipped to every zone before the txn commits. Its arguments are a
``get_table_args`` of the table (which :func:`named_objects` and the logs name); no zone calls a
metastore method for it."""

_CREATES = ("create_", "add_partition", "append_partition")


def _struct_method(method: str) -> str:
    """The HMS method whose args struct a command of ``method`` carries."""
    return "get_table" if method == COPY_DATA else method


def is_create(method: str) -> bool:
    """True for the calls that create objects (times and owners are pinned only for them)."""
    return method.startswith(_CREATES)


@dataclass(frozen=True)
class Command:
    """A decoded command: the method, its args struct (locations still zone-neutral), the rule,
    the proposing zone and user, and the proposer's clock (ms)."""

    method: str
    args: Any
    rule: str
    zone: str
    user: str
    time_ms: int
    data: tuple[str, ...] = ()
    """Directories (zone-neutral relative paths) whose files the command makes visible: every
    other zone copies them from the proposing zone before applying it (:mod:`hivemesh.live.data`)."""


def encode(command: Command) -> dict[str, Any]:
    """The JSON object of ``command`` (see the module doc)."""
    buf = TTransport.TMemoryBuffer()
    command.args.write(TBinaryProtocol.TBinaryProtocolAccelerated(buf))
    return {
        "v": VERSION,
        "method": command.method,
        "args": base64.b64encode(buf.getvalue()).decode("ascii"),
        "rule": command.rule,
        "zone": command.zone,
        "user": command.user,
        "time_ms": command.time_ms,
        "data": list(command.data),
    }


def decode(raw: bytes) -> Command:
    """The command of a log entry's bytes. Raises InvalidCommand (not a command of this version,
    an unknown method, undecodable arguments)."""
    try:
        obj = json.loads(raw)
        if not isinstance(obj, dict) or obj.get("v") != VERSION:
            raise InvalidCommand(f"not a version-{VERSION} live command: {raw[:80]!r}")
        method = str(obj["method"])
        if method not in PROPOSED and method != COPY_DATA:
            raise InvalidCommand(f"command names {method!r}, not a method live proxies propose")
        args = args_struct(_struct_method(method))()
        raw_args = base64.b64decode(obj["args"], validate=True)
        args.read(TBinaryProtocol.TBinaryProtocolAccelerated(TTransport.TMemoryBuffer(raw_args)))
        data = obj.get("data") or []
        if not isinstance(data, list) or not all(isinstance(d, str) for d in data):
            raise InvalidCommand(f"command data must be a list of paths, got {data!r}")
        return Command(
            method,
            args,
            str(obj["rule"]),
            str(obj["zone"]),
            str(obj["user"]),
            int(obj["time_ms"]),
            tuple(data),
        )
    except InvalidCommand:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error, EOFError, TTransport.TTransportException) as e:
        raise InvalidCommand(f"undecodable live command: {type(e).__name__}: {e}") from e


# ------------------------------------------------------------------------------------ walking
def structs(value: Any) -> Iterable[Any]:
    """``value`` and every Thrift struct inside it (fields, lists, sets, map values), depth first."""
    if isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from structs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from structs(v)
    elif hasattr(type(value), "thrift_spec"):
        yield value
        for spec in type(value).thrift_spec or ():
            if spec is not None:
                yield from structs(getattr(value, spec[2], None))


def _map_locations(args: Any, fn: Callable[[str], str]) -> None:
    for s in structs(args):
        for name in _LOCATION_FIELDS:
            v = getattr(s, name, None)
            if isinstance(v, str) and v:
                setattr(s, name, fn(v))
        skewed = getattr(s, "skewedColValueLocationMaps", None)  # SkewedInfo: values -> directory
        if isinstance(skewed, dict):
            s.skewedColValueLocationMaps = {k: fn(v) if v else v for k, v in skewed.items()}


# ------------------------------------------------------------------------------------ pinning
def pin(
    method: str,
    args: Any,
    rule: LiveRule,
    zone: str,
    user: str,
    now_ms: int | None = None,
    database_location: Callable[[str], str | None] | None = None,
) -> Command:
    """The command of HMS write ``method`` (decoded ``<method>_args`` struct ``args``, changed in
    place) proposed in ``zone`` under ``rule`` by ``user``: locations made zone-neutral, missing
    locations, times and owners pinned (see the module doc). ``database_location(name)``: the
    proposing zone's location of database ``name`` (None when unknown), for new tables without a
    location.

    Raises MetaException (a location outside the rule's root of ``zone``: the message names both)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    now_s = now_ms // 1000

    def to_neutral(location: str) -> str:
        """``location`` of ``zone`` as a ``hivemesh-live:`` path; raises MetaException outside the root."""
        if location.startswith(NEUTRAL):
            return location
        rel = neutral(rule, zone, location)
        if rel is None:
            raise MetaException(
                f"hivemesh live: location {location} is outside live rule {rule.name!r}'s path for zone "
                f"{zone} ({rule.paths[zone]}); objects of live databases keep their files under that path"
            )
        return NEUTRAL + rel

    _map_locations(args, to_neutral)
    create = is_create(method)
    for s in structs(args):
        if isinstance(s, Database) and create:
            if not s.locationUri:
                s.locationUri = NEUTRAL + f"{s.name.lower()}.db"
            if not s.ownerName:
                s.ownerName = user
            if hasattr(s, "createTime") and not s.createTime:
                s.createTime = now_s
        elif isinstance(s, Table):
            if create:
                _pin_table_location(s, database_location)
                if not s.owner:
                    s.owner = user
                if not s.createTime:
                    s.createTime = now_s
            _pin_ddl_time(s, now_s)
        elif isinstance(s, Partition):
            if create and not s.createTime:
                s.createTime = now_s
            _pin_ddl_time(s, now_s)
        elif isinstance(s, Function) and create:
            if not s.ownerName:
                s.ownerName = user
            if not s.createTime:
                s.createTime = now_s
    return Command(method, args, rule.name, zone, user, now_ms)


def _pin_table_location(t: Table, database_location: Callable[[str], str | None] | None) -> None:
    if t.tableType in _VIEW_TYPES or t.sd is None or t.sd.location:
        return
    db_location = database_location(t.dbName) if database_location is not None else None
    base = (
        db_location
        if db_location is not None and db_location.startswith(NEUTRAL)
        else NEUTRAL + f"{t.dbName.lower()}.db"
    )
    t.sd.location = (
        f"{base.rstrip('/')}/{t.tableName.lower()}" if base != NEUTRAL else NEUTRAL + t.tableName.lower()
    )


def _pin_ddl_time(obj: Table | Partition, now_s: int) -> None:
    if obj.parameters is None:
        obj.parameters = {}
    if obj.parameters.get(DDL_TIME) in (None, "", "0"):
        obj.parameters[DDL_TIME] = str(now_s)


def named_objects(command: Command) -> tuple[str, tuple[str, ...]] | None:
    """(database, tables) a command names, lower case, for finding its notification events; None
    when it names no single database."""
    col = Collector()
    rename_args(method_plan(_struct_method(command.method)), positional_args(command.args), col)
    dbs = {split_catalog(d)[1].lower() for d in col.dbs if d}
    if len(dbs) != 1:
        return None
    tables = tuple(sorted({t.lower() for _, t in col.tables if t}))
    return dbs.pop(), tables


def neutral_location(rule: LiveRule, zone: str, location: str | None) -> str | None:
    """``location`` of ``zone`` as a ``hivemesh-live:`` path, or None (unset, or outside the rule's
    root of ``zone``)."""
    if not location:
        return None
    rel = neutral(rule, zone, location)
    return None if rel is None else NEUTRAL + rel


def for_zone(command: Command, rule: LiveRule, zone: str) -> list[Any]:
    """The positional arguments to call ``command.method`` with in ``zone``: every
    ``hivemesh-live:`` path mapped through ``rule.paths[zone]`` (the args struct is changed in
    place: decode the command once per zone). Raises InvalidCommand (a neutral path that would
    leave the zone's root)."""

    def to_local(location: str) -> str:
        """A ``hivemesh-live:`` path as ``zone``'s location (others as they are); raises InvalidCommand."""
        if not location.startswith(NEUTRAL):
            return location
        try:
            return to_zone(rule, zone, location[len(NEUTRAL) :])
        except (KeyError, ValueError) as e:
            raise InvalidCommand(f"command location {location!r} cannot be mapped to zone {zone}: {e}") from e

    _map_locations(command.args, to_local)
    return positional_args(command.args)
