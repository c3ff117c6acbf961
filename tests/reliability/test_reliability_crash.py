"""Crash injection: the worker is stopped dead (``os._exit(137)`` or SIGKILL, in a child process) at
every step of a rewrite, on local disk, Azurite and moto S3.

After each stop: the log holds only whole entries, the table reads the same through delta-rs and Sail,
the files the dead worker left are exactly what :func:`deltaextras.ops.maintenance.vacuum.orphans` reports and what
deltalake's full vacuum removes, and delivering the message again converges to the target layout with
one rewrite commit.

Steps: ``after_output`` (some output files written), ``after_rewrite`` (all written), ``mid_log``
(inside the put-if-absent of the log entry, the entry padded so the put takes a while), and
``after_commit`` (committed, message not acknowledged).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from oracle import assert_layout, engine_checksums
from reliability_support import (
    BY,
    content,
    log_entries,
    new_table,
    record,
    sail_content,
    scale,
    staging_files,
    tombstoned,
    txn_commits,
)
from reliability_support import expected as expected_checksum

from deltaextras.app import work
from deltaextras.app.config import AppConfig
from deltaextras.core.actions import CommitInfo
from deltaextras.core.staged import StagedCommit
from deltaextras.core.storage import TableStorage
from deltaextras.ops.maintenance.vacuum import orphans, vacuum
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.rorder import plan_messages

DRIVER = Path(__file__).resolve().parents[1] / "support" / "reliability_driver.py"
NODES = 6
STEPS = ["after_output", "after_rewrite", "mid_log", "after_commit"]
PAD_LOCAL = 64 << 20
PAD_CLOUD = 16 << 20
CHILD_TIMEOUT = 180.0
SETTLE_SECONDS = 5.0


def _spark_for(request: pytest.FixtureRequest, backend: Any) -> Any:
    return request.getfixturevalue("spark" if backend.name == "local" else "spark_cloud")


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(predicate: Any, proc: subprocess.Popen[bytes], timeout: float, what: str, stderr: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited ({proc.returncode}) before {what}: {stderr.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.0005)


def run_worker_until(
    tmp_path: Path,
    uri: str,
    tables: list[dict[str, Any]],
    body: str,
    step: str,
    *,
    after_outputs: int = 0,
    pad_bytes: int = 0,
    seed: int = 0,
) -> tuple[int, list[dict[str, Any]], str]:
    """Run the driver; returns (exit code, events, how the stop landed)."""
    events = tmp_path / f"events-{step}-{seed}.jsonl"
    spec = tmp_path / f"spec-{step}-{seed}.json"
    spec.write_text(
        json.dumps(
            {
                "tables": tables,
                "body": body,
                "step": step,
                "after_outputs": after_outputs,
                "pad_bytes": pad_bytes,
                "events": str(events),
            }
        )
    )
    stderr = tmp_path / f"stderr-{step}-{seed}.txt"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen([sys.executable, str(DRIVER), str(spec)], stdout=subprocess.DEVNULL, stderr=err)
    landed = "hook"
    try:
        if step == "mid_log":
            _wait_for(
                lambda: any(e["event"] == "put" for e in _read_events(events)), proc, CHILD_TIMEOUT, "the put", stderr
            )
            if "://" not in uri:
                # The local store writes the entry to a staging file, then hard-links it: stop the
                # process as soon as the staging file exists, while its bytes are still being written.
                _wait_for(lambda: bool(staging_files(uri)) or _put_done(events), proc, 30, "the staging file", stderr)
            else:
                time.sleep(random.Random(seed).uniform(0.0, 0.03))
            proc.send_signal(signal.SIGKILL)
        rc = proc.wait(timeout=CHILD_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got = _read_events(events)
    if step == "mid_log":
        landed = "after the put returned" if any(e["event"] == "put_done" for e in got) else "during the put"
    assert rc in (137, -signal.SIGKILL), f"worker was not stopped at {step} (exit {rc}): {stderr.read_text()[-3000:]}"
    return rc, got, landed


def _put_done(events: Path) -> bool:
    return any(e["event"] == "put_done" for e in _read_events(events))


def settled_log(uri: str, opts: dict[str, str]) -> dict[int, list[dict[str, Any]]]:
    """The log once it has stopped changing for a second.

    A request whose body was sent completes on the server although the process that sent it is gone
    (seen on Azurite): after a kill during the put, the entry may appear a moment later -- whole.
    """
    entries = log_entries(uri, opts)
    stable_since = time.monotonic()
    deadline = stable_since + SETTLE_SECONDS
    while time.monotonic() - stable_since < 1.0 and time.monotonic() < deadline:
        time.sleep(0.2)
        again = log_entries(uri, opts)
        if set(again) != set(entries):
            entries, stable_since = again, time.monotonic()
    return entries


def crash_and_recover(
    request: pytest.FixtureRequest, backend: Any, tmp_path: Path, step: str, *, after_outputs: int, seed: int
) -> dict[str, Any]:
    """One crash scenario end to end; returns what happened (for the figures)."""
    uri, opts = backend.new_table_uri(), dict(backend.storage_options)
    written = new_table(uri, opts, batches=3, per_batch=40, nodes=NODES, seed=seed)
    before = content(uri, opts)
    assert before == expected_checksum(written)
    tables = [{"uri": uri, "sort_by": ["utc_time"], "target_file_size": 1, "storage_options": opts}]
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps(tables)})
    (message,) = plan_messages(uri, **config.tables[0].plan_kwargs())
    body = RorderMessage.from_dict(message).encode()  # base64 JSON, as the queue carries it
    versions_before = set(log_entries(uri, opts))

    pad = (PAD_LOCAL if backend.name == "local" else PAD_CLOUD) if step == "mid_log" else 0
    _rc, events, landed = run_worker_until(
        tmp_path, uri, tables, body, step, after_outputs=after_outputs, pad_bytes=pad, seed=seed
    )
    assert not any(e["event"] == "acked" for e in events), "the stopped worker acknowledged its message"
    outputs = {e["key"] for e in events if e["event"] == "output"}
    if step == "after_output":
        assert len(outputs) == after_outputs

    # 1. Only whole entries are visible; an entry whose put was interrupted is absent or complete.
    entries = settled_log(uri, opts) if step == "mid_log" and backend.name != "local" else log_entries(uri, opts)
    new_versions = sorted(set(entries) - versions_before)
    committed = bool(new_versions)
    if step in ("after_output", "after_rewrite"):
        assert not committed
    elif step == "after_commit":
        assert len(new_versions) == 1
    else:
        assert len(new_versions) <= 1
        if committed:
            info = next(a["commitInfo"] for a in entries[new_versions[0]] if "commitInfo" in a)
            assert len(info["deltaextrasTestPadding"]) == pad, "a log entry became visible partially"
        if backend.name == "local" and landed == "during the put":
            assert staging_files(uri), "the interrupted put left no staging file"
    assert len(txn_commits(entries)) == int(committed)

    # 2. The table reads the same through delta-rs and Sail.
    spark = _spark_for(request, backend)
    assert content(uri, opts) == before
    assert sail_content(spark, uri) == before

    # 3. What the dead worker left is reported, and deltalake's full vacuum removes exactly that.
    left = orphans(uri, opts)
    staged = [k for k in left if "#" in k.rsplit("/", 1)[-1]]
    data_orphans = set(left) - set(staged)
    assert data_orphans == (set() if committed else outputs)
    if step != "mid_log" or backend.name != "local":
        assert not staged
    gone = tombstoned(uri, opts)
    dt_ = DeltaTable(uri, storage_options=opts or None)
    plan = dt_.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True)
    assert set(plan) == data_orphans | gone, (sorted(plan), sorted(data_orphans), sorted(gone), committed, landed)
    dt_.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)
    for key in staged:  # no vacuum sees staging files: they are deleted by hand
        os.remove(os.path.join(uri, key))
    assert orphans(uri, opts) == []
    assert content(uri, opts) == before

    # 4. Redelivery converges: one rewrite commit, target layout, same content, nothing left over.
    outcome = work.handle(body, config, message_id="crash-1", dequeue_count=2)
    if committed:
        assert outcome.status == "skipped" and "already committed" in outcome.reason, outcome.reason
    else:
        assert outcome.status == "committed", outcome.reason
    final = log_entries(uri, opts)
    assert len(txn_commits(final)) == 1
    assert assert_layout(uri, BY, opts) == NODES
    assert content(uri, opts) == before
    assert sail_content(spark, uri) == before
    assert orphans(uri, opts) == []
    return {"committed_before_stop": committed, "landed": landed, "outputs_left": len(data_orphans)}


def _kill_points() -> list[int]:
    """How many output files are complete when ``after_output`` stops the worker."""
    return list(range(1, NODES)) if scale(0, 1) else [2]


@pytest.mark.sail
@pytest.mark.parametrize("step", STEPS)
def test_crash_at_every_step_recovers(request: pytest.FixtureRequest, backend: Any, tmp_path: Path, step: str) -> None:
    seeds = range(scale(1, 3)) if step == "mid_log" else range(1)
    points = _kill_points() if step == "after_output" else [0]
    landed: list[str] = []
    runs = 0
    for seed in seeds:
        for k in points:
            work_dir = tmp_path / f"run-{seed}-{k}"
            work_dir.mkdir()
            result = crash_and_recover(request, backend, work_dir, step, after_outputs=k, seed=seed)
            landed.append(result["landed"])
            runs += 1
    note = ""
    if step == "mid_log":
        note = ", ".join(f"{landed.count(x)} {x}" for x in sorted(set(landed)))
    record("crash", step, backend=backend.name, runs=runs, injections=runs, note=note)


def test_vacuum_removes_the_outputs_of_a_killed_worker(backend: Any, tmp_path: Path) -> None:
    """A worker SIGKILLed after uploading outputs, before committing: no log version names them, and
    ``vacuum(retention_hours=0)`` deletes them (reported as data files), the content unchanged; the
    files of a pending staged commit stay."""
    uri, opts = backend.new_table_uri(), dict(backend.storage_options)
    written = new_table(uri, opts, batches=3, per_batch=40, nodes=NODES, seed=0)
    before = content(uri, opts)
    assert before == expected_checksum(written)
    engines_before = engine_checksums(uri, storage_options=opts)
    tables = [{"uri": uri, "sort_by": ["utc_time"], "target_file_size": 1, "storage_options": opts}]
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps(tables)})
    (message,) = plan_messages(uri, **config.tables[0].plan_kwargs())
    body = RorderMessage.from_dict(message).encode()
    _rc, events, _landed = run_worker_until(tmp_path, uri, tables, body, "after_output", after_outputs=2)
    outputs = {e["key"] for e in events if e["event"] == "output"}
    assert len(outputs) == 2 and set(orphans(uri, opts)) == outputs

    storage = TableStorage(uri, opts)  # a unit staged for group commit, not decided yet: its file is needed
    storage.put("part-pending.parquet", b"PAR1")
    pending = StagedCommit("t-pending", 0, "SnapshotIsolation", "OPTIMIZE", "pending", 0, (), ("part-pending.parquet",),
                           [CommitInfo(operation="OPTIMIZE", txn_id="t-pending")])  # fmt: skip
    storage.put(pending.key, pending.encode())
    time.sleep(0.01)  # retention 0 means "stored before now"

    report = vacuum(uri, retention_hours=0, storage_options=opts)  # dry run: reported, nothing deleted
    assert outputs <= set(report.data_files) and "part-pending.parquet" not in report.data_files
    assert set(orphans(uri, opts)) == outputs | {"part-pending.parquet"}
    report = vacuum(uri, retention_hours=0, dry_run=False, storage_options=opts)
    assert outputs <= set(report.data_files)
    assert orphans(uri, opts) == ["part-pending.parquet"]
    assert storage.exists(pending.key)
    assert content(uri, opts) == before
    assert engine_checksums(uri, storage_options=opts) == engines_before

    outcome = work.handle(body, config, message_id="crash-vacuum", dequeue_count=2)  # redelivery converges
    assert outcome.status == "committed", outcome.reason
    assert assert_layout(uri, BY, opts) == NODES
    assert content(uri, opts) == before
