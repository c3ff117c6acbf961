"""``delete``: remove the rows matching a predicate, with deletion vectors where the table allows them.

How it works:

1. Load the table's log (no data read yet) and bind the predicate to the schema (see
   :mod:`deltaextras.expr.predicate` for the SQL subset). A predicate on partition columns only is decided
   per file from its partition values; otherwise files are skipped with their partition values and log
   statistics, row groups with their Parquet statistics, and only the predicate's columns are read.
2. Each file with matching rows gets one of three outcomes:

   * **deletion vector** (tables whose protocol has the ``deletionVectors`` feature *and* whose
     ``delta.enableDeletionVectors`` property is ``true``, as the protocol requires): the matching row
     indexes are unioned with the file's existing vector; ``remove`` retires the old (path, vector) and
     ``add`` re-adds the same path with the new descriptor, ``dataChange: true`` and statistics marked
     ``tightBounds: false``. Vectors of at most ``inline_max_bytes`` serialized bytes go inline in the
     log (``i``); the others share one new ``deletion_vector_<uuid>.bin`` (``u``), at their offsets;
   * **copy-on-write** (every other table): the file is rewritten without the rows;
   * **removed**: a file whose every row is now deleted is removed outright.

3. Commit through the one :class:`~deltaextras.core.transaction.Transaction`, WriteSerializable (see
   ``docs/conflicts.md``). When another writer wins the version first, its commit is read: if it changed
   the deletion vector of one of our files, the new vector is read, unioned with our rows and we try the
   next version (**row-level conflict resolution**); if it removed one of our files (a compaction), the
   delete is planned again on the files that replaced it; files a commit that is not a blind append
   added (an UPDATE, say) are scanned and their matching rows deleted too; a change of metadata or
   protocol starts the delete over. The report counts all of it.

The pieces: :mod:`~deltaextras.ops.delete.scan` (pruning and scanning), :mod:`~deltaextras.ops.delete.vectors`
(new vectors), :mod:`~deltaextras.ops.delete.rewrite` (copy-on-write and change data files),
:mod:`~deltaextras.ops.common.bounds` (statistics as bounds), :mod:`~deltaextras.ops.delete.report`.

Change data feed: deletion vectors need no change data files (readers derive the deleted rows from
each file's old and new vector, as they do for Databricks' deletes); a copy-on-write delete on a table
with ``delta.enableChangeDataFeed=true`` writes the deleted rows to ``_change_data/`` with
``_change_type = 'delete'`` and commits them as ``cdc`` actions. Append-only tables are refused.
:func:`enable_deletion_vectors` (in :mod:`deltaextras.ops.maintenance.upgrade`) turns deletion vectors on.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.ops.maintenance.upgrade import enable_deletion_vectors
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"sensor": ["a", "b", "c", "d"], "value": [1.0, -99.0, 3.0, -99.0]}))
    >>> enable_deletion_vectors(path)
    1
    >>> report = delete(path, "value = -99")
    >>> report.rows_deleted, report.mode, report.deletion_vectors_added, report.commit_version
    (2, 'deletion_vectors', 1, 2)
    >>> sorted(pa.table(DeltaTable(path).scan()).column("sensor").to_pylist())
    ['a', 'c']
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from ...core.actions import Action, Add, Cdc, CommitInfo, now_ms
from ...core.commit_policy import DEFAULT_POLICY
from ...core.commit_result import CommitResult
from ...core.conflicts import Conflict, ConflictKind, IsolationLevel, ReadSet, Winner
from ...core.dv import DEFAULT_INLINE_MAX_BYTES, file_key, read_deletion_vectors
from ...core.snapshot import LiveFile, TableSnapshot
from ...core.storage import TableStorage
from ...core.transaction import Transaction
from ...errors import (
    CommitConflictError,
    InvalidArgumentError,
    MetadataChangedError,
    ProtocolChangedError,
    UnsupportedFeatureError,
)
from ...expr.predicate import Expr, parse
from ..common.bounds import _statistic_bounds, json_bound, parquet_bound, partition_scalar
from ..common.changes import change_data_feed_enabled
from ..common.features import deletion_vectors_enabled
from ..common.table import load_snapshot, table_args
from .report import DeleteReport
from .rewrite import CopyOnWrite
from .scan import Scanner, Target
from .vectors import dv_add, write_vectors

log = logging.getLogger(__name__)

MODES = ("auto", "deletion_vectors", "copy_on_write")
SCAN_THREADS = 8
PROGRESS_SECONDS = 10.0  # a progress line (INFO) at most this often while files are scanned

Hooks = Mapping[str, Callable[..., None]]


class _Restart(Exception):
    """A winning commit changed metadata or protocol (or, copy-on-write, touched our files)."""


_STARTS_OVER = (_Restart, MetadataChangedError, ProtocolChangedError)


def delete(
    table: Any,
    predicate: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    mode: str = "auto",
    inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
    hooks: Hooks | None = None,
) -> DeleteReport:
    """Delete the rows of ``table`` where ``predicate`` is TRUE, and commit.

    ``table`` is a path, a URI (``az://``, ``abfss://``, ``s3://``) or a ``deltalake.DeltaTable``.
    ``mode``: ``"auto"`` writes deletion vectors when the table enables them and rewrites files
    otherwise; ``"deletion_vectors"`` refuses tables that do not enable them (see
    :func:`deltaextras.ops.maintenance.upgrade.enable_deletion_vectors`); ``"copy_on_write"`` always rewrites.
    ``hooks`` (tracing and tests) may name ``before_commit(version)``, called before each attempt.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake, DeltaTable
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1, 2, 3, None], "part": ["x", "x", "y", "y"]}),
        ...                 partition_by=["part"])
        >>> r = delete(path, "k >= 2 OR k IS NULL")
        >>> r.mode, r.rows_deleted, r.files_removed, r.files_rewritten
        ('copy_on_write', 3, 1, 1)
        >>> DeltaTable(path).to_pyarrow_table().column("k").to_pylist()
        [1]
        >>> delete(path, "part = 'nope'").commit_version is None
        True
    """
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if isinstance(inline_max_bytes, bool) or not isinstance(inline_max_bytes, int) or inline_max_bytes < 0:
        raise InvalidArgumentError(f"inline_max_bytes must be a non-negative integer, got {inline_max_bytes!r}")
    uri, options = table_args(table, storage_options)
    expr = parse(predicate)
    storage = TableStorage(uri, options)
    started = time.monotonic()
    earlier = [0]  # puts of the runs that started over

    def run(restart: int) -> DeleteReport:
        op = _DeleteOperation(storage, predicate, expr, mode, inline_max_bytes, hooks or {})
        try:
            report = op.run()
        except BaseException as why:
            op.abort()  # deletes what it wrote only when no log version can name it
            if isinstance(why, _STARTS_OVER):
                earlier[0] += op.txn.attempts if op.txn is not None else 0
                log.info("delete on %s starts over: %s", storage.uri, why)
            raise
        report.restarts = restart
        report.commit_attempts += earlier[0]
        return report

    report = DEFAULT_POLICY.restarting(run, _STARTS_OVER, _kept_changing)
    report.seconds = round(time.monotonic() - started, 3)
    log.info("%s", json.dumps({"event": "delete", **report.to_dict()}, default=str))
    return report


def _kept_changing(why: BaseException) -> CommitConflictError:
    return CommitConflictError(
        f"the table kept changing its metadata or protocol under the delete ({why}); nothing was committed. Try again"
    )


class _DeleteOperation:
    def __init__(
        self, storage: TableStorage, predicate: str, expr: Expr, mode: str, inline_max_bytes: int, hooks: Hooks
    ) -> None:
        self.storage = storage
        self.predicate = predicate
        self.unbound = expr
        self.requested_mode = mode
        self.inline_max_bytes = inline_max_bytes
        self.hooks = hooks
        self.report = DeleteReport(storage.uri, predicate)
        self.txn: Transaction | None = None
        self.targets: dict[str, Target] = {}
        self.scanned_paths: set[str] = set()
        self.replacements: set[str] = set()

    # ------------------------------------------------------------------------------ setup
    def run(self) -> DeleteReport:
        snap = load_snapshot(self.storage)
        self._setup(snap)
        # WriteSerializable, as Delta's DELETE: files added by a concurrent commit that is not a blind append
        # and may hold matching rows must be read; removed files we read are resolved row by row.
        self.txn = Transaction(
            snap,
            "DELETE",
            IsolationLevel.WRITE_SERIALIZABLE,
            ReadSet(might_match=lambda add: self.scanner.might_match(self.snap.live_file(add))),
            resolve=self._resolve_winners,
            before_put=self.hooks.get("before_commit"),
        )
        started = time.monotonic()
        self.report.files_considered = len(snap.files)
        for t in self._scan(snap, snap.files):
            self.targets[t.path] = t
        self.report.scan_seconds = round(time.monotonic() - started, 3)
        self._decide(list(self.targets.values()))
        if not any(t.outcome != "none" for t in self.targets.values()):
            return self.report
        return self._commit(snap.version)

    def _setup(self, snap: TableSnapshot) -> None:
        self.snap = snap
        self.report.read_version = snap.version
        cfg = snap.configuration
        if str(cfg.get("delta.appendOnly", "false")).lower() == "true":
            raise UnsupportedFeatureError(
                "the table is append-only (delta.appendOnly=true); rows cannot be deleted from it"
            )
        enabled = deletion_vectors_enabled(snap)
        if self.requested_mode == "deletion_vectors" and not enabled:
            raise UnsupportedFeatureError(
                "the table does not enable deletion vectors (protocol feature deletionVectors and "
                "delta.enableDeletionVectors=true); enable them with deltaextras.enable_deletion_vectors "
                "or `deltaextras delete --enable-deletion-vectors`, or delete with mode='auto'"
            )
        self.mode = "copy_on_write" if self.requested_mode == "copy_on_write" or not enabled else "deletion_vectors"
        self.report.mode = self.mode
        # Deletion vectors need no change data files: readers derive the deleted rows from the old and new
        # vector of each file (as Databricks writes them). Rewrites and outright removals do; and once a
        # commit has cdc actions, readers ignore its add and remove actions, so then every file gets one.
        self.cdf = change_data_feed_enabled(snap)
        self.scanner = Scanner(snap, self.unbound)

    def _wrote(self, key: str) -> None:
        assert self.txn is not None
        self.txn.wrote(key)

    def _scan(self, snap: TableSnapshot, files: list[LiveFile]) -> list[Target]:
        """Targets among ``files`` (see :class:`~deltaextras.ops.delete.scan.Scanner`); they join what
        the transaction read."""
        targets = self.scanner.scan(
            files, self.report, threads=SCAN_THREADS, progress_seconds=PROGRESS_SECONDS, progress=self._progress
        )
        self.scanned_paths.update(f.path for f in files)
        if self.txn is not None:
            self.txn.read.files.update(f.path for f in files)
        return targets

    def _progress(self, scanned: int, of: int, matched: int) -> None:
        log.info("delete on %s: scanned %d of %d files, %d rows match so far", self.storage.uri, scanned, of, matched)

    # ------------------------------------------------------------------------------ outcomes
    def _decide(self, targets: Iterable[Target]) -> None:
        """Fix the outcome of each target (remove / dv / rewrite / none); write rewritten files."""
        for t in targets:
            t.descriptor = None
            t.cdc = None
            if t.new_rows <= 0:
                t.outcome = "none"
            elif t.matched is None or len(t.union()) >= t.num_rows:
                t.outcome = "remove"
            elif self.mode == "deletion_vectors":
                t.outcome = "dv"
            else:
                CopyOnWrite(self.snap, self._wrote, cdf=self.cdf).rewrite(t)
            t.cdc = t.cdc if t.outcome == "rewrite" else None
        write_vectors([t for t in targets if t.outcome == "dv"], self.storage, self.inline_max_bytes, self._wrote)

    def _needs_changes(self) -> bool:
        """Whether this commit must carry change data files (see ``_setup``)."""
        active = [t for t in self.targets.values() if t.outcome != "none"]
        return self.cdf and any(t.outcome in ("remove", "rewrite") for t in active)

    def _prepare_changes(self) -> None:
        """Write the change data files the commit needs and does not have yet."""
        if not self._needs_changes():
            return
        for t in self.targets.values():
            if t.outcome in ("remove", "dv") and t.cdc is None:
                CopyOnWrite(self.snap, self._wrote, cdf=self.cdf).write_changes(t)

    # ------------------------------------------------------------------------------ commit
    def _actions(self) -> list[Action]:
        ts = now_ms()
        active = sorted((t for t in self.targets.values() if t.outcome != "none"), key=lambda t: t.path)
        removes: list[Action] = []
        adds: list[Action] = []
        for t in active:
            removes.append(t.file.add.retire(ts, data_change=True))
            if t.outcome == "dv":
                assert t.descriptor is not None
                adds.append(dv_add(t.file.add, t.descriptor, t.num_rows))
            elif t.outcome == "rewrite":
                assert t.rewritten is not None
                adds.append(t.rewritten)
        changes: list[Action] = [t.cdc for t in active if t.cdc] if self._needs_changes() else []
        rows = sum(t.new_rows for t in active)
        dv_targets = [t for t in active if t.outcome == "dv"]
        metrics = {
            "numDeletedRows": rows,
            "numRemovedFiles": sum(1 for t in active if t.outcome in ("remove", "rewrite")),
            "numAddedFiles": sum(1 for t in active if t.outcome == "rewrite"),
            "numCopiedRows": sum(t.rows_kept for t in active if t.outcome == "rewrite"),
            "numDeletionVectorsAdded": len(dv_targets),
            "numDeletionVectorsRemoved": sum(1 for t in active if t.file.dv),
            "numDeletionVectorsUpdated": sum(1 for t in dv_targets if t.file.dv),
            "numAddedChangeFiles": len(changes),
            "numRemovedBytes": sum(t.file.size for t in active if t.outcome in ("remove", "rewrite")),
            "numAddedBytes": sum(t.rewritten.size for t in active if t.rewritten),
            "scanTimeMs": int(self.report.scan_seconds * 1000),
        }
        info = CommitInfo(
            timestamp=ts,
            operation="DELETE",
            operation_parameters={"predicate": self.predicate},
            is_blind_append=False,
            operation_metrics={k: str(v) for k, v in metrics.items()},
        )
        return [info, *removes, *adds, *changes]

    def _build(self, _version: int) -> list[Action]:
        """The actions of the next attempt (empty: no row is left to delete)."""
        if not any(t.outcome != "none" for t in self.targets.values()):
            return []
        self._prepare_changes()
        return self._actions()

    def _commit(self, read_version: int) -> DeleteReport:
        del read_version  # the transaction knows it
        assert self.txn is not None
        result: CommitResult = self.txn.commit(self._build)
        report = self.report
        report.commit_attempts = self.txn.attempts
        report.commit_outcome = result.outcome.value
        self._finish_counts()
        if not result.committed:
            report.commit_version = None
            self.txn.abort()
            return report
        report.commit_version = result.version
        self._drop_unused_outputs(result.actions)
        return report

    def _finish_counts(self) -> None:
        r = self.report
        active = [t for t in self.targets.values() if t.outcome != "none"]
        r.rows_deleted = sum(t.new_rows for t in active)
        r.files_removed = sum(1 for t in active if t.outcome == "remove")
        r.files_rewritten = sum(1 for t in active if t.outcome == "rewrite")
        r.rows_copied = sum(t.rows_kept for t in active if t.outcome == "rewrite")
        dv = [t for t in active if t.outcome == "dv"]
        r.deletion_vectors_added = sum(1 for t in dv if not t.file.dv)
        r.deletion_vectors_updated = sum(1 for t in dv if t.file.dv)
        r.inline_vectors = sum(1 for t in dv if t.descriptor and t.descriptor.storage_type == "i")
        used = {t.descriptor.path_or_inline_dv for t in dv if t.descriptor and t.descriptor.storage_type == "u"}
        r.vector_files_written = len(used)
        r.bytes_added = sum(t.rewritten.size for t in active if t.rewritten)

    # ------------------------------------------------------------------------------ row-level resolution
    def _resolve_winners(self, winners: list[Winner], conflicts: list[Conflict], version: int) -> None:
        """Fold winners that touched what we read into the plan (the transaction's resolver).

        A changed deletion vector of one of our files is re-read and unioned; a file of ours removed
        outright (a compaction) is replaced by scanning the files its commit added; files a commit that
        is not a blind append added, and that may hold matching rows, are scanned too (WriteSerializable:
        the winner comes first). Copy-on-write starts over when one of its files changed.
        """
        stale: set[str] = set()
        gone: set[str] = set()
        for w in winners:
            removed = {r.path for r in w.removes}
            added = {a.path for a in w.adds}
            mine = removed & (set(self.targets) | gone | stale)
            if mine:
                self.report.conflicts_resolved += 1
                for p in sorted(mine):
                    if p in added:
                        stale.add(p)
                        self.report.conflicts.append(f"v{w.version}: deletion vector of {p} changed")
                    else:
                        gone.add(p)
                        stale.discard(p)
                        self.report.conflicts.append(f"v{w.version}: {p} was removed")
            if removed & (gone | self.replacements):
                self.replacements |= added - removed
        appended = {p for c in conflicts if c.kind is ConflictKind.APPEND for p in c.paths}
        if self.mode == "copy_on_write" and (stale or gone):
            raise _Restart(f"a concurrent commit changed {len(stale) + len(gone)} file(s) this delete rewrites")
        if stale or gone or appended - set(self.targets) - self.scanned_paths:
            self._resolve(version, stale, gone, appended)

    def _resolve(self, version: int, stale: set[str], gone: set[str], appended: set[str]) -> None:
        """Re-plan against ``version``: union re-read vectors, scan the files that replaced ours and the
        files concurrent changes added."""
        snap = load_snapshot(self.storage, version)
        if snap.metadata.id != self.snap.metadata.id:
            raise _Restart("the table was replaced")
        self.snap = snap
        live = {f.path: f for f in snap.files}
        changed: list[Target] = []
        for p in sorted(stale):
            t = self.targets[p]
            f = live.get(p)
            if f is None:
                gone.add(p)
                continue
            t.file = f
            if t.matched is not None:
                t.existing = read_deletion_vectors(self.storage, [f.dv])[0]
            else:
                t.existing = None
            self.report.dv_unions += 1
            changed.append(t)
        for p in gone:
            self.targets.pop(p, None)
        known = set(self.targets) | self.scanned_paths
        fresh = [live[p] for p in sorted(self.replacements | appended) if p in live and p not in known]
        if fresh:
            added_by_others = [f for f in fresh if f.path not in self.replacements]
            if added_by_others:
                self.report.conflicts_resolved += 1
                self.report.conflicts.append(f"v{version}: {len(added_by_others)} file(s) added concurrently scanned")
            self.report.files_replanned += len(fresh)
            self.report.files_considered += len(fresh)
            for t in self._scan(snap, fresh):
                self.targets[t.path] = t
                changed.append(t)
        self._decide(changed)

    # ------------------------------------------------------------------------------ cleanup
    def _drop_unused_outputs(self, committed: list[Action]) -> None:
        """Delete the files written for earlier attempts that the committed actions do not name (every
        other attempt was read back as someone else's version, so no version names them)."""
        assert self.txn is not None
        used = set()
        for a in committed:
            if isinstance(a, Add):
                used.add(unquote(a.path))
                if a.deletion_vector is not None and a.deletion_vector.storage_type == "u":
                    used.add(file_key(a.deletion_vector))
            elif isinstance(a, Cdc):
                used.add(unquote(a.path))
        self.txn.discard([k for k in self.txn.written if k not in used])

    def abort(self) -> None:
        """Delete every file this attempt wrote, when no log version can name them (else vacuum will)."""
        if self.txn is not None:
            self.txn.abort()


__all__ = [
    "DEFAULT_INLINE_MAX_BYTES",
    "MODES",
    "DeleteReport",
    "_statistic_bounds",
    "change_data_feed_enabled",
    "delete",
    "deletion_vectors_enabled",
    "dv_add",
    "json_bound",
    "load_snapshot",
    "parquet_bound",
    "partition_scalar",
    "table_args",
]
