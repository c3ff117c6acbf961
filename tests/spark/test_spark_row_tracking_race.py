"""Apache Spark MERGEs (and appends, an UPDATE, a DELETE) race our ``rorder`` on one partition of a table
with row tracking and in-commit timestamps; and, deterministically, a Spark MERGE commits between our
rewrite's read and its commit, and the rewrite carries its deletes by row id. After the race, through
Spark and delta-rs: no row lost, none duplicated, no deleted row back, every committed update there;
row ids unique across the table, and every row that was there before the race still has the id it had
(rewrites and Spark's MERGE both keep them); Spark's history shows strictly increasing in-commit
timestamps.

The model is the race harness's ledger (``tests/support/spark_race.py``); the Spark side runs a fixed,
MERGE-heavy list.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from spark_race import Ledger, assert_ledger_content, create_race_table, our_rorder, run_race, spark_side

from deltaextras.ops.rorder.rorder import rorder

SPARK_SIDE = ["merge", "append", "merge", "update", "merge", "delete", "merge", "append", "merge"]
FIRST_KEYS = 120
DEADLINE_S = 400.0


def _pick(ledger: Ledger, step: int, n: int) -> list[int]:
    """Deterministic keys for the ``step``-th operation: a slice of the live keys that moves with the step."""
    live = sorted(ledger.live)
    start = {4: step, 5: step * 3, 3: step * 7}[n]  # DELETE, UPDATE, MERGE
    return live[start : start + n]


def _ids(spark: Any, uri: str) -> dict[int, int]:
    rows = spark.sql(f"SELECT k, _metadata.row_id AS rid FROM delta.`{uri}`").collect()
    ids = [r["rid"] for r in rows]
    assert None not in ids and len(set(ids)) == len(ids), "row ids are not unique"
    return {r["k"]: r["rid"] for r in rows}


def test_spark_merge_races_rorder_on_row_tracking_table(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    ledger = create_race_table(
        delta_spark,
        uri,
        "PARTITIONED BY (node_range)",
        ["'delta.enableRowTracking' = 'true'", "'delta.enableInCommitTimestamps' = 'true'"],
        first_keys=FIRST_KEYS,
    )
    before = _ids(delta_spark, uri)
    run_race(
        [
            lambda stop: spark_side(delta_spark, uri, ledger, SPARK_SIDE, lambda i, n: _pick(ledger, i, n), stop),
            lambda stop: our_rorder(uri, ledger, stop, max_workers=1),
        ],
        DEADLINE_S,
    )
    assert not rorder(uri, by="node", sort_by="k", max_workers=1).failed  # and once more, alone
    assert_ledger_content(delta_spark, uri, ledger)
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
