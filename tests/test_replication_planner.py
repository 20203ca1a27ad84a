"""The planning step of replication (:mod:`hivemesh.replication.planner`), without a server.

Hand-made notification events (their messages written by :mod:`hivemesh.hive.events`, as the
metastore writes them) go through :func:`plan_batch`; the tests check which events the target
takes, which it leaves out and why, how runs of ALTER_PARTITION become one put of partition
images, that the events' order is kept, and that the checkpoint is the batch's last event.
"""

from __future__ import annotations

from typing import Any

import pytest
from hive_metastore.ttypes import (
    Database,
    FieldSchema,
    NotificationEvent,
    Partition,
    StorageDescriptor,
    Table,
    TxnToWriteId,
)

from hivemesh.hive import event_messages as ev
from hivemesh.hive import events as he
from hivemesh.replication.config import PolicyConfig
from hivemesh.replication.planner import (
    BOOTSTRAPPING,
    NO_DROPS,
    OPENED_LATER,
    OUT_OF_SCOPE,
    Apply,
    Plan,
    PutPartitions,
    Skip,
    plan_batch,
)
from hivemesh.replication.scope import Scope


def _table(
    db: str, name: str, *, acid: bool = False, keys: tuple[str, ...] = ("dt",), kind: str = ""
) -> Table:
    params = {"transactional": "true"} if acid else {}
    return Table(
        dbName=db,
        tableName=name,
        tableType=kind or ("MANAGED_TABLE" if acid else "EXTERNAL_TABLE"),
        sd=StorageDescriptor(cols=[FieldSchema("x", "int", None)], location=f"s3a://src/{db}/{name}"),
        partitionKeys=[FieldSchema(k, "string", None) for k in keys],
        parameters=params,
    )


def _part(table: Table, values: list[str], version: str = "") -> Partition:
    loc = f"{table.sd.location}/dt={values[0]}"
    return Partition(
        values=values,
        dbName=table.dbName,
        tableName=table.tableName,
        sd=StorageDescriptor(location=loc),
        parameters={"version": version},
    )


class Log:
    """A source's notification log being written: each call appends one event (ids from 1)."""

    def __init__(self) -> None:
        self.events: list[NotificationEvent] = []

    def _add(
        self, kind: str, message: str, db: str | None = None, table: str | None = None
    ) -> NotificationEvent:
        n = len(self.events) + 1
        e = NotificationEvent(
            eventId=n, eventTime=1_700_000_000 + n, eventType=kind, dbName=db, tableName=table,
            message=message, messageFormat="json-0.2",
        )  # fmt: skip
        self.events.append(e)
        return e

    def alter_partition(
        self, table: Table, before: list[str], after: list[str] | None = None, v: str = ""
    ) -> None:
        self._add(
            he.ALTER_PARTITION,
            he.alter_partition_message(table, _part(table, before), _part(table, after or before, v)),
            table.dbName,
            table.tableName,
        )

    def alter_table(self, before: Table, after: Table) -> None:
        self._add(he.ALTER_TABLE, he.alter_table_message(before, after), before.dbName, before.tableName)

    def create_table(self, table: Table) -> None:
        self._add(he.CREATE_TABLE, he.create_table_message(table), table.dbName, table.tableName)

    def drop_table(self, table: Table) -> None:
        self._add(he.DROP_TABLE, he.drop_table_message(table), table.dbName, table.tableName)

    def drop_partition(self, table: Table, values: list[str]) -> None:
        self._add(he.DROP_PARTITION, he.drop_partition_message(table, [_part(table, values)]), table.dbName,
                  table.tableName)  # fmt: skip

    def create_database(self, name: str) -> None:
        self._add(he.CREATE_DATABASE, he.create_database_message(Database(name=name, parameters={})), name)

    def open_txn(self, txn: int) -> None:
        self._add(he.OPEN_TXN, he.open_txn_message([txn]))

    def alloc_write_id(self, table: Table, txn: int, write_id: int) -> None:
        msg = he.alloc_write_id_message(table.dbName, table.tableName, [TxnToWriteId(txn, write_id)])
        self._add(he.ALLOC_WRITE_ID_EVENT, msg, table.dbName, table.tableName)

    def commit_txn(self, txn: int, db: str) -> None:
        self._add(he.COMMIT_TXN, he.commit_txn_message(txn, [(db, 1)]))

    def primary_key(self, table: Table) -> None:
        self._add(
            he.ADD_PRIMARYKEY,
            he.add_constraints_message(he.ADD_PRIMARYKEY, []),
            table.dbName,
            table.tableName,
        )


