"""Transactions, write ids, locks and the notification log.

Creates the tables of ``hivemesh.metastore.txn_schema`` as defined at version 2 and seeds the
single-row counters (next txn id 1, next lock id 1, next event id 1). Later revisions that change
these tables must use explicit ``op.*`` calls.

Revision ID: 0002
"""

import sqlalchemy as sa
from alembic import op

from hivemesh.metastore import schema, txn_schema

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the version-2 tables and their counters."""
    bind = op.get_bind()
    tables = [schema.metadata.tables[t] for t in txn_schema.TXN_TABLES]
    schema.metadata.create_all(bind, tables=tables)
    bind.execute(sa.insert(txn_schema.NEXT_TXN_ID).values(NTXN_NEXT=1))
    bind.execute(sa.insert(txn_schema.NEXT_LOCK_ID).values(NL_NEXT=1))
    bind.execute(sa.insert(txn_schema.NOTIFICATION_SEQUENCE).values(NNI_ID=1, NEXT_EVENT_ID=1))


def downgrade() -> None:
    """Drop the version-2 tables."""
    bind = op.get_bind()
    tables = [schema.metadata.tables[t] for t in txn_schema.TXN_TABLES]
    schema.metadata.drop_all(bind, tables=tables)
