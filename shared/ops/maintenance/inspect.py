"""Inspect the Parquet layout of a Delta table: row-group statistics and point-query read amplification.

Everything here reads Parquet footers, plus one column of data to count how many rows hold each
value; nothing is written. The Delta functions list the live files of a table (optionally of one
partition) through deltalake; the ``parquet_*`` functions take plain Parquet files, so a table and a
loose file are measured by the same code.

*Read amplification* is what a reader pays for the point query ``column = v`` when it prunes row
groups with their min/max statistics: the rows of every row group whose ``[min, max]`` admits ``v``,
divided by the rows that really hold ``v``. It is averaged over every distinct non-null value, each
value weighing the same. A layout with one row group per value (or several row groups that hold only
that value) scores exactly 1.0; 150 values shuffled into 3 row groups score about 150.

Rules used for pruning:

* a row group without statistics, or whose statistics carry no min/max while it holds non-null
  values, admits every value;
* a row group whose values are all null (null count = row count) admits none;
* a file that lacks the column holds only nulls for it (schema evolution), so it admits none;
* nulls and float NaNs are never query targets;
* rows hidden by deletion vectors still count: this measures the physical layout.

Values of int, float, string, binary, bool, date, time, duration and timestamp columns are compared
in one canonical form (timestamps as nanoseconds since the epoch), so files written with different
timestamp units or integer widths are measured together.

Example:
    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "f.parquet")
    >>> with pq.ParquetWriter(path, pa.schema([("k", pa.int64())])) as w:
    ...     w.write_table(pa.table({"k": [1, 1, 1]}))   # one row group per value
    ...     w.write_table(pa.table({"k": [2, 2, 2]}))
    ...     w.write_table(pa.table({"k": [3, 3, 1]}))   # holds value 1 too
    >>> parquet_row_group_table([path], "k").select(["row_group", "min", "max", "rows"]).to_pylist()[2]
    {'row_group': 2, 'min': 1, 'max': 3, 'rows': 3}
    >>> # value 1: groups 0 and 2 are read (6 rows) for 4 rows held; 2: groups 1 and 2, 6 for 3;
    >>> # value 3: group 2, 3 rows for 2
    >>> round(parquet_read_amplification([path], "k"), 6) == round((6 / 4 + 6 / 3 + 3 / 2) / 3, 6)
    True

For a Delta table, the same figures come from :func:`row_group_table` and
:func:`read_amplification`, e.g. ``read_amplification("/data/t", "node_id",
partition={"node_id_range": 0})``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import CorruptDataError, InvalidArgumentError, PartitionNotFoundError

__all__ = [
    "OpenFile",
    "delta_files",
    "parquet_read_amplification",
    "parquet_row_group_table",
    "partition_column",
    "read_amplification",
    "row_group_table",
    "row_groups_per_value",
]

#: Opens one file for reading: returns a local path or a seekable binary file-like object.
OpenFile = Callable[[str], Any]

_NS_PER = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_PARQUET_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}
_BATCH_ROWS = 1 << 20


# ----------------------------------------------------------------------------- canonical values
@dataclass(frozen=True)
class _Kind:
    """How values of one column are compared: ``name`` picks the rules, ``key_type`` the arrow type."""

    name: str  # integer, timestamp, date, time, duration, float, string, binary, bool, other
    key_type: pa.DataType


def _kind_of(t: pa.DataType) -> _Kind:
    if pa.types.is_dictionary(t):
        return _kind_of(t.value_type)
    if pa.types.is_integer(t):
        return _Kind("integer", pa.int64())
    if pa.types.is_timestamp(t):
        return _Kind("timestamp", pa.int64())
    if pa.types.is_date(t):
        return _Kind("date", pa.int64())
    if pa.types.is_time(t):
        return _Kind("time", pa.int64())
    if pa.types.is_duration(t):
        return _Kind("duration", pa.int64())
    if pa.types.is_floating(t):
        return _Kind("float", pa.float64())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _Kind("string", pa.large_string())
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return _Kind("binary", pa.large_binary())
    if pa.types.is_boolean(t):
        return _Kind("bool", pa.bool_())
    if pa.types.is_nested(t):
        raise InvalidArgumentError(f"cannot measure row-group pruning on a nested column of type {t}")
    return _Kind("other", t)


def _to_keys(arr: pa.Array | pa.ChunkedArray, kind: _Kind) -> pa.Array | pa.ChunkedArray:
    """Column values in canonical form (nulls stay null; NaN becomes null)."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = t.value_type
    if kind.name == "integer":
        return arr.cast(pa.int64())
    if kind.name == "timestamp":
        return arr.cast(pa.timestamp("ns", tz=t.tz)).cast(pa.int64())
    if kind.name == "date":
        return arr.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
    if kind.name == "time":
        return arr.cast(pa.time64("ns")).cast(pa.int64())
    if kind.name == "duration":
        return arr.cast(pa.duration("ns")).cast(pa.int64())
    if kind.name == "float":
        arr = arr.cast(pa.float64())
        return pc.if_else(pc.is_nan(arr), pa.scalar(None, pa.float64()), arr)
    if kind.name in ("string", "binary"):
        return arr.cast(kind.key_type)
    return arr


