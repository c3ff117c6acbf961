"""Row Group Order Optimization: the public entry points.

* :func:`rorder` — plan a table and rewrite every partition that needs it, on worker threads.
* :func:`rorder_single` — run one work message (one partition): rewrite, then commit.
* :func:`rorder_setup_multi` / :func:`plan_messages` — plan for fan-out to queue workers.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> path = tempfile.mkdtemp()
    >>> for batch in range(3):
    ...     write_deltalake(path, pa.table({"node_id": [3, 1, 2], "utc_time": [batch] * 3,
    ...                                     "node_id_range": [0, 0, 0]}),
    ...                     partition_by=["node_id_range"], mode="append")
    >>> report = rorder(path, sort_by="utc_time")
    >>> report.summary()
    '1 partition(s): 1 committed, 0 skipped, 0 failed'
    >>> DeltaTable(path).count()
    9
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from ...core.actions import Action, Cdc
from ...core.cleanup import delete_orphans
from ...core.commit_result import CommitOutcome, CommitResult
from ...core.conflicts import IsolationLevel, ReadSet
from ...core.partition_snapshot import PartitionSnapshot
from ...core.protocol import CLUSTERING_DOMAIN
from ...core.snapshot import LiveFile, TableSnapshot
from ...core.storage import TableStorage
from ...core.transaction import Transaction
from ...core.values import partition_values_key
from ...errors import (
    AccessDeniedError,
    CommitConflictError,
    InvalidArgumentError,
    MessageError,
    PartitionsFailedError,
)
from ..common.changes import ChangeSink, as_deletes, change_data_feed_enabled
from .commit.actions import commit_info, unit_actions
from .commit.carry import Carrier
from .commit.checkpoint import checkpoint_after_rewrite
from .message import RorderMessage
from .plan import TablePlan, Unit, in_layout, partition_not_found, plan_units, resolve_unit
from .pool import RunInterrupted, run_partitions
from .report import PartitionReport, RorderReport
from .rewrite.layout import LAYOUT_TAG, layout_signature
from .rewrite.rewrite import OutputFile, PartitionRewriter, RewriteResult
from .tiers import select_files
from .units import clustered_options
from .value_ranges import ValueRange, is_clustered_by, range_files, stats_bounds

log = logging.getLogger(__name__)

Hooks = Mapping[str, Callable[..., None]]
# Metadata domains a rewrite's layout follows: a winner that changes one conflicts (the unit is planned again).
LAYOUT_DOMAINS = frozenset({CLUSTERING_DOMAIN})


def app_id_for(partition_name: str | None, partition_value: str | None) -> str:
    """The ``txn`` appId of one partition's rewrites (stable across plans and redeliveries).

    Example:
        >>> app_id_for("node_id_range", "3")
        'deltaextras.rorder:["node_id_range","3"]'
    """
    return "deltaextras.rorder:" + json.dumps([partition_name, partition_value], separators=(",", ":"))


def _access_denied(fn: Callable[..., PartitionReport]) -> Callable[..., PartitionReport]:
    """A storage that refuses us (read-only file system, no permission) is a permanent
    :class:`~deltaextras.errors.AccessDeniedError`, not a transient ``OSError``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> PartitionReport:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise AccessDeniedError(
                    f"no permission to write the table ({exc}); nothing was committed. Run with a user or "
                    "credentials that may write there"
                ) from None
            raise

    return wrapper


