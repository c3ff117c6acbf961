"""The conflict table, winner kind by winner kind: another writer commits between our read and our commit
(through the public ``hooks={"before_commit": fn}`` tracing hook, once), and the outcome and the final
content must be what Delta's conflict rules -- Spark's ``ConflictChecker``, delta-rs's
``conflict_checker`` -- plus our documented row-level resolution allow.

Our operations:

* ``rorder`` of partition 0: a ``dataChange: false`` rewrite, *SnapshotIsolation*: it read (and removes)
  every file of partition 0, carries a ``txn`` (appId per partition, version = the version it read);
* ``delete_dv`` / ``delete_cow`` of ``node_id = 2``: *WriteSerializable* DML; it read the files whose
  statistics may hold node 2 (the three files of partition 0; the file of partition 1 holds nodes 7 and
  8 only and is pruned). With deletion vectors it resolves row by row: a winner's new vector on a file
  it deletes from is unioned with ours, a compaction's outputs are scanned again.

The table (local, deletion vectors enabled): partition 0 = three delta-rs appends of 40 rows (nodes
0..5), partition 1 = one file of 20 rows (nodes 7, 8); ``seq`` is unique per row.

Outcomes (a cell may allow several; the content must then match the one that happened):

``commit``
    our operation commits after the winner; content = our operation applied to the winner's result;
``conflict:<Kind>``
    a :class:`~deltaextras.errors.CommitConflictError` (Delta's ``<Kind>Exception``; where the library
    has a ``<Kind>Error`` class the error is one), retryable only for ``ConcurrentAppend`` (Delta's advice:
    retry the operation); nothing of ours committed, content = the winner's result;
``done``
    already committed by an earlier delivery (our ``txn``): nothing committed, content = the winner's result.

After every cell a rerun of the same operation (no winner now) converges to our operation applied to
the winner's result, and every file the log references exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.table import TableFeatures
from reliability_support import UNIT
from txn_support import (
    OPS,
    after_op,
    append,
    assert_files_exist,
    content,
    expected,
    make_table,
    our_commits,
    run_op,
    sensor_rows,
    spark_style_append,
)

import deltaextras
import deltaextras.errors

# ----------------------------------------------------------------------------------------------------
# The spec: winner kind -> our operation -> allowed outcomes.
# Delta and delta-rs differ in two places, so both outcomes are allowed there:
#   * a protocol change that only adds a feature both sides support: Spark and delta-rs let the loser
#     commit; a stricter writer may refuse (ProtocolChanged);
#   * a non-blind commit whose added files cannot hold matching rows: Spark matches added files on
#     partition predicates only (ConcurrentAppend), delta-rs on statistics (no conflict).
# A WriteSerializable delete may also resolve a conflict itself (re-plan on the new version, union
# vectors) instead of raising: then the content must be exactly "winner, then our delete".
EXPECTED: dict[str, dict[str, str]] = {
    # winner kind -> {rorder (SnapshotIsolation), delete_dv / delete_cow (WriteSerializable)}
    "blind_append_same_partition": {"rorder": "commit", "delete_dv": "commit", "delete_cow": "commit"},
    "blind_append_other_partition": {"rorder": "commit", "delete_dv": "commit", "delete_cow": "commit"},
    # delta-rs writes appends without commitInfo.isBlindAppend: Delta then counts their files as changed
    # data that a WriteSerializable delete should have read (its file holds node 2)
    "append_without_blind_flag": {
        "rorder": "commit",
        "delete_dv": "commit|conflict:ConcurrentAppend",
        "delete_cow": "commit|conflict:ConcurrentAppend",
    },
    "update_into_predicate": {
        "rorder": "commit",
        "delete_dv": "commit|conflict:ConcurrentAppend",
        "delete_cow": "commit|conflict:ConcurrentAppend",
    },
    "merge_into_predicate": {
        "rorder": "commit",
        "delete_dv": "commit|conflict:ConcurrentAppend",
        "delete_cow": "commit|conflict:ConcurrentAppend",
    },
    # rorder carries a delete of its inputs onto its rewrite (deletion vectors on its outputs)
    "delete_dv_of_read_file": {
        "rorder": "commit",
        "delete_dv": "commit",  # vectors unioned
        "delete_cow": "commit|conflict:ConcurrentDeleteRead",
    },
    "delete_cow_of_read_file": {
        "rorder": "commit",
        "delete_dv": "commit|conflict:ConcurrentDeleteRead",
        "delete_cow": "commit|conflict:ConcurrentDeleteRead",
    },
    "delete_of_unread_file": {
        "rorder": "commit",
        "delete_dv": "commit|conflict:ConcurrentAppend",
        "delete_cow": "commit|conflict:ConcurrentAppend",
    },
    "compaction_of_read_files": {
        "rorder": "conflict:ConcurrentDeleteRead",
        "delete_dv": "commit",  # re-planned onto the compaction's output
        "delete_cow": "commit|conflict:ConcurrentDeleteRead",
    },
    # delta-rs writes the protocol again, unchanged, beside the new metaData: that is no protocol change
    # (Spark's checkProtocolCompatibility passes it), the conflict is the metadata's
    "metadata_property": {
        "rorder": "conflict:MetadataChanged",
        "delete_dv": "commit|conflict:MetadataChanged",
        "delete_cow": "commit|conflict:MetadataChanged",
    },
    "protocol_feature": {
        "rorder": "commit|conflict:ProtocolChanged",
        "delete_dv": "commit|conflict:ProtocolChanged",
        "delete_cow": "commit|conflict:ProtocolChanged",
    },
    "txn_with_our_app_id": {"rorder": "done", "delete_dv": "commit", "delete_cow": "commit"},
    # our appId at an older version: two planners run the same work (Delta's ConcurrentTransaction)
    "txn_with_our_app_id_older": {
        "rorder": "conflict:ConcurrentTransaction",
        "delete_dv": "commit",
        "delete_cow": "commit",
    },
}
RORDER_APP_ID = 'deltaextras.rorder:["node_id_range","0"]'  # the documented appId of partition 0's rewrite


# ------------------------------------------------------------------------------------------- winners
@dataclass(frozen=True)
class WinnerKind:
    """How the winner commits (``commit(uri, read_version)``) and what it does to the rows."""

    commit: Callable[[str, int], None]
    effect: Callable[[pa.Table], pa.Table]
    blind: bool = False

    def then(self, op: str, rows: pa.Table) -> pa.Table:
        """The content once both the winner and our ``op`` committed, in their serial order: a blind
        append after us (its rows stay), anything else before us (our operation applies to its result)."""
        if self.blind:
            return self.effect(after_op(op, rows))
        return after_op(op, self.effect(rows))


def _set_node(rows: pa.Table, seq: int, node: int) -> pa.Table:
    hit = pc.equal(rows.column("seq"), seq)
    col = pc.if_else(hit, pa.scalar(node, pa.int64()), rows.column("node_id"))
    return rows.set_column(rows.schema.get_field_index("node_id"), "node_id", col)


def _drop_seq(rows: pa.Table, seq: int) -> pa.Table:
    return rows.filter(pc.not_equal(rows.column("seq"), seq))


APPEND_SAME = sensor_rows(2000, 12)  # partition 0, nodes 0..5: holds node 2
APPEND_OTHER = sensor_rows(3000, 12, part=1)  # partition 1, nodes 0..5: holds node 2


def _merge(uri: str, _v: int) -> None:
    (
        DeltaTable(uri)
        .merge(pa.table({"seq": pa.array([1001], pa.int64())}), "t.seq = s.seq", source_alias="s", target_alias="t")
        .when_matched_update(updates={"node_id": "2"})
        .execute()
    )


def _our_dv_delete(uri: str, _v: int) -> None:
    report = deltaextras.delete(uri, "seq = 3", mode="deletion_vectors", inline_max_bytes=0)
    assert report.commit_version is not None


def _txn_only(uri: str, txn_version: int) -> None:
    """A commit carrying the rewrite's ``txn`` at ``txn_version`` and no data (an empty delta-rs append):
    at the version it read, what an earlier delivery of the same work leaves in the log."""
    write_deltalake(
        uri,
        APPEND_SAME.slice(0, 0),
        mode="append",
        partition_by=[UNIT],
        commit_properties=CommitProperties(app_transactions=[Transaction(RORDER_APP_ID, txn_version)]),
    )


WINNERS: dict[str, WinnerKind] = {
    "blind_append_same_partition": WinnerKind(
        lambda uri, _v: spark_style_append(uri, APPEND_SAME),
        lambda r: pa.concat_tables([r, APPEND_SAME]),
        blind=True,
    ),
    "blind_append_other_partition": WinnerKind(
        lambda uri, _v: spark_style_append(uri, APPEND_OTHER),
        lambda r: pa.concat_tables([r, APPEND_OTHER]),
        blind=True,
    ),
    "append_without_blind_flag": WinnerKind(
        lambda uri, _v: append(uri, None, APPEND_SAME), lambda r: pa.concat_tables([r, APPEND_SAME])
    ),
    "update_into_predicate": WinnerKind(
        lambda uri, _v: DeltaTable(uri).update(predicate="seq = 1000", updates={"node_id": "2"}),
        lambda r: _set_node(r, 1000, 2),
    ),
    "merge_into_predicate": WinnerKind(_merge, lambda r: _set_node(r, 1001, 2)),
    "delete_dv_of_read_file": WinnerKind(_our_dv_delete, lambda r: _drop_seq(r, 3)),
    "delete_cow_of_read_file": WinnerKind(lambda uri, _v: DeltaTable(uri).delete("seq = 4"), lambda r: _drop_seq(r, 4)),
    "delete_of_unread_file": WinnerKind(
        lambda uri, _v: DeltaTable(uri).delete("seq = 1002"), lambda r: _drop_seq(r, 1002)
    ),
    "compaction_of_read_files": WinnerKind(
        lambda uri, _v: DeltaTable(uri).optimize.compact(partition_filters=[(UNIT, "=", "0")]), lambda r: r
    ),
    "metadata_property": WinnerKind(
        lambda uri, _v: DeltaTable(uri).alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"}),
        lambda r: r,
    ),
    "protocol_feature": WinnerKind(
        lambda uri, _v: DeltaTable(uri).alter.add_feature(TableFeatures.CheckConstraints), lambda r: r
    ),
    "txn_with_our_app_id": WinnerKind(_txn_only, lambda r: r),
    "txn_with_our_app_id_older": WinnerKind(lambda uri, v: _txn_only(uri, v - 1), lambda r: r),
}


def _allowed(cell: str) -> dict[str, set[str]]:
    """``"commit|conflict:ConcurrentAppend"`` -> {"commit": set(), "conflict": {"ConcurrentAppend"}}."""
    out: dict[str, set[str]] = {}
    for part in cell.split("|"):
        kind, _, detail = part.partition(":")
        out.setdefault(kind, set()).update([detail] if detail else [])
    return out


def check_conflict(exc: BaseException | None, kinds: set[str], detail: str) -> None:
    """``exc`` is a :class:`CommitConflictError`; where the library names Delta's kinds (``<Kind>Error``)
    it is one of ``kinds``; retryable exactly for ``ConcurrentAppend``."""
    assert isinstance(exc, deltaextras.CommitConflictError), f"not a commit conflict: {detail}"
    classes = {k: getattr(deltaextras.errors, f"{k}Error", None) for k in kinds}
    known = {k: c for k, c in classes.items() if c is not None}
    if known:
        matched = [k for k, c in known.items() if isinstance(exc, c)]
        assert matched, f"expected one of {sorted(f'{k}Error' for k in known)}, got {detail}"
        kind = matched[0]
    else:
        assert len(kinds) == 1 or "ConcurrentAppend" not in kinds, kinds
        kind = next(iter(kinds))
    assert exc.retryable is (kind == "ConcurrentAppend"), f"retryable={exc.retryable} for {kind}: {detail}"


def test_the_table_covers_every_winner_and_operation() -> None:
    assert set(EXPECTED) == set(WINNERS)
    for winner, cells in EXPECTED.items():
        assert set(cells) == set(OPS), winner
        for cell in cells.values():
            assert set(_allowed(cell)) <= {"commit", "conflict", "done"}, cell


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("winner", list(EXPECTED))
def test_conflict_table(winner: str, op: str, tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    Path(uri).mkdir()
    rows = make_table(uri, None, deletion_vectors=True, other_partition=True)
    read_version = DeltaTable(uri).version()
    kind = WINNERS[winner]
    fired: list[int] = []

    def before_commit(version: int) -> None:
        if not fired:
            fired.append(version)
            kind.commit(uri, read_version)

    outcome = run_op(op, uri, None, hooks={"before_commit": before_commit})
    assert fired, "the winner never committed: the hook was not called"
    won = kind.effect(rows)
    allowed = _allowed(EXPECTED[winner][op])
    got = {"committed": "commit", "raised": "conflict", "nothing": "done"}[outcome.kind]
    assert got in allowed, f"{winner} vs {op}: expected {EXPECTED[winner][op]}, got {outcome.detail}"
    if got == "conflict":
        check_conflict(outcome.error, allowed["conflict"], outcome.detail)
    ours = our_commits(uri, None, op)
    if got == "commit":
        assert content(uri, None) == expected(kind.then(op, rows)), f"{winner} and {op}: wrong content"
        assert len(ours) == 1, f"commits of {op}: {ours}"
    else:
        assert content(uri, None) == expected(won), f"{winner} won, {op} did not commit: wrong content"
        assert ours == [], f"{op} did not commit, yet the log has commits of it: {ours}"
    assert_files_exist(uri, None)

    # a rerun (no winner now) converges; it commits again only when there is work left (rows the winner
    # appended that match the delete, files the winner appended to partition 0, a conflict before)
    rerun = run_op(op, uri, None)
    assert rerun.kind in ("committed", "nothing"), f"the rerun did not converge: {rerun.detail}"
    assert content(uri, None) == expected(after_op(op, won))
    assert len(our_commits(uri, None, op)) == len(ours) + (rerun.kind == "committed")
    assert_files_exist(uri, None)