def _from_keys(keys: pa.Array, kind: _Kind, display: pa.DataType) -> pa.Array:
    """Canonical keys back to the column's own type, for display."""
    if pa.types.is_dictionary(display):
        display = display.value_type
    if kind.name == "timestamp":
        return keys.cast(pa.timestamp("ns", tz=display.tz)).cast(display, safe=False)
    if kind.name == "date":
        return keys.cast(pa.int32()).cast(pa.date32()).cast(display, safe=False)
    if kind.name == "time":
        return keys.cast(pa.time64("ns")).cast(display, safe=False)
    if kind.name == "duration":
        return keys.cast(pa.duration("ns")).cast(display, safe=False)
    if kind.name in ("integer", "float", "string", "binary"):
        try:
            return keys.cast(display)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return keys
    return keys


def _parquet_unit(column_schema: Any) -> str | None:
    """The time unit of a Parquet TIMESTAMP/TIME column (``None`` if it has no such logical type)."""
    try:
        info = json.loads(column_schema.logical_type.to_json())
    except (ValueError, AttributeError):
        return None
    return _PARQUET_UNITS.get(str(info.get("timeUnit", "")))


def _bound(stats: Any, which: str, kind: _Kind, unit: str | None) -> Any:
    """One min/max statistic in canonical form; ``None`` when it cannot be trusted."""
    raw = getattr(stats, f"{which}_raw")
    if kind.name in ("timestamp", "time", "duration"):
        if unit is None or not isinstance(raw, int):
            return None
        return raw * _NS_PER[unit]
    if kind.name == "date":
        return raw if isinstance(raw, int) else None
    if kind.name == "string":
        try:
            return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError:
            return None
    if kind.name == "binary":
        return bytes(raw) if isinstance(raw, (bytes, bytearray)) else None
    value = getattr(stats, which)
    if kind.name == "integer":
        return int(value)
    if kind.name == "float":
        return float(value)
    return value


# ----------------------------------------------------------------------------- one pass over files
@dataclass
class _RowGroup:
    file: str
    index: int
    rows: int
    bytes: int
    admits: str  # "range", "all" or "none"
    lo: Any = None
    hi: Any = None


@dataclass
class _Scan:
    kind: _Kind | None
    display: pa.DataType | None
    groups: list[_RowGroup]
    counts: pa.Table | None  # columns key, rows: distinct non-null values, ascending


def _scan(files: Sequence[tuple[str, Callable[[], Any]]], column: str, *, count_values: bool) -> _Scan:
    """Read the footers (and, if asked, the column's values) of ``(name, opener)`` pairs."""
    kind: _Kind | None = None
    display: pa.DataType | None = None
    groups: list[_RowGroup] = []
    partial_counts: list[pa.Table] = []
    for name, opener in files:
        source = opener()
        try:
            kind, display = _scan_file(name, source, column, kind, display, groups, partial_counts, count_values)
        finally:
            if not isinstance(source, (str, os.PathLike)) and hasattr(source, "close"):
                source.close()
    counts: pa.Table | None = None
    if count_values and kind is not None:
        if partial_counts:
            merged = pa.concat_tables(partial_counts).group_by("key").aggregate([("rows", "sum")])
            counts = merged.rename_columns(["key", "rows"]).sort_by("key")
        else:
            counts = pa.table({"key": pa.array([], kind.key_type), "rows": pa.array([], pa.int64())})
    return _Scan(kind, display, groups, counts)


