"""The log actions of one unit's rewrite: its ``commitInfo`` (``OPTIMIZE``, or ``DELETE`` when duplicates were
dropped, with Spark's operation parameters and metrics), its ``txn``, the inputs retired and the outputs
added, marked ``clusteringProvider`` on a clustered table.

Example:
    >>> from deltaextras.ops.rorder.message import RorderMessage
    >>> from deltaextras.ops.rorder.rewrite.rewrite import RewriteResult
    >>> msg = RorderMessage.from_dict({"path": "/t", "partition_value": 3})
    >>> info = commit_info("k_range", "k", msg, [], [], [], RewriteResult())
    >>> info.operation, info.operation_parameters["predicate"]
    ('OPTIMIZE', '["k_range = 3"]')
    >>> class Snap:  # a snapshot at version 4
    ...     version = 4
    >>> [type(a).__name__ for a in unit_actions(Snap(), "app", [], [], [], RewriteResult(), info)]
    ['CommitInfo', 'Txn']
"""

from __future__ import annotations

import json
from typing import Any

from ....core.actions import Action, Cdc, CommitInfo, add_of, now_ms
from ....core.snapshot import LiveFile, TableSnapshot
from ....core.transaction import txn_action
from ..message import RorderMessage
from ..rewrite.rewrite import OutputFile, RewriteResult

# ``clusteringProvider`` of our outputs on a clustered table: the clustering implementation that wrote them.
# Spark's OPTIMIZE (not FULL) re-clusters only files without a provider or with its own ("liquid"), so it
# leaves these alone; OPTIMIZE FULL re-clusters them as it does every file.
CLUSTERING_PROVIDER = "deltaextras"


def unit_actions(
    snap: TableSnapshot,
    app_id: str,
    files: list[LiveFile],
    outputs: list[OutputFile],
    changes: list[Cdc],
    result: RewriteResult,
    info: CommitInfo,
    *,
    clustered: bool = False,
) -> list[Action]:
    """The rewrite's log actions: commit info, the unit's ``txn``, inputs retired, outputs added (marked as
    clustered when the table is clustered by the row-group column: the rewrite clustered them)."""
    ts = info.timestamp or now_ms()
    data_change = result.duplicates_removed > 0
    return [
        info,
        txn_action(app_id, snap.version, ts),
        *(f.add.retire(ts, data_change=data_change) for f in files),
        *(_clustered(add_of(o, o.partition_values, ts, data_change=data_change), clustered) for o in outputs),
        *changes,
    ]


def commit_info(
    unit: str | None,
    by: str,
    msg: RorderMessage,
    files: list[LiveFile],
    outputs: list[OutputFile],
    changes: list[Cdc],
    result: RewriteResult,
) -> CommitInfo:
    """The ``commitInfo`` of a rewrite: ``OPTIMIZE``, or ``DELETE`` when duplicates were dropped."""
    data_change = result.duplicates_removed > 0
    metrics = {
        "numRemovedFiles": len(files),
        "numAddedFiles": len(outputs),
        "numRemovedBytes": sum(f.size for f in files),
        "numAddedBytes": sum(o.size for o in outputs),
        "numDeletionVectorsRemoved": sum(1 for f in files if f.dv),
        "numDeletedRowsPurged": result.deleted_rows_dropped,
        "numDuplicateRowsRemoved": result.duplicates_removed,
        "numOutputRows": result.rows_out,
        "numOutputRowGroups": sum(o.row_groups for o in outputs),
        "numDeletedRows": result.duplicates_removed,
        "numAddedChangeFiles": len(changes),
    }
    return CommitInfo(
        timestamp=now_ms(),
        operation="DELETE" if data_change else "OPTIMIZE",
        operation_parameters=_string_values(
            {
                "predicate": _scope(unit, msg, by, data_change),
                "rorderBy": by,
                "sortBy": [list(p) for p in msg.options.sort_by],
                "uniqueBy": list(msg.options.unique_by),
                "targetFileSize": msg.options.target_file_size,
                "layout": msg.options.layout,
            }
        ),
        is_blind_append=False,
        operation_metrics={k: str(v) for k, v in metrics.items()},
    )


def _string_values(parameters: dict[str, Any]) -> dict[str, str]:
    """``operationParameters`` as Spark writes them: JSON text for anything but strings."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in parameters.items()}


def _scope(unit: str | None, msg: RorderMessage, by: str, data_change: bool) -> list[str]:
    """The ``predicate`` of the commit: the partition rewritten; for a commit that dropped duplicates
    (a ``DELETE``), which rows it deleted.

    Example:
        >>> m = RorderMessage.from_dict({"path": "/t", "partition_value": 3, "unique_by": ["utc_time"]})
        >>> _scope("k_range", m, "k", True)
        ['rows repeating (k, utc_time) within k_range = 3']
    """
    where = f"{unit} = {msg.partition_value}" if unit else ""
    if msg.value_range is not None:
        where = msg.value_range.predicate
    if not data_change:
        return [where] if where else []
    keys = ", ".join(dict.fromkeys([by, *msg.options.unique_by]))
    return [f"rows repeating ({keys})" + (f" within {where}" if where else "")]


def _clustered(add: Any, clustered: bool) -> Any:
    """An output ``add`` marked as clustered, as Spark's OPTIMIZE marks its own (``clusteringProvider``), under
    our provider name so that Spark's incremental clustering leaves it alone; only files this rewrite
    clustered are marked."""
    if clustered:
        add.extra["clusteringProvider"] = CLUSTERING_PROVIDER
    return add


__all__ = ["CLUSTERING_PROVIDER", "commit_info", "unit_actions"]
