"""Other real clients against hivemesh: pyiceberg's HiveCatalog, and Spark's Thrift JDBC server + beeline.

* pyiceberg (``pyiceberg.catalog.hive.HiveCatalog``) drives namespaces (databases) through hivemesh and
  must see hivemesh's exceptions mapped to its own errors. Iceberg table *commits* need HMS locks,
  which hivemesh does not implement yet, so they are not exercised here (``create_table`` needs none).
* Spark's ``HiveThriftServer2`` from the PySpark wheel, with hivemesh as its metastore, answers SQL
  from the wheel's ``beeline``: the path BI tools take. It runs as a real ``spark-submit`` JVM.

Both run against the ``hivemesh_server`` fixture, i.e. on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hive_metastore import ttypes
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.exceptions import (
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.servers import HivemeshProcess, die_with_parent, free_port

JAVA = shutil.which("java")
JAVA_MISSING = "needs `java` (17) on PATH to run Spark's HiveThriftServer2 and beeline from the PySpark wheel"

TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def _local_path(uri: str) -> Path:
    """The local path of a ``file:`` URI (``file:/x`` and ``file:///x`` alike)."""
    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return Path(parsed.path)


def _hive_table(
    db: str, name: str, location: str, *, input_format: str, output_format: str, serde: str
) -> ttypes.Table:
    """A plain (non-Iceberg) managed Hive table with columns ``k string`` and ``v bigint``."""
    return ttypes.Table(
        tableName=name,
        dbName=db,
        owner="tester",
        sd=ttypes.StorageDescriptor(
            cols=[ttypes.FieldSchema("k", "string", "the key"), ttypes.FieldSchema("v", "bigint", None)],
            location=location,
            inputFormat=input_format,
            outputFormat=output_format,
            compressed=False,
            numBuckets=-1,
            serdeInfo=ttypes.SerDeInfo(serializationLib=serde, parameters={"serialization.format": "1"}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        ),
        partitionKeys=[],
        parameters={},
        tableType="MANAGED_TABLE",
    )


# --------------------------------------------------------------------------------------------------
# pyiceberg HiveCatalog
# --------------------------------------------------------------------------------------------------


@pytest.fixture()
def catalog(hivemesh_server: HivemeshProcess, tmp_path: Path) -> HiveCatalog:
    """pyiceberg's HiveCatalog talking to hivemesh (it opens a connection per call)."""
    return HiveCatalog("hm", uri=hivemesh_server.uri, warehouse=f"file://{tmp_path / 'iceberg-warehouse'}")


def test_pyiceberg_namespace_lifecycle(catalog: HiveCatalog, hms, unique_name: str, tmp_path: Path) -> None:
    ns = unique_name
    location = tmp_path / "ns-location"
    assert ("default",) in catalog.list_namespaces()
    assert (ns,) not in catalog.list_namespaces()

    catalog.create_namespace(
        ns, {"location": f"file://{location}", "comment": "made by pyiceberg", "owner_team": "data"}
    )
    assert (ns,) in catalog.list_namespaces()
    assert catalog.namespace_exists(ns)

    props = catalog.load_namespace_properties(ns)
    assert _local_path(props.pop("location")) == location
    assert props == {"comment": "made by pyiceberg", "owner_team": "data"}
    # pyiceberg maps "comment" and "location" onto the Database fields, the rest are parameters
    db = hms.get_database(ns)
    assert db.description == "made by pyiceberg"
    assert _local_path(db.locationUri) == location
    assert db.parameters == {"owner_team": "data"}

    summary = catalog.update_namespace_properties(
        ns, removals={"owner_team", "absent"}, updates={"tier": "gold", "comment": "renamed"}
    )
    assert summary.removed == ["owner_team"]
    assert sorted(summary.updated) == ["comment", "tier"]
    assert summary.missing == ["absent"]
    props = catalog.load_namespace_properties(ns)
    assert _local_path(props.pop("location")) == location
    assert props == {"comment": "renamed", "tier": "gold"}
    assert hms.get_database(ns).parameters == {"tier": "gold"}

    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace(ns)
    assert catalog.list_tables(ns) == []

    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()
    assert not catalog.namespace_exists(ns)
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties(ns)
    with pytest.raises(NoSuchNamespaceError):
        catalog.update_namespace_properties(ns, updates={"tier": "silver"})
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace(ns)


def test_pyiceberg_namespace_with_a_hive_table(
    catalog: HiveCatalog, hms, unique_name: str, tmp_path: Path
) -> None:
    ns = unique_name
    location = tmp_path / "ns"
    catalog.create_namespace(ns, {"location": f"file://{location}"})
    hms.create_table(
        _hive_table(
            ns,
            "plain",
            f"file://{location}/plain",
            input_format=TEXT_IN,
            output_format=TEXT_OUT,
            serde=LAZY_SERDE,
        )
    )
    assert hms.get_all_tables(ns) == ["plain"]

    # pyiceberg lists only tables whose parameters say table_type=ICEBERG: a Hive table is left out
    assert catalog.list_tables(ns) == []
    # ... and loading it fails on the missing table_type parameter, not as a missing table
    with pytest.raises(NoSuchPropertyException, match="table_type"):
        catalog.load_table((ns, "plain"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((ns, "absent"))

    # a database holding a table cannot be dropped (InvalidOperationException from drop_database)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(ns)
    assert (ns,) in catalog.list_namespaces()
    assert hms.get_all_tables(ns) == ["plain"]

    hms.drop_table(ns, "plain", False)
    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()


def test_pyiceberg_lists_its_tables_beside_hive_tables(
    catalog: HiveCatalog, hms, unique_name: str, tmp_path: Path
) -> None:
    """create_table (no lock needed) and drop_table; list_tables keeps Iceberg tables only."""
    ns = unique_name
    location = tmp_path / "ns"
    catalog.create_namespace(ns, {"location": f"file://{location}"})
    hms.create_table(
        _hive_table(
            ns,
            "plain",
            f"file://{location}/plain",
            input_format=TEXT_IN,
            output_format=TEXT_OUT,
            serde=LAZY_SERDE,
        )
    )
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType(), required=False),
    )
    created = catalog.create_table((ns, "events"), schema)

    assert catalog.list_tables(ns) == [(ns, "events")]
    assert sorted(hms.get_all_tables(ns)) == ["events", "plain"]
    hive_view = hms.get_table(ns, "events")
    assert hive_view.tableType == "EXTERNAL_TABLE"
    assert hive_view.parameters["table_type"] == "ICEBERG"
    assert hive_view.parameters["metadata_location"] == created.metadata_location
    assert [(c.name, c.type) for c in hive_view.sd.cols] == [("id", "bigint"), ("name", "string")]
    assert _local_path(created.metadata_location).is_file()

    loaded = catalog.load_table((ns, "events"))
    assert loaded.metadata_location == created.metadata_location
    assert loaded.schema() == created.schema()
    assert _local_path(loaded.location()) == location / "events"
    assert catalog.table_exists((ns, "events"))

    catalog.drop_table((ns, "events"))
    assert catalog.list_tables(ns) == []
    assert not catalog.table_exists((ns, "events"))
    with pytest.raises(NoSuchTableError):
        catalog.drop_table((ns, "events"))
    assert hms.get_all_tables(ns) == ["plain"]

    hms.drop_table(ns, "plain", False)
    catalog.drop_namespace(ns)


# --------------------------------------------------------------------------------------------------
# Spark's HiveThriftServer2 + beeline
# --------------------------------------------------------------------------------------------------


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"<no log: {e}>"


def _result_sets(stdout: str) -> list[list[str]]:
    """beeline ``--silent=true --outputformat=csv2`` output: one list of lines per result set.

    Result sets are separated by empty lines (and the output starts with some).
    """
    sets: list[list[str]] = [[]]
    for line in stdout.splitlines():
        if line.strip():
            sets[-1].append(line)
        elif sets[-1]:
            sets.append([])
    return [s for s in sets if s]


class SparkThriftServer:
    """Spark's HiveThriftServer2 (``spark-submit ... spark-internal``) on a free port, hivemesh as metastore.

    ``warehouse`` is ``spark.sql.warehouse.dir`` (where CREATE DATABASE puts new databases); all of
    Spark's scratch files (``java.io.tmpdir``, ``spark.local.dir``, Hive operation logs) go under
    ``base_dir``, the JVM's output into ``base_dir/thriftserver.log``.
    """

    def __init__(self, metastore_uri: str, warehouse: Path, base_dir: Path):
        self.metastore_uri = metastore_uri
        self.warehouse = warehouse
        self.base_dir = base_dir
        self.tmp = base_dir / "tmp"
        self.log = base_dir / "thriftserver.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._scripts = 0

    def command(self) -> list[str]:
        return [
            str(_spark_home() / "bin" / "spark-submit"),
            "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
            "--master", "local[1]",
            "--driver-memory", "1g",
            "--driver-java-options", f"-Djava.io.tmpdir={self.tmp}",
            "--conf", f"spark.hadoop.hive.metastore.uris={self.metastore_uri}",
            "--conf", f"spark.sql.warehouse.dir={self.warehouse}",
            "--conf", f"spark.local.dir={self.tmp}",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.shuffle.partitions=2",
            "--hiveconf", f"hive.server2.thrift.port={self.port}",
            "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "spark-internal",
        ]  # fmt: skip

    def start(self, timeout: float = 300) -> SparkThriftServer:
        self.tmp.mkdir(parents=True, exist_ok=True)
        # no stray Hadoop/Hive/Spark configuration from the environment
        env = {k: v for k, v in os.environ.items() if not k.endswith("_CONF_DIR")}
        env.update(SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1")
        deadline = time.monotonic() + timeout
        for _attempt in range(3):  # the free port may be taken between probe and bind: retry elsewhere
            self.port = free_port()
            log_start = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as logf:
                self.proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    cwd=self.base_dir,
                    env=env,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            while self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"HiveThriftServer2 did not open port {self.port} in {timeout}s:\n{_tail(self.log)}"
                    )
                time.sleep(0.5)
            with open(self.log, "rb") as f:
                f.seek(log_start)
                if b"Address already in use" not in f.read():
                    break
        raise RuntimeError(f"HiveThriftServer2 exited with {self.proc.returncode}:\n{_tail(self.log)}")

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM the server's process group (it is the JVM's own session), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
                return
            except subprocess.TimeoutExpired:
                continue

    def beeline(self, sql: str) -> str:
        """Run ``sql`` (statements ending in ``;``) as a beeline script in a new JDBC session; its stdout.

        beeline stops at the first failing statement and exits non-zero: that fails the test here.
        """
        self._scripts += 1
        script = self.base_dir / f"script{self._scripts}.sql"
        script.write_text(sql, encoding="utf-8")
        cmd = [
            JAVA or "java", "-Xmx256m", f"-Duser.home={self.base_dir}", f"-Djava.io.tmpdir={self.tmp}",
            "-cp", str(_spark_home() / "jars" / "*"), "org.apache.hive.beeline.BeeLine",
            "-u", f"jdbc:hive2://127.0.0.1:{self.port}/default", "-n", "tester",
            "--outputformat=csv2", "--silent=true", "-f", str(script),
        ]  # fmt: skip
        # the timeout only guards against a hang; the result does not depend on it
        out = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600, cwd=self.base_dir
        )
        assert out.returncode == 0, (
            f"beeline exited with {out.returncode} on {script}:\n{out.stderr[-6000:]}\n"
            f"--- HiveThriftServer2 log ({self.log}) ---\n{_tail(self.log)}"
        )
        return out.stdout