def _scope(fmt: str = "hive", **kw: Any) -> Scope:
    policy = PolicyConfig(name="p", source="a", target="b", databases=["sales"], format=fmt, **kw)
    opposite = PolicyConfig(name="back", source="b", target="a", databases=["back_.*"])
    return Scope(policy, [opposite])


def _shape(plan: Plan) -> list[str]:
    """Each action's kind and the ids of its events: ``"put 1 2"``, ``"apply 3"``, ``"skip 4"``."""
    out = []
    for a in plan.actions:
        if isinstance(a, PutPartitions):
            ids = [m.event.eventId for m in a.messages]
        else:
            ids = [a.message.event.eventId]
        kind = "put" if isinstance(a, PutPartitions) else "apply" if isinstance(a, Apply) else "skip"
        out.append(" ".join([kind, *map(str, ids)]))
    return out


ORDERS = _table("sales", "orders")
ITEMS = _table("sales", "items")
OTHER = _table("hr", "staff")


@pytest.mark.parametrize("fmt", ["hive", "delta"])
def test_alter_partition_runs_of_one_table_become_one_put(fmt: str) -> None:
    log = Log()
    log.alter_partition(ORDERS, ["1"], v="a")  # 1
    log.alter_partition(ORDERS, ["2"], v="a")  # 2
    log.alter_partition(ORDERS, ["1"], v="b")  # 3: the same partition again
    log.alter_partition(ITEMS, ["1"])  # 4: another table ends the run
    log.alter_partition(ITEMS, ["2"])  # 5
    log.create_table(_table("sales", "new"))  # 6: any other event ends the run too
    log.alter_partition(ITEMS, ["3"])  # 7
    plan = plan_batch(log.events, _scope(fmt))
    assert _shape(plan) == ["put 1 2 3", "put 4 5", "apply 6", "put 7"]
    first = plan.actions[0]
    assert isinstance(first, PutPartitions) and first.table.tableName == "orders"
    # one image per partition, in the order the partitions first appear, each the last one
    assert [(p.values, p.parameters["version"]) for p in first.images] == [(["1"], "b"), (["2"], "a")]
    assert plan.last_event_id == 7


def test_a_rename_or_a_skipped_event_breaks_a_run() -> None:
    log = Log()
    log.alter_partition(ORDERS, ["1"])  # 1
    log.alter_partition(ORDERS, ["2"], ["20"])  # 2: a rename is applied on its own
    log.alter_partition(ORDERS, ["3"])  # 3
    log.alter_partition(OTHER, ["1"])  # 4: out of scope, skipped
    log.alter_partition(ORDERS, ["4"])  # 5
    assert _shape(plan_batch(log.events, _scope())) == ["put 1", "apply 2", "put 3", "skip 4", "put 5"]


def test_scope_skips_out_of_scope_objects_and_databases_of_the_other_direction() -> None:
    log = Log()
    log.create_table(OTHER)  # 1: database not matched
    log.create_database("back_1")  # 2: matched by a policy of the other direction only
    log.create_database("sales")  # 3
    log.create_table(ORDERS)  # 4
    log.alter_table(OTHER, _table("sales", "moved_in"))  # 5: renamed into scope
    log.alter_table(_table("hr", "x"), _table("hr", "y"))  # 6: neither name in scope
    plan = plan_batch(log.events, _scope())
    assert _shape(plan) == ["skip 1", "skip 2", "apply 3", "apply 4", "apply 5", "skip 6"]
    assert [a.reason for a in plan.actions if isinstance(a, Skip)] == [OUT_OF_SCOPE] * 3


def test_table_rules_narrow_a_database() -> None:
    log = Log()
    log.create_table(ORDERS)
    log.create_table(ITEMS)
    plan = plan_batch(log.events, _scope(tables={"sales": ["orders"]}))
    assert _shape(plan) == ["apply 1", "skip 2"]


