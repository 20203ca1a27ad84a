"""Third-party HMS clients against a running ``hivemesh metastore``, through their documented calls.

hive-metastore-client (its builders, ``add_columns_to_table``, ``drop_columns_from_table``, which
needs ``setMetaConf``, ``get_partition_values_from_table``, ``bulk_drop_partitions``), hmsclient and
pymetastore each use their own generated Thrift bindings, so these tests also check that hivemesh's
answers decode in other bindings than ours. The behaviours are Hive 4's, checked against the real
Hive 4.2 metastore in ``tests/test_hive4_differential.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ttypes as T

from tests.support.servers import HivemeshProcess, ThriftClient

TEXT = (
    "org.apache.hadoop.mapred.TextInputFormat",
    "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
)


@pytest.fixture()
def hmc(hivemesh_server: HivemeshProcess) -> Iterator:
    """hive-metastore-client's HiveMetastoreClient, opened on the server."""
    from hive_metastore_client import HiveMetastoreClient

    client = HiveMetastoreClient(hivemesh_server.host, hivemesh_server.port)
    client.open()
    try:
        yield client
    finally:
        client.close()


def _hmc_table(db: str, name: str, location: str, partitioned: bool) -> object:
    from hive_metastore_client.builders import (
        ColumnBuilder,
        SerDeInfoBuilder,
        StorageDescriptorBuilder,
        TableBuilder,
    )

    cols = [ColumnBuilder("id", "int").build(), ColumnBuilder("name", "string", "who").build()]
    sd = StorageDescriptorBuilder(
        columns=cols,
        location=location,
        input_format=TEXT[0],
        output_format=TEXT[1],
        serde_info=SerDeInfoBuilder(serialization_lib=TEXT[2]).build(),
    ).build()
    keys = [ColumnBuilder("ds", "string").build()] if partitioned else None
    return TableBuilder(
        table_name=name,
        db_name=db,
        storage_descriptor=sd,
        owner="alice",
        partition_keys=keys,
        table_type="EXTERNAL_TABLE",
    ).build()


def test_hive_metastore_client_documented_calls(hmc, unique_name: str, tmp_path: Path) -> None:
    from hive_metastore_client.builders import ColumnBuilder, DatabaseBuilder, PartitionBuilder

    db = unique_name
    hmc.create_database_if_not_exists(DatabaseBuilder(name=db, location_uri=f"file:{tmp_path}/db").build())
    hmc.create_database_if_not_exists(DatabaseBuilder(name=db).build())  # exists: no error
    table = _hmc_table(db, "events", f"file:{tmp_path}/events", partitioned=True)
    hmc.create_external_table(table)

    hmc.add_columns_to_table(db, "events", [ColumnBuilder("score", "double").build()])
    assert [c.name for c in hmc.get_table(db, "events").sd.cols] == ["id", "name", "score"]
    # drop_columns_from_table turns off the incompatible-type check with setMetaConf first
    hmc.drop_columns_from_table(db, "events", ["name"])
    assert [c.name for c in hmc.get_table(db, "events").sd.cols] == ["id", "score"]
    assert hmc.getMetaConf("hive.metastore.disallow.incompatible.col.type.changes") == "false"

    sd = hmc.get_table(db, "events").sd
    parts = [
        PartitionBuilder(values=[d], db_name=db, table_name="events", sd=sd).build()
        for d in ("2024-01-01", "2024-01-02")
    ]
    hmc.add_partitions_to_table(db, "events", parts)
    hmc.add_partitions_if_not_exists(db, "events", parts)  # both exist: nothing added, no error
    assert hmc.get_partition_keys_names(db, "events") == ["ds"]
    assert [k.name for k in hmc.get_partition_keys_objects(db, "events")] == ["ds"]
    assert hmc.get_partition_values_from_table(db, "events") == [["2024-01-01"], ["2024-01-02"]]
    hmc.bulk_drop_partitions(db, "events", [["2024-01-01"]])
    assert hmc.get_partition_values_from_table(db, "events") == [["2024-01-02"]]
    # its docstring promises [] for a missing table, but it relies on get_table answering None,
    # which no Hive metastore does: Hive raises NoSuchObjectException, and so does hivemesh
    with pytest.raises(Exception, match="table not found") as missing:
        hmc.get_partition_values_from_table(db, "missing_table")
    assert type(missing.value).__name__ == "NoSuchObjectException"


