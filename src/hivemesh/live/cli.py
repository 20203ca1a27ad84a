"""hivemesh live: serve a zone's live proxy, and show where every zone stands in the command log.

Exit codes: 0 done, 1 ``serve`` could not start (the reason logged), 2 a bad configuration or
an unreachable etcd (the reason on one line of stderr, no traceback).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from hivemesh.config import ConfigError
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


@click.group()
def live() -> None:
    """Live Hive: every zone writable, each write agreed through etcd and applied in every zone.

    Each zone runs `hivemesh live serve` in front of its own metastore; clients keep using their
    zone's port. See the README's Live Hive section for the mesh.yaml `live:` section.
    """


@live.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="mesh.yaml with zones: and live:.",
)
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
    "behind" (entries), "lag_s", "updated_ms", "error"}}}``. Raises LiveError (etcd unreachable)."""
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
        }
    return {"head": head, "entries": entries, "zones": zones}


@live.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, exists=True),
    help="mesh.yaml with zones: and live:.",
)
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
    for col in ("zone", "position", "behind", "lag s", "last error"):
        t.add_column(col)
    for zone, z in report["zones"].items():
        t.add_row(zone, str(z["position"]), str(z["behind"]), f"{z['lag_s']:.1f}", z["error"] or "")
    Console(highlight=False).print(t)
