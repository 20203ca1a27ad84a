"""Spark helpers: a SparkSession pointed at a hivemesh (or any Hive) metastore."""

from hivemesh.spark.session import session

__all__ = ["session"]
