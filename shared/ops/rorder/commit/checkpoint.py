"""After a rewrite: a checkpoint when the table's newest one lags behind.

A query opens the table by replaying the log from its newest checkpoint. A rewrite that commits into a
log whose last checkpoint is many versions back leaves every later reader fetching those commit files
(deltalake fetched 197 log objects for one point query on a table whose checkpoint was 92 commits
back; 12 once a checkpoint followed the rewrite: see ``bench/README.md``, query benchmark). So once
``rorder`` has committed, it writes a checkpoint of its version when the newest checkpoint is at least
the table's checkpoint interval behind: ``delta.checkpointInterval`` when the table sets it, else 10
(Delta's own default). A checkpoint is an optimisation: reading the hint or writing the checkpoint may
fail, which is logged as a warning and never fails or undoes the commit.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake, DeltaTable
    >>> from deltaextras.core.snapshot import TableSnapshot
    >>> path = tempfile.mkdtemp()
    >>> for _ in range(3):
    ...     write_deltalake(path, pa.table({"x": [1]}), mode="append")
    >>> snap = TableSnapshot.load(path)
    >>> every3 = {"delta.checkpointInterval": "3"}  # versions 0-2 and no checkpoint yet: it lags 3 versions
    >>> checkpoint_after_rewrite(snap.storage, 2, every3, snap.protocol)
    2
    >>> checkpoint_after_rewrite(snap.storage, 2, every3, snap.protocol) is None  # no lag now
    True
"""

from __future__ import annotations

import logging
from typing import Any

from ....core.actions import Protocol
from ....core.log import list_log, read_hint
from ....core.storage import TableStorage
from ....core.transaction import checkpoint_interval, write_checkpoint

log = logging.getLogger(__name__)

# Delta's default delta.checkpointInterval (delta-rs defaults to 100, Spark to 10: a point query should not
# replay 100 commits after a rewrite meant to make it cheap).
DEFAULT_LAG = 10
# delta-rs holds the whole table while it writes a checkpoint (3.6 s and 949 MB for 1,000,000 live files in
# bench/plan_bench.py): a worker that rewrote one partition of a larger table leaves the checkpoint to the
# table's own interval (``Transaction`` writes one at ``delta.checkpointInterval``) rather than risk its memory.
MAX_CHECKPOINT_ACTIONS = 200_000


def checkpoint_lag_limit(configuration: dict[str, str]) -> int:
    """How many versions the newest checkpoint may lag before a rewrite writes one.

    Example:
        >>> checkpoint_lag_limit({}), checkpoint_lag_limit({"delta.checkpointInterval": "25"})
        (10, 25)
    """
    value = checkpoint_interval(configuration)
    return value if value is not None and value > 0 else DEFAULT_LAG


def _hint(storage: TableStorage) -> dict[str, Any]:
    """The ``_last_checkpoint`` hint, or ``{}`` when there is none or it cannot be read."""
    try:
        return read_hint(storage) or {}
    except Exception:  # a hint we cannot read: the listing decides
        return {}


def newest_checkpoint(storage: TableStorage, version: int, hint: dict[str, Any] | None = None) -> int:
    """The newest checkpoint at or below ``version`` (-1: none): the ``_last_checkpoint`` hint when it
    names one at or below ``version``, else a listing of the log."""
    hint = _hint(storage) if hint is None else hint
    try:
        hinted = int(hint["version"])
        if hinted <= version:
            return hinted
    except (KeyError, TypeError, ValueError):
        pass
    return max((v for v in list_log(storage).checkpoints if v <= version), default=-1)


def _too_large(hint: dict[str, Any]) -> bool:
    """Whether the last checkpoint holds more actions than a worker should load to write the next one."""
    size = hint.get("size")
    return isinstance(size, int) and not isinstance(size, bool) and size > MAX_CHECKPOINT_ACTIONS


def checkpoint_after_rewrite(
    storage: TableStorage, version: int, configuration: dict[str, str], protocol: Protocol
) -> int | None:
    """Write a checkpoint of ``version`` (just committed) when the newest checkpoint is at least
    :func:`checkpoint_lag_limit` versions behind; returns the version checkpointed, or ``None``.
    Never raises: a failure is logged as a warning and the commit stands."""
    try:
        hint = _hint(storage)
        newest = newest_checkpoint(storage, version, hint)
        if version - newest < checkpoint_lag_limit(configuration):
            return None
        if _too_large(hint):
            log.info(
                "no checkpoint after the commit of version %d: the last one holds %s actions (more than %d);"
                " the table's own checkpoint interval applies",
                version,
                hint.get("size"),
                MAX_CHECKPOINT_ACTIONS,
            )
            return None
        return version if write_checkpoint(storage, version, protocol) else None
    except Exception as exc:
        log.warning("no checkpoint after the commit of version %d (the commit stands): %s", version, str(exc)[:200])
        return None


__all__ = [
    "DEFAULT_LAG",
    "MAX_CHECKPOINT_ACTIONS",
    "checkpoint_after_rewrite",
    "checkpoint_lag_limit",
    "newest_checkpoint",
]
