"""Deleting files that no version of the table within the retention period needs, vector files included.

deltalake 1.6's ``DeltaTable.vacuum()`` does not do this right for deletion vector files: its default
("lite") mode deletes the data files of expired ``remove`` actions but never the vector files those
actions name, and its ``full=True`` mode deletes every vector file, those live files still use too
(measured on deltalake 1.6.6, also on Databricks-written tables); only when no live file carries a
vector is its full mode safe for them. :func:`vacuum` deletes the data files deltalake's default vacuum
names (asked as a dry run, then deleted in small batches here; no ``VACUUM START``/``END`` commit is
written, as Spark writes none unless its vacuum logging is enabled) and :func:`vacuum_deletion_vectors`
deletes the vector files; ``deltaextras vacuum TABLE`` is the same.

A vector file is deleted when some ``remove`` action named it (so it was committed once) with a
``deletionTimestamp`` older than the retention, no unexpired ``remove`` names it, and no live file
uses it.

:func:`vacuum` also deletes, as Spark's VACUUM does, the files no log entry names (:func:`orphans`:
the outputs of a writer killed before its commit, data and vector files) once they are older than the
retention, except those a pending group commit's staged objects name; and it removes what group
commit left in ``_deltaextras/`` that no pending commit needs (turns of published versions, outcomes
past their time to live, staged objects whose every unit is in the log).

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.ops.delete.delete import delete
    >>> from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": list(range(100))}))
    >>> _ = enable_deletion_vectors(path)
    >>> _ = delete(path, "k < 10", inline_max_bytes=0)
    >>> _ = delete(path, "k < 20", inline_max_bytes=0)  # a new vector file replaces the first
    >>> import time; time.sleep(0.005)  # retention 0 still means "removed before now", not in this millisecond
    >>> len(vacuum_deletion_vectors(path, retention_hours=0))  # dry run: what would go
    1
    >>> len(vacuum_deletion_vectors(path, retention_hours=0, dry_run=False))
    1
    >>> vacuum_deletion_vectors(path, retention_hours=0)
    []
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...core.actions import Add, Cdc, Remove, now_ms
from ...core.commit_watch import OUTCOMES_TTL
from ...core.dv import file_key
from ...core.log import LOG_DIR, latest_version, log_actions
from ...core.snapshot import deltalake_can_write
from ...core.staged import OUTCOME_DIR, STAGED_DIR, TURN_DIR, decode_staged, written_at
from ...core.storage import TableStorage
from ...errors import CorruptDataError, InvalidArgumentError, StorageError, UnsupportedFeatureError
from ..common.table import load_snapshot, table_args

log = logging.getLogger(__name__)

DEFAULT_RETENTION_HOURS = 168.0
VACUUM_ATTEMPTS = 3  # the vacuum of the data files, tried again after a failed request
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
_UNIT_HOURS = {
    "second": 1 / 3600,
    "seconds": 1 / 3600,
    "minute": 1 / 60,
    "minutes": 1 / 60,
    "hour": 1.0,
    "hours": 1.0,
    "day": 24.0,
    "days": 24.0,
    "week": 168.0,
    "weeks": 168.0,
}


def retention_hours_of(configuration: Mapping[str, str]) -> float:
    """``delta.deletedFileRetentionDuration`` in hours (default 168, one week).

    Example:
        >>> retention_hours_of({"delta.deletedFileRetentionDuration": "interval 2 days"})
        48.0
    """
    raw = configuration.get("delta.deletedFileRetentionDuration")
    if not raw:
        return DEFAULT_RETENTION_HOURS
    m = _INTERVAL.match(str(raw))
    if not m or m.group(2).lower() not in _UNIT_HOURS:
        return DEFAULT_RETENTION_HOURS
    return float(m.group(1)) * _UNIT_HOURS[m.group(2).lower()]


def vacuum_deletion_vectors(
    table: Any,
    *,
    retention_hours: float | None = None,
    dry_run: bool = True,
    storage_options: Mapping[str, str] | None = None,
) -> list[str]:
    """The vector files (keys under the table root) no version within the retention needs; with
    ``dry_run=False`` they are deleted. ``retention_hours`` defaults to the table's
    ``delta.deletedFileRetentionDuration`` (one week when unset)."""
    _uri, storage, snap, hours = _open(table, storage_options, retention_hours)
    return _vector_files(storage, snap, hours, dry_run)


def _open(
    table: Any, storage_options: Mapping[str, str] | None, retention_hours: float | None
) -> tuple[str, TableStorage, Any, float]:
    """URI, storage, snapshot and retention (hours) of a vacuum."""
    uri, options = table_args(table, storage_options)
    storage = TableStorage(uri, options)
    snap = load_snapshot(storage)
    hours = retention_hours_of(snap.configuration) if retention_hours is None else float(retention_hours)
    if hours < 0:
        raise InvalidArgumentError(f"retention_hours must not be negative, got {retention_hours!r}")
    return uri, storage, snap, hours


def _vector_files(storage: TableStorage, snap: Any, hours: float, dry_run: bool) -> list[str]:
    cutoff = now_ms() - int(hours * 3_600_000)
    live = {file_key(f.dv) for f in snap.files if f.dv and f.dv.storage_type == "u"}
    expired: set[str] = set()
    recent: set[str] = set()
    for remove in _removes(storage):
        dv = remove.deletion_vector
        if dv is None or dv.storage_type != "u":
            continue
        key = file_key(dv)
        if int(remove.deletion_timestamp or 0) < cutoff:
            expired.add(key)
        else:
            recent.add(key)
    doomed = sorted(k for k in expired - recent - live if storage.exists(k))
    if not dry_run:
        for key in doomed:
            storage.delete(key)
    return doomed


@dataclass
class VacuumReport:
    """What :func:`vacuum` deleted (or, in a dry run, would delete): keys relative to the table root."""

    table: str
    retention_hours: float
    dry_run: bool
    data_files: list[str] = field(default_factory=list)
    vector_files: list[str] = field(default_factory=list)
    bytes: int = 0  # stored size of the files listed
    default_retention_hours: float = DEFAULT_RETENTION_HOURS  # the table's delta.deletedFileRetentionDuration

    def line(self) -> str:
        """One line for people.

        Example:
            >>> VacuumReport("/t", 168.0, True, ["a.parquet"], []).line()
            '/t: would delete 1 data file(s) and 0 deletion vector file(s) older than 168 h (dry run)'
        """
        verb = "would delete" if self.dry_run else "deleted"
        size = f", {self.bytes / 2**20:.2f} MiB" if self.bytes else ""
        return (
            f"{self.table}: {verb} {len(self.data_files)} data file(s) and {len(self.vector_files)} deletion "
            f"vector file(s) older than {self.retention_hours:g} h{size}{' (dry run)' if self.dry_run else ''}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def vacuum(
    table: Any,
    *,
    retention_hours: float | None = None,
    dry_run: bool = True,
    storage_options: Mapping[str, str] | None = None,
) -> VacuumReport:
    """The data files deltalake's default vacuum names (those of expired ``remove`` actions), deleted in
    small batches, then :func:`vacuum_deletion_vectors` for the vector files. ``retention_hours`` defaults to the
    table's ``delta.deletedFileRetentionDuration`` (one week when unset); a value below it is honoured
    because it was asked for.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1, 2]}))
        >>> write_deltalake(path, pa.table({"k": [3]}), mode="overwrite")  # the first file is removed
        >>> report = vacuum(path, retention_hours=0)  # dry run
        >>> len(report.data_files), report.vector_files, report.dry_run
        (1, [], True)
    """
    uri, storage, snap, hours = _open(table, storage_options, retention_hours)
    # listed before the log is read: a file committed meanwhile is then named by the log we read
    listing = list(storage.list_modified(""))
    stored = {key: size for key, size, _modified in listing}  # sizes for the report, taken before deleting
    if deltalake_can_write(snap.protocol):
        data = _deltalake_data_files(uri, storage, stored, hours, dry_run)
    else:
        data = _data_files(storage, snap, stored, hours, dry_run)
    vectors = _vector_files(storage, snap, hours, dry_run)
    for key in _unreferenced_files(storage, listing, hours, dry_run):
        (vectors if key.rsplit("/", 1)[-1].startswith("deletion_vector_") else data).append(key)
    if not dry_run:
        _sweep_area(storage, snap, listing, hours)
    return VacuumReport(
        table=uri,
        retention_hours=hours,
        dry_run=dry_run,
        data_files=data,
        vector_files=vectors,
        bytes=sum(stored.get(k, 0) for k in data) + sum(stored.get(k, 0) for k in vectors),
        default_retention_hours=retention_hours_of(snap.configuration),
    )


def _deltalake_data_files(
    uri: str, storage: TableStorage, stored: dict[str, int], hours: float, dry_run: bool
) -> list[str]:
    """The data files deltalake's default vacuum names (its dry run), of those ``stored``; unless ``dry_run``
    they are deleted here (:meth:`TableStorage.delete_many`: batches paced by the store's answers, a batch
    that fails settled key by key).
    deltalake's own deleting sends all of them at once, and a store slow to answer one of its large
    batches failed the whole vacuum (measured on Azurite with thousands of files)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    root = storage.deltalake_uri.rstrip("/") + "/"
    retention = int(hours) if hours == int(hours) else int(hours) + 1
    for attempt in range(VACUUM_ATTEMPTS):
        try:
            dl = DeltaTable(storage.deltalake_uri, storage_options=storage.storage_options or None)
            # deltalake names every expired tombstone, deleted already or not: keep those still stored
            named = {
                p[len(root) :] if p.startswith(root) else p
                for p in dl.vacuum(retention_hours=retention, dry_run=True, enforce_retention_duration=False)
            }
            data = sorted(named & stored.keys())
            if data and not dry_run:
                storage.delete_many(data)
            return data
        except (DeltaError, OSError, StorageError) as exc:
            # deleting thousands of objects may meet a failed request: what was deleted is gone, the next
            # attempt lists again and deletes the rest (vacuum only removes files no version reads)
            text = " ".join(str(exc).split())[:400] or type(exc).__name__
            if attempt + 1 == VACUUM_ATTEMPTS:
                raise StorageError(
                    f"vacuum failed on {uri} ({VACUUM_ATTEMPTS} attempts): {text}; no vector file was "
                    "deleted; run vacuum again"
                ) from None
            log.warning("vacuum of %s: attempt %d failed (%s); trying again", uri, attempt + 1, text[:200])
            time.sleep(2**attempt)
    return []


