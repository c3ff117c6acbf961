"""Benchmark the hourly run: the full layout (each run rewrites the partition whole) against the tiered layout
(each run rewrites the fresh files and the tiers due for a merge), on one partition that keeps growing.

The partition starts with a history of 3 M rows (one day of 150 node_ids, already in layout); then every
five minutes a pipeline appends 150 node_ids' readings (288 appends a day, ~10.4 k rows each at scale 1)
and ``rorder`` runs every hour with ``sort_by=utc_time, unique_by=utc_time``. Both layouts get the same
appends in the same run. Printed, for each layout:

* write amplification: bytes ``rorder`` wrote ÷ bytes the appends wrote, over the first day and the week;
* the last hourly run against the first (wall time of the ``rorder`` call and peak RSS of the process,
  both runs in a fresh child process);
* a point query for one node after the week: row groups it reads (Delta file statistics, then row-group
  statistics prune), their data bytes ÷ the value's own bytes (its rows alone as one row group), and
  rows of other values inside the row groups read;
* whether both tables end with the same rows (content digest through deltalake).

Usage::

    python bench/incremental_bench.py                 # scale 0.1 (rows per append and history), 7 days
    python bench/incremental_bench.py --scale 1 --layouts tiered   # the real size, tiered only (minutes)
    python bench/incremental_bench.py --scale 1       # the real size, both (the full layout: hours on 2 cores)
    python bench/incremental_bench.py --days 1 --scale 0.02   # a smoke run
    python bench/incremental_bench.py --one-run TABLE LAYOUT  # internal: one measured hourly run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import _measure
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltaextras.ops.rorder.tiers import TIER_FANOUT

HERE = Path(__file__).resolve().parent
NODES = 150
APPENDS_PER_HOUR = 12
READINGS_PER_NODE = 70  # per node and five-minute append at scale 1: 150 x 70 x 288 = 3.02 M rows a day
HISTORY_APPENDS = 288  # the history is one day of appends
SORT_BY = "utc_time"
UNIQUE_BY = "utc_time"
QUERY_NODE = 42
LAYOUTS = ("full", "tiered", "tiered-rg1")
# "tiered-rg1": the tiered layout with a row group per value (min_row_group_bytes=0); "tiered" lets small
# values share a row group (its default)
VARIANTS = {"tiered-rg1": ("tiered", {"min_row_group_bytes": 0})}
START = datetime(2024, 1, 1, tzinfo=timezone.utc)

# Targets of the tiered layout (issue: incremental rorder).
WRITE_AMP_MAX = 4.0
LAST_X_FIRST_MAX = 1.5
QUERY_BYTES_X_MAX = 1.1


def append_rows(index: int, per_node: int, rng: np.random.Generator) -> pa.Table:
    """The rows of five-minute append number ``index``: ``per_node`` readings of every node, shuffled."""
    n = NODES * per_node
    order = rng.permutation(n)
    start_us = int((START + timedelta(minutes=5 * index) - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds())
    step = 300_000_000 // per_node
    micros = start_us * 1_000_000 + (order // NODES) * step + (order % NODES)  # unique per node and reading
    return pa.table(
        {
            "node_id": pa.array((order % NODES).astype(np.int64)),
            "utc_time": pa.array(micros.astype(np.int64)).cast(pa.timestamp("us", tz="UTC")),
            "data_values": pa.array(rng.normal(50.0, 15.0, n)),
            "quality": pa.array(rng.choice(np.array([0, 0, 0, 0, 0, 0, 1, 2], np.int32), n)),
            "node_id_range": pa.array(np.zeros(n, dtype=np.int64)),
        }
    )


def rorder_once(table: str, layout: str) -> dict[str, Any]:
    """One hourly run; the bytes it wrote and its wall time (the ``rorder`` call only)."""
    from deltaextras import rorder

    layout, extra = VARIANTS.get(layout, (layout, {}))
    started = time.perf_counter()
    report = rorder(table, sort_by=SORT_BY, unique_by=UNIQUE_BY, layout=layout, max_workers=1, **extra)
    seconds = time.perf_counter() - started
    written = sum(p.bytes_added or 0 for p in report.partitions)
    fresh = sum(p.bytes_removed or 0 for p in report.partitions)
    return {
        "seconds": seconds,
        "bytes": written,
        "read": fresh,
        "committed": sum(p.status == "committed" for p in report.partitions),
    }


def measured_run(table: str, layout: str) -> dict[str, Any]:
    """One hourly run in a fresh child process: its own timing, and the process's peak RSS."""
    run = _measure.run_measured([sys.executable, str(Path(__file__).resolve()), "--one-run", table, layout])
    if not run.ok:
        raise SystemExit(f"measured run failed: {run.stderr_tail}")
    out = json.loads(run.stdout_tail.strip().splitlines()[-1])
    out["peak_rss"] = run.peak_rss_bytes
    return out


