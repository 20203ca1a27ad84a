"""The proxy's routing table: where each HMS method goes, by name (grep it).

:data:`ROUTES` maps every method of the HMS Thrift interface (:data:`hivemesh.hive.hms_methods.METHODS`)
to a :class:`Route`: its :class:`Strategy`, whether it writes metadata, and the arguments that
carry database names. The proxy's handler (:class:`hivemesh.federation.handler.Federation`) answers
each method as this table says, and ``hivemesh proxy explain METHOD`` prints it for one call. The
argument names are those :mod:`hivemesh.federation.rewrite` finds in the Thrift specs (at any
depth: ``add_partitions`` routes by the ``dbName`` of the partitions in ``new_parts``, all of which
must belong to one member); ``tests/test_federation_routes.py`` checks that they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Strategy(StrEnum):
    """How the proxy answers a method."""

    BY_DATABASE = "by database name"
    """Sent to the member owning the databases its arguments name (names rewritten both ways);
    the primary when they name only the primary's databases."""
    PRIMARY = "primary metastore"
    """Names no database: sent to the primary as it is."""
    MERGED = "merged over federated metastores"
    """Asked of every available member in parallel; the answers are merged (names rewritten)."""
    PER_OWNER = "per owning member (txns, locks)"
    """Transactions are opened on the primary; locks, write ids and snapshots go to the member
    owning each table, which gets a paired transaction (:mod:`hivemesh.federation.txns`)."""
    REMOTE_LINK = "remote link, else by database name"
    """Creates or drops a remote link when the object is one (:mod:`hivemesh.federation.remotes`),
    else as BY_DATABASE."""


BY_DATABASE = Strategy.BY_DATABASE
PRIMARY = Strategy.PRIMARY
MERGED = Strategy.MERGED
PER_OWNER = Strategy.PER_OWNER
REMOTE_LINK = Strategy.REMOTE_LINK
WRITES, NO_WRITES = True, False


@dataclass(frozen=True, init=False)
class Route:
    """One method's row: ``strategy``; ``writes``: True when it changes metadata (refused on
    read-only members, and outside a member's writable databases); ``db_args``: the arguments
    holding database names (plain names or structs with a database field), in call order."""

    strategy: Strategy
    writes: bool
    db_args: tuple[str, ...]

    def __init__(self, strategy: Strategy, writes: bool, *db_args: str):
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "writes", writes)
        object.__setattr__(self, "db_args", db_args)


