"""The row predicate of ``delete``: a small SQL subset, parsed without ``eval``, evaluated on Arrow
tables with SQL's three-valued logic, and tested against statistics to skip files and row groups.

Grammar (keywords are case-insensitive)::

    expr       := or_expr
    or_expr    := and_expr ( OR and_expr )*
    and_expr   := not_expr ( AND not_expr )*
    not_expr   := NOT not_expr | predicate
    predicate  := operand ( cmp operand
                          | [NOT] IN ( literal [, literal]* )
                          | [NOT] BETWEEN operand AND operand
                          | [NOT] LIKE 'pattern'
                          | IS [NOT] NULL )?
                | ( expr )
    cmp        := = | == | != | <> | < | <= | > | >=
    operand    := column | literal | - number
    column     := name | `any name` | "any name"
    literal    := 123 | 1.5 | 1e3 | 'text' ('' inside for a quote) | TRUE | FALSE | NULL
                | DATE 'YYYY-MM-DD' | TIMESTAMP 'YYYY-MM-DD[ T]HH:MM:SS[.ffffff][Z|+HH:MM]'

A bare column of boolean type is a predicate too. Column names are the table's (logical) top-level
column names, partition columns included; ``"..."`` quotes a name (use ``'...'`` for text).
Literals are converted to the type of the column they are compared with: ``'2024-01-01'``
compares with a date or timestamp column, ``3`` with any numeric column. Timestamps without an
offset are UTC. ``LIKE`` takes ``%`` and ``_`` wildcards.

Semantics are SQL's: a comparison with ``NULL`` is ``NULL`` (unknown), ``NOT NULL`` is ``NULL``,
``x IN (1, NULL)`` is ``TRUE`` or ``NULL``, and a row is deleted only where the predicate is
``TRUE``. Floating-point values compare as in Spark SQL: ``NaN = NaN`` is TRUE, ``NaN`` is larger than
every other number (``+Infinity`` included), and ``-0.0 = 0.0``. A float column compares with
``'NaN'``, ``'Infinity'`` and ``'-Infinity'`` too. Pruning follows the same rules: Parquet and Delta
statistics leave NaN out of min/max, so a file whose statistics say ``max <= 2`` may still hold NaN
rows, and ``f > 2`` (or ``NOT f <= 2``) never skips it.

Example:
    >>> import pyarrow as pa
    >>> expr = parse("node IN ('a', 'b') AND NOT value > 2 OR flag IS NULL")
    >>> str(expr)
    "((node IN ('a', 'b') AND (NOT (value > 2))) OR (flag IS NULL))"
    >>> t = pa.table({"node": ["a", "b", "c", None], "value": [1, 3, 1, 1], "flag": [True, True, None, False]})
    >>> matches(expr, t).to_pylist()
    [True, False, True, False]
    >>> expr.columns()
    ['flag', 'node', 'value']
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.arrays import bool_array, constant_array, infer_scalar, py_value, scalar
from ..errors import InvalidArgumentError

__all__ = [
    "Expr",
    "FieldStats",
    "InvalidPredicateError",
    "bind",
    "evaluate",
    "matches",
    "might_be_true",
    "parse",
]

MAX_PREDICATE_CHARS = 100_000
MAX_DEPTH = 64


class InvalidPredicateError(InvalidArgumentError):
    """The predicate text does not parse, names an unknown column, or compares incompatible types."""


# =============================================================================================== AST
class Expr:
    """A node of a parsed predicate."""

    def columns(self) -> list[str]:
        """The column names the expression reads, sorted."""
        out: set[str] = set()
        self._collect(out)
        return sorted(out)

    def _collect(self, out: set[str]) -> None:
        for child in self._children():
            child._collect(out)

    def _children(self) -> tuple[Expr, ...]:
        return ()


@dataclass(frozen=True)
class Column(Expr):
    """A column reference (logical name); ``type`` is its Arrow type once bound."""

    name: str
    type: Any = field(default=None, compare=False, repr=False)

    def _collect(self, out: set[str]) -> None:
        out.add(self.name)

    def __str__(self) -> str:
        return (
            self.name
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name) and self.name.upper() not in _KEYWORDS
            else "`" + self.name.replace("`", "``") + "`"
        )


@dataclass(frozen=True)
class Literal(Expr):
    """A constant; ``value`` is a Python value (None for NULL), ``scalar`` its Arrow form once bound."""

    value: Any
    kind: str  # int | float | decimal | str | bool | null | date | timestamp
    scalar: Any = None

    def __str__(self) -> str:
        if self.kind == "null":
            return "NULL"
        if self.kind == "bool":
            return "TRUE" if self.value else "FALSE"
        if self.kind == "str":
            return "'" + str(self.value).replace("'", "''") + "'"
        if self.kind == "date":
            return f"DATE '{self.value.isoformat()}'"
        if self.kind == "timestamp":
            return f"TIMESTAMP '{self.value.isoformat()}'"
        return str(self.value)


@dataclass(frozen=True)
class Compare(Expr):
    """``left op right`` with op one of ``= != < <= > >=``."""

    op: str
    left: Expr
    right: Expr

    def _children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class InList(Expr):
    """``operand [NOT] IN (values)``."""

    operand: Expr
    values: tuple[Literal, ...]
    negated: bool = False

    def _children(self) -> tuple[Expr, ...]:
        return (self.operand, *self.values)

    def __str__(self) -> str:
        return f"{self.operand}{' NOT' if self.negated else ''} IN ({', '.join(str(v) for v in self.values)})"


@dataclass(frozen=True)
class IsNull(Expr):
    """``operand IS [NOT] NULL``."""

    operand: Expr
    negated: bool = False

    def _children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        return f"({self.operand} IS{' NOT' if self.negated else ''} NULL)"


@dataclass(frozen=True)
class Like(Expr):
    """``operand [NOT] LIKE 'pattern'``."""

    operand: Expr
    pattern: str
    negated: bool = False

    def _children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def __str__(self) -> str:
        quoted = "'" + self.pattern.replace("'", "''") + "'"
        return f"({self.operand}{' NOT' if self.negated else ''} LIKE {quoted})"


@dataclass(frozen=True)
class And(Expr):
    """Both (three-valued)."""

    left: Expr
    right: Expr

    def _children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True)
class Or(Expr):
    """Either (three-valued)."""

    left: Expr
    right: Expr

    def _children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True)
class Not(Expr):
    """Negation (``NOT NULL`` is ``NULL``)."""

    child: Expr

    def _children(self) -> tuple[Expr, ...]:
        return (self.child,)

    def __str__(self) -> str:
        return f"(NOT {self.child})"


# ========================================================================================= tokenizer
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "LIKE", "DATE", "TIMESTAMP"}
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>'(?:[^']|'')*')
  | (?P<bq>`(?:[^`]|``)*`)
  | (?P<dq>"(?:[^"]|"")*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str  # num | str | name | kw | op | punct | end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise InvalidPredicateError(
                f"predicate: unexpected character {text[pos]!r} at position {pos}: {_around(text, pos)}"
            )
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "ws":
            pass
        elif kind == "str":
            tokens.append(_Tok("str", raw[1:-1].replace("''", "'"), pos))
        elif kind == "bq":
            tokens.append(_Tok("name", raw[1:-1].replace("``", "`"), pos))
        elif kind == "dq":
            tokens.append(_Tok("name", raw[1:-1].replace('""', '"'), pos))
        elif kind == "name" and raw.upper() in _KEYWORDS:
            tokens.append(_Tok("kw", raw.upper(), pos))
        else:
            tokens.append(_Tok(kind, raw, pos))
        pos = m.end()
    tokens.append(_Tok("end", "", len(text)))
    return tokens


def _around(text: str, pos: int) -> str:
    return f"...{text[max(0, pos - 20) : pos]}>>>{text[pos : pos + 20]}..."


# ============================================================================================ parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    # -- helpers
    @property
    def tok(self) -> _Tok:
        return self.tokens[self.i]

    def _is(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.text == text)

    def _take(self, kind: str, text: str | None = None) -> _Tok | None:
        if self._is(kind, text):
            t = self.tok
            self.i += 1
            return t
        return None

    def _expect(self, kind: str, text: str | None, what: str) -> _Tok:
        t = self._take(kind, text)
        if t is None:
            self._fail(f"expected {what}")
        assert t is not None
        return t

    def _fail(self, message: str) -> None:
        t = self.tok
        found = "the end" if t.kind == "end" else repr(t.text)
        raise InvalidPredicateError(
            f"predicate: {message} at position {t.pos}, found {found}: {_around(self.text, t.pos)}"
        )

    # -- grammar
    def parse(self) -> Expr:
        if self.tok.kind == "end":
            raise InvalidPredicateError("predicate is empty; to delete every row, pass 'TRUE'")
        expr = self._or()
        if self.tok.kind != "end":
            self._fail("expected AND, OR or the end of the predicate")
        return expr

    def _nested(self, fn: Callable[[], Expr]) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self._fail(f"predicate nests deeper than {MAX_DEPTH} levels")
        try:
            return fn()
        finally:
            self.depth -= 1

    def _or(self) -> Expr:
        items = [self._and()]
        while self._take("kw", "OR"):
            items.append(self._and())
        return _balanced(Or, items)

    def _and(self) -> Expr:
        items = [self._not()]
        while self._take("kw", "AND"):
            items.append(self._not())
        return _balanced(And, items)

    def _not(self) -> Expr:
        if self._take("kw", "NOT"):
            return Not(self._nested(self._not))
        return self._predicate()

    def _predicate(self) -> Expr:
        if self._is("punct", "("):
            self.i += 1
            inner = self._nested(self._or)
            self._expect("punct", ")", "')'")
            return inner
        left = self._operand()
        if self._is("op"):
            op = self._take("op")
            assert op is not None
            symbol = {"==": "=", "<>": "!="}.get(op.text, op.text)
            return Compare(symbol, left, self._operand())
        negated = False
        if (
            self._is("kw", "NOT")
            and self.tokens[self.i + 1].kind == "kw"
            and self.tokens[self.i + 1].text
            in (
                "IN",
                "BETWEEN",
                "LIKE",
            )
        ):
            self.i += 1
            negated = True
        if self._take("kw", "IN"):
            self._expect("punct", "(", "'(' after IN")
            values = [self._literal("a literal in the IN list")]
            while self._take("punct", ","):
                values.append(self._literal("a literal in the IN list"))
            self._expect("punct", ")", "')' closing the IN list")
            return InList(left, tuple(values), negated)
        if self._take("kw", "BETWEEN"):
            low = self._operand()
            self._expect("kw", "AND", "AND in BETWEEN ... AND ...")
            high = self._operand()
            inside = And(Compare(">=", left, low), Compare("<=", left, high))
            return Not(inside) if negated else inside
        if self._take("kw", "LIKE"):
            pattern = self._expect("str", None, "a quoted pattern after LIKE")
            return Like(left, pattern.text, negated)
        if negated:
            self._fail("expected IN, BETWEEN or LIKE after NOT")
        if self._take("kw", "IS"):
            neg = bool(self._take("kw", "NOT"))
            self._expect("kw", "NULL", "NULL after IS [NOT]")
            return IsNull(left, neg)
        return left  # a bare boolean column or literal

    def _operand(self) -> Expr:
        t = self.tok
        if t.kind == "name":
            self.i += 1
            return Column(t.text)
        return self._literal("a column or a literal")

    def _literal(self, what: str) -> Literal:
        t = self.tok
        if t.kind == "punct" and t.text == "-":
            self.i += 1
            num = self._expect("num", None, "a number after '-'")
            return _number("-" + num.text)
        if t.kind == "num":
            self.i += 1
            return _number(t.text)
        if t.kind == "str":
            self.i += 1
            return Literal(t.text, "str")
        if t.kind == "kw":
            if t.text in ("TRUE", "FALSE"):
                self.i += 1
                return Literal(t.text == "TRUE", "bool")
            if t.text == "NULL":
                self.i += 1
                return Literal(None, "null")
            if t.text in ("DATE", "TIMESTAMP"):
                self.i += 1
                text = self._expect("str", None, f"a quoted value after {t.text}").text
                return Literal(_parse_date(text) if t.text == "DATE" else _parse_timestamp(text), t.text.lower())
        self._fail(f"expected {what}")
        raise AssertionError("unreachable")


def _balanced(node: type[And] | type[Or], items: list[Expr]) -> Expr:
    """A chain of AND (or OR) as a balanced tree, so long chains stay shallow (both are associative)."""
    if len(items) == 1:
        return items[0]
    mid = len(items) // 2
    return node(_balanced(node, items[:mid]), _balanced(node, items[mid:]))


def _number(text: str) -> Literal:
    if re.fullmatch(r"-?\d+", text):
        return Literal(int(text), "int")
    value = float(text)
    if math.isinf(value):
        raise InvalidPredicateError(f"predicate: number {text} is out of range")
    if "e" in text.lower():
        return Literal(value, "float")
    return Literal(Decimal(text), "decimal")


def _parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidPredicateError(f"predicate: DATE {text!r} is not YYYY-MM-DD") from None


def _parse_timestamp(text: str) -> dt.datetime:
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        value = dt.datetime.fromisoformat(s)
    except ValueError:
        raise InvalidPredicateError(
            f"predicate: TIMESTAMP {text!r} is not 'YYYY-MM-DD HH:MM:SS[.ffffff][Z|+HH:MM]'"
        ) from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return value


def parse(text: str) -> Expr:
    """Parse predicate text into an expression tree (unbound: literals keep their Python values).

    Example:
        >>> str(parse("a BETWEEN 1 AND 3 and b <> 'it''s'"))
        "(((a >= 1) AND (a <= 3)) AND (b != 'it''s'))"
        >>> parse("a = ")
        Traceback (most recent call last):
        ...
        deltaextras.expr.predicate.InvalidPredicateError: predicate: expected a column or a literal at position 4, ...
    """
    if not isinstance(text, str):
        raise InvalidPredicateError(f"predicate must be a string, not {type(text).__name__}")
    if len(text) > MAX_PREDICATE_CHARS:
        raise InvalidPredicateError(f"predicate has {len(text)} characters; at most {MAX_PREDICATE_CHARS}")
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise InvalidPredicateError(f"predicate nests deeper than {MAX_DEPTH} levels") from None


# ========================================================================================== binding
def bind(expr: Expr, types: Mapping[str, pa.DataType]) -> Expr:
    """Check column names against ``types`` (logical name → Arrow type) and convert every literal
    to the type of the column it meets; comparisons get the column on the left.

    Example:
        >>> e = bind(parse("'2024-01-02' < day"), {"day": pa.date32()})
        >>> str(e), e.right.scalar.type
        ("(day > '2024-01-02')", DataType(date32[day]))
        >>> bind(parse("nope = 1"), {"day": pa.date32()})
        Traceback (most recent call last):
        ...
        deltaextras.expr.predicate.InvalidPredicateError: predicate names column 'nope', which is not in the table...
    """
    return _Binder(types).bind(expr)


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class _Binder:
    def __init__(self, types: Mapping[str, pa.DataType]) -> None:
        self.types = dict(types)

    def bind(self, e: Expr) -> Expr:
        if isinstance(e, Column):
            return Column(e.name, self._type(e))
        if isinstance(e, Literal):
            return _with_scalar(e, None)
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
            return Compare(op, _with_scalar(left, None), _with_scalar(right, None))
        if isinstance(e, InList):
            if isinstance(e.operand, Column):
                values = tuple(self._literal_for(v, e.operand) for v in e.values)
            else:
                values = tuple(_with_scalar(v, None) for v in e.values)
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
            return scalar(_parse_date(v), target)
        if lit.kind == "timestamp":
            raise TypeError("a date column compares with DATE '...' or a 'YYYY-MM-DD' text")
        raise TypeError("a date column compares with DATE '...' or a 'YYYY-MM-DD' text")
    if pa.types.is_timestamp(target):
        if lit.kind == "str":
            v = _parse_timestamp(v)
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


def _with_scalar(lit: Literal, target: pa.DataType | None) -> Literal:
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


# ======================================================================================= evaluation
def evaluate(expr: Expr, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """The three-valued result (true / false / null per row) of a bound expression on ``table``,
    whose columns are named by logical column name.

    Example:
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
            return e.scalar if e.scalar is not None else _with_scalar(e, None).scalar
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
                if pa.types.is_floating(operand.type) and 0 in value_set.to_pylist():
                    # -0.0 + 0.0 is 0.0: both zeros are one value, as in Spark (needed only to match a zero)
                    operand, value_set = pc.add(operand, 0.0), pc.add(value_set, 0.0)
                hit = pc.is_in(operand, value_set=value_set, skip_nulls=True)
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


# ========================================================================================= pruning
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
    if isinstance(e, IsNull):
        if not isinstance(e.operand, Column):
            return True
        s = stats(e.operand.name)
        if s is None:
            return True
        wants_null = e.negated == negate  # IS NULL (not negated) or NOT (IS NOT NULL)
        if wants_null:
            return s.null_count is None or s.null_count > 0
        return not s.all_null
    if isinstance(e, Like):
        if not isinstance(e.operand, Column):
            return True
        s = stats(e.operand.name)
        return s is None or not s.all_null
    if isinstance(e, InList):
        if not isinstance(e.operand, Column):
            return True
        s = stats(e.operand.name)
        if s is None:
            return True
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
    if isinstance(e, Compare):
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
        op = _NEGATE[e.op] if negate else e.op  # exact: Spark's order is total, NaN included
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
    return True


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
