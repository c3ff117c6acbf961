"""Lean planning for the orchestrator: one streaming pass over the log that tallies, per partition, what
planning needs (file count, bytes, records, deleted rows, layout tags) without holding any ``add``.

The checkpoint is read in Arrow batches with a column projection and aggregated in Arrow (group by the
partition value); only the commits after the checkpoint (at most the table's checkpoint interval) are
replayed as actions, and the checkpoint rows they touch are decoded one by one. Memory is O(partitions).
A message lists its partition's files while they fit a queue message, as :func:`~deltaextras.ops.plan.plan_table`'s do.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp()
    >>> for r in (0, 1):
    ...     write_deltalake(path, pa.table({"node_id": [r * 10, r * 10 + 1], "node_id_range": [r, r]}),
    ...                     partition_by=["node_id_range"], mode="append")
    >>> plan = plan_table_lean(path)
    >>> plan.partition_name, plan.by, [(p.partition_value, p.file_count) for p in plan.to_rewrite()]
    ('node_id_range', 'node_id', [('0', 1), ('1', 1)])
    >>> [len(m.files) for m in plan.messages()]
    [1, 1]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core.actions import Add, Remove
from ..core.partition_snapshot import (
    LogHead,
    add_batches,
    adds_in,
    json_checkpoint_adds,
    partition_column,
    read_head,
    tail_actions,
)
from ..core.protocol import check_protocol
from ..core.snapshot import LiveFile
from ..core.storage import TableStorage
from ..errors import PartitionNotFoundError
from .layout import LAYOUT_TAG, RUN_TAG, layout_signature
from .message import RorderMessage, partition_value_to_str
from .options import RorderOptions
from .plan import MAX_MESSAGE_JSON, _sort_key, _table_args, in_layout, resolve_unit

_RECORDS = r'"numRecords"\s*:\s*(?P<n>\d+)'
_NULL_KEY = "\x00"
_FILE_OVERHEAD = (
    24  # JSON around one (path, size) pair of a message  # stands for a null partition value inside a directory key
)


@dataclass
class Tally:
    """What one partition's live files add up to."""

    files: int = 0
    bytes: int = 0
    records: int = 0
    deleted: int = 0
    tagged: int = 0  # files whose layout tag is the plan's signature
    run_nulls: int = 0  # files without a run tag
    runs: set[str] = field(default_factory=set)  # distinct run tags (kept up to two)
    dirs: set[str] = field(default_factory=set)  # distinct partition directories
    listed: list[tuple[str, int]] | None = field(default_factory=list)  # (path, size) while a message holds them
    listed_chars: int = 0

    def list_files(self, files: list[tuple[str, int]]) -> None:
        """Keep the files for the message while their JSON stays under the message budget."""
        if self.listed is None:
            return
        self.listed_chars += sum(len(p) + _FILE_OVERHEAD for p, _ in files)
        if self.listed_chars > MAX_MESSAGE_JSON:
            self.listed = None
        else:
            self.listed.extend(files)

    def add_run(self, run: str | None) -> None:
        if run is None:
            self.run_nulls += 1
        elif len(self.runs) < 2:
            self.runs.add(run)


@dataclass
class PartitionSummary:
    """One unit of work as the lean plan sees it."""

    partition_name: str | None
    partition_value: str | None
    tally: Tally
    action: str  # "rewrite" | "skip"
    reason: str = ""

    @property
    def has_partition(self) -> bool:
        return self.partition_name is not None

    @property
    def file_count(self) -> int:
        return self.tally.files

    @property
    def bytes(self) -> int:
        return self.tally.bytes

    @property
    def deleted_rows(self) -> int:
        return self.tally.deleted

    @property
    def label(self) -> str:
        return f"{self.partition_name}={self.partition_value}" if self.partition_name else "(table)"