ROUTES: Mapping[str, Route] = MappingProxyType(
    {
        "abort_txn": Route(PER_OWNER, NO_WRITES),
        "abort_txns": Route(PER_OWNER, NO_WRITES),
        "add_check_constraint": Route(BY_DATABASE, WRITES, "req"),
        "add_default_constraint": Route(BY_DATABASE, WRITES, "req"),
        "add_dynamic_partitions": Route(PER_OWNER, WRITES, "rqst"),
        "add_foreign_key": Route(BY_DATABASE, WRITES, "req"),
        "add_master_key": Route(PRIMARY, WRITES),
        "add_not_null_constraint": Route(BY_DATABASE, WRITES, "req"),
        "add_package": Route(BY_DATABASE, WRITES, "request"),
        "add_partition": Route(BY_DATABASE, WRITES, "new_part"),
        "add_partition_with_environment_context": Route(BY_DATABASE, WRITES, "new_part"),
        "add_partitions": Route(BY_DATABASE, WRITES, "new_parts"),
        "add_partitions_pspec": Route(BY_DATABASE, WRITES, "new_parts"),
        "add_partitions_req": Route(BY_DATABASE, WRITES, "request"),
        "add_primary_key": Route(BY_DATABASE, WRITES, "req"),
        "add_replication_metrics": Route(PRIMARY, WRITES),
        "add_runtime_stats": Route(PRIMARY, WRITES),
        "add_schema_version": Route(BY_DATABASE, WRITES, "schemaVersion"),
        "add_serde": Route(PRIMARY, WRITES),
        "add_token": Route(PRIMARY, WRITES),
        "add_unique_constraint": Route(BY_DATABASE, WRITES, "req"),
        "add_write_notification_log": Route(BY_DATABASE, WRITES, "rqst"),
        "add_write_notification_log_in_batch": Route(BY_DATABASE, WRITES, "rqst"),
        "aliveSince": Route(PRIMARY, NO_WRITES),
        "allocate_table_write_ids": Route(PER_OWNER, WRITES, "rqst"),
        "alter_catalog": Route(PRIMARY, WRITES),
        "alter_database": Route(BY_DATABASE, WRITES, "dbname", "db"),
        "alter_dataconnector": Route(PRIMARY, WRITES),
        "alter_function": Route(BY_DATABASE, WRITES, "dbName", "newFunc"),
        "alter_ischema": Route(BY_DATABASE, WRITES, "rqst"),
        "alter_partition": Route(BY_DATABASE, WRITES, "db_name", "new_part"),
        "alter_partition_with_environment_context": Route(BY_DATABASE, WRITES, "db_name", "new_part"),
        "alter_partitions": Route(BY_DATABASE, WRITES, "db_name", "new_parts"),
        "alter_partitions_req": Route(BY_DATABASE, WRITES, "req"),
        "alter_partitions_with_environment_context": Route(BY_DATABASE, WRITES, "db_name", "new_parts"),
        "alter_resource_plan": Route(PRIMARY, WRITES),
        "alter_table": Route(BY_DATABASE, WRITES, "dbname", "new_tbl"),
        "alter_table_req": Route(BY_DATABASE, WRITES, "req"),
        "alter_table_with_cascade": Route(BY_DATABASE, WRITES, "dbname", "new_tbl"),
        "alter_table_with_environment_context": Route(BY_DATABASE, WRITES, "dbname", "new_tbl"),
        "alter_wm_pool": Route(PRIMARY, WRITES),
        "alter_wm_trigger": Route(PRIMARY, WRITES),
        "append_partition": Route(BY_DATABASE, WRITES, "db_name"),
        "append_partition_by_name": Route(BY_DATABASE, WRITES, "db_name"),
        "append_partition_by_name_with_environment_context": Route(BY_DATABASE, WRITES, "db_name"),
        "append_partition_with_environment_context": Route(BY_DATABASE, WRITES, "db_name"),
        "cache_file_metadata": Route(BY_DATABASE, WRITES, "req"),
        "cancel_delegation_token": Route(PRIMARY, WRITES),
        "check_lock": Route(PER_OWNER, NO_WRITES),
        "clear_file_metadata": Route(PRIMARY, WRITES),
        "cm_recycle": Route(PRIMARY, WRITES),
        "commit_txn": Route(PER_OWNER, NO_WRITES, "rqst"),
        "compact": Route(BY_DATABASE, WRITES, "rqst"),
        "compact2": Route(BY_DATABASE, WRITES, "rqst"),
        "create_catalog": Route(PRIMARY, WRITES),
        "create_database": Route(REMOTE_LINK, WRITES, "database"),
        "create_dataconnector": Route(PRIMARY, WRITES),
        "create_function": Route(BY_DATABASE, WRITES, "func"),
        "create_ischema": Route(BY_DATABASE, WRITES, "schema"),
        "create_or_drop_wm_trigger_to_pool_mapping": Route(PRIMARY, WRITES),
        "create_or_update_wm_mapping": Route(PRIMARY, WRITES),
        "create_resource_plan": Route(PRIMARY, WRITES),
        "create_role": Route(PRIMARY, WRITES),
        "create_stored_procedure": Route(BY_DATABASE, WRITES, "proc"),
        "create_table": Route(REMOTE_LINK, WRITES, "tbl"),
        "create_table_req": Route(REMOTE_LINK, WRITES, "request"),
        "create_table_with_constraints": Route(
            REMOTE_LINK,
            WRITES,
            "tbl",
            "primaryKeys",
            "foreignKeys",
            "uniqueConstraints",
            "notNullConstraints",
            "defaultConstraints",
            "checkConstraints",
        ),
        "create_table_with_environment_context": Route(REMOTE_LINK, WRITES, "tbl"),
        "create_type": Route(PRIMARY, WRITES),
        "create_wm_pool": Route(PRIMARY, WRITES),
        "create_wm_trigger": Route(PRIMARY, WRITES),
        "delete_partition_column_statistics": Route(BY_DATABASE, WRITES, "db_name"),
        "delete_table_column_statistics": Route(BY_DATABASE, WRITES, "db_name"),
        "drop_catalog": Route(PRIMARY, WRITES),
        "drop_constraint": Route(BY_DATABASE, WRITES, "req"),
        "drop_database": Route(REMOTE_LINK, WRITES, "name"),
        "drop_database_req": Route(REMOTE_LINK, WRITES, "req"),
        "drop_dataconnector": Route(PRIMARY, WRITES),
        "drop_function": Route(BY_DATABASE, WRITES, "dbName"),
        "drop_ischema": Route(BY_DATABASE, WRITES, "name"),
        "drop_package": Route(BY_DATABASE, WRITES, "request"),
        "drop_partition": Route(BY_DATABASE, WRITES, "db_name"),
        "drop_partition_by_name": Route(BY_DATABASE, WRITES, "db_name"),
        "drop_partition_by_name_with_environment_context": Route(BY_DATABASE, WRITES, "db_name"),
        "drop_partition_with_environment_context": Route(BY_DATABASE, WRITES, "db_name"),
        "drop_partitions_req": Route(BY_DATABASE, WRITES, "req"),
        "drop_resource_plan": Route(PRIMARY, WRITES),
        "drop_role": Route(PRIMARY, WRITES),
        "drop_schema_version": Route(BY_DATABASE, WRITES, "schemaVersion"),
        "drop_stored_procedure": Route(BY_DATABASE, WRITES, "request"),
        "drop_table": Route(REMOTE_LINK, WRITES, "dbname"),
        "drop_table_with_environment_context": Route(REMOTE_LINK, WRITES, "dbname"),
        "drop_type": Route(PRIMARY, WRITES),
        "drop_wm_mapping": Route(PRIMARY, WRITES),
        "drop_wm_pool": Route(PRIMARY, WRITES),
        "drop_wm_trigger": Route(PRIMARY, WRITES),
        "exchange_partition": Route(BY_DATABASE, WRITES, "source_db", "dest_db"),
        "exchange_partitions": Route(BY_DATABASE, WRITES, "source_db", "dest_db"),
        "find_columns_with_stats": Route(BY_DATABASE, NO_WRITES, "cr"),
        "find_next_compact": Route(PRIMARY, NO_WRITES),
        "find_next_compact2": Route(PRIMARY, NO_WRITES),
        "find_package": Route(BY_DATABASE, NO_WRITES, "request"),
        "fire_listener_event": Route(BY_DATABASE, WRITES, "rqst"),
        "flushCache": Route(PRIMARY, NO_WRITES),
        "getCounter": Route(PRIMARY, WRITES),
        "getCounters": Route(PRIMARY, NO_WRITES),
        "getCpuProfile": Route(PRIMARY, WRITES),
        "getMetaConf": Route(PRIMARY, WRITES),
        "getName": Route(PRIMARY, NO_WRITES),
        "getOption": Route(PRIMARY, WRITES),
        "getOptions": Route(PRIMARY, WRITES),
        "getStatus": Route(PRIMARY, NO_WRITES),
        "getStatusDetails": Route(PRIMARY, NO_WRITES),
        "getVersion": Route(PRIMARY, NO_WRITES),
        "get_active_resource_plan": Route(PRIMARY, NO_WRITES),
        "get_aggr_stats_for": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_all_databases": Route(MERGED, NO_WRITES),
        "get_all_functions": Route(MERGED, NO_WRITES),
        "get_all_materialized_view_objects_for_rewriting": Route(PRIMARY, NO_WRITES),
        "get_all_packages": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_all_resource_plans": Route(PRIMARY, NO_WRITES),
        "get_all_stored_procedures": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_all_table_constraints": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_all_tables": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_all_token_identifiers": Route(PRIMARY, NO_WRITES),
        "get_all_write_event_info": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_catalog": Route(PRIMARY, NO_WRITES),
        "get_catalogs": Route(PRIMARY, NO_WRITES),
        "get_check_constraints": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_config_value": Route(PRIMARY, NO_WRITES),
        "get_current_notificationEventId": Route(PRIMARY, NO_WRITES),
        "get_database": Route(BY_DATABASE, NO_WRITES, "name"),
        "get_database_req": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_databases": Route(MERGED, NO_WRITES),
        "get_dataconnector_req": Route(PRIMARY, NO_WRITES),
        "get_dataconnectors": Route(PRIMARY, NO_WRITES),
        "get_default_constraints": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_delegation_token": Route(PRIMARY, NO_WRITES),
        "get_fields": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_fields_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_fields_with_environment_context": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_file_metadata": Route(PRIMARY, NO_WRITES),
        "get_file_metadata_by_expr": Route(PRIMARY, NO_WRITES),
        "get_foreign_keys": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_function": Route(BY_DATABASE, NO_WRITES, "dbName"),
        "get_functions": Route(BY_DATABASE, NO_WRITES, "dbName"),
        "get_ischema": Route(BY_DATABASE, NO_WRITES, "name"),
        "get_latest_committed_compaction_info": Route(BY_DATABASE, NO_WRITES, "rqst"),
        "get_latest_txnid_in_conflict": Route(PRIMARY, NO_WRITES),
        "get_lock_materialization_rebuild": Route(BY_DATABASE, NO_WRITES, "dbName"),
        "get_master_keys": Route(PRIMARY, NO_WRITES),
        "get_materialization_invalidation_info": Route(BY_DATABASE, NO_WRITES, "creation_metadata"),
        "get_materialized_views_for_rewriting": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_max_allocated_table_write_id": Route(BY_DATABASE, NO_WRITES, "rqst"),
        "get_metastore_db_uuid": Route(PRIMARY, NO_WRITES),
        "get_next_notification": Route(BY_DATABASE, NO_WRITES, "rqst"),
        "get_not_null_constraints": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_notification_events_count": Route(BY_DATABASE, NO_WRITES, "rqst"),
        "get_num_partitions_by_filter": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_open_txns": Route(PRIMARY, NO_WRITES),
        "get_open_txns_info": Route(PRIMARY, NO_WRITES),
        "get_open_txns_req": Route(PRIMARY, NO_WRITES),
        "get_part_specs_by_filter": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition_by_name": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition_column_statistics": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition_names": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition_names_ps": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partition_names_ps_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partition_names_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partition_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partition_values": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_partition_with_auth": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_by_expr": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partitions_by_filter": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_by_names": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_by_names_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partitions_ps": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_ps_with_auth": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_ps_with_auth_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partitions_pspec": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partitions_spec_by_expr": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_partitions_statistics_req": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_partitions_with_auth": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_partitions_with_specs": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_primary_keys": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_principals_in_role": Route(PRIMARY, NO_WRITES),
        "get_privilege_set": Route(BY_DATABASE, NO_WRITES, "hiveObject"),
        "get_replication_metrics": Route(PRIMARY, NO_WRITES),
        "get_resource_plan": Route(PRIMARY, NO_WRITES),
        "get_role_grants_for_principal": Route(PRIMARY, NO_WRITES),
        "get_role_names": Route(PRIMARY, NO_WRITES),
        "get_runtime_stats": Route(PRIMARY, NO_WRITES),
        "get_scheduled_query": Route(PRIMARY, NO_WRITES),
        "get_schema": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_schema_all_versions": Route(BY_DATABASE, NO_WRITES, "schemaName"),
        "get_schema_latest_version": Route(BY_DATABASE, NO_WRITES, "schemaName"),
        "get_schema_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_schema_version": Route(BY_DATABASE, NO_WRITES, "schemaVersion"),
        "get_schema_with_environment_context": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_schemas_by_cols": Route(PRIMARY, NO_WRITES),
        "get_serde": Route(PRIMARY, NO_WRITES),
        "get_stored_procedure": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_table": Route(BY_DATABASE, NO_WRITES, "dbname"),
        "get_table_column_statistics": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_table_meta": Route(MERGED, NO_WRITES),
        "get_table_names_by_filter": Route(BY_DATABASE, NO_WRITES, "dbname"),
        "get_table_objects_by_name": Route(BY_DATABASE, NO_WRITES, "dbname"),
        "get_table_objects_by_name_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_table_req": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_table_statistics_req": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_tables": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_tables_by_type": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "get_tables_ext": Route(BY_DATABASE, NO_WRITES, "req"),
        "get_token": Route(PRIMARY, NO_WRITES),
        "get_triggers_for_resourceplan": Route(PRIMARY, NO_WRITES),
        "get_type": Route(PRIMARY, NO_WRITES),
        "get_type_all": Route(PRIMARY, NO_WRITES),
        "get_unique_constraints": Route(BY_DATABASE, NO_WRITES, "request"),
        "get_valid_write_ids": Route(PER_OWNER, NO_WRITES, "rqst"),
        "grant_privileges": Route(BY_DATABASE, WRITES, "privileges"),
        "grant_revoke_privileges": Route(BY_DATABASE, WRITES, "request"),
        "grant_revoke_role": Route(PRIMARY, WRITES),
        "grant_role": Route(PRIMARY, WRITES),
        "heartbeat": Route(PER_OWNER, NO_WRITES),
        "heartbeat_lock_materialization_rebuild": Route(BY_DATABASE, WRITES, "dbName"),
        "heartbeat_txn_range": Route(PER_OWNER, NO_WRITES),
        "isPartitionMarkedForEvent": Route(BY_DATABASE, NO_WRITES, "db_name"),
        "list_privileges": Route(BY_DATABASE, NO_WRITES, "hiveObject"),
        "list_roles": Route(PRIMARY, NO_WRITES),
        "lock": Route(PER_OWNER, NO_WRITES, "rqst"),
        "map_schema_version_to_serde": Route(BY_DATABASE, WRITES, "rqst"),
        "markPartitionForEvent": Route(BY_DATABASE, WRITES, "db_name"),
        "mark_cleaned": Route(BY_DATABASE, WRITES, "cr"),
        "mark_compacted": Route(BY_DATABASE, WRITES, "cr"),
        "mark_failed": Route(BY_DATABASE, WRITES, "cr"),
        "mark_refused": Route(BY_DATABASE, WRITES, "cr"),
        "open_txns": Route(PER_OWNER, NO_WRITES),
        "partition_name_has_valid_characters": Route(PRIMARY, NO_WRITES),
        "partition_name_to_spec": Route(PRIMARY, NO_WRITES),
        "partition_name_to_vals": Route(PRIMARY, NO_WRITES),
        "put_file_metadata": Route(PRIMARY, WRITES),
        "refresh_privileges": Route(BY_DATABASE, WRITES, "objToRefresh", "grantRequest"),
        "reinitialize": Route(PRIMARY, WRITES),
        "remove_compaction_metrics_data": Route(BY_DATABASE, WRITES, "request"),
        "remove_master_key": Route(PRIMARY, WRITES),
        "remove_token": Route(PRIMARY, WRITES),
        "rename_partition": Route(BY_DATABASE, WRITES, "db_name", "new_part"),
        "rename_partition_req": Route(BY_DATABASE, WRITES, "req"),
        "renew_delegation_token": Route(PRIMARY, WRITES),
        "repl_tbl_writeid_state": Route(BY_DATABASE, WRITES, "rqst"),
        "revoke_privileges": Route(BY_DATABASE, WRITES, "privileges"),
        "revoke_role": Route(PRIMARY, WRITES),
        "scheduled_query_maintenance": Route(PRIMARY, WRITES),
        "scheduled_query_poll": Route(PRIMARY, WRITES),
        "scheduled_query_progress": Route(PRIMARY, WRITES),
        "seed_txn_id": Route(PRIMARY, WRITES),
        "seed_write_id": Route(BY_DATABASE, WRITES, "rqst"),
        "setMetaConf": Route(PRIMARY, WRITES),
        "setOption": Route(PRIMARY, WRITES),
        "set_aggr_stats_for": Route(BY_DATABASE, WRITES, "request"),
        "set_hadoop_jobid": Route(PRIMARY, WRITES),
        "set_schema_version_state": Route(BY_DATABASE, WRITES, "rqst"),
        "set_ugi": Route(MERGED, NO_WRITES),
        "show_compact": Route(PRIMARY, NO_WRITES),
        "show_locks": Route(BY_DATABASE, NO_WRITES, "rqst"),
        "shutdown": Route(PRIMARY, WRITES),
        "translate_table_dryrun": Route(BY_DATABASE, WRITES, "request"),
        "truncate_table": Route(BY_DATABASE, WRITES, "dbName"),
        "truncate_table_req": Route(BY_DATABASE, WRITES, "req"),
        "unlock": Route(PER_OWNER, NO_WRITES),
        "update_compaction_metrics_data": Route(BY_DATABASE, WRITES, "data"),
        "update_compactor_state": Route(BY_DATABASE, WRITES, "cr"),
        "update_creation_metadata": Route(BY_DATABASE, WRITES, "dbname", "creation_metadata"),
        "update_master_key": Route(PRIMARY, WRITES),
        "update_partition_column_statistics": Route(BY_DATABASE, WRITES, "stats_obj"),
        "update_partition_column_statistics_req": Route(BY_DATABASE, WRITES, "req"),
        "update_table_column_statistics": Route(BY_DATABASE, WRITES, "stats_obj"),
        "update_table_column_statistics_req": Route(BY_DATABASE, WRITES, "req"),
        "update_transaction_statistics": Route(PRIMARY, WRITES),
        "validate_resource_plan": Route(PRIMARY, WRITES),
    }
)
"""HMS method -> :class:`Route`, for every method of the HMS interface (Hive 4 IDL, fb303 included)."""


def route_of(method: str) -> Route:
    """The row of ``method``; raises KeyError for a name that is not an HMS method."""
    return ROUTES[method]


def methods_of(strategy: Strategy) -> frozenset[str]:
    """The methods answered with ``strategy``."""
    return frozenset(m for m, r in ROUTES.items() if r.strategy is strategy)
