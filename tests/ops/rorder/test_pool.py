"""The worker threads of ``rorder``: an exception that escapes a unit's work (which reports failures
itself) ends the run in the calling thread instead of leaving it waiting for a report that never
comes; commits under way finish first, and no commit starts after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from deltaextras.ops.rorder.pool import RunInterrupted, run_partitions
from deltaextras.ops.rorder.report import PartitionReport


def _in_thread(call: Callable[[], Any], seconds: float = 30.0) -> BaseException | list[PartitionReport]:
    """``call()``'s result or exception, from a thread given ``seconds`` (a hang fails the test)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "run_partitions did not return"
    return out[0]


def test_an_exception_that_escapes_a_unit_is_raised_to_the_caller() -> None:
    committed: list[int] = []
    late = threading.Event()

    def work(item: int, before_commit: Callable[[], None]) -> PartitionReport:
        if item == 1:
            raise SystemExit("worker stopped")
        if item == 0:
            before_commit()  # a commit under way when the other unit fails: it finishes
            time.sleep(0.3)
            committed.append(item)
            return PartitionReport("t", str(item), "committed")
        late.wait(1.0)
        before_commit()  # the gate is closed by now: this raises and nothing is committed
        committed.append(item)
        return PartitionReport("t", str(item), "committed")

    got = _in_thread(lambda: run_partitions([0, 1, 2], work, workers=3))

    assert isinstance(got, SystemExit) and str(got) == "worker stopped"
    assert committed == [0]


def test_an_interrupt_raised_in_a_worker_is_reported_as_an_interrupted_run() -> None:
    def work(item: int, before_commit: Callable[[], None]) -> PartitionReport:
        if item == 0:
            raise KeyboardInterrupt
        return PartitionReport("t", str(item), "committed")

    got = _in_thread(lambda: run_partitions([0, 1], work, workers=1))

    assert isinstance(got, RunInterrupted)
    assert got.report is not None
    assert [r.status for r in got.report] == ["interrupted", "interrupted"]


def test_units_that_report_run_to_the_end() -> None:
    got = _in_thread(lambda: run_partitions(list(range(5)), lambda i, _: PartitionReport("t", str(i), "ok"), workers=2))
    assert not isinstance(got, BaseException)
    assert [r.partition for r in got] == [str(i) for i in range(5)]


@pytest.fixture(autouse=True)
def _no_threads_left() -> Any:
    yield
    deadline = time.monotonic() + 5
    while any(t.name.startswith("deltaextras") for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
