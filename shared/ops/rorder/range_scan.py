"""The streaming scan of value-range planning: one pass over the log that keeps, per live file, only
compact columns (the ``by`` bounds parsed from its statistics, size, records, deleted rows, the code of
the rewrite that wrote it) and never builds a file's action.

The checkpoint is read in Arrow batches with a column projection and its statistics parsed by Arrow's
JSON reader; only the commits after the checkpoint are replayed. The scan gives up (None) whenever a
file's statistics do not tell its bounds, or the log is unusual (a JSON checkpoint, statistics of an
unexpected shape): the planner then reads the files one by one as before (footers of files without
statistics, refusal by name). :func:`live_files` reads the actions of the few files a plan hands out.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.core.partition_snapshot import read_head
    >>> from deltaextras.core.storage import TableStorage
    >>> path = tempfile.mkdtemp()
    >>> for lo in (0, 10):
    ...     write_deltalake(path, pa.table({"k": [lo, lo + 5]}), mode="append")
    >>> cols = scan_ranges(read_head(TableStorage(path)), "k", "long", "")
    >>> cols.bounds.low.tolist(), cols.bounds.high.tolist(), cols.records.tolist()
    ([0, 10], [5, 15], [2, 2])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ...core.actions import Add, Remove, decode_checkpoint_batch, decode_commit
from ...core.arrays import (
    bool_numpy,
    index_array,
    int64_numpy,
    nullable_string_array,
    one_array,
    scalar,
    string_array,
)
from ...core.partition_snapshot import LogHead, _add_projection, add_batches
from ...core.snapshot import LiveFile
from .rewrite.layout import LAYOUT_TAG, RUN_TAG
from .tally import PLAN_BATCH_ROWS, _child, _fid, _projection, _tail_python
from .value_ranges import INTEGER_TYPES, FileBounds


@dataclass
class RangeColumns:
    """Per live file (in log order): its path (Arrow), and numpy columns; ``bounds`` indexes them."""

    paths: pa.Array
    size: np.ndarray
    records: np.ndarray
    deleted: np.ndarray
    run: np.ndarray  # code of the rewrite that wrote a file in layout, -1 for the others
    bounds: FileBounds

    def sums(self, units: list[np.ndarray]) -> UnitSums:
        """Per unit (a non-empty index array each), what its files add up to, for all units at once."""
        every = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
        files = np.array([len(ix) for ix in units], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(files)[:-1])) if units else files
        if not len(every):
            return UnitSums(files, files, files, files, files, files)

        def add(values: np.ndarray) -> np.ndarray:
            return np.add.reduceat(values, starts)

        run = self.run[every]
        return UnitSums(
            files,
            add(self.size[every]),
            add(self.records[every]),
            add(self.deleted[every]),
            np.minimum.reduceat(run, starts),
            np.maximum.reduceat(run, starts),
        )

    def pairs(self, ix: np.ndarray) -> list[tuple[str, int]]:
        """(path, size) of the given files, in log order."""
        ix = np.sort(ix)
        return list(zip(self.paths.take(index_array(ix)).to_pylist(), self.size[ix].tolist(), strict=True))

    def path_chars(self, units: list[np.ndarray]) -> np.ndarray:
        """Per unit (a non-empty index array each), the characters of its files' paths, for all at once."""
        if not units:
            return np.zeros(0, dtype=np.int64)
        every = np.concatenate(units)
        starts = np.concatenate(([0], np.cumsum([len(ix) for ix in units])[:-1]))
        return np.add.reduceat(int64_numpy(pc.utf8_length(self.paths.take(index_array(every)))), starts)


SCAN_THREADS = 2  # threads parsing statistics while the next checkpoint batch is decoded
_OPEN, _CLOSE = ord("{"), ord("}")
_FALSE = scalar(False, pa.bool_())
_LAYOUT_KEY, _RUN_KEY = scalar(LAYOUT_TAG, pa.string()), scalar(RUN_TAG, pa.string())


