"""Confinement and secrets.

* The worker acts only on the tables of ``DELTAEXTRAS_TABLES``: a message naming another account,
  container, bucket or path (or a spelling that resolves elsewhere) is dead-lettered with
  ``AccessDeniedError`` before any storage is opened, and an accepted message always runs against the
  configured URI and storage options, never the message's own spelling.
* No account key, SAS token, connection string or AWS secret appears in logs, printed output, queue
  messages (work, poison, dead-letter) or ``commitInfo``: the Azure app runs end to end on Azurite
  (local host, real queues) with a SAS token, an account key and a connection string, and the AWS
  handlers run on moto (SQS + S3) with fake long-term and session credentials; every captured byte is
  scanned.
* Regression tests for what the fuzzer found (see docs/reliability.md).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import log_entries, new_table, record, scale
from services import AZURITE_ACCOUNT, AZURITE_KEY, Azurite, MotoServer

from deltaextras.app import work
from deltaextras.app.config import AppConfig, table_key
from deltaextras.errors import MAX_MESSAGE, InvalidArgumentError, MessageError
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.report import PartitionReport
from deltaextras.ops.rorder.rorder import rorder_single

AZURE_URI = "abfss://lake@acct.dfs.core.windows.net/sensors"
S3_URI = "s3://bucket/sensors"


# ============================================================================== confinement
@pytest.fixture
def allow_list(tmp_path: Path) -> tuple[AppConfig, str]:
    local = str(tmp_path / "tables" / "sensors")
    new_table(local, None, batches=2, per_batch=10)
    tables = [
        {"uri": AZURE_URI, "name": "az-sensors", "storage_options": {"azure_storage_account_key": "a2V5"}},
        {"uri": S3_URI, "name": "s3-sensors", "storage_options": {"AWS_REGION": "eu-west-1"}},
        {"uri": local, "name": "local-sensors"},
    ]
    return AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps(tables)}), local


class Recorder:
    """Stands in for ``rorder_single`` in the worker: records what it would have touched."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    def __call__(self, msg: RorderMessage, *, storage_options: Any = None, hooks: Any = None) -> PartitionReport:
        self.calls.append((msg.path, dict(storage_options or {})))
        return PartitionReport(table=msg.path, partition=None, status="skipped", reason="recorded")


