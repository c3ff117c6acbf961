"""Planning: from one table snapshot, which partitions need a rewrite, which are already in layout,
and the work message for each.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp()
    >>> for r in (0, 1):
    ...     write_deltalake(path, pa.table({"node_id": [r * 10, r * 10 + 1], "node_id_range": [r, r]}),
    ...                     partition_by=["node_id_range"], mode="append")
    >>> plan = plan_table(path)
    >>> plan.partition_name, plan.by, [p.partition_value for p in plan.to_rewrite()]
    ('node_id_range', 'node_id', ['0', '1'])
    >>> len(plan.messages())
    2
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.protocol import check_clustering, clustering_columns
from ..core.snapshot import LiveFile, TableSnapshot, open_data_file
from ..errors import InvalidArgumentError, PartitionNotFoundError
from .layout import LAYOUT_TAG, RUN_TAG, layout_signature, row_groups_in_layout
from .message import RorderMessage, partition_value_to_str
from .options import RorderOptions
from .tiers import select_files
from .value_ranges import ValueRange, snapshot_units

RANGE_SUFFIX = "_range"
# Azure queue messages hold 64 KiB of base64, i.e. 48 KiB of JSON; keep a margin.
MAX_MESSAGE_JSON = 40_000


def resolve_unit(snapshot: TableSnapshot, by: str | None, partition_name: str | None = None) -> tuple[str | None, str]:
    """The partition column that cuts the table into units, and the row-group column.

    Example: a table partitioned by ``node_id_range`` gives ``("node_id_range", "node_id")``.
    """
    parts = snapshot.partition_columns
    if partition_name is not None:
        if partition_name not in parts:
            raise InvalidArgumentError(
                f"partition_name {partition_name!r} is not a partition column of the table "
                f"(partition columns: {', '.join(parts) or 'none'})"
            )
        unit = partition_name
    elif not parts:
        unit = None
    else:
        ranged = [c for c in parts if c.endswith(RANGE_SUFFIX)]
        unit = ranged[0] if len(ranged) == 1 else parts[0]
    if by is None and unit is None:
        by = _clustering_by(snapshot)
    if by is None:
        if unit is None:
            raise InvalidArgumentError("the table is not partitioned; pass by= to name the row-group column")
        if not unit.endswith(RANGE_SUFFIX):
            raise InvalidArgumentError(
                f"partition column {unit!r} does not end in {RANGE_SUFFIX!r}, so the row-group column cannot be "
                "derived; pass by= to name it"
            )
        by = unit[: -len(RANGE_SUFFIX)]
    column = snapshot.schema.column(by, "by")
    check_clustering(snapshot.protocol, getattr(snapshot, "domains", {}), by, column.physical)
    return unit, by


def _clustering_by(snapshot: Any) -> str | None:
    """The row-group column of a table clustered by one column: that column (None otherwise)."""
    columns = clustering_columns(snapshot.protocol, getattr(snapshot, "domains", {}))
    if not columns or len(columns) != 1 or len(columns[0]) != 1:
        return None
    return next((c.name for c in snapshot.schema.columns if c.physical == columns[0][0]), None)


@dataclass
class PartitionPlan:
    """One unit of work: a partition (or the whole table) and what to do with it."""

    partition_name: str | None
    partition_value: str | None
    files: list[LiveFile]
    action: str  # "rewrite" | "skip"
    reason: str = ""
    # The tiered layout's figures (deltaextras.ops.tiers.TierSelection.summary); None in the full layout.
    tiers: dict[str, int] | None = None
    # A value-range unit of a clustered or unpartitioned table (deltaextras.ops.value_ranges).
    value_range: ValueRange | None = None

    @property
    def has_partition(self) -> bool:
        return self.partition_name is not None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def label(self) -> str:
        if self.value_range is not None:
            return self.value_range.label
        return f"{self.partition_name}={self.partition_value}" if self.partition_name else "(table)"


@dataclass
class TablePlan:
    """The plan of a whole table at one version."""

    uri: str
    version: int
    partition_name: str | None
    by: str
    options: RorderOptions
    partitions: list[PartitionPlan] = field(default_factory=list)
    snapshot: TableSnapshot | None = field(default=None, repr=False, compare=False)

    def to_rewrite(self) -> list[PartitionPlan]:
        return [p for p in self.partitions if p.action == "rewrite"]

    def skipped(self) -> list[PartitionPlan]:
        return [p for p in self.partitions if p.action == "skip"]

    def message(self, part: PartitionPlan) -> RorderMessage:
        """The work message of one partition; the file list is left out when it would not fit a queue
        message (the worker then plans the same files from the same table version)."""
        return work_message(self, part, tuple((f.path, f.size) for f in part.files))

    def messages(self) -> list[RorderMessage]:
        """Ready-to-send messages for every partition that needs work."""
        return [self.message(p) for p in self.to_rewrite()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (for ``deltaextras plan --json``)."""
        return plan_summary(self, [(p, len(p.files), sum(f.deleted_rows for f in p.files)) for p in self.partitions])