def _data_files(storage: TableStorage, snap: Any, stored: dict[str, int], hours: float, dry_run: bool) -> list[str]:
    """The same as deltalake's default vacuum, for tables deltalake cannot vacuum: the data files of ``remove``
    actions older than the retention that no newer ``remove`` and no live file names, and that are stored."""
    cutoff = now_ms() - int(hours * 3_600_000)
    live = {f.key for f in snap.files}
    expired: set[str] = set()
    recent: set[str] = set()
    for remove in _removes(storage):
        try:
            key = storage.key_of(remove.path)
        except UnsupportedFeatureError:  # a file outside the table is not ours to delete
            continue
        (expired if int(remove.deletion_timestamp or 0) < cutoff else recent).add(key)
    doomed = sorted(k for k in expired - recent - live if k in stored)
    if not dry_run:
        for key in doomed:
            storage.delete(key)
    return doomed


def _removes(storage: TableStorage) -> Iterable[Remove]:
    """Every ``remove`` action the log still holds: commits present, and the newest checkpoint's tombstones."""
    return (a for a in log_actions(storage) if isinstance(a, Remove))


_STAGING = re.compile(r"#\d+$")
# Top-level names deltalake's vacuum looks into although they start with "_" (as delta-rs does).
_VACUUMED_HIDDEN = ("_change_data", "_delta_index")


