"""Point queries where users run them: real readers against Azurite and moto S3, through a counting proxy.

One partition of sensor rows (150 ``node_id``\\ s; ``bench/_workload.py``: a history file plus 288
five-minute appends, each its own commit, checkpoints every 100 commits as delta-rs writes them) in
these layouts of the same rows:

* ``raw``: the appends as written (random row order, pyarrow defaults);
* ``compact``: delta-rs ``optimize.compact()``;
* ``zorder``: delta-rs ``optimize.z_order(["node_id"])``;
* ``rorder``: ``deltaextras.rorder(sort_by="utc_time")``: one row group per node (it checkpoints its
  commit: the last checkpoint lags 89 versions);
* ``tiered``: ``rorder(layout="tiered")``, skipped with the reason while rorder has no such option;
* on request: ``rorder-stale`` (rorder's files, no checkpoint after it) and ``rorder@<N>MiB`` (rorder
  with ``target_file_size`` N MiB: more files, fewer row groups and a smaller footer per file).

delta-rs ``optimize`` checkpoints at its own interval (100) only; the bench checkpoints ``compact`` and
``zorder`` after their rewrite so that the layouts, not their logs, are compared.

Each layout is uploaded to both emulators. Readers reach the emulator through
:class:`_proxy.CountingProxy`, which counts requests and bytes (Delta log, data files) per query:
deltalake ``QueryBuilder`` (DataFusion), polars ``scan_delta``, pyarrow (``DeltaTable.to_pyarrow_dataset``
with a filter), Sail (Spark Connect; its server process talks to the proxy), and Spark + Delta on
the JVM when ``--spark-jars DIR`` (or ``$DELTAEXTRAS_SPARK_JARS``) names the Delta jars.

Queries: one node (all its rows), one node in a one-hour window, 10 nodes with ``IN``, a full aggregate.
Each is run 5 times (``--runs``), every run opening the table afresh as a new job would; the table
prints medians of requests, bytes, latency, the bytes as a multiple of the value's own compressed
bytes (its column chunks in the rorder layout) and latency / bytes as a ratio to the raw layout.

Usage::

    python bench/query_bench.py --quick          # 60 k rows, a couple of minutes
    python bench/query_bench.py                  # 3.04 M rows (the figures in the README)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "support"))

import _pages  # noqa: E402
import _workload  # noqa: E402
from _proxy import CountingProxy  # noqa: E402

LAYOUTS = ("raw", "compact", "zorder", "rorder", "tiered")  # the default set; see builder() for more
READERS = ("deltalake", "polars", "pyarrow", "sail", "spark")
QUERIES = ("point", "window", "in10", "agg")
POINT = 42
IN10 = (3, 17, 42, 58, 71, 88, 99, 113, 127, 140)
CHECKPOINT_INTERVAL = 100  # delta-rs's default
S3A_JARS = Path.home() / ".cache" / "deltaextras" / "bench-s3a-jars"  # bench/spark/pom.xml's jars


# --------------------------------------------------------------------------------------------- tables
def _split_log(table: Path) -> int:
    """Turn the workload's single commit into one commit per data file (the way appends arrive) with a
    checkpoint every ``CHECKPOINT_INTERVAL`` commits; returns the last version."""
    from deltalake import DeltaTable

    log = table / "_delta_log"
    first = log / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines() if line.strip()]
    head = [a for a in actions if "protocol" in a or "metaData" in a]
    adds = [a for a in actions if "add" in a]
    first.unlink()
    for v, add in enumerate(adds):
        info = {"commitInfo": {"timestamp": add["add"]["modificationTime"], "operation": "WRITE"}}
        lines = [info, *(head if v == 0 else []), add]
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    last = len(adds) - 1
    for v in range(CHECKPOINT_INTERVAL, last + 1, CHECKPOINT_INTERVAL):
        DeltaTable(str(table), version=v).create_checkpoint()
    return last


def _checkpoint(table: Path) -> None:
    from deltalake import DeltaTable

    DeltaTable(str(table)).create_checkpoint()


def _compact(table: Path) -> str | None:
    from deltalake import DeltaTable

    DeltaTable(str(table)).optimize.compact()
    _checkpoint(table)  # compared as a layout, not as a log: read from a checkpoint like rorder's
    return None


def _zorder(table: Path) -> str | None:
    from deltalake import DeltaTable

    DeltaTable(str(table)).optimize.z_order(["node_id"])
    _checkpoint(table)
    return None


def _rorder(table: Path, **kwargs: Any) -> str | None:
    """rorder as shipped: it writes the checkpoint itself (the last one lags 89 versions here)."""
    import deltaextras

    deltaextras.rorder(str(table), sort_by="utc_time", max_workers=1, **kwargs)
    return None


def _rorder_stale(table: Path) -> str | None:
    """rorder's layout read without the checkpoint after it: the log replayed from the one before."""
    log = table / "_delta_log"
    hint = log / "_last_checkpoint"
    before = hint.read_bytes() if hint.exists() else None
    _rorder(table)
    newest = max(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))
    (log / f"{newest:020d}.checkpoint.parquet").unlink()
    hint.unlink()
    if before is not None:
        hint.write_bytes(before)
    return None


