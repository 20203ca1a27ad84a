"""hivemesh: many Hive metastores, one lakehouse.

Subpackages, lowest layer first (a package imports only those before it):
``hive`` (Hive's formats without I/O: names, txn lists, event messages, constants),
``storage`` (a location as a file system, directory operations), ``client`` (a client of any
HMS) and ``thrift`` (the HMS Thrift server), ``metastore`` (an HMS-compatible catalog on SQLite
or PostgreSQL) and ``acid`` (Hive ACID files: selection, reading, writing, streaming),
``federation`` (the proxy: many metastores as one catalog, and remotes), ``spark`` (SparkSession
helpers, Hive ACID tables in Spark), ``quickstart`` (TPC-H through Spark), ``cli`` (the
``hivemesh`` command). Beside them: ``config``, ``jvm`` (JVM peers and jars), ``errors``.
"""

__version__ = "0.1.0"
