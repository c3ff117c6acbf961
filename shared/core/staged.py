"""Staged commits: a unit's finished commit, waiting in storage for a group committer to publish it.

A worker whose rewrite is done (outputs uploaded) stages its commit instead of racing for the next log
version: the actions (with its own ``commitInfo.txnId``), the version it read, its isolation level,
what it read (files, ``txn`` appId and version) and the files it wrote. A committer publishes many
staged commits in one Delta version (:mod:`deltaextras.core.committer`) and records each unit's
outcome beside it. Everything lives under the table root in a directory of our own that readers,
vacuum and :func:`~deltaextras.ops.maintenance.vacuum.orphans` skip (its name starts with ``_``)::

    _deltaextras/staged/<staged at, ms>-<txnId>.json   staged commits put together by one process (JSON)
    _deltaextras/outcomes/<written at, ms>-<run>.json  the outcomes one committer run decided
    _deltaextras/turns/<version>.<generation>          who is publishing that log version

Example:
    >>> from deltaextras.core.actions import CommitInfo, Txn
    >>> s = StagedCommit("t-1", 4, "SnapshotIsolation", "OPTIMIZE", "app", 4, ("a.parquet",), ("b.parquet",),
    ...                  [CommitInfo(txn_id="t-1"), Txn(app_id="app", version=4)], staged_at=1)
    >>> StagedCommit.decode(s.encode()) == s, s.key
    (True, '_deltaextras/staged/0000000000001-t-1.json')
    >>> UnitOutcome.decode(UnitOutcome("committed", 9).encode())
    UnitOutcome(outcome='committed', version=9, conflict=None)

A process puts the commits its units staged meanwhile in one object (:func:`encode_staged`), named
after the first of them: a thousand units waiting in one host cost a few objects to put, read and
remove, not a thousand. One commit alone keeps the single-commit form.
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
    domains: tuple[str, ...] = ()  # metadata domains the unit's layout follows (ReadSet.domains)

    @property
    def key(self) -> str:
        return f"{STAGED_DIR}{self.staged_at:013d}-{self.txn_id}.json"

    def read_set(self) -> ReadSet:
        """What the unit read, for the conflict rules (any protocol change conflicts: the committer does
        not know which protocols the worker can write under)."""
        return ReadSet(
            files=set(self.read_files),
            app_id=self.app_id,
            app_version=self.app_version,
            domains=frozenset(self.domains),
        )

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
        if self.domains:
            body["domains"] = list(self.domains)
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
                domains=tuple(str(d) for d in body.get("domains", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"not a staged commit: {str(exc)[:120]}") from None


def encode_staged(entries: list[StagedCommit]) -> bytes:
    """One object holding ``entries`` (stored at ``entries[0].key``); one entry keeps its own form.

    Example:
        >>> a = StagedCommit("a", 1, "SnapshotIsolation", "OPTIMIZE", "x", 1, (), (), staged_at=1)
        >>> b = StagedCommit("b", 1, "SnapshotIsolation", "OPTIMIZE", "y", 1, (), (), staged_at=2)
        >>> [e.txn_id for e in decode_staged(encode_staged([a, b]))], decode_staged(encode_staged([a])) == [a]
        (['a', 'b'], True)
    """
    if len(entries) == 1:
        return entries[0].encode()
    units = [json.loads(e.encode()) for e in entries]
    return json.dumps({"units": units}, separators=(",", ":")).encode("utf-8")


def decode_staged(data: bytes) -> list[StagedCommit]:
    """The staged commits in one object (either form); :class:`~deltaextras.errors.CorruptDataError`
    when it holds none."""
    try:
        body = json.loads(data)
        units = body["units"] if isinstance(body, dict) and "units" in body else None
    except (ValueError, TypeError) as exc:
        raise CorruptDataError(f"not a staged commit: {str(exc)[:120]}") from None
    if units is None:
        return [StagedCommit.decode(data)]
    if not isinstance(units, list) or not units:
        raise CorruptDataError("not a staged commit: no units")
    return [StagedCommit.decode(json.dumps(u).encode("utf-8")) for u in units]


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


@dataclass
class Outcomes:
    """The outcomes one committer run decided, in one object (one write per run, one read per waiting
    process): ``decided`` maps each unit's ``txnId`` to its outcome; ``staged`` names the staged objects
    whose every unit is decided (no committer needs to read them again).

    Example:
        >>> o = Outcomes({"t-1": UnitOutcome("committed", 9)}, written_at=5, run="r", staged=("s/1.json",))
        >>> o.key, Outcomes.decode(o.encode(), o.key) == o, written_at(o.key)
        ('_deltaextras/outcomes/0000000000005-r.json', True, 5)
    """

    decided: dict[str, UnitOutcome]
    written_at: int = field(default_factory=now_ms)
    run: str = ""
    staged: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{OUTCOME_DIR}{self.written_at:013d}-{self.run}.json"

    def encode(self) -> bytes:
        units = {t: json.loads(o.encode()) for t, o in self.decided.items()}
        return json.dumps({"units": units, "staged": list(self.staged)}, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes, key: str) -> Outcomes:
        try:
            body = json.loads(data)
            decided = {str(t): UnitOutcome.decode(json.dumps(o).encode()) for t, o in body["units"].items()}
            staged = tuple(str(k) for k in body.get("staged", ()))  # absent in outcomes of older versions
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptDataError(f"not a committer's outcomes: {str(exc)[:120]}") from None
        name = key.rsplit("/", 1)[-1].removesuffix(".json")
        return cls(decided, written_at(key) or 0, name.partition("-")[2], staged)


def written_at(key: str) -> int | None:
    """When the outcomes at ``key`` were written (ms), None when ``key`` is not an outcomes object."""
    head = key.rsplit("/", 1)[-1].partition("-")[0]
    return int(head) if head.isdigit() else None


__all__ = [
    "AREA",
    "OUTCOME_DIR",
    "STAGED_DIR",
    "TURN_DIR",
    "Outcomes",
    "StagedCommit",
    "UnitOutcome",
    "decode_staged",
    "encode_staged",
    "turn_key",
    "written_at",
]