def _tiered(table: Path) -> str | None:
    """rorder's tiered layout as a day of hourly runs leaves it: the raw table's commits (the history,
    then the five-minute appends) replayed in order into a new log, with a tiered run after every
    twelve appends; the data files are hard links of the raw table's."""
    import inspect

    import deltaextras

    if "layout" not in inspect.signature(deltaextras.rorder).parameters:
        return "rorder has no layout= option in this checkout"
    commits = sorted((table / "_delta_log").glob("[0-9]*.json"))
    hourly = table.with_name(table.name + "-hourly")
    if hourly.exists():
        shutil.rmtree(hourly)
    (hourly / "_delta_log").mkdir(parents=True)
    for item in table.iterdir():
        if item.name != "_delta_log":
            shutil.copytree(item, hourly / item.name, copy_function=os.link)
    version = 0
    for i, commit in enumerate(commits):
        (hourly / "_delta_log" / f"{version:020d}.json").write_bytes(commit.read_bytes())
        version += 1
        if i % 12 == 0 or i == len(commits) - 1:  # the history's first run, then every hour
            _rorder(hourly, layout="tiered")
            version = 1 + max(int(p.name.split(".")[0]) for p in (hourly / "_delta_log").glob("[0-9]*.json"))
    shutil.rmtree(table)
    hourly.rename(table)
    return None


def _deleted(build: Any, run: bool) -> Any:
    """A layout after a one-node DELETE with deletion vectors (node 7: a vector in the file that holds it),
    and with ``run`` the next run of the same layout after it (which purges the vector)."""

    def deleted(table: Path) -> str | None:
        import deltaextras

        reason = build(table)
        if reason is not None:
            return reason
        deltaextras.enable_deletion_vectors(str(table))
        deltaextras.delete(str(table), "node_id = 7")
        if run:
            layout = "tiered" if build is _tiered else "full"
            _rorder(table, layout=layout)
        return None

    return deleted


def _rorder_sized(mib: int) -> Any:
    def build(table: Path) -> str | None:
        return _rorder(table, target_file_size=mib * 2**20)

    return build


# name -> builder(table copied from raw) returning None, or the reason the layout cannot be built here
BUILDERS: dict[str, Any] = {
    "compact": _compact,
    "zorder": _zorder,
    "rorder": _rorder,
    "tiered": _tiered,
    "rorder-stale": _rorder_stale,
    "rorder+dv": _deleted(_rorder, run=False),
    "rorder+dv+run": _deleted(_rorder, run=True),
    "tiered+dv": _deleted(_tiered, run=False),
    "tiered+dv+run": _deleted(_tiered, run=True),
}


def builder(name: str) -> Any:
    """The builder of a layout: one of :data:`BUILDERS`, or ``rorder@<N>MiB`` (rorder with that target
    file size)."""
    if name in BUILDERS:
        return BUILDERS[name]
    if name.startswith("rorder@") and name.endswith("MiB"):
        return _rorder_sized(int(name[len("rorder@") : -len("MiB")]))
    raise SystemExit(f"unknown layout {name!r}: one of raw, {', '.join(BUILDERS)} or rorder@<N>MiB")


def layout_dir(root: Path, name: str) -> Path:
    return root / name.replace("+", "-").replace("@", "-")


