"""The Alembic revisions build exactly the schema ``hivemesh.metastore.schema`` declares.

A store created from scratch (every revision in order, as a new deployment and an upgrade both run
them) is compared with the declared tables, columns, indexes and constraints by Alembic's own
comparison, on SQLite and on PostgreSQL (``backend_url``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from hivemesh.metastore import schema
from hivemesh.metastore.store import MIGRATIONS, Store


def test_revisions_build_the_declared_schema(backend_url: str) -> None:
    store = Store(backend_url)
    engine = sa.create_engine(backend_url)
    try:
        with engine.connect() as conn:
            head = MigrationContext.configure(conn).get_current_revision()
            diff = compare_metadata(MigrationContext.configure(conn), schema.metadata)
            tables = set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()
        store.dispose()
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    assert head == ScriptDirectory.from_config(cfg).get_current_head()
    assert {"PARTITION_EVENTS", "TBLS", "TXNS", "NOTIFICATION_LOG"} <= tables
    assert diff == []
