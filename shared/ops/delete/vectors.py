"""Deletion vectors for a delete: writing the new vectors (inline or in one new vector file) and the ``add``
that re-adds a file with its new vector (whether the table allows them: :mod:`deltaextras.ops.common.features`).

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.core.storage import TableStorage
    >>> from deltaextras.ops.common.features import deletion_vectors_enabled
    >>> from deltaextras.ops.common.table import load_snapshot
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [1]}), configuration={"delta.enableDeletionVectors": "true"})
    >>> deletion_vectors_enabled(load_snapshot(TableStorage(path)))
    True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...core.actions import Add, DeletionVectorDescriptor
from ...core.dv import build_descriptors
from ...core.storage import TableStorage

if TYPE_CHECKING:  # the scan (and the predicate language under it) is not loaded by a rewrite
    from .scan import Target


def write_vectors(
    targets: list[Target], storage: TableStorage, inline_max_bytes: int, wrote: Callable[[str], None]
) -> None:
    """Give each target the descriptor of its new vector (its matched rows unioned with the old ones);
    vectors above ``inline_max_bytes`` share one new vector file, written here (``wrote`` is told first)."""
    if not targets:
        return
    descriptors, writer = build_descriptors([t.union() for t in targets], inline_max_bytes=inline_max_bytes)
    if writer is not None:
        wrote(writer.key)
        writer.write(storage)
    for t, d in zip(targets, descriptors, strict=True):
        t.descriptor = d


def dv_add(add: Add, descriptor: DeletionVectorDescriptor, num_rows: int) -> Add:
    """The ``add`` re-adding a file with a new deletion vector: same path, partition values, size,
    modification time and tags; ``dataChange: true``; statistics kept but marked ``tightBounds: false``,
    with ``numRecords`` the physical row count.

    Example:
        >>> a = dv_add(Add(path="p.parquet", size=9, modification_time=1, data_change=False,
        ...                stats='{"numRecords":10,"minValues":{"x":0}}'),
        ...            DeletionVectorDescriptor("i", "x", None, 1, 1), 10)
        >>> a.data_change, json.loads(a.stats)
        (True, {'numRecords': 10, 'minValues': {'x': 0}, 'tightBounds': False})
    """
    stats = add.stats_dict()
    stats["numRecords"] = num_rows
    stats["tightBounds"] = False
    return dataclasses.replace(
        add,
        data_change=True,
        stats=json.dumps(stats, separators=(",", ":")),
        deletion_vector=descriptor,
        partition_values=dict(add.partition_values or {}),
        extra=dict(add.extra),
    )
