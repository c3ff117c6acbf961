"""Benchmark ``deltaextras.ops.delete.delete`` (deletion vectors) against delta-rs ``DeltaTable.delete`` (which
rewrites files, even on tables that enable deletion vectors).

One script, one run: both contenders run on fresh copies of the same table, each as a whole child
process, measured in the same run on the same machine; the figures printed are ratios of those.

* ``one-row``: delete 1 row from a single-file table of 10 M rows (``--rows``) whose rows carry 20
  float channels (``--channels``): one ~1.8 GB file, the width at which delta-rs's peak reproduces the
  1.3 GB it was measured to need for deleting one row out of 10 M (the reference for the targets);
* ``one-row-narrow``: the same delete on the same rows without the channels (one ~180 MB file);
* ``spread``: delete 1 % of the rows, spread over every one of 100 files (``--files``; no channels).

delta-rs rewrites the file that holds the row and its peak grows with that file (~290 MB for a 180 MB
file, ~1.0 GB for 1.3 GB, ~1.3 GB for 1.8 GB); ours reads the predicate's column from the row
groups statistics leave in and writes a vector, so it stays flat (~110 MiB, of which ~85 MiB is the
interpreter with pyarrow and numpy imported). The targets are judged on ``one-row``.

Wall time is reported twice: the delete call inside the child (what a caller waits for once the
libraries are imported) and the whole child process (interpreter start and imports included). Memory
is reported twice too: the child's peak RSS (kernel high-water mark, see ``_measure.py``; imports
included), and what the call adds above the RSS it started from (``VmHWM`` after minus ``VmRSS``
before).

The table is sensor readings: ``id`` (sequential), ``node_id`` (100 nodes), ``utc_time``, ``value``,
``quality``, two text columns (``sensor`` path, ``status``) and ``ch00``… (float channels, random),
written by delta-rs with ``delta.enableDeletionVectors=true``.

Usage::

    python bench/delete_bench.py                      # 10 M rows, 20 channels, 100 files, 3 paired rounds
    python bench/delete_bench.py --quick              # 1 M rows, 20 files, 1 round
    python bench/delete_bench.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CONTENDERS = ("deltars", "ours")
LABELS = {"deltars": "delta-rs DeltaTable.delete", "ours": "deltaextras delete"}
TARGET_OP_SPEEDUP = 30.0
TARGET_RSS_RATIO = 10.0


# ----------------------------------------------------------------------------------------- children
def child_make(path: str, rows: int, files: int, channels: int) -> None:
    """Write the table: ``files`` files of ``rows / files`` rows each, deletion vectors enabled."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    per_file = rows // files
    batch = min(per_file, 1_000_000)
    t0 = np.datetime64("2024-01-01T00:00:00", "us")
    names = pa.array([f"plant-{n % 7}/line-{n % 13:02d}/node-{n:04d}" for n in range(100)])
    statuses = pa.array(["ok", "calibrating", "sensor fault: reading held"])

    def batches(start: int) -> Any:
        for lo in range(start, start + per_file, batch):
            n = min(batch, start + per_file - lo)
            ids = np.arange(lo, lo + n, dtype=np.int64)
            rng = np.random.default_rng(lo)
            chans = {f"ch{k:02d}": rng.normal(0.0, 1.0, n) for k in range(channels)}
            yield pa.record_batch(
                {
                    "id": ids,
                    "node_id": ids % 100,
                    "utc_time": pa.array(t0 + ids * 1_000_000, pa.timestamp("us", tz="UTC")),
                    "value": rng.normal(20.0, 5.0, n),
                    "quality": (ids % 3).astype(np.int32),
                    "sensor": names.take(pa.array(ids % 100)),
                    "status": statuses.take(pa.array(np.where(ids % 97 == 0, 2, ids % 2))),
                    **chans,
                }
            )

    schema = next(batches(0)).schema
    for f in range(files):
        reader = pa.RecordBatchReader.from_batches(schema, batches(f * per_file))
        write_deltalake(
            path,
            reader,
            mode="append",
            target_file_size=1 << 40,
            configuration={"delta.enableDeletionVectors": "true"} if f == 0 else None,
        )


