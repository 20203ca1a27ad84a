"""Spark helpers: a SparkSession on a hivemesh (or any Hive) metastore, and Hive ACID tables."""

from typing import Any

from hivemesh.spark.acid import AcidSession, NotTransactionalError, acid_session, commit, read_acid
from hivemesh.spark.acid_dml import DmlResult, delete_acid, insert_acid, update_acid
from hivemesh.spark.session import session


def register_hiveacid(spark: Any, metastore_uri: str | None = None) -> None:
    """Register the ``hiveacid`` Python data source on ``spark`` (:func:`session` does it)."""
    from hivemesh.spark.acid_source import register

    register(spark, metastore_uri)


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
