"""The content oracle itself: its column-wise digest of large tables agrees with its row-wise one on what
is equal and what is not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from oracle import rows_checksum


def _table(n: int = 60_000) -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table(
        {
            "node_id": pa.array(rng.integers(0, 1500, n), pa.int32()),
            "utc_time": pa.array(rng.integers(0, 10**15, n), pa.timestamp("us", tz="UTC")),
            "value": pa.array(np.where(rng.random(n) < 0.01, np.nan, rng.random(n))),
            "quality": pa.array([None if i % 97 == 0 else i % 3 for i in range(n)], pa.int8()),
        }
    )


def _with(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def test_a_large_table_is_digested_column_wise_and_order_free() -> None:
    t = _table()
    count, digest = rows_checksum(t)
    assert count == t.num_rows and digest.startswith("columns:")
    shuffled = t.take(pa.array(np.random.default_rng(4).permutation(t.num_rows)))
    assert rows_checksum(shuffled) == (count, digest)
    assert rows_checksum(_with(t, "node_id", t["node_id"].cast(pa.int64()))) == (count, digest)
    assert rows_checksum(_with(t, "utc_time", t["utc_time"].cast(pa.timestamp("ns", tz="UTC")))) == (count, digest)


@pytest.mark.parametrize("change", ["duplicate", "value", "null", "zone"])
def test_the_column_wise_digest_sees_every_change(change: str) -> None:
    t = _table()
    if change == "duplicate":  # one row lost, another twice: the same count
        idx = np.arange(t.num_rows)
        idx[7] = 8
        other = t.take(pa.array(idx))
    elif change == "value":
        v = t["value"].to_numpy().copy()
        v[11] = v[11] + 1e-12
        other = _with(t, "value", pa.array(v))
    elif change == "null":
        q = t["quality"].to_pylist()
        q[5] = None if q[5] is not None else 0
        other = _with(t, "quality", pa.array(q, pa.int8()))
    else:
        other = _with(t, "utc_time", t["utc_time"].cast(pa.timestamp("us")))
    assert rows_checksum(other)[0] == t.num_rows
    assert rows_checksum(other) != rows_checksum(t)


def test_zeros_and_nans_compare_as_the_row_wise_digest_compares_them() -> None:
    t = _table()
    v = t["value"].to_numpy().copy()
    zero, neg = v.copy(), v.copy()
    zero[3], neg[3] = 0.0, -0.0
    other_nan = v.copy()
    other_nan[np.isnan(v)] = np.frombuffer(np.array([0x7FF8000000000001], np.int64).tobytes(), np.float64)[0]
    assert rows_checksum(_with(t, "value", pa.array(other_nan))) == rows_checksum(t)
    assert rows_checksum(_with(t, "value", pa.array(zero))) != rows_checksum(_with(t, "value", pa.array(neg)))
    a = rows_checksum(_with(t, "value", pa.array(zero)), spark=True)
    assert a == rows_checksum(_with(t, "value", pa.array(neg)), spark=True)
