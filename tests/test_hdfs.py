"""``hdfs://`` locations on a real HDFS (the session's mini cluster, :mod:`tests.support.hdfs`):
the storage layer's file and directory operations, the metastore's location handling (directories
made and removed, fast statistics), copying by content HDFS <-> local and HDFS -> S3 (moto) with a
flipped byte found on either side, and ``bench/hdfs.py`` at a tiny size.

The storage layer reaches HDFS through its default client (``hdfs-native``, no Hadoop
installation); WebHDFS is checked to see the same files.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import requests
from hive_metastore.ttypes import Database, FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

from hivemesh import storage
from hivemesh.replication.config import S3Options
from hivemesh.replication.data import DataMover, ZoneStorage
from hivemesh.replication.state import ReplicationStore
from hivemesh.storage.copy import checksum, sync_tree
from hivemesh.storage.hdfs import CLIENT_ENV, hdfs_client_name, hdfs_filesystem, split_hdfs_location
from tests.conftest import repo_root
from tests.support.hdfs import HdfsCluster
from tests.support.moto_glue import MotoGlue
from tests.support.servers import HivemeshProcess, ThriftClient, free_port

pytestmark = pytest.mark.hdfs


@pytest.fixture()
def root(hdfs_cluster: HdfsCluster) -> Iterator[str]:
    """A fresh directory location on the HDFS, removed after the test."""
    location = f"{hdfs_cluster.uri}/t/{uuid.uuid4().hex[:10]}"
    yield location
    storage.delete_dir(location)


def _read(location: str) -> bytes:
    fs, path = storage.resolve_location(location)
    with fs.open_input_stream(path) as f:
        return bytes(f.read())


def _flip_byte(location: str, offset: int) -> None:
    """Rewrite the file at ``location`` with one byte inverted (same size)."""
    data = bytearray(_read(location))
    data[offset] ^= 0xFF
    storage.write_file(location, bytes(data))


def test_choosing_the_client(monkeypatch: pytest.MonkeyPatch, hdfs_cluster: HdfsCluster) -> None:
    monkeypatch.delenv(CLIENT_ENV, raising=False)
    assert hdfs_client_name() == "native"
    monkeypatch.setenv(CLIENT_ENV, "WebHDFS")
    with pytest.raises(ValueError, match="expected one of native, libhdfs"):
        hdfs_client_name()
    monkeypatch.delenv(CLIENT_ENV)
    assert split_hdfs_location("hdfs://nn:8020/w/t") == ("nn:8020", "/w/t")
    assert split_hdfs_location("hdfs://nn") == ("nn", "/")

    # a NameNode that is down: operations fail (a few retries), the location operations say so
    down = f"hdfs://127.0.0.1:{free_port()}/w/t"
    assert not storage.exists(down) and storage.quick_stats(down) is None

    # libhdfs (a user's Hadoop client): where libhdfs.so and a Hadoop class path are installed it
    # reads what the native client wrote; without them (as on this project's machines) opening
    # it fails with OSError naming what is missing
    storage.write_file(f"{hdfs_cluster.uri}/clients/f", b"both")
    try:
        fs = hdfs_filesystem(split_hdfs_location(hdfs_cluster.uri)[0], "libhdfs")
    except OSError as e:
        assert "libhdfs" in str(e) or "libjvm" in str(e)
    else:
        with fs.open_input_stream("/clients/f") as f:
            assert f.read() == b"both"


def test_files_and_directories(root: str, hdfs_cluster: HdfsCluster) -> None:
    table = storage.join_location(root, "db.db", "t")
    assert not storage.exists(table)
    assert storage.make_dirs(table) and storage.exists(table)
    storage.write_file(f"{table}/part-0", b"a" * 1000)
    storage.write_file(f"{table}/ds=1/part-1", b"b" * 24)
    storage.write_file(f"{table}/_SUCCESS", b"")
    storage.write_file(f"{table}/.hidden", b"x" * 7)
    assert _read(f"{table}/ds=1/part-1") == b"b" * 24

    fs, path = storage.resolve_location(table)
    assert fs.type_name == "py::hdfs" and path == split_hdfs_location(table)[1]
    assert sorted(storage.list_files(fs, path)) == [
        (".hidden", 7),
        ("_SUCCESS", 0),
        ("ds=1/part-1", 24),
        ("part-0", 1000),
    ]
    kinds = {i.base_name: i.type for i in storage.list_dir(fs, path)}
    assert kinds["ds=1"] == pafs.FileType.Directory and kinds["part-0"] == pafs.FileType.File
    assert storage.list_dir(fs, path + "/missing") == []
    assert storage.quick_stats(table) == (2, 1024)  # hidden entries left out, as Hive does
    info = fs.get_file_info(f"{path}/part-0")
    assert info.size == 1000 and info.mtime_ns is not None

    # random access (what the ORC and Parquet readers do): a Parquet file written and read back
    rows = pa.table({"id": list(range(1000)), "name": [f"n{i}" for i in range(1000)]})
    pq.write_table(rows, f"{path}/data.parquet", filesystem=fs)
    assert pq.read_table(f"{path}/data.parquet", filesystem=fs).equals(rows)
    fs.delete_file(f"{path}/data.parquet")

    # a file rewritten in place (output streams replace), and errors as OSError
    storage.write_file(f"{table}/part-0", b"c" * 10)
    assert _read(f"{table}/part-0") == b"c" * 10
    with pytest.raises(FileNotFoundError):
        _read(f"{table}/no-such-file")
    with pytest.raises(OSError):
        fs.create_dir(f"{path}/part-0/below", recursive=True)  # a file is no directory

    # rename (one NameNode call), delete
    moved = storage.join_location(root, "db.db", "t2")
    assert storage.move_dir(table, moved)
    assert not storage.exists(table) and storage.exists(f"{moved}/ds=1/part-1")
    assert not storage.move_dir(table, moved)  # source gone: nothing done
    assert storage.delete_path(fs, split_hdfs_location(f"{moved}/part-0")[1])
    assert storage.empty_dir(moved) and storage.exists(moved)
    assert storage.list_files(fs, split_hdfs_location(moved)[1]) == []
    assert storage.delete_dir(moved) and not storage.exists(moved)
    assert not storage.delete_dir(moved)

    # WebHDFS (the NameNode's HTTP port) sees what the native client wrote
    storage.write_file(f"{root}/seen/f", b"12345")
    listing = requests.get(
        f"http://127.0.0.1:{hdfs_cluster.http_port}/webhdfs/v1{split_hdfs_location(root)[1]}/seen",
        params={"op": "LISTSTATUS", "user.name": "hivemesh"},
        timeout=30,
    ).json()
    assert [(s["pathSuffix"], s["length"]) for s in listing["FileStatuses"]["FileStatus"]] == [("f", 5)]


def _sd(location: str) -> StorageDescriptor:
    return StorageDescriptor(
        cols=[FieldSchema("id", "int", None), FieldSchema("name", "string", None)],
        location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"),
    )


def test_metastore_locations_on_hdfs(root: str, tmp_path: Path) -> None:
    server = HivemeshProcess(
        f"sqlite:///{tmp_path / 'metastore.db'}", tmp_path / "warehouse", tmp_path / "metastore.log"
    ).start()
    try:
        with ThriftClient(server.host, server.port) as hms:
            db_location = f"{root}/warehouse/sales.db"
            hms.create_database(Database(name="sales", locationUri=db_location, parameters={}))
            assert hms.get_database("sales").locationUri == db_location
            assert storage.exists(db_location)  # made by the metastore, as Hive's does

            # a managed table: its directory made on create, removed on drop
            managed = f"{db_location}/orders"
            hms.create_table(
                Table(
                    tableName="orders",
                    dbName="sales",
                    sd=_sd(managed),
                    tableType="MANAGED_TABLE",
                    parameters={},
                )
            )
            assert storage.exists(managed)

            # an external table over files already there: fast statistics from the HDFS listing
            external = f"{root}/landing/events"
            storage.write_file(f"{external}/part-0", b"1,a\n" * 100)
            storage.write_file(f"{external}/part-1", b"2,b\n" * 50)
            storage.write_file(f"{external}/_SUCCESS", b"")
            hms.create_table(
                Table(
                    tableName="events",
                    dbName="sales",
                    sd=_sd(external),
                    tableType="EXTERNAL_TABLE",
                    parameters={"EXTERNAL": "TRUE"},
                )
            )
            params = hms.get_table("sales", "events").parameters
            assert (params["numFiles"], params["totalSize"]) == ("2", "600")

            # a partition's directory below the table's, made on add, removed on drop
            daily = f"{db_location}/daily"
            hms.create_table(
                Table(
                    tableName="daily",
                    dbName="sales",
                    sd=_sd(daily),
                    partitionKeys=[FieldSchema("ds", "string", None)],
                    tableType="MANAGED_TABLE",
                    parameters={},
                )
            )
            hms.add_partitions([Partition(values=["2024-01-01"], dbName="sales", tableName="daily")])
            part = hms.get_partition("sales", "daily", ["2024-01-01"])
            assert part.sd.location == f"{daily}/ds=2024-01-01" and storage.exists(part.sd.location)
            assert hms.drop_partition("sales", "daily", ["2024-01-01"], True)
            assert not storage.exists(part.sd.location) and storage.exists(daily)

            hms.drop_table("sales", "orders", True)
            assert not storage.exists(managed)
            hms.drop_table("sales", "events", True)
            assert storage.exists(f"{external}/part-0")  # external data stays
            hms.drop_database("sales", True, True)
            assert not storage.exists(db_location)
    finally:
        server.stop()


@pytest.mark.parametrize("direction", ["hdfs->local", "local->hdfs"])
def test_copy_by_content_finds_a_flipped_byte(direction: str, root: str, tmp_path: Path) -> None:
    """HDFS's own file checksum (MD5 of MD5s of CRC32C per block) is no MD5 of the bytes, and S3's
    ETag is one only for single-part uploads: copy by content compares size, then an MD5 of the
    bytes that hivemesh computes itself on both sides, whatever the storage."""
    local = f"file:{tmp_path / 'local'}"
    source, target = (f"{root}/src", local) if direction == "hdfs->local" else (local, f"{root}/dst")
    files = {"part-0": os.urandom(3000), "ds=1/part-1": os.urandom(70_000), "ds=2/empty": b""}
    for rel, data in files.items():
        storage.write_file(f"{source}/{rel}", data)

    first = sync_tree(source, target)
    assert (first.copied, first.bytes_copied) == (3, 73_000)
    for rel, data in files.items():
        assert _read(f"{target}/{rel}") == data
    again = sync_tree(source, target)
    assert (again.copied, again.unchanged) == (0, 3)

    # a byte flipped on the HDFS side, the size the same: found by MD5 and copied again
    hdfs_side = source if direction == "hdfs->local" else target
    _flip_byte(f"{hdfs_side}/ds=1/part-1", 12_345)
    src_fs, src_root = storage.resolve_location(source)
    dst_fs, dst_root = storage.resolve_location(target)
    assert checksum(src_fs, f"{src_root}/ds=1/part-1") != checksum(dst_fs, f"{dst_root}/ds=1/part-1")
    mended = sync_tree(source, target)
    assert (mended.copied, mended.bytes_copied, mended.unchanged) == (1, 70_000, 2)
    assert _read(f"{target}/ds=1/part-1") == _read(f"{source}/ds=1/part-1")

    # replication's data mover (ledger of copies) on the same pair: a source-side change found too
    store = ReplicationStore(f"sqlite:///{tmp_path / 'replication.db'}")
    try:
        mover = DataMover("p", store, ZoneStorage(), ZoneStorage(), threads=2)
        target2 = f"{root}/dst2" if direction == "hdfs->local" else f"file:{tmp_path / 'local2'}"
        assert mover.sync(source, target2).copied == 3
        assert mover.sync(source, target2).copied == 0
        _flip_byte(f"{source}/part-0", 7)
        result = mover.sync(source, target2)
        assert (result.copied, result.bytes_copied) == (1, 3000)
        assert _read(f"{target2}/part-0") == _read(f"{source}/part-0")
    finally:
        store.dispose()


def test_hdfs_to_s3_by_content(root: str, tmp_path: Path) -> None:
    """HDFS -> S3 (a moto server) with replication's data mover: a byte flipped on the S3 side is
    found by MD5 once the ledger is not trusted (as ``verify`` compares), one flipped on the HDFS
    side by the source's new modification time; each is copied again."""
    import boto3

    with MotoGlue() as moto:  # a moto server: S3 among its services
        boto3.client(
            "s3",
            region_name="us-east-1",
            endpoint_url=moto.endpoint_url,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        ).create_bucket(Bucket="lake")
        s3 = S3Options(
            endpoint_override=f"127.0.0.1:{moto.port}",
            scheme="http",
            access_key="x",
            secret_key="x",
            region="us-east-1",
        )
        files = {"part-0": os.urandom(4000), "ds=1/part-1": os.urandom(9000)}
        for rel, data in files.items():
            storage.write_file(f"{root}/src/{rel}", data)
        target = f"s3a://lake/{uuid.uuid4().hex[:8]}/t"
        store = ReplicationStore(f"sqlite:///{tmp_path / 'replication.db'}")
        try:
            mover = DataMover("p", store, ZoneStorage(), ZoneStorage(s3), threads=2)
            assert mover.sync(f"{root}/src", target).copied == 2
            s3_fs, s3_root = ZoneStorage(s3).resolve(target)
            with s3_fs.open_input_stream(f"{s3_root}/ds=1/part-1") as f:
                assert f.read() == files["ds=1/part-1"]

            flipped = bytearray(files["ds=1/part-1"])
            flipped[4321] ^= 0x01
            with s3_fs.open_output_stream(f"{s3_root}/ds=1/part-1") as out:
                out.write(bytes(flipped))
            mover.trust_ledger = False
            assert (mover.sync(f"{root}/src", target).copied, mover.sync(f"{root}/src", target).copied) == (
                1,
                0,
            )
            with s3_fs.open_input_stream(f"{s3_root}/ds=1/part-1") as f:
                assert f.read() == files["ds=1/part-1"]

            mover.trust_ledger = True
            _flip_byte(f"{root}/src/part-0", 0)
            result = mover.sync(f"{root}/src", target)
            assert (result.copied, result.bytes_copied) == (1, 4000)
            with s3_fs.open_input_stream(f"{s3_root}/part-0") as f:
                assert f.read() == _read(f"{root}/src/part-0") != files["part-0"]
        finally:
            store.dispose()


