"""Benchmark the orchestrator's two steps on a wide table: planning, and sending the messages.

Workload: a local table of 100 ``node_id_range`` partitions × 100 small files (10,000 live files, one
commit), kept in ``bench/.work/plan-table`` between runs. Targets:

* planning the table (``plan_messages``, the planner of every caller: one streaming pass over the log,
  layout check of every partition, one message per partition) takes at most 2 s;
* sending its 100 messages to an Azure queue on Azurite (``dispatch``'s batched, concurrent send
  through ``QueueSender``) takes at most 1 s.

Each figure is the median of ``--repeat`` runs (the first, cold run is printed too).

Scale mode (``--scale LIVE_FILES ...``): tables of 1,000 files per partition built by 250 appends (each
spread over every partition) with deltalake checkpoints every 100 versions, kept in ``--cache``. For each
size, in one run and each step in its own process (time of the step, peak RSS of the process): deltalake's
own snapshot load with its add actions against ``plan_messages`` (the planner of every caller: the public
functions, the orchestrator, the CLI, the Spark runner), and ``rorder_single`` of partition 0 (1,000
files) in a hard-linked copy of the table against the same partition alone in a fresh one-partition table.
Only partition 0's data files exist on disk; planning and a one-partition worker open no other.
Targets: plan ≤ 1.5× the time and ≤ 1.2× the peak RSS of deltalake's load from 300 k live files up; at
1 M live files also worker ≤ 2× the fresh table's time and RSS, and ≤ 512 MB (``--no-worker`` measures
planning only). The machine is shared: other processes' load shows in the times (the load average is
printed), less in RSS.

Usage::

    python bench/plan_bench.py                     # starts its own Azurite (AZURITE_BIN or node_modules)
    python bench/plan_bench.py --connection-string "UseDevelopmentStorage=true"
    python bench/plan_bench.py --partitions 20 --files 50 --json out.json
    python bench/plan_bench.py --scale 10000 100000 1000000 --cache /tmp/plan-bench-cache
    python bench/plan_bench.py --scale 300000 1000000 --scale-repeat 3 --no-worker
    python bench/plan_bench.py --scale 300000 --scale-repeat 3 --no-worker --deletion-vectors
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


# ------------------------------------------------------------------------------------ scale mode
SCALE_COMMITS = 250  # appends; deltalake writes a checkpoint every 100 versions (the default interval)
SCALE_TARGET_PLAN_TIME = 1.5  # × deltalake's own snapshot load
SCALE_TARGET_PLAN_RSS = 1.2
SCALE_TARGET_FROM = 300_000  # live files from which the plan targets apply
SCALE_TARGET_WORKER = 2.0  # × the same partition alone in a fresh table
SCALE_TARGET_WORKER_BYTES = 512 * 2**20


def build_scale_table(root: Path, partitions: int, files: int, commits: int = SCALE_COMMITS) -> None:
    """``partitions`` × ``files`` two-row files added by ``commits`` appends, each spread over every
    partition as a streaming writer's are; checkpoints at deltalake's interval (100 versions). Only the
    files of partition 0 (the one the worker rewrites) are written to storage; the log names the rest,
    which neither planning nor a one-partition worker opens."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    schema = pa.schema([("node_id", pa.int64()), ("seq", pa.int64()), ("node_id_range", pa.int64())])
    DeltaTable.create(str(root), schema=schema, partition_by=["node_id_range"])
    (root / "node_id_range=0").mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    total = partitions * files
    per_commit = -(-total // commits)
    n = 0
    version = 0
    while n < total:
        version += 1
        lines = [
            json.dumps(
                {
                    "commitInfo": {
                        "timestamp": now,
                        "operation": "WRITE",
                        "operationParameters": {"mode": "Append"},
                        "isBlindAppend": True,
                        "engineInfo": "plan_bench",
                    }
                }
            )
        ]
        for j in range(n, min(total, n + per_commit)):
            p, i = j % partitions, j // partitions
            rel = f"node_id_range={p}/part-{i:05d}-{uuid.uuid4()}-c000.snappy.parquet"
            ids = [p * 1000 + i % 37, p * 1000 + (i * 7) % 37]
            size = 900
            if p == 0:
                pq.write_table(pa.table({"node_id": ids, "seq": [2 * i, 2 * i + 1]}), root / rel)
                size = (root / rel).stat().st_size
            stats = {
                "numRecords": 2,
                "minValues": {"node_id": min(ids), "seq": 2 * i},
                "maxValues": {"node_id": max(ids), "seq": 2 * i + 1},
                "nullCount": {"node_id": 0, "seq": 0},
            }
            add = {
                "path": rel,
                "partitionValues": {"node_id_range": str(p)},
                "size": size,
                "modificationTime": now,
                "dataChange": True,
                "stats": json.dumps(stats, separators=(",", ":")),
            }
            lines.append(json.dumps({"add": add}, separators=(",", ":")))
        n = min(total, n + per_commit)
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
        if version % 100 == 0:
            DeltaTable(str(root), version=version).create_checkpoint()


def ensure_scale_table(partitions: int, files: int, cache: Path) -> Path:
    root = cache / f"scale-{partitions}x{files}"
    marker = root / ".complete"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.monotonic()
        print(f"building {partitions} x {files} files in {root} ...", file=sys.stderr)
        build_scale_table(root, partitions, files)
        marker.write_text("ok")
        print(f"  built in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return root


def ensure_deletion_vectors(root: Path) -> Path:
    """A hard-linked copy of a scale table with deletion vectors enabled (protocol and property; no file
    carries one): planning then reads the files' statistics, where record counts weigh deleted rows."""
    dest = root.parent / f"{root.name}-dv"
    marker = dest / ".complete"
    if not marker.exists():
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["cp", "-al", str(root), str(dest)], check=True)
        (dest / ".complete").unlink()
        from deltaextras import enable_deletion_vectors

        enable_deletion_vectors(str(dest))
        marker.write_text("ok")
    return dest


def _child(kind: str, path: str) -> None:
    """One measured step in its own process; prints its own timing as JSON."""
    started = time.perf_counter()
    if kind == "deltalake":
        import pyarrow as pa
        from deltalake import DeltaTable

        dt = DeltaTable(path)
        out = {"files": pa.table(dt.get_add_actions(flatten=True)).num_rows}
    elif kind == "plan":
        from deltaextras import plan_messages

        out = {"messages": len([json.dumps(m) for m in plan_messages(path)])}
    elif kind == "plan-full":
        from deltaextras import plan_table

        plan = plan_table(path)  # every partition's live files held in memory
        out = {"messages": len([m.to_json() for m in plan.messages()]), "files": sum(len(p.files) for p in plan.units)}
    elif kind == "worker":
        from deltaextras.ops.rorder.rorder import rorder_single

        report = rorder_single({"path": path, "partition_value": "0"})
        assert report.status == "committed", report.to_dict()
        out = {"files": report.files_removed}
    else:
        raise SystemExit(f"unknown step {kind}")
    out["seconds"] = round(time.perf_counter() - started, 3)
    out["cpu_seconds"] = round(time.process_time(), 3)
    print(json.dumps(out))


def _measured(kind: str, path: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from _measure import run_measured

    run = run_measured([sys.executable, str(Path(__file__).resolve()), "--child", kind, str(path)], timeout=1800)
    if not run.ok:
        raise SystemExit(f"{kind} on {path} failed: {run.stderr_tail}")
    out = json.loads(run.stdout_tail.strip().splitlines()[-1])
    out["process_seconds"] = round(run.wall_s, 3)
    out["peak_rss_mb"] = round(run.peak_rss_bytes / 2**20, 1)
    return out


def _linked_copy(root: Path, into: Path) -> Path:
    """A copy of a table made of hard links (the worker commits into it; the cached table stays as built)."""
    dest = into / root.name
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(root), str(dest)], check=True)
    return dest


