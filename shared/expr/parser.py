"""The parser of the predicate's SQL subset (grammar in :mod:`deltaextras.expr.predicate`): text to an
unbound expression tree, without ``eval``, bounded in length and depth.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from .tree import (
    KEYWORDS,
    MAX_DEPTH,
    MAX_PREDICATE_CHARS,
    And,
    Column,
    Compare,
    Expr,
    InList,
    InvalidPredicateError,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
)

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
        elif kind == "name" and raw.upper() in KEYWORDS:
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
                return Literal(parse_date(text) if t.text == "DATE" else parse_timestamp(text), t.text.lower())
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


def parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidPredicateError(f"predicate: DATE {text!r} is not YYYY-MM-DD") from None


def parse_timestamp(text: str) -> dt.datetime:
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
        deltaextras.expr.tree.InvalidPredicateError: predicate: expected a column or a literal at position 4, ...
    """
    if not isinstance(text, str):
        raise InvalidPredicateError(f"predicate must be a string, not {type(text).__name__}")
    if len(text) > MAX_PREDICATE_CHARS:
        raise InvalidPredicateError(f"predicate has {len(text)} characters; at most {MAX_PREDICATE_CHARS}")
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise InvalidPredicateError(f"predicate nests deeper than {MAX_DEPTH} levels") from None
