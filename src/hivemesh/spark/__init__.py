"""Spark helpers: a SparkSession on a hivemesh (or any Hive) metastore, and Hive ACID tables."""

from hivemesh.spark.acid import AcidSession, NotTransactionalError, acid_session, commit, read_acid
from hivemesh.spark.session import session

__all__ = ["AcidSession", "NotTransactionalError", "acid_session", "commit", "read_acid", "session"]
