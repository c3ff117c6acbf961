"""One value semantics everywhere (Spark's: ``-0.0 = 0.0``, every NaN equal to every NaN and above
``+inf``, nulls one group; partition values compared as typed values; decimal statistics never tighter
than the values): de-duplication, carried deletes, the change data feed, pass planning, statistics
pruning and partition units agree, and an unknown sort direction is refused. Tables are written by
delta-rs; content is checked through delta-rs's reader with Spark's value equality (tests/support/oracle.py)."""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, WriterProperties, write_deltalake
from oracle import change_feed, row_groups, rows_checksum, scan, spark_checksum, spark_value
from values_support import live_paths, race, winner_delete

from deltaextras import delete, enable_deletion_vectors, plan_table, rorder, rorder_single
from deltaextras.app import cli
from deltaextras.errors import InvalidArgumentError
from deltaextras.ops.rorder.plan_stream import plan_table_lean
from deltaextras.ops.rorder.rorder import plan_messages


def _nan(payload: int) -> float:
    """A quiet NaN with the given payload bits."""
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | payload))[0]


NAN_A, NAN_B = _nan(1), _nan(2)


def _one(k: int, f: float) -> pa.Table:
    return pa.table({"k": pa.array([k], pa.int64()), "f": pa.array([f], pa.float64()), "k_range": [0]})


# ------------------------------------------------------------------ 1. a twin appended after the delete read
@pytest.mark.parametrize(("stored", "appended", "predicate"), [(0.0, -0.0, "f = 0"), (NAN_A, NAN_B, "f = 'NaN'")])
def test_a_carried_delete_keeps_the_twin_it_never_read(
    tmp_path: Path, stored: float, appended: float, predicate: str
) -> None:
    """File A holds (1, 0.0); a delete of ``f = 0`` reads; (1, -0.0) is appended; rorder with
    ``unique_by=["f"]`` keeps one row for both; the delete commits a vector on A; rorder carries it and
    must keep its row: the appended twin is live. (The same with NaNs of two payloads.)"""
    path = str(tmp_path / "t")
    write_deltalake(path, _one(1, stored), partition_by=["k_range"])
    enable_deletion_vectors(path)

    read = live_paths(path)  # the winner reads A, then (1, -0.0) is appended
    write_deltalake(path, _one(1, appended), partition_by=["k_range"], mode="append")
    (ours,), done = race(path, [lambda: winner_delete(path, read, predicate)], unique_by=["f"])
    assert done == [1]
    assert ours.status == "committed" and ours.concurrent_deletes_carried == 1
    assert spark_checksum(path) == rows_checksum(_one(1, appended), spark=True)


# ------------------------------------------------------------------ 2. the change feed of a carried rewrite
def test_the_change_feed_of_a_carried_rewrite_is_the_serial_one(tmp_path: Path) -> None:
    """rorder drops one of two twins (a ``cdc`` deletion); a concurrent delete removes both twins; the
    feed must show the two deletions a serial order records (delete, then a rewrite with nothing left to
    drop), not three."""
    path = str(tmp_path / "t")
    rows = pa.table({"node_id": [1, 1, 2, 2], "utc_time": [10, 10, 20, 20], "v": [0.5, 0.5, 1.0, 1.0]})
    rows = rows.append_column("node_id_range", pa.array([0] * 4, pa.int64()))
    write_deltalake(path, rows, partition_by=["node_id_range"], configuration={"delta.enableChangeDataFeed": "true"})
    enable_deletion_vectors(path)
    start = DeltaTable(path).version() + 1
    fired: list[int] = []

    def concurrent_delete(_version: int) -> None:
        if not fired:
            fired.append(delete(path, "node_id = 1").rows_deleted)

    message = {"path": path, "partition_value": 0, "sort_by": ["utc_time"], "unique_by": ["utc_time"]}
    report = rorder_single(message, hooks={"before_commit": concurrent_delete})
    assert fired == [2] and report.status == "committed" and report.concurrent_deletes_carried == 1
    assert spark_checksum(path) == rows_checksum(rows.take([2]), spark=True)
    feed = change_feed(path, start)
    deletes = feed.filter(pc.equal(feed.column("_change_type"), "delete")).drop_columns(["_change_type"])
    assert rows_checksum(deletes.select(rows.column_names), spark=True) == rows_checksum(
        rows.take([0, 1, 3]), spark=True
    )
    ours = json.loads((Path(path) / "_delta_log" / f"{report.commit_version:020d}.json").read_text().splitlines()[0])
    assert ours["commitInfo"]["operationMetrics"]["numDeletedRows"] == "1"
    named = {
        json.loads(line)["cdc"]["path"]
        for entry in (Path(path) / "_delta_log").glob("*.json")
        for line in entry.read_text().splitlines()
        if '"cdc"' in line
    }
    on_disk = {p.relative_to(path).as_posix() for p in (Path(path) / "_change_data").rglob("*.parquet")}
    assert on_disk == named  # the change file written before the carry is gone with it


