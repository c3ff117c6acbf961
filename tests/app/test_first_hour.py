"""What a new user meets in the first hour, each as one clear line: a missing extra, an Azurite started
without the right flags, a missing container or table, a read-only table, a cloud path for the local
demo, a partition that is not there, an enqueue the worker would refuse, and logs that stay readable."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from services import Azurite, find_azurite, free_port

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "deltaextras"]


def _run(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, prefix: list[str] = ()):
    base = {k: v for k, v in os.environ.items() if not k.startswith("DELTAEXTRAS_")}
    return subprocess.run(
        [*prefix, *CLI, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True, timeout=180
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _table(path: Path) -> str:
    for batch in range(2):
        write_deltalake(
            str(path), pa.table({"k": [2, 1, 12, 11], "b": [batch] * 4, "k_range": [0, 0, 1, 1]}),
            partition_by=["k_range"], mode="append",
        )  # fmt: skip
    return str(path)


# ---------------------------------------------------------------------- the Azure extra
BLOCK_AZURE = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "azure":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
from deltaextras.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", [["local-run", "--app-root", str(REPO)], ["enqueue", "t", "--partition", "1"]])
def test_missing_azure_extra_is_one_line(tmp_path: Path, command: list[str]) -> None:
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps({"Values": {"DELTAEXTRAS_TABLES": json.dumps([str(tmp_path / "t")])}}))
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_AZURE, *command], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "install deltaextras[azure]" in _one_line_error(done)


# ---------------------------------------------------------------------- Azurite, containers, tables
def _azurite_env(az: Azurite, tables: list[str]) -> dict[str, str]:
    return {
        "DELTAEXTRAS_STORAGE": az.connection_string,
        "DELTAEXTRAS_TABLES": json.dumps(tables),
        "DELTAEXTRAS_STORAGE_OPTIONS": json.dumps(az.storage_options),
        "DELTAEXTRAS_QUEUE": "first-hour",
        "DELTAEXTRAS_POISON_QUEUE": "first-hour-poison",
        "DELTAEXTRAS_SCHEDULE": "0 0 * * * *",
    }


def test_local_run_names_a_missing_container_then_a_missing_table(azurite: Azurite, tmp_path: Path) -> None:
    env = _azurite_env(azurite, ["az://nosuchcontainer/sensors"])
    done = _run(["local-run", "--app-root", str(REPO)], cwd=tmp_path, env=env)
    assert done.returncode == 1
    line = _one_line_error(done)
    assert "TableNotFoundError" in line and "container 'nosuchcontainer'" in line and "<?xml" not in line

    azurite.create_container("firsthour")
    env = _azurite_env(azurite, ["az://firsthour/nothing-here"])
    done = _run(["local-run", "--app-root", str(REPO)], cwd=tmp_path, env=env)
    assert done.returncode == 1
    line = _one_line_error(done)
    assert "no Delta table at az://firsthour/nothing-here" in line


def test_azurite_without_skip_api_version_check_is_named(tmp_path: Path) -> None:
    blob, queue, table = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [find_azurite(), "--silent", "--disableTelemetry", "--location", str(tmp_path / "az"),
         "--blobHost", "127.0.0.1", "--blobPort", str(blob), "--queueHost", "127.0.0.1", "--queuePort", str(queue),
         "--tableHost", "127.0.0.1", "--tablePort", str(table)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        seen = ""
        while seen.count("successfully listening") < 3 and time.monotonic() < deadline:
            seen += proc.stdout.readline()
        conn = (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
            f"BlobEndpoint=http://127.0.0.1:{blob}/devstoreaccount1;"
            f"QueueEndpoint=http://127.0.0.1:{queue}/devstoreaccount1;"
        )
        env = {"DELTAEXTRAS_STORAGE": conn, "DELTAEXTRAS_TABLES": json.dumps(["az://lake/sensors"])}
        done = _run(["local-run", "--app-root", str(REPO)], cwd=tmp_path, env=env)
        assert done.returncode == 2
        assert "--skipApiVersionCheck" in _one_line_error(done)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ---------------------------------------------------------------------- enqueue
def test_enqueue_reads_local_settings_and_refuses_unconfigured_tables(azurite: Azurite, tmp_path: Path) -> None:
    table = _table(tmp_path / "sensors")
    done = _run(["enqueue", table, "--partition", "1"], cwd=tmp_path)  # no settings at all
    assert done.returncode == 2
    assert "DELTAEXTRAS_TABLES is not set" in _one_line_error(done)

    values = _azurite_env(azurite, [table])
    values["DELTAEXTRAS_QUEUE"] = "enqueue-settings"
    (tmp_path / "local.settings.json").write_text(json.dumps({"Values": values}))
    done = _run(["enqueue", str(tmp_path / "other"), "--partition", "1"], cwd=tmp_path)
    assert done.returncode == 2
    assert "not in DELTAEXTRAS_TABLES" in _one_line_error(done)

    done = _run(["enqueue", "sensors", "--partition", "1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 message(s) sent" in done.stderr
    queue = azurite.queue_service_client().get_queue_client("enqueue-settings")
    assert queue.get_queue_properties().approximate_message_count == 1


def test_enqueue_fails_in_one_line_when_the_queue_cannot_be_reached(azurite: Azurite, tmp_path: Path) -> None:
    """Azurite stopped (a closed port): one line naming the queue, at once rather than after the SDK's
    minute and a half of retries (the subprocess timeout bounds it), exit 1, nothing sent."""
    table = _table(tmp_path / "sensors")
    values = _azurite_env(azurite, [table])
    port = free_port()
    values["DELTAEXTRAS_STORAGE"] = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", azurite.connection_string)
    done = subprocess.run(
        [*CLI, "enqueue", table, "--partition", "1"],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("DELTAEXTRAS_")}, **values},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    line = _one_line_error(done)
    assert "cannot reach queue 'first-hour'" in line and "nothing was sent" in line, line


def test_enqueue_refuses_a_partition_without_live_files(azurite: Azurite, tmp_path: Path) -> None:
    table = _table(tmp_path / "sensors")
    values = _azurite_env(azurite, [table])
    values["DELTAEXTRAS_QUEUE"] = "enqueue-missing-partition"
    done = _run(["enqueue", table, "--partition", "99"], cwd=tmp_path, env=values)
    assert done.returncode == 2
    line = _one_line_error(done)
    assert "k_range=99 has no live files" in line and "known values: 0, 1" in line, line
    queue = azurite.queue_service_client().get_queue_client("enqueue-missing-partition")
    assert not _exists(queue) or not queue.peek_messages()  # nothing sent


def _exists(queue: Any) -> bool:
    from azure.core.exceptions import ResourceNotFoundError

    try:
        queue.get_queue_properties()
    except ResourceNotFoundError:
        return False
    return True


# ---------------------------------------------------------------------- read-only tables
@pytest.fixture
def open_dir(tmp_path: Path):
    """A directory every user may enter (pytest's own tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="deltaextras-ro-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)


def test_read_only_table_is_access_denied_once(open_dir: Path) -> None:
    table = _table(open_dir / "t")
    for root, dirs, files in os.walk(table):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o555 if name in dirs else 0o444)
    os.chmod(table, 0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anywhere: run it without its capabilities (CAP_DAC_OVERRIDE above all)
        if shutil.which("setpriv") is None:
            pytest.fail("running as root: this test needs setpriv (util-linux) to drop root's capabilities")
        # Still uid 0, so the checkout and its venv stay readable whoever may read them (a checkout only its
        # owner can read is fine); the table's modes (0555/0444) now bind it as they bind any user.
        prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]
    done = _run(["run", table, "--workers", "1"], cwd=open_dir, env={"HOME": str(open_dir)}, prefix=prefix)
    assert done.returncode == 1, done.stdout + done.stderr
    text = done.stdout + done.stderr
    assert "Traceback" not in text and "OSError" not in text
    assert text.count("AccessDeniedError") == 2, text  # one line per partition, nothing repeated
    assert "2 partition(s): 0 committed, 0 skipped, 2 failed" in done.stdout


