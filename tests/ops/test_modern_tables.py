"""Row tracking, in-commit timestamps and type widening on local tables (the Spark-made tables are in
``test_spark_modern_tables.py``): every surviving row keeps its row id and commit version through rorder,
de-duplication and both kinds of delete; new files get ids above the high-water mark the same commit
moves; a retry after a lost race stamps again against the winner; files of an older column type are
read as the current type; inspect names each feature and its handling.

The row ids are computed here independently of the library: from each live file's ``baseRowId`` and
``defaultRowCommitVersion``, the row's position and the materialized columns, deletion vectors applied.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from deltaextras.core import row_tracking as rt
from deltaextras.core.actions import Add, CommitInfo, Protocol, encode_commit, now_ms
from deltaextras.core.conflicts import IsolationLevel, ReadSet
from deltaextras.core.dv import keep_mask, read_deletion_vectors
from deltaextras.core.log import commit_key, read_commit
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.core.transaction import Transaction
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.features import feature_uses
from deltaextras.ops.maintenance.vacuum import vacuum
from deltaextras.ops.rorder.rorder import rorder

FEATURES = ["deletionVectors", "domainMetadata", "rowTracking", "inCommitTimestamp"]


def _commit(uri: str, operation: str, build: Any) -> int:
    snap = TableSnapshot.load(uri)
    txn = Transaction(snap, operation, IsolationLevel.SERIALIZABLE, ReadSet(writes_protocol=True))
    result = txn.commit(lambda v: build(snap, v))
    assert result.version is not None
    return result.version


def _tracked_table(tmp_path: Path, *batches: dict[str, list[Any]]) -> str:
    """A table whose files all carry row ids (as after Spark's backfill), with in-commit timestamps."""
    uri = str(tmp_path / "t")
    for rows in batches:
        write_deltalake(uri, pa.table(rows), mode="append")

    def backfill(snap: TableSnapshot, version: int) -> list[Any]:
        cfg = {
            **snap.configuration,
            "delta.enableDeletionVectors": "true",
            "delta.enableRowTracking": "true",
            rt.ROW_ID_KEY: "_row-id-col",
            rt.COMMIT_VERSION_KEY: "_row-commit-version-col",
            "delta.enableInCommitTimestamps": "true",
        }
        adds, mark = [], rt.NO_MARK
        for f in sorted(snap.files, key=lambda f: f.path):
            adds.append(
                dataclasses.replace(f.add, base_row_id=mark + 1, default_row_commit_version=0, data_change=False)
            )
            mark += f.add.stats_dict()["numRecords"]
        protocol = Protocol(3, 7, ["deletionVectors"], FEATURES)
        return [protocol, dataclasses.replace(snap.metadata, configuration=cfg), *adds, rt.mark_action(mark)]

    _commit(uri, "ROW TRACKING BACKFILL", backfill)
    return uri


def row_ids(uri: str) -> set[tuple[Any, ...]]:
    """Every live row with its row id and row commit version, computed from the log and the files."""
    snap = TableSnapshot.load(uri)
    cols = rt.columns(snap.protocol, snap.metadata)
    assert cols is not None
    out: list[tuple[Any, ...]] = []
    for f in snap.files:
        table = pq.read_table(Path(uri) / f.key)
        n = table.num_rows
        ids = np.arange(n) + f.add.base_row_id
        versions = np.full(n, f.add.default_row_commit_version)
        if cols.row_id in table.column_names:
            stored = table.column(cols.row_id).to_pylist()
            ids = np.array([s if s is not None else d for s, d in zip(stored, ids, strict=True)])
            stored = table.column(cols.commit_version).to_pylist()
            versions = np.array([s if s is not None else d for s, d in zip(stored, versions, strict=True)])
        keep = keep_mask(read_deletion_vectors(snap.storage, [f.dv])[0], n)
        names = [c for c in table.column_names if c not in cols.names]
        data = list(zip(*(table.column(c).to_pylist() for c in names), strict=True))
        out += [(*data[i], int(ids[i]), int(versions[i])) for i in range(n) if keep[i]]
    assert len({r[-2] for r in out}) == len(out), "row ids are not unique"
    return set(out)


def _actions(uri: str, version: int) -> list[Any]:
    actions = read_commit(TableStorage(uri), version)
    assert actions is not None
    return actions


def _check_new_files(uri: str, version: int, previous_mark: int) -> int:
    """The commit's new files got ids above the mark, its version, and the mark moved past them."""
    actions = _actions(uri, version)
    info = actions[0]
    assert isinstance(info, CommitInfo) and info.in_commit_timestamp == info.timestamp
    assert info.extra["tags"][rt.PRESERVED_TAG] == "true"
    before = _actions(uri, version - 1)[0]
    assert isinstance(before, CommitInfo) and info.in_commit_timestamp > (before.in_commit_timestamp or 0)
    mark = previous_mark
    for a in actions:
        if isinstance(a, Add):
            assert a.base_row_id == mark + 1 and a.default_row_commit_version == version
            mark += a.stats_dict()["numRecords"]
    assert rt.winner_mark(actions) == mark
    return mark


def test_rorder_and_deletes_keep_every_row_id(tmp_path: Path) -> None:
    uri = _tracked_table(tmp_path, {"k": [3, 1, 2, 1], "v": ["a", "b", "c", "d"]}, {"k": [2, 3], "v": ["e", "f"]})
    before = row_ids(uri)
    mark = rt.high_water_mark(TableSnapshot.load(uri).domains)
    assert mark == 5
    (report,) = rorder(uri, by="k", max_workers=1)
    assert report.status == "committed" and row_ids(uri) == before
    mark = _check_new_files(uri, report.commit_version, mark)
    assert mark == 11

    dv = delete(uri, "k = 3", mode="deletion_vectors")
    assert dv.deletion_vectors_added == 1
    before = {r for r in before if r[0] != 3}
    assert row_ids(uri) == before
    (again,) = rorder(uri, by="k", max_workers=1, max_deleted_rows_ratio=0.0)  # the stored ids, read again
    assert again.status == "committed" and row_ids(uri) == before
    mark = _check_new_files(uri, again.commit_version, mark)
    cow = delete(uri, "v = 'c'", mode="copy_on_write")
    assert cow.files_rewritten == 1
    before = {r for r in before if r[1] != "c"}
    assert row_ids(uri) == before
    _check_new_files(uri, cow.commit_version, mark)


def test_de_duplication_keeps_the_ids_of_the_rows_it_keeps(tmp_path: Path) -> None:
    uri = _tracked_table(tmp_path, {"k": [1, 2, 1], "v": ["a", "b", "a"]}, {"k": [2, 1], "v": ["b", "c"]})
    before = row_ids(uri)
    (report,) = rorder(uri, by="k", unique_by=["v"], max_workers=1)
    assert report.status == "committed"
    after = row_ids(uri)
    assert sorted(r[:2] for r in after) == [(1, "a"), (1, "c"), (2, "b")]
    assert after <= before  # each survivor is one of the rows that were there, with its id


def test_a_retry_stamps_again_against_the_winner(tmp_path: Path) -> None:
    """A writer commits (an append with its own ids, an in-commit timestamp a day ahead of our clock) at
    the version our commit first tries: ours lands next, above the winner's mark and timestamp."""
    uri = _tracked_table(tmp_path, {"k": [1, 2], "v": ["a", "b"]})
    snap = TableSnapshot.load(uri)
    first = snap.version + 1
    ahead = now_ms() + 86_400_000
    theirs = Add(path="theirs.parquet", stats='{"numRecords":10}', base_row_id=2, default_row_commit_version=first)
    winner = [CommitInfo(in_commit_timestamp=ahead, timestamp=ahead, operation="WRITE", is_blind_append=True)]
    winner += [theirs, rt.mark_action(11)]

    def race(version: int) -> None:
        if version == first:
            TableStorage(uri).put_if_absent(commit_key(version), encode_commit(winner))

    ours = Add(path="ours.parquet", stats='{"numRecords":3}', data_change=False)
    txn = Transaction(snap, "OPTIMIZE", IsolationLevel.SNAPSHOT_ISOLATION, before_put=race)
    result = txn.commit(lambda v: [ours])
    assert result.version == first + 1 and ours.base_row_id is None  # the builder's action is left as it was
    info, added, domain = _actions(uri, first + 1)
    assert isinstance(info, CommitInfo) and info.in_commit_timestamp == ahead + 1
    assert isinstance(added, Add) and (added.base_row_id, added.default_row_commit_version) == (12, first + 1)
    assert rt.winner_mark([domain]) == 14


def test_files_of_an_older_type_are_read_as_the_widened_type(tmp_path: Path) -> None:
    uri = str(tmp_path / "w")
    write_deltalake(uri, pa.table({"k": pa.array([3, 1, 2], pa.int32()), "v": ["a", "b", "c"]}))
    write_deltalake(uri, pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["d", "e"]}), mode="append")

    def widen(snap: TableSnapshot, version: int) -> list[Any]:
        schema = json.loads(snap.metadata.schema_string or "{}")
        for f in schema["fields"]:
            if f["name"] == "k":
                f["type"] = "long"
                f["metadata"] = {"delta.typeChanges": [{"toType": "long", "fromType": "integer"}]}
        cfg = {**snap.configuration, "delta.enableTypeWidening": "true", "delta.enableDeletionVectors": "true"}
        meta = dataclasses.replace(snap.metadata, schema_string=json.dumps(schema), configuration=cfg)
        features = ["deletionVectors", "typeWidening"]
        return [Protocol(3, 7, features, features), meta]

    _commit(uri, "CHANGE COLUMN", widen)
    (report,) = rorder(uri, by="k", max_workers=1)
    assert report.status == "committed"
    snap = TableSnapshot.load(uri)
    (out,) = snap.files
    table = pq.read_table(Path(uri) / out.key)
    assert table.schema.field("k").type == pa.int64()
    assert sorted(zip(table.column("k").to_pylist(), table.column("v").to_pylist(), strict=True)) == [
        (1, "b"),
        (1, "d"),
        (2, "c"),
        (2, "e"),
        (3, "a"),
    ]
    assert '"delta.typeChanges"' in (snap.metadata.schema_string or "")
    assert delete(uri, "k = 2").deletion_vectors_added == 1  # vectors of a table deltalake cannot open
    assert rorder(uri, by="k", max_workers=1, max_deleted_rows_ratio=0.0)[0].status == "committed"
    removed = vacuum(uri, retention_hours=0, dry_run=False)
    assert len(removed.data_files) == 3 and all(not (Path(uri) / k).exists() for k in removed.data_files)
    (live,) = TableSnapshot.load(uri).files
    assert sorted(pq.read_table(Path(uri) / live.key).column("k").to_pylist()) == [1, 1, 3]