def append(tables: dict[str, str], rows: pa.Table) -> None:
    """Append ``rows`` to every table, one commit each."""
    from deltalake import write_deltalake

    for path in tables.values():
        write_deltalake(path, rows, partition_by=["node_id_range"], mode="append")


def _sizes(path: str) -> dict[str, int]:
    from deltalake import DeltaTable

    try:
        actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    except Exception:
        return {}
    return dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))


def point_query(path: str, node: int) -> dict[str, Any]:
    """Row groups a pruning reader reads for ``node_id = node``, their data bytes and rows of other nodes."""
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    groups = data = foreign = rows = files = 0
    for a in actions:
        if not a["min.node_id"] <= node <= a["max.node_id"]:
            continue
        files += 1
        md = pq.ParquetFile(os.path.join(path, a["path"])).metadata
        col = md.schema.to_arrow_schema().get_field_index("node_id")
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            st = rg.column(col).statistics
            if st is not None and st.has_min_max and not st.min <= node <= st.max:
                continue
            groups += 1
            data += sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
            got = pq.ParquetFile(os.path.join(path, a["path"])).read_row_group(i, columns=["node_id"])
            mine = int(np.count_nonzero(got.column(0).to_numpy() == node))
            rows += mine
            foreign += got.num_rows - mine
    return {"files": files, "row_groups": groups, "bytes": data, "rows": rows, "foreign_rows": foreign}


def live_files(path: str) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


def own_bytes(path: str, node: int) -> int:
    """The value's own bytes: its rows alone, in ``sort_by`` order, as one row group with the layout's writer
    settings (what the full layout's row group of that value holds)."""
    from deltalake import DeltaTable

    from deltaextras.ops.rorder.rewrite.layout import writer_properties

    rows = pa.table(DeltaTable(path).to_pyarrow_dataset().to_table(filter=pc.field("node_id") == node))
    rows = rows.drop_columns(["node_id_range"]).sort_by(SORT_BY)
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, rows.schema, **writer_properties(rows.schema, rows, "node_id")) as writer:
        writer.write_table(rows, row_group_size=rows.num_rows)
    md = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata
    return sum(md.row_group(0).column(j).total_compressed_size for j in range(md.num_columns))


