"""The JVM artifacts hivemesh uses, declared once and pinned: each bundle is a set of Maven Central
coordinates fetched together (with their dependencies) into one cache directory.

Tests, benchmarks and the library (``hivemesh.spark.session(..., delta=True)``) all resolve a
bundle through :func:`hivemesh.jvm.resolve`; nothing else names a version. Users point hivemesh at
their own copies with ``HIVEMESH_JARS_<BUNDLE>`` (see :func:`hivemesh.jvm.resolve`).

Versions (checked against Maven Central on 2026-11-24):

- Hive 4: 4.2.0 is the newest 4.x whose metastore runs from Maven Central: its server classes ship
  inside ``hive-exec`` (``hive-standalone-metastore-server`` was last published as 4.0.1), its
  ``DbNotificationListener`` in ``hive-hcatalog-server-extensions`` (published for 4.2.0 only, built
  for Java 21). The schema comes from 4.0.1's ``bin`` tarball (``schematool`` and its scripts);
  the one schema change of 4.1/4.2 that matters (HIVE-27725: no name columns in the column
  statistics tables) is applied by the test harness, ``tests/support/hive4.py``.
- Hive streaming: ``hive-streaming`` was last published as 3.1.3 (Hive 4 did not publish it), so the
  real streaming writer is Hive 3.1.3's, with ``hive-exec`` of the same version.
- Delta Lake for Spark: 4.4.0 (newest on Maven Central), built for Spark 4.2: hence PySpark 4.2.
- Trino: 476, the newest ``trino-server`` tarball on Maven Central; it needs Java 24 or later.
- HDFS for tests: ``hadoop-client-minicluster`` 3.5.0 (a NameNode and DataNodes in one JVM), the
  Hadoop of PySpark 4.2's own jars (``hadoop-client-api-3.5.0``). 3.4.1's shaded mini cluster
  answers every WebHDFS call with 404 on Java 17 (its Jersey 1 finds no resource method); 3.5.0's
  (Jersey 2) serves WebHDFS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BUNDLES", "Bundle"]

HIVE4_VERSION = "4.2.0"
HIVE4_SCHEMA_VERSION = "4.0.1"
HIVE4_HADOOP_VERSION = "3.4.1"
HIVE_STREAMING_VERSION = "3.1.3"
DELTA_VERSION = "4.4.0"
HADOOP_MINICLUSTER_VERSION = "3.5.0"
TRINO_VERSION = "476"

# Dependencies Maven cannot resolve from Central or that would clash with the bundle's own logging.
_COMMON_EXCLUSIONS = (
    "jdk.tools:jdk.tools",  # a JDK 8 system-path artifact named by old Hadoop poms
    "org.slf4j:slf4j-reload4j",  # Hadoop's SLF4J binding; the Hive bundles bind log4j2
    "org.slf4j:slf4j-log4j12",
    "org.pentaho:pentaho-aggdesigner-algorithm",  # only on a retired third-party repository
)


@dataclass(frozen=True)
class Bundle:
    """One cache entry: jars copied with their runtime dependencies, and/or archives unpacked.

    ``dependencies``: ``group:artifact:version`` (optionally ``:type[:classifier]``), each copied
    into ``lib/`` with its runtime dependencies; ``intransitive``: the same, without dependencies
    (a jar that only adds classes to a runtime the bundle already has). ``archives``: ``group:artifact:version:type:classifier``
    unpacked into ``dist/`` (``archive_includes``: Ant-style patterns to unpack, all when empty).
    ``exclusions``: ``group:artifact`` left out everywhere (``*`` allowed as the artifact).
    ``java``: the lowest Java major version the bundle runs on; ``java_max``: the highest, when
    newer ones do not work (None: any newer one).
    """

    name: str
    description: str
    dependencies: tuple[str, ...] = ()
    intransitive: tuple[str, ...] = ()
    archives: tuple[str, ...] = ()
    archive_includes: tuple[str, ...] = ()
    exclusions: tuple[str, ...] = _COMMON_EXCLUSIONS
    java: int = 17
    java_max: int | None = None
    approx_mb: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def java_range(self) -> str:
        """The Java versions it runs on as people write them: ``21-23``, or ``17+``."""
        return f"{self.java}-{self.java_max}" if self.java_max is not None else f"{self.java}+"

    @property
    def env_var(self) -> str:
        """The variable that points hivemesh at the user's own copy, e.g. ``HIVEMESH_JARS_DELTA``."""
        return "HIVEMESH_JARS_" + self.name.upper().replace("-", "_")


