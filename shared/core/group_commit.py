"""Group commit, the worker's side: stage the finished commit, then wait for its outcome, committing
for the others when it is this worker's turn.

:func:`commit_staged` stamps the unit's actions (its own ``txnId``), stages them
(:mod:`deltaextras.core.staged`) and waits. While it waits, it watches the next free log version ``v``:
the first worker to create ``_deltaextras/turns/<v>`` (put-if-absent) runs the
:class:`~deltaextras.core.committer.Committer` for ``v`` — a leader per version, elected by the object
store alone, so no queue, lease service or cloud SDK is needed. A turn whose version has not appeared
after ``turn_timeout`` (its committer died) is taken over by one waiting worker (the turn's next
generation). Even two committers at once are safe: publishing is a put-if-absent, so they never both
land a version, and a unit's ``txn`` appId keeps it from being published twice.

The outcome is the unit's recorded one: committed (at its version), already done, or rejected with the
conflict. After ``group_wait`` seconds without one, ``None``: the caller commits the unit alone through
the same :class:`~deltaextras.core.transaction.Transaction`, which recognizes the staged commit if a
committer publishes it after all, and keeps the files until that is ruled out.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.core.actions import CommitInfo, Txn
    >>> from deltaextras.core.conflicts import IsolationLevel, ReadSet
    >>> from deltaextras.core.snapshot import TableSnapshot
    >>> from deltaextras.core.transaction import Transaction
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"x": [1]}))
    >>> snap = TableSnapshot.load(path, cross_check=False)
    >>> txn = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, ReadSet(app_id="u", app_version=0))
    >>> result = commit_staged(txn, [CommitInfo(operation="OPTIMIZE"), Txn(app_id="u", version=0)])
    >>> result.outcome.value, result.version, DeltaTable(path).transaction_version("u")
    ('committed', 1, 0)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..errors import DeltaExtrasError, StorageError
from .actions import Action
from .commit_policy import DEFAULT_POLICY, CommitPolicy
from .commit_result import CommitOutcome, CommitResult
from .commit_watch import Watch, watch_for
from .committer import Committer
from .staged import StagedCommit, UnitOutcome, encode_staged, turn_key
from .storage import TableStorage
from .transaction import Transaction

log = logging.getLogger(__name__)

STAGE_PUTS = 4  # puts of a staged commit that failed before one is known to have landed


def commit_staged(
    txn: Transaction,
    actions: list[Action],
    *,
    policy: CommitPolicy = DEFAULT_POLICY,
    after_publish: Callable[[int], None] | None = None,
) -> CommitResult | None:
    """Stage ``actions`` as ``txn``'s commit and wait for its outcome (see the module docstring). The
    units staging in this process at the same time share one staged object (:meth:`Watch.stage`).

    ``txn`` must carry a ``txn`` appId (``txn.read.app_id``): it is what keeps a unit from being
    published twice. ``after_publish(version)`` runs in this worker for each version it publishes as
    committer. Returns the outcome (:attr:`CommitOutcome.CONFLICT`: rejected, ``conflict`` says why;
    the caller may resolve it and commit alone), or None when no outcome came in time.
    """
    if txn.read.app_id is None:
        raise ValueError("a staged commit needs the txn appId of its unit")
    txn_id, stamped = txn.stage(actions)
    entry = StagedCommit(
        txn_id=txn_id,
        read_version=txn.read_version,
        isolation=txn.isolation.value,
        operation=txn.operation,
        app_id=txn.read.app_id,
        app_version=txn.read.app_version,
        read_files=tuple(sorted(txn.read.files)),
        written=tuple(txn.written),
        actions=stamped,
        domains=tuple(sorted(txn.read.domains)),
    )
    watch = watch_for(txn.storage, txn.snapshot.metadata.id, txn.snapshot.version)
    watch.stage(entry, lambda entries: _put_staged(txn.storage, entries))
    committer = Committer(txn.snapshot, policy, after_publish)
    outcome = _wait(watch, entry, txn.checked_to + 1, committer, policy)
    if outcome is None:
        log.info(
            "no outcome for staged commit %s of %s in %g s: committing alone",
            txn_id,
            txn.storage.uri,
            policy.group_wait,
        )
        return None
    if outcome.outcome == "committed" and outcome.version is not None:
        return txn.published(outcome.version, stamped)
    txn.unpublishable()  # the outcome is final: no committer publishes it
    if outcome.outcome == "already_done":
        return CommitResult(CommitOutcome.ALREADY_DONE, attempts=txn.attempts)
    return CommitResult(CommitOutcome.CONFLICT, attempts=txn.attempts, conflict=outcome.conflict)


def _put_staged(storage: TableStorage, entries: list[StagedCommit]) -> None:
    """Stage ``entries`` in one object; a put that failed may have landed (the transactions keep the
    files either way)."""
    data, key = encode_staged(entries), entries[0].key
    for attempt in range(STAGE_PUTS):
        try:
            storage.put_if_absent(key, data)  # False: an earlier try of ours landed
            return
        except (StorageError, OSError, TimeoutError) as exc:
            if attempt + 1 == STAGE_PUTS:
                raise StorageError(
                    f"could not stage the commit of {', '.join(e.app_id for e in entries[:3])}"
                    f"{' ...' if len(entries) > 3 else ''} at {storage.uri}: {str(exc)[:160]}; nothing "
                    "is known to be committed, the files written are kept. Run the same work again"
                ) from None
            time.sleep(0.1 * 2**attempt)


def _wait(
    watch: Watch, entry: StagedCommit, version: int, committer: Committer, policy: CommitPolicy
) -> UnitOutcome | None:
    """Wait for the outcome of ``entry`` with the other units of the table waiting in this process;
    take the committer's turn when it is free."""
    storage = watch.storage
    committer.on_record = watch.deliver
    committer.decided = watch.known  # decided already: not decided again
    committer.decided_keys = watch.known_keys  # staged objects whose every unit is decided: not read again
    committer.defer_cleanup = True  # removed once this unit stopped polling: the next turn goes on meanwhile

    def turn(v: int) -> bool:
        generation = _my_turn(storage, v, watch.turns, policy)
        if generation is None:
            return False
        _commit_turn(committer, storage, v, generation)
        return True

    try:
        return watch.wait(entry.txn_id, version, turn, policy)
    finally:
        try:
            committer.cleanup()
        except (DeltaExtrasError, OSError) as exc:  # left staged: the next run finds them decided in the log
            log.warning("could not remove decided staged commits of %s: %s", storage.uri, exc)


