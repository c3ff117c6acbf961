"""Run the function app without the Functions host: the orchestrator once, then the worker until the
queue is empty, against real Azure Storage queues (Azurite locally).

It reads the app as the host does: ``host.json`` (``extensions.queues``) and each function's
``function.json``; binding expressions such as ``%DELTAEXTRAS_QUEUE%`` are resolved from the app
settings (the environment, plus ``local.settings.json`` ``Values`` when given). Handlers are called
with real ``azure.functions`` objects (``TimerRequest``, ``QueueMessage``, ``Out``), and the queue
semantics follow the host's queue trigger:

* messages are received ``batchSize`` at a time and kept invisible (leased) while the function runs;
  a worker process that dies leaves its message to reappear when the lease ends, with its
  ``dequeue_count`` one higher;
* the body is base64-decoded (``messageEncoding: base64``); a body that is not base64 goes to the
  poison queue at once;
* success deletes the message and writes the function's queue output bindings (base64-encoded);
* failure makes the message visible again after ``visibilityTimeout``; a message that failed its
  ``maxDequeueCount``-th delivery (or arrives with a higher count) is copied to ``<queue>-poison``
  and deleted.

``deltaextras local-run`` is the command line; ``func start`` runs the same app with the real host.

Example:
    >>> parse_timespan("00:00:30"), parse_timespan("00:10:00"), parse_timespan("1.00:00:00")
    (30.0, 600.0, 86400.0)
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidArgumentError

log = logging.getLogger(__name__)

_SETTING_REF = re.compile(r"%([^%]+)%")


def parse_timespan(text: str | float | int) -> float:
    """Seconds in a host.json timespan (``[d.]hh:mm:ss[.fff]``) or a plain number of seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    days = 0.0
    rest = text.strip()
    if "." in rest.split(":", 1)[0]:
        d, rest = rest.split(".", 1)
        days = float(d)
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts[-3:]
    return days * 86400 + h * 3600 + m * 60 + s


@dataclass(frozen=True)
class QueueOptions:
    """``extensions.queues`` of host.json, with the host's defaults."""

    batch_size: int = 16
    max_dequeue_count: int = 5
    visibility_timeout: float = 0.0
    message_encoding: str = "base64"
    function_timeout: float = 300.0

    @classmethod
    def from_host_json(cls, path: str | os.PathLike[str]) -> QueueOptions:
        """Read host.json."""
        host = json.loads(Path(path).read_text())
        queues = host.get("extensions", {}).get("queues", {})
        return cls(
            batch_size=int(queues.get("batchSize", 16)),
            max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
            visibility_timeout=parse_timespan(queues.get("visibilityTimeout", 0)),
            message_encoding=str(queues.get("messageEncoding", "base64")).lower(),
            function_timeout=parse_timespan(host.get("functionTimeout", "00:05:00")),
        )


