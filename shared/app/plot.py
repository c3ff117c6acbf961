"""A picture of a table's layout that shows what a point query pays, per partition.

Each partition (each unit of the rewrite) is one horizontal band. Its row groups are bars over the value
range of a column, from their ``min`` to their ``max``; the files of the partition take the band's
sub-rows in turn (at most :data:`BAND_ROWS` sub-rows, so a partition of thousands of files stays one band
and overlapping bars darken where many files cover a value). The lower part of a bar, in proportion to
the rows deletion vectors hide, is shaded; a row group without usable statistics spans the whole axis,
hatched. Each band's label says how many files it has and how many row groups a point query for one
value reads there (the most, and the mean over the values the statistics name). The target layout reads
at a glance: one narrow bar per value and "reads 1"; appends in random order are wide bars and "reads
48". Several panels (before and after a rewrite) are drawn side by side. The height is capped, whatever
the number of files; at most :data:`MAX_BANDS` partitions are drawn, the others counted in the title.

Up to :data:`MAX_IDS` row groups, every bar carries the SVG id ``rowgroup-<file>-<row group>`` (deleted
shares ``deleted-<file>-<row group>``), so a drawing can be checked against the table's metadata.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgumentError, UnsupportedFeatureError

__all__ = [
    "LayoutPicture",
    "Panel",
    "deleted_rows_per_row_group",
    "draw_layout",
    "draw_panels",
    "panel_of",
    "require_matplotlib",
]

FORMATS = (".svg", ".png", ".pdf")
INSTALL_HINT = "drawing needs matplotlib: pip install 'deltaextras[plot]'"
BAND_ROWS = 8  # sub-rows of one partition's band at most
MAX_BANDS = 60  # partitions drawn at most
MAX_IDS = 4000  # row groups drawn as their own SVG element (with an id) at most
_ROW_INCHES = 0.16
_MAX_INCHES = 14.0
_BAR = "#3b75af"
_DELETED = "#c0392b"


@dataclass(frozen=True)
class LayoutPicture:
    """What was drawn: where, how many files and row groups (bars), over every panel."""

    path: str
    files: int
    row_groups: int


@dataclass
class Panel:
    """One picture of a layout: a :func:`~deltaextras.ops.maintenance.inspect.row_group_table`, the rows deletion
    vectors hide per row group, and the partition label of each file (``None``: the table is one unit)."""

    table: pa.Table
    deleted: Sequence[int]
    title: str = ""
    partition_of: Mapping[str, str] | None = None


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
    """Rows hidden by deletion vectors in each row of a :func:`~deltaextras.ops.maintenance.inspect.row_group_table`.

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


def draw_layout(
    table: pa.Table,
    deleted: Sequence[int],
    path: str,
    *,
    title: str = "",
    partition_of: Mapping[str, str] | None = None,
) -> LayoutPicture:
    """Draw one :func:`~deltaextras.ops.maintenance.inspect.row_group_table` (plus deleted rows per row group) to
    ``path`` (``.svg``, ``.png`` or ``.pdf``). Returns what was drawn. See the module doc for the picture."""
    return draw_panels([Panel(table, deleted, title, partition_of)], path)


def draw_panels(panels: Sequence[Panel], path: str) -> LayoutPicture:
    """Draw panels side by side (e.g. before and after a rewrite) to ``path``; returns what was drawn."""
    require_matplotlib(path)
    from matplotlib.figure import Figure

    bands = [_bands(p) for p in panels]
    rows = max((sum(b.rows for b in shown) for shown, _hidden in bands), default=1)
    height = min(_MAX_INCHES, 1.4 + _ROW_INCHES * rows + 0.12 * max(len(shown) for shown, _h in bands))
    fig = Figure(figsize=(7.5 * len(panels) if len(panels) > 1 else 11, max(2.6, height)))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    files = groups = 0
    for k, (panel, ax, (shown, hidden)) in enumerate(zip(panels, axes, bands, strict=True)):
        drawn = _draw_panel(ax, panel, shown, hidden, ids=k == 0)
        files += drawn[0]
        groups += drawn[1]
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:  # a folder that vanished, a full disk, a read-only file system
        raise InvalidArgumentError(f"cannot write {path}: {exc.strerror or exc}") from None
    return LayoutPicture(path, files, groups)


