"""Row keys of de-duplication: integer and time keys grouped by a 64-bit hash, and key equality as Spark
groups keys (one NaN, one zero, null equal to null)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.arrays import bool_array, int64_array, plain_integers, row_numbers, scalar


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


_CANONICAL_NAN = float("nan")
_NAN_KEY = object()


def canonical_floats(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floats with one NaN and one zero (as Spark normalizes grouping keys); other types unchanged.

    Example:
        >>> canonical_floats(pa.chunked_array([[-0.0, 1.5]])).to_pylist()
        [0.0, 1.5]
    """
    if not pa.types.is_floating(column.type):
        return column
    try:
        zeroed = pc.add(column, scalar(0.0, column.type))  # -0.0 + 0.0 is +0.0
        return pc.if_else(pc.is_nan(column), scalar(_CANONICAL_NAN, column.type), zeroed)
    except pa.ArrowNotImplementedError:  # half floats: left as they are
        return column


def same_values(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """Element-wise: equal values, both null, or (floats) both NaN — never null.

    Example:
        >>> nan = float("nan")
        >>> same_values(pa.chunked_array([[1.0, nan, None]]), pa.chunked_array([[1.0, nan, None]])).to_pylist()
        [True, True, True]
    """
    try:
        same = pc.equal(a, b)
    except pa.ArrowNotImplementedError:  # nested types: compare their Python values, NaN as one value
        return pa.chunked_array(
            [
                bool_array(
                    np.array(
                        [_nan_free(x) == _nan_free(y) for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)],
                        dtype=bool,
                    )
                )
            ]
        )
    same = pc.or_kleene(same, pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        same = pc.or_kleene(same, pc.and_(pc.is_nan(a), pc.is_nan(b)))
    return pc.fill_null(same, scalar(False, pa.bool_()))


def _nan_free(value: Any) -> Any:
    """A Python value with every float NaN replaced by one marker, so that equal rows compare equal."""
    if isinstance(value, float) and value != value:
        return _NAN_KEY
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_free(v) for v in value]
    return value
