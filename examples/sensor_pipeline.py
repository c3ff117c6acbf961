"""Sensor pipeline on Spark: five-minute batches in, row-group optimizer, point query out.

What it does, all through PySpark (Spark Connect, or a classic Apache Spark session with Delta Lake):

1. creates the table ``--table`` partitioned by ``node_id_range`` with the range ``CHECK``
   constraint (``deltaextras.ops.ranges.ranges.create_range_table``), unless it exists;
2. appends ``--batches`` five-minute batches of ``--nodes`` sensors with
   ``deltaextras.ops.ranges.ranges.RangeAppender`` (Spark writes; the range column is derived for it);
3. appends one row whose range column contradicts its node_id, straight through Spark's Delta writer
   (no range helper): the table's ``CHECK`` constraint must make the engine refuse it;
4. runs a point query ``node_id = --query-node`` and counts the Parquet row groups whose min/max
   statistics admit that node (the row groups a reader has to fetch);
5. runs the optimizer (``--runner spark``: ``deltaextras.app.spark.rorder_spark``, the partition jobs as
   Spark tasks; ``--runner local``: ``deltaextras.ops.rorder.rorder`` in local processes);
6. runs the same query again, counts row groups again, and checks that the query result and the
   whole table (a checksum read through Spark and through deltalake) are unchanged.

Run it against a Spark Connect server (``--remote sc://host:15002``), without ``--remote`` to
start a local Sail server in this process, or with ``--delta-jars DIR`` to start a local Apache Spark
(the full ``pyspark`` package) with the Delta Lake jars in ``DIR`` (``spark.jars``; fetch them with
``mvn -f tests/spark/pom.xml dependency:copy-dependencies -DoutputDirectory=DIR``)::

    python examples/sensor_pipeline.py --table /tmp/sensors --nodes 300 --batches 12
    python examples/sensor_pipeline.py --table /tmp/sensors --delta-jars ~/.cache/delta-jars

What each engine needs besides ``deltaextras`` (checked first; a missing one is named in one line):

* Sail, started here (the default): ``pip install "deltaextras[spark]" pysail``;
* a Spark Connect server (``--remote``): ``pip install "deltaextras[spark]"``;
* Apache Spark (``--delta-jars``): the full ``pyspark`` with its jars and pandas,
  ``pip install "pyspark==4.2.0" pandas`` (not beside ``pyspark-client``: both install ``pyspark``).

Exit status 0 when every check passed, 1 otherwise, 2 when a package is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from deltaextras import RangeAppender, RangeSpec, create_range_table, rorder, rorder_spark
from deltaextras.ops.maintenance.inspect import row_group_table

BATCH_SECONDS = 300
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCHEMA = pa.schema(
    [
        ("node_id", pa.int64()),
        ("utc_time", pa.timestamp("us", tz="UTC")),
        ("value", pa.float64()),
    ]
)


# ----------------------------------------------------------------------------- what each engine needs
SAIL = 'pip install "deltaextras[spark]" pysail'
CONNECT = 'pip install "deltaextras[spark]"'
CLASSIC = 'pip install "pyspark==4.2.0" pandas'


def missing_packages(engine: str) -> str | None:
    """What ``engine`` (``sail``, ``connect`` or ``classic``) lacks, as one line saying how to install it; None
    when everything is there. Checked before any work, without importing the packages.

    >>> missing_packages("connect") is None or "pip install" in missing_packages("connect")
    True
    """
    import importlib.util

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            return True

    if engine == "classic":
        spec = None if absent("pyspark") else importlib.util.find_spec("pyspark")
        jars = bool(spec and spec.submodule_search_locations) and any(
            (Path(loc) / "jars").is_dir()
            for loc in spec.submodule_search_locations  # type: ignore[union-attr]
        )
        lacking = [n for n, gone in (("pyspark (with its jars)", not jars), ("pandas", absent("pandas"))) if gone]
        hint = CLASSIC
    else:
        names = ["pyspark", "pandas", "grpc"] + (["pysail"] if engine == "sail" else [])
        lacking = [n for n in names if absent(n)]
        hint = SAIL if engine == "sail" else CONNECT
    if not lacking:
        return None
    return f"sensor_pipeline: {', '.join(lacking)} not installed; {hint}"


# ----------------------------------------------------------------------------- Spark session
def start_local_sail() -> tuple[Any, str]:
    """Start a Sail Spark Connect server in this process on a free loopback port.

    Returns ``(server, remote)``; stop it with ``server.stop()``.
    """
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    address = server.listening_address
    if address is None:
        raise RuntimeError("the Sail server did not start")
    return server, f"sc://{address[0]}:{address[1]}"


def start_local_delta_spark(jar_dir: str) -> Any:
    """A classic local ``SparkSession`` with Delta Lake: the jars of ``jar_dir`` go to ``spark.jars``."""
    import os

    from pyspark.sql import SparkSession

    jars = sorted(str(p) for p in Path(jar_dir).expanduser().glob("*.jar"))
    if not any(Path(j).name.startswith("delta-spark") for j in jars):
        raise SystemExit(f"no delta-spark jar in {jar_dir}")
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):  # those would make the builder go remote
        os.environ.pop(name, None)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the UDF workers need deltaextras
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local run binds the loopback address only
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sensor-pipeline")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def connect(remote: str) -> Any:
    """A ``SparkSession`` over Spark Connect."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(remote).getOrCreate()


