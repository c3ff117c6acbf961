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

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.actions import Add, decode_checkpoint_batch
from ..core.partition_snapshot import (
    FileEntry,
    LogHead,
    add_batches,
    adds_in,
    json_checkpoint_adds,
    partition_column,
    read_head,
    tail_entries,
)
from ..core.protocol import check_protocol
from ..core.snapshot import LiveFile
from ..core.storage import TableStorage
from ..errors import PartitionNotFoundError
from .layout import LAYOUT_TAG, RUN_TAG, layout_signature
from .message import RorderMessage, partition_value_to_str
from .options import RorderOptions
from .plan import (
    MAX_MESSAGE_JSON,
    _sort_key,
    _table_args,
    in_layout,
    plan_summary,
    plan_table,
    resolve_unit,
    work_message,
)
from .tiers import TierSelection, select_files

_RECORDS = r'"numRecords"\s*:\s*(?P<n>\d+)'
_RECORDS_PY = re.compile(r'"numRecords"\s*:\s*(\d+)')
PLAN_BATCH_ROWS = 131_072  # rows of checkpoint per Arrow batch (the partition tally is per batch)
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
    # The tiered layout: the files the run rewrites (the partition's others stay); None in the full layout.
    selection: TierSelection | None = None

    @property
    def has_partition(self) -> bool:
        return self.partition_name is not None

    @property
    def file_count(self) -> int:
        return self.tally.files if self.selection is None else len(self.selection.files)

    @property
    def bytes(self) -> int:
        return self.tally.bytes if self.selection is None else self.selection.bytes

    @property
    def tiers(self) -> dict[str, int] | None:
        return None if self.selection is None else self.selection.summary()

    @property
    def deleted_rows(self) -> int:
        return self.tally.deleted if self.selection is None else sum(f.deleted_rows for f in self.selection.files)

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
        if part.selection is not None:
            files = [(f.path, f.size) for f in part.selection.files]
            if sum(len(p) + _FILE_OVERHEAD for p, _ in files) > MAX_MESSAGE_JSON:
                files = None
        return work_message(self, part, None if files is None else tuple(files))

    def messages(self) -> list[RorderMessage]:
        """Ready-to-send messages for every partition that needs work."""
        return [self.message(p) for p in self.to_rewrite()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary, shaped as :meth:`deltaextras.ops.plan.TablePlan.to_dict`."""
        return plan_summary(self, [(p, p.file_count, p.deleted_rows) for p in self.partitions])


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
    layout: str | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | None = None,
) -> LeanPlan:
    """Plan every (or the named) partition of a table at one version in one streaming pass; the same
    decisions as :func:`deltaextras.ops.plan.plan_table`, in memory that grows with partitions, not files."""
    kwargs = dict(by=by, sort_by=sort_by, unique_by=unique_by, partitions=partitions, layout=layout)
    kwargs.update(target_file_size=target_file_size, memory_budget=memory_budget)
    kwargs.update(max_deleted_rows_ratio=max_deleted_rows_ratio)
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
        layout=layout,
    )
    unit, by_col = resolve_unit(head, options.by)  # type: ignore[arg-type]
    if unit is None:  # an unpartitioned or clustered table: value-range units (deltaextras.ops.value_ranges)
        return plan_table(uri, **kwargs, storage_options=storage_options, version=head.version)  # type: ignore[return-value]
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
    selections: dict[str | None, TierSelection] = {}
    look: list[str | None] = []
    for value, t in tallies.items():
        verdict = _verdict(t, options, signature)
        if verdict is _LOOK:
            look.append(value)
        elif options.layout == "tiered":
            selections[value] = TierSelection(runs_before=1, runs_after=1)  # one settled run: nothing to do
        else:
            decided[value] = verdict  # type: ignore[assignment]
    if look:
        decided.update(_look_at_files(head, unit, look, by_col, options, selections))
    for value in sorted(tallies, key=lambda v: (v is None, _sort_key(v))):
        t = tallies[value]
        reason = decided.get(value)
        sel = selections.get(value)
        if sel is not None:
            action = "rewrite" if sel.files else "skip"
            plan.partitions.append(PartitionSummary(unit, value, t, action, sel.reason(), sel))
            continue
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
    if options.layout == "tiered":
        # One run, nothing fresh and few deleted rows: nothing to do; else its files decide (deltaextras.ops.tiers).
        quiet = not t.deleted or (t.records and t.deleted / t.records <= options.max_deleted_rows_ratio)
        if quiet and t.tagged == t.files and not t.run_nulls and len(t.runs) == 1:
            return "tiered: no fresh files, 1 tier(s), nothing to merge"
        return _LOOK
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
    head: LogHead,
    unit: str | None,
    values: list[str | None],
    by: str,
    options: RorderOptions,
    selections: dict[str | None, TierSelection],
) -> dict[str | None, str | None]:
    """Decide the partitions whose files must be opened, reading their adds in one more filtered pass; in
    the tiered layout, each one's selection goes to ``selections``."""
    adds = adds_in(head, unit, set(values))
    logical = {head.physical(c): c for c in head.partition_columns}
    groups: dict[str | None, list[LiveFile]] = {v: [] for v in values}
    physical = head.physical(unit) if unit is not None else None
    for add in adds.values():
        pv = add.partition_values or {}
        f = LiveFile(add, {logical.get(k, k): v for k, v in pv.items()})
        groups[pv.get(physical) if physical else None].append(f)
    if options.layout == "tiered":
        for v, files in groups.items():
            selections[v] = select_files(files, head.schema, by, options)
        return {v: None for v in groups}
    return {v: in_layout(head, files, by, options) for v, files in groups.items()}  # type: ignore[arg-type]


def tally_partitions(head: LogHead, unit: str | None, signature: str) -> dict[str | None, Tally]:
    """Per value of the partition column ``unit`` (None: the whole table under the key None), the tally of
    its live files at the head's version."""
    physical = head.physical(unit) if unit is not None else None
    dir_columns = [head.physical(c) for c in head.partition_columns]
    tallies: dict[str | None, Tally] = {}
    try:
        arrow_tail = _tail_arrow(head, physical, dir_columns, signature)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        arrow_tail = None  # an unusual commit line: the exact, slower path below
    live: pa.Table | None = None
    if arrow_tail is None:
        tail, touched_ids = _tail_python(head)
        touched_paths = pa.array(sorted({p for p, _ in touched_ids}), pa.string())
        fid_all = None
    else:
        live, fid_all, touched_paths = arrow_tail
        tail, touched_ids = {}, {_split_fid(f) for f in fid_all.to_pylist()} if head.checkpoint_is_json else set()

    def one(e: FileEntry) -> None:
        pv = e.partition_values
        t = tallies.setdefault(pv.get(physical) if physical else None, Tally())
        t.files += 1
        t.bytes += e.size
        m = _RECORDS_PY.search(e.stats) if e.stats else None
        t.records += int(m.group(1)) if m else 0
        t.deleted += e.deleted
        t.tagged += e.tags.get(LAYOUT_TAG) == signature
        t.add_run(e.tags.get(RUN_TAG))
        t.list_files([(e.path, e.size)])
        if len(dir_columns) > 1:
            t.dirs.add("\x01".join(_NULL_KEY if pv.get(c) is None else str(pv.get(c)) for c in dir_columns))

    for add in json_checkpoint_adds(head):
        if add.file_id not in touched_ids:
            one(FileEntry.of_add(add))
    for batch in add_batches(head, _projection, PLAN_BATCH_ROWS):
        add_col = batch.column("add")
        present = add_col.is_valid()
        if len(touched_paths):
            # a checkpoint file the commits after it name is decided by them (or kept, if only its path matched)
            hit = pc.fill_null(pc.is_in(pc.struct_field(add_col, "path"), value_set=touched_paths), False)
            if pc.any(pc.and_(present, hit)).as_py():
                if fid_all is None:
                    for action in decode_checkpoint_batch(batch.filter(pc.and_(present, hit))):
                        if isinstance(action, Add) and action.file_id not in touched_ids:
                            one(FileEntry.of_add(action))
                else:
                    rows = add_col.filter(pc.and_(present, hit))
                    rows = rows.filter(pc.invert(pc.is_in(_fid(rows), value_set=fid_all)))
                    _tally_columns(_columns(rows, physical, dir_columns, signature), tallies)
                present = pc.and_(present, pc.invert(hit))
        _tally_columns(_columns(add_col.filter(present), physical, dir_columns, signature), tallies)
    for e in tail.values():
        one(e)
    if live is not None and live.num_rows:
        _tally_columns({n: live.column(n).combine_chunks() for n in live.column_names}, tallies)
    return tallies


def _tail_python(head: LogHead) -> tuple[dict[tuple[str, str | None], FileEntry], set[tuple[str, str | None]]]:
    tail: dict[tuple[str, str | None], FileEntry] = {}
    touched: set[tuple[str, str | None]] = set()
    for _v, entries in tail_entries(head):
        for e in entries:
            if not e.is_add:
                tail.pop(e.file_id, None)
                touched.add(e.file_id)
        for e in entries:
            if e.is_add:
                tail[e.file_id] = e
                touched.add(e.file_id)
    return tail, touched


_DV = pa.struct(
    [("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int64()), ("cardinality", pa.int64())]
)


def _tail_arrow(
    head: LogHead, physical: str | None, dir_columns: list[str], signature: str
) -> tuple[pa.Table | None, pa.Array, pa.Array]:
    """The commits after the checkpoint, parsed in Arrow: the live ``add`` rows they leave as tally
    columns (None if there are none), the file ids and the paths every one of their actions names."""
    import io

    import pyarrow.json as pj

    names = sorted({c for c in [*dir_columns, physical] if c})
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("partitionValues", pa.struct([(c, pa.string()) for c in names])),
            ("stats", pa.string()),
            ("tags", pa.struct([(LAYOUT_TAG, pa.string()), (RUN_TAG, pa.string())])),
            ("deletionVector", _DV),
        ]
    )
    schema = pa.schema([("add", add_type), ("remove", pa.struct([("path", pa.string()), ("deletionVector", _DV)]))])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    adds: list[pa.Table] = []
    removes: list[pa.Table] = []
    for v, data in head.tail:
        if not data.strip():
            continue
        t = pj.read_json(io.BytesIO(data), parse_options=options)
        for name, out in (("add", adds), ("remove", removes)):
            col = t.column(name).combine_chunks()
            col = col.filter(col.is_valid())
            if not len(col):
                continue
            if pc.any(pc.struct_field(col, "path").is_null()).as_py():
                raise pa.ArrowInvalid(f"a {name} without a path")
            cols = (
                _columns_json(col, physical, dir_columns, signature)
                if name == "add"
                else {"path": pc.struct_field(col, "path")}
            )
            cols["fid"] = _fid(col)
            cols["version"] = pa.array(np.full(len(col), v, dtype=np.int64))
            out.append(pa.table(cols))
    named = adds + removes
    if not named:
        empty = pa.array([], pa.string())
        return None, empty, empty
    paths = pa.concat_arrays([t.column("path").combine_chunks() for t in named]).unique()
    fid_all = pa.concat_arrays([t.column("fid").combine_chunks() for t in named]).unique()
    if not adds:
        return None, fid_all, paths
    every = pa.concat_tables(adds)
    # The newest add of a file id counts, unless a later commit removes it (a commit applies its removes first).
    newest = every.group_by("fid").aggregate([("version", "max")])
    every = every.join(newest, "fid")
    every = every.filter(pc.equal(every.column("version"), every.column("version_max")))
    if removes:
        gone = pa.concat_tables(removes).group_by("fid").aggregate([("version", "max")])
        every = every.join(gone.rename_columns(["fid", "removed_at"]), "fid")
        every = every.filter(
            pc.or_kleene(
                every.column("removed_at").is_null(), pc.less_equal(every.column("removed_at"), every.column("version"))
            )
        )
    keep = [n for n in _TALLY_COLUMNS if n in every.column_names]
    every = every.group_by("fid", use_threads=False).aggregate([(n, "last") for n in keep])
    return every.rename_columns([c.removesuffix("_last") for c in every.column_names]).select(keep), fid_all, paths


def _split_fid(fid: str) -> tuple[str, str | None]:
    path, _, dv = fid.partition("\x00")
    return path, dv or None


_TALLY_COLUMNS = ("key", "size", "records", "deleted", "tagged", "run", "dir", "path")


def _fid(add: pa.Array) -> pa.Array:
    """The logical file id of each row as one string: path, NUL, deletion vector unique id."""
    path = pc.struct_field(add, "path")
    typ = add.type
    if typ.get_field_index("deletionVector") < 0:
        return pc.binary_join_element_wise(path, pa.scalar(""), "\x00")
    dv = pc.struct_field(add, "deletionVector")
    sub = dv.type
    offset = pc.struct_field(dv, "offset") if sub.get_field_index("offset") >= 0 else pa.nulls(len(add), pa.int64())
    uid = pc.binary_join_element_wise(
        pc.fill_null(pc.struct_field(dv, "storageType"), ""),
        pc.fill_null(pc.struct_field(dv, "pathOrInlineDv"), ""),
        pc.fill_null(pc.binary_join_element_wise(pa.scalar("@"), pc.cast(offset, pa.string()), ""), ""),
        "",
    )
    return pc.binary_join_element_wise(path, pc.if_else(dv.is_valid(), uid, ""), "\x00")


def _columns_json(add: pa.Array, physical: str | None, dir_columns: list[str], signature: str) -> dict[str, pa.Array]:
    """Tally columns of ``add`` rows parsed from commit JSON (partition values and tags as structs)."""
    pv = pc.struct_field(add, "partitionValues")
    tags = pc.struct_field(add, "tags")
    return _assemble(
        add,
        pc.struct_field(pv, physical) if physical else None,
        [pc.struct_field(pv, c) for c in dir_columns] if len(dir_columns) > 1 else None,
        pc.struct_field(tags, LAYOUT_TAG),
        pc.struct_field(tags, RUN_TAG),
        signature,
    )


def _columns(add: pa.Array, physical: str | None, dir_columns: list[str], signature: str) -> dict[str, pa.Array]:
    """Tally columns of checkpoint ``add`` rows (partition values and tags as maps)."""
    tags = _child(add, "tags")
    return _assemble(
        add,
        partition_column(add, physical) if physical else None,
        [partition_column(add, c) for c in dir_columns] if len(dir_columns) > 1 else None,
        pc.map_lookup(tags, pa.scalar(LAYOUT_TAG), "first") if tags is not None else None,
        pc.map_lookup(tags, pa.scalar(RUN_TAG), "first") if tags is not None else None,
        signature,
    )


def _assemble(
    add: pa.Array,
    key: pa.Array | None,
    dirs: list[pa.Array] | None,
    layout: pa.Array | None,
    run: pa.Array | None,
    signature: str,
) -> dict[str, pa.Array]:
    n = len(add)
    zeros = pa.array(np.zeros(n, dtype=np.int64))
    nulls = pa.nulls(n, pa.string())
    size = _child(add, "size")
    stats = _child(add, "stats")
    records = (
        pc.cast(pc.struct_field(pc.extract_regex(stats, _RECORDS), "n"), pa.int64()) if stats is not None else zeros
    )
    dv = _child(add, "deletionVector")
    deleted = pc.struct_field(dv, "cardinality") if dv is not None else zeros
    layout = layout if layout is not None else nulls
    columns: dict[str, pa.Array] = {
        "key": key if key is not None else nulls,
        "size": pc.fill_null(size, 0) if size is not None else zeros,
        "records": pc.fill_null(records, 0),
        "deleted": pc.fill_null(pc.cast(deleted, pa.int64()), 0),
        "tagged": pc.cast(pc.fill_null(pc.equal(layout, pa.scalar(signature)), False), pa.int64()),
        "run": run if run is not None else nulls,
        "path": pc.struct_field(add, "path"),
    }
    if dirs is not None:
        columns["dir"] = pc.binary_join_element_wise(*[pc.fill_null(d, _NULL_KEY) for d in dirs], "\x01")
    return columns


def _projection(schema: pa.Schema) -> list[str]:
    typ = schema.field("add").type if "add" in schema.names else None
    if typ is None:
        return []
    names = {typ.field(i).name for i in range(typ.num_fields)}
    cols = [f"add.{n}" for n in ("path", "partitionValues", "size", "stats", "tags") if n in names]
    if "deletionVector" in names:
        cols += [f"add.deletionVector.{n}" for n in ("storageType", "pathOrInlineDv", "offset", "cardinality")]
    return cols


def _child(add: pa.Array, name: str) -> pa.Array | None:
    typ = add.type
    return pc.struct_field(add, name) if typ.get_field_index(name) >= 0 else None


def _tally_columns(columns: dict[str, pa.Array], tallies: dict[str | None, Tally]) -> None:
    key = columns["key"]
    if not len(key):
        return
    aggs: list[Any] = [
        ("size", "count", pc.CountOptions(mode="all")),
        ("size", "sum"),
        ("records", "sum"),
        ("deleted", "sum"),
        ("tagged", "sum"),
        ("run", "count", pc.CountOptions(mode="only_null")),
        ("run", "min"),
        ("run", "max"),
        ("path_chars", "sum"),
    ]
    if "dir" in columns:
        aggs.append(("dir", "distinct"))
    table = {n: c for n, c in columns.items() if n != "path"}
    table["path_chars"] = pc.fill_null(pc.utf8_length(columns["path"]), 0)
    grouped = pa.table(table).group_by("key").aggregate(aggs).to_pylist()
    listing = [row["key"] for row in grouped if _fits(tallies.get(row["key"]), row)]
    files: dict[str | None, list[tuple[str, int]]] = {}
    if listing:
        keys = [k for k in listing if k is not None]
        pick = pc.fill_null(pc.is_in(key, value_set=pa.array(keys, pa.string())), False)
        if None in listing:
            pick = pc.or_(pick, key.is_null())
        rkeys = key.filter(pick).to_pylist()
        for k, p, sz in zip(
            rkeys, columns["path"].filter(pick).to_pylist(), columns["size"].filter(pick).to_pylist(), strict=True
        ):
            files.setdefault(k, []).append((p, int(sz or 0)))
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
