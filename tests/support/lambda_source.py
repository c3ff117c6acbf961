"""Lambda's SQS event source mapping, emulated against a real SQS (moto server): receive a batch, invoke the
handler with the records Lambda builds, delete what succeeded and make the reported failures
(``batchItemFailures``) visible again at once. The tests of the Lambda adapter and the soak bench's AWS week
use it; the queue's redrive policy, not this loop, moves a message that failed too often to the DLQ."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAMBDA = Path(__file__).resolve().parents[2] / "lambda"


def load_handlers() -> Any:
    """The ``lambda/lambda_handlers.py`` module, loaded as the Lambda runtime loads it."""
    spec = importlib.util.spec_from_file_location("lambda_handlers", LAMBDA / "lambda_handlers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """The record Lambda's SQS event source mapping builds for a received message."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


@dataclass
class Invocation:
    """One handler invocation: the bodies it got, those it reported failed, and how long it took."""

    bodies: list[str]
    failed: list[str]
    seconds: float
    receive_counts: list[int] = field(default_factory=list)


def run_event_source(
    sqs: Any,
    url: str,
    handler: Callable[[dict[str, Any], Any], dict[str, Any]],
    *,
    rounds: int | None = 20,
    batch_size: int = 10,
    visibility_timeout: int | None = None,
    idle_timeout: float | None = None,
    max_invocations: int | None = None,
    on_invocation: Callable[[Invocation], None] | None = None,
) -> list[Invocation]:
    """Poll like the event source mapping until the queue holds no message (visible or in flight), after
    ``rounds`` polls, after ``idle_timeout`` seconds without a visible message, or after
    ``max_invocations``. ``visibility_timeout`` (seconds) overrides the queue's for each receive."""
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    out: list[Invocation] = []
    polls, idle_since = 0, time.monotonic()
    extra = {} if visibility_timeout is None else {"VisibilityTimeout": visibility_timeout}
    while (rounds is None or polls < rounds) and (max_invocations is None or len(out) < max_invocations):
        polls += 1
        received = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=batch_size,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            **extra,
        ).get("Messages", [])
        if not received:
            attrs = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]
            if attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0":
                break
            if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                break
            time.sleep(0.2)
            continue
        idle_since = time.monotonic()
        started = time.monotonic()
        response = handler({"Records": [sqs_record(m, arn) for m in received]}, None)
        seconds = time.monotonic() - started
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in received:
            if m["MessageId"] in failed:
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
            else:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        inv = Invocation(
            [m["Body"] for m in received],
            [m["Body"] for m in received if m["MessageId"] in failed],
            seconds,
            [int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)) for m in received],
        )
        out.append(inv)
        if on_invocation is not None:
            on_invocation(inv)
    return out
