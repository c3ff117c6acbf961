"""``unique_by`` drops rows, so its commit is a data change: ``remove``/``add`` with ``dataChange: true``,
operation ``DELETE`` (which rows, in the parameters) and, when the change data feed is on, the dropped
rows as ``cdc`` deletions that change-feed readers see. A rewrite that drops nothing stays an
``OPTIMIZE`` with ``dataChange: false``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from oracle import checksum, rows_checksum, scan

from deltaextras import rorder
from deltaextras.core.storage import TableStorage

ROWS = pa.table(
    {
        "node_id": [1, 1, 2, 2],
        "utc_time": [10, 10, 20, 20],
        "v": [0.5, 0.5, 1.0, 1.0],
        "node_id_range": [0, 0, 0, 0],
    }
)
CDF = {"delta.enableChangeDataFeed": "true"}


def _entry(path: str, version: int) -> list[dict]:
    return [json.loads(line) for line in (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def _files(actions: list[dict], kind: str) -> list[dict]:
    return [a[kind] for a in actions if kind in a]


def test_dropped_duplicates_are_deletions_in_the_change_feed(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, ROWS, partition_by=["node_id_range"], configuration=CDF)
    report = rorder(path, sort_by="utc_time", unique_by="utc_time", max_workers=1)
    assert [r.duplicates_removed for r in report] == [2]
    assert checksum(path) == rows_checksum(ROWS.take([0, 2]))

    entry = _entry(path, 1)
    info = entry[0]["commitInfo"]
    assert info["operation"] == "DELETE" and info["isBlindAppend"] is False
    assert json.loads(info["operationParameters"]["predicate"]) == [
        "rows repeating (node_id, utc_time) within node_id_range = 0"
    ]
    assert info["operationMetrics"]["numDeletedRows"] == "2"
    assert info["operationMetrics"]["numAddedChangeFiles"] == "1"
    assert all(r["dataChange"] for r in _files(entry, "remove"))
    assert all(a["dataChange"] for a in _files(entry, "add"))
    (cdc,) = _files(entry, "cdc")
    assert cdc["dataChange"] is False and cdc["partitionValues"] == {"node_id_range": "0"}

    changes = pa.table(DeltaTable(path).load_cdf(starting_version=1, ending_version=1).read_all())
    assert changes.num_rows == 2
    assert set(changes.column("_change_type").to_pylist()) == {"delete"}
    dropped = changes.select(["node_id", "utc_time", "v", "node_id_range"])
    assert rows_checksum(dropped) == rows_checksum(ROWS.take([1, 3]))


def test_without_change_feed_the_commit_is_still_a_data_change(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, ROWS, partition_by=["node_id_range"])
    rorder(path, sort_by="utc_time", unique_by="utc_time", max_workers=1)
    entry = _entry(path, 1)
    assert entry[0]["commitInfo"]["operation"] == "DELETE"
    assert all(f["dataChange"] for kind in ("add", "remove") for f in _files(entry, kind))
    assert not _files(entry, "cdc")
    assert not (Path(path) / "_change_data").exists()
    assert scan(path).num_rows == 2


def test_a_rewrite_that_drops_nothing_stays_an_optimize(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, ROWS.take([0, 2]), partition_by=["node_id_range"], configuration=CDF)
    write_deltalake(path, ROWS.take([3]).set_column(1, "utc_time", pa.array([30])), mode="append")
    rorder(path, sort_by="utc_time", unique_by="utc_time", max_workers=1)
    entry = _entry(path, 2)
    info = entry[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["operationMetrics"]["numDeletedRows"] == "0"
    assert not any(f["dataChange"] for kind in ("add", "remove") for f in _files(entry, kind))
    assert not _files(entry, "cdc")
    assert pa.table(DeltaTable(path).load_cdf(starting_version=2, ending_version=2).read_all()).num_rows == 0


def test_a_failed_commit_leaves_no_change_file(tmp_path: Path) -> None:
    """The change data file goes with the rewritten files when the commit does not happen (here: another
    writer deletes from the partition between our rewrite and our commit)."""
    import pytest

    from deltaextras import delete, rorder_single
    from deltaextras.errors import CommitConflictError

    path = str(tmp_path / "t")
    write_deltalake(path, ROWS, partition_by=["node_id_range"], configuration=CDF)

    def concurrent_delete(_version: int) -> None:
        delete(path, "node_id = 1")

    message = {"path": path, "partition_value": 0, "sort_by": ["utc_time"], "unique_by": ["utc_time"]}
    with pytest.raises(CommitConflictError):
        rorder_single(message, hooks={"before_commit": concurrent_delete})
    ours = [k for k, _ in TableStorage(path).list("_change_data") if k not in _named_change_files(path)]
    assert ours == []
    assert sorted(scan(path).column("node_id").to_pylist()) == [2, 2]


def _named_change_files(path: str) -> set[str]:
    names = set()
    for entry in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            cdc = json.loads(line).get("cdc")
            if cdc:
                names.add(cdc["path"])
    return names