@_access_denied
def rorder_single(
    message: RorderMessage | Mapping[str, Any] | str | bytes,
    *,
    storage_options: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    hooks: Hooks | None = None,
    snapshot: TableSnapshot | None = None,
) -> PartitionReport:
    """Rewrite and commit one partition described by a work message.

    Returns a report with status ``committed`` or ``skipped`` (already in layout, already committed by
    an earlier delivery, no live files). Raises a :class:`~deltaextras.errors.DeltaExtrasError` on
    failure; its ``retryable`` flag tells whether a later attempt can succeed. Nothing is committed
    on failure; the files written so far are deleted when it is proven that no log version names them
    (after an ambiguous commit whose outcome stayed unknown they are left for vacuum).

    ``hooks`` (for tracing and fault injection) may name callables ``after_output(output_file)``
    (each output file, once it is complete on storage), ``after_rewrite(outputs)``,
    ``before_commit(version)`` and ``after_commit(version)``. ``snapshot`` lets a caller that has
    just planned the same table version skip loading it again.

    A commit that deleted rows of the inputs meanwhile (DELETE, UPDATE, MERGE) does not fail the
    rewrite: its deletes are carried onto the new files (:mod:`deltaextras.ops.rorder.commit.carry`) and counted in
    ``concurrent_deletes_carried`` / ``deleted_rows_carried``.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"node_id": [2, 1], "node_id_range": [0, 0]}),
        ...                 partition_by=["node_id_range"])
        >>> rorder_single({"path": path, "partition_value": 0}).status
        'committed'
        >>> rorder_single({"path": path, "partition_value": 0}).reason
        'already in layout: 1 file(s) from one rewrite'
    """
    started = time.monotonic()
    hooks = hooks or {}
    msg = _as_message(message)
    snap = _load(msg, snapshot, storage_options)
    storage = snap.storage
    unit, by = resolve_unit(snap, msg.options.by, msg.partition_name)
    msg = replace(msg, options=clustered_options(snap, by, msg.options))
    label, app_id = _unit_names(unit, msg)
    report = PartitionReport(table=storage.uri, partition=label, status="skipped", read_version=snap.version)
    files, report.reason = _choose(snap, unit, by, msg, app_id)
    if not files:
        return _finish(report, started)
    txn, carrier = _transaction(snap, files, by, msg, app_id, hooks)
    report.reason = _nothing_to_do(txn, snap, files, by, msg)
    if report.reason:
        return _finish(report, started)

    outputs, result, changes = _rewrite(snap, files, by, msg, progress, hooks.get("after_output"))
    for key in [o.key for o in outputs] + [unquote(c.path) for c in changes]:
        txn.wrote(key)
    # Dropped duplicates change the table's content: the commit is a data change (README, How it works: Commit),
    # committed as a DELETE under WriteSerializable. Concurrent appends never conflict with it: it deletes only
    # rows identical to rows it keeps, so the append ordered after it gives the same table.
    data_change = result.duplicates_removed > 0
    if data_change:
        txn.escalate(IsolationLevel.WRITE_SERIALIZABLE, operation="DELETE")
    carrier.outputs = outputs
    carrier.changes = changes
    info = commit_info(unit, by, msg, files, outputs, changes, result)
    actions = unit_actions(snap, app_id, files, outputs, changes, result, info, clustered=is_clustered_by(snap, by))
    # readers of the rewritten partition should not replay a long log: never fails the commit
    after = functools.partial(
        checkpoint_after_rewrite, storage, configuration=snap.configuration, protocol=snap.protocol
    )
    group = msg.commit == "group" and txn.can_stage()
    outcome = _commit(txn, carrier, actions, outputs, hooks, group=group, after_publish=after)
    if not outcome.committed:
        report.reason = "already committed by a concurrent delivery of this work"
        return _finish(report, started)
    assert outcome.version is not None
    if not group:  # a group committer did it once for the whole batch
        after(outcome.version)
    _committed(report, outcome, files, outputs, result, carrier, _changed_in_unit(snap, unit, msg, txn))
    return _finish(report, started)


def _changed_in_unit(snap: TableSnapshot, unit: str | None, msg: RorderMessage, txn: Transaction) -> int:
    """How many files other writers' DELETE, UPDATE or MERGE added (``txn.changed_files``) belong to the unit:
    its partition, or its value range by the files' statistics (a file without them counts: no file is read
    after the commit landed, as :func:`~deltaextras.ops.rorder.value_ranges.range_files` would)."""
    files = [snap.live_file(a) for a in txn.changed_files.values()]
    if msg.value_range is not None:
        column = snap.schema.column(msg.value_range.column, "by")
        bounds = [stats_bounds(f.stats, column.physical, column.delta_type) for f in files]
        return sum(1 for b in bounds if b is None or msg.value_range.overlaps(b[0], b[1], b[2] > 0))
    return len(files if unit is None else snap.in_partition(files, unit, msg.partition_value))


