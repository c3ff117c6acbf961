"""Value-range units: the unit of work of a table clustered by the row-group column (or unpartitioned).

Such a table has no partition to cut it into units. A unit is instead a set of live files whose ``by``
ranges (per-file ``minValues`` / ``maxValues`` / ``nullCount``) overlap, grown to the target size with
its neighbours in value order; the ranges of two units never overlap, so every file (and every row) is in
exactly one unit, and units commit independently. Null values sort first: a file holding nulls belongs
to the lowest unit. Ranges are dynamic: a unit's rewrite writes files that roll over at
``target_file_size`` on value boundaries, so a unit that outgrew its target comes back from the next plan
as several units (a split at a value boundary); settled units of less than half the target merge with
a small neighbour. Boundaries are a plan-time decision carried by the work message
(:class:`ValueRange`), never a table property.

A file without statistics for ``by`` is placed by its Parquet footer's row-group statistics; a file
whose footer has none either is refused by name on a clustered table (an unclustered table is then one
unit, as before). Statistics are kept in numpy arrays (one entry per file): memory stays O(files) and
compact.

Example:
    >>> import numpy as np
    >>> b = FileBounds.of(["a", "b", "c", "d"], [10, 10, 10, 10], [5, 5, 5, 5],
    ...                   [0, 3, 20, 40], [5, 9, 30, 41], [0, 0, 0, 0])
    >>> [(u.low, u.high, ix.tolist()) for u, ix in plan_units(b, "k", target=25)]
    [(0, 9, [0, 1]), (20, 41, [2, 3])]
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.protocol import check_clustering
from ...core.snapshot import LiveFile, open_data_file
from ...core.storage import TableStorage
from ...errors import MessageError, UnsupportedFeatureError

INTEGER_TYPES = {"byte", "short", "integer", "long"}
SUPPORTED_TYPES = INTEGER_TYPES | {"date", "string"}
MAX_LONG = 2**63 - 1
# A settled unit smaller than this share of the target merges with a small neighbour.
SMALL_SHARE = 0.5


@dataclass(frozen=True)
class ValueRange:
    """The values of one unit: ``low`` to ``high`` inclusive (None when it holds only nulls), and
    whether null rows belong to it.

    Example:
        >>> r = ValueRange("node_id", 0, 41, nulls=True)
        >>> r.label, r.overlaps(41, 50, False), r.overlaps(42, 50, False), r.overlaps(None, None, True)
        ('node_id in [0, 41] or null', True, False, True)
        >>> ValueRange.from_json(r.to_json()) == r
        True
    """

    column: str
    low: int | str | None
    high: int | str | None
    nulls: bool = False
    # A cut unit: values at which its output files must end (its files are the fresh ones only; they are
    # cut to lie each within one settled file's range, which the next plan merges them into).
    cuts: tuple[Any, ...] = ()

    @property
    def label(self) -> str:
        if self.low is None:
            return f"{self.column} is null"
        return f"{self.column} in [{self.low}, {self.high}]" + (" or null" if self.nulls else "")

    @property
    def predicate(self) -> str:
        """The unit's rows as SQL (the ``predicate`` of its commit)."""
        if self.low is None:
            return f"{self.column} IS NULL"
        where = f"{self.column} >= {_sql(self.low)} AND {self.column} <= {_sql(self.high)}"
        return f"({where} OR {self.column} IS NULL)" if self.nulls else where

    def overlaps(self, low: Any, high: Any, nulls: bool) -> bool:
        """Whether a file holding values ``low``..``high`` (None: none) and maybe nulls has rows here."""
        if nulls and self.nulls:
            return True
        if low is None or self.low is None:
            return False
        return bool(low <= self.high and high >= self.low)

    def app_id(self) -> str:
        """The ``txn`` appId of this unit's rewrite."""
        return "deltaextras.rorder:" + json.dumps(
            ["range", self.column, self.low, self.high, self.nulls], separators=(",", ":")
        )

    def to_json(self) -> dict[str, Any]:
        out = {"column": self.column, "low": self.low, "high": self.high, "nulls": self.nulls}
        return {**out, "cuts": list(self.cuts)} if self.cuts else out

    @classmethod
    def from_json(cls, data: Any) -> ValueRange:
        """Validate the ``range`` of a work message.

        Example:
            >>> ValueRange.from_json({"column": "k", "low": 5, "high": 1})
            Traceback (most recent call last):
            ...
            deltaextras.errors.MessageError: message 'range' must have low <= high, got low 5 and high 1
        """
        if not isinstance(data, dict):
            raise MessageError("message 'range' must be an object with column, low, high and nulls")
        unknown = sorted(set(data) - {"column", "low", "high", "nulls", "cuts"})
        if unknown:
            raise MessageError(
                f"message 'range' key {unknown[0]!r} is not known (known: column, cuts, high, low, nulls)"
            )
        column, low, high, nulls = data.get("column"), data.get("low"), data.get("high"), data.get("nulls", False)
        if not isinstance(column, str) or not column:
            raise MessageError("message 'range' needs 'column': the row-group column as a non-empty string")
        if not isinstance(nulls, bool):
            raise MessageError(f"message 'range' 'nulls' must be a boolean, got {type(nulls).__name__}")
        for name, v in (("low", low), ("high", high)):
            ok = v is None or isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))
            if not ok or (isinstance(v, int) and not -MAX_LONG - 1 <= v <= MAX_LONG):
                raise MessageError(f"message 'range' {name!r} must be a 64-bit integer, a string or null")
        if (low is None) != (high is None) or (low is None and not nulls):
            raise MessageError("message 'range' needs both low and high, or neither with nulls true")
        if low is not None and (type(low) is not type(high) or low > high):
            raise MessageError(f"message 'range' must have low <= high, got low {low!r} and high {high!r}")
        cuts = data.get("cuts", [])
        if not isinstance(cuts, list) or len(cuts) > 100_000:
            raise MessageError("message 'range' 'cuts' must be a list of values")
        if cuts and (
            low is None
            or any(type(c) is not type(low) for c in cuts)
            or any(a >= b for a, b in itertools.pairwise(cuts))
            or not low < cuts[0] <= cuts[-1] <= high
        ):
            raise MessageError("message 'range' 'cuts' must be ascending values of the range's type above low")
        return cls(column, low, high, nulls, tuple(cuts))


