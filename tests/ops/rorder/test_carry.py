"""rorder carries concurrent deletes onto its rewritten files: our deletion-vector DELETE, delta-rs's
copy-on-write DELETE and UPDATE commit between our read and our commit (the public ``before_commit``
hook of ``rorder_single``), on local disk, Azurite and moto S3. Every race ends with the rewrite
committed, the deleted rows deleted, nothing else lost or duplicated (delta-rs scan checksum; Sail on
one), our outputs one value per row group; what cannot be mapped exactly stays a named conflict."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from oracle import assert_layout
from reliability_support import BY, COLUMNS, content, expected, new_table, rows, sail_content, seqs

from deltaextras.core.actions import CommitInfo, encode_commit
from deltaextras.core.dv import inline_descriptor, read_deletion_vector
from deltaextras.core.log import commit_key, read_commit
from deltaextras.core.snapshot import TableSnapshot
from deltaextras.core.storage import TableStorage
from deltaextras.errors import ConcurrentDeleteReadError, MetadataChangedError, ProtocolChangedError
from deltaextras.ops.delete.delete import delete
from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
from deltaextras.ops.maintenance.vacuum import orphans
from deltaextras.ops.rorder.rorder import plan_messages, rorder, rorder_single

SORT = "utc_time"


def _table(backend: Any, *, dv: bool = True, batches: int = 4) -> tuple[str, dict[str, str], pa.Table]:
    uri, opts = backend.new_table_uri(), dict(backend.storage_options)
    written = new_table(uri, opts, batches=batches, per_batch=50, nodes=5)
    if dv:
        enable_deletion_vectors(uri, storage_options=opts)
    return uri, opts, written


def _minus(written: pa.Table, *ranges: tuple[int, int]) -> pa.Table:
    mask = pc.equal(written["seq"], -1)
    for lo, hi in ranges:
        mask = pc.or_(mask, pc.and_(pc.greater_equal(written["seq"], lo), pc.less(written["seq"], hi)))
    return written.filter(pc.invert(mask))


def _race(uri: str, opts: dict[str, str], *winners: Callable[[], None], **plan: Any) -> Any:
    """Plan, then run each winner just before our next commit attempt; returns our report."""
    (message,) = plan_messages(uri, sort_by=SORT, storage_options=opts, **plan)
    pending = list(winners)

    def before_commit(_version: int) -> None:
        if pending:
            pending.pop(0)()

    return rorder_single(message, storage_options=opts, hooks={"before_commit": before_commit})


def _our_outputs_in_layout(uri: str, opts: dict[str, str], version: int) -> None:
    """Every file our commit added is still live and holds one value of ``by`` per row group."""
    added = {a.path for a in read_commit(TableStorage(uri, opts), version) or [] if type(a).__name__ == "Add"}
    live = {a["path"] for a in pa.table(DeltaTable(uri, storage_options=opts or None).get_add_actions()).to_pylist()}
    assert added and added <= live
    if live == added:
        assert_layout(uri, BY, opts)


def _settled(uri: str, opts: dict[str, str], want: pa.Table) -> None:
    live = seqs(uri, opts)
    assert len(live) == len(set(live)), "a row is duplicated"
    assert content(uri, opts) == expected(want)
    assert [k for k in orphans(uri, opts) if k.endswith(".zstd.parquet") or "deletion_vector_" in k] == []


# ------------------------------------------------------------------ races that commit
def test_our_deletion_vector_delete_is_carried(backend: Any) -> None:
    uri, opts, written = _table(backend)
    delete(uri, "seq < 5", storage_options=opts, mode="deletion_vectors")  # a vector we read
    report = _race(
        uri,
        opts,
        lambda: delete(uri, "seq >= 40 AND seq < 60", storage_options=opts, mode="deletion_vectors"),
        lambda: delete(uri, "seq >= 120 AND seq < 123", storage_options=opts, mode="deletion_vectors"),
    )
    assert report.status == "committed", report.reason
    assert (report.concurrent_deletes_carried, report.deleted_rows_carried) == (2, 23)
    assert report.commit_version == report.read_version + 3
    _settled(uri, opts, _minus(written, (0, 5), (40, 60), (120, 123)))
    assert_layout(uri, BY, opts)  # every live file is one of ours
    (info,) = [
        a for a in read_commit(TableStorage(uri, opts), report.commit_version) or [] if isinstance(a, CommitInfo)
    ]
    metrics = info.operation_metrics or {}
    assert metrics["numConcurrentDeletesCarried"] == "2" and metrics["numDeletedRowsCarried"] == "23"


@pytest.mark.parametrize("kind", ["delete", "update"])
def test_delta_rs_copy_on_write_is_carried(backend: Any, kind: str) -> None:
    """delta-rs rewrites the files it deletes from (or updates): the inputs are removed with
    ``dataChange: true`` and their surviving (or updated) rows live in its new files, which stay."""
    uri, opts, written = _table(backend)

    def winner() -> None:
        dt = DeltaTable(uri, storage_options=opts or None)
        if kind == "delete":
            dt.delete("seq >= 40 AND seq < 60")
        else:
            dt.update(updates={"value": "-1.0"}, predicate="seq >= 40 AND seq < 60")

    report = _race(uri, opts, winner)
    assert report.status == "committed", report.reason
    assert report.concurrent_deletes_carried == 1 and report.deleted_rows_carried == 100  # the two rewritten inputs
    if kind == "delete":
        want = _minus(written, (40, 60))
    else:
        value = pc.if_else(
            pc.and_(pc.greater_equal(written["seq"], 40), pc.less(written["seq"], 60)), -1.0, written["value"]
        )
        want = written.set_column(written.schema.get_field_index("value"), "value", value)
    _settled(uri, opts, want)
    _our_outputs_in_layout(uri, opts, report.commit_version)
    rorder(uri, sort_by=SORT, storage_options=opts, max_workers=1)  # picks up delta-rs's file too
    assert_layout(uri, BY, opts)
    assert content(uri, opts) == expected(want)


def test_a_vector_change_then_a_rewrite_of_the_same_input(tmp_path: Any) -> None:
    from services import Backend

    backend = Backend("local", str(tmp_path))
    uri, opts, written = _table(backend)
    report = _race(
        uri,
        opts,
        lambda: delete(uri, "seq >= 40 AND seq < 45", storage_options=opts, mode="deletion_vectors"),
        lambda: DeltaTable(uri).delete("seq >= 45 AND seq < 48"),  # the same input, copy-on-write
    )
    assert report.status == "committed" and report.concurrent_deletes_carried == 2
    _settled(uri, opts, _minus(written, (40, 48)))


def test_an_input_whose_every_row_was_deleted(tmp_path: Any) -> None:
    from services import Backend

    uri, opts, written = _table(Backend("local", str(tmp_path)))
    report = _race(uri, opts, lambda: delete(uri, "seq >= 50 AND seq < 100", storage_options=opts))
    assert report.status == "committed" and report.deleted_rows_carried == 50
    _settled(uri, opts, _minus(written, (50, 100)))
    assert_layout(uri, BY, opts)


def test_sail_reads_the_carried_vectors(spark: Any, tmp_path: Any) -> None:
    from services import Backend

    uri, opts, written = _table(Backend("local", str(tmp_path)))
    report = _race(uri, opts, lambda: delete(uri, "seq >= 10 AND seq < 30 OR seq = 170", mode="deletion_vectors"))
    assert report.status == "committed" and report.deleted_rows_carried == 21
    assert sail_content(spark, uri) == content(uri) == expected(_minus(written, (10, 30), (170, 171)))


# ------------------------------------------------------------------ unique_by
def _duplicated_table(uri: str) -> pa.Table:
    """Batches 0 and 1 are the same rows: every row has an identical twin in another file."""
    from reliability_support import append

    first = rows(0, 50, nodes=5)
    for t in (first, first, rows(50, 50, nodes=5)):
        append(uri, None, t)
    enable_deletion_vectors(uri)
    return pa.concat_tables([first, rows(50, 50, nodes=5)])


def _delete_rows_of_one_file(uri: str, where: Callable[[pa.Table], pa.Array]) -> None:
    """Another writer's deletion-vector commit on one file (the first that has such rows), rows chosen
    by ``where``."""
    import pyarrow.parquet as pq

    snap = TableSnapshot.load(uri, cross_check=False)
    for f in sorted(snap.files, key=lambda f: f.path):
        data = pq.read_table(snap.storage.open_input(f.key, f.size))
        idx = pc.indices_nonzero(where(data)).to_pylist()
        if idx:
            break
    bm = read_deletion_vector(snap.storage, f.dv) | type(read_deletion_vector(snap.storage, None))(idx)
    add = dataclasses.replace(f.add, deletion_vector=inline_descriptor(bm), data_change=True)
    actions = [CommitInfo(operation="DELETE", is_blind_append=False), f.add.retire(1, data_change=True), add]
    assert snap.storage.put_if_absent(commit_key(snap.version + 1), encode_commit(actions))


def test_unique_by_deletes_an_output_row_only_when_every_twin_was_deleted(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    want = _duplicated_table(uri)
    # a winner deletes one twin of seq < 10 (one file only): the other twin still stands for the row
    report = _race(uri, {}, lambda: _delete_rows_of_one_file(uri, lambda t: pc.less(t["seq"], 10)), unique_by=["seq"])
    assert report.status == "committed" and report.deleted_rows_carried == 10
    assert report.duplicates_removed == 50
    assert sorted(seqs(uri)) == list(range(100)) and content(uri) == expected(want)

    uri = str(tmp_path / "u")
    want = _duplicated_table(uri)
    # a DELETE of seq < 10 deletes both twins: the output row goes
    report = _race(uri, {}, lambda: delete(uri, "seq < 10", mode="deletion_vectors"), unique_by=["seq"])
    assert report.status == "committed" and report.deleted_rows_carried == 20
    assert sorted(seqs(uri)) == list(range(10, 100)) and content(uri) == expected(_minus(want, (0, 10)))


# ------------------------------------------------------------------ purge, conflicts
def test_a_second_rorder_purges_carried_vectors_past_the_ratio(tmp_path: Any) -> None:
    from services import Backend

    uri, opts, written = _table(Backend("local", str(tmp_path)))
    report = _race(uri, opts, lambda: delete(uri, "seq < 20", mode="deletion_vectors"))  # 10 % of the rows
    assert report.status == "committed" and report.deleted_rows_carried == 20
    (again,) = rorder(uri, sort_by=SORT, max_workers=1, max_deleted_rows_ratio=0.2)
    assert again.status == "skipped" and "20 deleted rows under the 20% threshold" in again.reason
    (purge,) = rorder(uri, sort_by=SORT, max_workers=1, max_deleted_rows_ratio=0.05)
    assert purge.status == "committed" and purge.deleted_rows_purged == 20
    assert all(f.dv is None for f in TableSnapshot.load(uri).files)
    _settled(uri, opts, _minus(written, (0, 20)))
    assert_layout(uri, BY)


def test_what_cannot_be_carried_stays_a_conflict(tmp_path: Any) -> None:
    from services import Backend

    # a compaction (dataChange: false) replaced an input: nothing was deleted, our rewrite is stale
    uri, opts, _ = _table(Backend("local", str(tmp_path / "a")))
    with pytest.raises(ConcurrentDeleteReadError, match="concurrent compaction"):
        _race(uri, opts, lambda: DeltaTable(uri).optimize.compact())
    # no deletion vectors on the table: the rows cannot be deleted from our outputs
    uri, opts, _ = _table(Backend("local", str(tmp_path / "b")), dv=False)
    with pytest.raises(ConcurrentDeleteReadError, match="does not enable"):
        _race(uri, opts, lambda: DeltaTable(uri).delete("seq < 3"))
    # a metadata change (after a delete we could carry)
    uri, opts, _ = _table(Backend("local", str(tmp_path / "c")))

    def both() -> None:
        delete(uri, "seq < 3", mode="deletion_vectors")
        DeltaTable(uri).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})

    with pytest.raises((MetadataChangedError, ProtocolChangedError)):  # delta-rs may raise the protocol too
        _race(uri, opts, both)
    for path in (tmp_path / "a", tmp_path / "b", tmp_path / "c"):
        (table,) = [p for p in path.iterdir()]
        assert [k for k in orphans(str(table)) if k.endswith(".zstd.parquet") or "deletion_vector_" in k] == []


def test_report_fields_are_zero_without_a_race(tmp_path: Any) -> None:
    from services import Backend

    uri, opts, _ = _table(Backend("local", str(tmp_path)), batches=2)
    report = _race(uri, opts)
    assert report.status == "committed" and report.concurrent_deletes_carried == report.deleted_rows_carried == 0
    assert "numDeletedRowsCarried" not in json.dumps(
        [a.to_json() for a in read_commit(TableStorage(uri), report.commit_version) or []]
    )


# ------------------------------------------------------------------ values that are hard to match
def test_strings_nulls_nan_lists_and_identical_rows_are_matched_exactly(tmp_path: Any) -> None:
    """A string row-group column with nulls, NaN and -0.0 in floats, a list column (matched without
    Arrow's set kernels) and rows identical in every column across files: the winner deletes one copy
    of three identical pairs (from one file only); exactly those three rows go."""
    from deltalake import write_deltalake
    from oracle import rows_checksum

    uri = str(tmp_path / "t")
    base = {
        "k": ["a", "b", None, "a", "c", None],
        "f": [float("nan"), -0.0, 0.0, 1.5, None, float("nan")],
        "l": [[1], [], None, [1, 2], [3], [1]],
        "id": [0, 1, 2, 3, 4, 5],
        "part": [0] * 6,
    }
    batch = pa.table(base)
    for _ in range(2):  # two files of identical rows
        write_deltalake(uri, batch, partition_by=["part"], mode="append")
    other = pa.table({**base, "id": [6, 7, 8, 9, 10, 11]})
    write_deltalake(uri, other, partition_by=["part"], mode="append")
    enable_deletion_vectors(uri)
    (message,) = plan_messages(uri, by="k")
    pending = [lambda: _delete_rows_of_one_file(uri, lambda t: pc.is_in(t["id"], pa.array([0, 2, 5])))]

    report = rorder_single(message, hooks={"before_commit": lambda _v: pending and pending.pop()()})
    assert report.status == "committed" and report.deleted_rows_carried == 3
    want = pa.concat_tables([batch, batch.filter(pc.invert(pc.is_in(batch["id"], pa.array([0, 2, 5])))), other])
    assert rows_checksum(pa.table(DeltaTable(uri).scan()).select(want.column_names)) == rows_checksum(want)


def test_vector_files_of_a_lost_attempt_are_deleted(backend: Any) -> None:
    """Scattered deletes make vectors too large to inline: each carry writes a vector file; the file of
    the attempt that lost the next version to a second delete is deleted, the committed one is named."""
    uri, opts, written = _table(backend)
    report = _race(
        uri,
        opts,
        lambda: delete(uri, "value > 0.6", storage_options=opts, mode="deletion_vectors"),
        lambda: delete(uri, "value < 0.3", storage_options=opts, mode="deletion_vectors"),
    )
    assert report.status == "committed" and report.concurrent_deletes_carried == 2
    gone = pc.or_(pc.greater(written["value"], 0.6), pc.less(written["value"], 0.3))
    assert report.deleted_rows_carried == pc.sum(gone.cast(pa.int64())).as_py()
    adds = [a for a in read_commit(TableStorage(uri, opts), report.commit_version) or [] if type(a).__name__ == "Add"]
    assert {a.deletion_vector.storage_type for a in adds if a.deletion_vector} == {"u"}
    _settled(uri, opts, written.filter(pc.invert(gone)))  # includes: no vector file left unreferenced
    assert_layout(uri, BY, opts)


def test_delta_rs_merge_is_carried(tmp_path: Any) -> None:
    """A MERGE (delta-rs, copy-on-write) updates rows of two inputs and inserts new ones: the updated
    and inserted rows live in its new files, the old versions of the updated rows are gone."""
    from services import Backend

    uri, opts, written = _table(Backend("local", str(tmp_path)))
    source = rows(40, 20, nodes=5)  # seq 40..59 again (rows of two inputs), new values
    source = source.set_column(source.schema.get_field_index("value"), "value", pa.array([-2.0] * 20))
    source = pa.concat_tables([source, rows(1000, 5, nodes=5)])  # and five new rows

    def merge() -> None:
        (
            DeltaTable(uri)
            .merge(source, predicate="t.seq = s.seq", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    report = _race(uri, opts, merge)
    assert report.status == "committed" and report.concurrent_deletes_carried == 1
    want = pa.concat_tables([_minus(written, (40, 60)), source])
    _settled(uri, opts, want)
    _our_outputs_in_layout(uri, opts, report.commit_version)


SPARK_DML = {
    "delete": "DELETE FROM delta.`{uri}` WHERE seq >= 40 AND seq < 60",
    "update": "UPDATE delta.`{uri}` SET value = -1.0 WHERE seq >= 40 AND seq < 60",
    "merge": (
        "MERGE INTO delta.`{uri}` t USING (SELECT id AS s FROM range(40, 60)) src ON t.seq = src.s "
        "WHEN MATCHED THEN DELETE"
    ),
}


@pytest.mark.parametrize("kind", sorted(SPARK_DML))
def test_spark_dml_is_carried(delta_spark: Any, tmp_path: Any, kind: str) -> None:
    """Apache Spark's DELETE / UPDATE / MERGE (deletion vectors on) commits between our read and our
    commit: the rewrite commits, Spark's changes stay, and Spark, delta-rs and the expected rows agree."""
    from delta_spark import read_arrow

    uri = str(tmp_path / "t")
    written = new_table(uri, None, batches=4, per_batch=50, nodes=5)
    enable_deletion_vectors(uri)
    report = _race(uri, {}, lambda: delta_spark.sql(SPARK_DML[kind].format(uri=uri)).collect())
    assert report.status == "committed", report.reason
    assert report.concurrent_deletes_carried == 1 and report.deleted_rows_carried > 0
    if kind == "update":
        value = pc.if_else(
            pc.and_(pc.greater_equal(written["seq"], 40), pc.less(written["seq"], 60)), -1.0, written["value"]
        )
        want = written.set_column(written.schema.get_field_index("value"), "value", value)
    else:
        want = _minus(written, (40, 60))
    _settled(uri, {}, want)
    _our_outputs_in_layout(uri, {}, report.commit_version)
    assert expected(read_arrow(delta_spark, uri, COLUMNS)) == expected(want)  # Spark reads what delta-rs reads
