"""One unit of many small files on Azurite, rewritten: the hourly shape of the tiered layout, where a
unit's inputs are the appends of an hour and the runs a retention delete left deletion vectors on.

Builds an unpartitioned table of ``--files`` appended files (``--nodes`` sensors, three readings each)
in a private Azurite, deletes a seventh of the nodes with deletion vectors (a vector on every file),
checkpoints the log, then rewrites the table's one unit ``--rounds`` times in child processes, through
a counting proxy, without committing (the outputs are deleted after each round, so every round reads
the same table). With ``--before`` and ``--after`` (each what goes on ``PYTHONPATH`` for ``import
deltaextras``: a directory holding a ``deltaextras`` link to a checkout's ``shared/``, '' for the
installed one) the rounds alternate between two checkouts and the ratios after ÷ before are printed.

    python bench/store_rewrite.py --files 160                    # this checkout, 5 rounds, 2 minutes
    python bench/store_rewrite.py --files 160 --before OLD --after NEW --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
sys.path.insert(0, str(HERE))


def _build(uri: str, options: dict[str, str], files: int, nodes: int) -> None:
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from deltaextras import delete

    rng = np.random.default_rng(5)
    for f in range(files):
        node = rng.permutation(np.repeat(np.arange(nodes, dtype="int64"), 3))
        steps = f * 3 + rng.integers(0, 3, len(node))
        table = pa.table(
            {
                "node_id": node,
                "utc_time": pa.array(steps * 300_000_000).cast(pa.timestamp("us", tz="UTC")),
                "v1": rng.random(len(node)),
                "v2": rng.random(len(node)),
                "quality": pa.array(np.zeros(len(node), "int32")),
            }
        )
        config = {"delta.enableDeletionVectors": "true"} if f == 0 else None
        write_deltalake(uri, table, mode="append", storage_options=options, configuration=config)
    delete(uri, f"node_id < {max(1, nodes // 7)}", storage_options=options)
    DeltaTable(uri, storage_options=options).create_checkpoint()  # as the workers keep the log


def _child(uri: str, options: str) -> None:
    """One rewrite of the table's every file, not committed; one JSON line of figures."""
    from deltaextras.core.snapshot import TableSnapshot
    from deltaextras.ops.rorder.options import RorderOptions
    from deltaextras.ops.rorder.rewrite.rewrite import PartitionRewriter

    started = time.perf_counter()
    snap = TableSnapshot.load(uri, storage_options=json.loads(options))
    loaded = time.perf_counter()
    rw = PartitionRewriter(snap, snap.files, "node_id", RorderOptions.build(sort_by="utc_time"), {})
    result = rw.run()
    took = time.perf_counter() - loaded
    rw.discard()
    print(
        json.dumps(
            {
                "load_s": loaded - started,
                "rewrite_s": took,
                "rows": result.rows_out,
                "phases": {k: round(v, 3) for k, v in result.seconds.items()},
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=160)
    p.add_argument("--nodes", type=int, default=1500)
    p.add_argument("--rounds", type=int, default=5, help="rewrites per checkout")
    p.add_argument("--before", help="PYTHONPATH of the checkout to compare with")
    p.add_argument("--after", help="PYTHONPATH of the checkout measured (default: as this process imports)")
    p.add_argument("--child", nargs=2, metavar=("URI", "OPTIONS"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(*a.child)
        return 0

    from _proxy import CountingProxy
    from services import Azurite

    scratch = Path(tempfile.mkdtemp(prefix="store-rewrite-"))
    az = Azurite.start(scratch)
    proxy = CountingProxy("127.0.0.1", az.blob_port)
    try:
        az.create_container("rewrite")
        direct = dict(az.storage_options)
        uri = "az://rewrite/flat"
        started = time.perf_counter()
        _build(uri, direct, a.files, a.nodes)
        print(f"built {a.files} files of {a.nodes} nodes in {time.perf_counter() - started:.0f} s", flush=True)
        proxy.start()
        proxied = {**direct, "azure_storage_endpoint": f"http://127.0.0.1:{proxy.port}/devstoreaccount1"}
        sides = {"after": a.after}
        if a.before is not None:
            sides = {"before": a.before, "after": a.after}
        figures: dict[str, list[dict]] = {name: [] for name in sides}
        for i in range(a.rounds):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for name in order:
                env = dict(os.environ)
                if sides[name] is not None:
                    env["PYTHONPATH"] = sides[name]
                proxy.reset()
                cmd = [sys.executable, __file__, "--child", uri, json.dumps(proxied)]
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                counts = proxy.snapshot()
                row["requests"], row["data_requests"] = counts.requests, counts.data_requests
                figures[name].append(row)
                phases = ", ".join(f"{k} {v:.2f}" for k, v in row["phases"].items() if v >= 0.01)
                print(
                    f"round {i + 1} {name:6s} rewrite {row['rewrite_s']:.2f} s, {row['requests']} requests "
                    f"({row['data_requests']} data), {row['rows']:,} rows; {phases}",
                    flush=True,
                )
        for name, rows in figures.items():
            print(
                f"{name}: median rewrite {statistics.median(r['rewrite_s'] for r in rows):.2f} s, "
                f"requests {statistics.median(r['requests'] for r in rows):.0f}"
            )
        if "before" in figures:
            ratios = [x["rewrite_s"] / y["rewrite_s"] for x, y in zip(figures["after"], figures["before"], strict=True)]
            spread = f"{min(ratios):.2f}–{max(ratios):.2f}"
            print(f"after ÷ before: rewrite median of rounds {statistics.median(ratios):.2f} ({spread})")
        return 0
    finally:
        proxy.stop()
        az.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
