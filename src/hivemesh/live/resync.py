"""Re-syncing a zone the command log was compacted past: by comparison with a healthy zone.

A zone whose position is below the log's compaction point cannot follow the log any more (the
commands it misses are gone). :func:`resync` brings it back:

1. the source is the zone furthest along among those not behind the compaction point; the log's
   head ``H`` is read, and the source must reach it (else :class:`LiveError`);
2. the source's and this zone's catalogs are compared (:func:`hivemesh.live.check.check` on the
   two zones) and the commands that make this zone equal to the source are planned from the
   source's catalog (:func:`hivemesh.live.repair.plan`);
3. each is applied to this zone's metastore only (not through the log: the other zones agree
   already), data first: the directories it makes visible are copied from the source
   (:class:`hivemesh.live.data.DataCopier`);
4. the zone goes on from position ``H``. Commands after ``H`` that the source had applied
   already when it was read are applied again: each is then a no-op or the same deterministic
   error (see :mod:`hivemesh.live.applier`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from thrift.Thrift import TException

from hivemesh.client.metastore import MetastoreClient
from hivemesh.live.check import call_compat, check
from hivemesh.live.commands import for_zone
from hivemesh.live.config import LiveFile
from hivemesh.live.data import DataCopier, data_dirs
from hivemesh.live.errors import LiveError
from hivemesh.live.log import CommandLog
from hivemesh.live.repair import plan, wait_for

__all__ = ["resync"]

log = logging.getLogger(__name__)


def resync(
    cfg: LiveFile,
    commands: CommandLog,
    zone: str,
    client: MetastoreClient,
    copier: DataCopier | None,
    *,
    timeout_s: float = 60.0,
) -> tuple[int, str, int]:
    """Make ``zone``'s metastore (``client``) equal to a healthy zone's and return (the position
    to go on from, the source zone, commands applied). ``copier``: brings the data (None: metadata
    only). Raises LiveError (no healthy zone; the source did not reach the head within
    ``timeout_s`` seconds), the transport errors of either metastore, OSError of a copy."""
    below = commands.compacted_below()
    states = commands.zone_states()
    healthy = {
        z: int(s.get("position", 0))
        for z, s in states.items()
        if z != zone and z in cfg.zones and int(s.get("position", 0)) >= below - 1
    }
    if not healthy:
        raise LiveError(
            f"zone {zone}: no zone to re-sync from (every zone is behind compaction point {below})"
        )
    source = max(healthy, key=lambda z: healthy[z])
    head, _ = commands.head()
    behind = wait_for(commands, [source], head, timeout_s)
    if behind:
        raise LiveError(
            f"zone {zone}: re-sync source {source} is at position {behind[source]}, behind the head {head} "
            f"after {timeout_s:g}s"
        )
    pair = cfg.model_copy(update={"zones": {z: cfg.zones[z] for z in (source, zone)}})
    src = cfg.zones[source]
    source_client = MetastoreClient(
        src.metastore, timeout_s=60.0, retries=1, tls=src.tls_context(), kerberos=src.kerberos_initiator()
    )
    rules = {r.name: r for r in cfg.live.rules}
    applied = 0
    try:
        report = check(pair, {source: source_client, zone: client})
        planned, skipped = plan(pair, source, source_client, report.divergences, user="hivemesh-resync")
        for what, why in skipped.items():
            log.warning("zone %s: re-sync from %s cannot mend %s: %s", zone, source, what, why)

        def table_of(db: str, name: str) -> Any:
            """The source zone's table ``db.name`` (None when it cannot be read)."""
            try:
                return call_compat(source_client, "get_table", db, name, idempotent=True)
            except TException:
                return None

        for pc in planned:
            rule = rules[pc.command.rule]
            command = replace(pc.command, data=data_dirs(pc.method, pc.command.args, rule, source, table_of))
            if copier is not None:
                copier.copy(command, rule)
            try:
                client.call(command.method, *for_zone(command, rule, zone))
                applied += 1
            except TException as e:  # the same answer every zone would give: this object is done
                log.info(
                    "zone %s: re-sync %s of %s: %s", zone, pc.method, pc.object, getattr(e, "message", e)
                )
    finally:
        source_client.close()
    log.warning(
        "zone %s: re-synced from zone %s by comparison (%d difference(s), %d command(s) applied); "
        "following the log from position %d",
        zone, source, len(report.divergences), applied, head,
    )  # fmt: skip
    return head, source, applied
