"""Planning a batch of notification events: which ones a policy's target takes, and which together.

:func:`plan_batch` turns the source events a policy read after its checkpoint into a :class:`Plan`,
one action per event or per run of events, in the events' order, decided from the events and the
policy's rules alone (no metastore, no storage):

- :class:`Skip`: an event the target does not take: its object is out of the policy's scope (or
  being bootstrapped on its own), its type is one replay leaves out
  (:data:`hivemesh.metastore.replay.SKIPPED`), a drop when the policy does not propagate drops,
  and what the target's format has no use for (see :func:`plan_batch`).
- :class:`Apply`: one event for the policy's executor to apply.
- :class:`PutPartitions`: consecutive ALTER_PARTITION events of one table that rename no
  partition, applied as one put of the last after-image of each partition.

The executor runs the actions in order; the checkpoint after an action is the id of its last
event (:attr:`Plan.last_event_id` after the whole plan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hive_metastore.ttypes import NotificationEvent, Partition, Table

from hivemesh.acid.tables import is_transactional
from hivemesh.hive import event_messages as ev
from hivemesh.metastore.replay import HANDLERS, SKIPPED
from hivemesh.replication.config import TargetFormat
from hivemesh.replication.scope import Scope, event_object
from hivemesh.replication.tables import is_view

__all__ = [
    "Action",
    "Apply",
    "Plan",
    "PutPartitions",
    "Skip",
    "plan_batch",
]

OUT_OF_SCOPE = "out of the policy's scope"
BOOTSTRAPPING = "its object is being bootstrapped on its own"
OPENED_LATER = "a source txn is opened on the target when it first allocates a write id in scope"
NO_DROPS = "the policy does not propagate drops"
NOT_DELTA = "no change of a Delta replica"
ACID_PARTITION = "an ACID table's partition: its data comes with the COMMIT_TXN"
VIEW = "a view has no Delta replica"

Bootstrapping = frozenset[tuple[str, str]]
"""Objects bootstrapped on their own: ``(database, table)``, lower case, table ``""`` for a
whole database."""


@dataclass(frozen=True)
class Skip:
    """An event the target does not take; ``reason`` says why."""

    message: ev.Message
    reason: str

    @property
    def last_event(self) -> NotificationEvent:
        """The event skipped. Never raises."""
        return self.message.event


@dataclass(frozen=True)
class Apply:
    """An event for the executor to apply on its own."""

    message: ev.Message

    @property
    def last_event(self) -> NotificationEvent:
        """The event to apply. Never raises."""
        return self.message.event


@dataclass(frozen=True)
class PutPartitions:
    """Consecutive ALTER_PARTITION events (``messages``, one or more) of ``table`` renaming no
    partition: ``images`` holds the last after-image of each partition they alter, in the order
    the partitions first appear."""

    table: Table
    messages: tuple[ev.AlterPartition, ...]
    images: tuple[Partition, ...]

    @property
    def last_event(self) -> NotificationEvent:
        """The last of the events. Never raises."""
        return self.messages[-1].event


Action = Skip | Apply | PutPartitions


@dataclass(frozen=True)
class Plan:
    """The actions of a batch, in the events' order."""

    actions: tuple[Action, ...]

    @property
    def last_event_id(self) -> int | None:
        """The id of the batch's last event (the checkpoint once every action ran), None for an
        empty batch. Never raises."""
        return int(self.actions[-1].last_event.eventId) if self.actions else None


def plan_batch(
    events: Sequence[NotificationEvent], scope: Scope, bootstrapping: Bootstrapping = frozenset()
) -> Plan:
    """The plan of ``events`` (notification events in id order) for the policy of ``scope``, its
    target format as the policy says; events of objects in ``bootstrapping`` are skipped (their
    bootstrap applies them when it ends).

    Both formats skip events of objects out of scope, and an ALTER_TABLE when neither its old nor
    its new name is in scope. A Hive target also skips OPEN_TXN, drops when the policy does not
    propagate them, and the event types replay leaves out (INSERT and ACID_WRITE excepted: their
    files are copied). A Delta target skips database and function events, events of no table, an
    ALTER_TABLE of a view that renames nothing, and an ALTER_PARTITION of an ACID table that
    renames nothing; it takes every txn event (it follows the source's txns). Raises what
    :func:`hivemesh.hive.event_messages.parse_event` raises for an event it cannot decode."""
    decide = _delta_decision if scope.policy.format == TargetFormat.DELTA else _hive_decision
    in_scope = _scope_test(scope, bootstrapping)
    actions: list[Action] = []
    run: list[ev.AlterPartition] = []
    for event in events:
        msg = ev.parse_event(event)
        reason = decide(msg, scope, in_scope)
        if reason is None and isinstance(msg, ev.AlterPartition) and not _renamed(msg):
            if run and _table_key(run[0]) != _table_key(msg):
                actions.append(_put(run))
                run = []
            run.append(msg)
            continue
        if run:
            actions.append(_put(run))
            run = []
        actions.append(Apply(msg) if reason is None else Skip(msg, reason))
    if run:
        actions.append(_put(run))
    return Plan(tuple(actions))


