"""HMS calls Hive 4 answers beyond the common ones, against a real hivemesh metastore over Thrift
(SQLite and PostgreSQL): table constraints, ``truncate_table`` and catalogs.

Each test works in databases of its own on the session's server (``hms``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hive_metastore.ttypes import (
    AbortTxnRequest,
    AddCheckConstraintRequest,
    AddDefaultConstraintRequest,
    AddForeignKeyRequest,
    AddNotNullConstraintRequest,
    AddPrimaryKeyRequest,
    AddUniqueConstraintRequest,
    AllTableConstraintsRequest,
    AlreadyExistsException,
    AlterCatalogRequest,
    Catalog,
    CheckConstraintsRequest,
    ColumnStatistics,
    ColumnStatisticsData,
    ColumnStatisticsDesc,
    ColumnStatisticsObj,
    CommitTxnRequest,
    CreateCatalogRequest,
    CreateTableRequest,
    Database,
    DataOperationType,
    DefaultConstraintsRequest,
    DropCatalogRequest,
    DropConstraintRequest,
    EnvironmentContext,
    FieldSchema,
    ForeignKeysRequest,
    GetCatalogRequest,
    GetTableRequest,
    InvalidObjectException,
    InvalidOperationException,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    LongColumnStatsData,
    MetaException,
    NoSuchObjectException,
    NotificationEventRequest,
    NotNullConstraintsRequest,
    OpenTxnRequest,
    Partition,
    PartitionsStatsRequest,
    PrimaryKeysRequest,
    SerDeInfo,
    SQLCheckConstraint,
    SQLDefaultConstraint,
    SQLForeignKey,
    SQLNotNullConstraint,
    SQLPrimaryKey,
    SQLUniqueConstraint,
    StorageDescriptor,
    Table,
    TableStatsRequest,
    TruncateTableRequest,
    UniqueConstraintsRequest,
)

from hivemesh.hive import event_messages
from hivemesh.metastore.handler import LocalMetastore
from hivemesh.metastore.store import Store
from hivemesh.metastore.txn_schema import WRITE_SET

ORC = (
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
    "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
)


def _table(
    db: str, name: str, cols: list[tuple[str, str]], parts: list[tuple[str, str]] | None = None, **params: str
) -> Table:
    sd = StorageDescriptor(
        cols=[FieldSchema(n, t, None) for n, t in cols],
        inputFormat=ORC[0],
        outputFormat=ORC[1],
        serdeInfo=SerDeInfo(serializationLib=ORC[2], parameters={}),
        parameters={},
    )
    return Table(
        tableName=name,
        dbName=db,
        sd=sd,
        partitionKeys=[FieldSchema(n, t, None) for n, t in parts or []],
        tableType="MANAGED_TABLE",
        parameters=dict(params),
    )


@pytest.fixture()
def db(hms: Any, unique_name: str) -> Any:
    """A database of the test's own, dropped with its tables afterwards."""
    hms.create_database(Database(name=unique_name, parameters={}))
    yield unique_name
    hms.drop_database(unique_name, True, True)


def _pk(db: str, tbl: str, col: str, seq: int = 1, name: str | None = None) -> SQLPrimaryKey:
    return SQLPrimaryKey(db, tbl, col, seq, name, False, False, True)


def _fk(
    pk: tuple[str, str, str], fk: tuple[str, str, str], seq: int = 1, name: str | None = None
) -> SQLForeignKey:
    return SQLForeignKey(*pk, *fk, seq, 1, 2, name, None, True, False, False)


