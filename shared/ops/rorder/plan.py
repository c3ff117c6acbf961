"""Planning: the one planner of every caller (``rorder``, ``plan_messages``, ``rorder_setup_multi``,
``plan_table``, the orchestrator, ``deltaextras plan``, ``rorder_spark``).

One streaming pass over the log (:mod:`deltaextras.ops.rorder.tally`) tallies the table per unit — the unit kind
and its keying live in :mod:`deltaextras.ops.rorder.units` — then each unit is decided: rewrite, or skip with a
reason. Only units whose tallies cannot tell (one untagged file per directory, the tiered layout's runs)
have their files read, in one more filtered pass. Memory follows the units, not the files; a plan that
must hand out file lists (``plan_table``, ``rorder``, ``rorder_setup_multi``) asks for them explicitly.

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
from typing import Any, Literal

from ...core.partition_snapshot import LogHead, read_head
from ...core.protocol import check_clustering, check_protocol
from ...core.snapshot import LiveFile, TableSnapshot, open_data_file
from ...core.storage import TableStorage
from ...core.values import partition_values_key
from ...errors import InvalidArgumentError, PartitionNotFoundError
from .message import MAX_MESSAGE_JSON, RorderMessage
from .options import RorderOptions
from .range_scan import ListedFiles, RangeColumns, UnitSums, live_files, scan_ranges
from .rewrite.layout import LAYOUT_TAG, RUN_TAG, layout_signature, row_groups_in_layout
from .tally import FILE_JSON_OVERHEAD, Tally
from .tiers import TierSelection, select_files
from .units import (
    RANGE_SUFFIX,
    PartitionKey,
    RangeKey,
    UnitKey,
    UnitKind,
    UnitScheme,
    clustered_options,
    resolve_unit,
    scheme_for,
)
from .value_ranges import ValueRange, check_type, snapshot_units, supported
from .value_ranges import plan_units as cut_units

__all__ = [
    "MAX_MESSAGE_JSON",
    "RANGE_SUFFIX",
    "PartitionPlan",
    "TablePlan",
    "Unit",
    "in_layout",
    "partition_not_found",
    "plan_table",
    "plan_units",
    "resolve_unit",
    "work_message",
]

FileLists = Literal["none", "rewrite", "all"]


@dataclass
class Unit:
    """One unit of work (a partition, or the whole table) and what to do with it."""

    key: UnitKey
    tally: Tally
    action: str  # "rewrite" | "skip"
    reason: str = ""
    # The tiered layout: the files the run rewrites (the unit's others stay); None in the full layout.
    selection: TierSelection | None = None
    # The unit's live files, when the plan holds them (``files=`` of :func:`plan_units`, or read to decide).
    live_files: list[LiveFile] | None = field(default=None, repr=False)

    @property
    def kind(self) -> UnitKind:
        return self.key.kind

    @property
    def partition_name(self) -> str | None:
        return self.key.partition_name

    @property
    def partition_value(self) -> str | None:
        return self.key.partition_value

    @property
    def has_partition(self) -> bool:
        return self.key.has_partition

    @property
    def label(self) -> str:
        return self.key.label

    @property
    def value_range(self) -> ValueRange | None:
        """The value range of a range unit (None for a partition)."""
        return getattr(self.key, "value_range", None)

    @property
    def files(self) -> list[LiveFile]:
        """The files the unit's rewrite reads (in the tiered layout, the selection)."""
        if self.selection is not None:
            return self.selection.files
        if self.live_files is None:
            raise InvalidArgumentError(
                f"the plan of {self.label} was made without file lists; plan with plan_table() to get them"
            )
        return self.live_files

    @property
    def file_count(self) -> int:
        return self.tally.files if self.selection is None else len(self.selection.files)

    @property
    def bytes(self) -> int:
        return self.tally.bytes if self.selection is None else self.selection.bytes

    @property
    def deleted_rows(self) -> int:
        return self.tally.deleted if self.selection is None else sum(f.deleted_rows for f in self.selection.files)

    @property
    def tiers(self) -> dict[str, int] | None:
        """The tiered layout's figures (:meth:`~deltaextras.ops.rorder.tiers.TierSelection.summary`); None otherwise."""
        return None if self.selection is None else self.selection.summary()

    def listed(self) -> list[tuple[str, int]] | None:
        """The (path, size) pairs the unit's message lists; None when they would not fit a message."""
        if self.selection is None:
            return self.tally.listed
        files = [(f.path, f.size) for f in self.selection.files]
        if self.tally.budget is not None and sum(len(p) + FILE_JSON_OVERHEAD for p, _ in files) > self.tally.budget:
            return None
        return files

    def message_fields(self) -> dict[str, Any]:
        return self.key.message_fields()


