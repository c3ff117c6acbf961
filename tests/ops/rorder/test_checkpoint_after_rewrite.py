"""rorder writes a checkpoint after its commit when the table's newest checkpoint lags its interval
(``delta.checkpointInterval``, else 10); readers then start from it; a failed checkpoint write leaves
the commit as it is.

The readers are the oracles: delta-rs, Sail and Apache Spark with Delta read the table after the
commit files before the checkpoint are gone (as log cleanup leaves it), so they can only have read
the checkpoint. The fault is made by a proxy in front of the emulator that answers every checkpoint
PUT with a 503 after it landed, or drops the connection.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from faultproxy import FaultProxy, Rule, through
from oracle import assert_engines_agree, checksum, engine_checksums, write_sensor_table
from services import emulator_root

import deltaextras

LOG = "_delta_log"


def _checkpoints(path: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (path / LOG).glob("*.checkpoint.parquet"))


def _appends(uri: str, batches: int, interval: int | None = None, options: dict[str, str] | None = None) -> None:
    """``batches`` delta-rs appends (versions 0 .. batches-1); delta-rs checkpoints only at its own
    interval (100), so none of these has one unless ``interval`` is set."""
    write_sensor_table(uri, options, batches=batches, nodes=6, rows=60)
    if interval is not None:
        from deltalake import DeltaTable

        DeltaTable(uri, storage_options=options or None).alter.set_table_properties(
            {"delta.checkpointInterval": str(interval)}
        )


def test_checkpoint_follows_a_rewrite_that_lags_ten_versions(tmp_path: Path, spark: Any, delta_spark: Any) -> None:
    table = tmp_path / "t"
    uri = str(table)
    _appends(uri, 12)  # versions 0-11, no checkpoint
    before = engine_checksums(uri)["delta-rs"]
    report = deltaextras.rorder(uri, sort_by="utc_time", max_workers=1)[0]
    assert report.status == "committed" and report.commit_version == 12
    assert _checkpoints(table) == [12]
    for v in range(12):  # as log cleanup leaves it: the readers can only start from the checkpoint
        (table / LOG / f"{v:020d}.json").unlink()
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before


def test_no_checkpoint_when_the_newest_is_recent(tmp_path: Path) -> None:
    table = tmp_path / "t"
    uri = str(table)
    _appends(uri, 4)  # versions 0-3: the rewrite (version 4) lags 5 < 10
    assert deltaextras.rorder(uri, max_workers=1)[0].commit_version == 4
    assert _checkpoints(table) == []


def test_the_tables_interval_decides(tmp_path: Path) -> None:
    table = tmp_path / "t"
    uri = str(table)
    _appends(uri, 12, interval=40)  # versions 0-12; the table asks for one every 40 versions
    assert deltaextras.rorder(uri, max_workers=1)[0].commit_version == 13
    assert _checkpoints(table) == []
    other = tmp_path / "u"
    _appends(str(other), 3, interval=3)  # versions 0-3 (3: the property), lag 4 >= 3
    assert deltaextras.rorder(str(other), max_workers=1)[0].commit_version == 4
    assert _checkpoints(other) == [4]


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    """(backend name, table root, direct storage options, emulator port)."""
    return emulator_root(request, "ckpt")


@pytest.mark.parametrize("fault", ["503", "drop"])
def test_failed_checkpoint_write_leaves_the_commit(
    cloud: tuple[str, str, dict[str, str], int], fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    _appends(uri, 11, options=direct)  # versions 0-10: the rewrite lags 12
    before = checksum(uri, direct)
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("PUT", r"/_delta_log/(\d{20}\.checkpoint\.parquet|_last_checkpoint)$", fault, times=1000))
        options = through(name, direct, proxy, max_retries="1", retry_timeout="5s", timeout="5s")  # fail fast
        with caplog.at_level(logging.WARNING, logger="deltaextras"):
            report = deltaextras.rorder(uri, storage_options=options, max_workers=1)[0]
        assert rule.fired >= 1, f"the checkpoint PUT was never made: {proxy.requests('PUT')}"
    assert report.status == "committed" and report.commit_version == 11
    assert any("checkpoint" in r.getMessage() and "commit stands" in r.getMessage() for r in caplog.records)
    assert checksum(uri, direct) == before
    again = deltaextras.rorder(uri, storage_options=direct, max_workers=1)[0]
    assert again.status == "skipped" and again.reason.startswith("already in layout"), again.reason


def test_no_checkpoint_from_a_worker_when_the_table_is_large(tmp_path: Path, caplog: Any) -> None:
    """The last checkpoint's size (``_last_checkpoint``) bounds what a worker loads to write the next."""
    from deltaextras.ops.rorder.commit.checkpoint import MAX_CHECKPOINT_ACTIONS

    table = tmp_path / "t"
    uri = str(table)
    _appends(uri, 1)
    from deltalake import DeltaTable

    DeltaTable(uri).create_checkpoint()  # version 0
    hint = table / LOG / "_last_checkpoint"  # as the hint of a table whose last checkpoint held many files
    hint.write_text(json.dumps({**json.loads(hint.read_text()), "size": MAX_CHECKPOINT_ACTIONS + 1}))
    write_sensor_table(uri, None, batches=11, nodes=6, rows=60)  # versions 1-11: the rewrite lags 12
    with caplog.at_level(logging.INFO, logger="deltaextras"):
        report = deltaextras.rorder(uri, max_workers=1)[0]
    assert report.status == "committed" and report.commit_version == 12
    assert _checkpoints(table) == [0]
    assert "the table's own checkpoint interval applies" in caplog.text


def test_an_unreadable_checkpoint_interval_never_fails_a_commit(tmp_path: Path) -> None:
    from deltaextras.core.snapshot import TableSnapshot
    from deltaextras.core.transaction import checkpoint

    uri = str(tmp_path / "t")
    _appends(uri, 2)
    snap = TableSnapshot.load(uri)
    assert checkpoint(snap.storage, 7, {"delta.checkpointInterval": "ten"}, snap.protocol) is False
    assert checkpoint(snap.storage, 1, {"delta.checkpointInterval": "ten"}, snap.protocol) is False