@pytest.fixture(scope="module")
def spark_thrift_server(
    hivemesh_server: HivemeshProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkThriftServer]:
    """HiveThriftServer2 with hivemesh as its metastore and hivemesh's warehouse as its own."""
    if JAVA is None:
        pytest.skip(JAVA_MISSING)
    server = SparkThriftServer(
        hivemesh_server.uri, hivemesh_server.warehouse, tmp_path_factory.mktemp("spark-thriftserver")
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.mark.spark
@pytest.mark.skipif(JAVA is None, reason=JAVA_MISSING)
def test_beeline_through_spark_thrift_server(
    spark_thrift_server: SparkThriftServer, hivemesh_server: HivemeshProcess, hms, unique_name: str
) -> None:
    db = unique_name
    spark_thrift_server.beeline(
        f"CREATE DATABASE {db} COMMENT 'made through beeline';\n"
        f"CREATE TABLE {db}.people (id INT, name STRING, score DOUBLE) STORED AS PARQUET;\n"
        f"INSERT INTO {db}.people VALUES (1, 'ann', 1.5), (2, 'bob', 2.5), (3, 'cy', 3.5);\n"
    )

    # what Spark wrote is really in hivemesh
    database = hms.get_database(db)
    assert database.description == "made through beeline"
    db_dir = hivemesh_server.warehouse / f"{db}.db"
    assert _local_path(database.locationUri) == db_dir
    table = hms.get_table(db, "people")
    assert table.tableType == "MANAGED_TABLE"
    assert [(c.name, c.type) for c in table.sd.cols] == [
        ("id", "int"),
        ("name", "string"),
        ("score", "double"),
    ]
    assert table.partitionKeys == []
    assert (table.sd.inputFormat, table.sd.outputFormat) == (PARQUET_IN, PARQUET_OUT)
    assert table.sd.serdeInfo.serializationLib == PARQUET_SERDE
    assert _local_path(table.sd.location) == db_dir / "people"
    spark_schema = json.loads(table.parameters["spark.sql.sources.schema"])  # kept verbatim
    assert [f["name"] for f in spark_schema["fields"]] == ["id", "name", "score"]
    assert list((db_dir / "people").glob("part-*.parquet")), "INSERT wrote no Parquet file"

    # a table made directly in hivemesh: Spark must see it in a new session
    hms.create_table(
        _hive_table(
            db,
            "from_thrift",
            f"{database.locationUri}/from_thrift",
            input_format=PARQUET_IN,
            output_format=PARQUET_OUT,
            serde=PARQUET_SERDE,
        )
    )

    out = spark_thrift_server.beeline(
        f"SELECT id, name FROM {db}.people WHERE score > 2 ORDER BY id;\n"
        f"SHOW TABLES IN {db};\n"
        f"DESCRIBE {db}.from_thrift;\n"
        f"DROP TABLE {db}.people;\n"
    )
    results = _result_sets(out)
    assert len(results) == 4, out
    select, show, describe, drop = results
    assert select == ["id,name", "2,bob", "3,cy"]
    assert show[0] == "namespace,tableName,isTemporary"
    assert sorted(show[1:]) == [f"{db},from_thrift,false", f"{db},people,false"]
    assert describe == ["col_name,data_type,comment", "k,string,the key", "v,bigint,NULL"]
    assert drop == ["Result"]  # DDL: an empty result set

    # DROP TABLE of a managed table: gone from hivemesh, and hivemesh deleted its data (deleteData=true)
    assert hms.get_all_tables(db) == ["from_thrift"]
    with pytest.raises(ttypes.NoSuchObjectException):
        hms.get_table(db, "people")
    assert not (db_dir / "people").exists()

    hms.drop_database(db, True, True)
    assert db not in hms.get_all_databases()
