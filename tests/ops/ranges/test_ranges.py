"""Range helpers (deltaextras.ops.ranges.ranges): range ids on Arrow, pandas, polars and PySpark data, the CHECK
constraint, table creation, and which writers enforce the constraint (deltalake and Sail)."""

from __future__ import annotations

import bisect
import math
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaextras.errors import InvalidArgumentError
from deltaextras.ops.ranges.ranges import (
    RANGE_SPEC_PROPERTY,
    RangeAppender,
    RangeSpec,
    add_range,
    append_ranged,
    create_range_table,
    range_constraint_sql,
    read_range_spec,
)

SPECS = {
    "width-bounded": RangeSpec.fixed_width("node_id", 150, stop=15000),
    "width-offset": RangeSpec.fixed_width("node_id", 7, start=-20, stop=500),
    "width-open": RangeSpec.fixed_width("node_id", 150),
    "width-many": RangeSpec.fixed_width("node_id", 1, stop=1000),  # > MAX_LISTED_RANGES: arithmetic CHECK
    "boundaries": RangeSpec.from_boundaries("node_id", [-20, 0, 3, 150, 151, 499.5, 15000]),
    "nullable": RangeSpec.fixed_width("node_id", 150, stop=15000, allow_null=True),
}


def reference_range(spec: RangeSpec, v: float) -> int:
    """The range of one in-range value, by the definition."""
    if spec.width is not None:
        return math.floor((v - spec.start) / spec.width) if isinstance(v, int) else _float_floor(spec, v)
    bounds = list(spec.boundaries or ())
    return bisect.bisect_right(bounds, v) - 1


def _float_floor(spec: RangeSpec, v: float) -> int:
    assert spec.width is not None
    r = math.floor((v - spec.start) / spec.width)
    while v < spec.start + r * spec.width:
        r -= 1
    while v >= spec.start + (r + 1) * spec.width:
        r += 1
    return r


def edge_values(spec: RangeSpec) -> list[float]:
    """Integers and floats at and around every range edge that lie inside the spec."""
    hi = spec.high if spec.high is not None else spec.low + 1000
    edges = [lo for _, lo, _ in spec.ranges()] if spec.bounded and (spec.range_count() or 0) < 300 else []
    edges += [spec.low, hi]
    out: list[float] = []
    for e in edges:
        out += [e, math.nextafter(float(e), -math.inf), math.nextafter(float(e), math.inf), e + 0.5, e - 0.5]
        if isinstance(e, int):
            out += [e - 1, e + 1]
    return sorted({v for v in out if spec.low <= v < hi})


def table_schema() -> pa.Schema:
    return pa.schema([("node_id", pa.float64()), ("value", pa.float64())])


# ----------------------------------------------------------------------------- spec
def test_spec_validation() -> None:
    with pytest.raises(InvalidArgumentError, match="integer"):
        RangeSpec.fixed_width("k", 0.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="positive"):
        RangeSpec.fixed_width("k", 0)
    with pytest.raises(InvalidArgumentError, match="greater than start"):
        RangeSpec.fixed_width("k", 10, start=5, stop=5)
    with pytest.raises(InvalidArgumentError, match="strictly increasing"):
        RangeSpec.from_boundaries("k", [0, 10, 10])
    with pytest.raises(InvalidArgumentError, match="at least two"):
        RangeSpec.from_boundaries("k", [0])
    with pytest.raises(InvalidArgumentError, match="finite"):
        RangeSpec.from_boundaries("k", [0, math.inf])
    with pytest.raises(InvalidArgumentError, match="unknown keys"):
        RangeSpec.from_json('{"column": "k", "width": 1, "colour": 2}')
    for spec in SPECS.values():
        assert RangeSpec.from_json(spec.to_json()) == spec


def test_ranges_and_counts() -> None:
    spec = RangeSpec.fixed_width("node_id", 150, stop=15000)
    assert spec.range_count() == 100 and spec.ranges()[-1] == (99, 14850, 15000)
    assert RangeSpec.fixed_width("k", 4, start=1, stop=10).ranges() == [(0, 1, 5), (1, 5, 9), (2, 9, 10)]
    assert RangeSpec.fixed_width("k", 4).range_count() is None
    with pytest.raises(InvalidArgumentError, match="no stop"):
        RangeSpec.fixed_width("k", 4).ranges()


