"""What one ``delete`` did: :class:`DeleteReport`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class DeleteReport:
    """What one ``delete`` did.

    ``commit_version`` is None when no row matched (nothing is committed then). ``commit_attempts``
    counts puts of the log entry, ``conflicts_resolved`` the winning commits that touched our files and
    were merged (``dv_unions`` files whose vector was re-read and unioned, ``files_replanned`` files
    scanned again because a winner replaced ours), ``restarts`` full re-runs after a metadata change,
    ``commit_outcome`` how the commit ended (:class:`~deltaextras.core.commit_result.CommitOutcome`).
    """

    table: str
    predicate: str
    mode: str = ""
    read_version: int | None = None
    commit_version: int | None = None
    rows_deleted: int = 0
    files_considered: int = 0
    files_skipped: int = 0
    files_scanned: int = 0
    row_groups_scanned: int = 0
    row_groups_skipped: int = 0
    files_removed: int = 0
    files_rewritten: int = 0
    rows_copied: int = 0
    deletion_vectors_added: int = 0
    deletion_vectors_updated: int = 0
    inline_vectors: int = 0
    vector_files_written: int = 0
    bytes_added: int = 0
    commit_attempts: int = 0
    conflicts_resolved: int = 0
    dv_unions: int = 0
    files_replanned: int = 0
    restarts: int = 0
    scan_seconds: float = 0.0
    seconds: float = 0.0
    conflicts: list[str] = field(default_factory=list)
    commit_outcome: str = "nothing_to_do"  # a CommitOutcome value: committed | nothing_to_do

    def line(self) -> str:
        """One human line.

        Example:
            >>> DeleteReport("/t", "x = 1", rows_deleted=0).line()
            '/t: no row matches x = 1'
        """
        if self.commit_version is None:
            return f"{self.table}: no row matches {self.predicate}"
        retries = f", {self.commit_attempts - 1} lost race(s)" if self.commit_attempts > 1 else ""
        merged = f", {self.conflicts_resolved} concurrent commit(s) merged" if self.conflicts_resolved else ""
        return (
            f"{self.table}: v{self.commit_version} deleted {self.rows_deleted} row(s) ({self.mode}) — "
            f"{self.deletion_vectors_added + self.deletion_vectors_updated} vector(s), {self.files_removed} file(s) "
            f"removed, {self.files_rewritten} rewritten; scanned {self.files_scanned} of {self.files_considered} "
            f"file(s){retries}{merged}, {self.seconds:.2f}s"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)
