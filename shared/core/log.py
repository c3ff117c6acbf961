"""Reading the Delta transaction log: commit files, checkpoints (classic, multi-part, v2 with
sidecars) and the replay that yields every live ``add`` action exactly as the log wrote it.

deltalake gives the file list, statistics and protocol checks; it does not expose the raw ``add``
actions (deletion vector descriptors, tags, row-tracking fields) that a correct ``remove`` must
repeat. :func:`replay` provides them, and the snapshot cross-checks both views.

Example:
    >>> commit_key(7)
    '_delta_log/00000000000000000007.json'
    >>> [type(a).__name__ for a in parse_actions(b'{"txn":{"appId":"a","version":1}}\\n', 7)]
    ['Txn']
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CommitConflictError, CorruptDataError, InvalidArgumentError, TableNotFoundError
from .actions import (
    CHECKPOINT_COLUMNS,
    Action,
    Add,
    DomainMetadata,
    Metadata,
    Protocol,
    Remove,
    Sidecar,
    Txn,
    decode_checkpoint_batch,
    decode_commit,
)
from .storage import TableStorage

LOG_DIR = "_delta_log/"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CP = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI_CP = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CP = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")


def commit_key(version: int) -> str:
    """Storage key of the commit file of ``version``."""
    return f"{LOG_DIR}{version:020d}.json"


def parse_actions(data: bytes, version: int) -> list[Action]:
    """Parse the actions of one commit file (see :func:`~deltaextras.core.actions.decode_commit`)."""
    return decode_commit(data, version)


def read_commit(storage: TableStorage, version: int) -> list[Action] | None:
    """Actions of commit ``version``, or None if that commit does not exist (yet)."""
    try:
        data = storage.read(commit_key(version))
    except FileNotFoundError:
        return None
    return parse_actions(data, version)


@dataclass
class LogListing:
    """What ``_delta_log/`` holds: commit versions and checkpoints by version."""

    commits: set[int] = field(default_factory=set)
    checkpoints: dict[int, list[str]] = field(default_factory=dict)  # version -> keys (complete sets)
    has_hint: bool = False  # whether _delta_log/_last_checkpoint exists
    hint_checked: bool = False  # the hint was read and names a checkpoint this listing holds
    modified: dict[str, int] = field(default_factory=dict)  # key -> last modified, ms (list_log(modified=True))

    @property
    def latest(self) -> int:
        return max(self.commits) if self.commits else -1


def list_log(storage: TableStorage, *, modified: bool = False) -> LogListing:
    """List commits and complete checkpoints under ``_delta_log/`` (with ``modified``, also every object's
    last-modified time)."""
    if modified:
        stamps = {key: at for key, _size, at in storage.list_dir_modified(LOG_DIR)}
        listing = _listing(list(stamps))
        listing.modified = stamps
        return listing
    return _listing([key for key, _size in storage.list_dir(LOG_DIR)])


def list_log_for(storage: TableStorage, version: int | None = None) -> LogListing:
    """What reading ``version`` (default: the latest) needs of ``_delta_log/``: the entries from the checkpoint
    ``_last_checkpoint`` names on, when that checkpoint is at or before ``version`` and listed; else the whole
    log. A log keeps 30 days of commits by default: listed whole, it costs a request per 1,000 of them.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake, DeltaTable
        >>> path = tempfile.mkdtemp()
        >>> for _ in range(3):
        ...     write_deltalake(path, pa.table({"k": [1]}), mode="append")
        >>> DeltaTable(path).create_checkpoint()
        >>> write_deltalake(path, pa.table({"k": [1]}), mode="append")
        >>> listing = list_log_for(TableStorage(path))
        >>> sorted(listing.commits), sorted(listing.checkpoints), listing.latest
        ([2, 3], [2], 3)
        >>> sorted(list_log_for(TableStorage(path), version=1).commits)  # before the checkpoint: all of it
        [0, 1, 2, 3]
    """
    try:
        hint = read_hint(storage)
    except ValueError:  # a damaged hint: the whole listing, and replay says what is wrong
        hint = None
    start = hint.get("version") if hint else None
    if isinstance(start, int) and not isinstance(start, bool) and start >= 0 and (version is None or start <= version):
        # keys after "_delta_log/<start>" are commit <start> and what follows it (names are zero-padded)
        listing = _listing([key for key, _size in storage.list_dir_after(LOG_DIR, f"{LOG_DIR}{start:020d}")])
        if start in listing.checkpoints and (version is None or version <= listing.latest):
            listing.has_hint = listing.hint_checked = True
            return listing
    return list_log(storage)


def _listing(keys: list[str]) -> LogListing:
    """The commits and complete checkpoints among the keys of a listing of ``_delta_log/``."""
    listing = LogListing()
    multipart: dict[tuple[int, int], list[str]] = {}
    for key in keys:
        name = key.rsplit("/", 1)[-1]
        if m := _COMMIT.match(name):
            listing.commits.add(int(m.group(1)))
        elif m := _CLASSIC_CP.match(name):
            listing.checkpoints.setdefault(int(m.group(1)), [key])
        elif m := _V2_CP.match(name):
            listing.checkpoints[int(m.group(1))] = [key]
        elif m := _MULTI_CP.match(name):
            multipart.setdefault((int(m.group(1)), int(m.group(3))), []).append(key)
        elif name == "_last_checkpoint":
            listing.has_hint = True
    for (version, parts), parts_keys in multipart.items():
        if len(parts_keys) == parts and version not in listing.checkpoints:
            listing.checkpoints[version] = sorted(parts_keys)
    return listing


def is_classic_checkpoint(key: str) -> bool:
    """Whether ``key`` is a classic checkpoint file (one file, or one part of a multi-part checkpoint)."""
    name = key.rsplit("/", 1)[-1]
    return bool(_CLASSIC_CP.match(name) or _MULTI_CP.match(name))


def read_hint(storage: TableStorage) -> dict[str, Any] | None:
    """The ``_last_checkpoint`` hint (None: there is none); raises ``ValueError`` when it is not a JSON
    object (a torn or damaged hint)."""
    try:
        hint = json.loads(storage.read(LOG_DIR + "_last_checkpoint"))
    except FileNotFoundError:
        return None
    if not isinstance(hint, dict):
        raise ValueError("_last_checkpoint is not a JSON object")
    return hint


def latest_version(storage: TableStorage) -> int:
    """The newest commit version; :class:`TableNotFoundError` if there is no log."""
    return _require_commits(storage, list_log_for(storage)).latest


def _require_commits(storage: TableStorage, listing: LogListing) -> LogListing:
    if listing.latest < 0:
        raise TableNotFoundError(
            f"no Delta table at {storage.uri} (no commits under _delta_log/); check the path and credentials"
        )
    return listing


@dataclass
class LogState:
    """The replayed table state at one version."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    adds: dict[tuple[str, str | None], Add]
    txns: dict[str, int]
    domains: dict[str, DomainMetadata]


