"""Hive 3/4 request-struct forms of calls whose plain forms the other mixins implement.

Each method unpacks its request (``catName`` becomes the ``@cat#db`` form), calls the plain method
and wraps the answer in the response struct the IDL declares, as the table of request forms
(:data:`hivemesh.hive.hms_methods.REQUEST_FORMS`) says. ``validWriteIdList`` and ``id``
fields are accepted and ignored until snapshot-aware reads exist.
"""

from __future__ import annotations

from typing import Any

from hive_metastore.ttypes import (
    GetFieldsResponse,
    GetPartitionNamesPsResponse,
    GetPartitionResponse,
    GetPartitionsPsWithAuthResponse,
    GetSchemaResponse,
    MetaException,
    Partition,
    RenamePartitionResponse,
    SetPartitionsStatsResponse,
)

from hivemesh.hive.hms_methods import REQUEST_FORMS
from hivemesh.hive.names import split_part_name


def _plain(handler: Any, method: str, req: Any) -> Any:
    """Answer request-form ``method`` by the plain call it stands for (:data:`REQUEST_FORMS`)."""
    form = REQUEST_FORMS[method]
    return form.wrap(getattr(handler, form.plain)(*form.plain_args(req, with_catalog=True)))


class RequestFormsMixin:
    """``*_req`` variants and a few small calls of the HMS interface."""

    def get_fields_req(self, req: Any) -> GetFieldsResponse:
        """GetFieldsRequest -> GetFieldsResponse(fields)."""
        return _plain(self, "get_fields_req", req)

    def get_schema_req(self, req: Any) -> GetSchemaResponse:
        """GetSchemaRequest -> GetSchemaResponse(fields): data columns then partition keys."""
        return _plain(self, "get_schema_req", req)

    def get_partition_req(self, req: Any) -> GetPartitionResponse:
        """GetPartitionRequest -> GetPartitionResponse(partition); NoSuchObjectException."""
        return _plain(self, "get_partition_req", req)

    def get_partition_names_ps_req(self, req: Any) -> GetPartitionNamesPsResponse:
        """GetPartitionNamesPsRequest -> names matching a partial specification."""
        return _plain(self, "get_partition_names_ps_req", req)

    def get_partitions_ps_with_auth_req(self, req: Any) -> GetPartitionsPsWithAuthResponse:
        """GetPartitionsPsWithAuthRequest -> partitions matching a partial specification."""
        return _plain(self, "get_partitions_ps_with_auth_req", req)

    def rename_partition_req(self, req: Any) -> RenamePartitionResponse:
        """RenamePartitionRequest form of ``rename_partition``."""
        return _plain(self, "rename_partition_req", req)

    def update_partition_column_statistics_req(self, req: Any) -> SetPartitionsStatsResponse:
        """SetPartitionsStatsRequest of partition statistics."""
        return SetPartitionsStatsResponse(result=self.set_aggr_stats_for(req))  # type: ignore[attr-defined]

    def update_table_column_statistics_req(self, req: Any) -> SetPartitionsStatsResponse:
        """SetPartitionsStatsRequest of table statistics."""
        return SetPartitionsStatsResponse(result=self.set_aggr_stats_for(req))  # type: ignore[attr-defined]

    def append_partition_with_environment_context(
        self, db_name: str, tbl_name: str, part_vals: list[str], environment_context: Any
    ) -> Partition:  # noqa: E501
        """``append_partition``."""
        return self.append_partition(db_name, tbl_name, part_vals)  # type: ignore[attr-defined]

    def append_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Partition:
        """Add a partition given by name ``k=v/...`` at its default location."""
        try:
            values = [v for _, v in split_part_name(part_name)]
        except ValueError as e:
            raise MetaException(str(e)) from e
        return self.append_partition(db_name, tbl_name, values)  # type: ignore[attr-defined]

    def append_partition_by_name_with_environment_context(
        self, db_name: str, tbl_name: str, part_name: str, environment_context: Any
    ) -> Partition:  # noqa: E501
        """``append_partition_by_name``."""
        return self.append_partition_by_name(db_name, tbl_name, part_name)

    def partition_name_has_valid_characters(self, part_vals: list[str], throw_exception: bool) -> bool:
        """True: hivemesh sets no ``hive.metastore.partition.name.whitelist.pattern``."""
        return True
