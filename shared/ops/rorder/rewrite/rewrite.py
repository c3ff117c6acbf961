"""The streaming rewrite of one partition: read the live rows of its files (deletion vectors applied),
and write files where each value of ``by`` fills its own row group(s), values ascending.

Memory is bounded by ``memory_budget`` (Arrow bytes held at once, estimated as decoding will produce
them) plus the readers' and writers' buffers, unless a single value alone is larger: a pass's rows
plus one reordered copy of its widest column fit 1.25 budgets. When the partition fits, it is read in
one pass. Otherwise the value domain is cut into passes that each fit: row groups whose statistics
fall inside one pass are read in that pass; row groups that span several passes (random order) are
decoded once (the next batch in a second thread) and spilled, split by pass, to local Arrow IPC
files. Every pass's rows are de-duplicated, sorted on indices and written value by value, each group
of values gathered in a second thread while the previous group is encoded, so the output is the same
however many passes it takes.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.core.snapshot import TableSnapshot
    >>> from deltaextras.ops.rorder.options import RorderOptions
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"node_id": [2, 1, 2], "v": [1.0, 2.0, 3.0], "node_id_range": [0, 0, 0]}),
    ...                 partition_by=["node_id_range"])
    >>> snap = TableSnapshot.load(path)
    >>> result = PartitionRewriter(snap, snap.files, "node_id", RorderOptions(), {"node_id_range": "0"}).run()
    >>> result.rows_out, [o.row_groups for o in result.outputs]
    (3, [2])
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ....core import row_tracking
from ....core.arrays import (
    bool_array,
    bool_numpy,
    index_array,
    numpy_indices,
    plain_integers,
    py_value,
    scalar,
)
from ....core.protocol import check_clustering
from ....core.schema import conform
from ....core.snapshot import LiveFile, TableSnapshot, open_data_file
from ....core.stats import DEFAULT_INDEXED_COLUMNS
from ....core.values import canonical, int_numpy, nan_mask
from ....errors import CorruptDataError, InvalidArgumentError
from ...common.scratch import scratch_dir
from ..options import RorderOptions
from .lanes import lane_count, split_values, value_groups, write_lanes, write_pipelined
from .layout import LAYOUT_TAG, RUN_TAG, layout_signature, page_index_pays, sample_cardinality, writer_properties
from .ordering import gatherer, packable, packed, packed_gatherer, permutation
from .output import OutputFile, OutputWriter, RewriteResult, timed
from .packed_keys import PackedOrder
from .passes import Pass, RowGroup, comparable_stats, fixed_bits, leaf_index, overlaps, pass_mask
from .row_keys import dropped_rows, first_rows
from .threads import HelperPool

log = logging.getLogger(__name__)

SPILL_BATCH_ROWS = 262_144
SAMPLE_ROWS = 4_096  # rows decoded per input file to measure variable-width columns
PASS_HEADROOM = 1.25  # a pass's rows plus one reordered column fit this many budgets (see _pass_capacity)
RELEASE_EVERY = 16 * 1024 * 1024
READ_THREADS = 2
OPEN_THREADS = 4
WHOLE_FILE_BYTES = 4 * 1024 * 1024  # object-store inputs up to this size are fetched whole, in one request
WHOLE_SHARE = 4  # ... as long as together they stay within a quarter of the memory budget
COMBINE_THREADS = 2
GATHER_GROUPS = 16  # a pass's values are gathered in about this many groups
DIRECT_SPAN = 1 << 20  # integer values spanning fewer than this are routed to passes by one array lookup


class PartitionRewriter:
    """Rewrite the given live files of one partition into the row-group-per-value layout."""

    def __init__(
        self,
        snapshot: TableSnapshot,
        files: list[LiveFile],
        by: str,
        options: RorderOptions,
        partition_values: dict[str, str | None],
        *,
        progress: Callable[[str], None] | None = None,
        on_output: Callable[[OutputFile], None] | None = None,
        on_duplicates: Callable[[pa.Table], None] | None = None,
        cuts: tuple[Any, ...] = (),
    ) -> None:
        self.snapshot = snapshot
        # Values at which an output file must end (a value-range unit's cut points), ascending; nulls then
        # get a file of their own (deltaextras.ops.rorder.value_ranges).
        self.cuts = tuple(cuts)
        # Called with each output file once it is complete on storage (tracing and fault injection).
        self.on_output = on_output
        # Called with the rows ``unique_by`` drops, pass by pass (change data of the deletions they are).
        self.on_duplicates = on_duplicates
        self.storage = snapshot.storage
        self.files = files
        self.options = options
        self.partition_values = partition_values
        self.progress = progress or (lambda _msg: None)
        schema = snapshot.schema
        # A table that tracks rows: its rows keep their ids and commit versions in materialized columns.
        self.row_columns = row_tracking.columns(snapshot.protocol, snapshot.metadata)
        self.stats_target = schema.file_schema
        self.target = schema.file_schema
        if self.row_columns is not None:
            self.target = pa.schema([*schema.file_schema, *self.row_columns.fields()])
        by_col = schema.column(by, "by")
        if by in schema.partition_columns:
            raise InvalidArgumentError(f"by column {by!r} is a partition column; name a data column")
        self.by = by_col.physical
        self.by_type = self.target.field(self.by).type
        if pa.types.is_nested(self.by_type):
            raise InvalidArgumentError(f"by column {by!r} has nested type {self.by_type}; name a primitive column")
        self.sort_keys = [(self.by, "ascending", "at_end")] + [
            (schema.column(c, "sort_by").physical, o, "at_end") for c, o in options.sort_by
        ]
        self.unique_keys = [self.by] + [
            p for p in (schema.column(c, "unique_by").physical for c in options.unique_by) if p != self.by
        ]
        self.tags = {
            LAYOUT_TAG: layout_signature(by, options.sort_by, options.unique_by),
            RUN_TAG: uuid.uuid4().hex,
        }
        cfg = snapshot.configuration
        stats_cols = cfg.get("delta.dataSkippingStatsColumns")
        self.stats_columns = [c.strip() for c in stats_cols.split(",")] if stats_cols else None
        # columns whose statistics every output carries: by, and every clustering column (the protocol asks)
        clustering = check_clustering(snapshot.protocol, getattr(snapshot, "domains", {}), by, self.by)
        self.always_stats = (self.by, *(clustering.others if clustering else ()))
        self.indexed_columns = int(cfg.get("delta.dataSkippingNumIndexedCols", DEFAULT_INDEXED_COLUMNS))
        self._row_bits = sum(fixed_bits(f.type) for f in self.target)
        self._variable_columns = {f.name for f in self.target if not fixed_bits(f.type)}
        # Estimated Arrow bytes of each column over all inputs: the pass planner sizes passes so the
        # rows plus one reordered copy of the widest column fit the budget.
        self._column_bytes = dict.fromkeys(self.target.names, 0)
        self.result = RewriteResult()
        self._parquet: list[pq.ParquetFile] = []
        self._masks: list[np.ndarray | None] = []
        self._row_groups: list[RowGroup] = []
        self._spill_dir: str | None = None
        self._writers: list[OutputWriter] = []
        self._one_pass = False
        self._capacity = options.memory_budget
        self._values: pa.Array = pa.nulls(0, self.by_type)  # pa.array() would import pandas
        self._value_pass = np.zeros(1, dtype=np.int32)
        self._pass_table: tuple[int, np.ndarray] | None = None  # integer values: (smallest, pass by value - it)

    # ------------------------------------------------------------------ driver
    def run(self) -> RewriteResult:
        """Rewrite; on any failure delete the files written so far and re-raise."""
        try:
            with timed(self.result, "open"):
                self._open_inputs()
            with timed(self.result, "plan"):
                passes = self._plan_passes()
            self.result.passes = len(passes)
            self._one_pass = len(passes) == 1
            with timed(self.result, "spill"):
                spills = self._spill(passes) if len(passes) > 1 else {}
            for k, p in enumerate(passes):
                started = time.monotonic()
                # The pass's rows are handed over, not kept here: _write_pass frees them column by column.
                rows = self._write_pass(self._gather(k, p, spills.get(k)))
                _release()
                self.progress(
                    f"pass {k + 1}/{len(passes)} ({p.label()}): {rows} rows in {time.monotonic() - started:.2f}s"
                )
            with timed(self.result, "finish"):
                outputs = [out for writer in self._writers for out in writer.close()]
            self.result.outputs = outputs
            self.result.rows_out = sum(o.rows for o in outputs)
            expected = self.result.rows_in  # live rows read, deletion vectors applied
            if self.result.rows_out + self.result.duplicates_removed != expected:
                raise CorruptDataError(
                    f"rewrite accounted for {self.result.rows_out + self.result.duplicates_removed} of "
                    f"{expected} live rows; aborting before commit"
                )
            return self.result
        except BaseException:
            self.discard()
            raise
        finally:
            if self._spill_dir:
                shutil.rmtree(self._spill_dir, ignore_errors=True)

    def discard(self) -> None:
        """Delete every output file written by this rewrite (best effort)."""
        for writer in self._writers:
            writer.abort()
        for out in self.result.outputs:
            try:
                self.storage.delete(out.key)
            except Exception:
                log.warning("could not delete orphan %s", out.key)

    # ------------------------------------------------------------------ inputs
    def _open_inputs(self) -> None:
        vectors = any(f.dv for f in self.files)
        pre_buffer = self.storage.local_root is None
        whole = whole_reads(self.files, self.options.memory_budget) if pre_buffer else set()

        def open_one(i: int) -> tuple[pq.ParquetFile, dict[str, float]]:
            pf = open_data_file(self.storage, self.files[i], pre_buffer=pre_buffer, whole=i in whole)
            return pf, self._decoded_widths(pf)

        if pre_buffer and len(self.files) > 1:
            # On object storage each footer (or small file) is a round trip: a few at a time, while the
            # deletion vectors are read beside them. (Local footers parse faster on one thread.)
            with HelperPool(OPEN_THREADS) as pool:
                loading = pool.submit(self.snapshot.selection_vectors, self.files) if vectors else None
                opened = list(pool.map(open_one, range(len(self.files))))
                masks = loading.result() if loading is not None else {}
        else:
            masks = self.snapshot.selection_vectors(self.files) if vectors else {}
            opened = [open_one(i) for i in range(len(self.files))]
        for fi, (f, (pf, widths)) in enumerate(zip(self.files, opened, strict=True)):
            md = pf.metadata
            mask = masks.get(f.path)
            deleted = 0
            if mask is not None:
                if len(mask) < md.num_rows:
                    mask = np.concatenate([mask, np.ones(md.num_rows - len(mask), dtype=bool)])
                mask = mask[: md.num_rows]
                deleted = int(md.num_rows - mask.sum())
            self.result.deleted_rows_dropped += deleted
            self.result.rows_in += md.num_rows - deleted
            self._parquet.append(pf)
            self._masks.append(mask)
            leaf = leaf_index(pf, self.by)
            trusted = comparable_stats(pf, self.by, self.by_type)
            offset = 0
            for i in range(md.num_row_groups):
                rg = md.row_group(i)
                lo = hi = None
                nulls: int | None = None
                if leaf is not None and trusted:
                    st = rg.column(leaf).statistics
                    if st is not None:
                        if st.has_null_count:
                            nulls = st.null_count
                        if st.has_min_max:
                            lo, hi = self._stat_value(st.min), self._stat_value(st.max)
                            if lo is None or hi is None:
                                lo = hi = None
                elif leaf is None and rg.num_rows:
                    nulls = rg.num_rows  # column absent from this file: every row is null
                est = self._estimate(rg, widths)
                self._row_groups.append(RowGroup(fi, i, offset, rg.num_rows, est, lo, hi, nulls))
                offset += rg.num_rows

    def _stat_value(self, value: Any) -> Any:
        """A Parquet statistic as the Python value ``as_py()`` gives for the table's type."""
        t = self.by_type
        if value is None:
            return None
        if pa.types.is_timestamp(t):
            if not isinstance(value, dt.datetime):
                return None
            if t.tz is not None:
                return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
        if (pa.types.is_string(t) or pa.types.is_large_string(t)) and isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return None
        if pa.types.is_floating(t) and value != value:
            return None
        return value

    def _decoded_widths(self, pf: pq.ParquetFile) -> dict[str, float]:
        """Arrow bytes per row of each variable-width column of a file, measured on a decoded sample.

        Parquet's sizes say little about decoded text: a dictionary-encoded column of one repeated
        200-character string is a few bytes a row in the file and 204 in Arrow.
        """
        names = [n for n in self.target.names if n in self._variable_columns and n in pf.schema_arrow.names]
        md = pf.metadata
        if not names or not md.num_row_groups or not md.row_group(0).num_rows:
            return {}
        rows = min(SAMPLE_ROWS, md.row_group(0).num_rows)
        batch = next(pf.iter_batches(batch_size=rows, row_groups=[0], columns=names, use_threads=False))
        widths = {}
        for name in names:
            column = batch.column(batch.schema.get_field_index(name))
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
            widths[name] = column.nbytes / max(1, len(column))
        return widths

    def _estimate(self, rg: Any, widths: dict[str, float]) -> int:
        """Arrow bytes of a row group once decoded: fixed widths exactly; variable ones as the larger of
        the file's decoded sample and Parquet's uncompressed size x 1.5."""
        for f in self.target:
            bits = fixed_bits(f.type)
            if bits:
                self._column_bytes[f.name] += bits * rg.num_rows // 8
        total = self._row_bits * rg.num_rows // 8
        for j in range(rg.num_columns):
            col = rg.column(j)
            name = col.path_in_schema.split(".")[0]
            if name in self._variable_columns:
                parquet = int(col.total_uncompressed_size * 1.5) + 8 * rg.num_rows
                size = max(parquet, int(widths.get(name, 0.0) * rg.num_rows))
                self._column_bytes[name] += size
                total += size
        return total

    def _pass_capacity(self, total: int) -> int:
        """Estimated row bytes one pass may hold: sorting a pass reorders one column at a time, so the
        rows plus a copy of the widest column must fit ``memory_budget`` with a quarter to spare for
        the readers' and writers' buffers."""
        widest = max(self._column_bytes.values(), default=0) / max(1, total)
        return int(self.options.memory_budget * PASS_HEADROOM / (1.0 + widest))

    # ------------------------------------------------------------------ passes
    def _plan_passes(self) -> list[Pass]:
        total = sum(rg.est_bytes for rg in self._row_groups)
        capacity = min(self.options.memory_budget, self._pass_capacity(total))
        self._capacity = capacity
        if total <= capacity:
            for rg in self._row_groups:
                rg.passes = [0]
            return [Pass(everything=True)]
        null_rows, values, counts = self._value_counts()
        rows = sum(rg.rows for rg in self._row_groups) or 1
        per_row = total / rows
        spans: list[list[int]] = []
        acc = 0.0
        for i, count in enumerate(counts.tolist()):
            size = count * per_row
            if spans and acc + size <= capacity:
                spans[-1][1] = i
                acc += size
            else:
                spans.append([i, i])
                acc = size
        passes = [
            Pass(lo=py_value(values[a]), hi=py_value(values[b]), lo_arrow=values[a], hi_arrow=values[b])
            for a, b in spans
        ]
        if null_rows or any(rg.nulls is None or rg.nulls for rg in self._row_groups):
            passes.append(Pass(nulls_only=True))
        for rg in self._row_groups:
            rg.passes = [k for k, p in enumerate(passes) if overlaps(rg, p)]
        # Every distinct value and its pass, to route spilled rows with one hash lookup per row.
        self._values = values
        # The smallest signed type that holds every pass: NumPy's stable sort of 8- and 16-bit integers is
        # a radix sort, several times faster than the merge sort it uses for wider ones (routing, _spill).
        kind = np.int8 if len(passes) < 2**7 else np.int16 if len(passes) < 2**15 else np.int32
        self._value_pass = np.full(len(self._values) + 1, -1, dtype=kind)  # last slot: null
        for k, p in enumerate(passes):
            if p.nulls_only:
                self._value_pass[-1] = k
            else:
                self._value_pass[:-1][
                    bool_numpy(pc.fill_null(pass_mask(self._values, p), scalar(False, pa.bool_())))
                ] = k
        self._pass_table = self._direct_pass_table()
        _release()
        self.progress(f"{len(values)} values in {len(passes)} passes (about {total / 2**20:.0f} MiB of rows)")
        return passes

    def _value_counts(self) -> tuple[int, pa.Array, np.ndarray]:
        """The null rows, the distinct values of ``by`` in Spark's order (one zero, one NaN, last) and
        the rows of each, over every row group."""
        null_rows = 0
        found: list[pa.Array] = []
        counts: list[np.ndarray] = []
        floating = pa.types.is_floating(self.by_type)
        for rg in self._row_groups:
            col = self._read_by_column(rg)
            null_rows += col.null_count
            if floating and rg.hi is not None and py_value(pc.any(nan_mask(col))):
                rg.hi = float("nan")  # statistics leave NaN out: this row group reaches the last pass
            vc = pc.value_counts(canonical(col.drop_null()))
            found.append(vc.field("values"))
            counts.append(int_numpy(vc.field("counts")))
        if not found:
            return null_rows, pa.nulls(0, self.by_type), np.zeros(0, dtype=np.int64)
        every = pa.concat_arrays(found)
        values = pc.unique(every)
        sums = np.zeros(len(values), dtype=np.int64)
        np.add.at(sums, int_numpy(pc.index_in(every, value_set=values)), np.concatenate(counts))
        order = pc.array_sort_indices(values, null_placement="at_end")  # NaN sorts last
        return null_rows, values.take(order), sums[numpy_indices(order)]

    def _read_by_column(self, rg: RowGroup) -> pa.ChunkedArray:
        pf = self._parquet[rg.file]
        if self.by not in pf.schema_arrow.names:
            return pa.chunked_array([pa.nulls(rg.rows, self.by_type)])
        t = pf.read_row_group(rg.index, columns=[self.by], use_threads=False)
        return conform(t, pa.schema([self.target.field(self.by)]), self.files[rg.file].path).column(0)

    def _spill(self, passes: list[Pass]) -> dict[int, str]:
        """Decode every row group that spans several passes once, and split its rows by pass to disk.

        The next batch is decoded in a second thread while this one is routed: each row's pass comes
        from one hash lookup of its value, the batch is put in pass order with one gather, and each
        pass's slice is appended to that pass's file (Arrow IPC, uncompressed unless
        ``DELTAEXTRAS_SPILL_COMPRESSION`` says ``lz4`` or ``zstd``).
        """
        wide = [rg for rg in self._row_groups if len(rg.passes) > 1]
        if not wide:
            return {}
        base = os.environ.get("DELTAEXTRAS_SPILL_DIR") or None
        self._spill_dir = scratch_dir("spill", base)
        writers: dict[int, Any] = {}
        paths: dict[int, str] = {}
        options = pa.ipc.IpcWriteOptions(compression=_spill_compression())
        batches = (table for rg in wide for table in self._iter_row_group(rg, self._spill_batch_rows(rg)))
        since_release = 0
        try:
            for table in _prefetched(batches):
                ids = self._pass_ids(table.column(self.by))
                counts = np.bincount(ids[ids >= 0], minlength=len(passes))
                order = np.argsort(ids, kind="stable")  # a radix sort: ids are 8 or 16 bits
                routed = table.take(index_array(order[int(np.count_nonzero(ids < 0)) :]))
                del table, order
                start = 0
                for k in np.flatnonzero(counts).tolist():
                    if k not in writers:
                        paths[k] = os.path.join(self._spill_dir, f"pass-{k:05d}.arrows")
                        writers[k] = pa.ipc.new_file(paths[k], self.target, options=options)
                    writers[k].write_table(routed.slice(start, int(counts[k])))
                    start += int(counts[k])
                since_release += routed.nbytes
                del routed
                if since_release > RELEASE_EVERY:
                    _release()
                    since_release = 0
        finally:
            for w in writers.values():
                w.close()
            _release()
        self.result.spilled_bytes = sum(os.path.getsize(p) for p in paths.values())
        self.progress(f"spilled {len(wide)} wide row groups ({self.result.spilled_bytes / 2**20:.1f} MiB)")
        return paths

    def _direct_pass_table(self) -> tuple[int, np.ndarray] | None:
        """For integer values within a span of ``DIRECT_SPAN``: the smallest value and every value's pass
        by its distance from it (-1 for values that do not occur), so routing is one array lookup."""
        if not pa.types.is_integer(self.by_type) or not len(self._values) or self._values.null_count:
            return None
        plain = plain_integers(pa.chunked_array([self._values]))
        if plain is None:
            return None
        lo, hi = int(plain.min()), int(plain.max())
        if hi - lo >= DIRECT_SPAN or hi >= 2**63:
            return None
        table = np.full(hi - lo + 1, -1, dtype=self._value_pass.dtype)
        table[plain.astype(np.int64) - lo] = self._value_pass[:-1]
        return lo, table

    def _pass_ids(self, column: pa.ChunkedArray) -> np.ndarray:
        """The pass of each row (-1: none, which the final row count would report)."""
        plain = plain_integers(column) if self._pass_table is not None else None
        if plain is not None and len(plain) and self._pass_table is not None:
            lo, table = self._pass_table
            if lo <= int(plain.min()) and int(plain.max()) < lo + len(table):
                return table[plain.astype(np.int64) - lo]
        found = pc.index_in(canonical(column), value_set=self._values)
        slots = numpy_indices(pc.fill_null(found.cast(pa.int32()), scalar(len(self._values), pa.int32())))
        return self._value_pass[slots]

    def _spill_batch_rows(self, rg: RowGroup) -> int:
        """Rows per decoded batch while spilling: an eighth of a pass, at most SPILL_BATCH_ROWS."""
        per_row = max(1.0, rg.est_bytes / max(1, rg.rows))
        return max(256, min(SPILL_BATCH_ROWS, int(self._capacity / 8 / per_row)))

    def _iter_row_group(self, rg: RowGroup, batch_rows: int) -> Iterator[pa.Table]:
        pf = self._parquet[rg.file]
        source = self.files[rg.file].path
        cols = [n for n in self.target.names if n in pf.schema_arrow.names]
        mask = self._masks[rg.file]
        offset = rg.offset
        for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[rg.index], columns=cols, use_threads=False):
            table = self._tracked(rg.file, conform(batch, self.target, source), offset)
            if mask is not None:
                table = table.filter(bool_array(mask[offset : offset + table.num_rows]))
            offset += batch.num_rows
            yield table

    def _gather(self, k: int, p: Pass, spill: str | None) -> pa.Table:
        with timed(self.result, "read"):
            return self._read_pass(k, spill)

    def _read_pass(self, k: int, spill: str | None) -> pa.Table:
        pieces: list[pa.Table] = []
        by_file: dict[int, list[RowGroup]] = {}
        for rg in self._row_groups:
            if len(rg.passes) == 1 and rg.passes[0] == k:
                by_file.setdefault(rg.file, []).append(rg)

        def read(item: tuple[int, list[RowGroup]]) -> list[pa.Table]:
            fi, groups = item
            if len(groups) == self._parquet[fi].metadata.num_row_groups:
                return [self._read_file(fi)]  # the whole file belongs to this pass: one read
            return [self._read_row_group(rg) for rg in groups]

        since_release = 0
        items = list(by_file.items())
        # Small files cost more in per-file overhead than in decoding: read two at a time.
        with HelperPool(READ_THREADS) as pool:
            for (_fi, groups), tables in zip(items, pool.map(read, items), strict=True):
                pieces.extend(tables)
                since_release += sum(rg.est_bytes for rg in groups)
                if since_release > RELEASE_EVERY:
                    _release()  # decoding leaves scratch pages behind; return them before they pile up
                    since_release = 0
        if spill:
            pieces.append(self._read_spill(spill))
            os.remove(spill)
        _release()
        if not pieces:
            return self.target.empty_table()
        return pa.concat_tables(pieces)

    def _read_spill(self, path: str) -> pa.Table:
        """One pass's spilled rows, a column at a time (each decompressed and made contiguous alone).

        Batch by batch: uncompressed batches are views of the mapped file, so only the column's pages
        are touched and copied once (``included_fields`` would read every batch's whole body into memory
        for each column; compressed batches need it, to decompress one column).
        """
        arrays = []
        compressed = _spill_compression() is not None
        for j in range(len(self.target)):
            with pa.memory_map(path) as source:
                options = pa.ipc.IpcReadOptions(included_fields=[j]) if compressed else None
                reader = pa.ipc.open_file(source, options=options)
                field = 0 if compressed else j
                chunks = [reader.get_batch(i).column(field) for i in range(reader.num_record_batches)]
                arrays.append(pa.concat_arrays(chunks) if chunks else pa.nulls(0, self.target.field(j).type))
                del chunks, reader
            _release()
        return pa.Table.from_arrays(arrays, schema=self.target)

    def _read_file(self, fi: int) -> pa.Table:
        pf = self._parquet[fi]
        cols = [n for n in self.target.names if n in pf.schema_arrow.names]
        table = self._tracked(fi, conform(pf.read(columns=cols), self.target, self.files[fi].path), 0)
        mask = self._masks[fi]
        if mask is not None:
            table = table.filter(bool_array(mask))
        return table

    def _read_row_group(self, rg: RowGroup) -> pa.Table:
        pf = self._parquet[rg.file]
        cols = [n for n in self.target.names if n in pf.schema_arrow.names]
        table = conform(pf.read_row_group(rg.index, columns=cols), self.target, self.files[rg.file].path)
        table = self._tracked(rg.file, table, rg.offset)
        mask = self._masks[rg.file]
        if mask is not None:
            table = table.filter(bool_array(mask[rg.offset : rg.offset + rg.rows]))
        return table

    def _tracked(self, fi: int, table: pa.Table, first_row: int) -> pa.Table:
        """Rows of input ``fi`` (from physical row ``first_row`` on, none filtered yet) with the row ids and
        commit versions they have now, on a table that tracks rows."""
        if self.row_columns is None:
            return table
        add = self.files[fi].add
        return row_tracking.materialize(
            table, self.row_columns, add.base_row_id, add.default_row_commit_version, first_row
        )

    def _untracked(self, table: pa.Table) -> pa.Table:
        """Rows without the materialized row tracking columns (change data holds the table's columns)."""
        if self.row_columns is None:
            return table
        return table.drop_columns(list(self.row_columns.names))

    # ------------------------------------------------------------------ one pass
    def _write_pass(self, table: pa.Table) -> int:
        """Sort one pass's rows and write them value by value; returns the rows written.

        The rows are never reordered as a whole: their columns are made contiguous (one column at a
        time, so at most one column exists twice), the order that puts them in ``by`` then ``sort_by``
        order is computed on indices or packed keys (:mod:`.ordering`, :mod:`.packed_keys`; packed keys
        are built from the chunks as read, beside the combining of the other columns), and each group
        of values' rows is gathered while the previous group is encoded — so a pass holds its rows once
        plus two groups' rows in flight.
        """
        if not table.num_rows:
            return 0
        columns = list(table.columns)
        schema = table.schema
        del table
        keys = [schema.get_field_index(name) for name, _, _ in self.sort_keys]
        with HelperPool(1) as sorter:
            ordered = None
            if not self.options.unique_by and packable(schema, self.by, self.sort_keys[1:]):
                ordered = sorter.submit(self._packed, [columns[i] for i in keys])
            self._combine(columns, [i for i in range(len(columns)) if ordered is None or i not in keys])
            table = self._deduplicated(columns, schema) if self.options.unique_by else None
            if table is None:
                table = pa.Table.from_arrays(columns, schema=schema)
            del columns
            with HelperPool(1) as pool, timed(self.result, "sort"):
                # The columns' cardinalities (for the writer settings) are counted on a sample while the rows
                # are sorted.
                settings = None if self._writers else pool.submit(sample_cardinality, self.target, table, self.by)
                order = None if ordered is None else ordered.result()
                if order is None:
                    table = self._contiguous(table, keys)
                    # packed keys already failed on the columns as read when they were built there
                    order = self._order(table) if ordered is None else permutation(table, self.by, self.sort_keys[1:])
        if isinstance(order, PackedOrder):
            gather = packed_gatherer(table, self.by, self.sort_keys[1:], order, self.result)
            run_ends = order.ends
        else:
            gather = gatherer(table, self.by, order[0], order[1], self.result)
            run_ends = order[1]
        del order
        # the first writer's settings are chosen for the row groups the values make; later passes keep them
        props = self._writers[0].props if settings is None else self._settings(table, len(run_ends), settings.result())
        return self._write_groups(run_ends, gather, props)

    def _settings(self, table: pa.Table, values: int, cardinality: dict[str, Any]) -> dict[str, Any]:
        """The writer settings for ``values`` values of ``table``'s rows: dictionaries for the columns whose
        row groups repeat values, a page index where a value's chunks span several pages."""
        rows, nbytes = table.num_rows, table.nbytes
        group_rows = rows / max(1, values)
        smallest = self.options.min_row_group_bytes
        if smallest and nbytes / max(1, values) < smallest:  # small values share a row group
            group_rows = smallest / max(1.0, nbytes / max(1, rows))
        props = writer_properties(self.target, table, self.by, group_rows=group_rows, cardinality=cardinality)
        props["write_page_index"] = page_index_pays(rows, values, nbytes, table.num_columns)
        return props

    def _write_groups(self, run_ends: list[int], gather: Callable[[list[int]], pa.Table], props: dict[str, Any]) -> int:
        """Write a sorted pass's values (where each ends: ``run_ends``), each group's rows from ``gather``."""
        rows = run_ends[-1]
        group_rows = max(1, rows // GATHER_GROUPS)
        lanes = lane_count(sum(f.size for f in self.files), len(run_ends)) if self._one_pass else 1
        if lanes > 1:
            # The second core encodes a second file (see deltaextras.ops.rorder.rewrite.lanes).
            shares = split_values(run_ends, lanes)
            self._writers = [OutputWriter(self, props) for _ in shares]
            starts = [0] + [share[-1] for share in shares[:-1]]
            self.result.values += write_lanes(
                [
                    (writer, value_groups(share, group_rows, start))
                    for writer, share, start in zip(self._writers, shares, starts, strict=True)
                ],
                gather,
            )
            return rows
        if not self._writers:
            self._writers = [OutputWriter(self, props)]
        self.result.values += write_pipelined(self._writers[0], value_groups(run_ends, group_rows), gather)
        return rows

    def _combine(self, columns: list[Any], which: list[int]) -> None:
        """Make the columns ``which`` contiguous in place, two at a time when the budget has room for
        two columns twice."""
        with timed(self.result, "combine"):
            widest = sorted((c.nbytes for c in columns), reverse=True)[:COMBINE_THREADS]
            fits = sum(c.nbytes for c in columns) + sum(widest) <= self.options.memory_budget * PASS_HEADROOM
            with HelperPool(COMBINE_THREADS if fits else 1) as pool:
                list(pool.map(functools.partial(_combine, columns), which))

    def _contiguous(self, table: pa.Table, which: list[int]) -> pa.Table:
        """The table with the columns ``which`` contiguous (they were left as read for packed keys)."""
        if all(table.column(i).num_chunks <= 1 for i in which):
            return table
        columns = list(table.columns)
        schema = table.schema
        del table
        self._combine(columns, which)
        return pa.Table.from_arrays(columns, schema=schema)

    def _packed(self, keys: list[pa.ChunkedArray]) -> PackedOrder | None:
        """The order by packed keys of the sort columns as read (``None``: they do not fit)."""
        with timed(self.result, "order"):
            return packed(keys[0], keys[1] if len(keys) > 1 else None, self.sort_keys[1:])

    def _order(self, table: pa.Table) -> PackedOrder | tuple[np.ndarray, list[int]]:
        """The order of a contiguous pass: by packed keys when they fit, else the permutation."""
        if packable(table.schema, self.by, self.sort_keys[1:]):
            columns = [table.column(name) for name, _, _ in self.sort_keys]
            found = packed(columns[0], columns[1] if len(columns) > 1 else None, self.sort_keys[1:])
            if found is not None:
                return found
        return permutation(table, self.by, self.sort_keys[1:])

    def _deduplicated(self, columns: list[Any], schema: pa.Schema) -> pa.Table | None:
        """The pass without rows that repeat an earlier row (``None``: none does); ``columns`` are
        replaced one at a time, so the pass never exists twice."""
        with timed(self.result, "dedup"):
            table = pa.Table.from_arrays(columns, schema=schema)
            tracking = self.row_columns.names if self.row_columns is not None else ()
            keep = first_rows(table, self.unique_keys, tracking)
            if keep is None:
                return None
            self.result.duplicates_removed += table.num_rows - len(keep)
            if self.on_duplicates is not None:
                self.on_duplicates(self._untracked(dropped_rows(table, keep)))
            del table
            for i in range(len(columns)):
                columns[i] = columns[i].take(keep)
                _release()
            return pa.Table.from_arrays(columns, schema=schema)


def _spill_compression() -> str | None:
    """The spill files' codec: none (fastest; measured) unless ``DELTAEXTRAS_SPILL_COMPRESSION`` names one."""
    codec = (os.environ.get("DELTAEXTRAS_SPILL_COMPRESSION") or "none").strip().lower()
    if codec in ("", "none", "uncompressed"):
        return None
    if codec not in ("lz4", "zstd"):
        raise InvalidArgumentError(f"DELTAEXTRAS_SPILL_COMPRESSION={codec!r}: use none, lz4 or zstd")
    return codec


def whole_reads(files: list[LiveFile], budget: int) -> set[int]:
    """Which of ``files`` (on object storage) to fetch whole when opened: those of at most
    ``WHOLE_FILE_BYTES``, smallest first, while together they fit a ``WHOLE_SHARE``-th of ``budget``. A
    small file read by ranges costs two round trips (its footer, then its data, the second one in the
    reading thread); fetched whole it costs one, on the threads that open the inputs.

    Example:
        >>> from types import SimpleNamespace as F
        >>> sorted(whole_reads([F(size=3 << 20), F(size=100), F(size=0), F(size=50 << 20)], 16 << 20))
        [0, 1]
        >>> sorted(whole_reads([F(size=3 << 20), F(size=2 << 20)], 12 << 20))
        [1]
    """
    room = budget // WHOLE_SHARE
    chosen: set[int] = set()
    for i in sorted(range(len(files)), key=lambda i: files[i].size or 0):
        size = files[i].size or 0
        if size > WHOLE_FILE_BYTES or size > room:
            break
        if size > 0:
            chosen.add(i)
            room -= size
    return chosen


def _prefetched(items: Iterator[Any]) -> Iterator[Any]:
    """The items of an iterator, the next one produced in a second thread while this one is used."""
    with HelperPool(1) as pool:
        pending = pool.submit(next, items, None)
        while True:
            item = pending.result()
            if item is None:
                return
            pending = pool.submit(next, items, None)
            yield item
            del item


def _combine(columns: list[pa.ChunkedArray | pa.Array], i: int) -> None:
    """Make one column contiguous in place (take on chunks would concatenate them per call)."""
    col = columns[i]
    if isinstance(col, pa.ChunkedArray):
        columns[i] = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    del col
    _release()


def _release() -> None:
    """Return freed Arrow memory to the operating system (the allocator otherwise keeps it)."""
    pa.default_memory_pool().release_unused()
