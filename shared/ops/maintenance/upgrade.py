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

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ...core.actions import Action, CommitInfo, Protocol, now_ms
from ...core.commit_policy import DEFAULT_POLICY
from ...core.commit_result import CommitOutcome, CommitResult
from ...core.conflicts import IsolationLevel, ReadSet
from ...core.snapshot import TableSnapshot
from ...core.storage import TableStorage
from ...core.transaction import Transaction
from ...errors import MetadataChangedError, ProtocolChangedError
from ..common.table import load_snapshot, table_args

# Features implied by the legacy protocol versions (PROTOCOL.md, "Table Features for New and Existing Tables").
_LEGACY_WRITER = {
    2: ["appendOnly", "invariants"],
    3: ["checkConstraints"],
    4: ["changeDataFeed", "generatedColumns"],
    5: ["columnMapping"],
    6: ["identityColumns"],
}
_LEGACY_READER = {2: ["columnMapping"]}


def upgraded_protocol(protocol: Protocol, reader: list[str], writer: list[str]) -> Protocol:
    """The protocol with the given reader and writer features added, at reader 3 / writer 7.

    Example:
        >>> upgraded_protocol(Protocol(1, 4), ["deletionVectors"], ["deletionVectors"]).writer_features
        ['appendOnly', 'changeDataFeed', 'checkConstraints', 'deletionVectors', 'generatedColumns', 'invariants']
    """
    old_reader = int(protocol.min_reader_version)
    old_writer = int(protocol.min_writer_version)
    readers = set(protocol.reader_features or [])
    writers = set(protocol.writer_features or [])
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
    return Protocol(3, 7, sorted(readers), sorted(writers), dict(protocol.extra))


def enable_deletion_vectors(table: Any, *, storage_options: Mapping[str, str] | None = None) -> int | None:
    """Enable deletion vectors on a table: protocol upgrade and ``delta.enableDeletionVectors=true``.

    Returns the version committed, or None when the table already had both. A concurrent change of the
    table's metadata or protocol makes it look again (up to a few times), then
    :class:`~deltaextras.errors.CommitConflictError` (nothing committed; call again).
    """
    uri, options = table_args(table, storage_options)
    storage = TableStorage(uri, options)
    result = DEFAULT_POLICY.restarting(
        lambda _restart: _enable(load_snapshot(storage)), (MetadataChangedError, ProtocolChangedError)
    )
    return result.version


def _enable(snap: TableSnapshot) -> CommitResult:
    """Commit the upgrade against ``snap``; :attr:`CommitOutcome.NOTHING_TO_DO` when the table has it."""
    has = snap.protocol.has_feature("deletionVectors") and "deletionVectors" in (snap.protocol.reader_features or [])
    config = dict(snap.configuration)
    enabled = str(config.get("delta.enableDeletionVectors", "false")).lower() == "true"
    if has and enabled:
        return CommitResult(CommitOutcome.NOTHING_TO_DO)
    actions: list[Action] = [
        CommitInfo(
            timestamp=now_ms(),
            operation="SET TBLPROPERTIES",
            operation_parameters={"properties": json.dumps({"delta.enableDeletionVectors": "true"})},
            is_blind_append=True,  # as Spark writes a metadata-only commit
        )
    ]
    if not has:
        actions.append(upgraded_protocol(snap.protocol, ["deletionVectors"], ["deletionVectors"]))
    if not enabled:
        config["delta.enableDeletionVectors"] = "true"
        actions.append(dataclasses.replace(snap.metadata, configuration=config))
    # Reads no data: only a concurrent metadata or protocol change conflicts with it.
    txn = Transaction(snap, "SET TBLPROPERTIES", IsolationLevel.SERIALIZABLE, ReadSet(writes_protocol=True))
    return txn.commit(lambda _v: actions)
