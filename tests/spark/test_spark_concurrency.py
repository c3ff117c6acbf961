"""Spark keeps appending while the optimizer runs: nothing appended is lost or duplicated."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from oracle import assert_layout

from deltaextras import plan_messages, rorder_single
from deltaextras.app.spark import rorder_spark
from deltaextras.ops.ranges.ranges import RangeAppender, RangeSpec, create_range_table

SCHEMA = pa.schema([("node_id", pa.int64()), ("batch", pa.int64()), ("value", pa.float64())])
NODES = 30
WIDTH = 10


def spark_batch(spark: Any, batch: int) -> Any:
    return spark.range(0, NODES).selectExpr(
        "id AS node_id", f"CAST({batch} AS BIGINT) AS batch", f"id * 0.5 + {batch} AS value"
    )


def keys_via_spark(spark: Any, uri: str) -> list[tuple[int, int]]:
    rows = spark.read.format("delta").load(uri).select("node_id", "batch").collect()
    return sorted((r.node_id, r.batch) for r in rows)


def keys_via_deltalake(uri: str) -> list[tuple[int, int]]:
    t = pa.table(DeltaTable(uri).scan(columns=["node_id", "batch"]))
    return sorted(zip(t.column("node_id").to_pylist(), t.column("batch").to_pylist(), strict=True))


def expected_keys(batches: list[int]) -> list[tuple[int, int]]:
    return sorted((n, b) for b in batches for n in range(NODES))


def new_table(path: Path) -> str:
    uri = str(path)
    create_range_table(uri, SCHEMA, RangeSpec.fixed_width("node_id", WIDTH))
    return uri


def test_spark_append_between_rewrite_and_commit(spark: Any, tmp_path: Path) -> None:
    """A Spark append lands in the partition being rewritten after the rewrite read it: the optimizer's
    commit goes to a later version and the appended file stays live beside the rewritten one."""
    uri = new_table(tmp_path / "t")
    appender = RangeAppender(uri)
    for b in range(3):
        appender.append(spark_batch(spark, b))
    message = next(m for m in plan_messages(uri, sort_by="batch") if m["partition_value"] == "1")
    read_version = message["version"]
    appended: list[int] = []

    def append_during_rewrite(_outputs: Any) -> None:
        appender.append(spark_batch(spark, 100))
        appended.append(DeltaTable(uri).version())

    report = rorder_single(message, hooks={"after_rewrite": append_during_rewrite})
    assert report.status == "committed"
    assert appended and appended[0] == read_version + 1
    assert report.commit_version == read_version + 2  # behind the Spark append
    expected = expected_keys([0, 1, 2, 100])
    assert keys_via_spark(spark, uri) == expected
    assert keys_via_deltalake(uri) == expected
    # the next pass folds the appended file into the layout
    statuses = [r.status for r in rorder_spark(spark, uri, sort_by="batch").collect()]
    assert statuses == ["committed", "committed", "committed"]
    assert keys_via_deltalake(uri) == expected
    assert assert_layout(uri, "node_id") == NODES


def test_spark_appends_race_the_spark_runner(spark: Any, tmp_path: Path) -> None:
    """Two Spark writers append batches without pause while rorder_spark runs again and again."""
    uri = new_table(tmp_path / "t")
    for b in range(2):
        RangeAppender(uri).append(spark_batch(spark, b))
    done: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(first: int) -> None:
        appender = RangeAppender(uri)
        b = first
        try:
            while not stop.is_set() and b < first + 60:
                appender.append(spark_batch(spark, b))
                done.append(b)
                b += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(start,)) for start in (1000, 2000)]
    for t in threads:
        t.start()
    committed = 0
    runs = 0
    deadline = time.monotonic() + 20
    try:
        while (runs < 4 or committed < 6 or len(done) < 20) and time.monotonic() < deadline:
            reports = rorder_spark(spark, uri, sort_by="batch", raise_on_failure=False).collect()
            assert not [r for r in reports if r.status == "failed"], [r.asDict() for r in reports]
            committed += sum(1 for r in reports if r.status == "committed")
            runs += 1
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    print(f"{len(done)} Spark appends raced {runs} optimizer runs ({committed} partition commits)")
    assert runs >= 4 and committed >= 6 and len(done) >= 20
    expected = expected_keys([0, 1, *done])
    assert keys_via_spark(spark, uri) == expected
    assert keys_via_deltalake(uri) == expected
    # appends really interleaved with the optimizer's commits
    history = DeltaTable(uri).history()
    operations = [h.get("operation") for h in reversed(history)]
    first_rewrite = operations.index("OPTIMIZE")
    assert "WRITE" in operations[first_rewrite:]
