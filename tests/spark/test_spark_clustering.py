"""A liquid-clustered table (Apache Spark 4.2 + Delta 4.4, ``CLUSTER BY (node_id)`` and
``CLUSTER BY (node_id, utc_time)``) rewritten by value-range units: Spark, delta-rs and Sail read the same
content, ``DESCRIBE DETAIL`` keeps the clustering columns, Spark's own ``OPTIMIZE`` afterwards rewrites none
of our files, and Spark's point query finds one file and one row group per file by our statistics. A change
of clustering between our plan and our commit makes the unit plan again; ``CLUSTER BY NONE`` leaves an
unpartitioned table. Spark appends, DELETEs, UPDATEs and MERGEs racing range units lose, duplicate and
resurrect no row."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from oracle import assert_engines_agree, content_checksum
from spark_race import (
    assert_ledger_content,
    create_race_table,
    our_delete,
    our_rorder,
    random_ops,
    run_race,
    spark_side,
)

from deltaextras.core.log import list_log
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.errors import UnsupportedFeatureError
from deltaextras.ops.rorder.plan import plan_table
from deltaextras.ops.rorder.rorder import rorder

SEED = 20261123
NODES = 160
BATCHES = 6  # 5-minute batches
ROWS_PER_NODE = 4  # per batch
TARGET = 48_000  # bytes: several units on this table


def _clustered_table(spark: Any, uri: str, *, properties: str = "", cluster_by: str = "node_id") -> None:
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (node_id BIGINT, utc_time TIMESTAMP, value DOUBLE, quality STRING) "
        f"USING delta CLUSTER BY ({cluster_by}){properties}"
    )
    for b in range(BATCHES):
        # one 5-minute batch: every node reports ROWS_PER_NODE readings
        spark.sql(
            f"INSERT INTO delta.`{uri}` SELECT id % {NODES} AS node_id, "
            f"timestamp_seconds({b * 300} + CAST(id / {NODES} AS BIGINT) * 60) AS utc_time, "
            f"CASE WHEN id % 37 = 0 THEN NULL ELSE (id * 7919 % 1000) / 10.0 END AS value, "
            f"CASE WHEN id % 3 = 0 THEN 'good' ELSE 'bad' END AS quality "
            f"FROM range({NODES * ROWS_PER_NODE})"
        )


def _adds(uri: str) -> list[dict[str, Any]]:
    """The live ``add`` actions as the log holds them (extra fields such as ``clusteringProvider`` too)."""
    return [{**f.add.to_json_body(), "stats": f.add.stats} for f in TableSnapshot.load(uri, for_writing=False).files]


def _log_actions(uri: str, version: int) -> list[dict[str, Any]]:
    text = (Path(uri) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _files_read(spark: Any, sql: str) -> int:
    """Spark's own count of the files its scan opened for a query (data skipping applied)."""
    df = spark.sql(sql)
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    total = 0
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        if node.nodeName().startswith("Scan") or "FileSourceScan" in node.getClass().getSimpleName():
            metrics = node.metrics()
            if metrics.contains("numFiles"):
                total += metrics.apply("numFiles").value()
        children = node.children()
        nodes.extend(children.apply(i) for i in range(children.size()))
    return total