def _sql(v: Any) -> str:
    return str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'"


@dataclass
class FileBounds:
    """Per-file facts planning needs, one entry per file: ``low`` / ``high`` are the ``by`` bounds (None
    for a file of nulls only), ``nulls`` the null count."""

    paths: np.ndarray  # object
    size: np.ndarray  # int64
    records: np.ndarray  # int64
    low: np.ndarray  # object: int, str or None
    high: np.ndarray
    nulls: np.ndarray  # int64
    # Which files hold a value (their low and high are set); None: those whose ``low`` is not None. With
    # it, ``low`` / ``high`` may be int64 arrays (any value where a file holds none).
    present: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        paths: Sequence[str],
        size: Sequence[int],
        records: Sequence[int],
        low: Sequence[Any],
        high: Sequence[Any],
        nulls: Sequence[int],
    ) -> FileBounds:
        def obj(values: Sequence[Any]) -> np.ndarray:
            out = np.empty(len(values), dtype=object)
            out[:] = list(values)
            return out

        return cls(
            obj(paths),
            np.asarray(size, dtype=np.int64),
            np.asarray(records, dtype=np.int64),
            obj(low),
            obj(high),
            np.asarray(nulls, dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.paths)


def plan_units(
    bounds: FileBounds, column: str, *, target: int, run: np.ndarray | None = None
) -> list[tuple[ValueRange, np.ndarray]]:
    """Cut files into units: (range, indices into ``bounds``), in value order, ranges disjoint.

    Files whose ranges overlap (transitively) form one component; neighbouring components join while the
    unit stays within ``target`` bytes. ``run`` (an int code per file, -1 for a file not in layout) keeps
    a settled unit's files together and stops two settled units of different runs from merging unless
    both are small.

    Example:
        >>> b = FileBounds.of(["a", "b", "c"], [10, 10, 10], [1, 1, 2], [None, 0, 5], [None, 3, 9], [1, 0, 1])
        >>> [(u.label, ix.tolist()) for u, ix in plan_units(b, "k", target=100)]
        [('k in [0, 9] or null', [0, 1, 2])]
    """
    n = len(bounds)
    if n == 0:
        return []
    run = np.full(n, -1, dtype=np.int64) if run is None else run
    keys = _keys(bounds)
    order = np.lexsort((keys.hi, keys.lo))
    lo_s, hi_s = keys.lo[order], keys.hi[order]
    reach = np.maximum.accumulate(hi_s)
    starts = np.flatnonzero(np.concatenate(([True], lo_s[1:] > reach[:-1])))
    size_s = bounds.size[order]
    comp_bytes = np.add.reduceat(size_s, starts)
    run_s = run[order]
    comp_low = np.minimum.reduceat(run_s, starts)
    comp_run = np.where(comp_low == np.maximum.reduceat(run_s, starts), comp_low, -1)  # a settled component's run
    first = starts[_unit_starts(comp_bytes, comp_run, target)]  # each unit's first file in ``order``
    # Per unit, from its files in value order: highest value, lowest own value, whether it holds nulls.
    high = np.maximum.reduceat(hi_s, first)
    own_lo = keys.own_lo[order]
    low = np.minimum.reduceat(np.where(own_lo != keys.none, own_lo, _NO_LOW), first)
    nulls = np.maximum.reduceat(bounds.nulls[order] > 0, first)
    over = (np.add.reduceat(size_s, first) > 2 * target).tolist()  # units that may be cut
    ends = np.append(first[1:], n).tolist()
    out = []
    for u, (a, b) in enumerate(zip(first.tolist(), ends, strict=True)):
        ix = order[a:b]
        lo = keys.value(low[u]) if low[u] != _NO_LOW else None
        hi = keys.value(high[u]) if high[u] != keys.none else None
        cut = _cut(ix, run, keys) if over[u] else None
        ix, cuts = cut if cut is not None else (ix, [])
        out.append((ValueRange(column, lo, hi, bool(nulls[u]), tuple(cuts)), np.sort(ix)))
    return out


def _unit_starts(comp_bytes: np.ndarray, comp_run: np.ndarray, target: int) -> np.ndarray:
    """The first component of each unit: components join greedily in value order while the unit stays within
    ``target`` bytes (a component larger than that is a unit alone) and while two settled parts of different
    rewrites are both small (:func:`_joins`). One step per unit: a bisection of the running byte sums, and
    a look at the first component whose run differs from the unit's first."""
    total = np.concatenate(([0], np.cumsum(comp_bytes))).tolist()
    runs = comp_run.tolist()
    changes = (np.flatnonzero(comp_run[1:] != comp_run[:-1]) + 1).tolist()  # components whose run differs
    m, c, firsts = len(runs), 0, []
    while c < m:
        firsts.append(c)
        last = max(c, bisect.bisect_right(total, total[c] + target) - 2)  # bytes alone allow up to here
        j = changes[bisect.bisect_right(changes, c)] if runs[c] >= 0 and changes and changes[-1] > c else m
        if j <= last and not _joins(total[j] - total[c], runs[c], total[j + 1] - total[j], runs[j], target):
            last = j - 1
        c = last + 1
    return np.array(firsts, dtype=np.int64)


def _cut(ix: np.ndarray, run: np.ndarray, keys: _Keys) -> tuple[np.ndarray, list[Any]] | None:
    """A unit over twice the target whose fresh files span several settled files is rewritten as a cut
    unit: only its fresh files, cut at the settled files' lower bounds, so that the next plan finds each
    piece inside one settled file's range (None: the unit is rewritten whole)."""
    fresh = ix[run[ix] < 0]
    settled = ix[(run[ix] >= 0) & (keys.own_lo[ix] != keys.none)]
    if not len(fresh) or len(settled) < 2:
        return None
    cuts = sorted({keys.value(k) for k in keys.own_lo[settled]})[1:]
    return (fresh, cuts) if cuts else None


def _distinct(v: np.ndarray) -> np.ndarray:
    """The sorted distinct values (integers by one sort, faster than a hash table for millions)."""
    if v.dtype == object:
        return np.unique(v)
    v = np.sort(v)
    return v[np.concatenate(([True], v[1:] != v[:-1]))]


def _item(v: Any) -> Any:
    """A value of the ranks' table as a Python value (numpy integers become ``int``)."""
    return v.item() if isinstance(v, np.generic) else v


def _joins(cur_bytes: int, cur_run: int, b: int, r: int, target: int) -> bool:
    """Whether the next component joins the unit being built: within the target, and two settled parts
    of different rewrites only while both are small."""
    if cur_bytes + b > target:
        return False
    if cur_run >= 0 and r >= 0 and cur_run != r:
        return max(cur_bytes, b) < target * SMALL_SHARE
    return True


_NO_LOW = np.iinfo(np.int64).max  # a unit without an own lowest value (it holds nulls only)


@dataclass
class _Keys:
    """Each file's ``by`` bounds as int64 keys that order as the values do: ``lo`` (for ordering: ``none``
    for a file holding nulls, which sort first), ``own_lo`` (its own lowest value) and ``hi`` (``none`` for a
    file of nulls only). Integer bounds are their own keys; other values are ranks into ``values``."""

    lo: np.ndarray
    own_lo: np.ndarray
    hi: np.ndarray
    none: int
    values: np.ndarray | None  # the sorted distinct values ranks index (None: keys are the values)

    def value(self, key: Any) -> Any:
        """The value of a key (numpy integers become ``int``)."""
        return int(key) if self.values is None else _item(self.values[int(key)])


def _keys(bounds: FileBounds) -> _Keys:
    """The keys of every file's bounds (:class:`_Keys`): integers as they are, unless a bound is the
    smallest int64 (the key that stands for none); other values by rank among every bound."""
    lo, hi = bounds.low, bounds.high
    present = bounds.present if bounds.present is not None else np.array([v is not None for v in lo], dtype=bool)
    lo, hi = lo[present], hi[present]
    if lo.dtype == object and all(isinstance(v, int) for v in lo) and all(isinstance(v, int) for v in hi):
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)  # integers: compared in C, not by Python
    values: np.ndarray | None = None
    none = np.iinfo(np.int64).min
    if lo.dtype != np.int64 or (len(lo) and min(int(lo.min()), int(hi.min())) == none):
        values = _distinct(np.concatenate([lo, hi])) if present.any() else np.array([], dtype=object)
        lo, hi, none = np.searchsorted(values, lo), np.searchsorted(values, hi), -1
    own_lo = np.full(len(present), none, dtype=np.int64)
    hi_key = np.full(len(present), none, dtype=np.int64)
    own_lo[present], hi_key[present] = lo, hi
    lo_key = own_lo.copy()
    lo_key[bounds.nulls > 0] = none
    return _Keys(lo_key, own_lo, hi_key, int(none), values)


