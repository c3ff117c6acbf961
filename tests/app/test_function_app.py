"""The Azure Functions app: its files (host.json, function.json, requirements.txt, settings) and
end-to-end runs on Azurite (blob tables, queues) through the local host, which calls the handlers
with real ``azure.functions`` objects and applies the host's queue semantics."""

from __future__ import annotations

import base64
import doctest
import fnmatch
import importlib
import importlib.metadata
import inspect
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
import typing
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from app_support import (
    REPO_ROOT,
    assert_in_layout,
    commits,
    content_checksum,
    table_version,
    write_many_files_table,
    write_sensor_table,
)
from services import Azurite

from deltaextras.app import settings, work
from deltaextras.app.edges.azure_queue import QueueSender, ensure_queue, queue_client
from deltaextras.app.edges.local_host import LocalHost, QueueOptions
from deltaextras.app.enqueue import enqueue
from deltaextras.errors import StorageError

FUNCTIONS = ("orchestrator", "worker")
CONTAINER = "deltaextras-fnapp"
APP_SETTING_RE = re.compile(r"%([A-Za-z0-9_]+)%")


# ============================================================================ the app's files
def function_json(name: str) -> dict[str, Any]:
    return json.loads((REPO_ROOT / name / "function.json").read_text())


def load_handler(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"fnapp_{name}", REPO_ROOT / name / "__init__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_host_json_states_the_queue_behaviour() -> None:
    host = json.loads((REPO_ROOT / "host.json").read_text())
    assert host["version"] == "2.0" and host["functionTimeout"] == "00:10:00"
    assert host["extensionBundle"] == {"id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"}
    queues = host["extensions"]["queues"]
    assert (queues["batchSize"], queues["maxDequeueCount"], queues["visibilityTimeout"]) == (1, 5, "00:00:30")
    assert queues["messageEncoding"] == "base64"
    parsed = QueueOptions.from_host_json(REPO_ROOT / "host.json")
    assert (parsed.batch_size, parsed.max_dequeue_count, parsed.visibility_timeout, parsed.function_timeout) == (
        1,
        5,
        30.0,
        600.0,
    )


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_json_bindings_match_the_handler_signature(name: str) -> None:
    spec = function_json(name)
    assert spec["scriptFile"] == "__init__.py" and (REPO_ROOT / name / spec["scriptFile"]).is_file()
    main = load_handler(name)
    assert main.__name__ == spec.get("entryPoint", "main")
    params = inspect.signature(main).parameters
    bindings = {b["name"]: b for b in spec["bindings"]}
    assert list(params) == list(bindings), "every binding is a parameter, in order, and nothing else"
    hints = typing.get_type_hints(main)
    expected = {"timerTrigger": func.TimerRequest, "queueTrigger": func.QueueMessage}
    for pname, b in bindings.items():
        if b["direction"] == "in":
            assert hints[pname] is expected[b["type"]], pname
        else:
            assert b["type"] == "queue" and hints[pname] == func.Out[str], pname
    assert hints["return"] is type(None)


def test_bindings_and_code_read_only_registered_app_settings() -> None:
    names = {s.name for s in settings.SETTINGS}
    used: set[str] = set()
    for name in FUNCTIONS:
        for b in function_json(name)["bindings"]:
            for key in ("queueName", "schedule"):
                used.update(APP_SETTING_RE.findall(str(b.get(key, ""))))
            if "connection" in b:
                used.add(b["connection"])
    assert used == {"DELTAEXTRAS_QUEUE", "DELTAEXTRAS_POISON_QUEUE", "DELTAEXTRAS_SCHEDULE", "DELTAEXTRAS_STORAGE"}
    assert used <= names
    # Every DELTAEXTRAS_* name the app's code mentions is a registered setting (or a connection key of one).
    sources = [REPO_ROOT / "shared" / "app" / f for f in ("config.py", "dispatch.py", "work.py", "enqueue.py")]
    sources += [
        *sorted((REPO_ROOT / "shared" / "app" / "edges").glob("*.py")),
        REPO_ROOT / "lambda" / "lambda_handlers.py",
    ]
    for path in sources:
        for found in re.findall(r"DELTAEXTRAS_[A-Z_]*[A-Z]", path.read_text()):
            assert found.split("__")[0] in names, f"{path.name} reads {found}, not in deltaextras.settings"
    # local.settings.json.example carries every setting the Azure app reads.
    example = json.loads((REPO_ROOT / "local.settings.json.example").read_text())["Values"]
    azure = {s.name for s in settings.SETTINGS if "azure" in s.platforms}
    assert azure <= set(example), azure - set(example)
    assert example["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert json.loads(example["DELTAEXTRAS_TABLES"]) and json.loads(example["DELTAEXTRAS_STORAGE_OPTIONS"])


def test_only_deltaextras_is_imported_and_the_core_imports_no_cloud_sdk() -> None:
    for path in [
        *REPO_ROOT.glob("*/__init__.py"),
        *(REPO_ROOT / "lambda").glob("*.py"),
        *(REPO_ROOT / "shared").rglob("*.py"),
    ]:
        text = path.read_text()
        assert not re.search(r"^\s*(import shared|from shared\b)", text, re.M), path
    code = textwrap.dedent(
        """
        import sys
        import deltaextras.app.config, deltaextras.app.dispatch, deltaextras.app.work, deltaextras.app.enqueue
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("azure", "boto3", "botocore"))
        print(",".join(leaked))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


def _top_level_imports(path: Path) -> set[str]:
    """Third-party top-level names a module imports when it is imported (not inside functions)."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("deltaextras", "__future__")}


def test_the_installed_package_declares_what_it_imports() -> None:
    """The function app and the Lambda image install deltaextras from pyproject.toml: a module the
    package imports but does not declare would fail their cold start with ModuleNotFoundError."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]

    def dists(requirements: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}

    core, extras = dists(project["dependencies"]), project["optional-dependencies"]
    module_dists = importlib.metadata.packages_distributions()
    for path in sorted((REPO_ROOT / "shared").glob("*.py")):
        for name in _top_level_imports(path):
            provided = {d.lower().replace("_", "-") for d in module_dists.get(name, [name])}
            assert provided & core, (
                f"shared/{path.name} imports {name} at import time; add it to [project] dependencies"
            )
    edge_deps = core | dists(extras["azure"]) | dists(extras["aws"])
    for path in sorted((REPO_ROOT / "shared" / "app" / "edges").glob("*.py")):
        for name in _top_level_imports(path):
            provided = {d.lower().replace("_", "-") for d in module_dists.get(name, [name])}
            assert provided & edge_deps, f"shared/edges/{path.name} imports {name}, not declared"


def test_requirements_txt_installs_the_app_as_remote_build_does(tmp_path: Path) -> None:
    """Copy what `func azure functionapp publish` would upload (minus .funcignore), run the remote
    build's pip command in it, and import both handlers from the result with nothing else on the path."""
    app = tmp_path / "wwwroot"
    ignore = [
        line.strip().rstrip("/")
        for line in (REPO_ROOT / ".funcignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for entry in REPO_ROOT.iterdir():
        if any(fnmatch.fnmatch(entry.name, pat) for pat in ignore) or entry.name.startswith("."):
            continue
        (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, app / entry.name)
    assert {"host.json", "requirements.txt", "pyproject.toml", "shared", "orchestrator", "worker"} <= {
        p.name for p in app.iterdir()
    }
    assert not {"tests", "infra", "lambda", "bench"} & {p.name for p in app.iterdir()}
    site = app / ".python_packages" / "lib" / "site-packages"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-r", "requirements.txt", f"--target={site}"]
    done = subprocess.run(pip, cwd=app, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (site / "deltaextras" / "app" / "edges" / "functions.py").is_file()
    assert "azure" in (site / "deltaextras-0.1.0.dist-info" / "METADATA").read_text()
    check = textwrap.dedent(
        f"""
        import importlib.util, sys
        sys.path[:0] = [{str(app)!r}, {str(site)!r}]
        for name in ("orchestrator", "worker"):
            spec = importlib.util.spec_from_file_location(name, {str(app)!r} + "/" + name + "/__init__.py")
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        import deltaextras
        assert deltaextras.__file__.startswith({str(site)!r}), deltaextras.__file__
        assert "shared" not in sys.modules
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-I", "-c", check], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_edge_examples_run() -> None:
    for name in ("azure_queue", "functions", "local_host", "sqs"):
        module = importlib.import_module(f"deltaextras.app.edges.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, name


def test_docs_settings_table_and_rerun_recipe_are_current() -> None:
    from deltaextras.app.config import settings_markdown
    from deltaextras.ops.rorder.message import RorderMessage

    for name in ("docs/function-app.md",):  # the README links to it
        doc = (REPO_ROOT / name).read_text()
        block = doc.split("<!-- settings:begin", 1)[1].split("-->", 1)[1].split("<!-- settings:end -->", 1)[0]
        assert block.strip() == settings_markdown(), (
            f"{name}: regenerate with deltaextras.app.config.settings_markdown()"
        )
        ready = re.search(r"--content (eyJ[A-Za-z0-9+/=]+)", doc)
        assert ready is not None, name
        message = json.loads(base64.b64decode(ready.group(1)))
        assert message == {"path": "abfss://lake@mydatalake.dfs.core.windows.net/sensors", "partition_value": "3"}
        RorderMessage.from_dict(message)


# ============================================================================ on Azurite
@dataclass
class App:
    """One isolated app on the shared Azurite: its own table location and queues."""

    azurite: Azurite
    uri: str
    queue: str
    options: dict[str, str]

    @property
    def poison(self) -> str:
        return f"{self.queue}-poison"

    def raw(self, name: str) -> Any:
        client = queue_client(name, raw=True)
        ensure_queue(client)
        return client

    def peek(self, name: str) -> list[str]:
        """The stored bodies (as the service holds them) of every message, without dequeuing."""
        return [m.content for m in self.raw(name).peek_messages(max_messages=32)]

    def host(self, **kwargs: Any) -> LocalHost:
        kwargs.setdefault("visibility_timeout", 0)
        return LocalHost(REPO_ROOT, **kwargs)


def configure(monkeypatch: pytest.MonkeyPatch, azurite: Azurite, tables: list[Any], queue: str) -> None:
    monkeypatch.setenv("DELTAEXTRAS_TABLES", json.dumps(tables))
    monkeypatch.setenv("DELTAEXTRAS_QUEUE", queue)
    monkeypatch.setenv("DELTAEXTRAS_POISON_QUEUE", f"{queue}-poison")
    monkeypatch.setenv("DELTAEXTRAS_SCHEDULE", "0 0 * * * *")
    monkeypatch.setenv("DELTAEXTRAS_STORAGE", azurite.connection_string)
    monkeypatch.setenv("DELTAEXTRAS_STORAGE_OPTIONS", json.dumps(azurite.storage_options))
    for name in ("AZURE_CLIENT_ID", "IDENTITY_ENDPOINT", "DELTAEXTRAS_QUEUE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def app(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> App:
    azurite.create_container(CONTAINER)
    uri = f"az://{CONTAINER}/{uuid.uuid4().hex}"
    queue = f"rorder-{uuid.uuid4().hex[:12]}"
    configure(
        monkeypatch, azurite, [{"uri": uri, "sort_by": ["utc_time"], "unique_by": ["node_id", "utc_time"]}], queue
    )
    return App(azurite, uri, queue, dict(azurite.storage_options))


def decode(stored: str) -> dict[str, Any]:
    return json.loads(base64.b64decode(stored))


def test_end_to_end_orchestrator_then_worker_on_azurite(app: App) -> None:
    write_sensor_table(app.uri, app.options, partitions=5)
    before = content_checksum(app.uri, app.options)
    host = app.host()
    assert host.run_timer().orchestrator == "succeeded"

    bodies = [decode(m) for m in app.peek(app.queue)]
    assert sorted(b["partition_value"] for b in bodies) == ["0", "1", "2", "3", "4"]
    assert {b["path"] for b in bodies} == {app.uri} and {b["version"] for b in bodies} == {2}
    assert all(len(b["files"]) == 3 and b["sort_by"] == [["utc_time", "ascending"]] for b in bodies)

    summary = host.drain(idle_timeout=30)
    assert (summary.succeeded, summary.failed, summary.poisoned, summary.outputs) == (5, 0, 0, {})
    assert app.peek(app.queue) == [] and app.peek(app.poison) == []
    assert content_checksum(app.uri, app.options) == before
    assert_in_layout(app.uri, app.options, range(5))
    assert table_version(app.uri, app.options) == 2 + 5


def test_malformed_messages_land_on_the_poison_queue_with_their_reason(app: App) -> None:
    write_sensor_table(app.uri, app.options, partitions=2, appends=2)
    version, before = table_version(app.uri, app.options), content_checksum(app.uri, app.options)
    sender = QueueSender.from_env(app.queue)
    sender.send_batch(
        [
            "{not json",
            json.dumps({"path": app.uri, "partition_value": 0, "fles": []}),
            json.dumps({"path": f"az://{CONTAINER}/elsewhere", "partition_value": 0}),
        ]
    )
    app.raw(app.queue).send_message("%% not base64 %%")

    summary = app.host().drain(idle_timeout=30)
    assert sorted(d.result for d in summary.deliveries) == ["poisoned", "succeeded", "succeeded", "succeeded"]
    assert summary.outputs == {app.poison: 3}
    stored = app.peek(app.poison)
    assert "%% not base64 %%" in stored  # the host moves undecodable bodies as they are
    envelopes = {e["error_type"]: e for e in (decode(s) for s in stored if s != "%% not base64 %%")}
    assert set(envelopes) == {"MessageError", "AccessDeniedError"} and len(stored) == 4
    reasons = sorted(decode(s)["reason"] for s in stored if s != "%% not base64 %%")
    assert any("not valid JSON" in r for r in reasons) and any("'fles' is not known" in r for r in reasons)
    assert "allow-list" in envelopes["AccessDeniedError"]["reason"]
    assert envelopes["AccessDeniedError"]["message"]["path"].endswith("/elsewhere")
    assert app.peek(app.queue) == []
    assert table_version(app.uri, app.options) == version and content_checksum(app.uri, app.options) == before


KILL_AFTER_COMMIT = textwrap.dedent(
    """
    import os, sys
    from deltaextras.app import work
    from deltaextras.app.edges.local_host import LocalHost

    original = work.rorder_single

    def rorder_then_die(*args, **kwargs):
        kwargs["hooks"] = {"after_commit": lambda version: os._exit(137)}
        return original(*args, **kwargs)

    work.rorder_single = rorder_then_die
    LocalHost(sys.argv[1], lease_seconds=float(sys.argv[2])).drain(max_deliveries=1)
    """
)


def test_a_worker_killed_after_its_commit_leaves_a_redelivery_that_is_a_no_op(
    app: App, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_sensor_table(app.uri, app.options, partitions=1)
    enqueue(app.uri, all_partitions=True)  # a planned message: version 2, its three files
    script = tmp_path / "kill.py"
    script.write_text(KILL_AFTER_COMMIT)
    died = subprocess.run([sys.executable, str(script), str(REPO_ROOT), "3"], capture_output=True, text=True)
    assert died.returncode == 137, died.stderr[-2000:]
    assert table_version(app.uri, app.options) == 3  # the commit landed; the message was not deleted

    caplog.set_level(logging.INFO, "deltaextras.app.work")
    summary = app.host(lease_seconds=60).drain(idle_timeout=30)
    assert [(d.dequeue_count, d.result) for d in summary.deliveries] == [(2, "succeeded")]
    line = json.loads(next(r.getMessage() for r in caplog.records if '"rorder_work"' in r.getMessage()))
    assert line["status"] == "skipped" and "already committed by an earlier delivery" in line["reason"]
    assert table_version(app.uri, app.options) == 3
    assert [c["operation"] for c in commits(app.uri, app.options)].count("OPTIMIZE") == 1
    assert app.peek(app.queue) == [] and app.peek(app.poison) == []


def test_transient_failure_is_retried_by_the_host(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    write_sensor_table(app.uri, app.options, partitions=1, appends=2)
    original, calls = work.rorder_single, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("storage failed to read part-0: connection reset by peer")
        return original(*args, **kwargs)

    monkeypatch.setattr(work, "rorder_single", flaky)
    enqueue(app.uri, partitions=["0"])
    summary = app.host().drain(idle_timeout=30)
    assert [(d.dequeue_count, d.result) for d in summary.deliveries] == [(1, "failed"), (2, "succeeded")]
    assert "StorageError" in (summary.deliveries[0].error or "")
    assert table_version(app.uri, app.options) == 2 and app.peek(app.poison) == []


def test_hand_written_table_and_partition_message(app: App) -> None:
    write_sensor_table(app.uri, app.options, partitions=3, appends=2)
    before = content_checksum(app.uri, app.options)
    # What an operator puts on the queue by hand: table + partition, base64 JSON.
    body = base64.b64encode(json.dumps({"path": app.uri, "partition_value": "2"}).encode()).decode()
    app.raw(app.queue).send_message(body)
    summary = app.host().drain(idle_timeout=30)
    assert [d.result for d in summary.deliveries] == ["succeeded"] and summary.outputs == {}
    last = commits(app.uri, app.options)[-1]
    assert json.loads(last["operationParameters"]["predicate"]) == ["node_id_range = 2"]
    assert json.loads(last["operationParameters"]["sortBy"]) == [["utc_time", "ascending"]]
    assert_in_layout(app.uri, app.options, range(2, 3))
    assert content_checksum(app.uri, app.options) == before


def test_a_5000_file_partition_goes_through_a_64k_queue_message(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "wide"
    write_many_files_table(root, 5000)
    queue = f"rorder-{uuid.uuid4().hex[:12]}"
    configure(monkeypatch, azurite, [str(root)], queue)
    before = content_checksum(str(root))
    host = LocalHost(REPO_ROOT, visibility_timeout=0)
    assert host.run_timer().orchestrator == "succeeded"
    (stored,) = [m.content for m in queue_client(queue, raw=True).peek_messages(max_messages=32)]
    assert len(stored) < 64 * 1024
    message = decode(stored)
    assert "files" not in message and message["version"] == 1 and message["partition_value"] == "0"
    summary = host.drain(idle_timeout=30)
    assert [d.result for d in summary.deliveries] == ["succeeded"], summary.deliveries
    metrics = commits(str(root))[-1]["operationMetrics"]
    assert (int(metrics["numRemovedFiles"]), int(metrics["numAddedFiles"])) == (5000, 1)
    assert content_checksum(str(root)) == before


def test_command_line_enqueue_and_local_run(app: App, capsys: pytest.CaptureFixture[str]) -> None:
    from deltaextras.app.cli import main

    write_sensor_table(app.uri, app.options, partitions=2, appends=2)
    assert main(["enqueue", app.uri, "--partition", "1", "--print"]) == 0
    printed = capsys.readouterr().out.split()
    assert [decode(p) for p in printed] == [{"path": app.uri, "partition_value": "1"}]
    assert main(["enqueue", app.uri, "--all"]) == 0
    assert len(app.peek(app.queue)) == 2
    code = main(["local-run", "--app-root", str(REPO_ROOT), "--no-orchestrator", "--visibility-timeout", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (out["succeeded"], out["poisoned"]) == (2, 0)
    assert_in_layout(app.uri, app.options, range(2))