def test_clustered_table_rewritten_by_range_units(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "clustered")
    _clustered_table(delta_spark, uri)
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    plan = plan_table(uri, target_file_size=TARGET, sort_by="utc_time")
    assert plan.by == "node_id" and plan.partition_name is None  # the clustering column, no by= needed
    messages = plan.messages()
    assert messages and all(m.value_range is not None for m in messages)

    report = rorder(uri, sort_by="utc_time", target_file_size=TARGET, max_workers=2)
    assert report.partitions and all(r.status == "committed" for r in report), report.summary()
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before

    # the clustering protocol: domain kept, clustering column still listed, our outputs marked clustered
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    assert detail["clusteringColumns"] == ["node_id"]
    adds = _adds(uri)
    assert adds and all(a.get("clusteringProvider") == "deltaextras" for a in adds)
    ranges = sorted(
        (json.loads(a["stats"])["minValues"]["node_id"], json.loads(a["stats"])["maxValues"]["node_id"]) for a in adds
    )
    assert len(ranges) >= 2
    assert all(hi < lo for (_, hi), (lo, _) in itertools.pairwise(ranges)), ranges  # disjoint value ranges
    # every file: one row group per value
    for a in adds:
        md = pq.ParquetFile(Path(uri) / a["path"]).metadata
        per_group = [md.row_group(i).column(0).statistics for i in range(md.num_row_groups)]
        assert all(s.min == s.max for s in per_group)

    # Spark's point query: one file by our statistics, and in it one row group
    delta_spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        assert _files_read(delta_spark, f"SELECT * FROM delta.`{uri}` WHERE node_id = 42") == 1
    finally:
        delta_spark.conf.unset("spark.sql.adaptive.enabled")
    holding = [a for a in adds if _covers(a, 42)]
    assert len(holding) == 1
    md = pq.ParquetFile(Path(uri) / holding[0]["path"]).metadata
    assert sum(1 for i in range(md.num_row_groups) if md.row_group(i).column(0).statistics.min == 42) == 1

    # Spark's OPTIMIZE (not FULL) afterwards leaves every one of our files alone
    ours = {a["path"] for a in adds}
    delta_spark.sql(f"OPTIMIZE delta.`{uri}`").collect()
    assert {a["path"] for a in _adds(uri)} == ours
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before

    # a second plan finds every unit in layout
    assert not plan_table(uri, target_file_size=TARGET, sort_by="utc_time").to_rewrite()


def _covers(add: dict[str, Any], value: int) -> bool:
    stats = json.loads(add["stats"])
    return stats["minValues"]["node_id"] <= value <= stats["maxValues"]["node_id"]


def test_files_spark_did_not_cluster_are_not_claimed(delta_spark: Any, tmp_path: Path) -> None:
    """Only our rewrite's outputs carry clusteringProvider; Spark's appends afterwards stay unclaimed and
    the next run takes them in."""
    uri = str(tmp_path / "clustered")
    _clustered_table(delta_spark, uri)
    rorder(uri, target_file_size=TARGET, max_workers=1)
    delta_spark.sql(
        f"INSERT INTO delta.`{uri}` SELECT id % {NODES}, timestamp_seconds(9000), 1.0, 'new' FROM range(50)"
    )
    version = DeltaTable(uri).version()
    appended = [a["add"] for a in _log_actions(uri, version) if "add" in a]
    assert appended and all("clusteringProvider" not in a for a in appended)
    before = content_checksum(pa.table(DeltaTable(uri).to_pyarrow_table()))
    report = rorder(uri, target_file_size=TARGET, max_workers=1)
    assert any(r.status == "committed" for r in report)
    assert all(a.get("clusteringProvider") == "deltaextras" for a in _adds(uri))
    assert content_checksum(pa.table(DeltaTable(uri).to_pyarrow_table())) == before


def _row_groups(uri: str, adds: list[dict[str, Any]]) -> list[pa.Table]:
    """Every row group of the files ``adds`` name, in file and row-group order."""
    groups = []
    for a in adds:
        f = pq.ParquetFile(Path(uri) / a["path"])
        groups += [f.read_row_group(i, columns=["node_id", "utc_time", "quality"]) for i in range(f.num_row_groups)]
    return groups


