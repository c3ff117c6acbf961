"""Helpers for the function app, worker and Lambda tests: sensor tables, content checksums, layout
checks. (No tests in this module.)"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from deltaextras.ops.maintenance.inspect import read_amplification, row_group_table

REPO_ROOT = Path(__file__).resolve().parents[2]
BY = "node_id"
UNIT = "node_id_range"


def sensor_batch(batch: int, partitions: int, nodes: int = 6) -> pa.Table:
    """One five-minute append: every node of every partition, nodes in a scrambled order."""
    node_ids = [r * 100 + n for r in range(partitions) for n in range(nodes)]
    order = sorted(node_ids, key=lambda v: (v * 7919 + batch * 104729) % 1009)
    return pa.table(
        {
            BY: pa.array(order, pa.int64()),
            "utc_time": pa.array([batch * 300_000_000 + i for i in range(len(order))], pa.timestamp("us")),
            "value": pa.array([(v * 31 + batch) % 97 / 7 for v in order], pa.float64()),
            UNIT: pa.array([v // 100 for v in order], pa.int64()),
        }
    )


def write_sensor_table(
    uri: str, storage_options: Mapping[str, str] | None = None, *, partitions: int = 5, appends: int = 3
) -> None:
    """A table partitioned by ``node_id_range`` (``partitions`` values), ``appends`` files per partition."""
    for b in range(appends):
        write_deltalake(
            uri,
            sensor_batch(b, partitions),
            partition_by=[UNIT],
            mode="append",
            storage_options=dict(storage_options or {}) or None,
        )


def table_version(uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    return DeltaTable(uri, storage_options=dict(storage_options or {}) or None).version()


def content_checksum(uri: str, storage_options: Mapping[str, str] | None = None) -> str:
    """SHA-256 of the table's rows as delta-rs reads them, in a canonical order."""
    table = DeltaTable(uri, storage_options=dict(storage_options or {}) or None).to_pyarrow_table()
    names = sorted(table.column_names)
    table = table.select(names).sort_by([(n, "ascending") for n in names])
    return hashlib.sha256(json.dumps(table.to_pylist(), default=str).encode()).hexdigest()


def assert_in_layout(uri: str, storage_options: Mapping[str, str] | None, partitions: range) -> None:
    """Every partition: one value of ``node_id`` per row group, point queries read exactly their rows."""
    opts = dict(storage_options or {})
    for p in partitions:
        groups = row_group_table(uri, BY, partition={UNIT: p}, storage_options=opts)
        assert groups.num_rows > 0
        assert groups.column("min").to_pylist() == groups.column("max").to_pylist(), f"partition {p}"
        assert read_amplification(uri, BY, partition={UNIT: p}, storage_options=opts) == 1.0


def commits(uri: str, storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """commitInfo of every version, oldest first."""
    return list(reversed(DeltaTable(uri, storage_options=dict(storage_options or {}) or None).history()))


def write_many_files_table(root: Path, files: int) -> None:
    """A local table whose partition ``node_id_range=0`` has ``files`` two-row files, in one commit."""
    from deltalake.transaction import AddAction

    schema = pa.schema([(BY, pa.int64()), ("seq", pa.int64()), (UNIT, pa.int64())])
    DeltaTable.create(str(root), schema=schema, partition_by=[UNIT])
    part = root / f"{UNIT}=0"
    part.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    adds = []
    for i in range(files):
        rel = f"{UNIT}=0/part-{i:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        ids = [i % 50, (i * 7) % 50]
        pq.write_table(
            pa.table({BY: pa.array(ids, pa.int64()), "seq": pa.array([2 * i, 2 * i + 1], pa.int64())}), root / rel
        )
        stats = {
            "numRecords": 2,
            "minValues": {BY: min(ids), "seq": 2 * i},
            "maxValues": {BY: max(ids), "seq": 2 * i + 1},
            "nullCount": {BY: 0, "seq": 0},
        }
        adds.append(AddAction(rel, os.path.getsize(root / rel), {UNIT: "0"}, now, True, json.dumps(stats)))
    DeltaTable(str(root)).create_write_transaction(adds, mode="append", schema=schema, partition_by=[UNIT])
