"""Indexes on SDS.SERDE_ID and SDS.CD_ID (Hive's SDS_N49 and SDS_N50).

Deleting a storage descriptor's SerDe (every alter or drop of a partition does) makes the database
check that no SDS row still references it; without these indexes that check reads the whole SDS
table once per deleted row, so altering 1,000 partitions of a 100,000-partition table took seconds.

Revision ID: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create SDS_SERDE and SDS_CD (unless revision 0001 made them: it creates the tables as
    ``hivemesh.metastore.schema`` defines them now)."""
    have = {ix["name"] for ix in sa.inspect(op.get_bind()).get_indexes("SDS")}
    if "SDS_SERDE" not in have:
        op.create_index("SDS_SERDE", "SDS", ["SERDE_ID"])
    if "SDS_CD" not in have:
        op.create_index("SDS_CD", "SDS", ["CD_ID"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("SDS_CD", table_name="SDS")
    op.drop_index("SDS_SERDE", table_name="SDS")
