"""Build the benchmark workload: one ``node_id_range`` partition of a Delta table, written on local disk.

The partition holds a large "history" file plus many five-minute append files, each in random row
order, as a table looks before ``rorder`` runs. Files are written with pyarrow (default writer
settings) and committed in one deltalake transaction, which is far quicker than one
``write_deltalake`` call per file and gives an equally valid table (protocol 1/2, so older deltalake
releases read it too).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PARTITION_COLUMN = "node_id_range"
PARTITION_VALUE = 0
NODES = 150
STEP = timedelta(minutes=5)
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
DATA_COLUMNS = ["node_id", "utc_time", "data_values", "quality"]
FILE_SCHEMA = pa.schema(
    [
        ("node_id", pa.int64()),
        ("utc_time", pa.timestamp("us", tz="UTC")),
        ("data_values", pa.float64()),
        ("quality", pa.int32()),
    ]
)
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field(PARTITION_COLUMN, pa.int64()))
_FORMAT = 2  # bump when the generated data changes, so cached workloads are rebuilt
_CHUNK_ROWS = 1 << 20  # pyarrow's default row group size: one chunk per row group


@dataclass(frozen=True)
class Workload:
    """Shape of the partition: ``history_steps`` five-minute steps in one file, then append files."""

    name: str
    history_steps: int
    append_files: int
    steps_per_append: int
    seed: int
    duplicate_share: float = 0.0  # this share of the rows appended again, as one more file

    @property
    def unique_rows(self) -> int:
        """Rows of the partition without the re-appended duplicates."""
        return NODES * (self.history_steps + self.append_files * self.steps_per_append)

    @property
    def duplicates(self) -> int:
        """Rows appended a second time."""
        return int(self.unique_rows * self.duplicate_share)

    @property
    def rows(self) -> int:
        """Total rows of the partition."""
        return self.unique_rows + self.duplicates

    @property
    def files(self) -> int:
        """Data files of the partition."""
        return 1 + self.append_files + (1 if self.duplicates else 0)


def with_duplicates(workload: Workload, share: float) -> Workload:
    """The same partition with ``share`` of its rows appended again (as a pipeline retry would).

    Example:
        >>> w = with_duplicates(workload_for(1, 0), 0.1)
        >>> w.name, w.duplicates, w.files
        ('x1-dup10', 304320, 290)
    """
    return replace(workload, name=f"{workload.name}-dup{round(share * 100)}", duplicate_share=share)


def workload_for(scale: int, seed: int, *, quick: bool = False) -> Workload:
    """The workload of one scale: x1 is 3.04 M rows in 289 files, xN has N times the rows in as many files.

    Example:
        >>> w = workload_for(1, 0)
        >>> w.rows, w.files
        (3043200, 289)
        >>> workload_for(10, 0).rows
        30432000
    """
    if quick:
        return Workload(
            f"quick-x{scale}", history_steps=400 * scale, append_files=24, steps_per_append=scale, seed=seed
        )
    return Workload(f"x{scale}", history_steps=20_000 * scale, append_files=288, steps_per_append=scale, seed=seed)


def _rows(steps: np.ndarray, nodes: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(steps)
    micros = (START - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    step_us = STEP // timedelta(microseconds=1)
    return pa.table(
        {
            "node_id": pa.array(nodes.astype(np.int64)),
            "utc_time": pa.array(micros + steps.astype(np.int64) * step_us, pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "data_values": pa.array(rng.normal(50.0, 15.0, n)),
            "quality": pa.array(rng.choice(np.array([0, 0, 0, 0, 0, 0, 1, 2], np.int32), n)),
        },
        schema=FILE_SCHEMA,
    )


def _write_shuffled(path: Path, first_step: int, steps: int, rng: np.random.Generator) -> None:
    """All ``NODES`` x ``steps`` rows from ``first_step`` on, in one random order, into one file."""
    order = rng.permutation(NODES * steps)
    with pq.ParquetWriter(path, FILE_SCHEMA) as writer:
        for start in range(0, len(order), _CHUNK_ROWS):
            chunk = order[start : start + _CHUNK_ROWS]
            writer.write_table(_rows(first_step + chunk // NODES, chunk % NODES, rng))


def _stats(path: Path) -> dict[str, Any]:
    """Delta ``stats`` of one data file (numRecords, min/max, null counts)."""
    table = pq.read_table(path)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in table.column_names:
        col = table.column(name)
        lo_hi = pc.min_max(col)
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if isinstance(lo, datetime):
            lo = lo.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            hi = hi.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        mins[name], maxs[name], nulls[name] = lo, hi, col.null_count
    return {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def build(workload: Workload, root: Path, *, rebuild: bool = False, partitions: int = 1) -> Path:
    """Write the workload's table under ``root`` (reused when already built with the same shape).

    ``partitions`` > 1 gives the table that many ``node_id_range`` partitions (0, 1, ...), each holding
    the same files (hard links of partition 0's), to measure several partitions rewritten at once."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    name = f"{workload.name}-seed{workload.seed}" + (f"-p{partitions}" if partitions > 1 else "")
    table_dir = root / name
    marker = root / f"{name}.json"
    shape = {**asdict(workload), "format": _FORMAT, "partitions": partitions}
    if not rebuild and marker.exists() and json.loads(marker.read_text()) == shape:
        return table_dir
    if table_dir.exists():
        shutil.rmtree(table_dir)
    part_dir = table_dir / f"{PARTITION_COLUMN}={PARTITION_VALUE}"
    part_dir.mkdir(parents=True)
    rng = np.random.default_rng(workload.seed)

    written: list[Path] = []
    history = part_dir / f"part-00000-{uuid.UUID(bytes=rng.bytes(16))}-c000.snappy.parquet"
    _write_shuffled(history, 0, workload.history_steps, rng)
    written.append(history)
    for k in range(workload.append_files):
        path = part_dir / f"part-{k + 1:05d}-{uuid.UUID(bytes=rng.bytes(16))}-c000.snappy.parquet"
        first = workload.history_steps + k * workload.steps_per_append
        _write_shuffled(path, first, workload.steps_per_append, rng)
        written.append(path)
    if workload.duplicates:
        everything = pa.concat_tables([pq.read_table(p) for p in written])
        picked = np.sort(rng.choice(everything.num_rows, workload.duplicates, replace=False))
        again = everything.take(pa.array(rng.permutation(picked)))
        path = part_dir / f"part-{len(written):05d}-{uuid.UUID(bytes=rng.bytes(16))}-c000.snappy.parquet"
        pq.write_table(again, path)
        written.append(path)
        del everything, again

    base_ms = int(START.timestamp() * 1000)
    stats = [json.dumps(_stats(p)) for p in written]
    for value in range(PARTITION_VALUE + 1, PARTITION_VALUE + partitions):
        (table_dir / f"{PARTITION_COLUMN}={value}").mkdir()
        for p in written:
            os.link(p, table_dir / f"{PARTITION_COLUMN}={value}" / p.name)
    actions = [
        AddAction(
            path=f"{PARTITION_COLUMN}={value}/{p.name}",
            size=p.stat().st_size,
            partition_values={PARTITION_COLUMN: str(value)},
            modification_time=base_ms + i * 300_000,
            data_change=True,
            stats=stats[i],
        )
        for value in range(PARTITION_VALUE, PARTITION_VALUE + partitions)
        for i, p in enumerate(written)
    ]
    create_table_with_add_actions(
        str(table_dir), Schema.from_arrow(TABLE_SCHEMA), actions, partition_by=[PARTITION_COLUMN]
    )
    marker.write_text(json.dumps(shape))
    return table_dir


# ----------------------------------------------------------------------------- text and binary tables
TEXT_ROWS = 400_000
TEXT_NODES = 50
TEXT_FILES = 4


def build_text(kind: str, root: Path, *, rebuild: bool = False) -> Path:
    """A partition whose rows are mostly one repeated 200-byte ``string`` or ``binary`` value.

    In Parquet the value is dictionary-encoded (a few bytes a row); decoded, Arrow holds all 200
    bytes of every row. 400,000 rows of ``node_id`` (50 values), ``utc_time`` and ``payload`` in
    four files.
    """
    table_dir = root / f"text-{kind}"
    marker = root / f"text-{kind}.json"
    shape = {"kind": kind, "rows": TEXT_ROWS, "nodes": TEXT_NODES, "files": TEXT_FILES, "format": _FORMAT}
    if not rebuild and marker.exists() and json.loads(marker.read_text()) == shape:
        return table_dir
    from deltalake import write_deltalake

    if table_dir.exists():
        shutil.rmtree(table_dir)
    rng = np.random.default_rng(7)
    per_file = TEXT_ROWS // TEXT_FILES
    value: str | bytes = "abcdefghij" * 20 if kind == "string" else bytes(range(200))
    payload_type = pa.string() if kind == "string" else pa.binary()
    for k in range(TEXT_FILES):
        steps = np.arange(k * per_file, (k + 1) * per_file, dtype=np.int64)
        part = pa.table(
            {
                "node_id": pa.array(rng.integers(0, TEXT_NODES, per_file), pa.int64()),
                "utc_time": pa.array(steps * 1_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                "payload": pa.array([value] * per_file, payload_type),
                PARTITION_COLUMN: pa.array(np.full(per_file, PARTITION_VALUE), pa.int64()),
            }
        )
        write_deltalake(str(table_dir), part, partition_by=[PARTITION_COLUMN], mode="append")
    marker.write_text(json.dumps(shape))
    return table_dir
