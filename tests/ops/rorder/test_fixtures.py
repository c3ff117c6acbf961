"""Every real table written by Spark, Databricks and delta-rs: rewritten with identical content, or refused
by name with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from oracle import assert_layout, checksum, live_adds, rows_checksum, scan

from deltaextras import UnsupportedFeatureError, rorder
from deltaextras.core.log import list_log
from deltaextras.core.storage import TableStorage

# table -> row-group column
REWRITTEN = {
    "cdf-table-with-cdc-and-dvs": "id",
    "checkpoint-v2-table": "id",
    "delta-0.8.0-null-partition": "v",
    "delta-0.8.0-partitioned": "value",
    "delta-0.8.0-special-partition": "y",
    "delta-2.2.0-partitioned-types": "c3",
    "partition-type-primitives": "id",
    "simple_table_with_checkpoint": "version",
    "table-with-dv-small": "value",
    "table-without-dv-small": "value",
    "table_with_column_mapping": "Super Name",
    "table_with_deletion_logs": "address",
    "table_with_partitioning_mapping": "description",
}
REFUSED = {
    "table_with_liquid_clustering": "clustering",
    "simple_table_features": "reader version 5",
}
LIVE_ROWS = {
    "cdf-table-with-cdc-and-dvs": 5,
    "table-with-dv-small": 8,
    "table_with_deletion_logs": 98,
    "table_with_partitioning_mapping": 2,
}


def _versions(path: Path) -> list[int]:
    return sorted(list_log(TableStorage(str(path))).commits)


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_fixture_rewritten_with_identical_content(name: str, fixture_table: Any) -> None:
    path = fixture_table(name)
    before = checksum(str(path))
    if name in LIVE_ROWS:
        assert before[0] == LIVE_ROWS[name]
    # Force a rewrite even where the table is already one file per partition.
    report = rorder(str(path), by=REWRITTEN[name], max_workers=1, sort_by=REWRITTEN[name])
    assert not report.failed
    assert any(r.status == "committed" for r in report)
    assert checksum(str(path)) == before
    # no deletion vector survives on rewritten files, and the removes retired the (path, DV) pairs
    assert sum(1 for a in live_adds(str(path)) if a["path"].endswith(".c000.zstd.parquet")) >= 1
    physical = _physical_name(path, REWRITTEN[name])
    assert_layout(str(path), physical)


def _physical_name(path: Path, column: str) -> str:
    dt = DeltaTable(str(path))
    for f in dt.schema().fields:
        if f.name == column:
            return f.metadata.get("delta.columnMapping.physicalName", column)
    return column


def test_deletion_vector_rows_stay_deleted(fixture_table: Any) -> None:
    path = fixture_table("table-with-dv-small")
    assert sorted(scan(str(path)).column("value").to_pylist()) == [1, 2, 3, 4, 5, 6, 7, 8]
    rorder(str(path), by="value", sort_by="value", max_workers=1)
    assert sorted(scan(str(path)).column("value").to_pylist()) == [1, 2, 3, 4, 5, 6, 7, 8]
    log = (path / "_delta_log" / "00000000000000000002.json").read_text()
    assert '"deletionVector":{"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA"' in log


def test_edge_timestamps_keep_their_values(fixture_table: Any) -> None:
    """INT96 timestamps in year 9999 are kept exactly (read as microseconds, never through nanoseconds)."""
    path = fixture_table("table_with_edge_timestamps")
    expected = pa.concat_tables(
        [pq.read_table(p, coerce_int96_timestamp_unit="us") for p in sorted(path.glob("*.parquet"))]
    )
    expected = expected.cast(
        pa.schema(
            [
                pa.field(f.name, pa.timestamp("us", tz="UTC") if pa.types.is_timestamp(f.type) else f.type)
                for f in expected.schema
            ]
        )
    )
    rorder(str(path), by="BIG_DATE", max_workers=1, sort_by="BIG_DATE")
    assert rows_checksum(scan(str(path))) == rows_checksum(expected)
    assert max(scan(str(path)).column("BIG_DATE").to_pylist()).year == 9999


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_tables_are_refused_by_name(name: str, fixture_table: Any) -> None:
    path = fixture_table(name)
    versions = _versions(path)
    with pytest.raises(UnsupportedFeatureError) as info:
        rorder(str(path), by="id", max_workers=1)
    assert REFUSED[name] in str(info.value)
    assert "\n" not in str(info.value)
    assert _versions(path) == versions