def _scale_runs(args: argparse.Namespace, root: Path, fresh: Path, cache: Path) -> dict[str, list[dict[str, Any]]]:
    """Every step ``--scale-repeat`` times, the contenders interleaved so load on the machine hits all alike."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for n in range(args.scale_repeat):
        runs.setdefault("deltalake", []).append(_measured("deltalake", root))
        runs.setdefault("plan", []).append(_measured("plan", root))
        if args.full_plan:
            runs.setdefault("plan_full", []).append(_measured("plan-full", root))
        if args.no_worker:
            continue
        work = Path(tempfile.mkdtemp(prefix="plan-bench-", dir=cache))
        try:
            runs.setdefault("worker", []).append(_measured("worker", _linked_copy(root, work / f"big{n}")))
            runs.setdefault("worker_fresh", []).append(_measured("worker", _linked_copy(fresh, work / f"fresh{n}")))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return runs


def _scale_row(row: dict[str, Any], args: argparse.Namespace) -> bool:
    """Print one table size's figures and ratios; whether its targets are met."""
    d, p = row["deltalake"], row["plan"]
    t_ratio, m_ratio = p["seconds"] / d["seconds"], p["peak_rss_mb"] / d["peak_rss_mb"]
    cpu_ratio = p["cpu_seconds"] / d["cpu_seconds"]
    row["ratios"] = {"plan_time": round(t_ratio, 2), "plan_rss": round(m_ratio, 2), "plan_cpu": round(cpu_ratio, 2)}
    print(
        f"{row['live_files']:>9,} live files | deltalake load {d['seconds']:6.2f}s {d['peak_rss_mb']:7.0f} MB | "
        f"plan_messages {p['seconds']:6.2f}s {p['peak_rss_mb']:7.0f} MB ({t_ratio:.2f}x time, {m_ratio:.2f}x RSS)"
        + (
            f" | plan_table {row['plan_full']['seconds']:.2f}s {row['plan_full']['peak_rss_mb']:.0f} MB"
            if args.full_plan
            else ""
        )
    )
    print(
        f"{'':>9}            | CPU seconds: deltalake {d['cpu_seconds']:.2f}, plan_messages {p['cpu_seconds']:.2f}"
        f" ({cpu_ratio:.2f}x)"
    )
    met = True
    if row["live_files"] >= SCALE_TARGET_FROM:
        met = t_ratio <= SCALE_TARGET_PLAN_TIME and m_ratio <= SCALE_TARGET_PLAN_RSS
        print(
            f"{'':>9}            | plan targets (≤ {SCALE_TARGET_PLAN_TIME}x time, ≤ {SCALE_TARGET_PLAN_RSS}x RSS of "
            f"deltalake's load): {'OK' if met else 'MISSED'}"
        )
    if "worker" not in row:
        return met
    w, f = row["worker"], row["worker_fresh"]
    wt_ratio, wm_ratio = w["seconds"] / f["seconds"], w["peak_rss_mb"] / f["peak_rss_mb"]
    row["ratios"].update(worker_time=round(wt_ratio, 2), worker_rss=round(wm_ratio, 2))
    print(
        f"{'':>9}            | worker, one 1,000-file partition {w['seconds']:6.2f}s {w['peak_rss_mb']:5.0f} MB"
        f" | alone in a fresh table {f['seconds']:6.2f}s {f['peak_rss_mb']:5.0f} MB"
        f" ({wt_ratio:.2f}x time, {wm_ratio:.2f}x RSS; CPU {w['cpu_seconds']:.2f}s vs {f['cpu_seconds']:.2f}s)"
    )
    if row["live_files"] >= 1_000_000:
        worker_met = (
            wt_ratio <= SCALE_TARGET_WORKER
            and wm_ratio <= SCALE_TARGET_WORKER
            and w["peak_rss_mb"] * 2**20 <= SCALE_TARGET_WORKER_BYTES
        )
        print(
            f"{'':>9}            | worker targets at 1 M (≤ {SCALE_TARGET_WORKER}x, ≤ 512 MB): "
            f"{'OK' if worker_met else 'MISSED'}"
        )
        met = met and worker_met
    return met


