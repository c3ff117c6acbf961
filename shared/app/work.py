"""The worker: handle one queue message body and say what the queue should do with it.

:func:`handle` parses and validates the message, refuses tables that are not configured (the
allow-list), fills the options the message leaves out from the table's configuration, runs
:func:`~deltaextras.ops.rorder.rorder.rorder_single` and classifies the result:

=============  ==========================================================  ===========================
status         when                                                        the queue edge then
=============  ==========================================================  ===========================
committed      the partition was rewritten and committed                   deletes the message
skipped        nothing to do: in layout, no live files, or already         deletes the message
               committed by an earlier delivery of the same work; or
               superseded: the table moved on under a stale plan (its
               inputs replaced, its metadata changed), which the next
               plan covers
retry          transient: storage or network trouble, too many             leaves it for redelivery
               concurrent commits (``is_retryable``)                       (raise / batchItemFailures)
dead-letter    permanent: malformed message, table not configured or       puts it on the dead-letter
               missing, unsupported feature, ``unique_by`` conflict;       queue with the reason, then
               or a transient failure on its last allowed attempt          deletes it
=============  ==========================================================  ===========================

A users' DELETE, UPDATE or MERGE that lands in the unit between the plan and the commit leaves it out of
layout: deletes carried onto the outputs are deletion vectors, a vector on a file the run did not read
stays, and after a copy-on-write UPDATE or MERGE the rows it rewrote sit in a file no plan named
(``PartitionReport.concurrent_deletes_carried`` / ``concurrent_changes``). Readers such as deltalake stop
pruning a scan once a file carries a deletion vector, so the worker then runs the unit once more at the
table's latest version (committed alone, the message's file list dropped): the tiered and full layouts
take in the fresh file and purge the vectors. Its outcome is logged (``"purge"``); its failure leaves the first commit
standing, and the next plan covers the unit.

A message may name only the table and the partition (``{"path": ..., "partition_value": "3"}``, as an
operator writes by hand): the worker then plans that partition from the current snapshot with the
table's configured options. Every call logs one JSON line (``"event": "rorder_work"``) with the
outcome and the rewrite's figures.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.app.config import AppConfig
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [2, 1], "k_range": [0, 0]}), partition_by=["k_range"])
    >>> config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([path])})
    >>> handle(json.dumps({"path": path, "partition_value": 0}), config).status
    'committed'
    >>> handle("{not json", config).status
    'dead-letter'
    >>> handle('{"path": "/somewhere/else", "partition_value": 0}', config).error_type
    'AccessDeniedError'
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ..errors import CommitConflictError, DeltaExtrasError, is_retryable
from ..ops.rorder.message import RorderMessage, decode_body
from ..ops.rorder.report import PartitionReport
from ..ops.rorder.rorder import Hooks, rorder_single
from .config import AppConfig

log = logging.getLogger(__name__)

COMMITTED = "committed"
SKIPPED = "skipped"
RETRY = "retry"
DEAD_LETTER = "dead-letter"

DEAD_LETTER_TAG = "deltaextras_dead_letter"
# An Azure queue message holds 64 KiB of base64 text: 48 KiB of JSON. Keep a margin.
MAX_DEAD_LETTER_JSON = 45_000

_REPORT_FIGURES = (
    "read_version",
    "commit_version",
    "commit_attempts",
    "files_removed",
    "files_added",
    "bytes_removed",
    "bytes_added",
    "rows",
    "values",
    "row_groups",
    "duplicates_removed",
    "deleted_rows_purged",
    "passes",
    "spilled_bytes",
    "deleted_rows_carried",
)


@dataclass
class Outcome:
    """What became of one message, and what the queue should do with it."""

    status: str  # committed | skipped | retry | dead-letter
    reason: str = ""
    table: str | None = None
    partition: str | None = None
    error_type: str | None = None
    report: PartitionReport | None = None
    message: dict[str, Any] | None = None  # the message as received, when it was a JSON object
    body: str = ""  # the body text as received
    message_id: str | None = None
    dequeue_count: int | None = None
    seconds: float = 0.0
    error: BaseException | None = field(default=None, repr=False, compare=False)
    # the unit's second pass after a commit into which the users' DELETE, UPDATE or MERGE landed (module
    # docstring): its status and reason, or the error it met
    purge: str | None = None

    @property
    def retry(self) -> bool:
        """The queue should deliver the message again later."""
        return self.status == RETRY

    @property
    def dead_letter(self) -> bool:
        """The message must go to the dead-letter queue (with :meth:`dead_letter_body`)."""
        return self.status == DEAD_LETTER

    def to_dict(self) -> dict[str, Any]:
        """The structured log record."""
        out: dict[str, Any] = {
            "event": "rorder_work",
            "status": self.status,
            "reason": self.reason,
            "table": self.table,
            "partition": self.partition,
            "message_id": self.message_id,
            "dequeue_count": self.dequeue_count,
            "seconds": round(self.seconds, 3),
        }
        if self.error_type:
            out["error_type"] = self.error_type
        if self.report is not None:
            figures = self.report.to_dict()
            out.update({k: figures[k] for k in _REPORT_FIGURES})
            out["rewrite_seconds"] = figures["seconds"]
        if self.purge is not None:
            out["purge"] = self.purge
        return out

    def line(self) -> str:
        """One JSON log line."""
        return json.dumps(self.to_dict(), default=str, separators=(",", ":"))

    def dead_letter_body(self) -> str:
        """The dead-letter message: the reason, and the original message to send again once fixed.

        ``message`` is the original JSON object (its ``files`` dropped if the envelope would not fit a
        queue message: the worker then plans the same files from ``version``); a body that was not a
        JSON object is kept as text in ``body``.

        Example:
            >>> env = json.loads(Outcome(DEAD_LETTER, "bad", message={"path": "/t"}).dead_letter_body())
            >>> env["deltaextras_dead_letter"], env["reason"], env["message"]
            (1, 'bad', {'path': '/t'})
        """
        envelope: dict[str, Any] = {
            DEAD_LETTER_TAG: 1,
            "reason": self.reason,
            "error_type": self.error_type,
            "table": self.table,
            "partition": self.partition,
            "message_id": self.message_id,
            "dequeue_count": self.dequeue_count,
            "failed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "message": self.message,
        }
        if self.message is None:
            envelope["body"] = self.body
        text = json.dumps(envelope, default=str, separators=(",", ":"))
        if len(text) > MAX_DEAD_LETTER_JSON and self.message is not None and "files" in self.message:
            files = self.message.get("files")
            envelope["message"] = {k: v for k, v in self.message.items() if k != "files"}
            envelope["files_omitted"] = len(files) if isinstance(files, list) else None
            text = json.dumps(envelope, default=str, separators=(",", ":"))
        if len(text) > MAX_DEAD_LETTER_JSON:
            envelope["message"] = None
            envelope["body"] = self.body[:4000]
            envelope["body_truncated"] = True
            text = json.dumps(envelope, default=str, separators=(",", ":"))
        return text


def handle(
    body: str | bytes,
    config: AppConfig,
    *,
    message_id: str | None = None,
    dequeue_count: int | None = None,
    max_attempts: int | None = None,
    hooks: Hooks | None = None,
) -> Outcome:
    """Process one message body; never raises for the message's own trouble (see :class:`Outcome`).

    ``max_attempts`` is the queue's delivery limit (``maxDequeueCount``): a transient failure on that
    attempt is dead-lettered with its reason instead of being left for the queue to drop without one.
    ``hooks`` are passed to :func:`~deltaextras.ops.rorder.rorder.rorder_single` (tracing, fault injection).
    """
    started = time.monotonic()
    text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray)) else str(body)
    out = Outcome(DEAD_LETTER, body=text, message_id=message_id, dequeue_count=dequeue_count)
    try:
        data = decode_body(body)
        out.message = data
        RorderMessage.from_dict(data)  # the message as sent must be valid on its own
        table = config.table(data["path"])
        out.table = table.uri
        msg = RorderMessage.from_dict({**table.message_defaults(), **data, "path": table.uri})
        if msg.value_range is not None:
            out.partition = msg.value_range.label
        elif msg.has_partition:
            name = msg.partition_name or "partition_value"  # the column is known once the table is read
            out.partition = f"{name}={msg.partition_value}"
        report = rorder_single(msg, storage_options=table.storage_options, hooks=hooks)
        out.status, out.reason, out.report = report.status, report.reason, report
        out.partition = report.partition or out.partition
        if report.status == COMMITTED and (report.concurrent_deletes_carried or report.concurrent_changes):
            out.purge = _purge(msg, table.storage_options)
    except Exception as exc:
        out.error, out.error_type, out.reason = exc, type(exc).__name__, _describe(exc)
        if isinstance(exc, CommitConflictError):
            # The table moved on under the plan (another writer replaced its inputs or changed the schema):
            # nothing was committed, and the orchestrator's next plan covers the unit as it is now. Nothing
            # for a person to do, so no dead letter; the outcome says it was superseded.
            out.status = SKIPPED
            out.reason = f"superseded: {out.reason}; the next plan covers this unit"
        elif not is_retryable(exc):
            out.status = DEAD_LETTER
        elif max_attempts and dequeue_count and dequeue_count >= max_attempts:
            out.status = DEAD_LETTER
            out.reason = f"gave up after {dequeue_count} attempt(s), the queue's limit: {out.reason}"
        else:
            out.status = RETRY
        if not isinstance(exc, DeltaExtrasError):
            log.warning("unexpected %s while handling message %s", type(exc).__name__, message_id, exc_info=True)
    out.seconds = time.monotonic() - started
    level = logging.INFO if out.status in (COMMITTED, SKIPPED) else logging.WARNING
    log.log(level, "%s", out.line())
    return out


def _purge(msg: RorderMessage, storage_options: dict[str, str] | None) -> str:
    """Run the unit of ``msg`` once more at the table's latest version, alone and without the message's file
    list, after the users' DELETE, UPDATE or MERGE landed in it during the first (module docstring); what
    became of it, in a few words.
    Never raises for the table's trouble: the first commit stands either way."""
    again = replace(msg, version=None, files=None, commit=None)
    try:
        report = rorder_single(again, storage_options=storage_options)
    except DeltaExtrasError as exc:
        log.info("the second pass of %s after a concurrent change did not commit: %s", msg.path, exc)
        return f"failed: {type(exc).__name__}: {exc}"
    return f"{report.status}: {report.reason}" if report.reason else report.status


def _describe(exc: BaseException) -> str:
    if isinstance(exc, DeltaExtrasError):
        return str(exc)
    text = " ".join(str(exc).split())[:500]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
