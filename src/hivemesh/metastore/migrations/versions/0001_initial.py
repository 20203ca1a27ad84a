"""Initial metastore schema (catalogs, databases, tables, partitions, functions, column statistics).

This baseline creates the schema as ``hivemesh.metastore.schema`` defined it at version 1; every
later revision must use explicit ``op.*`` calls so that it stays correct as the schema grows.

Revision ID: 0001
"""

from alembic import op

from hivemesh.metastore import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

V1_TABLES = [
    "CTLGS", "DBS", "DATABASE_PARAMS", "SERDES", "SERDE_PARAMS", "CDS", "COLUMNS_V2", "SDS",
    "SD_PARAMS", "BUCKETING_COLS", "SORT_COLS", "TBLS", "TABLE_PARAMS", "PARTITION_KEYS",
    "PARTITIONS", "PARTITION_PARAMS", "PARTITION_KEY_VALS", "FUNCS", "FUNC_RU", "TAB_COL_STATS",
    "PART_COL_STATS",
]  # fmt: skip


def upgrade() -> None:
    """Create the version-1 tables."""
    bind = op.get_bind()
    schema.metadata.create_all(bind, tables=[schema.metadata.tables[t] for t in V1_TABLES])


def downgrade() -> None:
    """Drop the version-1 tables."""
    bind = op.get_bind()
    schema.metadata.drop_all(bind, tables=[schema.metadata.tables[t] for t in V1_TABLES])
