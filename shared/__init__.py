"""deltaextras: Delta Lake maintenance that gives every value of a column its own Parquet row group.

Example:
    >>> from deltaextras import rorder, rorder_setup_multi, rorder_single
    >>> callable(rorder) and callable(rorder_single) and callable(rorder_setup_multi)
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    AccessDeniedError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    CommitRetriesExhaustedError,
    ConcurrentAppendError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    CorruptDataError,
    DeltaExtrasError,
    DuplicateKeyError,
    InvalidArgumentError,
    MessageError,
    MetadataChangedError,
    PartitionNotFoundError,
    PartitionsFailedError,
    ProtocolChangedError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
    is_retryable,
)
from .version import __version__

# The public names below are imported on first use (PEP 562), so that `from deltaextras import rorder`
# loads the rewrite and not the delete, vacuum, ranges and Spark modules as well: a worker process
# starts faster.
_LAZY = {
    "rorder_spark": ".app.spark",
    "DeleteReport": ".ops.delete.delete",
    "delete": ".ops.delete.delete",
    "RorderMessage": ".ops.rorder.message",
    "RorderOptions": ".ops.rorder.options",
    "TablePlan": ".ops.rorder.plan",
    "plan_table": ".ops.rorder.plan",
    "RunInterrupted": ".ops.rorder.pool",
    "RangeAppender": ".ops.ranges.ranges",
    "RangeSpec": ".ops.ranges.ranges",
    "add_range": ".ops.ranges.ranges",
    "append_ranged": ".ops.ranges.ranges",
    "create_range_table": ".ops.ranges.ranges",
    "read_range_spec": ".ops.ranges.ranges",
    "PartitionReport": ".ops.rorder.report",
    "RorderReport": ".ops.rorder.report",
    "plan_messages": ".ops.rorder.rorder",
    "rorder": ".ops.rorder.rorder",
    "rorder_setup_multi": ".ops.rorder.rorder",
    "rorder_single": ".ops.rorder.rorder",
    "enable_deletion_vectors": ".ops.maintenance.upgrade",
    "VacuumReport": ".ops.maintenance.vacuum",
    "vacuum": ".ops.maintenance.vacuum",
    "vacuum_deletion_vectors": ".ops.maintenance.vacuum",
}

if TYPE_CHECKING:
    from .app.spark import rorder_spark
    from .ops.delete.delete import DeleteReport, delete
    from .ops.maintenance.upgrade import enable_deletion_vectors
    from .ops.maintenance.vacuum import VacuumReport, vacuum, vacuum_deletion_vectors
    from .ops.ranges.ranges import (
        RangeAppender,
        RangeSpec,
        add_range,
        append_ranged,
        create_range_table,
        read_range_spec,
    )
    from .ops.rorder.message import RorderMessage
    from .ops.rorder.options import RorderOptions
    from .ops.rorder.plan import TablePlan, plan_table
    from .ops.rorder.pool import RunInterrupted
    from .ops.rorder.report import PartitionReport, RorderReport
    from .ops.rorder.rorder import plan_messages, rorder, rorder_setup_multi, rorder_single


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deltaextras' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "AccessDeniedError",
    "CommitConflictError",
    "CommitOutcomeUnknownError",
    "CommitRetriesExhaustedError",
    "ConcurrentAppendError",
    "ConcurrentDeleteReadError",
    "ConcurrentTransactionError",
    "CorruptDataError",
    "DeleteReport",
    "DeltaExtrasError",
    "DuplicateKeyError",
    "InvalidArgumentError",
    "MessageError",
    "MetadataChangedError",
    "PartitionNotFoundError",
    "PartitionReport",
    "PartitionsFailedError",
    "ProtocolChangedError",
    "RangeAppender",
    "RangeSpec",
    "RorderMessage",
    "RorderOptions",
    "RorderReport",
    "RunInterrupted",
    "StorageError",
    "TableNotFoundError",
    "TablePlan",
    "UnsupportedFeatureError",
    "VacuumReport",
    "__version__",
    "add_range",
    "append_ranged",
    "create_range_table",
    "delete",
    "enable_deletion_vectors",
    "is_retryable",
    "plan_messages",
    "plan_table",
    "read_range_spec",
    "rorder",
    "rorder_setup_multi",
    "rorder_single",
    "rorder_spark",
    "vacuum",
    "vacuum_deletion_vectors",
]