def orphans(table: Any, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Files under the table root that no log entry references: what a crashed or killed writer left.

    Reported (keys relative to the table root, sorted):

    * data and deletion vector files that no ``add``, ``remove`` or ``cdc`` action of the log (the
      commits present and the newest checkpoint) names -- a rewrite's outputs written before a crash,
      for example. deltalake's ``vacuum(retention_hours=0, enforce_retention_duration=False,
      dry_run=False, full=True)`` deletes exactly these; its default ("lite") mode does not look at
      unreferenced files at all. Paths deltalake's vacuum skips (names starting with ``.`` or ``_``,
      other than partition directories ``name=value``, ``_change_data`` and ``_delta_index``) are skipped here too;
    * on local disk only, half-written staging files of atomic writes (``<name>#<n>``, e.g.
      ``_delta_log/00000000000000000007.json#1`` after a crash during a commit): no reader or lister
      of object_store, deltalake, Spark or this package ever sees them, and no vacuum removes them;
      delete them by hand.

    A concurrent writer's files that are not committed *yet* are listed too: this is a report of the
    moment, not a licence to delete. Deleting is vacuum's job, with a retention that outlasts any
    writer.

    Example:
        >>> import pathlib, tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1, 2]}))
        >>> _ = (pathlib.Path(path) / "part-crashed.parquet").write_bytes(b"PAR1")
        >>> orphans(path)
        ['part-crashed.parquet']
    """
    uri, options = table_args(table, storage_options)
    storage = TableStorage(uri, options)
    latest_version(storage)  # no log: TableNotFoundError
    referenced = _referenced(storage, log_actions(storage))
    found = [key for key, _size in storage.list("") if _may_be_orphan(key) and key not in referenced]
    if storage.local_root is not None:
        root = storage.local_root
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                if _STAGING.search(name):
                    found.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(found)


def _referenced(storage: TableStorage, actions: Iterable[Any]) -> set[str]:
    """The keys under the table root that ``actions`` name: data, change data and vector files."""
    referenced: set[str] = set()
    for action in actions:
        if not isinstance(action, (Add, Remove, Cdc)):
            continue
        if isinstance(action.path, str):
            with contextlib.suppress(UnsupportedFeatureError):  # a file outside the table is not ours to judge
                referenced.add(storage.key_of(action.path))
        dv = None if isinstance(action, Cdc) else action.deletion_vector
        if dv is not None and dv.storage_type == "u":
            referenced.add(file_key(dv))
        elif dv is not None and dv.storage_type == "p":
            where, key = storage.resolve(str(dv.path_or_inline_dv))
            if where is storage:
                referenced.add(key)
    return referenced


def _may_be_orphan(key: str) -> bool:
    """Whether ``key`` is a file vacuum judges at all: not the log, not a hidden name (as deltalake skips)."""
    if key.startswith(LOG_DIR):
        return False
    return not (key.startswith((".", "_")) and not key.startswith(_VACUUMED_HIDDEN) and "=" not in key.split("/")[0])


def _staged(storage: TableStorage) -> list[tuple[str, list[Any]]]:
    """Every staged object under ``_deltaextras/staged/`` with its units (an unreadable object: no units)."""
    found = []
    for key, _size in storage.list(STAGED_DIR):
        try:
            found.append((key, decode_staged(storage.read(key))))
        except (FileNotFoundError, CorruptDataError):
            found.append((key, []))
    return found


def _unreferenced_files(
    storage: TableStorage, listing: list[tuple[str, int, int]], hours: float, dry_run: bool
) -> list[str]:
    """Files no log entry names and no staged commit wrote, stored before the retention began: deleted
    unless ``dry_run``. The log and the staged objects are read after ``listing`` was taken."""
    cutoff = now_ms() - int(hours * 3_600_000)
    old = [key for key, _size, modified in listing if modified < cutoff and _may_be_orphan(key)]
    if not old:
        return []
    referenced = _referenced(storage, log_actions(storage))
    for _key, units in _staged(storage):
        for unit in units:
            referenced.update(unit.written)
            referenced |= _referenced(storage, unit.actions)
    doomed = sorted(k for k in old if k not in referenced)
    if not dry_run:
        storage.delete_many(doomed)
    return doomed


def _sweep_area(storage: TableStorage, snap: Any, listing: list[tuple[str, int, int]], hours: float) -> list[str]:
    """Remove what group commit left behind that no pending commit needs: turns of versions the log
    holds, outcomes older than their time to live (as waiting workers do), staged objects older than the
    retention whose every unit's ``txn`` the log holds (published, or answered "already done" if staged
    again). Returns the keys removed."""
    cutoff = now_ms() - int(hours * 3_600_000)
    doomed = []
    for key, _size, _modified in listing:
        if key.startswith(TURN_DIR):
            head = key[len(TURN_DIR) :].partition(".")[0]
            if head.isdigit() and int(head) <= snap.version:
                doomed.append(key)
        elif key.startswith(OUTCOME_DIR):
            at = written_at(key)
            if at is not None and now_ms() - at > OUTCOMES_TTL * 1000:
                doomed.append(key)
    modified_at = {key: modified for key, _size, modified in listing}
    for key, units in _staged(storage):
        if not units or modified_at.get(key, now_ms()) >= cutoff:
            continue
        if all(snap.txns.get(u.app_id, -1) >= u.app_version for u in units):
            doomed.append(key)
    storage.delete_many(doomed)
    return doomed


__all__ = ["DEFAULT_RETENTION_HOURS", "orphans", "retention_hours_of", "vacuum_deletion_vectors"]
