"""The streaming scan of the planner: one pass over the log that tallies, per partition value, what
planning needs (file count, bytes, records, deleted rows, layout tags) without holding any ``add``.

The checkpoint is read in Arrow batches with a column projection and aggregated in Arrow (group by the
partition value); only the commits after the checkpoint (at most the table's checkpoint interval) are
replayed, in Arrow (action by action for an unusual commit line), and the checkpoint rows they touch are
decoded one by one. Memory is O(partitions). A tally keeps its partition's (path, size) pairs while they fit
a work message's budget.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.core.partition_snapshot import read_head
    >>> from deltaextras.core.storage import TableStorage
    >>> path = tempfile.mkdtemp()
    >>> for r in (0, 1, 1):
    ...     write_deltalake(path, pa.table({"node_id": [r * 10], "node_id_range": [r]}),
    ...                     partition_by=["node_id_range"], mode="append")
    >>> tallies = tally_partitions(read_head(TableStorage(path)), "node_id_range", "")
    >>> sorted((k, t.files, t.bytes > 0, t.listed is not None) for k, t in tallies.items())
    [('0', 1, True, True), ('1', 2, True, True)]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...core.actions import Add, decode_checkpoint_batch
from ...core.arrays import bool_numpy, scalar, string_array
from ...core.partition_snapshot import (
    FileEntry,
    LogHead,
    add_batches,
    json_checkpoint_adds,
    partition_column,
    tail_entries,
)
from ...core.protocol import has_feature
from ...core.values import int_numpy
from .message import MAX_MESSAGE_JSON
from .rewrite.layout import LAYOUT_TAG, RUN_TAG

_RECORDS = r'"numRecords"\s*:\s*(?P<n>\d+)'
_RECORDS_PY = re.compile(r'"numRecords"\s*:\s*(\d+)')
PLAN_BATCH_ROWS = 131_072  # rows of checkpoint per Arrow batch (the partition tally is per batch)
_NULL_KEY = "\x00"  # stands for a null partition value inside a directory key
# Typed constants for compute calls: a Python value there is converted by pyarrow, which imports pandas.
_EMPTY = scalar("", pa.string())
_ZERO = scalar(0, pa.int64())
_FALSE = scalar(False, pa.bool_())
FILE_JSON_OVERHEAD = 24  # JSON around one (path, size) pair of a message


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
    # (path, size) while a message holds them (a value-range unit's are read when its message is built)
    listed: Sequence[tuple[str, int]] | None = field(default_factory=list)
    listed_chars: int = 0
    budget: int | None = MAX_MESSAGE_JSON  # JSON characters of listed files a message holds (None: list all)

    def list_files(self, files: list[tuple[str, int]]) -> None:
        """Keep the files for the message while their JSON stays under the message budget."""
        if self.listed is None:
            return
        self.listed_chars += sum(len(p) + FILE_JSON_OVERHEAD for p, _ in files)
        if self.budget is not None and self.listed_chars > self.budget:
            self.listed = None
        elif isinstance(self.listed, list):
            self.listed.extend(files)
        else:
            self.listed = [*self.listed, *files]

    def merge(self, other: Tally) -> None:
        """Add another tally of the same unit (a value the log spells two ways).

        Example:
            >>> a, b = Tally(files=1, runs={"r1"}), Tally(files=2, runs={"r2"}, listed=None)
            >>> a.merge(b)
            >>> a.files, sorted(a.runs), a.listed
            (3, ['r1', 'r2'], None)
        """
        self.files += other.files
        self.bytes += other.bytes
        self.records += other.records
        self.deleted += other.deleted
        self.tagged += other.tagged
        self.run_nulls += other.run_nulls
        for r in sorted(other.runs):
            if len(self.runs) < 2:
                self.runs.add(r)
        self.dirs |= other.dirs
        if other.listed is None:
            self.listed = None
        else:
            self.list_files(other.listed)

    def add_run(self, run: str | None) -> None:
        if run is None:
            self.run_nulls += 1
        elif len(self.runs) < 2:
            self.runs.add(run)


def tally_partitions(
    head: LogHead, unit: str | None, signature: str, *, budget: int | None = MAX_MESSAGE_JSON
) -> dict[str | None, Tally]:
    """Per value of the partition column ``unit`` (None: the whole table under the key None), as the log
    spells it, the tally of its live files at the head's version; each tally lists its files while their
    JSON stays under ``budget`` characters (None: every file)."""
    physical = head.physical(unit) if unit is not None else None
    dir_columns = [head.physical(c) for c in head.partition_columns]
    # Record counts matter only beside deleted rows: a table without deletion vectors skips the statistics.
    with_stats = has_feature(head.protocol, "deletionVectors")
    tallies: dict[str | None, Tally] = {}
    listing = _Listing(budget)
    try:
        arrow_tail = _tail_arrow(head, physical, dir_columns, signature, with_stats=with_stats)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        arrow_tail = None  # an unusual commit line: the exact, slower path below
    live: pa.Table | None = None
    if arrow_tail is None:
        tail, touched_ids = _tail_python(head)
        touched_paths = string_array(sorted({p for p, _ in touched_ids}))
        fid_all = None
    else:
        live, fid_all, touched_paths = arrow_tail
        tail, touched_ids = {}, {_split_fid(f) for f in fid_all.to_pylist()} if head.checkpoint_is_json else set()

    def one(e: FileEntry) -> None:
        pv = e.partition_values
        t = tallies.setdefault(pv.get(physical) if physical else None, Tally(budget=budget))
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
    for batch in add_batches(head, functools.partial(_projection, with_stats=with_stats), PLAN_BATCH_ROWS):
        add_col = batch.column("add")
        present = add_col.is_valid()
        if len(touched_paths):
            # a checkpoint file the commits after it name is decided by them (or kept, if only its path matched)
            hit = pc.fill_null(pc.is_in(pc.struct_field(add_col, "path"), value_set=touched_paths), _FALSE)
            if pc.any(pc.and_(present, hit)).as_py():
                if fid_all is None:
                    for action in decode_checkpoint_batch(batch.filter(pc.and_(present, hit))):
                        if isinstance(action, Add) and action.file_id not in touched_ids:
                            one(FileEntry.of_add(action))
                else:
                    rows = add_col.filter(pc.and_(present, hit))
                    rows = rows.filter(pc.invert(pc.is_in(_fid(rows), value_set=fid_all)))
                    _tally_columns(_columns(rows, physical, dir_columns, signature), tallies, listing)
                present = pc.and_(present, pc.invert(hit))
        _tally_columns(_columns(add_col.filter(present), physical, dir_columns, signature), tallies, listing)
    for e in tail.values():
        one(e)
    if live is not None and live.num_rows:
        _tally_columns({n: live.column(n).combine_chunks() for n in live.column_names}, tallies, listing)
    listing.resolve(tallies)
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
    head: LogHead, physical: str | None, dir_columns: list[str], signature: str, *, with_stats: bool = True
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
            *([("stats", pa.string())] if with_stats else []),
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
            cols["version"] = pa.repeat(scalar(v, pa.int64()), len(col))
            out.append(pa.table(cols))
    named = adds + removes
    if not named:
        empty = string_array([])
        return None, empty, empty
    paths = pa.concat_arrays([t.column("path").combine_chunks() for t in named]).unique()
    fid_all = pa.concat_arrays([t.column("fid").combine_chunks() for t in named]).unique()
    if not adds:
        return None, fid_all, paths
    every = pa.concat_tables(adds)
    keep = [n for n in _TALLY_COLUMNS if n in every.column_names]
    if not removes and len(fid_all) == every.num_rows:
        return every.select(keep), fid_all, paths  # appends only, each file added once: every add is live
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
        return pc.binary_join_element_wise(path, _EMPTY, scalar("\x00", pa.string()))
    dv = pc.struct_field(add, "deletionVector")
    sub = dv.type
    offset = pc.struct_field(dv, "offset") if sub.get_field_index("offset") >= 0 else pa.nulls(len(add), pa.int64())
    uid = pc.binary_join_element_wise(
        pc.fill_null(pc.struct_field(dv, "storageType"), _EMPTY),
        pc.fill_null(pc.struct_field(dv, "pathOrInlineDv"), _EMPTY),
        pc.fill_null(
            pc.binary_join_element_wise(scalar("@", pa.string()), pc.cast(offset, pa.string()), _EMPTY), _EMPTY
        ),
        _EMPTY,
    )
    return pc.binary_join_element_wise(path, pc.if_else(dv.is_valid(), uid, _EMPTY), scalar("\x00", pa.string()))


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
        pc.map_lookup(tags, scalar(LAYOUT_TAG, pa.string()), "first") if tags is not None else None,
        pc.map_lookup(tags, scalar(RUN_TAG, pa.string()), "first") if tags is not None else None,
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
    zeros = pa.repeat(scalar(0, pa.int64()), n)
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
        "size": pc.fill_null(pc.cast(size, pa.int64()), _ZERO) if size is not None else zeros,
        "records": pc.fill_null(records, _ZERO),
        "deleted": pc.fill_null(pc.cast(deleted, pa.int64()), _ZERO),
        "tagged": pc.cast(pc.fill_null(pc.equal(layout, scalar(signature, pa.string())), _FALSE), pa.int64()),
        "run": run if run is not None else nulls,
        "path": pc.struct_field(add, "path"),
    }
    if dirs is not None:
        columns["dir"] = pc.binary_join_element_wise(
            *[pc.fill_null(d, scalar(_NULL_KEY, pa.string())) for d in dirs], scalar("\x01", pa.string())
        )
    return columns


def _projection(schema: pa.Schema, *, with_stats: bool = True) -> list[str]:
    typ = schema.field("add").type if "add" in schema.names else None
    if typ is None:
        return []
    names = {typ.field(i).name for i in range(typ.num_fields)}
    wanted = ("path", "partitionValues", "size", "tags", *(("stats",) if with_stats else ()))
    cols = [f"add.{n}" for n in wanted if n in names]
    if "deletionVector" in names:
        cols += [f"add.deletionVector.{n}" for n in ("storageType", "pathOrInlineDv", "offset", "cardinality")]
    return cols


def _child(add: pa.Array, name: str) -> pa.Array | None:
    typ = add.type
    return pc.struct_field(add, name) if typ.get_field_index(name) >= 0 else None


@dataclass
class _Listing:
    """The (key, path, size) rows of a scan's Arrow batches whose partition still fits its message, kept as
    Arrow until the scan ends; only the partitions that fit then become Python pairs."""

    budget: int | None
    pending: list[pa.Table] = field(default_factory=list)

    def keep(self, columns: dict[str, pa.Array], keys: list[str | None]) -> None:
        pick = _pick(columns["key"], keys)
        self.pending.append(pa.table({n: columns[n].filter(pick) for n in ("key", "path", "size")}))

    def resolve(self, tallies: dict[str | None, Tally]) -> None:
        """Hand each partition that still fits its message its rows."""
        rows, self.pending = (pa.concat_tables(self.pending) if self.pending else None), []
        listed = [k for k, t in tallies.items() if t.listed is not None]
        if rows is None or not rows.num_rows or not listed:
            return
        rows = rows.filter(_pick(rows.column("key").combine_chunks(), listed))
        for k, p, sz in zip(*(rows.column(n).to_pylist() for n in ("key", "path", "size")), strict=True):
            files = tallies[k].listed
            assert files is not None
            files.append((p, int(sz or 0)))


def _pick(key: pa.Array, keys: list[str | None]) -> pa.Array:
    """True for the rows whose key is one of ``keys`` (None: the null key)."""
    pick = pc.fill_null(pc.is_in(key, value_set=string_array([k for k in keys if k is not None])), _FALSE)
    return pc.or_(pick, key.is_null()) if None in keys else pick


def _tally_columns(columns: dict[str, pa.Array], tallies: dict[str | None, Tally], listing: _Listing) -> None:
    key = columns["key"]
    if not len(key):
        return
    table = {n: c for n, c in columns.items() if n != "path"}
    table["path_chars"] = pc.fill_null(pc.cast(pc.utf8_length(columns["path"]), pa.int64()), _ZERO)
    grouped = _group_rows(table)
    fitting = {row["key"] for row in grouped if _fits(tallies.get(row["key"]), row, listing.budget)}
    if fitting:
        listing.keep(columns, list(fitting))
    for row in grouped:
        t = tallies.setdefault(row["key"], Tally(budget=listing.budget))
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
        if row["key"] in fitting:
            t.listed_chars += row["path_chars_sum"] + FILE_JSON_OVERHEAD * row["size_count"]
        elif t.listed is not None:
            t.listed = None


def _group_rows(cols: dict[str, pa.Array]) -> list[dict[str, Any]]:
    """Per key of a batch's files, in order of first appearance: file count, the sums of ``size``,
    ``records``, ``deleted``, ``tagged`` and ``path_chars``, files without a run tag, the least and greatest
    run tag and the distinct directories. In NumPy: Arrow's ``group_by`` loads ``pyarrow.dataset``, which
    imports pandas (tens of MB and half a second a process).

    Example:
        >>> from deltaextras.core.arrays import int64_array, string_array
        >>> ones = int64_array(np.ones(3, dtype=np.int64))
        >>> rows = _group_rows({"key": pa.array(["a", None, "a"]), "size": int64_array(np.array([1, 2, 3])),
        ...     "records": ones, "deleted": ones, "tagged": ones, "path_chars": ones,
        ...     "run": pa.array(["r2", None, "r1"])})
        >>> [(r["key"], r["size_count"], r["size_sum"], r["run_count"], r["run_min"], r["run_max"]) for r in rows]
        [('a', 2, 4, 0, 'r1', 'r2'), (None, 1, 2, 1, None, None)]
    """
    enc = pc.dictionary_encode(cols["key"], null_encoding="encode")
    idx = int_numpy(enc.indices)
    keys = enc.dictionary.to_pylist()
    n = len(keys)
    rows: list[dict[str, Any]] = [
        {"key": k, "size_count": c} for k, c in zip(keys, np.bincount(idx, minlength=n).tolist(), strict=True)
    ]
    for name in ("size", "records", "deleted", "tagged", "path_chars"):
        sums = np.zeros(n, dtype=np.int64)
        np.add.at(sums, idx, int_numpy(cols[name]))
        for row, total in zip(rows, sums.tolist(), strict=True):
            row[f"{name}_sum"] = total
    _run_bounds(cols["run"], idx, rows)
    if "dir" in cols:
        dirs = pc.dictionary_encode(cols["dir"], null_encoding="encode")
        names = dirs.dictionary.to_pylist()
        pairs = np.unique(idx * len(names) + int_numpy(dirs.indices))
        for row in rows:
            row["dir_distinct"] = []
        for pair in pairs.tolist():
            rows[pair // len(names)]["dir_distinct"].append(names[pair % len(names)])
    return rows


def _run_bounds(run: pa.Array, idx: np.ndarray, rows: list[dict[str, Any]]) -> None:
    """Each row's count of files without a run tag, and its least and greatest run tag (None: none)."""
    valid = bool_numpy(run.is_valid())
    for row, nulls in zip(rows, np.bincount(idx[~valid], minlength=len(rows)).tolist(), strict=True):
        row["run_count"], row["run_min"], row["run_max"] = nulls, None, None
    if not valid.any():
        return
    runs = pc.dictionary_encode(run)
    names = sorted(runs.dictionary.to_pylist())
    rank = np.argsort(np.argsort(np.array(runs.dictionary.to_pylist(), dtype=object), kind="stable"))
    codes = int_numpy(pc.fill_null(runs.indices, scalar(0, runs.indices.type)))
    ranks = rank[codes[valid]]
    lo = np.full(len(rows), len(names), dtype=np.int64)
    hi = np.full(len(rows), -1, dtype=np.int64)
    np.minimum.at(lo, idx[valid], ranks)
    np.maximum.at(hi, idx[valid], ranks)
    for row, a, b in zip(rows, lo.tolist(), hi.tolist(), strict=True):
        if b >= 0:
            row["run_min"], row["run_max"] = names[a], names[b]


def _fits(t: Tally | None, row: dict[str, Any], budget: int | None) -> bool:
    """Whether a batch's files of one partition still fit the partition's message."""
    if t is not None and t.listed is None:
        return False
    used = t.listed_chars if t is not None else 0
    return budget is None or used + row["path_chars_sum"] + FILE_JSON_OVERHEAD * row["size_count"] <= budget
