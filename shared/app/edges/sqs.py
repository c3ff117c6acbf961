"""AWS: the Lambda orchestrator (EventBridge schedule → SQS) and worker (SQS event source) bodies.

* :func:`orchestrate`: plans every table of ``DELTAEXTRAS_TABLES`` (``s3://`` URIs) and sends one
  message per partition with work to ``DELTAEXTRAS_QUEUE_URL``, ten per ``SendMessageBatch``.
* :func:`work`: handles the records of one SQS event. Transient failures are returned in
  ``batchItemFailures`` (the event source mapping needs ``ReportBatchItemFailures``) so SQS redelivers
  only those; permanent ones are sent to ``DELTAEXTRAS_DLQ_URL`` with the original body and the reason
  in message attributes (``deltaextras_reason``, ``deltaextras_error_type``), and count as processed.
  Without a DLQ URL, or if that send fails, a permanent failure is reported as a batch item failure
  too, so the queue's redrive policy still catches it.

Tables on S3 need no storage options in Lambda: object_store takes the function role's credentials
and region from the environment Lambda sets.

Example:
    >>> chunks(["a", "b", "c"], 2)
    [['a', 'b'], ['c']]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import DeltaExtrasError, InvalidArgumentError, StorageError
from ..config import AppConfig
from ..dispatch import dispatch
from ..work import handle

log = logging.getLogger(__name__)

SQS_BATCH = 10
MAX_ATTRIBUTE = 1000  # characters of the reason kept in the message attribute


def chunks(items: Sequence[str], size: int) -> list[list[str]]:
    """Split into lists of at most ``size``."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def sqs_client(env: Mapping[str, str] | None = None) -> Any:
    """A boto3 SQS client; ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_SQS`` and the region come from the
    environment as boto3 reads them."""
    import boto3

    env = os.environ if env is None else env
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    endpoint = env.get("AWS_ENDPOINT_URL_SQS") or env.get("AWS_ENDPOINT_URL")
    return boto3.client("sqs", region_name=region, endpoint_url=endpoint)


class SqsSender:
    """Sends message bodies to an SQS queue, ten per ``SendMessageBatch``; failed entries are retried
    once, then the batch raises."""

    def __init__(self, queue_url: str, client: Any) -> None:
        self.queue_url = queue_url
        self.client = client

    @classmethod
    def from_env(
        cls, queue_url: str | None = None, env: Mapping[str, str] | None = None, client: Any = None
    ) -> SqsSender:
        env = os.environ if env is None else env
        url = queue_url or env.get("DELTAEXTRAS_QUEUE_URL")
        if not url:
            raise InvalidArgumentError("DELTAEXTRAS_QUEUE_URL is not set: the SQS work queue URL")
        return cls(url, client or sqs_client(env))

    def check(self) -> None:
        """Asks the queue for its attributes before anything is sent: one line when it cannot."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        except ClientError as exc:
            raise InvalidArgumentError(
                f"SQS queue {self.queue_url} cannot be used: {exc.response.get('Error', {}).get('Code', exc)}; "
                "nothing was sent"
            ) from None
        except BotoCoreError as exc:
            raise StorageError(f"cannot reach SQS queue {self.queue_url}: {exc}; nothing was sent") from None

    def send_batch(self, bodies: Sequence[str]) -> None:
        for chunk in chunks(list(bodies), SQS_BATCH):
            entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(chunk)]
            for _attempt in range(2):
                resp = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
                failed = {f["Id"] for f in resp.get("Failed", [])}
                if not failed:
                    break
                entries = [e for e in entries if e["Id"] in failed]
            else:
                first = resp["Failed"][0]
                raise DeltaExtrasError(
                    f"SQS refused {len(entries)} message(s) twice: {first.get('Code')}: {first.get('Message')}"
                )


def orchestrate(env: Mapping[str, str] | None = None, *, client: Any = None) -> dict[str, Any]:
    """The orchestrator Lambda's body; returns the dispatch summary, raises if a table failed."""
    env = os.environ if env is None else env
    config = AppConfig.from_env(env)
    sender = SqsSender.from_env(None, env, client)
    report = dispatch(config, sender.send_batch, batch_size=SQS_BATCH)
    if report.failed:
        first = report.failed[0]
        raise DeltaExtrasError(
            f"{len(report.failed)} of {len(report.tables)} table(s) failed; {report.sent} message(s) sent. "
            f"First: {first.table}: {first.error_type}: {first.error}"
        )
    return report.to_dict()


def work(event: Mapping[str, Any], env: Mapping[str, str] | None = None, *, client: Any = None) -> dict[str, Any]:
    """The worker Lambda's body for one SQS event; returns ``{"batchItemFailures": [...]}``."""
    env = os.environ if env is None else env
    config = AppConfig.from_env(env)
    dlq = env.get("DELTAEXTRAS_DLQ_URL")
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId"))
        attributes = record.get("attributes") or {}
        try:
            count: int | None = int(attributes.get("ApproximateReceiveCount", 0)) or None
        except (TypeError, ValueError):
            count = None
        outcome = handle(str(record.get("body", "")), config, message_id=message_id, dequeue_count=count)
        if outcome.retry:
            failures.append({"itemIdentifier": message_id})
        elif outcome.dead_letter:
            if not dlq:
                log.error(
                    "DELTAEXTRAS_DLQ_URL is not set; leaving message %s to the queue's redrive policy", message_id
                )
                failures.append({"itemIdentifier": message_id})
                continue
            try:
                client = client or sqs_client(env)
                client.send_message(
                    QueueUrl=dlq,
                    MessageBody=str(record.get("body", "")),
                    MessageAttributes={
                        "deltaextras_reason": {
                            "DataType": "String",
                            "StringValue": (outcome.reason or "-")[:MAX_ATTRIBUTE],
                        },
                        "deltaextras_error_type": {"DataType": "String", "StringValue": outcome.error_type or "-"},
                        "deltaextras_source_message_id": {"DataType": "String", "StringValue": message_id},
                    },
                )
            except Exception as exc:
                log.error("could not dead-letter message %s (%s); it will be redelivered", message_id, exc)
                failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}
