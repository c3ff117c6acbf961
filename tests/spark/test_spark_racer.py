"""Apache Spark with Delta Lake races us on one partition: Spark appends, DELETEs, UPDATEs and MERGEs
(deletion vectors on, its own conflict checker) while our rorder and our delete commit to the same
partition. Seeded and bounded. Afterwards, read through Spark and through delta-rs: no row lost, none
duplicated, no deleted row back, and every update that Spark reported committed is in the table (the model:
``tests/support/spark_race.py``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from spark_race import (
    assert_ledger_content,
    create_race_table,
    our_delete,
    our_rorder,
    random_ops,
    run_race,
    spark_side,
)

SEED = 20261123
SPARK_OPS = 12  # Spark commits attempted (appends, deletes, updates, merges), in seeded order
DEADLINE_S = 300.0  # the Spark side stops after its current operation then


def test_spark_races_rorder_and_delete(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    ledger = create_race_table(delta_spark, uri, "PARTITIONED BY (node_range)")
    spark_rng, delete_rng = random.Random(SEED + 1), random.Random(SEED + 2)
    seconds = run_race(
        [
            lambda stop: spark_side(
                delta_spark,
                uri,
                ledger,
                random_ops(spark_rng, SPARK_OPS),
                lambda _i, n: ledger.sample(spark_rng, n),
                stop,
            ),
            lambda stop: our_rorder(uri, ledger, stop, max_workers=1),
            lambda stop: our_delete(uri, ledger, delete_rng, stop),
        ],
        DEADLINE_S,
    )
    expected = assert_ledger_content(delta_spark, uri, ledger)
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
    assert expected.num_rows >= 30
    assert ledger.commits["ours:rorder"] > 0 and ledger.commits["ours:delete"] > 0
    assert sum(v for k, v in ledger.commits.items() if k.startswith("spark:")) >= 3
