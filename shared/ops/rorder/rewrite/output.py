"""The rewrite's output: files that roll over at the target size on value boundaries, each read back
whole before it is reported, and what a rewrite produced (:class:`RewriteResult`)."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ....core.stats import StatsCollector
from ....errors import CorruptDataError
from ...common.scratch import scratch_dir
from ..options import FOOTER_SHARE

ROW_GROUP_MAX_BYTES = 128 * 1024 * 1024
SAMPLE_ROWS = 4096  # rows of the first value written to measure a row group's footer bytes
OFFSETS_PER_CHUNK = 5  # file offsets a column chunk's footer entry names (chunk, data, dictionary, two indexes)
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_HIVE_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass
class OutputFile:
    """One written file, ready to become an ``add`` action."""

    key: str
    path: str  # percent-encoded, as the log wants it
    size: int
    rows: int
    row_groups: int
    stats: dict[str, Any]
    tags: dict[str, str]
    partition_values: dict[str, str | None] = field(default_factory=dict)  # as the log keys them


@dataclass
class RewriteResult:
    """What a rewrite produced and what it read."""

    outputs: list[OutputFile] = field(default_factory=list)
    rows_in: int = 0
    rows_out: int = 0
    duplicates_removed: int = 0
    deleted_rows_dropped: int = 0
    passes: int = 0
    spilled_bytes: int = 0
    values: int = 0
    # Wall seconds per phase (open, plan, spill, read, dedup, sort, take, order, encode, stats, finish);
    # phases that run on several threads at once add up each thread's time.
    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _numbers: Iterator[int] = field(default_factory=itertools.count, repr=False, compare=False)

    def add_output(self, output: OutputFile) -> None:
        """Record a file written to storage (thread-safe: output files may be written side by side)."""
        with self._lock:
            self.outputs.append(output)

    def file_number(self) -> int:
        """The next output file's sequence number in this rewrite (thread-safe)."""
        with self._lock:
            return next(self._numbers)


@contextlib.contextmanager
def timed(result: RewriteResult, phase: str) -> Iterator[None]:
    """Add the wall time of a block to ``result.seconds[phase]``.

    Example:
        >>> result = RewriteResult()
        >>> with timed(result, "encode"):
        ...     pass
        >>> list(result.seconds)
        ['encode']
    """
    started = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - started
        with result._lock:
            result.seconds[phase] = result.seconds.get(phase, 0.0) + elapsed


def partition_dir(partition_values: dict[str, str | None], physical: dict[str, str]) -> str:
    """Hive-style directory of a partition, escaped so any value makes a valid key.

    Example:
        >>> partition_dir({"node_id_range": "3"}, {})
        'node_id_range=3'
        >>> partition_dir({"x": "A/B"}, {})
        'x=A%2FB'
    """
    parts = []
    for col, value in partition_values.items():
        text = _HIVE_NULL if value is None else "".join(c if c in _HIVE_SAFE else f"%{ord(c):02X}" for c in value)
        parts.append(f"{physical.get(col, col)}={text}")
    return "/".join(parts)


class FooterGauge:
    """Estimates the footer a file of ``n`` row groups gets: the bytes of a file without row groups plus a
    row group's share, measured once on a sample value (at most ``SAMPLE_ROWS`` of its rows) written with the
    same settings, and raised to the largest share a finished file showed (its string statistics may be
    longer than the sample's). A row group's entry names file offsets (about five a column chunk), whose
    varints grow as the file does: the sample's share is corrected for the offsets of a file of the size given.

    Example:
        >>> gauge = FooterGauge(pa.table({"k": [1], "v": [0.5]}), {})
        >>> 0 < gauge.base < gauge.bytes(1, 0) < gauge.bytes(2, 0) < gauge.bytes(2, 1 << 30)
        True
    """

    def __init__(self, sample: pa.Table, props: dict[str, Any]) -> None:
        self.base, _, _ = _footer_size(sample.slice(0, 0), props, groups=0)
        one, self.sample_bytes, leaves = _footer_size(sample.slice(0, SAMPLE_ROWS), props, groups=1)
        self.per_group = max(1.0, one - self.base)
        self.offsets = OFFSETS_PER_CHUNK * leaves + 1
        self.learned = False

    def bytes(self, groups: int, file_bytes: int) -> float:
        """The estimated footer of a file of ``groups`` row groups and ``file_bytes`` bytes of data."""
        per_group = self.per_group
        if not self.learned:
            per_group += self.offsets * max(0, _varint_len(file_bytes) - _varint_len(self.sample_bytes))
        return self.base + groups * per_group

    def learn(self, footer: int, groups: int) -> None:
        """Take in a finished file's footer."""
        if groups:
            share = (footer - self.base) / groups
            self.per_group = share if not self.learned else max(self.per_group, share)
            self.learned = True