# ---------------------------------------------------------------------------------- constraints
def test_constraints_of_each_kind_round_trip(hms: Any, db: str) -> None:
    cols = [("id", "int"), ("region", "string"), ("amount", "decimal(10,2)"), ("note", "string")]
    hms.create_table_with_constraints(
        _table(db, "Orders", cols, [("ds", "string")]),
        [_pk(db, "orders", "id", 1, "orders_pk"), _pk(db, "orders", "ds", 2, "orders_pk")],
        [],
        [SQLUniqueConstraint("hive", db, "orders", "note", 1, "orders_uk", True, False, False)],
        [SQLNotNullConstraint("hive", db, "orders", "Region", "orders_nn", True, True, False)],
        [SQLDefaultConstraint("hive", db, "orders", "amount", "0.0", "orders_dc", True, False, True)],
        [SQLCheckConstraint("hive", db, "orders", "amount", "amount >= 0", "orders_ck", True, False, True)],
    )
    pks = hms.get_primary_keys(PrimaryKeysRequest(db, "ORDERS", catName="hive")).primaryKeys
    assert [(p.table_db, p.table_name, p.column_name, p.key_seq, p.pk_name) for p in pks] == [
        (db, "orders", "id", 1, "orders_pk"),
        (db, "orders", "ds", 2, "orders_pk"),
    ]
    assert (pks[0].enable_cstr, pks[0].validate_cstr, pks[0].rely_cstr, pks[0].catName) == (
        False,
        False,
        True,
        "hive",
    )
    uks = hms.get_unique_constraints(UniqueConstraintsRequest("hive", db, "orders")).uniqueConstraints
    assert [(u.column_name, u.key_seq, u.uk_name, u.enable_cstr) for u in uks] == [
        ("note", 1, "orders_uk", True)
    ]
    nns = hms.get_not_null_constraints(NotNullConstraintsRequest("hive", db, "orders")).notNullConstraints
    assert [(n.column_name, n.nn_name, n.enable_cstr, n.validate_cstr) for n in nns] == [
        ("region", "orders_nn", True, True)
    ]
    dcs = hms.get_default_constraints(DefaultConstraintsRequest("hive", db, "orders")).defaultConstraints
    assert [(d.column_name, d.default_value, d.dc_name, d.rely_cstr) for d in dcs] == [
        ("amount", "0.0", "orders_dc", True)
    ]
    ccs = hms.get_check_constraints(CheckConstraintsRequest("hive", db, "orders")).checkConstraints
    assert [(c.column_name, c.check_expression, c.dc_name) for c in ccs] == [
        ("amount", "amount >= 0", "orders_ck")
    ]

    # a foreign key from another table, referencing the composite primary key
    hms.create_table(_table(db, "lines", [("order_id", "int"), ("order_ds", "string"), ("n", "int")]))
    hms.add_foreign_key(
        AddForeignKeyRequest(
            [
                _fk((db, "orders", "id"), (db, "lines", "order_id"), 1, "lines_fk"),
                _fk((db, "orders", "ds"), (db, "lines", "order_ds"), 2, "lines_fk"),
            ]
        )
    )
    fks = hms.get_foreign_keys(ForeignKeysRequest(None, None, db, "lines", catName="hive")).foreignKeys
    assert [
        (
            f.pktable_db,
            f.pktable_name,
            f.pkcolumn_name,
            f.fktable_name,
            f.fkcolumn_name,
            f.key_seq,
            f.fk_name,
            f.pk_name,
        )
        for f in fks
    ] == [
        (db, "orders", "id", "lines", "order_id", 1, "lines_fk", "orders_pk"),
        (db, "orders", "ds", "lines", "order_ds", 2, "lines_fk", "orders_pk"),
    ]
    assert (fks[0].update_rule, fks[0].delete_rule, fks[0].enable_cstr, fks[0].catName) == (
        1,
        2,
        True,
        "hive",
    )
    by_parent = hms.get_foreign_keys(ForeignKeysRequest(db, "orders", None, None, catName="hive")).foreignKeys
    assert [f.fk_name for f in by_parent] == ["lines_fk", "lines_fk"]

    every = hms.get_all_table_constraints(
        AllTableConstraintsRequest(db, "orders", "hive")
    ).allTableConstraints
    assert [p.pk_name for p in every.primaryKeys] == ["orders_pk", "orders_pk"]
    assert every.foreignKeys == []  # orders holds none: its foreign keys are those it references from
    assert [len(every.uniqueConstraints), len(every.notNullConstraints)] == [1, 1]
    assert [len(every.defaultConstraints), len(every.checkConstraints)] == [1, 1]
    lines = hms.get_all_table_constraints(AllTableConstraintsRequest(db, "lines", "hive")).allTableConstraints
    assert [f.fk_name for f in lines.foreignKeys] == ["lines_fk", "lines_fk"]
    assert lines.primaryKeys == []


def test_add_constraint_calls_and_generated_names(hms: Any, db: str) -> None:
    hms.create_table(_table(db, "t", [("a", "int"), ("b", "string"), ("c", "int")]))
    hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "t", "A")]))
    hms.add_unique_constraint(
        AddUniqueConstraintRequest([SQLUniqueConstraint("hive", db, "t", "b", 1, None, False, False, False)])
    )
    hms.add_not_null_constraint(
        AddNotNullConstraintRequest([SQLNotNullConstraint("hive", db, "t", "c", None, True, False, False)])
    )
    hms.add_default_constraint(
        AddDefaultConstraintRequest(
            [SQLDefaultConstraint("hive", db, "t", "c", "7", None, True, False, False)]
        )
    )
    hms.add_check_constraint(
        AddCheckConstraintRequest(
            [SQLCheckConstraint("hive", db, "t", None, "a > c", "t_ck", True, False, False)]
        )
    )
    every = hms.get_all_table_constraints(AllTableConstraintsRequest(db, "t", "hive")).allTableConstraints
    assert [(p.column_name, p.pk_name.split("_")[0]) for p in every.primaryKeys] == [("a", "pk")]
    assert [(u.column_name, u.uk_name.split("_")[0]) for u in every.uniqueConstraints] == [("b", "uk")]
    assert [(n.column_name, n.nn_name.split("_")[0]) for n in every.notNullConstraints] == [("c", "nn")]
    assert [(d.default_value, d.dc_name.split("_")[0]) for d in every.defaultConstraints] == [("7", "dc")]
    assert [(c.column_name, c.check_expression) for c in every.checkConstraints] == [(None, "a > c")]
    # a self-referencing foreign key (c onto the primary key a), named by the metastore
    hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "t", "a"), (db, "t", "c"), 1)]))
    fks = hms.get_foreign_keys(ForeignKeysRequest(db, "t", db, "t")).foreignKeys
    assert [(f.pkcolumn_name, f.fkcolumn_name, f.fk_name[:3]) for f in fks] == [("a", "c", "fk_")]
    with pytest.raises(
        MetaException, match="Cannot be both foreign key and primary/unique key on same table"
    ):
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "t", "b"), (db, "t", "b"), 1, "t_fk2")]))


