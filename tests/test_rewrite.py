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
    from deltaextras.ops.options import RorderOptions
    from deltaextras.ops.rewrite import PartitionRewriter

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
