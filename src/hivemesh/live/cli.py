"""hivemesh live: serve a zone's live proxy, show where every zone stands in the command log,
check that every zone holds the same catalog, and repair one that does not.

Exit codes: 0 done (``check``, ``repair``: consistent), 1 ``serve`` could not start (the reason
logged), or ``check``/``repair`` found differences; 2 a bad configuration, an unreachable etcd or
zone metastore (the reason on one line of stderr, no traceback).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from hivemesh.config import ConfigError
from hivemesh.errors import HivemeshError
from hivemesh.live.commands import decode
from hivemesh.live.config import LiveFile, load_live_config
from hivemesh.live.errors import InvalidCommand, LiveError
from hivemesh.live.log import CommandLog


class _Failure(click.ClickException):
    """The command could not do its work: ``Error: <message>`` on stderr, exit code 2."""

    exit_code = 2


def _load(path: str) -> LiveFile:
    try:
        return load_live_config(path)
    except ConfigError as e:
        raise _Failure(str(e)) from e


_config_option = click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="mesh.yaml with zones: and live:.",
)


@click.group()
def live() -> None:
    """Live Hive: every zone writable, each write agreed through etcd and applied in every zone.

    Each zone runs `hivemesh live serve` in front of its own metastore; clients keep using their
    zone's port. See the README's Live Hive section for the mesh.yaml `live:` section.
    """


@live.command()
@_config_option
@click.option("--zone", required=True, help="The zone this proxy serves (a name under zones:).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=9083, show_default=True, help="Thrift port; 0 picks a free one.")
@click.option(
    "--metrics-port", type=int, default=None, help="HTTP port of /metrics and /health (unset: none)."
)
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def serve(
    config_path: str, zone: str, host: str, port: int, metrics_port: int | None, log_level: str
) -> None:
    """Serve ZONE's live proxy: reads go to the zone's metastore, writes on live databases are
    agreed through the command log and applied by every zone's applier, this one included; the
    client gets its own zone's answer. Runs until SIGTERM or SIGINT."""
    from hivemesh.logs import setup_logging

    cfg = _load(config_path)
    if zone not in cfg.zones:
        raise _Failure(f"{config_path}: unknown zone {zone!r} (zones: {', '.join(sorted(cfg.zones))})")
    setup_logging(log_level)
    from hivemesh.live.service import run_forever

    sys.exit(run_forever(config_path, zone, host=host, port=port, metrics_port=metrics_port))


def zone_status(log: CommandLog, cfg: LiveFile) -> dict[str, Any]:
    """Where every zone stands: ``{"head": position, "entries": n, "zones": {zone: {"position",
    "behind" (entries), "lag_s", "updated_ms", "error", "out_of_band" (writes found made straight
    to the zone's metastore since its live proxy started), "last_out_of_band", "resynced_from"}}}``.
    Raises LiveError (etcd unreachable)."""
    head, entries = log.head()
    states = log.zone_states()
    now_ms = int(time.time() * 1000)
    zones: dict[str, Any] = {}
    for zone in sorted(cfg.zones):
        state = states.get(zone, {})
        position = int(state.get("position", 0))
        behind = log.count_after(position) if position < head else 0
        lag_s = 0.0
        if behind:
            first = log.read(position, 1)
            try:
                lag_s = max(0.0, (now_ms - decode(first[0].command).time_ms) / 1000) if first else 0.0
            except InvalidCommand:
                lag_s = 0.0
        zones[zone] = {
            "position": position,
            "behind": behind,
            "lag_s": round(lag_s, 3),
            "updated_ms": state.get("time_ms"),
            "error": state.get("error"),
            "out_of_band": int(state.get("out_of_band") or 0),
            "last_out_of_band": state.get("last_out_of_band"),
            "resynced_from": state.get("resynced_from"),
        }
    return {"head": head, "entries": entries, "zones": zones}


@live.command()
@_config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def status(config_path: str, as_json: bool) -> None:
    """Per zone: the last log position it applied, how many commands and seconds it is behind,
    and its applier's last error."""
    cfg = _load(config_path)
    try:
        with CommandLog(cfg.live.etcd) as log:
            report = zone_status(log, cfg)
    except LiveError as e:
        raise _Failure(str(e)) from e
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"command log: head position {report['head']}, {report['entries']} command(s)")
    for col in ("zone", "position", "behind", "lag s", "out-of-band writes", "last error"):
        t.add_column(col)
    for zone, z in report["zones"].items():
        last = z["last_out_of_band"]
        oob = str(z["out_of_band"]) + (f" (last: {last['type']} {last['object']})" if last else "")
        t.add_row(zone, str(z["position"]), str(z["behind"]), f"{z['lag_s']:.1f}", oob, z["error"] or "")
    Console(highlight=False).print(t)


def _log_positions(cfg: LiveFile) -> tuple[dict[str, int] | None, int | None, str | None]:
    """The zones' stored positions and the log's head, or (None, None, why) when etcd cannot say."""
    try:
        with CommandLog(cfg.live.etcd) as log:
            head, _ = log.head()
            states = log.zone_states()
    except LiveError as e:
        return None, None, str(e)
    return {z: int(states.get(z, {}).get("position", 0)) for z in sorted(cfg.zones)}, head, None


