"""Group commit on local disk: units released together land in few versions, each exactly once; a
conflicting unit is rejected alone and commits by itself after resolving; staged commits left by a
dead worker, or staged again after they were published, are never lost nor published twice."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import checksum, scan

from deltaextras.core.actions import CommitInfo, Txn
from deltaextras.core.committer import Committer
from deltaextras.core.conflicts import IsolationLevel, ReadSet
from deltaextras.core.group_commit import commit_staged
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.staged import STAGED_DIR, StagedCommit
from deltaextras.core.transaction import Transaction
from deltaextras.ops.maintenance.vacuum import orphans
from deltaextras.ops.rorder.rorder import app_id_for, plan_messages, rorder_single


def _table(path: str, units: int, *, dv: bool = False) -> None:
    for b in range(2):
        k = [u * 10 + (3 - j) for u in range(units) for j in range(3)]
        part = [u for u in range(units) for _ in range(3)]
        write_deltalake(
            path,
            pa.table({"k": k, "k_range": part, "b": [b] * len(k)}),
            partition_by=["k_range"],
            mode="append",
            configuration={"delta.enableDeletionVectors": "true"} if dv and b == 0 else None,
        )


def _log(path: str) -> dict[int, list[dict[str, Any]]]:
    out = {}
    for name in sorted(os.listdir(Path(path) / "_delta_log")):
        if name.endswith(".json") and not name.startswith("_"):
            out[int(name[:20])] = [
                json.loads(line) for line in (Path(path) / "_delta_log" / name).read_text().splitlines() if line
            ]
    return out


def _txn_count(path: str) -> dict[str, int]:
    count: dict[str, int] = {}
    for actions in _log(path).values():
        for a in actions:
            if "txn" in a:
                count[a["txn"]["appId"]] = count.get(a["txn"]["appId"], 0) + 1
    return count


def _release_together(messages: list[dict[str, Any]], commit: str | None) -> list[Any]:
    barrier = threading.Barrier(len(messages))
    results: list[Any] = [None] * len(messages)

    def run(i: int, m: dict[str, Any]) -> None:
        body = {**m, "commit": commit} if commit else m
        try:
            results[i] = rorder_single(body, hooks={"after_rewrite": lambda _o: barrier.wait()})
        except Exception as exc:  # a failure is an answer the test inspects
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(messages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_units_released_together_land_once_in_few_versions(tmp_path: Path) -> None:
    grouped, alone = str(tmp_path / "g"), str(tmp_path / "a")
    _table(grouped, 48)
    _table(alone, 48)
    before = checksum(grouped)
    v0 = DeltaTable(grouped).version()
    results = _release_together(plan_messages(grouped), "group")
    assert [getattr(r, "status", r) for r in results] == ["committed"] * 48
    added = DeltaTable(grouped).version() - v0
    assert added <= 48 // 16, f"{added} log versions for 48 units"
    assert checksum(grouped) == before
    counts = _txn_count(grouped)
    assert sorted(counts.values()) == [1] * 48, "a unit committed twice or not at all"
    assert {r.commit_version for r in results} <= set(range(v0 + 1, v0 + added + 1))
    assert orphans(grouped) == [], "files no log entry names"
    assert not list((Path(grouped) / "_deltaextras" / "staged").rglob("*.json")), "staged commits left"
    assert len(list((Path(grouped) / "_deltaextras" / "outcomes").rglob("*.json"))) <= added + 1
    # the same units committed alone: the same files' content, one version each
    _release_together(plan_messages(alone), None)
    assert checksum(alone) == checksum(grouped)
    assert DeltaTable(alone).version() - v0 == 48
    for v, actions in _log(grouped).items():
        if v > v0:
            info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
            assert info["operation"] == "OPTIMIZE" and len(info["unitTxnIds"]) == int(
                info["operationParameters"]["units"]
            )


def _staged_unit(path: str, unit: int) -> tuple[Transaction, list[Any]]:
    snap = TableSnapshot.load(path, cross_check=False)
    app_id = app_id_for("k_range", str(unit))
    files = snap.partition_files("k_range", str(unit))
    txn = Transaction(
        snap,
        "OPTIMIZE",
        IsolationLevel.SNAPSHOT_ISOLATION,
        ReadSet(files={f.path for f in files}, app_id=app_id, app_version=snap.version),
    )
    ts = 1
    actions = [CommitInfo(operation="OPTIMIZE"), Txn(app_id=app_id, version=snap.version, last_updated=ts)]
    return txn, actions


def test_a_dead_workers_staged_commit_is_published_by_the_next_worker(tmp_path: Path) -> None:
    """A worker staged its commit and died before any committer ran: the next unit's worker publishes both."""
    path = str(tmp_path / "t")
    _table(path, 2)
    dead, actions = _staged_unit(path, 0)
    txn_id, stamped = dead.stage(actions)
    entry = StagedCommit(
        txn_id,
        dead.read_version,
        "SnapshotIsolation",
        "OPTIMIZE",
        dead.read.app_id or "",
        dead.read.app_version,
        (),
        (),
        stamped,
    )
    dead.storage.put_if_absent(entry.key, entry.encode())  # ... and the process is gone
    live, live_actions = _staged_unit(path, 1)
    result = commit_staged(live, live_actions)
    assert result is not None and result.committed
    assert _txn_count(path) == {app_id_for("k_range", "0"): 1, app_id_for("k_range", "1"): 1}
    assert DeltaTable(path).version() == result.version == 2
    # redelivered: the same staged commit appears again; the next run records it, and publishes nothing
    dead.storage.put(entry.key, entry.encode())
    decided = Committer(TableSnapshot.load(path, cross_check=False)).run(3)
    assert decided is None and DeltaTable(path).version() == 2
    assert not dead.storage.exists(entry.key)
    assert _txn_count(path)[app_id_for("k_range", "0")] == 1


