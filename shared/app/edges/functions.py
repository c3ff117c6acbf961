"""Azure Functions glue: what ``orchestrator/__init__.py`` and ``worker/__init__.py`` call.

* :func:`run_orchestrator` (timer trigger): plans every table of ``DELTAEXTRAS_TABLES`` and sends the
  messages to ``DELTAEXTRAS_QUEUE``; the invocation fails (and is visible as failed) when a table could
  not be planned or its messages not sent.
* :func:`run_worker` (queue trigger): handles one message. A transient failure re-raises the original
  error so the host retries the message (after ``visibilityTimeout``, up to ``maxDequeueCount``
  deliveries); a permanent one is written to the ``deadletter`` output binding (the queue named by
  ``DELTAEXTRAS_POISON_QUEUE``) with its reason, and the invocation succeeds so the host deletes the
  message: no retry storm.

Example:
    >>> import json, pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "host.json").write_text(json.dumps({"extensions": {"queues": {"maxDequeueCount": 3}}}))
    >>> max_dequeue_count(root)
    3
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import DeltaExtrasError
from ..config import AppConfig
from ..dispatch import DispatchReport, dispatch
from ..work import Outcome, handle
from .azure_queue import QueueSender

log = logging.getLogger(__name__)

DEFAULT_MAX_DEQUEUE_COUNT = 5  # the host's default


def max_dequeue_count(app_root: str | os.PathLike[str] | None) -> int:
    """``extensions.queues.maxDequeueCount`` of the app's ``host.json`` (the host's default, 5, if unset)."""
    if app_root is None:
        return DEFAULT_MAX_DEQUEUE_COUNT
    try:
        host = json.loads((Path(app_root) / "host.json").read_text())
        return int(host.get("extensions", {}).get("queues", {}).get("maxDequeueCount", DEFAULT_MAX_DEQUEUE_COUNT))
    except (OSError, ValueError, AttributeError):
        return DEFAULT_MAX_DEQUEUE_COUNT


def run_orchestrator(timer: Any, *, env: Mapping[str, str] | None = None, sender: Any = None) -> DispatchReport:
    """Timer trigger body: plan every configured table, send one message per partition with work.

    ``timer`` is the ``azure.functions.TimerRequest`` (a late run is logged, and runs all the same).
    """
    env = os.environ if env is None else env
    if getattr(timer, "past_due", False):
        log.info("the orchestrator timer is past due; running now")
    config = AppConfig.from_env(env)
    sender = sender or QueueSender.from_env(config.queue, env)
    report = dispatch(config, sender.send_batch)
    if report.failed:
        first = report.failed[0]
        raise DeltaExtrasError(
            f"{len(report.failed)} of {len(report.tables)} table(s) failed; {report.sent} message(s) sent. "
            f"First: {first.table}: {first.error_type}: {first.error}"
        )
    return report


def run_worker(
    msg: Any,
    deadletter: Any,
    *,
    app_root: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Queue trigger body for one ``azure.functions.QueueMessage``.

    Raises the original error for a transient failure (the host retries); sets ``deadletter`` (an
    ``azure.functions.Out[str]``) for a permanent one and returns.
    """
    config = AppConfig.from_env(os.environ if env is None else env)
    outcome = handle(
        msg.get_body(),
        config,
        message_id=getattr(msg, "id", None),
        dequeue_count=getattr(msg, "dequeue_count", None),
        max_attempts=max_dequeue_count(app_root),
    )
    if outcome.retry and outcome.error is not None:
        raise outcome.error
    if outcome.dead_letter:
        deadletter.set(outcome.dead_letter_body())
    return outcome
