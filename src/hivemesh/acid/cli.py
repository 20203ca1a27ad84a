"""``hivemesh acid``: look at Hive ACID tables from the command line (no Spark).

``hivemesh acid files`` prints which files a snapshot reads and why the others are left out (Hive
AcidUtils' rules, :func:`hivemesh.acid.selection.select_files`); ``hivemesh acid cat`` prints
the rows a snapshot sees (pyarrow reader). Both work on a directory with an explicit
ValidWriteIdList, or on a table through a metastore (a read txn is opened, used and committed).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click
import pyarrow as pa
from hive_metastore.ttypes import TxnType
from rich.console import Console
from rich.table import Table
from thrift.Thrift import TApplicationException, TException
from thrift.transport.TTransport import TTransportException

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
from hivemesh.client.errors import error_name
from hivemesh.client.metastore import MetastoreClient, lock_component
from hivemesh.errors import HivemeshError
from hivemesh.hive.txn_lists import ValidTxnList, ValidWriteIdList
from hivemesh.kerberos import KerberosError, KerberosInitiator
from hivemesh.tls import TlsError, client_context


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
    tls_ca: str | None = None,
    kerberos_principal: str | None = None,
) -> Iterator[list[_Target]]:
    if (table is None) == (path is None):
        raise click.UsageError("give a TABLE (with --metastore-uri) or --path (with --write-ids)")
    if path is not None:
        yield [_path_target(path, write_ids, txns, insert_only)]
        return
    assert table is not None
    if not metastore_uri:
        raise click.UsageError("TABLE needs --metastore-uri thrift://host:port")
    with _table_targets(
        table, _client(metastore_uri, tls_ca, kerberos_principal), partition_filter
    ) as targets:
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


def _client(metastore_uri: str, tls_ca: str | None, kerberos_principal: str | None) -> MetastoreClient:
    """A connected client: over TLS trusting ``tls_ca``, with Kerberos (the ticket cache) to the
    service ``kerberos_principal``, when given. Raises ClickException with the reason."""
    try:
        tls = client_context(tls_ca) if tls_ca else None
        kerberos = KerberosInitiator(kerberos_principal) if kerberos_principal else None
        return MetastoreClient(metastore_uri, tls=tls, kerberos=kerberos)
    except (TlsError, KerberosError) as e:
        raise click.ClickException(str(e)) from None
    except (TTransportException, TApplicationException) as e:  # the latter: "the server requires TLS"
        raise click.ClickException(f"cannot reach the metastore at {metastore_uri}: {e}") from None


@contextmanager
def _table_targets(
    table: str, client: MetastoreClient, partition_filter: str | None
) -> Iterator[list[_Target]]:
    """A table's locations read in a read-only txn of the metastore (open while the caller reads)."""
    db, name = split_name(table)
    with client:
        tbl = client.hms.get_table(db, name)
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
    click.option(
        "--tls-ca", metavar="PEM", help="The metastore serves TLS: the CA bundle that signed its certificate."
    ),
    click.option(
        "--kerberos-principal",
        metavar="PRINCIPAL",
        help="The metastore requires Kerberos: its principal, e.g. hive/_HOST@EXAMPLE.COM (ticket from kinit).",
    ),
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


def _console() -> Console:
    """stdout; piped, wide enough that tables never wrap inside a value."""
    return Console() if sys.stdout.isatty() else Console(width=100_000, soft_wrap=True)


@contextmanager
def _clean_errors() -> Iterator[None]:
    """Errors as one line on stderr and exit code 1 (no traceback): a missing table or database,
    an unreachable metastore, a bad URI, an unreadable file or directory, a bad snapshot."""
    try:
        yield
    except click.ClickException:
        raise
    except TException as e:
        text = getattr(e, "message", None) or str(e) or error_name(e)
        raise click.ClickException(f"{error_name(e)}: {text}") from None
    except (HivemeshError, OSError, ValueError, pa.ArrowException) as e:
        text = str(e).strip().splitlines()
        raise click.ClickException(f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")) from None


def _emit(
    fmt: str, console: Console, title: str, columns: list[str], rows: list[list[Any]], first: bool = True
) -> None:
    """One result set: a rich table (``table``), one JSON object per row (``json``, with the
    ``target`` it belongs to) or tab-separated lines (``tsv``), under a header line when ``first``
    (the first target: the partitions of a table share one header)."""
    if fmt == "json":
        for row in rows:
            click.echo(json.dumps({"target": title, **dict(zip(columns, row, strict=True))}, default=str))
    elif fmt == "tsv":
        if first:
            click.echo("\t".join(["target", *columns]))
        for row in rows:
            click.echo("\t".join(_tsv(v) for v in [title, *row]))
    else:
        out = Table(title=title, show_edge=False)
        for col in columns:
            out.add_column(col, overflow="fold")
        for row in rows:
            out.add_row(*("" if v is None else str(v) for v in row))
        console.print(out)


def _tsv(value: Any) -> str:
    text = "\\N" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") if value is not None else text


_format = click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "tsv"]), default="table", show_default=True,
    help="table for people; json (one object per line) or tsv (NULL as \\N) for scripts.",
)  # fmt: skip


@acid.command()
@_with_common
@_format
def files(fmt: str, **kw: object) -> None:
    """Print the files a snapshot reads and those it leaves out (obsolete, aborted, not visible)."""
    console = _console()
    with _clean_errors(), _targets(**kw) as targets:  # type: ignore[arg-type]
        for i, t in enumerate(targets):
            sel = _select(t)
            rows: list[list[Any]] = []
            for f in sel.data_files:
                kind = "original" if f.directory is None else f.directory.kind
                length = flush_length(t.location, f)
                note = f"{kind}" + (f", read up to {length} (flush length)" if length is not None else "")
                note += ", rows of invalid write ids dropped" if f.write_id_filter else ""
                rows.append(["read", f.path, f.size, note])
            for f in sel.delete_files:
                rows.append(["read", f.path, f.size, "delete events"])
            for status, paths in (
                ("obsolete", sel.obsolete),
                ("aborted", sel.aborted),
                ("not visible", sel.ignored),
            ):
                rows.extend([status, p, None, None] for p in paths)
            title = f"{t.label}  {t.write_ids}" + (f"  txns {t.txns}" if t.txns else "")
            label = title if fmt == "table" else t.label
            _emit(fmt, console, label, ["status", "path", "bytes", "note"], rows, first=i == 0)


@acid.command()
@_with_common
@_format
@click.option("--limit", type=int, default=20, show_default=True, help="Rows to print (0: all).")
@click.option("--row-ids", is_flag=True, help="Also print ROW__ID (originalTransaction, bucket, rowId).")
def cat(fmt: str, limit: int, row_ids: bool, **kw: object) -> None:
    """Print the rows a snapshot sees (full ACID and insert-only ORC/Parquet/text)."""
    console = _console()
    with _clean_errors(), _targets(**kw) as targets:  # type: ignore[arg-type]
        shown = 0
        for i, t in enumerate(targets):
            sel = _select(t)
            layout = t.layout
            if layout is None or not layout.columns:
                layout = TableLayout(
                    tuple(schema_from_files(t.location, sel)), insert_only=bool(layout and layout.insert_only)
                )
            data = read_snapshot_files(t.location, sel, t.write_ids, layout, with_row_ids=row_ids)
            rows = []
            for row in data.to_pylist():
                if limit and shown >= limit:
                    break
                rows.append(list(row.values()))
                shown += 1
            title = f"{t.label}: {data.num_rows} rows" if fmt == "table" else t.label
            _emit(fmt, console, title, data.column_names, rows, first=i == 0)
