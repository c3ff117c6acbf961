"""Checks of command-line input made before any work starts, each failing with one line that names the
flag: the demo's sizes, the row-group column of ``run``/``plan``, where a picture can be written, and
the function app folder of ``local-run``.

Example:
    >>> at_least_one("--batches", 48)
    48
    >>> at_least_one("--batches", 0)
    Traceback (most recent call last):
    ...
    deltaextras.errors.InvalidArgumentError: --batches must be at least 1, got 0
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import InvalidArgumentError
from ..ops.rorder.options import parse_size

__all__ = ["at_least_one", "by_is_a_data_column", "flag_names", "function_app_root", "writable_target"]


def at_least_one(flag: str, value: int) -> int:
    """``value`` when it is 1 or more; otherwise :class:`InvalidArgumentError` naming ``flag``."""
    if value < 1:
        raise InvalidArgumentError(f"{flag} must be at least 1, got {value}")
    return value


def by_is_a_data_column(table: str, by: str | None, storage_options: Mapping[str, str] | None) -> None:
    """Refuse ``--by`` naming a partition column, from the table's metadata alone (no file is listed):
    every row of a partition holds the same value of it, so it cannot order row groups.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp()
        >>> write_deltalake(path, pa.table({"k": [1], "k_range": [0]}), partition_by=["k_range"])
        >>> by_is_a_data_column(path, "k", None)
        >>> by_is_a_data_column(path, "k_range", None)
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: --by k_range is a partition column ... e.g. --by k
    """
    if not by:
        return
    from ..core.partition_snapshot import read_head
    from ..core.storage import TableStorage
    from ..ops.common.table import table_args

    uri, options = table_args(table, storage_options)
    head = read_head(TableStorage(uri, options))
    parts = head.partition_columns
    if by in parts:
        data = [c.name for c in head.schema.data_columns]
        hint = f", e.g. --by {data[0]}" if data else ""
        raise InvalidArgumentError(
            f"--by {by} is a partition column of the table (partition columns: {', '.join(parts)}); "
            f"name a data column{hint}"
        )


def writable_target(path: str) -> str:
    """``path`` when its folder exists; otherwise :class:`InvalidArgumentError` before any work.

    Example:
        >>> writable_target("/no/such/folder/layout.png")
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: cannot write /no/such/folder/layout.png: folder ... does not exist
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InvalidArgumentError(f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise InvalidArgumentError(f"cannot write {path}: folder {folder} is not writable")
    return path


def function_app_root(app_root: str | os.PathLike[str]) -> Path:
    """The function app folder (``host.json``, ``orchestrator/``, ``worker/``), or one line saying where to run.

    Example:
        >>> function_app_root("/")
        Traceback (most recent call last):
        ...
        deltaextras.errors.InvalidArgumentError: / holds no function app (no host.json): run local-run from the ...
    """
    root = Path(app_root)
    if not (root / "host.json").is_file():
        raise InvalidArgumentError(
            f"{root.resolve()} holds no function app (no host.json): run local-run from the repository root, or pass "
            "--app-root with the folder that holds host.json, orchestrator/ and worker/"
        )
    return root


def flag_names(text: str, names: Mapping[str, str]) -> str:
    """A library message in the words of the command line: keyword arguments (``by=``) as their flags.

    Example:
        >>> flag_names("the table is not partitioned; pass by= to name the row-group column", {"by=": "--column"})
        'the table is not partitioned; pass --column to name the row-group column'
    """
    for keyword, flag in names.items():
        text = text.replace(keyword, flag)
    return text


def size(text: str) -> int:
    """An argparse type: a size in bytes, with an optional unit (``10MB``, ``128MiB``, ``4096``).

    Example:
        >>> size("128MiB")
        134217728
    """
    try:
        return parse_size(text, "the size")
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("the size must be ", "expected ")) from None
