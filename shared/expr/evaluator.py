"""Evaluation of a bound expression on Arrow tables with SQL's three-valued logic and Spark's float
ordering (``NaN`` equal to itself whatever its payload and above every number, ``-0.0 = 0.0``; see
:mod:`deltaextras.core.values`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.arrays import bool_array, constant_array, py_value, scalar
from ..core.values import canonical
from .binder import bind, typed_literal
from .tree import And, Column, Compare, Expr, InList, InvalidPredicateError, IsNull, Like, Literal, Not, Or


def evaluate(expr: Expr, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """The three-valued result (true / false / null per row) of a bound expression on ``table``,
    whose columns are named by logical column name.

    Example:
        >>> from deltaextras.expr.parser import parse
        >>> t = pa.table({"x": [1, None, 3]})
        >>> evaluate(bind(parse("x != 1"), {"x": pa.int64()}), t).to_pylist()
        [False, None, True]
    """
    n = table.num_rows
    return _Eval(table, n).run(expr)


def matches(expr: Expr, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Rows where the predicate is TRUE (null counts as not matching); binds against the table's
    own column types first.

    Example:
        >>> from deltaextras.expr.parser import parse
        >>> t = pa.table({"x": [1, None, 3]})
        >>> matches(parse("NOT x = 1"), t).to_pylist()
        [False, False, True]
    """
    bound = bind(expr, {f.name: f.type for f in table.schema})
    return pc.fill_null(evaluate(bound, table), _FALSE)


class _Eval:
    def __init__(self, table: pa.Table, n: int) -> None:
        self.table = table
        self.n = n

    def value(self, e: Expr) -> Any:
        if isinstance(e, Column):
            return self.table.column(e.name)
        if isinstance(e, Literal):
            return e.scalar if e.scalar is not None else typed_literal(e, None).scalar
        return self.run(e)

    def _const(self, value: bool | None) -> pa.Array:
        if value is None:
            return pa.nulls(self.n, pa.bool_())
        return bool_array(np.full(self.n, value, dtype=bool))

    def _array(self, value: Any) -> Any:
        return constant_array(value, self.n) if isinstance(value, pa.Scalar) else value

    def _broadcast(self, result: Any) -> Any:
        if isinstance(result, pa.Scalar):
            return self._const(py_value(result) if result.is_valid else None)
        return result

    def run(self, e: Expr) -> Any:
        if isinstance(e, Column):
            return self.table.column(e.name)
        if isinstance(e, Literal):
            if e.kind == "null":
                return self._const(None)
            return self._const(bool(e.value))
        if isinstance(e, Compare):
            left, right = self.value(e.left), self.value(e.right)
            if any(isinstance(x, pa.Scalar) and not x.is_valid for x in (left, right)):
                return self._const(None)
            if _floating_type(left) or _floating_type(right):
                if isinstance(right, pa.Scalar) and not isinstance(left, pa.Scalar):
                    return _compare_with_scalar(e.op, left, right)
                return _spark_compare(e.op, self._array(left), self._array(right))
            fn = _COMPARE[e.op]
            return self._broadcast(fn(left, right))
        if isinstance(e, InList):
            operand = self.value(e.operand)
            if isinstance(operand, pa.Scalar):
                operand = constant_array(operand, self.n)
            present = [v.scalar for v in e.values if v.scalar is not None and v.scalar.is_valid]
            has_null = len(present) < len(e.values)
            if present:
                typ = present[0].type
                value_set = pa.concat_arrays([constant_array(s.cast(typ), 1) for s in present])
                if not operand.type.equals(typ):
                    operand = operand.cast(typ) if _safe_cast(operand.type, typ) else operand
                    if not operand.type.equals(typ):
                        value_set = value_set.cast(operand.type)
                # Spark's equality (both zeros one value, every NaN one value), not Arrow's bitwise one
                hit = pc.is_in(canonical(operand), value_set=canonical(value_set), skip_nulls=True)
            else:
                hit = self._const(False)
            hit = pc.if_else(pc.is_null(operand), _NULL_BOOL, hit)
            if has_null:
                hit = pc.if_else(hit, _TRUE, _NULL_BOOL)
            return pc.invert(hit) if e.negated else hit
        if isinstance(e, IsNull):
            operand = self.value(e.operand)
            if isinstance(operand, pa.Scalar):
                return self._const(operand.is_valid == e.negated)
            return pc.is_valid(operand) if e.negated else pc.is_null(operand)
        if isinstance(e, Like):
            operand = self.value(e.operand)
            if isinstance(operand, pa.Scalar):
                operand = constant_array(operand, self.n)
            hit = pc.match_like(operand, e.pattern)
            return pc.invert(hit) if e.negated else hit
        if isinstance(e, And):
            return pc.and_kleene(self.run(e.left), self.run(e.right))
        if isinstance(e, Or):
            return pc.or_kleene(self.run(e.left), self.run(e.right))
        if isinstance(e, Not):
            return pc.invert(self.run(e.child))
        raise InvalidPredicateError(f"predicate: cannot evaluate {e!r}")


