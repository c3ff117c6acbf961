"""``vacuum`` deletes many objects; a delete request that fails after it took effect (the tests' fault
proxy answers 503, drops or holds the answer after Azurite or moto deleted the object) must not leave the
vacuum half done: a failed batch is settled file by file, a delete without an answer is sent again, and
the vacuum ends with every expired file gone and the table whole. When every try fails, one line says
to run vacuum again."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from faultproxy import FaultProxy, Rule, most_at_once, through
from oracle import checksum
from services import emulator_root

import deltaextras
from deltaextras.core.storage import TableStorage
from deltaextras.errors import StorageError


@pytest.fixture(params=[pytest.param("azurite", marks=pytest.mark.azurite), pytest.param("s3", marks=pytest.mark.moto)])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    return emulator_root(request, "vacuum-faults")


def _table(uri: str, options: dict[str, str]) -> None:
    for batch in range(6):
        rows = pa.table({"node_id": [batch, batch + 10], "node_id_range": [0, 0], "v": [1.0, 2.0]})
        write_deltalake(uri, rows, partition_by=["node_id_range"], mode="append", storage_options=options)
    deltaextras.rorder(uri, storage_options=options, max_workers=1)  # six files replaced: expired at once


def _data_files(uri: str, options: dict[str, str]) -> set[str]:
    return {k for k, _ in TableStorage(uri, options).list("") if k.endswith(".parquet")}


# How a batch delete fails after the store took it, and the client's options that make it fail:
# "503": a server error, retry included; its files are then deleted one by one (on Azure one by one is a
#   batch of one, hence a bounded rule);
# "timeout": the store deletes the batch but answers after the client gave up (Azurite under thousands of
#   deletes).
_BATCH_FAULTS = [
    pytest.param("503", 2, 0.0, {"max_retries": "1", "retry_timeout": "5s", "timeout": "10s"}, id="503"),
    pytest.param("timeout", 1, 6.0, {"max_retries": "0", "retry_timeout": "5s", "timeout": "3s"}, id="late"),
]


@pytest.mark.parametrize(("action", "times", "delay", "client"), _BATCH_FAULTS)
def test_a_failed_batch_delete_still_leaves_no_expired_file(
    cloud: tuple[str, str, dict[str, str], int], action: str, times: int, delay: float, client: dict[str, str]
) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    _table(uri, direct)
    before = checksum(uri, direct)
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("POST", r"/vacuum-faults/?$", action, times=times, delay=delay))
        options = through(name, direct, proxy, **client)
        report = deltaextras.vacuum(uri, retention_hours=0, dry_run=False, storage_options=options)
        assert rule.fired == times, sorted({(s.method, s.path.rsplit("/", 1)[-1][:12]) for s in proxy.requests()})
    assert len(report.data_files) == 6
    assert len(_data_files(uri, direct)) == 1  # the rewrite's one output
    assert checksum(uri, direct) == before


def test_a_vacuum_that_keeps_failing_says_to_run_it_again(cloud: tuple[str, str, dict[str, str], int]) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    _table(uri, direct)
    with FaultProxy(port) as proxy:
        proxy.add(Rule("POST", r"/vacuum-faults/?$", "503", times=1000))
        proxy.add(Rule("DELETE", r"\.parquet$", "503", times=1000))
        options = through(name, direct, proxy, max_retries="0", retry_timeout="5s", timeout="10s")
        with pytest.raises(StorageError, match="run vacuum again") as caught:
            deltaextras.vacuum(uri, retention_hours=0, dry_run=False, storage_options=options)
    assert "\n" not in str(caught.value)
    report: Any = deltaextras.vacuum(uri, retention_hours=0, dry_run=False, storage_options=direct)
    assert len(_data_files(uri, direct)) == 1 and report is not None


def test_a_delete_without_an_answer_in_time_is_sent_again(cloud: tuple[str, str, dict[str, str], int]) -> None:
    """A delete is a POST (a batch, even of one key), which the client does not send again when its answer
    does not come in time ("error sending request"); ``delete_many`` settles a failed batch key by key and
    sends a key's delete again after such a failure."""
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    TableStorage(uri, direct).put("keep.txt", b"k")
    keys = [f"p=0/f{i}.parquet" for i in range(3)]
    for key in keys:
        TableStorage(uri, direct).put(key, b"x")
    with FaultProxy(port) as proxy:
        # the batch, then the first key's own delete, get no answer in time after the store took them
        rule = proxy.add(Rule("POST", r"/vacuum-faults/?$", "timeout", times=2, delay=4.0))
        storage = TableStorage(uri, through(name, direct, proxy, timeout="2s"))
        storage.delete_many(keys)
        assert rule.fired == 2
    assert sorted(k for k, _ in TableStorage(uri, direct).list("")) == ["keep.txt"]


def test_a_store_slow_to_answer_deletes_is_sent_one_batch_at_a_time(
    cloud: tuple[str, str, dict[str, str], int],
) -> None:
    """Deletes sent all at once to a store that answers slowly queue more work than the client's timeout
    covers (Azurite under a day's vacuum at 15,000 nodes stopped answering): after a round of slow batches
    ``delete_many`` sends one batch at a time, and every key is still deleted."""
    name, root, direct, port = cloud
    uri = f"{root}/t-{uuid.uuid4().hex[:8]}"
    storage = TableStorage(uri, direct)
    keys = [f"p=0/f{i:04d}.parquet" for i in range(400)]  # four full batches
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: storage.put(key, b"x"), keys))
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("POST", r"/vacuum-faults/?$", "slow", times=1000, delay=2.5))
        TableStorage(uri, through(name, direct, proxy)).delete_many(keys)
        posts = sorted(proxy.requests("POST", r"/vacuum-faults/?$"), key=lambda s: s.started)
    assert rule.fired == len(posts) >= 3
    assert most_at_once(posts) <= 2, [(round(s.started, 1), round(s.ended, 1)) for s in posts]
    assert most_at_once(posts[2:]) == 1, [(round(s.started, 1), round(s.ended, 1)) for s in posts]
    assert list(storage.list("p=0/")) == []