def test_constraint_refusals(hms: Any, db: str) -> None:
    hms.create_table(_table(db, "p", [("id", "int"), ("v", "string")]))
    hms.create_table(_table(db, "c", [("pid", "int"), ("pv", "bigint")]))
    with pytest.raises(MetaException, match="Parent table not found: nope"):
        hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "nope", "id")]))
    with pytest.raises(MetaException, match="Parent column not found: zz"):
        hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "p", "zz")]))
    with pytest.raises(MetaException, match="no primary keys or unique keys"):
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "id"), (db, "c", "pid"), 1, "c_fk")]))
    hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "p", "id", 1, "p_pk")]))
    with pytest.raises(MetaException, match=f"Primary key already exists for: hive.{db}.p"):
        hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "p", "v", 1, "p_pk2")]))
    with pytest.raises(MetaException, match=f"Constraint name already exists: {db}.p.p_pk"):
        hms.add_not_null_constraint(
            AddNotNullConstraintRequest(
                [SQLNotNullConstraint("hive", db, "p", "v", "P_PK", True, False, False)]
            )
        )
    with pytest.raises(MetaException, match="Foreign key references v:int; but no corresponding"):
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "v"), (db, "c", "pid"), 1, "c_fk")]))
    with pytest.raises(MetaException, match="Foreign key references id:bigint; but no corresponding"):
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "id"), (db, "c", "pv"), 1, "c_fk")]))
    with pytest.raises(MetaException, match="Child column not found: zz"):
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "id"), (db, "c", "zz"), 1, "c_fk")]))
    # a refused create_table_with_constraints leaves no table behind
    with pytest.raises(InvalidObjectException, match="Parent column not found: nope"):
        hms.create_table_with_constraints(
            _table(db, "half", [("x", "int")]), [_pk(db, "half", "nope")], [], [], [], [], []
        )
    assert "half" not in hms.get_all_tables(db)
    # nothing of the refused calls was stored
    assert hms.get_foreign_keys(ForeignKeysRequest(None, None, db, "c")).foreignKeys == []
    assert [p.column_name for p in hms.get_primary_keys(PrimaryKeysRequest(db, "p")).primaryKeys] == ["id"]
    # the constraints of a missing table: none, as Hive
    assert hms.get_primary_keys(PrimaryKeysRequest(db, "missing")).primaryKeys == []
    assert (
        hms.get_check_constraints(CheckConstraintsRequest("hive", "nodb", "missing")).checkConstraints == []
    )


def test_drop_constraint(hms: Any, db: str) -> None:
    hms.create_table(_table(db, "p", [("id", "int")]))
    hms.create_table(_table(db, "c", [("pid", "int")]))
    hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "p", "id", 1, "p_pk")]))
    hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "id"), (db, "c", "pid"), 1, "c_fk")]))
    with pytest.raises(
        NoSuchObjectException, match=f"The constraint: nope does not exist for the associated table: {db}.p"
    ):
        hms.drop_constraint(DropConstraintRequest(db, "p", "nope", "hive"))
    with pytest.raises(NoSuchObjectException):
        hms.drop_constraint(DropConstraintRequest(db, "missing", "p_pk", "hive"))
    hms.drop_constraint(DropConstraintRequest(db, "c", "C_FK"))  # from the table holding it
    assert hms.get_foreign_keys(ForeignKeysRequest(None, None, db, "c")).foreignKeys == []
    hms.drop_constraint(DropConstraintRequest(db, "p", "p_pk", "hive"))
    assert hms.get_primary_keys(PrimaryKeysRequest(db, "p")).primaryKeys == []
    with pytest.raises(NoSuchObjectException):
        hms.drop_constraint(DropConstraintRequest(db, "p", "p_pk", "hive"))