def _commit_turn(committer: Committer, storage: TableStorage, version: int, generation: int) -> None:
    """Run the committer for ``version``, then free the turn; its failure is logged (the units stay staged)."""
    try:
        committer.run(version)
    except (DeltaExtrasError, OSError) as exc:
        log.warning("committing staged units at version %d of %s failed: %s", version, storage.uri, exc)
    finally:
        try:
            storage.delete(turn_key(version, generation))
        except DeltaExtrasError:
            log.warning("could not remove the turn of version %d of %s", version, storage.uri)


def _my_turn(
    storage: TableStorage, version: int, turns: dict[int, tuple[int, float]], policy: CommitPolicy
) -> int | None:
    """The generation of the turn at ``version`` this worker took, None when another worker holds it.
    A turn held for longer than ``turn_timeout`` (its committer died) is taken over at the next
    generation, by one worker."""
    held = turns.get(version)
    if held is not None and time.monotonic() - held[1] <= policy.turn_timeout:
        return None
    generation = 0 if held is None else held[0] + 1
    try:
        if storage.put_if_absent(turn_key(version, generation), str(time.time()).encode()):
            return generation
    except (StorageError, OSError, TimeoutError):
        pass  # may have landed: then nobody takes this generation, and the next one comes after the timeout
    turns[version] = (generation, time.monotonic())
    return None


__all__ = ["commit_staged"]
