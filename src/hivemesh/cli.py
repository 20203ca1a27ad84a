"""The ``hivemesh`` command: ``metastore``, ``proxy``, ``remote``, ``replicate``, ``live``, ``quickstart``, ``acid``, ``jars``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from hivemesh import __version__
from hivemesh.config import ConfigError, load_config
from hivemesh.metastore.cli import backup as metastore_backup
from hivemesh.metastore.cli import schema as metastore_schema


def _setup_logging(level: str, log_format: str = "text", audit_file: str | None = None) -> None:
    from hivemesh.logs import setup_logging

    try:
        setup_logging(level, log_format, audit_file)
    except OSError as e:
        raise click.ClickException(f"cannot open the audit log {audit_file}: {e.strerror}") from e


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (``hivemesh acid`` pulls in
    pyarrow: ~60 MB a long-running proxy or metastore should not carry)."""

    lazy = {
        "acid": "hivemesh.acid.cli:acid",
        "jars": "hivemesh.jvm.cli:jars",
        "live": "hivemesh.live.cli:live",
        "remote": "hivemesh.federation.remote_cli:remote",
        "replicate": "hivemesh.replication.cli:replicate",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The eager subcommands and the lazily imported ones, sorted."""
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, importing its module first if it is a lazy one."""
        if cmd_name in self.lazy:
            import importlib

            module, _, attr = self.lazy[cmd_name].partition(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="hivemesh")
def main() -> None:
    """hivemesh: many Hive metastores, one lakehouse."""


@main.group(invoke_without_command=True)
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False), help="mesh.yaml to read settings from."
)
@click.option("--host", default=None, help="Address to listen on.  [default: 127.0.0.1]")
@click.option("--port", type=int, default=None, help="Thrift port; 0 picks a free one.  [default: 9083]")
@click.option(
    "--db",
    default=None,
    help="SQLAlchemy URL of the metadata store (sqlite:///file.db or postgresql+psycopg://user@host/db)."
    "  [default: sqlite:///hivemesh-data/metastore.db]",
)
@click.option(
    "--warehouse",
    default=None,
    help="Root of managed databases and tables (path or URI).  [default: hivemesh-data/warehouse]",
)
@click.option(
    "--allowed-locations",
    "allowed_locations",
    multiple=True,
    help="A root under which client-given locations may be (repeatable; the warehouse always is); "
    "others are refused.  [default: anywhere]",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Processes serving the port.  [default: the CPU count on PostgreSQL, 1 on SQLite]",
)
@click.option(
    "--db-pool-size",
    type=int,
    default=None,
    help="PostgreSQL connections each process keeps open (plus up to 4 under load).  "
    "[default: 12, fewer when workers x (size + 4) would pass 80]",
)
@click.option("--log-level", default=None, help="DEBUG, INFO, WARNING or ERROR.  [default: INFO]")
@click.option("--log-format", default=None, help="text, or json (one object per log line).  [default: text]")
@click.option("--framed/--unframed", default=None, help="Framed Thrift transport.  [default: unframed]")
@click.option("--compact/--binary", default=None, help="Compact Thrift protocol.  [default: binary]")
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus /metrics on this HTTP port.")
@click.option(
    "--tls-cert",
    default=None,
    help="PEM certificate chain: serve Thrift and /metrics over TLS only (hive.metastore.use.SSL).",
)
@click.option("--tls-key", default=None, help="PEM private key of --tls-cert (when that file lacks it).")
@click.option(
    "--tls-client-ca", default=None, help="PEM CA bundle: require client certificates it signed (mutual TLS)."
)
@click.option(
    "--kerberos-principal",
    default=None,
    help="hive.metastore.kerberos.principal, e.g. hive/_HOST@EXAMPLE.COM: clients must authenticate with "
    "Kerberos (SASL GSSAPI).",
)
@click.option("--kerberos-keytab", default=None, help="Keytab holding the --kerberos-principal's keys.")
@click.option(
    "--kerberos-proxy-users",
    "kerberos_proxy_users",
    multiple=True,
    help="A Kerberos user trusted to act for others, e.g. a hivemesh proxy's 'hive' (repeatable).",
)
@click.option(
    "--txn-timeout",
    "txn_timeout_s",
    type=float,
    default=None,
    help="hive.txn.timeout in seconds: txns and txn-less locks without a heartbeat this long are "
    "aborted / released.  [default: 300]",
)
@click.option(
    "--housekeeping-interval",
    "housekeeping_interval_s",
    type=float,
    default=None,
    help="Seconds between reaping timed-out txns/locks and purging old txn records and events.  [default: 60]",
)
@click.option(
    "--max-message-mb",
    type=int,
    default=None,
    help="Largest string or container in one message.  [default: 100]",
)
@click.option(
    "--txn-retention",
    "txn_retention_s",
    type=int,
    default=None,
    help="Seconds completed txn records are kept (never below an open snapshot).  [default: 86400]",
)
@click.option(
    "--event-retention",
    "event_retention_s",
    type=int,
    default=None,
    help="Seconds notification events are kept (never ahead of a reader).  [default: 604800]",
)
@click.pass_context
def metastore(ctx: click.Context, config_path: str | None, **opts: object) -> None:
    """Serve the Hive Metastore Thrift API on SQLite or PostgreSQL.

    Every option can also come from the config file (section 'metastore:') or from
    HIVEMESH_METASTORE_<OPTION> environment variables (e.g. HIVEMESH_METASTORE_TXN_TIMEOUT for
    --txn-timeout; an unknown one is an error); options win over both. With a command (schema,
    backup) it operates the metadata store instead of serving; --db and --config given here apply.
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"config_path": config_path, "db": opts.get("db")}  # defaults of the command's own
        return
    for key in ("allowed_locations", "kerberos_proxy_users"):  # repeatable: () when not given
        opts[key] = list(opts[key]) if opts.get(key) else None  # type: ignore[call-overload]
    try:
        cfg = load_config(config_path, **{f"metastore__{k}": v for k, v in opts.items()}).metastore
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    _setup_logging(cfg.log_level, cfg.log_format)
    from hivemesh.metastore.workers import serve

    sys.exit(serve(cfg))


metastore.add_command(metastore_schema)
metastore.add_command(metastore_backup)


@main.command()
@click.option(
    "--metastore-uri", default=None, help="Use this metastore (thrift://host:port) instead of starting one."
)
@click.option("--scale", type=float, default=0.1, show_default=True, help="TPC-H scale factor.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("hivemesh-data"),
    show_default=True,
    help="Where the embedded metastore, the warehouse and the generated TPC-H files live.",
)
@click.option("--log-level", default="WARNING", show_default=True)
@click.option(
    "--federated",
    is_flag=True,
    help="Spread the tables over two zones (metastores in DATA_DIR/zones); query them through a proxy.",
)
@click.option(
    "--delta",
    is_flag=True,
    help="Load Hive tables in one zone, replicate them as Delta tables into another "
    "(DATA_DIR/delta-zones) and query those with Spark and Delta.",
)
@click.option(
    "--live",
    is_flag=True,
    help="Two zones kept equal by Live Hive (etcd, metastores and live proxies in DATA_DIR/live): "
    "Spark writes some tables through each zone's proxy; the queries run in both zones.",
)
def quickstart(
    metastore_uri: str | None,
    scale: float,
    data_dir: Path,
    log_level: str,
    federated: bool,
    delta: bool,
    live: bool,
) -> None:
    """Load TPC-H into Hive ORC tables through Spark and check analytical queries against the files.

    With no --metastore-uri, starts an embedded hivemesh metastore on SQLite in DATA_DIR.
    With --federated, spreads the tables over two zones and queries them through a hivemesh proxy.
    With --delta, replicates the Hive tables as Delta Lake tables into a second zone and queries
    those. With --live, starts etcd (Debian's etcd-server) and two zones with their live proxies,
    writes the tables through both proxies and queries each zone. A second run reuses the
    generated data and the loaded tables.
    """
    if (federated or delta or live) and metastore_uri is not None:
        raise click.UsageError(
            "--federated, --delta and --live start their own metastores: leave out --metastore-uri"
        )
    if federated + delta + live > 1:
        raise click.UsageError("choose one of --federated, --delta and --live")
    _setup_logging(log_level)
    if live:
        from hivemesh.quickstart.live import run_live

        sys.exit(run_live(scale=scale, data_dir=data_dir))
    if delta:
        from hivemesh.quickstart.delta import run_delta

        sys.exit(run_delta(scale=scale, data_dir=data_dir))
    if federated:
        from hivemesh.quickstart.federated import run_federated

        sys.exit(run_federated(scale=scale, data_dir=data_dir))
    from hivemesh.quickstart import run

    sys.exit(run(metastore_uri=metastore_uri, scale=scale, data_dir=data_dir))


@main.group(invoke_without_command=True)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True),
    help="mesh.yaml with the proxy:, primary: and federated: sections (required).",
)
@click.option("--host", default=None, help="Address to listen on (overrides proxy.host).")
@click.option(
    "--port", type=int, default=None, help="Thrift port; 0 picks a free one (overrides proxy.port)."
)
@click.option("--metrics-port", type=int, default=None, help="HTTP port of /metrics and /health.")
@click.option("--log-level", default=None, help="DEBUG, INFO, WARNING or ERROR (overrides proxy.log_level).")
@click.option("--log-format", default=None, help="text, or json (overrides proxy.log_format).")
@click.option(
    "--audit-log",
    metavar="FILE",
    default=None,
    help="Write the audit lines (one per call) to FILE instead of the log (overrides proxy.audit_log).",
)
@click.pass_context
def proxy(ctx: click.Context, config_path: str | None, **opts: object) -> None:
    """Serve many metastores as one catalog: a primary, federated metastores and remotes.

    Routes every Hive Metastore Thrift call by the database it names (PREFIXED or MANUAL
    resolution, as Waggle Dance), enforces each member's access control, merges listings across
    members with per-member deadlines, and sends transactions and locks to the metastore that owns
    the tables. SIGHUP, or saving the file, reloads the configuration without dropping clients.
    With the command explain, prints where one call would go instead of serving.
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"config_path": config_path}  # the default of the command's own --config
        return
    if config_path is None:
        raise click.UsageError("Missing option '--config'.", ctx)
    from hivemesh.federation.config import load_federation_config

    try:
        cfg = load_federation_config(config_path, **opts)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    audit = cfg.proxy.audit_log
    _setup_logging(cfg.proxy.log_level, cfg.proxy.log_format, audit if isinstance(audit, str) else None)
    from hivemesh.federation.service import run_forever

    sys.exit(run_forever(config_path, **opts))


