"""Rewrite options shared by ``rorder``, work messages and app settings, validated in one place.

Example:
    >>> opts = RorderOptions.build(sort_by=["utc_time", ("quality", "descending")], unique_by="utc_time")
    >>> opts.sort_by
    (('utc_time', 'ascending'), ('quality', 'descending'))
    >>> opts.unique_by
    ('utc_time',)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidArgumentError, shown

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
DEFAULT_MEMORY_BUDGET = 96 * 1024 * 1024
# A file's Parquet footer grows with its row groups x columns (about 125 bytes per column chunk, plus about
# 45-80 bytes of page index beside it), and readers fetch it before any data (deltalake and Sail once per core
# they split the file's scan across: twice on 2 cores, docs/query.md).
# Output files roll over before their footer passes this many bytes, or a quarter of their mean value's
# bytes when values are larger (FOOTER_SHARE): a point query then reads at most about 1.5x its value's bytes
# (the footer twice) plus 32 KiB. 15,000 nodes of 863 bytes each had made one file with a 7.3 MB footer
# (docs/options.md).
DEFAULT_MAX_FOOTER_BYTES = 16 * 1024
# A file's footer may reach 1/FOOTER_SHARE of its mean value's bytes: fetched twice, half the value's bytes.
# Not less: a smaller share splits files of large values below 8 MiB, which Spark's default S3A (analytics)
# stream fetches whole (docs/query.md: 3.7 MiB objects were read whole, 25x a node's bytes, 7.4 MiB ones by
# ranges); W2's 150 values of 151 KiB stay two files of 11 MiB.
FOOTER_SHARE = 4
# Neighbouring values smaller than this (Arrow bytes) share a row group until it holds this many bytes; 0:
# a row group per value. The tiered layout's fresh runs hold an hour of readings: 12 rows of a sensor, a few
# hundred bytes, for which a row group's footer entry, page headers and compression frames cost more than
# the rows themselves (1,500 such values an hour, a row group each: 4.5x the appended bytes written). With
# 16 KiB (about thirty such sensors a row group) and footers of at most TIERED_MAX_FOOTER_BYTES, the soak's
# hourly runs of 1,500 sensors wrote half the bytes of 4 KiB row groups under 16 KiB footers, and a point
# query read fewer bytes: per tier run it fetches one footer and one row group, and both are now a few KiB
# (bench/soak.py, docs/tiered.md). The full layout keeps a row group per value.
TIERED_MIN_ROW_GROUP_BYTES = 16 * 1024
# The tiered layout's footer bound: a point query reads one file per tier run, so its footer is paid once per
# run, and up to MAX_TIERS runs are read.
TIERED_MAX_FOOTER_BYTES = 8 * 1024
# Any deletion vector: the next run rewrites the files that carry one. deltalake (1.6) turns Parquet
# predicate pushdown off for a whole scan once a scanned file carries a deletion vector, so one vector
# costs every point query through it the whole table's bytes until it is purged (docs/deletes.md). Spark's
# OPTIMIZE waits for 5 % (spark.databricks.delta.optimize.maxDeletedRowsRatio), which suits readers that
# prune with vectors (Spark, Sail): set max_deleted_rows_ratio=0.05 where only those read.
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.0
ORDERS = ("ascending", "descending")
# "full": every run rewrites a partition with new files whole; "tiered": a run rewrites only the fresh files
# and the settled runs the size-tiered policy merges (see deltaextras.ops.rorder.tiers).
LAYOUTS = ("full", "tiered")
DEFAULT_LAYOUT = "full"

SortSpec = tuple[tuple[str, str], ...]


def normalize_sort_by(sort_by: Any) -> SortSpec:
    """Turn ``"c"``, ``["a", "b"]`` or ``[("a", "descending"), ...]`` into ``((col, order), ...)``.

    Example:
        >>> normalize_sort_by("utc_time")
        (('utc_time', 'ascending'),)
        >>> normalize_sort_by([["a", "descending"], "b"])
        (('a', 'descending'), ('b', 'ascending'))
    """
    if sort_by is None:
        return ()
    if isinstance(sort_by, str):
        return ((_column_name(sort_by, "sort_by"), "ascending"),)
    if not isinstance(sort_by, (list, tuple)):
        raise InvalidArgumentError(
            f"sort_by must be a column name, a list of names or (name, 'ascending'|'descending') pairs, "
            f"not {type(sort_by).__name__}"
        )
    out: list[tuple[str, str]] = []
    for item in sort_by:
        if isinstance(item, str):
            out.append((_column_name(item, "sort_by"), "ascending"))
        elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], str):
            out.append((_column_name(item[0], "sort_by"), sort_order(item[1], item[0])))
        else:
            raise InvalidArgumentError(
                f"sort_by entry {shown(item)} must be a column name or a (name, 'ascending'|'descending') pair"
            )
    return tuple(out)


# Every accepted spelling of a sort direction (case-insensitive), for the library, messages, settings and CLI.
DIRECTIONS = {"asc": "ascending", "ascending": "ascending", "desc": "descending", "descending": "descending"}


def sort_order(word: str, column: Any = None) -> str:
    """The direction a spelling names (``asc``/``ascending``/``desc``/``descending``, any case); any
    other spelling is refused with one line naming the accepted ones.

    Example:
        >>> sort_order("DESC"), sort_order("ascending")
        ('descending', 'ascending')
        >>> try:
        ...     sort_order("down", "t")
        ... except InvalidArgumentError as exc:
        ...     print(exc)
        sort_by direction 'down' for column 't' is not known; use asc, ascending, desc or descending
    """
    order = DIRECTIONS.get(word.strip().lower()) if isinstance(word, str) else None
    if order is None:
        where = f" for column {column!r}" if column is not None else ""
        raise InvalidArgumentError(
            f"sort_by direction {shown(word)}{where} is not known; use asc, ascending, desc or descending"
        )
    return order


def parse_sort_item(text: str) -> tuple[str, str]:
    """A command-line sort key ``COL`` or ``COL:DIRECTION`` as ``(column, direction)``.

    Example:
        >>> parse_sort_item("utc_time:desc"), parse_sort_item("quality")
        (('utc_time', 'descending'), ('quality', 'ascending'))
    """
    column, sep, word = text.rpartition(":")
    if not sep:
        return _column_name(text, "sort_by"), "ascending"
    return _column_name(column, "sort_by"), sort_order(word, column)


def normalize_columns(value: Any, what: str) -> tuple[str, ...]:
    """Turn ``"c"`` or ``["a", "b"]`` into a tuple of column names.

    Example:
        >>> normalize_columns(["node_id", "utc_time"], "unique_by")
        ('node_id', 'utc_time')
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (_column_name(value, what),)
    if isinstance(value, (list, tuple)):
        return tuple(_column_name(v, what) for v in value)
    raise InvalidArgumentError(f"{what} must be a column name or a list of names, not {type(value).__name__}")


