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

3. Commit the next log version with put-if-absent. When another writer wins the version first, its
   commit is read: if it changed the deletion vector of one of our files, the new vector is read,
   unioned with our rows and we try the next version (**row-level conflict resolution**); if it
   removed one of our files (a compaction), the delete is planned again on the files that replaced it;
   a change of metadata or protocol starts the delete over. The report counts all of it.

Change data feed: deletion vectors need no change data files (readers derive the deleted rows from
each file's old and new vector, as they do for Databricks' deletes); a copy-on-write delete on a table
with ``delta.enableChangeDataFeed=true`` writes the deleted rows to ``_change_data/`` with
``_change_type = 'delete'`` and commits them as ``cdc`` actions. Append-only tables are refused.
:func:`enable_deletion_vectors` (in :mod:`deltaextras.ops.upgrade`) turns deletion vectors on.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.ops.upgrade import enable_deletion_vectors
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

import contextlib
import datetime as dt
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from ..core.actions import encode, now_ms, remove_action
from ..core.arrays import bool_array, constant_array, py_value, scalar, true_mask
from ..core.commit import MAX_LOST_RACES, maybe_checkpoint
from ..core.dv import (
    DEFAULT_INLINE_MAX_BYTES,
    VectorFileWriter,
    bitmap_from_positions,
    build_descriptors,
    file_key,
    keep_mask,
    read_deletion_vectors,
)
from ..core.log import commit_key, latest_version, read_commit, replay
from ..core.protocol import check_protocol, has_feature
from ..core.schema import TableSchema, conform
from ..core.snapshot import LiveFile, TableSnapshot, open_data_file
from ..core.stats import DEFAULT_INDEXED_COLUMNS, StatsCollector
from ..core.storage import TableStorage
from ..errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CorruptDataError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from ..expr.predicate import Expr, FieldStats, bind, evaluate, might_be_true, parse
from ..version import __version__
from .changes import ChangeSink, ParquetSink, as_deletes, change_data_feed_enabled

log = logging.getLogger(__name__)

MODES = ("auto", "deletion_vectors", "copy_on_write")
MAX_RESTARTS = 16
SCAN_THREADS = 8
SCAN_BATCH_ROWS = 131_072
PROGRESS_SECONDS = 10.0  # a progress line (INFO) at most this often while files are scanned
ENGINE = f"deltaextras/{__version__}"
_ADD_KEYS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)
_STRING_MAX_PAD = "\U0010ffff"

Hooks = Mapping[str, Callable[..., None]]


