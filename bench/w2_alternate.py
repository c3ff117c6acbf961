"""W2's rewrite (one partition, 150 nodes, 3.04 M rows, 289 files: ``_workload.workload_for(1, 0)``) timed
in whole processes, two checkouts alternating, each run on a fresh copy of the table; prints each pair's
ratio and the medians. A checkout is named by what goes on ``PYTHONPATH`` for ``import deltaextras``: a
directory holding a ``deltaextras`` link to the checkout's ``shared/`` (an empty string: the interpreter's
own install; give both sides a directory, so that both search the same number of import paths).

Usage::

    python bench/w2_alternate.py --before OLD --after NEW --pairs 21
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _workload  # noqa: E402

CODE = (
    "import deltaextras, sys; r = deltaextras.rorder(sys.argv[1], sort_by='utc_time', max_workers=1); "
    "print(sum(p.files_added for p in r), 'file(s)', r[0].status)"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="PYTHONPATH of the first checkout ('' = installed)")
    ap.add_argument("--after", required=True, help="PYTHONPATH of the second checkout")
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--workdir", type=Path, default=HERE / ".work")
    args = ap.parse_args(argv)
    source = _workload.build(_workload.workload_for(1, 0), args.workdir)
    envs = {}
    for name, path in (("before", args.before), ("after", args.after)):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if path:
            env["PYTHONPATH"] = path
        envs[name] = env
    walls: dict[str, list[float]] = {"before": [], "after": []}
    scratch = Path(tempfile.mkdtemp(prefix="w2-alternate-"))
    try:
        for i in range(args.pairs):
            for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                table = scratch / name
                shutil.rmtree(table, ignore_errors=True)
                shutil.copytree(source, table)
                started = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-c", CODE, str(table)], env=envs[name], capture_output=True, text=True, check=True
                )
                walls[name].append(time.perf_counter() - started)
                print(f"{i} {name:<6} {walls[name][-1]:.2f}s {out.stdout.strip()}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    pairs = [a / b for a, b in zip(walls["after"], walls["before"], strict=True)]
    before, after = statistics.median(walls["before"]), statistics.median(walls["after"])
    print(
        f"median wall before {before:.2f}s, after {after:.2f}s; "
        f"after/before: median of pairs {statistics.median(pairs):.3f} ({min(pairs):.2f}-{max(pairs):.2f}), "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
