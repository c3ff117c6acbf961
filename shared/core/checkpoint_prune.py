"""Removing superseded checkpoints: the log keeps every commit, and one checkpoint where many piled up.

A checkpoint holds every live ``add`` and every unexpired ``remove`` tombstone (a week by default) of its
version, so a table that writes one every ten versions stores the whole table state over and over: on
a ``node_id_range`` table appended every five minutes and rewritten every hour, 48 hours left 400 MB
of checkpoints beside 15 MB of live data. Checkpoints are optional in the Delta protocol: a reader
finds the newest one at or below the version it wants (``_last_checkpoint`` names the newest) and
replays the commits after it, or replays from version 0 when there is none. So once a new checkpoint
is written, the ones between the oldest and the newest are removed when

* every commit from the oldest checkpoint up to the newest is present, so that any version between
  them can still be rebuilt (from the oldest checkpoint, which is kept: after log cleanup it may be
  the only base of the versions after it); commit files are never removed here, time travel keeps
  working;
* it was superseded more than :data:`KEEP_SECONDS` ago (the next newer checkpoint was written that long
  ago): a reader that listed the log while it was the newest, and is reading it now, finds it still there.
  Its own age says nothing: on a quiet table a checkpoint a day old is the one every reader loads until
  the next is written;
* it is a classic checkpoint (one file or its parts); v2 checkpoints are left to their writers.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.core.storage import TableStorage
    >>> path = tempfile.mkdtemp()
    >>> for v in range(4):
    ...     write_deltalake(path, pa.table({"x": [v]}), mode="append")
    ...     DeltaTable(path).create_checkpoint()
    >>> prune_checkpoints(TableStorage(path), 3, keep_seconds=0)
    ['_delta_log/00000000000000000001.checkpoint.parquet', '_delta_log/00000000000000000002.checkpoint.parquet']
    >>> DeltaTable(path, version=2).to_pyarrow_table().num_rows  # rebuilt from checkpoint 0 and commits 1-2
    3
"""

from __future__ import annotations

import itertools
import logging

from .actions import now_ms
from .log import is_classic_checkpoint, list_log, read_hint
from .storage import TableStorage

log = logging.getLogger(__name__)

KEEP_SECONDS = 3600.0  # a checkpoint superseded more recently is kept: readers may have listed it


def prune_checkpoints(storage: TableStorage, newest: int, *, keep_seconds: float | None = None) -> list[str]:
    """Delete the checkpoints strictly between the oldest and ``newest`` (a checkpoint just written) that
    were superseded more than ``keep_seconds`` ago (default :data:`KEEP_SECONDS`), when the commits from the oldest to
    ``newest`` are all present, never the one ``_last_checkpoint`` names; returns the keys deleted.
    Never raises: a checkpoint left behind only costs bytes."""
    keep_seconds = KEEP_SECONDS if keep_seconds is None else keep_seconds
    try:
        listing = list_log(storage, modified=True)
        if newest not in listing.checkpoints:
            return []
        oldest = min(listing.checkpoints)
        if any(v not in listing.commits for v in range(oldest + 1, newest + 1)):
            return []
        cutoff = now_ms() - int(keep_seconds * 1000)
        hint = read_hint(storage)  # a hint that cannot be read raises: nothing is removed
        hinted = None if hint is None else int(hint["version"])
        versions = sorted(listing.checkpoints)
        doomed = []
        for version, successor in itertools.pairwise(versions):
            keys = listing.checkpoints[version]
            if not oldest < version < newest or version == hinted:
                continue
            superseded = all(listing.modified.get(k, cutoff) < cutoff for k in listing.checkpoints[successor])
            if superseded and all(is_classic_checkpoint(k) for k in keys):
                doomed.extend(keys)
        doomed.sort()
        storage.delete_many(doomed)
        return doomed
    except Exception as exc:  # an optimisation: the table is whole either way
        log.warning("superseded checkpoints of %s not removed: %s", storage.uri, str(exc)[:200])
        return []


__all__ = ["KEEP_SECONDS", "prune_checkpoints"]