def _scan_file(
    name: str,
    source: Any,
    column: str,
    kind: _Kind | None,
    display: pa.DataType | None,
    groups: list[_RowGroup],
    partial_counts: list[pa.Table],
    count_values: bool,
) -> tuple[_Kind | None, pa.DataType | None]:
    """Append one file's row groups (and value counts) to ``groups`` (``partial_counts``)."""
    try:
        opened = pq.ParquetFile(source)
    except pa.ArrowInvalid as exc:
        raise CorruptDataError(f"{name} is not readable Parquet: {str(exc)[:200]}") from None
    with opened as pf:
        meta = pf.metadata
        arrow_index = pf.schema_arrow.get_field_index(column)
        if arrow_index >= 0:
            _kind_of(pf.schema_arrow.field(arrow_index).type)  # refuses nested columns
        leaf = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == column), None)
        if arrow_index < 0 or leaf is None:
            # The column is absent from this file: all its rows are null for it.
            for r in range(meta.num_row_groups):
                rg = meta.row_group(r)
                groups.append(_RowGroup(name, r, rg.num_rows, _compressed(rg), "none"))
            return kind, display
        field_type = pf.schema_arrow.field(arrow_index).type
        file_kind = _kind_of(field_type)
        if kind is None:
            kind, display = file_kind, field_type
        elif file_kind.name != kind.name:
            raise InvalidArgumentError(
                f"column {column!r} is {display} in one file and {field_type} in {name}; "
                "cannot compare their statistics"
            )
        unit = field_type.unit if file_kind.name == "duration" else _parquet_unit(meta.schema.column(leaf))
        for r in range(meta.num_row_groups):
            rg = meta.row_group(r)
            groups.append(_row_group(name, r, rg.num_rows, _compressed(rg), rg.column(leaf), file_kind, unit))
        if count_values:
            for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=[column]):
                keys = _to_keys(batch.column(0), file_kind).drop_null()
                if len(keys):
                    vc = pc.value_counts(keys)
                    partial_counts.append(
                        pa.table({"key": vc.field("values"), "rows": vc.field("counts").cast(pa.int64())})
                    )
    return kind, display


def _compressed(rg: Any) -> int:
    """Compressed bytes of all the column chunks of one row group."""
    return sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))


def _row_group(name: str, index: int, rows: int, size: int, chunk: Any, kind: _Kind, unit: str | None) -> _RowGroup:
    stats = chunk.statistics if chunk.is_stats_set else None
    if stats is None:
        return _RowGroup(name, index, rows, size, "all")
    if stats.has_null_count and stats.null_count >= rows and rows > 0:
        return _RowGroup(name, index, rows, size, "none")
    if not stats.has_min_max:
        return _RowGroup(name, index, rows, size, "all")
    try:
        lo, hi = _bound(stats, "min", kind, unit), _bound(stats, "max", kind, unit)
    except (ValueError, TypeError, UnicodeDecodeError):
        lo = hi = None
    if lo is None or hi is None:
        return _RowGroup(name, index, rows, size, "all")
    return _RowGroup(name, index, rows, size, "range", lo, hi)


def _bisect(keys: pa.Array, value: Any, *, right: bool) -> int:
    """Position of ``value`` in the ascending ``keys`` (like :func:`bisect.bisect_left` / ``_right``)."""
    lo, hi = 0, len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        probe = keys[mid].as_py()
        if probe < value or (right and probe == value):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _amplification(scan: _Scan) -> float:
    counts = scan.counts
    if counts is None or counts.num_rows == 0:
        return float("nan")
    keys = counts.column("key").combine_chunks()
    rows = counts.column("rows").cast(pa.float64())
    # mean over v of admitted(v) / rows(v)
    #   = (1 / n) * sum over row groups g of rows(g) * sum over v admitted by g of 1 / rows(v);
    # the inner sum is a difference of prefix sums over the values in ascending order.
    inverse = pc.divide(pa.scalar(1.0), rows).combine_chunks()
    cumulative = pc.cumulative_sum(inverse)

    def prefix(i: int) -> float:
        return 0.0 if i == 0 else float(cumulative[i - 1].as_py())

    n = len(keys)
    total = 0.0
    for g in scan.groups:
        if g.admits == "none" or g.rows == 0:
            continue
        if g.admits == "all":
            first, end = 0, n
        else:
            first, end = _bisect(keys, g.lo, right=False), _bisect(keys, g.hi, right=True)
        if end > first:
            total += g.rows * (prefix(end) - prefix(first))
    return total / n


