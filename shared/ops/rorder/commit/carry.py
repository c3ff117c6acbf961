"""Carry concurrent deletes onto a rewrite: the row-level conflict resolution of ``rorder``.

A rewrite reads its inputs at version *R* and writes sorted outputs. When a commit after *R* (a
*winner*) deleted rows of an input — a new deletion vector on the same file, or the file removed by a
DELETE, UPDATE or MERGE (``dataChange: true``; the rows that survived or were updated live in the
winner's new files, which stay) — the rewrite still holds those rows. Instead of failing, the commit
carries the deletes forward:

1. per input, the rows the winners deleted: the final vector minus the vector we read, or every row
   we read when the input is gone;
2. those rows are read from the input file (by row index: only the row groups that hold them);
3. they are found *by value* in our outputs, which are sorted by the row-group column: the outputs'
   row-group statistics name the few row groups that can hold each value, those are read and matched
   on every column with a multiset (identical rows are interchangeable). With ``unique_by`` an output
   row stands for every identical input row; it is deleted only when all of them were;
4. the output rows get deletion vectors (written by the shared writer of :mod:`deltaextras.core.dv`),
   the commit retires each input as it is now (the winner's vector), and commits at the next version.

Anything that cannot be mapped exactly stays a conflict with its reason: a compaction removed an input
(``dataChange: false``), a copy-on-write change rewrote an input of a ``unique_by`` rewrite (the rows
it kept would need de-duplicating against ours), a vector lost rows, the table tracks row ids and
``unique_by`` merged rows, the table has deletion vectors disabled, or a deleted row is not found in the
outputs. On a table that tracks rows, each deleted row is matched with its row id (stored, or its file's
``baseRowId`` + position), so the output row that goes is the one with that id, never an identical twin.
(A metadata or protocol change never reaches here: the transaction raises it.)

Why by value and not an input→output row map: the rewrite stays as it is (no extra bookkeeping on
its hot path, no map of 8 bytes per row held or spilled for a conflict that rarely happens), and the
cost is paid only when a delete is carried, in proportion to the rows deleted (see docs/conflicts.md).

Example (rows matched one to one, identical rows included; -1: no equal row):
    >>> import pyarrow as pa
    >>> deleted = pa.table({"k": [1, 1, 2], "x": [0.5, 0.5, float("nan")]})
    >>> output = pa.table({"k": [2, 1, 1, 1, 3], "x": [float("nan"), 0.5, 0.5, 0.5, 0.5]})
    >>> keys, found = _dense_keys(deleted, output)
    >>> keys.tolist(), found.tolist()
    ([0, 0, 1], [1, 0, 0, 0, -1])
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from ....core import row_tracking
from ....core.actions import Action, Add, Cdc, CommitInfo, DeletionVectorDescriptor, Remove
from ....core.arrays import py_value
from ....core.conflicts import Conflict, ConflictKind, Winner
from ....core.dv import build_descriptors, read_deletion_vectors
from ....core.schema import conform
from ....core.snapshot import LiveFile, TableSnapshot, open_data_file
from ....core.storage import log_path_to_key
from ....core.values import NAN_KEY, partition_values_key, value_codes, value_key
from ....errors import ConcurrentDeleteReadError
from ...common.changes import CHANGE_DIR, ChangeSink
from ...common.features import deletion_vectors_enabled
from ..rewrite.rewrite import OutputFile

log = logging.getLogger(__name__)

_UNKNOWN = object()


@dataclass
class _Input:
    """One input of the rewrite: what we read, and what it is now."""

    read: LiveFile
    current: Add | None  # the live logical file now (None: removed by a winner)
    changed: bool = False


@dataclass
class CarryResult:
    """The deletes carried so far: commits, rows, and the outputs' new vectors."""

    commits: set[int] = field(default_factory=set)
    rows: int = 0
    vectors: dict[str, DeletionVectorDescriptor] = field(default_factory=dict)  # output path -> vector
    dropped: set[str] = field(default_factory=set)  # output paths whose every row was deleted
    vector_file: str | None = None
    # change data files of dropped duplicates whose rows the winners deleted too: path -> the trimmed file
    # (None: nothing left), and how many change rows went
    changes: dict[str, Cdc | None] = field(default_factory=dict)
    changes_trimmed: int = 0


