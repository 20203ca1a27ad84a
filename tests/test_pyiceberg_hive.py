"""pyiceberg's ``HiveCatalog`` managing Iceberg tables in a hivemesh metastore, on SQLite and PostgreSQL.

* One table through its whole life: create namespace and table, append, overwrite, add a column,
  rename, drop; after each step the data is read back through pyiceberg and the Hive table checked
  through Thrift (``metadata_location`` parameter). Every commit is pyiceberg's lock protocol:
  ``lock`` (TABLE, EXCLUSIVE) -> ``check_lock`` while WAITING -> ``alter_table`` -> ``unlock``;
  no lock is left behind.
* Two processes appending to one table at the same time, many times: every commit succeeds (a
  commit that raced another is retried by pyiceberg after a CommitFailedException, since the table
  changed under it), the snapshots form one line (each the parent of the next: commits were
  serialised) and no row is lost.

Warehouses are local ``file://`` directories under tmp_path.
"""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path

import pyarrow as pa
import pytest
from hive_metastore.ttypes import ShowLocksRequest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from tests.support.servers import HivemeshProcess

# pyiceberg polls check_lock with exponential waits starting at 2 s and gives up after 4 tries
# (~14 s); short, frequent polls keep the concurrent test quick without changing the protocol.
LOCK_POLLING = {
    "lock-check-min-wait-time": "0.02",
    "lock-check-max-wait-time": "0.1",
    "lock-check-retries": "600",
}
# A commit that lost a race is retried after reloading the table (pyiceberg's own retry).
COMMIT_RETRIES = {
    "commit.retry.num-retries": "100",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "100",
}

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def make_catalog(uri: str, warehouse: str) -> HiveCatalog:
    """pyiceberg's HiveCatalog on a hivemesh metastore (it opens a connection per call)."""
    return HiveCatalog("hm", uri=uri, warehouse=warehouse, **LOCK_POLLING)


def rows(table) -> list[dict]:  # type: ignore[no-untyped-def]
    """All rows of an Iceberg table as dicts, sorted by id."""
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_iceberg_table_lifecycle(
    hivemesh_server: HivemeshProcess, hms, unique_name: str, tmp_path: Path
) -> None:
    catalog = make_catalog(hivemesh_server.uri, f"file://{tmp_path / 'warehouse'}")
    ns = unique_name
    catalog.create_namespace(ns, {"location": f"file://{tmp_path / 'ns'}"})
    table = catalog.create_table(f"{ns}.events", SCHEMA)
    assert catalog.list_tables(ns) == [(ns, "events")]
    hive = hms.get_table(ns, "events")
    assert hive.parameters["table_type"] == "ICEBERG"
    assert hive.parameters["metadata_location"] == table.metadata_location
    assert rows(table) == []

    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA.as_arrow()))
    assert rows(catalog.load_table(f"{ns}.events")) == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"},
    ]  # fmt: skip
    hive = hms.get_table(ns, "events")
    assert hive.parameters["metadata_location"] == table.metadata_location
    assert hive.parameters["previous_metadata_location"] != table.metadata_location

    table.overwrite(pa.table({"id": [10, 20], "name": ["x", "y"]}, schema=SCHEMA.as_arrow()))
    assert rows(catalog.load_table(f"{ns}.events")) == [{"id": 10, "name": "x"}, {"id": 20, "name": "y"}]

    with table.update_schema() as update:
        update.add_column("score", DoubleType())
    table = catalog.load_table(f"{ns}.events")
    assert [f.name for f in table.schema().fields] == ["id", "name", "score"]
    assert [c.name for c in hms.get_table(ns, "events").sd.cols] == ["id", "name", "score"]
    table.append(pa.table({"id": [30], "name": ["z"], "score": [0.5]}, schema=table.schema().as_arrow()))
    assert rows(catalog.load_table(f"{ns}.events")) == [
        {"id": 10, "name": "x", "score": None},
        {"id": 20, "name": "y", "score": None},
        {"id": 30, "name": "z", "score": 0.5},
    ]
    assert (
        len(catalog.load_table(f"{ns}.events").snapshots()) == 4
    )  # append, overwrite (delete + add), append

    catalog.rename_table(f"{ns}.events", f"{ns}.renamed")
    assert catalog.list_tables(ns) == [(ns, "renamed")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.events")
    assert [r["id"] for r in rows(catalog.load_table(f"{ns}.renamed"))] == [10, 20, 30]

    # every commit above released its metastore lock
    assert hms.show_locks(ShowLocksRequest(dbname=ns)).locks in (None, [])

    catalog.drop_table(f"{ns}.renamed")
    assert not catalog.table_exists(f"{ns}.renamed")
    assert catalog.list_tables(ns) == []
    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()


def _appender(uri: str, warehouse: str, identifier: str, worker: int, count: int, start, errors) -> None:  # type: ignore[no-untyped-def]
    """Child process: append ``count`` one-row batches (ids worker*1000 + i) to ``identifier``."""
    try:
        catalog = make_catalog(uri, warehouse)
        table = catalog.load_table(identifier)
        arrow_schema = table.schema().as_arrow()
        start.wait(60)
        for i in range(count):
            table.append(pa.table({"id": [worker * 1000 + i], "name": [f"w{worker}"]}, schema=arrow_schema))
    except BaseException:
        errors.put(f"worker {worker}: {traceback.format_exc()}")
        raise


def test_two_processes_append_concurrently(
    hivemesh_server: HivemeshProcess, hms, unique_name: str, tmp_path: Path
) -> None:
    workers, count = 2, 15
    warehouse = f"file://{tmp_path / 'warehouse'}"
    catalog = make_catalog(hivemesh_server.uri, warehouse)
    catalog.create_namespace(unique_name)
    identifier = f"{unique_name}.shared"
    catalog.create_table(identifier, SCHEMA, properties=COMMIT_RETRIES)

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    errors = ctx.Queue()
    procs = [
        ctx.Process(
            target=_appender, args=(hivemesh_server.uri, warehouse, identifier, w, count, start, errors)
        )
        for w in range(1, workers + 1)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(300)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert not any(p.is_alive() for p in procs), "an appender hung"
    assert failures == []
    assert [p.exitcode for p in procs] == [0] * workers

    table = catalog.load_table(identifier)
    got = rows(table)
    expected = sorted(w * 1000 + i for w in range(1, workers + 1) for i in range(count))
    assert [r["id"] for r in got] == expected  # no append lost, none doubled
    # commits were serialised: one line of snapshots, each the parent of the next
    snaps = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    assert len(snaps) == workers * count
    assert snaps[0].parent_snapshot_id is None
    assert all(b.parent_snapshot_id == a.snapshot_id for a, b in zip(snaps, snaps[1:], strict=False))
    assert table.current_snapshot().snapshot_id == snaps[-1].snapshot_id
    assert hms.get_table(unique_name, "shared").parameters["metadata_location"] == table.metadata_location
    assert hms.show_locks(ShowLocksRequest(dbname=unique_name)).locks in (None, [])
