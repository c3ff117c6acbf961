"""Partition-scoped snapshots and lean planning read the same table as the full snapshot does.

Every fixture table, and tables with each kind of checkpoint (classic, multi-part, v2 with sidecars) on
local storage, Azurite and moto S3: the partition's files (whole ``add`` actions), deletion vectors
(our parse against deltalake's), protocol, metadata and application markers equal the full snapshot's
view of that partition; the lean plan decides and messages as ``plan_table`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from services import Backend, fixtures_dir

from deltaextras.core.partition_snapshot import PartitionSnapshot, read_head
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.errors import DeltaExtrasError, InvalidArgumentError
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.rorder.plan import plan_table
from deltaextras.ops.rorder.plan_stream import _tail_arrow, _tail_python, plan_table_lean
from deltaextras.ops.rorder.rorder import rorder_single

FIXTURES = sorted(p.name for p in fixtures_dir().iterdir() if (p / "_delta_log").is_dir())


def _view(files: list[Any]) -> list[tuple[Any, str]]:
    return sorted((f.add.file_id, json.dumps(f.add.to_json(), sort_keys=True)) for f in files)


def _message(body: str) -> dict[str, Any]:
    """A message with its file list as a set (the order of the list carries no meaning)."""
    data = json.loads(body)
    if data.get("files") is not None:
        data["files"] = sorted(map(tuple, data["files"]))
    return data


def assert_same_view(uri: str, opts: dict[str, str] | None = None, by: str | None = None) -> int:
    """Every partition of every partition column (and the whole table) read both ways; returns the
    number of partition views compared."""
    full = TableSnapshot.load(uri, opts, cross_check=True)
    compared = 0
    for column in [None, *full.partition_columns]:
        values = [None] if column is None else list(full.partitions(column))
        for value in values:
            part = PartitionSnapshot.load(uri, opts, unit=lambda _h, c=column: c, value=value, cross_check=True)
            assert _view(part.files) == _view(full.partition_files(column, value)), (column, value)
            assert (part.version, part.protocol, part.metadata, part.txns) == (
                full.version,
                full.protocol,
                full.metadata,
                full.txns,
            )
            compared += 1
    by = (
        by
        or next(
            c
            for c in json.loads(full.metadata.schema_string or "{}")["fields"]
            if c["name"] not in full.partition_columns
        )["name"]
    )
    lean, old = plan_table_lean(uri, by=by, storage_options=opts), plan_table(uri, by=by, storage_options=opts)
    assert lean.to_dict() == old.to_dict()
    assert [_message(m.to_json()) for m in lean.messages()] == [_message(m.to_json()) for m in old.messages()]
    return compared


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_partitions_read_alone_equal_the_full_snapshot(name: str, fixture_table: Callable[[str], Path]) -> None:
    path = str(fixture_table(name))
    try:
        TableSnapshot.load(path)
    except DeltaExtrasError as exc:
        # A table we refuse is refused the same way, by the worker's read and by the planner.
        with pytest.raises(type(exc)):
            PartitionSnapshot.load(path, unit=lambda _h: None, value=None)
        with pytest.raises(type(exc)):
            plan_table_lean(path, by="x")
        return
    assert assert_same_view(path) >= 1


def _sensor_table(uri: str, opts: dict[str, str]) -> None:
    """Three partitions appended over several commits, one partition rewritten (layout tags, a txn),
    deletion vectors in another, and commits after the checkpoint."""
    for i in range(6):
        rows = [(r, r * 10 + (i * 3 + k) % 7, i * 10 + k) for r in (0, 1, 2) for k in range(4)]
        data = pa.table(
            {
                "node_id_range": [r for r, _, _ in rows],
                "node_id": [n for _, n, _ in rows],
                "seq": [s for _, _, s in rows],
            }
        )
        write_deltalake(uri, data, partition_by=["node_id_range"], mode="append", storage_options=opts or None)
    enable_deletion_vectors(uri, storage_options=opts)
    assert rorder_single({"path": uri, "partition_value": 0}, storage_options=opts).status == "committed"
    for seq in (11, 32):  # one row of a file each: deletion vectors
        delete(uri, f"node_id_range = 1 AND seq = {seq}", storage_options=opts)


def _checkpoint(uri: str, opts: dict[str, str], kind: str, backend: Backend) -> None:
    DeltaTable(uri, storage_options=opts or None).create_checkpoint()
    if kind == "multipart":
        store = backend.obstore_store(uri)
        import obstore

        version = DeltaTable(uri, storage_options=opts or None).version()
        classic = f"_delta_log/{version:020d}.checkpoint.parquet"
        table = pq.read_table(pa.BufferReader(bytes(obstore.get(store, classic).bytes())))
        half = table.num_rows // 2
        for n, piece in enumerate((table.slice(0, half), table.slice(half)), start=1):
            sink = pa.BufferOutputStream()
            pq.write_table(piece, sink)
            obstore.put(
                store, f"_delta_log/{version:020d}.checkpoint.{n:010d}.0000000002.parquet", sink.getvalue().to_pybytes()
            )
        obstore.delete(store, classic)
        obstore.delete(store, "_delta_log/_last_checkpoint")
    # Commits after the checkpoint: an append to every partition and a delete in the rewritten one.
    data = pa.table({"node_id_range": [0, 1, 2], "node_id": [5, 15, 25], "seq": [100, 101, 102]})
    write_deltalake(uri, data, partition_by=["node_id_range"], mode="append", storage_options=opts or None)
    delete(uri, "node_id_range = 0 AND seq = 100", storage_options=opts)
    delete(uri, "node_id_range = 1 AND seq = 13", storage_options=opts)  # a checkpoint file's vector replaced


@pytest.mark.parametrize("kind", ["classic", "multipart"])
def test_checkpointed_partitions_read_alone_equal_the_full_snapshot(backend: Backend, kind: str) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    _sensor_table(uri, opts)
    _checkpoint(uri, opts, kind, backend)
    full = TableSnapshot.load(uri, opts)
    assert any(f.dv for f in full.files), "the table must carry deletion vectors"
    assert assert_same_view(uri, opts, by="node_id") == 4
    # the commits after the checkpoint replayed in Arrow and action by action leave the same files
    head = read_head(TableStorage(uri, opts))
    arrow_live, arrow_named, _ = _tail_arrow(head, "node_id_range", ["node_id_range"], "")
    python_live, python_named = _tail_python(head)
    assert arrow_live is not None
    assert sorted(arrow_live.column("path").to_pylist()) == sorted(e.path for e in python_live.values())
    assert sorted(arrow_named.to_pylist()) == sorted(f"{p}\x00{d or ''}" for p, d in python_named)
    # the worker reads its partition alone and rewrites it as before
    report = rorder_single({"path": uri, "partition_value": 1}, storage_options=opts)
    assert report.status == "committed" and report.deleted_rows_purged > 0


def test_v2_checkpoint_with_sidecars_on_every_backend(backend: Backend) -> None:
    source = fixtures_dir() / "checkpoint-v2-table"
    uri = backend.new_table_uri()
    store = backend.obstore_store(uri)
    import obstore

    for path in source.rglob("*"):
        if path.is_file():
            obstore.put(store, path.relative_to(source).as_posix(), path.read_bytes())
    assert any(source.glob("_delta_log/_sidecars/*.parquet"))
    assert assert_same_view(uri, backend.storage_options) == 1


def test_a_partition_snapshot_does_not_answer_for_another_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"node_id": [1, 2], "node_id_range": [0, 1]}), partition_by=["node_id_range"])
    snap = PartitionSnapshot.load(uri, unit=lambda _h: "node_id_range", value="0")
    assert [f.partition_values for f in snap.files] == [{"node_id_range": "0"}]
    with pytest.raises(InvalidArgumentError, match="node_id_range=0 only"):
        snap.partition_files("node_id_range", "1")
