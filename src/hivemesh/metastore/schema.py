"""The metadata store schema, named after the Hive metastore schema so HMS operators find their way.

Tables and columns follow Hive's ``hive-schema-*.sql`` (``DBS``, ``TBLS``, ``SDS``, ``COLUMNS_V2`` ...)
with these differences: column statistics keep their ``ColumnStatisticsData`` as Thrift JSON in
``STATS_DATA`` instead of one column per statistic; ``PARTITION_KEY_VALS`` also carries ``TBL_ID``
so partition filters use an index; skewed-column tables are not kept (Spark and Trino do not
write them). The schema is created and upgraded by Alembic (``hivemesh.metastore.migrations``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrement needs INTEGER
Text = sa.Text()


def _id(name: str) -> sa.Column[Any]:
    return sa.Column(name, BigId, primary_key=True, autoincrement=True)


def _fk(
    name: str, target: str, *, nullable: bool = False, ondelete: str | None = "CASCADE"
) -> sa.Column[Any]:
    return sa.Column(name, BigId, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


def _params(name: str, owner_col: str, owner: str) -> sa.Table:
    return sa.Table(
        name,
        metadata,
        _fk(owner_col, owner),
        sa.Column("PARAM_KEY", sa.String(256), nullable=False),
        sa.Column("PARAM_VALUE", Text),
        sa.PrimaryKeyConstraint(owner_col, "PARAM_KEY"),
    )


CTLGS = sa.Table(
    "CTLGS",
    metadata,
    _id("CTLG_ID"),
    sa.Column("NAME", sa.String(256), nullable=False, unique=True),
    sa.Column("DESC", sa.String(4000)),
    sa.Column("LOCATION_URI", sa.String(4000), nullable=False),
    sa.Column("CREATE_TIME", sa.Integer),
)

DBS = sa.Table(
    "DBS",
    metadata,
    _id("DB_ID"),
    sa.Column("NAME", sa.String(128), nullable=False),
    sa.Column("CTLG_NAME", sa.String(256), nullable=False, server_default="hive"),
    sa.Column("DESC", sa.String(4000)),
    sa.Column("DB_LOCATION_URI", sa.String(4000), nullable=False),
    sa.Column("DB_MANAGED_LOCATION_URI", sa.String(4000)),  # Hive 3+: where its managed tables go
    sa.Column("OWNER_NAME", sa.String(128)),
    sa.Column("OWNER_TYPE", sa.Integer),
    sa.Column("CREATE_TIME", sa.Integer),
    sa.UniqueConstraint("CTLG_NAME", "NAME", name="UNIQUE_DATABASE"),
)
DATABASE_PARAMS = _params("DATABASE_PARAMS", "DB_ID", "DBS.DB_ID")

SERDES = sa.Table(
    "SERDES",
    metadata,
    _id("SERDE_ID"),
    sa.Column("NAME", sa.String(128)),
    sa.Column("SLIB", sa.String(4000)),
    sa.Column("DESCRIPTION", sa.String(4000)),
    sa.Column("SERIALIZER_CLASS", sa.String(4000)),
    sa.Column("DESERIALIZER_CLASS", sa.String(4000)),
    sa.Column("SERDE_TYPE", sa.Integer),
)
SERDE_PARAMS = _params("SERDE_PARAMS", "SERDE_ID", "SERDES.SERDE_ID")

CDS = sa.Table("CDS", metadata, _id("CD_ID"))

COLUMNS_V2 = sa.Table(
    "COLUMNS_V2",
    metadata,
    _fk("CD_ID", "CDS.CD_ID"),
    sa.Column("COLUMN_NAME", sa.String(767), nullable=False),
    sa.Column("TYPE_NAME", Text, nullable=False),
    sa.Column("COMMENT", sa.String(4000)),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("CD_ID", "COLUMN_NAME"),
)

SDS = sa.Table(
    "SDS",
    metadata,
    _id("SD_ID"),
    _fk("CD_ID", "CDS.CD_ID", nullable=True, ondelete=None),
    _fk("SERDE_ID", "SERDES.SERDE_ID", nullable=True, ondelete=None),
    sa.Column("INPUT_FORMAT", sa.String(4000)),
    sa.Column("OUTPUT_FORMAT", sa.String(4000)),
    sa.Column("LOCATION", sa.String(4000)),
    sa.Column("IS_COMPRESSED", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("IS_STOREDASSUBDIRECTORIES", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("NUM_BUCKETS", sa.Integer, nullable=False, server_default="-1"),
)
SD_PARAMS = _params("SD_PARAMS", "SD_ID", "SDS.SD_ID")

BUCKETING_COLS = sa.Table(
    "BUCKETING_COLS",
    metadata,
    _fk("SD_ID", "SDS.SD_ID"),
    sa.Column("BUCKET_COL_NAME", sa.String(256)),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("SD_ID", "INTEGER_IDX"),
)

SORT_COLS = sa.Table(
    "SORT_COLS",
    metadata,
    _fk("SD_ID", "SDS.SD_ID"),
    sa.Column("COLUMN_NAME", sa.String(767)),
    sa.Column("ORDER", sa.Integer, nullable=False),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("SD_ID", "INTEGER_IDX"),
)

TBLS = sa.Table(
    "TBLS",
    metadata,
    _id("TBL_ID"),
    _fk("DB_ID", "DBS.DB_ID", ondelete=None),
    sa.Column("TBL_NAME", sa.String(256), nullable=False),
    sa.Column("OWNER", sa.String(767)),
    sa.Column("OWNER_TYPE", sa.Integer),
    sa.Column("CREATE_TIME", sa.Integer, nullable=False),
    sa.Column("LAST_ACCESS_TIME", sa.Integer, nullable=False, server_default="0"),
    sa.Column("RETENTION", sa.Integer, nullable=False, server_default="0"),
    _fk("SD_ID", "SDS.SD_ID", nullable=True, ondelete=None),
    sa.Column("TBL_TYPE", sa.String(128)),
    sa.Column("VIEW_ORIGINAL_TEXT", Text),
    sa.Column("VIEW_EXPANDED_TEXT", Text),
    sa.Column("IS_REWRITE_ENABLED", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("WRITE_ID", sa.BigInteger, nullable=False, server_default="0"),
    sa.UniqueConstraint("DB_ID", "TBL_NAME", name="UNIQUETABLE"),
)
TABLE_PARAMS = _params("TABLE_PARAMS", "TBL_ID", "TBLS.TBL_ID")

PARTITION_KEYS = sa.Table(
    "PARTITION_KEYS",
    metadata,
    _fk("TBL_ID", "TBLS.TBL_ID"),
    sa.Column("PKEY_NAME", sa.String(128), nullable=False),
    sa.Column("PKEY_TYPE", sa.String(767), nullable=False),
    sa.Column("PKEY_COMMENT", sa.String(4000)),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("TBL_ID", "PKEY_NAME"),
)

PARTITIONS = sa.Table(
    "PARTITIONS",
    metadata,
    _id("PART_ID"),
    _fk("TBL_ID", "TBLS.TBL_ID", ondelete=None),
    sa.Column("PART_NAME", sa.String(767), nullable=False),
    _fk("SD_ID", "SDS.SD_ID", nullable=True, ondelete=None),
    sa.Column("CREATE_TIME", sa.Integer, nullable=False),
    sa.Column("LAST_ACCESS_TIME", sa.Integer, nullable=False, server_default="0"),
    sa.Column("WRITE_ID", sa.BigInteger, nullable=False, server_default="0"),
    sa.UniqueConstraint("TBL_ID", "PART_NAME", name="UNIQUEPARTITION"),
)
PARTITION_PARAMS = _params("PARTITION_PARAMS", "PART_ID", "PARTITIONS.PART_ID")

PARTITION_KEY_VALS = sa.Table(
    "PARTITION_KEY_VALS",
    metadata,
    _fk("PART_ID", "PARTITIONS.PART_ID"),
    sa.Column("TBL_ID", BigId, nullable=False),
    sa.Column("PART_KEY_VAL", sa.String(256)),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("PART_ID", "INTEGER_IDX"),
    sa.Index("PARTITION_KEY_VALS_VALUE", "TBL_ID", "INTEGER_IDX", "PART_KEY_VAL"),
)

FUNCS = sa.Table(
    "FUNCS",
    metadata,
    _id("FUNC_ID"),
    _fk("DB_ID", "DBS.DB_ID", ondelete=None),
    sa.Column("FUNC_NAME", sa.String(128), nullable=False),
    sa.Column("CLASS_NAME", sa.String(4000)),
    sa.Column("OWNER_NAME", sa.String(128)),
    sa.Column("OWNER_TYPE", sa.Integer),
    sa.Column("CREATE_TIME", sa.Integer, nullable=False),
    sa.Column("FUNC_TYPE", sa.Integer, nullable=False),
    sa.UniqueConstraint("DB_ID", "FUNC_NAME", name="UNIQUEFUNCTION"),
)

FUNC_RU = sa.Table(
    "FUNC_RU",
    metadata,
    _fk("FUNC_ID", "FUNCS.FUNC_ID"),
    sa.Column("RESOURCE_TYPE", sa.Integer, nullable=False),
    sa.Column("RESOURCE_URI", sa.String(4000)),
    sa.Column("INTEGER_IDX", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("FUNC_ID", "INTEGER_IDX"),
)

TAB_COL_STATS = sa.Table(
    "TAB_COL_STATS",
    metadata,
    _id("CS_ID"),
    _fk("TBL_ID", "TBLS.TBL_ID"),
    sa.Column("COLUMN_NAME", sa.String(767), nullable=False),
    sa.Column("COLUMN_TYPE", sa.String(128), nullable=False),
    sa.Column("ENGINE", sa.String(128), nullable=False, server_default="hive"),
    sa.Column("LAST_ANALYZED", sa.BigInteger, nullable=False),
    sa.Column("STATS_DATA", Text, nullable=False),
    sa.UniqueConstraint("TBL_ID", "COLUMN_NAME", "ENGINE", name="UNIQUE_TAB_COL_STATS"),
)

PART_COL_STATS = sa.Table(
    "PART_COL_STATS",
    metadata,
    _id("CS_ID"),
    _fk("PART_ID", "PARTITIONS.PART_ID"),
    sa.Column("COLUMN_NAME", sa.String(767), nullable=False),
    sa.Column("COLUMN_TYPE", sa.String(128), nullable=False),
    sa.Column("ENGINE", sa.String(128), nullable=False, server_default="hive"),
    sa.Column("LAST_ANALYZED", sa.BigInteger, nullable=False),
    sa.Column("STATS_DATA", Text, nullable=False),
    sa.UniqueConstraint("PART_ID", "COLUMN_NAME", "ENGINE", name="UNIQUE_PART_COL_STATS"),
)

# Table constraints (Hive's KEY_CONSTRAINTS): one row per column of a constraint. PARENT_TBL_ID is
# the table a primary key, unique, not-null, default or check constraint is on, and the table a
# foreign key references; CHILD_TBL_ID the table holding a foreign key. Unlike Hive, columns are
# kept by name (Hive: a column descriptor and an index into it), so a table's new column list never
# has to be re-pointed; a NULL PARENT_COLUMN_NAME is a table-level check constraint. Rows go with
# either table (ON DELETE CASCADE), as Hive drops both sides' constraints with a table.
KEY_CONSTRAINTS = sa.Table(
    "KEY_CONSTRAINTS",
    metadata,
    _fk("PARENT_TBL_ID", "TBLS.TBL_ID"),
    sa.Column("CONSTRAINT_NAME", sa.String(400), nullable=False),
    sa.Column("POSITION", sa.BigInteger, nullable=False),
    sa.Column("CONSTRAINT_TYPE", sa.SmallInteger, nullable=False),
    sa.Column("PARENT_COLUMN_NAME", sa.String(767)),
    _fk("CHILD_TBL_ID", "TBLS.TBL_ID", nullable=True),
    sa.Column("CHILD_COLUMN_NAME", sa.String(767)),
    sa.Column("UPDATE_RULE", sa.Integer),
    sa.Column("DELETE_RULE", sa.Integer),
    sa.Column("ENABLE_VALIDATE_RELY", sa.SmallInteger, nullable=False),
    sa.Column("DEFAULT_VALUE", Text),
    sa.PrimaryKeyConstraint("PARENT_TBL_ID", "CONSTRAINT_NAME", "POSITION", name="CONSTRAINTS_PK"),
    sa.Index("CONSTRAINTS_CHILD_TBL", "CHILD_TBL_ID"),
)

# markPartitionForEvent: keyed by names, not ids, and kept when the table goes (as in Hive);
# PARTITION_NAME is the partition's values joined with ",", in partition key order.
PARTITION_EVENTS = sa.Table(
    "PARTITION_EVENTS",
    metadata,
    _id("PART_NAME_ID"),
    sa.Column("CAT_NAME", sa.String(256), nullable=False),
    sa.Column("DB_NAME", sa.String(128), nullable=False),
    sa.Column("TBL_NAME", sa.String(256), nullable=False),
    sa.Column("PARTITION_NAME", sa.String(767), nullable=False),
    sa.Column("EVENT_TYPE", sa.Integer, nullable=False),
    sa.Column("EVENT_TIME", sa.BigInteger, nullable=False),
    sa.Index("PARTITIONEVENTINDEX", "PARTITION_NAME"),
)

sa.Index("TBLS_SD", TBLS.c.SD_ID)
sa.Index("PARTITIONS_SD", PARTITIONS.c.SD_ID)
sa.Index("SDS_SERDE", SDS.c.SERDE_ID)  # FK checks when a SerDe is deleted (migration 0004)
sa.Index("SDS_CD", SDS.c.CD_ID)
sa.Index("FUNCS_DB", FUNCS.c.DB_ID)
