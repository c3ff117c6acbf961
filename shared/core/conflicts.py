"""Which winning commits a transaction can commit after: Delta's conflict rules (Spark's
``ConflictChecker``, delta-rs's ``conflict_checker``), one function per rule, applied in their order.

A transaction that lost the race for version N reads the commit that won it (the *winner*) and
checks it against what it read:

1. the winner's ``commitInfo.txnId`` (or, for a group commit, one of its ``unitTxnIds``) is one of ours
   → it *is* our commit (an ambiguous put landed, or a committer published our staged commit);
2. the winner carries our ``txn`` appId at our version or later → the same work is already committed;
3. a ``protocol`` action other than the one we read, when our commit writes a protocol too or we cannot
   write under the new one → :class:`~deltaextras.errors.ProtocolChangedError` (as Spark's checker);
4. a ``metaData`` action → :class:`~deltaextras.errors.MetadataChangedError`;
5. added files we should have read → ``append`` conflict
   (:class:`~deltaextras.errors.ConcurrentAppendError`): under ``Serializable`` every ``add`` with
   ``dataChange: true``, under ``WriteSerializable`` only those of a commit that is not a blind append,
   under ``SnapshotIsolation`` (a ``dataChange: false`` rewrite) none; an added file counts when it
   may hold rows our read predicate matches (or we read the whole table);
6. a ``remove`` of a file we read (or any remove when we read the whole table) → ``delete_read``
   conflict (:class:`~deltaextras.errors.ConcurrentDeleteReadError`), which also covers
   "deleted twice": we only remove files we read;
7. our ``txn`` appId at an older version → :class:`~deltaextras.errors.ConcurrentTransactionError`.

Conflicts 5 and 6 are returned, not raised: an operation that can resolve them row by row (a delete
with deletion vectors re-reads the vector, scans the added files) does so; the others raise them.

Example:
    >>> from deltaextras.core.actions import Add, CommitInfo, Remove
    >>> read = ReadSet(files={"a.parquet"})
    >>> w = Winner(5, [CommitInfo(is_blind_append=True), Add(path="new.parquet")])
    >>> check_winner(w, read, IsolationLevel.WRITE_SERIALIZABLE).conflicts
    []
    >>> w = Winner(6, [CommitInfo(is_blind_append=False), Remove(path="a.parquet")])
    >>> [c.kind.value for c in check_winner(w, read, IsolationLevel.SNAPSHOT_ISOLATION).conflicts]
    ['delete_read']
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import (
    CommitConflictError,
    ConcurrentAppendError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
)
from .actions import Action, Add, CommitInfo, DomainMetadata, Metadata, Protocol, Remove, Txn

UNIT_TXN_IDS = "unitTxnIds"  # commitInfo field of a group commit: the txnId of each staged commit in it


class IsolationLevel(str, enum.Enum):
    """Delta's isolation levels, as ``commitInfo.isolationLevel`` names them."""

    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"
    SNAPSHOT_ISOLATION = "SnapshotIsolation"


@dataclass
class ReadSet:
    """What a transaction read: file paths (as the log writes them), and for DML the predicate.

    ``might_match(add)`` tells whether an added file may hold rows the operation's predicate matches
    (partition values and statistics; True when unsure). ``whole_table``: the operation read every file
    without a predicate. ``app_id`` / ``app_version``: the ``txn`` the commit will write, if any.
    """

    files: set[str] = field(default_factory=set)
    might_match: Callable[[Add], bool] | None = None
    whole_table: bool = False
    app_id: str | None = None
    app_version: int = -1
    protocol: Protocol | None = None  # the protocol read
    supports: Callable[[Protocol], bool] | None = None  # whether we can still write under a winner's protocol
    writes_protocol: bool = False  # our commit carries a protocol action of its own
    domains: frozenset[str] = frozenset()  # metadata domains our layout follows: a winner changing one conflicts


@dataclass
class Winner:
    """A commit that took a version after our read version."""

    version: int
    actions: list[Action]

    @property
    def commit_info(self) -> CommitInfo | None:
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @property
    def txn_ids(self) -> set[str]:
        """The ``txnId`` of the commit and, for a group commit, of every staged commit it published
        (``commitInfo.unitTxnIds``)."""
        info = self.commit_info
        if info is None:
            return set()
        units = info.extra.get(UNIT_TXN_IDS)
        ids = {str(u) for u in units} if isinstance(units, list) else set()
        return ids | ({info.txn_id} if info.txn_id else set())

    @property
    def adds(self) -> list[Add]:
        return [a for a in self.actions if isinstance(a, Add)]

    @property
    def removes(self) -> list[Remove]:
        return [a for a in self.actions if isinstance(a, Remove)]

    @property
    def txns(self) -> list[Txn]:
        return [a for a in self.actions if isinstance(a, Txn)]

    @property
    def is_blind_append(self) -> bool:
        """Whether the writer declared the commit a blind append (no ``commitInfo``: not one)."""
        info = self.commit_info
        return bool(info is not None and info.is_blind_append)

    def has(self, kind: type) -> bool:
        return any(isinstance(a, kind) for a in self.actions)