class Carrier:
    """Collects the winners that deleted rows of the inputs (the transaction's ``resolve``) and turns
    the rewrite's actions into ones that carry those deletes (``actions``)."""

    def __init__(
        self, snapshot: TableSnapshot, files: list[LiveFile], by: str, unique_by: Iterable[str], wrote: Callable
    ) -> None:
        self.snap = snapshot
        self.storage = snapshot.storage
        self.inputs = {f.path: _Input(f, f.add) for f in files}
        self.by_name = by
        self.unique_names = tuple(unique_by)
        self.deduplicated = bool(self.unique_names)
        self.wrote = wrote
        self.outputs: list[OutputFile] = []
        self.changes: list[Cdc] = []  # the rewrite's change data files (dropped duplicates as deletions)
        self.result = CarryResult()
        self._dirty = False
        self._written: set[str] = set()  # files this carry depends on: the outputs and its vector files

    # Column names are resolved only when a delete is carried (the rewrite validates them first).
    @property
    def tracked(self) -> row_tracking.RowTrackingColumns | None:
        """The materialized row id / commit version columns the outputs hold (row-tracking tables)."""
        return row_tracking.columns(self.snap.protocol, self.snap.metadata)

    @property
    def target(self) -> pa.Schema:
        """The columns rows are matched on: every column of the outputs, row ids included."""
        schema = self.snap.schema.file_schema
        tracked = self.tracked
        return schema if tracked is None else pa.schema([*schema, *tracked.fields()])

    @property
    def by(self) -> str:
        return self.snap.schema.column(self.by_name, "by").physical

    @property
    def unique(self) -> list[str]:
        names = [self.snap.schema.column(c, "unique_by").physical for c in self.unique_names]
        return [self.by] + [c for c in names if c != self.by]

    # ------------------------------------------------------------------ resolve
    def resolve(self, winners: list[Winner], conflicts: list[Conflict], version: int) -> None:
        """Fold winners that removed an input into the state; raise what cannot be carried."""
        del version
        by_version = {w.version: w for w in winners}
        for c in sorted(conflicts, key=lambda c: c.version):
            if c.kind is not ConflictKind.DELETE_READ:
                raise c.error()
            w = by_version[c.version]
            self._check_table(c)
            added = {a.path: a for a in w.adds}
            removed = {r.path: r for r in w.removes}
            for path in c.paths:
                inp = self.inputs.get(path)
                if inp is None or inp.current is None:
                    continue
                if path in added:
                    inp.current = added[path]
                elif removed[path].data_change:
                    self._check_survivors(c, inp, w)
                    inp.current = None
                else:
                    raise ConcurrentDeleteReadError(
                        f"commit {c.version} removed input {path} without changing data (a concurrent compaction); "
                        "nothing was committed. Plan again"
                    )
                inp.changed = True
                self.result.commits.add(c.version)
                self._dirty = True

    def _check_survivors(self, c: Conflict, inp: _Input, w: Winner) -> None:
        """With ``unique_by``, a winner that rewrote an input into new files of its partition (a
        copy-on-write DELETE, UPDATE or MERGE) cannot be carried: the rows it kept live on beside our
        outputs, and only a rewrite that reads them too de-duplicates as a serial order would."""
        if not self.deduplicated:
            return
        types = self.snap.schema.partition_types()
        mine = _pv(inp.read.add.partition_values, types)
        if any(a.path not in self.inputs and _pv(a.partition_values, types) == mine for a in w.adds):
            raise ConcurrentDeleteReadError(
                f"commit {c.version} rewrote input {inp.read.path} into new files (a copy-on-write change); a "
                "de-duplicating rewrite cannot carry it. Nothing was committed. Plan again"
            )

    def _check_table(self, c: Conflict) -> None:
        if self.snap.protocol.has_feature("rowTracking") and self.deduplicated:
            raise ConcurrentDeleteReadError(
                f"commit {c.version} removed input {c.paths[0]}; the table tracks row ids and unique_by merged rows "
                "of different ids, so the deleted rows cannot be told apart. Nothing was committed. Plan again"
            )
        if not deletion_vectors_enabled(self.snap):
            raise ConcurrentDeleteReadError(
                f"commit {c.version} removed input {c.paths[0]}; carrying its deletes onto the rewrite needs deletion "
                "vectors, which the table does not enable. Nothing was committed. Plan again"
            )

    # ------------------------------------------------------------------ actions
    def actions(self, actions: list[Action]) -> list[Action]:
        """The rewrite's actions with the carried deletes: inputs retired as they are now, outputs with
        their deletion vectors, metrics counted. Unchanged when nothing was deleted concurrently."""
        if not self.result.commits:
            return actions
        if self._dirty:
            self._carry()
            self._dirty = False
        out: list[Action] = []
        for a in actions:
            if isinstance(a, Remove) and a.path in self.inputs:
                inp = self.inputs[a.path]
                if inp.current is None:
                    continue  # the winner removed it already
                if inp.changed:
                    a = Add.retire(inp.current, a.deletion_timestamp or 0, data_change=a.data_change)
            elif isinstance(a, Add) and a.path in self.result.dropped:
                continue
            elif isinstance(a, Cdc) and a.path in self.result.changes:
                trimmed = self.result.changes[a.path]
                if trimmed is None:
                    continue
                a = trimmed
            elif isinstance(a, Add) and a.path in self.result.vectors:
                a = _with_vector(a, self.result.vectors[a.path])
            elif isinstance(a, CommitInfo):
                a = dataclasses.replace(a, operation_metrics=dict(a.operation_metrics or {}))
                assert a.operation_metrics is not None
                a.operation_metrics.update(
                    {
                        "numConcurrentDeletesCarried": str(len(self.result.commits)),
                        "numDeletedRowsCarried": str(self.result.rows),
                        "numDeletionVectorsAdded": str(len(self.result.vectors)),
                        "numRemovedFiles": str(sum(1 for i in self.inputs.values() if i.current is not None)),
                        "numAddedFiles": str(len(self.outputs) - len(self.result.dropped)),
                    }
                )
                if self.result.changes:
                    self._count_changes(a.operation_metrics)
            out.append(a)
        return out

    def _count_changes(self, metrics: dict[str, str]) -> None:
        """The metrics of a rewrite whose change data lost the duplicates the winners deleted."""
        left = len(self.changes) - sum(1 for c in self.result.changes.values() if c is None)
        metrics["numAddedChangeFiles"] = str(left)
        for name in ("numDeletedRows", "numDuplicateRowsRemoved"):
            if name in metrics:
                metrics[name] = str(max(0, int(metrics[name]) - self.result.changes_trimmed))

    def unused(self, committed: list[Action]) -> list[str]:
        """Storage keys of files written for the rewrite or for earlier carries that ``committed`` does
        not name (outputs whose every row was deleted, vector files of lost attempts, change data files
        written again without the duplicates the winners deleted)."""
        named = {log_path_to_key(a.path) for a in committed if isinstance(a, (Add, Cdc))}
        named |= {
            _vector_key(a.deletion_vector)
            for a in committed
            if isinstance(a, Add) and a.deletion_vector is not None and a.deletion_vector.storage_type == "u"
        }
        return sorted(self._written - named)

    # ------------------------------------------------------------------ the carry
    def _carry(self) -> None:
        """Locate every row the winners deleted in the outputs and build the outputs' vectors."""
        outputs = _OutputIndex(self.storage, self.outputs, self.target, self.by)
        types = self.snap.schema.partition_types()
        rows = 0
        self.result.changes, self.result.changes_trimmed = {}, 0
        groups: dict[tuple[tuple[str, Any], ...], list[_Input]] = {}
        for inp in self.inputs.values():
            if inp.changed:
                groups.setdefault(_pv(inp.read.add.partition_values, types), []).append(inp)
        for key, changed in groups.items():
            pieces = [t for t in (self._deleted_rows(inp) for inp in changed) if t.num_rows]
            if not pieces:
                continue
            table = pa.concat_tables(pieces).combine_chunks()
            rows += table.num_rows
            if self.deduplicated:
                table, firsts, surplus = self._complete_rows(key, table)
                self._trim_changes(key, firsts, surplus, types)
            mine = [i for i, o in enumerate(self.outputs) if _pv(o.partition_values, types) == key]
            missing = outputs.take(table, mine)
            if missing:
                raise ConcurrentDeleteReadError(
                    f"{missing} row(s) deleted concurrently from input {changed[0].read.path} could not be located in "
                    "the rewritten files; nothing was committed. Plan again"
                )
        positions = {i: bm for i, bm in outputs.taken.items() if len(bm)}
        self.result.rows = rows
        self.result.vectors = {}
        self.result.dropped = {self.outputs[i].path for i, bm in positions.items() if len(bm) >= self.outputs[i].rows}
        keep = [(i, bm) for i, bm in sorted(positions.items()) if self.outputs[i].path not in self.result.dropped]
        descriptors, writer = build_descriptors([bm for _, bm in keep])
        if writer is not None:
            self.wrote(writer.key)
            self._written.add(writer.key)
            writer.write(self.storage)
        for (i, _), d in zip(keep, descriptors, strict=True):
            self.result.vectors[self.outputs[i].path] = d
        self._written.update(o.key for o in self.outputs)
        self._written.update(log_path_to_key(c.path) for c in self.changes)  # a replaced change file goes
        log.info(
            "carried %d row(s) deleted by %d concurrent commit(s) onto %d rewritten file(s) of %s",
            rows,
            len(self.result.commits),
            len(positions),
            self.storage.uri,
        )

    def _deleted_rows(self, inp: _Input) -> pa.Table:
        """The rows of one input that were live when we read it and are deleted now."""
        f = inp.read
        pf = open_data_file(self.storage, f, pre_buffer=False)
        n = pf.metadata.num_rows
        base = read_deletion_vectors(self.storage, [f.dv])[0]
        if inp.current is None:
            gone = BitMap(range(n)) - base
        else:
            now = read_deletion_vectors(self.storage, [inp.current.deletion_vector])[0]
            if not base.issubset(now):
                raise ConcurrentDeleteReadError(
                    f"a concurrent commit gave input {f.path} a deletion vector that restores deleted rows; "
                    "nothing was committed. Plan again"
                )
            gone = now - base
        rows = _read_rows(pf, gone, self.target, f.path)
        tracked = self.tracked
        if tracked is None or not rows.num_rows:
            return rows
        # each deleted row with its id: it is matched to the output row of that id, not to an identical twin
        positions = np.frombuffer(gone.to_array(), dtype=np.uint32).astype(np.int64)
        add = f.add
        return row_tracking.materialize_at(rows, tracked, add.base_row_id, add.default_row_commit_version, positions)

    def _complete_rows(self, key: tuple[tuple[str, Any], ...], deleted: pa.Table) -> tuple[pa.Table, pa.Table, Any]:
        """With ``unique_by``: one deleted row per key whose every identical live input row was deleted
        (the output holds one row for them all); counted over the inputs we read, reading only the
        ``unique_by`` columns of the row groups whose statistics may hold the keys. Also the key of
        each deleted key (one row each) and how many of its dropped duplicates the winners deleted
        (their change data rows must go: a serial order records each deleted row once)."""
        wanted = deleted.select(self.unique)
        dk, _ = _dense_keys(wanted, None)
        dead = np.bincount(dk, minlength=int(dk.max()) + 1 if len(dk) else 0)
        live = np.zeros_like(dead)
        values = set(wanted.column(0).to_pylist())
        for inp in self.inputs.values():
            f = inp.read
            if _pv(f.add.partition_values, self.snap.schema.partition_types()) != key:
                continue
            pf = open_data_file(self.storage, f, pre_buffer=False)
            base = read_deletion_vectors(self.storage, [f.dv])[0]
            offset = 0
            for g in range(pf.metadata.num_row_groups):
                rg_rows = pf.metadata.row_group(g).num_rows
                if _may_hold(pf, g, self.by, values, self.target.field(self.by).type):
                    t = conform(pf.read_row_group(g, columns=_present(pf, self.unique)), self._unique_schema(), f.path)
                    if len(base):
                        keep = np.ones(rg_rows, dtype=bool)
                        idx = np.frombuffer(base.to_array(), dtype=np.uint32).astype(np.int64) - offset
                        keep[idx[(idx >= 0) & (idx < rg_rows)]] = False
                        t = t.filter(pa.array(keep))
                    _, ok = _dense_keys(wanted, t)
                    live += np.bincount(ok[ok >= 0], minlength=len(live))
                offset += rg_rows
        complete = dead >= live
        first = np.zeros(len(dk), dtype=bool)
        keys, firsts = np.unique(dk, return_index=True)
        first[firsts] = True
        surplus = np.minimum(dead, np.maximum(live - 1, 0))[keys]  # dropped duplicates deleted concurrently
        return deleted.filter(pa.array(first & complete[dk])), wanted.take(pa.array(firsts)), surplus

    def _trim_changes(self, key: tuple[tuple[str, Any], ...], firsts: pa.Table, surplus: Any, types: Any) -> None:
        """Write the change data file of partition directory ``key`` again without ``surplus[i]`` rows of
        the key ``firsts[i]`` (the dropped duplicates the winners deleted)."""
        if not int(surplus.sum()):
            return
        for cdc in self.changes:
            if _pv(cdc.partition_values, types) != key:
                continue
            trimmed, gone = _without_keys(self._read_change(cdc), firsts, surplus)
            self.result.changes_trimmed += gone
            # an empty file rather than none: a data-change commit without change files would read as
            # every removed row deleted and every added row inserted
            self.result.changes[cdc.path] = self._write_change(cdc, trimmed)

    def _read_change(self, cdc: Cdc) -> pa.Table:
        return pq.ParquetFile(self.storage.open_input(log_path_to_key(cdc.path), cdc.size)).read()

    def _write_change(self, cdc: Cdc, rows: pa.Table) -> Cdc:
        """A new change data file beside ``cdc`` holding ``rows``; its action."""
        directory = log_path_to_key(cdc.path).rpartition("/")[0].removeprefix(CHANGE_DIR).strip("/")
        sink = ChangeSink(self.storage, directory, self.target, cdc.partition_values)
        self.wrote(sink.key)
        self._written.add(sink.key)
        try:
            sink.write(rows)
            return dataclasses.replace(sink.action(), tags=cdc.tags, extra=dict(cdc.extra))
        except BaseException:
            sink.abort()
            raise

    def _unique_schema(self) -> pa.Schema:
        return pa.schema([self.target.field(c) for c in self.unique])


