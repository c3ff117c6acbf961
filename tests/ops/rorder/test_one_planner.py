"""Every caller plans with the one planner and sends the same messages: ``plan_messages``, ``plan_table``,
``rorder_setup_multi``, the orchestrator's ``dispatch``, ``enqueue --all``, ``deltaextras plan --messages`` and
``rorder`` (which partitions it rewrites and skips) agree with each other and with a reference plan made
independently of the planner's streaming scan: the whole table replayed into memory and cross-checked against
deltalake (``TableSnapshot.load(cross_check=True)``), grouped per partition and decided partition by partition.

Tables: every delta-rs fixture (a copy), in the full and the tiered layout, and tables made here with the
tiered layout, deletion vectors (above and under the purge threshold, some committed after a checkpoint),
``partitions=...`` filters, partitions skipped because they are in layout, and a partition whose file list
does not fit a message.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction
from oracle import sensor_batch
from services import fixtures_dir

from deltaextras import delete, enable_deletion_vectors, plan_messages, plan_table, rorder, rorder_setup_multi
from deltaextras.app.cli import main as cli_main
from deltaextras.app.config import AppConfig
from deltaextras.app.dispatch import dispatch
from deltaextras.app.enqueue import build_messages
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.errors import DeltaExtrasError, PartitionNotFoundError
from deltaextras.ops.rorder.message import MAX_MESSAGE_JSON, RorderMessage
from deltaextras.ops.rorder.options import RorderOptions
from deltaextras.ops.rorder.plan import in_layout, resolve_unit
from deltaextras.ops.rorder.tiers import select_files

FIXTURES = sorted(p.name for p in fixtures_dir().iterdir() if (p / "_delta_log").is_dir())
UNIT = "node_id_range"
TIERED = {"sort_by": "utc_time", "unique_by": "utc_time", "layout": "tiered"}


# ---------------------------------------------------------------------------- the reference plan
def reference_plan(uri: str, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The messages (files as sorted lists) and each partition's action, from the whole table in memory."""
    snap = TableSnapshot.load(uri, cross_check=True)
    options = RorderOptions.build(**{k: v for k, v in kw.items() if k != "partitions"})
    unit, by = resolve_unit(snap, options.by)
    groups = snap.partitions(unit) if unit is not None else ({None: list(snap.files)} if snap.files else {})
    if kw.get("partitions") is not None:
        wanted = [None if v is None else str(v) for v in kw["partitions"]]
        missing = [w for w in wanted if w not in groups]
        if missing:
            raise PartitionNotFoundError(f"partition {unit}={missing[0]}")
        groups = {w: groups[w] for w in wanted}
    messages, actions = [], {}
    for value in sorted(groups, key=_order):
        files = groups[value]
        if options.layout == "tiered":
            files = select_files(files, snap.schema, by, options).files
            rewrite = bool(files)
        else:
            rewrite = in_layout(snap, files, by, options) is None
        label = f"{unit}={value}" if unit is not None else "(table)"
        actions[label] = "rewrite" if rewrite else "skip"
        if not rewrite:
            continue
        msg = RorderMessage(
            path=snap.storage.uri,
            version=snap.version,
            partition_name=unit,
            partition_value=value,
            has_partition=unit is not None,
            files=tuple(sorted((f.path, f.size) for f in files)),
            options=dataclasses.replace(options, by=by),
        )
        if len(msg.to_json()) > MAX_MESSAGE_JSON:
            msg = msg.with_files(None)
        messages.append(msg.to_dict())
    return messages, actions


def _order(v: str | None) -> tuple[int, Any]:
    if v is None:
        return (2, "")
    try:
        return (0, float(v))
    except ValueError:
        return (1, v)


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    """A message with its file list sorted (the order of the list carries no meaning)."""
    out = dict(message)
    if out.get("files") is not None:
        out["files"] = sorted(map(list, out["files"]))
    return out


# ---------------------------------------------------------------------------- every caller
def _cli_args(uri: str, kw: dict[str, Any]) -> list[str]:
    args = ["plan", uri, "--messages"]
    if kw.get("by"):
        args += ["--by", kw["by"]]
    if kw.get("sort_by"):
        args += ["--sort-by", kw["sort_by"]]
    if kw.get("unique_by"):
        args += ["--unique-by", kw["unique_by"]]
    if kw.get("layout"):
        args += ["--layout", kw["layout"]]
    if kw.get("max_deleted_rows_ratio") is not None:
        args += ["--max-deleted-rows-ratio", str(kw["max_deleted_rows_ratio"])]
    for v in kw.get("partitions") or []:
        args += ["--partition", str(v)]
    return args


