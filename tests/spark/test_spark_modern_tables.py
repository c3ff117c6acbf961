"""Tables that Apache Spark with Delta Lake creates with row tracking, in-commit timestamps and a widened
column (INT appends, then ``ALTER COLUMN ... TYPE BIGINT``), each alone and all three at once.

After Spark's appends (and a Spark DELETE and UPDATE, so that some files carry deletion vectors and some
rows materialized ids), our ``rorder``, deletion-vector ``delete``, copy-on-write ``delete`` and ``vacuum``
run, each commit followed by a checkpoint (``delta.checkpointInterval = 1``, set after Spark's setup).
After each, Spark reads the same rows with the same ``_metadata.row_id`` and
``_metadata.row_commit_version`` as before (less the rows deleted), ids stay unique, ``DESCRIBE HISTORY``
shows strictly increasing in-commit timestamps, and delta-rs and Sail read the same content. deltalake
1.x cannot open a table with the ``typeWidening`` reader feature at all: for those tables the test pins
that refusal and compares Spark with Sail (which reads them). Spark goes on appending afterwards.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from oracle import content_checksum, engine_checksums

from deltaextras.core.log import read_commit
from deltaextras.core.storage import TableStorage
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.vacuum import vacuum
from deltaextras.ops.rorder.rorder import rorder

KINDS = {
    "row_tracking": {"delta.enableRowTracking": "true"},
    "in_commit_timestamps": {"delta.enableInCommitTimestamps": "true"},
    "widened": {"delta.enableTypeWidening": "true"},
    "all": {
        "delta.enableRowTracking": "true",
        "delta.enableInCommitTimestamps": "true",
        "delta.enableTypeWidening": "true",
    },
}


def _create(spark: Any, uri: str, props: dict[str, str]) -> None:
    every = {**props, "delta.enableDeletionVectors": "true"}
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in every.items())
    t = f"delta.`{uri}`"
    spark.sql(
        f"CREATE TABLE {t} (k INT, part INT, v STRING) USING delta PARTITIONED BY (part) TBLPROPERTIES ({listed})"
    )
    for b in range(3):
        spark.sql(f"INSERT INTO {t} SELECT id % 9, id % 2, concat('r', id) FROM range({b * 40}, {b * 40 + 40})")
    if "delta.enableTypeWidening" in props:
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN k TYPE BIGINT")
        spark.sql(f"INSERT INTO {t} SELECT id % 9 + 5000000000, id % 2, concat('r', id) FROM range(120, 150)")
    spark.sql(f"DELETE FROM {t} WHERE v IN ('r3', 'r50', 'r121')")  # deletion vectors
    spark.sql(f"UPDATE {t} SET v = concat(v, '-u') WHERE v IN ('r7', 'r8', 'r130')")  # materialized ids
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")  # for our commits


def _rows(spark: Any, uri: str, tracked: bool) -> set[tuple[Any, ...]]:
    """Every live row as Spark reads it, with its row id and row commit version when rows are tracked."""
    extra = ", _metadata.row_id AS rid, _metadata.row_commit_version AS rcv" if tracked else ""
    rows = spark.sql(f"SELECT k, part, v{extra} FROM delta.`{uri}`").collect()
    out = {tuple(r) for r in rows}
    assert len(out) == len(rows)  # v is unique: a repeated row would be a duplicate
    if tracked:
        ids = [r["rid"] for r in rows]
        assert None not in ids and len(set(ids)) == len(ids), "row ids are not unique"
    return out


def _check_engines(spark: Any, sail: Any, uri: str, widened: bool) -> None:
    if widened:
        with pytest.raises(Exception, match=r"(?i)typewidening"):
            DeltaTable(uri).to_pyarrow_dataset()
        via_spark = content_checksum(spark.read.format("delta").load(uri).toArrow())
        assert content_checksum(sail.read.format("delta").load(uri).toArrow()) == via_spark
        return
    sums = engine_checksums(uri, delta_spark=spark, sail=sail)
    assert len(set(sums.values())) == 1, sums


def _ours(uri: str) -> list[int]:
    """Versions committed by deltaextras."""
    storage = TableStorage(uri)
    versions = sorted(int(p.name[:20]) for p in (Path(uri) / "_delta_log").glob("*.json"))
    return [v for v in versions if "deltaextras" in (read_commit(storage, v)[0].to_json_body().get("engineInfo", ""))]


def _check_log(spark: Any, uri: str, ict: bool) -> None:
    """Every commit of ours starts with a commitInfo; with in-commit timestamps it carries one, strictly
    after the previous commit's, and Spark's history shows them increasing; a checkpoint at each."""
    storage = TableStorage(uri)
    ours = _ours(uri)
    assert ours
    for v in ours:
        first = json.loads((Path(uri) / "_delta_log" / f"{v:020d}.json").read_text().splitlines()[0])
        assert "commitInfo" in first, first
        assert (Path(uri) / "_delta_log" / f"{v:020d}.checkpoint.parquet").exists(), v
        if ict:
            mine = first["commitInfo"]["inCommitTimestamp"]
            before = read_commit(storage, v - 1)[0].to_json_body()["inCommitTimestamp"]
            assert mine > before and first["commitInfo"]["timestamp"] == mine
    history = sorted(spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect(), key=lambda r: r["version"])
    stamps = [r["timestamp"] for r in history]
    if ict:
        assert all(a < b for a, b in itertools.pairwise(stamps)), stamps


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_modern_table_through_every_rewrite(delta_spark: Any, spark: Any, tmp_path: Path, kind: str) -> None:
    props = KINDS[kind]
    tracked = "delta.enableRowTracking" in props
    ict = "delta.enableInCommitTimestamps" in props
    widened = "delta.enableTypeWidening" in props
    uri = str(tmp_path / kind)
    _create(delta_spark, uri, props)
    expected = _rows(delta_spark, uri, tracked)
    _check_engines(delta_spark, spark, uri, widened)

    report = rorder(uri, by="k", max_workers=1)
    assert [r.status for r in report] == ["committed", "committed"]
    assert _rows(delta_spark, uri, tracked) == expected
    _check_engines(delta_spark, spark, uri, widened)

    dv = delete(uri, "k = 3", mode="deletion_vectors")
    assert dv.rows_deleted > 0 and dv.deletion_vectors_added + dv.deletion_vectors_updated > 0
    expected = {r for r in expected if r[0] != 3}
    assert _rows(delta_spark, uri, tracked) == expected

    cow = delete(uri, "k = 4 OR k = 5000000004", mode="copy_on_write")
    assert cow.rows_deleted > 0 and cow.files_rewritten > 0
    expected = {r for r in expected if r[0] not in (4, 5000000004)}
    assert _rows(delta_spark, uri, tracked) == expected
    _check_engines(delta_spark, spark, uri, widened)

    removed = vacuum(uri, retention_hours=0, dry_run=False)
    assert removed.data_files
    assert _rows(delta_spark, uri, tracked) == expected
    _check_engines(delta_spark, spark, uri, widened)
    _check_log(delta_spark, uri, ict)

    # Spark goes on writing: new rows get ids no row has, and every row keeps its own.
    delta_spark.sql(f"INSERT INTO delta.`{uri}` SELECT id % 9, id % 2, concat('r', id) FROM range(200, 230)")
    after = _rows(delta_spark, uri, tracked)
    assert expected <= after and len(after) == len(expected) + 30
    if widened:
        types = {f.name: f.dataType.simpleString() for f in delta_spark.read.format("delta").load(uri).schema}
        assert types["k"] == "bigint"
        schema = json.loads(_schema_string(uri))
        (k,) = [f for f in schema["fields"] if f["name"] == "k"]
        assert k["metadata"]["delta.typeChanges"] == [{"toType": "long", "fromType": "integer"}]
    assert content_checksum(delta_spark.read.format("delta").load(uri).toArrow())[0] == len(after)


def _schema_string(uri: str) -> str:
    from deltaextras.core.snapshot import TableSnapshot

    return TableSnapshot.load(uri, for_writing=False).metadata.schema_string or ""


def test_variant_stays_refused_because_pyarrow_drops_the_annotation(delta_spark: Any, tmp_path: Path) -> None:
    """Why variant tables stay refused, measured: pyarrow reads a Spark VARIANT column as a struct of two
    binaries and writes it back without the Parquet VARIANT annotation. rorder refuses the table by name
    and writes nothing. (When a pyarrow keeps the annotation, this test fails: look at the feature again.)"""
    import pyarrow.parquet as pq

    from deltaextras.errors import UnsupportedFeatureError

    uri = str(tmp_path / "variant")
    delta_spark.sql(f"CREATE TABLE delta.`{uri}` (id INT, j VARIANT) USING delta")
    delta_spark.sql(f"""INSERT INTO delta.`{uri}` SELECT id, parse_json(concat('{{"a":', id, '}}')) FROM range(4)""")
    source = sorted(Path(uri).glob("*.parquet"))[0]
    assert "Variant" in str(pq.ParquetFile(source).schema)
    table = pq.read_table(source)
    assert str(table.schema.field("j").type) == "struct<value: binary not null, metadata: binary not null>"
    copy = tmp_path / "copy.parquet"
    pq.write_table(table, copy)
    assert "Variant" not in str(pq.ParquetFile(copy).schema)
    log = sorted((Path(uri) / "_delta_log").glob("*.json"))
    with pytest.raises(UnsupportedFeatureError, match=r"variantType.*VARIANT annotation"):
        rorder(uri, by="id", max_workers=1)
    assert sorted((Path(uri) / "_delta_log").glob("*.json")) == log
