"""WRITE_SET: the updates and deletes of committed txns (``get_latest_txnid_in_conflict``).

Revision ID: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create WRITE_SET and its index on (WS_DATABASE, WS_TABLE)."""
    op.create_table(
        "WRITE_SET",
        sa.Column("WS_DATABASE", sa.String(128), nullable=False),
        sa.Column("WS_TABLE", sa.String(256), nullable=False),
        sa.Column("WS_PARTITION", sa.String(767)),
        sa.Column("WS_TXNID", sa.BigInteger, nullable=False),
        sa.Column("WS_COMMIT_ID", sa.BigInteger, nullable=False),
        sa.Column("WS_OPERATION_TYPE", sa.String(1), nullable=False),
    )
    op.create_index("WRITE_SET_TABLE", "WRITE_SET", ["WS_DATABASE", "WS_TABLE"])


def downgrade() -> None:
    """Drop WRITE_SET."""
    op.drop_index("WRITE_SET_TABLE", table_name="WRITE_SET")
    op.drop_table("WRITE_SET")
