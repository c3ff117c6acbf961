"""Run the reliability suites and print their figures: scenarios run, crash injections, fuzz cases,
failures found.

The suites are ``tests/reliability/test_reliability_*.py`` (crash injection, races, fuzzed input, confinement and
secrets); they start their own Azurite, moto server and Sail. Each scenario appends one line of figures
to a file named by ``DELTAEXTRAS_RELIABILITY_FIGURES``; this script runs pytest with that file set,
sums it by scenario and backend, and adds pytest's own verdict (a failed test is a failure found,
whatever the scenario recorded).

Usage::

    python bench/reliability_figures.py                    # CI counts (a few minutes)
    python bench/reliability_figures.py --full             # full counts (DELTAEXTRAS_RELIABILITY_FULL=1)
    python bench/reliability_figures.py --update-docs      # also rewrite the table in docs/reliability.md
    python bench/reliability_figures.py --workers 4 -- -k "not sail"

Azurite is found as the tests find it (``AZURITE_BIN``, or ``node_modules/.bin/azurite``). The exit
status is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "reliability.md"
SUITES = ("crash", "race", "fuzz", "confinement", "secrets")
CRASH_STEPS = ("after_output", "after_rewrite", "mid_log", "after_commit")


def run_suites(full: bool, workers: int, extra: list[str], figures: Path, junit: Path) -> int:
    """Run pytest on the reliability suites; returns its exit code."""
    env = dict(os.environ)
    env["DELTAEXTRAS_RELIABILITY_FIGURES"] = str(figures)
    env["DELTAEXTRAS_RELIABILITY_FULL"] = "1" if full else "0"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    if workers > 0:
        args += ["-n", str(workers)]
    args += sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "reliability").glob("test_reliability_*.py"))
    args += extra
    print("$", " ".join(args[1:]), flush=True)
    return subprocess.call(args, cwd=REPO, env=env)


def read_figures(path: Path) -> list[dict[str, Any]]:
    """The scenario lines the suites wrote."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_junit(path: Path) -> tuple[int, list[str]]:
    """(tests run, ids of failed tests) from pytest's JUnit report."""
    if not path.exists():
        return 0, []
    root = ET.parse(path).getroot()
    ran = 0
    failed = []
    for case in root.iter("testcase"):
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return ran, failed


def suite_of(test_id: str) -> str:
    """The suite a failed test belongs to, from its module name."""
    for name in ("crash", "race", "fuzz"):
        if f"test_reliability_{name}" in test_id:
            return name
    return "confinement"


def table(rows: list[dict[str, Any]], failed: list[str]) -> tuple[str, dict[str, int]]:
    """The Markdown table (one row per suite and scenario, backends merged) and the totals."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["suite"], r["scenario"])
        m = merged.setdefault(
            key, {"backends": [], "runs": 0, "injections": 0, "fuzz_cases": 0, "failures": 0, "notes": []}
        )
        if r["backend"] not in m["backends"]:
            m["backends"].append(r["backend"])
        for k in ("runs", "injections", "fuzz_cases", "failures"):
            m[k] += int(r.get(k) or 0)
        if r.get("note"):
            m["notes"].append(f"{r['backend']}: {r['note']}" if r["backend"] != "-" else r["note"])
    failures_by_suite: dict[str, int] = defaultdict(int)
    for test_id in failed:
        failures_by_suite[suite_of(test_id)] += 1
    lines = [
        "| suite | scenario | backends | runs | injections | fuzz cases | failures | notes |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    order = {s: i for i, s in enumerate(SUITES)}
    steps = {s: i for i, s in enumerate(CRASH_STEPS)}

    def rank(key: tuple[str, str]) -> tuple[int, int, str]:
        return order.get(key[0], len(order)), steps.get(key[1], len(steps)), key[1]

    for (suite, scenario), m in sorted(merged.items(), key=lambda kv: rank(kv[0])):
        notes = "; ".join(m["notes"]).replace("|", "/")
        lines.append(
            f"| {suite} | {scenario} | {', '.join(m['backends'])} | {m['runs']} | {m['injections']} | "
            f"{m['fuzz_cases']} | {m['failures']} | {notes} |"
        )
    totals = {
        "scenarios": len(merged),
        "runs": sum(m["runs"] for m in merged.values()),
        "injections": sum(m["injections"] for m in merged.values()),
        "fuzz_cases": sum(m["fuzz_cases"] for m in merged.values()),
        "failures": sum(m["failures"] for m in merged.values()) + len(failed),
    }
    lines.append(
        f"| **total** | {totals['scenarios']} scenarios | | {totals['runs']} | {totals['injections']} | "
        f"{totals['fuzz_cases']} | {totals['failures']} | |"
    )
    return "\n".join(lines), totals


def update_docs(block: str, mode: str) -> None:
    """Replace the ``mode`` ("ci" or "full") figures block of docs/reliability.md."""
    begin, end = f"<!-- figures:{mode}:begin -->", f"<!-- figures:{mode}:end -->"
    text = DOC.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{DOC} has no {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    _old, tail = rest.split(end, 1)
    DOC.write_text(f"{head}{begin}\n{block}\n{end}{tail}", encoding="utf-8")
    print(f"updated {DOC.relative_to(REPO)} ({mode} counts)")


def main(argv: list[str] | None = None) -> int:
    """Run, print the figures, optionally update the docs; returns pytest's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="full counts (DELTAEXTRAS_RELIABILITY_FULL=1)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: none; default 2)")
    parser.add_argument("--update-docs", action="store_true", help=f"rewrite the figures in {DOC.relative_to(REPO)}")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="deltaextras-reliability-") as tmp:
        figures, junit = Path(tmp) / "figures.jsonl", Path(tmp) / "junit.xml"
        started = time.monotonic()
        rc = run_suites(args.full, args.workers, args.pytest_args, figures, junit)
        seconds = time.monotonic() - started
        rows = read_figures(figures)
        ran, failed = read_junit(junit)
    block, totals = table(rows, failed)
    mode = "full counts (`--full`)" if args.full else "CI counts"
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    from importlib.metadata import version

    summary = (
        f"{mode}, {stamp}, Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"hypothesis {version('hypothesis')} (derandomized, no example database): "
        f"{ran} tests, {len(failed)} failed, {seconds:.0f} s wall. "
        f"{totals['scenarios']} scenarios, {totals['runs']} runs, {totals['injections']} crash/fault injections, "
        f"{totals['fuzz_cases']} fuzz cases, {totals['failures']} failures found."
    )
    print()
    print(block)
    print()
    print(summary)
    for test_id in failed:
        print(f"FAILED {test_id}")
    if args.update_docs:
        update_docs(f"{summary}\n\n{block}", "full" if args.full else "ci")
    return rc


if __name__ == "__main__":
    sys.exit(main())