def _column_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{what} names must be non-empty strings, got {shown(value)}")
    return value


MAX_LONG = 2**63 - 1


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(value: Any, what: str = "size") -> int:
    """A size in bytes from an integer or a text with a unit: ``10MB`` (10^6), ``128MiB`` (2^20), ``1.5GB``,
    ``4096`` (bytes); units are case-insensitive. The one parser of sizes (command line, app settings).

    Example:
        >>> parse_size("10MB"), parse_size("128MiB"), parse_size("1.5 gb"), parse_size(4096)
        (10000000, 134217728, 1500000000, 4096)
        >>> try:
        ...     parse_size("10 parsecs", "target_file_size")
        ... except InvalidArgumentError as exc:
        ...     print(str(exc)[:41])
        target_file_size must be a size in bytes,
    """
    if isinstance(value, str):
        match = _SIZE.match(value)
        unit = _UNITS.get(match.group(2).lower()) if match else None
        if match is None or unit is None:
            raise InvalidArgumentError(
                f"{what} must be a size in bytes, optionally with a unit (10MB = 10^6 bytes, 128MiB = 2^20 "
                f"bytes; B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got {shown(value)}"
            )
        value = int(float(match.group(1)) * unit) if "." in match.group(1) else int(match.group(1)) * unit
    return _positive_int(value, what)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_LONG:
        raise InvalidArgumentError(f"{what} must be an integer from 1 to {MAX_LONG} (bytes), got {shown(value)}")
    return value


def default_max_footer_bytes(layout: str) -> int:
    """``max_footer_bytes`` when not given: :data:`TIERED_MAX_FOOTER_BYTES` in the tiered layout,
    :data:`DEFAULT_MAX_FOOTER_BYTES` in the full layout.

    Example:
        >>> default_max_footer_bytes("tiered"), default_max_footer_bytes("full")
        (8192, 16384)
    """
    return TIERED_MAX_FOOTER_BYTES if layout == "tiered" else DEFAULT_MAX_FOOTER_BYTES


def default_min_row_group_bytes(layout: str) -> int:
    """``min_row_group_bytes`` when not given: :data:`TIERED_MIN_ROW_GROUP_BYTES` in the tiered layout, 0 (a
    row group per value) in the full layout.

    Example:
        >>> default_min_row_group_bytes("tiered"), default_min_row_group_bytes("full")
        (16384, 0)
    """
    return TIERED_MIN_ROW_GROUP_BYTES if layout == "tiered" else 0


# The option keys of a work message or a table entry of the settings (:meth:`RorderOptions.from_mapping`).
OPTION_KEYS = (
    "by",
    "sort_by",
    "unique_by",
    "target_file_size",
    "memory_budget",
    "max_footer_bytes",
    "max_deleted_rows_ratio",
    "layout",
    "min_row_group_bytes",
)


