"""A table at one version: protocol, schema, live files with their raw ``add`` actions, deletion
vector selections — deltalake's view and the replayed log cross-checked against each other.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"node_id": [1, 2], "node_id_range": [0, 0]}),
    ...                 partition_by=["node_id_range"])
    >>> snap = TableSnapshot.load(path)
    >>> snap.version, len(snap.files), snap.files[0].partition_values
    (0, 1, {'node_id_range': '0'})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptDataError, StorageError, TableNotFoundError, UnsupportedFeatureError
from .actions import Add, DeletionVectorDescriptor, Metadata, Protocol
from .log import LogState, list_log_for, replay
from .protocol import check_protocol, has_feature
from .schema import TableSchema
from .storage import TableStorage, location, log_path_to_key
from .values import merge_spellings, partition_key, spelled_once


@dataclass
class LiveFile:
    """One live data file (a logical file: path plus deletion vector)."""

    add: Add
    partition_values: dict[str, str | None]  # logical column name -> value
    root: str | None = None  # the table URI, for absolute paths in the log

    @property
    def path(self) -> str:
        """The path as written in the log (percent-encoded, relative)."""
        return self.add.path

    @property
    def key(self) -> str:
        """The storage key of the file."""
        return log_path_to_key(self.add.path, self.root)

    @property
    def size(self) -> int:
        return int(self.add.size or 0)

    @property
    def dv(self) -> DeletionVectorDescriptor | None:
        return self.add.deletion_vector

    @property
    def dv_id(self) -> str | None:
        return self.dv.unique_id if self.dv else None

    @property
    def deleted_rows(self) -> int:
        return int(self.dv.cardinality or 0) if self.dv else 0

    @property
    def stats(self) -> dict[str, Any]:
        return self.add.stats_dict()

    @property
    def num_records(self) -> int | None:
        n = self.stats.get("numRecords")
        return int(n) if n is not None else None

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.add.tags or {})


def open_data_file(storage: TableStorage, f: LiveFile, *, pre_buffer: bool, whole: bool = False) -> pq.ParquetFile:
    """A live data file opened for reading (INT96 timestamps as microseconds); a missing or unreadable
    file is a :class:`CorruptDataError` that says which file and what to do. ``whole``: the object is
    fetched in one request and read from memory (small files on object storage: read by ranges, the
    footer and the data would each be a round trip).

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1, 2]}))
        >>> snap = TableSnapshot.load(path)
        >>> open_data_file(snap.storage, snap.files[0], pre_buffer=False).metadata.num_rows
        2
    """
    try:
        source = pa.BufferReader(storage.read(f.key)) if whole else storage.open_input(f.key, f.size)
        return pq.ParquetFile(source, pre_buffer=pre_buffer and not whole, coerce_int96_timestamp_unit="us")
    except FileNotFoundError:
        raise CorruptDataError(
            f"data file {f.path} is in the log but missing from storage; run FSCK/repair first"
        ) from None
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, StorageError):
            raise
        raise CorruptDataError(f"data file {f.path} is not readable Parquet: {str(exc)[:200]}") from None


class TableSnapshot:
    """Everything about one table version that planning, rewriting and committing need."""

    def __init__(self, storage: TableStorage, state: LogState, dt: Any | None) -> None:
        self.storage = storage
        self.version = state.version
        assert state.protocol is not None and state.metadata is not None
        self.protocol: Protocol = state.protocol
        self.metadata: Metadata = state.metadata
        self.configuration: dict[str, str] = dict(state.metadata.configuration or {})
        self.txns = state.txns
        self.domains = dict(state.domains)
        self.schema = TableSchema.from_metadata(state.metadata)
        self.partition_columns: list[str] = list(state.metadata.partition_columns or [])
        self._dt = dt
        self._logical = {self.schema.partition_physical(c): c for c in self.partition_columns}
        self.files = [self.live_file(add) for add in state.adds.values()]

    def live_file(self, add: Add) -> LiveFile:
        """An ``add`` of this table as a live file (partition values by logical column name)."""
        return LiveFile(
            add, {self._logical.get(k, k): v for k, v in (add.partition_values or {}).items()}, self.storage.uri
        )

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        uri: str,
        storage_options: dict[str, str] | None = None,
        version: int | None = None,
        *,
        storage: TableStorage | None = None,
        cross_check: bool = False,
        for_writing: bool = True,
    ) -> TableSnapshot:
        """Load a table at ``version`` (default: latest), refusing unsupported protocols by name
        (``for_writing=False``: only what reading needs, e.g. to inspect a table we would not rewrite)."""
        storage = storage or TableStorage(uri, storage_options)
        listing = list_log_for(storage, version)
        if version is None:
            version = listing.latest
        state = replay(storage, version, listing)
        dt = _open_deltalake(storage, version) if cross_check else None
        assert state.protocol is not None and state.metadata is not None
        if for_writing:
            check_protocol(state.protocol, dict(state.metadata.configuration or {}), state.metadata.schema_string)
        snap = cls(storage, state, dt)
        if dt is not None:
            snap._cross_check(dt)
        return snap

    def _cross_check(self, dt: Any) -> None:
        roots = _roots(dt, self.storage)
        ours = sorted(f.key for f in self.files)
        theirs = sorted(_their_key(u, roots, self.storage, is_url=False) for u in dt.file_uris())
        if ours != theirs:
            raise CorruptDataError(
                f"deltalake and the log replay disagree on the live files of {self.storage.uri} at version "
                f"{self.version} ({len(theirs)} vs {len(ours)}); refusing to rewrite"
            )

    @property
    def deltalake_table(self) -> Any:
        """deltalake's ``DeltaTable`` at this version (opened on first use)."""
        if self._dt is None:
            self._dt = _open_deltalake(self.storage, self.version)
        return self._dt

    # ------------------------------------------------------------------ queries
    def has_deletion_vectors(self) -> bool:
        return has_feature(self.protocol, "deletionVectors")

    def partition_files(self, column: str | None, value: str | None) -> list[LiveFile]:
        """Live files of one partition (``column`` None: every file)."""
        if column is None:
            return list(self.files)
        return self.in_partition(self.files, column, value)

    def in_partition(self, files: list[LiveFile], column: str, value: str | None) -> list[LiveFile]:
        """Those of ``files`` (of this table) in the partition ``column`` = ``value``, whatever its spelling."""
        typ = self.schema.partition_type(column)
        if typ is None or spelled_once(typ):
            return [f for f in files if f.partition_values.get(column) == value]
        key = partition_key(value, typ)  # every spelling of the value (``1.0`` and ``1``, ...)
        return [f for f in files if partition_key(f.partition_values.get(column), typ) == key]

    def partitions(self, column: str) -> dict[str | None, list[LiveFile]]:
        """Live files grouped by the value of one partition column: one group per value, under the least
        of its spellings in the log (see :mod:`deltaextras.core.values`)."""
        groups: dict[str | None, list[LiveFile]] = {}
        for f in self.files:
            groups.setdefault(f.partition_values.get(column), []).append(f)
        return merge_spellings(groups, self.schema.partition_type(column), lambda a, b: a + b)

    def selection_vectors(self, files: list[LiveFile]) -> dict[str, np.ndarray]:
        """Keep-masks (True = live row) of the given files that carry deletion vectors, by log path: each
        vector file fetched once, up to the last vector needed (:func:`deltaextras.core.dv.read_deletion_vectors`;
        deltalake's reader fetches every vector of the table, one request each). A mask is as long as the
        file's ``numRecords``, or reaches its last deleted row when the statistics have no count (readers
        pad the rest as live)."""
        from .dv import keep_mask, read_deletion_vectors

        carrying = [f for f in files if f.dv]
        out: dict[str, np.ndarray] = {}
        for f, deleted in zip(carrying, read_deletion_vectors(self.storage, [f.dv for f in carrying]), strict=True):
            records = f.add.stats_dict().get("numRecords")
            rows = int(records) if isinstance(records, int) else (deleted.max() + 1 if len(deleted) else 0)
            out[f.path] = keep_mask(deleted, rows)
        return out


