"""Floating-point values in ``delete`` as Spark SQL treats them: ``NaN = NaN``, NaN above every number
(``+Infinity`` included), ``-0.0 = 0.0`` — in the evaluator and in statistics pruning alike, so the rows a
delete removes never depend on whether statistics exist (Parquet and Delta statistics leave NaN out)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import WriterProperties, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import scan

from deltaextras import delete
from deltaextras.expr.predicate import FieldStats, bind, matches, might_be_true, parse

NAN = math.nan
INF = math.inf


def _key(v: float) -> tuple[int, float]:
    """Spark's total order of doubles: NaN above everything, -0.0 equal to 0.0."""
    return (1, 0.0) if math.isnan(v) else (0, v + 0.0)


def spark(op: str, a: float | None, b: float | None) -> bool | None:
    """The reference: Spark SQL's comparison of two doubles (None is NULL)."""
    if a is None or b is None:
        return None
    ka, kb = _key(a), _key(b)
    return {"=": ka == kb, "!=": ka != kb, "<": ka < kb, "<=": ka <= kb, ">": ka > kb, ">=": ka >= kb}[op]


VALUES = [NAN, INF, -INF, 0.0, -0.0, 0.5, 1.0, 2.0, -3.0, None]
LITERALS = {"'NaN'": NAN, "'Infinity'": INF, "'-Infinity'": -INF, "0": 0.0, "-0.0": -0.0, "2": 2.0, "1.0": 1.0}


@pytest.mark.parametrize("op", ["=", "!=", "<", "<=", ">", ">="])
@pytest.mark.parametrize("literal", sorted(LITERALS))
def test_evaluator_follows_spark(op: str, literal: str) -> None:
    table = pa.table({"f": pa.array(VALUES, pa.float64())})
    got = matches(parse(f"f {op} {literal}"), table).to_pylist()
    assert got == [bool(spark(op, v, LITERALS[literal])) for v in VALUES]
    negated = matches(parse(f"NOT (f {op} {literal})"), table).to_pylist()
    assert negated == [spark(op, v, LITERALS[literal]) is False for v in VALUES]


def test_in_list_matches_nan_and_both_zeros() -> None:
    table = pa.table({"f": pa.array([NAN, -0.0, 0.0, 1.0, None], pa.float64())})
    assert matches(parse("f IN (0, 'NaN')"), table).to_pylist() == [True, True, True, False, False]
    assert matches(parse("f NOT IN (0)"), table).to_pylist() == [True, False, False, True, False]


def test_statistics_without_nan_do_not_prune_rows_nan_satisfies() -> None:
    """The issue's case: ``f = [1, NaN, 0.5]`` has statistics max 1.0, and ``NOT (f <= 2)`` holds for NaN."""
    types = {"f": pa.float64()}
    stats = FieldStats(0.5, 1.0, 0, 3)  # what Parquet and Delta record: NaN left out
    for text in ("NOT (f <= 2)", "f > 2", "f >= 2", "f = 'NaN'", "f > 'Infinity'", "f != 1"):
        assert might_be_true(bind(parse(text), types), lambda _c: stats), text
    for text in ("f < 0.5", "f = 2", "f > 'NaN'", "f IN (3, 4)"):
        assert not might_be_true(bind(parse(text), types), lambda _c: stats), text


def test_delete_removes_nan_rows_that_statistics_leave_out(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"f": pa.array([1.0, NAN, 0.5], pa.float64()), "k": [1, 2, 3]}))
    report = delete(path, "NOT (f <= 2)")
    assert report.rows_deleted == 1
    assert sorted(scan(path).column("k").to_pylist()) == [1, 3]


# ----------------------------------------------------------------------------------- property
OPS = ["=", "!=", "<", "<=", ">", ">="]
floats = st.sampled_from(VALUES) | st.floats(allow_nan=True, allow_infinity=True, width=64)
atoms = st.builds(lambda op, lit: f"f {op} {lit}", st.sampled_from(OPS), st.sampled_from(sorted(LITERALS)))
predicates = st.recursive(
    atoms
    | st.just("f IS NULL")
    | st.builds(lambda lits: f"f IN ({', '.join(lits)})", st.lists(st.sampled_from(sorted(LITERALS)), min_size=1)),
    lambda inner: (
        st.builds(lambda a: f"NOT ({a})", inner)
        | st.builds(lambda a, b, j: f"({a}) {j} ({b})", inner, inner, st.sampled_from(["AND", "OR"]))
    ),
    max_leaves=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.lists(st.one_of(st.none(), floats), min_size=1, max_size=6), min_size=1, max_size=3),
    predicate=predicates,
)
def test_pruned_delete_equals_unpruned(tmp_path_factory: Any, files: list[list[float | None]], predicate: str) -> None:
    """A delete that prunes with file and row-group statistics removes exactly the rows the predicate is
    TRUE for, evaluated on every row without statistics (and by Spark's reference order on atoms)."""
    path = str(tmp_path_factory.mktemp("nan") / "t")
    k = 0
    everything = []
    for values in files:
        ids = list(range(k, k + len(values)))
        k += len(values)
        part = pa.table({"f": pa.array(values, pa.float64()), "k": pa.array(ids, pa.int64())})
        everything.append(part)
        write_deltalake(path, part, mode="append", writer_properties=WriterProperties(max_row_group_size=2))
    whole = pa.concat_tables(everything)
    unpruned = matches(parse(predicate), whole).to_pylist()
    expected = sorted(i for i, hit in zip(whole.column("k").to_pylist(), unpruned, strict=True) if not hit)
    delete(path, predicate)
    assert sorted(scan(path).column("k").to_pylist()) == expected


@settings(max_examples=300, deadline=None)
@given(a=st.one_of(st.none(), floats), op=st.sampled_from(OPS), lit=st.sampled_from(sorted(LITERALS)))
def test_evaluator_matches_the_reference_on_any_double(a: float | None, op: str, lit: str) -> None:
    got = matches(parse(f"f {op} {lit}"), pa.table({"f": pa.array([a], pa.float64())})).to_pylist()[0]
    assert got == bool(spark(op, a, LITERALS[lit]))
