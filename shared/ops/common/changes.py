"""Change data files: the rows a commit deletes, written to ``_change_data/`` with ``_change_type =
'delete'`` and committed as ``cdc`` actions, for tables with ``delta.enableChangeDataFeed=true``.

Once a commit carries ``cdc`` actions, change-feed readers take the commit's changes from them alone
and ignore its ``add`` and ``remove`` actions; so a commit that deletes rows *and* rearranges others
(a copy-on-write delete, a de-duplicating rewrite) records only the deleted rows here.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltaextras.core.storage import TableStorage
    >>> st = TableStorage(tempfile.mkdtemp())
    >>> sink = ChangeSink(st, "p=1", pa.schema([("k", pa.int64())]), {"p": "1"})
    >>> sink.write(as_deletes(pa.table({"k": [7, 7]})))
    >>> cdc = sink.action()
    >>> cdc.partition_values, cdc.data_change, cdc.path.startswith("_change_data/p=1/")
    ({'p': '1'}, False, True)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from ...core.actions import Cdc
from ...core.arrays import constant_array, scalar
from ...core.storage import TableStorage
from ...errors import CorruptDataError
from .scratch import scratch_dir

CHANGE_DIR = "_change_data"
CHANGE_TYPE = "_change_type"
_SAFE = "/=-_.~"  # characters a change file's log path keeps as they are


class ParquetSink:
    """One Parquet file being written under the table root: in place on local disk, else through a
    local temporary file uploaded on close."""

    def __init__(self, storage: TableStorage, key: str, schema: pa.Schema) -> None:
        self.storage, self.key, self.rows = storage, key, 0
        local = storage.local_root
        self.tmpdir = None if local is not None else scratch_dir("delete")
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


class ChangeSink(ParquetSink):
    """A change data file of one partition directory: the file schema plus ``_change_type``, at a fresh
    key under ``_change_data/<directory>/``; ``partition_values`` as the log keys them."""

    def __init__(
        self, storage: TableStorage, directory: str, schema: pa.Schema, partition_values: dict[str, Any]
    ) -> None:
        name = f"cdc-00000-{uuid.uuid4()}.c000.zstd.parquet"
        if quote(directory, safe=_SAFE) != directory:
            # a directory whose log path needs percent-encoding (a timestamp partition's ``:``, ``%``):
            # delta-rs reads change file paths without decoding them, so the file goes where both agree
            directory = ""
        key = f"{CHANGE_DIR}/{directory}/{name}" if directory else f"{CHANGE_DIR}/{name}"
        super().__init__(storage, key, schema.append(pa.field(CHANGE_TYPE, pa.string())))
        self.partition_values = dict(partition_values)

    def action(self) -> Cdc:
        """Close the file; its ``cdc`` action (``dataChange: false``, as the protocol requires)."""
        size = self.close(expect_rows=self.rows)
        return Cdc(
            path=quote(self.key, safe=_SAFE),
            partition_values=dict(self.partition_values),
            size=size,
            data_change=False,
        )


def as_deletes(table: pa.Table) -> pa.Table:
    """Rows as change data of deletions (``_change_type = 'delete'``).

    Example:
        >>> as_deletes(pa.table({"k": [1]})).to_pylist()
        [{'k': 1, '_change_type': 'delete'}]
    """
    return table.append_column(CHANGE_TYPE, constant_array(scalar("delete", pa.string()), table.num_rows))


def change_data_feed_enabled(snapshot: Any) -> bool:
    """Whether writers must record change data: ``delta.enableChangeDataFeed=true`` on a table whose
    protocol supports the feature (writer version 4 to 6, or 7 with ``changeDataFeed``).

    Example:
        >>> from types import SimpleNamespace
        >>> from deltaextras.core.actions import Protocol
        >>> change_data_feed_enabled(SimpleNamespace(configuration={"delta.enableChangeDataFeed": "true"},
        ...                                          protocol=Protocol(min_reader_version=1, min_writer_version=4)))
        True
    """
    if str(snapshot.configuration.get("delta.enableChangeDataFeed", "false")).lower() != "true":
        return False
    writer = int(snapshot.protocol.min_writer_version)
    return 4 <= writer < 7 or "changeDataFeed" in (snapshot.protocol.writer_features or [])


__all__ = ["CHANGE_DIR", "ChangeSink", "ParquetSink", "as_deletes", "change_data_feed_enabled"]
