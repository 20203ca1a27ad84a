"""``hivemesh acid files|cat`` on Hive-written fixture files (read in place) and on a table."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hivemesh.cli import main
from tests.conftest import shared_dir

FIXTURES = shared_dir() / "fixtures" / "hive-acid"


@pytest.fixture()
def nation_table(tmp_path: Path) -> Path:
    """The Hive-written nation insert file under delta 2 and its delete deltas 3 and 4 (symlinks)."""
    (tmp_path / "delta_0000002_0000002_0000").mkdir()
    (tmp_path / "delta_0000002_0000002_0000" / "bucket_00000").symlink_to(
        FIXTURES / "nationFile25kRowsSortedOnNationKey" / "bucket_00000"
    )
    for w in (3, 4):
        name = f"delete_delta_000000{w}_000000{w}_0000"
        (tmp_path / name).symlink_to(FIXTURES / "nation_delete_deltas" / name)
    return tmp_path


def _run(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_files_shows_read_and_aborted(nation_table: Path) -> None:
    out = _run("acid", "files", "--path", str(nation_table), "--write-ids", "t:4:9223372036854775807::3")
    lines = [line for line in out.splitlines() if "delta_" in line]
    assert any(
        line.split()[0] == "read" and "delta_0000002_0000002_0000/bucket_00000" in line for line in lines
    )
    assert any(
        line.split()[0] == "read" and "delete_delta_0000004_0000004_0000/bucket_00000" in line
        for line in lines
    )
    assert any(line.split()[0] == "aborted" and "delete_delta_0000003_0000003_0000" in line for line in lines)


def test_cat_counts_rows_of_the_snapshot(nation_table: Path) -> None:
    both = _run(
        "acid", "cat", "--path", str(nation_table), "--write-ids", "t:4:9223372036854775807::", "--limit", "1"
    )
    assert "23000 rows" in both
    none = _run(
        "acid", "cat", "--path", str(nation_table), "--write-ids", "t:2:9223372036854775807::", "--limit", "1"
    )
    assert "25000 rows" in none


def test_usage_errors_are_precise(nation_table: Path) -> None:
    result = CliRunner().invoke(main, ["acid", "files", "--path", str(nation_table)])
    assert result.exit_code == 2
    assert "--path needs --write-ids" in result.output
    result = CliRunner().invoke(
        main, ["acid", "files", "--path", str(nation_table), "--write-ids", "garbage"]
    )
    assert result.exit_code == 2
    assert "garbage" in result.output or "write" in result.output.lower()


def _fails(*args: str) -> str:
    """The command's output; it must end with exit code 1 and one error line, no traceback."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_errors_are_one_line_with_exit_code_1(hivemesh_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A missing table, an unreachable metastore, a bad URI, a missing directory: one line each."""
    uri = f"thrift://{hivemesh_server.host}:{hivemesh_server.port}"
    assert "NoSuchObjectException" in _fails("acid", "cat", "nodb.nothing", "--metastore-uri", uri)
    assert "NoSuchObjectException" in _fails("acid", "files", "default.nothing", "--metastore-uri", uri)
    assert "127.0.0.1:1" in _fails("acid", "cat", "db.t", "--metastore-uri", "thrift://127.0.0.1:1")
    assert "foo://x" in _fails("acid", "cat", "db.t", "--metastore-uri", "foo://x")
    missing = str(tmp_path / "no_such_dir")
    assert "no_such_dir" in _fails(
        "acid", "cat", "--path", missing, "--write-ids", "t:1:9223372036854775807::"
    )


def test_json_and_tsv_for_scripts(nation_table: Path) -> None:
    """``--format json``: one object per row (with its target); ``--format tsv``: a header and
    tab-separated values; neither wraps, whatever the width."""
    import json

    snap = ["--path", str(nation_table), "--write-ids", "t:4:9223372036854775807::"]
    rows = [
        json.loads(line)
        for line in _run("acid", "cat", *snap, "--limit", "3", "--format", "json").splitlines()
    ]
    assert len(rows) == 3 and all(r["target"] == str(nation_table) for r in rows)
    assert set(rows[0]) - {"target"} and all(len(r) == len(rows[0]) for r in rows)
    tsv = _run("acid", "cat", *snap, "--limit", "2", "--format", "tsv").splitlines()
    assert tsv[0].split("\t")[0] == "target" and len(tsv) == 3
    assert all(len(line.split("\t")) == len(tsv[0].split("\t")) for line in tsv)
    files = [json.loads(line) for line in _run("acid", "files", *snap, "--format", "json").splitlines()]
    assert {f["status"] for f in files} == {"read"} and any(f["path"].endswith("bucket_00000") for f in files)


def test_tsv_has_one_header_for_all_partitions(hivemesh_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A partitioned table through the metastore: ``--format tsv`` prints its header once, not
    once per partition (``cat`` and ``files``)."""
    from hive_metastore.ttypes import Database, FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table

    from tests.support.servers import ThriftClient

    def sd(location: Path) -> StorageDescriptor:
        location.mkdir(parents=True, exist_ok=True)
        return StorageDescriptor(
            cols=[FieldSchema("id", "int", None), FieldSchema("name", "string", None)],
            location=str(location),
            inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}),
            parameters={},
        )

    with ThriftClient(hivemesh_server.host, hivemesh_server.port) as c:
        c.create_database(Database(name="tsv_once", locationUri=str(tmp_path / "db"), parameters={}))
        c.create_table(
            Table(
                tableName="t", dbName="tsv_once", owner="test", tableType="MANAGED_TABLE",
                parameters={"transactional": "true"}, partitionKeys=[FieldSchema("ds", "string", None)],
                sd=sd(tmp_path / "db" / "t"),
            )
        )  # fmt: skip
        for ds in ("1", "2", "3"):
            part = sd(tmp_path / "db" / "t" / f"ds={ds}")
            c.add_partition(Partition(values=[ds], dbName="tsv_once", tableName="t", sd=part, parameters={}))
    uri = f"thrift://{hivemesh_server.host}:{hivemesh_server.port}"
    for command in ("cat", "files"):
        out = _run("acid", command, "tsv_once.t", "--metastore-uri", uri, "--format", "tsv").splitlines()
        assert [line for line in out if line.startswith("target\t")] == [out[0]], out
