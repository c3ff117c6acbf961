"""Binding: an expression's columns checked against the table's types and every literal converted to the
type of the column it meets.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from decimal import Decimal

import pyarrow as pa

from ..core.arrays import infer_scalar, scalar
from .parser import parse_date, parse_timestamp
from .tree import And, Column, Compare, Expr, InList, InvalidPredicateError, IsNull, Like, Literal, Not, Or


def bind(expr: Expr, types: Mapping[str, pa.DataType]) -> Expr:
    """Check column names against ``types`` (logical name → Arrow type) and convert every literal
    to the type of the column it meets; comparisons get the column on the left.

    Example:
        >>> from deltaextras.expr.parser import parse
        >>> e = bind(parse("'2024-01-02' < day"), {"day": pa.date32()})
        >>> str(e), e.right.scalar.type
        ("(day > '2024-01-02')", DataType(date32[day]))
        >>> bind(parse("nope = 1"), {"day": pa.date32()})
        Traceback (most recent call last):
        ...
        deltaextras.expr.tree.InvalidPredicateError: predicate names column 'nope', which is not in the table...
    """
    return _Binder(types).bind(expr)


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class _Binder:
    def __init__(self, types: Mapping[str, pa.DataType]) -> None:
        self.types = dict(types)

    def bind(self, e: Expr) -> Expr:
        if isinstance(e, Column):
            return Column(e.name, self._type(e))
        if isinstance(e, Literal):
            return typed_literal(e, None)
        if isinstance(e, Compare):
            left, right, op = e.left, e.right, e.op
            if isinstance(left, Literal) and isinstance(right, Column):
                left, right, op = right, left, _FLIP[op]
            if isinstance(left, Column) and isinstance(right, Literal):
                return Compare(op, Column(left.name, self._type(left)), self._literal_for(right, left))
            if isinstance(left, Column) and isinstance(right, Column):
                a, b = self._type(left), self._type(right)
                if not _comparable(a, b):
                    raise InvalidPredicateError(
                        f"predicate compares column {left.name!r} ({a}) with column {right.name!r} ({b})"
                    )
                return Compare(op, Column(left.name, a), Column(right.name, b))
            assert isinstance(left, Literal) and isinstance(right, Literal)
            return Compare(op, typed_literal(left, None), typed_literal(right, None))
        if isinstance(e, InList):
            if isinstance(e.operand, Column):
                values = tuple(self._literal_for(v, e.operand) for v in e.values)
            else:
                values = tuple(typed_literal(v, None) for v in e.values)
            kinds = {v.scalar.type for v in values if v.scalar is not None and v.scalar.is_valid}
            if len(kinds) > 1:
                if not all(pa.types.is_integer(k) or pa.types.is_floating(k) or pa.types.is_decimal(k) for k in kinds):
                    raise InvalidPredicateError(f"predicate: the values of {e} have different types")
                values = tuple(
                    Literal(v.value, v.kind, v.scalar.cast(pa.float64()) if v.scalar.is_valid else v.scalar)
                    for v in values
                )
            return InList(self.bind(e.operand), values, e.negated)
        if isinstance(e, IsNull):
            return IsNull(self.bind(e.operand), e.negated)
        if isinstance(e, Like):
            if isinstance(e.operand, Column) and not _is_string(self._type(e.operand)):
                raise InvalidPredicateError(
                    f"predicate: LIKE needs a text column; {e.operand.name!r} is {self._type(e.operand)}"
                )
            return Like(self.bind(e.operand), e.pattern, e.negated)
        if isinstance(e, And):
            return And(self._boolean(e.left), self._boolean(e.right))
        if isinstance(e, Or):
            return Or(self._boolean(e.left), self._boolean(e.right))
        if isinstance(e, Not):
            return Not(self._boolean(e.child))
        raise InvalidPredicateError(f"predicate: unsupported expression {e!r}")

    def _boolean(self, e: Expr) -> Expr:
        bound = self.bind(e)
        if isinstance(bound, Column) and not pa.types.is_boolean(self._type(bound)):
            raise InvalidPredicateError(
                f"predicate uses column {bound.name!r} ({self._type(bound)}) as a condition; compare it with a value"
            )
        if isinstance(bound, Literal) and bound.kind not in ("bool", "null"):
            raise InvalidPredicateError(f"predicate uses {bound} as a condition; only TRUE, FALSE or NULL can be")
        return bound

    def _type(self, c: Column) -> pa.DataType:
        t = self.types.get(c.name)
        if t is None:
            hint = ""
            if c.name.lower() in {n.lower() for n in self.types}:
                hint = " (names are case-sensitive)"
            raise InvalidPredicateError(
                f"predicate names column {c.name!r}, which is not in the table{hint}; columns: "
                f"{', '.join(sorted(self.types))[:400]}. Quote text values with single quotes"
            )
        return t

    def _literal_for(self, lit: Literal, col: Column) -> Literal:
        target = self._type(col)
        if lit.kind == "null":
            return Literal(None, "null", scalar(None, target))
        if pa.types.is_nested(target) or pa.types.is_binary(target) or pa.types.is_large_binary(target):
            raise InvalidPredicateError(f"predicate: column {col.name!r} has type {target}, which cannot be compared")
        try:
            return Literal(lit.value, lit.kind, _convert(lit, target))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            raise InvalidPredicateError(
                f"predicate compares column {col.name!r} ({target}) with {lit}, which does not convert to "
                f"that type: {str(exc).splitlines()[0][:120]}"
            ) from None


def _convert(lit: Literal, target: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of a literal, in the column's type where the value fits exactly."""
    v = lit.value
    if pa.types.is_boolean(target):
        if lit.kind != "bool":
            raise TypeError("a boolean column compares with TRUE or FALSE")
        return scalar(v, pa.bool_())
    if _is_string(target):
        if lit.kind != "str":
            raise TypeError("a text column compares with a quoted value")
        return scalar(v, target)
    if pa.types.is_floating(target) and lit.kind == "str" and str(v).strip().lower() in _SPECIAL_FLOATS:
        return scalar(_SPECIAL_FLOATS[str(v).strip().lower()], pa.float64())
    if pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target):
        if lit.kind not in ("int", "float", "decimal"):
            raise TypeError("a numeric column compares with a number")
        if pa.types.is_integer(target):
            if lit.kind == "int":
                try:
                    return scalar(v, target)
                except (pa.ArrowInvalid, OverflowError):
                    return scalar(float(v), pa.float64())
            return scalar(float(v), pa.float64())  # compare in floating point
        if pa.types.is_floating(target):
            return scalar(float(v), pa.float64())
        dec = Decimal(v) if lit.kind != "float" else Decimal(repr(v))
        try:
            return scalar(dec, target)
        except (pa.ArrowInvalid, OverflowError):
            return scalar(float(dec), pa.float64())
    if pa.types.is_date(target):
        if lit.kind == "date":
            return scalar(v, target)
        if lit.kind == "str":
            return scalar(parse_date(v), target)
        if lit.kind == "timestamp":
            raise TypeError("a date column compares with DATE '...' or a 'YYYY-MM-DD' text")
        raise TypeError("a date column compares with DATE '...' or a 'YYYY-MM-DD' text")
    if pa.types.is_timestamp(target):
        if lit.kind == "str":
            v = parse_timestamp(v)
        elif lit.kind == "date":
            v = dt.datetime.combine(v, dt.time())
        elif lit.kind != "timestamp":
            raise TypeError("a timestamp column compares with TIMESTAMP '...' or a quoted timestamp")
        assert isinstance(v, dt.datetime)
        if target.tz is None:
            v = v.replace(tzinfo=None)
        elif v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return scalar(v, target)
    raise TypeError(f"type {target} is not supported in predicates")


