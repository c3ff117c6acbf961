"""De-duplication of a pass's rows by their ``unique_by`` key: which rows to keep (:func:`first_rows`),
the rows dropped (:func:`dropped_rows`); integer and time keys grouped by a 64-bit hash; key equality
is Spark's (one NaN, one zero, null equal to null), defined in :mod:`deltaextras.core.values`."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ....core.arrays import (
    bool_array,
    index_array,
    int64_array,
    numpy_indices,
    plain_integers,
    py_value,
    row_numbers,
    scalar,
)
from ....core.values import canonical, same_values
from ....errors import DuplicateKeyError


def first_rows(table: pa.Table, keys: list[str], tracking: Collection[str] = ()) -> pa.Array | None:
    """The rows to keep (``None``: all), ascending: rows that repeat an earlier row on every column but
    the row tracking columns ``tracking`` (the first row keeps its id) are dropped; raises
    :class:`~deltaextras.errors.DuplicateKeyError` when rows share the key but differ.

    Values compare as Spark's ``dropDuplicates`` groups them: NaN equals NaN (whatever its payload),
    -0.0 equals 0.0, null equals null. Vectorized: rows are grouped by key — integer and time keys
    without nulls through a 64-bit hash and one NumPy sort, any other key through Arrow's hash
    grouping — and only the rows of repeated keys are compared, column by column, with the first
    row of their key (a hash collision shows there as differing keys, and the exact grouping decides).

    Example:
        >>> first_rows(pa.table({"k": [1, 2, 1], "v": [0.5, 1.0, 0.5]}), ["k"]).to_pylist()
        [0, 1]
    """
    n = table.num_rows
    hashed = first_rows_hashed(table, keys)
    if hashed is not None:
        firsts, members, owners = hashed
        if len(firsts) == n:
            return None
        if all(
            py_value(pc.all(same_values(table.column(k).take(members), table.column(k).take(owners)))) for k in keys
        ):
            return _keep_firsts(table, keys, tracking, firsts, members, owners)
    firsts, members, owners = _first_rows_exact(table, keys)
    if len(firsts) == n:
        return None
    return _keep_firsts(table, keys, tracking, firsts, members, owners)


def _first_rows_exact(table: pa.Table, keys: list[str]) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The first row of every key, and each later row of a repeated key beside its key's first row."""
    n = table.num_rows
    keyed = pa.table({**{k: canonical(table.column(k)) for k in keys}, "__row": row_numbers(n)})
    groups = keyed.group_by(keys, use_threads=False).aggregate([("__row", "count")])
    if groups.num_rows == n:
        return row_numbers(n), row_numbers(0), row_numbers(0)
    del groups
    listed = keyed.group_by(keys, use_threads=False).aggregate([("__row", "min"), ("__row", "list")])
    del keyed
    lists = listed.column("__row_list").combine_chunks()
    firsts = listed.column("__row_min").combine_chunks()
    del listed
    repeated = pc.greater(pc.list_value_length(lists), 1)
    lists, owners = lists.filter(repeated), firsts.filter(repeated)
    members = pc.list_flatten(lists)
    owners = owners.take(pc.list_parent_indices(lists))
    del lists
    later = pc.not_equal(members, owners)
    return firsts, members.filter(later), owners.filter(later)


def _keep_firsts(
    table: pa.Table, keys: list[str], tracking: Collection[str], firsts: pa.Array, members: pa.Array, owners: pa.Array
) -> pa.Array:
    """Check that every later row equals its key's first row on every column; the rows to keep."""
    for name in table.column_names:
        if name in tracking:
            continue  # the first row keeps its id; the ids of the rows it stands for go
        column = table.column(name)
        same = same_values(column.take(members), column.take(owners))
        if not py_value(pc.all(same)):
            row = py_value(owners[py_value(pc.index(same, scalar(False, pa.bool_())))])
            key = {k: py_value(table.column(k)[row]) for k in keys}
            raise DuplicateKeyError(
                f"rows share unique_by key {key} but differ in column {name!r}; nothing was committed. "
                "Fix the duplicates or widen unique_by"
            )
    return index_array(np.sort(numpy_indices(firsts)))


def dropped_rows(table: pa.Table, keep: pa.Array) -> pa.Table:
    """The rows de-duplication drops: every row whose index is not in ``keep``, in table order.

    Example:
        >>> t = pa.table({"k": [1, 2, 1, 1], "v": [0.5, 1.0, 0.5, 0.5]})
        >>> dropped_rows(t, pa.array([0, 1])).to_pylist()
        [{'k': 1, 'v': 0.5}, {'k': 1, 'v': 0.5}]
    """
    mask = np.ones(table.num_rows, dtype=bool)
    mask[keep.to_numpy(zero_copy_only=False)] = False
    return table.filter(bool_array(mask))


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


__all__ = ["canonical_floats", "dropped_rows", "first_rows", "first_rows_hashed", "same_values"]