def callers(uri: str, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, list[dict[str, Any]]]:
    """The messages each caller sends (or would send) for ``uri``, normalised."""
    sent: dict[str, list[dict[str, Any]]] = {
        "plan_messages": plan_messages(uri, **kw),
        "plan_table": [m.to_dict() for m in plan_table(uri, **kw).messages()],
    }
    capsys.readouterr()
    assert cli_main(_cli_args(uri, kw)) == 0
    sent["cli plan"] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    if kw.get("partitions") is None:
        table = {"uri": uri, **{k: v for k, v in kw.items() if v is not None}}
        bodies: list[str] = []
        report = dispatch(AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([table])}), bodies.extend)
        assert not report.failed, report.line()
        sent["dispatch"] = [json.loads(b) for b in bodies]
        options = {k: v for k, v in kw.items() if v is not None}
        bodies = build_messages(uri, all_partitions=True, options=options, env={})
        sent["enqueue --all"] = [json.loads(b) for b in bodies]
    return {name: [_normal(m) for m in msgs] for name, msgs in sent.items()}


def assert_one_plan(uri: str, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, str]:
    """Every caller sends the reference plan's messages; ``rorder_setup_multi`` lists each partition's whole
    file list. Returns the reference actions per partition label."""
    expected, actions = reference_plan(uri, **kw)
    expected = [_normal(m) for m in expected]
    for name, got in callers(uri, capsys, **kw).items():
        assert got == expected, name
    version, table_uri, name, by_group = rorder_setup_multi(uri, **kw)
    assert [m["partition_value"] for m in expected if "partition_value" in m] == (
        by_group.column("partition_values").to_pylist() if name is not None else []
    )
    snap = TableSnapshot.load(uri)
    for row in by_group.to_pylist():
        files = sorted(zip(row["path_list"], row["size_bytes_list"], strict=True))
        message = next(m for m in expected if m.get("partition_value") == row["partition_values"])
        if message.get("files") is not None:
            assert [list(f) for f in files] == message["files"]
        elif kw.get("layout") != "tiered":
            whole = snap.partition_files(name, row["partition_values"])
            assert files == sorted((f.path, f.size) for f in whole)
    assert version == snap.version and table_uri == snap.storage.uri
    return actions


def _first_data_column(uri: str) -> str:
    snap = TableSnapshot.load(uri, for_writing=False)
    fields = json.loads(snap.metadata.schema_string or "{}")["fields"]
    return next(c["name"] for c in fields if c["name"] not in snap.partition_columns)


# ---------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("layout", ["full", "tiered"])
@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_is_planned_alike_by_every_caller(
    name: str, layout: str, fixture_table: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(fixture_table(name))
    kw: dict[str, Any] = {"by": _first_data_column(uri), "layout": layout}
    try:
        reference_plan(uri, **kw)
    except DeltaExtrasError as exc:  # a fixture we cannot plan: every caller refuses it the same way
        for call in (plan_messages, plan_table, rorder_setup_multi):
            with pytest.raises(type(exc)):
                call(uri, **kw)
        return
    assert_one_plan(uri, capsys, **kw)


# ---------------------------------------------------------------------------- tables made here
def _append(uri: str, batch: pa.Table) -> None:
    write_deltalake(uri, batch, partition_by=[UNIT], mode="append")


def _sensor_table(uri: str, partitions: int, appends: int, rows: int = 40) -> None:
    rng = np.random.default_rng(7)
    for _ in range(appends):
        for p in range(partitions):
            _append(uri, sensor_batch(rng, 5, rows, node_range=p, base=p * 10))


def test_skipped_and_rewritten_partitions_with_deletion_vectors_and_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    _sensor_table(uri, partitions=4, appends=3)
    rorder(uri, partitions=[1, 2, 3], sort_by="utc_time", max_workers=1)  # 1, 2, 3 in layout; 0 not
    values = sorted(DeltaTable(uri).to_pyarrow_table(filters=[(UNIT, "=", 3)]).column("data_values").to_pylist())
    enable_deletion_vectors(uri)
    DeltaTable(uri).create_checkpoint()
    delete(uri, "node_id = 21", inline_max_bytes=0)  # one node of five in partition 2: above the threshold
    few = delete(uri, f"{UNIT} = 3 AND data_values <= {values[1]!r}", inline_max_bytes=0)  # 2 rows of 120: under
    assert few.rows_deleted == 2
    under = assert_one_plan(uri, capsys, sort_by="utc_time", max_deleted_rows_ratio=0.05)
    assert under == {f"{UNIT}=0": "rewrite", f"{UNIT}=1": "skip", f"{UNIT}=2": "rewrite", f"{UNIT}=3": "skip"}
    actions = assert_one_plan(uri, capsys, sort_by="utc_time")  # by default any deletion vector is purged
    assert actions == {**under, f"{UNIT}=3": "rewrite"}
    assert_one_plan(uri, capsys, sort_by="utc_time", partitions=[3, "0"])
    assert_one_plan(uri, capsys, sort_by="utc_time", partitions=["1"])
    report = rorder(uri, sort_by="utc_time", max_workers=1)
    assert {r.partition: r.status for r in report.partitions} == {
        label: "committed" if a == "rewrite" else "skipped" for label, a in actions.items()
    }
    assert all(a == "skip" for a in assert_one_plan(uri, capsys, sort_by="utc_time").values())


def test_a_missing_partition_is_refused_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "t")
    _sensor_table(uri, partitions=2, appends=1)
    errors = []
    for call in (plan_messages, plan_table, rorder_setup_multi):
        with pytest.raises(PartitionNotFoundError) as exc:
            call(uri, partitions=[0, 7])
        errors.append(str(exc.value))
    assert errors == [f"partition {UNIT}=7 has no live files at version 1; known values: 0, 1"] * 3
    assert cli_main(["plan", uri, "--partition", "7"]) != 0


