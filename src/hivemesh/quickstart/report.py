"""What the quickstart prints: a progress bar over its steps and a table of query results (rich)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from hivemesh.quickstart.queries import QueryResult

log = logging.getLogger(__name__)

MATCH = "[green]✓[/green]"
MISMATCH = "[red]✗[/red]"


class _StepProgress(Progress):
    """A rich progress bar on a terminal; elsewhere (a pipe, a file, CI logs, where rich would
    print nothing until the end) one line per step: ``[  12s] loading tpch.orders``."""

    def __init__(self, console: Console):
        super().__init__(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self._started = time.monotonic()

    def update(self, task_id: TaskID, *, description: str | None = None, **kw: Any) -> None:
        """As rich's; a new ``description`` off a terminal is also printed as a line."""
        if self.disable and description is not None and description != self._tasks[task_id].description:
            elapsed = time.monotonic() - self._started
            self.console.print(f"[{elapsed:5.0f}s] {escape(description)}", highlight=False)
        super().update(task_id, description=description, **kw)


def step_progress(console: Console) -> Progress:
    """A progress bar with the current step's description, ``done/total`` and elapsed time; when
    ``console`` is not a terminal, a line per step instead."""
    return _StepProgress(console)


def print_failure(console: Console, progress: Progress, what: str, error: BaseException) -> None:
    """Log ``error`` with its traceback, stop ``progress`` and print ``<what> failed: <exception
    type>: <its first line>`` in red."""
    log.error("%s failed", what, exc_info=error)
    progress.stop()
    first_line = (str(error).strip().splitlines() or [""])[0]
    console.print(f"[red]{escape(what)} failed:[/red] {escape(f'{type(error).__name__}: {first_line}')}")


def results_table(results: Sequence[QueryResult], title: str | None = None) -> Table:
    """One row per query: name, rows returned, seconds on the metastore tables, ✓/✗ against the files."""
    table = Table(title=title)
    table.add_column("query")
    table.add_column("rows", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("match", justify="center")
    for r in results:
        table.add_row(r.name, str(r.rows), f"{r.seconds:.2f}", MATCH if r.match else MISMATCH)
    return table


def print_results(console: Console, results: Sequence[QueryResult], title: str | None = None) -> None:
    """Print :func:`results_table`, then each mismatch's first difference or error."""
    console.print(results_table(results, title))
    for r in results:
        if not r.match:
            console.print(f"[red]✗ {escape(r.name)}[/red]: {escape(r.detail or '')}", highlight=False)
    ok = sum(r.match for r in results)
    colour = "green" if ok == len(results) else "red"
    console.print(f"[{colour}]{ok}/{len(results)} queries match the Parquet files[/{colour}]")