def _without_keys(rows: pa.Table, keys: pa.Table, surplus: Any) -> tuple[pa.Table, int]:
    """``rows`` without the first ``surplus[i]`` rows equal to ``keys[i]`` on the key columns; how many went.

    Example:
        >>> rows = pa.table({"k": [1.0, -0.0, 0.0, 1.0], "v": [1, 2, 3, 4]})
        >>> kept, gone = _without_keys(rows, pa.table({"k": [0.0, 1.0]}), np.array([1, 2]))
        >>> kept.to_pydict(), gone
        ({'k': [0.0], 'v': [3]}, 3)
    """
    ks, kr = _dense_keys(keys, rows.select(keys.column_names))
    budget = np.zeros(int(max(ks.max(initial=-1), kr.max(initial=-1))) + 1, dtype=np.int64)
    budget[ks] = surplus
    valid = kr >= 0
    ranks = np.full(len(kr), -1, dtype=np.int64)
    ranks[valid] = _ranks(kr[valid])
    drop = valid & (ranks < budget[np.where(valid, kr, 0)])
    return rows.filter(pa.array(~drop)), int(drop.sum())


def _column_codes(own: pa.ChunkedArray | pa.Array, other: pa.ChunkedArray | pa.Array | None) -> tuple[Any, Any]:
    """Codes of a column's values: Spark-equal values (both zeros, every NaN, null and null) share a
    code; ``other``'s values that ``own`` lacks get -1."""
    return value_codes(own, other)


