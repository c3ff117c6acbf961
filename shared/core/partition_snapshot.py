"""A table at one version as one partition sees it: protocol, metadata and application markers of the
whole table, but only that partition's live files and deletion vectors.

The log is read with the partition in hand: checkpoint Parquet (classic, multi-part, v2 with sidecars)
with a column projection (no tombstones, no ``*_parsed`` copies) and a row filter on the partition
value applied in Arrow before any row becomes a Python object; the commits after the checkpoint are
filtered the same way; deletion vectors are read from our own parse of the vector files
(:mod:`deltaextras.core.dv`), for the partition's files only. Memory follows the partition, not the
table. deltalake's view of the same table is an opt-in cross-check (``cross_check=True``), used by the
tests.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"node_id": [1, 2, 3], "node_id_range": [0, 0, 1]}),
    ...                 partition_by=["node_id_range"])
    >>> snap = PartitionSnapshot.load(path, unit=lambda head: "node_id_range", value="1")
    >>> snap.version, snap.scope, [f.partition_values for f in snap.files]
    (0, ('node_id_range', '1'), [{'node_id_range': '1'}])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CommitConflictError, CorruptDataError, DeltaExtrasError, InvalidArgumentError, StorageError
from .actions import (
    Action,
    Add,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    Remove,
    Sidecar,
    Txn,
    decode_action,
    decode_checkpoint_batch,
    decode_commit,
)
from .arrays import bool_array, bool_numpy
from .dv import keep_mask, read_deletion_vectors
from .log import LOG_DIR, LogListing, LogState, _check_hint, check_metadata, commit_key, list_log, list_log_for
from .protocol import check_protocol
from .schema import TableSchema
from .snapshot import LiveFile, TableSnapshot
from .storage import TableStorage
from .values import partition_key, spelled_once

# Checkpoint columns that describe the table rather than its files (read whole: one row each, or few).
HEAD_COLUMNS = ("metaData", "protocol", "txn", "domainMetadata", "sidecar")
BATCH_ROWS = 16_384
STREAM_BUFFER = 4 * 2**20


@dataclass
class LogHead:
    """What every reader of one version needs before it looks at files: the checkpoint used, the
    commits after it (raw), protocol, metadata, application markers and metadata domains."""

    storage: TableStorage
    version: int
    checkpoint: list[str]  # keys of the checkpoint parts (empty: replay from version 0)
    tail: list[tuple[int, bytes]]  # (version, commit file bytes) after the checkpoint
    protocol: Protocol
    metadata: Metadata
    txns: dict[str, int] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)
    sidecars: list[str] = field(default_factory=list)  # keys of v2 sidecar files

    @property
    def checkpoint_is_json(self) -> bool:
        """Whether the checkpoint is a JSON v2 checkpoint (whose own actions are read as JSON)."""
        return any(k.endswith(".json") for k in self.checkpoint)

    @property
    def schema(self) -> TableSchema:
        return TableSchema.from_metadata(self.metadata)

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns or [])

    def physical(self, column: str) -> str:
        """The name the log's ``partitionValues`` use for a logical partition column."""
        return self.schema.partition_physical(column)


