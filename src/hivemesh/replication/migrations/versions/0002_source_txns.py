"""What a ``format: delta`` policy knows of the source's txns as of its checkpoint: the highest
source txn id opened (``HIVEMESH_REPL_POLICIES.SOURCE_TXN_HWM``) and the write ids each source txn
still open was allocated (``HIVEMESH_REPL_WRITES``), so that a restart gives each commit the same
snapshot. (``HIVEMESH_REPL_TXNS`` holds such a policy's open source txns.)

Revision ID: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column and the table."""
    op.add_column("HIVEMESH_REPL_POLICIES", sa.Column("SOURCE_TXN_HWM", sa.BigInteger, nullable=True))
    op.create_table(
        "HIVEMESH_REPL_WRITES",
        sa.Column("POLICY", sa.String(128), primary_key=True),
        sa.Column("SOURCE_TXN_ID", sa.BigInteger, primary_key=True),
        sa.Column("DB_NAME", sa.String(256), primary_key=True),
        sa.Column("TBL_NAME", sa.String(256), primary_key=True),
        sa.Column("WRITE_ID", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("HIVEMESH_REPL_WRITES")
    with op.batch_alter_table("HIVEMESH_REPL_POLICIES") as batch:
        batch.drop_column("SOURCE_TXN_HWM")
