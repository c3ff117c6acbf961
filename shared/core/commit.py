"""Committing a rewrite: check every winning commit after the read version, then create the next log
entry atomically (put-if-absent); on losing the race, check the new winner and try the next version.

Rules against each winning commit (optimistic concurrency, as Delta's conflict checker):

* it carries our ``txn`` appId at our version or later → the work is already committed: succeed,
  write nothing;
* it removes one of our inputs (any deletion vector), or adds one of our input paths with another
  deletion vector → :class:`CommitConflictError` (our plan is stale);
* it changes ``metaData`` or ``protocol`` → :class:`CommitConflictError`;
* anything else (appends, other partitions, domain metadata) → move on to the next version.

No sleeps: losing a race costs one extra read of the winner.

Example:
    >>> check_winner([{"add": {"path": "new.parquet"}}], 5, Intent({"a.parquet"}, "app", 3))
    False
    >>> check_winner([{"txn": {"appId": "app", "version": 3}}], 5, Intent({"a.parquet"}, "app", 3))
    True
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CommitConflictError, CommitRetriesExhaustedError
from .log import commit_key, read_commit
from .storage import TableStorage

log = logging.getLogger(__name__)

MAX_LOST_RACES = 64
MAX_WINNERS = 100_000


@dataclass(frozen=True)
class Intent:
    """What our commit depends on: the input paths, and the idempotency key."""

    input_paths: set[str]
    app_id: str
    txn_version: int


@dataclass
class CommitResult:
    """Where the commit landed (``version`` None: someone already committed this work)."""

    version: int | None
    attempts: int
    winners_checked: int


def check_winner(actions: list[dict[str, Any]], version: int, intent: Intent) -> bool:
    """Check one winning commit; True if it already holds our work, raise if it conflicts."""
    for a in actions:
        txn = a.get("txn")
        if txn and txn.get("appId") == intent.app_id and int(txn.get("version", -1)) >= intent.txn_version:
            return True
    for a in actions:
        if "remove" in a and a["remove"]["path"] in intent.input_paths:
            raise CommitConflictError(
                f"commit {version} removed input {a['remove']['path']} (or changed its deletion vector) after "
                "our plan; nothing was committed. Plan the partition again"
            )
        if "add" in a and a["add"]["path"] in intent.input_paths:
            raise CommitConflictError(
                f"commit {version} re-added input {a['add']['path']} after our plan; nothing was committed. "
                "Plan the partition again"
            )
        if "metaData" in a:
            raise CommitConflictError(
                f"commit {version} changed the table's metadata (schema, partitioning or properties); "
                "nothing was committed. Plan again"
            )
        if "protocol" in a:
            raise CommitConflictError(
                f"commit {version} changed the table's protocol; nothing was committed. Plan again"
            )
    return False


def scan_winners(storage: TableStorage, read_version: int, intent: Intent) -> tuple[int, bool]:
    """Check every commit after ``read_version`` that exists now.

    Returns ``(first free version, already committed)``.
    """
    v = read_version + 1
    checked = 0
    while checked < MAX_WINNERS:
        actions = read_commit(storage, v)
        if actions is None:
            return v, False
        if check_winner(actions, v, intent):
            return v, True
        v += 1
        checked += 1
    raise CommitRetriesExhaustedError(f"more than {MAX_WINNERS} commits since version {read_version}; plan again")


def commit(
    storage: TableStorage,
    read_version: int,
    intent: Intent,
    build: Callable[[int], bytes],
    *,
    before_put: Callable[[int], None] | None = None,
) -> CommitResult:
    """Commit ``build(version)`` as the next log entry after ``read_version``.

    ``before_put`` is called with the version about to be attempted (a hook for tests and tracing).
    """
    v, done = scan_winners(storage, read_version, intent)
    checked = v - read_version - 1
    if done:
        return CommitResult(None, 0, checked)
    attempts = 0
    while True:
        attempts += 1
        if before_put is not None:
            before_put(v)
        if storage.put_if_absent(commit_key(v), build(v)):
            log.info("committed version %d of %s after %d attempt(s)", v, storage.uri, attempts)
            return CommitResult(v, attempts, checked)
        if attempts >= MAX_LOST_RACES:
            raise CommitRetriesExhaustedError(
                f"lost the race for the next log version {attempts} times in a row; nothing was committed, retry later"
            )
        # Somebody else took v: check what they wrote, then try the version after theirs.
        v, done = scan_winners(storage, v - 1, intent)
        checked = v - read_version - 1
        if done:
            return CommitResult(None, attempts, checked)


def maybe_checkpoint(
    storage: TableStorage, version: int, configuration: dict[str, str], protocol: dict[str, Any]
) -> bool:
    """Write a checkpoint at ``version`` when the table's interval calls for it; never fails the commit."""
    interval = int(configuration.get("delta.checkpointInterval", "100") or 100)
    if interval <= 0 or version % interval:
        return False
    if "v2Checkpoint" in (protocol.get("writerFeatures") or []):
        log.info("version %d: table uses v2 checkpoints; leaving the checkpoint to its other writers", version)
        return False
    try:
        from deltalake import DeltaTable

        DeltaTable(
            storage.deltalake_uri, version=version, storage_options=storage.storage_options or None
        ).create_checkpoint()
        return True
    except Exception as exc:
        log.warning("checkpoint at version %d failed (the commit stands): %s", version, str(exc)[:200])
        return False