def build_layouts(work: Path, quick: bool, names: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """The layouts of the same rows on local disk, each built once and cached under ``work``; returns
    their paths and, for the layouts that cannot be built, the reason."""
    workload = _workload.workload_for(1, 0, quick=quick)
    root = work / f"{workload.name}-v2"
    raw = layout_dir(root, "raw")
    if not (raw / "done.json").exists():
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        source = _workload.build(workload, work / "source", rebuild=True)
        shutil.copytree(source, raw)
        _split_log(raw)
        (raw / "done.json").write_text(json.dumps({"rows": workload.rows}))
    paths, skipped = {"raw": raw}, {}
    for name in names:
        if name == "raw":
            continue
        out = layout_dir(root, name)
        done = out / "done.json"
        if done.exists():
            paths[name] = out
            continue
        if out.exists():
            shutil.rmtree(out)
        build = builder(name)
        shutil.copytree(raw, out, ignore=shutil.ignore_patterns("done.json"))
        t0 = time.perf_counter()
        reason = build(out)
        if reason:
            shutil.rmtree(out)
            skipped[name] = reason
            continue
        done.write_text(json.dumps({"seconds": time.perf_counter() - t0}))
        paths[name] = out
    return paths, skipped


@dataclass
class LocalFacts:
    """What the local copy of a layout says: file sizes, byte spans, and each node's own bytes."""

    files: dict[str, Path]  # basename -> local path
    spans: dict[str, _pages.FileSpans]
    node_bytes: dict[int, int] = field(default_factory=dict)  # compressed bytes of a node's row groups
    versions: int = 0
    checkpoint: int | None = None
    point_footer: int = 0  # footer bytes of the files that hold node POINT (what a pruning reader opens)
    log_bytes: int = 0  # bytes a reader of the latest version fetches from _delta_log at least


def local_facts(table: Path) -> LocalFacts:
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    dt = DeltaTable(str(table))
    files: dict[str, Path] = {}
    for uri in dt.file_uris():
        p = Path(uri.removeprefix("file://"))
        files[p.name] = p
    spans = {name: _pages.file_spans(p.read_bytes()) for name, p in files.items()}
    facts = LocalFacts(files, spans, versions=dt.version())
    last = table / "_delta_log" / "_last_checkpoint"
    if last.exists():
        facts.checkpoint = json.loads(last.read_text())["version"]
    for p in files.values():
        meta = pq.ParquetFile(p).metadata
        holds_point = False
        leaf = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == "node_id")
        for r in range(meta.num_row_groups):
            rg = meta.row_group(r)
            st = rg.column(leaf).statistics
            if st is not None and st.has_min_max and st.min == st.max:
                size = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
                facts.node_bytes[int(st.min)] = facts.node_bytes.get(int(st.min), 0) + size
            holds_point = holds_point or (st is not None and st.has_min_max and st.min <= POINT <= st.max)
        if holds_point:
            span = facts.spans[p.name].footer
            facts.point_footer += span[1] - span[0]
    log = table / "_delta_log"
    start = facts.checkpoint if facts.checkpoint is not None else -1
    for q in log.iterdir():
        v = q.name.split(".")[0]
        if v.isdigit() and (int(v) > start or (int(v) == start and ".checkpoint." in q.name)):
            facts.log_bytes += 0 if q.name.endswith(".json") and int(v) <= start else q.stat().st_size
    return facts


# --------------------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class Query:
    name: str
    sql: str  # over view ``t``
    nodes: tuple[int, ...]  # whose own bytes are the yardstick (empty: the whole table)
    window: tuple[Any, Any] | None = None


def queries() -> list[Query]:
    lo = _workload.START + 200 * _workload.STEP
    hi = lo + timedelta(hours=1)
    ts = "TIMESTAMP '{}'"
    fmt = "%Y-%m-%d %H:%M:%S"
    in_list = ", ".join(str(n) for n in IN10)
    return [
        Query("point", f"SELECT * FROM t WHERE node_id = {POINT}", (POINT,)),
        Query(
            "window",
            f"SELECT * FROM t WHERE node_id = {POINT} AND utc_time >= {ts.format(lo.strftime(fmt))} "
            f"AND utc_time < {ts.format(hi.strftime(fmt))}",
            (POINT,),
            (lo, hi),
        ),
        Query("in10", f"SELECT * FROM t WHERE node_id IN ({in_list})", IN10),
        Query(
            "agg",
            "SELECT count(*) AS n, sum(data_values) AS s, min(utc_time) AS lo, max(utc_time) AS hi FROM t",
            (),
        ),
    ]


