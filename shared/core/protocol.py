"""Which Delta protocol features a rewrite can honour, and the refusal of the others by name.

Example:
    >>> check_protocol(Protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), {})
    >>> check_protocol(Protocol(3, 7, ["typeWidening"], ["rowTracking", "inCommitTimestamp", "typeWidening"]), {})
    >>> check_protocol(Protocol(3, 7, [], ["clustering"]), {})  # clustered by the by column: value ranges
    >>> check_protocol(Protocol(3, 7, [], ["icebergCompatV2"]), {})
    Traceback (most recent call last):
    ...
    deltaextras.errors.UnsupportedFeatureError: the table uses Delta writer feature 'icebergCompatV2', ...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CorruptDataError, UnsupportedFeatureError
from .actions import DomainMetadata, Protocol

CLUSTERING_DOMAIN = "delta.clustering"

READER_FEATURES = {
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    # files may hold an older type of a column: read, they are cast to the current type (core.schema.conform)
    "typeWidening",
    "typeWidening-preview",
}
WRITER_FEATURES = READER_FEATURES | {
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "identityColumns",
    "domainMetadata",
    "allowColumnDefaults",
    # rewrites keep row ids and commit versions; new files get ids above the high-water mark (core.row_tracking)
    "rowTracking",
    # commits carry a monotonic in-commit timestamp (core.commit_timestamps)
    "inCommitTimestamp",
    # clustered by the row-group column: value-range units, outputs marked as ours (ops.value_ranges)
    "clustering",
}
_WHY = {
    "liquid": "the rewrite would break the liquid clustering layout",
    "coordinatedCommits-preview": "commits must go through the table's commit coordinator",
    "catalogOwned-preview": "commits must go through the owning catalog",
    "catalogManaged": "commits must go through the owning catalog",
    "variantType": "pyarrow writes a variant column back without its Parquet VARIANT annotation",
    "variantType-preview": "pyarrow writes a variant column back without its Parquet VARIANT annotation",
    "variantShredding-preview": "pyarrow writes a variant column back without its Parquet VARIANT annotation",
    "icebergCompatV1": "Iceberg metadata would have to be maintained",
    "icebergCompatV2": "Iceberg metadata would have to be maintained",
    "collations-preview": "statistics of collated strings must follow the collation; deltaextras writes binary order",
    "collations": "statistics of collated strings must follow the collation; deltaextras writes binary order",
}


_VARIANT_FEATURES = {"variantType", "variantType-preview", "variantShredding-preview"}


def check_protocol(protocol: Protocol, configuration: dict[str, str], schema_string: str | None = None) -> None:
    """Raise :class:`UnsupportedFeatureError` naming the first feature a rewrite cannot honour.

    The variant features are accepted while no column is a variant (deltalake names them on every
    table it creates with deletion vectors); a variant column is refused by the schema.
    """
    reader = int(protocol.min_reader_version)
    writer = int(protocol.min_writer_version)
    if reader > 3 or writer > 7:
        raise UnsupportedFeatureError(
            f"the table needs reader version {reader} / writer version {writer}; deltaextras supports up to 3 / 7"
        )
    for kind, names, known in (
        ("reader", protocol.reader_features or [], READER_FEATURES),
        ("writer", protocol.writer_features or [], WRITER_FEATURES),
    ):
        for name in names:
            if name in _VARIANT_FEATURES and schema_string is not None and '"variant"' not in schema_string:
                continue
            if name not in known:
                why = refusal_reason(name)
                raise UnsupportedFeatureError(
                    f"the table uses Delta {kind} feature {name!r}, which deltaextras cannot honour ({why}); "
                    "nothing was written. Compact this table with an engine that supports the feature"
                )
    if str(configuration.get("delta.enableRowTracking", "false")).lower() == "true" and not protocol.has_feature(
        "rowTracking"
    ):
        raise UnsupportedFeatureError(
            "the table enables row tracking (delta.enableRowTracking) without the rowTracking feature; "
            "nothing was written"
        )
    if str(configuration.get("delta.enableInCommitTimestamps", "false")).lower() == "true" and not protocol.has_feature(
        "inCommitTimestamp"
    ):
        raise UnsupportedFeatureError(
            "the table enables in-commit timestamps (delta.enableInCommitTimestamps) without the inCommitTimestamp "
            "feature; nothing was written"
        )


def refusal_reason(name: str) -> str:
    """Why a rewrite refuses a feature it does not support.

    Example:
        >>> refusal_reason("icebergCompatV2")
        'Iceberg metadata would have to be maintained'
    """
    return _WHY.get(name, "deltaextras does not implement it")


def has_feature(protocol: Protocol, name: str) -> bool:
    """Whether a table feature is named in the protocol (reader or writer list)."""
    return protocol.has_feature(name)


def clustering_columns(protocol: Protocol, domains: Mapping[str, DomainMetadata]) -> list[list[str]] | None:
    """The clustering columns of a clustered table (physical names, each a path of field names), from the
    ``delta.clustering`` domain; None when the table is not clustered (no ``clustering`` feature).

    Example:
        >>> dm = DomainMetadata("delta.clustering", '{"clusteringColumns": [["node_id"]]}')
        >>> clustering_columns(Protocol(1, 7, None, ["clustering"]), {"delta.clustering": dm})
        [['node_id']]
        >>> clustering_columns(Protocol(1, 7, None, ["domainMetadata"]), {}) is None
        True
    """
    if not protocol.has_feature("clustering"):
        return None
    domain = domains.get(CLUSTERING_DOMAIN)
    if domain is None or domain.removed or not domain.configuration:
        return []
    try:
        columns = json.loads(domain.configuration).get("clusteringColumns") or []
    except (ValueError, AttributeError):
        raise CorruptDataError(f"the {CLUSTERING_DOMAIN} domain metadata is not a JSON object") from None
    if not isinstance(columns, list) or not all(
        isinstance(c, list) and c and all(isinstance(p, str) for p in c) for c in columns
    ):
        raise CorruptDataError(f"the {CLUSTERING_DOMAIN} domain metadata holds malformed clusteringColumns")
    return [list(c) for c in columns]


@dataclass(frozen=True)
class Clustering:
    """How a clustered table is clustered, as ``rorder`` maintains it: ``columns`` (physical names) begin
    with the row-group column; the others order the rows inside each value, before ``sort_by``."""

    columns: tuple[str, ...]

    @property
    def others(self) -> tuple[str, ...]:
        """The clustering columns after the row-group column."""
        return self.columns[1:]


def check_clustering(
    protocol: Protocol, domains: Mapping[str, DomainMetadata], by: str, by_physical: str
) -> Clustering | None:
    """How the table is clustered (None: it is not clustered); a table whose first clustering column is not
    ``by``, or that is clustered by a nested field, is refused by name, nothing written.

    Example:
        >>> dm = DomainMetadata("delta.clustering", '{"clusteringColumns": [["node_id"], ["utc_time"]]}')
        >>> check_clustering(Protocol(1, 7, None, ["clustering"]), {"delta.clustering": dm}, "node_id", "node_id")
        Clustering(columns=('node_id', 'utc_time'))
        >>> dm = DomainMetadata("delta.clustering", '{"clusteringColumns": [["site"], ["node_id"]]}')
        >>> check_clustering(Protocol(1, 7, None, ["clustering"]), {"delta.clustering": dm}, "node_id", "node_id")
        Traceback (most recent call last):
        ...
        deltaextras.errors.UnsupportedFeatureError: the table is clustered by (site, node_id), ...
    """
    columns = clustering_columns(protocol, domains)
    if not columns:
        return None
    names = ", ".join(".".join(c) for c in columns)
    if columns[0] != [by_physical]:
        raise UnsupportedFeatureError(
            f"the table is clustered by ({names}), which deltaextras cannot honour (a row group per {by!r} value "
            f"would break that clustering layout); nothing was written. rorder rewrites a clustered table whose "
            "first clustering column is the by column: cluster by it first (ALTER TABLE ... CLUSTER BY "
            f"({by}, ...)) or pass the first clustering column as by"
        )
    nested = [".".join(c) for c in columns if len(c) != 1]
    if nested:
        raise UnsupportedFeatureError(
            f"the table is clustered by ({names}), and {', '.join(nested)} is a nested field, which deltaextras "
            "does not order by; nothing was written. Cluster by top-level columns"
        )
    return Clustering(tuple(c[0] for c in columns))
