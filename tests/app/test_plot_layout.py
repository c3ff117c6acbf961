"""The layout picture stays readable from 1 to 10,000 files: one band per partition, labelled with its
files and the row groups a point query reads there, capped in height; ``demo --plot`` draws before and
after side by side."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltaextras.app.cli import main
from deltaextras.app.plot import BAND_ROWS, MAX_BANDS, Panel, draw_panels
from deltaextras.ops.maintenance.inspect import delta_files

SVG = "{http://www.w3.org/2000/svg}"


def _ids(svg: Path, prefix: str) -> list[str]:
    root = ET.parse(svg).getroot()
    return [e.get("id", "") for e in root.iter(f"{SVG}g") if e.get("id", "").startswith(prefix)]


def _appends(files: int, partitions: int) -> tuple[pa.Table, dict[str, str]]:
    """Row groups of ``files`` appended files (one row group each, every file spanning its partition's range)."""
    rng = np.random.default_rng(0)
    names = [f"k_range={i % partitions}/part-{i:05d}.parquet" for i in range(files)]
    lo = np.array([(i % partitions) * 150 + int(rng.integers(0, 5)) for i in range(files)])
    table = pa.table(
        {
            "file": names,
            "row_group": [0] * files,
            "min": lo,
            "max": lo + 140,
            "rows": [300] * files,
            "bytes": [4000] * files,
        }
    )
    return table, {n: n.split("/")[0] for n in names}


@pytest.mark.parametrize(("files", "partitions"), [(1, 1), (144, 3), (10_000, 20)])
def test_height_is_capped_and_every_partition_is_one_labelled_band(tmp_path: Path, files: int, partitions: int) -> None:
    from PIL import Image

    table, partition_of = _appends(files, partitions)
    out = tmp_path / "layout.png"
    drawn = draw_panels([Panel(table, [0] * files, "appends", partition_of)], str(out))
    assert (drawn.files, drawn.row_groups) == (files, files)
    with Image.open(out) as img:
        assert img.size[0] == 1100 and 200 <= img.size[1] <= 1400, img.size

    svg = tmp_path / "layout.svg"
    draw_panels([Panel(table, [0] * files, "appends", partition_of)], str(svg))
    bands = _ids(svg, "band-")
    per = files // partitions
    # every file of a partition spans all its values: a point query reads each of them
    assert sorted(bands) == sorted(f"band-k_range={p}-files-{per}-reads-{per}" for p in range(partitions))


def test_many_partitions_are_cut_and_counted(tmp_path: Path) -> None:
    table, partition_of = _appends(MAX_BANDS + 15, MAX_BANDS + 15)
    svg = tmp_path / "layout.svg"
    drawn = draw_panels([Panel(table, [0] * table.num_rows, "", partition_of)], str(svg))
    assert len(_ids(svg, "band-")) == MAX_BANDS
    assert drawn.files == MAX_BANDS
    assert BAND_ROWS >= 1


def test_demo_plot_draws_before_and_after_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    table = tmp_path / "t"
    out = tmp_path / "demo.svg"
    assert (
        main(["demo", "--path", str(table), "--nodes", "12", "--batches", "4", "--ranges", "2", "--plot", str(out)])
        == 0
    )
    assert f"to {out}" in capsys.readouterr().out
    after_groups = sum(pq.ParquetFile(os.path.join(table, k)).metadata.num_row_groups for k in delta_files(str(table)))
    assert after_groups == 12  # one row group per node
    assert len(_ids(out, "rowgroup-")) == 8  # before: 4 appends x 2 partitions
    assert len(_ids(out, "after-rowgroup-")) == after_groups
    bands = _ids(out, "band-")
    assert sorted(bands) == [
        "band-node_id_range=0-files-1-reads-1",
        "band-node_id_range=0-files-4-reads-4",
        "band-node_id_range=1-files-1-reads-1",
        "band-node_id_range=1-files-4-reads-4",
    ]
