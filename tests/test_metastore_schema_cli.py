"""``hivemesh metastore schema status|upgrade`` and ``hivemesh metastore backup``, the refusal to
serve a schema newer than this hivemesh, and backups restored to a store that serves the same
catalog (SQLite through ``metastore backup`` while serving; PostgreSQL through pg_dump/pg_restore).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from click.testing import CliRunner, Result
from hive_metastore.ttypes import (
    AbortTxnRequest,
    Database,
    FieldSchema,
    OpenTxnRequest,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TxnState,
)

from hivemesh import __version__
from hivemesh.cli import main
from hivemesh.metastore.store import MIGRATIONS, Store, schema_status
from hivemesh.storage.sql import SchemaTooNewError
from tests.conftest import PG_SKIP_REASON, drop_pg_database, make_pg_database, postgres_available
from tests.support.postgres import postgres_binaries
from tests.support.servers import HivemeshProcess, ThriftClient

HEAD = "0007"


def _cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["metastore", *args], catch_exceptions=False)


def _revision(url: str) -> str | None:
    return schema_status(url).current


def _sds_indexes(db_file: Path) -> set[str]:
    with sqlite3.connect(db_file) as c:
        return {r[1] for r in c.execute("PRAGMA index_list('SDS')")}


def _columns(db_file: Path, table: str) -> set[str]:
    with sqlite3.connect(db_file) as c:
        return {r[1] for r in c.execute(f"PRAGMA table_info('{table}')")}


def test_fresh_store_is_empty_and_upgrade_creates_the_schema(tmp_path: Path) -> None:
    db_file = tmp_path / "metastore.db"
    url = f"sqlite:///{db_file}"
    r = _cli("schema", "status", "--db", url)
    assert r.exit_code == 1, r.output
    assert "empty (no schema)" in r.output
    assert f"head:     {HEAD} (hivemesh {__version__})" in r.output
    assert not db_file.exists()  # status writes nothing, not even an empty file

    r = _cli("schema", "upgrade", "--db", url)
    assert r.exit_code == 0, r.output
    assert [line.split(":")[0].strip() for line in r.output.splitlines() if "applied" in line] == [
        "applied 0001", "applied 0002", "applied 0003", "applied 0004", "applied 0005", "applied 0006",
        "applied 0007",
    ]  # fmt: skip
    assert "up to date" in r.output.splitlines()[-1]
    assert _revision(url) == HEAD

    r = _cli("schema", "status", "--db", url)
    assert r.exit_code == 0, r.output
    assert "status:   up to date" in r.output and f"current:  {HEAD}" in r.output
    r = _cli("schema", "status", "--db", url, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["state"] == "up to date" and doc["current"] == doc["head"] == HEAD
    assert doc["pending"] == [] and doc["hivemesh_version"] == __version__

    r = _cli("schema", "upgrade", "--db", url)
    assert r.exit_code == 0, r.output
    assert "nothing to do" in r.output and "applied" not in r.output


def test_first_start_says_it_creates_the_schema(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A fresh store's log line says the schema is created at the head, not "upgraded from None"."""
    url = f"sqlite:///{tmp_path / 'metastore.db'}"
    with caplog.at_level("INFO", logger="hivemesh.storage.sql"):
        Store(url).dispose()
        Store(url).dispose()  # then up to date: no line
    lines = [r.getMessage() for r in caplog.records if r.name == "hivemesh.storage.sql"]
    assert lines == [f"creating a new schema (alembic_version) at revision {HEAD} in {url}"]


