"""A week in the life of the sensor table, compressed in time, on Azurite (or moto server).

Every simulated five minutes the users' pipeline appends one reading per node (random row order) to two
tables: a ``node_id_range``-partitioned table through :class:`deltaextras.RangeAppender`, and an
unpartitioned table maintained with ``by="node_id"`` through ``write_deltalake`` (a week of Spark appends
does not fit a run: both tables are appended through deltalake). Both use ``layout="tiered"``
(docs/tiered.md, for hourly runs) and deletion vectors.

Every simulated hour the real ``orchestrator/`` timer handler plans and sends to an Azurite queue, then
``--workers`` processes drain it through the real ``worker/`` handler with the host's queue semantics
(:class:`deltaextras.app.edges.local_host.LocalHost`: lease, dequeue count, poison queue), group commit as
the app configures it. Every simulated day (``--day-hours`` hours): a manual rerun message, a duplicated
delivery, one body that is not base64 (the injected poison), one worker SIGKILLed after its first output
file (mid-rewrite) and one SIGKILLed after its commit landed (before the acknowledgement), one storage
reply dropped after the write landed (the tests' fault proxy, in front of a worker), the users' UPDATE
racing the workers (an UPDATE and a MERGE through Sail when the run has a Sail server, else deltalake's
UPDATE); in the day's last hour a retention delete with deletion vectors
lands before the hourly run (which purges its vectors) and ``vacuum`` follows the run.

``--cloud aws`` lives the same week on moto server through the Lambda adapter: S3 tables, the
orchestrator Lambda on a scheduled event, the worker Lambda fed by an emulated SQS event source mapping
(batches of one; failures made visible again; the queue's redrive policy and our handler fill the
dead-letter queue), the same faults (the poison body is not JSON there).

``--clustered`` (with ``--cloud aws``) adds a third table the way its users keep it: created ``CLUSTER BY
(node_id)`` with deletion vectors and appended every five minutes by Apache Spark with Delta Lake (the JVM,
through S3A on moto S3; Azurite is out of Spark's reach), its UPDATE and racing MERGE through the same
Spark session; the same function app maintains it by value ranges. A week of Spark appends does not fit a
run at full size: this is the shorter run beside the week.

After every hour: the content through deltalake and polars against the bench's own ground truth
(checksums, not counts), stored bytes by kind beside live bytes, log versions, write amplification,
point-query bytes and requests through deltalake and Sail (a counting proxy), orchestrator and worker seconds
and peak memory, outcomes. One CSV row per hour; a table per day and the targets' verdicts at the end;
a PNG when matplotlib is installed.

    python bench/soak.py --nodes 1500 --hours 6
    python bench/soak.py --cloud aws --nodes 300 --days 1
    python bench/soak.py --cloud aws --clustered --nodes 300 --hours 12 --day-hours 6

:func:`run_week` is the driver; ``tests/app/test_week.py`` runs a CI-sized week through it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(BENCH))

from _soak_report import daily_table, plot, verdicts  # noqa: E402

STEP_US = 300_000_000  # five minutes
STEPS_PER_HOUR = 12
START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
RANGE_WIDTH = 100  # nodes per node_id_range partition
TABLE_OPTIONS = {"sort_by": ["utc_time"], "unique_by": ["node_id", "utc_time"], "layout": "tiered"}
FAULT_LEASE = 3.0  # seconds a killed worker's message stays invisible
WORKER_LEASE = 300.0
DRAIN_IDLE = 6.0  # seconds a worker waits on an empty queue before it exits (a killed worker's lease is 3 s)
# Superseded checkpoints are kept as long as a simulated hour lasts (the wall seconds of the last one, at
# least this many) instead of the product's hour: the bytes stored at a day's end should be those of a day
# lived in real time, and a worker's read of the log should race pruning as often as it would in one.
CHECKPOINT_KEEP_SECONDS = 10.0
COLUMNS = ("node_id", "utc_time", "temperature", "humidity", "voltage", "quality")


@dataclass
class WeekConfig:
    """What one run simulates. ``hours`` (when set) replaces ``days * 24``."""

    nodes: int = 15_000
    days: int = 7
    hours: int | None = None
    day_hours: int = 24  # simulated hours per "day": daily events run at the end of each
    workers: int = 4
    retention_hours: float = 72.0  # the retention delete removes readings older than this
    vacuum_hours: int = 0  # vacuum also after every this many hours' run (0: at each day's end only)
    faults: bool = True
    point_nodes: int = 3
    polars: bool = True
    sail: bool = True  # the point query through Sail too (a Spark Connect server reading through the proxy)
    table_options: dict[str, Any] = field(default_factory=dict)  # more keys of both tables' entries
    cloud: str = "azure"  # "azure": the function app on Azurite; "aws": the Lambda adapter on moto S3 + SQS
    clustered: bool = False  # a third table CLUSTER BY (node_id), written by Apache Spark (cloud "aws" only)
    seed: int = 7

    @property
    def total_hours(self) -> int:
        return self.hours if self.hours is not None else self.days * 24


@dataclass
class HourFigures:
    """One CSV row: one table after one simulated hour."""

    hour: int
    day: int
    table: str
    rows_expected: int = 0
    rows_deltalake: int = 0
    rows_polars: int = -1
    exact_deltalake: bool = False
    exact_polars: bool | None = None
    live_files: int = 0
    live_bytes: int = 0
    stored_bytes: int = 0
    stored_by_kind: str = ""
    log_versions: int = 0
    appended_bytes: int = 0
    maintenance_bytes: int = 0
    write_amplification: float = 0.0
    point_bytes: int = 0
    point_requests: int = 0
    point_x_own: float = 0.0
    node_bytes: float = 0.0  # the node's share of the live bytes (its rows / all rows)
    orchestrator_s: float = 0.0
    orchestrator_rss_mb: float = 0.0
    worker_median_s: float = 0.0
    worker_p99_s: float = 0.0
    worker_rss_mb: float = 0.0
    committed: int = 0
    skipped: int = 0
    retried: int = 0
    dead_lettered: int = 0
    injected_poison: int = 0
    faults: str = ""
    sail_point_bytes: int = -1  # -1: not measured
    sail_point_requests: int = -1
    sail_point_x_own: float = 0.0
    append_s: float = 0.0  # wall seconds of the hour's appends (the same on every table's row)
    run_s: float = 0.0  # the hourly run: plan, faults, workers, vacuum
    check_s: float = 0.0  # the checks and figures of all tables after the run


@dataclass
class WeekResult:
    """Every hourly row, the faults that fired, and the failures of the correctness targets."""

    rows: list[HourFigures] = field(default_factory=list)
    faults_fired: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    csv_path: str = ""


# ----------------------------------------------------------------------------- child processes
def _compress_time() -> float:
    """Scales the product's wall-clock wait before superseded checkpoints go to a simulated hour: the wall
    seconds the last simulated hour took (``SOAK_HOUR_SECONDS``, set by the driver), at least
    :data:`CHECKPOINT_KEEP_SECONDS`; returns the value it replaced."""
    from deltaextras.core import checkpoint_prune

    hour = float(os.environ.get("SOAK_HOUR_SECONDS") or 0.0)
    before, checkpoint_prune.KEEP_SECONDS = checkpoint_prune.KEEP_SECONDS, max(CHECKPOINT_KEEP_SECONDS, hour)
    return before


def _child_main(argv: list[str]) -> int:
    """``soak.py --child MODE ...``: the orchestrator or a worker, in its own process."""
    mode, out = argv[0], argv[1]
    _compress_time()
    from deltaextras.app import work

    kill = argv[2] if len(argv) > 2 else ""
    if kill in ("after_output", "after_commit"):
        original = work.rorder_single

        def die(*_a: Any) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        def rorder_then_die(*args: Any, **kwargs: Any) -> Any:
            kwargs["hooks"] = {kill: die}
            return original(*args, **kwargs)

        work.rorder_single = rorder_then_die  # type: ignore[assignment]
    # a killed worker's message comes back after FAULT_LEASE; one delivery for a fault, all of them otherwise
    lease, once = (FAULT_LEASE, True) if kill in ("after_output", "after_commit") else (WORKER_LEASE, kill == "once")
    run = _lambda_child if os.environ.get("SOAK_CLOUD") == "aws" else _functions_child
    summary = run(mode, lease, once)
    summary["peak_rss_mb"] = _own_peak_rss_mb()
    Path(out).write_text(json.dumps(summary, default=str))
    return 0


def _own_peak_rss_mb() -> float | None:
    """This process's own peak RSS since it started its program (``VmHWM``); None where ``/proc`` has no
    such line. Not ``ru_maxrss``: Linux keeps the high-water mark of the forked copy of the parent across
    ``exec``, so a child of the driver would report at least the driver's own RSS (the ground truth it
    holds grows every simulated hour)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _functions_child(mode: str, lease: float, once: bool) -> dict[str, Any]:
    """The orchestrator's timer or the worker's queue trigger, through the local Functions host."""
    from deltaextras.app.edges.local_host import LocalHost

    if mode == "timer":
        return LocalHost(REPO).run_timer().to_dict()
    host = LocalHost(REPO, lease_seconds=lease, visibility_timeout=1)
    if once:
        return host.drain(max_deliveries=1, idle_timeout=5).to_dict()
    return host.drain(idle_timeout=DRAIN_IDLE).to_dict()