def _dense_keys(own: pa.Table, other: pa.Table | None) -> tuple[Any, Any]:
    """One integer per row of ``own`` (equal rows, equal keys; dense from 0) and per row of ``other``
    (-1: no row of ``own`` is equal to it). Column codes are combined in mixed radix, re-densified
    before they could overflow."""
    n = own.num_rows
    a_key = np.zeros(n, dtype=np.int64)
    b_key = None if other is None else np.zeros(other.num_rows, dtype=np.int64)
    valid = None if other is None else np.ones(other.num_rows, dtype=bool)
    span = 1
    for name in own.column_names:
        a, b = _column_codes(own.column(name), None if other is None else other.column(name))
        card = int(a.max()) + 1 if n else 1
        if span * card >= 2**62:
            a_key, b_key, span = _densify(a_key, b_key, valid)
        a_key = a_key * card + a
        if b_key is not None and valid is not None:
            valid &= b >= 0
            b_key = np.where(valid, b_key * card + b, 0)
        span *= card
    a_key, b_key, _ = _densify(a_key, b_key, valid)
    if b_key is None or valid is None:
        return a_key, None
    known = np.zeros(int(max(a_key.max(initial=-1), b_key.max(initial=-1))) + 1, dtype=bool)
    known[a_key] = True
    return a_key, np.where(valid & known[b_key], b_key, -1)


