"""Fuzzed input: property-based messages (hypothesis) against ``rorder_single``, the worker
(:func:`deltaextras.app.work.handle`), the Azure Functions queue handler and the Lambda SQS handler.

Promises: no table is written (no file appears, changes or goes under the table root); every failure
is a :class:`~deltaextras.errors.DeltaExtrasError` whose message is one line under 500 characters;
input errors are permanent (``retryable`` False: dead-letter, never a retry storm); and injected
failures are classified by ``is_retryable`` and the queue's attempt limit alone.

The target is a small local table already in layout, so a message that is valid after all is
``skipped``; every generated "valid-looking" message carries at least one defect (unknown key, wrong
type, missing column, wrong partition, future or stale version, stale file list, bad number, ...).
Counts: ``DELTAEXTRAS_RELIABILITY_FULL=1`` runs ten times as many examples.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from azure.functions.queue import QueueMessage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import new_table, record, scale

from deltaextras import errors
from deltaextras.app import work
from deltaextras.app.config import AppConfig
from deltaextras.app.edges import sqs
from deltaextras.app.edges.functions import run_worker
from deltaextras.errors import DeltaExtrasError
from deltaextras.ops.maintenance.vacuum import orphans
from deltaextras.ops.rorder.rorder import rorder, rorder_single

MAX_REASON = 500
KNOWN_KEYS = [
    "message_version",
    "path",
    "version",
    "partition_name",
    "partition_value",
    "files",
    "by",
    "sort_by",
    "unique_by",
    "target_file_size",
    "memory_budget",
    "max_materialize_size",
    "max_deleted_rows_ratio",
]
COLUMNS = ["node_id", "utc_time", "seq", "value", "node_id_range"]
# Built, not listed: hypothesis cannot even show a strategy holding an int of more than 4300 digits.
huge_ints = st.builds(
    lambda sign, exponent, plus: sign * (2**exponent if exponent < 100 else 10**exponent) + plus,
    st.sampled_from([1, -1]),
    st.sampled_from([63, 64, 100, 5000]),
    st.sampled_from([0, 1, -1]),
)
FOREIGN = [
    "abfss://lake@otheraccount.dfs.core.windows.net/sensors",
    "abfss://othercontainer@acct.dfs.core.windows.net/sensors",
    "az://othercontainer/sensors",
    "s3://other-bucket/sensors",
    "s3a://other-bucket/sensors",
    "gs://bucket/sensors",
    "https://acct.blob.core.windows.net/lake/sensors?sv=2024&sig=abc",
    "file:///etc",
    "/",
    "/tmp",
    "../../etc/passwd",
    "~root/.ssh",
    "~nosuchuser/t",
    "\x00",
    "a\x00b",
    "s3://",
    "memory:///t",
    "",
    " ",
]


def _settings(reduced: int) -> settings:
    return settings(
        max_examples=scale(reduced, reduced * 10),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ------------------------------------------------------------------------------------ the target
class Target:
    """A small local table in layout, and a cheap fingerprint of everything under its root."""

    def __init__(self, root: Path) -> None:
        self.uri = str(root / "table")
        new_table(self.uri, None, batches=3, per_batch=30, nodes=5, seed=3)
        rorder(self.uri, sort_by="utc_time", max_workers=1)
        from deltalake import DeltaTable

        self.latest = DeltaTable(self.uri).version()
        self.live = pa.table(DeltaTable(self.uri).get_add_actions(flatten=True)).column("path").to_pylist()
        self.config = AppConfig.from_env(
            {"DELTAEXTRAS_TABLES": json.dumps([{"uri": self.uri, "sort_by": ["utc_time"]}])}
        )
        self.env = {"DELTAEXTRAS_TABLES": json.dumps([{"uri": self.uri, "sort_by": ["utc_time"]}])}
        self.before = self.fingerprint()

    def fingerprint(self) -> dict[str, tuple[int, int]]:
        out = {}
        for dirpath, _dirs, names in os.walk(self.uri):
            for name in names:
                st_ = os.stat(os.path.join(dirpath, name))
                out[os.path.join(dirpath, name)] = (st_.st_size, st_.st_mtime_ns)
        return out

    def assert_untouched(self) -> None:
        after = self.fingerprint()
        assert after == self.before, f"the table was written: {sorted(set(after) ^ set(self.before))[:5]}"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    return Target(tmp_path_factory.mktemp("fuzz"))


def assert_one_line(text: str) -> None:
    assert "\n" not in text and "\r" not in text, repr(text[:200])
    assert 0 < len(text) < MAX_REASON, f"{len(text)} chars: {text[:200]}..."


def assert_input_error(exc: BaseException) -> None:
    """A failure caused by the input: ours, one line, permanent."""
    assert isinstance(exc, DeltaExtrasError), f"{type(exc).__name__}: {str(exc)[:300]}"
    assert_one_line(str(exc))
    assert not exc.retryable, f"an input error is marked retryable: {type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------- strategies
# Long strings are built by repetition: drawing them character by character costs hypothesis ~10 ms each.
long_texts = st.builds(
    lambda piece, n: (piece or "é") * n, st.text(max_size=6), st.integers(min_value=100, max_value=1000)
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    long_texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)


def table_spellings(uri: str) -> st.SearchStrategy[str]:
    """The target table written in ways that all mean the same table."""
    return st.sampled_from([uri, uri + "/", f"file://{uri}", uri + "/.", f"  {uri}  ", uri.replace("/", "//")])


def not_tables(uri: str) -> st.SearchStrategy[str]:
    """Local paths that are not the table: inside it, next to it, nowhere, junk."""
    return st.one_of(
        st.sampled_from(
            [uri + "/_delta_log", uri + "/node_id_range=0", uri + "/missing", uri + "-other", str(Path(uri).parent)]
        ),
        # No cloud URIs here: without credentials they would reach for the cloud's metadata endpoints.
        st.sampled_from(
            [p for p in FOREIGN if "://" not in p or p.startswith(("file://", "memory://")) or p == "s3://"]
        ),
        st.text(max_size=60).filter(lambda p: "://" not in p),
        long_texts,
    )


def arbitrary_message(uri: str) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts with known and unknown keys and any JSON-ish values."""
    keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=20), long_texts)
    path = st.one_of(table_spellings(uri), not_tables(uri), json_values)
    return st.builds(
        lambda rest, p, with_path: {**rest, "path": p} if with_path else rest,
        st.dictionaries(keys, json_values, max_size=6),
        path,
        st.booleans(),
    )


