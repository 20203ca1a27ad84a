"""The replicator's own store: where each policy is, and what it copied.

Five tables in a SQL database (``replication.store``: SQLite by default, PostgreSQL in
production), their schema versioned by Alembic in ``HIVEMESH_REPLICATION_VERSION``:

- ``HIVEMESH_REPL_POLICIES``: per policy, the checkpoint (the last source event id applied to the
  target), its phase (``new``, ``bootstrapping``, ``replicating``, ``resyncing``), the rules it
  ran with, the lease of the process running it, the last error and the last success;
- ``HIVEMESH_REPL_OBJECTS``: databases and tables whose rules changed (``bootstrapping`` on their
  own, ``stopped`` when no rule matches them any more);
- ``HIVEMESH_REPL_TXNS``: source txns opened on the target and not yet committed or aborted
  (``format: delta`` policies: the source txns open as of the checkpoint);
- ``HIVEMESH_REPL_WRITES``: the tables and write ids the open source txns were allocated (a
  ``format: hive`` policy syncs those tables' files at the commit of a txn that reported no
  writes; ``format: delta`` policies also keep the highest source txn id opened,
  ``SOURCE_TXN_HWM`` of the policy's row);
- ``HIVEMESH_REPL_FILES``: the file ledger, per target file the size, source modification time and
  MD5 it was copied with, so a file whose source did not change is not read again.

Every method is one database transaction; state survives kill -9 of the replicator.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hivemesh.hive.constants import now_ms
from hivemesh.storage.sql import SqlStore

__all__ = ["METADATA", "FileRecord", "ObjectState", "PolicyState", "ReplicationStore", "lease_owner"]

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "HIVEMESH_REPLICATION_VERSION"
_PG_LOCK = 0x484D5250

METADATA = sa.MetaData()
POLICIES = sa.Table(
    "HIVEMESH_REPL_POLICIES",
    METADATA,
    sa.Column("POLICY", sa.String(128), primary_key=True),
    sa.Column("SOURCE", sa.String(128), nullable=False),
    sa.Column("TARGET", sa.String(128), nullable=False),
    sa.Column("PHASE", sa.String(16), nullable=False),
    sa.Column("EVENT_ID", sa.BigInteger, nullable=True),  # last source event applied
    sa.Column("BOOTSTRAP_EVENT_ID", sa.BigInteger, nullable=True),
    sa.Column("SOURCE_EVENT_ID", sa.BigInteger, nullable=True),  # newest source event seen
    sa.Column("EVENT_TIME", sa.BigInteger, nullable=True),  # source time of EVENT_ID, s
    sa.Column("EVENTS_APPLIED", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("RULES", sa.Text, nullable=True),
    sa.Column("RESYNCS", sa.Integer, nullable=False, server_default="0"),
    sa.Column("RESYNC_REASON", sa.Text, nullable=True),
    sa.Column("COPYING", sa.Text, nullable=True),
    sa.Column("LAST_ERROR", sa.Text, nullable=True),
    sa.Column("LAST_ERROR_MS", sa.BigInteger, nullable=True),
    sa.Column("LAST_SUCCESS_MS", sa.BigInteger, nullable=True),
    sa.Column("LEASE_OWNER", sa.String(256), nullable=True),
    sa.Column("LEASE_EXPIRES_MS", sa.BigInteger, nullable=True),
    sa.Column("UPDATED_MS", sa.BigInteger, nullable=False),
    sa.Column("SOURCE_TXN_HWM", sa.BigInteger, nullable=True),  # delta policies: see WRITES
)
OBJECTS = sa.Table(
    "HIVEMESH_REPL_OBJECTS",
    METADATA,
    sa.Column("POLICY", sa.String(128), primary_key=True),
    sa.Column("DB_NAME", sa.String(256), primary_key=True),
    sa.Column("TBL_NAME", sa.String(256), primary_key=True),  # '' for a whole database
    sa.Column("STATE", sa.String(16), nullable=False),
    sa.Column("EVENT_ID", sa.BigInteger, nullable=True),
    sa.Column("UPDATED_MS", sa.BigInteger, nullable=False),
)
TXNS = sa.Table(
    "HIVEMESH_REPL_TXNS",
    METADATA,
    sa.Column("POLICY", sa.String(128), primary_key=True),
    sa.Column("SOURCE_TXN_ID", sa.BigInteger, primary_key=True),
)
WRITES = sa.Table(
    "HIVEMESH_REPL_WRITES",
    METADATA,
    sa.Column("POLICY", sa.String(128), primary_key=True),
    sa.Column("SOURCE_TXN_ID", sa.BigInteger, primary_key=True),
    sa.Column("DB_NAME", sa.String(256), primary_key=True),
    sa.Column("TBL_NAME", sa.String(256), primary_key=True),
    sa.Column("WRITE_ID", sa.BigInteger, nullable=False),
)
FILES = sa.Table(
    "HIVEMESH_REPL_FILES",
    METADATA,
    sa.Column("POLICY", sa.String(128), primary_key=True),
    sa.Column("TARGET_PATH", sa.String(2048), primary_key=True),
    sa.Column("SIZE", sa.BigInteger, nullable=False),
    sa.Column("SOURCE_MTIME_NS", sa.BigInteger, nullable=True),
    sa.Column("CHECKSUM", sa.String(32), nullable=True),  # MD5 when it was computed
    sa.Column("COPIED_MS", sa.BigInteger, nullable=False),
)

PHASES = ("new", "bootstrapping", "replicating", "resyncing")


def lease_owner() -> str:
    """This process's lease holder name: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _owner_alive(owner: str) -> bool:
    """Whether the process holding a lease may still run: always true for another host (its lease
    must expire), checked with ``kill(pid, 0)`` on this one."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class PolicyState:
    """One row of ``HIVEMESH_REPL_POLICIES`` (times in ms since the epoch, ``event_time`` in s)."""

    policy: str
    source: str
    target: str
    phase: str
    event_id: int | None
    bootstrap_event_id: int | None
    source_event_id: int | None
    event_time: int | None
    events_applied: int
    rules: dict[str, Any] | None
    resyncs: int
    resync_reason: str | None
    copying: str | None
    last_error: str | None
    last_error_ms: int | None
    last_success_ms: int | None
    lease_owner: str | None
    lease_expires_ms: int | None
    updated_ms: int

    @classmethod
    def from_row(cls, row: Any) -> PolicyState:
        """The state in a ``HIVEMESH_REPL_POLICIES`` row (``RULES`` decoded from JSON). Raises ValueError
        (``json.JSONDecodeError``) for a ``RULES`` value that is not JSON."""
        m = row._mapping
        return cls(
            policy=m["POLICY"],
            source=m["SOURCE"],
            target=m["TARGET"],
            phase=m["PHASE"],
            event_id=m["EVENT_ID"],
            bootstrap_event_id=m["BOOTSTRAP_EVENT_ID"],
            source_event_id=m["SOURCE_EVENT_ID"],
            event_time=m["EVENT_TIME"],
            events_applied=m["EVENTS_APPLIED"],
            rules=json.loads(m["RULES"]) if m["RULES"] else None,
            resyncs=m["RESYNCS"],
            resync_reason=m["RESYNC_REASON"],
            copying=m["COPYING"],
            last_error=m["LAST_ERROR"],
            last_error_ms=m["LAST_ERROR_MS"],
            last_success_ms=m["LAST_SUCCESS_MS"],
            lease_owner=m["LEASE_OWNER"],
            lease_expires_ms=m["LEASE_EXPIRES_MS"],
            updated_ms=m["UPDATED_MS"],
        )


@dataclass(frozen=True)
class ObjectState:
    """One row of ``HIVEMESH_REPL_OBJECTS``: ``table`` is '' for a whole database; ``state`` is
    ``bootstrapping``, ``replicating`` or ``stopped``; ``event_id`` the source event id its
    bootstrap started at (or it stopped at)."""

    db: str
    table: str
    state: str
    event_id: int | None
    updated_ms: int


@dataclass(frozen=True)
class FileRecord:
    """A file-ledger entry: the target file ``path`` was copied with ``size`` bytes and MD5
    ``checksum`` (None when the copy computed none: a streaming file's closed copy) from a source
    file last modified at ``source_mtime_ns``."""

    path: str
    size: int
    source_mtime_ns: int | None
    checksum: str | None


class ReplicationStore(SqlStore):
    """The replicator's store at a SQLAlchemy URL (``sqlite:///path`` or
    ``postgresql+psycopg://...``); schema created or upgraded on construction.

    Raises ConfigError for a bad URL, ``sqlalchemy.exc.OperationalError`` when unreachable.

    Every method below runs in one store transaction and raises the database's errors unchanged
    (``sqlalchemy.exc.OperationalError`` when the store cannot be reached or, on SQLite, stays
    locked; see :meth:`SqlStore.write`); a failed write changes nothing. A policy never recorded
    is not an error: reads answer None or empty, writes to its row change nothing.
    """

    def __init__(self, url: str):
        super().__init__(url, MIGRATIONS, VERSION_TABLE, _PG_LOCK, pool_size=4, what="replication.store")

    # ------------------------------------------------------------------ policies
    def get(self, policy: str) -> PolicyState | None:
        """The state of ``policy``, None when it never ran."""
        with self.read() as conn:
            row = conn.execute(sa.select(POLICIES).where(POLICIES.c.POLICY == policy)).first()
        return PolicyState.from_row(row) if row is not None else None

    def all(self) -> list[PolicyState]:
        """Every policy that ran, by name."""
        with self.read() as conn:
            rows = conn.execute(sa.select(POLICIES).order_by(POLICIES.c.POLICY)).all()
        return [PolicyState.from_row(r) for r in rows]

    def ensure(self, policy: str, source: str, target: str) -> PolicyState:
        """The state of ``policy``, created in phase ``new`` when missing (source and target zone
        names updated)."""
        with self.write() as conn:
            row = conn.execute(sa.select(POLICIES.c.POLICY).where(POLICIES.c.POLICY == policy)).first()
            if row is None:
                conn.execute(
                    POLICIES.insert().values(
                        POLICY=policy, SOURCE=source, TARGET=target, PHASE="new", UPDATED_MS=now_ms()
                    )
                )
            else:
                conn.execute(
                    POLICIES.update().where(POLICIES.c.POLICY == policy).values(SOURCE=source, TARGET=target)
                )
        state = self.get(policy)
        assert state is not None
        return state

    def update(self, policy: str, **values: Any) -> None:
        """Set columns of ``policy``'s row (keyword names are column names, lower case; ``rules``
        as a dict). Raises ``sqlalchemy.exc.CompileError`` for a keyword that names no column; a policy
        never recorded changes nothing."""
        cols = {k.upper(): v for k, v in values.items()}
        if "RULES" in cols and cols["RULES"] is not None:
            cols["RULES"] = json.dumps(cols["RULES"], sort_keys=True)
        cols["UPDATED_MS"] = now_ms()
        with self.write() as conn:
            conn.execute(POLICIES.update().where(POLICIES.c.POLICY == policy).values(**cols))

    def checkpoint(self, policy: str, event_id: int, event_time: int | None, applied: int) -> None:
        """Record that every source event up to ``event_id`` is applied (``applied`` more events
        than before) with their data; clears the last error and what was being copied, and stamps
        the last success."""
        with self.write() as conn:
            self._checkpoint(conn, policy, event_id, event_time, applied)

    @staticmethod
    def _checkpoint(
        conn: sa.Connection, policy: str, event_id: int, event_time: int | None, applied: int
    ) -> None:
        now = now_ms()
        conn.execute(
            POLICIES.update()
            .where(POLICIES.c.POLICY == policy)
            .values(
                EVENT_ID=event_id,
                EVENT_TIME=event_time,
                EVENTS_APPLIED=POLICIES.c.EVENTS_APPLIED + applied,
                LAST_ERROR=None,
                COPYING=None,
                LAST_SUCCESS_MS=now,
                UPDATED_MS=now,
            )
        )

    def record_error(self, policy: str, message: str) -> None:
        """Record the last error of ``policy`` (kept until the next checkpoint)."""
        now = now_ms()
        self.update(policy, last_error=message[:4000], last_error_ms=now)

    def acquire(self, policy: str, owner: str, lease_ms: int) -> bool:
        """Take or renew the lease of ``policy`` for ``owner`` for ``lease_ms``: True when this
        owner holds it now. A lease is free when unheld, expired, or held by a dead process of
        this host (kill -9). False, without error, for a policy never recorded (:meth:`ensure` it first)."""
        now = now_ms()
        with self.write() as conn:
            row = conn.execute(
                sa.select(POLICIES.c.LEASE_OWNER, POLICIES.c.LEASE_EXPIRES_MS)
                .where(POLICIES.c.POLICY == policy)
                .with_for_update()
            ).first()
            if row is None:
                return False
            holder, expires = row
            free = holder is None or holder == owner or (expires or 0) < now or not _owner_alive(holder)
            if free:
                conn.execute(
                    POLICIES.update()
                    .where(POLICIES.c.POLICY == policy)
                    .values(LEASE_OWNER=owner, LEASE_EXPIRES_MS=now + lease_ms)
                )
            return free

    def release(self, policy: str, owner: str) -> None:
        """Give up the lease of ``policy`` if ``owner`` holds it."""
        with self.write() as conn:
            conn.execute(
                POLICIES.update()
                .where(POLICIES.c.POLICY == policy, POLICIES.c.LEASE_OWNER == owner)
                .values(LEASE_OWNER=None, LEASE_EXPIRES_MS=None)
            )

    def forget(self, policy: str) -> None:
        """Delete everything recorded for ``policy`` (the next run bootstraps it again)."""
        with self.write() as conn:
            for table in (FILES, WRITES, TXNS, OBJECTS, POLICIES):
                conn.execute(table.delete().where(table.c.POLICY == policy))

    # ------------------------------------------------------------------ objects
    def objects(self, policy: str) -> list[ObjectState]:
        """The objects recorded for ``policy`` (rule changes), by database and table."""
        with self.read() as conn:
            rows = conn.execute(
                sa.select(OBJECTS)
                .where(OBJECTS.c.POLICY == policy)
                .order_by(OBJECTS.c.DB_NAME, OBJECTS.c.TBL_NAME)
            ).all()
        return [ObjectState(r.DB_NAME, r.TBL_NAME, r.STATE, r.EVENT_ID, r.UPDATED_MS) for r in rows]

    def put_object(self, policy: str, db: str, table: str, state: str, event_id: int | None) -> None:
        """Record ``db.table`` (``table`` '' for the database) of ``policy`` in ``state``."""
        with self.write() as conn:
            conn.execute(
                OBJECTS.delete().where(
                    OBJECTS.c.POLICY == policy, OBJECTS.c.DB_NAME == db, OBJECTS.c.TBL_NAME == table
                )
            )
            conn.execute(
                OBJECTS.insert().values(
                    POLICY=policy, DB_NAME=db, TBL_NAME=table, STATE=state, EVENT_ID=event_id,
                    UPDATED_MS=now_ms(),
                )
            )  # fmt: skip

    def drop_object(self, policy: str, db: str, table: str) -> None:
        """Forget ``db.table`` of ``policy``."""
        with self.write() as conn:
            conn.execute(
                OBJECTS.delete().where(
                    OBJECTS.c.POLICY == policy, OBJECTS.c.DB_NAME == db, OBJECTS.c.TBL_NAME == table
                )
            )

    # ------------------------------------------------------------------ txns
    def txn_opened(self, policy: str, txn_id: int) -> None:
        """Record that source txn ``txn_id`` is open on the target."""
        with self.write() as conn:
            exists = conn.execute(
                sa.select(TXNS.c.SOURCE_TXN_ID).where(TXNS.c.POLICY == policy, TXNS.c.SOURCE_TXN_ID == txn_id)
            ).first()
            if exists is None:
                conn.execute(TXNS.insert().values(POLICY=policy, SOURCE_TXN_ID=txn_id))

    def txn_is_open(self, policy: str, txn_id: int) -> bool:
        """Whether source txn ``txn_id`` was opened on the target and not ended."""
        with self.read() as conn:
            return (
                conn.execute(
                    sa.select(TXNS.c.SOURCE_TXN_ID).where(
                        TXNS.c.POLICY == policy, TXNS.c.SOURCE_TXN_ID == txn_id
                    )
                ).first()
                is not None
            )

    def txns(self, policy: str) -> list[int]:
        """Source txns of ``policy`` open on the target, ascending."""
        with self.read() as conn:
            return list(
                conn.execute(
                    sa.select(TXNS.c.SOURCE_TXN_ID)
                    .where(TXNS.c.POLICY == policy)
                    .order_by(TXNS.c.SOURCE_TXN_ID)
                ).scalars()
            )

    def txn_ended(self, policy: str, txn_id: int) -> None:
        """Forget source txn ``txn_id`` (committed or aborted on the target) and its writes."""
        with self.write() as conn:
            conn.execute(TXNS.delete().where(TXNS.c.POLICY == policy, TXNS.c.SOURCE_TXN_ID == txn_id))
            conn.execute(WRITES.delete().where(WRITES.c.POLICY == policy, WRITES.c.SOURCE_TXN_ID == txn_id))

    def txn_wrote(self, policy: str, writes: Iterable[tuple[int, str, str, int]]) -> None:
        """Record ``(source txn id, database, table, write id)`` allocations of txns open on the
        target (a ``format: hive`` policy syncs those tables' files when the txn commits, for
        writers that report no write events, such as streaming batches). Idempotent."""
        rows = {(t, d.lower(), n.lower()): w for t, d, n, w in writes}
        if not rows:
            return
        with self.write() as conn:
            for (t, d, n), w in rows.items():
                conn.execute(
                    WRITES.delete().where(
                        WRITES.c.POLICY == policy, WRITES.c.SOURCE_TXN_ID == t,
                        WRITES.c.DB_NAME == d, WRITES.c.TBL_NAME == n,
                    )
                )  # fmt: skip
                conn.execute(
                    WRITES.insert().values(POLICY=policy, SOURCE_TXN_ID=t, DB_NAME=d, TBL_NAME=n, WRITE_ID=w)
                )

    def txn_writes(self, policy: str, txn_id: int) -> list[tuple[str, str, int]]:
        """The ``(database, table, write id)`` recorded by :meth:`txn_wrote` for source txn ``txn_id``."""
        with self.read() as conn:
            return [
                (r.DB_NAME, r.TBL_NAME, r.WRITE_ID)
                for r in conn.execute(
                    sa.select(WRITES).where(WRITES.c.POLICY == policy, WRITES.c.SOURCE_TXN_ID == txn_id)
                )
            ]

    def source_txns(self, policy: str) -> tuple[int | None, set[int], dict[int, list[tuple[str, str, int]]]]:
        """A ``format: delta`` policy's view of the source's txns as of its checkpoint: ``(highest
        txn id opened or None, open txn ids, {txn: [(db, table, write id), ...]})``."""
        with self.read() as conn:
            hwm = conn.execute(
                sa.select(POLICIES.c.SOURCE_TXN_HWM).where(POLICIES.c.POLICY == policy)
            ).scalar()
            open_txns = set(
                conn.execute(sa.select(TXNS.c.SOURCE_TXN_ID).where(TXNS.c.POLICY == policy)).scalars()
            )
            writes: dict[int, list[tuple[str, str, int]]] = {}
            for r in conn.execute(sa.select(WRITES).where(WRITES.c.POLICY == policy)):
                writes.setdefault(r.SOURCE_TXN_ID, []).append((r.DB_NAME, r.TBL_NAME, r.WRITE_ID))
        return hwm, open_txns, writes

    def save_source_txns(
        self,
        policy: str,
        hwm: int | None,
        open_txns: Iterable[int],
        writes: dict[int, list[tuple[str, str, int]]],
        checkpoint: tuple[int, int | None, int] | None = None,
    ) -> None:
        """Replace what :meth:`source_txns` returns, and with ``checkpoint`` ``(event id, event
        time, applied)`` record it as :meth:`checkpoint` does, in one transaction."""
        with self.write() as conn:
            if checkpoint is not None:
                self._checkpoint(conn, policy, *checkpoint)
            conn.execute(POLICIES.update().where(POLICIES.c.POLICY == policy).values(SOURCE_TXN_HWM=hwm))
            conn.execute(TXNS.delete().where(TXNS.c.POLICY == policy))
            conn.execute(WRITES.delete().where(WRITES.c.POLICY == policy))
            rows = [{"POLICY": policy, "SOURCE_TXN_ID": t} for t in sorted(set(open_txns))]
            if rows:
                conn.execute(TXNS.insert(), rows)
            wrows = [
                {"POLICY": policy, "SOURCE_TXN_ID": t, "DB_NAME": d, "TBL_NAME": n, "WRITE_ID": w}
                for t, ws in writes.items()
                for d, n, w in ws
            ]
            if wrows:
                conn.execute(WRITES.insert(), wrows)

    # ------------------------------------------------------------------ file ledger
    def ledger(self, policy: str, under: str) -> dict[str, FileRecord]:
        """Ledger entries of ``policy`` for target paths below directory ``under``, by path."""
        prefix = under.rstrip("/") + "/"
        with self.read() as conn:
            rows = conn.execute(
                sa.select(FILES).where(
                    FILES.c.POLICY == policy, FILES.c.TARGET_PATH.startswith(prefix, autoescape=True)
                )
            ).all()
        return {r.TARGET_PATH: FileRecord(r.TARGET_PATH, r.SIZE, r.SOURCE_MTIME_NS, r.CHECKSUM) for r in rows}

    def record_files(self, policy: str, records: Iterable[FileRecord]) -> None:
        """Add or replace ledger entries of ``policy``."""
        records = list(records)
        if not records:
            return
        now = now_ms()
        with self.write() as conn:
            conn.execute(
                FILES.delete().where(
                    FILES.c.POLICY == policy, FILES.c.TARGET_PATH.in_([r.path for r in records])
                )
            )
            conn.execute(
                FILES.insert(),
                [
                    {
                        "POLICY": policy,
                        "TARGET_PATH": r.path,
                        "SIZE": r.size,
                        "SOURCE_MTIME_NS": r.source_mtime_ns,
                        "CHECKSUM": r.checksum,
                        "COPIED_MS": now,
                    }
                    for r in records
                ],
            )

    def forget_files(self, policy: str, paths: Iterable[str] = (), under: str | None = None) -> None:
        """Remove ledger entries of ``policy``: the given target ``paths``, and every one below
        directory ``under``."""
        paths = list(paths)
        with self.write() as conn:
            if paths:
                conn.execute(FILES.delete().where(FILES.c.POLICY == policy, FILES.c.TARGET_PATH.in_(paths)))
            if under is not None:
                prefix = under.rstrip("/") + "/"
                conn.execute(
                    FILES.delete().where(
                        FILES.c.POLICY == policy, FILES.c.TARGET_PATH.startswith(prefix, autoescape=True)
                    )
                )
