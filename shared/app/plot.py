"""A picture of a table's layout: per live file, its row groups as bars over the value range of a column,
sized by their bytes, with the share of rows deleted by deletion vectors shaded.

One lane per file (top to bottom as :func:`deltaextras.ops.inspect.row_group_table` lists them). A row
group is a bar from its ``min`` to its ``max`` of the column; a bar's height is its compressed bytes
relative to the largest row group drawn; row groups of one file whose ranges overlap are stacked in
sub-lanes. The lower part of a bar, in proportion to the rows a deletion vector hides, is shaded. A
row group without usable statistics spans the whole axis, hatched. So the target layout reads at a
glance: one narrow bar per value, side by side; appends in random order read as long overlapping bars.

Every row-group bar carries the SVG id ``rowgroup-<file>-<row group>`` (deleted shares
``deleted-<file>-<row group>``), so a drawing can be checked against the table's metadata.

matplotlib is an optional extra (``pip install 'deltaextras[plot]'``) imported only when drawing;
nothing here touches pyplot's global state.

Example:
    >>> import tempfile, os
    >>> import pyarrow as pa
    >>> rows = pa.table({"file": ["a.parquet", "a.parquet"], "row_group": [0, 1], "min": [1, 2],
    ...                  "max": [1, 2], "rows": [10, 10], "bytes": [400, 300]})
    >>> out = os.path.join(tempfile.mkdtemp(), "layout.svg")
    >>> draw_layout(rows, [0, 5], out, title="demo").row_groups
    2
    >>> open(out).read().count('id="rowgroup-')
    2
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgumentError, UnsupportedFeatureError

__all__ = ["LayoutPicture", "deleted_rows_per_row_group", "draw_layout", "require_matplotlib"]

FORMATS = (".svg", ".png", ".pdf")
INSTALL_HINT = "drawing needs matplotlib: pip install 'deltaextras[plot]'"
_LANE_INCHES = 0.32
_MAX_INCHES = 60.0
_BAR = "#3b75af"
_DELETED = "#c0392b"


@dataclass(frozen=True)
class LayoutPicture:
    """What was drawn: where, how many files (lanes) and row groups (bars)."""

    path: str
    files: int
    row_groups: int


def require_matplotlib(path: str | None = None) -> None:
    """Refuse, before any work, a ``path`` that names no drawable format
    (:class:`~deltaextras.errors.InvalidArgumentError`), or a missing matplotlib
    (:class:`~deltaextras.errors.UnsupportedFeatureError`, saying how to install it).

    Example:
        >>> require_matplotlib("layout.svg")  # installed here
        >>> require_matplotlib("layout.txt")
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: cannot draw to 'layout.txt': name a .svg, .png or .pdf file
    """
    if path is not None and os.path.splitext(path)[1].lower() not in FORMATS:
        raise InvalidArgumentError(f"cannot draw to {path!r}: name a .svg, .png or .pdf file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UnsupportedFeatureError(INSTALL_HINT) from None


def deleted_rows_per_row_group(table: pa.Table, deleted: dict[str, Any]) -> list[int]:
    """Rows hidden by deletion vectors in each row of a :func:`~deltaextras.ops.inspect.row_group_table`.

    ``deleted`` maps a file (as in the table's ``file`` column) to the set of its deleted row
    positions (anything with ``range_cardinality(start, stop)``, e.g. a ``pyroaring.BitMap``); row
    groups are laid end to end in ``row_group`` order within their file.

    Example:
        >>> from pyroaring import BitMap
        >>> t = pa.table({"file": ["f", "f", "g"], "row_group": [0, 1, 0], "rows": [4, 4, 3]})
        >>> deleted_rows_per_row_group(t, {"f": BitMap([1, 5, 6])})
        [1, 2, 0]
    """
    files = table.column("file").to_pylist()
    indexes = table.column("row_group").to_pylist()
    rows = table.column("rows").to_pylist()
    starts: dict[tuple[str, int], int] = {}
    for f in set(files):
        offset = 0
        for i in sorted((i for i, name in enumerate(files) if name == f), key=lambda i: indexes[i]):
            starts[(f, indexes[i])] = offset
            offset += rows[i]
    out = []
    for f, r, n in zip(files, indexes, rows, strict=True):
        bitmap = deleted.get(f)
        if bitmap is None or n == 0:
            out.append(0)
            continue
        start = starts[(f, r)]
        out.append(int(bitmap.range_cardinality(start, start + n)))
    return out


def _axis_values(table: pa.Table) -> tuple[list[float | None], list[float | None], list[str] | None]:
    """Row-group bounds as numbers for the x axis; for strings and binaries, ranks (and the labels)."""
    lo, hi = table.column("min"), table.column("max")
    t = lo.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        width = pa.int64() if not pa.types.is_date32(t) else pa.int32()
        return (
            [None if v is None else float(v) for v in lo.cast(width).to_pylist()],
            [None if v is None else float(v) for v in hi.cast(width).to_pylist()],
            None,
        )
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
        conv = pc.cast(lo, pa.float64()), pc.cast(hi, pa.float64())
        return conv[0].to_pylist(), conv[1].to_pylist(), None
    los, his = lo.to_pylist(), hi.to_pylist()
    labels = sorted({v for v in (*los, *his) if v is not None}, key=lambda v: (str(type(v)), v))
    rank = {v: float(i) for i, v in enumerate(labels)}
    return (
        [None if v is None else rank[v] for v in los],
        [None if v is None else rank[v] for v in his],
        [str(v)[:24] for v in labels],
    )


def _sub_lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
    """A sub-lane per interval so that intervals sharing a sub-lane do not overlap (greedy, by start)."""
    ends: list[float] = []
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: spans[i]):
        a, b = spans[i]
        for lane, end in enumerate(ends):
            if a > end:
                ends[lane] = b
                out[i] = lane
                break
        else:
            ends.append(b)
            out[i] = len(ends) - 1
    return out


def draw_layout(table: pa.Table, deleted: Sequence[int], path: str, *, title: str = "") -> LayoutPicture:
    """Draw a :func:`~deltaextras.ops.inspect.row_group_table` (plus deleted rows per row group) to
    ``path`` (``.svg``, ``.png`` or ``.pdf``). Returns what was drawn. See the module doc for the picture."""
    require_matplotlib(path)
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    files = table.column("file").to_pylist()
    rows = table.column("rows").to_pylist()
    sizes = table.column("bytes").to_pylist()
    index = table.column("row_group").to_pylist()
    lo, hi, labels = _axis_values(table)
    known = [v for v in (*lo, *hi) if v is not None and not math.isnan(v)]
    x0, x1 = (min(known), max(known)) if known else (0.0, 1.0)
    t = table.column("min").type
    unit = 1.0 if labels is not None or pa.types.is_integer(t) or pa.types.is_boolean(t) else _unit(lo, hi, x1 - x0)
    pad = unit * 0.45
    lane_of: dict[str, int] = {}
    for f in files:
        lane_of.setdefault(f, len(lane_of))
    largest = max(sizes) if sizes else 1

    spans = []
    for a, b in zip(lo, hi, strict=True):
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            spans.append((x0 - pad, x1 + pad, True))
        else:
            spans.append((a - pad, b + pad, False))
    sub = [0] * len(files)
    depth: dict[str, int] = {}
    for f in lane_of:
        members = [i for i, name in enumerate(files) if name == f]
        lanes = _sub_lanes([(spans[i][0], spans[i][1]) for i in members])
        for i, lane in zip(members, lanes, strict=True):
            sub[i] = lane
        depth[f] = max(lanes, default=0) + 1

    height = min(_MAX_INCHES, 1.6 + _LANE_INCHES * max(1, len(lane_of)))
    fig = Figure(figsize=(11, height))
    ax = fig.add_subplot()
    for i, f in enumerate(files):
        lane, n_sub = lane_of[f], depth[f]
        slot = 0.8 / n_sub
        base = lane - 0.4 + sub[i] * slot
        h = slot * max(0.08, sizes[i] / largest if largest else 1.0)
        a, b, unknown = spans[i]
        bar = Rectangle(
            (a, base), b - a, h, facecolor=_BAR, edgecolor="white", linewidth=0.3, hatch="//" if unknown else None
        )
        bar.set_gid(f"rowgroup-{lane}-{index[i]}")
        ax.add_patch(bar)
        if rows[i] and deleted[i]:
            share = min(1.0, deleted[i] / rows[i])
            shade = Rectangle((a, base), b - a, h * share, facecolor=_DELETED, edgecolor="none", alpha=0.85)
            shade.set_gid(f"deleted-{lane}-{index[i]}")
            ax.add_patch(shade)
    ax.set_xlim(x0 - 2 * pad - unit, x1 + 2 * pad + unit)
    ax.set_ylim(len(lane_of) - 0.5, -0.5)
    names = list(lane_of)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([_short(n) for n in names], fontsize=6 if len(names) > 30 else 8)
    if labels is not None:
        step = max(1, len(labels) // 20)
        ax.set_xticks([float(i) for i in range(0, len(labels), step)])
        ax.set_xticklabels(labels[::step], rotation=45, ha="right", fontsize=7)
    ax.set_xlabel(f"{table.column('min').type} value range of each row group (bar height: compressed bytes)")
    ax.set_title(title or f"{len(names)} files, {len(files)} row groups", fontsize=10, loc="left")
    ax.legend(
        handles=[Patch(facecolor=_BAR, label="row group"), Patch(facecolor=_DELETED, label="deleted rows share")],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=2,
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout()
    fig.savefig(path)
    return LayoutPicture(path, len(names), len(files))


def _unit(lo: Sequence[float | None], hi: Sequence[float | None], extent: float) -> float:
    """The width a one-value bar of a continuous column gets: the smallest gap between one-value bars."""
    points = sorted({a for a, b in zip(lo, hi, strict=True) if a is not None and a == b and not math.isnan(a)})
    gaps = [b - a for a, b in itertools.pairwise(points) if b > a]
    return min(gaps) if gaps else (extent / 100 or 1.0)


def _short(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return base if len(base) <= 28 else base[:12] + "…" + base[-12:]