def _vm(field: str) -> int:
    """A ``VmRSS`` / ``VmHWM`` figure of this process, in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def child_delete(contender: str, path: str, predicate: str) -> None:
    """Run one contender's delete; print its in-process time and memory above the pre-call RSS as JSON."""
    if contender == "deltars":
        from deltalake import DeltaTable

        before = _vm("VmRSS")
        started = time.perf_counter()
        metrics = DeltaTable(path).delete(predicate)
        seconds = time.perf_counter() - started
        deleted = int(metrics.get("num_deleted_rows", -1))
    else:
        from deltaextras.ops.delete.delete import delete

        before = _vm("VmRSS")
        started = time.perf_counter()
        report = delete(path, predicate)
        seconds = time.perf_counter() - started
        deleted = report.rows_deleted
    print(json.dumps({"op_seconds": seconds, "deleted": deleted, "op_rss_bytes": max(0, _vm("VmHWM") - before)}))


def child_count(path: str) -> None:
    """Live rows, deletion vectors applied."""
    import pyarrow as pa
    from deltalake import DeltaTable

    print(sum(b.num_rows for b in pa.RecordBatchReader.from_stream(DeltaTable(path).scan(columns=["id"]))))


# ------------------------------------------------------------------------------------------- parent
def _run(cmd: list[str], timeout: float = 3600.0) -> Any:
    import _measure

    proc = _measure.run_measured([sys.executable, *cmd], timeout=timeout)
    if not proc.ok:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {proc.stderr_tail[-800:]}")
    return proc


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def scenario(
    name: str, workdir: Path, rows: int, files: int, channels: int, predicate: str, expect: int, rounds: int
) -> dict[str, Any]:
    """Build one table, then alternate the contenders on fresh copies ``rounds`` times."""
    source = workdir / f"{name}-source"
    if source.exists():
        shutil.rmtree(source)
    started = time.perf_counter()
    _run([__file__, "--child-make", str(source), str(rows), str(files), str(channels)])
    print(
        f"[{name}] built {rows:,} rows ({channels} channels) in {files} file(s), "
        f"{_dir_bytes(source) / 2**20:.0f} MiB, "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    for rnd in range(rounds):
        order = CONTENDERS if rnd % 2 == 0 else tuple(reversed(CONTENDERS))
        for contender in order:
            table = workdir / f"{name}-{contender}"
            if table.exists():
                shutil.rmtree(table)
            shutil.copytree(source, table)
            proc = _run([__file__, "--child-delete", contender, str(table), predicate])
            inner = json.loads(proc.stdout_tail.strip().splitlines()[-1])
            live = int(_run([__file__, "--child-count", str(table)]).stdout_tail.strip().splitlines()[-1])
            ok = inner["deleted"] == expect and live == rows - expect
            rec = {
                "round": rnd,
                "op_s": inner["op_seconds"],
                "process_s": proc.wall_s,
                "peak_rss_mb": proc.peak_rss_bytes / 2**20,
                "op_rss_mb": inner["op_rss_bytes"] / 2**20,
                "deleted": inner["deleted"],
                "live_rows_after": live,
                "content_ok": ok,
                "bytes_written_mb": (_dir_bytes(table) - _dir_bytes(source)) / 2**20,
            }
            runs[contender].append(rec)
            print(
                f"[{name}] round {rnd + 1} {LABELS[contender]:<28} op {rec['op_s']:.3f}s  process "
                f"{rec['process_s']:.2f}s  peak RSS {rec['peak_rss_mb']:.0f} MiB (call +{rec['op_rss_mb']:.0f})  "
                f"+{rec['bytes_written_mb']:.1f} MiB on disk  {'ok' if ok else 'WRONG CONTENT'}",
                flush=True,
            )
            shutil.rmtree(table)
    table_mb = _dir_bytes(source) / 2**20
    shutil.rmtree(source)
    med = {
        c: {k: statistics.median(r[k] for r in runs[c]) for k in ("op_s", "process_s", "peak_rss_mb", "op_rss_mb")}
        for c in CONTENDERS
    }
    ratios = {
        "op_speedup": med["deltars"]["op_s"] / med["ours"]["op_s"],
        "process_speedup": med["deltars"]["process_s"] / med["ours"]["process_s"],
        "peak_rss_ratio": med["deltars"]["peak_rss_mb"] / med["ours"]["peak_rss_mb"],
        "op_rss_ratio": med["deltars"]["op_rss_mb"] / max(med["ours"]["op_rss_mb"], 1.0),
    }
    return {
        "scenario": name,
        "rows": rows,
        "files": files,
        "channels": channels,
        "table_mb": table_mb,
        "predicate": predicate,
        "deleted": expect,
        "runs": runs,
        "medians": med,
        "ratios": ratios,
        "content_ok": all(r["content_ok"] for c in CONTENDERS for r in runs[c]),
    }


def main(argv: list[str]) -> int:
    """Parse arguments, run both scenarios (or a child's job), print the summary."""
    if argv and argv[0] == "--child-make":
        child_make(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    if argv and argv[0] == "--child-delete":
        child_delete(argv[1], argv[2], argv[3])
        return 0
    if argv and argv[0] == "--child-count":
        child_count(argv[1])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100, help="files of the spread scenario")
    parser.add_argument("--channels", type=int, default=20, help="float channels per row in one-row")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 M rows, 20 files, 1 round")
    parser.add_argument("--workdir", help="where the tables go (default: a temporary directory)")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.files, args.rounds = 1_000_000, 20, 1
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="delete-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPU(s), load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} at start",
        flush=True,
    )
    results = [
        scenario("one-row", workdir, args.rows, 1, args.channels, f"id = {args.rows // 2 + 1}", 1, args.rounds),
        scenario("one-row-narrow", workdir, args.rows, 1, 0, f"id = {args.rows // 2 + 1}", 1, args.rounds),
        scenario("spread", workdir, args.rows, args.files, 0, "node_id = 7", args.rows // 100, args.rounds),
    ]
    load_end = os.getloadavg()
    print()
    print(f"load average at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    for res in results:
        m, r = res["medians"], res["ratios"]
        print(
            f"== {res['scenario']}: delete {res['deleted']:,} of {res['rows']:,} rows in {res['files']} file(s), "
            f"{res['table_mb']:,.0f} MiB ({res['predicate']}); medians of {args.rounds} round(s); "
            f"content {'ok' if res['content_ok'] else 'WRONG'}"
        )
        for c in CONTENDERS:
            print(
                f"   {LABELS[c]:<28} op {m[c]['op_s']:8.3f}s   process {m[c]['process_s']:7.2f}s   "
                f"peak RSS {m[c]['peak_rss_mb']:5.0f} MiB (the call: +{m[c]['op_rss_mb']:.0f} MiB)"
            )
        print(
            f"   ours vs delta-rs: {r['op_speedup']:.1f}x faster (delete call), {r['process_speedup']:.1f}x "
            f"(whole process); {r['peak_rss_ratio']:.1f}x less peak RSS (process), {r['op_rss_ratio']:.1f}x less "
            "memory added by the call"
        )
    one = results[0]["ratios"]
    print(
        f"targets for one-row: >= {TARGET_OP_SPEEDUP:.0f}x faster (delete call): "
        f"{'met' if one['op_speedup'] >= TARGET_OP_SPEEDUP else 'NOT met'}; >= {TARGET_RSS_RATIO:.0f}x less memory: "
        f"{'met' if one['peak_rss_ratio'] >= TARGET_RSS_RATIO else 'NOT met'} for the process peak, "
        f"{'met' if one['op_rss_ratio'] >= TARGET_RSS_RATIO else 'NOT met'} for the memory the call adds"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"load_start": load, "load_end": load_end, "results": results}, indent=2))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(res["content_ok"] for res in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
