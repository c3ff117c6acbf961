"""Small values share a row group (``min_row_group_bytes``): in the tiered layout by default, where a fresh
run holds an hour of each value (a dozen rows), neighbouring values are written together until their row
group holds 4 KiB of Arrow data. No value is ever split across row groups, values stay in ascending order,
a value large enough keeps a row group of its own, and the content reads back the same through deltalake.
With ``min_row_group_bytes=0`` (and by default in the full layout) each value has its own row group."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import checksum

from deltaextras.app.cli import main as cli_main
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.options import TIERED_MIN_ROW_GROUP_BYTES, RorderOptions
from deltaextras.ops.rorder.rorder import rorder

NODES = 600
BIG = 7  # a node with far more readings than the others: its own row group in every layout


def _table(uri: str) -> None:
    rng = np.random.default_rng(11)
    for step in range(12):  # an hour of five-minute appends, random row order
        ids = np.concatenate([rng.permutation(NODES), np.full(400, BIG)]).astype(np.int64)
        write_deltalake(
            uri,
            pa.table(
                {
                    "node_id": ids,
                    "utc_time": pa.array(step * 300_000_000 + np.arange(len(ids)), pa.timestamp("us", tz="UTC")),
                    "value": rng.normal(size=len(ids)),
                }
            ),
            mode="append",
        )


def _groups(uri: str) -> list[tuple[str, int, list[int]]]:
    """(file, row group, node ids in row order) of every row group of the live files."""
    out = []
    for f in DeltaTable(uri).file_uris():
        pf = pq.ParquetFile(f)
        for i in range(pf.num_row_groups):
            out.append((f, i, pf.read_row_group(i, columns=["node_id"]).column(0).to_pylist()))
    return out


def _assert_whole_values(groups: list[tuple[str, int, list[int]]]) -> None:
    where: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for f, i, ids in groups:
        assert ids == sorted(ids)  # values in ascending order inside a row group
        for v in ids:
            where[v].add((f, i))
    assert all(len(places) == 1 for v, places in where.items() if v != BIG), "a small value split across groups"


@pytest.mark.parametrize(
    ("options", "packed"),
    [({"layout": "tiered"}, True), ({"layout": "tiered", "min_row_group_bytes": 0}, False), ({}, False)],
    ids=["tiered-default", "tiered-one-per-value", "full-default"],
)
def test_small_values_share_row_groups_in_the_tiered_layout(tmp_path: Path, options: dict, packed: bool) -> None:
    uri = str(tmp_path / "t")
    _table(uri)
    before = checksum(uri)
    assert not rorder(uri, by="node_id", sort_by="utc_time", max_workers=1, **options).failed
    assert checksum(uri) == before
    groups = _groups(uri)
    _assert_whole_values(groups)
    big = [ids for _f, _i, ids in groups if BIG in ids]
    assert all(set(ids) == {BIG} for ids in big)  # 4,800 readings: a row group (or more) of its own
    if not packed:
        assert all(len(set(ids)) == 1 for _f, _i, ids in groups)
        return
    assert len(groups) < NODES / 10  # a dozen readings a node: dozens of nodes a row group
    for (f, i, ids), (g, _j, after) in zip(groups, [*groups[1:], ("", 0, [])], strict=True):
        small = pq.ParquetFile(f).read_row_group(i).nbytes < TIERED_MIN_ROW_GROUP_BYTES
        # a row group under the size closes its file, or comes before the large value's own group
        assert not small or set(ids) == {BIG} or g != f or set(after) == {BIG}


def test_the_option_travels_in_messages_and_on_the_command_line(tmp_path: Path) -> None:
    tiered = RorderMessage.from_dict({"path": "/t", "layout": "tiered"})
    assert tiered.options.min_row_group_bytes == TIERED_MIN_ROW_GROUP_BYTES
    assert "min_row_group_bytes" not in tiered.to_dict()  # the layout's default: as older releases write it
    custom = RorderMessage.from_dict({"path": "/t", "layout": "tiered", "min_row_group_bytes": 0})
    assert RorderMessage.from_dict(custom.to_dict()).options.min_row_group_bytes == 0
    assert RorderOptions.build(min_row_group_bytes="64KiB").min_row_group_bytes == 65536

    uri = str(tmp_path / "t")
    _table(uri)
    args = ["run", uri, "--by", "node_id", "--layout", "tiered", "--min-row-group-bytes", "0"]
    assert cli_main(args) == 0
    assert all(len(set(ids)) == 1 for _f, _i, ids in _groups(uri))