def test_read_only_storage_is_not_retried_by_the_worker(tmp_path: Path) -> None:
    from deltaextras.app import work
    from deltaextras.app.config import AppConfig

    table = _table(tmp_path / "t")
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([table])})

    def read_only(_output: object) -> None:
        raise OSError(30, "Read-only file system")

    outcome = work.handle(json.dumps({"path": table, "partition_value": 0}), config, hooks={"after_output": read_only})
    assert outcome.status == work.DEAD_LETTER and outcome.error_type == "AccessDeniedError", outcome


# ---------------------------------------------------------------------- demo, partitions
def test_demo_refuses_a_cloud_path(tmp_path: Path) -> None:
    done = _run(["demo", "--path", "az://lake/sensors"], cwd=tmp_path)
    assert done.returncode == 2
    assert "local-run --demo" in _one_line_error(done)
    assert not (tmp_path / "az:").exists()


def test_missing_partition_is_worded_alike_everywhere(tmp_path: Path) -> None:
    from deltaextras import PartitionNotFoundError, rorder, rorder_single

    table = _table(tmp_path / "t")
    with pytest.raises(PartitionNotFoundError) as by_run:
        rorder(table, partitions=["9"])
    with pytest.raises(PartitionNotFoundError) as by_message:
        rorder_single({"path": table, "partition_value": 9})
    assert str(by_message.value) == str(by_run.value)
    assert "known values: 0, 1" in str(by_run.value)
    done = _run(["inspect", table, "--partition", "9"], cwd=tmp_path)
    assert done.returncode == 2
    assert _one_line_error(done).endswith(str(by_run.value))


# ---------------------------------------------------------------------- logs
LOGS = """
import logging, sys
from deltaextras.app.cli import main
main(sys.argv[1:])
logging.getLogger("azure.core.pipeline.policies.http_logging_policy").info("Request headers: x-ms-version")
logging.getLogger("deltaextras.app.work").info("our progress")
"""


@pytest.mark.parametrize(("flag", "headers"), [("-v", False), ("-vv", True)])
def test_verbose_keeps_sdk_http_logs_out_unless_asked(tmp_path: Path, flag: str, headers: bool) -> None:
    table = _table(tmp_path / "t")
    done = subprocess.run(
        [sys.executable, "-c", LOGS, flag, "plan", table], capture_output=True, text=True, timeout=120
    )
    assert "our progress" in done.stderr
    assert ("Request headers" in done.stderr) is headers


def test_readme_says_storage_goes_through_obstore() -> None:
    readme = (REPO / "docs" / "storage.md").read_text()  # the README's storage page
    assert "obstore" in (REPO / "README.md").read_text()
    assert "obstore" in readme
    for fsspec_key in ("account_name", "account_key", "anon=True", "endpoint_url"):
        assert f"`{fsspec_key}`" in readme, fsspec_key