def _nothing_to_do(txn: Transaction, snap: TableSnapshot, files: list[LiveFile], by: str, msg: RorderMessage) -> str:
    """Why the unit needs no rewrite after all (already committed, already in layout), else ''."""
    _, done = txn.catch_up()
    if done is not None:
        return "already committed by an earlier delivery of this work"
    if msg.files is None and msg.options.layout == "full":
        return in_layout(snap, files, by, msg.options) or ""
    return ""


def _transaction(
    snap: TableSnapshot, files: list[LiveFile], by: str, msg: RorderMessage, app_id: str, hooks: Hooks
) -> tuple[Transaction, Carrier]:
    """The rewrite's transaction: a dataChange: false rewrite under SnapshotIsolation (appends never
    conflict), our inputs must stay live; a winner that deleted rows of an input is carried onto the
    outputs (see :mod:`deltaextras.ops.rorder.commit.carry`)."""
    carrier = Carrier(snap, files, by, msg.options.unique_by, lambda key: txn.wrote(key))
    txn = Transaction(
        snap,
        "OPTIMIZE",
        IsolationLevel.SNAPSHOT_ISOLATION,
        # a change of clustering between the read and the commit: the unit is planned again
        ReadSet(files={f.path for f in files}, app_id=app_id, app_version=snap.version, domains=LAYOUT_DOMAINS),
        resolve=carrier.resolve,
        before_put=hooks.get("before_commit"),
        after_commit=hooks.get("after_commit"),
    )
    return txn, carrier


def _load(
    msg: RorderMessage, snapshot: TableSnapshot | None, storage_options: Mapping[str, str] | None
) -> TableSnapshot:
    """The snapshot the message names: the caller's when it is that version, else the unit's alone."""
    if (
        snapshot is not None
        and snapshot.version == msg.version
        and snapshot.storage.uri == TableStorage.normalize(msg.path)
    ):
        return snapshot
    return PartitionSnapshot.load(
        msg.path,
        dict(storage_options or {}),
        msg.version,
        storage=TableStorage(msg.path, storage_options),
        unit=lambda head: resolve_unit(head, msg.options.by, msg.partition_name)[0],  # type: ignore[arg-type]
        value=msg.partition_value,
    )


def _choose(
    snap: TableSnapshot, unit: str | None, by: str, msg: RorderMessage, app_id: str
) -> tuple[list[LiveFile], str]:
    """The files to rewrite, or none and why (no live files, nothing the tiers merge, already done)."""
    files = _select_files(snap, unit, msg)
    if not files:
        return [], f"no live files at version {snap.version}"
    if msg.options.layout == "tiered" and msg.files is None:
        selection = select_files(files, snap.schema, by, msg.options)
        if not selection.files:
            return [], selection.reason()
        files = selection.files
    if snap.txns.get(app_id, -1) >= snap.version:
        return [], f"already committed (txn {app_id} at version {snap.txns[app_id]})"
    return files, ""


def _commit(
    txn: Transaction,
    carrier: Carrier,
    actions: list[Action],
    outputs: list[OutputFile],
    hooks: Hooks,
    *,
    group: bool = False,
    after_publish: Callable[[int], object] | None = None,
) -> CommitResult:
    """Commit the rewrite, alone or (``group``) staged for a group committer; a unit the committer
    rejects, or whose outcome does not come in time, commits alone (its conflict resolved by carrying
    deletes). The outputs go when no version can name them (on failure, or when the work was already
    committed), and the files of attempts the committed version does not use."""
    try:
        if "after_rewrite" in hooks:
            hooks["after_rewrite"](outputs)
        outcome = None
        if group:
            # imported here: a run that commits each unit alone (every rorder() call) never loads group commit
            from ...core.group_commit import commit_staged

            if txn.before_put is not None:
                txn.before_put(txn.checked_to + 1)
            outcome = commit_staged(txn, carrier.actions(actions), after_publish=after_publish)
        if outcome is None or outcome.outcome is CommitOutcome.CONFLICT:
            outcome = txn.commit(lambda _v: carrier.actions(actions))
    except BaseException:
        txn.abort()  # deletes the outputs only when no version can name them
        raise
    if not outcome.committed:
        txn.abort()
        return outcome
    txn.discard(carrier.unused(outcome.actions))  # carried-away outputs, vector files of lost attempts
    return outcome


