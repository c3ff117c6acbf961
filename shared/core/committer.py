"""The group committer: publishes many staged commits (:mod:`deltaextras.core.staged`) in one log version.

One run, for the next free version ``v``:

1. **gather** the staged commits (oldest first, at most ``batch_max``);
2. **decide** each against the winners since its read version, in order, with Delta's conflict rules
   (:func:`~deltaextras.core.conflicts.check_winner`): a winner that carries its ``txnId`` (a batch
   that published it before, whose committer died before recording it) → committed there; a winner
   with its ``txn`` appId → already done; any conflict → rejected alone. Then against the units
   accepted before it in this batch (same rules; the batch is ordered as if each unit committed in
   turn). Units of another operation wait for a later batch;
3. **publish** the accepted units as one commit through an ordinary
   :class:`~deltaextras.core.transaction.Transaction` (put-if-absent of ``<v>.json``, read-back of
   ambiguous puts, the commit's ``commitInfo.unitTxnIds`` naming every unit). Readers see a normal
   commit. On a lost race the units are decided again against the new winner and the next version
   is tried;
4. **record** the outcomes of the run in one object (``_deltaextras/outcomes/``, naming the staged
   objects whose every unit is decided), then remove those objects. Outcomes are
   written only once they are final (the batch landed, or the winner that decided them is in the
   log), so a committer that dies anywhere leaves staged commits that the next
   run decides the same way: none is lost, none is published twice (its ``txn`` appId is in the log).

The committer never deletes a unit's files: the worker that staged them does, once its outcome says
no version can name them.

Example:
    >>> sorted(_metrics_sum([{"numAddedFiles": "2"}, {"numAddedFiles": "3", "x": "a"}]).items())
    [('numAddedFiles', '5')]
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor

from ..errors import CorruptDataError, DeltaExtrasError
from .actions import Action, CommitInfo, DomainMetadata, Metadata, Protocol, Remove, Txn, decode_commit, now_ms
from .commit_policy import DEFAULT_POLICY, CommitPolicy
from .conflicts import UNIT_TXN_IDS, Conflict, IsolationLevel, ReadSet, Winner, check_winner
from .log import commit_key
from .snapshot import TableSnapshot
from .staged import STAGED_DIR, Outcomes, StagedCommit, UnitOutcome, decode_staged
from .storage import TableStorage, table_key
from .transaction import Transaction

log = logging.getLogger(__name__)

IO_THREADS = 32
CACHE_VERSIONS = 4096

# Commits read by any committer of this process, by (table key, version): the table key names the location,
# the storage options and the table's metaData.id (:func:`~deltaextras.core.storage.table_key`), so a table
# re-created at the same path, or another table at the same path in another account, never reads a commit of
# the other from here. A version of one table never changes once written (put-if-absent), so an entry stays
# right for as long as that table's log only grows. A log cut back (a table restored from a backup keeps its
# id) is noticed by :func:`_forget_if_cut_back` when a committer starts: each entry keeps the digest of the
# commit's bytes.
_cache: OrderedDict[tuple[str, int], tuple[Winner, bytes]] = OrderedDict()
_cache_lock = threading.Lock()


class Committer:
    """Publishes the staged commits of one table (see the module docstring). ``snapshot``: a snapshot the
    committing process read (its protocol and configuration); ``after_publish(version)``: post-commit
    work of the operation (a checkpoint), run once per published version."""

    def __init__(
        self,
        snapshot: TableSnapshot,
        policy: CommitPolicy = DEFAULT_POLICY,
        after_publish: Callable[[int], None] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.storage = snapshot.storage
        self.table_key = table_key(self.storage, snapshot.metadata.id)
        _forget_if_cut_back(self.storage, self.table_key, snapshot.version)
        self.policy = policy
        self.after_publish = after_publish
        self.on_record: Callable[[Outcomes], None] | None = None
        self.decided: Mapping[str, UnitOutcome] = {}  # final outcomes known already: their entries are skipped
        self.decided_keys: Collection[str] = frozenset()  # staged objects whose every unit is decided: not read
        self.units: dict[str, list[str]] = {}  # staged object -> txnIds it holds, of the last gather
        self.defer_cleanup = False  # True: the decided staged commits are removed by :meth:`cleanup`
        self.pending: list[str] = []  # staged commits decided, not removed yet

    def run(self, version: int) -> int | None:
        """Publish what is staged at ``version`` or later; returns the version published (None: none)."""
        time.sleep(self.policy.linger)
        entries = self.gather()
        log.debug("version %d of %s: %d staged commit(s) gathered", version, self.storage.uri, len(entries))
        if not entries:
            return None
        decided: dict[str, UnitOutcome] = {}
        batch: list[StagedCommit] = []
        txn = Transaction(self.snapshot, entries[0].operation, IsolationLevel.SNAPSHOT_ISOLATION, ReadSet())
        txn.checked_to = version - 1  # the units are decided here; the transaction checks later winners only

        def build(v: int) -> list[Action]:
            decided.clear()
            batch[:] = self.decide(entries, v, decided)
            if not batch:
                return []
            txn.read_version = min(e.read_version for e in batch)
            txn.isolation = _strictest(batch)
            return _batch_actions(batch)

        try:
            result = txn.commit(build)
        except (DeltaExtrasError, OSError) as exc:  # left staged: the next run decides them the same way
            log.warning("group commit of %d unit(s) at %s stopped: %s", len(entries), self.storage.uri, exc)
            return None
        if result.committed:
            assert result.version is not None
            info = Winner(result.version, result.actions).txn_ids
            for e in batch:
                if e.txn_id in info:
                    decided[e.txn_id] = UnitOutcome("committed", result.version)
            log.info("published %d staged commit(s) as version %d of %s", len(batch), result.version, self.storage.uri)
            if self.after_publish is not None:
                self.after_publish(result.version)
        self.record(decided)
        log.debug("version %d of %s: %d outcome(s) recorded", version, self.storage.uri, len(decided))
        return result.version

    # ------------------------------------------------------------------ steps
    def gather(self) -> list[StagedCommit]:
        """The staged commits, oldest first (from at most twice ``batch_max`` objects), but those known
        decided: an object whose every unit is (``decided_keys``) is not read at all."""
        keys = sorted(k for k, _ in self.storage.list(STAGED_DIR) if k.endswith(".json") and k not in self.decided_keys)
        keys = keys[: 2 * self.policy.batch_max]
        with ThreadPoolExecutor(min(IO_THREADS, max(1, len(keys)))) as pool:
            found = list(pool.map(self._read_staged, keys))
        self.units = {k: [e.txn_id for e in entries] for k, entries in zip(keys, found, strict=True) if entries}
        return [e for entries in found for e in entries if e.txn_id not in self.decided]

    def _read_staged(self, key: str) -> list[StagedCommit]:
        try:
            return decode_staged(self.storage.read(key))
        except FileNotFoundError:
            return []  # published and removed meanwhile
        except CorruptDataError as exc:
            log.warning("skipping %s of %s: %s", key, self.storage.uri, exc)
            return []

    def decide(self, entries: list[StagedCommit], version: int, decided: dict[str, UnitOutcome]) -> list[StagedCommit]:
        """The units that can be published at ``version``, in order; the final outcome of the others
        goes to ``decided`` (units of another operation, or beyond ``batch_max``, stay staged)."""
        first = min(e.read_version for e in entries) + 1
        found = {v: self.winner(v) for v in range(first, version)}
        gone = max((v for v, w in found.items() if w is None), default=-1)  # log entries cleaned up
        winners = [w for w in found.values() if w is not None]
        batch = _Batch()
        for e in entries:
            if e.read_version < gone:  # its winners can no longer all be checked: never published
                decided[e.txn_id] = UnitOutcome("conflict", gone)
                continue
            outcome = _against_winners(e, winners)
            if outcome is not None:
                decided[e.txn_id] = outcome
                continue
            if len(batch.units) >= self.policy.batch_max or (batch.units and e.operation != batch.units[0].operation):
                continue
            outcome = _against_batch(e, batch, version)
            if outcome is not None:
                decided[e.txn_id] = outcome
            else:
                batch.add(e)
        return batch.units

    def winner(self, version: int) -> Winner | None:
        """The commit at ``version``, reduced to what the conflict rules of a unit look at (cached)."""
        key = (self.table_key, version)
        with _cache_lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key][0]
        try:
            data = self.storage.read(commit_key(version))
        except FileNotFoundError:
            return None
        winner = Winner(version, [a for a in decode_commit(data, version) if isinstance(a, _KEPT)])
        with _cache_lock:
            _cache[key] = (winner, _digest(data))
            while len(_cache) > CACHE_VERSIONS:
                _cache.popitem(last=False)
        return winner

    def record(self, decided: dict[str, UnitOutcome]) -> None:
        """Write the decided outcomes (one object: the waiting workers go on at once), then remove the
        staged objects whose every unit is decided, at least one of them in this run (an object decided
        by another run is left to that run's committer)."""
        if not decided:
            return
        done = [
            key
            for key, units in self.units.items()
            if any(t in decided for t in units) and all(t in decided or t in self.decided for t in units)
        ]
        o = Outcomes(dict(decided), run=str(uuid.uuid4()), staged=tuple(done))
        self.storage.put(o.key, o.encode())
        if self.on_record is not None:
            self.on_record(o)  # the units waiting in this process need not read it back
        self.pending += done
        if not self.defer_cleanup:
            self.cleanup()

    def cleanup(self) -> None:
        """Remove the staged commits decided (their outcomes are written): in batches, off the turn when
        ``defer_cleanup`` (the next version's committer need not wait for it)."""
        keys, self.pending = self.pending, []
        self.storage.delete_many(keys)


_KEPT = (CommitInfo, Txn, Remove, Protocol, Metadata, DomainMetadata)  # a unit has no predicate: adds never hit


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _forget_if_cut_back(storage: TableStorage, key: str, version: int) -> None:
    """Drops every cached commit of table ``key`` when the newest one cached is newer than ``version`` (the
    committer's snapshot) and is not in the log as cached: the log was cut back, as a table restored from a
    backup is, and the versions after the cut are other commits than the ones cached. One read of one commit,
    only when the cache knows versions after the snapshot."""
    with _cache_lock:
        newest = max((v for k, v in _cache if k == key), default=-1)
        cached = _cache[(key, newest)][1] if newest >= 0 else b""
    if newest <= version:
        return
    try:
        if _digest(storage.read(commit_key(newest))) == cached:
            return
    except (DeltaExtrasError, OSError):
        pass  # gone, or not known to be the same: read again
    log.info("the log of %s is not the one cached after version %d: cached commits dropped", storage.uri, version)
    with _cache_lock:
        for entry in [e for e in _cache if e[0] == key]:
            del _cache[entry]


def _against_winners(entry: StagedCommit, winners: list[Winner]) -> UnitOutcome | None:
    read, isolation = entry.read_set(), entry.isolation_level
    for w in winners:
        if w.version <= entry.read_version:
            continue
        verdict = check_winner(w, read, isolation, (entry.txn_id,))
        if verdict.ours:
            return UnitOutcome("committed", w.version)
        if verdict.done:
            return UnitOutcome("already_done", w.version)
        if verdict.conflicts:
            return UnitOutcome("conflict", w.version, verdict.conflicts[0])
    return None


class _Batch:
    """The units accepted so far, indexed by what the conflict rules of a unit can meet in them (removed
    paths, ``txn`` appIds, metadata or protocol changes): each unit is checked against the few peers
    that can concern it, not against all of them."""

    def __init__(self) -> None:
        self.units: list[StagedCommit] = []
        self.removing: dict[str, StagedCommit] = {}
        self.apps: dict[str, StagedCommit] = {}
        self.table_changes: list[StagedCommit] = []

    def add(self, unit: StagedCommit) -> None:
        self.units.append(unit)
        for a in unit.actions:
            if isinstance(a, Remove):
                self.removing.setdefault(a.path, unit)
            elif isinstance(a, Txn):
                self.apps.setdefault(a.app_id, unit)
        if any(isinstance(a, (Metadata, Protocol)) for a in unit.actions):
            self.table_changes.append(unit)

    def peers_of(self, unit: StagedCommit) -> list[StagedCommit]:
        """The accepted units ``unit`` may conflict with, in batch order."""
        found = {id(p): p for p in self.table_changes}
        for path in unit.read_files:
            if (p := self.removing.get(path)) is not None:
                found[id(p)] = p
        if (p := self.apps.get(unit.app_id)) is not None:
            found[id(p)] = p
        order = {id(u): i for i, u in enumerate(self.units)} if len(found) > 1 else {}
        return sorted(found.values(), key=lambda p: order.get(id(p), 0))


def _against_batch(entry: StagedCommit, batch: _Batch, version: int) -> UnitOutcome | None:
    read, isolation = entry.read_set(), entry.isolation_level
    for peer in batch.peers_of(entry):
        verdict = check_winner(Winner(version, peer.actions), read, isolation)
        if verdict.done:
            return UnitOutcome("already_done", version)
        if verdict.conflicts:
            c = verdict.conflicts[0]
            return UnitOutcome("conflict", version, Conflict(c.kind, version, c.paths))
    return None


def _strictest(batch: list[StagedCommit]) -> IsolationLevel:
    order = [IsolationLevel.SNAPSHOT_ISOLATION, IsolationLevel.WRITE_SERIALIZABLE, IsolationLevel.SERIALIZABLE]
    return max((e.isolation_level for e in batch), key=order.index)


def _batch_actions(batch: list[StagedCommit]) -> list[Action]:
    """One commit of every unit: a ``commitInfo`` naming them (metrics summed), then their actions."""
    infos = [a for e in batch for a in e.actions if isinstance(a, CommitInfo)]
    info = CommitInfo(
        timestamp=now_ms(),
        operation=batch[0].operation,
        operation_parameters={"units": str(len(batch))},
        is_blind_append=False,
        operation_metrics=_metrics_sum([i.operation_metrics or {} for i in infos]),
    )
    info.extra[UNIT_TXN_IDS] = [e.txn_id for e in batch]
    return [info, *(a for e in batch for a in e.actions if not isinstance(a, CommitInfo))]


def _metrics_sum(metrics: list[dict[str, object]]) -> dict[str, str]:
    """The sum of the units' integer metrics (others are dropped)."""
    total: dict[str, int] = {}
    for m in metrics:
        for k, v in m.items():
            try:
                total[k] = total.get(k, 0) + int(str(v))
            except ValueError:
                continue
    return {k: str(v) for k, v in total.items()}


__all__ = ["Committer"]
