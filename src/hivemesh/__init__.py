"""hivemesh: many Hive metastores, one lakehouse.

Subpackages: ``metastore`` (an HMS-compatible catalog service on SQLite or PostgreSQL),
``thrift`` (the Thrift server that exposes any catalog object), ``spark`` (SparkSession helpers),
``quickstart`` (the TPC-H main job).
"""

__version__ = "0.1.0"