@dataclass
class _Band:
    """One partition of a panel: its label, row indexes of the table, files (in order) and sub-rows."""

    label: str
    members: list[int]
    files: list[str]
    rows: int
    reads_max: int = 0
    reads_mean: float | None = None


def _bands(panel: Panel) -> tuple[list[_Band], int]:
    """The bands of a panel (at most :data:`MAX_BANDS`, in partition order) and how many were left out."""
    from ..ops.maintenance.inspect import row_groups_per_value

    names = panel.table.column("file").to_pylist()
    of = panel.partition_of or {}
    grouped: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        grouped.setdefault(of.get(name, "(table)") if of else "(table)", []).append(i)
    labels = sorted(grouped, key=_natural)
    shown = labels[:MAX_BANDS]
    per_band = max(1, min(BAND_ROWS, 90 // max(1, len(shown))))
    out = []
    for label in shown:
        members = grouped[label]
        files = list(dict.fromkeys(names[i] for i in members))
        reads = row_groups_per_value(panel.table.take(members))
        band = _Band(label, members, files, min(per_band, len(files)), reads["max"], reads["mean"])
        out.append(band)
    return out, len(labels) - len(shown)


def _natural(label: str) -> tuple[Any, ...]:
    """Sort key: ``k=10`` after ``k=9``."""
    head, _, value = label.rpartition("=")
    try:
        return (head, 0, float(value), "")
    except ValueError:
        return (head, 1, 0.0, value)


def _draw_panel(ax: Any, panel: Panel, bands: list[_Band], hidden: int, *, ids: bool) -> tuple[int, int]:
    """Draw one panel's bands into ``ax``; returns (files, row groups) drawn."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    table = panel.table
    index = table.column("row_group").to_pylist()
    rows = table.column("rows").to_pylist()
    lo, hi, labels = _axis_values(table)
    known = [v for v in (*lo, *hi) if v is not None and not math.isnan(v)]
    x0, x1 = (min(known), max(known)) if known else (0.0, 1.0)
    t = table.column("min").type
    unit = 1.0 if labels is not None or pa.types.is_integer(t) or pa.types.is_boolean(t) else _unit(lo, hi, x1 - x0)
    pad = unit * 0.45
    file_id = {name: k for k, name in enumerate(dict.fromkeys(table.column("file").to_pylist()))}
    single = sum(len(b.members) for b in bands) <= MAX_IDS
    bars: list[Any] = []
    shades: list[Any] = []
    base, ticks, names = 0.0, [], []
    for band in bands:
        slot = {name: j % band.rows for j, name in enumerate(band.files)}
        crowd = max(1.0, len(band.files) / band.rows)
        alpha = max(0.12, min(1.0, 1.5 / crowd))
        for i in band.members:
            name = table.column("file")[i].as_py()
            y = base + slot[name] + 0.1
            unknown = lo[i] is None or hi[i] is None or math.isnan(lo[i]) or math.isnan(hi[i])
            a, b = (x0 - pad, x1 + pad) if unknown else (lo[i] - pad, hi[i] + pad)
            bar = Rectangle((a, y), b - a, 0.8, facecolor=_BAR, edgecolor="white" if single else "none",
                            linewidth=0.3, alpha=alpha, hatch="//" if unknown else None)  # fmt: skip
            share = min(1.0, panel.deleted[i] / rows[i]) if rows[i] and panel.deleted[i] else 0.0
            shade = Rectangle((a, y), b - a, 0.8 * share, facecolor=_DELETED, edgecolor="none", alpha=0.85)
            if single:
                gid = f"{file_id[name]}-{index[i]}"
                bar.set_gid(("rowgroup-" if ids else "after-rowgroup-") + gid)
                ax.add_patch(bar)
                if share:
                    shade.set_gid(("deleted-" if ids else "after-deleted-") + gid)
                    ax.add_patch(shade)
            else:
                bars.append(bar)
                if share:
                    shades.append(shade)
        ticks.append(base + band.rows / 2)
        names.append(_band_label(band))
        base += band.rows
        ax.axhline(base + 0.05, color="#999999", linewidth=0.4)
    if bars:
        ax.add_collection(PatchCollection(bars, match_original=True))
    if shades:
        ax.add_collection(PatchCollection(shades, match_original=True))
    ax.set_xlim(x0 - 2 * pad - unit, x1 + 2 * pad + unit)
    ax.set_ylim(max(base, 1.0), 0.0)
    ax.set_yticks(ticks)
    for text, band in zip(ax.set_yticklabels(names, fontsize=7 if len(bands) > 12 else 8), bands, strict=True):
        text.set_gid(f"band-{band.label}-files-{len(band.files)}-reads-{band.reads_max}")
    if labels is not None:
        step = max(1, len(labels) // 20)
        ax.set_xticks([float(i) for i in range(0, len(labels), step)])
        ax.set_xticklabels(labels[::step], rotation=45, ha="right", fontsize=7)
    ax.set_xlabel(f"{t} value range of each row group")
    more = f"; {hidden} more partition(s) not drawn" if hidden else ""
    total_files = sum(len(b.files) for b in bands)
    ax.set_title(
        f"{panel.title or 'layout'}\n{total_files:,} file(s), {sum(len(b.members) for b in bands):,} row groups{more}",
        fontsize=9,
        loc="left",
    )
    ax.legend(
        handles=[Patch(facecolor=_BAR, label="row group"), Patch(facecolor=_DELETED, label="deleted rows share")],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=2,
        fontsize=7,
        frameon=False,
    )
    return total_files, sum(len(b.members) for b in bands)


def _band_label(band: _Band) -> str:
    """``node_id_range=0`` / ``48 files, a point query reads 48`` (the mean too when it differs)."""
    if band.reads_mean is None:
        reads = "no min/max to prune by"
    else:
        mean = "" if abs(band.reads_mean - band.reads_max) < 0.05 else f" (mean {band.reads_mean:.1f})"
        reads = f"point query reads {band.reads_max} row group(s){mean}"
    return f"{band.label}\n{len(band.files)} file(s); {reads}"


def panel_of(snap: Any, table: pa.Table, unit: str | None, title: str = "") -> Panel:
    """The :class:`Panel` of a :func:`~deltaextras.ops.maintenance.inspect.row_group_table` read from snapshot ``snap``:
    the rows its deletion vectors hide, and each file's partition of column ``unit``."""
    from ..core.dv import read_deletion_vectors

    drawn = set(table.column("file").to_pylist())
    with_dv = [f for f in snap.files if f.dv and f.key in drawn]
    vectors = read_deletion_vectors(snap.storage, [f.dv for f in with_dv])
    deleted = deleted_rows_per_row_group(table, {f.key: v for f, v in zip(with_dv, vectors, strict=True)})
    partition_of = (
        {f.key: f"{unit}={f.partition_values.get(unit)}" for f in snap.files if f.key in drawn} if unit else None
    )
    return Panel(table, deleted, title, partition_of)


def _unit(lo: Sequence[float | None], hi: Sequence[float | None], extent: float) -> float:
    """The width a one-value bar of a continuous column gets: the smallest gap between one-value bars."""
    points = sorted({a for a, b in zip(lo, hi, strict=True) if a is not None and a == b and not math.isnan(a)})
    gaps = [b - a for a, b in itertools.pairwise(points) if b > a]
    return min(gaps) if gaps else (extent / 100 or 1.0)
