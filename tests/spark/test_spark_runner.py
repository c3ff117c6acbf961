"""The Spark runner (deltaextras.app.spark): partition jobs as mapInArrow tasks over Spark Connect (Sail)."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import assert_layout, checksum

from deltaextras import PartitionReport, PartitionsFailedError, plan_messages
from deltaextras.app.spark import REPORT_SCHEMA, report_struct_type, rorder_spark, run_message_batch, run_messages_spark
from deltaextras.ops.maintenance.inspect import delta_files, read_amplification
from deltaextras.ops.ranges.ranges import RangeAppender, RangeSpec, create_range_table

SCHEMA = pa.schema([("node_id", pa.int64()), ("batch", pa.int64()), ("value", pa.float64())])


def ranged_table(path: Path, *, nodes: int = 40, width: int = 10, batches: int = 4) -> str:
    """A table with ``nodes / width`` range partitions, each with one file per batch."""
    uri = str(path)
    create_range_table(uri, SCHEMA, RangeSpec.fixed_width("node_id", width))
    appender = RangeAppender(uri)
    for b in range(batches):
        ids = [(n * 7 + b) % nodes for n in range(nodes)]  # every node, shuffled
        appender.append(pa.table({"node_id": ids, "batch": [b] * nodes, "value": [n / 3 + b for n in ids]}))
    return uri


def test_report_schema_covers_partition_report() -> None:
    assert REPORT_SCHEMA.names == [f.name for f in fields(PartitionReport)]
    assert REPORT_SCHEMA.field("retryable").type == pa.bool_()
    assert REPORT_SCHEMA.field("seconds").type == pa.float64()


def test_run_message_batch_without_spark(tmp_path: Path) -> None:
    uri = ranged_table(tmp_path / "t", nodes=20, width=10, batches=2)
    messages = [json.dumps(m) for m in plan_messages(uri)]
    batch = pa.record_batch({"seq": pa.array([7, 3], pa.int64()), "message": messages})
    out = run_message_batch(batch, None)
    assert out.schema.names == ["seq", *REPORT_SCHEMA.names]
    assert out.column("seq").to_pylist() == [7, 3]
    assert out.column("status").to_pylist() == ["committed", "committed"]
    bad = run_message_batch(pa.record_batch({"message": ["not json", json.dumps({"path": uri})]}), None)
    rows = bad.to_pylist()
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert rows[0]["error_type"] == "JSONDecodeError" and rows[1]["error_type"] == "MessageError"
    assert rows[1]["retryable"] is False


def test_rorder_spark_rewrites_every_partition(spark: Any, tmp_path: Path) -> None:
    uri = ranged_table(tmp_path / "t", nodes=40, width=10, batches=4)
    before = checksum(uri)
    assert read_amplification(uri, "node_id") > 1
    df = rorder_spark(spark, uri, sort_by="batch")
    assert df.schema == report_struct_type()
    rows = [r.asDict() for r in df.collect()]
    assert [r["partition"] for r in rows] == [f"node_id_range={i}" for i in range(4)]
    assert {r["status"] for r in rows} == {"committed"}
    assert all(r["files_removed"] == 4 and r["files_added"] == 1 and r["values"] == 10 for r in rows)
    versions = sorted(r["commit_version"] for r in rows)
    assert len(set(versions)) == 4  # one commit per partition
    assert checksum(uri) == before
    assert assert_layout(uri, "node_id") == 40
    assert read_amplification(uri, "node_id") == pytest.approx(1.0)
    # Rows within each row group (one node) are in sort_by order.
    for key in delta_files(uri):
        pf = pq.ParquetFile(os.path.join(uri, key))
        for i in range(pf.num_row_groups):
            batch_col = pf.read_row_group(i, columns=["batch"]).column(0).to_pylist()
            assert batch_col == sorted(batch_col) == list(range(4))
    again = [r.asDict() for r in rorder_spark(spark, uri, sort_by="batch").collect()]
    assert [r["status"] for r in again] == ["skipped"] * 4
    assert all(r["reason"].startswith("already in layout") for r in again)
    # the report DataFrame is a local relation: reading it again runs nothing
    assert df.count() == 4 and DeltaTable(uri).version() == max(versions)


def test_rorder_spark_max_tasks_and_partitions(spark: Any, tmp_path: Path) -> None:
    uri = ranged_table(tmp_path / "t", nodes=50, width=10, batches=2)
    df = rorder_spark(spark, uri, partitions=[4, 0, 2], max_tasks=2)
    rows = df.collect()
    assert [(r.partition, r.status) for r in rows] == [
        ("node_id_range=0", "committed"),
        ("node_id_range=2", "committed"),
        ("node_id_range=4", "committed"),
    ]
    rest = rorder_spark(spark, uri, max_tasks=1).collect()
    assert [r.status for r in rest] == ["skipped", "committed", "skipped", "committed", "skipped"]
    assert assert_layout(uri, "node_id") == 50


def test_rorder_spark_reports_failures(spark: Any, tmp_path: Path) -> None:
    uri = ranged_table(tmp_path / "t", nodes=30, width=10, batches=2)
    # node 15 gets two different rows for batch 0: a unique_by=["node_id", "batch"] violation in range 1
    write_deltalake(
        uri,
        pa.table({"node_id": [15], "batch": [0], "value": [-1.0], "node_id_range": [1]}),
        mode="append",
    )
    before = checksum(uri)
    with pytest.raises(PartitionsFailedError) as info:
        rorder_spark(spark, uri, unique_by=["node_id", "batch"])
    report = info.value.report
    assert [r.status for r in report] == ["committed", "failed", "committed"]
    assert report[1].error_type == "DuplicateKeyError" and report[1].retryable is False
    df = rorder_spark(spark, uri, unique_by=["node_id", "batch"], raise_on_failure=False)
    rows = df.collect()
    assert [r.status for r in rows] == ["skipped", "failed", "skipped"]
    assert rows[1].partition == "node_id_range=1" and rows[1].error_type == "DuplicateKeyError"
    assert checksum(uri) == before  # nothing lost, nothing duplicated


def test_rorder_spark_with_nothing_to_do(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    create_range_table(uri, SCHEMA, RangeSpec.fixed_width("node_id", 10))
    df = rorder_spark(spark, uri)
    assert df.count() == 0 and df.schema == report_struct_type()
    assert run_messages_spark(spark, []) == []
    with pytest.raises(Exception, match="max_tasks"):
        run_messages_spark(spark, [{"path": uri}], max_tasks=0)


def test_udfs_run_in_the_sail_server_process(spark: Any, sail: Any) -> None:
    """Sail 0.7.2 runs mapInArrow functions in the server's embedded interpreter: deltaextras must be
    installed where ``sail spark server`` runs (docs/spark.md says so)."""

    def probe(batches: Any) -> Any:
        import os as _os
        import sys as _sys

        import deltaextras

        for b in batches:
            n = b.num_rows
            yield pa.record_batch(
                {
                    "pid": [_os.getpid()] * n,
                    "version": [deltaextras.__version__] * n,
                    "python": [_sys.executable] * n,
                }
            )

    rows = spark.range(0, 3).repartition(3).mapInArrow(probe, "pid long, version string, python string").collect()
    import deltaextras

    assert {r.version for r in rows} == {deltaextras.__version__}
    assert {r.pid for r in rows} == {sail.process.pid}
    assert sail.process.pid != os.getpid()

    def pandas_probe(frames: Any) -> Any:
        import os as _os

        for f in frames:
            yield f.assign(pid=_os.getpid())

    rows = spark.range(0, 2).mapInPandas(pandas_probe, "id long, pid long").collect()
    assert {r.pid for r in rows} == {sail.process.pid}  # mapInPandas works over Spark Connect as well


def test_rorder_spark_on_an_unpartitioned_table(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    for b in range(3):
        write_deltalake(uri, pa.table({"k": [3, 1, 2], "batch": [b] * 3}), mode="append")
    rows = rorder_spark(spark, uri, by="k", sort_by="batch").collect()
    assert [(r.partition, r.status, r.values, r.row_groups) for r in rows] == [(None, "committed", 3, 3)]
    assert assert_layout(uri, "k") == 3