def foreign_locations(local: str, tmp_path: Path) -> list[str]:
    """Other accounts, containers, buckets and paths -- and spellings that lead elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "link-out").symlink_to(outside)
    return [
        "abfss://lake@otheracct.dfs.core.windows.net/sensors",
        "abfss://lake@acct.blob.core.windows.net/sensors",
        "abfss://other@acct.dfs.core.windows.net/sensors",
        "abfss://lake@acct.dfs.core.windows.net/sensors2",
        "abfss://lake@acct.dfs.core.windows.net/sensors/sub",
        "abfss://lake@acct.dfs.core.windows.net/other",
        "abfss://lake@acct.dfs.core.windows.net/sensors/../other",
        "abfss://lake@acct.dfs.core.windows.net/Sensors",
        "abfss://lake@acct.dfs.core.windows.net/sens%6Frs",
        "abfss://lake@acct.dfs.core.windows.net/sensоrs",  # Cyrillic o
        "abfss://lake@acct.dfs.core.windows.net.evil.example/sensors",
        "abfss://lake@acct.dfs.core.windows.net:443@evil/sensors",
        "abfs://lake@acct.dfs.core.windows.net/sensors?sv=x&sig=y",
        "az://lake/sensors",
        "azure://lake/sensors",
        "https://acct.dfs.core.windows.net/lake/sensors",
        "s3://bucket2/sensors",
        "s3://other/sensors",
        "s3://bucket/sensors2",
        "s3://bucket/sensors/part",
        "s3://bucket//sensors",
        "s3://bucket/./sensors",
        "s3://bucket/sensors#x",
        "s3://bucket.evil.example/sensors",
        "gs://bucket/sensors",
        "s3:/bucket/sensors",
        local + "-2",
        local + "/node_id_range=0",
        local + "/_delta_log",
        str(Path(local).parent),
        str(outside),
        str(tmp_path / "link-out"),
        local + "/../../outside",
        "file://" + str(outside),
        "sensors",
        "/",
        "~",
        "~root",
        "~nosuchuser/sensors",
        local + "\x00",
        "x" * 5000,
        "",
    ]


def same_tables(local: str, tmp_path: Path) -> list[tuple[str, str]]:
    """Other spellings of the configured tables: accepted, and run against the configured URI."""
    (tmp_path / "link-in").symlink_to(Path(local))
    return [
        (AZURE_URI + "/", AZURE_URI),
        ("ABFSS://lake@ACCT.dfs.core.windows.net/sensors", AZURE_URI),
        ("az-sensors", AZURE_URI),
        ("s3a://bucket/sensors", S3_URI),
        ("  s3://bucket/sensors/  ", S3_URI),
        ("s3-sensors", S3_URI),
        (local + "/", local),
        ("file://" + local, local),
        (local + "/x/..", local),
        (str(tmp_path / "link-in"), local),
    ]


def test_worker_refuses_other_accounts_containers_buckets_and_paths(
    allow_list: tuple[AppConfig, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, local = allow_list
    recorder = Recorder()
    monkeypatch.setattr(work, "rorder_single", recorder)
    refused = 0
    for path in foreign_locations(local, tmp_path):
        for body in (
            json.dumps({"path": path, "partition_value": 0}),
            RorderMessage.from_dict({"path": path or "x"}).encode(),
        ):
            outcome = work.handle(body, config)
            assert outcome.status == work.DEAD_LETTER, (path, outcome.status, outcome.reason)
            assert outcome.error_type in ("AccessDeniedError", "MessageError"), (path, outcome.reason)
            assert not outcome.error.retryable
            assert "\n" not in outcome.reason and len(outcome.reason) <= MAX_MESSAGE
            refused += 1
    assert recorder.calls == [], "the worker touched storage for a table outside the allow-list"
    configured = {t.uri: t.storage_options for t in config.tables}
    spellings = same_tables(local, tmp_path)
    for spelling, uri in spellings:
        outcome = work.handle(json.dumps({"path": spelling, "partition_value": 0}), config)
        assert outcome.status == work.SKIPPED, (spelling, outcome.reason)
        path, options = recorder.calls[-1]
        assert (path, options) == (uri, configured[uri]), spelling
    record(
        "confinement",
        "foreign accounts, containers, buckets, paths",
        backend="local",
        runs=refused,
        note=f"{refused} messages refused before any I/O; {len(spellings)} other "
        "spellings of configured tables ran on the configured URI",
    )


def _mutations(uri: str) -> st.SearchStrategy[str]:
    """A configured URI with one edit: a character inserted, removed or replaced, a suffix, a prefix."""
    pos = st.integers(min_value=0, max_value=len(uri))
    char = st.sampled_from([*"aZ09./@:-_%~ ", "ο", "\x00"])
    return st.one_of(
        st.builds(lambda i, c: uri[:i] + c + uri[i:], pos, char),
        st.builds(lambda i: uri[:i] + uri[i + 1 :], pos),
        st.builds(lambda i, c: uri[:i] + c + uri[i + 1 :], pos, char),
        st.builds(lambda s: uri + s, st.text(max_size=8)),
        st.builds(lambda s: s + uri, st.text(max_size=8)),
    )


def test_mutated_uris_never_reach_another_location(
    allow_list: tuple[AppConfig, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Property: whatever the message says, storage is only ever opened at a configured URI with its options."""
    config, _local = allow_list
    recorder = Recorder()
    monkeypatch.setattr(work, "rorder_single", recorder)
    configured = {t.uri: t.storage_options for t in config.tables}
    seen = {"refused": 0, "same table": 0}

    @settings(
        max_examples=scale(1500, 15000),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.sampled_from(sorted(configured)).flatmap(_mutations))
    def one(path: str) -> None:
        before = len(recorder.calls)
        outcome = work.handle(json.dumps({"path": path, "partition_value": 0}), config)
        if len(recorder.calls) == before:
            assert outcome.status == work.DEAD_LETTER and outcome.error_type in ("AccessDeniedError", "MessageError")
            seen["refused"] += 1
            return
        called, options = recorder.calls[-1]
        assert called in configured and options == configured[called]
        assert table_key(path.strip()) == table_key(called) or path.strip() in {t.name for t in config.tables}
        seen["same table"] += 1

    try:
        one()
    finally:
        record(
            "confinement",
            "mutated URIs (property)",
            backend="local",
            fuzz_cases=sum(seen.values()),
            note=f"{seen['refused']} refused, {seen['same table']} same table",
        )
    assert seen["refused"] > 0