# ------------------------------------------------------------------ 3. decimal statistics
@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors"])
def test_delete_finds_a_decimal_its_statistics_rounded(tmp_path: Path, mode: str) -> None:
    """delta-rs writes decimal statistics through doubles (12345678901234567.89 becomes
    1.2345678901234568e16, above the value): the file must not be pruned."""
    path = str(tmp_path / "t")
    typ = pa.decimal128(38, 2)
    big = pa.table({"d": pa.array([Decimal("12345678901234567.89")], typ), "k": [1]})
    small = pa.table({"d": pa.array([Decimal("1.00")], typ), "k": [2]})
    write_deltalake(path, big)
    write_deltalake(path, small, mode="append")
    if mode == "deletion_vectors":
        enable_deletion_vectors(path)
    report = delete(path, "d = 12345678901234567.89", mode=mode)
    assert report.rows_deleted == 1
    assert rows_checksum(scan(path)) == rows_checksum(small)


def test_an_in_list_matches_nan_of_any_payload(tmp_path: Path) -> None:
    """``f IN ('NaN', 0)`` deletes every NaN (whatever its payload) and both zeros, as ``f = 'NaN'`` does."""
    path = str(tmp_path / "t")
    rows = pa.table({"f": pa.array([NAN_A, NAN_B, -0.0, 0.0, 1.0, None], pa.float64()), "k": list(range(6))})
    write_deltalake(path, rows)
    assert delete(path, "f IN ('NaN', 0)").rows_deleted == 4
    assert rows_checksum(scan(path)) == rows_checksum(rows.take([4, 5]))


# ------------------------------------------------------------------ 4. both zeros in the row-group column
def test_a_delete_of_both_zeros_is_carried(tmp_path: Path) -> None:
    """A double ``by`` column holding 0.0 and -0.0: a concurrent delete of ``f = 0`` is carried (the
    rows of both zeros are found in the rewritten files) and nothing else goes."""
    path = str(tmp_path / "t")
    f = [0.0, -0.0, 0.0, 1.0, -0.0, 2.0, NAN_A]
    rows = pa.table({"f": pa.array(f), "seq": pa.array(range(len(f)), pa.int64()), "f_range": [0] * len(f)})
    write_deltalake(path, rows.slice(0, 4), partition_by=["f_range"])
    write_deltalake(path, rows.slice(4), partition_by=["f_range"], mode="append")
    enable_deletion_vectors(path)
    (message,) = plan_messages(path, sort_by="seq")
    fired: list[int] = []

    def concurrent_delete(_version: int) -> None:
        if not fired:
            fired.append(delete(path, "f = 0").rows_deleted)

    report = rorder_single(message, hooks={"before_commit": concurrent_delete})
    assert fired == [4] and report.status == "committed" and report.deleted_rows_carried == 4
    assert spark_checksum(path) == rows_checksum(rows.take([3, 5, 6]), spark=True)


