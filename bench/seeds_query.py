"""Point queries at the seeds' scale: 15,000 nodes x four hours of five-minute readings (48 rows a node),
one unpartitioned table, ``rorder(by="node_id")``, read on Azurite through the counting proxy.

A node's row group is under a kilobyte here, so a file's footer (about 500 bytes per row group of four
columns) is what a point query pays for: this bench shows the files, footers and, per reader, the bytes and
requests of ``node_id = 42`` against the target (≤ 3x the node's own bytes + 64 KiB, ≤ 20 requests).
Run it with another checkout on ``PYTHONPATH`` (and another ``--workdir``) to compare releases.

Usage::

    python bench/seeds_query.py                          # deltalake, Sail, polars; 3 runs each
    python bench/seeds_query.py --nodes 1500 --readers deltalake --layout tiered
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

import _workload  # noqa: E402
import query_bench as qb  # noqa: E402

BUDGET_X, BUDGET_BYTES, BUDGET_REQUESTS = 3.0, 64 * 1024, 20


def build(root: Path, nodes: int, hours: int, layout: str) -> Path:
    """The raw table (one append per five minutes, random row order), then ``rorder`` on it: hourly in
    the tiered layout (a run after every twelve appends), once at the end in the full one."""
    from deltalake import write_deltalake

    import deltaextras

    table = root / "table"
    if table.exists():
        shutil.rmtree(table)
    rng = np.random.default_rng(0)
    micros = (_workload.START - _workload.START.replace(year=1970, month=1, day=1)) // timedelta(microseconds=1)
    for step in range(hours * 12):
        order = rng.permutation(nodes)
        rows = pa.table(
            {
                "node_id": pa.array(order, pa.int64()),
                "utc_time": pa.array(np.full(nodes, micros + step * 300_000_000), pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                "data_values": pa.array(rng.normal(50.0, 15.0, nodes)),
                "quality": pa.array(rng.choice(np.array([0, 0, 0, 0, 0, 0, 1, 2], np.int32), nodes)),
            }
        )
        write_deltalake(str(table), rows, mode="append")
        if layout == "tiered" and step % 12 == 11:
            deltaextras.rorder(str(table), by="node_id", sort_by="utc_time", layout="tiered", max_workers=1)
    if layout == "full":
        deltaextras.rorder(str(table), by="node_id", sort_by="utc_time", max_workers=1)
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=15_000)
    ap.add_argument("--hours", type=int, default=4)
    ap.add_argument("--layout", choices=("full", "tiered"), default="full")
    ap.add_argument("--readers", default="deltalake,sail,polars")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", default=str(HERE / ".work" / "seeds"))
    args = ap.parse_args(argv)
    import deltaextras

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    table = build(work, args.nodes, args.hours, args.layout)
    print(f"deltaextras from {Path(deltaextras.__file__).parent}; built in {time.perf_counter() - started:.0f}s")
    facts = qb.local_facts(table)
    footers = [s.footer[1] - s.footer[0] for s in facts.spans.values()]
    own = facts.node_bytes.get(qb.POINT, 0)
    print(
        f"{args.nodes} nodes x {args.hours * 12} readings, layout {args.layout}: {len(facts.files)} files, "
        f"{sum(s.size for s in facts.spans.values()) / 2**20:.2f} MiB, largest footer {max(footers) / 1024:.1f} KiB, "
        f"footers of node {qb.POINT}'s files {facts.point_footer / 1024:.1f} KiB, node {qb.POINT}'s own bytes {own}"
    )
    q = next(x for x in qb.queries() if x.name == "point")
    tmp = Path(tempfile.mkdtemp(prefix="seeds-", dir=work))
    failed = 0
    try:
        emu = qb.start_emulator("azurite", tmp)
        try:
            uri = f"{emu.root}/{uuid.uuid4().hex[:8]}/table"
            qb.upload(table, uri, emu.direct)
            for name in [r for r in args.readers.split(",") if r]:
                reader = qb.make_reader(name, emu, tmp, [], "no Spark here")
                try:
                    cell = qb.measure(reader, uri, q, emu.proxy, facts, args.runs)
                finally:
                    reader.close()
                limit = BUDGET_X * own + BUDGET_BYTES
                ok = cell.data_bytes <= limit and cell.requests <= BUDGET_REQUESTS and cell.rows == args.hours * 12
                failed += not ok
                print(
                    f"  {name:<10} rows {cell.rows}  requests {cell.requests:.0f} (log {cell.log_requests:.0f})  "
                    f"data {cell.data_bytes / 1024:.1f} KiB (footer {cell.footer_bytes / 1024:.1f}, index "
                    f"{cell.index_bytes / 1024:.1f}, chunks {cell.chunk_bytes / 1024:.1f}) = "
                    f"{cell.data_bytes / max(1, own):.1f}x own; {cell.seconds * 1000:.0f} ms; "
                    f"<= 3x own + 64 KiB ({limit / 1024:.1f} KiB) in <= 20 requests: {'PASS' if ok else 'FAIL'}",
                    flush=True,
                )
        finally:
            emu.proxy.stop()
            emu.service.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
