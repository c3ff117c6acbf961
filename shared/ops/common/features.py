"""Table features a writer checks before it writes with them.

Example:
    >>> import tempfile, pyarrow as pa
    >>> from deltalake import write_deltalake
    >>> from deltaextras.core.storage import TableStorage
    >>> from deltaextras.ops.common.table import load_snapshot
    >>> path = tempfile.mkdtemp()
    >>> write_deltalake(path, pa.table({"k": [1]}), configuration={"delta.enableDeletionVectors": "true"})
    >>> deletion_vectors_enabled(load_snapshot(TableStorage(path)))
    True
"""

from __future__ import annotations

from ...core.snapshot import TableSnapshot


def deletion_vectors_enabled(snapshot: TableSnapshot) -> bool:
    """Whether a writer may add deletion vectors: feature in the protocol and the table property true."""
    return (
        snapshot.protocol.has_feature("deletionVectors")
        and str(snapshot.configuration.get("delta.enableDeletionVectors", "false")).lower() == "true"
    )