# ============================================================================== secrets
def _scan(texts: Iterable[str], secrets: dict[str, str]) -> list[str]:
    """Which secrets (by label) appear in any text, raw, URL-decoded or base64-decoded."""
    found = []
    blobs = []
    for text in texts:
        blobs.append(text)
        blobs.append(unquote(text))
        with contextlib.suppress(ValueError):
            blobs.append(base64.b64decode(text, validate=True).decode("utf-8", "replace"))
    for label, secret in secrets.items():
        if any(secret in blob for blob in blobs):
            found.append(label)
    return found


def _log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    texts = []
    for rec in caplog.records:
        texts.append(rec.getMessage())
        if rec.exc_info:
            texts.append(logging.Formatter().formatException(rec.exc_info))
    return texts


def _commit_infos(uri: str, options: dict[str, str]) -> list[str]:
    return [json.dumps(a) for actions in log_entries(uri, options).values() for a in actions if "commitInfo" in a]


def _sas_token(azurite: Azurite, container: str) -> str:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    return generate_container_sas(
        AZURITE_ACCOUNT,
        container,
        account_key=AZURITE_KEY,
        permission=ContainerSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
        expiry=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1),
    )


def test_no_secret_in_logs_queues_or_commit_info_on_azure(
    azurite: Azurite,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from services import REPO_ROOT

    from deltaextras.app.edges.azure_queue import ensure_queue, queue_client
    from deltaextras.app.edges.local_host import LocalHost

    container = azurite.create_container("reliability-secrets")
    sas = _sas_token(azurite, container)
    bad_key = "bm90LWEta2V5LWJ1dC1hLXNlY3JldC1tYXJrZXI" + "*SECRETMARKER*"
    bad_sas = "sv=2020-01-01&sig=SECRETMARKER2sig"
    via_sas = f"az://{container}/{uuid.uuid4().hex}"
    via_key = f"az://{container}/{uuid.uuid4().hex}"
    broken = f"az://{container}/{uuid.uuid4().hex}"
    base = {"azure_storage_account_name": AZURITE_ACCOUNT, "azure_storage_endpoint": azurite.blob_endpoint}
    sas_options = {**base, "azure_storage_sas_token": sas, "azure_allow_http": "true"}
    key_options = {**base, "azure_storage_account_key": AZURITE_KEY, "azure_allow_http": "true"}
    for uri in (via_sas, via_key):
        new_table(uri, key_options, batches=3, per_batch=20)
    new_table(broken, key_options, batches=1, per_batch=5)
    queue = f"secrets-{uuid.uuid4().hex[:10]}"
    tables = [
        {"uri": via_sas, "sort_by": ["utc_time"]},  # global options: the SAS token
        {"uri": via_key, "sort_by": ["utc_time"], "storage_options": {"azure_storage_account_key": AZURITE_KEY}},
        {"uri": broken, "storage_options": {"azure_storage_account_key": bad_key, "azure_storage_sas_token": bad_sas}},
    ]
    monkeypatch.setenv("DELTAEXTRAS_TABLES", json.dumps(tables))
    monkeypatch.setenv("DELTAEXTRAS_STORAGE_OPTIONS", json.dumps({k: v for k, v in sas_options.items()}))
    monkeypatch.setenv("DELTAEXTRAS_QUEUE", queue)
    monkeypatch.setenv("DELTAEXTRAS_POISON_QUEUE", f"{queue}-poison")
    monkeypatch.setenv("DELTAEXTRAS_STORAGE", azurite.connection_string)
    monkeypatch.setenv("DELTAEXTRAS_SCHEDULE", "0 0 * * * *")
    for name in ("AZURE_CLIENT_ID", "IDENTITY_ENDPOINT", "DELTAEXTRAS_QUEUE_URL"):
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.DEBUG)
    secrets = {
        "account key": AZURITE_KEY,
        "SAS token": sas,
        "SAS signature": unquote(sas.split("sig=", 1)[1].split("&", 1)[0]),
        "connection string": azurite.connection_string,
        "malformed key": bad_key,
        "malformed key marker": "SECRETMARKER",
        "malformed SAS": bad_sas,
    }

    host = LocalHost(REPO_ROOT, visibility_timeout=0)
    host.run_timer("orchestrator")  # plans all three; the broken table fails with its reason
    work_queue = queue_client(queue, raw=True)
    ensure_queue(work_queue)
    sent = [m.content for m in work_queue.peek_messages(max_messages=32)]
    assert len(sent) == 2, sent
    # A message for a table outside the allow-list, and one that is not base64 at all.
    work_queue.send_message(base64.b64encode(json.dumps({"path": "az://elsewhere/t"}).encode()).decode())
    work_queue.send_message("not base64 ***")
    summary = host.drain("worker", idle_timeout=30)
    poison = queue_client(f"{queue}-poison", raw=True)
    ensure_queue(poison)
    poisoned = [m.content for m in poison.peek_messages(max_messages=32)]
    assert summary.succeeded == 3 and len(poisoned) == 2, summary.to_dict()
    assert (host.summary.orchestrator or "").startswith("failed"), "the broken table should fail planning"

    out = capsys.readouterr()
    texts = [
        *_log_texts(caplog),
        out.out,
        out.err,
        *sent,
        *poisoned,
        json.dumps(summary.to_dict(), default=str),
        *_commit_infos(via_sas, key_options),
        *_commit_infos(via_key, key_options),
    ]
    leaks = _scan(texts, secrets)
    record(
        "secrets",
        "Azure app on Azurite (SAS, key, connection string)",
        backend="azurite",
        note=f"{len(texts)} captured texts scanned for {len(secrets)} secrets",
    )
    assert leaks == [], f"secrets in captured output: {leaks}"
    assert any("rorder_work" in t for t in texts) and len(_commit_infos(via_sas, key_options)) >= 4


