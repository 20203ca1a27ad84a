"""Keeping the command log short: commands every zone applied are removed, one interval late.

:class:`Compactor` runs in every zone's live service (compaction is idempotent, so several at once
do no harm). Each round it reads every zone's stored position and the log's head; it compacts
below the lower of the slowest zone's position and the head it saw a round earlier, so:

- no zone ever finds its next command gone (a zone that never stored a position, or is missing
  from etcd, stops compaction altogether: ``status`` shows it);
- every removed command is at least one interval old, so a proposer retrying an append (same
  request id, within etcd's ``timeout_s``) still finds its first append and appends nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from hivemesh.live.errors import LiveError
from hivemesh.live.log import CommandLog

__all__ = ["Compactor"]

log = logging.getLogger(__name__)


class Compactor:
    """Compacts ``commands`` for ``zones`` (every zone of the configuration) each ``interval_s``
    seconds once :meth:`start` ran; :meth:`run_once` is one round."""

    def __init__(self, commands: CommandLog, zones: Iterable[str], interval_s: float) -> None:
        self.commands = commands
        self.zones = sorted(zones)
        self.interval_s = interval_s
        self.previous_head: int | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int | None:
        """One round: returns the new compaction point, or None when nothing was compacted.
        Raises LiveError (etcd unreachable)."""
        states = self.commands.zone_states()
        head, _ = self.commands.head()
        previous, self.previous_head = self.previous_head, head
        missing = [z for z in self.zones if z not in states]
        if missing:
            log.info("log not compacted: zone(s) %s never stored a position", ", ".join(missing))
            return None
        if previous is None:
            return None
        slowest = min(int(states[z].get("position", 0)) for z in self.zones)
        below = min(slowest, previous) + 1
        if below <= max(1, self.commands.compacted_below()):
            return None
        self.commands.compact(below)
        log.info("command log compacted below position %d (slowest zone at %d)", below, slowest)
        return below

    def start(self) -> Compactor:
        """Run a round every ``interval_s`` seconds in a background thread."""
        self._thread = threading.Thread(target=self._run, name="live-compactor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_once()
                self.last_error = None
            except (LiveError, ValueError) as e:
                self.last_error = str(e)
                log.warning("command log compaction failed: %s", e)

    def stop(self) -> None:
        """Stop the rounds."""
        self._stop.set()
