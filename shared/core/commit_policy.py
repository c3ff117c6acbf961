"""The limits of every commit, in one place: how long a writer keeps trying, how it waits between lost
races, how often an operation starts over.

A writer that loses the race for a log version pauses before the next attempt (exponential backoff
with full jitter, so the losers of one round do not collide again in the next) and keeps going while
its time budget lasts: losing races is not a reason to throw a finished rewrite away, only running out
of time is. An operation that must start over (a winner changed the table's metadata or protocol)
does so at most ``restarts`` times.

Example:
    >>> import random
    >>> policy = CommitPolicy(backoff_first=0.01, backoff_max=0.5)
    >>> [policy.backoff(n, random.Random(1)) <= min(0.5, 0.01 * 2**n) for n in (0, 3, 10)]
    [True, True, True]
    >>> policy.restarts
    16
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class CommitPolicy:
    """Limits of a commit and of the operation around it.

    ``time_budget``: seconds a transaction keeps trying for a version after its first attempt, however
    many races it loses (it raises :class:`~deltaextras.errors.CommitRetriesExhaustedError`, retryable,
    after). ``backoff_first`` / ``backoff_max``: the pause after the n-th lost race is uniform in
    ``[0, min(backoff_max, backoff_first * 2**n)]``. ``max_winners``: commits a transaction checks
    before it asks to be planned again. ``read_back_attempts``: reads of a version whose outcome is
    unknown before giving up; ``same_version_puts``: puts of one payload at a version that read back
    empty. ``restarts``: times an operation starts over from a new snapshot.

    Group commit (:mod:`deltaextras.core.group_commit`): a worker waits ``group_wait`` seconds for the
    outcome of its staged commit (then commits it alone), polling every ``poll_first`` seconds at first,
    1.5 times longer each time up to ``poll_max``; a committer lingers ``linger`` seconds for more units
    before it publishes at most ``batch_max`` of them; a turn whose version has not appeared after
    ``turn_timeout`` seconds is taken over.
    """

    time_budget: float = 240.0
    backoff_first: float = 0.005
    backoff_max: float = 0.5
    max_winners: int = 100_000
    read_back_attempts: int = 6
    same_version_puts: int = 4
    restarts: int = 16
    group_wait: float = 120.0
    poll_first: float = 0.05
    poll_max: float = 1.0
    linger: float = 0.25
    batch_max: int = 4096
    turn_timeout: float = 20.0

    def backoff(self, lost: int, rng: random.Random | None = None) -> float:
        """Seconds to pause after the ``lost``-th lost race in a row (0-based), full jitter."""
        ceiling = min(self.backoff_max, self.backoff_first * (2 ** min(lost, 30)))
        return (rng or random).uniform(0.0, ceiling)

    def restarting(
        self,
        run: Callable[[int], T],
        restart_on: tuple[type[BaseException], ...],
        exhausted: Callable[[BaseException], BaseException] | None = None,
    ) -> T:
        """``run(restart)`` until it returns; an exception of ``restart_on`` starts it over (``run`` cleans
        up what it wrote first), at most :attr:`restarts` times, then ``exhausted(last)`` is raised (the
        last exception itself by default).

        Example:
            >>> tries = []
            >>> def run(n):
            ...     tries.append(n)
            ...     if n < 2:
            ...         raise KeyError(n)
            ...     return "done"
            >>> CommitPolicy().restarting(run, (KeyError,)), tries
            ('done', [0, 1, 2])
        """
        restart = 0
        while True:
            try:
                return run(restart)
            except restart_on as why:
                if restart >= self.restarts:
                    if exhausted is None:
                        raise
                    raise exhausted(why) from None
                restart += 1


DEFAULT_POLICY = CommitPolicy()

__all__ = ["DEFAULT_POLICY", "CommitPolicy"]
