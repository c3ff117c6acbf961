"""One optimistic transaction: every writer of deltaextras commits through :class:`Transaction`.

A transaction knows the snapshot it read (version, protocol, metadata), what the operation read
(:class:`~deltaextras.core.conflicts.ReadSet`), its isolation level, the files it wrote and how to
commit: check every commit after the read version (:mod:`deltaextras.core.conflicts`), create the next
log entry atomically (put-if-absent), and on losing the race check the winner and try the next version.

**Commit identity.** Each attempt writes a fresh ``commitInfo.txnId``. Object stores can store the entry
and still report failure (an error after the write, a dropped connection whose retry answers "already
exists", a timeout). After any put that did not plainly succeed the transaction reads version N back:
our ``txnId`` → committed; someone else's → check it and go on at N+1; absent → put again (same
payload, so whichever lands is recognized); unreadable → read again, a bounded number of times, then
:class:`~deltaextras.errors.CommitOutcomeUnknownError` (retryable). It never guesses.

**Lost races.** A loser reads each winner once (the read-back of its put is the first one checked),
pauses (:class:`~deltaextras.core.commit_policy.CommitPolicy`: backoff with full jitter) and tries the
next version while its time budget lasts; the number of races lost is no limit. The result is typed
(:class:`~deltaextras.core.commit_result.CommitResult`: committed, already done, nothing to do).

**Written files.** :meth:`Transaction.abort` deletes the files the operation wrote only when it is proven
that no committed version references them: no put was attempted, or every attempted version was read
back as someone else's. Otherwise they stay for vacuum (an orphan costs bytes, a missing file the table).

**Post-commit.** A checkpoint when the table's ``delta.checkpointInterval`` calls for one; its failure
never fails the commit.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.core.actions import Metadata
    >>> from deltaextras.core.snapshot import TableSnapshot
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"x": [1]}))
    >>> snap = TableSnapshot.load(path, cross_check=False)
    >>> meta = Metadata(**{**vars(snap.metadata), "configuration": {"owner": "me"}})
    >>> txn = Transaction(snap, "SET TBLPROPERTIES", IsolationLevel.SERIALIZABLE)
    >>> result = txn.commit(lambda version: [meta])
    >>> result.outcome.value, result.version, DeltaTable(path).metadata().configuration
    ('committed', 1, {'owner': 'me'})
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence

from ..errors import (
    CommitOutcomeUnknownError,
    CommitRetriesExhaustedError,
    DeltaExtrasError,
    StorageError,
    UnsupportedFeatureError,
)
from . import commit_timestamps, row_tracking
from .actions import (
    ENGINE,
    Action,
    Add,
    CommitInfo,
    Metadata,
    Protocol,
    Txn,
    decode_commit,
    encode_commit,
    now_ms,
)
from .checkpoint_prune import prune_checkpoints
from .cleanup import delete_orphans
from .commit_policy import DEFAULT_POLICY, CommitPolicy
from .commit_result import CommitOutcome, CommitResult
from .conflicts import Conflict, ConflictKind, IsolationLevel, ReadSet, Winner, check_winner
from .log import commit_key
from .protocol import check_protocol
from .snapshot import TableSnapshot
from .storage import TableStorage

log = logging.getLogger(__name__)

Resolver = Callable[[list[Winner], list[Conflict], int], None]


class Transaction:
    """One optimistic transaction against a table (see the module docstring).

    ``resolve(winners, conflicts, version)``, when given, is called with the ``append`` and
    ``delete_read`` conflicts of the winners up to ``version`` instead of raising them: the operation
    re-plans (and updates :attr:`read`) or raises. ``before_put(version)`` / ``after_commit(version)``
    are hooks for tracing and tests. ``policy`` holds the limits (time budget, backoff, read-backs).
    """

    def __init__(
        self,
        snapshot: TableSnapshot,
        operation: str,
        isolation: IsolationLevel,
        read: ReadSet | None = None,
        *,
        resolve: Resolver | None = None,
        before_put: Callable[[int], None] | None = None,
        after_commit: Callable[[int], None] | None = None,
        policy: CommitPolicy = DEFAULT_POLICY,
    ) -> None:
        self.snapshot = snapshot
        self.storage: TableStorage = snapshot.storage
        self.read_version = snapshot.version
        self.operation = operation
        self.isolation = isolation
        self.read = read or ReadSet()
        if self.read.protocol is None:
            self.read.protocol = snapshot.protocol
        if self.read.supports is None:
            self.read.supports = functools.partial(_writable, snapshot)
        self.resolve = resolve
        self.before_put = before_put
        self.after_commit = after_commit
        self.policy = policy
        self.written: list[str] = []  # storage keys of files this transaction wrote
        self.txn_ids: dict[str, list[Action]] = {}  # txnId of each attempt -> its actions
        self.unresolved: set[int] = set()  # versions where a put of ours may have landed
        self.staged: set[str] = set()  # txnIds of staged commits a group committer may still publish
        self.committed: int | None = None
        self.checked_to = self.read_version  # every commit up to here was checked against us
        self.attempts = 0
        self.winners_checked = 0
        # What the commits after the read version set, for the stamping of each attempt: the row id
        # high-water mark and the in-commit timestamp of each version read.
        self.row_id_mark = row_tracking.high_water_mark(getattr(snapshot, "domains", {}))
        self.commit_timestamps: dict[int, int | None] = {}
        # The files other writers' DELETE, UPDATE or MERGE added (dataChange adds of winners that are not
        # blind appends), as read: an operation may follow up on them (the worker's second pass of a unit)
        # (by path: a winner checked again after ``escalate`` counts once)
        self.changed_files: dict[str, Add] = {}

    # ------------------------------------------------------------------ files
    def wrote(self, key: str) -> None:
        """Record a file written for this transaction (a storage key under the table root)."""
        self.written.append(key)

    @property
    def can_discard(self) -> bool:
        """Whether no committed version can reference the files written: nothing committed, every
        attempted version read back as someone else's, no staged commit that may still be published."""
        return self.committed is None and not self.unresolved and not self.staged

    def abort(self) -> bool:
        """Delete the files written, when that is proven safe; otherwise leave them for vacuum.

        Returns whether they were deleted.
        """
        if not self.can_discard:
            if self.written and self.committed is None:
                log.warning(
                    "left %d file(s) of %s for vacuum: the outcome of a commit attempt is not known",
                    len(self.written),
                    self.storage.uri,
                )
            return False
        self.discard(self.written)
        self.written = []
        return True

    def discard(self, keys: Sequence[str]) -> None:
        """Delete some written files that no committed version names (caller's proof), quietly."""
        delete_orphans(self.storage, keys)

    def stage(self, actions: list[Action]) -> tuple[str, list[Action]]:
        """Stamp ``actions`` as an attempt of ours that a group committer will publish: a version carrying
        its ``txnId`` (in ``commitInfo.unitTxnIds``) is this transaction's commit, and the files written
        stay until it is proven that no version can carry it. Returns ``(txnId, stamped actions)``."""
        stamped, _payload = self._stamp(actions, self.checked_to + 1)
        info = next(a for a in stamped if isinstance(a, CommitInfo))
        assert info.txn_id is not None
        self.staged.add(info.txn_id)
        return info.txn_id, stamped

    def can_stage(self) -> bool:
        """Whether a group committer may publish this transaction's commit: not on a table whose commits are
        stamped per version (row ids handed out above the high-water mark, in-commit timestamps), which
        commit alone."""
        protocol, metadata = self.snapshot.protocol, self.snapshot.metadata
        return not (row_tracking.supported(protocol) or commit_timestamps.enabled(metadata.configuration or {}))

    def unpublishable(self) -> None:
        """Our staged commits can no longer be published (their outcome is final, or a winner that every
        committer checks them against conflicts with them or holds the same work)."""
        self.staged.clear()

    def published(self, version: int, actions: list[Action]) -> CommitResult:
        """A group committer published our staged commit at ``version`` (its recorded outcome)."""
        self.committed = version
        self.unresolved.clear()
        self.staged.clear()
        self.checked_to = max(self.checked_to, version)
        if self.after_commit is not None:
            self.after_commit(version)
        return self._result(CommitOutcome.COMMITTED, version, actions)

    def escalate(
        self,
        isolation: IsolationLevel,
        *,
        operation: str | None = None,
        might_match: Callable[[Add], bool] | None = None,
    ) -> None:
        """Commit under a stricter isolation level than planned (a rewrite that turned out to change the
        table's content): every winner since the read version is checked again, under the new rules, at
        the next catch-up."""
        self.isolation = isolation
        if operation is not None:
            self.operation = operation
        if might_match is not None:
            self.read.might_match = might_match
        self.checked_to = self.read_version

    # ------------------------------------------------------------------ winners
    def catch_up(self, version: int | None = None, known: Winner | None = None) -> tuple[int, CommitResult | None]:
        """Check every commit from ``version`` (default: the first one not checked yet) that exists.

        ``known``: the commit at ``version``, already read (the winner of a lost race: not read twice).
        Returns ``(first free version, result)``; ``result`` is set when a winner is our own commit or
        already holds our work. Conflicts are raised, or handed to ``resolve``.
        """
        v = max(self.checked_to + 1, self.read_version + 1) if version is None else version
        winners: list[Winner] = []
        pending: list[Conflict] = []
        while True:
            winner = known if known is not None and known.version == v else self._winner(v)
            if winner is None:
                break
            self._observe(v, winner.actions)
            verdict = check_winner(winner, self.read, self.isolation, self.txn_ids)
            if verdict.ours:
                return v, self._landed(v, winner)
            if verdict.done:
                log.info("version %d of %s already holds this work (txn %s)", v, self.storage.uri, self.read.app_id)
                self.unpublishable()  # every committer sees this winner before any later version
                return v, self._result(CommitOutcome.ALREADY_DONE)
            if not winner.is_blind_append:
                self.changed_files.update((a.path, a) for a in winner.adds if a.data_change)
            for c in verdict.conflicts:
                if c.kind.resolvable and self.resolve is not None:
                    pending.append(c)
                else:
                    self.unpublishable()  # a committer rejects our staged commit for the same winner
                    raise c.error()
            winners.append(winner)
            v += 1
        if any(c.kind is ConflictKind.DELETE_READ for c in pending):
            self.unpublishable()  # a committer rejects our staged commit for the same winner
        if pending and self.resolve is not None:
            self.resolve(winners, pending, v - 1)
        self.checked_to = max(self.checked_to, v - 1)
        return v, None

    def _winner(self, version: int) -> Winner | None:
        """The commit at ``version`` (None: absent), counted against the policy's limit."""
        actions = self._read_version(version)
        if actions is None:
            return None
        self.winners_checked += 1
        if self.winners_checked > self.policy.max_winners:
            raise CommitRetriesExhaustedError(
                f"more than {self.policy.max_winners} commits since version {self.read_version}; plan again"
            )
        return Winner(version, actions)

    def _result(
        self, outcome: CommitOutcome, version: int | None = None, actions: list[Action] | None = None
    ) -> CommitResult:
        return CommitResult(outcome, version, self.attempts, self.winners_checked, list(actions or []))

    def _read_version(self, version: int) -> list[Action] | None:
        """Actions of a commit, None when absent; storage errors retried (bounded), then raised."""
        delay = 0.1
        attempts = self.policy.read_back_attempts
        for attempt in range(attempts):
            try:
                data = self.storage.read(commit_key(version))
            except FileNotFoundError:
                return None
            except (StorageError, OSError, TimeoutError) as exc:
                if attempt + 1 == attempts:
                    raise (self._unknown(version, exc) if version in self.unresolved else _as_storage(exc)) from None
                time.sleep(delay)
                delay *= 2
                continue
            return decode_commit(data, version)
        return None  # pragma: no cover - the loop returns or raises

    def _unknown(self, version: int, exc: BaseException) -> CommitOutcomeUnknownError:
        return CommitOutcomeUnknownError(
            f"could not tell whether version {version} of {self.storage.uri} is this commit ({str(exc)[:160]}); "
            f"the {len(self.written)} file(s) written are kept. Run the same work again"
        )

    def _landed(self, version: int, winner: Winner) -> CommitResult:
        self.committed = version
        self.unresolved.clear()
        mine = sorted(winner.txn_ids & set(self.txn_ids))
        actions = self.txn_ids[mine[0]] if mine else winner.actions
        log.info("committed version %d of %s after %d attempt(s)", version, self.storage.uri, self.attempts)
        return self._finish(version, self._result(CommitOutcome.COMMITTED, version, list(actions)))

    # ------------------------------------------------------------------ commit
    def commit(self, build: Callable[[int], list[Action]]) -> CommitResult:
        """Commit ``build(version)`` as the next log entry after the read version.

        ``build`` is called before each attempt (after winners were checked and resolved) and returns
        the actions; an empty list means nothing is left to commit. The transaction adds or completes
        the ``commitInfo`` (``txnId``, ``readVersion``, ``isolationLevel``, ``engineInfo``).
        """
        v, result = self.catch_up()
        if result is not None:
            return result
        lost = 0
        deadline = time.monotonic() + self.policy.time_budget
        rng = random.Random()
        while True:
            actions = build(v)
            if not actions:
                return self._result(CommitOutcome.NOTHING_TO_DO)
            actions, payload = self._stamp(actions, v)
            outcome = self._put(v, actions, payload)
            if isinstance(outcome, CommitResult):
                return outcome
            v, result = self.catch_up(v, known=outcome)  # the winner was read once, by the put
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise CommitRetriesExhaustedError(
                    f"lost the race for the next log version {lost + 1} times in {self.policy.time_budget:g} s; "
                    "nothing was committed, retry later"
                )
            time.sleep(self.policy.backoff(lost, rng))
            lost += 1

    def _stamp(self, actions: list[Action], version: int) -> tuple[list[Action], bytes]:
        txn_id = str(uuid.uuid4())
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        if info is None:
            info = CommitInfo(timestamp=now_ms(), operation=self.operation)
            actions = [info, *actions]
        info.txn_id = txn_id
        info.read_version = self.read_version
        info.isolation_level = self.isolation.value
        info.engine_info = info.engine_info or ENGINE
        if info.operation is None:
            info.operation = self.operation
        if info.is_blind_append is None:
            info.is_blind_append = False
        actions = self._stamp_features(actions, info, version)
        self.txn_ids[txn_id] = actions
        return actions, encode_commit(actions)

    def _stamp_features(self, actions: list[Action], info: CommitInfo, version: int) -> list[Action]:
        """Per attempt, against the commits before ``version``: fresh row ids for the new files of a table
        that supports row tracking (the high-water mark moves in the same commit), and the in-commit
        timestamp, strictly after the previous commit's, on a commit info put first."""
        protocol = next((a for a in actions if isinstance(a, Protocol)), self.snapshot.protocol)
        metadata = next((a for a in actions if isinstance(a, Metadata)), self.snapshot.metadata)
        if row_tracking.supported(protocol):
            actions, _mark = row_tracking.assign(actions, version, self.row_id_mark)
            preserved = row_tracking.columns(protocol, metadata) is not None  # rewrites write the stored ids
            info.extra["tags"] = {**(info.extra.get("tags") or {}), row_tracking.PRESERVED_TAG: str(preserved).lower()}
        if commit_timestamps.enabled(metadata.configuration or {}):
            if version - 1 not in self.commit_timestamps:
                self._observe(version - 1, self._read_version(version - 1) if version > 0 else None)
            previous = self.commit_timestamps.get(version - 1)
            actions = commit_timestamps.first(actions, info, previous=previous, clock=now_ms())
        return actions

    def _observe(self, version: int, actions: list[Action] | None) -> None:
        """Note what a commit read from the log sets: its row id high-water mark, its in-commit timestamp."""
        mark = row_tracking.winner_mark(actions or [])
        if mark is not None:
            self.row_id_mark = max(self.row_id_mark, mark)
        self.commit_timestamps[version] = commit_timestamps.previous_timestamp(actions)

    def _put(self, version: int, actions: list[Action], payload: bytes) -> CommitResult | Winner:
        """Try one version; the result when committed, else the commit of someone else that holds it."""
        key = commit_key(version)
        for _ in range(self.policy.same_version_puts):
            self.attempts += 1
            if self.before_put is not None:
                self.before_put(version)
            self.unresolved.add(version)  # from here on the entry may exist, whatever the call says
            failure: BaseException | None = None
            try:
                if self.storage.put_if_absent(key, payload):
                    return self._succeeded(version, actions)
            except (StorageError, OSError, TimeoutError) as exc:
                failure = exc
                log.warning("put of version %d of %s failed ambiguously: %s", version, self.storage.uri, exc)
            winner = self._winner(version)
            if winner is None:
                continue  # not there (yet): put the same payload again; either landing is recognized
            if winner.txn_ids & set(self.txn_ids):
                said = "an error" if failure is not None else "a lost race"
                log.info("version %d of %s is ours although the put reported %s", version, self.storage.uri, said)
                return self._landed(version, winner)
            self.unresolved.discard(version)  # someone else's: our payload can never land there
            return winner
        raise CommitOutcomeUnknownError(
            f"version {version} of {self.storage.uri} could not be written nor read back after "
            f"{self.policy.same_version_puts} "
            f"puts; the {len(self.written)} file(s) written are kept. Run the same work again"
        )

    def _succeeded(self, version: int, actions: list[Action]) -> CommitResult:
        self.committed = version
        self.unresolved.clear()
        log.info("committed version %d of %s after %d attempt(s)", version, self.storage.uri, self.attempts)
        return self._finish(version, self._result(CommitOutcome.COMMITTED, version, actions))

    def _finish(self, version: int, result: CommitResult) -> CommitResult:
        if self.after_commit is not None:
            self.after_commit(version)
        checkpoint(self.storage, version, self.snapshot.configuration, self.snapshot.protocol)
        return result


