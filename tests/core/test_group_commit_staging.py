"""Staging together: the units of one table staging in one process while a put is under way share the
next staged object; a put that fails reaches every unit of its object and no other; an object whose
units are decided in different runs stays until its last unit is decided, each unit published once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaextras.core.actions import CommitInfo, Txn
from deltaextras.core.commit_watch import Watch
from deltaextras.core.committer import Committer
from deltaextras.core.group_commit import _put_staged
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.staged import OUTCOME_DIR, STAGED_DIR, Outcomes, StagedCommit, decode_staged, encode_staged
from deltaextras.core.storage import TableStorage
from deltaextras.errors import StorageError


def _staged(app: str, operation: str = "OPTIMIZE", read_version: int = 0) -> StagedCommit:
    txn_id = uuid.uuid4().hex
    return StagedCommit(
        txn_id, read_version, "SnapshotIsolation", operation, app, read_version, (), (),
        [CommitInfo(operation=operation, txn_id=txn_id), Txn(app_id=app, version=read_version)],
    )  # fmt: skip


def _stage_while_first_put_is_held(
    storage: TableStorage, entries: list[StagedCommit]
) -> dict[str, BaseException | None]:
    """Stage ``entries[0]`` with its put held until every other entry waits behind it; each entry's result."""
    watch = Watch(storage)
    held, release = threading.Event(), threading.Event()
    results: dict[str, BaseException | None] = {}

    def put(group: list[StagedCommit]) -> None:
        if not held.is_set():
            held.set()
            assert release.wait(30)
        _put_staged(storage, group)

    def stage(e: StagedCommit) -> None:
        try:
            watch.stage(e, put)
            results[e.txn_id] = None
        except BaseException as exc:
            results[e.txn_id] = exc

    threads = [threading.Thread(target=stage, args=(entries[0],))]
    threads[0].start()
    assert held.wait(30)
    threads += [threading.Thread(target=stage, args=(e,)) for e in entries[1:]]
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 30
    while len(watch.to_stage) < len(entries) - 1:  # every later unit waits behind the held put
        assert time.monotonic() < deadline
        time.sleep(0.01)
    release.set()
    for t in threads:
        t.join(30)
    return results


def test_units_staging_meanwhile_share_one_object(tmp_path: Path) -> None:
    storage = TableStorage(str(tmp_path))
    entries = [_staged(f"u{i}") for i in range(6)]
    results = _stage_while_first_put_is_held(storage, entries)
    assert results == dict.fromkeys((e.txn_id for e in entries), None)
    objects = sorted(k for k, _ in storage.list(STAGED_DIR))
    assert len(objects) == 2
    alone, together = sorted((decode_staged(storage.read(k)) for k in objects), key=len)
    assert [e.txn_id for e in alone] == [entries[0].txn_id]
    assert sorted(e.txn_id for e in together) == sorted(e.txn_id for e in entries[1:])
    assert together[0].key in objects  # named after its first unit


def test_a_failed_put_reaches_every_unit_of_its_object_and_no_other(tmp_path: Path) -> None:
    storage = TableStorage(str(tmp_path))
    (tmp_path / "_deltaextras").mkdir()
    (tmp_path / "_deltaextras" / "staged").write_text("not a directory")  # every put under it fails
    entries = [_staged(f"u{i}") for i in range(4)]
    results = _stage_while_first_put_is_held(storage, entries)
    assert all(isinstance(r, StorageError) for r in results.values()), results
    assert len({id(r) for r in results.values()}) == 4, "one exception object per waiting thread"
    (tmp_path / "_deltaextras" / "staged").unlink()
    alone = _staged("later")
    Watch(storage).stage(alone, lambda group: _put_staged(storage, group))
    assert [k for k, _ in storage.list(STAGED_DIR)] == [alone.key]


@pytest.mark.parametrize("mixed_at", [0, 1])
def test_an_object_decided_in_two_runs_stays_until_its_last_unit_is_decided(tmp_path: Path, mixed_at: int) -> None:
    """Units of two operations in one staged object: the first run publishes one operation's units and
    keeps the object; the second publishes the other and removes it. Every unit is in the log once."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1]}))
    storage = TableStorage(path)
    units = [_staged("a"), _staged("b"), _staged("c")]
    units[mixed_at + 1] = _staged("d", operation="DELETE")
    key = units[0].key
    storage.put_if_absent(key, encode_staged(units))

    first = Committer(TableSnapshot.load(path, cross_check=False))
    assert first.run(1) == 1
    assert [k for k, _ in storage.list(STAGED_DIR)] == [key], "kept: one unit is not decided yet"
    second = Committer(TableSnapshot.load(path, cross_check=False))
    second.decided = {t: o for r in _outcomes(storage) for t, o in r.decided.items()}
    assert [e.app_id for e in second.gather()] == ["d"]
    assert second.run(2) == 2
    assert [k for k, _ in storage.list(STAGED_DIR)] == []
    assert [r.staged for r in sorted(_outcomes(storage), key=lambda r: len(r.decided))] == [(key,), ()]
    assert sorted(a["appId"] for a in _txns(path, 1)) == sorted(e.app_id for e in units if e.app_id != "d")
    assert [a["appId"] for a in _txns(path, 2)] == ["d"]
    assert DeltaTable(path).version() == 2


def test_a_committer_does_not_read_objects_known_decided(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1]}))
    storage = TableStorage(path)
    decided, fresh = [_staged("a"), _staged("b")], [_staged("c")]
    for group in (decided, fresh):
        storage.put_if_absent(group[0].key, encode_staged(group))
    committer = Committer(TableSnapshot.load(path, cross_check=False))
    committer.decided_keys = {decided[0].key}
    assert [e.app_id for e in committer.gather()] == ["c"]
    assert list(committer.units) == [fresh[0].key]


def _outcomes(storage: TableStorage) -> list[Outcomes]:
    return [Outcomes.decode(storage.read(k), k) for k, _ in storage.list(OUTCOME_DIR)]


def _txns(path: str, version: int) -> list[dict[str, object]]:
    import json

    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line)["txn"] for line in text.splitlines() if line and "txn" in json.loads(line)]