# ----------------------------------------------------------------------------- the data
def batch_frame(spark: Any, nodes: int, batch: int) -> Any:
    """One five-minute batch: a reading per node, deterministic values (no ``rand``)."""
    ts = int(EPOCH.timestamp()) + batch * BATCH_SECONDS
    return spark.range(0, nodes).selectExpr(
        "id AS node_id",
        f"timestamp_seconds({ts}) AS utc_time",
        f"round(sin(id * 0.37 + {batch}) * 100.0, 3) AS value",
    )


def append_batches(spark: Any, table: str, nodes: int, batches: int, first_batch: int = 0) -> int:
    """Append ``batches`` batches through Spark with the range column derived; returns rows appended."""
    appender = RangeAppender(table)
    for b in range(first_batch, first_batch + batches):
        appender.append(batch_frame(spark, nodes, b))
    return nodes * batches


def violating_append_rejected(spark: Any, table: str, width: int) -> tuple[bool, str]:
    """Append one row whose ``node_id_range`` contradicts its ``node_id`` through Spark's own Delta writer
    (no range helper). Returns ``(rejected, the engine's message)``; the table's CHECK constraint should
    make Spark refuse it (``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES``)."""
    bad = spark.range(0, 1).selectExpr(
        "CAST(1 AS BIGINT) AS node_id",
        "timestamp_seconds(0) AS utc_time",
        "CAST(0 AS DOUBLE) AS value",
        "CAST(9999 AS BIGINT) AS node_id_range",
    )
    quiet = _jvm_log_level(spark, "OFF")  # a classic session logs the failed task with its Java stack traces
    try:
        bad.write.format("delta").mode("append").save(table)
    except Exception as exc:  # the engine's own exception type (classic or Connect)
        return True, _first_line(str(exc))
    finally:
        if quiet:
            _jvm_log_level(spark, "ERROR")
    return False, "accepted"


def _first_line(text: str) -> str:
    """The line of an engine's error that names its condition (``[DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] ...``),
    else its first line: a classic session's error starts with the Java call that failed.

    >>> _first_line("An error occurred while calling o80.save.\\n: [DELTA_X] CHECK broken\\n\\tat org.apache")
    '[DELTA_X] CHECK broken'
    """
    import re

    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    named = next((m.group(0) for ln in lines if (m := re.search(r"\[[A-Z][A-Z0-9_.]+\].*", ln))), None)
    return (named or (lines[0] if lines else "refused"))[:160]


def _jvm_log_level(spark: Any, level: str) -> bool:
    """Set a classic session's log level; False over Spark Connect (no SparkContext: the server logs on its side)."""
    try:
        spark.sparkContext.setLogLevel(level)
    except Exception:  # not a classic session after all: nothing to quiet
        return False
    return True