def _as_storage(exc: BaseException) -> DeltaExtrasError:
    if isinstance(exc, DeltaExtrasError):
        return exc
    return StorageError(f"storage failed while reading the log: {str(exc)[:200]}")


def txn_action(app_id: str, version: int, timestamp: int) -> Txn:
    """The idempotency marker: a redelivered message with the same (appId, version) commits nothing."""
    return Txn(app_id=app_id, version=version, last_updated=timestamp)


def checkpoint_interval(configuration: dict[str, str]) -> int | None:
    """The table's ``delta.checkpointInterval``; ``None`` when it is not set or not a number (a property no
    writer should have set: a commit never fails on it).

    Example:
        >>> checkpoint_interval({"delta.checkpointInterval": "25"}), checkpoint_interval({})
        (25, None)
    """
    try:
        return int(configuration["delta.checkpointInterval"])
    except (KeyError, TypeError, ValueError):
        return None


def checkpoint(storage: TableStorage, version: int, configuration: dict[str, str], protocol: Protocol) -> bool:
    """Write a checkpoint at ``version`` when the table's interval calls for it (delta-rs's default 100
    when it sets none); never fails the commit."""
    configured = checkpoint_interval(configuration)
    interval = 100 if configured is None else configured
    if interval <= 0 or version % interval:
        return False
    return write_checkpoint(storage, version, protocol)


