"""The waiting room of group commit: the units of one table waiting in this process, one poller for all.

A host runs many workers at once (a Functions instance a batch of queue messages, the bench a thread
per unit). Each would stage its commit in an object of its own and poll storage for its own outcome;
instead the units of one table share a :class:`Watch`. Staging: one unit at a time puts an object,
holding every commit staged in the process meanwhile (:meth:`Watch.stage`), so a burst of units costs
a few objects to put, read and remove (removals cost more as a container fills on some stores).
Waiting: one of them at a time lists ``_deltaextras/outcomes/`` (one request for every unit),
reads the outcomes objects it has not read yet, watches the next log version and, when its turn is
free, runs the committer (:mod:`deltaextras.core.group_commit`). Each committer run writes its outcomes
in one object, read once per process. The poll interval grows from
``poll_first`` to ``poll_max`` while nothing changes and starts again when something does.

Example:
    >>> import tempfile
    >>> from deltaextras.core.storage import TableStorage
    >>> watch_for(TableStorage(tempfile.mkdtemp()), "table-id").waiting
    set()
"""

from __future__ import annotations

import contextlib
import copy
import random
import threading
import time
from collections.abc import Callable

from ..errors import CorruptDataError, StorageError
from .actions import now_ms
from .commit_policy import CommitPolicy
from .log import commit_key
from .staged import OUTCOME_DIR, Outcomes, StagedCommit, UnitOutcome, written_at
from .storage import TableStorage, table_key

OUTCOMES_TTL = 3600.0  # seconds an outcomes object is kept: far beyond any unit's wait
Turn = Callable[[int], bool]  # run the committer for a version if this process may; whether it did