def _committed(
    report: PartitionReport,
    outcome: CommitResult,
    files: list[LiveFile],
    outputs: list[OutputFile],
    result: RewriteResult,
    carrier: Carrier,
    changes: int,
) -> None:
    """Fill the report of a committed rewrite (``changes``: files other writers' DML added to the unit)."""
    report.status = "committed"
    report.reason = f"{len(files)} file(s) rewritten"
    report.commit_version = outcome.version
    report.commit_attempts = max(1, outcome.attempts)
    report.files_removed = len(files)
    report.files_added = len(outputs) - len(carrier.result.dropped)
    report.concurrent_deletes_carried = len(carrier.result.commits)
    report.deleted_rows_carried = carrier.result.rows
    report.concurrent_changes = changes
    report.bytes_removed = sum(f.size for f in files)
    report.bytes_added = sum(o.size for o in outputs)
    report.rows = result.rows_out
    report.values = result.values
    report.row_groups = sum(o.row_groups for o in outputs)
    report.duplicates_removed = result.duplicates_removed
    report.deleted_rows_purged = result.deleted_rows_dropped
    report.passes = result.passes
    report.spilled_bytes = result.spilled_bytes


def _unit_names(unit: str | None, msg: RorderMessage) -> tuple[str | None, str]:
    """The unit's label in reports (None: the whole table) and the ``txn`` appId of its commits."""
    if msg.value_range is not None:
        return msg.value_range.label, msg.value_range.app_id()
    label = None if unit is None else f"{unit}={msg.partition_value}"
    return label, app_id_for(unit, msg.partition_value)


def _as_message(message: Any) -> RorderMessage:
    if isinstance(message, RorderMessage):
        return message
    if isinstance(message, (str, bytes)):
        return RorderMessage.decode(message)
    return RorderMessage.from_dict(dict(message) if isinstance(message, Mapping) else message)


def _select_files(snap: TableSnapshot, unit: str | None, msg: RorderMessage) -> list[LiveFile]:
    if msg.value_range is not None:
        return _range_files(snap, unit, msg, msg.value_range)
    if unit is None:
        if msg.has_partition and msg.partition_value is not None:
            raise MessageError(
                f"the table is not partitioned but the message names partition_value {msg.partition_value!r}"
            )
        files = list(snap.files)
    else:
        if not msg.has_partition:
            raise MessageError(
                f"the table is partitioned by {unit!r}; the message must name partition_value "
                "(null for the null partition)"
            )
        files = snap.partition_files(unit, msg.partition_value)
        if not files and msg.files is None:  # a hand-written rerun naming a partition that is not there
            known = snap.partitions(unit)
            if isinstance(snap, PartitionSnapshot):  # it holds one partition: list the others (error path only)
                whole = TableSnapshot.load(
                    snap.storage.uri, storage=snap.storage, version=snap.version, for_writing=False
                )
                known = whole.partitions(unit)
            raise partition_not_found(unit, msg.partition_value, snap.version, known)
    if msg.files is None:
        return files
    live = {f.path: f for f in files}
    chosen = []
    for path, _size in msg.files:
        f = live.get(path)
        if f is None:
            raise CommitConflictError(
                f"planned file {path} is not a live file of {unit}={msg.partition_value} at version "
                f"{snap.version}; the plan is stale or for another partition. Plan again"
            )
        chosen.append(f)
    return chosen


def _range_files(snap: TableSnapshot, unit: str | None, msg: RorderMessage, value_range: ValueRange) -> list[LiveFile]:
    """A value-range unit's files: the live files at the message's version whose ``by`` statistics overlap
    its range (a file appended since the plan is not at that version: it is left for the next run), or
    exactly the planned ``files``, each of which must be one of them."""
    if unit is not None:
        raise MessageError(
            f"the table is partitioned by {unit!r}; a value-range message applies to a clustered or unpartitioned table"
        )
    if value_range.column != msg.options.by:
        raise MessageError(f"message 'range' column {value_range.column!r} is not the by column {msg.options.by!r}")
    files = range_files(snap, value_range)
    if msg.files is None:
        if value_range.cuts:  # a cut unit rewrites the fresh files only: those not in this layout
            signature = layout_signature(
                msg.options.by or value_range.column, msg.options.sort_by, msg.options.unique_by
            )
            return [f for f in files if f.tags.get(LAYOUT_TAG) != signature]
        return files
    live = {f.path: f for f in files}
    for path, _size in msg.files:
        if path not in live:
            raise CommitConflictError(
                f"planned file {path} is not a live file of {value_range.label} at version {snap.version}; "
                "the plan is stale or for another unit. Plan again"
            )
    return [live[p] for p, _ in msg.files]