def test_upgrade_from_an_older_revision(tmp_path: Path) -> None:
    """A store at 0003 (Alembic downgrade of a current one: SDS without its two indexes, no
    KEY_CONSTRAINTS, no WRITE_SET, DBS without DB_MANAGED_LOCATION_URI) needs 0004 to 0007;
    ``upgrade`` applies exactly those; ``--db`` may also come before the command."""
    db_file = tmp_path / "metastore.db"
    url = f"sqlite:///{db_file}"
    store = Store(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    store.dispose()
    assert _revision(url) == "0003"
    assert not {"SDS_SERDE", "SDS_CD"} & _sds_indexes(db_file)
    assert "DB_MANAGED_LOCATION_URI" not in _columns(db_file, "DBS")

    r = _cli("--db", url, "schema", "status")
    assert r.exit_code == 1, r.output
    assert "needs upgrade (4 migrations: 0004, 0005, 0006, 0007)" in r.output
    assert "current:  0003" in r.output
    doc = json.loads(_cli("schema", "status", "--db", url, "--format", "json").output)
    assert doc["state"] == "needs upgrade"
    assert [p["revision"] for p in doc["pending"]] == ["0004", "0005", "0006", "0007"]
    assert doc["description"] == "needs upgrade (4 migrations: 0004, 0005, 0006, 0007)"

    r = _cli("schema", "upgrade", "--db", url)
    assert r.exit_code == 0, r.output
    assert "from 0003 to 0007 (4 migrations)" in r.output
    assert [line for line in r.output.splitlines() if "applied" in line] == [
        "  applied 0004: Indexes on SDS.SERDE_ID and SDS.CD_ID (Hive's SDS_N49 and SDS_N50).",
        "  applied 0005: KEY_CONSTRAINTS: the constraints of tables (primary and foreign keys, unique, not null, ...).",
        "  applied 0006: WRITE_SET: the updates and deletes of committed txns (``get_latest_txnid_in_conflict``).",
        "  applied 0007: DBS.DB_MANAGED_LOCATION_URI: a database's managedLocationUri (Hive 3+).",
    ]
    assert _revision(url) == HEAD
    assert {"SDS_SERDE", "SDS_CD"} <= _sds_indexes(db_file)
    assert "DB_MANAGED_LOCATION_URI" in _columns(db_file, "DBS")


def test_db_comes_from_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    mesh = tmp_path / "conf" / "mesh.yaml"
    mesh.write_text("metastore:\n  db: sqlite:///stores/ms.db\n")  # relative to the file
    r = _cli("schema", "upgrade", "--config", str(mesh))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "conf" / "stores" / "ms.db").is_file()
    r = _cli("--config", str(mesh), "schema", "status")
    assert r.exit_code == 0 and str(tmp_path / "conf" / "stores" / "ms.db") in r.output, r.output


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    r = _cli("schema", "status", "--db", "postgresql+psycopg://hive:s3cret@127.0.0.1:1/nowhere")
    assert r.exit_code == 2, r.output
    assert "cannot read the metadata store" in r.output and "s3cret" not in r.output
    r = _cli("schema", "upgrade", "--db", "mysql://root@localhost/hive")
    assert r.exit_code == 2 and "sqlite:///" in r.output, r.output


