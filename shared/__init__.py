"""deltaextras: Delta Lake maintenance that gives every value of a column its own Parquet row group.

Example:
    >>> from deltaextras import rorder, rorder_setup_multi, rorder_single
    >>> callable(rorder) and callable(rorder_single) and callable(rorder_setup_multi)
    True
"""

from __future__ import annotations

from .app.spark import rorder_spark
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
from .ops.delete import DeleteReport, delete
from .ops.message import RorderMessage
from .ops.options import RorderOptions
from .ops.plan import TablePlan, plan_table
from .ops.pool import RunInterrupted
from .ops.ranges import RangeAppender, RangeSpec, add_range, append_ranged, create_range_table, read_range_spec
from .ops.report import PartitionReport, RorderReport
from .ops.rorder import plan_messages, rorder, rorder_setup_multi, rorder_single
from .ops.upgrade import enable_deletion_vectors
from .ops.vacuum import VacuumReport, vacuum, vacuum_deletion_vectors
from .version import __version__

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
