"""Where rorder's seconds go on one partition: ``RewriteResult.seconds`` per phase, in one process.

Builds (or reuses) the rorder bench's workload table, copies it (``--clustered``: as the clustered
bench's table ``CLUSTER BY (node_id)``, the same files unpartitioned), and rewrites partition 0 (the
clustered table's one value-range unit) with ``PartitionRewriter`` exactly as ``rorder`` does, then
prints the wall time, the CPU time, the peak RSS (``ru_maxrss`` of this process), the output size and
the seconds of each phase. Phases that run in helper threads overlap the main thread's (see
``bench/README.md``), so they do not add up to the wall time. Peak RSS is taken before the optional
whole call. A benchmark aid, not a test.

Usage::

    python bench/rorder_profile.py --scale 1 --scale 10
    python bench/rorder_profile.py --scale 10 --memory-budget 400    # MiB
    python bench/rorder_profile.py --scale 1 --whole                  # and one whole rorder() call
    python bench/rorder_profile.py --scale 1 --whole --clustered      # the table clustered by node_id
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import _workload

HERE = Path(__file__).resolve().parent
MB = 1 << 20


def _copy(source: Path, into: Path, clustered: bool) -> Path:
    """A copy of the workload table: as it is, or as the clustered bench's table clustered by node_id
    (its files copied too, not linked: both rewrites read files just written)."""
    if clustered:
        import clustered_bench

        return clustered_bench.clustered_copy(source, into, link=False)
    shutil.copytree(source, into)
    return into


def profile(
    scale: int, seed: int, workdir: Path, memory_budget: int | None, whole: bool, clustered: bool = False
) -> dict[str, float]:
    """Rewrite partition 0 (``clustered``: the clustered copy's one unit) of the scale's workload once; the
    figures. ``whole``: then also time one ``rorder`` call (load, plan, rewrite, commit) on a fresh copy."""
    started = time.perf_counter()
    import deltaextras

    imported = time.perf_counter() - started
    from deltaextras.core.snapshot import TableSnapshot
    from deltaextras.ops.rorder.options import RorderOptions
    from deltaextras.ops.rorder.rewrite.rewrite import PartitionRewriter

    source = _workload.build(_workload.workload_for(scale, seed), workdir / "tables")
    with tempfile.TemporaryDirectory(prefix="rorder-profile-", dir=workdir) as tmp:
        table = _copy(source, Path(tmp) / "table", clustered)
        snap = TableSnapshot.load(str(table))
        options = RorderOptions.build(sort_by="utc_time", memory_budget=memory_budget)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        partition = {} if clustered else {_workload.PARTITION_COLUMN: str(_workload.PARTITION_VALUE)}
        rw = PartitionRewriter(snap, snap.files, "node_id", options, partition)
        result = rw.run()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        call = None
        if whole:
            again = _copy(source, Path(tmp) / "again", clustered)
            wall0 = time.perf_counter()
            deltaextras.rorder(str(again), sort_by="utc_time", memory_budget=memory_budget, max_workers=1)
            call = time.perf_counter() - wall0
    figures = {
        "import": imported,
        "rorder_call": call if call is not None else float("nan"),
        "wall": wall,
        "cpu": cpu,
        "peak_rss_mb": peak,
        "output_mb": sum(o.size for o in result.outputs) / MB,
        "passes": result.passes,
        "spilled_mb": result.spilled_bytes / MB,
    }
    figures.update({f"s.{k}": v for k, v in result.seconds.items()})
    return figures


def main() -> None:
    """Parse the arguments, profile each scale, print one line per scale."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, action="append", help="workload scale (repeatable; default 1 and 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-budget", type=int, help="MiB (default: rorder's)")
    p.add_argument("--workdir", type=Path, default=HERE / ".work")
    p.add_argument("--whole", action="store_true", help="also time import deltaextras and one rorder() call")
    p.add_argument("--clustered", action="store_true", help="the table clustered by node_id, not partitioned")
    args = p.parse_args()
    budget = args.memory_budget * MB if args.memory_budget else None
    for scale in args.scale or [1, 10]:
        f = profile(scale, args.seed, args.workdir, budget, args.whole, args.clustered)
        phases = ", ".join(f"{k[2:]} {v:.2f}" for k, v in f.items() if k.startswith("s."))
        print(
            f"x{scale}{' clustered' if args.clustered else ''}: "
            f"wall {f['wall']:.2f} s, cpu {f['cpu']:.2f} s, peak RSS {f['peak_rss_mb']:.0f} MB, "
            f"output {f['output_mb']:.1f} MB, {f['passes']:.0f} passes, spilled {f['spilled_mb']:.0f} MB; "
            f"import deltaextras {f['import']:.2f} s, whole rorder() call {f['rorder_call']:.2f} s\n"
            f"    phases (s): {phases}",
            flush=True,
        )


if __name__ == "__main__":
    main()
