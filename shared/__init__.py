"""deltaextras: Delta Lake maintenance that gives every value of a column its own Parquet row group.

Example:
    >>> from deltaextras import rorder, rorder_setup_multi, rorder_single
    >>> callable(rorder) and callable(rorder_single) and callable(rorder_setup_multi)
    True
"""

from __future__ import annotations

__version__ = "0.1.0"

from .delete import DeleteReport, delete
from .errors import (
    AccessDeniedError,
    CommitConflictError,
    CommitRetriesExhaustedError,
    CorruptDataError,
    DeltaExtrasError,
    DuplicateKeyError,
    InvalidArgumentError,
    MessageError,
    PartitionNotFoundError,
    PartitionsFailedError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
    is_retryable,
)
from .message import RorderMessage
from .options import RorderOptions
from .plan import TablePlan, plan_table
from .report import PartitionReport, RorderReport
from .rorder import plan_messages, rorder, rorder_setup_multi, rorder_single
from .upgrade import enable_deletion_vectors
from .vacuum import VacuumReport, vacuum, vacuum_deletion_vectors

__all__ = [
    "AccessDeniedError",
    "CommitConflictError",
    "CommitRetriesExhaustedError",
    "CorruptDataError",
    "DeleteReport",
    "DeltaExtrasError",
    "DuplicateKeyError",
    "InvalidArgumentError",
    "MessageError",
    "PartitionNotFoundError",
    "PartitionReport",
    "PartitionsFailedError",
    "RorderMessage",
    "RorderOptions",
    "RorderReport",
    "StorageError",
    "TableNotFoundError",
    "TablePlan",
    "UnsupportedFeatureError",
    "VacuumReport",
    "__version__",
    "delete",
    "enable_deletion_vectors",
    "is_retryable",
    "plan_messages",
    "plan_table",
    "rorder",
    "rorder_setup_multi",
    "rorder_single",
    "vacuum",
    "vacuum_deletion_vectors",
]