def checkpoint_actions(storage: TableStorage, keys: list[str], tombstones: bool = True) -> Iterator[Action]:
    """Actions of a checkpoint (all parts, v2 sidecars followed); without ``remove`` actions when
    ``tombstones`` is false (their Parquet column is then never decoded: a table's live state does not need
    them, and a week of tombstones can outnumber its live files)."""
    skip = () if tombstones else ("remove",)
    for key in keys:
        data = _read_log_file(storage, key)
        actions: Iterable[Action] = (
            parse_actions(data, -1) if key.endswith(".json") else _parquet_actions(data, key, skip)
        )
        for action in actions:
            if isinstance(action, Sidecar):
                side = LOG_DIR + "_sidecars/" + str(action.path or "").rsplit("/", 1)[-1]
                yield from _parquet_actions(_read_log_file(storage, side), side, skip)
            elif tombstones or not isinstance(action, Remove):
                yield action


def log_actions(storage: TableStorage) -> Iterator[Action]:
    """Every action the log holds now: the newest checkpoint's (tombstones included), then every commit
    file present, oldest first."""
    listing = list_log(storage)
    if listing.checkpoints:
        yield from checkpoint_actions(storage, listing.checkpoints[max(listing.checkpoints)])
    for v in sorted(listing.commits):
        yield from read_commit(storage, v) or []


def _read_log_file(storage: TableStorage, key: str) -> bytes:
    try:
        return storage.read(key)
    except FileNotFoundError:
        raise CorruptDataError(
            f"{key} of {storage.uri} is named by the log but missing; the table is damaged"
        ) from None


def _parquet_actions(data: bytes, key: str = "checkpoint", skip: tuple[str, ...] = ()) -> Iterator[Action]:
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        names = set(pf.schema_arrow.names)
        cols = [c for c in CHECKPOINT_COLUMNS if c in names and c not in skip]
        for batch in pf.iter_batches(columns=cols, batch_size=8192):
            yield from decode_checkpoint_batch(batch)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptDataError(
            f"{key} is not a readable Parquet checkpoint ({str(exc)[:120]}); repair the log"
        ) from None


def _apply(state: LogState, actions: Iterable[Action]) -> None:
    removes: list[tuple[str, str | None]] = []
    adds: list[Add] = []
    for action in actions:
        if isinstance(action, Add):
            adds.append(action)
        elif isinstance(action, Remove):
            removes.append(action.file_id)
        elif isinstance(action, Metadata):
            state.metadata = action
        elif isinstance(action, Protocol):
            state.protocol = action
        elif isinstance(action, Txn):
            state.txns[action.app_id] = int(action.version)
        elif isinstance(action, DomainMetadata):
            if action.removed:
                state.domains.pop(action.domain, None)
            else:
                state.domains[action.domain] = action
    for fid in removes:
        state.adds.pop(fid, None)
    for add in adds:
        state.adds[add.file_id] = add