def test_objects_bootstrapping_on_their_own_wait() -> None:
    log = Log()
    log.alter_partition(ORDERS, ["1"])
    log.create_table(ITEMS)
    log.create_database("sales")
    plan = plan_batch(log.events, _scope(), frozenset({("sales", "orders")}))
    assert _shape(plan) == ["skip 1", "apply 2", "apply 3"]
    assert plan.actions[0].reason == BOOTSTRAPPING  # type: ignore[union-attr]
    whole = plan_batch(log.events, _scope(), frozenset({("sales", "")}))
    assert [type(a) for a in whole.actions] == [Skip, Skip, Skip]


def test_hive_skips_open_txn_drops_when_not_propagated_and_what_replay_leaves_out() -> None:
    acid = _table("sales", "acid", acid=True)
    log = Log()
    log.open_txn(7)  # 1
    log.alloc_write_id(acid, 7, 1)  # 2
    log.alloc_write_id(OTHER, 7, 1)  # 3: out of scope
    log.commit_txn(7, "sales")  # 4: whether it is taken depends on the target's txns
    log.drop_partition(ORDERS, ["1"])  # 5
    log.drop_table(ORDERS)  # 6
    log.primary_key(ORDERS)  # 7: constraints are not replicated
    kept = plan_batch(log.events, _scope())
    assert _shape(kept) == ["skip 1", "apply 2", "skip 3", "apply 4", "apply 5", "apply 6", "skip 7"]
    assert kept.actions[0].reason == OPENED_LATER  # type: ignore[union-attr]
    no_drops = plan_batch(log.events, _scope(propagate_drops=False))
    assert [a.reason for a in no_drops.actions[4:6]] == [NO_DROPS, NO_DROPS]  # type: ignore[union-attr]


def test_delta_follows_every_txn_and_skips_what_a_replica_has_no_use_for() -> None:
    acid = _table("sales", "acid", acid=True)
    view = _table("sales", "v", keys=(), kind="VIRTUAL_VIEW")
    log = Log()
    log.open_txn(7)  # 1: followed, whatever it writes
    log.alloc_write_id(OTHER, 7, 1)  # 2
    log.commit_txn(7, "hr")  # 3
    log.create_database("sales")  # 4: no table
    log.alter_partition(acid, ["1"])  # 5: ACID data comes with its commit
    log.alter_partition(acid, ["1"], ["2"])  # 6: a rename moves the replica's rows
    log.alter_table(view, view)  # 7: a view has no replica
    log.drop_partition(ORDERS, ["1"])  # 8: taken even when drops are not propagated
    log.primary_key(ORDERS)  # 9
    plan = plan_batch(log.events, _scope("delta", propagate_drops=False))
    assert _shape(plan) == [
        "apply 1",
        "apply 2",
        "apply 3",
        "skip 4",
        "skip 5",
        "apply 6",
        "skip 7",
        "apply 8",
        "skip 9",
    ]


def test_order_is_kept_and_the_checkpoint_is_the_last_event() -> None:
    log = Log()
    for i in range(1, 31):  # every third an ALTER_PARTITION; the others in and out of scope
        if i % 3 == 0:
            log.alter_partition(ORDERS, [str(i)])
        else:
            log.create_table(_table("sales" if i % 2 else "hr", f"t{i}"))
    plan = plan_batch(log.events, _scope())
    shape = _shape(plan)
    assert [int(i) for action in shape for i in action.split()[1:]] == list(range(1, 31))
    assert [action.split()[0] for action in shape[:6]] == ["apply", "skip", "put", "skip", "apply", "put"]
    assert plan.last_event_id == 30
    assert plan.actions[-1].last_event.eventTime == 1_700_000_030
    assert plan_batch([], _scope()).last_event_id is None


def test_a_plan_is_made_of_decoded_messages() -> None:
    log = Log()
    log.alter_partition(ORDERS, ["1"])
    (action,) = plan_batch(log.events, _scope()).actions
    assert isinstance(action, PutPartitions)
    assert isinstance(action.messages[0], ev.AlterPartition)
    assert action.messages[0].event is log.events[0]
