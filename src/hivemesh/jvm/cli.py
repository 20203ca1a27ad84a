"""``hivemesh jars``: list, fetch and locate the JVM bundles (Hive 4, Hive streaming, Delta, Trino)."""

from __future__ import annotations

import sys

import click

from hivemesh.jvm.artifacts import BUNDLES
from hivemesh.jvm.resolve import JvmArtifactError, cache_dir, resolve


@click.group()
def jars() -> None:
    """JVM bundles from Maven Central, cached outside the repository.

    The cache is $HIVEMESH_JVM_CACHE (default ~/.cache/hivemesh/jvm). Point hivemesh at your own
    copy of a bundle with HIVEMESH_JARS_<BUNDLE> (e.g. HIVEMESH_JARS_DELTA=/opt/delta/jars).
    """


@jars.command("list")
def list_() -> None:
    """Each bundle: name, state (cached, missing or the override), approximate size, contents."""
    for name, bundle in sorted(BUNDLES.items()):
        try:
            state = str(resolve(name, fetch=False).home)
        except JvmArtifactError:
            state = "not fetched"
        click.echo(f"{name}\t~{bundle.approx_mb} MB\tJava {bundle.java_range}\t{state}\t{bundle.description}")


@jars.command()
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Fetch every bundle.")
def fetch(names: tuple[str, ...], all_: bool) -> None:
    """Fetch NAMES (or --all) into the cache now, printing the seconds each took."""
    chosen = sorted(BUNDLES) if all_ else list(names)
    if not chosen:
        raise click.UsageError(f"name a bundle or pass --all; bundles: {', '.join(sorted(BUNDLES))}")
    for name in chosen:
        try:
            got = resolve(name)
        except JvmArtifactError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        click.echo(f"{name}\t{got.fetch_seconds:.1f} s\t{got.home}")
    click.echo(f"cache: {cache_dir()}", err=True)


@jars.command()
@click.argument("name")
def path(name: str) -> None:
    """Print NAME's directory (fetching it first if needed)."""
    try:
        click.echo(resolve(name).home)
    except JvmArtifactError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
