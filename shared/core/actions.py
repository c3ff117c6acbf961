"""Delta log actions as typed classes, and their codec: JSON lines of commit files and rows of
checkpoint Parquet files.

Each action class names the fields the protocol defines; the codec is driven by those declarations
(maps stay maps, lists stay lists, a deletion vector descriptor is a :class:`DeletionVectorDescriptor`)
and keeps every field it does not know in ``extra``, so an action read and written again is unchanged.
Nothing outside this module handles actions as ``dict``.

Example:
    >>> line = b'{"add":{"path":"a.parquet","partitionValues":{},"size":10,"modificationTime":1,' \\
    ...        b'"dataChange":true,"clusteringProvider":"x","futureField":[1]}}'
    >>> (add,) = decode_commit(line, 3)
    >>> add.path, add.partition_values, add.extra
    ('a.parquet', {}, {'clusteringProvider': 'x', 'futureField': [1]})
    >>> encode_commit([add]) == line + b"\\n"
    True
    >>> add.retire(5, data_change=False).to_json()["remove"]["dataChange"]
    False
"""

# The field declarations below call _f/_extra, which return dataclasses.field(...) with the codec's
# metadata; ruff cannot see through that.
# ruff: noqa: RUF009
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar
from typing import Protocol as TypingProtocol

import pyarrow as pa

from ..errors import CorruptDataError
from ..version import __version__

ENGINE = f"deltaextras/{__version__}"


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


# ------------------------------------------------------------------------------------------ codec
# A field's kind tells the codec its shape: "map" (string keys), "list", "dv" (a nested descriptor),
# or "value" (a JSON scalar or an opaque JSON value kept as it is).
def _f(json_name: str, kind: str = "value", default: Any = None) -> Any:
    if kind in ("map", "list") and default is not None:
        return field(default_factory=default, metadata={"json": json_name, "kind": kind})
    return field(default=default, metadata={"json": json_name, "kind": kind})


def _extra() -> Any:
    return field(default_factory=dict, metadata={"json": None, "kind": "extra"})


class _Codec:
    """Schema-driven JSON encoding and decoding of one action body."""

    KEY: ClassVar[str] = ""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Any:
        if not isinstance(body, dict):
            raise CorruptDataError(f"log action {cls.KEY!r} is not a JSON object")
        values: dict[str, Any] = {}
        rest = dict(body)
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            name, kind = f.metadata["json"], f.metadata["kind"]
            if kind == "extra" or name not in rest:
                continue
            raw = rest.pop(name)
            if raw is None:
                values[f.name] = None
            elif kind == "map":
                values[f.name] = _as_map(raw, cls.KEY, name)
            elif kind == "list":
                values[f.name] = _as_list(raw, cls.KEY, name)
            elif kind == "dv":
                values[f.name] = DeletionVectorDescriptor.from_json(raw)
            else:
                values[f.name] = raw
        values["extra"] = rest
        return cls(**values)

    def to_json_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            name, kind = f.metadata["json"], f.metadata["kind"]
            if kind == "extra":
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            if kind == "dv":
                value = value.to_json_body()
            elif kind == "map":
                value = dict(value)
            elif kind == "list":
                value = list(value)
            body[name] = value
        for k, v in self.extra.items():  # type: ignore[attr-defined]
            body.setdefault(k, v)
        return body

    def to_json(self) -> dict[str, Any]:
        """The action as one line of a commit file holds it (``{"add": {...}}``)."""
        return {self.KEY: self.to_json_body()}


