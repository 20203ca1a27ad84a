"""Fast statistics list directories before the write transaction, never while holding it.

The metastore's partition and table writes take ``numFiles``/``totalSize`` from a listing of the
data directory. That listing is storage I/O (an object store may take seconds), so it is taken
before the call's write transaction (``CatalogBase._gather_listings``) and the transaction only
reads it; when the transaction needs a location nobody listed (the table changed in between), it
rolls back, the location is listed outside, and the call runs again
(``CatalogBase._write_with_listings``). These tests watch every listing against the write
transactions of an in-process metastore and check the statistics that come out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hive_metastore.ttypes import Database, FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

from hivemesh import storage
from hivemesh.metastore.base import CatalogBase
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.store import Store

DB = "listed"


@dataclass
class Watch:
    """Write transactions open now, those opened so far, and each listing with whether a write
    transaction was open while it ran."""

    depth: int = 0
    writes: int = 0
    listings: list[tuple[str, bool]] = field(default_factory=list)

    def inside(self) -> list[str]:
        """The locations listed while a write transaction was open."""
        return [loc for loc, in_tx in self.listings if in_tx]


@pytest.fixture()
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LocalMetastore, Watch]]:
    store = Store(f"sqlite:///{tmp_path / 'm.db'}")
    hms = LocalMetastore(store, str(tmp_path / "wh"))
    watch = Watch()
    real_write = store.write

    @contextlib.contextmanager
    def write() -> Iterator[Any]:
        with real_write() as conn:
            watch.depth += 1
            watch.writes += 1
            try:
                yield conn
            finally:
                watch.depth -= 1

    real_stats = storage.quick_stats

    def quick_stats(location: str | None) -> tuple[int, int] | None:
        watch.listings.append((str(location), watch.depth > 0))
        return real_stats(location)

    monkeypatch.setattr(store, "write", write)
    monkeypatch.setattr(storage, "quick_stats", quick_stats)
    hms.create_database(Database(name=DB, locationUri=str(tmp_path / "wh" / DB)))
    yield hms, watch
    store.dispose()


def _sd(location: str | None = None) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "int", None)],
        location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=SerDeInfo(None, "org.apache.hadoop.hive.ql.io.orc.OrcSerde", {}),
    )


def _files(directory: Path, *sizes: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, size in enumerate(sizes):
        (directory / f"part-{len(list(directory.iterdir()))}-{i}.orc").write_bytes(b"x" * size)


def _fast(params: dict[str, str] | None) -> tuple[str | None, str | None]:
    p = params or {}
    return p.get("numFiles"), p.get("totalSize")


def _table(hms: LocalMetastore, name: str, location: Path, partitioned: bool) -> None:
    hms.create_table(
        Table(
            tableName=name,
            dbName=DB,
            owner="alice",
            sd=_sd(str(location)),
            partitionKeys=[FieldSchema("ds", "string", None)] if partitioned else [],
            tableType="EXTERNAL_TABLE",
            parameters={"EXTERNAL": "TRUE"},
        )
    )


def test_create_and_alter_table_list_outside_the_write_transaction(
    watched: tuple[LocalMetastore, Watch], tmp_path: Path
) -> None:
    hms, watch = watched
    location = tmp_path / "data" / "t"
    _files(location, 10, 20)
    _table(hms, "t", location, partitioned=False)
    assert _fast(hms.get_table(DB, "t").parameters) == ("2", "30")

    _files(location, 5)
    altered = hms.get_table(DB, "t")
    altered.parameters = {**altered.parameters, "comment": "three files now"}
    hms.alter_table(DB, "t", altered)
    assert _fast(hms.get_table(DB, "t").parameters) == ("3", "35")  # alter_table lists again

    assert len(watch.listings) >= 2, watch.listings
    assert watch.inside() == []


def test_partition_writes_list_outside_the_write_transaction(
    watched: tuple[LocalMetastore, Watch], tmp_path: Path
) -> None:
    hms, watch = watched
    root = tmp_path / "data" / "p"
    _table(hms, "p", root, partitioned=True)
    _files(root / "ds=1", 7)
    _files(root / "ds=2", 1, 2, 3)
    hms.add_partitions(
        [
            Partition(values=[v], dbName=DB, tableName="p", sd=_sd(str(root / f"ds={v}")), parameters={})
            for v in ("1", "2")
        ]
    )
    assert [_fast(p.parameters) for p in hms.get_partitions(DB, "p", -1)] == [("1", "7"), ("3", "6")]

    # an alter without statistics lists again; one that carries both keeps them
    part = hms.get_partition(DB, "p", ["2"])
    part.parameters = {"owner": "bob"}
    hms.alter_partitions(DB, "p", [part])
    assert _fast(hms.get_partition(DB, "p", ["2"]).parameters) == ("3", "6")

    renamed = hms.get_partition(DB, "p", ["1"])
    renamed.values = ["9"]
    hms.rename_partition(DB, "p", ["1"], renamed)
    assert _fast(hms.get_partition(DB, "p", ["9"]).parameters) == ("1", "7")

    listed = {Path(loc).name for loc, _ in watch.listings}
    assert {"ds=1", "ds=2"} <= listed, watch.listings
    assert watch.inside() == []


def test_a_location_not_listed_beforehand_is_listed_after_a_rollback(
    watched: tuple[LocalMetastore, Watch], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As if the table changed between the listing and the write transaction: the transaction
    finds its location unlisted, rolls back, and the call runs again with the listing taken
    outside; the result is the same as without the race."""
    hms, watch = watched
    location = tmp_path / "data" / "r"
    _files(location, 4, 4)
    _table(hms, "r", location, partitioned=False)
    monkeypatch.setattr(CatalogBase, "_gather_listings", lambda self, listings, plan: None)
    writes, listings = watch.writes, len(watch.listings)

    altered = hms.get_table(DB, "r")
    altered.parameters = {**altered.parameters, "comment": "again"}
    _files(location, 2)
    hms.alter_table(DB, "r", altered)

    table = hms.get_table(DB, "r")
    assert _fast(table.parameters) == ("3", "10")
    assert table.parameters["comment"] == "again"
    assert watch.writes - writes == 2  # the first attempt rolled back, the second committed
    assert len(watch.listings) - listings == 1
    assert watch.inside() == []
