"""hivemesh replicate: run, watch and check replication policies (``replication:`` in mesh.yaml).

Exit codes: 0 done (``verify``: the targets equal their sources), 1 ``verify`` found differences,
2 the command could not do its work (a bad config, the store, an unreachable zone, a failed
policy): the reason on one line of stderr, no traceback.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hivemesh.config import ConfigError
from hivemesh.replication.config import ReplicationFile, load_replication_config

log = logging.getLogger(__name__)


class _Failure(click.ClickException):
    """The command could not do its work: ``Error: <message>`` on stderr, exit code 2."""

    exit_code = 2


def _one_line(message: str) -> str:
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def _load(path: str) -> tuple[ReplicationFile, Any]:
    from hivemesh.replication.state import ReplicationStore

    try:
        cfg = load_replication_config(path)
    except ConfigError as e:
        raise _Failure(str(e)) from e
    if not cfg.replication.policies:
        raise _Failure(f"{path}: no replication policies (replication.policies is empty)")
    try:
        store = ReplicationStore(cfg.replication.store)
    except ConfigError as e:
        raise _Failure(str(e)) from e
    except Exception as e:
        raise _Failure(
            f"replication.store {cfg.replication.store}: cannot open it: {_one_line(str(e))}"
        ) from e
    return cfg, store


def _check_names(cfg: ReplicationFile, names: tuple[str, ...]) -> None:
    for n in names:
        try:
            cfg.replication.policy(n)
        except ConfigError as e:
            raise _Failure(str(e)) from e


PIPED_WIDTH = 100_000
"""Line width of output that is not a terminal: no column cut short, no line wrapped."""


def _stdout() -> Console:
    """A console on stdout: a terminal's own width, or when piped or redirected wide enough that
    nothing is cut (scripts and ``grep`` see whole names)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH)
    return console


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )  # fmt: skip


@click.group()
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def replicate(log_level: str) -> None:
    """Replicate databases and tables between zones: metadata from the source's notification log,
    data files by content (see replication: in mesh.yaml)."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if log_level.upper() != "DEBUG":
        logging.getLogger("alembic").setLevel(logging.WARNING)


_config = click.option(
    "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
    help="mesh.yaml with zones: and replication:.",
)  # fmt: skip
_policy = click.option(
    "--policy", "names", multiple=True, help="Only this policy (repeatable).  [default: all]"
)


@replicate.command()
@_config
@_policy
@click.option(
    "--once", is_flag=True, help="Bootstrap what needs it, apply every event up to now, copy the data, exit."
)
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus /metrics on this HTTP port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address of /metrics.")
def run(
    config_path: str, names: tuple[str, ...], once: bool, metrics_port: int | None, metrics_host: str
) -> None:
    """Keep every target current: follow each source's notification log until SIGTERM, or with
    --once until the source's current event (exit 0; 2 with one line per failed policy)."""
    from hivemesh.replication.metrics import ReplicationMetrics
    from hivemesh.replication.service import ReplicationService, run_once

    cfg, store = _load(config_path)
    _check_names(cfg, names)
    metrics = ReplicationMetrics()
    if metrics_port is not None:
        port = metrics.serve(metrics_port, metrics_host)
        click.echo(f"hivemesh replication metrics on http://{metrics_host}:{port}/metrics", err=True)
    if once:
        console = Console(stderr=True)
        with _progress(console) as progress:
            failures = run_once(cfg, store, names, progress=progress, metrics=metrics)
        store.dispose()
        if failures:
            for name, message in failures.items():
                click.echo(f"policy {name}: {_one_line(message)}", err=True)
            sys.exit(2)
        click.echo("replication up to date", err=True)
        return
    service = ReplicationService(cfg, store, names, metrics=metrics).start()
    click.echo(f"hivemesh replication running {len(service.policies)} policies", err=True)

    def on_signal(signum: int, _frame: object) -> None:
        """SIGTERM/SIGINT: let every policy stop after its current event."""
        log.info("signal %d: stopping after the current events", signum)
        service.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service.wait()
    service.stop()
    store.dispose()


@replicate.command()
@_config
@_policy
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(config_path: str, names: tuple[str, ...], as_json: bool) -> None:
    """Per policy: phase, source/applied/target event ids, lag, last error, what is being copied."""
    from hivemesh.replication.service import status as policy_status

    cfg, store = _load(config_path)
    _check_names(cfg, names)
    rows = policy_status(cfg, store, names)
    store.dispose()
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=2))
        return
    table = Table(title="replication")
    for col in (
        "policy",
        "route",
        "phase",
        "applied",
        "source",
        "target",
        "lag",
        "last success",
        "last error",
    ):
        table.add_column(col)
    for r in rows:
        ago = f"{r.last_success_s_ago:.0f}s ago" if r.last_success_s_ago is not None else "-"
        table.add_row(
            r.policy, f"{r.source} -> {r.target}", r.phase, str(r.applied_event_id), str(r.source_event_id),
            str(r.target_event_id), str(r.lag_events), ago, r.last_error or "",
        )  # fmt: skip
    console = _stdout()
    console.print(table)
    for r in rows:
        if r.resyncs:
            console.print(f"{r.policy}: re-synced {r.resyncs} time(s); last reason: {r.resync_reason}")
        if r.copying:
            console.print(f"{r.policy}: copying {r.copying}")
        for o in r.objects:
            if o["state"] != "replicating":
                name = f"{o['database']}.{o['table']}" if o["table"] else o["database"]
                console.print(f"{r.policy}: {name} {o['state']}")