# ============================================================================================ report
@dataclass
class DeleteReport:
    """What one ``delete`` did.

    ``commit_version`` is None when no row matched (nothing is committed then). ``commit_attempts``
    counts puts of the log entry, ``conflicts_resolved`` the winning commits that touched our files and
    were merged (``dv_unions`` files whose vector was re-read and unioned, ``files_replanned`` files
    scanned again because a winner replaced ours), ``restarts`` full re-runs after a metadata change.
    """

    table: str
    predicate: str
    mode: str = ""
    read_version: int | None = None
    commit_version: int | None = None
    rows_deleted: int = 0
    files_considered: int = 0
    files_skipped: int = 0
    files_scanned: int = 0
    row_groups_scanned: int = 0
    row_groups_skipped: int = 0
    files_removed: int = 0
    files_rewritten: int = 0
    rows_copied: int = 0
    deletion_vectors_added: int = 0
    deletion_vectors_updated: int = 0
    inline_vectors: int = 0
    vector_files_written: int = 0
    bytes_added: int = 0
    commit_attempts: int = 0
    conflicts_resolved: int = 0
    dv_unions: int = 0
    files_replanned: int = 0
    restarts: int = 0
    scan_seconds: float = 0.0
    seconds: float = 0.0
    conflicts: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One human line.

        Example:
            >>> DeleteReport("/t", "x = 1", rows_deleted=0).line()
            '/t: no row matches x = 1'
        """
        if self.commit_version is None:
            return f"{self.table}: no row matches {self.predicate}"
        retries = f", {self.commit_attempts - 1} lost race(s)" if self.commit_attempts > 1 else ""
        merged = f", {self.conflicts_resolved} concurrent commit(s) merged" if self.conflicts_resolved else ""
        return (
            f"{self.table}: v{self.commit_version} deleted {self.rows_deleted} row(s) ({self.mode}) — "
            f"{self.deletion_vectors_added + self.deletion_vectors_updated} vector(s), {self.files_removed} file(s) "
            f"removed, {self.files_rewritten} rewritten; scanned {self.files_scanned} of {self.files_considered} "
            f"file(s){retries}{merged}, {self.seconds:.2f}s"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)


class _Restart(Exception):
    """A winning commit changed metadata or protocol (or, copy-on-write, touched our files)."""


# ======================================================================================= public API
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
    :func:`deltaextras.ops.upgrade.enable_deletion_vectors`); ``"copy_on_write"`` always rewrites.
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
    restarts = attempts = 0
    while True:
        op = _DeleteOperation(storage, predicate, expr, mode, inline_max_bytes, hooks or {})
        try:
            report = op.run()
        except _Restart as why:
            op.discard()
            restarts += 1
            attempts += op.report.commit_attempts
            log.info("delete on %s starts over: %s", storage.uri, why)
            if restarts > MAX_RESTARTS:
                raise CommitConflictError(
                    f"the table kept changing its metadata or protocol under the delete ({why}); nothing was "
                    "committed. Try again"
                ) from None
            continue
        except BaseException:
            op.discard()
            raise
        report.restarts = restarts
        report.commit_attempts += attempts
        report.seconds = round(time.monotonic() - started, 3)
        log.info("%s", json.dumps({"event": "delete", **report.to_dict()}, default=str))
        return report


def table_args(table: Any, storage_options: Mapping[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """URI and storage options of a path, URI or ``deltalake.DeltaTable``.

    Example:
        >>> table_args("/tmp/t", None)
        ('/tmp/t', None)
    """
    if isinstance(table, (str, os.PathLike)):
        return os.fspath(table), dict(storage_options) if storage_options is not None else None
    uri = getattr(table, "table_uri", None)
    if uri is None:
        raise InvalidArgumentError(f"expected a table URI or a deltalake.DeltaTable, got {type(table).__name__}")
    if storage_options is None:
        storage_options = getattr(table, "_storage_options", None)
    return str(uri), dict(storage_options) if storage_options else None


def load_snapshot(storage: TableStorage, version: int | None = None) -> TableSnapshot:
    """The table at ``version`` (default latest) from the log alone, protocol checked for a delete.

    Unlike :meth:`TableSnapshot.load` this does not open the table with deltalake.
    """
    v = latest_version(storage) if version is None else version
    state = replay(storage, v)
    check_protocol(state.protocol, dict(state.metadata.get("configuration") or {}), state.metadata.get("schemaString"))
    return TableSnapshot(storage, state, None)


def deletion_vectors_enabled(snapshot: TableSnapshot) -> bool:
    """Whether a writer may add deletion vectors: feature in the protocol and the table property true."""
    return (
        has_feature(snapshot.protocol, "deletionVectors")
        and str(snapshot.configuration.get("delta.enableDeletionVectors", "false")).lower() == "true"
    )


# ===================================================================================== the operation
@dataclass
class _Target:
    """One file with rows to delete; ``matched`` None means every row (decided by partition values)."""

    file: LiveFile
    num_rows: int
    matched: BitMap | None
    existing: BitMap | None = None  # None until read (whole-file targets never need it)
    outcome: str = ""  # remove | dv | rewrite | none
    descriptor: dict[str, Any] | None = None
    rewritten: dict[str, Any] | None = None  # the add of a copy-on-write output
    output_key: str | None = None
    rows_kept: int = 0
    cdc: dict[str, Any] | None = None  # the cdc action of its change data file (copy-on-write + CDF)

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def existing_count(self) -> int:
        if self.existing is not None:
            return len(self.existing)
        return self.file.deleted_rows

    def union(self) -> BitMap:
        assert self.matched is not None and self.existing is not None
        return self.matched | self.existing

    @property
    def new_rows(self) -> int:
        if self.matched is None:
            return self.num_rows - self.existing_count
        assert self.existing is not None
        return len(self.matched) - self.matched.intersection_cardinality(self.existing)


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
        self.written: list[str] = []  # keys of vector, rewritten and change data files we wrote
        self.last_actions: list[dict[str, Any]] = []
        self.targets: dict[str, _Target] = {}
        self.scanned_paths: set[str] = set()
        self.replacements: set[str] = set()

    # ------------------------------------------------------------------------------ setup
    def run(self) -> DeleteReport:
        snap = load_snapshot(self.storage)
        self._setup(snap)
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
                "delta.enableDeletionVectors=true); enable them with deltaextras.ops.upgrade.enable_deletion_vectors "
                "or `deltaextras delete --enable-deletion-vectors`, or delete with mode='auto'"
            )
        self.mode = "copy_on_write" if self.requested_mode == "copy_on_write" or not enabled else "deletion_vectors"
        self.report.mode = self.mode
        # Deletion vectors need no change data files: readers derive the deleted rows from the old and new
        # vector of each file (as Databricks writes them). Rewrites and outright removals do; and once a
        # commit has cdc actions, readers ignore its add and remove actions, so then every file gets one.
        self.cdf = change_data_feed_enabled(snap)
        fields = json.loads(snap.metadata["schemaString"])["fields"]
        self.full_schema = TableSchema(fields, [], snap.schema.mapping_mode)
        self.types = {c.name: self.full_schema.file_schema.field(c.physical).type for c in self.full_schema.columns}
        self.expr = bind(self.unbound, self.types)
        self.partition_cols = set(snap.partition_columns)
        self.columns = self.unbound.columns()
        self.data_cols = [c for c in self.columns if c not in self.partition_cols]
        self.partition_only = not self.data_cols

    # ------------------------------------------------------------------------------ scanning
    def _scan(self, snap: TableSnapshot, files: list[LiveFile]) -> list[_Target]:
        """Targets (files with at least one matching row) among ``files``, vectors not yet decided."""
        candidates: list[LiveFile] = []
        whole: list[LiveFile] = []
        for f in files:
            parts = self._partition_scalars(f)
            if self.partition_only:
                if self._partition_verdict(parts):
                    whole.append(f)
                else:
                    self.report.files_skipped += 1
            elif might_be_true(self.expr, self._file_stats(f, parts)):
                candidates.append(f)
            else:
                self.report.files_skipped += 1
        targets = [_Target(f, self._num_records(f), None) for f in whole]
        if candidates:
            existing = read_deletion_vectors(self.storage, [f.dv for f in candidates])
            threads = min(self._scan_threads(), len(candidates))
            with ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext() as pool:
                found = (
                    pool.map(self._scan_file, candidates, existing)
                    if pool is not None
                    else map(self._scan_file, candidates, existing)
                )
                last = time.monotonic()
                for n, (target, scanned, skipped) in enumerate(found, 1):
                    self.report.files_scanned += 1
                    self.report.row_groups_scanned += scanned
                    self.report.row_groups_skipped += skipped
                    if target is not None:
                        targets.append(target)
                    if time.monotonic() - last >= PROGRESS_SECONDS and n < len(candidates):
                        last = time.monotonic()
                        matched = sum(len(t.matched) for t in targets if t.matched is not None)
                        log.info(
                            "delete on %s: scanned %d of %d files, %d rows match so far",
                            self.storage.uri,
                            n,
                            len(candidates),
                            matched,
                        )
        self.scanned_paths.update(f.path for f in files)
        return targets

    def _scan_threads(self) -> int:
        """Files scanned at once: one per CPU on local disk (decoding bound), more on object stores
        (latency bound), at most ``SCAN_THREADS``."""
        cpus = os.cpu_count() or 1
        return max(1, min(SCAN_THREADS, cpus if self.storage.local_root is not None else 4 * cpus))

    def _partition_scalars(self, f: LiveFile) -> dict[str, pa.Scalar]:
        return {c: partition_scalar(f.partition_values.get(c), self.types[c]) for c in self.partition_cols}

    def _partition_verdict(self, parts: dict[str, pa.Scalar]) -> bool:
        one = pa.table({c: constant_array(s, 1) for c, s in parts.items()} or {"__row": pa.nulls(1)})
        return bool(true_mask(evaluate(self.expr, one))[0])

    def _num_records(self, f: LiveFile) -> int:
        n = f.num_records
        if n is not None:
            return n
        pf = self._open(f)
        return pf.metadata.num_rows

    def _file_stats(self, f: LiveFile, parts: dict[str, pa.Scalar]) -> Callable[[str], FieldStats | None]:
        stats = f.stats
        n = stats.get("numRecords")
        mins = stats.get("minValues") or {}
        maxs = stats.get("maxValues") or {}
        nulls = stats.get("nullCount") or {}

        def lookup(name: str) -> FieldStats | None:
            if name in parts:
                v = py_value(parts[name])
                rows = int(n) if n else 1
                return FieldStats(v, v, rows if v is None else 0, rows)
            phys = self.full_schema.physical(name)
            typ = self.types[name]
            nc = nulls.get(phys)
            return FieldStats(
                json_bound(mins.get(phys), typ, upper=False),
                json_bound(maxs.get(phys), typ, upper=True),
                int(nc) if isinstance(nc, (int, float)) and not isinstance(nc, bool) else None,
                int(n) if n is not None else None,
            )

        return lookup

    def _open(self, f: LiveFile) -> pq.ParquetFile:
        return open_data_file(self.storage, f, pre_buffer=True)

    def _scan_file(self, f: LiveFile, existing: BitMap) -> tuple[_Target | None, int, int]:
        """Scan one file: (target or None, row groups read, row groups skipped)."""
        pf = self._open(f)
        md = pf.metadata
        num_rows = md.num_rows
        if f.num_records is not None and f.num_records != num_rows:
            raise CorruptDataError(
                f"data file {f.path} has {num_rows} rows but the log says numRecords={f.num_records}"
            )
        parts = self._partition_scalars(f)
        file_names = pf.schema_arrow.names
        phys = {c: self.full_schema.physical(c) for c in self.data_cols}
        present = [c for c in self.data_cols if phys[c] in file_names]
        leaf = _leaf_indexes(pf)
        target_schema = pa.schema([self.full_schema.file_schema.field(phys[c]) for c in present])
        matched = BitMap()
        offset = 0
        scanned = skipped = 0
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            rows = rg.num_rows
            lookup = self._row_group_stats(rg, leaf, phys, parts, rows)
            if rows == 0 or not might_be_true(self.expr, lookup):
                skipped += 1
                offset += rows
                continue
            scanned += 1
            start = offset
            for data in self._row_group_batches(pf, i, rows, [phys[c] for c in present]):
                n = data.num_rows
                data = conform(data, target_schema, f.path)
                arrays: dict[str, Any] = {c: data.column(phys[c]) for c in present}
                for c in self.data_cols:
                    if c not in arrays:
                        arrays[c] = pa.nulls(n, self.types[c])
                for c in self.columns:
                    if c in parts:
                        arrays[c] = constant_array(parts[c], n)
                positions = np.flatnonzero(true_mask(evaluate(self.expr, pa.table(arrays))))
                if len(positions):
                    matched |= bitmap_from_positions(positions + start)
                start += n
                del data, arrays
            offset += rows
        if not len(matched):
            return None, scanned, skipped
        t = _Target(f, num_rows, matched, existing)
        return (t if t.new_rows else None), scanned, skipped

    @staticmethod
    def _row_group_batches(pf: pq.ParquetFile, index: int, rows: int, columns: list[str]) -> Iterable[pa.RecordBatch]:
        """The predicate's columns of one row group in bounded batches (an empty batch of ``rows`` rows
        when the file has none of them)."""
        if not columns:
            yield pa.record_batch({"__rows": pa.nulls(rows, pa.int8())}).select([])
            return
        yield from pf.iter_batches(batch_size=SCAN_BATCH_ROWS, row_groups=[index], columns=columns, use_threads=False)

    def _row_group_stats(
        self, rg: Any, leaf: dict[str, int], phys: dict[str, str], parts: dict[str, pa.Scalar], rows: int
    ) -> Callable[[str], FieldStats | None]:
        def lookup(name: str) -> FieldStats | None:
            if name in parts:
                v = py_value(parts[name])
                return FieldStats(v, v, rows if v is None else 0, rows)
            j = leaf.get(phys.get(name, ""))
            if j is None:
                return FieldStats(None, None, rows, rows)  # column absent: all null
            st = rg.column(j).statistics
            if st is None:
                return None
            nulls = st.null_count if st.has_null_count else None
            lo = hi = None
            if st.has_min_max:
                low, high = _statistic_bounds(st, self.types[name])
                lo = parquet_bound(low, self.types[name], upper=False)
                hi = parquet_bound(high, self.types[name], upper=True)
            return FieldStats(lo, hi, nulls, rows)

        return lookup

    # ------------------------------------------------------------------------------ outcomes
    def _decide(self, targets: Iterable[_Target]) -> None:
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
                self._rewrite(t)
            t.cdc = t.cdc if t.outcome == "rewrite" else None
        self._write_vectors([t for t in targets if t.outcome == "dv"])

    def _write_vectors(self, targets: list[_Target]) -> None:
        if not targets:
            return
        descriptors, writer = build_descriptors([t.union() for t in targets], inline_max_bytes=self.inline_max_bytes)
        if writer is not None:
            self._write_vector_file(writer)
        for t, d in zip(targets, descriptors, strict=True):
            t.descriptor = d

    def _write_vector_file(self, writer: VectorFileWriter) -> None:
        self.written.append(writer.key)
        writer.write(self.storage)

    def _rewrite(self, t: _Target) -> None:
        """Copy-on-write: the file without the deleted rows, streamed row group by row group (and, on a
        table with change data feed, the rows it deletes into a change data file)."""
        keep = keep_mask(t.union(), t.num_rows)
        kept = int(keep.sum())
        if kept == 0:
            t.outcome = "remove"
            return
        pf = self._open(t.file)
        target = self.snap.schema.file_schema
        cfg = self.snap.configuration
        stats_cols = cfg.get("delta.dataSkippingStatsColumns")
        collector = StatsCollector(
            target,
            indexed_columns=int(cfg.get("delta.dataSkippingNumIndexedCols", DEFAULT_INDEXED_COLUMNS)),
            stats_columns=[c.strip() for c in stats_cols.split(",")] if stats_cols else None,
        )
        directory = t.file.key.rpartition("/")[0]
        name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
        key = f"{directory}/{name}" if directory else name
        self.written.append(key)
        gone = None
        changes = None
        if self.cdf:
            assert t.existing is not None  # copy-on-write targets always come from a scan
            gone = keep_mask(t.existing, t.num_rows) & ~keep
            changes = self._change_sink(t)
        cols = [n for n in target.names if n in pf.schema_arrow.names]
        sink = ParquetSink(self.storage, key, target)
        try:
            offset = 0
            for i in range(pf.metadata.num_row_groups):
                rows = pf.metadata.row_group(i).num_rows
                part = keep[offset : offset + rows]
                out = None if gone is None else gone[offset : offset + rows]
                offset += rows
                if not part.any() and (out is None or not out.any()):
                    continue
                data = conform(pf.read_row_group(i, columns=cols), target, t.file.path)
                if part.any():
                    piece = data if part.all() else data.filter(bool_array(part))
                    sink.write(piece)
                    collector.update(piece)
                if changes is not None and out is not None and out.any():
                    changes.write(as_deletes(data.filter(bool_array(out))))
            size = sink.close(expect_rows=kept)
            if changes is not None:
                t.cdc = changes.action()
        except BaseException:
            sink.abort()
            if changes is not None:
                changes.abort()
            raise
        t.outcome = "rewrite"
        t.output_key = key
        t.rows_kept = kept
        t.rewritten = {
            "add": {
                "path": quote(key, safe="/=-_.~"),
                "partitionValues": dict(t.file.add.get("partitionValues") or {}),
                "size": size,
                "modificationTime": now_ms(),
                "dataChange": True,
                "stats": json.dumps(collector.to_dict(), separators=(",", ":")),
            }
        }

    def _change_sink(self, t: _Target) -> ChangeSink:
        """A change data file for the rows deleted from one file (in ``_change_data/<partition dir>/``)."""
        sink = ChangeSink(
            self.storage,
            t.file.key.rpartition("/")[0],
            self.snap.schema.file_schema,
            dict(t.file.add.get("partitionValues") or {}),
        )
        self.written.append(sink.key)
        return sink

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
                self._write_changes(t)

    def _write_changes(self, t: _Target) -> None:
        """Change data of one file: the rows this delete removes from it (its live rows, when removed outright)."""
        existing = t.existing if t.existing is not None else read_deletion_vectors(self.storage, [t.file.dv])[0]
        newly = BitMap(range(t.num_rows)) - existing if t.matched is None else t.matched - existing
        gone = ~keep_mask(newly, t.num_rows)
        pf = self._open(t.file)
        target = self.snap.schema.file_schema
        cols = [n for n in target.names if n in pf.schema_arrow.names]
        changes = self._change_sink(t)
        try:
            offset = 0
            for i in range(pf.metadata.num_row_groups):
                rows = pf.metadata.row_group(i).num_rows
                part = gone[offset : offset + rows]
                offset += rows
                if part.any():
                    data = conform(pf.read_row_group(i, columns=cols), target, t.file.path)
                    changes.write(as_deletes(data if part.all() else data.filter(bool_array(part))))
            t.cdc = changes.action()
        except BaseException:
            changes.abort()
            raise

    # ------------------------------------------------------------------------------ commit
    def _actions(self, read_version: int) -> list[dict[str, Any]]:
        ts = now_ms()
        active = [t for t in self.targets.values() if t.outcome != "none"]
        removes: list[dict[str, Any]] = []
        adds: list[dict[str, Any]] = []
        for t in sorted(active, key=lambda t: t.path):
            r = remove_action(t.file.add, ts)
            r["remove"]["dataChange"] = True
            removes.append(r)
            if t.outcome == "dv":
                assert t.descriptor is not None
                adds.append(dv_add(t.file.add, t.descriptor, t.num_rows))
            elif t.outcome == "rewrite":
                assert t.rewritten is not None
                adds.append(t.rewritten)
        changes = [t.cdc for t in sorted(active, key=lambda t: t.path) if t.cdc] if self._needs_changes() else []
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
            "numAddedBytes": sum(int(t.rewritten["add"]["size"]) for t in active if t.rewritten),
            "scanTimeMs": int(self.report.scan_seconds * 1000),
        }
        info = {
            "commitInfo": {
                "timestamp": ts,
                "operation": "DELETE",
                "operationParameters": {"predicate": self.predicate},
                "readVersion": read_version,
                "isolationLevel": "WriteSerializable",
                "isBlindAppend": False,
                "operationMetrics": {k: str(v) for k, v in metrics.items()},
                "engineInfo": ENGINE,
                "txnId": str(uuid.uuid4()),
            }
        }
        return [info, *removes, *adds, *changes]

    def _commit(self, read_version: int) -> DeleteReport:
        report = self.report
        next_version = read_version + 1
        base = read_version
        while True:
            next_version, base = self._merge_winners(next_version, base)
            if not any(t.outcome != "none" for t in self.targets.values()):
                self._finish_counts()
                report.commit_version = None
                self.discard()
                return report
            report.commit_attempts += 1
            if "before_commit" in self.hooks:
                self.hooks["before_commit"](next_version)
            self._prepare_changes()
            self.last_actions = self._actions(base)
            payload = encode(self.last_actions)
            if self.storage.put_if_absent(commit_key(next_version), payload):
                break
            if report.commit_attempts >= MAX_LOST_RACES:
                raise CommitRetriesExhaustedError(
                    f"lost the race for the next log version {report.commit_attempts} times in a row; nothing was "
                    "committed, retry later"
                )
        report.commit_version = next_version
        self._finish_counts()
        self._drop_unused_outputs()
        maybe_checkpoint(self.storage, next_version, self.snap.configuration, self.snap.protocol)
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
        r.inline_vectors = sum(1 for t in dv if t.descriptor and t.descriptor["storageType"] == "i")
        used = {t.descriptor["pathOrInlineDv"] for t in dv if t.descriptor and t.descriptor["storageType"] == "u"}
        r.vector_files_written = len(used)
        r.bytes_added = sum(int(t.rewritten["add"]["size"]) for t in active if t.rewritten)

    def _merge_winners(self, version: int, base: int) -> tuple[int, int]:
        """Read every commit from ``version`` on; fold the ones that touched our files into the plan.

        Returns the first free version and the version the plan now reflects.
        """
        stale: set[str] = set()
        gone: set[str] = set()
        v = version
        while True:
            actions = read_commit(self.storage, v)
            if actions is None:
                break
            if any("metaData" in a or "protocol" in a for a in actions):
                raise _Restart(f"commit {v} changed the table's metadata or protocol")
            removed = {a["remove"]["path"] for a in actions if "remove" in a}
            added = {a["add"]["path"] for a in actions if "add" in a}
            mine = removed & (set(self.targets) | gone | stale)
            if mine:
                self.report.conflicts_resolved += 1
                for p in sorted(mine):
                    if p in added:
                        stale.add(p)
                        self.report.conflicts.append(f"v{v}: deletion vector of {p} changed")
                    else:
                        gone.add(p)
                        stale.discard(p)
                        self.report.conflicts.append(f"v{v}: {p} was removed")
            if removed & (gone | self.replacements):
                self.replacements |= added - removed
            v += 1
        if not stale and not gone:
            return v, base
        if self.mode == "copy_on_write":
            raise _Restart(f"a concurrent commit changed {len(stale) + len(gone)} file(s) this delete rewrites")
        self._resolve(v - 1, stale, gone)
        return v, v - 1

    def _resolve(self, version: int, stale: set[str], gone: set[str]) -> None:
        """Re-plan against ``version``: union re-read vectors, scan the files that replaced ours."""
        snap = load_snapshot(self.storage, version)
        if snap.metadata.get("id") != self.snap.metadata.get("id"):
            raise _Restart("the table was replaced")
        self.snap = snap
        live = {f.path: f for f in snap.files}
        changed: list[_Target] = []
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
        fresh = [live[p] for p in sorted(self.replacements) if p in live and p not in known]
        if fresh:
            self.report.files_replanned += len(fresh)
            self.report.files_considered += len(fresh)
            for t in self._scan(snap, fresh):
                self.targets[t.path] = t
                changed.append(t)
        self._decide(changed)

    # ------------------------------------------------------------------------------ cleanup
    def _drop_unused_outputs(self) -> None:
        """Delete the files written for attempts that the committed actions no longer name."""
        used = set()
        for a in self.last_actions:
            if "add" in a:
                used.add(unquote(a["add"]["path"]))
                dv = a["add"].get("deletionVector")
                if dv and dv.get("storageType") == "u":
                    used.add(file_key(dv))
            elif "cdc" in a:
                used.add(unquote(a["cdc"]["path"]))
        for key in self.written:
            if key not in used:
                self._delete_quietly(key)

    def discard(self) -> None:
        """Delete every file this attempt wrote (nothing of it was committed)."""
        for key in self.written:
            self._delete_quietly(key)
        self.written = []

    def _delete_quietly(self, key: str) -> None:
        try:
            self.storage.delete(key)
        except Exception:  # cleanup must not mask the original error
            log.warning("could not delete orphan %s (vacuum will)", key)


def _leaf_indexes(pf: pq.ParquetFile) -> dict[str, int]:
    schema = pf.metadata.schema
    return {schema.column(j).path: j for j in range(len(schema))}


# ================================================================================= actions & values
def dv_add(add: dict[str, Any], descriptor: dict[str, Any], num_rows: int) -> dict[str, Any]:
    """The ``add`` re-adding a file with a new deletion vector: same path, partition values, size,
    modification time and tags; ``dataChange: true``; statistics kept but marked ``tightBounds: false``,
    with ``numRecords`` the physical row count.

    Example:
        >>> a = dv_add({"path": "p.parquet", "partitionValues": {}, "size": 9, "modificationTime": 1,
        ...             "dataChange": False, "stats": '{"numRecords":10,"minValues":{"x":0}}'},
        ...            {"storageType": "i", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}, 10)
        >>> a["add"]["dataChange"], json.loads(a["add"]["stats"])
        (True, {'numRecords': 10, 'minValues': {'x': 0}, 'tightBounds': False})
    """
    body = {k: add[k] for k in _ADD_KEYS if k in add and add[k] is not None}
    raw = add.get("stats")
    try:
        stats = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except (TypeError, ValueError):
        stats = {}
    stats["numRecords"] = num_rows
    stats["tightBounds"] = False
    body["stats"] = json.dumps(stats, separators=(",", ":"))
    body["dataChange"] = True
    body["deletionVector"] = dict(descriptor)
    body.setdefault("partitionValues", {})
    return {"add": body}


def partition_scalar(text: str | None, typ: pa.DataType) -> pa.Scalar:
    """A partition value as the log serializes it (text; empty or None is NULL), typed.

    Example:
        >>> partition_scalar("2024-01-02", pa.date32()).as_py()
        datetime.date(2024, 1, 2)
        >>> partition_scalar("", pa.int64()).is_valid
        False
    """
    if text is None or text == "":
        return scalar(None, typ)
    try:
        if pa.types.is_timestamp(typ):
            value = _iso_timestamp(text)
            if typ.tz is None:
                value = value.replace(tzinfo=None)
            elif value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)
            return scalar(value, typ)
        if pa.types.is_date(typ):
            return scalar(dt.date.fromisoformat(text[:10]), typ)
        if pa.types.is_boolean(typ):
            return scalar(text.lower() == "true", typ)
        if pa.types.is_decimal(typ):
            return scalar(Decimal(text), typ)
        if pa.types.is_integer(typ):
            return scalar(int(text), typ)
        if pa.types.is_floating(typ):
            return scalar(float(text), typ)
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            return scalar(text.encode("utf-8"), typ)
        return scalar(text, typ)
    except (ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
        raise CorruptDataError(f"partition value {text!r} is not a valid {typ}: {exc}") from None


def _iso_timestamp(text: str) -> dt.datetime:
    s = text.strip().replace("T", " ", 1)
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    value = dt.datetime.fromisoformat(s)
    return value.astimezone(dt.timezone.utc) if value.tzinfo is not None else value


def json_bound(value: Any, typ: pa.DataType, *, upper: bool) -> Any:
    """A log statistic (JSON) as a Python bound comparable with bound literals; None when unusable.

    Upper bounds are widened where writers truncate: timestamps by a millisecond (statistics are
    truncated to milliseconds), text by a maximal character (statistics keep a prefix).

    Example:
        >>> json_bound("2024-01-01T00:00:00.000Z", pa.timestamp("us", tz="UTC"), upper=True)
        datetime.datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=datetime.timezone.utc)
        >>> json_bound(5, pa.int32(), upper=False)
        5
    """
    if value is None or isinstance(value, (dict, list)):
        return None
    try:
        if pa.types.is_timestamp(typ):
            ts = _iso_timestamp(str(value))
            if typ.tz is None:
                ts = ts.replace(tzinfo=None)
            elif ts.tzinfo is None:
                ts = ts.replace(tzinfo=dt.timezone.utc)
            return ts + dt.timedelta(milliseconds=1) if upper else ts
        if pa.types.is_date(typ):
            return dt.date.fromisoformat(str(value)[:10])
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return str(value) + _STRING_MAX_PAD if upper else str(value)
        if pa.types.is_boolean(typ):
            return bool(value) if isinstance(value, bool) else None
        if pa.types.is_decimal(typ):
            return Decimal(str(value))
        if pa.types.is_integer(typ) or pa.types.is_floating(typ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            return value
    except (ValueError, TypeError, ArithmeticError):
        return None
    return None


def _statistic_bounds(st: Any, typ: pa.DataType) -> tuple[Any, Any]:
    """A Parquet statistic's min and max; INT64 timestamps decoded from their raw integers (pyarrow's
    own decoding imports pandas), other timestamps unusable."""
    if not pa.types.is_timestamp(typ):
        return st.min, st.max
    if st.physical_type != "INT64":
        return None, None
    try:
        info = json.loads(st.logical_type.to_json())
    except (ValueError, AttributeError):
        return None, None
    unit = info.get("timeUnit")
    if info.get("Type") != "Timestamp" or unit not in ("milliseconds", "microseconds", "nanoseconds"):
        return None, None
    tz = dt.timezone.utc if info.get("isAdjustedToUTC") else None

    def moment(raw: Any, upper: bool) -> dt.datetime | None:
        if not isinstance(raw, int):
            return None
        if unit == "milliseconds":
            micros = raw * 1000
        elif unit == "microseconds":
            micros = raw
        else:  # nanoseconds, rounded outwards so the bound still holds
            micros = -(-raw // 1000) if upper else raw // 1000
        try:
            return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)).replace(tzinfo=tz)
        except OverflowError:
            return None

    return moment(st.min_raw, False), moment(st.max_raw, True)


def parquet_bound(value: Any, typ: pa.DataType, *, upper: bool) -> Any:
    """A Parquet row-group statistic as a Python bound (text upper bounds widened, as writers may
    truncate them); None when unusable.

    Example:
        >>> parquet_bound("abc", pa.string(), upper=True) > "abc"
        True
    """
    if value is None:
        return None
    try:
        if isinstance(value, bytes) and (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            value = value.decode("utf-8")
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return str(value) + _STRING_MAX_PAD if upper else str(value)
        if pa.types.is_timestamp(typ):
            if not isinstance(value, dt.datetime):
                return None
            if typ.tz is None:
                return value.replace(tzinfo=None)
            return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        if isinstance(value, float) and value != value:  # NaN bound
            return None
        return py_value(scalar(value, typ))
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError, pa.ArrowException):
        return None