def _varint_len(offset: int) -> int:
    """Bytes of a file offset in the footer (a zigzag varint)."""
    return max(1, -(-(2 * offset + 1).bit_length() // 7))


def footer_budget(max_footer_bytes: int, data_bytes: int, values: int) -> float:
    """The footer a file may reach: ``max_footer_bytes``, or ``1/FOOTER_SHARE`` of its mean value's bytes
    when that is more (values large enough that their footer entries are noise beside them).

    Example:
        >>> footer_budget(16384, data_bytes=30_000, values=30), footer_budget(16384, 3 << 20, 16)
        (16384, 49152.0)
    """
    return max(max_footer_bytes, data_bytes / max(1, values) / FOOTER_SHARE)


def _footer_size(rows: pa.Table, props: dict[str, Any], groups: int) -> tuple[int, int, int]:
    """(footer bytes, file bytes, leaf columns) of ``rows`` written as ``groups`` (0 or 1) row groups."""
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, rows.schema, **props) as writer:
        if groups:
            writer.write_table(rows)
    md = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata
    return md.serialized_size, len(buf.getvalue()), md.num_columns


class OutputWriter:
    """Writes value runs into files that roll over at ``target_file_size`` on value boundaries, and before
    their footer passes :func:`footer_budget` (used by
    :class:`deltaextras.ops.rorder.rewrite.rewrite.PartitionRewriter`, whose module example shows a whole
    rewrite)."""

    def __init__(self, rewriter: Any, props: dict[str, Any]) -> None:
        # rewriter: the PartitionRewriter (snapshot, partition_values, storage, target, statistics columns,
        # options, result, tags, on_output)
        self.rw = rewriter
        self.props = props
        schema = rewriter.snapshot.schema
        ordered = {c: rewriter.partition_values[c] for c in schema.partition_columns if c in rewriter.partition_values}
        physical = {c: schema.partition_physical(c) for c in ordered}
        self.dir = partition_dir(ordered, physical)
        self.log_partition_values = {physical[c]: v for c, v in ordered.items()}
        self.local = rewriter.storage.local_root
        self.tmpdir = None if self.local else scratch_dir("out")
        self.files: list[OutputFile] = []
        self.row_group_rows = 1
        self._writer: pq.ParquetWriter | None = None
        self._sink: Any = None
        self._key = ""
        self._local_path = ""
        self._stats: StatsCollector | None = None
        self._rows = 0
        self._groups = 0
        self._values = 0
        self._gauge: FooterGauge | None = None
        self._next_cut = 0  # index of the first cut this file's values are below
        self._nulls = False  # whether this file holds the null value
        self._pending: list[pa.Table] = []  # small values not written yet (min_row_group_bytes)
        self._pending_bytes = 0

    def _crosses(self, table: pa.Table, row: int) -> bool:
        """Whether the value starting at ``row`` must start a new file: it reaches the next cut point, or
        it is null (nulls sort last) and the file holds values."""
        cuts = self.rw.cuts
        v = table.column(self.rw.by)[row].as_py()
        if v is None:
            crossed = not self._nulls
            self._nulls = True
            return crossed
        v = v.isoformat() if hasattr(v, "isoformat") else v
        crossed = False
        while self._next_cut < len(cuts) and v >= cuts[self._next_cut]:
            self._next_cut += 1
            crossed = True
        return crossed

    def _open(self) -> None:
        name = f"part-{self.rw.result.file_number():05d}-{uuid.uuid4()}.c000.zstd.parquet"
        self._key = f"{self.dir}/{name}" if self.dir else name
        if self.local is not None:
            self._local_path = str(self.local / self._key)
            os.makedirs(os.path.dirname(self._local_path), exist_ok=True)
        else:
            self._local_path = os.path.join(self.tmpdir or "", name)
        self._sink = pa.OSFile(self._local_path, "wb")
        self._writer = pq.ParquetWriter(self._sink, self.rw.target, **self.props)
        self._stats = StatsCollector(
            getattr(self.rw, "stats_target", self.rw.target),
            indexed_columns=self.rw.indexed_columns,
            stats_columns=self.rw.stats_columns,
            always=self.rw.always_stats,
        )
        self._rows = self._groups = self._values = 0

    def _footer_full(self) -> bool:
        """Whether one more row group would take this file's footer near its budget (within a row group's
        share: the estimate is a mean, a file's statistics vary)."""
        assert self._gauge is not None
        data = self._sink.tell()
        budget = footer_budget(self.rw.options.max_footer_bytes, data, self._values)
        return self._gauge.bytes(self._groups + 2, data) > budget

    def write_values(self, table: pa.Table, ends: list[int]) -> int:
        """Write consecutive values of ``table`` — value k is rows ``ends[k]`` to ``ends[k + 1]`` (offsets
        into ``table``) — a row group each (more when one is larger than ``ROW_GROUP_MAX_BYTES``; neighbouring
        values smaller than ``min_row_group_bytes`` together, until their row group holds that many bytes),
        rolling over to a new file at ``target_file_size`` or before the footer passes its budget
        (:func:`footer_budget`); returns the values written. Statistics
        are folded once per file's share of the table, not once per value.
        """
        first = ends[0]  # the first row of the table not yet in a file's statistics
        if self._gauge is None and len(ends) > 1:
            self._gauge = FooterGauge(table.slice(ends[0], ends[1] - ends[0]), self.props)
        smallest = self.rw.options.min_row_group_bytes
        for a, b in itertools.pairwise(ends):
            if self.rw.cuts and self._crosses(table, a) and self._writer is not None:
                self._flush()
                if a > first:
                    self._fold(table.slice(first, a - first))
                self._finish()
            if self._writer is None:
                self._open()
                first = a
            assert self._writer is not None
            self._values += 1
            value = table.slice(a, b - a)
            if smallest and (size := value.nbytes) < smallest:
                # small values share a row group (across calls too) until it holds ``smallest`` bytes
                self._pending.append(value)
                self._pending_bytes += size
                if self._pending_bytes < smallest:
                    continue
                self._flush()
            else:
                self._flush()  # the small values before a large one: a row group of their own
                self._write_group(value)
            if self._sink.tell() >= self.rw.options.target_file_size or self._footer_full():
                self._fold(table.slice(first, b - first))
                self._finish()
        if self._writer is not None and ends[-1] > first:
            self._fold(table.slice(first, ends[-1] - first))
        if self._pending:  # carried to the next call: copied, so that this table's buffers can go
            rows = pa.concat_tables(self._pending)
            self._pending = [rows.take(pa.array(range(rows.num_rows), pa.int64()))]
        return len(ends) - 1

    def _flush(self) -> None:
        """Write the small values gathered so far as one row group."""
        if self._pending:
            rows = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
            self._pending, self._pending_bytes = [], 0
            self._write_group(rows)

    def _write_group(self, rows: pa.Table) -> None:
        """Write ``rows`` (one value, or small values together) as one row group, more when it is larger
        than ``ROW_GROUP_MAX_BYTES``."""
        assert self._writer is not None
        per_row = max(1, rows.nbytes // max(1, rows.num_rows))
        cap = max(1, ROW_GROUP_MAX_BYTES // per_row)
        with timed(self.rw.result, "encode"):
            self._writer.write_table(rows, row_group_size=min(cap, max(1, rows.num_rows)))
        self._groups += -(-rows.num_rows // cap)
        self._rows += rows.num_rows

    def _fold(self, rows: pa.Table) -> None:
        assert self._stats is not None
        with timed(self.rw.result, "stats"):
            self._stats.update(rows)

    def _finish(self) -> None:
        assert self._writer is not None and self._stats is not None
        self._flush()
        self._writer.close()
        self._sink.close()
        self._writer = None
        md = pq.ParquetFile(self._local_path).metadata  # re-open: the file must read back whole
        if md.num_rows != self._rows:
            raise CorruptDataError(f"written file {self._key} reads back {md.num_rows} rows, not {self._rows}")
        if self._gauge is not None:
            self._gauge.learn(md.serialized_size, md.num_row_groups)
        size = os.path.getsize(self._local_path)
        if self.local is None:
            try:
                self.rw.storage.put(self._key, self._local_path)
            except BaseException:
                # The upload may have landed before it failed (a 503 after the write): its key is this
                # rewrite's own and never committed, so it is deleted before the error goes up.
                with contextlib.suppress(Exception):
                    self.rw.storage.delete(self._key)
                raise
            os.remove(self._local_path)
        self.files.append(
            OutputFile(
                key=self._key,
                path=quote(self._key, safe="/=-_.~"),
                size=size,
                rows=self._rows,
                row_groups=md.num_row_groups,
                stats=self._stats.to_dict(),
                tags=dict(self.rw.tags),
                partition_values=dict(self.log_partition_values),
            )
        )
        self.rw.result.add_output(self.files[-1])
        if self.rw.on_output is not None:
            self.rw.on_output(self.files[-1])

    def close(self) -> list[OutputFile]:
        if self._writer is not None:
            self._finish()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        return self.files

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            except Exception:
                pass
            self._writer = None
            if self.local is not None:
                with contextlib.suppress(OSError):
                    os.remove(self._local_path)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
