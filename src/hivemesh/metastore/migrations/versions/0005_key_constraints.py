"""KEY_CONSTRAINTS: the constraints of tables (primary and foreign keys, unique, not null, ...).

Kept for ``create_table_with_constraints`` and the ``add_*``/``get_*`` constraint calls.

Revision ID: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create KEY_CONSTRAINTS and its index on CHILD_TBL_ID."""
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "KEY_CONSTRAINTS",
        sa.Column("PARENT_TBL_ID", big_id, sa.ForeignKey("TBLS.TBL_ID", ondelete="CASCADE"), nullable=False),
        sa.Column("CONSTRAINT_NAME", sa.String(400), nullable=False),
        sa.Column("POSITION", sa.BigInteger, nullable=False),
        sa.Column("CONSTRAINT_TYPE", sa.SmallInteger, nullable=False),
        sa.Column("PARENT_COLUMN_NAME", sa.String(767)),
        sa.Column("CHILD_TBL_ID", big_id, sa.ForeignKey("TBLS.TBL_ID", ondelete="CASCADE"), nullable=True),
        sa.Column("CHILD_COLUMN_NAME", sa.String(767)),
        sa.Column("UPDATE_RULE", sa.Integer),
        sa.Column("DELETE_RULE", sa.Integer),
        sa.Column("ENABLE_VALIDATE_RELY", sa.SmallInteger, nullable=False),
        sa.Column("DEFAULT_VALUE", sa.Text),
        sa.PrimaryKeyConstraint("PARENT_TBL_ID", "CONSTRAINT_NAME", "POSITION", name="CONSTRAINTS_PK"),
    )
    op.create_index("CONSTRAINTS_CHILD_TBL", "KEY_CONSTRAINTS", ["CHILD_TBL_ID"])


def downgrade() -> None:
    """Drop KEY_CONSTRAINTS."""
    op.drop_index("CONSTRAINTS_CHILD_TBL", table_name="KEY_CONSTRAINTS")
    op.drop_table("KEY_CONSTRAINTS")
