"""The cloud-neutral parts of the function app on local tables: configuration and allow-list, the
orchestrator's dispatch, the worker's failure classification, manual-rerun messages."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from app_support import (
    UNIT,
    assert_in_layout,
    commits,
    content_checksum,
    sensor_batch,
    table_version,
    write_sensor_table,
)
from deltalake import DeltaTable, write_deltalake
from oracle import assert_engines_agree, scan
from oracle import content_checksum as table_checksum

from deltaextras.app import work
from deltaextras.app.config import AppConfig, table_key
from deltaextras.app.dispatch import dispatch
from deltaextras.app.enqueue import build_messages, enqueue
from deltaextras.errors import (
    AccessDeniedError,
    CommitConflictError,
    InvalidArgumentError,
    MessageError,
    StorageError,
)
from deltaextras.ops.rorder.message import RorderMessage
from deltaextras.ops.rorder.plan import plan_table


def config_for(*tables: Any, **extra: str) -> AppConfig:
    return AppConfig.from_env({"DELTAEXTRAS_TABLES": json.dumps(list(tables)), **extra})


@pytest.fixture
def table(tmp_path: Path) -> str:
    uri = str(tmp_path / "sensors")
    write_sensor_table(uri, partitions=3)
    return uri


# ----------------------------------------------------------------------------- configuration
def test_tables_setting_accepts_uris_and_objects_and_validates() -> None:
    config = config_for(
        "s3://lake/a/",
        {
            "uri": "abfss://c@acct.dfs.core.windows.net/b",
            "name": "bee",
            "sort_by": ["t", ["q", "desc"]],
            "unique_by": "t",
        },
        {"path": "/data/c", "target_file_size": 1 << 20, "by": "node_id"},
    )
    a, b, c = config.tables
    assert (a.uri, a.name) == ("s3://lake/a", "a")
    assert b.options.sort_by == (("t", "ascending"), ("q", "descending")) and b.options.unique_by == ("t",)
    assert c.options.target_file_size == 1 << 20 and c.options.by == "node_id"
    assert config.find("bee") is b and config.find("S3A://LAKE/a") is a
    assert (config.queue, config.poison_queue) == ("deltaextras-rorder", "deltaextras-rorder-poison")
    assert config_for("s3://l/t", DELTAEXTRAS_QUEUE="q1").poison_queue == "q1-poison"

    for bad, needle in [
        ("not json", "not valid JSON"),
        ("[]", "lists no table"),
        ('[{"uri": "s3://l/t", "sortby": "x"}]', "unknown key 'sortby'"),
        ('[{"name": "x"}]', "needs 'uri'"),
        ('["s3://l/t", "s3://l/t/"]', "twice"),
        ('[{"uri": "s3://l/t", "target_file_size": -1}]', "target_file_size"),
    ]:
        with pytest.raises(InvalidArgumentError, match=needle):
            AppConfig.from_env({"DELTAEXTRAS_TABLES": bad})
    with pytest.raises(InvalidArgumentError, match="DELTAEXTRAS_TABLES is required"):
        AppConfig.from_env({})


def test_allow_list_and_storage_options_precedence() -> None:
    env = {
        "AZURE_CLIENT_ID": "client-1",
        "IDENTITY_ENDPOINT": "http://localhost:42356/msi/token",
        "DELTAEXTRAS_STORAGE_OPTIONS": json.dumps({"timeout": "120s"}),
    }
    config = config_for(
        "abfss://lake@acct.dfs.core.windows.net/mi",
        {"uri": "az://lake/keyed", "storage_options": {"azure_storage_account_key": "secret"}},
        {"uri": "s3://lake/s3", "storage_options": {"timeout": "5s"}},
        **env,
    )
    mi, keyed, s3 = config.tables
    # Managed identity on Functions: the user-assigned client id and the platform's token endpoint.
    assert mi.storage_options == {
        "azure_client_id": "client-1",
        "azure_msi_endpoint": "http://localhost:42356/msi/token",
        "timeout": "120s",
    }
    assert keyed.storage_options == {"timeout": "120s", "azure_storage_account_key": "secret"}
    assert s3.storage_options == {"timeout": "5s"}
    assert config.describe()["tables"][1]["storage_options"]["azure_storage_account_key"] == "***"
    with pytest.raises(AccessDeniedError, match="allow-list"):
        config.table("abfss://lake@acct.dfs.core.windows.net/other")
    assert table_key("abfss://lake@ACCT.dfs.core.windows.net/mi/") == table_key(mi.uri)


# ----------------------------------------------------------------------------- orchestrator
def test_dispatch_plans_every_table_and_reports_failures_without_stopping(table: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    config = config_for({"uri": table, "sort_by": "utc_time"}, missing)
    sent: list[str] = []
    report = dispatch(config, sent.extend, batch_size=2)
    assert (report.planned, report.skipped, report.sent) == (3, 0, 3)
    assert [t.error_type for t in report.tables] == [None, "TableNotFoundError"]
    messages = [RorderMessage.from_dict(json.loads(b)) for b in sent]
    assert sorted(m.partition_value for m in messages) == ["0", "1", "2"]
    assert {m.version for m in messages} == {table_version(table)}
    assert all(m.options.sort_by == (("utc_time", "ascending"),) and m.files for m in messages)
    line = json.loads(report.line())
    assert (line["partitions_planned"], line["messages_sent"], line["tables_failed"]) == (3, 3, 1)

    def refuse(_: Any) -> None:
        raise ConnectionError("queue unreachable")

    failed = dispatch(config_for(table), refuse)
    assert failed.sent == 0 and "queue unreachable" in (failed.tables[0].error or "")


def test_planning_twice_at_one_version_does_no_double_work(table: str) -> None:
    """Two orchestrator runs before any worker: every partition is rewritten once, the rest skip."""
    config = config_for({"uri": table, "sort_by": "utc_time"})
    before = content_checksum(table)
    sent: list[str] = []
    dispatch(config, sent.extend)
    dispatch(config, sent.extend)
    assert len(sent) == 6
    outcomes = [work.handle(body, config) for body in sent]
    assert [o.status for o in outcomes].count("committed") == 3
    assert all("already committed" in o.reason for o in outcomes if o.status == "skipped")
    assert table_version(table) == 3 + 2  # 3 appends + 3 rewrites, versions 0..5
    assert content_checksum(table) == before
    assert_in_layout(table, None, range(3))
    again: list[str] = []
    assert dispatch(config, again.extend).planned == 0 and not again


# ----------------------------------------------------------------------------- worker
def test_hand_written_message_plans_from_the_current_snapshot_with_configured_options(
    table: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = config_for({"uri": table, "sort_by": [["utc_time", "descending"]], "target_file_size": 64 << 20})
    caplog.set_level(logging.INFO, "deltaextras.app.work")
    body = base64.b64encode(json.dumps({"path": table + "/", "partition_value": 1}).encode()).decode()
    outcome = work.handle(body, config, message_id="m-1", dequeue_count=1)
    assert outcome.status == "committed", outcome.reason
    assert outcome.partition == f"{UNIT}=1" and outcome.table == table
    last = commits(table)[-1]
    assert json.loads(last["operationParameters"]["sortBy"]) == [["utc_time", "descending"]]
    record = json.loads(next(r.getMessage() for r in caplog.records if '"rorder_work"' in r.getMessage()))
    assert record["status"] == "committed" and record["message_id"] == "m-1"
    assert record["files_removed"] == 3 and record["files_added"] == 1 and record["rows"] == 18
    assert record["commit_version"] == 3
    # The same message again: the partition is in layout now.
    assert work.handle(body, config).status == "skipped"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("@@@", "neither JSON nor base64"),
        ("[1, 2]", "JSON object"),
        (b"\xff\xfe", "UTF-8"),
        ('{"path": "TABLE", "partition_value": 0, "fles": []}', "'fles' is not known"),
        ('{"path": "TABLE", "partition_value": {"x": 1}}', "partition_value"),
        ('{"partition_value": 0}', "needs 'path'"),
        ('{"path": "TABLE"}', "must name partition_value"),
        ('{"path": "TABLE", "partition_value": 0, "sort_by": "no_such_column"}', "no_such_column"),
    ],
)
def test_malformed_messages_are_dead_lettered_and_leave_the_table_untouched(table: str, body: Any, needle: str) -> None:
    config = config_for(table)
    version = table_version(table)
    body = body.replace("TABLE", table) if isinstance(body, str) else body
    outcome = work.handle(body, config)
    assert outcome.status == "dead-letter" and not outcome.retry
    assert needle in outcome.reason
    assert table_version(table) == version
    envelope = json.loads(outcome.dead_letter_body())
    assert envelope["deltaextras_dead_letter"] == 1 and needle in envelope["reason"]


def test_permanent_failures_are_dead_lettered(table: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    locked = "s3://some-bucket/t"
    config = config_for(table, missing, {"uri": locked, "storage_options": {"AWS_S3_LOCKING_PROVIDER": "dynamodb"}})
    cases = {
        "AccessDeniedError": {"path": str(tmp_path / "not-configured"), "partition_value": 0},
        "TableNotFoundError": {"path": missing, "partition_value": 0},
        "UnsupportedFeatureError": {"path": locked, "partition_value": 0},
    }
    for error_type, message in cases.items():
        outcome = work.handle(json.dumps(message), config)
        assert (outcome.status, outcome.error_type) == ("dead-letter", error_type), outcome.reason


def test_unique_by_conflict_is_dead_lettered(tmp_path: Path) -> None:
    uri = str(tmp_path / "dups")
    rows = {"node_id": [1, 1, 2], "utc_time": [5, 5, 6], "value": [1.0, 2.0, 3.0], UNIT: [0, 0, 0]}
    write_deltalake(uri, pa.table(rows), partition_by=[UNIT])
    write_deltalake(uri, pa.table(rows), partition_by=[UNIT], mode="append")
    config = config_for({"uri": uri, "unique_by": ["node_id", "utc_time"]})
    outcome = work.handle(json.dumps({"path": uri, "partition_value": 0}), config)
    assert (outcome.status, outcome.error_type) == ("dead-letter", "DuplicateKeyError")
    assert table_version(uri) == 1


def test_stale_plan_whose_inputs_are_gone_is_superseded_not_dead_lettered(table: str) -> None:
    """The table moved on under the plan: nothing is committed and nothing is dead-lettered (no person has
    anything to do); the message is done, and the next plan covers the unit as it is now."""
    config = config_for(table)
    stale = plan_table(table).messages()[0].to_json()
    DeltaTable(table).delete(f"{UNIT} = 0")  # another writer removes the planned files
    version = table_version(table)
    outcome = work.handle(stale, config)
    assert outcome.status == "skipped" and isinstance(outcome.error, CommitConflictError), outcome.reason
    assert not outcome.dead_letter and not outcome.retry
    assert outcome.error_type == "ConcurrentDeleteReadError"  # the planned files were removed
    assert outcome.reason.startswith("superseded: ")
    assert table_version(table) == version


def test_transient_failures_retry_until_the_last_attempt(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_for(table)
    body = json.dumps({"path": table, "partition_value": 0})

    def flaky(*_: Any, **__: Any) -> Any:
        raise StorageError("storage failed to read x: connection reset")

    monkeypatch.setattr(work, "rorder_single", flaky)
    first = work.handle(body, config, dequeue_count=1, max_attempts=5)
    assert first.retry and first.error_type == "StorageError" and isinstance(first.error, StorageError)
    last = work.handle(body, config, dequeue_count=5, max_attempts=5)
    assert last.dead_letter and last.reason.startswith("gave up after 5 attempt(s)")

    def io_error(*_: Any, **__: Any) -> Any:
        raise TimeoutError("read timed out")

    monkeypatch.setattr(work, "rorder_single", io_error)
    assert work.handle(body, config).retry

    def bug(*_: Any, **__: Any) -> Any:
        raise KeyError("surprise")

    monkeypatch.setattr(work, "rorder_single", bug)
    unexpected = work.handle(body, config)
    assert unexpected.dead_letter and unexpected.reason == "KeyError: 'surprise'"


class Killed(BaseException):
    """Stands for the process dying."""


def test_redelivery_after_a_commit_whose_message_was_not_deleted_is_a_no_op(table: str) -> None:
    config = config_for(table)
    body = plan_table(table).messages()[1].to_json()

    def die(_version: int) -> None:
        raise Killed

    with pytest.raises(Killed):
        work.handle(body, config, hooks={"after_commit": die})
    version = table_version(table)
    again = work.handle(body, config, dequeue_count=2)
    assert again.status == "skipped" and "already committed" in again.reason
    assert table_version(table) == version


def test_dead_letter_envelope_fits_a_queue_message_even_for_huge_messages() -> None:
    files = [[f"node_id_range=0/part-{i:05d}-{'x' * 36}.parquet", 1234] for i in range(5000)]
    message = {"path": "/t", "version": 3, "partition_value": "0", "files": files}
    outcome = work.Outcome("dead-letter", "stale", message=message, body=json.dumps(message))
    envelope = json.loads(outcome.dead_letter_body())
    assert len(outcome.dead_letter_body()) <= work.MAX_DEAD_LETTER_JSON
    assert envelope["files_omitted"] == 5000 and envelope["message"]["version"] == 3


# ----------------------------------------------------------------------------- manual reruns
def test_enqueue_builds_hand_written_or_planned_messages(table: str) -> None:
    hand = build_messages(table, partitions=[2, "1"], options={"sort_by": "utc_time"}, env={})
    assert [json.loads(b) for b in hand] == [
        {"path": table, "partition_value": "2", "sort_by": "utc_time"},
        {"path": table, "partition_value": "1", "sort_by": "utc_time"},
    ]
    planned = build_messages(table, all_partitions=True, env={})
    assert sorted(json.loads(b)["partition_value"] for b in planned) == ["0", "1", "2"]
    with pytest.raises(InvalidArgumentError, match="not both"):
        build_messages(table, partitions=["0"], all_partitions=True, env={})
    with pytest.raises(MessageError, match="target_file_size"):
        build_messages(table, partitions=["0"], options={"target_file_size": -1}, env={})
    env = {"DELTAEXTRAS_TABLES": json.dumps([{"uri": table, "name": "sensors", "unique_by": "utc_time"}])}
    sent: list[str] = []
    assert enqueue("sensors", partitions=["0"], send=sent.extend, env=env) == sent
    assert json.loads(sent[0]) == {"path": table, "partition_value": "0"}
    with pytest.raises(InvalidArgumentError, match="not in DELTAEXTRAS_TABLES"):
        build_messages("/elsewhere", partitions=["0"], env=env)
    # The worker fills the configured options into the hand-written message.
    outcome = work.handle(sent[0], AppConfig.from_env(env))
    assert outcome.status == "committed"
    assert json.loads(commits(table)[-1]["operationParameters"]["uniqueBy"]) == ["utc_time"]


# ----------------------------------------------------------------------------- carried deletes
@pytest.mark.parametrize("users", ["deletion_vector_delete", "copy_on_write_update", "delete_of_a_settled_run"])
def test_a_commit_that_carried_the_users_deletes_is_followed_by_a_pass_that_purges_them(
    tmp_path: Path, users: str
) -> None:
    """The users' DELETE (deletion vectors) or UPDATE (deltalake rewrites the file) lands between the
    worker's read and its commit: the commit carries it as deletion vectors on the outputs, which would make
    deltalake stop pruning every point query, and the UPDATE's rewritten file is one no plan named; or the
    DELETE marks rows of a tier run the plan did not take in (nothing to carry, a vector all the same). The
    worker runs the unit once more at the latest version: no live file carries a vector, every live file is
    a tier run, and the content is the users' writes applied exactly once."""
    from deltaextras.core.snapshot import TableSnapshot
    from deltaextras.ops.delete.delete import delete
    from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
    from deltaextras.ops.rorder.rewrite.layout import LAYOUT_TAG

    uri = str(tmp_path / "sensors")
    write_sensor_table(uri, partitions=1)
    enable_deletion_vectors(uri)
    config = config_for({"uri": uri, "layout": "tiered"})
    if users == "delete_of_a_settled_run":  # one settled run, then a fresh append: the plan takes only that
        assert work.handle(plan_table(uri, layout="tiered").messages()[0].to_json(), config).status == "committed"
        write_deltalake(uri, sensor_batch(3, 1), partition_by=[UNIT], mode="append")
    body = plan_table(uri, layout="tiered").messages()[0].to_json()
    before = scan(uri)
    fired: list[int] = []

    def users_write(_version: int) -> None:
        if fired:
            return
        fired.append(_version)
        if users == "deletion_vector_delete":
            delete(uri, "node_id = 3")
        elif users == "delete_of_a_settled_run":
            delete(uri, "node_id = 3 AND utc_time < '1970-01-01T00:10:00'")  # batches 0 and 1 only
        else:
            DeltaTable(uri).update(updates={"value": "value + 1000"}, predicate="node_id = 3")

    outcome = work.handle(body, config, hooks={"before_commit": users_write})
    assert outcome.status == "committed" and outcome.report is not None, outcome.reason
    carried = outcome.report.concurrent_deletes_carried, outcome.report.concurrent_changes
    assert carried == ((0, 1) if users == "delete_of_a_settled_run" else (1, carried[1])), outcome.report
    assert outcome.purge is not None and outcome.purge.startswith("committed"), outcome.purge
    assert json.loads(outcome.line())["purge"] == outcome.purge
    live = TableSnapshot.load(uri).files
    assert live and not [f.path for f in live if f.dv is not None], [(f.path, f.dv) for f in live]
    assert all(LAYOUT_TAG in f.tags for f in live), [(f.path, f.tags) for f in live]
    node = pa.compute.equal(before["node_id"], 3)
    if users == "delete_of_a_settled_run":
        old = pa.compute.less(before["utc_time"], pa.scalar(600_000_000, pa.timestamp("us")))
        expected = before.filter(pa.compute.invert(pa.compute.and_(node, old)))
    elif users == "deletion_vector_delete":
        expected = before.filter(pa.compute.invert(node))
    else:
        bumped = pa.compute.if_else(node, pa.compute.add(before["value"], 1000.0), before["value"])
        expected = before.set_column(before.schema.get_field_index("value"), "value", bumped)
    assert assert_engines_agree(uri) == table_checksum(expected)