# --------------------------------------------------------------------------------------------- readers
class Reader:
    """Runs one query against one table URI; returns the number of rows of the answer."""

    name = "reader"
    skip_reason: str | None = None

    def run(self, uri: str, q: Query) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


class DeltalakeReader(Reader):
    name = "deltalake"

    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts

    def run(self, uri: str, q: Query) -> int:
        from deltalake import DeltaTable, QueryBuilder

        dt = DeltaTable(uri, storage_options=self.opts)
        out = QueryBuilder().register("t", dt).execute(q.sql).read_all()
        return int(out.num_rows if q.name != "agg" else out.column(0)[0].as_py())


class PolarsReader(Reader):
    name = "polars"

    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts

    def run(self, uri: str, q: Query) -> int:
        import polars as pl

        lf = pl.scan_delta(uri, storage_options=self.opts)
        if q.name == "agg":
            out = lf.select(
                pl.len().alias("n"), pl.col("data_values").sum(), pl.col("utc_time").min().alias("lo")
            ).collect()
            return int(out["n"][0])
        if q.name == "in10":
            return lf.filter(pl.col("node_id").is_in(list(IN10))).collect().height
        pred = pl.col("node_id") == POINT
        if q.window:
            pred = pred & (pl.col("utc_time") >= q.window[0]) & (pl.col("utc_time") < q.window[1])
        return lf.filter(pred).collect().height


class PyarrowReader(Reader):
    name = "pyarrow"

    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts

    def run(self, uri: str, q: Query) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        ds = DeltaTable(uri, storage_options=self.opts).to_pyarrow_dataset()
        if q.name == "agg":
            t = ds.to_table(columns=["data_values", "utc_time"])
            pc.sum(t.column("data_values"))
            return t.num_rows
        if q.name == "in10":
            return ds.to_table(filter=pc.field("node_id").isin(pa.array(IN10, pa.int64()))).num_rows
        f = pc.field("node_id") == POINT
        if q.window:
            ts = pa.timestamp("us", tz="UTC")
            f = (
                f
                & (pc.field("utc_time") >= pa.scalar(q.window[0], ts))
                & (pc.field("utc_time") < pa.scalar(q.window[1], ts))
            )
        return ds.to_table(filter=f).num_rows


class SailReader(Reader):
    name = "sail"

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        from services import SailServer

        self.server = SailServer.start(workdir / "sail", env=env)
        self.spark = self.server.session()

    def run(self, uri: str, q: Query) -> int:
        self.spark.read.format("delta").load(uri).createOrReplaceTempView("t")
        rows = self.spark.sql(q.sql).collect()
        return int(rows[0]["n"]) if q.name == "agg" else len(rows)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.spark.stop()
        self.server.stop()


def spark_jars(arg: str | None) -> tuple[list[str], str | None]:
    """The jar files for Spark on the JVM (Delta, and hadoop-aws for S3), or the reason there are none.

    ``arg`` (or ``$DELTAEXTRAS_SPARK_JARS``) names one or more directories separated by commas; the
    object-store jars of ``bench/spark/pom.xml`` are taken from ``~/.cache/deltaextras/bench-s3a-jars``
    when that directory exists."""
    cached = sorted((Path.home() / ".cache" / "deltaextras").glob("delta-jars-*"))  # tests/spark/pom.xml's
    where = arg or os.environ.get("DELTAEXTRAS_SPARK_JARS") or (str(cached[-1]) if cached else None)
    if not where:
        return [], "no Delta jars: pass --spark-jars DIR or set DELTAEXTRAS_SPARK_JARS"
    dirs = [Path(d) for d in where.split(",") if d]
    if S3A_JARS.is_dir() and S3A_JARS not in dirs:
        dirs.append(S3A_JARS)
    jars = sorted(str(p) for d in dirs for p in d.glob("*.jar"))
    if not jars:
        return [], f"no .jar files in {where}"
    if not any(Path(j).name.startswith("hadoop-aws") for j in jars):
        return [], (
            f"no hadoop-aws jar in {where}: Spark cannot reach S3 (s3a); "
            f"mvn -f bench/spark/pom.xml dependency:copy-dependencies -DoutputDirectory={S3A_JARS}"
        )
    try:
        import pyspark

        if not (Path(pyspark.__file__).parent / "jars").is_dir():
            return [], "pyspark here is the Connect client only (no JVM jars); install pyspark"
    except ImportError:
        return [], "pyspark is not installed"
    return jars, None


