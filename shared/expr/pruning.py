"""Pruning: whether statistics (bounds, null counts, row counts) allow some row to satisfy a bound
expression; NaN is never in Parquet or Delta bounds, so float comparisons that NaN satisfies never skip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..core.arrays import py_value
from .binder import NEGATE
from .tree import And, Column, Compare, Expr, InList, IsNull, Like, Literal, Not, Or


@dataclass(frozen=True)
class FieldStats:
    """What statistics say about one column over a set of rows: bounds (Python values; None =
    unknown), nulls (None = unknown) and row count (None = unknown). Bounds may be wide (lower
    than the true minimum, higher than the true maximum), never narrow.
    """

    min: Any = None
    max: Any = None
    null_count: int | None = None
    num_rows: int | None = None

    @property
    def all_null(self) -> bool:
        return self.null_count is not None and self.num_rows is not None and self.null_count >= self.num_rows > 0


def might_be_true(expr: Expr, stats: Callable[[str], FieldStats | None]) -> bool:
    """Whether some row summarized by ``stats`` (logical column → :class:`FieldStats`, or None when
    nothing is known) could make the bound predicate TRUE. False means the rows can be skipped.

    Example:
        >>> from deltaextras.expr.predicate import bind, parse
        >>> e = bind(parse("x > 10 AND s = 'a'"), {"x": pa.int64(), "s": pa.string()})
        >>> might_be_true(e, lambda c: FieldStats(0, 5, 0, 100) if c == "x" else None)
        False
        >>> might_be_true(e, lambda c: FieldStats(0, 50, 0, 100) if c == "x" else None)
        True
    """
    try:
        return _might(expr, stats, False)
    except Exception:  # incomparable statistics never skip anything
        return True


def _might(e: Expr, stats: Callable[[str], FieldStats | None], negate: bool) -> bool:
    if isinstance(e, And):
        if negate:
            return _might(e.left, stats, True) or _might(e.right, stats, True)
        return _might(e.left, stats, False) and _might(e.right, stats, False)
    if isinstance(e, Or):
        if negate:
            return _might(e.left, stats, True) and _might(e.right, stats, True)
        return _might(e.left, stats, False) or _might(e.right, stats, False)
    if isinstance(e, Not):
        return _might(e.child, stats, not negate)
    if isinstance(e, Literal):
        if e.kind == "null" or e.value is None:
            return False
        return bool(e.value) != negate
    if isinstance(e, Column):  # bare boolean column: TRUE (or FALSE when negated) needs a valid value
        s = stats(e.name)
        if s is None:
            return True
        if s.all_null:
            return False
        want = not negate
        return not (s.min is not None and s.max is not None and s.min == s.max and bool(s.min) != want)
    if isinstance(e, (IsNull, Like, InList)):
        s = stats(e.operand.name) if isinstance(e.operand, Column) else None
        if s is None:  # not a column, or no statistics: may match
            return True
        if isinstance(e, IsNull):
            if e.negated == negate:  # IS NULL (not negated) or NOT (IS NOT NULL)
                return s.null_count is None or s.null_count > 0
            return not s.all_null
        if isinstance(e, Like):
            return not s.all_null
        return _might_in(e, s, negate)
    if isinstance(e, Compare):
        return _might_compare(e, stats, negate)
    return True


def _might_in(e: InList, s: FieldStats, negate: bool) -> bool:
    """Whether ``column IN (...)`` (or, negated, NOT IN) may hold in a file with these statistics."""
    if s.all_null:
        return False
    values = [py_value(v.scalar) for v in e.values if v.scalar is not None and v.scalar.is_valid]
    has_null = len(values) < len(e.values)
    if e.negated != negate:  # NOT IN: never TRUE when the list holds NULL
        if has_null:
            return False
        return not (s.min is not None and s.min == s.max and not _floating(e.values) and s.min in values)
    if not values:
        return False
    lo, hi = _not_nan(s.min), _not_nan(s.max)
    if lo is None or hi is None or any(isinstance(v, float) and math.isnan(v) for v in values):
        return True  # a NaN in the list may match NaN rows, which statistics never show
    return any(lo <= v <= hi for v in values)


def _might_compare(e: Compare, stats: Callable[[str], FieldStats | None], negate: bool) -> bool:
    """Whether ``column <op> literal`` (or its negation) may hold in a file with these statistics."""
    if not (isinstance(e.left, Column) and isinstance(e.right, Literal)):
        return True
    lit = e.right
    if lit.scalar is None or not lit.scalar.is_valid:
        return False
    s = stats(e.left.name)
    if s is None:
        return True
    if s.all_null:
        return False
    op = NEGATE[e.op] if negate else e.op  # exact: Spark's order is total, NaN included
    v = py_value(lit.scalar)
    lo, hi = _not_nan(s.min), _not_nan(s.max)
    if _may_hold_nan(e.left, lit):
        # Statistics leave NaN out of min/max, and NaN sorts above every number.
        if isinstance(v, float) and math.isnan(v):
            return op != ">"  # nothing is greater than NaN; any other comparison may hold
        if op in (">", ">=", "!="):
            return True
    if op == "!=":
        if lo is None or hi is None or pa.types.is_floating(lit.scalar.type):
            return True
        return not (lo == hi == v)
    if op in ("=", "<", "<=") and lo is None:
        return True
    if op in ("=", ">", ">=") and hi is None:
        return True
    if op == "=":
        return bool(lo <= v <= hi)
    if op == "<":
        return bool(lo < v)
    if op == "<=":
        return bool(lo <= v)
    if op == ">":
        return bool(hi > v)
    return bool(hi >= v)


def _not_nan(bound: Any) -> Any:
    """A statistic, or None (unknown) when it is NaN (a writer that put NaN into min/max)."""
    return None if isinstance(bound, float) and math.isnan(bound) else bound


def _may_hold_nan(column: Column, lit: Literal) -> bool:
    """Whether the compared column is floating point (when unbound: whether the literal is)."""
    if column.type is not None:
        return bool(pa.types.is_floating(column.type))
    return bool(pa.types.is_floating(lit.scalar.type))


def _floating(values: tuple[Literal, ...]) -> bool:
    return any(v.scalar is not None and pa.types.is_floating(v.scalar.type) for v in values)