class Watch:
    """The units of one table waiting in this process (see the module docstring)."""

    def __init__(self, storage: TableStorage) -> None:
        self.storage = storage
        self.cond = threading.Condition()
        self.waiting: set[str] = set()
        self.results: dict[str, UnitOutcome] = {}
        self.polling = False
        self.version = 0  # the first log version not seen yet
        self.turns: dict[int, tuple[int, float]] = {}  # version -> (generation held by another process, since)
        self.seen: set[str] = set()  # outcomes objects read (or expired)
        self.known: dict[str, UnitOutcome] = {}  # every outcome read, for units that register late
        self.known_keys: set[str] = set()  # staged objects whose every unit is decided
        self.rng = random.Random()
        self.staging = threading.Condition()
        self.to_stage: list[StagedCommit] = []  # staged by a unit, not yet put
        self.stage_busy = False
        self.stage_done: dict[str, BaseException | None] = {}  # txnId -> the put's error (None: put)

    def cut_back(self, version: int) -> None:
        """Forget the log versions seen after ``version`` when the newest of them is gone from the log."""
        with self.cond:
            newest = self.version - 1
        if newest <= version:
            return
        try:
            if self.storage.exists(commit_key(newest)):
                return
        except (StorageError, OSError):
            return  # not known to be gone: the next poll looks again
        with self.cond:
            self.version = min(self.version, version + 1)
            self.turns = {v: t for v, t in self.turns.items() if v <= version + 1}

    def stage(self, entry: StagedCommit, put: Callable[[list[StagedCommit]], None]) -> None:
        """Stage ``entry``: ``put(entries)`` it, in one object with the others staged in this process while
        the previous put was under way (none adds latency: a unit alone is put at once). Raises what the
        put of its object raised."""
        with self.staging:
            self.to_stage.append(entry)
            while self.stage_busy and entry.txn_id not in self.stage_done:
                self.staging.wait()
            group: list[StagedCommit] = []
            if entry.txn_id not in self.stage_done:  # this unit puts every entry waiting, its own among them
                group, self.to_stage, self.stage_busy = self.to_stage, [], True
        if group:
            error: BaseException | None = None
            try:
                put(group)
            except BaseException as exc:  # every unit of the object learns it
                error = exc
            with self.staging:
                self.stage_done.update(dict.fromkeys((e.txn_id for e in group), error))
                self.stage_busy = False
                self.staging.notify_all()
        with self.staging:
            failed = self.stage_done.pop(entry.txn_id)
        if failed is not None:
            raise failed if group else copy.copy(failed)  # one exception object per thread

    def wait(self, txn_id: str, version: int, turn: Turn, policy: CommitPolicy) -> UnitOutcome | None:
        """The outcome of the staged commit ``txn_id`` once recorded; None after ``group_wait``. Versions
        from ``version`` on are watched; ``turn(v)`` is offered each free version ``v``. One waiting unit
        polls; the others sleep until an outcome arrives or the poller hands over (no timed wake-ups)."""
        deadline = time.monotonic() + policy.group_wait
        with self.cond:
            self.waiting.add(txn_id)
            self.version = max(self.version, version)
            if txn_id in self.known:  # read before this unit started waiting
                self.results[txn_id] = self.known[txn_id]
        try:
            while True:
                with self.cond:
                    if txn_id in self.results:
                        return self.results.pop(txn_id)
                    if time.monotonic() >= deadline:
                        return None
                    if self.polling:
                        self.cond.wait(max(0.01, deadline - time.monotonic()))
                        continue
                    self.polling = True
                try:
                    self._poll_until(txn_id, deadline, turn, policy)
                finally:
                    with self.cond:
                        self.polling = False
                        self.cond.notify_all()  # another waiting unit takes over the polling
        finally:
            with self.cond:
                self.waiting.discard(txn_id)
                self.results.pop(txn_id, None)

    def _poll_until(self, txn_id: str, deadline: float, turn: Turn, policy: CommitPolicy) -> None:
        """Poll for every waiting unit until this one's outcome is in, or its deadline."""
        interval = policy.poll_first
        while True:
            changed = self._poll(turn)
            with self.cond:
                if txn_id in self.results or time.monotonic() >= deadline:
                    return
            interval = policy.poll_first if changed else min(interval * 1.5, policy.poll_max)
            time.sleep(min(interval * self.rng.uniform(0.5, 1.0), max(0.0, deadline - time.monotonic())))

    def deliver(self, outcomes: Outcomes) -> None:
        """Outcomes recorded by a committer of this process, handed over without a read."""
        with self.cond:
            self.known.update(outcomes.decided)
            self.known_keys.update(outcomes.staged)
            self.results.update({t: o for t, o in outcomes.decided.items() if t in self.waiting})
            self.cond.notify_all()

    def _read(self, key: str) -> Outcomes | None:
        """The outcomes at ``key`` (once per process); an object older than ``OUTCOMES_TTL`` is removed:
        every unit it names stopped waiting long ago."""
        at = written_at(key)
        if at is None:
            return None
        if now_ms() - at > OUTCOMES_TTL * 1000:
            with contextlib.suppress(StorageError, OSError):
                self.storage.delete(key)
            self.seen.add(key)
            return None
        try:
            outcomes = Outcomes.decode(self.storage.read(key), key)
        except FileNotFoundError:
            outcomes = None
        except CorruptDataError:
            outcomes = None
        self.seen.add(key)
        return outcomes

    def _poll(self, turn: Turn) -> bool:
        """One look for every waiting unit; whether anything changed."""
        with self.cond:
            waiting, version = set(self.waiting), self.version
        found: dict[str, UnitOutcome] = {}
        try:
            for key, _size in self.storage.list(OUTCOME_DIR):
                if key in self.seen:
                    continue
                outcomes = self._read(key)
                if outcomes is not None:
                    self.known.update(outcomes.decided)
                    self.known_keys.update(outcomes.staged)
                    found.update({t: o for t, o in outcomes.decided.items() if t in waiting})
            start = version
            while self.storage.exists(commit_key(version)):
                version += 1
        except (StorageError, OSError):
            return False  # a failed poll: the next one looks again
        with self.cond:
            self.results.update(found)
            self.version = max(self.version, version)
            if found:
                self.cond.notify_all()
        ran = not found and turn(version)
        return bool(found) or version > start or ran


_watches: dict[str, Watch] = {}
_watches_lock = threading.Lock()


def watch_for(storage: TableStorage, table_id: str, version: int | None = None) -> Watch:
    """This process's watch of the table with ``metaData.id`` ``table_id`` at ``storage`` (reached with the
    same storage options). A table re-created at the same path gets a new watch (the log versions it saw
    and the turns it took belong to the old table), and the old one is dropped once no unit waits on it.
    ``version``: a version the caller read; a watch that saw later versions which are gone (the log was cut
    back, as a table restored from a backup is) looks at the log again from there."""
    key = table_key(storage, table_id)
    with _watches_lock:
        watch = _watches.get(key)
        if watch is None:
            for other in [k for k, w in _watches.items() if k.startswith(storage.location_key + "\n")]:
                if not _watches[other].waiting:
                    del _watches[other]
            watch = _watches[key] = Watch(storage)
    if version is not None:
        watch.cut_back(version)
    return watch


__all__ = ["Watch", "watch_for"]
