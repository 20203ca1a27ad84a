"""Spark helpers: a SparkSession on a hivemesh (or any Hive) metastore, and Hive ACID tables.

Modules, each importing only those before it: :mod:`.acid_source` (``format("hiveacid")``, a
Python data source), :mod:`.session` (the one place a SparkSession is set up: metastore, worker
Python, the data source, Delta), :mod:`.acid_reader` (the DataFrame of a snapshot's files),
:mod:`.acid_sql` (``AcidSession.sql``), :mod:`.acid` (``read_acid``, ``AcidSession``),
:mod:`.acid_dml` (INSERT, DELETE, UPDATE).
"""

from hivemesh.spark.acid import AcidSession, NotTransactionalError, acid_session, commit, read_acid
from hivemesh.spark.acid_dml import DmlResult, delete_acid, insert_acid, update_acid
from hivemesh.spark.session import register_hiveacid, session

__all__ = [
    "AcidSession",
    "DmlResult",
    "NotTransactionalError",
    "acid_session",
    "commit",
    "delete_acid",
    "insert_acid",
    "read_acid",
    "register_hiveacid",
    "session",
    "update_acid",
]