def _row_group_table(scan: _Scan) -> pa.Table:
    kind, display = scan.kind, scan.display
    mins = [g.lo for g in scan.groups]
    maxs = [g.hi for g in scan.groups]
    if kind is None or display is None:
        min_arr = max_arr = pa.nulls(len(scan.groups))
    else:
        min_arr = _from_keys(pa.array(mins, kind.key_type), kind, display)
        max_arr = _from_keys(pa.array(maxs, kind.key_type), kind, display)
    return pa.table(
        {
            "row_group": pa.array([g.index for g in scan.groups], pa.int64()),
            "file": pa.array([g.file for g in scan.groups], pa.string()),
            "min": min_arr,
            "max": max_arr,
            "rows": pa.array([g.rows for g in scan.groups], pa.int64()),
            "bytes": pa.array([g.bytes for g in scan.groups], pa.int64()),
        }
    )


def _sources(
    files: Iterable[str | os.PathLike[str]], open_file: OpenFile | None
) -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for f in files:
        name = os.fspath(f)
        opener = functools.partial(open_file if open_file is not None else str, name)
        out.append((name, opener))
    return out


# ----------------------------------------------------------------------------- plain Parquet files
def parquet_row_group_table(
    files: Iterable[str | os.PathLike[str]], column: str, *, open_file: OpenFile | None = None
) -> pa.Table:
    """One row per row group of the given Parquet files, with the min/max statistics of ``column``.

    Columns: ``row_group`` (index within its file), ``file`` (as given), ``min``, ``max`` (null when
    the row group has no usable statistics), ``rows`` and ``bytes`` (compressed bytes of all the row
    group's column chunks). ``open_file`` maps each name to a local path or seekable binary file; by
    default names are local paths.

    Example:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "f.parquet")
        >>> pq.write_table(pa.table({"s": ["b", "a", "c", "d"]}), path, row_group_size=2)
        >>> table = parquet_row_group_table([path], "s").select(["row_group", "min", "max", "rows"])
        >>> for row in table.to_pylist():
        ...     print(row)
        {'row_group': 0, 'min': 'a', 'max': 'b', 'rows': 2}
        {'row_group': 1, 'min': 'c', 'max': 'd', 'rows': 2}
    """
    return _row_group_table(_scan(_sources(files, open_file), column, count_values=False))


def parquet_read_amplification(
    files: Iterable[str | os.PathLike[str]], column: str, *, open_file: OpenFile | None = None
) -> float:
    """Mean point-query read amplification of ``column`` over the given Parquet files (see the module doc).

    Returns ``nan`` when the column holds no non-null value.

    Example:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "f.parquet")
        >>> pq.write_table(pa.table({"k": [1, 2, 1, 2]}), path, row_group_size=2)  # both values in both
        >>> parquet_read_amplification([path], "k")
        2.0
    """
    return _amplification(_scan(_sources(files, open_file), column, count_values=True))


