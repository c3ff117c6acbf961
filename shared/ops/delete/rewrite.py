"""Copy-on-write for a delete: each file rewritten without its deleted rows, streamed row group by row
group; and the change data files (``_change_data/``, ``_change_type = 'delete'``) of tables with the
change data feed.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from pyroaring import BitMap
    >>> from deltaextras.core.storage import TableStorage
    >>> from deltaextras.ops.common.table import load_snapshot
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [1, 2, 3]}))
    >>> snap = load_snapshot(TableStorage(path))
    >>> t = Target(snap.files[0], 3, BitMap([1]), BitMap())
    >>> written = []
    >>> CopyOnWrite(snap, written.append, cdf=False).rewrite(t)
    >>> t.outcome, t.rows_kept, t.rewritten.data_change, len(written)
    ('rewrite', 2, True, 1)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from urllib.parse import quote

import pyarrow as pa
from pyroaring import BitMap

from ...core import row_tracking
from ...core.actions import Add, now_ms
from ...core.arrays import bool_array
from ...core.dv import keep_mask, read_deletion_vectors
from ...core.schema import conform
from ...core.snapshot import TableSnapshot, open_data_file
from ...core.stats import DEFAULT_INDEXED_COLUMNS, StatsCollector
from ..common.changes import ChangeSink, ParquetSink, as_deletes
from .scan import Target


class CopyOnWrite:
    """Writes the copy-on-write outputs and change data files of one delete plan; ``wrote(key)`` is told
    every file before it is written (the transaction's record of what to clean up)."""

    def __init__(self, snap: TableSnapshot, wrote: Callable[[str], None], *, cdf: bool) -> None:
        self.snap = snap
        self.storage = snap.storage
        self.wrote = wrote
        self.cdf = cdf

    def rewrite(self, t: Target) -> None:
        """Copy-on-write: the file without the deleted rows, streamed row group by row group (and, on a
        table with change data feed, the rows it deletes into a change data file)."""
        keep = keep_mask(t.union(), t.num_rows)
        kept = int(keep.sum())
        if kept == 0:
            t.outcome = "remove"
            return
        pf = open_data_file(self.storage, t.file, pre_buffer=True)
        target = self.snap.schema.file_schema
        cfg = self.snap.configuration
        stats_cols = cfg.get("delta.dataSkippingStatsColumns")
        # A table that tracks rows: the kept rows keep their ids and commit versions (materialized columns).
        tracked = row_tracking.columns(self.snap.protocol, self.snap.metadata)
        written = target if tracked is None else pa.schema([*target, *tracked.fields()])
        collector = StatsCollector(
            target,
            indexed_columns=int(cfg.get("delta.dataSkippingNumIndexedCols", DEFAULT_INDEXED_COLUMNS)),
            stats_columns=[c.strip() for c in stats_cols.split(",")] if stats_cols else None,
        )
        directory = t.file.key.rpartition("/")[0]
        name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
        key = f"{directory}/{name}" if directory else name
        self.wrote(key)
        gone = None
        changes = None
        if self.cdf:
            assert t.existing is not None  # copy-on-write targets always come from a scan
            gone = keep_mask(t.existing, t.num_rows) & ~keep
            changes = self._change_sink(t)
        cols = [n for n in written.names if n in pf.schema_arrow.names]
        sink = ParquetSink(self.storage, key, written)
        try:
            offset = 0
            for i in range(pf.metadata.num_row_groups):
                rows = pf.metadata.row_group(i).num_rows
                part = keep[offset : offset + rows]
                out = None if gone is None else gone[offset : offset + rows]
                offset += rows
                if not part.any() and (out is None or not out.any()):
                    continue
                data = conform(pf.read_row_group(i, columns=cols), written, t.file.path)
                if tracked is not None:
                    add = t.file.add
                    data = row_tracking.materialize(
                        data, tracked, add.base_row_id, add.default_row_commit_version, offset - rows
                    )
                if part.any():
                    piece = data if part.all() else data.filter(bool_array(part))
                    sink.write(piece)
                    collector.update(piece)
                if changes is not None and out is not None and out.any():
                    changes.write(as_deletes(data.select(target.names).filter(bool_array(out))))
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
        t.rewritten = Add(
            path=quote(key, safe="/=-_.~"),
            partition_values=dict(t.file.add.partition_values or {}),
            size=size,
            modification_time=now_ms(),
            data_change=True,
            stats=json.dumps(collector.to_dict(), separators=(",", ":")),
        )

    def _change_sink(self, t: Target) -> ChangeSink:
        """A change data file for the rows deleted from one file (in ``_change_data/<partition dir>/``)."""
        sink = ChangeSink(
            self.storage,
            t.file.key.rpartition("/")[0],
            self.snap.schema.file_schema,
            dict(t.file.add.partition_values or {}),
        )
        self.wrote(sink.key)
        return sink

    def write_changes(self, t: Target) -> None:
        """Change data of one file: the rows this delete removes from it (its live rows, when removed outright)."""
        existing = t.existing if t.existing is not None else read_deletion_vectors(self.storage, [t.file.dv])[0]
        newly = BitMap(range(t.num_rows)) - existing if t.matched is None else t.matched - existing
        gone = ~keep_mask(newly, t.num_rows)
        pf = open_data_file(self.storage, t.file, pre_buffer=True)
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
