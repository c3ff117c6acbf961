"""Benchmark the orchestrator's two steps on a wide table: planning, and sending the messages.

Workload: a local table of 100 ``node_id_range`` partitions × 100 small files (10,000 live files, one
commit), kept in ``bench/.work/plan-table`` between runs. Targets:

* planning the table (``plan_table``: log replay, the deltalake cross-check, layout check of every
  partition, one message per partition) takes at most 2 s;
* sending its 100 messages to an Azure queue on Azurite (``dispatch``'s batched, concurrent send
  through ``QueueSender``) takes at most 1 s.

Each figure is the median of ``--repeat`` runs (the first, cold run is printed too).

Usage::

    python bench/plan_bench.py                     # starts its own Azurite (AZURITE_BIN or node_modules)
    python bench/plan_bench.py --connection-string "UseDevelopmentStorage=true"
    python bench/plan_bench.py --partitions 20 --files 50 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PLAN_TARGET_S = 2.0
SEND_TARGET_S = 1.0


def build_table(root: Path, partitions: int, files: int) -> None:
    """``partitions`` × ``files`` two-row Parquet files, committed in one transaction."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    schema = pa.schema([("node_id", pa.int64()), ("seq", pa.int64()), ("node_id_range", pa.int64())])
    DeltaTable.create(str(root), schema=schema, partition_by=["node_id_range"])
    now = int(time.time() * 1000)
    adds = []
    for p in range(partitions):
        (root / f"node_id_range={p}").mkdir(parents=True, exist_ok=True)
        for i in range(files):
            rel = f"node_id_range={p}/part-{i:05d}-{uuid.uuid4()}-c000.snappy.parquet"
            ids = [p * 1000 + i % 37, p * 1000 + (i * 7) % 37]
            pq.write_table(pa.table({"node_id": ids, "seq": [2 * i, 2 * i + 1]}), root / rel)
            stats = {
                "numRecords": 2,
                "minValues": {"node_id": min(ids), "seq": 2 * i},
                "maxValues": {"node_id": max(ids), "seq": 2 * i + 1},
                "nullCount": {"node_id": 0, "seq": 0},
            }
            adds.append(
                AddAction(rel, (root / rel).stat().st_size, {"node_id_range": str(p)}, now, True, json.dumps(stats))
            )
    DeltaTable(str(root)).create_write_transaction(adds, mode="append", schema=schema, partition_by=["node_id_range"])


def ensure_table(partitions: int, files: int) -> Path:
    root = HERE / ".work" / f"plan-table-{partitions}x{files}"
    marker = root / ".complete"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.monotonic()
        print(f"building {partitions} x {files} files in {root} ...", file=sys.stderr)
        build_table(root, partitions, files)
        marker.write_text("ok")
        print(f"  built in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return root


def start_azurite(workdir: Path) -> Any:
    sys.path.insert(0, str(REPO / "tests"))
    from services import Azurite

    return Azurite.start(workdir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("Usage::")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--files", type=int, default=100, help="files per partition")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--connection-string", help="an Azure Storage / Azurite connection string (default: start Azurite)"
    )
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)

    from deltaextras.app.config import AppConfig
    from deltaextras.app.dispatch import DEFAULT_BATCH_SIZE, DEFAULT_CONCURRENCY, dispatch
    from deltaextras.app.edges.azure_queue import QueueSender, ensure_queue, queue_client
    from deltaextras.ops.plan import plan_table

    root = ensure_table(args.partitions, args.files)

    plan_times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        plan = plan_table(str(root))
        messages = [m.to_json() for m in plan.messages()]
        plan_times.append(time.perf_counter() - started)
    live = sum(len(p.files) for p in plan.partitions)
    assert len(messages) == args.partitions, len(messages)

    azurite = None
    workdir = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    connection = args.connection_string
    if not connection:
        azurite = start_azurite(workdir)
        connection = azurite.connection_string
    env = {"DELTAEXTRAS_STORAGE": connection, "DELTAEXTRAS_TABLES": json.dumps([str(root)])}
    send_times = []
    try:
        for _ in range(args.repeat):
            queue = f"plan-bench-{uuid.uuid4().hex[:12]}"
            client = queue_client(queue, env)
            ensure_queue(client)
            sender = QueueSender(client)
            stamps: list[tuple[float, float]] = []

            def timed_send(
                batch: Any, sender: QueueSender = sender, stamps: list[tuple[float, float]] = stamps
            ) -> None:
                t0 = time.perf_counter()
                sender.send_batch(batch)
                stamps.append((t0, time.perf_counter()))

            config = AppConfig.from_env({**env, "DELTAEXTRAS_QUEUE": queue})
            report = dispatch(config, timed_send)
            assert report.sent == args.partitions and not report.failed, report.line()
            send_times.append(max(e for _, e in stamps) - min(s for s, _ in stamps))
            assert client.get_queue_properties().approximate_message_count == args.partitions
            client.delete_queue()
    finally:
        if azurite is not None:
            azurite.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    figures = {
        "partitions": args.partitions,
        "live_files": live,
        "plan_seconds_median": round(statistics.median(plan_times), 3),
        "plan_seconds_first": round(plan_times[0], 3),
        "send_seconds_median": round(statistics.median(send_times), 3),
        "send_seconds_first": round(send_times[0], 3),
        "messages": args.partitions,
        "send_concurrency": DEFAULT_CONCURRENCY,
        "send_batch_size": DEFAULT_BATCH_SIZE,
        "plan_target_seconds": PLAN_TARGET_S,
        "send_target_seconds": SEND_TARGET_S,
        "cpus": os.cpu_count(),
    }
    ok_plan = figures["plan_seconds_median"] <= PLAN_TARGET_S
    ok_send = figures["send_seconds_median"] <= SEND_TARGET_S
    print(
        f"plan {args.partitions} partitions / {live} live files: median {figures['plan_seconds_median']:.3f}s "
        f"(first {figures['plan_seconds_first']:.3f}s) — target ≤ {PLAN_TARGET_S:.0f}s: {'OK' if ok_plan else 'MISSED'}"
    )
    print(
        f"send {args.partitions} messages to Azurite: median {figures['send_seconds_median']:.3f}s "
        f"(first {figures['send_seconds_first']:.3f}s) — target ≤ {SEND_TARGET_S:.0f}s: {'OK' if ok_send else 'MISSED'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0 if ok_plan and ok_send else 1


if __name__ == "__main__":
    raise SystemExit(main())