@dataclass
class UnitSums:
    """Per unit: its files, bytes, records, deleted rows, and lowest and highest run code."""

    files: np.ndarray
    bytes: np.ndarray
    records: np.ndarray
    deleted: np.ndarray
    run_low: np.ndarray
    run_high: np.ndarray


class ListedFiles(Sequence[tuple[str, int]]):
    """One unit's (path, size) pairs for its work message, in log order, read from the scan's columns when
    first used (a plan of a million files keeps no Python string per file until messages are built).

    Example:
        >>> import numpy as np, pyarrow as pa
        >>> b = FileBounds.of(["a", "b"], [10, 20], [1, 1], [0, 5], [1, 6], [0, 0])
        >>> cols = RangeColumns(pa.array(["a", "b"]), b.size, b.records, np.zeros(2, int), np.full(2, -1), b)
        >>> files = ListedFiles(cols, np.array([1, 0]))
        >>> len(files), list(files), files == [("a", 10), ("b", 20)]
        (2, [('a', 10), ('b', 20)], True)
    """

    def __init__(self, columns: RangeColumns, ix: np.ndarray) -> None:
        self._columns, self._ix = columns, ix
        self._pairs: list[tuple[str, int]] | None = None

    def _load(self) -> list[tuple[str, int]]:
        if self._pairs is None:
            self._pairs = self._columns.pairs(self._ix)
        return self._pairs

    def __len__(self) -> int:
        return len(self._ix)

    def __getitem__(self, i: Any) -> Any:
        return self._load()[i]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._load())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._load() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._load()))

    def __repr__(self) -> str:
        return repr(self._load())


class _GiveUp(Exception):
    """A file's statistics do not tell its bounds (the planner reads files one by one)."""


def scan_ranges(head: LogHead, physical: str, delta_type: Any, signature: str) -> RangeColumns | None:
    """The compact columns of every live file, or None when some file's statistics do not tell."""
    if head.checkpoint_is_json:
        return None
    try:
        return _scan(head, physical, delta_type, signature)
    except (_GiveUp, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _scan(head: LogHead, physical: str, delta_type: Any, signature: str) -> RangeColumns:
    tail, touched = _tail_python(head)
    touched_fids = string_array(sorted(p + "\x00" + (d or "") for p, d in touched))
    codes: dict[str, int] = {}
    parts: list[dict[str, Any]] = []
    # Parsing a batch's statistics (Arrow, without the GIL) runs on a second thread while the next batch
    # is decoded; run codes are numbered here, in log order.
    with ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="deltaextras-scan") as pool:
        pending: deque[Future[dict[str, Any]]] = deque()
        for batch in add_batches(head, _range_projection, PLAN_BATCH_ROWS):
            add = batch.column("add")
            if add.null_count:
                add = add.filter(add.is_valid())
            if len(touched_fids) and len(add):
                add = add.filter(pc.invert(pc.is_in(_fid(add), value_set=touched_fids)))
            if len(add):
                pending.append(pool.submit(_part, add, physical, delta_type, signature))
            while len(pending) > SCAN_THREADS:
                parts.append(_numbered(pending.popleft().result(), codes))
        while pending:
            parts.append(_numbered(pending.popleft().result(), codes))
    if tail:
        entries = list(tail.values())
        layout = nullable_string_array([e.tags.get(LAYOUT_TAG) for e in entries])
        run = nullable_string_array([e.tags.get(RUN_TAG) for e in entries])
        part = _assemble(
            string_array([e.path for e in entries]),
            np.array([e.size for e in entries], dtype=np.int64),
            nullable_string_array([e.stats for e in entries]),
            np.array([e.deleted for e in entries], dtype=np.int64),
            _settled(layout, run, signature),
            physical,
            delta_type,
        )
        parts.append(_numbered(part, codes))
    return _columns(parts, delta_type)


