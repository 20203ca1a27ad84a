"""Which events and objects a replication policy covers.

An event is in a policy's scope when the database (and for table, partition and statistics events
the table) it concerns matches the policy's rules, and no policy running the other way between the
same two zones matches it too (a database replicated both ways would echo every change back; the
config refuses literal overlaps, this catches overlapping regular expressions at run time). Txn
events carry no table: OPEN_TXN is never applied as such (a source txn is opened on the target when
it first allocates a write id of a table in scope), COMMIT_TXN and ABORT_TXN only for txns opened so.
"""

from __future__ import annotations

from collections.abc import Sequence

from hivemesh.hive import event_messages as ev
from hivemesh.replication.config import PolicyConfig

__all__ = ["Scope", "event_object"]


def event_object(msg: ev.Message) -> tuple[str | None, str | None]:
    """``(database, table)`` an event concerns (table None for database and function events,
    both None for txn events), lower case. Never raises."""
    if isinstance(msg, ev.CreateDatabase):
        return msg.database.name.lower(), None
    if isinstance(msg, ev.AlterDatabase):
        return msg.before.name.lower(), None
    if isinstance(msg, ev.DropDatabase):
        return msg.name.lower(), None
    if isinstance(msg, ev.CreateFunction):
        return (msg.function.dbName or "").lower(), None
    if isinstance(msg, ev.DropFunction):
        return msg.function_db.lower(), None
    if isinstance(msg, ev.AllocWriteId):
        return msg.write_db.lower(), msg.write_table.lower()
    if isinstance(msg, (ev.OpenTxn, ev.CommitTxn, ev.AbortTxn)):
        return None, None
    if isinstance(msg, (ev.CreateTable, ev.DropTable)):
        return msg.table.dbName.lower(), msg.table.tableName.lower()
    if isinstance(msg, ev.AlterTable):
        return msg.before.dbName.lower(), msg.before.tableName.lower()
    if isinstance(msg, (ev.AddPartition, ev.AlterPartition, ev.DropPartition, ev.Insert, ev.AcidWrite)):
        return msg.table.dbName.lower(), msg.table.tableName.lower()
    if isinstance(msg, (ev.UpdateTableColumnStats, ev.UpdatePartitionColumnStats)):
        desc = msg.stats.statsDesc
        return desc.dbName.lower(), desc.tableName.lower()
    db, table = msg.db, msg.table_name
    return (db.lower() if db else None), (table.lower() if table else None)


class Scope:
    """The rules of ``policy``, less what any of ``opposite`` (policies from its target zone to its
    source zone) matches."""

    def __init__(self, policy: PolicyConfig, opposite: Sequence[PolicyConfig] = ()):
        self.policy = policy
        self.opposite = list(opposite)

    def database(self, name: str) -> bool:
        """Whether database ``name`` is replicated. Never raises."""
        return self.policy.matches_database(name) and not any(p.matches_database(name) for p in self.opposite)

    def table(self, db: str, table: str) -> bool:
        """Whether table ``db.table`` is replicated. Never raises."""
        return self.database(db) and self.policy.matches_table(db, table)

    def conflicts(self, name: str) -> list[str]:
        """Names of the opposite policies that also match database ``name``. Never raises."""
        if not self.policy.matches_database(name):
            return []
        return [p.name for p in self.opposite if p.matches_database(name)]