class SparkReader(Reader):
    """Spark with Delta on the JVM; S3 through ``s3a`` (hadoop-aws must be among the jars)."""

    name = "spark"

    def __init__(self, jars: list[str], endpoint: str, backend: str, stream: str | None = None) -> None:
        if backend != "s3":
            raise RuntimeError(
                "Spark cannot read Azurite here: hadoop-azure's abfs needs the ADLS Gen2 (dfs) endpoint, which "
                "Azurite lacks, and its deprecated wasb driver reaches the emulator only on 127.0.0.1:10000"
            )
        from pyspark.sql import SparkSession

        # the builder goes remote when these are set (Sail's session sets the second); put back afterwards
        saved = {k: os.environ.pop(k) for k in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED") if k in os.environ}
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only
        try:
            self.spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.jars", ",".join(jars))
                .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
                .config("spark.databricks.delta.snapshotPartitions", "2")  # log replay: 2 cores, not 50 tasks
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.hadoop.fs.s3a.endpoint", endpoint)
                .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
                .config("spark.hadoop.fs.s3a.path.style.access", "true")
                .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
                .config("spark.hadoop.fs.s3a.access.key", "testing")
                .config("spark.hadoop.fs.s3a.secret.key", "testing")
                .config("spark.hadoop.fs.s3a.input.stream.type", stream or "default")
                .getOrCreate()
            )
        finally:
            os.environ.update(saved)
        self.spark.sparkContext.setLogLevel("ERROR")

    def run(self, uri: str, q: Query) -> int:
        self.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # a new job: the log is read again
        self.spark.read.format("delta").load(uri.replace("s3://", "s3a://")).createOrReplaceTempView("t")
        rows = self.spark.sql(q.sql).collect()
        # hadoop-aws 3.5's default input stream (analytics) caches objects per file system: a new job has none
        self.spark._jvm.org.apache.hadoop.fs.FileSystem.closeAll()
        return int(rows[0]["n"]) if q.name == "agg" else len(rows)

    def close(self) -> None:
        self.spark.stop()


# --------------------------------------------------------------------------------------------- emulators
@dataclass
class Emulator:
    name: str
    service: Any
    proxy: CountingProxy
    root: str  # URI prefix of the tables, e.g. az://bench or s3://bench
    direct: dict[str, str]  # storage options to the emulator itself (uploads)
    proxied: dict[str, str]  # storage options through the proxy (readers)
    env: dict[str, str]  # the same for a server process (Sail)
    endpoint: str  # proxy endpoint


def start_emulator(name: str, workdir: Path) -> Emulator:
    from services import HOST, Azurite, MotoServer

    if name == "azurite":
        svc = Azurite.start(workdir / "azurite")
        svc.create_container("bench")
        proxy = CountingProxy(HOST, svc.blob_port)
        port = proxy.start()
        endpoint = f"http://{HOST}:{port}/devstoreaccount1"
        proxied = {**svc.storage_options, "azure_storage_endpoint": endpoint}
        env = {**svc.env, "AZURE_STORAGE_ENDPOINT": endpoint}
        return Emulator(name, svc, proxy, "az://bench", svc.storage_options, proxied, env, endpoint)
    svc = MotoServer.start(workdir / "moto")
    svc.create_bucket("bench")
    proxy = CountingProxy(HOST, svc.port)
    port = proxy.start()
    endpoint = f"http://{HOST}:{port}"
    proxied = {**svc.storage_options, "AWS_ENDPOINT_URL": endpoint}
    return Emulator(name, svc, proxy, "s3://bench", svc.storage_options, proxied, dict(proxied), endpoint)


