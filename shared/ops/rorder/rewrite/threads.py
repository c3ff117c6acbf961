"""Helper threads inside one rewrite: a small pool like :class:`concurrent.futures.ThreadPoolExecutor`,
but of daemon threads, so an interpreter that exits while a call is abandoned (Ctrl-C during
``deltaextras run``) is not held up until the abandoned work finishes. On a normal return the pool is
joined like an executor: nothing outlives the call.

Example:
    >>> with HelperPool(2) as pool:
    ...     first = pool.submit(sum, [1, 2])
    ...     squares = list(pool.map(lambda x: x * x, [1, 2, 3]))
    >>> first.result(), squares
    (3, [1, 4, 9])
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Any

THREAD_PREFIX = "deltaextras-helper"


class HelperPool:
    """``workers`` daemon threads that run submitted calls in order; a context manager that joins them."""

    def __init__(self, workers: int) -> None:
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._run, name=f"{THREAD_PREFIX}-{i}", daemon=True) for i in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller through the future, as an executor does
                future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a helper thread; its future."""
        future: Future[Any] = Future()
        self._tasks.put((future, fn, args))
        return future

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn`` of every item, all submitted at once, the results in order (as ``Executor.map``)."""
        futures = [self.submit(fn, item) for item in items]
        return (f.result() for f in futures)

    def __enter__(self) -> HelperPool:
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join()