def _rewrite(
    snap: TableSnapshot,
    files: list[LiveFile],
    by: str,
    msg: RorderMessage,
    progress: Callable[[str], None] | None,
    on_output: Callable[[OutputFile], None] | None = None,
) -> tuple[list[OutputFile], RewriteResult, list[Cdc]]:
    """Rewrite each partition directory of the unit (one, unless the table has several partition columns).

    Returns the outputs, the figures and, when ``unique_by`` dropped rows of a table with the change data
    feed on, the ``cdc`` actions of the change data files holding those rows as deletions.
    """
    groups: dict[tuple[tuple[str, Any], ...], list[LiveFile]] = {}
    types = snap.schema.partition_types()
    for f in files:  # one group per partition directory's values, however the log spells them
        groups.setdefault(partition_values_key(f.add.partition_values, types), []).append(f)
    outputs: list[OutputFile] = []
    changes: list[Cdc] = []
    record = bool(msg.options.unique_by) and change_data_feed_enabled(snap)
    total = RewriteResult()
    try:
        for group in groups.values():
            sink = _DuplicateSink(snap, group[0]) if record else None
            rw = PartitionRewriter(
                snap,
                group,
                by,
                msg.options,
                dict(group[0].partition_values),
                progress=progress,
                on_output=on_output,
                on_duplicates=sink.write if sink is not None else None,
                cuts=msg.value_range.cuts if msg.value_range is not None else (),
            )
            try:
                res = rw.run()
                outputs.extend(res.outputs)
                if sink is not None and (cdc := sink.action()) is not None:
                    changes.append(cdc)
            except BaseException:
                if sink is not None:
                    sink.abort()
                raise
            for name in (
                "rows_in",
                "rows_out",
                "duplicates_removed",
                "deleted_rows_dropped",
                "spilled_bytes",
                "values",
            ):
                setattr(total, name, getattr(total, name) + getattr(res, name))
            total.passes = max(total.passes, res.passes)
    except BaseException:
        _delete_outputs(snap.storage, outputs)
        _delete_changes(snap.storage, changes)
        raise
    total.outputs = outputs
    return outputs, total, changes


class _DuplicateSink:
    """The change data file of one partition directory's dropped duplicates, opened at the first one."""

    def __init__(self, snap: TableSnapshot, sample: LiveFile) -> None:
        self.snap = snap
        self.directory = sample.key.rpartition("/")[0]
        self.partition_values = dict(sample.add.partition_values or {})
        self.sink: ChangeSink | None = None

    def write(self, rows: pa.Table) -> None:
        if self.sink is None:
            self.sink = ChangeSink(
                self.snap.storage, self.directory, self.snap.schema.file_schema, self.partition_values
            )
        self.sink.write(as_deletes(rows))

    def action(self) -> Cdc | None:
        return self.sink.action() if self.sink is not None else None

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.abort()
            delete_orphans(self.snap.storage, [self.sink.key])


def _delete_changes(storage: TableStorage, changes: list[Cdc]) -> None:
    delete_orphans(storage, [unquote(c.path) for c in changes])


def _delete_outputs(storage: TableStorage, outputs: list[OutputFile]) -> None:
    delete_orphans(storage, [o.key for o in outputs])


def _finish(report: PartitionReport, started: float) -> PartitionReport:
    if report.status == "committed":
        report.commit_outcome = CommitOutcome.COMMITTED.value
    elif report.status == "skipped":
        done = report.reason.startswith("already committed")
        report.commit_outcome = (CommitOutcome.ALREADY_DONE if done else CommitOutcome.NOTHING_TO_DO).value
    report.seconds = round(time.monotonic() - started, 3)
    log.info("%s", json.dumps({"event": "rorder_partition", **report.to_dict()}, default=str))
    return report


