"""The delete predicate: parsing (and refusing) text safely, SQL three-valued evaluation on Arrow, and
statistics pruning that never skips a row the predicate would match."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaextras.errors import InvalidArgumentError
from deltaextras.expr.predicate import FieldStats, InvalidPredicateError, bind, evaluate, matches, might_be_true, parse

TYPES = {
    "a": pa.int64(),
    "b": pa.float64(),
    "s": pa.string(),
    "d": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "flag": pa.bool_(),
    "amount": pa.decimal128(10, 2),
    "my col": pa.int32(),
}


def _table() -> pa.Table:
    return pa.table(
        {
            "a": pa.array([1, 2, None, 4, 5], pa.int64()),
            "b": pa.array([0.5, None, 2.5, 3.5, -1.0], pa.float64()),
            "s": pa.array(["x", "it's", None, "xy", "z"]),
            "d": pa.array([dt.date(2024, 1, d) for d in (1, 2, 3, 4, 5)], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, h, tzinfo=dt.timezone.utc) for h in (0, 1, 2, 3, 4)],
                pa.timestamp("us", tz="UTC"),
            ),
            "flag": pa.array([True, False, None, True, False]),
            "amount": pa.array(
                [Decimal("1.10"), Decimal("2.00"), None, Decimal("0.01"), Decimal("9.99")], TYPES["amount"]
            ),
            "my col": pa.array([10, 20, 30, 40, 50], pa.int32()),
        }
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", [True, False, False, False, False]),
        ("a == 1 OR a <> 4", [True, True, False, False, True]),
        ("1 < a", [False, True, False, True, True]),
        ("a != 2", [True, False, False, True, True]),
        ("a IN (1, 5)", [True, False, False, False, True]),
        ("a NOT IN (1, 5)", [False, True, False, True, False]),
        ("a IN (1, NULL)", [True, False, False, False, False]),
        ("a NOT IN (1, NULL)", [False] * 5),
        ("a IS NULL", [False, False, True, False, False]),
        ("a IS NOT NULL AND NOT a > 3", [True, True, False, False, False]),
        ("NOT (a > 3)", [True, True, False, False, False]),
        ("a = NULL", [False] * 5),
        ("a BETWEEN 2 AND 4", [False, True, False, True, False]),
        ("a NOT BETWEEN 2 AND 4", [True, False, False, False, True]),
        ("b > 1", [False, False, True, True, False]),
        ("b >= 1.5e0 AND b < 3", [False, False, True, False, False]),
        ("a > 1.5", [False, True, False, True, True]),
        ("a = 2.0", [False, True, False, False, False]),
        ("s = 'it''s'", [False, True, False, False, False]),
        ("s LIKE 'x%'", [True, False, False, True, False]),
        ("s NOT LIKE 'x_'", [True, True, False, False, True]),
        ("s > 'x'", [False, False, False, True, True]),
        ("d >= '2024-01-04'", [False, False, False, True, True]),
        ("d = DATE '2024-01-02'", [False, True, False, False, False]),
        ("ts > TIMESTAMP '2024-01-01T02:00:00Z'", [False, False, False, True, True]),
        ("ts >= '2024-01-01 03:00:00'", [False, False, False, True, True]),
        ("ts < '2024-01-01T03:00:00+01:00'", [True, True, False, False, False]),
        ("ts = DATE '2024-01-01'", [True, False, False, False, False]),
        ("flag", [True, False, False, True, False]),
        ("NOT flag", [False, True, False, False, True]),
        ("flag = FALSE", [False, True, False, False, True]),
        ("amount > 1.5", [False, True, False, False, True]),
        ("amount = 0.01", [False, False, False, True, False]),
        ('`my col` >= 30 AND "my col" < 50', [False, False, True, True, False]),
        ("TRUE", [True] * 5),
        ("FALSE OR NULL", [False] * 5),
        ("a = a", [True, True, False, True, True]),
        ("(a > 1) and (b IS NULL or s = 'z')", [False, True, False, False, True]),
        ("a > -2 AND b > -1.5", [True, False, False, True, True]),
    ],
)
def test_evaluation(text: str, expected: list[bool]) -> None:
    assert matches(parse(text), _table()).to_pylist() == expected


def test_three_valued_logic() -> None:
    t = pa.table({"a": pa.array([1, None], pa.int64())})
    got = evaluate(bind(parse("a > 0 OR a IS NULL"), {"a": pa.int64()}), t).to_pylist()
    assert got == [True, True]
    assert evaluate(bind(parse("NOT a > 0"), {"a": pa.int64()}), t).to_pylist() == [False, None]
    assert evaluate(bind(parse("a > 0 AND NULL"), {"a": pa.int64()}), t).to_pylist() == [None, None]
    assert evaluate(bind(parse("a > 5 AND NULL"), {"a": pa.int64()}), t).to_pylist() == [False, None]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("a =", "expected a column or a literal"),
        ("a = 1 AND", "expected a column or a literal"),
        ("a = 1 b = 2", "expected AND, OR"),
        ("(a = 1", "expected '\\)'"),
        ("a IN ()", "literal in the IN list"),
        ("a IN (b)", "literal in the IN list"),
        ("a = 'open", "unexpected character"),
        ("a; DROP TABLE t", "unexpected character"),
        ("__import__('os').system('x')", "unexpected character"),
        ("a = 1 -- comment", "expected AND, OR"),
        ("a NOT = 1", "expected AND, OR"),
        ("a NOT 1", "expected AND, OR"),
        ("DATE '2024-13-01' = d", "YYYY-MM-DD"),
        ("a IS 1", "NULL after IS"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        parse(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "not in the table"),
        ("A = 1", "case-sensitive"),
        ("s = 1", "does not convert"),
        ("a = 'x'", "does not convert"),
        ("d = 'yesterday'", "YYYY-MM-DD"),
        ("flag = 1", "does not convert"),
        ("a AND b > 1", "as a condition"),
        ("s LIKE 'x' AND a LIKE '1'", "LIKE needs a text column"),
        ("a = s", "compares column"),
        ("1 AND a = 1", "as a condition"),
    ],
)
def test_bind_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        bind(parse(text), TYPES)
    assert issubclass(InvalidPredicateError, InvalidArgumentError)


def test_deep_nesting_is_refused_not_crashing() -> None:
    with pytest.raises(InvalidPredicateError, match="nests deeper"):
        parse("(" * 5000 + "a = 1" + ")" * 5000)
    with pytest.raises(InvalidPredicateError, match="nests deeper"):
        parse("NOT " * 5000 + "a = 1")


def test_long_chains_stay_shallow() -> None:
    text = " OR ".join(f"a = {i}" for i in range(5000))
    t = pa.table({"a": pa.array([1, 4999, 5000], pa.int64())})
    assert matches(parse(text), t).to_pylist() == [True, True, False]
    bound = bind(parse(text), TYPES)
    assert not might_be_true(bound, _stats({"a": FieldStats(6000, 7000, 0, 5)}))


def test_round_trip_through_text() -> None:
    text = "(s = 'it''s' OR `my col` IN (1, 2)) AND NOT ts IS NULL AND d < DATE '2024-01-02'"
    expr = parse(text)
    assert parse(str(expr)) == expr
    assert expr.columns() == ["d", "my col", "s", "ts"]


# -------------------------------------------------------------------------------------- pruning
def _stats(values: dict[str, FieldStats]) -> Any:
    return lambda name: values.get(name)


@pytest.mark.parametrize(
    ("text", "stats", "might"),
    [
        ("a = 5", FieldStats(0, 4, 0, 10), False),
        ("a = 4", FieldStats(0, 4, 0, 10), True),
        ("a > 4", FieldStats(0, 4, 0, 10), False),
        ("a >= 4", FieldStats(0, 4, 0, 10), True),
        ("a < 0", FieldStats(0, 4, 0, 10), False),
        ("NOT a < 5", FieldStats(0, 4, 0, 10), False),
        ("a != 3", FieldStats(3, 3, 0, 10), False),
        ("a != 3", FieldStats(3, 3, 2, 10), False),
        ("a != 3", FieldStats(3, 4, 0, 10), True),
        ("a IN (7, 9)", FieldStats(0, 4, 0, 10), False),
        ("a IN (7, 3)", FieldStats(0, 4, 0, 10), True),
        ("a NOT IN (3)", FieldStats(3, 3, 0, 10), False),
        ("a NOT IN (5, NULL)", FieldStats(0, 9, 0, 10), False),
        ("a IS NULL", FieldStats(0, 4, 0, 10), False),
        ("a IS NULL", FieldStats(0, 4, 1, 10), True),
        ("a IS NOT NULL", FieldStats(None, None, 10, 10), False),
        ("a = 1", FieldStats(None, None, 10, 10), False),
        ("a = 1 OR b = 2", FieldStats(5, 6, 0, 10), False),
        ("a = 1 OR b = 5", FieldStats(5, 6, 0, 10), True),
        ("a = 1 AND b = 2", FieldStats(5, 6, 0, 10), False),
        ("NOT (a > 1 AND a < 3)", FieldStats(2, 2, 0, 10), False),
        ("a = 1", FieldStats(None, None, None, None), True),
        ("a = NULL", FieldStats(None, None, None, None), False),
        ("b != 1", FieldStats(1.0, 1.0, 0, 10), True),  # NaN rows are left out of float statistics
        ("FALSE", FieldStats(), False),
    ],
)
def test_pruning(text: str, stats: FieldStats, might: bool) -> None:
    expr = bind(parse(text), TYPES)
    assert might_be_true(expr, _stats({"a": stats, "b": stats})) is might


def test_pruning_unknown_column_and_incomparable_bounds_keep_rows() -> None:
    expr = bind(parse("s = 'q'"), TYPES)
    assert might_be_true(expr, _stats({}))
    assert might_be_true(expr, _stats({"s": FieldStats(1, 2, 0, 1)}))  # ints vs text: not comparable


# ---------------------------------------------------------------------- property: a reference model
_INTS = st.one_of(st.none(), st.integers(-3, 3))
_STRS = st.one_of(st.none(), st.sampled_from(["", "a", "b", "ab", "b'c"]))


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


@st.composite
def _atom(draw: Any) -> tuple[str, Any]:
    col, values = draw(st.sampled_from([("a", _INTS), ("s", _STRS)]))
    kind = draw(st.sampled_from(["cmp", "in", "null", "between"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        v = draw(values)
        return f"{col} {op} {_lit(v)}", ("cmp", col, op, v)
    if kind == "in":
        vs = draw(st.lists(values, min_size=1, max_size=3))
        neg = draw(st.booleans())
        return f"{col} {'NOT ' if neg else ''}IN ({', '.join(_lit(v) for v in vs)})", ("in", col, vs, neg)
    if kind == "between":
        lo, hi = draw(values), draw(values)
        return f"{col} BETWEEN {_lit(lo)} AND {_lit(hi)}", ("and", ("cmp", col, ">=", lo), ("cmp", col, "<=", hi))
    neg = draw(st.booleans())
    return f"{col} IS {'NOT ' if neg else ''}NULL", ("null", col, neg)


_EXPRS = st.recursive(
    _atom(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: (f"({p[0][0]}) AND ({p[1][0]})", ("and", p[0][1], p[1][1]))),
        st.tuples(inner, inner).map(lambda p: (f"({p[0][0]}) OR ({p[1][0]})", ("or", p[0][1], p[1][1]))),
        inner.map(lambda p: (f"NOT ({p[0]})", ("not", p[1]))),
    ),
    max_leaves=6,
)


def _ref(node: Any, row: dict[str, Any]) -> bool | None:
    kind = node[0]
    if kind == "cmp":
        _, col, op, v = node
        x = row[col]
        if x is None or v is None:
            return None
        return {"=": x == v, "!=": x != v, "<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v}[op]
    if kind == "in":
        _, col, vs, neg = node
        x = row[col]
        if x is None:
            hit: bool | None = None
        elif x in [v for v in vs if v is not None]:
            hit = True
        else:
            hit = None if None in vs else False
        return (None if hit is None else not hit) if neg else hit
    if kind == "null":
        _, col, neg = node
        return (row[col] is not None) if neg else (row[col] is None)
    if kind == "not":
        r = _ref(node[1], row)
        return None if r is None else not r
    left, right = _ref(node[1], row), _ref(node[2], row)
    if kind == "and":
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


def _rows_table(rows: list[tuple[Any, Any]]) -> pa.Table:
    return pa.table({"a": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string())})


@settings(max_examples=300, deadline=None)
@given(_EXPRS, st.lists(st.tuples(_INTS, _STRS), min_size=1, max_size=12))
def test_evaluation_matches_reference_model(expr: tuple[str, Any], rows: list[tuple[Any, Any]]) -> None:
    text, tree = expr
    table = pa.table(
        {"a": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string())}
    )
    got = matches(parse(text), table).to_pylist()
    want = [_ref(tree, {"a": a, "s": s}) is True for a, s in rows]
    assert got == want, text


@settings(max_examples=300, deadline=None)
@given(_EXPRS, st.lists(st.tuples(_INTS, _STRS), min_size=1, max_size=12))
def test_pruning_never_skips_a_match(expr: tuple[str, Any], rows: list[tuple[Any, Any]]) -> None:
    text, _ = expr
    table = pa.table(
        {"a": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string())}
    )
    bound = bind(parse(text), {"a": pa.int64(), "s": pa.string()})

    def stats(name: str) -> FieldStats:
        present = [v for v in table.column(name).to_pylist() if v is not None]
        return FieldStats(min(present, default=None), max(present, default=None), len(rows) - len(present), len(rows))

    if not might_be_true(bound, stats):
        assert not any(matches(parse(text), table).to_pylist()), text