def test_features_say_how_each_is_handled(tmp_path: Path) -> None:
    uri = _tracked_table(tmp_path, {"k": [1], "v": ["a"]})
    snap = TableSnapshot.load(uri)
    uses = {u.name: u for u in feature_uses(snap.protocol, snap.metadata)}
    assert sorted(uses) == sorted(FEATURES)
    assert all(u.handling == "supported" for u in uses.values())
    assert uses["rowTracking"].detail.startswith("enabled")
    assert uses["inCommitTimestamp"].detail == "enabled"
    refused = feature_uses(Protocol(3, 7, [], ["icebergCompatV2", "clustering"]), snap.metadata)
    assert [(u.name, u.handling) for u in refused] == [("clustering", "supported"), ("icebergCompatV2", "refused")]
    assert "Iceberg" in refused[1].how


@pytest.mark.parametrize("feature", ["icebergCompatV2", "collations-preview"])
def test_still_refused_by_name(tmp_path: Path, feature: str) -> None:
    uri = _tracked_table(tmp_path, {"k": [1, 2], "v": ["a", "b"]})
    _commit(uri, "UPGRADE", lambda snap, v: [Protocol(3, 7, ["deletionVectors"], [*FEATURES, feature])])
    versions = TableSnapshot.load(uri, for_writing=False).version
    from deltaextras.errors import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=feature):
        rorder(uri, by="k", max_workers=1)
    assert TableSnapshot.load(uri, for_writing=False).version == versions


