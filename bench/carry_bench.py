"""What carrying concurrent deletes costs ``rorder``: time and memory of the carry next to the rewrite
it saves, on the benchmark partition (``bench/_workload.py``: 3.04 M rows, 150 node_ids, 289 files at x1).

For each scenario a fresh copy of the table (deletion vectors enabled) is rewritten by
``rorder_single`` in its own process; a winner commits from the ``before_commit`` hook, so the commit
has to carry it. The child measures, in the same run:

* **rewrite**: the rewrite's seconds and peak RSS (``VmHWM``, reset just before it);
* **carry**: the seconds and the peak RSS above the process's resident size just before it
  (``VmHWM`` reset with ``/proc/self/clear_refs``) of locating the deleted rows and writing the vectors.

The figures are ratios to the rewrite of the same run. Scenarios: a deletion-vector DELETE of 100 rows
spread over the partition, of 1 % of the rows (30 k), and delta-rs's copy-on-write DELETE of a few
rows (each input it touched is gone: every row it held is located and deleted, the history file's 3 M too
when it is hit).

Usage::

    python bench/carry_bench.py [--scale 1] [--seed 0] [--workdir bench/.work]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "dv-100-rows": "dv:data_values > 109.85",  # data_values ~ normal(50, 15): 3.99 sigma, ~100 of 3 M rows
    "dv-1pct": "dv:data_values > 84.9",  # 2.33 sigma: 1 %
    "cow-few-rows": "cow:data_values > 116",  # 4.4 sigma, ~16 rows in as many files, the history file likely
}


def _hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _reset_hwm() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def child(table: str, winner: str) -> dict[str, Any]:
    """Rewrite ``table`` while ``winner`` commits first; returns the figures (run in its own process)."""
    from deltalake import DeltaTable

    from deltaextras.ops.delete.delete import delete
    from deltaextras.ops.rorder.commit import carry
    from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

    figures: dict[str, Any] = {}
    original = carry.Carrier._carry

    def timed(self: Any) -> None:  # instrumentation of the bench: time and memory of the carry alone
        _reset_hwm()
        base = _rss_kb()
        started = time.perf_counter()
        original(self)
        figures["carry_s"] = time.perf_counter() - started
        figures["carry_peak_mb"] = (_hwm_kb() - base) / 1024

    carry.Carrier._carry = timed  # type: ignore[method-assign]
    (message,) = plan_messages(table, sort_by="utc_time")
    kind, predicate = winner.split(":", 1)
    state = {"start": 0.0}

    def after_rewrite(_outputs: Any) -> None:
        figures["rewrite_s"] = time.perf_counter() - state["start"]
        figures["rewrite_peak_mb"] = _hwm_kb() / 1024

    def before_commit(version: int) -> None:
        if version != message["version"] + 1:
            return
        started = time.perf_counter()
        if kind == "dv":
            r = delete(table, predicate, mode="deletion_vectors")
            figures["deleted_rows"] = r.rows_deleted
        else:
            m = DeltaTable(table).delete(predicate)
            figures["deleted_rows"] = m.get("num_deleted_rows")
        figures["winner_s"] = time.perf_counter() - started

    _reset_hwm()
    state["start"] = time.perf_counter()
    report = rorder_single(message, hooks={"after_rewrite": after_rewrite, "before_commit": before_commit})
    figures["status"] = report.status
    figures["rows_carried"] = report.deleted_rows_carried
    figures["rows"] = report.rows
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=str(REPO / "bench" / ".work"))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    sys.path.insert(0, str(REPO / "bench"))
    from _workload import build, workload_for

    from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors

    source = build(workload_for(args.scale, args.seed), Path(args.workdir))
    print(f"workload: {source}")
    print(
        f"{'scenario':<14} {'rows deleted':>12} {'rows carried':>12} {'rewrite s':>9} {'carry s':>8} "
        f"{'time ratio':>10} {'rewrite peak MB':>15} {'carry peak MB':>13} {'memory ratio':>12}"
    )
    for name, winner in SCENARIOS.items():
        table = Path(args.workdir) / "carry-run"
        shutil.rmtree(table, ignore_errors=True)
        shutil.copytree(source, table)
        enable_deletion_vectors(str(table))
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(table), winner], capture_output=True, text=True, check=False
        )
        if out.returncode:
            print(f"{name}: failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        f = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{name:<14} {f.get('deleted_rows', 0):>12} {f['rows_carried']:>12} {f['rewrite_s']:>9.2f} "
            f"{f.get('carry_s', 0):>8.2f} {f.get('carry_s', 0) / f['rewrite_s']:>10.2f} "
            f"{f['rewrite_peak_mb']:>15.0f} {f.get('carry_peak_mb', 0):>13.0f} "
            f"{f.get('carry_peak_mb', 0) / f['rewrite_peak_mb']:>12.2f}   ({f['status']})"
        )
        shutil.rmtree(table, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