def read_head(
    storage: TableStorage,
    version: int | None = None,
    listing: LogListing | None = None,
    *,
    values: set[str | None] | None = None,
) -> LogHead:
    """The head of the table at ``version`` (default: latest): one pass over the checkpoint's head
    columns and the commits after it; no ``add`` is decoded. With ``values``, the commits are kept only
    as far as a partition with one of these values can need them (every ``remove``, and the ``add``
    lines that may hold one of the values in any partition column).

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1]}))
        >>> head = read_head(TableStorage(path))
        >>> head.version, head.protocol.min_reader_version, head.partition_columns
        (0, 1, [])
    """
    listing = listing or list_log_for(storage, version)
    if listing.latest < 0:
        from ..errors import TableNotFoundError

        raise TableNotFoundError(
            f"no Delta table at {storage.uri} (no commits under _delta_log/); check the path and credentials"
        )
    if version is None:
        version = listing.latest
    if version > listing.latest:
        raise InvalidArgumentError(f"version {version} of {storage.uri} does not exist yet (latest {listing.latest})")
    if listing.has_hint:
        listing = _check_hint(storage, listing)  # a hint naming a missing checkpoint: damaged, as replay says
    cps = [v for v in listing.checkpoints if v <= version]
    start = max(cps) + 1 if cps else 0
    missing = [v for v in range(start, version + 1) if v not in listing.commits]
    if missing:
        if missing[0] < min(listing.commits):
            raise CommitConflictError(
                f"version {version} of {storage.uri} can no longer be read: log entries before "
                f"{min(listing.commits)} were cleaned up. The plan is stale; plan again"
            )
        raise CorruptDataError(f"commit {missing[0]} of {storage.uri} is missing from the log; the table is damaged")
    checkpoint = listing.checkpoints[max(cps)] if cps else []
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, int] = {}
    domains: dict[str, DomainMetadata] = {}
    sidecars: list[str] = []

    def take(action: Action) -> None:
        nonlocal protocol, metadata
        if isinstance(action, Metadata):
            metadata = action
        elif isinstance(action, Protocol):
            protocol = action
        elif isinstance(action, Txn):
            txns[action.app_id] = int(action.version)
        elif isinstance(action, DomainMetadata):
            if action.removed:
                domains.pop(action.domain, None)
            else:
                domains[action.domain] = action
        elif isinstance(action, Sidecar):
            sidecars.append(LOG_DIR + "_sidecars/" + action.path.rsplit("/", 1)[-1])

    for key in checkpoint:
        if key.endswith(".json"):
            for action in decode_commit(storage.read(key), -1):
                take(action)
        else:
            for batch in _batches(storage, key, lambda schema: [c for c in HEAD_COLUMNS if c in schema.names]):
                for action in decode_checkpoint_batch(_non_null_rows(batch)):
                    take(action)
    tail = _read_tail(storage, range(start, version + 1), values, take)
    if protocol is None or metadata is None:
        raise CorruptDataError(f"the log of {storage.uri} has no protocol or metaData action up to {version}")
    check_metadata(metadata, f"the log of {storage.uri} at version {version}")
    return LogHead(storage, version, checkpoint, tail, protocol, metadata, txns, domains, sidecars)


def _read_tail(
    storage: TableStorage, versions: range, values: set[str | None] | None, take: Callable[[Action], None]
) -> list[tuple[int, bytes]]:
    """The commits ``versions`` after the checkpoint: their table-describing actions go to ``take``; the lines
    a partition with one of ``values`` can need (all of them when ``values`` is None) are kept raw."""
    tail: list[tuple[int, bytes]] = []
    needles = _needles(values) if values is not None else None
    for v in versions:
        try:
            data = storage.read(commit_key(v))
        except FileNotFoundError:
            raise StorageError(f"commit {v} of {storage.uri} vanished while reading the log; retry") from None
        head_lines, kept = _split_commit(data, needles)
        tail.append((v, kept))
        for line in _lines(head_lines, v):
            take(decode_action(line))
    return tail


def partition_adds(head: LogHead, column: str | None, value: str | None) -> dict[tuple[str, str | None], Add]:
    """The live ``add`` actions of one partition (``column`` None: every file), keyed by logical file id."""
    return adds_in(head, column, {value})


def adds_in(head: LogHead, column: str | None, values: set[str | None]) -> dict[tuple[str, str | None], Add]:
    """The live ``add`` actions whose partition ``column`` holds one of ``values`` (``column`` None: every
    file), keyed by logical file id."""
    physical = head.physical(column) if column is not None else None
    typ = head.schema.partition_type(column) if column is not None else None
    if typ is not None and not spelled_once(typ):
        values = _Spellings(values, typ)  # a value matches whichever way the log spells it
    adds: dict[tuple[str, str | None], Add] = {}
    for action in json_checkpoint_adds(head):
        if _matches(action.partition_values, physical, values):
            adds[action.file_id] = action
    for batch in add_batches(head, _add_projection):
        rows = batch.filter(_add_mask(batch.column("add"), physical, values))
        for action in decode_checkpoint_batch(rows):
            assert isinstance(action, Add)
            adds[action.file_id] = action
    needles = _needles(values) if physical is not None and not isinstance(values, _Spellings) else None
    for v, data in head.tail:
        removes: list[tuple[str, str | None]] = []
        added: list[Add] = []
        for line in _lines(data, v, keep=needles):
            if "remove" in line:
                removes.append(Remove.from_json(line["remove"]).file_id)
            elif "add" in line:
                body = line["add"]
                pv = body.get("partitionValues") if isinstance(body, dict) else None
                if _matches(pv if isinstance(pv, dict) else {}, physical, values):
                    added.append(Add.from_json(body))
        for fid in removes:
            adds.pop(fid, None)
        for add in added:
            adds[add.file_id] = add
    return adds


