"""The soak bench's report: a Markdown table per day, the targets with their verdicts, the week's PNG.

Example:
    >>> daily_table([])[:13]
    '| day | table'
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soak import HourFigures, WeekResult


def daily_table(rows: list[HourFigures]) -> str:
    """One Markdown row per day and table (the day's last hour; sums and maxima over the day)."""
    head = (
        "| day | table | rows exact (dl/polars) | rows | live files | live MB | stored MB | stored ÷ live | "
        "log / checkpoints / other log MB | log versions | write ampl. | point query (max) | orch s | orch MB | "
        "worker med/p99 s | worker MB | "
        "committed/skipped/retried/dead |\n|" + "---|" * 17
    )
    out = [head]
    for (day, table), group in _groups(rows).items():
        last = group[-1]
        ok_dl = sum(r.exact_deltalake for r in group)
        ok_pl = sum(bool(r.exact_polars) for r in group)
        pq = max(group, key=lambda r: r.point_x_own)
        sail = max(group, key=lambda r: r.sail_point_x_own)
        sail_cell = (
            f"; Sail {sail.sail_point_bytes / 1024:.0f} KiB in {sail.sail_point_requests}"
            if sail.sail_point_bytes >= 0
            else ""
        )
        out.append(
            f"| {day} | {table} | {ok_dl}/{len(group)} / {ok_pl}/{len(group)} | {last.rows_deltalake:,} | "
            f"{last.live_files:,} | {last.live_bytes / 1e6:.1f} | {last.stored_bytes / 1e6:.1f} | "
            f"{last.stored_bytes / max(1, last.live_bytes):.1f}× | {_log_kinds(last)} | {last.log_versions:,} | "
            f"{last.write_amplification:.2f} | {pq.point_bytes / 1024:.0f} KiB in {pq.point_requests} req "
            f"({pq.point_x_own:.0f}×){sail_cell} | {max(r.orchestrator_s for r in group):.1f} | "
            f"{max(r.orchestrator_rss_mb for r in group):.0f} | "
            f"{statistics.median(r.worker_median_s for r in group):.1f}/"
            f"{max(r.worker_p99_s for r in group):.1f} | {max(r.worker_rss_mb for r in group):.0f} | "
            f"{sum(r.committed for r in group)}/{sum(r.skipped for r in group)}/{sum(r.retried for r in group)}/"
            f"{sum(r.dead_lettered - r.injected_poison for r in group)} |"
        )
    return "\n".join(out)


def _kinds(row: HourFigures) -> dict[str, int]:
    return {k: int(v) for k, v in (part.split("=") for part in row.stored_by_kind.split())}


def _log_kinds(row: HourFigures) -> str:
    kinds = _kinds(row)
    other = sum(v for k, v in kinds.items() if k.startswith("log/"))
    return f"{kinds.get('log', 0) / 1e6:.1f} / {kinds.get('checkpoints', 0) / 1e6:.1f} / {other / 1e6:.2f}"


def _groups(rows: list[HourFigures]) -> dict[tuple[int, str], list[HourFigures]]:
    groups: dict[tuple[int, str], list[HourFigures]] = {}
    for r in rows:
        groups.setdefault((r.day, r.table), []).append(r)
    return groups


def verdicts(result: WeekResult) -> list[tuple[str, bool, str]]:
    """The targets of the week, each with its verdict and the measured figure."""
    rows = result.rows
    out: list[tuple[str, bool, str]] = []
    bad = [r for r in rows if not r.exact_deltalake or r.exact_polars is False]
    out.append(("0 rows lost, duplicated or resurrected at every hourly check", not bad, f"{len(bad)} inexact checks"))
    dead = sum(r.dead_lettered - r.injected_poison for r in rows)
    out.append(("0 dead letters beyond the injected poison", dead == 0, f"{dead}"))
    # the users' change is retried on conflicts; one given up means the hour raced nothing on that table
    gave_up = sorted({(r.hour, f) for r in rows for f in r.faults.split(";") if f.startswith("gave_up:")})
    figure = ", ".join(f"hour {h} {f.split(':')[1]}" for h, f in gave_up[:6]) + (" …" if len(gave_up) > 6 else "")
    out.append(("the users' UPDATE and MERGE landed at every fault hour", not gave_up, figure or "all landed"))
    for reader, figures in (
        ("deltalake", lambda r: (r.point_bytes, r.point_requests)),
        ("Sail", lambda r: (r.sail_point_bytes, r.sail_point_requests)),
    ):
        measured = [(r, *figures(r)) for r in rows if figures(r)[0] >= 0]
        failing = [m for m in measured if m[2] > 20 or m[1] > 3 * m[0].node_bytes + 65536]
        over = sum(1 for m in failing if m[1] > 3 * m[0].node_bytes + 65536)
        worst = max(failing or measured, key=lambda m: (m[2] > 20, m[1] / max(1.0, m[0].node_bytes)), default=None)
        if worst is not None:
            r, nbytes, requests = worst
            times = nbytes / max(1.0, r.node_bytes)
            out.append(
                (
                    f"point query ≤ 3× the node's bytes + 64 KiB in ≤ 20 requests ({reader})",
                    not failing,
                    f"{len(failing)} of {len(measured)} table-hours fail ({over} on bytes); worst {r.table} hour "
                    f"{r.hour}: {nbytes / 1024:.0f} KiB in {requests} requests ({times:.0f}×)",
                )
            )
    for table in sorted({r.table for r in rows}):
        last = [r for r in rows if r.table == table][-1]
        out.append(
            (f"write amplification ≤ 3 ({table})", last.write_amplification <= 3, f"{last.write_amplification:.2f}")
        )
        # a day ends with its retention delete and vacuum; a run stopped inside its first day has no end
        day_ends = [g[-1] for (_, t), g in _groups(rows).items() if t == table and "delete+vacuum" in g[-1].faults]
        if not day_ends:
            continue
        ratio = max(r.stored_bytes / max(1, r.live_bytes) for r in day_ends)
        out.append((f"stored bytes ≤ 2× live at every day's end ({table})", ratio <= 2, f"max {ratio:.1f}×"))
        kinds = [_kinds(r) for r in day_ends]
        orphans = max(k.get("data", 0) - r.live_bytes for k, r in zip(kinds, day_ends, strict=True))
        out.append((f"no unreferenced data file survives the daily vacuum ({table})", orphans <= 0, f"{orphans:,} B"))
        kept = [sum(v for k, v in kd.items() if k.startswith("log/") or k == "checkpoints") for kd in kinds]
        grows = len(kept) > 1 and kept[-1] > 1.5 * max(kept[0], 65536)
        out.append(
            (
                f"checkpoints and other log objects not growing day to day ({table})",
                not grows,
                " → ".join(f"{b / 1e6:.2f}" for b in kept) + " MB",
            )
        )
        days = [g for (_, t), g in _groups(rows).items() if t == table]
        if len(days) > 1:
            o1, on = max(r.orchestrator_s for r in days[0]), max(r.orchestrator_s for r in days[-1])
            out.append((f"orchestrator time last day ≤ 1.5× day 1 ({table})", on <= 1.5 * o1, f"{o1:.1f} → {on:.1f} s"))
            p1, pn = max(r.worker_p99_s for r in days[0]), max(r.worker_p99_s for r in days[-1])
            out.append((f"worker p99 flat (≤ 1.5× day 1) ({table})", pn <= 1.5 * p1, f"{p1:.1f} → {pn:.1f} s"))
    return out


def plot(rows: list[HourFigures], path: Path) -> bool:
    """A PNG of the week: content exactness, stored vs live bytes, point-query ×, worker seconds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for i, table in enumerate(sorted({r.table for r in rows})):
        rs = [r for r in rows if r.table == table]
        hours = [r.hour for r in rs]
        axes[0][0].plot(hours, [r.stored_bytes / 1e6 for r in rs], color=f"C{i}", label=f"{table} stored")
        axes[0][0].plot(hours, [r.live_bytes / 1e6 for r in rs], "--", color=f"C{i}", label=f"{table} live")
        axes[0][1].plot(hours, [r.point_x_own for r in rs], label=table)
        axes[1][0].plot(hours, [r.write_amplification for r in rs], label=table)
        axes[1][1].plot(hours, [r.rows_deltalake - r.rows_expected for r in rs], label=f"{table} rows read − expected")
    axes[1][1].plot(hours, [r.worker_p99_s for r in rs], ":", label="worker p99 s")
    titles = ["MB stored vs live", "point query × node's bytes", "write amplification", "exactness, worker p99"]
    for ax, title in zip([a for row in axes for a in row], titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("simulated hour")
        ax.legend(fontsize=7)
    axes[0][1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