# ---------------------------------------------------------------------- many partitions
def _run_one(
    message: dict[str, Any],
    storage_options: dict[str, str] | None,
    snapshot: TableSnapshot | None = None,
    before_commit: Callable[[], None] | None = None,
) -> PartitionReport:
    """One partition on a worker thread: never raises; failures come back as a failed report."""
    started = time.monotonic()
    hooks = {"before_commit": lambda _v: before_commit()} if before_commit else None
    try:
        return rorder_single(message, storage_options=storage_options, snapshot=snapshot, hooks=hooks)
    except Exception as exc:
        return PartitionReport.failure(message, exc, time.monotonic() - started)


def rorder(
    dt_or_uri: Any,
    *,
    sort_by: Any = None,
    unique_by: Any = None,
    by: str | None = None,
    partitions: list[Any] | None = None,
    target_file_size: int | None = None,
    memory_budget: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    layout: str | None = None,
    max_footer_bytes: int | None = None,
    min_row_group_bytes: int | str | None = None,
    max_workers: int | None = None,
    storage_options: dict[str, str] | None = None,
    progress: Callable[[PartitionReport], None] | None = None,
    raise_on_failure: bool = True,
    max_materialize_size: int | None = None,
) -> RorderReport:
    """Rewrite every partition (or the named ``partitions``) that is not yet in layout.

    Each partition is its own transaction; partitions run on ``max_workers`` threads of this process
    (default: CPU count) — never in child processes, so the caller's script is never imported again.
    ``progress`` is called with each partition's report as it finishes, in the calling thread.
    On Ctrl-C no further partition starts, commits under way finish, the others are abandoned before
    their commit, and :class:`~deltaextras.ops.rorder.pool.RunInterrupted` (a ``KeyboardInterrupt``) carries
    every partition's outcome (see :mod:`deltaextras.ops.rorder.pool`).
    If any partition failed, :class:`~deltaextras.errors.PartitionsFailedError` is raised after all the others
    finished (``raise_on_failure=False`` returns the report instead). ``max_materialize_size`` is ignored
    (memory is bounded by ``memory_budget``). ``layout="tiered"`` rewrites only each partition's fresh files
    and the tiers the size-tiered policy merges (:mod:`deltaextras.ops.rorder.tiers`); ``"full"`` rewrites a
    partition with new files whole. ``max_footer_bytes``, ``min_row_group_bytes``: docs/options.md.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [2, 1, 2, 11, 10], "k_range": [0, 0, 0, 1, 1]}),
        ...                 partition_by=["k_range"])
        >>> [r.status for r in rorder(path, max_workers=1)]
        ['committed', 'committed']
    """
    del max_materialize_size
    plan = plan_units(
        dt_or_uri,
        by=by,
        sort_by=sort_by,
        unique_by=unique_by,
        partitions=partitions,
        target_file_size=target_file_size,
        memory_budget=memory_budget,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
        layout=layout,
        max_footer_bytes=max_footer_bytes,
        min_row_group_bytes=min_row_group_bytes,
        storage_options=storage_options,
        files="rewrite",
    )
    options = _plan_storage_options(dt_or_uri, storage_options)
    report = _skipped_report(plan, progress)
    snapshot_of = _unit_snapshots(plan)
    messages = [m.to_dict() for m in plan.messages()]
    if max_workers is not None and max_workers < 1:
        raise InvalidArgumentError(f"max_workers must be at least 1, got {max_workers}")
    try:
        report.partitions.extend(
            run_partitions(
                messages,
                lambda m, before_commit: _run_one(m, options, snapshot_of(m), before_commit),
                workers=max_workers or os.cpu_count() or 1,
                progress=progress,
                describe=lambda m: PartitionReport.failure(m, Exception(), 0.0),
            )
        )
    except RunInterrupted as exc:
        exc.report = RorderReport([*report.partitions, *exc.report])
        exc.args = (f"interrupted: {exc.report.summary()}",)  # the skipped partitions count too
        raise
    return _finished(plan, report, raise_on_failure)


