"""A week in the life, CI-sized: tens of nodes, a few simulated hours, every fault of ``bench/soak.py``
injected at least once (a duplicated delivery, a manual rerun, a poison body, a worker SIGKILLed
mid-rewrite and one after its commit, a storage reply dropped after the write landed, the users' UPDATE
racing the workers, a retention delete with deletion vectors and vacuum), once through the Azure Functions
app on Azurite and once through the AWS Lambda adapter on moto S3 + SQS, there once more with a third
table ``CLUSTER BY (node_id)`` that Apache Spark creates, appends to, updates and merges into. The same driver as the
benchmark; only the correctness targets are asserted, never a timing: after every simulated hour the
content of both tables, read through deltalake and through polars, equals the ground truth (no row lost,
duplicated or resurrected, exactly once after every crash and redelivery), and nothing lands on the
poison or dead-letter queue but the injected poison."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTS = {
    "duplicate",
    "rerun",
    "poison",
    "killed:after_output",
    "killed:after_commit",
    "dropped_reply",
    "update_race",
    "retention_delete",
    "vacuum",
}
ENV = (
    "DELTAEXTRAS_TABLES",
    "DELTAEXTRAS_QUEUE",
    "DELTAEXTRAS_POISON_QUEUE",
    "DELTAEXTRAS_SCHEDULE",
    "DELTAEXTRAS_STORAGE",
    "DELTAEXTRAS_STORAGE_OPTIONS",
    "AZURE_CLIENT_ID",
    "IDENTITY_ENDPOINT",
    "DELTAEXTRAS_QUEUE_URL",
    "DELTAEXTRAS_DLQ_URL",
    "SOAK_CLOUD",
    "SOAK_HOUR_SECONDS",
    "AWS_ENDPOINT_URL",
    "AWS_ALLOW_HTTP",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
)


def _soak() -> object:
    spec = importlib.util.spec_from_file_location("soak", REPO / "bench" / "soak.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "cloud",
    [
        pytest.param("azure", marks=pytest.mark.azurite),
        pytest.param("aws", marks=pytest.mark.moto),
        pytest.param("aws-clustered", marks=[pytest.mark.moto, pytest.mark.delta_spark]),
    ],
)
def test_a_ci_sized_week_keeps_every_row_exactly_once(
    cloud: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = request.getfixturevalue("azurite" if cloud == "azure" else "moto")
    clustered = cloud == "aws-clustered"
    spark = request.getfixturevalue("delta_spark") if clustered else None
    for name in ENV:  # the driver sets the app's settings in this process, and restores them
        monkeypatch.delenv(name, raising=False)
    soak = _soak()
    cfg = soak.WeekConfig(
        nodes=30,
        hours=3,
        day_hours=3,
        workers=4,
        retention_hours=1.0,
        point_nodes=1,
        cloud=cloud.split("-")[0],
        clustered=clustered,
    )
    result = soak.run_week(cfg, service, tmp_path, point_queries=False, spark=spark)
    assert not [name for name in ENV if name in os.environ], "the driver left app settings in the environment"

    fired = set(result.faults_fired)
    if clustered:  # the clustered table's users change it through Spark, the others through deltalake
        assert {"spark_update", "spark_merge"} <= fired, fired
        fired -= {"spark_update", "spark_merge"}
    assert fired == FAULTS, f"faults not injected: {FAULTS - fired}, unexpected: {fired - FAULTS}"
    tables = {"partitioned", "unpartitioned", "clustered"} if clustered else {"partitioned", "unpartitioned"}
    assert len(result.rows) == len(tables) * 3
    assert {r.table for r in result.rows} == tables
    assert result.failures == []
    for row in result.rows:
        assert row.rows_expected > 0
        assert row.exact_deltalake and row.exact_polars, (row.hour, row.table, row.rows_deltalake, row.rows_polars)
        assert row.dead_lettered == row.injected_poison, (row.hour, row.dead_lettered)
    assert sum(r.injected_poison for r in result.rows) == 1
    assert all(r.committed > 0 for r in result.rows if r.hour == 1), "the first hour rewrites every table"