def _lambda_child(mode: str, lease: float, once: bool) -> dict[str, Any]:
    """The orchestrator Lambda on a scheduled event, or the worker Lambda fed by the SQS event source mapping
    (batches of one, as ``infra/terraform/aws/lambda.tf`` maps them)."""
    from lambda_source import load_handlers, run_event_source

    from deltaextras.app.edges.local_host import Delivery, RunSummary, tap_outcomes
    from deltaextras.app.edges.sqs import SqsSender

    handlers = load_handlers()
    summary = RunSummary()
    if mode == "timer":
        try:
            handlers.orchestrator_handler({"source": "aws.events", "detail-type": "Scheduled Event"}, None)
            summary.orchestrator = "succeeded"
        except Exception as exc:  # the run reports it as a failure of the hour
            summary.orchestrator = f"failed: {type(exc).__name__}: {exc}"
        return summary.to_dict()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        with tap_outcomes() as tap:
            response = handlers.worker_handler(event, context)
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for record in event["Records"]:  # batches of one: the record of this invocation is the last
            done = tap.records[-1] if tap.records else {}
            summary.deliveries.append(
                Delivery(
                    record["messageId"],
                    int(record["attributes"].get("ApproximateReceiveCount", 1)),
                    "failed" if record["messageId"] in failed else "succeeded",
                    seconds=float(done.get("seconds", 0.0)),
                    outcome=done.get("status"),
                    table=done.get("table"),
                    partition=done.get("partition"),
                    reason=done.get("reason"),
                )
            )
        return response

    sqs = SqsSender.from_env(None, os.environ).client
    run_event_source(
        sqs,
        os.environ["DELTAEXTRAS_QUEUE_URL"],
        handler,
        rounds=None,
        batch_size=1,
        visibility_timeout=max(1, round(lease)),
        idle_timeout=5 if once else DRAIN_IDLE,
        max_invocations=1 if once else None,
    )
    return summary.to_dict()


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    out: Path
    started: float
    seconds: float = 0.0
    rss_mb: float = 0.0
    returncode: int | None = None

    def wait(self) -> Child:
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = self.returncode = os.waitstatus_to_exitcode(status)
        self.seconds = time.monotonic() - self.started
        summary = self.summary()
        own = summary.get("peak_rss_mb")
        # ru_maxrss counts the driver's pages the child had before exec: only a fallback where /proc has no
        # VmHWM (see _own_peak_rss_mb); a child killed on purpose reported nothing and counts 0
        fallback = usage.ru_maxrss / 1024 if summary else 0.0
        self.rss_mb = float(own) if own is not None else fallback
        return self

    def summary(self) -> dict[str, Any]:
        return json.loads(self.out.read_text()) if self.out.exists() else {}


