"""Row-group statistics and point-query read amplification (deltaextras.ops.maintenance.inspect)."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaextras.errors import InvalidArgumentError, PartitionNotFoundError
from deltaextras.ops.maintenance.inspect import (
    delta_files,
    parquet_read_amplification,
    parquet_row_group_table,
    read_amplification,
    row_group_table,
)


# ----------------------------------------------------------------------------- helpers
def write_groups(path: Path, column: str, groups: Sequence[Sequence[Any]], type_: pa.DataType, **kwargs: Any) -> Path:
    """One Parquet file with exactly one row group per entry of ``groups``."""
    schema = pa.schema([(column, type_), ("payload", pa.int64())])
    with pq.ParquetWriter(path, schema, **kwargs) as writer:
        for i, values in enumerate(groups):
            writer.write_table(pa.table({column: pa.array(values, type_), "payload": [i] * len(values)}, schema=schema))
    return path


def expected_amplification(groups: Sequence[Sequence[Any]]) -> float:
    """Mean over distinct non-null values of rows read (min/max pruning) / rows holding the value."""
    counts: dict[Any, int] = {}
    for g in groups:
        for v in g:
            if v is not None:
                counts[v] = counts.get(v, 0) + 1
    bounds = []
    for g in groups:
        present = [v for v in g if v is not None]
        bounds.append((min(present), max(present), len(g)) if present else None)
    ratios = []
    for v, held in counts.items():
        read = sum(n for b in bounds if b is not None for lo, hi, n in [b] if lo <= v <= hi)
        ratios.append(read / held)
    return sum(ratios) / len(ratios)


# ----------------------------------------------------------------------------- plain Parquet files
def test_exact_layout_is_one(tmp_path: Path) -> None:
    groups = [[v] * (v + 1) for v in range(150)]
    path = write_groups(tmp_path / "exact.parquet", "node_id", groups, pa.int64())
    assert parquet_read_amplification([path], "node_id") == pytest.approx(1.0, abs=1e-12)


def test_several_groups_per_value_are_still_exact(tmp_path: Path) -> None:
    groups = [[1] * 5, [1] * 3, [2] * 4, [3], [3] * 2]
    path = write_groups(tmp_path / "split.parquet", "k", groups, pa.int32())
    assert parquet_read_amplification([path], "k") == pytest.approx(1.0, abs=1e-12)


def test_shuffled_150_values_in_3_groups(tmp_path: Path) -> None:
    rng = random.Random(7)
    values = [v for v in range(150) for _ in range(20)]
    rng.shuffle(values)
    groups = [values[0:1000], values[1000:2000], values[2000:3000]]
    path = write_groups(tmp_path / "shuffled.parquet", "node_id", groups, pa.int64())
    got = parquet_read_amplification([path], "node_id")
    # every value is in every group (with overwhelming probability): each query reads all 3000 rows
    assert got == pytest.approx(expected_amplification(groups), rel=1e-12)
    assert got == pytest.approx(150.0, rel=1e-12)


def test_value_counts_are_weighted_equally(tmp_path: Path) -> None:
    # value 1: 10 rows in a group [1, 2] of 11 rows; value 2: 1 row in the same group.
    groups = [[1] * 10 + [2], [3, 3]]
    path = write_groups(tmp_path / "w.parquet", "k", groups, pa.int64())
    expected = (11 / 10 + 11 / 1 + 2 / 2) / 3
    assert parquet_read_amplification([path], "k") == pytest.approx(expected, rel=1e-12)
    assert expected_amplification(groups) == pytest.approx(expected, rel=1e-12)


def test_overlapping_ranges_across_files(tmp_path: Path) -> None:
    a = [[1, 5], [2, 2]]
    b = [[3, 3, 4], [7, 9]]
    pa_ = write_groups(tmp_path / "a.parquet", "k", a, pa.int64())
    pb = write_groups(tmp_path / "b.parquet", "k", b, pa.int64())
    got = parquet_read_amplification([pa_, pb], "k")
    assert got == pytest.approx(expected_amplification([*a, *b]), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=30),
        min_size=1,
        max_size=8,
    )
)
def test_matches_brute_force(groups: list[list[int | None]]) -> None:
    if all(v is None for g in groups for v in g):
        return
    buffer = io.BytesIO()
    schema = pa.schema([("k", pa.int64())])
    with pq.ParquetWriter(buffer, schema) as writer:
        for g in groups:
            writer.write_table(pa.table({"k": pa.array(g, pa.int64())}))
    data = buffer.getvalue()
    got = parquet_read_amplification(["mem"], "k", open_file=lambda _name: io.BytesIO(data))
    assert got == pytest.approx(expected_amplification(groups), rel=1e-9)


def test_strings(tmp_path: Path) -> None:
    groups = [["b", "a", "a"], ["é", "z"], ["c", "b"]]
    path = write_groups(tmp_path / "s.parquet", "s", groups, pa.string())
    assert parquet_read_amplification([path], "s") == pytest.approx(expected_amplification(groups))
    table = parquet_row_group_table([path], "s")
    # byte order of UTF-8: "é" (C3 A9) sorts after "z" (7A)
    assert table.column("min").to_pylist() == ["a", "z", "b"]
    assert table.column("max").to_pylist() == ["b", "é", "c"]


def test_timestamps_with_mixed_units(tmp_path: Path) -> None:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    t = [base + timedelta(minutes=5 * i) for i in range(6)]
    # the same instants written in microseconds in one file and nanoseconds in the other
    us = write_groups(tmp_path / "us.parquet", "utc_time", [[t[0], t[1]], [t[2]]], pa.timestamp("us", "UTC"))
    ns = write_groups(tmp_path / "ns.parquet", "utc_time", [[t[1], t[2], t[3]], [t[5]]], pa.timestamp("ns", "UTC"))
    groups = [[t[0], t[1]], [t[2]], [t[1], t[2], t[3]], [t[5]]]
    got = parquet_read_amplification([us, ns], "utc_time")
    assert got == pytest.approx(expected_amplification(groups), rel=1e-12)
    table = parquet_row_group_table([us, ns], "utc_time")
    assert table.schema.field("min").type == pa.timestamp("us", "UTC")
    assert table.column("min").to_pylist() == [t[0], t[2], t[1], t[5]]
    assert table.column("max").to_pylist() == [t[1], t[2], t[3], t[5]]


def test_naive_timestamps(tmp_path: Path) -> None:
    base = datetime(2024, 1, 1)
    groups = [[base, base + timedelta(hours=2)], [base + timedelta(hours=1)]]
    path = write_groups(tmp_path / "n.parquet", "t", groups, pa.timestamp("us"))
    assert parquet_read_amplification([path], "t") == pytest.approx(expected_amplification(groups))


def test_groups_without_statistics_admit_everything(tmp_path: Path) -> None:
    groups = [[1, 1], [2, 2, 2], [3]]
    path = write_groups(tmp_path / "nostats.parquet", "k", groups, pa.int64(), write_statistics=False)
    # every query reads all 6 rows
    assert parquet_read_amplification([path], "k") == pytest.approx((6 / 2 + 6 / 3 + 6 / 1) / 3)
    table = parquet_row_group_table([path], "k")
    assert table.column("min").null_count == 3


def test_all_null_groups_admit_nothing_and_nulls_are_not_targets(tmp_path: Path) -> None:
    groups = [[None, None, None], [1, None], [2, 2]]
    path = write_groups(tmp_path / "nulls.parquet", "k", groups, pa.int64())
    # value 1 reads group 1 (2 rows) for 1 row; value 2 reads group 2 (2 rows) for 2 rows
    assert parquet_read_amplification([path], "k") == pytest.approx((2 / 1 + 2 / 2) / 2)


def test_float_nan_is_not_a_target(tmp_path: Path) -> None:
    groups = [[1.5, float("nan")], [2.5]]
    path = write_groups(tmp_path / "f.parquet", "x", groups, pa.float64())
    assert parquet_read_amplification([path], "x") == pytest.approx((2 / 1 + 1 / 1) / 2)


def test_only_nulls_gives_nan(tmp_path: Path) -> None:
    path = write_groups(tmp_path / "n.parquet", "k", [[None, None]], pa.int64())
    assert parquet_read_amplification([path], "k") != parquet_read_amplification([path], "k")  # nan


def test_file_without_the_column_counts_as_null(tmp_path: Path) -> None:
    with_col = write_groups(tmp_path / "a.parquet", "k", [[1, 2]], pa.int64())
    without = tmp_path / "b.parquet"
    pq.write_table(pa.table({"other": [1, 2, 3]}), without)
    assert parquet_read_amplification([with_col, without], "k") == pytest.approx(2.0)
    table = parquet_row_group_table([with_col, without], "k")
    assert table.column("rows").to_pylist() == [2, 3]
    assert table.column("min").to_pylist() == [1, None]


def test_row_group_table_columns(tmp_path: Path) -> None:
    groups = [[3, 1], [7]]
    path = write_groups(tmp_path / "t.parquet", "k", groups, pa.int32())
    table = parquet_row_group_table([path], "k")
    assert table.column_names == ["row_group", "file", "min", "max", "rows", "bytes"]
    assert table.schema.field("min").type == pa.int32()
    assert table.select(["row_group", "min", "max", "rows"]).to_pylist() == [
        {"row_group": 0, "min": 1, "max": 3, "rows": 2},
        {"row_group": 1, "min": 7, "max": 7, "rows": 1},
    ]
    assert set(table.column("file").to_pylist()) == {str(path)}
    meta = pq.ParquetFile(path).metadata
    for r in range(2):
        rg = meta.row_group(r)
        assert table.column("bytes")[r].as_py() == sum(
            rg.column(c).total_compressed_size for c in range(rg.num_columns)
        )


def test_open_file_objects_are_closed(tmp_path: Path) -> None:
    path = write_groups(tmp_path / "t.parquet", "k", [[1], [2]], pa.int64())
    opened: list[io.BufferedReader] = []

    def opener(name: str) -> io.BufferedReader:
        handle = open(name, "rb")  # noqa: SIM115 - closed by the code under test
        opened.append(handle)
        return handle

    assert parquet_read_amplification([str(path)], "k", open_file=opener) == pytest.approx(1.0)
    assert opened and all(h.closed for h in opened)


def test_nested_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"s": [{"a": 1}]}), path)
    with pytest.raises(InvalidArgumentError):
        parquet_read_amplification([path], "s")


# ----------------------------------------------------------------------------- Delta tables
def _frame(node_ids: list[int], part: int | str, **extra: list[Any]) -> pa.Table:
    n = len(node_ids)
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    cols: dict[str, Any] = {
        "node_id": pa.array(node_ids, pa.int64()),
        "utc_time": pa.array([base + timedelta(minutes=5 * i) for i in range(n)], pa.timestamp("us", "UTC")),
        "node_id_range": pa.array([part] * n),
    }
    cols.update(extra)
    return pa.table(cols)


def test_delta_exact_and_shuffled(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    # partition 0: one file per node id (exact); partition 1: one shuffled file
    for node in range(5):
        write_deltalake(uri, _frame([node] * 4, 0), partition_by=["node_id_range"], mode="append")
    shuffled = [n for n in range(10, 20) for _ in range(3)]
    random.Random(1).shuffle(shuffled)
    write_deltalake(uri, _frame(shuffled, 1), partition_by=["node_id_range"], mode="append")

    assert read_amplification(uri, "node_id", partition={"node_id_range": 0}) == pytest.approx(1.0)
    # one row group of 30 rows holds all 10 values of 3 rows each
    assert read_amplification(uri, "node_id", partition={"node_id_range": "1"}) == pytest.approx(10.0)
    # the whole table: values 0-4 read 4 rows for 4, values 10-19 read 30 for 3
    assert read_amplification(uri, "node_id") == pytest.approx((5 * 1.0 + 10 * 10.0) / 15)

    table = row_group_table(uri, "node_id", partition={"node_id_range": 0})
    assert table.num_rows == 5
    assert sorted(table.column("min").to_pylist()) == [0, 1, 2, 3, 4]
    assert all(f.startswith("node_id_range=0/") for f in table.column("file").to_pylist())
    assert table.column("rows").to_pylist() == [4] * 5

    times = row_group_table(uri, "utc_time", partition={"node_id_range": 1})
    assert times.column("min").to_pylist() == [datetime(2024, 1, 1, tzinfo=timezone.utc)]
    assert read_amplification(uri, "utc_time", partition={"node_id_range": 1}) == pytest.approx(30.0)


def test_delta_string_partition_with_escaped_path(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(
        uri,
        pa.table({"site": ["b", "a", "b"], "region": ["north east"] * 3}),
        partition_by=["region"],
    )
    write_deltalake(uri, pa.table({"site": ["c"], "region": ["north east"]}), partition_by=["region"], mode="append")
    files = delta_files(uri, partition={"region": "north east"})
    assert len(files) == 2 and all((Path(uri) / f).exists() for f in files)
    # "a" and "b" read 3 rows (for 1 and 2), "c" reads 1 for 1
    expected = (3 / 1 + 3 / 2 + 1 / 1) / 3
    assert read_amplification(uri, "site", partition={"region": "north east"}) == pytest.approx(expected)


def test_delta_partition_errors(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _frame([1, 2], 0), partition_by=["node_id_range"])
    with pytest.raises(PartitionNotFoundError):
        read_amplification(uri, "node_id", partition={"node_id_range": 9})
    with pytest.raises(InvalidArgumentError):
        row_group_table(uri, "node_id", partition={"nope": 0})


def test_delta_custom_opener(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, _frame([1, 1, 2], 0), partition_by=["node_id_range"])
    seen: list[str] = []

    def opener(path: str) -> str:
        seen.append(path)
        return str(Path(uri) / path)

    assert read_amplification(uri, "node_id", open_file=opener) == pytest.approx((3 / 2 + 3 / 1) / 2)
    assert seen and all(p.startswith("node_id_range=0/") for p in seen)


# ----------------------------------------------------------------------------- partition columns, strict JSON
def _cli(*args: str) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "deltaextras", *args], capture_output=True, text=True, timeout=120)


def test_partition_column_figure_is_explained_and_json_is_strict(tmp_path: Path) -> None:
    """A partition column is pruned by partition values: the figure is 1.0 and says why, never ``nan``."""
    import json

    uri = str(tmp_path / "t")
    write_deltalake(
        uri, pa.table({"node_id": [1, 2, 3, 4], "node_id_range": [0, 0, 1, 1]}), partition_by=["node_id_range"]
    )
    assert read_amplification(uri, "node_id_range") == 1.0
    assert read_amplification(uri, "node_id_range", partition={"node_id_range": 1}) == 1.0

    text = _cli("inspect", uri, "--column", "node_id_range")
    assert text.returncode == 0, text.stderr
    assert "nan" not in text.stdout.lower()
    assert "read amplification on node_id_range: 1.00x" in text.stdout
    assert "partition column" in text.stdout

    out = _cli("inspect", uri, "--column", "node_id_range", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["read_amplification"] == 1.0
    assert "partition column" in doc["meaning"]


def test_column_without_values_gives_null_not_nan_in_json(tmp_path: Path) -> None:
    """No non-null value (nothing to measure) and infinite statistics stay strict JSON."""
    import json

    uri = str(tmp_path / "t")
    table = pa.table(
        {
            "k": pa.array([None, None], pa.int64()),
            "f": pa.array([float("inf"), -float("inf")], pa.float64()),
            "k_range": [0, 0],
        }
    )
    write_deltalake(uri, table, partition_by=["k_range"])
    out = _cli("inspect", uri, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["read_amplification"] is None
    assert "no non-null value" in doc["meaning"]
    out = _cli("inspect", uri, "--json", "--column", "f")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert doc["row_groups"][0]["max"] == "inf"
