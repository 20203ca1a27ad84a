"""A federation of real metastores behind real ``hivemesh proxy`` processes, for the Spark tests.

:class:`Mesh` starts and stops the pieces of ``tests/test_proxy_spark.py``: hivemesh metastore
subprocesses, the real Apache HMS 2.3.10 (:class:`~tests.support.javahms.JavaHMS`) and proxies in
front of them (``mesh.yaml`` written with :func:`~tests.support.proxy.write_mesh`).

Tables are put into a member without Spark with :func:`register_parquet_table`: an EXTERNAL
Parquet table over a copy of a TPC-H file, written through a plain Thrift client, so a federated
member holds data although the proxy only lets clients read it. Partitioned TPC-H tables
(``orders``, ``lineitem``) are split by year into ``<col>=<year>/`` directories and their
partitions added, so they have the same columns as the quickstart's tables
(:func:`hivemesh.quickstart.load.read_table_files`: the year partition column last).

:class:`SparkSwitch` keeps at most one SparkSession (the suite shares one JVM, see
``tests/spark_fixtures.py``): binding it to another metastore URI stops the active session first.
"""

from __future__ import annotations

import random
import re
import shutil
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    Partition,
    SerDeInfo,
    SkewedInfo,
    StorageDescriptor,
    Table,
)

from hivemesh.acid.tables import FORMATS
from hivemesh.quickstart.tpch import PARTITIONING, table_file
from tests.support.javahms import JavaHMS
from tests.support.proxy import ProxyProcess, write_mesh
from tests.support.servers import HivemeshProcess, ThriftClient, free_port
from tests.support.spark_reference import SPARK_MASTER, SPARK_TEST_CONF, driver_java_options, write_log4j2

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BackgroundJavaHMS",
    "Mesh",
    "SparkSwitch",
    "create_database",
    "file_uri",
    "hive_type",
    "member_calls",
    "register_parquet_table",
    "reserved_free_port",
    "stop_active_spark",
    "thrift",
]

_MEMBER_CALLS = re.compile(
    r'^hivemesh_proxy_member_calls_total\{member="([^"]+)",method="([^"]+)"\} (\S+)$', re.MULTILINE
)


# ------------------------------------------------------------------------------ tables over files


def hive_type(t: pa.DataType) -> str:
    """The Hive column type of an Arrow type of the TPC-H files (ValueError for others)."""
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_floating(t):
        return "double"
    raise ValueError(f"no Hive type for Arrow type {t}")


def _sd(columns: Sequence[tuple[str, str]], location: str) -> StorageDescriptor:
    serde, input_format, output_format = FORMATS["parquet"]
    return StorageDescriptor(
        cols=[FieldSchema(name=n, type=t, comment=None) for n, t in columns],
        location=location,
        inputFormat=input_format,
        outputFormat=output_format,
        compressed=False,
        numBuckets=-1,
        serdeInfo=SerDeInfo(name=None, serializationLib=serde, parameters={"serialization.format": "1"}),
        bucketCols=[],
        sortCols=[],
        parameters={},
        skewedInfo=SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
        storedAsSubDirectories=False,
    )


def file_uri(path: Path) -> str:
    """``file:/abs/path`` as Hive writes locations: not percent-encoded (``Path.as_uri`` would turn
    ``l_year=1992`` into ``l_year%3D1992``, which Hadoop and the metastores take literally)."""
    return f"file:{Path(path).resolve()}"


def create_database(client: Any, name: str, location: Path) -> None:
    """Create database ``name`` located at ``location`` through a raw Thrift client."""
    location.mkdir(parents=True, exist_ok=True)
    client.create_database(
        Database(name=name, description=None, locationUri=file_uri(location), parameters={})
    )


