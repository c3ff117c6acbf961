"""``deltaextras inspect TABLE --plot FILE``: the picture is written, opens as an image, and draws one bar per
row group of the live files (deleted-row shares shaded where deletion vectors hide rows)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from oracle import write_sensor_table

from deltaextras import rorder
from deltaextras.app.cli import main
from deltaextras.ops.maintenance.inspect import delta_files

SVG = "{http://www.w3.org/2000/svg}"


def _ids(svg: Path, prefix: str) -> list[str]:
    root = ET.parse(svg).getroot()
    return [e.get("id", "") for e in root.iter(f"{SVG}g") if e.get("id", "").startswith(prefix)]


def _row_groups(uri: str) -> int:
    return sum(pq.ParquetFile(os.path.join(uri, key)).metadata.num_row_groups for key in delta_files(uri))


@pytest.fixture(scope="module")
def appended(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("plot") / "appended")
    write_sensor_table(uri, batches=4, nodes=12, rows=300, ranges=2)
    return uri


def test_svg_draws_every_row_group_of_appends(appended: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "before.svg"
    assert main(["inspect", appended, "--plot", str(out)]) == 0
    assert _row_groups(appended) == 8  # 4 appends x 2 partitions, one row group each
    assert len(_ids(out, "rowgroup-")) == 8
    assert _ids(out, "deleted-") == []
    printed = capsys.readouterr().out
    assert "row groups; point-query read amplification" in printed  # the text output stays
    assert f"drew 8 row groups of 8 files to {out}" in printed


def test_svg_after_rorder_and_delete_has_one_bar_per_value_and_shades_deletions(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    uri = str(tmp_path / "t")
    write_sensor_table(uri, batches=4, nodes=12, rows=300, ranges=2)
    rorder(uri, sort_by="utc_time", max_workers=1)
    main(["delete", uri, "--where", "node_id IN (3, 17) OR (node_id = 5 AND quality = 0)", "--enable-deletion-vectors"])
    capsys.readouterr()
    out = tmp_path / "after.svg"
    assert main(["inspect", uri, "--plot", str(out), "--json"]) == 0
    bars = _ids(out, "rowgroup-")
    assert len(bars) == _row_groups(uri) == 24  # 12 node_ids in each of 2 partitions
    # nodes 3, 5 and 17 each sit in one row group; those three (and no others) are shaded
    assert len(_ids(out, "deleted-")) == 3
    assert capsys.readouterr().out.lstrip().startswith("{")  # --json output stays parseable


def test_png_opens_as_an_image(appended: str, tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "layout.png"
    assert main(["inspect", appended, "--plot", str(out)]) == 0
    with Image.open(out) as img:
        assert img.format == "PNG"
        assert img.size[0] > 400 and img.size[1] > 100


def test_unknown_extension_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "layout.txt"
    assert main(["inspect", str(tmp_path / "no-such-table"), "--plot", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"deltaextras: InvalidArgumentError: cannot draw to '{out}': name a .svg, .png or .pdf file"]
    assert not out.exists()


def test_without_matplotlib_says_how_to_install_it(appended: str, tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('matplotlib is not installed')\n")
    out = tmp_path / "layout.svg"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "deltaextras.app.cli", "inspect", appended, "--plot", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "deltaextras: UnsupportedFeatureError: drawing needs matplotlib: pip install 'deltaextras[plot]'"
    ]
    assert proc.stdout == ""
    assert not out.exists()