def _densify(a_key: Any, b_key: Any, valid: Any) -> tuple[Any, Any, int]:
    """Renumber keys 0..k-1 over both sides (the other side's invalid rows keep 0 and stay invalid)."""
    both = a_key if b_key is None else np.concatenate([a_key, b_key[valid]])
    uniq, inverse = np.unique(both, return_inverse=True)
    inverse = inverse.reshape(-1)
    if b_key is None:
        return inverse, None, len(uniq)
    out = np.zeros(len(b_key), dtype=np.int64)
    out[valid] = inverse[len(a_key) :]
    return inverse[: len(a_key)], out, len(uniq)


def _ranks(keys: Any) -> Any:
    """The occurrence number of each element among equal keys (0 for the first), in order."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.r_[0, np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1] if len(keys) else np.zeros(0, int)
    run = np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.arange(len(keys)) - run
    return ranks


def _pv(values: dict[str, str | None] | None, types: dict[str, pa.DataType]) -> tuple[tuple[str, Any], ...]:
    """A partition directory's key: its values as typed values (one key for every spelling)."""
    return partition_values_key(values, types)


def _present(pf: pq.ParquetFile, columns: list[str]) -> list[str]:
    return [c for c in columns if c in pf.schema_arrow.names]


def _vector_key(d: DeletionVectorDescriptor) -> str:
    from ....core.dv import file_key

    return file_key(d)