def test_check_sql_forms() -> None:
    listed = SPECS["width-bounded"].check_sql()
    assert "(node_id_range = 0 AND node_id >= 0 AND node_id < 150) OR (node_id_range = 1 AND" in listed
    assert listed.count(" OR ") == 99
    open_sql = SPECS["width-open"].check_sql()
    assert " OR " not in open_sql and "node_id >= 150 * node_id_range" in open_sql
    many = SPECS["width-many"].check_sql()
    assert " OR " not in many and many.endswith("AND node_id < 1000")
    assert "node_id >= 499.5 AND node_id < 15000" in SPECS["boundaries"].check_sql()
    assert SPECS["nullable"].check_sql().startswith("(node_id IS NULL AND node_id_range IS NULL) OR (")
    assert range_constraint_sql(SPECS["boundaries"]) == SPECS["boundaries"].check_sql()
    assert "CAST" not in RangeSpec.from_boundaries("k", [1e-7, 1e22]).check_sql()
    with pytest.raises(InvalidArgumentError, match="lowercase"):
        RangeSpec.fixed_width("nodeId", 10).check_sql()


# ----------------------------------------------------------------------------- Arrow, pandas, polars
@pytest.mark.parametrize("name", sorted(SPECS))
def test_arrow_ids_at_edges(name: str) -> None:
    spec = SPECS[name]
    values = edge_values(spec)
    got = add_range(pa.table({"node_id": pa.array(values, pa.float64())}), spec)["node_id_range"].to_pylist()
    assert got == [reference_range(spec, v) for v in values]
    ints = sorted({int(v) for v in values if float(v).is_integer()})
    got_int = add_range(pa.table({"node_id": pa.array(ints, pa.int64())}), spec)["node_id_range"].to_pylist()
    assert got_int == [reference_range(spec, v) for v in ints]


@settings(max_examples=80, deadline=None)
@given(
    width=st.integers(1, 1000),
    start=st.integers(-(10**6), 10**6),
    offsets=st.lists(st.integers(0, 10**9), min_size=1, max_size=50),
)
def test_fixed_width_matches_floor_division(width: int, start: int, offsets: list[int]) -> None:
    spec = RangeSpec.fixed_width("k", width, start=start)
    values = [start + o for o in offsets]
    got = add_range(pa.table({"k": pa.array(values, pa.int64())}), spec)["k_range"].to_pylist()
    assert got == [(v - start) // width for v in values]
    as_float = add_range(pa.table({"k": pa.array([float(v) for v in values])}), spec)["k_range"].to_pylist()
    assert as_float == got


@settings(max_examples=80, deadline=None)
@given(
    bounds=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=20, unique=True),
    picks=st.lists(st.floats(0, 1), min_size=1, max_size=30),
)
def test_boundaries_match_bisect(bounds: list[float], picks: list[float]) -> None:
    bounds = sorted(bounds)
    spec = RangeSpec.from_boundaries("k", bounds)
    values = [b for b in bounds[:-1]] + [bounds[0] + p * (bounds[-1] - bounds[0]) for p in picks]
    values = [v for v in values if bounds[0] <= v < bounds[-1]]
    got = add_range(pa.table({"k": pa.array(values, pa.float64())}), spec)["k_range"].to_pylist()
    assert got == [bisect.bisect_right(bounds, v) - 1 for v in values]


def test_out_of_range_nan_and_null_refused() -> None:
    spec = RangeSpec.fixed_width("k", 10, stop=100)
    with pytest.raises(InvalidArgumentError, match=r"outside the ranges \[0, 100\), e.g. 100"):
        add_range(pa.table({"k": [5, 100]}), spec)
    with pytest.raises(InvalidArgumentError, match="outside"):
        add_range(pa.table({"k": [-1]}), spec)
    with pytest.raises(InvalidArgumentError, match="NaN"):
        add_range(pa.table({"k": [1.0, math.nan]}), spec)
    with pytest.raises(InvalidArgumentError, match="null"):
        add_range(pa.table({"k": [1, None]}), spec)
    with pytest.raises(InvalidArgumentError, match="numeric"):
        add_range(pa.table({"k": ["a"]}), spec)
    with pytest.raises(InvalidArgumentError, match="no column"):
        add_range(pa.table({"j": [1]}), spec)
    nullable = RangeSpec.fixed_width("k", 10, stop=100, allow_null=True)
    assert add_range(pa.table({"k": [1, None, 55]}), nullable)["k_range"].to_pylist() == [0, None, 5]
    assert nullable.range_of(None) is None
    with pytest.raises(InvalidArgumentError, match="null"):
        spec.range_of(None)


