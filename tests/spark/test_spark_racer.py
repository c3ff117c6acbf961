"""Apache Spark with Delta Lake races us on one partition: Spark appends, DELETEs, UPDATEs and MERGEs
(deletion vectors on, its own conflict checker) while our rorder and our delete commit to the same
partition. Seeded and bounded. Afterwards, read through Spark and through delta-rs: no row lost, none
duplicated, no deleted row back, and every update that Spark reported committed is in the table.

Model: every row has a unique key ``k`` and an update counter ``upd``. A key is expected iff it was
appended (or inserted by a MERGE) by a commit that succeeded and no successful delete named it; its
``upd`` is the number of successful UPDATE/MERGE commits that named it. A delete or update names only
keys that were committed before it started, so the model needs no commit order.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from oracle import content_checksum

from deltaextras.errors import DeltaExtrasError
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.rorder.rorder import rorder

SEED = 20261123
SPARK_OPS = 12  # Spark commits attempted (appends, deletes, updates, merges), in seeded order
ROWS_PER_APPEND = 30
DEADLINE_S = 300.0  # the Spark side stops after its current operation then
KEEP_LIVE = 60  # our delete pauses while fewer rows are live, so the table never runs dry


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

    def keys(self, n: int) -> list[int]:
        with self.lock:
            first = self.next_key
            self.next_key += n
        return list(range(first, first + n))

    def sample(self, rng: random.Random, n: int) -> list[int]:
        with self.lock:
            pool = sorted(self.live)
        return rng.sample(pool, min(n, len(pool)))


def _spark_conflict_kind(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    for kind in (
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
    ):
        if kind in text:
            return "spark:" + kind
    raise exc  # anything else is a failure of the test


def _in(keys: list[int]) -> str:
    return ", ".join(str(k) for k in keys)


def spark_side(spark: Any, uri: str, ledger: Ledger, rng: random.Random, stop: threading.Event) -> None:
    t = f"delta.`{uri}`"

    for _ in range(SPARK_OPS):
        if stop.is_set():
            break
        op = rng.choice(["append", "append", "delete", "update", "merge"])
        try:
            if op == "append":
                keys = ledger.keys(ROWS_PER_APPEND)
                spark.sql(
                    f"INSERT INTO {t} SELECT id AS k, 0 AS upd, id % 7 AS node, 0 AS node_range "
                    f"FROM range({keys[0]}, {keys[-1] + 1})"
                )
                with ledger.lock:
                    ledger.live.update(keys)
            elif op == "delete":
                keys = ledger.sample(rng, 4)
                if not keys:
                    continue
                spark.sql(f"DELETE FROM {t} WHERE k IN ({_in(keys)})")
                with ledger.lock:
                    ledger.live.difference_update(keys)
                    ledger.deleted.update(keys)
            elif op == "update":
                keys = ledger.sample(rng, 5)
                if not keys:
                    continue
                spark.sql(f"UPDATE {t} SET upd = upd + 1 WHERE k IN ({_in(keys)})")
                with ledger.lock:
                    ledger.upd.update(keys)
            else:  # MERGE: bump some existing keys, insert some new ones
                old = ledger.sample(rng, 3)
                new = ledger.keys(3)
                values = ", ".join([f"({k}, false)" for k in old] + [f"({k}, true)" for k in new])
                spark.sql(
                    f"MERGE INTO {t} AS t USING (SELECT * FROM VALUES {values} AS s(k, is_new)) AS s ON t.k = s.k "
                    "WHEN MATCHED THEN UPDATE SET t.upd = t.upd + 1 "
                    "WHEN NOT MATCHED AND s.is_new THEN INSERT (k, upd, node, node_range) "
                    "VALUES (s.k, 0, s.k % 7, 0)"
                )
                with ledger.lock:
                    ledger.upd.update(old)
                    ledger.live.update(new)
            with ledger.lock:
                ledger.commits["spark:" + op] += 1
        except Exception as exc:
            kind = _spark_conflict_kind(exc)
            with ledger.lock:
                ledger.conflicts[kind] += 1
    stop.set()


def our_rorder(uri: str, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        for report in rorder(uri, by="node", sort_by="k", max_workers=1, raise_on_failure=False):
            with ledger.lock:
                if report.status == "committed":
                    ledger.commits["ours:rorder"] += 1
                elif report.status == "failed":
                    ledger.conflicts[f"ours:rorder:{report.error_type}"] += 1
        time.sleep(0.2)


def our_delete(uri: str, ledger: Ledger, rng: random.Random, stop: threading.Event) -> None:
    while not stop.is_set():
        with ledger.lock:
            enough = len(ledger.live) > KEEP_LIVE
        keys = ledger.sample(rng, 2) if enough else []
        if keys:
            try:
                delete(uri, f"k IN ({_in(keys)})", inline_max_bytes=rng.choice([0, 4096]))
            except DeltaExtrasError as exc:
                with ledger.lock:
                    ledger.conflicts[f"ours:delete:{type(exc).__name__}"] += 1
            else:
                with ledger.lock:
                    ledger.commits["ours:delete"] += 1
                    ledger.live.difference_update(keys)
                    ledger.deleted.update(keys)
        time.sleep(0.5)


def test_spark_races_rorder_and_delete(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    delta_spark.sql(
        f"CREATE TABLE delta.`{uri}` (k BIGINT, upd BIGINT, node BIGINT, node_range BIGINT) USING delta "
        "PARTITIONED BY (node_range) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.checkpointInterval' = '5')"
    )
    ledger = Ledger()
    first = ledger.keys(2 * KEEP_LIVE)
    delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id, 0, id % 7, 0 FROM range(0, {first[-1] + 1})")
    ledger.live.update(first)
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(spark_side, delta_spark, uri, ledger, random.Random(SEED + 1), stop)),
        threading.Thread(target=guarded, args=(our_rorder, uri, ledger, stop)),
        threading.Thread(target=guarded, args=(our_delete, uri, ledger, random.Random(SEED + 2), stop)),
    ]
    started = time.monotonic()
    for th in threads:
        th.start()
    threads[0].join(timeout=DEADLINE_S)
    stop.set()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    seconds = time.monotonic() - started

    expected = pa.table(
        {
            "k": pa.array(sorted(ledger.live), pa.int64()),
            "upd": pa.array([ledger.upd[k] for k in sorted(ledger.live)], pa.int64()),
        }
    )
    via_spark = delta_spark.read.format("delta").load(uri).select("k", "upd").toArrow()
    via_deltars = pa.table(DeltaTable(uri).scan(columns=["k", "upd"]))
    for name, got in (("spark", via_spark), ("delta-rs", via_deltars)):
        keys = Counter(got.column("k").to_pylist())
        duplicated = sorted(k for k, n in keys.items() if n > 1)
        lost = sorted(ledger.live - set(keys))
        resurrected = sorted(ledger.deleted & set(keys))
        assert (lost, duplicated, resurrected) == ([], [], []), (name, lost[:10], duplicated[:10], resurrected[:10])
        assert content_checksum(got) == content_checksum(expected), name  # every committed update is there
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
    figures = {
        "seed": SEED,
        "seconds": round(seconds, 1),
        "spark_ops": SPARK_OPS,
        "table_versions": max(r["version"] for r in history),
        "rows": expected.num_rows,
        "commits": dict(sorted(ledger.commits.items())),
        "conflicts": dict(sorted(ledger.conflicts.items())),
    }
    print("racer figures:", figures)
    assert expected.num_rows >= KEEP_LIVE // 2
    assert ledger.commits["ours:rorder"] > 0 and ledger.commits["ours:delete"] > 0
    assert sum(v for k, v in ledger.commits.items() if k.startswith("spark:")) >= 3
