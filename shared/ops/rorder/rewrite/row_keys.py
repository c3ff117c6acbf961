"""Row keys of de-duplication: integer and time keys grouped by a 64-bit hash; key equality is Spark's
(one NaN, one zero, null equal to null), defined in :mod:`deltaextras.core.values`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ....core.arrays import int64_array, plain_integers, row_numbers
from ....core.values import canonical, same_values


def first_rows_hashed(table: pa.Table, keys: list[str]) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """The first row of each key, the later rows, and the first row each later row repeats, for integer
    and time keys without nulls, grouped by a 64-bit hash of the key (rows of one group may differ on the
    key after a collision: the caller checks); ``None`` for other keys.

    Example:
        >>> firsts, later, owner = first_rows_hashed(pa.table({"k": [5, 7, 5]}), ["k"])
        >>> sorted(firsts.to_pylist()), later.to_pylist(), owner.to_pylist()
        ([0, 1], [2], [0])
    """
    columns = [plain_integers(table.column(k)) for k in keys]
    if any(c is None for c in columns):
        return None
    h = np.full(table.num_rows, _GOLDEN, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in columns:
            assert c is not None
            h = _mix64(h ^ _mix64(c.astype(np.int64).view(np.uint64)))
    order = np.argsort(h)  # equal hashes end up adjacent, in any order
    sorted_h = h[order]
    del h
    n = len(order)
    new_key = np.empty(n, dtype=bool)
    new_key[:1] = True
    np.not_equal(sorted_h[1:], sorted_h[:-1], out=new_key[1:])
    del sorted_h
    starts = np.flatnonzero(new_key)
    if len(starts) == n:
        return row_numbers(n), row_numbers(0), row_numbers(0)
    firsts = np.minimum.reduceat(order, starts)  # the first row of each key
    owner = np.empty(n, dtype=np.int64)
    owner[order] = firsts[np.cumsum(new_key) - 1]
    del order, new_key
    later = np.flatnonzero(owner != np.arange(n))
    return int64_array(firsts), int64_array(later), int64_array(owner[later])


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (wrapping)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def canonical_floats(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floats with one NaN and one zero (as Spark normalizes grouping keys); other types unchanged
    (:func:`deltaextras.core.values.canonical`).

    Example:
        >>> canonical_floats(pa.chunked_array([[-0.0, 1.5]])).to_pylist()
        [0.0, 1.5]
    """
    return canonical(column)


__all__ = ["canonical_floats", "first_rows_hashed", "same_values"]
