"""Turning deletion vectors on for an existing table, when its owner asks for it.

:func:`enable_deletion_vectors` commits one log entry with

* a ``protocol`` action at reader version 3 / writer version 7 whose feature lists hold
  ``deletionVectors`` and every feature the old protocol versions implied (a table on writer
  version 2 keeps ``appendOnly`` and ``invariants``, on 4 also ``checkConstraints``,
  ``changeDataFeed`` and ``generatedColumns``, and so on, as the protocol requires of an upgrade);
* a ``metaData`` action with ``delta.enableDeletionVectors=true`` (writers may only add deletion
  vectors while that property is true).

After it, readers need Delta reader version 3 with the ``deletionVectors`` feature: delta-rs ≥ 0.15,
Spark with Delta ≥ 2.3, Databricks Runtime ≥ 12.2. Older readers can no longer read the table.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"x": [1, 2]}))
    >>> enable_deletion_vectors(path)
    1
    >>> p = DeltaTable(path).protocol()
    >>> p.min_reader_version, p.min_writer_version, sorted(p.writer_features)
    (3, 7, ['appendOnly', 'deletionVectors', 'invariants'])
    >>> enable_deletion_vectors(path) is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.actions import encode, now_ms
from ..core.commit import Intent, commit
from ..core.protocol import has_feature
from ..core.storage import TableStorage
from ..version import __version__

# Features implied by the legacy protocol versions (PROTOCOL.md, "Table Features for New and Existing Tables").
_LEGACY_WRITER = {
    2: ["appendOnly", "invariants"],
    3: ["checkConstraints"],
    4: ["changeDataFeed", "generatedColumns"],
    5: ["columnMapping"],
    6: ["identityColumns"],
}
_LEGACY_READER = {2: ["columnMapping"]}


def upgraded_protocol(protocol: Mapping[str, Any], reader: list[str], writer: list[str]) -> dict[str, Any]:
    """The protocol with the given reader and writer features added, at reader 3 / writer 7.

    Example:
        >>> upgraded_protocol({"minReaderVersion": 1, "minWriterVersion": 4}, ["deletionVectors"],
        ...                   ["deletionVectors"])["writerFeatures"]
        ['appendOnly', 'changeDataFeed', 'checkConstraints', 'deletionVectors', 'generatedColumns', 'invariants']
    """
    old_reader = int(protocol.get("minReaderVersion", 1))
    old_writer = int(protocol.get("minWriterVersion", 1))
    readers = set(protocol.get("readerFeatures") or [])
    writers = set(protocol.get("writerFeatures") or [])
    if old_writer < 7:
        for version, names in _LEGACY_WRITER.items():
            if old_writer >= version:
                writers.update(names)
    if old_reader < 3:
        for version, names in _LEGACY_READER.items():
            if old_reader >= version:
                readers.update(names)
    readers.update(reader)
    writers.update(writer)
    writers.update(readers)  # reader features are listed as writer features too
    return {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": sorted(readers),
        "writerFeatures": sorted(writers),
    }


def enable_deletion_vectors(table: Any, *, storage_options: Mapping[str, str] | None = None) -> int | None:
    """Enable deletion vectors on a table: protocol upgrade and ``delta.enableDeletionVectors=true``.

    Returns the version committed, or None when the table already had both. Raises
    :class:`~deltaextras.errors.CommitConflictError` if a concurrent commit changed the table's
    metadata or protocol first (nothing is committed then; call again).
    """
    from .delete import load_snapshot, table_args

    uri, options = table_args(table, storage_options)
    storage = TableStorage(uri, options)
    snap = load_snapshot(storage)
    config = dict(snap.configuration)
    has = has_feature(snap.protocol, "deletionVectors") and "deletionVectors" in (
        snap.protocol.get("readerFeatures") or []
    )
    enabled = str(config.get("delta.enableDeletionVectors", "false")).lower() == "true"
    if has and enabled:
        return None
    actions: list[dict[str, Any]] = []
    ts = now_ms()
    actions.append(
        {
            "commitInfo": {
                "timestamp": ts,
                "operation": "SET TBLPROPERTIES",
                "operationParameters": {"properties": json.dumps({"delta.enableDeletionVectors": "true"})},
                "readVersion": snap.version,
                "isolationLevel": "Serializable",
                "isBlindAppend": True,
                "engineInfo": f"deltaextras/{__version__}",
            }
        }
    )
    if not has:
        actions.append({"protocol": upgraded_protocol(snap.protocol, ["deletionVectors"], ["deletionVectors"])})
    if not enabled:
        metadata = dict(snap.metadata)
        config["delta.enableDeletionVectors"] = "true"
        metadata["configuration"] = config
        actions.append({"metaData": metadata})
    payload = encode(actions)
    result = commit(storage, snap.version, Intent(set(), "deltaextras.enable_deletion_vectors", -1), lambda _v: payload)
    return result.version
