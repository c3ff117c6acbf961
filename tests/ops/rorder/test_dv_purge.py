"""A deletion vector does not outlive the next run: deltalake turns predicate pushdown off for a whole scan
once a scanned file carries one, so every point query would read the whole table. After a DELETE with
deletion vectors, the next run of either layout, on a partitioned and on an unpartitioned table, rewrites
the files that carry them — in the tiered layout only those, the other files of their tier stay — and the
table reads the same through deltalake's reader (which applies the vectors)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import checksum, live_adds, sensor_batch

from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.rorder.rorder import rorder

NODES = 40


def _table(uri: str, partitioned: bool) -> dict[str, object]:
    rng = np.random.default_rng(5)
    for _ in range(3):
        batch = sensor_batch(rng, NODES, 800)
        if not partitioned:
            batch = batch.drop_columns(["node_id_range"])
        write_deltalake(uri, batch, partition_by=["node_id_range"] if partitioned else None, mode="append")
    enable_deletion_vectors(uri)
    # small footers and a row group per value: several files per unit, so a vector lands in some of them only;
    # one node is 2.5 % of a unit
    return {"by": "node_id", "sort_by": "utc_time", "max_footer_bytes": 4096, "min_row_group_bytes": 0}


def _with_vectors(uri: str) -> set[str]:
    """The live files that carry a deletion vector, as deltalake reports them (file names)."""
    vectors = pa.table(DeltaTable(uri).deletion_vectors().read_all())
    return {PurePosixPath(unquote(u)).name for u in vectors.column(0).to_pylist()}


def _live(uri: str) -> set[str]:
    return {PurePosixPath(unquote(a["path"])).name for a in live_adds(uri)}


@pytest.mark.parametrize("layout", ["full", "tiered"])
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_the_next_run_purges_every_deletion_vector(tmp_path: Path, layout: str, partitioned: bool) -> None:
    uri = str(tmp_path / "t")
    options = {**_table(uri, partitioned), "layout": layout}
    assert not rorder(uri, max_workers=1, **options).failed
    settled = _live(uri)
    assert len(settled) > 3, "the test needs several files per layout"

    deleted = delete(uri, "node_id = 7", inline_max_bytes=0)
    assert deleted.rows_deleted > 0
    carrying = _with_vectors(uri)
    assert carrying and carrying < settled  # one node's rows: only some files carry a vector
    expected = checksum(uri)

    report = rorder(uri, max_workers=1, **options)
    assert not report.failed and any(r.status == "committed" for r in report)
    assert _with_vectors(uri) == set(), "a file still carries a deletion vector after the run"
    assert checksum(uri) == expected
    left = _live(uri)
    if layout == "tiered":  # only the files that carried a vector were rewritten
        assert settled - left == carrying
    again = rorder(uri, max_workers=1, **options)
    assert all(r.status == "skipped" for r in again)


def test_plan_and_report_name_the_rows_to_purge_and_the_kind_of_unit(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    options = _table(uri, partitioned=False)
    rorder(uri, max_workers=1, **options)
    delete(uri, "node_id = 7", inline_max_bytes=0)
    from deltaextras import plan_table

    (unit,) = [u for u in plan_table(uri, **options).partitions if u.action == "rewrite"]
    assert unit.reason.endswith("deleted row(s) to purge"), unit.reason
    report = rorder(uri, max_workers=1, **options)
    assert report.summary().startswith(f"{len(report)} unit(s): "), report.summary()