# ----------------------------------------------------------------------------- measurements
def row_groups_needed(table: str, column: str, value: Any, storage_options: dict[str, str] | None = None) -> int:
    """Row groups, over the table's live files, whose min/max statistics admit ``column = value``.

    A row group without statistics counts as needed (a reader cannot skip it).
    """
    groups = row_group_table(table, column, storage_options=storage_options)
    lo, hi = groups.column("min"), groups.column("max")
    admits = pc.and_(pc.less_equal(lo, value), pc.greater_equal(hi, value))
    unknown = pc.or_(pc.is_null(lo), pc.is_null(hi))
    needed = pc.or_(pc.fill_null(admits, False), unknown)
    return int(pc.sum(needed.cast(pa.int64())).as_py() or 0)


def canonical(table: pa.Table) -> pa.Table:
    """Columns in name order, timestamps as UTC microseconds, integers as int64, rows sorted."""
    cols, names = [], sorted(table.column_names)
    for name in names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        elif pa.types.is_integer(col.type):
            col = col.cast(pa.int64())
        elif pa.types.is_floating(col.type):
            col = col.cast(pa.float64())
        cols.append(col)
    out = pa.Table.from_arrays(cols, names=names)
    return out.sort_by([(n, "ascending") for n in names])


def checksum(table: pa.Table) -> str:
    """SHA-256 of the canonical rows (independent of row order, file layout and engine types)."""
    digest = hashlib.sha256()
    canon = canonical(table)
    digest.update(json.dumps(canon.column_names).encode())
    for batch in canon.to_batches(max_chunksize=65536):
        for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            digest.update(repr(row).encode())
    return digest.hexdigest()


def checksum_spark(spark: Any, table: str) -> str:
    """Checksum of the table as Spark reads it (``spark.read.format("delta")``)."""
    return checksum(spark.read.format("delta").load(table).toArrow())


def checksum_deltalake(table: str, storage_options: dict[str, str] | None = None) -> str:
    """Checksum of the table as deltalake reads it (``DeltaTable.scan()``, deletion vectors applied)."""
    reader = DeltaTable(table, storage_options=storage_options).scan()
    return checksum(pa.RecordBatchReader.from_stream(reader).read_all())


def point_query(spark: Any, table: str, node: int) -> list[tuple[Any, ...]]:
    """``SELECT * WHERE node_id = node`` through Spark, as sorted tuples."""
    rows = spark.read.format("delta").load(table).where(f"node_id = {int(node)}").toArrow()
    canon = canonical(rows)
    return list(zip(*(c.to_pylist() for c in canon.columns), strict=True))


# ----------------------------------------------------------------------------- the pipeline
@dataclass
class PipelineResult:
    """What one run measured."""

    table: str
    nodes: int
    batches: int
    rows: int
    query_node: int
    query_rows: int
    row_groups_before: int
    row_groups_after: int
    query_identical: bool
    checksum_spark_before: str
    checksum_spark_after: str
    checksum_deltalake_before: str
    checksum_deltalake_after: str
    optimizer_seconds: float
    constraint_rejected: bool = False
    partitions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content_identical(self) -> bool:
        """Same rows before and after, and the same through Spark and through deltalake."""
        return (
            self.checksum_spark_before
            == self.checksum_spark_after
            == self.checksum_deltalake_before
            == self.checksum_deltalake_after
        )

    @property
    def ok(self) -> bool:
        """Every check passed and the optimized layout needs one row group for the query."""
        return (
            self.query_identical
            and self.content_identical
            and self.constraint_rejected
            and self.row_groups_after == 1
            and self.query_rows > 0
        )


