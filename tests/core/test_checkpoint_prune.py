"""Superseded checkpoints are removed, on local disk, Azurite and moto S3: the oldest and the newest stay,
every version still reads the same through deltalake, and nothing goes when a commit between them is
missing, when the checkpoints were superseded more recently than the time readers are given (however old
they are themselves), or when ``_last_checkpoint`` names one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from oracle import checksum, content_checksum

from deltaextras.core.checkpoint_prune import prune_checkpoints
from deltaextras.core.log import LOG_DIR, list_log
from deltaextras.core.storage import TableStorage


def _table(uri: str, opts: dict[str, str], versions: int) -> list[tuple[int, str]]:
    """A table whose every version has a checkpoint; the checksum of each version."""
    for v in range(versions):
        write_deltalake(uri, pa.table({"x": [v, v + 100]}), mode="append", storage_options=opts or None)
        DeltaTable(uri, storage_options=opts or None).create_checkpoint()
    return [_at(uri, opts, v) for v in range(versions)]


def _at(uri: str, opts: dict[str, str], version: int) -> tuple[int, str]:
    return content_checksum(DeltaTable(uri, version=version, storage_options=opts or None).to_pyarrow_table())


def test_superseded_checkpoints_go_and_every_version_reads_the_same(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), dict(backend.storage_options)
    before = _table(uri, opts, 6)
    storage = TableStorage(uri, opts)
    assert prune_checkpoints(storage, 5) == []  # younger than the time readers are given
    assert sorted(list_log(storage).checkpoints) == [0, 1, 2, 3, 4, 5]
    gone = prune_checkpoints(storage, 5, keep_seconds=0)
    assert gone == [f"{LOG_DIR}{v:020d}.checkpoint.parquet" for v in range(1, 5)]
    assert sorted(list_log(storage).checkpoints) == [0, 5]
    assert [_at(uri, opts, v) for v in range(6)] == before
    assert checksum(uri, opts or None) == before[-1]


def test_nothing_goes_when_a_commit_is_missing_or_the_hint_names_it(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), dict(backend.storage_options)
    _table(uri, opts, 5)
    storage = TableStorage(uri, opts)
    storage.put(LOG_DIR + "_last_checkpoint", json.dumps({"version": 2, "size": 4}).encode())
    assert prune_checkpoints(storage, 4, keep_seconds=0) == [f"{LOG_DIR}{v:020d}.checkpoint.parquet" for v in (1, 3)]
    storage.delete(f"{LOG_DIR}{3:020d}.json")  # as if log cleanup had removed it: 0 -> 4 cannot be replayed
    write_deltalake(uri, pa.table({"x": [9]}), mode="append", storage_options=opts or None)
    DeltaTable(uri, storage_options=opts or None).create_checkpoint()
    assert prune_checkpoints(storage, 5, keep_seconds=0) == []
    assert sorted(list_log(storage).checkpoints) == [0, 2, 4, 5]


def test_an_old_checkpoint_superseded_a_moment_ago_stays(tmp_path: Path) -> None:
    """A quiet table: checkpoint 2 was written two hours ago and was the newest until a moment ago, so a
    reader that listed the log then may be reading it now; checkpoint 1, superseded two hours ago, goes."""
    uri = str(tmp_path / "t")
    _table(uri, {}, 4)
    old = time.time() - 7200
    for v in (0, 1, 2):
        os.utime(Path(uri) / f"{LOG_DIR}{v:020d}.checkpoint.parquet", (old, old))
    assert prune_checkpoints(TableStorage(uri), 3) == [f"{LOG_DIR}{1:020d}.checkpoint.parquet"]
    assert sorted(list_log(TableStorage(uri)).checkpoints) == [0, 2, 3]


def test_a_run_that_read_a_checkpoint_pruned_since_is_told_to_retry(tmp_path: Path) -> None:
    """A run reads the log's head, a newer checkpoint lands and a cleanup (ours or another engine's) removes
    the one the run is reading: reading its files is a retryable storage error, and the next attempt reads
    the log again. A checkpoint missing with none newer is a damaged table."""
    from deltaextras.core.partition_snapshot import PartitionSnapshot, read_head
    from deltaextras.errors import CorruptDataError, StorageError

    uri = str(tmp_path / "t")
    _table(uri, {}, 3)
    storage = TableStorage(uri)
    head = read_head(storage)  # the run's head: checkpoint 2 is the newest
    for v in (3, 4):
        write_deltalake(uri, pa.table({"x": [v, v + 100]}), mode="append")
    DeltaTable(uri).create_checkpoint()
    os.remove(tmp_path / "t" / LOG_DIR / f"{2:020d}.checkpoint.parquet")
    try:
        PartitionSnapshot(head, None, None)
        raise AssertionError("the pruned checkpoint was read")
    except StorageError as exc:
        assert exc.retryable and "replaced by checkpoint 4" in str(exc)
    assert len(PartitionSnapshot(read_head(storage), None, None).files) == 5  # the next attempt

    head = read_head(storage)
    os.remove(tmp_path / "t" / LOG_DIR / f"{4:020d}.checkpoint.parquet")
    try:
        PartitionSnapshot(head, None, None)
        raise AssertionError("the missing checkpoint was read")
    except CorruptDataError as exc:
        assert not exc.retryable and "damaged" in str(exc)
