"""PARTITION_EVENTS: partitions marked for an event (``markPartitionForEvent``).

Revision ID: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create PARTITION_EVENTS and its index on PARTITION_NAME."""
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "PARTITION_EVENTS",
        sa.Column("PART_NAME_ID", big_id, primary_key=True, autoincrement=True),
        sa.Column("CAT_NAME", sa.String(256), nullable=False),
        sa.Column("DB_NAME", sa.String(128), nullable=False),
        sa.Column("TBL_NAME", sa.String(256), nullable=False),
        sa.Column("PARTITION_NAME", sa.String(767), nullable=False),
        sa.Column("EVENT_TYPE", sa.Integer, nullable=False),
        sa.Column("EVENT_TIME", sa.BigInteger, nullable=False),
    )
    op.create_index("PARTITIONEVENTINDEX", "PARTITION_EVENTS", ["PARTITION_NAME"])


def downgrade() -> None:
    """Drop PARTITION_EVENTS."""
    op.drop_index("PARTITIONEVENTINDEX", table_name="PARTITION_EVENTS")
    op.drop_table("PARTITION_EVENTS")