def upload(table: Path, uri: str, opts: dict[str, str]) -> None:
    import obstore
    from services import open_obstore

    store = open_obstore(uri, opts)
    for p in sorted(table.rglob("*")):
        if p.is_file() and not p.name.endswith(".crc"):
            obstore.put(store, str(p.relative_to(table)), p.read_bytes())


# --------------------------------------------------------------------------------------------- measuring
@dataclass
class Cell:
    requests: float = float("nan")
    log_requests: float = float("nan")
    bytes: float = float("nan")
    data_bytes: float = float("nan")
    footer_bytes: float = float("nan")
    index_bytes: float = float("nan")
    chunk_bytes: float = float("nan")
    footers_read: float = float("nan")
    pages_per_column: float = float("nan")
    seconds: float = float("nan")
    rows: int = -1
    error: str | None = None


def measure(reader: Reader, uri: str, q: Query, proxy: CountingProxy, facts: LocalFacts, runs: int) -> Cell:
    samples: list[dict[str, float]] = []
    rows = -1
    for _ in range(runs):
        proxy.reset()
        t0 = time.perf_counter()
        rows = reader.run(uri, q)
        seconds = time.perf_counter() - t0
        c = proxy.snapshot()
        split = {"footer": 0, "index": 0, "chunks": 0}
        footers: dict[str, int] = {}
        ranges: dict[str, list[tuple[int, int]]] = {}
        for f in c.fetches:
            name = f.key.rsplit("/", 1)[-1]
            spans = facts.spans.get(name)
            if spans is None:
                continue
            part = _pages.classify(spans, f.start, f.length)
            for k, v in part.items():
                split[k] += v
            if part["footer"]:
                footers[name] = footers.get(name, 0) + 1
            ranges.setdefault(name, []).append((f.start, f.length))
        pages = [n for name, rs in ranges.items() for n in _pages.data_pages_touched(facts.spans[name], rs).values()]
        samples.append(
            {
                "requests": c.requests,
                "log_requests": c.log_requests,
                "bytes": c.bytes,
                "data_bytes": c.data_bytes,
                "footer_bytes": split["footer"],
                "index_bytes": split["index"],
                "chunk_bytes": split["chunks"],
                "footers_read": sum(footers.values()),
                "pages_per_column": max(pages) if pages else 0,
                "seconds": seconds,
            }
        )
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    return Cell(**med, rows=rows)


def own_bytes(q: Query, rorder: LocalFacts) -> int:
    if not q.nodes:
        return sum(s.size for s in rorder.spans.values())
    return sum(rorder.node_bytes.get(n, 0) for n in q.nodes)


def expected_rows(raw: Path, qs: list[Query]) -> dict[str, int]:
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(str(raw))
    out = {}
    for q in qs:
        t = QueryBuilder().register("t", dt).execute(q.sql).read_all()
        out[q.name] = int(t.num_rows if q.name != "agg" else t.column(0)[0].as_py())
    return out