# ------------------------------------------------------------------------------- statistics of files
def check_type(column: str, delta_type: Any) -> None:
    """Refuse a ``by`` type value ranges do not support (timestamps' statistics are truncated to
    milliseconds, floats' may hide NaN)."""
    if delta_type not in SUPPORTED_TYPES:
        raise UnsupportedFeatureError(
            f"value-range units need an integer, date or string by column; {column!r} is {delta_type!r}. "
            "Nothing was written; partition the table by a range column instead"
        )


def supported(delta_type: Any) -> bool:
    return delta_type in SUPPORTED_TYPES


def file_bounds(
    files: Iterable[LiveFile],
    physical: str,
    delta_type: Any,
    storage: TableStorage | None,
) -> FileBounds | None:
    """The ``by`` bounds of each file from its log statistics; a file without them is read from its
    Parquet footer when ``storage`` is given (None is returned instead when it is not); a file whose
    footer has no statistics either is refused by name."""
    paths, size, records, low, high, nulls = [], [], [], [], [], []
    for f in files:
        b = stats_bounds(f.stats, physical, delta_type)
        if b is None:
            if storage is None:
                return None
            b = footer_bounds(storage, f, physical, delta_type)
        paths.append(f.path)
        size.append(f.size)
        records.append(b[3])
        low.append(b[0])
        high.append(b[1])
        nulls.append(b[2])
    return FileBounds.of(paths, size, records, low, high, nulls)


