"""The worker threads that rewrite several partitions at once, and the gate that stops them on Ctrl-C.

Partitions run on threads of this process, never in child processes: nothing re-imports the caller's
``__main__`` (a script without ``if __name__ == "__main__":`` would run again in every spawned child),
nothing outlives the call, and the work — Parquet decoding and encoding in pyarrow, object I/O in
Rust — releases the GIL. ``bench/rorder_bench.py --partitions N`` compares this with a process pool.

On ``KeyboardInterrupt`` in the waiting thread (the library installs no signal handler; Python's own
raises it in the main thread) the :class:`CommitGate` closes under its lock: a partition that has not
yet started its commit never will (its written files are deleted; nothing of it is in the log), one
whose commit is under way is waited for and reported, no new partition starts. Then
:class:`RunInterrupted` carries every partition's outcome. A second interrupt
while waiting propagates at once.

Example:
    >>> reports = run_partitions(["a", "b"], lambda item, _gate: PartitionReport("/t", item, "skipped"), workers=2)
    >>> [r.partition for r in reports]
    ['a', 'b']
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import InterruptedBeforeCommitError, one_line
from .report import PartitionReport, RorderReport

log = logging.getLogger(__name__)

THREAD_PREFIX = "deltaextras-partition"
_POLL = 0.1  # seconds between checks of the waiting thread (it must stay interruptible)


class RunInterrupted(KeyboardInterrupt):
    """A multi-partition run stopped on Ctrl-C: no new partition started, commits already under way
    finished, the rest were abandoned before their commit. ``report`` says what happened to each.

    A ``KeyboardInterrupt``, not an error of :mod:`deltaextras.errors`: code that stops on Ctrl-C still does.
    """

    def __init__(self, message: str, report: RorderReport | None = None) -> None:
        super().__init__(one_line(message))
        self.report = report if report is not None else RorderReport()


class CommitGate:
    """Under one lock: may a partition still start its commit? Closed once, by an interrupt.

    Example:
        >>> gate = CommitGate()
        >>> gate.enter("p0"); gate.close()
        {'p0'}
        >>> try:
        ...     gate.enter("p1")
        ... except InterruptedBeforeCommitError as exc:
        ...     print(exc.retryable)
        True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._inside: set[Any] = set()

    @property
    def closed(self) -> bool:
        return self._closed

    def enter(self, token: Any) -> None:
        """Called right before each commit attempt: raise if closed, else note ``token`` as committing."""
        with self._lock:
            if self._closed:
                raise InterruptedBeforeCommitError(
                    "interrupted before the commit; nothing of this partition was committed"
                )
            self._inside.add(token)

    def close(self) -> set[Any]:
        """Close the gate; return the tokens whose commit is under way (or done)."""
        with self._lock:
            self._closed = True
            return set(self._inside)


