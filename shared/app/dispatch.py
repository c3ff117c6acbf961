"""Orchestration: plan every configured table and send one work message per partition that needs work.

Tables are planned in parallel (``concurrency`` at once); one table that cannot be planned is reported
and the others still go. Messages leave in batches through a ``send`` callable that a queue edge
provides (Azure queue, SQS, or a list in tests), ``concurrency`` batches in flight.

Planning the same table version twice and sending both sets of messages causes no double work: the
worker's commit carries a ``txn`` action (appId per partition, version = the planned table version),
so the second delivery finds the first commit and skips.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.app.config import AppConfig
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [2, 1, 12, 11], "k_range": [0, 0, 1, 1]}), partition_by=["k_range"])
    >>> config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([path])})
    >>> sent = []
    >>> report = dispatch(config, sent.extend)
    >>> report.planned, report.skipped, report.sent, len(sent)
    (2, 0, 2, 2)
    >>> json.loads(sent[0])["partition_value"]
    '0'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import DeltaExtrasError
from ..ops.rorder.plan import TablePlan, plan_units
from .config import AppConfig, TableConfig

log = logging.getLogger(__name__)

Send = Callable[[Sequence[str]], Any]
"""Sends a batch of message bodies (JSON text) to the work queue; raises if the batch failed."""

DEFAULT_CONCURRENCY = 8
DEFAULT_BATCH_SIZE = 10  # SQS's batch limit; Azure queues take one message per request anyway


@dataclass
class TableDispatch:
    """What the orchestrator did for one table."""

    table: str
    version: int | None = None
    planned: int = 0  # partitions that need work
    skipped: int = 0  # partitions already in layout
    sent: int = 0  # messages the queue accepted
    error: str | None = None
    error_type: str | None = None


@dataclass
class DispatchReport:
    """The orchestrator's summary over every table."""

    tables: list[TableDispatch] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def planned(self) -> int:
        return sum(t.planned for t in self.tables)

    @property
    def skipped(self) -> int:
        return sum(t.skipped for t in self.tables)

    @property
    def sent(self) -> int:
        return sum(t.sent for t in self.tables)

    @property
    def failed(self) -> list[TableDispatch]:
        return [t for t in self.tables if t.error]

    def to_dict(self) -> dict[str, Any]:
        """The summary as one JSON object (what the orchestrator logs)."""
        return {
            "event": "rorder_dispatch",
            "tables": len(self.tables),
            "partitions_planned": self.planned,
            "partitions_skipped": self.skipped,
            "messages_sent": self.sent,
            "tables_failed": len(self.failed),
            "seconds": round(self.seconds, 3),
            "per_table": [asdict(t) for t in self.tables],
        }

    def line(self) -> str:
        """One structured log line."""
        return json.dumps(self.to_dict(), default=str, separators=(",", ":"))


def plan_tables(
    config: AppConfig, *, concurrency: int = DEFAULT_CONCURRENCY
) -> list[tuple[TableConfig, TablePlan | BaseException]]:
    """Plan every configured table at its current version; a failure is returned in place of the plan.

    Example:
        >>> from deltaextras.app.config import AppConfig
        >>> [type(p).__name__ for _, p in plan_tables(AppConfig.from_env({"DELTAEXTRAS_TABLES": '["/nonexistent/t"]'}))]
        ['TableNotFoundError']
    """

    def one(table: TableConfig) -> TablePlan | BaseException:
        try:
            return plan_units(table.uri, **table.plan_kwargs())
        except Exception as exc:
            return exc

    workers = max(1, min(concurrency, len(config.tables)))
    if workers == 1:
        return [(t, one(t)) for t in config.tables]
    with ThreadPoolExecutor(workers, thread_name_prefix="deltaextras-plan") as pool:
        return list(zip(config.tables, pool.map(one, config.tables), strict=True))


def dispatch(
    config: AppConfig,
    send: Send,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> DispatchReport:
    """Plan every configured table and send one message per partition that needs work.

    Never raises for one table's trouble: planning or sending errors are in the report
    (``report.failed``), and its summary line is logged at INFO (WARNING if a table failed).
    """
    started = time.monotonic()
    report = DispatchReport()
    planned = plan_tables(config, concurrency=concurrency)
    jobs: list[tuple[TableDispatch, list[str]]] = []
    for table, plan in planned:
        entry = TableDispatch(table=table.uri)
        report.tables.append(entry)
        if isinstance(plan, BaseException):
            entry.error, entry.error_type = _describe(plan), type(plan).__name__
            continue
        entry.version = plan.version
        entry.planned = len(plan.to_rewrite())
        entry.skipped = len(plan.skipped())
        messages = list(plan.messages())
        commit = table.commit_mode(len(messages))
        bodies = [(m.with_commit(commit) if commit else m).to_json() for m in messages]
        for start in range(0, len(bodies), max(1, batch_size)):
            jobs.append((entry, bodies[start : start + batch_size]))

    def deliver(job: tuple[TableDispatch, list[str]]) -> tuple[TableDispatch, int, BaseException | None]:
        entry, batch = job
        try:
            send(batch)
        except Exception as exc:
            return entry, 0, exc
        return entry, len(batch), None

    if jobs:
        workers = max(1, min(concurrency, len(jobs)))
        with ThreadPoolExecutor(workers, thread_name_prefix="deltaextras-send") as pool:
            for entry, n, exc in pool.map(deliver, jobs):
                entry.sent += n
                if exc is not None and entry.error is None:
                    entry.error, entry.error_type = f"sending messages failed: {_describe(exc)}", type(exc).__name__
    report.seconds = time.monotonic() - started
    log.log(logging.WARNING if report.failed else logging.INFO, "%s", report.line())
    return report


def _describe(exc: BaseException) -> str:
    if isinstance(exc, DeltaExtrasError):
        return str(exc)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