# ------------------------------------------------------------------ 5. NaN in a multi-pass rewrite
def test_a_multi_pass_rewrite_keeps_every_nan_row(tmp_path: Path) -> None:
    """Input above the memory budget, a double ``by`` column with NaNs of two payloads, both zeros,
    infinities and nulls: every row is written once, each row group holds one value (Spark's)."""
    path = str(tmp_path / "t")
    rng = np.random.default_rng(7)
    pool = [NAN_A, NAN_B, 0.0, -0.0, float("inf"), float("-inf"), None] + [float(v) for v in range(40)]
    written = []
    for b in range(3):
        n = 8000
        values = [pool[i] for i in rng.integers(0, len(pool), n)]
        t = pa.table(
            {"f": pa.array(values, pa.float64()), "seq": pa.array(range(b * n, (b + 1) * n)), "f_range": [0] * n}
        )
        write_deltalake(
            path,
            t,
            partition_by=["f_range"],
            mode="append",
            writer_properties=WriterProperties(max_row_group_size=2000),
        )
        written.append(t)
    (report,) = rorder(path, sort_by="seq", memory_budget=60_000, max_workers=1)
    assert report.status == "committed" and report.passes > 1
    assert spark_checksum(path) == rows_checksum(pa.concat_tables(written), spark=True)
    for group in row_groups(path):
        assert len({spark_value(v) for v in group.column("f").to_pylist()}) == 1


# ------------------------------------------------------------------ 6. one partition value, two spellings
def test_a_timestamp_partition_spelled_two_ways_is_one_unit(tmp_path: Path) -> None:
    """``2024-01-01 00:00:00.000000`` and ``2024-01-01 00:00:00`` are one partition value (both valid
    spellings in the log): one unit, and ``unique_by`` holds across both files."""
    path = str(tmp_path / "t")
    ts = pa.array([dt.datetime(2024, 1, 1)] * 2, pa.timestamp("us"))
    rows = pa.table({"k": pa.array([1, 2], pa.int64()), "v": [1.0, 2.0], "ts": ts})
    write_deltalake(path, rows, partition_by=["ts"])
    write_deltalake(path, rows.slice(0, 1), partition_by=["ts"], mode="append")
    entry = Path(path) / "_delta_log" / f"{1:020d}.json"
    text = entry.read_text()
    assert '"ts":"2024-01-01 00:00:00.000000"' in text
    entry.write_text(text.replace('"ts":"2024-01-01 00:00:00.000000"', '"ts":"2024-01-01 00:00:00"'))

    assert len(plan_table(path, by="k", unique_by="k").to_rewrite()) == 1
    (lean,) = plan_table_lean(path, by="k", unique_by="k").to_rewrite()  # the orchestrator's plan
    assert lean.tally.files == 2
    (report,) = rorder(path, by="k", unique_by="k", max_workers=1)
    assert report.status == "committed" and report.duplicates_removed == 1
    assert spark_checksum(path) == rows_checksum(rows, spark=True)


# ------------------------------------------------------------------ 7. sort directions
def test_an_unknown_sort_direction_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "t")
    rows = pa.table({"node_id": [1, 1, 2], "utc_time": [3, 1, 2], "node_id_range": [0, 0, 0]})
    write_deltalake(path, rows, partition_by=["node_id_range"])
    capsys.readouterr()
    assert cli.main(["run", path, "--sort-by", "utc_time:down"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'down'" in err[0] and "asc, ascending, desc or descending" in err[0]
    assert DeltaTable(path).version() == 0
    with pytest.raises(InvalidArgumentError, match="asc, ascending, desc or descending"):
        rorder(path, sort_by=[("utc_time", "down")])

    assert cli.main(["run", path, "--sort-by", "utc_time:DESC"]) == 0
    info = json.loads((Path(path) / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert json.loads(info["operationParameters"]["sortBy"]) == [["utc_time", "descending"]]
    assert rows_checksum(scan(path)) == rows_checksum(rows)
    for group in row_groups(path):
        times = group.column("utc_time").to_pylist()
        assert times == sorted(times, reverse=True)
