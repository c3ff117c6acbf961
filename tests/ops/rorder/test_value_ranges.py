"""Value-range units (deltaextras.ops.rorder.value_ranges): disjoint ranges with every row in exactly one unit
(property test), the version 2 work message beside every version 1 message, an unpartitioned table
rewritten by range units with identical content, files without statistics placed by their footer or
refused by name, and a week of growth in which the node count doubles with units staying within twice
the target size."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import checksum

from deltaextras.core.actions import Add
from deltaextras.core.snapshot import LiveFile, TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.errors import MessageError, UnsupportedFeatureError
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.plan import plan_table
from deltaextras.ops.rorder.plan_stream import plan_table_lean
from deltaextras.ops.rorder.rorder import rorder, rorder_single
from deltaextras.ops.rorder.value_ranges import FileBounds, ValueRange, file_bounds, footer_bounds, plan_units

# ------------------------------------------------------------------------------------ property
files_strategy = st.lists(
    st.tuples(
        st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=12),  # the file's rows
        st.integers(1, 400),  # size
        st.integers(-1, 3),  # run code (-1: fresh)
    ),
    min_size=1,
    max_size=40,
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(files=files_strategy, target=st.integers(1, 2000))
def test_units_are_disjoint_and_every_row_is_in_exactly_one(files: list[Any], target: int) -> None:
    rows = [r for r, _, _ in files]
    values = [[v for v in r if v is not None] for r in rows]
    bounds = FileBounds.of(
        [f"f{i}" for i in range(len(files))],
        [s for _, s, _ in files],
        [len(r) for r in rows],
        [min(v) if v else None for v in values],
        [max(v) if v else None for v in values],
        [sum(1 for x in r if x is None) for r in rows],
    )
    run = np.array([c for _, _, c in files], dtype=np.int64)
    units = plan_units(bounds, "k", target=target, run=run)
    ranges = [vr for vr, _ in units]
    # disjoint ranges, in value order; nulls belong to the lowest unit only
    valued = [r for r in ranges if r.low is not None]
    assert all(a.high < b.low for a, b in itertools.pairwise(valued))
    assert sum(r.nulls for r in ranges) <= 1 and (not ranges[0].nulls or ranges[0] is ranges[0])
    if any(r.nulls for r in ranges):
        assert ranges[0].nulls
    # every row of the table in exactly one unit's range
    for r in rows:
        for v in r:
            assert sum(u.overlaps(v, v, v is None) for u in ranges) == 1, (v, ranges)
    # every file either rewritten by exactly one unit, or (settled) left inside a cut unit's range
    listed = [int(i) for _, ix in units for i in ix]
    assert len(listed) == len(set(listed))
    for i in set(range(len(files))) - set(listed):
        owner = [vr for vr in ranges if vr.overlaps(bounds.low[i], bounds.high[i], bounds.nulls[i] > 0)]
        assert len(owner) == 1 and owner[0].cuts and run[i] >= 0
    for vr, ix in units:
        for i in ix:
            assert vr.overlaps(bounds.low[i], bounds.high[i], bounds.nulls[i] > 0)
            lo_ok = bounds.low[i] is None or vr.low <= bounds.low[i]
            hi_ok = bounds.high[i] is None or bounds.high[i] <= vr.high
            assert lo_ok and hi_ok
        if vr.cuts:
            assert all(run[i] < 0 for i in ix) and list(vr.cuts) == sorted(set(vr.cuts))


# ------------------------------------------------------------------------------------- messages
def test_range_message_round_trips_and_old_messages_still_read() -> None:
    m = RorderMessage.from_dict(
        {"message_version": 2, "path": "/t", "version": 4, "range": {"column": "k", "low": 0, "high": 9}}
    )
    assert m.value_range == ValueRange("k", 0, 9) and m.options.by == "k"
    assert RorderMessage.decode(m.encode()) == m
    assert m.to_dict()["message_version"] == 2 and m.describe() == "/t[k in [0, 9]]@4"
    old = RorderMessage.from_dict({"path": "/t", "partition_value": 3})
    assert old.to_dict()["message_version"] == 1 and old.value_range is None
    assert RorderMessage.from_dict({"message_version": 1, "path": "/t"}).value_range is None


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"message_version": 2, "path": "/t"}, "needs 'range'"),
        ({"path": "/t", "range": {"column": "k", "low": 0, "high": 1}}, "needs message_version 2"),
        (
            {"message_version": 2, "path": "/t", "partition_value": 1, "range": {"column": "k", "low": 0, "high": 1}},
            "not both",
        ),
        ({"message_version": 2, "path": "/t", "range": {"column": "k", "low": 0, "high": "z"}}, "low <= high"),
        ({"message_version": 2, "path": "/t", "range": {"column": "k", "low": 0, "high": 2**64}}, "64-bit"),
        ({"message_version": 2, "path": "/t", "range": {"column": "k", "low": 0, "high": 9, "cuts": [5, 3]}}, "cuts"),
        ({"message_version": 2, "path": "/t", "by": "j", "range": {"column": "k", "low": 0, "high": 9}}, "not the by"),
        ({"message_version": 3, "path": "/t"}, "not supported"),
    ],
)
def test_bad_range_messages_are_one_line_errors(body: dict[str, Any], needle: str) -> None:
    with pytest.raises(MessageError, match=needle) as info:
        RorderMessage.from_dict(body)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------- unpartitioned tables
def _sensor_table(path: str, batches: int = 6, nodes: int = 120, rows: int = 20, seed: int = 0) -> None:
    """Batches of a third of the nodes each (as three sites would send them)."""
    rng = np.random.default_rng(seed)
    third = max(1, nodes // 3)
    for b in range(batches):
        n = third * rows
        write_deltalake(
            path,
            pa.table(
                {
                    "node_id": pa.array(np.tile(np.arange(third) + (b % 3) * third, rows), pa.int64()),
                    "utc_time": pa.array(np.full(n, b), pa.int64()),
                    "value": pa.array(rng.random(n)),
                }
            ),
            mode="append",
        )


def test_unpartitioned_table_rewritten_by_range_units(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor_table(path)
    before = checksum(path)
    sizes = [f.size for f in TableSnapshot.load(path).files]
    target = 2 * max(sizes) + 1  # two batches of one site per unit
    full = plan_table(path, by="node_id", target_file_size=target)
    lean = plan_table_lean(path, by="node_id", target_file_size=target)
    assert [m.to_json() for m in full.messages()] == [m.to_json() for m in lean.messages()]
    report = rorder(path, by="node_id", target_file_size=target, max_workers=2)
    assert len(report.partitions) >= 3 and all(r.status == "committed" for r in report)
    assert all(r.partition.startswith("node_id in [") for r in report)
    assert checksum(path) == before
    snap = TableSnapshot.load(path)
    ranges = sorted((f.stats["minValues"]["node_id"], f.stats["maxValues"]["node_id"]) for f in snap.files)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert all("clusteringProvider" not in f.add.extra for f in snap.files)  # the table is not clustered
    again = plan_table(path, by="node_id", target_file_size=target)
    assert not again.to_rewrite() and len(again.partitions) >= 3
    # one unit's rerun is already done; a message for a range whose files are gone finds nothing
    msg = full.messages()[0]
    assert rorder_single(msg).status == "skipped"


def test_a_small_unpartitioned_table_stays_one_unit(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor_table(path, batches=2, nodes=10, rows=2)
    plan = plan_table(path, by="node_id")
    assert [p.label for p in plan.partitions] == ["(table)"]
    assert "range" not in plan.messages()[0].to_dict()


def test_file_without_statistics_placed_by_its_footer(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(
        path,
        pa.table({"node_id": pa.array([5, 3, 9], pa.int64())}),
        configuration={"delta.dataSkippingNumIndexedCols": "0"},
    )
    snap = TableSnapshot.load(path)
    assert "minValues" not in snap.files[0].stats or not snap.files[0].stats["minValues"]
    assert file_bounds(snap.files, "node_id", "long", None) is None  # not clustered: stays one unit
    b = file_bounds(snap.files, "node_id", "long", snap.storage)
    assert b is not None and (b.low[0], b.high[0], int(b.nulls[0])) == (3, 9, 0)


def test_file_without_any_statistics_is_refused_by_name(tmp_path: Path) -> None:
    pq.write_table(pa.table({"node_id": [1, 2]}), tmp_path / "bare.parquet", write_statistics=False)
    storage = TableStorage(str(tmp_path))
    f = LiveFile(Add(path="bare.parquet", size=(tmp_path / "bare.parquet").stat().st_size), {}, storage.uri)
    with pytest.raises(UnsupportedFeatureError, match=r"bare.parquet has no statistics for 'node_id'"):
        footer_bounds(storage, f, "node_id", "long")


def test_a_week_of_growth_keeps_units_within_twice_the_target(tmp_path: Path) -> None:
    """Seven days of 5-minute-style batches of every node, the node count doubling over the week; rorder
    runs twice a day (a cut round, then a merge round). No user action: units split and merge."""
    path = str(tmp_path / "t")
    target = 150_000
    rng = np.random.default_rng(7)
    expected_rows = 0
    largest: list[float] = []
    for day in range(7):
        nodes = int(40 * 2 ** (day / 6))
        for b in range(4):
            n = nodes * 30
            expected_rows += n
            write_deltalake(
                path,
                pa.table(
                    {
                        "node_id": pa.array(np.repeat(np.arange(nodes), 30), pa.int64()),
                        "utc_time": pa.array(np.full(n, day * 100 + b), pa.int64()),
                        "value": pa.array(rng.random(n)),
                    }
                ),
                mode="append",
            )
        for _ in range(2):
            plan = plan_table(path, by="node_id", target_file_size=target)
            for p in plan.to_rewrite():
                if p.value_range is None or not p.value_range.cuts:  # a cut unit reads fresh files only
                    assert p.bytes <= 2 * target, (day, p.label, p.bytes)
            rorder(path, by="node_id", target_file_size=target, max_workers=1)
        settled = plan_table(path, by="node_id", target_file_size=target)
        largest.append(max(p.bytes for p in settled.partitions) / target)
    assert max(largest) <= 2.0
    assert len(plan_table(path, by="node_id", target_file_size=target).partitions) >= 3  # the units split
    table = DeltaTable(path).to_pyarrow_table()
    assert table.num_rows == expected_rows
    assert json.dumps(sorted(set(table.column("node_id").to_pylist()))) == json.dumps(list(range(80)))


# ------------------------------------------------------------------------------------- adapters
def test_cli_and_worker_handle_range_units(tmp_path: Path, capsys: Any) -> None:
    from deltaextras.app import work
    from deltaextras.app.cli import main
    from deltaextras.app.config import AppConfig
    from deltaextras.app.dispatch import dispatch

    path = str(tmp_path / "t")
    _sensor_table(path)
    before = checksum(path)
    target = str(2 * max(f.size for f in TableSnapshot.load(path).files) + 1)
    assert main(["plan", path, "--by", "node_id", "--target-file-size", target]) == 0
    out = capsys.readouterr().out
    assert "units by value ranges" in out and "node_id in [0, 39]" in out
    # the orchestrator sends range messages; the worker commits them
    config = AppConfig.from_env(
        {"DELTAEXTRAS_TABLES": json.dumps([{"uri": path, "by": "node_id", "target_file_size": int(target)}])}
    )
    sent: list[str] = []
    dispatch(config, lambda bodies: sent.extend(bodies) or [None] * len(bodies))
    assert len(sent) == 3
    outcomes = [work.handle(body, config) for body in sent]
    assert [o.status for o in outcomes] == ["committed"] * 3
    assert outcomes[0].partition == "node_id in [0, 39]"
    assert checksum(path) == before
    assert main(["run", path, "--by", "node_id", "--target-file-size", target]) == 0
    assert "0 committed" in capsys.readouterr().out


def test_spark_task_runs_range_messages(tmp_path: Path) -> None:
    """What each rorder_spark task runs (run_message_batch), fed range messages."""
    from deltaextras import plan_messages
    from deltaextras.app.spark import run_message_batch

    path = str(tmp_path / "t")
    _sensor_table(path)
    before = checksum(path)
    target = 2 * max(f.size for f in TableSnapshot.load(path).files) + 1
    messages = plan_messages(path, by="node_id", target_file_size=target)
    assert len(messages) == 3 and all("range" in m for m in messages)
    batch = pa.record_batch({"message": [json.dumps(m) for m in messages]})
    reports = run_message_batch(batch, None).to_pylist()
    assert [r["status"] for r in reports] == ["committed"] * 3
    assert reports[0]["partition"] == "node_id in [0, 39]"
    assert checksum(path) == before