def write_checkpoint(storage: TableStorage, version: int, protocol: Protocol) -> bool:
    """Write a classic checkpoint of ``version`` through deltalake; ``False`` (logged) when it was not
    written. Never raises: a checkpoint only shortens the log replay of later readers."""
    if "v2Checkpoint" in (protocol.writer_features or []):
        log.info("version %d: table uses v2 checkpoints; leaving the checkpoint to its other writers", version)
        return False
    try:
        from deltalake import DeltaTable

        DeltaTable(
            storage.deltalake_uri, version=version, storage_options=storage.storage_options or None
        ).create_checkpoint()
    except Exception as exc:
        log.warning("checkpoint at version %d failed (the commit stands): %s", version, str(exc)[:200])
        return False
    prune_checkpoints(storage, version)  # never raises
    return True


__all__ = [
    "CommitOutcome",
    "CommitPolicy",
    "CommitResult",
    "IsolationLevel",
    "ReadSet",
    "Transaction",
    "Winner",
    "checkpoint",
    "checkpoint_interval",
    "txn_action",
    "write_checkpoint",
]


def _writable(snapshot: TableSnapshot, protocol: Protocol) -> bool:
    """Whether this writer can commit to the table under ``protocol`` (a winner's new protocol)."""
    if row_tracking.supported(protocol) and not row_tracking.supported(snapshot.protocol):
        return False  # rows read before ids were assigned: their ids cannot be kept
    try:
        check_protocol(protocol, snapshot.configuration, snapshot.metadata.schema_string)
    except UnsupportedFeatureError:
        return False
    return True