# Reader features deltalake cannot open a table with.
_DELTALAKE_UNREADABLE = ("typeWidening", "typeWidening-preview")


def deltalake_can_read(protocol: Protocol) -> bool:
    """Whether deltalake opens a table of this protocol (1.x refuses the ``typeWidening`` reader feature).

    Example:
        >>> deltalake_can_read(Protocol(3, 7, ["typeWidening"], ["typeWidening"]))
        False
    """
    return not any(name in (protocol.reader_features or []) for name in _DELTALAKE_UNREADABLE)


# Writer features deltalake 1.x refuses to write under (its vacuum, which may log commits, among others).
_DELTALAKE_UNWRITABLE = ("domainMetadata", "rowTracking", "inCommitTimestamp", "typeWidening", "typeWidening-preview")


def deltalake_can_write(protocol: Protocol) -> bool:
    """Whether deltalake writes to (and vacuums) a table of this protocol.

    Example:
        >>> deltalake_can_write(Protocol(3, 7, [], ["inCommitTimestamp"]))
        False
    """
    return deltalake_can_read(protocol) and not any(
        name in (protocol.writer_features or []) for name in _DELTALAKE_UNWRITABLE
    )


def _relative_key(uri: str, roots: list[str], *, is_url: bool) -> str:
    """Storage key of a file as deltalake names it: strip the table root; URLs are percent-decoded once.

    Example:
        >>> _relative_key("file:///t/x=A%252FA/p.parquet", ["file:///t"], is_url=True)
        'x=A%2FA/p.parquet'
        >>> _relative_key("/t/x=A%2FA/p.parquet", ["/t"], is_url=False)
        'x=A%2FA/p.parquet'
    """
    from urllib.parse import unquote

    for root in roots:
        root = root.rstrip("/")
        if root and uri.startswith(root + "/"):
            rel = uri[len(root) + 1 :]
            return unquote(rel) if is_url else rel
    return uri