def _spawn(workdir: Path, mode: str, *extra: str, env: dict[str, str] | None = None) -> Child:
    out = workdir / f"{mode}-{uuid.uuid4().hex[:8]}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(out), *extra]
    log = open(workdir / "children.log", "ab")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=log, stderr=log)
    log.close()
    return Child(proc, out, time.monotonic())


# ----------------------------------------------------------------------------- the week
class Week:
    """Two tables on one Azurite, one function app, the ground truth, the figures."""

    def __init__(self, cfg: WeekConfig, side: Any, workdir: Path) -> None:
        import pyarrow as pa

        self.cfg, self.side, self.workdir = cfg, side, workdir
        self.rng = random.Random(cfg.seed)
        self.opts = dict(side.opts)
        base = uuid.uuid4().hex[:8]
        self.uris = {"partitioned": f"{side.root}/{base}-ranged", "unpartitioned": f"{side.root}/{base}-flat"}
        if cfg.clustered:
            self.uris["clustered"] = f"{side.root}/{base}-clustered"
        self.truth: dict[str, list[pa.Table]] = {name: [] for name in self.uris}
        self.seen_paths: dict[str, set[str]] = {name: set() for name in self.uris}
        self.log_cursor = dict.fromkeys(self.uris, -1)
        self.bytes_by_op: dict[str, dict[str, int]] = {name: {"appended": 0, "maintenance": 0} for name in self.uris}
        self.result = WeekResult()
        self.step = 0
        self.proxy: Any = None
        self.sail: Any = None  # a Spark Connect session of a Sail server reading through the proxy
        # the users' pipeline on Sail: a second server, on the storage directly (the proxy counts the point
        # queries only; through it, a MERGE of a week's table takes minutes of the fault hour)
        self.users_sail: Any = None
        self.gave_up: list[str] = []  # the users' changes given up this hour (the racing thread adds)
        self.spark: Any = None  # the users' Apache Spark session (JVM) writing the clustered table
        self.spark_uri = ""  # the clustered table as Spark names it (s3a://)
        tables = [
            {"uri": self.uris["partitioned"], **TABLE_OPTIONS, **cfg.table_options},
            {"uri": self.uris["unpartitioned"], "by": "node_id", **TABLE_OPTIONS, **cfg.table_options},
        ]
        if cfg.clustered:  # the clustering column is the table's: no "by"
            tables.append({"uri": self.uris["clustered"], **TABLE_OPTIONS, **cfg.table_options})
        self.env = {**side.app_env(json.dumps(tables)), "SOAK_CLOUD": side.name}
        self._saved_env = {name: os.environ.get(name) for name in [*self.env, *side.cleared, "SOAK_HOUR_SECONDS"]}
        os.environ.update(self.env)
        for name in side.cleared:
            os.environ.pop(name, None)

    def restore_env(self) -> None:
        """The process environment as it was before this week (a test process runs other tests after it)."""
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    # ------------------------------------------------------------------ data
    def _batch(self) -> Any:
        import pyarrow as pa

        ids = list(range(self.cfg.nodes))
        self.rng.shuffle(ids)
        t = START_US + self.step * STEP_US
        r = self.rng
        return pa.table(
            {
                "node_id": pa.array(ids, pa.int64()),
                "utc_time": pa.array([t] * len(ids), pa.timestamp("us", tz="UTC")),
                "temperature": pa.array([round(r.gauss(20, 5), 2) for _ in ids], pa.float64()),
                "humidity": pa.array([round(r.uniform(0, 100), 1) for _ in ids], pa.float64()),
                "voltage": pa.array([round(r.uniform(3, 4.2), 3) for _ in ids], pa.float64()),
                "quality": pa.array([0] * len(ids), pa.int32()),
            }
        )

    def create(self) -> None:
        from deltalake import write_deltalake

        from deltaextras import RangeSpec, create_range_table, enable_deletion_vectors

        batch = self._batch()
        create_range_table(
            self.uris["partitioned"],
            batch.schema,
            RangeSpec.fixed_width("node_id", RANGE_WIDTH),
            storage_options=self.opts,
        )
        write_deltalake(self.uris["unpartitioned"], batch.schema.empty_table(), storage_options=self.opts)
        for uri in (self.uris["partitioned"], self.uris["unpartitioned"]):
            enable_deletion_vectors(uri, storage_options=self.opts)
        if self.cfg.clustered:
            self._create_clustered()

    def _create_clustered(self) -> None:
        """The clustered table as its users create it: through Spark SQL, ``CLUSTER BY (node_id)``, with
        deletion vectors."""
        import delta_spark

        if self.spark is None:
            reason = delta_spark.unavailable()
            if reason:
                raise SystemExit(f"--clustered needs Apache Spark with Delta Lake: {reason}")
            self.spark = delta_spark.start_session("deltaextras-soak")
        self.spark_uri = delta_spark.s3a_uri(self.spark, self.uris["clustered"], self.opts)
        self.spark.sql(
            f"CREATE TABLE delta.`{self.spark_uri}` (node_id BIGINT, utc_time TIMESTAMP, temperature DOUBLE, "
            "humidity DOUBLE, voltage DOUBLE, quality INT) USING delta CLUSTER BY (node_id) "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )

    def append(self) -> None:
        from deltalake import write_deltalake

        from deltaextras import append_ranged

        batch = self._batch()
        append_ranged(self.uris["partitioned"], batch, storage_options=self.opts)
        write_deltalake(self.uris["unpartitioned"], batch, mode="append", storage_options=self.opts)
        if self.spark is not None:
            self.spark.createDataFrame(batch).write.format("delta").mode("append").save(self.spark_uri)
        for name in self.uris:
            self.truth[name].append(batch)
        self.step += 1

    def expected(self, name: str) -> Any:
        import pyarrow as pa

        table = pa.concat_tables(self.truth[name])
        self.truth[name] = [table]
        return table

    def _fired(self, name: str, n: int = 1) -> None:
        self.result.faults_fired[name] = self.result.faults_fired.get(name, 0) + n

    # ------------------------------------------------------------------ one hour
    def hour(self, h: int) -> None:
        cfg = self.cfg
        day = h // cfg.day_hours
        in_day = h % cfg.day_hours
        fault_hour = cfg.faults and in_day == min(1, cfg.day_hours - 1)
        started = time.monotonic()
        for _ in range(STEPS_PER_HOUR):
            self.append()
        appended = time.monotonic()
        last_hour = in_day == cfg.day_hours - 1
        if last_hour:  # the retention delete lands before the hourly run, which purges its vectors
            self._retention_delete(day)
        timer = _spawn(self.workdir, "timer").wait()
        if timer.summary().get("orchestrator") != "succeeded":
            self.result.failures.append(f"hour {h + 1}: orchestrator {timer.summary().get('orchestrator')}")
        injected_poison, faults, children = 0, [], []
        racer: threading.Thread | None = None
        if fault_hour:
            faults, injected_poison, children, racer = self._inject(h)
        workers = [_spawn(self.workdir, "drain") for _ in range(cfg.workers)]
        for c in workers:
            c.wait()
        if racer is not None:
            racer.join()
        faults += self.gave_up
        self.gave_up = []
        # a worker that exited early while a killed worker's message was still leased: drain what is left
        if self.side.pending():
            workers.append(_spawn(self.workdir, "drain").wait())
        deliveries = [d for c in children + workers for d in c.summary().get("deliveries", [])]
        poisoned = self.side.count_poison()
        dead = poisoned - injected_poison
        if dead:
            reasons = sorted({str(d.get("reason")) for d in deliveries if d.get("outcome") == "dead-letter"})
            self.result.failures.append(f"hour {h + 1}: {dead} dead letter(s) beyond the injected poison: {reasons}")
        if last_hour:
            self._vacuum()
            faults.append("delete+vacuum")
        elif cfg.vacuum_hours and (h + 1) % cfg.vacuum_hours == 0:
            self._vacuum()
            faults.append("vacuum")
        secs = sorted(d["seconds"] for d in deliveries if d.get("result") != "poisoned") or [0.0]
        ran = time.monotonic()
        new: list[HourFigures] = []
        for name, uri in self.uris.items():
            row = HourFigures(hour=h + 1, day=day + 1, table=name, faults=";".join(f for f in faults if f))
            row.orchestrator_s, row.orchestrator_rss_mb = timer.seconds, timer.rss_mb
            row.worker_median_s = statistics.median(secs)
            row.worker_p99_s = secs[min(len(secs) - 1, int(0.99 * len(secs)))]
            row.worker_rss_mb = max((c.rss_mb for c in workers + children), default=0.0)
            mine = [d for d in deliveries if d.get("table") == uri]
            row.committed = sum(1 for d in mine if d.get("outcome") == "committed")
            row.skipped = sum(1 for d in mine if d.get("outcome") == "skipped")
            row.retried = sum(1 for d in mine if d.get("result") == "failed")
            # the poison queue is the app's, not a table's: counted on the first table's row
            first = name == next(iter(self.uris))
            row.dead_lettered, row.injected_poison = (poisoned, injected_poison) if first else (0, 0)
            self._measure(name, uri, row)
            new.append(row)
        checked = time.monotonic()
        for row in new:
            row.append_s, row.run_s, row.check_s = appended - started, ran - appended, checked - ran
        self.result.rows.extend(new)

    def _inject(self, h: int) -> tuple[list[str], int, list[Child], threading.Thread | None]:
        """The day's faults, around the hour's queue: returns (labels, poison injected, children, racer)."""
        from faultproxy import FaultProxy, Rule, through

        from deltaextras.app.enqueue import enqueue

        faults: list[str] = []
        # a duplicated delivery: one planned message sent twice
        if self.side.duplicate_one():
            faults.append("duplicate")
            self._fired("duplicate")
        # a manual rerun of one partition (the recipe of docs/function-app.md)
        enqueue(self.uris["partitioned"], partitions=["0"], storage_options=self.opts)
        faults.append("rerun")
        self._fired("rerun")
        # the injected poison: a body the worker cannot read (not base64 on Azure, not JSON on SQS)
        self.side.send(self.side.poison_body(), raw=True)
        faults.append("poison")
        self._fired("poison")
        children: list[Child] = []
        for kill in ("after_output", "after_commit"):
            c = _spawn(self.workdir, "drain", kill).wait()
            children.append(c)
            if c.returncode == -signal.SIGKILL:
                faults.append(f"killed:{kill}")
                self._fired(f"killed:{kill}")
        # a storage reply dropped after the write landed: one worker's storage goes through the proxy
        with FaultProxy(self.side.port) as proxy:
            rule = proxy.add(Rule("PUT", r"/_delta_log/", "drop"))
            opts = through(self.side.backend, self.opts, proxy)
            c = _spawn(self.workdir, "drain", "once", env={"DELTAEXTRAS_STORAGE_OPTIONS": json.dumps(opts)}).wait()
            children.append(c)
            if rule.fired:
                faults.append("dropped_reply")
                self._fired("dropped_reply", rule.fired)
        # the users' UPDATE: once before the workers drain the queue, once while they run. Spark's log store
        # on S3 writes a log entry without a condition (safe with one driver only, as Delta documents): a
        # commit of ours landing at the same version would be overwritten, so Spark takes its turn before.
        self._race_update(h)
        racing = [name for name in self.uris if name != "clustered"]
        if self.spark is not None:
            self._race_update(h, True, ["clustered"])
        racer = threading.Thread(target=self._race_update, args=(h, True, racing), daemon=True)
        racer.start()
        faults.append("update_race")
        return faults, 1, children, racer

    def _race_update(self, h: int, racing: bool = False, names: list[str] | None = None) -> None:
        """The users' pipeline changes one node's quality flag, retried on a conflict: through Sail when the
        run has a Sail server (an UPDATE before the workers drain, a MERGE while they run), else through
        deltalake's UPDATE; the clustered table's through its Spark session, both before the workers drain.
        The racing change (a MERGE) takes the next node. ``names``: the tables to change (default all)."""
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        node = (h + racing) % self.cfg.nodes
        for name, uri in self.uris.items():
            if names is not None and name not in names:
                continue
            # a pipeline names the partition it changes: without it, Sail's MERGE reads every row group of
            # the table, one request each (minutes on a week's table, during which the workers commit)
            scope = f"node_id_range = {node // RANGE_WIDTH}" if name == "partitioned" else None
            where = f"{scope} AND node_id = {node}" if scope else f"node_id = {node}"
            on = f"t.{scope} AND t.node_id = s.node_id" if scope else "t.node_id = s.node_id"
            clustered = name == "clustered"
            engine = "spark" if clustered else "sail" if self.users_sail is not None else None
            target = f"delta.`{self.spark_uri if clustered else uri}`"
            sql = (
                f"MERGE INTO {target} AS t USING (SELECT CAST({node} AS BIGINT) AS node_id) AS s ON {on} "
                "WHEN MATCHED THEN UPDATE SET quality = CAST(t.quality + 1 AS INT)"
                if racing
                else f"UPDATE {target} SET quality = CAST(quality + 1 AS INT) WHERE {where}"
            )
            for attempt in range(8):
                session = None
                try:
                    if engine is None:
                        DeltaTable(uri, storage_options=self.opts).update(
                            updates={"quality": "quality + 1"}, predicate=where
                        )
                    else:
                        # the users' pipeline is a job: each try opens its own Connect session (Sail ends a
                        # session left idle longer than its `spark.session_timeout_secs`; a day here is longer)
                        session = self.spark if clustered else self.users_sail.session()
                        session.sql(sql).collect()
                except Exception as exc:  # a conflict with a worker's commit, or no session: the pipeline retries
                    what = " ".join(str(exc).split())[:300] or type(exc).__name__
                    print(
                        f"hour {h + 1}: the users' change of {name} failed (attempt {attempt + 1}): {what}",
                        file=sys.stderr,
                        flush=True,
                    )
                    time.sleep(0.5 * (attempt + 1))
                    continue
                finally:
                    if session is not None and not clustered:
                        with contextlib.suppress(Exception):
                            session.stop()
                table = self.expected(name)
                hit = pc.equal(table["node_id"], node)
                quality = pc.if_else(hit, pc.add(table["quality"], 1), table["quality"]).cast(
                    table.schema.field("quality").type
                )
                self.truth[name] = [table.set_column(table.schema.get_field_index("quality"), "quality", quality)]
                self._fired(f"{engine}_{'merge' if racing else 'update'}" if engine else "update_race")
                break
            else:  # eight conflicts in a row: the users' pipeline gives up this change (the truth keeps it out)
                self._fired("users_change_gave_up")
                self.gave_up.append(f"gave_up:{name}")

    def _retention_delete(self, day: int) -> None:
        """The day's retention delete with deletion vectors (readings older than ``retention_hours``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from deltaextras import delete

        cutoff_step = self.step - int(self.cfg.retention_hours * STEPS_PER_HOUR)
        if cutoff_step <= 0:
            cutoff_step = max(1, self.step // 4)
        cutoff = START_US + cutoff_step * STEP_US
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cutoff / 1e6))
        for name, uri in self.uris.items():
            delete(uri, f"utc_time < '{iso}Z'", storage_options=self.opts, mode="deletion_vectors")
            table = self.expected(name)
            keep = pc.greater_equal(table["utc_time"], pa.scalar(cutoff, pa.timestamp("us", tz="UTC")))
            self.truth[name] = [table.filter(keep)]
        self._fired("retention_delete")

    def _vacuum(self) -> None:
        """``vacuum`` after the hourly run (retention 0: the files it replaced and any orphan must go)."""
        from deltaextras import vacuum
        from deltaextras.errors import StorageError

        failed = 0
        for uri in self.uris.values():
            try:
                vacuum(uri, retention_hours=0, dry_run=False, storage_options=self.opts)
            except StorageError as exc:  # the week goes on; the unreferenced bytes left show in the figures
                print(f"vacuum of {uri} failed: {exc}", file=sys.stderr, flush=True)
                failed += 1
        self._fired("vacuum_failed" if failed else "vacuum", max(1, failed))

    # ------------------------------------------------------------------ figures
    def _measure(self, name: str, uri: str, row: HourFigures) -> None:
        import pyarrow as pa
        from deltalake import DeltaTable
        from oracle import rows_checksum

        dt = DeltaTable(uri, storage_options=self.opts)
        expected = rows_checksum(self.expected(name).select(list(COLUMNS)))
        got = rows_checksum(pa.table(dt.scan()).select(list(COLUMNS)))
        row.rows_expected, row.rows_deltalake = expected[0], got[0]
        row.exact_deltalake = got == expected
        if not row.exact_deltalake:
            self.result.failures.append(
                f"hour {row.hour} {name}: deltalake reads {got[0]} rows, expected {expected[0]} (content differs)"
            )
        if self.cfg.polars:
            row.rows_polars, row.exact_polars = self._polars_check(uri, expected)
            if row.exact_polars is False:
                self.result.failures.append(
                    f"hour {row.hour} {name}: polars reads {row.rows_polars} rows, expected {expected[0]}"
                )
        adds = pa.table(dt.get_add_actions(flatten=True)).to_pydict()
        row.live_files, row.live_bytes = len(adds["path"]), int(sum(adds["size_bytes"]))
        kinds = self._stored(uri)
        row.stored_bytes = sum(kinds.values())
        row.stored_by_kind = " ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
        row.log_versions = dt.version()
        self._log_bytes(name, uri, row.log_versions)
        row.appended_bytes = self.bytes_by_op[name]["appended"]
        row.maintenance_bytes = self.bytes_by_op[name]["maintenance"]
        row.write_amplification = row.maintenance_bytes / max(1, row.appended_bytes)
        if self.proxy is not None and row.rows_expected:
            self._point_query(uri, row)

    def _polars_check(self, uri: str, expected: tuple[int, str]) -> tuple[int, bool | None]:
        from oracle import rows_checksum

        try:
            import polars as pl

            df = pl.read_delta(uri, storage_options=self.opts).select(list(COLUMNS))
            got = rows_checksum(df.to_arrow())
        except Exception as exc:  # an engine that cannot read the table is a finding, not a crash
            self.result.failures.append(f"polars could not read {uri}: {type(exc).__name__}: {str(exc)[:200]}")
            return -1, False
        return got[0], got == expected

    def _stored(self, uri: str) -> dict[str, int]:
        """Every stored byte under the table's prefix, by kind."""
        prefix = urlsplit(uri).path.lstrip("/") + "/"
        kinds: dict[str, int] = {}
        for name, size in self.side.objects(prefix):
            key = name[len(prefix) :]
            parts = key.split("/")
            if parts[0] == "_delta_log":
                if len(parts) > 2:
                    kind = f"log/{parts[1]}"
                elif ".checkpoint" in key:
                    kind = "checkpoints"
                elif key.endswith(".json"):
                    kind = "log"
                else:
                    kind = "log/other"
            elif key.endswith(".bin"):
                kind = "deletion_vectors"
            elif key.endswith(".parquet"):
                kind = "data"
            else:
                kind = parts[0] if len(parts) > 1 else "other"
            kinds[kind] = kinds.get(kind, 0) + size
        return kinds

    def _log_bytes(self, name: str, uri: str, version: int) -> None:
        """Bytes of new data files per commit: appends (WRITE) vs maintenance (everything of ours)."""
        prefix = urlsplit(uri).path.lstrip("/")
        for v in range(self.log_cursor[name] + 1, version + 1):
            data = self.side.read(f"{prefix}/_delta_log/{v:020d}.json")
            if data is None:
                continue  # a version only in a checkpoint: nothing new to count
            text = data.decode()
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            op = next((a["commitInfo"].get("operation", "") for a in actions if "commitInfo" in a), "")
            kind = (
                "appended"
                if op in ("WRITE", "CREATE TABLE")
                else "user"
                if op in ("UPDATE", "MERGE")
                else "maintenance"
            )
            for a in actions:
                add = a.get("add")
                if not add:
                    continue
                dv = add.get("deletionVector") or {}
                if add["path"] not in self.seen_paths[name]:
                    self.seen_paths[name].add(add["path"])
                    self.bytes_by_op[name][kind] = self.bytes_by_op[name].get(kind, 0) + int(add["size"])
                if dv.get("storageType") == "u":
                    self.bytes_by_op[name]["maintenance"] += int(dv.get("sizeInBytes", 0))
        self.log_cursor[name] = version

    def _point_query(self, uri: str, row: HourFigures) -> None:
        from deltalake import DeltaTable, QueryBuilder

        opts = self.side.proxied(self.proxy.port)
        node_rows = row.rows_expected / max(1, self.cfg.nodes)
        own = max(1.0, row.live_bytes * node_rows / max(1, row.rows_expected))
        worst_bytes, worst_requests, sail_bytes, sail_requests = 0, 0, 0, 0
        for node in range(0, self.cfg.nodes, max(1, self.cfg.nodes // self.cfg.point_nodes))[: self.cfg.point_nodes]:
            dt = DeltaTable(uri, storage_options=opts)
            self.proxy.reset()
            QueryBuilder().register("t", dt).execute(f"SELECT * FROM t WHERE node_id = {node}").read_all()
            counts = self.proxy.snapshot()
            worst_bytes = max(worst_bytes, counts.data_bytes)
            worst_requests = max(worst_requests, counts.data_requests)
            if self.sail is not None:
                self.proxy.reset()
                self.sail.read.format("delta").load(uri).filter(f"node_id = {node}").collect()
                counts = self.proxy.snapshot()
                sail_bytes = max(sail_bytes, counts.data_bytes)
                sail_requests = max(sail_requests, counts.data_requests)
        row.point_bytes, row.point_requests = worst_bytes, worst_requests
        row.point_x_own, row.node_bytes = worst_bytes / own, own
        if self.sail is not None:
            row.sail_point_bytes, row.sail_point_requests = sail_bytes, sail_requests
            row.sail_point_x_own = sail_bytes / own


def run_week(
    cfg: WeekConfig,
    service: Any,
    workdir: Path,
    *,
    csv_path: Path | None = None,
    on_hour: Callable[[list[HourFigures]], None] | None = None,
    point_queries: bool = True,
    spark: Any = None,
) -> WeekResult:
    """Simulate ``cfg.total_hours`` hours on ``service`` (Azurite, or moto server when ``cfg.cloud`` is
    "aws"); returns every hourly row and the correctness failures. ``spark``: a running Apache Spark session
    with Delta Lake for the clustered table (``cfg.clustered``), left running; without it one is started
    and stopped."""
    from _proxy import CountingProxy
    from _soak_clouds import AwsSide, AzureSide

    from deltaextras.core import checkpoint_prune

    week = Week(cfg, AwsSide(service) if cfg.cloud == "aws" else AzureSide(service), workdir)
    week.spark = spark
    writer = None
    fh = None
    sail = users_sail = None
    keep_seconds = _compress_time()
    try:
        week.create()
        if point_queries:
            week.proxy = CountingProxy("127.0.0.1", week.side.port)
            week.proxy.start()
            if cfg.sail:
                from services import SailServer

                sail = SailServer.start(workdir / "sail", env=week.side.proxied_env(week.proxy.port))
                week.sail = sail.session()
                users_sail = SailServer.start(workdir / "sail-users", env=week.side.direct_env())
                week.users_sail = users_sail
        if csv_path is not None:
            fh = open(csv_path, "w", newline="")  # noqa: SIM115
            writer = csv.DictWriter(fh, fieldnames=list(asdict(HourFigures(0, 0, "")).keys()))
            writer.writeheader()
            week.result.csv_path = str(csv_path)
        for h in range(cfg.total_hours):
            before = len(week.result.rows)
            started = time.monotonic()
            week.hour(h)
            # the product keeps superseded checkpoints an hour: here, as long as a simulated hour lasts
            os.environ["SOAK_HOUR_SECONDS"] = f"{time.monotonic() - started:.1f}"
            _compress_time()  # in this process too: its retention delete and vacuum prune checkpoints
            new = week.result.rows[before:]
            if writer is not None and fh is not None:
                writer.writerows(asdict(r) for r in new)
                fh.flush()
            if on_hour:
                on_hour(new)
    finally:
        if fh:
            fh.close()
        # the sessions this run opened (a Spark session handed in stays running)
        for session in (week.sail, week.spark if spark is None else None):
            if session is not None:
                with contextlib.suppress(Exception):
                    session.stop()
        for server in (sail, users_sail):
            if server is not None:
                server.stop()
        if week.proxy is not None:
            week.proxy.stop()
        week.restore_env()
        checkpoint_prune.KEEP_SECONDS = keep_seconds
    return week.result


def read_csv(path: Path) -> WeekResult:
    """The hourly rows of a run's CSV (a run stopped early included), for :func:`report`."""

    def value(kind: str, text: str) -> Any:
        if kind == "bool | None":
            return None if text == "" else text == "True"
        return {"int": int, "float": float, "bool": lambda t: t == "True"}.get(kind, str)(text)

    kinds = {f.name: str(f.type) for f in fields(HourFigures)}
    with open(path, newline="") as fh:
        rows = [HourFigures(**{k: value(kinds[k], v) for k, v in row.items()}) for row in csv.DictReader(fh)]
    fired: dict[str, int] = {}
    for r in rows[:: max(1, len({r.table for r in rows}))]:  # one row per hour
        for fault in filter(None, r.faults.split(";")):
            fired[fault] = fired.get(fault, 0) + 1
    return WeekResult(rows=rows, faults_fired=fired, csv_path=str(path))


def report(result: WeekResult, out: Path) -> None:
    """Prints the daily table, the targets' verdicts and the faults; draws the PNG beside the CSV."""
    print("\n" + daily_table(result.rows))
    print("\nTargets:")
    for name, ok, figure in verdicts(result):
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {figure}")
    print(f"\nfaults fired: {result.faults_fired}")
    for f in result.failures:
        print(f"  failure: {f}")
    if plot(result.rows, out / "soak.png"):
        print(f"PNG: {out / 'soak.png'}")
    print(f"CSV: {out / 'soak.csv'}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child_main(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=15_000)
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--hours", type=int, default=None, help="simulated hours (replaces --days)")
    p.add_argument("--day-hours", type=int, default=24, help="simulated hours per day (daily events)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--retention-hours", type=float, default=72.0)
    p.add_argument(
        "--vacuum-hours",
        type=int,
        default=0,
        help="vacuum also after every N hours' run, not only at the day's end (Azurite's cost per delete "
        "grows with the blobs it holds: at 15,000 nodes a day of replaced files takes it hours to delete)",
    )
    p.add_argument("--no-faults", action="store_true")
    p.add_argument("--point-nodes", type=int, default=3, help="nodes queried through the counting proxy")
    p.add_argument("--no-sail", action="store_true", help="point queries through deltalake only")
    p.add_argument("--min-row-group-bytes", help="the tables' min_row_group_bytes (default: the layout's)")
    p.add_argument("--max-footer-bytes", help="the tables' max_footer_bytes (default: the layout's)")
    p.add_argument(
        "--cloud",
        choices=("azure", "aws"),
        default="azure",
        help="azure: the function app on Azurite; aws: the Lambda adapter on moto S3 + SQS",
    )
    p.add_argument(
        "--clustered",
        action="store_true",
        help="a third table CLUSTER BY (node_id), created and appended by Apache Spark with Delta Lake "
        "(needs --cloud aws and the Delta jars: DELTAEXTRAS_SPARK_JARS)",
    )
    p.add_argument("--out", default=str(BENCH / ".work" / "soak"))
    p.add_argument("--report", metavar="CSV", help="print the table and verdicts of an earlier run's CSV, and exit")
    a = p.parse_args(argv)
    if a.report:
        report(read_csv(Path(a.report)), Path(a.report).parent)
        return 0
    if a.clustered and a.cloud != "aws":
        p.error("--clustered needs --cloud aws: Spark reaches moto S3 through S3A, and Azurite is out of its reach")
    from services import Azurite, MotoServer

    cfg = WeekConfig(
        nodes=a.nodes,
        days=a.days,
        hours=a.hours,
        day_hours=a.day_hours,
        workers=a.workers,
        retention_hours=a.retention_hours,
        vacuum_hours=a.vacuum_hours,
        faults=not a.no_faults,
        point_nodes=a.point_nodes,
        sail=not a.no_sail,
        cloud=a.cloud,
        clustered=a.clustered,
        table_options={
            k: v
            for k, v in (("min_row_group_bytes", a.min_row_group_bytes), ("max_footer_bytes", a.max_footer_bytes))
            if v is not None
        },
    )
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"soak: {asdict(cfg)} -> {out}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        az = MotoServer.start(Path(tmp)) if cfg.cloud == "aws" else Azurite.start(Path(tmp))
        try:

            def show(rows: list[HourFigures]) -> None:
                for r in rows:
                    print(
                        f"hour {r.hour} {r.table}: exact={r.exact_deltalake}/{r.exact_polars} rows={r.rows_deltalake} "
                        f"live={r.live_bytes / 1e6:.1f}MB stored={r.stored_bytes / 1e6:.1f}MB v={r.log_versions} "
                        f"wa={r.write_amplification:.2f} pq={r.point_bytes / 1024:.0f}KiB/{r.point_requests}req "
                        f"orch={r.orchestrator_s:.1f}s workers p99={r.worker_p99_s:.1f}s "
                        f"append/run/check={r.append_s:.0f}/{r.run_s:.0f}/{r.check_s:.0f}s faults={r.faults}",
                        flush=True,
                    )

            result = run_week(cfg, az, out, csv_path=out / "soak.csv", on_hour=show)
        finally:
            az.stop()
    report(result, out)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