def json_checkpoint_adds(head: LogHead) -> Iterator[Add]:
    """The ``add`` actions a JSON v2 checkpoint holds itself (its sidecars are read by :func:`add_batches`)."""
    for key in head.checkpoint:
        if key.endswith(".json"):
            for action in decode_commit(head.storage.read(key), -1):
                if isinstance(action, Add):
                    yield action


def add_batches(
    head: LogHead, columns: Callable[[pa.Schema], list[str]], batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Record batches with an ``add`` column from every Parquet part and sidecar of the checkpoint, reading
    only the columns ``columns(schema of the part)`` picks (``add.<field>`` paths)."""
    for key in [k for k in head.checkpoint if not k.endswith(".json")] + head.sidecars:
        for batch in _batches(head.storage, key, columns, batch_rows):
            if "add" in batch.schema.names:
                yield batch


class FileEntry(NamedTuple):
    """What planning needs of one ``add`` or ``remove`` (a light view; the action itself is not built)."""

    is_add: bool
    path: str
    dv_id: str | None
    partition_values: dict[str, str | None]
    size: int
    stats: str | None
    tags: dict[str, str]
    deleted: int

    @property
    def file_id(self) -> tuple[str, str | None]:
        return self.path, self.dv_id

    @classmethod
    def of(cls, key: str, body: Any) -> FileEntry:
        """The entry of an action body as a commit line holds it (``key``: ``add`` or ``remove``).

        Example:
            >>> FileEntry.of("remove", {"path": "a", "deletionVector": {"storageType": "u",
            ...     "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 40, "cardinality": 2}}).file_id
            ('a', 'ux@1')
        """
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            raise CorruptDataError(f"log action {key!r} has no path")
        raw_dv = body.get("deletionVector")
        dv = DeletionVectorDescriptor.from_json(raw_dv) if raw_dv else None
        pv = body.get("partitionValues")
        tags = body.get("tags")
        return cls(
            key == "add",
            body["path"],
            dv.unique_id if dv else None,
            pv if isinstance(pv, dict) else {},
            int(body.get("size") or 0),
            body.get("stats") if isinstance(body.get("stats"), str) else None,
            tags if isinstance(tags, dict) else {},
            int(dv.cardinality or 0) if dv else 0,
        )

    @classmethod
    def of_add(cls, add: Add) -> FileEntry:
        dv = add.deletion_vector
        return cls(
            True,
            add.path,
            dv.unique_id if dv else None,
            dict(add.partition_values or {}),
            int(add.size or 0),
            add.stats,
            dict(add.tags or {}),
            int(dv.cardinality or 0) if dv else 0,
        )


def tail_entries(head: LogHead) -> Iterator[tuple[int, list[FileEntry]]]:
    """The ``add`` and ``remove`` entries of each commit after the checkpoint, oldest first."""
    for v, data in head.tail:
        out: list[FileEntry] = []
        for line in _lines(data, v):
            if "add" in line:
                out.append(FileEntry.of("add", line["add"]))
            elif "remove" in line:
                out.append(FileEntry.of("remove", line["remove"]))
        yield v, out


class PartitionSnapshot(TableSnapshot):
    """A :class:`TableSnapshot` that holds the files of one partition only (``scope``)."""

    def __init__(self, head: LogHead, column: str | None, value: str | None, adds: Iterable[Add] | None = None) -> None:
        """The partition ``column = value`` of ``head``'s version; its live ``adds`` when a planner read
        them already (else they are read from the log now)."""
        live = partition_adds(head, column, value) if adds is None else {a.file_id: a for a in adds}
        state = LogState(head.version, head.protocol, head.metadata, live, head.txns, head.domains)
        super().__init__(head.storage, state, None)
        self.scope: tuple[str | None, str | None] = (column, value)

    @classmethod
    def load(  # type: ignore[override]
        cls,
        uri: str,
        storage_options: dict[str, str] | None = None,
        version: int | None = None,
        *,
        storage: TableStorage | None = None,
        unit: Callable[[LogHead], str | None],
        value: str | None,
        cross_check: bool = False,
    ) -> PartitionSnapshot:
        """Load the partition ``unit(head) = value`` at ``version`` (default: latest). ``unit`` receives
        the table's head (metadata, schema) and names the partition column (None: the whole table)."""
        storage = storage or TableStorage(uri, storage_options)
        head = read_head(storage, version, values={value})
        check_protocol(head.protocol, dict(head.metadata.configuration or {}), head.metadata.schema_string)
        column = unit(head)
        typ = head.schema.partition_type(column) if column is not None else None
        if (column is None and value is not None) or (typ is not None and not spelled_once(typ)):
            # the whole table, or a value the log may spell several ways: no commit line may be left out
            head = read_head(storage, head.version)
        snap = cls(head, column, value)
        if cross_check:
            snap.cross_check()
        return snap

    def partition_files(self, column: str | None, value: str | None) -> list[LiveFile]:
        """Live files of the snapshot's partition; another partition is not known here."""
        if column is not None and (column, value) != self.scope and self.scope[0] is not None:
            raise InvalidArgumentError(
                f"this snapshot holds {self.scope[0]}={self.scope[1]} only, not {column}={value}"
            )
        return super().partition_files(column, value)

    def selection_vectors(self, files: list[LiveFile]) -> dict[str, np.ndarray]:
        """Keep-masks of the given files that carry deletion vectors, read from the vector files (a mask
        ends after the last deleted row; rows past its end are live)."""
        with_dv = [f for f in files if f.dv]
        bitmaps = read_deletion_vectors(self.storage, [f.dv for f in with_dv])
        return {f.path: keep_mask(b, (b.max() + 1) if len(b) else 0) for f, b in zip(with_dv, bitmaps, strict=True)}

    def cross_check(self) -> None:
        """Compare the partition's files and deletion vectors with deltalake's view of the same version
        (its whole snapshot; for tests and diagnosis); :class:`CorruptDataError` when they differ."""
        full = TableSnapshot.load(self.storage.uri, storage=self.storage, version=self.version, cross_check=True)
        column, value = self.scope
        theirs = full.partition_files(column, value)
        if sorted(f.add.file_id for f in theirs) != sorted(f.add.file_id for f in self.files):
            raise CorruptDataError(
                f"deltalake and the partition read disagree on the live files of {self.storage.uri} "
                f"{column}={value} at version {self.version}; refusing to rewrite"
            )
        mine = self.selection_vectors(self.files)
        other = full.selection_vectors(self.files) if mine else {}
        for path, mask in mine.items():
            want = other.get(path)
            n = len(mask)
            if want is None or not np.array_equal(mask, want[:n]) or not want[n:].all():
                raise CorruptDataError(f"deltalake and our reading disagree on the deletion vector of {path}")


# ------------------------------------------------------------------------------------- reading
def _batches(
    storage: TableStorage, key: str, columns: Callable[[pa.Schema], list[str]], batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Batches of a checkpoint Parquet file, reading only the columns ``columns(schema)`` picks."""
    try:
        source: Any = str(storage.local_root / key) if storage.local_root is not None else storage.open_input(key)
        # A buffered stream reads a column chunk page by page: memory follows the batch, not the checkpoint.
        pf = pq.ParquetFile(source, buffer_size=STREAM_BUFFER, pre_buffer=False)
    except FileNotFoundError:
        raise vanished_checkpoint(storage, key) from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptDataError(f"checkpoint part {key} of {storage.uri} is not readable: {str(exc)[:200]}") from None
    cols = [c for c in columns(pf.schema_arrow) if not _all_null(pf.metadata, c)]
    if not cols:
        return
    yield from pf.iter_batches(columns=cols, batch_size=batch_rows)


def vanished_checkpoint(storage: TableStorage, key: str) -> DeltaExtrasError:
    """The error for a checkpoint part that is not there. When the log now holds a newer checkpoint, it was
    superseded and removed (by a writer's cleanup, ours or another engine's) after this run listed the log:
    a :class:`StorageError` (retryable), as the next attempt reads the log again. Otherwise the table names a
    checkpoint it does not have: damaged.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1]}))
        >>> err = vanished_checkpoint(TableStorage(path), "_delta_log/00000000000000000000.checkpoint.parquet")
        >>> type(err).__name__, err.retryable
        ('CorruptDataError', False)
    """
    name = key.rsplit("/", 1)[-1]
    version = int(name[:20]) if name[:20].isdigit() else -1
    try:
        newer = [v for v in list_log(storage).checkpoints if v > version]
    except DeltaExtrasError:
        newer = []
    if newer:
        return StorageError(
            f"checkpoint {version} of {storage.uri} was replaced by checkpoint {max(newer)} and removed while "
            "this run read it; the next attempt reads the log again"
        )
    return CorruptDataError(f"checkpoint part {key} of {storage.uri} is missing; the table is damaged")


def _all_null(md: pq.FileMetaData, column: str) -> bool:
    """Whether the Parquet statistics show every leaf under ``column`` (``add.tags``, ``txn``) null in every
    row group: the column holds nothing, and decoding a million nulls is skipped.

    Example:
        >>> import io, pyarrow as pa
        >>> buf = io.BytesIO()
        >>> add = pa.struct([("path", pa.string()), ("tags", pa.map_(pa.string(), pa.string()))])
        >>> pq.write_table(pa.table({"txn": pa.array([None, None], pa.struct([("v", pa.int64())])),
        ...                          "add": pa.array([{"path": "a", "tags": None}, None], add)}), buf)
        >>> md = pq.ParquetFile(buf).metadata
        >>> _all_null(md, "txn"), _all_null(md, "add"), _all_null(md, "add.tags")
        (True, False, True)
    """
    leaves = [j for j in range(md.num_columns) if (md.schema.column(j).path + ".").startswith(column + ".")]
    if not leaves or not md.num_row_groups:
        return False
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in leaves:
            chunk = rg.column(j)
            st = chunk.statistics
            if st is None or not st.has_null_count or st.null_count != chunk.num_values:
                return False
    return True


def _add_projection(schema: pa.Schema) -> list[str]:
    """``add.<field>`` for every field but the ``*_parsed`` copies (tombstones and head columns skipped).

    Example:
        >>> _add_projection(pa.schema([("add", pa.struct([("path", pa.string()), ("stats_parsed", pa.int64())])),
        ...                            ("remove", pa.struct([("path", pa.string())]))]))
        ['add.path']
    """
    if "add" not in schema.names:
        return []
    typ = schema.field("add").type
    return [f"add.{typ.field(i).name}" for i in range(typ.num_fields) if not typ.field(i).name.endswith("_parsed")]


def _non_null_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    mask = None
    for name in batch.schema.names:
        valid = batch.column(name).is_valid()
        mask = valid if mask is None else pc.or_(mask, valid)
    return batch if mask is None else batch.filter(mask)


def _add_mask(add: pa.Array, physical: str | None, values: set[str | None]) -> pa.Array:
    """True for the rows whose ``add`` is present and whose partition ``physical`` holds one of ``values``."""
    present = add.is_valid()
    if physical is None:
        return present
    found = partition_column(add, physical)
    if isinstance(values, _Spellings):  # typed values: each distinct text of the batch parsed once
        texts = pc.unique(found).to_pylist()
        wanted_texts = pa.array(sorted(t for t in texts if t is not None and t in values), pa.string())
        hit = pc.fill_null(pc.is_in(found, value_set=wanted_texts), False)
        return pc.and_(present, pc.or_(hit, found.is_null()) if None in values else hit)
    wanted = pa.array(sorted(v for v in values if v is not None), pa.string())
    hit = pc.fill_null(pc.is_in(found, value_set=wanted), False)
    if None in values:
        hit = pc.or_(hit, found.is_null())
    return pc.and_(present, hit)


def partition_column(add: pa.Array, physical: str) -> pa.Array:
    """The value of one partition column for each ``add`` row of a checkpoint batch (null: null or absent).

    Example:
        >>> rows = [[("r", "1")], None, [("s", "x"), ("r", None)], [("r", "2")]]
        >>> pv = pa.array(rows, pa.map_(pa.string(), pa.string()))
        >>> partition_column(pa.StructArray.from_arrays([pv], ["partitionValues"]), "r").to_pylist()
        ['1', None, None, '2']
    """
    maps = pc.struct_field(add, "partitionValues")
    n = len(maps)
    offsets = maps.offsets.to_numpy()
    counts = np.diff(offsets)
    if maps.null_count:
        counts = np.where(maps.is_valid().to_numpy(zero_copy_only=False), counts, 0)
    parent = np.repeat(np.arange(n, dtype=np.int64), counts)
    entries = np.repeat(offsets[:-1], counts) + (np.arange(len(parent)) - np.repeat(np.cumsum(counts) - counts, counts))
    keys = maps.keys.take(pa.array(entries, pa.int64())) if len(entries) else pa.array([], pa.string())
    hit = pc.fill_null(pc.equal(keys, pa.scalar(physical, pa.string())), False).to_numpy(zero_copy_only=False)
    index = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    index[parent[hit][::-1]] = entries[hit][::-1]  # the first entry of the key wins
    found[parent[hit]] = True
    return maps.items.take(pa.array(index, pa.int64(), mask=~found))


class _Spellings(set):
    """Partition values of a type spelled more than one way in logs: membership by typed value."""

    def __init__(self, values: set[str | None], typ: pa.DataType) -> None:
        super().__init__(values)
        self.typ = typ
        self.keys = {partition_key(v, typ) for v in values}

    def __contains__(self, text: object) -> bool:
        return partition_key(text if isinstance(text, str) else None, self.typ) in self.keys


def _matches(partition_values: dict[str, str | None] | None, physical: str | None, values: set[str | None]) -> bool:
    return physical is None or (partition_values or {}).get(physical) in values


def _lines(
    data: bytes, version: int, *, skip: re.Pattern[bytes] | None = None, keep: list[bytes] | None = None
) -> Iterator[dict[str, Any]]:
    """The actions of a commit file as JSON objects. ``skip``: lines whose start matches are not parsed.
    ``keep``: an ``add`` line is parsed only when it holds one of these byte strings or any escape (so a
    line that could be in the partition is never missed)."""
    for n, raw in enumerate(data.splitlines()):
        if not raw.strip():
            continue
        if skip is not None and skip.match(raw):
            continue
        if keep is not None and _ADD.match(raw) and not _may_hold(raw, keep):
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            raise CorruptDataError(
                f"log entry {version} line {n + 1} is not JSON; the table's log is damaged, repair it first"
            ) from None
        if not isinstance(line, dict) or len(line) != 1:
            raise CorruptDataError(f"log entry {version} line {n + 1}: not exactly one action")
        yield line


# The first key of a one-action line names the action; these lines are not needed for the table's head.
_ADD = re.compile(rb'\s*\{\s*"add"\s*:')


_PARTITION_VALUES = re.compile(rb'"partitionValues"\s*:\s*(\{(?:[^"{}]|"(?:[^"\\]|\\.)*")*\})')


def _may_hold(raw: bytes, keep: list[bytes]) -> bool:
    """Whether an ``add`` line may belong to the partition: its ``partitionValues`` object (a flat object
    of strings; an unescaped quote cannot occur inside a string, so the key is found unambiguously) holds
    one of the encoded values, or it has escapes or cannot be found (then the line is parsed).

    Example:
        >>> _may_hold(b'{"add":{"path":"a","partitionValues":{"r":"1"},"stats":"{\\"x\\":\\"0\\"}"}}', [b'"0"'])
        False
        >>> _may_hold(b'{"add":{"path":"a","partitionValues":{"r":"0"}}}', [b'"0"'])
        True
    """
    m = _PARTITION_VALUES.search(raw)
    if m is None:
        return True
    segment = m.group(1)
    return b"\\" in segment or any(k in segment for k in keep)


_ADD_RE2 = r'^\s*\{\s*"add"\s*:'


def _split_commit(data: bytes, needles: list[bytes] | None) -> tuple[bytes, bytes]:
    """A commit file cut in Arrow into the lines that describe the table (not ``add``, ``remove``,
    ``cdc`` or ``commitInfo``) and the lines a partition can need: all of them when ``needles`` is None,
    else every line but the ``add`` lines whose ``partitionValues`` (free of escapes) hold none of the
    needles.

    Example:
        >>> data = b'{"metaData":{"id":"x"}}\\n{"add":{"partitionValues":{"r":"1"}}}\\n' \\
        ...        b'{"add":{"partitionValues":{"r":"0"}}}'
        >>> head, kept = _split_commit(data, [b'"0"'])
        >>> head, kept.count(b"add")
        (b'{"metaData":{"id":"x"}}', 1)
    """
    lines = _line_array(data)
    if not len(lines):
        return b"", b""
    # Lines as writers spell them; another spelling of a file action is parsed with the head lines (and
    # ignored there), and kept for the partition.
    file_action = pc.starts_with(lines, _FILE_PREFIXES[0])
    for prefix in _FILE_PREFIXES[1:]:
        file_action = pc.or_(file_action, pc.starts_with(lines, prefix))
    head = b"\n".join(line for line in lines.filter(pc.invert(file_action)).to_pylist() if line.strip())
    if needles is None:
        return head, data
    # An add line goes when its partitionValues has no escape and the line holds no needle anywhere (a needle
    # in those partition values would be in the line).
    has_needle = pc.match_substring(lines, needles[0].decode("utf-8"))
    for needle in needles[1:]:
        has_needle = pc.or_(has_needle, pc.match_substring(lines, needle.decode("utf-8")))
    candidates = pc.and_(pc.starts_with(lines, _FILE_PREFIXES[0]), pc.invert(has_needle))
    keep = pc.invert(candidates)
    if pc.any(candidates).as_py():
        # of the candidates, only those whose partition values are free of escapes may go
        clean = pc.match_substring_regex(lines.filter(candidates), _CLEAN_PARTITION_VALUES_RE2)
        clean_all = np.zeros(len(lines), dtype=bool)
        clean_all[np.flatnonzero(bool_numpy(candidates))] = bool_numpy(clean)
        keep = pc.or_(keep, bool_array(~clean_all))
    return head, b"\n".join(lines.filter(keep).to_pylist())


def _line_array(data: bytes) -> pa.Array:
    """The lines of a commit file (as ``bytes.splitlines`` cuts them) as one Arrow binary array, split in
    Arrow: ``pa.array`` of a list would import pandas, a quarter of a second per process.

    Example:
        >>> _line_array(b'{"a":1}\\r\\n{"b":2}\\n').to_pylist()
        [b'{"a":1}', b'{"b":2}']
    """
    if not data:
        return pa.nulls(0, pa.binary())
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if data.endswith(b"\n"):
        data = data[:-1]
    kind, width = (pa.binary(), np.int32) if len(data) < 2**31 else (pa.large_binary(), np.int64)
    whole = pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(np.array([0, len(data)], width)), pa.py_buffer(data)])
    return pc.split_pattern(whole, pattern="\n").flatten()


_FILE_PREFIXES = ('{"add":', '{"remove":', '{"cdc":', '{"commitInfo":')
_CLEAN_PARTITION_VALUES_RE2 = r'"partitionValues"\s*:\s*\{[^"{}\\]*("[^"\\]*"[^"{}\\]*)*\}'


def _needles(values: set[str | None]) -> list[bytes] | None:
    """Byte strings one of which an unescaped ``add`` line of the partition must contain (None: no
    shortcut, as for the null partition, whose key may be absent).

    Example:
        >>> _needles({"0", "é"})
        [b'"0"', b'"\\xc3\\xa9"']
    """
    if None in values:
        return None
    return sorted(json.dumps(v, ensure_ascii=False).encode("utf-8") for v in values)
