"""Staged commits: a unit's finished commit, waiting in storage for a group committer to publish it.

A worker whose rewrite is done (outputs uploaded) stages its commit instead of racing for the next log
version: the actions (with its own ``commitInfo.txnId``), the version it read, its isolation level,
what it read (files, ``txn`` appId and version) and the files it wrote. A committer publishes many
staged commits in one Delta version (:mod:`deltaextras.core.committer`) and records each unit's
outcome beside it. Everything lives under the table root in a directory of our own that readers,
vacuum and :func:`~deltaextras.ops.vacuum.orphans` skip (its name starts with ``_``)::

    _deltaextras/staged/<staged at, ms>-<txnId>.json   one staged commit (JSON)
    _deltaextras/outcomes/<txnId>.<outcome>.<v>.<kind>.json   its outcome, once final
    _deltaextras/turns/<version>.<generation>          who is publishing that log version

Example:
    >>> from deltaextras.core.actions import CommitInfo, Txn
    >>> s = StagedCommit("t-1", 4, "SnapshotIsolation", "OPTIMIZE", "app", 4, ("a.parquet",), ("b.parquet",),
    ...                  [CommitInfo(txn_id="t-1"), Txn(app_id="app", version=4)], staged_at=1)
    >>> StagedCommit.decode(s.encode()) == s, s.key
    (True, '_deltaextras/staged/0000000000001-t-1.json')
    >>> UnitOutcome.decode(UnitOutcome("committed", 9).encode())
    UnitOutcome(outcome='committed', version=9, conflict=None)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptDataError
from .actions import Action, decode_commit, encode_commit, now_ms
from .conflicts import Conflict, ConflictKind, IsolationLevel, ReadSet

AREA = "_deltaextras/"
STAGED_DIR = AREA + "staged/"
OUTCOME_DIR = AREA + "outcomes/"
TURN_DIR = AREA + "turns/"


def turn_key(version: int, generation: int = 0) -> str:
    """The object a committer creates (put-if-absent) to take its turn at publishing ``version``; a
    turn whose holder is overdue is taken over at the next ``generation``, again by one worker only."""
    return f"{TURN_DIR}{version:020d}.{generation}"


@dataclass
class StagedCommit:
    """One unit's commit, ready to publish. ``txn_id`` is its ``commitInfo.txnId``; ``written`` the
    storage keys of the files it wrote (cleaned up by the worker when the commit is rejected)."""

    txn_id: str
    read_version: int
    isolation: str
    operation: str
    app_id: str
    app_version: int
    read_files: tuple[str, ...]
    written: tuple[str, ...]
    actions: list[Action] = field(default_factory=list)
    staged_at: int = field(default_factory=now_ms)

    @property
    def key(self) -> str:
        return f"{STAGED_DIR}{self.staged_at:013d}-{self.txn_id}.json"

    def read_set(self) -> ReadSet:
        """What the unit read, for the conflict rules (any protocol change conflicts: the committer does
        not know which protocols the worker can write under)."""
        return ReadSet(files=set(self.read_files), app_id=self.app_id, app_version=self.app_version)

    @property
    def isolation_level(self) -> IsolationLevel:
        return IsolationLevel(self.isolation)

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "txnId": self.txn_id,
            "readVersion": self.read_version,
            "isolationLevel": self.isolation,
            "operation": self.operation,
            "appId": self.app_id,
            "appVersion": self.app_version,
            "readFiles": list(self.read_files),
            "written": list(self.written),
            "stagedAt": self.staged_at,
            "actions": encode_commit(self.actions).decode("utf-8"),
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> StagedCommit:
        """Parse a staged commit; :class:`~deltaextras.errors.CorruptDataError` when it is not one."""
        try:
            body = json.loads(data)
            return cls(
                txn_id=str(body["txnId"]),
                read_version=int(body["readVersion"]),
                isolation=IsolationLevel(body["isolationLevel"]).value,
                operation=str(body["operation"]),
                app_id=str(body["appId"]),
                app_version=int(body["appVersion"]),
                read_files=tuple(str(p) for p in body["readFiles"]),
                written=tuple(str(k) for k in body["written"]),
                actions=decode_commit(str(body["actions"]).encode("utf-8"), -1),
                staged_at=int(body["stagedAt"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"not a staged commit: {str(exc)[:120]}") from None


@dataclass(frozen=True)
class UnitOutcome:
    """The final outcome of a staged commit: ``committed`` (at ``version``), ``already_done`` (the same
    work is in ``version``) or ``conflict`` (``conflict`` says with what)."""

    outcome: str
    version: int | None = None
    conflict: Conflict | None = None

    def encode(self) -> bytes:
        body: dict[str, Any] = {"outcome": self.outcome, "version": self.version}
        if self.conflict is not None:
            c = self.conflict
            body["conflict"] = {"kind": c.kind.value, "version": c.version, "paths": list(c.paths[:20])}
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> UnitOutcome:
        try:
            body = json.loads(data)
            c = body.get("conflict")
            conflict = None if c is None else Conflict(ConflictKind(c["kind"]), int(c["version"]), tuple(c["paths"]))
            version = body.get("version")
            return cls(str(body["outcome"]), None if version is None else int(version), conflict)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"not a staged commit's outcome: {str(exc)[:120]}") from None


def outcome_key(txn_id: str, outcome: UnitOutcome) -> str:
    """Where the outcome of the staged commit ``txn_id`` is recorded: the outcome is in the name too, so
    one listing tells every waiting unit its outcome.

    Example:
        >>> outcome_key("t-1", UnitOutcome("committed", 9))
        '_deltaextras/outcomes/t-1.committed.9..json'
        >>> parse_outcome_key(outcome_key("t-1", UnitOutcome("committed", 9)))
        ('t-1', UnitOutcome(outcome='committed', version=9, conflict=None))
    """
    c = outcome.conflict
    kind = c.kind.value if c is not None else ""
    version = "" if outcome.version is None else str(outcome.version)
    return f"{OUTCOME_DIR}{txn_id}.{outcome.outcome}.{version}.{kind}.json"


def parse_outcome_key(key: str) -> tuple[str, UnitOutcome] | None:
    """``(txnId, outcome)`` of an outcome's key; None for any other key."""
    parts = key.rsplit("/", 1)[-1].removesuffix(".json").split(".")
    if len(parts) != 4 or parts[1] not in ("committed", "already_done", "conflict"):
        return None
    txn_id, outcome, version, kind = parts
    try:
        v = int(version) if version else None
        conflict = Conflict(ConflictKind(kind), v if v is not None else -1) if kind else None
    except ValueError:
        return None
    return txn_id, UnitOutcome(outcome, v, conflict)


__all__ = [
    "AREA",
    "OUTCOME_DIR",
    "STAGED_DIR",
    "TURN_DIR",
    "StagedCommit",
    "UnitOutcome",
    "outcome_key",
    "parse_outcome_key",
    "turn_key",
]
