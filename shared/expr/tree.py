"""The expression tree of a row predicate: columns, literals, comparisons, ``IN``, ``IS NULL``, ``LIKE``
and the boolean connectives, each printing back as SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError

MAX_PREDICATE_CHARS = 100_000
MAX_DEPTH = 64


class InvalidPredicateError(InvalidArgumentError):
    """The predicate text does not parse, names an unknown column, or compares incompatible types."""


KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "LIKE", "DATE", "TIMESTAMP"}


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
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name) and self.name.upper() not in KEYWORDS
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
