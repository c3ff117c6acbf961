"""Group commit under faults on Azurite and moto S3, injected at the network (:mod:`faultproxy`) or by
killing a worker process: a publish answered 503 after it landed, a worker (the would-be committer)
killed between staging and publishing, a staged commit delivered again after it was published. In each
case every unit is committed exactly once, the content is unchanged through delta-rs, Sail (reading the
emulator) and Spark with Delta on the JVM (reading moto S3 through S3A; on Azurite, which none of its
connectors reach here, an exact local copy of the table), every file the log references exists and no
file is left that no log entry names."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from delta_spark import read_arrow, s3a_uri
from deltalake import DeltaTable, write_deltalake
from faultproxy import FaultProxy, Rule, through
from oracle import normalized, rows_checksum
from reliability_support import log_entries
from services import emulator_root
from txn_support import assert_files_exist

from deltaextras.core.committer import Committer
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.staged import STAGED_DIR, turn_key
from deltaextras.core.storage import TableStorage
from deltaextras.ops.maintenance.vacuum import orphans
from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

UNITS = 24
LOG_PUT = r"/_delta_log/\d{20}\.json$"


@pytest.fixture(
    params=[
        pytest.param("azurite", marks=[pytest.mark.azurite, pytest.mark.sail, pytest.mark.delta_spark]),
        pytest.param("s3", marks=[pytest.mark.moto, pytest.mark.sail, pytest.mark.delta_spark]),
    ]
)
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    return emulator_root(request, "groupfaults")


def _table(uri: str, options: dict[str, str], units: int) -> None:
    for b in range(2):
        k = [u * 10 + (3 - j) for u in range(units) for j in range(3)]
        part = [u for u in range(units) for _ in range(3)]
        write_deltalake(
            uri,
            pa.table({"k": k, "k_range": part, "b": [b] * len(k)}),
            partition_by=["k_range"],
            mode="append",
            storage_options=options,
        )


COLUMNS = ["k", "k_range", "b"]


def content(uri: str, options: dict[str, str]) -> tuple[int, str]:
    return rows_checksum(normalized(pa.table(DeltaTable(uri, storage_options=options).scan()), COLUMNS))


def sail_content(spark: Any, uri: str) -> tuple[int, str]:
    return rows_checksum(normalized(spark.read.format("delta").load(uri).toArrow(), COLUMNS))


def _txn_counts(uri: str, options: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for actions in log_entries(uri, options).values():
        for a in actions:
            if "txn" in a:
                counts[a["txn"]["appId"]] = counts.get(a["txn"]["appId"], 0) + 1
    return counts


def _together(messages: list[dict[str, Any]], options: dict[str, str]) -> list[Any]:
    barrier = threading.Barrier(len(messages))
    results: list[Any] = [None] * len(messages)

    def run(i: int, m: dict[str, Any]) -> None:
        try:
            results[i] = rorder_single(
                {**m, "commit": "group"}, storage_options=options, hooks={"after_rewrite": lambda _o: barrier.wait()}
            )
        except Exception as exc:  # inspected by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(messages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _judge(uri: str, direct: dict[str, str], before: tuple[int, str], units: int, name: str, request: Any) -> None:
    assert content(uri, direct) == before
    assert sorted(_txn_counts(uri, direct).values()) == [1] * units, "a unit committed twice, or not at all"
    assert_files_exist(uri, direct)
    assert orphans(uri, direct) == [], "files that no log entry names"
    storage = TableStorage(uri, direct)
    assert [k for k, _ in storage.list(STAGED_DIR)] == [], "staged commits left"
    assert sail_content(request.getfixturevalue("spark_cloud"), uri) == before
    assert spark_content(request.getfixturevalue("delta_spark"), name, uri, direct, request) == before


def spark_content(spark: Any, name: str, uri: str, direct: dict[str, str], request: Any) -> tuple[int, str]:
    """The content as Spark with Delta on the JVM reads it: on moto S3 the table itself, through S3A.
    Azurite is out of reach of Spark's connectors here (``abfs`` needs the ADLS Gen2 endpoint Azurite
    lacks, ``wasb`` the emulator's fixed ports), so there Spark reads an exact copy of every object of
    the table (log, data, checkpoints) on local disk."""
    if name == "s3":
        location = s3a_uri(spark, uri, direct)
    else:
        local = request.getfixturevalue("tmp_path") / "spark-copy"
        storage = TableStorage(uri, direct)
        for key, _size in storage.list(""):
            target = local / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(storage.read(key))
        location = str(local)
    return rows_checksum(normalized(read_arrow(spark, location), COLUMNS))


def test_a_publish_answered_503_after_it_landed(
    cloud: tuple[str, str, dict[str, str], int], request: pytest.FixtureRequest
) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/publish503-{uuid.uuid4().hex[:8]}"
    _table(uri, direct, UNITS)
    before, v0 = content(uri, direct), DeltaTable(uri, storage_options=direct).version()
    with FaultProxy(port, max_connections=512) as proxy:
        rule = proxy.add(Rule("PUT", LOG_PUT, "503"))
        options = through(name, direct, proxy, timeout="5s")
        results = _together(plan_messages(uri, storage_options=direct), options)
        assert rule.fired == 1, proxy.requests("PUT")
    assert [getattr(r, "status", r) for r in results] == ["committed"] * UNITS
    assert DeltaTable(uri, storage_options=direct).version() - v0 <= UNITS // 8
    _judge(uri, direct, before, UNITS, name, request)


_WORKER = """
import json, sys
from deltaextras.ops.rorder.rorder import rorder_single
msg, options = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rorder_single(msg, storage_options=options)
"""


def test_worker_killed_between_staging_and_publishing_then_redelivered(
    cloud: tuple[str, str, dict[str, str], int], request: pytest.FixtureRequest
) -> None:
    """The worker stages its commit and is killed before any committer publishes it (the turn of the
    next version is held, as by a committer that died); the message is delivered again: the unit is
    committed once, from the dead worker's files, and the second delivery's files are removed. Then
    the published staged commit is delivered once more: it is recognised, not published again."""
    name, root, direct, _port = cloud
    uri = f"{root}/killed-{uuid.uuid4().hex[:8]}"
    _table(uri, direct, 2)
    before = content(uri, direct)
    storage = TableStorage(uri, direct)
    v0 = DeltaTable(uri, storage_options=direct).version()
    assert storage.put_if_absent(turn_key(v0 + 1), b"held")
    message = {**plan_messages(uri, storage_options=direct)[0], "commit": "group"}
    child = subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(message), json.dumps(direct)])
    try:
        deadline = time.monotonic() + 120
        while not list(storage.list(STAGED_DIR)):
            assert child.poll() is None and time.monotonic() < deadline, "the worker never staged its commit"
            time.sleep(0.1)
        ((staged_key, _),) = list(storage.list(STAGED_DIR))
        staged = storage.read(staged_key)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert DeltaTable(uri, storage_options=direct).version() == v0, "published before the kill"
    storage.delete(turn_key(v0 + 1))  # the turn's holder is gone

    again = rorder_single(message, storage_options=direct)  # the queue delivers the message again
    assert again.status == "skipped" and "already committed" in again.reason
    assert DeltaTable(uri, storage_options=direct).version() == v0 + 1
    storage.put(staged_key, staged)  # the published staged commit appears once more
    assert Committer(TableSnapshot.load(uri, direct, cross_check=False)).run(v0 + 2) is None
    assert DeltaTable(uri, storage_options=direct).version() == v0 + 1
    assert _txn_counts(uri, direct) == {message_app_id(message): 1}
    rest = rorder_single({**plan_messages(uri, storage_options=direct)[0], "commit": "group"}, storage_options=direct)
    assert rest.status == "committed"
    _judge(uri, direct, before, 2, name, request)


def message_app_id(message: dict[str, Any]) -> str:
    from deltaextras.ops.rorder.rorder import app_id_for

    return app_id_for(message["partition_name"], message["partition_value"])
