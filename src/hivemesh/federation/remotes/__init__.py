"""Remotes: links to databases and tables of other metastores that users create themselves.

- :mod:`~hivemesh.federation.remotes.spec`: what a remote is, parsed and validated from the
  ``hivemesh.remote.*`` properties of a ``CREATE DATABASE`` / ``CREATE TABLE``;
- :mod:`~hivemesh.federation.remotes.store`: the proxy's store of remotes (SQLite or PostgreSQL,
  schema versioned by Alembic);
- :mod:`~hivemesh.federation.remotes.registry`: the remotes at run time, as members of the proxy;
- :mod:`~hivemesh.federation.remotes.calls`: the HMS calls that create and drop them.

The ``hivemesh remote`` command is :mod:`hivemesh.federation.remote_cli`.
"""

from hivemesh.federation.remotes.spec import (
    DATABASE,
    TABLE,
    URIS,
    VIA,
    VIAS,
    RemoteError,
    RemoteExistsError,
    RemoteSpec,
    database_remote,
    table_remote,
)
from hivemesh.federation.remotes.store import RemoteStore

__all__ = [
    "DATABASE",
    "TABLE",
    "URIS",
    "VIA",
    "VIAS",
    "RemoteError",
    "RemoteExistsError",
    "RemoteSpec",
    "RemoteStore",
    "database_remote",
    "table_remote",
]
