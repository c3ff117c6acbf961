"""Apache Spark with Delta Lake as the oracle: every table state our operations leave is read by Spark
(the protocol's reference implementation), by delta-rs and by Sail, and all three give the same content
checksum; Spark's ``DESCRIBE HISTORY`` and ``DESCRIBE DETAIL`` accept our commits.

States: rorder (plain, multi-pass spill, column mapping, partition values with special characters, the
null partition), our deletion-vector deletes (inline and ``u`` vectors, several vectors in one file,
unions with earlier vectors), a checkpoint written after our commit, and vacuum."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import assert_engines_agree, assert_layout, write_sensor_table

from deltaextras.core.actions import Add
from deltaextras.core.log import read_commit
from deltaextras.core.storage import TableStorage
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.maintenance.vacuum import vacuum
from deltaextras.ops.rorder.rorder import rorder

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def _operations(spark: Any, uri: str) -> list[str]:
    # plain SQL and collect(): once a Spark Connect session exists in the process, pyspark builds Column
    # objects for Connect, which a classic DataFrame refuses (so no orderBy/col on the classic session)
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
    return [r["operation"] for r in sorted(rows, key=lambda r: r["version"])]


def _dv_table(uri: str, *, batches: int = 3, rows: int = 120, **write_kwargs: Any) -> None:
    for b in range(batches):
        node = [(i * 7 + b) % 20 for i in range(rows)]
        write_deltalake(
            uri,
            pa.table(
                {
                    "node_id": pa.array(node, pa.int64()),
                    "node_id_range": pa.array([n // 10 for n in node], pa.int64()),
                    "ts": pa.array(
                        [T0 + dt.timedelta(minutes=b * rows + i) for i in range(rows)], pa.timestamp("us", tz="UTC")
                    ),
                    "value": pa.array([None if i % 17 == 0 else float((i * 13 + b) % 50 - 10) for i in range(rows)]),
                    "quality": pa.array([None if i % 11 == 0 else ["good", "bad", "it's"][i % 3] for i in range(rows)]),
                }
            ),
            partition_by=["node_id_range"],
            mode="append",
            **write_kwargs,
        )
    enable_deletion_vectors(uri)


# ------------------------------------------------------------------------------------------- rorder
def test_rorder_plain(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=4, nodes=15, rows=200, ranges=2)
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    report = rorder(uri, sort_by="utc_time", max_workers=1)
    assert [r.status for r in report] == ["committed", "committed"]
    assert assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before) == before
    assert assert_layout(uri, "node_id") == 30
    assert _operations(delta_spark, uri)[-2:] == ["OPTIMIZE", "OPTIMIZE"]


def test_rorder_multi_pass_spill(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=5, nodes=30, rows=600, ranges=1)
    before = assert_engines_agree(uri, delta_spark=delta_spark)
    report = rorder(uri, sort_by="utc_time", max_workers=1, memory_budget=30_000)
    assert report[0].passes > 2 and report[0].spilled_bytes > 0
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before)
    assert assert_layout(uri, "node_id") == 30


def test_rorder_special_character_and_null_partitions(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    """Partition values Spark, delta-rs and Hive escape differently in directory names, and a null value."""
    uri = str(tmp_path / "t")
    sites = ["a b", "x=y/z", "50%", "it's", "ü#1", "semi;colon", None]
    for b in range(3):
        write_deltalake(
            uri,
            pa.table(
                {
                    "node_id": pa.array([(i * 5 + b) % 7 for i in range(len(sites) * 6)], pa.int64()),
                    "batch": pa.array([b] * (len(sites) * 6), pa.int64()),
                    "site_range": pa.array([sites[i % len(sites)] for i in range(len(sites) * 6)], pa.string()),
                }
            ),
            partition_by=["site_range"],
            mode="append",
        )
    before = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    report = rorder(uri, by="node_id", sort_by="batch", max_workers=1)
    assert len(report) == len(sites) and {r.status for r in report} == {"committed"}
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=before)
    assert_layout(uri, "node_id")
    for site in sites:  # partition pruning through Spark finds every value, the null one too
        cond = "site_range IS NULL" if site is None else "site_range = '" + site.replace("'", "\\'") + "'"
        rows = delta_spark.read.format("delta").load(uri).where(cond).count()
        assert rows == 18, (site, rows)


def test_rorder_column_mapping(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    """A table Spark created with column mapping (name mode), renamed columns, physical names in files."""
    uri = str(tmp_path / "t")
    delta_spark.sql(
        f"CREATE TABLE delta.`{uri}` (node_id BIGINT, `utc time` TIMESTAMP, value DOUBLE, node_id_range BIGINT) "
        "USING delta PARTITIONED BY (node_id_range) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')"
    )
    for b in range(3):
        delta_spark.range(0, 40).selectExpr(
            f"(id * 7 + {b}) % 20 AS node_id",
            f"timestamp_seconds({b} * 1000 + id) AS `utc time`",
            f"CAST(id * 0.5 + {b} AS DOUBLE) AS value",
            f"((id * 7 + {b}) % 20) div 10 AS node_id_range",
        ).write.format("delta").mode("append").save(uri)
    delta_spark.sql(f"ALTER TABLE delta.`{uri}` RENAME COLUMN value TO reading")
    before = assert_engines_agree(uri, delta_spark=delta_spark)
    report = rorder(uri, sort_by="utc time", max_workers=1)
    assert {r.status for r in report} == {"committed"}
    assert_engines_agree(uri, delta_spark=delta_spark, expected=before)
    columns = set(delta_spark.read.format("delta").load(uri).columns)
    assert columns == {"node_id", "utc time", "reading", "node_id_range"}
    # the rewritten files use the physical names, as the protocol requires
    st = TableStorage(uri)
    adds = [a for a in read_commit(st, DeltaTable(uri).version()) or [] if isinstance(a, Add)]
    assert adds
    import pyarrow.parquet as pq

    names = pq.read_schema(pa.BufferReader(st.read(adds[0].path))).names
    assert all(n.startswith("col-") for n in names), names


# ----------------------------------------------------------------------------------- DV deletes
def test_deletion_vectors_inline_files_and_unions(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _dv_table(uri)
    steps = [
        ("node_id IN (3, 7, 12) AND value > 0", {}),  # small vectors: inline
        ("quality IS NULL OR (value < 0 AND quality != 'good')", {"inline_max_bytes": 0}),  # `u` vectors, unions
        ("ts >= '2024-01-01T03:00:00Z' AND ts < '2024-01-01T04:30:00Z' OR node_id = 19", {"inline_max_bytes": 0}),
    ]
    kinds: set[str] = set()
    for predicate, kwargs in steps:
        report = delete(uri, predicate, **kwargs)
        assert report.rows_deleted > 0
        actions = read_commit(TableStorage(uri), report.commit_version) or []
        adds = [a for a in actions if isinstance(a, Add)]
        vectors = [a.deletion_vector for a in adds if a.deletion_vector is not None]
        kinds |= {v.storage_type for v in vectors}
        vector_files = {v.path_or_inline_dv for v in vectors if v.storage_type == "u"}
        if kwargs:  # one vector file holds the vectors of several data files
            assert len(vector_files) < len(adds)
        spark_count = delta_spark.read.format("delta").load(uri).where(predicate).count()
        assert spark_count == 0, predicate
        assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    assert kinds == {"i", "u"}
    assert _operations(delta_spark, uri)[-3:] == ["DELETE"] * 3
    # Spark's own DELETE on top of our vectors unions with them; delta-rs and Sail read Spark's result
    delta_spark.sql(f"DELETE FROM delta.`{uri}` WHERE node_id = 4")
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)


def test_rorder_after_deletes_then_checkpoint_and_vacuum(delta_spark: Any, spark: Any, tmp_path: Path) -> None:
    """Vectors purged by rorder, a checkpoint written right after our commit, vacuum: all engines agree
    at each step, and Spark reads the table through our checkpoint once older commits are gone."""
    uri = str(tmp_path / "t")
    _dv_table(uri, configuration={"delta.checkpointInterval": "7"})  # versions 0-2 writes, 3 upgrade
    delete(uri, "node_id = 3", inline_max_bytes=0)  # 4
    delete(uri, "node_id = 12 AND value < 0")  # 5
    expected = assert_engines_agree(uri, delta_spark=delta_spark, sail=spark)
    report = rorder(uri, sort_by="ts", max_workers=1)  # 6, 7: the checkpoint at 7 follows our commit
    assert [r.commit_version for r in report] == [6, 7]
    log = Path(uri) / "_delta_log"
    assert (log / "00000000000000000007.checkpoint.parquet").exists()
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected)
    assert assert_layout(uri, "node_id") == 19  # node 3 is gone
    removed = vacuum(uri, retention_hours=0, dry_run=False)
    assert removed.data_files and removed.vector_files
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected)
    for n in range(7):  # log cleanup: only our checkpoint describes the table now
        (log / f"{n:020d}.json").unlink()
    assert_engines_agree(uri, delta_spark=delta_spark, sail=spark, expected=expected)
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    assert detail["numFiles"] == 2 and detail["partitionColumns"] == ["node_id_range"]


@pytest.mark.parametrize("inline", [True, False])
def test_vector_golden_shape_accepted_by_spark(delta_spark: Any, tmp_path: Path, inline: bool) -> None:
    """One vector deleting the first and last row of a file, inline and in a file: Spark applies it."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"k": list(range(100)), "k_range": [0] * 100}), partition_by=["k_range"])
    enable_deletion_vectors(uri)
    delete(uri, "k = 0 OR k = 99", inline_max_bytes=10_000 if inline else 0)
    rows = sorted(r.k for r in delta_spark.read.format("delta").load(uri).collect())
    assert rows == list(range(1, 99))