def _print_check(report: Any) -> None:
    """A check report as a rich table (one row per object that differs) and a summary line."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    compared = sum(report.compared.values())
    where = ""
    if report.positions is not None:
        behind = [z for z, p in report.positions.items() if p < (report.head or 0)]
        where = f"; log head {report.head}" + (f", behind it: {', '.join(behind)}" if behind else "")
    if report.consistent:
        console.print(
            f"consistent: {compared} object(s) of rule(s) {', '.join(report.rules) or 'none'} are the "
            f"same in zones {', '.join(report.zones)}{where}"
        )
        return
    t = Table(
        title=f"{len(report.divergences)} object(s) differ across zones {', '.join(report.zones)}{where}"
    )
    for col in ("rule", "object", "name", "zones", "how"):
        t.add_column(col, overflow="fold")
    for d in report.divergences:
        how = []
        if d.absent:
            how.append(f"absent in {', '.join(d.absent)}")
        if len(d.variants) > 1:
            how.append("definitions: " + " | ".join(",".join(g) for g in d.variants))
        if d.detail:
            how.append(d.detail)
        how += [f"{z}: {p}" for z, p in sorted(d.problems.items())]
        t.add_row(d.rule, d.object, d.name, ", ".join(d.zones()), "; ".join(how))
    console.print(t)


def _open(cfg: LiveFile) -> Any:
    from hivemesh.live.check import ZoneUnavailable, open_zones

    try:
        return open_zones(cfg)
    except (ZoneUnavailable, HivemeshError) as e:
        raise _Failure(str(e)) from e


@live.command()
@_config_option
@click.option("--rule", default=None, help="Check this live rule only (default: all).")
@click.option("--data", is_flag=True, help="Compare the data files too (paths and sizes).")
@click.option("--checksums", is_flag=True, help="With --data: compare the files' MD5 too (reads every file).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def check(config_path: str, rule: str | None, data: bool, checksums: bool, as_json: bool) -> None:
    """Compare every zone's databases, tables, partitions, column statistics and functions of the
    live rules (canonical dumps, locations relative to each zone's rule path; with --data, the
    files of each table and partition directory too) and list each object that differs, with the
    zones and the fields. Exit 0: consistent; 1: differences; 2: the check
    could not run (bad configuration, a zone's metastore unreachable: the error names the zone)."""
    from hivemesh.live.check import check as run_check

    cfg = _load(config_path)
    positions, head, why = _log_positions(cfg)
    clients = _open(cfg)
    try:
        report = run_check(
            cfg,
            clients,
            rule=rule,
            positions=positions,
            head=head,
            data=data or checksums,
            checksums=checksums,
        )
    except (ValueError, HivemeshError) as e:
        raise _Failure(str(e)) from e
    finally:
        for c in clients.values():
            c.close()
    if why is not None:
        click.echo(f"note: zones' log positions unknown ({why})", err=True)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        _print_check(report)
    sys.exit(0 if report.consistent else 1)


@live.command()
@_config_option
@click.option("--from", "source", required=True, help="The zone whose catalog every zone is made equal to.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for the source zone to reach the log's head, then for every zone to apply the repair.",
)
@click.option(
    "--data", is_flag=True, help="Mend differing data files too: every zone's copy made equal to --from's."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.argument("objects", nargs=-1)
def repair(
    config_path: str, source: str, timeout_s: float, data: bool, as_json: bool, objects: tuple[str, ...]
) -> None:
    """Make every zone equal to zone --from for OBJECTS (`db` or `db.table`; default: everything
    `check` finds different), by appending ordinary commands to the command log (creates,
    alters and drops with deleteData=False: no data file is deleted), waiting until every
    zone applied them, then checking again. With --data, differing data directories are made
    equal to --from's too (copied by content; files --from lacks are removed from the others' copies). Exit 0: consistent after; 1: differences remain, or a
    zone did not apply the repair in time; 2: the repair could not run."""
    from hivemesh.live.repair import repair as run_repair
    from hivemesh.live.repair import select

    cfg = _load(config_path)
    if source not in cfg.zones:
        raise _Failure(f"{config_path}: unknown zone {source!r} (zones: {', '.join(sorted(cfg.zones))})")
    try:
        select([], objects)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="OBJECT") from e
    clients = _open(cfg)
    try:
        with CommandLog(cfg.live.etcd) as log:
            result = run_repair(cfg, log, clients, source, objects, timeout_s=timeout_s, data=data)
    except (ValueError, HivemeshError) as e:
        raise _Failure(str(e)) from e
    finally:
        for c in clients.values():
            c.close()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
        sys.exit(0 if result.consistent else 1)
    if not result.selected:
        click.echo(f"nothing to repair: {'the objects named are' if objects else 'every zone is'} the same")
    else:
        click.echo(
            f"repair from zone {source}: {len(result.selected)} object(s) differed; "
            f"{len(result.commands)} command(s) appended"
            + (
                f" at log positions {result.commands[0].position}..{result.commands[-1].position}"
                if result.commands
                else ""
            )
        )
        for what, why in sorted(result.skipped.items()):
            click.echo(f"skipped {what}: {why}")
        for zone, position in sorted(result.lagging.items()):
            click.echo(f"zone {zone} did not apply the repair within {timeout_s:g}s (at position {position})")
        if result.intervening:
            click.echo(
                f"{result.intervening} other write(s) were agreed while the repair ran: they may have been "
                "overwritten by it; run check again"
            )
        if result.after is not None:
            _print_check(result.after)
    sys.exit(0 if result.consistent else 1)