def test_hdfs_file_checksum_is_no_md5_of_the_bytes(root: str, hdfs_cluster: HdfsCluster) -> None:
    """Why copy by content does not use HDFS's own checksum: for the same bytes it is an MD5 of
    per-block MD5s of per-chunk CRC32Cs (WebHDFS ``GETFILECHECKSUM``), so it depends on the block
    and chunk sizes and matches neither the MD5 hivemesh computes nor an S3 ETag."""
    data = os.urandom(5000)
    storage.write_file(f"{root}/f", data)
    answer = requests.get(
        f"http://127.0.0.1:{hdfs_cluster.http_port}/webhdfs/v1{split_hdfs_location(root)[1]}/f",
        params={"op": "GETFILECHECKSUM", "user.name": "hivemesh"},
        timeout=30,
    )
    answer.raise_for_status()
    file_checksum = answer.json()["FileChecksum"]
    assert file_checksum["algorithm"] == "MD5-of-0MD5-of-512CRC32C"
    fs, path = storage.resolve_location(f"{root}/f")
    ours = checksum(fs, path)
    assert ours == hashlib.md5(data, usedforsecurity=False).hexdigest()
    assert ours not in file_checksum["bytes"]


def test_benchmark_runs(hdfs_cluster: HdfsCluster) -> None:
    """``bench/hdfs.py`` at 4 MiB on the session's cluster, without the JVM candidate (a JVM start
    per copy): it exits 0 and prints its table; no timing is asserted."""
    done = subprocess.run(
        [sys.executable, str(repo_root() / "bench" / "hdfs.py"), "--mb", "4", "--no-jvm",
         "--hdfs", hdfs_cluster.uri, "--http-port", str(hdfs_cluster.http_port)],
        cwd=repo_root(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert lines["native"].split()[2] == "1.00" and lines["native"].rstrip().endswith("yes")
    assert lines["webhdfs"].rstrip().endswith("yes")
    assert "libhdfs" in lines
