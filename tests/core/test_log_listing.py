"""Reading the latest version lists ``_delta_log/`` from the checkpoint ``_last_checkpoint`` names, not from
its first commit: a log keeps 30 days of commits by default, and each 1,000 of them is a LIST request.
What is read is the same table; a hint that is stale, damaged or ahead of the version asked falls back to
the whole listing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import checksum
from services import emulator_root

from deltaextras import rorder
from deltaextras.core.log import list_log, list_log_for
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.errors import CorruptDataError


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    return emulator_root(request, "log-listing")


def _table(uri: str, options: dict[str, str] | None = None, commits: int = 6, checkpoint_at: int = 3) -> None:
    for i in range(commits):
        rows = pa.table({"node_id": [i, i + 100], "node_id_range": [0, 1], "v": [float(i), -0.0]})
        write_deltalake(uri, rows, partition_by=["node_id_range"], mode="append", storage_options=options)
        if i == checkpoint_at:
            DeltaTable(uri, storage_options=options).create_checkpoint()


def test_the_listing_starts_at_the_hinted_checkpoint(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(uri)
    storage = TableStorage(uri)
    tail = list_log_for(storage)
    assert sorted(tail.commits) == [3, 4, 5] and sorted(tail.checkpoints) == [3]
    assert sorted(list_log(storage).commits) == list(range(6))
    assert sorted(list_log_for(storage, version=2).commits) == list(range(6))  # before the checkpoint: all
    snap = TableSnapshot.load(uri)
    assert snap.version == 5 and sorted(f.key for f in snap.files) == sorted(
        TableSnapshot.load(uri, version=5).storage.key_of(u) for u in DeltaTable(uri).file_uris()
    )


def test_a_hint_naming_a_missing_checkpoint_is_still_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(uri)
    hint = tmp_path / "t" / "_delta_log" / "_last_checkpoint"
    hint.write_text(json.dumps({"version": 4, "size": 3}))  # no checkpoint 4
    with pytest.raises(CorruptDataError, match="names checkpoint 4, which is missing"):
        TableSnapshot.load(uri)
    hint.write_text("{not json")
    with pytest.raises(CorruptDataError, match="is not a valid hint"):
        TableSnapshot.load(uri)


def test_a_stale_hint_still_reads_the_newest_checkpoint(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(uri, commits=9, checkpoint_at=3)
    hint = (tmp_path / "t" / "_delta_log" / "_last_checkpoint").read_text()
    DeltaTable(uri).create_checkpoint()  # checkpoint 8, then the hint of checkpoint 3 put back
    (tmp_path / "t" / "_delta_log" / "_last_checkpoint").write_text(hint)
    listing = list_log_for(TableStorage(uri))
    assert sorted(listing.checkpoints) == [3, 8] and listing.latest == 8


def test_the_listing_on_cloud_storage_starts_at_the_checkpoint(cloud: tuple[str, str, dict[str, str], int]) -> None:
    _name, root, direct, _port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    _table(uri, direct)
    storage = TableStorage(uri, direct)
    storage.put("_delta_log/_staged_commits/00000000000000000009.x.json", b"{}")  # a directory: not listed
    tail = list_log_for(storage)
    assert sorted(tail.commits) == [3, 4, 5] and sorted(tail.checkpoints) == [3] and tail.has_hint
    before = checksum(uri, direct)
    report = rorder(uri, storage_options=direct, max_workers=1)
    assert {p.status for p in report.partitions} == {"committed"}
    assert checksum(uri, direct) == before