def _with_vector(add: Add, descriptor: DeletionVectorDescriptor) -> Add:
    stats = add.stats_dict()
    stats["tightBounds"] = False
    return dataclasses.replace(
        add,
        deletion_vector=descriptor,
        stats=json.dumps(stats, separators=(",", ":")),
        partition_values=dict(add.partition_values or {}),
        extra=dict(add.extra),
    )


def _read_rows(pf: pq.ParquetFile, rows: BitMap, target: pa.Schema, source: str) -> pa.Table:
    """Rows of a file by index, reading only the row groups that hold them."""
    if not len(rows):
        return target.empty_table()
    idx = np.frombuffer(rows.to_array(), dtype=np.uint32).astype(np.int64)
    cols = _present(pf, target.names)
    pieces = []
    offset = 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        sel = idx[(idx >= offset) & (idx < offset + n)] - offset
        if len(sel):
            t = conform(pf.read_row_group(g, columns=cols), target, source)
            pieces.append(t.take(pa.array(sel)))
        offset += n
    return pa.concat_tables(pieces) if pieces else target.empty_table()


def _stat_key(stats: Any, typ: pa.DataType) -> Any:
    """The one value a row group's statistics say it holds, in ``to_pylist`` form; ``_UNKNOWN`` when
    they do not say (absent, a range, or not convertible)."""
    if stats is None or not stats.has_min_max or stats.min != stats.max:
        return _UNKNOWN
    try:
        return pa.array([stats.min], type=typ).to_pylist()[0]
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return _UNKNOWN


