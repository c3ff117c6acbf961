"""Regression tests, black-box, for three ways the writers broke tables:

1. an ambiguous commit (the log entry landed, the client saw a failure) made the writer delete its own
   committed files -- covered network-level by ``test_commit_faults.py``;
2. ``enable_deletion_vectors`` on an unpartitioned table with a checkpoint wrote ``partitionColumns`` as
   a JSON object, and deltalake could no longer read the table;
3. ``delete "x = 5"`` committed after a concurrent ``UPDATE ... SET x = 5 WHERE id = 1`` and left the
   row ``{id: 1, x: 5}`` behind: the delete is WriteSerializable, so it must either raise a conflict or
   delete that row too. The winner commits between our read and our commit through the public
   ``hooks={"before_commit": fn}`` tracing hook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from txn_support import assert_files_exist

import deltaextras


def _rows(uri: str) -> list[tuple[int, int]]:
    t = pa.table(DeltaTable(uri).scan())
    return sorted(zip(t.column("id").to_pylist(), t.column("x").to_pylist(), strict=True))


def _metadata_actions(uri: str) -> list[dict]:
    out = []
    for path in sorted(Path(uri, "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            if line.strip() and "metaData" in json.loads(line):
                out.append(json.loads(line)["metaData"])
    return out


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_enable_deletion_vectors_after_a_checkpoint(tmp_path: Path, partitioned: bool, spark: Any) -> None:
    uri = str(tmp_path / "t")
    first = pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([1, 5], pa.int64())})
    second = pa.table({"id": pa.array([3], pa.int64()), "x": pa.array([5], pa.int64())})
    parts = ["x"] if partitioned else None
    write_deltalake(uri, first, partition_by=parts)
    write_deltalake(uri, second, mode="append", partition_by=parts)
    DeltaTable(uri).create_checkpoint()

    version = deltaextras.enable_deletion_vectors(uri)

    assert version is not None
    dt = DeltaTable(uri)
    assert _rows(uri) == [(1, 1), (2, 5), (3, 5)]
    assert dt.metadata().partition_columns == (["x"] if partitioned else [])
    assert dt.metadata().configuration.get("delta.enableDeletionVectors") == "true"
    meta = _metadata_actions(uri)[-1]  # the log's own JSON: lists stay lists, maps stay maps
    assert meta["partitionColumns"] == (["x"] if partitioned else []), meta["partitionColumns"]
    assert isinstance(meta["configuration"], dict) and isinstance(meta["format"]["options"], dict)
    # the table stays writable and readable: a deletion-vector delete, a delta-rs append, a new checkpoint
    report = deltaextras.delete(uri, "id = 2", mode="deletion_vectors")
    assert report.rows_deleted == 1
    write_deltalake(uri, pa.table({"id": [4], "x": [7]}), mode="append", partition_by=parts)
    DeltaTable(uri).create_checkpoint()
    assert _rows(uri) == [(1, 1), (3, 5), (4, 7)]
    assert_files_exist(uri, None)
    sail = spark.read.format("delta").load(uri).toArrow()  # a second reader: Sail, vectors applied
    assert sorted(zip(sail.column("id").to_pylist(), sail.column("x").to_pylist(), strict=True)) == _rows(uri)


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors"])
def test_delete_after_a_concurrent_update_into_its_predicate(tmp_path: Path, mode: str) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64()), "x": pa.array([1], pa.int64())}))
    write_deltalake(uri, pa.table({"id": pa.array([2], pa.int64()), "x": pa.array([5], pa.int64())}), mode="append")
    if mode == "deletion_vectors":
        deltaextras.enable_deletion_vectors(uri)
    updates: list[int] = []

    def update_first(version: int) -> None:
        if not updates:
            DeltaTable(uri).update(predicate="id = 1", updates={"x": "5"})
            updates.append(version)

    try:
        report = deltaextras.delete(uri, "x = 5", mode=mode, hooks={"before_commit": update_first})
    except deltaextras.CommitConflictError:
        committed = False
    else:
        committed = report.commit_version is not None
    assert updates, "the concurrent UPDATE never ran"
    rows = _rows(uri)
    if committed:
        assert rows == [], f"the delete committed after the UPDATE but left {rows}"
    else:
        assert rows == [(1, 5), (2, 5)], f"the delete raised, yet the table holds {rows}"
    assert_files_exist(uri, None)
    # the same delete again converges on the serial result: UPDATE, then DELETE
    deltaextras.delete(uri, "x = 5", mode=mode)
    assert _rows(uri) == []
