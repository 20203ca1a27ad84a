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