def test_constraints_follow_renames_and_go_with_dropped_tables(hms: Any, db: str, unique_name: str) -> None:
    other = unique_name + "x"
    hms.create_database(Database(name=other, parameters={}))
    try:
        hms.create_table_req(
            CreateTableRequest(
                table=_table(db, "p", [("id", "int")]),
                primaryKeys=[_pk(db, "p", "id", 1, "p_pk")],
                notNullConstraints=[SQLNotNullConstraint("hive", db, "p", "id", "p_nn", True, False, False)],
            )
        )
        hms.create_table(_table(db, "c", [("pid", "int")]))
        hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "id"), (db, "c", "pid"), 1, "c_fk")]))
        renamed = hms.get_table(db, "p")
        renamed.dbName, renamed.tableName = other, "p2"
        hms.alter_table(db, "p", renamed)
        assert hms.get_primary_keys(PrimaryKeysRequest(db, "p")).primaryKeys == []
        pks = hms.get_primary_keys(PrimaryKeysRequest(other, "p2")).primaryKeys
        assert [(p.table_db, p.table_name, p.pk_name) for p in pks] == [(other, "p2", "p_pk")]
        fks = hms.get_foreign_keys(ForeignKeysRequest(None, None, db, "c")).foreignKeys
        assert [(f.pktable_db, f.pktable_name, f.pk_name) for f in fks] == [(other, "p2", "p_pk")]
        # dropping the referenced table drops the foreign keys onto it too (as Hive)
        hms.drop_table(other, "p2", True)
        assert hms.get_foreign_keys(ForeignKeysRequest(None, None, db, "c")).foreignKeys == []
        # a new table of the same name starts without constraints
        hms.create_table(_table(other, "p2", [("id", "int")]))
        every = hms.get_all_table_constraints(
            AllTableConstraintsRequest(other, "p2", "hive")
        ).allTableConstraints
        assert every.primaryKeys == [] and every.notNullConstraints == []
    finally:
        hms.drop_database(other, True, True)


# ---------------------------------------------------------------------------------- truncate
def _col_stats(db: str, tbl: str, part_name: str | None = None) -> ColumnStatistics:
    data = ColumnStatisticsData(longStats=LongColumnStatsData(lowValue=1, highValue=9, numNulls=0, numDVs=3))
    desc = ColumnStatisticsDesc(isTblLevel=part_name is None, dbName=db, tableName=tbl, partName=part_name)
    return ColumnStatistics(desc, [ColumnStatisticsObj("id", "int", data)], engine="hive")


def _files(location: str, names: list[str]) -> Path:
    directory = Path(location.removeprefix("file:"))
    for name in names:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(b"x" * 10)
    return directory


STATS = {"numFiles": "3", "totalSize": "30", "numRows": "12", "rawDataSize": "99"}