def test_no_secret_in_logs_messages_or_commit_info_on_aws(
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from deltaextras.app.edges import sqs

    bucket = moto.create_bucket("reliability-secrets")
    secret_key = "fakeSecretAccessKey/" + uuid.uuid4().hex
    session = "FakeSessionToken" + uuid.uuid4().hex
    options = {**moto.storage_options, "AWS_SECRET_ACCESS_KEY": secret_key, "AWS_SESSION_TOKEN": session}
    uri = f"s3://{bucket}/{uuid.uuid4().hex}"
    new_table(uri, options, batches=3, per_batch=20)
    client = moto.boto3_client("sqs")
    queue_url = client.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_url = client.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    env = {
        "DELTAEXTRAS_TABLES": json.dumps([{"uri": uri, "sort_by": ["utc_time"], "storage_options": options}]),
        "DELTAEXTRAS_QUEUE_URL": queue_url,
        "DELTAEXTRAS_DLQ_URL": dlq_url,
    }
    caplog.set_level(logging.DEBUG)
    sqs.orchestrate(env, client=client)
    client.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"path": "s3://elsewhere/t"}))
    received = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    event = {
        "Records": [
            {"messageId": m["MessageId"], "body": m["Body"], "attributes": {"ApproximateReceiveCount": "1"}}
            for m in received
        ]
    }
    result = sqs.work(event, env, client=client)
    assert result == {"batchItemFailures": []}
    dead = client.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    dead_texts = [json.dumps(m, default=str) for m in dead.get("Messages", [])]
    assert len(dead_texts) == 1
    out = capsys.readouterr()
    texts = [
        *_log_texts(caplog),
        out.out,
        out.err,
        *(m["Body"] for m in received),
        *dead_texts,
        *_commit_infos(uri, options),
    ]
    leaks = _scan(texts, {"secret access key": secret_key, "session token": session})
    record(
        "secrets",
        "AWS handlers on moto (secret key, session token)",
        backend="s3",
        note=f"{len(texts)} captured texts scanned for 2 secrets",
    )
    assert leaks == [], f"secrets in captured output: {leaks}"
    assert len(_commit_infos(uri, options)) >= 4


