"""Benchmark a clustered table: the W2 data (bench/_workload.py, 150 nodes) as a table ``CLUSTER BY
(node_id)`` instead of a ``node_id_range`` partition, rewritten by value-range units.

Three parts:

* **rorder wall vs the copy floor**, in paired rounds (``--repeat``, default 6): each round runs, in
  the next of the six orders of the three, the copy floor (every plain copy of rorder_bench's
  ``_run_contender.py copy``, the fastest of them), ``rorder`` of a fresh clustered copy (no ``by=``:
  the clustering column) and ``rorder`` of a fresh copy of the partitioned table, each in its own
  process (imports included), with its CPU seconds. Both rewrites' content is checked against the
  input's digest. Ratios are medians of per-round ratios;
* **point-query bytes** for ``node_id = 42`` through the query bench's counting proxy
  (``query_bench.start_emulator``, ``measure``): our layout (the last round's clustered table) and, with
  ``--spark``, the same clustered table after Spark's ``OPTIMIZE`` (the tests' local Spark + Delta) are
  uploaded to Azurite and moto S3, and each reader (deltalake ``QueryBuilder``, Sail; ``--readers``)
  runs the query ``--runs`` times; the medians of the ``.parquet`` bytes fetched (footers included)
  are set against the node's own bytes and against the same reader on Spark's layout. The bytes a
  statistics-pruning reader would fetch, computed from the footers on local disk (``point_bytes``),
  are printed as a cross-check;
* **planning at scale** (``--plan-files N ...``): an unpartitioned table of N live files (one commit,
  a deltalake checkpoint, no data files), planned into value-range units by ``plan_table`` against
  deltalake's own snapshot load with its add actions, each in its own process (time, peak RSS).

Usage::

    python bench/clustered_bench.py --spark            # W2 scale 1 (3.04 M rows, 289 files)
    python bench/clustered_bench.py --quick --spark --repeat 1
    python bench/clustered_bench.py --skip-point       # the wall rounds only
    python bench/clustered_bench.py --plan-files 100000 300000 1000000 --skip-rewrite
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _measure
import _workload
import query_bench
import rorder_bench

WORK = Path(__file__).resolve().parent / ".work"
NODE = query_bench.POINT
SORT_BY = "utc_time"
CONTENDER = str(Path(__file__).resolve().parent / "_run_contender.py")


def _source_stats(partitioned: Path) -> dict[str, str]:
    """The statistics the workload's log holds for each data file, by file name."""
    out: dict[str, str] = {}
    for commit in sorted((partitioned / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add") if line.strip() else None
            if add and add.get("stats"):
                out[add["path"].rsplit("/", 1)[-1]] = add["stats"]
    return out


def clustered_copy(partitioned: Path, into: Path, *, link: bool = True) -> Path:
    """The workload's partition as an unpartitioned table clustered by node_id: the same data files
    (hard links; copies when not ``link``) and statistics (taken from the workload's log; a file's own
    when the log has none), one commit with the clustering protocol and domain metadata."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    known = _source_stats(partitioned)
    adds = []
    for f in sorted((partitioned / f"{_workload.PARTITION_COLUMN}={_workload.PARTITION_VALUE}").glob("*.parquet")):
        if link:
            (into / f.name).hardlink_to(f)
        else:
            shutil.copyfile(f, into / f.name)
        stats = known.get(f.name) or json.dumps(_workload._stats(f), separators=(",", ":"))
        adds.append(
            {
                "add": {
                    "path": f.name,
                    "partitionValues": {},
                    "size": f.stat().st_size,
                    "modificationTime": int(time.time() * 1000),
                    "dataChange": True,
                    "stats": stats,
                }
            }
        )
    schema = {
        "type": "struct",
        "fields": [
            {"name": "node_id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "utc_time", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "data_values", "type": "double", "nullable": True, "metadata": {}},
            {"name": "quality", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
    lines = [
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["domainMetadata", "clustering"],
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": int(time.time() * 1000),
            }
        },
        {
            "domainMetadata": {
                "domain": "delta.clustering",
                "configuration": json.dumps({"clusteringColumns": [["node_id"]], "domainName": "delta.clustering"}),
                "removed": False,
            }
        },
        *adds,
    ]
    log = into / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return into


def point_bytes(table: Path, value: int) -> tuple[int, int, int]:
    """(bytes a statistics-pruning reader fetches for ``node_id = value``: footers plus matching row
    groups; the node's own bytes: the column chunks of row groups holding only that value; files opened)."""
    from deltaextras.core.snapshot import TableSnapshot

    fetched = own = opened = 0
    for f in TableSnapshot.load(str(table), for_writing=False).files:
        st = f.stats
        if not st["minValues"]["node_id"] <= value <= st["maxValues"]["node_id"]:
            continue
        opened += 1
        pf = pq.ParquetFile(table / f.key)
        md = pf.metadata
        fetched += md.serialized_size + 8
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            s = rg.column(0).statistics
            if s is not None and s.min <= value <= s.max:
                size = sum(rg.column(j).total_compressed_size for j in range(rg.num_columns))
                fetched += size
                if s.min == s.max == value:
                    own += size
    return fetched, own, opened


# --------------------------------------------------------------------------------------------- wall rounds
def linked_copy(source: Path, into: Path) -> Path:
    """A copy of a table whose data files are hard links (rorder never changes a file it reads) and whose
    log is copied."""
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(source, into, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(source / "_delta_log", into / "_delta_log")
    return into


def measured(cmd: list[str]) -> tuple[_measure.ProcessRun, float]:
    """``_measure.run_measured`` of ``cmd``, and the CPU seconds (user + system) of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = _measure.run_measured(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return run, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def copy_floor(files: list[str], tmp: Path, rnd: int) -> tuple[float, float, str]:
    """Every plain copy of rorder_bench once (their order rotating by round), each in its own process; the
    fastest one's wall and CPU seconds and its name."""
    listing = tmp / "files.json"
    listing.write_text(json.dumps(files))
    shift = rnd % len(rorder_bench.COPY_VARIANTS)
    runs: dict[str, tuple[float, float]] = {}
    for variant in rorder_bench.COPY_VARIANTS[shift:] + rorder_bench.COPY_VARIANTS[:shift]:
        out = tmp / "copy.parquet"
        run, cpu = measured([sys.executable, CONTENDER, "copy", str(listing), str(out), *variant.split("-")])
        if not run.ok:
            raise SystemExit(f"plain copy {variant} failed: {run.stderr_tail}")
        runs[variant] = (run.wall_s, cpu)
        out.unlink()
    best = min(runs, key=lambda v: runs[v][0])
    return runs[best][0], runs[best][1], best


def rorder_run(table: Path, workers: int, expected: _measure.Digest) -> tuple[_measure.ProcessRun, float]:
    """rorder of ``table`` in its own process (rorder_bench's ``ours``), its content checked afterwards; the
    run and its CPU seconds."""
    run, cpu = measured([sys.executable, CONTENDER, "ours", str(table), SORT_BY, str(workers)])
    if not run.ok:
        raise SystemExit(f"rorder of {table.name} failed: {run.stderr_tail}")
    got = _measure.delta_digest(table, _workload.DATA_COLUMNS)
    if got != expected:
        raise SystemExit(f"rorder of {table.name} changed the content: {got} != {expected}")
    return run, cpu


def wall_rounds(args: argparse.Namespace, source: Path, tmp: Path) -> tuple[dict[str, Any], Path]:
    """Paired rounds of the copy floor, rorder on the clustered table and rorder on the partitioned one;
    the medians, and the last round's rewritten clustered table."""
    part = source / f"{_workload.PARTITION_COLUMN}={_workload.PARTITION_VALUE}"
    files = sorted(str(p) for p in part.glob("*.parquet"))
    expected = _measure.delta_digest(source, _workload.DATA_COLUMNS)
    rorder_bench.warm_up(["copy", "ours"], None)
    # every order of the three in turn: each contender runs first, second and last, after each other one
    orders = list(itertools.permutations(["copy", "clustered", "partitioned"]))
    rounds: list[dict[str, Any]] = []
    for rnd in range(args.repeat):
        row: dict[str, Any] = {"load": round(os.getloadavg()[0], 2)}
        for name in orders[rnd % len(orders)]:
            if name == "copy":
                row["copy_floor_s"], row["copy_floor_cpu_s"], row["floor"] = copy_floor(files, tmp, rnd)
                continue
            table = clustered_copy(source, tmp / name) if name == "clustered" else linked_copy(source, tmp / name)
            run, cpu = rorder_run(table, args.workers, expected)
            row[f"{name}_s"], row[f"{name}_cpu_s"], row[f"{name}_rss_mb"] = run.wall_s, cpu, run.peak_rss_bytes / 2**20
        rounds.append(row)
        print(
            f"  round {rnd + 1}/{args.repeat} (load {row['load']:.2f}): copy floor {row['copy_floor_s']:.2f} s "
            f"({row['floor']}), clustered rorder {row['clustered_s']:.2f} s, partitioned rorder "
            f"{row['partitioned_s']:.2f} s (CPU {row['copy_floor_cpu_s']:.2f} / {row['clustered_cpu_s']:.2f} / "
            f"{row['partitioned_cpu_s']:.2f} s)",
            flush=True,
        )

    def med(f: Any) -> float:
        return round(statistics.median(f(r) for r in rounds), 3)

    summary = {
        "rounds": len(rounds),
        "copy_floor_s": med(lambda r: r["copy_floor_s"]),
        "clustered_s": med(lambda r: r["clustered_s"]),
        "partitioned_s": med(lambda r: r["partitioned_s"]),
        "copy_floor_cpu_s": med(lambda r: r["copy_floor_cpu_s"]),
        "clustered_cpu_s": med(lambda r: r["clustered_cpu_s"]),
        "partitioned_cpu_s": med(lambda r: r["partitioned_cpu_s"]),
        "clustered_rss_mb": med(lambda r: r["clustered_rss_mb"]),
        "partitioned_rss_mb": med(lambda r: r["partitioned_rss_mb"]),
        "clustered_x_floor": med(lambda r: r["clustered_s"] / r["copy_floor_s"]),
        "partitioned_x_floor": med(lambda r: r["partitioned_s"] / r["copy_floor_s"]),
        "clustered_x_partitioned": med(lambda r: r["clustered_s"] / r["partitioned_s"]),
        "per_round": rounds,
    }
    return summary, tmp / "clustered"


# --------------------------------------------------------------------------------------------- point query
def spark_optimize(table: Path) -> None:
    """Spark's ``OPTIMIZE`` (not FULL) on the table, with the tests' local Spark + Delta."""
    import delta_spark  # tests/support, on the path through query_bench

    spark = delta_spark.start_session("clustered-bench")
    try:
        spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    finally:
        spark.stop()


def point_rows(table: Path) -> int:
    """Rows of ``node_id = NODE``, read locally (the answer every reader must give)."""
    from deltalake import DeltaTable, QueryBuilder

    sql = f"SELECT count(*) AS n FROM t WHERE node_id = {NODE}"
    return int(QueryBuilder().register("t", DeltaTable(str(table))).execute(sql).read_all().column(0)[0].as_py())


def proxied_point_bytes(args: argparse.Namespace, layouts: dict[str, Path], tmp: Path) -> list[dict[str, Any]]:
    """Each layout uploaded to each emulator; what each reader fetches for ``node_id = NODE`` through the
    counting proxy (medians of ``--runs``), one row per emulator x reader x layout."""
    q = next(q for q in query_bench.queries() if q.name == "point")
    facts = {name: query_bench.local_facts(path) for name, path in layouts.items()}
    want = point_rows(layouts["ours"])
    rows: list[dict[str, Any]] = []
    for emu_name in [e for e in args.emulators.split(",") if e]:
        emu = query_bench.start_emulator(emu_name, tmp)
        try:
            prefix = f"{emu.root}/{uuid.uuid4().hex[:8]}"
            for name, path in layouts.items():
                query_bench.upload(path, f"{prefix}/{name}", emu.direct)
            for rname in [r for r in args.readers.split(",") if r]:
                reader = query_bench.make_reader(rname, emu, tmp, [], None)
                try:
                    for name in layouts:
                        cell = query_bench.measure(reader, f"{prefix}/{name}", q, emu.proxy, facts[name], args.runs)
                        if cell.rows != want:
                            raise SystemExit(f"{emu_name}/{rname} on {name}: {cell.rows} rows, expected {want}")
                        rows.append(
                            {
                                "emulator": emu_name,
                                "reader": rname,
                                "layout": name,
                                "data_bytes": int(cell.data_bytes),
                                "footer_bytes": int(cell.footer_bytes),
                                "chunk_bytes": int(cell.chunk_bytes),
                                "log_bytes": int(cell.bytes - cell.data_bytes),
                                "requests": int(cell.requests),
                                "footers_read": int(cell.footers_read),
                            }
                        )
                finally:
                    reader.close()
        finally:
            emu.proxy.stop()
            emu.service.stop()
    own = facts["ours"].node_bytes[NODE]
    spark = {(r["emulator"], r["reader"]): r["data_bytes"] for r in rows if r["layout"] == "spark-optimize"}
    for r in rows:
        r["own_bytes"] = own
        r["x_own"] = round(r["data_bytes"] / own, 3)
        theirs = spark.get((r["emulator"], r["reader"]))
        r["x_spark_optimize"] = round(r["data_bytes"] / theirs, 4) if theirs and r["layout"] == "ours" else None
    return rows


def print_point(rows: list[dict[str, Any]], local: dict[str, Any]) -> None:
    """The point-query table and the targets."""
    print(f"\npoint query node_id = {NODE} through the counting proxy (medians; bytes of .parquet files, footers")
    print("included; own = the compressed column chunks of the node's row groups in our layout):")
    print(
        f"{'emulator':<8} {'reader':<9} {'layout':<15} {'bytes':>11} {'footer':>9} {'chunks':>11} {'log':>9} "
        f"{'x own':>7} {'x OPTIMIZE':>10}"
    )
    for r in rows:
        xs = "" if r["x_spark_optimize"] is None else f"{r['x_spark_optimize']:.4f}"
        print(
            f"{r['emulator']:<8} {r['reader']:<9} {r['layout']:<15} {r['data_bytes']:>11,} {r['footer_bytes']:>9,} "
            f"{r['chunk_bytes']:>11,} {r['log_bytes']:>9,} {r['x_own']:>7.3f} {xs:>10}"
        )
    print(f"local cross-check (footers on disk): {json.dumps(local)}")
    for r in rows:
        if r["layout"] != "ours":
            continue
        verdict = f"{r['x_own']:.3f}x own <= 1.5: {'met' if r['x_own'] <= 1.5 else 'NOT met'}"
        if r["x_spark_optimize"] is not None:
            ok = r["x_spark_optimize"] <= 0.2
            verdict += f"; {r['x_spark_optimize']:.4f}x OPTIMIZE <= 0.2: {'met' if ok else 'NOT met'}"
        print(f"  target {r['emulator']}/{r['reader']}: {verdict}")


def local_point(layouts: dict[str, Path]) -> dict[str, Any]:
    """``point_bytes`` of each layout (bytes, own bytes, files opened)."""
    out: dict[str, Any] = {}
    for name, path in layouts.items():
        fetched, own, opened = point_bytes(path, NODE)
        out[name] = {"bytes": fetched, "own": own, "files": opened}
    return out


def run_rewrite(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """The wall rounds, then the point query on their last clustered table (and on Spark's layout)."""
    workload = _workload.workload_for(1, args.seed, quick=args.quick)
    source = _workload.build(workload, WORK)
    tmp = Path(tempfile.mkdtemp(prefix="clustered-bench-"))
    try:
        print(
            f"load average {os.getloadavg()[0]:.2f}; {workload.name}: {workload.rows:,} rows, {workload.files} files; "
            f"{args.repeat} paired round(s)",
            flush=True,
        )
        wall, ours = wall_rounds(args, source, tmp)
        out["rewrite"] = {"workload": workload.name, "rows": workload.rows, **wall}
        print(json.dumps({k: v for k, v in wall.items() if k != "per_round"}), flush=True)
        x = wall["clustered_x_floor"]
        print(
            f"  target: clustered rorder wall {x:.2f}x the copy floor <= 1.0: {'met' if x <= 1.0 else 'NOT met'} "
            f"(partitioned rorder {wall['partitioned_x_floor']:.2f}x in the same rounds)",
            flush=True,
        )
        if args.skip_point:
            return
        layouts = {"ours": ours}
        if args.spark:
            layouts["spark-optimize"] = clustered_copy(source, tmp / "spark-optimize")
            spark_optimize(layouts["spark-optimize"])
        local = local_point(layouts)
        rows = proxied_point_bytes(args, layouts, tmp)
        out["point"] = {"local": local, "proxy": rows}
        print_point(rows, local)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_plan_table(root: Path, files: int) -> Path:
    """An unpartitioned table of ``files`` live files (log only, one commit, a checkpoint): pairs of
    files on one narrow node range each, as a table of many small appends per site would hold."""
    from deltalake import DeltaTable

    table = root / f"plan-{files}"
    if (table / "_delta_log" / "_last_checkpoint").exists():
        return table
    shutil.rmtree(table, ignore_errors=True)
    (table / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "node_id", "type": "long", "nullable": True, "metadata": {}}]}
    with open(table / "_delta_log" / f"{0:020d}.json", "w") as out:
        out.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}}
        meta.update(schemaString=json.dumps(schema), partitionColumns=[], configuration={}, createdTime=0)
        out.write(json.dumps({"metaData": meta}) + "\n")
        for i in range(files):
            lo = (i // 2) * 10
            bounds = {"minValues": {"node_id": lo}, "maxValues": {"node_id": lo + 9}, "nullCount": {"node_id": 0}}
            stats = json.dumps({"numRecords": 1000, **bounds}, separators=(",", ":"))
            add = {"path": f"part-{i:08d}.parquet", "partitionValues": {}, "size": 1_000_000}
            add.update(modificationTime=0, dataChange=True, stats=stats)
            out.write(json.dumps({"add": add}) + "\n")
    DeltaTable(str(table)).create_checkpoint()
    return table


PLAN_THEIRS = (
    "import sys, deltalake; dt = deltalake.DeltaTable(sys.argv[1]); print(dt.get_add_actions(flatten=True).num_rows)"
)
PLAN_OURS = (
    "import sys; from deltaextras.ops.rorder.plan import plan_units; "
    "p = plan_units(sys.argv[1], by='node_id'); print(len(p.units))"
)


def run_plan(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Per table size, ``--plan-repeat`` paired rounds (the order alternating): deltalake's snapshot load
    with its add actions against ``plan_units``, each in its own process; medians of the per-round ratios."""
    rows = []
    for n in args.plan_files:
        table = build_plan_table(WORK, n)
        rounds = []
        for r in range(args.plan_repeat):
            pair: dict[str, Any] = {}
            for name in ("theirs", "ours") if r % 2 == 0 else ("ours", "theirs"):
                script = PLAN_THEIRS if name == "theirs" else PLAN_OURS
                pair[name] = _measure.run_measured([sys.executable, "-c", script, str(table)])
            rounds.append(pair)
        theirs_s = [p["theirs"].wall_s for p in rounds]
        ours_s = [p["ours"].wall_s for p in rounds]
        rows.append(
            {
                "files": n,
                "rounds": len(rounds),
                "deltalake_s": round(statistics.median(theirs_s), 2),
                "deltalake_rss_mb": round(max(p["theirs"].peak_rss_bytes for p in rounds) / 2**20),
                "plan_s": round(statistics.median(ours_s), 2),
                "plan_rss_mb": round(max(p["ours"].peak_rss_bytes for p in rounds) / 2**20),
                "time_ratio": round(statistics.median(o / t for o, t in zip(ours_s, theirs_s, strict=True)), 2),
                "time_ratios": [round(o / t, 2) for o, t in zip(ours_s, theirs_s, strict=True)],
                "rss_ratio": round(
                    statistics.median(p["ours"].peak_rss_bytes / p["theirs"].peak_rss_bytes for p in rounds), 2
                ),
                "units": rounds[-1]["ours"].stdout_tail.strip(),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    out["plan"] = rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the small workload")
    p.add_argument("--spark", action="store_true", help="also measure Spark's OPTIMIZE layout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plan-files", type=int, nargs="*", default=[], metavar="N")
    p.add_argument("--skip-rewrite", action="store_true")
    p.add_argument("--plan-repeat", type=int, default=5, help="paired rounds of each planning size (default 5)")
    p.add_argument("--repeat", type=int, default=6, help="paired rounds of the wall comparison (default 6)")
    p.add_argument("--workers", type=int, default=1, help="rorder's max_workers (default 1: one unit)")
    p.add_argument("--skip-point", action="store_true", help="no point query (the wall rounds only)")
    p.add_argument("--emulators", default="azurite,s3", help="for the point query (default azurite,s3)")
    p.add_argument("--readers", default="deltalake,sail", help="query_bench readers (default deltalake,sail)")
    p.add_argument("--runs", type=int, default=3, help="runs of each point query (medians; default 3)")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    # a terminated bench still stops its emulators, proxies and Sail (the finally blocks run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    WORK.mkdir(exist_ok=True)
    out: dict[str, Any] = {}
    if not args.skip_rewrite:
        run_rewrite(args, out)
    if args.plan_files:
        run_plan(args, out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