def work_message(plan: Any, part: Any, files: tuple[tuple[str, int], ...] | None) -> RorderMessage:
    """The work message of one partition of a plan (:class:`TablePlan` or the orchestrator's lean plan):
    table, version, partition and options, and ``files`` unless the message would not fit a queue message.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> plan = NS(uri="/t", version=3, by="k", options=RorderOptions())
        >>> part = NS(partition_name="k_range", partition_value="0", has_partition=True)
        >>> m = work_message(plan, part, (("a.parquet", 10),))
        >>> m.version, m.partition_value, m.files
        (3, '0', (('a.parquet', 10),))
    """
    msg = RorderMessage(
        path=plan.uri,
        version=plan.version,
        partition_name=part.partition_name,
        partition_value=part.partition_value,
        has_partition=part.has_partition,
        files=files,
        options=dataclasses.replace(plan.options, by=plan.by),
        value_range=getattr(part, "value_range", None),
    )
    if len(msg.to_json()) > MAX_MESSAGE_JSON:
        msg = msg.with_files(None)
    return msg


def plan_summary(plan: Any, parts: list[tuple[Any, int, int]]) -> dict[str, Any]:
    """The JSON-friendly summary of a plan: ``parts`` are (partition, file count, deleted rows).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> plan = NS(uri="/t", version=3, partition_name="k_range", by="k", options=RorderOptions())
        >>> part = NS(partition_value="0", action="skip", reason="empty", bytes=0)
        >>> plan_summary(plan, [(part, 0, 0)])["partitions"][0]["action"]
        'skip'
    """
    return {
        "table": plan.uri,
        "version": plan.version,
        "partition_name": plan.partition_name,
        "by": plan.by,
        "layout": plan.options.layout,
        "partitions": [
            {
                "partition_value": p.partition_value,
                "action": p.action,
                "reason": p.reason,
                "files": files,
                "bytes": p.bytes,
                "deleted_rows": deleted,
                **({"tiers": p.tiers} if getattr(p, "tiers", None) is not None else {}),
                **({"range": p.value_range.to_json()} if getattr(p, "value_range", None) is not None else {}),
            }
            for p, files, deleted in parts
        ],
    }


def in_layout(snapshot: TableSnapshot, files: list[LiveFile], by: str, options: RorderOptions) -> str | None:
    """Why a unit's files already have the full layout (a reason string), or None if they need a rewrite.
    (The tiered layout decides with :func:`deltaextras.ops.tiers.select_files`.)"""
    if not files:
        return "no live files"
    records = sum(f.num_records or 0 for f in files)
    deleted = sum(f.deleted_rows for f in files)
    if deleted and records and deleted / records > options.max_deleted_rows_ratio:
        return None
    signature = layout_signature(by, options.sort_by, options.unique_by)
    runs = {f.tags.get(RUN_TAG) for f in files}
    if all(f.tags.get(LAYOUT_TAG) == signature for f in files) and len(runs) == 1 and None not in runs:
        extra = f" ({deleted} deleted rows under the {options.max_deleted_rows_ratio:.0%} threshold)" if deleted else ""
        return f"already in layout: {len(files)} file(s) from one rewrite{extra}"
    groups = {tuple(sorted(f.partition_values.items(), key=lambda kv: kv[0])) for f in files}
    if len(files) == len(groups) and not deleted and not options.sort_by and not options.unique_by:
        # One untagged file per partition directory: in layout if its row groups say so.
        physical = snapshot.schema.physical(by)
        for f in files:
            pf = open_data_file(snapshot.storage, f, pre_buffer=False)
            names = [pf.metadata.schema.column(j).path for j in range(len(pf.metadata.schema))]
            if physical not in names or not row_groups_in_layout(pf.metadata, names.index(physical)):
                return None
        return "already in layout: one file whose row groups each hold one value"
    return None


