"""The partition rewrite on its own: de-duplication as Spark compares values, and the memory estimate."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from oracle import checksum, rows_checksum, scan

from deltaextras import DuplicateKeyError, rorder, rorder_single


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


QUIET_NAN = _double(0x7FF8000000000000)
OTHER_NAN = _double(0x7FF8000000000001)  # a NaN with another payload: still NaN to Spark


def _write(uri: str, table: pa.Table, mode: str = "append") -> None:
    write_deltalake(uri, table, partition_by=["node_id_range"], mode=mode)


# ---------------------------------------------------------------------- de-duplication
def test_exact_duplicates_with_nan_collapse(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    rows = pa.table(
        {
            "node_id": [1, 1, 2, 2],
            "utc_time": [10, 20, 10, 20],
            "v": [QUIET_NAN, 2.0, None, 0.0],
            "w": [[1.0, QUIET_NAN], [2.0], None, [QUIET_NAN]],  # nested NaN too
            "node_id_range": [0, 0, 0, 0],
        }
    )
    again = rows.set_column(2, "v", pa.array([OTHER_NAN, 2.0, None, -0.0]))  # NaN payload and zero sign differ
    _write(uri, rows)
    _write(uri, again)
    report = rorder(uri, unique_by="utc_time", sort_by="utc_time", max_workers=1)
    assert report[0].status == "committed" and report[0].duplicates_removed == 4
    assert checksum(uri) == rows_checksum(rows)  # the first of each pair is kept


def test_float_key_groups_nan_and_signed_zero_as_spark(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    keys = [QUIET_NAN, OTHER_NAN, 0.0, -0.0, None, None, 1.5]
    _write(uri, pa.table({"node_id": [7] * 7, "f": keys, "node_id_range": [0] * 7}))
    report = rorder(uri, unique_by="f", max_workers=1)
    assert report[0].duplicates_removed == 3
    got = scan(uri).column("f").to_pylist()
    assert len(got) == 4 and sum(1 for x in got if x is not None and math.isnan(x)) == 1
    assert sorted(x for x in got if x is not None and not math.isnan(x)) == [0.0, 1.5]


def test_rows_that_differ_only_by_nan_versus_number_conflict(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    _write(uri, pa.table({"node_id": [1, 1], "utc_time": [10, 10], "v": [QUIET_NAN, 1.0], "node_id_range": [0, 0]}))
    with pytest.raises(DuplicateKeyError, match="'v'"):
        rorder_single({"path": uri, "partition_value": 0, "unique_by": "utc_time"})


def test_many_duplicates_are_removed_in_bulk(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    rng = np.random.default_rng(1)
    n = 60_000
    values = rng.random(n)
    values[::7] = np.nan
    base = pa.table(
        {
            "node_id": pa.array(rng.integers(0, 20, n), pa.int64()),
            "utc_time": pa.array(np.arange(n), pa.int64()),
            "v": values,
            "node_id_range": pa.array(np.zeros(n, np.int64)),
        }
    )
    _write(uri, base)
    _write(uri, base.take(pa.array(rng.permutation(n)[: n // 2])))
    report = rorder(uri, unique_by="utc_time", max_workers=1)
    assert report[0].duplicates_removed == n // 2
    assert checksum(uri) == rows_checksum(base)


# ---------------------------------------------------------------------- memory estimate
@pytest.mark.parametrize("kind", ["string", "binary"])
def test_estimate_covers_decoded_dictionary_text(tmp_path: Any, kind: str) -> None:
    """A repeated 200-byte value is a few bytes a row in Parquet (dictionary) and 204 in Arrow: the
    planner must size passes on the decoded bytes, so a small budget means several passes."""
    from deltaextras.core.snapshot import TableSnapshot
    from deltaextras.ops.rorder.options import RorderOptions
    from deltaextras.ops.rorder.rewrite.rewrite import PartitionRewriter

    uri = str(tmp_path / "t")
    n = 25_000
    value: Any = "abcdefghij" * 20 if kind == "string" else b"\x01\x02" * 100
    rng = np.random.default_rng(2)
    decoded = 0
    for _ in range(4):
        text = pa.array([value] * n, pa.string() if kind == "string" else pa.binary())
        decoded += text.nbytes
        ids = pa.array(rng.integers(0, 40, n), pa.int64())
        _write(uri, pa.table({"node_id": ids, "s": text, "node_id_range": pa.array(np.zeros(n, np.int64))}))
    snap = TableSnapshot.load(uri)
    budget = 4 * 1024 * 1024
    rw = PartitionRewriter(snap, snap.files, "node_id", RorderOptions(memory_budget=budget), {"node_id_range": "0"})
    rw._open_inputs()
    estimate = sum(rg.est_bytes for rg in rw._row_groups)
    assert decoded <= estimate <= 1.5 * (decoded + 4 * n * 9)
    result = PartitionRewriter(
        snap, snap.files, "node_id", RorderOptions(memory_budget=budget), {"node_id_range": "0"}
    ).run()
    assert result.passes >= 4 and result.rows_out == 4 * n


# ---------------------------------------------------------------------- passes, spill and sort order
@pytest.mark.parametrize(
    ("kind", "spill_codec"),
    [("int-nulls", "none"), ("string", "none"), ("int-nulls", "lz4"), ("int-negative", "none"), ("int-wide", "none")],
)
def test_spilled_passes_write_the_same_rows_in_the_same_order(
    tmp_path: Any, monkeypatch: Any, kind: str, spill_codec: str
) -> None:
    """A tiny budget (many passes, every row group spilled) gives row for row the output of one pass,
    with nulls of ``by`` last, two sort keys (one descending, one with nulls) and integer keys; spill
    files read back the same uncompressed (views of the mapped file) and compressed (column by column)."""
    from oracle import row_groups

    monkeypatch.setenv("DELTAEXTRAS_SPILL_COMPRESSION", spill_codec)

    rng = np.random.default_rng(5)
    n = 3_000
    base = rng.integers(0, 30, n)
    if kind == "string":
        key = pa.array([f"n{v:02d}" for v in base])
    elif kind == "int-negative":  # no nulls: passes found by one lookup from the smallest value
        key = pa.array(base - 15, pa.int64())
    elif kind == "int-wide":  # values too far apart for that lookup
        key = pa.array(base * (1 << 40) - (1 << 60), pa.int64())
    else:
        key = pa.array([None if v % 7 == 0 else int(v) for v in base], pa.int64())
    q = pa.array([None if i % 11 == 0 else int(x) for i, x in enumerate(rng.integers(0, 4, n))], pa.int32())
    table = pa.table(
        {"k": key, "q": q, "seq": pa.array(rng.permutation(n)), "k_range": pa.array(np.zeros(n, np.int64))}
    )
    uris = [str(tmp_path / "one"), str(tmp_path / "many")]
    for uri in uris:
        for i in range(3):
            write_deltalake(uri, table.slice(i * 1000, 1000), partition_by=["k_range"], mode="append")
    sort_by = [("q", "descending"), "seq"]
    one = rorder(uris[0], sort_by=sort_by, max_workers=1)
    many = rorder(uris[1], sort_by=sort_by, max_workers=1, memory_budget=8_000)
    assert one[0].passes == 1 and many[0].passes > 5 and many[0].spilled_bytes > 0
    assert checksum(uris[0]) == checksum(uris[1]) == rows_checksum(table)
    got = [g.select(["k", "q", "seq"]) for g in row_groups(uris[1])]
    assert [g.to_pylist() for g in got] == [g.select(["k", "q", "seq"]).to_pylist() for g in row_groups(uris[0])]
    for g in got:  # inside a value: q descending with nulls last, then seq ascending
        rows = g.to_pylist()
        keyed = [(r["q"] is None, -(r["q"] or 0), r["seq"]) for r in rows]
        assert keyed == sorted(keyed)


def test_integer_sort_key_orders_rows_inside_each_value(tmp_path: Any) -> None:
    from oracle import row_groups

    uri = str(tmp_path / "t")
    rng = np.random.default_rng(9)
    n = 5_000
    t = pa.array(rng.integers(-(2**40), 2**40, n), pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {"node_id": pa.array(rng.integers(0, 5, n)), "t": t, "node_id_range": pa.array(np.zeros(n, np.int64))}
    )
    _write(uri, table)
    rorder(uri, sort_by=[("t", "descending")], max_workers=1)
    for g in row_groups(uri):
        values = g.column("t").cast(pa.int64()).to_pylist()
        assert values == sorted(values, reverse=True)


def test_rorder_never_imports_pandas(tmp_path: Any) -> None:
    """pandas costs tens of MB and half a second a process: one pass and many passes go without it."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import pyarrow as pa
        from deltalake import write_deltalake
        from deltaextras import rorder
        from deltaextras.core.arrays import int64_array

        ids = np.arange(20_000)
        table = pa.table({{
            "node_id": int64_array(ids % 13),
            "utc_time": int64_array(ids[::-1] * 1_000_000).cast(pa.timestamp("us", tz="UTC")),
            "node_id_range": int64_array(ids * 0),
        }})
        for budget, name in ((None, "one"), (20_000, "many")):
            uri = {str(tmp_path)!r} + "/" + name
            for k in range(3):
                write_deltalake(uri, table.slice(k * 5000, 5000), partition_by=["node_id_range"], mode="append")
            report = rorder(uri, sort_by="utc_time", max_workers=1, memory_budget=budget)
            assert report[0].status == "committed", report
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
