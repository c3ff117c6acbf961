"""Delta log actions of a rewrite commit: ``commitInfo``, ``txn``, one ``remove`` per input (repeating
its deletion vector descriptor, so the logical file really goes away) and one ``add`` per output.

Example:
    >>> remove = remove_action({"path": "a.parquet", "size": 10, "partitionValues": {},
    ...                         "deletionVector": {"storageType": "u", "pathOrInlineDv": "x",
    ...                                            "offset": 1, "sizeInBytes": 36, "cardinality": 2}}, 1)
    >>> remove["remove"]["deletionVector"]["cardinality"], remove["remove"]["dataChange"]
    (2, False)
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from ..version import __version__

ENGINE = f"deltaextras/{__version__}"
_KEEP_ON_REMOVE = (
    "partitionValues",
    "size",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "stats",
)


class WrittenFile(Protocol):
    """What an ``add`` needs to know of a file a writer produced."""

    path: str
    size: int
    stats: dict[str, Any]
    tags: dict[str, str]


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


def remove_action(add: dict[str, Any], timestamp: int, *, data_change: bool = False) -> dict[str, Any]:
    """The ``remove`` that retires exactly the logical file an ``add`` created (``data_change``: the
    commit changes the table's content, e.g. rows were dropped)."""
    body: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": timestamp,
        "dataChange": data_change,
        "extendedFileMetadata": True,
    }
    for key in _KEEP_ON_REMOVE:
        if add.get(key) is not None:
            body[key] = add[key]
    body.setdefault("partitionValues", {})
    return {"remove": body}


def add_action(
    out: WrittenFile, partition_values: dict[str, str | None], timestamp: int, *, data_change: bool = False
) -> dict[str, Any]:
    """The ``add`` of one written file (``dataChange: false`` by default: the table's content is unchanged)."""
    return {
        "add": {
            "path": out.path,
            "partitionValues": partition_values,
            "size": out.size,
            "modificationTime": timestamp,
            "dataChange": data_change,
            "stats": json.dumps(out.stats, separators=(",", ":")),
            "tags": out.tags,
        }
    }


def txn_action(app_id: str, version: int, timestamp: int) -> dict[str, Any]:
    """The idempotency marker: a redelivered message with the same (appId, version) commits nothing."""
    return {"txn": {"appId": app_id, "version": version, "lastUpdated": timestamp}}


def commit_info(
    *,
    read_version: int,
    timestamp: int,
    parameters: dict[str, Any],
    metrics: dict[str, int],
    operation: str = "OPTIMIZE",
) -> dict[str, Any]:
    """``commitInfo`` in the shape Spark writes (parameters and metrics as strings); ``OPTIMIZE`` unless
    the rewrite changed the content (``DELETE``: it dropped duplicate rows)."""
    return {
        "commitInfo": {
            "timestamp": timestamp,
            "operation": operation,
            "operationParameters": {k: json.dumps(v) if not isinstance(v, str) else v for k, v in parameters.items()},
            "readVersion": read_version,
            "isolationLevel": "SnapshotIsolation" if operation == "OPTIMIZE" else "WriteSerializable",
            "isBlindAppend": False,
            "operationMetrics": {k: str(v) for k, v in metrics.items()},
            "engineInfo": ENGINE,
        }
    }


def encode(actions: list[dict[str, Any]]) -> bytes:
    """Newline-delimited JSON, as commit files hold it."""
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n").encode("utf-8")
