"""The waiting room of group commit: the units of one table waiting in this process, one poller for all.

A host runs many workers at once (a Functions instance a batch of queue messages, the bench a thread
per unit). Each would poll storage for its own outcome; instead the waiting units of one table share a
:class:`Watch`: one of them at a time lists ``_deltaextras/outcomes/`` (one request for every unit),
finds the outcomes of the units waiting here (in the names listed), watches the next log version and, when its turn is
free, runs the committer (:mod:`deltaextras.core.group_commit`). The poll interval grows from
``poll_first`` to ``poll_max`` while nothing changes and starts again when something does.

Example:
    >>> import tempfile
    >>> from deltaextras.core.storage import TableStorage
    >>> watch_for(TableStorage(tempfile.mkdtemp())).waiting
    set()
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from ..errors import StorageError
from .commit_policy import CommitPolicy
from .log import commit_key
from .staged import OUTCOME_DIR, UnitOutcome, parse_outcome_key
from .storage import TableStorage

Turn = Callable[[int], bool]  # run the committer for a version if this process may; whether it did


class Watch:
    """The units of one table waiting in this process (see the module docstring)."""

    def __init__(self, storage: TableStorage) -> None:
        self.storage = storage
        self.cond = threading.Condition()
        self.waiting: set[str] = set()
        self.results: dict[str, UnitOutcome] = {}
        self.polling = False
        self.next_poll = 0.0
        self.interval = 0.0
        self.version = 0  # the first log version not seen yet
        self.turns: dict[int, tuple[int, float]] = {}  # version -> (generation held by another process, since)
        self.rng = random.Random()

    def wait(self, txn_id: str, version: int, turn: Turn, policy: CommitPolicy) -> UnitOutcome | None:
        """The outcome of the staged commit ``txn_id`` once recorded; None after ``group_wait``. Versions
        from ``version`` on are watched; ``turn(v)`` is offered each free version ``v``."""
        deadline = time.monotonic() + policy.group_wait
        with self.cond:
            self.waiting.add(txn_id)
            self.version = max(self.version, version)
            self.interval = policy.poll_first
            self.next_poll = 0.0
        try:
            while True:
                with self.cond:
                    if txn_id in self.results:
                        return self.results.pop(txn_id)
                    now = time.monotonic()
                    if now >= deadline:
                        return None
                    if self.polling or now < self.next_poll:
                        self.cond.wait(max(0.01, min(deadline, self.next_poll) - now))
                        continue
                    self.polling = True
                changed = False
                try:
                    changed = self._poll(turn)
                finally:
                    with self.cond:
                        self.polling = False
                        self.interval = policy.poll_first if changed else min(self.interval * 1.5, policy.poll_max)
                        self.next_poll = time.monotonic() + self.interval * self.rng.uniform(0.5, 1.0)
                        self.cond.notify_all()
        finally:
            with self.cond:
                self.waiting.discard(txn_id)
                self.results.pop(txn_id, None)

    def _poll(self, turn: Turn) -> bool:
        """One look for every waiting unit; whether anything changed."""
        with self.cond:
            waiting, version = set(self.waiting), self.version
        found: dict[str, UnitOutcome] = {}
        try:
            for key, _size in self.storage.list(OUTCOME_DIR):  # the outcome is in the key: no reads
                parsed = parse_outcome_key(key)
                if parsed is not None and parsed[0] in waiting:
                    found[parsed[0]] = parsed[1]
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


def watch_for(storage: TableStorage) -> Watch:
    """This process's watch of the table at ``storage``."""
    with _watches_lock:
        watch = _watches.get(storage.uri)
        if watch is None:
            watch = _watches[storage.uri] = Watch(storage)
        return watch


__all__ = ["Watch", "watch_for"]
