"""The remotes table ``HIVEMESH_REMOTES`` (one row per database or table link).

Stores created before the schema was versioned already have the table: it is kept as it is, and
the store is marked as being at this revision. Later revisions use explicit ``op.*`` calls.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``HIVEMESH_REMOTES`` unless it exists."""
    if sa.inspect(op.get_bind()).has_table("HIVEMESH_REMOTES"):
        return
    op.create_table(
        "HIVEMESH_REMOTES",
        sa.Column("REMOTE_ID", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("KIND", sa.String(16), nullable=False),
        sa.Column("LOCAL_DB", sa.String(256), nullable=False),
        sa.Column("LOCAL_TABLE", sa.String(256), nullable=False, server_default=""),
        sa.Column("REMOTE_DB", sa.String(256), nullable=False),
        sa.Column("REMOTE_TABLE", sa.String(256), nullable=True),
        sa.Column("VIA", sa.String(16), nullable=False),
        sa.Column("URIS", sa.Text, nullable=False),
        sa.Column("PROPERTIES", sa.Text, nullable=False),
        sa.Column("OWNER", sa.String(256), nullable=True),
        sa.Column("CREATE_TIME", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("LOCAL_DB", "LOCAL_TABLE", name="UQ_HIVEMESH_REMOTES_LOCAL"),
    )


def downgrade() -> None:
    """Drop ``HIVEMESH_REMOTES``."""
    op.drop_table("HIVEMESH_REMOTES")
