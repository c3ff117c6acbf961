"""Measurements of the benchmark: wall time and peak RSS of a child process, content digests, sizes.

Peak RSS is the larger of two figures:

* the kernel's exact high-water mark of the contender process (``ru_maxrss``), read through GNU
  ``time -f %M``, which starts the contender from its own small process. (``ru_maxrss`` of a child
  this script spawns directly would be useless: Linux carries the high-water mark of the forked
  copy of the parent across ``exec``, so every child would report at least the parent's RSS);
* the sum of the RSS of the contender and all its descendants, sampled every 20 ms with psutil by a
  thread while the main thread blocks in ``wait``. It counts pages shared between processes once per
  process, and can miss peaks shorter than the interval.

Without ``/usr/bin/time`` only the sampled figure is used.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import unquote

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

SAMPLE_SECONDS = 0.02


@dataclass
class ProcessRun:
    """Outcome of one child process."""

    wall_s: float
    peak_rss_bytes: int
    sampled_rss_bytes: int
    kernel_maxrss_bytes: int
    returncode: int
    stdout_tail: str
    stderr_tail: str

    @property
    def ok(self) -> bool:
        """Whether the process exited with status 0."""
        return self.returncode == 0


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total


def _tail(handle: IO[bytes], limit: int = 2000) -> str:
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")[-limit:]


GNU_TIME = shutil.which("time", path="/usr/bin:/bin")


def _read_maxrss_kb(path: str) -> int:
    """The last integer line GNU time wrote (``%M``, kilobytes); 0 when there is none."""
    try:
        lines = Path(path).read_text().split()
    except OSError:
        return 0
    for token in reversed(lines):
        if token.isdigit():
            return int(token)
    return 0


def run_measured(
    cmd: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None, timeout: float = 3600.0
) -> ProcessRun:
    """Run ``cmd`` to completion; measure its wall time and the peak RSS of its process tree."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile(suffix=".maxrss") as rss_file,
    ):
        full = [GNU_TIME, "-f", "%M", "-o", rss_file.name, *cmd] if GNU_TIME else list(cmd)
        start = time.perf_counter()
        child = subprocess.Popen(full, stdout=out, stderr=err, cwd=cwd, env=env, start_new_session=True)
        try:
            watched: psutil.Process | None = psutil.Process(child.pid)
        except psutil.Error:
            watched = None
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                if watched is not None:
                    peak[0] = max(peak[0], _tree_rss(watched))
                if time.perf_counter() - start > timeout:
                    # the whole session: GNU time and the contender under it
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGKILL)
                done.wait(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            returncode = child.wait()
        except BaseException:
            # Ctrl-C or a signal turned into an exception: the child runs in its own session, so it did not
            # get the interrupt; end it instead of leaving it running on its own
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
        finally:
            done.set()
        wall = time.perf_counter() - start
        sampler.join()
        kernel = _read_maxrss_kb(rss_file.name) * 1024 if GNU_TIME else 0
        return ProcessRun(
            wall_s=wall,
            peak_rss_bytes=max(peak[0], kernel),
            sampled_rss_bytes=peak[0],
            kernel_maxrss_bytes=kernel,
            returncode=returncode,
            stdout_tail=_tail(out),
            stderr_tail=_tail(err),
        )


# ----------------------------------------------------------------------------- content digest
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, element-wise on uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _column_bits(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """64-bit patterns of a numeric or temporal column plus its validity (1 = valid)."""
    t = col.type
    if pa.types.is_timestamp(t):
        col = col.cast(pa.timestamp("ns", tz=t.tz)).cast(pa.int64())
    elif pa.types.is_date(t):
        col = col.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
    elif pa.types.is_integer(t) or pa.types.is_boolean(t):
        col = col.cast(pa.int64())
    elif pa.types.is_floating(t):
        col = col.cast(pa.float64())
    else:
        raise TypeError(f"the content digest handles numeric and temporal columns, not {t}")
    valid = np.ones(len(col), np.uint64)
    if col.null_count:
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), np.uint64)
        col = col.fill_null(0)
    values = col.to_numpy(zero_copy_only=False)
    return values.view(np.uint64), valid


@dataclass(frozen=True)
class Digest:
    """Order-independent digest of a multiset of rows: row count and two 64-bit sums of row hashes."""

    rows: int
    sum1: int
    sum2: int

    def __str__(self) -> str:
        return f"{self.rows}:{self.sum1:016x}{self.sum2:016x}"


def digest_batches(batches: Iterable[pa.RecordBatch], columns: Sequence[str]) -> Digest:
    """Digest rows streamed in any order: equal multisets of rows give equal digests."""
    rows = 0
    s1 = np.uint64(0)
    s2 = np.uint64(0)
    with np.errstate(over="ignore"):
        for batch in batches:
            if batch.num_rows == 0:
                continue
            h = np.full(batch.num_rows, _GOLDEN, np.uint64)
            for i, name in enumerate(columns):
                bits, valid = _column_bits(batch.column(batch.schema.get_field_index(name)))
                h = _mix(h ^ _mix(bits + np.uint64(2 * i + 1) * _GOLDEN) ^ (valid << np.uint64(i)))
            s1 = s1 + np.sum(h, dtype=np.uint64)
            s2 = s2 + np.sum(_mix(h ^ _M1), dtype=np.uint64)
            rows += batch.num_rows
    return Digest(rows, int(s1), int(s2))


def delta_digest(table_dir: str | Path, columns: Sequence[str]) -> Digest:
    """Digest of a Delta table's rows as deltalake scans them (deletion vectors applied)."""
    from deltalake import DeltaTable

    reader = pa.RecordBatchReader.from_stream(DeltaTable(str(table_dir)).scan(columns=list(columns)))
    return digest_batches(reader, columns)


def parquet_digest(paths: Sequence[str | Path], columns: Sequence[str]) -> Digest:
    """Digest of the rows of plain Parquet files."""

    def batches() -> Iterable[pa.RecordBatch]:
        for path in paths:
            with pq.ParquetFile(path) as pf:
                yield from pf.iter_batches(columns=list(columns))

    return digest_batches(batches(), columns)


def delta_partition_files(table_dir: str | Path, column: str, value: object) -> list[tuple[str, int]]:
    """``(absolute path, size)`` of the live files of one partition of a local Delta table."""
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(table_dir)).get_add_actions(flatten=True))
    out: list[tuple[str, int]] = []
    for row in actions.select(["path", "size_bytes", f"partition.{column}"]).to_pylist():
        if str(row[f"partition.{column}"]) == str(value):
            out.append((str(Path(table_dir) / unquote(row["path"])), int(row["size_bytes"])))
    return out
