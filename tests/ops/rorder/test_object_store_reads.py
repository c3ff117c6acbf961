"""How a rewrite reads its inputs on object storage (Azurite and moto S3, through the tests' proxy): a small
file is fetched whole, in one GET, while the deletion vectors are read beside the files; files beyond a
quarter of the memory budget are read by ranges as before; the content comes out exact either way."""

from __future__ import annotations

import uuid
from pathlib import PurePosixPath
from urllib.parse import unquote

import numpy as np
import pytest
from deltalake import write_deltalake
from faultproxy import FaultProxy, through
from oracle import checksum, live_adds, sensor_batch
from services import emulator_root

import deltaextras
from deltaextras import delete
from deltaextras.ops.rorder.rewrite.rewrite import WHOLE_SHARE

FILES = 12


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    """(backend name, table root, direct storage options, emulator port)."""
    return emulator_root(request, "reads")


def _table(root: str, direct: dict[str, str]) -> str:
    """Twelve appended files of 300 rows, unpartitioned; a deletion vector on each (node 3's rows)."""
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(11)
    for i in range(FILES):
        config = {"delta.enableDeletionVectors": "true"} if i == 0 else None
        batch = sensor_batch(rng, 20, 300 + 40 * i).drop_columns(["node_id_range"])
        write_deltalake(uri, batch, mode="append", storage_options=direct, configuration=config)
    delete(uri, "node_id = 3", storage_options=direct, mode="deletion_vectors")
    return uri


def _gets(proxy: FaultProxy, names: list[str]) -> dict[str, int]:
    """GET requests per data file name."""
    counts = dict.fromkeys(names, 0)
    for seen in proxy.requests("GET"):
        name = PurePosixPath(unquote(seen.path)).name
        if name in counts:
            counts[name] += 1
    return counts


def test_small_inputs_are_fetched_whole_in_one_request_each(cloud: tuple[str, str, dict[str, str], int]) -> None:
    name, root, direct, port = cloud
    uri = _table(root, direct)
    before = checksum(uri, direct)
    inputs = [PurePosixPath(unquote(a["path"])).name for a in live_adds(uri, direct)]
    assert len(inputs) == FILES

    with FaultProxy(port) as proxy:
        options = through(name, direct, proxy)
        (report,) = deltaextras.rorder(uri, by="node_id", sort_by="utc_time", storage_options=options, max_workers=1)

    assert report.status == "committed" and report.files_removed == FILES, report.reason
    assert report.deleted_rows_purged > 0
    assert _gets(proxy, inputs) == dict.fromkeys(inputs, 1)
    assert checksum(uri, direct) == before


def test_inputs_beyond_the_budgets_share_are_read_by_ranges(cloud: tuple[str, str, dict[str, str], int]) -> None:
    name, root, direct, port = cloud
    uri = _table(root, direct)
    before = checksum(uri, direct)
    sizes = sorted((a["size_bytes"], PurePosixPath(unquote(a["path"])).name) for a in live_adds(uri, direct))
    whole = [n for _, n in sizes[:3]]
    ranged = [n for _, n in sizes[3:]]
    budget = WHOLE_SHARE * sum(s for s, _ in sizes[:3]) + 1  # room for the three smallest files only

    with FaultProxy(port) as proxy:
        options = through(name, direct, proxy)
        (report,) = deltaextras.rorder(
            uri, by="node_id", sort_by="utc_time", storage_options=options, max_workers=1, memory_budget=budget
        )

    assert report.status == "committed" and report.passes > 1, report  # a budget this small takes passes
    gets = _gets(proxy, whole + ranged)
    assert [gets[n] for n in whole] == [1, 1, 1]
    assert all(gets[n] >= 2 for n in ranged), gets  # the footer, then the data, by ranges
    assert checksum(uri, direct) == before
