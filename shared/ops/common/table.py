"""The table an operation works on: a path, URI or ``deltalake.DeltaTable`` resolved to storage, and its
snapshot read from the log alone.

Example:
    >>> table_args("/tmp/t", {"k": "v"})
    ('/tmp/t', {'k': 'v'})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...core.log import list_log_for, replay
from ...core.protocol import check_protocol
from ...core.snapshot import TableSnapshot
from ...core.storage import TableStorage
from ...errors import InvalidArgumentError


def table_args(table: Any, storage_options: Mapping[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """URI and storage options of a path, URI or ``deltalake.DeltaTable``.

    Example:
        >>> table_args("/tmp/t", None)
        ('/tmp/t', None)
    """
    if isinstance(table, (str, os.PathLike)):
        return os.fspath(table), dict(storage_options) if storage_options is not None else None
    uri = getattr(table, "table_uri", None)
    if uri is None:
        raise InvalidArgumentError(f"expected a table URI or a deltalake.DeltaTable, got {type(table).__name__}")
    if storage_options is None:
        storage_options = getattr(table, "_storage_options", None)
    return str(uri), dict(storage_options) if storage_options else None


def load_snapshot(storage: TableStorage, version: int | None = None) -> TableSnapshot:
    """The table at ``version`` (default latest) from the log alone, protocol checked for a delete.

    Unlike :meth:`TableSnapshot.load` this does not open the table with deltalake.
    """
    listing = list_log_for(storage, version)
    v = listing.latest if version is None else version
    state = replay(storage, v, listing)
    assert state.protocol is not None and state.metadata is not None
    check_protocol(state.protocol, dict(state.metadata.configuration or {}), state.metadata.schema_string)
    return TableSnapshot(storage, state, None)