def test_all_data_kinds_agree() -> None:
    spec = SPECS["boundaries"]
    values = [float(v) for v in edge_values(spec)]
    expected = [reference_range(spec, v) for v in values]
    table = pa.table({"node_id": values, "other": list(range(len(values)))})
    assert add_range(table, spec)["node_id_range"].to_pylist() == expected
    assert add_range(table.to_batches()[0], spec)["node_id_range"].to_pylist() == expected
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    assert add_range(reader, spec)["node_id_range"].to_pylist() == expected
    pdf = add_range(pd.DataFrame({"node_id": values}), spec)
    assert isinstance(pdf, pd.DataFrame) and pdf["node_id_range"].tolist() == expected
    assert str(pdf["node_id_range"].dtype) == "int64"
    pldf = add_range(pl.DataFrame({"node_id": values}), spec)
    assert isinstance(pldf, pl.DataFrame) and pldf["node_id_range"].to_list() == expected
    assert pldf.schema["node_id_range"] == pl.Int64
    # an existing range column is replaced, not duplicated
    again = add_range(add_range(table, spec), spec)
    assert again.column_names == ["node_id", "other", "node_id_range"]
    with pytest.raises(InvalidArgumentError, match="LazyFrame"):
        add_range(pl.DataFrame({"node_id": values}).lazy(), spec)
    with pytest.raises(InvalidArgumentError, match="cannot add a range column"):
        add_range([1, 2], spec)


def test_pandas_nulls_become_nullable_int() -> None:
    spec = RangeSpec.fixed_width("k", 10, allow_null=True)
    out = add_range(pd.DataFrame({"k": [1.0, None, 25.0]}), spec)
    assert str(out["k_range"].dtype) == "Int64"
    assert out["k_range"].tolist()[0] == 0 and out["k_range"].isna().tolist() == [False, True, False]


# ----------------------------------------------------------------------------- the table, deltalake
def test_create_range_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spec = SPECS["width-bounded"]
    dt = create_range_table(uri, pa.schema([("node_id", pa.int32()), ("value", pa.float64())]), spec)
    assert dt.metadata().partition_columns == ["node_id_range"]
    assert dt.schema().to_arrow() is not None
    fields = {f.name: f.type for f in pa.schema(dt.schema().to_arrow())}
    assert fields["node_id_range"] == pa.int64()
    config = dt.metadata().configuration
    assert config[RANGE_SPEC_PROPERTY] == spec.to_json()
    assert "node_id_range = 99 AND node_id >= 14850" in config["delta.constraints.node_id_range_bounds"]
    assert dt.protocol().min_writer_version >= 3  # CHECK constraints need writer version 3
    assert read_range_spec(uri) == spec
    with pytest.raises(Exception, match=r"(?i)exist"):
        create_range_table(uri, pa.schema([("node_id", pa.int32())]), spec)
    with pytest.raises(InvalidArgumentError, match="no column"):
        create_range_table(str(tmp_path / "u"), pa.schema([("x", pa.int32())]), spec)
    with pytest.raises(InvalidArgumentError, match="must be int64"):
        create_range_table(
            str(tmp_path / "v"), pa.schema([("node_id", pa.int64()), ("node_id_range", pa.int32())]), spec
        )
    with pytest.raises(InvalidArgumentError, match="numeric"):
        create_range_table(str(tmp_path / "w"), pa.schema([("node_id", pa.string())]), spec)


def _deltalake_write(uri: str, node_ids: list[Any], ranges: list[Any]) -> bool:
    """Append rows with the given (possibly wrong) ranges with write_deltalake; False if refused."""
    data = pa.table(
        {
            "node_id": pa.array(node_ids, pa.float64()),
            "value": pa.array([1.0] * len(node_ids)),
            "node_id_range": pa.array(ranges, pa.int64()),
        }
    )
    try:
        write_deltalake(uri, data, mode="append")
    except Exception as exc:  # deltalake raises its internal DeltaError
        assert "failed validation check" in str(exc), exc
        return False
    return True