def simulate(root: Path, scale: float, days: int, seed: int, layouts: tuple[str, ...]) -> dict[str, Any]:
    per_node = max(1, round(READINGS_PER_NODE * scale))
    rng = np.random.default_rng(seed)
    tables = {layout: str(root / layout) for layout in layouts}
    # History: one day of appends in one commit, put in layout by a first run (not counted).
    history = pa.concat_tables([append_rows(i - HISTORY_APPENDS, per_node, rng) for i in range(HISTORY_APPENDS)])
    append(tables, history)
    for layout, path in tables.items():
        rorder_once(path, layout)
    del history
    hours = 24 * days
    figures: dict[str, Any] = {layout: {"written": [], "seconds": [], "appended": []} for layout in layouts}
    appended_hour: list[int] = []
    t0 = time.perf_counter()
    for hour in range(hours):
        before = _sizes(tables[layouts[-1]])
        for k in range(APPENDS_PER_HOUR):
            append(tables, append_rows(hour * APPENDS_PER_HOUR + k, per_node, rng))
        appended_hour.append(sum(size for p, size in _sizes(tables[layouts[-1]]).items() if p not in before))
        for layout, path in tables.items():
            if hour in (0, TIER_FANOUT - 1, hours - 1):  # the first run, the first merge of k runs, the last
                run = measured_run(path, layout)
                figures[layout].setdefault("measured", []).append({**run, "hour": hour})
            else:
                run = rorder_once(path, layout)
            figures[layout]["written"].append(run["bytes"])
            if layout.startswith("tiered"):  # read more than the hour's appends: settled tiers merged
                figures[layout].setdefault("merged", []).append(run["read"] > 1.5 * appended_hour[-1])
            figures[layout]["seconds"].append(run["seconds"])
        if (hour + 1) % 24 == 0:
            print(f"  day {(hour + 1) // 24}: {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    for layout, path in tables.items():
        f = figures[layout]
        f["files"] = live_files(path)
        f["query"] = point_query(path, QUERY_NODE)
        f["digest"] = str(_measure.delta_digest(path, ["node_id", "utc_time", "data_values", "quality"]))
    figures["appended"] = appended_hour
    figures["own_bytes"] = own_bytes(tables[layouts[-1]], QUERY_NODE)
    figures["rows_per_append"] = NODES * per_node
    figures["history_rows"] = NODES * per_node * HISTORY_APPENDS
    return figures


def render(fig: dict[str, Any], scale: float, days: int) -> str:
    app = fig["appended"]
    own = fig["own_bytes"]
    layouts = [layout for layout in LAYOUTS if layout in fig]
    rows = [("", *layouts)]

    def each(label: str, fn: Any) -> None:
        rows.append((label, *(fn(fig[layout]) for layout in layouts)))

    each("write amplification, day 1", lambda f: f"{sum(f['written'][:24]) / sum(app[:24]):.2f}")
    if days > 1:
        each(f"write amplification, {days} days", lambda f: f"{sum(f['written']) / sum(app):.2f}")
    each("last hourly run ÷ first: wall", lambda f: _ratio(f["measured"], "seconds"))
    each("last hourly run ÷ first: peak RSS", lambda f: _ratio(f["measured"], "peak_rss"))
    each("last hourly run ÷ the first that did its work: wall", _like_for_like)
    each(
        "first / last hourly run wall (s)",
        lambda f: f"{f['measured'][0]['seconds']:.2f} / {f['measured'][-1]['seconds']:.2f}",
    )
    if days > 1:
        each(
            "median hourly run wall, last day ÷ day 1",
            lambda f: f"{statistics.median(f['seconds'][-24:]) / statistics.median(f['seconds'][:24]):.2f}",
        )
    each("runs that merged settled tiers", lambda f: str(sum(1 for m in f["merged"] if m)) if "merged" in f else "-")
    each("runs without a merge: last ÷ first (wall)", _fresh_only)
    each("slowest hourly run (s)", lambda f: f"{max(f['seconds']):.2f}")
    each("hourly runs, total (s)", lambda f: f"{sum(f['seconds']):.1f}")
    each("live files after the last run", lambda f: str(f["files"]))
    each(f"point query node {QUERY_NODE}: row groups read", lambda f: str(f["query"]["row_groups"]))
    each("point query: data bytes ÷ the value's bytes", lambda f: f"{f['query']['bytes'] / own:.3f}")
    each("point query: rows of other values read", lambda f: str(f["query"]["foreign_rows"]))
    same = "yes" if len({fig[layout]["digest"] for layout in layouts}) == 1 else "NO"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"incremental_bench: scale {scale} ({fig['history_rows']:,} history rows, {fig['rows_per_append']:,} rows per "
        f"five-minute append, {NODES} node_ids), {days} day(s) of hourly rorder (sort_by/unique_by utc_time)",
        "| " + " | ".join(r.ljust(w) for r, w in zip(rows[0], widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        *("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows[1:]),
        f"same rows in both tables (deltalake digest): {same}; the value's bytes ({own:,}) = its rows alone as "
        "one row group with the layout's writer settings",
    ]
    if "tiered" not in fig:
        return "\n".join(lines)
    tiered = fig["tiered"]
    amp = sum(tiered["written"]) / sum(app)
    last = tiered["measured"][-1]["seconds"] / tiered["measured"][0]["seconds"]
    same = _same_work(tiered)
    like = same[0] if same else last
    q = tiered["query"]
    from deltaextras.ops.rorder.tiers import MAX_TIERS

    lines.append(
        "targets (tiered): "
        + ", ".join(
            [
                f"write amplification {amp:.2f} <= {WRITE_AMP_MAX} {'ok' if amp <= WRITE_AMP_MAX else 'MISSED'}",
                f"last/first wall {last:.2f} <= {LAST_X_FIRST_MAX} {'ok' if last <= LAST_X_FIRST_MAX else 'MISSED'}"
                f" (the same work: {like:.2f} {'ok' if like <= LAST_X_FIRST_MAX else 'MISSED'})",
                f"row groups {q['row_groups']} <= T={MAX_TIERS} {'ok' if q['row_groups'] <= MAX_TIERS else 'MISSED'}",
                f"bytes {q['bytes'] / own:.3f} <= {QUERY_BYTES_X_MAX} "
                f"{'ok' if q['bytes'] / own <= QUERY_BYTES_X_MAX else 'MISSED'}",
            ]
        )
    )
    return "\n".join(lines)


def _fresh_only(f: dict[str, Any]) -> str:
    """Wall of the last hourly run that rewrote only fresh files ÷ the first (in-process runs)."""
    if "merged" not in f:
        return "-"
    plain = [s for s, m in zip(f["seconds"][1:-1], f["merged"][1:-1], strict=True) if not m]
    return f"{plain[-1] / plain[0]:.2f}" if len(plain) > 1 else "-"


def _same_work(f: dict[str, Any]) -> tuple[float, dict[str, Any]] | None:
    """The last measured run's wall ÷ that of the earlier measured run (fresh process too) whose input bytes
    are closest to the last's: hour 1 rewrites one hour of appends, hour k merges k runs of one hour, as
    three in four hourly runs and one in four do all week. ``None`` for the full layout (one kind of run)."""
    if "merged" not in f:
        return None
    last, earlier = f["measured"][-1], f["measured"][:-1]
    peer = min(earlier, key=lambda r: abs(math.log(max(r["read"], 1) / max(last["read"], 1))))
    return last["seconds"] / peer["seconds"], peer


def _like_for_like(f: dict[str, Any]) -> str:
    same = _same_work(f)
    if same is None:
        return "-"
    ratio, peer = same
    return f"{ratio:.2f} (hour {peer['hour'] + 1})"


def _ratio(measured: list[dict[str, Any]], key: str) -> str:
    return f"{measured[-1][key] / measured[0][key]:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.1, help="rows per append and history, 1 = real size")
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--keep", help="build the tables here and keep them")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument(
        "--layouts", default="full,tiered", help="comma-separated: full, tiered, tiered-rg1 (a row group per value)"
    )
    p.add_argument("--one-run", nargs=2, metavar=("TABLE", "LAYOUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one_run:
        print(json.dumps(rorder_once(*args.one_run)))
        return 0
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="incremental-bench-"))
    try:
        for layout in LAYOUTS:
            shutil.rmtree(root / layout, ignore_errors=True)
        layouts = tuple(x for x in LAYOUTS if x in args.layouts.split(","))
        figures = simulate(root, args.scale, args.days, args.seed, layouts)
        text = render(figures, args.scale, args.days)
        print(text)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
