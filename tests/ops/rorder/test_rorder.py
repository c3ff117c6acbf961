"""The core engine on real tables: layout, content, idempotency and concurrency, on every backend."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import assert_layout, checksum, live_adds, row_groups, scan, sensor_batch, write_sensor_table

from deltaextras import (
    CommitConflictError,
    DuplicateKeyError,
    InvalidArgumentError,
    MessageError,
    TableNotFoundError,
    plan_messages,
    rorder,
    rorder_setup_multi,
    rorder_single,
)
from deltaextras.core.log import list_log
from deltaextras.core.storage import TableStorage


def _latest(uri: str, opts: dict[str, str]) -> int:
    return DeltaTable(uri, storage_options=opts or None).version()


# ---------------------------------------------------------------------- layout and content, every backend
def test_sensor_table_gets_one_row_group_per_node(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    write_sensor_table(uri, opts, batches=5, nodes=25, ranges=2)
    before = checksum(uri, opts)
    report = rorder(uri, sort_by="utc_time", storage_options=opts, max_workers=1)
    assert [r.status for r in report] == ["committed", "committed"]
    assert checksum(uri, opts) == before
    assert assert_layout(uri, "node_id", opts) == 50
    for group in row_groups(uri, opts):  # within a node, rows are ordered by utc_time
        times = group.column("utc_time").to_pylist()
        assert times == sorted(times)
    # Output files carry full statistics (numRecords, min/max, null counts) for data skipping.
    for add in live_adds(uri, opts):
        assert add["num_records"] > 0 and add["min.node_id"] is not None and add["null_count.node_id"] == 0
    again = rorder(uri, sort_by="utc_time", storage_options=opts, max_workers=1)
    assert [r.status for r in again] == ["skipped", "skipped"]
    assert all("already in layout" in r.reason for r in again)


@pytest.mark.parametrize(
    "kind",
    ["int", "string", "timestamp", "nulls"],
)
def test_key_types_and_nulls(backend: Any, kind: str) -> None:
    rng = np.random.default_rng(3)
    n = 600
    base = rng.integers(0, 12, n)
    if kind == "int":
        key = pa.array(base, pa.int32())
    elif kind == "string":
        key = pa.array([f"node-{v:03d}" for v in base])
    elif kind == "timestamp":
        key = pa.array(base * 3_600_000_000, pa.timestamp("us"))
    else:
        key = pa.array([None if v % 4 == 0 else int(v) for v in base], pa.int64())
    uri, opts = backend.new_table_uri(), backend.storage_options
    for i in range(3):
        part = slice(i * 200, (i + 1) * 200)
        write_deltalake(
            uri,
            pa.table({"k": key[part], "seq": pa.array(np.arange(n)[part]), "k_range": pa.array([0] * 200)}),
            partition_by=["k_range"],
            mode="append",
            storage_options=opts or None,
        )
    before = checksum(uri, opts)
    report = rorder(uri, sort_by=[("seq", "descending")], max_workers=1, storage_options=opts)
    assert report[0].status == "committed"
    assert checksum(uri, opts) == before
    groups = assert_layout(uri, "k", opts)
    distinct = len(set(key.to_pylist()))
    assert groups == distinct  # nulls form one group of their own
    assert scan(uri, opts).num_rows == n
    for group in row_groups(uri, opts):  # inside a value, rows follow sort_by (descending seq)
        seq = group.column("seq").to_pylist()
        assert seq == sorted(seq, reverse=True)


def test_multi_pass_spill_output_equals_single_pass(backend: Any, tmp_path: Any) -> None:
    a, b = str(tmp_path / "a"), backend.new_table_uri()
    opts = backend.storage_options
    write_sensor_table(a, batches=4, nodes=40, rows=1500, seed=11)
    write_sensor_table(b, opts, batches=4, nodes=40, rows=1500, seed=11)
    ra = rorder(a, sort_by="utc_time", max_workers=1)
    rb = rorder(b, sort_by="utc_time", max_workers=1, memory_budget=60_000, storage_options=opts)
    assert ra[0].passes == 1
    assert rb[0].passes > 2 and rb[0].spilled_bytes > 0
    assert checksum(a) == checksum(b, opts)
    assert assert_layout(b, "node_id", opts) == assert_layout(a, "node_id") == 40


def test_target_file_size_splits_on_value_boundaries(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=3, nodes=30, rows=3000)
    before = checksum(uri)
    report = rorder(uri, sort_by="utc_time", target_file_size=20_000, max_workers=1)
    assert report[0].files_added > 3
    assert checksum(uri) == before
    assert assert_layout(uri, "node_id") == 30  # disjoint, ascending files


def test_schema_and_types_preserved(tmp_path: Any) -> None:
    import datetime as dt
    import decimal

    uri = str(tmp_path / "t")
    n = 30
    table = pa.table(
        {
            "k": pa.array([i % 5 for i in range(n)], pa.int64()),
            "ts_ntz": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i) for i in range(n)], pa.timestamp("us")
            ),
            "ts_utc": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(10, 2)),
            "tags": pa.array([[f"t{i}", None] for i in range(n)], pa.list_(pa.string())),
            "point": pa.array(
                [{"x": float(i), "y": None} for i in range(n)], pa.struct([("x", pa.float64()), ("y", pa.float64())])
            ),
            "d": pa.array([dt.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
            "k_range": pa.array([0] * n, pa.int64()),
        }
    )
    for i in range(3):
        write_deltalake(uri, table.slice(i * 10, 10), partition_by=["k_range"], mode="append")
    schema_before = DeltaTable(uri).schema().to_json()
    before = checksum(uri)
    rorder(uri, sort_by="ts_utc", max_workers=1)
    assert DeltaTable(uri).schema().to_json() == schema_before
    assert checksum(uri) == before
    assert assert_layout(uri, "k") == 5


# ---------------------------------------------------------------------- API surface and errors
def test_setup_multi_and_messages_match_original_shape(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=2, nodes=5, rows=50, ranges=3)
    version, table_uri, name, by_group = rorder_setup_multi(uri)
    assert (version, name, by_group.num_rows) == (1, "node_id_range", 3)
    assert by_group.column_names == ["partition_values", "path_list", "size_bytes_list"]
    msgs = plan_messages(uri, sort_by="utc_time")
    assert [m["partition_value"] for m in msgs] == ["0", "1", "2"]
    # The original's message keys (files as [path, size]) are accepted as they are.
    original = {
        "version": version,
        "path": table_uri,
        "partition_name": name,
        "partition_value": by_group["partition_values"][0].as_py(),
        "files": [
            [p, s]
            for p, s in zip(by_group["path_list"][0].as_py(), by_group["size_bytes_list"][0].as_py(), strict=True)
        ],
        "sort_by": "utc_time",
        "unique_by": None,
        "max_materialize_size": 10_000_000,
    }
    assert rorder_single(original).status == "committed"


def test_errors_are_one_line_and_write_nothing(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=2, nodes=5, rows=50)
    versions = sorted(list_log(TableStorage(uri)).commits)
    cases = [
        ({"path": uri, "partition_value": 0, "colour": "red"}, MessageError, "colour"),
        ({"path": uri, "partition_value": 0, "version": "3"}, MessageError, "version"),
        ({"path": uri}, MessageError, "partition_value"),
        ({"path": uri, "partition_value": 0, "by": "nope"}, InvalidArgumentError, "nope"),
        ({"path": uri, "partition_value": 0, "sort_by": [["utc_time", "up"]]}, MessageError, "ascending"),
        ({"path": str(tmp_path / "missing"), "partition_value": 0}, TableNotFoundError, "no Delta table"),
    ]
    for message, error, needle in cases:
        with pytest.raises(error) as info:
            rorder_single(message)
        text = str(info.value)
        assert "\n" not in text and needle in text
    assert sorted(list_log(TableStorage(uri)).commits) == versions


def test_partition_without_range_suffix_needs_by(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": [1, 2], "day": ["a", "b"]}), partition_by=["day"])
    with pytest.raises(InvalidArgumentError, match="pass by="):
        rorder(uri)
    assert [r.status for r in rorder(uri, by="k", max_workers=1)] == ["skipped", "skipped"]


def test_unpartitioned_table_is_one_unit_with_by(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(uri, pa.table({"k": [3, 1, 2], "i": [i] * 3}), mode="append")
    with pytest.raises(InvalidArgumentError, match="by="):
        rorder(uri)
    report = rorder(uri, by="k", max_workers=1)
    assert report[0].partition is None and report[0].status == "committed"
    assert assert_layout(uri, "k") == 3


def test_unique_by_collapses_identical_rows_and_refuses_conflicts(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    rows = pa.table({"node_id": [1, 1, 2], "utc_time": [10, 20, 10], "v": [1.0, 2.0, 3.0], "node_id_range": [0, 0, 0]})
    write_deltalake(uri, rows, partition_by=["node_id_range"])
    write_deltalake(uri, rows.slice(0, 2), partition_by=["node_id_range"], mode="append")  # exact duplicates
    report = rorder(uri, unique_by="utc_time", sort_by="utc_time", max_workers=1)
    assert report[0].duplicates_removed == 2
    assert scan(uri).num_rows == 3
    conflicting = pa.table({"node_id": [2], "utc_time": [10], "v": [99.0], "node_id_range": [0]})
    write_deltalake(uri, conflicting, partition_by=["node_id_range"], mode="append")
    version = _latest(uri, {})
    with pytest.raises(DuplicateKeyError, match="utc_time"):
        rorder_single({"path": uri, "partition_value": 0, "unique_by": "utc_time"})
    assert _latest(uri, {}) == version


def test_dynamodb_locking_tables_are_refused() -> None:
    from deltaextras import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="DynamoDB"):
        rorder_single(
            {"path": "s3://bucket/t", "partition_value": 0},
            storage_options={"AWS_S3_LOCKING_PROVIDER": "dynamodb"},
        )


# ---------------------------------------------------------------------- concurrency, every backend
def test_append_between_plan_and_commit_survives(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    write_sensor_table(uri, opts, batches=3, nodes=10, rows=100)
    (message,) = plan_messages(uri, storage_options=opts, sort_by="utc_time")
    extra = sensor_batch(np.random.default_rng(99), 10, 77)
    write_deltalake(uri, extra, partition_by=["node_id_range"], mode="append", storage_options=opts or None)
    expected = checksum(uri, opts)
    report = rorder_single(message, storage_options=opts)
    assert report.status == "committed" and report.commit_version == message["version"] + 2
    assert checksum(uri, opts) == expected
    assert scan(uri, opts).num_rows == 3 * 100 + 77


def test_delete_of_an_input_between_plan_and_commit_aborts(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    write_sensor_table(uri, opts, batches=3, nodes=10, rows=100)

    def delete_rows(_outputs: Any) -> None:
        DeltaTable(uri, storage_options=opts or None).delete("node_id = 3")

    version = _latest(uri, opts)
    with pytest.raises(CommitConflictError, match="removed input"):
        rorder_single({"path": uri, "partition_value": 0}, storage_options=opts, hooks={"after_rewrite": delete_rows})
    assert _latest(uri, opts) == version + 1  # only the delete committed
    assert 3 not in scan(uri, opts).column("node_id").to_pylist()
    # Our output files were removed again: every data file on storage is live or was live before.
    from deltaextras.core.storage import TableStorage

    st = TableStorage(uri, opts)
    on_disk = {k for k, _ in st.list("") if k.endswith(".c000.zstd.parquet") and "-c000" not in k}
    assert on_disk == set()


def test_same_message_twice_commits_once(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    write_sensor_table(uri, opts, batches=3, nodes=10, rows=100)
    (message,) = plan_messages(uri, storage_options=opts)
    first = rorder_single(message, storage_options=opts)
    second = rorder_single(message, storage_options=opts)
    assert first.status == "committed" and second.status == "skipped"
    assert "already committed" in second.reason
    assert _latest(uri, opts) == message["version"] + 1


def test_two_workers_on_one_partition_one_commits(backend: Any) -> None:
    uri, opts = backend.new_table_uri(), backend.storage_options
    write_sensor_table(uri, opts, batches=3, nodes=10, rows=100)
    before = checksum(uri, opts)
    (message,) = plan_messages(uri, storage_options=opts)
    barrier = threading.Barrier(2, timeout=60)
    results: list[Any] = []

    def worker() -> None:
        try:
            results.append(
                rorder_single(message, storage_options=opts, hooks={"before_commit": lambda _v: barrier.wait()})
            )
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(getattr(r, "status", repr(r)) for r in results)
    assert statuses == ["committed", "skipped"], results
    assert _latest(uri, opts) == message["version"] + 1
    assert checksum(uri, opts) == before


def test_result_reads_the_same_through_sail(tmp_path: Any, spark: Any) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=4, nodes=15, rows=200, ranges=2)
    before = checksum(uri)
    rorder(uri, sort_by="utc_time", max_workers=2)
    from oracle import rows_checksum

    via_spark = spark.read.format("delta").load(uri).toArrow()
    via_spark = via_spark.cast(scan(uri).schema) if via_spark.schema != scan(uri).schema else via_spark
    assert rows_checksum(via_spark) == before == checksum(uri)


def test_checkpoint_written_at_interval(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(
        uri,
        pa.table({"k": [2, 1], "k_range": [0, 0]}),
        partition_by=["k_range"],
        configuration={"delta.checkpointInterval": "2"},
    )
    write_deltalake(uri, pa.table({"k": [5, 4], "k_range": [0, 0]}), partition_by=["k_range"], mode="append")
    report = rorder(uri, max_workers=1)
    assert report[0].commit_version == 2
    assert (tmp_path / "t" / "_delta_log" / "00000000000000000002.checkpoint.parquet").exists()
    assert sorted(scan(uri).column("k").to_pylist()) == [1, 2, 4, 5]  # read through the new checkpoint


def test_stale_and_future_versions_are_refused(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=3, nodes=5, rows=40)
    DeltaTable(uri).create_checkpoint()
    (tmp_path / "t" / "_delta_log" / "00000000000000000000.json").unlink()  # log retention cleaned it up
    with pytest.raises(CommitConflictError, match="cleaned up"):
        rorder_single({"path": uri, "version": 0, "partition_value": 0})
    with pytest.raises(InvalidArgumentError, match="does not exist yet"):
        rorder_single({"path": uri, "version": 9, "partition_value": 0})
    assert rorder_single({"path": uri, "version": 2, "partition_value": 0}).status == "committed"