def _apply_checked(state: LogState, actions: Iterable[Action], where: str, storage: TableStorage) -> None:
    """:func:`_apply`, with an action missing a required field (``add`` without ``path``, an action that is
    not an object) reported as a damaged log."""
    try:
        _apply(state, actions)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptDataError(
            f"{where} of {storage.uri} holds a malformed action ({type(exc).__name__}: {str(exc)[:80]}); the log "
            "is damaged, repair it first"
        ) from None


def _check_hint(storage: TableStorage, listing: LogListing) -> LogListing:
    """Refuse a ``_last_checkpoint`` that names a checkpoint the log does not hold: deltalake (which rewrites
    and checks rely on) refuses such a table, so every operation says so the same way, with the fix."""
    if listing.hint_checked:
        return listing
    hint = LOG_DIR + "_last_checkpoint"
    try:
        version = json.loads(storage.read(hint)).get("version")
    except FileNotFoundError:
        return listing
    except (ValueError, AttributeError):
        version = None
    if isinstance(version, int) and not isinstance(version, bool):
        if version in listing.checkpoints:
            return listing
        listing = list_log(storage)  # a checkpoint written after our listing, with its hint
        if version in listing.checkpoints:
            return listing
        what = f"names checkpoint {version}, which is missing"
    else:
        what = "is not a valid hint"
    raise CorruptDataError(
        f"{hint} of {storage.uri} {what}; the table is damaged. Delete {hint} (readers then list the log) or "
        "write a new checkpoint with a Delta writer"
    )


def _readable(listing: LogListing, version: int) -> bool:
    """Whether ``version`` can be rebuilt from what the log holds: a checkpoint at or before it and every
    commit after that checkpoint (or every commit from 0)."""
    starts = [c + 1 for c in listing.checkpoints if c <= version] + [0]
    return any(all(v in listing.commits for v in range(s, version + 1)) for s in starts)


def replay(storage: TableStorage, version: int, listing: LogListing | None = None) -> LogState:
    """Replay the log up to ``version`` from the newest complete checkpoint at or before it."""
    listing = _require_commits(storage, listing or list_log_for(storage, version))
    if version > listing.latest:
        raise InvalidArgumentError(f"version {version} of {storage.uri} does not exist yet (latest {listing.latest})")
    if listing.has_hint:
        listing = _check_hint(storage, listing)
    cps = [v for v in listing.checkpoints if v <= version]
    start = max(cps) + 1 if cps else 0
    missing = [v for v in range(start, version + 1) if v not in listing.commits]
    if missing:
        if missing[0] < min(listing.commits) and _readable(listing, listing.latest):
            raise CommitConflictError(
                f"version {version} of {storage.uri} can no longer be read: log entries before "
                f"{min(listing.commits)} were cleaned up. The plan is stale; plan again"
            )
        raise CorruptDataError(f"commit {missing[0]} of {storage.uri} is missing from the log; the table is damaged")
    state = LogState(version, None, None, {}, {}, {})
    if cps:
        cp = max(cps)
        # Checkpoint tombstones (remove) are history, not live state.
        _apply_checked(
            state,
            checkpoint_actions(storage, listing.checkpoints[cp], tombstones=False),
            f"checkpoint {cp}",
            storage,
        )
    for v in range(start, version + 1):
        actions = read_commit(storage, v)
        if actions is None:
            raise CorruptDataError(f"commit {v} of {storage.uri} vanished while reading the log; retry")
        _apply_checked(state, actions, f"log entry {v}", storage)
    if state.protocol is None or state.metadata is None:
        raise CorruptDataError(f"the log of {storage.uri} has no protocol or metaData action up to {version}")
    check_metadata(state.metadata, f"the log of {storage.uri} at version {version}")
    return state


def check_metadata(metadata: Metadata, where: str) -> None:
    """Refuse a ``metaData`` action whose ``schemaString`` is missing, null or not a JSON struct: the log is
    damaged (a permanent :class:`CorruptDataError`, never worth a retry).

    Example:
        >>> check_metadata(Metadata(schema_string='{"type": "struct", "fields": []}'), "t")
        >>> check_metadata(Metadata(id="x"), "the log of /t at version 3")
        Traceback (most recent call last):
        ...
        deltaextras.errors.CorruptDataError: the log of /t at version 3 has a metaData action without ...
    """
    text = metadata.schema_string
    if not isinstance(text, str) or not text:
        raise CorruptDataError(
            f"{where} has a metaData action without schemaString (the table's schema); the log is damaged, "
            "repair it from a backup or a writer that knows the schema"
        )
    try:
        schema = json.loads(text)
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        raise CorruptDataError(
            f"{where} has a schemaString that is not a JSON struct schema ({text[:60]!r}); the log is damaged, "
            "repair it first"
        )
