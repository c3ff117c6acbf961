"""Benchmark a clustered table: the W2 data (bench/_workload.py, 150 nodes) as a table ``CLUSTER BY
(node_id)`` instead of a ``node_id_range`` partition, rewritten by value-range units.

Three figures, each in one run:

* **rorder wall vs the copy floor**: ``rorder`` of the clustered table (no ``by=``: the clustering column)
  against a plain copy of the same files into one zstd file (``pq.read_table`` per file,
  ``pa.concat_tables``, ``pq.write_table``), each in its own process (``_measure.run_measured``);
* **point-query bytes** for ``node_id = 42``: what a reader that skips files by Delta statistics and row
  groups by Parquet statistics fetches (each matching file's footer and the row groups whose
  ``node_id`` range holds 42), on our layout against the node's own bytes, and against the layout
  Spark's ``OPTIMIZE`` leaves on the same table (``--spark``: starts the tests' local Spark + Delta);
* **planning at scale** (``--plan-files N ...``): an unpartitioned table of N live files (one commit,
  a deltalake checkpoint, no data files), planned into value-range units by ``plan_table`` against
  deltalake's own snapshot load with its add actions, each in its own process (time, peak RSS).

Usage::

    python bench/clustered_bench.py                    # W2 scale 1 (3.04 M rows, 289 files)
    python bench/clustered_bench.py --quick --spark    # small data, with Spark's OPTIMIZE layout
    python bench/clustered_bench.py --plan-files 100000 300000 1000000 --skip-rewrite
"""

from __future__ import annotations

import argparse
import json
import shutil
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

WORK = Path(__file__).resolve().parent / ".work"
NODE = 42


def clustered_copy(partitioned: Path, into: Path) -> Path:
    """The workload's partition as an unpartitioned table clustered by node_id: the same data files
    (hard links), one commit with the clustering protocol and domain metadata."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    adds = []
    for f in sorted((partitioned / f"{_workload.PARTITION_COLUMN}={_workload.PARTITION_VALUE}").glob("*.parquet")):
        (into / f.name).hardlink_to(f)
        adds.append(
            {
                "add": {
                    "path": f.name,
                    "partitionValues": {},
                    "size": f.stat().st_size,
                    "modificationTime": int(time.time() * 1000),
                    "dataChange": True,
                    "stats": json.dumps(_workload._stats(f), separators=(",", ":")),
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


def run_rewrite(args: argparse.Namespace, out: dict[str, Any]) -> None:
    workload = _workload.workload_for(1, args.seed, quick=args.quick)
    source = _workload.build(workload, WORK)
    tmp = Path(tempfile.mkdtemp(prefix="clustered-bench-"))
    try:
        files = sorted(str(p) for p in (source / f"{_workload.PARTITION_COLUMN}=0").glob("*.parquet"))
        copy_script = (
            "import sys, pyarrow as pa, pyarrow.parquet as pq; "
            "t = pa.concat_tables([pq.read_table(p) for p in sys.argv[2:]]); "
            "pq.write_table(t, sys.argv[1], compression='zstd')"
        )
        floor = _measure.run_measured([sys.executable, "-c", copy_script, str(tmp / "copy.parquet"), *files])
        table = clustered_copy(source, tmp / "clustered")
        spark_table = clustered_copy(source, tmp / "spark") if args.spark else None
        script = (
            "import sys, deltaextras; r = deltaextras.rorder(sys.argv[1], sort_by='utc_time', max_workers=2); "
            "print(r.summary())"
        )
        ours = _measure.run_measured([sys.executable, "-c", script, str(table)])
        if ours.returncode != 0:
            raise SystemExit(f"rorder failed: {ours.stderr_tail}")
        fetched, own, opened = point_bytes(table, NODE)
        out["rewrite"] = {
            "workload": workload.name,
            "rows": workload.rows,
            "rorder_wall_s": round(ours.wall_s, 2),
            "copy_floor_wall_s": round(floor.wall_s, 2),
            "wall_vs_floor": round(ours.wall_s / floor.wall_s, 2),
            "rorder_peak_rss_mb": round(ours.peak_rss_bytes / 2**20),
            "point_query_bytes": fetched,
            "node_own_bytes": own,
            "point_vs_own": round(fetched / own, 2) if own else None,
            "files_opened": opened,
            "summary": ours.stdout_tail.strip(),
        }
        if spark_table is not None:
            spark_fetched, _own, spark_opened = spark_point_bytes(spark_table)
            out["rewrite"].update(
                spark_optimize_point_bytes=spark_fetched,
                spark_files_opened=spark_opened,
                ours_vs_spark_optimize=round(fetched / spark_fetched, 3),
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def spark_point_bytes(table: Path) -> tuple[int, int, int]:
    """Spark's OPTIMIZE (the tests' local Spark + Delta) on the clustered table, then the point bytes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import delta_spark

    spark = delta_spark.start_session("clustered-bench")
    try:
        spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    finally:
        spark.stop()
    return point_bytes(table, NODE)


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


def run_plan(args: argparse.Namespace, out: dict[str, Any]) -> None:
    rows = []
    for n in args.plan_files:
        table = build_plan_table(WORK, n)
        theirs = _measure.run_measured(
            [
                sys.executable,
                "-c",
                "import sys, deltalake; dt = deltalake.DeltaTable(sys.argv[1]); "
                "print(dt.get_add_actions(flatten=True).num_rows)",
                str(table),
            ]
        )
        ours = _measure.run_measured(
            [
                sys.executable,
                "-c",
                "import sys; from deltaextras.ops.rorder.plan import plan_units; "
                "p = plan_units(sys.argv[1], by='node_id'); print(len(p.units))",
                str(table),
            ]
        )
        rows.append(
            {
                "files": n,
                "deltalake_s": round(theirs.wall_s, 2),
                "deltalake_rss_mb": round(theirs.peak_rss_bytes / 2**20),
                "plan_s": round(ours.wall_s, 2),
                "plan_rss_mb": round(ours.peak_rss_bytes / 2**20),
                "time_ratio": round(ours.wall_s / theirs.wall_s, 2),
                "rss_ratio": round(ours.peak_rss_bytes / theirs.peak_rss_bytes, 2),
                "units": ours.stdout_tail.strip(),
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
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    WORK.mkdir(exist_ok=True)
    out: dict[str, Any] = {}
    if not args.skip_rewrite:
        run_rewrite(args, out)
        print(json.dumps(out["rewrite"], indent=1), flush=True)
    if args.plan_files:
        run_plan(args, out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