def _run_metastore(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVEMESH_")}
    cmd = [sys.executable, "-m", "hivemesh.cli", "metastore", "--log-level", "WARNING", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_newer_schema_is_reported_and_refused(tmp_path: Path) -> None:
    db_file = tmp_path / "metastore.db"
    url = f"sqlite:///{db_file}"
    Store(url).dispose()
    with sqlite3.connect(db_file) as c:
        c.execute("UPDATE alembic_version SET version_num = '0099_future'")

    r = _cli("schema", "status", "--db", url)
    assert r.exit_code == 1, r.output
    assert "status:   newer than this hivemesh (revision 0099_future unknown)" in r.output
    assert json.loads(_cli("schema", "status", "--db", url, "--format", "json").output)["state"] == "newer"

    message = (
        f"the metadata store's schema ({url}) is at revision 0099_future, newer than this hivemesh "
        f"{__version__} knows (head {HEAD}): upgrade hivemesh"
    )
    r = _cli("schema", "upgrade", "--db", url)
    assert r.exit_code == 2, r.output
    assert message in r.output
    with pytest.raises(SchemaTooNewError, match="0099_future"):
        Store(url)
    assert _revision(url) == "0099_future"  # nothing changed

    served = _run_metastore(tmp_path, "--port", "0", "--db", url, "--warehouse", str(tmp_path / "wh"))
    out = served.stdout + served.stderr
    assert served.returncode == 2, out
    assert message in out and "Traceback" not in out and "listening on" not in out
    assert len([line for line in out.splitlines() if line.strip()]) == 1, out
    assert _revision(url) == "0099_future"


def test_serving_without_a_command_still_serves(tmp_path: Path) -> None:
    """``hivemesh metastore`` (a group now) serves as before, and upgrades an old store on start."""
    url = f"sqlite:///{tmp_path / 'metastore.db'}"
    with (
        HivemeshProcess(url, tmp_path / "wh", tmp_path / "ms.log") as proc,
        ThriftClient(proc.host, proc.port) as c,
    ):
        assert c.get_all_databases() == ["default"]
    assert _revision(url) == HEAD
    r = _cli("--help")
    assert r.exit_code == 0 and "schema" in r.output and "backup" in r.output and "--txn-timeout" in r.output


# ---------------------------------------------------------------- backup and restore


def _populate(proc: HivemeshProcess, root: Path) -> None:
    """Database sales with tables orders and items; three txns, the first aborted."""
    with ThriftClient(proc.host, proc.port) as c:
        c.create_database(Database(name="sales", locationUri=str(root / "sales.db"), parameters={}))
        for name in ("orders", "items"):
            c.create_table(
                Table(
                    tableName=name,
                    dbName="sales",
                    owner="test",
                    tableType="EXTERNAL_TABLE",
                    parameters={"k": name},
                    partitionKeys=[],
                    sd=StorageDescriptor(
                        cols=[FieldSchema("id", "int", ""), FieldSchema("amount", "double", "")],
                        location=str(root / name),
                        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
                        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
                        serdeInfo=SerDeInfo(
                            serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde", parameters={}
                        ),
                        parameters={},
                    ),
                )
            )
        txns = c.open_txns(OpenTxnRequest(num_txns=3, user="tester", hostname="localhost")).txn_ids
        c.abort_txn(AbortTxnRequest(txnid=txns[0]))


def _catalog(proc: HivemeshProcess) -> dict[str, Any]:
    """What a client sees: databases, tables with columns and parameters, txns (open/aborted)."""
    with ThriftClient(proc.host, proc.port) as c:
        tables = {}
        for db in c.get_all_databases():
            for t in c.get_all_tables(db):
                tbl = c.get_table(db, t)
                cols = [(f.name, f.type) for f in tbl.sd.cols]
                tables[(db, t)] = (cols, tbl.parameters.get("k"), tbl.sd.location)
        txns = c.get_open_txns_info()
        return {
            "databases": sorted(c.get_all_databases()),
            "tables": tables,
            "txns": sorted((t.id, t.state) for t in txns.open_txns),
            "high_water_mark": txns.txn_high_water_mark,
        }


def test_sqlite_backup_while_serving_restores_the_same_catalog(tmp_path: Path) -> None:
    db_file = tmp_path / "live" / "metastore.db"
    url = f"sqlite:///{db_file}"
    backup_file = tmp_path / "backup" / "metastore-backup.db"
    backup_file.parent.mkdir()
    with HivemeshProcess(url, tmp_path / "wh", tmp_path / "live.log") as live:
        _populate(live, tmp_path / "wh")
        before = _catalog(live)
        wal = Path(f"{db_file}-wal")
        assert wal.exists() and wal.stat().st_size > 0  # recent commits are in the WAL, not the file
        # another process, as an operator would run it, while the metastore serves
        r = subprocess.run(
            [sys.executable, "-m", "hivemesh.cli", "metastore", "backup", "--db", url,
             "--to", str(backup_file)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"schema revision {HEAD}" in r.stdout
        assert _catalog(live) == before  # still serving, unchanged
        r = _cli("backup", "--db", url, "--to", str(backup_file))
        assert r.exit_code == 2 and "exists" in r.output, r.output  # never overwritten
    assert not Path(f"{backup_file}-wal").exists()  # the backup is one self-contained file
    assert sorted(p.name for p in backup_file.parent.iterdir()) == ["metastore-backup.db"]

    restored = tmp_path / "restored" / "metastore.db"
    restored.parent.mkdir()
    shutil.copyfile(backup_file, restored)
    restored_url = f"sqlite:///{restored}"
    assert _revision(restored_url) == HEAD
    with HivemeshProcess(restored_url, tmp_path / "wh", tmp_path / "restored.log") as again:
        after = _catalog(again)
        with ThriftClient(again.host, again.port) as c:  # ids continue after the restored ones
            new = c.open_txns(OpenTxnRequest(num_txns=1, user="t", hostname="h")).txn_ids
    assert after == before
    assert new[0] > before["high_water_mark"]
    assert after["databases"] == ["default", "sales"]
    assert [state for _, state in after["txns"]] == [TxnState.ABORTED, TxnState.OPEN, TxnState.OPEN]


@pytest.mark.postgres
def test_postgres_pg_dump_while_serving_restores_the_same_catalog(tmp_path: Path) -> None:
    if not postgres_available():
        pytest.skip(PG_SKIP_REASON)
    bindir = postgres_binaries()
    pg_dump = bindir / "pg_dump" if bindir else shutil.which("pg_dump")
    pg_restore = bindir / "pg_restore" if bindir else shutil.which("pg_restore")
    if not pg_dump or not pg_restore:
        pytest.skip("pg_dump/pg_restore not installed")
    source, target = make_pg_database(), make_pg_database()
    dump = tmp_path / "metastore.dump"

    def libpq(url: str) -> str:
        return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)

    try:
        with HivemeshProcess(source, tmp_path / "wh", tmp_path / "live.log") as live:
            _populate(live, tmp_path / "wh")
            before = _catalog(live)
            subprocess.run(
                [str(pg_dump), "-Fc", "-f", str(dump), libpq(source)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        subprocess.run(
            [str(pg_restore), "--no-owner", "--exit-on-error", "--single-transaction", "-d",
             libpq(target), str(dump)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        r = _cli("schema", "status", "--db", target)
        assert r.exit_code == 0 and "up to date" in r.output, r.output
        with HivemeshProcess(target, tmp_path / "wh", tmp_path / "restored.log") as again:
            after = _catalog(again)
            with ThriftClient(again.host, again.port) as c:  # ids continue after the restored ones
                new = c.open_txns(OpenTxnRequest(num_txns=1, user="t", hostname="h")).txn_ids
        assert after == before
        assert new[0] > before["high_water_mark"]
    finally:
        drop_pg_database(source)
        drop_pg_database(target)