BUNDLES: dict[str, Bundle] = {
    b.name: b
    for b in (
        Bundle(
            name="hive4-metastore",
            description=f"Apache Hive {HIVE4_VERSION} metastore (from hive-exec) with DbNotificationListener, "
            f"Hadoop {HIVE4_HADOOP_VERSION}, DataNucleus, Derby and the PostgreSQL JDBC driver; Hive "
            f"{HIVE4_SCHEMA_VERSION}'s schematool and schema scripts",
            # the metastore server classes of 4.1+ ship inside hive-exec only (no standalone server jar)
            intransitive=(
                f"org.apache.hive:hive-exec:{HIVE4_VERSION}",
                f"org.apache.hive.hcatalog:hive-hcatalog-server-extensions:{HIVE4_VERSION}",
                f"org.apache.hadoop:hadoop-hdfs:{HIVE4_HADOOP_VERSION}",  # classes create_database names
            ),
            dependencies=(
                f"org.apache.hive:hive-standalone-metastore-common:{HIVE4_VERSION}",
                "org.datanucleus:datanucleus-api-jdo:6.0.3",
                "org.datanucleus:datanucleus-core:6.0.10",
                "org.datanucleus:datanucleus-rdbms:6.0.10",
                "org.datanucleus:javax.jdo:3.2.0-release",
                "org.apache.derby:derby:10.17.1.0",
                "org.apache.derby:derbytools:10.17.1.0",
                "com.zaxxer:HikariCP:4.0.3",
                f"org.apache.hadoop:hadoop-common:{HIVE4_HADOOP_VERSION}",
                f"org.apache.hadoop:hadoop-hdfs-client:{HIVE4_HADOOP_VERSION}",
                f"org.apache.hadoop:hadoop-mapreduce-client-core:{HIVE4_HADOOP_VERSION}",
                "org.postgresql:postgresql:42.7.4",
                "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
            ),
            # schematool and its scripts: the 4.0.1 standalone distribution (the 4.0 -> 4.2
            # schema changes are applied by the test harness)
            archives=(f"org.apache.hive:hive-standalone-metastore-server:{HIVE4_SCHEMA_VERSION}:tar.gz:bin",),
            exclusions=(
                *_COMMON_EXCLUSIONS,
                "org.apache.hadoop:hadoop-yarn-client",
                "org.apache.hadoop:hadoop-yarn-common",
            ),
            java=21,
            java_max=23,  # Java 24 removed Subject.getSubject, which Hadoop 3.4 calls
            approx_mb=340,
        ),
        Bundle(
            name="hive-streaming",
            description=f"Apache Hive {HIVE_STREAMING_VERSION} streaming writer (hive-streaming, "
            "hive-exec) with Hadoop: HiveStreamingConnection",
            dependencies=(
                f"org.apache.hive:hive-streaming:{HIVE_STREAMING_VERSION}",
                f"org.apache.hive:hive-exec:{HIVE_STREAMING_VERSION}",
                "org.apache.hadoop:hadoop-common:3.1.0",
                "org.apache.hadoop:hadoop-mapreduce-client-core:3.1.0",
                "org.apache.hadoop:hadoop-hdfs-client:3.1.0",
            ),
            exclusions=(
                *_COMMON_EXCLUSIONS,
                "org.apache.hive:hive-llap-tez",
                "org.apache.hadoop:hadoop-yarn-server-resourcemanager",
                "org.apache.hbase:*",
                "org.apache.spark:*",
                "org.apache.tez:*",
                "org.eclipse.jetty:*",
                "org.eclipse.jetty.aggregate:*",
            ),
            approx_mb=160,
        ),
        Bundle(
            name="delta",
            description=f"Delta Lake {DELTA_VERSION} for Spark 4.2 (io.delta:delta-spark_2.13)",
            dependencies=(f"io.delta:delta-spark_2.13:{DELTA_VERSION}",),
            # Spark, Scala, Hadoop, Parquet, Jackson and logging come from PySpark's own jars.
            exclusions=(
                *_COMMON_EXCLUSIONS,
                "org.apache.spark:*",
                "org.scala-lang:*",
                "org.apache.hadoop:*",
                "org.apache.parquet:*",
                "com.fasterxml.jackson.core:*",
                "com.fasterxml.jackson.datatype:*",
                "org.apache.logging.log4j:*",
                "org.slf4j:*",
                "org.xerial.snappy:*",
                "com.github.luben:*",
                "commons-logging:*",
                "com.google.code.findbugs:*",
                "javax.annotation:*",
            ),
            approx_mb=14,
        ),
        Bundle(
            name="hadoop-minicluster",
            description=f"Apache Hadoop {HADOOP_MINICLUSTER_VERSION} mini cluster (hadoop-client-minicluster): "
            "an HDFS NameNode and DataNodes in one JVM, for tests and benchmarks",
            dependencies=(f"org.apache.hadoop:hadoop-client-minicluster:{HADOOP_MINICLUSTER_VERSION}",),
            approx_mb=105,
        ),
        Bundle(
            name="trino-server",
            description=f"Trino {TRINO_VERSION} server (hive, iceberg and delta-lake connectors only)",
            archives=(f"io.trino:trino-server:{TRINO_VERSION}:tar.gz:",),
            archive_includes=(
                f"trino-server-{TRINO_VERSION}/bin/**",
                f"trino-server-{TRINO_VERSION}/lib/**",
                f"trino-server-{TRINO_VERSION}/plugin/hive/**",
                f"trino-server-{TRINO_VERSION}/plugin/iceberg/**",
                f"trino-server-{TRINO_VERSION}/plugin/delta-lake/**",
            ),
            java=24,
            approx_mb=570,
        ),
    )
}
