"""The one transaction engine: its conflict rules winner kind by winner kind, with real commits written by
deltalake and by our own writers between our read and our commit, and ambiguous outcomes produced at the
storage boundary (the log entry written through a second ``TableStorage`` before our put)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from oracle import scan

from deltaextras.core.actions import Add, CommitInfo, Metadata, Protocol, Txn, encode_commit
from deltaextras.core.conflicts import IsolationLevel, ReadSet
from deltaextras.core.log import commit_key, read_commit
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.core.transaction import Transaction
from deltaextras.errors import (
    CommitConflictError,
    ConcurrentAppendError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
)
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.rorder.rorder import app_id_for, rorder_single


def _table(path: Path, **kwargs: Any) -> str:
    uri = str(path / "t")
    write_deltalake(uri, pa.table({"id": [1, 2, 3], "x": [1, 5, 9]}), **kwargs)
    return uri


def _snap(uri: str) -> TableSnapshot:
    return TableSnapshot.load(uri, cross_check=False)


def _other_commit(uri: str, version: int, *actions: Any) -> None:
    """Another writer's commit of ``version``, through its own storage client."""
    TableStorage(uri).put_if_absent(commit_key(version), encode_commit([CommitInfo(operation="WRITE"), *actions]))


def _blind_append(uri: str, rows: pa.Table) -> None:
    """A blind append as Spark writes it (``isBlindAppend: true``; deltalake 1.6 leaves the field out)."""
    name = f"part-blind-{len(list(Path(uri).glob('*.parquet')))}.parquet"
    pq.write_table(rows, Path(uri) / name)
    stats = {
        "numRecords": rows.num_rows,
        "minValues": {c: min(rows.column(c).to_pylist()) for c in rows.column_names},
        "maxValues": {c: max(rows.column(c).to_pylist()) for c in rows.column_names},
        "nullCount": {c: 0 for c in rows.column_names},
    }
    version = DeltaTable(uri).version() + 1
    add = Add(
        path=name,
        size=(Path(uri) / name).stat().st_size,
        modification_time=1,
        data_change=True,
        stats=json.dumps(stats),
    )
    info = CommitInfo(operation="WRITE", operation_parameters={"mode": "Append"}, is_blind_append=True)
    assert TableStorage(uri).put_if_absent(commit_key(version), encode_commit([info, add]))


def _props(uri: str) -> Metadata:
    snap = _snap(uri)
    return Metadata(**{**vars(snap.metadata), "configuration": {**snap.configuration, "k": "v"}})


# ------------------------------------------------------------------ the rules, against a plain transaction
def test_append_conflicts_by_isolation_level(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    _blind_append(uri, pa.table({"id": [4], "x": [5]}))  # a blind append at version 1
    for isolation, conflicts in [
        (IsolationLevel.SERIALIZABLE, True),
        (IsolationLevel.WRITE_SERIALIZABLE, False),
        (IsolationLevel.SNAPSHOT_ISOLATION, False),
    ]:
        txn = Transaction(snap, "TEST", isolation, ReadSet(whole_table=True))
        if conflicts:
            with pytest.raises(ConcurrentAppendError) as err:
                txn.catch_up()
            assert err.value.retryable
        else:
            assert txn.catch_up() == (2, None)


def test_non_blind_append_conflicts_under_write_serializable_when_the_predicate_may_match(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    dt = DeltaTable(uri)
    dt.update(updates={"x": "5"}, predicate="id = 1")  # not a blind append: removes and adds
    matching = ReadSet(might_match=lambda add: True)
    not_matching = ReadSet(might_match=lambda add: False)
    with pytest.raises(ConcurrentAppendError):
        Transaction(snap, "DELETE", IsolationLevel.WRITE_SERIALIZABLE, matching).catch_up()
    assert Transaction(snap, "DELETE", IsolationLevel.WRITE_SERIALIZABLE, not_matching).catch_up() == (2, None)
    # a dataChange: false rewrite only cares about its inputs
    assert Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, matching).catch_up() == (2, None)


def test_removed_read_file_conflicts(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    DeltaTable(uri).delete("id = 2")  # copy-on-write: removes the one file
    read = ReadSet(files={f.path for f in snap.files})
    with pytest.raises(ConcurrentDeleteReadError, match="removed input"):
        Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, read).catch_up()
    # a file we did not read may go
    assert Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, ReadSet(files={"x"})).catch_up()[0] == 2


