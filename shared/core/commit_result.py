"""What a commit ended with, as a type: committed, already done, nothing to do, or a conflict.

Example:
    >>> r = CommitResult(CommitOutcome.COMMITTED, 4)
    >>> r.committed, r.version, CommitResult(CommitOutcome.ALREADY_DONE).version
    (True, 4, None)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .actions import Action
from .conflicts import Conflict


class CommitOutcome(str, enum.Enum):
    """How a commit ended."""

    COMMITTED = "committed"  # a log version holds the actions
    ALREADY_DONE = "already_done"  # a version holds the same work (its txn), committed by an earlier delivery
    NOTHING_TO_DO = "nothing_to_do"  # nothing was left to commit
    CONFLICT = "conflict"  # a winner conflicts (group commit: this unit was rejected, ``conflict`` says why)


@dataclass
class CommitResult:
    """The outcome of one commit; ``version`` is where it landed (None unless committed).

    ``attempts``: puts tried; ``winners_checked``: commits of others read and checked; ``actions``: what
    the committed version holds for this writer.
    """

    outcome: CommitOutcome
    version: int | None = None
    attempts: int = 0
    winners_checked: int = 0
    actions: list[Action] = field(default_factory=list)
    conflict: Conflict | None = None

    @property
    def committed(self) -> bool:
        return self.outcome is CommitOutcome.COMMITTED

    @property
    def done(self) -> bool:
        """The same work was already committed (kept for callers of the earlier result type)."""
        return self.outcome is CommitOutcome.ALREADY_DONE


__all__ = ["CommitOutcome", "CommitResult"]
