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

from .binder import bind
from .evaluator import evaluate, matches
from .parser import parse
from .pruning import FieldStats, might_be_true
from .tree import Expr, InvalidPredicateError

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