DEFECTS = [
    "unknown key",
    "wrong type",
    "missing column",
    "partition column as by",
    "wrong partition",
    "wrong partition name",
    "future version",
    "stale version",
    "stale files",
    "bad number",
    "bad message_version",
    "not the table",
]
WRONG_TYPES: dict[str, st.SearchStrategy[Any]] = {
    "version": st.one_of(st.text(max_size=5), st.floats(), st.booleans(), st.lists(st.integers(), max_size=2)),
    "partition_name": st.one_of(st.integers(), st.just(""), st.lists(st.text(max_size=3), max_size=2)),
    "partition_value": st.one_of(
        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers())
    ),
    "files": st.one_of(st.text(max_size=5), st.integers(), st.lists(st.integers(), min_size=1, max_size=2)),
    "by": st.one_of(st.integers(), st.lists(st.text(max_size=3), min_size=1), st.just("")),
    "sort_by": st.one_of(st.integers(), st.just([["utc_time", "sideways"]]), st.just([[1, 2, 3]])),
    "unique_by": st.one_of(st.integers(), st.just([["seq"]]), st.floats()),
    "target_file_size": st.one_of(st.text(max_size=5), st.floats(), st.booleans()),
    "memory_budget": st.one_of(st.text(max_size=5), st.floats(), st.booleans()),
    "max_deleted_rows_ratio": st.one_of(st.text(max_size=5), st.booleans(), st.lists(st.floats(), max_size=1)),
}