@dataclass
class Function:
    """One function folder: its bindings and its entry point."""

    name: str
    folder: Path
    spec: dict[str, Any]

    @classmethod
    def load(cls, app_root: Path, name: str) -> Function:
        folder = app_root / name
        spec = json.loads((folder / "function.json").read_text())
        return cls(name, folder, spec)

    @property
    def bindings(self) -> list[dict[str, Any]]:
        return list(self.spec.get("bindings", []))

    @property
    def trigger(self) -> dict[str, Any]:
        for b in self.bindings:
            if str(b.get("type", "")).endswith("Trigger"):
                return b
        raise InvalidArgumentError(f"function {self.name} has no trigger binding")

    def entry_point(self) -> Callable[..., Any]:
        """Import the function's script under a private module name and return its entry point."""
        script = self.folder / self.spec.get("scriptFile", "__init__.py")
        module_name = f"deltaextras_local_app.{self.name}"
        spec = importlib.util.spec_from_file_location(module_name, script)
        if spec is None or spec.loader is None:
            raise InvalidArgumentError(f"cannot load {script}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return getattr(module, self.spec.get("entryPoint", "main"))


class OutValue:
    """An ``azure.functions.Out`` that keeps what the function set (registered as a virtual subclass)."""

    def __init__(self) -> None:
        self.value: Any = None

    def set(self, val: Any) -> None:
        self.value = val

    def get(self) -> Any:
        return self.value


def _register_out() -> None:
    import azure.functions as func

    func.Out.register(OutValue)  # type: ignore[attr-defined]


@dataclass
class Delivery:
    """One delivery of one message to the worker, and what the worker made of it."""

    message_id: str
    dequeue_count: int
    result: str  # "succeeded" | "failed" | "poisoned"
    error: str | None = None
    seconds: float = 0.0
    outcome: str | None = None  # the worker's: committed | skipped | retry | dead-letter
    table: str | None = None
    partition: str | None = None
    reason: str | None = None

    def line(self) -> str:
        """One human line: which partition, and what became of it.

        Example:
            >>> Delivery("m1", 1, "succeeded", outcome="skipped", table="az://lake/t", partition="k_range=0",
            ...          reason="already in layout").line()
            'az://lake/t k_range=0: skipped (already in layout)'
        """
        where = " ".join(x for x in (self.table, self.partition) if x) or f"message {self.message_id}"
        what = self.outcome or self.result
        why = self.reason or self.error
        return f"{where}: {what}" + (f" ({why})" if why else "")


class OutcomeTap(logging.Handler):
    """Collects the worker's ``rorder_work`` record of each delivery (the handlers return nothing)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = json.loads(record.getMessage())
        except (TypeError, ValueError):
            return
        if isinstance(data, dict) and data.get("event") == "rorder_work":
            self.records.append(data)


@contextlib.contextmanager
def tap_outcomes() -> Iterator[OutcomeTap]:
    work_log = logging.getLogger("deltaextras.app.work")
    tap, level, propagate = OutcomeTap(), work_log.level, work_log.propagate
    work_log.addHandler(tap)
    if not work_log.isEnabledFor(logging.INFO):
        work_log.setLevel(logging.INFO)
        work_log.propagate = False  # records below the caller's level stay here
    try:
        yield tap
    finally:
        work_log.removeHandler(tap)
        work_log.setLevel(level)
        work_log.propagate = propagate


@dataclass
class RunSummary:
    """What a local run did."""

    orchestrator: str | None = None  # "succeeded" | "failed: ..." | None (not run)
    deliveries: list[Delivery] = field(default_factory=list)
    outputs: dict[str, int] = field(default_factory=dict)  # queue name -> messages written by bindings
    seconds: float = 0.0

    @property
    def succeeded(self) -> int:
        return sum(1 for d in self.deliveries if d.result == "succeeded")

    @property
    def failed(self) -> int:
        return sum(1 for d in self.deliveries if d.result == "failed")

    @property
    def poisoned(self) -> int:
        return sum(1 for d in self.deliveries if d.result == "poisoned")

    def outcomes(self, status: str) -> int:
        """Deliveries whose worker outcome was ``status`` (committed, skipped, retry, dead-letter)."""
        return sum(1 for d in self.deliveries if d.outcome == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "orchestrator": self.orchestrator,
            "invocations": len([d for d in self.deliveries if d.result != "poisoned"]),
            "succeeded": self.succeeded,
            "failed": self.failed,
            "poisoned": self.poisoned,
            "committed": self.outcomes("committed"),
            "skipped": self.outcomes("skipped"),
            "dead_lettered": self.outcomes("dead-letter"),
            "outputs": dict(self.outputs),
            "seconds": round(self.seconds, 3),
            "deliveries": [asdict(d) for d in self.deliveries],
        }


@contextlib.contextmanager
def app_settings(values: Mapping[str, str] | None) -> Iterator[None]:
    """Apply app settings to ``os.environ`` for the duration (variables already set win, as with func)."""
    added = {k: str(v) for k, v in (values or {}).items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def read_local_settings(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``Values`` of a ``local.settings.json``."""
    data = json.loads(Path(path).read_text())
    return {str(k): str(v) for k, v in (data.get("Values") or {}).items()}


class LocalHost:
    """The host's timer and queue-trigger behaviour for one app folder.

    ``lease_seconds`` (default: ``functionTimeout``) is how long a received message stays invisible
    while its function runs; ``visibility_timeout`` overrides host.json's retry delay (tests use 0).
    """

    def __init__(
        self,
        app_root: str | os.PathLike[str] = ".",
        *,
        settings: Mapping[str, str] | None = None,
        lease_seconds: float | None = None,
        visibility_timeout: float | None = None,
        poll_interval: float = 0.5,
    ) -> None:
        self.app_root = Path(app_root).resolve()
        self.options = QueueOptions.from_host_json(self.app_root / "host.json")
        self.settings = dict(settings or {})
        self.lease_seconds = self.options.function_timeout if lease_seconds is None else lease_seconds
        self.visibility_timeout = self.options.visibility_timeout if visibility_timeout is None else visibility_timeout
        self.poll_interval = poll_interval
        self.summary = RunSummary()
        _register_out()

    # ------------------------------------------------------------------ settings
    def resolve(self, text: str) -> str:
        """Replace ``%SETTING%`` by its value; a missing setting fails as it does in the host."""

        def one(m: re.Match[str]) -> str:
            value = os.environ.get(m.group(1))
            if not value:
                raise InvalidArgumentError(f"app setting {m.group(1)} (used in a binding) is not set")
            return value

        return _SETTING_REF.sub(one, text)

    def _queue(self, binding: dict[str, Any], name: str | None = None) -> Any:
        from .azure_queue import ensure_queue, queue_client

        queue = name or self.resolve(str(binding["queueName"]))
        client = queue_client(queue, prefix=str(binding.get("connection") or "AzureWebJobsStorage"), raw=True)
        ensure_queue(client)
        return client

    def _encode(self, text: str) -> str:
        if self.options.message_encoding == "base64":
            return base64.b64encode(text.encode("utf-8")).decode("ascii")
        return text

    def _decode(self, content: str) -> bytes:
        if self.options.message_encoding == "base64":
            return base64.b64decode(content, validate=True)
        return content.encode("utf-8")

    # ------------------------------------------------------------------ functions
    def run_timer(self, name: str = "orchestrator") -> RunSummary:
        """Invoke a timer-triggered function once (not past due)."""
        import azure.functions as func
        from azure.functions.timer import TimerRequest

        with app_settings(self.settings):
            fn = Function.load(self.app_root, name)
            trigger = fn.trigger
            if trigger.get("type") != "timerTrigger":
                raise InvalidArgumentError(f"function {name} is not timer-triggered")
            self.resolve(str(trigger.get("schedule", "")))
            main = fn.entry_point()
            timer: func.TimerRequest = TimerRequest(past_due=False, schedule_status={}, schedule={"AdjustForDST": True})
            kwargs, outs = self._outputs(fn)
            kwargs[trigger["name"]] = timer
            try:
                main(**kwargs)
            except Exception as exc:
                self.summary.orchestrator = f"failed: {type(exc).__name__}: {exc}"
                log.error("%s failed: %s", name, exc)
                return self.summary
            self._write_outputs(fn, outs)
            self.summary.orchestrator = "succeeded"
        return self.summary

    def _outputs(self, fn: Function) -> tuple[dict[str, Any], dict[str, OutValue]]:
        outs = {b["name"]: OutValue() for b in fn.bindings if b.get("direction") == "out" and b.get("type") == "queue"}
        return dict(outs), outs

    def _write_outputs(self, fn: Function, outs: dict[str, OutValue]) -> None:
        for b in fn.bindings:
            out = outs.get(b.get("name", ""))
            if out is None or out.value is None:
                continue
            values = out.value if isinstance(out.value, (list, tuple)) else [out.value]
            client = self._queue(b)
            for v in values:
                text = v.decode("utf-8") if isinstance(v, bytes) else str(v)
                client.send_message(self._encode(text))
            self.summary.outputs[client.queue_name] = self.summary.outputs.get(client.queue_name, 0) + len(values)

    def drain(
        self, name: str = "worker", *, idle_timeout: float = 120.0, max_deliveries: int | None = None
    ) -> RunSummary:
        """Feed the queue trigger's messages to the function until the queue is empty.

        Stops when the queue holds no message (visible or not), after ``idle_timeout`` seconds without
        a visible message, or after ``max_deliveries``.
        """
        started = time.monotonic()
        with app_settings(self.settings):
            fn = Function.load(self.app_root, name)
            trigger = fn.trigger
            if trigger.get("type") != "queueTrigger":
                raise InvalidArgumentError(f"function {name} is not queue-triggered")
            main = fn.entry_point()
            queue = self._queue(trigger)
            poison = self._queue(trigger, name=f"{queue.queue_name}-poison")
            idle_since = time.monotonic()
            deliveries = 0
            while max_deliveries is None or deliveries < max_deliveries:
                page = list(
                    queue.receive_messages(
                        messages_per_page=self.options.batch_size,
                        max_messages=self.options.batch_size,
                        visibility_timeout=max(1, round(self.lease_seconds)),
                    )
                )
                if not page:
                    if queue.get_queue_properties().approximate_message_count == 0:
                        break
                    if time.monotonic() - idle_since > idle_timeout:
                        log.warning("no visible message for %.0fs; stopping with messages still queued", idle_timeout)
                        break
                    time.sleep(self.poll_interval)
                    continue
                idle_since = time.monotonic()
                for m in page:
                    deliveries += 1
                    self.summary.deliveries.append(self._deliver(fn, main, trigger, queue, poison, m))
        self.summary.seconds += time.monotonic() - started
        return self.summary

    def _deliver(
        self, fn: Function, main: Callable[..., Any], trigger: dict[str, Any], queue: Any, poison: Any, m: Any
    ) -> Delivery:
        from azure.functions.queue import QueueMessage

        started = time.monotonic()
        count = int(m.dequeue_count or 1)
        if count > self.options.max_dequeue_count:
            self._poison(queue, poison, m)
            return Delivery(m.id, count, "poisoned", "dequeue count above maxDequeueCount")
        try:
            body = self._decode(m.content)
        except (binascii.Error, ValueError):
            self._poison(queue, poison, m)
            return Delivery(m.id, count, "poisoned", f"body is not {self.options.message_encoding}")
        msg = QueueMessage(
            id=m.id,
            body=body,
            dequeue_count=count,
            expiration_time=m.expires_on,
            insertion_time=m.inserted_on,
            time_next_visible=m.next_visible_on,
            pop_receipt=m.pop_receipt,
        )
        kwargs, outs = self._outputs(fn)
        kwargs[trigger["name"]] = msg
        with tap_outcomes() as tap:
            try:
                main(**kwargs)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if count >= self.options.max_dequeue_count:
                    self._poison(queue, poison, m)
                    return _with_outcome(Delivery(m.id, count, "poisoned", error, time.monotonic() - started), tap)
                queue.update_message(m.id, m.pop_receipt, visibility_timeout=max(0, round(self.visibility_timeout)))
                return _with_outcome(Delivery(m.id, count, "failed", error, time.monotonic() - started), tap)
        self._write_outputs(fn, outs)
        queue.delete_message(m.id, m.pop_receipt)
        return _with_outcome(Delivery(m.id, count, "succeeded", None, time.monotonic() - started), tap)

    def _poison(self, queue: Any, poison: Any, m: Any) -> None:
        log.warning("moving message %s (dequeue count %s) to %s", m.id, m.dequeue_count, poison.queue_name)
        poison.send_message(m.content)
        queue.delete_message(m.id, m.pop_receipt)

    def run(self, *, orchestrate: bool = True, idle_timeout: float = 120.0) -> RunSummary:
        """The orchestrator once (unless ``orchestrate=False``), then the worker until the queue is empty."""
        if orchestrate:
            self.run_timer("orchestrator")
        return self.drain("worker", idle_timeout=idle_timeout)


def _with_outcome(delivery: Delivery, tap: OutcomeTap) -> Delivery:
    if tap.records:
        last = tap.records[-1]
        delivery.outcome, delivery.table = last.get("status"), last.get("table")
        delivery.partition, delivery.reason = last.get("partition"), last.get("reason")
    return delivery


# ----------------------------------------------------------------------------- command line
def run_local(
    app_root: str | os.PathLike[str] = ".",
    *,
    settings_file: str | os.PathLike[str] | None = None,
    orchestrate: bool = True,
    idle_timeout: float = 120.0,
    lease_seconds: float | None = None,
    visibility_timeout: float | None = None,
) -> RunSummary:
    """Run the app once against the queues its settings name (``deltaextras local-run``).

    ``settings_file`` defaults to ``<app_root>/local.settings.json`` when it exists.
    """
    from ..preflight import function_app_root

    root = function_app_root(app_root)
    settings = app_settings_for(root, settings_file)
    host = LocalHost(root, settings=settings, lease_seconds=lease_seconds, visibility_timeout=visibility_timeout)
    with app_settings(settings):
        _check_local_tables()
    return host.run(orchestrate=orchestrate, idle_timeout=idle_timeout)


def app_settings_for(
    app_root: str | os.PathLike[str], settings_file: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The ``Values`` of ``settings_file``, else of ``<app_root>/local.settings.json`` when it exists."""
    root = Path(app_root)
    if settings_file is None and (root / "local.settings.json").exists():
        settings_file = root / "local.settings.json"
    if settings_file is None:
        return {}
    try:
        return read_local_settings(settings_file)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {settings_file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InvalidArgumentError(f"{settings_file} is not valid JSON: {exc}") from None


def _emulator_endpoints() -> Any:
    """The Azurite endpoints of the queue connection, or None when it is not a local emulator."""
    from .local_azurite import AzuriteEndpoints

    conn = os.environ.get("DELTAEXTRAS_STORAGE", "")
    text = conn.strip().lower()
    if not (text.startswith("usedevelopmentstorage") or "127.0.0.1" in text or "localhost" in text):
        return None
    return AzuriteEndpoints.from_connection_string(conn)


def _check_local_tables() -> None:
    """Before a local run against Azurite: is it there, and are the tables' containers and logs?"""
    from ..config import AppConfig, is_azure_uri
    from .local_azurite import check_api_version, check_tables, is_emulated

    endpoints = _emulator_endpoints()
    if endpoints is None:
        return
    if not endpoints.listening():
        raise InvalidArgumentError(
            f"no Azurite listening on 127.0.0.1:{endpoints.blob_port}/{endpoints.queue_port}; start it (docs/"
            "function-app.md), or run `deltaextras local-run --demo`, which starts one"
        )
    check_api_version(endpoints)
    config = AppConfig.from_env()
    check_tables(endpoints, [t.uri for t in config.tables if is_azure_uri(t.uri) and is_emulated(t.storage_options)])


def run_demo(
    app_root: str | os.PathLike[str] = ".",
    *,
    settings_file: str | os.PathLike[str] | None = None,
    idle_timeout: float = 120.0,
    lease_seconds: float | None = None,
    visibility_timeout: float | None = None,
) -> RunSummary:
    """``deltaextras local-run --demo``: find or start Azurite, create the configured tables' containers
    and a demo sensor table where none exists, then run the orchestrator once and the worker until the
    queue is empty. Settings: ``local.settings.json``, else ``local.settings.json.example``."""
    from ..config import AppConfig, is_azure_uri
    from ..preflight import function_app_root
    from .local_azurite import azurite_running, create_demo_table, is_emulated

    root = function_app_root(app_root)
    if settings_file is None and not (root / "local.settings.json").exists():
        settings_file = root / "local.settings.json.example"
    settings = app_settings_for(root, settings_file)
    with app_settings(settings):
        endpoints = _emulator_endpoints()
        if endpoints is None:
            raise InvalidArgumentError(
                "--demo runs against a local Azurite: set DELTAEXTRAS_STORAGE to UseDevelopmentStorage=true "
                "(as local.settings.json.example does)"
            )
        config = AppConfig.from_env()
        with azurite_running(endpoints, root):
            for t in config.tables:
                if not (is_azure_uri(t.uri) and is_emulated(t.storage_options)):
                    continue
                created = create_demo_table(endpoints, t.uri, t.storage_options)
                print(f"{t.uri}: {'created the demo sensor table' if created else 'table exists; using it'}")
            host = LocalHost(
                root, settings=settings, lease_seconds=lease_seconds, visibility_timeout=visibility_timeout
            )
            return host.run(orchestrate=True, idle_timeout=idle_timeout)


def add_parser(subparsers: Any) -> None:
    """Register ``deltaextras local-run``."""
    p = subparsers.add_parser(
        "local-run",
        help="run the function app once without the Functions host: the orchestrator, then the worker "
        "until the queue is empty (exit code 1 if the orchestrator failed or a message was poisoned or dead-lettered)",
    )
    p.add_argument("--app-root", default=".", help="folder with host.json, orchestrator/ and worker/ (default: .)")
    p.add_argument(
        "--settings", help="local.settings.json to read app settings from (default: <app-root>/local.settings.json)"
    )
    p.add_argument("--no-orchestrator", action="store_true", help="only consume the queue")
    p.add_argument(
        "--demo",
        action="store_true",
        help="start Azurite if none runs (data in <app-root>/.azurite), create the container and a demo table, "
        "then run the app once (settings: local.settings.json, else local.settings.json.example)",
    )
    p.add_argument(
        "--idle-timeout", type=float, default=120.0, help="stop after this many seconds without a visible message"
    )
    p.add_argument("--lease", type=float, help="seconds a received message stays invisible (default: functionTimeout)")
    p.add_argument("--visibility-timeout", type=float, help="retry delay in seconds (default: host.json)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.demo and args.no_orchestrator:
        raise InvalidArgumentError("--demo runs the orchestrator; leave out --no-orchestrator")
    common = {
        "settings_file": args.settings,
        "idle_timeout": args.idle_timeout,
        "lease_seconds": args.lease,
        "visibility_timeout": args.visibility_timeout,
    }
    if args.demo:
        summary = run_demo(args.app_root, **common)
    else:
        summary = run_local(args.app_root, orchestrate=not args.no_orchestrator, **common)
    data = summary.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        for d in summary.deliveries:
            print(f"  {d.line()}")
        print(
            f"orchestrator: {data['orchestrator'] or 'not run'}; {data['invocations']} worker invocation(s): "
            f"{data['succeeded']} succeeded ({data['committed']} committed, {data['skipped']} skipped, "
            f"{data['dead_lettered']} dead-lettered), {data['failed']} failed, {data['poisoned']} poisoned; "
            f"output messages: {data['outputs'] or 'none'}; {data['seconds']:.1f}s"
        )
    ok = (summary.orchestrator in (None, "succeeded")) and not summary.poisoned and not summary.outputs
    return 0 if ok else 1