def test_table_clustered_by_two_columns(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    """``CLUSTER BY (node_id, utc_time)``: node_id is the row-group column, utc_time orders the rows inside
    a value (no sort_by given), both have statistics in every output."""
    from deltaextras.app.cli import main as cli_main

    uri = str(tmp_path / "two")
    _clustered_table(delta_spark, uri, cluster_by="node_id, utc_time")
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    plan = plan_table(uri, target_file_size=TARGET)
    assert plan.by == "node_id" and plan.messages()
    assert dict(plan.messages()[0].options.sort_by) == {"utc_time": "ascending"}

    report = rorder(uri, target_file_size=TARGET, max_workers=2)
    assert report.partitions and all(r.status == "committed" for r in report), report.summary()
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    assert detail["clusteringColumns"] == ["node_id", "utc_time"]
    adds = _adds(uri)
    assert adds and all(a.get("clusteringProvider") == "deltaextras" for a in adds)
    for a in adds:
        stats = json.loads(a["stats"])
        assert {"node_id", "utc_time"} <= set(stats["minValues"]) and {"node_id", "utc_time"} <= set(stats["maxValues"])
    groups = _row_groups(uri, adds)
    assert sum(g.num_rows for g in groups) == before[0]
    for g in groups:
        assert len(set(g.column("node_id").to_pylist())) == 1  # one node per row group
        times = g.column("utc_time").to_pylist()
        assert times == sorted(times)  # ordered by the second clustering column inside the node

    delta_spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        assert _files_read(delta_spark, f"SELECT * FROM delta.`{uri}` WHERE node_id = 42") == 1
    finally:
        delta_spark.conf.unset("spark.sql.adaptive.enabled")
    ours = {a["path"] for a in adds}
    delta_spark.sql(f"OPTIMIZE delta.`{uri}`").collect()
    assert {a["path"] for a in _adds(uri)} == ours  # Spark's OPTIMIZE (not FULL) leaves every file of ours
    assert not plan_table(uri, target_file_size=TARGET).to_rewrite()  # and our next plan finds them in layout
    assert cli_main(["inspect", uri, "--plot", str(tmp_path / "layout.svg")]) == 0
    assert (tmp_path / "layout.svg").stat().st_size > 0
    assert cli_main(["plan", uri, "--target-file-size", str(TARGET)]) == 0

    # group commit (the function app's default) on an append: the new unit follows both columns too
    from deltaextras.ops.rorder.rorder import rorder_single

    delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id % {NODES}, timestamp_seconds(id), 2.0, 'new' FROM range(400)")
    expected = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    for message in plan_table(uri, target_file_size=TARGET).messages():
        assert rorder_single({**message.to_dict(), "commit": "group"}).status in ("committed", "skipped")
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected) == expected
    for g in _row_groups(uri, _adds(uri)):
        assert len(set(g.column("node_id").to_pylist())) == 1
        assert g.column("utc_time").to_pylist() == sorted(g.column("utc_time").to_pylist())


def test_a_change_of_clustering_between_plan_and_commit_plans_again(
    delta_spark: Any, spark: Any, tmp_path: Path
) -> None:
    """``ALTER TABLE … CLUSTER BY`` landing while a unit rewrites: nothing is committed against the old
    clustering; the next plan follows the new columns; after ``CLUSTER BY NONE`` the table is unpartitioned
    (``by`` needed, and then rewritten as any unpartitioned table)."""
    from deltaextras.errors import CommitConflictError, InvalidArgumentError
    from deltaextras.ops.rorder.rorder import rorder_single

    uri = str(tmp_path / "altered")
    _clustered_table(delta_spark, uri, cluster_by="node_id, utc_time")
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    message = plan_table(uri, target_file_size=TARGET, sort_by="utc_time").messages()[0]
    version = DeltaTable(uri).version()

    def alter(_outputs: Any) -> None:
        delta_spark.sql(f"ALTER TABLE delta.`{uri}` CLUSTER BY (quality)")

    with pytest.raises(CommitConflictError, match="changed the table's metadata"):
        rorder_single(message, hooks={"after_rewrite": alter})
    assert DeltaTable(uri).version() == version + 1  # the ALTER only
    assert delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]["clusteringColumns"] == ["quality"]
    with pytest.raises(UnsupportedFeatureError, match=r"clustered by \(quality\)"):
        rorder(uri, by="node_id", max_workers=1)  # the next plan follows it: a row group per node would break it
    assert DeltaTable(uri).version() == version + 1

    delta_spark.sql(f"ALTER TABLE delta.`{uri}` CLUSTER BY (node_id, quality)")
    report = rorder(uri, target_file_size=TARGET, sort_by="utc_time", max_workers=2)
    assert all(r.status == "committed" for r in report), report.summary()
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before
    for g in _row_groups(uri, _adds(uri)):  # inside a node: quality first, then utc_time
        assert len(set(g.column("node_id").to_pylist())) == 1
        keys = list(zip(g.column("quality").to_pylist(), g.column("utc_time").to_pylist(), strict=True))
        assert keys == sorted(keys)

    delta_spark.sql(f"ALTER TABLE delta.`{uri}` CLUSTER BY NONE")
    with pytest.raises(InvalidArgumentError, match="CLUSTER BY NONE"):
        rorder(uri, max_workers=1)
    delta_spark.sql(
        f"INSERT INTO delta.`{uri}` SELECT id % {NODES}, timestamp_seconds(9000), 1.0, 'new' FROM range(50)"
    )
    expected = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    earlier = {a["path"] for a in _adds(uri)}
    report = rorder(uri, by="node_id", sort_by="utc_time", target_file_size=TARGET, max_workers=2)
    assert any(r.status == "committed" for r in report), report.summary()
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected) == expected
    written = [a for a in _adds(uri) if a["path"] not in earlier]
    assert written and all("clusteringProvider" not in a for a in written)  # no longer clustered: not marked


