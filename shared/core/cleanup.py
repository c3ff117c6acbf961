"""Deleting files that no committed log version names: the one orphan cleanup of every writer.

The caller proves that no version can name the files (nothing committed, or every attempted version
read back as someone else's); a file that cannot be deleted is logged and left for vacuum, never
raised over the error that led here.

Example:
    >>> import tempfile, pathlib
    >>> from deltaextras.core.storage import TableStorage
    >>> root = tempfile.mkdtemp(); _ = (pathlib.Path(root) / "part-0.parquet").write_bytes(b"x")
    >>> storage = TableStorage(root)
    >>> delete_orphans(storage, ["part-0.parquet", "never-written.parquet"])
    2
    >>> storage.exists("part-0.parquet")
    False
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .storage import TableStorage

log = logging.getLogger(__name__)


def delete_orphans(storage: TableStorage, keys: Iterable[str]) -> int:
    """Delete ``keys`` (storage keys under the table root) quietly; returns how many are gone (an
    absent file counts as gone)."""
    gone = 0
    for key in keys:
        try:
            storage.delete(key)
            gone += 1
        except Exception:  # cleanup must not mask the original error
            log.warning("could not delete orphan %s of %s (vacuum will)", key, storage.uri)
    return gone


__all__ = ["delete_orphans"]
