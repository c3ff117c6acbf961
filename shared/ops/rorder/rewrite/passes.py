"""The passes of a multi-pass rewrite: input row groups with the statistics that route them, the value range
of each pass, and which rows and row groups fall in a pass (in Spark's order: NaN above ``+inf``).

Example:
    >>> overlaps(RowGroup(0, 0, 0, 10, 100, 1, 5, 0), Pass(lo=6, hi=9))
    False
    >>> fixed_bits(pa.int64()), fixed_bits(pa.string())
    (65, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ....core.values import sort_key, within


@dataclass
class RowGroup:
    file: int
    index: int
    offset: int
    rows: int
    est_bytes: int
    lo: Any
    hi: Any
    nulls: int | None  # None: unknown
    passes: list[int] = field(default_factory=list)


@dataclass
class Pass:
    lo: Any = None
    hi: Any = None
    lo_arrow: Any = None  # the same bounds as Arrow scalars of the column's type
    hi_arrow: Any = None
    nulls_only: bool = False
    everything: bool = False

    def label(self) -> str:
        if self.everything:
            return "all values"
        return "nulls" if self.nulls_only else f"{self.lo}..{self.hi}"


def pass_mask(col: pa.ChunkedArray, p: Pass) -> pa.ChunkedArray:
    """Rows of one pass of a multi-pass plan (an ``everything`` pass is never split), in Spark's order
    (NaN above ``+inf``)."""
    if p.nulls_only:
        return pc.is_null(col)
    return within(col, p.lo_arrow, p.hi_arrow)


def overlaps(rg: RowGroup, p: Pass) -> bool:
    """Whether a row group's statistics admit rows of one pass of a multi-pass plan, in Spark's order
    (a float row group holding NaN has NaN, the greatest value, as its upper bound)."""
    if p.nulls_only:
        return rg.nulls is None or rg.nulls > 0
    if rg.lo is None:  # no statistics: could hold anything, unless known to be all null
        return not (rg.nulls is not None and rg.nulls == rg.rows)
    return not (sort_key(rg.hi) < sort_key(p.lo) or sort_key(rg.lo) > sort_key(p.hi))


def comparable_stats(pf: pq.ParquetFile, name: str, target: pa.DataType) -> bool:
    """Whether a file's min/max of a column read back as values comparable with the table's type."""
    if name not in pf.schema_arrow.names:
        return False
    t = pf.schema_arrow.field(name).type
    if pa.types.is_timestamp(target):
        return pa.types.is_timestamp(t) and t.unit in ("ms", "us")
    if pa.types.is_dictionary(t):
        return False
    return (
        t.equals(target)
        or (pa.types.is_integer(t) and pa.types.is_integer(target))
        or (pa.types.is_string(target) and (pa.types.is_string(t) or pa.types.is_large_string(t)))
    )


def leaf_index(pf: pq.ParquetFile, name: str) -> int | None:
    schema = pf.metadata.schema
    for j in range(len(schema)):
        if schema.column(j).path == name:
            return j
    return None


def fixed_bits(t: pa.DataType) -> int:
    """Bits per value of a fixed-width type, validity bit included (0 for variable-width types)."""
    try:
        return t.bit_width + 1 if t.bit_width else 0
    except ValueError:
        return 0