def test_every_encoding_of_the_layout_reads_in_spark(delta_spark: Any, tmp_path: Path) -> None:
    """Spark's vectorized Parquet reader decodes every column type as our layout writes it: high- and
    low-cardinality floats, integers, strings, binaries, decimals, dates and timestamps. (It refused
    the BYTE_STREAM_SPLIT floats the layout first wrote.)"""
    import decimal

    uri = str(tmp_path / "t")
    n = 300
    for b in range(2):
        write_deltalake(
            uri,
            pa.table(
                {
                    "k": pa.array([(i * 3 + b) % 5 for i in range(n)], pa.int64()),
                    "f64": [i / 7 + b for i in range(n)],
                    "f32": pa.array([i / 3 + b for i in range(n)], pa.float32()),
                    "i32": pa.array([i * 1001 + b for i in range(n)], pa.int32()),
                    "s": [f"reading-{i}-{b}" for i in range(n)],
                    "bin": pa.array([f"{i:05d}{b}".encode() for i in range(n)], pa.binary()),
                    "dec": pa.array([decimal.Decimal(i * 10 + b) / 100 for i in range(n)], pa.decimal128(12, 2)),
                    "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()),
                    "ts": pa.array([T0 + dt.timedelta(seconds=i * 7 + b) for i in range(n)], pa.timestamp("us", "UTC")),
                    "k_range": pa.array([0] * n, pa.int64()),
                }
            ),
            partition_by=["k_range"],
            mode="append",
        )
    before = assert_engines_agree(uri, delta_spark=delta_spark)
    rorder(uri, sort_by="ts", max_workers=1)
    assert_engines_agree(uri, delta_spark=delta_spark, expected=before)
    assert assert_layout(uri, "k") == 5