def scale_main(args: argparse.Namespace) -> int:
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    fresh = ensure_scale_table(1, 1000, cache)
    rows = []
    ok = True
    for live in args.scale_files:
        partitions = max(1, live // 1000)
        root = ensure_scale_table(partitions, 1000, cache)
        if args.deletion_vectors:
            root = ensure_deletion_vectors(root)
        row: dict[str, Any] = {"live_files": partitions * 1000, "deletion_vectors": args.deletion_vectors}
        runs = _scale_runs(args, root, fresh, cache)
        for name, measured in runs.items():
            row[name] = {k: statistics.median(m[k] for m in measured) for k in measured[0]}
        ok = _scale_row(row, args) and ok
        rows.append(row)
    print(
        f"(medians of {args.scale_repeat} interleaved run(s); times: the step inside its process, wall clock, which "
        f"includes waiting for a CPU; CPU seconds: the whole process; RSS: the process's peak; {os.cpu_count()} CPUs, "
        "shared — "
        f"load average {os.getloadavg()[0]:.1f} at the end)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if ok else 1


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
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from services import Azurite

    return Azurite.start(workdir)


def _send_times(args: argparse.Namespace, root: Path) -> list[float]:
    """Seconds of each of ``--repeat`` dispatches of the table's messages to a fresh queue on Azurite."""
    from deltaextras.app.config import AppConfig
    from deltaextras.app.dispatch import dispatch
    from deltaextras.app.edges.azure_queue import QueueSender, ensure_queue, queue_client

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
    return send_times


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
    parser.add_argument(
        "--scale",
        type=int,
        nargs="+",
        dest="scale_files",
        metavar="LIVE_FILES",
        help="scale mode: tables of these many live files (1,000 per partition), e.g. --scale 10000 100000 1000000",
    )
    parser.add_argument("--cache", default=str(HERE / ".work"), help="scale mode: where the built tables are kept")
    parser.add_argument("--scale-repeat", type=int, default=1, help="scale mode: runs per step (medians printed)")
    parser.add_argument(
        "--full-plan", action="store_true", help="scale mode: also measure plan_table (every unit's files held)"
    )
    parser.add_argument("--no-worker", action="store_true", help="scale mode: measure planning only")
    parser.add_argument(
        "--deletion-vectors", action="store_true", help="scale mode: the tables with deletion vectors enabled"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if args.scale_files:
        return scale_main(args)

    from deltaextras import plan_messages
    from deltaextras.app.dispatch import DEFAULT_BATCH_SIZE, DEFAULT_CONCURRENCY

    root = ensure_table(args.partitions, args.files)

    plan_times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        messages = [json.dumps(m) for m in plan_messages(str(root))]
        plan_times.append(time.perf_counter() - started)
    live = args.partitions * args.files
    assert len(messages) == args.partitions, len(messages)

    send_times = _send_times(args, root)

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