InScope = Callable[[str | None, str | None], str | None]
"""``(database, table)`` -> None when in scope, else why not."""


def _scope_test(scope: Scope, bootstrapping: Bootstrapping) -> InScope:
    def why_not(db: str | None, table: str | None) -> str | None:
        """None when ``db`` (``db.table``) is in scope and not bootstrapping; a database of None
        (a txn event) is."""
        if db is None:
            return None
        if not (scope.database(db) if table is None else scope.table(db, table)):
            return OUT_OF_SCOPE
        if (db, "") in bootstrapping or (table is not None and (db, table) in bootstrapping):
            return BOOTSTRAPPING
        return None

    return why_not


def _renamed(msg: ev.AlterPartition) -> bool:
    return list(msg.before.values or []) != list(msg.after.values or [])


def _table_key(msg: ev.AlterPartition) -> tuple[str, str]:
    return msg.table.dbName, msg.table.tableName


def _put(run: list[ev.AlterPartition]) -> PutPartitions:
    latest: dict[tuple[str, ...], Partition] = {}
    for m in run:
        latest[tuple(m.after.values or [])] = m.after
    return PutPartitions(run[0].table, tuple(run), tuple(latest.values()))


def _names(table: Table) -> tuple[str, str]:
    return table.dbName.lower(), table.tableName.lower()


def _alter_table_scope(msg: ev.AlterTable, in_scope: InScope) -> str | None:
    """None when the table's old or new name is in scope."""
    was = in_scope(*_names(msg.before))
    return None if was is None else in_scope(*_names(msg.after))


def _hive_decision(msg: ev.Message, scope: Scope, in_scope: InScope) -> str | None:
    """Why a Hive target skips ``msg``, None when it takes it."""
    if isinstance(msg, ev.OpenTxn):
        return OPENED_LATER
    if isinstance(msg, (ev.CommitTxn, ev.AbortTxn)):
        return None  # taken when the executor opened the txn on the target
    if isinstance(msg, ev.AlterTable):
        return _alter_table_scope(msg, in_scope)
    why = in_scope(*event_object(msg))
    if why is not None:
        return why
    if (
        isinstance(msg, (ev.DropTable, ev.DropPartition, ev.DropDatabase))
        and not scope.policy.propagate_drops
    ):
        return NO_DROPS
    if isinstance(msg, (ev.Insert, ev.AcidWrite)) or type(msg) in HANDLERS:
        return None
    return SKIPPED.get(type(msg), "replay has no handler for it")


_DELTA_CHANGES = (
    ev.CreateTable,
    ev.DropTable,
    ev.AddPartition,
    ev.AlterPartition,
    ev.DropPartition,
    ev.Insert,
)


def _delta_decision(msg: ev.Message, scope: Scope, in_scope: InScope) -> str | None:
    """Why a Delta target skips ``msg``, None when it takes it."""
    if isinstance(msg, (ev.OpenTxn, ev.AllocWriteId, ev.CommitTxn, ev.AbortTxn)):
        return None
    if isinstance(msg, ev.AlterTable):
        why = _alter_table_scope(msg, in_scope)
        if why is None and _names(msg.before) == _names(msg.after) and is_view(msg.after):
            return VIEW
        return why
    db, table = event_object(msg)
    if db is None or table is None:
        return OUT_OF_SCOPE
    why = in_scope(db, table)
    if why is not None:
        return why
    if not isinstance(msg, _DELTA_CHANGES):
        return NOT_DELTA
    if isinstance(msg, ev.AlterPartition) and is_transactional(msg.table) and not _renamed(msg):
        return ACID_PARTITION
    return None
