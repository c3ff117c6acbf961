"""What a new user meets on the first day, driven through the command line as a subprocess: every bad
input is one line from the error hierarchy (never a traceback) and writes nothing; the flags named in
messages are the command's own; ``plan`` reads ``local.settings.json`` as ``enqueue`` does; ``vacuum``
asks before deleting what the table's retention still protects; an interrupted run counts the
partitions it skipped; the example says which packages it lacks; CI counts expected failures apart."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from services import Azurite

from deltaextras.core.log import list_log
from deltaextras.core.storage import TableStorage

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "deltaextras"]


def _run(args: list[str], cwd: Path, *, stdin: str | None = None, env: dict[str, str] | None = None):
    base = {k: v for k, v in os.environ.items() if not k.startswith("DELTAEXTRAS_")}
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, input=stdin, env={**base, **(env or {})}
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("deltaextras: ") and "Error: " in lines[0], lines[0]
    return lines[0]


def _table(path: Path, *, partitioned: bool = True) -> str:
    for batch in range(2):
        data = pa.table({"k": [2, 1, 12, 11], "b": [batch] * 4, "k_range": [0, 0, 1, 1]})
        write_deltalake(str(path), data, partition_by=["k_range"] if partitioned else None, mode="append")
    return str(path)


def _commits(uri: str) -> int:
    return len(list_log(TableStorage(uri)).commits)


# ---------------------------------------------------------------------- bad input: one line, nothing written
def test_local_run_outside_the_app_folder_says_where_to_run(tmp_path: Path) -> None:
    done = _run(["local-run"], tmp_path)
    assert done.returncode == 2
    line = _one_line(done)
    assert f"{tmp_path} holds no function app (no host.json)" in line and "--app-root" in line
    done = _run(["local-run", "--demo"], tmp_path)
    assert done.returncode == 2 and "no host.json" in _one_line(done)
    assert not (tmp_path / ".azurite").exists()  # no Azurite was started for nothing


def test_plot_into_a_missing_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    target = tmp_path / "missing" / "dir" / "x.png"
    done = _run(["inspect", table, "--plot", str(target)], tmp_path)
    assert done.returncode == 2
    assert _one_line(done).endswith(f"cannot write {target}: folder {target.parent} does not exist")
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("flag", "value"), [("--batches", "0"), ("--batches", "-1"), ("--nodes", "0"), ("--ranges", "0")]
)
def test_demo_sizes_below_one_are_refused(tmp_path: Path, flag: str, value: str) -> None:
    done = _run(["demo", "--path", str(tmp_path / "demo"), flag, value], tmp_path)
    assert done.returncode == 2
    assert _one_line(done).endswith(f"{flag} must be at least 1, got {value}")
    assert not (tmp_path / "demo").exists() and done.stdout == ""


def test_run_by_a_partition_column_is_refused_up_front(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    for command in ("run", "plan"):
        done = _run([command, table, "--by", "k_range"], tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        line = _one_line(done)
        assert "--by k_range is a partition column" in line and "--by k" in line
        assert done.stdout == ""  # not one failed line per partition
    assert _commits(table) == 2


def test_messages_name_the_commands_flags(tmp_path: Path) -> None:
    table = _table(tmp_path / "t", partitioned=False)
    for command, flag in (("run", "--by"), ("plan", "--by"), ("inspect", "--column")):
        done = _run([command, table], tmp_path)
        assert done.returncode == 2
        line = _one_line(done)
        assert line.endswith(f"the table is not partitioned; pass {flag} to name the row-group column"), line
        assert "by=" not in line
    assert _commits(table) == 2


# ---------------------------------------------------------------------- local.settings.json
def test_plan_reads_local_settings_like_enqueue(azurite: Azurite, tmp_path: Path) -> None:
    container = azurite.create_container("firstday")
    uri = f"az://{container}/sensors"
    for batch in range(2):
        write_deltalake(
            uri,
            pa.table({"node_id": [2, 1, 152], "b": [batch] * 3, "node_id_range": [0, 0, 1]}),
            partition_by=["node_id_range"],
            mode="append",
            storage_options=azurite.storage_options,
        )
    without = _run(["plan", uri, "--json"], tmp_path)
    assert without.returncode != 0 and "Traceback" not in without.stderr
    values = {"DELTAEXTRAS_STORAGE_OPTIONS": json.dumps(azurite.storage_options)}
    (tmp_path / "local.settings.json").write_text(json.dumps({"IsEncrypted": False, "Values": values}))
    done = _run(["plan", uri, "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert sorted(p["partition_value"] for p in plan["partitions"]) == ["0", "1"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "{t}", "--sortby", "k"], "unrecognized argument --sortby; did you mean --sort-by?"),
        (["plan", "{t}", "--uniqueby", "k"], "unrecognized argument --uniqueby; did you mean --unique-by?"),
        (["vacuum", "{t}", "--dryrun"], "did you mean --dry-run?"),
        (["run", "{t}", "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["run", "{t}", "--target-file-size", "10 parsecs"], "argument --target-file-size: expected a size in bytes"),
    ],
)
def test_mistyped_flags_and_bad_numbers_are_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    table = _table(tmp_path / "t")
    before = _commits(table)
    done = _run([a.format(t=table) for a in args], tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"deltaextras {args[0]}: error: ") and says in line, line
    assert _commits(table) == before


def test_sizes_take_units(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    done = _run(["plan", table, "--json", "--target-file-size", "10MB", "--memory-budget", "64MiB"], tmp_path)
    assert done.returncode == 0, done.stderr
    from deltaextras.ops.rorder.options import RorderOptions

    options = RorderOptions.build(target_file_size="1.5GB", memory_budget="128MiB", max_footer_bytes="16KiB")
    assert (options.target_file_size, options.memory_budget, options.max_footer_bytes) == (1_500_000_000, 2**27, 2**14)


# ---------------------------------------------------------------------- vacuum
def _with_removed_files(path: Path) -> str:
    uri = _table(path)
    write_deltalake(uri, pa.table({"k": [5], "b": [9], "k_range": [0]}), partition_by=["k_range"], mode="overwrite")
    return uri


def _live_and_stored(uri: str) -> tuple[int, int]:
    stored = [p for p in Path(uri).rglob("*.parquet")]
    return len(DeltaTable(uri).file_uris()), len(stored)


def test_vacuum_under_the_retention_asks_and_refuses_without_a_terminal(tmp_path: Path) -> None:
    uri = _with_removed_files(tmp_path / "t")
    before = _live_and_stored(uri)
    done = _run(["vacuum", uri, "--retention-hours", "0"], tmp_path, stdin="")
    assert done.returncode == 2
    line = _one_line(done)
    assert "--retention-hours 0 is under the table's retention (168 h)" in line and "pass --yes" in line
    assert "4 file(s)" in line
    assert _live_and_stored(uri) == before  # nothing deleted

    done = _run(["vacuum", uri, "--retention-hours", "0", "--yes"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.search(
        r"deleted 4 data file\(s\) and 0 deletion vector file\(s\) older than 0 h, 0\.\d\d MiB$", lines[0]
    ), lines
    assert lines[1:] == ["  (--verbose lists them)"]
    assert _live_and_stored(uri) == (1, 1)


@pytest.mark.parametrize(("answer", "deleted"), [("n", False), ("y", True)])
def test_vacuum_on_a_terminal_asks_first(tmp_path: Path, answer: str, deleted: bool) -> None:
    import pty

    uri = _with_removed_files(tmp_path / "t")
    before = _live_and_stored(uri)
    primary, terminal = pty.openpty()
    try:
        os.write(primary, f"{answer}\n".encode())
        base = {k: v for k, v in os.environ.items() if not k.startswith("DELTAEXTRAS_")}
        done = subprocess.run(
            [*CLI, "vacuum", uri, "--retention-hours", "0"],
            cwd=tmp_path, stdin=terminal, capture_output=True, text=True, timeout=300, env=base,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(primary)
    assert "Traceback" not in done.stderr
    assert "--retention-hours 0 is under the table's retention (168 h)" in done.stderr
    assert "delete them? [y/N]" in done.stdout
    if deleted:
        assert done.returncode == 0 and "deleted 4 data file(s)" in done.stdout
        assert _live_and_stored(uri) == (1, 1)
    else:
        assert done.returncode == 1 and "nothing deleted" in done.stderr
        assert _live_and_stored(uri) == before


def test_vacuum_verbose_lists_and_the_tables_retention_needs_no_question(tmp_path: Path) -> None:
    uri = _with_removed_files(tmp_path / "t")
    done = _run(["vacuum", uri, "--retention-hours", "0", "--dry-run", "--verbose"], tmp_path)
    assert done.returncode == 0, done.stderr
    listed = [ln.strip() for ln in done.stdout.splitlines()[1:]]
    assert len(listed) == 4 and all(name.endswith(".parquet") for name in listed)
    done = _run(["vacuum", uri, "--retention-hours", "200"], tmp_path, stdin="")  # over the table's 168 h
    assert done.returncode == 0, done.stderr
    assert "deleted 0 data file(s)" in done.stdout


# ---------------------------------------------------------------------- interrupted runs
def test_interrupted_summary_counts_the_skipped_partitions(tmp_path: Path) -> None:
    from deltaextras import rorder
    from deltaextras.ops.rorder.pool import RunInterrupted

    table = str(tmp_path / "t")
    for batch in range(2):
        data = pa.table({"k": [2, 1, 12, 11, 22, 21], "b": [batch] * 6, "k_range": [0, 0, 1, 1, 2, 2]})
        write_deltalake(table, data, partition_by=["k_range"], mode="append")
    rorder(table, partitions=["0"], max_workers=1)  # partition 0 is in layout: skipped next time

    def stop_at_the_first_commit(report: object) -> None:
        if report.status == "committed":  # type: ignore[attr-defined]
            raise KeyboardInterrupt  # as Ctrl-C lands in the calling thread

    with pytest.raises(RunInterrupted) as stopped:
        rorder(table, max_workers=1, progress=stop_at_the_first_commit)
    report = stopped.value.report
    assert sorted(p.status for p in report.partitions) == ["committed", "interrupted", "skipped"]
    assert str(stopped.value) == "interrupted: 3 partition(s): 1 committed, 1 skipped, 0 failed, 1 interrupted"


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path: Path) -> None:
    """A scheduler, a container runtime or the Functions host stops a command with SIGTERM: the run ends
    as on Ctrl-C (commits under way finish, nothing new starts), prints its summary and exits 143; every
    partition is either rewritten or as it was, and the table reads the same."""
    from oracle import checksum

    table = str(tmp_path / "t")
    parts = 200
    for batch in range(2):
        keys = list(range(parts * 3))
        data = pa.table({"k": keys, "b": [batch] * len(keys), "k_range": [k // 3 for k in keys]})
        write_deltalake(table, data, partition_by=["k_range"], mode="append")
    before = checksum(table)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DELTAEXTRAS_")}, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*CLI, "run", table, "--workers", "1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert ": committed v" in first, first
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    # the summary, after the one warning a signal landing during a commit adds (that commit finishes first)
    *warned, summary = [ln for ln in err.splitlines() if ln.strip()]
    assert all("waiting for 1 commit(s) under way" in ln for ln in warned) and len(warned) <= 1, err
    assert summary.startswith(f"deltaextras: interrupted: {parts} partition(s): "), summary
    committed = 1 + out.count(": committed v")
    assert 1 <= committed < parts
    assert f"{committed} committed" in summary and "interrupted" in summary.split(":", 2)[2], summary
    assert checksum(table) == before
    assert _commits(table) == 2 + committed


# ---------------------------------------------------------------------- the worker's dead-letter label
def test_dead_letter_of_a_missing_partition_names_the_message_key(tmp_path: Path) -> None:
    from deltaextras.app import work
    from deltaextras.app.config import AppConfig

    table = _table(tmp_path / "t")
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([table])})
    outcome = work.handle(json.dumps({"path": table, "partition_value": 3}), config)
    assert outcome.status == work.DEAD_LETTER and outcome.error_type == "PartitionNotFoundError"
    assert outcome.partition == "partition_value=3"
    assert "known values: 0, 1" in outcome.reason


# ---------------------------------------------------------------------- the example's packages
BLOCK = """
import runpy, sys
blocked = set(sys.argv[1].split(","))
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize(
    ("blocked", "args", "says"),
    [
        ("pysail", [], 'pysail not installed; pip install "deltaextras[spark]" pysail'),
        ("pandas", ["--delta-jars", "/nowhere"], 'pandas not installed; pip install "pyspark==4.2.0" pandas'),
        ("pyspark", ["--remote", "sc://127.0.0.1:1"], 'pyspark not installed; pip install "deltaextras[spark]"'),
    ],
)
def test_example_names_the_packages_it_lacks(tmp_path: Path, blocked: str, args: list[str], says: str) -> None:
    example = str(REPO / "examples" / "sensor_pipeline.py")
    done = subprocess.run(
        [sys.executable, "-c", BLOCK, blocked, example, "--table", str(tmp_path / "t"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"sensor_pipeline: {says}"]
    assert not (tmp_path / "t").exists()


# ---------------------------------------------------------------------- CI's summary
def test_ci_summary_counts_expected_failures_apart(tmp_path: Path) -> None:
    (tmp_path / "test_kinds.py").write_text(
        "import pytest\n"
        "def test_passes(): pass\n"
        "@pytest.mark.xfail(strict=True)\n"
        "def test_expected_failure(): assert False\n"
        "def test_skipped(): pytest.skip('not here')\n"
    )
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={junit}",
         str(tmp_path / "test_kinds.py")],
        cwd=tmp_path, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    script = (REPO / ".ci" / "run").read_text()
    counter = script.split("<<'PY'\n", 2)[1].split("\nPY\n", 1)[0]
    assert "ET.parse" in counter
    done = subprocess.run([sys.executable, "-", str(junit)], input=counter, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "pytest: 1 passed, 0 failed, 1 skipped, 1 xfailed", done.stderr