def _range_projection(schema: pa.Schema) -> list[str]:
    """The checkpoint columns the scan reads: the tally's, without partition values.

    Example:
        >>> _range_projection(pa.schema([("add", pa.struct([("path", pa.string()), ("stats", pa.string()),
        ...     ("partitionValues", pa.map_(pa.string(), pa.string()))]))]))
        ['add.path', 'add.stats']
    """
    return [c for c in _projection(schema, with_stats=True) if c != "add.partitionValues"]


def _part(add: pa.Array, physical: str, delta_type: Any, signature: str) -> dict[str, Any]:
    stats = _child(add, "stats")
    if stats is None:
        raise _GiveUp
    tags = _child(add, "tags")
    none = pa.nulls(len(add), pa.string())
    layout = pc.map_lookup(tags, _LAYOUT_KEY, "first") if tags is not None else none
    run = pc.map_lookup(tags, _RUN_KEY, "first") if tags is not None else none
    dv = _child(add, "deletionVector")
    deleted = int64_numpy(pc.struct_field(dv, "cardinality")) if dv is not None else np.zeros(len(add), dtype=np.int64)
    return _assemble(
        pc.struct_field(add, "path"),
        int64_numpy(pc.struct_field(add, "size")),
        stats,
        deleted,
        _settled(layout, run, signature),
        physical,
        delta_type,
    )


def _settled(layout: pa.Array, run: pa.Array, signature: str) -> pa.Array:
    """The run tag of each file in layout (its layout tag is the plan's signature), null for the others."""
    in_layout = pc.fill_null(pc.equal(layout, scalar(signature, pa.string())), _FALSE)
    return pc.if_else(in_layout, run, pa.nulls(len(run), pa.string()))


def _numbered(part: dict[str, Any], codes: dict[str, int]) -> dict[str, Any]:
    """A part with its files' run tags turned into codes, numbered in the order the scan meets them."""
    settled = part.pop("settled")
    distinct = pc.unique(settled).drop_null()
    table = np.array([codes.setdefault(r, len(codes)) for r in distinct.to_pylist()] + [-1], dtype=np.int64)
    at = pc.fill_null(pc.index_in(settled, value_set=distinct), scalar(len(distinct), pa.int32()))
    part["run"] = table[int64_numpy(at)]
    return part


def _assemble(
    paths: pa.Array,
    size: np.ndarray,
    stats: pa.Array,
    deleted: np.ndarray,
    settled: pa.Array,
    physical: str,
    delta_type: Any,
) -> dict[str, Any]:
    parsed = _parse_stats(stats, physical, delta_type)
    records, nulls = parsed["numRecords"], pc.struct_field(parsed["nullCount"], physical)
    if records.null_count or nulls.null_count:
        raise _GiveUp
    lo, hi = pc.struct_field(parsed["minValues"], physical), pc.struct_field(parsed["maxValues"], physical)
    some = pc.not_equal(nulls, records)
    if pc.any(pc.and_(some, pc.or_(lo.is_null(), hi.is_null()))).as_py():
        raise _GiveUp
    return {
        "path": paths,
        "size": size,
        "records": int64_numpy(records),
        "deleted": deleted,
        "nulls": int64_numpy(nulls),
        "present": bool_numpy(some),
        "low": _values(lo, some, delta_type),
        "high": _values(hi, some, delta_type),
        "settled": settled,
    }


def _values(values: pa.Array, some: pa.Array, delta_type: Any) -> np.ndarray:
    """A bound per file as int64 (0 where a file holds no value) or as Python strings (None there)."""
    if delta_type in INTEGER_TYPES:
        out = int64_numpy(values)
        out[~bool_numpy(some)] = 0
        return out
    out = np.empty(len(values), dtype=object)
    out[:] = pc.if_else(some, values, pa.nulls(len(values), values.type)).to_pylist()
    return out