PartitionPlan = Unit  # the name of earlier releases


@dataclass
class TablePlan:
    """The plan of a whole table at one version: its units, in order."""

    uri: str
    version: int
    partition_name: str | None
    by: str
    options: RorderOptions
    partitions: list[Unit] = field(default_factory=list)
    # Earlier releases planned from a whole in-memory snapshot; plans no longer hold one.
    snapshot: TableSnapshot | None = field(default=None, repr=False, compare=False)
    # The log head the plan was made from (without its commits) and its unit scheme, for units' snapshots.
    head: LogHead | None = field(default=None, repr=False, compare=False)
    scheme: UnitScheme | None = field(default=None, repr=False, compare=False)

    @property
    def units(self) -> list[Unit]:
        return self.partitions

    def to_rewrite(self) -> list[Unit]:
        return [p for p in self.partitions if p.action == "rewrite"]

    def skipped(self) -> list[Unit]:
        return [p for p in self.partitions if p.action == "skip"]

    def message(self, part: Unit) -> RorderMessage:
        """The work message of one unit; the file list is left out when it would not fit a queue message
        (the worker then plans the same files from the same table version)."""
        listed = part.listed()
        return work_message(self, part, None if listed is None else tuple(listed))

    def messages(self) -> list[RorderMessage]:
        """Ready-to-send messages for every unit that needs work."""
        return [self.message(p) for p in self.to_rewrite()]

    def unit_snapshot(self, unit: Unit) -> TableSnapshot | None:
        """The table as the unit's worker sees it, built from the files the plan holds for it (None when it
        holds none); the unit then lets go of them."""
        if unit.live_files is None or self.head is None or self.scheme is None:
            return None
        files, unit.live_files = unit.live_files, None
        return self.scheme.snapshot(self.head, unit.key, files)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (for ``deltaextras plan --json``)."""
        return {
            "table": self.uri,
            "version": self.version,
            "partition_name": self.partition_name,
            "by": self.by,
            "layout": self.options.layout,
            "partitions": [
                {
                    **p.key.summary_fields(),
                    "action": p.action,
                    "reason": p.reason,
                    "files": p.file_count,
                    "bytes": p.bytes,
                    "deleted_rows": p.deleted_rows,
                    **({"tiers": p.tiers} if p.tiers is not None else {}),
                }
                for p in self.partitions
            ],
        }


def work_message(plan: TablePlan, unit: Unit, files: tuple[tuple[str, int], ...] | None) -> RorderMessage:
    """The work message of one unit of a plan: table, version, unit and options, and ``files`` unless the
    message would not fit a queue message.

    Example:
        >>> from deltaextras.ops.rorder.units import PartitionKey
        >>> plan = TablePlan("/t", 3, "k_range", "k", RorderOptions())
        >>> unit = Unit(PartitionKey("k_range", "0"), Tally(), "rewrite")
        >>> m = work_message(plan, unit, (("a.parquet", 10),))
        >>> m.version, m.partition_value, m.files
        (3, '0', (('a.parquet', 10),))
    """
    msg = RorderMessage(
        path=plan.uri,
        version=plan.version,
        files=files,
        options=dataclasses.replace(plan.options, by=plan.by),
        **unit.message_fields(),
    )
    if len(msg.to_json()) > MAX_MESSAGE_JSON:
        msg = msg.with_files(None)
    return msg


def rewrite_why(files: int, deleted: int) -> str:
    """Why a unit is rewritten whole, for ``plan`` and the reports alike: its files, and the rows its
    deletion vectors hide (purged by the rewrite).

    Example:
        >>> rewrite_why(3, 0), rewrite_why(1, 12)
        ('3 file(s)', '1 file(s), 12 deleted row(s) to purge')
    """
    return f"{files} file(s), {deleted} deleted row(s) to purge" if deleted else f"{files} file(s)"


def in_layout(snapshot: LogHead | TableSnapshot, files: list[LiveFile], by: str, options: RorderOptions) -> str | None:
    """Why a unit's files already have the full layout (a reason string), or None if they need a rewrite.
    (The tiered layout decides with :func:`deltaextras.ops.rorder.tiers.select_files`.)"""
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
    types = snapshot.schema.partition_types()
    groups = {partition_values_key(f.add.partition_values, types) for f in files}
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


def plan_units(
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
    max_footer_bytes: int | None = None,
    min_row_group_bytes: int | str | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | None = None,
    snapshot: TableSnapshot | None = None,
    files: FileLists = "none",
    list_budget: int | None = MAX_MESSAGE_JSON,
) -> TablePlan:
    """Plan every (or the named) unit of a table at one version in one streaming pass over its log.

    ``table`` is a URI, a path or a ``deltalake.DeltaTable`` (its URI, version and storage options are used).
    ``files`` says which units' live files the plan holds (``"none"``: memory follows the units;
    ``"rewrite"``: the units to rewrite; ``"all"``). A unit's message lists its files while their JSON stays
    under ``list_budget`` characters (None: every file is listed, for callers that hand the lists out).
    ``snapshot`` (of earlier releases) names the table and version to plan.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [2, 1, 12], "k_range": [0, 0, 1]}), partition_by=["k_range"])
        >>> plan = plan_units(path)
        >>> [(u.kind.value, u.label, u.action, u.file_count) for u in plan.units]
        [('partition', 'k_range=0', 'rewrite', 1), ('partition', 'k_range=1', 'skip', 1)]
        >>> plan.units[1].reason
        'already in layout: one file whose row groups each hold one value'
    """
    if snapshot is not None:
        table, storage_options, version = snapshot.storage.uri, snapshot.storage.storage_options, snapshot.version
    uri, storage_options, version = _table_args(table, storage_options, version)
    head = read_head(TableStorage(uri, storage_options), version)
    check_protocol(head.protocol, dict(head.metadata.configuration or {}), head.metadata.schema_string)
    options = RorderOptions.build(
        by=by,
        sort_by=sort_by,
        unique_by=unique_by,
        target_file_size=target_file_size,
        memory_budget=memory_budget,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
        layout=layout,
        max_footer_bytes=max_footer_bytes,
        min_row_group_bytes=min_row_group_bytes,
    )
    scheme = scheme_for(head, options.by)
    options = clustered_options(head, scheme.by, options)
    for c, _ in options.sort_by:
        head.schema.column(c, "sort_by")
    for c in options.unique_by:
        head.schema.column(c, "unique_by")
    signature = layout_signature(scheme.by, options.sort_by, options.unique_by)
    ranged = _range_units(head, scheme, options, signature, list_budget, files)
    if ranged is not None:
        if partitions is not None:
            raise InvalidArgumentError("the table's units are value ranges, not partitions; leave partitions= out")
        return TablePlan(head.storage.uri, head.version, None, scheme.by, options, ranged, head=head, scheme=scheme)
    groups = _group(scheme, scheme.tally(head, signature, list_budget))
    if partitions is not None:
        groups = _wanted(scheme, groups, partitions, head.version)
    units = _decide(head, scheme, groups, options, signature)
    if files != "none":
        _attach_files(head, scheme, groups, [u for u in units if files == "all" or u.action == "rewrite"])
    units.sort(key=lambda u: u.key.sort_key())
    lean_head = dataclasses.replace(head, tail=[])
    return TablePlan(
        head.storage.uri, head.version, scheme.column, scheme.by, options, units, head=lean_head, scheme=scheme
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
    max_footer_bytes: int | None = None,
    min_row_group_bytes: int | str | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | None = None,
    snapshot: TableSnapshot | None = None,
) -> TablePlan:
    """Plan every (or the named) partition of a table at one version, with each unit's live files.

    ``table`` is a URI, a path or a ``deltalake.DeltaTable`` (its URI, version and storage options are used).
    In the tiered ``layout`` a partition's plan lists only the files its run rewrites (fresh files, merged
    tiers), and its ``tiers`` say how many of each. The plan is :func:`plan_units`'s with every unit's
    files held (``files="all"``).
    """
    return plan_units(
        table,
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
        version=version,
        snapshot=snapshot,
        files="all",
    )


Groups = dict[UnitKey, tuple[Tally, list[Any]]]


def _range_units(
    head: LogHead, scheme: UnitScheme, options: RorderOptions, signature: str, budget: int | None, lists: FileLists
) -> list[Unit] | None:
    """The value-range units of an unpartitioned or clustered table, each decided from its files
    (:mod:`deltaextras.ops.rorder.value_ranges`); None when the table is one unit as before (not clustered and
    small, no statistics, or a ``by`` type ranges do not support). Planned from the streaming scan's
    compact columns (:mod:`deltaextras.ops.rorder.range_scan`) unless a file's statistics do not tell or
    every unit's files are asked for; then from every live file."""
    if scheme.column is None and lists != "all":
        streamed = _streamed_range_units(head, scheme, options, signature, budget, lists)
        if streamed is not _SLOW:
            return streamed  # type: ignore[return-value]
    if scheme.column is not None:
        return None
    whole = PartitionKey(None, None)
    files = scheme.files(head, [None])[None]
    snap = scheme.snapshot(head, whole, files)

    def settled(f: LiveFile) -> str | None:
        return f.tags.get(RUN_TAG) if f.tags.get(LAYOUT_TAG) == signature else None

    ranges = snapshot_units(snap, scheme.by, options.target_file_size, settled)
    if ranges is None:
        return None
    return [
        _range_unit(head, scheme.by, options, RangeKey(None, None, vr, i), fs, budget)
        for i, (vr, fs) in enumerate(ranges)
    ]


