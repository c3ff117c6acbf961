"""The tiered layout's selection: which live files of a partition an incremental run rewrites.

A partition in the tiered layout holds *settled* files (outputs of earlier runs in the same layout, tagged
with the layout signature; the files of one run form one *tier run*) and *fresh* files (everything else:
appends, outputs of another layout). A run rewrites:

* every fresh file, into one new tier run with one row group (or run of row groups) per value, small
  values sharing one (``min_row_group_bytes``, docs/tiered.md);
* settled runs that the size-tiered policy merges: when ``TIER_FANOUT`` (k) runs of similar size exist
  (sizes in rows within a factor of about k, counting the new run) they merge into the new run, cascading while
  the grown run meets k similar ones; then, while the partition would hold more than ``MAX_TIERS`` (T)
  runs, the smallest runs join too. Merges happen only in a run that has fresh files (or must purge
  deletion vectors), so a rerun with nothing fresh is a no-op;
* settled runs a fresh row may duplicate under ``unique_by``: a settled file can hold a row equal on the
  key (``by`` + ``unique_by``) to a fresh row only if, on every key column, its statistics range overlaps
  the fresh files' range (or both hold nulls). A file disjoint on any key column is never read; a file or a
  fresh file without usable statistics for a key column joins;
* settled files whose deletion vectors hide more than ``max_deleted_rows_ratio`` of their rows (by default
  any file that carries a deletion vector: readers such as deltalake stop pruning once a scanned file
  carries one); only those files of their run, the run's other files stay as they are.

Each run's output has every value in its own row group(s), so a point query reads at most T row groups
(one per run), each holding only that value.

Example:
    >>> settled = [("r1", 100), ("r2", 110), ("r3", 95)]
    >>> sorted(merge_runs(settled, fresh_size=105, fanout=4, limit=10))
    ['r1', 'r2', 'r3']
    >>> merge_runs(settled, fresh_size=105, fanout=5, limit=10)
    []
    >>> merge_runs(settled, fresh_size=105, fanout=5, limit=3)
    ['r3']
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...core.schema import TableSchema
from ...core.snapshot import LiveFile
from ..common.bounds import json_bound
from .options import RorderOptions
from .rewrite.layout import LAYOUT_TAG, RUN_TAG, layout_signature

# k: runs of similar size merge once k of them exist. In a simulation of a week of hourly runs on a one-day
# history (the workload of bench/incremental_bench.py; docs/tiered.md), k = 4 kept the write amplification
# near 3 (each row is rewritten once per tier it climbs: 1 h → 4 h → 16 h → 64 h), where k = 3 rewrites more
# often and k ≥ 5 needs a larger T to stay there.
TIER_FANOUT = 4
# T: at most this many runs per partition, so a point query reads at most T row groups. With k = 4,
# hourly runs over a week reach four tiers of at most k - 1 runs each below the oldest: T = 10 rarely
# forces an extra merge, while T = 8 forced one almost every hour (write amplification ~11 in simulation).
MAX_TIERS = 10

_FLOAT_TYPES = ("float", "double")


@dataclass
class TierSelection:
    """What a tiered run of one partition does: ``files`` are the inputs of the rewrite."""

    fresh: list[LiveFile] = field(default_factory=list)
    merged: list[LiveFile] = field(default_factory=list)  # settled runs merged by the size-tiered policy
    overlapping: list[LiveFile] = field(default_factory=list)  # settled files a fresh row may duplicate
    purged: list[LiveFile] = field(default_factory=list)  # settled files with too many deleted rows
    runs_before: int = 0  # settled runs before the rewrite
    runs_after: int = 0  # runs once the rewrite is committed

    @property
    def files(self) -> list[LiveFile]:
        return [*self.fresh, *self.merged, *self.overlapping, *self.purged]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def tiers_merged(self) -> int:
        return len({f.tags.get(RUN_TAG) for f in [*self.merged, *self.overlapping, *self.purged]})

    def summary(self) -> dict[str, int]:
        """The figures ``plan`` and the orchestrator show.

        Example:
            >>> TierSelection().summary()["fresh_files"]
            0
        """
        return {
            "fresh_files": len(self.fresh),
            "fresh_bytes": sum(f.size for f in self.fresh),
            "tiers_merged": self.tiers_merged,
            "settled_files_read": len(self.merged) + len(self.overlapping) + len(self.purged),
            "bytes_to_rewrite": self.bytes,
            "tiers_before": self.runs_before,
            "tiers_after": self.runs_after,
        }

    def reason(self) -> str:
        """One line for a plan or a report.

        Example:
            >>> TierSelection().reason()
            'tiered: no fresh files, 0 tier(s), nothing to merge'
        """
        if not self.files:
            return f"tiered: no fresh files, {self.runs_before} tier(s), nothing to merge"
        s = self.summary()
        return (
            f"tiered: {s['fresh_files']} fresh file(s) in, {s['tiers_merged']} tier(s) merged, "
            f"{s['bytes_to_rewrite']} bytes to rewrite, {s['tiers_before']} -> {s['tiers_after']} tier(s)"
        )


def select_files(files: list[LiveFile], schema: TableSchema, by: str, options: RorderOptions) -> TierSelection:
    """Split one partition's live files into what a tiered run rewrites and what it leaves in place.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> from deltaextras.core.snapshot import TableSnapshot
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1, 2], "k_range": [0, 0]}), partition_by=["k_range"])
        >>> snap = TableSnapshot.load(path)
        >>> sel = select_files(snap.files, snap.schema, "k", RorderOptions(layout="tiered"))
        >>> len(sel.fresh), len(sel.merged)
        (1, 0)
    """
    signature = layout_signature(by, options.sort_by, options.unique_by)
    runs: dict[str, list[LiveFile]] = {}
    sel = TierSelection()
    for f in files:
        tags = f.tags
        run = tags.get(RUN_TAG)
        if tags.get(LAYOUT_TAG) == signature and run is not None:
            runs.setdefault(run, []).append(f)
        else:
            sel.fresh.append(f)
    sel.runs_before = len(runs)
    sel.purged = [f for fs in runs.values() for f in fs if _too_many_deleted([f], options.max_deleted_rows_ratio)]
    if not sel.fresh and not sel.purged:
        sel.runs_after = len(runs)
        return sel
    purged = {f.path for f in sel.purged}
    # a run whose every file is purged leaves no run behind; one that keeps files stays a run
    emptied = {r for r, fs in runs.items() if all(f.path in purged for f in fs)}
    runs = {r: [f for f in fs if f.path not in purged] for r, fs in runs.items() if r not in emptied}
    chosen: set[str] = set()
    if sel.fresh and options.unique_by:
        keys = list(dict.fromkeys([by, *options.unique_by]))
        fresh_ranges = _ranges(sel.fresh, schema, keys)
        for r, fs in runs.items():
            if r not in chosen and any(_may_share_keys(f, fresh_ranges, schema, keys) for f in fs):
                chosen.add(r)
                sel.overlapping.extend(fs)
    # Runs are sized in rows (the fresh files' bytes say little about the size of their rewrite: other
    # codecs, other encodings); in bytes when a file's statistics lack numRecords.
    size = _rows if all(f.num_records is not None for f in files) else _bytes
    rest = [(r, size(fs)) for r, fs in runs.items() if r not in chosen]
    for r in merge_runs(rest, fresh_size=size(sel.files), fanout=TIER_FANOUT, limit=MAX_TIERS):
        sel.merged.extend(runs[r])
        chosen.add(r)
    sel.runs_after = len(runs) - len(chosen) + 1
    return sel


def merge_runs(runs: Iterable[tuple[str, int]], *, fresh_size: int, fanout: int, limit: int) -> list[str]:
    """The settled runs ``(run id, size)`` the size-tiered policy merges into a new run of ``fresh_size``
    (sizes in rows, or in bytes when rows are unknown).

    A run's tier is ``round(log_fanout(size / smallest))``; while the new run's tier holds ``fanout - 1``
    other runs, they merge into it (and it grows, maybe into the next tier); then, while more than
    ``limit`` runs would remain, the smallest joins.

    Example:
        >>> merge_runs([("a", 10), ("b", 10), ("c", 10), ("big", 160)], fresh_size=10, fanout=4, limit=10)
        ['a', 'b', 'c']
        >>> runs = [("a", 10), ("b", 10), ("c", 10), ("d", 40), ("e", 40), ("f", 40)]
        >>> merge_runs(runs, fresh_size=10, fanout=4, limit=10)  # 4 x 10 make a 40: a cascade
        ['a', 'b', 'c', 'd', 'e', 'f']
    """
    rest = sorted(runs, key=lambda rs: (rs[1], rs[0]))
    pending = max(1, fresh_size)
    chosen: list[str] = []
    while rest:
        unit = max(1, min(pending, rest[0][1]))
        tier = _tier(pending, unit, fanout)
        same = [rs for rs in rest if _tier(rs[1], unit, fanout) == tier]
        if len(same) + 1 < fanout:
            break
        for rs in same:
            rest.remove(rs)
            chosen.append(rs[0])
            pending += rs[1]
    while len(rest) + 1 > limit:
        r, size = rest.pop(0)
        chosen.append(r)
        pending += size
    return chosen


def _rows(files: list[LiveFile]) -> int:
    return sum(f.num_records or 0 for f in files)


def _bytes(files: list[LiveFile]) -> int:
    return sum(f.size for f in files)


def _tier(size: int, unit: int, fanout: int) -> int:
    return round(math.log(max(1, size) / unit, fanout))


def _too_many_deleted(files: list[LiveFile], ratio: float) -> bool:
    deleted = sum(f.deleted_rows for f in files)
    records = sum(f.num_records or 0 for f in files)
    return bool(deleted and records and deleted / records > ratio)


# (low, high, may hold nulls) per key column; None: unknown (no usable statistics)
_Range = tuple[Any, Any, bool] | None


def _ranges(files: list[LiveFile], schema: TableSchema, keys: list[str]) -> dict[str, _Range]:
    """The union of the files' statistics ranges, per key column."""
    out: dict[str, _Range] = {}
    for key in keys:
        bounds = [_file_range(f, schema, key) for f in files]
        if any(b is None for b in bounds):
            out[key] = None
            continue
        known = [b for b in bounds if b is not None and b[0] is not None]
        nulls = any(b[2] for b in bounds if b is not None)
        if not known:
            out[key] = (None, None, nulls)  # only nulls
            continue
        try:
            out[key] = (min(b[0] for b in known), max(b[1] for b in known), nulls)
        except TypeError:
            out[key] = None
    return out


