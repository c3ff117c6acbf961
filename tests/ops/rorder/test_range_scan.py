"""The streaming value-range planner gives exactly the plan and messages of planning from every live file
(checkpoint + commits after it, deletion vectors, the tiered layout, files without statistics)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from deltaextras.core.partition_snapshot import read_head
from deltaextras.core.storage import TableStorage
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.rorder.plan import plan_units
from deltaextras.ops.rorder.range_scan import scan_ranges
from deltaextras.ops.rorder.rorder import rorder


def _sensor(path: str, batches: int, first: int = 0, nodes: int = 60, **config: str) -> None:
    rng = np.random.default_rng(first)
    for b in range(first, first + batches):
        ids = np.tile(np.arange(nodes // 3) + (b % 3) * (nodes // 3), 10)
        write_deltalake(
            path,
            pa.table({"node_id": pa.array(ids, pa.int64()), "value": pa.array(rng.random(len(ids)))}),
            mode="append",
            configuration=config or None,
        )


def _cluster_by_node_id(path: str) -> None:
    """Mark the table clustered by node_id (the protocol and domain a clustering engine commits)."""
    version = DeltaTable(path).version() + 1
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["clustering", "domainMetadata"]}
    domain = {"domain": "delta.clustering", "configuration": json.dumps({"clusteringColumns": [["node_id"]]})}
    lines = [{"protocol": protocol}, {"domainMetadata": {**domain, "removed": False}}]
    (Path(path) / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def _facts(plan: Any) -> list[Any]:
    return [(u.label, u.action, u.reason, u.file_count, u.bytes, u.deleted_rows, u.tiers) for u in plan.units]


def _same_as_every_file(path: str, streamed: bool = True, **kw: Any) -> Any:
    """Plan streamed (files none / rewrite) and from every live file (files all): same units, messages."""
    head = read_head(TableStorage(path))
    by = kw["by"]
    assert (scan_ranges(head, head.physical(by), head.schema.column(by, "by").delta_type, "") is not None) == streamed
    every = plan_units(path, files="all", **kw)
    ranged = sorted(
        (u.value_range.low, u.value_range.high) for u in every.units if u.value_range and u.value_range.low is not None
    )
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranged))  # disjoint ranges
    if every.units and every.units[0].value_range is not None and not any(u.value_range.cuts for u in every.units):
        assert sum(u.tally.files for u in every.units) == len(DeltaTable(path).file_uris())  # each file once
    for lists in ("none", "rewrite"):
        plan = plan_units(path, files=lists, **kw)
        assert _facts(plan) == _facts(every)
        assert [m.to_json() for m in plan.messages()] == [m.to_json() for m in every.messages()]
        if lists == "rewrite":
            assert [[f.path for f in u.files] for u in plan.to_rewrite()] == [
                [f.path for f in u.files] for u in every.to_rewrite()
            ]
    return every


def test_checkpoint_and_commits_after_it(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor(path, 6)
    DeltaTable(path).create_checkpoint()
    _sensor(path, 3, first=6)
    plan = _same_as_every_file(path, by="node_id", target_file_size=6_000)
    assert len(plan.units) >= 3 and plan.to_rewrite()
    rorder(path, by="node_id", target_file_size=6_000, max_workers=1)
    _sensor(path, 2, first=9)  # settled units beside fresh files
    plan = _same_as_every_file(path, by="node_id", target_file_size=6_000)
    assert plan.skipped() and plan.to_rewrite()


def test_tiered_layout(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor(path, 6)
    rorder(path, by="node_id", target_file_size=6_000, layout="tiered", max_workers=1)
    DeltaTable(path).create_checkpoint()
    _sensor(path, 2, first=6)
    plan = _same_as_every_file(path, by="node_id", target_file_size=6_000, layout="tiered")
    assert any(u.tiers for u in plan.to_rewrite())


def test_deletion_vectors_in_checkpoint_and_after_it(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor(path, 6, **{"delta.enableDeletionVectors": "true"})
    rorder(path, by="node_id", target_file_size=6_000, max_workers=1)
    delete(path, "node_id < 3")
    DeltaTable(path).create_checkpoint()
    delete(path, "node_id >= 30 AND node_id < 33")
    plan = _same_as_every_file(path, by="node_id", target_file_size=6_000, max_deleted_rows_ratio=0.0)
    assert any(u.deleted_rows for u in plan.units) and plan.to_rewrite()
    _same_as_every_file(path, by="node_id", target_file_size=6_000)


def test_clustered_table(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor(path, 3)
    DeltaTable(path).create_checkpoint()
    _sensor(path, 1, first=3)
    _cluster_by_node_id(path)
    plan = _same_as_every_file(path, by="node_id", target_file_size=6_000)
    assert len(plan.units) > 1


def test_files_without_statistics_plan_from_every_file(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _sensor(path, 1, **{"delta.dataSkippingNumIndexedCols": "0"})
    DeltaTable(path).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "32"})
    _sensor(path, 3, first=1)
    _same_as_every_file(path, streamed=False, by="node_id", target_file_size=6_000)  # stays one unit
    _cluster_by_node_id(path)  # a clustered table reads the footer of a file without statistics
    plan = _same_as_every_file(path, streamed=False, by="node_id", target_file_size=6_000)
    assert len(plan.units) > 1


def test_statistics_that_are_not_one_object_each_plan_from_every_file(tmp_path: Path) -> None:
    """The scan parses every file's statistics as one stream of JSON objects; a file whose statistics do not
    start with ``{`` (valid JSON all the same) makes it hand over to planning from every file."""
    path = str(tmp_path / "t")
    _sensor(path, 3)
    DeltaTable(path).create_checkpoint()
    _sensor(path, 1, first=3)
    _cluster_by_node_id(path)
    log = Path(path) / "_delta_log"
    last = max(log.glob("*.json"))
    first = next(json.loads(x)["add"] for x in (log / f"{3:020d}.json").read_text().splitlines() if '"add"' in x)
    copy = dict(first, path="copy-" + first["path"], stats=" " + first["stats"])
    (Path(path) / copy["path"]).write_bytes((Path(path) / first["path"]).read_bytes())
    (log / f"{int(last.stem) + 1:020d}.json").write_text(json.dumps({"add": copy}) + "\n")
    plan = _same_as_every_file(path, streamed=False, by="node_id", target_file_size=6_000)
    assert len(plan.units) > 1
    assert sum(u.tally.files for u in plan.units) == len(DeltaTable(path).file_uris())


def test_range_planning_never_imports_pandas(tmp_path: Path) -> None:
    """Planning a clustered table (checkpoint and commits after it) loads no pandas: pyarrow imports it for
    any Python value handed to a compute function or an array conversion."""
    import subprocess
    import sys

    path = str(tmp_path / "t")
    _sensor(path, 3, **{"delta.enableDeletionVectors": "true"})
    rorder(path, by="node_id", target_file_size=6_000, max_workers=1)
    DeltaTable(path).create_checkpoint()
    _sensor(path, 2, first=3)
    _cluster_by_node_id(path)
    script = (
        "import sys; from deltaextras.ops.rorder.plan import plan_units; "
        "p = plan_units(sys.argv[1], by='node_id', target_file_size=6_000); "
        "assert p.units[0].value_range is not None and p.to_rewrite(); "
        "[tuple(u.listed() or ()) for u in p.units]; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