# Text a float column compares with as Spark casts it.
_SPECIAL_FLOATS = {
    "nan": math.nan,
    "infinity": math.inf,
    "+infinity": math.inf,
    "inf": math.inf,
    "+inf": math.inf,
    "-infinity": -math.inf,
    "-inf": -math.inf,
}


def typed_literal(lit: Literal, target: pa.DataType | None) -> Literal:
    if lit.scalar is not None:
        return lit
    if lit.kind == "null":
        return Literal(None, "null", scalar(None, target or pa.null()))
    if lit.kind == "date":
        return Literal(lit.value, lit.kind, scalar(lit.value, pa.date32()))
    if lit.kind == "timestamp":
        tz = "UTC" if lit.value.tzinfo is not None else None
        return Literal(lit.value, lit.kind, scalar(lit.value, pa.timestamp("us", tz=tz)))
    if lit.kind == "decimal":
        return Literal(lit.value, lit.kind, scalar(float(lit.value), pa.float64()))
    return Literal(lit.value, lit.kind, infer_scalar(lit.value))


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _comparable(a: pa.DataType, b: pa.DataType) -> bool:
    def family(t: pa.DataType) -> str:
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return "num"
        if _is_string(t):
            return "str"
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            return "time"
        return str(t)

    return family(a) == family(b)
