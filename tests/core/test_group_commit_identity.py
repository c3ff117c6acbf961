"""State a worker process keeps across units (group commit's commits read earlier, the watch of a table's
units) belongs to one table: its location, the storage options that reach it and its ``metaData.id``.

A function-app worker is a long-lived process that serves many tables and many lifetimes of a table. Here
one process first runs a group unit on a table while an append lands (the committer reads that commit), then
meets a different table at the same version number: the same path deleted and created again, or the same
container path in another account (another endpoint) holding a copy of the first table's log. On that table
a deletion-vector DELETE of some of the unit's input rows lands between the unit's read and its publish.
The unit must be decided against that table's own commit: the deleted rows stay deleted, no row doubles.
Content is read back through deltalake's reader, which applies deletion vectors.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from oracle import content_checksum, scan
from services import MotoServer

from deltaextras.core.storage import TableStorage
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

ROWS = pa.table({"k": [3, 2, 1, 6, 5, 4], "k_range": [0] * 6, "b": [0, 0, 0, 1, 1, 1]})


def _create(uri: str, options: dict[str, str] | None = None) -> None:
    """Three versions: two appends to one partition, then deletion vectors enabled."""
    write_deltalake(uri, ROWS.slice(0, 3), partition_by=["k_range"], mode="append", storage_options=options)
    write_deltalake(uri, ROWS.slice(3, 3), partition_by=["k_range"], mode="append", storage_options=options)
    enable_deletion_vectors(uri, storage_options=options)


def _group_unit(uri: str, options: dict[str, str] | None, meanwhile: Any) -> Any:
    """Plans the table's one unit and runs it through group commit; ``meanwhile()`` commits after the rewrite
    read the inputs and before the unit is staged."""
    (message,) = plan_messages(uri, storage_options=options)
    return rorder_single(
        {**message, "commit": "group"}, storage_options=options, hooks={"after_rewrite": lambda _o: meanwhile()}
    )


def _append(uri: str, options: dict[str, str] | None) -> Any:
    batch = pa.table({"k": [100], "k_range": [1], "b": [9]})
    return lambda: write_deltalake(uri, batch, partition_by=["k_range"], mode="append", storage_options=options)


def _expected_after_delete() -> tuple[int, str]:
    keep = [i for i, k in enumerate(ROWS.column("k").to_pylist()) if k != 2]
    return content_checksum(ROWS.take(keep))


def test_a_table_created_again_at_the_same_path_is_decided_against_its_own_commits(tmp_path: Path) -> None:
    path = str(tmp_path / "p")
    _create(path)
    first = _group_unit(path, None, _append(path, None))  # the committer reads the append at version 3
    assert first.status == "committed" and first.commit_version == 4
    shutil.rmtree(path)

    _create(path)  # the same path, a new table: versions 0..2 again, a new metaData.id
    report = _group_unit(path, None, lambda: delete(path, "k = 2"))  # a deletion vector at version 3
    assert report.status == "committed"
    got = scan(path)
    assert sorted(got.column("k").to_pylist()) == [1, 3, 4, 5, 6]
    assert content_checksum(got.select(ROWS.column_names)) == _expected_after_delete()


def test_a_table_restored_from_a_backup_is_decided_against_its_restored_log(tmp_path: Path) -> None:
    """A restore keeps the table's id but cuts its log back: the versions to come are other commits."""
    path, backup = str(tmp_path / "p"), str(tmp_path / "backup")
    _create(path)
    shutil.copytree(path, backup)
    first = _group_unit(path, None, _append(path, None))  # the committer reads the append at version 3
    assert first.status == "committed" and first.commit_version == 4
    shutil.rmtree(path)
    shutil.copytree(backup, path)  # the same id, versions 0..2

    report = _group_unit(path, None, lambda: delete(path, "k = 2"))  # a deletion vector at version 3
    assert report.status == "committed"
    got = scan(path)
    assert sorted(got.column("k").to_pylist()) == [1, 3, 4, 5, 6]
    assert content_checksum(got.select(ROWS.column_names)) == _expected_after_delete()


@pytest.fixture
def two_endpoints(tmp_path: Path) -> Any:
    """Two moto servers: one bucket name, one table path, two places (as two accounts would be)."""
    servers = [MotoServer.start(tmp_path / name) for name in ("a", "b")]
    try:
        for server in servers:
            server.create_bucket("lake")
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_two_tables_at_one_path_behind_two_endpoints_keep_apart(two_endpoints: list[MotoServer]) -> None:
    uri = "s3://lake/sensors"
    (a, b) = (server.storage_options for server in two_endpoints)
    _create(uri, a)
    # the second place holds a copy of the first table's log and files: the same metaData.id and versions
    src, dst = TableStorage(uri, a), TableStorage(uri, b)
    for key, _size in src.list(""):
        dst.put(key, src.read(key))
    first = _group_unit(uri, a, _append(uri, a))  # the committer reads A's version 3, an append
    assert first.status == "committed" and first.commit_version == 4

    report = _group_unit(uri, b, lambda: delete(uri, "k = 2", storage_options=b))  # B's version 3: a delete
    assert report.status == "committed"
    got = scan(uri, b)
    assert sorted(got.column("k").to_pylist()) == [1, 3, 4, 5, 6]
    assert content_checksum(got.select(ROWS.column_names)) == _expected_after_delete()
