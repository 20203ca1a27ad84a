"""Alembic environment of the replicator's store: migrations run on the connection
:meth:`hivemesh.storage.sql.SqlStore.upgrade` hands over (no ini file), their version kept in
the table it names (``HIVEMESH_REPLICATION_VERSION``)."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection, target_metadata=None, version_table=context.config.attributes["version_table"]
)
with context.begin_transaction():
    context.run_migrations()