def test_inspect_names_the_features_and_their_handling(tmp_path: Path) -> None:
    import subprocess
    import sys

    uri = _tracked_table(tmp_path, {"k": [1, 2], "v": ["a", "b"]})
    text = subprocess.run(
        [sys.executable, "-m", "deltaextras", "inspect", uri, "--column", "k"], capture_output=True, text=True
    )
    assert text.returncode == 0, text.stderr
    assert "feature rowTracking: supported (rewrites keep every row's id" in text.stdout
    assert "feature inCommitTimestamp: supported (" in text.stdout and "; enabled)" in text.stdout
    out = subprocess.run(
        [sys.executable, "-m", "deltaextras", "inspect", uri, "--column", "k", "--json"], capture_output=True, text=True
    )
    features = {f["name"]: f for f in json.loads(out.stdout)["features"]}
    assert sorted(features) == sorted(FEATURES) and features["rowTracking"]["handling"] == "supported"


def test_own_vacuum_names_what_deltalakes_vacuum_names(tmp_path: Path) -> None:
    """On a table both can vacuum, the data files of the vacuum used for tables deltalake refuses are the
    ones deltalake's own vacuum names."""
    from deltaextras.ops.maintenance.vacuum import _data_files, _deltalake_data_files

    uri = str(tmp_path / "v")
    for i in range(3):
        write_deltalake(uri, pa.table({"k": [i, i + 1]}), mode="append")
    write_deltalake(uri, pa.table({"k": [9]}), mode="overwrite")
    write_deltalake(uri, pa.table({"k": [10]}), mode="append")
    storage = TableStorage(uri)
    snap = TableSnapshot.load(uri)
    stored = dict(storage.list(""))
    ours = _data_files(storage, snap, stored, 0.0, dry_run=True)
    assert len(ours) == 3
    assert ours == _deltalake_data_files(uri, storage, stored, 0.0, dry_run=True)
    assert _data_files(storage, snap, stored, 1.0, dry_run=True) == []  # removed within the retention: kept


