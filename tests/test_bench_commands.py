"""Every bench command the docs show names a script that exists and flags that script accepts (its
``--help`` lists them): a renamed flag breaks this test, not a reader's copy of the command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"python bench/([a-z_]+)\.py([^`|)\n#]*)")


def shown() -> dict[str, set[str]]:
    """Flags of each bench script as the docs show them."""
    out: dict[str, set[str]] = {}
    for doc in DOCS:
        for script, rest in COMMAND.findall(doc.read_text()):
            out.setdefault(script, set()).update(re.findall(r"(--[a-z][a-z0-9-]*)", rest))
    return out


COMMANDS = shown()


def test_the_docs_show_bench_commands() -> None:
    assert {"soak", "ab", "query_bench", "rorder_bench"} <= set(COMMANDS)


@pytest.mark.parametrize("script", sorted(COMMANDS))
def test_a_documented_bench_command_parses(script: str) -> None:
    path = REPO / "bench" / f"{script}.py"
    assert path.is_file(), f"the docs show bench/{script}.py, which does not exist"
    if not COMMANDS[script]:
        return
    out = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    missing = sorted(flag for flag in COMMANDS[script] if flag not in out.stdout)
    assert not missing, f"bench/{script}.py --help does not list {missing}"
