"""The real Apache Hive 4.2 metastore as a federated member of the hivemesh proxy.

A proxy with a hivemesh primary and Hive 4 as a read-only member under the database prefix
``h4_``: Hive 4 clients' request forms pass through with the names renamed both ways; the calls of
older clients (Spark's built-in Hive 2.3 client) that Hive 4.2 no longer serves (``get_table``,
``get_table_objects_by_name``) are answered with the newer forms; txns and write ids of the
member's ACID table come from the member. Every answer is compared with the same call sent to
Hive 4 directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hive_metastore import ttypes as T

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.service import ProxyService
from hivemesh.hive.txn_lists import ValidTxnList
from tests.support.hive4 import Hive4Metastore
from tests.support.proxy import write_mesh
from tests.support.servers import HivemeshProcess, ThriftClient

pytestmark = pytest.mark.hive4

ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
)


def _sd() -> T.StorageDescriptor:
    return T.StorageDescriptor(
        cols=[T.FieldSchema("id", "int", None), T.FieldSchema("amount", "double", "in EUR")],
        inputFormat=ORC[0],
        outputFormat=ORC[1],
        serdeInfo=T.SerDeInfo(serializationLib=ORC[2], parameters={}),
        parameters={},
        bucketCols=[],
        sortCols=[],
        numBuckets=-1,
        compressed=False,
    )


@pytest.fixture(scope="module")
def member_db(hive4: Hive4Metastore) -> str:
    """A database on Hive 4 with a partitioned table (3 partitions) and an ACID table with one
    committed and one open write."""
    db = "h4fed_" + uuid.uuid4().hex[:8]
    with ThriftClient(hive4.host, hive4.port) as c:
        c.create_database(T.Database(name=db, locationUri=f"file:{hive4.warehouse}/{db}.db", parameters={}))
        c.create_table(
            T.Table(tableName="sales", dbName=db, owner="alice", sd=_sd(), parameters={}, tableType="MANAGED_TABLE",
                    partitionKeys=[T.FieldSchema("region", "string", None)])
        )  # fmt: skip
        for region in ("eu", "us", "apac"):
            c.add_partition(
                T.Partition(values=[region], dbName=db, tableName="sales", sd=_sd(), parameters={})
            )
        c.create_table(
            T.Table(tableName="orders", dbName=db, owner="alice", sd=_sd(), partitionKeys=[],
                    parameters={"transactional": "true"}, tableType="MANAGED_TABLE")
        )  # fmt: skip
        txns = c.open_txns(T.OpenTxnRequest(num_txns=2, user="alice", hostname="h")).txn_ids
        c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(dbName=db, tableName="orders", txnIds=txns))
        c.commit_txn(T.CommitTxnRequest(txnid=txns[0]))
    return db


@pytest.fixture(scope="module")
def proxy(
    hive4: Hive4Metastore, member_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyService]:
    """A proxy: a fresh hivemesh primary, Hive 4 federated read-only under the prefix ``h4_``."""
    base = tmp_path_factory.mktemp("h4fed")
    with HivemeshProcess(f"sqlite:///{base / 'm.db'}", base / "wh", base / "m.log") as primary:
        cfg = write_mesh(
            base / "mesh.yaml",
            {"port": 0, "store": f"sqlite:///{base / 'proxy.db'}", "status_polling_delay_ms": 500},
            {"name": "main", "uris": [primary.uri], "access_control": "read_and_write_and_create"},
            [{"name": "h4", "uris": [hive4.uri], "database_prefix": "h4_", "access_control": "read_only"}],
        )
        svc = ProxyService(cfg).start()
        try:
            yield svc
        finally:
            svc.stop()


@pytest.fixture()
def both(proxy: ProxyService, hive4: Hive4Metastore) -> Iterator[tuple[Any, Any]]:
    """(client on the proxy, client on Hive 4 directly)."""
    host, port = proxy.uri.removeprefix("thrift://").rsplit(":", 1)
    with ThriftClient(host, int(port)) as via, ThriftClient(hive4.host, hive4.port) as direct:
        yield via, direct


def _renamed(table: T.Table, db: str) -> T.Table:
    table.dbName = db
    return table


@pytest.mark.parametrize("hive4", ["derby"], indirect=True)
def test_hive4_request_forms_pass_through(both: tuple[Any, Any], member_db: str) -> None:
    via, direct = both
    db, pdb = member_db, "h4_" + member_db
    assert pdb in via.get_all_databases()
    got = via.get_table_req(T.GetTableRequest(dbName=pdb, tblName="sales")).table
    want = direct.get_table_req(T.GetTableRequest(dbName=db, tblName="sales")).table
    assert got == _renamed(want, pdb)
    assert via.get_database_req(T.GetDatabaseRequest(name=pdb, catalogName="hive")).name == pdb
    parts = via.get_partitions_req(T.PartitionsRequest(dbName=pdb, tblName="sales", maxParts=-1)).partitions
    want_parts = direct.get_partitions_req(
        T.PartitionsRequest(dbName=db, tblName="sales", maxParts=-1)
    ).partitions
    assert [(p.dbName, p.values, p.writeId) for p in parts] == [
        (pdb, p.values, p.writeId) for p in want_parts
    ]
    objs = via.get_table_objects_by_name_req(
        T.GetTablesRequest(dbName=pdb, tblNames=["sales", "orders", "x"])
    )
    assert sorted((t.dbName, t.tableName) for t in objs.tables) == [(pdb, "orders"), (pdb, "sales")]
    values = via.get_partition_values(
        T.PartitionValuesRequest(
            dbName=pdb, tblName="sales", partitionKeys=[T.FieldSchema("region", "string")]
        )
    )
    assert [r.row for r in values.partitionValues] == [["apac"], ["eu"], ["us"]]


@pytest.mark.parametrize("hive4", ["derby"], indirect=True)
def test_older_clients_calls_reach_hive4(both: tuple[Any, Any], member_db: str) -> None:
    """Spark's built-in Hive 2.3 client calls get_table and get_table_objects_by_name, which Hive
    4.2 dropped; the proxy answers them with get_table_req / get_table_objects_by_name_req."""
    via, direct = both
    db, pdb = member_db, "h4_" + member_db
    want = direct.get_table_req(T.GetTableRequest(dbName=db, tblName="sales")).table
    assert via.get_table(pdb, "sales") == _renamed(want, pdb)
    assert sorted(t.tableName for t in via.get_table_objects_by_name(pdb, ["sales", "orders"])) == [
        "orders",
        "sales",
    ]
    assert via.get_all_tables(pdb) == direct.get_all_tables(db)
    assert via.get_partition_names(pdb, "sales", -1) == direct.get_partition_names(db, "sales", -1)
    assert [p.values for p in via.get_partitions_by_filter(pdb, "sales", 'region = "eu"', -1)] == [["eu"]]
    assert [f.name for f in via.get_schema(pdb, "sales")] == ["id", "amount", "region"]
    assert via.get_database(pdb).name == pdb


@pytest.mark.parametrize("hive4", ["derby"], indirect=True)
def test_write_ids_of_a_member_table_come_from_the_member(
    proxy: ProxyService, both: tuple[Any, Any], member_db: str
) -> None:
    """A reader's txn is opened on the primary; the proxy pairs it with a txn on Hive 4 and
    answers the member table's write-id snapshot from Hive 4, with Hive 4's own ValidTxnList."""
    _, direct = both
    pdb = "h4_" + member_db
    with MetastoreClient(proxy.uri) as client:
        txn = client.open_txn(user="reader")
        try:
            member_lists: dict[str, ValidTxnList] = {}
            snap = client.valid_write_ids(
                [f"{pdb}.orders"], client.valid_txn_list(txn), txn_lists=member_lists
            )
            [(name, ours)] = snap.items()
            assert name == f"{pdb}.orders"
            # write id 1 committed; write id 2 belongs to a txn still open on Hive 4
            assert (ours.high_watermark, ours.open_write_ids, ours.aborted_write_ids, ours.min_open) == (
                2,
                (2,),
                (),
                2,
            )
            # judged with Hive 4's own txn list: every txn open on Hive 4 is invalid in it except
            # one, the reader's own paired txn there (a txn always sees itself)
            member_open = set(direct.get_open_txns().open_txns)
            own = member_lists[name]
            assert own.high_watermark >= max(member_open)
            assert len([t for t in member_open if not own.is_valid(t)]) == len(member_open) - 1
        finally:
            client.commit_txn(txn)