def test_the_same_unit_staged_twice_commits_once(tmp_path: Path) -> None:
    """Two deliveries of one message stage the same unit: one batch holds it once, the other is done."""
    path = str(tmp_path / "t")
    _table(path, 1)
    first, a1 = _staged_unit(path, 0)
    second, a2 = _staged_unit(path, 0)
    t1, s1 = first.stage(a1)
    e1 = StagedCommit(
        t1, first.read_version, "SnapshotIsolation", "OPTIMIZE", first.read.app_id or "", 1, (), (), s1, staged_at=1
    )
    first.storage.put_if_absent(e1.key, e1.encode())
    result = commit_staged(second, a2)
    assert result is not None and result.done
    assert _txn_count(path) == {app_id_for("k_range", "0"): 1}


def test_a_conflicting_unit_is_rejected_alone_and_commits_after_carrying(tmp_path: Path) -> None:
    """A delete removed an input of one unit between its read and the batch: that unit is rejected (the
    others commit), then commits alone with the deleted row carried onto its new files."""
    path = str(tmp_path / "t")
    _table(path, 20, dv=True)
    from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors

    enable_deletion_vectors(path)
    from deltaextras.ops.delete.delete import delete

    messages = plan_messages(path)
    barrier = threading.Barrier(len(messages) + 1)
    results: list[Any] = [None] * len(messages)

    def run(i: int, m: dict[str, Any]) -> None:
        results[i] = rorder_single({**m, "commit": "group"}, hooks={"after_rewrite": lambda _o: barrier.wait()})

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(messages)]
    for t in threads:
        t.start()
    delete(path, "k_range = 7 AND k = 71")
    barrier.wait()
    for t in threads:
        t.join()
    assert [r.status for r in results] == ["committed"] * 20
    carried = [r for r in results if r.concurrent_deletes_carried]
    assert [r.partition for r in carried] == ["k_range=7"]
    rows = scan(path)
    assert rows.num_rows == 20 * 6 - 2 and 71 not in rows.column("k").to_pylist()
    assert sorted(_txn_count(path).values()) == [1] * 20
    assert orphans(path) == []


def test_staged_directory_is_ignored_by_readers(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(path, 1)
    txn, actions = _staged_unit(path, 0)
    t, s = txn.stage(actions)
    e = StagedCommit(t, txn.read_version, "SnapshotIsolation", "OPTIMIZE", txn.read.app_id or "", 1, (), (), s)
    txn.storage.put_if_absent(e.key, e.encode())
    assert e.key.startswith(STAGED_DIR)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 6
    assert orphans(path) == []


@pytest.mark.parametrize("commit", ["unit", "group"])
def test_message_commit_key_round_trips(commit: str) -> None:
    from deltaextras.ops.rorder.message import RorderMessage

    m = RorderMessage.from_dict({"path": "/t", "commit": commit})
    assert RorderMessage.from_dict(m.to_dict()).commit == commit
    assert "commit" not in RorderMessage.from_dict({"path": "/t"}).to_dict()


def test_a_group_commit_reads_the_same_through_delta_rs_sail_and_spark(
    tmp_path: Path, delta_spark: Any, spark: Any
) -> None:
    from oracle import assert_engines_agree

    path = str(tmp_path / "t")
    _table(path, 32)
    before = assert_engines_agree(path, delta_spark=delta_spark, sail=spark)
    v0 = DeltaTable(path).version()
    results = _release_together(plan_messages(path), "group")
    assert [getattr(r, "status", r) for r in results] == ["committed"] * 32
    assert DeltaTable(path).version() - v0 <= 2
    assert assert_engines_agree(path, delta_spark=delta_spark, sail=spark, expected=before) == before
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "OPTIMIZE"
