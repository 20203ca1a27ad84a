"""The health poller: every ``status_polling_delay_ms`` each member (and each remote's connector) is
asked for its databases on a fresh connection, within its connect timeout plus latency. Members
that answer are marked available (calls routed to them work again), members that do not are marked
unavailable (calls routed to them fail at once, merged calls leave them out). The database lists
feed duplicate-name reports and the renaming of database references in view text."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from hivemesh.federation.members import Member
from hivemesh.federation.routing import MemberCalls

log = logging.getLogger(__name__)


def probe(member: Member, timeout_s: float) -> frozenset[str]:
    """The member's database names (real, lower case), asked on its own (a new connection for a
    Thrift member). Raises whatever the connection or the call raises."""
    dbs = member.connector.call("get_all_databases", (), timeout_s)
    return frozenset(d.lower() for d in dbs or [])


class HealthPoller:
    """Polls the members of ``fed`` in the background; ``on_round()`` runs after each round."""

    def __init__(self, fed: MemberCalls, interval_s: float, on_round: Callable[[], None] | None = None):
        self.fed = fed
        self.interval_s = interval_s
        self.on_round = on_round
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="health")
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        """One round over every member, in parallel, each within its own deadline."""
        members = list(self.fed.registry.members)
        if self.fed.links is not None:
            seen = set()
            for m in self.fed.links.members(tables=True):
                if id(m.connector) not in seen:
                    seen.add(id(m.connector))
                    members.append(m)
        futures = {}
        for m in members:
            cfg = getattr(m, "config", None)
            timeout = (cfg.connect_timeout_ms / 1000 if cfg is not None else 2.0) + m.deadline_extra_s
            futures[self._pool.submit(probe, m, timeout)] = (m, timeout)
        done, _ = wait(futures, timeout=max(t for _, t in futures.values()) + 1 if futures else 0)
        owners: dict[str, list[str]] = {}
        for fut, (m, _timeout) in futures.items():
            if fut not in done:
                m.mark_down(f"no answer to the health check within {_timeout * 1000:.0f} ms")
                continue
            try:
                dbs = fut.result()
            except Exception as e:
                m.mark_down(e)
                if m.remote_spec is not None:  # remotes share connectors: mark the others too
                    for other in self.fed.links.members(tables=True) if self.fed.links is not None else ():
                        if other.connector is m.connector:
                            other.mark_down(e)
                continue
            m.mark_up()
            if m.remote_spec is not None:
                for other in self.fed.links.members(tables=True) if self.fed.links is not None else ():
                    if other.connector is m.connector:
                        other.mark_up()
                continue
            m.databases = dbs
            for d in dbs:
                if m.names.exposes(d):
                    owners.setdefault(m.names.db_out(d), []).append(m.name)
        self.fed.note_duplicates(owners)
        if callable(self.on_round):
            self.on_round()

    def start(self) -> HealthPoller:
        """Poll in a daemon thread every ``interval_s`` (the first round at once)."""

        def run() -> None:
            while True:
                try:
                    self.poll_once()
                except Exception as e:  # never let the poller die
                    log.exception("health poll failed: %s", e)
                if self._stop.wait(self.interval_s):
                    return

        self._thread = threading.Thread(target=run, name="health-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (a running round is abandoned)."""
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