_SLOW = object()


def _streamed_range_units(
    head: LogHead, scheme: UnitScheme, options: RorderOptions, signature: str, budget: int | None, lists: FileLists
) -> Any:
    """The value-range units from compact columns; files are read only for the units that need them
    (``_SLOW``: some file's statistics do not tell, plan from every file)."""
    column = head.schema.column(scheme.by, "by")
    clustered = check_clustering(head.protocol, head.domains, scheme.by, column.physical)
    if not supported(column.delta_type):
        if clustered:
            check_type(scheme.by, column.delta_type)
        return None
    cols = scan_ranges(head, column.physical, column.delta_type, signature)
    if cols is None:
        return _SLOW
    ranges = cut_units(cols.bounds, scheme.by, target=options.target_file_size, run=cols.run)
    if not clustered and len(ranges) <= 1 and not any(vr.cuts for vr, _ in ranges):
        return None
    sums = cols.sums([ix for _, ix in ranges])
    verdicts = [_range_verdict(sums, i, options) for i in range(len(ranges))]
    read = [v is _LOOK or (v is None and lists == "rewrite") for v in verdicts]
    owner = {p: i for i, (_, ix) in enumerate(ranges) if read[i] for p, _ in cols.pairs(ix)}
    held: dict[int, list[LiveFile]] = {i: [] for i in range(len(ranges)) if read[i]}
    for path, f in live_files(head, set(owner)).items() if owner else ():
        held[owner[path]].append(f)
    to_list = [ix if v is None and not r else None for (_, ix), v, r in zip(ranges, verdicts, read, strict=True)]
    listed = _listed(cols, to_list, budget)
    units = []
    for i, ((vr, ix), verdict) in enumerate(zip(ranges, verdicts, strict=True)):
        key = RangeKey(None, None, vr, i)
        if read[i]:
            # a unit the columns decided to rewrite was read only for its files: its tally is the columns'
            decided = _range_tally(sums, i, budget) if verdict is None and options.layout != "tiered" else None
            units.append(_range_unit(head, scheme.by, options, key, held[i], budget, decided=decided))
            continue
        t = _range_tally(sums, i, budget)
        if verdict is None:
            t.listed_chars, t.listed = listed[i]
            units.append(Unit(key, t, "rewrite", rewrite_why(len(ix), t.deleted)))
        elif options.layout == "tiered":
            quiet = TierSelection(runs_before=1, runs_after=1)
            units.append(Unit(key, t, "skip", quiet.reason(), quiet))
        else:
            units.append(Unit(key, t, "skip", verdict))
    return units


