"""bench/ab.py, the A/B against an older commit: a smoke run against HEAD, its clean-up on Ctrl-C, and the
verdict its exit status follows (judged on made-up figures: no test times anything)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AB = REPO / "bench" / "ab.py"
sys.path.insert(0, str(AB.parent))

import ab  # noqa: E402

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True).returncode != 0,
    reason="bench/ab.py checks commits out of this project's git repository",
)


def _worktrees() -> set[str]:
    out = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True)
    return {line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("worktree ")}


def _ref_tree(line: str) -> str:
    """The REF worktree a run checked out, from its ``ref imports deltaextras from <tree>/shared/...`` line."""
    assert line.startswith("  ref imports deltaextras from ") and line.endswith("/shared/__init__.py"), line
    return line.split(" from ", 1)[1].rsplit("/shared/", 1)[0]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def test_quick_run_against_head_prints_the_table_and_removes_its_worktree(tmp_path: Path) -> None:
    # the tolerance only keeps the machine's noise out of the exit status: this test asserts no timing
    cmd = [sys.executable, str(AB), "--ref", "HEAD", "--quick", "--only", "import", "--tolerance", "100"]
    done = subprocess.run(
        [*cmd, "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"working imports deltaextras from {REPO / 'shared' / '__init__.py'}" in out
    tree = _ref_tree(next(line for line in out.splitlines() if "ref imports deltaextras from" in line))
    assert tree.endswith("/ref") and not tree.startswith(str(REPO))
    assert "| workload | pairs | wall × | CPU × | peak RSS × | call ×" in out
    row = next(line for line in out.splitlines() if line.startswith("| import |"))
    assert row.startswith("| import | 1 | ") and row.endswith("| ok |")
    assert "exit status 0" in out
    assert tree not in _worktrees() and not Path(tree).exists()


def test_a_workload_the_older_commit_cannot_run_reads_n_a_in_its_row(tmp_path: Path) -> None:
    old = "d354a73"  # the release before clustered tables: it refuses them with UnsupportedFeatureError
    if subprocess.run(["git", "rev-parse", "--verify", f"{old}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
        pytest.skip(f"{old} is not in this clone's history")
    cmd = [sys.executable, str(AB), "--ref", old, "--quick", "--only", "w2-clustered", "--tolerance", "100"]
    done = subprocess.run(
        [*cmd, "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert done.returncode == 0, done.stdout + done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| w2-clustered |"))
    assert row.startswith("| w2-clustered | 0 | – |")
    assert "| n/a on REF: UnsupportedFeatureError: the table uses Delta writer feature 'clustering'" in row


def test_ctrl_c_ends_the_run_and_removes_the_worktree(tmp_path: Path) -> None:
    cmd = [sys.executable, str(AB), "--ref", "HEAD", "--quick", "--only", "import", "--rounds", "10000"]
    proc = subprocess.Popen(
        [*cmd, "--cache", str(tmp_path / "cache")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        tree = ""
        for line in proc.stdout:
            if "ref imports deltaextras from" in line:
                tree = _ref_tree(line.rstrip("\n"))
            if "import round 2/" in line:
                break
        assert tree in _worktrees()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert tree not in _worktrees() and not Path(tree).exists()


def test_an_interrupted_measurement_ends_its_child() -> None:
    import _measure

    marker = f"ab-interrupt-{os.getpid()}-{time.monotonic_ns()}"

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            _measure.run_measured([sys.executable, "-c", "import time; time.sleep(60)", marker], timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # the child runs in its own session, so the interrupt never reached it: the measurement ended it
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == ""


def _result(pairs: list[tuple[float, float]], measure: str = "wall") -> ab.Result:
    wl = ab.Workload("w2", "rorder", "rorder", Path("."))
    res = ab.Result(wl)
    for working, ref in pairs:
        runs = {side: ab.Run(side, wall=1.0, cpu=1.0, rss=1.0, call=1.0) for side in (ab.WORKING, ab.REF)}
        setattr(runs[ab.WORKING], measure, working)
        setattr(runs[ab.REF], measure, ref)
        res.pairs.append(runs)
    return res


def test_verdict_fails_a_median_worse_than_the_tolerance() -> None:
    gate = list(ab.MEASURES)
    # medians of the working ÷ REF ratios: 1.04 passes at 5 %, 1.06 does not; one bad pair does not decide
    assert ab.verdict(_result([(1.04, 1.0), (1.5, 1.0), (0.9, 1.0)]), gate, 0.05) == ("ok", 0)
    assert ab.verdict(_result([(1.06, 1.0), (1.5, 1.0), (0.9, 1.0)], "rss"), gate, 0.05) == (
        "WORSE: peak RSS 1.06x",
        1,
    )
    assert ab.verdict(_result([(1.06, 1.0)], "rss"), ["wall", "cpu"], 0.05) == ("ok", 0)
    assert ab.verdict(_result([(1.06, 1.0)], "cpu"), gate, 0.10) == ("ok", 0)


def test_verdict_of_a_workload_that_could_not_run() -> None:
    gate = list(ab.MEASURES)
    on_ref = ab.Result(_result([]).workload, ref_error="UnsupportedFeatureError: the table uses clustering")
    assert ab.verdict(on_ref, gate, 0.05) == ("n/a on REF: UnsupportedFeatureError: the table uses clustering", 0)
    on_working = ab.Result(_result([]).workload, working_error="exit status 1")
    assert ab.verdict(on_working, gate, 0.05) == ("FAILED on the working tree: exit status 1", 2)
    text, status = ab.table([_result([(1.2, 1.0), (1.0, 1.0)]), on_ref], gate, 0.05)
    assert status == 1
    assert "| w2 | 2 | 1.10 (1.00–1.20) | 1.00 (1.00–1.00) |" in text
    assert "| w2 | 0 | – | – | – | – | – | – | n/a on REF:" in text


def test_a_child_that_imported_another_checkout_is_caught(tmp_path: Path) -> None:
    shared = (tmp_path / "shared").resolve()
    side = ab.Side("ref", shared, tmp_path / "path-ref")
    assert (
        ab._origin_error(side, {"package": str(shared / "__init__.py"), "module": str(shared / "ops" / "x.py")}) is None
    )
    other = str(REPO / "shared" / "__init__.py")
    assert "not from" in (ab._origin_error(side, {"package": other, "module": other}) or "")