# ----------------------------------------------------------------------------- Delta tables
def _partition_matches(actual: Any, wanted: Any) -> bool:
    if actual is None or wanted is None:
        return actual is None and wanted is None

    def norm(v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    return norm(actual) == norm(wanted)


def _snapshot(uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None) -> Any:
    """The table at its latest version: our log replay first, so a damaged log or a missing table is one
    error from the hierarchy, as in ``plan``."""
    from ...core.snapshot import TableSnapshot

    return TableSnapshot.load(os.fspath(uri), dict(storage_options or {}), for_writing=False)


def _live_files(
    uri: str | os.PathLike[str],
    partition: Mapping[str, Any] | None,
    storage_options: Mapping[str, str] | None,
    snapshot: Any = None,
) -> tuple[str, list[tuple[str, int]]]:
    """The table URI deltalake resolved and ``(key, size)`` of each selected live file."""
    from ...core.storage import log_path_to_key

    snap = snapshot or _snapshot(uri, storage_options)
    dt = snap.deltalake_table
    actions = pa.table(dt.get_add_actions(flatten=True))
    paths: list[str] = actions.column("path").to_pylist()
    sizes: list[int] = actions.column("size_bytes").to_pylist()
    keep = [True] * len(paths)
    for col, wanted in (partition or {}).items():
        name = f"partition.{col}"
        if name not in actions.column_names:
            known = [c.removeprefix("partition.") for c in actions.column_names if c.startswith("partition.")]
            raise InvalidArgumentError(f"{col!r} is not a partition column of {uri} (partition columns: {known})")
        values = actions.column(name).to_pylist()
        keep = [k and _partition_matches(v, wanted) for k, v in zip(keep, values, strict=True)]
    selected = [(log_path_to_key(p, snap.storage.uri), int(n)) for p, n, k in zip(paths, sizes, keep, strict=True) if k]
    if partition and not selected:
        raise PartitionNotFoundError(f"partition {dict(partition)} of {uri} has no live files")
    return dt.table_uri, selected


def delta_files(
    uri: str | os.PathLike[str],
    *,
    partition: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[str]:
    """Paths, relative to the table root, of the live data files of a Delta table or of one partition.

    Paths are storage keys (the log's percent-encoding undone). ``partition`` is ``{column: value}``;
    values compare as Delta writes them (``0`` matches ``"0"``, ``None`` is the null partition). A
    partition without live files raises :class:`~deltaextras.errors.PartitionNotFoundError`.

    Example:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> uri = tempfile.mkdtemp()
        >>> write_deltalake(uri, pa.table({"k": [1, 2], "p": [0, 1]}), partition_by=["p"])
        >>> [path.split("/")[0] for path in delta_files(uri, partition={"p": 1})]
        ['p=1']
    """
    return [key for key, _ in _live_files(uri, partition, storage_options)[1]]


def _delta_sources(
    uri: str | os.PathLike[str],
    partition: Mapping[str, Any] | None,
    storage_options: Mapping[str, str] | None,
    open_file: OpenFile | None,
    snapshot: Any = None,
) -> list[tuple[str, Callable[[], Any]]]:
    table_uri, selected = _live_files(uri, partition, storage_options, snapshot)
    if open_file is not None:
        return [(key, functools.partial(open_file, key)) for key, _ in selected]
    from ...core.storage import TableStorage

    storage = TableStorage(table_uri, dict(storage_options or {}))
    return [(key, functools.partial(_open_live, storage, key, size)) for key, size in selected]


def _open_live(storage: Any, key: str, size: int) -> Any:
    """A live file opened for reading; one the log names but storage lacks is a damaged table."""
    try:
        return storage.open_input(key, size)
    except FileNotFoundError:
        raise CorruptDataError(
            f"data file {key} is in the log but missing from storage; run FSCK/repair first"
        ) from None


def row_group_table(
    uri: str | os.PathLike[str],
    column: str,
    *,
    partition: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
    open_file: OpenFile | None = None,
) -> pa.Table:
    """Row groups of a Delta table's live files with the min/max of ``column``.

    Columns as :func:`parquet_row_group_table`; ``file`` is the path relative to the table root.
    ``partition`` and ``storage_options`` as :func:`delta_files`. Files are read through
    :class:`deltaextras.core.storage.TableStorage` (local disk, or ranged reads on Azure and S3 with the
    ``storage_options`` deltalake takes) unless ``open_file(path)`` is given: it gets each relative
    path and returns a local path or a seekable binary file, which is closed after use.

    Example:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> uri = tempfile.mkdtemp()
        >>> write_deltalake(uri, pa.table({"node_id": [3, 1, 2], "node_id_range": [0, 0, 0]}),
        ...                 partition_by=["node_id_range"])
        >>> row_group_table(uri, "node_id", partition={"node_id_range": 0}).select(
        ...     ["row_group", "min", "max", "rows"]).to_pylist()
        [{'row_group': 0, 'min': 1, 'max': 3, 'rows': 3}]
    """
    files = _delta_sources(uri, partition, storage_options, open_file)
    return _row_group_table(_scan(files, column, count_values=False))


def read_amplification(
    uri: str | os.PathLike[str],
    column: str,
    *,
    partition: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, str] | None = None,
    open_file: OpenFile | None = None,
) -> float:
    """Mean point-query read amplification of ``column`` over a Delta table's live files.

    For each distinct non-null value ``v``: rows of the row groups whose statistics admit ``v``,
    divided by the rows holding ``v``; the mean over values (each weighing the same). 1.0 is exact
    pruning; ``nan`` means the column holds no non-null value. Arguments as :func:`row_group_table`.

    On a partition column the figure is 1.0 (when it holds a non-null value): readers prune files by
    partition value, so a point query reads only files whose every row holds the value. The data files
    do not store partition columns, so their row groups carry no statistics for it.

    Example:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> uri = tempfile.mkdtemp()
        >>> write_deltalake(uri, pa.table({"node_id": [1, 1], "p": [0, 0]}), partition_by=["p"])
        >>> write_deltalake(uri, pa.table({"node_id": [2, 2], "p": [0, 0]}), partition_by=["p"],
        ...                 mode="append")
        >>> read_amplification(uri, "node_id", partition={"p": 0})
        1.0
        >>> read_amplification(uri, "p")  # a partition column: pruned by partition values
        1.0
    """
    snap = _snapshot(uri, storage_options)
    logical = partition_column(snap, column)
    if logical is not None:
        files = [
            f
            for f in snap.files
            if all(_partition_matches(f.partition_values.get(c), v) for c, v in (partition or {}).items())
        ]
        if partition and not files:
            raise PartitionNotFoundError(f"partition {dict(partition)} of {uri} has no live files")
        held = any(f.partition_values.get(logical) is not None and (f.num_records or 1) > 0 for f in files)
        return 1.0 if held else float("nan")
    files = _delta_sources(uri, partition, storage_options, open_file, snap)
    return _amplification(_scan(files, column, count_values=True))


def row_groups_per_value(table: pa.Table) -> dict[str, Any]:
    """How many row groups a point query reads, over the values their statistics name: the ``max`` and
    ``mean`` over every value that is some row group's min or max, counting each row group whose
    ``[min, max]`` admits the value (a row group without min/max admits all). In the full layout both
    are 1; in the tiered layout the max is at most the partition's tier count. No bounded row group
    (e.g. a partition column): ``values`` 0 and ``mean`` None.

    ``table`` is a :func:`row_group_table` (or :func:`parquet_row_group_table`) result.

    Example:
        >>> t = pa.table({"min": [1, 2, 1, 3], "max": [1, 2, 1, 3]})
        >>> row_groups_per_value(t)
        {'values': 3, 'max': 2, 'mean': 1.3333333333333333}
    """
    import bisect

    lows, highs, unbounded = [], [], 0
    for lo, hi in zip(table.column("min").to_pylist(), table.column("max").to_pylist(), strict=True):
        if lo is None or hi is None or lo != lo or hi != hi:  # None or NaN: admits every value
            unbounded += 1
            continue
        lows.append(lo)
        highs.append(hi)
    try:
        values = sorted(set(lows) | set(highs))
        lows.sort()
        highs.sort()
    except TypeError:
        return {"values": 0, "max": 0, "mean": None}
    if not values:
        return {"values": 0, "max": unbounded, "mean": None}
    counts = [bisect.bisect_right(lows, v) - bisect.bisect_left(highs, v) + unbounded for v in values]
    return {"values": len(values), "max": max(counts), "mean": sum(counts) / len(counts)}


def partition_column(snapshot: Any, column: str) -> str | None:
    """The logical name of ``column`` (logical or physical) if it is a partition column of the table.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> from deltaextras.core.snapshot import TableSnapshot
        >>> uri = tempfile.mkdtemp()
        >>> write_deltalake(uri, pa.table({"k": [1], "p": [0]}), partition_by=["p"])
        >>> snap = TableSnapshot.load(uri)
        >>> partition_column(snap, "p"), partition_column(snap, "k")
        ('p', None)
    """
    for name in snapshot.partition_columns:
        if column in (name, snapshot.schema.partition_physical(name)):
            return str(name)
    return None
