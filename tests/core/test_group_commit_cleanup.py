"""Removing decided staged commits at scale, on Azurite and moto S3: batched deletes remove every key
(more than one batch, absent keys among them) and nothing else; a committer never reads again a staged
commit whose outcome its process already knows, and a committer that defers its cleanup removes the
staged commits it decided only when asked."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from services import emulator_root

from deltaextras.core.actions import CommitInfo, Txn
from deltaextras.core.committer import Committer
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.staged import STAGED_DIR, StagedCommit, UnitOutcome
from deltaextras.core.storage import DELETE_BATCH, TableStorage


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    return emulator_root(request, "groupcleanup")


def test_delete_many_removes_every_key_across_batches(cloud: tuple[str, str, dict[str, str], int]) -> None:
    _name, root, options, _port = cloud
    storage = TableStorage(f"{root}/many-{uuid.uuid4().hex[:8]}", options)
    keys = [f"d/{i:05d}" for i in range(2 * DELETE_BATCH + 7)]
    for k in [*keys, "keep/1"]:
        storage.put(k, b"x")
    storage.delete_many([*keys, "d/absent-1", "d/absent-2"])
    assert [k for k, _ in storage.list("d/")] == []
    assert [k for k, _ in storage.list("keep/")] == ["keep/1"]


def _staged(app: str, read_version: int) -> StagedCommit:
    txn_id = uuid.uuid4().hex
    return StagedCommit(
        txn_id, read_version, "SnapshotIsolation", "OPTIMIZE", app, read_version, (), (),
        [CommitInfo(operation="OPTIMIZE", txn_id=txn_id), Txn(app_id=app, version=read_version)],
    )  # fmt: skip


def test_known_outcomes_are_skipped_and_cleanup_waits_when_deferred(
    cloud: tuple[str, str, dict[str, str], int],
) -> None:
    _name, root, options, _port = cloud
    uri = f"{root}/skip-{uuid.uuid4().hex[:8]}"
    write_deltalake(uri, pa.table({"x": [1]}), storage_options=options)
    storage = TableStorage(uri, options)
    known, fresh = _staged("known", 0), _staged("fresh", 0)
    for e in (known, fresh):
        storage.put(e.key, e.encode())
    committer = Committer(TableSnapshot.load(uri, options, cross_check=False))
    committer.decided = {known.txn_id: UnitOutcome("committed", 1)}
    committer.defer_cleanup = True
    assert [e.txn_id for e in committer.gather()] == [fresh.txn_id]
    assert committer.run(1) == 1
    assert sorted(k for k, _ in storage.list(STAGED_DIR)) == sorted([known.key, fresh.key])  # deferred
    committer.cleanup()
    assert [k for k, _ in storage.list(STAGED_DIR)] == [known.key]  # left to the process that decided it
