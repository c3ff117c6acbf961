"""Buffer-level Arrow helpers: the same values as pyarrow's own conversions, and a delete that never
makes pyarrow import pandas (tens of MB and half a second per process)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from deltaextras.core.arrays import bool_numpy, constant_array, infer_scalar, py_value, scalar, true_mask

UTC = dt.timezone.utc
CASES: list[tuple[Any, pa.DataType]] = [
    (True, pa.bool_()),
    (False, pa.bool_()),
    (-128, pa.int8()),
    (127, pa.int8()),
    (65535, pa.uint16()),
    (2**63 - 1, pa.int64()),
    (-(2**63), pa.int64()),
    (2**64 - 1, pa.uint64()),
    (7, pa.float64()),
    (-0.5, pa.float32()),
    (1.5, pa.float16()),
    (float("inf"), pa.float64()),
    ("", pa.string()),
    ("näive 'text'", pa.string()),
    ("x" * 1000, pa.large_string()),
    ("view", pa.string_view()),
    (b"\x00\xff", pa.binary()),
    (b"abc", pa.large_binary()),
    (Decimal("1.50"), pa.decimal128(5, 2)),
    (Decimal("-1.5"), pa.decimal128(5, 2)),
    (Decimal("99999.999"), pa.decimal128(8, 3)),
    (Decimal("-12345678901234567890.123456789"), pa.decimal256(40, 9)),
    (12, pa.decimal128(4, 1)),
    (dt.date(2024, 2, 29), pa.date32()),
    (dt.date(1, 1, 1), pa.date32()),
    (dt.date(1969, 12, 31), pa.date64()),
    (dt.datetime(2024, 5, 1, 12, 30, 1, 456789), pa.timestamp("us")),
    (dt.datetime(1969, 12, 31, 23, 59, 59, 999999), pa.timestamp("us")),
    (dt.datetime(2024, 5, 1, 12, 30, 1, 456789, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
    (dt.datetime(2024, 5, 1, 12, 30, 1, 456000, tzinfo=UTC), pa.timestamp("ms", tz="UTC")),
    (dt.datetime(2024, 5, 1, 12, 30, 1), pa.timestamp("s")),
    (dt.datetime(2024, 5, 1, 12, 30, 1, 1, tzinfo=UTC), pa.timestamp("ns", tz="UTC")),
    (dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))), pa.timestamp("us", tz="UTC")),
    (None, pa.int32()),
    (None, pa.string()),
    (None, pa.timestamp("us", tz="UTC")),
]


@pytest.mark.parametrize(("value", "typ"), CASES, ids=[f"{t}-{i}" for i, (_, t) in enumerate(CASES)])
def test_scalar_equals_pyarrow(value: Any, typ: pa.DataType) -> None:
    ours = scalar(value, typ)
    theirs = pa.scalar(value, typ)
    assert ours.type.equals(typ)
    assert ours.equals(theirs), (ours, theirs)
    if not pa.types.is_timestamp(typ) or typ.unit != "ns":
        assert py_value(ours) == theirs.as_py()


@pytest.mark.parametrize(
    ("value", "typ", "error"),
    [
        (128, pa.int8(), OverflowError),
        (-1, pa.uint8(), OverflowError),
        (2**64, pa.uint64(), OverflowError),
        ("5", pa.int64(), TypeError),
        (True, pa.int64(), TypeError),
        (1.5, pa.int64(), TypeError),
        (1, pa.bool_(), TypeError),
        (5, pa.string(), TypeError),
        (Decimal("1.005"), pa.decimal128(5, 2), ValueError),
        (Decimal("1000.00"), pa.decimal128(5, 2), OverflowError),
        (Decimal("NaN"), pa.decimal128(5, 2), ValueError),
        (1.5, pa.decimal128(5, 2), TypeError),
        (dt.datetime(2024, 1, 1), pa.date32(), TypeError),
        (dt.date(2024, 1, 1), pa.timestamp("us"), TypeError),
        (dt.datetime(2024, 1, 1, 0, 0, 0, 5), pa.timestamp("ms"), pa.ArrowInvalid),
        (dt.datetime(9999, 1, 1), pa.timestamp("ns"), pa.ArrowInvalid),
    ],
)
def test_scalar_refuses_what_does_not_fit(value: Any, typ: pa.DataType, error: type[Exception]) -> None:
    with pytest.raises(error):
        scalar(value, typ)


def test_infer_scalar_types() -> None:
    assert [infer_scalar(v).type for v in (True, 3, 2.5, "a", b"b", dt.date(2024, 1, 1))] == [
        pa.bool_(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.binary(),
        pa.date32(),
    ]
    assert infer_scalar(dt.datetime(2024, 1, 1, tzinfo=UTC)).type == pa.timestamp("us", tz="UTC")
    assert infer_scalar(2**64 - 1).type == pa.uint64()
    with pytest.raises(OverflowError):
        infer_scalar(2**64)


def test_masks_treat_null_as_false_and_honour_offsets() -> None:
    values = pa.array([True, None, False, True, None, True, True, False, True, None, True])
    assert true_mask(values).tolist() == [v is True for v in values.to_pylist()]
    sliced = values.slice(3, 7)
    assert bool_numpy(sliced).tolist() == [v is True for v in sliced.to_pylist()]
    chunked = pa.chunked_array([values.slice(0, 4), values.slice(4)])
    assert true_mask(chunked).tolist() == [v is True for v in values.to_pylist()]


def test_constant_array() -> None:
    assert constant_array(scalar("x", pa.string()), 3).to_pylist() == ["x", "x", "x"]
    nulls = constant_array(scalar(None, pa.date32()), 2)
    assert nulls.type == pa.date32() and nulls.null_count == 2


def test_delete_never_imports_pandas(tmp_path: Any) -> None:
    """Every predicate shape, with and without deletion vectors, on a partitioned table."""
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import pyarrow as pa
        from deltalake import write_deltalake
        from deltaextras.core.arrays import int64_array
        from deltaextras.ops.delete.delete import delete

        n = 3000
        ids = np.arange(n)
        table = pa.table({{
            "id": int64_array(ids),
            "node": int64_array(ids % 7),
            "ts": int64_array(ids * 1_000_000).cast(pa.timestamp("us", tz="UTC")),
            "name": int64_array(ids % 5).cast(pa.string()),
            "day": int64_array(ids % 300).cast(pa.int32()).view(pa.date32()),
            "part": int64_array(ids % 3),
        }})
        assert "pandas" not in sys.modules
        predicates = [
            "id = 5",
            "node IN (1, 2) AND id < 100",
            "ts < TIMESTAMP '1970-01-01 00:00:10'",
            "ts >= '1970-01-01T00:49:00Z'",
            "name = '3' AND id > 2900",
            "day = DATE '1970-01-05'",
            "part = 2 AND id < 50",
            "id IS NULL OR id BETWEEN 300 AND 310",
            "NOT (node != 3) AND id < 200",
            "name LIKE '4%' AND id < 1000",
            "id IN (1500, NULL)",
            "part = 1 AND id >= 2000",
        ]
        for dv in ("true", "false"):
            path = {str(tmp_path)!r} + "/" + dv
            write_deltalake(path, table, partition_by=["part"],
                            configuration={{"delta.enableDeletionVectors": dv}})
            deleted = sum(delete(path, p).rows_deleted for p in predicates)
            assert deleted > 500, deleted
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC"])
def test_timestamp_statistics_bound_the_values(tmp_path: Any, unit: str, tz: str | None) -> None:
    """Row-group timestamp statistics decode to bounds that hold: exact for ms and us (equal to
    pyarrow's own decoding), rounded outwards to microseconds for ns."""
    import pyarrow.parquet as pq

    from deltaextras.ops.delete.delete import _statistic_bounds

    per_second = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    raw = [-5 * per_second - 1, 1_700_000_000 * per_second + 123, 1_700_000_100 * per_second + per_second - 1]
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"t": pa.array(raw, pa.int64()).cast(pa.timestamp(unit, tz=tz))}), path)
    st = pq.ParquetFile(path).metadata.row_group(0).column(0).statistics
    low, high = _statistic_bounds(st, pa.timestamp("us", tz=tz))
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC if tz else None)
    floor_us = raw[0] * 1_000_000 // per_second
    ceil_us = -(-raw[-1] * 1_000_000 // per_second)
    assert low == epoch + dt.timedelta(microseconds=floor_us)
    assert high == epoch + dt.timedelta(microseconds=ceil_us)
    if unit != "ns":
        assert (low, high) == (st.min, st.max)
    else:
        assert floor_us * 1000 <= raw[0] and ceil_us * 1000 >= raw[-1]
