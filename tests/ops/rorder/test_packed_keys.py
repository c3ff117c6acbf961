"""The packed-key layout order against NumPy's stable lexicographic sort, on every integer width and
sign, descending, ties, steps that only the whole column (not its sample) shows, and keys too wide;
and through ``rorder``, key columns of narrow, negative and time types read back from the keys."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import checksum, live_adds

from deltaextras import rorder
from deltaextras.ops.rorder.rewrite import packed_keys
from deltaextras.ops.rorder.rewrite.packed_keys import packed_order


def reference(by: np.ndarray, inner: np.ndarray | None, descending: bool) -> tuple[list[int], list[int]]:
    """Stable sort by ``by`` then ``inner`` (reversed ranks when descending), and the run ends."""
    keys = [by.astype(object)]
    if inner is not None:
        as_int = inner.astype(object)
        keys.insert(0, [-v for v in as_int] if descending else list(as_int))
    order = sorted(range(len(by)), key=lambda i: (keys[-1][i], *(k[i] for k in keys[:-1])))
    values = [int(by[i]) for i in order]
    ends = [i + 1 for i in range(len(values)) if i + 1 == len(values) or values[i + 1] != values[i]]
    return order, ends


DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]


def fits(by: np.ndarray, inner: np.ndarray | None) -> bool:
    """Whether value offset, steps of ``inner`` (their greatest common divisor) and row index fit 63 bits."""
    n = len(by)
    bits = (int(by.max()) - int(by.min())).bit_length() + (n - 1).bit_length()
    if inner is not None:
        values = [int(v) for v in inner]
        step = math.gcd(*(v - min(values) for v in values)) or 1
        bits += ((max(values) - min(values)) // step).bit_length()
    return bits <= 63


@settings(max_examples=400, deadline=None)
@given(
    st.data(),
    st.sampled_from(DTYPES),
    st.sampled_from(DTYPES),
    st.integers(0, 6),
    st.booleans(),
    st.booleans(),
    st.sampled_from([1, 3, 300_000_000]),
)
def test_matches_a_stable_lexicographic_sort(
    data: st.DataObject, by_type: type, inner_type: type, rows_log: int, descending: bool, has_inner: bool, step: int
) -> None:
    n = data.draw(st.integers(1, 2**rows_log))
    info_b, info_i = np.iinfo(by_type), np.iinfo(inner_type)
    distinct = data.draw(st.lists(st.integers(int(info_b.min), int(info_b.max)), min_size=1, max_size=n))
    by = np.array(data.draw(st.lists(st.sampled_from(distinct), min_size=n, max_size=n)), by_type)  # ties
    inner = None
    if has_inner:
        if int(info_i.min) + 5 * step > int(info_i.max):
            step = 1
        base = data.draw(st.integers(int(info_i.min), int(info_i.max) - 5 * step))
        counts = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        inner = np.array([base + c * step for c in counts], dtype=object).astype(inner_type)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))  # the rows as chunks, some empty
    got = packed_order(np.split(by, cuts), None if inner is None else np.split(inner, cuts), descending=descending)
    assert (got is not None) == fits(by, inner)
    if got is None:
        return
    want, want_ends = reference(by, inner, descending)
    assert got.rows(0, n).tolist() == want
    assert got.ends == want_ends
    # both columns read back from the keys, in their own types, a slice at a time
    middle = n // 2
    first = [e for e in [0, *got.ends] if e <= middle]
    restored = np.concatenate(
        [got.by_values(first), got.by_values([first[-1], *(e for e in got.ends if e > first[-1])])]
    )
    assert restored.dtype == by.dtype and restored.tolist() == by[want].tolist()
    if inner is not None:
        restored = np.concatenate([got.inner_values(0, middle), got.inner_values(middle, n)])
        assert restored.dtype == inner.dtype and restored.tolist() == inner[want].tolist()


def test_a_step_the_sample_misses_still_orders_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every offset a multiple of 600 except one: the sample sees 600, the rows show 1 (or 2)."""
    monkeypatch.setattr(packed_keys, "SAMPLE_ROWS", 4)
    monkeypatch.setattr(packed_keys, "BLOCK_ROWS", 16)
    rng = np.random.default_rng(1)
    inner = rng.integers(0, 50, 100) * 600
    by = rng.integers(0, 4, 100)
    # rows 77 and 90 share a value; 77 reads 2 later than 90 (in a row the sample does not hold)
    by[[77, 90]], inner[[77, 90]] = 9, [6002, 6000]
    with ThreadPoolExecutor(2) as pool:
        got = packed_order(np.split(by, [30]), np.split(inner, [30]), map_blocks=pool.map)
    want, want_ends = reference(by, inner, False)
    assert got is not None
    assert got.rows(0, 100).tolist() == want and got.ends == want_ends


