"""One race harness for the tests where Apache Spark with Delta Lake writes a table while our operations
commit to it: the ledger that models what each side committed, Spark's appends, DELETEs, UPDATEs and MERGEs,
our rorder and delete loops, the threads that run the sides, and the check of the content afterwards.

Model: every row has a unique key ``k`` and an update counter ``upd``. A key is expected iff it was
appended (or inserted by a MERGE) by a commit that succeeded and no successful delete named it; its
``upd`` is the number of successful UPDATE/MERGE commits that named it. A delete or update names only
keys that were committed before it started, so the model needs no commit order.

The race tables have the columns ``k BIGINT, upd BIGINT, node BIGINT, node_range BIGINT`` (``node = k % 7``,
``node_range`` always 0): :func:`create_race_table`.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from oracle import content_checksum

from deltaextras.errors import DeltaExtrasError
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.rorder.rorder import rorder

SPARK_CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_CONCURRENT_TRANSACTION",
)


class Ledger:
    """What each side committed, with the lock that makes the model consistent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[int] = set()  # appended and committed, minus keys named by a committed delete
        self.deleted: set[int] = set()
        self.upd: Counter[int] = Counter()
        self.commits: Counter[str] = Counter()
        self.conflicts: Counter[str] = Counter()
        self.next_key = 0
        self.history: list[tuple[float, str, tuple[int, ...]]] = []  # (time, committed operation, keys it named)

    def record(self, op: str, keys: Iterable[int]) -> None:
        """Notes that ``op`` committed naming ``keys`` (the caller holds the lock)."""
        self.history.append((time.monotonic(), op, tuple(keys)))

    def story(self, keys: Iterable[int]) -> list[str]:
        """The committed operations that named any of ``keys``, in order: what a failed check quotes."""
        wanted = set(keys)
        start = self.history[0][0] if self.history else 0.0
        return [f"{t - start:.1f}s {op} {sorted(wanted & set(k))}" for t, op, k in self.history if wanted & set(k)]

    def keys(self, n: int) -> list[int]:
        with self.lock:
            first = self.next_key
            self.next_key += n
        return list(range(first, first + n))

    def sample(self, rng: random.Random, n: int) -> list[int]:
        with self.lock:
            pool = sorted(self.live)
        return rng.sample(pool, min(n, len(pool)))

    def expected(self) -> pa.Table:
        """The content the model expects: every live key with its update count."""
        live = sorted(self.live)
        return pa.table({"k": pa.array(live, pa.int64()), "upd": pa.array([self.upd[k] for k in live], pa.int64())})


def create_race_table(
    spark: Any, uri: str, layout: str, properties: Iterable[str] = (), first_keys: int = 120
) -> Ledger:
    """Creates the race table at ``uri`` (``layout``: a ``PARTITIONED BY`` or ``CLUSTER BY`` clause, or "")
    with deletion vectors on, a checkpoint every five commits and ``properties`` (``'key' = 'value'``
    strings), inserts ``first_keys`` keys in files of at most 40 rows and returns the ledger that holds them."""
    columns = "k BIGINT, upd BIGINT, node BIGINT, node_range BIGINT"
    props = ", ".join(["'delta.enableDeletionVectors' = 'true'", "'delta.checkpointInterval' = '5'", *properties])
    spark.sql(f"CREATE TABLE delta.`{uri}` ({columns}) USING delta {layout} TBLPROPERTIES ({props})")
    ledger = Ledger()
    ledger.keys(first_keys)
    for lo in range(0, first_keys, 40):
        spark.sql(f"INSERT INTO delta.`{uri}` SELECT id, 0, id % 7, 0 FROM range({lo}, {min(lo + 40, first_keys)})")
    ledger.live.update(range(first_keys))
    return ledger


def spark_conflict_kind(exc: BaseException) -> str:
    """``spark:<name>`` of a concurrent-modification error Spark raised; anything else fails the test."""
    text = f"{type(exc).__name__}: {exc}"
    for kind in SPARK_CONFLICTS:
        if kind in text:
            return "spark:" + kind
    raise exc


