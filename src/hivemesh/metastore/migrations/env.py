"""Alembic environment: migrations run on the connection hivemesh hands over (no ini file)."""

from alembic import context

from hivemesh.metastore.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    on_version_apply=context.config.attributes.get("on_version_apply", ()),  # progress of upgrades
)
with context.begin_transaction():
    context.run_migrations()
