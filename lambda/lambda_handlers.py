"""AWS Lambda entry points (container image, see lambda/Dockerfile).

* ``lambda_handlers.orchestrator_handler``: EventBridge schedule → plans every table of
  DELTAEXTRAS_TABLES and sends one message per partition with work to DELTAEXTRAS_QUEUE_URL.
* ``lambda_handlers.worker_handler``: SQS event source (ReportBatchItemFailures) → rewrites each
  message's partition; returns ``{"batchItemFailures": [...]}`` for transient failures and sends
  permanent ones to DELTAEXTRAS_DLQ_URL with the reason.

The logic is in deltaextras.dispatch, deltaextras.work and deltaextras.app.edges.sqs.
"""

from __future__ import annotations

import logging
from typing import Any

from deltaextras.app.edges import sqs

logging.getLogger("deltaextras").setLevel(logging.INFO)


def orchestrator_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """EventBridge scheduled event → dispatch summary."""
    return sqs.orchestrate()


def worker_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS event → partial batch response."""
    return sqs.work(event)