@replicate.command()
@_config
@_policy
@click.option("--repair", is_flag=True, help="Fix the differences, copying only what differs.")
@click.option("--no-data", is_flag=True, help="Compare metadata only (no file listing or checksums).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify(config_path: str, names: tuple[str, ...], repair: bool, no_data: bool, as_json: bool) -> None:
    """Compare each target with its source (databases, tables, partitions, schemas, parameters
    apart from location/time/stats bookkeeping, functions, column statistics, and every data file
    by size and MD5). Exit 0 when equal, 1 with the differences listed, 2 when a zone cannot be
    reached or a comparison or repair fails. --repair mends what differs (nothing when nothing
    does), lists each object it repaired, then compares again."""
    from hivemesh.replication.service import selected
    from hivemesh.replication.verify import to_json

    cfg, store = _load(config_path)
    _check_names(cfg, names)
    report: dict[str, Any] = {}
    repaired: dict[str, list[Any]] = {}
    console = Console(stderr=True)
    try:
        for policy in selected(cfg, names):
            before, after = _verify_policy(cfg, policy, store, repair, not no_data, console)
            report[policy.name] = after
            repaired[policy.name] = [d for d in before if d not in after]
    finally:
        store.dispose()
    if as_json:
        click.echo(json.dumps({name: to_json(diffs) for name, diffs in report.items()}, indent=2))
    else:
        out = _stdout()
        for name, diffs in report.items():
            if repair:
                for d in repaired[name]:
                    out.print(f"{name}: repaired {d.kind} {d.object} {d.name}  {d.detail}", markup=False)
            if not diffs:
                out.print(f"{name}: target equal to source")
                continue
            out.print(f"{name}: {len(diffs)} difference(s)")
            for d in diffs:
                out.print(f"  {d.kind:9} {d.object:17} {d.name}  {d.detail}", markup=False)
    sys.exit(1 if any(report.values()) else 0)


def _verify_policy(
    cfg: ReplicationFile, policy: Any, store: Any, repair: bool, check_data: bool, console: Console
) -> tuple[list[Any], list[Any]]:
    """The differences of ``policy``'s target from its source, ``(before, after)`` a repair
    (the same list twice without ``repair``, or when there was nothing to repair). Raises
    _Failure (exit 2) naming the policy when a zone is unreachable or a step fails."""
    from thrift.Thrift import TException

    from hivemesh.client.errors import error_name
    from hivemesh.client.metastore import TRANSPORT_ERRORS
    from hivemesh.errors import HivemeshError
    from hivemesh.replication.runner import record_failure
    from hivemesh.replication.service import make_runner
    from hivemesh.replication.state import lease_owner
    from hivemesh.replication.verify import compare

    expected = (HivemeshError, TException, ValueError, *TRANSPORT_ERRORS)
    try:
        runner = make_runner(cfg, policy, store, lease_owner())
    except expected as e:
        message = str(e) if str(e).startswith(f"policy {policy.name}") else f"policy {policy.name}: {e}"
        raise _Failure(_one_line(message)) from e

    def differences() -> list[Any]:
        """One comparison of the policy's target with its source."""
        try:
            if hasattr(runner, "compare"):  # a Delta policy: replicas compared with their sources
                return list(runner.compare(check_data=check_data))
            return compare(  # through the runner's HMS calls: Hive 4.2 peers lack get_table, see there
                runner.source_calls,
                runner.target_calls,
                policy,
                runner.paths.relocate,  # not the refusing one: a table off the rule is reported
                runner.source_storage,
                runner.target_storage,
                check_data=check_data,
                source_zone=runner.paths.source_roots,
            )
        except expected as e:
            raise _Failure(_one_line(f"policy {policy.name}: cannot compare: {error_name(e)}: {e}")) from e

    try:
        before = differences()
        if not repair or not before:
            return before, before
        with _progress(console) as progress:
            runner.progress = progress
            try:
                runner.resync("verify --repair")
            except Exception as e:
                raise _Failure(
                    _one_line(f"policy {policy.name}: repair failed: {record_failure(store, policy.name, e)}")
                ) from e
        return before, differences()
    finally:
        runner.close()