def stats_bounds(stats: dict[str, Any], physical: str, delta_type: Any) -> tuple[Any, Any, int, int] | None:
    """(low, high, null count, records) from a file's JSON statistics, None when they do not tell.

    Example:
        >>> stats_bounds({"numRecords": 2, "minValues": {"k": 1}, "maxValues": {"k": 4},
        ...               "nullCount": {"k": 0}}, "k", "long")
        (1, 4, 0, 2)
        >>> stats_bounds({"numRecords": 2, "nullCount": {"k": 2}}, "k", "long")
        (None, None, 2, 2)
    """
    records, null = stats.get("numRecords"), (stats.get("nullCount") or {}).get(physical)
    if not isinstance(records, int) or not isinstance(null, int):
        return None
    if null == records:
        return None, None, null, records
    lo, hi = (stats.get("minValues") or {}).get(physical), (stats.get("maxValues") or {}).get(physical)
    lo, hi = _typed(lo, delta_type), _typed(hi, delta_type)
    if lo is None or hi is None:
        return None
    return lo, hi, null, records


def _typed(v: Any, delta_type: Any) -> Any:
    if delta_type in INTEGER_TYPES:
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    return v if isinstance(v, str) else None


def footer_bounds(storage: TableStorage, f: LiveFile, physical: str, delta_type: Any) -> tuple[Any, Any, int, int]:
    """(low, high, null count, records) from the row-group statistics of a file's Parquet footer."""
    md = open_data_file(storage, f, pre_buffer=False).metadata
    names = [md.schema.column(j).path for j in range(len(md.schema))]
    lo: Any = None
    hi: Any = None
    nulls = 0
    for i in range(md.num_row_groups if physical in names else 0):
        st = md.row_group(i).column(names.index(physical)).statistics
        if st is None or not st.has_null_count:
            break
        nulls += st.null_count
        if st.has_min_max:
            a, b = _footer_value(st.min, delta_type), _footer_value(st.max, delta_type)
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        elif st.null_count != md.row_group(i).num_rows:
            break
    else:
        if physical in names and (lo is not None or nulls == md.num_rows):
            return lo, hi, nulls, md.num_rows
    raise UnsupportedFeatureError(
        f"data file {f.path} has no statistics for {physical!r}, neither in the log nor in its Parquet footer, "
        "so its value range is unknown; nothing was written. Rewrite it once with an engine that writes "
        "statistics (e.g. Spark OPTIMIZE), then run again"
    )


