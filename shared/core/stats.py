"""Delta file statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) gathered from the
Arrow data as it is written, keyed by physical column names.

Bounds are always safe for data skipping: timestamps are widened to whole milliseconds (min down,
max up), long strings keep a 32-character prefix as min and no max, floats holding NaN and types
without a portable JSON form (binary, decimals, lists, maps) get null counts only.

Example:
    >>> import pyarrow as pa
    >>> c = StatsCollector(pa.schema([("k", pa.int64()), ("s", pa.string())]))
    >>> c.update(pa.table({"k": [3, 1, None], "s": ["b", "a", "c"]}))
    >>> c.to_json()
    '{"numRecords":3,"minValues":{"k":1,"s":"a"},"maxValues":{"k":3,"s":"c"},"nullCount":{"k":1,"s":0}}'
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

STRING_PREFIX = 32
DEFAULT_INDEXED_COLUMNS = 32
_EPOCH = dt.datetime(1970, 1, 1)


class _Leaf:
    __slots__ = ("max", "min", "nan", "nulls", "path", "type")

    def __init__(self, path: tuple[str, ...], typ: pa.DataType) -> None:
        self.path, self.type = path, typ
        self.min: Any = None
        self.max: Any = None
        self.nulls = 0
        self.nan = False


def _leaves(fields: list[pa.Field], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], pa.DataType]]:
    out = []
    for f in fields:
        if pa.types.is_struct(f.type):
            out.extend(_leaves(list(f.type), (*prefix, f.name)))
        else:
            out.append(((*prefix, f.name), f.type))
    return out


def _has_bounds(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


class StatsCollector:
    """Accumulates Delta statistics over the tables written into one file."""

    def __init__(
        self,
        schema: pa.Schema,
        *,
        indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
        stats_columns: list[str] | None = None,
        always: tuple[str, ...] = (),
    ) -> None:
        every = _leaves(list(schema))
        leaves = every
        if stats_columns:
            wanted = set(stats_columns)
            leaves = [lf for lf in leaves if ".".join(lf[0]) in wanted or lf[0][0] in wanted]
        elif indexed_columns >= 0:
            leaves = leaves[:indexed_columns]
        # columns that always get statistics (a clustering column must, and value ranges are planned by them)
        leaves += [lf for lf in every if lf[0][0] in always and lf not in leaves]
        self._leaves = [_Leaf(p, t) for p, t in leaves]
        self.num_records = 0

    def update(self, table: pa.Table) -> None:
        """Fold one written table (a row group or part of one) into the statistics."""
        self.num_records += table.num_rows
        for leaf in self._leaves:
            col: Any = table.column(leaf.path[0])
            for name in leaf.path[1:]:
                col = pc.struct_field(col, name)
            leaf.nulls += col.null_count
            if not _has_bounds(leaf.type) or col.null_count == len(col):
                continue
            if pa.types.is_floating(leaf.type) and pc.any(pc.is_nan(col)).as_py():
                leaf.nan = True
                continue
            if pa.types.is_timestamp(leaf.type):
                col = col.cast(pa.int64())  # micro/milli/... ticks; converted when written out
            elif pa.types.is_date32(leaf.type):
                col = col.cast(pa.int32())
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo is None:
                continue
            leaf.min = lo if leaf.min is None or lo < leaf.min else leaf.min
            leaf.max = hi if leaf.max is None or hi > leaf.max else leaf.max

    def to_dict(self) -> dict[str, Any]:
        """The statistics as the ``stats`` JSON object of an ``add`` action."""
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, Any] = {}
        for leaf in self._leaves:
            _put(nulls, leaf.path, leaf.nulls)
            if leaf.nan or leaf.min is None:
                continue
            lo, hi = _json_bound(leaf.type, leaf.min, low=True), _json_bound(leaf.type, leaf.max, low=False)
            if lo is not None:
                _put(mins, leaf.path, lo)
            if hi is not None:
                _put(maxs, leaf.path, hi)
        return {"numRecords": self.num_records, "minValues": mins, "maxValues": maxs, "nullCount": nulls}

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


_TICKS_PER_MICRO = {"s": None, "ms": None, "us": 1, "ns": 1000}


def _json_bound(t: pa.DataType, value: Any, *, low: bool) -> Any:
    if pa.types.is_timestamp(t):
        micros = _to_micros(int(value), t.unit, low=low)
        millis = micros // 1000 if low else -((-micros) // 1000)
        try:
            stamp = _EPOCH + dt.timedelta(milliseconds=millis)
        except OverflowError:
            return None
        text = stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"
        if stamp.year < 1000:
            text = f"{stamp.year:04d}" + text[len(str(stamp.year)) :]
        return text + ("Z" if t.tz is not None else "")
    if pa.types.is_date32(t):
        try:
            return (_EPOCH.date() + dt.timedelta(days=int(value))).isoformat()
        except OverflowError:
            return None
    if pa.types.is_date(t):
        return value.isoformat()
    if isinstance(value, str):
        if len(value) <= STRING_PREFIX:
            return value
        return value[:STRING_PREFIX] if low else None
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return None
    return value


def _to_micros(ticks: int, unit: str, *, low: bool) -> int:
    if unit == "s":
        return ticks * 1_000_000
    if unit == "ms":
        return ticks * 1000
    if unit == "us":
        return ticks
    return ticks // 1000 if low else -((-ticks) // 1000)
