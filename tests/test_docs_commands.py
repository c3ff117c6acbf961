"""The documented local runs, run as written: every fenced shell block of docs/function-app.md marked
``<!-- tested -->`` runs in a clean copy of the repository (tracked files only: no local.settings.json,
no .azurite/), with the project's venv first on PATH. Only ports change, through the variables the
docs name for that, so the test never meets another Azurite on 10000."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from services import find_azurite, free_port

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "function-app.md"
TESTED = re.compile(r"<!-- tested -->\s*\n```(?:bash|sh)\n(.*?)```", re.S)


def marked_blocks(text: str) -> list[str]:
    """The shell blocks marked as tested, in order."""
    return TESTED.findall(text)


def clean_copy(dest: Path) -> Path:
    """The repository's tracked files, as a fresh clone has them."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not name.startswith("node_modules"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run_block(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_every_tested_block_is_found() -> None:
    blocks = marked_blocks(DOC.read_text())
    assert any("local-run --demo" in b for b in blocks)
    assert any("lambda/try_local.py" in b for b in blocks)


def test_documented_azurite_command_has_the_flags_the_code_uses() -> None:
    from deltaextras.app.edges.local_azurite import FLAGS

    text = DOC.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("node_modules/.bin/azurite"))
    assert all(flag in line for flag in FLAGS)
    assert ".azurite/" in (REPO / ".gitignore").read_text().splitlines()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELTAEXTRAS_", "AZURE", "AWS_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path / "home")
    return env


def test_function_app_local_run_from_the_docs(tmp_path: Path) -> None:
    try:
        azurite = find_azurite()
    except Exception as exc:  # the services' own message says how to install it
        pytest.fail(str(exc))
    app = clean_copy(tmp_path / "clone")
    blob, queue, table = free_port(), free_port(), free_port()
    env = _env(tmp_path)
    env["AZURITE_BIN"] = azurite
    env["DELTAEXTRAS_STORAGE"] = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
        f"BlobEndpoint=http://127.0.0.1:{blob}/devstoreaccount1;QueueEndpoint=http://127.0.0.1:{queue}/devstoreaccount1;"
        f"TableEndpoint=http://127.0.0.1:{table}/devstoreaccount1;"
    )
    env["AZURITE_BLOB_STORAGE_URL"] = f"http://127.0.0.1:{blob}"
    block = next(b for b in marked_blocks(DOC.read_text()) if "local-run --demo" in b)
    done = run_block(block, app, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    out = done.stdout
    assert "created the demo sensor table" in out
    assert out.count(": committed (") == 3, out  # first run: each of the three partitions
    assert "3 committed, 0 skipped, 0 dead-lettered" in out
    assert "table exists; using it" in out and "0 worker invocation(s)" in out  # second run: nothing to do
    assert (app / ".azurite").is_dir()
    # The Azurite it started is gone.
    assert not any(
        c.laddr.port in (blob, queue) for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN
    )


def test_lambda_try_local_from_the_docs(tmp_path: Path) -> None:
    app = clean_copy(tmp_path / "clone")
    block = next(b for b in marked_blocks(DOC.read_text()) if "lambda/try_local.py" in b)
    done = run_block(block, app, _env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count(": committed (") == 3, done.stdout
    assert "0 message(s) in the dead-letter queue" in done.stdout
