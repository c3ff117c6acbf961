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

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ...core.actions import Add, Remove, decode_checkpoint_batch, decode_commit
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

    def pairs(self, ix: np.ndarray) -> list[tuple[str, int]]:
        """(path, size) of the given files, in log order."""
        return self.pairs_of([ix])[0]

    def pairs_of(self, units: list[np.ndarray]) -> list[list[tuple[str, int]]]:
        """(path, size) of each unit's files, in log order (one gather for all units)."""
        if not units:
            return []
        every = np.concatenate([np.sort(ix) for ix in units])
        pairs = list(zip(self.paths.take(pa.array(every)).to_pylist(), self.size[every].tolist(), strict=True))
        ends = np.cumsum([len(ix) for ix in units]).tolist()
        return [pairs[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


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
    touched_fids = pa.array(sorted(p + "\x00" + (d or "") for p, d in touched), pa.string())
    codes: dict[str, int] = {}
    parts: list[dict[str, Any]] = []
    for batch in add_batches(head, _range_projection, PLAN_BATCH_ROWS):
        add = batch.column("add")
        if add.null_count:
            add = add.filter(add.is_valid())
        if len(touched_fids) and len(add):
            add = add.filter(pc.invert(pc.is_in(_fid(add), value_set=touched_fids)))
        if len(add):
            parts.append(_part(add, physical, delta_type, signature, codes))
    if tail:
        entries = list(tail.values())
        layout = pa.array([e.tags.get(LAYOUT_TAG) for e in entries], pa.string())
        run = pa.array([e.tags.get(RUN_TAG) for e in entries], pa.string())
        parts.append(
            _assemble(
                pa.array([e.path for e in entries], pa.string()),
                pa.array([e.size for e in entries], pa.int64()),
                pa.array([e.stats for e in entries], pa.string()),
                pa.array([e.deleted for e in entries], pa.int64()),
                _run_codes(layout, run, signature, codes),
                physical,
                delta_type,
            )
        )
    return _columns(parts, delta_type)


def _range_projection(schema: pa.Schema) -> list[str]:
    """The checkpoint columns the scan reads: the tally's, without partition values.

    Example:
        >>> _range_projection(pa.schema([("add", pa.struct([("path", pa.string()), ("stats", pa.string()),
        ...     ("partitionValues", pa.map_(pa.string(), pa.string()))]))]))
        ['add.path', 'add.stats']
    """
    return [c for c in _projection(schema, with_stats=True) if c != "add.partitionValues"]


def _part(add: pa.Array, physical: str, delta_type: Any, signature: str, codes: dict[str, int]) -> dict[str, Any]:
    stats = _child(add, "stats")
    if stats is None:
        raise _GiveUp
    tags = _child(add, "tags")
    none = pa.nulls(len(add), pa.string())
    layout = pc.map_lookup(tags, pa.scalar(LAYOUT_TAG), "first") if tags is not None else none
    run = pc.map_lookup(tags, pa.scalar(RUN_TAG), "first") if tags is not None else none
    dv = _child(add, "deletionVector")
    deleted = pc.struct_field(dv, "cardinality") if dv is not None else pa.repeat(pa.scalar(0, pa.int64()), len(add))
    return _assemble(
        pc.struct_field(add, "path"),
        pc.fill_null(pc.struct_field(add, "size"), 0),
        stats,
        pc.fill_null(pc.cast(deleted, pa.int64()), 0),
        _run_codes(layout, run, signature, codes),
        physical,
        delta_type,
    )


def _run_codes(layout: pa.Array, run: pa.Array, signature: str, codes: dict[str, int]) -> np.ndarray:
    """The run code of each file in layout (its layout tag is the plan's signature), -1 for the others."""
    settled = pc.if_else(pc.fill_null(pc.equal(layout, pa.scalar(signature)), False), run, pa.scalar(None, pa.string()))
    distinct = pc.unique(settled).drop_null()
    table = np.array([codes.setdefault(r, len(codes)) for r in distinct.to_pylist()] + [-1], dtype=np.int64)
    at = pc.fill_null(pc.index_in(settled, value_set=distinct), len(distinct))
    return table[at.to_numpy(zero_copy_only=False)]


def _assemble(
    paths: pa.Array,
    size: pa.Array,
    stats: pa.Array,
    deleted: pa.Array,
    run: np.ndarray,
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
        "size": size.to_numpy(zero_copy_only=False).astype(np.int64),
        "records": records.to_numpy(zero_copy_only=False).astype(np.int64),
        "deleted": deleted.to_numpy(zero_copy_only=False).astype(np.int64),
        "nulls": nulls.to_numpy(zero_copy_only=False).astype(np.int64),
        "present": some.to_numpy(zero_copy_only=False),
        "low": _values(lo, some, delta_type),
        "high": _values(hi, some, delta_type),
        "run": run,
    }


def _values(values: pa.Array, some: pa.Array, delta_type: Any) -> np.ndarray:
    """A bound per file as int64 (0 where a file holds no value) or as Python strings (None there)."""
    if delta_type in INTEGER_TYPES:
        return pc.if_else(some, pc.fill_null(values, 0), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = pc.if_else(some, values, pa.scalar(None, values.type)).to_pylist()
    return out


def _parse_stats(stats: pa.Array, physical: str, delta_type: Any) -> pa.Table:
    """A file's ``numRecords``, and ``minValues`` / ``maxValues`` / ``nullCount`` of the ``by`` column,
    parsed by Arrow's JSON reader (one line per file)."""
    value = pa.int64() if delta_type in INTEGER_TYPES else pa.string()
    schema = pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", pa.struct([(physical, value)])),
            ("maxValues", pa.struct([(physical, value)])),
            ("nullCount", pa.struct([(physical, pa.int64())])),
        ]
    )
    lines = pc.binary_join_element_wise(pc.fill_null(stats, "{}"), pa.scalar("\n"), "")
    lines = pa.concat_arrays([lines.cast(pa.string())]) if isinstance(lines, pa.Array) else lines.combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data = lines.buffers()[2][start:end] if end > start else pa.py_buffer(b"")
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    block = max(1 << 20, min(end - start + 1, 1 << 30))
    out = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=block), parse_options=options)
    if out.num_rows != len(stats):  # a line break inside some file's statistics
        raise _GiveUp
    return out.combine_chunks()


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
    wanted = pa.array(sorted(paths), pa.string())
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