def test_table_clustered_by_other_columns_is_refused(delta_spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "two")
    delta_spark.sql(f"CREATE TABLE delta.`{uri}` (site BIGINT, node_id BIGINT) USING delta CLUSTER BY (site, node_id)")
    delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id % 3, id FROM range(20)")
    version = DeltaTable(uri).version()
    with pytest.raises(UnsupportedFeatureError, match=r"clustered by \(site, node_id\)"):
        rorder(uri, by="node_id", max_workers=1)
    assert DeltaTable(uri).version() == version


@pytest.mark.parametrize("cluster_by", ["node_id", "node_id, utc_time"])
def test_delete_vacuum_and_checkpoint_on_a_clustered_table(
    delta_spark: Any, spark: Any, tmp_path: Path, cluster_by: str
) -> None:
    from deltaextras.ops.delete.delete import delete
    from deltaextras.ops.maintenance.vacuum import vacuum

    uri = str(tmp_path / "clustered")
    _clustered_table(
        delta_spark,
        uri,
        properties=" TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3')",
        cluster_by=cluster_by,
    )
    rorder(uri, target_file_size=TARGET, max_workers=1)
    delete(uri, "node_id = 7")  # deletion vectors
    delete(uri, "node_id = 8", inline_max_bytes=0)
    rows = delta_spark.read.format("delta").load(uri).filter("node_id IN (7, 8)").count()
    assert rows == 0
    vacuum(uri, retention_hours=0, dry_run=False)
    expected = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    first = DeltaTable(uri).version()
    assert rorder(uri, target_file_size=TARGET, max_workers=1).partitions
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected) == expected
    # checkpoints written after our commits keep the clustering domain and our clustering provider
    delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT 1, timestamp_seconds(1), 1.0, 'x' FROM range(1)")
    for node in (1, 2, 3):  # three commits of ours: one lands on the checkpoint interval
        delete(uri, f"node_id = {node}")
    checkpoints = list_log(TableStorage(uri)).checkpoints
    assert any(v > first for v in checkpoints), checkpoints
    assert any(a.get("clusteringProvider") == "deltaextras" for a in _adds(uri))
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    columns = [c.strip() for c in cluster_by.split(",")]
    assert delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]["clusteringColumns"] == columns


# ------------------------------------------------------------------------------------------ races
@pytest.mark.parametrize(("columns", "seed"), [(["node"], 6), (["node", "k"], 16)], ids=["one-column", "two-columns"])
def test_spark_races_range_units(delta_spark: Any, tmp_path: Path, columns: list[str], seed: int) -> None:
    """Spark appends, DELETEs, UPDATEs and MERGEs, our DELETEs and range units of rorder, at once."""
    uri = str(tmp_path / "race")
    ledger = create_race_table(delta_spark, uri, f"CLUSTER BY ({', '.join(columns)})")
    spark_rng, delete_rng = random.Random(SEED + seed), random.Random(SEED + seed - 2)
    run_race(
        [
            lambda stop: spark_side(
                delta_spark, uri, ledger, random_ops(spark_rng, 12), lambda _i, n: ledger.sample(spark_rng, n), stop
            ),
            lambda stop: our_rorder(uri, ledger, stop, target_file_size=4_000, max_workers=2),
            lambda stop: our_delete(uri, ledger, delete_rng, stop),
        ],
        300,
    )
    assert_ledger_content(delta_spark, uri, ledger)
    print(f"range racer figures ({columns}):", dict(ledger.commits), dict(ledger.conflicts))
    assert ledger.commits["ours:rorder"] > 0
    assert sum(v for k, v in ledger.commits.items() if k.startswith("spark:")) >= 3
    assert delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]["clusteringColumns"] == columns