def sql_in(keys: list[int]) -> str:
    return ", ".join(str(k) for k in keys)


def spark_op(spark: Any, uri: str, op: str, ledger: Ledger, pick: Callable[[int], list[int]]) -> None:
    """Runs one Spark operation (``append``, ``delete``, ``update`` or ``merge``) on the race table and records
    it in the ledger once it committed; ``pick(n)`` names up to ``n`` live keys for it."""
    t = f"delta.`{uri}`"
    if op == "append":
        keys = ledger.keys(30)
        spark.sql(f"INSERT INTO {t} SELECT id, 0, id % 7, 0 FROM range({keys[0]}, {keys[-1] + 1})")
        with ledger.lock:
            ledger.live.update(keys)
            ledger.record("spark:append", keys)
    elif op == "delete":
        keys = pick(4)
        if not keys:
            return
        spark.sql(f"DELETE FROM {t} WHERE k IN ({sql_in(keys)})")
        with ledger.lock:
            ledger.live.difference_update(keys)
            ledger.deleted.update(keys)
            ledger.record("spark:delete", keys)
    elif op == "update":
        keys = pick(5)
        if not keys:
            return
        spark.sql(f"UPDATE {t} SET upd = upd + 1 WHERE k IN ({sql_in(keys)})")
        with ledger.lock:
            ledger.upd.update(keys)
            ledger.record("spark:update", keys)
    else:  # MERGE: bump some existing keys, insert some new ones
        old = pick(3)
        new = ledger.keys(3)
        values = ", ".join([f"({k}, false)" for k in old] + [f"({k}, true)" for k in new])
        spark.sql(
            f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES {values} AS s(k, is_new)) AS s ON t.k = s.k "
            "WHEN MATCHED THEN UPDATE SET t.upd = t.upd + 1 "
            "WHEN NOT MATCHED AND s.is_new THEN INSERT (k, upd, node, node_range) VALUES (s.k, 0, s.k % 7, 0)"
        )
        with ledger.lock:
            ledger.upd.update(old)
            ledger.live.update(new)
            ledger.record("spark:merge", [*old, *new])
    with ledger.lock:
        ledger.commits["spark:" + op] += 1


def spark_side(
    spark: Any,
    uri: str,
    ledger: Ledger,
    ops: Iterable[str],
    pick: Callable[[int, int], list[int]],
    stop: threading.Event,
) -> None:
    """Runs ``ops`` in order (the i-th picks its keys with ``pick(i, n)``) until ``stop``; a concurrent
    modification Spark refuses is counted as a conflict. Sets ``stop`` at the end."""
    for step, op in enumerate(ops):
        if stop.is_set():
            break
        try:
            spark_op(spark, uri, op, ledger, lambda n, step=step: pick(step, n))
        except Exception as exc:
            kind = spark_conflict_kind(exc)
            with ledger.lock:
                ledger.conflicts[kind] += 1
    stop.set()


def random_ops(rng: random.Random, count: int) -> list[str]:
    """``count`` seeded Spark operations, appends twice as likely as each other kind."""
    return [rng.choice(["append", "append", "delete", "update", "merge"]) for _ in range(count)]


def our_rorder(uri: str, ledger: Ledger, stop: threading.Event, **options: Any) -> None:
    """Runs ``rorder(uri, by="node", sort_by="k", **options)`` over and over until ``stop``."""
    while not stop.is_set():
        for report in rorder(uri, by="node", sort_by="k", raise_on_failure=False, **options):
            with ledger.lock:
                if report.status == "committed":
                    ledger.commits["ours:rorder"] += 1
                    ledger.record(f"ours:rorder v{report.commit_version}", ())
                    ledger.commits["ours:deletes_carried"] += report.concurrent_deletes_carried
                elif report.status == "failed":
                    ledger.conflicts[f"ours:rorder:{report.error_type}"] += 1
        time.sleep(0.2)