def test_truncate_unpartitioned_table(hms: Any, db: str) -> None:
    hms.create_table(
        _table(
            db,
            "t",
            [("id", "int")],
            **STATS,
            COLUMN_STATS_ACCURATE='{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true"}}',
        )
    )
    table = hms.get_table(db, "t")
    directory = _files(table.sd.location, ["a.orc", "sub/b.orc", ".hidden", "_SUCCESS"])
    hms.update_table_column_statistics(_col_stats(db, "t"))
    before = hms.get_current_notificationEventId().eventId
    hms.truncate_table(db, "T", None)
    assert directory.is_dir() and list(directory.iterdir()) == []
    params = hms.get_table(db, "t").parameters
    assert {k: params[k] for k in STATS} == {
        "numFiles": "0",
        "totalSize": "0",
        "numRows": "0",
        "rawDataSize": "0",
    }
    assert json.loads(params["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true"}
    assert hms.get_table_statistics_req(TableStatsRequest(db, "t", ["id"], engine="hive")).tableStats == []
    evs = hms.get_next_notification(NotificationEventRequest(lastEvent=before)).events
    alter = [e for e in evs if e.eventType == "ALTER_TABLE" and e.tableName == "t"]
    assert len(alter) == 1 and json.loads(alter[0].message)["isTruncateOp"] == "true"
    assert [e.eventType for e in evs if e.tableName == "t"] == ["ALTER_TABLE", "DELETE_TBL_COL_STAT_EVENT"]
    # a table without statistics gets no zeros, only the accuracy marker
    hms.create_table(_table(db, "bare", [("id", "int")]))
    hms.truncate_table_req(TruncateTableRequest(db, "bare"))
    params = hms.get_table(db, "bare").parameters
    assert "numRows" not in params and json.loads(params["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true"}


def test_truncate_partitions(hms: Any, db: str) -> None:
    hms.create_table(_table(db, "p", [("id", "int")], [("ds", "string")]))
    table = hms.get_table(db, "p")
    parts = []
    for ds in ("d1", "d2", "d3"):
        part = Partition(values=[ds], dbName=db, tableName="p", sd=table.sd, parameters=dict(STATS))
        part.sd = StorageDescriptor(**{**table.sd.__dict__, "location": f"{table.sd.location}/ds={ds}"})
        parts.append(part)
    hms.add_partitions(parts)
    dirs = {p.values[0]: _files(p.sd.location, ["f.orc"]) for p in hms.get_partitions(db, "p", -1)}
    stray = _files(table.sd.location, ["outside.orc"])  # in the table directory, in no partition
    hms.update_partition_column_statistics(_col_stats(db, "p", "ds=d1"))
    hms.update_partition_column_statistics(_col_stats(db, "p", "ds=d2"))
    hms.truncate_table(db, "p", ["ds=d1", "ds=nope"])
    assert list(dirs["d1"].iterdir()) == [] and list(dirs["d2"].iterdir()) != []
    got = {p.values[0]: p.parameters for p in hms.get_partitions(db, "p", -1)}
    assert got["d1"]["numRows"] == "0" and got["d2"]["numRows"] == "12"
    assert json.loads(got["d1"]["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true"}
    req = PartitionsStatsRequest(db, "p", ["id"], ["ds=d1", "ds=d2"], engine="hive")
    assert list(hms.get_partitions_statistics_req(req).partStats) == ["ds=d2"]
    # the whole partitioned table: every partition, not the table directory itself
    hms.truncate_table_req(TruncateTableRequest(db, "p"))
    assert all(list(d.iterdir()) == [] for d in dirs.values())
    assert (stray / "outside.orc").exists()
    assert {p.parameters["totalSize"] for p in hms.get_partitions(db, "p", -1)} == {"0"}
    assert hms.get_table(db, "p").parameters.get("numRows") is None


def test_truncate_refusals_and_acid_skip(hms: Any, db: str) -> None:
    with pytest.raises(MetaException, match=f"{db}.missing table not found"):
        hms.truncate_table(db, "missing", None)
    hms.create_table(
        _table(db, "acid", [("id", "int")], transactional="true", numRows="5", numFiles="1", totalSize="10")
    )
    location = hms.get_table(db, "acid").sd.location
    directory = _files(location, ["delta_0000001_0000001_0000/bucket_00000"])
    hms.truncate_table_req(
        TruncateTableRequest(
            db, "acid", writeId=2, environmentContext=EnvironmentContext({"truncateSkipDataDeletion": "true"})
        )
    )
    assert (directory / "delta_0000001_0000001_0000/bucket_00000").exists()  # kept: the new base hides it
    marker = json.loads((directory / "base_0000002" / "_metadata_acid").read_text())
    assert marker == {"thisFileVersion": "0", "dataFormat": "truncated"}
    table = hms.get_table(db, "acid")
    assert table.parameters["numRows"] == "0" and table.writeId == 2


# ---------------------------------------------------------------------------------- catalogs
def test_catalog_life_cycle(hms: Any, unique_name: str, tmp_path: Path) -> None:
    cat, location = unique_name, f"file:{tmp_path / 'cat'}"
    hms.create_catalog(
        CreateCatalogRequest(Catalog(name=cat.upper(), description="test", locationUri=location))
    )
    got = hms.get_catalog(GetCatalogRequest(cat)).catalog
    assert (got.name, got.description, got.locationUri, got.createTime > 0) == (cat, "test", location, True)
    assert cat in hms.get_catalogs().names and "hive" in hms.get_catalogs().names
    assert (tmp_path / "cat").is_dir()
    # its default database, at the catalog's location
    default = hms.get_database(f"@{cat}#default")
    assert (default.catalogName, default.locationUri) == (cat, location)
    assert default.description == f"Default database for catalog {cat}"
    assert hms.get_databases(f"@{cat}#") == ["default"]
    assert "default" in hms.get_all_databases()  # the hive catalog's, unchanged
    with pytest.raises(AlreadyExistsException, match=f"Catalog {cat} already exists"):
        hms.create_catalog(CreateCatalogRequest(Catalog(name=cat, locationUri=location)))

    # databases and tables of the catalog by @cat#db and by catName
    hms.create_database(Database(name="sales", catalogName=cat, parameters={}))
    assert hms.get_database(f"@{cat}#sales").locationUri.endswith(f"{location}/sales.db")
    with pytest.raises(NoSuchObjectException):
        hms.get_database("sales")  # not in the hive catalog
    table = _table("sales", "t", [("id", "int")])
    table.catName = cat
    hms.create_table(table)
    assert hms.get_table(f"@{cat}#sales", "t").catName == cat
    assert hms.get_all_tables(f"@{cat}#sales") == ["t"]
    assert hms.get_table_req(GetTableRequest(dbName="sales", tblName="t", catName=cat)).table.tableName == "t"

    with pytest.raises(InvalidOperationException, match=f"non-default databases in the catalog {cat}"):
        hms.drop_catalog(DropCatalogRequest(cat))
    hms.drop_database(f"@{cat}#sales", True, True)
    hms.create_table(_table(f"@{cat}#default", "u", [("id", "int")]))
    with pytest.raises(
        InvalidOperationException, match=f"still objects in the default database for catalog {cat}"
    ):
        hms.drop_catalog(DropCatalogRequest(cat))
    hms.drop_table(f"@{cat}#default", "u", True)
    hms.alter_catalog(
        AlterCatalogRequest(cat, Catalog(name=cat, description="changed", locationUri=location))
    )
    assert hms.get_catalog(GetCatalogRequest(cat)).catalog.description == "changed"

    hms.drop_catalog(DropCatalogRequest(cat.upper()))
    assert cat not in hms.get_catalogs().names
    assert not (tmp_path / "cat").exists()
    assert hms.get_databases(f"@{cat}#") == []
    with pytest.raises(NoSuchObjectException, match=f"No catalog {cat}"):
        hms.get_catalog(GetCatalogRequest(cat))
    with pytest.raises(NoSuchObjectException, match=f"No catalog {cat}"):
        hms.drop_catalog(DropCatalogRequest(cat))


def test_catalog_refusals(hms: Any, unique_name: str, tmp_path: Path) -> None:
    with pytest.raises(MetaException, match="Can not drop hive catalog"):
        hms.drop_catalog(DropCatalogRequest("hive"))
    with pytest.raises(InvalidObjectException, match="is not a valid catalog name"):
        hms.create_catalog(CreateCatalogRequest(Catalog(name="bad-name", locationUri=str(tmp_path))))
    with pytest.raises(InvalidObjectException, match="You must specify a path for the catalog"):
        hms.create_catalog(CreateCatalogRequest(Catalog(name=unique_name)))
    with pytest.raises(InvalidObjectException, match=f"No such catalog {unique_name}"):
        hms.create_database(Database(name="x", catalogName=unique_name, parameters={}))
    with pytest.raises(NoSuchObjectException):
        hms.alter_catalog(
            AlterCatalogRequest(unique_name, Catalog(name=unique_name, locationUri=str(tmp_path)))
        )
    with pytest.raises(InvalidOperationException):
        hms.alter_catalog(AlterCatalogRequest("hive", Catalog(name="other", locationUri=str(tmp_path))))
    with pytest.raises(MetaException, match="Database name is malformed"):
        hms.get_database(f"@{unique_name}")


# ---------------------------------------------------------------------------------- partition moves
def _partitioned(hms: Any, db: str, name: str, days: list[str], **params: str) -> Table:
    hms.create_table(_table(db, name, [("id", "int")], [("ds", "string"), ("hr", "string")], **params))
    table = hms.get_table(db, name)
    hms.add_partitions(
        [
            Partition(values=[d, h], dbName=db, tableName=name, parameters={"numRows": "1"})
            for d in days
            for h in ("00", "01")
        ]
    )
    return table


def test_get_part_specs_by_filter(hms: Any, db: str) -> None:
    table = _partitioned(hms, db, "plain", ["d1", "d2"])
    specs = hms.get_part_specs_by_filter(db, "plain", 'ds = "d1"', -1)
    assert len(specs) == 1
    spec = specs[0]
    assert (spec.dbName, spec.tableName, spec.catName, spec.rootPath) == (
        db,
        "plain",
        "hive",
        table.sd.location,
    )
    assert [p.values for p in spec.partitionList.partitions] == [["d1", "00"], ["d1", "01"]]
    assert spec.sharedSDPartitionSpec is None
    assert sum(len(s.partitionList.partitions) for s in hms.get_partitions_pspec(db, "plain", -1)) == 4
    # with Hive's grouping switch: one shared storage descriptor, paths relative to the table's
    grouped = _partitioned(
        hms, db, "grouped", ["d1"], **{"hive.hcatalog.partition.spec.grouping.enabled": "true"}
    )
    outside = Partition(values=["x", "00"], dbName=db, tableName="grouped", sd=grouped.sd, parameters={})
    outside.sd = StorageDescriptor(
        **{**grouped.sd.__dict__, "location": grouped.sd.location.rsplit("/", 1)[0] + "/elsewhere/x"}
    )
    hms.add_partition(outside)
    specs = hms.get_part_specs_by_filter(db, "grouped", "", -1)
    shared = [s for s in specs if s.sharedSDPartitionSpec is not None]
    listed = [s for s in specs if s.partitionList is not None]
    assert len(shared) == 1 and len(listed) == 1
    assert (
        shared[0].rootPath == grouped.sd.location
        and shared[0].sharedSDPartitionSpec.sd.location == grouped.sd.location
    )
    assert sorted(p.relativePath for p in shared[0].sharedSDPartitionSpec.partitions) == [
        "/ds=d1/hr=00",
        "/ds=d1/hr=01",
    ]
    assert [p.values for p in listed[0].partitionList.partitions] == [["x", "00"]]
    with pytest.raises(NoSuchObjectException):
        hms.get_part_specs_by_filter(db, "missing", "", -1)
    with pytest.raises(MetaException):
        hms.get_part_specs_by_filter(db, "plain", "nokey = 1", -1)


def test_exchange_partitions(hms: Any, db: str) -> None:
    source = _partitioned(hms, db, "src", ["d1", "d2"])
    hms.create_table(_table(db, "dst", [("id", "int")], [("ds", "string"), ("hr", "string")]))
    dest = hms.get_table(db, "dst")
    for p in hms.get_partitions(db, "src", -1):
        _files(p.sd.location, ["f.orc"])
    moved = hms.exchange_partitions({"ds": "d1"}, db, "src", db, "dst")
    assert sorted(p.values for p in moved) == [["d1", "00"], ["d1", "01"]]
    assert sorted(hms.get_partition_names(db, "src", -1)) == ["ds=d2/hr=00", "ds=d2/hr=01"]
    got = {tuple(p.values): p for p in hms.get_partitions(db, "dst", -1)}
    assert sorted(got) == [("d1", "00"), ("d1", "01")]
    assert got[("d1", "00")].sd.location == f"{dest.sd.location}/ds=d1/hr=00"
    assert got[("d1", "00")].parameters["numRows"] == "1"
    local = Path(dest.sd.location.removeprefix("file:"))
    assert (local / "ds=d1/hr=00/f.orc").exists() and not Path(
        source.sd.location.removeprefix("file:"), "ds=d1"
    ).exists()
    # as Hive 4: an empty Partition back
    assert hms.exchange_partition({"ds": "d2", "hr": "01"}, db, "src", db, "dst") == Partition()
    assert hms.get_partition_names(db, "src", -1) == ["ds=d2/hr=00"]

    with pytest.raises(
        MetaException, match=r"No partition is found with the values \{ds=d9\} for the table src"
    ):
        hms.exchange_partitions({"ds": "d9"}, db, "src", db, "dst")
    hms.add_partition(Partition(values=["d2", "00"], dbName=db, tableName="dst", parameters={}))
    with pytest.raises(MetaException, match="The partition ds=d2/hr=00 already exists in the table dst"):
        hms.exchange_partitions({"ds": "d2"}, db, "src", db, "dst")
    hms.create_table(_table(db, "other", [("id", "bigint")], [("ds", "string"), ("hr", "string")]))
    with pytest.raises(MetaException, match="The tables have different schemas"):
        hms.exchange_partitions({"ds": "d2"}, db, "src", db, "other")
    with pytest.raises(MetaException, match=f"The source table hive.{db}.nope not found"):
        hms.exchange_partitions({"ds": "d2"}, db, "nope", db, "dst")
    with pytest.raises(MetaException, match=f"The destination table hive.{db}.nope not found"):
        hms.exchange_partitions({"ds": "d2"}, db, "src", db, "nope")
    assert hms.get_partition_names(db, "src", -1) == ["ds=d2/hr=00"]  # the refusals changed nothing


# ---------------------------------------------------------------------------------- write conflicts
def _open(hms: Any) -> int:
    return hms.open_txns(OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]


def _write_lock(hms: Any, txn: int, db: str, table: str, op: int, part: str | None = None) -> None:
    comp = LockComponent(
        type=LockType.SHARED_WRITE,
        level=LockLevel.PARTITION if part else LockLevel.TABLE,
        dbname=db,
        tablename=table,
        partitionname=part,
        operationType=op,
        isTransactional=True,
    )
    assert (
        hms.lock(LockRequest(component=[comp], txnid=txn, user="u", hostname="h")).state == LockState.ACQUIRED
    )


def test_get_latest_txnid_in_conflict(hms: Any, db: str) -> None:
    first, second, reader = _open(hms), _open(hms), _open(hms)
    _write_lock(hms, first, db, "t", DataOperationType.UPDATE)
    _write_lock(hms, second, db, "t", DataOperationType.DELETE)
    _write_lock(hms, reader, db, "other", DataOperationType.UPDATE)
    assert hms.get_latest_txnid_in_conflict(second) == 0  # nothing committed yet
    hms.commit_txn(CommitTxnRequest(txnid=first))
    assert hms.get_latest_txnid_in_conflict(second) == first  # overlapped, same table
    assert hms.get_latest_txnid_in_conflict(reader) == 0  # another table
    later = _open(hms)  # began after the commit: no overlap
    _write_lock(hms, later, db, "t", DataOperationType.UPDATE)
    assert hms.get_latest_txnid_in_conflict(later) == 0
    # partitions: only the same partition conflicts
    p1, p2 = _open(hms), _open(hms)
    _write_lock(hms, p1, db, "pt", DataOperationType.UPDATE, "ds=1")
    _write_lock(hms, p2, db, "pt", DataOperationType.UPDATE, "ds=2")
    hms.commit_txn(CommitTxnRequest(txnid=p1))
    assert hms.get_latest_txnid_in_conflict(p2) == 0
    for t in (second, reader, later, p2):
        hms.abort_txn(AbortTxnRequest(txnid=t))
    assert hms.get_latest_txnid_in_conflict(10**12) == 0  # an unknown txn: no conflict


def test_write_set_follows_the_txn_purge_and_the_table(tmp_path: Path) -> None:
    """In process (a store of its own: the purge would disturb the shared one)."""
    store = Store(f"sqlite:///{tmp_path / 'ms.db'}")
    try:
        m = LocalMetastore(store, str(tmp_path / "wh"))
        early, late = (_open(m) for _ in range(2))
        _write_lock(m, early, "default", "t", DataOperationType.UPDATE)
        _write_lock(m, late, "default", "t", DataOperationType.UPDATE)
        m.commit_txn(CommitTxnRequest(txnid=early))
        future = int(time.time() * 1000) + 10
        m.purge_completed_txns(retention_ms=0, now=future)
        assert m.get_latest_txnid_in_conflict(late) == early  # `late` is open: the record stays
        m.abort_txn(AbortTxnRequest(txnid=late))
        m.purge_completed_txns(retention_ms=0, now=future)
        with store.read() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(WRITE_SET)).scalar() == 0
    finally:
        store.dispose()


def test_constraint_events(hms: Any, db: str) -> None:
    """Hive's events, in Hive 4.2's order: CREATE_TABLE, then one event per kind of constraint;
    a foreign key's event is named after the table it references."""
    start = hms.get_current_notificationEventId().eventId
    hms.create_table_with_constraints(
        _table(db, "p", [("id", "int"), ("name", "string")]),
        [_pk(db, "p", "id", 1, "p_pk")],
        [],
        [SQLUniqueConstraint("hive", db, "p", "name", 1, "p_uk", False, False, False)],
        [SQLNotNullConstraint("hive", db, "p", "name", None, True, False, False)],
        [SQLDefaultConstraint("hive", db, "p", "name", "'x'", "p_dc", True, False, False)],
        [SQLCheckConstraint("hive", db, "p", "id", "id > 0", "p_cc", True, False, False)],
    )
    hms.create_table(_table(db, "c", [("id", "int")]))
    hms.add_foreign_key(AddForeignKeyRequest([_fk((db, "p", "ID"), (db, "c", "id"), 1, "c_fk")]))
    hms.drop_constraint(DropConstraintRequest(db, "C", "c_fk", "hive"))
    got = [
        event_messages.parse_event(e)
        for e in hms.get_next_notification(NotificationEventRequest(start)).events
    ]
    assert [(m.event.eventType, m.db, m.table_name) for m in got] == [
        ("CREATE_TABLE", db, "p"),
        ("ADD_PRIMARYKEY", db, "p"),
        ("ADD_UNIQUECONSTRAINT", db, "p"),
        ("ADD_NOTNULLCONSTRAINT", db, "p"),
        ("ADD_CHECKCONSTRAINT", db, "p"),
        ("ADD_DEFAULTCONSTRAINT", db, "p"),
        ("CREATE_TABLE", db, "c"),
        ("ADD_FOREIGNKEY", db, "p"),
        ("DROP_CONSTRAINT", db, "c"),
    ]
    assert isinstance(got[1], event_messages.AddPrimaryKey)
    assert [(k.column_name, k.pk_name, k.catName) for k in got[1].constraints] == [("id", "p_pk", "hive")]
    assert got[3].constraints[0].nn_name.startswith("nn_")  # the generated name, as stored
    assert [(k.pkcolumn_name, k.fktable_name, k.fk_name) for k in got[7].constraints] == [("id", "c", "c_fk")]
    assert (got[8].db_name, got[8].table, got[8].constraint_name) == (db, "c", "c_fk")
    # a refused call writes nothing
    before = hms.get_current_notificationEventId().eventId
    with pytest.raises(MetaException):
        hms.add_primary_key(AddPrimaryKeyRequest([_pk(db, "p", "name", 1, "again")]))
    assert hms.get_current_notificationEventId().eventId == before


def test_dropping_a_catalog_never_deletes_the_warehouse(
    hms: Any, hivemesh_server: Any, unique_name: str
) -> None:
    """A catalog created at the warehouse root (Hive would delete the whole warehouse with it)."""
    warehouse = Path(hivemesh_server.warehouse)
    hms.create_catalog(CreateCatalogRequest(Catalog(name=unique_name, locationUri=f"file:{warehouse}")))
    hms.drop_catalog(DropCatalogRequest(unique_name))
    assert warehouse.is_dir() and hms.get_database("default").name == "default"