def _listed(cols: RangeColumns, units: list[Any], budget: int | None) -> list[tuple[int, Any]]:
    """Per unit (None: not listed here), the JSON characters of its files and their (path, size) pairs
    when they fit a message (else None); the pairs are read from the scan's columns when a message is built."""
    chars = iter(cols.path_chars([ix for ix in units if ix is not None]).tolist())
    out: list[tuple[int, Any]] = []
    for ix in units:
        n = 0 if ix is None else next(chars) + FILE_JSON_OVERHEAD * len(ix)
        fits = ix is not None and (budget is None or n <= budget)
        out.append((n, ListedFiles(cols, ix) if fits else None))
    return out


def _range_tally(sums: UnitSums, i: int, budget: int | None) -> Tally:
    t = Tally(budget=budget, listed=None)
    t.files, t.bytes = int(sums.files[i]), int(sums.bytes[i])
    t.records, t.deleted = int(sums.records[i]), int(sums.deleted[i])
    return t


def _range_verdict(sums: UnitSums, i: int, options: RorderOptions) -> Any:
    """A value-range unit's verdict from its compact columns, as :func:`_verdict` gives a partition's."""
    deleted, records, files = int(sums.deleted[i]), int(sums.records[i]), int(sums.files[i])
    one_run = int(sums.run_low[i]) >= 0 and int(sums.run_low[i]) == int(sums.run_high[i])
    if options.layout == "tiered":
        quiet = not deleted or (records and deleted / records <= options.max_deleted_rows_ratio)
        return "tiered" if quiet and one_run else _LOOK
    if deleted and records and deleted / records > options.max_deleted_rows_ratio:
        return None
    if one_run:
        extra = f" ({deleted} deleted rows under the {options.max_deleted_rows_ratio:.0%} threshold)" if deleted else ""
        return f"already in layout: {files} file(s) from one rewrite{extra}"
    if files == 1 and not deleted and not options.sort_by and not options.unique_by:
        return _LOOK
    return None