def register_parquet_table(client: Any, db: str, table: str, files_dir: Path, root: Path) -> Table:
    """Copy the TPC-H Parquet file of ``table`` under ``root/<db>/<table>`` and create the EXTERNAL
    Parquet table ``db.table`` over it through the raw Thrift ``client`` (any HMS).

    Tables of :data:`~hivemesh.quickstart.tpch.PARTITIONING` are partitioned by year (an ``int``
    column named as the quickstart names it, e.g. ``l_year``): one directory and one partition per
    year, added with ``add_partitions``. Returns the table as the metastore stored it."""
    data = pq.read_table(table_file(files_dir, table))
    # pyarrow cannot filter string_view columns (tpchgen-cli writes them); plain strings it can
    data = data.cast(
        pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f for f in data.schema])
    )
    location = (root / db / table).resolve()
    location.mkdir(parents=True)
    columns = [(f.name, hive_type(f.type)) for f in data.schema]
    part_col = PARTITIONING.get(table, (None, None))[0]
    now = int(time.time())
    tbl = Table(
        tableName=table,
        dbName=db,
        owner="hivemesh-tests",
        createTime=now,
        lastAccessTime=0,
        retention=0,
        sd=_sd(columns, file_uri(location)),
        partitionKeys=[FieldSchema(name=part_col, type="int", comment=None)] if part_col else [],
        parameters={"EXTERNAL": "TRUE"},
        tableType="EXTERNAL_TABLE",
    )
    if part_col is None:
        shutil.copyfile(table_file(files_dir, table), location / "data.parquet")
        client.create_table(tbl)
        return client.get_table(db, table)
    date_col = PARTITIONING[table][1]
    years = pc.year(data[date_col])
    client.create_table(tbl)
    parts = []
    for year in sorted(pc.unique(years).to_pylist()):
        part_dir = location / f"{part_col}={year}"
        part_dir.mkdir()
        pq.write_table(data.filter(pc.equal(years, year)), part_dir / "data.parquet")
        parts.append(
            Partition(
                values=[str(year)],
                dbName=db,
                tableName=table,
                createTime=now,
                lastAccessTime=0,
                sd=_sd(columns, file_uri(part_dir)),
                parameters={},
            )
        )
    client.add_partitions(parts)
    return client.get_table(db, table)


@contextmanager
def thrift(uri_or_server: Any) -> Iterator[Any]:
    """A raw Thrift client on a server (anything with ``host``/``port``) or a ``thrift://`` URI."""
    if isinstance(uri_or_server, str):
        host, port = uri_or_server.removeprefix("thrift://").rsplit(":", 1)
        server = (host, int(port))
    else:
        server = (uri_or_server.host, uri_or_server.port)
    with ThriftClient(*server) as client:
        yield client


# ------------------------------------------------------------------------------ processes