def test_a_concurrent_delete_of_one_twin_is_carried_onto_the_row_of_its_id(tmp_path: Path) -> None:
    """Two identical rows with different ids; another writer deletes one of them (a deletion vector on its
    file) while our rewrite runs: the output row that goes is the one with the deleted row's id."""
    from pyroaring import BitMap

    from deltaextras.core.dv import inline_descriptor
    from deltaextras.ops.rorder.rorder import plan_messages, rorder_single

    uri = _tracked_table(tmp_path, {"k": [1, 2], "v": ["x", "y"]}, {"k": [1, 3], "v": ["x", "z"]})
    before = row_ids(uri)
    assert sorted(r[2] for r in before if r[:2] == (1, "x")) == [0, 2]  # twins: first rows of both files

    def delete_the_twin_of_id_0(_version: int) -> None:
        snap = TableSnapshot.load(uri)
        (f,) = [f for f in snap.files if f.add.base_row_id == 0]
        add = dataclasses.replace(f.add, deletion_vector=inline_descriptor(BitMap([0])), data_change=True)
        info = CommitInfo(in_commit_timestamp=now_ms(), operation="DELETE", is_blind_append=False)
        actions = [info, f.add.retire(now_ms(), data_change=True), add]
        assert snap.storage.put_if_absent(commit_key(snap.version + 1), encode_commit(actions))

    (message,) = plan_messages(uri, by="k")
    pending = [delete_the_twin_of_id_0]
    report = rorder_single(message, hooks={"before_commit": lambda v: pending and pending.pop()(v)})
    assert report.status == "committed" and report.deleted_rows_carried == 1
    assert row_ids(uri) == {r for r in before if r[2] != 0}


def test_a_rewrite_in_several_passes_keeps_every_row_id(tmp_path: Path) -> None:
    """Rows spilled to disk between passes keep their ids too (row groups spanning passes, a vector)."""
    import random

    rng = random.Random(7)
    batches = [{"k": [rng.randrange(40) for _ in range(600)], "v": [f"{b}-{i}" for i in range(600)]} for b in range(3)]
    uri = _tracked_table(tmp_path, *batches)
    delete(uri, "v = '1-5' OR v = '2-7'", mode="deletion_vectors")
    before = row_ids(uri)
    (report,) = rorder(uri, by="k", max_workers=1, memory_budget=8_000, max_deleted_rows_ratio=0.0)
    assert report.status == "committed" and report.passes > 1 and report.spilled_bytes > 0
    assert row_ids(uri) == before