def _range_unit(
    head: LogHead,
    by: str,
    options: RorderOptions,
    key: RangeKey,
    files: list[LiveFile],
    budget: int | None,
    *,
    decided: Tally | None = None,
) -> Unit:
    """One value-range unit, decided from its files as a partition whose files were read is (``decided``:
    its tally from the compact columns, which decided it needs a rewrite already)."""
    if decided is not None:
        decided.listed = []
        decided.list_files([(f.path, f.size) for f in files])
        return Unit(key, decided, "rewrite", rewrite_why(len(files), decided.deleted), None, files)
    tally = Tally(budget=budget)
    tally.files, tally.bytes = len(files), sum(f.size for f in files)
    tally.records = sum(f.num_records or 0 for f in files)
    tally.deleted = sum(f.deleted_rows for f in files)
    tally.list_files([(f.path, f.size) for f in files])
    if options.layout == "tiered":
        sel = select_files(files, head.schema, by, options)
        return Unit(key, tally, "rewrite" if sel.files else "skip", sel.reason(), sel, files)
    why = in_layout(head, files, by, options)
    return Unit(key, tally, "skip" if why else "rewrite", why or rewrite_why(len(files), tally.deleted), None, files)


def _group(scheme: UnitScheme, tallies: dict[Any, Tally]) -> Groups:
    """The tallies of raw keys gathered per unit (a unit's raw keys are the spellings the log uses)."""
    groups: Groups = {}
    for raw, t in tallies.items():
        key = scheme.unit(raw)
        if key in groups:
            groups[key][0].merge(t)
            groups[key][1].append(raw)
        else:
            groups[key] = (t, [raw])
    return groups


