"""Finding the rows a delete removes: files pruned by partition values and log statistics, row groups by
Parquet statistics, and only the predicate's columns read from the rest.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.expr.predicate import parse
    >>> from deltaextras.ops.common.table import load_snapshot
    >>> from deltaextras.core.storage import TableStorage
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [1, 2, 3]}))
    >>> snap = load_snapshot(TableStorage(path))
    >>> report = DeleteReport(path, "k >= 2")
    >>> found = Scanner(snap, parse("k >= 2")).scan(snap.files, report, threads=1, progress_seconds=10,
    ...                                             progress=print)
    >>> [sorted(t.matched) for t in found]
    [[1, 2]]
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from ...core.actions import Add, Cdc, DeletionVectorDescriptor
from ...core.arrays import constant_array, py_value, true_mask
from ...core.dv import bitmap_from_positions, read_deletion_vectors
from ...core.schema import TableSchema, conform
from ...core.snapshot import LiveFile, TableSnapshot, open_data_file
from ...core.values import exact_statistics
from ...errors import CorruptDataError
from ...expr.predicate import Expr, FieldStats, bind, evaluate, might_be_true
from ..common.bounds import _statistic_bounds, json_bound, parquet_bound, partition_scalar
from .report import DeleteReport

SCAN_BATCH_ROWS = 131_072


@dataclass
class Target:
    """One file with rows to delete; ``matched`` None means every row (decided by partition values)."""

    file: LiveFile
    num_rows: int
    matched: BitMap | None
    existing: BitMap | None = None  # None until read (whole-file targets never need it)
    outcome: str = ""  # remove | dv | rewrite | none
    descriptor: DeletionVectorDescriptor | None = None
    rewritten: Add | None = None  # the add of a copy-on-write output
    output_key: str | None = None
    rows_kept: int = 0
    cdc: Cdc | None = None  # the cdc action of its change data file (copy-on-write + CDF)

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


class Scanner:
    """A predicate bound to one table's schema, and the scan of files with it."""

    def __init__(self, snap: TableSnapshot, unbound: Expr) -> None:
        self.storage = snap.storage
        fields = json.loads(snap.metadata.schema_string or "")["fields"]
        self.full_schema = TableSchema(fields, [], snap.schema.mapping_mode)
        self.types = {c.name: self.full_schema.file_schema.field(c.physical).type for c in self.full_schema.columns}
        self.expr = bind(unbound, self.types)
        self.partition_cols = set(snap.partition_columns)
        self.columns = unbound.columns()
        self.data_cols = [c for c in self.columns if c not in self.partition_cols]
        self.partition_only = not self.data_cols

    def scan(
        self,
        files: list[LiveFile],
        report: DeleteReport,
        *,
        threads: int,
        progress_seconds: float,
        progress: Callable[[int, int, int], None],
    ) -> list[Target]:
        """Targets (files with at least one matching row) among ``files``, vectors not yet decided; the
        counts go to ``report``, ``progress(scanned, of, rows matched)`` at most every ``progress_seconds``."""
        candidates: list[LiveFile] = []
        whole: list[LiveFile] = []
        for f in files:
            parts = self._partition_scalars(f)
            if self.partition_only:
                if self._partition_verdict(parts):
                    whole.append(f)
                else:
                    report.files_skipped += 1
            elif might_be_true(self.expr, self._file_stats(f, parts)):
                candidates.append(f)
            else:
                report.files_skipped += 1
        targets = [Target(f, self.num_records(f), None) for f in whole]
        if candidates:
            existing = read_deletion_vectors(self.storage, [f.dv for f in candidates])
            threads = min(self._scan_threads(threads), len(candidates))
            with ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext() as pool:
                found = (
                    pool.map(self._scan_file, candidates, existing)
                    if pool is not None
                    else map(self._scan_file, candidates, existing)
                )
                last = time.monotonic()
                for n, (target, scanned, skipped) in enumerate(found, 1):
                    report.files_scanned += 1
                    report.row_groups_scanned += scanned
                    report.row_groups_skipped += skipped
                    if target is not None:
                        targets.append(target)
                    if time.monotonic() - last >= progress_seconds and n < len(candidates):
                        last = time.monotonic()
                        progress(n, len(candidates), sum(len(t.matched) for t in targets if t.matched is not None))
        return targets

    def might_match(self, f: LiveFile) -> bool:
        """Whether a file may hold rows the predicate matches (its partition values and statistics)."""
        parts = self._partition_scalars(f)
        if self.partition_only:
            return self._partition_verdict(parts)
        return might_be_true(self.expr, self._file_stats(f, parts))

    def _scan_threads(self, most: int) -> int:
        """Files scanned at once: one per CPU on local disk (decoding bound), more on object stores
        (latency bound), at most ``most``."""
        cpus = os.cpu_count() or 1
        return max(1, min(most, cpus if self.storage.local_root is not None else 4 * cpus))

    def _partition_scalars(self, f: LiveFile) -> dict[str, pa.Scalar]:
        return {c: partition_scalar(f.partition_values.get(c), self.types[c]) for c in self.partition_cols}

    def _partition_verdict(self, parts: dict[str, pa.Scalar]) -> bool:
        one = pa.table({c: constant_array(s, 1) for c, s in parts.items()} or {"__row": pa.nulls(1)})
        return bool(true_mask(evaluate(self.expr, one))[0])

    def num_records(self, f: LiveFile) -> int:
        n = f.num_records
        if n is not None:
            return n
        pf = self.open(f)
        return pf.metadata.num_rows

    def _file_stats(self, f: LiveFile, parts: dict[str, pa.Scalar]) -> Callable[[str], FieldStats | None]:
        stats = f.stats
        n = stats.get("numRecords")
        mins = stats.get("minValues") or {}
        maxs = stats.get("maxValues") or {}
        nulls = stats.get("nullCount") or {}
        exact: dict[str, Any] = {}

        def lookup(name: str) -> FieldStats | None:
            if name in parts:
                v = py_value(parts[name])
                rows = int(n) if n else 1
                return FieldStats(v, v, rows if v is None else 0, rows)
            phys = self.full_schema.physical(name)
            typ = self.types[name]
            nc = nulls.get(phys)
            low, high = mins, maxs
            if pa.types.is_decimal(typ):  # decimals from the log's text, not through a double
                if not exact:
                    exact.update(exact_statistics(f.add.stats) or {"minValues": mins, "maxValues": maxs})
                low, high = exact.get("minValues") or {}, exact.get("maxValues") or {}
            return FieldStats(
                json_bound(low.get(phys), typ, upper=False),
                json_bound(high.get(phys), typ, upper=True),
                int(nc) if isinstance(nc, (int, float)) and not isinstance(nc, bool) else None,
                int(n) if n is not None else None,
            )

        return lookup

    def open(self, f: LiveFile) -> pq.ParquetFile:
        return open_data_file(self.storage, f, pre_buffer=True)

    def _scan_file(self, f: LiveFile, existing: BitMap) -> tuple[Target | None, int, int]:
        """Scan one file: (target or None, row groups read, row groups skipped)."""
        pf = self.open(f)
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
        t = Target(f, num_rows, matched, existing)
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


def _leaf_indexes(pf: pq.ParquetFile) -> dict[str, int]:
    schema = pf.metadata.schema
    return {schema.column(j).path: j for j in range(len(schema))}
