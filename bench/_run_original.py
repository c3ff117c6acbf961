"""Child process: the original deltaextras (PyPI ``deltaextra`` 0.0.3) rewrites one table.

Runs under ``bench/.venv-original`` (deltalake 0.20, pyarrow < 18), never under the project's
environment: both distributions install a package named ``deltaextras``.

Its ``rorder()`` hides worker exceptions and, on a local path, fails (``rorder_single`` splits the
path on ``://`` and keeps a list as the root), so this drives ``rorder_setup_multi`` and
``rorder_single`` directly and passes a ``file://`` URI. Unless ``--keep-sleep`` is given, the
5-second ``sleep`` it makes after writing each commit (before re-reading its log entry) is replaced
by a no-op: the wait is not work and would dominate a one-partition run.

Usage: ``python _run_original.py TABLE_DIR SORT_BY [--keep-sleep]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    """Rewrite every partition of the table at ``argv[0]``, sorted by ``argv[1]``."""
    table_dir = Path(argv[0]).resolve()
    sort_by = argv[1]
    keep_sleep = "--keep-sleep" in argv[2:]

    from deltalake import DeltaTable

    import deltaextras.rorder_setup as original

    if not keep_sleep:
        original.sleep = lambda _seconds: None  # type: ignore[attr-defined]

    dt = DeltaTable(str(table_dir))
    version, _path, partition_name, by_group = original.rorder_setup_multi(dt)
    for i in range(by_group.num_rows):
        paths = by_group["path_list"][i].as_py()
        sizes = by_group["size_bytes_list"][i].as_py()
        message: dict[str, Any] = {
            "version": version,
            "path": table_dir.as_uri(),
            "partition_name": partition_name,
            "partition_value": by_group["partition_values"][i].as_py(),
            "files": [[p, s] for p, s in zip(paths, sizes, strict=True)],
            "sort_by": sort_by,
            "unique_by": None,
        }
        original.rorder_single(message)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
