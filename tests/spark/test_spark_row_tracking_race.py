"""Apache Spark MERGEs (and appends, an UPDATE, a DELETE) race our ``rorder`` on one partition of a table
with row tracking and in-commit timestamps; and, deterministically, a Spark MERGE commits between our
rewrite's read and its commit, and the rewrite carries its deletes by row id. After the race, through
Spark and delta-rs: no row lost, none duplicated, no deleted row back, every committed update there;
row ids unique across the table, and every row that was there before the race still has the id it had
(rewrites and Spark's MERGE both keep them); Spark's history shows strictly increasing in-commit
timestamps.

The model is the one of ``test_spark_racer`` (its ledger); the Spark side runs a fixed, MERGE-heavy list.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from oracle import content_checksum
from test_spark_racer import Ledger, _in, _spark_conflict_kind

from deltaextras.ops.rorder.rorder import rorder

SPARK_SIDE = ["merge", "append", "merge", "update", "merge", "delete", "merge", "append", "merge"]
FIRST_KEYS = 120
DEADLINE_S = 400.0


def _spark_op(spark: Any, t: str, op: str, ledger: Ledger, step: int) -> None:
    if op == "append":
        keys = ledger.keys(30)
        spark.sql(f"INSERT INTO {t} SELECT id, 0, id % 7, 0 FROM range({keys[0]}, {keys[-1] + 1})")
        with ledger.lock:
            ledger.live.update(keys)
    elif op == "delete":
        keys = sorted(ledger.live)[step : step + 4]
        spark.sql(f"DELETE FROM {t} WHERE k IN ({_in(keys)})")
        with ledger.lock:
            ledger.live.difference_update(keys)
            ledger.deleted.update(keys)
    elif op == "update":
        keys = sorted(ledger.live)[step * 3 : step * 3 + 5]
        spark.sql(f"UPDATE {t} SET upd = upd + 1 WHERE k IN ({_in(keys)})")
        with ledger.lock:
            ledger.upd.update(keys)
    else:
        old = sorted(ledger.live)[step * 7 : step * 7 + 3]
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


def _spark_side(spark: Any, uri: str, ledger: Ledger, stop: threading.Event) -> None:
    for step, op in enumerate(SPARK_SIDE):
        if stop.is_set():
            break
        try:
            _spark_op(spark, f"delta.`{uri}`", op, ledger, step)
            with ledger.lock:
                ledger.commits["spark:" + op] += 1
        except Exception as exc:
            kind = _spark_conflict_kind(exc)
            with ledger.lock:
                ledger.conflicts[kind] += 1
    stop.set()


def _our_rorder(uri: str, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        for report in rorder(uri, by="node", sort_by="k", max_workers=1, raise_on_failure=False):
            with ledger.lock:
                if report.status == "committed":
                    ledger.commits["ours:rorder"] += 1
                    ledger.commits["ours:deletes_carried"] += report.concurrent_deletes_carried
                elif report.status == "failed":
                    ledger.conflicts[f"ours:rorder:{report.error_type}"] += 1
        time.sleep(0.2)


def _ids(spark: Any, uri: str) -> dict[int, int]:
    rows = spark.sql(f"SELECT k, _metadata.row_id AS rid FROM delta.`{uri}`").collect()
    ids = [r["rid"] for r in rows]
    assert None not in ids and len(set(ids)) == len(ids), "row ids are not unique"
    return {r["k"]: r["rid"] for r in rows}


def test_spark_merge_races_rorder_on_row_tracking_table(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    delta_spark.sql(
        f"CREATE TABLE delta.`{uri}` (k BIGINT, upd BIGINT, node BIGINT, node_range BIGINT) USING delta "
        "PARTITIONED BY (node_range) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.enableRowTracking' = 'true', 'delta.enableInCommitTimestamps' = 'true', "
        "'delta.checkpointInterval' = '5')"
    )
    ledger = Ledger()
    first = ledger.keys(FIRST_KEYS)
    for lo in range(0, FIRST_KEYS, 40):  # three files
        delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id, 0, id % 7, 0 FROM range({lo}, {lo + 40})")
    ledger.live.update(first)
    before = _ids(delta_spark, uri)
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(_spark_side, delta_spark, uri, ledger, stop)),
        threading.Thread(target=guarded, args=(_our_rorder, uri, ledger, stop)),
    ]
    for th in threads:
        th.start()
    threads[0].join(timeout=DEADLINE_S)
    stop.set()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    assert not rorder(uri, by="node", sort_by="k", max_workers=1).failed  # and once more, alone

    live = sorted(ledger.live)
    expected = pa.table({"k": pa.array(live, pa.int64()), "upd": pa.array([ledger.upd[k] for k in live], pa.int64())})
    via_spark = delta_spark.read.format("delta").load(uri).select("k", "upd").toArrow()
    via_deltars = pa.table(DeltaTable(uri).scan(columns=["k", "upd"]))
    for name, got in (("spark", via_spark), ("delta-rs", via_deltars)):
        keys = Counter(got.column("k").to_pylist())
        duplicated = sorted(k for k, n in keys.items() if n > 1)
        lost = sorted(ledger.live - set(keys))
        resurrected = sorted(ledger.deleted & set(keys))
        assert (lost, duplicated, resurrected) == ([], [], []), (name, lost[:10], duplicated[:10], resurrected[:10])
        assert content_checksum(got) == content_checksum(expected), name
    after = _ids(delta_spark, uri)
    moved = {k: (before[k], after[k]) for k in before if k in after and before[k] != after[k]}
    assert not moved, f"rows whose id changed: {dict(list(moved.items())[:10])}"
    history = sorted(delta_spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect(), key=lambda r: r["version"])
    stamps = [r["timestamp"] for r in history]
    assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
    print("row tracking race:", dict(ledger.commits), dict(ledger.conflicts), "versions", history[-1]["version"])
    assert ledger.commits["ours:rorder"] > 0 and ledger.commits["spark:merge"] > 0


def test_spark_merge_between_our_read_and_commit_is_carried_with_row_ids(delta_spark: Any, tmp_path: Path) -> None:
    """Deterministic: a Spark MERGE (deletion vectors on, rows updated and inserted) commits between our
    rewrite's read and its commit. Our rewrite carries the MERGE's deletes by row id: every row keeps the id
    it had, the updated rows live once (Spark's new version), ids stay unique."""
    from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

    uri = str(tmp_path / "carry")
    delta_spark.sql(
        f"CREATE TABLE delta.`{uri}` (k BIGINT, upd BIGINT, node BIGINT) USING delta TBLPROPERTIES "
        "('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true', "
        "'delta.enableInCommitTimestamps' = 'true')"
    )
    for lo in (0, 40, 80):
        delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id, 0, id % 7 FROM range({lo}, {lo + 40})")
    before = _ids(delta_spark, uri)
    merge = (
        f"MERGE INTO delta.`{uri}` AS t USING (SELECT * FROM VALUES (5, false), (50, false), (500, true) "
        "AS s(k, is_new)) AS s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.upd = t.upd + 1 "
        "WHEN NOT MATCHED AND s.is_new THEN INSERT (k, upd, node) VALUES (s.k, 0, 3)"
    )
    (message,) = plan_messages(uri, by="node", sort_by="k")
    pending = [lambda: delta_spark.sql(merge).collect()]
    report = rorder_single(message, hooks={"before_commit": lambda _v: pending and pending.pop()()})
    assert report.status == "committed", report.reason
    assert report.concurrent_deletes_carried == 1 and report.deleted_rows_carried == 2
    rows = delta_spark.sql(f"SELECT k, upd, _metadata.row_id AS rid FROM delta.`{uri}`").collect()
    assert sorted((r["k"], r["upd"]) for r in rows) == sorted(
        [(k, 1 if k in (5, 50) else 0) for k in range(120)] + [(500, 0)]
    )
    after = _ids(delta_spark, uri)
    assert {k: after[k] for k in before} == before  # updated rows too: MERGE and the carry keep ids
    assert after[500] not in before.values()
