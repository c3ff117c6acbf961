"""The order of a pass's rows: which row goes where once sorted by the row-group column and then
``sort_by`` (computed on indices, the rows stay where they are), where each value's rows end, and the
gathering of a group of values' rows in that order.

Example:
    >>> import pyarrow as pa
    >>> from deltaextras.ops.rorder.rewrite.output import RewriteResult
    >>> t = pa.table({"k": [2, 1, 2, 1], "t": [9, 8, 7, 6]})
    >>> perm, ends = permutation(t, "k", [("t", "ascending", "at_end")])
    >>> perm.tolist(), ends
    ([3, 1, 2, 0], [2, 4])
    >>> gatherer(t, "k", perm, ends, RewriteResult())([0, 2, 4]).to_pydict()
    {'k': [1, 1, 2, 2], 't': [6, 8, 7, 9]}
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ....core.arrays import fixed_width_array, index_array, integer_like, integer_view, numpy_indices, plain_integers
from ....core.values import run_ends as value_run_ends
from .lanes import value_groups
from .output import RewriteResult, timed
from .packed_keys import PackedOrder, packed_order
from .threads import HelperPool

SORT_THREADS = 2


def permutation(table: pa.Table, by: str, inner: list[tuple[str, str, str]]) -> tuple[np.ndarray, list[int]]:
    """Row indices in ``by`` order (nulls last) then ``inner`` order (``(column, order, "at_end")``)
    within each value, and where each value's rows end. The value order and the run ends are computed
    side by side; each value's inner sort on its own, on two threads (:func:`packed` is quicker for
    the columns :func:`packable` accepts)."""
    by_col = table.column(by).chunk(0)
    with HelperPool(1) as pool:
        ends = pool.submit(run_ends, by_col)
        order = numpy_indices(pc.array_sort_indices(by_col, null_placement="at_end"))
        runs = ends.result()
    del by_col
    if not inner:
        return order, runs
    keys = table.select([name for name, _, _ in inner])
    nan_keys = any(o == "descending" and pa.types.is_floating(keys.schema.field(n).type) for n, o, _ in inner)
    perm = np.empty_like(order)

    def sort_run(bounds: tuple[int, int]) -> None:
        start, end = bounds
        if end - start < 2:
            perm[start:end] = order[start:end]
            return
        part = keys.take(index_array(order[start:end]))
        plain = plain_integers(part.column(0)) if len(inner) == 1 else None
        if plain is not None:
            # Integers and times without nulls: NumPy's introsort, several times faster than a
            # stable sort; rows with equal keys may change places (they are equal on the keys).
            idx = np.argsort(plain)
            perm[start:end] = order[start + (idx[::-1] if inner[0][1] == "descending" else idx)]
            return
        if nan_keys:
            idx = pc.sort_indices(*nan_first(part, inner))
        elif len(inner) == 1:
            idx = pc.array_sort_indices(part.column(0), order=inner[0][1], null_placement="at_end")
        else:
            idx = pc.sort_indices(part, sort_keys=inner)
        perm[start:end] = order[start + numpy_indices(idx)]

    def sort_runs(ends: list[int]) -> None:
        for bounds in itertools.pairwise(ends):
            sort_run(bounds)

    # One task per thread, each a contiguous share of the values.
    with HelperPool(SORT_THREADS) as pool:
        list(pool.map(sort_runs, value_groups(runs, -(-len(order) // SORT_THREADS))))
    return perm, runs


def nan_first(part: pa.Table, inner: list[tuple[str, str, str]]) -> tuple[pa.Table, list[tuple[str, str, str]]]:
    """The rows and sort keys that order a descending float column as Spark does: NaN is the greatest value,
    so it comes first, then ``+inf`` down to ``-inf``, nulls last. Arrow puts NaN beside the nulls at the end
    in both directions; an ``is NaN`` key sorted descending before each such column moves it to the front.

    Example:
        >>> t = pa.table({"f": [1.0, None, float("nan"), float("inf"), -0.0]})
        >>> rows, keys = nan_first(t, [("f", "descending", "at_end")])
        >>> t.take(pc.sort_indices(rows, sort_keys=keys)).column("f").to_pylist()
        [nan, inf, 1.0, -0.0, None]
    """
    keys: list[tuple[str, str, str]] = []
    for i, (name, order, placement) in enumerate(inner):
        column = part.column(name)
        if order == "descending" and pa.types.is_floating(column.type):
            flag = f"\x00nan{i}"
            part = part.append_column(flag, pc.is_nan(column))  # null for a null: stays last
            keys.append((flag, "descending", placement))
        keys.append((name, order, placement))
    return part, keys


def packable(schema: pa.Schema, by: str, inner: list[tuple[str, str, str]]) -> bool:
    """Whether the order may be packed keys: ``by`` and at most one ``inner`` column of integers or
    times (nulls are found only when the keys are built).

    Example:
        >>> schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us")), ("s", pa.string())])
        >>> packable(schema, "k", [("t", "ascending", "at_end")]), packable(schema, "k", [("s", "ascending", "at_end")])
        (True, False)
    """
    if len(inner) > 1:
        return False
    return all(integer_like(schema.field(name).type) for name in [by, *(name for name, _, _ in inner)])


def packed(
    by_col: pa.ChunkedArray, inner_col: pa.ChunkedArray | None, inner: list[tuple[str, str, str]]
) -> PackedOrder | None:
    """The order by packed keys of the columns as read (chunked), or ``None`` when a column holds nulls
    or the keys do not fit (:func:`deltaextras.ops.rorder.rewrite.packed_keys.packed_order`).

    Example:
        >>> order = packed(pa.chunked_array([[2, 1], [2]]), pa.chunked_array([[5, 6], [4]]), [("t", "ascending", "")])
        >>> order.rows(0, 3).tolist(), order.ends
        ([1, 2, 0], [1, 3])
    """
    by_values = [integer_view(chunk) for chunk in by_col.chunks]
    inner_values = None if inner_col is None else [integer_view(chunk) for chunk in inner_col.chunks]
    if any(v is None for v in [*by_values, *(inner_values or [])]):
        return None
    descending = bool(inner) and inner[0][1] == "descending"
    with HelperPool(SORT_THREADS) as pool:
        return packed_order(
            by_values,
            inner_values,
            descending=descending,
            map_blocks=pool.map,  # type: ignore[arg-type]
            sort_parts=SORT_THREADS,
        )


def packed_gatherer(
    table: pa.Table, by: str, inner: list[tuple[str, str, str]], order: PackedOrder, result: RewriteResult
) -> Callable[[list[int]], pa.Table]:
    """:func:`gatherer` for packed keys: the other columns are gathered, ``by`` and the ``inner``
    column are read back from the sorted keys (neither is gathered nor need be contiguous)."""
    derived: dict[str, Callable[[list[int]], np.ndarray]] = {by: order.by_values}
    if inner:
        derived[inner[0][0]] = lambda group: order.inner_values(group[0], group[-1])
    rest = table.select([name for name in table.column_names if name not in derived])
    schema = table.schema

    def gather(group: list[int]) -> pa.Table:
        with timed(result, "take"):
            start, end = group[0], group[-1]
            part = rest.take(index_array(order.rows(start, end))) if rest.num_columns else None
            arrays = []
            for field in schema:
                if field.name in derived:
                    values = derived[field.name](group)
                    arrays.append(fixed_width_array(field.type, values))
                else:
                    arrays.append(part.column(field.name))  # type: ignore[union-attr]
            return pa.Table.from_arrays(arrays, schema=schema)

    return gather


def run_ends(by_col: pa.Array) -> list[int]:
    """Where each value's rows end once sorted by value (nulls last; both zeros one value, every NaN
    one value, last: :func:`deltaextras.core.values.run_ends`).

    Example:
        >>> run_ends(pa.array([3, None, 1, 3]))
        [1, 3, 4]
    """
    return value_run_ends(by_col)


def gatherer(
    table: pa.Table, by: str, perm: np.ndarray, ends: list[int], result: RewriteResult
) -> Callable[[list[int]], pa.Table]:
    """A function giving the rows of a group of values (boundaries ``[start, end1, ...]``, offsets
    into ``perm``) in layout order, timed as ``take``. An integer or time ``by`` column without nulls
    is not gathered: each value's rows hold its one value (equal integers are equal bits), repeated."""
    indices = index_array(perm)
    values_of = plain_integers(table.column(by)) if table.num_columns > 1 else None
    if values_of is None:

        def gather(group: list[int]) -> pa.Table:
            with timed(result, "take"):
                return table.take(indices.slice(group[0], group[-1] - group[0]))

        return gather
    starts = [0, *ends[:-1]]
    values = values_of[perm[starts]]
    first_value = {start: k for k, start in enumerate(starts)}
    where = table.schema.get_field_index(by)
    field = table.schema.field(where)
    rest = table.remove_column(where)

    def gather_rest(group: list[int]) -> pa.Table:
        with timed(result, "take"):
            part = rest.take(indices.slice(group[0], group[-1] - group[0]))
            k = first_value[group[0]]
            lengths = np.diff(group)
            column = np.repeat(values[k : k + len(lengths)], lengths)
            array = fixed_width_array(field.type, column)
            return part.add_column(where, field, array)

    return gather_rest
