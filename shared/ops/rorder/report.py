"""Per-partition outcomes of ``rorder``: committed, skipped or failed, with the reason and the figures.

Example:
    >>> r = PartitionReport(table="/t", partition="node_id_range=0", status="skipped", reason="in layout")
    >>> r.line()
    'node_id_range=0: skipped (in layout)'
    >>> RorderReport([r]).summary()
    '1 partition(s): 0 committed, 1 skipped, 0 failed'
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .value_ranges import ValueRange


@dataclass
class PartitionReport:
    """What happened to one partition."""

    table: str
    partition: str | None
    status: str  # "committed" | "skipped" | "failed" | "interrupted" (Ctrl-C: nothing of it committed)
    reason: str = ""
    read_version: int | None = None
    commit_version: int | None = None
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    bytes_added: int = 0
    rows: int = 0
    values: int = 0
    row_groups: int = 0
    duplicates_removed: int = 0
    deleted_rows_purged: int = 0
    passes: int = 0
    spilled_bytes: int = 0
    commit_attempts: int = 0
    concurrent_deletes_carried: int = 0  # winning commits whose deletes were carried onto the outputs
    deleted_rows_carried: int = 0  # rows those commits deleted, now deleted in the outputs too
    # files other writers' DELETE, UPDATE or MERGE added to this unit between the read and the commit
    # (a vector on a file the rewrite did not read, an UPDATE's rewritten rows): the unit is not in layout
    concurrent_changes: int = 0
    # how the commit ended (deltaextras.core.commit_result.CommitOutcome): committed, already_done (an earlier
    # delivery committed this work), nothing_to_do; empty when the unit failed or was interrupted
    commit_outcome: str = ""
    seconds: float = 0.0
    error_type: str | None = None
    retryable: bool = False

    @classmethod
    def failure(cls, message: Mapping[str, Any] | None, exc: BaseException, seconds: float) -> PartitionReport:
        """The report of a message whose run raised ``exc`` (its reason is the error's one line).

        Example:
            >>> from deltaextras.errors import DuplicateKeyError
            >>> r = PartitionReport.failure({"path": "/t", "partition_name": "k_range", "partition_value": "0"},
            ...                             DuplicateKeyError("rows share key"), 0.5)
            >>> r.partition, r.status, r.error_type, r.retryable
            ('k_range=0', 'failed', 'DuplicateKeyError', False)
        """
        from ...errors import DeltaExtrasError, is_retryable

        message = message or {}
        name = message.get("partition_name")
        label = None if name is None else f"{name}={message.get('partition_value')}"
        if "range" in message:  # a value-range unit (deltaextras.ops.rorder.value_ranges)
            try:
                label = ValueRange.from_json(message["range"]).label
            except Exception:  # the error itself says what is wrong with the message
                label = "(unreadable range)"
        return cls(
            table=str(message.get("path")),
            partition=label,
            status="failed",
            reason=str(exc) if isinstance(exc, DeltaExtrasError) else f"{type(exc).__name__}: {exc}",
            read_version=message.get("version"),
            seconds=round(seconds, 3),
            error_type=type(exc).__name__,
            retryable=is_retryable(exc),
        )

    def line(self) -> str:
        """One human line."""
        head = f"{self.partition or '(table)'}: {self.status}"
        if self.status == "committed":
            return (
                f"{head} v{self.commit_version} — {self.files_removed} → {self.files_added} file(s), "
                f"{self.rows} rows, {self.values} values, {self.bytes_removed / 2**20:.1f} → "
                f"{self.bytes_added / 2**20:.1f} MiB, {self.seconds:.2f}s"
            )
        reason = self.reason
        if self.status == "failed" and self.error_type and not reason.startswith(f"{self.error_type}:"):
            reason = f"{self.error_type}: {reason}"
        return f"{head} ({reason})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RorderReport:
    """The reports of every partition of one ``rorder`` call (iterable, indexable)."""

    partitions: list[PartitionReport] = field(default_factory=list)

    def __iter__(self) -> Iterator[PartitionReport]:
        return iter(self.partitions)

    def __len__(self) -> int:
        return len(self.partitions)

    def __getitem__(self, i: int) -> PartitionReport:
        return self.partitions[i]

    def by_status(self, status: str) -> list[PartitionReport]:
        return [p for p in self.partitions if p.status == status]

    @property
    def failed(self) -> list[PartitionReport]:
        return self.by_status("failed")

    def summary(self) -> str:
        """One line: how many units, and what became of them (``partition(s)`` when every unit is a
        partition, ``unit(s)`` for value ranges or a whole table).

        Example:
            >>> r = PartitionReport(table="/t", partition="node_id in [1, 40]", status="committed")
            >>> RorderReport([r]).summary()
            '1 unit(s): 1 committed, 0 skipped, 0 failed'
        """
        interrupted = len(self.by_status("interrupted"))
        partitions = all(p.partition and "=" in p.partition and " in [" not in p.partition for p in self)
        return (
            f"{len(self.partitions)} {'partition(s)' if partitions else 'unit(s)'}: "
            f"{len(self.by_status('committed'))} committed, "
            f"{len(self.by_status('skipped'))} skipped, {len(self.failed)} failed"
            + (f", {interrupted} interrupted" if interrupted else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "partitions": [p.to_dict() for p in self.partitions]}
