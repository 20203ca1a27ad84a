"""Alembic environment of the remotes store: migrations run on the connection
:meth:`~hivemesh.federation.remotes.store.RemoteStore.upgrade` hands over (no ini file), their
version kept in ``HIVEMESH_REMOTES_VERSION``."""

from alembic import context

from hivemesh.federation.remotes.store import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