def test_tiered_layout_with_fresh_and_quiet_partitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "t")
    _sensor_table(uri, partitions=3, appends=2)
    rorder(uri, max_workers=1, **TIERED)
    rng = np.random.default_rng(11)
    for p in (0, 2):  # fresh files in 0 and 2; 1 stays one settled run
        _append(uri, sensor_batch(rng, 5, 30, node_range=p, base=p * 10))
    actions = assert_one_plan(uri, capsys, **TIERED)
    assert actions == {f"{UNIT}=0": "rewrite", f"{UNIT}=1": "skip", f"{UNIT}=2": "rewrite"}
    assert_one_plan(uri, capsys, partitions=[2, 1], **TIERED)
    (unit,) = plan_table(uri, partitions=[0], **TIERED).partitions
    assert unit.tiers is not None and unit.tiers["fresh_files"] == 1


def test_unpartitioned_table_and_a_file_list_too_long_for_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = str(tmp_path / "flat")
    for i in range(3):
        write_deltalake(flat, pa.table({"k": [i, 9 - i], "v": [1.0, 2.0]}), mode="append")
    assert assert_one_plan(flat, capsys, by="k") == {"(table)": "rewrite"}
    wide = str(tmp_path / "wide")
    _many_files(wide, 450)  # partition 0: their paths do not fit one message
    _append(wide, pa.table({"node_id": pa.array([11, 10], pa.int64()), UNIT: pa.array([1, 1], pa.int64())}))
    _append(wide, pa.table({"node_id": pa.array([12], pa.int64()), UNIT: pa.array([1], pa.int64())}))
    messages = plan_messages(wide)
    assert [(m["partition_value"], m.get("files") is None) for m in messages] == [("0", True), ("1", False)]
    assert_one_plan(wide, capsys)


def _many_files(uri: str, n: int) -> None:
    """Partition 0 of ``n`` one-row files, committed at once."""
    schema = pa.schema([("node_id", pa.int64()), (UNIT, pa.int64())])
    DeltaTable.create(uri, schema=schema, partition_by=[UNIT])
    (Path(uri) / f"{UNIT}=0").mkdir()
    adds = []
    for i in range(n):
        rel = f"{UNIT}=0/part-{i:05d}-{'0' * 36}-c000.snappy.parquet"
        pq.write_table(pa.table({"node_id": pa.array([i], pa.int64())}), Path(uri) / rel)
        stats = {"numRecords": 1, "minValues": {"node_id": i}, "maxValues": {"node_id": i}, "nullCount": {"node_id": 0}}
        size = (Path(uri) / rel).stat().st_size
        adds.append(AddAction(rel, size, {UNIT: "0"}, 1_700_000_000_000, True, json.dumps(stats)))
    DeltaTable(uri).create_write_transaction(adds, mode="append", schema=schema, partition_by=[UNIT])
