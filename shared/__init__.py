"""deltaextras: Delta Lake maintenance that gives every value of a column its own Parquet row group.

Example:
    >>> from deltaextras import rorder, rorder_setup_multi, rorder_single
    >>> callable(rorder) and callable(rorder_single) and callable(rorder_setup_multi)
    True
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (  # noqa: E402
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
from .message import RorderMessage  # noqa: E402
from .options import RorderOptions  # noqa: E402
from .plan import TablePlan, plan_table  # noqa: E402
from .report import PartitionReport, RorderReport  # noqa: E402
from .rorder import plan_messages, rorder, rorder_setup_multi, rorder_single  # noqa: E402

__all__ = [
    "AccessDeniedError",
    "CommitConflictError",
    "CommitRetriesExhaustedError",
    "CorruptDataError",
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
    "__version__",
    "is_retryable",
    "plan_messages",
    "plan_table",
    "rorder",
    "rorder_setup_multi",
    "rorder_single",
]
