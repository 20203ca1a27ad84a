"""Clients of an HMS (any Thrift Hive metastore, hivemesh's or Java's): :mod:`hivemesh.client.metastore`
(``MetastoreClient``: connections, retries of idempotent calls, transactions, locks and heartbeats),
:mod:`hivemesh.client.hms` (``HmsCalls``: the HMS calls hivemesh makes, one typed method each, with
their retry class) and :mod:`hivemesh.client.errors` (the hivemesh errors HMS exceptions are raised as).
Lower layers: :mod:`hivemesh.hive` only."""
