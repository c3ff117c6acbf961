"""Writing a pass's values: with one writer, each group of values gathered beside the encoding of the
previous one (:func:`write_pipelined`), or into several files at once, a thread each (:func:`write_lanes`).

A Parquet file's row groups are encoded one after the other (pyarrow does not expose Arrow's
column-parallel writer), so a second core can only help by encoding a second file. The pass's values
are split, in order, into lanes of about equal rows; each lane gathers its values' rows and writes its
own file(s), rolling over at ``target_file_size`` as one writer does. Every file keeps the layout
(ascending values, one per row group) and the lanes' value ranges do not overlap, so a reader's file
statistics still pick one file per value — whose footer is then about half as large.

Example:
    >>> lane_count(34 << 20, values=150)
    2
    >>> split_values([2, 5, 6, 10], 2)
    [[2, 5], [6, 10]]
    >>> value_groups([6, 10], 4, start=5)
    [[5, 6, 10]]
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa

from .output import OutputWriter
from .threads import HelperPool

LANES = 2  # files written at once by a one-pass rewrite
# Input bytes (on storage) each lane needs before a pass is split: its file then holds about 8 MiB
# (rewritten Parquet is about two thirds of the input), so no reader treats it as a small object to
# fetch whole (hadoop-aws's analytics stream fetched a 3.7 MiB file whole, a 7.4 MiB one by ranges).
MIN_LANE_BYTES = 12 * 1024 * 1024


def lane_count(input_bytes: int, values: int) -> int:
    """How many files a one-pass rewrite writes at once: ``LANES`` once each lane gets at least
    ``MIN_LANE_BYTES`` of input and a value of its own, else one.

    Example:
        >>> lane_count(10 << 20, values=150), lane_count(1 << 30, values=1)
        (1, 1)
    """
    return max(1, min(LANES, values, input_bytes // MIN_LANE_BYTES))


def split_values(run_ends: list[int], lanes: int) -> list[list[int]]:
    """Where each value's rows end, split into ``lanes`` consecutive shares of about equal rows (each
    share ends at the value boundary nearest its even share of the rows; none is empty).

    Example:
        >>> split_values([1, 2, 100], 2), split_values([5], 2)
        ([[1, 2], [100]], [[5]])
    """
    shares: list[list[int]] = []
    rest = list(run_ends)
    total = run_ends[-1] if run_ends else 0
    for k in range(1, lanes):
        if len(rest) < 2:
            break
        goal = total * k / lanes
        # The boundary nearest the goal, leaving at least one value for the lanes after this one.
        cut = min(range(1, len(rest)), key=lambda i: abs(rest[i - 1] - goal))
        shares.append(rest[:cut])
        rest = rest[cut:]
    shares.append(rest)
    return shares


def value_groups(run_ends: list[int], rows: int, start: int = 0) -> list[list[int]]:
    """Consecutive values grouped into about ``rows`` rows each, as boundary lists ``[start, end1, ...]``.

    Example:
        >>> value_groups([2, 5, 6, 10], 4)
        [[0, 2, 5], [5, 6, 10]]
    """
    groups: list[list[int]] = []
    current = [start]
    for end in run_ends:
        current.append(end)
        if end - current[0] >= rows:
            groups.append(current)
            current = [end]
    if len(current) > 1:
        groups.append(current)
    return groups or [[start]]


def write_lanes(lanes: list[tuple[OutputWriter, list[list[int]]]], gather: Callable[[list[int]], pa.Table]) -> int:
    """Write each lane's value groups (``[start, end1, ...]``, rows gathered by ``gather``) with its own
    writer — the first lane on the calling thread, the others on helper threads — and close each writer
    when its lane is done. Returns the values written. When a lane fails the others stop at their next
    group; every lane has stopped before the first error is raised, so the caller may then discard the
    writers' files.
    """
    stop = threading.Event()

    def run(writer: OutputWriter, groups: list[list[int]]) -> int:
        values = 0
        try:
            for ends in groups:
                if stop.is_set():
                    return values
                table = gather(ends)
                values += writer.write_values(table, [end - ends[0] for end in ends])
                # The group's pages stay with this thread for the next group's gather (lanes run only in a
                # one-pass rewrite, whose input is in memory until the end): returning them to the system
                # after every group only faulted them in again (5 % of the rewrite's wall time at x1).
                del table
            writer.close()
        except BaseException:
            stop.set()
            raise
        return values

    with HelperPool(max(1, len(lanes) - 1)) as pool:
        others = [pool.submit(run, writer, groups) for writer, groups in lanes[1:]]
        try:
            written = run(*lanes[0])
        except BaseException:
            for future in others:
                future.exception()  # wait: no lane may still write when the caller cleans up
            raise
        for future in others:
            future.exception()  # every lane stopped before any error is raised
        for future in others:
            written += future.result()
    return written


def write_pipelined(writer: OutputWriter, groups: list[list[int]], gather: Callable[[list[int]], pa.Table]) -> int:
    """Write value groups with one writer, each group gathered on a helper thread while the previous
    one is encoded (one lane: a multi-pass rewrite, or a small one). Returns the values written.
    Groups are a few large hand-overs between the threads: on a busy machine each waits for a time slice.
    """
    written = 0
    with HelperPool(1) as pool:
        pending = pool.submit(gather, groups[0])
        for k, ends in enumerate(groups):
            table = pending.result()
            if k + 1 < len(groups):
                pending = pool.submit(gather, groups[k + 1])
            written += writer.write_values(table, [end - ends[0] for end in ends])
            del table
    return written
