"""A worker killed mid-rewrite leaves its local scratch directory (an output on its way to the store, a
spill of gigabytes); the next rewrite on the machine removes it once its process is gone and it has not
changed for an hour, and never touches a live process's directory or a young one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from oracle import checksum
from services import emulator_root

_KILLED = """
import os, signal, sys
from deltaextras.ops.common.scratch import scratch_dir
path = scratch_dir(sys.argv[1])
with open(os.path.join(path, "part-00000.c000.zstd.parquet"), "wb") as f:
    f.write(b"x" * 1_000_000)
print(path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

_RORDER = """
import json, sys
import deltaextras
deltaextras.rorder(sys.argv[1], storage_options=json.loads(sys.argv[2]), max_workers=1)
"""


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    return emulator_root(request, "scratch")


def _left_by_a_killed_process(tmp: Path, kind: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, kind], env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent == tmp and path.is_dir()
    return path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_next_rewrite_removes_what_a_killed_worker_left(
    cloud: tuple[str, str, dict[str, str], int], tmp_path: Path
) -> None:
    _, root, options, _ = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    for batch in range(3):
        rows = pa.table({"node_id": [batch, batch + 10], "node_id_range": [0, 0], "v": [1.0, 2.0]})
        write_deltalake(uri, rows, partition_by=["node_id_range"], mode="append", storage_options=options)
    before = checksum(uri, options)
    stale = _left_by_a_killed_process(tmp_path, "out")
    spill = _left_by_a_killed_process(tmp_path, "spill")
    young = _left_by_a_killed_process(tmp_path, "out")
    _age(stale, 2 * 3600)
    _age(spill, 2 * 3600)
    _age(young, 600)  # a killed process's, but recent: another machine sharing the directory may own it
    live = tmp_path / f"deltaextras-out-{os.getpid()}-live"  # a live process's, however old
    live.mkdir()
    _age(live, 5 * 3600)
    unrelated = tmp_path / "deltaextras-out-notapid"
    unrelated.mkdir()
    _age(unrelated, 5 * 3600)

    done = subprocess.run(
        [sys.executable, "-c", _RORDER, uri, json.dumps(options)],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert checksum(uri, options) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([young.name, live.name, unrelated.name])
