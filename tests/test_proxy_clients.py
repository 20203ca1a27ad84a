"""Hive 2.3, 3 and 4 client call forms through the proxy, against the real Apache HMS 2.3.10 and a
hivemesh metastore as members (Waggle Dance needed per-version shims for such mixes, #340/#317).

Hive 2.3 clients (Spark) send plain names; Hive 3 clients send ``@hive#db`` names and request
structs with ``catName``; Hive 4 clients send request forms (``get_database_req``,
``get_fields_req``, ...) that HMS 2.3 does not have, which the proxy answers with the older call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore.ttypes import (
    Database,
    GetDatabaseRequest,
    GetFieldsRequest,
    GetPartitionsByNamesRequest,
    GetSchemaRequest,
    GetTableRequest,
    GetTablesRequest,
    MetaException,
    NoSuchObjectException,
    Partition,
    PartitionsRequest,
)

from hivemesh.client.metastore import MetastoreClient
from hivemesh.federation.service import ProxyService
from tests.support.javahms import JavaHMS, java_available
from tests.support.proxy import write_mesh
from tests.support.servers import HivemeshProcess, ThriftClient
from tests.test_proxy import _sd, _table

pytestmark = pytest.mark.javahms


def _load(client: object, root: Path) -> None:
    c = client
    c.create_database(Database(name="web", locationUri=f"file:{root}/web.db", parameters={}))
    c.create_table(_table("web", "clicks", f"file:{root}/web.db/clicks", ("day",)))
    c.add_partitions(
        [
            Partition(
                values=[d],
                dbName="web",
                tableName="clicks",
                sd=_sd(f"file:{root}/web.db/clicks/day={d}"),
                parameters={},
            )
            for d in ("d1", "d2")
        ]
    )


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    if not java_available():
        pytest.skip("needs Java 17 to run the real Apache HMS 2.3.10 from the PySpark wheel")
    root = tmp_path_factory.mktemp("clients")
    hms = JavaHMS(log_level="WARN")
    hms.start(timeout=180)
    main = HivemeshProcess(f"sqlite:///{root / 'main.db'}", root / "wh_main", root / "main.log").start()
    other = HivemeshProcess(f"sqlite:///{root / 'hm.db'}", root / "wh_hm", root / "hm.log").start()
    try:
        with ThriftClient(hms.host, hms.port) as c:
            _load(c, hms.warehouse)
        _load(MetastoreClient(other.uri).raw, root / "wh_hm")
        cfg = write_mesh(
            root / "mesh.yaml",
            {"port": 0, "store": f"sqlite:///{root / 'proxy.db'}"},
            {"name": "main", "uris": [main.uri], "access_control": "read_and_write_and_create"},
            [
                {"name": "hive23", "uris": [hms.uri], "database_prefix": "j_"},
                {"name": "hm", "uris": [other.uri], "database_prefix": "h_"},
            ],
        )
        with ProxyService(cfg) as svc:
            yield {"proxy": svc, "hms": hms}
    finally:
        main.stop()
        other.stop()
        hms.stop()


@pytest.mark.parametrize("db", ["j_web", "h_web"])
def test_hive23_hive3_and_hive4_forms(members: dict[str, object], db: str) -> None:
    proxy = members["proxy"]
    c = MetastoreClient(proxy.uri, retries=0).raw  # type: ignore[attr-defined]
    # Hive 2.3 (Spark's client)
    assert c.get_table(db, "clicks").dbName == db
    assert [p.values for p in c.get_partitions(db, "clicks", -1)] == [["d1"], ["d2"]]
    # Hive 3: catalog-qualified names and catName in requests
    assert c.get_table(f"@hive#{db}", "clicks").dbName == db
    assert c.get_all_tables(f"@hive#{db}") == ["clicks"]
    assert c.get_table_req(GetTableRequest(dbName=db, tblName="clicks", catName="hive")).table.dbName == db
    got = c.get_table_objects_by_name_req(GetTablesRequest(dbName=db, tblNames=["clicks"], catName="hive"))
    assert [t.tableName for t in got.tables] == ["clicks"]
    # Hive 4 request forms (HMS 2.3 lacks them: answered with the older calls)
    d = c.get_database_req(GetDatabaseRequest(name=db, catalogName="hive"))
    assert d.name == db
    assert [
        f.name for f in c.get_fields_req(GetFieldsRequest(dbName=db, tblName="clicks", catName="hive")).fields
    ] == [
        "id",
        "name",
    ]
    schema = c.get_schema_req(GetSchemaRequest(dbName=db, tblName="clicks", catName="hive")).fields
    assert [f.name for f in schema] == ["id", "name", "day"]
    parts = c.get_partitions_req(PartitionsRequest(dbName=db, tblName="clicks", maxParts=-1, catName="hive"))
    assert [(p.dbName, p.values) for p in parts.partitions] == [(db, ["d1"]), (db, ["d2"])]
    by_names = c.get_partitions_by_names_req(
        GetPartitionsByNamesRequest(db_name=db, tbl_name="clicks", names=["day=d2"])
    )
    assert [p.values for p in by_names.partitions] == [["d2"]]
    with pytest.raises(NoSuchObjectException):
        c.get_database_req(GetDatabaseRequest(name=f"{db}_missing", catalogName="hive"))
    with pytest.raises(MetaException, match="read_only"):
        c.drop_table(db, "clicks", False)


def test_fallbacks_are_remembered(members: dict[str, object]) -> None:
    proxy = members["proxy"]
    member = proxy.fed.registry.member("hive23")  # type: ignore[attr-defined]
    assert {"get_database_req", "get_fields_req", "get_schema_req"} <= member.missing
    assert not proxy.fed.registry.member("hm").missing >= {"get_table_req"}  # type: ignore[attr-defined]