class ConflictKind(str, enum.Enum):
    """Why a winner conflicts with us (compares equal to its value: ``ConflictKind.APPEND == "append"``)."""

    APPEND = "append"
    DELETE_READ = "delete_read"
    METADATA = "metadata"
    PROTOCOL = "protocol"
    TXN = "txn"

    @property
    def resolvable(self) -> bool:
        """Whether an operation may resolve it row by row (the others always raise)."""
        return self in (ConflictKind.APPEND, ConflictKind.DELETE_READ)


# Each kind's error and message, in one place ({version}, {first}, {more} filled in).
_ERRORS: dict[ConflictKind, tuple[type[CommitConflictError], str]] = {
    ConflictKind.APPEND: (
        ConcurrentAppendError,
        "commit {version} added data this operation should have read ({first}{more}); nothing was committed. "
        "Run the operation again",
    ),
    ConflictKind.DELETE_READ: (
        ConcurrentDeleteReadError,
        "commit {version} removed input {first}{more} (a file this operation read, or its deletion vector "
        "changed); nothing was committed. Plan again",
    ),
    ConflictKind.METADATA: (
        MetadataChangedError,
        "commit {version} changed the table's metadata (schema, partitioning, clustering or properties); nothing was "
        "committed. Run the operation again",
    ),
    ConflictKind.PROTOCOL: (
        ProtocolChangedError,
        "commit {version} changed the table's protocol; nothing was committed. Run the operation again",
    ),
    ConflictKind.TXN: (
        ConcurrentTransactionError,
        "commit {version} wrote the application transaction {first} this operation depends on; nothing was "
        "committed. Plan again",
    ),
}


@dataclass(frozen=True)
class Conflict:
    """One reason a winner conflicts with us: its :class:`ConflictKind`, the winner's version and the
    files concerned.

    Example:
        >>> c = Conflict(ConflictKind.DELETE_READ, 7, ("a.parquet",))
        >>> type(c.error()).__name__, c.kind == "delete_read", c.kind.resolvable
        ('ConcurrentDeleteReadError', True, True)
    """

    kind: ConflictKind
    version: int
    paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ConflictKind(self.kind))

    def error(self) -> CommitConflictError:
        """The error this conflict raises when the operation does not resolve it."""
        first = self.paths[0] if self.paths else ""
        more = f" and {len(self.paths) - 1} more" if len(self.paths) > 1 else ""
        cls, text = _ERRORS[self.kind]
        return cls(text.format(version=self.version, first=first, more=more))


@dataclass
class Verdict:
    """The outcome of checking one winner: ``ours`` (it is our own commit), ``done`` (our ``txn`` is
    already committed), else the conflicts found (empty: commit at the next version)."""

    ours: bool = False
    done: bool = False
    conflicts: list[Conflict] = field(default_factory=list)


def check_winner(winner: Winner, read: ReadSet, isolation: IsolationLevel, our_txn_ids: Iterable[str] = ()) -> Verdict:
    """Apply the rules of the module docstring to one winner."""
    if winner.txn_ids & set(our_txn_ids):
        return Verdict(ours=True)
    if read.app_id is not None:
        for t in winner.txns:
            if t.app_id == read.app_id and int(t.version) >= read.app_version:
                return Verdict(done=True)
    conflicts: list[Conflict] = []
    if any(_protocol_conflicts(p, read) for p in winner.actions if isinstance(p, Protocol)):
        conflicts.append(Conflict(ConflictKind.PROTOCOL, winner.version))
    if winner.has(Metadata) or any(isinstance(a, DomainMetadata) and a.domain in read.domains for a in winner.actions):
        conflicts.append(Conflict(ConflictKind.METADATA, winner.version))
    appended = _appends_to_check(winner, isolation)
    if appended:
        if read.whole_table:
            hits = appended
        elif read.might_match is not None:
            hits = [a for a in appended if read.might_match(a)]
        else:
            hits = []
        if hits:
            conflicts.append(Conflict(ConflictKind.APPEND, winner.version, tuple(a.path for a in hits)))
    removed = [r.path for r in winner.removes if read.whole_table or r.path in read.files]
    if removed:
        conflicts.append(Conflict(ConflictKind.DELETE_READ, winner.version, tuple(removed)))
    if read.app_id is not None and any(t.app_id == read.app_id for t in winner.txns):
        conflicts.append(Conflict(ConflictKind.TXN, winner.version, (read.app_id,)))
    return Verdict(conflicts=conflicts)


def _protocol_conflicts(protocol: Protocol, read: ReadSet) -> bool:
    """A winner's protocol conflicts (as in Spark's checker) when it differs from the one we read and we
    write a protocol of our own, or we cannot write under it (unknown: it conflicts).

    Example:
        >>> read = ReadSet(protocol=Protocol(1, 2), supports=lambda p: p.min_writer_version <= 7)
        >>> _protocol_conflicts(Protocol(1, 2), read), _protocol_conflicts(Protocol(3, 7), read)
        (False, False)
        >>> _protocol_conflicts(Protocol(3, 8), read)
        True
    """
    if protocol == read.protocol:
        return False
    return read.writes_protocol or read.supports is None or not read.supports(protocol)


def _appends_to_check(winner: Winner, isolation: IsolationLevel) -> list[Add]:
    if isolation is IsolationLevel.SNAPSHOT_ISOLATION:
        return []
    changed = [a for a in winner.adds if a.data_change]
    if isolation is IsolationLevel.WRITE_SERIALIZABLE and winner.is_blind_append:
        return []
    return changed