@pytest.mark.parametrize("name", sorted(SPECS))
def test_deltalake_enforces_the_constraint(tmp_path: Path, name: str) -> None:
    """Rows with the derived range are accepted; the same rows with any other range are refused."""
    spec = SPECS[name]
    uri = str(tmp_path / "t")
    create_range_table(uri, table_schema(), spec)
    values = edge_values(spec)
    ranged = add_range(pa.table({"node_id": values}), spec)["node_id_range"].to_pylist()
    assert _deltalake_write(uri, values, ranged)
    for v, r in list(zip(values, ranged, strict=True))[:: max(1, len(values) // 12)]:
        assert not _deltalake_write(uri, [v], [r + 1]), (v, r + 1)
        assert not _deltalake_write(uri, [v], [r - 1]), (v, r - 1)
    assert not _deltalake_write(uri, [values[0]], [None])  # a value with no range
    if spec.allow_null:
        assert _deltalake_write(uri, [None], [None])
        assert not _deltalake_write(uri, [None], [0])
    else:
        assert not _deltalake_write(uri, [None], [None])
    assert DeltaTable(uri).count() == len(values) + (1 if spec.allow_null else 0)


def test_appender_deltalake_path(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([("node_id", pa.int64()), ("utc_time", pa.timestamp("us", tz="UTC")), ("value", pa.float64())])
    create_range_table(uri, schema, RangeSpec.fixed_width("node_id", 100, stop=1000))
    appender = RangeAppender(uri)
    assert appender.spec == read_range_spec(uri)
    # pandas: int32 node ids, nanosecond timestamps, columns out of table order
    pdf = pd.DataFrame(
        {
            "value": [1.5, 2.5],
            "node_id": pd.array([5, 150], dtype="int32"),
            "utc_time": pd.to_datetime(["2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z"]),
        }
    )
    appender.append(pdf)
    appender.append(
        pl.DataFrame({"node_id": [999], "utc_time": [pd.Timestamp("2024-01-01", tz="UTC")], "value": [0.0]})
    )
    append_ranged(uri, pa.table({"node_id": [300], "value": [3.0]}))  # missing column: null
    rows = sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["node_id"])
    assert [(r["node_id"], r["node_id_range"]) for r in rows] == [(5, 0), (150, 1), (300, 3), (999, 9)]
    assert rows[2]["utc_time"] is None
    with pytest.raises(InvalidArgumentError, match="not in the table"):
        appender.append(pa.table({"node_id": [1], "colour": ["red"]}))
    with pytest.raises(InvalidArgumentError, match="outside"):
        appender.append(pa.table({"node_id": [1000]}))
    assert DeltaTable(uri).count() == 4


def test_read_range_spec_needs_the_property(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [1], "k_range": [0]}), partition_by=["k_range"])
    with pytest.raises(InvalidArgumentError, match="pass the RangeSpec"):
        read_range_spec(uri)
    with pytest.raises(InvalidArgumentError, match="pass the RangeSpec"):
        RangeAppender(uri)
    RangeAppender(uri, RangeSpec.fixed_width("k", 10)).append(pa.table({"k": [15]}))
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("k_range").to_pylist()) == [0, 1]


# ----------------------------------------------------------------------------- PySpark (Sail)
@pytest.mark.parametrize("name", sorted(SPECS))
def test_spark_ids_match_arrow(spark: Any, name: str) -> None:
    spec = SPECS[name]
    values = edge_values(spec)
    expected = add_range(pa.table({"node_id": values}), spec)["node_id_range"].to_pylist()
    df = spark.createDataFrame([(i, float(v)) for i, v in enumerate(values)], "i long, node_id double")
    got = [r.node_id_range for r in add_range(df, spec).orderBy("i").collect()]
    assert got == expected
    ints = sorted({int(v) for v in values if float(v).is_integer()})
    int_df = spark.createDataFrame([(v,) for v in ints], "node_id long")
    got_int = [r.node_id_range for r in add_range(int_df, spec).orderBy("node_id").collect()]
    assert got_int == add_range(pa.table({"node_id": ints}), spec)["node_id_range"].to_pylist()


def test_spark_refuses_out_of_range_and_null(spark: Any) -> None:
    spec = RangeSpec.fixed_width("node_id", 150, stop=300)
    with pytest.raises(Exception, match=r"outside the ranges of node_id_range \[0, 300\): 300"):
        add_range(spark.createDataFrame([(1,), (300,)], "node_id long"), spec).collect()
    with pytest.raises(Exception, match="null node_id refused"):
        add_range(spark.createDataFrame([(1,), (None,)], "node_id long"), spec).collect()
    nullable = RangeSpec.fixed_width("node_id", 150, stop=300, allow_null=True)
    rows = add_range(spark.createDataFrame([(1,), (None,)], "node_id long"), nullable).collect()
    assert sorted((r.node_id_range is None, r.node_id_range) for r in rows) == [(False, 0), (True, None)]
    with pytest.raises(InvalidArgumentError, match="number"):
        add_range(spark.createDataFrame([("a",)], "node_id string"), spec)


