"""DBS.DB_MANAGED_LOCATION_URI: a database's managedLocationUri (Hive 3+).

Where the database's managed tables go. It was not kept: a client's ``CREATE DATABASE ...
MANAGEDLOCATION`` lost it, and a replica could not carry the source's (relocated) value.

Revision ID: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable column (unless revision 0001 made it: it creates the tables as
    ``hivemesh.metastore.schema`` defines them now)."""
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("DBS")}
    if "DB_MANAGED_LOCATION_URI" not in have:
        op.add_column("DBS", sa.Column("DB_MANAGED_LOCATION_URI", sa.String(4000)))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table("DBS") as batch:
        batch.drop_column("DB_MANAGED_LOCATION_URI")