def _their_key(uri: str, roots: list[str], storage: TableStorage, *, is_url: bool) -> str:
    """Storage key of a file as deltalake names it; an absolute log path (``file:/abs``), which deltalake
    1.x joins onto the table root, is parsed like every other path of the log."""
    key = _relative_key(uri, roots, is_url=is_url)
    if location(key) is not None:
        try:
            return storage.key_of(key)
        except UnsupportedFeatureError:
            return key
    return key


def _roots(dt: Any, storage: TableStorage) -> list[str]:
    table_uri = str(dt.table_uri)
    roots = [table_uri, storage.uri]
    if table_uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        roots.append(unquote(urlparse(table_uri).path))
    return roots


def _open_deltalake(storage: TableStorage, version: int) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, DeltaProtocolError
    from deltalake.exceptions import TableNotFoundError as DLNotFound

    try:
        return DeltaTable(storage.deltalake_uri, version=version, storage_options=storage.storage_options or None)
    except DLNotFound:
        raise TableNotFoundError(
            f"no Delta table at {storage.uri}; check the path and the storage credentials"
        ) from None
    except DeltaProtocolError as exc:
        raise UnsupportedFeatureError(f"deltalake refuses the table's protocol: {_first_line(exc)}") from None
    except DeltaError as exc:
        text = _first_line(exc)
        if "protocol" in text.lower() or "feature" in text.lower():
            raise UnsupportedFeatureError(f"the table's protocol is not supported: {text}") from None
        if "not found" in text.lower() or "no files in log segment" in text.lower():
            raise TableNotFoundError(f"no Delta table at {storage.uri} ({text})") from None
        if any(sign in text.lower() for sign in _DAMAGED) and not any(sign in text.lower() for sign in _TRANSIENT):
            raise CorruptDataError(f"deltalake cannot read the log of {storage.uri}; it is damaged: {text}") from None
        raise StorageError(f"deltalake could not load {storage.uri}: {text}") from None
    except OSError as exc:
        raise StorageError(f"deltalake could not load {storage.uri}: {_first_line(exc)}") from None


# deltalake errors that name a damaged log (permanent), not storage trouble (transient).
_DAMAGED = ("json error", "invalid checkpoint", "parquet error", "invalid json", "missing field", "schema error")
# ... unless the object store failed underneath (a parquet error wrapping a dropped connection).
_TRANSIENT = ("generic", "error sending request", "timed out", "timeout", "connection", "retry", "http")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