@st.composite
def hostile_message(draw: st.DrawFn, target: Target) -> dict[str, Any]:
    """A valid-looking message for the target table with at least one defect."""
    msg: dict[str, Any] = {
        "path": draw(table_spellings(target.uri)),
        "partition_value": draw(st.sampled_from([0, "0"])),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "message_version": st.just(1),
        "version": st.just(target.latest),
        "partition_name": st.just("node_id_range"),
        "by": st.just("node_id"),
        "sort_by": st.sampled_from(["utc_time", ["utc_time", "seq"], [["seq", "desc"]], [("value", "descending")]]),
        "unique_by": st.sampled_from(["seq", ["utc_time", "seq"]]),
        "target_file_size": st.sampled_from([1, 1 << 20, 2**62]),
        "memory_budget": st.sampled_from([1, 1 << 30, 2**62]),
        "max_materialize_size": st.sampled_from([1, 10**12]),
        "max_deleted_rows_ratio": st.sampled_from([0, 0.5, 1]),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            msg[key] = draw(values)
    defects = draw(st.lists(st.sampled_from(DEFECTS), min_size=1, max_size=3, unique=True))
    for defect in defects:
        if defect == "unknown key":
            msg[draw(st.text(min_size=1, max_size=30).filter(lambda k: k not in KNOWN_KEYS))] = draw(json_values)
        elif defect == "wrong type":
            key = draw(st.sampled_from(sorted(WRONG_TYPES)))
            msg[key] = draw(WRONG_TYPES[key])
        elif defect == "missing column":
            key = draw(st.sampled_from(["by", "sort_by", "unique_by"]))
            name = draw(
                st.one_of(st.text(min_size=1, max_size=30), st.sampled_from(["Node_ID", "seq ", "nöde", "a.b"]))
            )
            msg[key] = name if name not in COLUMNS else name + "_x"
        elif defect == "partition column as by":
            msg["by"] = "node_id_range"
        elif defect == "wrong partition":
            msg["partition_value"] = draw(
                st.one_of(
                    st.integers().filter(lambda v: v != 0),
                    st.sampled_from([None, True, False, 0.0, -0.0, "00", " 0", "0 ", "1", "", "∅", "0\x00"]),
                    st.floats().filter(lambda v: v != 0),
                    st.text(max_size=20).filter(lambda v: v != "0"),
                )
            )
        elif defect == "wrong partition name":
            msg["partition_name"] = draw(st.sampled_from(["node_id", "seq", "Node_Id_Range", "nope", "node_id_range "]))
        elif defect == "future version":
            msg["version"] = draw(
                st.one_of(st.integers(min_value=target.latest + 1), huge_ints.filter(lambda v: v > target.latest))
            )
        elif defect == "stale version":
            msg["version"] = draw(
                st.one_of(st.integers(max_value=-1), st.integers(min_value=0, max_value=target.latest - 1))
            )
        elif defect == "stale files":
            junk = st.one_of(
                st.text(max_size=80),
                st.sampled_from(
                    [p + ".old" for p in target.live] + ["../outside.parquet", "s3://b/x.parquet", "/etc/passwd"]
                ),
            )
            msg["files"] = draw(
                st.lists(st.tuples(junk, st.integers(min_value=0, max_value=2**40)).map(list), min_size=1, max_size=4)
            )
        elif defect == "bad number":
            key = draw(
                st.sampled_from(["target_file_size", "memory_budget", "max_materialize_size", "max_deleted_rows_ratio"])
            )
            if key == "max_deleted_rows_ratio":
                msg[key] = draw(st.sampled_from([-0.1, 1.5, math.inf, -math.inf, math.nan, 10**30]))
            else:
                msg[key] = draw(st.one_of(st.integers(max_value=0), huge_ints.filter(lambda v: v <= 0)))
        elif defect == "bad message_version":
            msg["message_version"] = draw(
                st.one_of(st.integers().filter(lambda v: v != 1), st.sampled_from([1.0, "1", True, None, [1]]))
            )
        elif defect == "not the table":
            msg["path"] = draw(not_tables(target.uri))
    return msg


# ------------------------------------------------------------------------------------------ checks
def check_rorder_single(target: Target, message: Any, seen: Counter[str]) -> None:
    try:
        report = rorder_single(message)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        assert_input_error(exc)
        seen[type(exc).__name__] += 1
    else:
        assert report.status == "skipped", f"a defective message was {report.status}: {message!r}"[:500]
        seen["skipped"] += 1
    target.assert_untouched()


def check_outcome(target: Target, outcome: work.Outcome, seen: Counter[str]) -> None:
    """The worker's verdict on fuzzed input: dead-letter with a one-line permanent reason, or skipped."""
    assert outcome.status in (work.DEAD_LETTER, work.SKIPPED), (outcome.status, outcome.reason)
    if outcome.status == work.DEAD_LETTER:
        assert outcome.error is not None
        assert_input_error(outcome.error)
        assert_one_line(outcome.reason)
        envelope = json.loads(outcome.dead_letter_body())
        assert envelope["reason"] == outcome.reason
        assert len(outcome.dead_letter_body()) <= work.MAX_DEAD_LETTER_JSON
    line = outcome.line()
    assert "\n" not in line and json.loads(line)["status"] == outcome.status
    seen[outcome.error_type or outcome.status] += 1
    target.assert_untouched()


def _dumps(value: Any) -> str:
    """JSON text of a generated value; numbers Python cannot print go in as their own digits."""
    try:
        return json.dumps(value, default=str)
    except ValueError:
        return '{"path": "x", "version": ' + "9" * 5000 + "}"


def queue_bodies(target: Target) -> st.SearchStrategy[str | bytes]:
    """What can arrive on the queue: text, bytes, base64 garbage, nested junk, hostile messages."""
    as_json = st.one_of(arbitrary_message(target.uri), hostile_message(target), json_values).map(_dumps)
    foreign = st.builds(
        lambda p, v: json.dumps({"path": p, "partition_value": v}), st.sampled_from(FOREIGN), st.sampled_from([0, "3"])
    )
    return st.one_of(
        st.text(max_size=200),
        st.binary(max_size=200),
        st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode("ascii")),
        as_json,
        as_json.map(lambda t: base64.b64encode(t.encode("utf-8")).decode("ascii")),
        foreign,
        foreign.map(lambda t: base64.b64encode(t.encode("utf-8")).decode("ascii")),
        st.integers(min_value=1, max_value=200_000).map(lambda n: "[" * n),
        st.integers(min_value=1, max_value=50_000).map(lambda n: '{"path":' * n),
        st.integers(min_value=4300, max_value=20_000).map(lambda n: '{"path": "x", "version": ' + "9" * n + "}"),
        st.just("\ufeff" + json.dumps({"path": target.uri, "partition_value": 0, "colour": 1})),
    )


