"""What ``min_row_group_bytes`` buys and costs in the tiered layout: an unpartitioned table of sensors
appended every five minutes (one reading a node, random row order) and run hourly with ``layout="tiered"``,
once per threshold, each on a fresh local table. Printed per threshold: write amplification (bytes of the
files the runs wrote ÷ bytes appended), the live files, their bytes and their footers' bytes, and what a
point query for one node reads from the files: the row groups that may hold it plus each such file's footer
fetched twice (as deltalake and Sail fetch it).

Usage::

    python bench/row_group_packing.py                       # 1,500 nodes, 8 hours, 0 / 4 / 8 / 16 KiB
    python bench/row_group_packing.py --nodes 300 --hours 4 --sizes 0,4096
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import deltaextras

START_US = 1_767_225_600_000_000
STEP_US = 300_000_000
QUERY_NODE = 42


def _batch(rng: np.random.Generator, nodes: int, step: int) -> pa.Table:
    ids = rng.permutation(nodes).astype(np.int64)
    return pa.table(
        {
            "node_id": ids,
            "utc_time": pa.array(np.full(nodes, START_US + step * STEP_US), pa.timestamp("us", tz="UTC")),
            "temperature": rng.normal(20, 5, nodes),
            "humidity": rng.uniform(0, 100, nodes),
            "voltage": rng.normal(3.3, 0.1, nodes),
            "quality": rng.integers(0, 3, nodes).astype(np.int32),
        }
    )


def _files(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*.parquet")}


def measure(root: Path, nodes: int, hours: int, smallest: int) -> dict[str, float]:
    """One table, ``hours`` of appends and hourly tiered runs with ``min_row_group_bytes=smallest``."""
    rng = np.random.default_rng(1)
    appended = written = 0
    seen: dict[str, int] = {}
    for hour in range(hours):
        for step in range(hour * 12, hour * 12 + 12):
            write_deltalake(str(root), _batch(rng, nodes, step), mode="append")
        before = _files(root)
        appended += sum(size for path, size in before.items() if path not in seen)
        deltaextras.rorder(
            str(root),
            by="node_id",
            sort_by="utc_time",
            unique_by=["node_id", "utc_time"],
            layout="tiered",
            min_row_group_bytes=smallest,
            max_workers=1,
        )
        seen = _files(root)
        written += sum(size for path, size in seen.items() if path not in before)
    live = DeltaTable(str(root)).file_uris()
    footers = query = 0
    for uri in live:
        md = pq.ParquetFile(uri).metadata
        footers += md.serialized_size
        hit = 0
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            stats = rg.column(0).statistics
            if stats.min <= QUERY_NODE <= stats.max:
                hit += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if hit:
            query += hit + 2 * md.serialized_size
    return {
        "write_amplification": written / max(1, appended),
        "files": len(live),
        "bytes": sum(os.path.getsize(u) for u in live),
        "footers": footers,
        "query": query,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1500)
    ap.add_argument("--hours", type=int, default=8)
    ap.add_argument("--sizes", default="0,4096,8192,16384", help="comma-separated thresholds in bytes")
    args = ap.parse_args(argv)
    print(f"row_group_packing: {args.nodes} nodes, {args.hours} hours of five-minute appends, hourly tiered runs")
    print("| min_row_group_bytes | write ampl. | live files | live bytes | footer bytes | point query bytes |")
    print("|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        root = Path(tempfile.mkdtemp(prefix="row-group-packing-"))
        try:
            f = measure(root / "t", args.nodes, args.hours, size)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"| {size:,} | {f['write_amplification']:.2f} | {f['files']:,} | {f['bytes']:,} | {f['footers']:,} | "
            f"{f['query']:,} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
