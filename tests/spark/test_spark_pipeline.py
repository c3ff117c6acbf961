"""The example pipeline (examples/sensor_pipeline.py) end to end on Sail."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from oracle import assert_layout

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sensor_pipeline.py"


@pytest.fixture(scope="module")
def pipeline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sensor_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sensor_pipeline"] = module
    spec.loader.exec_module(module)
    return module


def test_checksum_ignores_order_and_engine_types(pipeline: ModuleType) -> None:
    a = pa.table(
        {
            "node_id": pa.array([2, 1], pa.int32()),
            "utc_time": pa.array([1_000_000, 0], pa.timestamp("us", tz="UTC")),
            "value": [0.5, 1.5],
        }
    )
    b = pa.table(
        {
            "value": [1.5, 0.5],
            "utc_time": pa.array([0, 1_000_000_000], pa.timestamp("ns", tz="Etc/UTC")),
            "node_id": pa.array([1, 2], pa.int64()),
        }
    )
    assert pipeline.checksum(a) == pipeline.checksum(b)
    c = b.set_column(0, "value", pa.array([1.5, 0.25]))
    assert pipeline.checksum(a) != pipeline.checksum(c)
    assert pipeline.checksum(pa.concat_tables([a, a])) != pipeline.checksum(a)  # duplicates count


@pytest.mark.parametrize("runner", ["spark", "local"])
def test_pipeline_end_to_end(spark: Any, tmp_path: Path, pipeline: ModuleType, runner: str) -> None:
    table = str(tmp_path / "sensors")
    result = pipeline.run_pipeline(spark, table, nodes=120, batches=6, width=40, query_node=57, runner=runner)
    assert result.rows == 720
    assert result.query_rows == 6
    assert result.row_groups_before == 6  # one row group per appended file of range 1
    assert result.row_groups_after == 1
    assert result.query_identical
    # the same content before and after, through Sail and through deltalake
    assert result.checksum_spark_before == result.checksum_deltalake_before
    assert result.checksum_spark_after == result.checksum_deltalake_after
    assert result.checksum_spark_before == result.checksum_spark_after
    assert result.content_identical and result.ok
    assert result.constraint_rejected  # Sail enforces the table's CHECK constraint as well
    assert [p["status"] for p in result.partitions] == ["committed"] * 3
    assert assert_layout(table, "node_id") == 120
    assert DeltaTable(table).count() == 720
    # a second round appends on top of the optimized table; the optimizer folds it in again
    again = pipeline.run_pipeline(spark, table, nodes=120, batches=2, width=40, query_node=57, runner=runner)
    assert again.rows == 960 and again.row_groups_before == 3 and again.row_groups_after == 1
    assert again.ok


def test_pipeline_script_starts_its_own_sail(tmp_path: Path) -> None:
    table = tmp_path / "sensors"
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--table",
            str(table),
            "--nodes",
            "60",
            "--batches",
            "3",
            "--width",
            "20",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["content_identical"] and result["query_identical"]
    assert (result["row_groups_before"], result["row_groups_after"]) == (3, 1)
    assert result["rows"] == 180
    assert "started Sail at sc://127.0.0.1:" in proc.stderr


def test_pipeline_script_on_apache_spark_with_delta(tmp_path: Path) -> None:
    """The example end to end on a classic Apache Spark session with Delta Lake (its own process, its
    own JVM): Spark appends through the range helper, Delta itself refuses the append that violates
    the CHECK constraint, rorder_spark runs as Spark tasks, Spark's point query needs one row group."""
    import delta_spark

    reason = delta_spark.unavailable()
    if reason is not None:
        if delta_spark.required():
            pytest.fail(f"Spark with Delta is required here but unavailable: {reason}", pytrace=False)
        pytest.skip(f"Spark with Delta unavailable: {reason}")
    table = tmp_path / "sensors"
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--table",
            str(table),
            "--nodes",
            "60",
            "--batches",
            "3",
            "--width",
            "20",
            "--delta-jars",
            str(delta_spark.jar_cache_dir()),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["content_identical"] and result["query_identical"]
    assert result["constraint_rejected"]
    assert "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" in proc.stderr
    assert (result["row_groups_before"], result["row_groups_after"]) == (3, 1)
    assert result["rows"] == 180
    assert [p["status"] for p in result["partitions"]] == ["committed"] * 3
    assert "started Apache Spark 4.2.0 with Delta Lake" in proc.stderr
