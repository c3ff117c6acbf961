"""The soak's memory figures are each process's own: a child of the driver must not report the driver's
pages (Linux keeps the high-water mark of the forked copy of the parent across ``exec``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_a_child_reports_its_own_peak_not_the_driver_s() -> None:
    ballast = bytearray(400 * 2**20)
    for i in range(0, len(ballast), 4096):  # resident, not just reserved
        ballast[i] = 1
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import soak; print(soak._own_peak_rss_mb())"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = child.stdout.read() if child.stdout else ""
    _, _, usage = os.wait4(child.pid, 0)
    own = float(out.strip())
    assert usage.ru_maxrss / 1024 >= 400  # what the driver measured before: its own ballast
    assert 10 < own < 300, own
    del ballast