@dataclass(frozen=True)
class RorderOptions:
    """How one partition is rewritten.

    ``by`` is the row-group column (``None``: the partition column minus ``_range``); ``sort_by``
    orders rows inside a value; ``unique_by`` is the de-duplication key; ``target_file_size`` splits
    output files (bytes on storage); ``memory_budget`` bounds the rows held at once (Arrow bytes);
    ``max_footer_bytes`` rolls output files over before their Parquet footer passes this many bytes (or
    a quarter of their mean value's bytes, when larger), so a point query does not fetch a footer many times
    its value; ``max_deleted_rows_ratio`` rewrites an in-layout partition whose deletion vectors hide more
    than this share of its rows; ``layout`` is ``"full"`` (a partition with new files is rewritten whole)
    or ``"tiered"`` (only fresh files and the tiers :mod:`deltaextras.ops.rorder.tiers` merges are rewritten).
    """

    by: str | None = None
    sort_by: SortSpec = ()
    unique_by: tuple[str, ...] = ()
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    max_footer_bytes: int = DEFAULT_MAX_FOOTER_BYTES
    min_row_group_bytes: int = 0
    max_deleted_rows_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO
    layout: str = DEFAULT_LAYOUT

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RorderOptions:
        """:meth:`build` from the option keys of a mapping (a work message, a table entry of the settings);
        other keys are ignored.

        Example:
            >>> RorderOptions.from_mapping({"path": "/t", "unique_by": "k"}).unique_by
            ('k',)
        """
        return cls.build(**{k: data.get(k) for k in OPTION_KEYS})

    @classmethod
    def build(
        cls,
        *,
        by: str | None = None,
        sort_by: Any = None,
        unique_by: Any = None,
        target_file_size: int | None = None,
        memory_budget: int | None = None,
        max_deleted_rows_ratio: float | None = None,
        layout: str | None = None,
        max_footer_bytes: int | None = None,
        min_row_group_bytes: int | str | None = None,
    ) -> RorderOptions:
        """Validate loosely typed options (as users and messages give them).

        Example:
            >>> RorderOptions.build(by="node_id", target_file_size=64 << 20).target_file_size
            67108864
        """
        if by is not None:
            by = _column_name(by, "by")
        ratio = DEFAULT_MAX_DELETED_ROWS_RATIO if max_deleted_rows_ratio is None else max_deleted_rows_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
            raise InvalidArgumentError(f"max_deleted_rows_ratio must be a number in [0, 1], got {shown(ratio)}")
        layout = DEFAULT_LAYOUT if layout is None else layout
        if layout not in LAYOUTS:
            raise InvalidArgumentError(f"layout must be 'full' or 'tiered', got {shown(layout)}")
        if min_row_group_bytes is None:
            smallest = default_min_row_group_bytes(layout)
        elif min_row_group_bytes in (0, "0"):
            smallest = 0
        else:
            smallest = parse_size(min_row_group_bytes, "min_row_group_bytes")
        return cls(
            by=by,
            sort_by=normalize_sort_by(sort_by),
            unique_by=normalize_columns(unique_by, "unique_by"),
            target_file_size=parse_size(
                DEFAULT_TARGET_FILE_SIZE if target_file_size is None else target_file_size, "target_file_size"
            ),
            memory_budget=parse_size(
                DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget, "memory_budget"
            ),
            max_footer_bytes=parse_size(
                default_max_footer_bytes(layout) if max_footer_bytes is None else max_footer_bytes,
                "max_footer_bytes",
            ),
            max_deleted_rows_ratio=float(ratio),
            layout=layout,
            min_row_group_bytes=smallest,
        )

    def message_fields(self) -> dict[str, Any]:
        """The option keys of a work message (and of a table's message defaults): the sizes and the purge
        ratio always, the rest only when given or not the default, so messages of the defaults stay as
        older releases read them.

        Example:
            >>> sorted(RorderOptions.build(layout="tiered", unique_by="k").message_fields())
            ['layout', 'max_deleted_rows_ratio', 'memory_budget', 'target_file_size', 'unique_by']
        """
        opts = self.to_json()
        out: dict[str, Any] = {k: opts[k] for k in ("target_file_size", "memory_budget", "max_deleted_rows_ratio")}
        if opts["by"] is not None:
            out["by"] = opts["by"]
        if opts["sort_by"]:
            out["sort_by"] = opts["sort_by"]
        if opts["unique_by"]:
            out["unique_by"] = opts["unique_by"]
        if opts["max_footer_bytes"] != default_max_footer_bytes(self.layout):
            out["max_footer_bytes"] = opts["max_footer_bytes"]
        if opts["layout"] != DEFAULT_LAYOUT:
            out["layout"] = opts["layout"]
        if opts["min_row_group_bytes"] != default_min_row_group_bytes(self.layout):
            out["min_row_group_bytes"] = opts["min_row_group_bytes"]
        return out

    def to_json(self) -> dict[str, Any]:
        """The options as plain JSON values (for messages and ``commitInfo``).

        Example:
            >>> RorderOptions.build(sort_by="t").to_json()["sort_by"]
            [['t', 'ascending']]
        """
        return {
            "by": self.by,
            "sort_by": [list(p) for p in self.sort_by],
            "unique_by": list(self.unique_by),
            "target_file_size": self.target_file_size,
            "memory_budget": self.memory_budget,
            "max_footer_bytes": self.max_footer_bytes,
            "max_deleted_rows_ratio": self.max_deleted_rows_ratio,
            "layout": self.layout,
            "min_row_group_bytes": self.min_row_group_bytes,
        }
