"""Every rorder report says how its commit ended, as the core's typed outcome names it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from deltaextras import plan_messages, rorder, rorder_single
from deltaextras.core.commit_result import CommitOutcome


def test_reports_carry_the_commit_outcome(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for batch in range(2):
        write_deltalake(
            path,
            pa.table({"node_id": [2, 1, 3], "node_id_range": [0, 0, 0], "b": [batch] * 3}),
            partition_by=["node_id_range"],
            mode="append",
        )
    (message,) = plan_messages(path)
    first = rorder_single(message)
    assert (first.status, first.commit_outcome) == ("committed", CommitOutcome.COMMITTED.value)
    again = rorder_single(message)  # the same message delivered twice: the work is in the log already
    assert (again.status, again.commit_outcome) == ("skipped", CommitOutcome.ALREADY_DONE.value)
    (planned,) = rorder(path, max_workers=1)  # a new plan finds the partition in layout
    assert (planned.status, planned.commit_outcome) == ("skipped", CommitOutcome.NOTHING_TO_DO.value)