def _footer_value(v: Any, delta_type: Any) -> Any:
    if delta_type == "date":
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return int(v) if delta_type in INTEGER_TYPES else str(v)


def run_codes(files: Sequence[LiveFile], settled: Callable[[LiveFile], str | None]) -> np.ndarray:
    """An int code per file of the rewrite that wrote it (``settled`` gives its run tag, None when the
    file is not in layout), -1 for the others."""
    codes: dict[str, int] = {}
    out = np.full(len(files), -1, dtype=np.int64)
    for i, f in enumerate(files):
        tag = settled(f)
        if tag is not None:
            out[i] = codes.setdefault(tag, len(codes))
    return out


# ------------------------------------------------------------------------------- one table's units
def snapshot_units(
    snap: Any, by: str, target: int, settled: Callable[[LiveFile], str | None]
) -> list[tuple[ValueRange, list[LiveFile]]] | None:
    """The value-range units of an unpartitioned table's live files (``snap``: a snapshot or a
    partition snapshot holding every file), or None when the table stays one unit as before: not
    clustered and its files fit one unit, lack statistics, or ``by`` has a type ranges do not support.
    ``settled`` gives a file's run tag when it is in layout (None otherwise)."""
    column = snap.schema.column(by, "by")
    clustered = check_clustering(snap.protocol, snap.domains, by, column.physical)
    if not supported(column.delta_type):
        if clustered:
            check_type(by, column.delta_type)
        return None
    files = list(snap.files)
    bounds = file_bounds(files, column.physical, column.delta_type, snap.storage if clustered else None)
    if bounds is None:
        return None
    units = plan_units(bounds, by, target=target, run=run_codes(files, settled))
    if not clustered and len(units) <= 1 and not any(vr.cuts for vr, _ in units):
        return None
    return [(vr, [files[int(i)] for i in ix]) for vr, ix in units]


def range_files(snap: Any, value_range: ValueRange) -> list[LiveFile]:
    """The live files of a snapshot whose ``by`` values overlap a unit's range (chosen at run time)."""
    column = snap.schema.column(value_range.column, "by")
    check_type(value_range.column, column.delta_type)
    out = []
    for f in snap.files:
        b = stats_bounds(f.stats, column.physical, column.delta_type)
        if b is None:
            b = footer_bounds(snap.storage, f, column.physical, column.delta_type)
        if value_range.overlaps(b[0], b[1], b[2] > 0):
            out.append(f)
    return out


def is_clustered_by(snap: Any, by: str) -> bool:
    """Whether the table is clustered by ``by`` first (its rewrites' outputs are then marked clustered)."""
    return check_clustering(snap.protocol, snap.domains, by, snap.schema.physical(by)) is not None