@proxy.command(short_help="Where the proxy sends one call (contacts no metastore).")
@click.argument("method")
@click.argument("names", nargs=-1, metavar="[DATABASE [TABLE]]")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True),
    help="mesh.yaml the proxy serves (default: the --config given to proxy).",
)
@click.pass_context
def explain(ctx: click.Context, method: str, names: tuple[str, ...], config_path: str | None) -> None:
    """Print where the proxy sends METHOD naming DATABASE (and TABLE), without contacting anything.

    Shows the method's row of the routing table (its strategy, whether it writes, the arguments
    holding database names), the member(s) that would get the call, the names as sent to them
    (prefix stripped, alias resolved), and whether the proxy would refuse it (access control,
    mapped databases). Remote links in the proxy's store are not consulted.
    Exit codes: 0 explained, 2 unknown method, bad arguments or configuration.
    """
    from hivemesh.federation.explain import explain as explain_call
    from hivemesh.federation.explain import render

    config_path = config_path or (ctx.obj or {}).get("config_path")
    if config_path is None:
        raise click.UsageError("Missing option '--config'.", ctx)
    if len(names) > 2:
        _fail(f"explain takes DATABASE [TABLE], got {len(names)} names")
    from hivemesh.federation.config import load_federation_config

    try:
        cfg = load_federation_config(config_path)
        exp = explain_call(cfg, method, *names)
    except (ConfigError, ValueError) as e:
        _fail(str(e))
    from rich.console import Console

    render(exp, Console(highlight=False, soft_wrap=True))


def _fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with ``code``."""
    one_line = "; ".join(line.strip() for line in message.splitlines() if line.strip())
    click.echo(f"error: {one_line}", err=True)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