def run_fuzz(
    name: str,
    count: int,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    seen: Counter[str],
    *,
    messages: Callable[[Any], int] = lambda _example: 1,
    injected: bool = False,
) -> None:
    """Run ``check`` on ``count`` examples of ``strategy`` (``seen`` collects the outcome mix); record
    the figures (``messages``: how many messages an example holds), also when an example failed."""
    cases: Counter[str] = Counter()

    @_settings(count)
    @given(strategy)
    def one(example: Any) -> None:
        cases["n"] += messages(example)
        check(example)

    try:
        one()
    finally:
        note = ", ".join(f"{k} {v}" for k, v in seen.most_common(6))
        n = cases["n"]
        record("fuzz", name, backend="local", runs=1, fuzz_cases=n, injections=n if injected else 0, note=note)


# ------------------------------------------------------------------------------------------- tests
def test_fuzz_rorder_single_arbitrary_dicts(target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # relative junk paths resolve to an empty directory
    seen: Counter[str] = Counter()
    run_fuzz(
        "rorder_single: arbitrary dicts",
        3000,
        arbitrary_message(target.uri),
        lambda m: check_rorder_single(target, m, seen),
        seen,
    )


def test_fuzz_rorder_single_hostile_messages(target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    seen: Counter[str] = Counter()
    run_fuzz(
        "rorder_single: valid-looking, one defect or more",
        3000,
        hostile_message(target),
        lambda m: check_rorder_single(target, m, seen),
        seen,
    )
    assert seen["skipped"] and len(seen) >= 4, seen


def test_fuzz_worker_bodies(target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    seen: Counter[str] = Counter()

    def check(body: str | bytes) -> None:
        check_outcome(
            target, work.handle(body, target.config, message_id="fuzz", dequeue_count=1, max_attempts=5), seen
        )

    run_fuzz("worker handle(): queue bodies", 2500, queue_bodies(target), check, seen)
    assert seen["AccessDeniedError"] and seen["MessageError"], seen


def test_fuzz_azure_queue_handler(target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    from deltaextras.app.edges.local_host import OutValue

    seen: Counter[str] = Counter()

    def check(body: str | bytes) -> None:
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        msg = QueueMessage(id="fuzz", body=raw, dequeue_count=1)
        out = OutValue()
        outcome = run_worker(msg, out, env=target.env)  # a permanent failure never raises
        check_outcome(target, outcome, seen)
        if outcome.dead_letter:
            assert json.loads(out.get())["reason"] == outcome.reason
        else:
            assert out.get() is None

    run_fuzz("Azure queue trigger: run_worker()", 1200, queue_bodies(target), check, seen)


class FakeSqs:
    """Records ``send_message`` calls (the dead-letter queue)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(kwargs)
        return {"MessageId": str(len(self.sent))}


def test_fuzz_lambda_sqs_handler(target: Target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**target.env, "DELTAEXTRAS_DLQ_URL": "https://sqs.invalid/dlq"}

    def check(bodies: list[str]) -> None:
        client = FakeSqs()
        records = [
            {"messageId": f"m{i}", "body": b, "attributes": {"ApproximateReceiveCount": "1"}}
            for i, b in enumerate(bodies)
        ]
        result = sqs.work({"Records": records}, env, client=client)
        assert result == {"batchItemFailures": []}, result
        assert len(client.sent) <= len(bodies)
        for sent in client.sent:
            reason = sent["MessageAttributes"]["deltaextras_reason"]["StringValue"]
            assert_one_line(reason)
            seen[sent["MessageAttributes"]["deltaextras_error_type"]["StringValue"]] += 1
        target.assert_untouched()

    seen: Counter[str] = Counter()
    text_bodies = queue_bodies(target).map(lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b)
    run_fuzz(
        "Lambda SQS handler: work()", 300, st.lists(text_bodies, min_size=1, max_size=4), check, seen, messages=len
    )


# Injected failures: every error class, raised at each hook, on each delivery attempt.
ERROR_CLASSES = [getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)]
FOREIGN_ERRORS: list[type[BaseException]] = [OSError, TimeoutError, ConnectionError, ValueError, KeyError, RuntimeError]


def test_fuzz_failure_classification(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("classify")
    uri = str(root / "table")
    new_table(uri, None, batches=3, per_batch=20, nodes=4, seed=5)  # not in layout: every delivery rewrites
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([uri])})
    body = json.dumps({"path": uri, "partition_value": 0})
    log_before = sorted(os.listdir(os.path.join(uri, "_delta_log")))
    max_attempts = 5

    def check(case: tuple[type[BaseException], str, int]) -> None:
        cls, hook, attempt = case

        def fail(*_args: Any) -> None:
            raise cls("injected failure")

        outcome = work.handle(body, config, dequeue_count=attempt, max_attempts=max_attempts, hooks={hook: fail})
        retryable = errors.is_retryable(cls("x"))
        if issubclass(cls, errors.CommitConflictError):  # a stale plan: superseded, the next plan covers it
            assert outcome.status == work.SKIPPED and outcome.reason.startswith("superseded: "), outcome
        elif retryable and attempt < max_attempts:
            assert outcome.status == work.RETRY, outcome
        else:
            assert outcome.status == work.DEAD_LETTER, outcome
            if retryable:
                assert outcome.reason.startswith(f"gave up after {attempt} attempt(s)")
        assert "\n" not in outcome.reason
        assert sorted(os.listdir(os.path.join(uri, "_delta_log"))) == log_before
        assert orphans(uri) == []  # the failed attempt deleted what it wrote
        seen[outcome.status] += 1

    seen: Counter[str] = Counter()
    cases = st.tuples(
        st.sampled_from([*ERROR_CLASSES, *FOREIGN_ERRORS]),
        st.sampled_from(["after_output", "after_rewrite", "before_commit"]),
        st.integers(min_value=1, max_value=max_attempts + 1),
    )
    run_fuzz("failure classification (injected errors)", 200, cases, check, seen, injected=True)
