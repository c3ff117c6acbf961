"""A long log: one worker delivery on Azurite as ``_delta_log/`` grows.

A table appended every five minutes and rewritten every hour adds about 650 log entries a day per table,
and ``delta.logRetentionDuration`` keeps 30 days of them. Workload: a 15-partition table on Azurite
(1,500 nodes, one file per partition per append), ``--entries`` log entries before a checkpoint (commits
that hold only ``commitInfo``), then ``--repeat`` rounds of one append and ``rorder_single`` of one
partition (a worker's delivery). Printed per log length: the median delivery seconds, and the ratio of the
longest log's median to the shortest's.

Target: a delivery's time flat in the log's length (ratio ≤ 1.5): a reader of the latest version lists the
log from the checkpoint ``_last_checkpoint`` names.

Usage::

    python bench/log_bench.py                          # 100, 3,000 and 10,000 entries, 10 deliveries each
    python bench/log_bench.py --entries 100 3000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
TARGET_RATIO = 1.5
NODES = 1500


def _append(uri: str, options: dict[str, str], step: int) -> None:
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    n = np.arange(NODES)
    rows = pa.table(
        {
            "node_id": n.astype("int64"),
            "node_id_range": (n // 100).astype("int64"),
            "utc_time": pa.array(np.full(NODES, step * 300_000_000, dtype="int64")).cast(pa.timestamp("us", tz="UTC")),
            "value": np.random.default_rng(step).random(NODES),
        }
    )
    write_deltalake(uri, rows, partition_by=["node_id_range"], mode="append", storage_options=options)


def deliveries(uri: str, options: dict[str, str], entries: int, repeat: int) -> list[float]:
    """Build the table with ``entries`` log entries before its checkpoint; time ``repeat`` deliveries."""
    from deltalake import DeltaTable

    from deltaextras import rorder_single
    from deltaextras.core.storage import TableStorage

    _append(uri, options, 0)
    storage = TableStorage(uri, options)
    info = json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}).encode()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda v: storage.put(f"_delta_log/{v:020d}.json", info), range(1, entries)))
    DeltaTable(uri, storage_options=options).create_checkpoint()
    seconds = []
    for step in range(1, repeat + 1):
        _append(uri, options, step)
        started = time.perf_counter()
        rorder_single({"path": uri, "partition_value": step % 15, "sort_by": "utc_time"}, storage_options=options)
        seconds.append(time.perf_counter() - started)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[100, 3000, 10000], help="log lengths")
    parser.add_argument("--repeat", type=int, default=10, help="deliveries per log length")
    args = parser.parse_args(argv)
    from services import Azurite

    medians: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as work:
        az: Any = Azurite.start(Path(work) / "azurite")
        try:
            az.create_container("logbench")
            for entries in args.entries:
                seconds = deliveries(f"az://logbench/t{entries}", dict(az.storage_options), entries, args.repeat)
                medians[entries] = statistics.median(seconds)
                print(
                    f"{entries:>7,} log entries: delivery median {medians[entries]:.3f} s "
                    f"(each: {' '.join(f'{x:.2f}' for x in seconds)})",
                    flush=True,
                )
        finally:
            az.stop()
    first, last = min(medians), max(medians)
    ratio = medians[last] / medians[first]
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    print(f"{verdict}  delivery at {last:,} entries ÷ at {first:,}: {ratio:.2f} (target ≤ {TARGET_RATIO})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
