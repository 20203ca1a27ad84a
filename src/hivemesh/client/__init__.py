"""Clients of an HMS (any Thrift Hive metastore, hivemesh's or Java's): :mod:`hivemesh.client.metastore`
(``MetastoreClient``: connections, retries of idempotent calls, transactions, locks and heartbeats).
Lower layers: :mod:`hivemesh.hive` only."""