def _finished(plan: TablePlan, report: RorderReport, raise_on_failure: bool) -> RorderReport:
    """The run's report in the plan's order; :class:`PartitionsFailedError` if a unit failed and the caller
    asked for it."""
    order = {p.label: i for i, p in enumerate(plan.partitions)}
    report.partitions.sort(key=lambda r: order.get(r.partition or "(table)", 0))
    if report.failed and raise_on_failure:
        first = report.failed[0]
        raise PartitionsFailedError(
            f"{report.summary()}; first failure {first.partition}: {first.error_type}: {first.reason}", report
        )
    return report


def _skipped_report(plan: TablePlan, progress: Callable[[PartitionReport], None] | None) -> RorderReport:
    """A run's report holding the units the plan skips (each passed to ``progress``)."""
    report = RorderReport()
    for p in plan.skipped():
        named = p.partition_name is not None or p.value_range is not None
        skipped = PartitionReport(plan.uri, p.label if named else None, "skipped", p.reason, plan.version)
        skipped.commit_outcome = CommitOutcome.NOTHING_TO_DO.value
        report.partitions.append(skipped)
        if progress:
            progress(skipped)
    return report


def _unit_snapshots(plan: TablePlan) -> Callable[[dict[str, Any]], TableSnapshot | None]:
    """For each message of the plan, the snapshot of its unit, built on first use from the files the plan
    read (so no worker reads the log again, a value-range unit's neither); the plan then lets go of them."""
    units: dict[tuple[Any, ...], Unit] = {_unit_id(u.message_fields()): u for u in plan.to_rewrite()}

    def snapshot_of(message: dict[str, Any]) -> TableSnapshot | None:
        unit = units.pop(_unit_id(message), None)
        return None if unit is None else plan.unit_snapshot(unit)

    return snapshot_of


def _unit_id(fields: Mapping[str, Any]) -> tuple[Any, ...]:
    """What tells one unit of a plan from another in its message: partition name and value, value range."""
    value_range = fields.get("value_range") or fields.get("range")
    if isinstance(value_range, ValueRange):
        value_range = value_range.to_json()
    return (fields.get("partition_name"), fields.get("partition_value"), json.dumps(value_range, sort_keys=True))


def _plan_storage_options(dt_or_uri: Any, storage_options: dict[str, str] | None) -> dict[str, str] | None:
    if storage_options is not None or isinstance(dt_or_uri, (str, os.PathLike)):
        return storage_options
    return getattr(dt_or_uri, "_storage_options", None)


def plan_messages(dt_or_uri: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Ready-to-send messages (JSON objects), one per partition that needs work.

    Takes the options of :func:`~deltaextras.ops.rorder.plan.plan_table`; plans in one streaming pass over the
    log (memory follows the partitions, not the files). Encode each with
    ``RorderMessage.from_dict(m).encode()`` for an Azure queue (base64 JSON).

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [2, 1], "k_range": [0, 0]}), partition_by=["k_range"])
        >>> [m["partition_value"] for m in plan_messages(path)]
        ['0']
    """
    return [m.to_dict() for m in plan_units(dt_or_uri, **kwargs).messages()]


def rorder_setup_multi(dt: Any, **kwargs: Any) -> tuple[int, str, str | None, pa.Table]:
    """Plan for fan-out, as the original API: ``(version, table_uri, partition_name, by_group)``.

    ``by_group`` has one row per partition that needs work, with columns ``partition_values``,
    ``path_list`` and ``size_bytes_list``. Prefer :func:`plan_messages`, which returns ready messages.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [2, 1], "k_range": [0, 0]}), partition_by=["k_range"])
        >>> version, uri, name, by_group = rorder_setup_multi(path)
        >>> version, name, by_group.num_rows
        (0, 'k_range', 1)
    """
    plan = plan_units(dt, list_budget=None, **kwargs)
    parts = plan.to_rewrite()
    listed = [p.listed() or [] for p in parts]  # with no budget every unit lists all its files
    by_group = pa.table(
        {
            "partition_values": pa.array([p.partition_value for p in parts], pa.string()),
            "path_list": pa.array([[f for f, _ in files] for files in listed], pa.list_(pa.string())),
            "size_bytes_list": pa.array([[s for _, s in files] for files in listed], pa.list_(pa.int64())),
        }
    )
    return plan.version, plan.uri, plan.partition_name, by_group