def partition_not_found(
    unit: str | None, value: str | None, version: int, known: Iterable[str | None]
) -> PartitionNotFoundError:
    """The one wording of "no such partition" (``run --partition``, rerun messages, ``inspect``).

    Example:
        >>> str(partition_not_found("k_range", "9", 3, ["0", "1"]))
        'partition k_range=9 has no live files at version 3; known values: 0, 1'
    """
    return PartitionNotFoundError(
        f"partition {unit}={value} has no live files at version {version}; "
        f"known values: {', '.join(sorted(str(k) for k in known))[:300] or 'none'}"
    )


def plan_table(
    table: Any,
    *,
    by: str | None = None,
    sort_by: Any = None,
    unique_by: Any = None,
    partitions: list[Any] | None = None,
    target_file_size: int | None = None,
    memory_budget: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    layout: str | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | None = None,
    snapshot: TableSnapshot | None = None,
) -> TablePlan:
    """Plan every (or the named) partition of a table at one version.

    ``table`` is a URI, a path or a ``deltalake.DeltaTable`` (its URI, version and storage options are used).
    In the tiered ``layout`` a partition's plan lists only the files its run rewrites (fresh files, merged
    tiers), and its ``tiers`` say how many of each.
    """
    uri, storage_options, version = _table_args(table, storage_options, version)
    snap = snapshot or TableSnapshot.load(uri, storage_options, version)
    options = RorderOptions.build(
        by=by,
        sort_by=sort_by,
        unique_by=unique_by,
        target_file_size=target_file_size,
        memory_budget=memory_budget,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
        layout=layout,
    )
    unit, by_col = resolve_unit(snap, options.by)
    for c, _ in options.sort_by:
        snap.schema.column(c, "sort_by")
    for c in options.unique_by:
        snap.schema.column(c, "unique_by")
    plan = TablePlan(snap.storage.uri, snap.version, unit, by_col, options, snapshot=snap)
    if unit is None and (units := range_units(snap, by_col, options)) is not None:
        if partitions is not None:
            raise InvalidArgumentError("the table's units are value ranges, not partitions; leave partitions= out")
        plan.partitions.extend(decide(snap, None, None, files, by_col, options, vr) for vr, files in units)
        return plan
    if unit is None:
        groups: dict[str | None, list[LiveFile]] = {None: list(snap.files)} if snap.files else {}
    else:
        groups = snap.partitions(unit)
    if partitions is not None:
        wanted = [partition_value_to_str(v) for v in partitions]
        missing = [w for w in wanted if w not in groups]
        if missing:
            raise partition_not_found(unit, missing[0], snap.version, groups)
        groups = {w: groups[w] for w in wanted}
    for value in sorted(groups, key=lambda v: (v is None, _sort_key(v))):
        plan.partitions.append(decide(snap, unit, value, groups[value], by_col, options))
    return plan


def decide(
    snap: Any,
    unit: str | None,
    value: str | None,
    files: list[LiveFile],
    by: str,
    options: RorderOptions,
    value_range: ValueRange | None = None,
) -> PartitionPlan:
    """The plan of one unit (a partition, the whole table or a value range): rewrite or skip, and why."""
    if options.layout == "tiered":
        sel = select_files(files, snap.schema, by, options)
        action = "rewrite" if sel.files else "skip"
        return PartitionPlan(unit, value, sel.files, action, sel.reason(), sel.summary(), value_range)
    reason = in_layout(snap, files, by, options)
    action = "skip" if reason else "rewrite"
    return PartitionPlan(unit, value, files, action, reason or f"{len(files)} file(s)", None, value_range)


def range_units(snap: Any, by: str, options: RorderOptions) -> list[tuple[ValueRange, list[LiveFile]]] | None:
    """The value-range units of an unpartitioned table (None: the whole table is one unit, as before)."""
    signature = layout_signature(by, options.sort_by, options.unique_by)

    def settled(f: LiveFile) -> str | None:
        return f.tags.get(RUN_TAG) if f.tags.get(LAYOUT_TAG) == signature else None

    return snapshot_units(snap, by, options.target_file_size, settled)


def _sort_key(v: str | None) -> tuple[int, Any]:
    if v is None:
        return (2, "")
    try:
        return (0, float(v))
    except ValueError:
        return (1, v)


def _table_args(
    table: Any, storage_options: dict[str, str] | None, version: int | None
) -> tuple[str, dict[str, str] | None, int | None]:
    if isinstance(table, (str, os.PathLike)):
        return os.fspath(table), storage_options, version
    uri = getattr(table, "table_uri", None)
    if uri is None:
        raise InvalidArgumentError(f"expected a table URI or a deltalake.DeltaTable, got {type(table).__name__}")
    if storage_options is None:
        storage_options = getattr(table, "_storage_options", None)
    if version is None:
        version = table.version()
    return str(uri), storage_options, version
