"""Writer settings follow the row groups the values make. The page index is written only where a value's
column chunk spans several pages (a point query through deltalake or Sail loads a file's page index with a
request of its own, and on one- or two-page chunks it lets the reader skip nothing); a column gets a
dictionary only where its row groups repeat values (in row groups of a hundred rows a dictionary page holds
nearly every value once more)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import checksum

from deltaextras.ops.rorder.rorder import rorder


def _write(uri: str, nodes: int, rows_per_node: int) -> None:
    rng = np.random.default_rng(5)
    ids = rng.permutation(np.repeat(np.arange(nodes, dtype=np.int64), rows_per_node))
    table = pa.table(
        {
            "node_id": ids,
            "utc_time": pa.array(np.arange(len(ids)) * 1_000_000, pa.timestamp("us", tz="UTC")),
            "value": rng.normal(size=len(ids)),
            "humidity": np.round(rng.uniform(0, 100, len(ids)), 1),  # 1,001 values
        }
    )
    write_deltalake(uri, table, partition_by=None)


def _indexed(uri: str) -> set[bool]:
    out = set()
    for f in DeltaTable(uri).file_uris():
        meta = pq.ParquetFile(f).metadata
        for i in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                col = meta.row_group(i).column(c)
                out.add(col.has_column_index and col.has_offset_index)
    return out


@pytest.mark.parametrize(
    ("nodes", "rows_per_node", "indexed"),
    [(600, 12, False), (150, 2_000, False), (2, 60_000, True)],
)
def test_a_page_index_only_where_a_value_spans_pages(
    tmp_path: Path, nodes: int, rows_per_node: int, indexed: bool
) -> None:
    uri = str(tmp_path / "t")
    _write(uri, nodes, rows_per_node)
    before = checksum(uri)
    result = rorder(uri, by="node_id", sort_by="utc_time")
    assert len(result.by_status("committed")) == 1
    assert checksum(uri) == before
    assert _indexed(uri) == {indexed}


def _dictionary(uri: str, column: str) -> set[bool]:
    out = set()
    for f in DeltaTable(uri).file_uris():
        meta = pq.ParquetFile(f).metadata
        c = meta.schema.names.index(column)
        for i in range(meta.num_row_groups):
            out.add(meta.row_group(i).column(c).has_dictionary_page)
    return out


@pytest.mark.parametrize(
    ("nodes", "rows_per_node", "layout", "dictionary"),
    [(1_500, 12, "tiered", False), (2, 30_000, "full", True)],
)
def test_a_dictionary_only_where_row_groups_repeat_values(
    tmp_path: Path, nodes: int, rows_per_node: int, layout: str, dictionary: bool
) -> None:
    uri = str(tmp_path / "t")
    _write(uri, nodes, rows_per_node)  # 1,001 humidity values: a tenth of the rows or fewer
    before = checksum(uri)
    rorder(uri, by="node_id", sort_by="utc_time", layout=layout)
    assert checksum(uri) == before
    assert _dictionary(uri, "humidity") == {dictionary}
    assert _dictionary(uri, "node_id") == {True}