def _file_range(f: LiveFile, schema: TableSchema, key: str) -> _Range:
    """A file's (low, high, may hold nulls) on one column from its ``add`` statistics; None when unusable."""
    col = schema.column(key, "unique_by")
    typ = schema.file_schema.field(col.physical).type
    if str(typ) in _FLOAT_TYPES:
        return None  # NaN equals NaN for unique_by, but statistics leave NaN out
    stats = f.stats
    records = stats.get("numRecords")
    nulls_count = (stats.get("nullCount") or {}).get(col.physical)
    if records is None or nulls_count is None or isinstance(nulls_count, dict):
        return None
    may_null = int(nulls_count) > 0
    if int(nulls_count) >= int(records):
        return (None, None, True)  # only nulls (or no rows)
    low = json_bound((stats.get("minValues") or {}).get(col.physical), typ, upper=False)
    high = json_bound((stats.get("maxValues") or {}).get(col.physical), typ, upper=True)
    if low is None or high is None:
        return None
    return (low, high, may_null)


def _may_share_keys(f: LiveFile, fresh: dict[str, _Range], schema: TableSchema, keys: list[str]) -> bool:
    """Whether ``f`` may hold a row equal on every key column to a fresh row: not if any column is disjoint."""
    for key in keys:
        theirs = fresh[key]
        mine = _file_range(f, schema, key)
        if theirs is None or mine is None:
            continue  # unknown on this column: another column may still prove it disjoint
        if theirs[2] and mine[2]:
            continue  # both hold nulls: null equals null
        if theirs[0] is None or mine[0] is None:
            return False  # one side has only nulls, the other none
        try:
            if mine[1] < theirs[0] or theirs[1] < mine[0]:
                return False
        except TypeError:
            continue
    return True
