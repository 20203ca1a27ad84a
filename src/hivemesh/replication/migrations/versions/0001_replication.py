"""The replicator's state: policies (checkpoint, lease, last error), the objects each policy
covers, the source txns opened on the target, and the ledger of copied files.

The tables as they are at this revision, spelled out (not taken from
``hivemesh.replication.state``, whose definitions move on with later revisions).

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "HIVEMESH_REPL_POLICIES",
        sa.Column("POLICY", sa.String(128), primary_key=True),
        sa.Column("SOURCE", sa.String(128), nullable=False),
        sa.Column("TARGET", sa.String(128), nullable=False),
        sa.Column("PHASE", sa.String(16), nullable=False),
        sa.Column("EVENT_ID", sa.BigInteger, nullable=True),
        sa.Column("BOOTSTRAP_EVENT_ID", sa.BigInteger, nullable=True),
        sa.Column("SOURCE_EVENT_ID", sa.BigInteger, nullable=True),
        sa.Column("EVENT_TIME", sa.BigInteger, nullable=True),
        sa.Column("EVENTS_APPLIED", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("RULES", sa.Text, nullable=True),
        sa.Column("RESYNCS", sa.Integer, nullable=False, server_default="0"),
        sa.Column("RESYNC_REASON", sa.Text, nullable=True),
        sa.Column("COPYING", sa.Text, nullable=True),
        sa.Column("LAST_ERROR", sa.Text, nullable=True),
        sa.Column("LAST_ERROR_MS", sa.BigInteger, nullable=True),
        sa.Column("LAST_SUCCESS_MS", sa.BigInteger, nullable=True),
        sa.Column("LEASE_OWNER", sa.String(256), nullable=True),
        sa.Column("LEASE_EXPIRES_MS", sa.BigInteger, nullable=True),
        sa.Column("UPDATED_MS", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "HIVEMESH_REPL_OBJECTS",
        sa.Column("POLICY", sa.String(128), primary_key=True),
        sa.Column("DB_NAME", sa.String(256), primary_key=True),
        sa.Column("TBL_NAME", sa.String(256), primary_key=True),
        sa.Column("STATE", sa.String(16), nullable=False),
        sa.Column("EVENT_ID", sa.BigInteger, nullable=True),
        sa.Column("UPDATED_MS", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "HIVEMESH_REPL_TXNS",
        sa.Column("POLICY", sa.String(128), primary_key=True),
        sa.Column("SOURCE_TXN_ID", sa.BigInteger, primary_key=True),
    )
    op.create_table(
        "HIVEMESH_REPL_FILES",
        sa.Column("POLICY", sa.String(128), primary_key=True),
        sa.Column("TARGET_PATH", sa.String(2048), primary_key=True),
        sa.Column("SIZE", sa.BigInteger, nullable=False),
        sa.Column("SOURCE_MTIME_NS", sa.BigInteger, nullable=True),
        sa.Column("CHECKSUM", sa.String(32), nullable=True),
        sa.Column("COPIED_MS", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    """Drop them."""
    for table in (
        "HIVEMESH_REPL_FILES",
        "HIVEMESH_REPL_TXNS",
        "HIVEMESH_REPL_OBJECTS",
        "HIVEMESH_REPL_POLICIES",
    ):
        op.drop_table(table)
