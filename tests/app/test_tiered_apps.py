"""The tiered layout through the adapters: the function app (orchestrator and worker on Azurite, through
the local host) and the Lambda handlers (on moto S3 and SQS), configured with ``"layout": "tiered"``."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

# test_tiered is beside the rorder tests (tests/ops/rorder); test_function_app and test_lambda are beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops" / "rorder"))

import pytest
from app_support import content_checksum, sensor_batch, table_version, write_sensor_table
from deltalake import write_deltalake
from lambda_source import load_handlers
from services import Azurite, MotoServer
from test_function_app import App, configure, decode
from test_lambda import run_event_source
from test_tiered import assert_one_value_per_row_group

from deltaextras.ops.rorder.plan import plan_table

CONTAINER = "deltaextras-tiered"
# a row group per value, which the tests assert (small values share one by default in the tiered layout)
TABLE_OPTIONS = {
    "sort_by": ["utc_time"],
    "unique_by": ["node_id", "utc_time"],
    "layout": "tiered",
    "min_row_group_bytes": 0,
}


def _append_batch(uri: str, options: dict[str, str], batch: int) -> None:
    write_deltalake(uri, sensor_batch(batch, 3), partition_by=["node_id_range"], mode="append", storage_options=options)


@pytest.fixture
def tiered_app(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> App:
    azurite.create_container(CONTAINER)
    uri = f"az://{CONTAINER}/{uuid.uuid4().hex}"
    queue = f"tiered-{uuid.uuid4().hex[:12]}"
    configure(monkeypatch, azurite, [{"uri": uri, **TABLE_OPTIONS}], queue)
    return App(azurite, uri, queue, dict(azurite.storage_options))


@pytest.mark.azurite
def test_function_app_runs_the_tiered_layout_hour_after_hour(tiered_app: App) -> None:
    app = tiered_app
    write_sensor_table(app.uri, app.options, partitions=3)
    for hour in range(3):
        host = app.host()
        before = content_checksum(app.uri, app.options)
        assert host.run_timer().orchestrator == "succeeded"
        bodies = [decode(m) for m in app.peek(app.queue)]
        assert len(bodies) == 3 and all(b["layout"] == "tiered" for b in bodies)
        # Only the fresh files travel: one append per partition after the first hour.
        assert all(len(b["files"]) == (3 if hour == 0 else 1) for b in bodies), bodies
        summary = host.drain(idle_timeout=30)
        assert (summary.succeeded, summary.failed, summary.poisoned) == (3, 0, 0)
        assert content_checksum(app.uri, app.options) == before
        _append_batch(app.uri, app.options, 10 + hour)
    # Settle the last append, then a rerun plans nothing: no message, no commit.
    host = app.host()
    assert host.run_timer().orchestrator == "succeeded"
    host.drain(idle_timeout=30)
    assert_one_value_per_row_group(app.uri, app.options)
    version = table_version(app.uri, app.options)
    assert host.run_timer().orchestrator == "succeeded"
    assert app.peek(app.queue) == [] and table_version(app.uri, app.options) == version


@pytest.mark.moto
def test_lambda_handlers_run_the_tiered_layout(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = "deltaextras-tiered"
    moto.create_bucket(bucket)
    uri = f"s3://{bucket}/{uuid.uuid4().hex}"
    write_sensor_table(uri, moto.storage_options, partitions=3)
    sqs = moto.boto3_client("sqs")
    name = f"tiered-{uuid.uuid4().hex[:12]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    for key, value in moto.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DELTAEXTRAS_TABLES", json.dumps([{"uri": uri, **TABLE_OPTIONS}]))
    monkeypatch.setenv("DELTAEXTRAS_QUEUE_URL", url)
    monkeypatch.delenv("DELTAEXTRAS_STORAGE_OPTIONS", raising=False)
    monkeypatch.delenv("DELTAEXTRAS_DLQ_URL", raising=False)
    handlers = load_handlers()
    scheduled = {"version": "0", "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    for hour in range(2):
        before = content_checksum(uri, moto.storage_options)
        summary = handlers.orchestrator_handler(scheduled, None)
        assert (summary["messages_sent"], summary["tables_failed"]) == (3, 0)
        history = run_event_source(sqs, url, handlers.worker_handler)
        assert [bodies for _, bodies in history if bodies] == []
        assert content_checksum(uri, moto.storage_options) == before
        _append_batch(uri, moto.storage_options, 20 + hour)
    # A hand-written message for one partition names the layout; the worker plans it from the snapshot.
    body = {"path": uri, "partition_value": "1", "layout": "tiered", "min_row_group_bytes": 0}
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    run_event_source(sqs, url, handlers.worker_handler)
    plan = plan_table(uri, storage_options=moto.storage_options, **_plan_options())
    assert {p.partition_value: p.action for p in plan.partitions} == {"0": "rewrite", "1": "skip", "2": "rewrite"}
    assert handlers.orchestrator_handler(scheduled, None)["messages_sent"] == 2
    run_event_source(sqs, url, handlers.worker_handler)
    assert_one_value_per_row_group(uri, moto.storage_options)
    version = table_version(uri, moto.storage_options)
    assert handlers.orchestrator_handler(scheduled, None)["messages_sent"] == 0
    assert table_version(uri, moto.storage_options) == version


def _plan_options() -> dict[str, Any]:
    return {"sort_by": "utc_time", "unique_by": ["node_id", "utc_time"], "layout": "tiered", "min_row_group_bytes": 0}
