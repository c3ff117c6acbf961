"""In-commit timestamps: the commit time a table with ``delta.enableInCommitTimestamps`` keeps in its log.

Such a table takes a commit's time from ``commitInfo.inCommitTimestamp``, not from the storage clock. Every
commit written while the property is on carries a ``commitInfo`` as its first action, with an
``inCommitTimestamp`` strictly greater than the previous commit's: the writer's clock, or the previous
value plus one millisecond when the clock is behind. A retry at a later version stamps again against the
commit it now follows.

Example:
    >>> from deltaextras.core.actions import CommitInfo, Txn
    >>> enabled({"delta.enableInCommitTimestamps": "true"}), enabled({})
    (True, False)
    >>> info = CommitInfo(timestamp=5)
    >>> actions = first([Txn("app", 1), info], info, previous=1_000, clock=900)
    >>> actions[0] is info, info.in_commit_timestamp, info.timestamp
    (True, 1001, 1001)
    >>> previous_timestamp([CommitInfo(in_commit_timestamp=42)])
    42
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .actions import Action, CommitInfo

ENABLE = "delta.enableInCommitTimestamps"


def enabled(configuration: Mapping[str, str]) -> bool:
    """Whether the table's commits must carry in-commit timestamps."""
    return str(configuration.get(ENABLE, "false")).lower() == "true"


def previous_timestamp(actions: Sequence[Action] | None) -> int | None:
    """The in-commit timestamp of a commit's actions (None: the commit has none, or is unknown)."""
    for a in actions or ():
        if isinstance(a, CommitInfo):
            value = a.in_commit_timestamp
            return int(value) if isinstance(value, int) else None
    return None


def first(actions: list[Action], info: CommitInfo, *, previous: int | None, clock: int) -> list[Action]:
    """Stamp ``info`` (strictly after ``previous``, else ``clock``) and put it first among ``actions``."""
    stamp = clock if previous is None else max(clock, previous + 1)
    info.in_commit_timestamp = stamp
    info.timestamp = stamp
    return [info, *(a for a in actions if a is not info)]
