"""Row tracking: the stable row ids and row commit versions of a table, kept through every rewrite.

A table that supports the ``rowTracking`` feature gives each file a ``baseRowId`` (row *i* of the file
has id ``baseRowId + i`` unless the file stores one) and a ``defaultRowCommitVersion`` (the version
that last changed a row, unless the file stores one); the domain ``delta.rowTracking`` keeps the
highest id handed out (``rowIdHighWaterMark``). Files may store the two values in *materialized*
columns, whose physical names the table configuration gives
(``delta.rowTracking.materializedRowIdColumnName`` / ``...RowCommitVersionColumnName``).

A rewrite moves rows to new files, so it writes both columns, filled from the values a row has now
(:func:`materialize`): a row keeps its id and commit version wherever it lands. Every new file of a
commit gets a fresh ``baseRowId`` above the high-water mark and the commit's version as
``defaultRowCommitVersion``, and the commit moves the mark past them (:func:`assign`): at each
attempt, since a concurrent writer may have moved it.

Example:
    >>> import pyarrow as pa
    >>> from deltaextras.core.actions import Add, DomainMetadata
    >>> cols = RowTrackingColumns("_rid", "_rcv")
    >>> raw = pa.table({"x": [7, 8], "_rid": pa.array([None, 3], pa.int64()), "_rcv": pa.nulls(2, pa.int64())})
    >>> t = materialize(raw, cols, 10, 2, 1)
    >>> t.column("_rid").to_pylist(), t.column("_rcv").to_pylist()
    ([11, 3], [2, 2])
    >>> actions, mark = assign([Add(path="a", stats='{"numRecords":4}')], 5, 20)
    >>> actions[0].base_row_id, actions[0].default_row_commit_version, mark, mark_of(actions[1])
    (21, 5, 24, 24)
    >>> high_water_mark({"delta.rowTracking": DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":9}')})
    9
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptDataError
from .actions import Action, Add, DomainMetadata, Metadata, Protocol

DOMAIN = "delta.rowTracking"
ROW_ID_KEY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
NO_MARK = -1  # the mark of a table that handed out no id yet
# commitInfo tag: every row copied or updated kept its id and commit version (rewrites write them)
PRESERVED_TAG = "delta.rowTracking.preserved"


@dataclasses.dataclass(frozen=True)
class RowTrackingColumns:
    """The physical names of the materialized row id and row commit version columns."""

    row_id: str
    commit_version: str

    @property
    def names(self) -> tuple[str, str]:
        return self.row_id, self.commit_version

    def fields(self) -> list[pa.Field]:
        """The two columns as Parquet fields (``long``, nullable)."""
        return [pa.field(self.row_id, pa.int64()), pa.field(self.commit_version, pa.int64())]


def supported(protocol: Protocol) -> bool:
    """Whether the table supports row tracking: new files must then get row ids."""
    return "rowTracking" in (protocol.writer_features or [])


def enabled(configuration: Mapping[str, str]) -> bool:
    """Whether the table enables row tracking (``delta.enableRowTracking``)."""
    return str(configuration.get("delta.enableRowTracking", "false")).lower() == "true"


def columns(protocol: Protocol, metadata: Metadata) -> RowTrackingColumns | None:
    """The materialized columns a rewrite must write, or None when the table does not track rows."""
    cfg = metadata.configuration or {}
    if not supported(protocol):
        return None
    row_id, version = cfg.get(ROW_ID_KEY), cfg.get(COMMIT_VERSION_KEY)
    if not row_id or not version:
        if enabled(cfg):
            raise CorruptDataError(
                "the table enables row tracking but names no materialized row id / commit version column "
                f"({ROW_ID_KEY}, {COMMIT_VERSION_KEY}); nothing was written"
            )
        return None
    return RowTrackingColumns(row_id, version)


def materialize(
    table: pa.Table,
    cols: RowTrackingColumns,
    base_row_id: int | None,
    default_commit_version: int | None,
    first_row: int,
) -> pa.Table:
    """Fill the materialized columns of rows read from one file: a stored value stays, a missing one
    is ``base_row_id`` + the row's physical position (``first_row`` is the position of the table's first
    row in the file) and ``default_commit_version``. Call before any row is filtered out."""
    positions = np.arange(first_row, first_row + table.num_rows, dtype=np.int64)
    return materialize_at(table, cols, base_row_id, default_commit_version, positions)


def materialize_at(
    table: pa.Table,
    cols: RowTrackingColumns,
    base_row_id: int | None,
    default_commit_version: int | None,
    positions: np.ndarray,
) -> pa.Table:
    """:func:`materialize` for rows at the given physical positions of their file (one per row)."""
    ids = table.column(cols.row_id).cast(pa.int64())
    if ids.null_count and base_row_id is not None:
        fresh = pa.array(positions.astype(np.int64) + int(base_row_id))
        ids = pc.coalesce(ids, fresh)
    versions = table.column(cols.commit_version).cast(pa.int64())
    if versions.null_count and default_commit_version is not None:
        versions = pc.fill_null(versions, pa.scalar(int(default_commit_version), pa.int64()))
    table = table.set_column(table.schema.get_field_index(cols.row_id), cols.row_id, ids)
    return table.set_column(table.schema.get_field_index(cols.commit_version), cols.commit_version, versions)


def high_water_mark(domains: Mapping[str, DomainMetadata]) -> int:
    """The highest row id handed out, from the ``delta.rowTracking`` domain (-1: none yet)."""
    found = domains.get(DOMAIN)
    return NO_MARK if found is None or found.removed else mark_of(found)


def mark_of(domain: DomainMetadata) -> int:
    """The ``rowIdHighWaterMark`` of one ``delta.rowTracking`` domain action."""
    try:
        return int(json.loads(domain.configuration)["rowIdHighWaterMark"])
    except (KeyError, TypeError, ValueError):
        raise CorruptDataError(f"the {DOMAIN} domain has no readable rowIdHighWaterMark; nothing was written") from None


def winner_mark(actions: Sequence[Action]) -> int | None:
    """The high-water mark a commit sets, or None when it sets none."""
    marks = [mark_of(a) for a in actions if isinstance(a, DomainMetadata) and a.domain == DOMAIN and not a.removed]
    return max(marks) if marks else None


def assign(actions: Sequence[Action], version: int, mark: int) -> tuple[list[Action], int]:
    """Give every new file (an ``add`` without ``baseRowId``) fresh row ids above ``mark`` and the commit's
    version as ``defaultRowCommitVersion``, and record the new mark in the commit's ``delta.rowTracking``
    domain; returns copies (the given actions stay as they are, for the next attempt) and the new mark.
    A file without ``numRecords`` in its statistics is refused."""
    own = winner_mark(actions)  # a commit may set the mark itself (a backfill of ids)
    start = mark = max(mark, NO_MARK if own is None else own)
    out: list[Action] = []
    for a in actions:
        if isinstance(a, Add) and a.base_row_id is None:
            records = a.stats_dict().get("numRecords")
            if not isinstance(records, int):
                raise CorruptDataError(f"new file {a.path} has no numRecords; a row-tracking table needs it")
            a = dataclasses.replace(a, base_row_id=mark + 1, default_row_commit_version=version, extra=dict(a.extra))
            mark += max(records, 0)
        out.append(a)
    if mark != start:  # ids were handed out: the commit records the new mark, once
        out = [a for a in out if not (isinstance(a, DomainMetadata) and a.domain == DOMAIN)]
        out.append(mark_action(mark))
    return out, mark


def mark_action(mark: int) -> DomainMetadata:
    """The ``delta.rowTracking`` domain action that records ``mark``."""
    body = json.dumps({"rowIdHighWaterMark": mark, "domainName": DOMAIN}, separators=(",", ":"))
    return DomainMetadata(domain=DOMAIN, configuration=body, removed=False)