def _may_hold(pf: pq.ParquetFile, g: int, column: str, values: set[Any], typ: pa.DataType) -> bool:
    """Whether row group ``g`` may hold a row whose ``column`` is one of ``values`` (min/max statistics)."""
    md = pf.metadata
    names = [md.schema.column(j).path for j in range(len(md.schema))]
    if column not in names:
        return None in values
    st = md.row_group(g).column(names.index(column)).statistics
    if st is None or not st.has_min_max:
        return True
    if st.has_null_count and st.null_count == md.row_group(g).num_rows:
        return None in values
    try:
        lo = pa.array([st.min], type=typ).to_pylist()[0]
        hi = pa.array([st.max], type=typ).to_pylist()[0]
        return any(v is None or v != v or lo <= v <= hi for v in values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return True


class _OutputIndex:
    """The outputs' row groups by the value of the row-group column, and the rows taken so far."""

    def __init__(self, storage: Any, outputs: list[OutputFile], target: pa.Schema, by: str) -> None:
        self.storage = storage
        self.outputs = outputs
        self.target = target
        self.by = by
        self.typ = target.field(by).type
        self.taken: dict[int, BitMap] = {}
        self.groups: list[tuple[int, int, int, Any, bool]] = []  # (output, row group, first row, value, all null)
        self._files: dict[int, pq.ParquetFile] = {}

    def _file(self, i: int) -> pq.ParquetFile:
        if i not in self._files:
            o = self.outputs[i]
            pf = pq.ParquetFile(self.storage.open_input(o.key, o.size))
            self._files[i] = pf
            md = pf.metadata
            names = [md.schema.column(j).path for j in range(len(md.schema))]
            j = names.index(self.by)
            first = 0
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                st = rg.column(j).statistics
                all_null = bool(st is not None and st.has_null_count and st.null_count == rg.num_rows)
                self.groups.append((i, g, first, None if all_null else _stat_key(st, self.typ), all_null))
                first += rg.num_rows
        return self._files[i]

    def take(self, deleted: pa.Table, candidates: list[int]) -> int:
        """Mark one output row per deleted row (equal on every column; identical rows are matched one
        to one) as deleted; returns how many deleted rows were not found."""
        for i in candidates:
            self._file(i)
        by = deleted.column(self.by)
        found = np.zeros(deleted.num_rows, dtype=bool)
        codes, _ = value_codes(by)  # Spark-equal values share a code (both zeros, every NaN)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(int(codes.max(initial=-1)) + 2))
        keys = [value_key(py_value(by[int(order[bounds[k]])])) for k in range(len(bounds) - 1)]
        unknown_value = NAN_KEY in keys
        rows_of = {v: order[bounds[k] : bounds[k + 1]] for k, v in enumerate(keys)}
        everything = np.arange(deleted.num_rows)
        for i, g, first, value, all_null in self.groups:
            if i not in candidates or found.all():
                continue
            if all_null:
                sub = rows_of.get(None, everything[:0])
            elif value is _UNKNOWN or unknown_value:
                sub = everything
            else:
                sub = rows_of.get(value_key(value), everything[:0])
            sub_idx = np.asarray(sub, dtype=np.int64)
            if len(sub_idx):
                sub_idx = sub_idx[~found[sub_idx]]
            if len(sub_idx):
                self._match(i, g, first, deleted, sub_idx, found)
        return int((~found).sum())

    def _match(self, i: int, g: int, first: int, deleted: pa.Table, sub_idx: Any, found: Any) -> None:
        pf = self._files[i]
        data = pf.read_row_group(g, columns=_present(pf, self.target.names))
        table = conform(data, self.target, self.outputs[i].path)
        sub = deleted.take(pa.array(sub_idx))
        ks, ko = _dense_keys(sub, table)
        taken = self.taken.setdefault(i, BitMap())
        if len(taken):  # rows of this row group taken before (another input's identical row) are not free
            held = np.frombuffer(taken.to_array(), dtype=np.uint32).astype(np.int64) - first
            ko[held[(held >= 0) & (held < len(ko))]] = -1
        width = int(max(len(ks), len(ko))) + 1
        rs = _ranks(ks)
        ro = np.full(len(ko), -1, dtype=np.int64)
        valid = ko >= 0
        ro[valid] = _ranks(ko[valid])
        _, at_s, at_o = np.intersect1d(ks * width + rs, np.where(valid, ko * width + ro, -1), return_indices=True)
        found[sub_idx[at_s]] = True
        taken.update((first + at_o).astype(np.uint32))


__all__ = ["Carrier", "CarryResult"]