# --------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="60 k rows instead of 3.04 M")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--emulators", default="azurite,s3")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--spark-jars", help="directory of the Delta (and hadoop-aws) jars for Spark on the JVM")
    ap.add_argument("--workdir", default=str(HERE / ".work" / "query"))
    ap.add_argument("--json", help="write every cell to this file")
    args = ap.parse_args(argv)
    # a terminated bench still stops its emulators, proxies and Sail (the finally blocks run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    layouts = [x for x in args.layouts.split(",") if x]
    readers = [x for x in args.readers.split(",") if x]
    qs = [q for q in queries() if q.name in args.queries.split(",")]
    started = time.time()
    print(f"load average {os.getloadavg()[0]:.2f}; building layouts ({'quick' if args.quick else 'full'}) ...")
    wanted = list(dict.fromkeys(["raw", "rorder", *layouts]))  # rorder's facts are the yardstick
    paths, skipped = build_layouts(work, args.quick, wanted)
    for name, why in skipped.items():
        print(f"  {name}: skipped: {why}")
    layouts = [x for x in layouts if x in paths]
    facts = {name: local_facts(paths[name]) for name in paths}
    expect = expected_rows(paths["raw"], qs)
    for name in layouts:
        f = facts[name]
        sizes = sum(s.size for s in f.spans.values())
        rgs = sum(len({k[0] for k in s.pages}) for s in f.spans.values())
        footer = sum(s.footer[1] - s.footer[0] for s in f.spans.values())
        print(
            f"  {name:<14} {len(f.files):>4} files {sizes / 2**20:7.2f} MiB {rgs:>4} row groups, "
            f"footers {footer / 1024:7.1f} KiB (node {POINT}'s file(s): {f.point_footer / 1024:.1f} KiB); "
            f"log at v{f.versions} ({f.log_bytes / 1024:.0f} KiB), last checkpoint "
            f"{'none' if f.checkpoint is None else 'v' + str(f.checkpoint)}"
        )
    own = {q.name: own_bytes(q, facts["rorder"]) for q in qs}
    jars, spark_reason = spark_jars(args.spark_jars)

    tmp = Path(tempfile.mkdtemp(prefix="query-bench-", dir=work))
    results: dict[tuple[str, str, str, str], Cell] = {}
    notes: list[str] = []
    try:
        for emu_name in [e for e in args.emulators.split(",") if e]:
            emu = start_emulator(emu_name, tmp)
            try:
                prefix = f"{emu.root}/{uuid.uuid4().hex[:8]}"
                for name in layouts:
                    upload(paths[name], f"{prefix}/{layout_dir(Path(), name)}", emu.direct)
                for rname in readers:
                    reader: Reader | None = None
                    try:
                        reader = make_reader(rname, emu, tmp, jars, spark_reason)
                    except Exception as exc:  # a reader that cannot start is reported, not fatal
                        notes.append(f"{emu_name}/{rname}: skipped: {str(exc).splitlines()[0][:160]}")
                        print(f"[{emu_name}] {rname}: skipped: {str(exc).splitlines()[0][:160]}", flush=True)
                        continue
                    try:
                        for name in layouts:
                            uri = f"{prefix}/{layout_dir(Path(), name)}"
                            for q in qs:
                                try:
                                    cell = measure(reader, uri, q, emu.proxy, facts[name], args.runs)
                                    if cell.rows != expect[q.name]:
                                        cell.error = f"{cell.rows} rows, expected {expect[q.name]}"
                                except Exception as exc:
                                    cell = Cell(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                                results[(emu_name, rname, name, q.name)] = cell
                            print(f"[{emu_name}] {rname} {name} done ({time.time() - started:.0f}s)", flush=True)
                    finally:
                        reader.close()
            finally:
                emu.proxy.stop()
                emu.service.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print_table(results, own, facts, qs, layouts, readers, args)
    for n in notes:
        print("note:", n)
    verdicts(results, own, facts, args)
    print(f"load average {os.getloadavg()[0]:.2f}; {time.time() - started:.0f}s")
    if args.json:
        Path(args.json).write_text(
            json.dumps([{"key": list(k), **v.__dict__} for k, v in results.items()], indent=1, default=str)
        )
    return 0


def make_reader(name: str, emu: Emulator, tmp: Path, jars: list[str], spark_reason: str | None) -> Reader:
    if name == "deltalake":
        return DeltalakeReader(emu.proxied)
    if name == "polars":
        return PolarsReader(emu.proxied)
    if name == "pyarrow":
        return PyarrowReader(emu.proxied)
    if name == "sail":
        return SailReader(emu.env, tmp / emu.name)
    if name == "spark":
        if spark_reason:
            raise RuntimeError(spark_reason)
        return SparkReader(jars, emu.endpoint, emu.name)
    if name == "spark-classic":  # hadoop-aws's classic input stream (the default before 3.4.3 / 3.5.0)
        if spark_reason:
            raise RuntimeError(spark_reason)
        return SparkReader(jars, emu.endpoint, emu.name, stream="classic")
    raise RuntimeError(f"unknown reader {name}")


def _kb(n: float) -> str:
    return "n/a" if n != n else f"{n / 1024:,.1f}"


def print_table(
    results: dict[tuple[str, str, str, str], Cell],
    own: dict[str, int],
    facts: dict[str, LocalFacts],
    qs: list[Query],
    layouts: list[str],
    readers: list[str],
    args: argparse.Namespace,
) -> None:
    print()
    print("own = compressed bytes of the queried nodes' row groups in the rorder layout (agg: the whole table);")
    print("req = requests (log = of them to _delta_log); KiB = response bytes (data = of .parquet files: footer /")
    print("page index / column chunks); x own = data bytes / own; pg = most data pages read in one column chunk;")
    print(f"ms = median latency of {args.runs} runs, each opening the table; 'x raw' = ratio to the raw layout")
    for q in qs:
        print(f"\n== {q.name}: {q.sql}   (own {_kb(own[q.name])} KiB)")
        head = (
            f"{'emulator':<8} {'reader':<9} {'layout':<11} {'req':>5} {'log':>4} {'KiB':>9} {'data KiB':>9} "
            f"{'footer':>7} {'index':>6} {'chunks':>8} {'x own':>7} {'pg':>3} {'ms':>7} "
            f"{'KiB x raw':>9} {'ms x raw':>8}"
        )
        print(head)
        for emu in args.emulators.split(","):
            for r in readers:
                base = results.get((emu, r, "raw", q.name))
                for lay in layouts:
                    c = results.get((emu, r, lay, q.name))
                    if c is None:
                        continue
                    if c.error:
                        print(f"{emu:<8} {r:<9} {lay:<11} error: {c.error}")
                        continue
                    xb = c.data_bytes / base.data_bytes if base and not base.error and base.data_bytes else float("nan")
                    xs = c.seconds / base.seconds if base and not base.error else float("nan")
                    print(
                        f"{emu:<8} {r:<9} {lay:<11} {c.requests:>5.0f} {c.log_requests:>4.0f} {_kb(c.bytes):>9} "
                        f"{_kb(c.data_bytes):>9} {_kb(c.footer_bytes):>7} {_kb(c.index_bytes):>6} "
                        f"{_kb(c.chunk_bytes):>8} {c.data_bytes / own[q.name]:>7.2f} {c.pages_per_column:>3.0f} "
                        f"{c.seconds * 1000:>7.0f} {xb:>9.3f} {xs:>8.2f}"
                    )


def verdicts(
    results: dict[tuple[str, str, str, str], Cell],
    own: dict[str, int],
    facts: dict[str, LocalFacts],
    args: argparse.Namespace,
) -> None:
    """The targets, for each emulator x reader on the value-per-row-group layouts (rorder and its kin)."""
    print(
        "\ntargets (a reader 'prunes' when its point query reads < 1/3 of the layout's column chunks; footers ="
        f" those of the files holding node {POINT}, counted once)"
    )
    for (emu, r, lay, qn), c in sorted(results.items()):
        if not (lay.startswith("rorder") or lay == "tiered") or qn != "point" or c.error:
            continue
        f = facts[lay]
        footer_once = f.point_footer
        total_chunks = sum(s.index[0] for s in f.spans.values())
        prunes = c.chunk_bytes < total_chunks / 3
        raw = results.get((emu, r, "raw", "point"))
        limit = 1.2 * (own["point"] + footer_once)
        a = c.data_bytes <= limit
        b = raw is not None and not raw.error and raw.data_bytes >= 10 * c.data_bytes
        w = results.get((emu, r, lay, "window"))
        pages = "n/a" if w is None or w.error else f"{w.pages_per_column:.0f}"
        page_ok = w is not None and not w.error and w.pages_per_column <= 2
        fewer = raw.data_bytes / c.data_bytes if raw and not raw.error and c.data_bytes else float("nan")
        print(
            f"  {emu:<8} {r:<9} {lay:<12} prunes={'yes' if prunes else 'NO '} "
            f"chunks {c.chunk_bytes / own['point']:.2f}x own, footer bytes {c.footer_bytes / footer_once:.2f}x; "
            f"point {_kb(c.data_bytes)} KiB <= 1.2 x (own {_kb(own['point'])} + footer {_kb(footer_once)}) "
            f"= {_kb(limit)}: {'PASS' if a else 'FAIL'}; raw/this {fewer:.1f}x >= 10: {'PASS' if b else 'FAIL'}; "
            f"window pages/column {pages} <= 2: {'PASS' if page_ok else 'FAIL'}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
