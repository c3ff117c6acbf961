"""Names of the orchestrator's former lean planner, kept for callers of earlier releases: every caller now
plans with :func:`deltaextras.ops.rorder.plan.plan_units`, whose streaming scan is :mod:`deltaextras.ops.rorder.tally`.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp()
    >>> for r in (0, 1):
    ...     write_deltalake(path, pa.table({"node_id": [r * 10, r * 10 + 1], "node_id_range": [r, r]}),
    ...                     partition_by=["node_id_range"], mode="append")
    >>> plan = plan_table_lean(path)
    >>> plan.partition_name, plan.by, [(p.partition_value, p.file_count) for p in plan.to_rewrite()]
    ('node_id_range', 'node_id', [('0', 1), ('1', 1)])
    >>> [len(m.files) for m in plan.messages()]
    [1, 1]
"""

from __future__ import annotations

from .plan import TablePlan, Unit, plan_units
from .tally import Tally, _tail_arrow, _tail_python, tally_partitions

LeanPlan = TablePlan
PartitionSummary = Unit
plan_table_lean = plan_units

__all__ = [
    "LeanPlan",
    "PartitionSummary",
    "Tally",
    "_tail_arrow",
    "_tail_python",
    "plan_table_lean",
    "tally_partitions",
]