def _wanted(scheme: UnitScheme, groups: Groups, partitions: list[Any], version: int) -> Groups:
    """The units ``partitions=[...]`` names; one that has no live files is a :class:`PartitionNotFoundError`."""
    wanted = [scheme.wanted(v) for v in partitions]
    missing = [w for w in wanted if w not in groups]
    if missing:
        known = [k.partition_value for k in groups]
        raise partition_not_found(scheme.column, missing[0].partition_value, version, known)
    return {w: groups[w] for w in wanted}


def _decide(head: LogHead, scheme: UnitScheme, groups: Groups, options: RorderOptions, signature: str) -> list[Unit]:
    """Each unit decided from its tally, or (when only its files can tell) from its files, read in one pass."""
    units: list[Unit] = []
    look: list[UnitKey] = []
    for key, (t, _raws) in groups.items():
        verdict = _verdict(t, options, signature)
        if verdict is _LOOK:
            look.append(key)
        elif options.layout == "tiered":
            quiet = TierSelection(runs_before=1, runs_after=1)  # one settled run: nothing to do
            units.append(Unit(key, t, "skip", quiet.reason(), quiet))
        else:
            units.append(Unit(key, t, "skip" if verdict else "rewrite", verdict or rewrite_why(t.files, t.deleted)))
    if not look:
        return units
    read = _files_of(head, scheme, {k: groups[k][1] for k in look})
    for key in look:
        t, files = groups[key][0], read[key]
        if options.layout == "tiered":
            sel = select_files(files, head.schema, scheme.by, options)
            units.append(Unit(key, t, "rewrite" if sel.files else "skip", sel.reason(), sel, files))
        else:
            why = in_layout(head, files, scheme.by, options)
            units.append(
                Unit(key, t, "skip" if why else "rewrite", why or rewrite_why(t.files, t.deleted), None, files)
            )
    return units


def _attach_files(head: LogHead, scheme: UnitScheme, groups: Groups, units: list[Unit]) -> None:
    """Give the units that do not hold their live files yet their files (one filtered pass)."""
    need = [u for u in units if u.live_files is None]
    if need:
        read = _files_of(head, scheme, {u.key: groups[u.key][1] for u in need})
        for u in need:
            u.live_files = read[u.key]


def _files_of(head: LogHead, scheme: UnitScheme, raws: dict[UnitKey, list[Any]]) -> dict[UnitKey, list[LiveFile]]:
    by_raw = scheme.files(head, [r for rs in raws.values() for r in rs])
    return {key: [f for r in rs for f in by_raw[r]] for key, rs in raws.items()}


_LOOK = object()


def _verdict(t: Tally, options: RorderOptions, signature: str) -> Any:
    """The reason a unit is in layout, None if it needs a rewrite, or ``_LOOK`` when only its files can tell
    (the tallied form of :func:`in_layout`; the tiered layout's files decide in
    :func:`deltaextras.ops.rorder.tiers.select_files`)."""
    if not t.files:
        return "no live files"
    if options.layout == "tiered":
        # One run, nothing fresh and few deleted rows: nothing to do; else its files decide.
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