@dataclass
class LeanPlan:
    """The plan of a whole table at one version, from partition tallies."""

    uri: str
    version: int
    partition_name: str | None
    by: str
    options: RorderOptions
    partitions: list[PartitionSummary] = field(default_factory=list)

    def to_rewrite(self) -> list[PartitionSummary]:
        return [p for p in self.partitions if p.action == "rewrite"]

    def skipped(self) -> list[PartitionSummary]:
        return [p for p in self.partitions if p.action == "skip"]

    def message(self, part: PartitionSummary) -> RorderMessage:
        """The work message of one partition; the file list is left out when it would not fit a queue
        message (the worker then reads the partition at ``version`` itself)."""
        files = part.tally.listed
        msg = RorderMessage(
            path=self.uri,
            version=self.version,
            partition_name=part.partition_name,
            partition_value=part.partition_value,
            has_partition=part.has_partition,
            files=None if files is None else tuple(files),
            options=RorderOptions(
                by=self.by,
                sort_by=self.options.sort_by,
                unique_by=self.options.unique_by,
                target_file_size=self.options.target_file_size,
                memory_budget=self.options.memory_budget,
                max_deleted_rows_ratio=self.options.max_deleted_rows_ratio,
            ),
        )
        if len(msg.to_json()) > MAX_MESSAGE_JSON:
            msg = msg.with_files(None)
        return msg

    def messages(self) -> list[RorderMessage]:
        """Ready-to-send messages for every partition that needs work."""
        return [self.message(p) for p in self.to_rewrite()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary, shaped as :meth:`deltaextras.ops.plan.TablePlan.to_dict`."""
        return {
            "table": self.uri,
            "version": self.version,
            "partition_name": self.partition_name,
            "by": self.by,
            "partitions": [
                {
                    "partition_value": p.partition_value,
                    "action": p.action,
                    "reason": p.reason,
                    "files": p.file_count,
                    "bytes": p.bytes,
                    "deleted_rows": p.deleted_rows,
                }
                for p in self.partitions
            ],
        }


def plan_table_lean(
    table: Any,
    *,
    by: str | None = None,
    sort_by: Any = None,
    unique_by: Any = None,
    partitions: list[Any] | None = None,
    target_file_size: int | None = None,
    memory_budget: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | None = None,
) -> LeanPlan:
    """Plan every (or the named) partition of a table at one version in one streaming pass; the same
    decisions as :func:`deltaextras.ops.plan.plan_table`, in memory that grows with partitions, not files."""
    uri, storage_options, version = _table_args(table, storage_options, version)
    storage = TableStorage(uri, storage_options)
    head = read_head(storage, version)
    check_protocol(head.protocol, dict(head.metadata.configuration or {}), head.metadata.schema_string)
    options = RorderOptions.build(
        by=by,
        sort_by=sort_by,
        unique_by=unique_by,
        target_file_size=target_file_size,
        memory_budget=memory_budget,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
    )
    unit, by_col = resolve_unit(head, options.by)  # type: ignore[arg-type]
    for c, _ in options.sort_by:
        head.schema.column(c, "sort_by")
    for c in options.unique_by:
        head.schema.column(c, "unique_by")
    signature = layout_signature(by_col, options.sort_by, options.unique_by)
    tallies = tally_partitions(head, unit, signature)
    if partitions is not None:
        wanted = [partition_value_to_str(v) for v in partitions]
        missing = [w for w in wanted if w not in tallies]
        if missing:
            raise PartitionNotFoundError(
                f"partition {unit}={missing[0]} has no live files at version {head.version}; "
                f"known values: {', '.join(sorted(str(k) for k in tallies))[:300]}"
            )
        tallies = {w: tallies[w] for w in wanted}
    plan = LeanPlan(storage.uri, head.version, unit, by_col, options)
    decided: dict[str | None, str | None] = {}
    look: list[str | None] = []
    for value, t in tallies.items():
        verdict = _verdict(t, options, signature)
        if verdict is _LOOK:
            look.append(value)
        else:
            decided[value] = verdict  # type: ignore[assignment]
    if look:
        decided.update(_look_at_files(head, unit, look, by_col, options))
    for value in sorted(tallies, key=lambda v: (v is None, _sort_key(v))):
        t = tallies[value]
        reason = decided[value]
        plan.partitions.append(
            PartitionSummary(unit, value, t, "skip" if reason else "rewrite", reason or f"{t.files} file(s)")
        )
    return plan


_LOOK = object()


def _verdict(t: Tally, options: RorderOptions, signature: str) -> Any:
    """The reason a partition is in layout, None if it needs a rewrite, or ``_LOOK`` when only its files'
    row groups can tell (mirrors :func:`deltaextras.ops.plan.in_layout`)."""
    if not t.files:
        return "no live files"
    if t.deleted and t.records and t.deleted / t.records > options.max_deleted_rows_ratio:
        return None
    if t.tagged == t.files and not t.run_nulls and len(t.runs) == 1:
        extra = (
            f" ({t.deleted} deleted rows under the {options.max_deleted_rows_ratio:.0%} threshold)" if t.deleted else ""
        )
        return f"already in layout: {t.files} file(s) from one rewrite{extra}"
    if t.files == max(1, len(t.dirs)) and not t.deleted and not options.sort_by and not options.unique_by:
        return _LOOK
    return None


def _look_at_files(
    head: LogHead, unit: str | None, values: list[str | None], by: str, options: RorderOptions
) -> dict[str | None, str | None]:
    """Decide the partitions whose files must be opened, reading their adds in one more filtered pass."""
    adds = adds_in(head, unit, set(values))
    logical = {head.physical(c): c for c in head.partition_columns}
    groups: dict[str | None, list[LiveFile]] = {v: [] for v in values}
    physical = head.physical(unit) if unit is not None else None
    for add in adds.values():
        pv = add.partition_values or {}
        f = LiveFile(add, {logical.get(k, k): v for k, v in pv.items()})
        groups[pv.get(physical) if physical else None].append(f)
    return {v: in_layout(head, files, by, options) for v, files in groups.items()}  # type: ignore[arg-type]


def tally_partitions(head: LogHead, unit: str | None, signature: str) -> dict[str | None, Tally]:
    """Per value of the partition column ``unit`` (None: the whole table under the key None), the tally of
    its live files at the head's version."""
    physical = head.physical(unit) if unit is not None else None
    dir_columns = [head.physical(c) for c in head.partition_columns]
    # The commits after the checkpoint decide the fate of every file they name.
    tail: dict[tuple[str, str | None], Add] = {}
    touched: set[tuple[str, str | None]] = set()
    for _v, actions in tail_actions(head):
        removed = [a.file_id for a in actions if isinstance(a, Remove)]
        for fid in removed:
            tail.pop(fid, None)
            touched.add(fid)
        for a in actions:
            if isinstance(a, Add):
                tail[a.file_id] = a
                touched.add(a.file_id)
    touched_paths = pa.array(sorted({p for p, _ in touched}), pa.string())
    tallies: dict[str | None, Tally] = {}

    def one(add: Add) -> None:
        pv = add.partition_values or {}
        t = tallies.setdefault(pv.get(physical) if physical else None, Tally())
        t.files += 1
        t.bytes += int(add.size or 0)
        t.records += int(add.stats_dict().get("numRecords") or 0)
        t.deleted += int(add.deletion_vector.cardinality or 0) if add.deletion_vector else 0
        tags = add.tags or {}
        t.tagged += tags.get(LAYOUT_TAG) == signature
        t.add_run(tags.get(RUN_TAG))
        t.list_files([(add.path, int(add.size or 0))])
        if len(dir_columns) > 1:
            t.dirs.add("\x01".join(_NULL_KEY if pv.get(c) is None else str(pv.get(c)) for c in dir_columns))

    for add in json_checkpoint_adds(head):
        if add.file_id not in touched:
            one(add)
    for batch in add_batches(head, _projection):
        add_col = batch.column("add")
        present = add_col.is_valid()
        paths = pc.struct_field(add_col, "path")
        hit = pc.fill_null(pc.is_in(paths, value_set=touched_paths), False) if len(touched_paths) else None
        if hit is not None and pc.any(pc.and_(present, hit)).as_py():
            from ..core.actions import decode_checkpoint_batch

            for action in decode_checkpoint_batch(batch.filter(pc.and_(present, hit))):
                if isinstance(action, Add) and action.file_id not in touched:
                    one(action)
            present = pc.and_(present, pc.invert(hit))
        _tally_batch(add_col.filter(present), physical, dir_columns, signature, tallies)
    for add in tail.values():
        one(add)
    return tallies


def _projection(schema: pa.Schema) -> list[str]:
    typ = schema.field("add").type if "add" in schema.names else None
    if typ is None:
        return []
    names = {typ.field(i).name for i in range(typ.num_fields)}
    cols = [f"add.{n}" for n in ("path", "partitionValues", "size", "stats", "tags") if n in names]
    if "deletionVector" in names:
        cols.append("add.deletionVector.cardinality")
    return cols


def _child(add: pa.Array, name: str) -> pa.Array | None:
    typ = add.type
    return pc.struct_field(add, name) if typ.get_field_index(name) >= 0 else None


def _tally_batch(
    add: pa.Array, physical: str | None, dir_columns: list[str], signature: str, tallies: dict[str | None, Tally]
) -> None:
    n = len(add)
    if not n:
        return
    zeros = pa.array([0] * n, pa.int64())
    nulls = pa.nulls(n, pa.string())
    key = partition_column(add, physical) if physical else nulls
    size = _child(add, "size")
    stats = _child(add, "stats")
    records = (
        pc.cast(pc.struct_field(pc.extract_regex(stats, _RECORDS), "n"), pa.int64()) if stats is not None else zeros
    )
    dv = _child(add, "deletionVector")
    deleted = pc.struct_field(dv, "cardinality") if dv is not None else zeros
    tags = _child(add, "tags")
    layout = pc.map_lookup(tags, pa.scalar(LAYOUT_TAG), "first") if tags is not None else nulls
    run = pc.map_lookup(tags, pa.scalar(RUN_TAG), "first") if tags is not None else nulls
    columns: dict[str, pa.Array] = {
        "key": key,
        "size": pc.fill_null(size, 0) if size is not None else zeros,
        "records": pc.fill_null(records, 0),
        "deleted": pc.fill_null(pc.cast(deleted, pa.int64()), 0),
        "tagged": pc.cast(pc.fill_null(pc.equal(layout, pa.scalar(signature)), False), pa.int64()),
        "run": run,
    }
    aggs: list[Any] = [
        ("size", "count", pc.CountOptions(mode="all")),
        ("size", "sum"),
        ("records", "sum"),
        ("deleted", "sum"),
        ("tagged", "sum"),
        ("run", "count", pc.CountOptions(mode="only_null")),
        ("run", "min"),
        ("run", "max"),
    ]
    if len(dir_columns) > 1:
        parts = [pc.fill_null(partition_column(add, c), _NULL_KEY) for c in dir_columns]
        columns["dir"] = pc.binary_join_element_wise(*parts, "\x01")
        aggs.append(("dir", "distinct"))
    columns["path_chars"] = pc.fill_null(pc.utf8_length(pc.struct_field(add, "path")), 0)
    aggs.append(("path_chars", "sum"))
    grouped = pa.table(columns).group_by("key").aggregate(aggs).to_pylist()
    listing = [row["key"] for row in grouped if _fits(tallies.get(row["key"]), row)]
    if listing:
        keys = [k for k in listing if k is not None]
        pick = pc.fill_null(pc.is_in(key, value_set=pa.array(keys, pa.string())), False)
        if None in listing:
            pick = pc.or_(pick, key.is_null())
        rows = add.filter(pick)
        files: dict[str | None, list[tuple[str, int]]] = {}
        rkeys = (partition_column(rows, physical) if physical else pa.nulls(len(rows), pa.string())).to_pylist()
        sizes = pc.struct_field(rows, "size").to_pylist() if size is not None else [0] * len(rows)
        for k, p, sz in zip(rkeys, pc.struct_field(rows, "path").to_pylist(), sizes, strict=True):
            files.setdefault(k, []).append((p, int(sz or 0)))
    else:
        files = {}
    for row in grouped:
        t = tallies.setdefault(row["key"], Tally())
        t.files += row["size_count"]
        t.bytes += row["size_sum"] or 0
        t.records += row["records_sum"] or 0
        t.deleted += row["deleted_sum"] or 0
        t.tagged += row["tagged_sum"] or 0
        t.run_nulls += row["run_count"]
        for r in (row["run_min"], row["run_max"]):
            if r is not None and len(t.runs) < 2:
                t.runs.add(r)
        if "dir_distinct" in row:
            t.dirs.update(row["dir_distinct"])
        if row["key"] in files:
            t.list_files(files[row["key"]])
        elif t.listed is not None:
            t.listed = None


def _fits(t: Tally | None, row: dict[str, Any]) -> bool:
    """Whether a batch's files of one partition still fit the partition's message."""
    if t is not None and t.listed is None:
        return False
    used = t.listed_chars if t is not None else 0
    return used + row["path_chars_sum"] + _FILE_OVERHEAD * row["size_count"] <= MAX_MESSAGE_JSON