# ============================================================================== found by the fuzzer
@pytest.mark.parametrize(
    ("message", "error", "needle"),
    [
        ({"path": "/t", "version": 10**5000}, MessageError, "an integer of about 5001 digits"),
        ({"path": "/t", "version": 2**63}, MessageError, "from 0 to 9223372036854775807"),
        ({"path": "/t", "target_file_size": -(10**5000)}, MessageError, "from 1 to 9223372036854775807"),
        ({"path": "/t", "max_deleted_rows_ratio": 10**5000}, MessageError, "[0, 1]"),
        ({"path": "/t", "k" * 3000: 1}, MessageError, "fix the producer"),
        ({"path": "~nosuchuser/t", "partition_value": 0}, InvalidArgumentError, "not a usable local path"),
        ({"path": "/tmp/a\x00b", "partition_value": 0}, InvalidArgumentError, "not a usable local path"),
        ({"path": "/tmp/" + "n" * 300, "partition_value": 0}, InvalidArgumentError, "cannot be used"),
    ],
)
def test_hostile_values_fail_as_one_line_permanent_errors(message: dict[str, Any], error: type, needle: str) -> None:
    """Before: ValueError (printing a huge int), RuntimeError ("~user"), ValueError (NUL byte), OSError
    (a name too long, which ``is_retryable`` counted as transient: a retry storm), and messages of any
    length quoting the input."""
    with pytest.raises(error) as info:
        rorder_single(message)
    text = str(info.value)
    assert needle in text and "\n" not in text and len(text) <= MAX_MESSAGE
    assert not info.value.retryable


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000,
        '{"path": "/t", "version": ' + "9" * 5000 + "}",
        base64.b64encode(("[" * 50_000).encode()).decode(),
    ],
)
def test_unreadable_bodies_are_message_errors(body: str, tmp_path: Path) -> None:
    """Before: RecursionError / ValueError escaped the parser (dead-lettered without a library reason)."""
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([str(tmp_path)])})
    outcome = work.handle(body, config)
    assert outcome.status == work.DEAD_LETTER and outcome.error_type == "MessageError", outcome.reason
    with pytest.raises(MessageError):
        RorderMessage.decode(body)


def test_a_refused_path_that_cannot_be_resolved_is_access_denied(tmp_path: Path) -> None:
    """Before: ``~nosuchuser/...`` made the allow-list lookup raise RuntimeError."""
    config = AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps([str(tmp_path)])})
    for path in ("~nosuchuser/t", str(tmp_path) + "\x00"):
        outcome = work.handle(json.dumps({"path": path, "partition_value": 0}), config)
        assert outcome.error_type == "AccessDeniedError", outcome.reason
    assert os.listdir(tmp_path) == []