def run_pipeline(
    spark: Any,
    table: str,
    *,
    nodes: int = 300,
    batches: int = 12,
    width: int = 150,
    query_node: int | None = None,
    runner: str = "spark",
    log: Any = None,
) -> PipelineResult:
    """Create (if needed), append, query, optimize, query again; return the measurements."""

    def say(text: str) -> None:
        if log is not None:
            print(text, file=log, flush=True)

    if runner not in ("spark", "local"):
        raise ValueError(f"runner must be 'spark' or 'local', not {runner!r}")
    spec = RangeSpec.fixed_width("node_id", width)
    if not (Path(table) / "_delta_log").is_dir():
        create_range_table(table, SCHEMA, spec)
        say(f"created {table}: partitioned by {spec.range_column}, CHECK {spec.check_sql()[:80]}...")
    node = nodes // 2 if query_node is None else query_node

    started = time.monotonic()
    rows = append_batches(spark, table, nodes, batches)
    elapsed = time.monotonic() - started
    say(f"appended {batches} batch(es) x {nodes} node(s) = {rows} rows through Spark in {elapsed:.1f}s")

    rejected, message = violating_append_rejected(spark, table, width)
    say(f"append violating the range constraint: {'rejected' if rejected else 'ACCEPTED'} ({message})")

    before_rows = point_query(spark, table, node)
    rg_before = row_groups_needed(table, "node_id", node)
    spark_before = checksum_spark(spark, table)
    delta_before = checksum_deltalake(table)
    say(f"point query node_id = {node}: {len(before_rows)} rows, {rg_before} row group(s) needed")

    started = time.monotonic()
    if runner == "spark":
        report_df = rorder_spark(spark, table, sort_by="utc_time")
        partitions = [r.asDict() for r in report_df.collect()]
    else:
        partitions = [p.to_dict() for p in rorder(table, sort_by="utc_time")]
    seconds = time.monotonic() - started
    committed = sum(1 for p in partitions if p["status"] == "committed")
    say(f"optimizer ({runner}): {committed} of {len(partitions)} partition(s) rewritten in {seconds:.1f}s")

    after_rows = point_query(spark, table, node)
    rg_after = row_groups_needed(table, "node_id", node)
    say(f"point query node_id = {node}: {len(after_rows)} rows, {rg_after} row group(s) needed")

    result = PipelineResult(
        table=table,
        nodes=nodes,
        batches=batches,
        rows=int(spark.read.format("delta").load(table).count()),
        query_node=node,
        query_rows=len(after_rows),
        row_groups_before=rg_before,
        row_groups_after=rg_after,
        query_identical=before_rows == after_rows,
        checksum_spark_before=spark_before,
        checksum_spark_after=checksum_spark(spark, table),
        checksum_deltalake_before=delta_before,
        checksum_deltalake_after=checksum_deltalake(table),
        optimizer_seconds=round(seconds, 3),
        partitions=partitions,
        constraint_rejected=rejected,
    )
    say(
        f"row groups needed: {rg_before} before, {rg_after} after; query identical: {result.query_identical}; "
        f"table identical (Spark and deltalake checksums): {result.content_identical}"
    )
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", help="table location (default: a new temporary directory)")
    p.add_argument("--nodes", type=int, default=300, help="sensors per batch (node_id 0..N-1)")
    p.add_argument("--batches", type=int, default=12, help="five-minute batches to append")
    p.add_argument("--width", type=int, default=150, help="node ids per node_id_range partition")
    p.add_argument("--query-node", type=int, help="node_id of the point query (default: nodes // 2)")
    p.add_argument("--runner", choices=("spark", "local"), default="spark", help="where the partition jobs run")
    p.add_argument("--remote", help="Spark Connect URL (default: start a local Sail server)")
    p.add_argument(
        "--delta-jars", metavar="DIR", help="start a local Apache Spark with the Delta Lake jars of DIR instead of Sail"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline from the command line; 0 when every check passed."""
    args = parse_args(argv)
    engine = "classic" if args.delta_jars else ("connect" if args.remote else "sail")
    missing = missing_packages(engine)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    table = args.table or str(Path(tempfile.mkdtemp(prefix="sensors-")) / "sensors")
    server = None
    remote = args.remote
    if args.delta_jars:
        spark = start_local_delta_spark(args.delta_jars)
        print(f"started Apache Spark {spark.version} with Delta Lake (local[2])", file=sys.stderr)
    else:
        if remote is None:
            server, remote = start_local_sail()
            print(f"started Sail at {remote}", file=sys.stderr)
        spark = connect(remote)
    try:
        result = run_pipeline(
            spark,
            table,
            nodes=args.nodes,
            batches=args.batches,
            width=args.width,
            query_node=args.query_node,
            runner=args.runner,
            log=sys.stderr if args.json else sys.stdout,
        )
    finally:
        spark.stop()
        if server is not None:
            server.stop()
    if args.json:
        print(json.dumps({**asdict(result), "ok": result.ok, "content_identical": result.content_identical}))
    else:
        print("OK" if result.ok else "FAILED")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