def _parse_stats(stats: pa.Array, physical: str, delta_type: Any) -> dict[str, pa.Array]:
    """A file's ``numRecords``, and ``minValues`` / ``maxValues`` / ``nullCount`` of the ``by`` column,
    parsed by Arrow's JSON reader straight from the statistics' string buffer (one object per file)."""
    value = pa.int64() if delta_type in INTEGER_TYPES else pa.string()
    schema = pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", pa.struct([(physical, value)])),
            ("maxValues", pa.struct([(physical, value)])),
            ("nullCount", pa.struct([(physical, pa.int64())])),
        ]
    )
    data = _objects(stats)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    block = max(1 << 20, min(data.size + 1, 1 << 30))
    out = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=block), parse_options=options)
    if out.num_rows != len(stats):  # some file's statistics are not one JSON object
        raise _GiveUp
    return {name: one_array(out.column(name)) for name in out.column_names}


def _objects(stats: pa.Array) -> pa.Buffer:
    """The statistics of every file as one buffer of JSON objects one after the other (Arrow's reader parses
    such a stream as one record per object). Each file's statistics must start with ``{`` and end with
    ``}``: one object at least each, so that as many records as files means one each."""
    if stats.null_count:
        raise _GiveUp
    if pa.types.is_large_string(stats.type):
        offsets = np.frombuffer(stats.buffers()[1], dtype=np.int64)
    elif pa.types.is_string(stats.type):
        offsets = np.frombuffer(stats.buffers()[1], dtype=np.int32)
    else:
        raise _GiveUp
    offsets = offsets[stats.offset : stats.offset + len(stats) + 1]
    if not len(stats):
        return pa.py_buffer(b"")
    start, end = int(offsets[0]), int(offsets[-1])
    chars = np.frombuffer(stats.buffers()[2], dtype=np.uint8)
    if (
        bool((offsets[1:] <= offsets[:-1]).any())
        or bool((chars[offsets[:-1]] != _OPEN).any())
        or bool((chars[offsets[1:] - 1] != _CLOSE).any())
    ):
        raise _GiveUp
    return stats.buffers()[2][start:end]


def _columns(parts: list[dict[str, Any]], delta_type: Any) -> RangeColumns:
    def cat(name: str) -> np.ndarray:
        if not parts:
            strings = name in ("low", "high") and delta_type not in INTEGER_TYPES
            return np.zeros(0, dtype=object if strings else np.int64)
        return np.concatenate([p[name] for p in parts])

    size = cat("size")
    present = cat("present").astype(bool)
    bounds = FileBounds(np.arange(len(size)), size, cat("records"), cat("low"), cat("high"), cat("nulls"), present)
    paths = pa.chunked_array([p["path"] for p in parts], pa.string()).cast(pa.large_string()).combine_chunks()
    return RangeColumns(paths, size, bounds.records, cat("deleted"), cat("run"), bounds)


def live_files(head: LogHead, paths: set[str]) -> dict[str, LiveFile]:
    """The live files of the given paths, in log order, read in one filtered pass over the log."""
    adds: dict[tuple[str, str | None], Add] = {}
    wanted = string_array(sorted(paths))
    for batch in add_batches(head, _add_projection):
        mask = pc.fill_null(pc.is_in(pc.struct_field(batch.column("add"), "path"), value_set=wanted), False)
        if pc.any(mask).as_py():
            for action in decode_checkpoint_batch(batch.filter(mask)):
                assert isinstance(action, Add)
                adds[action.file_id] = action
    for v, data in head.tail:
        actions = decode_commit(data, v)
        for a in actions:
            if isinstance(a, Remove):
                adds.pop(a.file_id, None)
        for a in actions:
            if isinstance(a, Add) and a.path in paths:
                adds[a.file_id] = a
    logical = {head.physical(c): c for c in head.partition_columns}
    return {
        a.path: LiveFile(a, {logical.get(k, k): v for k, v in (a.partition_values or {}).items()}, head.storage.uri)
        for a in adds.values()
    }