_TRUE = scalar(True, pa.bool_())
_FALSE = scalar(False, pa.bool_())
_NULL_BOOL = scalar(None, pa.bool_())

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _floating_type(value: Any) -> bool:
    return pa.types.is_floating(value.type)


# Where either side is NaN, the result of each comparison under Spark's order (NaN above everything,
# NaN equal to NaN), from the NaN masks of the left and right sides.
_NAN_RESULT: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda ln, rn: pc.and_(ln, rn),
    "!=": lambda ln, rn: pc.invert(pc.and_(ln, rn)),
    "<": lambda ln, rn: pc.and_(pc.invert(ln), rn),
    "<=": lambda ln, rn: rn,
    ">": lambda ln, rn: pc.and_(ln, pc.invert(rn)),
    ">=": lambda ln, rn: ln,
}


def _spark_compare(op: str, left: Any, right: Any) -> Any:
    """``left op right`` with Spark's floating-point semantics (see the module doc); NULL stays NULL.

    Example:
        >>> f = pa.array([1.0, float("nan"), float("inf"), -0.0, None])
        >>> _spark_compare(">", f, pa.array([float("inf")] * 5)).to_pylist()
        [False, True, False, False, None]
        >>> _spark_compare("=", f, pa.array([float("nan"), float("nan"), 1.0, 0.0, 1.0])).to_pylist()
        [False, True, False, True, None]
    """
    result = _COMPARE[op](left, right)
    ln, rn = _nan_mask(left), _nan_mask(right)
    result = pc.if_else(pc.or_(ln, rn), _NAN_RESULT[op](ln, rn), result)
    return pc.if_else(pc.or_(pc.is_null(left), pc.is_null(right)), _NULL_BOOL, result)


# Each comparison with a NaN literal, from the column's NaN mask (NULL where the column is NULL).
_WITH_NAN: dict[str, Callable[[Any], Any]] = {
    "=": lambda nan: nan,
    "!=": lambda nan: pc.invert(nan),
    "<": lambda nan: pc.invert(nan),
    "<=": lambda nan: pc.or_(nan, pc.invert(nan)),
    ">": lambda nan: pc.and_(nan, pc.invert(nan)),
    ">=": lambda nan: nan,
}


def _compare_with_scalar(op: str, column: Any, value: pa.Scalar) -> Any:
    """``column op value`` under Spark's order at the cost of one IEEE comparison (a NaN ``value`` costs
    a NaN mask instead).

    Example:
        >>> f = pa.array([1.0, float("nan"), 3.0, None])
        >>> _compare_with_scalar(">", f, pa.scalar(2.0)).to_pylist()
        [False, True, True, None]
        >>> _compare_with_scalar("<=", f, pa.scalar(float("nan"))).to_pylist()
        [True, True, True, None]
    """
    v = value.as_py()
    if isinstance(v, float) and math.isnan(v):
        return _WITH_NAN[op](pc.is_nan(column.cast(pa.float64()) if not pa.types.is_floating(column.type) else column))
    if op in _ABOVE and pa.types.is_floating(column.type):
        # Spark's order is total, so x > v is NOT x <= v; IEEE's x <= v is FALSE for NaN, making NaN above v.
        return pc.invert(_COMPARE[_ABOVE[op]](column, value))
    return _COMPARE[op](column, value)  # =, <, <=, != already hold for NaN as IEEE answers them


_ABOVE = {">": "<=", ">=": "<"}


def _nan_mask(values: Any) -> Any:
    """True where a value is NaN (False for nulls and for types without NaN)."""
    if not pa.types.is_floating(values.type):
        return constant_array(_FALSE, len(values))
    return pc.fill_null(pc.is_nan(values), False)


def _safe_cast(src: pa.DataType, dst: pa.DataType) -> bool:
    return (pa.types.is_integer(src) and (pa.types.is_floating(dst) or pa.types.is_integer(dst))) or (
        pa.types.is_floating(src) and pa.types.is_floating(dst)
    )
