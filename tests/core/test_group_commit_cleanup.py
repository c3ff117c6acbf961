"""Removing decided staged commits at scale, on Azurite and moto S3: batched deletes remove every key
(more than one batch, absent keys among them) and nothing else; a committer never reads again a staged
commit whose outcome its process already knows, and a committer that defers its cleanup removes the
staged commits it decided only when asked."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from services import emulator_root

from deltaextras.core.actions import CommitInfo, Txn
from deltaextras.core.commit_watch import OUTCOMES_TTL
from deltaextras.core.committer import Committer
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.staged import AREA, STAGED_DIR, Outcomes, StagedCommit, UnitOutcome, turn_key
from deltaextras.core.storage import DELETE_BATCH, TableStorage
from deltaextras.ops.maintenance.vacuum import vacuum


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


def test_vacuum_removes_what_no_pending_commit_needs(cloud: tuple[str, str, dict[str, str], int]) -> None:
    _name, root, options, _port = cloud
    uri = f"{root}/sweep-{uuid.uuid4().hex[:8]}"
    write_deltalake(uri, pa.table({"x": [1]}), storage_options=options)
    storage = TableStorage(uri, options)
    published, pending = _staged("published", 0), _staged("pending", 3)
    storage.put(published.key, published.encode())
    committer = Committer(TableSnapshot.load(uri, options, cross_check=False))
    committer.defer_cleanup = True  # as a committer killed before its cleanup leaves it
    assert committer.run(1) == 1
    storage.put(pending.key, pending.encode())  # staged after the run: not decided
    now = int(time.time() * 1000)
    old = Outcomes({published.txn_id: UnitOutcome("committed", 1)}, written_at=now - int(OUTCOMES_TTL * 1000) - 60_000)
    fresh = Outcomes({published.txn_id: UnitOutcome("committed", 1)}, written_at=now, run="fresh")
    for key, data in [
        (turn_key(1), b"t"),
        (turn_key(2, 1), b"t"),
        (old.key, old.encode()),
        (fresh.key, fresh.encode()),
    ]:
        storage.put(key, data)
    time.sleep(0.01)
    before = sorted(k for k, _ in storage.list(AREA))
    vacuum(uri, retention_hours=0, storage_options=options)  # a dry run removes nothing
    assert sorted(k for k, _ in storage.list(AREA)) == before
    vacuum(uri, retention_hours=0, dry_run=False, storage_options=options)
    left = {k for k, _ in storage.list(AREA)}
    assert turn_key(1) not in left and old.key not in left and published.key not in left
    assert {turn_key(2, 1), fresh.key, pending.key} <= left  # a version not yet published; still read; pending