def _as_map(raw: Any, key: str, name: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return dict(raw)
    raise CorruptDataError(f"log action {key!r} field {name!r} must be a map, got {type(raw).__name__}")


def _as_list(raw: Any, key: str, name: str) -> list[Any]:
    if isinstance(raw, list):
        return list(raw)
    raise CorruptDataError(f"log action {key!r} field {name!r} must be a list, got {type(raw).__name__}")


# ---------------------------------------------------------------------------------------- actions
@dataclass
class DeletionVectorDescriptor(_Codec):
    """Where a file's deleted rows are: inline (``i``), a UUID-named file (``u``) or a path (``p``)."""

    KEY: ClassVar[str] = "deletionVector"
    storage_type: str = _f("storageType", default="")
    path_or_inline_dv: str = _f("pathOrInlineDv", default="")
    offset: int | None = _f("offset")
    size_in_bytes: int = _f("sizeInBytes", default=0)
    cardinality: int = _f("cardinality", default=0)
    extra: dict[str, Any] = _extra()

    @property
    def unique_id(self) -> str:
        """The protocol's unique id of the vector (storage type, path, ``@offset``).

        Example:
            >>> DeletionVectorDescriptor("u", "ab", 1, 36, 2).unique_id
            'uab@1'
        """
        uid = f"{self.storage_type}{self.path_or_inline_dv}"
        return uid if self.offset is None else f"{uid}@{self.offset}"


@dataclass
class Add(_Codec):
    """A logical file enters the table (path plus deletion vector)."""

    KEY: ClassVar[str] = "add"
    path: str = _f("path", default="")
    partition_values: dict[str, str | None] = _f("partitionValues", "map", dict)
    size: int = _f("size", default=0)
    modification_time: int = _f("modificationTime", default=0)
    data_change: bool = _f("dataChange", default=True)
    stats: str | None = _f("stats")
    tags: dict[str, str] | None = _f("tags", "map")
    deletion_vector: DeletionVectorDescriptor | None = _f("deletionVector", "dv")
    base_row_id: int | None = _f("baseRowId")
    default_row_commit_version: int | None = _f("defaultRowCommitVersion")
    extra: dict[str, Any] = _extra()

    @property
    def file_id(self) -> tuple[str, str | None]:
        """The logical file's identity: (path, deletion vector unique id)."""
        return self.path, self.deletion_vector.unique_id if self.deletion_vector else None

    def stats_dict(self) -> dict[str, Any]:
        """The JSON statistics (empty when absent or unreadable)."""
        if not self.stats:
            return {}
        try:
            parsed = json.loads(self.stats) if isinstance(self.stats, str) else dict(self.stats)
        except (TypeError, ValueError):
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def retire(self, timestamp: int, *, data_change: bool) -> Remove:
        """The ``remove`` that retires exactly this logical file (repeating its deletion vector, so the
        (path, vector) pair really goes away). Without the file's statistics (optional in a ``remove``; no
        reader of tombstones uses them): they were half the bytes of a rewrite's commit, and a checkpoint
        carries every tombstone for a week."""
        return Remove(
            path=self.path,
            deletion_timestamp=timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values or {}),
            size=self.size,
            tags=None if self.tags is None else dict(self.tags),
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


@dataclass
class Remove(_Codec):
    """A logical file leaves the table."""

    KEY: ClassVar[str] = "remove"
    path: str = _f("path", default="")
    deletion_timestamp: int | None = _f("deletionTimestamp")
    data_change: bool = _f("dataChange", default=True)
    extended_file_metadata: bool | None = _f("extendedFileMetadata")
    partition_values: dict[str, str | None] | None = _f("partitionValues", "map")
    size: int | None = _f("size")
    tags: dict[str, str] | None = _f("tags", "map")
    deletion_vector: DeletionVectorDescriptor | None = _f("deletionVector", "dv")
    base_row_id: int | None = _f("baseRowId")
    default_row_commit_version: int | None = _f("defaultRowCommitVersion")
    stats: str | None = _f("stats")
    extra: dict[str, Any] = _extra()

    @property
    def file_id(self) -> tuple[str, str | None]:
        """The logical file's identity: (path, deletion vector unique id)."""
        return self.path, self.deletion_vector.unique_id if self.deletion_vector else None


@dataclass
class Metadata(_Codec):
    """The table's identity, schema, partitioning and properties."""

    KEY: ClassVar[str] = "metaData"
    id: str = _f("id", default="")
    name: str | None = _f("name")
    description: str | None = _f("description")
    format: dict[str, Any] = _f("format", "map", lambda: {"provider": "parquet", "options": {}})
    schema_string: str | None = _f("schemaString")
    partition_columns: list[str] = _f("partitionColumns", "list", list)
    configuration: dict[str, str] = _f("configuration", "map", dict)
    created_time: int | None = _f("createdTime")
    extra: dict[str, Any] = _extra()


@dataclass
class Protocol(_Codec):
    """The reader and writer versions and features a client needs."""

    KEY: ClassVar[str] = "protocol"
    min_reader_version: int = _f("minReaderVersion", default=1)
    min_writer_version: int = _f("minWriterVersion", default=1)
    reader_features: list[str] | None = _f("readerFeatures", "list")
    writer_features: list[str] | None = _f("writerFeatures", "list")
    extra: dict[str, Any] = _extra()

    def has_feature(self, name: str) -> bool:
        """Whether a table feature is named (reader or writer list)."""
        return name in (self.reader_features or []) or name in (self.writer_features or [])


@dataclass
class Txn(_Codec):
    """An application's idempotency marker: ``(appId, version)`` committed."""

    KEY: ClassVar[str] = "txn"
    app_id: str = _f("appId", default="")
    version: int = _f("version", default=-1)
    last_updated: int | None = _f("lastUpdated")
    extra: dict[str, Any] = _extra()


@dataclass
class CommitInfo(_Codec):
    """Provenance of a commit; ``txn_id`` identifies the attempt that wrote it."""

    KEY: ClassVar[str] = "commitInfo"
    in_commit_timestamp: int | None = _f("inCommitTimestamp")
    timestamp: int | None = _f("timestamp")
    operation: str | None = _f("operation")
    operation_parameters: dict[str, Any] | None = _f("operationParameters", "map")
    read_version: int | None = _f("readVersion")
    isolation_level: str | None = _f("isolationLevel")
    is_blind_append: bool | None = _f("isBlindAppend")
    operation_metrics: dict[str, Any] | None = _f("operationMetrics", "map")
    engine_info: str | None = _f("engineInfo")
    txn_id: str | None = _f("txnId")
    extra: dict[str, Any] = _extra()


@dataclass
class DomainMetadata(_Codec):
    """Configuration of one named metadata domain (``removed``: the domain is dropped)."""

    KEY: ClassVar[str] = "domainMetadata"
    domain: str = _f("domain", default="")
    configuration: str = _f("configuration", default="")
    removed: bool = _f("removed", default=False)
    extra: dict[str, Any] = _extra()


@dataclass
class Cdc(_Codec):
    """A change data file of the commit."""

    KEY: ClassVar[str] = "cdc"
    path: str = _f("path", default="")
    partition_values: dict[str, str | None] = _f("partitionValues", "map", dict)
    size: int = _f("size", default=0)
    data_change: bool = _f("dataChange", default=False)
    tags: dict[str, str] | None = _f("tags", "map")
    extra: dict[str, Any] = _extra()


@dataclass
class Sidecar(_Codec):
    """A v2 checkpoint's pointer to a file of more checkpoint actions."""

    KEY: ClassVar[str] = "sidecar"
    path: str = _f("path", default="")
    size_in_bytes: int | None = _f("sizeInBytes")
    modification_time: int | None = _f("modificationTime")
    tags: dict[str, str] | None = _f("tags", "map")
    extra: dict[str, Any] = _extra()


@dataclass
class OtherAction:
    """An action this version of deltaextras does not model (``checkpointMetadata``, future kinds), kept
    verbatim."""

    key: str
    body: Any

    def to_json(self) -> dict[str, Any]:
        return {self.key: self.body}


Action = Add | Remove | Metadata | Protocol | Txn | CommitInfo | DomainMetadata | Cdc | Sidecar | OtherAction
_KINDS: dict[str, Any] = {
    c.KEY: c for c in (Add, Remove, Metadata, Protocol, Txn, CommitInfo, DomainMetadata, Cdc, Sidecar)
}


def decode_action(line: dict[str, Any]) -> Action:
    """One action from its JSON object (``{"add": {...}}``)."""
    if not isinstance(line, dict) or len(line) != 1:
        raise CorruptDataError("a log line must be a JSON object with exactly one action")
    ((key, body),) = line.items()
    kind = _KINDS.get(key)
    return OtherAction(key, body) if kind is None else kind.from_json(body)


def decode_commit(data: bytes, version: int) -> list[Action]:
    """The actions of one commit file (newline-delimited JSON)."""
    actions: list[Action] = []
    for n, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError:
            raise CorruptDataError(
                f"log entry {version} line {n + 1} is not JSON; the table's log is damaged, repair it first"
            ) from None
        try:
            actions.append(decode_action(parsed))
        except (CorruptDataError, TypeError) as exc:
            raise CorruptDataError(f"log entry {version} line {n + 1}: {exc}") from None
    return actions


def encode_commit(actions: Iterable[Action]) -> bytes:
    """Newline-delimited JSON, as commit files hold it."""
    return ("\n".join(json.dumps(a.to_json(), separators=(",", ":")) for a in actions) + "\n").encode("utf-8")


# ------------------------------------------------------------------------------ checkpoint Parquet
CHECKPOINT_COLUMNS = ("add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar")


def decode_checkpoint_batch(batch: pa.RecordBatch) -> Iterator[Action]:
    """The actions of checkpoint rows, each value shaped by its Parquet type (a map column is a map even
    when empty, a list a list); the checkpoint-only ``*_parsed`` copies are dropped."""
    for name in batch.schema.names:
        if name not in _KINDS:
            continue
        column = batch.column(name)
        typ = column.type
        for value in column.to_pylist():
            if value is not None:
                yield _KINDS[name].from_json(_shaped(value, typ))


def _shaped(value: Any, typ: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(typ):
        return {k: _shaped(v, typ.item_type) for k, v in value}
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return [_shaped(v, typ.value_type) for v in value]
    if pa.types.is_struct(typ):
        return {
            typ.field(i).name: _shaped(value.get(typ.field(i).name), typ.field(i).type)
            for i in range(typ.num_fields)
            if not typ.field(i).name.endswith("_parsed") and value.get(typ.field(i).name) is not None
        }
    return value


# ------------------------------------------------------------------------------- writing helpers
class WrittenFile(TypingProtocol):
    """What an ``add`` needs to know of a file a writer produced."""

    path: str
    size: int
    stats: dict[str, Any]
    tags: dict[str, str]


def add_of(out: WrittenFile, partition_values: dict[str, str | None], timestamp: int, *, data_change: bool) -> Add:
    """The ``add`` of one written file.

    Example:
        >>> class F: path, size, stats, tags = "p.parquet", 5, {"numRecords": 1}, {}
        >>> add_of(F(), {}, 7, data_change=False).stats
        '{"numRecords":1}'
    """
    return Add(
        path=out.path,
        partition_values=dict(partition_values),
        size=out.size,
        modification_time=timestamp,
        data_change=data_change,
        stats=json.dumps(out.stats, separators=(",", ":")),
        tags=dict(out.tags),
    )
