"""Apache Spark with Delta Lake as a peer writer: tables Spark wrote (appends, DELETE with deletion vectors,
UPDATE, MERGE, OPTIMIZE, OPTIMIZE ZORDER BY, its checkpoints; column mapping in test_spark_oracle.py) are
rewritten by rorder --
in this process and as Spark tasks on the classic session (rorder_spark) -- with identical content and
one row group per value, and Spark reads the result."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from oracle import assert_engines_agree, assert_layout

from deltaextras import PartitionReport
from deltaextras.app.spark import rorder_spark
from deltaextras.core.actions import Add
from deltaextras.core.log import read_commit
from deltaextras.core.storage import TableStorage
from deltaextras.ops.rorder.rorder import rorder

NODES = 24
WIDTH = 8


def spark_written_table(spark: Any, uri: str, *, column_mapping: bool) -> list[str]:
    """A partitioned table built by Spark alone with every kind of commit Spark makes; returns the operations."""
    props = {
        "delta.enableDeletionVectors": "true",
        "delta.checkpointInterval": "3",
    }
    if column_mapping:
        props.update({"delta.columnMapping.mode": "name", "delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})
    tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (node_id BIGINT, batch BIGINT, reading DOUBLE, note STRING, node_id_range BIGINT) "
        f"USING delta PARTITIONED BY (node_id_range) TBLPROPERTIES ({tblprops})"
    )

    def append(batch: int) -> None:
        spark.range(0, NODES * 3).selectExpr(
            f"(id * 5 + {batch}) % {NODES} AS node_id",
            f"CAST({batch} AS BIGINT) AS batch",
            f"CAST(id AS DOUBLE) / 3 + {batch} AS reading",
            "concat('n', CAST(id AS STRING)) AS note",
            f"((id * 5 + {batch}) % {NODES}) div {WIDTH} AS node_id_range",
        ).repartition(2).write.format("delta").mode("append").save(uri)

    for b in range(4):
        append(b)
    t = f"delta.`{uri}`"
    spark.sql(f"DELETE FROM {t} WHERE node_id = 3 AND batch = 1")  # deletion vectors
    spark.sql(f"UPDATE {t} SET reading = -reading WHERE node_id IN (9, 10) AND batch = 2")
    spark.range(0, 6).selectExpr(
        "id * 4 AS node_id",
        "CAST(3 AS BIGINT) AS batch",
        "CAST(100 + id AS DOUBLE) AS reading",
        "'merged' AS note",
        f"(id * 4) div {WIDTH} AS node_id_range",
    ).createOrReplaceTempView("changes")
    spark.sql(
        f"MERGE INTO {t} AS t USING changes AS s ON t.node_id = s.node_id AND t.batch = s.batch "
        "WHEN MATCHED THEN UPDATE SET t.reading = s.reading, t.note = s.note "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"OPTIMIZE {t} WHERE node_id_range = 0")
    append(4)
    spark.sql(f"OPTIMIZE {t} WHERE node_id_range = 1 ZORDER BY (batch)")
    append(5)
    spark.sql(f"DELETE FROM {t} WHERE note = 'n7'")
    if column_mapping:
        spark.sql(f"ALTER TABLE {t} RENAME COLUMN note TO label")
    rows = spark.sql(f"DESCRIBE HISTORY {t}").collect()
    return [r["operation"] for r in sorted(rows, key=lambda r: r["version"])]


@pytest.fixture(scope="module")
def spark_tables(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    """The table built once by Spark (its commits are the slow part); tests rewrite copies. (A table
    Spark created with column mapping and a renamed column is rewritten in test_spark_oracle.py.)"""
    path = tmp_path_factory.mktemp("spark-written") / "plain"
    return {"plain": (path, spark_written_table(delta_spark, str(path), column_mapping=False))}


@pytest.mark.parametrize(
    ("table", "runner"),
    [("plain", "local"), ("plain", "spark_tasks")],
    ids=["rorder", "rorder_spark_classic"],
)
def test_rorder_rewrites_what_spark_wrote(
    monkeypatch: pytest.MonkeyPatch,
    delta_spark: Any,
    spark: Any,
    spark_tables: dict[str, tuple[Path, list[str]]],
    tmp_path: Path,
    table: str,
    runner: str,
) -> None:
    source, operations = spark_tables[table]
    for op in ("WRITE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE"):
        assert op in operations, operations
    uri = str(tmp_path / "t")
    shutil.copytree(source, uri)
    log = Path(uri) / "_delta_log"
    assert list(log.glob("*.checkpoint.parquet")), "Spark wrote no checkpoint"
    vectors = [a.deletion_vector for a in read_commit(TableStorage(uri), _last_delete(uri)) or [] if isinstance(a, Add)]
    assert any(vectors), "Spark's DELETE wrote no deletion vector"
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    if runner == "local":
        reports = rorder(uri, sort_by="batch", max_workers=1, raise_on_failure=False)
    else:
        # pyspark follows this variable (set by the Sail session of this test process) and would build a
        # Connect UDF for the classic DataFrame; a process with only a classic session never has it
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
        reports = [
            PartitionReport(**r.asDict())
            for r in rorder_spark(delta_spark, uri, sort_by="batch", max_tasks=2, raise_on_failure=False).collect()
        ]
    monkeypatch.undo()
    assert [r.status for r in reports] == ["committed"] * (NODES // WIDTH), reports
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before)
    assert assert_layout(uri, "node_id") == NODES
    # Spark keeps writing on top of our commits: a DELETE with a vector on a rewritten file
    doomed = delta_spark.read.format("delta").load(uri).where("node_id = 5 AND batch = 0").count()
    assert doomed > 0
    delta_spark.sql(f"DELETE FROM delta.`{uri}` WHERE node_id = 5 AND batch = 0")
    after = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    assert after[0] == before[0] - doomed


def _last_delete(uri: str) -> int:
    history = DeltaTable(uri).history()
    return max(h["version"] for h in history if h.get("operation") == "DELETE")
