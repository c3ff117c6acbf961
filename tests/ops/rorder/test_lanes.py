"""A one-pass rewrite of a partition with at least two lanes' worth of input writes its values into
two files at once (``deltaextras.ops.rorder.rewrite.lanes``): each file in the layout, the two value ranges
disjoint, the log's statistics those of each file, the content unchanged through delta-rs and Sail;
a failed upload in one lane leaves no commit and no file behind.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from faultproxy import FaultProxy, Rule, through
from oracle import assert_engines_agree, checksum, engine_checksums, write_sensor_table
from services import emulator_root

import deltaextras
from deltaextras.core.storage import TableStorage
from deltaextras.ops.rorder.rewrite.lanes import MIN_LANE_BYTES

ROWS = 375_000  # per append; four appends of 40 nodes are about 27 MiB of Parquet


def _big_table(uri: str, options: dict[str, str] | None = None) -> None:
    write_sensor_table(uri, options, batches=4, nodes=40, rows=ROWS)


def _adds(table: Path) -> list[dict[str, Any]]:
    live: dict[str, dict[str, Any]] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def test_a_large_partition_is_written_as_two_files_at_once(tmp_path: Path, spark: Any) -> None:
    table = tmp_path / "t"
    uri = str(table)
    _big_table(uri)
    assert sum(a["size"] for a in _adds(table)) >= 2 * MIN_LANE_BYTES
    before = engine_checksums(uri)["delta-rs"]

    report = deltaextras.rorder(uri, sort_by="utc_time", max_workers=1)[0]

    assert report.status == "committed" and report.files_added == 2, report
    adds = sorted(_adds(table), key=lambda a: json.loads(a["stats"])["minValues"]["node_id"])
    assert len(adds) == 2
    ranges = []
    for add in adds:
        pf = pq.ParquetFile(table / add["path"])
        content = pf.read()
        stats = json.loads(add["stats"])
        # The log's statistics are this file's own (each lane folds them for its own rows).
        assert stats["numRecords"] == content.num_rows == pf.metadata.num_rows
        for column in ("node_id", "data_values", "quality"):
            bounds = pc.min_max(content[column])
            assert stats["minValues"][column] == bounds["min"].as_py(), column
            assert stats["maxValues"][column] == bounds["max"].as_py(), column
        # In the layout: one value per row group, ascending, each value sorted by time.
        values = []
        for i in range(pf.metadata.num_row_groups):
            group = pf.read_row_group(i)
            nodes = group["node_id"].unique().to_pylist()
            assert len(nodes) == 1
            values.append(nodes[0])
            times = group["utc_time"].cast("int64").to_numpy()
            assert (times[1:] >= times[:-1]).all()
        assert values == sorted(values)
        ranges.append((values[0], values[-1], content.num_rows))
    (_, hi0, rows0), (lo1, _, rows1) = ranges
    assert hi0 < lo1, ranges  # disjoint: a point query's file statistics pick one file
    assert 0.4 <= rows0 / (rows0 + rows1) <= 0.6, ranges  # the lanes share the rows about evenly
    assert assert_engines_agree(uri, sail=spark, expected=before) == before
    again = deltaextras.rorder(uri, sort_by="utc_time", max_workers=1)[0]
    assert again.status == "skipped" and again.reason.startswith("already in layout"), again.reason


def test_a_small_partition_stays_one_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=4, nodes=40, rows=2_000)
    # a footer budget the 40 row groups stay within: the lanes alone decide here
    report = deltaextras.rorder(uri, sort_by="utc_time", max_workers=1, max_footer_bytes=1 << 20)[0]
    assert report.status == "committed" and report.files_added == 1, report


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    """(backend name, table root, direct storage options, emulator port)."""
    return emulator_root(request, "lanes")


def _parquet_keys(storage: TableStorage) -> list[str]:
    return sorted(k for k, _ in storage.list("") if k.endswith(".parquet"))


def _rorder_failing_uploads(name: str, uri: str, direct: dict[str, str], port: int, pattern: str) -> None:
    """rorder through a proxy that answers every PUT of the output files matching ``pattern`` (whole
    objects, or the parts of a multipart upload) with a 503 after the emulator took it; the run fails."""
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("PUT", pattern, "503", times=1000))
        options = through(name, direct, proxy, max_retries="1", retry_timeout="5s", timeout="10s")  # fail fast
        with pytest.raises(deltaextras.PartitionsFailedError):
            deltaextras.rorder(uri, sort_by="utc_time", storage_options=options, max_workers=1)
        assert rule.fired >= 1, f"the output upload was never made: {proxy.requests('PUT')}"


def test_a_failed_upload_in_one_lane_leaves_no_commit_and_no_file(cloud: tuple[str, str, dict[str, str], int]) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    _big_table(uri, direct)
    before = checksum(uri, direct)
    storage = TableStorage(uri, direct)
    files_before = _parquet_keys(storage)
    _rorder_failing_uploads(name, uri, direct, port, r"/part-00001-[^/]*\.zstd\.parquet$")  # the second file
    assert not [k for k, _ in storage.list("_delta_log/") if k.endswith("00000000000000000004.json")]
    assert _parquet_keys(storage) == files_before  # the other lane's file is gone too
    assert checksum(uri, direct) == before
    report = deltaextras.rorder(uri, sort_by="utc_time", storage_options=direct, max_workers=1)[0]
    assert report.status == "committed" and report.files_added == 2, report
    assert checksum(uri, direct) == before


def test_an_upload_that_landed_before_it_failed_is_deleted(cloud: tuple[str, str, dict[str, str], int]) -> None:
    """A small output file goes up in one PUT: the emulator stores it, the client sees a 503 on every
    try; the rewrite fails and deletes the object it cannot know is there."""
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    write_sensor_table(uri, direct, batches=3, nodes=10, rows=500)
    before = checksum(uri, direct)
    storage = TableStorage(uri, direct)
    files_before = _parquet_keys(storage)
    _rorder_failing_uploads(name, uri, direct, port, r"/part-00000-[^/]*\.zstd\.parquet$")
    assert _parquet_keys(storage) == files_before
    assert checksum(uri, direct) == before
