"""A rewrite's layout follows the table's clustering (the ``delta.clustering`` metadata domain): a winner that
changes that domain between our read and our commit conflicts (the unit is planned again), alone or through
group commit, where the staged commit carries the domains it follows; other domains do not conflict."""

from __future__ import annotations

from deltaextras.core.actions import CommitInfo, DomainMetadata, Remove
from deltaextras.core.conflicts import ConflictKind, IsolationLevel, ReadSet, Winner, check_winner
from deltaextras.core.protocol import CLUSTERING_DOMAIN
from deltaextras.core.staged import StagedCommit

ALTER = Winner(5, [CommitInfo(), DomainMetadata(CLUSTERING_DOMAIN, '{"clusteringColumns": [["node_id"], ["q"]]}')])
FOLLOWS = frozenset({CLUSTERING_DOMAIN})


def _kinds(winner: Winner, read: ReadSet) -> list[ConflictKind]:
    return [c.kind for c in check_winner(winner, read, IsolationLevel.SNAPSHOT_ISOLATION).conflicts]


def test_a_change_of_clustering_conflicts_with_a_rewrite_that_follows_it() -> None:
    assert _kinds(ALTER, ReadSet(files={"a.parquet"}, domains=FOLLOWS)) == [ConflictKind.METADATA]
    assert _kinds(ALTER, ReadSet(files={"a.parquet"})) == []  # a delete does not follow the clustering
    other = Winner(5, [CommitInfo(), DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark": 9}')])
    assert _kinds(other, ReadSet(files={"a.parquet"}, domains=FOLLOWS)) == []


def test_a_staged_commit_carries_the_domains_its_layout_follows() -> None:
    entry = StagedCommit("t", 4, "SnapshotIsolation", "OPTIMIZE", "app", 4, ("a.parquet",), (), [Remove("a.parquet")])
    followed = StagedCommit(**{**entry.__dict__, "domains": (CLUSTERING_DOMAIN,)})
    assert StagedCommit.decode(followed.encode()) == followed
    assert _kinds(ALTER, StagedCommit.decode(followed.encode()).read_set()) == [ConflictKind.METADATA]
    assert StagedCommit.decode(entry.encode()).domains == ()  # a staged commit written without the key
    assert _kinds(ALTER, entry.read_set()) == []
