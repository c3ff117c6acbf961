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

REPO = Path(__file__).resolve().parents[2]
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


# ---------------------------------------------------------------------------- docs/install.md, step by step
INSTALL = REPO / "docs" / "install.md"
NAMED = re.compile(r"<!-- tested: ([\w-]+) -->\s*\n```(?:bash|sh)\n(.*?)```", re.S)
INSTALL_STEPS = ("demo", "function-app", "rerun", "lambda", "spark-sail", "spark-classic", "wheel")


def install_block(name: str) -> str:
    """The block of docs/install.md marked ``<!-- tested: name -->``."""
    return dict(NAMED.findall(INSTALL.read_text()))[name]


def _install_env(tmp_path: Path) -> dict[str, str]:
    env = _env(tmp_path)
    # A clean venv installs from the package registries through pip's own cache (HOME is a fresh folder here).
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _check(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done.stdout


def test_install_steps_are_all_marked() -> None:
    assert [name for name, _block in NAMED.findall(INSTALL.read_text())] == list(INSTALL_STEPS)


@pytest.mark.slow
def test_install_demo_from_a_fresh_clone(tmp_path: Path) -> None:
    """``./dev demo`` makes its own venv, installs the package from the registries and runs the demo."""
    app = clean_copy(tmp_path / "clone")
    out = _check(run_block(install_block("demo"), app, _install_env(tmp_path)))
    assert "before: 144 files" in out and "read amplification 50.0x" in out
    assert "read amplification 1.00x" in out and "3 committed" in out
    assert (app / ".venv" / "bin" / "deltaextras").exists()


def test_install_function_app_then_a_hand_enqueued_rerun(tmp_path: Path) -> None:
    from services import Azurite

    app = clean_copy(tmp_path / "clone")
    azurite = Azurite.start(tmp_path / "azurite")
    try:
        env = _env(tmp_path)
        env["DELTAEXTRAS_STORAGE"] = azurite.connection_string
        env["AZURITE_BLOB_STORAGE_URL"] = f"http://127.0.0.1:{azurite.blob_port}"
        out = _check(run_block(install_block("function-app"), app, env))
        assert "created the demo sensor table" in out and "3 committed, 0 skipped, 0 dead-lettered" in out
        done = run_block(install_block("rerun"), app, env)
        out = _check(done)
        assert "table exists; using it" in out
        assert "az://lake/sensors at version" in out and "0 to rewrite, 3 skipped" in out  # the plan
        assert "1 message(s) sent" in done.stderr
        assert "0 committed, 1 skipped, 0 dead-lettered" in out
        assert "node_id_range=2" in out
    finally:
        azurite.stop()


def test_install_lambda_on_moto(tmp_path: Path) -> None:
    out = _check(run_block(install_block("lambda"), clean_copy(tmp_path / "clone"), _env(tmp_path)))
    assert out.count(": committed (") == 3 and "0 message(s) in the dead-letter queue" in out


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["spark-sail", "spark-classic"])
def test_install_spark_example(tmp_path: Path, engine: str) -> None:
    import delta_spark

    env = _env(tmp_path)
    if engine == "spark-classic":
        reason = delta_spark.unavailable()
        if reason:
            if os.environ.get("DELTAEXTRAS_REQUIRE_SPARK"):
                pytest.fail(reason)
            pytest.skip(reason)
        env["DELTA_JARS"] = str(delta_spark.jar_cache_dir())
    env = {k: v for k, v in env.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    done = run_block(install_block(engine), clean_copy(tmp_path / "clone"), env)
    out = _check(done)
    assert out.strip().splitlines()[-1] == "OK", out[-2000:]
    assert "row groups needed: 12 before, 1 after" in out
    # the refused CHECK constraint is one line, not the engine's stack traces
    assert "\tat " not in done.stderr and "Exception in task" not in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_install_wheel_runs_the_demo_from_a_clean_venv(tmp_path: Path) -> None:
    app = clean_copy(tmp_path / "clone")
    out = _check(run_block(install_block("wheel"), app, _install_env(tmp_path)))
    assert "read amplification 1.00x" in out
    wheels = sorted((app / "dist").glob("deltaextras-*.whl"))
    assert [w.name for w in wheels] == ["deltaextras-0.1.0-py3-none-any.whl"]
    site = next((app / "wheel-venv" / "lib").glob("python3*/site-packages"))
    assert (site / "deltaextras" / "app" / "cli.py").exists()  # installed, not a link to the clone
    assert not list(site.glob("__editable__*"))
    assert not [p for p in site.glob("*.pth") if str(app) in p.read_text()]  # nothing points back at the clone


# ---------------------------------------------------------------------------- links between the pages
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    out = set()
    for line in path.read_text().splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            dest = (page.parent / name).resolve() if name else page
            assert dest.exists(), f"{page.relative_to(REPO)}: {target} does not exist"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest), (
                    f"{page.relative_to(REPO)}: no heading #{anchor} in {name or page.name}"
                )
            checked += 1
    assert checked >= 20


def test_readme_is_a_landing_page() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "./dev demo" in text and "./dev test" in text and "docs/install.md" in text
    assert "Node.js ≥ 22" in text and "deltaextras vacuum" in text
    assert "to_pyarrow_table()" in text  # the readers that stop reading once deletion vectors are on


def test_clustering_doc_moves_a_range_table_to_an_unpartitioned_one(tmp_path: Path) -> None:
    """The deltalake snippet of docs/clustering.md, run as written on a ``node_id_range`` table (paths
    swapped for temporary ones): the rows arrive without the range column, one value per row group."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from oracle import assert_layout, content_checksum

    text = (REPO / "docs" / "clustering.md").read_text()
    (block,) = re.findall(r"<!-- tested -->\s*\n```python\n(.*?)```", text, re.S)
    source, flat = tmp_path / "sensors", tmp_path / "sensors_flat"
    rows = pa.table(
        {"node_id": [3, 1, 2, 1], "utc_time": pa.array([4, 3, 2, 1], pa.timestamp("us")), "node_id_range": [0] * 4}
    )
    write_deltalake(str(source), rows, partition_by=["node_id_range"])
    code = block.replace('"/data/sensors_flat"', repr(str(flat))).replace('"/data/sensors"', repr(str(source)))
    exec(compile(code, "docs/clustering.md", "exec"), {})
    moved = pa.table(DeltaTable(str(flat)).scan())
    assert moved.column_names == ["node_id", "utc_time"]
    assert content_checksum(moved) == content_checksum(rows.drop_columns(["node_id_range"]))
    assert_layout(str(flat), "node_id")
