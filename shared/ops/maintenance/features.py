"""Which Delta table features a table uses, and how deltaextras handles each: what ``inspect`` reports.

Every feature the protocol names is listed, with the settings that matter (row tracking and in-commit
timestamps enabled or only supported, the columns whose type was widened, variant and collated columns),
as ``supported`` (kept intact by every rewrite, with how) or ``refused`` (nothing is written, with why).

Example:
    >>> from deltaextras.core.actions import Metadata, Protocol
    >>> schema = '{"type":"struct","fields":[{"name":"k","type":"long","nullable":true,' \\
    ...     '"metadata":{"delta.typeChanges":[{"toType":"long","fromType":"integer"}]}}]}'
    >>> uses = feature_uses(Protocol(3, 7, ["typeWidening"], ["typeWidening", "icebergCompatV2"]),
    ...                     Metadata(schema_string=schema))
    >>> [(u.name, u.handling) for u in uses]
    [('icebergCompatV2', 'refused'), ('typeWidening', 'supported')]
    >>> uses[1].detail
    'widened columns: k (integer -> long)'
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ...core import commit_timestamps, row_tracking
from ...core.actions import Metadata, Protocol
from ...core.protocol import READER_FEATURES, WRITER_FEATURES, refusal_reason

_HOW = {
    "rowTracking": "rewrites keep every row's id and commit version (materialized columns); new files get fresh "
    "baseRowIds above the high-water mark, which the same commit moves",
    "inCommitTimestamp": "each commit starts with a commitInfo whose inCommitTimestamp is after the previous "
    "commit's, stamped again on every retry",
    "typeWidening": "files holding an older type are read and cast to the column's current type; outputs carry "
    "the current type; the type-change metadata stays",
    "typeWidening-preview": "as typeWidening",
    "deletionVectors": "vectors are applied when reading, written by DELETE, purged by rorder",
    "columnMapping": "columns are read and written by their physical names",
    "v2Checkpoint": "read; checkpoints are left to the table's other writers",
    "clustering": "a table clustered by the row-group column first is rewritten in value-range units, rows inside "
    "a value ordered by the other clustering columns; outputs marked clustered (clusteringProvider) so Spark's "
    "OPTIMIZE leaves them; a first clustering column other than by: refused",
    "changeDataFeed": "DELETE and de-duplication write change data files",
    "domainMetadata": "domains are kept; the row tracking domain is advanced",
}


@dataclass(frozen=True)
class FeatureUse:
    """One feature of a table: its name, ``supported`` or ``refused``, how or why, and what the table sets."""

    name: str
    handling: str
    how: str
    detail: str = ""

    def line(self) -> str:
        """One line for people.

        Example:
            >>> FeatureUse("clustering", "refused", "it breaks the layout").line()
            'clustering: refused (it breaks the layout)'
        """
        tail = f"; {self.detail}" if self.detail else ""
        return f"{self.name}: {self.handling} ({self.how}{tail})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def feature_uses(protocol: Protocol, metadata: Metadata) -> list[FeatureUse]:
    """The features ``protocol`` names (sorted), each with deltaextras's handling."""
    names = sorted(set(protocol.reader_features or []) | set(protocol.writer_features or []))
    schema = _schema(metadata.schema_string)
    out = []
    for name in names:
        supported = name in READER_FEATURES or name in WRITER_FEATURES
        if name.startswith("variantType") and not any(_variant_columns(schema)):
            supported = True  # named by writers that never add a variant column: nothing to refuse
        how = _HOW.get(name, "nothing to keep for a rewrite") if supported else refusal_reason(name)
        out.append(FeatureUse(name, "supported" if supported else "refused", how, _detail(name, metadata, schema)))
    return out


def _detail(name: str, metadata: Metadata, schema: dict[str, Any]) -> str:
    cfg = metadata.configuration or {}
    if name == "rowTracking":
        state = "enabled" if row_tracking.enabled(cfg) else "supported, not enabled"
        return f"{state}; high-water mark in domain {row_tracking.DOMAIN}"
    if name == "inCommitTimestamp":
        return "enabled" if commit_timestamps.enabled(cfg) else "supported, not enabled"
    if name.startswith("typeWidening"):
        changes = [f"{c} ({a} -> {b})" for c, a, b in _type_changes(schema)]
        return f"widened columns: {', '.join(changes)}" if changes else "no column widened yet"
    if name.startswith("variantType"):
        return f"variant columns: {', '.join(_variant_columns(schema)) or 'none'}"
    return ""


def _schema(text: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _fields(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for f in schema.get("fields") or []:
        name = f"{prefix}{f.get('name')}"
        yield name, f
        if isinstance(f.get("type"), dict):
            yield from _fields(f["type"], name + ".")


def _type_changes(schema: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for name, f in _fields(schema):
        for change in (f.get("metadata") or {}).get("delta.typeChanges") or []:
            yield name, str(change.get("fromType")), str(change.get("toType"))


def _variant_columns(schema: dict[str, Any]) -> list[str]:
    return [name for name, f in _fields(schema) if f.get("type") == "variant"]
