"""Rows inside a value's row groups come in Spark's order of ``sort_by``: NaN is the greatest float in both
directions (last ascending, first descending), ``-0.0`` equals ``0.0``, nulls last; single- and
multi-column sorts. And a ``by`` column whose values do not order (array, struct, map) is refused in one
line before planning, by every entry point, nothing written."""

from __future__ import annotations

import functools
import itertools
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import content_checksum, row_groups, scan

from deltaextras import plan_messages, plan_table, rorder, rorder_single
from deltaextras.errors import InvalidArgumentError

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, None, 1.5, -1.5]


def _spark_compare(a: Any, b: Any, order: str) -> int:
    """Spark's ``ORDER BY x ASC NULLS LAST`` / ``DESC NULLS LAST`` for one float column: NaN above +inf."""
    if a is None or b is None:
        return (a is None) - (b is None)  # nulls last in both directions
    ka = (1, 0.0) if math.isnan(a) else (0, a + 0.0)
    kb = (1, 0.0) if math.isnan(b) else (0, b + 0.0)
    c = (ka > kb) - (ka < kb)
    return -c if order == "descending" else c


def _in_order(rows: list[tuple[Any, ...]], spec: list[tuple[str, str]]) -> bool:
    def compare(x: tuple[Any, ...], y: tuple[Any, ...]) -> int:
        for i, (_, order) in enumerate(spec):
            c = _spark_compare(x[i], y[i], order)
            if c:
                return c
        return 0

    cmp = functools.cmp_to_key(compare)
    return all(cmp(a) <= cmp(b) for a, b in itertools.pairwise(rows))


def _table(path: str, f: list[Any], g: list[Any]) -> pa.Table:
    n = len(f)
    data = pa.table(
        {
            "k": pa.array([i * 2 // n for i in range(n)], pa.int64()),
            "f": pa.array(f, pa.float64()),
            "g": pa.array(g, pa.float32()),
            "i": pa.array(range(n), pa.int64()),
        }
    )
    half = n // 2
    write_deltalake(path, data.slice(0, half), mode="append")
    write_deltalake(path, data.slice(half), mode="append")
    return data


def _check(path: str, data: pa.Table, spec: list[tuple[str, str]]) -> None:
    report = rorder(path, by="k", sort_by=spec, max_workers=1)
    assert not report.failed
    assert content_checksum(scan(path)) == content_checksum(data)
    for group in row_groups(path):
        assert len(set(group.column("k").to_pylist())) == 1
        rows = list(zip(*(group.column(c).to_pylist() for c, _ in spec), strict=True))
        assert _in_order(rows, spec), (spec, rows)


@pytest.mark.parametrize(
    "spec",
    [
        [("f", "descending")],
        [("f", "ascending")],
        [("g", "ascending"), ("f", "descending")],
        [("g", "descending"), ("f", "ascending")],
        [("f", "descending"), ("g", "descending")],
    ],
)
def test_nan_is_the_greatest_value_in_every_direction(tmp_path: Path, spec: list[tuple[str, str]]) -> None:
    f = [SPECIAL[(i * 3) % len(SPECIAL)] for i in range(48)]
    g = [SPECIAL[(i * 5 + 1) % len(SPECIAL)] for i in range(48)]
    data = _table(str(tmp_path / "t"), f, g)
    _check(str(tmp_path / "t"), data, spec)
    first = next(r.column("f").to_pylist() for r in row_groups(str(tmp_path / "t")))
    if spec == [("f", "descending")]:
        assert math.isnan(first[0]) and first[-1] is None  # NaN first, nulls last


floats = st.one_of(st.sampled_from(SPECIAL), st.sampled_from(SPECIAL), st.floats(allow_nan=True, width=32))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.tuples(floats, floats), min_size=8, max_size=60),
    orders=st.tuples(st.sampled_from(["ascending", "descending"]), st.sampled_from(["ascending", "descending"])),
    two=st.booleans(),
)
def test_any_floats_sort_in_sparks_order(tmp_path_factory: Any, values: list[Any], orders: Any, two: bool) -> None:
    path = str(tmp_path_factory.mktemp("t"))
    data = _table(path, [v[0] for v in values], [v[1] for v in values])
    spec = [("f", orders[0]), ("g", orders[1])] if two else [("f", orders[0])]
    _check(path, data, spec)


# ------------------------------------------------------------------ by columns whose values do not order
NESTED = {
    "tags": pa.array([[1, 2], [3]], pa.list_(pa.int32())),
    "place": pa.array([{"x": 1}, {"x": 2}]),
    "attrs": pa.array([[("a", 1)], [("b", 2)]], pa.map_(pa.string(), pa.int32())),
}


@pytest.fixture
def nested_table(tmp_path: Path) -> str:
    path = str(tmp_path / "nested")
    data = pa.table({**NESTED, "node_id": [1, 2]})
    write_deltalake(path, data, mode="append")
    write_deltalake(path, data, mode="append")
    return path


@pytest.mark.parametrize("by", list(NESTED))
def test_a_by_column_whose_values_do_not_order_is_refused(nested_table: str, by: str) -> None:
    version = DeltaTable(nested_table).version()
    kind = {"tags": "array", "place": "struct", "attrs": "map"}[by]
    for call in (
        lambda: plan_table(nested_table, by=by),
        lambda: plan_messages(nested_table, by=by),
        lambda: rorder(nested_table, by=by),
        lambda: rorder_single({"path": nested_table, "by": by}),
    ):
        with pytest.raises(InvalidArgumentError, match=rf"by column '{by}' is of type {kind}, whose values do not"):
            call()
    assert DeltaTable(nested_table).version() == version


@pytest.mark.parametrize("command", ["plan", "run"])
def test_the_cli_refuses_a_nested_by_column_in_one_line(nested_table: str, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deltaextras", command, nested_table, "--by", "place"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "whose values do not order" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