def run_partitions(
    items: Sequence[Any],
    work: Callable[[Any, Callable[[], None]], PartitionReport],
    *,
    workers: int,
    progress: Callable[[PartitionReport], None] | None = None,
    describe: Callable[[Any], PartitionReport] | None = None,
) -> list[PartitionReport]:
    """Run ``work(item, before_commit)`` for every item on ``workers`` threads; reports in item order.

    ``work`` reports a failure as a failed report, and must call ``before_commit()`` right before
    every commit attempt (it raises once an interrupt closed the gate). An exception that escapes
    ``work`` ends the run: no further commit starts, those under way finish, and it is raised here
    (a ``KeyboardInterrupt`` as the caller's own Ctrl-C). ``progress`` gets
    each report as it arrives, in the calling thread.
    ``describe(item)`` gives the blank report of an item that an interrupt left without one.
    """
    gate = CommitGate()
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    # A worker files its report in ``results`` itself and only then wakes the calling thread through
    # ``done``: an interrupt that lands in the calling thread just after it dequeued a wake-up loses
    # nothing (a report handed over through the queue alone was lost there, and the wait for it hung).
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    results: dict[int, PartitionReport] = {}
    escaped: dict[int, BaseException] = {}  # what a worker thread raised instead of reporting
    started: set[int] = set()
    lock = threading.Lock()

    def loop() -> None:
        while not gate.closed:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            with lock:
                if gate.closed:
                    return
                started.add(i)
            try:
                report = work(items[i], lambda i=i: gate.enter(i))
            except BaseException as exc:  # work() reports failures; what escapes it ends the run
                with lock:
                    escaped[i] = exc
                done.put(i)
                return
            with lock:
                results[i] = report
            done.put(i)

    threads = _started(loop, max(1, min(workers, len(items))))
    reports: dict[int, PartitionReport] = {}

    def take(block: bool) -> bool:
        """Wait for (or poll) a wake-up; report every filed result not reported yet."""
        try:
            done.get(timeout=_POLL) if block else done.get_nowait()
            woke = True
        except queue.Empty:
            woke = False
        with lock:
            fresh = sorted(results.keys() - reports.keys())
        for i in fresh:
            reports[i] = results[i]
            if progress:
                progress(results[i])
        return woke

    try:
        while len(reports) < len(items):
            take(block=True)
            _raise_escaped(escaped, gate, lock, reports, take)
    except KeyboardInterrupt:
        with lock:
            gone = set(escaped)
        _stop(items, gate, started, lock, reports, take, progress, describe, gone)
    for t in threads:
        t.join()
    return [reports[i] for i in range(len(items))]


def _started(target: Callable[[], None], count: int) -> list[threading.Thread]:
    """``count`` daemon threads running ``target``, started."""
    threads = [threading.Thread(target=target, name=f"{THREAD_PREFIX}-{k}", daemon=True) for k in range(count)]
    for t in threads:
        t.start()
    return threads


def _raise_escaped(
    escaped: dict[int, BaseException],
    gate: CommitGate,
    lock: threading.Lock,
    reports: dict[int, PartitionReport],
    take: Callable[[bool], bool],
) -> None:
    """Raise what a worker thread raised instead of reporting, if anything: an interrupt as the
    caller's own Ctrl-C; anything else once no further commit can start and those under way finished
    (a thread that died with it would have left the caller waiting for its report)."""
    with lock:
        crash = next(iter(escaped.values()), None)
        gone = set(escaped)
    if crash is None:
        return
    if not isinstance(crash, KeyboardInterrupt):
        _settle(gate, lock, reports, take, gone)
    raise crash


def _settle(
    gate: CommitGate,
    lock: threading.Lock,
    reports: dict[int, PartitionReport],
    take: Callable[[bool], bool],
    gone: set[int],
) -> None:
    """Close the gate and wait for the commits under way to be reported (but for the items in ``gone``,
    whose thread raised instead of reporting)."""
    with lock:
        committing = gate.close() - gone
    waiting = committing - reports.keys()
    if waiting:
        log.warning("interrupted: waiting for %d commit(s) under way (interrupt again to stop at once)", len(waiting))
    while committing - reports.keys():
        take(True)


def _stop(
    items: Sequence[Any],
    gate: CommitGate,
    started: set[int],
    lock: threading.Lock,
    reports: dict[int, PartitionReport],
    take: Callable[[bool], bool],
    progress: Callable[[PartitionReport], None] | None,
    describe: Callable[[Any], PartitionReport] | None,
    gone: set[int],
) -> None:
    """First interrupt: close the gate, wait for commits under way, report everything, raise."""
    with lock:
        running = set(started)
    _settle(gate, lock, reports, take, gone)
    while take(False):
        pass
    for i, item in enumerate(items):
        if i in reports:
            continue
        blank = describe(item) if describe else PartitionReport(table="", partition=str(item), status="")
        blank.status, blank.error_type, blank.retryable = "interrupted", None, True
        blank.reason = (
            "abandoned before its commit: nothing committed (vacuum removes any file it wrote)"
            if i in running
            else "not started"
        )
        reports[i] = blank
        if progress:
            progress(blank)
    report = RorderReport([reports[i] for i in range(len(items))])
    raise RunInterrupted(f"interrupted: {report.summary()}", report)