def test_meta_conf_is_per_connection(hivemesh_server: HivemeshProcess) -> None:
    key = "hive.metastore.disallow.incompatible.col.type.changes"
    with (
        ThriftClient(hivemesh_server.host, hivemesh_server.port) as a,
        ThriftClient(hivemesh_server.host, hivemesh_server.port) as b,
    ):
        a.setMetaConf(key, "false")
        assert a.getMetaConf(key) == "false"
        assert b.getMetaConf(key) == "true"  # another connection keeps the default
        assert a.getMetaConf("metastore.disallow.incompatible.col.type.changes") == "false"  # same setting
        with pytest.raises(T.MetaException, match="Invalid configuration key hive.metastore.warehouse.dir"):
            a.setMetaConf("hive.metastore.warehouse.dir", "/elsewhere")
        with pytest.raises(T.MetaException, match="Invalid configuration key nope"):
            b.getMetaConf("nope")
        assert a.get_all_databases()  # the server is still serving both


def test_hmsclient_documented_calls(
    hivemesh_server: HivemeshProcess, unique_name: str, tmp_path: Path
) -> None:
    from hmsclient import hmsclient
    from hmsclient.genthrift.hive_metastore import ttypes as H

    db = unique_name
    with hmsclient.HMSClient(host=hivemesh_server.host, port=hivemesh_server.port) as client:
        client.create_database(H.Database(name=db, locationUri=f"file:{tmp_path}/db", parameters={}))
        sd = H.StorageDescriptor(
            cols=[H.FieldSchema("id", "int", None)],
            location=f"file:{tmp_path}/t",
            inputFormat=TEXT[0],
            outputFormat=TEXT[1],
            serdeInfo=H.SerDeInfo(serializationLib=TEXT[2], parameters={}),
        )
        client.create_table(
            H.Table(tableName="t", dbName=db, sd=sd, partitionKeys=[H.FieldSchema("ds", "string", None)],
                    parameters={}, tableType="EXTERNAL_TABLE")
        )  # fmt: skip
        table = client.get_table(db, "t")
        client.add_partition(table, ["2024-01-01"])
        assert client.check_for_named_partition(db, "t", "ds=2024-01-01")
        assert not client.check_for_named_partition(db, "t", "ds=2030-01-01")
        part = client.get_partition(db, "t", ["2024-01-01"])
        assert part.lastAccessTime == 0 and part.values == ["2024-01-01"]  # Hive's 0, not unset
        assert db in client.get_all_databases()


def test_pymetastore_documented_calls(
    hivemesh_server: HivemeshProcess, unique_name: str, tmp_path: Path
) -> None:
    from pymetastore.metastore import HMS

    db = unique_name
    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as raw:
        raw.create_database(T.Database(name=db, locationUri=f"file:{tmp_path}/db", parameters={"k": "v"}))
        sd = T.StorageDescriptor(
            cols=[T.FieldSchema("id", "int", "key"), T.FieldSchema("name", "string", None)],
            location=f"file:{tmp_path}/t",
            inputFormat=TEXT[0],
            outputFormat=TEXT[1],
            serdeInfo=T.SerDeInfo(serializationLib=TEXT[2], parameters={}),
            parameters={},
        )
        raw.create_table(
            T.Table(tableName="t", dbName=db, owner="alice", sd=sd, partitionKeys=[T.FieldSchema("ds", "string", None)],
                    parameters={}, tableType="EXTERNAL_TABLE")
        )  # fmt: skip
        for ds in ("2024-01-01", "2024-01-02"):
            raw.add_partition(T.Partition(values=[ds], dbName=db, tableName="t", sd=sd, parameters={}))
    with HMS.create(host=hivemesh_server.host, port=hivemesh_server.port) as hms:
        assert db in hms.list_databases()
        assert hms.get_database(db).parameters == {"k": "v"}
        assert hms.list_tables(db) == ["t"]
        assert hms.list_columns(db, "t") == ["id", "name"]
        table = hms.get_table(db, "t")
        assert (table.name, table.owner, [c.name for c in table.partition_columns]) == ("t", "alice", ["ds"])
        assert sorted(hms.list_partitions(db, "t")) == ["ds=2024-01-01", "ds=2024-01-02"]
        parts = hms.get_partitions(db, "t")
        assert sorted(p.values[0] for p in parts) == ["2024-01-01", "2024-01-02"]
        assert {p.write_id for p in parts} == {-1}


def test_pyiceberg_list_tables_of_a_missing_namespace(hivemesh_server: HivemeshProcess) -> None:
    """pyiceberg's HiveCatalog.list_tables of a missing database: an empty list, as it documents
    (it used to crash on an exception get_table_objects_by_name does not declare)."""
    from pyiceberg.catalog.hive import HiveCatalog

    catalog = HiveCatalog("mesh", uri=hivemesh_server.uri)
    assert catalog.list_tables("no_such_namespace_here") == []