def test_keys_too_wide_give_none() -> None:
    """Nanosecond times over a century, by values spread over 2**20 and 2**20 rows do not fit 63 bits."""
    n = 1 << 20
    by = np.arange(n, dtype=np.int64)
    inner = np.linspace(0, 100 * 365 * 86_400 * 10**9, n).astype(np.int64) + 1
    assert packed_order([by], [inner]) is None
    assert packed_order([by]) is not None


@pytest.mark.parametrize("sort_parts", [1, 2, 3])
def test_a_full_sensor_pass_orders_like_numpy_lexsort(sort_parts: int) -> None:
    """150 nodes, five-minute readings in microseconds, 300,000 rows in random order: the order NumPy's
    lexsort gives (stable: ties keep input order), the keys sorted whole or in slices merged after."""
    rng = np.random.default_rng(7)
    n = 300_000
    assert n >= packed_keys.PARALLEL_SORT_ROWS
    by = rng.integers(1, 151, n)
    inner = 1_700_000_000_000_000 + rng.integers(0, 2_000, n) * 300_000_000
    with ThreadPoolExecutor(2) as pool:
        got = packed_order(np.array_split(by, 7), np.array_split(inner, 7), map_blocks=pool.map, sort_parts=sort_parts)
    want = np.lexsort((inner, by))
    assert got is not None
    assert np.array_equal(got.rows(0, n), want)
    assert np.array_equal(got.inner_values(0, n), inner[want])
    assert got.ends == [*(np.flatnonzero(np.diff(by[want])) + 1).tolist(), n]


@pytest.mark.parametrize(
    ("by_type", "inner_type", "order"),
    [
        (pa.int32(), pa.date32(), "descending"),
        (pa.int64(), pa.timestamp("us", tz="UTC"), "ascending"),
        (pa.int16(), pa.timestamp("us"), "descending"),
    ],
)
def test_rorder_reads_both_key_columns_back_in_their_types(
    tmp_path: Path, by_type: pa.DataType, inner_type: pa.DataType, order: str
) -> None:
    """Through ``rorder``: every row group holds one value of ``by`` and its rows in ``sort_by`` order;
    the content, in the table's types, is the input's (``by`` and ``sort_by`` come from the keys)."""
    rng = np.random.default_rng(3)
    n = 20_000
    by = rng.integers(0, 40, n).astype(by_type.to_pandas_dtype())
    if by_type == pa.int64():
        by -= 2**62  # offsets from the smallest value, not the values, fill the key
    inner = rng.integers(0, 10_000, n) * 3
    data = pa.table(
        {
            "k": pa.array(by, by_type),
            "t": pa.array(inner.astype(f"int{inner_type.bit_width}")).view(inner_type),
            "v": rng.random(n),
        }
    )
    uri = str(tmp_path / "t")
    for part in range(4):  # four files, each in random order
        write_deltalake(uri, data.slice(part * n // 4, n // 4), mode="append")
    before = checksum(uri)

    report = rorder(uri, by="k", sort_by=[("t", order)], max_workers=1)[0]

    assert report.status == "committed", report
    assert checksum(uri) == before
    assert DeltaTable(uri).schema().to_arrow().field("t").type == inner_type
    for add in live_adds(uri):
        pf = pq.ParquetFile(tmp_path / "t" / add["path"])
        for i in range(pf.metadata.num_row_groups):
            group = pf.read_row_group(i)
            assert group.column("k").type == by_type and group.column("t").type == inner_type
            assert pc.count_distinct(group.column("k")).as_py() == 1
            times = np.frombuffer(group.column("t").chunk(0).buffers()[1], f"int{inner_type.bit_width}")
            steps = np.diff(times)
            assert (steps <= 0).all() if order == "descending" else (steps >= 0).all()
