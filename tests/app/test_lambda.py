"""The AWS Lambda adapter: the container image definition, and end-to-end runs on moto server (S3
tables, SQS work queue and dead-letter queue) through the Lambda handlers, with the SQS event source
mapping's partial-batch behaviour (``batchItemFailures``) emulated."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from app_support import REPO_ROOT, assert_in_layout, content_checksum, write_sensor_table
from lambda_source import load_handlers
from lambda_source import run_event_source as event_source
from services import MotoServer

from deltaextras.app import work
from deltaextras.errors import StorageError

LAMBDA = REPO_ROOT / "lambda"
BUCKET = "deltaextras-lambda"


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of lambda/Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (LAMBDA / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_builds_the_lambda_image_with_both_handlers() -> None:
    steps = dockerfile()
    assert steps[0] == ("FROM", "public.ecr.aws/lambda/python:3.12")
    handlers = load_handlers()
    cmd = json.loads(dict(steps)["CMD"])
    assert cmd == ["lambda_handlers.worker_handler"]
    # The functions pick their handler with image_config.command (infra/terraform/aws/lambda.tf).
    tf = (REPO_ROOT / "infra" / "terraform" / "aws" / "lambda.tf").read_text()
    commands = re.findall(r'command\s*=\s*\["([^"]+)"\]', tf)
    assert sorted(commands) == ["lambda_handlers.orchestrator_handler", "lambda_handlers.worker_handler"]
    for command in [*commands, *cmd]:
        module, _, function = command.partition(".")
        assert module == "lambda_handlers" and callable(getattr(handlers, function))
    # Everything copied exists, and the project is installed from pyproject.toml with the aws extra.
    for word, args in steps:
        if word == "COPY":
            for source in args.split()[:-1]:
                assert (REPO_ROOT / source).exists(), source
    runs = " ".join(args for word, args in steps if word == "RUN")
    assert '--target "${LAMBDA_TASK_ROOT}"' in runs and '".[aws]"' in runs
    assert ("COPY", "lambda/lambda_handlers.py ${LAMBDA_TASK_ROOT}/") in steps


def test_permanent_failure_without_a_dlq_is_left_to_the_redrive_policy(tmp_path: Path) -> None:
    env = {"DELTAEXTRAS_TABLES": json.dumps([str(tmp_path / "t")])}
    event = {"Records": [{"messageId": "m-1", "body": "{not json", "attributes": {"ApproximateReceiveCount": "1"}}]}
    from deltaextras.app.edges.sqs import work as sqs_work

    assert sqs_work(event, env) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


# ============================================================================ on moto server
def run_event_source(sqs: Any, url: str, handler: Any, *, rounds: int = 20) -> list[tuple[int, list[str]]]:
    """(batch size, failed bodies) of each invocation of the emulated event source mapping."""
    return [(len(inv.bodies), sorted(inv.failed)) for inv in event_source(sqs, url, handler, rounds=rounds)]


def test_end_to_end_on_moto_through_the_lambda_handlers(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    moto.create_bucket(BUCKET)
    uri = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    write_sensor_table(uri, moto.storage_options, partitions=5)
    before = content_checksum(uri, moto.storage_options)

    sqs = moto.boto3_client("sqs")
    name = f"rorder-{uuid.uuid4().hex[:12]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    # As in Lambda: credentials, region (and here the endpoint) come from the environment; no storage options.
    for key, value in moto.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DELTAEXTRAS_TABLES", json.dumps([{"uri": uri, "sort_by": "utc_time"}]))
    monkeypatch.setenv("DELTAEXTRAS_QUEUE_URL", url)
    monkeypatch.setenv("DELTAEXTRAS_DLQ_URL", dlq)
    monkeypatch.delenv("DELTAEXTRAS_STORAGE_OPTIONS", raising=False)
    handlers = load_handlers()

    scheduled = {"version": "0", "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    summary = handlers.orchestrator_handler(scheduled, None)
    assert (summary["partitions_planned"], summary["messages_sent"], summary["tables_failed"]) == (5, 5, 0)

    sqs.send_message(QueueUrl=url, MessageBody="{not json")
    original, attempts = work.rorder_single, {}

    def flaky(message: Any, **kwargs: Any) -> Any:  # partition 3 hits a storage hiccup once
        n = attempts[message.partition_value] = attempts.get(message.partition_value, 0) + 1
        if message.partition_value == "3" and n == 1:
            raise StorageError("storage failed to read part-3: connection reset by peer")
        return original(message, **kwargs)

    monkeypatch.setattr(work, "rorder_single", flaky)
    history = run_event_source(sqs, url, handlers.worker_handler)

    failed_bodies = [json.loads(b) for _, bodies in history for b in bodies]
    assert [b["partition_value"] for b in failed_bodies] == ["3"], history
    assert sum(n for n, _ in history) == 7  # 5 partitions + the malformed one + partition 3 again
    assert attempts == {"0": 1, "1": 1, "2": 1, "3": 2, "4": 1}

    dead = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"], MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in dead] == ["{not json"]
    attributes = {k: v["StringValue"] for k, v in dead[0]["MessageAttributes"].items()}
    assert attributes["deltaextras_error_type"] == "MessageError"
    assert "not valid JSON" in attributes["deltaextras_reason"]

    assert content_checksum(uri, moto.storage_options) == before
    assert_in_layout(uri, moto.storage_options, range(5))