def _spark_write(spark: Any, uri: str, node_id: float | None, node_range: int | None) -> bool:
    df = spark.createDataFrame([(node_id, 1.0, node_range)], "node_id double, value double, node_id_range long")
    try:
        df.write.format("delta").mode("append").save(uri)
    except Exception as exc:
        assert "DELTA_VIOLATE_CONSTRAINT" in str(exc) or "CHECK constraint" in str(exc), exc
        return False
    return True


@pytest.mark.parametrize("name", ["width-bounded", "width-open", "boundaries", "nullable"])
def test_sail_enforces_the_constraint(spark: Any, tmp_path: Path, name: str) -> None:
    spec = SPECS[name]
    uri = str(tmp_path / "t")
    create_range_table(uri, table_schema(), spec)
    values = edge_values(spec)[::5]
    ranges = add_range(pa.table({"node_id": values}), spec)["node_id_range"].to_pylist()
    accepted = 0
    for v, r in zip(values[:6], ranges[:6], strict=True):
        assert _spark_write(spark, uri, v, r)
        accepted += 1
        assert not _spark_write(spark, uri, v, r + 1)
    assert not _spark_write(spark, uri, values[0], None)
    assert _spark_write(spark, uri, None, None) == spec.allow_null
    accepted += spec.allow_null
    assert DeltaTable(uri).count() == accepted
    assert spark.read.format("delta").load(uri).count() == accepted


def test_appender_spark_path(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([("node_id", pa.int64()), ("batch", pa.int64()), ("value", pa.float64())])
    create_range_table(uri, schema, RangeSpec.fixed_width("node_id", 40))
    appender = RangeAppender(uri)
    for b in range(3):
        appender.append(
            spark.range(0, 100).selectExpr("id AS node_id", f"CAST({b} AS BIGINT) AS batch", "0.5 AS value")
        )
    # an int column is widened by the Delta writer; the range column is derived from it
    append_ranged(uri, spark.createDataFrame([(1000, 9, 1.0)], "node_id int, batch long, value double"))
    dt = DeltaTable(uri)
    assert dt.count() == 301
    parts = sorted(
        {v for v in pa.table(dt.get_add_actions(flatten=True)).column("partition.node_id_range").to_pylist()}
    )
    assert parts == [0, 1, 2, 25]
    via_spark = {
        (r.node_id, r.node_id_range)
        for r in spark.read.format("delta").load(uri).select("node_id", "node_id_range").collect()
    }
    assert via_spark == {(n, n // 40) for n in [*range(100), 1000]}


def test_other_deltalake_writers_enforce_the_constraint(tmp_path: Path) -> None:
    """UPDATE and MERGE through deltalake, and polars' write_delta (deltalake underneath), refuse too."""
    uri = str(tmp_path / "t")
    create_range_table(uri, table_schema(), RangeSpec.fixed_width("node_id", 150, stop=300))
    append_ranged(uri, pa.table({"node_id": [5.0], "value": [1.0]}))
    with pytest.raises(Exception, match="failed validation check"):
        DeltaTable(uri).update(updates={"node_id_range": "1"}, predicate="node_id = 5")
    with pytest.raises(Exception, match="failed validation check"):
        DeltaTable(uri).update(updates={"node_id": "200"}, predicate="node_id = 5")
    source = pa.table({"node_id": [5.0], "value": [2.0], "node_id_range": pa.array([1], pa.int64())})
    with pytest.raises(Exception, match="failed validation check"):
        (
            DeltaTable(uri)
            .merge(source, "s.node_id = t.node_id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .execute()
        )
    with pytest.raises(Exception, match="failed validation check"):
        pl.DataFrame({"node_id": [6.0], "value": [1.0], "node_id_range": [1]}).write_delta(uri, mode="append")
    assert DeltaTable(uri).to_pyarrow_table().to_pylist() == [{"node_id": 5.0, "value": 1.0, "node_id_range": 0}]


def test_sail_update_and_overwrite_enforce_the_constraint(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    create_range_table(uri, table_schema(), RangeSpec.fixed_width("node_id", 150, stop=300))
    append_ranged(uri, pa.table({"node_id": [5.0], "value": [1.0]}))
    with pytest.raises(Exception, match="DELTA_VIOLATE_CONSTRAINT"):
        spark.sql(f"UPDATE delta.`{uri}` SET node_id_range = 1 WHERE node_id = 5").collect()
    bad = spark.createDataFrame([(5.0, 3.0, 1)], "node_id double, value double, node_id_range long")
    with pytest.raises(Exception, match="DELTA_VIOLATE_CONSTRAINT"):
        bad.write.format("delta").mode("overwrite").save(uri)
    assert [tuple(r) for r in spark.read.format("delta").load(uri).collect()] == [(5.0, 1.0, 0)]