def test_metadata_and_protocol_changes_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    DeltaTable(uri).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})
    with pytest.raises(MetadataChangedError):
        Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION).catch_up()
    snap = _snap(uri)
    enable_deletion_vectors(uri)  # protocol and metadata: a protocol we can write under, so the metadata decides
    with pytest.raises(MetadataChangedError):
        Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION).catch_up()
    with pytest.raises(ProtocolChangedError):  # ... unless our own commit changes the protocol too
        Transaction(snap, "SET TBLPROPERTIES", IsolationLevel.SERIALIZABLE, ReadSet(writes_protocol=True)).catch_up()


def test_protocol_change_conflicts_only_when_we_cannot_write_under_it(tmp_path: Path) -> None:
    """As Spark's checker: a new protocol alone is no conflict for a writer that supports it."""
    uri = _table(tmp_path)
    snap = _snap(uri)
    _other_commit(uri, 1, Protocol(1, 4))  # writer 4 (change data feed, generated columns): we write those
    v, done = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION).catch_up()
    assert (v, done) == (2, None)
    _other_commit(uri, 2, Protocol(3, 7, ["deletionVectors"], ["deletionVectors", "rowTracking"]))
    with pytest.raises(ProtocolChangedError):  # row tracking: our rewrite cannot keep row ids
        Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION).catch_up()


def test_txn_of_the_same_app(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    _other_commit(uri, 1, Txn("app", 0))  # the same work, planned at our version: already done
    v, done = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, ReadSet(app_id="app")).catch_up()
    assert done is not None and done.done and done.version is None and v == 1
    read = ReadSet(app_id="app", app_version=5)  # we depend on it at a newer version: a second planner
    with pytest.raises(ConcurrentTransactionError):
        Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, read).catch_up()


# ------------------------------------------------------------------ commit identity: ambiguous puts
def test_entry_that_landed_although_the_put_said_it_exists_is_ours(tmp_path: Path) -> None:
    """Our put landed, the client's retry answered "already exists": version 1 is read back as ours."""
    uri = _table(tmp_path)
    snap = _snap(uri)
    data = tmp_path / "t" / "extra.parquet"
    data.write_bytes(b"data")
    txn = Transaction(snap, "TEST", IsolationLevel.SERIALIZABLE)
    txn.wrote("extra.parquet")

    def landed(version: int) -> None:  # the entry of the attempt appears before our put, as after a lost response
        (actions,) = txn.txn_ids.values()
        TableStorage(uri).put_if_absent(commit_key(version), encode_commit(actions))

    txn.before_put = landed
    result = txn.commit(lambda _v: [_props(uri)])
    assert result.version == 1 and txn.attempts == 1
    assert txn.abort() is False and data.exists()  # committed: nothing is deleted
    assert DeltaTable(uri).metadata().configuration["k"] == "v"
    assert len(list((tmp_path / "t" / "_delta_log").glob("*.json"))) == 2  # no second entry


def test_someone_elses_entry_moves_on_and_written_files_may_then_go(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    snap = _snap(uri)
    (tmp_path / "t" / "ours.parquet").write_bytes(b"x")
    txn = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, ReadSet(app_id="a", app_version=0))
    txn.wrote("ours.parquet")
    calls: list[int] = []

    def other_first(version: int) -> None:
        calls.append(version)
        if version == 1:
            _other_commit(uri, 1, Add(path="theirs.parquet", size=1, data_change=True))

    txn.before_put = other_first
    result = txn.commit(lambda _v: [Txn("a", 0)])
    assert result.version == 2 and calls == [1, 2]
    txn2 = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, ReadSet(app_id="a", app_version=0))
    txn2.wrote("ours.parquet")
    _, done = txn2.catch_up()
    assert done is not None and done.done  # version 2 holds the same txn: nothing to commit
    assert txn2.can_discard and txn2.abort() and not (tmp_path / "t" / "ours.parquet").exists()


