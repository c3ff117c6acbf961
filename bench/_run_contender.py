"""Child process: one contender rewrites one table (or, for ``copy``, one partition's files).

Each contender imports only what it uses, so the parent's wall time and peak RSS cover the imports
too. Usage::

    python _run_contender.py copy FILE_LIST_JSON OUTPUT_PARQUET READER CODEC
    python _run_contender.py zorder TABLE_DIR COLUMN
    python _run_contender.py ours TABLE_DIR SORT_BY [UNIQUE_BY]
    python _run_contender.py ours-budget TABLE_DIR SORT_BY MEMORY_BUDGET_BYTES   # prints Arrow's peak
"""

from __future__ import annotations

import json
import sys


def copy(file_list: str, output: str, reader: str = "dataset", codec: str = "snappy") -> None:
    """A plain copy: read every file of the partition with pyarrow, write one file.

    ``reader`` is ``concat`` (``pq.read_table`` per file, then ``pa.concat_tables``) or ``dataset``
    (``pyarrow.dataset``); ``codec`` is the write's compression (pyarrow's other defaults).
    """
    import pyarrow.parquet as pq

    with open(file_list) as handle:
        paths = json.load(handle)
    if reader == "concat":
        import pyarrow as pa

        table = pa.concat_tables([pq.read_table(p) for p in paths])
    else:
        import pyarrow.dataset as ds

        table = ds.dataset(paths, format="parquet").to_table()
    pq.write_table(table, output, compression=codec)


def zorder(table_dir: str, column: str) -> None:
    """delta-rs Z-order on one column (with one column it is a sort on that column)."""
    from deltalake import DeltaTable

    DeltaTable(table_dir).optimize.z_order([column])


def ours(table_dir: str, sort_by: str, unique_by: str | None = None) -> None:
    """deltaextras ``rorder`` with one worker (the workload has one partition)."""
    from deltaextras import rorder

    rorder(table_dir, sort_by=sort_by, unique_by=unique_by, max_workers=1)


def ours_budget(table_dir: str, sort_by: str, budget: str) -> None:
    """``rorder`` with a memory budget; prints the peak bytes Arrow's memory pool held, as JSON."""
    import pyarrow as pa

    from deltaextras import rorder

    report = rorder(table_dir, sort_by=sort_by, memory_budget=int(budget), max_workers=1)
    print(json.dumps({"arrow_peak_bytes": pa.default_memory_pool().max_memory(), "status": report[0].status}))


CONTENDERS = {"copy": copy, "zorder": zorder, "ours": ours, "ours-budget": ours_budget}


def main(argv: list[str]) -> int:
    """Run the contender named by ``argv[0]`` with the remaining arguments."""
    CONTENDERS[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
