"""A unit of many small values is written as several files, each with a footer within its budget
(``max_footer_bytes``, or a third of its mean value's bytes when that is more): every row group still holds
one value, files hold disjoint ascending value ranges (readers pick one by its ``by`` statistics), the
content is unchanged through delta-rs and Sail, and the next run finds the layout and skips it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake
from oracle import assert_layout, engine_checksums, footers, live_adds, scan, sensor_batch

import deltaextras
from deltaextras.app.config import AppConfig
from deltaextras.errors import InvalidArgumentError, MessageError
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.options import DEFAULT_MAX_FOOTER_BYTES, FOOTER_SHARE, RorderOptions

NODES = 900  # about 500 footer bytes a row group: ~440 KiB of footer in one file without a budget


def _small_values(uri: str, appends: int = 3, rows: int = 1800) -> None:
    rng = np.random.default_rng(3)
    for _ in range(appends):
        batch = sensor_batch(rng, NODES, rows).drop_columns(["node_id_range"])
        write_deltalake(uri, batch, mode="append")


def _values(uri: str) -> int:
    return len(pc.unique(scan(uri).column("node_id")))


def _footer_sizes(uri: str) -> list[int]:
    return [md.serialized_size for md in footers(uri).values()]


def test_many_small_values_are_split_into_files_whose_footers_stay_within_the_budget(
    tmp_path: Path, spark: Any
) -> None:
    uri = str(tmp_path / "t")
    _small_values(uri)
    before = engine_checksums(uri, sail=spark)

    report = deltaextras.rorder(uri, by="node_id", sort_by="utc_time", max_workers=1)

    assert [r.status for r in report] == ["committed"]
    sizes = _footer_sizes(uri)
    assert len(sizes) > 1, "expected the unit's values split across several files"
    assert max(sizes) <= DEFAULT_MAX_FOOTER_BYTES, sizes
    assert assert_layout(uri, "node_id") == _values(uri)  # one value per row group, files disjoint and ascending
    assert engine_checksums(uri, sail=spark) == before
    files = {a["path"] for a in live_adds(uri)}

    again = deltaextras.rorder(uri, by="node_id", sort_by="utc_time", max_workers=1)

    assert [r.status for r in again] == ["skipped"], [r.line() for r in again]
    assert {a["path"] for a in live_adds(uri)} == files


def test_max_footer_bytes_tunes_the_split(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _small_values(uri, appends=1, rows=NODES * 2)
    before = engine_checksums(uri)

    deltaextras.rorder(uri, by="node_id", max_footer_bytes=4096, max_workers=1)

    sizes = _footer_sizes(uri)
    assert max(sizes) <= 4096, sizes
    assert len(sizes) >= 100  # ~8 row groups of 4 columns under 4 KiB
    assert assert_layout(uri, "node_id") == _values(uri)
    assert engine_checksums(uri) == before


def test_tiered_runs_keep_their_footers_within_the_budget(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _small_values(uri, appends=1)
    deltaextras.rorder(uri, by="node_id", layout="tiered", max_workers=1)
    _small_values(uri, appends=1)
    before = engine_checksums(uri)

    deltaextras.rorder(uri, by="node_id", layout="tiered", max_workers=1)

    assert max(_footer_sizes(uri)) <= DEFAULT_MAX_FOOTER_BYTES
    assert engine_checksums(uri) == before


def test_large_values_may_have_a_larger_footer_than_the_default(tmp_path: Path) -> None:
    """Values of ~200 KiB each: their footer entries are noise beside them, so a file may hold more of
    them than the budget alone would allow (up to a third of a value's bytes)."""
    uri = str(tmp_path / "t")
    rng = np.random.default_rng(5)
    nodes, rows = 40, 40 * 12_000
    batch = pa.table(
        {
            "node_id": pa.array(np.repeat(np.arange(nodes), rows // nodes), pa.int64()),
            "v": rng.random(rows),
            "w": rng.random(rows),
        }
    )
    write_deltalake(uri, batch)

    deltaextras.rorder(uri, by="node_id", max_footer_bytes=1024, max_workers=1)

    mds = list(footers(uri).values())
    for md in mds:
        data = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        assert md.serialized_size <= max(1024, md.serialized_size and data / md.num_row_groups / FOOTER_SHARE) * 1.5
    assert len(mds) < nodes  # not one file per value: the budget grew with the values' bytes
    assert assert_layout(uri, "node_id") == nodes


def test_max_footer_bytes_travels_in_messages_and_bad_values_are_refused() -> None:
    msg = RorderMessage.from_dict({"path": "/t", "version": 1, "max_footer_bytes": 8192})
    assert msg.options.max_footer_bytes == 8192
    assert RorderMessage.from_dict(msg.to_dict()).options.max_footer_bytes == 8192
    plain = RorderMessage.from_dict({"path": "/t", "version": 1})
    assert "max_footer_bytes" not in plain.to_dict()  # default messages stay as older releases read them
    with pytest.raises(InvalidArgumentError, match="max_footer_bytes must be an integer"):
        RorderOptions.build(max_footer_bytes=0)
    with pytest.raises(MessageError, match="'max_footer_bytes' must be an integer"):
        RorderMessage.from_dict({"path": "/t", "version": 1, "max_footer_bytes": "16KB"})


def test_the_function_apps_table_settings_carry_max_footer_bytes() -> None:
    env = {"DELTAEXTRAS_TABLES": '[{"uri": "s3://lake/sensors", "max_footer_bytes": 4096}]'}
    table = AppConfig.from_env(env).tables[0]
    assert table.options.max_footer_bytes == 4096
    assert table.plan_kwargs()["max_footer_bytes"] == 4096
    message = RorderMessage.from_dict({"path": table.uri, "version": 1, **table.message_defaults()})
    assert message.options.max_footer_bytes == 4096
    plain = AppConfig.from_env({"DELTAEXTRAS_TABLES": '["s3://lake/sensors"]'}).tables[0]
    assert "max_footer_bytes" not in plain.message_defaults()
