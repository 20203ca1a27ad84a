"""``hivemesh acid``: look at Hive ACID tables from the command line (no Spark).

``hivemesh acid files`` prints which files a snapshot reads and why the others are left out (Hive
AcidUtils' rules, :func:`hivemesh.acid.selection.select_files`); ``hivemesh acid cat`` prints
the rows a snapshot sees (pyarrow reader). Both work on a directory with an explicit
ValidWriteIdList, or on a table through a metastore (a read txn is opened, used and committed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import click
from hive_metastore.ttypes import TxnType
from rich.console import Console
from rich.table import Table

from hivemesh.acid.arrow_reader import (
    TableLayout,
    flush_length,
    list_location,
    read_snapshot_files,
    schema_from_files,
    table_layout,
)
from hivemesh.acid.selection import SnapshotFiles, select_files
from hivemesh.acid.tables import split_name, table_locations
from hivemesh.client.metastore import MetastoreClient, lock_component
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList


@dataclass
class _Target:
    location: str
    label: str
    write_ids: ValidWriteIdList
    txns: ValidTxnList | None
    layout: TableLayout | None


@contextmanager
def _targets(
    table: str | None,
    path: str | None,
    write_ids: str | None,
    txns: str | None,
    metastore_uri: str | None,
    partition_filter: str | None,
    insert_only: bool,
) -> Iterator[list[_Target]]:
    if (table is None) == (path is None):
        raise click.UsageError("give a TABLE (with --metastore-uri) or --path (with --write-ids)")
    if path is not None:
        yield [_path_target(path, write_ids, txns, insert_only)]
        return
    assert table is not None
    if not metastore_uri:
        raise click.UsageError("TABLE needs --metastore-uri thrift://host:port")
    with _table_targets(table, metastore_uri, partition_filter) as targets:
        yield targets


def _path_target(path: str, write_ids: str | None, txns: str | None, insert_only: bool) -> _Target:
    """A directory read under an explicit snapshot."""
    if not write_ids:
        raise click.UsageError(
            "--path needs --write-ids (Hive ValidReaderWriteIdList, e.g. db.t:4:9223372036854775807::)"
        )
    try:
        wids = ValidWriteIdList.parse(write_ids)
        vtl = ValidTxnList.parse(txns) if txns else None
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    return _Target(path, path, wids, vtl, None if not insert_only else TableLayout((), insert_only=True))


@contextmanager
def _table_targets(table: str, metastore_uri: str, partition_filter: str | None) -> Iterator[list[_Target]]:
    """A table's locations read in a read-only txn of the metastore (open while the caller reads)."""
    db, name = split_name(table)
    with MetastoreClient(metastore_uri) as client:
        tbl = client.call("get_table", db, name, idempotent=True)
        try:
            layout = table_layout(tbl)
        except ValueError as e:
            raise click.ClickException(str(e)) from e
        with client.transaction(txn_type=TxnType.READ_ONLY) as tx:
            tx.lock([lock_component(db, name)])
            vtl = tx.valid_txn_list()
            wids = tx.valid_write_ids([f"{db}.{name}"], vtl)[f"{db}.{name}"]
            keys = [k.name for k in tbl.partitionKeys or []]
            yield [
                _Target(
                    loc,
                    "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True)) or f"{db}.{name}",
                    wids,
                    vtl,
                    layout,
                )
                for loc, values in table_locations(client, tbl, partition_filter)
            ]


def _select(t: _Target) -> SnapshotFiles:
    return select_files(
        list_location(t.location), t.write_ids, t.txns, insert_only=bool(t.layout and t.layout.insert_only)
    )


_common = [
    click.argument("table", required=False),
    click.option("--path", help="A table or partition directory (instead of TABLE)."),
    click.option("--write-ids", help="ValidWriteIdList for --path, e.g. 'db.t:4:9223372036854775807::'."),
    click.option(
        "--txns", help="ValidTxnList for --path (checks _v<txn> visibility), e.g. '12:9223372036854775807::'."
    ),
    click.option("--metastore-uri", envvar="HIVEMESH_METASTORE_URI", help="thrift://host:port for TABLE."),
    click.option("--partition-filter", help="Hive partition filter for TABLE, e.g. \"ds >= '2024-01-01'\"."),
    click.option("--insert-only", is_flag=True, help="--path holds an insert-only (MM) table."),
]


def _with_common(fn):  # type: ignore[no-untyped-def]
    for decorator in reversed(_common):
        fn = decorator(fn)
    return fn


@click.group()
def acid() -> None:
    """Inspect Hive ACID tables: which files a snapshot reads, and its rows."""


@acid.command()
@_with_common
def files(**kw: object) -> None:
    """Print the files a snapshot reads and those it leaves out (obsolete, aborted, not visible)."""
    console = Console()
    with _targets(**kw) as targets:  # type: ignore[arg-type]
        for t in targets:
            sel = _select(t)
            console.print(f"[bold]{t.label}[/bold]  {t.write_ids}" + (f"  txns {t.txns}" if t.txns else ""))
            out = Table(show_edge=False)
            for col in ("status", "path", "bytes", "note"):
                out.add_column(col, overflow="fold")
            for f in sel.data_files:
                kind = "original" if f.directory is None else f.directory.kind
                length = flush_length(t.location, f)
                note = f"{kind}" + (f", read up to {length} (flush length)" if length is not None else "")
                note += ", rows of invalid write ids dropped" if f.write_id_filter else ""
                out.add_row("read", f.path, str(f.size), note)
            for f in sel.delete_files:
                out.add_row("read", f.path, str(f.size), "delete events")
            for status, paths in (
                ("obsolete", sel.obsolete),
                ("aborted", sel.aborted),
                ("not visible", sel.ignored),
            ):
                for p in paths:
                    out.add_row(status, p, "", "")
            console.print(out)


@acid.command()
@_with_common
@click.option("--limit", type=int, default=20, show_default=True, help="Rows to print (0: all).")
@click.option("--row-ids", is_flag=True, help="Also print ROW__ID (originalTransaction, bucket, rowId).")
def cat(limit: int, row_ids: bool, **kw: object) -> None:
    """Print the rows a snapshot sees (full ACID and insert-only ORC/Parquet/text)."""
    console = Console()
    with _targets(**kw) as targets:  # type: ignore[arg-type]
        shown = 0
        for t in targets:
            sel = _select(t)
            layout = t.layout
            if layout is None or not layout.columns:
                layout = TableLayout(
                    tuple(schema_from_files(t.location, sel)), insert_only=bool(layout and layout.insert_only)
                )
            data = read_snapshot_files(t.location, sel, t.write_ids, layout, with_row_ids=row_ids)
            out = Table(title=f"{t.label}: {data.num_rows} rows", show_edge=False)
            for name in data.column_names:
                out.add_column(name, overflow="ellipsis", no_wrap=True, max_width=40)
            for row in data.to_pylist():
                if limit and shown >= limit:
                    break
                out.add_row(*(str(v) for v in row.values()))
                shown += 1
            console.print(out)