def our_delete(uri: str, ledger: Ledger, rng: random.Random, stop: threading.Event, keep_live: int = 60) -> None:
    """Deletes two live keys every half second until ``stop`` (paused while ``keep_live`` or fewer are live,
    so the table never runs dry), with deletion vectors inline or in files at random."""
    while not stop.is_set():
        with ledger.lock:
            enough = len(ledger.live) > keep_live
        keys = ledger.sample(rng, 2) if enough else []
        if keys:
            try:
                report = delete(uri, f"k IN ({sql_in(keys)})", inline_max_bytes=rng.choice([0, 4096]))
            except DeltaExtrasError as exc:
                with ledger.lock:
                    ledger.conflicts[f"ours:delete:{type(exc).__name__}"] += 1
            else:
                with ledger.lock:
                    ledger.commits["ours:delete"] += 1
                    ledger.live.difference_update(keys)
                    ledger.deleted.update(keys)
                    ledger.record(f"ours:delete v{report.commit_version} rows={report.rows_deleted}", keys)
        time.sleep(0.5)


def run_race(sides: list[Callable[[threading.Event], None]], deadline_s: float) -> float:
    """Runs each side in its own thread with one shared stop event: the first side is the leader (it sets
    ``stop`` when done; the race stops after ``deadline_s`` anyway), an exception in any side stops all and
    fails the test. Returns the seconds the race took."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(side: Callable[[threading.Event], None]) -> None:
        try:
            side(stop)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=guarded, args=(side,)) for side in sides]
    started = time.monotonic()
    for th in threads:
        th.start()
    threads[0].join(timeout=deadline_s)
    stop.set()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    assert not any(th.is_alive() for th in threads), "a side of the race did not stop"
    return time.monotonic() - started


def assert_ledger_content(spark: Any, uri: str, ledger: Ledger) -> pa.Table:
    """Through Spark and through delta-rs: no key lost, duplicated or resurrected, and the content (every
    committed update) equal to the ledger's. Returns the expected table. A failure names what each engine
    saw, the committed operations that named the keys concerned and the log's actions on the files that
    hold them (:func:`forensics`)."""
    expected = ledger.expected()
    via_spark = spark.read.format("delta").load(uri).select("k", "upd").toArrow()
    via_deltars = pa.table(DeltaTable(uri).scan(columns=["k", "upd"]))
    verdicts = {}
    for name, got in (("spark", via_spark), ("delta-rs", via_deltars)):
        keys = Counter(got.column("k").to_pylist())
        duplicated = sorted(k for k, n in keys.items() if n > 1)
        lost = sorted(ledger.live - set(keys))
        resurrected = sorted(ledger.deleted & set(keys))
        verdicts[name] = {"lost": lost[:10], "duplicated": duplicated[:10], "resurrected": resurrected[:10]}
    bad = sorted({k for v in verdicts.values() for ks in v.values() for k in ks})
    assert not bad, (verdicts, ledger.story(bad), forensics(uri, bad[:4]))
    for name, got in (("spark", via_spark), ("delta-rs", via_deltars)):
        assert content_checksum(got) == content_checksum(expected), name
    return expected


def forensics(uri: str, keys: list[int]) -> list[str]:
    """Every data file under ``uri`` that holds one of ``keys`` (live or not), and each log action on it:
    ``v<version> <operation> add|remove dv=<unique id>``, in log order."""
    root = Path(uri)
    holders: dict[str, list[int]] = {}
    for f in sorted(root.glob("*.parquet")):
        held = set(pq.read_table(f, columns=["k"]).column("k").to_pylist()) & set(keys)
        if held:
            holders[f.name] = sorted(held)
    lines = [f"{name} holds {ks}" for name, ks in holders.items()]
    for commit in sorted((root / "_delta_log").glob("*.json")):
        version = int(commit.stem)
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), "?")
        for a in actions:
            for kind in ("add", "remove"):
                if kind in a and a[kind]["path"] in holders:
                    dv = a[kind].get("deletionVector") or {}
                    dv_id = f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}" if dv else "-"
                    lines.append(f"v{version} {operation} {kind} {a[kind]['path']} dv={dv_id[:40]}")
    checkpoints = sorted(p.name for p in (root / "_delta_log").glob("*.checkpoint*.parquet"))
    return [*lines, f"checkpoints: {checkpoints[-3:]}"]
