"""Child process: one contender rewrites one table (or, for ``copy``, one partition's files).

Each contender imports only what it uses, so the parent's wall time and peak RSS cover the imports
too. Usage::

    python _run_contender.py copy FILE_LIST_JSON OUTPUT_PARQUET READER CODEC
    python _run_contender.py zorder TABLE_DIR COLUMN
    python _run_contender.py ours TABLE_DIR SORT_BY [WORKERS [UNIQUE_BY]]
    python _run_contender.py spawn TABLE_DIR SORT_BY WORKERS
    python _run_contender.py ours-budget TABLE_DIR SORT_BY MEMORY_BUDGET_BYTES   # prints Arrow's peak
"""

from __future__ import annotations

import json
import sys


def copy(file_list: str, output: str, reader: str = "dataset", codec: str = "snappy") -> None:
    """A plain copy: read every file of the partition with pyarrow, write one file.

    ``reader`` is ``concat`` (``pq.read_table`` per file, then ``pa.concat_tables``) or ``dataset``
    (``pyarrow.dataset``); ``codec`` is the write's compression (pyarrow's other defaults). A list of
    lists is several partitions, copied one after the other to ``output``, ``output.1``, ...
    """
    import pyarrow.parquet as pq

    with open(file_list) as handle:
        groups = json.load(handle)
    if groups and isinstance(groups[0], str):
        groups = [groups]
    for i, paths in enumerate(groups):
        if reader == "concat":
            import pyarrow as pa

            table = pa.concat_tables([pq.read_table(p) for p in paths])
        else:
            import pyarrow.dataset as ds

            table = ds.dataset(paths, format="parquet").to_table()
        pq.write_table(table, output if i == 0 else f"{output}.{i}", compression=codec)
        del table


def zorder(table_dir: str, column: str) -> None:
    """delta-rs Z-order on one column (with one column it is a sort on that column)."""
    from deltalake import DeltaTable

    DeltaTable(table_dir).optimize.z_order([column])


def ours(table_dir: str, sort_by: str, workers: str = "1", unique_by: str | None = None) -> None:
    """deltaextras ``rorder`` with ``workers`` worker threads (one by default: one partition)."""
    from deltaextras import rorder

    rorder(table_dir, sort_by=sort_by, unique_by=unique_by, max_workers=int(workers))


def _one_partition(message: dict) -> str:
    from deltaextras import rorder_single

    return rorder_single(message).status


def spawn(table_dir: str, sort_by: str, workers: str) -> None:
    """The process pool ``rorder`` used before its worker threads: one ``spawn`` process per worker,
    each loading the table and rewriting one partition per message (kept here to compare against)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from deltaextras import plan_messages

    messages = plan_messages(table_dir, sort_by=sort_by)
    with ProcessPoolExecutor(int(workers), mp_context=multiprocessing.get_context("spawn")) as pool:
        statuses = list(pool.map(_one_partition, messages))
    assert all(s == "committed" for s in statuses), statuses


def ours_budget(table_dir: str, sort_by: str, budget: str) -> None:
    """``rorder`` with a memory budget; prints the peak bytes Arrow's memory pool held, as JSON."""
    import pyarrow as pa

    from deltaextras import rorder

    report = rorder(table_dir, sort_by=sort_by, memory_budget=int(budget), max_workers=1)
    print(json.dumps({"arrow_peak_bytes": pa.default_memory_pool().max_memory(), "status": report[0].status}))


CONTENDERS = {"copy": copy, "zorder": zorder, "ours": ours, "spawn": spawn, "ours-budget": ours_budget}


def main(argv: list[str]) -> int:
    """Run the contender named by ``argv[0]`` with the remaining arguments."""
    CONTENDERS[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
