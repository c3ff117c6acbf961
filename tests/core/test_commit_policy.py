"""The commit loop's limits (core.commit_policy): losing many races in a row is no failure while the
time budget lasts, each winner is read once, and the budget, not a count, ends a hopeless commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaextras.core.actions import CommitInfo, decode_commit, encode_commit
from deltaextras.core.commit_policy import CommitPolicy
from deltaextras.core.commit_result import CommitOutcome
from deltaextras.core.conflicts import IsolationLevel, ReadSet
from deltaextras.core.log import commit_key
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.transaction import Transaction
from deltaextras.errors import CommitRetriesExhaustedError

FAST = CommitPolicy(backoff_first=0.0001, backoff_max=0.001)


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1]}))
    return path


def _racer(snap: TableSnapshot, wins: int) -> tuple[list[int], object]:
    """A ``before_put`` hook: another writer takes the version we are about to try, ``wins`` times."""
    taken: list[int] = []

    def before_put(version: int) -> None:
        if len(taken) < wins:
            info = CommitInfo(timestamp=1, operation="WRITE", is_blind_append=True, txn_id=f"other-{version}")
            assert snap.storage.put_if_absent(commit_key(version), encode_commit([info]))
            taken.append(version)

    return taken, before_put


def test_a_hundred_lost_races_in_a_row_still_commit_and_read_each_winner_once(tmp_path: Path) -> None:
    path = _table(tmp_path)
    snap = TableSnapshot.load(path, cross_check=False)
    taken, before_put = _racer(snap, 100)
    txn = Transaction(snap, "WRITE", IsolationLevel.WRITE_SERIALIZABLE, ReadSet(), before_put=before_put, policy=FAST)
    result = txn.commit(lambda _v: [CommitInfo(operation="WRITE")])
    assert result.outcome is CommitOutcome.COMMITTED and result.version == 101 and len(taken) == 100
    assert result.winners_checked == 100, "a winner was read more than once"
    assert result.attempts == 101
    assert DeltaTable(path).version() == 101


def test_the_time_budget_ends_a_commit_that_keeps_losing(tmp_path: Path) -> None:
    path = _table(tmp_path)
    snap = TableSnapshot.load(path, cross_check=False)
    _taken, before_put = _racer(snap, 10**6)
    policy = CommitPolicy(time_budget=0.3, backoff_first=0.001, backoff_max=0.01)
    txn = Transaction(snap, "WRITE", IsolationLevel.WRITE_SERIALIZABLE, ReadSet(), before_put=before_put, policy=policy)
    with pytest.raises(CommitRetriesExhaustedError, match="nothing was committed") as err:
        txn.commit(lambda _v: [CommitInfo(operation="WRITE")])
    assert err.value.retryable
    ours = [
        v
        for v in range(1, DeltaTable(path).version() + 1)
        for a in decode_commit(snap.storage.read(commit_key(v)), v)
        if isinstance(a, CommitInfo) and not (a.txn_id or "").startswith("other-")
    ]
    assert ours == [], "a version holds our commit although the transaction raised"
    assert txn.can_discard


def test_nothing_left_to_commit_is_a_typed_outcome(tmp_path: Path) -> None:
    snap = TableSnapshot.load(_table(tmp_path), cross_check=False)
    txn = Transaction(snap, "WRITE", IsolationLevel.SERIALIZABLE)
    result = txn.commit(lambda _v: [])
    assert result.outcome is CommitOutcome.NOTHING_TO_DO and result.version is None and not result.committed