def test_commit_info_identity(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    txn = Transaction(_snap(uri), "TEST", IsolationLevel.WRITE_SERIALIZABLE)
    assert txn.commit(lambda _v: [_props(uri)]).version == 1
    info = json.loads((tmp_path / "t" / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert info["txnId"] in txn.txn_ids and info["readVersion"] == 0
    assert info["isolationLevel"] == "WriteSerializable" and info["operation"] == "TEST"


# ------------------------------------------------------------------ the writers, end to end
@pytest.mark.parametrize("mode", ["deletion_vectors", "copy_on_write"])
def test_delete_racing_an_update_that_makes_a_row_match(tmp_path: Path, mode: str) -> None:
    """A=(id 1, x=1), B=(id 2, x=5); ``delete x = 5`` while ``UPDATE x=5 WHERE id=1`` commits first: the
    delete must not leave {id 1, x 5} (Spark raises ConcurrentAppendException; we re-plan onto the
    updated file and delete that row too)."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": [1], "x": [1]}))
    write_deltalake(uri, pa.table({"id": [2], "x": [5]}), mode="append")
    if mode == "deletion_vectors":
        enable_deletion_vectors(uri)
    fired: list[int] = []

    def update_first(version: int) -> None:
        if not fired:
            fired.append(version)
            DeltaTable(uri).update(updates={"x": "5"}, predicate="id = 1")

    try:
        report = delete(uri, "x = 5", mode=mode, hooks={"before_commit": update_first})
    except ConcurrentAppendError:
        report = None
    rows = scan(uri).to_pylist()
    assert {"id": 1, "x": 5} not in rows
    if report is not None:
        assert rows == [] and report.rows_deleted == 2 and report.conflicts_resolved >= 1


def test_delete_ignores_a_blind_append_of_matching_rows(tmp_path: Path) -> None:
    """WriteSerializable: a blind append may be ordered after the delete, so its rows stay."""
    uri = _table(tmp_path)
    enable_deletion_vectors(uri)

    def append_first(version: int) -> None:
        if version == 2:
            _blind_append(uri, pa.table({"id": [7], "x": [5]}))

    report = delete(uri, "x = 5", hooks={"before_commit": append_first})
    assert report.commit_version == 3 and report.rows_deleted == 1 and report.files_replanned == 0
    assert sorted(r["id"] for r in scan(uri).to_pylist()) == [1, 3, 7]


def test_delete_reads_an_append_not_marked_blind(tmp_path: Path) -> None:
    """deltalake's appends carry no ``isBlindAppend``: as Delta's rules say, they count as changed data that
    the delete should have read. Its matching rows are deleted too (the append is ordered first)."""
    uri = _table(tmp_path)
    enable_deletion_vectors(uri)

    def append_first(version: int) -> None:
        if version == 2:
            write_deltalake(uri, pa.table({"id": [7, 8], "x": [5, 6]}), mode="append")

    report = delete(uri, "x = 5", hooks={"before_commit": append_first})
    assert report.commit_version == 3 and report.rows_deleted == 2 and report.files_replanned == 1
    assert sorted(r["id"] for r in scan(uri).to_pylist()) == [1, 3, 8]


def test_delete_restarts_after_a_metadata_change(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    enable_deletion_vectors(uri)

    def alter_first(version: int) -> None:
        if version == 2:
            DeltaTable(uri).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})

    report = delete(uri, "x = 5", hooks={"before_commit": alter_first})
    assert report.restarts == 1 and report.commit_version == 3
    assert sorted(r["id"] for r in scan(uri).to_pylist()) == [1, 3]


def test_rorder_commits_after_a_concurrent_append_and_a_redelivery_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    for b in range(2):
        write_deltalake(
            uri,
            pa.table({"node_id": [2, 1], "node_id_range": [0, 0], "b": [b, b]}),
            partition_by=["node_id_range"],
            mode="append",
        )
    message = {"path": uri, "partition_value": 0, "version": 1}

    def append_first(version: int) -> None:
        if version == 2:
            write_deltalake(uri, pa.table({"node_id": [9], "node_id_range": [0], "b": [9]}), mode="append")

    report = rorder_single(message, hooks={"before_commit": append_first})
    assert report.status == "committed" and report.commit_version == 3
    assert sorted(r["node_id"] for r in scan(uri).to_pylist()) == [1, 1, 2, 2, 9]
    again = rorder_single(message)
    assert again.status == "skipped" and "already committed" in again.reason
    assert DeltaTable(uri).version() == 3
    txns = [a for a in read_commit(TableStorage(uri), 3) or [] if isinstance(a, Txn)]
    assert [(t.app_id, t.version) for t in txns] == [(app_id_for("node_id_range", "0"), 1)]


def test_enable_deletion_vectors_looks_again_after_a_concurrent_metadata_change(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    write_deltalake(uri, pa.table({"id": [4], "x": [4]}), mode="append")
    snap = _snap(uri)
    DeltaTable(uri).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})
    # the upgrade planned at version 1 would conflict; the public call re-reads and commits
    with pytest.raises(CommitConflictError):
        Transaction(snap, "SET TBLPROPERTIES", IsolationLevel.SERIALIZABLE).catch_up()
    assert enable_deletion_vectors(uri) == 3
    config = DeltaTable(uri).metadata().configuration
    assert (
        config["delta.enableDeletionVectors"] == "true" and config["delta.logRetentionDuration"] == "interval 30 days"
    )
