"""The sensor example of the original README, built on local disk: ``node_id`` readings appended every
five minutes into a table partitioned by ``node_id_range``.

Example:
    >>> import tempfile
    >>> path = build_sensor_table(tempfile.mkdtemp(), nodes=6, batches=3, ranges=2)
    >>> from deltalake import DeltaTable
    >>> dt = DeltaTable(path)
    >>> dt.metadata().partition_columns, len(dt.file_uris())
    (['node_id_range'], 6)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

FIVE_MINUTES_US = 5 * 60 * 1_000_000
START_US = 1_700_000_000 * 1_000_000


def sensor_batch(step: int, nodes: int, ranges: int, rng: np.random.Generator) -> pa.Table:
    """One five-minute batch: a reading per node, rows in random order."""
    per_range = max(1, -(-nodes // ranges))
    node_id = rng.permutation(nodes).astype(np.int64)
    return pa.table(
        {
            "node_id": node_id,
            "utc_time": pa.array(np.full(nodes, START_US + step * FIVE_MINUTES_US), pa.timestamp("us", tz="UTC")),
            "data_values": rng.normal(20.0, 5.0, nodes),
            "quality": pa.array(rng.integers(0, 3, nodes), pa.int32()),
            "node_id_range": node_id // per_range,
        }
    )


def build_sensor_table(
    path: str | os.PathLike[str], *, nodes: int = 150, batches: int = 48, ranges: int = 3, seed: int = 42
) -> str:
    """Write ``batches`` appends of ``nodes`` readings each (one file per partition per append)."""
    from deltalake import write_deltalake

    rng = np.random.default_rng(seed)
    target = str(Path(path).expanduser().resolve())
    for step in range(batches):
        write_deltalake(target, sensor_batch(step, nodes, ranges, rng), partition_by=["node_id_range"], mode="append")
    return target
