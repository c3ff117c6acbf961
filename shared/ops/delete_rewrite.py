"""Copy-on-write for a delete: each file rewritten without its deleted rows, streamed row group by row
group; and the change data files (``_change_data/``, ``_change_type = 'delete'``) of tables with the
change data feed.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from pyroaring import BitMap
    >>> from deltaextras.core.storage import TableStorage
    >>> from deltaextras.ops.table import load_snapshot
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

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from ..core.actions import Add, Cdc, now_ms
from ..core.arrays import bool_array, constant_array, scalar
from ..core.dv import keep_mask, read_deletion_vectors
from ..core.schema import conform
from ..core.snapshot import TableSnapshot, open_data_file
from ..core.stats import DEFAULT_INDEXED_COLUMNS, StatsCollector
from ..core.storage import TableStorage
from ..errors import CorruptDataError
from .delete_scan import Target


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
        cols = [n for n in target.names if n in pf.schema_arrow.names]
        sink = _ParquetSink(self.storage, key, target)
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
                    changes.write(_as_change(data.filter(bool_array(out))))
            size = sink.close(expect_rows=kept)
            if changes is not None:
                t.cdc = changes.action(t)
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

    def _change_sink(self, t: Target) -> _ChangeSink:
        """A change data file for the rows deleted from one file (in ``_change_data/<partition dir>/``)."""
        directory = t.file.key.rpartition("/")[0]
        name = f"cdc-00000-{uuid.uuid4()}.c000.zstd.parquet"
        key = f"_change_data/{directory}/{name}" if directory else f"_change_data/{name}"
        self.wrote(key)
        return _ChangeSink(self.storage, key, self.snap.schema.file_schema)

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
                    changes.write(_as_change(data if part.all() else data.filter(bool_array(part))))
            t.cdc = changes.action(t)
        except BaseException:
            changes.abort()
            raise


class _ParquetSink:
    """One Parquet file being written under the table root: in place on local disk, else through a
    local temporary file uploaded on close."""

    def __init__(self, storage: TableStorage, key: str, schema: pa.Schema) -> None:
        self.storage, self.key, self.rows = storage, key, 0
        local = storage.local_root
        self.tmpdir = None if local is not None else tempfile.mkdtemp(prefix="deltaextras-delete-")
        if local is not None:
            self.path = str(local / key)
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        else:
            self.path = os.path.join(self.tmpdir or "", key.rpartition("/")[2])
        self.writer: pq.ParquetWriter | None = pq.ParquetWriter(
            self.path, schema, compression="zstd", write_statistics=True
        )

    def write(self, table: pa.Table) -> None:
        assert self.writer is not None
        self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self, expect_rows: int | None = None) -> int:
        """Finish, check the row count reads back, upload; the file's size."""
        assert self.writer is not None
        self.writer.close()
        self.writer = None
        try:
            if expect_rows is not None and pq.ParquetFile(self.path).metadata.num_rows != expect_rows:
                raise CorruptDataError(f"written file {self.key} does not read back {expect_rows} rows")
            size = os.path.getsize(self.path)
            if self.tmpdir is not None:
                self.storage.put(self.key, self.path)
        finally:
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
        return size

    def abort(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):  # the original error matters more
                self.writer.close()
            self.writer = None
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


class _ChangeSink(_ParquetSink):
    """A change data file: the file schema plus ``_change_type``."""

    def __init__(self, storage: TableStorage, key: str, schema: pa.Schema) -> None:
        super().__init__(storage, key, schema.append(pa.field("_change_type", pa.string())))

    def action(self, t: Target) -> Cdc:
        """Close the file; its ``cdc`` action."""
        rows = self.rows
        size = self.close(expect_rows=rows)
        return Cdc(
            path=quote(self.key, safe="/=-_.~"),
            partition_values=dict(t.file.add.partition_values or {}),
            size=size,
            data_change=False,
        )


def _as_change(table: pa.Table) -> pa.Table:
    return table.append_column("_change_type", constant_array(scalar("delete", pa.string()), table.num_rows))


def change_data_feed_enabled(snapshot: TableSnapshot) -> bool:
    """Whether writers must record change data: ``delta.enableChangeDataFeed=true`` on a table whose
    protocol supports the feature (writer version 4 to 6, or 7 with ``changeDataFeed``)."""
    if str(snapshot.configuration.get("delta.enableChangeDataFeed", "false")).lower() != "true":
        return False
    writer = int(snapshot.protocol.min_writer_version)
    return 4 <= writer < 7 or "changeDataFeed" in (snapshot.protocol.writer_features or [])