def member_calls(proxy: ProxyProcess) -> dict[tuple[str, str], float]:
    """``hivemesh_proxy_member_calls_total`` of a proxy: (member, method) -> calls sent."""
    with urllib.request.urlopen(f"{proxy.http}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {(m.group(1), m.group(2)): float(m.group(3)) for m in _MEMBER_CALLS.finditer(text)}


def reserved_free_port() -> int:
    """A TCP port free on every interface now, below the kernel's ephemeral range: processes that
    bind port 0 (the other servers of the test, other tests running meanwhile) never get it, so it
    stays free until the server it is meant for binds it a few seconds later."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    ports = list(range(max(1024, low - 12000), low))
    random.shuffle(ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    return free_port("")


class BackgroundJavaHMS:
    """Start a :class:`~tests.support.javahms.JavaHMS` without waiting for it (it takes ~20 s).

    Its port is chosen now (:func:`reserved_free_port`; HMS 2.3 binds every interface), so a proxy
    can be configured before it answers. The JVM is started from a thread of its own that lives
    until :meth:`stop` (``die_with_parent`` signals the JVM when the thread that started it ends, so
    the JVM still goes when the test process dies). :meth:`wait` returns the running JavaHMS or
    raises what its start raised."""

    def __init__(self, base_dir: Path, **kwargs: Any):
        self.hms = JavaHMS(base_dir=base_dir, port=reserved_free_port(), **kwargs)
        self.host, self.port, self.uri = self.hms.host, self.hms.port, self.hms.uri
        self._started = threading.Event()
        self._finish = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="javahms", daemon=True)

    def start(self) -> BackgroundJavaHMS:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.hms.start()
        except BaseException as e:  # handed to wait()
            self._error = e
        finally:
            self._started.set()
        self._finish.wait()
        self.hms.stop()

    def wait(self, timeout: float = 300) -> JavaHMS:
        if not self._started.wait(timeout):
            raise TimeoutError(f"the Java HMS did not start within {timeout} s; log {self.hms.log}")
        if self._error is not None:
            raise self._error
        return self.hms

    def stop(self) -> None:
        self._finish.set()
        self._thread.join(120)


class Mesh:
    """Processes of one test module under ``base``: hivemesh metastores (:meth:`metastore`), other
    servers handed over for stopping (:meth:`adopt`) and proxies (:meth:`proxy`). :meth:`close`
    stops everything, proxies first."""

    def __init__(self, base: Path):
        self.base = Path(base)
        self.metastores: dict[str, HivemeshProcess] = {}
        self.proxies: dict[str, ProxyProcess] = {}
        self._others: list[Any] = []

    def metastore(self, name: str) -> HivemeshProcess:
        """Start a hivemesh metastore on SQLite in ``base/<name>``."""
        d = self.base / name
        d.mkdir(parents=True)
        proc = HivemeshProcess(f"sqlite:///{d / 'metastore.db'}", d / "warehouse", d / "metastore.log")
        self.metastores[name] = proc.start()
        return proc

    def adopt(self, server: Any) -> Any:
        """Stop ``server`` (anything with ``stop()``) in :meth:`close`."""
        self._others.append(server)
        return server

    def proxy(
        self, name: str, resolution: str, primary: dict[str, Any], federated: list[dict[str, Any]]
    ) -> ProxyProcess:
        """Start ``hivemesh proxy`` (free Thrift and metrics ports, its own store in ``base``)."""
        d = self.base / f"proxy-{name}"
        d.mkdir(parents=True)
        settings = {
            "host": "127.0.0.1",
            "port": 0,
            "metrics_port": 0,
            "database_resolution": resolution,
            "store": f"sqlite:///{d / 'proxy.db'}",
            "reload_on_change": False,
            "status_polling_delay_ms": 500,  # a member that comes up late is seen soon
            "log_level": "INFO",
        }
        config = write_mesh(d / "mesh.yaml", settings, primary, federated)
        proc = ProxyProcess(config, d / "proxy.log")
        self.proxies[name] = proc.start()
        return proc

    def wait_available(self, proxy: str, member: str, timeout: float = 60) -> None:
        """Wait until proxy ``proxy``'s health check reports ``member`` AVAILABLE."""
        deadline = time.monotonic() + timeout
        while True:
            _, health = self.proxies[proxy].health()
            status = health["members"][member]["status"]
            if status == "AVAILABLE":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"proxy {proxy}: member {member} is still {status}: {health}")
            time.sleep(0.2)

    def close(self) -> None:
        for p in self.proxies.values():
            p.stop()
        for m in self.metastores.values():
            m.stop()
        for s in reversed(self._others):
            s.stop()


# ------------------------------------------------------------------------------ Spark


def stop_active_spark() -> None:
    """Stop this process's active SparkSession and SparkContext, if any."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()


class SparkSwitch:
    """One SparkSession at a time, with the suite's Spark test settings
    (:data:`~tests.support.spark_reference.SPARK_TEST_CONF`), bound to the metastore URI asked for.

    :meth:`bind` returns the current session when it is bound to ``uri``; otherwise it stops any
    active session in this process (the shared ``spark`` fixture's one too: tests using this run
    last, see ``tests/conftest.py``) and builds a new one (same JVM, new Hive client).
    ``warehouse``: ``spark.sql.warehouse.dir`` of that session."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.uri: str | None = None
        self.session: SparkSession | None = None

    def bind(self, uri: str, warehouse: Path, app_name: str = "hivemesh-proxy-tests") -> SparkSession:
        import hivemesh.spark

        if self.session is not None and self.uri == uri:
            return self.session
        self.stop()
        stop_active_spark()
        log4j2 = write_log4j2(self.log_dir / "spark-log4j2.properties")
        conf = dict(SPARK_TEST_CONF)
        conf["spark.driver.extraJavaOptions"] = driver_java_options(log4j2)  # when the JVM starts
        conf["spark.pyspark.python"] = sys.executable
        spark = hivemesh.spark.session(
            uri, warehouse=str(warehouse), app_name=app_name, master=SPARK_MASTER, **conf
        )
        spark.sparkContext.setLogLevel("ERROR")
        bound = spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
        if bound != uri:
            spark.stop()
            raise RuntimeError(f"the new SparkSession uses hive.metastore.uris={bound}, not {uri}")
        self.session, self.uri = spark, uri
        return spark

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session = self.uri = None
