"""Storage faults at the network level, after the write took effect, for every PUT a commit depends on.

Our writer reaches Azurite or moto S3 through :mod:`faultproxy` (its storage options point at the proxy);
the table is set up, and judged afterwards, directly on the emulator. For each operation (rorder of one
partition, delete with deletion vectors, delete copy-on-write) and each PUT it makes -- the log entry,
a data file, a deletion-vector file, the checkpoint -- the proxy lets the first matching request land
and then (a) answers 503, (b) drops the connection, or (c) holds the answer past the client timeout.
object_store retries (a) and (b); the retry of a conditional log-entry PUT then meets "already exists":
the ambiguous commit.

Promises checked in every case:

* the fault fired;
* the call reports committed, or raises a :class:`~deltaextras.DeltaExtrasError` with ``retryable=True``;
* delta-rs reads exactly the expected rows (after a reported commit: the operation's result; after an
  error: the rows before or after, nothing else), and every file the log references exists;
* the same call run again converges: committed, or already committed / nothing to do; then the content
  is exactly the operation's result (also through Sail on Azurite), every referenced file exists, and
  the log holds exactly one commit of the operation.

Two variants of the ambiguous log-entry put: after a lost race (another writer took our first version,
the put of the next one lands and answers 503: the commit is still ours, once), and ``rorder`` over two
partitions in a process pool (the workers reach the proxy by the storage options they are handed).
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from faultproxy import FaultProxy, Rule, through
from reliability_support import log_entries, sail_content
from services import emulator_root
from txn_support import (
    after_op,
    append,
    assert_files_exist,
    content,
    expected,
    make_table,
    our_commits,
    run_op,
    sensor_rows,
)

import deltaextras

CLIENT_TIMEOUT = "2s"
HOLD_SECONDS = 3.0  # > CLIENT_TIMEOUT: the held answer arrives after the client gave up

TARGETS = {
    "log": r"/_delta_log/\d{20}\.json$",
    "data": r"/node_id_range(=|%3D)\d+/[^/]+\.parquet$",
    "dv": r"/deletion_vector_[^/]+\.bin$",
    "checkpoint": r"/_delta_log/\d{20}\.checkpoint\.parquet$",
}
# which PUTs each operation makes (a deletion-vector delete writes no data file; copy-on-write no vector)
CASES = [
    ("rorder", "log"),
    ("delete_dv", "log"),
    ("delete_cow", "log"),
    ("rorder", "data"),
    ("delete_cow", "data"),
    ("delete_dv", "dv"),
    ("rorder", "checkpoint"),
    ("delete_dv", "checkpoint"),
    ("delete_cow", "checkpoint"),
]
FAULTS = ["503", "drop", "timeout"]


@pytest.fixture(
    params=[
        pytest.param("azurite", marks=[pytest.mark.azurite, pytest.mark.sail]),  # Sail reads the Azurite tables
        pytest.param("s3", marks=pytest.mark.moto),
    ]
)
def cloud(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str], int]:
    """(backend name, table root, direct storage options, emulator port)."""
    return emulator_root(request, "faults")


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(("op", "target"), CASES, ids=[f"{o}-{t}" for o, t in CASES])
def test_put_fault_after_write(
    op: str, target: str, fault: str, cloud: tuple[str, str, dict[str, str], int], request: pytest.FixtureRequest
) -> None:
    name, root, direct, port = cloud
    uri = f"{root}/{op}-{target}-{fault}-{uuid.uuid4().hex[:8]}"
    rows = make_table(
        uri,
        direct,
        deletion_vectors=op == "delete_dv",
        checkpoint_interval=1 if target == "checkpoint" else None,
    )
    before, after = expected(rows), expected(after_op(op, rows))
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("PUT", TARGETS[target], fault, delay=HOLD_SECONDS))
        options = through(name, direct, proxy, timeout=CLIENT_TIMEOUT)
        first = run_op(op, uri, options)
        assert rule.fired == 1, f"the {fault} fault on the {target} PUT never fired: {proxy.requests('PUT')}"
        if first.kind == "raised":
            assert first.error is not None and first.error.retryable, f"not a retryable error: {first.detail}"
            assert content(uri, direct) in (before, after), "after an error the table holds neither state"
        else:
            assert first.kind == "committed", f"neither committed nor a retryable error: {first.detail}"
            assert content(uri, direct) == after, "reported committed, but the content is not the result"
        assert_files_exist(uri, direct)
        assert len(our_commits(uri, direct, op)) <= 1, "the operation committed twice"

        proxy.clear()
        second = run_op(op, uri, options)
        assert second.kind in ("committed", "nothing"), f"the rerun did not converge: {second.detail}"
        if first.kind == "committed":
            assert second.kind == "nothing", f"the rerun committed again after a commit: {second.detail}"
    assert content(uri, direct) == after
    assert_files_exist(uri, direct)
    assert len(our_commits(uri, direct, op)) == 1, "the log must hold exactly one commit of the operation"
    if name == "azurite" and target == "log":
        assert sail_content(request.getfixturevalue("spark_cloud"), uri) == after


@pytest.mark.parametrize("op", ["rorder", "delete_dv", "delete_cow"])
def test_log_put_fault_after_a_lost_race(op: str, cloud: tuple[str, str, dict[str, str], int]) -> None:
    """Another writer takes our first version; the put of the next one lands and answers 503: the commit
    must still be recognised as ours (not as a second winner), once."""
    name, root, direct, port = cloud
    uri = f"{root}/{op}-race-{uuid.uuid4().hex[:8]}"
    rows = make_table(uri, direct, deletion_vectors=op == "delete_dv")
    other = sensor_rows(5000, 10, part=1, nodes=(7, 8))  # no row a delete of node 2 could have read
    attempts: list[int] = []
    with FaultProxy(port) as proxy:
        rules: list[Rule] = []

        def before_commit(version: int) -> None:
            attempts.append(version)
            if len(attempts) == 1:
                append(uri, direct, other)  # wins `version`
            elif len(attempts) == 2:
                rules.append(proxy.add(Rule("PUT", rf"/_delta_log/{version:020d}\.json$", "503")))

        options = through(name, direct, proxy, timeout=CLIENT_TIMEOUT)
        first = run_op(op, uri, options, hooks={"before_commit": before_commit})
        assert len(attempts) >= 2 and rules and rules[0].fired == 1, f"the fault never fired: {attempts}"
        with_other = pa.concat_tables([rows, other])
        before, after = expected(with_other), expected(after_op(op, with_other))
        if first.kind == "raised":
            assert first.error is not None and first.error.retryable, f"not a retryable error: {first.detail}"
            assert content(uri, direct) in (before, after)
        else:
            assert first.kind == "committed", f"neither committed nor a retryable error: {first.detail}"
            assert first.version == attempts[1], f"committed at {first.version}, the put went to {attempts[1]}"
            assert content(uri, direct) == after
        assert_files_exist(uri, direct)
        proxy.clear()
        second = run_op(op, uri, options)
        assert second.kind in ("committed", "nothing"), f"the rerun did not converge: {second.detail}"
    assert content(uri, direct) == after
    assert_files_exist(uri, direct)
    assert len(our_commits(uri, direct, op)) == 1


@pytest.mark.parametrize("fault", ["503"])
def test_rorder_pool_with_a_log_put_fault(fault: str, cloud: tuple[str, str, dict[str, str], int]) -> None:
    """``rorder`` over two partitions in a process pool: the first log-entry put (whichever worker makes
    it) lands and fails; every partition ends committed, or failed with a retryable error, and a second
    ``rorder`` converges with one rewrite commit per partition."""
    name, root, direct, port = cloud
    uri = f"{root}/pool-{fault}-{uuid.uuid4().hex[:8]}"
    rows = make_table(uri, direct, other_partition=True)
    want = expected(rows)
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("PUT", TARGETS["log"], fault, delay=HOLD_SECONDS))
        options = through(name, direct, proxy, timeout=CLIENT_TIMEOUT)
        report = deltaextras.rorder(uri, storage_options=options, max_workers=2, raise_on_failure=False)
        assert rule.fired == 1, f"the fault never fired: {proxy.requests('PUT')}"
        for part in report:
            assert part.status == "committed" or (part.status == "failed" and part.retryable), (
                f"{part.partition}: {part.status} ({part.error_type}: {part.reason})"
            )
        assert content(uri, direct) == want
        assert_files_exist(uri, direct)
        proxy.clear()
        again = deltaextras.rorder(uri, storage_options=options, max_workers=2, raise_on_failure=False)
        assert all(p.status in ("committed", "skipped") for p in again), [(p.status, p.reason) for p in again]
    assert content(uri, direct) == want
    assert_files_exist(uri, direct)
    assert len(our_commits(uri, direct, "rorder")) == 2, "one rewrite commit per partition"


@pytest.mark.parametrize("fault", FAULTS)
def test_enable_deletion_vectors_with_a_log_put_fault(fault: str, cloud: tuple[str, str, dict[str, str], int]) -> None:
    """The protocol upgrade commits through the same path: an ambiguous put still ends enabled, once."""
    name, root, direct, port = cloud
    uri = f"{root}/enable-{fault}-{uuid.uuid4().hex[:8]}"
    rows = make_table(uri, direct)
    with FaultProxy(port) as proxy:
        rule = proxy.add(Rule("PUT", TARGETS["log"], fault, delay=HOLD_SECONDS))
        options = through(name, direct, proxy, timeout=CLIENT_TIMEOUT)
        try:
            first = deltaextras.enable_deletion_vectors(uri, storage_options=options)
        except deltaextras.DeltaExtrasError as exc:
            assert exc.retryable, f"not a retryable error: {type(exc).__name__}: {exc}"
            first = None
        assert rule.fired == 1, f"the fault never fired: {proxy.requests('PUT')}"
        proxy.clear()
        second = deltaextras.enable_deletion_vectors(uri, storage_options=options)
        assert first is None or second is None, f"enabled twice: versions {first} and {second}"
    table = DeltaTable(uri, storage_options=direct)
    assert table.metadata().configuration.get("delta.enableDeletionVectors") == "true"
    assert "deletionVectors" in (table.protocol().writer_features or [])
    assert content(uri, direct) == expected(rows)
    assert_files_exist(uri, direct)
    upgrades = [
        v
        for v, actions in log_entries(uri, direct).items()
        if any("metaData" in a and "delta.enableDeletionVectors" in str(a) for a in actions)
    ]
    assert len(upgrades) == 1, f"the upgrade is in the log {len(upgrades)} times: versions {upgrades}"
